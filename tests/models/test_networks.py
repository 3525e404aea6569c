"""The networks of theano_dag.models run on the reference, CPU and OpenCL engines and
match the same network run eagerly in numpy (small images: the weights do not depend on
the image size, and the published 299x299 runs in benchmarks/networks.py)."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
from theano_dag.compile.mode import Mode
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.models import (
    NETWORKS,
    Net,
    NumpyOps,
    Params,
    ShapeOps,
    TensorOps,
    inception_v3,
    init_params,
    mnist_convnet,
    mnist_numpy_step,
    mnist_training_step,
    numpy_forward,
    resnet50,
    tensor_forward,
)

OCL_OK, OCL_WHY = opencl_available()
ENGINES = [
    "py",
    "cpu",
    pytest.param("opencl", marks=pytest.mark.skipif(not OCL_OK, reason=f"no OpenCL: {OCL_WHY}")),
]
# the smallest images each network takes
SMALL = {"resnet50": 32, "inception_v3": 75, "mnist": 28}


def _images(channels, side, batch=2, dtype="float32", seed=1):
    return np.random.default_rng(seed).random((batch, channels, side, side)).astype(dtype)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", ["resnet50", "inception_v3", "mnist"])
def test_network_matches_numpy_eager(name, engine):
    network, channels, _ = NETWORKS[name]
    params = init_params(network, (1, channels, SMALL[name], SMALL[name]))
    images = _images(channels, SMALL[name])
    kw = {} if name == "mnist" else {"logits": True}
    expected = network(Net(NumpyOps(), params), images, **kw)
    x = tensor_forward(network, params)[0]
    logits = network(Net(TensorOps(), params), x, **kw)
    got = theano_dag.function([x], logits, mode=Mode(linker=engine))(images)
    assert got.shape == expected.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_probabilities_are_a_softmax_of_the_logits_in_float64():
    params = init_params(resnet50, (1, 3, 32, 32), dtype="float64")
    images = _images(3, 32, dtype="float64")
    x, probs = tensor_forward(resnet50, params, weights="constant")
    got = theano_dag.function([x], probs)(images)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got.sum(axis=1), 1.0)
    np.testing.assert_allclose(got, numpy_forward(resnet50, params, images), rtol=1e-10)


def test_published_shapes_and_weight_counts():
    counts = {}
    for name, (network, channels, side) in NETWORKS.items():
        params = init_params(network, (1, channels, side, side))
        # the running statistics are buffers, not weights, in the published counts
        counts[name] = sum(
            a.size for n, a in params.arrays.items() if not n.endswith((".mean", ".var"))
        )
        shapes = {n: a.shape for n, a in params.arrays.items()}
        if name == "resnet50":
            assert shapes["stem.w"] == (64, 3, 7, 7) and shapes["res5.2.c.w"] == (2048, 512, 1, 1)
            assert shapes["fc.w"] == (2048, 1000)
        if name == "inception_v3":  # the factorised 7x7 and the 1x3/3x1 bank
            assert shapes["mixed4.7x7_2.w"] == (128, 128, 1, 7)
            assert shapes["mixed4.7x7_3.w"] == (192, 128, 7, 1)
            assert shapes["mixed10.3x3_2b.w"] == (384, 384, 3, 1)
            assert shapes["fc.w"] == (2048, 1000)
    # the published sizes (InceptionV3 without its auxiliary classifier)
    assert counts == {"resnet50": 25_557_032, "inception_v3": 23_834_568, "mnist": 6_434_634}


def test_output_shapes_follow_the_published_grid():
    shape = resnet50(Net(ShapeOps(), init_params(resnet50, (1, 3, 8, 8))), (1, 3, 299, 299))
    assert shape == (1, 1000)
    params = Params(create=True)
    assert inception_v3(Net(ShapeOps(), params), (8, 3, 299, 299)) == (8, 1000)


def test_weights_are_he_initialised_from_the_seed():
    a = init_params(mnist_convnet, (1, 1, 28, 28), seed=3).arrays
    b = init_params(mnist_convnet, (1, 1, 28, 28), seed=3).arrays
    c = init_params(mnist_convnet, (1, 1, 28, 28), seed=4).arrays
    assert all(np.array_equal(a[n], b[n]) for n in a)
    assert not np.array_equal(a["fc1.w"], c["fc1.w"])
    assert abs(a["fc1.w"].std() - np.sqrt(2 / 6272)) < 1e-4
    assert abs(a["conv.w"].std() - np.sqrt(2 / 25)) < 0.02


def test_params_refuse_a_missing_weight():
    params = init_params(mnist_convnet, (1, 1, 28, 28))
    with pytest.raises(KeyError, match="no weight named 'stem.w'"):
        resnet50(Net(NumpyOps(), params), np.zeros((1, 3, 32, 32), "float32"))


@pytest.mark.parametrize("engine", ENGINES)
def test_mnist_training_step_matches_the_hand_written_numpy_step(engine):
    ours = init_params(mnist_convnet, (1, 1, 28, 28), dtype="float64")
    theirs = init_params(mnist_convnet, (1, 1, 28, 28), dtype="float64")
    rng = np.random.default_rng(0)
    net = Net(TensorOps(), ours)
    inputs, loss, updates = mnist_training_step(net, lr=0.05)
    step = theano_dag.function(inputs, loss, updates=updates, mode=Mode(linker=engine))
    for _ in range(2):
        images = rng.random((4, 1, 28, 28))
        labels = np.eye(10)[rng.integers(0, 10, 4)]
        np.testing.assert_allclose(
            step(images, labels), mnist_numpy_step(theirs, images, labels, 0.05)
        )
    for name, shared in net.weights.items():
        np.testing.assert_allclose(shared.get_value(), theirs.arrays[name], rtol=1e-9, atol=1e-12)
