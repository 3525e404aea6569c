"""A shape computed without the value checks the lengths the op needs equal
(``EqualLengths``): where numpy refuses the values, the shape raises too, in every mode
and engine, and where the lengths are known equal (or the value is computed anyway) no
check is made."""

import re
import warnings

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag import scalar as ts
from theano_dag.compile.mode import Mode, get_mode
from theano_dag.engines.cpu.native import ckernel
from theano_dag.engines.cpu.plan import shapes as plan_shapes
from theano_dag.graph.basic import io_toposort
from theano_dag.opt.rewrites.algebra import local_elemwise_drop_broadcast, local_mul_one
from theano_dag.opt.rewrites.shapes import local_infer_shape
from theano_dag.opt.rewrites.useless import (
    local_remove_all_assert,
    local_useless_equal_lengths,
    local_useless_fill,
)
from theano_dag.opt.rewrites.utils import length_sources, lengths_kept
from theano_dag.scalar.composite import Composite
from theano_dag.tensor import blas
from theano_dag.tensor.elemwise import Sum
from theano_dag.tensor.fused import FusedReduce
from theano_dag.tensor.shape import (
    EqualLengths,
    IndicesInBounds,
    LengthMismatchError,
    checked_shape,
    equal_lengths,
    shape_i,
)
from theano_dag.tensor.subtensor import (
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    IncSubtensor,
    Subtensor,
)

MUL = "Elemwise{mul,no_inplace} along dimension 0: lengths that must be equal differ"
MUL_XY = f"{MUL} (x: 3, y: 4)"
DOT = (
    "Dot: the inner lengths: lengths that must be equal differ (m along dimension 1: 4, "
    "x along dimension 0: 3)"
)
# the value's own error, where the function computes the value
MUL_VALUE = "Elemwise{mul,no_inplace}: input shapes [(3,), (4,)] do not match along dimension 0"

x, y, m = tt.dvector("x"), tt.dvector("y"), tt.dmatrix("m")

# name -> (output, error type, message, what numpy gives for lengths that agree)
ROWS = {
    "shape": ((x * y).shape, LengthMismatchError, MUL_XY, lambda a, b, mm: np.shape(a * b)),
    "shape0": (
        (x + y).shape[0],
        LengthMismatchError,
        MUL_XY.replace("mul", "add"),
        lambda a, b, mm: (a + b).shape[0],
    ),
    "size": ((x * y).size, LengthMismatchError, MUL_XY, lambda a, b, mm: (a * b).size),
    "alloc": (
        tt.alloc(0.0, (x * y).shape[0]),
        LengthMismatchError,
        MUL_XY,
        lambda a, b, mm: np.zeros((a * b).shape[0]),
    ),
    "arange": (
        tt.arange((x - y).shape[0]),
        LengthMismatchError,
        MUL_XY.replace("mul", "sub"),
        lambda a, b, mm: np.arange((a - b).shape[0]),
    ),
    "index": ((x * y)[0], ValueError, MUL_VALUE, lambda a, b, mm: (a * b)[0]),
    "slice": ((x * y)[:2], ValueError, MUL_VALUE, lambda a, b, mm: (a * b)[:2]),
    "dot_shape": (tt.dot(m, x).shape, LengthMismatchError, DOT, lambda a, b, mm: (2,)),
}

MODES = {
    "FAST_RUN": lambda: get_mode("FAST_RUN"),
    "FAST_COMPILE": lambda: get_mode("FAST_COMPILE"),
    "py": lambda: Mode(linker="py"),
}


def _compile(out, mode):
    return theano_dag.function([x, y, m], out, mode=mode, on_unused_input="ignore")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("row", ROWS)
def test_a_shape_of_lengths_that_differ_raises(row, mode):
    out, error, message, want = ROWS[row]
    with ckernel.compile_mode("sync"):
        f = _compile(out, MODES[mode]())
        a, mm = np.arange(3.0), np.ones((2, 4))
        if row == "dot_shape":
            np.testing.assert_array_equal(f(a, a, np.ones((2, 3))), want(a, a, mm))
        else:
            np.testing.assert_array_equal(f(a, a + 1, mm), want(a, a + 1, mm))
        with pytest.raises(error) as info:
            f(a, np.ones(4), mm)
    assert str(info.value).splitlines()[0] == message
    if error is ValueError:  # the value's own error (ShapeError on the CPU engine's plan)
        assert not isinstance(info.value, LengthMismatchError)


def test_a_length_1_on_a_dimension_not_declared_broadcastable_is_named():
    f = theano_dag.function([x, y], (x * y).shape)
    with pytest.raises(LengthMismatchError) as info:
        f(np.ones(1), np.ones(4))
    assert str(info.value).splitlines()[0] == (
        f"{MUL} (x: 1, y: 4) (a length 1 broadcasts only along a "
        "dimension declared broadcastable)"
    )
    # broadcastable: no check, numpy's broadcast
    r = tt.TensorType("float64", shape=(1,))("r")
    g = theano_dag.function([r, y], (r * y).shape)
    assert g(np.ones(1), np.ones(4)).tolist() == [4]
    assert not _checks(g)


