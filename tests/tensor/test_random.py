"""Theano 1.0's size-first RandomStreams: reproducibility, fresh draws per call, distributions,
errors, and a dropout MLP that trains."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.sharedvalue import shared
from theano_dag.gradient import NullTypeGradError
from theano_dag.graph.basic import graph_inputs
from theano_dag.graph.shared import generic_constructor
from theano_dag.tensor.random import (
    BinomialRV,
    NormalRV,
    RandomGeneratorType,
    RandomStream,
    RandomStreams,
    RandomVariable,
    UniformRV,
    basic,
)
from theano_dag.tensor.random.op import default_shape_from_params, observed
from theano_dag.tensor.random.type import RandomStateType, random_state_type
from theano_dag.tensor.random.utils import broadcast_params
from theano_dag.tensor.type_other import NoneTypeT

MODES = ["PerformOnly", None]


def _draws(seed, mode=None, calls=2):
    srng = RandomStreams(seed=seed)
    f = theano_dag.function([], [srng.normal((4,)), srng.uniform((3,))], mode=mode)
    return [np.concatenate(f()) for _ in range(calls)]


@pytest.mark.parametrize("mode", MODES)
def test_same_seed_same_draws(mode):
    a, b = _draws(12, mode), _draws(12, mode)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    c = _draws(13, mode)
    assert not np.allclose(a[0], c[0])


@pytest.mark.parametrize("mode", MODES)
def test_successive_calls_differ(mode):
    first, second = _draws(5, mode)
    assert not np.any(first == second)


def test_two_draws_of_one_stream_are_independent():
    srng = RandomStreams(seed=1)
    u, v = srng.uniform((5,)), srng.uniform((5,))
    a, b = theano_dag.function([], [u, v])()
    assert not np.any(a == b)
    assert u.rng is not v.rng and u.update == (u.rng, u.owner.outputs[0])


def test_seed_restarts_the_stream():
    srng = RandomStreams(seed=7)
    f = theano_dag.function([], srng.normal((3,)))
    first = f()
    f()
    srng.seed()
    np.testing.assert_array_equal(f(), first)
    srng.seed(8)
    assert not np.allclose(f(), first)
    assert len(srng.updates()) == 1


def test_no_default_updates_repeats_the_draw():
    srng = RandomStreams(seed=2)
    f = theano_dag.function([], srng.uniform((3,)), no_default_updates=True)
    np.testing.assert_array_equal(f(), f())


def _state(rng):
    """A stream's generator's whole state (a RandomState's, as Theano's streams hold)."""
    _, key, pos, *_ = rng.get_state()
    return key.tobytes(), pos


@pytest.mark.parametrize("mode", ["FAST_COMPILE", theano_dag.Mode(optimizer=None)])
def test_state_is_not_modified_in_place_without_the_inplace_pass(mode):
    srng = RandomStreams(seed=3)
    u = srng.uniform((2,))
    before = u.rng.get_value(borrow=True)
    state = _state(before)
    theano_dag.function([], u, mode=mode)()
    assert _state(before) == state  # the op drew from a copy
    assert u.rng.get_value(borrow=True) is not before  # the update installed the new one


def test_a_generator_the_function_keeps_is_not_modified_in_place():
    srng = RandomStreams(seed=3)
    u = srng.uniform((2,))
    before = u.rng.get_value(borrow=True)
    state = _state(before)
    f = theano_dag.function([], u, no_default_updates=True)
    (node,) = [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, RandomVariable)]
    assert not node.op.inplace
    np.testing.assert_array_equal(f(), f())
    assert _state(before) == state


def test_an_updated_generator_advances_in_place_with_the_same_draws():
    # Theano's random_make_inplace: the function replaces the generator by the new one
    # anyway, so the draw advances it instead of a copy (a copy costs ~10x a small draw).
    draws = {}
    for mode in ("FAST_RUN", "FAST_COMPILE"):
        srng = RandomStreams(seed=3)
        u = srng.uniform((2,))
        before = u.rng.get_value(borrow=True)
        f = theano_dag.function([], u, mode=mode)
        (node,) = [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, RandomVariable)]
        assert node.op.inplace == (mode == "FAST_RUN")
        assert node.op.destroy_map == ({0: [0]} if mode == "FAST_RUN" else {})
        draws[mode] = [f(), f(), f()]
        assert (u.rng.get_value(borrow=True) is before) == (mode == "FAST_RUN")
    np.testing.assert_array_equal(draws["FAST_RUN"], draws["FAST_COMPILE"])


def test_moments():
    srng = RandomStreams(seed=0)
    n = 20000
    normal = srng.normal((n,), avg=2.0, std=3.0)
    uniform = srng.uniform((n,), low=-1.0, high=3.0)
    binom = srng.binomial((n,), n=10, p=0.3)
    f = theano_dag.function([], [normal, uniform, binom])
    a, b, c = f()
    assert abs(a.mean() - 2.0) < 0.1 and abs(a.std() - 3.0) < 0.1
    assert b.min() >= -1.0 and b.max() < 3.0 and abs(b.mean() - 1.0) < 0.05
    assert abs(b.var() - 16 / 12) < 0.05
    assert c.dtype == np.int64 and c.min() >= 0 and c.max() <= 10
    assert abs(c.mean() - 3.0) < 0.1 and abs(c.var() - 2.1) < 0.15


def test_dtypes():
    srng = RandomStreams(seed=0)
    assert srng.normal((2,)).dtype == theano_dag.config.floatX
    assert srng.normal((2,), avg=tt.dscalar("m")).dtype == "float64"
    assert srng.uniform((2,), dtype="float32").dtype == "float32"
    assert srng.binomial((2,), p=0.5, dtype="float64").dtype == "float64"
    f = theano_dag.function([], srng.uniform((2,), dtype="float32"))
    assert f().dtype == np.float32


@pytest.mark.parametrize("mode", MODES)
def test_symbolic_size(mode):
    srng = RandomStreams(seed=0)
    x = tt.dmatrix("x")
    u = srng.uniform(size=x.shape)
    assert u.ndim == 2
    n = tt.lscalar("n")
    v = srng.normal(size=(n, 2))
    assert v.type.shape == (None, 2)
    f = theano_dag.function([x, n], [u, v], mode=mode)
    a, b = f(np.zeros((3, 4)), 5)
    assert a.shape == (3, 4) and b.shape == (5, 2)


def test_size_from_parameters_and_ndim():
    srng = RandomStreams(seed=0)
    mu = tt.dvector("mu")
    draws = srng.normal(avg=mu, std=1e-6)  # no size: the parameters' shape
    f = theano_dag.function([mu], draws)
    np.testing.assert_allclose(f(np.array([1.0, 5.0, 9.0])), [1.0, 5.0, 9.0], atol=1e-4)
    s = tt.lvector("s")
    with pytest.raises(ValueError, match="the length of the size vector .* pass ndim="):
        srng.uniform(size=s)
    u = srng.uniform(size=s, ndim=3)
    assert u.ndim == 3
    assert theano_dag.function([s], u)(np.array([2, 1, 3])).shape == (2, 1, 3)
    with pytest.raises(ValueError, match=r"size \(2, 3\) has 2 entries, but ndim=3"):
        srng.uniform(size=(2, 3), ndim=3)


def test_broadcast_parameters_against_size():
    srng = RandomStreams(seed=0)
    loc = tt.dvector("loc")
    draws = srng.normal(size=(4, 3), avg=loc, std=1e-9)
    out = theano_dag.function([loc], draws)(np.arange(3.0))
    np.testing.assert_allclose(out, np.broadcast_to(np.arange(3.0), (4, 3)), atol=1e-6)
    f = theano_dag.function([loc], srng.normal(size=(4, 3), avg=loc))
    with pytest.raises(ValueError, match=r"normal_rv\{.*\}: cannot draw with size \(4, 3\)"):
        f(np.arange(5.0))


def test_infer_shape():
    srng = RandomStreams(seed=0)
    x = tt.dmatrix("x")
    u = srng.uniform(size=x.shape)
    shapes = u.owner.op.infer_shape(None, u.owner, [None, (2,)])
    assert shapes[0] is None and len(shapes[1]) == 2
    f = theano_dag.function([x], u.shape, mode="PerformOnly")
    assert f(np.zeros((3, 5))).tolist() == [3, 5]
    mu = tt.dcol("mu")
    v = srng.normal(avg=mu, std=tt.drow("s"))
    assert v.broadcastable == (False, False)
    node = v.owner
    got = node.op.infer_shape(None, node, [None, (0,), (7, 1), (1, 4)])
    assert got[1] == (7, 4)


def test_choice_and_permutation():
    srng = RandomStreams(seed=4)
    perm = srng.permutation(size=(2,), n=5)
    assert perm.type == tt.TensorType("int64", shape=(2, 5))
    pick = srng.choice((3,), a=3)
    values = tt.constant(np.array([10.0, 20.0, 30.0]))
    from_values = srng.choice((50,), a=values, p=[0.0, 0.5, 0.5])
    no_repeat = srng.choice((3,), a=3, replace=False)
    f = theano_dag.function([], [perm, pick, from_values, no_repeat])
    p, k, v, nr = f()
    assert p.shape == (2, 5) and all(sorted(row) == [0, 1, 2, 3, 4] for row in p.tolist())
    assert k.shape == (3,) and set(k.tolist()) <= {0, 1, 2}
    assert v.dtype == np.float64 and set(v.tolist()) <= {20.0, 30.0}
    assert sorted(nr.tolist()) == [0, 1, 2]


def test_dropout_mlp_trains():
    """A two-layer network with a dropout mask from the stream: gradients flow through
    the masked units and the cost goes down."""
    rng = np.random.default_rng(0)
    srng = RandomStreams(seed=0)
    x, y = tt.dmatrix("x"), tt.dvector("y")
    w = shared(rng.normal(scale=0.5, size=(5, 16)), name="w")
    v = shared(np.zeros(16), name="v")
    h = tt.tanh(tt.dot(x, w))
    keep = 0.8
    mask = srng.binomial(size=h.shape, p=keep, dtype=h.dtype)
    pred = tt.dot(h * mask / keep, v)
    cost = tt.mean((pred - y) ** 2)
    gw, gv = theano_dag.grad(cost, [w, v])
    train = theano_dag.function([x, y], cost, updates=[(w, w - 0.1 * gw), (v, v - 0.1 * gv)])
    xs = rng.normal(size=(128, 5))
    ys = np.tanh(xs[:, 0] - xs[:, 1])
    costs = [float(train(xs, ys)) for _ in range(150)]
    assert costs[-1] < 0.5 * costs[0]
    # The mask changes between calls: the same inputs give different masked outputs.
    out = theano_dag.function([x], h * mask)
    assert not np.array_equal(out(xs), out(xs))


def test_grad_wrt_parameters_is_undefined():
    srng = RandomStreams(seed=0)
    mu = tt.dscalar("mu")
    draws = srng.normal((3,), avg=mu)
    with pytest.raises(TypeError, match="undefined"):
        theano_dag.grad(draws.sum(), mu)


def test_errors():
    rng = shared(np.random.default_rng(0))
    with pytest.raises(TypeError, match="rng must be a variable holding a numpy random"):
        NormalRV()(0.0, 1.0, size=(2,), rng=tt.dvector("r"))
    with pytest.raises(TypeError, match=r"expected 2 parameters \('low', 'high'\), got 1"):
        UniformRV()(rng, (2,), 0.0)
    with pytest.raises(TypeError, match="parameter n must be integers"):
        BinomialRV()(rng, (2,), 1.5, 0.5)
    with pytest.raises(TypeError, match="parameter loc must be real numbers"):
        NormalRV()(rng, (2,), tt.zscalar("z"), 1.0)
    with pytest.raises(TypeError, match="must be an integer scalar"):
        RandomStreams(0).normal(size=(2.5,))
    # A shared generator is typed: it refuses to hold anything else...
    with pytest.raises(TypeError, match="expected a numpy.random.Generator or RandomState"):
        shared(np.random.default_rng(0)).set_value("not a generator")
    # ... and a draw from an untyped (generic) shared variable checks at run time.
    bad = generic_constructor(np.random.default_rng(0))
    new_rng, out = NormalRV("float64")(bad, (2,), 0.0, 1.0)
    bad.set_value("not a generator")
    with pytest.raises(TypeError, match="the rng input holds a str"):
        theano_dag.function([], out, mode="PerformOnly")()


def test_legacy_random_state_and_plain_shared():
    """Theano's shared(np.random.RandomState(seed)) works as the rng input too."""
    rng = shared(np.random.RandomState(3))
    new_rng, out = NormalRV("float64")(rng, (3,), 0.0, 1.0)
    rng.default_update = new_rng
    f = theano_dag.function([], out)
    first = f()
    np.testing.assert_allclose(first, np.random.RandomState(3).normal(0.0, 1.0, size=3))
    assert not np.allclose(f(), first)


