"""``theano.tensor.nlinalg``'s path: the decompositions live in :mod:`theano_dag.tensor.linalg`."""

from theano_dag.tensor.linalg import Eigh, EighGrad, GeneralizedEigh, eigh, generalized_eigh

__all__ = ["Eigh", "EighGrad", "GeneralizedEigh", "eigh", "generalized_eigh"]
