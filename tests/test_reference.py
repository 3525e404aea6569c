"""The API reference (docs/reference/): pages whose entries are exactly their module's
``__all__`` (a large module spreads over several pages with the same title module, whose
entries together are its ``__all__``), each entry with an example that runs (and prints
what the page shows), and an index with one line per name linking to its entry.

An entry is a heading ``### `name` ``; an entry for a family of names (``dscalar``,
``fscalar``, ...) may list the others on a line ``Also: `a`, `b`, ...`` right below its
heading, and then covers each of them."""

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
# The other names of a family entry: the first paragraph of its body.
ALSO = re.compile(r"\A\s*Also: (`\w+`(?:,\s+`\w+`)*)\n")
BLOCK_AND_OUTPUT = re.compile(
    r"^```python\n(.*?)^```\n(?:[ \t]*\n)*(?:^```text\n(.*?)^```)?", re.S | re.M
)
INDEX_LINE = re.compile(r"^- \[`(\w+)`\]\((\w+\.md)#([\w-]+)\): \S", re.M)


def modules_of(page):
    match = TITLE.match(page.read_text())
    assert match, f"{page.name}: the first line must be '# `theano_dag.<module>`...'"
    # The modules, even where a name shadows one (`theano_dag.scan` the function).
    return [importlib.import_module(name) for name in MODULE.findall(match.group(1))]


def sections(page):
    """(heading name, every name the entry covers, body) per entry, in page order."""
    parts = ENTRY.split(page.read_text())[1:]  # name, body, name, body...
    out = []
    for name, body in zip(parts[::2], parts[1::2]):
        body = body.split("\n## ")[0]  # up to the next group
        also = ALSO.match(body)
        names = [name] + (re.findall(r"`(\w+)`", also.group(1)) if also else [])
        out.append((name, names, body))
    return out


def entries(page):
    return [name for _, names, _ in sections(page) for name in names]


def module_key(page):
    return tuple(sorted(module.__name__ for module in modules_of(page)))


# Pages grouped by the modules their titles name: together, one group's entries are
# exactly those modules' __all__ (theano_dag.tensor spreads over several pages).
GROUPS = {}
for _page in PAGES:
    GROUPS.setdefault(module_key(_page), []).append(_page)


def test_there_are_reference_pages():
    assert PAGES and (REF / "index.md").exists()


# The vocabulary the reference documents: a page that goes missing fails here rather than
# leaving its module out of the checks above.
VOCABULARY = {
    "theano_dag.tensor",
    "theano_dag.tensor.nnet",
    "theano_dag.tensor.signal.pool",
    "theano_dag.tensor.random",
    "theano_dag.tensor.linalg",
    "theano_dag.scan",
    "theano_dag.sparse",
    "theano_dag.compile",
    "theano_dag.gradient",
}


def test_the_reference_has_pages_for_the_whole_vocabulary():
    documented = {module for key in GROUPS for module in key}
    assert VOCABULARY <= documented, f"no reference page for {sorted(VOCABULARY - documented)}"


@pytest.mark.parametrize("key", sorted(GROUPS), ids=[" ".join(k) for k in sorted(GROUPS)])
def test_the_pages_of_modules_have_one_entry_per_name_of_their_all(key):
    pages = GROUPS[key]
    names = [name for page in pages for name in entries(page)]
    where = ", ".join(page.name for page in pages)
    twice = sorted({name for name in names if names.count(name) > 1})
    assert not twice, f"{where}: entries appear twice: {twice}"
    public = {name for module in modules_of(pages[0]) for name in module.__all__}
    assert sorted(names) == sorted(public), (
        f"{where}: missing {sorted(public - set(names))}, "
        f"not in __all__ {sorted(set(names) - public)}"
    )


def test_the_tensor_reference_spreads_over_several_pages():
    # The family format and page groups are used, not only allowed.
    pages = GROUPS[("theano_dag.tensor",)]
    assert len(pages) > 1
    assert any(len(names) > 1 for page in pages for _, names, _ in sections(page))


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_entry_has_an_example(page):
    for name, _, body in sections(page):
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
        assert [name for _, name in ids] == [name for name, _, _ in sections(page)]
        for (anchor, _), (_, names, _) in zip(ids, sections(page)):
            want |= {(name, page.name, anchor) for name in names}
    assert set(links) == want, (sorted(want - set(links)), sorted(set(links) - want))
