"""Theano 1.1.2's numpy-like ``RandomStream`` (parameters first, ``size`` a keyword) and
its distributions (``tensor.random.basic``): each distribution's moments and law against
scipy's, shapes, dtypes, parameter broadcasting, ``size=None``, seeds, fresh draws per
call, updates, on every engine; and Theano 1.0's size-first ``RandomStreams`` kept as it
was."""

from __future__ import annotations

import contextlib
import pickle
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.compile.sharedvalue import shared
from theano_dag.config import config
from theano_dag.engines.cpu.native import ckernel
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.tensor.random import RandomStream, RandomStreams, basic
from theano_dag.tensor.random.basic import (
    BernoulliRV,
    MvNormalRV,
    NormalRV,
    PermutationRV,
    PoissonRV,
    RandIntRV,
)
from theano_dag.tensor.shared_randomstreams import RandomStreams as SharedRandomStreams

N = 20000
OCL_OK, OCL_WHY = opencl_available()

#: Each engine: its mode, the config flags and the C kernels' build mode it runs under.
ENGINES = {
    "py": (lambda: Mode(linker="py"), {}, None),
    "cpu_numpy": (lambda: Mode(linker="cpu", optimizer="fast_run"), {"cxx": ""}, None),
    "cpu_c": (lambda: Mode(linker="cpu", optimizer="fast_run"), {}, "sync"),
    "opencl": (lambda: Mode(linker="opencl"), {}, None),
}
ENGINE_PARAMS = [
    "py",
    "cpu_numpy",
    "cpu_c",
    pytest.param("opencl", marks=pytest.mark.skipif(not OCL_OK, reason=f"no OpenCL: {OCL_WHY}")),
]


def compile_on(engine, inputs, outputs, **kwargs):
    mode, flags, build = ENGINES[engine]
    if engine == "cpu_c" and not theano_dag.config.cxx:
        pytest.skip("no C compiler (config.cxx is empty)")
    building = ckernel.compile_mode(build) if build else contextlib.nullcontext()
    with config.change_flags(**flags), building:
        return theano_dag.function(inputs, outputs, mode=mode(), **kwargs)


def _one(draw):
    return theano_dag.function([], draw)()


# -- the two cases that were wrong --------------------------------------------------------


def test_poisson_takes_lam_first_and_size_by_keyword():
    rs = RandomStream(seed=0)
    n = tt.lscalar("n")
    draws = rs.poisson(3.0, size=(n,))
    assert draws.dtype == "int64" and draws.ndim == 1
    v = theano_dag.function([n], draws)(N)
    assert v.shape == (N,)
    assert abs(v.mean() - 3.0) < 5 * np.sqrt(3.0 / N)
    assert abs(v.var() - 3.0) < 0.3


def test_permutation_of_an_int_is_one_permutation():
    v = _one(RandomStream(seed=0).permutation(5))
    assert v.shape == (5,) and sorted(v.tolist()) == [0, 1, 2, 3, 4]
    # Theano 1.0's permutation(size, n=1) is unchanged on RandomStreams: five draws of
    # arange(1)
    assert _one(RandomStreams(seed=0).permutation(5)).tolist() == [[0]] * 5


# -- each distribution against scipy ------------------------------------------------------

