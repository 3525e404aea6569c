"""Shared variables of a scalar type (``theano.scalar.sharedvar``): a true scalar held in a
shared container, as scan's counters once were. ``theano_dag.shared`` never makes one
(scalars are 0-d tensors there): call :func:`shared` here to get one.

>>> from theano_dag.scalar.sharedvar import shared
>>> s = shared(3)
>>> s.type, s.get_value()
(ScalarType(int64), np.int64(3))
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.shared import SharedVariable
from theano_dag.scalar.basic import _scalar_py_operators, get_scalar_type

__all__ = ["ScalarSharedVariable", "shared"]


class ScalarSharedVariable(_scalar_py_operators, SharedVariable):
    """A shared variable whose type is a scalar type (arithmetic gives scalar ops)."""


def shared(value, name=None, strict=False, allow_downcast=None):
    """A :class:`ScalarSharedVariable` holding the Python or numpy number ``value``, of its
    numpy dtype (int64 for a Python int, float64 for a float).

    >>> x = shared(0.5, name="x")
    >>> x.type, x.name, (x * 2).type
    (ScalarType(float64), 'x', ScalarType(float64))
    """
    if not isinstance(value, (np.number, int, float, complex)):
        raise TypeError(f"scalar shared: not a number: {type(value).__name__}")
    dtype = str(np.asarray(value).dtype)
    return ScalarSharedVariable(
        type=get_scalar_type(dtype),
        value=np.dtype(dtype).type(value),
        name=name,
        strict=strict,
        allow_downcast=allow_downcast,
    )
