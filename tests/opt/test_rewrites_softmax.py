"""The softmax family's rewrites (``opt/rewrites/softmax.py``): structure of the
rewritten graphs, and values, forward and gradient."""

import numpy as np
import pytest
from engine_modes import ENGINES, rewritten_mode  # the engines, fast_run on each

import theano_dag
import theano_dag.tensor as tt
from theano_dag import scalar as ts
from theano_dag.compile.mode import Mode
from theano_dag.gradient.verify import verify_grad
from theano_dag.graph.fg import FunctionGraph
from theano_dag.tensor.elemwise import Elemwise
from theano_dag.tensor.nnet import nnet
from theano_dag.tensor.subtensor import AdvancedIncSubtensor, AdvancedSubtensor

from .rewrite_helpers import apply_dbs, check, ops_of

rng = np.random.default_rng(7)
FAST_RUN_PY = Mode(linker="py", optimizer="fast_run")


def stabilize(fg):
    return apply_dbs(fg, "canonicalize", "stabilize")


def written_softmax(x, axis=1):
    e = tt.exp(x)
    return e / tt.sum(e, axis=axis, keepdims=True)


def op_types(fg):
    return {type(n.op) for n in fg.apply_nodes}


def test_log_softmax():
    m = tt.dmatrix("m")
    check(
        [m],
        [tt.log(nnet.softmax(m))],
        [nnet.LogSoftmax(-1)(m)],
        [rng.normal(size=(2, 3))],
        stabilize,
    )
    f = theano_dag.function([m], tt.log(nnet.softmax(m)), mode=FAST_RUN_PY)
    assert np.isfinite(f(np.array([[0.0, -2000.0]]))).all()


def test_written_out_softmax_becomes_one_node():
    m = tt.dmatrix("m")
    check([m], [nnet.softmax_graph(m)], [nnet.Softmax(-1)(m)], [rng.normal(size=(2, 3))], stabilize)
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


@pytest.mark.parametrize("engine", ENGINES)
def test_crossentropy_of_softmax_of_no_rows(engine):
    # The fused op's zero bias has one entry per class: made from x's row 0 it raised
    # for a batch of no rows, where the written cross-entropy is empty.
    x, y = tt.dmatrix("x"), tt.lvector("y")
    nll = nnet.crossentropy_categorical_1hot(nnet.softmax(x), y)
    f = theano_dag.function([x, y], [nll, tt.grad(nll.sum(), x)], mode=rewritten_mode(engine))
    assert any(
        isinstance(n.op, nnet.CrossentropySoftmaxArgmax1HotWithBias)
        for n in f.maker.fgraph.apply_nodes
    )
    cost, dx = f(np.zeros((0, 4)), np.zeros(0, "int64"))
    assert cost.shape == (0,) and dx.shape == (0, 4)
    with pytest.raises(ValueError, match="x has 0 rows but y_idx has 3 entries"):
        f(np.zeros((0, 4)), np.zeros(3, "int64"))


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
    assert [str(n.op) for n in fg.toposort()].count("Max{axis=(1,), empty=identity}") == 1
    assert [str(n.op) for n in fg.toposort()].count("Max{axis=(0,), empty=identity}") == 1
    f = theano_dag.function([m], tt.log(tt.sum(tt.exp(m), axis=1)))
    np.testing.assert_allclose(
        f(np.array([[1000.0, 1000.0], [-1000.0, -1000.0]])),
        [1000.0 + np.log(2), -1000.0 + np.log(2)],
    )
    v = tt.dvector("v")
    f = theano_dag.function([v], tt.log(tt.sum(tt.exp(v))))
    np.testing.assert_allclose(f(np.array([1000.0, 1000.0])), 1000.6931471805599)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_log_sum_exp_over_a_broadcastable_axis(engine, dtype):
    # sum(..., axis=(0, 1), keepdims=True) over an x whose axis 1 is broadcastable is
    # canonicalized to a DimShuffle dropping axis 1, then a Sum over axis 0: the log of it
    # and its gradient are still shifted by the max (they overflowed to inf and nan).
    x = tt.TensorType(dtype, (False, True, False))("x")
    out = tt.log(tt.sum(tt.exp(x), axis=(0, 1), keepdims=True))
    g = theano_dag.grad(out.sum(), x)
    fg = stabilize(FunctionGraph([x], [out, g]))
    maxes = [n for n in fg.toposort() if type(n.op).__name__ == "Max"]
    assert len(maxes) == 2
    val = (
        np.array([[[700.0, -3.0, 0.5]], [[-700.0, -2.0, 0.25]]])
        * (1 if dtype == "float64" else 1 / 7)
    ).astype(dtype)
    got_out, got_g = theano_dag.function([x], [out, g], mode=rewritten_mode(engine))(val)
    v64 = val.astype("float64")
    m = v64.max(axis=(0, 1), keepdims=True)
    want = m + np.log(np.exp(v64 - m).sum(axis=(0, 1), keepdims=True))
    want_g = np.exp(v64 - want)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    assert got_out.dtype == dtype and got_out.shape == (1, 1, 3)
    assert got_g.dtype == dtype and got_g.shape == (2, 1, 3)
    np.testing.assert_allclose(got_out, want, rtol=rtol)
    np.testing.assert_allclose(got_g, want_g, rtol=rtol, atol=1e-30)