# name: (draw from a stream, dtype, the scipy distribution of the same law)
CASES = {
    "normal": (lambda s: s.normal(2.0, 3.0, size=(N,)), "floatX", stats.norm(2.0, 3.0)),
    "halfnormal": (
        lambda s: s.halfnormal(1.0, 2.0, size=(N,)),
        "floatX",
        stats.halfnorm(1.0, 2.0),
    ),
    "truncated_normal": (
        lambda s: s.truncated_normal(1.0, 2.0, size=(N,)),
        "floatX",
        stats.truncnorm(-2.0, 2.0, loc=1.0, scale=2.0),
    ),
    "uniform": (lambda s: s.uniform(-1.0, 3.0, size=(N,)), "floatX", stats.uniform(-1.0, 4.0)),
    "exponential": (lambda s: s.exponential(2.0, size=(N,)), "floatX", stats.expon(scale=2.0)),
    "gamma": (lambda s: s.gamma(2.0, 0.5, size=(N,)), "floatX", stats.gamma(2.0, scale=2.0)),
    "invgamma": (
        lambda s: s.invgamma(6.0, 2.0, size=(N,)),
        "floatX",
        stats.invgamma(6.0, scale=2.0),
    ),
    "beta": (lambda s: s.beta(2.0, 3.0, size=(N,)), "floatX", stats.beta(2.0, 3.0)),
    "truncexpon": (
        lambda s: s.truncexpon(2.0, 1.0, 0.5, size=(N,)),
        "floatX",
        stats.truncexpon(2.0, loc=1.0, scale=0.5),
    ),
    "bernoulli": (lambda s: s.bernoulli(0.3, size=(N,)), "int64", stats.bernoulli(0.3)),
    "binomial": (lambda s: s.binomial(10, 0.3, size=(N,)), "int64", stats.binom(10, 0.3)),
    "nbinom": (lambda s: s.nbinom(5, 0.4, size=(N,)), "int64", stats.nbinom(5, 0.4)),
    "betabinom": (
        lambda s: s.betabinom(10, 2.0, 3.0, size=(N,)),
        "int64",
        stats.betabinom(10, 2.0, 3.0),
    ),
    "poisson": (lambda s: s.poisson(3.0, size=(N,)), "int64", stats.poisson(3.0)),
    "randint": (lambda s: s.randint(1, 7, size=(N,)), "int64", stats.randint(1, 7)),
    "integers": (lambda s: s.integers(4, size=(N,)), "int64", stats.randint(0, 4)),
}
CONTINUOUS = {"normal", "halfnormal", "uniform", "exponential", "gamma", "invgamma"}
CONTINUOUS |= {"beta", "truncexpon", "truncated_normal"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_distribution_against_scipy(name):
    draw, dtype, law = CASES[name]
    out = draw(RandomStream(seed=11))
    dtype = config.floatX if dtype == "floatX" else dtype
    assert out.dtype == dtype and out.type.shape == (N,)
    v = _one(out)
    assert v.dtype == dtype and v.shape == (N,)
    mean, var = (float(m) for m in law.stats(moments="mv"))
    assert abs(v.mean() - mean) < 5 * np.sqrt(var / N)
    assert abs(v.var() - var) < 0.1 * var
    if name in CONTINUOUS:  # the whole law, not only two moments
        assert stats.kstest(v, law.cdf).pvalue > 1e-3
    else:
        support = law.support()
        assert v.min() >= support[0] and v.max() <= support[1]


@pytest.mark.parametrize(
    "name, law", [("cauchy", stats.cauchy(1.0, 2.0)), ("halfcauchy", stats.halfcauchy(1.0, 2.0))]
)
def test_cauchy_against_scipy(name, law):
    v = _one(getattr(RandomStream(seed=12), name)(1.0, 2.0, size=(N,)))
    # no mean: the quartiles instead (within 5 standard errors: a sample quantile's is
    # sqrt(q (1 - q) / N) / pdf), and the whole law
    q = np.array([0.25, 0.5, 0.75])
    se = np.sqrt(q * (1 - q) / N) / law.pdf(law.ppf(q))
    assert (np.abs(np.quantile(v, q) - law.ppf(q)) < 5 * se).all()
    assert stats.kstest(v, law.cdf).pvalue > 1e-3


def test_defaults_of_the_parameters():
    rs = RandomStream(seed=3)
    z, u, e, p = (
        rs.normal(size=(N,)),
        rs.uniform(size=(N,)),
        rs.exponential(size=(N,)),
        rs.poisson(size=(N,)),
    )
    zv, uv, ev, pv = theano_dag.function([], [z, u, e, p])()
    assert abs(zv.mean()) < 0.05 and abs(zv.std() - 1) < 0.05
    assert uv.min() >= 0 and uv.max() < 1 and abs(uv.mean() - 0.5) < 0.01
    assert abs(ev.mean() - 1) < 0.05 and abs(pv.mean() - 1) < 0.05
    mvn = _one(rs.multivariate_normal(size=(N,)))
    assert mvn.shape == (N, 1) and abs(mvn.std() - 1) < 0.05


def test_vector_distributions():
    rs = RandomStream(seed=4)
    cov = np.array([[2.0, 0.6], [0.6, 1.0]])
    mvn = _one(rs.multivariate_normal([1.0, -1.0], cov, size=(N,)))
    assert mvn.shape == (N, 2)
    np.testing.assert_allclose(mvn.mean(axis=0), [1.0, -1.0], atol=0.05)
    np.testing.assert_allclose(np.cov(mvn.T), cov, atol=0.08)
    d = _one(rs.dirichlet([1.0, 2.0, 3.0], size=(N,)))
    assert d.shape == (N, 3)
    np.testing.assert_allclose(d.sum(axis=1), 1.0)
    np.testing.assert_allclose(d.mean(axis=0), [1 / 6, 2 / 6, 3 / 6], atol=0.01)
    m = _one(rs.multinomial(10, [0.2, 0.8], size=(N,)))
    assert m.dtype == np.int64 and m.shape == (N, 2) and (m.sum(axis=1) == 10).all()
    assert abs(m[:, 1].mean() - 8.0) < 0.05
    c = _one(rs.categorical([0.2, 0.3, 0.5], size=(N,)))
    assert c.dtype == np.int64 and abs(c.mean() - 1.3) < 0.03


def test_vector_distributions_broadcast_batches():
    rs = RandomStream(seed=5)
    means = tt.dmatrix("means")
    cov = np.diag([1e-12, 1e-12])
    x = rs.multivariate_normal(means, cov)  # no size: one draw per row
    batch = rs.multivariate_normal(means, cov, size=(4, 3))  # size broadcasts the rows
    f = theano_dag.function([means], [x, batch, x.shape, batch.shape])
    mv = np.array([[0.0, 1.0], [10.0, 11.0], [20.0, 21.0]])
    a, b, sa, sb = f(mv)
    np.testing.assert_allclose(a, mv, atol=1e-4)
    np.testing.assert_allclose(b, np.broadcast_to(mv, (4, 3, 2)), atol=1e-4)
    assert sa.tolist() == [3, 2] and sb.tolist() == [4, 3, 2]
    p = tt.dmatrix("p")
    cat = rs.categorical(p)
    mult = rs.multinomial(3, p)
    eye = np.eye(3)[[2, 0, 1]]
    c, mm = theano_dag.function([p], [cat, mult])(eye)
    assert c.tolist() == [2, 0, 1]
    np.testing.assert_array_equal(mm, 3 * eye)


def test_multivariate_normal_refuses_a_covariance_that_is_not_psd():
    x = RandomStream(seed=0).multivariate_normal([0.0, 0.0], [[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(ValueError, match="multivariate_normal_rv.*positive"):
        _one(x)


def test_choice_and_permutation():
    rs = RandomStream(seed=6)
    no_repeat = rs.choice(5, size=(5,), replace=False)
    values = np.array([10.0, 20.0, 30.0])
    weighted = rs.choice(values, size=(N,), p=[0.0, 0.25, 0.75])
    one = rs.choice(3)
    shuffled = rs.permutation(values)
    rows = rs.permutation(np.arange(6.0).reshape(3, 2))
    several = rs.permutation(4, size=(2,))
    assert no_repeat.dtype == "int64" and weighted.dtype == "float64" and one.ndim == 0
    nr, w, o, sh, r, sev = theano_dag.function(
        [], [no_repeat, weighted, one, shuffled, rows, several]
    )()
    assert sorted(nr.tolist()) == [0, 1, 2, 3, 4]
    assert set(w.tolist()) <= {20.0, 30.0} and abs((w == 30.0).mean() - 0.75) < 0.02
    assert o in (0, 1, 2)
    assert sorted(sh.tolist()) == [10.0, 20.0, 30.0]
    assert sorted(r.tolist()) == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    assert sev.shape == (2, 4) and all(sorted(x) == [0, 1, 2, 3] for x in sev.tolist())
    # every order of a short vector shows up, each about as often
    perm = rs.permutation(3)
    f = theano_dag.function([], perm)
    counts = {}
    for _ in range(600):
        k = tuple(f().tolist())
        counts[k] = counts.get(k, 0) + 1
    assert len(counts) == 6 and min(counts.values()) > 60


# -- shapes, dtypes, broadcasting ---------------------------------------------------------


def test_size_forms():
    rs = RandomStream(seed=7)
    x = tt.dmatrix("x")
    n = tt.lscalar("n")
    s = tt.lvector("s")
    outs = [
        rs.normal(),  # size=None, scalar parameters: one number
        rs.normal(size=3),
        rs.normal(size=(2, 3)),
        rs.uniform(size=x.shape),
        rs.normal(size=(n, 2)),
        rs.normal(size=s, ndim=3),
    ]
    assert [o.ndim for o in outs] == [0, 1, 2, 2, 2, 3]
    assert outs[4].type.shape == (None, 2)
    f = theano_dag.function([x, n, s], outs)
    got = f(np.zeros((4, 5)), 6, np.array([1, 2, 3]))
    assert [g.shape for g in got] == [(), (3,), (2, 3), (4, 5), (6, 2), (1, 2, 3)]
    with pytest.raises(ValueError, match="pass ndim="):
        rs.normal(size=s)


def test_parameters_broadcast():
    rs = RandomStream(seed=8)
    loc, scale = tt.dvector("loc"), tt.dcol("scale")
    draws = rs.normal(loc, scale)  # size=None: the parameters' broadcast shape
    assert draws.type.broadcastable == (False, False)
    sized = rs.normal(loc, scale, size=(4, 2, 3))
    f = theano_dag.function([loc, scale], [draws, sized])
    lv, sv = np.array([0.0, 10.0, 20.0]), np.full((2, 1), 1e-9)
    a, b = f(lv, sv)
    np.testing.assert_allclose(a, np.broadcast_to(lv, (2, 3)), atol=1e-6)
    np.testing.assert_allclose(b, np.broadcast_to(lv, (4, 2, 3)), atol=1e-6)
    # parameters that do not fit size raise, on numpy's draws and on the composed ones
    for name in ("normal", "halfnormal", "truncated_normal", "cauchy", "truncexpon"):
        args = (2.0,) if name == "truncexpon" else ()
        bad = getattr(rs, name)(*args, loc, 1.0, size=(2,))
        with pytest.raises(ValueError, match=r"cannot draw with size \(2,\)"):
            theano_dag.function([loc], bad)(lv)


def test_dtypes():
    rs = RandomStream(seed=9)
    assert rs.normal(tt.fscalar(), 1.0).dtype == config.floatX  # Theano 1.1.2: floatX
    assert rs.normal(size=(2,), dtype="float32").dtype == "float32"
    assert rs.binomial(1, 0.5, size=(2,), dtype="float64").dtype == "float64"
    assert rs.poisson(2.0).dtype == "int64" and rs.bernoulli(0.5).dtype == "int64"
    assert rs.choice(np.array([1, 2], dtype="int32")).dtype == "int32"
    v = _one(rs.uniform(size=(3,), dtype="float32"))
    assert v.dtype == np.float32
    with config.change_flags(floatX="float32"):
        # floatX is looked up when the draw is made, not when the module was imported
        assert rs.normal().dtype == "float32" and basic.normal().dtype == "float32"
        assert _one(rs.gamma(2.0, 1.0, size=(2,))).dtype == np.float32
    with pytest.raises(TypeError, match="parameter n must be integers"):
        rs.binomial(2.5, 0.5)
    with pytest.raises(TypeError, match="parameter low must be integers"):
        rs.randint(0.5, 2.0)


def test_infer_shape_of_the_new_ops():
    rs = RandomStream(seed=10)
    loc, scale, cov = tt.dvector("loc"), tt.dcol("scale"), tt.dtensor3("cov")
    outs = [
        rs.halfnormal(loc, 1.0),
        rs.truncexpon(1.0, loc, 1.0),
        rs.truncated_normal(loc, scale),
        rs.multivariate_normal(loc, cov),
    ]
    shapes = theano_dag.function([loc, scale, cov], [o.shape for o in outs], mode="PerformOnly")
    got = shapes(np.zeros(3), np.ones((2, 1)), np.broadcast_to(np.eye(3), (4, 3, 3)))
    assert [g.tolist() for g in got] == [[3], [3], [2, 3], [4, 3]]
    # the graph of the shape holds no draw (it comes from the parameters' shapes; the
    # default update would draw, to advance the generator)
    f = theano_dag.function([loc, cov], outs[3].shape, no_default_updates=True)
    assert not any(isinstance(n.op, MvNormalRV) for n in f.maker.fgraph.toposort())


# -- streams: seeds, fresh draws, updates --------------------------------------------------


def test_seed_determinism_fresh_draws_and_updates():
    def draws(seed):
        rs = RandomStream(seed=seed)
        outs = [rs.normal(0.0, 1.0, size=(4,)), rs.poisson(2.0, size=(4,)), rs.permutation(6)]
        f = theano_dag.function([], outs)
        return rs, outs, [f() for _ in range(2)]

    rs, outs, (first, second) = draws(21)
    _, _, (again, _) = draws(21)
    _, _, (other, _) = draws(22)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not np.allclose(first[0], other[0])
    assert not np.any(first[0] == second[0])  # each call draws anew
    assert len(rs.updates()) == 3 and rs.updates() == rs.state_updates
    for out in outs:
        rng, new_rng = out.update
        assert out.rng is rng and rng.default_update is new_rng and rng.tag.is_rng
    # seed() restarts every draw
    f = theano_dag.function([], outs[0])
    rs.seed(21)
    np.testing.assert_array_equal(f(), first[0])


def test_theano_seeding_namespace_and_mode_flag():
    """Theano 1.1.2's seeding: gen_seedgen, a RandomState of the seed, gives each draw its
    seed (randint(2 ** 30)); a RandomState of that seed draws. Names not defined here
    come from the namespace; config.mode may hold a Mode, as in Theano's tests."""
    rs = RandomStream(seed=234)
    assert rs.default_instance_seed == 234
    ref = np.random.RandomState(234)
    assert np.array_equal(rs.gen_seedgen.get_state()[1], ref.get_state()[1])
    u = rs.uniform(-1.0, 1.0, size=(2, 2))
    seed = ref.randint(2**30)
    expect = np.random.RandomState(seed)
    with config.change_flags(mode=Mode(linker="py", optimizer=None)):
        f = theano_dag.function([], u)
        assert f.maker.mode.provided_linker == "py"
        np.testing.assert_array_equal(f(), expect.uniform(-1.0, 1.0, size=(2, 2)))
        np.testing.assert_array_equal(f(), expect.uniform(-1.0, 1.0, size=(2, 2)))
    # streams do not share their seed generators or their updates
    other = RandomStream(234)
    assert other.gen_seedgen is not rs.gen_seedgen and other.state_updates is not rs.state_updates
    # seed(s) reseeds each draw in order from a RandomState(s), as Theano's
    rs.seed(43298)
    expect = np.random.RandomState(np.random.RandomState(43298).randint(2**30))
    np.testing.assert_array_equal(f(), expect.uniform(-1.0, 1.0, size=(2, 2)))
    # the namespace: a RandomVariable by name, anything else an AttributeError
    ns = RandomStream(seed=1, namespace=np)
    with pytest.raises(AttributeError):
        _ = ns.ndarray
    with pytest.raises(AttributeError, match="no attribute 'blah'"):
        _ = rs.blah
    ns = RandomStream(seed=1, namespace=SimpleNamespace(draw_cauchy=basic.cauchy))
    assert ns.draw_cauchy(0.0, 1.0, size=(3,)).type.shape == (3,) and ns.updates()


def test_a_stream_pickles_and_goes_on_alike():
    rs = RandomStream(seed=3)
    rs.uniform(size=(2,))
    loaded = pickle.loads(pickle.dumps(rs))
    assert loaded.default_instance_seed == 3 and len(loaded.state_updates) == 1
    a, b = rs.normal(size=(3,)), loaded.normal(size=(3,))
    np.testing.assert_array_equal(a.eval(), b.eval())


def test_shared_generators_copy_unless_borrowed():
    """shared() of a RandomState or Generator: a typed shared variable holding a copy,
    or the object itself with borrow=True (Theano's contract)."""
    for rng in (np.random.RandomState(123), np.random.default_rng(123)):
        copied, borrowed = shared(rng), shared(rng, borrow=True)
        assert copied.get_value(borrow=True) is not rng
        assert borrowed.get_value(borrow=True) is rng
        assert type(copied).__name__ == "RandomStateSharedVariable"
        # the copy is in the same state: the same next draw
        assert copied.get_value(borrow=True).random() == rng.random()
    assert str(shared(np.random.RandomState(1)).type) == "RandomStateType"
    assert str(shared(np.random.default_rng(1)).type) == "RandomGeneratorType"
    with pytest.raises(TypeError, match="expected a numpy.random.RandomState"):
        shared(np.random.RandomState(1)).set_value(np.random.default_rng(1))


def test_no_default_updates_and_draws_used_twice():
    rs = RandomStream(seed=23)
    u = rs.uniform(0.0, 1.0, size=(3,))
    g = theano_dag.function([], u, no_default_updates=True)
    np.testing.assert_array_equal(g(), g())
    near_zero = theano_dag.function([], u + u - 2 * u)  # one draw per call, used three times
    np.testing.assert_allclose(near_zero(), 0.0)


def test_gen_and_the_distribution_objects():
    rs = RandomStream(seed=24)
    x = rs.gen(basic.cauchy, 0.0, 1.0, size=(2, 3))
    assert x.type.shape == (2, 3) and rs.updates()[-1] == x.update
    with pytest.raises(TypeError, match="drop rng="):
        rs.gen(basic.normal, rng=shared(np.random.default_rng(0)))
    # called directly, as Theano 1.1.2's: a generator given by rng=, or a new one
    rng = shared(np.random.default_rng(5))
    y = basic.normal(1.0, 2.0, size=(3,), rng=rng, name="y")
    assert y.name == "y" and y.owner.inputs[0] is rng and isinstance(y.owner.op, NormalRV)
    np.testing.assert_allclose(_one(y), np.random.default_rng(5).normal(1.0, 2.0, size=3))
    assert basic.poisson(4.0, size=2).type.shape == (2,)
    assert isinstance(basic.randint, RandIntRV) and isinstance(basic.bernoulli, BernoulliRV)
    # an instance of the class draws numpy-like too; with the node's inputs it builds the node
    assert PoissonRV()(2.0, size=(5,)).type.shape == (5,)
    new_rng, node_draws = PermutationRV()(rng, (2,), 4)
    assert node_draws.type.shape == (2, 4) and new_rng.owner is node_draws.owner
    with pytest.raises(TypeError, match="a numpy generator among the parameters; pass it as rng="):
        NormalRV()(np.random.default_rng(0), (2,), 0.0, 1.0)


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
def test_engines_draw_the_same(engine):
    """A seeded draw and arithmetic on it: the same numbers on every engine."""

    def run(eng):
        rs = RandomStream(seed=31)
        x = tt.dvector("x")
        outs = [
            rs.normal(x, 1.0) * 2.0 + 1.0,
            rs.poisson(3.0, size=(5,)) + 1,
            rs.permutation(5),
            rs.multivariate_normal([0.0, 1.0], np.eye(2), size=(2,)).sum(axis=1),
            rs.truncated_normal(x, 0.5, size=(3, 4)) - x,
        ]
        f = compile_on(eng, [x], outs)
        return [f(np.arange(4.0)) for _ in range(2)]

    want, got = run("py"), run(engine)
    for w, g in zip(want, got):
        for a, b in zip(w, g):
            np.testing.assert_allclose(b, a, rtol=1e-12)
    assert not np.array_equal(got[0][0], got[1][0])


# -- Theano 1.0's RandomStreams is unchanged -----------------------------------------------


def test_random_streams_keep_size_first():
    srng = SharedRandomStreams(seed=2)
    assert SharedRandomStreams is RandomStreams
    n = srng.normal((3,), 5.0, 1e-9)
    u = srng.uniform((2, 2), 2.0, 2.0 + 1e-9)
    b = srng.binomial((4,), 10, 1.0)
    c = srng.choice((3,), 3, False)
    p = srng.permutation((2,), 4)
    m = srng.multinomial((2,), 5, [0.0, 1.0])
    nv, uv, bv, cv, pv, mv = theano_dag.function([], [n, u, b, c, p, m])()
    np.testing.assert_allclose(nv, 5.0, atol=1e-6)
    np.testing.assert_allclose(uv, 2.0, atol=1e-6)
    assert bv.tolist() == [10] * 4 and sorted(cv.tolist()) == [0, 1, 2]
    assert pv.shape == (2, 4) and mv.tolist() == [[0, 5], [0, 5]]
    # dtypes as Theano 1.0's: floatX upcast with the parameters'
    assert srng.normal((2,), avg=tt.dscalar()).dtype == "float64"
    with config.change_flags(floatX="float32"):
        assert srng.normal((2,)).dtype == "float32"
        assert srng.normal((2,), avg=tt.dscalar()).dtype == "float64"
        assert RandomStream(0).normal(tt.dscalar()).dtype == "float32"
    # the numpy-like call is a TypeError on the size-first class, not a wrong draw
    with pytest.raises(TypeError, match="multiple values for argument 'size'"):
        srng.poisson(3.0, size=(4,))


def test_a_seed_gives_theanos_numbers():
    # Theano's streams: a RandomState per draw, seeded randint(2 ** 30) by a RandomState of
    # the stream's seed, and Theano's numpy (or scipy) calls: Cauchy draws by the inverse
    # distribution function, gamma's scale 1 / rate in float64.
    with config.change_flags(floatX="float64"):
        rs = RandomStream(seed=77)
        draws = [
            rs.normal(1.0, 2.0, size=(5,)),
            rs.cauchy(1.0, 2.0, size=(5,)),
            rs.halfcauchy(1.0, 2.0, size=(5,)),
            rs.gamma(2.0, 3.0, size=(5,)),
            rs.binomial(7, 0.3, size=(5,)),
        ]
        got = theano_dag.function([], draws)()
    seeds = np.random.RandomState(77)
    ref = [np.random.RandomState(seeds.randint(2**30)) for _ in draws]
    np.testing.assert_array_equal(got[0], ref[0].normal(1.0, 2.0, size=5))
    np.testing.assert_array_equal(got[1], 1 + 2 * np.tan(np.pi * (ref[1].uniform(size=5) - 0.5)))
    np.testing.assert_array_equal(got[2], 1 + 2 * np.tan(np.pi / 2 * ref[2].uniform(size=5)))
    np.testing.assert_array_equal(got[3], ref[3].gamma(2.0, 1 / 3, size=5))
    np.testing.assert_array_equal(got[4], ref[4].binomial(7, 0.3, size=5))


def test_a_draws_generator_is_a_random_state_to_reseed_read_and_restore():
    # Theano's documentation: rng.seed, get_state and set_state on a draw's generator.
    rs = RandomStream(seed=5)
    u = rs.uniform(size=(2, 2))
    f = theano_dag.function([], u)
    rng = u.rng.get_value(borrow=True)
    assert isinstance(rng, np.random.RandomState)
    rng.seed(89234)
    u.rng.set_value(rng, borrow=True)
    state = u.rng.get_value().get_state()
    first, second = f(), f()
    np.testing.assert_array_equal(first, np.random.RandomState(89234).uniform(size=(2, 2)))
    rng = u.rng.get_value(borrow=True)
    rng.set_state(state)
    u.rng.set_value(rng, borrow=True)
    np.testing.assert_array_equal(f(), first)
    np.testing.assert_array_equal(f(), second)
