"""Theano's logistic-regression tutorial (doc/tutorial/examples.txt, "A Real Example:
Logistic Regression"), with only its imports changed: the sigmoid written out as
``1 / (1 + exp(-x))`` and the cross-entropy written by hand. With ``w = randn(784)``
the logits reach +-100, where ``1 - p_1`` rounds to 0: the cost and its gradient are
finite only if the stable forms are found in both."""

import numpy as np
import pytest

# The tutorial's code from its data to its compiled functions, as Theano 1.1.2's
# documentation prints it (with 10 training steps; ``T.dot`` is the documentation's,
# ``T`` imported like ``tt``). The test below runs the training loop.
TUTORIAL = """
rng = numpy.random

N = 400                                   # training sample size
feats = 784                               # number of input variables

# generate a dataset: D = (input_values, target_class)
D = (rng.randn(N, feats), rng.randint(size=N, low=0, high=2))
training_steps = 10

# Declare Theano symbolic variables
x = tt.dmatrix("x")
y = tt.dvector("y")

w = theano.shared(rng.randn(feats), name="w")
b = theano.shared(0., name="b")

# Construct Theano expression graph
p_1 = 1 / (1 + tt.exp(-T.dot(x, w) - b))        # Probability that target = 1
prediction = p_1 > 0.5                          # The prediction thresholded
xent = -y * tt.log(p_1) - (1-y) * tt.log(1-p_1) # Cross-entropy loss function
cost = xent.mean() + 0.01 * (w ** 2).sum()      # The cost to minimize
gw, gb = tt.grad(cost, [w, b])                  # Compute the gradient of the cost

# Compile
train = theano.function(
          inputs=[x,y],
          outputs=[prediction, xent],
          updates=((w, w - 0.1 * gw), (b, b - 0.1 * gb)))
predict = theano.function(inputs=[x], outputs=prediction)
"""


def run_tutorial(package, seed=1234):
    """The tutorial with ``package`` as ``theano``: the cost before each training step,
    and the cross-entropies ``train`` returned."""
    ns = {}
    exec(
        f"import numpy\nimport {package} as theano\nimport {package}.tensor as tt\n"
        f"import {package}.tensor as T\n",
        ns,
    )
    np.random.seed(seed)
    exec(TUTORIAL, ns)
    cost_of = ns["theano"].function([ns["x"], ns["y"]], ns["cost"])
    costs, xents = [], []
    for _ in range(ns["training_steps"]):
        costs.append(float(cost_of(*ns["D"])))
        _, err = ns["train"](*ns["D"])
        xents.append(err)
    return np.array(costs), xents


def test_tutorial_trains():
    costs, xents = run_tutorial("theano_dag")
    assert np.all(np.isfinite(costs)), costs
    assert np.all(np.diff(costs) < 0), costs
    assert all(np.all(np.isfinite(e)) for e in xents)
    # the tutorial's logits (its first step) reach where 1 - p_1 rounds to 0 in float64
    rng = np.random.RandomState(1234)  # what numpy.random.seed(1234) gives the tutorial
    x = rng.randn(400, 784)
    rng.randint(size=400, low=0, high=2)
    assert np.abs(x @ rng.randn(784)).max() > 40


def test_tutorial_trains_as_pytensor_does():
    pytensor = pytest.importorskip("pytensor")
    ours, _ = run_tutorial("theano_dag")
    # PyTensor's Python linker: the same rewrites, nothing to compile
    with pytensor.config.change_flags(linker="py"):
        theirs, _ = run_tutorial("pytensor")
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
