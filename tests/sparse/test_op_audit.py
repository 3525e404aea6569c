"""Every Op class of ``theano_dag.sparse`` (its sandbox and the ops its rewrites make
included) has a row in one of the sparse op tables (test_ops, test_more_ops,
test_products, test_specialized: values against scipy on every engine, infer_shape,
gradients, and the edge cases of test_edge_cases), or an exemption below saying where
it is tested instead."""

from __future__ import annotations

import numpy as np
import test_edge_cases
from op_audit import assert_every_class_covered, op_classes
from sparse_helpers import CPU

import theano_dag
import theano_dag.sparse
import theano_dag.tensor as tt
from theano_dag import sparse as S
from theano_dag.graph.basic import io_toposort

_BASES = "a base class; its subclasses have rows"
EXEMPT = {
    "theano_dag.sparse.basic._RowVectorOp": _BASES,
    "theano_dag.sparse.basic._ScaleCSC": _BASES,
    "theano_dag.sparse.compare._ComparisonSD": _BASES,
    "theano_dag.sparse.compare._ComparisonSS": _BASES,
    "theano_dag.sparse.opt._StructuredDotParts": _BASES,
    "theano_dag.sparse.specialized._MulSDParts": _BASES,
    "theano_dag.sparse.specialized._PartsOp": _BASES,
    # a value is a draw, not a function of the inputs: tests/sparse/test_sandbox.py checks
    # the kind, shape and pattern of the draws, certain draws and means
    "theano_dag.sparse.sandbox.sp2.Binomial": "random draws: tests/sparse/test_sandbox.py",
    "theano_dag.sparse.sandbox.sp2.Multinomial": "random draws: tests/sparse/test_sandbox.py",
    "theano_dag.sparse.sandbox.sp2.Poisson": "random draws: tests/sparse/test_sandbox.py",
}


def _covered_op_classes():
    """The op classes in the rows' graphs, in their gradients' graphs where the row
    checks the gradient, and in both as the CPU engine compiles them (the specialised
    ops the sparse rewrites make)."""
    seen = set()
    for _table, row in test_edge_cases.ROWS:
        values = row.values(np.random.default_rng(0), "float64")
        syms = row.variables(values)
        out = row.build(*syms)
        outs = [out]
        if row.grad:
            sparse_out = isinstance(out.type, S.SparseType)
            cost = S.sp_sum(out, sparse_grad=True) if sparse_out else out.sum()
            outs += tt.grad(cost, syms, disconnected_inputs="ignore")
        seen.update(type(n.op) for n in io_toposort(syms, outs))
        f = theano_dag.function(syms, outs, mode=CPU, on_unused_input="ignore")
        seen.update(type(n.op) for n in f.maker.fgraph.toposort())
    return seen


def test_every_sparse_op_class_has_a_row_or_says_where_it_is_tested():
    assert_every_class_covered(
        op_classes(["theano_dag.sparse"]), _covered_op_classes(), EXEMPT, "sparse op classes"
    )
