"""The uncanonicalize pass (Theano's ``theano.tensor.opt_uncanonicalize``): each rewrite's
rewritten graph (structure) and its values against the graph before, and the pass's place
in FAST_RUN."""

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode, get_default_mode
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.rewriting import check_stack_trace, local_optimizer, out2in
from theano_dag.opt.optdb import OPT_FAST_RUN, build_optdb, optdb, register_uncanonicalize
from theano_dag.opt.rewrites.uncanonicalize import (
    local_alloc_dimshuffle,
    local_dimshuffle_alloc,
    local_dimshuffle_subtensor,
    local_reshape_dimshuffle,
)
from theano_dag.tensor.arrays import MaxAndArgmax
from theano_dag.tensor.basic import Alloc
from theano_dag.tensor.elemwise import DimShuffle, Max
from theano_dag.tensor.shape import Reshape
from theano_dag.tensor.subtensor import Subtensor

REF = Mode(linker="py", optimizer=None)


def _rewritten(rewrite, inputs, out):
    """The graph of ``out`` after ``out2in(rewrite)``, and a function of the graph before."""
    before = function(inputs, out, mode=REF)
    g = FunctionGraph(inputs, [out])
    out2in(rewrite)(g)
    return g, before


def _values(g, values):
    return function(g.inputs, g.outputs[0], mode=REF)(*values)


def _ops(g):
    return [type(n.op) for n in g.toposort()]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_alloc_of_a_left_dimshuffle_drops_it(dtype):
    x, m = tt.vector("x", dtype=dtype), tt.iscalar("m")
    out = tt.alloc(x.dimshuffle("x", 0), m, 1, x.shape[0])
    g, before = _rewritten(local_alloc_dimshuffle, [x, m], out)
    assert DimShuffle not in _ops(g) and Alloc in _ops(g)
    alloc = next(n for n in g.toposort() if isinstance(n.op, Alloc))
    assert alloc.inputs[0] is g.inputs[0]
    xv = np.arange(3, dtype=dtype)
    np.testing.assert_array_equal(_values(g, [xv, 2]), before(xv, 2))
    assert check_stack_trace(g, ops_to_check=Alloc)


def test_alloc_of_a_transposing_dimshuffle_is_kept():
    x = tt.dmatrix("x")
    g, _ = _rewritten(local_alloc_dimshuffle, [x], tt.alloc(x.T, 2, 3, 3))
    assert DimShuffle in _ops(g)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reshape_of_an_order_keeping_dimshuffle_drops_it(dtype):
    x = tt.matrix("x", dtype=dtype)
    out = tt.reshape(x.dimshuffle("x", 0, "x", 1), (1, x.shape[0] * x.shape[1], 1))
    g, before = _rewritten(local_reshape_dimshuffle, [x], out)
    assert DimShuffle not in _ops(g) and Reshape in _ops(g)
    xv = np.arange(6, dtype=dtype).reshape(2, 3)
    got = _values(g, [xv])
    assert got.shape == (1, 6, 1)
    np.testing.assert_array_equal(got, before(xv))
    # A transpose changes the order of the elements: left as it is.
    g2, before2 = _rewritten(local_reshape_dimshuffle, [x], tt.reshape(x.T, (6,)))
    assert DimShuffle in _ops(g2)
    np.testing.assert_array_equal(_values(g2, [xv]), xv.T.ravel())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_left_dimshuffle_of_an_alloc_becomes_an_alloc(dtype):
    x = tt.vector("x", dtype=dtype)
    out = tt.alloc(x, 3, 2).dimshuffle("x", "x", 0, 1)
    g, before = _rewritten(local_dimshuffle_alloc, [x], out)
    assert _ops(g) == [Alloc]
    xv = np.array([3.0, 4.0], dtype=dtype)
    got = _values(g, [xv])
    assert got.shape == (1, 1, 3, 2) and got.dtype == dtype
    np.testing.assert_array_equal(got, before(xv))


def test_dimshuffle_dropping_whole_length_one_dims_of_an_indexing_indexes_them_with_0():
    i = tt.iscalar("i")
    # x[:, :, 10:30, ::i] with the length-1 second dimension dropped.
    x = tt.TensorType("float64", shape=(None, 1, None, None))("x")
    g, before = _rewritten(
        local_dimshuffle_subtensor, [x, i], x[:, :, 10:30, ::i].dimshuffle(0, 2, 3)
    )
    assert _ops(g) == [Subtensor]
    xv = np.random.default_rng(0).normal(size=(5, 1, 40, 7))
    np.testing.assert_array_equal(_values(g, [xv, 2]), before(xv, 2))
    # A trailing dimension the indexing did not name, between kept ones.
    y = tt.TensorType("float64", shape=(None, 1, None, 1))("y")
    g, before = _rewritten(local_dimshuffle_subtensor, [y, i], y[i].dimshuffle(1))
    assert _ops(g) == [Subtensor]
    yv = np.random.default_rng(1).normal(size=(5, 1, 4, 1))
    got = _values(g, [yv, 2])
    assert got.shape == (4,)
    np.testing.assert_array_equal(got, before(yv, 2))


def test_dimshuffle_of_an_indexing_that_cut_the_dropped_dim_is_kept():
    x = tt.TensorType("float64", shape=(None, 3))("x")
    g, before = _rewritten(local_dimshuffle_subtensor, [x], x[:, 1:2].dimshuffle(0))
    assert DimShuffle in _ops(g)
    xv = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(_values(g, [xv]), [1.0, 4.0])


def test_uncanonicalize_runs_in_fast_run_after_specialize():
    names = [o.name for o in optdb.query(OPT_FAST_RUN)]
    assert names.index("specialize") < names.index("uncanonicalize") < names.index("merge2")
    x = tt.dvector("x")
    f = function([x], tt.alloc(x, 3, 2).dimshuffle("x", 0, 1), mode="FAST_RUN")
    assert not any(isinstance(n.op, DimShuffle) for n in f.maker.fgraph.apply_nodes)
    np.testing.assert_array_equal(f(np.array([1.0, 2.0])), np.ones((1, 3, 2)) * [1.0, 2.0])


def test_register_uncanonicalize():
    db = build_optdb()

    @register_uncanonicalize(db=db)
    @local_optimizer(None)
    def local_my_rule(fgraph, node):
        return False

    assert "local_my_rule" in db["uncanonicalize"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_and_argmax_without_its_index_is_max(dtype):
    x = tt.tensor3("x", dtype=dtype)
    xv = np.random.default_rng(3).normal(size=(2, 3, 4)).astype(dtype)
    xv[1, 2, 0] = np.nan
    for axis in (0, [0, 2], None):
        f = function([x], tt.max_and_argmax(x, axis)[0])
        (node,) = f.maker.fgraph.toposort()
        assert isinstance(node.op, Max)
        want = np.max(xv, axis=tuple(axis) if isinstance(axis, list) else axis)
        np.testing.assert_array_equal(f(xv), want)
        g = function([x], tt.max_and_argmax(x, axis))
        assert [type(n.op) for n in g.maker.fgraph.toposort()] == [MaxAndArgmax]
    excluded = get_default_mode().excluding("local_max_and_argmax")
    f = function([x], tt.max_and_argmax(x, 1)[0], mode=excluded)
    assert [type(n.op) for n in f.maker.fgraph.toposort()] == [MaxAndArgmax]
