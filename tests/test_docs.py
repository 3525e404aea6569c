"""Every ```python block of every docs/*.md runs, in order, in one namespace per file.

A ```text block that follows a python block with nothing but blank lines between them is
that block's output: what the block prints must match it (doctest's rules: whitespace
runs are equal, ``...`` matches anything).
"""

import contextlib
import doctest
import io
import pathlib
import re

import pytest

DOCS = sorted((pathlib.Path(__file__).parent.parent / "docs").glob("*.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
# a python block, then optionally (after blank lines only) the text block of its output
BLOCK_AND_OUTPUT = re.compile(
    r"^```python\n(.*?)^```\n(?:[ \t]*\n)*(?:^```text\n(.*?)^```)?", re.S | re.M
)
CHECKER = doctest.OutputChecker()
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def python_blocks(path):
    return BLOCK.findall(path.read_text())


def blocks_with_output(path):
    """``[(code, expected output or None)]`` in page order."""
    return [(code, out or None) for code, out in BLOCK_AND_OUTPUT.findall(path.read_text())]


def test_docs_exist():
    assert DOCS, "docs/ has no Markdown files"


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_doc_code_blocks_run(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": f"docs_{path.stem}"}
    mismatches = []
    for k, (block, want) in enumerate(blocks_with_output(path)):
        code = compile(block, f"{path.name}[block {k}]", "exec")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(code, namespace)
        if want is not None and not CHECKER.check_output(want, printed.getvalue(), OPTIONS):
            mismatches.append(f"block {k} printed:\n{printed.getvalue()}the page shows:\n{want}")
    assert not mismatches, f"{path.name}: " + "\n".join(mismatches)


def test_every_python_block_is_run():
    for path in DOCS:
        assert [c for c, _ in blocks_with_output(path)] == python_blocks(path), path.name


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


def test_doctests_become_code_blocks_on_the_site():
    """`make docs` fences docstring examples (tools/griffe_doctests.py, a griffe extension)."""
    pytest.importorskip("griffe")  # the docs extra
    import importlib.util

    path = pathlib.Path(__file__).parent.parent / "tools" / "griffe_doctests.py"
    spec = importlib.util.spec_from_file_location("griffe_doctests", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert doctest.testmod(module).failed == 0
    from theano_dag.graph.op import Op

    fenced = module.fence_doctests(Op.__doc__)
    before, code = fenced.split("```pycon\n", 1)
    assert ">>>" not in before and "output_storage[0][0]" in code.split("```")[0]
