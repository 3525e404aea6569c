"""Dask arrays as function inputs, and shared variables whose value is a dask array.

``DaskInputType`` wraps a TensorType so that an input of a function compiled for
the Dask engine accepts a ``dask.array.Array`` as it is (checked for dtype, rank
and static shape, never computed) besides anything the tensor type accepts.

``DaskSharedVariable`` holds a dask array (possibly persisted on a cluster):
functions on the Dask engine read it where it is and leave their updates there,
persisted, so a training loop gathers nothing between calls; ``get_value()``
gathers it into a numpy array (``return_internal_type=True`` gives the dask array).
``shared(dask_array)`` makes one; :func:`dask_shared` makes one from numpy too.
"""

from __future__ import annotations

import numpy as np

from theano_dag.engines.basic import Container
from theano_dag.engines.dask import backend
from theano_dag.engines.dask.backend import is_dask_array, require
from theano_dag.engines.dask.fusion import optimize_arrays
from theano_dag.tensor.sharedvar import TensorSharedVariable, tensor_type_for
from theano_dag.tensor.type import ForeignArrayType

__all__ = ["DaskInputType", "DaskSharedVariable", "dask_shared", "dask_shared_constructor"]


class DaskInputType(ForeignArrayType):
    """A tensor type that also accepts dask arrays of the same dtype and rank.

    >>> import theano_dag.tensor as tt
    >>> t = DaskInputType(tt.TensorType("float64", shape=(None,)))
    >>> t.filter([1, 2]).dtype
    dtype('float64')
    """

    kind, label = "dask", "Dask"
    is_foreign = staticmethod(is_dask_array)

    def may_share_memory(self, a, b) -> bool:
        # Dask arrays are immutable: nothing a function does can change one.
        if is_dask_array(a) or is_dask_array(b):
            return False
        return self.tensor_type.may_share_memory(a, b)

    def values_eq_approx(self, a, b):
        return self.tensor_type.values_eq_approx(np.asarray(a), np.asarray(b))


class DaskSharedVariable(TensorSharedVariable):
    """A shared tensor holding a dask array (see the module docstring)."""

    def __init__(self, type, value, strict=False, allow_downcast=None, container=None, name=None):
        if container is None:
            container = Container(
                DaskInputType(type),
                [_as_dask(value)],
                name=name,
                strict=strict,
                allow_downcast=allow_downcast,
            )
            value, strict = None, False
        super().__init__(
            type=type,
            value=value,
            strict=strict,
            allow_downcast=allow_downcast,
            container=container,
            name=name,
        )

    def get_value(self, borrow=False, return_internal_type=False):
        """The value gathered into a numpy array (the dask array itself with
        ``return_internal_type=True``)."""
        value = self.container.value
        if is_dask_array(value):
            if return_internal_type:
                return value
            # optimized as the engine's own graphs are (engines.dask.fusion)
            (value,) = optimize_arrays([value])
            return np.asarray(value.compute(optimize_graph=False))
        return value if borrow else np.array(value, copy=True)

    def set_value(self, new_value, borrow=False):
        if is_dask_array(new_value):
            self.container.value = new_value
        else:
            with self.naming_errors():
                value = self.type.filter(new_value)
            self.container.value = _as_dask(value)


def _as_dask(value):
    require("a Dask shared variable")
    if is_dask_array(value):
        return value
    arr = np.array(value, copy=True)
    return backend.da.from_array(arr, chunks=backend.input_chunks("auto", arr.shape, arr.dtype))


def dask_shared(
    value, name=None, strict=False, allow_downcast=None, broadcastable=None, shape=None
):
    """A shared variable whose value is a dask array (a numpy value is chunked with
    ``chunks="auto"``; give a dask array to choose its chunks).

    >>> import numpy as np
    >>> w = dask_shared(np.ones(3), name="w")
    >>> type(w.get_value(return_internal_type=True)).__name__, w.get_value()
    ('Array', array([1., 1., 1.]))
    """
    require("dask_shared")
    if not is_dask_array(value):
        value = np.asarray(value)
    dummy = np.empty((0,) * value.ndim, dtype=value.dtype)
    ttype = tensor_type_for(dummy, broadcastable=broadcastable, shape=shape)
    return DaskSharedVariable(
        type=ttype, value=value, strict=strict, allow_downcast=allow_downcast, name=name
    )


def dask_shared_constructor(
    value,
    name=None,
    strict=False,
    allow_downcast=None,
    borrow=False,
    broadcastable=None,
    shape=None,
):
    """The ``shared()`` constructor for dask arrays; raises TypeError to let others try."""
    if is_dask_array(value):
        return dask_shared(
            value,
            name=name,
            strict=strict,
            allow_downcast=allow_downcast,
            broadcastable=broadcastable,
            shape=shape,
        )
    raise TypeError("not a dask array")
