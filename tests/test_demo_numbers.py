"""scripts/demo_numbers.py: docs/getting_started.md quotes the demo's comparisons as
``jaxnigt compare`` prints them from the JSON stored in docs/demo/ (the demo itself is not
run here: ``python scripts/demo_numbers.py runs/demo`` stores and writes them after it)."""

import json

import demo_numbers

from jaxnigt import config as config_lib


def test_the_page_quotes_the_stored_comparisons_of_the_demo():
    text = demo_numbers.PAGE.read_text()
    assert demo_numbers.region(text) == demo_numbers.render()
    assert demo_numbers.main(["--check"]) == 0
    demo = config_lib.load("configs/demo.yaml")
    for statistic, _ in demo_numbers.COMPARISONS:
        result = json.loads(demo_numbers.stored_path(statistic).read_text())
        assert result["statistic"] == statistic
        assert result["budget"] == demo.budget
        assert list(result["algorithms"]) == list(demo.algorithms)
        assert all(a["seeds"] == demo.seeds for a in result["algorithms"].values())


def test_a_page_that_quotes_other_numbers_fails_the_check(tmp_path, monkeypatch, capsys):
    page = tmp_path / "page.md"
    text = demo_numbers.PAGE.read_text()
    first = demo_numbers.region(text).split("| ")[-2]  # a cell of the last table row
    page.write_text(text.replace(first, first + "0", 1))
    monkeypatch.setattr(demo_numbers, "PAGE", page)
    assert demo_numbers.main(["--check"]) == 1
    assert "quotes other numbers" in capsys.readouterr().err
    demo_numbers.write_page(page)
    assert demo_numbers.main(["--check"]) == 0