def test_names_and_type():
    # Theano 1.0's size-first class and Theano 1.1.2's numpy-like one are two classes
    assert not issubclass(RandomStreams, RandomStream)
    assert not issubclass(RandomStream, RandomStreams)
    assert str(NormalRV("float32")) == "normal_rv{float32}"
    assert NormalRV("float32") == NormalRV("float32") != NormalRV("float64")
    assert isinstance(NormalRV(), RandomVariable)
    t = RandomGeneratorType()
    with pytest.raises(TypeError, match="expected a numpy.random.Generator or RandomState"):
        t.filter(3)
    g = np.random.default_rng(1)
    assert t.values_eq(g, np.random.default_rng(1)) and not t.values_eq(g, np.random.default_rng(2))
    assert tt.random.RandomStream is RandomStream


def test_random_state_type():
    a, c = np.random.RandomState(12), np.random.RandomState(123)
    bg = np.random.PCG64()
    d, e = np.random.RandomState(bg), np.random.RandomState(bg)
    assert random_state_type.filter(a) is a and repr(random_state_type) == "RandomStateType"
    with pytest.raises(TypeError):
        random_state_type.filter(np.random.default_rng(0))
    assert random_state_type.values_eq(a, np.random.RandomState(12))
    assert not random_state_type.values_eq(a, c) and not random_state_type.values_eq(a, d)
    assert random_state_type.values_eq(d, e) and random_state_type.may_share_memory(d, e)
    assert not random_state_type.may_share_memory(a, d)
    assert isinstance(random_state_type(), theano_dag.graph.basic.Variable)
    assert RandomStateType() == random_state_type