def test_log_sum_exp_leaves_logsumexp_alone():
    m = tt.dmatrix("m")
    out = tt.logsumexp(m, axis=1)
    fg = stabilize(FunctionGraph([m], [out]))
    assert [str(n.op) for n in fg.toposort()].count("Max{axis=(1,), empty=identity}") == 1


def test_gradient_of_log_sum_exp_is_shifted_by_the_max():
    m = tt.dmatrix("m")
    g = theano_dag.grad(tt.log(tt.sum(tt.exp(m), axis=1)).sum(), m)
    fg = stabilize(FunctionGraph([m], [g]))
    ops = [n.op.scalar_op if isinstance(n.op, Elemwise) else n.op for n in fg.toposort()]
    assert (
        "Max{axis=(1,), empty=identity}" in map(str, ops)
        and ts.exp_sub in ops
        and ts.exp not in ops
    )
    f = theano_dag.function([m], g)
    np.testing.assert_allclose(
        f(np.array([[1000.0, 1000.0], [0.0, np.log(3.0)]])), [[0.5, 0.5], [0.25, 0.75]]
    )
    v = tt.dvector("v")
    f = theano_dag.function([v], theano_dag.grad(tt.log(tt.sum(tt.exp(v))), v), mode=FAST_RUN_PY)
    np.testing.assert_allclose(f(np.array([1000.0, 1000.0, 0.0])), [0.5, 0.5, 0.0])


