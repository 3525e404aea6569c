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


def may_share_memory(a, b, raise_other_type=True) -> bool:
    """Whether the arrays ``a`` and ``b`` may share memory (numpy's bounds test). Values
    other than numpy arrays raise TypeError, or give False with ``raise_other_type=False``
    (theano_dag has no sparse or GPU array values to compare here)."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return bool(np.may_share_memory(a, b))
    if raise_other_type:
        raise TypeError(
            f"may_share_memory takes numpy arrays, got {type(a).__name__} and {type(b).__name__}"
        )
    return False
