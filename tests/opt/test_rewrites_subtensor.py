"""Rewrites of indexing (Theano's names): merge, lift, read-back of what was set."""

import itertools

import numpy as np
import pytest
from engine_modes import ENGINES, rewritten_mode  # the engines, fast_run on each

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import get_mode
from theano_dag.graph.identity_ops import DeepCopyOp
from theano_dag.scan.basic import scan
from theano_dag.tensor.elemwise import Elemwise
from theano_dag.tensor.shape import MakeVector, make_vector
from theano_dag.tensor.subtensor import (
    AdvancedIncSubtensor1,
    AdvancedSubtensor1,
    IncSubtensor,
    Subtensor,
)

DTYPES = ["float32", "float64"]


def _nodes(f, cls):
    return [n for n in f.maker.fgraph.toposort() if isinstance(n.op, cls)]


def _merged_and_not(inputs, out):
    f = theano_dag.function(inputs, out)
    g = theano_dag.function(
        inputs, out, mode=get_mode("FAST_RUN").excluding("local_subtensor_merge")
    )
    return f, g


def _same_or_both_raise(f, g, *args):
    try:
        want = g(*args)
    except IndexError:
        with pytest.raises(IndexError):
            f(*args)
        return
    got = f(*args)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_two_symbolic_slices_are_one(dtype):
    x = tt.vector("x", dtype=dtype)
    a, b, c, d, e, s = tt.lscalars("abcdes")
    f, g = _merged_and_not([x, a, b, c, d, e, s], x[a:b:c][d:e:s])
    assert len(_nodes(f, Subtensor)) == 1 and len(_nodes(g, Subtensor)) == 2
    rng = np.random.default_rng(0)
    for n in (0, 1, 5):
        v = np.arange(n, dtype=dtype)
        for _ in range(150):
            a_, b_, d_, e_ = rng.integers(-7, 8, size=4)
            c_, s_ = rng.choice([-3, -2, -1, 1, 2, 3], size=2)
            got = f(v, a_, b_, c_, d_, e_, s_)
            np.testing.assert_array_equal(got, v[a_:b_:c_][d_:e_:s_])


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_slice_then_an_index_is_one_index_and_raises_as_two(dtype):
    x = tt.matrix("x", dtype=dtype)
    a, c, i = tt.lscalars("aci")
    f, g = _merged_and_not([x, a, c, i], x[a::c][i])
    assert len(_nodes(f, Subtensor)) == 1
    for n, a_, c_, i_ in itertools.product((0, 1, 4), (-5, -1, 0, 2, 6), (-2, 1, 3), range(-5, 5)):
        v = np.arange(n * 2, dtype=dtype).reshape(n, 2)
        _same_or_both_raise(f, g, v, a_, c_, i_)


@pytest.mark.parametrize("dtype", DTYPES)
def test_constant_slices_merge_to_constants(dtype):
    x = tt.matrix("x", dtype=dtype)
    f, _ = _merged_and_not([x], x[1:][::2, 1:][0])
    (sub,) = _nodes(f, Subtensor)
    v = np.arange(20, dtype=dtype).reshape(5, 4)
    np.testing.assert_array_equal(f(v), v[1:][::2, 1:][0])


def test_merge_keeps_two_when_excluded():
    x = tt.dvector("x")
    g = theano_dag.function(
        [x], x[1:][1:], mode=get_mode("FAST_RUN").excluding("local_subtensor_merge")
    )
    assert len(_nodes(g, Subtensor)) == 2


@pytest.mark.parametrize("dtype", DTYPES)
def test_subtensor_lifts_above_an_elemwise_read_once(dtype):
    # (x and z known to have the lengths the index cuts equal: see
    # test_rewrites_equal_lengths for those that are not)
    rows = tt.TensorType(dtype, shape=(2, None))
    x, z = rows("x"), rows("z")
    y = tt.scalar("y", dtype=dtype)
    f = theano_dag.function([x, y, z], tt.exp(x + y + z)[0])
    subs = _nodes(f, Subtensor)
    assert len(subs) == 2 and {n.inputs[0].name for n in subs} == {"x", "z"}
    xv = np.arange(6, dtype=dtype).reshape(2, 3) / 10
    zv = xv[::-1].copy()
    np.testing.assert_allclose(f(xv, 0.5, zv), np.exp(xv + 0.5 + zv)[0], rtol=1e-6)


