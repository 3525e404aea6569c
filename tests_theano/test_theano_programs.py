"""Theano 1.1.2 programs that use the numerical vocabulary (linear algebra, special
functions, random streams, top-k), run twice with only their imports changed: once with
theano-pymc, once with theano_dag. Their results must agree."""

import importlib
import pathlib
from collections import OrderedDict

import numpy as np
import pytest


def _modules(package):
    """The modules a Theano program imports, from ``theano`` or ``theano_dag``."""
    names = {
        "theano": "",
        "T": ".tensor",
        "slinalg": ".tensor.slinalg",
        "nlinalg": ".tensor.nlinalg",
        "sort": ".tensor.sort",
        "rng_mrg": ".sandbox.rng_mrg",
        "bn": ".tensor.nnet.bn",
        "random": ".tensor.random.utils",
        "io": ".compile.io",
    }
    return {k: importlib.import_module(package + v) for k, v in names.items()}


def gp_marginal_likelihood(m):
    """A Gaussian process's negative log marginal likelihood and its gradient in the
    length scale (Cholesky, triangular solves, log-determinant from the factor)."""
    T, theano, slinalg, nlinalg = m["T"], m["theano"], m["slinalg"], m["nlinalg"]
    x, y, ell = T.dvector("x"), T.dvector("y"), T.dscalar("ell")
    d = x.dimshuffle(0, "x") - x.dimshuffle("x", 0)
    K = T.exp(-0.5 * d**2 / ell**2) + 0.1 * T.eye(x.shape[0])
    L = slinalg.cholesky(K)
    alpha = slinalg.solve_upper_triangular(L.T, slinalg.solve_lower_triangular(L, y))
    nll = 0.5 * T.dot(y, alpha) + T.sum(T.log(nlinalg.extract_diag(L)))
    alt = 0.5 * T.dot(y, slinalg.solve(K, y)) + 0.5 * T.log(nlinalg.det(K))
    f = theano.function([x, y, ell], [nll, alt, T.grad(nll, ell)])
    rng = np.random.RandomState(0)
    xs = np.linspace(0, 3, 8)
    return f(xs, np.sin(xs) + 0.1 * rng.randn(8), 0.7)


def bayesian_logistic_regression(m):
    """A logistic regression's log posterior with a Student-t prior (gammaln) and a
    log-sum-exp over the two classes, and its gradient."""
    T, theano = m["T"], m["theano"]
    w, X, y = T.dvector("w"), T.dmatrix("X"), T.dvector("y")
    nu = 3.0
    log_prior = T.sum(
        T.gammaln((nu + 1) / 2)
        - T.gammaln(nu / 2)
        - 0.5 * T.log(nu * np.pi)
        - (nu + 1) / 2 * T.log1p(w**2 / nu)
    )
    z = T.dot(X, w)
    logits = T.stack([T.zeros_like(z), z], axis=1)
    lse = T.log(T.sum(T.exp(logits), axis=1))
    loglik = T.sum(y * z - lse)
    logp = log_prior + loglik
    f = theano.function([w, X, y], [logp, T.grad(logp, w)])
    rng = np.random.RandomState(1)
    Xv = rng.randn(20, 3) * 300  # large logits: the log-sum-exp must not overflow
    return f(np.array([0.5, -1.0, 2.0]), Xv, (rng.rand(20) > 0.5).astype("float64"))


def dropout_mlp(m):
    """An MLP step with MRG dropout masks (keep probability 1, so both libraries draw the
    same all-ones masks) and its gradient."""
    T, theano, rng_mrg = m["T"], m["theano"], m["rng_mrg"]
    srng = rng_mrg.MRG_RandomStream(seed=42)  # 1.1.2's name
    rng = np.random.RandomState(2)
    W1 = theano.shared(rng.randn(4, 5), name="W1")
    W2 = theano.shared(rng.randn(5), name="W2")
    x, y = T.dmatrix("x"), T.dvector("y")
    h = T.tanh(T.dot(x, W1))
    h = h * srng.binomial(size=h.shape, p=1.0, dtype="float64")
    p = T.nnet.sigmoid(T.dot(h, W2))
    loss = T.mean(T.nnet.binary_crossentropy(p, y))
    g1, g2 = T.grad(loss, [W1, W2])
    f = theano.function([x, y], [loss, g1, g2])
    return f(rng.randn(6, 4), (rng.rand(6) > 0.5).astype("float64"))


