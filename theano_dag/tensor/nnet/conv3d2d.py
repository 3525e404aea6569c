"""``theano.tensor.nnet.conv3d2d``: Theano's 3-D convolution of ``(batch, time,
channels, rows, cols)`` signals, and the diagonal views its implementation reads.

Theano computed ``conv3d`` as 2-D convolutions summed along diagonals
(``DiagonalSubtensor``); here it is the 3-D abstract convolution with the axes
reordered (same values and gradients). The diagonal view helpers and ops are provided
under Theano's names.

>>> import numpy as np
>>> from theano_dag import tensor as tt
>>> s, f = tt.dtensor5("s"), tt.dtensor5("f")
>>> conv3d(s, f).eval({s: np.ones((1, 3, 1, 2, 2)), f: np.ones((1, 2, 1, 2, 2))})[0, :, 0]
array([[[8.]],
<BLANKLINE>
       [[8.]]])
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from theano_dag.graph.basic import Apply
from theano_dag.graph.null_type import disconnected_type
from theano_dag.graph.op import Op
from theano_dag.tensor import basic as tb
from theano_dag.tensor.nnet import abstract_conv
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["DiagonalSubtensor", "IncDiagonalSubtensor", "conv3d", "get_diagonal_subtensor_view"]


def get_diagonal_subtensor_view(x, i0, i1):
    """A view of ``x`` whose entry ``[.., r, .., c, ..]`` (``r`` on axis ``i0``, ``c`` on
    axis ``i1``) is ``x[.., r + n1 - 1 - c, .., c, ..]``, ``n1 = x.shape[i1]``: the
    anti-diagonals of the ``(i0, i1)`` planes; axis ``i0`` keeps ``x.shape[i0] - n1 + 1``
    entries. Writing into it writes into ``x``.

    >>> get_diagonal_subtensor_view(np.arange(6).reshape(3, 2), 0, 1)
    array([[2, 1],
           [4, 3]])
    """
    x = np.asarray(x)
    n0, n1 = x.shape[i0], x.shape[i1]
    if n0 < n1:
        raise NotImplementedError(
            f"get_diagonal_subtensor_view: axis {i0} ({n0}) is shorter than axis {i1} ({n1})"
        )
    start = [slice(None)] * x.ndim
    start[i0] = slice(n1 - 1, None)
    base = x[tuple(start)]
    shape = list(base.shape)
    shape[i0] = n0 - n1 + 1
    strides = list(base.strides)
    strides[i1] = base.strides[i1] - base.strides[i0]  # one column right, one row up
    return as_strided(base, shape=shape, strides=strides)


def _axes(i0, i1):
    return [tb.constant(np.int64(i)) if isinstance(i, (int, np.integer)) else i for i in (i0, i1)]


class DiagonalSubtensor(Op):
    """``get_diagonal_subtensor_view(x, i0, i1)`` as an Op (a view of ``x``).

    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> DiagonalSubtensor()(x, 0, 1).eval({x: np.arange(6.0).reshape(3, 2)})
    array([[2., 1.],
           [4., 3.]])
    """

    __props__ = ("inplace",)

    def __init__(self, inplace=False):
        self.inplace = bool(inplace)
        self.view_map = {0: [0]}

    def make_node(self, x, i0, i1):
        x = as_tensor_variable(x)
        i0, i1 = (as_tensor_variable(i) for i in _axes(i0, i1))
        return Apply(self, [x, i0, i1], [x.type.clone(shape=(None,) * x.ndim)()])

    def perform(self, node, inputs, output_storage, params=None):
        x, i0, i1 = inputs
        output_storage[0][0] = get_diagonal_subtensor_view(x, int(i0), int(i1))

    def infer_shape(self, fgraph, node, input_shapes):
        i0, i1 = (int(tb.get_scalar_constant_value(i)) for i in node.inputs[1:])
        shape = list(input_shapes[0])
        shape[i0] = shape[i0] - shape[i1] + 1
        return [tuple(shape)]

    def L_op(self, inputs, outputs, output_grads):
        x, i0, i1 = inputs
        inc = IncDiagonalSubtensor()(tb.zeros_like(x), i0, i1, output_grads[0])
        return [inc, disconnected_type(), disconnected_type()]

    def connection_pattern(self, node):
        return [[True], [False], [False]]


class IncDiagonalSubtensor(Op):
    """``x`` with ``amt`` added to its diagonal view ``(i0, i1)`` (a copy of ``x``).

    >>> from theano_dag import tensor as tt
    >>> x, a = tt.dmatrix("x"), tt.dmatrix("a")
    >>> IncDiagonalSubtensor()(x, 0, 1, a).eval({x: np.zeros((2, 2)), a: np.ones((1, 2))})
    array([[0., 1.],
           [1., 0.]])
    """

    __props__ = ("inplace",)

    def __init__(self, inplace=False):
        self.inplace = bool(inplace)
        if self.inplace:
            self.destroy_map = {0: [0]}

    def make_node(self, x, i0, i1, amt):
        x = as_tensor_variable(x)
        i0, i1 = (as_tensor_variable(i) for i in _axes(i0, i1))
        return Apply(self, [x, i0, i1, as_tensor_variable(amt)], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        x, i0, i1, amt = inputs
        out = x if self.inplace else x.copy()
        get_diagonal_subtensor_view(out, int(i0), int(i1))[...] += amt
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def L_op(self, inputs, outputs, output_grads):
        x, i0, i1, amt = inputs
        (g,) = output_grads
        return [g, disconnected_type(), disconnected_type(), DiagonalSubtensor()(g, i0, i1)]

    def connection_pattern(self, node):
        return [[True], [False], [False], [True]]


def conv3d(signals, filters, signals_shape=None, filters_shape=None, border_mode="valid"):
    """3-D convolution (filters flipped) of ``(batch, time, channels, rows, cols)``
    signals with ``(n_filters, time, channels, rows, cols)`` filters; the result is
    ``(batch, time', n_filters, rows', cols')``. ``border_mode``: ``'valid'``,
    ``'full'``, ``'half'`` or a tuple of 3 for (time, rows, cols); the shapes are
    optional hints in the same layouts.

    >>> from theano_dag import tensor as tt
    >>> conv3d(tt.dtensor5(), tt.dtensor5(), border_mode="half").ndim
    5
    """
    order = (0, 2, 1, 3, 4)  # (batch, time, channels, ...) <-> (batch, channels, time, ...)
    hint = None if signals_shape is None else tuple(signals_shape[i] for i in order)
    fhint = None if filters_shape is None else tuple(filters_shape[i] for i in order)
    out = abstract_conv.conv3d(
        as_tensor_variable(signals).dimshuffle(*order),
        as_tensor_variable(filters).dimshuffle(*order),
        input_shape=hint,
        filter_shape=fhint,
        border_mode=border_mode,
    )
    return out.dimshuffle(*order)
