"""Shape, join, alloc, indexing and dot ops: build-time checks, run-time errors, views."""

import numpy as np
import pytest
from tensor_helpers import evaluate

import theano_dag.tensor as tt
from theano_dag.gradient import grad
from theano_dag.tensor.basic import NotScalarConstantError, get_scalar_constant_value
from theano_dag.tensor.subtensor import IncSubtensor

# -- build-time errors name the op, the argument and what was expected ---------------------

BAD = [
    (
        lambda: tt.exp(tt.dvector(), tt.dvector()),
        TypeError,
        r"^Elemwise\{exp,no_inplace\} expects 1 inputs, got 2$",
    ),
    (
        lambda: tt.Dot()(tt.dscalar("s"), tt.dmatrix()),
        TypeError,
        r"^Dot: input 0 \(s\) must be a vector or a matrix, got 0 dimensions",
    ),
    (
        lambda: tt.dot(
            tt.TensorType("float64", shape=(2, 3))(), tt.TensorType("float64", shape=(4, 2))()
        ),
        ValueError,
        r"Dot: shapes \(2, 3\) and \(4, 2\) are not",
    ),
    (
        lambda: tt.join(0, tt.dmatrix("m"), tt.dvector("v")),
        TypeError,
        r"^Join: input 1 \(v\) has 1 dimensions, expected 2 like input 0$",
    ),
    (lambda: tt.join(0, tt.dscalar(), tt.dscalar()), TypeError, "Join: cannot join scalars"),
    (lambda: tt.join(2, tt.dmatrix(), tt.dmatrix()), ValueError, "Join: axis 2 is out of range"),
    (
        lambda: tt.alloc(0.0, tt.dscalar("n")),
        TypeError,
        r"^Alloc: shape entry 0 \(n\) must be an integer scalar, got TensorType\(float64, scalar\)",
    ),
    (lambda: tt.alloc(tt.dmatrix(), 3), TypeError, "Alloc: the value has 2 dimensions"),
    (
        lambda: tt.reshape(tt.dvector(), (2, tt.dscalar("k"))),
        TypeError,
        r"^Reshape\{2\}: entry 1 of the shape \(k\) must be an integer scalar",
    ),
    (lambda: tt.reshape(tt.dvector(), (-1, -1)), ValueError, "at most one -1"),
    (lambda: tt.reshape(tt.dvector(), tt.lvector()), ValueError, "pass ndim"),
    (lambda: tt.flatten(tt.dmatrix(), 3), ValueError, "flatten: ndim=3 is out of range"),
    (lambda: tt.Shape_i(2)(tt.dmatrix("m")), TypeError, r"Shape_i\{2\}: m has 2 dimensions"),
    (lambda: tt.transpose(tt.dmatrix(), (0, 0)), ValueError, "not a permutation"),
    # ValueError as Theano's tile (issue 16: Theano's contract; symbolic reps are allowed)
    (lambda: tt.tile(tt.dmatrix(), (2.0, 1)), ValueError, "reps must be integers or integer"),
    (lambda: tt.repeat(tt.dvector(), tt.dscalar()), TypeError, "Repeat: repeats must be an"),
    (lambda: tt.eye(tt.dscalar()), TypeError, "Eye: n must be an integer scalar"),
    (lambda: tt.arange(tt.dvector()), TypeError, "ARange: stop must be a scalar"),
    (lambda: tt.dmatrix()[tt.dmatrix()], TypeError, "index arrays must be integer or bool"),
    (
        lambda: tt.set_subtensor(tt.dmatrix("m"), 1.0),
        TypeError,
        "set_subtensor: the first argument must be an indexed tensor",
    ),
    (
        lambda: tt.set_subtensor(tt.exp(tt.dvector()), 1.0),
        TypeError,
        r"must be the result of indexing, got .* computed by Elemwise\{exp,no_inplace\}",
    ),
    (
        lambda: tt.set_subtensor(tt.dmatrix("m").T, 1.0),
        TypeError,
        r"must be the result of indexing, got m.T computed by InplaceDimShuffle\{1,0\}",
    ),
    (
        lambda: tt.set_subtensor(tt.dtensor3("t")[0].T, 1.0),
        TypeError,
        r"cannot write through InplaceDimShuffle\{1,0\} of .*: the tensor it indexes has 3 "
        r"dimensions, InplaceDimShuffle\{1,0\} permutes 2; index a permuted tensor instead",
    ),
    (
        lambda: tt.inc_subtensor(tt.dvector()[1:], tt.dmatrix()),
        ValueError,
        "the value .* has 2 dimensions, more than the 1 of the indexed result",
    ),
    (lambda: tt.argmax(tt.dmatrix(), axis=(0, 5)), ValueError, "axis 5 is out of range"),
    (lambda: tt.mean(tt.dmatrix(), axis=5), ValueError, "mean: axis 5 is out of range"),
]