def topk_retrieval(m):
    """Top-k retrieval: the 3 best-scoring documents for a query and the 2 worst scores
    (sorted=False, Theano's only choice), compared as sets."""
    T, theano, sort = m["T"], m["theano"], m["sort"]
    q, D = T.dvector("q"), T.dmatrix("D")
    scores = T.dot(D, q)
    best_values, best = sort.topk_and_argtopk(scores, 3, sorted=False)
    worst = sort.topk(scores, -2, sorted=False)
    f = theano.function([q, D], [best_values, best, worst])
    rng = np.random.RandomState(3)
    values, idx, low = f(rng.randn(6), rng.randn(10, 6))
    return [np.sort(values), np.sort(idx), np.sort(low)]


def batch_norm_double_backprop(m):
    """Batch normalization in training mode (spatial, parameters of the input's rank), its
    gradients, and the gradient of a product of those with the batch statistics held
    constant (``consider_constant``, the second order Theano's batch norm gives), and
    Theano's gradient op called on its own."""
    T, theano, bn = m["T"], m["theano"], m["bn"]
    x, dy, w = T.dtensor4("x"), T.dtensor4("dy"), T.dtensor4("w")
    channels = T.TensorType("float64", (True, False, True, True))
    g, b = channels("g"), channels("b")
    out, mean, invstd = bn.batch_normalization_train(x, g, b, "spatial", 1e-3)
    gx, gg, gb = T.grad(None, [x, g, b], known_grads={out: dy})
    second = T.grad(
        None,
        [x, dy, g],
        known_grads=OrderedDict([(gx, w), (gg, 2 * gg), (gb, b)]),
        consider_constant=[mean, invstd],
        return_disconnected="zero",
    )
    op_grads = bn.AbstractBatchNormTrainGrad((0, 2, 3))(x, dy, g, mean, invstd)
    f = theano.function([x, g, b, dy, w], [out, mean, invstd, gx, gg, gb, *second, *op_grads])
    rng = np.random.RandomState(4)
    return f(
        3 + 2 * rng.randn(4, 3, 2, 5),
        rng.randn(1, 3, 1, 1),
        rng.randn(1, 3, 1, 1),
        rng.randn(4, 3, 2, 5),
        rng.randn(4, 3, 2, 5),
    )


def seeded_draws(m):
    """Theano 1.1.2's RandomStream: a seed gives the same numbers, distribution by
    distribution, and each draw's generator is a RandomState that Theano's documentation
    reseeds, reads and restores (``rng.seed``, ``get_state``, ``set_state``)."""
    theano = m["theano"]
    s = m["random"].RandomStream(77)
    draws = [
        s.normal(1.0, 2.0, size=(5,)),
        s.halfnormal(1.0, 2.0, size=(5,)),
        s.uniform(-1.0, 2.0, size=(2, 3)),
        s.beta(2.0, 3.0, size=(5,)),
        s.gamma(2.0, 3.0, size=(5,)),
        s.exponential(2.0, size=(5,)),
        s.multivariate_normal(np.zeros(2), np.array([[2.0, 0.5], [0.5, 1.0]]), size=(3,)),
        s.dirichlet(np.array([1.0, 2.0, 3.0]), size=(3,)),
        s.poisson(3.0, size=(5,)),
        s.cauchy(1.0, 2.0, size=(5,)),
        s.halfcauchy(1.0, 2.0, size=(5,)),
        s.bernoulli(0.3, size=(5,)),
        s.binomial(7, 0.3, size=(5,)),
        s.nbinom(5, 0.3, size=(5,)),
        s.betabinom(10, 2.0, 3.0, size=(5,)),
        s.multinomial(5, np.array([0.2, 0.3, 0.5]), size=(3,)),
        s.randint(0, 10, size=(5,)),
        s.choice(np.arange(10), size=(3,)),
        s.choice(np.arange(4), size=(3,), p=np.array([0.1, 0.2, 0.3, 0.4])),
        s.permutation(np.arange(6)),
    ]
    f = theano.function([], draws)
    first = f()
    u = draws[2]
    rng = u.rng.get_value(borrow=True)
    rng.seed(89234)
    u.rng.set_value(rng, borrow=True)
    state = u.rng.get_value().get_state()
    second = f()
    rng = u.rng.get_value(borrow=True)
    rng.set_state(state)
    u.rng.set_value(rng, borrow=True)
    again = f()
    s.seed(902340)
    return [*first, *second, *again, *f()]


