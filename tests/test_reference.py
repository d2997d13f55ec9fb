"""The generated references (jaxnigt.config.reference, jaxnigt.cli.reference): the committed
pages are exactly what the generators give, every config key and every command-line flag is
on them, and a key added without its documentation fails the generator."""

import dataclasses
from pathlib import Path

import pytest

import jaxnigt.cli.reference
from jaxnigt.config import reference, schema
from jaxnigt.run import metrics

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_the_configuration_page_is_the_generators_and_lists_every_key():
    page = (DOCS / "reference" / "configuration.md").read_text()
    assert page == reference.markdown(), "regenerate: python -m jaxnigt.config.reference"
    for prefix, cls in reference.SECTIONS:
        for f in dataclasses.fields(cls):
            key = f"{prefix}.{f.name}" if prefix else f.name
            assert f"| `{key}` |" in page, key


def test_a_key_without_documentation_fails_the_generator():
    @dataclasses.dataclass(frozen=True)
    class Cluster(schema.ClusterConfig):
        new_knob: int = schema._opt(schema._int(1), 3)

    Cluster.__doc__ = schema.ClusterConfig.__doc__  # every other field documented
    with pytest.raises(reference.MissingDoc, match="new_knob"):
        reference.rows("cluster", Cluster)
    Cluster.__doc__ = schema.ClusterConfig.__doc__ + "\n      new_knob: a documented knob.\n"
    (row,) = [r for r in reference.rows("cluster", Cluster) if r["key"] == "cluster.new_knob"]
    assert row["doc"] == "a documented knob." and row["allowed"] == "an integer >= 1"
    assert row["default"] == "`3`"


def test_allowed_values_are_the_validators_own_words():
    fields = {f.name: f for f in dataclasses.fields(schema.ClusterConfig)}
    assert reference.allowed(fields["inflight"]) == "one of ['cancel', 'discard']"
    assert reference.allowed(fields["n"]) == "an integer >= 1"
    readers = {r["key"]: r["readers"] for r in reference.rows("hparams", schema.HParams)}
    assert readers["hparams.msync_m"] == ("msync_nigt",)


def test_the_cli_page_is_the_generators_and_lists_every_flag():
    page = (DOCS / "reference" / "cli.md").read_text()
    assert page == jaxnigt.cli.reference.markdown(), "regenerate: python -m jaxnigt.cli.reference"
    flags = jaxnigt.cli.reference.flags()
    assert {"run", "sweep", "tune", "compare", "plan", "plot", "list", "clock"} <= set(flags)
    for command, names in flags.items():
        section = page.split(f"## `jaxnigt {command}`")[1].split("\n## ")[0]
        for name in names:
            assert f"`{name}`" in section, (command, name)


def test_the_metrics_page_names_every_column():
    page = (DOCS / "howto" / "metrics.md").read_text()
    for column in metrics.COLUMNS:
        assert f"`{column}`" in page, column