def test_subtensor_does_not_lift_above_an_elemwise_read_twice():
    x = tt.dmatrix("x")
    f = theano_dag.function([x], [tt.exp(x)[0], tt.exp(x)])
    (sub,) = _nodes(f, Subtensor)
    assert isinstance(sub.inputs[0].owner.op, Elemwise)
    # nor above one with an input broadcast along some dimensions only
    r = tt.drow("r")
    f = theano_dag.function([x, r], (x + r)[0])
    (sub,) = _nodes(f, Subtensor)
    assert sub.inputs[0].owner is not None
    v = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(f(v, np.ones((1, 3))), (v + 1)[0])


def test_indexing_a_built_vector_picks_its_scalars():
    a, b, c = tt.lscalars("abc")
    v = make_vector(a, b, c)
    f = theano_dag.function([a, b, c], v[1])
    assert [type(n.op) for n in f.maker.fgraph.toposort()] == [DeepCopyOp]
    assert f(3, 4, 5) == 4
    for sub in (v[1:], v[tt.constant([2, 0])]):
        f = theano_dag.function([a, b, c], sub)
        assert [type(n.op) for n in f.maker.fgraph.toposort()] == [MakeVector]
    assert f(3, 4, 5).tolist() == [5, 3]
    # a symbolic index stays an index
    i = tt.lscalar("i")
    f = theano_dag.function([a, b, c, i], v[i])
    assert _nodes(f, Subtensor)
    assert f(3, 4, 5, -1) == 5