def stateful_inputs(m):
    """Theano's tuple shorthand for function inputs (its documentation's examples): state
    kept by the function, ``((s, update), value)``, read and written through ``fn[name]``,
    ``fn.value`` and ``fn.container``; defaults, ``(name, (w, update), value)``."""
    T, theano, In = m["T"], m["theano"], m["io"].In
    a, b, c = T.scalars("xys")
    fn = theano.function([a, b, ((c, c + a + b), 10.0)], [])
    seen = [fn["s"].copy()]
    fn(1, 2)
    seen.append(fn["s"].copy())
    fn["s"] = 99.0
    fn(1, 0)
    seen.append(fn.value[c].copy())
    fn.container[c].value = 5.0
    fn(2, 2)
    seen.append(fn["s"].copy())
    x, y, z, w = T.scalar(), T.scalar("y"), T.scalar("z"), T.scalar("w")
    g = theano.function([x, y, In(z, value=42), ("acc", (w, w + x), 0)], x + y + z + w)
    for call in ((1, 2), (1, 2, 3), (1, 2), (1,)):
        seen.append(g(*call) if len(call) > 1 else g(call[0], y=5, acc=400))
        seen.append(g["acc"].copy())
    return seen


def rop_of_a_linear_map(m):
    """The R-operator of ``dot(x, W)`` in ``W`` (Theano's gradients tutorial): the function
    takes W as an input although the Jacobian-vector product does not read it."""
    T, theano = m["T"], m["theano"]
    W, V, x = T.dmatrix("W"), T.dmatrix("V"), T.dvector("x")
    f = theano.function([W, V, x], T.Rop(T.dot(x, W), W, V))
    rng = np.random.RandomState(5)
    return [f(rng.randn(3, 2), rng.randn(3, 2), rng.randn(3))]


def mrg_draws(m):
    """Theano's MRG streams (MRG31k3p): uniforms in float64 and float32 from a guessed and
    a given number of streams, a dropout mask, Box-Muller normals, and the categorical
    draws made from uniforms (one-hot rows, counts, columns without replacement), over
    two calls."""
    T, theano = m["T"], m["theano"]
    srng = m["rng_mrg"].MRG_RandomStream(seed=234)
    h = T.dmatrix("h")
    p = np.array([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1]])
    outs = [
        srng.uniform((10, 20)),
        srng.uniform((7,), low=-2.0, high=3.0, nstreams=3),
        srng.uniform((5, 3), dtype="float32"),
        h * srng.binomial(h.shape, p=0.5, dtype="float64"),
        srng.normal((5, 3), avg=1.0, std=2.0),
        srng.normal((7,)),
        srng.multinomial(pvals=p),
        srng.multinomial(pvals=p, n=5),
        srng.choice(size=3, replace=False, p=p),
    ]
    f = theano.function([h], outs)
    return [*f(np.ones((4, 6))), *f(np.ones((4, 6)))]


@pytest.mark.parametrize(
    "program",
    [
        gp_marginal_likelihood,
        bayesian_logistic_regression,
        dropout_mlp,
        batch_norm_double_backprop,
        seeded_draws,
        stateful_inputs,
        rop_of_a_linear_map,
        mrg_draws,
    ],
)
def test_program_gives_theanos_results(program):
    want = program(_modules("theano"))
    got = program(_modules("theano_dag"))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-10)


def test_topk_retrieval_gives_numpys_results():
    # Not compared with theano-pymc: its TopKOp indexes arrays with a list of slices,
    # which numpy 1.23 (the version its venv needs) refuses with IndexError.
    values, idx, low = topk_retrieval(_modules("theano_dag"))
    rng = np.random.RandomState(3)
    q, D = rng.randn(6), rng.randn(10, 6)
    scores = D @ q
    np.testing.assert_array_equal(idx, np.sort(np.argsort(scores)[-3:]))
    np.testing.assert_allclose(values, np.sort(scores)[-3:])
    np.testing.assert_allclose(low, np.sort(scores)[:2])


def test_mrg_streams_give_lecuyers_reference_samples():
    # L'Ecuyer's Java implementation of MRG31k3p (the samples file theano-pymc ships):
    # 12 streams of 7 substreams, 5 values each, from the seed 12345.
    theano = importlib.import_module("theano")
    path = pathlib.Path(theano.__file__).parent / "sandbox" / "samples_MRG31k3p_12_7_5.txt"
    java = np.loadtxt(path)
    m = _modules("theano_dag")
    srng = m["rng_mrg"].MRG_RandomStreams(seed=12345)
    samples = []
    for _ in range(12):
        f = m["theano"].function([], srng.uniform(size=(7,), nstreams=7, dtype="float64"))
        samples.append(np.array([f() for _ in range(5)]).T.flatten())
    np.testing.assert_array_equal(np.array(samples).flatten(), java)
