"""The API page's entries have Google-style docstrings: every function and class that
docs/api.md has autodoc document says what it takes, returns and raises.

A function with parameters needs an ``Args:`` section, one that returns a value a
``Returns:`` (or ``Yields:``) section, and one that raises an exception in its own body a
``Raises:`` section; a class needs ``Args:`` (its constructor's parameters) or
``Attributes:`` (its fields).  What the page documents is read from its autodoc directives:
``autofunction`` and ``autoclass`` name one object each (a class's public methods too, unless
``:no-members:``), ``automodule`` the module's public members unless ``:no-members:``.
"""

import ast
import importlib
import inspect
import pathlib
import re
import textwrap

import pytest

API_PAGE = pathlib.Path(__file__).parent.parent / "docs" / "api.md"
DIRECTIVE = re.compile(r"^\.\. (autofunction|autoclass|automodule):: (\S+)\s*$")


def directives(text: str) -> list[tuple[str, str, set[str]]]:
    """``(kind, dotted name, options)`` of every autodoc directive in ``text``."""
    out = []
    for line in text.splitlines():
        if m := DIRECTIVE.match(line.strip()):
            out.append((m[1], m[2], set()))
        elif out and line.startswith("   :") and line.strip().endswith(":"):
            out[-1][2].add(line.strip().strip(":"))
    return out


def resolve(dotted: str, *, module: bool = False):
    """The object a dotted name names, as autodoc finds it: the module itself (``module``),
    or an attribute of its longest importable module prefix (``jaxnigt.nigt`` is the
    function the package exports, not the module of that name)."""
    parts = dotted.split(".")
    for i in range(len(parts) if module else len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def _public_members(module) -> list[tuple[str, object]]:
    """The public functions and classes a module defines (``__all__`` where it has one)."""
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    found = []
    for name in names:
        obj = getattr(module, name)
        if (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__ == module.__name__:
            found.append((f"{module.__name__}.{name}", obj))
    return found


def _methods(dotted: str, cls) -> list[tuple[str, object]]:
    """The public methods with a docstring that a class defines itself (what autodoc shows
    of its members)."""
    return [
        (f"{dotted}.{name}", obj)
        for name, obj in vars(cls).items()
        if not name.startswith("_") and inspect.isfunction(obj) and obj.__doc__
    ]


def documented() -> list[tuple[str, object]]:
    """``(dotted name, object)`` of every function and class the API page documents."""
    out = []
    for kind, dotted, options in directives(API_PAGE.read_text()):
        obj = resolve(dotted, module=kind == "automodule")
        members = "no-members" not in options
        if kind == "automodule":
            out += _public_members(obj) if members else []
            continue
        out.append((dotted, obj))
        if kind == "autoclass" and members:
            out += _methods(dotted, obj)
    return out


def _sections(doc: str) -> set[str]:
    """The Google-style section headers of a docstring (``Args``, ``Returns``, ...)."""
    return set(re.findall(r"^\s*([A-Z][a-z]+):\s*$", doc or "", flags=re.MULTILINE))


def _function_node(fn) -> ast.FunctionDef | None:
    try:
        source = textwrap.dedent(inspect.getsource(inspect.unwrap(fn)))
    except (OSError, TypeError):
        return None
    node = ast.parse(source).body[0]
    return node if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else None


def _own_nodes(node: ast.AST):
    """The nodes of a function's own body, not those of the functions and classes it
    defines."""
    for child in ast.iter_child_nodes(node):
        if not isinstance(
            child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda
        ):
            yield child
            yield from _own_nodes(child)


def _returns_value(fn, node) -> bool:
    annotation = inspect.signature(fn).return_annotation
    if annotation is not inspect.Signature.empty:
        return annotation not in (None, "None")
    return any(
        isinstance(n, ast.Return) and n.value is not None and not _is_none(n.value)
        for n in _own_nodes(node)
    )


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def missing(obj) -> list[str]:
    """The sections ``obj``'s docstring lacks (empty: none)."""
    doc = inspect.getdoc(obj) or ""
    have = _sections(doc)
    if inspect.isclass(obj):
        return [] if have & {"Args", "Attributes"} else ["Args or Attributes"]
    params = [p for p in inspect.signature(obj).parameters if p not in ("self", "cls")]
    node = _function_node(obj)
    lack = []
    if params and "Args" not in have:
        lack.append("Args")
    if node is not None and _returns_value(obj, node) and not have & {"Returns", "Yields"}:
        lack.append("Returns")
    raises = node is not None and any(
        isinstance(n, ast.Raise) and n.exc is not None for n in _own_nodes(node)
    )
    if raises and "Raises" not in have:
        lack.append("Raises")
    return lack


def owner(obj) -> str:
    """The file that defines ``obj``, relative to the repository."""
    path = pathlib.Path(inspect.getsourcefile(inspect.unwrap(obj))).resolve()
    return str(path.relative_to(API_PAGE.parent.parent.resolve()))


def test_the_page_is_read():
    found = dict(documented())
    assert {"jaxnigt.nigt", "jaxnigt.config.load", "jaxnigt.analysis.compare"} <= set(found)
    kinds = {kind for kind, _, _ in directives(API_PAGE.read_text())}
    assert kinds == {"autofunction", "autoclass", "automodule"}


def test_the_checks_see_what_is_missing():
    def bare(x):
        """Nothing more."""
        if x:
            raise ValueError(x)
        return x

    def complete(x: int) -> int:
        """Doubles.

        Args:
          x: a number.

        Returns:
          Twice ``x``.

        Raises:
          ValueError: ``x`` is negative.
        """
        if x < 0:
            raise ValueError(x)
        return 2 * x

    def nothing() -> None:
        """No parameters, returns nothing: needs no section."""

    class Fields:
        """Has fields.

        Attributes:
          a: one.
        """

    assert missing(bare) == ["Args", "Returns", "Raises"]
    assert missing(complete) == missing(nothing) == missing(Fields) == []
    assert missing(type("Bare", (), {"__doc__": "No sections."})) == ["Args or Attributes"]


@pytest.mark.parametrize("name", [name for name, _ in documented()])
def test_every_api_entry_has_its_sections(name):
    obj = dict(documented())[name]
    lack = missing(obj)
    assert not lack, f"{name} ({owner(obj)}) lacks {', '.join(lack)}"


def _prose(text: str) -> str:
    """``text`` without what a reader sees as code or rendered math: code blocks and spans
    (Markdown and reST), ``$…$`` / ``$$…$$`` math, ``:math:`…``` roles and ``.. math::``
    blocks."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"^\.\. math::\n(?:\s*\n|[ \t]+.*\n)*", " ", text, flags=re.M)
    text = re.sub(r"::\n(?:\s*\n|[ \t]+.*\n)+", " ", text)  # a reST literal block
    text = re.sub(r":math:`[^`]*`", " ", text)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"(?<![\\$])\$[^$\n]+\$", " ", text)
    return re.sub(r"``.*?``|`[^`\n]*`", " ", text, flags=re.S)


def test_no_tex_outside_math_on_the_api_page_or_the_configuration_reference():
    """What scripts/check_site.py fails a page for (a ``d^{1/4}`` left as TeX source), in
    the texts the API page and the configuration reference are made from."""
    import check_site

    texts = {name: inspect.getdoc(obj) or "" for name, obj in documented()}
    reference = API_PAGE.parent / "reference" / "configuration.md"
    texts["docs/reference/configuration.md"] = reference.read_text()
    found = {name: check_site.math_problems(_prose(t)) for name, t in texts.items()}
    assert {name: p for name, p in found.items() if p} == {}
