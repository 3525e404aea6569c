"""``theano.compile.ops``'s names: the identity ops live in :mod:`theano_dag.graph.identity_ops`,
``as_op`` in :mod:`theano_dag.graph.op`, the shape ops (``shape``, ``shape_i``,
``SpecifyShape``, ``Rebroadcast``) in :mod:`theano_dag.tensor.shape`."""

from theano_dag.graph.identity_ops import DeepCopyOp, ViewOp, deep_copy_op, view_op
from theano_dag.graph.op import FromFunctionOp, as_op
from theano_dag.tensor.shape import (
    Rebroadcast,
    Shape,
    Shape_i,
    SpecifyShape,
    shape,
    shape_i,
    specify_shape,
)

__all__ = [
    "DeepCopyOp",
    "ViewOp",
    "deep_copy_op",
    "view_op",
    "as_op",
    "FromFunctionOp",
    "Rebroadcast",
    "Shape",
    "Shape_i",
    "SpecifyShape",
    "shape",
    "shape_i",
    "specify_shape",
]
