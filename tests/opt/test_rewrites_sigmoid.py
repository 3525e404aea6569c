"""The sigmoid family's stabilizations: the structure of the rewritten graphs (forward
and gradient), their values, and the tags that turn them off."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.graph.fg import FunctionGraph
from theano_dag.opt.rewrites.sigmoid import sigmoid_key
from theano_dag.tensor import nnet

from .rewrite_helpers import apply_dbs, check

rng = np.random.default_rng(29)
FAST_RUN_PY = Mode(linker="py", optimizer="fast_run")


def stabilize(fg):
    return apply_dbs(fg, "canonicalize", "stabilize")


def scalar_ops(fg):
    """The names of the scalar ops of the Elemwise nodes of ``fg``."""
    return [n.op.scalar_op.name for n in fg.apply_nodes if hasattr(n.op, "scalar_op")]


def vec(n=5):
    return rng.normal(size=n) * 3


def test_sigmoid_key():
    x = tt.dvector("x")
    s = tt.sigmoid(x)
    assert sigmoid_key(s) == (x, False)
    assert sigmoid_key(tt.sigmoid(-x)) == (x, True)
    assert sigmoid_key(tt.sigmoid(tt.neg(tt.neg(x)))) == (x, False)
    assert sigmoid_key(1 - s) == (x, True)
    assert sigmoid_key(1 + -s) == (x, True)
    assert sigmoid_key(2 - s) is None
    assert sigmoid_key(tt.exp(x)) is None


def test_sigmoid_written_out():
    x = tt.dvector("x")
    e = tt.exp(x)
    check(
        [x],
        [
            1 / (1 + tt.exp(-x)),
            1 / (1 + e),
            e / (1 + e),
            e / (e + 1),
            tt.reciprocal(1 + tt.exp(-x)),
            (1 + tt.exp(-x)) ** -1,
        ],
        [tt.sigmoid(x), tt.sigmoid(-x), tt.sigmoid(x), tt.sigmoid(x), tt.sigmoid(x), tt.sigmoid(x)],
        [vec()],
        stabilize,
    )


def test_sigmoid_among_the_factors_of_a_product():
    x, a, b = tt.dvectors("x", "a", "b")
    e = tt.exp(x)
    # the gradient of 1 / (1 + exp(-x)): exp(-x) / (1 + exp(-x))**2
    en = tt.exp(-x)
    check(
        [x, a, b],
        [a * e / ((1 + e) * b), a / (b * (1 + e)), en / (1 + en) ** 2],
        [
            a * tt.sigmoid(x) / b,
            a * tt.sigmoid(-x) / b,
            tt.sigmoid(-x) * tt.sigmoid(x),
        ],
        [vec(), vec(), vec()],
        lambda fg: stabilize(fg),
    )


def test_sigmoid_times_exp():
    x, a = tt.dvectors("x", "a")
    check(
        [x, a],
        [
            tt.sigmoid(x) * tt.exp(-x),
            tt.exp(x) * a * tt.sigmoid(-x),
            -tt.exp(x) * (1 - tt.sigmoid(x)),
        ],
        [tt.sigmoid(-x), a * tt.sigmoid(x), -tt.sigmoid(x)],
        [vec(), vec()],
        stabilize,
    )


def test_sigmoids_cancelled_above_and_below():
    x, a, b = tt.dvectors("x", "a", "b")
    s = tt.sigmoid(x)
    # 1 - sigmoid(-x) is sigmoid(x), written differently: canonicalize cannot cancel it
    check(
        [x, a, b],
        [a * s / (b * (1 - tt.sigmoid(-x))), a * (1 + tt.exp(x)) * tt.sigmoid(-x)],
        [a / b, a],
        [vec(), vec(), vec()],
        stabilize,
    )
    # everything cancelled: a 1 of the product's shape
    m = tt.dmatrix("m")
    fg = check([m], [tt.sigmoid(m) / (1 - tt.sigmoid(-m))], None, [vec(6).reshape(2, 3)], stabilize)
    assert "true_div" not in scalar_ops(fg)


def test_1msigmoid():
    x = tt.dvector("x")
    check(
        [x],
        [1 - tt.sigmoid(x), 1 - tt.sigmoid(-x)],
        [tt.sigmoid(-x), tt.sigmoid(x)],
        [vec()],
        stabilize,
    )


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "bool", "int8", "int64"])
def test_1msigmoid_of_an_integer_negates_in_float(dtype):
    # The negation that 1 - sigmoid(x) -> sigmoid(-x) brings is made on x cast to the
    # sigmoid's float: a uint8 -1 is 255, and 1 - sigmoid(uint8 1) came out as 1.0.
    x = tt.vector("x", dtype=dtype)
    xv = np.array([0, 1, 2, 7]).astype(dtype)
    ref = 1 / (1 + np.exp(xv.astype("float64")))  # 1 - sigmoid(x) = sigmoid(-x)
    f = theano_dag.function([x], [1 - tt.sigmoid(x), tt.log(1 - tt.sigmoid(x))])
    assert "sub" not in scalar_ops(stabilize(FunctionGraph([x], [1 - tt.sigmoid(x)])))
    one_minus, log_one_minus = f(xv)
    assert one_minus.dtype == tt.sigmoid(x).dtype
    np.testing.assert_allclose(one_minus, ref, rtol=1e-6)
    np.testing.assert_allclose(log_one_minus, np.log(ref), rtol=1e-5)
    # The negation of an unsigned integer wraps: no sign the key may move elsewhere.
    if dtype.startswith("u"):
        nx = -x
        assert sigmoid_key(1 - tt.sigmoid(nx)) == (nx, True)
        with np.errstate(over="ignore"):  # exp(65535): the sigmoid is 0 all the same
            wrapped = 1 / (1 + np.exp((-xv).astype("float64")))
        np.testing.assert_allclose(
            theano_dag.function([x], 1 - tt.sigmoid(nx))(xv),
            wrapped,  # 0.5, then ~1e-111 or 0: 0 in float32
            rtol=1e-6,
            atol=1e-30,
        )


def test_a_minus_a_sigmoid():
    x, a, b = tt.dvectors("x", "a", "b")
    s = tt.sigmoid(x)
    check(
        [x, a, b],
        [a * b - a * b * s, a * s - a],
        [tt.mul(a, b, tt.sigmoid(-x)), -(a * tt.sigmoid(-x))],
        [vec(), vec(), vec()],
        stabilize,
    )
    # a different factor, or not the opposite coefficient: left alone
    fg = stabilize(FunctionGraph([x, a, b], [a - b * s, 2 * a - a * s], clone=False))
    assert "sigmoid" in scalar_ops(fg) and scalar_ops(fg).count("sub") == 2


def test_sigmoids_cancelled_through_a_sum():
    x, a, b = tt.dvectors("x", "a", "b")
    s = tt.sigmoid(x)
    fg = check(
        [x, a, b],
        [s * (1 - s) * (a / s - b / (1 - s))],
        None,
        [vec(), vec(), vec()],
        stabilize,
    )
    assert "true_div" not in scalar_ops(fg)
    f = theano_dag.function([x, a, b], s * (1 - s) * (a / s - b / (1 - s)))
    ones = np.ones(3)
    np.testing.assert_allclose(f(np.array([-800.0, 800.0, 0.0]), ones, ones), [1.0, -1.0, 0.0])


def test_log_sigmoid():
    x = tt.dvector("x")
    check(
        [x],
        [
            tt.log(tt.sigmoid(x)),
            tt.log(1 - tt.sigmoid(x)),
            tt.log1p(-tt.sigmoid(x)),
            tt.log(1 / (1 + tt.exp(-x))),
        ],
        [-tt.softplus(-x), -tt.softplus(x), -tt.softplus(x), -tt.softplus(-x)],
        [vec()],
        stabilize,
    )


def test_logit_of_sigmoid_and_sigmoid_of_logit():
    x = tt.dvector("x")
    p = tt.dvector("p")
    check(
        [x, p],
        [tt.log(tt.sigmoid(x) / (1 - tt.sigmoid(x))), tt.sigmoid(tt.log(p / (1 - p)))],
        [x, p],
        [vec(), rng.uniform(0.05, 0.95, size=5)],
        stabilize,
    )


def test_log_of_a_product_of_sigmoids_is_a_sum_of_softpluses():
    x, y = tt.dvectors("x", "y")
    outs = [
        tt.log(tt.sigmoid(x) * tt.sigmoid(-x)),
        tt.log(2 * tt.sigmoid(x) * tt.exp(y)),
        tt.log(tt.exp(y) * (tt.sigmoid(x) * (1 - tt.sigmoid(y)))),  # nested: a gradient's
    ]
    fg = check([x, y], outs, None, [vec(), vec()], stabilize)
    assert "log" not in scalar_ops(fg) and "sigmoid" not in scalar_ops(fg)
    assert "softplus" in scalar_ops(fg)
    # where the written product is 0 (|x| > 745) its log is -inf; the sum of logs is not
    f = theano_dag.function([x, y], outs)
    got = f(np.array([-800.0, 800.0, 0.0]), np.array([800.0, -800.0, 0.0]))
    np.testing.assert_allclose(got[0], [-800.0, -800.0, -2 * np.log(2)])
    np.testing.assert_allclose(got[1], [np.log(2) - 800 + 800, np.log(2) - 800, 0.0])
    np.testing.assert_allclose(got[2], [800 - 800 - 800, -800 - 0.0 - 0.0, -2 * np.log(2)])


def test_log_of_a_product_with_a_factor_of_any_sign_is_left_alone():
    # log(a * b) of two negatives is not log(a) + log(b): only sigmoids, exps and
    # positive constants are split
    x, a = tt.dvectors("x", "a")
    outs = [tt.log(tt.sigmoid(x) * a), tt.log(-2 * tt.sigmoid(x)), tt.log(tt.exp(x) * a)]
    fg = stabilize(FunctionGraph([x, a], outs))
    assert scalar_ops(fg).count("log") == 3


def test_products_without_sigmoids_left_alone():
    x, a, b = tt.dvectors("x", "a", "b")
    outs = [a * tt.exp(x) / (b + tt.exp(x)), a / (2 + tt.exp(x)), a * b - a, tt.log(a / (1 - a))]
    fg = stabilize(FunctionGraph([x, a, b], outs))
    assert "sigmoid" not in scalar_ops(fg)


def bce_gradient_graph():
    z, t = tt.dvectors("z", "t")
    cost = nnet.binary_crossentropy(nnet.sigmoid(z), t).sum()
    return [z, t], cost, theano_dag.grad(cost, z)


def test_binary_crossentropy_of_a_sigmoid_gradient():
    (z, t), cost, g = bce_gradient_graph()
    fg = stabilize(FunctionGraph([z, t], [cost, g]))
    ops = scalar_ops(fg)
    assert "true_div" not in ops and "log" not in ops  # no s / s, no log(0)
    f = theano_dag.function([z, t], [cost, g], mode=FAST_RUN_PY)
    c, gz = f(np.array([800.0, -800.0, 0.5]), np.array([0.0, 1.0, 1.0]))
    s = 1 / (1 + np.exp(-0.5))
    np.testing.assert_allclose(c, 1600.0 - np.log(s))
    np.testing.assert_allclose(gz, [1.0, -1.0, s - 1.0])


def test_binary_crossentropy_of_a_sigmoid_is_the_sigmoid_cross_entropy():
    # the forward becomes the one op of sigmoid_binary_crossentropy (on z, also for
    # sigmoid(-z) and 1 - sigmoid(z)), the gradient in z the sigmoid's minus the target:
    # binary_crossentropy_grad(s, t) * s * (1 - s) cancelled, its -t / s not inf * 0
    z, t = tt.dvectors("z", "t")
    for s, sign in ((nnet.sigmoid(z), 1), (nnet.sigmoid(-z), -1), (1 - nnet.sigmoid(z), -1)):
        cost = nnet.binary_crossentropy(s, t).sum()
        gz = theano_dag.grad(cost, z)
        fg = stabilize(FunctionGraph([z, t], [cost, gz]))
        ops = scalar_ops(fg)
        assert "binary_crossentropy" not in ops and "binary_crossentropy_grad" not in ops
        assert ops.count("sigmoid_binary_crossentropy") == 1
        assert "log" not in ops and "true_div" not in ops
        f = theano_dag.function([z, t], [cost, gz], mode=FAST_RUN_PY)
        zv = np.array([-np.inf, -800.0, 40.0, 0.5, np.inf])
        tv = np.array([0.0, 1.0, 1.0, 0.25, 1.0])
        c, g = f(sign * zv, tv)
        sv = 1 / (1 + np.exp(-0.5))
        assert np.isfinite(c) and np.allclose(
            c, 800.0 + np.exp(-40.0) - 0.25 * np.log(sv) - 0.75 * np.log1p(-sv)
        )
        want = sign * np.array([0.0, -1.0, -np.exp(-40.0), sv - 0.25, 0.0])
        np.testing.assert_allclose(g, want, rtol=1e-12)


def test_stabilize_excluded_gives_the_written_arithmetic():
    (z, t), cost, g = bce_gradient_graph()
    f = theano_dag.function([z, t], g, mode=FAST_RUN_PY.excluding("stabilize"))
    with np.errstate(all="ignore"):
        got = f(np.array([800.0, 0.5]), np.array([0.0, 1.0]))
    assert np.isnan(got[0]) and np.isfinite(got[1])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_logistic_regression_gradient_has_no_exp(dtype):
    X = tt.TensorType(dtype, shape=(None, None))("X")
    w, y = tt.TensorType(dtype, shape=(None,))("w"), tt.TensorType(dtype, shape=(None,))("y")
    p_1 = 1 / (1 + tt.exp(-tt.dot(X, w)))
    xent = -y * tt.log(p_1) - (1 - y) * tt.log(1 - p_1)
    gw = theano_dag.grad(xent.mean(), w)
    fg = stabilize(FunctionGraph([X, w, y], [xent, gw]))
    ops = scalar_ops(fg)
    assert "exp" not in ops and "log" not in ops and "log1p" not in ops
    assert "sigmoid" in ops and "softplus" in ops
