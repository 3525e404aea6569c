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


def _resolve(dotted):
    """The object a dotted ``theano_dag...`` name stands for (a module, or an attribute)."""
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_every_name_on_the_architecture_page_exists():
    """docs/architecture.md is the map: each ``theano_dag.x.y`` it names must resolve."""
    page = (pathlib.Path(__file__).parent.parent / "docs" / "architecture.md").read_text()
    names = sorted(set(re.findall(r"`(theano_dag(?:\.\w+)+)`", page)))
    assert len(names) > 40, names
    missing = []
    for name in names:
        try:
            _resolve(name)
        except (ImportError, AttributeError):
            missing.append(name)
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"
