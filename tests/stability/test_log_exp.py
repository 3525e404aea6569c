"""Stability corpus: logarithms and exponentials near 0 and at large arguments
(``log(1 + x)``, ``exp(x) - 1``, ``log(1 + exp(x))``, ``log(1 - exp(x))``)."""

import mpmath
import numpy as np
import pytest
from corpus import ENGINE_PARAMS, FLOATS, check, elementwise

import theano_dag.tensor as tt

CASES = [
    elementwise(
        "log(1 + x) at tiny x",
        lambda x: tt.log(1 + x),
        lambda x: mpmath.log(1 + x),
        [np.array([1e-20, -1e-10, 1e-5, 0.5, -0.5])],
    ),
    elementwise(
        "log(1 + exp(x)) at large |x|",
        lambda x: tt.log(1 + tt.exp(x)),
        lambda x: mpmath.log(1 + mpmath.exp(x)),
        [np.array([-1000.0, -90.0, -30.0, 0.0, 30.0, 90.0, 800.0])],
    ),
    elementwise(
        "log(1 - exp(x)) near 0 and far below",
        lambda x: tt.log(1 - tt.exp(x)),
        lambda x: mpmath.log(-mpmath.expm1(x)),
        [np.array([-1e-20, -1e-8, -0.5, -1.0, -40.0, -800.0])],
    ),
    elementwise(
        "log1p(-exp(x)) near 0 and far below",
        lambda x: tt.log1p(-tt.exp(x)),
        lambda x: mpmath.log(-mpmath.expm1(x)),
        [np.array([-1e-20, -1e-8, -1e-5, -0.5, -40.0, -800.0])],
    ),
    elementwise(
        "log(-expm1(x)) far below 0",
        lambda x: tt.log(-tt.expm1(x)),
        lambda x: mpmath.log(-mpmath.expm1(x)),
        [np.array([-1e-20, -0.5, -40.0, -800.0])],
    ),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("engine", ENGINE_PARAMS)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_corpus(case, engine, dtype):
    check(case, engine, dtype)
