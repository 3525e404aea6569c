"""Real networks written once over a layer vocabulary: ResNet50, InceptionV3 and Owl's
MNIST convnet (with its training step), each runnable as a theano_dag graph
(:class:`TensorOps`) or eagerly in numpy (:class:`NumpyOps`), with He-initialised weights
from a fixed seed (nothing is downloaded).

>>> import numpy as np, theano_dag
>>> from theano_dag.models import resnet50, init_params, numpy_forward, tensor_forward
>>> params = init_params(resnet50, (1, 3, 32, 32))
>>> x, probs = tensor_forward(resnet50, params)
>>> images = np.random.default_rng(0).random((2, 3, 32, 32), dtype="float32")
>>> ours = theano_dag.function([x], probs)(images)
>>> ours.shape, bool(np.allclose(ours, numpy_forward(resnet50, params, images), atol=1e-5))
((2, 1000), True)
"""

from __future__ import annotations

from theano_dag.models.inception import inception_v3
from theano_dag.models.layers import BN, Net, NumpyOps, Params, ShapeOps, TensorOps
from theano_dag.models.mnist import (
    MNIST_SHAPE,
    mnist_convnet,
    mnist_numpy_step,
    mnist_training_step,
)
from theano_dag.models.resnet import resnet50
from theano_dag.tensor.type import TensorType

__all__ = [
    "BN",
    "MNIST_SHAPE",
    "NETWORKS",
    "Net",
    "NumpyOps",
    "Params",
    "ShapeOps",
    "TensorOps",
    "inception_v3",
    "init_params",
    "mnist_convnet",
    "mnist_numpy_step",
    "mnist_training_step",
    "numpy_forward",
    "resnet50",
    "tensor_forward",
]

# name -> (network function, image channels, the image side it was published for)
NETWORKS = {
    "resnet50": (resnet50, 3, 299),
    "inception_v3": (inception_v3, 3, 299),
    "mnist": (mnist_convnet, 1, 28),
}


def init_params(network, image_shape, seed=0, dtype="float32"):
    """Create the weights of ``network`` for images of ``image_shape`` (NCHW; only the
    channels matter, the weights do not depend on the image size) by following shapes
    alone: :class:`Params` holding He-initialised filters and dense weights from ``seed``
    and batch-norm statistics near (1, 0, 0, 1)."""
    params = Params(seed=seed, dtype=dtype, create=True)
    network(Net(ShapeOps(), params), tuple(image_shape))
    params.create = False
    return params


def numpy_forward(network, params, images):
    """Run ``network`` eagerly in numpy on ``images`` (Owl's "without graph")."""
    return network(Net(NumpyOps(), params), images)


def tensor_forward(network, params, weights="shared"):
    """The theano_dag graph of ``network``: ``(images, output)``, the images a 4-d input
    of the weights' dtype whose batch and image size are left free."""
    channels = next(a for n, a in params.arrays.items() if n.endswith(".w")).shape[1]
    x = TensorType(params.dtype.name, shape=(None, channels, None, None))("images")
    return x, network(Net(TensorOps(weights), params), x)
