"""``python scripts/paper COMMAND ...`` (:mod:`paper.cli`).

Run as a folder, this file's package is not importable by name (Python puts ``scripts/paper``
itself first on the path, not ``scripts``), so it loads the package ``paper`` from its own
folder; ``python -m paper`` with ``scripts`` on ``PYTHONPATH`` has imported it already.
"""

import importlib.util
import sys
from pathlib import Path

if "paper" not in sys.modules:
    _here = Path(__file__).resolve().parent
    _spec = importlib.util.spec_from_file_location(
        "paper", _here / "__init__.py", submodule_search_locations=[str(_here)]
    )
    sys.modules["paper"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["paper"])

from paper.cli import main  # the package loaded above

sys.exit(main())