def test_broadcast_params_numpy_and_symbolic():
    mean, cov = np.array([[0.0], [10.0], [100.0]]), np.diag([1e-6])
    got = broadcast_params([mean, cov], [1, 2])
    np.testing.assert_array_equal(got[0], mean)
    np.testing.assert_array_equal(got[1], np.broadcast_to(cov, (3, 1, 1)))
    got = broadcast_params([np.arange(3.0), np.array(2.0)], [0, 0])
    np.testing.assert_array_equal(got[1], [2.0, 2.0, 2.0])
    m = tt.tensor("float64", shape=(None, 1))
    c = tt.dmatrix()
    sm, sc = broadcast_params([m, c], [1, 2])
    f = theano_dag.function([m, c], [sm, sc])
    a, b = f(mean, cov)
    np.testing.assert_array_equal(a, mean)
    np.testing.assert_array_equal(b, np.broadcast_to(cov, (3, 1, 1)))
    m2 = tt.dmatrix()
    c2 = tt.tensor3()
    s1, s2 = broadcast_params([m2, c2], [1, 2])
    mv, cv = np.ones((1, 3)), np.stack([np.eye(3), 2 * np.eye(3)])
    a, b = theano_dag.function([m2, c2], [s1, s2])(mv, cv)
    np.testing.assert_array_equal(a, np.ones((2, 3)))
    np.testing.assert_array_equal(b, cv)


