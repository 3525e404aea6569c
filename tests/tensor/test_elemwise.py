"""Elemwise broadcasting/upcasting, DimShuffle, CAReduce axes and keepdims, Composite."""

import contextlib
import pickle
import re
import warnings

import numpy as np
import pytest
import scipy.special
from engine_modes import ENGINES, OCL_OK, OCL_WHY, rewritten_mode
from tensor_helpers import evaluate, inferred_shapes

import theano_dag
import theano_dag.tensor as tt
from theano_dag import scalar as ts
from theano_dag.compile.mode import Mode
from theano_dag.engines.cpu.native import ckernel
from theano_dag.graph.basic import Apply
from theano_dag.scalar import basic as scalar_basic
from theano_dag.tensor.elemwise import CAReduce, DimShuffle, Elemwise

# -- upcasting ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a,b",
    [
        ("int8", "int8"),
        ("int8", "int32"),
        ("int32", "float32"),
        ("int16", "float32"),
        ("float32", "float64"),
        ("bool", "int8"),
        ("uint8", "int8"),
        ("bool", "bool"),
    ],
)
def test_add_upcasts_like_numpy(a, b):
    x, y = tt.vector(dtype=a), tt.vector(dtype=b)
    want = (np.ones(1, a) + np.ones(1, b)).dtype
    assert (x + y).dtype == want.name
    got = evaluate(x + y, {x: np.ones(2, a), y: np.ones(2, b)})
    assert got.dtype == want


@pytest.mark.parametrize(
    "dtype,want",
    [
        ("int8", "float32"),
        ("int16", "float32"),
        ("int32", "float64"),
        ("int64", "float64"),
        ("float32", "float32"),
        ("bool", "float32"),
    ],
)
def test_float_functions_upgrade_integers_without_float16(dtype, want):
    x = tt.vector(dtype=dtype)
    assert tt.exp(x).dtype == want
    assert tt.sigmoid(x).dtype == want


def test_true_div_of_integers_is_float64_and_int_div_stays_integer():
    i, j = tt.ivector(), tt.bvector()
    assert (i / j).dtype == "float64"
    assert (i // j).dtype == "int32"
    assert (tt.fvector() / i).dtype == "float64"
    assert (tt.fvector() / j).dtype == "float32"


@pytest.mark.parametrize("engine", ENGINES)
def test_true_div_of_integers_is_floatx_rounded_once_from_float64(engine):
    # Theano: integers divide to config.floatX, the float64 quotient cast once (its impl
    # and its C code divide in double). Casting the operands to float32 first rounds
    # integers above 2**24, and a float32 floatX gave float64 here.
    rng = np.random.default_rng(0)
    xv = rng.integers(2**24, 2**40, 200)
    yv = rng.integers(1, 2**20, 200).astype("int32")
    wv = rng.integers(-300, 300, 200).astype("int16")
    zv = rng.standard_normal(200).astype("float32")
    with theano_dag.config.change_flags(floatX="float32"):
        x, y, w, z = tt.lvector(), tt.ivector(), tt.wvector(), tt.fvector()
        plain, fused = x / y, (x + 1) / (y * 2) - w / y
        mixed, wide = z / w + w / z, z / y
        assert [e.dtype for e in (plain, fused, mixed, wide)] == ["float32"] * 3 + ["float64"]
        f = theano_dag.function(
            [x, y, w, z], [plain, fused, mixed, wide], mode=rewritten_mode(engine)
        )
        got = f(xv, yv, wv, zv)
    want = [
        (xv / yv).astype("float32"),
        ((xv + 1) / (yv * 2)).astype("float32") - (wv / yv).astype("float32"),
        zv / wv + wv / zv,
        zv / yv,
    ]
    for g, e in zip(got, want):
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)


def test_python_scalars_autocast():
    f = tt.fvector()
    assert (f * 2).dtype == "float32"  # 2 is int8
    assert (f * 0.5).dtype == "float32"  # 0.5 is exact in float32
    assert (f * 0.1).dtype == "float64"  # 0.1 is not: Theano's 'custom' cast policy
    assert (tt.bvector() + 1000).dtype == "int16"
    assert (tt.ivector() > 0).dtype == "bool"


def test_bitwise_ops_reject_floats():
    with pytest.raises(TypeError) as e:
        tt.and_(tt.dvector(), tt.ivector())
    assert str(e.value) == (
        "Elemwise{and_,no_inplace}: and_: input 0 has dtype float64, expected an integer or "
        "bool dtype"
    )
    with pytest.raises(TypeError, match="invert: input 0 has dtype float32"):
        ~tt.fvector()


