"""``theano.compile.ops``'s names: the identity ops live in :mod:`theano_dag.graph.identity_ops`,
``as_op`` in :mod:`theano_dag.graph.op`."""

from theano_dag.graph.identity_ops import DeepCopyOp, ViewOp, deep_copy_op, view_op
from theano_dag.graph.op import FromFunctionOp, as_op

__all__ = ["DeepCopyOp", "ViewOp", "deep_copy_op", "view_op", "as_op", "FromFunctionOp"]
