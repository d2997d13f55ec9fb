"""The configuration reference, generated from the config dataclasses (docs/reference).

Every key of every section: its type, its default, what its validator allows (the
validator's own "expected ..." message, so the page cannot drift from the check), its
description (the dataclass docstring's ``Attributes:`` entry) and, for ``hparams``, which
algorithms read it.  A field without an ``Attributes:`` entry is an error
(:class:`MissingDoc`): a key cannot be added without its documentation.

    python -m jaxnigt.config.reference > docs/reference/configuration.md
"""

from __future__ import annotations

import dataclasses
import re
import typing
from typing import Any

from jaxnigt.algorithms import NAMES as BUILTIN
from jaxnigt.config import checks, schema, text

#: The sections of a config, in page order: (key, dataclass).
SECTIONS = (
    ("", schema.ExperimentConfig),
    ("env", schema.EnvConfig),
    ("cluster", schema.ClusterConfig),
    ("hparams", schema.HParams),
    ("eval", schema.EvalConfig),
    ("grid", schema.GridConfig),
)
# Keys whose allowed values are a registry (tests and forks register more): named, not listed.
REGISTRIES = {
    "env.name": "a name `jaxnigt list` shows: brax's environments (MJX backend) and the toy "
    "`point_mass`, `lqr1d`",
    "algorithms": "a non-empty list of algorithm names without repeats (`jaxnigt list`; "
    "[Algorithms](../algorithms.md))",
}
_SENTINEL = type("NotAValue", (), {"__repr__": lambda self: "<probe>"})()


class MissingDoc(ValueError):
    """A config field has no entry in its dataclass's ``Attributes:`` docstring."""


def attribute_docs(cls: type) -> dict[str, str]:
    """``{field: description}`` from the ``Attributes:`` section of ``cls``'s docstring
    (Google style: an entry per name at one indentation, continued on deeper lines;
    ``a, b: text`` documents each name)."""
    doc = cls.__doc__ or ""
    if "Attributes:" not in doc:
        return {}
    lines = [line for line in doc.split("Attributes:", 1)[1].splitlines() if line.strip()]
    indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    out: dict[str, str] = {}
    names: list[str] = []
    for line in lines:
        depth = len(line) - len(line.lstrip())
        m = re.match(r"([A-Za-z_][\w, ]*):\s(.*)$", line.strip())
        if depth == indent and m:
            names = [n.strip() for n in m.group(1).split(",")]
            out.update(dict.fromkeys(names, m.group(2).strip()))
        elif depth > indent:
            for n in names:
                out[n] += " " + line.strip()
        else:
            break  # the end of the section
    return out


def allowed(field: dataclasses.Field) -> str:
    """What the field's validator accepts, in its own words."""
    check = field.metadata.get("check")
    if check is None:
        return ""
    ctx = {"n": 10, "hparams": schema.HParams()}
    try:
        check(field.name, _SENTINEL, ctx)
    except checks.CheckError as e:
        text = str(e)
        return text.split("expected ", 1)[1] if "expected " in text else ""
    except (TypeError, ValueError, AttributeError, KeyError):
        return ""
    return ""


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
        if dataclasses.is_dataclass(value):
            return "(section)"
    else:
        return "(required)"
    return "null" if value is None else f"`{text.plain(value)!r}`".replace("'", "")


def _type(cls: type, field: dataclasses.Field) -> str:
    hint = typing.get_type_hints(cls).get(field.name, field.type)
    text = getattr(hint, "__name__", None) if not typing.get_args(hint) else None
    text = text or re.sub(r"[\w.]+\.(\w+)", r"\1", str(hint))
    return text.replace("NoneType", "None").replace("|", "\\|")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def rows(prefix: str, cls: type) -> list[dict[str, Any]]:
    """One dict per field of ``cls`` (a section), or MissingDoc."""
    from jaxnigt.config.loader import readers

    docs = attribute_docs(cls)
    out = []
    for f in dataclasses.fields(cls):
        key = f"{prefix}.{f.name}" if prefix else f.name
        if f.name not in docs:
            where = f"{cls.__name__}.{f.name} ({key})"
            doc = f"the Attributes: of {cls.__name__}'s docstring"
            raise MissingDoc(f"{where} has no entry in {doc}")
        doc = docs[f.name]
        if _default(f) == "(section)":
            doc = f"the `{f.name}` section (below)"
        row = {
            "key": key,
            "type": _type(cls, f),
            "default": _default(f),
            "allowed": REGISTRIES.get(key) or allowed(f),
            "doc": doc,
        }
        if prefix == "hparams":  # the library's own algorithms (a registered one may read more)
            row["readers"] = tuple(a for a in readers(f.name) if a in BUILTIN)
        out.append(row)
    return out


