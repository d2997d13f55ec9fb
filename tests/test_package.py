"""Tests for the package as a whole (jaxnigt/__init__.py and its layout): the public names,
imports pointing down the layers, no import cycle, every module importable on its own.  The
sizes of modules and functions are a report the suite prints at its end (tests/conftest.py,
``size_report``), not a failure: an idea is not split to fit a number."""

import ast
import pathlib
import subprocess
import sys
import textwrap

import jaxnigt

ROOT = pathlib.Path(jaxnigt.__file__).parent


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = path
    return out


def _module_level_imports(
    name: str, path: pathlib.Path, known: set[str], *, lazy: bool = False
) -> set[str]:
    """jaxnigt modules that ``name`` imports at module level (with ``lazy``, inside its
    functions too).  Its enclosing packages are left out: Python initializes them before the
    module anyway."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree) if lazy else tree.body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return {m for m in found if m in known and m != name and m not in parents}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (module -> modules it imports), or None."""
    state: dict[str, int] = {}

    def visit(m, stack):
        if state.get(m) == 1:
            return [*stack[stack.index(m) :], m]
        if state.get(m) == 2:
            return None
        state[m] = 1
        for dep in sorted(graph[m]):
            found = visit(dep, [*stack, m])
            if found:
                return found
        state[m] = 2
        return None

    for m in graph:
        found = visit(m, [])
        if found:
            return found
    return None


def test_no_import_cycle_even_through_lazy_imports():
    """Function-level imports count too: a cycle through one would tie two modules together
    all the same."""
    modules = _modules()
    graph = {m: _module_level_imports(m, p, set(modules), lazy=True) for m, p in modules.items()}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


#: The layers of the package, bottom first (``jaxnigt/__init__.py`` states them): a module
#: imports, at module level or inside a function, only its own subpackage and the layers
#: below its own; the subpackages of one layer import none of each other.  The package's
#: ``__init__`` (its public names) is no layer: Python initializes it before any submodule.
LAYERS = (
    ("cluster", "envs", "nigt", "plugins"),
    ("rl",),
    ("algorithms",),
    ("config",),
    ("run",),
    ("analysis",),
    ("studies",),
    ("cli",),
)


def _subpackage_imports() -> dict[tuple[str, str], list[str]]:
    """``{(A, B): ["module -> dependency", ...]}`` for every import, lazy ones included, from
    subpackage (or top-level module) A to another one B."""
    modules = _modules()
    edges: dict[tuple[str, str], list[str]] = {}
    for m, p in modules.items():
        if m == "jaxnigt":
            continue
        for dep in sorted(_module_level_imports(m, p, set(modules), lazy=True)):
            a, b = m.split(".")[1], dep.split(".")[1]
            if a != b:
                edges.setdefault((a, b), []).append(f"{m} -> {dep}")
    return edges


def test_layers_name_every_subpackage_once_as_the_package_docstring_does():
    import pkgutil

    names = [name for layer in LAYERS for name in layer]
    top = sorted(m.name for m in pkgutil.iter_modules(jaxnigt.__path__))
    assert sorted(names) == top, (names, top)
    doc = jaxnigt.__doc__
    stated = doc[doc.index("**Layers.**") :].split("\n\n")[0]
    places = [stated.index(f"``{name}``") for name in names]
    assert places == sorted(places), stated


def test_imports_point_down_the_layers():
    """Every import from one subpackage to another, lazy ones included, goes to a lower
    layer (:data:`LAYERS`): no exception."""
    layer = {name: i for i, names in enumerate(LAYERS) for name in names}
    up = [
        m for (a, b), found in _subpackage_imports().items() if layer[b] >= layer[a] for m in found
    ]
    assert not up, up


def test_no_cycle_among_subpackages():
    graph = {name: set() for layer in LAYERS for name in layer}
    for a, b in _subpackage_imports():
        graph[a].add(b)
    cycle = _cycle(graph)
    assert cycle is None, "subpackage cycle: " + " -> ".join(cycle)


def test_the_curve_statistics_are_pure():
    """The time to a target that a run's summary reports imports nothing of jaxnigt, and the
    analysis's statistics of curves nothing but it: numpy functions, one definition of each."""
    modules = _modules()

    def imports(name):
        return _module_level_imports(name, modules[name], set(modules), lazy=True)

    assert imports("jaxnigt.run.curves") == set()
    assert imports("jaxnigt.analysis.stats") == {"jaxnigt.run.curves"}
    from jaxnigt.analysis import stats
    from jaxnigt.run import curves

    assert stats.first_time is curves.first_time and stats.median_time is curves.median_time


def test_every_subpackage_says_what_it_holds():
    import pkgutil

    top = sorted(m.name for m in pkgutil.iter_modules(jaxnigt.__path__))
    assert len(top) <= 16, top
    for name, path in _modules().items():
        if path.name == "__init__.py" and name != "jaxnigt":
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            assert len(doc.split()) >= 12 and "to be described" not in doc, name


