"""Rewrites of comparisons, logic, switches, splits and joins (Theano's names)."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag import scalar as ts
from theano_dag.compile.mode import Mode, get_mode
from theano_dag.config import config
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.identity_ops import DeepCopyOp
from theano_dag.graph.rewriting import out2in
from theano_dag.opt.rewrites.useless import local_cast_cast
from theano_dag.opt.tensor_opt import (
    local_lift_transpose_through_dot,
    local_merge_switch_same_cond,
    local_useless_elemwise_comparison,
)
from theano_dag.tensor.arrays import Assert, ScalarFromTensor, TensorFromScalar
from theano_dag.tensor.basic import Join, Split
from theano_dag.tensor.elemwise import Elemwise
from theano_dag.tensor.shape import Shape_i

DTYPES = ["float32", "float64"]


def _ops(f):
    return [n.op for n in f.maker.fgraph.toposort()]


def _constant_out(f):
    (node,) = f.maker.fgraph.toposort()
    assert isinstance(node.op, DeepCopyOp) and isinstance(node.inputs[0], tt.TensorConstant)
    return node.inputs[0].data


@pytest.mark.parametrize("dtype", DTYPES)
def test_comparisons_of_a_length_with_zero_or_less(dtype):
    x = tt.vector("x", dtype=dtype)
    n = x.shape[0]
    xv = np.ones(4, dtype)
    for expr, want in (
        (tt.lt(n, 0), False),
        (tt.ge(n, 0), True),
        (tt.gt(0, n), False),
        (tt.le(0, n), True),
        (tt.eq(n, -1), False),
        (tt.neq(n, -1), True),
        (tt.gt(n, -1), True),
        (tt.lt(n + x.shape[0], 0), False),
        (tt.minimum(n, 0), 0),
    ):
        f = theano_dag.function([x], expr, on_unused_input="ignore")
        assert _constant_out(f) == want
        assert f(xv) == want
    for expr in (tt.maximum(n, 0), tt.maximum(0, n)):
        f = theano_dag.function([x], expr)
        assert [type(op) for op in _ops(f)] == [Shape_i]
        assert f(xv) == 4
    # undecided: a length may be 0 or more
    for expr in (tt.gt(n, 0), tt.eq(n, 0), tt.lt(n, 3)):
        f = theano_dag.function([x], expr)
        assert any(isinstance(op, Elemwise) for op in _ops(f))
    assert theano_dag.function([x], tt.gt(n, 0))(np.ones(0, dtype)) == False  # noqa: E712


def test_comparisons_of_a_value_with_itself():
    i = tt.lscalar("i")
    for expr, want in ((tt.lt(i, i), False), (tt.le(i, i), True), (tt.eq(i, i), True)):
        f = theano_dag.function([i], expr)
        assert _constant_out(f) == want and f(-2) == want
    v = tt.lvector("v")
    f = theano_dag.function([v], tt.xor(v, v))
    assert not any(str(op).startswith("Elemwise{xor") for op in _ops(f))
    assert f(np.array([1, -2])).tolist() == [0, 0]
    # a float may be nan, where x <= x is false and x != x true (the NaN test): Theano's
    # FAST_RUN makes them true and false; here they stay computed
    x = tt.dvector("x")
    f = theano_dag.function([x], [tt.le(x, x), tt.neq(x, x), tt.eq(x, x)])
    assert [r.tolist() for r in f(np.array([1.0, np.nan]))] == [
        [True, False],
        [False, True],
        [True, False],
    ]
    f = theano_dag.function([x], tt.lt(x, x))
    assert f(np.array([1.0, np.nan])).tolist() == [False, False]


def test_xor_of_a_constant_with_a_constant_not_positive_is_computed_not_refused():
    # Both operands constants, one zero: the rule's branch for a length against a constant
    # not positive (a constant >= 0 counts as a length) took xor for a comparison and
    # raised, rolled back with a warning.
    x = tt.dmatrix("x")
    zero = tt.constant(np.asarray(0, "uint32"))
    y = tt.where(zero, tt.alloc(tt.constant(np.asarray(-5, "int32")), x.shape[0], x.shape[1]), zero)
    with config.change_flags(on_opt_error="raise"):
        f = theano_dag.function([x], tt.xor(zero, y))
    assert f(np.ones((2, 3))).tolist() == [[0, 0, 0]] * 2
    node = tt.xor(tt.constant(np.asarray(0, "int64")), tt.constant(np.asarray(3, "int64"))).owner
    assert local_useless_elemwise_comparison.transform(None, node) is False


@pytest.mark.parametrize("dtype", DTYPES)
def test_minimum_and_maximum_of_a_float_with_itself_are_it(dtype):
    x = tt.vector("x", dtype=dtype)
    xv = np.array([1.5, np.nan, -np.inf], dtype=dtype)
    for fn in (tt.minimum, tt.maximum):
        f = theano_dag.function([x], fn(x, x))
        assert [type(op) for op in _ops(f)] == [DeepCopyOp]
        np.testing.assert_array_equal(f(xv), xv)


@pytest.mark.parametrize("dtype", ["bool", "int8"])
def test_and_or_with_constants(dtype):
    x = tt.scalar("x", dtype=dtype)
    zero, one = np.array(0, dtype), np.array(1, dtype)
    for expr in (tt.and_(x, zero), tt.and_(zero, x)):
        f = theano_dag.function([x], expr)
        assert _constant_out(f) == 0 and f(one) == 0
    f = theano_dag.function([x], tt.or_(x, zero))
    assert not any(isinstance(op, Elemwise) for op in _ops(f))
    assert f(one) == 1
    f = theano_dag.function([x], tt.and_(x, one))
    if dtype == "bool":
        assert not any(isinstance(op, Elemwise) for op in _ops(f))
    else:  # bitwise: 5 & 1 is 1
        assert f(np.int8(5)) == 1
    f = theano_dag.function([x], tt.or_(x, one))
    assert f(np.array(0, dtype)) == 1
    if dtype == "int8":
        assert f(np.int8(4)) == 5


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_elemwise_of_switches_on_one_condition_is_one_switch(dtype):
    c, a, b, x, y = (tt.matrix(n, dtype=dtype) for n in "cabxy")
    out = tt.switch(c, a, b) * tt.switch(c, x, y)
    fg = FunctionGraph([c, a, b, x, y], [out], clone=False)
    node = fg.outputs[0].owner
    (new,) = local_merge_switch_same_cond.transform(fg, node)
    assert str(new.owner.op) == "Elemwise{switch,no_inplace}"
    f = theano_dag.function([c, a, b, x, y], out)
    rng = np.random.default_rng(0)
    vals = [rng.integers(0, 2, (2, 3)).astype(dtype)] + [
        rng.random((2, 3)).astype(dtype) for _ in range(4)
    ]
    cv, av, bv, xv, yv = vals
    np.testing.assert_allclose(f(*vals), np.where(cv, av, bv) * np.where(cv, xv, yv), rtol=1e-6)
    # switches on different conditions stay two
    d = tt.matrix("d", dtype=dtype)
    other = tt.switch(c, a, b) * tt.switch(d, x, y)
    assert local_merge_switch_same_cond.transform(None, other.owner) is False


# The default mode (FAST_RUN on the CPU engine) and the Python engine after FAST_RUN.
SWITCH_MODES = {"fast_run": None, "py": Mode(linker="py")}


@pytest.mark.parametrize("mode", SWITCH_MODES)
def test_switches_merged_compute_in_the_dtype_of_the_switch(mode):
    # issue 28, case 3: n = switch(c, i, d) is float64 (i int64, d float64), so n * n and
    # n // n are float64 products and quotients; the merged switch once computed i * i
    # and i // i in int64 (2**80 wrapped to 0; 0 // 0 gave 0, not nan).
    c, i, d = tt.lscalar("c"), tt.lscalar("i"), tt.dscalar("d")
    n = tt.switch(c, i, d)
    f = theano_dag.function([c, i, d], [n * n, tt.int_div(n, n)], mode=SWITCH_MODES[mode])
    for cv, iv, dv in ((1, 2**40, 0.5), (1, 0, 0.5), (0, 3, 0.0), (0, 3, 1.5)):
        nv = np.where(cv, np.float64(iv), dv)
        with np.errstate(divide="ignore", invalid="ignore"):
            want = [nv * nv, nv // nv]
        got = f(cv, iv, dv)
        for g, w in zip(got, want):
            assert g.dtype == "float64"
            np.testing.assert_array_equal(g, w)
    assert f(1, 2**40, 0.5)[0] == 2.0**80
    assert np.isnan(f(1, 0, 0.5)[1])
    # an int8 branch and a float32 one: the sum is a float32 sum (int8 would wrap 200)
    c8, a8, x32 = tt.bvector("c"), tt.bvector("a"), tt.fvector("x")
    m = tt.switch(c8, a8, x32)
    f = theano_dag.function([c8, a8, x32], m + m, mode=SWITCH_MODES[mode])
    cv, av, xv = np.int8([1, 1, 0]), np.int8([100, -128, 5]), np.float32([1.5, 2, 3])
    np.testing.assert_array_equal(f(cv, av, xv), [200, -256, 6])


def test_the_merged_switch_casts_its_branches_first():
    c, i, d = tt.lscalar("c"), tt.lscalar("i"), tt.dscalar("d")
    n = tt.switch(c, i, d)
    fg = FunctionGraph([c, i, d], [n * n], clone=False)
    (new,) = local_merge_switch_same_cond.transform(fg, fg.outputs[0].owner)
    assert isinstance(new.owner.op.scalar_op, ts.Switch)
    for branch in new.owner.inputs[1:]:  # each branch a float64 product of float64s
        assert branch.dtype == "float64"
        assert all(v.dtype == "float64" for v in branch.owner.inputs)


@pytest.mark.parametrize("mode", SWITCH_MODES)
def test_switches_sunk_compute_in_the_dtype_of_the_switch(mode):
    # switch(c, i, 0.0) is float64: the product with j and the quotient by j are float64
    # (sunk into the branch, i * j and i // j would be int64: wrapped, and 0 at j = 0).
    c, i, j = tt.lvector("c"), tt.lvector("i"), tt.lvector("j")
    outs = [tt.switch(c, i, 0.0) * j, tt.int_div(tt.switch(c, 0.0, i), j)]
    f = theano_dag.function([c, i, j], outs, mode=SWITCH_MODES[mode])
    cv, iv, jv = np.array([1, 0, 0, 1]), np.array([2**40, 3, -3, 0]), np.array([2**40, 0, 0, 5])
    with np.errstate(divide="ignore", invalid="ignore"):
        want = [np.where(cv, iv, 0.0) * jv, np.where(cv, 0.0, iv) // jv]
    got = f(cv, iv, jv)
    for g, w in zip(got, want):
        assert g.dtype == "float64"
        np.testing.assert_array_equal(g, w)
    assert got[0][0] == 2.0**80 and got[1].tolist()[1:3] == [np.inf, -np.inf]


@pytest.mark.parametrize("dtype", DTYPES)
def test_x_minus_x_is_zeros_in_specialize(dtype):
    x = tt.vector("x", dtype=dtype)
    mode = get_mode("FAST_RUN").excluding("canonicalize")
    f = theano_dag.function([x], x - x, mode=mode)
    assert not any(str(op).startswith("Elemwise{sub") for op in _ops(f))
    out = f(np.arange(3, dtype=dtype))
    assert out.dtype == dtype and out.tolist() == [0, 0, 0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_split_in_one_part_is_its_input_checked(dtype):
    x = tt.matrix("x", dtype=dtype)
    s = tt.lvector("s")
    f = theano_dag.function([x, s], tt.split(x, s, 1)[0])
    assert not any(isinstance(op, Split) for op in _ops(f))
    assert any(isinstance(op, Assert) for op in _ops(f))
    xv = np.arange(8, dtype=dtype).reshape(4, 2)
    np.testing.assert_array_equal(f(xv, [4]), xv)
    for bad in ([3], [2, 2]):
        with pytest.raises(AssertionError):
            f(xv, bad)
    f = theano_dag.function([x, s], tt.split(x, s, 2))
    assert any(isinstance(op, Split) for op in _ops(f))


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_parts_of_a_join_go(dtype):
    a = tt.vector("a", dtype=dtype)
    f = theano_dag.function([a], tt.join(0, a, a, np.zeros(0, dtype)))
    (j,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, Join)]
    assert len(j.inputs) == 2
    out = f(np.ones(1, dtype))
    assert out.dtype == dtype and out.tolist() == [1, 1]
    m = tt.matrix("m", dtype=dtype)
    f = theano_dag.function([m], tt.join(1, np.zeros((1, 0), dtype), m))
    assert not any(isinstance(op, Join) for op in _ops(f))
    np.testing.assert_array_equal(f(np.ones((1, 2), dtype)), np.ones((1, 2)))


@pytest.mark.parametrize("dtype", ["int8", "uint16", "float32", "float64"])
def test_tensor_to_scalar_and_back_is_itself(dtype):
    t = tt.TensorType(dtype, ())("t")
    f = theano_dag.function([t], tt.tensor_from_scalar(tt.scalar_from_tensor(t)))
    assert not any(isinstance(op, (TensorFromScalar, ScalarFromTensor)) for op in _ops(f))
    assert f(np.array(3, dtype)) == 3


def test_an_entry_of_a_shape_is_a_shape_i():
    x = tt.dtensor3("x")
    f = theano_dag.function([x], [x.shape[-1], x.shape[0]])
    assert sorted(op.i for op in _ops(f) if isinstance(op, Shape_i)) == [0, 2]
    assert [int(v) for v in f(np.zeros((2, 3, 4)))] == [4, 2]


@pytest.mark.parametrize("dtype", DTYPES)
def test_abs_of_a_negation(dtype):
    y, z = tt.matrix("y", dtype=dtype), tt.matrix("z", dtype=dtype)
    mode = get_mode("FAST_RUN").excluding("local_elemwise_fusion")
    f = theano_dag.function([y, z], abs(y * z * -2), mode=mode)
    assert [str(op) for op in _ops(f)] == ["Elemwise{mul,no_inplace}", "Elemwise{abs,inplace}"]
    yv = np.array([[1, -2]], dtype)
    np.testing.assert_array_equal(f(yv, yv), np.abs(yv * yv * -2))


def test_a_reshape_to_its_own_shape_with_one_minus_one_goes():
    x = tt.dmatrix("x")
    for r in (x.reshape((x.shape[0], -1)), x.reshape((-1, x.shape[1]))):
        f = theano_dag.function([x], r)
        assert not any(isinstance(op, tt.Reshape) for op in _ops(f))
        np.testing.assert_array_equal(f(np.ones((2, 3))), np.ones((2, 3)))
    f = theano_dag.function([x], x.reshape((-1, x.shape[0])))
    assert any(isinstance(op, tt.Reshape) for op in _ops(f))
    assert f(np.ones((2, 3))).shape == (3, 2)


def test_a_cast_of_a_lossless_cast_is_one_cast():
    x = tt.fmatrix("x")
    xv = np.array([[1.5, -2.25]], "float32")
    f = theano_dag.function([x], tt.cast(tt.cast(x, "float64"), "float32"))
    assert not any(isinstance(op, Elemwise) for op in _ops(f))
    np.testing.assert_array_equal(f(xv), xv)
    f = theano_dag.function([x], tt.cast(tt.cast(x, "float64"), "int32"))
    assert len([op for op in _ops(f) if isinstance(op, Elemwise)]) == 1
    np.testing.assert_array_equal(f(xv), xv.astype("int32"))
    # a cast that rounds first stays: float64(float32(d)) is not d
    d = tt.dvector("d")
    f = theano_dag.function([d], tt.cast(tt.cast(d, "float32"), "float64"))
    assert len([op for op in _ops(f) if isinstance(op, Elemwise)]) == 1
    assert f(np.array([0.1]))[0] == np.float64(np.float32(0.1))
    # Theano's spelling of a cast: Cast of a scalar type
    f = theano_dag.function([x], Elemwise(ts.Cast(ts.get_scalar_type("float64")))(x))
    assert f(xv).dtype == "float64"


@pytest.mark.parametrize(
    "src, mid, dst",
    [
        ("int64", "float64", "int64"),  # 2**53 + 1 rounds in float64
        ("uint64", "float64", "int8"),
        ("int8", "float32", "uint8"),  # a float out of range gives 0, an int8 wraps
        ("int16", "float32", "int8"),
        ("int32", "float64", "int8"),
    ],
)
def test_a_cast_through_a_float_that_changes_values_stays_two_casts(src, mid, dst):
    x = tt.vector("x", dtype=src)
    info = np.iinfo(src)
    values = [info.min, -1 if info.min else 7, 0, 1, 100, 2**53 + 1, int(info.max)]
    xv = np.array([v for v in values if info.min <= v <= info.max], src)
    out = tt.cast(tt.cast(x, mid), dst)
    assert local_cast_cast.transform(None, out.owner) is False
    f = theano_dag.function([x], out)
    want = ts.cast_array(xv.astype(mid), dst)
    np.testing.assert_array_equal(f(xv), want)
    assert not np.array_equal(want, xv.astype(dst))  # one cast would differ
    ref = theano_dag.function([x], out, mode=Mode(optimizer=None))
    np.testing.assert_array_equal(ref(xv), want)


def test_a_cast_through_a_float_holding_every_value_is_one_cast():
    b = tt.vector("b", dtype="int8")
    out = tt.cast(tt.cast(b, "float32"), "int16")
    assert local_cast_cast.transform(None, out.owner)[0].owner.inputs == [b]
    f = theano_dag.function([b], out)
    bv = np.array([-128, -1, 0, 127], "int8")
    np.testing.assert_array_equal(f(bv), bv.astype("int16"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_lifted_through_a_product_on_request(dtype):
    a, b = tt.matrix("a", dtype=dtype), tt.matrix("b", dtype=dtype)
    fg = FunctionGraph([a, b], [tt.dot(a, b).T])
    out2in(local_lift_transpose_through_dot).optimize(fg)
    assert str(fg) == "FunctionGraph(Dot(InplaceDimShuffle{1,0}(b), InplaceDimShuffle{1,0}(a)))"
    f = theano_dag.function(fg.inputs, fg.outputs[0])
    av = np.arange(6, dtype=dtype).reshape(2, 3)
    bv = np.arange(12, dtype=dtype).reshape(3, 4)
    np.testing.assert_allclose(f(av, bv), (av @ bv).T)
    # a vector's product has no transpose to lift
    v = tt.vector("v", dtype=dtype)
    out = tt.dot(a, v).dimshuffle(0, "x")
    assert local_lift_transpose_through_dot.transform(None, out.owner) is False


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_gradient_of_a_switch_keeps_the_untaken_branch_out(dtype):
    x = tt.scalar("x", dtype=dtype)
    y = tt.switch(x < 7, x, tt.sqrt(x - 7))
    f = theano_dag.function([x], theano_dag.grad(y, x))
    assert f(5) == 1 and f(11) == pytest.approx(0.25)
    # the sink itself: switch(c, 0, a) * b and switch(c, 0, a) / b
    c, a, b = (tt.vector(n, dtype=dtype) for n in "cab")
    cv = np.array([1, 0, 1], dtype)
    av = np.array([2, 3, 4], dtype)
    bv = np.array([np.inf, 2, np.nan], dtype)
    f = theano_dag.function([c, a, b], tt.switch(c, 0, a) * b)
    np.testing.assert_array_equal(f(cv, av, bv), [0, 6, 0])
    f = theano_dag.function([c, a, b], tt.switch(c, a, 0) / b)
    np.testing.assert_array_equal(f(cv, av, np.array([4, 0, 2], dtype)), [0.5, 0, 2])
    # no zero branch: not sunk
    f = theano_dag.function([c, a, b], tt.switch(c, 1, a) * b)
    np.testing.assert_array_equal(f(cv, av, bv), [np.inf, 6, np.nan])


def test_a_vector_of_lengths_against_a_negative_number_is_known():
    x = tt.dvector("x")
    g = tt.join(0, x.shape[0:], x.shape[0:1])
    f = theano_dag.function([x], [tt.eq(g, -1), tt.ge(g, 0), tt.eq(g, 0)])
    ops = _ops(f)
    compares = [op for op in ops if isinstance(getattr(op, "scalar_op", None), ts.arith._Compare)]
    assert len(compares) == 1  # eq(g, 0) is not known
    for xv in (np.ones(3), np.ones(0)):
        a, b, c = f(xv)
        np.testing.assert_array_equal(a, [False, False])
        np.testing.assert_array_equal(b, [True, True])
        np.testing.assert_array_equal(c, [len(xv) == 0] * 2)


@pytest.mark.parametrize("minimum", [False, True])
@pytest.mark.parametrize("flip", [False, True])
def test_a_length_against_negative_zero_keeps_numpys_zero(minimum, flip):
    # maximum and minimum give their second argument at a tie: at a length of 0,
    # maximum(length, -0.0) is -0.0 and minimum(-0.0, length) is 0.0; a quotient by
    # them tells the zeros apart.
    x = tt.dvector("x")
    op = tt.minimum if minimum else tt.maximum
    neg0 = tt.constant(np.asarray(-0.0, dtype="float64"))
    length = x.shape[0]
    out = 1.0 / (op(neg0, length) if flip else op(length, neg0))
    f = theano_dag.function([x], out)
    with np.errstate(divide="ignore"):
        npop = np.minimum if minimum else np.maximum
        for n in (0, 3):
            want = 1.0 / (npop(-0.0, float(n)) if flip else npop(float(n), -0.0))
            assert f(np.zeros(n)) == want
