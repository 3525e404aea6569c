"""Sparse matrices in the graph formats: the dict formats and PyTensor's graphs carry
them both ways (types, constants and values); the OpGraph, which holds dense tensors,
refuses them naming the variable. (Theano's graphs: tests_theano/.)"""

import numpy as np
import pytest

sp = pytest.importorskip("scipy.sparse")

import theano_dag  # noqa: E402
from theano_dag import sparse as S  # noqa: E402
from theano_dag import tensor as tt  # noqa: E402
from theano_dag.formats import (  # noqa: E402
    UnsupportedOperationError,
    convert,
    fgraph_to_opgraph,
    from_pytensor,
    to_pytensor,
)
from theano_dag.formats.foreign.flavor import our_type  # noqa: E402
from theano_dag.formats.opgraph import OpGraph, OpGraphError, Tensor, evaluate  # noqa: E402
from theano_dag.formats.opgraph.nodes import Permute  # noqa: E402
from theano_dag.formats.pytensor_interop import PyTensorFlavor  # noqa: E402
from theano_dag.graph.basic import is_same_graph  # noqa: E402
from theano_dag.graph.fg import FunctionGraph  # noqa: E402


def _sparse_graph():
    """A graph with sparse inputs, a sparse constant, sparse and dense outputs, and the
    gradient with respect to the sparse input."""
    x, b = S.csr_matrix("x", dtype="float64"), tt.dmatrix("b")
    c = S.as_sparse_variable(sp.csr_matrix(np.eye(4)), name="eye")
    y = tt.exp(S.structured_dot(S.structured_exp(x), b))
    gx = theano_dag.grad(y.sum(), x)
    outs = [y, gx, S.add(c, x), S.sp_sum(S.transpose(x), axis=0)]
    return FunctionGraph([x, b], outs, clone=False)


def _values():
    xv = sp.random(4, 4, density=0.5, format="csr", random_state=0)
    return [xv, np.random.default_rng(0).standard_normal((4, 3))]


