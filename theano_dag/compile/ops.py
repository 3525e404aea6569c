"""``theano.compile.ops``'s names: the identity ops live in :mod:`theano_dag.graph.identity_ops`."""

from theano_dag.graph.identity_ops import DeepCopyOp, ViewOp, deep_copy_op, view_op

__all__ = ["DeepCopyOp", "ViewOp", "deep_copy_op", "view_op"]