@pytest.mark.parametrize("build,exc,msg", BAD, ids=range(len(BAD)))
def test_build_errors(build, exc, msg):
    with pytest.raises(exc, match=msg):
        build()


# -- run-time errors -------------------------------------------------------------------


def test_runtime_errors_say_what_went_wrong():
    x, y, n = tt.dmatrix("x"), tt.dmatrix("y"), tt.lscalar("n")
    with pytest.raises(ValueError, match=r"Dot: shapes \(2, 3\) and \(2, 3\) are not aligned"):
        evaluate(tt.dot(x, y), {x: np.ones((2, 3)), y: np.ones((2, 3))})
    with pytest.raises(ValueError, match=r"cannot reshape an array of shape \(2, 3\) into"):
        evaluate(x.reshape((n, 4)), {x: np.ones((2, 3)), n: 2})
    with pytest.raises(ValueError, match=r"Join\{axis=0\}: cannot join shapes"):
        evaluate(tt.join(0, x, y), {x: np.ones((2, 3)), y: np.ones((2, 4))})
    with pytest.raises(ValueError, match=r"Alloc: a value of shape \(2, 3\) cannot fill"):
        evaluate(tt.alloc(x, 4, n), {x: np.ones((2, 3)), n: 5})
    with pytest.raises(ValueError, match=r"Split: sizes \[1, 1\] do not add up to the length 3"):
        evaluate(tt.split(x, [1, 1], 2, axis=1)[0], {x: np.ones((2, 3))})
    i = tt.lvector("i")
    with pytest.raises(IndexError, match="index 5 is out of bounds"):
        evaluate(x[i], {x: np.ones((2, 3)), i: np.array([5])})


def test_subtensor_is_a_view_and_inc_is_a_copy():
    x = tt.dmatrix("x")
    xv = np.arange(12.0).reshape(3, 4)
    sub = evaluate(x[1:, ::2], {x: xv})
    assert np.shares_memory(sub, xv)
    out = evaluate(tt.inc_subtensor(x[0], 10.0), {x: xv})
    assert not np.shares_memory(out, xv) and xv[0, 0] == 0 and out[0, 0] == 10


def test_inplace_inc_subtensor_destroys_its_input():
    x = tt.dmatrix("x")
    node = tt.inc_subtensor(x[0], 1.0).owner
    op = IncSubtensor(node.op.idx_list, inplace=True)
    assert op.destroy_map == {0: [0]}
    xv = np.zeros((2, 2))
    out = evaluate(op(*node.inputs), {x: xv})
    assert out is xv and xv[0].tolist() == [1.0, 1.0]


def test_advanced_inc_accumulates_repeated_indices():
    x, i = tt.dvector("x"), tt.lvector("i")
    out = evaluate(tt.inc_subtensor(x[i], 1.0), {x: np.zeros(3), i: np.array([0, 0, 2])})
    assert out.tolist() == [2.0, 0.0, 1.0]
    out = evaluate(tt.set_subtensor(x[i], 5.0), {x: np.zeros(3), i: np.array([0, 0, 2])})
    assert out.tolist() == [5.0, 0.0, 5.0]


