"""Ops that return their input: ``ViewOp`` (as a view) and ``DeepCopyOp`` (as a copy).

``DeepCopyOp`` copies an output that would otherwise alias an input, a
constant or another output; ``ViewOp`` marks an output allowed to alias
(both sides borrowed).
"""

from __future__ import annotations

import copy

import numpy as np

from theano_dag.graph.basic import Apply, Variable
from theano_dag.graph.op import Op

__all__ = ["DeepCopyOp", "ViewOp", "deep_copy_op", "view_op"]


class DeepCopyOp(Op):
    """Return a copy of its input that shares no memory with it.

    >>> import numpy as np
    >>> from theano_dag.graph.type import Generic
    >>> x = Generic()("x")
    >>> node = deep_copy_op(x).owner
    >>> out = [None]
    >>> a = np.zeros(2)
    >>> node.op.perform(node, [a], [out]); out[0] is a, np.shares_memory(out[0], a)
    (False, False)
    """

    __props__ = ()
    takes_none = True  # its value passed on as it is

    def make_node(self, x):
        if not isinstance(x, Variable):
            raise TypeError(f"DeepCopyOp expects a Variable, got {type(x).__name__}")
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        x = inputs[0]
        output_storage[0][0] = x.copy() if isinstance(x, np.ndarray) else copy.deepcopy(x)

    def infer_shape(self, fgraph, node, input_shapes):
        return input_shapes

    def grad(self, inputs, output_grads):
        return list(output_grads)

    def R_op(self, inputs, eval_points):
        return list(eval_points)


class ViewOp(Op):
    """Return its input itself: an output explicitly allowed to alias it."""

    __props__ = ()
    view_map = {0: [0]}
    takes_none = True

    def make_node(self, x):
        if not isinstance(x, Variable):
            raise TypeError(f"ViewOp expects a Variable, got {type(x).__name__}")
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = inputs[0]

    def infer_shape(self, fgraph, node, input_shapes):
        return input_shapes

    def grad(self, inputs, output_grads):
        return list(output_grads)

    def R_op(self, inputs, eval_points):
        return list(eval_points)


deep_copy_op = DeepCopyOp()
view_op = ViewOp()
