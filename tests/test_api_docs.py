"""The API page's entries have Google-style docstrings: every function and class that
docs/api.md has autodoc document says what it takes, returns and raises.

A function with parameters needs an ``Args:`` section, one that returns a value a
``Returns:`` (or ``Yields:``) section, and one that raises an exception in its own body a
``Raises:`` section; a class needs ``Args:`` (its constructor's parameters) or
``Attributes:`` (its fields).  What the page documents is read from its autodoc directives:
``autofunction`` and ``autoclass`` name one object each (a class's public methods too, unless
``:no-members:``), ``automodule`` the module's public members unless ``:no-members:`` (all
of them, the ``:members:`` it lists, less its ``:exclude-members:``).

And every public module shows its members on the page (docs/api.md says so in its opening):
a *public module* is ``jaxnigt``, ``jaxnigt.cluster``, every module those two name in
``__all__`` and every module the page documents with ``automodule``; its *members* are what
autodoc takes, the functions and classes its ``__all__`` names, or without ``__all__`` the
public functions and classes it defines itself.  Each public module is on the page and each of
its members is documented there (the object, under any name: ``jaxnigt.cluster.rennala`` is
shown as ``jaxnigt.cluster.schedules.rennala``); a member may be left out with
``:exclude-members:`` only while its docstring lacks the sections the page requires.
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
OPTION = re.compile(r"^   :([\w-]+):(.*)$")


def directives(text: str) -> list[tuple[str, str, dict[str, list[str]]]]:
    """``(kind, dotted name, options)`` of every autodoc directive in ``text``; an option's
    value is the list of names it gives (``[]`` for a flag such as ``:no-members:``)."""
    out = []
    for line in text.splitlines():
        if m := DIRECTIVE.match(line.strip()):
            out.append((m[1], m[2], {}))
        elif out and (m := OPTION.match(line)):
            out[-1][2][m[1]] = [v.strip() for v in m[2].split(",") if v.strip()]
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


def _is_member(obj) -> bool:
    """A function (a jitted one too: autodoc unwraps it) or a class."""
    return inspect.isfunction(inspect.unwrap(obj)) or inspect.isclass(obj)


def _public_members(module) -> list[tuple[str, object]]:
    """A module's members as autodoc takes them: the functions and classes its ``__all__``
    names, wherever they are defined; without ``__all__``, the public functions and classes it
    defines itself."""
    names = getattr(module, "__all__", None)
    own = names is None
    names = names or [n for n in vars(module) if not n.startswith("_")]
    found = []
    for name in names:
        obj = getattr(module, name)
        if _is_member(obj) and (not own or obj.__module__ == module.__name__):
            found.append((f"{module.__name__}.{name}", obj))
    return found


def _module_members(module, options: dict[str, list[str]]) -> list[tuple[str, object]]:
    """The members an ``automodule`` directive with ``options`` shows."""
    if "no-members" in options:
        return []
    found = _public_members(module)
    if options.get("members"):  # an explicit list
        found = [(f"{module.__name__}.{n}", getattr(module, n)) for n in options["members"]]
    excluded = {f"{module.__name__}.{n}" for n in options.get("exclude-members", [])}
    return [(name, obj) for name, obj in found if name not in excluded]


def _methods(dotted: str, cls) -> list[tuple[str, object]]:
    """The public methods with a docstring that a class defines itself (what autodoc shows
    of its members)."""
    return [
        (f"{dotted}.{name}", obj)
        for name, obj in vars(cls).items()
        if not name.startswith("_") and inspect.isfunction(obj) and obj.__doc__
    ]


def documented(text: str | None = None) -> list[tuple[str, object]]:
    """``(dotted name, object)`` of every function and class the API page (or ``text``)
    documents."""
    out = []
    for kind, dotted, options in directives(API_PAGE.read_text() if text is None else text):
        obj = resolve(dotted, module=kind == "automodule")
        if kind == "automodule":
            out += _module_members(obj, options)
            continue
        out.append((dotted, obj))
        if kind == "autoclass" and "no-members" not in options:
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
    options = {d: o for k, d, o in directives(API_PAGE.read_text()) if k == "automodule"}
    assert options["jaxnigt.cluster"] == {"no-members": []}
    assert options["jaxnigt.cluster.schedules"]["exclude-members"] == [
        "sequential_cumsum",
        "start_offsets",
    ]


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


def public_modules(text: str | None = None) -> dict[str, object]:
    """The public modules by name: ``jaxnigt``, ``jaxnigt.cluster``, the modules they name in
    ``__all__`` and the modules the page (or ``text``) documents with ``automodule``."""
    import jaxnigt
    import jaxnigt.cluster

    found = {}
    for package in (jaxnigt, jaxnigt.cluster):
        found[package.__name__] = package
        for name in package.__all__:
            obj = getattr(package, name)
            if inspect.ismodule(obj):
                found[obj.__name__] = obj
    for kind, dotted, _ in directives(API_PAGE.read_text() if text is None else text):
        if kind == "automodule":
            found[dotted] = resolve(dotted, module=True)
    return found


def unshown(name: str, text: str | None = None) -> list[str]:
    """What keeps public module ``name`` from showing its members on the page (or ``text``):
    no ``automodule`` of it (``jaxnigt``, the page's own subject, needs none), and each member
    the page documents under no name and does not leave out with ``:exclude-members:``."""
    text = API_PAGE.read_text() if text is None else text
    module = public_modules(text)[name]
    options = {d: o for k, d, o in directives(text) if k == "automodule"}
    problems = [] if name in options or name == "jaxnigt" else [f"no automodule of {name}"]
    shown = {id(obj) for _, obj in documented(text)}
    left_out = set(options.get(name, {}).get("exclude-members", []))
    problems += [
        f"{dotted} is not on the page"
        for dotted, obj in _public_members(module)
        if id(obj) not in shown and dotted.rpartition(".")[2] not in left_out
    ]
    return problems


def test_the_member_check_sees_a_module_shown_without_members():
    """The page as it was before this check: ``aggregators`` and ``timing`` without members,
    ``schedules``, ``events`` and ``reductions`` absent."""
    old = """
.. autofunction:: jaxnigt.nigt
.. automodule:: jaxnigt.cluster.timing
   :no-members:
.. automodule:: jaxnigt.cluster.aggregators
   :no-members:
"""
    assert "jaxnigt.cluster.aggregators.rennala_weights is not on the page" in unshown(
        "jaxnigt.cluster.aggregators", old
    )
    assert "jaxnigt.cluster.timing.parse_noise is not on the page" in unshown(
        "jaxnigt.cluster.timing", old
    )
    assert "no automodule of jaxnigt.cluster.schedules" in unshown("jaxnigt.cluster.schedules", old)
    assert "jaxnigt.cluster.rennala_reduce is not on the page" in unshown("jaxnigt.cluster", old)
    assert not unshown("jaxnigt.cluster.aggregators", old.replace("   :no-members:\n", ""))


@pytest.mark.parametrize("name", sorted(public_modules()))
def test_every_public_module_shows_its_members(name):
    problems = unshown(name)
    assert not problems, f"docs/api.md: {'; '.join(problems)}"


def _left_out() -> list[str]:
    """``module.member`` of every ``:exclude-members:`` entry of the page."""
    return [
        f"{dotted}.{member}"
        for kind, dotted, options in directives(API_PAGE.read_text())
        for member in options.get("exclude-members", [])
    ]


@pytest.mark.parametrize("dotted", _left_out())
def test_a_member_is_left_out_only_while_it_lacks_its_sections(dotted):
    module_name = dotted.rpartition(".")[0]
    module = resolve(module_name, module=True)
    members = dict(_public_members(module))
    assert dotted in members, f"{dotted} is no public member of {module_name}"
    assert missing(members[dotted]), (
        f"{dotted} ({owner(members[dotted])}) has its sections now: show it on the page "
        "(take it out of its module's :exclude-members: in docs/api.md)"
    )


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
