"""``theano.tensor.nnet.corr``: Theano's 2-D correlation ops (``CorrMM`` and its
gradients) as the abstract convolution ops without the filter flip. Theano runs them as
C code (im2col + GEMM); here they are ``AbstractConv2d`` nodes that correlate, with the
same values and gradients, compiled like any convolution.

>>> import numpy as np
>>> from theano_dag import tensor as tt
>>> x, w = tt.dtensor4("x"), tt.dtensor4("w")
>>> CorrMM()(x, w).eval({x: np.arange(4.0).reshape(1, 1, 2, 2),
...                      w: np.array([[[[1.0, 0.0], [0.0, 0.0]]]])})
array([[[[0.]]]])
"""

from __future__ import annotations

from theano_dag.tensor import basic as tb
from theano_dag.tensor.nnet.abstract_conv import (
    AbstractConv2d,
    AbstractConv2d_gradInputs,
    AbstractConv2d_gradWeights,
    get_conv_gradinputs_shape,
    get_conv_gradweights_shape,
)
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["CorrMM", "CorrMM_gradWeights", "CorrMM_gradInputs"]


class CorrelationParams:
    """Theano's ``BaseCorrMM`` parameters: the abstract convolution's, with
    ``filter_flip`` always False (a correlation)."""

    def __init__(
        self,
        border_mode="valid",
        subsample=None,
        filter_dilation=None,
        num_groups=1,
        unshared=False,
        filter_flip=False,
        **hints,
    ):
        if filter_flip:
            raise ValueError(f"{type(self).__name__}: a correlation never flips its filters")
        super().__init__(
            border_mode=border_mode,
            subsample=subsample,
            filter_flip=False,
            filter_dilation=filter_dilation,
            num_groups=num_groups,
            **({"unshared": True} if unshared else {}),  # (2-D only: the 3-D Ops refuse it)
            **hints,
        )


def _spatial(var, convdim):
    return [tb.shape_i(var, 2 + d) for d in range(convdim)]


def _default_shape(op, shape_of, known, topgrad, why):
    """The spatial shape ``shape_of`` (a conv shape helper) works out of ``known``'s and
    ``topgrad``'s when none is given; a ValueError where it is ambiguous (``why``)."""
    known, topgrad = as_tensor_variable(known), as_tensor_variable(topgrad)
    n = op.convdim
    shape = shape_of(
        [None, None, *_spatial(known, n)],
        [None, None, *_spatial(topgrad, n)],
        op.border_mode,
        op.subsample,
        op.filter_dilation,
    )[2:]
    if any(s is None for s in shape):
        raise ValueError(f"{op}: shape must be given when {why}")
    return tb.stack(shape)


def default_weights_shape(op, img, topgrad):
    """The filters' spatial shape a gradWeights op computes when none is given (stride
    1 and no ``'half'`` borders; else a ValueError, as the shape is ambiguous)."""
    why = "subsample is not 1 or border_mode is 'half'"
    return _default_shape(op, get_conv_gradweights_shape, img, topgrad, why)


def default_inputs_shape(op, kern, topgrad):
    """The images' spatial shape a gradInputs op computes when none is given (stride 1;
    else a ValueError, as the shape is ambiguous)."""
    why = "subsample is not 1"
    return _default_shape(op, get_conv_gradinputs_shape, kern, topgrad, why)


class CorrMM(CorrelationParams, AbstractConv2d):
    """2-D correlation of ``(batch, channels, rows, cols)`` images with ``(filters,
    channels / num_groups, rows, cols)`` kernels (Theano's op: no filter flip)."""


class CorrMM_gradWeights(CorrelationParams, AbstractConv2d_gradWeights):  # noqa: N801
    """Gradient of ``CorrMM`` with respect to the kernels: inputs ``(img, topgrad,
    shape=None)``, ``shape`` the kernels' spatial shape (computed when unambiguous)."""

    def make_node(self, img, topgrad, shape=None):
        if shape is None:
            shape = default_weights_shape(self, img, topgrad)
        return super().make_node(img, topgrad, shape)


class CorrMM_gradInputs(CorrelationParams, AbstractConv2d_gradInputs):  # noqa: N801
    """Gradient of ``CorrMM`` with respect to the images: inputs ``(kern, topgrad,
    shape=None)``, ``shape`` the images' spatial shape (computed when unambiguous)."""

    def make_node(self, kern, topgrad, shape=None):
        if shape is None:
            shape = default_inputs_shape(self, kern, topgrad)
        return super().make_node(kern, topgrad, shape)
