"""Tests for the package as a whole (jaxnigt/__init__.py and its layout): the public names,
no import cycle, every module importable on its own, short functions."""

import ast
import pathlib
import subprocess
import sys
import textwrap

import jaxnigt

ROOT = pathlib.Path(jaxnigt.__file__).parent
MAX_FUNCTION_LINES = 60


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = path
    return out


def _module_level_imports(name: str, path: pathlib.Path, known: set[str]) -> set[str]:
    """jaxnigt modules that ``name`` imports at module level (function-level imports are
    lazy by design and cannot form a cycle at import time).  Its enclosing packages are left
    out: Python initializes them before the module anyway."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.parse(path.read_text()).body:
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


def test_functions_are_short():
    long = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name}: {lines} lines")
    assert not long, long


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
