"""Fused ops that the optimizer introduces (Owl's optimiser, figure 6).

- ``Adagrad(eps)``: the Adagrad update ``acc' = acc + g*g``, ``step = g / sqrt(acc' + eps)``
  as one node with two outputs;
- ``FusedReduce(reduce_op, scalar_op)``: a reduction of an elementwise expression, which
  an engine can run as one loop without materialising the elementwise result.

Users do not write these: ``specialize`` and ``fusion`` rewrite the plain graphs into them.
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Apply
from theano_dag.graph.null_type import is_disconnected
from theano_dag.graph.op import Op
from theano_dag.tensor import math as tm
from theano_dag.tensor.elemwise import (
    CAReduce,
    Elemwise,
    broadcast_lengths,
    broadcast_static_shape,
    check_runtime_broadcast,
    reduce_grad_to,
)
from theano_dag.tensor.shape import EqualLengths, checked_shape
from theano_dag.tensor.type import TensorType, float_dtypes
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["Adagrad", "FusedReduce"]


class Adagrad(Op):
    """Fused Adagrad step: outputs ``(acc + g*g, g / sqrt(acc + g*g + eps))``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> acc, g = tt.dvector("acc"), tt.dvector("g")
    >>> new_acc, step = Adagrad(1e-8)(acc, g)
    >>> step.eval({acc: np.array([0.0, 5.0]), g: np.array([2.0, 2.0])})
    array([1.        , 0.66666667])
    """

    __props__ = ("eps",)

    def __init__(self, eps):
        self.eps = float(eps)
        if not self.eps >= 0:
            raise ValueError(f"Adagrad: eps must be a number >= 0, got {eps!r}")

    def __str__(self):
        return f"Adagrad{{eps={self.eps:g}}}"

    __repr__ = __str__

    def make_node(self, acc, g):
        acc, g = as_tensor_variable(acc), as_tensor_variable(g)
        for name, v in (("acc", acc), ("g", g)):
            if v.dtype not in float_dtypes:
                raise TypeError(f"{self}: {name} must be a float tensor, got {v.type}")
        if acc.dtype != g.dtype or acc.ndim != g.ndim:
            raise TypeError(
                f"{self}: acc and g must have the same dtype and number of dimensions, "
                f"got {acc.type} and {g.type}"
            )
        shape = broadcast_static_shape([acc.type.shape, g.type.shape], str(self))
        return Apply(self, [acc, g], [TensorType(acc.dtype, shape=shape)() for _ in range(2)])

    def perform(self, node, inputs, output_storage, params=None):
        acc, g = inputs
        dtype = node.outputs[0].dtype
        check_runtime_broadcast(self, node.inputs, inputs)  # (as the written update's)
        with np.errstate(all="ignore"):
            new_acc = np.asarray(acc + g * g, dtype=dtype)
            step = np.asarray(g / np.sqrt(new_acc + np.asarray(self.eps, dtype)), dtype=dtype)
        output_storage[0][0] = new_acc
        output_storage[1][0] = step

    def infer_shape(self, fgraph, node, input_shapes):
        shape = broadcast_lengths(self, node.inputs, input_shapes, node.outputs[0].type.shape)
        return [shape, shape]

    def L_op(self, inputs, outputs, output_grads):
        acc, g = inputs
        new_acc, step = outputs
        g_acc, g_step = output_grads
        denom = tm.sqrt(new_acc + self.eps)
        # d new_acc = d acc + 2 g d g ; d step = d g / denom - g / (2 denom^3) d new_acc
        total_new_acc = None if is_disconnected(g_acc) else g_acc
        if not is_disconnected(g_step):
            through = -g_step * g / (2 * denom * denom * denom)
            total_new_acc = through if total_new_acc is None else total_new_acc + through
        grad_acc = total_new_acc if total_new_acc is not None else tm.mul(acc, 0)
        grad_g = 2 * g * grad_acc
        if not is_disconnected(g_step):
            grad_g = grad_g + g_step / denom
        return [reduce_grad_to(grad_acc, acc), reduce_grad_to(grad_g, g)]


class FusedReduce(Op):
    """``reduce_op(Elemwise(scalar_op)(*inputs))`` as one node (one loop for an engine).

    >>> import numpy as np
    >>> from theano_dag import scalar as ts
    >>> from theano_dag import tensor as tt
    >>> from theano_dag.tensor.elemwise import Sum
    >>> x = tt.dmatrix("x")
    >>> r = FusedReduce(Sum(axis=(1,)), ts.sqr)(x)
    >>> r.eval({x: np.array([[1.0, 2.0], [3.0, 4.0]])})
    array([ 5., 25.])
    """

    __props__ = ("reduce_op", "scalar_op")

    def __init__(self, reduce_op, scalar_op):
        if not isinstance(reduce_op, CAReduce):
            raise TypeError(f"FusedReduce: reduce_op must be a CAReduce, got {reduce_op!r}")
        if getattr(scalar_op, "nout", 1) != 1:
            raise TypeError(f"FusedReduce: the scalar op {scalar_op} must have one output")
        self.reduce_op = reduce_op
        self.scalar_op = scalar_op

    def __str__(self):
        return f"FusedReduce{{{self.reduce_op}, {self.scalar_op}}}"

    __repr__ = __str__

    def _elemwise(self):
        return Elemwise(self.scalar_op)

    def make_node(self, *inputs):
        mid = self._elemwise()(*inputs)
        red = self.reduce_op.make_node(mid)
        return Apply(self, list(mid.owner.inputs), [red.outputs[0].type()])

    def perform(self, node, inputs, output_storage, params=None):
        # A length 1 broadcasts only along a dimension declared broadcastable, as in the
        # Elemwise it fuses (numpy's broadcast would spread it anyway).
        check_runtime_broadcast(self, node.inputs, inputs)
        shape = np.broadcast_shapes(*[np.shape(x) for x in inputs])
        mid_dtype = self.scalar_op.output_types(tuple(x.dtype.name for x in inputs))[0]
        (mid,) = self.scalar_op.compute(inputs, [mid_dtype])
        mid = np.broadcast_to(mid, shape)
        self.reduce_op.perform(node, [mid], output_storage)

    def infer_shape(self, fgraph, node, input_shapes):
        ndim = max(x.ndim for x in node.inputs)
        axes = self.reduce_op._axes(ndim)
        full = broadcast_lengths(self, node.inputs, input_shapes, (None,) * ndim)
        out = tuple(s for d, s in enumerate(full) if d not in axes)
        # A reduced length is no length of the result: where its inputs' are not known
        # equal, each length of the result carries their check (perform refuses them).
        for d in axes:
            owner = getattr(full[d], "owner", None)
            if owner is not None and isinstance(owner.op, EqualLengths):
                lengths = owner.inputs[1:] if owner.op.guard else owner.inputs
                out = checked_shape(out, lengths, owner.op.what, owner.op.names)
        return [out]

    def L_op(self, inputs, outputs, output_grads):
        from theano_dag.gradient import Lop  # gradient is above tensor; only the gradient needs it

        # The gradient of the unfused expression (a vector-Jacobian product).
        red = self.reduce_op(self._elemwise()(*inputs))
        return Lop(red, list(inputs), output_grads[0], disconnected_inputs="ignore")
