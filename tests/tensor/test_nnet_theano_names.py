"""Theano's nnet names that Theano-PyMC's own tests import: the ops and helpers behind
them give numpy's values (float32 and float64), and the sigmoid approximations replace
``sigmoid`` only when a mode asks for them by name."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import get_default_mode
from theano_dag.gradient import verify_grad
from theano_dag.tensor.nnet import (
    Prepend_scalar_constant_to_each_row,
    Prepend_scalar_to_each_row,
    SoftmaxWithBias,
    bn,
    confusion_matrix,
    h_softmax,
    hard_sigmoid,
    sigmoid,
    ultra_fast_sigmoid,
)
from theano_dag.tensor.nnet.sigm import (
    compute_mul,
    is_1pexp,
    parse_mul_tree,
    perform_sigm_times_exp,
    simplify_mul,
)

DTYPES = ["float32", "float64"]


def _np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _np_softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_with_bias_op_values_and_grad(dtype):
    rng = np.random.default_rng(0)
    x, b = tt.matrix("x", dtype=dtype), tt.vector("b", dtype=dtype)
    xv, bv = rng.normal(size=(3, 4)).astype(dtype), rng.normal(size=4).astype(dtype)
    out = theano_dag.function([x, b], SoftmaxWithBias()(x, b))(xv, bv)
    assert out.dtype == dtype
    np.testing.assert_allclose(out, _np_softmax(xv + bv), rtol=1e-5)
    verify_grad(
        lambda a, c: SoftmaxWithBias()(a, c)[:, 1], [xv.astype("float64"), bv.astype("float64")]
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_prepend_ops(dtype):
    x, s = tt.matrix("x", dtype=dtype), tt.scalar("s", dtype=dtype)
    xv = np.arange(6, dtype=dtype).reshape(2, 3)
    f = theano_dag.function([x], Prepend_scalar_constant_to_each_row(4.0)(x))
    np.testing.assert_array_equal(f(xv), np.hstack([np.full((2, 1), 4, dtype), xv]))
    g = theano_dag.function([s, x], Prepend_scalar_to_each_row()(s, x))
    out = g(np.asarray(5, dtype=dtype), xv)
    assert out.dtype == dtype and out.shape == (2, 4)
    np.testing.assert_array_equal(out[:, 0], [5, 5])
    verify_grad(
        lambda v, m: Prepend_scalar_to_each_row()(v, m), [np.asarray(2.0), xv.astype("float64")]
    )


def test_confusion_matrix_matches_numpy():
    a, p = tt.dvector("a"), tt.dvector("p")
    f = theano_dag.function([a, p], confusion_matrix(a, p))
    av, pv = np.array([2.0, 0, 2, 2, 0, 1]), np.array([0.0, 0, 2, 2, 0, 2])
    conf, order = f(av, pv)
    want_order = np.union1d(av, pv)
    want = (av[:, None] == want_order).astype("int64").T @ (pv[:, None] == want_order).astype(
        "int64"
    )
    np.testing.assert_array_equal(order, want_order)
    np.testing.assert_array_equal(conf, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_h_softmax_matches_full_softmax(dtype):
    rng = np.random.default_rng(1)
    n_in, batch, n1, n2 = 4, 3, 5, 3
    W1, b1 = rng.normal(size=(n_in, n1)).astype(dtype), rng.normal(size=n1).astype(dtype)
    W2 = rng.normal(size=(n1, n_in, n2)).astype(dtype)
    b2 = rng.normal(size=(n1, n2)).astype(dtype)
    x, y = tt.matrix("x", dtype=dtype), tt.ivector("y")
    xv = rng.normal(size=(batch, n_in)).astype(dtype)
    yv = np.array([0, 7, 14], dtype="int32")
    every = theano_dag.function([x], h_softmax(x, batch, n1 * n2, n1, n2, W1, b1, W2, b2))(xv)
    picked = theano_dag.function([x, y], h_softmax(x, batch, n1 * n2, n1, n2, W1, b1, W2, b2, y))
    cls = _np_softmax(xv @ W1 + b1)
    within = _np_softmax(np.einsum("bi,cio->bco", xv, W2) + b2)
    want = (cls[:, :, None] * within).reshape(batch, n1 * n2)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(every, want, rtol=tol)
    np.testing.assert_allclose(picked(xv, yv), want[np.arange(batch), yv], rtol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sigmoid_approximations_values(dtype):
    x = tt.vector("x", dtype=dtype)
    xv = np.linspace(-20, 20, 401).astype(dtype)
    fast = theano_dag.function([x], ultra_fast_sigmoid(x))(xv)
    hard = theano_dag.function([x], hard_sigmoid(x))(xv)
    assert fast.dtype == dtype and hard.dtype == dtype
    np.testing.assert_allclose(fast, _np_sigmoid(xv.astype("float64")), atol=0.012)
    np.testing.assert_allclose(hard, np.clip(0.2 * xv.astype("float64") + 0.5, 0, 1), atol=1e-6)


def _ops(f):
    return [n.op for n in f.maker.fgraph.toposort()]


def test_sigmoid_approximation_rewrites_are_opt_in():
    x = tt.dmatrix("x")
    xv = np.array([[-50.0, -4, 0, 1, 50]])
    mode = get_default_mode()
    f = theano_dag.function([x], sigmoid(x), mode=mode)
    assert _ops(f) == [sigmoid]
    f = theano_dag.function([x], sigmoid(x), mode=mode.including("local_ultra_fast_sigmoid"))
    assert _ops(f) == [ultra_fast_sigmoid]
    np.testing.assert_allclose(f(xv), _np_sigmoid(xv), atol=0.012)
    f = theano_dag.function([x], sigmoid(x), mode=mode.including("local_hard_sigmoid"))
    assert sigmoid not in _ops(f)
    np.testing.assert_allclose(f(xv), np.clip(0.2 * xv + 0.5, 0, 1))


def test_multiplication_trees():
    x, y, z = tt.dvectors("x", "y", "z")
    assert parse_mul_tree((x * y) * -z) == [False, [[False, [[False, x], [False, y]]], [True, z]]]
    tree = parse_mul_tree(-x * sigmoid(x) * (y * tt.exp(-x)))
    assert perform_sigm_times_exp(tree)
    out = compute_mul(simplify_mul(tree))
    f = theano_dag.function([x, y], out)
    xv, yv = np.array([0.5, -2.0]), np.array([3.0, 4.0])
    np.testing.assert_allclose(f(xv, yv), -xv * _np_sigmoid(-xv) * yv)
    assert is_1pexp(tt.exp(x) + 1) == (False, x)
    assert is_1pexp(1 + 2 * tt.exp(x)) is None


def test_batch_norm_abstract_op_names_never_in_a_graph():
    x, g, b = tt.dmatrix("x"), tt.dvector("g"), tt.dvector("b")
    out, mean, invstd = bn.batch_normalization_train(x, g, b)
    f = theano_dag.function([x, g, b], [out, mean, invstd])
    abstract = (
        bn.AbstractBatchNormTrain,
        bn.AbstractBatchNormInference,
        bn.AbstractBatchNormTrainGrad,
    )
    assert not any(isinstance(n.op, abstract) for n in f.maker.fgraph.toposort())
    xv = np.array([[1.0, 2.0], [3.0, 6.0]])
    np.testing.assert_allclose(f(xv, np.ones(2), np.zeros(2))[1], xv.mean(axis=0))
    with pytest.raises(NotImplementedError, match="batch_normalization_train"):
        bn.AbstractBatchNormTrain()(x)
