"""numpy functions Theano users reach for (``theano.tensor.extra_ops`` and friends):
``cumsum``/``cumprod``, ``diag``/``diagonal``, ``tri``/``tril``/``triu``,
``isclose``/``allclose``, ``max_and_argmax``, ``squeeze``, ``flip``.

Where a function is a few existing ops put together (``tril`` is a ``switch`` on an
``arange`` comparison, ``isclose`` is elementwise arithmetic) it builds them, so it
gets their gradients, shapes and engine support for free; new Ops are added only
where numpy has a primitive with no such expression (cumulative ops, diagonals).
"""

from __future__ import annotations

import numpy as np

from theano_dag.config import config
from theano_dag.graph.basic import Apply
from theano_dag.graph.null_type import disconnected_type
from theano_dag.graph.op import Op
from theano_dag.tensor import basic as tb
from theano_dag.tensor import math as tm
from theano_dag.tensor.elemwise import DimShuffle, _norm_axis
from theano_dag.tensor.shape import shape_i, specify_shape
from theano_dag.tensor.subtensor import set_subtensor
from theano_dag.tensor.type import TensorType, discrete_dtypes
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "CumOp",
    "cumsum",
    "cumprod",
    "ExtractDiag",
    "AllocDiag",
    "diagonal",
    "diag",
    "tri",
    "tril",
    "triu",
    "isclose",
    "allclose",
    "max_and_argmax",
    "squeeze",
    "flip",
]


def _disconnected():
    return disconnected_type()


def _float_zeros(x):
    return tb.zeros_like(x, dtype=config.floatX)


def _check_axis(who, axis, ndim, allow_none=True):
    """``axis`` normalized to ``[0, ndim)`` (None kept when allowed)."""
    if axis is None and allow_none:
        return None
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(
            f"{who}: axis must be an int{' or None' if allow_none else ''}, got " f"{axis!r}"
        )
    if not -ndim <= axis < ndim:
        raise ValueError(f"{who}: axis {axis} is out of range for a {ndim}-d input")
    return int(axis) % ndim


def _reverse(x, axis):
    """``x`` reversed along ``axis`` (a strided view)."""
    idx = [slice(None)] * x.ndim
    idx[axis] = slice(None, None, -1)
    return x[tuple(idx)]


# -- cumulative sums and products -----------------------------------------------------


