"""The graph core: Variables, Apply nodes, Ops, Types and the FunctionGraph."""

from theano_dag.graph.basic import Apply, Constant, Node, Variable, clone, graph_inputs
from theano_dag.graph.fg import FunctionGraph, InconsistencyError, MissingInputError
from theano_dag.graph.op import Op, as_op
from theano_dag.graph.type import Generic, Type

__all__ = [
    "Apply",
    "Constant",
    "Node",
    "Variable",
    "clone",
    "graph_inputs",
    "FunctionGraph",
    "InconsistencyError",
    "MissingInputError",
    "Op",
    "as_op",
    "Generic",
    "Type",
]
