"""Stability corpus: the relu as Theano writes it, ``0.5 * (x + |x|)`` (and the leaky
``a * x + b * |x|``), at values where ``x + |x|`` overflows and at ``-inf``, where it is
``-inf + inf``; the softsign ``x / (1 + |x|)`` at ``+-inf``, where it is ``inf / inf``,
and where its derivative's ``(1 + |x|)**2`` overflows."""

import mpmath
import numpy as np
import pytest
from corpus import ENGINE_PARAMS, Case, check, mp_elementwise

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


def _softsign(x):
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(x), np.sign(x), x / (1 + np.abs(x)))


def _softsign_grad(x, w):
    # 1 / (1 + |x|)**2 in mpmath: the square overflows float64 from |x| = 1.3e154
    return [w * mp_elementwise(lambda t: 1 / (1 + abs(t)) ** 2, x)]


# +-inf, the largest floats, and |x| past where (1 + |x|)**2 overflows: 1.8e19 in
# float32 (the derivative of the written form was 1 / x there, not 1 / x**2), 1.3e154 in
# float64 (0 * inf, NaN, from the largest value on). The derivative underflows to 0 at the
# largest values: ``atol`` lets the references there (1e-77, 1e-617) be 0.
_TINY = {"float32": 1e-44, "float64": 1e-320}
_SOFTSIGN32 = np.array([-np.inf, -3.4e38, -1e20, -2.0, 0.0, 0.5, 1e10, 2e19, 3.4e38, np.inf])
_SOFTSIGN64 = np.array([-np.inf, -1.7e308, -1e200, -2.0, 0.0, 0.5, 1e20, 1.4e154, 1.7e308, np.inf])
SOFTSIGN_CASES = [
    Case(
        "softsign at +-inf and past (1 + |x|)**2's overflow (float32)",
        nnet.softsign,
        [_SOFTSIGN32],
        _softsign,
        _softsign_grad,
        atol=_TINY,
        dtypes=("float32",),
    ),
    Case(
        "softsign at +-inf and past (1 + |x|)**2's overflow (float64)",
        nnet.softsign,
        [_SOFTSIGN64],
        _softsign,
        _softsign_grad,
        atol=_TINY,
        dtypes=("float64",),
    ),
    # the written form becomes the softsign; its gradient is the written form's
    Case(
        "x / (1 + |x|) at +-inf",
        lambda x: x / (1 + abs(x)),
        [np.array([-np.inf, -1e30, -2.0, 0.0, 0.5, 1e30, np.inf])],
        _softsign,
    ),
]


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
@pytest.mark.parametrize("case", CASES + SOFTSIGN_CASES[:2], ids=str)
def test_corpus(case, engine):
    (dtype,) = case.dtypes
    check(case, engine, dtype)


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_written_softsign(engine, dtype):
    check(SOFTSIGN_CASES[2], engine, dtype)


def test_written_softsign_becomes_the_op():
    x = tt.fmatrix("x")
    f = theano_dag.function([x], x / (1 + abs(x)), mode=Mode(linker="py"))
    text = debugprint(f, file="str")
    assert "softsign" in text and "true_div" not in text and "abs" not in text, text


def test_other_quotients_with_an_absolute_value_are_left_as_written():
    x, y = tt.dvector("x"), tt.dvector("y")
    xv, yv = np.array([-4.0, -2.0, 3.0]), np.array([1.0, -5.0, 0.25])
    for out in (x / (2 + abs(x)), y / (1 + abs(x)), x / (1 - abs(x)), x / (1 + abs(y))):
        ignore = {"on_unused_input": "ignore"}
        f = theano_dag.function([x, y], out, mode=Mode(linker="py"), **ignore)
        assert "softsign" not in debugprint(f, file="str")
        plain = theano_dag.function([x, y], out, mode=Mode(linker="py", optimizer=None), **ignore)
        np.testing.assert_array_equal(f(xv, yv), plain(xv, yv))


def test_softsign_gradient_is_theanos_where_it_is_representable():
    # Theano's scalar_softsign: d/dx = 1 / (1 + |x|)**2
    x = tt.dvector("x")
    xv = np.array([-3.0, -1e-8, 0.0, 2.0, 1e100])
    g = theano_dag.grad(nnet.softsign(x).sum(), x)
    got = theano_dag.function([x], g, mode=Mode(linker="py"))(xv)
    want = [float(1 / (1 + abs(mpmath.mpf(v))) ** 2) for v in xv]
    np.testing.assert_allclose(got, want, rtol=1e-15)


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
