"""The complex discrete Fourier transform along one axis (``theano.tensor.fourier``).

``fft(a, n, axis)`` is ``numpy.fft.fft(a, n, axis)``: complex128 always, the axis
cropped or zero-padded to ``n`` points. Theano kept it beside the real-input transforms
of ``theano.tensor.fft``; its gradient (with a constant ``axis``) is the adjoint
transform, in the convention of complex gradients of ``theano_dag.scalar``
(``dC/d(re) + 1j * dC/d(im)``). It runs numpy on the host on every engine.

>>> import numpy as np
>>> from theano_dag import function, tensor as tt
>>> a = tt.dmatrix("a")
>>> f = function([a], fft(a, n=4, axis=0))
>>> v = np.arange(6.0).reshape(3, 2)
>>> np.allclose(f(v), np.fft.fft(v, 4, 0)), f(v).dtype
(True, dtype('complex128'))
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Apply, Constant
from theano_dag.graph.null_type import disconnected_type
from theano_dag.graph.op import Op
from theano_dag.tensor import math as tm
from theano_dag.tensor.basic import cast
from theano_dag.tensor.type import TensorType, integer_dtypes
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["Fourier", "fft"]


def _scalar_int(v, what, who):
    v = as_tensor_variable(v)
    if v.dtype not in integer_dtypes:
        raise TypeError(f"{who}: {what} must be of type integer, got {v.type}")
    if v.ndim != 0:
        raise TypeError(f"{who}: {what} must be a scalar, got {v.type}")
    return v


def _out_shape(shape, axis, length):
    """``shape`` with ``shape[axis]`` replaced by ``length`` (``axis`` may be symbolic)."""
    if isinstance(axis, Constant):
        k = int(axis.data)
        return tuple(length if d == k else s for d, s in enumerate(shape))
    return tuple(tm.switch(tm.eq(axis, d), length, s) for d, s in enumerate(shape))


def _broadcastable(a, axis):
    if isinstance(axis, Constant):
        k = int(axis.data)
        return tuple(b and d != k for d, b in enumerate(a.type.broadcastable))
    return (False,) * a.ndim


class Fourier(Op):
    """``numpy.fft.fft(a, n, axis)`` with symbolic ``n`` and ``axis`` (Theano's op;
    ``n`` None is the length of the axis, ``axis`` None the last).

    >>> from theano_dag import tensor as tt
    >>> Fourier()(tt.fmatrix("a"), None, 0).type
    TensorType(complex128, matrix)
    """

    __props__ = ()

    def make_node(self, a, n, axis):
        who = type(self).__name__
        a = as_tensor_variable(a)
        if a.ndim < 1:
            raise TypeError(f"{who}: input must be an array, not a scalar")
        axis = _scalar_int(a.ndim - 1 if axis is None else axis, "the transformed axis", who)
        if isinstance(axis, Constant) and not 0 <= int(axis.data) < a.ndim:
            raise TypeError(
                f"{who}: index of the transformed axis must be a scalar not smaller than 0 "
                f"and smaller than dimension of array ({a.ndim}), got {axis.data}"
            )
        n = _scalar_int(a.shape[axis] if n is None else n, "length of the transformed axis", who)
        if isinstance(n, Constant) and int(n.data) < 1:
            raise TypeError(
                f"{who}: length of the transformed axis must be a strictly positive scalar, "
                f"got {n.data}"
            )
        out = TensorType("complex128", _broadcastable(a, axis))
        return Apply(self, [a, n, axis], [out()])

    def perform(self, node, inputs, output_storage):
        a, n, axis = inputs
        output_storage[0][0] = np.fft.fft(a, n=int(n), axis=int(axis)).astype("complex128")

    def infer_shape(self, fgraph, node, shapes):
        _, n, axis = node.inputs
        return [_out_shape(shapes[0], axis, n)]

    def connection_pattern(self, node):
        return [[True], [False], [False]]

    def grad(self, inputs, output_grads):
        a, n, axis = inputs
        if not isinstance(axis, Constant):
            raise NotImplementedError(
                f"{type(self).__name__}: gradient is currently implemented only for axis "
                "being a constant"
            )
        g = FourierAdjoint()(output_grads[0], a.shape[axis], n, axis)
        if not a.dtype.startswith("complex"):
            g = tm.real(g)  # a real input moves along the real axis only
        return [cast(g, a.dtype), disconnected_type(), disconnected_type()]


class FourierAdjoint(Op):
    """The adjoint of :class:`Fourier` (its gradient): ``n * ifft(g, n, axis)``, the
    axis then cropped or zero-padded back to the input's ``length``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> g = tt.zvector("g")
    >>> FourierAdjoint()(g, 2, 4, 0).eval({g: np.ones(4, dtype=complex)}).tolist()
    [(4+0j), 0j]
    """

    __props__ = ()

    def make_node(self, g, length, n, axis):
        g = as_tensor_variable(g)
        who = type(self).__name__
        length, n, axis = (
            _scalar_int(v, what, who) for v, what in ((length, "length"), (n, "n"), (axis, "axis"))
        )
        out = TensorType("complex128", _broadcastable(g, axis))
        return Apply(self, [g, length, n, axis], [out()])

    def perform(self, node, inputs, output_storage):
        g, length, n, axis = inputs
        length, n, axis = int(length), int(n), int(axis)
        # sum_k g[k] exp(+2 pi i j k / n) for the input's j < length; inputs the crop
        # dropped (j >= n) have no effect: zero.
        full = np.fft.ifft(g, n=n, axis=axis) * n
        out = np.zeros(g.shape[:axis] + (length,) + g.shape[axis + 1 :], dtype="complex128")
        keep = min(length, n)
        index = (slice(None),) * axis + (slice(0, keep),)
        out[index] = full[index]
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, shapes):
        _, length, _, axis = node.inputs
        return [_out_shape(shapes[0], axis, length)]

    def connection_pattern(self, node):
        return [[True], [False], [False], [False]]

    def grad(self, inputs, output_grads):
        g, length, n, axis = inputs
        # The adjoint of the adjoint is the transform, cropped or padded to n.
        return [
            cast(fft(output_grads[0], n, axis), g.dtype),
            disconnected_type(),
            disconnected_type(),
            disconnected_type(),
        ]


fft = Fourier()
