"""A 3-D convolutional network as a layers library built on Theano writes it (a
Conv3DLayer's ``conv3d`` plus bias and ``relu``, a Pool3DLayer's ``pool_3d``, a dense
softmax layer, the categorical cross-entropy, ``grad`` and SGD updates on shared
variables), trained for a few steps on the py, CPU and OpenCL engines: losses and
parameters against the same network written in numpy (forward and backward by hand,
with the loop references)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as T
from theano_dag.compile.mode import Mode
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.tensor import nnet
from theano_dag.tensor.signal.pool import pool_3d

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nnet3d_reference import (  # noqa: E402
    ref_conv3d,
    ref_conv3d_grad_weights,
    ref_pool3d,
    ref_pool3d_grad,
)

OCL_OK, OCL_WHY = opencl_available()
LR = 0.1
STEPS = 3


def _mode(engine):
    if engine == "py":
        return Mode(linker="py", optimizer=None)
    if engine == "cpu":
        return Mode(linker=CPULinker(min_plan_bytes=0))
    return Mode(linker="opencl")


def _data(dtype):
    rng = np.random.default_rng(11)
    params = {
        "W1": rng.standard_normal((3, 1, 3, 3, 3)) * 0.3,
        "b1": rng.standard_normal(3) * 0.1,
        "W2": rng.standard_normal((3 * 3 * 3 * 3, 4)) * 0.2,
        "b2": np.zeros(4),
    }
    x = rng.standard_normal((2, 1, 6, 6, 6))
    y = np.array([1, 3], dtype="int32")
    return {k: v.astype(dtype) for k, v in params.items()}, x.astype(dtype), y


def _theano_program(params, dtype, mode):
    """The network, the way the layers library's layers build it."""
    shared = {k: theano_dag.shared(v, name=k) for k, v in params.items()}
    X = T.TensorType(dtype, shape=(None, 1, 6, 6, 6))("X")
    Y = T.ivector("Y")
    # Conv3DLayer(num_filters=3, filter_size=3, pad="same", nonlinearity=rectify)
    conved = nnet.conv3d(
        X,
        shared["W1"],
        input_shape=(None, 1, 6, 6, 6),
        filter_shape=(3, 1, 3, 3, 3),
        border_mode="half",
        subsample=(1, 1, 1),
        filter_flip=True,
    )
    h = nnet.relu(conved + shared["b1"].dimshuffle("x", 0, "x", "x", "x"))
    # MaxPool3DLayer(pool_size=2)
    pooled = pool_3d(h, ws=(2, 2, 2), stride=(2, 2, 2), ignore_border=True, pad=(0, 0, 0))
    # DenseLayer(num_units=4, nonlinearity=softmax)
    probs = nnet.softmax(T.dot(pooled.flatten(2), shared["W2"]) + shared["b2"])
    loss = nnet.categorical_crossentropy(probs, Y).mean()
    names = sorted(shared)
    grads = T.grad(loss, [shared[k] for k in names])
    updates = [(shared[k], shared[k] - LR * g) for k, g in zip(names, grads)]
    train = theano_dag.function([X, Y], loss, updates=updates, mode=mode)
    return train, shared


def _numpy_step(p, x, y):
    """One SGD step of the same network: the loss, and the parameters updated."""
    n = x.shape[0]
    a1 = ref_conv3d(x, p["W1"], border_mode="half") + p["b1"][:, None, None, None]
    h = np.maximum(a1, 0)
    pooled = ref_pool3d(h, (2, 2, 2), ignore_border=True)
    f = pooled.reshape(n, -1)
    z = f @ p["W2"] + p["b2"]
    e = np.exp(z - z.max(axis=1, keepdims=True))
    s = e / e.sum(axis=1, keepdims=True)
    loss = -np.mean(np.log(s[np.arange(n), y]))
    dz = s.copy()
    dz[np.arange(n), y] -= 1
    dz /= n
    df = dz @ p["W2"].T
    dh = ref_pool3d_grad(h, df.reshape(pooled.shape), (2, 2, 2), ignore_border=True)
    da1 = dh * (a1 > 0)
    grads = {
        "W2": f.T @ dz,
        "b2": dz.sum(axis=0),
        "b1": da1.sum(axis=(0, 2, 3, 4)),
        "W1": ref_conv3d_grad_weights(x, da1, (3, 3, 3), border_mode="half"),
    }
    return loss, {k: p[k] - LR * grads[k] for k in p}


@pytest.mark.parametrize(
    "engine, dtype",
    [
        ("py", "float64"),
        ("cpu", "float64"),
        ("cpu", "float32"),
        pytest.param(
            "opencl",
            "float32",
            marks=pytest.mark.skipif(not OCL_OK, reason=f"no OpenCL: {OCL_WHY}"),
        ),
    ],
)
def test_conv3d_network_trains_as_numpy(engine, dtype):
    params, x, y = _data(dtype)
    with theano_dag.config.change_flags(floatX=dtype):
        train, shared = _theano_program(params, dtype, _mode(engine))
    ref = {k: v.astype("float64") for k, v in params.items()}
    x64 = x.astype("float64")
    tol = 1e-4 if dtype == "float32" else 1e-10
    losses = []
    for _ in range(STEPS):
        got = train(x, y)
        want, ref = _numpy_step(ref, x64, y)
        losses.append(want)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        for k, v in shared.items():
            assert v.get_value().dtype == dtype
            np.testing.assert_allclose(v.get_value(), ref[k], rtol=tol, atol=tol)
    assert losses[-1] < losses[0]  # it learns