class CumOp(Op):
    """``numpy.cumsum`` (``mode='add'``) or ``numpy.cumprod`` (``mode='mul'``) along
    ``axis`` (None: of the flattened input). Small integers accumulate in int64, as numpy.

    >>> from theano_dag import tensor as tt
    >>> CumOp(axis=1)(tt.imatrix("m")).type
    TensorType(int64, matrix)
    """

    __props__ = ("axis", "mode")

    def __init__(self, axis=None, mode="add"):
        if mode not in ("add", "mul"):
            raise ValueError(f"CumOp: mode must be 'add' or 'mul', got {mode!r}")
        if axis is not None and (not isinstance(axis, (int, np.integer)) or isinstance(axis, bool)):
            raise TypeError(f"CumOp: axis must be an int or None, got {axis!r}")
        self.axis = None if axis is None else int(axis)
        self.mode = mode

    def __str__(self):
        return f"{'CumSum' if self.mode == 'add' else 'CumProd'}{{axis={self.axis}}}"

    __repr__ = __str__

    def _fn(self):
        return np.cumsum if self.mode == "add" else np.cumprod

    def make_node(self, x):
        x = as_tensor_variable(x)
        if x.dtype.startswith("complex"):
            raise TypeError(f"{self}: complex inputs are not supported, got {x.type}")
        dtype = self._fn()(np.zeros(1, dtype=x.dtype)).dtype.name
        if self.axis is None:
            n = None if None in x.type.shape else int(np.prod(x.type.shape, dtype=np.int64))
            shape = (n,)
        else:
            _check_axis(str(self), self.axis, x.ndim, allow_none=False)
            shape = x.type.shape
        return Apply(self, [x], [TensorType(dtype, shape=shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        out = self._fn()(inputs[0], axis=self.axis)
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        if self.axis is None:
            n = 1
            for s in input_shapes[0]:
                n = n * s
            return [(n,)]
        return [tuple(input_shapes[0])]

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        (gz,) = output_grads
        if x.dtype in discrete_dtypes:
            return [_float_zeros(x)]
        # d out_j / d x_i is nonzero for j >= i: the gradient is a cumulative sum of gz
        # taken from the end (reverse, cumsum, reverse). For a product, each term of that
        # sum is out_j * gz_j / x_i (which needs x_i != 0, as in Theano).
        if self.mode == "mul":
            gz = gz * outputs[0]
        if self.axis is None:
            g = tb.reshape(_reverse(cumsum(_reverse(gz, 0)), 0), tb.shape(x), ndim=x.ndim)
        else:
            axis = self.axis % x.ndim
            g = _reverse(cumsum(_reverse(gz, axis), axis), axis)
        if self.mode == "mul":
            g = g / x
        return [g]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        if self.mode == "add":
            return [CumOp(self.axis, "add")(eval_points[0])]
        return [None]


def cumsum(x, axis=None):
    """Cumulative sum along ``axis`` (None: of the flattened ``x``), as ``numpy.cumsum``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> cumsum(x, axis=1).eval({x: np.array([[1.0, 2.0, 3.0]])})
    array([[1., 3., 6.]])
    """
    return CumOp(axis=axis, mode="add")(x)


def cumprod(x, axis=None):
    """Cumulative product along ``axis`` (None: of the flattened ``x``).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dvector("x")
    >>> cumprod(x).eval({x: np.array([1.0, 2.0, 3.0])})
    array([1., 2., 6.])
    """
    return CumOp(axis=axis, mode="mul")(x)


# -- diagonals --------------------------------------------------------------------------


def _diag_len(n1, n2, offset):
    """Length of diagonal ``offset`` of an ``n1 x n2`` matrix (ints or int scalars)."""
    a = n1 - max(0, -offset)
    b = n2 - max(0, offset)
    if all(isinstance(v, (int, np.integer)) for v in (a, b)):
        return max(0, min(int(a), int(b)))
    return tm.maximum(tm.minimum(a, b), 0)


class ExtractDiag(Op):
    """``numpy.diagonal(x, offset, axis1, axis2)`` (a copy): the two axes are removed and
    the diagonal becomes the last one.

    >>> from theano_dag import tensor as tt
    >>> ExtractDiag(offset=1)(tt.TensorType("float64", shape=(3, 5))("m")).type
    TensorType(float64, shape=(3,))
    """

    __props__ = ("offset", "axis1", "axis2")

    def __init__(self, offset=0, axis1=0, axis2=1):
        for name, v in (("offset", offset), ("axis1", axis1), ("axis2", axis2)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise TypeError(f"ExtractDiag: {name} must be an int, got {v!r}")
        self.offset, self.axis1, self.axis2 = int(offset), int(axis1), int(axis2)

    def _axes(self, x):
        if x.ndim < 2:
            raise TypeError(f"{self}: the input must have 2 or more dimensions, got {x.type}")
        a1 = _check_axis(str(self), self.axis1, x.ndim, allow_none=False)
        a2 = _check_axis(str(self), self.axis2, x.ndim, allow_none=False)
        if a1 == a2:
            raise ValueError(f"{self}: axis1 and axis2 must differ, both are {a1}")
        return a1, a2

    def make_node(self, x):
        x = as_tensor_variable(x)
        a1, a2 = self._axes(x)
        rest = [s for d, s in enumerate(x.type.shape) if d not in (a1, a2)]
        n1, n2 = x.type.shape[a1], x.type.shape[a2]
        length = None if None in (n1, n2) else _diag_len(n1, n2, self.offset)
        return Apply(self, [x], [TensorType(x.dtype, shape=(*rest, length))()])

    def perform(self, node, inputs, output_storage, params=None):
        out = np.diagonal(inputs[0], self.offset, self.axis1, self.axis2)
        output_storage[0][0] = out.copy()  # numpy's diagonal is a read-only view

    def infer_shape(self, fgraph, node, input_shapes):
        a1, a2 = self._axes(node.inputs[0])
        (shp,) = input_shapes
        rest = [s for d, s in enumerate(shp) if d not in (a1, a2)]
        return [(*rest, _diag_len(shp[a1], shp[a2], self.offset))]

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        (gz,) = output_grads
        if x.dtype in discrete_dtypes:
            return [_float_zeros(x)]
        a1, a2 = self._axes(x)
        # Move the two axes last, scatter gz onto positions (r + i, c + i) there, move back.
        order = [d for d in range(x.ndim) if d not in (a1, a2)] + [a1, a2]
        xt = x.dimshuffle(*order)
        n = shape_i(gz, gz.ndim - 1)
        r = tb.arange(n) + max(0, -self.offset)
        c = tb.arange(n) + max(0, self.offset)

        zeros = tb.zeros_like(xt, dtype=gz.dtype)
        gt = set_subtensor(zeros[(Ellipsis, r, c)], gz)
        back = [order.index(d) for d in range(x.ndim)]
        return [gt.dimshuffle(*back)]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        return self(*eval_points, return_list=True)


class AllocDiag(Op):
    """A square matrix with the vector ``v`` on diagonal ``offset`` (``numpy.diag(v, k)``).

    >>> from theano_dag import tensor as tt
    >>> AllocDiag(offset=-1)(tt.TensorType("float64", shape=(3,))("v")).type
    TensorType(float64, shape=(4, 4))
    """

    __props__ = ("offset",)

    def __init__(self, offset=0):
        if not isinstance(offset, (int, np.integer)) or isinstance(offset, bool):
            raise TypeError(f"AllocDiag: offset must be an int, got {offset!r}")
        self.offset = int(offset)

    def make_node(self, v):
        v = as_tensor_variable(v)
        if v.ndim != 1:
            raise TypeError(f"{self}: the input must be a vector, got {v.type}")
        n = v.type.shape[0]
        n = None if n is None else n + abs(self.offset)
        return Apply(self, [v], [TensorType(v.dtype, shape=(n, n))()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.diag(inputs[0], self.offset)

    def infer_shape(self, fgraph, node, input_shapes):
        n = input_shapes[0][0] + abs(self.offset)
        return [(n, n)]

    def L_op(self, inputs, outputs, output_grads):
        (v,) = inputs
        if v.dtype in discrete_dtypes:
            return [_float_zeros(v)]
        return [ExtractDiag(self.offset, 0, 1)(output_grads[0])]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        return self(*eval_points, return_list=True)


def diagonal(a, offset=0, axis1=0, axis2=1):
    """``numpy.diagonal``: the diagonal ``offset`` of ``a`` over ``axis1`` and ``axis2``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> m = tt.dmatrix("m")
    >>> diagonal(m, 1).eval({m: np.arange(9.0).reshape(3, 3)})
    array([1., 5.])
    """
    return ExtractDiag(offset, axis1, axis2)(a)


def diag(v, k=0):
    """``numpy.diag``: a vector's diagonal matrix, or a matrix's diagonal ``k``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> v = tt.dvector("v")
    >>> diag(v).eval({v: np.array([1.0, 2.0])})
    array([[1., 0.],
           [0., 2.]])
    """
    v = as_tensor_variable(v)
    if v.ndim == 1:
        return AllocDiag(k)(v)
    if v.ndim >= 2:
        return diagonal(v, offset=k)
    raise ValueError(f"diag: the input must have 1 or more dimensions, got the scalar {v}")


# -- triangles ---------------------------------------------------------------------------


def tri(N, M=None, k=0, dtype=None):  # noqa: N803 (numpy's names)
    """``numpy.tri``: ones on and below diagonal ``k`` of an ``N x M`` matrix.

    >>> tri(3, k=-1, dtype="int64").eval()
    array([[0, 0, 0],
           [1, 0, 0],
           [1, 1, 0]])
    """
    rows = tb.arange(N, dtype="int64")
    cols = tb.arange(N if M is None else M, dtype="int64")
    mask = tm.ge(rows.dimshuffle(0, "x") + k, cols.dimshuffle("x", 0))
    return tb.cast(mask, dtype or config.floatX)


def _triangle(m, k, lower, who):
    m = as_tensor_variable(m)
    if m.ndim < 2:
        raise TypeError(f"{who}: the input must have 2 or more dimensions, got {m.type}")
    if not isinstance(k, (int, np.integer)) and getattr(k, "ndim", None) != 0:
        raise TypeError(f"{who}: k must be an int or an int scalar, got {k!r}")
    rows = tb.arange(shape_i(m, m.ndim - 2), dtype="int64").dimshuffle(0, "x")
    cols = tb.arange(shape_i(m, m.ndim - 1), dtype="int64").dimshuffle("x", 0)
    # j <= i + k keeps the lower triangle, j >= i + k the upper one. A switch, not a
    # product with a 0/1 mask as in Theano, so that inf and nan outside stay out.
    keep = tm.le(cols, rows + k) if lower else tm.ge(cols, rows + k)
    return tm.switch(keep, m, tb.constant(np.zeros((), dtype=m.dtype)))


def tril(m, k=0):
    """``numpy.tril``: ``m`` with the elements above diagonal ``k`` zeroed (the last two
    dimensions; the leading ones are a batch).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> m = tt.dmatrix("m")
    >>> tril(m).eval({m: np.ones((2, 3))})
    array([[1., 0., 0.],
           [1., 1., 0.]])
    """
    return _triangle(m, k, True, "tril")


def triu(m, k=0):
    """``numpy.triu``: ``m`` with the elements below diagonal ``k`` zeroed.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> m = tt.dmatrix("m")
    >>> triu(m, 1).eval({m: np.ones((2, 3))})
    array([[0., 1., 1.],
           [0., 0., 1.]])
    """
    return _triangle(m, k, False, "triu")


# -- comparisons with tolerance ----------------------------------------------------------


def isclose(a, b, rtol=1.0e-5, atol=1.0e-8, equal_nan=False):
    """``numpy.isclose``: ``|a - b| <= atol + rtol * |b|`` elementwise (bool).

    Infinities are close only to the same infinity; NaNs to nothing unless ``equal_nan``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> a, b = tt.dvector("a"), tt.dvector("b")
    >>> values = {a: np.array([1.0, np.inf, 1.0]), b: np.array([1.0 + 1e-9, np.inf, 2.0])}
    >>> isclose(a, b).eval(values)
    array([ True,  True, False])
    """
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    if a.dtype in discrete_dtypes and b.dtype in discrete_dtypes:
        # Integers: compare in float64 (numpy does too), where |a - b| cannot wrap around.
        a, b = tb.cast(a, "float64"), tb.cast(b, "float64")
    finite = tm.invert(tm.or_(tm.isinf(a), tm.isinf(b)))
    within = tm.le(tm.abs(a - b), atol + rtol * tm.abs(b))
    # Where a or b is infinite the arithmetic is meaningless (inf - inf is nan): only equal
    # values (the same infinity) are close there.
    close = tm.switch(finite, within, tm.eq(a, b))
    if equal_nan:
        close = tm.or_(close, tm.and_(tm.isnan(a), tm.isnan(b)))
    return close


def allclose(a, b, rtol=1.0e-5, atol=1.0e-8, equal_nan=False):
    """``numpy.allclose``: whether every element of ``a`` is close to ``b`` (a bool scalar).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> a = tt.dvector("a")
    >>> bool(allclose(a, a + 1e-9).eval({a: np.ones(3)}))
    True
    """
    return tm.all(isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


# -- max and argmax; squeeze, flip ----------------------------------------------------------


def max_and_argmax(a, axis=None, keepdims=False):
    """The maximum of ``a`` over ``axis`` and where it is (Theano's ``max_and_argmax``).

    ``axis`` is None (everything), an int or a list of ints; with several axes the index
    is into those axes flattened (in order), as in Theano.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> m = tt.dmatrix("m")
    >>> mx, i = max_and_argmax(m, axis=1)
    >>> [v.tolist() for v in (mx.eval({m: np.eye(2)}), i.eval({m: np.eye(2)}))]
    [[1.0, 1.0], [0, 1]]
    """
    a = as_tensor_variable(a)
    axes = _norm_axis(axis, a.ndim, "max_and_argmax")
    mx = tm.max(a, axis=axes, keepdims=keepdims)
    if axes is None or len(axes) == a.ndim:
        idx = tm.argmax(a)
        if keepdims:
            idx = idx.dimshuffle(*["x"] * a.ndim)
        return [mx, idx]
    if len(axes) == 1:
        return [mx, tm.argmax(a, axis=axes[0], keepdims=keepdims)]
    kept = [d for d in range(a.ndim) if d not in axes]
    moved = a.dimshuffle(*kept, *axes)
    flat = tb.reshape(moved, [shape_i(a, d) for d in kept] + [-1], ndim=len(kept) + 1)
    idx = tm.argmax(flat, axis=-1)
    if keepdims:
        order, k = [], 0
        for d in range(a.ndim):
            order.append("x" if d in axes else k)
            k += d not in axes
        idx = idx.dimshuffle(*order)
    return [mx, idx]


def squeeze(x, axis=None):
    """Remove length-1 dimensions: the broadcastable ones (``axis=None``), or ``axis``.

    A dimension named in ``axis`` whose length is not statically 1 is checked to be 1 at
    run time (through ``specify_shape``), as numpy would refuse it.

    >>> from theano_dag import tensor as tt
    >>> squeeze(tt.TensorType("float64", shape=(1, None, 1))("x")).type
    TensorType(float64, vector)
    >>> squeeze(tt.dmatrix("m"), axis=0).type
    TensorType(float64, vector)
    """

    x = as_tensor_variable(x)
    if axis is None:
        return tb.squeeze(x)
    axes = _norm_axis(axis, x.ndim, "squeeze")
    if any(not x.broadcastable[d] for d in axes):
        x = specify_shape(x, tuple(1 if d in axes else None for d in range(x.ndim)))
    return DimShuffle(x.broadcastable, [d for d in range(x.ndim) if d not in axes])(x)


def flip(x, axis=None):
    """``numpy.flip``: ``x`` reversed along ``axis`` (an int, a tuple, or None: all).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> m = tt.dmatrix("m")
    >>> flip(m, 1).eval({m: np.array([[1.0, 2.0], [3.0, 4.0]])})
    array([[2., 1.],
           [4., 3.]])
    """
    x = as_tensor_variable(x)
    axes = _norm_axis(axis, x.ndim, "flip")
    axes = range(x.ndim) if axes is None else axes
    idx = [slice(None, None, -1) if d in axes else slice(None) for d in range(x.ndim)]
    return x[tuple(idx)] if x.ndim else x
