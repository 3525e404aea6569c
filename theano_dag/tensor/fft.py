"""Real-input fast Fourier transforms (``theano.tensor.fft``): ``rfft`` and ``irfft``.

As in Theano, complex spectra are held in real tensors: a last axis of length 2 holds the
real and the imaginary parts. ``rfft`` of an ``(m, ..., n)`` array transforms all axes but
the first (the batch) and gives ``(m, ..., n//2 + 1, 2)``; ``irfft`` inverts it. Both are
differentiable, so they sit inside real-valued models (spectral layers, convolutions by
products of spectra). The transforms run numpy's ``fft`` on the host on every engine.

>>> import numpy as np
>>> from theano_dag import function, tensor as tt
>>> from theano_dag.tensor import fft
>>> x = tt.dmatrix("x")
>>> spectrum = fft.rfft(x)
>>> f = function([x], [spectrum, fft.irfft(spectrum)])
>>> v = np.arange(8.0).reshape(1, 8)
>>> s, back = f(v)
>>> s.shape, np.allclose(s[..., 0] + 1j * s[..., 1], np.fft.rfft(v)), np.allclose(back, v)
((1, 5, 2), True, True)
"""

from __future__ import annotations

import numpy as np

from theano_dag.config import config
from theano_dag.graph.basic import Apply
from theano_dag.graph.null_type import disconnected_type
from theano_dag.graph.op import Op
from theano_dag.tensor import math as tm
from theano_dag.tensor.basic import cast
from theano_dag.tensor.subtensor import set_subtensor
from theano_dag.tensor.type import TensorType, discrete_dtypes, integer_dtypes
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["RFFTOp", "IRFFTOp", "rfft_op", "irfft_op", "rfft", "irfft"]

NORMS = (None, "ortho", "no_norm")


def _real_input(a, who):
    a = as_tensor_variable(a)
    if a.dtype.startswith("complex"):
        raise TypeError(
            f"{who}: the input must be real (a complex spectrum is held in a last axis of "
            f"length 2), got {a.type}"
        )
    if a.dtype in discrete_dtypes:
        a = cast(a, config.floatX)  # numpy transforms integers in floats too
    return a


def _lengths(s, who):
    s = as_tensor_variable(s)
    if s.dtype not in integer_dtypes or s.ndim != 1:
        raise TypeError(
            f"{who}: the lengths of the transformed axes must be an integer vector, "
            f"got {s.type}"
        )
    return s


def _last_axes(ndim, lengths):
    return tuple(range(ndim - len(lengths), ndim))


