"""Stabilization rewrites: structure and values, and the stability they buy."""

import numpy as np

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.graph.fg import FunctionGraph
from theano_dag.tensor.nnet import nnet

from .rewrite_helpers import apply_dbs, check, fgraph_values

rng = np.random.default_rng(7)
FAST_RUN_PY = Mode(linker="py", optimizer="fast_run")


def stabilize(fg):
    return apply_dbs(fg, "canonicalize", "stabilize")


def test_log1p():
    x, y = tt.dvector("x"), tt.dvector("y")
    # (1 + y + x: the inner sum is used once, so canonicalize flattens it first)
    check(
        [x, y],
        [tt.log(1 + x), tt.log(x + 1), tt.log(1 - x), tt.log(1 + y + x)],
        [tt.log1p(x), tt.log1p(x), tt.log1p(-x), tt.log1p(x + y)],
        [rng.uniform(-0.4, 0.4, size=4), rng.uniform(-0.4, 0.4, size=4)],
        stabilize,
    )


def test_log1p_keeps_tiny_values():
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.log(1 + x), mode=FAST_RUN_PY)
    assert f(np.array([1e-20]))[0] == 1e-20  # log(1 + 1e-20) would be exactly 0


def test_log_sigmoid():
    x = tt.dvector("x")
    check(
        [x],
        [tt.log(tt.sigmoid(x)), tt.log(1 - tt.sigmoid(x)), tt.log1p(-tt.sigmoid(x))],
        [-tt.softplus(-x), -tt.softplus(x), -tt.softplus(x)],
        [rng.normal(size=5)],
        stabilize,
    )
    f = theano_dag.function([x], tt.log(tt.sigmoid(x)), mode=FAST_RUN_PY)
    np.testing.assert_allclose(f(np.array([-1000.0, 1000.0])), [-1000.0, 0.0])


def test_log_softmax():
    m = tt.dmatrix("m")
    check(
        [m],
        [tt.log(nnet.softmax(m))],
        [nnet.LogSoftmax(1)(m)],
        [rng.normal(size=(2, 3))],
        stabilize,
    )
    f = theano_dag.function([m], tt.log(nnet.softmax(m)), mode=FAST_RUN_PY)
    assert np.isfinite(f(np.array([[0.0, -2000.0]]))).all()


def test_written_out_softmax_becomes_one_node():
    m = tt.dmatrix("m")
    check([m], [nnet.softmax_graph(m)], [nnet.Softmax(1)(m)], [rng.normal(size=(2, 3))], stabilize)
    # and it is stable now: exp(1000) overflowed in the written-out form
    f = theano_dag.function([m], nnet.softmax_graph(m), mode=FAST_RUN_PY)
    np.testing.assert_allclose(f(np.array([[1000.0, 1000.0]])), [[0.5, 0.5]])


def test_softmax_of_a_sum_over_another_axis_is_left_alone():
    m = tt.dmatrix("m")
    e = tt.exp(m)
    out = e / tt.sum(e, axis=0, keepdims=True)
    fg = apply_dbs(FunctionGraph([m], [out]), "stabilize")
    assert any(str(n.op) == "Softmax{axis=0}" for n in fg.apply_nodes)
    out = e / tt.sum(e, axis=1, keepdims=True).T.T  # not the keepdims pattern: kept as is
    fg = apply_dbs(FunctionGraph([m], [out]), "stabilize")
    assert not any(isinstance(n.op, nnet.Softmax) for n in fg.apply_nodes)


def test_crossentropy_of_softmax_is_fused():
    x, b, y = tt.dmatrix("x"), tt.dvector("b"), tt.lvector("y")
    nll = nnet.crossentropy_categorical_1hot(nnet.softmax(x + b), y)
    fused = nnet.crossentropy_softmax_argmax_1hot_with_bias(x, b, y)[0]
    check(
        [x, b, y],
        [nll],
        [fused],
        [rng.normal(size=(3, 4)), rng.normal(size=4), np.array([0, 3, 1])],
        lambda fg: apply_dbs(fg, "stabilize"),
    )
    nll0 = nnet.crossentropy_categorical_1hot(nnet.softmax(x), y)
    fg = check(
        [x, y],
        [nll0],
        None,
        [rng.normal(size=(3, 4)), np.array([0, 3, 1])],
        lambda fg: apply_dbs(fg, "stabilize"),
    )
    assert any(isinstance(n.op, nnet.CrossentropySoftmaxArgmax1HotWithBias) for n in fg.apply_nodes)


def test_crossentropy_of_softmax_stays_finite():
    x, y = tt.dmatrix("x"), tt.lvector("y")
    cost = nnet.crossentropy_categorical_1hot(nnet.softmax(x), y).mean()
    f = theano_dag.function([x, y], cost, mode=FAST_RUN_PY)
    assert f(np.array([[0.0, 800.0]]), np.array([0])) == 800.0


