"""``theano.tensor.utils``: a content hash of an array and the shapes of a graph's
variables from the shapes of its inputs (through each op's ``infer_shape``)."""

from __future__ import annotations

import hashlib

import numpy as np

from theano_dag.graph.algorithms import graph_inputs
from theano_dag.tensor.shape import make_vector, shape_i
from theano_dag.tensor.type import TensorType
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["hash_from_ndarray", "shape_of_variables"]


def hash_from_ndarray(data) -> str:
    """A hash of an array's values, shape and dtype: a view and its copy hash alike.

    >>> a = np.arange(6.0).reshape(2, 3)
    >>> hash_from_ndarray(a[:, 1:]) == hash_from_ndarray(a[:, 1:].copy())
    True
    >>> hash_from_ndarray(a) == hash_from_ndarray(a.T)
    False
    """
    data = np.ascontiguousarray(np.asarray(data))
    h = hashlib.sha256(data.tobytes())
    h.update(f"{data.shape}|{data.dtype.str}".encode())
    return h.hexdigest()


def shape_of_variables(fgraph, input_shapes) -> dict:
    """The shape (a tuple of ints) of every tensor variable of ``fgraph``, given the
    shapes of its inputs (``{input: shape}``); ValueError when a key is not one of
    ``fgraph``'s inputs. The shapes come from the ops' ``infer_shape``, the values
    are never computed.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> x = tt.dmatrix("x")
    >>> y = tt.dot(x, x.T)
    >>> shape_of_variables(FunctionGraph([x], [y], clone=False), {x: (5, 1)})[y]
    (5, 5)
    """
    if any(v not in fgraph.inputs for v in input_shapes):
        raise ValueError(
            "shape_of_variables: input_shapes has variables that are not inputs of fgraph"
        )
    sym: dict = {}
    for v in fgraph.inputs:
        if isinstance(v.type, TensorType):
            sym[v] = tuple(shape_i(v, d) for d in range(v.ndim))
    for node in fgraph.toposort():
        for i in node.inputs:  # constants: their own shapes
            if isinstance(i.type, TensorType) and i not in sym:
                sym[i] = tuple(shape_i(i, d) for d in range(i.ndim))
        ins = [sym[i] if isinstance(i.type, TensorType) else None for i in node.inputs]
        outs = node.op.infer_shape(fgraph, node, ins)
        for out, shp in zip(node.outputs, outs):
            if isinstance(out.type, TensorType) and shp is not None:
                sym[out] = tuple(shp)
    variables = [v for v in sym if sym[v]]
    entries = [as_tensor_variable(e) for v in variables for e in sym[v]]
    values = {}
    if entries:
        vec = make_vector(*[e.astype("int64") for e in entries])
        used = set(graph_inputs([vec]))
        dummies = {v: np.zeros(input_shapes[v], dtype=v.dtype) for v in input_shapes if v in used}
        flat = iter(int(n) for n in vec.eval(dummies))
        values = {v: tuple(next(flat) for _ in sym[v]) for v in variables}
    return {v: values.get(v, ()) for v in sym}
