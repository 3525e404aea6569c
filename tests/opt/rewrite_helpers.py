"""Helpers of the rewrite tests: run rewrites on a graph, compare structure and values."""

from __future__ import annotations

import copy
import sys

import numpy as np

from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.engines.basic import PerformLinker
from theano_dag.graph.basic import is_same_graph
from theano_dag.graph.fg import FunctionGraph
from theano_dag.opt import EquilibriumOptimizer, Query, optdb
from theano_dag.opt.rewrites.constant_folding import ConstantFolding

REFERENCE = Mode(linker="py", optimizer=None)


def count_calls(fn, *args):
    """The number of Python and C function calls ``fn(*args)`` makes: a measure of work
    that a busy machine cannot change (a test of how work grows, where time would be
    noise)."""
    n = 0

    def profile(frame, event, arg):
        nonlocal n
        if event in ("call", "c_call"):
            n += 1

    sys.setprofile(profile)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return n


def reference_values(inputs, outputs, args):
    """The outputs computed by the reference engine with no rewrite at all."""
    f = function(inputs, outputs, mode=REFERENCE, on_unused_input="ignore")
    return f(*copy.deepcopy(list(args)))


def fgraph_values(fg, args):
    """The outputs of ``fg`` (as it is now) computed with ``Op.perform``."""
    fn = PerformLinker(allow_gc=False).accept(fg).make_function(unpack_single=False)
    return fn(*copy.deepcopy(list(args)))


def apply_rules(fg, *rules, fold=True):
    """Apply local ``rules`` (and constant folding) to ``fg`` until none applies."""
    opts = list(rules) + ([ConstantFolding()] if fold else [])
    EquilibriumOptimizer(opts, max_use_ratio=20).optimize(fg)
    return fg


def apply_dbs(fg, *names, exclude=()):
    """Run the entries ``names`` of the global optdb (e.g. 'canonicalize') on ``fg``."""
    optdb.query(Query(include=list(names), exclude=list(exclude))).optimize(fg)
    return fg


def assert_allclose(got, want, rtol=1e-7, atol=1e-12):
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)


def check(inputs, outputs, expected, args, rewrite, rtol=1e-7, atol=1e-12):
    """Rewrite the graph of ``outputs`` with ``rewrite(fg)``, then check its structure
    (``is_same_graph`` with each of ``expected``, built on the same ``inputs``) and its
    values (reference engine before, and after, on ``args``). Returns the fgraph."""
    want = reference_values(inputs, outputs, args)
    fg = FunctionGraph(inputs, outputs, clone=False)
    rewrite(fg)
    fg.check_integrity()
    if expected is not None:
        for k, (out, exp) in enumerate(zip(fg.outputs, expected)):
            assert is_same_graph(out, exp), f"output {k}: got\n{fg}\nexpected {exp}"
    assert_allclose(fgraph_values(fg, args), want, rtol=rtol, atol=atol)
    return fg


def ops_of(fg):
    """The string of every op of ``fg``, in topological order."""
    return [str(n.op) for n in fg.toposort()]
