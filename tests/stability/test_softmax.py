"""Stability corpus: softmax, log-softmax, categorical cross-entropy and log-sum-exp at
logits far apart (+-1000, 800; 90 and 110, past float32's exp overflow at 88.7), each
written the ways people write it (``nnet.softmax`` or ``exp(x) / sum(exp(x))``, the
log of either, indexed, through a one-hot product, the ``nnet`` helpers), value and
gradient against stable numpy formulas (a log-sum-exp shifted by the max, in float64).
"""

import numpy as np
import pytest
from corpus import ENGINE_PARAMS, FLOATS, Case, check

import theano_dag
import theano_dag.tensor as tt
from theano_dag.datasets import load_digits
from theano_dag.tensor.nnet import nnet

# Rows: a confident right prediction at +-1000 and 800, float32's overflow at 90 and
# 110 (right and wrong), moderate logits, and a wrong prediction at 1000.
X = np.array(
    [
        [1000.0, -1000.0, 0.0],
        [-800.0, 800.0, 5.0],
        [90.0, 0.0, -20.0],
        [0.0, 110.0, 3.0],
        [1.0, 2.0, 3.0],
        [1000.0, -1000.0, 0.0],
    ]
)
Y = np.array([0, 1, 1, 0, 2, 1])
T = np.eye(3)[Y]  # the same labels, one-hot
# The vector of a Hessian-vector product (a matrix of X's shape).
U = np.array([[1.0, -2.0, 0.5], [0.25, 1.0, -1.0], [2.0, 0.5, 1.0]] * 2)
# A bias with no row where the gradient cancels to 1e-3 (float32 loses digits there,
# whatever the form).
B = np.array([0.5, -200.0, 0.5])
N = len(Y)
ROWS = np.arange(N)

# The gradients cancel to near 0 where a prediction is right (softmax - one-hot): an
# absolute tolerance, relative to the largest gradient, a few ulps of the dtype.
ATOL = {"float32": 1e-6, "float64": 1e-13}


# ---- stable references (float64) ---------------------------------------------------


