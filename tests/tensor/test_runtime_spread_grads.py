"""A value that numpy spreads when the function runs, along a dimension its type does not
declare broadcastable: ``set_subtensor(x[:], v)``, ``alloc(v, 3, 2)``, ``broadcast_to(v,
(3, 2))`` of a ``v`` of one row. Its gradient sums over the rows it filled
(``SumToShape``), the rewrites keep the spread (``broadcast_to`` where the part written
is read back, the alloc where an Elemwise would refuse the length 1), and every engine
gives the gradient finite differences of numpy's own forward computation give."""

from __future__ import annotations

import numpy as np
import pytest
from engine_modes import ENGINES, FLOATS, rewritten_mode

import theano_dag
from theano_dag import tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.gradient import grad, hessian
from theano_dag.tensor.elemwise import SumToShape
from theano_dag.tensor.extra_ops import BroadcastTo, broadcast_to

W = np.array([[1.0, 3.0], [2.0, 5.0], [7.0, 11.0]])
X = np.arange(6.0).reshape(3, 2)
ROWS = np.array([0, 1, 2])
PICK = np.array([[0, 1], [1, 0], [0, 0]])

# The Dask engine gathers the writes into one task each: what these tests check is the value.
pytestmark = pytest.mark.filterwarnings("ignore:Dask engine:UserWarning")


ALL = slice(None)


def _np_set(x, v, rows=ALL):
    out = x.copy()
    out[rows] = v
    return out


def _np_inc(x, v, rows=ALL):
    out = x.copy()
    out[rows] += v
    return out


# name: (theano_dag expression of x, v, i; numpy forward of x, v)
CASES = {
    "set_subtensor": (lambda x, v, i: tt.set_subtensor(x[:, :], v), _np_set),
    "inc_subtensor": (lambda x, v, i: tt.inc_subtensor(x[0:3], v), _np_inc),
    "set_rows": (lambda x, v, i: tt.set_subtensor(x[i], v), lambda x, v: _np_set(x, v, ROWS)),
    "inc_rows": (lambda x, v, i: tt.inc_subtensor(x[i], v), lambda x, v: _np_inc(x, v, ROWS)),
    "set_advanced": (
        lambda x, v, i: tt.set_subtensor(x[i, :], v),
        lambda x, v: _np_set(x, v, ROWS),
    ),
    "alloc": (lambda x, v, i: tt.alloc(v, 3, 2), lambda x, v: np.broadcast_to(v, (3, 2))),
    "broadcast_to": (
        lambda x, v, i: broadcast_to(v, (3, 2)),
        lambda x, v: np.broadcast_to(v, (3, 2)),
    ),
    "choose": (
        lambda x, v, i: tt.choose(tt.constant(PICK), [v, x]),
        lambda x, v: np.choose(PICK, [v, x]),
    ),
    "choose_array": (
        lambda x, v, i: tt.choose(tt.constant(PICK), tt.stack([v * 2, v])),
        lambda x, v: np.choose(PICK, np.stack([v * 2, v])),
    ),
}


def _mode(engine):
    if engine == "dask":
        pytest.importorskip("dask.array")
        return Mode(linker="dask", optimizer="fast_run")
    return rewritten_mode(engine)


def _cost(y):
    return (y * W).sum() + (y**2).sum()


def _fd_grad(forward, v):
    # central differences of a quadratic: exact up to rounding
    g = np.zeros_like(v)
    for k in np.ndindex(v.shape):
        up, down = v.copy(), v.copy()
        up[k] += 0.5
        down[k] -= 0.5
        g[k] = _cost(forward(X, up)) - _cost(forward(X, down))
    return g


