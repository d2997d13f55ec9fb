"""The README's and the docs' Python snippets run as written."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
PAGES = [
    README,
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs" / "howto").glob("*.md")),
]


def test_readme_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python block"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_python_blocks_run(page):
    for code in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S):
        exec(compile(code, str(page), "exec"), {})


# --- the `jaxnigt ...` commands of the pages: they parse, and the configs they name exist ---

#: Files a page's commands read that an earlier step of the same page writes (README: the
#: config it shows; sweeps_and_tuning.md: the tuning's tuned.yaml).
WRITTEN = {"my_first.yaml", "runs/t/tuned.yaml"}
#: Commands a page shows failing, and how the one line they print begins.
FAILING = {"jaxnigt run demo --set hparams.impala_batch=4": "hparams.impala_batch: set to 4, but"}
#: A word that stands for what the reader fills in: CONFIG, DIR, RUN_DIR, N, HEAD:PORT, $C.
PLACEHOLDER = re.compile(r"^(\$.*|.*\.\.\..*|[A-Z][A-Z0-9_]*(:[A-Z0-9_]+)?)$")


def _commands(text: str) -> list[str]:
    """Every ``jaxnigt ...`` command of a page: a line of a fenced block (continuation lines
    joined, ``.venv/bin/`` and comments dropped) or an inline code span (line breaks in it
    are spaces)."""
    fence = re.compile(r"^```[^\n]*\n(.*?)^```", flags=re.S | re.M)
    found = []
    for block in fence.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip().removeprefix("$ ").removeprefix(".venv/bin/")
            if line.startswith("jaxnigt "):
                found.append(line.split("  #")[0].split(" # ")[0].strip())
    for span in re.findall(r"`([^`]+)`", fence.sub("", text)):
        span = " ".join(span.split()).removeprefix(".venv/bin/")
        if span.startswith("jaxnigt "):
            found.append(span)
    return found


def _options(parser) -> dict[str, set[str]]:
    from jaxnigt.cli import reference

    return {name: {s for a in sub._actions for s in a.option_strings}
            for name, sub in reference._subcommands(parser).items()}  # fmt: skip


def _parse(parser, words: list[str]):
    """The namespace of ``words``, or the one line argparse would print (clock's parser
    prints it itself and exits)."""
    import contextlib
    import io

    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            return parser.parse_args(words)
    except SystemExit:
        return said.getvalue().strip().splitlines()[-1]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_jaxnigt_command_of_a_page_runs_as_written(page, capsys):
    """Each command names a command and flags that exist; one without placeholders parses as
    written; the config it names is a file here, one an earlier step writes, or a bundled
    config that ``jaxnigt list`` shows (``jaxnigt plan cpu/point_mass_n100`` was none)."""
    import contextlib
    import shlex

    from jaxnigt import cli
    from jaxnigt import config as config_lib
    from jaxnigt.cli import common
    from jaxnigt.config import bundled

    assert cli.main(["list"]) == 0
    listed = capsys.readouterr().out
    parser = cli.build_parser()
    options = _options(parser)
    for command in _commands(page.read_text()):
        plugins, words = cli.take_plugins(shlex.split(command)[1:])
        shown = [m for m in plugins if m.endswith(".py") and not m.startswith("path/to/")]
        assert all((ROOT / m).is_file() for m in shown), (page.name, command)  # a real file
        if words[0] == "sweep/tune":  # prose: both commands
            words[0] = "sweep"
        assert words[0] in options or words[0].startswith("--"), (page.name, command)
        sub = words[0]
        flags = {w.strip("[]").split("=")[0] for w in words[1:] if w.strip("[").startswith("--")}
        allowed = options.get(sub, {"--version", "--help"})
        assert flags <= allowed | {"--help"}, (page.name, command, flags - allowed)
        if sub.startswith("--") or any(PLACEHOLDER.match(w.strip("[]")) or "[" in w
                                       for w in words[1:]):  # fmt: skip
            continue  # `jaxnigt --version`, or a synopsis: its flags exist, checked above
        args = _parse(parser, words)
        if isinstance(args, str):
            # a command named in prose without its arguments (`jaxnigt sweep --resume`)
            assert "arguments are required" in args, (page.name, command, args)
            continue
        config = getattr(args, "config", None)
        if config is None:
            continue
        if config in WRITTEN:
            continue
        found = bundled.find(config)
        assert (ROOT / config).is_file() or found is not None, (page.name, command)
        if not (ROOT / config).is_file():
            assert found.name in listed, (page.name, command, found.name)
        path = str(ROOT / config) if (ROOT / config).is_file() else config
        with contextlib.ExitStack() as stack:  # the config and its --set items load
            try:
                config_lib.load(
                    common.resolve_config(path, stack), getattr(args, "set", None) or []
                )
            except config_lib.ConfigError as e:
                assert str(e).startswith(FAILING.get(command, "(runs)")), (page.name, command, e)
            else:
                assert command not in FAILING, (page.name, command, "runs")
