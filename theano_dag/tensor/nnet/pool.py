"""Pooling over the last dimensions (``theano.tensor.signal.pool``).

``Pool`` computes max / sum / average over windows of the last ``ndim`` (2 by default,
3 for ``pool_3d``) dimensions. Unlike Theano, the window size, stride and padding are
Op parameters (``__props__``), not symbolic inputs: they are fixed when the graph is
built, so shapes stay static and the memory planner sees them. Theano's way of building
the Ops still works: ``Pool(ignore_border, mode, ndim)`` without a window is a template
whose call ``op(x, ws, stride, pad)`` (constants) makes the node of
``Pool(ws, stride, pad, ignore_border, mode, ndim)``; the same for the gradient Ops.
A window, stride or padding known only when the function runs (a symbolic vector, or
entries computed from the input's shape) makes a ``SymbolicWindowPool`` node instead,
which builds the Op above from the values of each call.

Modes, as in Theano: ``max`` and ``sum`` ignore the padding; ``average_inc_pad``
divides by the window size including padding, ``average_exc_pad`` by the number of
real pixels. With ``ignore_border=False`` a partial window at the end of an axis is
kept (and averages divide by its real size).

``perform`` is vectorised: the padded input is viewed as windows with
``sliding_window_view`` and reduced in one call; the gradients add back with one
strided slice per window offset.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from theano_dag.graph.basic import Apply, Constant, Variable
from theano_dag.graph.null_type import disconnected_type
from theano_dag.graph.op import Op
from theano_dag.tensor import basic as tb
from theano_dag.tensor import math
from theano_dag.tensor.shape import MakeVector
from theano_dag.tensor.type import TensorType, discrete_dtypes
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "Pool",
    "MaxPoolGrad",
    "AveragePoolGrad",
    "DownsampleFactorMaxGradGrad",
    "pool_2d",
    "pool_3d",
    "max_pool_2d",
    "max_pool_2d_same_size",
    "avg_pool_2d",
    "pool_output_shape",
    "SymbolicWindowPool",
]

_MODES = ("max", "sum", "average_inc_pad", "average_exc_pad")


def _ints(value, n, name, who, minimum):
    if isinstance(value, (int, np.integer)):
        value = (value,) * n
    try:
        vals = tuple(value)
    except TypeError:
        raise TypeError(f"{who}: {name} must be a tuple of {n} ints, got {value!r}") from None
    if len(vals) != n or not all(isinstance(v, (int, np.integer)) and v >= minimum for v in vals):
        raise ValueError(f"{who}: {name} must be {n} ints >= {minimum}, got {value!r}")
    return tuple(int(v) for v in vals)


def _out_len(v, ws, stride, pad, ignore_border):
    """Pooled length of an axis of length ``v`` (an int or a symbolic scalar)."""
    v = v + 2 * pad
    if ignore_border:
        out = (v - ws) // stride + 1
        return max(out, 0) if isinstance(out, (int, np.integer)) else _tm().maximum(out, 0)
    if stride >= ws:
        return (v - 1) // stride + 1
    out = (v - 1 - ws + stride) // stride
    return (max(out, 0) if isinstance(out, (int, np.integer)) else _tm().maximum(out, 0)) + 1


def _tm():
    return math


def pool_output_shape(imgshape, ws, ignore_border=True, stride=None, pad=None, ndim=2):
    """The output shape of pooling an input of shape ``imgshape``.

    >>> pool_output_shape((1, 5, 5), (2, 2), ignore_border=True)
    (1, 2, 2)
    >>> pool_output_shape((1, 5, 5), (2, 2), ignore_border=False)
    (1, 3, 3)
    """
    stride = ws if stride is None else stride
    pad = (0,) * ndim if pad is None else pad
    lead = tuple(imgshape[:-ndim])
    return lead + tuple(
        _out_len(imgshape[-ndim + i], ws[i], stride[i], pad[i], ignore_border) for i in range(ndim)
    )


def _static_ints(value, who, name):
    """A window, stride or padding given to a template's call (a tuple of ints or of
    constant scalars, a numpy array, a constant vector) as a tuple of ints; None stays
    None. The values must be known when the graph is built: they become Op parameters."""
    if value is None:
        return None
    if isinstance(value, Variable):
        if isinstance(value, Constant):
            return tuple(int(v) for v in np.asarray(value.data).reshape(-1))
        if value.owner is not None and isinstance(value.owner.op, MakeVector):
            return tuple(_static_ints(v, who, name)[0] for v in value.owner.inputs)
        raise NotImplementedError(
            f"{who}: {name} must be known when the graph is built (ints or constants): "
            f"in theano_dag the window, stride and padding are Op parameters, got {value}"
        )
    if isinstance(value, (list, tuple)):
        return tuple(v for part in value for v in _static_ints(part, who, name))
    return tuple(int(v) for v in np.asarray(value).reshape(-1))


class _PoolBase(Op):
    __props__ = ("ws", "stride", "pad", "ignore_border", "mode", "ndim")

    def __init__(self, ws=None, stride=None, pad=None, ignore_border=None, mode="max", ndim=2):
        who = type(self).__name__
        if isinstance(ws, (bool, np.bool_)):
            # Theano's order, ``Pool(ignore_border, mode, ndim)``
            # (``MaxPoolGrad(ignore_border, ndim)``): the window comes with the call.
            ws, ignore_border, rest = None, bool(ws), (stride, pad)
            stride = pad = None
            for v in rest:
                if isinstance(v, str):
                    mode = v
                elif isinstance(v, (int, np.integer)):
                    ndim = v
                elif v is not None:
                    raise TypeError(f"{who}: in Theano's order, expected a mode or ndim, got {v!r}")
        if not isinstance(ndim, (int, np.integer)) or ndim < 1:
            raise ValueError(f"{who}: ndim must be an int >= 1, got {ndim!r}")
        self.ndim = int(ndim)
        if ignore_border is None:
            # Theano's Pool built without a window defaults to False; ours, to True.
            ignore_border = ws is not None
        if ws is None:
            # A template (Theano's way): only ``make_node(x, ws, stride, pad)`` is usable.
            if stride is not None or pad is not None:
                raise ValueError(f"{who}: give stride and pad with the window")
            self.ws = self.stride = self.pad = None
            self.ignore_border = bool(ignore_border)
            self.mode = self._check_mode(mode, who)
            return
        self.ws = _ints(ws, self.ndim, "ws", who, 1)
        self.stride = self.ws if stride is None else _ints(stride, self.ndim, "stride", who, 1)
        self.pad = (0,) * self.ndim if pad is None else _ints(pad, self.ndim, "pad", who, 0)
        self.ignore_border = bool(ignore_border)
        self.mode = self._check_mode(mode, who)
        if any(self.pad) and not self.ignore_border:
            raise NotImplementedError(f"{who}: padding works only with ignore_border=True")

    @staticmethod
    def _check_mode(mode, who):
        if mode == "max_deterministic":
            mode = "max"
        if mode not in _MODES:
            raise ValueError(f"{who}: mode must be one of {_MODES}, got {mode!r}")
        return mode

    def _symbolic_call(self, inputs, ws, stride, pad):
        """The node of ``SymbolicWindowPool`` when a template is called with a window,
        stride or padding known only when the function runs (a symbolic vector); else
        None."""
        if self.ws is not None or not any(
            _is_symbolic(v) for v in (ws, stride, pad) if v is not None
        ):
            return None
        return SymbolicWindowPool(type(self), self.ignore_border, self.mode, self.ndim)(
            *inputs, *_window_vectors(ws, stride, pad, self.ndim)
        )

    def _with_window(self, ws, stride, pad):
        """This Op with the window a call gives: the concrete Op for a template; the
        same Op when the call repeats its window (or gives none)."""
        who = type(self).__name__
        ws = _static_ints(ws, who, "ws")
        stride = _static_ints(stride, who, "stride")
        pad = _static_ints(pad, who, "pad")
        if self.ws is None:
            if ws is None:
                raise TypeError(f"{who}: this Op was made without a window: call it with ws")
            return type(self)(ws, stride, pad, self.ignore_border, self.mode, self.ndim)
        if ws is None and stride is None and pad is None:
            return self
        ws = self.ws if ws is None else ws
        op = type(self)(ws, stride, pad, self.ignore_border, self.mode, self.ndim)
        if op != self:
            raise ValueError(
                f"{self}: called with another window: ws={ws}, stride={stride}, pad={pad}"
            )
        return self

    def __str__(self):
        return (
            f"{type(self).__name__}{{ws={self.ws}, stride={self.stride}, pad={self.pad}, "
            f"ignore_border={self.ignore_border}, mode={self.mode}}}"
        )

    __repr__ = __str__

    def _params(self):
        return dict(
            ws=self.ws,
            stride=self.stride,
            pad=self.pad,
            ignore_border=self.ignore_border,
            mode=self.mode,
            ndim=self.ndim,
        )

    def _input(self, x, name="x"):
        x = as_tensor_variable(x)
        if x.ndim < self.ndim:
            raise TypeError(
                f"{self}: argument {name} must have at least {self.ndim} "
                f"dimensions, got {x.type}"
            )
        if x.dtype == "bool" or x.dtype.startswith("complex"):
            raise TypeError(
                f"{self}: argument {name} must be a real numeric tensor, got " f"{x.type}"
            )
        return x

    def _pooled_type(self, x):
        shape = list(x.type.shape[: -self.ndim])
        for i in range(self.ndim):
            s = x.type.shape[-self.ndim + i]
            shape.append(
                None
                if s is None
                else _out_len(s, self.ws[i], self.stride[i], self.pad[i], self.ignore_border)
            )
        return TensorType(x.dtype, shape=tuple(shape))

    # -- numpy helpers ------------------------------------------------------------------

    def _geometry(self, xshape):
        nd = self.ndim
        img = xshape[-nd:]
        out = tuple(
            _out_len(img[i], self.ws[i], self.stride[i], self.pad[i], self.ignore_border)
            for i in range(nd)
        )
        # Padded extent: big enough for both the explicit padding and every window.
        ext = tuple(
            max(img[i] + 2 * self.pad[i], (out[i] - 1) * self.stride[i] + self.ws[i])
            for i in range(nd)
        )
        return out, ext

    def _padded(self, x, ext, fill):
        nd = self.ndim
        if all(e == s for e, s in zip(ext, x.shape[-nd:])):
            return x
        y = np.full(x.shape[:-nd] + ext, fill, dtype=x.dtype)
        y[self._inner(x.shape)] = x
        return y

    def _inner(self, xshape):
        nd = self.ndim
        return (Ellipsis,) + tuple(
            slice(self.pad[i], self.pad[i] + xshape[-nd + i]) for i in range(nd)
        )

    def _fill(self, dtype):
        if self.mode != "max":
            return 0
        return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min

    def _counts(self, xshape, out, ext):
        """How many pixels each window averages over (spatial shape ``out``)."""
        nd = self.ndim
        mask = np.zeros(ext)
        if self.mode == "average_inc_pad":
            mask[tuple(slice(0, xshape[-nd + i] + 2 * self.pad[i]) for i in range(nd))] = 1
        else:
            mask[tuple(slice(self.pad[i], self.pad[i] + xshape[-nd + i]) for i in range(nd))] = 1
        return self._fold(mask, out, np.add)

    def _windows(self, y, out):
        nd = self.ndim
        axes = tuple(range(y.ndim - nd, y.ndim))
        w = sliding_window_view(y, self.ws, axis=axes)
        lead = (slice(None),) * (y.ndim - nd)
        return w[lead + tuple(slice(0, out[i] * self.stride[i], self.stride[i]) for i in range(nd))]

    def _window_reduce(self, y, out, fn):
        nd = self.ndim
        if min(out) == 0:
            return np.zeros(y.shape[:-nd] + out, dtype=y.dtype)
        return fn(self._windows(y, out), axis=tuple(range(-nd, 0)))

    def _fold(self, y, out, fold):
        """Each window of ``y`` folded with ``np.maximum`` or ``np.add``."""
        if 0 < np.prod(self.ws) <= np.prod(out):
            # Fewer window offsets than windows: fold one strided slice per offset, each
            # a pass over contiguous rows; a reduction over the windows' view reads
            # each window's few elements at scattered strides (3-6x slower, 2-D and 3-D).
            offsets = self._offsets(out)
            z = y[next(offsets)].copy()
            for sl in offsets:
                fold(z, y[sl], out=z)
            return z
        return self._window_reduce(y, out, np.max if fold is np.maximum else np.sum)

    def _offsets(self, out):
        """For each window offset, the strided slice of the padded input it touches."""
        nd = self.ndim
        for off in itertools.product(*[range(w) for w in self.ws]):
            yield (Ellipsis,) + tuple(
                slice(off[i], off[i] + self.stride[i] * (out[i] - 1) + 1, self.stride[i])
                for i in range(nd)
            )


class Pool(_PoolBase):
    """Pool windows ``ws`` of the last ``ndim`` dimensions with ``mode``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> Pool((2, 2))(x).eval({x: np.arange(16.0).reshape(4, 4)})
    array([[ 5.,  7.],
           [13., 15.]])
    """

    @staticmethod
    def out_shape(
        imgshape,
        ws=None,
        ignore_border=False,
        stride=None,
        pad=None,
        ndim=2,
        ds=None,
        st=None,
        padding=None,
    ):
        """Theano's ``Pool.out_shape``: the shape (a list) of pooling an input of shape
        ``imgshape`` over its last ``ndim`` axes; entries may be symbolic.

        >>> Pool.out_shape((9, 8, 6), (2, 2))
        [9, 4, 3]
        >>> Pool.out_shape((2, 7, 7, 7), (3, 3, 3), ignore_border=True, stride=(2, 2, 2), ndim=3)
        [2, 3, 3, 3]
        """
        ws, stride, pad = _deprecated_names(
            "Pool.out_shape", ws, stride, pad, ds, st, padding, ndim
        )
        if isinstance(imgshape, Variable):  # a shape vector (``x.shape``): its entries
            n = imgshape.type.shape[0]
            if n is None:
                raise TypeError("Pool.out_shape: imgshape must have a known length")
            imgshape = [imgshape[i] for i in range(n)]
        if len(imgshape) < ndim:
            raise TypeError(f"Pool.out_shape: imgshape must have at least {ndim} dimensions")
        shape = pool_output_shape(tuple(imgshape), ws, ignore_border, stride, pad, ndim)
        return [int(s) if isinstance(s, (int, np.integer)) else s for s in shape]

    def make_node(self, x, ws=None, stride=None, pad=None):
        node = self._symbolic_call([x], ws, stride, pad)
        if node is not None:
            return node.owner
        op = self._with_window(ws, stride, pad)
        if op is not self:
            # A window given by the caller (pool_2d, pool_3d, Theano's call) is checked
            # here, as Theano does; the gradients' own Pools may pad more than a window.
            if any(p >= w for p, w in zip(op.pad, op.ws)):
                raise NotImplementedError(
                    f"{op}: padding {op.pad} must be smaller than the window {op.ws}"
                )
            return op.make_node(x)
        x = self._input(x)
        return Apply(self, [x], [self._pooled_type(x)()])

    def perform(self, node, inputs, output_storage, params=None):
        x = inputs[0]
        out, ext = self._geometry(x.shape)
        y = self._padded(x, ext, self._fill(x.dtype))
        z = self._fold(y, out, np.maximum if self.mode == "max" else np.add)
        if self.mode in ("average_inc_pad", "average_exc_pad"):
            z = z / self._counts(x.shape, out, ext)
        output_storage[0][0] = np.asarray(z, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [
            pool_output_shape(
                input_shapes[0], self.ws, self.ignore_border, self.stride, self.pad, self.ndim
            )
        ]

    def L_op(self, inputs, outputs, output_grads):
        (x,), (gz,) = inputs, output_grads
        if x.dtype in discrete_dtypes:
            return [tb.zeros_like(x, dtype="float64")]
        if self.mode == "max":
            return [MaxPoolGrad(**self._params())(x, outputs[0], gz)]
        return [AveragePoolGrad(**self._params())(x, gz)]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        if self.mode != "max":
            return [self(eval_points[0])]
        x = inputs[0]
        return [DownsampleFactorMaxGradGrad(**self._params())(x, self(x), eval_points[0])]


class MaxPoolGrad(_PoolBase):
    """Gradient of max pooling: inputs ``(x, maxout, gz)``; each window's gradient goes
    to every position holding its maximum."""

    def make_node(self, x, maxout, gz, ws=None, stride=None, pad=None):
        node = self._symbolic_call([x, maxout, gz], ws, stride, pad)
        if node is not None:
            return node.owner
        op = self._with_window(ws, stride, pad)
        if op is not self:
            return op.make_node(x, maxout, gz)
        x = self._input(x)
        maxout = self._input(maxout, "maxout")
        gz = self._input(gz, "gz")
        if maxout.ndim != x.ndim or gz.ndim != x.ndim:
            raise TypeError(
                f"{self}: x, maxout and gz must have the same number of "
                f"dimensions, got {x.ndim}, {maxout.ndim}, {gz.ndim}"
            )
        return Apply(self, [x, maxout, gz], [TensorType(gz.dtype, shape=x.type.shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        x, maxout, gz = inputs
        out, ext = self._geometry(x.shape)
        if maxout.shape != gz.shape or maxout.shape[-self.ndim :] != out:
            raise ValueError(
                f"{self}: maxout {maxout.shape} and gz {gz.shape} must be the "
                f"pooled shape of x {x.shape}"
            )
        y = self._padded(x, ext, self._fill(x.dtype))
        gx = np.zeros(y.shape, dtype=node.outputs[0].dtype)
        if min(out) > 0:
            for sl in self._offsets(out):
                gx[sl] += np.where(y[sl] == maxout, gz, 0)
        output_storage[0][0] = np.ascontiguousarray(gx[self._inner(x.shape)])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def L_op(self, inputs, outputs, output_grads):
        x, maxout, _ = inputs
        (g,) = output_grads
        return [
            tb.zeros_like(x),
            tb.zeros_like(maxout),
            DownsampleFactorMaxGradGrad(**self._params())(x, maxout, g),
        ]


class DownsampleFactorMaxGradGrad(_PoolBase):
    """The transpose of ``MaxPoolGrad`` in its last input: inputs ``(x, maxout, ggx)``,
    output of ``maxout``'s shape, the sum of ``ggx`` over each window's maxima."""

    def make_node(self, x, maxout, ggx, ws=None, stride=None, pad=None):
        node = self._symbolic_call([x, maxout, ggx], ws, stride, pad)
        if node is not None:
            return node.owner
        op = self._with_window(ws, stride, pad)
        if op is not self:
            return op.make_node(x, maxout, ggx)
        x = self._input(x)
        maxout = self._input(maxout, "maxout")
        ggx = self._input(ggx, "ggx")
        if maxout.ndim != x.ndim or ggx.ndim != x.ndim:
            raise TypeError(
                f"{self}: x, maxout and ggx must have the same number of "
                f"dimensions, got {x.ndim}, {maxout.ndim}, {ggx.ndim}"
            )
        return Apply(self, [x, maxout, ggx], [TensorType(ggx.dtype, shape=maxout.type.shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        x, maxout, ggx = inputs
        out, ext = self._geometry(x.shape)
        if ggx.shape != x.shape or maxout.shape[-self.ndim :] != out:
            raise ValueError(
                f"{self}: ggx {ggx.shape} must have x's shape {x.shape} and "
                f"maxout {maxout.shape} its pooled shape"
            )
        y = self._padded(x, ext, self._fill(x.dtype))
        gg = self._padded(ggx, ext, 0)
        z = np.zeros(maxout.shape, dtype=node.outputs[0].dtype)
        if min(out) > 0:
            for sl in self._offsets(out):
                z += np.where(y[sl] == maxout, gg[sl], 0)
        output_storage[0][0] = z

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[1]]

    def L_op(self, inputs, outputs, output_grads):
        x, maxout, _ = inputs
        (g,) = output_grads
        return [
            tb.zeros_like(x),
            tb.zeros_like(maxout),
            MaxPoolGrad(**self._params())(x, maxout, g),
        ]


class AveragePoolGrad(_PoolBase):
    """Gradient of sum/average pooling: inputs ``(x, gz)``; each window spreads its
    gradient (divided by its count for averages) over the pixels it covers."""

    def __init__(
        self, ws=None, stride=None, pad=None, ignore_border=None, mode="average_inc_pad", ndim=2
    ):
        super().__init__(ws, stride, pad, ignore_border, mode, ndim)

    def make_node(self, x, gz, ws=None, stride=None, pad=None, dummy=None):
        node = self._symbolic_call([x, gz], ws, stride, pad)
        if node is not None:
            return node.owner
        op = self._with_window(ws, stride, pad)
        if op is not self:
            return op.make_node(x, gz)
        x = self._input(x)
        gz = self._input(gz, "gz")
        if gz.ndim != x.ndim:
            raise TypeError(
                f"{self}: x and gz must have the same number of dimensions, got "
                f"{x.ndim} and {gz.ndim}"
            )
        if self.mode == "max":
            raise ValueError(f"{self}: mode 'max' uses MaxPoolGrad")
        return Apply(self, [x, gz], [TensorType(gz.dtype, shape=x.type.shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        x, gz = inputs
        out, ext = self._geometry(x.shape)
        if gz.shape[-self.ndim :] != out or gz.shape[: -self.ndim] != x.shape[: -self.ndim]:
            raise ValueError(f"{self}: gz {gz.shape} must be the pooled shape of x {x.shape}")
        if self.mode != "sum" and min(out) > 0:
            gz = gz / self._counts(x.shape, out, ext)
        gx = np.zeros(x.shape[: -self.ndim] + ext, dtype=node.outputs[0].dtype)
        if min(out) > 0:
            for sl in self._offsets(out):
                gx[sl] += gz
        output_storage[0][0] = np.ascontiguousarray(gx[self._inner(x.shape)])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def L_op(self, inputs, outputs, output_grads):
        x, _ = inputs
        (g,) = output_grads
        return [tb.zeros_like(x), Pool(**self._params())(g)]


def _is_symbolic(value):
    """Whether a window, stride or padding is known only when the function runs."""
    try:
        _static_ints(value, "", "")
    except NotImplementedError:
        return True
    return False


def _window_vectors(ws, stride, pad, ndim):
    """``ws``, ``stride`` (default: ``ws``) and ``pad`` (default: zeros) as int64 vectors."""

    def vector(v):
        if isinstance(v, (list, tuple)):
            v = MakeVector("int64")(*[tb.cast(as_tensor_variable(e), "int64") for e in v])
        v = tb.cast(as_tensor_variable(v), "int64")
        if v.ndim != 1:
            raise TypeError(f"pooling: a window, stride or padding must be a vector, got {v}")
        return v

    ws = vector(ws)
    stride = ws if stride is None else vector(stride)
    pad = tb.zeros((ndim,), dtype="int64") if pad is None else vector(pad)
    return ws, stride, pad


class SymbolicWindowPool(Op):
    """One of the pooling Ops (``base``: ``Pool``, ``MaxPoolGrad``, ``AveragePoolGrad``,
    ``DownsampleFactorMaxGradGrad``) whose window, stride and padding are its last three
    inputs (int64 vectors of ``ndim`` entries), known only when the function runs, as
    Theano allows (``pool_2d(x, ws=iv, stride=iv)``). Each call runs ``base`` built with
    the values given; a window known when the graph is built makes ``base``'s own node.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, w = tt.dmatrix("x"), tt.lvector("w")
    >>> y = pool_2d(x, ws=w, ignore_border=True)
    >>> type(y.owner.op).__name__
    'SymbolicWindowPool'
    >>> y.eval({x: np.arange(16.0).reshape(4, 4), w: [2, 2]})
    array([[ 5.,  7.],
           [13., 15.]])
    """

    __props__ = ("base", "ignore_border", "mode", "ndim")

    def __init__(self, base, ignore_border, mode="max", ndim=2):
        self.base = base
        self.ignore_border = bool(ignore_border)
        self.mode = _PoolBase._check_mode(mode, "SymbolicWindowPool")
        self.ndim = int(ndim)

    def __str__(self):
        return f"SymbolicWindowPool{{{self.base.__name__}, {self.mode}}}"

    def make_node(self, *inputs):
        *data, ws, stride, pad = inputs
        template = self.base(self.ignore_border, self.mode, self.ndim)
        data = [template._input(v, f"input {k}") for k, v in enumerate(data)]
        window = [tb.cast(as_tensor_variable(v), "int64") for v in (ws, stride, pad)]
        for v in window:
            if v.ndim != 1:
                raise TypeError(f"{self}: window, stride and padding must be vectors, got {v}")
        if self.base is Pool:
            x = data[0]
            shape = (*x.type.shape[: -self.ndim], *(None,) * self.ndim)
            out = TensorType(x.dtype, shape=shape)()
        elif self.base is DownsampleFactorMaxGradGrad:
            out = TensorType(data[2].dtype, shape=data[1].type.shape)()
        else:
            out = TensorType(data[-1].dtype, shape=data[0].type.shape)()
        return Apply(self, [*data, *window], [out])

    def _static(self, ws, stride, pad):
        who = str(self)
        for name, v in (("ws", ws), ("stride", stride), ("pad", pad)):
            if v.shape != (self.ndim,):
                raise ValueError(f"{who}: {name} must have {self.ndim} entries, got {v}")
        op = self.base(
            tuple(ws), tuple(stride), tuple(pad), self.ignore_border, self.mode, self.ndim
        )
        if self.base is Pool and any(p >= w for p, w in zip(op.pad, op.ws)):
            raise NotImplementedError(f"{op}: padding {op.pad} must be smaller than the window")
        return op

    def perform(self, node, inputs, output_storage, params=None):
        *data, ws, stride, pad = inputs
        self._static(ws, stride, pad).perform(node, data, output_storage)

    def infer_shape(self, fgraph, node, input_shapes):
        if self.base is Pool:
            ws, stride, pad = node.inputs[-3:]
            shape = list(input_shapes[0])
            for i in range(self.ndim):
                k = len(shape) - self.ndim + i
                shape[k] = _symbolic_out_len(shape[k], ws[i], stride[i], pad[i], self.ignore_border)
            return [tuple(shape)]
        if self.base is DownsampleFactorMaxGradGrad:
            return [input_shapes[1]]
        return [input_shapes[0]]

    def connection_pattern(self, node):
        n = len(node.inputs) - 3
        return [[True]] * n + [[False]] * 3

    def _again(self, base, *data, window):
        return SymbolicWindowPool(base, self.ignore_border, self.mode, self.ndim)(*data, *window)

    def L_op(self, inputs, outputs, output_grads):
        *data, ws, stride, pad = inputs
        window = (ws, stride, pad)
        (g,) = output_grads
        off = [disconnected_type() for _ in window]
        if self.base is Pool:
            (x,) = data
            if x.dtype in discrete_dtypes:
                return [tb.zeros_like(x, dtype="float64"), *off]
            if self.mode == "max":
                return [self._again(MaxPoolGrad, x, outputs[0], g, window=window), *off]
            return [self._again(AveragePoolGrad, x, g, window=window), *off]
        if self.base is AveragePoolGrad:
            x, _ = data
            return [tb.zeros_like(x), self._again(Pool, g, window=window), *off]
        x, maxout, _ = data
        other = (
            MaxPoolGrad
            if self.base is DownsampleFactorMaxGradGrad
            else (DownsampleFactorMaxGradGrad)
        )
        gg = self._again(other, x, maxout, g, window=window)
        return [tb.zeros_like(x), tb.zeros_like(maxout), gg, *off]


def _symbolic_out_len(v, ws, stride, pad, ignore_border):
    """``_out_len`` for a window, stride and padding known when the function runs."""
    v = v + 2 * pad
    if ignore_border:
        return math.maximum((v - ws) // stride + 1, 0)
    wide = (v - 1) // stride + 1
    narrow = math.maximum((v - 1 - ws + stride) // stride, 0) + 1
    return math.switch(math.ge(stride, ws), wide, narrow)


def _deprecated_names(who, ws, stride, pad, ds, st, padding, ndim):
    """``ws``, ``stride``, ``pad`` from Theano's arguments, the deprecated ``ds``, ``st``
    and ``padding`` included (each warns, as in Theano)."""
    for old, new, name, alias in ((ds, ws, "ws", "ds"), (st, stride, "stride", "st")):
        if old is not None and new is not None:
            raise ValueError(f"{who}: give {name} only, not its deprecated alias too")
        if old is not None:
            warnings.warn(
                f"{who}: {alias} is deprecated, use {name}", DeprecationWarning, stacklevel=3
            )
    ws = ds if ws is None else ws
    stride = st if stride is None else stride
    if padding is not None:
        if pad not in (None, (0,) * ndim):
            raise ValueError(f"{who}: give pad only, not its deprecated alias padding too")
        warnings.warn(f"{who}: padding is deprecated, use pad", DeprecationWarning, stacklevel=3)
        pad = padding
    if ws is None:
        raise ValueError(f"{who}: you must provide a tuple value for the window size (ws)")
    return ws, stride, pad


def _pool_nd(who, ndim, input, ws, ignore_border, stride, pad, mode, ds, st, padding):  # noqa: A002
    ws, stride, pad = _deprecated_names(who, ws, stride, pad, ds, st, padding, ndim)
    input = as_tensor_variable(input)  # noqa: A001
    if input.ndim < ndim:
        raise NotImplementedError(f"{who} requires an input with {ndim} or more dimensions")
    if ignore_border is None:
        warnings.warn(
            f"{who}: ignore_border=None means False (Theano's default); pass it explicitly",
            DeprecationWarning,
            stacklevel=3,
        )
        ignore_border = False
    return Pool(ignore_border, ndim=ndim, mode=mode)(input, ws, stride, pad)


def pool_2d(
    input,
    ws=None,
    ignore_border=None,
    stride=None,
    pad=(0, 0),
    mode="max",  # noqa: A002
    ds=None,
    st=None,
    padding=None,
):
    """Pool the last two dimensions of ``input`` (Theano's signature).

    ``ignore_border=None`` warns and means False, as in Theano; ``ds``/``st``/``padding``
    are the deprecated names of ``ws``/``stride``/``pad``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> pool_2d(x, (2, 2), ignore_border=True, mode="average_inc_pad").eval(
    ...     {x: np.arange(16.0).reshape(4, 4)})
    array([[ 2.5,  4.5],
           [10.5, 12.5]])
    """
    return _pool_nd("pool_2d", 2, input, ws, ignore_border, stride, pad, mode, ds, st, padding)


def pool_3d(
    input,
    ws=None,
    ignore_border=None,
    stride=None,
    pad=(0, 0, 0),
    mode="max",  # noqa: A002
    ds=None,
    st=None,
    padding=None,
):
    """Pool the last three dimensions of ``input`` (Theano's signature): ``mode`` is
    ``'max'``, ``'sum'``, ``'average_inc_pad'`` or ``'average_exc_pad'``; any leading
    dimensions are batch dimensions.

    ``ignore_border=None`` warns and means False, as in Theano; ``ds``/``st``/``padding``
    are the deprecated names of ``ws``/``stride``/``pad``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dtensor3("x")
    >>> pool_3d(x, (2, 2, 2), ignore_border=True).eval(
    ...     {x: np.arange(27.0).reshape(3, 3, 3)})
    array([[[13.]]])
    >>> pool_3d(x, (2, 2, 2), ignore_border=False, mode="average_exc_pad").eval(
    ...     {x: np.arange(27.0).reshape(3, 3, 3)})[1]
    array([[20. , 21.5],
           [24.5, 26. ]])
    """
    return _pool_nd("pool_3d", 3, input, ws, ignore_border, stride, pad, mode, ds, st, padding)


def max_pool_2d_same_size(input, patch_size):  # noqa: A002
    """Keep the maximum of each non-overlapping ``patch_size`` patch of the last two
    dimensions and zero the rest (Theano's): the output has the input's shape.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> max_pool_2d_same_size(x, (2, 2)).eval({x: np.arange(8.0).reshape(2, 4)})
    array([[0., 0., 0., 0.],
           [0., 5., 0., 7.]])
    """
    pooled = Pool(True)(input, patch_size)
    return MaxPoolGrad(True)(input, pooled, pooled, patch_size)


def max_pool_2d(input, ws, ignore_border=True, stride=None, pad=(0, 0)):  # noqa: A002
    """Max pooling of the last two dimensions.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dtensor4("x")
    >>> max_pool_2d(x, (2, 2)).eval({x: np.arange(16.0).reshape(1, 1, 4, 4)})[0, 0]
    array([[ 5.,  7.],
           [13., 15.]])
    """
    return pool_2d(input, ws, ignore_border=ignore_border, stride=stride, pad=pad, mode="max")


def avg_pool_2d(
    input,
    ws,
    ignore_border=True,
    stride=None,
    pad=(0, 0),  # noqa: A002
    include_pad=False,
):
    """Average pooling of the last two dimensions (padding counted if ``include_pad``).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dtensor4("x")
    >>> avg_pool_2d(x, (2, 2)).eval({x: np.arange(16.0).reshape(1, 1, 4, 4)})[0, 0]
    array([[ 2.5,  4.5],
           [10.5, 12.5]])
    """
    mode = "average_inc_pad" if include_pad else "average_exc_pad"
    return pool_2d(input, ws, ignore_border=ignore_border, stride=stride, pad=pad, mode=mode)