@pytest.mark.parametrize("engine", [*ENGINES, "dask"])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("v_shape", [(1, 2), (3, 1), (1, 1), (3, 2)])
def test_gradient_of_a_value_spread_at_run_time(engine, dtype, case, v_shape):
    build, forward = CASES[case]
    x, v, i = tt.matrix("x", dtype=dtype), tt.matrix("v", dtype=dtype), tt.lvector("i")
    y = build(x, v, i)
    gv = grad(_cost(y), v)
    f = theano_dag.function([x, v, i], [y, gv], mode=_mode(engine), on_unused_input="ignore")
    v_val = (np.arange(np.prod(v_shape)) + 1.0).reshape(v_shape)
    y_val, g_val = f(X.astype(dtype), v_val.astype(dtype), ROWS)
    want = _fd_grad(forward, v_val)
    assert g_val.shape == v_shape and g_val.dtype == dtype
    np.testing.assert_allclose(y_val, forward(X, v_val), rtol=1e-6)
    np.testing.assert_allclose(g_val, want, rtol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("engine", [*ENGINES, "dask"])
def test_hessian_through_a_spread_value(engine):
    # the Hessian of sum(set_subtensor(x[:], v) ** 3) wrt v of one row: 6 * the sum of the
    # rows it filled, on the diagonal (SumToShape's own gradient spreads back)
    x, v = tt.dmatrix("x"), tt.dvector("v")
    m = v.reshape((-1, 2))  # (?, 2): one row here, spread over x's three
    y = tt.set_subtensor(x[:, :], m)
    h = hessian((y**3).sum(), v)
    f = theano_dag.function([x, v], h, mode=_mode(engine))
    v_val = np.array([1.5, -2.0])
    np.testing.assert_allclose(f(np.zeros((3, 2)), v_val), np.diag(6 * 3 * v_val), rtol=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_gradient_of_choose_whose_index_array_is_spread(engine):
    # numpy's choose spreads an index array of one row over the choices' rows
    a, c0, c1 = tt.lmatrix("a"), tt.dmatrix("c0"), tt.dmatrix("c1")
    g0, g1 = grad((tt.choose(a, [c0, c1]) * W).sum(), [c0, c1])
    f = theano_dag.function([a, c0, c1], [g0, g1], mode=rewritten_mode(engine))
    got0, got1 = f(np.array([[0, 1]]), np.zeros((3, 2)), np.zeros((3, 2)))
    np.testing.assert_array_equal(got0, W * [1, 0])
    np.testing.assert_array_equal(got1, W * [0, 1])


def _sum_to_shapes(value):
    x = tt.dmatrix("x")
    g = grad(_cost(tt.set_subtensor(x[:, :], value)), value)
    nodes = theano_dag.graph.basic.io_toposort([x, value], [g])
    return [n.op for n in nodes if isinstance(n.op, SumToShape)]


def test_gradient_sums_at_run_time_only_where_a_length_may_spread():
    assert _sum_to_shapes(tt.dmatrix("v")) == [SumToShape((0, 1))]
    # a length the type declares (1, broadcastable; or 3) is not spread at run time
    assert _sum_to_shapes(tt.TensorType("float64", shape=(1, None))("r")) == [SumToShape((1,))]
    assert _sum_to_shapes(tt.TensorType("float64", shape=(3, 2))("s")) == []


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_sum_to_shape_values_shape_and_gradient(engine, dtype):
    g, v = tt.matrix("g", dtype=dtype), tt.matrix("v", dtype=dtype)
    s = SumToShape((0, 1))(g, v)
    f = theano_dag.function([g, v], [s, s.shape], mode=rewritten_mode(engine))
    g_val = np.arange(6.0, dtype=dtype).reshape(3, 2)
    for v_shape, want in [
        ((1, 2), g_val.sum(0, keepdims=True)),
        ((3, 1), g_val.sum(1, keepdims=True)),
        ((1, 1), g_val.sum(keepdims=True)),
        ((3, 2), g_val),
    ]:
        out, shape = f(g_val, np.zeros(v_shape, dtype))
        assert out.dtype == dtype and tuple(shape) == v_shape
        np.testing.assert_allclose(out, want)
    theano_dag.gradient.verify_grad(
        lambda a: SumToShape((0,))(a, tt.constant(np.zeros((1, 2)))),
        [np.random.default_rng(0).standard_normal((3, 2))],
        rng=np.random.default_rng(1),
        mode=rewritten_mode(engine),
    )


def test_sum_to_shape_refuses_a_length_it_cannot_sum_to():
    g, v = tt.dmatrix("g"), tt.dmatrix("v")
    f = theano_dag.function([g, v], SumToShape((0,))(g, v), mode=Mode("py", None))
    with pytest.raises(
        ValueError,
        match=r"SumToShape\{axes=\(0,\)\}: the gradient has length 3 along dimension 0, "
        r"which does not sum to the value's length 2",
    ):
        f(np.ones((3, 2)), np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"a 2-d gradient and a value of as many dim.*, got a 1-d"):
        SumToShape((0,))(g, tt.dvector("w"))


def _ops(f):
    return [n.op for n in f.maker.fgraph.toposort()]


def test_read_back_of_a_part_set_spreads_a_value_that_may_have_been_spread():
    x, v = tt.dmatrix("x"), tt.dmatrix("v")
    y = tt.set_subtensor(x[1:, :], v)
    f = theano_dag.function([x, v], 2 * y[1:, :], mode=rewritten_mode("cpu"))
    assert not any(type(op).__name__ == "IncSubtensor" for op in _ops(f))
    assert any(isinstance(op, BroadcastTo) for op in _ops(f))
    np.testing.assert_array_equal(f(X, np.array([[1.0, 2.0]])), [[2.0, 4.0], [2.0, 4.0]])
    np.testing.assert_array_equal(f(X, np.array([[1.0], [2.0]])), [[2.0, 2.0], [4.0, 4.0]])
    # a value whose lengths are declared is read back as it is
    w = tt.TensorType("float64", shape=(2, 2))("w")
    y = tt.set_subtensor(tt.TensorType("float64", shape=(3, 2))("x")[1:, :], w)
    g = theano_dag.function([y.owner.inputs[0], w], 2 * y[1:, :], mode=rewritten_mode("cpu"))
    assert not any(isinstance(op, BroadcastTo) for op in _ops(g))


def test_an_alloc_that_may_spread_its_value_stays_in_an_elemwise():
    v, m = tt.dmatrix("v"), tt.dmatrix("m")
    f = theano_dag.function([v, m], tt.alloc(v, 3, 2) * m, mode=rewritten_mode("cpu"))
    assert any(type(op).__name__ == "Alloc" for op in _ops(f))
    np.testing.assert_array_equal(f(np.array([[1.0, 2.0]]), W), W * [1.0, 2.0])
    # alloc(v, *v.shape) spreads nothing: the Elemwise takes v itself
    g = theano_dag.function([v, m], tt.alloc(v, *v.shape) * m, mode=rewritten_mode("cpu"))
    assert not any(type(op).__name__ == "Alloc" for op in _ops(g))
