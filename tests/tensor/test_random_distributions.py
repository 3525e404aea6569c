"""The distributions added for Theano programs (integers, poisson, exponential, gamma,
beta, categorical, multinomial, dirichlet, shuffle_row_elements): shapes (static,
inferred, drawn), dtypes, moments against the distribution's, and the import paths
Theano code uses (``shared_randomstreams``, ``sandbox.rng_mrg``, ``T.grad``,
``tensor.signal.pool``)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.sandbox.rng_mrg import MRG_RandomStreams
from theano_dag.tensor.random import RandomStream
from theano_dag.tensor.shape import shape_i
from theano_dag.tensor.shared_randomstreams import RandomStreams
from theano_dag.tensor.signal import pool

N = 20000


def _one(draw, mode=None):
    return theano_dag.function([], draw, mode=mode)()


# name: (draw from a stream, expected dtype, expected mean, expected variance)
SCALAR_CASES = {
    "random_integers": (lambda s: s.random_integers((N,), 1, 6), "int64", 3.5, 35 / 12),
    "integers": (lambda s: s.integers((N,), 0, 10), "int64", 4.5, 99 / 12),
    "poisson": (lambda s: s.poisson((N,), lam=3.0), "int64", 3.0, 3.0),
    "exponential": (lambda s: s.exponential((N,), scale=2.0), "float64", 2.0, 4.0),
    "gamma": (lambda s: s.gamma((N,), 2.0, 1.5), "float64", 3.0, 4.5),
    "beta": (lambda s: s.beta((N,), 2.0, 3.0), "float64", 0.4, 0.04),
    "categorical": (lambda s: s.categorical((N,), p=[0.2, 0.3, 0.5]), "int64", 1.3, 0.61),
}


@pytest.mark.parametrize("mode", [Mode(linker="py"), None], ids=["py", "default"])
@pytest.mark.parametrize("name", sorted(SCALAR_CASES))
def test_moments(name, mode):
    draw, dtype, mean, var = SCALAR_CASES[name]
    out = draw(RandomStreams(seed=5))
    assert out.dtype == dtype and out.type.shape == (N,)
    v = _one(out, mode)
    assert v.dtype == dtype and v.shape == (N,)
    se = np.sqrt(var / N)
    assert abs(v.mean() - mean) < 5 * se
    assert abs(v.var() - var) < 0.1 * var


def test_integer_ranges_and_float32():
    s = RandomStreams(seed=1)
    inc = _one(s.random_integers((500,), -2, 2))
    assert set(inc.tolist()) == {-2, -1, 0, 1, 2}
    exc = _one(s.integers((500,), 4))
    assert set(exc.tolist()) == {0, 1, 2, 3}
    assert s.gamma((3,), dtype="float32").dtype == "float32"
    assert s.exponential((3,), scale=np.float32(1)).dtype == theano_dag.config.floatX
    with pytest.raises(TypeError, match="parameter low must be integers"):
        s.integers((3,), 0.5, 2.0)


def test_vector_parameter_draws():
    s = RandomStreams(seed=2)
    m = _one(s.multinomial((N,), n=10, pvals=[0.2, 0.8]))
    assert m.shape == (N, 2) and (m.sum(axis=1) == 10).all()
    assert abs(m[:, 1].mean() - 8.0) < 0.05
    d = _one(s.dirichlet((N,), alpha=[1.0, 2.0, 3.0]))
    assert d.shape == (N, 3)
    np.testing.assert_allclose(d.sum(axis=1), 1.0)
    np.testing.assert_allclose(d.mean(axis=0), [1 / 6, 2 / 6, 3 / 6], atol=0.01)
    # a batch of parameter vectors, no size: one draw per row
    p = tt.dmatrix("p")
    cat = s.categorical(p=p)
    mult = s.multinomial(n=3, pvals=p)
    f = theano_dag.function([p], [cat, mult])
    eye = np.eye(3)[[2, 0, 1]]
    c, mm = f(eye)
    assert c.tolist() == [2, 0, 1]
    np.testing.assert_array_equal(mm, 3 * eye)


def test_inferred_shapes():
    s = RandomStreams(seed=3)
    p = tt.dmatrix("p")
    x = tt.dvector("x")
    outs = [
        s.categorical(p=p),
        s.multinomial(n=2, pvals=p),
        s.dirichlet(alpha=p),
        s.dirichlet(size=(x.shape[0], 2), alpha=[1.0, 1.0, 1.0], ndim=2),
        s.poisson(lam=x),
    ]
    want = [(4,), (4, 3), (4, 3), (5, 2, 3), (5,)]
    values = {p: np.ones((4, 3)) / 3, x: np.ones(5)}
    drawn = theano_dag.function([p, x], outs)(values[p], values[x])
    assert [d.shape for d in drawn] == want
    for out, shape in zip(outs, want):
        node = out.owner
        in_shapes = [
            None if not hasattr(v, "ndim") else tuple(shape_i(v, d) for d in range(v.ndim))
            for v in node.inputs
        ]
        inferred = node.op.infer_shape(None, node, in_shapes)[1]
        got = theano_dag.function([p, x], list(inferred), on_unused_input="ignore")
        assert tuple(int(v) for v in got(values[p], values[x])) == shape


def test_shuffle_row_elements():
    s = RandomStreams(seed=4)
    m = tt.dtensor3("m")
    f = theano_dag.function([m], s.shuffle_row_elements(m))
    v = np.arange(2 * 3 * 50, dtype="float64").reshape(2, 3, 50)
    out = f(v)
    assert out.shape == v.shape
    np.testing.assert_array_equal(np.sort(out, axis=-1), v)
    assert not np.array_equal(out[0, 0], out[0, 1] - 50)  # the rows have different orders
    assert not np.array_equal(out, f(v))  # and new ones per call
    vec = tt.dvector("vec")
    shuffled = theano_dag.function([vec], s.shuffle_row_elements(vec))(np.arange(10.0))
    assert sorted(shuffled.tolist()) == list(range(10))


def test_theano_import_paths():
    assert RandomStreams is tt.random.RandomStreams and RandomStreams is not RandomStream
    assert issubclass(MRG_RandomStreams, RandomStreams)
    x = tt.dvector("x")
    assert tt.grad is theano_dag.grad
    assert np.allclose(tt.grad((x**2).sum(), x).eval({x: np.array([1.0, 2.0])}), [2.0, 4.0])
    assert tt.jacobian is theano_dag.jacobian and tt.hessian is theano_dag.hessian
    assert isinstance(x, tt.Variable)
    img = tt.dtensor4("img")
    pooled = pool.pool_2d(img, ws=(2, 2), ignore_border=True)
    assert pooled.eval({img: np.ones((1, 1, 4, 4))}).shape == (1, 1, 2, 2)

    srng = MRG_RandomStreams(seed=234)
    u = srng.uniform((1000,), nstreams=8)
    n = srng.normal((1000,), avg=1.0, std=2.0)
    b = srng.binomial((1000,), p=0.25, dtype="float64")
    mult = srng.multinomial(pvals=np.array([[0.1, 0.9], [1.0, 0.0]]))
    f = theano_dag.function([], [u, n, b, mult])
    uv, nv, bv, mv = f()
    assert 0 <= uv.min() and uv.max() < 1
    assert abs(nv.mean() - 1.0) < 0.3 and abs(bv.mean() - 0.25) < 0.06
    assert mv.shape == (2, 2) and mv.sum(axis=1).tolist() == [1, 1] and mv[1].tolist() == [1, 0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mrg_truncated_normal_against_scipy(dtype):
    # Keras 2.3.1's truncated_normal (and so its glorot_normal, he_normal... initializers)
    # draws srng.normal(size, avg, std, dtype=dtype, truncate=True)
    srng = MRG_RandomStreams(seed=7)
    x = tt.matrix("x", dtype=dtype)
    cut = srng.normal(x.shape, avg=1.0, std=2.0, ndim=2, dtype=dtype, truncate=True)
    wide = srng.truncated_normal((N,), avg=-1.0, std=0.5, dtype=dtype)
    assert cut.dtype == wide.dtype == dtype
    f = theano_dag.function([x], [cut, wide])
    a, b = f(np.zeros((100, 200), dtype=dtype))
    assert a.dtype == b.dtype == dtype and a.shape == (100, 200) and b.shape == (N,)
    assert a.min() >= -3.0 and a.max() <= 5.0  # within two std of the mean
    assert stats.kstest(a.ravel(), stats.truncnorm(-2, 2, loc=1.0, scale=2.0).cdf).pvalue > 1e-3
    # truncated_normal's std is the one asked for: a normal 1/0.8796 wider, truncated
    law = stats.truncnorm(-2, 2, loc=-1.0, scale=0.5 / 0.87962566103423978)
    assert abs(law.std() - 0.5) < 1e-9
    assert stats.kstest(b, law.cdf).pvalue > 1e-3
    assert abs(b.std() - 0.5) < 0.01 and abs(b.mean() + 1.0) < 0.01
    a2, _ = f(np.zeros((100, 200), dtype=dtype))
    assert not np.array_equal(a, a2)  # the generator moves on between calls


def test_dropout_mlp_with_mrg_streams_trains():
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(64, 4))
    ys = (xs[:, 0] + xs[:, 1] > 0).astype("float64")
    srng = MRG_RandomStreams(seed=1)
    w1 = theano_dag.shared(rng.normal(size=(4, 16)) * 0.5)
    w2 = theano_dag.shared(rng.normal(size=16) * 0.5)
    x, y = tt.dmatrix("x"), tt.dvector("y")
    h = tt.tanh(tt.dot(x, w1))
    h = h * srng.binomial(size=h.shape, p=0.8, dtype=h.dtype) / 0.8
    p = tt.sigmoid(tt.dot(h, w2))
    loss = -tt.mean(y * tt.log(p) + (1 - y) * tt.log(1 - p))
    gw1, gw2 = tt.grad(loss, [w1, w2])
    step = theano_dag.function([x, y], loss, updates=[(w1, w1 - 0.5 * gw1), (w2, w2 - 0.5 * gw2)])
    first = step(xs, ys)
    for _ in range(200):
        last = step(xs, ys)
    assert last < 0.5 * first


def test_mrg_binomial_takes_n_before_p():
    # Theano's MRG_RandomStreams.binomial(size, n, p, ...): a positional call was read
    # as p=1, ndim=0.25 and refused
    v = _one(MRG_RandomStreams(seed=2).binomial((N,), 1, 0.25))
    assert v.dtype == np.int64 and set(np.unique(v).tolist()) == {0, 1}
    assert abs(v.mean() - 0.25) < 5 * np.sqrt(0.25 * 0.75 / N)


def test_mrg_choice_draws_rows_without_replacement():
    # Theano's MRG choice: a=None, p a matrix, size distinct columns per row, drawn one
    # after the other among the columns left (its ChoiceFromUniform)
    srng = MRG_RandomStreams(seed=4)
    pv = np.array([0.1, 0.2, 0.3, 0.4])
    k = tt.lscalar("k")
    p = tt.dmatrix("p")
    f = theano_dag.function([p, k], srng.choice(size=k, replace=False, p=p, dtype="int32"))
    v = f(np.tile(pv, (N, 1)), 2)
    assert v.dtype == np.int32 and v.shape == (N, 2) and (v[:, 0] != v[:, 1]).all()
    pairs = [(i, j) for i in range(4) for j in range(4) if i != j]
    counts = {q: 0 for q in pairs}
    for a, b in v.tolist():
        counts[(a, b)] += 1
    want = [N * pv[i] * pv[j] / (1 - pv[i]) for i, j in pairs]
    assert stats.chisquare([counts[q] for q in pairs], want).pvalue > 1e-3
    # a column of probability 0 is drawn only once the others are all drawn
    rows = f(np.array([[0.5, 0.0, 0.5], [0.0, 1.0, 0.0]]), 2)
    assert sorted(rows[0].tolist()) == [0, 2] and rows[1, 0] == 1
    assert sorted(f(np.array([[0.2, 0.3, 0.5]]), 3)[0].tolist()) == [0, 1, 2]
    with pytest.raises(
        ValueError, match="cannot draw 3 columns without replacement from rows of 2"
    ):
        f(np.array([[0.5, 0.5]]), 3)
    # a row with nothing left to draw gives -1 (Theano's Python code; its C code leaves
    # the entry unset)
    assert f(np.array([[0.0, 1.0, 0.0]]), 2).tolist() == [[1, -1]]
    with pytest.raises(NotImplementedError, match="without replacement only"):
        srng.choice(size=2, p=np.eye(3))
    with pytest.warns(DeprecationWarning, match="multinomial_wo_replacement is deprecated"):
        old = srng.multinomial_wo_replacement(n=2, pvals=np.array([[0.0, 0.5, 0.5]]))
    assert sorted(_one(old)[0].tolist()) == [1, 2]


def test_mrg_choice_types_gradient_and_bad_sizes():
    srng = MRG_RandomStreams(seed=6)
    # broadcastable where p is, as Theano's (a column of probabilities gives a column)
    column = srng.choice(size=1, replace=False, p=np.ones((10, 1)))
    assert column.broadcastable == (False, True)
    assert _one(column).tolist() == [[0]] * 10
    assert srng.choice(size=1, replace=False, p=np.full((3, 4), 0.25)).broadcastable == (
        False,
        False,
    )
    # the draws are not differentiable in p (Theano's undefined gradient)
    p1 = tt.dscalar("p1")
    drawn = srng.choice(size=1, replace=False, p=tt.stack([p1, 0.2, 0.3])[None, :])
    with pytest.raises(theano_dag.gradient.NullTypeGradError):
        theano_dag.grad(drawn.sum(), p1)
    # a negative size is refused when the draw is built, naming the size
    for make in (
        lambda: srng.uniform((-1, 100)),
        lambda: srng.binomial((2, -3), p=0.5),
        lambda: RandomStream(seed=1).normal(0.0, 1.0, size=np.array([-2])),
    ):
        with pytest.raises(ValueError, match=r"size: size .* has a negative entry"):
            make()
