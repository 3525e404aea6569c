"""Device values: a buffer, a byte offset, a shape and byte strides (a strided view).

The engine passes :class:`DArr` between kernels: it is what numpy's ndarray is
to the CPU engine, without pyopencl's per-array bookkeeping. At the edges it
becomes a ``pyopencl.array.Array`` (``to_cl_array``) or comes from one
(``from_cl_array``), sharing the same buffer.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DArr", "c_strides", "is_device_array", "from_cl_array", "to_cl_array"]


def c_strides(shape, itemsize: int) -> tuple:
    """Byte strides of a C-contiguous array of ``shape``.

    >>> c_strides((2, 3), 4)
    (12, 4)
    """
    out = []
    acc = itemsize
    for s in reversed(shape):
        out.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(out))


class DArr:
    """A strided view of device memory: ``data`` (a cl.Buffer), ``offset`` and ``strides``
    in bytes, ``shape``, ``dtype``.

    >>> a = DArr(None, 0, (2, 3), np.dtype("float32"))
    >>> a.strides, a.size, a.nbytes, a.is_c_contiguous
    ((12, 4), 6, 24, True)
    >>> a.transpose((1, 0)).is_c_contiguous
    False
    """

    __slots__ = ("data", "offset", "shape", "strides", "dtype")

    def __init__(self, data, offset, shape, dtype, strides=None):
        self.data = data
        self.offset = int(offset)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.strides = (
            c_strides(self.shape, self.dtype.itemsize) if strides is None else tuple(strides)
        )

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def is_c_contiguous(self) -> bool:
        if self.size <= 1:
            return True
        expect = self.dtype.itemsize
        for s, st in zip(reversed(self.shape), reversed(self.strides)):
            if s != 1 and st != expect:
                return False
            expect *= s
        return True

    @property
    def elem_offset(self) -> int:
        """The offset in elements (kernels index typed pointers)."""
        q, r = divmod(self.offset, self.dtype.itemsize)
        if r:
            raise ValueError(
                f"device array offset {self.offset} is not a multiple of its item size "
                f"{self.dtype.itemsize}"
            )
        return q

    def elem_strides(self) -> tuple:
        """Strides in elements (0 along length-1 dimensions, which kernels broadcast)."""
        it = self.dtype.itemsize
        out = []
        for s, st in zip(self.shape, self.strides):
            if s == 1:
                out.append(0)
                continue
            q, r = divmod(st, it)
            if r:
                raise ValueError(f"device array stride {st} is not a multiple of {it}")
            out.append(q)
        return tuple(out)

    def view(self, shape, strides, offset=None) -> DArr:
        """Another view of the same buffer."""
        # Made without __init__: a loop makes a few views a step, of checked values.
        d = object.__new__(DArr)
        d.data = self.data
        d.offset = self.offset if offset is None else int(offset)
        d.shape = tuple([int(s) for s in shape])
        d.strides = tuple(strides)
        d.dtype = self.dtype
        return d

    def transpose(self, axes) -> DArr:
        return self.view([self.shape[a] for a in axes], [self.strides[a] for a in axes])

    def __repr__(self):
        return f"DArr(shape={self.shape}, dtype={self.dtype}, strides={self.strides})"


def is_device_array(value) -> bool:
    """True for a ``pyopencl.array.Array`` (checked without importing pyopencl).

    >>> is_device_array(np.zeros(2))
    False
    """
    mod = type(value).__module__ or ""
    return mod.startswith("pyopencl") and hasattr(value, "base_data")


def from_cl_array(a) -> DArr:
    """The DArr viewing the memory of a ``pyopencl.array.Array``."""
    return DArr(a.base_data, a.offset, a.shape, a.dtype, a.strides)


def to_cl_array(d: DArr, queue):
    """A ``pyopencl.array.Array`` on the same memory as ``d`` (no copy)."""
    import pyopencl.array as cla

    return cla.Array(queue, d.shape, d.dtype, strides=d.strides, data=d.data, offset=d.offset)
