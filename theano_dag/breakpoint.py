"""``PdbBreakpoint`` (``theano.breakpoint``): a conditional breakpoint in a compiled graph.

``PdbBreakpoint(name)(condition, *monitored)`` returns the monitored variables unchanged
(as views); when a call of the function finds the scalar ``condition`` true, it stops in
``pdb`` with their values in the list ``monitored``. Only the returned variables carry the
breakpoint: the graph must use them (not the originals) for the op to run, and the
breakpoint runs where the engine runs the op (not inside a fused kernel).

>>> import numpy as np
>>> import theano_dag
>>> import theano_dag.tensor as tt
>>> x = tt.dvector("x")
>>> checked = PdbBreakpoint("x too large")(tt.gt(x.sum(), 1e6), x)
>>> theano_dag.function([x], checked * 2)(np.array([1.0, 2.0]))  # no stop: sum is small
array([2., 4.])
"""

from __future__ import annotations

import copy
import pdb
import sys

from theano_dag import tensor as tt
from theano_dag.graph.basic import Apply, Variable
from theano_dag.graph.null_type import disconnected_type
from theano_dag.graph.op import Op

__all__ = ["PdbBreakpoint"]


class PdbBreakpoint(Op):
    """Stop in pdb when the condition (the first input) is true; the other inputs pass
    through as the outputs, each a view of its input. Their gradients pass through too.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dmatrix("x")
    >>> op = PdbBreakpoint("check")
    >>> out = op(tt.gt(x.sum(), 0), x)
    >>> out.type, op.connection_pattern(out.owner)
    (TensorType(float64, matrix), [[False], [True]])
    """

    __props__ = ("name",)

    def __init__(self, name):
        self.name = name

    def make_node(self, condition, *monitored):
        condition = tt.as_tensor_variable(condition)
        if condition.ndim != 0:
            raise TypeError(f"PdbBreakpoint: the condition must be a scalar, got {condition.type}")
        if not monitored:
            raise TypeError("PdbBreakpoint: give at least one variable to monitor")
        monitored = [v if isinstance(v, Variable) else tt.as_tensor_variable(v) for v in monitored]
        # Each output is a view of its monitored input: nothing is copied. The view_map
        # depends on how many are monitored: the node gets a copy of the op holding its own.
        op = copy.copy(self)
        op.view_map = {k: [k + 1] for k in range(len(monitored))}
        return Apply(op, [condition, *monitored], [v.type() for v in monitored])

    def perform(self, node, inputs, output_storage, params=None):
        condition, monitored = inputs[0], list(inputs[1:])
        if condition:
            print(
                f"PdbBreakpoint {self.name!r}: the condition is true; the monitored values "
                "are in the list `monitored`",
                file=sys.stderr,
            )
            pdb.set_trace()
        for cell, value in zip(output_storage, monitored):
            cell[0] = value

    def infer_shape(self, fgraph, node, input_shapes):
        return list(input_shapes[1:])

    def connection_pattern(self, node):
        n = len(node.outputs)
        return [[False] * n] + [[k == j for j in range(n)] for k in range(n)]

    def grad(self, inputs, output_grads):
        return [disconnected_type(), *output_grads]
