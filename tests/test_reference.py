"""The API reference (docs/reference/): a page per module whose entries are exactly the
module's ``__all__``, each entry with an example that runs (and prints what the page
shows), and an index with one line per entry linking to it."""

import contextlib
import doctest
import importlib
import io
import pathlib
import re

import pytest

REF = pathlib.Path(__file__).parent.parent / "docs" / "reference"
PAGES = sorted(p for p in REF.glob("*.md") if p.name != "index.md")
# A page documents one module, or several whose names it gathers (`a`, `b` and `c`).
TITLE = re.compile(r"\A# (`theano_dag(?:\.\w+)*`(?:(?:, | and )`theano_dag(?:\.\w+)*`)*)")
MODULE = re.compile(r"`(theano_dag(?:\.\w+)*)`")
ENTRY = re.compile(r"^### `(\w+)`$", re.M)
BLOCK_AND_OUTPUT = re.compile(
    r"^```python\n(.*?)^```\n(?:[ \t]*\n)*(?:^```text\n(.*?)^```)?", re.S | re.M
)
INDEX_LINE = re.compile(r"^- \[`(\w+)`\]\((\w+\.md)#([\w-]+)\): \S", re.M)


def modules_of(page):
    match = TITLE.match(page.read_text())
    assert match, f"{page.name}: the first line must be '# `theano_dag.<module>`...'"
    # The modules, even where a name shadows one (`theano_dag.scan` the function).
    return [importlib.import_module(name) for name in MODULE.findall(match.group(1))]


def entries(page):
    return ENTRY.findall(page.read_text())


def test_there_are_reference_pages():
    assert PAGES and (REF / "index.md").exists()


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_a_page_has_one_entry_per_name_of_the_modules_all(page):
    names = entries(page)
    assert len(names) == len(set(names)), f"{page.name}: an entry appears twice"
    public = sorted({name for module in modules_of(page) for name in module.__all__})
    assert sorted(names) == sorted(public), (
        f"{page.name}: missing {sorted(set(public) - set(names))}, "
        f"not in __all__ {sorted(set(names) - set(public))}"
    )


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_entry_has_an_example(page):
    sections = ENTRY.split(page.read_text())[1:]  # name, body, name, body...
    for name, body in zip(sections[::2], sections[1::2]):
        body = body.split("\n## ")[0]  # up to the next group
        assert "```python\n" in body, f"{page.name}: the entry {name} has no example"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_reference_examples_run_and_print_what_the_page_shows(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": f"reference_{page.stem}"}
    checker, options = doctest.OutputChecker(), doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    for k, (code, want) in enumerate(BLOCK_AND_OUTPUT.findall(page.read_text())):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"{page.name}[block {k}]", "exec"), namespace)
        if want:
            assert checker.check_output(
                want, printed.getvalue(), options
            ), f"{page.name} block {k} printed:\n{printed.getvalue()}the page shows:\n{want}"


def test_the_index_links_every_entry_once_to_its_heading():
    markdown = pytest.importorskip("markdown")  # the docs extra (mkdocs)
    index = (REF / "index.md").read_text()
    links = INDEX_LINE.findall(index)
    assert len(links) == len(set(links))
    want = set()
    for page in PAGES:
        # The ids mkdocs gives the headings (its toc extension: `Scan` after `scan` is scan_1).
        html = markdown.markdown(page.read_text(), extensions=["toc"])
        ids = re.findall(r'<h3 id="([^"]+)"><code>(\w+)</code></h3>', html)
        want |= {(name, page.name, anchor) for anchor, name in ids}
    assert set(links) == want, (sorted(want - set(links)), sorted(set(links) - want))
