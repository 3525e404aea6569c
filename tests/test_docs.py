"""Every ```python block of every docs/*.md runs, in order, in one namespace per file."""

import pathlib
import re

import pytest

DOCS = sorted((pathlib.Path(__file__).parent.parent / "docs").glob("*.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(path):
    return BLOCK.findall(path.read_text())


def test_docs_exist():
    assert DOCS, "docs/ has no Markdown files"


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_doc_code_blocks_run(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": f"docs_{path.stem}"}
    for k, block in enumerate(python_blocks(path)):
        code = compile(block, f"{path.name}[block {k}]", "exec")
        exec(code, namespace)
