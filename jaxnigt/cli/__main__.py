"""``python -m jaxnigt.cli``: the ``jaxnigt`` command."""

import sys

from jaxnigt.cli import main

if __name__ == "__main__":
    sys.exit(main())
