"""Constant folding: a node whose inputs are all constants is computed once, at compile time.

(Owl's optimiser, figure 5: "node #241 depends only on constant nodes".) The result
becomes a Constant of the node's output type. A size limit keeps huge arrays out of the
graph: ``alloc(0, 10000, 10000)`` stays a node that runs when the function runs.
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Constant
from theano_dag.graph.rewriting.local import LocalOptimizer, local_optimizer
from theano_dag.opt.rewrites.shapes import local_infer_shape
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import value_computed
from theano_dag.tensor.shape import Shape, Shape_i
from theano_dag.tensor.variable import constant

__all__ = ["ConstantFolding", "constant_folding", "MAX_FOLDED_SIZE", "local_shape_i_static"]

# Folded results with more elements than this stay computations (a constant is stored in
# the graph, pickled with the function and kept alive as long as it).
MAX_FOLDED_SIZE = 100_000


class ConstantFolding(LocalOptimizer):
    """``op(c1, c2, ...) -> c`` for constants ``c1, c2, ...`` (results up to ``max_size``).

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> from theano_dag.opt import in2out
    >>> x = tt.dvector("x")
    >>> fg = FunctionGraph([x], [x + tt.exp(tt.constant(0.0))])
    >>> _ = in2out(ConstantFolding()).optimize(fg)
    >>> fg
    FunctionGraph(Elemwise{add,no_inplace}(x, [1.]))
    """

    def __init__(self, max_size=MAX_FOLDED_SIZE):
        self.max_size = max_size
        self.__name__ = "constant_folding"

    def tracks(self):
        return None

    def transform(self, fgraph, node):
        inputs = node.inputs
        # Ops without inputs (a random draw, say) are not "constant" computations.
        # (``owner is None`` first: it rules out most nodes faster than isinstance.)
        if not inputs:
            return False
        for i in inputs:  # a loop, not any(): this runs for every node of every pass
            if i.owner is not None:
                return False
        if not all(isinstance(i, Constant) for i in inputs):
            return False
        op = node.op
        if getattr(op, "destroy_map", None) or not op.do_constant_folding(fgraph, node):
            return False
        storage = [[None] for _ in node.outputs]
        try:
            # A copy of the cell list, as a thunk passes: an op that rebinds a cell
            # (not its content) leaves the output None, as in Theano.
            op.perform(node, [i.data for i in inputs], list(storage))
        except Exception:
            return False  # the error belongs to run time (e.g. a bad index): keep the node
        out = []
        for var, (value,) in zip(node.outputs, storage):
            if np.size(value) > self.max_size:
                return False
            try:
                data = var.type.filter(value)
            except (TypeError, ValueError):
                return False
            c = var.type.make_constant(data)
            if c.type != var.type:
                return False
            out.append(c)
        return out

    def __str__(self):
        return self.__name__


constant_folding = RULES.canonicalize("fast_compile")(ConstantFolding())
# (one instance per pass: each EquilibriumDB counts and profiles its own rules)
RULES.useless(canonicalize=False)(ConstantFolding())
RULES.stabilize()(ConstantFolding())
RULES.specialize()(ConstantFolding())


@RULES.canonicalize("fast_compile")
@local_optimizer([Shape_i, Shape])
def local_shape_i_static(fgraph, node):
    """The shape of a variable whose static shape is known is a constant. Of a computed
    variable that the function does not compute otherwise, the op's ``infer_shape``
    says first (``local_infer_shape``): a static length derived from one input's holds
    only where the others agree, which it checks.

    >>> import theano_dag.tensor as tt
    >>> local_shape_i_static.transform(None, tt.specify_shape(tt.dvector(), (3,)).shape.owner)
    [[3]]
    """
    # shape_i(x, i) -> c   when x.type.shape[i] == c
    # shape(x) -> [c...]   when x.type.shape is fully known
    x = node.inputs[0]
    if isinstance(node.op, Shape_i):
        s = x.type.shape[node.op.i]
        if s is None:
            return False
        c = constant(np.asarray(s, dtype=node.outputs[0].dtype))
    else:
        if None in x.type.shape:
            return False
        c = constant(np.asarray(x.type.shape, dtype=node.outputs[0].dtype))
    if x.owner is not None and fgraph is not None and not value_computed(fgraph, x):
        inferred = local_infer_shape.transform(fgraph, node)
        if inferred:
            return inferred
        # (an op that cannot tell: its static shape, as before)
    return [c] if c.type == node.outputs[0].type else False
