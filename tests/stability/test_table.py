"""docs/optimization.md's tables of stable forms: every row names a registered rewrite of
theano_dag and a case of the stability corpus that checks its value and its gradient."""

import functools
import importlib.util
import pathlib
import re

import pytest

from theano_dag.opt.rewrites.table import RULES

ROOT = pathlib.Path(__file__).resolve().parents[2]
SECTION = "## Stable forms"


def _families():
    """``{subsection title: [row cells, ...]}`` of the section's tables."""
    text = (ROOT / "docs" / "optimization.md").read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    families, title = {}, None
    for line in text[start:end].splitlines():
        if line.startswith("### "):
            title = line[4:].strip()
            families[title] = []
        elif title and line.startswith("|") and not re.match(r"^\|[\s\-|:]+\|$", line):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] != "Theano 1.1.2":  # the header
                families[title].append(cells)
    return families


@functools.cache
def _cases():
    cases = {}
    for path in sorted((ROOT / "tests" / "stability").glob("test_*.py")):
        # by path: a test module of another folder may have the same name (test_special)
        spec = importlib.util.spec_from_file_location(f"stability_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for case in getattr(module, "CASES", ()):
            cases[case.name] = case
    return cases


FAMILIES = _families()
ROWS = [(title, cells) for title, rows in FAMILIES.items() for cells in rows]


def test_every_family_has_its_table():
    assert len(FAMILIES) >= 3
    for title, rows in FAMILIES.items():
        assert rows, f"'{title}' has no rows"
        for cells in rows:
            assert len(cells) == 5, f"'{title}': a row of {len(cells)} cells: {cells}"


@pytest.mark.parametrize("title, cells", ROWS, ids=lambda v: v if isinstance(v, str) else "")
def test_a_row_names_our_rewrite_and_its_corpus_cases(title, cells):
    registered = {rule.name for rule in RULES}
    ours = re.findall(r"`([^`]+)`", cells[3])
    assert ours, f"{title}: no rewrite of theano_dag named in {cells}"
    for name in ours:
        assert name in registered, f"{title}: `{name}` is no registered rewrite"
    cases = _cases()
    named = [a or b for a, b in re.findall(r'`([^`]+)`|"([^"]+)"', cells[4])]
    assert named, f"{title}: no corpus case named in {cells}"
    for name in named:
        assert name in cases, f"{title}: no corpus case named '{name}'"
        assert cases[name].ref_grad is not None, f"'{name}' checks no gradient"
