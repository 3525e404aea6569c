"""Sparse matrices (Theano's ``theano.sparse``): CSR and CSC matrices of ``scipy.sparse``
as values, with their ops and gradients.

- :mod:`~theano_dag.sparse.type`: ``SparseType`` (format and dtype);
- :mod:`~theano_dag.sparse.variable`: sparse variables and constants, ``csr_matrix``,
  ``csc_matrix``, ``as_sparse_variable``;
- :mod:`~theano_dag.sparse.basic`: the ops (``CSM``, ``csm_properties``,
  ``dense_from_sparse``, ``csr_from_dense``, ``add``, ``mul``, ``sp_sum``,
  ``structured_exp``...);
- :mod:`~theano_dag.sparse.products`: ``dot``, ``structured_dot``, ``true_dot``,
  ``sampling_dot``, ``usmm``;
- :mod:`~theano_dag.sparse.indexing`: ``x[a:b, c:d]``, ``x[[rows]]``, ``x[i, j]``;
- :mod:`~theano_dag.sparse.join`: ``hstack``, ``vstack``, ``sparse_block_diag``;
- :mod:`~theano_dag.sparse.compare`: ``eq``, ``neq``, ``lt``, ``gt``, ``le``, ``ge``;
- :mod:`~theano_dag.sparse.structure`: ``remove0``, ``ensure_sorted_indices``,
  ``clean``, ``diag``, ``square_diagonal``;
- :mod:`~theano_dag.sparse.sharedvar`: ``shared`` of a scipy.sparse matrix.

scipy is the optional ``scipy`` extra: importing this package never imports it, and
making a sparse variable without it raises an ImportError that names the extra.
``enable_sparse`` says whether scipy is there (Theano's flag).
``verify_grad_sparse`` (finite differences through sparse inputs) lives with
``verify_grad`` in :mod:`theano_dag.gradient.verify`, a floor above; ``import
theano_dag`` puts it here too.

>>> import numpy as np, scipy.sparse as sp, theano_dag
>>> import theano_dag.sparse as S
>>> x = S.csr_matrix("x", dtype="float64")
>>> f = theano_dag.function([x], S.sp_sum(S.sqr(x), sparse_grad=True))
>>> f(sp.csr_matrix(np.array([[0.0, 3.0], [4.0, 0.0]])))
array(25.)
"""

import importlib.util

from theano_dag.sparse import (  # noqa: A004, F401 (Theano's paths; basic first: see its end)
    basic,
    compare,
    indexing,
    join,
    products,
    sharedvar,
    structure,
    type,
    utils,
    variable,
)
from theano_dag.sparse.basic import *  # noqa: F403
from theano_dag.sparse.basic import __all__ as _basic_all
from theano_dag.sparse.sharedvar import SparseTensorSharedVariable, sparse_constructor
from theano_dag.sparse.type import SparseType, scipy_sparse, sparse_formats
from theano_dag.sparse.variable import *  # noqa: F403
from theano_dag.sparse.variable import __all__ as _variable_all

# Theano's flag: True when scipy can be imported (found without importing it).
enable_sparse = importlib.util.find_spec("scipy") is not None
shared = sparse_constructor  # Theano's theano.sparse.shared

__all__ = [
    "enable_sparse",
    "SparseType",
    "scipy_sparse",
    "sparse_formats",
    "shared",
    "SparseTensorSharedVariable",
    "sparse_constructor",
    *_variable_all,
    *_basic_all,
]
