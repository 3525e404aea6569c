"""A scalar prepended to each row of a matrix as a new first column (Theano's
``Prepend_scalar_constant_to_each_row`` and ``Prepend_scalar_to_each_row``).

>>> import numpy as np
>>> from theano_dag import tensor as tt
>>> x = tt.dmatrix("x")
>>> Prepend_scalar_constant_to_each_row(4.0)(x).eval({x: np.ones((2, 1))})
array([[4., 1.],
       [4., 1.]])
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Apply
from theano_dag.graph.op import Op
from theano_dag.scalar import upcast
from theano_dag.tensor import basic as tb
from theano_dag.tensor import math as tm
from theano_dag.tensor.type import TensorType
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["Prepend_scalar_constant_to_each_row", "Prepend_scalar_to_each_row"]


def _matrix(op, x):
    x = as_tensor_variable(x)
    if x.ndim != 2:
        raise TypeError(f"{op}: the input must be a matrix, got {x.type}")
    return x


def _out_type(dtype, x):
    rows, cols = x.type.shape
    return TensorType(dtype, shape=(rows, None if cols is None else cols + 1))


def _prepend(value, x, dtype):
    out = np.empty((x.shape[0], x.shape[1] + 1), dtype=dtype)
    out[:, 0] = value
    out[:, 1:] = x
    return out


class Prepend_scalar_constant_to_each_row(Op):  # noqa: N801 (Theano's name)
    """``x`` with a first column of the constant ``val`` (a Python number).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.fmatrix("x")
    >>> y = Prepend_scalar_constant_to_each_row(2)(x)
    >>> y.dtype, y.eval({x: np.zeros((1, 2), dtype="float32")})
    ('float32', array([[2., 0., 0.]], dtype=float32))
    """

    __props__ = ("val",)

    def __init__(self, val=0):
        if isinstance(val, np.ndarray):
            val = val.item()
        self.val = val

    def make_node(self, mat):
        mat = _matrix(self, mat)
        return Apply(self, [mat], [_out_type(mat.dtype, mat)()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = _prepend(self.val, inputs[0], node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        rows, cols = input_shapes[0]
        return [(rows, cols + 1)]

    def L_op(self, inputs, outputs, output_grads):
        return [output_grads[0][:, 1:]]


class Prepend_scalar_to_each_row(Op):  # noqa: N801 (Theano's name)
    """``mat`` with a first column of the symbolic scalar ``val``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> s, x = tt.dscalar("s"), tt.dmatrix("x")
    >>> Prepend_scalar_to_each_row()(s, x).eval({s: 5.0, x: np.ones((1, 2))})
    array([[5., 1., 1.]])
    """

    __props__ = ()

    def make_node(self, val, mat):
        val = as_tensor_variable(val)
        if val.ndim != 0:
            raise TypeError(f"{self}: val must be a scalar, got {val.type}")
        mat = _matrix(self, mat)
        return Apply(self, [val, mat], [_out_type(upcast(val.dtype, mat.dtype), mat)()])

    def perform(self, node, inputs, output_storage, params=None):
        val, mat = inputs
        output_storage[0][0] = _prepend(val, mat, node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        rows, cols = input_shapes[1]
        return [(rows, cols + 1)]

    def L_op(self, inputs, outputs, output_grads):
        val, mat = inputs
        (g,) = output_grads
        return [tb.cast(tm.sum(g[:, 0]), val.dtype), tb.cast(g[:, 1:], mat.dtype)]
