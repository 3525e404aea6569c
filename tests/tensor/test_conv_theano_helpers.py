"""Theano's convolution helpers and correlation ops (``abstract_conv``'s shape functions,
separable and causal convolutions, bilinear upsampling; ``corr.CorrMM``,
``corr3d.Corr3dMM``): values against numpy, for float32 and float64."""

from __future__ import annotations

import math

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.config import config
from theano_dag.gradient.verify import verify_grad
from theano_dag.tensor.nnet import abstract_conv as ac
from theano_dag.tensor.nnet import blocksparse, conv2d, conv3d, conv3d2d
from theano_dag.tensor.nnet.corr import CorrMM, CorrMM_gradInputs, CorrMM_gradWeights
from theano_dag.tensor.nnet.corr3d import Corr3dMM, Corr3dMMGradWeights

DTYPES = ["float32", "float64"]


def _tol(dtype):
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-10}


@pytest.mark.parametrize("b", ["valid", "half", "full", (0, 2)])
@pytest.mark.parametrize("d", [1, 2])
def test_gradient_shapes_invert_the_output_shape(b, d):
    for i in range(3, 9):
        for k in range(1, 4):
            image, kernel = (5, 6, i, i + 1), (7, 6, k, k)
            out = ac.get_conv_output_shape(image, kernel, b, (1, 1), (d, d))
            if min(out[2:]) < 1:
                continue
            assert ac.get_conv_gradinputs_shape(kernel, out, b, (1, 1), (d, d)) == image
            assert ac.get_conv_gradinputs_shape(kernel, out, b, (2, 1), (d, d))[2] is None
            want = kernel[:2] + (None, None) if b == "half" else kernel
            assert ac.get_conv_gradweights_shape(image, out, b, (1, 1), (d, d)) == want
            assert ac.check_conv_gradinputs_shape(image, kernel, out, b, (1, 1), (d, d))
            wrong = out[:2] + (out[2] + 1, out[3])
            assert not ac.check_conv_gradinputs_shape(image, kernel, wrong, b, (1, 1), (d, d))
            assert ac.check_conv_gradinputs_shape(
                image, kernel, (None, None, out[2], None), b, (1, 1), (d, d)
            )


def test_assert_conv_shape_and_assert_shape():
    shape = tuple(tt.iscalar() for _ in range(4))
    f = theano_dag.function(shape, ac.assert_conv_shape(shape))
    assert [int(v) for v in f(0, 0, 1, 1)] == [0, 0, 1, 1]
    for bad in ((3, 3, 3, 0), (3, -1, 3, 3)):
        with pytest.raises(AssertionError):
            f(*bad)
    with pytest.raises(ValueError):
        ac.assert_conv_shape((2, 3, 0, 4))
    x, s = tt.tensor4(), tt.iscalar()
    with config.change_flags(conv__assert_shape=True):
        g = theano_dag.function([x, s], ac.assert_shape(x, [None, s, None, None]))
        w = tt.tensor4()
        h = theano_dag.function([x, w], conv2d(x, w, input_shape=(1, 2, 5, 5)))
    v = np.zeros((1, 2, 5, 5), dtype=x.dtype)
    assert g(v, 2).shape == v.shape
    with pytest.raises(AssertionError):
        g(v, 3)
    with pytest.raises(AssertionError):
        h(np.zeros((1, 2, 6, 5), dtype=x.dtype), np.zeros((1, 2, 2, 2), dtype=x.dtype))