def test_theano_rng_fn_name_and_infer_shape():
    """Theano 1.1.2's op API: ``name`` is the distribution's (numpy's method name),
    ``rng_fn(rng, *params, size)`` draws numbers (size by keyword or last; rng None: a
    new generator; any other RandomVariable draws with the generator's method of its
    name), and ``_infer_shape(size, params)`` gives the draws' symbolic shape."""
    assert (basic.normal.name, basic.randint.name, basic.dirichlet.name) == (
        "normal",
        "randint",
        "dirichlet",
    )
    assert str(basic.uniform.with_dtype("float32")) == "uniform_rv{float32}"
    for make in (np.random.default_rng, np.random.RandomState):
        rng, ref = make(4), make(4)
        got = basic.normal.rng_fn(rng, np.zeros(3), 1.0, (2, 3))
        np.testing.assert_array_equal(got, ref.normal(np.zeros(3), 1.0, size=(2, 3)))
    assert basic.invgamma.rng_fn(None, 2.0, 2.0).shape == ()
    assert basic.bernoulli.rng_fn(None, 0.5, size=[2, 3]).shape == (2, 3)
    assert basic.dirichlet.rng_fn(None, np.ones(3), 4).shape == (4, 3)

    class Laplace(RandomVariable):  # no draw_numpy: Generator.laplace draws it
        name = "laplace"
        param_names = ("loc", "scale")

    x = Laplace("float64")(0.0, 1.0, size=(2,), rng=shared(np.random.default_rng(7)))
    np.testing.assert_array_equal(x.eval(), np.random.default_rng(7).laplace(0.0, 1.0, size=2))

    m = tt.lscalar("m")
    sd = tt.dscalar("sd")
    for params, size, want in [
        ([1.0, sd], None, ()),
        ([1.0, sd], (m,), (3,)),
        ([tt.zeros((m,)), sd], None, (3,)),
        ([tt.zeros((m,)), tt.ones((m,))], (2, m), (2, 3)),
        ([np.zeros((2, 2)), np.ones((1, 2))], (3, 2, 2), (3, 2, 2)),
    ]:
        shape = basic.normal._infer_shape(size, params)
        values = [int(theano_dag.function([m], s, on_unused_input="ignore")(3)) for s in shape]
        assert tuple(values) == want
        draws = basic.normal(*params, size=size)
        inputs = [v for v in (m, sd) if v in graph_inputs([draws])]
        got = theano_dag.function(inputs, draws)(*[3 if v is m else 1.0 for v in inputs])
        assert got.shape == want


