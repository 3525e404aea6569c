"""Theano's ``theano.misc.may_share_memory``: whether two values may share memory.

>>> import numpy as np
>>> a = np.zeros(4)
>>> may_share_memory(a, a[1:]), may_share_memory(a, np.zeros(4))
(True, False)
>>> may_share_memory(a, 3, raise_other_type=False)
False
"""

import numpy as np

__all__ = ["may_share_memory"]


def _parts(v):
    """The arrays holding ``v``: itself for an ndarray, the stored arrays of a CSR/CSC
    matrix (recognised by them: this floor does not import scipy), else None."""
    if isinstance(v, np.ndarray):
        return [v]
    parts = [getattr(v, name, None) for name in ("data", "indices", "indptr")]
    if all(isinstance(p, np.ndarray) for p in parts):
        return parts
    return None


def may_share_memory(a, b, raise_other_type=True) -> bool:
    """Whether the arrays ``a`` and ``b`` may share memory (numpy's bounds test). Values
    other than numpy arrays and scipy.sparse CSR/CSC matrices (compared by their stored
    arrays) raise TypeError, or give False with ``raise_other_type=False``."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return bool(np.may_share_memory(a, b))
    parts_a, parts_b = _parts(a), _parts(b)
    if parts_a is not None and parts_b is not None:
        return any(np.may_share_memory(x, y) for x in parts_a for y in parts_b)
    if raise_other_type:
        raise TypeError(
            f"may_share_memory takes numpy arrays, got {type(a).__name__} and {type(b).__name__}"
        )
    return False
