"""``theano.tensor.slinalg``'s path: the decompositions live in :mod:`theano_dag.tensor.linalg`."""

from theano_dag.tensor.linalg import Cholesky, CholeskyGrad, cholesky

__all__ = ["Cholesky", "CholeskyGrad", "cholesky"]