def test_no_import_cycle():
    modules = _modules()
    graph = {m: _module_level_imports(m, p, set(modules)) for m, p in modules.items()}
    state: dict[str, int] = {}

    def visit(m, stack):
        if state.get(m) == 1:
            raise AssertionError("import cycle: " + " -> ".join([*stack, m]))
        if state.get(m) == 2:
            return
        state[m] = 1
        for dep in sorted(graph[m]):
            visit(dep, [*stack, m])
        state[m] = 2

    for m in graph:
        visit(m, [])


def test_every_module_imports_on_its_own():
    names = sorted(_modules())
    script = textwrap.dedent(
        f"""
        import importlib, sys
        import jax  # loaded once; each jaxnigt module is then imported from a clean slate
        for name in {names!r}[::-1]:
            for loaded in [m for m in sys.modules if m == "jaxnigt" or m.startswith("jaxnigt.")]:
                del sys.modules[loaded]
            importlib.import_module(name)
        print("ok")
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-3000:]


def test_public_api():
    for name in ("nigt", "scale_by_nigt", "nigt_eval_params", "NigtState", "ScaleByNigtState"):
        assert hasattr(jaxnigt, name), name
    assert set(jaxnigt.__all__) <= set(dir(jaxnigt))


def test_import_leaves_physics_and_plotting_out():
    """`import jaxnigt` is the light core: no MuJoCo, brax, flax or matplotlib."""
    heavy = ("brax", "mujoco", "matplotlib", "flax", "yaml", "orbax")
    code = f"import sys, jaxnigt; print([m for m in {heavy!r} if m in sys.modules])"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]", proc.stdout
    # the experiment API is still reachable, imported on first use
    code = "import jaxnigt, sys; jaxnigt.make_trainer; print('brax' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "True", proc.stderr[-2000:]


# --- library errors and the command line ---


def _cli_flags() -> set[str]:
    """Every option string of every ``jaxnigt`` subcommand but ``clock`` (its own module)."""
    import argparse

    from jaxnigt import cli

    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {
        flag
        for name, parser in sub.choices.items()
        if name != "clock"
        for action in parser._actions
        for flag in action.option_strings
        if flag.startswith("--") and flag != "--help"
    }


def _messages(path: pathlib.Path) -> list[str]:
    """The string constants of a module that are not docstrings (f-string parts included)."""
    tree = ast.parse(path.read_text())
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


def test_library_messages_name_no_command_line_flags():
    """Only the command line knows its flags: the library names paths, fields and reasons,
    and jaxnigt.cli adds the flag that named them."""
    import re

    flags = _cli_flags()
    assert {"--out", "--resume", "--overwrite", "--over"} <= flags
    found = []
    for name, path in _modules().items():
        # the configuration reference is documentation for the command's user: it names
        # --set where it explains the precedence of overrides
        if name.startswith("jaxnigt.cli") or name == "jaxnigt.config.reference":
            continue
        for text in _messages(path):
            found += [(name, f) for f in re.findall(r"--[A-Za-z][\w-]*", text) if f in flags]
    assert not found, found


# --- the bundled configs as package data ---
REPO = ROOT.parent


def _package_data() -> list[str]:
    import tomllib

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    return pyproject["tool"]["setuptools"]["package-data"]["jaxnigt"]


def test_bundled_configs_are_the_top_level_folder():
    """``jaxnigt/configs`` is the repository's ``configs/`` (a link), every config there is
    bundled by name, and the package-data patterns take every file of it into a wheel."""
    from jaxnigt.config import bundled

    assert (ROOT / "configs").resolve() == (REPO / "configs").resolve()
    on_disk = sorted(str(p.relative_to(REPO / "configs")) for p in (REPO / "configs").rglob("*"))
    on_disk = [p for p in on_disk if (REPO / "configs" / p).is_file()]
    assert sorted(bundled.names()) == on_disk and "demo.yaml" in on_disk
    packaged = {
        str(p.relative_to(ROOT / "configs"))
        for g in _package_data()
        if g.startswith("configs/")
        for p in ROOT.glob(g)
    }
    assert packaged == set(on_disk)
    assert bundled.find("demo") == bundled.find("configs/demo.yaml") == bundled.root() / "demo.yaml"
    assert bundled.find("sweeps/n_scaling_cpu").name == "n_scaling_cpu.yaml"
    assert bundled.find("../pyproject.toml") is None and bundled.find("nope") is None


def test_wheel_holds_the_bundled_configs(tmp_path):
    """A wheel built from a copy of the package (no build isolation: offline, a few seconds)
    holds every bundled config beside the modules."""
    import importlib.metadata
    import shutil
    import zipfile

    import pytest

    major = int(importlib.metadata.version("setuptools").split(".")[0])
    if major < 77:
        pytest.skip("building needs setuptools >= 77 (the test extra)")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "configs", src / "configs")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT, src / "jaxnigt", symlinks=True, ignore=skip)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    proc = subprocess.run([*cmd, "-w", str(tmp_path), str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = tmp_path.glob("jaxnigt-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for p in (REPO / "configs").rglob("*.yaml"):
        assert f"jaxnigt/configs/{p.relative_to(REPO / 'configs')}" in names, p
    assert "jaxnigt/cli/__main__.py" in names and "jaxnigt/plan_figures.json" in names
