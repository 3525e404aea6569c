"""``theano.compile.sharedvalue``'s names: shared values live in :mod:`theano_dag.graph.shared`
and the tensor constructor in :mod:`theano_dag.tensor.sharedvar`."""

from theano_dag.graph.shared import SharedVariable, shared, shared_constructor
from theano_dag.graph.type import generic  # Theano has it here too

__all__ = ["SharedVariable", "shared", "shared_constructor", "generic"]