def test_the_other_lengths_of_a_join_are_checked():
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    f = theano_dag.function([a, b], tt.concatenate([a, b], axis=0).shape)
    assert f(np.ones((2, 3)), np.ones((4, 3))).tolist() == [6, 3]
    with pytest.raises(LengthMismatchError) as info:
        f(np.ones((2, 3)), np.ones((4, 5)))
    assert str(info.value).splitlines()[0] == (
        "Join{axis=0} along dimension 1: lengths that must be equal differ (a: 3, b: 5)"
    )
    with pytest.raises(LengthMismatchError) as info:  # a join never broadcasts: no hint
        f(np.ones((2, 1)), np.ones((4, 5)))
    assert str(info.value).splitlines()[0].endswith("(a: 1, b: 5)")


def test_an_alloc_indexed_keeps_its_check_of_the_value():
    v, n = tt.TensorType("float64", shape=(3,))("v"), tt.lscalar("n")
    f = theano_dag.function([v, n], tt.alloc(v, n)[:2])
    # the part of v read is allocated, its length passing the check of v's against n's
    (sub,) = [nd for nd in f.maker.fgraph.toposort() if isinstance(nd.op, Subtensor)]
    assert sub.inputs[0].name == "v" and len(_checks(f)) == 1
    np.testing.assert_array_equal(f(np.arange(3.0), 3), [0.0, 1.0])
    with pytest.raises(LengthMismatchError) as info:
        f(np.arange(3.0), 5)
    assert str(info.value).splitlines()[0] == (
        "Alloc along dimension 0: lengths that must be equal differ (the value's length: 3, "
        "the length asked: 5)"
    )


def _checks(f):
    return [n for n in f.maker.fgraph.toposort() if isinstance(n.op, EqualLengths)]


@pytest.mark.parametrize(
    "out",
    [
        (x * x).shape,  # the same variable's length
        (tt.exp(x) * x + 2).shape,
        (x[:, None] * y).shape,  # broadcast: each length from one input
    ],
    ids=["same", "same_through_exp", "outer"],
)
def test_no_check_where_the_lengths_are_known_equal(out):
    f = theano_dag.function([x, y], out, on_unused_input="ignore")
    assert not _checks(f)


def test_no_check_for_static_lengths_that_agree():
    s3 = tt.TensorType("float64", shape=(3,))
    a, b = s3("a"), s3("b")
    f = theano_dag.function([a, b], (a * b).shape)
    assert not _checks(f)
    # one static, one not: the other is checked against the static length
    g = theano_dag.function([a, y], (a * y).shape)
    (check,) = _checks(g)
    assert [tt.get_scalar_constant_value(check.inputs[0])] == [3]
    with pytest.raises(LengthMismatchError):
        g(np.ones(3), np.ones(4))


def test_no_check_where_the_function_computes_the_value():
    # The op checks its inputs when it computes x * y: the shape need not (a gradient's
    # shapes of its forward values).
    p = x * y
    f = theano_dag.function([x, y], [p, p.shape])
    assert not _checks(f)
    with pytest.raises(ValueError, match="do not match along dimension 0"):
        f(np.ones(3), np.ones(4))
    # the same value read by nothing but shapes (also through another op) is not computed
    g = theano_dag.function([x, y], [p.shape[0] + tt.exp(p).shape[0]])
    assert len(_checks(g)) == 1
    with pytest.raises(LengthMismatchError):
        g(np.ones(3), np.ones(4))


def test_one_check_for_nested_elementwise_results():
    z = tt.dvector("z")
    f = theano_dag.function([x, y, z], ((x * y) + z).shape, mode=get_mode("FAST_RUN"))
    (check,) = _checks(f)
    assert len(check.inputs) == 3
    with pytest.raises(LengthMismatchError) as info:
        f(np.ones(3), np.ones(3), np.ones(4))
    listed = str(info.value).splitlines()[0].split("differ (")[1].rstrip(")").split(", ")
    assert sorted(listed) == ["x: 3", "y: 3", "z: 4"]


def test_equal_lengths_keeps_one_of_each_known_equal_length():
    n0, n0b, n1 = shape_i(x, 0), shape_i(x, 0), shape_i(y, 0)
    assert equal_lengths([n0, n0b], "op") is n0
    assert equal_lengths([3, np.int64(3), tt.constant(3)], "op") == 3
    c = equal_lengths([n0, n1, n0b], "op", ["a", "b", "c"].__getitem__)
    assert c.owner.op == EqualLengths("op", ("a", "b")) and c.owner.inputs == [n0, n1]
    # a check among the lengths gives its own
    z = tt.dvector("z")
    d = equal_lengths([c, shape_i(z, 0)], "op2", ["c", "z"].__getitem__)
    assert d.owner.inputs == [n0, n1, d.owner.inputs[2]] and d.owner.op.names == ("a", "b", "z")
    with pytest.raises(LengthMismatchError) as info:
        equal_lengths([3, 4, n0], "op", ["a", "b", "c"].__getitem__)
    assert str(info.value) == "op: lengths that must be equal differ (a: 3, b: 4)"


def test_a_guard_passes_its_length_once_the_others_agree():
    (n,) = checked_shape((shape_i(m, 0),), [shape_i(m, 1), shape_i(x, 0)], "dot", ("m", "x"))
    f = theano_dag.function([m, x], n)
    assert int(f(np.ones((2, 4)), np.ones(4))) == 2
    with pytest.raises(LengthMismatchError) as info:
        f(np.ones((2, 4)), np.ones(3))
    assert str(info.value).splitlines()[0] == "dot: lengths that must be equal differ (m: 4, x: 3)"
    assert checked_shape((5,), [3, 3], "dot", ("a", "b")) == (5,)