def test_bitwise_ops_reject_integers_without_a_common_integer_dtype():
    # uint64 with a signed integer upcasts to float64, which numpy's bitwise ufuncs (and
    # every engine) refuse at the first call: refused when the graph is built instead.
    u = tt.vector("u", dtype="uint64")
    with pytest.raises(TypeError) as e:
        u | 1
    assert str(e.value) == (
        "Elemwise{or_,no_inplace}: or_: inputs of dtypes uint64, int8 have no common "
        "integer dtype (they upcast to float64); cast one of them first"
    )
    with pytest.raises(TypeError, match="xor: inputs of dtypes int32, uint64"):
        tt.xor(tt.ivector(), u)
    f = theano_dag.function([u], [u & np.uint8(3), u | u])
    a = np.array([1, 6, 2**64 - 1], dtype="uint64")
    got = f(a)
    np.testing.assert_array_equal(got[0], a & np.uint8(3))
    assert got[0].dtype == got[1].dtype == np.uint64


# -- broadcasting -------------------------------------------------------------------------


def test_static_broadcast_pattern():
    x, r, c = tt.dmatrix(), tt.drow(), tt.dcol()
    assert (x + r).broadcastable == (False, False)
    assert (r + c).broadcastable == (False, False)
    assert (r * r).broadcastable == (True, False)
    assert (tt.dscalar() + tt.dvector()).broadcastable == (False,)
    a = tt.TensorType("float64", shape=(None, 3))()
    assert (a + tt.drow()).type.shape == (None, 3)


def test_lower_rank_inputs_get_leading_dims():
    x, v = tt.dtensor3(), tt.dvector()
    node = (x + v).owner
    assert isinstance(node.inputs[1].owner.op, DimShuffle)
    assert node.inputs[1].owner.op.new_order == ("x", "x", 0)


def test_a_lower_rank_inputs_dimshuffle_is_made_as_op_call_makes_it():
    # The DimShuffle Elemwise adds keeps the user's stack, as its own Elemwise node
    # does, and computes its test value when they are on.
    x, v = tt.dmatrix("x"), tt.dvector("v")
    y = x * 2.0  # a 0-d constant made a matrix
    (c,) = [i for i in y.owner.inputs if i is not x]
    assert isinstance(c.owner.op, DimShuffle) and c.owner.op.new_order == ("x", "x")
    assert c.tag.trace == y.tag.trace and c.tag.trace[0][-1][1] == y.tag.trace[0][-1][1]
    assert (
        c.tag.trace[0][-1][2] == "test_a_lower_rank_inputs_dimshuffle_is_made_as_op_call_makes_it"
    )
    assert c.type == tt.TensorType("float32", shape=(1, 1))
    with theano_dag.config.change_flags(compute_test_value="raise"):
        x.tag.test_value = np.ones((2, 3))
        v.tag.test_value = np.arange(3.0)
        z = x + v
    np.testing.assert_array_equal(z.owner.inputs[1].tag.test_value, [[0.0, 1.0, 2.0]])
    np.testing.assert_array_equal(z.tag.test_value, np.ones((2, 3)) + np.arange(3.0))


def test_an_elemwise_node_is_what_its_constructors_make():
    # The common node (one output, no float64 flag, no observer) is made without the
    # constructors' calls: the same node, output and notes as theirs.
    x = tt.dvector("x")
    before = next(theano_dag.graph.basic.Variable.__count__)
    node = tt.exp(x).owner
    ref = Apply(node.op, [x], [node.outputs[0].type.make_variable()])
    for made in (node, ref):
        (out,) = made.outputs
        assert type(made) is Apply and type(out) is tt.TensorVariable
        assert made.inputs == [x] and out.owner is made and out.index == 0
        assert out.name is None and out.type is ref.outputs[0].type
        assert made._tag is None and made._imported_by is None and made._removed_by is None
        assert out._tag is None and out.creation_index > before
        assert pickle.loads(pickle.dumps(out)).owner.op == made.op
    assert node.outputs[0]._trace is not None and ref.outputs[0]._trace is None  # Op.__call__
    seen = []
    theano_dag.graph.basic.Variable.append_construction_observer(seen.append)
    try:
        y = tt.exp(x)
    finally:
        theano_dag.graph.basic.Variable.remove_construction_observer(seen.append)
    assert seen == [y]
    with theano_dag.config.change_flags(warn_float64="raise"):
        with pytest.raises(TypeError, match="float64 dtype"):
            Elemwise(ts.exp).make_node(x)


