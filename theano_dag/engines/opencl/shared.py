"""Device arrays as function inputs, and shared variables that live on the device.

``DeviceInputType`` wraps a TensorType so that a compiled function's input
accepts a ``pyopencl.array.Array`` as it is (checked for dtype, rank and
static shape) besides anything the tensor type accepts.

``OpenCLSharedVariable`` is a shared tensor whose value is a
``pyopencl.array.Array``: functions on the OpenCL engine read it where it is and
write its updates on the device, so a training loop moves no parameters
between calls. ``get_value()`` copies it to a numpy array (``return_internal_type=True``
gives the device array). ``shared(device_array)`` makes one, and so does
``shared(numpy_array)`` when ``config.device == 'opencl'`` (as Theano did for
its GPU); :func:`opencl_shared` makes one explicitly.
"""

from __future__ import annotations

import numpy as np

from theano_dag.config import config
from theano_dag.engines.basic import Container
from theano_dag.engines.opencl.context import get_context
from theano_dag.engines.opencl.values import DArr, from_cl_array, is_device_array, to_cl_array
from theano_dag.tensor.sharedvar import TensorSharedVariable, tensor_type_for
from theano_dag.tensor.type import ForeignArrayType

__all__ = [
    "DeviceInputType",
    "OpenCLSharedVariable",
    "opencl_shared",
    "opencl_shared_constructor",
    "to_device",
    "to_host",
]


class DeviceInputType(ForeignArrayType):
    """A tensor type that also accepts device arrays of the same dtype and rank.

    >>> import theano_dag.tensor as tt
    >>> t = DeviceInputType(tt.TensorType("float64", shape=(None,)))
    >>> t.filter([1, 2]).dtype
    dtype('float64')
    """

    kind, label = "device", "Device"
    is_foreign = staticmethod(is_device_array)

    def may_share_memory(self, a, b) -> bool:
        if is_device_array(a) or is_device_array(b):
            return (
                is_device_array(a)
                and is_device_array(b)
                and a.base_data.int_ptr == b.base_data.int_ptr
            )
        return self.tensor_type.may_share_memory(a, b)


def to_device(value, ctx=None):
    """Copy a numpy array to the device: a ``pyopencl.array.Array`` (counted as a transfer).

    Device arrays are returned as they are.
    """

    if is_device_array(value):
        return value
    ctx = ctx or get_context()
    arr = np.asarray(value, order="C")
    if arr.dtype == np.float16 or arr.dtype.kind not in "biuf":
        raise TypeError(f"to_device: arrays of dtype {arr.dtype} cannot live on the device")
    buf = ctx.upload(arr)
    return to_cl_array(DArr(buf, 0, arr.shape, arr.dtype), ctx.queue)


def to_host(value, ctx=None) -> np.ndarray:
    """Copy a device array to a new numpy array (counted as a transfer); numpy passes through."""

    if not is_device_array(value):
        return value
    ctx = ctx or get_context()
    return ctx.to_host(from_cl_array(value))


def _tensor_type_of(value, broadcastable=None, shape=None):
    dummy = np.empty((0,) * value.ndim, dtype=value.dtype)
    return tensor_type_for(dummy, broadcastable=broadcastable, shape=shape)


class OpenCLSharedVariable(TensorSharedVariable):
    """A shared tensor stored on the OpenCL device (see the module docstring)."""

    def __init__(self, type, value, strict=False, allow_downcast=None, container=None, name=None):
        if container is None:
            dev = to_device(value)
            container = Container(
                DeviceInputType(type),
                [dev],
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
        value = self.container.value
        if is_device_array(value):
            if return_internal_type:
                return value if borrow else value.copy()
            return to_host(value)
        return value if borrow else np.array(value, copy=True)

    def set_value(self, new_value, borrow=False):
        if is_device_array(new_value):
            self.container.value = new_value if borrow else new_value.copy()
        else:
            with self.naming_errors():
                value = self.type.filter(new_value)
            self.container.value = to_device(value)


def opencl_shared(
    value, name=None, strict=False, allow_downcast=None, broadcastable=None, shape=None
):
    """A shared variable whose value lives on the OpenCL device.

    ``value``: a numpy array or number (copied to the device) or a device array
    (used as it is).
    """
    if not is_device_array(value):
        value = np.asarray(value)
        if value.dtype.kind not in "biuf" or value.dtype == np.float16:
            raise TypeError(
                f"opencl_shared: arrays of dtype {value.dtype} cannot live on " "the device"
            )
    ttype = _tensor_type_of(value, broadcastable, shape)
    return OpenCLSharedVariable(
        type=ttype, value=value, strict=strict, allow_downcast=allow_downcast, name=name
    )


def opencl_shared_constructor(
    value,
    name=None,
    strict=False,
    allow_downcast=None,
    borrow=False,
    broadcastable=None,
    shape=None,
):
    """The ``shared()`` constructor for device arrays, and for numpy arrays when
    ``config.device == 'opencl'``; raises TypeError to let other constructors try."""
    if is_device_array(value) or (
        config.device == "opencl"
        and isinstance(value, np.ndarray)
        and value.dtype.kind in "biuf"
        and value.dtype != np.float16
    ):
        return opencl_shared(
            value,
            name=name,
            strict=strict,
            allow_downcast=allow_downcast,
            broadcastable=broadcastable,
            shape=shape,
        )
    raise TypeError("not an OpenCL value")
