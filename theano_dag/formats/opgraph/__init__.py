"""The OpGraph of the TensorWrapper design: a bipartite tensor/operation graph.

Build one node by node, label edges with modes, evaluate it with numpy, and
rewrite it into the basic operations an engine supports:

>>> import numpy as np
>>> g = OpGraph()
>>> a, b, add, c = (g.add_node(n) for n in (Tensor("A"), Tensor("B"), Add(), Tensor("C")))
>>> _ = g.add_edge(a, add, "i,j"), g.add_edge(b, add, "j,i"), g.add_edge(add, c, "i,j")
>>> x, y = np.ones((2, 3)), np.arange(6.0).reshape(3, 2)
>>> np.array_equal(evaluate(g, {a: x, b: y})[c], x + y.T)
True
"""

from theano_dag.formats.opgraph.convert import fgraph_to_opgraph, opgraph_to_fgraph
from theano_dag.formats.opgraph.graph import Edge, OpGraph, OpGraphError, evaluate, infer_shapes
from theano_dag.formats.opgraph.nodes import (
    Add,
    Chip,
    Cholesky,
    Division,
    EigenSolve,
    ElementwiseMultiplication,
    MatrixMultiply,
    Multiplication,
    Node,
    Operation,
    Permute,
    Pow,
    Reshape,
    Scale,
    Slice,
    Subtraction,
    Tensor,
    parse_modes,
)
from theano_dag.formats.opgraph.rewrite import (
    REFERENCE_OPS,
    REWRITES,
    BasicOps,
    UnsupportedOperationError,
    rewrite_for,
)

__all__ = [
    "REFERENCE_OPS",
    "REWRITES",
    "Add",
    "BasicOps",
    "Chip",
    "Cholesky",
    "Division",
    "Edge",
    "EigenSolve",
    "ElementwiseMultiplication",
    "MatrixMultiply",
    "Multiplication",
    "Node",
    "OpGraph",
    "OpGraphError",
    "Operation",
    "Permute",
    "Pow",
    "Reshape",
    "Scale",
    "Slice",
    "Subtraction",
    "Tensor",
    "UnsupportedOperationError",
    "evaluate",
    "fgraph_to_opgraph",
    "opgraph_to_fgraph",
    "infer_shapes",
    "parse_modes",
    "rewrite_for",
]
