"""Theano's nnet names that Theano-PyMC's own tests import: the ops and helpers behind
them give numpy's values (float32 and float64), and the sigmoid approximations replace
``sigmoid`` only when a mode asks for them by name."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.debugmode import DebugMode
from theano_dag.compile.mode import Mode, get_default_mode
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.cpu.native import ckernel
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.gradient import verify_grad
from theano_dag.tensor.nnet import (
    Prepend_scalar_constant_to_each_row,
    Prepend_scalar_to_each_row,
    SoftmaxWithBias,
    bn,
    confusion_matrix,
    conv,
    conv2d,
    conv2d_transpose,
    h_softmax,
    hard_sigmoid,
    sigmoid,
    ultra_fast_sigmoid,
)
from theano_dag.tensor.nnet.neighbours import NeibsShapeError, images2neibs
from theano_dag.tensor.nnet.sigm import (
    compute_mul,
    is_1pexp,
    parse_mul_tree,
    perform_sigm_times_exp,
    simplify_mul,
)
from theano_dag.tensor.signal import conv as signal_conv

DTYPES = ["float32", "float64"]
OCL_OK, OCL_WHY = opencl_available()


def _np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _np_softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_with_bias_op_values_and_grad(dtype):
    rng = np.random.default_rng(0)
    x, b = tt.matrix("x", dtype=dtype), tt.vector("b", dtype=dtype)
    xv, bv = rng.normal(size=(3, 4)).astype(dtype), rng.normal(size=4).astype(dtype)
    out = theano_dag.function([x, b], SoftmaxWithBias()(x, b))(xv, bv)
    assert out.dtype == dtype
    np.testing.assert_allclose(out, _np_softmax(xv + bv), rtol=1e-5)
    verify_grad(
        lambda a, c: SoftmaxWithBias()(a, c)[:, 1], [xv.astype("float64"), bv.astype("float64")]
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_prepend_ops(dtype):
    x, s = tt.matrix("x", dtype=dtype), tt.scalar("s", dtype=dtype)
    xv = np.arange(6, dtype=dtype).reshape(2, 3)
    f = theano_dag.function([x], Prepend_scalar_constant_to_each_row(4.0)(x))
    np.testing.assert_array_equal(f(xv), np.hstack([np.full((2, 1), 4, dtype), xv]))
    g = theano_dag.function([s, x], Prepend_scalar_to_each_row()(s, x))
    out = g(np.asarray(5, dtype=dtype), xv)
    assert out.dtype == dtype and out.shape == (2, 4)
    np.testing.assert_array_equal(out[:, 0], [5, 5])
    verify_grad(
        lambda v, m: Prepend_scalar_to_each_row()(v, m), [np.asarray(2.0), xv.astype("float64")]
    )


def test_confusion_matrix_matches_numpy():
    a, p = tt.dvector("a"), tt.dvector("p")
    f = theano_dag.function([a, p], confusion_matrix(a, p))
    av, pv = np.array([2.0, 0, 2, 2, 0, 1]), np.array([0.0, 0, 2, 2, 0, 2])
    conf, order = f(av, pv)
    want_order = np.union1d(av, pv)
    want = (av[:, None] == want_order).astype("int64").T @ (pv[:, None] == want_order).astype(
        "int64"
    )
    np.testing.assert_array_equal(order, want_order)
    np.testing.assert_array_equal(conf, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_h_softmax_matches_full_softmax(dtype):
    rng = np.random.default_rng(1)
    n_in, batch, n1, n2 = 4, 3, 5, 3
    W1, b1 = rng.normal(size=(n_in, n1)).astype(dtype), rng.normal(size=n1).astype(dtype)
    W2 = rng.normal(size=(n1, n_in, n2)).astype(dtype)
    b2 = rng.normal(size=(n1, n2)).astype(dtype)
    x, y = tt.matrix("x", dtype=dtype), tt.ivector("y")
    xv = rng.normal(size=(batch, n_in)).astype(dtype)
    yv = np.array([0, 7, 14], dtype="int32")
    every = theano_dag.function([x], h_softmax(x, batch, n1 * n2, n1, n2, W1, b1, W2, b2))(xv)
    picked = theano_dag.function([x, y], h_softmax(x, batch, n1 * n2, n1, n2, W1, b1, W2, b2, y))
    cls = _np_softmax(xv @ W1 + b1)
    within = _np_softmax(np.einsum("bi,cio->bco", xv, W2) + b2)
    want = (cls[:, :, None] * within).reshape(batch, n1 * n2)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(every, want, rtol=tol)
    np.testing.assert_allclose(picked(xv, yv), want[np.arange(batch), yv], rtol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sigmoid_approximations_values(dtype):
    x = tt.vector("x", dtype=dtype)
    xv = np.linspace(-20, 20, 401).astype(dtype)
    fast = theano_dag.function([x], ultra_fast_sigmoid(x))(xv)
    hard = theano_dag.function([x], hard_sigmoid(x))(xv)
    assert fast.dtype == dtype and hard.dtype == dtype
    np.testing.assert_allclose(fast, _np_sigmoid(xv.astype("float64")), atol=0.012)
    np.testing.assert_allclose(hard, np.clip(0.2 * xv.astype("float64") + 0.5, 0, 1), atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("engine", ["py", "cpu_numpy", "cpu_c", "opencl"])
def test_ultra_fast_sigmoid_at_huge_inputs_and_nan(engine, dtype):
    # x * x overflowed past 9.2e18 (float32) or 1.3e154 (float64): inf / inf was NaN in
    # numpy, and the C form's fmin/fmax turned that NaN (and a NaN input) into 0.
    if engine == "opencl" and not OCL_OK:
        pytest.skip(f"no OpenCL: {OCL_WHY}")
    big = np.finfo(dtype).max
    xv = np.array([np.nan, -np.inf, -big, -1e19, -7, -6, 0, 6, 7, 1e19, big, np.inf], dtype)
    x = tt.vector("x", dtype=dtype)
    mode, build = {
        "py": (Mode(linker="py"), "off"),
        "cpu_numpy": (Mode(linker=CPULinker(min_plan_bytes=0)), "off"),
        "cpu_c": (Mode(linker=CPULinker(min_plan_bytes=0)), "sync"),
        "opencl": (Mode(linker="opencl"), "off"),
    }[engine]
    with ckernel.compile_mode(build):
        # times ones: fused into a Composite, which the C engines compile
        got = theano_dag.function([x], ultra_fast_sigmoid(x) * tt.ones_like(x), mode=mode)(xv)
    want = np.array([np.nan, 0, 0, 0, 0, 0, 0.5, 1, 1, 1, 1, 1])
    np.testing.assert_allclose(got, want, atol=0.012)
    assert np.isnan(got[0]) and got.dtype == dtype


def _ops(f):
    return [n.op for n in f.maker.fgraph.toposort()]


def test_sigmoid_approximation_rewrites_are_opt_in():
    x = tt.dmatrix("x")
    xv = np.array([[-50.0, -4, 0, 1, 50]])
    mode = get_default_mode()
    f = theano_dag.function([x], sigmoid(x), mode=mode)
    assert _ops(f) == [sigmoid]
    f = theano_dag.function([x], sigmoid(x), mode=mode.including("local_ultra_fast_sigmoid"))
    assert _ops(f) == [ultra_fast_sigmoid]
    np.testing.assert_allclose(f(xv), _np_sigmoid(xv), atol=0.012)
    f = theano_dag.function([x], sigmoid(x), mode=mode.including("local_hard_sigmoid"))
    assert sigmoid not in _ops(f)
    np.testing.assert_allclose(f(xv), np.clip(0.2 * xv + 0.5, 0, 1))


@pytest.mark.parametrize(
    "rewrite,error", [("local_ultra_fast_sigmoid", 0.012), ("local_hard_sigmoid", 0.08)]
)
def test_sigmoid_approximations_pass_debugmode_within_their_error(rewrite, error):
    # As Theano's, the rewrites tell DebugMode the tolerance of their approximation; it
    # raised BadOptimization (Theano's test_local_ultra_fast_sigmoid under DebugMode).
    x = tt.dmatrix("x")
    xv = np.linspace(-6, 6, 49).reshape(7, 7)
    f = theano_dag.function([x], sigmoid(x), mode=DebugMode().including(rewrite))
    assert sigmoid not in _ops(f)
    got = f(xv)
    assert 0.5 * error < np.abs(got - _np_sigmoid(xv)).max() < error


def test_multiplication_trees():
    x, y, z = tt.dvectors("x", "y", "z")
    assert parse_mul_tree((x * y) * -z) == [False, [[False, [[False, x], [False, y]]], [True, z]]]
    tree = parse_mul_tree(-x * sigmoid(x) * (y * tt.exp(-x)))
    assert perform_sigm_times_exp(tree)
    out = compute_mul(simplify_mul(tree))
    f = theano_dag.function([x, y], out)
    xv, yv = np.array([0.5, -2.0]), np.array([3.0, 4.0])
    np.testing.assert_allclose(f(xv, yv), -xv * _np_sigmoid(-xv) * yv)
    assert is_1pexp(tt.exp(x) + 1) == (False, x)
    assert is_1pexp(1 + 2 * tt.exp(x)) is None


def test_batch_norm_abstract_op_names_never_in_a_graph():
    x, g, b = tt.dmatrix("x"), tt.dvector("g"), tt.dvector("b")
    out, mean, invstd = bn.batch_normalization_train(x, g, b)
    f = theano_dag.function([x, g, b], [out, mean, invstd])
    abstract = (
        bn.AbstractBatchNormTrain,
        bn.AbstractBatchNormInference,
        bn.AbstractBatchNormTrainGrad,
    )
    assert not any(isinstance(n.op, abstract) for n in f.maker.fgraph.toposort())
    xv = np.array([[1.0, 2.0], [3.0, 6.0]])
    np.testing.assert_allclose(f(xv, np.ones(2), np.zeros(2))[1], xv.mean(axis=0))
    with pytest.raises(NotImplementedError, match="makes no node of this op"):
        bn.AbstractBatchNormTrain().make_node(x, g, b)
    with pytest.raises(ValueError, match="axes must be a non-empty tuple of ints, got 'spatial'"):
        bn.AbstractBatchNormTrain("spatial")


def test_calling_the_abstract_batch_norm_ops_builds_the_functions_graphs():
    x = tt.dtensor3("x")
    row = tt.TensorType("float64", shape=(1, None, 1))
    g, b, rm, rv = row("g"), row("b"), row("rm"), row("rv")
    rng = np.random.default_rng(8)
    xv = rng.standard_normal((4, 3, 5))
    gv, bv, rmv = (rng.standard_normal((1, 3, 1)) for _ in range(3))
    rvv = rng.random((1, 3, 1)) + 0.5
    axes = (0, 2)
    train = bn.AbstractBatchNormTrain(axes)(x, g, b, 1e-3, 0.2, rm, rv)
    want = bn.batch_normalization_train(x, g, b, axes, 1e-3, 0.2, rm, rv)
    test = bn.AbstractBatchNormInference(axes)(x, g, b, rm, rv, 1e-3)
    f = theano_dag.function([x, g, b, rm, rv], [*train, *want, test])
    vals = f(xv, gv, bv, rmv, rvv)
    assert len(train) == 5
    for got, ref in zip(vals[:5], vals[5:10]):
        np.testing.assert_allclose(got, ref, rtol=1e-12)
    np.testing.assert_allclose(vals[10], (xv - rmv) * gv / np.sqrt(rvv + 1e-3) + bv)
    abstract = (bn.AbstractBatchNormTrain, bn.AbstractBatchNormInference)
    assert not any(isinstance(n.op, abstract) for n in f.maker.fgraph.toposort())


def test_abstract_batch_norm_train_grad_is_the_gradient_at_the_batch_statistics():
    # At the batch's own statistics, Theano's gradient op gives the gradients of the output.
    x, dy = tt.dmatrix("x"), tt.dmatrix("dy")
    g, b = tt.drow("g"), tt.drow("b")
    out, mean, invstd = bn.batch_normalization_train(x, g, b, (0,), 1e-3)
    want = theano_dag.grad(None, [x, g, b], known_grads={out: dy})
    got = bn.AbstractBatchNormTrainGrad((0,))(x, dy, g, mean, invstd)
    rng = np.random.default_rng(9)
    vals = [rng.standard_normal(s) for s in ((6, 3), (6, 3), (1, 3))]
    results = theano_dag.function([x, dy, g], [*got, *want])(*vals)
    for k in range(3):
        assert results[k].shape == results[k + 3].shape
        np.testing.assert_allclose(results[k], results[k + 3], rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="x_mean must have the 2 dimensions of x, got 1"):
        bn.AbstractBatchNormTrainGrad((0,))(x, dy, g, mean[0], invstd)


def _np_conv2d_valid(img, ker):
    """True 2-D convolution (the kernel flipped), 'valid' borders, of 2-d arrays."""
    kr, kc = ker.shape
    flipped = ker[::-1, ::-1]
    rows, cols = img.shape[0] - kr + 1, img.shape[1] - kc + 1
    out = np.zeros((rows, cols))
    for r in range(rows):
        for c in range(cols):
            out[r, c] = (img[r : r + kr, c : c + kc] * flipped).sum()
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_old_conv2d_api_matches_numpy(dtype):
    rng = np.random.default_rng(4)
    x, w = tt.tensor4("x", dtype=dtype), tt.tensor4("w", dtype=dtype)
    xv = rng.normal(size=(2, 3, 6, 5)).astype(dtype)
    wv = rng.normal(size=(4, 3, 2, 3)).astype(dtype)
    out = conv.conv2d(x, w, image_shape=(2, 3, 6, 5), filter_shape=(4, 3, 2, 3), unroll_kern=2)
    got = theano_dag.function([x, w], out)(xv, wv)
    want = np.array(
        [
            [sum(_np_conv2d_valid(xv[b, c], wv[k, c]) for c in range(3)) for k in range(4)]
            for b in range(2)
        ]
    )
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == "float32" else 1e-10)
    # Values of another shape than the hints: a ValueError when the function runs.
    f = theano_dag.function([x, w], out)
    with pytest.raises(ValueError):
        f(xv[:1], wv)
    with pytest.raises(conv.ConvShapeError):
        conv.conv2d(x, w, image_shape=(2, 2, 6, 5), filter_shape=(4, 3, 2, 3))
    with pytest.raises(tt.basic.NotScalarConstantError):
        conv.conv2d(x, w, image_shape=(2, 3, 6, tt.iscalar()), filter_shape=(4, 3, 2, 3))


@pytest.mark.parametrize("dtype", DTYPES)
def test_signal_conv2d_of_matrices_and_stacks(dtype):
    rng = np.random.default_rng(5)
    img, ker = rng.normal(size=(3, 6, 5)).astype(dtype), rng.normal(size=(2, 2, 3)).astype(dtype)
    tol = 1e-4 if dtype == "float32" else 1e-10
    cases = [
        (tt.tensor3, tt.tensor3, img, ker, (3, 2)),
        (tt.matrix, tt.tensor3, img[0], ker, (2,)),
        (tt.tensor3, tt.matrix, img, ker[0], (3,)),
        (tt.matrix, tt.matrix, img[0], ker[0], ()),
    ]
    for make_x, make_w, xv, wv, lead in cases:
        x, w = make_x(dtype=dtype), make_w(dtype=dtype)
        got = theano_dag.function([x, w], signal_conv.conv2d(x, w))(xv, wv)
        xs, ws = xv.reshape((-1,) + xv.shape[-2:]), wv.reshape((-1,) + wv.shape[-2:])
        want = np.array([[_np_conv2d_valid(a, k) for k in ws] for a in xs])
        assert got.shape == lead + want.shape[-2:]
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=tol, atol=tol)
    with pytest.raises(TypeError):
        signal_conv.conv2d(tt.dtensor4(), tt.dtensor3())


def test_conv2d_transpose_is_the_input_gradient_of_conv2d():
    rng = np.random.default_rng(6)
    x, w, gy = tt.dtensor4("x"), tt.dtensor4("w"), tt.dtensor4("gy")
    xv, wv = rng.normal(size=(2, 3, 7, 7)), rng.normal(size=(4, 3, 3, 3))
    y = conv2d(x, w, border_mode="half", subsample=(2, 2))
    gyv = rng.normal(size=(2, 4, 4, 4))
    want = theano_dag.function([x, w, gy], theano_dag.grad((y * gy).sum(), x))(xv, wv, gyv)
    t = conv2d_transpose(gy, w, (2, 3, 7, 7), border_mode="half", input_dilation=(2, 2))
    np.testing.assert_allclose(theano_dag.function([gy, w], t)(gyv, wv), want, rtol=1e-10)


@pytest.mark.parametrize("mode", ["valid", "half", "full", "wrap_centered"])
def test_images2neibs_geometry_errors_are_type_and_value_errors(mode):
    # Theano raises TypeError when the patches do not fit the image as the mode requires;
    # theano_dag raised ValueError: the error is both.
    x = tt.dtensor4("x")
    f = theano_dag.function([x], images2neibs(x, (2, 2), mode=mode))
    image = np.zeros((1, 1, 5, 5))
    for kind in (TypeError, ValueError, NeibsShapeError):
        with pytest.raises(kind):
            f(image)
    ok = theano_dag.function([x], images2neibs(x, (2, 2), mode="ignore_borders"))
    assert ok(image).shape == (4, 4)
