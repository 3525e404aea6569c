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