def test_crossentropy_gradient_is_fused():
    x, b, y = tt.dmatrix("x"), tt.dvector("b"), tt.lvector("y")
    cost = nnet.crossentropy_categorical_1hot(nnet.softmax(x + b), y).mean()
    gx = theano_dag.grad(cost, x)
    args = [rng.normal(size=(3, 4)), rng.normal(size=4), np.array([2, 0, 1])]
    ref = theano_dag.function([x, b, y], gx, mode=Mode(linker="py", optimizer=None))(*args)
    f = theano_dag.function([x, b, y], gx, mode=FAST_RUN_PY)
    ops = [type(n.op) for n in f.maker.fgraph.apply_nodes]
    assert nnet.CrossentropySoftmax1HotWithBiasDx in ops
    assert nnet.SoftmaxGrad not in ops and nnet.CrossentropyCategorical1HotGrad not in ops
    np.testing.assert_allclose(f(*args), ref)


def test_stabilize_is_not_in_fast_compile():
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.log(1 + x), mode="FAST_COMPILE")
    assert not any(n.op == tt.log1p for n in f.maker.fgraph.apply_nodes)
    assert fgraph_values(f.maker.fgraph, [np.array([1e-20])])[0][0] == 0.0


def test_log1p_exp_becomes_softplus_and_log1mexp():
    x = tt.dvector("x")
    check(
        [x],
        [tt.log(1 + tt.exp(x)), tt.log1p(tt.exp(x)), tt.log(1 - tt.exp(x)), tt.log(-tt.expm1(x))],
        [tt.softplus(x), tt.softplus(x), tt.log1mexp(x), tt.log1mexp(x)],
        [-rng.uniform(0.1, 3, size=4)],
        stabilize,
    )


def test_log1p_exp_at_extreme_values():
    x = tt.dvector("x")
    f = theano_dag.function([x], [tt.log(1 + tt.exp(x)), tt.log(1 - tt.exp(x))])
    big, tiny = f(np.array([1000.0, -1e-20]))
    assert big[0] == 1000.0  # exp(1000) overflowed to inf
    np.testing.assert_allclose(tiny[1], np.log(1e-20))  # 1 - exp(-1e-20) rounded to 0
    g = theano_dag.function([x], theano_dag.grad(tt.log(1 + tt.exp(x)).sum(), x))
    np.testing.assert_allclose(g(np.array([1000.0, -1000.0, 0.0])), [1.0, 0.0, 0.5])


def test_exp_over_1_plus_exp_is_sigmoid():
    x = tt.dvector("x")
    e = tt.exp(x)
    check([x], [e / (1 + e), e / (e + 1)], [tt.sigmoid(x)] * 2, [rng.normal(size=4)], stabilize)


def test_log_sum_exp():
    m = tt.dmatrix("m")
    fg = check(
        [m],
        [tt.log(tt.sum(tt.exp(m), axis=1)), tt.log(tt.sum(tt.exp(m), axis=0, keepdims=True))],
        None,
        [rng.normal(size=(2, 3))],
        stabilize,
    )
    # each is now max + log(sum(exp(x - max))): one Max per output, and no rewrite loop
    assert [str(n.op) for n in fg.toposort()].count("Max{axis=(1,)}") == 1
    assert [str(n.op) for n in fg.toposort()].count("Max{axis=(0,)}") == 1
    f = theano_dag.function([m], tt.log(tt.sum(tt.exp(m), axis=1)))
    np.testing.assert_allclose(
        f(np.array([[1000.0, 1000.0], [-1000.0, -1000.0]])),
        [1000.0 + np.log(2), -1000.0 + np.log(2)],
    )
    v = tt.dvector("v")
    f = theano_dag.function([v], tt.log(tt.sum(tt.exp(v))))
    np.testing.assert_allclose(f(np.array([1000.0, 1000.0])), 1000.6931471805599)


def test_log_sum_exp_leaves_logsumexp_alone():
    m = tt.dmatrix("m")
    out = tt.logsumexp(m, axis=1)
    fg = stabilize(FunctionGraph([m], [out]))
    assert [str(n.op) for n in fg.toposort()].count("Max{axis=(1,)}") == 1


def test_gradient_of_log_sum_exp_is_shifted_by_the_max():
    m = tt.dmatrix("m")
    g = theano_dag.grad(tt.log(tt.sum(tt.exp(m), axis=1)).sum(), m)
    fg = stabilize(FunctionGraph([m], [g]))
    assert "Max{axis=(1,)}" in [str(n.op) for n in fg.toposort()]
    f = theano_dag.function([m], g)
    np.testing.assert_allclose(
        f(np.array([[1000.0, 1000.0], [0.0, np.log(3.0)]])), [[0.5, 0.5], [0.25, 0.75]]
    )
    v = tt.dvector("v")
    f = theano_dag.function([v], theano_dag.grad(tt.log(tt.sum(tt.exp(v))), v), mode=FAST_RUN_PY)
    np.testing.assert_allclose(f(np.array([1000.0, 1000.0, 0.0])), [0.5, 0.5, 0.0])


def test_gradient_of_minus_log_sum_exp_too():
    m = tt.dmatrix("m")
    cost = -tt.log(tt.sum(tt.exp(m), axis=1)).sum()
    f = theano_dag.function([m], theano_dag.grad(cost, m))
    np.testing.assert_allclose(f(np.array([[2000.0, 2000.0, 0.0]])), [[-0.5, -0.5, 0.0]])