def test_equal_lengths_refuses_what_is_not_an_int_scalar():
    with pytest.raises(TypeError, match="EqualLengths: each length must be an int scalar"):
        EqualLengths("op", ("a", "b"))(x, shape_i(y, 0))
    with pytest.raises(TypeError, match="EqualLengths: 1 names for 2 lengths compared"):
        EqualLengths("op", ("a",))(shape_i(x, 0), shape_i(y, 0))


def test_useless_and_unsafe_rewrites_of_a_check():
    n0 = shape_i(x, 0)
    c = EqualLengths("op", ("a", "b", "c"))(n0, shape_i(y, 0), shape_i(x, 0))
    (new,) = local_useless_equal_lengths.transform(None, c.owner)
    assert new.owner.op.names == ("a", "b") and new.owner.inputs[0] is n0
    same = EqualLengths("op", ("a", "b"))(n0, shape_i(x, 0))
    assert local_useless_equal_lengths.transform(None, same.owner) == [n0]
    assert local_useless_equal_lengths.transform(None, new.owner) is False
    assert local_remove_all_assert.transform(None, new.owner) == [n0]


def test_local_infer_shape_checks_without_an_fgraph():
    (new,) = local_infer_shape.transform(None, (x * y).shape.owner)
    (n,) = new.owner.inputs
    assert isinstance(n.owner.op, EqualLengths)


def test_the_planner_leaves_a_check_that_fails_to_the_run():
    # The plan computes the check from the input shapes; lengths that differ leave its
    # value unknown (and the alloc unplanned): the check itself raises when run.
    n = equal_lengths([shape_i(x, 0), shape_i(y, 0)], "op", ["x", "y"].__getitem__)
    z = tt.alloc(0.0, n)
    order = io_toposort([x, y], [z])
    shapes, known = plan_shapes.infer_shapes(None, order, {x: (3,), y: (3,)})
    assert shapes[z] == (3,) and int(known[n]) == 3
    shapes, known = plan_shapes.infer_shapes(None, order, {x: (3,), y: (4,)})
    assert shapes[z] is None and n not in known
    # an op's own infer_shape with numbers: lengths that differ leave the node to its op
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    j = tt.concatenate([a, b], axis=0)
    order = io_toposort([a, b], [j])
    assert plan_shapes.infer_shapes(None, order, {a: (2, 3), b: (4, 3)})[0][j] == (6, 3)
    assert plan_shapes.infer_shapes(None, order, {a: (2, 3), b: (4, 5)})[0][j] is None
    f = theano_dag.function([a, b], j)
    with pytest.raises(ValueError, match="cannot join shapes"):
        f(np.ones((2, 3)), np.ones((4, 5)))


def test_elemwise_infer_shape_with_numbers():
    node = (x * y).owner
    assert node.op.infer_shape(None, node, [(3,), (3,)]) == [(3,)]
    with pytest.raises(LengthMismatchError, match=r"\(x: 3, y: 4\)"):
        node.op.infer_shape(None, node, [(3,), (4,)])


def test_the_dask_engine_raises_the_check():
    pytest.importorskip("dask")
    f = theano_dag.function([x, y], (x * y).shape, mode=Mode(linker="dask"))
    assert f(np.ones(3), np.ones(3)).tolist() == [3]
    with pytest.raises(LengthMismatchError) as info:
        f(np.ones(3), np.ones(4))
    assert str(info.value).splitlines()[0] == MUL_XY


def test_the_cpu_engine_checks_inline():
    # one comparison in the generated call; the op's perform only to raise
    f = theano_dag.function([x, y], tt.alloc(0.0, (x * y).shape[0]))
    np.testing.assert_array_equal(f(np.ones(3), np.ones(3)), np.zeros(3))
    assert re.search(r"^ *if (\w+) != (\w+): \w+\(\1, \2\)$", f.fn.source(), re.M)
    with pytest.raises(LengthMismatchError):
        f(np.ones(3), np.ones(4))


