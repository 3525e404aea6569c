"""``theano.tensor.signal.conv``: 2-D convolution of single images or stacks of
images (matrices or 3-d tensors) with single filters or stacks of filters.

>>> import numpy as np
>>> from theano_dag import tensor as tt
>>> x, w = tt.dmatrix("x"), tt.dmatrix("w")
>>> conv2d(x, w).eval({x: np.arange(9.0).reshape(3, 3), w: np.array([[0.0, 1.0]])})
array([[0., 1.],
       [3., 4.],
       [6., 7.]])
"""

from __future__ import annotations

from theano_dag.tensor import basic as tb
from theano_dag.tensor.nnet import conv as nnet_conv
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["conv2d"]


def conv2d(
    input,  # noqa: A002
    filters,
    image_shape=None,
    filter_shape=None,
    border_mode="valid",
    subsample=(1, 1),
    **kargs,
):
    """Convolve ``input`` (``([images,] rows, cols)``) with ``filters``
    (``([filters,] rows, cols)``); the result is ``([images,] [filters,] rows, cols)``,
    the axes of a single image or filter left out. ``border_mode``: ``'valid'`` or
    ``'full'``; the shape hints and ``kargs`` are as ``nnet.conv.conv2d``'s.

    >>> from theano_dag import tensor as tt
    >>> conv2d(tt.dtensor3(), tt.dtensor3()).ndim, conv2d(tt.dmatrix(), tt.dtensor3()).ndim
    (4, 3)
    """
    input, filters = as_tensor_variable(input), as_tensor_variable(filters)  # noqa: A001
    if input.ndim not in (2, 3) or filters.ndim not in (2, 3):
        raise TypeError(
            "signal.conv2d: input and filters must be matrices or 3-d tensors, got "
            f"{input.type} and {filters.type}"
        )
    image_shape4 = filter_shape4 = None
    if image_shape is not None and filter_shape is not None:
        batch = image_shape[0] if input.ndim == 3 else 1
        nkern = filter_shape[0] if filters.ndim == 3 else 1
        image_shape4 = (batch, 1) + tuple(image_shape[-2:])
        filter_shape4 = (nkern, 1) + tuple(filter_shape[-2:])
    # One channel: images become (batch, 1, rows, cols), filters (nkern, 1, rows, cols).
    x4 = input.dimshuffle(0, "x", 1, 2) if input.ndim == 3 else input.dimshuffle("x", "x", 0, 1)
    w4 = (
        filters.dimshuffle(0, "x", 1, 2)
        if filters.ndim == 3
        else filters.dimshuffle("x", "x", 0, 1)
    )
    out = nnet_conv.conv2d(x4, w4, image_shape4, filter_shape4, border_mode, subsample, **kargs)
    # Drop the axis of a single image and/or a single filter.
    if input.ndim == 2 and filters.ndim == 2:
        return out[0, 0]
    if input.ndim == 2:
        return out[0]
    if filters.ndim == 2:
        return out[:, 0]
    return tb.as_tensor_variable(out)
