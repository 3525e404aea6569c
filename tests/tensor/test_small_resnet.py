"""A small ResNet written with theano_dag (conv2d, batch norm, relu, residual adds,
pooling, a dense layer, softmax cross-entropy), checked against a pure-numpy forward
of the same network, differentiated, and trained a few steps with shared variables."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.function import function as _function
from theano_dag.compile.mode import Mode
from theano_dag.gradient import verify_grad as _verify_grad
from theano_dag.tensor import nnet

# Ops are checked on the reference engine (Op.perform in order, no rewrites): the
# ground truth that every other engine and rewrite is compared with.
MODE = Mode(linker="py", optimizer=None)


def function(inputs, outputs, **kwargs):
    return _function(inputs, outputs, mode=MODE, **kwargs)


def verify_grad(fun, pt, **kwargs):
    return _verify_grad(fun, pt, mode=MODE, **kwargs)


EPS = 1e-4
N_CLASSES = 5


def make_params(rng, dtype="float64"):
    def conv(f, c, k):
        return (rng.standard_normal((f, c, k, k)) * np.sqrt(2.0 / (c * k * k))).astype(dtype)

    def bn(c):
        return (1 + 0.1 * rng.standard_normal(c)).astype(dtype), (
            0.1 * rng.standard_normal(c)
        ).astype(dtype)

    p = {
        "w0": conv(4, 3, 3),
        "w1": conv(4, 4, 3),
        "w2": conv(4, 4, 3),
        "w3": conv(8, 4, 3),
        "w4": conv(8, 8, 3),
        "wsc": conv(8, 4, 1),
        "dense_w": (rng.standard_normal((8, N_CLASSES)) * 0.3).astype(dtype),
        "dense_b": np.zeros(N_CLASSES, dtype),
    }
    for k, c in (("bn0", 4), ("bn1", 4), ("bn2", 4), ("bn3", 8), ("bn4", 8)):
        p[k + "_g"], p[k + "_b"] = bn(c)
    return p


# -- the network, symbolically ---------------------------------------------------------


def sym_forward(x, p):
    """Logits of the network for input ``x`` and parameters ``p`` (symbolic)."""

    def conv(h, w, stride=1):
        return nnet.conv2d(h, w, border_mode="half", subsample=stride, filter_flip=False)

    def bn(h, name):
        out, _, _ = nnet.batch_normalization_train(
            h, p[name + "_g"], p[name + "_b"], axes="spatial", epsilon=EPS
        )
        return out

    h = nnet.relu(bn(conv(x, p["w0"]), "bn0"))
    # Identity block.
    r = nnet.relu(bn(conv(h, p["w1"]), "bn1"))
    h = nnet.relu(bn(conv(r, p["w2"]), "bn2") + h)
    # Downsampling block with a 1x1 strided projection shortcut.
    r = nnet.relu(bn(conv(h, p["w3"], 2), "bn3"))
    h = nnet.relu(bn(conv(r, p["w4"]), "bn4") + conv(h, p["wsc"], 2))
    h = nnet.max_pool_2d(h, (2, 2))
    h = nnet.avg_pool_2d(h, (2, 2))  # global average over the remaining 2x2
    h = h.flatten(2)
    return tt.dot(h, p["dense_w"]) + p["dense_b"]


# -- the same network in numpy ------------------------------------------------------------


def np_conv_half(x, w, stride=1):
    """Cross-correlation with 'half' padding, written as explicit loops over taps."""
    k = w.shape[2]
    pad = k // 2
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (x.shape[2] + 2 * pad - k) // stride + 1
    ow = (x.shape[3] + 2 * pad - k) // stride + 1
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(k):
        for j in range(k):
            patch = xp[
                :, :, i : i + stride * (oh - 1) + 1 : stride, j : j + stride * (ow - 1) + 1 : stride
            ]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, i, j])
    return out


def np_bn(h, g, b):
    mean = h.mean(axis=(0, 2, 3), keepdims=True)
    var = h.var(axis=(0, 2, 3), keepdims=True)
    return (h - mean) / np.sqrt(var + EPS) * g[None, :, None, None] + b[None, :, None, None]


def np_forward(x, p):
    relu = lambda v: np.maximum(v, 0)  # noqa: E731
    h = relu(np_bn(np_conv_half(x, p["w0"]), p["bn0_g"], p["bn0_b"]))
    r = relu(np_bn(np_conv_half(h, p["w1"]), p["bn1_g"], p["bn1_b"]))
    h = relu(np_bn(np_conv_half(r, p["w2"]), p["bn2_g"], p["bn2_b"]) + h)
    r = relu(np_bn(np_conv_half(h, p["w3"], 2), p["bn3_g"], p["bn3_b"]))
    h = relu(np_bn(np_conv_half(r, p["w4"]), p["bn4_g"], p["bn4_b"]) + np_conv_half(h, p["wsc"], 2))
    n, c, hh, ww = h.shape
    h = h.reshape(n, c, hh // 2, 2, ww // 2, 2).max(axis=(3, 5))
    h = h.mean(axis=(2, 3))
    return h @ p["dense_w"] + p["dense_b"]


def np_softmax_xent(logits, y):
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return np.exp(logp), -logp[np.arange(len(y)), y].mean()


# -- tests -------------------------------------------------------------------------------


def _data(rng, dtype):
    x = rng.standard_normal((4, 3, 8, 8)).astype(dtype)
    y = rng.integers(0, N_CLASSES, 4).astype("int64")
    return x, y


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_forward_matches_numpy(dtype):
    rng = np.random.default_rng(0)
    params = make_params(rng, dtype)
    xv, yv = _data(rng, dtype)
    x, y = tt.tensor4("x", dtype=dtype), tt.lvector("y")
    p = {k: tt.TensorType(dtype, shape=(None,) * v.ndim)(k) for k, v in params.items()}
    logits = sym_forward(x, p)
    prob = nnet.softmax(logits)
    loss = nnet.categorical_crossentropy(prob, y).mean()
    names = sorted(params)
    f = function([x, y] + [p[k] for k in names], [prob, loss])
    got_prob, got_loss = f(xv, yv, *[params[k] for k in names])
    want_prob, want_loss = np_softmax_xent(
        np_forward(xv.astype("float64"), {k: v.astype("float64") for k, v in params.items()}), yv
    )
    assert got_prob.dtype == dtype and got_prob.shape == (4, N_CLASSES)
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(got_prob, want_prob, rtol=tol, atol=tol)
    np.testing.assert_allclose(got_loss, want_loss, rtol=tol)


def test_gradient_by_finite_differences():
    rng = np.random.default_rng(1)
    params = make_params(rng)
    xv, yv = _data(rng, "float64")
    checked = ("w0", "wsc", "bn2_g", "dense_w")

    def loss_of(*vals):
        p = {k: tt.constant(v) for k, v in params.items()}
        p.update(zip(checked, vals))
        logits = sym_forward(tt.constant(xv), p)
        nll, _ = nnet.crossentropy_softmax_1hot(logits, tt.constant(yv))
        return nll.mean()

    verify_grad(loss_of, [params[k] for k in checked], rng=rng, abs_tol=1e-4, rel_tol=1e-4)


def test_training_reduces_the_loss():
    rng = np.random.default_rng(2)
    params = {k: theano_dag.shared(v, name=k) for k, v in make_params(rng).items()}
    xv, yv = _data(rng, "float64")
    x, y = tt.dtensor4("x"), tt.lvector("y")
    nll, _ = nnet.crossentropy_softmax_1hot(sym_forward(x, params), y)
    loss = nll.mean()
    grads = theano_dag.grad(loss, list(params.values()))
    updates = [(v, v - 0.1 * g) for v, g in zip(params.values(), grads)]
    step = function([x, y], loss, updates=updates)
    losses = [float(step(xv, yv)) for _ in range(15)]
    assert losses[-1] < 0.5 * losses[0]
    assert all(np.isfinite(losses))


def test_default_mode_agrees_with_the_reference():
    """The whole stack (default rewrites and engine) on the same network, forward and
    gradients, against the reference engine."""
    rng = np.random.default_rng(3)
    params = make_params(rng)
    xv, yv = _data(rng, "float64")
    x, y = tt.dtensor4("x"), tt.lvector("y")
    p = {
        k: tt.dtensor4(k) if v.ndim == 4 else tt.TensorType("float64", shape=(None,) * v.ndim)(k)
        for k, v in params.items()
    }
    nll, sm = nnet.crossentropy_softmax_1hot(sym_forward(x, p), y)
    names = sorted(params)
    outs = [sm, nll.mean(), *theano_dag.grad(nll.mean(), [p[k] for k in names])]
    args = [xv, yv] + [params[k] for k in names]
    want = function([x, y] + [p[k] for k in names], outs)(*args)
    got = theano_dag.function([x, y] + [p[k] for k in names], outs)(*args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-10)
