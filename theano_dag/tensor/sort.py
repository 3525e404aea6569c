"""Sorting: ``sort`` and ``argsort`` (``theano.tensor.sort``).

The axis is a parameter of the op (an int, or None for the flattened input), not a
symbolic input as in Theano: the output's number of dimensions depends on it. An axis
only known when the function runs (a symbolic scalar, as Theano's tests give) is an input
of :class:`SortAlongOp` instead; the output has the input's dimensions then.
"""

from __future__ import annotations

import numpy as np

from theano_dag.config import config
from theano_dag.graph.basic import Apply, Variable
from theano_dag.graph.null_type import grad_not_implemented, grad_undefined, is_disconnected
from theano_dag.graph.op import Op
from theano_dag.tensor import basic as tb
from theano_dag.tensor import math as tm
from theano_dag.tensor.shape import flatten, shape_i
from theano_dag.tensor.subtensor import set_subtensor
from theano_dag.tensor.type import TensorType, discrete_dtypes, int_dtypes, uint_dtypes
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "SortOp",
    "ArgSortOp",
    "SortAlongOp",
    "TopKOp",
    "sort",
    "argsort",
    "topk",
    "argtopk",
    "topk_and_argtopk",
]

KINDS = ("quicksort", "mergesort", "heapsort", "stable")


class SortOp(Op):
    """``numpy.sort(x, axis, kind)``.

    >>> from theano_dag import tensor as tt
    >>> SortOp(axis=None)(tt.dmatrix("m")).type
    TensorType(float64, vector)
    """

    __props__ = ("kind", "axis")
    _out_dtype = None  # the input's

    def __init__(self, kind="quicksort", axis=-1):
        if kind not in KINDS:
            raise ValueError(f"{type(self).__name__}: kind must be one of {KINDS}, got {kind!r}")
        if isinstance(axis, (list, tuple)):
            # Theano's SortOp(kind, order): the fields of a structured dtype to sort by,
            # which tensors do not have; an empty order is no order (the last axis).
            if axis:
                raise ValueError(
                    f"{type(self).__name__}: order={axis!r} applies to structured arrays, "
                    "which are not tensors"
                )
            axis = -1
        if axis is not None and (not isinstance(axis, (int, np.integer)) or isinstance(axis, bool)):
            raise TypeError(
                f"{type(self).__name__}: axis must be an int or None (not a symbolic "
                f"variable), got {axis!r}"
            )
        self.kind = kind
        self.axis = None if axis is None else int(axis)

    def __str__(self):
        return f"{type(self).__name__}{{{self.kind}, axis={self.axis}}}"

    __repr__ = __str__

    def _norm_axis(self, x):
        if self.axis is None:
            return None
        if not -x.ndim <= self.axis < max(x.ndim, 1) or x.ndim == 0:
            raise ValueError(f"{self}: axis {self.axis} is out of range for the {x.ndim}-d {x}")
        return self.axis % x.ndim

    def make_node(self, x):
        x = as_tensor_variable(x)
        if x.dtype.startswith("complex"):
            raise TypeError(f"{self}: complex inputs are not supported, got {x.type}")
        dtype = self._out_dtype or x.dtype
        if self._norm_axis(x) is None:
            n = None if None in x.type.shape else int(np.prod(x.type.shape, dtype=np.int64))
            shape = (n,)
        else:
            shape = x.type.shape
        return Apply(self, [x], [TensorType(dtype, shape=shape)()])

    def _compute(self, x):
        return np.sort(x, axis=self.axis, kind=self.kind)

    def perform(self, node, inputs, output_storage, params=None):
        out = self._compute(inputs[0])
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
            return [tb.zeros_like(x, dtype=config.floatX)]
        axis = self._norm_axis(x)
        if axis is None:
            flat = tb.flatten(x)
            rank = argsort(argsort(flat, axis=0, kind="stable"), axis=0, kind="stable")
            return [tb.reshape(gz[rank], tb.shape(x), ndim=x.ndim)]
        # Input element i went to position rank[i] = inverse permutation of argsort; its
        # gradient is the output gradient found there.
        order = argsort(x, axis=axis, kind="stable")
        rank = argsort(order, axis=axis, kind="stable")
        return [_take_along_axis(gz, rank, axis)]


