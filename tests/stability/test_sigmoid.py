"""Stability corpus: the sigmoid, softplus and binary cross-entropy family, written as
textbooks write them (``1 / (1 + exp(-x))``, ``log(1 - sigmoid(x))``, the cross-entropy
of a sigmoid), at logits where ``exp`` overflows and ``1 - sigmoid`` rounds to 0."""

import mpmath
import numpy as np
import pytest
from corpus import ENGINE_PARAMS, FLOATS, check, elementwise

import theano_dag.tensor as tt
from theano_dag.tensor import nnet

#: Logits from where exp overflows in float32 (90) and float64 (800, 1000) to where
#: sigmoid is plain arithmetic.
LOGITS = np.array([-1000.0, -800.0, -90.0, -30.0, -5.0, 0.0, 0.5, 5.0, 30.0, 90.0, 800.0, 1000.0])
#: Logits whose exp is finite in float32.
IN_RANGE = np.array([-1000.0, -30.0, -5.0, 0.0, 0.5, 5.0, 30.0, 80.0])
#: Targets of a cross-entropy, one per logit of ``LOGITS``.
TARGETS = np.array([0.0, 1.0, 0.3, 1.0, 0.0, 0.5, 1.0, 0.2, 0.0, 1.0, 0.7, 0.0])


def mp_sigmoid(x):
    return 1 / (1 + mpmath.exp(-x))


def mp_log_sigmoid(x):
    return -mpmath.log1p(mpmath.exp(-x))  # log(1 - sigmoid(x)) is mp_log_sigmoid(-x)


def mp_xent(z, t):
    return -(t * mp_log_sigmoid(z) + (1 - t) * mp_log_sigmoid(-z))


def written_sigmoid(x):
    return 1 / (1 + tt.exp(-x))


CASES = [
    elementwise("1 / (1 + exp(-x))", written_sigmoid, mp_sigmoid, [LOGITS]),
    elementwise(
        "1 / (1 + exp(x))", lambda x: 1 / (1 + tt.exp(x)), lambda x: mp_sigmoid(-x), [LOGITS]
    ),
    elementwise(
        "reciprocal(1 + exp(-x))",
        lambda x: tt.reciprocal(1 + tt.exp(-x)),
        mp_sigmoid,
        [LOGITS],
    ),
    elementwise(
        "exp(x) / (1 + exp(x))", lambda x: tt.exp(x) / (1 + tt.exp(x)), mp_sigmoid, [LOGITS]
    ),
    elementwise(
        "x / (1 + exp(-x))", lambda x: x / (1 + tt.exp(-x)), lambda x: x * mp_sigmoid(x), [LOGITS]
    ),
    elementwise(
        "exp(x) / (1 + exp(x)) ** 2",
        lambda x: tt.exp(x) / (1 + tt.exp(x)) ** 2,
        lambda x: mp_sigmoid(x) * mp_sigmoid(-x),
        [LOGITS],
    ),
    elementwise("1 - sigmoid(x)", lambda x: 1 - tt.sigmoid(x), lambda x: mp_sigmoid(-x), [LOGITS]),
    elementwise(
        "sigmoid(x) * (1 - sigmoid(x))",
        lambda x: tt.sigmoid(x) * (1 - tt.sigmoid(x)),
        lambda x: mp_sigmoid(x) * mp_sigmoid(-x),
        [LOGITS],
    ),
    elementwise(
        "sigmoid(x) * exp(-x)",
        lambda x: tt.sigmoid(x) * tt.exp(-x),
        lambda x: mp_sigmoid(-x),
        [LOGITS],
    ),
    elementwise("log(sigmoid(x))", lambda x: tt.log(tt.sigmoid(x)), mp_log_sigmoid, [LOGITS]),
    # the product is 0 for |x| > 745 (float64), 104 (float32): log of it -inf
    elementwise(
        "log(sigmoid(x) * sigmoid(-x))",
        lambda x: tt.log(tt.sigmoid(x) * tt.sigmoid(-x)),
        lambda x: mp_log_sigmoid(x) + mp_log_sigmoid(-x),
        [LOGITS],
    ),
    elementwise(
        "log(1 - sigmoid(x))",
        lambda x: tt.log(1 - tt.sigmoid(x)),
        lambda x: mp_log_sigmoid(-x),
        [LOGITS],
    ),
    elementwise(
        "log1p(-sigmoid(x))",
        lambda x: tt.log1p(-tt.sigmoid(x)),
        lambda x: mp_log_sigmoid(-x),
        [LOGITS],
    ),
    elementwise(
        "log(1 / (1 + exp(-x)))",
        lambda x: tt.log(written_sigmoid(x)),
        mp_log_sigmoid,
        [LOGITS],
    ),
    elementwise(
        "log(1 - 1 / (1 + exp(-x)))",
        lambda x: tt.log(1 - written_sigmoid(x)),
        lambda x: mp_log_sigmoid(-x),
        [LOGITS],
    ),
    elementwise(
        "log(sigmoid(x) / (1 - sigmoid(x)))",
        lambda x: tt.log(tt.sigmoid(x) / (1 - tt.sigmoid(x))),
        lambda x: x,
        [LOGITS],
    ),
    elementwise(
        "sigmoid(log(p / (1 - p)))",
        lambda p: tt.sigmoid(tt.log(p / (1 - p))),
        lambda p: p,
        [np.array([1e-30, 1e-8, 0.25, 0.5, 0.9, 1 - 2.0**-20])],
    ),
    elementwise(
        "exp(softplus(x))",
        lambda x: tt.exp(tt.softplus(x)),
        lambda x: 1 + mpmath.exp(x),
        [IN_RANGE],
    ),
    elementwise(
        "expm1(softplus(x))",
        lambda x: tt.expm1(tt.softplus(x)),
        mpmath.exp,
        [IN_RANGE],
    ),
    elementwise(
        "softplus(log(p))",
        lambda p: tt.softplus(tt.log(p)),
        mpmath.log1p,
        [np.array([1e-30, 1e-8, 0.25, 3.0, 1e10])],
    ),
    elementwise(
        "binary_crossentropy(sigmoid(z), t)",
        lambda z, t: nnet.binary_crossentropy(nnet.sigmoid(z), t),
        mp_xent,
        [LOGITS, TARGETS],
        atol=1e-16,  # the gradient in t, -z, is 0 at z = 0 only up to the rounding of a sum
    ),
    elementwise(
        "sigmoid_binary_crossentropy(z, t)",
        nnet.sigmoid_binary_crossentropy,
        mp_xent,
        [LOGITS, TARGETS],
        atol=1e-16,  # the gradient in t, -z, is 0 at z = 0 only up to the rounding of a sum
    ),
    elementwise(
        "-t * log(p) - (1 - t) * log(1 - p) with p = 1 / (1 + exp(-z))",
        lambda z, t: -t * tt.log(written_sigmoid(z)) - (1 - t) * tt.log(1 - written_sigmoid(z)),
        mp_xent,
        [LOGITS, TARGETS],
        atol=1e-16,  # the gradient in t, -z, is 0 at z = 0 only up to the rounding of a sum
    ),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("engine", ENGINE_PARAMS)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_corpus(case, engine, dtype):
    check(case, engine, dtype)