def test_output_types_that_read_a_flag_are_asked_again():
    # Elemwise keeps the output types of a scalar op on given input types only when the
    # op's dtypes follow from the input dtypes alone: float_out reads floatX.
    op = Elemwise(ts.ScalarOp(scalar_basic.float_out, name="to_floatx"))
    x = tt.ivector("x")
    assert not op.scalar_op.has_fixed_output_types()
    with theano_dag.config.change_flags(floatX="float64"):
        assert op(x).dtype == "float64"
    with theano_dag.config.change_flags(floatX="float32"):
        assert op(x).dtype == "float32"
    fixed = Elemwise(ts.ScalarOp(scalar_basic.upgrade_to_float, name="up"))
    assert fixed.scalar_op.has_fixed_output_types()
    a, b = fixed(x), fixed(x)
    assert a.type is b.type and a.dtype == "float64" and a is not b
    assert a.owner.inputs == [x] and a.owner is not b.owner


def test_integer_division_follows_floatx_after_a_first_build():
    # Integers divide to config.floatX, read at each build: the output types Elemwise
    # keeps per input types must not hold the first build's dtype.
    x, y = tt.ivector("x"), tt.ivector("y")
    for floatx in ("float64", "float32", "float64", "float32"):
        with theano_dag.config.change_flags(floatX=floatx):
            assert (x / y).dtype == floatx
            assert tt.true_div(x, y).dtype == floatx


def test_kept_output_types_read_no_flag():
    # Every preference whose output types Elemwise keeps gives the same dtypes under
    # either floatX, for every pair of input dtypes it accepts.
    dtypes = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint64", "float32")
    dtypes += ("float64", "complex64")
    for pref in scalar_basic._FIXED_PREFERENCES:
        for a in dtypes:
            for b in dtypes:
                got = []
                for floatx in ("float32", "float64"):
                    with theano_dag.config.change_flags(floatX=floatx):
                        try:
                            got.append(pref(a, b))
                        except Exception as exc:  # a preference refusing complex
                            got.append(type(exc))
                assert got[0] == got[1], (pref.__name__, a, b, got)


def test_static_shape_mismatch_is_rejected():
    a = tt.TensorType("float64", shape=(3,))()
    b = tt.TensorType("float64", shape=(4,))()
    with pytest.raises(
        ValueError,
        match=r"^Elemwise\{add,no_inplace\}: static shapes \[\(3,\), \(4,\)\] do not broadcast "
        r"along dimension 0 \(lengths \[3, 4\]\)",
    ):
        a + b


def test_runtime_broadcast_needs_a_broadcastable_dim():
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    with pytest.raises(ValueError) as e:
        evaluate(x + y, {x: np.ones((3, 4)), y: np.ones((1, 4))})
    msg = str(e.value)
    assert "differ along dimension 0" in msg and "input 1 (y)" in msg
    assert "not declared broadcastable" in msg
    with pytest.raises(ValueError, match="do not match along dimension 1"):
        evaluate(x + y, {x: np.ones((3, 4)), y: np.ones((3, 5))})
    r = tt.drow("r")
    np.testing.assert_array_equal(
        evaluate(x + r, {x: np.zeros((3, 4)), r: np.arange(4.0)[None]}),
        np.tile(np.arange(4.0), (3, 1)),
    )


def test_elemwise_output_does_not_alias_inputs():
    x = tt.dvector("x")
    v = np.arange(3.0)
    for out in (tt.add(x), tt.identity(x), tt.fill(x, 1.0)):
        res = evaluate(out, {x: v})
        assert not np.may_share_memory(res, v)
        assert res.flags.writeable


def test_inplace_elemwise_writes_into_its_input():
    x, y = tt.dvector("x"), tt.dvector("y")
    op = Elemwise(ts.add, {0: 0})
    assert op.destroy_map == {0: [0]} and str(op) == "Elemwise{add,inplace}"
    out = op(x, y)
    xv = np.arange(3.0)
    res = evaluate(out, {x: xv, y: np.ones(3)})
    assert res is xv and xv.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(TypeError, match="output 0 cannot overwrite input 0"):
        Elemwise(ts.add, {0: 0})(tt.drow(), tt.dmatrix())