GRADS = {
    # name -> (the gradient, what numpy gives for lengths that agree)
    "mul_x": (lambda: theano_dag.grad((x * y).sum(), x), lambda a, b: b),
    "mul_y": (lambda: theano_dag.grad((x * y).sum(), y), lambda a, b: a),
    "add": (lambda: theano_dag.grad((x + y).sum(), x), lambda a, b: np.ones_like(a)),
    "sub_exp": (lambda: theano_dag.grad((tt.exp(x) - y).sum(), y), lambda a, b: -np.ones_like(b)),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("row", GRADS)
def test_a_gradient_of_lengths_that_differ_raises(row, mode):
    # The gradient of sum(x * y) with respect to x is y where x's and y's lengths agree,
    # and raises where they do not, as the forward value does (the fill of the gradient
    # of sum keeps x's length: local_elemwise_drop_broadcast, local_useless_fill and
    # local_mul_one no longer drop it).
    grad, want = GRADS[row]
    with ckernel.compile_mode("sync"):
        f = theano_dag.function([x, y], grad(), mode=MODES[mode]())
        a, b = np.arange(3.0), np.arange(3.0) + 2
        np.testing.assert_array_equal(f(a, b), want(a, b))
        with pytest.raises(ValueError) as info:
            f(np.ones(3), np.ones(4))
    assert "do not match along dimension 0" in str(info.value).splitlines()[0]
    with pytest.raises(ValueError, match="operands could not be broadcast"):
        np.ones(3) * np.ones(4)


def test_a_gradient_of_a_value_computed_keeps_no_fill():
    # The forward value computed in the same function checks x's length against y's:
    # its gradient's fill goes (the gradient is y itself).
    c = (x * y).sum()
    f = theano_dag.function([x, y], [c, theano_dag.grad(c, x)])
    assert f.maker.fgraph.outputs[1].owner.inputs[0] is f.maker.fgraph.inputs[1]
    with pytest.raises(ValueError, match="do not match along dimension 0"):
        f(np.ones(3), np.ones(4))


def test_a_gradient_of_lengths_known_equal_keeps_no_fill():
    f = theano_dag.function([x], theano_dag.grad((x * tt.exp(x)).sum(), x))
    assert not any(
        isinstance(getattr(n.op, "scalar_op", None), Composite) and "second" in str(n.op.scalar_op)
        for n in f.maker.fgraph.toposort()
    )
    a = np.arange(3.0)
    np.testing.assert_allclose(f(a), np.exp(a) * (1 + a))


def test_fill_rewrites_keep_lengths_not_known_equal():
    one = tt.constant([1.0])
    kept = y * tt.fill(x * y, one)
    assert local_elemwise_drop_broadcast.transform(None, kept.owner) is None
    assert local_mul_one.transform(None, kept.owner) is False
    assert local_useless_fill.transform(None, tt.fill(x * y, y).owner) is False
    # known equal: the same variable's length, through elementwise ops and dimshuffles
    (new,) = local_useless_fill.transform(None, tt.fill(tt.exp(y) * 2, y).owner)
    assert new is y
    assert local_mul_one.transform(None, (y * tt.fill(tt.exp(y), one)).owner) == [y]
    mt = m.T
    ones = tt.fill(tt.exp(m).T, tt.constant([[1.0]]))
    assert local_mul_one.transform(None, (mt * ones).owner) == [mt]


@pytest.mark.parametrize("linker", ["py", "cpu", "dask"])
def test_a_fill_whose_model_may_not_exist_raises_as_numpy_unless_the_model_is_computed(linker):
    # fill(max(x), x) and fill(x[0], x) of an empty x: numpy's max and index raise, and
    # so must the fill; local_useless_fill dropped the model and returned x.
    pytest.importorskip("dask") if linker == "dask" else None
    mode = get_mode("FAST_RUN") if linker == "cpu" else Mode(linker=linker, optimizer="fast_run")
    a = tt.imatrix("a")
    c = tt.TensorType("float64", shape=(None, 1))("c")
    cases = [
        ([a], tt.fill(tt.max(a), a), [np.zeros((0, 3), "int32")], "no identity"),
        ([a], tt.fill(tt.argmin(a, axis=0), a), [np.zeros((0, 3), "int32")], "empty"),
        ([c], tt.second(c[0], c), [np.zeros((0, 1))], "out of bounds"),
    ]
    for inputs, out, values, why in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f = theano_dag.function(inputs, out, mode=mode)
        full = [np.arange(6).reshape(2, 3).astype(v.dtype)[:, : v.shape[1]] for v in values]
        np.testing.assert_array_equal(np.asarray(f(*full)), full[0])
        with pytest.raises((ValueError, IndexError), match=why):
            f(*values)
    # A slice cannot raise, and where the model is an output too (computed anyway), the
    # fill goes.
    v = tt.dvector("v")
    f = theano_dag.function([v], tt.fill(v[1:], tt.exp(v[1:])), mode=mode)
    assert not any(
        isinstance(getattr(n.op, "scalar_op", None), ts.Second) for n in f.maker.fgraph.toposort()
    )
    f = theano_dag.function([a], [tt.max(a), tt.fill(tt.max(a), a)], mode=mode)
    assert not any(
        isinstance(getattr(n.op, "scalar_op", None), ts.Second) for n in f.maker.fgraph.toposort()
    )
    got = f(np.arange(6, dtype="int32").reshape(2, 3))
    np.testing.assert_array_equal(np.asarray(got[1]), np.arange(6).reshape(2, 3))


@pytest.mark.parametrize("linker", ["py", "cpu"])
def test_a_set_or_increment_that_changes_nothing_still_refuses_an_index_out_of_range(linker):
    # set_subtensor(fill(x, 1)[idx], 1) and inc_subtensor(x[idx], 0) give x, but numpy
    # raises IndexError where an index lies out of range: the engines returned x. The
    # node still goes; the check of its indices stays (IndicesInBounds).
    mode = get_mode("FAST_RUN") if linker == "cpu" else Mode(linker=linker, optimizer="fast_run")
    a, i = tt.dmatrix("a"), tt.lscalar("i")
    ones = tt.ones_like(a)
    outs = {
        "set of the value held, an index vector": tt.set_subtensor(ones[[3, 0]], 1.0),
        "set of the value held, an integer": tt.set_subtensor(ones[i], 1.0),
        "increment by zeros, an integer": tt.inc_subtensor(a[:, i], 0.0),
        "increment by zeros, an index vector": tt.inc_subtensor(a[[0, 2]], tt.zeros((2, 1))),
        "increment by zeros, two index vectors": tt.inc_subtensor(a[[0, 2], [1, 1]], 0.0),
    }
    incs = (IncSubtensor, AdvancedIncSubtensor1, AdvancedIncSubtensor)
    for what, out in outs.items():
        f = theano_dag.function([a, i], out, mode=mode, on_unused_input="ignore")
        assert not any(isinstance(n.op, incs) for n in f.maker.fgraph.toposort()), what
        v = np.arange(12.0).reshape(4, 3)
        np.testing.assert_array_equal(f(v, 1), np.ones_like(v) if "set" in what else v)
        with pytest.raises(IndexError, match="out of bounds"):
            f(np.zeros((0, 3)), 5)
    # A slice, or an integer within a length known statically, cannot raise: no check.
    b = tt.TensorType("float64", shape=(4, None))("b")
    for out in (tt.inc_subtensor(a[1:i], 0.0), tt.inc_subtensor(b[-4], 0.0)):
        f = theano_dag.function([a, b, i], out, mode=mode, on_unused_input="ignore")
        ops = [type(n.op) for n in f.maker.fgraph.toposort()]
        assert not set(ops) & {*incs, IndicesInBounds}, ops


def test_length_sources():
    assert length_sources(x, 0) == {(x, 0)}
    assert length_sources(x * y, 0) == {(x, 0), (y, 0)}
    assert length_sources(m.T, 1) == {(m, 0)}
    assert length_sources(tt.alloc(0.0, 3, shape_i(m, 1)), 0) == {3}
    assert length_sources(tt.alloc(0.0, 3, shape_i(m, 1)), 1) == {(m, 1)}
    assert length_sources(tt.TensorType("float64", shape=(1,))("r"), 0) == {1}
    checked = equal_lengths([shape_i(x, 0), shape_i(y, 0)], "op", ["x", "y"].__getitem__)
    assert length_sources(tt.alloc(0.0, checked), 0) == {(x, 0), (y, 0)}
    assert lengths_kept(x * tt.fill(x * y, 1.0), x) is False
    assert lengths_kept(x * tt.fill(tt.exp(x), 1.0), x) is True


za, zb, zc = tt.dmatrix("za"), tt.dmatrix("zb"), tt.dmatrix("zc")
ax, n = tt.lscalar("ax"), tt.lscalar("n")


def _gemm(z, a, b):
    return blas.gemm_no_inplace(z, 1.0, a, b, 1.0)


# name -> (inputs, output, values that numpy refuses, the error's first line, values
# that agree, what numpy gives for them)
OP_SHAPES = {
    "gemm_inner": (
        [za, zb, zc],
        _gemm(za, zb, zc).shape,
        [np.ones((2, 3)), np.ones((2, 4)), np.ones((5, 3))],
        "Gemm{no_inplace}: the inner lengths: lengths that must be equal differ "
        "(zb along dimension 1: 4, zc along dimension 0: 5)",
        [np.ones((2, 3)), np.ones((2, 4)), np.ones((4, 3))],
        (2, 3),
    ),
    "gemm_rows": (
        [za, zb, zc],
        _gemm(za, zb, zc).shape,
        [np.ones((2, 3)), np.ones((7, 4)), np.ones((4, 3))],
        "Gemm{no_inplace} along dimension 0: lengths that must be equal differ "
        "(za along dimension 0: 2, zb along dimension 0: 7)",
        [np.ones((7, 3)), np.ones((7, 4)), np.ones((4, 3))],
        (7, 3),
    ),
    "gemv": (
        [y, za, x],
        blas.gemv_no_inplace(y, 1.0, za, x, 1.0).shape,
        [np.ones(2), np.ones((2, 3)), np.ones(4)],
        "Gemv{no_inplace}: the inner lengths: lengths that must be equal differ "
        "(za along dimension 1: 3, x along dimension 0: 4)",
        [np.ones(2), np.ones((2, 3)), np.ones(3)],
        (2,),
    ),
    "ger": (
        [za, x, y],
        blas.ger(za, 1.0, x, y).shape,
        [np.ones((2, 3)), np.ones(2), np.ones(4)],
        "Ger{non-destructive} along dimension 1: lengths that must be equal differ "
        "(za along dimension 1: 3, y along dimension 0: 4)",
        [np.ones((2, 3)), np.ones(2), np.ones(3)],
        (2, 3),
    ),
    "join_symbolic_axis": (
        [za, zb, ax],
        tt.join(ax, za, zb).shape,
        [np.ones((2, 3)), np.ones((4, 5)), 0],
        "Join along dimension 1: lengths that must be equal differ (za: 3, zb: 5)",
        [np.ones((2, 3)), np.ones((2, 5)), -1],
        (2, 8),
    ),
    "alloc": (
        [x, n],
        tt.alloc(x, n).shape,
        [np.ones(3), 5],
        "Alloc along dimension 0: lengths that must be equal differ "
        "(the length asked: 5, the value's length: 3)",
        [np.ones(1), 5],  # a length 1 spreads
        (5,),
    ),
    "inc_subtensor": (
        [x, y],
        tt.inc_subtensor(x[1:3], y).shape,
        [np.ones(5), np.ones(4)],
        "IncSubtensor{int64:int64:} along dimension 0 of the part written: lengths that "
        "must be equal differ (the part's length: 2, the value's length: 4)",
        [np.ones(5), np.ones(1)],  # a length 1 spreads
        (5,),
    ),
    "set_subtensor_row": (
        [za, x],
        tt.set_subtensor(za[0], x).shape,
        [np.ones((2, 3)), np.ones(4)],
        "SetSubtensor{int64} along dimension 0 of the part written: lengths that "
        "must be equal differ (the part's length: 3, the value's length: 4)",
        [np.ones((2, 3)), np.ones(3)],
        (2, 3),
    ),
    "alloc_2d": (
        [x, n],
        tt.alloc(x, n, 4).shape,
        [np.ones(3), 2],
        "Alloc along dimension 1: lengths that must be equal differ "
        "(the length asked: 4, the value's length: 3)",
        [np.ones(4), 2],
        (2, 4),
    ),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("row", OP_SHAPES)
def test_an_op_shape_of_lengths_that_differ_raises(row, mode):
    ins, out, bad, message, good, want = OP_SHAPES[row]
    with ckernel.compile_mode("sync"):
        f = theano_dag.function(ins, out, mode=MODES[mode]())
        assert tuple(f(*good)) == want
        with pytest.raises(LengthMismatchError) as info:
            f(*bad)
    assert str(info.value).splitlines()[0] == message
    # the value raises too
    value = theano_dag.function(ins, out.owner.inputs[0], mode=Mode(linker="py"))
    with pytest.raises(ValueError):
        value(*bad)


def test_an_alloc_of_a_value_of_its_shape_checks_nothing():
    f = theano_dag.function([x], tt.alloc(x, x.shape[0]).shape)
    assert not _checks(f)
    g = theano_dag.function([x], tt.alloc(tt.exp(x), 2, x.shape[0]).shape)
    assert not _checks(g)


def test_fused_reduce_refuses_a_length_1_not_declared_broadcastable():
    # as the Elemwise it fuses: the error Elemwise gives
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    red = FusedReduce(Sum(axis=(0,)), ts.add)(a, b)
    ew = tt.add(a, b)
    for mode in MODES:
        with ckernel.compile_mode("sync"):
            f = theano_dag.function([a, b], red, mode=MODES[mode]())
            g = theano_dag.function([a, b], ew, mode=Mode(linker="py"))
            np.testing.assert_array_equal(f(np.ones((2, 3)), np.ones((2, 3))), [4.0] * 3)
            for bad in [np.ones((1, 3)), np.ones((2, 1)), np.ones((3, 3))]:
                with pytest.raises(ValueError) as info:
                    f(bad, np.ones((2, 3)))
                with pytest.raises(ValueError) as want:
                    g(bad, np.ones((2, 3)))
                got = str(info.value).splitlines()[0]
                assert got == str(want.value).splitlines()[0].replace(
                    "Elemwise{add,no_inplace}", "FusedReduce{Sum{axis=(0,)}, add}"
                )


def _p():
    return x * y


# Graphs where a rewrite could stop computing a value whose shape's check was left out
# (the value computed): each must still raise for lengths that differ.
STOPS_COMPUTING = {
    "zeros_like": lambda: [_p().shape, tt.zeros_like(_p())],
    "times_zero": lambda: [_p().shape, _p() * 0],
    "index_lift": lambda: [_p().shape, (_p() + 1)[0]],
    "slice_lift": lambda: [_p().shape, tt.exp(_p())[:2]],
    "merged": lambda: [_p().shape, (x * y).sum() * 0 + (y * x).sum()],
    "ones_like_sum": lambda: [_p().shape, tt.ones_like(_p()).sum()],
    "fill_sum": lambda: [tt.fill(_p(), 1.0).sum()],
    "grad_both": lambda: theano_dag.grad((x * y).sum(), [x, y]),
    "grad_mean": lambda: [theano_dag.grad((x * y).mean(), x)],
    "grad_exp": lambda: [theano_dag.grad((tt.exp(x) * y).sum(), y)],
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("row", STOPS_COMPUTING)
def test_a_rewrite_that_stops_computing_a_value_keeps_its_check(row, mode):
    with ckernel.compile_mode("sync"):
        f = theano_dag.function([x, y], STOPS_COMPUTING[row](), mode=MODES[mode]())
        with pytest.raises(ValueError) as info:
            f(np.ones(3), np.ones(4))
    first = str(info.value).splitlines()[0]
    assert "do not match along dimension 0" in first or "(x: 3, y: 4)" in first


iv, jv, t3 = tt.lvector("i"), tt.lvector("j"), tt.dtensor3("t")
ADV_PART = "lengths that must be equal differ"
ADV_READ = (
    "AdvancedSubtensor{array, array}: the index arrays broadcast along dimension 0: "
    f"{ADV_PART} (index array 0 (i): 2, index array 1 (j): 3)"
)


# name -> (inputs, output, values that numpy refuses, the error's first line, values
# that agree (a length 1 spreads), what numpy gives for them)
ADV_SHAPES = {
    "adv_inc": (
        [za, x, iv, jv],
        tt.inc_subtensor(za[iv, jv], x).shape,
        [np.ones((4, 5)), np.ones(3), [0, 1], [1, 2]],
        "AdvancedIncSubtensor{array, array} along dimension 0 of the part written: "
        f"{ADV_PART} (index array 0 (i): 2, index array 1 (j): 2, the value's length: 3)",
        [np.ones((4, 5)), np.ones(1), [0, 1], [1, 2]],
        (4, 5),
    ),
    "adv_set": (
        [za, x, iv, jv],
        tt.set_subtensor(za[iv, jv], x).shape,
        [np.ones((4, 5)), np.ones(3), [0, 1], [1, 2]],
        "AdvancedSetSubtensor{array, array} along dimension 0 of the part written: "
        f"{ADV_PART} (index array 0 (i): 2, index array 1 (j): 2, the value's length: 3)",
        [np.ones((4, 5)), np.ones(2), [0, 1], [1]],  # j's length 1 spreads too
        (4, 5),
    ),
    "adv_inc_row": (  # y's missing dimension goes first: (5,) against the part (2, 5)
        [za, x, iv],
        tt.inc_subtensor(za[iv, :], x).shape,
        [np.ones((4, 5)), np.ones(3), [0, 1]],
        "AdvancedIncSubtensor1 along dimension 1 of the part written: "
        f"{ADV_PART} (the part's length: 5, the value's length: 3)",
        [np.ones((4, 5)), np.ones(5), [0, 1]],
        (4, 5),
    ),
    "adv_inc1": (
        [za, zb, iv],
        tt.inc_subtensor(za[iv], zb).shape,
        [np.ones((4, 5)), np.ones((3, 5)), [0, 1]],
        "AdvancedIncSubtensor1 along dimension 0 of the part written: "
        f"{ADV_PART} (the part's length: 2, the value's length: 3)",
        [np.ones((4, 5)), np.ones((1, 5)), [0, 1]],
        (4, 5),
    ),
    "adv_set1_cols": (
        [za, zb, iv],
        tt.set_subtensor(za[iv], zb).shape,
        [np.ones((4, 5)), np.ones((2, 7)), [0, 1]],
        "AdvancedSetSubtensor1 along dimension 1 of the part written: "
        f"{ADV_PART} (the part's length: 5, the value's length: 7)",
        [np.ones((4, 5)), np.ones((2, 1)), [0, 1]],
        (4, 5),
    ),
    "adv_read": (
        [za, iv, jv],
        za[iv, jv].shape,
        [np.ones((4, 5)), [0, 1], [1, 2, 3]],
        ADV_READ,
        [np.ones((4, 5)), [0], [1, 2, 3]],
        (3,),
    ),
    "adv_inc_indices": (  # a scalar value: the index arrays' own check is kept
        [za, iv, jv],
        tt.inc_subtensor(za[iv, jv], 1.0).shape,
        [np.ones((4, 5)), [0, 1], [1, 2, 3]],
        ADV_READ,
        [np.ones((4, 5)), [0, 1, 2], [1, 2, 3]],
        (4, 5),
    ),
    "adv_read_slice_between": (  # the broadcast dimension goes first
        [t3, iv, jv],
        t3[iv, :, jv].shape,
        [np.ones((4, 5, 6)), [0, 1], [1, 2, 3]],
        ADV_READ.replace("array, array", "array, ::, array"),
        [np.ones((4, 5, 6)), [0, 1, 2], [1, 2, 3]],
        (3, 5),
    ),
}


ENGINES = {**MODES, "dask": lambda: Mode(linker="dask")}


@pytest.mark.parametrize("mode", ENGINES)
@pytest.mark.parametrize("row", ADV_SHAPES)
def test_an_advanced_index_shape_of_lengths_that_differ_raises(row, mode):
    # The shape of an advanced read or write checks the lengths numpy needs to agree:
    # the index arrays' (broadcast together, a length 1 spreading) and the value's
    # against the part written (a length 1 spreads, missing dimensions go first).
    if mode == "dask":
        pytest.importorskip("dask")
    ins, out, bad, message, good, want = ADV_SHAPES[row]
    with ckernel.compile_mode("sync"):
        f = theano_dag.function(ins, out, mode=ENGINES[mode]())
        assert tuple(f(*good)) == want
        with pytest.raises(LengthMismatchError) as info:
            f(*bad)
    assert str(info.value).splitlines()[0] == message
    # the value raises too (numpy's IndexError for index arrays that do not broadcast)
    value = theano_dag.function(ins, out.owner.inputs[0], mode=Mode(linker="py"))
    np.testing.assert_array_equal(value(*good).shape, want)
    with pytest.raises((ValueError, IndexError)):
        value(*bad)


@pytest.mark.parametrize(
    "make, checks",
    [
        (lambda: tt.inc_subtensor(za[iv], 1.0).shape, 0),
        (lambda: tt.inc_subtensor(za[iv], za[iv] * 2).shape, 0),  # y's rows, the part's
        (lambda: tt.inc_subtensor(za[iv, iv], 1.0).shape, 0),  # the same array's length
        (lambda: tt.set_subtensor(za[iv, iv], tt.exp(za[iv, iv])).shape, 0),
        (lambda: za[iv, iv].shape, 0),
        # i's and j's lengths may differ: the one check of them, guarding each length
        (lambda: tt.inc_subtensor(za[iv, jv], za[iv, jv] ** 2).shape, 2),
        (lambda: tt.inc_subtensor(za[iv, jv], 1.0).shape, 2),
        (lambda: za[iv, jv].shape, 1),
    ],
    ids=[
        "rows_scalar",
        "rows_read_back",
        "ii_scalar",
        "ii_read_back",
        "read_ii",
        "ij_read_back",
        "ij_scalar",
        "read_ij",
    ],
)
def test_an_advanced_index_of_lengths_known_equal_checks_nothing_more(make, checks):
    f = theano_dag.function([za, iv, jv], make(), on_unused_input="ignore")
    found = _checks(f)
    assert len(found) == checks
    # the one check left is the index arrays'
    assert all(c.op.names == ("index array 0 (i)", "index array 1 (j)") for c in found)


def test_an_advanced_write_computed_keeps_its_own_error():
    # the value computed in the same function checks its lengths: its shape need not
    z = tt.inc_subtensor(za[iv, jv], x)
    f = theano_dag.function([za, x, iv, jv], [z, z.shape])
    assert not _checks(f)
    with pytest.raises(ValueError, match="array is not broadcastable to correct shape"):
        f(np.ones((4, 5)), np.ones(3), [0, 1], [1, 2])


ADV_GRADS = {
    # name -> (inputs, the gradient, values numpy refuses, values that agree, want)
    "inc1_y": (
        [za, zb, iv],
        lambda: theano_dag.grad(tt.inc_subtensor(za[iv], zb).sum(), zb),
        [np.ones((4, 5)), np.ones((3, 5)), [0, 1]],
        [np.ones((4, 5)), np.ones((2, 5)), [0, 1]],
        np.ones((2, 5)),
    ),
    "set1_x": (
        [za, zb, iv],
        lambda: theano_dag.grad(tt.set_subtensor(za[iv], zb).sum(), za),
        [np.ones((4, 5)), np.ones((3, 5)), [0, 1]],
        [np.ones((2, 5)), np.ones((1, 5)), [0]],
        [[0.0] * 5, [1.0] * 5],
    ),
    "inc_y": (
        [za, x, iv, jv],
        lambda: theano_dag.grad(tt.inc_subtensor(za[iv, jv], x).sum(), x),
        [np.ones((4, 5)), np.ones(3), [0, 1], [1, 2]],
        [np.ones((4, 5)), np.ones(2), [0, 1], [1, 2]],
        [1.0, 1.0],
    ),
    "inc_x_indices": (
        [za, x, iv, jv],
        lambda: theano_dag.grad(tt.inc_subtensor(za[iv, jv], x).sum(), za),
        [np.ones((2, 2)), np.ones(2), [0, 1], [1, 0, 1]],
        [np.ones((2, 2)), np.ones(3), [0, 1, 1], [1, 0, 1]],
        np.ones((2, 2)),
    ),
    "read_x": (
        [za, iv, jv],
        lambda: theano_dag.grad((za[iv, jv] ** 2).sum(), za),
        [np.ones((2, 2)), [0, 1], [1, 0, 1]],
        [np.ones((2, 2)), [0], [1, 0, 1]],
        [[2.0, 4.0], [0.0, 0.0]],
    ),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("row", ADV_GRADS)
def test_a_gradient_of_an_advanced_index_of_lengths_that_differ_raises(row, mode):
    # the gradient keeps the forward op's refusal (its value or its shape's check)
    ins, grad, bad, good, want = ADV_GRADS[row]
    with ckernel.compile_mode("sync"):
        f = theano_dag.function(ins, grad(), mode=MODES[mode]())
        np.testing.assert_array_equal(f(*good), want)
        with pytest.raises((ValueError, IndexError)) as info:
            f(*bad)
    first = str(info.value).splitlines()[0]
    assert "broadcast" in first or "lengths that must be equal differ" in first


def test_a_check_of_constants_that_differ_is_left_to_the_run():
    # index arrays of static lengths 2 and 3: the check's lengths fold to constants that
    # differ; the rewrite leaves the check (no OptimizationWarning) and the run raises
    a = za[tt.constant([0, 1]), tt.constant([0, 1, 2])]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = theano_dag.function([za], a.shape)
        with pytest.raises(LengthMismatchError) as info:
            f(np.ones((4, 5)))
    assert str(info.value).splitlines()[0] == (
        "AdvancedSubtensor{array, array}: the index arrays broadcast along dimension 0: "
        f"{ADV_PART} (index array 0: 2, index array 1: 3)"
    )
    n = EqualLengths("op", ("a", "b"))(tt.constant(2), tt.constant(3))
    assert local_useless_equal_lengths.transform(None, n.owner) is False


def test_the_planner_plans_an_advanced_index_from_its_arrays_lengths():
    # the shapes with numbers: planned where the index arrays' lengths broadcast, left to
    # the op (numpy's IndexError) where they do not
    cases = [
        (tt.inc_subtensor(za[iv, jv], x), {za: (4, 5), x: (2,), iv: (2,), jv: (2,)}, (4, 5)),
        (za[iv, jv], {za: (4, 5), iv: (2,), jv: (1,)}, (2,)),
        (za[iv, jv], {za: (4, 5), iv: (2,), jv: (3,)}, None),
        (tt.inc_subtensor(za[iv], zb), {za: (4, 5), zb: (2, 5), iv: (2,)}, (4, 5)),
        (tt.inc_subtensor(za[iv], zb), {za: (4, 5), zb: (3, 5), iv: (2,)}, None),
    ]
    for out, given, want in cases:
        order = io_toposort(list(given), [out])
        assert plan_shapes.infer_shapes(None, order, given)[0][out] == want