LSE_FORMS = {
    "logsumexp": lambda x: tt.logsumexp(x, axis=1),
    "logsumexp keepdims": lambda x: tt.logsumexp(x, axis=1, keepdims=True)[:, 0],
    "log(sum(exp(x)))": lambda x: tt.log(tt.sum(tt.exp(x), axis=1)),
    "keepdims": lambda x: tt.log(tt.sum(tt.exp(x), axis=1, keepdims=True))[:, 0],
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("form", sorted(LSE_FORMS))
def test_gradient_of_log_sum_exp_at_a_plus_inf_is_the_softmax_limit(form, dtype, engine):
    # exp(x - m) / sum(exp(x - m)) was inf / inf, NaN, in a row with a +inf, where the
    # value is inf (the shift m was 0 there): the terms are now 1 at each +inf (shifted by
    # it) and 0 elsewhere, the softmax's limit
    x = tt.TensorType(dtype, (None, None))("x")
    w = tt.TensorType(dtype, (None,))("w")
    out = LSE_FORMS[form](x)
    g = theano_dag.grad(tt.sum(out * w), x)
    f = theano_dag.function([x, w], [out, g], mode=rewritten_mode(engine))
    rows = [[np.inf, 0.0, 1.0], [np.inf, np.inf, 0.0], [1000.0, 1000.0, 0.0], [-np.inf] * 3]
    got, got_g = f(np.array(rows + [[-3.0, 0.5, 2.0]], dtype), np.array([1, 2, 4, 1, 3], dtype))
    e = np.exp(np.array([-3.0, 0.5, 2.0]) - 2.0)
    want = [np.inf, np.inf, 1000 + np.log(2), -np.inf, 2.0 + np.log(e.sum())]
    want_g = [[1, 0, 0], [1, 1, 0], [2, 2, 0], [np.nan] * 3, 3 * e / e.sum()]
    tol = 1e-6 if dtype == "float32" else 1e-15
    np.testing.assert_allclose(got, np.array(want, dtype), rtol=tol)
    np.testing.assert_allclose(got_g, np.array(want_g, dtype), rtol=tol)


def test_gradient_of_log_sum_exp_over_two_axes_is_shifted_by_the_max():
    # (a softmax is over one axis)
    m = tt.dmatrix("m")
    g = theano_dag.grad(tt.log(tt.sum(tt.exp(m))), m)
    fg = stabilize(FunctionGraph([m], [g]))
    assert "Max" in [type(n.op).__name__ for n in fg.toposort()]
    f = theano_dag.function([m], g)
    want = np.array([[1.0, 1.0], [0.0, 1.0]]) / 3
    np.testing.assert_allclose(f(np.array([[1000.0, 1000.0], [0.0, 1000.0]])), want)


def test_gradient_of_minus_log_sum_exp_too():
    m = tt.dmatrix("m")
    cost = -tt.log(tt.sum(tt.exp(m), axis=1)).sum()
    f = theano_dag.function([m], theano_dag.grad(cost, m))
    np.testing.assert_allclose(f(np.array([[2000.0, 2000.0, 0.0]])), [[-0.5, -0.5, 0.0]])


def _lse_hvp(x, u, axis):
    """numpy: the Hessian of ``sum(log(sum(exp(x), axis)))`` times ``u``."""
    p = np.exp(x - x.max(axis=axis, keepdims=True))
    p /= p.sum(axis=axis, keepdims=True)
    return p * u - p * np.sum(p * u, axis=axis, keepdims=True)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_second_derivative_of_log_sum_exp_is_shifted_by_the_max(axis, engine):
    # The gradient of sum(U * gradient of a log-sum-exp) is exp(x) * (U / s - t / s**2),
    # s and t sums of exp(x): inf / inf at large x, 0 / 0 far below. It does not change
    # when exp(x) is scaled, so it is computed from exp(x - max(x)) over the sums' axes.
    m = tt.dmatrix("m")
    u = np.array([[1.0, -2.0, 0.5], [0.25, 1.0, -1.0]])
    lse = tt.log(tt.sum(tt.exp(m), axis=axis))
    hvp = theano_dag.grad(tt.sum(theano_dag.grad(tt.sum(lse), m) * u), m)
    f = theano_dag.function([m], hvp, mode=rewritten_mode(engine))
    for x in ([[1000.0, -1000.0, 0.0], [800.0, 801.0, 5.0]], [[-1000.0, -1001.0, -999.0]] * 2):
        x = np.array(x)
        np.testing.assert_allclose(f(x), _lse_hvp(x, u, axis), rtol=1e-12, atol=1e-300)
    fg = FunctionGraph([m], [hvp])
    theano_dag.compile.mode.get_mode("FAST_RUN").optimizer.optimize(fg)
    ops = {n.op.scalar_op if isinstance(n.op, Elemwise) else type(n.op) for n in fg.toposort()}
    assert ts.exp_sub in ops and ts.exp not in ops, ops


def test_scale_free_exp_over_sums_of_other_axes_is_left_alone():
    # exp(x)**2 / (column sums * row sums) does not change when exp(x) is scaled by one
    # number, but does when each row is scaled by its own (its max): left as written.
    m = tt.dmatrix("m")
    e = tt.exp(m)
    out = e * e / (tt.sum(e, axis=0, keepdims=True) * tt.sum(e, axis=1, keepdims=True))
    tr = e / tt.sum(e.T, axis=0).dimshuffle(0, "x")  # a transposition on the way
    for y in (out, tr):
        fg = FunctionGraph([m], [y])
        theano_dag.compile.mode.get_mode("FAST_RUN").optimizer.optimize(fg)
        ops = {n.op.scalar_op if isinstance(n.op, Elemwise) else None for n in fg.toposort()}
        assert ts.exp_sub not in ops
    x = np.array([[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]])
    ex = np.exp(x)
    f = theano_dag.function([m], [out, tr])
    got = f(x)
    np.testing.assert_allclose(got[0], ex * ex / (ex.sum(0) * ex.sum(1)[:, None]))
    np.testing.assert_allclose(got[1], ex / ex.sum(1)[:, None])


def test_log_of_a_sum_of_exp_over_another_value_is_left_alone():
    # log(s / n) is log(s) - log(n) for a count n (a mean's); for a y of any sign it is
    # not (s / -0.0 is -inf, log of it NaN; log(-0.0) is -inf): left as written.
    v, y = tt.dvector("v"), tt.dscalar("y")
    out = tt.log(tt.sum(tt.exp(v)) / y)
    fg = stabilize(FunctionGraph([v, y], [out]))
    assert "Max" not in [type(n.op).__name__ for n in fg.toposort()]
    f = theano_dag.function([v, y], out)
    x = np.array([0.5, -1.0])
    np.testing.assert_allclose(f(x, 3.0), np.log(np.exp(x).sum() / 3.0))
    mean = theano_dag.function([v], tt.log(tt.mean(tt.exp(v))))
    np.testing.assert_allclose(mean(np.array([1000.0, 1000.0])), 1000.0)


def test_excluding_stabilize_leaves_the_second_derivative_as_written():
    m = tt.dmatrix("m")
    lse = tt.log(tt.sum(tt.exp(m), axis=1))
    hvp = theano_dag.grad(tt.sum(theano_dag.grad(tt.sum(lse), m) * np.ones((1, 3))), m)
    fg = FunctionGraph([m], [hvp])
    Mode(linker="py", optimizer="fast_run").excluding("stabilize").optimizer.optimize(fg)
    ops = {n.op.scalar_op if isinstance(n.op, Elemwise) else None for n in fg.toposort()}
    assert ts.exp in ops and ts.exp_sub not in ops


# -- log-softmax through indexing --------------------------------------------------


def test_log_of_an_indexed_softmax_is_an_indexed_log_softmax():
    m, y = tt.dmatrix("m"), tt.lvector("y")
    rows = tt.arange(y.shape[0])
    sm = nnet.softmax(m)
    ls = nnet.LogSoftmax(-1)(m)
    check(
        [m, y],
        [tt.log(sm[rows, y]), tt.log(sm[:, 1]), tt.log(sm.T)],
        [ls[rows, y], ls[:, 1], ls.T],
        [rng.normal(size=(3, 4)), np.array([0, 3, 1])],
        # (the labels' log-likelihoods go on to the fused cross-entropy: tested below)
        lambda fg: apply_dbs(
            fg,
            "canonicalize",
            "stabilize",
            exclude=("local_advanced_indexing_crossentropy_onehot",),
        ),
    )
    f = theano_dag.function([m, y], -tt.log(sm[rows, y]), mode=FAST_RUN_PY)
    np.testing.assert_allclose(f(np.array([[0.0, 2000.0]]), np.array([0])), [2000.0])


def test_log_of_another_op_is_left_alone():
    m = tt.dmatrix("m")
    fg = stabilize(FunctionGraph([m], [tt.log(tt.exp(m)[:, 1:])], clone=False))
    assert nnet.LogSoftmax not in op_types(fg)


# -- written-out softmax -------------------------------------------------------------


def test_written_out_softmax_inside_a_product():
    m, w, z = tt.dmatrix("m"), tt.dmatrix("w"), tt.dmatrix("z")
    e = tt.exp(m)
    s = tt.sum(e, axis=1, keepdims=True)
    fg = check(
        [m, w, z],
        [(w * e) / (s * z)],
        None,
        [rng.normal(size=(2, 3)), rng.normal(size=(2, 3)), rng.uniform(1, 2, size=(2, 3))],
        stabilize,
    )
    assert nnet.Softmax in op_types(fg) and "exp" not in str(ops_of(fg))


def test_written_out_softmax_of_a_vector():
    v = tt.dvector("v")
    check(
        [v], [tt.exp(v) / tt.sum(tt.exp(v))], [nnet.Softmax(-1)(v)], [rng.normal(size=4)], stabilize
    )


# -- gradients -----------------------------------------------------------------------


def test_gradient_of_log_softmax_cancels_the_division():
    # softmax_grad(dy / sm, sm) -> dy - sm * sum(dy)
    m, w = tt.dmatrix("m"), tt.dmatrix("w")
    sm = nnet.softmax(m)
    g = nnet.SoftmaxGrad(1)(w / sm, sm)
    args = [rng.normal(size=(2, 3)), rng.normal(size=(2, 3))]
    expected = w - sm * tt.sum(w, axis=1, keepdims=True)
    check([m, w], [g], [expected], args, lambda fg: apply_dbs(fg, "stabilize"))
    # a product with the softmax among its factors, negated
    g = nnet.SoftmaxGrad(1)(-(w * 2.0) / sm, sm)
    fg = check([m, w], [g], None, args, lambda fg: apply_dbs(fg, "stabilize"))
    assert nnet.SoftmaxGrad not in op_types(fg) and "true_div" not in str(ops_of(fg))


def test_gradient_of_an_indexed_log_softmax_cancels_the_division():
    # softmax_grad(inc(zeros, v / sm[r, y], r, y), sm) -> n - sm * sum(n), n = inc(zeros, v, r, y)
    m, v, y = tt.dmatrix("m"), tt.dvector("v"), tt.lvector("y")
    rows = tt.arange(y.shape[0])
    sm = nnet.softmax(m)
    zeros = tt.zeros_like(m)
    dy = tt.inc_subtensor(zeros[rows, y], v / sm[rows, y])
    n = tt.inc_subtensor(zeros[rows, y], v)
    check(
        [m, v, y],
        [nnet.SoftmaxGrad(1)(dy, sm)],
        [n - sm * tt.sum(n, axis=1, keepdims=True)],
        [rng.normal(size=(3, 4)), rng.normal(size=3), np.array([0, 3, 3])],
        lambda fg: apply_dbs(fg, "stabilize"),
    )


def test_gradient_divided_by_another_softmax_is_left_alone():
    m, w = tt.dmatrix("m"), tt.dmatrix("w")
    g = nnet.SoftmaxGrad(1)(w / nnet.softmax(m * 2), nnet.softmax(m))
    fg = apply_dbs(FunctionGraph([m, w], [g], clone=False), "stabilize")
    assert nnet.SoftmaxGrad in op_types(fg)


@pytest.mark.parametrize("weights", ["variable", "constant", "column"])
def test_gradient_of_a_written_out_softmax_is_a_softmax_grad(weights):
    m = tt.dmatrix("m")
    w = tt.dcol("w") if weights == "column" else tt.dmatrix("w")
    wv = rng.normal(size=(2, 1) if weights == "column" else (2, 3))
    ww = tt.constant(wv) if weights == "constant" else w
    g = theano_dag.grad(tt.sum(ww * written_softmax(m)), m)
    fg = check([m, w], [g], None, [rng.normal(size=(2, 3)), wv], stabilize)
    if weights == "variable":
        assert fg.outputs[0].owner.op == nnet.SoftmaxGrad(-1)
        assert fg.outputs[0].owner.inputs[0] is w
    assert nnet.SoftmaxGrad in op_types(fg)
    assert not any(n.op == tt.exp for n in fg.apply_nodes)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cost", ["sum", "-sum", "sum axis=-1", "vector sum"])
def test_gradient_of_the_sum_of_a_written_out_softmax(cost, dtype):
    # The cost's gradient reaches the softmax as a constant 1, so its "e * dy / s" term
    # is e / s, already a Softmax when the gradient is matched: exp(x) must still go
    # (float32 overflows above 88, float64 above 709; the gradient is exactly 0).
    x = tt.vector("x", dtype=dtype) if cost == "vector sum" else tt.matrix("x", dtype=dtype)
    axis = -1 if x.ndim == 1 or cost.endswith("-1") else 1
    # exp written twice, as Theano's users do (merged into one node by the optimizer)
    c = tt.sum(tt.exp(x) / tt.exp(x).sum(axis=axis, keepdims=True))
    g = theano_dag.grad(-c if cost == "-sum" else c, x)
    f = theano_dag.function([x], g)
    assert nnet.SoftmaxGrad in {type(n.op) for n in f.maker.fgraph.apply_nodes}
    assert not any(n.op == tt.exp for n in f.maker.fgraph.apply_nodes)
    xv = np.array([[1000.0, -1000.0, 0.0], [100.0, 0.0, 2.0]], dtype=dtype)
    xv = xv[0] if x.ndim == 1 else xv
    np.testing.assert_allclose(f(xv), np.zeros_like(xv), atol=1e-6)


def test_gradient_of_a_written_out_softmax_keeps_other_uses_of_exp():
    m, w, u = tt.dmatrix("m"), tt.dmatrix("w"), tt.dmatrix("u")
    e = tt.exp(m)
    cost = tt.sum(w * written_softmax(m)) + tt.sum(u * e)
    g = theano_dag.grad(cost, m)
    args = [rng.normal(size=(2, 3)), rng.normal(size=(2, 3)), rng.normal(size=(2, 3))]
    fg = check([m, w, u], [g], None, args, stabilize)
    assert nnet.SoftmaxGrad in op_types(fg)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_issue_example_gradient_of_the_indexed_log_softmax(dtype):
    x, y = tt.matrix("x", dtype=dtype), tt.lvector("y")
    cost = -tt.mean(tt.log(nnet.softmax(x))[tt.arange(y.shape[0]), y])
    f = theano_dag.function([x, y], [cost, theano_dag.grad(cost, x)])
    xv = np.array([[1000, -1000, 0], [-800, 800, 5]], dtype=dtype)
    c, g = f(xv, np.array([0, 1]))
    assert c == 0 and np.array_equal(g, np.zeros((2, 3)))
    c, g = f(xv, np.array([1, 0]))
    np.testing.assert_allclose(c, 1800.0)
    np.testing.assert_allclose(g, [[0.5, -0.5, 0.0], [-0.5, 0.5, 0.0]])
    # float32's exp overflows at 88.7: logit gaps of 90 and 110, right and wrong
    xv = np.array([[90, 0, 0], [0, 110, 0]], dtype=dtype)
    c, g = f(xv, np.array([1, 1]))
    np.testing.assert_allclose(c, 45.0, rtol=1e-6)
    np.testing.assert_allclose(g, [[0.5, -0.5, 0.0], [0.0, 0.0, 0.0]], atol=1e-7)


def test_crossentropy_of_a_written_out_softmax_has_the_fused_gradient():
    x, y = tt.dmatrix("x"), tt.lvector("y")
    cost = nnet.categorical_crossentropy(written_softmax(x), y).mean()
    g = theano_dag.grad(cost, x)
    fg = check([x, y], [cost, g], None, [rng.normal(size=(3, 4)), np.array([0, 3, 1])], stabilize)
    ops = op_types(fg)
    assert nnet.CrossentropySoftmax1HotWithBiasDx in ops and nnet.SoftmaxGrad not in ops
    assert not any(n.op == tt.exp for n in fg.apply_nodes)


def test_excluding_stabilize_keeps_the_written_form():
    x, y = tt.dmatrix("x"), tt.lvector("y")
    cost = -tt.mean(tt.log(nnet.softmax(x))[tt.arange(y.shape[0]), y])
    mode = Mode(linker="py", optimizer="fast_run").excluding("stabilize")
    f = theano_dag.function([x, y], theano_dag.grad(cost, x), mode=mode)
    ops = {type(n.op) for n in f.maker.fgraph.apply_nodes}
    assert nnet.SoftmaxGrad in ops and nnet.LogSoftmax not in ops
    with np.errstate(all="ignore"):
        assert np.isnan(f(np.array([[1000.0, -1000.0, 0.0]]), np.array([0]))).all()


# -- log-likelihoods of the labels picked by advanced indexing --------------------------


def _nll_forms(x, y, b=None):
    """Theano's users' ways to write the summed negative log-likelihood of labels y."""
    z = x if b is None else x + b
    rows = tt.arange(y.shape[0])
    return [
        tt.sum(-tt.log(nnet.softmax(z)[rows, y])),
        -tt.sum(tt.log(nnet.softmax(z))[rows, y]),
        -tt.mean(nnet.log_softmax(z)[rows, y]),
    ]


def _ref_nll(xv, yv, bv=None):
    z = xv.astype("float64") + (0 if bv is None else bv)
    z = z - z.max(axis=1, keepdims=True)
    ls = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    sm = np.exp(ls)
    onehot = np.eye(xv.shape[1])[yv]
    return -ls[np.arange(len(yv)), yv], sm - onehot  # per row; d(sum)/dz


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("form", [0, 1, 2])
def test_indexed_log_softmax_is_the_fused_crossentropy(form, bias, dtype):
    x, y = tt.matrix("x", dtype=dtype), tt.lvector("y")
    b = tt.vector("b", dtype=dtype) if bias else None
    cost = _nll_forms(x, y, b)[form]
    ins = [x, y] + ([b] if bias else [])
    f = theano_dag.function(ins, [cost, theano_dag.grad(cost, x)])
    types = {type(n.op) for n in f.maker.fgraph.apply_nodes}
    assert nnet.CrossentropySoftmaxArgmax1HotWithBias in types
    assert nnet.CrossentropySoftmax1HotWithBiasDx in types
    assert not types & {AdvancedSubtensor, AdvancedIncSubtensor, nnet.LogSoftmax}
    # the gradient reads the fused op's softmax: one softmax computed
    assert nnet.Softmax not in types
    xv = np.array([[1000, -1000, 0, 3], [-800, 800, 5, 0], [1, 2, 3, 4]], dtype=dtype)
    bv = np.array([0.5, -2, 1, 0], dtype=dtype)
    yv = np.array([1, 1, 3])
    c, g = f(xv, yv, *([bv] if bias else []))
    nll, dz = _ref_nll(xv, yv, bv if bias else None)
    scale = 1 / 3 if form == 2 else 1
    assert c.dtype == dtype and g.dtype == dtype
    np.testing.assert_allclose(c, nll.sum() * scale, rtol=1e-6)
    np.testing.assert_allclose(g, dz * scale, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradient_alone_of_indexed_log_softmax(dtype):
    # Only the gradient: one softmax and the fused gradient op, no forward cross-entropy
    # kept for the shape of the cost's gradient (nor int32 labels' casts in the way).
    x, y = tt.matrix("x", dtype=dtype), tt.lvector("y")
    yi = tt.cast(y, "int32")
    b = tt.vector("b", dtype=dtype)
    a = tt.scalar("a", dtype=dtype)
    for cost in [
        -tt.sum(tt.log(nnet.softmax(x + b))[tt.arange(yi.shape[0]), yi]),
        a * tt.mean(-tt.log(nnet.softmax(x + b)[tt.arange(y.shape[0]), y])),
    ]:
        f = theano_dag.function([x, y, b, a], theano_dag.grad(cost, x), on_unused_input="ignore")
        types = [type(n.op) for n in f.maker.fgraph.apply_nodes]
        assert nnet.CrossentropySoftmax1HotWithBiasDx in types
        assert nnet.CrossentropySoftmaxArgmax1HotWithBias not in types
        assert types.count(nnet.Softmax) == 1 and nnet.SoftmaxGrad not in types
        xv = rng.normal(size=(5, 4)).astype(dtype) * 50
        bv = rng.normal(size=4).astype(dtype)
        yv = np.array([0, 3, 2, 2, 1])
        _, dz = _ref_nll(xv, yv, bv)
        scale = 1 if cost.owner.op == tt.neg else 0.5 / 5
        np.testing.assert_allclose(f(xv, yv, bv, 0.5), dz * scale, rtol=1e-5, atol=1e-6)


def test_indexed_log_softmax_of_other_rows_is_left_alone():
    # rows that are not arange(len(y)) (a reversed range): not the labels' likelihoods
    x, y = tt.dmatrix("x"), tt.lvector("y")
    cost = -tt.sum(nnet.log_softmax(x)[tt.arange(y.shape[0])[::-1], y])
    fg = check([x, y], [cost], None, [rng.normal(size=(3, 4)), np.array([0, 3, 1])], stabilize)
    assert nnet.CrossentropySoftmaxArgmax1HotWithBias not in op_types(fg)


def test_excluding_the_indexed_crossentropy_rewrites():
    x, y = tt.dmatrix("x"), tt.lvector("y")
    cost = _nll_forms(x, y)[0]
    mode = theano_dag.compile.mode.get_default_mode().excluding(
        "local_advanced_indexing_crossentropy_onehot",
        "local_advanced_indexing_crossentropy_onehot_grad",
    )
    f = theano_dag.function([x, y], [cost, theano_dag.grad(cost, x)], mode=mode)
    types = {type(n.op) for n in f.maker.fgraph.apply_nodes}
    assert nnet.CrossentropySoftmaxArgmax1HotWithBias not in types
    assert nnet.CrossentropySoftmax1HotWithBiasDx not in types
    c, g = f(np.array([[0.0, 1000.0]]), np.array([0]))
    np.testing.assert_allclose(c, 1000.0)
    np.testing.assert_allclose(g, [[-1.0, 1.0]])


def test_crossentropy_gradient_alone_computes_the_softmax_only():
    # grad of sum(crossentropy_categorical_1hot(softmax(x), y)): the fused op's
    # log-likelihoods were read for the gradient's shape only
    x, y = tt.dmatrix("x"), tt.lvector("y")
    cost = tt.sum(nnet.crossentropy_categorical_1hot(nnet.softmax(x), y))
    f = theano_dag.function([x, y], theano_dag.grad(cost, x))
    types = {type(n.op) for n in f.maker.fgraph.apply_nodes}
    assert nnet.CrossentropySoftmaxArgmax1HotWithBias not in types
    assert {nnet.Softmax, nnet.CrossentropySoftmax1HotWithBiasDx} <= types
    xv, yv = rng.normal(size=(3, 4)), np.array([0, 3, 1])
    np.testing.assert_allclose(f(xv, yv), _ref_nll(xv, yv)[1], rtol=1e-10)
    with pytest.raises(ValueError, match="class index out of range"):
        f(xv, np.array([0, 4, 1]))  # the gradient op still checks the labels


def test_softmax_over_the_last_axis_is_theanos_softmax_op():
    # however it is built (function, op instance, rewrite of the written-out form), a
    # softmax over a matrix's rows is one op, Theano's softmax_op: the nodes merge
    x = tt.dmatrix("x")
    outs = [nnet.softmax(x), nnet.softmax_op(x), nnet.softmax(x, axis=1), written_softmax(x)]
    f = theano_dag.function([x], outs)
    softmaxes = [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, nnet.Softmax)]
    assert len(softmaxes) == 1 and softmaxes[0].op == nnet.softmax_op
    xv = rng.normal(size=(2, 3))
    for got in f(xv):
        np.testing.assert_allclose(got, np.exp(xv) / np.exp(xv).sum(axis=1, keepdims=True))
    assert nnet.softmax(x, axis=0).owner.op == nnet.Softmax(0)


def test_fused_gradient_op_broadcasts_a_length_one_dy():
    dy = tt.TensorType("float64", shape=(1,))("dy")
    sm, y = tt.dmatrix("sm"), tt.lvector("y")
    dx = nnet.crossentropy_softmax_1hot_with_bias_dx(dy, sm, y)
    smv = np.array([[0.2, 0.8], [0.6, 0.4], [0.5, 0.5]])
    yv = np.array([1, 0, 0])
    got = theano_dag.function([dy, sm, y], dx)(np.array([3.0]), smv, yv)
    np.testing.assert_allclose(got, 3.0 * (smv - np.eye(2)[yv]))
    verify_grad(
        lambda d, s: nnet.crossentropy_softmax_1hot_with_bias_dx(d, s, yv),
        [np.array([3.0]), smv],
        rng=np.random.default_rng(0),
    )


@pytest.mark.parametrize(
    "theano_name, op_class",
    [
        ("local_logsoftmax", nnet.LogSoftmax),
        ("crossentropy_to_crossentropy_with_softmax", nnet.CrossentropySoftmaxArgmax1HotWithBias),
        (
            "local_softmax_grad_to_crossentropy_with_softmax_grad",
            nnet.CrossentropySoftmax1HotWithBiasDx,
        ),
    ],
)
def test_theanos_names_exclude_the_rewrites(theano_name, op_class):
    x, y = tt.dmatrix("x"), tt.lvector("y")
    outs = [tt.log(nnet.softmax(x)), nnet.crossentropy_categorical_1hot(nnet.softmax(x), y)]
    outs.append(theano_dag.grad(outs[1].sum(), x))
    default = theano_dag.compile.mode.get_default_mode()
    for mode, present in ((default, True), (default.excluding(theano_name), False)):
        f = theano_dag.function([x, y], outs, mode=mode)
        assert any(isinstance(n.op, op_class) for n in f.maker.fgraph.apply_nodes) is present
        got = f(np.array([[0.0, 3.0], [1.0, 1.0]]), np.array([1, 0]))
        np.testing.assert_allclose(got[1], [np.log1p(np.exp(-3.0)), np.log(2.0)])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("spread", ["fill", "alloc"])
def test_fused_gradient_of_one_value_spread_over_the_labels(spread, dtype):
    sm, y, c = tt.matrix("sm", dtype=dtype), tt.lvector("y"), tt.scalar("c", dtype=dtype)
    dy = tt.fill(y, c) if spread == "fill" else tt.alloc(c, y.shape[0])
    dx = nnet.crossentropy_softmax_1hot_with_bias_dx(tt.cast(dy, dtype), sm, y)
    f = theano_dag.function([sm, y, c], dx)
    (node,) = [n for n in f.maker.fgraph.apply_nodes if n.op == dx.owner.op]
    assert node.inputs[0].broadcastable == (True,)  # the value itself, broadcast by the op
    smv = np.array([[0.25, 0.75], [0.5, 0.5], [0.1, 0.9]], dtype=dtype)
    yv = np.array([1, 0, 1])
    got = f(smv, yv, 2.0)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, 2.0 * (smv - np.eye(2)[yv]), rtol=1e-6)
    with pytest.raises(ValueError):
        f(smv, np.array([1, 0]), 2.0)  # labels and rows disagree: still refused


