"""scripts/paper/cli.py: the paper's commands; a stage stopped by a signal says how to go on
and exits with the signal's status (what each command does: the other test_paper_* files)."""

import signal

from paper import cli

from jaxnigt.run import signals


def test_a_stage_stopped_by_a_signal_says_how_to_continue(monkeypatch, capsys):
    def stopped(argv):
        raise signals.Interrupted(signal.SIGTERM, "the running programs", 3)

    monkeypatch.setitem(cli.COMMANDS, "third", stopped)
    assert cli.main(["third", "all", "reacher_hetero", "--jobs", "2"]) == 128 + signal.SIGTERM
    err = capsys.readouterr().err
    assert "SIGTERM received: the running programs stopped after chunk 3" in err
    assert "continue with: python scripts/paper third all reacher_hetero --jobs 2" in err


def test_no_command_prints_the_commands_and_fails(capsys):
    assert cli.main([]) == 2
    assert "python scripts/paper third" in capsys.readouterr().err
    assert cli.main(["--help"]) == 0
