"""``theano.tensor.nnet.conv``: Theano's original 2-D convolution API,
``conv2d(input, filters, image_shape, filter_shape, border_mode, subsample)``, a thin
layer over the abstract convolution (``abstract_conv.conv2d``: same values, the same
flipped-filter convolution). Theano's ``ConvOp`` itself is not provided.

>>> import numpy as np
>>> from theano_dag import tensor as tt
>>> x, w = tt.dtensor4("x"), tt.dtensor4("w")
>>> conv2d(x, w, border_mode="full").eval({x: np.ones((1, 1, 2, 2)),
...                                         w: np.ones((1, 1, 2, 2))})[0, 0]
array([[1., 2., 1.],
       [2., 4., 2.],
       [1., 2., 1.]])
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Constant
from theano_dag.tensor import basic as tb
from theano_dag.tensor.nnet import abstract_conv
from theano_dag.tensor.nnet.abstract_conv import get_conv_output_shape, imported_scipy_signal
from theano_dag.tensor.shape import specify_shape

__all__ = ["ConvShapeError", "conv2d", "get_conv_output_shape", "imported_scipy_signal"]


class ConvShapeError(ValueError, AssertionError):
    """Shape hints that contradict each other (Theano's ConvOp asserted them)."""


_IGNORED = {"unroll_batch", "unroll_kern", "unroll_patch", "openmp", "verbose", "version"}


def conv2d(
    input,  # noqa: A002
    filters,
    image_shape=None,
    filter_shape=None,
    border_mode="valid",
    subsample=(1, 1),
    **kargs,
):
    """2-D convolution of ``(batch, channels, rows, cols)`` images with ``(filters,
    channels, rows, cols)`` kernels; ``border_mode`` is ``'valid'`` or ``'full'``.
    ``image_shape``/``filter_shape`` are optional shape hints; ConvOp's tuning
    arguments (``unroll_batch``, ``unroll_kern``, ``unroll_patch``, ``openmp``,
    ``verbose``, ``version``) are accepted and ignored.

    >>> from theano_dag import tensor as tt
    >>> conv2d(tt.dtensor4(), tt.dtensor4(), image_shape=(2, 1, 5, 5),
    ...        filter_shape=(3, 1, 2, 2)).ndim
    4
    """
    unknown = set(kargs) - _IGNORED
    if unknown:
        raise TypeError(f"conv2d: unexpected keyword arguments {sorted(unknown)}")
    if border_mode not in ("valid", "full"):
        raise ValueError(f"conv2d: border_mode must be 'valid' or 'full', got {border_mode!r}")
    image_shape = _hint(image_shape, "image_shape")
    filter_shape = _hint(filter_shape, "filter_shape")
    if image_shape is not None and filter_shape is not None:
        channels, expected = image_shape[1], filter_shape[1]
        if channels is not None and expected is not None and channels != expected:
            raise ConvShapeError(
                f"conv2d: image_shape {image_shape} has {channels} channels but "
                f"filter_shape {filter_shape} expects {expected}"
            )
    # ConvOp checks the values against the hints when it runs (a ValueError): so do we.
    if image_shape is not None:
        input = specify_shape(tb.as_tensor_variable(input), image_shape)  # noqa: A001
    if filter_shape is not None:
        filters = specify_shape(tb.as_tensor_variable(filters), filter_shape)
    return abstract_conv.conv2d(
        input,
        filters,
        input_shape=image_shape,
        filter_shape=filter_shape,
        border_mode=border_mode,
        subsample=subsample,
    )


def _hint(shape, name):
    """A shape hint as a 4-tuple of ints and Nones; its entries may be constant tensors
    (a non-constant one raises ``NotScalarConstantError``, as in Theano)."""
    if shape is None:
        return None
    if isinstance(shape, Constant):
        shape = list(np.asarray(shape.data))
    shape = tuple(
        None if s is None else int(tb.get_scalar_constant_value(tb.as_tensor_variable(s)))
        for s in shape
    )
    if len(shape) != 4:
        raise ValueError(f"conv2d: {name} must have 4 entries, got {shape}")
    return shape