def _inner_frequencies(g, s):
    """The index of the frequencies of ``g`` (a spectrum, last axis real/imaginary) that
    stand for two of the full transform (a positive and its negative frequency): all but
    the first and, for an even length, the last."""
    n = s[-1]
    return (slice(None),) * (g.ndim - 2) + (slice(1, n // 2 + n % 2), slice(None))


class RFFTOp(Op):
    """``numpy.fft.rfftn(a, s)`` over all axes but the first, the parts of each complex
    value along a new last axis; ``s`` is the vector of the transformed lengths.

    >>> from theano_dag import tensor as tt
    >>> rfft_op(tt.dtensor3("a")).type
    TensorType(float64, 4D)
    """

    __props__ = ()

    def make_node(self, a, s=None):
        a = _real_input(a, type(self).__name__)
        if a.ndim < 2:
            raise TypeError(
                f"{type(self).__name__}: input must have 2 dimensions or more, the first "
                f"the batch, got {a.type}"
            )
        s = _lengths(a.shape[1:] if s is None else s, type(self).__name__)
        out = TensorType(a.dtype, (False,) * (a.ndim + 1))
        return Apply(self, [a, s], [out()])

    def perform(self, node, inputs, output_storage):
        a, s = inputs
        lengths = tuple(int(n) for n in s)
        spectrum = np.fft.rfftn(a, s=lengths, axes=_last_axes(a.ndim, lengths))
        out = np.empty(spectrum.shape + (2,), dtype=node.outputs[0].dtype)
        out[..., 0], out[..., 1] = spectrum.real, spectrum.imag
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, shapes):
        a, s = node.inputs
        inner = [s[i] for i in range(a.ndim - 2)]
        return [(shapes[0][0], *inner, s[a.ndim - 2] // 2 + 1, 2)]

    def connection_pattern(self, node):
        return [[True], [False]]

    def grad(self, inputs, output_grads):
        (g,), s = output_grads, inputs[1]
        # The inverse transform counts each inner frequency twice (it stands for its
        # negative too): halve those so that irfft_op is the adjoint.
        idx = _inner_frequencies(g, s)
        g = set_subtensor(g[idx], g[idx] * 0.5)
        return [irfft_op(g, s), disconnected_type()]


class IRFFTOp(Op):
    """The unnormalized inverse of :class:`RFFTOp`: ``numpy.fft.irfftn`` times the number
    of points, from a spectrum whose last axis holds the real and imaginary parts.

    >>> from theano_dag import tensor as tt
    >>> irfft_op(tt.dtensor3("a")).type
    TensorType(float64, matrix)
    """

    __props__ = ()

    def make_node(self, a, s=None):
        a = _real_input(a, type(self).__name__)
        if a.ndim < 3:
            raise TypeError(
                f"{type(self).__name__}: input must have 3 dimensions or more, the first "
                f"the batch and the last the real and imaginary parts, got {a.type}"
            )
        if s is None:
            s = a.shape[1:-1]
            s = set_subtensor(s[-1], (s[-1] - 1) * 2)
        s = _lengths(s, type(self).__name__)
        out = TensorType(a.dtype, (False,) * (a.ndim - 1))
        return Apply(self, [a, s], [out()])

    def perform(self, node, inputs, output_storage):
        a, s = inputs
        lengths = tuple(int(n) for n in s)
        signal = np.fft.irfftn(
            a[..., 0] + 1j * a[..., 1], s=lengths, axes=_last_axes(a.ndim - 1, lengths)
        )
        output_storage[0][0] = (signal * np.prod(lengths)).astype(node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, shapes):
        a, s = node.inputs
        return [(shapes[0][0], *[s[i] for i in range(a.ndim - 2)])]

    def connection_pattern(self, node):
        return [[True], [False]]

    def grad(self, inputs, output_grads):
        (g,), s = output_grads, inputs[1]
        gf = rfft_op(g, s)
        # The adjoint of RFFTOp's halving: inner frequencies count twice.
        idx = _inner_frequencies(gf, s)
        return [set_subtensor(gf[idx], gf[idx] * 2), disconnected_type()]


rfft_op = RFFTOp()
irfft_op = IRFFTOp()


def _norm(norm):
    if norm not in NORMS:
        raise ValueError(f"Invalid value {norm!r} for norm, must be None, 'ortho' or 'no_norm'")
    return norm


def rfft(inp, norm=None):
    """The FFT of the real ``(m, ..., n)`` tensor ``inp`` over all axes but the first:
    ``(m, ..., n//2 + 1, 2)``, the last axis the real and imaginary parts.

    ``norm``: None or ``'no_norm'`` leave the forward transform unscaled (numpy's
    default), ``'ortho'`` divides it by ``sqrt(N)`` (N the number of points of one
    transform), so that it is unitary.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> out = rfft(x, norm="ortho").eval({x: np.ones((1, 4))})
    >>> out[0, :, 0].tolist(), out[0, :, 1].tolist()
    ([2.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    """
    inp = _real_input(inp, "rfft")
    s = inp.shape[1:]
    out = rfft_op(inp, s)
    if _norm(norm) == "ortho":
        out = out / tm.sqrt(cast(s.prod(), inp.dtype))
    return out


def irfft(inp, norm=None, is_odd=False):
    """The real inverse FFT of the ``(m, ..., n//2 + 1, 2)`` tensor ``inp`` (spectra, the
    last axis the real and imaginary parts): ``(m, ..., n)`` with ``n`` even, or odd
    (``2 * (n//2) + 1``) when ``is_odd``.

    ``norm``: None divides by the number of points N (numpy's default), ``'ortho'`` by
    ``sqrt(N)``, ``'no_norm'`` leaves the transform unscaled.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> spectrum = tt.dtensor3("spectrum")
    >>> v = np.zeros((1, 3, 2)); v[0, 0, 0] = 4.0
    >>> irfft(spectrum).eval({spectrum: v}).tolist()
    [[1.0, 1.0, 1.0, 1.0]]
    >>> irfft(spectrum, is_odd=True).eval({spectrum: v}).shape
    (1, 5)
    """
    if is_odd not in (True, False):
        raise ValueError(f"Invalid value {is_odd!r} for is_odd, must be True or False")
    inp = _real_input(inp, "irfft")
    s = inp.shape[1:-1]
    s = set_subtensor(s[-1], (s[-1] - 1) * 2 + int(is_odd))
    out = irfft_op(inp, s)
    norm = _norm(norm)
    if norm is None:
        out = out / cast(s.prod(), inp.dtype)
    elif norm == "ortho":
        out = out / tm.sqrt(cast(s.prod(), inp.dtype))
    return out
