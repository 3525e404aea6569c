"""Sorting: ``sort`` and ``argsort`` (``theano.tensor.sort``).

The axis is a parameter of the op (an int, or None for the flattened input), not a
symbolic input as in Theano: the output's number of dimensions depends on it.
"""

from __future__ import annotations

import numpy as np

from theano_dag.config import config
from theano_dag.graph.basic import Apply
from theano_dag.graph.op import Op
from theano_dag.tensor import basic as tb
from theano_dag.tensor.shape import shape_i
from theano_dag.tensor.type import TensorType, discrete_dtypes
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["SortOp", "ArgSortOp", "sort", "argsort"]

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
        dtype = config.floatX if x.dtype in discrete_dtypes else x.dtype
        return [tb.zeros_like(x, dtype=dtype)]


def _take_along_axis(x, idx, axis):
    """``numpy.take_along_axis`` by advanced indexing (aranges broadcast on other dims)."""
    index = []
    for d in range(x.ndim):
        if d == axis:
            index.append(idx)
        else:
            pattern = ["x"] * x.ndim
            pattern[d] = 0
            index.append(tb.arange(shape_i(x, d), dtype="int64").dimshuffle(*pattern))
    return x[tuple(index)]


def sort(a, axis=-1, kind="quicksort", order=None):
    """``numpy.sort``: ``a`` sorted along ``axis`` (None: flattened first).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> v = tt.dvector("v")
    >>> sort(v).eval({v: np.array([3.0, 1.0, 2.0])})
    array([1., 2., 3.])
    """
    _check_order(order, "sort")
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
    return ArgSortOp(kind, axis)(a)


def _check_order(order, who):
    if order is not None:
        raise ValueError(f"{who}: order= applies to structured arrays, which are not tensors")
