"""pre_greedy_local_optimizer: local rewrites on a graph that is not in a FunctionGraph."""

import numpy as np

import theano_dag.tensor as tt
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.rewriting import local_optimizer, pre_greedy_local_optimizer
from theano_dag.tensor.basic import constant
from theano_dag.tensor.elemwise import Elemwise


@local_optimizer([Elemwise])
def fold_constants(fgraph, node):
    if all(hasattr(i, "data") for i in node.inputs):
        (out,) = node.outputs
        value = node.op.scalar_op.impl(*[np.asarray(i.data) for i in node.inputs])
        return [constant(np.asarray(value, dtype=out.dtype))]
    return False


def test_folds_bottom_up_and_keeps_fgraph_nodes():
    x = tt.dscalar("x")
    inside = tt.exp(x)
    fg = FunctionGraph([x], [inside], clone=False)
    folded = (constant(2.0) + constant(3.0)) * constant(4.0)
    out = folded + inside
    new = pre_greedy_local_optimizer(fg, [fold_constants], out)
    assert new is out  # the top node has a variable input: it stays
    c = new.owner.inputs[0]
    assert hasattr(c, "data") and float(c.data) == 20.0
    assert new.owner.inputs[1] is inside and inside.owner in fg.apply_nodes


def test_whole_constant_graph_folds_to_one_constant():
    out = tt.exp(constant(0.0)) + constant(1.0)
    new = pre_greedy_local_optimizer(None, [fold_constants], out)
    assert new.owner is None and float(new.data) == 2.0


def test_deep_graph_does_not_recurse():
    x = tt.dscalar("x")
    out = x
    for _ in range(3000):
        out = out + constant(0.0)
    assert pre_greedy_local_optimizer(None, [fold_constants], out) is out