def test_elemwise_equality_and_infer_shape():
    assert Elemwise(ts.exp) == Elemwise(ts.exp) and hash(Elemwise(ts.exp)) == hash(Elemwise(ts.exp))
    assert Elemwise(ts.exp) != Elemwise(ts.log)
    x, c = tt.dmatrix("x"), tt.dcol("c")
    assert inferred_shapes(x * c, {x: np.ones((2, 5)), c: np.ones((2, 1))}) == [(2, 5)]


# -- DimShuffle --------------------------------------------------------------------------


def test_dimshuffle_is_a_view():
    x = tt.dmatrix("x")
    y = x.dimshuffle(1, "x", 0)
    assert y.owner.op.view_map == {0: [0]}
    xv = np.arange(6.0).reshape(2, 3)
    out = evaluate(y, {x: xv})
    assert out.shape == (3, 1, 2) and np.shares_memory(out, xv)
    np.testing.assert_array_equal(out[:, 0, :], xv.T)


def test_dimshuffle_drop_and_errors():
    x = tt.TensorType("float64", shape=(None, 1, None))("x")
    y = x.dimshuffle(2, 0)
    assert evaluate(y, {x: np.zeros((2, 1, 5))}).shape == (5, 2)
    with pytest.raises(TypeError, match=r"expected an input with broadcastable pattern"):
        DimShuffle((True, False), [1])(tt.dmatrix())
    with pytest.raises(ValueError, match="invalid entry 2 in new_order"):
        tt.dmatrix().dimshuffle(0, 2)


def test_dimshuffle_grad_restores_layout():
    from tensor_helpers import check_grad

    check_grad(
        lambda a: a.dimshuffle(2, "x", 0, 1) * 3,
        [np.random.rand(2, 3, 4)],
        np.random.default_rng(0),
    )


# -- CAReduce ----------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [None, 0, 1, 2, (0, 1), (0, 2), (1, 2), (0, 1, 2), -1, ()])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("fn,ref", [(tt.sum, np.sum), (tt.max, np.max), (tt.prod, np.prod)])
def test_reduction_axes_and_keepdims(fn, ref, axis, keepdims):
    x = tt.dtensor3("x")
    xv = np.random.default_rng(0).normal(size=(2, 3, 4))
    out = fn(x, axis=axis, keepdims=keepdims)
    want = ref(xv, axis=axis, keepdims=keepdims)
    got = evaluate(out, {x: xv})
    assert got.shape == want.shape and out.ndim == want.ndim
    np.testing.assert_allclose(got, want)
    if keepdims:
        axes = range(3) if axis is None else np.atleast_1d(axis) % 3
        assert all(out.broadcastable[a] for a in axes)


def test_reduction_dtypes():
    assert tt.sum(tt.bvector()).dtype == "int64"
    assert tt.sum(tt.vector(dtype="uint8")).dtype == "uint64"
    assert tt.sum(tt.fvector()).dtype == "float32"
    assert tt.sum(tt.ivector(), dtype="float32").dtype == "float32"
    assert tt.prod(tt.bvector()).dtype == "int64"
    assert tt.max(tt.bvector()).dtype == "int8"
    assert tt.all(tt.dvector()).dtype == "bool"
    assert tt.mean(tt.ivector()).dtype == "float64"
    assert tt.argmax(tt.fmatrix(), axis=0).dtype == "int64"


def test_reduction_errors():
    with pytest.raises(ValueError, match="sum: axis 3 is out of range for a 3-d input"):
        tt.sum(tt.dtensor3(), axis=3)
    with pytest.raises(ValueError, match=r"max: repeated axis in \[0, 0\]"):
        tt.max(tt.dmatrix(), axis=[0, 0])
    with pytest.raises(TypeError, match="CAReduce: cannot reduce with sub"):
        CAReduce(ts.sub)


def test_sum_of_int8_does_not_overflow():
    x = tt.bvector("x")
    assert evaluate(x.sum(), {x: np.full(100, 100, dtype="int8")}) == 10000


def test_reductions_propagate_nan():
    x = tt.dvector("x")
    for fn in (tt.max, tt.min, tt.sum):
        assert np.isnan(evaluate(fn(x), {x: np.array([1.0, np.nan, 3.0])}))