@pytest.mark.parametrize("dtype", DTYPES)
def test_reading_back_what_was_set_is_the_value(dtype):
    x, v = tt.matrix("x", dtype=dtype), tt.vector("v", dtype=dtype)
    i, j = tt.lscalars("ij")
    f = theano_dag.function([x, i, v], tt.set_subtensor(x[i], v)[i])
    assert not _nodes(f, IncSubtensor)
    vv = np.arange(4, dtype=dtype)
    np.testing.assert_array_equal(f(np.zeros((3, 4), dtype), 1, vv), vv)
    # an index out of range raises, as the written form's write does: the part is read
    # (a view) as the model of a fill of the value
    with pytest.raises(IndexError):
        f(np.zeros((3, 4), dtype), 3, vv)
    # a value of one element that numpy spread over the part reads back spread
    np.testing.assert_array_equal(f(np.zeros((3, 4), dtype), 1, vv[1:2]), [1, 1, 1, 1])
    # an index known in range, and a value of the part's length, read nothing
    x34 = tt.TensorType(dtype, shape=(3, 4))("x34")
    v4 = tt.TensorType(dtype, shape=(4,))("v4")
    f = theano_dag.function([x34, v4], tt.set_subtensor(x34[-3], v4)[-3])
    assert [type(n.op) for n in f.maker.fgraph.toposort()] == [DeepCopyOp]
    np.testing.assert_array_equal(f(np.zeros((3, 4), dtype), vv), vv)
    # a value of fewer dimensions is spread over the part
    f = theano_dag.function([x, i, j, v], tt.set_subtensor(x[:i, :j], v)[:i, :j])
    assert not _nodes(f, IncSubtensor) and _nodes(f, tt.Alloc)
    got = f(np.zeros((3, 4), dtype), 2, 2, vv[:2])
    np.testing.assert_array_equal(got, np.tile(vv[:2], (2, 1)))
    # another index reads what was not set: not rewritten
    f = theano_dag.function([x, i, j, v], tt.set_subtensor(x[i], v)[j])
    assert _nodes(f, IncSubtensor)
    # an increment is not a set
    f = theano_dag.function([x, i, v], tt.inc_subtensor(x[i], v)[i])
    assert _nodes(f, IncSubtensor)
    np.testing.assert_array_equal(f(np.ones((3, 4), dtype), 1, vv), vv + 1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reading_back_rows_just_set(dtype):
    x, y = tt.matrix("x", dtype=dtype), tt.matrix("y", dtype=dtype)
    rows = tt.constant(np.array([2, 0]))
    f = theano_dag.function([x, y], tt.set_subtensor(x[rows], y)[rows])
    assert not _nodes(f, AdvancedIncSubtensor1)
    yv = np.arange(6, dtype=dtype).reshape(2, 3)
    np.testing.assert_array_equal(f(np.zeros((3, 3), dtype), yv), yv)
    with pytest.raises(IndexError):  # row 2 of 2 rows: the written form's write raises
        f(np.zeros((2, 3), dtype), yv)
    # rows known in range: nothing read
    x33 = tt.TensorType(dtype, shape=(3, None))("x33")
    f = theano_dag.function([x33, y], tt.set_subtensor(x33[rows], y)[rows])
    assert not _nodes(f, (AdvancedIncSubtensor1, AdvancedSubtensor1))
    np.testing.assert_array_equal(f(np.zeros((3, 3), dtype), yv), yv)
    # a row listed twice holds the last value written: the write and the read stay
    twice = tt.constant(np.array([1, 1]))
    f = theano_dag.function([x, y], tt.set_subtensor(x[twice], y)[twice])
    assert _nodes(f, AdvancedIncSubtensor1)
    np.testing.assert_array_equal(f(np.zeros((3, 3), dtype), yv), yv[[1, 1]])
    # so does a symbolic list (it may list a row twice)
    r = tt.lvector("r")
    f = theano_dag.function([x, y, r], tt.set_subtensor(x[r], y)[r])
    assert _nodes(f, AdvancedIncSubtensor1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_setting_all_of_x_to_a_value_of_its_shape(dtype):
    x, y = tt.matrix("x", dtype=dtype), tt.matrix("y", dtype=dtype)
    for sub in (slice(None), slice(None, None, -1)):
        f = theano_dag.function([x, y], tt.set_subtensor(x[:, sub], tt.specify_shape(y, x.shape)))
        assert not _nodes(f, IncSubtensor)
        yv = np.arange(6, dtype=dtype).reshape(2, 3)
        np.testing.assert_array_equal(f(np.zeros((2, 3), dtype), yv), yv[:, sub])
        # without the shape known, y may broadcast: kept
        f = theano_dag.function([x, y], tt.set_subtensor(x[:, sub], y))
        assert _nodes(f, IncSubtensor)
    # a stride is not all of x
    f = theano_dag.function(
        [x, y], tt.set_subtensor(x[:, ::2], tt.specify_shape(y, x[:, ::2].shape))
    )
    assert _nodes(f, IncSubtensor)


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_increment_by_an_alloc_is_by_the_value(dtype):
    x, y = tt.vector("x", dtype=dtype), tt.scalar("y", dtype=dtype)
    i = tt.lscalar("i")
    z = tt.inc_subtensor(x[:i], tt.alloc(y, i))
    f = theano_dag.function([x, i, y], z)
    assert not _nodes(f, tt.Alloc)
    xv = np.arange(5, dtype=dtype)
    want = xv.copy()
    want[:3] += 2
    np.testing.assert_array_equal(f(xv, 3, 2), want)
    # the lengths the alloc asked for are still checked
    with pytest.raises(AssertionError):
        f(xv, 7, 2)
    rows = tt.lvector("rows")
    z = tt.set_subtensor(x[rows], tt.alloc(y, rows.shape[0]))
    f = theano_dag.function([x, rows, y], z)
    assert not _nodes(f, tt.Alloc)
    np.testing.assert_array_equal(f(xv, [0, 4], 9), np.array([9, 1, 2, 3, 9], dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_sum_of_increments_is_a_chain(dtype):
    w = tt.matrix("w", dtype=dtype)
    i, j = tt.lvectors("ij")
    cost = (w[i] + w[j] + w[1]).sum()
    g = theano_dag.grad(cost, w)
    f = theano_dag.function([w, i, j], g)
    for n in f.maker.fgraph.toposort():
        if isinstance(n.op, Elemwise) and "add" in str(n.op):
            assert not any(
                v.owner is not None and "IncSubtensor" in type(v.owner.op).__name__
                for v in n.inputs
            )
    wv = np.zeros((4, 3), dtype)
    want = np.zeros((4, 3), dtype)
    np.add.at(want, [0, 2], 1)
    np.add.at(want, [2, 3], 1)
    want[1] += 2
    np.testing.assert_array_equal(f(wv, [0, 2], [2, 3]), want)
    # sets are not increments: x + set_subtensor(...) stays
    x = tt.vector("x", dtype=dtype)
    f = theano_dag.function([x], x + tt.set_subtensor(x[0], 5))
    np.testing.assert_array_equal(f(np.ones(2, dtype)), [6, 2])


def test_useless_subtensor_goes():
    x = tt.dmatrix("x")
    for sub in (x[0:], x[:, : x.shape[1]], x[0 : x.shape[0], 0:]):
        f = theano_dag.function([x], tt.exp(sub))
        assert not _nodes(f, Subtensor)
    f = theano_dag.function([x], tt.exp(x[1:]))
    assert _nodes(f, Subtensor)
    s = tt.specify_shape(x, (2, 3))
    f = theano_dag.function([x], s[0:2, 0:5])
    assert not _nodes(f, Subtensor)
    f = theano_dag.function([x], s[0:1])
    assert _nodes(f, Subtensor)
    np.testing.assert_array_equal(f(np.ones((2, 3))), np.ones((1, 3)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_trailing_full_slices_and_length_one_indices_go(dtype):
    x = tt.matrix("x", dtype=dtype)
    xv = np.arange(6, dtype=dtype).reshape(2, 3)
    f = theano_dag.function([x], [x[1, :], x[1]])
    subs = _nodes(f, Subtensor)
    assert len(subs) == 1 and subs[0].op.idx_list == (("int",),)
    np.testing.assert_array_equal(f(xv)[0], xv[1])
    c = tt.col("c", dtype=dtype)
    cv = np.arange(3, dtype=dtype).reshape(3, 1)
    for sub in (c[:, 0], c[:, -1]):
        f = theano_dag.function([c], sub)
        assert not _nodes(f, Subtensor)
        np.testing.assert_array_equal(f(cv), cv[:, 0])
    # a dimension that may be longer keeps its index
    f = theano_dag.function([x], x[:, 0])
    assert _nodes(f, Subtensor)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reshape_lifts_above_a_unary_elemwise(dtype):
    x = tt.tensor3("x", dtype=dtype)
    xv = np.arange(24, dtype=dtype).reshape(2, 3, 4) / 10
    f = theano_dag.function([x], tt.exp(x).reshape((6, 4)))
    (node,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, tt.Reshape)]
    assert node.inputs[0] is f.maker.fgraph.inputs[0]
    np.testing.assert_allclose(f(xv), np.exp(xv).reshape(6, 4), rtol=1e-6)
    # the elementwise result is also an output: the reshape stays below it
    f = theano_dag.function([x], [tt.exp(x).reshape((6, 4)), tt.exp(x)])
    (node,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, tt.Reshape)]
    assert node.inputs[0].owner is not None


def test_slicing_a_float_built_vector_keeps_its_dtype():
    a, b, c = tt.dscalars("abc")
    v = MakeVector("float64")(a, b, c)
    f = theano_dag.function([a, b, c], v[:2])
    assert [type(n.op) for n in f.maker.fgraph.toposort()] == [MakeVector]
    out = f(1.5, 2.5, 3.5)
    assert out.dtype == "float64" and out.tolist() == [1.5, 2.5]


def test_a_loops_last_state_is_not_merged_away():
    # buffer[1:][-1] is what the loop's save-memory rewrite reads: not merged
    x, h0 = tt.dmatrix("x"), tt.dvector("h0")
    hs, _ = scan(lambda x_t, h: tt.tanh(h * 0.9 + x_t), sequences=x, outputs_info=h0)
    f = theano_dag.function([x, h0], hs[-1])
    (loop,) = [n for n in f.maker.fgraph.toposort() if hasattr(n.op, "store")]
    assert loop.op.store == (2,)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_an_indexed_product_indexes_its_operands(engine, dtype):
    # local_subtensor_of_dot: dot(a, b)[idx] -> dot(a[...], b[...]) when nothing else
    # reads the product: no (n, m) product is made for one row or column
    a, b = tt.matrix("a", dtype=dtype), tt.matrix("b", dtype=dtype)
    v, i = tt.vector("v", dtype=dtype), tt.lscalar("i")
    rng = np.random.default_rng(2)
    av, bv = rng.normal(size=(5, 3)).astype(dtype), rng.normal(size=(3, 4)).astype(dtype)
    vv = rng.normal(size=3).astype(dtype)
    ab = av.astype("float64") @ bv.astype("float64")
    cases = [
        (tt.dot(a, b)[1], ab[1], (1, 2)),
        (tt.dot(a, b)[i], ab[-2], (1, 2)),
        (tt.dot(a, b)[1:3], ab[1:3], (2, 2)),
        (tt.dot(a, b)[:, 2], ab[:, 2], (2, 1)),
        (tt.dot(a, b)[-1, ::-2], ab[-1, ::-2], (1, 2)),
        (tt.dot(a, b)[i, i], ab[-2, -2], (1, 1)),
        (tt.dot(a, v)[i], (av.astype("float64") @ vv)[-2], (1, 1)),
    ]
    mode = rewritten_mode(engine)
    for out, want, ndims in cases:
        f = theano_dag.function([a, b, v, i], out, mode=mode, on_unused_input="ignore")
        (prod,) = [n for n in f.maker.fgraph.apply_nodes if "Dot" in type(n.op).__name__]
        assert tuple(x.ndim for x in prod.inputs[:2]) == ndims, prod
        got = f(av, bv, vv, -2)
        assert got.dtype == dtype and got.shape == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12)
    # the product read whole too: it stays one product, indexed
    f = theano_dag.function([a, b], [tt.dot(a, b), tt.dot(a, b)[1]], mode=mode)
    prods = [n for n in f.maker.fgraph.apply_nodes if "Dot" in type(n.op).__name__]
    assert len(prods) == 1 and all(x.ndim == 2 for x in prods[0].inputs[:2])


# -- Theano's local_set_to_inc_subtensor, local_subtensor_of_alloc, the lift over
# Rebroadcast, local_useless_subtensor of a row list ------------------------------------


def _excluding(name):
    return get_mode("FAST_RUN").excluding(name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_set_rows_to_themselves_plus_y_is_an_increment(dtype):
    v = tt.matrix("v", dtype=dtype)
    rows = tt.constant(np.array([2, 0], dtype="int64"))
    r = tt.set_subtensor(v[rows], v[rows] + 3)
    f = theano_dag.function([v], r)
    g = theano_dag.function([v], r, mode=_excluding("local_set_to_inc_subtensor"))
    assert [n.op.set_instead_of_inc for n in _nodes(f, AdvancedIncSubtensor1)] == [False]
    assert not _nodes(f, AdvancedSubtensor1)  # the rows are no longer read
    assert all(n.op.set_instead_of_inc for n in _nodes(g, AdvancedIncSubtensor1))
    val = np.random.default_rng(1).standard_normal((3, 2)).astype(dtype)
    want = val.copy()
    want[[2, 0]] += 3
    for h in (f, g):
        got = h(val)
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_set_rows_plus_y_stays_a_set_when_a_row_may_repeat():
    # set: a repeated row holds its value plus the last y; inc would add every y
    v, y = tt.dmatrix("v"), tt.dmatrix("y")
    i = tt.lvector("i")
    f = theano_dag.function([v, y, i], tt.set_subtensor(v[i], v[i] + y))
    assert all(n.op.set_instead_of_inc for n in _nodes(f, AdvancedIncSubtensor1))
    val, yv, iv = np.zeros((3, 2)), np.arange(6.0).reshape(3, 2), np.array([1, 1, 0])
    want = val.copy()
    want[iv] = val[iv] + yv
    np.testing.assert_array_equal(f(val, yv, iv), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_integer_index_on_an_allocated_dimension_stays_checked(dtype):
    # alloc(v, n, 5)[i]: after the rewrite nothing would read i against n, so an index
    # out of range would return a value; the rewrite is for constants known in range
    x = tt.matrix("x", dtype=dtype)
    v = tt.constant(np.arange(5, dtype=dtype))
    i = tt.lscalar("i")
    f = theano_dag.function([x, i], tt.alloc(v, x.shape[0], x.shape[1])[i])
    assert _nodes(f, Subtensor)
    xv = np.zeros((4, 5), dtype=dtype)
    np.testing.assert_array_equal(f(xv, 1), np.arange(5, dtype=dtype))
    with pytest.raises(IndexError):
        f(xv, 4)
    g = theano_dag.function([x], tt.alloc(v, 4, x.shape[1])[1])  # known in range
    assert not _nodes(g, Subtensor)
    np.testing.assert_array_equal(g(xv), np.arange(5, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "index",
    [(slice(None), 3), (slice(3, None),), (slice(1, 3), slice(None, -1))],
)
def test_indexing_an_alloc_allocates_the_part_read(dtype, index):
    x = tt.matrix("x", dtype=dtype)
    v = tt.constant(np.arange(5, dtype=dtype))
    z = tt.alloc(v, x.shape[0], x.shape[1])[index]
    f = theano_dag.function([x], z)
    g = theano_dag.function([x], z, mode=_excluding("local_subtensor_of_alloc"))
    assert not _nodes(f, Subtensor) and _nodes(g, Subtensor)
    xv = np.zeros((4, 5), dtype=dtype)
    want = np.broadcast_to(np.arange(5, dtype=dtype), (4, 5))[index]
    for h in (f, g):
        got = h(xv)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want)


def test_an_alloc_of_a_value_of_unknown_length_keeps_its_indexing():
    # v may be 1 long (spread by the alloc) or 5 long: v[3:] differs between the two
    x, v = tt.dmatrix("x"), tt.dvector("v")
    z = tt.alloc(v, x.shape[0], x.shape[1])[:, 3:]
    f = theano_dag.function([x, v], z)
    assert _nodes(f, Subtensor)
    xv = np.zeros((2, 5))
    for vv in (np.array([7.0]), np.arange(5.0)):
        np.testing.assert_array_equal(f(xv, vv), np.broadcast_to(vv, (2, 5))[:, 3:])


def test_an_alloc_seen_through_new_axes_is_indexed_too():
    # alloc(v, 1, m) is canonical as alloc(v, m).dimshuffle("x", 0)
    x = tt.row("x", dtype="float64")
    v = tt.constant(np.arange(5.0))
    f = theano_dag.function([x], tt.alloc(v, x.shape[0], 5)[:, 3])
    assert not _nodes(f, Subtensor)
    np.testing.assert_array_equal(f(np.zeros((1, 5))), [3.0])
    # x.shape[1], not known to be v's length, and no length of the (1,) result to check
    # it with: the alloc stays, and checks it
    f = theano_dag.function([x], tt.alloc(v, x.shape[0], x.shape[1])[:, 3])
    assert _nodes(f, Subtensor)
    np.testing.assert_array_equal(f(np.zeros((1, 5))), [3.0])
    with pytest.raises(ValueError, match="cannot fill"):
        f(np.zeros((1, 7)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_indexing_of_a_rebroadcast_moves_below_it(dtype):
    x = tt.matrix("x", dtype=dtype)
    y = tt.Rebroadcast((0, True), (1, False))(x)[:2, :5]
    f = theano_dag.function([x], y)
    ops = [type(n.op) for n in f.maker.fgraph.toposort() if not isinstance(n.op, DeepCopyOp)]
    assert ops == [Subtensor, tt.Rebroadcast]
    assert f.maker.fgraph.outputs[0].type.broadcastable == (True, False)
    xv = np.arange(10, dtype=dtype).reshape(1, 10)
    np.testing.assert_array_equal(f(xv), xv[:2, :5])
    t = tt.tensor4("t", dtype=dtype)
    z = tt.Rebroadcast((0, True), (2, True))(t)[0, :, :, 1:]  # dimension 0 dropped
    f = theano_dag.function([t], z)
    assert f.maker.fgraph.outputs[0].type.broadcastable == (False, True, False)
    tv = np.arange(30, dtype=dtype).reshape(1, 10, 1, 3)
    np.testing.assert_array_equal(f(tv), tv[0, :, :, 1:])


@pytest.mark.parametrize(
    "rows, useless",
    [([0, 1], True), ([1, 0], False), ([0, 0], False), ("arange", True), ("arange2", False)],
)
def test_reading_every_row_in_order_is_the_tensor(rows, useless):
    x = tt.specify_shape(tt.dmatrix("x"), (2, 3))
    named = {"arange": tt.arange(2), "arange2": tt.arange(0, 2, 2)}
    idx = named[rows] if isinstance(rows, str) else rows
    f = theano_dag.function([x.owner.inputs[0]], tt.exp(x)[idx])
    assert bool(_nodes(f, AdvancedSubtensor1)) is not useless
    xv = np.arange(6.0).reshape(2, 3)
    npi = {"arange": [0, 1], "arange2": [0]}[rows] if isinstance(rows, str) else rows
    np.testing.assert_allclose(f(xv), np.exp(xv)[npi])


def test_x_of_an_empty_index_stays_without_local_useless_subtensor():
    n = theano_dag.shared(np.ones(()))
    t = Subtensor([])(n)
    f = theano_dag.function([], t, mode=_excluding("local_useless_subtensor"))
    assert len(_nodes(f, Subtensor)) == 1
    assert float(f()) == 1.0
