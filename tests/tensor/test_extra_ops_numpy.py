"""Theano's extra_ops numpy functions: values against numpy (float32 and float64), shapes
from ``infer_shape`` (the op is gone from the shape graph), gradients by finite
differences."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.gradient import verify_grad
from theano_dag.tensor import extra_ops as eo

DTYPES = ["float32", "float64"]
RNG = np.random.default_rng(42)


def _values(inputs, out, vals):
    return theano_dag.function(inputs, out, on_unused_input="ignore")(*vals)


def _check_shape(inputs, out, vals, op_class):
    """The shape of ``out`` computed without running ``op_class``, and right."""
    f = theano_dag.function(inputs, out.shape, on_unused_input="ignore")
    assert not any(isinstance(n.op, op_class) for n in f.maker.fgraph.toposort())
    expected = theano_dag.function(inputs, out, on_unused_input="ignore")(*vals).shape
    assert tuple(f(*vals)) == expected


@pytest.mark.parametrize("dtype", DTYPES)
def test_cpu_contiguous(dtype):
    a = tt.matrix("a", dtype=dtype)
    i = tt.iscalar("i")
    val = RNG.random((4, 5)).astype(dtype)
    f = theano_dag.function([a, i], eo.cpu_contiguous(a.T[::i]))
    for step in (1, 2, 3):
        out = f(val, step)
        assert out.flags["C_CONTIGUOUS"]
        np.testing.assert_array_equal(out, val.T[::step])
    verify_grad(eo.cpu_contiguous, [RNG.random((3, 2))], rng=RNG)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_searchsorted(dtype, side):
    x, v, s = tt.vector("x", dtype=dtype), tt.tensor3("v", dtype=dtype), tt.lvector("s")
    a = (30 * RNG.random(20)).astype(dtype)
    b = (30 * RNG.random((2, 3, 4))).astype(dtype)
    a[3] = b[0, 0, 0]  # a tie, where the side matters
    sorter = np.argsort(a)
    got = _values([x, v, s], eo.searchsorted(x, v, side=side, sorter=s), [a, b, sorter])
    np.testing.assert_array_equal(got, np.searchsorted(a, b, side=side, sorter=sorter))
    _check_shape([x, v], eo.searchsorted(x, v, side=side), [np.sort(a), b], eo.SearchsortedOp)
    with pytest.raises(ValueError, match="x must be 1-d"):
        eo.searchsorted(tt.dmatrix(), v)
    with pytest.raises(ValueError, match="side must be"):
        eo.SearchsortedOp(side="middle")


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint32"])
def test_bincount(dtype):
    x, w = tt.vector("x", dtype=dtype), tt.dvector("w")
    a = RNG.integers(0, 20, size=25).astype(dtype)
    weights = RNG.random(25)
    np.testing.assert_array_equal(_values([x], eo.bincount(x), [a]), np.bincount(a))
    np.testing.assert_allclose(
        _values([x, w], eo.bincount(x, weights=w), [a, weights]), np.bincount(a, weights)
    )
    got = _values([x], eo.bincount(x, minlength=30), [a])
    np.testing.assert_array_equal(got, np.bincount(a, minlength=30))
    if dtype.startswith("int"):
        a[0] = -1
        with pytest.raises(AssertionError):
            _values([x], eo.bincount(x, assert_nonneg=True), [a])


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int64"])
def test_bincount_of_an_empty_vector(dtype):
    # numpy's: no counts (or minlength zeros); the max of no x has no value to add 1 to.
    x, w = tt.vector("x", dtype=dtype), tt.dvector("w")
    empty = np.zeros(0, dtype)
    got = _values([x], eo.bincount(x), [empty])
    assert got.shape == (0,) and got.dtype == dtype
    got = _values([x], eo.bincount(x, minlength=3), [empty])
    np.testing.assert_array_equal(got, np.bincount(empty, minlength=3))
    got = _values([x, w], eo.bincount(x, weights=w), [empty, np.zeros(0)])
    assert got.shape == (0,) and got.dtype == "float64"


def test_bincount_weights_gradient():
    idx = np.array([0, 2, 2, 1], dtype="int64")
    verify_grad(lambda w: eo.bincount(tt.constant(idx), weights=w), [RNG.random(4)], rng=RNG)


@pytest.mark.parametrize("n", [0, 1, 2])
@pytest.mark.parametrize("dtype", DTYPES)
def test_diff(dtype, n):
    x = tt.matrix("x", dtype=dtype)
    val = RNG.random((4, 5)).astype(dtype)
    for axis in (0, 1, -1):
        out = eo.diff(x, n=n, axis=axis)
        np.testing.assert_allclose(_values([x], out, [val]), np.diff(val, n, axis), rtol=1e-6)
        _check_shape([x], out, [val], eo.DiffOp)
    verify_grad(eo.DiffOp(n=n), [RNG.random(7)], rng=RNG)
    verify_grad(eo.DiffOp(n=n, axis=0), [RNG.random((5, 3))], rng=RNG)


@pytest.mark.parametrize("mode", ["FAST_RUN", "FAST_COMPILE"])
@pytest.mark.parametrize("static", [False, True])
def test_diff_gradient_of_an_axis_shorter_than_the_order_is_zeros_of_its_shape(mode, static):
    # Its adjoint pads the (empty) output n times: n rows, not the axis's 1 or 2.
    for length, n in ((1, 2), (2, 3), (1, 1), (3, 2)):
        x = tt.TensorType("float64", shape=(length if static else None, 3))("x")
        w = tt.dmatrix("w")
        g = theano_dag.grad((eo.diff(x, n=n, axis=0) * w).sum() + x.sum(), x)
        assert g.type.shape[0] == (length if static else None)
        xv, wv = RNG.random((length, 3)), RNG.random((max(length - n, 0), 3))
        got = theano_dag.function([x, w], g, mode=mode)(xv, wv)
        want = np.ones_like(xv)  # the adjoint of diff applied to w, by unit vectors
        for i in np.ndindex(xv.shape):
            e = np.zeros_like(xv)
            e[i] = 1.0
            want[i] += np.sum(np.diff(e, n=n, axis=0) * wv)
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_diff_of_order_zero_is_a_new_array():
    # np.diff(x, n=0) is x itself, and DiffOp declares no view: DebugMode raised BadViewMap
    # (Theano's TestDiffOp.test_grad under mode=DebugMode).
    x = tt.dvector("x")
    node = eo.DiffOp(n=0)(x).owner
    val = RNG.random(5)
    cell = [None]
    node.op.perform(node, [val], [cell])
    assert not np.may_share_memory(cell[0], val)
    np.testing.assert_array_equal(cell[0], val)
    f = theano_dag.function([x], eo.diff(x, n=0) * 2, mode="DebugMode")
    np.testing.assert_allclose(f(val), 2 * val)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_compress(axis):
    c, x = tt.ivector("c"), tt.dmatrix("x")
    cond = np.array([1, 0, 1], dtype="int32")
    val = RNG.random((3, 3))
    got = _values([c, x], eo.compress(c, x, axis=axis), [cond, val])
    np.testing.assert_array_equal(got, np.compress(cond, val, axis=axis))


@pytest.mark.parametrize("axis", [None, 0, 1, -1, -2])
def test_repeat_gradient_every_axis(axis):
    verify_grad(lambda x: eo.RepeatOp(axis=axis)(x, 3), [RNG.random((3, 4))], rng=RNG)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_repeat_gradient_by_a_vector_of_counts(axis):
    # Theano had no gradient for a vector of counts: each element gets the sum of the
    # output gradient over its copies (none for a count of 0).
    verify_grad(
        lambda x: eo.RepeatOp(axis=axis)(x, np.array([2, 0, 1] if axis in (0, -2) else
                                                   [1, 3, 0, 2] if axis is not None else
                                                   [1, 0, 2, 1, 3, 0, 1, 1, 2, 0, 1, 2])),
        [RNG.random((3, 4))],
        rng=RNG,
    )  # fmt: skip


@pytest.mark.parametrize("mode", ["FAST_RUN", "FAST_COMPILE", "DASK", "opencl"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_repeat_gradient_by_counts_given_at_run_time(axis, mode):
    # Counts known only when the function runs: the segment sums against numpy's, a
    # count of 0 included, and one count spread over the axis as numpy spreads it.
    if mode == "opencl":
        ok, why = opencl_available()
        if not ok:
            pytest.skip(f"no OpenCL device: {why}")
        mode = theano_dag.Mode(linker="opencl")
    x, r = tt.dmatrix("x"), tt.lvector("r")
    w = tt.dmatrix("w") if axis is not None else tt.dvector("w")
    cost = (eo.RepeatOp(axis=axis)(x, r) * w).sum()
    f = theano_dag.function([x, r, w], tt.grad(cost, x), mode=mode)
    val = RNG.random((3, 4))
    n = val.size if axis is None else val.shape[axis]
    for counts in (RNG.integers(0, 3, n), np.array([2])):
        weights = RNG.random(np.repeat(val, counts, axis=axis).shape)
        where = np.repeat(np.arange(n), np.broadcast_to(counts, (n,)))
        want = np.zeros(n if axis is None else np.moveaxis(val, axis, 0).shape)
        np.add.at(want, where, weights if axis is None else np.moveaxis(weights, axis, 0))
        want = want.reshape(val.shape) if axis is None else np.moveaxis(want, 0, axis)
        np.testing.assert_allclose(np.asarray(f(val, counts, weights)), want, rtol=1e-12)


@pytest.mark.parametrize("mode", ["FAST_RUN", "FAST_COMPILE", "DASK"])
@pytest.mark.parametrize("static", [True, False])
@pytest.mark.parametrize("axis", [None, 1])
def test_repeat_by_a_small_count_dtype_has_the_length_of_its_values(axis, static, mode):
    # infer_shape multiplied the repeats (an int8 constant 3) by a length given as a
    # Python int (100, the product of a static shape; the Dask engine's shapes): in
    # int8, 300 became 44, and the CPU engine's plan and the Dask engine's task of
    # the product with the output refused the real length.
    x = tt.TensorType("float64", shape=(10, 10) if static else (None, None))("x")
    y = eo.RepeatOp(axis=axis)(x, np.int8(30 if axis else 3))
    w = tt.TensorType("float64", shape=(None,) * y.ndim)("w")
    val = RNG.random((10, 10))
    want = np.repeat(val, 30 if axis else 3, axis=axis)
    weights = RNG.random(want.shape)
    f = theano_dag.function([x, w], [y.shape, (y * 2).sum(), y * w], mode=mode)
    shape, total, product = f(val, weights)
    assert tuple(shape) == want.shape == product.shape
    np.testing.assert_allclose(total, 2 * want.sum())
    np.testing.assert_allclose(product, want * weights)


@pytest.mark.parametrize("m", [0, 1, 2, 7])
def test_bartlett(m):
    M = tt.lscalar("M")
    np.testing.assert_allclose(_values([M], eo.bartlett(M), [m]), np.bartlett(m))
    _check_shape([M], eo.bartlett(M), [m], eo.Bartlett)
    with pytest.raises(TypeError, match="integer scalar"):
        eo.bartlett(tt.dscalar())


@pytest.mark.parametrize("dtype", DTYPES)
def test_fill_diagonal(dtype):
    a, v = tt.matrix("a", dtype=dtype), tt.scalar("v", dtype=dtype)
    for shape in ((3, 5), (5, 3)):
        val = RNG.random(shape).astype(dtype)
        expected = val.copy()
        np.fill_diagonal(expected, 2.5)
        got = _values([a, v], eo.fill_diagonal(a, v), [val, np.asarray(2.5, dtype)])
        np.testing.assert_array_equal(got, expected)
        assert got.dtype == dtype
        _check_shape([a, v], eo.fill_diagonal(a, v), [val, np.asarray(2.5, dtype)], eo.FillDiagonal)
    cube = RNG.random((3, 3, 3))
    expected = cube.copy()
    np.fill_diagonal(expected, -1.0)
    t = tt.dtensor3("t")
    np.testing.assert_array_equal(_values([t], eo.fill_diagonal(t, -1.0), [cube]), expected)
    verify_grad(eo.fill_diagonal, [RNG.random((3, 4)), np.asarray(0.5)], rng=RNG)


@pytest.mark.parametrize("offset", [-4, -1, 0, 1, 2, 5])
@pytest.mark.parametrize("dtype", DTYPES)
def test_fill_diagonal_offset(dtype, offset):
    a, v, k = tt.matrix("a", dtype=dtype), tt.scalar("v", dtype=dtype), tt.iscalar("k")
    for shape in ((3, 5), (5, 3)):
        val = RNG.random(shape).astype(dtype)
        expected = val.copy()
        rows = np.arange(shape[0])
        cols = rows + offset
        keep = (cols >= 0) & (cols < shape[1])
        expected[rows[keep], cols[keep]] = 7.0
        out = eo.fill_diagonal_offset(a, v, k)
        got = _values([a, v, k], out, [val, np.asarray(7.0, dtype), offset])
        np.testing.assert_array_equal(got, expected)
        _check_shape([a, v, k], out, [val, np.asarray(7.0, dtype), offset], eo.FillDiagonalOffset)
    verify_grad(
        lambda m, s: eo.fill_diagonal_offset(m, s, offset),
        [RNG.random((4, 5)), np.asarray(0.5)],
        rng=RNG,
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_unique(dtype):
    x = tt.matrix("x", dtype=dtype)
    val = np.array([[2, 1], [3, 2], [2, 1]], dtype=dtype)
    for flags in [(False, False, False), (True, True, True), (False, True, False)]:
        for axis in (None, 0):
            outs = eo.Unique(*flags, axis=axis)(x, return_list=True)
            got = _values([x], outs, [val])
            expected = np.unique(val, *flags, axis=axis)
            expected = expected if isinstance(expected, tuple) else (expected,)
            for g, e in zip(got, expected):
                np.testing.assert_array_equal(g, e)
    inverse = eo.unique(x, return_inverse=True, axis=0)[1]
    _check_shape([x], inverse, [val], eo.Unique)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("mode", ["raise", "wrap", "clip"])
def test_ravel_and_unravel(mode, order):
    shape = (3, 4, 5)
    flat = np.arange(60)
    multi = np.unravel_index(flat, shape, order=order)
    if mode != "raise":
        multi = (multi[0] - 1,) + multi[1:]
    got = eo.ravel_multi_index(multi, shape, mode, order).eval()
    np.testing.assert_array_equal(got, np.ravel_multi_index(multi, shape, mode, order))
    back = [v.eval() for v in eo.unravel_index(flat, shape, order)]
    for g, e in zip(back, np.unravel_index(flat, shape, order=order)):
        np.testing.assert_array_equal(g, e)
    with pytest.raises(TypeError, match="integers"):
        eo.ravel_multi_index((tt.fvector(), tt.ivector()), (3, 4))
    with pytest.raises(TypeError, match="1-d"):
        eo.ravel_multi_index(((3, 4),), ((3, 4),))


@pytest.mark.parametrize(
    "shape,in_shape",
    [((1,), (1,)), ((6, 2, 5, 3), (1,)), ((6, 2, 5, 3), (5, 1)), ((6, 2, 1, 3), (2, 1, 3))],
)
@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_to(dtype, shape, in_shape):
    x = tt.tensor(dtype, shape=tuple(1 if s == 1 else None for s in in_shape))
    val = RNG.random(in_shape).astype(dtype)
    out = eo.broadcast_to(x, shape)
    np.testing.assert_array_equal(_values([x], out, [val]), np.broadcast_to(val, shape))
    assert out.type.shape == shape
    verify_grad(lambda v: eo.broadcast_to(v, shape), [RNG.random(in_shape)], rng=RNG)


def test_broadcast_shape():
    a, b = tt.dmatrix("a"), tt.drow("b")
    shp = eo.broadcast_shape(a, b)
    f = theano_dag.function([a, b], list(shp), on_unused_input="ignore")
    assert [int(s) for s in f(np.zeros((2, 3)), np.zeros((1, 3)))] == [2, 3]
    assert eo.broadcast_shape((1, 4), (3, 1), arrays_are_shapes=True) == (3, 4)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_prod_without_zeros(dtype):
    from theano_dag.tensor.elemwise import Prod, ProdWithoutZeros

    x = tt.matrix("x", dtype=dtype)
    val = np.array([[0, 2, 3], [1, 0, 0], [0, 0, 0]], dtype=dtype)
    for axis in (None, 0, 1):
        out = ProdWithoutZeros(axis=axis)(x)
        expected = np.prod(np.where(val == 0, 1, val), axis=axis)
        np.testing.assert_array_equal(_values([x], out, [val]), expected)
        assert out.dtype == Prod(axis=axis)(x).dtype
    _check_shape([x], ProdWithoutZeros(axis=0)(x), [val[:2]], ProdWithoutZeros)


def test_scalar_type_families():
    import theano_dag.scalar as ts

    assert [str(t) for t in ts.all_types] == list(ts.basic.all_dtypes)
    assert ts.float_types == (ts.float16, ts.float32, ts.float64)
    assert all(t in ts.integer_types for t in ts.int_types + ts.uint_types)
