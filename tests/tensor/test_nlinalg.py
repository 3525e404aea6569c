"""Cholesky, Eigh and GeneralizedEigh: values against numpy, shapes, gradients."""

import numpy as np
import pytest

from theano_dag import function
from theano_dag import tensor as tt
from theano_dag.gradient import grad
from theano_dag.gradient.verify import verify_grad
from theano_dag.graph.fg import FunctionGraph
from theano_dag.tensor.linalg import Cholesky, Eigh, cholesky, eigh, generalized_eigh

rng = np.random.default_rng(3)


def spd(n):
    x = rng.standard_normal((n, n))
    return x @ x.T + n * np.eye(n)


def test_cholesky_values_and_types():
    a = tt.dmatrix("a")
    m = spd(4)
    low, up = function([a], [cholesky(a), cholesky(a, lower=False)])(m)
    np.testing.assert_allclose(low, np.linalg.cholesky(m))
    np.testing.assert_allclose(up, np.linalg.cholesky(m).T)
    assert cholesky(tt.fmatrix()).dtype == "float32"
    assert cholesky(tt.lmatrix()).dtype == "float64"
    assert Cholesky() == Cholesky(True) != Cholesky(False)
    with pytest.raises(TypeError, match=r"Cholesky\{lower=True\}: input 0 \(v\) must be a matrix"):
        cholesky(tt.dvector("v"))
    assert cholesky(tt.TensorType("float64", shape=(3, None))()).type.shape == (3, 3)


def test_eigh_values_and_infer_shape():
    a = tt.dmatrix("a")
    m = spd(5)
    w, v = eigh(a)
    got_w, got_v = function([a], [w, v])(m)
    want_w, want_v = np.linalg.eigh(m)
    np.testing.assert_allclose(got_w, want_w)
    np.testing.assert_allclose(got_v, want_v)
    node = w.owner
    assert node.op.infer_shape(None, node, [(5, 5)]) == [(5,), (5, 5)]
    with pytest.raises(ValueError, match="UPLO must be 'L' or 'U'"):
        Eigh("X")


def test_generalized_eigh_solves_the_pencil():
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    ma, mb = spd(4), spd(4)
    w, v = function([a, b], list(generalized_eigh(a, b)))(ma, mb)
    np.testing.assert_allclose(ma @ v, mb @ v * w, atol=1e-10)
    np.testing.assert_allclose(v.T @ mb @ v, np.eye(4), atol=1e-10)
    assert np.all(np.diff(w) > 0)


def test_cholesky_grad():
    verify_grad(cholesky, [spd(3)], rng=np.random.default_rng(0))
    verify_grad(lambda x: cholesky(x, lower=False), [spd(3)], rng=np.random.default_rng(1))


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_grad(uplo):
    verify_grad(lambda x: eigh(x, uplo)[0], [spd(3)], rng=np.random.default_rng(0))
    verify_grad(lambda x: eigh(x, uplo)[1], [spd(3)], rng=np.random.default_rng(1))
    verify_grad(
        lambda x: eigh(x, uplo)[0].sum() + eigh(x, uplo)[1][0].sum(),
        [spd(3)],
        rng=np.random.default_rng(2),
    )


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigenvalue_gradient_at_repeated_eigenvalues_is_finite(uplo):
    # The eigenvectors' term divides by w[j] - w[i]; with the eigenvalues alone
    # differentiated it is 0, and was inf * 0 = NaN wherever two eigenvalues are equal
    # (the identity's trace gradient). A function of the eigenvalues that is smooth there
    # (their sum, the trace; their squares, the Frobenius norm) has its gradient.
    a = tt.dmatrix("a")
    w = eigh(a, uplo)[0]
    f = function(
        [a], [grad(w.sum(), a), grad((w**2).sum(), a), grad(tt.linalg.eigvalsh(a).sum(), a)]
    )
    read = np.tril if uplo == "L" else np.triu
    for m in (
        np.eye(4),
        np.zeros((4, 4)),
        np.diag([1.0, 1.0, 2.0, 3.0]),
        spd(4) @ np.diag([2.0] * 4),
    ):
        g_sum, g_sq, g_vals = f(m)
        np.testing.assert_allclose(g_sum, np.eye(4), atol=1e-12)
        np.testing.assert_allclose(g_vals, np.eye(4), atol=1e-12)
        sym = read(m) + read(m).T - np.diag(m.diagonal())  # the matrix eigh reads
        np.testing.assert_allclose(g_sq, read(2 * sym) * (2 - np.eye(4)), atol=1e-10)


def test_generalized_eigh_eigenvectors_have_no_grad():
    # the eigenvalues have one (tests/tensor/test_theano_suite_fixes.py)
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    with pytest.raises(Exception, match="GeneralizedEigh.grad: gradient with respect to input 0"):
        grad(generalized_eigh(a, b)[1].sum(), a)


def test_ops_in_a_fgraph_infer_shapes():
    a = tt.dmatrix("a")
    fg = FunctionGraph([a], [cholesky(a), *eigh(a)], clone=False)
    for node in fg.toposort():
        assert len(node.op.infer_shape(fg, node, [(2, 2)] * len(node.inputs))) == len(node.outputs)
