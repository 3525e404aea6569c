"""``local_argmax_pushdown``, ``local_max_and_argmax`` and the cross-entropy fusion of a
softmax of ``x`` plus several row biases: the rewritten graphs' ops, and unchanged values."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import get_default_mode
from theano_dag.tensor.arrays import MaxAndArgmax
from theano_dag.tensor.elemwise import CAReduce
from theano_dag.tensor.math import Argmax
from theano_dag.tensor.nnet import (
    CrossentropySoftmaxArgmax1HotWithBias,
    Softmax,
    categorical_crossentropy,
    sigmoid,
    softmax,
)


def _ops(f):
    return [n.op for n in f.maker.fgraph.toposort()]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_argmax_of_increasing_functions_is_argmax_of_input(dtype):
    x = tt.matrix("x", dtype=dtype)
    xv = np.random.default_rng(0).normal(size=(5, 7)).astype(dtype)
    out = tt.argmax(softmax(tt.exp(tt.tanh(sigmoid(x)))), axis=-1)
    f = theano_dag.function([x], out)
    assert [type(op) for op in _ops(f)] == [Argmax]
    np.testing.assert_array_equal(f(xv), np.argmax(xv, axis=-1))
    # The argmax output of a MaxAndArgmax whose max is unused is pushed down too.
    f = theano_dag.function([x], MaxAndArgmax((1,))(tt.exp(x))[1])
    assert [type(op) for op in _ops(f)] == [Argmax]
    np.testing.assert_array_equal(f(xv), np.argmax(xv, axis=1))


def test_argmax_pushdown_keeps_other_axes_and_excluding_works():
    x = tt.dmatrix("x")
    xv = np.random.default_rng(1).normal(size=(4, 6))
    # softmax along the rows, argmax along the columns: not the same ranking
    f = theano_dag.function([x], tt.argmax(softmax(x, axis=1), axis=0))
    assert any(isinstance(op, Softmax) for op in _ops(f))
    np.testing.assert_array_equal(
        f(xv), np.argmax(np.exp(xv) / np.exp(xv).sum(1, keepdims=True), axis=0)
    )
    mode = get_default_mode().excluding("local_argmax_pushdown")
    f = theano_dag.function([x], tt.argmax(softmax(x), axis=-1), mode=mode)
    assert any(isinstance(op, Softmax) for op in _ops(f))


def test_max_and_argmax_with_only_max_used_is_max():
    x = tt.dmatrix("x")
    xv = np.random.default_rng(2).normal(size=(3, 5))
    f = theano_dag.function([x], MaxAndArgmax((1,))(softmax(x))[0])
    ops = _ops(f)
    assert not any(isinstance(op, MaxAndArgmax) for op in ops)
    assert isinstance(ops[-1], CAReduce)
    sm = np.exp(xv) / np.exp(xv).sum(1, keepdims=True)
    np.testing.assert_allclose(f(xv), sm.max(axis=1))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_crossentropy_of_softmax_of_x_plus_two_biases_is_fused(dtype):
    x = tt.matrix("x", dtype=dtype)
    b, c = tt.vector("b", dtype=dtype), tt.vector("c", dtype=dtype)
    y = tt.lvector("y")
    f = theano_dag.function([x, b, c, y], categorical_crossentropy(softmax(x + b + c), y))
    assert any(isinstance(op, CrossentropySoftmaxArgmax1HotWithBias) for op in _ops(f))
    rng = np.random.default_rng(3)
    xv = rng.normal(size=(4, 3)).astype(dtype)
    bv, cv = rng.normal(size=3).astype(dtype), rng.normal(size=3).astype(dtype)
    yv = np.array([0, 2, 1, 2])
    z = (xv + bv + cv).astype("float64")
    want = -(z - np.log(np.exp(z).sum(1, keepdims=True)))[np.arange(4), yv]
    np.testing.assert_allclose(f(xv, bv, cv, yv), want, rtol=1e-5)