def traits_rows() -> list[str]:
    """Per algorithm of the library: the ``cluster:`` options that change its runs, the
    family ``hparams`` keys it reads beyond the common ones, its traced step sizes and the
    shapes the tuning protocol tunes (from each algorithm's ``Traits``)."""
    from jaxnigt.algorithms import traits

    rows = [
        "| algorithm | cluster options | its own `hparams` keys | step sizes | tuned shapes |",
        "|---|---|---|---|---|",
    ]
    code = lambda xs: ", ".join(f"`{x}`" for x in xs) or "–"
    for name in BUILTIN:
        t = traits(name)
        cells = (t.cluster_options, t.options, t.step_sizes, t.tuned_shapes)
        rows.append(f"| `{name}` | " + " | ".join(code(c) for c in cells) + " |")
    return rows


def markdown() -> str:
    """The whole reference page."""
    every = set(BUILTIN)
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated by `python -m jaxnigt.config.reference` from the config dataclasses; "
        "tests/test_reference.py checks it. Do not edit. -->",
        "",
        "Every key a config file may hold, by section. A config is YAML; every key is "
        "optional. Values are checked when the config is loaded, and an error names the key, "
        "the value and what is allowed (the *allowed* column is that check's own text).",
        "",
        "**YAML.** A config is UTF-8 text. Numbers may be written `1e3` or `2.5e-4` (in a file "
        "and in `--set` alike; an integer key takes `1e6` too), a key given twice in one "
        "mapping is an error naming it and its line, and so is a section with nothing under "
        "it (`env:` alone, `--set env=`): leave a section out to take its defaults.",
        "",
        "**Precedence.** The config file, then each `--set KEY=VALUE` in order (a key through "
        "the sections, e.g. `--set cluster.n=100`), then `per_algorithm.<name>.<key>` over "
        "`hparams.<key>` for that algorithm alone: a `--set hparams.KEY` that an entry of "
        "`per_algorithm` overrides for every algorithm run changes nothing, and the loader "
        "warns. `--set budget=...` does not rescale `eval.every_time` (the loader warns when "
        "fewer than 20 evaluations fit). A config argument that is no file names a bundled "
        "config (`jaxnigt list`).",
        "",
    ]
    for prefix, cls in SECTIONS:
        title = f"`{prefix}`" if prefix else "Top level"
        lines += [
            f"## {title}",
            "",
            " ".join((cls.__doc__ or "").split("Attributes:")[0].split()),
            "",
        ]
        head = "| key | type | default | allowed | description |"
        rule = "|---|---|---|---|---|"
        if prefix == "hparams":
            head, rule = head + " read by |", rule + "---|"
        lines += [head, rule]
        for r in rows(prefix, cls):
            cells = [f"`{r['key']}`", r["type"], r["default"], _cell(r["allowed"]), _cell(r["doc"])]
            if "readers" in r:
                readers = ", ".join(f"`{a}`" for a in r["readers"]) or "–"
                cells.append("every algorithm" if set(r["readers"]) == every else readers)
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        "## Which algorithm reads what",
        "",
        "The common keys (`learning_rate`, `eta`, `M`, `M_init`, `gamma`) are accepted by every "
        "algorithm; the step sizes its update reads, and beyond the common keys, from its "
        "`Traits`:",
        "",
        *traits_rows(),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(), end="")
