"""Stability corpus: the relu as Theano writes it, ``0.5 * (x + |x|)`` (and the leaky
``a * x + b * |x|``), at values where ``x + |x|`` overflows and at ``-inf``, where it is
``-inf + inf``."""

import numpy as np
import pytest
from corpus import ENGINE_PARAMS, Case, check

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.printing import debugprint
from theano_dag.tensor import nnet


def _relu_case(name, alpha, values, dtypes):
    def ref(x):
        return np.where(x > 0, x, alpha * x if alpha else 0.0)

    def ref_grad(x, w):
        return [w * np.where(x > 0, 1.0, alpha)]

    return Case(name, lambda x: nnet.relu(x, alpha), [values], ref, ref_grad, dtypes=dtypes)


# Past half the largest value x + |x| is inf; at -inf it is NaN. No input sits at 0,
# where the written form's gradient (0.5, Theano's) is neither one-sided derivative.
_F32 = np.array([-np.inf, -3e38, -2.0, 0.5, 1.7e38, 2e38, 3.4e38, np.inf])
_F64 = np.array([-np.inf, -1.7e308, -2.0, 0.5, 9e307, 1.7e308, np.inf])
CASES = [
    _relu_case("relu past half the float32 range", 0, _F32, ("float32",)),
    _relu_case("relu past half the float64 range", 0, _F64, ("float64",)),
    _relu_case("leaky relu past half the float32 range", 0.1, _F32, ("float32",)),
    _relu_case("leaky relu past half the float64 range", 0.1, _F64, ("float64",)),
]


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_corpus(case, engine):
    (dtype,) = case.dtypes
    check(case, engine, dtype)


@pytest.mark.parametrize("alpha", [0, 0.1, 0.5])
def test_relu_forms_become_a_maximum(alpha):
    x = tt.fmatrix("x")
    f = theano_dag.function([x], nnet.relu(x, alpha), mode=Mode(linker="py"))
    text = debugprint(f, file="str")
    assert "maximum" in text and "abs" not in text, text


def test_other_sums_with_an_absolute_value_are_left_as_written():
    # only a + b == 1 with 0 <= a - b <= 1 is a (leaky) relu
    x = tt.dvector("x")
    xv = np.array([-np.inf, -2.0, 3.0])
    for out in (
        0.5 * x + 0.6 * abs(x),
        0.3 * (x + abs(x)),
        0.5 * (x - abs(x)),
        -0.2 * x + 1.2 * abs(x),
    ):
        f = theano_dag.function([x], out, mode=Mode(linker="py"))
        assert "abs" in debugprint(f, file="str")
        want = theano_dag.function([x], out, mode=Mode(linker="py", optimizer=None))(xv)
        np.testing.assert_array_equal(f(xv), want)


def test_a_relu_scaled_by_an_array_of_halves_keeps_the_arrays_shape():
    # 0.5 * (x + |x|) with the halves an array: the product has the array's shape
    x = tt.drow("x")
    xv = np.array([[-1.0, 2.0, -3.0, 4.0]])
    out = tt.constant(np.full((3, 4), 0.5)) * (x + abs(x))
    got = theano_dag.function([x], out, mode=Mode(linker="py"))(xv)
    np.testing.assert_array_equal(got, np.tile(np.maximum(xv, 0), (3, 1)))
