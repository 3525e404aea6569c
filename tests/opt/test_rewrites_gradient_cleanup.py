"""The gradient graph cleaned up: fills of constants, reshapes and sums that ``grad``
builds, checked on the graph a PyMC3 sampler compiles (a linear regression's
log-density and gradient) and rule by rule, structure and values."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode, get_mode
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.cpu.native.ckernel import wait_for_kernels
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.opt.rewrites.subtensor import known_lengths, local_inc_subtensor_of_reshape_grad
from theano_dag.printing import debugprint
from theano_dag.tensor.elemwise import Elemwise, Sum
from theano_dag.tensor.shape import MakeVector, Reshape, Shape
from theano_dag.tensor.subtensor import IncSubtensor, Subtensor

DTYPES = ["float32", "float64"]
CLEANUP = (
    "local_subtensor_of_fill",
    "local_inc_subtensor_of_reshape_grad",
    "local_reshape_of_unit_slice",
    "local_sum_make_vector",
    "local_add_of_zeros",
    "local_fill_of_fill",
)
FAST_RUN = get_mode("FAST_RUN")
WITHOUT = FAST_RUN.excluding(*CLEANUP)
REFERENCE = Mode(linker="py", optimizer=None)


def _ops(f):
    return [n.op for n in f.maker.fgraph.toposort()]


def _is_second(op):
    return isinstance(op, Elemwise) and type(op.scalar_op).__name__ == "Second"


def _tol(dtype):
    return {"rtol": 1e-5, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-12}


# -- a linear regression's log-density and gradient, as PyMC3 builds them ----------------

X = np.random.default_rng(0).standard_normal((20, 3))
Y = 1.0 + X @ np.array([1.0, -2.0, 0.5]) + 0.3 * np.random.default_rng(1).standard_normal(20)
Q = np.array([0.8, 1.1, -1.9, 0.4, np.log(0.35)])


def _normal(value, mu, sigma):
    tau = sigma**-2.0
    return tt.switch(
        sigma > 0, (-tau * (value - mu) ** 2 + tt.log(tau / np.pi / 2.0)) / 2.0, -np.inf
    )


def linreg():
    q = tt.dvector("q")
    alpha, beta, sigma_log = q[0:1].reshape(()), q[1:4].reshape((3,)), q[4:5].reshape(())
    sigma = tt.exp(sigma_log)
    terms = [
        _normal(alpha, 0.0, tt.constant(10.0, dtype="float64")),
        _normal(beta, 0.0, tt.constant(10.0, dtype="float64")),
        -0.5 * sigma**2 + 0.5 * np.log(2.0 / np.pi) + sigma_log,
        _normal(tt.constant(Y), alpha + tt.dot(tt.constant(X), beta), sigma),
    ]
    cost = tt.sum(tt.stack([tt.sum(t) for t in terms]))
    return q, [cost, theano_dag.grad(cost, q)]


def linreg_numpy(q):
    alpha, beta, s = q[0], q[1:4], q[4]
    sigma = np.exp(s)
    r = Y - alpha - X @ beta
    logp = (
        -0.5 * (alpha**2 + beta @ beta) / 100 - 4 * np.log(10 * np.sqrt(2 * np.pi))
        - 0.5 * sigma**2 + 0.5 * np.log(2 / np.pi) + s
        - 0.5 * (r @ r) / sigma**2 - len(Y) * (s + 0.5 * np.log(2 * np.pi))
    )  # fmt: skip
    g = np.empty(5)
    g[0] = -alpha / 100 + r.sum() / sigma**2
    g[1:4] = -beta / 100 + X.T @ r / sigma**2
    g[4] = -(sigma**2) + 1 + (r @ r) / sigma**2 - len(Y)
    return logp, g


def test_linreg_gradient_graph_before_and_after():
    q, outs = linreg()
    before = theano_dag.function([q], outs, mode=WITHOUT)
    after = theano_dag.function([q], outs, mode=FAST_RUN)
    text_before, text_after = debugprint(before, file="str"), debugprint(after, file="str")
    # Before: the gradient of each unpacked parameter is reshaped to the shape of its slice
    # (computed at run time), the constants 1 of d(sum)/d(terms) are a filled vector read
    # back term by term, and the three pieces are set into zeros and added.
    assert "Shape_i" in text_before and "MakeVector{dtype='int64'}" in text_before
    assert sum(isinstance(op, IncSubtensor) for op in _ops(before)) == 3
    assert any(isinstance(op, Subtensor) and _is_second(n.inputs[0].owner.op)
               for n in before.maker.fgraph.apply_nodes if isinstance(n.op, Subtensor)
               for op in [n.op] if n.inputs[0].owner is not None)  # fmt: skip
    # After: the pieces go into one zeros, one after the other (no sum of three arrays),
    # no reshape back of a gradient, no shape arithmetic, no vector of the four terms.
    ops = _ops(after)
    assert "Shape_i" not in text_after and "MakeVector" not in text_after
    assert not any(isinstance(op, (Shape, MakeVector)) for op in ops)
    assert sum(isinstance(op, Reshape) for op in ops) == 1  # beta's, in the log-density
    incs = [n for n in after.maker.fgraph.toposort() if isinstance(n.op, IncSubtensor)]
    assert len(incs) == 3
    chain = [n.inputs[0].owner for n in incs[1:]]
    assert chain == incs[:-1]  # each writes into the one before it
    assert sum(_is_second(op) for op in ops) == 1  # the zeros, once
    assert len(ops) < len(_ops(before)) - 15
    # The same numbers, and numpy's.
    for a, b in zip(before(Q), after(Q)):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    logp, g = linreg_numpy(Q)
    got = after(Q)
    np.testing.assert_allclose(got[0], logp, rtol=1e-12)
    np.testing.assert_allclose(got[1], g, rtol=1e-10, atol=1e-12)


def test_linreg_gradient_with_a_longer_vector_keeps_zeros_and_errors():
    q, outs = linreg()
    f = theano_dag.function([q], outs[1])
    # One more element than the model reads: its gradient is 0.
    longer = np.concatenate([Q, [3.0]])
    np.testing.assert_allclose(f(longer), np.concatenate([linreg_numpy(Q)[1], [0.0]]))
    with pytest.raises((IndexError, ValueError)):
        f(Q[:3])  # too short: alpha's and log(sigma)'s unpacking raise, as before


# -- rule by rule --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_subtensor_of_fill(dtype):
    x = tt.matrix("x", dtype=dtype)
    z = tt.fill(x, tt.constant(np.array([[1.5]], dtype)))[1:, 0]
    f = theano_dag.function([x], z)
    # fill(x, c)[1:, 0] -> fill(x[1:, 0], 1.5): the filled matrix is not made
    assert not any(_is_second(n.op) and n.outputs[0].ndim == 2 for n in f.maker.fgraph.apply_nodes)
    v = np.arange(12, dtype=dtype).reshape(4, 3)
    np.testing.assert_array_equal(f(v), np.full(3, 1.5, dtype))
    with pytest.raises(IndexError):
        theano_dag.function([x], tt.fill(x, 2.0)[5])(v)  # the index still checked


@pytest.mark.parametrize("dtype", DTYPES)
def test_subtensor_of_fill_keeps_a_widening_value(dtype):
    x, r = tt.col("x", dtype=dtype), tt.constant(np.ones((1, 3), dtype))
    f = theano_dag.function([x], tt.fill(x, r)[:, 1:])
    np.testing.assert_array_equal(f(np.zeros((2, 1), dtype)), np.ones((2, 2), dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_inc_subtensor_of_reshape_grad(dtype):
    w = tt.vector("w", dtype=dtype)
    g3, g0 = tt.vector("g3", dtype=dtype), tt.scalar("g0", dtype=dtype)
    g3 = tt.specify_shape(g3, (3,))
    z = tt.inc_subtensor(tt.zeros_like(w)[1:4], g3.reshape(w[1:4].shape))
    z = z + tt.set_subtensor(tt.zeros_like(w)[5:6], g0.reshape(w[5:6].shape))
    f = theano_dag.function([w, g3, g0], z, mode=FAST_RUN)
    g = theano_dag.function([w, g3, g0], z, mode=WITHOUT)
    assert not any(isinstance(op, Reshape) for op in _ops(f))
    assert any(isinstance(op, Reshape) for op in _ops(g))
    args = [np.arange(7, dtype=dtype), np.array([1, 2, 3], dtype), np.array(9, dtype)]
    np.testing.assert_array_equal(f(*args), np.array([0, 1, 2, 3, 0, 9, 0], dtype))
    np.testing.assert_array_equal(f(*args), g(*args))
    # A w too short: the reshapes raised, the writes do too.
    for fn in (f, g):
        with pytest.raises((ValueError, IndexError)):
            fn(np.arange(3, dtype=dtype), *args[1:])


def test_inc_subtensor_of_reshape_grad_left_where_a_broadcast_could_hide_a_mismatch():
    w, g = tt.dvector("w"), tt.dvector("g")
    z = tt.inc_subtensor(tt.zeros_like(w)[1:4], g.reshape(w[1:4].shape))
    f = theano_dag.function([w, g], z)
    assert any(isinstance(op, Reshape) for op in _ops(f))  # g's length unknown: kept
    with pytest.raises(ValueError):
        f(np.zeros(6), np.ones(1))  # one number does not reshape to three


@pytest.mark.parametrize("dtype", DTYPES)
def test_inc_subtensor_of_reshape_grad_when_elementwise_ops_fix_the_length(dtype):
    # PyMC3's graph: the cost built on a free vector `b`, then `b` replaced by its slice
    # of the flat parameter vector (`clone` with `replace`): the cloned elementwise ops keep
    # their types, of unknown length, though the slice's reshape fixes it.
    q, v, b = (tt.vector(n, dtype=dtype) for n in "qvb")
    cost = tt.sum(tt.exp(b) * v) + tt.sum((b - 1.0) ** 2)
    cost = theano_dag.clone(cost, replace={b: q[1:4].reshape((3,))})
    grad = theano_dag.grad(cost, q)
    f = theano_dag.function([q, v], grad, mode=FAST_RUN)
    h = theano_dag.function([q, v], grad, mode=WITHOUT)
    # One Reshape left, the slice's in the cost; the gradient is not reshaped back to the
    # slice's shape, computed at run time.
    assert sum(isinstance(op, Reshape) for op in _ops(f)) == 1
    assert not any(isinstance(op, (Shape, MakeVector)) for op in _ops(f))
    assert sum(isinstance(op, Reshape) for op in _ops(h)) == 2
    qv, vv = np.linspace(-1, 1, 6).astype(dtype), np.array([0.5, -2.0, 3.0], dtype)
    want = np.zeros(6)
    want[1:4] = np.exp(qv[1:4].astype("float64")) * vv + 2 * (qv[1:4] - 1.0)
    np.testing.assert_allclose(f(qv, vv), want.astype(dtype), **_tol(dtype))
    np.testing.assert_allclose(f(qv, vv), h(qv, vv), **_tol(dtype))
    for fn in (f, h):  # v of another length: the product raises on both
        with pytest.raises(ValueError):
            fn(qv, np.ones(2, dtype))


def test_known_lengths():
    x, y, z, b = tt.dvector("x"), tt.dvector("y"), tt.dmatrix("z"), tt.dvector("b")
    three = x.reshape((3,))

    def on_three(expr):  # expr of b, b replaced by `three`: the types stay b's
        return theano_dag.clone(expr, replace={b: three})

    assert on_three(tt.exp(b) + y).type.shape == (None,)
    assert known_lengths(on_three(tt.exp(b) + y)) == (3,)
    assert known_lengths(on_three(y + tt.exp(b))) == (3,)
    assert known_lengths(tt.exp(y)) == (None,)
    # a length 1 fixes nothing (it may broadcast), a constant's shape does
    assert known_lengths(y + tt.constant(np.ones(1))) == (None,)
    assert known_lengths(y + tt.constant(np.ones(4))) == (4,)
    # through a DimShuffle: transposed, and a broadcast dimension added
    assert known_lengths((z + tt.constant(np.ones((2, 5)))).T) == (5, 2)
    assert known_lengths(on_three(b.dimshuffle("x", 0) + z)) == (None, 3)
    # no further than `depth` ops up
    deep = b
    for _ in range(10):
        deep = tt.exp(deep) * y
    deep = on_three(deep)
    assert known_lengths(deep) == (None,)
    assert known_lengths(deep, depth=25) == (3,)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reshape_of_unit_slice(dtype):
    q = tt.vector("q", dtype=dtype)
    f = theano_dag.function([q], q[2:3].reshape(()) * 2)
    assert not any(isinstance(op, Reshape) for op in _ops(f))
    np.testing.assert_array_equal(f(np.arange(5, dtype=dtype)), np.asarray(4, dtype))
    with pytest.raises((IndexError, ValueError)):
        f(np.arange(2, dtype=dtype))
    # Not one element: left alone.
    g = theano_dag.function([q], q[1:3].reshape((2, 1)))
    assert any(isinstance(op, Reshape) for op in _ops(g))


@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_of_make_vector(dtype):
    a, b, c = (tt.scalar(n, dtype=dtype) for n in "abc")
    f = theano_dag.function([a, b, c], tt.sum(tt.stack([a, b * 2, tt.exp(c)])))
    # float32 sums accumulate in float64, an add would not: that sum stays.
    assert any(isinstance(op, (Sum, MakeVector)) for op in _ops(f)) == (dtype == "float32")
    got = f(np.asarray(1.5, dtype), np.asarray(2, dtype), np.asarray(0.5, dtype))
    np.testing.assert_allclose(got, 1.5 + 4 + np.exp(np.asarray(0.5, dtype)), **_tol(dtype))


def test_sum_of_make_vector_of_ints_keeps_its_accumulator():
    a, b = tt.bscalar("a"), tt.bscalar("b")
    f = theano_dag.function([a, b], tt.sum(tt.stack([a, b])))
    assert f(np.int8(100), np.int8(100)) == 200  # int64, as the sum was: no int8 wrap


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_of_zeros_and_fill_of_fill(dtype):
    x = tt.vector("x", dtype=dtype)
    zeros = tt.zeros_like(x)
    z = tt.fill(tt.fill(x, tt.constant(1, dtype=dtype)), tt.constant(0, dtype=dtype))
    f = theano_dag.function([x], [zeros + tt.constant(np.zeros(1, dtype)) + z])
    seconds = [n for n in f.maker.fgraph.apply_nodes if _is_second(n.op)]
    assert len(seconds) <= 1 and not any(isinstance(op, Elemwise) and "add" in str(op)
                                         for op in _ops(f))  # fmt: skip
    np.testing.assert_array_equal(f(np.ones(4, dtype))[0], np.zeros(4, dtype))


def test_fill_of_fill_keeps_a_widening_inner_fill():
    c, r = tt.dcol("c"), tt.drow("r")
    f = theano_dag.function([c, r], tt.fill(tt.fill(c, r), 2.0))
    np.testing.assert_array_equal(f(np.ones((3, 1)), np.ones((1, 4))), np.full((3, 4), 2.0))


OCL_OK, OCL_WHY = opencl_available()
ENGINES = [
    "cpu",
    "cpu_c",
    pytest.param("opencl", marks=pytest.mark.skipif(not OCL_OK, reason=f"no OpenCL: {OCL_WHY}")),
]


@pytest.mark.parametrize("engine", ENGINES)
def test_linreg_values_on_every_engine(engine):
    """The cleaned graph on each engine (the CPU engine's numpy path and its C kernels,
    OpenCL) against the reference engine's run of the graph as built."""
    q, outs = linreg()
    if engine == "opencl":
        mode = Mode(linker="opencl")
    else:
        mode = Mode(linker=CPULinker(min_plan_bytes=0))
    f = theano_dag.function([q], outs, mode=mode)
    assert not any(isinstance(op, (Shape, MakeVector)) for op in _ops(f))
    if engine == "cpu_c":
        assert wait_for_kernels(f)
    ref = theano_dag.function([q], outs, mode=REFERENCE)
    for a, b in zip(f(Q), ref(Q)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_inc_subtensor_of_reshape_grad_keeps_a_reshape_that_changes_the_lengths(dtype):
    # The gradient of x[1:].reshape((2, 2)) for x of shape (2, 4): the reshape takes g from
    # (2, 2) back to the part's (1, 4). Writing g without it raised (no broadcast fits).
    x = tt.matrix("x", dtype=dtype)
    w = np.arange(4, dtype=dtype).reshape(2, 2)
    grad = theano_dag.grad(tt.sum(x[1:].reshape((2, 2)) * w), x)
    f = theano_dag.function([x], grad, mode=FAST_RUN)
    assert any(isinstance(op, Reshape) for op in _ops(f))
    g = tt.matrix("g", dtype=dtype)
    write = tt.set_subtensor(tt.zeros_like(x)[1:], g.reshape(x[1:].shape)).owner
    assert local_inc_subtensor_of_reshape_grad.transform(None, write) is False
    g = tt.specify_shape(g, (2, 2))
    write = tt.set_subtensor(tt.zeros_like(x)[1:], g.reshape(x[1:].shape)).owner
    assert local_inc_subtensor_of_reshape_grad.transform(None, write) is False
    want = np.array([[0, 0, 0, 0], [0, 1, 2, 3]], dtype)
    np.testing.assert_array_equal(f(np.ones((2, 4), dtype)), want)
    # the same write built by hand, forward
    y = tt.matrix("y", dtype=dtype)
    h = theano_dag.function([x, y], tt.set_subtensor(x[1:], y.reshape(x[1:].shape)))
    np.testing.assert_array_equal(h(np.zeros((2, 4), dtype), w), want)
    with pytest.raises(ValueError):  # 3 elements do not reshape to 4
        h(np.zeros((2, 4), dtype), np.ones((1, 3), dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_inc_subtensor_of_reshape_grad_drops_a_matrix_reshape_of_known_equal_lengths(dtype):
    w = tt.specify_shape(tt.matrix("w", dtype=dtype), (3, 3))
    g = tt.specify_shape(tt.matrix("g", dtype=dtype), (2, 3))
    z = tt.inc_subtensor(tt.zeros_like(w)[1:], g.reshape(w[1:].shape))
    f = theano_dag.function([w.owner.inputs[0], g.owner.inputs[0]], z, mode=FAST_RUN)
    h = theano_dag.function([w.owner.inputs[0], g.owner.inputs[0]], z, mode=WITHOUT)
    assert not any(isinstance(op, Reshape) for op in _ops(f))
    new = local_inc_subtensor_of_reshape_grad.transform(None, z.owner)[0]
    assert new.owner.op == z.owner.op and new.owner.inputs[1] is g
    gv = np.arange(6, dtype=dtype).reshape(2, 3)
    want = np.zeros((3, 3), dtype)
    want[1:] = gv
    np.testing.assert_array_equal(f(np.ones((3, 3), dtype), gv), want)
    np.testing.assert_array_equal(h(np.ones((3, 3), dtype), gv), want)
