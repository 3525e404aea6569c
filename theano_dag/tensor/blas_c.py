"""``theano.tensor.blas_c``: Theano's BLAS ops with C code, ``CGemv`` and ``CGer``.

In Theano these are variants of ``Gemv`` and ``Ger`` that carry their own C code, swapped
in by a rewrite when a C compiler is found. In theano_dag an op carries no backend code:
the CPU engine runs ``Gemv`` and ``Ger`` with its generated C kernels, so the C variants
are the same ops, under Theano's names.

>>> import theano_dag.tensor as tt
>>> from theano_dag.tensor.blas import Gemv
>>> CGemv(inplace=False) == Gemv(inplace=False)
True
"""

from theano_dag.tensor.blas import Gemv as CGemv
from theano_dag.tensor.blas import Ger as CGer
from theano_dag.tensor.blas import gemv_inplace as cgemv_inplace
from theano_dag.tensor.blas import gemv_no_inplace as cgemv_no_inplace
from theano_dag.tensor.blas import ger as cger_no_inplace
from theano_dag.tensor.blas import ger_destructive as cger_inplace

__all__ = ["CGemv", "CGer", "cgemv_inplace", "cgemv_no_inplace", "cger_inplace", "cger_no_inplace"]
