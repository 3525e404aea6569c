"""theano.tensor's numpy-like vocabulary added for Theano's own tests (tensor.arrays,
ceil_intdiv, cov, conj, complex_from_polar, is_flat, autocast_float_as, the Theano names
tensor.opt/type_other/utils/scalar.constant): values against numpy in float32 and
float64 on the reference and CPU engines, shapes, gradients by finite differences."""

import warnings

import numpy as np
import pytest

import theano_dag.utils
from theano_dag import function
from theano_dag import scalar as ts
from theano_dag import tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.gradient.verify import verify_grad
from theano_dag.scalar import autocast_float, autocast_float_as

ENGINES = [Mode(linker="py"), Mode(linker="cpu")]
DTYPES = ["float32", "float64"]
RNG = np.random.default_rng(0)


def run(inputs, outputs, values, mode):
    return function(inputs, outputs, mode=mode)(*values)


@pytest.mark.parametrize("mode", ENGINES, ids=["py", "cpu"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_reshaping_and_reductions_match_numpy(dtype, mode):
    m = tt.matrix("m", dtype=dtype)
    v = RNG.standard_normal((3, 4)).astype(dtype)
    outs = run(
        [m],
        [
            tt.ptp(m, axis=0),
            tt.ptp(m),
            tt.roll(m, 1, axis=1),
            tt.roll(m, -5, axis=0),
            tt.roll(m, 2),
            tt.swapaxes(m, 0, 1),
            tt.horizontal_stack(m, m),
            tt.vertical_stack(m, m),
            tt.smallest(m, m.T.T * 0),
            tt.largest(m, 0 * m, m),
            tt.power(m, 2),
            tt.cov(m),
            tt.cov(m, rowvar=False, bias=True),
        ],
        [v],
        mode,
    )
    refs = [
        np.ptp(v, axis=0),
        np.ptp(v),
        np.roll(v, 1, axis=1),
        np.roll(v, -5, axis=0),
        np.roll(v, 2),
        v.T,
        np.hstack([v, v]),
        np.vstack([v, v]),
        np.minimum(v, 0),
        np.maximum(v, 0),
        v**2,
        np.cov(v),
        np.cov(v, rowvar=False, bias=True),
    ]
    tol = 1e-5 if dtype == "float32" else 1e-12
    for out, ref in zip(outs, refs):
        np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("mode", ENGINES, ids=["py", "cpu"])
def test_index_functions_match_numpy(mode):
    a = tt.imatrix("a")
    v = np.array([[0, 3, 0], [4, 0, 5]], dtype="int32")
    outs = run(
        [a],
        [*tt.nonzero(a), tt.flatnonzero(a), tt.nonzero_values(a), tt.nonzero(a, True)],
        [v],
        mode,
    )
    for out, ref in zip(outs, [*np.nonzero(v), np.flatnonzero(v), v[np.nonzero(v)]]):
        np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(outs[-1], np.array(np.nonzero(v)))
    p = tt.ivector("p")
    perm = np.array([2, 0, 3, 1], dtype="int32")
    inv = run([p], tt.inverse_permutation(p), [perm], mode)
    np.testing.assert_array_equal(inv, np.argsort(perm))
    assert inv.dtype == "int32"


@pytest.mark.parametrize("mode", ENGINES, ids=["py", "cpu"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_choose_and_grids(dtype, mode):
    idx = tt.lvector("i")
    c = tt.matrix("c", dtype=dtype)
    cv = RNG.standard_normal((3, 4)).astype(dtype)
    iv = np.array([0, 2, 1, 2])
    out = run([idx, c], tt.choose(idx, c), [iv, cv], mode)
    np.testing.assert_array_equal(out, np.choose(iv, cv))
    for got, ref in zip(run([], tt.mgrid[0:3, 1:5:2], [], mode), np.mgrid[0:3, 1:5:2]):
        np.testing.assert_array_equal(got, ref)
    for got, ref in zip(run([], tt.ogrid[0:3, 0:2], [], mode), np.ogrid[0:3, 0:2]):
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("mode", ENGINES, ids=["py", "cpu"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_permute_row_elements_values_and_gradient(dtype, mode):
    x = tt.matrix("x", dtype=dtype)
    y = tt.lmatrix("y")
    xv = RNG.standard_normal((2, 4)).astype(dtype)
    yv = np.array([[3, 0, 2, 1], [1, 2, 3, 0]])
    fwd, back = run(
        [x, y], [tt.permute_row_elements(x, y), tt.permute_row_elements(x, y, 1)], [xv, yv], mode
    )
    np.testing.assert_array_equal(fwd, np.take_along_axis(xv, yv, 1))
    expected = np.empty_like(xv)
    np.put_along_axis(expected, yv, xv, 1)
    np.testing.assert_array_equal(back, expected)
    # a vector of indices permutes every row the same way
    row = run([x], tt.permute_row_elements(x, np.array([1, 0, 3, 2])), [xv], mode)
    np.testing.assert_array_equal(row, xv[:, [1, 0, 3, 2]])
    if dtype == "float64":
        for inverse in (0, 1):
            verify_grad(
                lambda a, inverse=inverse: tt.permute_row_elements(a, yv, inverse),
                [xv],
                rng=np.random.default_rng(1),
            )


@pytest.mark.parametrize("mode", ENGINES, ids=["py", "cpu"])
def test_inverse_permutation_by_indices_that_repeat_fills_zeros(mode):
    # Rows of y that are no permutations: entries land where y says (the last of a
    # repeated index wins, as numpy's put), and the places no entry reaches are 0, not
    # the memory the output was given.
    x, y = tt.dmatrix("x"), tt.lmatrix("y")
    xv = np.arange(1.0, 9.0).reshape(2, 4)
    yv = np.array([[0, 0, 2, 2], [3, 3, 3, 3]])
    got = run([x, y], tt.permute_row_elements(x, y, 1), [xv, yv], mode)
    np.testing.assert_array_equal(got, [[2.0, 0.0, 4.0, 0.0], [0.0, 0.0, 0.0, 8.0]])


@pytest.mark.parametrize("mode", ENGINES, ids=["py", "cpu"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_max_and_argmax_mean_and_tri_ops(dtype, mode):
    t = tt.tensor3("t", dtype=dtype)
    v = RNG.standard_normal((2, 3, 4)).astype(dtype)
    mx, am = tt.MaxAndArgmax((0, 2))(t)
    outs = run([t], [mx, am, tt.Mean(None)(t), tt.Mean(1)(t)], [v], mode)
    flat = np.transpose(v, (1, 0, 2)).reshape(3, -1)
    np.testing.assert_allclose(outs[0], flat.max(1))
    np.testing.assert_array_equal(outs[1], flat.argmax(1))
    np.testing.assert_allclose(outs[2], v.mean(), rtol=1e-6)
    np.testing.assert_allclose(outs[3], v.mean(1), rtol=1e-6)
    assert outs[2].dtype == dtype
    n, k = tt.iscalars("n", "k")
    tri = run([n, k], tt.Tri(dtype)(n, n + 1, k), [np.int32(3), np.int32(-1)], mode)
    np.testing.assert_array_equal(tri, np.tri(3, 4, -1, dtype=dtype))
    if dtype == "float64":
        verify_grad(lambda a: tt.MaxAndArgmax((2,))(a)[0], [v], rng=np.random.default_rng(2))
        verify_grad(lambda a: tt.Mean((0, 2))(a), [v], rng=np.random.default_rng(3))


def test_assert_alloc_empty_and_scalar_conversions():
    x = tt.dvector("x")
    f = function([x], tt.opt.Assert("need positive")(x, tt.all(x > 0)))
    np.testing.assert_array_equal(f(np.ones(2)), np.ones(2))
    with pytest.raises(AssertionError, match="need positive"):
        f(-np.ones(2))
    verify_grad(lambda a: tt.opt.Assert()(a, tt.all(a > -100)), [np.ones(3)])
    e = function([], tt.AllocEmpty("float32")(2, 3))()
    assert e.shape == (2, 3) and e.dtype == "float32"
    s = ts.float64("s")
    t = tt.tensor_from_scalar(s)
    assert t.ndim == 0 and t.dtype == "float64"
    # scalar-typed inputs run on the reference engine (the CPU engine takes arrays)
    assert function([s], t * 2, mode=Mode(linker="py"))(np.float64(1.5)) == 3.0
    back = tt.scalar_from_tensor(tt.dscalar("d"))
    assert isinstance(back.type, ts.ScalarType)


@pytest.mark.parametrize("mode", ENGINES, ids=["py", "cpu"])
def test_ceil_intdiv_conj_complex_from_polar(mode):
    a, b = tt.lvectors("a", "b")
    av, bv = np.array([7, -7, 6, 0]), np.array([2, 2, 3, -5])
    out = run([a, b], tt.ceil_intdiv(a, b), [av, bv], mode)
    np.testing.assert_array_equal(out, -(-av // bv))
    for dtype, cdtype in [("float32", "complex64"), ("float64", "complex128")]:
        r, th = tt.vector("r", dtype=dtype), tt.vector("th", dtype=dtype)
        rv, tv = np.array([1.0, 2.0], dtype=dtype), np.array([0.5, -1.0], dtype=dtype)
        z, c = run([r, th], [tt.complex_from_polar(r, th), tt.conj(r)], [rv, tv], mode)
        assert z.dtype == cdtype
        np.testing.assert_allclose(z, rv * np.exp(1j * tv), rtol=1e-6)
        np.testing.assert_array_equal(c, rv)
    assert tt.is_flat(tt.dvector()) and not tt.is_flat(tt.dmatrix())
    assert tt.is_flat(tt.dtensor3(), ndim=3)


def test_autocast_float_as_and_theano_names():
    assert autocast_float.dtypes == ("float32", "float64")
    with autocast_float_as("float32"):
        assert autocast_float.dtypes == ("float32",)
        assert (tt.fvector() + 1.1).dtype == "float32"
        assert (tt.dvector() + 1.1).dtype == "float64"
    assert (tt.fvector() + 1.1).dtype == "float64"  # 1.1 is not exact in float32
    with pytest.raises(ValueError):
        with autocast_float_as("int8"):
            pass
    assert ts.constant(2.5).type.dtype == "float32"
    assert tt.NoneConst.data is None
    assert theano_dag.utils.PYTHON_INT_BITWIDTH == np.dtype("long").itemsize * 8
    # Theano returns the value itself, not a constant (issue 16: Theano's contract)
    assert tt.extract_constant(tt.constant(3).dimshuffle("x")) == 3
    x = tt.dvector()
    assert tt.extract_constant(x) is x
    assert tt.default(None, x) is x
    assert tt.stacklists([[1.0, 2.0], [3.0, 4.0]]).eval().tolist() == [[1, 2], [3, 4]]


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_methods_of_variables(dtype):
    x = tt.matrix("x", dtype=dtype)
    v = RNG.standard_normal((3, 4)).astype(dtype)
    np.testing.assert_array_equal(x.ravel().eval({x: v}), v.ravel())
    np.testing.assert_array_equal(x.argsort().eval({x: v}), v.argsort())
    np.testing.assert_array_equal(x.argsort(0).eval({x: v}), v.argsort(0))
    np.testing.assert_allclose(x.cumsum().eval({x: v}), v.cumsum(), rtol=1e-5)
    np.testing.assert_allclose(x.cumprod(1).eval({x: v}), v.cumprod(1), rtol=1e-5)
    np.testing.assert_array_equal(x.conj().eval({x: v}), v)
    np.testing.assert_array_equal(x.conjugate().eval({x: v}), v)
    np.testing.assert_allclose(x.ptp(1).eval({x: v}), np.ptp(v, 1), rtol=1e-6)
    np.testing.assert_array_equal(x.swapaxes(0, 1).eval({x: v}), v.T)
    w = np.where(v > 0, v, 0)
    np.testing.assert_array_equal(x.nonzero_values().eval({x: w}), w[w != 0])
    for got, ref in zip(x.nonzero(), np.nonzero(w)):
        np.testing.assert_array_equal(got.eval({x: w}), ref)


@pytest.mark.parametrize("mode", ENGINES, ids=["py", "cpu"])
def test_theanos_convert_to_ops_cast_as_numpy(mode):
    from theano_dag.tensor import basic

    x = tt.dvector("x")
    v = np.array([-1.7, 0.2, 3.9])
    for dt in ("int8", "int32", "int64", "float32", "float64"):
        out = run([x], getattr(basic, f"_convert_to_{dt}")(x), [v], mode)
        assert out.dtype == dt
        np.testing.assert_array_equal(out, v.astype(dt))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_stack_takes_theanos_two_interfaces(dtype):
    a, b = tt.vector("a", dtype=dtype), tt.vector("b", dtype=dtype)
    va, vb = np.arange(3, dtype=dtype), np.arange(3, 6, dtype=dtype)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        forms = [
            (tt.stack([a, b]), 0),
            (tt.stack([a, b], 1), 1),
            (tt.stack([a, b], axis=-1), -1),
            (tt.stack(tensors=[a, b], axis=1), 1),
        ]
    assert not caught
    for out, axis in forms:
        got = function([a, b], out)(va, vb)
        np.testing.assert_array_equal(got, np.stack([va, vb], axis=axis))
        assert got.dtype == dtype
    with pytest.warns(DeprecationWarning, match=r"stack\(a, b, \.\.\.\) is deprecated"):
        old = tt.stack(a, b)
    np.testing.assert_array_equal(function([a, b], old)(va, vb), np.stack([va, vb]))
    for axis in (2, -3):
        with pytest.raises(IndexError, match=f"stack: axis {axis} is out of range for 1-d"):
            tt.stack([a, b], axis)
    with pytest.raises(TypeError, match="stack: expected a non-empty list of tensors"):
        tt.stack([])
    with pytest.raises(TypeError, match="given both by position and as 'tensors'"):
        tt.stack([a], tensors=[b])


def test_join_of_one_tensor_is_that_tensor():
    x = tt.dmatrix("x")
    assert tt.join(0, x) is x
    assert tt.concatenate([x], axis=1) is x
    f = function([x], tt.join(1, [x]))
    v = np.arange(6.0).reshape(2, 3)
    out = f(v)
    np.testing.assert_array_equal(out, v)
    assert out is not v  # the function's output is still its own array


def test_join_axis_out_of_range_is_an_index_error_as_in_theano():
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    for axis in (2, -3):
        with pytest.raises(IndexError, match=f"Join: axis {axis} is out of range for 2-d"):
            tt.join(axis, a, b)
    # numpy's AxisError: also the ValueError it was
    with pytest.raises(ValueError, match="Join: axis 2 is out of range"):
        tt.join(2, a, b)


DOT_SHAPES = [((2, 3, 4), (4, 5)), ((2, 3, 4), (4,)), ((2, 1, 3, 2), (2, 6)), ((3, 4), (2, 4, 5))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("linker", ["cpu", "py", "opencl"])
@pytest.mark.parametrize("shapes", DOT_SHAPES, ids=str)
def test_dot_of_more_than_two_dimensions_is_numpys(dtype, linker, shapes):
    if linker == "opencl":
        pytest.importorskip("pyopencl")
    mode = Mode(linker=linker)
    sa, sb = shapes
    a = tt.tensor(dtype, shape=(None,) * len(sa))
    b = tt.tensor(dtype, shape=(None,) * len(sb))
    rng = np.random.default_rng(0)
    va, vb = rng.standard_normal(sa).astype(dtype), rng.standard_normal(sb).astype(dtype)
    out = function([a, b], tt.dot(a, b), mode=mode)(va, vb)
    ref = np.dot(va, vb)
    assert out.shape == ref.shape and out.dtype == dtype
    np.testing.assert_allclose(out, ref, rtol=1e-5 if dtype == "float32" else 1e-12)


def test_dot_of_a_3d_by_a_2d_tensor_is_one_matrix_product_with_its_gradient():
    x, w = tt.dtensor3("x"), tt.dmatrix("w")
    y = tt.dot(x, w)
    assert isinstance(y.owner.inputs[0].owner.op, tt.Dot)  # reshape(dot(rows, w))
    rng = np.random.default_rng(1)
    verify_grad(
        lambda x, w: tt.dot(x, w), [rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))]
    )
    verify_grad(
        lambda x, w: tt.dot(x, w), [rng.standard_normal((3, 4)), rng.standard_normal((2, 4, 5))]
    )
