"""Second derivatives of the stabilized forms at values where the raw ones overflow.

``hessian`` and ``jacobian`` differentiate the stable form of their expression (the
passes up to stabilize): the rows of a Hessian are computed in a loop whose
row-independent parts are precomputed outside it, and the raw gradient's parts
(``exp(x)``, ``sum(exp(x)) ** 2``) overflowed there, where the rewrites never see them
whole. References: mpmath's derivatives at 50 digits; softmax's ``diag(s) - s s^T``.
"""

import mpmath
import numpy as np
import pytest
from scipy import special

import theano_dag
import theano_dag.tensor as tt
from theano_dag.gradient import hessian, jacobian, zero_grad

X = np.array([-800.0, -30.0, -1.0, 0.0, 1.0, 30.0, 800.0])

SCALAR_FORMS = {
    "log(erfc(x))": (lambda x: tt.log(tt.erfc(x)), lambda t: mpmath.log(mpmath.erfc(t))),
    "log(sigmoid(x))": (
        lambda x: tt.log(tt.nnet.sigmoid(x)),
        lambda t: -mpmath.log(1 + mpmath.exp(-t)),
    ),
    "log(1 - sigmoid(x))": (
        lambda x: tt.log(1 - tt.nnet.sigmoid(x)),
        lambda t: -mpmath.log(1 + mpmath.exp(t)),
    ),
    "log(1 + exp(x))": (lambda x: tt.log(1 + tt.exp(x)), lambda t: mpmath.log(1 + mpmath.exp(t))),
}


@pytest.mark.parametrize("form", SCALAR_FORMS, ids=str)
def test_hessian_of_a_stabilized_form_is_its_second_derivative(form):
    build, ref = SCALAR_FORMS[form]
    x = tt.dvector("x")
    h = theano_dag.function([x], hessian(build(x).sum(), x))(X)
    with mpmath.workdps(50):
        want = [float(mpmath.diff(ref, mpmath.mpf(t), 2)) for t in X]
    np.testing.assert_allclose(np.diag(h), want, rtol=1e-6, atol=1e-300)
    np.testing.assert_array_equal(h - np.diag(np.diag(h)), 0.0)


def test_hessian_of_logsumexp_at_large_values():
    x = tt.dvector("x")
    f = theano_dag.function([x], hessian(tt.log(tt.exp(x).sum()), x))
    for v in (np.array([800.0, 0.0, 1.0]), np.array([-800.0, -799.0, -801.0]), X):
        s = special.softmax(v)
        np.testing.assert_allclose(f(v), np.diag(s) - np.outer(s, s), atol=1e-12)


def test_jacobian_of_a_written_softmax_at_large_values():
    x = tt.dvector("x")
    e = tt.exp(x)
    f = theano_dag.function([x], jacobian(e / e.sum(), x))
    v = np.array([900.0, 899.0, 0.0])
    s = special.softmax(v)
    np.testing.assert_allclose(f(v), np.diag(s) - np.outer(s, s), atol=1e-12)


def test_a_gradient_only_op_is_kept_in_the_rows():
    # zero_grad is an identity in value, which the rewrites take out: the stable form is
    # not taken where it would change a derivative.
    x = tt.dvector("x")
    h = hessian((zero_grad(x) ** 2 * x).sum(), x)
    np.testing.assert_array_equal(h.eval({x: np.array([1.0, 2.0])}), np.zeros((2, 2)))


# Second derivatives by grad of grad (not `hessian`): of the raw gradient, whose
# exp(x) multiplies sums of sigmoids, or which divides sums (nested in sums) by products
# of sigmoids.
WRITTEN_FORMS = {
    "-log1p(exp(x))": (
        lambda x: -tt.log1p(tt.exp(x)),
        lambda t: -mpmath.log1p(mpmath.exp(t)),
    ),
    "-log(1 + exp(-x))": (
        lambda x: -tt.log(1 + tt.exp(-x)),
        lambda t: -mpmath.log(1 + mpmath.exp(-t)),
    ),
    "log(exp(x) / (1 + exp(x)))": (
        lambda x: tt.log(tt.exp(x) / (1 + tt.exp(x))),
        lambda t: -mpmath.log(1 + mpmath.exp(-t)),
    ),
    "log(sigmoid(x) * sigmoid(x))": (
        lambda x: tt.log(tt.nnet.sigmoid(x) * tt.nnet.sigmoid(x)),
        lambda t: -2 * mpmath.log(1 + mpmath.exp(-t)),
    ),
    "-(t log(sigmoid(x)) + (1 - t) log(1 - sigmoid(x)))": (
        lambda x: -(0.3 * tt.log(tt.nnet.sigmoid(x)) + 0.7 * tt.log(1 - tt.nnet.sigmoid(x))),
        lambda t: 0.3 * mpmath.log(1 + mpmath.exp(-t)) + 0.7 * mpmath.log(1 + mpmath.exp(t)),
    ),
    "x * log(1 + exp(x))": (
        lambda x: x * tt.log(1 + tt.exp(x)),
        lambda t: t * mpmath.log(1 + mpmath.exp(t)),
    ),
}


@pytest.mark.parametrize("form", WRITTEN_FORMS, ids=str)
def test_grad_of_grad_of_a_written_form_is_finite_where_exp_overflows(form):
    build, ref = WRITTEN_FORMS[form]
    x = tt.dvector("x")
    g = theano_dag.grad(build(x).sum(), x)
    xs = np.array([-1000.0, -30.0, -1.0, 0.0, 1.0, 30.0, 710.0, 746.0, 1000.0])
    got = theano_dag.function([x], theano_dag.grad(g.sum(), x))(xs)
    with mpmath.workdps(50):
        want = np.array([float(mpmath.diff(ref, mpmath.mpf(t), 2)) for t in xs])
    # absolute: where the exact value is ~1e-300, a sum of terms of order 1 rounds to 0
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-15)
