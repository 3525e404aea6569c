"""The last pass of a loop step's optimizer when the CPU engine runs the loop in C.

The C loop (``engines.cpu.loop``) replays a step made of fused elementwise kernels only;
an elementwise node that fusion left alone would be numpy's ufunc, called from Python.
``local_elemwise_as_kernel`` makes each such node a one-op ``Elemwise{Composite}`` (its
in-place pattern kept), which the CPU engine runs as a C kernel. The ``Scan`` op runs it
after the step's own optimizer (:class:`StepOptimizer`); it is in no global query, so no
other graph sees it.
"""

from __future__ import annotations

from theano_dag import scalar as ts
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.graph.rewriting.navigator import in2out
from theano_dag.tensor.elemwise import Elemwise

__all__ = ["StepOptimizer", "local_elemwise_as_kernel"]


@local_optimizer([Elemwise])
def local_elemwise_as_kernel(fgraph, node):
    """A plain elementwise node as a one-op Composite (see the module docstring).

    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> local_elemwise_as_kernel.transform(None, (x * 2).owner)[0].owner.op
    Elemwise{Composite{mul(i0, i1)},no_inplace}
    """
    # mul(x, y) -> Elemwise{Composite{mul(i0, i1)}}(x, y)
    op = node.op
    if not isinstance(op, Elemwise) or isinstance(op.scalar_op, ts.Composite):
        return None
    if len(node.outputs) != 1:
        return None
    scalars = [ts.get_scalar_type(i.type.dtype)() for i in node.inputs]
    out = op.scalar_op.make_node(*scalars).outputs[0]
    if out.type.dtype != node.outputs[0].type.dtype:
        return None
    comp = ts.Composite(scalars, [out], copy=False)
    new = Elemwise(comp, inplace_pattern=dict(op.inplace_pattern or {}))(*node.inputs)
    if new.type != node.outputs[0].type:
        return None
    return [new]


STEP_KERNELS_PASS = in2out(local_elemwise_as_kernel, name="elemwise_as_kernel")


class StepOptimizer:
    """A step's optimizer (``first``, or None), then :data:`STEP_KERNELS_PASS`."""

    def __init__(self, first):
        self.first = first

    def optimize(self, fgraph):
        if self.first is not None:
            run = getattr(self.first, "optimize", None) or self.first
            run(fgraph)
        STEP_KERNELS_PASS.optimize(fgraph)