def test_polyagamma_moments():
    """PG(b, c): mean b / (2c) tanh(c / 2) (b / 4 at c = 0), variance
    b / (4 c^3) (sinh c - c) sech^2(c / 2) (b / 24 at c = 0); scalar draws broadcast."""
    rng = np.random.default_rng(0)
    n = 40000
    for b, c in [(1.0, 0.0), (1.1, -10.5), (3.0, 2.0)]:
        x = basic.polyagamma.rng_fn(rng, np.array(b), np.array(c), size=(n,))
        mean = b / 4 if c == 0 else b / (2 * c) * np.tanh(c / 2)
        var = b / 24 if c == 0 else b / (4 * c**3) * (np.sinh(c) - c) / np.cosh(c / 2) ** 2
        assert (x > 0).all()
        assert abs(x.mean() - mean) < 5 * np.sqrt(var / n)
        assert abs(x.var() / var - 1) < 0.05
    for dtype in ("float32", "float64"):
        pg = basic.PolyaGammaRV(dtype)(np.array([1.1, 3.0]), -10.5, size=(3, 2))
        v = pg.eval()
        assert v.shape == (3, 2) and v.dtype == dtype and np.all(np.diff(v.ravel()) != 0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_observed_and_default_shape_from_params(dtype):
    """Theano 1.1.2's observed(rv, value): the value, of the draw's type, with no
    gradient; and default_shape_from_params, one draw's shape from a parameter."""

    x = basic.normal(0.0, 1.0, size=3, dtype=dtype)
    val = np.array([0.2, 0.1, -2.4], dtype=dtype)
    obs = observed(x, val)
    assert obs.owner.inputs[0] is x and obs.dtype == dtype
    np.testing.assert_array_equal(obs.eval(), val)
    with pytest.raises(TypeError, match="does not fit"):
        observed(x, np.array([1, 2]))
    with pytest.raises(TypeError, match="does not fit"):
        observed(x, np.ones((1, 2), dtype=dtype))
    assert isinstance(observed(None, val).owner.inputs[0].type, NoneTypeT)
    v = tt.vector(dtype=dtype)
    with pytest.raises(NullTypeGradError):
        theano_dag.grad(observed(x, v).sum(), [v])
    assert default_shape_from_params(1, (np.ones(2), np.eye(2))) == (2,)
    m = tt.lscalar("m")
    (length,) = default_shape_from_params(1, (tt.ones((2, m)),))
    assert int(length.eval({m: 4})) == 4
    assert default_shape_from_params(1, (np.ones(2), 0), param_shapes=((2,), ())) == (2,)
    with pytest.raises(ValueError, match="^ndim_supp"):
        default_shape_from_params(0, (np.ones(2),))
    with pytest.raises(ValueError, match="^Reference parameter"):
        default_shape_from_params(1, (np.array(1.0),))
