"""Shared pytest setup: a persistent compilation cache so repeated shapes compile once."""

import importlib.metadata
import os
import pathlib

# Test processes run side by side (pytest-xdist); on a GPU none may take most of its memory.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# Compilation, not execution, is what the suite spends its time on (XLA's backend compile was
# 53 % of the in-process test time on a cold cache). The tests check behaviour, never speed,
# so they compile for a short compile: XLA's backend at -O0 (~2x faster than the default) and
# the CPU backend's classic elemental emitters instead of its MLIR fusion emitters (another
# ~2.6x: a point_mass engine program 4.4 s -> 1.6 s, impala's 7.1 s -> 2.9 s, running as
# fast; `scripts/bench.py` and every run keep XLA's defaults). Subprocesses inherit them
# through the environment. XLA aborts on a flag it does not know, and jaxlib 0.11.2 and
# 0.12 no longer know the emitter flag (checked on both), so it is set before 0.11 only.
_FLAGS = ["--xla_backend_optimization_level=0"]
if tuple(int(x) for x in importlib.metadata.version("jaxlib").split(".")[:2]) < (0, 11):
    _FLAGS.append("--xla_cpu_use_fusion_emitters=false")
for _flag in _FLAGS:
    if _flag.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_flag}".strip()

import jax  # noqa: E402  (after the environment above)

_CACHE = pathlib.Path(
    os.environ.get("JAXNIGT_TEST_CACHE", pathlib.Path(__file__).parent.parent / ".jax_cache")
)
jax.config.update("jax_compilation_cache_dir", str(_CACHE))
os.environ.setdefault("JAXNIGT_TEST_CACHE", str(_CACHE))  # subprocesses share the cache
# ... and so do children that no test hands children.child_env(): the local pool's `spawn`
# processes (`--jobs 2`), Ray's workers, `python -m jaxnigt.cli` started with os.environ.
# JAX reads these when it is imported there; without them a tuning's jobs=2 children compiled
# again what its jobs=1 run had just compiled (test_tuning.py, cold cache: 20.2 s -> 17.0 s).
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(_CACHE))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
# Every program, however small: the CLI tests' children compile the same small programs
# (init, evaluation, checkpoint glue) again and again; loading them is cheaper (test_cli.py:
# ~12 % less CPU than caching only programs that compile in 0.5 s or more).
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)

# The test-only environments of tests/tasks.py (`timed_point_mass`, `nan_point_mass`) are
# valid `env.name`s in every test process; child processes start through tests/child_cli.py.
import tasks  # noqa: E402

tasks.register_test_envs()

# Heaviest test files first. pytest-xdist's `--dist loadfile` hands files to the two workers
# in collection order; when a heavy file comes last, one worker runs it alone while the other
# idles (in alphabetical order, the last 30 of 462 tests took about 3 of 12 minutes on a cold
# cache). Weights: cold-cache seconds of each file on a 2-core CPU (measured 2026-12-02 with
# pytest's --junitxml); files not listed keep their order after them.
_HEAVY = {
    "test_algorithms.py": 165, "test_cli.py": 125, "test_schedules.py": 95, "test_trainer.py": 85,
    "test_sweep.py": 80, "test_plan.py": 80, "test_parallel.py": 60, "test_rollout.py": 55,
    "test_async_engine.py": 45, "test_estimator.py": 40, "test_impala_engine.py": 35,
    "test_distributed.py": 35, "test_critic.py": 30, "test_admm_pg.py": 25,
    "test_seed_engine.py": 25, "test_package.py": 25, "test_events.py": 20,
    "test_checkpoint.py": 20, "test_collect.py": 15,
    "test_sweep_programs.py": 80, "test_padded.py": 70, "test_padding.py": 60,
    # 2026-12-07, cold cache, one process on a loaded 2-core machine (x 1.6 as the above):
    # test_executors.py, not listed, started only after every listed file.
    "test_executors.py": 140, "test_plugins.py": 50, "test_tuning.py": 50,
    "test_mindflayer.py": 35, "test_paper_fourth.py": 30, "test_playground.py": 30,
}  # fmt: skip


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: -_HEAVY.get(item.path.name, 0))  # stable: ties keep order


#: Sizes past which the suite's closing report names a module or a function of the package
#: (a report to read, not a failure: nothing is split to fit a number).
REPORT_MODULE_LINES, REPORT_FUNCTION_LINES = 450, 60


def size_report() -> list[str]:
    """The package's modules over :data:`REPORT_MODULE_LINES` lines and functions over
    :data:`REPORT_FUNCTION_LINES`, longest first."""
    import ast

    root = pathlib.Path(__file__).resolve().parents[1] / "jaxnigt"
    modules, functions = [], []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        name = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        if (lines := len(text.splitlines())) > REPORT_MODULE_LINES:
            modules.append((lines, name))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if (n := node.end_lineno - node.lineno + 1) > REPORT_FUNCTION_LINES:
                    functions.append((n, f"{name}.{node.name}"))
    out = [f"module {m}: {n} lines" for n, m in sorted(modules, reverse=True)]
    return out + [f"function {f}: {n} lines" for n, f in sorted(functions, reverse=True)]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The size report (:func:`size_report`) after the results."""
    found = size_report()
    terminalreporter.write_sep("-", "size report (modules > 450 lines, functions > 60)")
    terminalreporter.write_line("\n".join(found) if found else "none")
