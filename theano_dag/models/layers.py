"""The layer vocabulary the networks are written in, and its backends.

A network in :mod:`theano_dag.models` is one Python function over an ``ops`` object
(``conv``, ``bn``, ``relu``, ``max_pool``...). Running it with :class:`TensorOps` builds a
theano_dag graph; with :class:`NumpyOps` it computes eagerly in numpy (Owl's "without
graph" column); with :class:`ShapeOps` it only follows shapes, which is how the weights
are created before any backend runs. One definition, so every backend runs the very same
network. Layouts are NCHW images and ``(F, C, KH, KW)`` filters, applied as a
cross-correlation (``filter_flip=False``), as in every framework the benchmark compares.

>>> import numpy as np
>>> ops = NumpyOps()
>>> x = np.arange(16.0).reshape(1, 1, 4, 4)
>>> ops.max_pool(x, 3, 2, 1)[0, 0]
array([[ 5.,  7.],
       [13., 15.]])
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from theano_dag.graph.shared import shared
from theano_dag.tensor import basic as tb
from theano_dag.tensor import math as tm
from theano_dag.tensor.nnet import batch_normalization_test, conv2d, pool_2d, relu, softmax

__all__ = ["BN", "Net", "NumpyOps", "Params", "ShapeOps", "TensorOps"]


class BN:
    """Batch normalisation in inference form: per-channel ``gamma``, ``beta``, running
    ``mean`` and ``var``, and ``eps`` (a plain record so each backend reads the same)."""

    def __init__(self, gamma, beta, mean, var, eps):
        self.gamma, self.beta, self.mean, self.var, self.eps = gamma, beta, mean, var, eps


class Params:
    """The weights of one network by name, created on first use (He initialisation from
    a fixed seed) when ``create`` is True; afterwards a network only reads them.

    >>> p = Params(seed=0, dtype="float32", create=True)
    >>> w = p.get("w", lambda: (8, 4, 3, 3), "he")
    >>> w.shape, w.dtype, round(float(w.std() * np.sqrt(4 * 9 / 2)), 1)
    ((8, 4, 3, 3), dtype('float32'), 1.0)
    """

    def __init__(self, seed=0, dtype="float32", create=False):
        self.rng = np.random.default_rng(seed)
        self.dtype = np.dtype(dtype)
        self.create = create
        self.arrays: dict[str, np.ndarray] = {}

    def get(self, name, shape, init):
        if name not in self.arrays:
            if not self.create:
                raise KeyError(f"Params: no weight named {name!r} (build with ShapeOps first)")
            self.arrays[name] = self._make(shape(), init)
        return self.arrays[name]

    def _make(self, shape, init):
        if init == "he":  # He et al. 2015: N(0, 2 / fan_in)
            # filters are (F, C, KH, KW): fan_in = C * KH * KW; dense weights are (in, out)
            fan_in = int(np.prod(shape[1:])) if len(shape) == 4 else shape[0]
            value = self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        elif init == "zeros":
            value = np.zeros(shape)
        elif init == "gamma":  # near 1, not exactly, so a wrong axis shows in the outputs
            value = 1.0 + 0.1 * self.rng.standard_normal(shape)
        elif init == "gamma_branch":
            # the last batch norm of a residual branch starts small (Goyal et al. 2017 start
            # it at 0) so that the sum of 16 residual blocks keeps a unit scale
            value = 0.2 * (1.0 + 0.1 * self.rng.standard_normal(shape))
        elif init == "beta":
            value = 0.1 * self.rng.standard_normal(shape)
        elif init == "mean":
            value = 0.1 * self.rng.standard_normal(shape)
        elif init == "var":
            value = self.rng.uniform(0.5, 1.5, shape)
        else:
            raise ValueError(f"Params: unknown init {init!r}")
        return value.astype(self.dtype)

    @property
    def nbytes(self):
        return sum(a.nbytes for a in self.arrays.values())


def _out_len(n, k, stride, pad):
    return (n + 2 * pad - k) // stride + 1


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class ShapeOps:
    """Values are shape tuples: running a network with it creates the weights."""

    def weight(self, array, name):
        return array.shape

    def channels(self, x):
        return x[1]

    def conv(self, x, w, stride=1, pad=0):
        (sh, sw), (ph, pw) = _pair(stride), _pair(pad)
        return (x[0], w[0], _out_len(x[2], w[2], sh, ph), _out_len(x[3], w[3], sw, pw))

    def bias(self, x, b):
        return x

    def bn(self, x, p):
        return x

    def relu(self, x):
        return x

    def add(self, x, y):
        return x

    def concat(self, xs):
        return (xs[0][0], sum(x[1] for x in xs), *xs[0][2:])

    def max_pool(self, x, k, stride, pad=0):
        return (*x[:2], _out_len(x[2], k, stride, pad), _out_len(x[3], k, stride, pad))

    avg_pool = max_pool

    def mean_hw(self, x):
        return x[:2]

    def flatten(self, x):
        return (x[0], int(np.prod(x[1:])))

    def dense(self, x, w, b):
        return (x[0], w[1])

    def softmax(self, x):
        return x


class NumpyOps:
    """Each layer as plain numpy calls, run at once (the "without graph" column)."""

    def weight(self, array, name):
        return array

    def channels(self, x):
        return x.shape[1]

    def conv(self, x, w, stride=1, pad=0):
        (sh, sw), (ph, pw) = _pair(stride), _pair(pad)
        kh, kw = w.shape[2:]
        if (kh, kw) == (1, 1) and (ph, pw) == (0, 0):
            cols = x[:, :, ::sh, ::sw]  # a 1x1 convolution is a matrix product
            return np.einsum("nchw,fc->nfhw", cols, w[:, :, 0, 0], optimize=True)
        if ph or pw:
            x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
        win = sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
        # im2col: tensordot copies the windows into one (N*OH*OW, C*KH*KW) matrix
        out = np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3]))
        return np.ascontiguousarray(out.transpose(0, 3, 1, 2))

    def bias(self, x, b):
        return x + b.reshape(1, -1, 1, 1)

    def bn(self, x, p):
        scale = p.gamma / np.sqrt(p.var + np.asarray(p.eps, p.var.dtype))
        shape = (1, -1, 1, 1)
        return (x - p.mean.reshape(shape)) * scale.reshape(shape) + p.beta.reshape(shape)

    def relu(self, x):
        return np.maximum(x, 0)

    def add(self, x, y):
        return x + y

    def concat(self, xs):
        return np.concatenate(xs, axis=1)

    def _windows(self, x, k, stride, pad, fill):
        if pad:
            x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)
        return sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::stride, ::stride]

    def max_pool(self, x, k, stride, pad=0):
        return self._windows(x, k, stride, pad, -np.inf).max(axis=(4, 5))

    def avg_pool(self, x, k, stride, pad=0):
        # the padding counts in the divisor (Theano's average_inc_pad)
        return self._windows(x, k, stride, pad, 0).mean(axis=(4, 5))

    def mean_hw(self, x):
        return x.mean(axis=(2, 3))

    def flatten(self, x):
        return x.reshape(x.shape[0], -1)

    def dense(self, x, w, b):
        return x @ w + b

    def softmax(self, x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


class TensorOps:
    """Each layer as theano_dag graph nodes (``tensor`` and ``tensor.nnet``).

    ``weights='shared'`` makes every weight a shared variable (Theano's idiom, and what
    a training step updates); ``'constant'`` embeds them in the graph, which lets the
    optimizer fold them.
    """

    def __init__(self, weights="shared"):
        if weights not in ("shared", "constant"):
            raise ValueError(f"TensorOps: weights must be 'shared' or 'constant', got {weights!r}")
        self.weights = weights

    def weight(self, array, name):
        if self.weights == "shared":
            # the static shape lets an update (w - lr * grad) keep the weight's exact type;
            # borrowed: the weights are held once, by Params and the graph together
            return shared(array, name=name, shape=array.shape, borrow=True)
        return tb.constant(array, name=name)

    def conv(self, x, w, stride=1, pad=0):
        return conv2d(x, w, border_mode=_pair(pad), subsample=_pair(stride), filter_flip=False)

    def bias(self, x, b):
        return x + b.dimshuffle("x", 0, "x", "x")

    def bn(self, x, p):
        return batch_normalization_test(
            x, p.gamma, p.beta, p.mean, p.var, axes="spatial", epsilon=p.eps
        )

    def relu(self, x):
        return relu(x)

    def add(self, x, y):
        return x + y

    def concat(self, xs):
        return tb.concatenate(xs, axis=1)

    def max_pool(self, x, k, stride, pad=0):
        return pool_2d(x, (k, k), ignore_border=True, stride=(stride, stride), pad=(pad, pad))

    def avg_pool(self, x, k, stride, pad=0):
        return pool_2d(
            x,
            (k, k),
            ignore_border=True,
            stride=(stride, stride),
            pad=(pad, pad),
            mode="average_inc_pad",
        )

    def mean_hw(self, x):
        return tm.mean(x, axis=(2, 3))

    def flatten(self, x):
        return tb.flatten(x, 2)

    def dense(self, x, w, b):
        return tm.dot(x, w) + b

    def softmax(self, x):
        return softmax(x)


class Net:
    """What a network function is given: the backend ``ops``, the ``params``, and the
    layers built from them, each weight wrapped once by ``ops.weight``."""

    def __init__(self, ops, params):
        self.ops, self.params = ops, params
        self.weights: dict[str, object] = {}

    def weight(self, name, shape, init):
        if name not in self.weights:
            self.weights[name] = self.ops.weight(self.params.get(name, shape, init), name)
        return self.weights[name]

    def conv_bn(self, x, name, cout, k, stride=1, pad=0, eps=1e-3, act=True, gamma="gamma"):
        """Convolution (no bias), inference batch normalisation, then relu if ``act``;
        ``gamma`` names the initialisation of the batch norm's scale."""
        (kh, kw), ops = _pair(k), self.ops
        w = self.weight(f"{name}.w", lambda: (cout, ops.channels(x), kh, kw), "he")
        stats = [
            self.weight(f"{name}.bn.{field}", lambda: (cout,), init)
            for field, init in (
                ("gamma", gamma),
                ("beta", "beta"),
                ("mean", "mean"),
                ("var", "var"),
            )
        ]
        y = ops.bn(ops.conv(x, w, stride, pad), BN(*stats, eps))
        return ops.relu(y) if act else y

    def dense(self, x, name, cout):
        w = self.weight(f"{name}.w", lambda: (self.ops.channels(x), cout), "he")
        b = self.weight(f"{name}.b", lambda: (cout,), "zeros")
        return self.ops.dense(x, w, b)
