"""``theano.misc.safe_asarray._asarray``: ``numpy.asarray`` with ``"floatX"`` as a dtype.

>>> _asarray([1, 2], dtype="float32")
array([1., 2.], dtype=float32)
"""

from __future__ import annotations

import numpy as np

from theano_dag.config import config

__all__ = ["_asarray"]


def _asarray(a, dtype, order=None):
    """``a`` as an array of ``dtype`` (``"floatX"``: ``config.floatX``); Theano's helper,
    which also worked around a numpy bug long fixed."""
    if str(dtype) == "floatX":
        dtype = config.floatX
    return np.asarray(a, dtype=np.dtype(dtype), order=order)
