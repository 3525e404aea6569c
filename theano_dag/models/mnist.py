"""Owl's MNIST convnet (the ``lazy_mnist`` example of Owl's computation-graph report) and
its training step: a 5x5 convolution to 32 channels ('same' padding, bias, relu), 2x2 max
pooling, a 1024-unit dense layer with relu and a 10-way softmax, trained by SGD on the
cross-entropy. Owl's example also drops out 10% of the pooled units; dropout draws random
numbers that no two engines draw alike, so it is left out here to compare their values.

>>> import numpy as np
>>> from theano_dag.models import init_params, mnist_convnet
>>> params = init_params(mnist_convnet, (1, 1, 28, 28))
>>> {n: a.shape for n, a in params.arrays.items()}["fc1.w"]
(6272, 1024)
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from theano_dag.gradient import grad
from theano_dag.tensor import basic as tb
from theano_dag.tensor import math as tm
from theano_dag.tensor.nnet import log_softmax
from theano_dag.tensor.type import TensorType

__all__ = ["mnist_convnet", "mnist_training_step", "mnist_numpy_step", "MNIST_SHAPE"]

MNIST_SHAPE = (1, 28, 28)
CLASSES = 10


def mnist_convnet(net, x):
    """The logits (before the softmax) of NCHW digit images ``x``."""
    ops = net.ops
    w = net.weight("conv.w", lambda: (32, ops.channels(x), 5, 5), "he")
    b = net.weight("conv.b", lambda: (32,), "zeros")
    y = ops.relu(ops.bias(ops.conv(x, w, 1, 2), b))
    y = ops.max_pool(y, 2, 2)
    y = ops.relu(net.dense(ops.flatten(y), "fc1", 1024))
    return net.dense(y, "fc2", CLASSES)


def mnist_training_step(net, lr=0.01):
    """The graph of one SGD step on a batch: returns ``(inputs, loss, updates)`` for
    ``theano_dag.function(inputs, loss, updates=updates)``; the inputs are the images
    and their one-hot labels, and each update moves a shared weight against its gradient.

    >>> import numpy as np, theano_dag
    >>> from theano_dag.models import Net, Params, TensorOps, init_params
    >>> net = Net(TensorOps(), init_params(mnist_convnet, (1, 1, 28, 28)))
    >>> inputs, loss, updates = mnist_training_step(net)
    >>> step = theano_dag.function(inputs, loss, updates=updates)
    >>> x = np.zeros((2, 1, 28, 28), "float32"); y = np.eye(10, dtype="float32")[[3, 5]]
    >>> first, second = step(x, y), step(x, y)
    >>> bool(second < first)
    True
    """
    dtype = net.params.dtype.name
    x = TensorType(dtype, shape=(None, *MNIST_SHAPE))("images")
    y = TensorType(dtype, shape=(None, CLASSES))("labels")
    logits = mnist_convnet(net, x)
    loss = -tm.mean(tm.sum(y * log_softmax(logits), axis=1))
    weights = list(net.weights.values())
    grads = grad(loss, weights)
    rate = tb.constant(np.asarray(lr, dtype=dtype))
    return [x, y], loss, [(w, w - rate * g) for w, g in zip(weights, grads)]


def mnist_numpy_step(params, x, y, lr=0.01):
    """One SGD step in plain numpy, the backward pass written by hand (Owl's "without
    graph" column): updates ``params.arrays`` in place and returns the loss before it."""
    p = params.arrays
    n = x.shape[0]
    xp = np.pad(x, ((0, 0), (0, 0), (2, 2), (2, 2)))
    win = sliding_window_view(xp, (5, 5), axis=(2, 3))  # (N, 1, 28, 28, 5, 5)
    conv = np.tensordot(win, p["conv.w"], axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)
    h0 = np.maximum(conv + p["conv.b"].reshape(1, -1, 1, 1), 0)
    blocks = h0.reshape(n, 32, 14, 2, 14, 2)
    pooled = blocks.max(axis=(3, 5))
    flat = pooled.reshape(n, -1)
    h1 = np.maximum(flat @ p["fc1.w"] + p["fc1.b"], 0)
    logits = h1 @ p["fc2.w"] + p["fc2.b"]
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -(y * logp).sum(axis=1).mean()
    # backward: softmax cross-entropy, the two dense layers, pooling, relu, convolution
    dz = (np.exp(logp) - y) / n
    grads = {"fc2.w": h1.T @ dz, "fc2.b": dz.sum(axis=0)}
    dh1 = (dz @ p["fc2.w"].T) * (h1 > 0)
    grads["fc1.w"], grads["fc1.b"] = flat.T @ dh1, dh1.sum(axis=0)
    dpool = (dh1 @ p["fc1.w"].T).reshape(pooled.shape)
    # every element equal to its window's max takes the gradient (Theano's MaxPoolGrad)
    mask = blocks == pooled[:, :, :, None, :, None]
    dh0 = (mask * dpool[:, :, :, None, :, None]).reshape(h0.shape) * (h0 > 0)
    grads["conv.w"] = np.tensordot(dh0, win, axes=([0, 2, 3], [0, 2, 3]))
    grads["conv.b"] = dh0.sum(axis=(0, 2, 3))
    for name, g in grads.items():
        p[name] -= np.asarray(lr * g, dtype=p[name].dtype)
    return loss
