"""Shared tensors: a SharedVariable with the tensor operators (``theano.tensor.sharedvar``).

Imported lazily by :func:`theano_dag.compile.sharedvalue.shared`, so the
compile package does not need the tensor package to import.
"""

from __future__ import annotations

import numpy as np

from theano_dag.compile.sharedvalue import SharedVariable
from theano_dag.tensor.type import TensorType
from theano_dag.tensor.var import _tensor_py_operators

__all__ = ["TensorSharedVariable", "tensor_type_for"]


class TensorSharedVariable(_tensor_py_operators, SharedVariable):
    """A shared numpy array usable in tensor expressions.

    >>> import numpy as np
    >>> from theano_dag.compile.sharedvalue import shared
    >>> w = shared(np.ones((2, 2)), name="W")
    >>> isinstance(w, TensorSharedVariable), (w * 2).type.ndim
    (True, 2)
    """


def tensor_type_for(array: np.ndarray, broadcastable=None, shape=None) -> TensorType:
    """The TensorType of a shared ``array``: every axis may change length unless the caller
    fixes it with ``broadcastable`` or ``shape`` (the value may be resized later)."""
    if shape is not None:
        if len(shape) != array.ndim:
            raise ValueError(
                f"shared: shape={tuple(shape)} has {len(shape)} entries for a value with "
                f"{array.ndim} dimensions"
            )
        return TensorType(array.dtype, shape=tuple(shape))
    if broadcastable is None:
        broadcastable = (False,) * array.ndim
    if len(broadcastable) != array.ndim:
        raise ValueError(
            f"shared: broadcastable={tuple(broadcastable)} has {len(broadcastable)} entries "
            f"for a value with {array.ndim} dimensions"
        )
    return TensorType(array.dtype, broadcastable=tuple(broadcastable))
