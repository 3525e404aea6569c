"""Shared tensors: a SharedVariable with the tensor operators (``theano.tensor.sharedvar``).

Importing the tensor package registers :func:`tensor_constructor` with
:func:`theano_dag.graph.shared.shared`, which then makes numpy arrays and numbers
into :class:`TensorSharedVariable`.
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.shared import SharedVariable, shared_constructor
from theano_dag.tensor.type import TensorType
from theano_dag.tensor.variable import _tensor_py_operators

__all__ = ["TensorSharedVariable", "tensor_constructor", "tensor_type_for"]


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


@shared_constructor
def tensor_constructor(
    value,
    name=None,
    strict=False,
    allow_downcast=None,
    borrow=False,
    broadcastable=None,
    shape=None,
):
    """Shared tensor of a numpy array or a Python/numpy number."""
    # ValueErrors, not TypeErrors: shared() would fall back to a Generic variable.
    if isinstance(value, np.ma.MaskedArray):
        raise ValueError(
            "shared: a numpy masked array is not a tensor value (its mask would be "
            "ignored); pass np.ma.filled(value, fill_value) or value.data"
        )
    if isinstance(value, np.matrix):
        raise ValueError(
            "shared: a numpy.matrix is not a tensor value (always 2-D, its operators "
            "differ from an ndarray's); pass np.asarray(value)"
        )
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufc":
            raise TypeError(f"shared: arrays of dtype {value.dtype} are not tensors")
        array = value if borrow else value.copy()
    elif isinstance(value, (bool, int, float, complex, np.number, np.bool_)):
        # Python numbers: int64 / float64 / complex128, like Theano's scalar constructor.
        array = np.asarray(value)
    else:
        raise TypeError(f"shared tensors hold numpy arrays or numbers, not {type(value)}")
    ttype = tensor_type_for(array, broadcastable=broadcastable, shape=shape)
    return TensorSharedVariable(
        type=ttype, value=array, name=name, strict=strict, allow_downcast=allow_downcast
    )
