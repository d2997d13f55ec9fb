"""Which installed distributions jaxnigt's runs import, and where each one comes from.

Imports what `jaxnigt run` and the GPU benchmark load (the CLI, the runner, the MJX envs
through brax with one env built, the actor-critic code's rlax, orbax checkpoints, plots, the
benchmark modules), then maps every loaded module's file to the distribution whose RECORD
lists it. Prints one line per distribution: name, version and ``carried`` (installed from the
wheels into ``--carried DIR``) or ``site`` (the interpreter's own packages).

``--node-list FILE`` names the distributions the offline GPU node provides (one a line, ``#``
comments); a ``site`` distribution missing from it is reported, and with ``--strict`` it is an
error (exit status 1): in a test of the offline path (scripts/test_site_jax.sh) it means the
stand-in site holds something the node lacks, so the test would hide a missing wheel.

Usage::

    python scripts/gpu/imports.py [--carried DIR] [--node-list FILE] [--strict]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.machinery
import importlib.metadata as md
import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


#: What a run and the GPU benchmark import, lazy imports included (the runner's progress bar,
#: plots, orbax checkpoints, the actor-critic family's rlax).
RUN_MODULES = (
    "jaxnigt.cli",
    "jaxnigt.run.loop",
    "jaxnigt.run.experiment",
    "jaxnigt.run.trainer",
    "jaxnigt.run.checkpoint",
    "jaxnigt.rl.critic",
    "jaxnigt.run.plots",
    "jaxnigt.envs",
    "orbax.checkpoint",
    "rlax",
    "matplotlib.pyplot",
    "tqdm.auto",
    "yaml",
    "benchmarks.gpu",
    "benchmarks.scaling",
    "paper.cli",
)
SCRIPT_PACKAGES = ("benchmarks", "paper")  # of scripts/


def _script_package(name: str) -> None:
    """Imports the package ``name`` of scripts/ (``benchmarks``, ``paper``) from its folder, so
    that its modules import as they do under ``python scripts/...`` (scripts/ stays off the
    path)."""
    if name in sys.modules:
        return
    spec = importlib.machinery.PathFinder.find_spec(name, [str(ROOT / "scripts")])
    sys.modules[name] = module = importlib.util.module_from_spec(spec)
    if spec.loader is not None:  # None: a folder without __init__.py (a namespace package)
        spec.loader.exec_module(module)


def load_run_modules() -> None:
    """Imports :data:`RUN_MODULES` and builds one MJX env (mjcf parsing, ``mjx.put_model``)."""
    for name in RUN_MODULES:
        if name.split(".")[0] in SCRIPT_PACKAGES:
            _script_package(name.split(".")[0])
        importlib.import_module(name)
    from jaxnigt.envs import make_env

    make_env("reacher", horizon=2)


def owners() -> dict[str, md.Distribution]:
    """Resolved file path -> the distribution whose RECORD lists it."""
    out = {}
    for dist in md.distributions():
        for f in dist.files or ():
            if f.suffix in (".py", ".so", ".pyc"):
                out[os.path.realpath(dist.locate_file(f))] = dist
    return out


def loaded_distributions() -> dict[str, tuple[str, str]]:
    """Distribution name -> (version, directory it is installed in), for every loaded module."""
    files = owners()
    found = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path:
            continue
        dist = files.get(os.path.realpath(path))
        if dist is not None:
            name = dist.metadata["Name"]
            found[name] = (dist.version, os.path.realpath(dist.locate_file("")))
    return found


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--carried", default=None, help="where the carried wheels are installed")
    parser.add_argument("--node-list", default=None, help="distributions the node provides")
    parser.add_argument("--strict", action="store_true", help="fail on a site one not listed")
    args = parser.parse_args(argv)
    load_run_modules()
    carried = os.path.realpath(args.carried) if args.carried else None
    listed = set()
    if args.node_list:
        for line in Path(args.node_list).read_text().splitlines():
            if line.split("#")[0].strip():
                listed.add(_norm(line.split("#")[0].strip()))
    unlisted = []
    dists = loaded_distributions()
    for name in sorted(dists, key=str.lower):
        version, where = dists[name]
        if _norm(name) == "jaxnigt" or where == str(ROOT):
            continue  # the checkout itself (an editable install or PYTHONPATH)
        source = "carried" if carried and where == carried else "site"
        note = ""
        if source == "site" and args.node_list and _norm(name) not in listed:
            unlisted.append(name)
            note = "  <- not in the node list"
        print(f"{name:24s} {version:24s} {source}{note}")
    n_carried = sum(1 for _, w in dists.values() if carried and w == carried)
    print(f"{len(dists)} distributions imported, {n_carried} of them carried")
    if unlisted:
        print(f"imported from the site but not on {args.node_list}: {', '.join(unlisted)}")
        return 1 if args.strict else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
