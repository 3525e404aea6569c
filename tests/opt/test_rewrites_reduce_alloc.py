"""Rewrites of reductions, of allocs feeding elementwise ops, and of asserts (Theano's
names)."""

import numpy as np
import pytest
from engine_modes import ENGINES, rewritten_mode  # the engines, fast_run on each

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import get_mode
from theano_dag.graph.identity_ops import DeepCopyOp
from theano_dag.tensor.arrays import Assert, assert_op
from theano_dag.tensor.basic import Alloc, Join
from theano_dag.tensor.elemwise import CAReduce

DTYPES = ["float32", "float64"]


def _nodes(f, cls):
    return [n for n in f.maker.fgraph.toposort() if isinstance(n.op, cls)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_reduction_of_a_reduction_is_one(dtype):
    a = tt.tensor3("a", dtype=dtype)
    v = np.arange(60, dtype=dtype).reshape(3, 4, 5) / 7
    for fn, ref in ((tt.sum, np.sum), (tt.prod, np.prod), (tt.max, np.max), (tt.min, np.min)):
        for d, dd in ((0, 0), (2, 0), (1, 1), ((0, 1), 0), (0, None)):
            f = theano_dag.function([a], fn(fn(a, d), dd))
            (red,) = _nodes(f, CAReduce)
            np.testing.assert_allclose(f(v), ref(ref(v, d), dd), rtol=1e-5)
    # the inner result also used elsewhere: both stay
    f = theano_dag.function([a], [a.sum(0).sum(0), a.sum(0)])
    assert len(_nodes(f, CAReduce)) == 2
    # an inner sum that casts (int8 summed in int64) is not merged with an outer one
    i = tt.tensor3("i", dtype="int8")
    f = theano_dag.function([i], i.sum(0, dtype="int8").sum(0))
    assert len(_nodes(f, CAReduce)) == 2


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_reduction_of_a_stack_is_elementwise(dtype):
    x, y, z = (tt.matrix(n, dtype=dtype) for n in "xyz")
    xv = np.array([[1, 0], [3, 4]], dtype)
    yv = np.array([[4, 0], [2, 1]], dtype)
    zv = np.array([[5, 0], [1, 2]], dtype)
    for out, want in (
        (tt.max(tt.stack([x, y]), 0), np.max((xv, yv), 0)),
        (tt.sum(tt.stack([x, y, z]), 0), np.sum((xv, yv, zv), 0)),
        (tt.prod(tt.stack([x, y.T, z]), 0), np.prod((xv, yv.T, zv), 0)),
    ):
        f = theano_dag.function([x, y, z], out, on_unused_input="ignore")
        assert not _nodes(f, (Join, CAReduce))
        got = f(xv, yv, zv)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    # another axis than the stacking one: kept
    f = theano_dag.function([x, y], tt.sum(tt.stack([x, y]), axis=1))
    assert _nodes(f, Join)
    np.testing.assert_array_equal(f(xv, yv), np.stack([xv, yv]).sum(1))


@pytest.mark.parametrize("fn", [tt.sum, tt.prod, tt.max, tt.min, tt.all, tt.any])
def test_reductions_over_length_one_dimensions(fn):
    x = tt.TensorType("int64", (True, True))("x")
    f = theano_dag.function([x], fn(x, axis=[0, 1]))
    assert not _nodes(f, CAReduce)
    for v in (0, 3):
        want = getattr(np, fn.__name__)(np.full((1, 1), v), axis=(0, 1))
        got = f(np.full((1, 1), v))
        assert got.dtype == want.dtype and got == want
    # some of the reduced dimensions have length 1: only the others are reduced
    y = tt.TensorType("float64", (True, False, True))("y")
    f = theano_dag.function([y], fn(y, axis=[0, 1]))
    (red,) = _nodes(f, CAReduce)
    assert red.inputs[0].ndim == 2
    v = np.arange(3.0).reshape(1, 3, 1)
    np.testing.assert_array_equal(f(v), getattr(np, fn.__name__)(v, axis=(0, 1)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_alloc_under_an_elemwise_goes(dtype):
    v, m = tt.TensorType(dtype, shape=(3,))("v"), tt.matrix("m", dtype=dtype)
    vv, mv = np.arange(3, dtype=dtype), np.ones((2, 3), dtype)
    # lengths of m's own shape: nothing to check
    f = theano_dag.function([v, m], tt.alloc(v, *m.shape) + m)
    assert not _nodes(f, (Alloc, Assert))
    np.testing.assert_array_equal(f(vv, mv), vv + mv)
    # a value of unknown length may be spread from a length 1, which the Elemwise
    # refuses: the alloc stays
    u = tt.vector("u", dtype=dtype)
    f = theano_dag.function([u, m], tt.alloc(u, *m.shape) + m)
    assert _nodes(f, Alloc)
    np.testing.assert_array_equal(f(vv[1:2], mv), mv + 1)
    # constant lengths: checked against m's
    f = theano_dag.function([v, m], tt.alloc(v, 2, 3) + m)
    assert not _nodes(f, Alloc) and len(_nodes(f, Assert)) == 1
    np.testing.assert_array_equal(f(vv, mv), vv + mv)
    with pytest.raises(AssertionError):
        f(vv, np.ones((3, 3), dtype))
    # through a DimShuffle that adds a dimension
    t = tt.tensor3("t", dtype=dtype)
    f = theano_dag.function([v, t], tt.alloc(v, t.shape[0], t.shape[1]).dimshuffle(0, 1, "x") + t)
    assert not _nodes(f, (Alloc, Assert))
    tv = np.ones((4, 3, 2), dtype)
    np.testing.assert_array_equal(f(vv, tv), np.broadcast_to(vv[None, :, None], (4, 3, 2)) + 1)
    # FAST_COMPILE keeps it; so does a graph with no other input of the result's shape
    f = theano_dag.function([v, m], tt.alloc(v, *m.shape) + m, mode=get_mode("FAST_COMPILE"))
    assert _nodes(f, Alloc)
    s = tt.scalar("s", dtype=dtype)
    f = theano_dag.function([v, s, m], tt.alloc(v, 2, 3) * s, on_unused_input="ignore")
    assert _nodes(f, Alloc)
    np.testing.assert_array_equal(f(vv, 2, mv), np.broadcast_to(2 * vv, (2, 3)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_alloc_under_an_advanced_increment_goes(dtype):
    # Theano's local_useless_inc_subtensor_alloc on AdvancedIncSubtensor: the increment
    # spreads the value over the indexed part itself (repeated indices add up as before);
    # lengths the part does not have stay an error
    x, y = tt.vector("x", dtype=dtype), tt.scalar("y", dtype=dtype)
    i = tt.lmatrix("i")
    z = tt.advanced_inc_subtensor(x, tt.alloc(y, *i.shape), i)
    f = theano_dag.function([x, i, y], z)
    kept = theano_dag.function(
        [x, i, y], z, mode=get_mode("FAST_RUN").excluding("local_useless_inc_subtensor_alloc")
    )
    assert not _nodes(f, Alloc) and len(_nodes(kept, Alloc)) == 1
    xv = np.arange(5, dtype=dtype) / 3
    iv = np.array([[0, 2, 2], [1, 0, 4]])
    want = xv.copy()
    np.add.at(want, iv, np.asarray(1.5, dtype))
    for g in (f, kept):
        np.testing.assert_allclose(g(xv, iv, 1.5), want, rtol=1e-6)
    wrong = tt.advanced_inc_subtensor(x, tt.alloc(y, 3, 3), i)
    with pytest.raises(AssertionError):
        theano_dag.function([x, i, y], wrong)(xv, iv, 1.5)


def test_asserts_true_conditions_go_false_ones_stay():
    x, y = tt.dscalars("xy")
    f = theano_dag.function([x], assert_op(x, tt.constant(1)))
    assert [type(n.op) for n in f.maker.fgraph.toposort()] == [DeepCopyOp]
    assert f(5) == 5
    f = theano_dag.function([x, y], Assert()(x, y, tt.constant(1)))
    (a,) = _nodes(f, Assert)
    assert len(a.inputs) == 2
    f = theano_dag.function([x, y], Assert()(x, y, tt.constant(0)))
    (a,) = _nodes(f, Assert)
    assert len(a.inputs) == 3
    with pytest.raises(AssertionError):
        f(1, 1)


def test_remove_all_assert_only_when_asked():
    x, y = tt.dscalars("xy")
    f = theano_dag.function([x, y], assert_op(x, tt.gt(y, 0)))
    assert _nodes(f, Assert)
    with pytest.raises(AssertionError):
        f(1, 0)
    mode = get_mode("FAST_RUN").including("local_remove_all_assert")
    f = theano_dag.function([x, y], assert_op(x, tt.gt(y, 0)), mode=mode)
    assert not _nodes(f, Assert)
    assert f(1, 0) == 1


def test_the_shape_of_a_scalar_needs_no_computation():
    x, y = tt.dscalars("xy")
    f = theano_dag.function([x, y], assert_op(x, tt.gt(y, 0)).shape)
    assert not _nodes(f, Assert)
    assert f(1, 0).tolist() == []


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("square", [True, False])
@pytest.mark.parametrize("swapped", [False, True])
def test_sum_of_a_spread_product_is_a_dot(engine, dtype, square, swapped):
    # sum(sqr(W[None] * G[:, None]), axis=(1, 2)) is dot(sqr(G), sqr(W).sum(0)): no
    # (n, m, k) product (the squared norms of per-example gradients); without sqr too
    W, G = tt.matrix("W", dtype=dtype), tt.matrix("G", dtype=dtype)
    a, b = W.dimshuffle("x", 0, 1), G.dimshuffle(0, "x", 1)
    prod = b * a if swapped else a * b
    y = (tt.sqr(prod) if square else prod).sum(axis=(1, 2))
    f = theano_dag.function([W, G], y, mode=rewritten_mode(engine))
    ops = [n.op for n in f.maker.fgraph.toposort()]
    assert any(type(op).__name__ in ("Dot", "Gemv", "Dot22") for op in ops), ops
    assert all(n.outputs[0].ndim < 3 for n in f.maker.fgraph.toposort())
    rng = np.random.default_rng(5)
    w = rng.normal(size=(4, 3)).astype(dtype)
    g = rng.normal(size=(5, 3)).astype(dtype)
    w64, g64 = w.astype("float64"), g.astype("float64")
    p = w64[None] * g64[:, None]
    want = ((p * p) if square else p).sum(axis=(1, 2))
    got = f(w, g)
    assert got.dtype == dtype and got.shape == (5,)
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12)


def test_sum_of_a_spread_product_stays_when_the_product_is_used_too():
    W, G = tt.dmatrix("W"), tt.dmatrix("G")
    sq = tt.sqr(W.dimshuffle("x", 0, 1) * G.dimshuffle(0, "x", 1))
    f = theano_dag.function([W, G], [sq.sum(axis=(1, 2)), sq], mode=rewritten_mode("py"))
    assert not any(
        type(n.op).__name__ in ("Dot", "Gemv", "Dot22") for n in f.maker.fgraph.toposort()
    )
    # other axes, or another spread, are not this product
    for y in (
        sq.sum(axis=(0, 2)),
        tt.sqr(W.dimshuffle("x", 1, 0) * G.dimshuffle(1, "x", 0)).sum(axis=(1, 2)),
    ):
        f = theano_dag.function([W, G], y, mode=rewritten_mode("py"))
        assert not any(
            type(n.op).__name__ in ("Dot", "Gemv", "Dot22") for n in f.maker.fgraph.toposort()
        )
