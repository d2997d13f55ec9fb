"""``bench.py gpu``'s flags and ``--cpu-tiny``, what it stands for (no JAX imported here:
``bench.py`` parses its flags before it sets XLA's GPU flags)."""

from __future__ import annotations

import argparse
import shlex

#: The row groups of ``benchmarks.gpu.run``, in the order they run.
ROWS = ("reference", "study", "per-point", "rollouts", "algorithms", "waves")
_TINY_STUDY = (
    "configs/reacher_n10.yaml --seeds 2 --set env.name=point_mass --set env.horizon=10 "
    "--set eval.episodes=2 "
)
#: What ``gpu --cpu-tiny`` stands for (flags after it override it): every row on the CPU at
#: tiny sizes, the studies on point_mass with two points each, one padding M, one padding n
#: (``scripts/gpu/run.sh --cpu-tiny``, the tests).
TINY = (
    "--allow-cpu", "--env", "point_mass", "--horizon", "10", "--batches", "8", "--n", "4",
    "--large-n", "8", "--M", "4", "--seeds", "2", "--rounds", "1", "--async-block", "4",
    "--reference-batch", "8",
    "--study", _TINY_STUDY + "--set cluster.n=3 --over hparams.M=2,3 --set hparams.M_init=null "
    "--set algorithms=[rennala_nigt]",
    "--study", _TINY_STUDY + "--over cluster.n=2,3 --set algorithms=[sync_nigt]",
)  # fmt: skip


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``gpu`` subcommand's flags."""
    p.add_argument("--env", default="humanoid")
    p.add_argument("--horizon", type=int, default=None)
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--large-n", type=int, default=1000, help="the second n (default 1000)")
    p.add_argument("--batches", default="1024,4096,16384", help='rollout batch sizes ("": none)')
    p.add_argument("--M", type=int, default=50)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--async-block", type=int, default=10)
    p.add_argument("--deadline", type=float, default=540.0)
    p.add_argument("--allow-cpu", action="store_true")
    p.add_argument(
        "--study",
        action="append",
        metavar="SWEEP_ARGS",
        help="the `jaxnigt sweep` arguments of a study (repeatable; default: reacher, n "
        "10,30,100 x 5 seeds, Rennala NIGT over M 20,30,50, Sync NIGT over 3 step sizes)",
    )
    p.add_argument(
        "--reference-batch", type=int, default=4096, help="the studies' rollout reference"
    )
    p.add_argument(
        "--rows",
        default=",".join(ROWS),
        help=f"the row groups to run, always in this order (default {','.join(ROWS)})",
    )
    p.add_argument(
        "--cpu-tiny",
        action="store_true",
        help="the same rows at tiny sizes on the CPU: " + shlex.join(TINY),
    )


def expand_tiny(argv: list[str]) -> list[str]:
    """``argv`` with ``gpu``'s ``--cpu-tiny`` replaced by :data:`TINY`."""
    if "gpu" not in argv or "--cpu-tiny" not in argv[argv.index("gpu") :]:
        return argv
    i = argv.index("--cpu-tiny", argv.index("gpu"))
    return [*argv[:i], *TINY, *argv[i + 1 :]]