def _same_values(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert sp.issparse(g) == sp.issparse(w)
        if sp.issparse(g):
            assert g.format == w.format and g.dtype == w.dtype
            g, w = g.toarray(), w.toarray()
        np.testing.assert_allclose(g, w, rtol=1e-12)


def _run(fg, values):
    return theano_dag.function(fg.inputs, fg.outputs)(*values)


@pytest.mark.parametrize("fmt", ["tuple_dag", "dag", "index_dag"])
def test_the_dict_formats_carry_sparse_variables_both_ways(fmt):
    fg = _sparse_graph()
    graph = convert(fg, to=fmt)
    keys = [v for k in graph for v in (k if isinstance(k, tuple) else (k,))]
    # The sparse variables themselves are keys, types and all.
    assert any(isinstance(getattr(k, "type", None), S.SparseType) for k in keys)
    back = convert(graph, to="fgraph", inputs=fg.inputs, outputs=fg.outputs)
    assert [v.type for v in back.outputs] == [v.type for v in fg.outputs]
    assert all(is_same_graph(a, b) for a, b in zip(fg.outputs, back.outputs))
    _same_values(_run(back, _values()), _run(fg, _values()))


def test_a_unidag_keeps_the_sparse_jobs():
    fg = _sparse_graph()
    dag = convert(fg, to="dag")
    unidag = convert(dag, to="unidag")
    jobs = theano_dag.formats.dag_jobs(dag)
    again = theano_dag.formats.unidag_to_dag(unidag, jobs)
    assert again == dag
    names = {type(entry["fn"]).__name__ for entry in jobs.values()}
    assert {"StructuredDot", "CSM", "CSMProperties", "AddSS"} <= names


def test_the_opgraph_refuses_sparse_matrices_naming_them():
    fg = _sparse_graph()
    with pytest.raises(UnsupportedOperationError, match=r"x is a sparse matrix \(Sparse"):
        fgraph_to_opgraph(fg)
    # A dense input whose graph makes a sparse matrix inside: that one is named.
    m = tt.dmatrix("m")
    inner = S.csc_from_dense(m)
    inner.name = "inner"
    dense = FunctionGraph([m], [S.dense_from_sparse(inner) * 2], clone=False)
    with pytest.raises(UnsupportedOperationError, match="inner is a sparse matrix"):
        convert(dense, to="opgraph")
    with pytest.raises(TypeError, match="Tensor A: its value is a scipy.sparse matrix"):
        Tensor("A", value=sp.eye(2, format="csr"))
    g = OpGraph()
    a, p, c = g.add_node(Tensor("A")), g.add_node(Permute()), g.add_node(Tensor("C"))
    g.add_edge(a, p, "i,j")
    g.add_edge(p, c, "i,j")
    with pytest.raises(OpGraphError, match=r"node 0 \(A\) is a scipy.sparse matrix"):
        evaluate(g, {a: sp.eye(2, format="csr")})
    np.testing.assert_array_equal(evaluate(g, {a: np.eye(2)})[c], np.eye(2))


# -- PyTensor (its sparse values are scipy.sparse matrices too) ---------------------------


def test_pytensor_graphs_carry_sparse_types_both_ways():
    pytensor = pytest.importorskip("pytensor")
    ps = pytest.importorskip("pytensor.sparse")
    fg = _sparse_graph()
    pfg = to_pytensor(fg)
    assert [str(v.type.format) for v in pfg.inputs[:1]] == ["csr"]
    assert isinstance(pfg.inputs[0].type, ps.SparseTensorType)
    assert isinstance(pfg.outputs[1].type, ps.SparseTensorType)  # the gradient
    mode = pytensor.compile.mode.Mode(linker="py", optimizer=None)
    got = pytensor.function(pfg.inputs, pfg.outputs, mode=mode)(*_values())
    _same_values(got, _run(fg, _values()))
    back = from_pytensor(pfg)
    assert [v.type for v in back.inputs] == [v.type for v in fg.inputs]
    assert [v.type for v in back.outputs] == [v.type for v in fg.outputs]
    _same_values(_run(back, _values()), _run(fg, _values()))


def test_a_pytensor_sparse_graph_runs_here():
    pytest.importorskip("pytensor")
    ps = pytest.importorskip("pytensor.sparse")
    pt = pytest.importorskip("pytensor.tensor")
    from pytensor.graph.fg import FunctionGraph as PFunctionGraph

    x, b = ps.csc_matrix("x", dtype="float32"), pt.fmatrix("b")
    y = ps.structured_dot(x, b)
    pfg = PFunctionGraph([x, b], [y, ps.transpose(x), ps.sp_sum(x, axis=1)], clone=False)
    fg = from_pytensor(pfg)
    assert fg.inputs[0].type == S.SparseType("csc", "float32")
    assert fg.outputs[1].type == S.SparseType("csr", "float32")
    xv = sp.random(3, 4, density=0.5, format="csc", dtype="float32", random_state=1)
    bv = np.ones((4, 2), "float32")
    got = _run(fg, [xv, bv])
    np.testing.assert_allclose(got[0], xv @ bv, rtol=1e-6)
    assert got[1].format == "csr"
    np.testing.assert_allclose(got[1].toarray(), xv.T.toarray())
    np.testing.assert_allclose(got[2], np.asarray(xv.sum(axis=1)).ravel(), rtol=1e-6)
    # Each node maps to our op of its name, or runs PyTensor's own perform.
    kinds = {type(n.op).__name__ for n in fg.toposort()}
    assert kinds <= {"StructuredDot", "Transpose", "SpSum", "ForeignOp"}, kinds


def test_a_bsr_matrix_travels_and_an_unknown_format_is_refused_naming_it():
    pytest.importorskip("pytensor")
    ps = pytest.importorskip("pytensor.sparse")
    from pytensor.graph.fg import FunctionGraph as PFunctionGraph

    x = ps.SparseTensorType("bsr", "float64")("blocks")
    fg = from_pytensor(PFunctionGraph([x], [x], clone=False))
    assert fg.inputs[0].type == S.SparseType("bsr", "float64")
    assert to_pytensor(fg).inputs[0].type.format == "bsr"

    class Coo:  # a sparse type of a format no package here has
        format, dtype = "coo", "float64"

    fl = PyTensorFlavor().load("test")  # a flavor of its own, told that Coo is sparse
    fl.SparseType = Coo
    with pytest.raises(NotImplementedError, match="m is a coo sparse matrix"):
        our_type(fl, Coo(), x.type("m"))
