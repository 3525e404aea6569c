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

from theano_dag import scalar as ts
from theano_dag.config import config
from theano_dag.graph.basic import Apply, Constant, Variable
from theano_dag.graph.null_type import disconnected_type
from theano_dag.graph.op import Op
from theano_dag.graph.shared import SharedVariable
from theano_dag.tensor import basic as tb
from theano_dag.tensor import math as tm
from theano_dag.tensor.arrays import Assert, MaxAndArgmax, Tri, flatnonzero
from theano_dag.tensor.basic import repeat
from theano_dag.tensor.elemwise import DimShuffle, _norm_axis, reduce_spread_grad_to
from theano_dag.tensor.nnet.nnet import to_one_hot
from theano_dag.tensor.shape import (
    broadcast_length,
    broadcast_shapes,
    checked_shape,
    patternbroadcast,
    shape_i,
    specify_shape,
    spread_length,
)
from theano_dag.tensor.subtensor import advanced_inc_subtensor1, set_subtensor, take
from theano_dag.tensor.type import TensorType, discrete_dtypes
from theano_dag.tensor.type_other import NoneTypeT
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
    "CpuContiguous",
    "cpu_contiguous",
    "SearchsortedOp",
    "searchsorted",
    "bincount",
    "DiffOp",
    "diff",
    "compress",
    "RepeatOp",
    "repeat",
    "Bartlett",
    "bartlett",
    "FillDiagonal",
    "fill_diagonal",
    "FillDiagonalOffset",
    "fill_diagonal_offset",
    "Unique",
    "unique",
    "RavelMultiIndex",
    "ravel_multi_index",
    "UnravelIndex",
    "unravel_index",
    "BroadcastTo",
    "broadcast_to",
    "broadcast_shape",
    "to_one_hot",
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
        dtype = self._fn()(np.zeros(1, dtype=x.dtype)).dtype.name
        if self.axis is None:
            n = None if None in x.type.shape else int(np.prod(x.type.shape, dtype=np.int64))
            shape = (n,)
        else:
            _check_axis(str(self), self.axis, x.ndim, allow_none=False)
            shape = x.type.shape
        return Apply(self, [x], [TensorType(dtype, shape=shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        od = node.outputs[0].dtype
        if x.dtype != od or self.axis is None:
            # Accumulated in place in one converted (or flattened) copy: numpy's
            # accumulate with a cast, or of a ravel that copies, holds that copy beside
            # the output (an int16 input's int64 cumsum took twice its output's bytes).
            # A C-ordered copy, flattened without another one for axis=None, as numpy
            # flattens.
            out = x.astype(od, order="C")
            if self.axis is None:
                out = out.reshape(-1)
            output_storage[0][0] = self._fn()(out, axis=self.axis, out=out)
            return
        out = self._fn()(x, axis=self.axis)
        output_storage[0][0] = np.asarray(out, dtype=od)

    def infer_shape(self, fgraph, node, input_shapes):
        if self.axis is None:
            n = 1
            for s in input_shapes[0]:
                n = n * s
            return [(n,)]
        return [tuple(input_shapes[0])]

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        if x.dtype in discrete_dtypes:
            return [_float_zeros(x)]
        # Holomorphic: complex values conjugate around the real formula.
        return ts.holomorphic_grads(
            lambda grads: self._real_L_op(x, grads[0], outputs[0]), inputs, outputs, output_grads
        )

    def _real_L_op(self, x, gz, out):
        # d out_j / d x_i is nonzero for j >= i: the gradient is a cumulative sum of gz
        # taken from the end (reverse, cumsum, reverse).
        if self.mode == "add":
            if self.axis is None:
                return [tb.reshape(_rev_cumsum(gz, 0), tb.shape(x), ndim=x.ndim)]
            return [_rev_cumsum(gz, self.axis % x.ndim)]
        if self.axis is None:
            flat = tb.reshape(x, (-1,), ndim=1)
            g = _cumprod_grad(flat, tb.reshape(gz, (-1,), ndim=1), out, 0)
            return [tb.reshape(g, tb.shape(x), ndim=x.ndim)]
        return [_cumprod_grad(x, gz, out, self.axis % x.ndim)]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        if self.mode == "add":
            return [CumOp(self.axis, "add")(eval_points[0])]
        return [None]


def _rev_cumsum(x, axis):
    """The cumulative sum of ``x`` along ``axis`` taken from the end."""
    return _reverse(cumsum(_reverse(x, axis), axis), axis)


def _cumprod_grad(x, gz, out, axis):
    """The gradient of ``out = cumprod(x, axis)`` given ``gz``, zeros in ``x`` included,
    written so that its own gradient (a Hessian) is right at zeros too.

    Before the first zero of a slice, ``d out_j / d x_i = out_j / x_i`` (Theano's and
    PyTensor's formula, which alone gives 0/0 = NaN at a zero and after it). At the
    first zero ``f``, the terms are the products of ``x`` without ``x_f``: the cumulative
    product with ``x_f`` read as 1, summed from the end. After it every term holds
    ``x_f``, so the value is 0; ``x_f`` is kept as a factor there (and, at the second
    zero ``s``, with the products read without ``x_s`` as well), so that the derivative
    with respect to ``x_f`` is not lost. From the third zero on, every term holds two
    other zeros: 0 to second order.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> from theano_dag.gradient import grad
    >>> v = tt.dvector("v")
    >>> grad(cumprod(v, axis=0).sum(), v).eval({v: np.array([2.0, 0.0, 3.0, 0.0])})
    array([1., 8., 0., 0.])
    """
    zero = tm.eq(x, 0)
    seen = cumsum(zero, axis)  # the zeros up to each position, itself included
    before = tm.eq(seen, 0)
    first = tm.and_(zero, tm.eq(seen, 1))
    second = tm.and_(zero, tm.eq(seen, 2))
    ones, zeros = tb.ones_like(x), tb.zeros_like(x)
    # Divided by 1 where the quotient is not taken: x / 0 there gave a NaN in the
    # gradient's own gradient (0 times an infinite derivative), though never in its value.
    nonzero_x = tm.switch(zero, ones, x)
    x_first = tm.sum(tm.switch(first, x, zeros), axis=axis, keepdims=True)
    without = cumprod(tm.switch(first, ones, x), axis)
    without_two = cumprod(tm.switch(tm.or_(first, second), ones, x), axis)
    at_first = _rev_cumsum(gz * without, axis)
    later_zero = tm.switch(second, x_first * _rev_cumsum(gz * without_two, axis), zeros)
    after = tm.switch(zero, later_zero, x_first * at_first / nonzero_x)
    g = _rev_cumsum(gz * out, axis) / nonzero_x
    return tm.switch(before, g, tm.switch(first, at_first, after))


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
    """The inverse of ``ExtractDiag``: zeros with the last axis of ``x`` on diagonal
    ``offset`` of the axes ``axis1`` and ``axis2`` of the result (one dimension more than
    ``x``), so that ``numpy.diagonal(AllocDiag(k, a1, a2)(x), k, a1, a2)`` gives ``x``
    back. A vector gives ``numpy.diag(v, k)``. The two axes count in the result and are
    taken in increasing order (Theano's rule).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> AllocDiag(offset=-1)(tt.TensorType("float64", shape=(3,))("v")).type
    TensorType(float64, shape=(4, 4))
    >>> m = tt.dmatrix("m")
    >>> out = AllocDiag(offset=1, axis1=0, axis2=2)(m).eval({m: np.ones((2, 3))})
    >>> out.shape, bool((np.diagonal(out, 1, 0, 2) == 1).all())
    ((4, 2, 4), True)
    """

    __props__ = ("offset", "axis1", "axis2")

    def __init__(self, offset=0, axis1=0, axis2=1):
        for name, v in (("offset", offset), ("axis1", axis1), ("axis2", axis2)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise TypeError(f"AllocDiag: {name} must be an int, got {v!r}")
        self.offset, self.axis1, self.axis2 = int(offset), int(axis1), int(axis2)

    def _axes(self, ndim):
        """The two axes of the result (of ``ndim`` dimensions), in increasing order."""
        a1 = _check_axis(str(self), self.axis1, ndim, allow_none=False)
        a2 = _check_axis(str(self), self.axis2, ndim, allow_none=False)
        if a1 == a2:
            raise ValueError(f"{self}: axis1 and axis2 must differ, both are {a1}")
        return min(a1, a2), max(a1, a2)

    def _place(self, rest, n):
        """The result's shape: ``rest`` (the input's shape but its last entry) with ``n``
        inserted at both axes."""
        a1, a2 = self._axes(len(rest) + 2)
        shape = list(rest)
        shape.insert(a1, n)
        shape.insert(a2, n)
        return shape

    def make_node(self, v):
        v = as_tensor_variable(v)
        if v.ndim < 1:
            raise TypeError(f"{self}: the input must have 1 or more dimensions, got {v.type}")
        n = v.type.shape[-1]
        n = None if n is None else n + abs(self.offset)
        shape = self._place(v.type.shape[:-1], n)
        return Apply(self, [v], [TensorType(v.dtype, shape=tuple(shape))()])

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        k = self.offset
        n = x.shape[-1] + abs(k)
        out = np.zeros(x.shape[:-1] + (n, n), dtype=x.dtype)
        i = np.arange(x.shape[-1])
        out[..., i + max(0, -k), i + max(0, k)] = x
        a1, a2 = self._axes(x.ndim + 1)
        output_storage[0][0] = np.moveaxis(out, (-2, -1), (a1, a2))

    def infer_shape(self, fgraph, node, input_shapes):
        (shape,) = input_shapes
        return [tuple(self._place(shape[:-1], shape[-1] + abs(self.offset)))]

    def L_op(self, inputs, outputs, output_grads):
        (v,) = inputs
        if v.dtype in discrete_dtypes:
            return [_float_zeros(v)]
        a1, a2 = self._axes(v.ndim + 1)
        return [ExtractDiag(self.offset, a1, a2)(output_grads[0])]

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

    A symbolic ``M`` makes one ``Tri`` node, which reads a value of None given to a call
    as numpy does (``M = N``); otherwise the mask is built from ``arange``, which fuses.
    """
    if isinstance(M, Variable) and not isinstance(M, Constant):
        return Tri(dtype)(N, M, k)
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


def _constant_axes(axis, ndim, who):
    """Theano's axis argument as a sorted tuple of distinct axes, or None for all: an int,
    a list, a 0-d or 1-d array, a constant of those, or None/NoneConst; a repeated axis
    counts once."""
    if isinstance(axis, Variable):
        if isinstance(axis.type, NoneTypeT):
            return None
        if not isinstance(axis, Constant):
            raise TypeError(f"{who}: the axis must be a constant, got {axis}")
        axis = axis.data
    if axis is None:
        return None
    if np.ndim(axis) == 0:
        axis = [axis]
    return tuple(sorted({_norm_axis(int(a), ndim, who)[0] for a in np.asarray(axis).ravel()}))


def max_and_argmax(a, axis=None, keepdims=False):
    """The maximum of ``a`` over ``axis`` and where it is (Theano's ``max_and_argmax``):
    the two outputs of one ``MaxAndArgmax`` node.

    ``axis`` is None (everything), an int or a list of ints; with several axes the index
    is into those axes flattened (in order), as in Theano.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> m = tt.dmatrix("m")
    >>> mx, i = max_and_argmax(m, axis=1)
    >>> mx.owner.op
    MaxAndArgmax{axis=(1,)}
    >>> [v.tolist() for v in (mx.eval({m: np.eye(2)}), i.eval({m: np.eye(2)}))]
    [[1.0, 1.0], [0, 1]]
    """
    a = as_tensor_variable(a)
    axes = _constant_axes(axis, a.ndim, "max_and_argmax")
    if axes is not None and len(axes) == a.ndim:
        axes = None
    mx, idx = MaxAndArgmax(axes)(a)
    if keepdims:
        reduced = range(a.ndim) if axes is None else axes
        order, k = [], 0
        for d in range(a.ndim):
            order.append("x" if d in reduced else k)
            k += d not in reduced
        mx, idx = mx.dimshuffle(*order), idx.dimshuffle(*order)
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


# -- Theano's extra_ops: contiguity, search, counting, differences, diagonals ------------


class CpuContiguous(Op):
    """``x`` as a C-contiguous array: itself when it is one, else a contiguous copy.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> cpu_contiguous(x.T).eval({x: np.ones((2, 3))}).flags["C_CONTIGUOUS"]
    True
    """

    __props__ = ()
    view_map = {0: [0]}

    def make_node(self, x):
        x = as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.ascontiguousarray(inputs[0])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def L_op(self, inputs, outputs, output_grads):
        return [output_grads[0]]


cpu_contiguous = CpuContiguous()


class SearchsortedOp(Op):
    """``numpy.searchsorted(x, v, side, sorter)``: where the values ``v`` go into the
    1-d ``x`` (sorted, or sorted by the int vector ``sorter``); int64 of ``v``'s shape.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, v = tt.dvector("x"), tt.dvector("v")
    >>> searchsorted(x, v, side="right").eval({x: [1.0, 2.0, 3.0], v: [2.0, 0.5]})
    array([2, 0])
    """

    __props__ = ("side",)

    def __init__(self, side="left"):
        if side not in ("left", "right"):
            raise ValueError(f"SearchsortedOp: side must be 'left' or 'right', got {side!r}")
        self.side = side

    def make_node(self, x, v, sorter=None):
        x, v = as_tensor_variable(x), as_tensor_variable(v)
        if x.ndim != 1:
            raise ValueError(f"searchsorted: x must be 1-d, got {x.type}")
        inputs = [x, v]
        if sorter is not None:
            sorter = as_tensor_variable(sorter)
            if sorter.ndim != 1:
                raise ValueError(f"searchsorted: sorter must be 1-d, got {sorter.type}")
            if sorter.dtype not in discrete_dtypes:
                raise TypeError(f"searchsorted: sorter must be integers, got {sorter.dtype}")
            inputs.append(sorter)
        out = TensorType("int64", shape=v.type.shape)()
        return Apply(self, inputs, [out])

    def perform(self, node, inputs, output_storage, params=None):
        x, v, *sorter = inputs
        out = np.searchsorted(x, v, side=self.side, sorter=sorter[0] if sorter else None)
        output_storage[0][0] = np.asarray(out, dtype="int64")

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[1]]

    def L_op(self, inputs, outputs, output_grads):
        # An index moves by whole steps: zero almost everywhere, as Theano gives.
        grads = [_float_zeros(inputs[0]), _float_zeros(inputs[1])]
        return grads + [_disconnected() for _ in inputs[2:]]


def searchsorted(x, v, side="left", sorter=None):
    """``numpy.searchsorted``: see ``SearchsortedOp``."""
    return SearchsortedOp(side=side)(x, v, sorter)


def bincount(x, weights=None, minlength=None, assert_nonneg=False):
    """``numpy.bincount`` of the int vector ``x`` (each count the sum of ``weights``
    where given), at least ``minlength`` long; an index_add of ones (or weights) into
    zeros, so it differentiates in ``weights``. ``assert_nonneg`` checks ``x >= 0`` at
    run time (AssertionError).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.ivector("x")
    >>> bincount(x, minlength=4).eval({x: np.array([0, 2, 2], dtype="int32")})
    array([1, 0, 2, 0], dtype=int32)
    """
    x = as_tensor_variable(x)
    if x.dtype not in discrete_dtypes:
        raise TypeError(f"bincount: x must be integers, got {x.dtype}")
    if x.ndim != 1:
        raise TypeError(f"bincount: x must be a vector, got {x.type}")
    if assert_nonneg:
        x = Assert("bincount: x must be non-negative")(x, tm.all(x >= 0))
    # numpy's length for no x is 0 (minlength aside); max of nothing has no value: the
    # max of x and a 0, then 0 where x is empty.
    top = tm.max(tb.concatenate([x, tb.zeros((1,), dtype=x.dtype)])).astype("int64")
    length = tm.switch(tm.eq(x.shape[0], 0), 0, top + 1)
    if minlength is not None:
        length = tm.maximum(length, minlength)
    if weights is None:
        out = tb.zeros([length], dtype=x.dtype)
        return advanced_inc_subtensor1(out, tb.ones_like(x), x)
    weights = as_tensor_variable(weights)
    out = tb.zeros([length], dtype=weights.dtype)
    return advanced_inc_subtensor1(out, weights, x)


class DiffOp(Op):
    """``numpy.diff(x, n, axis)``: the ``n``-th differences along ``axis``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dvector("x")
    >>> diff(x, n=2).eval({x: np.array([1.0, 4.0, 9.0, 16.0])})
    array([2., 2.])
    """

    __props__ = ("n", "axis")

    def __init__(self, n=1, axis=-1):
        self.n = int(n)
        self.axis = int(axis)
        if self.n < 0:
            raise ValueError(f"DiffOp: the order n must be >= 0, got {n}")

    def make_node(self, x):
        x = as_tensor_variable(x)
        _check_axis("DiffOp", self.axis, x.ndim, allow_none=False)
        shape = list(x.type.shape)
        ax = self.axis % x.ndim
        if shape[ax] is not None:
            shape[ax] = max(shape[ax] - self.n, 0)
        return Apply(self, [x], [TensorType(x.dtype, shape=tuple(shape))()])

    def perform(self, node, inputs, output_storage, params=None):
        # np.diff of order 0 returns its input itself: a new array, as the op declares
        # no view of its input
        out = np.diff(inputs[0], n=self.n, axis=self.axis)
        output_storage[0][0] = out.copy() if self.n == 0 else out

    def infer_shape(self, fgraph, node, input_shapes):
        shp = list(input_shapes[0])
        ax = self.axis % len(shp)
        shp[ax] = tm.maximum(shp[ax] - self.n, 0)
        return [tuple(shp)]

    def L_op(self, inputs, outputs, output_grads):
        x = inputs[0]
        ax = self.axis % x.ndim
        z = output_grads[0]
        # d(x[i+1] - x[i]): the adjoint of one difference pads and subtracts.
        pad_shape = [shape_i(z, d) if d != ax else 1 for d in range(x.ndim)]
        for _ in range(self.n):
            pad = tb.zeros(pad_shape, dtype=z.dtype)
            z = tb.concatenate([pad, z], axis=ax) - tb.concatenate([z, pad], axis=ax)
        if x.type.shape[ax] is not None and x.type.shape[ax] >= self.n:
            return [z]
        # Shorter than n along the axis, x has no difference: its gradient is zeros of its
        # length, the first of the n the padding made (zeros, as z was empty).
        z = z[(slice(None),) * ax + (slice(0, shape_i(x, ax)),)]
        return [patternbroadcast(z, x.broadcastable)]


def diff(x, n=1, axis=-1):
    """``numpy.diff``: see ``DiffOp``."""
    return DiffOp(n=n, axis=axis)(x)


def compress(condition, x, axis=None):
    """``numpy.compress``: the slices of ``x`` along ``axis`` (of the flattened ``x``
    when None) where ``condition`` is true.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> c, x = tt.ivector("c"), tt.dmatrix("x")
    >>> compress(c, x, axis=0).eval({c: np.array([0, 1], dtype="int32"), x: np.eye(2)})
    array([[0., 1.]])
    """
    indices = flatnonzero(condition)
    return take(x, indices, axis=axis)


RepeatOp = tb.Repeat  # Theano's name for numpy.repeat's op


class Bartlett(Op):
    """``numpy.bartlett(M)``: the triangular window of ``M`` points (float64).

    >>> bartlett(5).eval()
    array([0. , 0.5, 1. , 0.5, 0. ])
    """

    __props__ = ()

    def make_node(self, M):
        M = as_tensor_variable(M)
        if M.ndim != 0 or M.dtype not in discrete_dtypes:
            raise TypeError(f"bartlett: M must be an integer scalar, got {M.type}")
        return Apply(self, [M], [TensorType("float64", shape=(None,))()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.bartlett(int(inputs[0]))

    def infer_shape(self, fgraph, node, input_shapes):
        return [(tm.maximum(node.inputs[0], 0),)]

    def L_op(self, inputs, outputs, output_grads):
        return [_disconnected()]

    def connection_pattern(self, node):
        return [[False]]


bartlett = Bartlett()


class FillDiagonal(Op):
    """``numpy.fill_diagonal`` without the overwrite: a copy of ``a`` (a matrix, or a
    cube whose dimensions are equal) with its main diagonal set to the scalar ``val``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> a = tt.dmatrix("a")
    >>> fill_diagonal(a, 5.0).eval({a: np.zeros((2, 3))})
    array([[5., 0., 0.],
           [0., 5., 0.]])
    """

    __props__ = ()

    def make_node(self, a, val):
        a, val = as_tensor_variable(a), as_tensor_variable(val)
        if a.ndim < 2:
            raise TypeError(f"fill_diagonal: a must have at least 2 dimensions, got {a.type}")
        if val.ndim != 0:
            raise TypeError(f"fill_diagonal: val must be a scalar, got {val.type}")
        val = tb.cast(val, a.dtype)
        return Apply(self, [a, val], [a.type()])

    def perform(self, node, inputs, output_storage, params=None):
        a = inputs[0].copy()
        np.fill_diagonal(a, inputs[1])
        output_storage[0][0] = a

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def L_op(self, inputs, outputs, output_grads):
        a = inputs[0]
        gz = output_grads[0]
        if a.ndim != 2:
            raise NotImplementedError("fill_diagonal: the gradient is for matrices only")
        return [fill_diagonal(gz, 0), diagonal(gz).sum()]


fill_diagonal_ = FillDiagonal()


def fill_diagonal(a, val):
    """``numpy.fill_diagonal``, returning the filled copy: see ``FillDiagonal``."""
    return fill_diagonal_(a, val)


def _offset_diagonal(shape, offset):
    """The flat positions of the ``offset`` diagonal of a matrix of ``shape``."""
    h, w = shape
    if offset >= 0:
        n = max(min(h, w - offset), 0)
        start = offset
    else:
        n = max(min(h + offset, w), 0)
        start = -offset * w
    return start + np.arange(n) * (w + 1)


class FillDiagonalOffset(Op):
    """A copy of the matrix ``a`` with its ``offset`` diagonal (above the main one when
    positive, below when negative) set to ``val``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> a, k = tt.dmatrix("a"), tt.iscalar("k")
    >>> fill_diagonal_offset(a, 1.0, k).eval({a: np.zeros((2, 3)), k: 1})
    array([[0., 1., 0.],
           [0., 0., 1.]])
    """

    __props__ = ()

    def make_node(self, a, val, offset):
        a, val, offset = (as_tensor_variable(v) for v in (a, val, offset))
        if a.ndim != 2:
            raise TypeError(f"fill_diagonal_offset: a must be a matrix, got {a.type}")
        if val.ndim != 0:
            raise TypeError(f"fill_diagonal_offset: val must be a scalar, got {val.type}")
        if offset.ndim != 0 or offset.dtype not in discrete_dtypes:
            raise TypeError(
                f"fill_diagonal_offset: offset must be an int scalar, got {offset.type}"
            )
        return Apply(self, [a, tb.cast(val, a.dtype), offset], [a.type()])

    def perform(self, node, inputs, output_storage, params=None):
        a, val, offset = inputs
        a = a.copy()
        a.flat[_offset_diagonal(a.shape, int(offset))] = val
        output_storage[0][0] = a

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def connection_pattern(self, node):
        return [[True], [True], [False]]

    def L_op(self, inputs, outputs, output_grads):
        a, val, offset = inputs
        gz = output_grads[0]
        ga = fill_diagonal_offset(gz, 0, offset)
        gval = (gz - ga).sum()  # the entries the fill overwrote
        return [ga, gval, _disconnected()]


fill_diagonal_offset_ = FillDiagonalOffset()


def fill_diagonal_offset(a, val, offset):
    """See ``FillDiagonalOffset``."""
    return fill_diagonal_offset_(a, val, offset)


# Whether numpy's unique keeps the input's shape for the inverse when axis is None
# (numpy 2 does; numpy 1 flattens it): the op follows the numpy it runs with.
_INVERSE_KEEPS_SHAPE = np.unique(np.zeros((1, 1)), return_inverse=True)[1].ndim == 2


class Unique(Op):
    """``numpy.unique(x, return_index, return_inverse, return_counts, axis)``: the sorted
    unique values (of the flattened ``x`` when ``axis`` is None), then the requested
    int64 arrays, in numpy's order.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dvector("x")
    >>> values, counts = Unique(return_counts=True)(x)
    >>> counts.eval({x: np.array([2.0, 1.0, 2.0])})
    array([1, 2])
    """

    __props__ = ("return_index", "return_inverse", "return_counts", "axis")

    def __init__(self, return_index=False, return_inverse=False, return_counts=False, axis=None):
        self.return_index = bool(return_index)
        self.return_inverse = bool(return_inverse)
        self.return_counts = bool(return_counts)
        self.axis = axis

    def make_node(self, x):
        x = as_tensor_variable(x)
        if self.axis is None:
            values = TensorType(x.dtype, shape=(None,))()
        else:
            ax = _check_axis("Unique", self.axis, x.ndim, allow_none=False)
            shape = list(x.type.shape)
            shape[ax] = None
            values = TensorType(x.dtype, shape=tuple(shape))()
        outs = [values]
        if self.return_index:
            outs.append(TensorType("int64", shape=(None,))())
        if self.return_inverse:
            keeps = self.axis is None and _INVERSE_KEEPS_SHAPE
            shape = x.type.shape if keeps else (None,)
            outs.append(TensorType("int64", shape=shape)())
        if self.return_counts:
            outs.append(TensorType("int64", shape=(None,))())
        return Apply(self, [x], outs)

    def perform(self, node, inputs, output_storage, params=None):
        outs = np.unique(
            inputs[0],
            return_index=self.return_index,
            return_inverse=self.return_inverse,
            return_counts=self.return_counts,
            axis=self.axis,
        )
        if not isinstance(outs, tuple):
            outs = (outs,)
        for k, (storage, value) in enumerate(zip(output_storage, outs)):
            storage[0] = value if k == 0 else np.asarray(value, dtype="int64")

    def infer_shape(self, fgraph, node, input_shapes):
        (shp,) = input_shapes
        x = node.inputs[0]
        shapes = [None] * len(node.outputs)  # the unique count is known at run time only
        if self.return_inverse:
            k = 1 + self.return_index
            if self.axis is None:
                if _INVERSE_KEEPS_SHAPE:
                    shapes[k] = tuple(shp)
                else:
                    n = 1
                    for s in shp:
                        n = n * s
                    shapes[k] = (n,)
            else:
                shapes[k] = (shp[self.axis % x.ndim],)
        return shapes


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None):
    """``numpy.unique``: see ``Unique``."""
    return Unique(return_index, return_inverse, return_counts, axis)(ar)


def _int_vector(who, v, what):
    v = as_tensor_variable(v)
    if v.dtype not in discrete_dtypes:
        raise TypeError(f"{who}: {what} must be integers, got {v.dtype}")
    return v


class RavelMultiIndex(Op):
    """``numpy.ravel_multi_index(multi_index, dims, mode, order)``: the flat index of
    each tuple of indices; inputs ``*multi_index, dims``.

    >>> ravel_multi_index(([1, 2], [0, 3]), (3, 4)).eval()
    array([ 4, 11])
    """

    __props__ = ("mode", "order")

    def __init__(self, mode="raise", order="C"):
        if mode not in ("raise", "wrap", "clip"):
            raise ValueError(f"RavelMultiIndex: mode {mode!r} is not raise, wrap or clip")
        if order not in ("C", "F"):
            raise ValueError(f"RavelMultiIndex: order {order!r} is not 'C' or 'F'")
        self.mode, self.order = mode, order

    def make_node(self, *inputs):
        *multi_index, dims = inputs
        multi_index = [_int_vector("ravel_multi_index", i, "the indices") for i in multi_index]
        dims = _int_vector("ravel_multi_index", dims, "dims")
        if dims.ndim != 1:
            raise TypeError(f"ravel_multi_index: dims must be a 1-d sequence, got {dims.type}")
        # numpy broadcasts the index arrays together (a length 1 spreads)
        nd = max(i.ndim for i in multi_index)
        static = []
        for k in range(nd):
            lengths = {i.type.shape[k - nd + i.ndim] for i in multi_index if k - nd + i.ndim >= 0}
            others = lengths - {1}
            static.append(1 if not others else others.pop() if len(others) == 1 else None)
        out = TensorType("int64", shape=tuple(static))()
        return Apply(self, [*multi_index, dims], [out])

    def perform(self, node, inputs, output_storage, params=None):
        *multi_index, dims = inputs
        out = np.ravel_multi_index(tuple(multi_index), tuple(dims), self.mode, self.order)
        output_storage[0][0] = np.asarray(out, dtype="int64")

    def infer_shape(self, fgraph, node, input_shapes):
        # The index arrays broadcast together, one for each length of dims, as numpy
        # refuses others (broadcast_shapes: a length 1 spreads).
        *index_shapes, dims_shape = input_shapes
        count = len(index_shapes)
        names = [f"index array {k}" for k in range(count)]
        out = broadcast_shapes(index_shapes, f"{self}: the index arrays", names)
        counted = ("the index arrays", "the lengths of dims")
        return [checked_shape(tuple(out), [count, dims_shape[0]], str(self), counted)]

    def L_op(self, inputs, outputs, output_grads):
        return [_disconnected() for _ in inputs]

    def connection_pattern(self, node):
        return [[False] for _ in node.inputs]


def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    """``numpy.ravel_multi_index``: see ``RavelMultiIndex``."""
    if not isinstance(multi_index, (tuple, list)):
        raise TypeError("ravel_multi_index: multi_index must be a tuple or a list")
    return RavelMultiIndex(mode=mode, order=order)(*multi_index, dims)


class UnravelIndex(Op):
    """``numpy.unravel_index(indices, dims, order)``: one int64 output per dimension of
    ``dims`` (a vector of known length), each of ``indices``' shape.

    >>> [v.eval() for v in unravel_index([4, 11], (3, 4))]
    [array([1, 2]), array([0, 3])]
    """

    __props__ = ("order",)

    def __init__(self, order="C"):
        if order not in ("C", "F"):
            raise ValueError(f"UnravelIndex: order {order!r} is not 'C' or 'F'")
        self.order = order

    def make_node(self, indices, dims):
        indices = _int_vector("unravel_index", indices, "indices")
        dims = _int_vector("unravel_index", dims, "dims")
        if dims.ndim != 1:
            raise TypeError(f"unravel_index: dims must be a vector, got {dims.type}")
        try:
            if isinstance(dims, SharedVariable):
                # Theano's rule for this op: as many outputs as the shared value has
                # entries now; perform refuses a value of another length later.
                n = len(dims.get_value(borrow=True))
            else:
                n = tb.get_vector_length(dims)
        except ValueError:
            # Theano's error: the number of outputs is the length of dims.
            raise ValueError(
                f"unravel_index: dims must be a vector of known length, got {dims.type}"
            ) from None
        outs = [TensorType("int64", shape=indices.type.shape)() for _ in range(n)]
        return Apply(self, [indices, dims], outs)

    def perform(self, node, inputs, output_storage, params=None):
        indices, dims = inputs
        if len(dims) != len(output_storage):
            # (A shared dims whose value changed length since the graph was built: zip
            # below would drop or leave outputs silently.)
            raise ValueError(
                f"unravel_index: dims has {len(dims)} entries, but the graph was built for "
                f"{len(output_storage)} (one output per entry)"
            )
        res = np.unravel_index(indices, tuple(dims), order=self.order)
        for storage, value in zip(output_storage, res):
            storage[0] = np.asarray(value, dtype="int64")

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]] * len(node.outputs)

    def L_op(self, inputs, outputs, output_grads):
        return [_disconnected() for _ in inputs]

    def connection_pattern(self, node):
        return [[False] * len(node.outputs) for _ in node.inputs]


def unravel_index(indices, dims, order="C"):
    """``numpy.unravel_index``: a tuple of variables, see ``UnravelIndex``."""
    res = UnravelIndex(order=order)(indices, dims)
    return tuple(res) if isinstance(res, (list, tuple)) else (res,)


class BroadcastTo(Op):
    """``numpy.broadcast_to(x, shape)``: a read-only broadcast view of ``x``; inputs
    ``x, *shape``. Its gradient sums over the dimensions it spread ``x`` along.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dvector("x")
    >>> broadcast_to(x, (2, 3)).eval({x: np.arange(3.0)})
    array([[0., 1., 2.],
           [0., 1., 2.]])
    """

    __props__ = ()
    view_map = {0: [0]}

    def make_node(self, a, *shape):
        a = as_tensor_variable(a)
        shape = [_int_vector("broadcast_to", s, "the shape") for s in shape]
        if len(shape) < a.ndim:
            raise ValueError(f"broadcast_to: a {len(shape)}-d shape for a {a.ndim}-d input")
        static = []
        for s in shape:
            v = s.data if hasattr(s, "data") else None
            static.append(int(v) if v is not None else None)
        return Apply(self, [a, *shape], [TensorType(a.dtype, shape=tuple(static))()])

    def perform(self, node, inputs, output_storage, params=None):
        a, *shape = inputs
        output_storage[0][0] = np.broadcast_to(a, tuple(int(s) for s in shape))

    def infer_shape(self, fgraph, node, input_shapes):
        # Each length asked, checked against the input's there unless that is 1 (numpy
        # spreads a length 1 and refuses any other that differs), as Alloc's.
        a, dims = node.inputs[0], node.inputs[1:]
        out = []
        for d, n in enumerate(dims):
            k = d - (len(dims) - a.ndim)
            if k >= 0 and not a.type.broadcastable[k]:
                n = spread_length(n, input_shapes[0][k], f"{self} along dimension {d}")
            out.append(n)
        return [tuple(out)]

    def connection_pattern(self, node):
        return [[True]] + [[False]] * (len(node.inputs) - 1)

    def L_op(self, inputs, outputs, output_grads):
        a, *shape = inputs
        gz = output_grads[0]
        lead = len(shape) - a.ndim
        g = gz.sum(axis=list(range(lead))) if lead else gz
        # Summed over the dimensions where ``a`` has length 1 and the result may not.
        return [reduce_spread_grad_to(g, a)] + [_disconnected() for _ in shape]


broadcast_to_ = BroadcastTo()


def broadcast_to(x, shape):
    """``numpy.broadcast_to``: see ``BroadcastTo``."""
    x = as_tensor_variable(x)
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        shape = [shape[i] for i in range(tb.get_vector_length(shape))]
    return broadcast_to_(x, *shape)


def broadcast_shape(*arrays, arrays_are_shapes=False):
    """The shape the arrays broadcast to, one int64 scalar variable per dimension (a length
    known when the graph is built is a constant); ``arrays_are_shapes``: the arguments are
    shapes, tuples of ints or scalars, and shapes of ints alone give a tuple of ints.

    >>> broadcast_shape((2, 1), (1, 3), arrays_are_shapes=True)
    (2, 3)
    >>> import numpy as np, theano_dag
    >>> from theano_dag import tensor as tt
    >>> a, b = tt.dmatrix("a"), tt.drow("b")
    >>> f = theano_dag.function([a, b], list(broadcast_shape(a, b)))
    >>> [int(n) for n in f(np.ones((2, 3)), np.ones((1, 3)))]
    [2, 3]
    """
    shapes = []
    for a in arrays:
        if arrays_are_shapes:
            shapes.append(list(a))
        else:
            a = as_tensor_variable(a)
            shapes.append([1 if a.type.shape[d] == 1 else a.shape[d] for d in range(a.ndim)])
    ndim = max((len(s) for s in shapes), default=0)
    padded = [[1] * (ndim - len(s)) + list(s) for s in shapes]
    out = []
    for k, dims in enumerate(zip(*padded)):
        names = [f"array {j}" for j, d in enumerate(dims)]
        names = [
            n for n, d in zip(names, dims) if not (isinstance(d, (int, np.integer)) and d == 1)
        ]
        known = [d for d in dims if not (isinstance(d, (int, np.integer)) and d == 1)]
        ints = {int(d) for d in known if isinstance(d, (int, np.integer))}
        if len(ints) > 1:
            raise ValueError(
                f"broadcast_shape: lengths {sorted(ints)} of dimension {k} cannot broadcast"
            )
        if not known:
            out.append(1)
        elif len(known) == 1:
            out.append(known[0])
        elif all(isinstance(d, (int, np.integer)) for d in known):
            out.append(known[0])  # the same int everywhere
        else:
            # Lengths known only when run: a 1 spreads, the others must be equal, checked
            # (not the largest: a 0 with a 1 is 0)
            what = f"broadcast_shape: dimension {k} cannot broadcast"
            out.append(broadcast_length(known, what, names))
    if not arrays_are_shapes or any(isinstance(d, Variable) for s in shapes for d in s):
        # Lengths of arrays, or shapes given as variables: every length is a variable, as
        # in Theano (a known one an int64 constant), so each can be evaluated or stacked.
        out = [
            tb.constant(int(d), dtype="int64") if not isinstance(d, Variable) else d for d in out
        ]
    return tuple(out)
