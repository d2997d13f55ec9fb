"""``python scripts/paper COMMAND ...`` (:mod:`paper.cli`)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # scripts/: ``import paper``

from paper.cli import main

sys.exit(main())
