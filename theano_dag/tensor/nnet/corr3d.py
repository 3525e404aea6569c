"""``theano.tensor.nnet.corr3d``: Theano's 3-D correlation ops (``Corr3dMM`` and its
gradients) as the abstract 3-D convolution ops without the filter flip (see
``theano_dag.tensor.nnet.corr``).

>>> import numpy as np
>>> from theano_dag import tensor as tt
>>> x, w = tt.dtensor5("x"), tt.dtensor5("w")
>>> Corr3dMM()(x, w).eval({x: np.ones((1, 1, 2, 2, 2)), w: np.ones((1, 1, 2, 2, 2))})
array([[[[[8.]]]]])
"""

from __future__ import annotations

from theano_dag.tensor.nnet.abstract_conv import (
    AbstractConv3d,
    AbstractConv3d_gradInputs,
    AbstractConv3d_gradWeights,
)
from theano_dag.tensor.nnet.corr import (
    CorrelationParams,
    default_inputs_shape,
    default_weights_shape,
)

__all__ = ["Corr3dMM", "Corr3dMMGradWeights", "Corr3dMMGradInputs"]


class Corr3dMM(CorrelationParams, AbstractConv3d):
    """3-D correlation of ``(batch, channels, d0, d1, d2)`` images with ``(filters,
    channels / num_groups, k0, k1, k2)`` kernels (no filter flip)."""


class Corr3dMMGradWeights(CorrelationParams, AbstractConv3d_gradWeights):
    """Gradient of ``Corr3dMM`` with respect to the kernels: ``(img, topgrad,
    shape=None)``."""

    def make_node(self, img, topgrad, shape=None):
        if shape is None:
            shape = default_weights_shape(self, img, topgrad)
        return super().make_node(img, topgrad, shape)


class Corr3dMMGradInputs(CorrelationParams, AbstractConv3d_gradInputs):
    """Gradient of ``Corr3dMM`` with respect to the images: ``(kern, topgrad,
    shape=None)``."""

    def make_node(self, kern, topgrad, shape=None):
        if shape is None:
            shape = default_inputs_shape(self, kern, topgrad)
        return super().make_node(kern, topgrad, shape)