class ArgSortOp(SortOp):
    """``numpy.argsort(x, axis, kind)`` (int64). Its gradient is zero (it is piecewise
    constant in ``x``).

    >>> from theano_dag import tensor as tt
    >>> ArgSortOp()(tt.dmatrix("m")).type
    TensorType(int64, matrix)
    """

    _out_dtype = "int64"

    def _compute(self, x):
        return np.argsort(x, axis=self.axis, kind=self.kind)

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        return [_zero_grad(x)]


def _zero_grad(x):
    """The zero gradient of ``x`` where the result does not move with it (indices, an
    order): of ``x``'s dtype (a float32 ``x``'s stays float32), floatX for an integer."""
    return tb.zeros_like(x, dtype=config.floatX if x.dtype in discrete_dtypes else x.dtype)


def _along_axis_index(x, idx, axis):
    """The advanced index that picks ``idx`` along ``axis`` (aranges on the other dims)."""
    index = []
    for d in range(x.ndim):
        if d == axis:
            index.append(idx)
        else:
            pattern = ["x"] * x.ndim
            pattern[d] = 0
            index.append(tb.arange(shape_i(x, d), dtype="int64").dimshuffle(*pattern))
    return tuple(index)


def _take_along_axis(x, idx, axis):
    """``numpy.take_along_axis`` by advanced indexing (aranges broadcast on other dims)."""
    return x[_along_axis_index(x, idx, axis)]


def _topk_indices(x, k, axis, sorted_):
    """The indices of the ``k`` largest (``k < 0``: ``-k`` smallest) along ``axis``."""
    n = x.shape[axis]
    if k == 0 or abs(k) > n:
        raise ValueError(f"TopKOp: k={k} is out of range for an axis of length {n}")
    if k > 0:
        idx = np.take(np.argpartition(x, n - k, axis=axis), np.arange(n - k, n), axis=axis)
    else:
        idx = np.take(np.argpartition(x, -k - 1, axis=axis), np.arange(-k), axis=axis)
    if sorted_:  # the largest first (the smallest first for k < 0)
        vals = np.take_along_axis(x, idx, axis)
        order = np.argsort(-vals if k > 0 else vals, axis=axis, kind="stable")
        idx = np.take_along_axis(idx, order, axis)
    return idx


