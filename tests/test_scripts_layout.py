"""scripts/ holds what makes today's pages and benchmarks, in modules that import each other
without a cycle and use only the library's public names (both read from the source with
``ast``: no module of scripts/ is imported).

* No import cycle among the modules of scripts/ (``paper.*``, ``benchmarks.*``, the scripts
  themselves), counting the imports inside functions too: a lazy import is still a cycle.
* No private name of ``jaxnigt`` (``from jaxnigt.x import _y``, ``import jaxnigt._x``, or
  ``mod._y`` on a name bound by an import from ``jaxnigt``), and none of another module of
  scripts/ (``from paper.x import _y``, ``third._timed``).
* The results pipeline's modules (``scripts/paper/*.py``) stay within :data:`PAPER_LINES`.
* The second edition's report configs, its output, stay and load.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
# `cat scripts/paper/*.py | wc -l`: 3,600 once the store became a library module, 100 more
# for the heterogeneous-physics row (paper/physics.py, 7 Dec 2026), a row of its own, and 400
# for the pages of registered rows (paper/rows.py and the heavy-tailed and heterogeneous
# rivals' specs, their commands and tables, 8 Dec 2026).
PAPER_LINES = 4100


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SCRIPTS).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(SCRIPTS.rglob("*.py"))}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _resolve(module: str, name: str | None = None) -> str | None:
    """The module of scripts/ that ``from module import name`` (or ``import module``) loads:
    the submodule where ``name`` is one, else ``module`` itself; None outside scripts/."""
    if name is not None and f"{module}.{name}" in MODULES:
        return f"{module}.{name}"
    return module if module in MODULES else None


def _imports(path: Path):
    """``(imported module, bound name, imported name)`` of every import in ``path``, at any
    depth; ``imported name`` is None for ``import x``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, a.asname or a.name.split(".")[0], None
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"{path}: a relative import ({node.module})"
            for a in node.names:
                yield node.module, a.asname or a.name, a.name


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for module, _bound, imported in _imports(path):
            target = _resolve(module, imported)
            if target is not None and target != name:
                graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of more than one module (or a module
    that imports itself)."""
    found, state = [], {}  # state: 1 on the current path, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                found.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_no_import_cycle_among_the_modules_of_scripts():
    graph = _graph()
    assert graph["paper.fourth"] >= {"paper.outages", "paper.third"}  # the graph is read
    assert "paper.fourth" not in graph["paper.outages"]  # the old cycle, broken
    assert _cycles(graph) == []


def test_a_cycle_is_found_where_there_is_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def _private_uses(path: Path) -> list[str]:
    """Private names ``path`` takes from ``jaxnigt`` or from another module of scripts/."""
    found = []
    modules = {}  # bound name -> where it came from, for names bound by such imports
    for module, bound, imported in _imports(path):
        ours = module.split(".")[0] == "jaxnigt" or _resolve(module, imported) is not None
        if not ours:
            continue
        dotted = module if imported is None else f"{module}.{imported}"
        if any(_private(part) for part in dotted.split(".")):
            found.append(f"imports {dotted}")
        modules[bound] = dotted
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            found.append(f"{node.value.id}.{node.attr} ({modules[node.value.id]})")
    return found


def test_scripts_use_only_public_names_of_the_library_and_of_each_other():
    found = {name: uses for name, path in MODULES.items() if (uses := _private_uses(path))}
    assert found == {}


def test_a_private_name_is_found_where_there_is_one(tmp_path):
    path = tmp_path / "x.py"
    path.write_text(
        "from jaxnigt.run import trainer as t, loop\n"
        "from jaxnigt.rl.rollout import _block_size\n"
        "import numpy as np\n"
        "def f():\n"
        "    from paper import third\n"
        "    return t._clock_program, third._timed, loop.prepare, np._x, t.__doc__\n"
    )
    assert _private_uses(path) == [
        "imports jaxnigt.rl.rollout._block_size",
        "t._clock_program (jaxnigt.run.trainer)",
        "third._timed (paper.third)",
    ]


def _paper_lines() -> int:
    return sum(len(p.read_text().splitlines()) for p in SCRIPTS.glob("paper/*.py"))


# Met once the results store became a library module (jaxnigt.studies.store): 3,913 lines
# before, from 5,312; what is left is the paper's own: its scenarios, editions and page.
def test_the_results_pipeline_stays_within_its_line_budget():
    lines = _paper_lines()
    assert lines <= PAPER_LINES, f"scripts/paper/*.py: {lines} lines (budget {PAPER_LINES})"


def test_the_second_editions_report_configs_are_kept_and_load():
    """Its pipeline is gone; its report configs stay as its output (the frozen pages and
    scripts/same_numbers.py name them)."""
    from jaxnigt import config as config_lib

    kept = sorted((SCRIPTS / "paper" / "configs").glob("*.yaml"))
    second = [p for p in kept if "scripts/paper second run" in p.read_text().splitlines()[0]]
    others = {"point_mass_sqrt_dim_eta_probe", "reacher_physics"}  # not the second edition's
    others |= {f"{e}_heavy" for e in ("point_mass", "reacher")} | {"point_mass_heavy_cancel"}
    others |= {f"{e}_rivals_n{n}" for e in ("point_mass", "reacher") for n in (2, 10)}
    assert len(second) == 21 and {p.stem for p in kept} - {p.stem for p in second} == others
    for path in second:
        cfg = config_lib.load(path)
        assert cfg.name == path.stem and cfg.seed == 0
    same_numbers = (SCRIPTS / "same_numbers.py").read_text()
    for name in re.findall(r"scripts/paper/configs/(\w+)\.yaml", same_numbers):
        assert (SCRIPTS / "paper" / "configs" / f"{name}.yaml").is_file()
