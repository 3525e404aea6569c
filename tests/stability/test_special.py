"""Stability corpus: the error function's tail, exponentials and logarithms of sums and
differences, and compositions of an exponential with a logarithm, as people write them,
at inputs where the naive arithmetic underflows, overflows or cancels."""

import mpmath
import numpy as np
import pytest
from corpus import ENGINE_PARAMS, ENGINES, FLOATS, Case, check, elementwise, mp_elementwise

import theano_dag
import theano_dag.tensor as tt
from theano_dag import function

TAIL = np.array([-5.0, -1e-20, 1e-20, 0.3, 3.0, 9.5, 12.0, 30.0, 1000.0])
# erfc(x) is a normal float32 up to x = 9.2: the values of 1 - erf(x) stop there
ERFC_RANGE = np.array([-3.0, -1e-20, 1e-20, 0.5, 3.0, 6.0, 9.0])


def _log1mexp(t):
    return mpmath.log(-mpmath.expm1(t))


CASES = [
    elementwise(
        "log(erfc(x)) in the tail",
        lambda x: tt.log(tt.erfc(x)),
        lambda x: mpmath.log(mpmath.erfc(x)),
        [TAIL],
    ),
    elementwise(
        "log(1 - erf(x)) in the tail",
        lambda x: tt.log(1 - tt.erf(x)),
        lambda x: mpmath.log(mpmath.erfc(x)),
        [TAIL],
    ),
    elementwise(
        "log(1 + erf(x)) in the tail",
        lambda x: tt.log(1 + tt.erf(x)),
        lambda x: mpmath.log(mpmath.erfc(-x)),
        [-TAIL],
    ),
    elementwise(
        "1 - erf(x) at large x",
        lambda x: 1 - tt.erf(x),
        mpmath.erfc,
        [ERFC_RANGE],
    ),
    elementwise(
        "1 + erf(x) at large negative x",
        lambda x: 1 + tt.erf(x),
        lambda x: mpmath.erfc(-x),
        [-ERFC_RANGE],
    ),
    elementwise(
        "erf(x) - 1 at large x",
        lambda x: tt.erf(x) - 1,
        lambda x: -mpmath.erfc(x),
        [ERFC_RANGE],
    ),
    elementwise(
        "1 - erfc(x) at tiny x",
        lambda x: 1 - tt.erfc(x),
        mpmath.erf,
        [np.array([1e-20, -1e-10, 1e-5, 0.5, -3.0])],
    ),
    elementwise(
        "erfc(-x) - 1 at tiny x",
        lambda x: tt.erfc(-x) - 1,
        mpmath.erf,
        [np.array([1e-20, -1e-10, 1e-5, 0.5, -3.0])],
    ),
    elementwise(
        "exp(x) - 1 at tiny x",
        lambda x: tt.exp(x) - 1,
        mpmath.expm1,
        [np.array([1e-20, -1e-10, 1e-5, 0.5, -3.0, 20.0])],
    ),
    elementwise(
        "log(exp(x) + exp(y)) at +-1000",
        lambda x, y: tt.log(tt.exp(x) + tt.exp(y)),
        lambda x, y: mpmath.log(mpmath.exp(x) + mpmath.exp(y)),
        [
            np.array([1000.0, -1000.0, 0.0, 0.0, 90.0, -30.0, 5.0]),
            np.array([1000.0, -1000.0, -40.0, 0.0, 1.0, 30.0, 5.5]),
        ],
    ),
    elementwise(
        "log(exp(x) + exp(y) + exp(z)) at +-1000",
        lambda x, y, z: tt.log(tt.exp(x) + tt.exp(y) + tt.exp(z)),
        lambda x, y, z: mpmath.log(mpmath.exp(x) + mpmath.exp(y) + mpmath.exp(z)),
        [
            np.array([1000.0, -1000.0, 0.0, 2.0]),
            np.array([1000.0, -1001.0, -40.0, 3.0]),
            np.array([-1000.0, -999.0, -50.0, 1.0]),
        ],
    ),
    elementwise(
        "log(exp(x) - exp(y)) near x = y and at large x",
        lambda x, y: tt.log(tt.exp(x) - tt.exp(y)),
        lambda x, y: x + _log1mexp(y - x),
        [
            np.array([1000.0, 0.0, -1000.0, 5.0, 0.5]),
            np.array([999.0, -1e-8, -1001.0, -30.0, -40.0]),
        ],
    ),
    elementwise(
        "log(exp(x)) at +-800",
        lambda x: tt.log(tt.exp(x)),
        lambda x: x,
        [np.array([800.0, 100.0, -800.0, 1e-20, -3.0])],
    ),
    elementwise(
        "exp(log(x)) at tiny and large x",
        lambda x: tt.exp(tt.log(x)),
        lambda x: x,
        [np.array([1e-30, 1e-20, 2.0, 1e30])],
    ),
    elementwise(
        "expm1(softplus(x)) at large negative x",
        lambda x: tt.expm1(tt.softplus(x)),
        mpmath.exp,
        [np.array([-50.0, -1e-20, 0.5, 3.0])],
    ),
    elementwise(
        "log1p(expm1(x)) at large x",
        lambda x: tt.log1p(tt.expm1(x)),
        lambda x: x,
        [np.array([800.0, 100.0, 1e-20, -3.0])],
    ),
    elementwise(
        "log(1 + expm1(x)) at large and tiny x",
        lambda x: tt.log(1 + tt.expm1(x)),
        lambda x: x,
        [np.array([-1000.0, -5.6234132519034904e-12, -1e-20, 1e-20, 0.5, 80.0])],
    ),
    elementwise(
        "log(erfcx(x))",
        lambda x: tt.log(tt.erfcx(x)),
        lambda x: mpmath.log(mpmath.erfc(x) * mpmath.exp(x * x)),
        [np.array([-9.0, -5.0, -0.1, 0.0, 0.3, 3.0, 30.0, 1000.0])],
    ),
    elementwise(
        "exp(log1mexp(x)) near 0",
        lambda x: tt.exp(tt.log1mexp(x)),
        lambda x: -mpmath.expm1(x),
        [np.array([-1e-20, -1e-5, -1.0, -50.0])],
    ),
    elementwise(
        "expm1(log1p(x)) at tiny x",
        lambda x: tt.expm1(tt.log1p(x)),
        lambda x: x,
        [np.array([1e-20, -1e-10, 0.5, 1e30])],
    ),
    *[
        Case(
            f"sqrt(x**2) at huge x ({dtype})",
            lambda x: tt.sqrt(x**2),
            [values],
            np.abs,
            lambda x, w: [w * np.sign(x)],
            dtypes=(dtype,),
        )
        for dtype, values in (
            ("float32", np.array([1e20, -3e30, 2.5, -1e-30])),
            ("float64", np.array([1e200, -1e300, 2.5, -1e-200])),
        )
    ],
    *[
        Case(
            f"log(1 / x) at subnormal x ({dtype})",
            lambda x: tt.log(1 / x),
            [values],
            lambda x: -np.log(x),
            # -1 / x overflows where 1 / x does: the exact gradient rounds to -inf
            lambda x, w, dtype=dtype: [(-w / x).astype(dtype)],
            dtypes=(dtype,),
        )
        for dtype, values in (
            ("float32", np.array([1e-39, 2.0, 1e30])),
            ("float64", np.array([1e-310, 2.0, 1e300])),
        )
    ],
    elementwise(
        "arctanh(tanh(x)) where tanh rounds to 1",
        lambda x: tt.arctanh(tt.tanh(x)),
        lambda x: x,
        [np.array([-30.0, -1e-20, 0.5, 19.0, 30.0, 800.0])],
    ),
    elementwise(
        "tanh(arctanh(x)) near 1",
        lambda x: tt.tanh(tt.arctanh(x)),
        lambda x: x,
        [np.array([-0.9999999, -1e-20, 0.5, 0.9999999])],
    ),
    elementwise(
        "deg2rad(rad2deg(x)) at huge x",
        lambda x: tt.deg2rad(tt.rad2deg(x)),
        lambda x: x,
        [np.array([3e38, -2.5, 1e-30])],
    ),
    elementwise(
        "log(erf(x)) near 0 and in the tail",
        lambda x: tt.log(tt.erf(x)),
        lambda x: mpmath.log(mpmath.erf(x)),
        [np.array([1e-20, 0.3, 0.99, 1.0, 3.0, 6.0, 9.0])],
    ),
    elementwise(
        "exp(x) * exp(-x) at +-800",
        lambda x: tt.exp(x) * tt.exp(-x),
        lambda x: mpmath.mpf(1),  # exactly: its derivative is 0, not mpmath's rounding
        [np.array([-800.0, -90.0, 0.0, 90.0, 800.0])],
    ),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("engine", ENGINE_PARAMS)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_corpus(case, engine, dtype):
    if dtype not in case.dtypes:
        pytest.skip(f"{case} is for {', '.join(case.dtypes)}")
    check(case, engine, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("engine", ENGINE_PARAMS)
def test_gradient_of_log_erfcx_where_erfcx_overflows(engine, dtype):
    # erfcx(x) overflows below -26.6 (-9.4 in float32), and its derivative with it: the
    # quotient of the two was inf / inf; the derivative is 2 x - 2 / (sqrt(pi) erfcx(x)).
    xs = np.array([-1e4, -30.0, -27.0, -10.0, -2.0, 0.0, 2.0, 50.0])
    case = Case(
        "gradient of log(erfcx(x))",
        lambda x: theano_dag.grad(tt.sum(tt.log(tt.erfcx(x))), x),
        [xs],
        lambda x: mp_elementwise(
            lambda t: 2 * t - 2 / (mpmath.sqrt(mpmath.pi) * mpmath.erfc(t) * mpmath.exp(t * t)),
            x,
        ),
    )
    check(case, engine, dtype, grad=False)


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
def test_gradient_of_log1mexp_at_zero_is_the_limit_from_below(engine):
    # exp(x) / expm1(x) is 1 / +0 at x = +0: the derivative's limit from the domain is -inf
    x = tt.dvector("x")
    f = function([x], theano_dag.grad(tt.sum(tt.log1mexp(x)), x), mode=ENGINES[engine][0]())
    np.testing.assert_array_equal(f(np.array([0.0, -0.0])), [-np.inf, -np.inf])
    np.testing.assert_allclose(f(np.array([-1e-10, -1.0])), [-1e10, -1 / np.expm1(1.0)])