def test_max_grad_goes_to_all_ties():
    from tensor_helpers import _symbolic_grad

    x = tt.dvector("x")
    (g,) = _symbolic_grad(tt.max(x), [x])
    np.testing.assert_array_equal(evaluate(g, {x: np.array([1.0, 3.0, 3.0])}), [0, 1, 1])


def test_prod_grad_with_zeros():
    from tensor_helpers import _symbolic_grad

    x = tt.dvector("x")
    (g,) = _symbolic_grad(tt.prod(x), [x])
    np.testing.assert_array_equal(evaluate(g, {x: np.array([2.0, 0.0, 3.0])}), [0, 6, 0])
    np.testing.assert_array_equal(evaluate(g, {x: np.array([0.0, 0.0, 3.0])}), [0, 0, 0])
    np.testing.assert_array_equal(evaluate(g, {x: np.array([2.0, 5.0, 3.0])}), [15, 6, 10])


# -- Composite ---------------------------------------------------------------------------


def _composite():
    x, y = ts.float64("x"), ts.float64("y")
    e = ts.exp(x)
    return ts.Composite([x, y], [e * y + 1, ts.sigmoid(e - y)])


def test_composite_evaluates_its_scalar_graph():
    comp = _composite()
    a, b = tt.dvector("a"), tt.dvector("b")
    o1, o2 = Elemwise(comp)(a, b)
    av, bv = np.array([0.0, 1.0, -2.0]), np.array([2.0, 0.5, 3.0])
    g1, g2 = evaluate([o1, o2], {a: av, b: bv})
    np.testing.assert_allclose(g1, np.exp(av) * bv + 1)
    np.testing.assert_allclose(g2, 1 / (1 + np.exp(-(np.exp(av) - bv))))


def test_composite_equality_and_name():
    assert _composite() == _composite() and hash(_composite()) == hash(_composite())
    x = ts.float64("x")
    assert ts.Composite([x], [ts.exp(x)]) != ts.Composite([x], [ts.log(x)])
    assert str(_composite()) == ("Composite{add(mul(exp(i0), i1), 1), sigmoid(sub(exp(i0), i1))}")


@pytest.mark.parametrize("engine", ENGINES)
def test_composites_differing_in_a_constants_dtype_are_different_ops(engine):
    # (i0 + c) * 0.5 on int8: with an int8 c the sum wraps, with an int16 c it does not.
    # The printed graphs are the same; merge must keep both nodes.
    def comp(cdtype):
        x = ts.int8("x")
        c = ts.ScalarConstant(ts.get_scalar_type(cdtype), np.dtype(cdtype).type(100))
        return ts.Composite([x], [(x + c) * 0.5])

    c8, c16 = comp("int8"), comp("int16")
    assert str(c8) == str(c16) and c8 != c16
    assert comp("int8") == c8 and hash(comp("int8")) == hash(c8)
    v = tt.bvector("v")
    outs = [Elemwise(c8)(v), Elemwise(c16)(v)]
    f = theano_dag.function([v], outs, mode=rewritten_mode(engine))
    val = np.array([100, 27, -128], dtype="int8")
    got8, got16 = f(val)
    np.testing.assert_array_equal(got8, (val + np.int8(100)) * 0.5)
    np.testing.assert_array_equal(got16, (val.astype("int16") + np.int16(100)) * 0.5)


@pytest.mark.parametrize("engine", ENGINES)
def test_fused_loops_printed_alike_keep_their_constants_dtypes(engine):
    # A user's graph: fusion makes one composite per output, printed alike; merging them
    # gave the int16 sum (no wrap) for both outputs.
    v = tt.bvector("v")
    wraps = (v + tt.constant(np.int8(100))) * 0.5
    no_wrap = (v + tt.constant(np.int16(100))) * 0.5
    f = theano_dag.function([v], [wraps, no_wrap], mode=rewritten_mode(engine))
    val = np.array([100, 27, -128], dtype="int8")
    got_wraps, got_no_wrap = f(val)
    np.testing.assert_array_equal(got_wraps, (val + np.int8(100)) * np.float32(0.5))
    np.testing.assert_array_equal(got_no_wrap, (val.astype("int16") + 100) * np.float32(0.5))


def test_composite_c_code_and_statements():
    comp = _composite()
    exprs = comp.c_code(["a", "b"], ["float64", "float64"], ["float64", "float64"])
    assert exprs[0] == "((exp(a) * b) + ((double)(1)))"
    lines, outs = comp.c_code_statements(["a", "b"])
    assert lines[0] == "double v0 = exp(a);"
    assert len(lines) == 5 and outs == ["v2", "v4"]  # exp computed once, shared


