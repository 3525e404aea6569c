"""``hash_from_sparse``: a digest of a sparse matrix's value, format, dtype and shape
(Theano's ``theano.sparse.utils``).

>>> import numpy as np, scipy.sparse as sp
>>> a = sp.csr_matrix(np.eye(2))
>>> hash_from_sparse(a) == hash_from_sparse(a.copy())
True
>>> hash_from_sparse(a) == hash_from_sparse(a.tocsc())
False
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["hash_from_sparse"]


def hash_from_sparse(data) -> str:
    """The sha256 digest of ``data``'s stored arrays, shape, dtype and format (the shape
    and dtype count: empty matrices of other shapes or dtypes differ)."""
    h = hashlib.sha256()
    for part in (data.data, data.indices, data.indptr):
        h.update(hashlib.sha256(np.ascontiguousarray(part).tobytes()).digest())
    for part in (str(data.shape), str(data.dtype), data.format):
        h.update(hashlib.sha256(part.encode()).digest())
    return h.hexdigest()