class TopKOp(Op):
    """The ``k`` largest elements along ``axis`` (``k < 0``: the ``-k`` smallest) and/or
    their indices: ``[values, indices]`` by default. ``sorted=False`` (Theano's only
    choice) leaves them in partition order; ``sorted=True`` sorts them, largest first.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> v = tt.dvector("v")
    >>> topk(v, 2).eval({v: np.array([1.0, 5.0, 3.0])})
    array([5., 3.])
    """

    __props__ = ("axis", "sorted", "return_values", "return_indices", "idx_dtype")

    def __init__(
        self, axis=-1, sorted=True, idx_dtype="int64", return_values=True, return_indices=True
    ):  # noqa: A002 (Theano's name)
        if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
            raise TypeError(f"TopKOp: axis must be an int, got {axis!r}")
        if idx_dtype not in int_dtypes + uint_dtypes:
            raise TypeError(f"TopKOp: idx_dtype must be an integer dtype, got {idx_dtype!r}")
        if not (return_values or return_indices):
            raise ValueError("TopKOp: return_values or return_indices (or both) must be True")
        self.axis = int(axis)
        self.sorted = bool(sorted)
        self.idx_dtype = idx_dtype
        self.return_values = bool(return_values)
        self.return_indices = bool(return_indices)

    def __str__(self):
        return f"TopKOp{{axis={self.axis}, sorted={self.sorted}}}"

    __repr__ = __str__

    def make_node(self, x, kth):
        x, kth = as_tensor_variable(x), as_tensor_variable(kth)
        if x.ndim == 0:
            raise ValueError("TopKOp: cannot take the top k of a scalar")
        if not -x.ndim <= self.axis < x.ndim:
            raise IndexError(
                f"TopKOp: axis {self.axis} is out of range, expected an integer within "
                f"[{-x.ndim}, {x.ndim - 1}]"
            )
        if kth.ndim != 0 or kth.dtype not in int_dtypes + uint_dtypes:
            raise TypeError(f"TopKOp: k must be an integer scalar, got {kth.type}")
        shape = list(x.type.shape)
        k = (
            tb.get_scalar_constant_value(kth)
            if kth.owner is None and hasattr(kth, "data")
            else None
        )
        shape[self.axis % x.ndim] = None if k is None else abs(int(k))
        outs = []
        if self.return_values:
            outs.append(TensorType(x.dtype, shape=tuple(shape))())
        if self.return_indices:
            outs.append(TensorType(self.idx_dtype, shape=tuple(shape))())
        return Apply(self, [x, kth], outs)

    def perform(self, node, inputs, output_storage, params=None):
        x, k = inputs
        idx = _topk_indices(x, int(k), self.axis % x.ndim, self.sorted)
        outs = []
        if self.return_values:
            outs.append(np.take_along_axis(x, idx, self.axis % x.ndim))
        if self.return_indices:
            outs.append(idx.astype(self.idx_dtype))
        for store, o in zip(output_storage, outs):
            store[0] = np.ascontiguousarray(o)

    def infer_shape(self, fgraph, node, input_shapes):
        shape = list(input_shapes[0])
        shape[self.axis % node.inputs[0].ndim] = tm.abs(node.inputs[1])
        return [tuple(shape)] * len(node.outputs)

    def L_op(self, inputs, outputs, output_grads):
        x, k = inputs
        k_grad = grad_undefined(self, 1, k, "TopKOp: k is not differentiable")
        if not self.return_values or is_disconnected(output_grads[0]):
            # the indices alone: a step of x that keeps the order does not move them
            return [_zero_grad(x), k_grad]
        idx = (
            outputs[1]
            if self.return_indices
            else TopKOp(self.axis, self.sorted, self.idx_dtype, False, True)(x, k)
        )
        gz = output_grads[0]
        axis = self.axis % x.ndim
        gx = set_subtensor(tb.zeros_like(x)[_along_axis_index(x, idx, axis)], gz)
        return [gx, k_grad]


def _topk(x, kth, axis, sorted_, idx_dtype, values, indices):
    if axis is None:
        x, axis = flatten(as_tensor_variable(x)), 0
    return TopKOp(axis, sorted_, idx_dtype, values, indices)(x, kth, return_list=True)


def topk(x, kth, axis=-1, sorted=True, idx_dtype="int64"):  # noqa: A002 (Theano's name)
    """The ``kth`` largest elements of ``x`` along ``axis`` (see :class:`TopKOp`).

    >>> import numpy as np
    >>> topk(np.array([[1.0, 4.0, 2.0]]), -1).eval()
    array([[1.]])
    """
    return _topk(x, kth, axis, sorted, idx_dtype, True, False)[0]


def argtopk(x, kth, axis=-1, sorted=True, idx_dtype="int64"):  # noqa: A002
    """The indices of the ``kth`` largest elements of ``x`` along ``axis``.

    >>> import numpy as np
    >>> argtopk(np.array([1.0, 4.0, 2.0]), 2).eval()
    array([1, 2])
    """
    return _topk(x, kth, axis, sorted, idx_dtype, False, True)[0]


def topk_and_argtopk(x, kth, axis=-1, sorted=True, idx_dtype="int64"):  # noqa: A002
    """``(values, indices)`` of the ``kth`` largest elements of ``x`` along ``axis``.

    >>> import numpy as np
    >>> [o.eval().tolist() for o in topk_and_argtopk(np.array([1.0, 4.0, 2.0]), 1)]
    [[4.0], [1]]
    """
    return tuple(_topk(x, kth, axis, sorted, idx_dtype, True, True))