def test_composite_rejects_free_variables_and_wrong_dtypes():
    x, y = ts.float64("x"), ts.float64("y")
    with pytest.raises(ValueError, match="y is used by the graph but is not an input"):
        ts.Composite([x], [x + y])
    comp = ts.Composite([x], [ts.exp(x)])
    with pytest.raises(TypeError, match=r"expects input dtypes \('float64',\), got \('float32',\)"):
        comp.output_types(("float32",))
    # applied to a scalar of another dtype, the composite is made again for it (Theano's)
    assert comp(ts.float32("z")).owner.op.in_dtypes == ("float32",)
    # applied elementwise, the composite is made again for the tensor's dtype (Theano's)
    out = Elemwise(comp)(tt.fvector())
    assert out.dtype == "float32" and out.owner.op.scalar_op.in_dtypes == ("float32",)


def test_composite_grad_matches_finite_differences():
    from tensor_helpers import check_grad

    comp = _composite()

    def build(a, b):
        o1, o2 = Elemwise(comp)(a, b)
        return o1 * 2 + o2

    rng = np.random.default_rng(3)
    check_grad(build, [rng.normal(size=(4,)), rng.normal(size=(4,))], rng)


def test_graphs_and_ops_pickle():
    import pickle

    x = tt.dmatrix("x")
    y = tt.sigmoid(x).sum(axis=0) + tt.floor(x)[1] * (x < 1).sum()
    y2 = pickle.loads(pickle.dumps(y))
    xv = np.arange(6.0).reshape(2, 3) / 4
    x2 = [v for v in _inputs_of(y2) if v.name == "x"][0]
    np.testing.assert_allclose(evaluate(y2, {x2: xv}), evaluate(y, {x: xv}))
    comp = _composite()
    assert pickle.loads(pickle.dumps(Elemwise(comp))) == Elemwise(comp)
    assert pickle.loads(pickle.dumps(ts.lt)) == ts.lt


def _inputs_of(v):
    from theano_dag.graph.basic import graph_inputs

    return graph_inputs([v])


class _TheanoStyleIdentity(ts.UnaryScalarOp):
    """PyMC3's IdentityOp: ``c_code`` in Theano's form (statements writing the output)."""

    def impl(self, x):
        return x

    def grad(self, inputs, output_grads):
        return output_grads

    def c_code(self, node, name, inp, out, sub):
        return f"{out[0]} = {inp[0]};"

    def __eq__(self, other):
        return isinstance(self, type(other))

    def __hash__(self):
        return hash(type(self))


@pytest.mark.parametrize("engine", ["py", "cpu_numpy", "cpu_c", "opencl"])
def test_scalar_op_with_theanos_c_code_signature(engine):
    if engine == "opencl" and not OCL_OK:
        pytest.skip(f"no OpenCL: {OCL_WHY}")
    if engine == "cpu_c" and not theano_dag.config.cxx:
        pytest.skip("no C compiler (config.cxx is empty)")
    op = _TheanoStyleIdentity(ts.upgrade_to_float, name="identity")
    # Called as Theano calls it, the user's method answers.
    assert op.c_code(None, "n", ["x"], ["z"], {}) == "z = x;"
    identity = Elemwise(op, name="identity")
    x = tt.dvector("x")
    out = tt.exp(identity(x) * 2.0 + 1.0)  # fused with other ops on the CPU engine
    mode = Mode(linker="py" if engine == "py" else "opencl" if engine == "opencl" else "cpu")
    flags = {"cxx": ""} if engine == "cpu_numpy" else {}
    building = ckernel.compile_mode("sync") if engine == "cpu_c" else contextlib.nullcontext()
    scalar_basic._WARNED_THEANO_C_CODE.discard(_TheanoStyleIdentity)
    with warnings.catch_warnings(record=True) as caught, building:
        warnings.simplefilter("always")
        with theano_dag.config.change_flags(**flags):
            f = theano_dag.function([x], out, mode=mode)
        xv = np.linspace(-1.0, 1.0, 7)
        np.testing.assert_allclose(f(xv), np.exp(xv * 2.0 + 1.0), rtol=1e-15)
        np.testing.assert_allclose(f(xv[:3]), np.exp(xv[:3] * 2.0 + 1.0), rtol=1e-15)
    theano_form = [w for w in caught if "has Theano's signature" in str(w.message)]
    # The C kernels embed the statements; OpenCL's generator asks for an expression
    # once: one warning.
    assert len(theano_form) == (engine == "opencl"), [str(w.message) for w in caught]
    if theano_form:
        assert str(theano_form[0].message) == (
            "_TheanoStyleIdentity.c_code has Theano's signature (node, name, inputs, outputs, "
            "sub), whose C statements the OpenCL kernels do not take: identity runs with its "
            "Python implementation (impl)"
        )
    if engine == "cpu_c":
        src = ckernel.c_code(f)
        # the user's statement, in the fused loop with the exp
        assert re.search(r"(\w+)_0 = \1_i0;", src), src
        assert "exp(" in src


