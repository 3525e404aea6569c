"""TensorVariable operators and methods, TensorConstant, as_tensor_variable, constant."""

import collections.abc

import numpy as np
import pytest
from tensor_helpers import evaluate

import theano_dag.tensor as tt
from theano_dag.config import config


@pytest.mark.parametrize(
    "expr,scalar_op",
    [
        (lambda a, b: a + b, "add"),
        (lambda a, b: a - b, "sub"),
        (lambda a, b: a * b, "mul"),
        (lambda a, b: a / b, "true_div"),
        (lambda a, b: a // b, "int_div"),
        (lambda a, b: a % b, "mod"),
        (lambda a, b: a**b, "pow"),
        (lambda a, b: a < b, "lt"),
        (lambda a, b: a <= b, "le"),
        (lambda a, b: a > b, "gt"),
        (lambda a, b: a >= b, "ge"),
        (lambda a, b: 2 - a, "sub"),
        (lambda a, b: 2.0 / a, "true_div"),
        (lambda a, b: -a, "neg"),
        (lambda a, b: abs(a), "abs"),
    ],
)
def test_operators_build_elemwise(expr, scalar_op):
    a, b = tt.dvector("a"), tt.dvector("b")
    out = expr(a, b)
    assert out.owner.op.scalar_op.name == scalar_op


def test_operator_values_and_reflected_order():
    a = tt.dvector("a")
    av = np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(evaluate(1 - a, {a: av}), 1 - av)
    np.testing.assert_allclose(evaluate(8 / a, {a: av}), 8 / av)
    np.testing.assert_allclose(evaluate(2**a, {a: av}), 2**av)
    np.testing.assert_allclose(evaluate(7 % a, {a: av}), 7 % av)
    np.testing.assert_allclose(evaluate(np.ones(3) - a, {a: av}), 1 - av)


def test_bitwise_operators():
    i, j = tt.ivector("i"), tt.ivector("j")
    iv, jv = np.array([1, 6, 3], "int32"), np.array([3, 5, 0], "int32")
    for expr, want in ((i & j, iv & jv), (i | j, iv | jv), (i ^ j, iv ^ jv), (~i, ~iv)):
        np.testing.assert_array_equal(evaluate(expr, {i: iv, j: jv}), want)


def test_matmul_is_dot():
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    assert type((a @ b).owner.op).__name__ == "Dot"


def test_eq_is_identity_so_variables_are_dict_keys():
    a, b = tt.dvector("a"), tt.dvector("a")
    assert (a == a) is True and (a == b) is False
    assert len({a: 1, b: 2}) == 2
    assert tt.eq(a, b).dtype == "bool"


def test_bool_len_iter():
    v = tt.dvector("v")
    with pytest.raises(TypeError, match="Variables do not support boolean operations"):
        bool(v > 0)
    # ``a < b < c`` runs as ``(a < b) and (b < c)``: refused, not silently ``b < c``.
    with pytest.raises(TypeError, match="a symbolic comparison has no truth value"):
        v < 1.0 < v  # noqa: B015
    for comparison in (v < 0, v <= 0, v >= 0, tt.eq(v, 0), tt.neq(v, 0), tt.gt(v, v)):
        with pytest.raises(TypeError, match="a symbolic comparison has no truth value"):
            bool(comparison)
    # Any other variable is true, as in Theano (``if var.missing_values:`` in PyMC3).
    assert bool(v) and bool(v + 1) and bool(tt.constant(0.0)) and bool(tt.and_(v > 0, v < 1))
    assert (v or None) is v and not (not v)
    with pytest.raises(TypeError, match=r"has no len\(\)"):
        len(v)
    with pytest.raises(TypeError, match="Maybe you are using builtins.sum instead of tt.sum"):
        list(v)
    m = tt.dmatrix("m")
    rows, cols = m.shape
    assert evaluate([rows, cols], {m: np.zeros((2, 5))}) == [2, 5]
    fixed = tt.TensorType("float64", shape=(3,))("f")
    parts = list(fixed)
    assert len(parts) == 3 and parts[2].ndim == 0


def test_methods():
    x = tt.dmatrix("x")
    xv = np.arange(6.0).reshape(2, 3) - 2
    cases = [
        (x.T, xv.T),
        (x.sum(), xv.sum()),
        (x.mean(axis=0), xv.mean(0)),
        (x.max(axis=1), xv.max(1)),
        (x.min(), xv.min()),
        (x.prod(axis=0), xv.prod(0)),
        (x.std(), xv.std()),
        (x.var(axis=1), xv.var(1)),
        (x.argmax(axis=1), xv.argmax(1)),
        (x.argmin(), xv.argmin()),
        (x.reshape(3, 2), xv.reshape(3, 2)),
        (x.reshape((6,)), xv.reshape(6)),
        (x.flatten(), xv.flatten()),
        (x.dimshuffle("x", 1, 0), xv.T[None]),
        (x.transpose(), xv.T),
        (x.astype("int32"), xv.astype("int32")),
        (x.dot(x.T), xv @ xv.T),
        (x.clip(-1, 1), np.clip(xv, -1, 1)),
        (x.any(), xv.any()),
        (x.all(axis=0), xv.all(0)),
        (x.round(), np.round(xv)),
        (x.zeros_like(), np.zeros_like(xv)),
        (x.copy(), xv),
        (x.size, xv.size),
        (x.exp(), np.exp(xv)),
    ]
    for expr, want in cases:
        got = evaluate(expr, {x: xv})
        np.testing.assert_allclose(got, want)
        assert got.shape == np.shape(want)


def test_getitem_index_errors():
    x = tt.dmatrix("x")
    with pytest.raises(IndexError, match="too many indices for x: it has 2 dimensions"):
        x[0, 0, 0]
    with pytest.raises(TypeError, match="indices must be integers"):
        x[1.5]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(TypeError, match="index arrays must be integer or bool"):
        x[:, tt.dvector()]


# -- constants ----------------------------------------------------------------------------


def test_constant_autocast_and_signature():
    assert tt.constant(3).dtype == "int8"
    assert tt.constant(300).dtype == "int16"
    assert tt.constant(2**40).dtype == "int64"
    assert tt.constant(1.5).dtype == "float32"
    assert tt.constant(0.1).dtype == "float64"
    assert tt.constant(True).dtype == "bool"
    assert tt.constant(np.float64(1.5)).dtype == "float64"  # numpy scalars keep their dtype
    assert tt.constant(1.5, dtype="float64").dtype == "float64"
    with config.change_flags(floatX="float32"):
        assert tt.constant(0.1).dtype == "float32"
    a, b, c = tt.constant([1.0, 2.0]), tt.constant([1.0, 2.0]), tt.constant([1.0, 3.0])
    assert a.signature() == b.signature() and a.signature() != c.signature()
    assert hash(a.signature()) == hash(b.signature())
    assert tt.constant(np.float32(1)).signature() != tt.constant(np.float64(1)).signature()


def test_constant_data_is_read_only_and_typed():
    c = tt.constant([[1, 2, 3]])
    assert c.type.broadcastable == (True, False)
    with pytest.raises(ValueError):
        c.data[0, 0] = 5
    assert tt.constant(5, ndim=2).data.shape == (1, 1)
    assert tt.constant([[7]], ndim=0).data.shape == ()
    with pytest.raises(ValueError, match="cannot be made 1-dimensional"):
        tt.constant(np.zeros((2, 2)), ndim=1)


def test_as_tensor_variable():
    x = tt.dvector("x")
    assert tt.as_tensor_variable(x) is x
    assert tt.as_tensor_variable(x, ndim=2).broadcastable == (True, False)
    with pytest.raises(ValueError, match="cannot be made 1-dimensional"):
        tt.as_tensor_variable(tt.dmatrix(), ndim=1)
    s = tt.as_tensor_variable([x, x * 2])
    np.testing.assert_allclose(evaluate(s, {x: np.array([1.0, 2.0])}), [[1, 2], [2, 4]])
    with pytest.raises(tt.AsTensorError, match="Could not convert"):
        tt.as_tensor_variable(object())
    from theano_dag.graph.type import Generic

    with pytest.raises(tt.AsTensorError, match="Cannot convert g of type Generic to a tensor"):
        tt.as_tensor_variable(Generic()("g"))


def test_a_python_bool_is_refused_and_a_bool_array_is_a_bool_tensor():
    # Theano's test_bool: v == w of two variables is a Python bool (object comparison);
    # tt.switch(v == w, ...) on it would silently take one branch.
    x, y = tt.dvector("x"), tt.dvector("y")
    for value in (True, False, x == y):
        with pytest.raises(tt.AsTensorError, match="a Python bool is refused.*tt.eq"):
            tt.as_tensor_variable(value)
    with pytest.raises(TypeError, match="a Python bool is refused"):
        tt.switch(x == y, x, y)
    c = tt.as_tensor_variable(np.array([True, False, True]))
    assert c.type.dtype == "bool" and c.data.tolist() == [True, False, True]
    assert tt.as_tensor_variable(np.array(True)).dtype == "bool"
    np.testing.assert_array_equal(
        evaluate(tt.switch(tt.eq(x, y), x, -y), {x: np.array([1.0, 2.0]), y: np.array([1.0, 3.0])}),
        [1.0, -3.0],
    )


def test_stack_of_scalars_is_a_make_vector():
    a, b = tt.lscalar("a"), tt.lscalar("b")
    v = tt.as_tensor_variable([a, b])
    assert type(v.owner.op).__name__ == "MakeVector"
    assert evaluate(v, {a: 3, b: 4}).tolist() == [3, 4]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ufunc", [np.arccos, np.arcsinh, np.cos, np.exp2, np.log2, np.tanh])
def test_numpy_ufunc_on_a_variable_builds_the_op(ufunc, dtype):
    # numpy calls x.<name>() when a ufunc meets an object: Theano's variables have the
    # methods, so np.cos(x) is a graph (PyMC code writes it).
    x = tt.matrix("x", dtype=dtype)
    y = ufunc(x)
    assert isinstance(y, tt.TensorVariable) and y.dtype == dtype
    data = np.random.default_rng(0).uniform(0.1, 0.9, (3, 4)).astype(dtype)
    out = evaluate(y, {x: data})
    np.testing.assert_allclose(out, ufunc(data), rtol=1e-5 if dtype == "float32" else 1e-12)


def test_a_tensor_has_no_len_and_is_not_sized_as_in_theano():
    x = tt.dvector("x")
    with pytest.raises(TypeError, match=r"^object of type 'TensorVariable' has no len\(\)$"):
        len(x)
    assert not isinstance(x, collections.abc.Sized)
    # numpy takes it as one object (Theano's behaviour), not as a sequence to unpack
    held = np.asarray(x, dtype=object)
    assert held.shape == () and held.item() is x
    # a vector of known length still unpacks by iteration
    a, b = tt.as_tensor_variable(np.array([1.0, 2.0]))
    assert float(a.eval()) == 1.0 and float(b.eval()) == 2.0
