"""docs/optimization.md's tables of stable forms: every row names a registered rewrite of
theano_dag and a case of the stability corpus that checks its value and its gradient."""

import functools
import importlib.util
import pathlib
import re

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.graph.rewriting.basic import SeqOptimizer
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


def _local_names(opt, out):
    """The names of the local rewrites ``opt`` (an optimizer of a mode) may run."""
    for attr in ("local_optimizers", "opts"):
        for sub in getattr(opt, attr, None) or ():
            out.add(str(sub))
            _local_names(sub, out)
    if isinstance(opt, SeqOptimizer):
        for sub in opt:
            _local_names(sub, out)
    return out


def test_excluding_stabilize_leaves_every_stable_form_out():
    # The docs' promise: mode.excluding("stabilize") gives the written arithmetic back.
    # A stable form registered in canonicalize or specialize as well (to meet the forms
    # those passes make) ran there still: log(1 / x) became -log(x), NaN at x = -inf
    # where the written graph gives -inf (the fuzzer, seed 201, graph 1709).
    named = {n for _, cells in ROWS for n in re.findall(r"`([^`]+)`", cells[3])}
    full = _local_names(Mode(linker="py", optimizer="fast_run").optimizer, set())
    assert {"local_log_div", "local_sqrt_sqr", "local_expm1"} <= named & full
    kept = named & _local_names(
        Mode(linker="py", optimizer="fast_run").excluding("stabilize").optimizer, set()
    )
    assert not kept, f"run with stabilize excluded: {sorted(kept)}"
    x = tt.fvector("x")
    v = np.array([-np.inf, -0.0, 2.0], "float32")
    for tag in ("stabilize", "nonfinite_unsafe"):  # local_log_div carries both
        f = function([x], tt.log(1 / x), mode=Mode(linker="cpu").excluding(tag))
        with np.errstate(divide="ignore", invalid="ignore"):
            np.testing.assert_equal(f(v), np.log(1 / v))