# -- FAST_COMPILE runs the softmax rewrites, as Theano's does ---------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fast_compile_keeps_softmax_forms_finite(dtype):
    # Theano's FAST_COMPILE runs its log-softmax and cross-entropy rewrites (tagged
    # fast_compile and fast_compile_gpu): a classifier debugged in FAST_COMPILE gets
    # finite costs and gradients where a logit is far below the largest one.
    x, y, t = tt.matrix("x", dtype=dtype), tt.ivector("y"), tt.matrix("t", dtype=dtype)
    rows = tt.arange(y.shape[0])
    costs = [
        nnet.categorical_crossentropy(nnet.softmax(x), y).sum(),
        -tt.log(nnet.softmax(x))[rows, y].sum(),
        -(tt.log(nnet.softmax(x)) * t).sum(),
    ]
    xv = np.array([[1000.0, -1000.0, 0.0], [0.0, 3.0, -745.0]], dtype)
    yv = np.array([1, 2], "int32")
    tv = np.eye(3, dtype=dtype)[yv]
    nll, dnll = _ref_nll(xv, yv)
    tol = 1e-4 if dtype == "float32" else 1e-10
    for cost in costs:
        outs = [cost, theano_dag.grad(cost, x)]
        f = theano_dag.function([x, y, t], outs, mode="FAST_COMPILE", on_unused_input="ignore")
        got_cost, got_grad = f(xv, yv, tv)
        np.testing.assert_allclose(got_cost, nll.sum(), rtol=tol)
        np.testing.assert_allclose(got_grad, dnll, rtol=tol, atol=tol)
        ops = {type(n.op) for n in f.maker.fgraph.apply_nodes}
        assert nnet.SoftmaxGrad not in ops, ops  # no gradient divided by the softmax
        assert ops & {nnet.LogSoftmax, nnet.CrossentropySoftmaxArgmax1HotWithBias}, ops


def test_fast_compile_runs_only_the_tagged_stabilize_rules():
    x = tt.dmatrix("x")
    fc = theano_dag.function(
        [x], [tt.log(nnet.softmax(x)), tt.log1p(tt.exp(x))], mode="FAST_COMPILE"
    )
    ops = {str(n.op) for n in fc.maker.fgraph.apply_nodes}
    # the softmax form is rewritten; log1p(exp(x)), a softplus in FAST_RUN, is not (as in
    # Theano, whose FAST_COMPILE leaves its stabilize DB out)
    assert any("LogSoftmax" in o for o in ops), ops
    assert any("exp" in o for o in ops) and not any("softplus" in o for o in ops), ops
    excluded = theano_dag.function(
        [x],
        tt.log(nnet.softmax(x)),
        mode=theano_dag.compile.mode.get_mode("FAST_COMPILE").excluding("fast_compile_gpu"),
    )
    assert nnet.Softmax in {type(n.op) for n in excluded.maker.fgraph.apply_nodes}
