"""Sparse matrices between theano_dag and Theano (theano-pymc 1.1.2): the types, the
constants, the ops (mapped by name, or wrapped), values computed by both, both ways."""

import numpy as np
import pytest

theano = pytest.importorskip("theano")
TS = pytest.importorskip("theano.sparse")
T = pytest.importorskip("theano.tensor")
sp = pytest.importorskip("scipy.sparse")

from theano.graph.fg import FunctionGraph as TFunctionGraph  # noqa: E402

import theano_dag  # noqa: E402
from theano_dag import sparse as S  # noqa: E402
from theano_dag import tensor as tt  # noqa: E402
from theano_dag.formats import NoCounterpartError, convert, from_theano, to_theano  # noqa: E402
from theano_dag.graph.fg import FunctionGraph  # noqa: E402
from theano_dag.sparse.specialized import mul_s_d_csr  # noqa: E402

FAST = "FAST_COMPILE"  # Theano's Python VM: no C compilation


def _values():
    xv = sp.random(4, 5, density=0.5, format="csr", random_state=0)
    return [xv, np.random.default_rng(0).standard_normal((5, 3))]


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert sp.issparse(g) == sp.issparse(w)
        if sp.issparse(g):
            assert g.format == w.format
            g, w = g.toarray(), w.toarray()
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g, w, rtol=1e-12)


def _our_graph():
    x, b = S.csr_matrix("x", dtype="float64"), tt.dmatrix("b")
    eye = S.as_sparse_variable(sp.csr_matrix(np.eye(4, 5)), name="eye")
    y = tt.exp(S.structured_dot(S.structured_exp(x), b))
    gx, gb = theano_dag.grad(y.sum(), [x, b])
    outs = [y, gx, gb, S.add(x, eye), S.transpose(S.mul(x, x)), S.sp_sum(x, axis=0)]
    return FunctionGraph([x, b], outs, clone=False)


def test_our_sparse_graph_runs_in_theano_and_comes_back():
    fg = _our_graph()
    tfg = to_theano(fg)
    assert isinstance(tfg.inputs[0].type, TS.SparseType) and tfg.inputs[0].name == "x"
    assert [str(v.type) for v in tfg.outputs[1:2]] == ["Sparse[float64, csr]"]
    # Theano has these ops under the same names: they are Theano's own, not wrappers.
    kinds = {type(n.op).__name__ for n in tfg.toposort()}
    assert {"StructuredDot", "CSM", "CSMProperties", "StructuredDotGradCSR"} <= kinds, kinds
    assert all(
        type(n.op).__module__.startswith("theano.")
        for n in tfg.toposort()
        if type(n.op).__name__ in ("StructuredDot", "CSM", "AddSS", "Transpose")
    )
    want = theano_dag.function(fg.inputs, fg.outputs)(*_values())
    _same(theano.function(tfg.inputs, tfg.outputs, mode=FAST)(*_values()), want)
    back = from_theano(tfg)
    assert [v.type for v in back.inputs] == [v.type for v in fg.inputs]
    assert [v.type for v in back.outputs] == [v.type for v in fg.outputs]
    _same(theano_dag.function(back.inputs, back.outputs)(*_values()), want)


def test_a_theano_sparse_graph_runs_here_as_in_theano():
    x, b = TS.csc_matrix("x", dtype="float32"), T.fmatrix("b")
    y = TS.structured_dot(TS.structured_sigmoid(x), b)
    g = theano.grad(T.sqr(y).sum(), x)
    outs = [y, g, TS.dense_from_sparse(TS.mul(x, x)), TS.sp_sum(x, axis=1, sparse_grad=True)]
    tfg = TFunctionGraph([x, b], outs, clone=False)
    fg = convert(tfg, to="fgraph")
    assert fg.inputs[0].type == S.SparseType("csc", "float32")
    assert fg.outputs[1].type == S.SparseType("csc", "float32")
    kinds = {type(n.op).__name__ for n in fg.toposort()}
    assert {"StructuredDot", "CSM", "CSMProperties", "MulSS"} <= kinds, kinds
    xv = sp.random(4, 5, density=0.5, format="csc", dtype="float32", random_state=1)
    bv = np.random.default_rng(1).standard_normal((5, 2)).astype("float32")
    want = theano.function(tfg.inputs, tfg.outputs, mode=FAST)(xv, bv)
    got = theano_dag.function(fg.inputs, fg.outputs)(xv, bv)
    for g_, w in zip(got, want):
        g_, w = (v.toarray() if sp.issparse(v) else v for v in (g_, w))
        np.testing.assert_allclose(g_, w, rtol=1e-5, atol=1e-6)


def test_a_sparse_op_theano_lacks_is_wrapped_or_refused():
    x, b = S.csr_matrix("x", dtype="float64"), tt.dmatrix("b")
    data, ind, ptr, shape = S.csm_properties(x)
    out = S.CSR(mul_s_d_csr(data, ind, ptr, b, shape), ind, ptr, shape)
    fg = FunctionGraph([x, b], [out], clone=False)
    tfg = to_theano(fg)
    assert "TheanoDagOp" in {type(n.op).__name__ for n in tfg.toposort()}
    xv = sp.random(4, 5, density=0.5, format="csr", random_state=2)
    bv = np.arange(20.0).reshape(4, 5)
    got = theano.function(tfg.inputs, tfg.outputs, mode=FAST)(xv, bv)[0]
    np.testing.assert_allclose(got.toarray(), xv.multiply(bv).toarray())
    with pytest.raises(NoCounterpartError, match="MulSDCSR"):
        to_theano(fg, strict=True)


def test_a_bsr_matrix_travels_both_ways():
    x = TS.SparseType("bsr", "float64")("blocks")
    fg = from_theano(TFunctionGraph([x], [x], clone=False))
    assert fg.inputs[0].type == S.SparseType("bsr", "float64") and fg.inputs[0].name == "blocks"
    assert to_theano(fg).inputs[0].type == x.type