def test_static_shapes_follow_constants():
    x = tt.TensorType("float64", shape=(5, None))("x")
    assert x[1:3].type.shape == (2, None)
    assert x[::-1, 0].type.shape == (5,)
    assert tt.alloc(1.0, 2, 3).type.shape == (2, 3)
    assert tt.join(0, x, x).type.shape == (10, None)
    assert tt.eye(3).type.shape == (3, 3)
    assert tt.tile(x, (2, 1)).type.shape == (10, None)
    assert tt.shape_i(x, 0).data == 5


def test_split_returns_all_parts():
    x = tt.dvector("x")
    parts = tt.split(x, [1, 2, 3], 3)
    vals = evaluate(parts, {x: np.arange(6.0)})
    assert [v.tolist() for v in vals] == [[0.0], [1.0, 2.0], [3.0, 4.0, 5.0]]


def test_get_scalar_constant_value():
    assert get_scalar_constant_value(tt.constant(3)) == 3
    assert get_scalar_constant_value(tt.cast(tt.constant(2.0), "int32")) == 2
    assert get_scalar_constant_value(tt.alloc(4.0, 2, 2)) == 4.0
    assert get_scalar_constant_value(tt.zeros_like(tt.dmatrix())) == 0
    assert get_scalar_constant_value(tt.constant([7, 7, 7])) == 7
    with pytest.raises(NotScalarConstantError):
        get_scalar_constant_value(tt.constant([1, 2]))
    with pytest.raises(NotScalarConstantError):
        get_scalar_constant_value(tt.dscalar())


def test_sum_of_float32_accumulates_in_float64():
    x = tt.fvector("x")
    xv = np.full(10**6, 0.1, dtype="float32")
    got = evaluate(x.sum(), {x: xv})
    assert got.dtype == np.float32
    assert abs(float(got) - 10**6 * float(np.float32(0.1))) < 1e-2
    with pytest.raises(TypeError, match="accumulator of dtype float32 would lose"):
        tt.sum(tt.dvector(), acc_dtype="float32")


def test_mean_of_float32_stays_float32():
    x = tt.fmatrix("x")
    m = x.mean(axis=0)
    assert m.dtype == "float32"
    np.testing.assert_allclose(evaluate(m, {x: np.ones((4, 3), "float32")}), np.ones(3))


# Regression (issue 16): an integer value written into a float tensor made the gradient
# wrt that value integer-valued, and grad() refused it; Theano gives [1, 0, 0].
@pytest.mark.parametrize(
    "build, expected",
    [
        (lambda v: tt.set_subtensor(v[1:], 0), [1.0, 0.0, 0.0]),
        (lambda v: tt.inc_subtensor(v[1:], 0), [1.0, 1.0, 1.0]),
        (lambda v: tt.set_subtensor(v[[1, 2]], 0), [1.0, 0.0, 0.0]),
        (lambda v: tt.inc_subtensor(v[[1, 2]], 2), [1.0, 1.0, 1.0]),
        (lambda v: tt.set_subtensor(v[np.array([False, True, True])], 0), [1.0, 0.0, 0.0]),
        (lambda v: tt.inc_subtensor(v[np.array([False, True, True])], 1), [1.0, 1.0, 1.0]),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_grad_through_integer_value_written_into_float(build, expected, dtype):
    v = tt.vector("v", dtype=dtype)
    g = grad(build(v).sum(), v)
    assert g.dtype == dtype
    np.testing.assert_array_equal(g.eval({v: np.ones(3, dtype=dtype)}), expected)


def test_grad_wrt_integer_tensor_indexed_is_float_zero():
    v = tt.dvector("v")
    i = tt.lvector("i")
    cost = (tt.set_subtensor(i[1:], 5) * v).sum() + tt.inc_subtensor(i[[0]], 1).sum() * v[0]
    g = grad(cost, v)
    out = g.eval({v: np.ones(3), i: np.array([1, 2, 3])})
    np.testing.assert_array_equal(out, [1.0 + 7.0, 5.0, 5.0])
