"""Tests of theano_dag.gradient: grad, Lop/Rop, jacobian/hessian, grad ops, verify_grad."""

import pickle
import sys
import warnings

import numpy as np
import pytest

import theano_dag.gradient as gradient
import theano_dag.tensor as tt
from theano_dag.compile import shared
from theano_dag.compile.function import function
from theano_dag.config import config
from theano_dag.gradient import (
    ConsiderConstant,
    DisconnectedInputError,
    DisconnectedType,
    GradientError,
    Lop,
    MapOverIndex,
    NullType,
    NullTypeGradError,
    NullTypeRopError,
    Rop,
    ZeroGrad,
    consider_constant,
    disconnected_grad,
    disconnected_type,
    grad,
    grad_clip,
    grad_scale,
    grad_undefined,
    hessian,
    jacobian,
    map_over_index,
    numeric_grad,
    subgraph_grad,
    undefined_grad,
    verify_grad,
    zero_grad,
)
from theano_dag.graph.basic import Apply, ancestors
from theano_dag.graph.op import Op
from theano_dag.tensor.shape import SpecifyShape

RNG = np.random.default_rng(1234)


def rand(*shape):
    return RNG.standard_normal(shape)


def fn(inputs, outputs):
    return function(inputs, outputs, on_unused_input="ignore")


# ---------------------------------------------------------------------------
# Toy ops whose gradients are known, to test the driver itself


