"""``theano.compile.sharedvalue``'s names: shared values live in :mod:`theano_dag.graph.shared`
and the tensor constructor in :mod:`theano_dag.tensor.sharedvar`."""

from theano_dag.graph.shared import SharedVariable, shared, shared_constructor

__all__ = ["SharedVariable", "shared", "shared_constructor"]