def lse(x, axis=-1, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    return out if keepdims else np.squeeze(out, axis=axis)


def log_sm(x, axis=-1):
    return x - lse(x, axis, keepdims=True)


def sm(x, axis=-1):
    return np.exp(log_sm(x, axis))


def softmax_vjp(x, w, axis=-1):
    """The gradient of ``sum(w * softmax(x))``."""
    s = sm(x, axis)
    return s * (w - np.sum(w * s, axis=axis, keepdims=True))


def log_softmax_vjp(x, w, axis=-1):
    """The gradient of ``sum(w * log_softmax(x))``."""
    return w - sm(x, axis) * np.sum(w, axis=axis, keepdims=True)


def lse_hvp(x, u):
    """The Hessian of ``sum(lse(x, axis=1))`` times ``u``: ``p * u - p * (p . u)`` per row,
    ``p`` the row's softmax."""
    p = sm(x)
    return p * u - p * np.sum(p * u, axis=1, keepdims=True)


def lse_hvp_vjp(x, u, w):
    """The gradient of ``sum(w * lse_hvp(x, u))``: per row ``p * (a - <a>) - p * (w - <w>)
    <u> - <w> p * (u - <u>)``, ``<v>`` the softmax's mean of ``v``, ``a = w * u``."""
    p = sm(x)

    def mean(v):
        return np.sum(p * v, axis=1, keepdims=True)

    a = w * u
    return p * (a - mean(a)) - p * (w - mean(w)) * mean(u) - mean(w) * p * (u - mean(u))


def nll_vjp(x, y, w):
    """The gradient of ``sum(w * -log_softmax(x)[rows, y])`` (``w`` per row)."""
    return np.asarray(w)[..., None] * (sm(x) - np.eye(x.shape[1])[y])


# ---- the formulas as written -------------------------------------------------------


def written_softmax(x, axis=1):
    e = tt.exp(x)
    return e / tt.sum(e, axis=axis, keepdims=True)


def rows_of(v):
    return tt.arange(v.shape[0])


def case(name, build, inputs, ref, ref_grad):
    return Case(name, build, inputs, ref, ref_grad, atol=ATOL)


SOFTMAX = lambda x: sm(x)  # noqa: E731
SOFTMAX_GRAD = lambda x, w: [softmax_vjp(x, w)]  # noqa: E731
LOG_SOFTMAX = lambda x: log_sm(x)  # noqa: E731
LOG_SOFTMAX_GRAD = lambda x, w: [log_softmax_vjp(x, w)]  # noqa: E731
MEAN_NLL = lambda x, y: -np.mean(log_sm(x)[ROWS, y])  # noqa: E731
MEAN_NLL_GRAD = lambda x, y, w: [nll_vjp(x, y, np.full(N, w / N))]  # noqa: E731
NLL = lambda x, y: -log_sm(x)[ROWS, y]  # noqa: E731
NLL_GRAD = lambda x, y, w: [nll_vjp(x, y, w)]  # noqa: E731
ONE_HOT_NLL = lambda x, t: -np.sum(t * log_sm(x), axis=1)  # noqa: E731
ONE_HOT_NLL_GRAD = lambda x, t, w: [  # noqa: E731
    -log_softmax_vjp(x, w[:, None] * t),
    -w[:, None] * log_sm(x),
]

CASES = [
    # softmax
    case("softmax(x)", nnet.softmax, [X], SOFTMAX, SOFTMAX_GRAD),
    case(
        "exp(x) / sum(exp(x), axis=1, keepdims=True)", written_softmax, [X], SOFTMAX, SOFTMAX_GRAD
    ),
    case(
        "exp(x) / sum(exp(x), axis=1).dimshuffle(0, 'x')",
        lambda x: tt.exp(x) / tt.sum(tt.exp(x), axis=1).dimshuffle(0, "x"),
        [X],
        SOFTMAX,
        SOFTMAX_GRAD,
    ),
    case(
        "exp(x) / sum(exp(x), axis=0, keepdims=True)",
        lambda x: written_softmax(x, axis=0),
        [X.T.copy()],
        lambda x: sm(x, 0),
        lambda x, w: [softmax_vjp(x, w, 0)],
    ),
    case(
        "exp(v) / sum(exp(v)) of a vector",
        lambda v: tt.exp(v) / tt.sum(tt.exp(v)),
        [np.array([0.0, 110.0, 109.0])],
        SOFTMAX,
        SOFTMAX_GRAD,
    ),
    case(
        "softmax(x + b)",
        lambda x, b: nnet.softmax(x + b),
        [X, B],
        lambda x, b: sm(x + b),
        lambda x, b, w: [softmax_vjp(x + b, w), softmax_vjp(x + b, w).sum(axis=0)],
    ),
    # log-softmax
    case("log(softmax(x))", lambda x: tt.log(nnet.softmax(x)), [X], LOG_SOFTMAX, LOG_SOFTMAX_GRAD),
    case(
        "log(exp(x) / sum(exp(x), axis=1, keepdims=True))",
        lambda x: tt.log(written_softmax(x)),
        [X],
        LOG_SOFTMAX,
        LOG_SOFTMAX_GRAD,
    ),
    case(
        "x - log(sum(exp(x), axis=1, keepdims=True))",
        lambda x: x - tt.log(tt.sum(tt.exp(x), axis=1, keepdims=True)),
        [X],
        LOG_SOFTMAX,
        LOG_SOFTMAX_GRAD,
    ),
    case(
        "log(softmax(x + b))",
        lambda x, b: tt.log(nnet.softmax(x + b)),
        [X, B],
        lambda x, b: log_sm(x + b),
        lambda x, b, w: [log_softmax_vjp(x + b, w), log_softmax_vjp(x + b, w).sum(axis=0)],
    ),
    # the mean negative log-likelihood, indexed
    case(
        "-mean(log(softmax(x))[arange(n), y])",
        lambda x, y: -tt.mean(tt.log(nnet.softmax(x))[rows_of(y), y]),
        [X, Y],
        MEAN_NLL,
        MEAN_NLL_GRAD,
    ),
    case(
        "-mean(log(softmax(x)[arange(n), y]))",
        lambda x, y: -tt.mean(tt.log(nnet.softmax(x)[rows_of(y), y])),
        [X, Y],
        MEAN_NLL,
        MEAN_NLL_GRAD,
    ),
    case(
        "-mean(log(exp(x) / sum(exp(x)))[arange(n), y])",
        lambda x, y: -tt.mean(tt.log(written_softmax(x))[rows_of(y), y]),
        [X, Y],
        MEAN_NLL,
        MEAN_NLL_GRAD,
    ),
    case(
        "-log(softmax(x))[:, 0]",
        lambda x: -tt.log(nnet.softmax(x))[:, 0],
        [X],
        lambda x: -log_sm(x)[:, 0],
        lambda x, w: [nll_vjp(x, np.zeros(N, dtype=int), w)],
    ),
    case(
        "-log(softmax(x)[:, 0])",
        lambda x: -tt.log(nnet.softmax(x)[:, 0]),
        [X],
        lambda x: -log_sm(x)[:, 0],
        lambda x, w: [nll_vjp(x, np.zeros(N, dtype=int), w)],
    ),
    # categorical cross-entropy
    case(
        "categorical_crossentropy(softmax(x), y)",
        lambda x, y: nnet.categorical_crossentropy(nnet.softmax(x), y),
        [X, Y],
        NLL,
        NLL_GRAD,
    ),
    case(
        "categorical_crossentropy(exp(x) / sum(exp(x)), y)",
        lambda x, y: nnet.categorical_crossentropy(written_softmax(x), y),
        [X, Y],
        NLL,
        NLL_GRAD,
    ),
    case(
        "categorical_crossentropy(softmax(x + b), y)",
        lambda x, b, y: nnet.categorical_crossentropy(nnet.softmax(x + b), y),
        [X, B, Y],
        lambda x, b, y: NLL(x + b, y),
        lambda x, b, y, w: [nll_vjp(x + b, y, w), nll_vjp(x + b, y, w).sum(axis=0)],
    ),
    case(
        "categorical_crossentropy(softmax(x), one_hot)",
        lambda x, t: nnet.categorical_crossentropy(nnet.softmax(x), t),
        [X, T],
        ONE_HOT_NLL,
        ONE_HOT_NLL_GRAD,
    ),
    case(
        "-sum(t * log(exp(x) / sum(exp(x))), axis=1)",
        lambda x, t: -tt.sum(t * tt.log(written_softmax(x)), axis=1),
        [X, T],
        ONE_HOT_NLL,
        ONE_HOT_NLL_GRAD,
    ),
    case(
        "crossentropy_softmax_1hot(x, y)[0]",
        lambda x, y: nnet.crossentropy_softmax_1hot(x, y)[0],
        [X, Y],
        NLL,
        NLL_GRAD,
    ),
    # log-sum-exp
    case(
        "log(sum(exp(x), axis=1))",
        lambda x: tt.log(tt.sum(tt.exp(x), axis=1)),
        [X],
        lambda x: lse(x, 1),
        lambda x, w: [w[:, None] * sm(x)],
    ),
    case(
        "log(sum(exp(x), axis=1, keepdims=True))",
        lambda x: tt.log(tt.sum(tt.exp(x), axis=1, keepdims=True)),
        [X],
        lambda x: lse(x, 1, keepdims=True),
        lambda x, w: [w * sm(x)],
    ),
    case(
        "log(sum(exp(v))) of a vector",
        lambda v: tt.log(tt.sum(tt.exp(v))),
        [X[1]],
        lambda v: lse(v),
        lambda v, w: [w * sm(v)],
    ),
    case(
        "log(mean(exp(x), axis=1))",
        lambda x: tt.log(tt.mean(tt.exp(x), axis=1)),
        [X],
        lambda x: lse(x, 1) - np.log(x.shape[1]),
        lambda x, w: [w[:, None] * sm(x)],
    ),
    # its second derivative: the Hessian times U, the gradient of sum(U * gradient)
    case(
        "the Hessian of log(sum(exp(x), axis=1)) times a matrix",
        lambda x: tt.grad(tt.sum(tt.grad(tt.sum(tt.log(tt.sum(tt.exp(x), axis=1))), x) * U), x),
        [X],
        lambda x: lse_hvp(x, U),
        lambda x, w: [lse_hvp_vjp(x, U, w)],
    ),
]


# ---- a logit of +inf: softmax's limit, the whole mass on it ------------------------

# one +inf per row beside finite values, -inf and 1000 (x - max(x) was inf - inf, NaN)
X_INF = np.array(
    [[np.inf, 0.0, 1.0], [1.0, np.inf, -np.inf], [-1000.0, 1000.0, np.inf], [1.0, 2.0, 3.0]]
)
Y_INF = np.array([0, 2, 1, 2])  # right at the +inf twice, wrong (loss inf) once


def sm_inf(x):
    top = np.isposinf(x.max(axis=1, keepdims=True))
    with np.errstate(invalid="ignore"):
        return np.where(top, np.isposinf(x).astype(float), sm(x))


def log_sm_inf(x):
    with np.errstate(divide="ignore"):
        return np.log(sm_inf(x))


INF_CASES = [
    case(
        "softmax(x) with a +inf",
        nnet.softmax,
        [X_INF],
        sm_inf,
        lambda x, w: [sm_inf(x) * (w - np.sum(w * sm_inf(x), axis=1, keepdims=True))],
    ),
    case(
        "log_softmax(x) with a +inf",
        nnet.log_softmax,
        [X_INF],
        log_sm_inf,
        lambda x, w: [w - sm_inf(x) * np.sum(w, axis=1, keepdims=True)],
    ),
    case(
        "log(softmax(x)) with a +inf",
        lambda x: tt.log(nnet.softmax(x)),
        [X_INF],
        log_sm_inf,
        lambda x, w: [w - sm_inf(x) * np.sum(w, axis=1, keepdims=True)],
    ),
    case(
        "categorical_crossentropy(softmax(x), y) with a +inf",
        lambda x, y: nnet.categorical_crossentropy(nnet.softmax(x), y),
        [X_INF, Y_INF],
        lambda x, y: -log_sm_inf(x)[np.arange(len(y)), y],
        lambda x, y, w: [w[:, None] * (sm_inf(x) - np.eye(3)[y])],
    ),
]


def lse_inf(x):
    with np.errstate(invalid="ignore"):
        return np.where(np.isposinf(x).any(axis=1), np.inf, lse(x))


# the gradient of each is the softmax, with its limit at a +inf (exp(x - m) / sum was
# inf / inf: the shift m was 0 there)
INF_CASES += [
    case(
        "logsumexp(x, axis=1) with a +inf",
        lambda x: tt.logsumexp(x, axis=1),
        [X_INF],
        lse_inf,
        lambda x, w: [w[:, None] * sm_inf(x)],
    ),
    case(
        "log(sum(exp(x), axis=1)) with a +inf",
        lambda x: tt.log(tt.sum(tt.exp(x), axis=1)),
        [X_INF],
        lse_inf,
        lambda x, w: [w[:, None] * sm_inf(x)],
    ),
]
CASES += INF_CASES


def test_case_names_are_unique():
    names = [c.name for c in CASES]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("engine", ENGINE_PARAMS)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_corpus(case, engine, dtype):
    check(case, engine, dtype)


# ---- the tutorial's digits model at a learning rate where the naive gradient is NaN --


def _train_digits(lib, dtype, lr=20.0, epochs=20, batch=64):
    """The tutorial's model (``softmax(x W + b)``, mean negative log-likelihood of
    ``log(p_y)[arange(n), y]``), trained by minibatch gradient descent with ``lib``
    (theano_dag, or PyTensor's API: ``(tensor, function, shared, grad, softmax, mode)``);
    returns the test accuracy and every step's cost."""

    tensor, function, shared, grad_, softmax, mode = lib
    x_train, y_train, x_test, y_test = load_digits()
    x, y = tensor.matrix("x", dtype=dtype), tensor.lvector("y")
    W = shared(np.zeros((64, 10), dtype=dtype), name="W")
    b = shared(np.zeros(10, dtype=dtype), name="b")
    p_y = softmax(tensor.dot(x, W) + b)
    cost = -tensor.mean(tensor.log(p_y)[tensor.arange(y.shape[0]), y])
    gW, gb = grad_(cost, [W, b])
    rate = np.asarray(lr, dtype=dtype)
    train = function([x, y], cost, updates=[(W, W - rate * gW), (b, b - rate * gb)], mode=mode)
    predict = function([x], tensor.argmax(p_y, axis=1), mode=mode)
    costs = [
        float(train(x_train[s : s + batch].astype(dtype), y_train[s : s + batch]))
        for _ in range(epochs)
        for s in range(0, len(x_train), batch)
    ]
    return float(np.mean(predict(x_test.astype(dtype)) == y_test)), np.array(costs)


def test_digits_model_trains_in_float32_at_learning_rate_20_as_in_pytensor():
    pytensor = pytest.importorskip("pytensor")
    import pytensor.tensor as pt
    from pytensor.compile.mode import Mode as PTMode
    from pytensor.tensor.special import softmax as pt_softmax

    ours = (
        tt,
        theano_dag.function,
        theano_dag.shared,
        theano_dag.grad,
        nnet.softmax,
        None,
    )
    theirs = (
        pt,
        pytensor.function,
        pytensor.shared,
        pytensor.grad,
        lambda z: pt_softmax(z, axis=-1),
        PTMode(linker="py", optimizer="fast_run"),  # their rewrites, no C compiler
    )
    accuracy, costs = _train_digits(ours, "float32")
    their_accuracy, their_costs = _train_digits(theirs, "float32")
    assert np.isfinite(costs).all(), f"a NaN or inf cost at step {np.argmin(np.isfinite(costs))}"
    # same first steps (before float32 roundings diverge the two runs), same end
    np.testing.assert_allclose(costs[:5], their_costs[:5], rtol=1e-4)
    assert their_accuracy > 0.9
    assert abs(accuracy - their_accuracy) <= 0.01, (accuracy, their_accuracy)