class TwoWay(Op):
    """out0 = 2 * a, out1 = 3 * b: out0 depends only on a, out1 only on b."""

    __props__ = ()

    def __init__(self):
        self.grad_calls = []

    def make_node(self, a, b):
        a, b = tt.as_tensor_variable(a), tt.as_tensor_variable(b)
        return Apply(self, [a, b], [a.type(), b.type()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = 2 * inputs[0]
        output_storage[1][0] = 3 * inputs[1]

    def connection_pattern(self, node):
        return [[True, False], [False, True]]

    def grad(self, inputs, output_grads):
        self.grad_calls.append([type(g.type).__name__ for g in output_grads])
        ga, gb = output_grads
        return [
            disconnected_type() if isinstance(ga.type, DisconnectedType) else 2 * ga,
            disconnected_type() if isinstance(gb.type, DisconnectedType) else 3 * gb,
        ]


class NoGrad(Op):
    """An identity-like op that does not implement grad."""

    __props__ = ()

    def make_node(self, x):
        x = tt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = inputs[0].copy()


class UndefinedFirst(Op):
    """out = a * b; the gradient on a is undefined, on b it is a * g."""

    __props__ = ()

    def make_node(self, a, b):
        a, b = tt.as_tensor_variable(a), tt.as_tensor_variable(b)
        return Apply(self, [a, b], [a.type()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = inputs[0] * inputs[1]

    def grad(self, inputs, output_grads):
        return [grad_undefined(self, 0, inputs[0], "on purpose"), inputs[0] * output_grads[0]]


class WrongGrad(Op):
    """out = x ** 2 with the gradient wrongly given as 3 * x."""

    __props__ = ()

    def make_node(self, x):
        x = tt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = inputs[0] ** 2

    def grad(self, inputs, output_grads):
        return [3 * inputs[0] * output_grads[0]]


class BadGrad(Op):
    """out = 2 * x; ``grad`` returns whatever ``make_terms(x, g)`` gives."""

    __props__ = ("kind",)

    def __init__(self, kind):
        self.kind = kind

    def make_node(self, x):
        x = tt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = 2 * inputs[0]

    def grad(self, inputs, output_grads):
        (g,) = output_grads
        return {
            "none": [None],
            "integer": [tt.cast(g, "int64")],
            "count": [g, g],
            "disconnected": [disconnected_type()],
            "default_pattern": [disconnected_type()],
            "ndim": [g.sum()],
        }[self.kind]


class PatternedBadGrad(BadGrad):
    """BadGrad with its own connection_pattern (so a mismatch is an error)."""

    def connection_pattern(self, node):
        return [[True]]


# ---------------------------------------------------------------------------
# grad against hand-computed values


def test_grad_scalar_polynomial():
    x = tt.dscalar("x")
    g = grad(x**3 + 2 * x, x)
    assert float(fn([x], g)(1.5)) == pytest.approx(3 * 1.5**2 + 2)


def test_grad_returns_graph_not_values():
    x = tt.dscalar("x")
    g = grad(x * x, x)
    assert g.owner is not None
    assert x in set(ancestors([g]))


def test_grad_shared_subexpression_sums_terms():
    x = tt.dvector("x")
    y = tt.exp(x)
    cost = (y * y + y).sum()
    g = fn([x], grad(cost, x))
    xv = rand(4)
    np.testing.assert_allclose(g(xv), 2 * np.exp(2 * xv) + np.exp(xv))


def test_grad_matrix_dot():
    x, w = tt.dmatrix("x"), tt.dmatrix("w")
    h = tt.dot(x, w)
    cost = (h**2).sum()
    gx, gw = grad(cost, [x, w])
    xv, wv = rand(3, 4), rand(4, 2)
    gxv, gwv = fn([x, w], [gx, gw])(xv, wv)
    hv = xv @ wv
    np.testing.assert_allclose(gxv, 2 * hv @ wv.T)
    np.testing.assert_allclose(gwv, 2 * xv.T @ hv)


def test_grad_logistic_regression():
    x, y, w = tt.dmatrix("x"), tt.dvector("y"), tt.dvector("w")
    p = tt.sigmoid(tt.dot(x, w))
    cost = -(y * tt.log(p) + (1 - y) * tt.log(1 - p)).mean()
    xv, wv = rand(5, 3), rand(3)
    yv = (RNG.random(5) > 0.5).astype("float64")
    pv = 1 / (1 + np.exp(-(xv @ wv)))
    np.testing.assert_allclose(
        fn([x, y, w], grad(cost, w))(xv, yv, wv), xv.T @ (pv - yv) / 5, rtol=1e-10
    )


def test_grad_broadcast_and_reductions():
    x, b = tt.dmatrix("x"), tt.dvector("b")
    cost = (tt.tanh(x + b) * x).sum(axis=0).max()
    xv, bv = rand(3, 4), rand(4)
    t = np.tanh(xv + bv)
    col = int(np.argmax((t * xv).sum(axis=0)))
    gx, gb = fn([x, b], grad(cost, [x, b]))(xv, bv)
    exp_gx = np.zeros_like(xv)
    exp_gx[:, col] = (1 - t[:, col] ** 2) * xv[:, col] + t[:, col]
    exp_gb = np.zeros(4)
    exp_gb[col] = ((1 - t[:, col] ** 2) * xv[:, col]).sum()
    np.testing.assert_allclose(gx, exp_gx)
    np.testing.assert_allclose(gb, exp_gb)


def test_grad_result_form_matches_wrt():
    x, y = tt.dscalar("x"), tt.dscalar("y")
    cost = x * y
    assert isinstance(grad(cost, [x, y]), list)
    assert isinstance(grad(cost, (x, y)), tuple)
    assert not isinstance(grad(cost, x), (list, tuple))


def test_grad_of_cost_wrt_itself_is_one():
    x = tt.dscalar("x")
    c = x * 2
    assert float(fn([x], grad(c, c))(3.0)) == 1.0


def test_grad_wrt_intermediate_variable():
    x = tt.dvector("x")
    h = x * 3
    cost = (h**2).sum()
    xv = rand(3)
    np.testing.assert_allclose(fn([x], grad(cost, h))(xv), 2 * 3 * xv)


def test_grad_names():
    x = tt.dscalar("x")
    cost = x * x
    cost.name = "cost"
    assert grad(cost, x).name == "(dcost/dx)"
    assert grad(cost, x, add_names=False).name is None


def test_grad_float32_stays_float32():
    x = tt.fvector("x")
    g = grad((x * 2).sum(), x)
    assert g.dtype == "float32"


# ---------------------------------------------------------------------------
# Error cases


def test_cost_must_be_scalar():
    x = tt.dvector("x")
    cost = x * 2
    cost.name = "vector_cost"
    with pytest.raises(TypeError, match=r"cost must be a scalar.*vector_cost"):
        grad(cost, x)


def test_cost_must_be_a_variable():
    x = tt.dscalar("x")
    with pytest.raises(TypeError, match="cost must be a symbolic Variable"):
        grad(3.0, x)


def test_wrt_must_be_variables_not_set():
    x = tt.dscalar("x")
    with pytest.raises(TypeError, match=r"wrt\[1\] must be a symbolic Variable"):
        grad(x * 2, [x, 3.0])
    with pytest.raises(TypeError, match="not a set"):
        grad(x * 2, {x})


def test_disconnected_input_raises_naming_variable():
    x, y = tt.dscalar("x"), tt.dscalar("lonely_y")
    with pytest.raises(DisconnectedInputError, match="lonely_y"):
        grad(x * 2, [x, y])


def test_disconnected_input_ignore_warn_and_return_forms():
    x, y = tt.dvector("x"), tt.dmatrix("y")
    cost = x.sum()
    gy = grad(cost, y, disconnected_inputs="ignore")
    yv = rand(2, 3)
    np.testing.assert_array_equal(fn([y], gy)(yv), np.zeros((2, 3)))
    with pytest.warns(UserWarning, match="not part of the computational graph"):
        grad(cost, y, disconnected_inputs="warn")
    assert grad(cost, y, disconnected_inputs="ignore", return_disconnected="None") is None
    d = grad(cost, y, disconnected_inputs="ignore", return_disconnected="Disconnected")
    assert isinstance(d.type, DisconnectedType)
    with pytest.raises(ValueError, match="disconnected_inputs must be one of"):
        grad(cost, x, disconnected_inputs="sometimes")


def test_null_gradient_raises_naming_op():
    a, b = tt.dscalar("a"), tt.dscalar("b")
    out = UndefinedFirst()(a, b)
    with pytest.raises(NullTypeGradError, match="UndefinedFirst"):
        grad(out, a)
    # b's gradient is fine; asking only for it does not raise.
    assert float(fn([a, b], grad(out, b))(2.0, 5.0)) == 2.0
    g = grad(out, a, null_gradients="return")
    assert isinstance(g.type, NullType)


def test_op_without_grad_gives_null_type_error_naming_op():
    x = tt.dvector("x")
    cost = NoGrad()(x * 2).sum()
    with pytest.raises(NullTypeGradError, match="NoGrad"):
        grad(cost, x)


def test_undefined_grad_op():
    x = tt.dscalar("x")
    with pytest.raises(NullTypeGradError, match="UndefinedGrad"):
        grad(undefined_grad(x) * 2, x)


def test_null_cost_rejected_and_none_cost_needs_known_grads():
    x = tt.dscalar("x")
    for error in (ValueError, AssertionError):  # (Theano's: an AssertionError)
        with pytest.raises(error, match="can't both be None"):
            grad(None, x)
    with pytest.raises(ValueError, match="undefined cost"):
        grad(grad_undefined(NoGrad(), 0, x), x)


def test_bad_consider_constant_and_known_grads():
    x = tt.dscalar("x")
    with pytest.raises(TypeError, match="consider_constant must be a list"):
        grad(x * 2, x, consider_constant=x)
    with pytest.raises(TypeError, match="elements of consider_constant must be Variables"):
        grad(x * 2, x, consider_constant=[1.0])
    y = tt.dvector("y")
    with pytest.raises(TypeError, match="must be a float tensor"):
        grad(None, y, known_grads={y * 2: tt.ivector("g")})
    with pytest.raises(ValueError, match="has 2 dimensions"):
        grad(None, y, known_grads={y * 2: tt.dmatrix("g")})


@pytest.mark.parametrize(
    "kind, error, match",
    [
        ("none", TypeError, "BadGrad.*returned None for the gradient of input 0"),
        ("integer", TypeError, "BadGrad.*integer-valued variable.*dtype int64"),
        ("count", ValueError, "BadGrad.*returned 2 gradient terms for 1 inputs"),
        (
            "disconnected",
            TypeError,
            "PatternedBadGrad.*DisconnectedType for input 0.*connection_pattern",
        ),
        ("ndim", ValueError, "BadGrad.*0 dimensions.*but 1 are required"),
    ],
)
def test_op_contract_violations_are_reported(kind, error, match):
    x = tt.dvector("x")
    with pytest.raises(error, match=match):
        grad(PatternedBadGrad(kind)(x).sum(), x)


def test_disconnected_term_without_pattern_warns():
    x = tt.dvector("x")
    with pytest.warns(UserWarning, match="implement connection_pattern"):
        g = grad(BadGrad("default_pattern")(x).sum(), x, disconnected_inputs="ignore")
    np.testing.assert_array_equal(fn([x], g)(np.ones(2)), np.zeros(2))


# ---------------------------------------------------------------------------
# connection_pattern, integers, consider_constant, known_grads


def test_connection_pattern_is_respected():
    op = TwoWay()
    a, b = tt.dvector("a"), tt.dvector("b")
    o0, o1 = op(a, b)
    cost = o0.sum()
    av = rand(3)
    np.testing.assert_allclose(fn([a, b], grad(cost, a))(av, av), 2 * np.ones(3))
    # b only reaches o1, which the cost does not use.
    with pytest.raises(DisconnectedInputError, match="b"):
        grad(cost, b)
    # The op was asked for its gradient once, with o1's gradient disconnected.
    assert op.grad_calls == [["TensorType", "DisconnectedType"]]


def test_multi_output_gradients_add_up():
    a, b = tt.dvector("a"), tt.dvector("b")
    o0, o1 = TwoWay()(a, b)
    cost = (o0 * o1).sum()
    av, bv = rand(3), rand(3)
    ga, gb = fn([a, b], grad(cost, [a, b]))(av, bv)
    np.testing.assert_allclose(ga, 2 * 3 * bv)
    np.testing.assert_allclose(gb, 3 * 2 * av)


def test_integer_inputs_get_float_gradients_through_float_outputs_only():
    # As Theano: through a float output (x * i) an integer gets the gradient as if it
    # were real; through an integer output (i * 2, i // 2) none.
    x, i = tt.dvector("x"), tt.lvector("i")
    cost = (x * i).sum() + (i * 2).sum() + (x * (i // 2)).sum()
    gx, gi = grad(cost, [x, i])
    assert gi.dtype.startswith("float")
    xv, iv = rand(3), np.array([1, 2, 3])
    gxv, giv = fn([x, i], [gx, gi])(xv, iv)
    np.testing.assert_allclose(gxv, iv + iv // 2)
    np.testing.assert_allclose(giv, xv)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradient_wrt_an_integer_input_is_theanos(dtype):
    # Theano's test_grad_int: the gradient with respect to an integer matrix is the
    # gradient with respect to the same values as floats.
    X, W, b = tt.imatrix("X"), tt.matrix("W", dtype=dtype), tt.vector("b", dtype=dtype)
    Xf = tt.matrix("Xf", dtype="float64")

    def grad_of(v):
        cost = tt.nnet.sigmoid(tt.dot(v, W) + b).sum()
        return fn([v, W, b], grad(cost, v))

    rng = np.random.default_rng(0)
    Xv = (rng.normal(size=(5, 3)) * 100).astype("int32")
    Wv, bv = rng.normal(size=(3, 4)).astype(dtype), rng.normal(size=4).astype(dtype)
    got = grad_of(X)(Xv, Wv, bv)
    assert got.dtype == "float64"
    np.testing.assert_allclose(got, grad_of(Xf)(Xv.astype("float64"), Wv, bv), rtol=1e-5)
    z = 1 / (1 + np.exp(-(Xv.astype("float64") @ Wv.astype("float64") + bv)))
    np.testing.assert_allclose(got, (z * (1 - z)) @ Wv.T.astype("float64"), rtol=1e-4)


def test_integer_only_cost_wrt_integer():
    i = tt.lscalar("i")
    g = grad(i * 3, i)
    assert g.dtype.startswith("float")
    assert float(fn([i], g)(4)) == 0.0


def test_gradient_does_not_flow_through_integer_cast():
    x = tt.dvector("x")
    cost = tt.cast(x * 3, "int64").sum() * 2.0 + x.sum()
    np.testing.assert_array_equal(fn([x], grad(cost, x))(np.array([0.3, 1.7])), [1.0, 1.0])


def test_consider_constant_argument():
    x = tt.dscalar("x")
    y = x * x
    cost = y * x
    g = grad(cost, x, consider_constant=[y])
    assert float(fn([x], g)(3.0)) == 9.0  # d/dx (y * x) with y fixed = y


def test_known_grads_without_cost():
    x = tt.dvector("x")
    y = x**2
    g_y = tt.dvector("g_y")
    g = grad(None, x, known_grads={y: g_y})
    xv, gv = rand(3), rand(3)
    np.testing.assert_allclose(fn([x, g_y], g)(xv, gv), 2 * xv * gv)


def test_known_grads_override_what_the_cost_gives():
    x = tt.dscalar("x")
    y = x * 3
    cost = y * 2
    g = grad(cost, x, known_grads={y: tt.constant(10.0)})
    # Theano: a known gradient replaces the flow from the cost on that variable.
    assert float(fn([x], g)(1.0)) == 30.0


def test_subgraph_grad_splits_the_backward_pass():
    x = tt.dvector("x")
    w1, w2 = tt.dvector("w1"), tt.dscalar("w2")
    h = tt.tanh(x * w1)
    cost = (h * w2).sum()
    (gw2,), (gh,) = subgraph_grad([w2], [h], cost=cost)
    (gw1,), _ = subgraph_grad([w1], [x], start={h: gh})
    xv, w1v, w2v = rand(3), rand(3), 0.7
    hv = np.tanh(xv * w1v)
    out = fn([x, w1, w2], [gw2, gw1])(xv, w1v, w2v)
    np.testing.assert_allclose(out[0], hv.sum())
    np.testing.assert_allclose(out[1], w2v * (1 - hv**2) * xv)


# ---------------------------------------------------------------------------
# Gradient-shaping ops


def test_zero_grad_and_disconnected_grad():
    x = tt.dvector("x")
    xv = rand(3)
    np.testing.assert_allclose(fn([x], grad((x * zero_grad(x)).sum(), x))(xv), xv)
    np.testing.assert_allclose(fn([x], grad((x * disconnected_grad(x)).sum(), x))(xv), xv)
    # zero_grad keeps x connected (zero gradient); disconnected_grad cuts it.
    np.testing.assert_array_equal(fn([x], grad(zero_grad(x).sum(), x))(xv), np.zeros(3))
    with pytest.raises(DisconnectedInputError, match="x"):
        grad(disconnected_grad(x).sum(), x)


def test_grad_ops_run_as_identity_and_infer_shape():
    x = tt.dmatrix("x")
    xv = rand(2, 3)
    for wrap in (
        zero_grad,
        disconnected_grad,
        undefined_grad,
        lambda v: grad_clip(v, -1, 1),
        lambda v: grad_scale(v, 2.0),
    ):
        y = wrap(x)
        assert y.type == x.type
        np.testing.assert_array_equal(fn([x], y * 1.0)(xv), xv)
        node = y.owner
        assert node.op.infer_shape(None, node, [("a", "b")]) == [("a", "b")]
    # perform itself (as the reference engine calls it) returns the input.
    out = [None]
    zero_grad(x).owner.op.perform(None, [xv], [out])
    assert out[0] is xv


def test_consider_constant_function_is_deprecated_zero_grad():
    x = tt.dscalar("x")
    with pytest.warns(DeprecationWarning, match="zero_grad"):
        y = consider_constant(x)
    assert isinstance(y.owner.op, ConsiderConstant) and isinstance(y.owner.op, ZeroGrad)
    assert float(fn([x], grad(x * y, x))(2.0)) == 2.0


def test_grad_clip_and_grad_scale():
    x = tt.dscalar("x")
    assert float(fn([x], grad(grad_clip(x, -1, 1) ** 2, x))(2.0)) == 1.0
    assert float(fn([x], grad(grad_clip(x, -1, 1) ** 2, x))(-0.25)) == -0.5
    assert float(fn([x], grad(grad_scale(x**2, -3.0), x))(2.0)) == -12.0
    with pytest.raises(ValueError, match="upper bound"):
        grad_clip(x, 1, -1)


# ---------------------------------------------------------------------------
# L and R operators


def test_lop_matches_vector_jacobian_product():
    x, w, v = tt.dvector("x"), tt.dmatrix("w"), tt.dvector("v")
    y = tt.dot(x, w)
    gx, gw = Lop(y, [x, w], v)
    xv, wv, vv = rand(3), rand(3, 4), rand(4)
    gxv, gwv = fn([x, w, v], [gx, gw])(xv, wv, vv)
    np.testing.assert_allclose(gxv, wv @ vv)
    np.testing.assert_allclose(gwv, np.outer(xv, vv))
    with pytest.raises(ValueError, match="one eval point per output"):
        Lop([y, y * 2], x, [v])


def test_rop_matches_jacobian_vector_product():
    w, x, v = tt.dmatrix("w"), tt.dvector("x"), tt.dvector("v")
    y = tt.tanh(tt.dot(w, x))
    jv = Rop(y, x, v)
    wv, xv, vv = rand(4, 3), rand(3), rand(3)
    t = np.tanh(wv @ xv)
    np.testing.assert_allclose(fn([w, x, v], jv)(wv, xv, vv), (1 - t**2) * (wv @ vv))
    # Several outputs and several wrt: sum over wrt of J_j v_j, per output.
    vw = tt.dmatrix("vw")
    r1, r2 = Rop([y, (x**2).sum()], [x, w], [v, vw])
    vwv = rand(4, 3)
    out = fn([w, x, v, vw], [r1, r2])(wv, xv, vv, vwv)
    np.testing.assert_allclose(out[0], (1 - t**2) * (wv @ vv + vwv @ xv))
    np.testing.assert_allclose(out[1], 2 * xv @ vv)


@pytest.mark.parametrize("legacy", [False, True])
def test_rop_of_a_linear_map_keeps_wrt_and_checks_the_eval_points_shape(legacy):
    # Theano's gradients tutorial: J V for y = x W does not read W, but W is an input of
    # the function (Theano's result kept it), and V must have W's shape.
    W, V, x = tt.dmatrix("W"), tt.dmatrix("V"), tt.dvector("x")
    jv = Rop(tt.dot(x, W), W, V, use_op_rop_implementation=legacy)
    f = fn([W, V, x], jv)
    wv, vv, xv = rand(3, 2), rand(3, 2), rand(3)
    np.testing.assert_allclose(f(wv, vv, xv), xv @ vv)
    if legacy:  # Dot.R_op's own graph reads W and checks the lengths it adds
        with pytest.raises(AssertionError):
            f(wv, rand(3, 4), xv)
    else:
        with pytest.raises(ValueError, match=r"SpecifyShape: expected shape \(3, 2\).*got"):
            f(wv, rand(3, 4), xv)
    # where the result reads W anyway, the graph is as it was: no shape check added
    jv = Rop(tt.tanh(tt.dot(x, W)), W, V, use_op_rop_implementation=legacy)
    assert W in ancestors([jv])
    assert not any(isinstance(v.owner.op, SpecifyShape) for v in ancestors([jv]) if v.owner)


def test_rop_with_op_r_op_implementation():
    w, x, v = tt.dmatrix("w"), tt.dvector("x"), tt.dvector("v")
    y = tt.tanh(tt.dot(w, x)) * x.sum()
    wv, xv, vv = rand(3, 4), rand(4), rand(4)
    f = fn([w, x, v], [Rop(y, x, v), Rop(y, x, v, use_op_rop_implementation=True)])
    by_pullback, by_r_op = f(wv, xv, vv)
    t = np.tanh(wv @ xv)
    expected = (1 - t**2) * (wv @ vv) * xv.sum() + t * vv.sum()
    np.testing.assert_allclose(by_pullback, expected)
    np.testing.assert_allclose(by_r_op, expected)


def test_rop_of_outputs_computed_from_one_another():
    # Theano's test_multiple_outputs: f = [m, v, m + v] (m + v reads the other outputs),
    # and a chain x**2 -> sin(x**2). Every output is connected to wrt.
    m, v, m_, v_ = tt.dmatrix("m"), tt.dvector("v"), tt.dmatrix("m_"), tt.dvector("v_")
    mv, vv, m_v, v_v = rand(3, 7), rand(7), rand(3, 7), rand(7)
    for make in (list, tuple):
        r = Rop(make([m, v, m + v]), [m, v], [m_, v_])
        assert isinstance(r, make) and len(r) == 3
        got = fn([m, v, m_, v_], list(r))(mv, vv, m_v, v_v)
        for g, want in zip(got, [m_v, v_v, m_v + v_v]):
            np.testing.assert_allclose(g, want)
    x, e = tt.dvector("x"), tt.dvector("e")
    sq = x**2
    got = fn([x, e], Rop([sq, tt.sin(sq), sq], x, e))(vv, v_v)
    for g, want in zip(got, [2 * vv * v_v, np.cos(vv**2) * 2 * vv * v_v, 2 * vv * v_v]):
        np.testing.assert_allclose(g, want)


def test_rop_where_one_inputs_cotangent_is_computed_from_anothers():
    # Rop(a - b, [a, b], [va, vb]) is va - vb: the cotangent of a is the dummy cotangent u
    # itself and b's is -u, computed from it; as known gradients u's stood for its whole
    # gradient and b's term was dropped (va alone). The same for a + b + c, a fused
    # multiply-add, a row added to each row of a matrix, inc_subtensor, solve.
    a, b, c = tt.dmatrix("a"), tt.dmatrix("b"), tt.dmatrix("c")
    va, vb, vc = tt.dmatrix("va"), tt.dmatrix("vb"), tt.dmatrix("vc")
    av, bv, cv, vav, vbv, vcv = (rand(3, 3) for _ in range(6))
    cases = [
        (a - b, vav - vbv),
        (a + b - c, vav + vbv - vcv),
        (a * b + c, vav * bv + av * vbv + vcv),
        (tt.inc_subtensor(a[1:], b[1:]), vav + np.vstack([np.zeros((1, 3)), vbv[1:]])),
        (tt.dot(a, b) - c, vav @ bv + av @ vbv - vcv),
    ]
    for out, want in cases:
        for legacy in (False, True):
            jv = Rop(out, [a, b, c], [va, vb, vc], use_op_rop_implementation=legacy)
            f = function([a, b, c, va, vb, vc], jv, on_unused_input="ignore")
            np.testing.assert_allclose(f(av, bv, cv, vav, vbv, vcv), want, err_msg=str(out))


def test_rop_by_the_ops_r_op_counts_a_path_through_a_node_once():
    # With use_op_rop_implementation, a node without R_op is pushed forward through its
    # gradient: that pullback went back through the graph, so in x + abs(x) (Theano's
    # relu) the path through abs counted twice (R(relu)(-1, v=1) was -0.5, not 0).
    x, v = tt.dvector("x"), tt.dvector("v")
    xv, vv = np.array([-1.0, 2.0, 0.5]), np.array([1.0, 3.0, -2.0])
    cases = [
        (x + abs(x), vv + np.sign(xv) * vv),
        (tt.exp(x) + x, np.exp(xv) * vv + vv),
        (tt.nnet.relu(x), np.where(xv > 0, vv, 0.0)),
        (tt.log(tt.exp(x).sum()), (np.exp(xv) / np.exp(xv).sum()) @ vv),
    ]
    for out, want in cases:
        for legacy in (False, True):
            jv = Rop(out, x, v, use_op_rop_implementation=legacy)
            got = function([x, v], jv)(xv, vv)
            np.testing.assert_allclose(got, want, err_msg=f"{out}, legacy={legacy}")


def test_rop_errors_and_disconnected_outputs():
    x, y, v = tt.dvector("x"), tt.dvector("y"), tt.dvector("v")
    with pytest.raises(ValueError, match="mismatched dimensionality"):
        Rop(x * 2, x, tt.dmatrix("m"))
    with pytest.raises(ValueError, match="one eval point per wrt"):
        Rop(x * 2, [x, y], [v])
    # As Theano's: an output that is a variable of none of wrt raises, one computed from
    # none of them is zeros (its forward pass met only zero eval points), the gradient of
    # a cost whose gradient does not depend on wrt included (Theano's Jeremiah test).
    with pytest.raises(DisconnectedInputError, match="f\\[0\\]"):
        Rop(y, x, v)
    z = Rop(y, x, v, disconnected_outputs="ignore")
    np.testing.assert_array_equal(fn([y], z)(np.ones(2)), np.zeros(2))
    np.testing.assert_array_equal(fn([y], Rop(y * 2, x, v))(np.ones(2)), np.zeros(2))
    w = shared(np.ones(20))
    g = grad(tt.dot(tt.arange(20.0).reshape((1, 20)), w).sum(), w)
    np.testing.assert_array_equal(fn([], Rop(g, w, w))(), np.zeros(20))
    for integer in (tt.argmax(y), y.shape[0]):  # Theano's R-operators carried None there
        with pytest.raises(DisconnectedInputError):
            Rop(integer, x, v)


@pytest.mark.parametrize("legacy", [False, True])
def test_rop_through_an_undefined_gradient_is_a_value_error(legacy):
    # Theano's Rop raised a ValueError (DisconnectedInputError) where an output is reached
    # only through an op without a gradient; grad's NullTypeGradError still catches it.
    x, v = tt.dvector("x"), tt.dvector("v")
    with pytest.raises(NullTypeRopError, match="Rop: the Jacobian of f is undefined") as info:
        Rop(tt.exp(undefined_grad(x)).sum(), x, v, use_op_rop_implementation=legacy)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, DisconnectedInputError)
    assert isinstance(info.value, NullTypeGradError)
    # A defined path beside an undefined one is not dropped: the Jacobian is undefined.
    with pytest.raises(NullTypeRopError):
        Rop(x * 2 + undefined_grad(x), x, v, use_op_rop_implementation=legacy)


# ---------------------------------------------------------------------------
# Jacobian and Hessian


def test_jacobian_of_elementwise_and_dot():
    x, a = tt.dvector("x"), tt.dmatrix("a")
    xv, av = rand(3), rand(4, 3)
    np.testing.assert_allclose(fn([x], jacobian(x**2, x))(xv), np.diag(2 * xv))
    ja, jx = jacobian(tt.dot(a, x), [a, x])
    jav, jxv = fn([a, x], [ja, jx])(av, xv)
    np.testing.assert_allclose(jxv, av)
    expected = np.zeros((4, 4, 3))
    for i in range(4):
        expected[i, i, :] = xv
    np.testing.assert_allclose(jav, expected)


def test_jacobian_scalar_is_grad_and_rejects_matrices():
    x = tt.dvector("x")
    xv = rand(3)
    np.testing.assert_allclose(fn([x], jacobian((x**2).sum(), x))(xv), 2 * xv)
    with pytest.raises(ValueError, match="scalar or a vector"):
        jacobian(tt.outer(x, x), x)
    with pytest.raises(AssertionError, match="scalar or a vector"):  # Theano's assert
        jacobian(tt.outer(x, x), x)


def test_jacobian_of_empty_vector():
    x = tt.dvector("x")
    assert fn([x], jacobian(x * 2, x))(np.zeros(0)).shape == (0, 0)


def test_jacobian_loop_hoists_invariant_work():
    x, w = tt.dvector("x"), tt.dmatrix("w")
    y = tt.tanh(tt.dot(w, x))
    j = jacobian(y, x)
    op = j.owner.op
    assert isinstance(op, MapOverIndex)
    inner_ops = " ".join(str(v.owner.op) for v in ancestors(op.inner_outputs) if v.owner)
    outer_ops = " ".join(str(v.owner.op) for v in ancestors(j.owner.inputs) if v.owner)
    # tanh(w.x) does not depend on the row: it is computed once, outside the loop.
    assert "tanh" not in inner_ops and "tanh" in outer_ops
    wv, xv = rand(3, 4), rand(4)
    t = np.tanh(wv @ xv)
    np.testing.assert_allclose(fn([w, x], j)(wv, xv), (1 - t**2)[:, None] * wv)


def test_hessian_matches_numpy():
    x, a = tt.dvector("x"), tt.dmatrix("a")
    cost = tt.dot(x, tt.dot(a, x)) + (x**3).sum()
    xv, av = rand(3), rand(3, 3)
    h = fn([x, a], hessian(cost, x))(xv, av)
    np.testing.assert_allclose(h, av + av.T + np.diag(6 * xv))
    # each a ValueError or TypeError, and an AssertionError as Theano's asserts raised
    for error in (ValueError, AssertionError):
        with pytest.raises(error, match="must be a vector"):
            hessian(cost, a)
    for error in (TypeError, AssertionError):
        with pytest.raises(error, match="scalar"):
            hessian(x * 2, x)


def test_jacobian_and_hessian_under_compute_test_value_raise():
    # The row graph is built for row 0 (as Theano's scan builds its step), so every
    # node, inside the row loop and outside it, gets its test value.
    x = tt.dvector("x")
    x.tag.test_value = np.array([1.0, 2.0, 3.0])
    with config.change_flags(compute_test_value="raise"):
        j = jacobian(tt.exp(x) * x.sum(), x)
        h = hessian((x**3).sum() * x[0], x)
    xv = x.tag.test_value
    want_j = np.diag(np.exp(xv)) * xv.sum() + np.exp(xv)[:, None]
    np.testing.assert_allclose(j.tag.test_value, want_j, rtol=1e-12)
    # d2/dxi dxj of x0 * sum(x**3): 6 x0 xi on the diagonal, 3 xj**2 in row/column 0.
    want_h = np.diag(6 * xv[0] * xv)
    want_h[0, :] += 3 * xv**2
    want_h[:, 0] += 3 * xv**2
    np.testing.assert_allclose(h.tag.test_value, want_h, rtol=1e-12)


def test_hessian_of_linear_cost_is_zero():
    x = tt.dvector("x")
    h = fn([x], hessian((x * 3).sum(), x))(rand(2))
    np.testing.assert_array_equal(h, np.zeros((2, 2)))


def test_grad_through_jacobian_loop():
    x = tt.dvector("x")
    j = jacobian(x**3, x)  # diag(3 x^2)
    g = grad(j.sum(), x)  # 6 x
    xv = rand(4)
    np.testing.assert_allclose(fn([x], g)(xv), 6 * xv)


def test_jacobian_shape_and_pickling():
    x = tt.dvector("x")
    j = jacobian(tt.exp(x), x)
    node = j.owner
    (shape,) = node.op.infer_shape(
        None, node, [(node.inputs[0],)] + [(f"s{k}",) for k in range(1, len(node.inputs))]
    )
    assert shape[0] is node.inputs[0] and len(shape) == 2
    np.testing.assert_array_equal(fn([x], j.shape)(np.ones(3)), [3, 3])
    f = fn([x], j)
    xv = rand(3)
    np.testing.assert_allclose(f(xv), np.diag(np.exp(xv)))
    op2 = pickle.loads(pickle.dumps(node.op))
    assert op2._fn is None and len(op2.inner_outputs) == 1


def test_map_over_index_checks():
    i, x = tt.lscalar("i"), tt.dvector("x")
    with pytest.raises(TypeError, match="free symbolic variable"):
        map_over_index(i * 2, x.shape[0], [x])
    with pytest.raises(TypeError, match="integer scalar"):
        map_over_index(tt.dscalar("f"), x.shape[0], [x])
    (rows,) = map_over_index(i, 3, [x[i] * x])
    xv = rand(3)
    np.testing.assert_allclose(fn([x], rows)(xv), np.outer(xv, xv))


# ---------------------------------------------------------------------------
# verify_grad and numeric_grad


@pytest.mark.parametrize(
    "fun, shapes",
    [
        (tt.tanh, [(2, 3)]),
        (tt.exp, [(4,)]),
        (tt.sigmoid, [(3,)]),
        (lambda a, b: a * b + a / (b * b + 1.0), [(2, 3), (2, 3)]),
        (lambda a, b: a - b, [(3, 1), (1, 4)]),
        (lambda a: a.sum(axis=1), [(3, 4)]),
        (lambda a: a.mean(axis=0), [(3, 4)]),
        (lambda a: tt.max(a, axis=1), [(3, 4)]),
        (lambda a: (a**2).prod(axis=0), [(2, 3)]),
        (tt.dot, [(3, 4), (4, 2)]),
        (lambda a, b: tt.dot(a, b).sum(), [(4,), (4,)]),
        (lambda a: tt.log(a * a + 1.0).sum(), [(5,)]),
    ],
)
def test_verify_grad_passes(fun, shapes):
    pt = [RNG.standard_normal(s) for s in shapes]
    verify_grad(fun, pt, rng=np.random.default_rng(0))


def test_verify_grad_accepts_random_state_and_float32():
    verify_grad(tt.tanh, [RNG.standard_normal(3).astype("float32")], rng=np.random.RandomState(0))


def test_verify_grad_reports_wrong_gradient():
    pt = [np.array([0.5, 1.0, 2.0])]
    with pytest.raises(GradientError) as info:
        verify_grad(WrongGrad(), pt, rng=np.random.default_rng(0))
    err = info.value
    assert err.arg == 0 and err.abs_err > err.abs_tol and err.rel_err > err.rel_tol
    msg = str(err)
    assert "argument 0" in msg and "abs. error" in msg and "rel. error" in msg


def test_verify_grad_names_the_wrong_input():
    pt = [np.array([0.5, 1.0]), np.array([1.5, -2.0])]
    with pytest.raises(GradientError, match="argument 1") as info:
        verify_grad(lambda a, b: a * 2 + WrongGrad()(b), pt, rng=np.random.default_rng(0))
    assert info.value.arg == 1


def test_verify_grad_rejects_integer_points():
    with pytest.raises(TypeError, match="input 0 has dtype int64"):
        verify_grad(tt.tanh, [np.array([1, 2])], rng=np.random.default_rng(0))


def test_numeric_grad_values_and_errors():
    ng = numeric_grad(lambda a, b: (a * b).sum(), [np.array([1.0, 2.0]), np.array([3.0, 4.0])])
    np.testing.assert_allclose(ng.gf[0], [3.0, 4.0], rtol=1e-5)
    np.testing.assert_allclose(ng.gf[1], [1.0, 2.0], rtol=1e-5)
    arg, pos, abs_err, rel_err = ng.max_err(
        [np.array([3.0, 4.0]), np.array([1.0, 2.5])], 1e-4, 1e-4
    )
    assert (arg, pos) == (1, 1) and abs_err == pytest.approx(0.5, abs=1e-4)


# ---------------------------------------------------------------------------
# Depth: iterative, not recursive


def _stack_depth():
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth


def test_long_chain_grad_does_not_recurse():
    x = tt.dscalar("x")
    y = x
    n = 5000
    for _ in range(n):
        y = y * 1.0001
    limit = sys.getrecursionlimit()
    # Leave room for ordinary calls, far less than the depth of the chain.
    sys.setrecursionlimit(_stack_depth() + 300)
    try:
        g = grad(y, x)
    finally:
        sys.setrecursionlimit(limit)
    assert float(fn([x], g)(2.0)) == pytest.approx(1.0001**n, rel=1e-9)


def test_warnings_are_clean_for_normal_use():
    x, w, v = tt.dvector("x"), tt.dmatrix("w"), tt.dvector("v")
    y = tt.tanh(tt.dot(w, x[1:]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        grad((y**2).sum(), [x, w])
        jacobian(y, x)
        hessian((y**2).sum(), x)
        Rop(y, x, v)


def test_training_a_shared_variable_with_updates():
    x = tt.dmatrix("x")
    t = tt.dvector("t")
    w = shared(np.zeros(3), name="w")
    cost = ((tt.dot(x, w) - t) ** 2).mean()
    train = function([x, t], cost, updates=[(w, w - 0.1 * grad(cost, w))])
    xv = rand(20, 3)
    w_true = np.array([1.0, -2.0, 0.5])
    losses = [float(train(xv, xv @ w_true)) for _ in range(200)]
    assert losses[-1] < 1e-3 * losses[0]
    np.testing.assert_allclose(w.get_value(), w_true, atol=1e-2)


@pytest.mark.parametrize(
    "wrap, op_name",
    [(zero_grad, "zero_grad_"), (disconnected_grad, "disconnected_grad_")],
)
def test_gradient_identity_ops_are_named_instances_removed_when_compiled(wrap, op_name):
    # Theano code compares node ops with gradient.zero_grad_ & co.; the compiled graph
    # keeps none of them (they only act on the gradient).
    x = tt.dmatrix("x")
    y = x * wrap(x)
    assert y.owner.inputs[1].owner.op is getattr(gradient, op_name)
    f = function([x], y)
    assert getattr(gradient, op_name) not in [n.op for n in f.maker.fgraph.toposort()]
    xv = np.arange(4.0).reshape(2, 2)
    np.testing.assert_allclose(f(xv), xv * xv)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_known_gradient_with_fewer_dimensions_broadcasts(dtype):
    # Theano accepts a scalar known gradient for a vector: it broadcasts.
    x = tt.vector("x", dtype=dtype)
    y = x * 3
    (g,) = grad(None, [x], known_grads={y: tt.constant(np.asarray(2.0, dtype=dtype))})
    np.testing.assert_allclose(function([x], g)(np.ones(4, dtype=dtype)), 6.0)
    with pytest.raises(ValueError, match="has 2 dimensions, but"):
        grad(None, [x], known_grads={y: tt.matrix(dtype=dtype)})


def test_op_grad_returning_none_is_a_type_error():
    class ReturnsNone(Op):
        __props__ = ()

        def make_node(self, x):
            return Apply(self, [x], [x.type()])

        def grad(self, inputs, output_grads):
            return None

        def perform(self, node, inputs, outputs):
            outputs[0][0] = inputs[0]

    x = tt.dvector("x")
    with pytest.raises(TypeError):
        grad(ReturnsNone()(x).sum(), x)


def _exact_prod_hessian(v):
    """d2 prod(v) / dv_i dv_j: the product of the others, 0 on the diagonal."""
    n = len(v)
    return np.array(
        [[0.0 if i == j else np.prod(np.delete(v, [i, j])) for j in range(n)] for i in range(n)]
    )


def test_the_hessian_of_a_product_is_exact_at_zeros():
    # The gradient of prod is piecewise (no zero, one zero, more); its branches were
    # constant zeros where the second derivative is not: the Hessian of prod([0, 2, 3])
    # had zeros in rows 1 and 2 (they are [3, 0, 0] and [2, 0, 0]), prod([1, 0, 0])'s was 0.
    x = tt.dvector("x")
    h = function([x], gradient.hessian(tt.prod(x), x))
    for v in ([0.0, 2.0, 3.0], [1.0, 0.0, 0.0], [0.0, 0.0, 5.0], [0.0, 0.0, 0.0], [2, 0, 0, 4.0]):
        v = np.array(v)
        np.testing.assert_allclose(h(v), _exact_prod_hessian(v), err_msg=str(v))
    # along an axis of a matrix, through a function of the product
    flat = tt.dvector("flat")
    cost = tt.sin(tt.prod(flat.reshape((2, 3)), axis=1)).sum()
    mv = np.array([[0.0, 2.0, 3.0], [1.0, 0.0, 0.0]])
    got = function([flat], gradient.hessian(cost, flat))(mv.ravel()).reshape(2, 3, 2, 3)
    for r, row in enumerate(mv):
        p = np.prod(row)
        g = np.array([np.prod(np.delete(row, i)) for i in range(3)])
        want = np.cos(p) * _exact_prod_hessian(row) - np.sin(p) * np.outer(g, g)
        np.testing.assert_allclose(got[r, :, r, :], want)
        np.testing.assert_allclose(got[r, :, 1 - r, :], 0.0)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_gradient_of_a_zeroth_power_is_zero_at_zero(dtype):
    # x ** 0 is 1 for every x; the formula y * x ** (y - 1) is 0 * inf = NaN at x = 0.
    x, y = tt.vector("x", dtype=dtype), tt.vector("y", dtype=dtype)
    f = function([x, y], gradient.grad((x**y).sum(), [x, y]))
    xv = np.array([0.0, 0.0, 2.0, 0.0], dtype=dtype)
    yv = np.array([0.0, 2.0, 0.0, 0.5], dtype=dtype)
    gx, gy = f(xv, yv)
    assert gx.dtype == gy.dtype == dtype
    np.testing.assert_array_equal(gx, np.array([0.0, 0.0, 0.0, np.inf], dtype=dtype))
    np.testing.assert_array_equal(gy, np.array([0.0, 0.0, np.log(2.0), 0.0], dtype=dtype))
    # an integer exponent holding 0, and a constant one without it (no switch needed)
    n = tt.ivector("n")
    gn = function([x, n], gradient.grad((x**n).sum(), x))(xv, np.array([0, 1, 0, 3], "int32"))
    np.testing.assert_array_equal(gn, np.array([0.0, 1.0, 0.0, 0.0], dtype=dtype))
    g3 = gradient.grad((x**3).sum(), x)
    ops = [v.owner.op for v in ancestors([g3]) if v.owner is not None]
    assert not any(type(getattr(op, "scalar_op", None)).__name__ == "Switch" for op in ops)


def test_the_second_derivative_of_a_power_in_its_exponent_at_zero():
    # d/dy (y * x ** (y - 1)) at y = 0 is x ** -1: the switch that makes x ** 0's
    # gradient 0 at x = 0 must leave the formula (and its derivative) elsewhere.
    x, y = tt.dvector("x"), tt.dvector("y")
    gx = gradient.grad((x**y).sum(), x)
    h = function([x, y], gradient.grad(gx.sum(), y))
    xv, yv = np.array([2.0, 0.5, 3.0]), np.array([0.0, 0.0, 1.0])
    # d/dy (y x^(y-1)) = x^(y-1) (1 + y log x)
    np.testing.assert_allclose(h(xv, yv), xv ** (yv - 1) * (1 + yv * np.log(xv)))
