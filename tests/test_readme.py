"""The README's and the docs' Python snippets run as written."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
PAGES = [
    README,
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs" / "howto").glob("*.md")),
]


def test_readme_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python block"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_python_blocks_run(page):
    for code in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S):
        exec(compile(code, str(page), "exec"), {})