class _TheanoStyleBroken(ts.UnaryScalarOp):
    """A Theano-form ``c_code`` that does not compile (it calls a function C lacks)."""

    def impl(self, x):
        return x + 1.0

    def c_code(self, node, name, inp, out, sub):
        return f"{out[0]} = no_such_function({inp[0]});"

    def __eq__(self, other):
        return isinstance(self, type(other))

    def __hash__(self):
        return hash(type(self))


class _TheanoStyleFailing(_TheanoStyleBroken):
    """A Theano-form ``c_code`` that can fail (``%(fail)s``): a kernel loop cannot."""

    def c_code(self, node, name, inp, out, sub):
        return f"if ({inp[0]} < 0) {{ {sub['fail']} }} {out[0]} = {inp[0]} + 1.0;"


@pytest.mark.parametrize(
    "cls, why",
    [
        (_TheanoStyleBroken, "whose C statements do not compile in a kernel ("),
        (_TheanoStyleFailing, "whose C statements do not compile in a kernel (plus1: its C "
         "code can fail, which a kernel loop cannot)"),
    ],
)  # fmt: skip
def test_theano_c_code_that_a_kernel_cannot_take_runs_impl_with_one_warning(cls, why):
    if not theano_dag.config.cxx:
        pytest.skip("no C compiler (config.cxx is empty)")
    op = cls(ts.upgrade_to_float, name="plus1")
    x = tt.dvector("x")
    out = tt.exp(Elemwise(op, name="plus1")(x) * 2.0)
    scalar_basic._WARNED_THEANO_C_CODE.discard(cls)
    with warnings.catch_warnings(record=True) as caught, ckernel.compile_mode("sync"):
        warnings.simplefilter("always")
        f = theano_dag.function([x], out, mode=Mode(linker="cpu"))
        xv = np.linspace(-1.0, 1.0, 7)
        np.testing.assert_allclose(f(xv), np.exp((xv + 1.0) * 2.0), rtol=1e-15)
        np.testing.assert_allclose(f(xv), np.exp((xv + 1.0) * 2.0), rtol=1e-15)
    msgs = [str(w.message) for w in caught if "has Theano's signature" in str(w.message)]
    assert len(msgs) == 1, [str(w.message) for w in caught]
    assert msgs[0].startswith(
        f"{cls.__name__}.c_code has Theano's signature (node, name, inputs, outputs, sub), " + why
    ), msgs[0]
    assert msgs[0].endswith(": plus1 runs with its Python implementation (impl)")
    assert cls is _TheanoStyleFailing or "no_such_function" in msgs[0], msgs[0]
    # the rest of the function is still C
    assert not [w for w in caught if "C kernels unavailable" in str(w.message)]


# -- scalar ops whose gradient is written for scalar variables (Theano's convention) ----


class _UserI1e(ts.UnaryScalarOp):
    """A user's scalar op without a gradient (PyMC3's i1e)."""

    def impl(self, x):
        return scipy.special.i1e(x)


_user_i1e = _UserI1e(ts.upgrade_to_float_no_complex, name="user_i1e")


class _UserI0e(ts.UnaryScalarOp):
    """PyMC3's I0e: its gradient applies scalar ops (its own i1e, ``sgn``) to its inputs."""

    def impl(self, x):
        return scipy.special.i0e(x)

    def grad(self, inp, grads):
        (x,) = inp
        (gz,) = grads
        return (gz * (_user_i1e(x) - ts.sgn(x) * self(x)),)


