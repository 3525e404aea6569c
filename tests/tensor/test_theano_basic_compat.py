"""Theano's ``tensor.basic`` contracts its own tests check: ``basic.batched_dot``,
``Join()(axis, *tensors)`` and ``Join(view=k)``, ``get_scalar_constant_value`` through
shapes, subtensors, elemwise arithmetic and Asserts, ``extract_constant``'s value,
``eye`` with ``m=None``, ``clip`` with crossed bounds (Theano's rule), and floor/ceil/trunc
of integers as floats."""

import numpy as np
import pytest

import theano_dag
import theano_dag.scalar as ts
import theano_dag.tensor as tt
from theano_dag.compile.io import In, Out
from theano_dag.compile.mode import Mode
from theano_dag.gradient import verify_grad
from theano_dag.tensor import basic, inplace
from theano_dag.tensor.arrays import Assert, ScalarFromTensor
from theano_dag.tensor.basic import (
    EmptyConstantError,
    Join,
    NotScalarConstantError,
    _convert_to_float32,
    _convert_to_int32,
    get_scalar_constant_value,
)
from theano_dag.tensor.nlinalg import Eig, Eigh
from theano_dag.tensor.shape import Shape_i
from theano_dag.tensor.subtensor import indexed_result_shape

ENGINES = ["py", "cpu"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batched_dot_is_reachable_from_basic(dtype):
    a, b = tt.tensor3("a", dtype=dtype), tt.tensor3("b", dtype=dtype)
    av = np.random.default_rng(0).random((4, 2, 3)).astype(dtype)
    bv = np.random.default_rng(1).random((4, 3, 5)).astype(dtype)
    out = theano_dag.function([a, b], basic.batched_dot(a, b))(av, bv)
    np.testing.assert_allclose(out, np.einsum("bij,bjk->bik", av, bv), rtol=1e-5)
    m, n = tt.matrix("m", dtype=dtype), tt.matrix("n", dtype=dtype)
    got = basic.batched_dot(m, n).eval({m: av[:, 0], n: bv[:, :, 0]})
    np.testing.assert_allclose(got, (av[:, 0] * bv[:, :, 0]).sum(1), rtol=1e-5)


# -- Join ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_join_takes_theanos_axis_input(dtype, mode):
    a, b = tt.matrix("a", dtype=dtype), tt.matrix("b", dtype=dtype)
    for axis in (0, 1, -1, np.int64(1), tt.constant(0, dtype="int8")):
        out = Join()(axis, a, b)
        assert isinstance(out.owner.op, Join) and out.owner.inputs == [a, b]
        assert out.owner.op.axis == int(axis.data if isinstance(axis, tt.Variable) else axis)
    av, bv = np.ones((2, 3), dtype), np.zeros((2, 3), dtype)
    f = theano_dag.function([a, b], [Join()(0, a, b), Join()(1, a, b)], mode=Mode(linker=mode))
    r0, r1 = f(av, bv)
    np.testing.assert_array_equal(r0, np.concatenate([av, bv], 0))
    np.testing.assert_array_equal(r1, np.concatenate([av, bv], 1))
    verify_grad(lambda x, y: Join()(1, x, y), [av.astype("float64"), bv.astype("float64") + 2])


@pytest.mark.parametrize("mode", ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_join_with_a_symbolic_axis(dtype, mode):
    # Theano's Join takes an axis known only when the function runs: values as numpy's,
    # negative axes counted from the end, an axis out of range an IndexError
    ax = tt.lscalar("ax")
    a, b = tt.matrix("a", dtype=dtype), tt.matrix("b", dtype=dtype)
    out = Join()(ax, a, b)
    assert str(out.owner.op) == "Join" and out.owner.inputs == [ax, a, b]
    assert out.type == tt.matrix(dtype=dtype).type
    f = theano_dag.function([ax, a, b], [out, out.shape], mode=Mode(linker=mode))
    av = np.arange(6, dtype=dtype).reshape(2, 3)
    bv = np.arange(6, 12, dtype=dtype).reshape(2, 3)
    for k in (0, 1, -1, -2):
        got, shp = f(k, av, bv)
        np.testing.assert_array_equal(got, np.concatenate([av, bv], k))
        assert got.dtype == dtype and tuple(shp) == got.shape
    with pytest.raises(IndexError, match="axis -3 is out of range"):
        f(-3, av, bv)


def test_join_and_split_with_a_symbolic_axis_infer_shapes_without_computing():
    # the inferred shape picks the summed (or split) length by the run-time axis; no
    # Join or Split is left in the graph of the shape
    ax = tt.lscalar("ax")
    a, b, x = tt.dmatrix("a"), tt.dmatrix("b"), tt.dtensor3("x")
    sizes = tt.lvector("sizes")
    parts = basic.Split(3)(x, ax, sizes)
    outs = [Join()(ax, a, b).shape] + [p.shape for p in parts]
    f = theano_dag.function([ax, a, b, x, sizes], outs)
    assert not any(isinstance(n.op, (Join, basic.Split)) for n in f.maker.fgraph.toposort())
    av, bv, xv = np.ones((1, 3)), np.ones((4, 3)), np.ones((4, 10, 3))
    got = f(0, av, bv, xv, [1, 1, 2])
    assert [tuple(g) for g in got] == [(5, 3), (1, 10, 3), (1, 10, 3), (2, 10, 3)]
    got = f(-1, np.ones((2, 1)), np.ones((2, 4)), xv, [1, 0, 2])
    assert [tuple(g) for g in got] == [(2, 5), (4, 10, 1), (4, 10, 0), (4, 10, 2)]


@pytest.mark.parametrize("mode", ENGINES)
def test_split_with_a_symbolic_axis(mode):
    ax = tt.lscalar("ax")
    x, sizes = tt.dtensor3("x"), tt.ivector("sizes")
    parts = basic.split(x, sizes, 3, axis=ax)
    assert parts[0].owner.op == basic.Split(3, None)
    assert parts[0].owner.inputs == [x, ax, sizes]
    f = theano_dag.function([x, sizes, ax], parts, mode=Mode(linker=mode))
    xv = np.random.default_rng(0).random((4, 10, 3))
    for k, s in ((1, [2, 5, 3]), (-3, [1, 1, 2]), (2, [0, 1, 2])):
        for g, w in zip(f(xv, s, k), np.split(xv, np.cumsum(s)[:-1], axis=k)):
            np.testing.assert_array_equal(g, w)
    with pytest.raises(IndexError, match="axis 3 is out of range"):
        f(xv, [1, 1, 1], 3)


def test_gradients_through_join_and_split_with_a_symbolic_axis():
    # the gradient of a join splits it along the run-time axis and the other way round;
    # the axis itself has none (disconnected)
    ax = tt.lscalar("ax")
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    av, bv = np.random.default_rng(1).random((2, 3)), np.random.default_rng(2).random((2, 3))
    w = np.arange(12.0).reshape(4, 3)
    cost = (Join()(ax, a, b) * tt.constant(w).reshape(Join()(ax, a, b).shape)).sum()
    ga, gb = theano_dag.function([ax, a, b], theano_dag.grad(cost, [a, b]))(0, av, bv)
    np.testing.assert_array_equal(ga, w[:2])
    np.testing.assert_array_equal(gb, w[2:])
    with pytest.raises(theano_dag.gradient.DisconnectedInputError):
        theano_dag.grad(cost, ax)
    x = tt.dmatrix("x")
    p, q = basic.split(x, [1, 2], 2, axis=ax)
    gx = theano_dag.function([ax, x], theano_dag.grad((p**2).sum() + 3 * q.sum(), x))
    xv = np.random.default_rng(3).random((3, 3))
    np.testing.assert_allclose(gx(1, xv), np.concatenate([2 * xv[:, :1], np.full((3, 2), 3)], 1))
    np.testing.assert_allclose(gx(0, xv), np.concatenate([2 * xv[:1], np.full((2, 3), 3)], 0))
    for k in (0, 1):
        verify_grad(lambda u, v, k=k: Join()(tt.constant(k), u, v), [av, bv])


def test_join_and_split_take_an_axis_that_becomes_a_constant_as_theirs():
    # givens={ax: 1}: the canonical graph holds Join(1) and Split(2, 1), which the other
    # rewrites and the engines read; excluding the rewrite keeps the axis an input
    ax = tt.lscalar("ax")
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    outs = [Join()(ax, a, b), *basic.split(a, [1, 2], 2, axis=ax)]
    one = tt.constant(1, dtype="int64")
    f = theano_dag.function([a, b], outs, givens={ax: one})
    ops = [n.op for n in f.maker.fgraph.toposort()]
    assert Join(1) in ops and basic.Split(2, 1) in ops
    av, bv = np.ones((2, 3)), np.zeros((2, 3))
    got = f(av, bv)
    np.testing.assert_array_equal(got[0], np.concatenate([av, bv], 1))
    assert [g.shape for g in got[1:]] == [(2, 1), (2, 2)]
    mode = theano_dag.compile.mode.get_default_mode().excluding("local_join_split_constant_axis")
    f = theano_dag.function([a, b], outs, givens={ax: one}, mode=mode)
    ops = [n.op for n in f.maker.fgraph.toposort()]
    assert Join(None) in ops and basic.Split(2, None) in ops
    np.testing.assert_array_equal(f(av, bv)[0], np.concatenate([av, bv], 1))


def test_join_of_broadcastable_inputs_is_not_broadcastable_on_the_axis():
    row = tt.TensorType("float64", shape=(1, None, 1))
    c = Join()(0, row("a"), row("b"))
    assert c.type.shape[0] == 2 and not c.type.broadcastable[0]
    assert c.type.broadcastable[2]


@pytest.mark.parametrize("mode", ENGINES)
def test_join_view_returns_the_input_when_the_others_are_empty(mode):
    s = tt.lscalar("s")
    x = tt.dvector("x")
    z = tt.zeros((s,))
    c = Join(view=0)(0, x, z, z)
    assert c.owner.op.view_map == {0: [0]} and str(c.owner.op) == "Join{axis=0, view=0}"
    f = theano_dag.function([In(x, borrow=True), s], Out(c, borrow=True), mode=Mode(linker=mode))
    data = np.array([3.0, 4.0, 5.0])
    assert f(data, 0) is data
    np.testing.assert_array_equal(f(data, 2), [3, 4, 5, 0, 0, 0, 0])  # not empty: a copy
    with pytest.raises(ValueError, match="view=3 is not one of the 2 inputs"):
        Join(view=3)(0, x, x)


# -- get_scalar_constant_value --------------------------------------------------------


def test_scalar_constant_of_subtensors_of_constants_and_vectors():
    c = tt.constant(np.arange(10.0).reshape(2, 5))
    assert get_scalar_constant_value(c[1, 3]) == 8.0
    assert get_scalar_constant_value(c[-1, -3]) == 7.0
    a = tt.stack([1, 2, 3])
    assert [int(get_scalar_constant_value(a[k])) for k in range(3)] == [1, 2, 3]
    b = tt.stack([tt.iscalar("b"), 2, 3])
    with pytest.raises(NotScalarConstantError):
        get_scalar_constant_value(b[0])
    assert get_scalar_constant_value(b[2]) == 3
    v = tt.ivector("v")
    joined = tt.stack([v, [2], [3]])  # rows of a matrix: not scalars
    for k in range(3):
        with pytest.raises(NotScalarConstantError):
            get_scalar_constant_value(joined[k])
    vec = tt.concatenate([tt.as_tensor([5, 6]), tt.as_tensor([7])])
    assert [int(get_scalar_constant_value(vec[k])) for k in (0, 1, 2, -1)] == [5, 6, 7, 7]
    mv = tt.make_vector(1, 2, 3)
    with pytest.raises(NotScalarConstantError):
        get_scalar_constant_value(mv)
    assert get_scalar_constant_value(mv[np.uint8(2)]) == 3
    with pytest.raises(NotScalarConstantError):
        get_scalar_constant_value(mv[ts.int64("i")])


def test_scalar_constant_of_shapes():
    c = tt.constant(np.zeros((3, 4)))
    assert get_scalar_constant_value(Shape_i(0)(c)) == 3
    assert get_scalar_constant_value(Shape_i(1)(c)) == 4
    d = theano_dag.shared(np.zeros((1, 1)), shape=(1, 1))
    assert get_scalar_constant_value(ScalarFromTensor()(Shape_i(0)(d))) == 1
    assert get_scalar_constant_value(tt.row().shape[0]) == 1
    res = get_scalar_constant_value(tt.as_tensor([10, 20]).shape[0])
    assert isinstance(res, np.ndarray) and res == 2
    res = get_scalar_constant_value(9 + tt.as_tensor([1.0]).shape[0], max_recur=9)
    assert isinstance(res, np.ndarray) and res == 10
    with pytest.raises(NotScalarConstantError):
        get_scalar_constant_value(tt.dmatrix().shape[0])


def test_scalar_constant_of_elemwise_arithmetic_and_asserts():
    c = tt.constant(0.25)
    assert np.isclose(get_scalar_constant_value(c + 1), 1.25)
    assert np.isclose(get_scalar_constant_value(c * 1.2 - 1), -0.7)
    assert get_scalar_constant_value(c < 0.5) == 1
    assert get_scalar_constant_value(tt.maximum(c, 3)) == 3
    assert get_scalar_constant_value(tt.second(tt.dvector(), 0.4)) == 0.4
    with pytest.raises(NotScalarConstantError):
        get_scalar_constant_value(c + 1, elemwise=False)
    with pytest.raises(NotScalarConstantError):
        get_scalar_constant_value(c + 1, only_process_constants=True)
    with pytest.raises(NotScalarConstantError):
        get_scalar_constant_value(tt.exp(c))  # not among the ops it computes
    two = tt.constant(2)
    assert get_scalar_constant_value(Assert()(two, two > 1)) == 2
    with pytest.raises(NotScalarConstantError):
        get_scalar_constant_value(Assert()(two, two > 2))
    with pytest.raises(NotScalarConstantError):
        get_scalar_constant_value(Assert()(two, two > tt.scalar()))


def test_scalar_constant_of_arrays():
    assert get_scalar_constant_value(np.array(3)) == 3
    assert get_scalar_constant_value(np.full((2, 2), 7)) == 7
    with pytest.raises(NotScalarConstantError):
        get_scalar_constant_value(np.array([0, 1]))
    with pytest.raises(EmptyConstantError):
        get_scalar_constant_value(np.array([]))
    with pytest.raises(NotScalarConstantError, match="not a numeric constant"):
        get_scalar_constant_value(tt.NoneConst)


def test_extract_constant_returns_a_copy_of_the_value():
    c = tt.constant(3)
    d = tt.extract_constant(c)
    d += 1
    assert tt.extract_constant(c) == 3 and c.data == 3
    assert tt.extract_constant(ts.int8("s")).type == tt.TensorType("int8", ())


# -- eye, clip, rounding ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8"])
def test_eye_with_m_none_at_run_time(dtype):
    n, m, k = tt.iscalars("n", "m", "k")
    f = theano_dag.function([n, m, k], tt.eye(n, m, k, dtype=dtype), mode=Mode(linker="py"))
    for args in [(3, None, 0), (3, None, 1), (3, 5, -1)]:
        got = f(*args)
        np.testing.assert_array_equal(got, np.eye(*args, dtype=dtype))
        assert got.dtype == dtype


@pytest.mark.parametrize("build", [lambda x: tt.clip(x, 0, x), lambda x: tt.clip(x, x, 0)])
def test_clip_gradient_with_the_input_as_a_bound(build):
    x = np.random.default_rng(4).uniform(-1, 1, size=(3, 7))
    x[np.abs(x) < 1e-3] = 0.5  # away from the kink
    verify_grad(build, [x], rng=np.random.RandomState(0))


def test_clip_with_crossed_bounds_follows_theano_gradient_included():
    # lo > hi: Theano's clip gives lo where x < lo, else hi (numpy's gives hi everywhere);
    # the gradient goes to the bound given, none to x.
    x, lo, hi = tt.dvectors("x", "lo", "hi")
    y = tt.clip(x, lo, hi)
    g = theano_dag.grad(y.sum(), [x, lo, hi])
    xv, lov, hiv = np.array([-1.0, 0.5, 2.0]), np.array([1.0, 1.0, 1.0]), np.zeros(3)
    f = theano_dag.function([x, lo, hi], [y, *g])
    out, gx, glo, ghi = f(xv, lov, hiv)
    np.testing.assert_array_equal(out, [1.0, 1.0, 0.0])
    np.testing.assert_array_equal(gx, [0, 0, 0])
    np.testing.assert_array_equal(glo, [1, 1, 0])
    np.testing.assert_array_equal(ghi, [0, 0, 1])
    verify_grad(lambda a, b, c: tt.clip(a, b, c), [xv, lov, hiv], rng=np.random.RandomState(1))


@pytest.mark.parametrize("mode", ENGINES)
@pytest.mark.parametrize(
    "dtype,out",
    [("int8", "float32"), ("uint8", "float32"), ("int32", "float64"), ("int64", "float64")],
)
@pytest.mark.parametrize("name", ["floor", "ceil", "trunc"])
def test_rounding_of_integers_is_float_as_in_theano(name, dtype, out, mode):
    x = tt.vector("x", dtype=dtype)
    y = getattr(tt, name)(x)
    assert y.dtype == out
    xv = np.arange(-5, 6).astype(dtype) if dtype[0] == "i" else np.arange(11).astype(dtype)
    got = theano_dag.function([x], y, mode=Mode(linker=mode))(xv)
    assert got.dtype == out
    np.testing.assert_array_equal(got, getattr(np, name)(xv.astype(out)))


# -- max_and_argmax, Alloc folding, mgrid, choose ----------------------------------------


@pytest.mark.parametrize("mode", ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_and_argmax_is_one_node_with_theanos_axes(dtype, mode):
    data = np.random.default_rng(2).uniform(-10, 10, size=(4, 5)).astype(dtype)
    x = tt.matrix("x", dtype=dtype)
    cases = [
        (-1, -1),
        (0, 0),
        (None, None),
        ([0, 1], None),
        ([1, 0], None),
        (tt.NoneConst.clone(), None),
        (tt.constant(0), 0),
        ([1, 1], 1),  # a repeated axis counts once, as in Theano
    ]
    for axis, np_axis in cases:
        mx, i = tt.max_and_argmax(x, axis)
        assert mx.owner is i.owner and isinstance(mx.owner.op, tt.MaxAndArgmax)
        f = theano_dag.function([x], [mx, i], mode=Mode(linker=mode))
        v, iv = f(data)
        np.testing.assert_array_equal(v, np.max(data, np_axis))
        np.testing.assert_array_equal(iv, np.argmax(data, np_axis))
        assert iv.dtype == "int64"
    with pytest.raises(TypeError, match="the axis must be a constant"):
        tt.max_and_argmax(x, tt.lscalar("axis"))
    v, iv = tt.max_and_argmax(x, 1, keepdims=True)
    assert v.type.shape == (None, 1) and iv.type.shape == (None, 1)
    empty = np.zeros((0, 4), dtype)
    got = theano_dag.function([x], tt.max_and_argmax(x, 1), mode=Mode(linker=mode))(empty)
    assert [g.shape for g in got] == [(0,), (0,)]


def test_max_and_argmax_gradient():
    data = np.random.default_rng(3).permutation(24).reshape(2, 3, 4) / 7.0
    for axis in (0, [1], [0, 2], None):
        verify_grad(lambda v, a=axis: tt.max_and_argmax(v, a)[0], [data], eps=1e-4)


def test_an_alloc_the_function_returns_is_not_folded():
    out = tt.alloc(tt.constant(np.ones((1, 1))), 50, 60)
    f = theano_dag.function([], out)
    assert [type(n.op) for n in f.maker.fgraph.toposort()] == [basic.Alloc]
    a, b = f(), f()
    a[0, 0] = 5.0  # the caller's array: the next call's is a new one
    assert b[0, 0] == 1.0 and f()[0, 0] == 1.0
    # Used inside the graph, it still folds.
    g = theano_dag.function([], tt.alloc(tt.constant(1.0), 3, 2) * 2)
    assert not any(isinstance(n.op, basic.Alloc) for n in g.maker.fgraph.toposort())


def test_mgrid_and_ogrid_of_one_slice_are_one_tensor():
    np.testing.assert_allclose(tt.mgrid[0:1:0.1].eval(), np.mgrid[0:1:0.1])
    np.testing.assert_allclose(tt.ogrid[2:9:3].eval(), np.ogrid[2:9:3])
    assert len(tt.mgrid[0:2, 0:3]) == 2


@pytest.mark.parametrize(
    "shp_a,shp_c",
    [((5, 4), (7, 4)), ((1, 4), (7, 4)), ((5, 1), (7, 4)), ((4,), (3, 1)), ((1,), (1,))],
)
def test_choose_infers_its_shape_without_computing(shp_a, shp_c):
    a = tt.TensorType("int32", shape=tuple(1 if n == 1 else None for n in shp_a))("a")
    c = tt.TensorType("float32", shape=tuple(1 if n == 1 else None for n in shp_c))("c")
    av = (np.random.default_rng(0).random(shp_a) * shp_c[0]).astype("int32")
    cv = np.random.default_rng(1).random(shp_c).astype("float32")
    f = theano_dag.function([a, c], tt.choose(a, c).shape)
    assert not any(isinstance(n.op, tt.Choose) for n in f.maker.fgraph.toposort())
    assert tuple(f(av, cv)) == np.choose(av, cv).shape


# -- smaller names and contracts ----------------------------------------------------------


def test_copy_of_a_function_returns_a_list_as_theanos():
    x = tt.dscalar("x")
    z = theano_dag.shared(2.0, name="z")
    f = theano_dag.function([x], x + z, updates={z: z * 2})
    assert f(1.0) == 3.0  # one output: one value
    cpy = f.copy(delete_updates=True)
    out = cpy(1.0)
    assert isinstance(out, list) and out[0] == 5.0 and cpy(1.0)[0] == 5.0


def test_bessel_gradients_of_the_inplace_ops():
    v = np.array([[0.5, 1.0], [1.5, 2.0]])
    x = np.array([[0.3, 0.8], [1.2, 2.5]])
    for op in (inplace.iv_inplace, inplace.jv_inplace):
        vv, xx = tt.dmatrices("v", "x")
        (gx,) = op.grad([vv, xx], [tt.ones_like(xx)])[1:]
        name = op.scalar_op.function
        want = getattr(tt, name)(vv, xx)
        assert gx.eval({vv: v, xx: x}).shape == want.eval({vv: v, xx: x}).shape
        # d/dx f(v, x) by finite differences of the out-of-place function
        eps = 1e-6
        f = getattr(tt, name)
        num = (f(v, x + eps).eval() - f(v, x - eps).eval()) / (2 * eps)
        np.testing.assert_allclose(gx.eval({vv: v, xx: x}), num, rtol=1e-5)


def test_casts_expose_their_output_type_as_theanos_specific_out():
    for op, dtype in ((_convert_to_int32, "int32"), (_convert_to_float32, "float32")):
        pref = op.scalar_op.output_types_preference
        assert isinstance(pref, ts.specific_out) and pref.spec[0].dtype == dtype
        x = tt.dvector("x")
        assert theano_dag.function([x], op(x))(np.arange(3.0)).dtype == dtype


def test_eigh_is_an_eig_and_flatten_is_always_a_reshape():
    assert isinstance(tt.nlinalg.eigh(tt.dmatrix())[0].owner.op, Eig)
    assert issubclass(Eigh, Eig)
    x = tt.dtensor3("x")
    flat = tt.flatten(x, 3)
    assert isinstance(flat.owner.op, tt.Reshape) and flat.type == x.type
    assert tt.blas_c.CGemv is tt.blas.Gemv


def test_careduce_sums_one_axis_at_a_time_as_theano():
    # The order of the additions is Theano's (the last axis first): the same rounding.
    xv = np.random.default_rng(5).standard_normal((5, 6, 7)) * 1e3
    xv[0, 0, 0] = np.nan
    x = tt.dtensor3("x")
    for axis in ([0, 2], [1, 2], [0, 1, 2]):
        want = xv
        for a in sorted(axis, reverse=True):
            want = np.add.reduce(want, a)
        got = theano_dag.function([x], x.sum(axis=axis), mode=Mode(linker="py"))(xv)
        assert x.type.values_eq(got, np.asarray(want))


# -- tile with symbolic reps, Split's Theano form, lengths of joins ----------------------


@pytest.mark.parametrize("mode", ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tile_with_symbolic_reps_matches_numpy(dtype, mode):
    x = tt.matrix("x", dtype=dtype)
    xv = np.arange(6, dtype=dtype).reshape(2, 3)
    d, k = tt.iscalars("d", "k")
    v = tt.ivector("v")
    cases = [
        ([x, d], tt.tile(x, [2, d]), [3], [2, 3]),
        ([x, k], tt.tile(x, k), [2], 2),
        ([x, d], tt.tile(x, [2, d, 4]), [3], [2, 3, 4]),
        ([x, v], tt.tile(x, v, 3), [[2, 3]], [1, 2, 3]),
        ([x, v], tt.tile(x, v, 2), [[4]], [1, 4]),
    ]
    for ins, out, extra, reps in cases:
        got = theano_dag.function(ins, out, mode=Mode(linker=mode))(xv, *extra)
        np.testing.assert_array_equal(got, np.tile(xv, reps))
    f = theano_dag.function([x, v], tt.tile(x, v, 3), mode=Mode(linker=mode))
    with pytest.raises(AssertionError, match="reps has more entries than ndim"):
        f(xv, [2, 3, 4, 5])
    verify_grad(lambda a: tt.tile(a, [2, tt.constant(3) + 0]), [xv.astype("float64")])


def test_tile_refuses_what_theano_refuses():
    x = tt.dmatrix("x")
    for bad in (2.5, tt.fscalar(), tt.fvector(), [2, 2.5]):
        with pytest.raises(ValueError, match="reps must be"):
            tt.tile(x, bad)
    with pytest.raises(ValueError, match="give ndim when reps is a vector"):
        tt.tile(x, tt.ivector())
    with pytest.raises(ValueError, match="reps must be a scalar or a vector"):
        tt.tile(x, tt.imatrix())
    with pytest.raises(ValueError, match="ndim=1 is less than the 2 dimensions"):
        tt.tile(x, [2, 3], 1)
    with pytest.raises(ValueError, match="3 reps for ndim=2"):
        tt.tile(x, [2, 3, 4], 2)


def test_tile_takes_theanos_deprecated_form():
    # Theano's Tile(ndim)(x, reps): constant reps make the node of Tile(reps); symbolic
    # ones are for tile(), and a count that is not ndim is an error
    m = tt.dmatrix("m")
    out = basic.Tile(2)(m, [2, 3])
    assert out.owner.op == basic.Tile((2, 3)) and out.owner.inputs == [m]
    mv = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(out.eval({m: mv}), np.tile(mv, (2, 3)))
    with pytest.raises(ValueError, match=r"Tile\(2\): 3 repetitions for the 2-d"):
        basic.Tile(2)(m, [1, 2, 3])
    with pytest.raises(NotImplementedError, match="use tile"):
        basic.Tile(2)(m, tt.lvector("r"))


@pytest.mark.parametrize("mode", ENGINES)
def test_split_takes_theanos_axis_input(mode):
    m = tt.dmatrix("m")
    mv = np.arange(24.0).reshape(4, 6)
    for axis, sizes in ((0, [4, 0]), (1, [5, 1]), (tt.cast(tt.constant(1), "int32"), [2, 4])):
        outs = basic.Split(2)(m, axis, sizes)
        a = int(get_scalar_constant_value(axis))
        got = theano_dag.function([m], outs, mode=Mode(linker=mode))(mv)
        for g, w in zip(got, np.split(mv, np.cumsum(sizes)[:-1], axis=a)):
            np.testing.assert_array_equal(g, w)
    c = Join()(tt.cast(tt.constant(1), "int32"), m, m)
    assert c.owner.op.axis == 1
    a = tt.lscalar("a")
    assert basic.Split(2)(m, a, [2, 2])[0].owner.inputs[1] is a


def test_vector_length_of_a_join():
    x = tt.dmatrix("x")
    z = tt.join(0, tt.as_tensor_variable(1, ndim=1), tt.as_tensor_variable(x.shape[0], ndim=1))
    assert isinstance(z.owner.op, Join) and basic.get_vector_length(z) == 2
    z = tt.join(0, tt.as_tensor_variable([1, 2], ndim=1), x.shape)
    assert basic.get_vector_length(z) == 4


# -- indexing: Theano's forms and errors ---------------------------------------------------


def test_a_list_holding_slices_is_a_tuple_of_indices():
    x = tt.dtensor3("x")
    xv = np.arange(100.0).reshape(5, 5, 4)
    got = x[[slice(1, -1)] * 3].eval({x: xv})
    np.testing.assert_array_equal(got, xv[1:-1, 1:-1, 1:-1])
    np.testing.assert_array_equal(x[[0, 2]].eval({x: xv}), xv[[0, 2]])  # still an array


def test_index_errors_as_theanos():
    n = tt.dmatrix("n")
    with pytest.raises(ValueError, match="does not fit in int64"):
        n[: 2**63]
    with pytest.raises(IndexError, match="0-d tensor"):
        tt.dscalar("s")[tt.lvector("i")]
    with pytest.raises(IndexError):
        tt.dscalar("s")[[0, 0]]


@pytest.mark.parametrize(
    "index", [(True,), (False,), [True, False], ([0, 1], [0, False]), ([0, 1], [0, "shared"])]
)
def test_python_bools_in_an_index_are_refused_as_in_theano(index):
    x = tt.dmatrix("x")
    if index == ([0, 1], [0, "shared"]):
        index = ([0, 1], [0, theano_dag.shared(True)])
    with pytest.raises(TypeError, match="does not support Python bools"):
        x[index]
    mask = np.array([True, False])  # a numpy mask is a mask
    xv = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(x[mask].eval({x: xv}), xv[mask])


def test_new_axes_around_full_slices_are_one_dimshuffle():
    x = tt.dmatrix("x")
    xv = np.arange(6.0).reshape(2, 3)
    for index in [(Ellipsis, None), (None, slice(None), None, slice(None)), (None, Ellipsis)]:
        z = x[index]
        assert isinstance(z.owner.op, tt.DimShuffle) and z.owner.inputs[0] is x
        np.testing.assert_array_equal(z.eval({x: xv}), xv[index])
        # the region is all of x: set/inc write into x itself
        np.testing.assert_array_equal(tt.set_subtensor(z, 7.0).eval({x: xv}), np.full((2, 3), 7))
        np.testing.assert_array_equal(tt.inc_subtensor(z, 1.0).eval({x: xv}), xv + 1)
    z = x[1:, None]  # a Subtensor, then the new axis
    assert isinstance(z.owner.op, tt.DimShuffle)
    assert isinstance(z.owner.inputs[0].owner.op, tt.Subtensor)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis", [1, 2])
def test_an_integer_vector_among_full_slices_is_take_as_in_theano(dtype, axis):
    x = tt.tensor3("x", dtype=dtype)
    i = tt.ivector("i")
    index = (slice(None),) * axis + (i,)
    z = x[index]
    # Theano's take along an axis: the axis swapped to the front, AdvancedSubtensor1,
    # swapped back
    ops = [type(n.op) for n in theano_dag.graph.basic.io_toposort([x, i], [z])]
    assert ops == [tt.DimShuffle, tt.AdvancedSubtensor1, tt.DimShuffle]
    xv = np.arange(24, dtype=dtype).reshape(2, 3, 4)
    iv = np.array([2, 0, 2], dtype="int32")
    npi = (slice(None),) * axis + (iv,)
    y = tt.tensor3("y", dtype=dtype)
    yv = np.random.default_rng(0).random(xv[npi].shape).astype(dtype)
    inc, put = xv.copy(), xv.copy()
    np.add.at(inc, npi, yv)
    put[npi] = yv
    gx = theano_dag.grad((z * y).sum(), x)
    f = theano_dag.function([x, i, y], [z, tt.inc_subtensor(z, y), tt.set_subtensor(z, y), gx])
    got = f(xv, iv, yv)
    gref = np.zeros_like(xv)
    np.add.at(gref, npi, yv)
    for g, w in zip(got, [xv[npi], inc, put, gref]):
        assert g.dtype == dtype
        np.testing.assert_allclose(g, w, rtol=1e-6)
    with pytest.raises(IndexError, match="0-d tensor"):
        tt.take(tt.scalar("s", dtype=dtype), i, axis=0)


def test_infer_shape_of_two_masks_broadcasts_a_count_of_one():
    n = tt.dmatrix("n")
    nv = np.arange(6.0).reshape(2, 3)
    out = n[n[:, 0] > 2, n[0, :] > 2]  # counts 1 and 0: numpy broadcasts them to 0
    f = theano_dag.function([n], [out, out.shape])
    got, shape = f(nv)
    assert got.shape == nv[nv[:, 0] > 2, nv[0, :] > 2].shape == tuple(shape) == (0,)


@pytest.mark.parametrize("set_", [False, True])
def test_inc_and_set_subtensor_take_theanos_inplace_keyword(set_):
    x = tt.dvector("x")
    op = tt.set_subtensor if set_ else tt.inc_subtensor
    out = op(x[[1, 1, 3]], 2.0, inplace=True)
    assert out.owner.op.inplace and out.owner.op.destroy_map == {0: [0]}
    xv = np.zeros(5)
    f = theano_dag.function([In(x, mutable=True)], out, accept_inplace=True)
    got = f(xv)
    want = np.zeros(5)
    if set_:
        want[[1, 1, 3]] = 2.0
    else:
        np.add.at(want, [1, 1, 3], 2.0)
    np.testing.assert_array_equal(got, want)
    same = tt.inc_subtensor(x[1:], 1.0, set_instead_of_inc=True)
    assert str(same.owner.op) == "SetSubtensor{int64::}"


@pytest.mark.parametrize("mode", ["raise", "wrap", "clip"])
def test_take_modes_and_the_method(mode):
    x = tt.dmatrix("x")
    xv = np.arange(20.0).reshape(4, 5)
    idx = np.array([-10, 5, 12], dtype="int32") if mode != "raise" else np.array([1, 0, 4])
    for axis in (1, -1, None):
        got = x.take(idx, axis, mode=mode).eval({x: xv})
        np.testing.assert_array_equal(got, xv.take(idx, axis, mode=mode))
    with pytest.raises(ValueError, match="mode must be raise, wrap or clip"):
        x.take(idx, mode="bad")


def test_indexed_result_shape_of_index_shapes():
    a = np.arange(5 * 6 * 7 * 8).reshape(5, 6, 7, 8)
    i, j = np.array([[0], [1]]), np.array([0, 1, 2])
    for idx in [(i, j), (slice(None), None, j), (i, slice(None), j), (np.array(1), slice(None))]:
        shapes = [e if e is None or isinstance(e, slice) else e.shape for e in idx]
        res = indexed_result_shape(tt.as_tensor(a).shape, shapes, indices_are_shapes=True)
        assert tuple(int(r.eval()) if hasattr(r, "eval") else r for r in res) == a[idx].shape


def test_theanos_tensor_methods():
    x = tt.dmatrix("x")
    xv = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(x.trace().eval({x: xv}), xv.trace())
    np.testing.assert_array_equal(x.diagonal(1).eval({x: xv}), xv.diagonal(1))
    np.testing.assert_array_equal(x.diagonal(-1, 1, 0).eval({x: xv}), xv.diagonal(-1, 1, 0))
    a = tt.lvector("a")
    got = a.choose([xv[0], xv[1]]).eval({a: np.array([0, 1, 1, 0])})
    np.testing.assert_array_equal(got, np.choose([0, 1, 1, 0], [xv[0], xv[1]]))
    v = tt.dvector("v")
    assert np.isclose(v.norm(2).eval({v: np.array([1.0, 1.0])}), np.sqrt(2))
    np.testing.assert_allclose(x.norm(1, axis=0).eval({x: xv}), np.abs(xv).sum(0))
    for axis in (0, 1, None, (0, 1)):
        kept = x.norm(3, axis=axis, keepdims=True)
        want = (np.abs(xv) ** 3).sum(axis=axis, keepdims=True) ** (1 / 3)
        got = kept.eval({x: xv})
        assert kept.ndim == 2 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12)
    with pytest.raises(NotImplementedError, match="L=0"):
        v.norm(0)
    with theano_dag.config.change_flags(warn__gpu_set_subtensor1=False):
        pass


@pytest.mark.parametrize("mode", ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_repeat_by_one_count_is_a_broadcast_as_theanos(dtype, mode):
    x = tt.tensor3("x", dtype=dtype)
    xv = np.random.default_rng(0).random((2, 3, 4)).astype(dtype)
    r = tt.scalar("r", dtype="uint8")
    for axis in (None, 0, 1, -1):
        for count in (3, [2], r):
            out = tt.repeat(x, count, axis=axis)
            f = theano_dag.function([x, r], out, mode=Mode(linker=mode), on_unused_input="ignore")
            assert not any(isinstance(n.op, tt.RepeatOp) for n in f.maker.fgraph.toposort())
            n = count[0] if isinstance(count, list) else 3
            np.testing.assert_array_equal(f(xv, 3), np.repeat(xv, n, axis=axis))
    verify_grad(lambda a: tt.repeat(a, 2, axis=1), [xv.astype("float64")])
    vec = tt.lvector("v")
    assert isinstance(tt.repeat(x, vec, axis=0).owner.op, tt.RepeatOp)
    with pytest.raises(TypeError, match="not uint64"):
        tt.repeat(x, tt.scalar(dtype="uint64"), axis=0)


def test_repeat_op_static_shapes():
    x = tt.TensorType("float64", shape=(None, 1, 3))("x")
    assert tt.RepeatOp(axis=1)(x, 2).type.shape == (None, 2, 3)
    assert tt.RepeatOp(axis=1)(x, 1).broadcastable == (False, True, False)
    assert tt.RepeatOp(axis=2)(x, tt.lscalar()).type.shape == (None, 1, None)


def test_searchsorted_method():
    x, v = tt.dvector("x"), tt.dvector("v")
    xv, vv = np.array([1.0, 2.0, 4.0]), np.array([0.5, 2.0, 5.0])
    got = x.searchsorted(v, side="right").eval({x: xv, v: vv})
    np.testing.assert_array_equal(got, xv.searchsorted(vv, side="right"))


def test_nlinalg_alloc_and_extract_diag_take_one_rank_each():
    v = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(tt.nlinalg.alloc_diag(v).eval(), np.diag(v))
    np.testing.assert_array_equal(tt.nlinalg.extract_diag(np.diag(v)).eval(), v)
    with pytest.raises(TypeError, match="alloc_diag: expected a vector"):
        tt.nlinalg.alloc_diag(tt.dmatrix())
    with pytest.raises(TypeError, match="extract_diag: expected a matrix"):
        tt.nlinalg.extract_diag(tt.dvector())


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_qr_raw_mode_is_numpys(shape):
    a = tt.dmatrix("a")
    av = np.random.default_rng(1).random(shape)
    h, tau = theano_dag.function([a], list(tt.nlinalg.qr(a, "raw")))(av)
    nh, ntau = np.linalg.qr(av, "raw")
    np.testing.assert_allclose(h, nh, rtol=1e-10)
    np.testing.assert_allclose(tau, ntau, rtol=1e-10)
    shapes = theano_dag.function([a], [o.shape for o in tt.nlinalg.qr(a, "raw")])(av)
    assert [tuple(s) for s in shapes] == [nh.shape, ntau.shape]


def test_theano_clone_and_a_scalar_op_without_a_name():
    x, y = tt.dscalars("x", "y")
    z = theano_dag.clone(x * 2 + 1, replace={x: y})
    assert z.eval({y: 3.0}) == 7.0

    class Scale(ts.ScalarOp):
        def __init__(self):  # Theano's tests skip ScalarOp.__init__
            self.output_types_preference = ts.upgrade_to_float

        def impl(self, n, v):
            return v * n

    op = tt.Elemwise(Scale())
    assert str(op.scalar_op) == "scale" and "scale" in str(op)
    assert op(2, x).eval({x: 1.5}) == 3.0


def test_an_empty_index_is_a_subtensor_as_theanos():
    x = tt.dmatrix("x")
    z = x[()]
    assert isinstance(z.owner.op, tt.Subtensor) and z.owner.op.idx_list == ()
    xv = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(z.eval({x: xv}), xv)
    s = tt.dscalar("s")
    assert s[()].eval({s: 2.5}) == 2.5
    np.testing.assert_array_equal(tt.set_subtensor(x[()], 1.0).eval({x: xv}), np.ones((2, 3)))


@pytest.mark.parametrize("test", ["isnan", "isinf"])
def test_isnan_and_isinf_of_integers_are_a_known_false_as_theanos(test):
    fn, elemwise = getattr(tt, test), getattr(tt, test + "_")
    for dtype in ["float32", "float64", "int32", "uint8", "bool"]:
        x = tt.matrix("x", dtype=dtype)
        y = fn(x)
        assert y.dtype == "bool"
        assert isinstance(y.owner.op, tt.Elemwise) == (dtype.startswith("float"))
        assert isinstance(elemwise(x).owner.op, tt.Elemwise)
        xv = np.array([[0, 1, 2], [3, 4, 5]], dtype=dtype)
        if dtype.startswith("float"):
            xv[0, 1], xv[1, 2] = np.nan, -np.inf
        f = theano_dag.function([x], [y, elemwise(x)])
        for got in f(xv):
            np.testing.assert_array_equal(got, getattr(np, test)(xv))


def test_alloc_of_a_broadcastable_shape_stays_broadcastable():
    # Theano's alloc reads x.shape[i] of a broadcastable x as the constant 1. PyMC3's
    # logsumexp of an integer vector, switch(isinf(m), 0, m) - m with m a max kept as a
    # (1,) vector, broadcast against the vector only so.
    m = tt.max(tt.lvector("x"), axis=None, keepdims=True)
    assert tt.alloc(0.0, *m.shape).broadcastable == (True,)
    assert tt.isinf(m).broadcastable == (True,)
    x = tt.as_tensor_variable(np.array([-4, -2]))
    m = tt.max(x, axis=None, keepdims=True)
    out = tt.log(tt.sum(tt.exp(x - tt.switch(tt.isinf(m), 0, m)))) + m
    np.testing.assert_allclose(out.eval(), np.log(np.exp(-4) + np.exp(-2)))
    n = tt.lscalar("n")  # a length unknown at build time stays unknown
    assert tt.alloc(0.0, n, tt.dmatrix().shape[1], 3).type.shape == (None, None, 3)


def test_composite_fgraph_is_its_scalar_graph_as_theanos():
    x, y = ts.float64("x"), ts.float64("y")
    comp = ts.Composite([x, y], [ts.exp(x) * y + 1])
    fg = comp.fgraph
    assert len(fg.inputs) == 2 and len(fg.outputs) == 1
    assert sorted(type(n.op).__name__ for n in fg.apply_nodes) == ["Add", "Exp", "Mul"]
    fg.outputs[0].name = "changed"  # a copy: the op is unchanged
    assert comp.outputs[0].name is None and str(comp) == "Composite{add(mul(exp(i0), i1), 1)}"


@pytest.mark.parametrize("engine", ENGINES)
def test_prod_takes_theanos_no_zeros_in_input(engine):
    # Theano's prod(x, no_zeros_in_input=True) and Prod(no_zeros_in_input=True): the
    # promise is accepted; values and gradients are numpy's, compiled with no rewrites.
    x = tt.dmatrix("x")
    xv = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    p = tt.prod(x, axis=1, no_zeros_in_input=True)
    q = tt.elemwise.Prod(no_zeros_in_input=True)(x)
    f = theano_dag.function(
        [x], [p, q, theano_dag.grad(p.sum(), x)], mode=Mode(linker=engine, optimizer=None)
    )
    pv, qv, gv = f(xv)
    np.testing.assert_allclose(pv, xv.prod(axis=1))
    np.testing.assert_allclose(qv, xv.prod())
    np.testing.assert_allclose(gv, xv.prod(axis=1, keepdims=True) / xv)


def test_theano_tensor_methods_sort_compress_transfer_and_constant_value():
    x, c = tt.dvector("x"), tt.bvector("c")
    xv = np.array([3.0, 1.0, 2.0])
    np.testing.assert_array_equal(x.sort().eval({x: xv}), [1.0, 2.0, 3.0])
    # Theano's method: the variable is the condition, the argument the array
    got = c.compress(x).eval({c: np.array([1, 0, 1], "int8"), x: xv})
    np.testing.assert_array_equal(got, [3.0, 2.0])
    assert x.transfer("cpu") is x
    with pytest.raises(ValueError, match="transfer: a tensor's only target is 'cpu'"):
        x.transfer("gpu")
    assert tt.constant(4.0).get_scalar_constant_value() == 4.0
    with pytest.raises(tt.NotScalarConstantError):
        x.get_scalar_constant_value()


def test_matmul_operator_is_numpys_and_refuses_scalars():
    a, b = tt.dtensor3("a"), tt.dmatrix("b")
    av, bv = np.arange(24.0).reshape(2, 3, 4), np.arange(20.0).reshape(4, 5)
    np.testing.assert_allclose((a @ b).eval({a: av, b: bv}), av @ bv)
    np.testing.assert_allclose(
        (bv.T @ a.dimshuffle(0, 2, 1)).eval({a: av}), bv.T @ av.transpose(0, 2, 1)
    )
    with pytest.raises(ValueError, match="matmul: scalar operands are not allowed"):
        tt.matmul(tt.dscalar("s"), b)


def test_alloc_of_a_python_number_takes_its_constants_dtype():
    # Theano's autocast: a float that float32 holds exactly is float32 (as tt.constant)
    assert tt.alloc(1.5, 3).dtype == tt.constant(1.5).dtype == "float32"
    assert tt.alloc(0.1, 3).dtype == "float64"
    assert tt.alloc(2, 3).dtype == "int8"
    np.testing.assert_array_equal(tt.alloc(1.5, 3).eval(), np.full(3, 1.5, "float32"))


def _permuted_write_cases():
    # (name, what to write through, the layout the result has, the region there, y's shape)
    yield "x[:, ::2].T", lambda x: x[:, ::2].T, np.transpose, np.s_[::2], (2, 3)
    yield "x[1:, ::2].T <- row", lambda x: x[1:, ::2].T, np.transpose, np.s_[::2, 1:], (2,)
    yield "x[[2, 0]].T", lambda x: x[[2, 0]].T, np.transpose, np.s_[:, [2, 0]], (4, 2)
    yield "x.T[1:].T", lambda x: x.T[1:].T, np.asarray, np.s_[:, 1:], (3, 3)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("set_", [False, True])
@pytest.mark.parametrize("case", list(_permuted_write_cases()), ids=lambda c: c[0])
def test_writes_through_a_permuted_indexed_tensor_give_the_base_permuted_alike(case, set_, engine):
    # Theano's rule: set_subtensor(x[:, ::2].T, y) is x.T with x.T[::2] set to y (the base
    # comes out with the axes of the tensor written through).
    _, part, layout, region, yshape = case
    x, y = tt.dmatrix("x"), tt.TensorType("float64", (None,) * len(yshape))("y")
    op = tt.set_subtensor if set_ else tt.inc_subtensor
    xv = np.arange(12.0).reshape(3, 4)
    yv = np.random.default_rng(0).random(yshape)
    got = theano_dag.function([x, y], op(part(x), y), mode=Mode(linker=engine))(xv, yv)
    want = layout(xv).copy()
    want[region] = yv if set_ else want[region] + yv
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(xv, np.arange(12.0).reshape(3, 4))  # x left as it was
    verify_grad(lambda xx, yy: op(part(xx), yy), [xv, yv], rng=np.random.default_rng(1))


def test_inplace_write_through_permuted_axes_destroys_the_base():
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    out = tt.inc_subtensor(tt.take(x, [3, 1], axis=1), y, inplace=True)
    inc = out.owner.inputs[0].owner
    assert isinstance(out.owner.op, tt.DimShuffle) and inc.op.destroy_map == {0: [0]}
    xv, yv = np.zeros((3, 4)), np.arange(6.0).reshape(3, 2)
    f = theano_dag.function([In(x, mutable=True), y], out, accept_inplace=True)
    got = f(xv, yv)
    want = np.zeros((3, 4))
    want[:, [3, 1]] += yv
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(xv, want)  # written in place, as declared mutable


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("set_", [False, True])
def test_writes_through_a_reshaped_indexed_tensor_go_into_the_indexed_tensor(set_, engine):
    # Theano's rule: inc_subtensor(r.reshape(s), y) is inc_subtensor(r, y spread to s and
    # reshaped to r's shape), r an indexed tensor: the result is r's base.
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    op = tt.set_subtensor if set_ else tt.inc_subtensor
    xv, yv = np.arange(12.0).reshape(3, 4), np.array([[1.0, 2.0]])
    mode = Mode(linker=engine)
    out = op(tt.flatten(x[1:])[2:6].reshape((2, 2)), y)
    got = theano_dag.function([x, y], out, mode=mode)(xv, yv)
    want = xv[1:].ravel().copy()
    spread = np.broadcast_to(yv, (2, 2)).ravel()
    want[2:6] = spread if set_ else want[2:6] + spread
    np.testing.assert_array_equal(got, want)
    out = op(x[1:].reshape((4, 2)), y)
    got = theano_dag.function([x, y], out, mode=mode)(xv, yv)
    want = xv.copy()
    spread = np.broadcast_to(yv, (4, 2)).reshape(2, 4)
    want[1:] = spread if set_ else want[1:] + spread
    np.testing.assert_array_equal(got, want)
    verify_grad(lambda a, b: op(a[1:].reshape((4, 2)), b), [xv, yv], rng=np.random.default_rng(2))
    with pytest.raises(ValueError, match="more than the 2 of the indexed result"):
        op(x[1:].reshape((4, 2)), tt.dtensor3("z"))