def _np_corr2d(img, ker, pad=(0, 0)):
    """Valid cross-correlation of (B, C, H, W) images with (F, C, h, w) kernels."""
    img = np.pad(img, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    h, w = ker.shape[2:]
    rows, cols = img.shape[2] - h + 1, img.shape[3] - w + 1
    out = np.zeros((img.shape[0], ker.shape[0], rows, cols))
    for r in range(rows):
        for c in range(cols):
            out[:, :, r, c] = np.einsum("bchw,fchw->bf", img[:, :, r : r + h, c : c + w], ker)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_corrmm_correlates_and_its_gradients_need_no_shape(dtype):
    rng = np.random.default_rng(0)
    x, w = tt.tensor4("x", dtype=dtype), tt.tensor4("w", dtype=dtype)
    xv = rng.normal(size=(2, 3, 6, 5)).astype(dtype)
    wv = rng.normal(size=(4, 3, 3, 2)).astype(dtype)
    y = CorrMM(border_mode=(1, 0))(x, w)
    got = theano_dag.function([x, w], y)(xv, wv)
    np.testing.assert_allclose(got, _np_corr2d(xv, wv, (1, 0)), **_tol(dtype))
    # The same as the flipped-filter convolution of the flipped filters.
    flipped = theano_dag.function([x, w], conv2d(x, w[:, :, ::-1, ::-1], border_mode=(1, 0)))
    np.testing.assert_allclose(got, flipped(xv, wv), **_tol(dtype))
    gy = tt.tensor4("gy", dtype=dtype)
    gyv = rng.normal(size=got.shape).astype(dtype)
    want_gw, want_gx = theano_dag.function([x, w, gy], theano_dag.grad((y * gy).sum(), [w, x]))(
        xv, wv, gyv
    )
    gw = CorrMM_gradWeights(border_mode=(1, 0))(x, gy)
    gx = CorrMM_gradInputs(border_mode=(1, 0))(w, gy)
    got_gw, got_gx = theano_dag.function([x, w, gy], [gw, gx])(xv, wv, gyv)
    np.testing.assert_allclose(got_gw, want_gw, **_tol(dtype))
    np.testing.assert_allclose(got_gx, want_gx, **_tol(dtype))
    with pytest.raises(ValueError):
        CorrMM_gradWeights(border_mode="half")(x, gy)


def _np_unshared(x, w, pad, stride, groups, flip):
    """Locally connected 2-D layer by loops: filters ``w[f, i, j, c, kh, kw]``."""
    n, c = x.shape[:2]
    f, oh, ow, cg, kh, kw = w.shape
    if flip:
        w = w[..., ::-1, ::-1]
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    fg = f // groups
    out = np.zeros((n, f, oh, ow))
    for k in range(f):
        chans = slice(k // fg * cg, k // fg * cg + cg)
        for i in range(oh):
            for j in range(ow):
                r, q = i * stride[0], j * stride[1]
                patch = xp[:, chans, r : r + kh, q : q + kw]
                out[:, k, i, j] = (patch * w[k, i, j]).sum(axis=(1, 2, 3))
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "border, stride, groups, flip",
    [("valid", (1, 1), 1, True), ("full", (2, 1), 2, False), ((1, 0), (1, 2), 1, True)],
)
def test_unshared_convolution_values_and_gradients(border, stride, groups, flip, dtype):
    # Theano's unshared=True (a locally connected layer): one filter per output position
    rng = np.random.default_rng(2)
    xv = rng.normal(size=(2, 4, 5, 4)).astype(dtype)
    kh, kw = 3, 2
    pad = {"valid": (0, 0), "full": (kh - 1, kw - 1)}.get(border, border)
    oh = (5 + 2 * pad[0] - kh) // stride[0] + 1
    ow = (4 + 2 * pad[1] - kw) // stride[1] + 1
    wv = rng.normal(size=(4, oh, ow, 4 // groups, kh, kw)).astype(dtype)
    x = tt.tensor4("x", dtype=dtype)
    w = tt.TensorType(dtype, shape=(None,) * 6)("w")
    y = conv2d(
        x, w, border_mode=border, subsample=stride, filter_flip=flip, num_groups=groups,
        unshared=True,
    )  # fmt: skip
    assert y.type.dtype == dtype
    gy = tt.tensor4("gy", dtype=dtype)
    cost = (y * gy).sum()
    gyv = rng.normal(size=(2, 4, oh, ow)).astype(dtype)
    want = _np_unshared(xv.astype("float64"), wv.astype("float64"), pad, stride, groups, flip)
    for mode in ["FAST_RUN", theano_dag.compile.mode.Mode(linker="py", optimizer="None")]:
        f = theano_dag.function([x, w, gy], [y, *theano_dag.grad(cost, [x, w])], mode=mode)
        got, gx, gw = f(xv, wv, gyv)
        np.testing.assert_allclose(got, want, **_tol(dtype))
        # The cost is linear in each argument: its gradient is the change of the
        # reference's cost for a unit change of each entry.
        base = (want * gyv).sum()
        for arr, g, as_x in ((xv, gx, True), (wv, gw, False)):
            assert g.shape == arr.shape and g.dtype == dtype
            for idx in [tuple(rng.integers(0, s) for s in arr.shape) for _ in range(6)]:
                bumped = arr.astype("float64")
                bumped[idx] += 1
                args = (bumped, wv.astype("float64")) if as_x else (xv.astype("float64"), bumped)
                d = (_np_unshared(*args, pad, stride, groups, flip) * gyv).sum() - base
                np.testing.assert_allclose(g[idx], d, rtol=1e-3 if dtype == "float32" else 1e-9)
    # infer_shape of the three Ops: the shapes without a convolution computed
    outs = [y, *theano_dag.grad(cost, [x, w])]
    shapes = theano_dag.function([x, w, gy], [o.shape for o in outs])
    assert not any(isinstance(n.op, ac.BaseAbstractConv) for n in shapes.maker.fgraph.apply_nodes)
    for s, o in zip(shapes(xv, wv, gyv), (want, xv, wv)):
        np.testing.assert_array_equal(s, o.shape)
    # CorrMM's unshared correlation: the unflipped filters
    corr = CorrMM(border_mode=border, subsample=stride, num_groups=groups, unshared=True)
    got = theano_dag.function([x, w], corr(x, w))(xv, wv[..., ::-1, ::-1] if flip else wv)
    np.testing.assert_allclose(got, want, **_tol(dtype))


def test_unshared_convolution_refuses_filters_of_another_grid():
    x, w = tt.dtensor4("x"), tt.TensorType("float64", shape=(None,) * 6)("w")
    f = theano_dag.function([x, w], conv2d(x, w, unshared=True))
    with pytest.raises(ValueError, match="output positions"):
        f(np.zeros((1, 1, 4, 4)), np.zeros((1, 3, 3, 1, 3, 3)))  # the output is 2x2
    with pytest.raises(TypeError, match="6-D"):
        conv2d(x, tt.dtensor4("w4"), unshared=True)
    with pytest.raises(TypeError):
        ac.AbstractConv3d(unshared=True)  # (as in Theano: 2-D only)


def test_corr3dmm_matches_conv3d_of_flipped_filters():
    rng = np.random.default_rng(1)
    x, w = tt.dtensor5("x"), tt.dtensor5("w")
    xv, wv = rng.normal(size=(1, 2, 4, 5, 3)), rng.normal(size=(3, 2, 2, 3, 2))
    got = theano_dag.function([x, w], Corr3dMM()(x, w))(xv, wv)
    want = theano_dag.function([x, w], conv3d(x, w[:, :, ::-1, ::-1, ::-1]))(xv, wv)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    gy = tt.dtensor5("gy")
    gw = theano_dag.function([x, gy], Corr3dMMGradWeights()(x, gy))(xv, np.ones(got.shape))
    assert gw.shape == wv.shape


@pytest.mark.parametrize("dtype", DTYPES)
def test_separable_and_causal_convolutions(dtype):
    rng = np.random.default_rng(2)
    x = tt.tensor4("x", dtype=dtype)
    dw, pw = tt.tensor4("dw", dtype=dtype), tt.tensor4("pw", dtype=dtype)
    xv = rng.normal(size=(2, 3, 5, 5)).astype(dtype)
    dwv = rng.normal(size=(6, 1, 2, 2)).astype(dtype)
    pwv = rng.normal(size=(4, 6, 1, 1)).astype(dtype)
    got = theano_dag.function([x, dw, pw], ac.separable_conv2d(x, dw, pw, 3))(xv, dwv, pwv)
    # depthwise: channel c feeds filters 2c, 2c + 1 (true convolution: flipped kernels)
    depth = np.concatenate(
        [_np_corr2d(xv[:, c : c + 1], dwv[2 * c : 2 * c + 2, :, ::-1, ::-1]) for c in range(3)],
        axis=1,
    )
    want = np.einsum("bchw,fc->bfhw", depth, pwv[:, :, 0, 0])
    np.testing.assert_allclose(got, want, **_tol(dtype))

    s, k = tt.tensor3("s", dtype=dtype), tt.tensor3("k", dtype=dtype)
    sv = rng.normal(size=(2, 3, 7)).astype(dtype)
    kv = rng.normal(size=(4, 3, 3)).astype(dtype)
    got = theano_dag.function([s, k], ac.causal_conv1d(s, k, (4, 3, 3), filter_dilation=2))(sv, kv)
    padded = np.pad(sv, ((0, 0), (0, 0), (4, 0)))
    want = np.zeros((2, 4, 7))
    for t in range(7):
        taps = padded[:, :, [t, t + 2, t + 4]]  # dilation 2; the kernel is flipped
        want[:, :, t] = np.einsum("bcj,fcj->bf", taps, kv[:, :, ::-1])
    np.testing.assert_allclose(got, want, **_tol(dtype))


def _np_bilinear(img, ratio):
    """Upsample the last two axes by linear interpolation between the centres of the
    output blocks, the edges clamped (the grid Theano's bilinear_upsampling uses)."""

    def axis_weights(n):
        pos = (np.arange(n * ratio) - (ratio - 1) / 2) / ratio  # output centre, input units
        pos = np.clip(pos, 0, n - 1)
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, n - 1)
        frac = pos - lo
        m = np.zeros((n * ratio, n))
        m[np.arange(n * ratio), lo] += 1 - frac
        m[np.arange(n * ratio), hi] += frac
        return m

    rows, cols = axis_weights(img.shape[-2]), axis_weights(img.shape[-1])
    return np.einsum("rh,...hw,cw->...rc", rows, img, cols)


@pytest.mark.parametrize("ratio", [2, 3])
@pytest.mark.parametrize("one_d", [True, False])
def test_bilinear_upsampling_matches_interpolation(ratio, one_d):
    x = tt.dtensor4("x")
    xv = np.random.default_rng(3).normal(size=(2, 3, 4, 5))
    up = ac.bilinear_upsampling(x, ratio, use_1D_kernel=one_d)
    got = theano_dag.function([x], up)(xv)
    assert got.shape == (2, 3, 4 * ratio, 5 * ratio)
    if ratio % 2:  # odd ratios: the block centres are samples, no half-step shift
        np.testing.assert_allclose(got, _np_bilinear(xv, ratio), rtol=1e-10, atol=1e-12)
    k = ac.bilinear_kernel_1D(ratio).eval()
    np.testing.assert_allclose(
        k, np.r_[np.arange(1, ratio + 1), np.arange(ratio - 1, 0, -1)] / ratio
    )


def _np_frac_axis(x, axis, p, q):
    """Bilinear resampling along ``axis`` at ``ceil(n * p / q)`` points, point ``k`` at
    ``(k * q - (p - 1) // 2) / p`` input steps, held at the ends."""
    n = x.shape[axis]
    p, q = p // math.gcd(p, q), q // math.gcd(p, q)  # (Theano's ratio in lowest terms)
    pos = np.clip((np.arange(-(-n * p // q)) * q - (p - 1) // 2) / p, 0, n - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    shape = [1] * x.ndim
    shape[axis] = -1
    t = (pos - lo).reshape(shape)
    return np.take(x, lo, axis) * (1 - t) + np.take(x, hi, axis) * t


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("frac", [((7, 4), (5, 3)), (3, 2), ((2, 3), (9, 4)), ((4, 2), (6, 4))])
def test_fractional_bilinear_upsampling(frac, dtype):
    x = tt.tensor4("x", dtype=dtype)
    xv = np.random.default_rng(4).normal(size=(2, 3, 5, 6)).astype(dtype)
    up = ac.bilinear_upsampling(x, frac_ratio=frac, use_1D_kernel=False)
    got = theano_dag.function([x], up)(xv)
    (pr, qr), (pc, qc) = frac if isinstance(frac[0], tuple) else (frac, frac)
    want = _np_frac_axis(_np_frac_axis(xv.astype("float64"), 2, pr, qr), 3, pc, qc)
    assert got.dtype == dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, **_tol(dtype))
    # an integer ratio written as a fraction is the integer upsampling
    if frac == ((4, 2), (6, 4)):
        whole = ac.bilinear_upsampling(x[:, :, :, :4], ratio=2, use_1D_kernel=False)
        got = theano_dag.function([x], whole)(xv)
        np.testing.assert_allclose(
            got, _np_frac_axis(_np_frac_axis(xv[..., :4], 2, 2, 1), 3, 2, 1), **_tol(dtype)
        )


def test_fractional_bilinear_upsampling_shape_gradient_and_refusals():
    x = tt.dtensor4("x")
    shape = theano_dag.function(
        [x], ac.bilinear_upsampling(x, frac_ratio=(24, 20), use_1D_kernel=False).shape
    )
    np.testing.assert_array_equal(shape(np.zeros((1, 1, 200, 200))), (1, 1, 240, 240))
    xv = np.random.default_rng(5).normal(size=(1, 2, 3, 4))
    verify_grad(
        lambda a: ac.bilinear_upsampling(a, frac_ratio=((5, 3), (3, 2)), use_1D_kernel=False),
        [xv],
        rng=np.random.default_rng(6),
    )
    with pytest.raises(ValueError, match="use_1D_kernel=False"):
        ac.bilinear_upsampling(x, frac_ratio=(3, 2))
    with pytest.raises(ValueError, match="tuple"):
        ac.bilinear_upsampling(x, frac_ratio=[3, 2], use_1D_kernel=False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sparse_block_dot_values_gradient_and_inplace(dtype):
    rng = np.random.default_rng(4)
    W, h, b = (
        tt.tensor4("W", dtype=dtype),
        tt.tensor3("h", dtype=dtype),
        tt.matrix("b", dtype=dtype),
    )
    ii, oi = tt.lmatrix("ii"), tt.lmatrix("oi")
    Wv = rng.normal(size=(5, 6, 3, 4)).astype(dtype)
    hv = rng.normal(size=(2, 2, 3)).astype(dtype)
    bv = rng.normal(size=(6, 4)).astype(dtype)
    iiv, oiv = np.array([[0, 4], [2, 2]]), np.array([[1, 5, 0], [3, 3, 2]])
    out = blocksparse.sparse_block_dot(W, h, ii, b, oi)
    gW = theano_dag.grad(out.sum(), W)
    f = theano_dag.function([W, h, ii, b, oi], [out, gW])
    got, got_gW = f(Wv, hv, iiv, bv, oiv)
    want = bv[oiv] + np.einsum("bik,bijkl->bjl", hv, Wv[iiv[:, :, None], oiv[:, None, :]])
    np.testing.assert_allclose(got, want, **_tol(dtype))
    want_gW = np.zeros_like(Wv)
    for n in range(2):
        for i in range(2):
            for j in range(3):
                want_gW[iiv[n, i], oiv[n, j]] += np.outer(hv[n, i], np.ones(4))
    np.testing.assert_allclose(got_gW, want_gW, **_tol(dtype))
    # both block-sparse nodes write into their fresh first input
    ops = [
        n.op
        for n in f.maker.fgraph.toposort()
        if isinstance(n.op, (blocksparse.SparseBlockGemv, blocksparse.SparseBlockOuter))
    ]
    assert ops and all(op.inplace for op in ops)


@pytest.mark.parametrize("border_mode", ["valid", "full", "half"])
def test_conv3d2d_layout_matches_numpy(border_mode):
    rng = np.random.default_rng(5)
    s, f = tt.tensor5("s", dtype="float32"), tt.tensor5("f", dtype="float32")
    sv = rng.normal(size=(2, 5, 3, 6, 4)).astype("float32")  # (batch, time, channels, h, w)
    fv = rng.normal(size=(4, 3, 3, 3, 2)).astype("float32")
    got = theano_dag.function([s, f], conv3d2d.conv3d(s, f, border_mode=border_mode))(sv, fv)
    kt, kh, kw = fv.shape[1], fv.shape[3], fv.shape[4]
    pads = {
        "valid": (0, 0, 0),
        "full": (kt - 1, kh - 1, kw - 1),
        "half": (kt // 2, kh // 2, kw // 2),
    }
    pt, ph, pw = pads[border_mode]
    sp = np.pad(sv, ((0, 0), (pt, pt), (0, 0), (ph, ph), (pw, pw))).astype("float64")
    flipped = fv[:, ::-1, :, ::-1, ::-1].astype("float64")
    T, H, W = sp.shape[1] - kt + 1, sp.shape[3] - kh + 1, sp.shape[4] - kw + 1
    want = np.zeros((2, T, 4, H, W))
    for t in range(T):
        for r in range(H):
            for c in range(W):
                win = sp[:, t : t + kt, :, r : r + kh, c : c + kw]
                want[:, t, :, r, c] = np.einsum("btchw,ftchw->bf", win, flipped)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    x = np.arange(20.0).reshape(5, 4)
    view = conv3d2d.get_diagonal_subtensor_view(x, 0, 1)
    np.testing.assert_array_equal(view, [[12, 9, 6, 3], [16, 13, 10, 7]])
    view[0, 0] = -1.0  # a view: writes reach x
    assert x[3, 0] == -1.0


@pytest.mark.parametrize("linker", ["cpu", "py"])
def test_grad_inputs_refuses_an_image_shape_that_cannot_give_the_output(linker):
    # A 4x4 image convolved ('valid') by 2x2 filters gives 3x3; a 2x2 or 4x4 output
    # gradient is inconsistent. Both engines raise (the CPU engine filled an image).
    w = theano_dag.shared(np.ones((1, 1, 2, 2), dtype="float32"))
    mode = theano_dag.Mode(linker=linker, optimizer=None)
    for size in (2, 4):
        gy = theano_dag.shared(np.ones((1, 1, size, size), dtype="float32"))
        f = theano_dag.function([], ac.AbstractConv2d_gradInputs()(w, gy, (4, 4)), mode=mode)
        with pytest.raises(ValueError):
            f()
    gy = theano_dag.shared(np.ones((1, 1, 3, 3), dtype="float32"))
    f = theano_dag.function([], ac.AbstractConv2d_gradInputs()(w, gy, (4, 4)), mode=mode)
    np.testing.assert_allclose(f()[0, 0], [[1, 2, 2, 1], [2, 4, 4, 2], [2, 4, 4, 2], [1, 2, 2, 1]])


def test_shape_hints_must_be_tuples_not_tensors():
    good = (3, 5, 7, 11)
    for bad in (tt.lvector(), tt.constant(list(good)), tt.ftensor4().shape):
        for kind in (ac.AbstractConv2d, ac.AbstractConv2d_gradInputs):
            with pytest.raises(ValueError):
                kind(imshp=bad)
    op = ac.AbstractConv2d(imshp=[tt.constant(v, dtype="int64") for v in good], kshp=list(good))
    assert op.imshp == good and op.kshp == good