_user_i0e = Elemwise(_UserI0e(ts.upgrade_to_float_no_complex, name="user_i0e"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("engine", ["py", "cpu_numpy", "cpu_c", "opencl"])
def test_a_scalar_ops_gradient_written_for_scalars_gets_scalars(engine, dtype):
    if engine == "opencl" and not OCL_OK:
        pytest.skip(f"no OpenCL: {OCL_WHY}")
    if engine == "cpu_c" and not theano_dag.config.cxx:
        pytest.skip("no C compiler (config.cxx is empty)")
    assert ts.grad_on_scalars(_user_i0e.scalar_op) and not ts.grad_on_scalars(ts.exp)
    x = tt.vector("x", dtype=dtype)
    g = theano_dag.grad(tt.sum(_user_i0e(x) * 3.0), x)
    # The scalar graph is rebuilt with Elemwise ops on x: the user's ops and sgn among them.
    ops = {
        type(n.op.scalar_op).__name__
        for n in theano_dag.graph.basic.io_toposort([x], [g])
        if isinstance(n.op, Elemwise)
    }
    assert {"_UserI0e", "_UserI1e", "Sgn"} <= ops, ops
    assert g.dtype == dtype
    mode = Mode(linker="py" if engine == "py" else "opencl" if engine == "opencl" else "cpu")
    flags = {"cxx": ""} if engine == "cpu_numpy" else {}
    with theano_dag.config.change_flags(**flags), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the user's ops run with impl on the kernels
        f = theano_dag.function([x], g, mode=mode)
        xv = np.array([-3.0, -0.5, 0.25, 1.0, 4.0], dtype=dtype)
        got = f(xv)
    x64 = xv.astype("float64")
    want = 3.0 * (scipy.special.i1e(x64) - np.sign(x64) * scipy.special.i0e(x64))
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12)
    # and against finite differences
    theano_dag.gradient.verify_grad(
        lambda v: _user_i0e(v), [np.array([-2.0, -0.3, 0.7, 2.5])], rng=np.random.default_rng(0)
    )


class _UserHalfPower(ts.BinaryScalarOp):
    """sqrt(x) * y: its L_op reads the output and a constant, and has no gradient for y."""

    def impl(self, x, y):
        return np.sqrt(x) * y

    def L_op(self, inputs, outputs, output_grads):
        (x, y), (z,), (gz,) = inputs, outputs, output_grads
        gx = gz * z / (ts.constant(2.0) * x)
        return [gx, theano_dag.gradient.grad_undefined(self, 1, y)]


def test_a_scalar_gradient_with_the_output_a_constant_and_an_undefined_input():
    op = Elemwise(_UserHalfPower(ts.upgrade_to_float, name="half_power"))
    x, y = tt.dvector("x"), tt.dvector("y")
    gx = theano_dag.grad(tt.sum(op(x, y)), x)
    xv, yv = np.array([0.5, 2.0, 9.0]), np.array([1.5, -2.0, 3.0])
    np.testing.assert_allclose(gx.eval({x: xv, y: yv}), yv / (2 * np.sqrt(xv)), rtol=1e-14)
    # a broadcast input's gradient is summed over the broadcast dimension
    r, m = tt.drow("r"), tt.dmatrix("m")
    gr = theano_dag.grad(tt.sum(op(r, m)), r)
    mv = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(
        gr.eval({r: xv[None], m: mv}), (mv / (2 * np.sqrt(xv))).sum(0, keepdims=True)
    )
    with pytest.raises(theano_dag.gradient.NullTypeGradError):
        theano_dag.grad(tt.sum(op(x, y)), y)


class _TensorGradInUserCode(ts.UnaryScalarOp):
    """A gradient built with tensor ops, as theano_dag's own ops are, in a user's module."""

    def impl(self, x):
        return 2 * x

    def grad(self, inputs, output_grads):
        return [tt.mul(output_grads[0], 2.0)]


def test_a_user_gradient_built_from_tensor_ops_can_say_so():
    op = _TensorGradInUserCode(ts.upgrade_to_float, name="double")
    x = tt.dvector("x")
    with pytest.raises(TypeError, match="which is not made by scalar ops from its inputs"):
        theano_dag.grad(tt.sum(Elemwise(op)(x)), x)
    op.grad_on_scalars = False  # the op says it takes tensors, as theano_dag's own do
    g = theano_dag.grad(tt.sum(Elemwise(op)(x)), x)
    np.testing.assert_array_equal(g.eval({x: np.ones(3)}), np.full(3, 2.0))
