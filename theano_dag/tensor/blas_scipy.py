"""``theano.tensor.blas_scipy``: Theano's ``ScipyGer``, the rank-1 update through
scipy's BLAS. In theano_dag an op carries no backend code; the engines run ``Ger``
with their own kernels, so ``ScipyGer`` is ``Ger`` under Theano's name.

>>> from theano_dag.tensor.blas import Ger
>>> ScipyGer(destructive=False) == Ger(destructive=False)
True
"""

from theano_dag.tensor.blas import Ger as ScipyGer
from theano_dag.tensor.blas import ger as scipy_ger_no_inplace
from theano_dag.tensor.blas import ger_destructive as scipy_ger_inplace

__all__ = ["ScipyGer", "scipy_ger_inplace", "scipy_ger_no_inplace"]
