"""``python tests/child_cli.py ARGS``: the ``jaxnigt`` command in a child process of a test,
with the test-only environments of ``tasks.py`` registered (not a test module itself)."""

import sys

import tasks

from jaxnigt import cli

if __name__ == "__main__":
    tasks.register_test_envs()
    sys.exit(cli.main(sys.argv[1:]))