class SortAlongOp(Op):
    """``numpy.sort`` (``indices=True``: ``numpy.argsort``) of ``x`` along an axis given
    as a symbolic scalar input, known only when the function runs (``sort`` makes it for
    such an axis; a constant one makes a :class:`SortOp`).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> m, ax = tt.dmatrix("m"), tt.lscalar("ax")
    >>> SortAlongOp()(m, ax).eval({m: np.array([[3.0, 1.0], [2.0, 4.0]]), ax: 0})
    array([[2., 1.],
           [3., 4.]])
    """

    __props__ = ("kind", "indices")

    def __init__(self, kind="quicksort", indices=False):
        if kind not in KINDS:
            raise ValueError(f"SortAlongOp: kind must be one of {KINDS}, got {kind!r}")
        self.kind = kind
        self.indices = bool(indices)

    def make_node(self, x, axis):
        x, axis = as_tensor_variable(x), as_tensor_variable(axis)
        if x.ndim == 0 or x.dtype.startswith("complex"):
            raise TypeError(f"{self}: x must be a real array of 1 or more dimensions, got {x.type}")
        if axis.ndim != 0 or axis.dtype.startswith("complex") or axis.dtype == "bool":
            raise TypeError(f"{self}: the axis must be a real scalar, got {axis.type}")
        dtype = "int64" if self.indices else x.dtype
        return Apply(self, [x, axis], [TensorType(dtype, shape=x.type.shape)()])

    def _axis(self, x, axis):
        ax = int(axis)
        if ax != axis or not -x.ndim <= ax < x.ndim:
            raise ValueError(f"{self}: axis {axis} is not an axis of the {x.ndim}-d input")
        return ax

    def perform(self, node, inputs, output_storage, params=None):
        x, axis = inputs
        fn = np.argsort if self.indices else np.sort
        out = fn(x, axis=self._axis(x, axis), kind=self.kind)
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0])]

    def L_op(self, inputs, outputs, output_grads):
        x, axis = inputs
        axis_grad = grad_undefined(self, 1, axis, "the axis is not differentiable")
        if self.indices or x.dtype in discrete_dtypes:
            return [_zero_grad(x), axis_grad]
        return [_SortAlongGrad()(x, axis, output_grads[0]), axis_grad]


class _SortAlongGrad(Op):
    """The gradient of :class:`SortAlongOp`'s values: each element of ``x`` gets the output
    gradient of the position it was sorted to (``gz`` put back along the stable order)."""

    __props__ = ()

    def make_node(self, x, axis, gz):
        x, axis, gz = (as_tensor_variable(v) for v in (x, axis, gz))
        return Apply(self, [x, axis, gz], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        x, axis, gz = inputs
        ax = int(axis)
        order = np.argsort(x, axis=ax, kind="stable")
        gx = np.empty_like(gz, dtype=node.outputs[0].dtype)
        np.put_along_axis(gx, order, gz, axis=ax)
        output_storage[0][0] = gx

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0])]

    def L_op(self, inputs, outputs, output_grads):
        return [grad_not_implemented(self, k, v) for k, v in enumerate(inputs)]


def _symbolic_axis(axis):
    """``axis`` as an int when it is one or a constant, else the symbolic scalar itself."""
    if isinstance(axis, Variable):
        try:
            return int(tb.get_scalar_constant_value(axis))
        except tb.NotScalarConstantError:
            return axis
    return axis


def sort(a, axis=-1, kind="quicksort", order=None):
    """``numpy.sort``: ``a`` sorted along ``axis`` (None: flattened first).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> v = tt.dvector("v")
    >>> sort(v).eval({v: np.array([3.0, 1.0, 2.0])})
    array([1., 2., 3.])
    """
    _check_order(order, "sort")
    axis = _symbolic_axis(axis)
    if isinstance(axis, Variable):
        return SortAlongOp(kind)(a, axis)
    return SortOp(kind, axis)(a)


def argsort(a, axis=-1, kind="quicksort", order=None):
    """``numpy.argsort``: the indices that sort ``a`` along ``axis`` (int64).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> v = tt.dvector("v")
    >>> argsort(v).eval({v: np.array([3.0, 1.0, 2.0])})
    array([1, 2, 0])
    """
    _check_order(order, "argsort")
    axis = _symbolic_axis(axis)
    if isinstance(axis, Variable):
        return SortAlongOp(kind, indices=True)(a, axis)
    return ArgSortOp(kind, axis)(a)


def _check_order(order, who):
    if order is not None:
        raise ValueError(f"{who}: order= applies to structured arrays, which are not tensors")
