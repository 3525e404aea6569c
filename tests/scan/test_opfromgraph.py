"""``OpFromGraph``: values on every engine, shared inputs, gradients (default and
overridden) by finite differences, R-operator, shapes, and the inline rewrite."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.builders import OpFromGraph
from theano_dag.compile.mode import Mode
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.gradient import Rop, disconnected_type, verify_grad

ENGINES = [
    pytest.param(Mode(linker="py", optimizer=None), id="py"),
    pytest.param(Mode(linker="cpu"), id="cpu"),
    pytest.param(
        Mode(linker="opencl"),
        id="opencl",
        marks=pytest.mark.skipif(not opencl_available()[0], reason="no OpenCL device"),
    ),
]


@pytest.mark.parametrize("mode", ENGINES)
@pytest.mark.parametrize("inline", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_values_match_numpy(mode, inline, dtype):
    x, y = tt.TensorType(dtype, shape=(None,))("x"), tt.TensorType(dtype, shape=(None,))("y")
    op = OpFromGraph([x, y], [x * y + tt.exp(x), (x - y).sum()], inline=inline)
    a, b = tt.TensorType(dtype, shape=(None,))("a"), tt.TensorType(dtype, shape=(None,))("b")
    o1, o2 = op(a, b)
    f = theano_dag.function([a, b], [o1 + 1, o2], mode=mode)
    av, bv = np.array([0.5, 1.0], dtype=dtype), np.array([2.0, 3.0], dtype=dtype)
    r1, r2 = f(av, bv)
    assert r1.dtype == dtype
    np.testing.assert_allclose(r1, av * bv + np.exp(av) + 1, rtol=1e-6)
    np.testing.assert_allclose(r2, (av - bv).sum(), rtol=1e-6)
    kinds = {type(n.op).__name__ for n in f.maker.fgraph.apply_nodes}
    if mode.optimizer is not None:
        assert ("OpFromGraph" in kinds) is not inline


def test_shared_variables_become_inputs():
    w = theano_dag.shared(np.array([1.0, 2.0]), name="w")
    x = tt.dvector("x")
    op = OpFromGraph([x], [x * w])
    a = tt.dvector("a")
    out = op(a)
    assert w in out.owner.inputs
    f = theano_dag.function([a], out)
    np.testing.assert_allclose(f(np.ones(2)), [1, 2])
    w.set_value(np.array([3.0, 4.0]))
    np.testing.assert_allclose(f(np.ones(2)), [3, 4])


def test_connection_pattern_follows_a_random_generator_read_by_the_graph():
    # Theano's test_connection_pattern: the stream's generator is an extra input of the op,
    # connected to the outputs that use its draws; the gradient through a draw is still
    # undefined in its parameters and the graph runs.
    srng = tt.random.utils.RandomStream(seed=234)
    u = srng.uniform(size=(2, 2))
    x, y = tt.dmatrices("x", "y")
    op = OpFromGraph([x, y], [x + u, y + 3, 3 + u])
    assert op.connection_pattern(None) == [
        [True, False, False],
        [False, True, False],
        [True, False, True],
    ]
    node = u.owner
    assert node.op.connection_pattern(node)[:2] == [[True, True], [False, False]]
    a, b = tt.dmatrices("a", "b")
    o1, o2, o3 = op(a, b)
    f = theano_dag.function([a, b], [o1, o2, o3])
    r1, r2, r3 = f(np.zeros((2, 2)), np.ones((2, 2)))
    np.testing.assert_array_equal(r2, np.full((2, 2), 4.0))
    np.testing.assert_allclose(r3, r1 + 3)
    assert ((r1 >= 0) & (r1 < 1)).all()
    g = theano_dag.grad((o1 * a).sum(), a)  # the draw is a constant for a
    np.testing.assert_allclose(
        theano_dag.function([a, b], g)(np.zeros((2, 2)), np.ones((2, 2))).shape, (2, 2)
    )


def test_free_non_input_variable_is_an_error():
    x, z = tt.dscalars("x", "z")
    with pytest.raises(ValueError, match=r"depend on \[z\]"):
        OpFromGraph([x], [x + z])


def test_default_gradient_by_finite_differences():
    x, y = tt.dmatrices("x", "y")
    op = OpFromGraph([x, y], [tt.tanh(tt.dot(x, y)), (x**2).sum()])
    rng = np.random.default_rng(0)

    def cost(a, b):
        o1, o2 = op(a, b)
        return o1.sum() + o2

    verify_grad(cost, [rng.normal(size=(2, 3)), rng.normal(size=(3, 2))], rng=rng)


def test_grad_and_lop_overrides():
    x, y = tt.dscalars("x", "y")
    # A "straight-through" op: the forward is a rounding, the gradient passes g through.
    op = OpFromGraph([x], [tt.round(x)], grad_overrides=lambda inps, grads: [grads[0]])
    a = tt.dscalar("a")
    assert theano_dag.grad(op(a) * 3, a).eval({a: 1.3}) == 3.0
    op2 = OpFromGraph(
        [x, y],
        [x * y],
        lop_overrides=["default", lambda inps, outs, grads: grads[0] * 10],
    )
    b = tt.dscalar("b")
    ga, gb = theano_dag.grad(op2(a, b), [a, b])
    assert ga.eval({a: 2.0, b: 5.0}) == 5.0
    assert gb.eval({a: 2.0, b: 5.0}) == 10.0
    op3 = OpFromGraph([x, y], [x * y], grad_overrides=["default", disconnected_type()])
    ga, gb = theano_dag.grad(op3(a, b), [a, b], disconnected_inputs="ignore")
    assert ga.eval({a: 2.0, b: 5.0}) == 5.0
    assert gb.eval({b: 5.0}) == 0.0


def test_rop_default_and_override():
    x = tt.dvector("x")
    op = OpFromGraph([x], [x**2])
    a, v = tt.dvectors("a", "v")
    for legacy in (False, True):  # through the pullback, and through Op.R_op
        r = Rop(op(a), a, v, use_op_rop_implementation=legacy)
        np.testing.assert_allclose(r.eval({a: np.array([1.0, 2.0]), v: np.ones(2)}), [2, 4])
    op2 = OpFromGraph([x], [x**2], rop_overrides=lambda inps, pts: [pts[0] * 7])
    r2 = Rop(op2(a), a, v, use_op_rop_implementation=True)
    np.testing.assert_allclose(r2.eval({v: np.ones(2)}), [7, 7])


def test_infer_shape_from_the_inner_graph():
    x = tt.dmatrix("x")
    op = OpFromGraph([x], [x.T])
    a = tt.dmatrix("a")
    out = op(a)
    shp = op.infer_shape(None, out.owner, [(a.shape[0], a.shape[1])])
    f = theano_dag.function([a], list(shp[0]))
    assert [int(s) for s in f(np.zeros((2, 5)))] == [5, 2]


def test_top_level_name():
    assert theano_dag.OpFromGraph is OpFromGraph


def test_gradient_when_an_output_feeds_another():
    # The second output is built on the first: both paths reach x.
    x = tt.dvector("x")
    h = tt.sin(x)
    op = OpFromGraph([x], [h, h * 3])
    rng = np.random.default_rng(3)

    def cost(a):
        o1, o2 = op(a)
        return o1.sum() + (o2**2).sum()

    verify_grad(cost, [rng.normal(size=3)], rng=rng)


@pytest.mark.parametrize("inline", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_overrides_given_as_graphs_take_the_groups_in_one_list(inline, dtype):
    # Theano's convention: a grad override that is itself an OpFromGraph takes the
    # inputs then the output gradients; a lop override, inputs, outputs, gradients.
    x, y, g = (tt.vector(n, dtype=dtype) for n in "xyg")
    grad_graph = OpFromGraph([x, y, g], [g * y * 2, g * x * 1.5], inline=inline)
    op = OpFromGraph([x, y], [x * y], grad_overrides=grad_graph, inline=inline)
    o, dy = tt.vector("o", dtype=dtype), tt.vector("dy", dtype=dtype)
    lop_graph = OpFromGraph([x, o, dy], [2 * o * (1 - o) * dy], inline=inline)
    sig = OpFromGraph([x], [tt.nnet.sigmoid(x)], lop_overrides=lop_graph, inline=inline)
    xx, yy = tt.vector("xx", dtype=dtype), tt.vector("yy", dtype=dtype)
    dx, dyy = theano_dag.grad(op(xx, yy).sum(), [xx, yy])
    (ds,) = theano_dag.grad(sig(xx).sum(), [xx])
    xv, yv = (np.random.default_rng(k).random(5).astype(dtype) for k in (1, 2))
    got = theano_dag.function([xx, yy], [dx, dyy, ds])(xv, yv)
    s = 1 / (1 + np.exp(-xv))
    for a, b in zip(got, [yv * 2, xv * 1.5, 2 * s * (1 - s)]):
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_gradient_has_test_values_when_they_are_computed():
    x = tt.dscalar("x")
    op = OpFromGraph([x], [x**3])
    y = tt.dscalar("y")
    y.tag.test_value = np.array(2.0)
    with theano_dag.config.change_flags(compute_test_value="raise"):
        g = theano_dag.grad(op(y), y)
    assert g.tag.test_value == 12.0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rop_override_is_honoured_by_the_default_rop(dtype):
    # Theano's Rop ran each op's R_op; the pullback Rop would differentiate the inner
    # graph and miss the user's R-operator.
    x, y = tt.vector("x", dtype=dtype), tt.vector("y", dtype=dtype)
    op = OpFromGraph(
        [x, y], [x * y], rop_overrides=lambda i, p: [p[0] * i[1] * 2 + i[0] * p[1] * 1.5]
    )
    xx, yy, du, dv = (tt.vector(n, dtype=dtype) for n in ("xx", "yy", "du", "dv"))
    jv = Rop(op(xx, yy) * 3, [xx, yy], [du, dv])
    vals = np.random.default_rng(3).random((4, 5)).astype(dtype)
    got = theano_dag.function([xx, yy, du, dv], jv)(*vals)
    want = 3 * (vals[2] * vals[1] * 2 + vals[0] * vals[3] * 1.5)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert op.overrides_rop and not OpFromGraph([x], [x * 2]).overrides_rop


def test_an_inner_output_that_views_an_input_is_a_copy():
    # op(p) = p[1:] is a view of p, whose memory the planner reuses once op read it
    # (every value planned, poisoned before its step writes it).
    a = tt.ivector("a")
    op = OpFromGraph([a], [a[1:]])
    v = tt.ivector("v")
    p = v**2
    mode = Mode(linker=CPULinker(min_plan_bytes=0, poison=True))
    f = theano_dag.function([v], [op(p), tt.exp2(v)], mode=mode)
    vv = np.arange(3000, dtype="int32") % 7
    np.testing.assert_array_equal(f(vv)[0], (vv**2)[1:])
