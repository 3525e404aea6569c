"""Behaviours Theano's own tests rely on: scalars as tensors, fused Rebroadcasts, one
ARange op per dtype, argmax over several axes, ``fill`` as the op."""

import numpy as np
import pytest

import theano_dag
import theano_dag.scalar as ts
import theano_dag.tensor as tt
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.tensor.arrays import TensorFromScalar
from theano_dag.tensor.elemwise import Elemwise
from theano_dag.tensor.shape import Rebroadcast


def test_scalar_variable_becomes_a_tensor():
    y = tt.as_tensor_variable(ts.int8("s"))
    assert isinstance(y.owner.op, TensorFromScalar) and y.type == tt.TensorType("int8", ())


def test_consecutive_rebroadcasts_fuse_or_cancel():
    x = tt.dmatrix("x")
    assert tt.unbroadcast(tt.addbroadcast(x, 0), 0) is x
    both = tt.TensorType("float64", shape=(1, 1))("b")
    r = tt.unbroadcast(tt.unbroadcast(both, 1), 0)
    assert r.owner.inputs[0] is both and isinstance(r.owner.op, Rebroadcast)
    assert r.broadcastable == (False, False)
    assert tt.addbroadcast(tt.unbroadcast(both, 0), 0) is both


def test_unbroadcast_forgets_a_known_length_as_pytensors_unbroadcast():
    # PyMC3's DifferentialEquation: unbroadcast(as_tensor_variable([a, b]), 0) must have
    # the type of a vector (Theano's types had no lengths), and its gradient flows back.
    a, b = tt.dscalar("a"), tt.dscalar("b")
    v = tt.as_tensor_variable([a, b])
    assert v.type.shape == (2,)
    u = tt.unbroadcast(v, 0)
    assert u.type == tt.dvector and isinstance(u.owner.op, Rebroadcast)
    assert tt.unbroadcast(u, 0) is u  # nothing left to declare: no second node
    m = tt.TensorType("float64", shape=(3, 1))("m")
    assert tt.unbroadcast(m, 0).type.shape == (None, 1)
    assert tt.patternbroadcast(m, (False, False)).type.shape == (None, None)
    ga, gb = theano_dag.grad((u**2).sum(), [a, b])
    f = theano_dag.function([a, b], [u, ga, gb])
    got = f(1.5, -2.0)
    np.testing.assert_allclose(got[0], [1.5, -2.0])
    assert [float(g) for g in got[1:]] == [3.0, -4.0]


def test_arange_op_is_shared_per_dtype():
    n = tt.lscalar("n")
    assert tt.arange(n).owner.op is tt.arange(n, dtype="int64").owner.op
    assert tt.arange(n).owner.op is not tt.arange(n, dtype="int32").owner.op


@pytest.mark.parametrize("fn,npfn", [(tt.argmax, np.argmax), (tt.argmin, np.argmin)])
@pytest.mark.parametrize("axes", [(0, 1), (1, 2), (0, 2), (0, 1, 2), [2, 0]])
def test_arg_over_several_axes(fn, npfn, axes):
    x = tt.dtensor3("x")
    v = np.random.default_rng(3).random((2, 3, 4))
    kept = [d for d in range(3) if d not in axes]
    moved = np.transpose(v, kept + sorted(axes)).reshape([v.shape[d] for d in kept] + [-1])
    np.testing.assert_array_equal(fn(x, axis=axes).eval({x: v}), npfn(moved, axis=-1))
    kd = fn(x, axis=axes, keepdims=True).eval({x: v})
    assert kd.shape == tuple(1 if d in axes else v.shape[d] for d in range(3))


def test_fill_is_the_second_op():
    x = tt.dvector("x")
    out = tt.fill(x, 2.0)
    assert isinstance(tt.fill, Elemwise) and out.owner.op == tt.fill == tt.second
    np.testing.assert_array_equal(out.eval({x: np.zeros(3)}), [2.0, 2.0, 2.0])


@pytest.mark.parametrize("mmap_mode", [None, "c"])
def test_load_from_disk(tmp_path, mmap_mode):
    import theano_dag
    from theano_dag.graph.type import Generic

    fname = str(tmp_path / "a.npy")
    data = np.arange(5, dtype="int32")
    np.save(fname, data)
    path = Generic()("path")
    x = tt.load(path, "int32", (False,), mmap_mode)
    f = theano_dag.function([path], (x**2).sum())
    assert f(fname) == (data**2).sum() and f(fname) == (data**2).sum()  # the file is intact
    np.testing.assert_array_equal(np.load(fname), data)
    for bad in ("r+", "r", "w+", "toto"):
        with pytest.raises(ValueError, match="mmap_mode"):
            tt.load(path, "int32", (False,), bad)
    with pytest.raises(TypeError, match="holds int32"):
        theano_dag.function([path], tt.load(path, "float64", (False,)))(fname)


def test_scalar_basic_reaches_every_scalar_op():
    assert ts.basic.Composite is ts.Composite and ts.basic.Switch is ts.Switch
    assert ts.scalar_maximum is ts.maximum
    with pytest.raises(AttributeError):
        _ = ts.basic.NoSuchOp


def test_variable_fill_and_array_axes():
    x = tt.dmatrix("x")
    np.testing.assert_array_equal(x.fill(3.0).eval({x: np.zeros((2, 2))}), np.full((2, 2), 3.0))
    assert x.max(np.array(1)).type == tt.dvector().type
    assert x.sum([np.array(0), np.array(1)]).ndim == 0


@pytest.mark.parametrize("axis", [-1, -2, (0, -1)])
def test_careduce_negative_axis(axis):
    import theano_dag
    from theano_dag.tensor.elemwise import CAReduce

    x = tt.dmatrix("x")
    v = np.arange(6.0).reshape(2, 3)
    e = CAReduce(ts.add, axis=axis)(x)
    expected = np.add.reduce(v, axis=axis)
    assert e.ndim == expected.ndim and all(a >= 0 for a in e.owner.op.axis)
    np.testing.assert_array_equal(theano_dag.function([x], e)(v), expected)
    assert tuple(theano_dag.function([x], e.shape)(v)) == expected.shape


def test_prod_without_zeros_names_its_accumulator():
    from theano_dag.tensor.elemwise import ProdWithoutZeros

    assert ProdWithoutZeros(axis=0)(tt.imatrix()).owner.op.acc_dtype == "int64"
    assert ProdWithoutZeros(axis=0)(tt.fmatrix()).owner.op.acc_dtype == "float64"


ACC = {"bool": "int64", "int8": "int64", "int32": "int64", "uint8": "uint64",
       "uint32": "uint64", "float16": "float32", "float32": "float64", "float64": "float64",
       "complex64": "complex128"}  # fmt: skip


@pytest.mark.parametrize("method", ["sum", "prod"])
@pytest.mark.parametrize("dtype", sorted(ACC))
def test_sum_and_prod_nodes_name_their_accumulator(method, dtype):
    # Theano's test_reduce_default_acc_dtype: the node's op holds the accumulator it
    # uses; the values are numpy's, accumulated in that dtype.
    x = tt.matrix("x", dtype=dtype)
    for axis in (None, 0, (0, 1), -1):
        s = getattr(x, method)(axis=axis)
        assert s.owner.op.acc_dtype == ACC[dtype]
        assert s.owner.op == type(s.owner.op)(s.owner.op.axis, acc_dtype=ACC[dtype])
    data = (np.arange(1, 7).reshape(2, 3) % 3).astype(dtype)
    s = getattr(x, method)(axis=1)
    got = theano_dag.function([x], s)(data)
    want = getattr(np, method)(data, axis=1, dtype=ACC[dtype]).astype(s.dtype)
    assert got.dtype == s.dtype
    np.testing.assert_allclose(got, want)
    # An explicit accumulator stays as given.
    assert x.sum(acc_dtype=ACC[dtype]).owner.op.acc_dtype == ACC[dtype]


@pytest.mark.parametrize("linker", ["py", "cpu", "dask", "opencl"])
@pytest.mark.parametrize("in_dtype", ["float16", "float32", "float64"])
def test_floats_summed_to_integers_accumulate_in_floats_and_are_cast_at_the_end(linker, in_dtype):
    # Theano's test_reduce_custom_dtype (marked slow): x.sum(dtype="int8") of floats
    # accumulates in the input's accumulator (float16 in float32, float32 in float64) and
    # casts the sum; here it raised, at the call where axis=() (an accumulator of int8
    # would lose the float's precision).
    if linker == "opencl" and not opencl_available()[0]:
        pytest.skip("no OpenCL platform")
    x = tt.tensor3("x", dtype=in_dtype)
    up = {"float16": "float32", "float32": "float64"}.get(in_dtype, in_dtype)
    xv = (np.random.default_rng(12).standard_normal((3, 4, 5)) * 4).astype(in_dtype)
    outs, want = [], []
    for method, dtype, axis in [
        ("sum", "int8", None),
        ("sum", "int32", (0, 2)),
        ("sum", "bool", 1),
        ("sum", "int64", ()),
        ("prod", "bool", None),
        ("prod", "int16", 2),
        ("mean", "int32", 0),
    ]:
        out = getattr(x, method)(dtype=dtype, axis=axis)
        if method == "mean":
            # Theano's mean of an integer sum divides it: a float64 result
            assert out.dtype == "float64"
            ref = np.sum(xv.astype(up), axis=axis).astype(dtype) / xv.shape[0]
        else:
            acc = out.owner.op.acc_dtype
            assert acc == ts.upcast(up, acc), (method, dtype, acc)
            red = getattr(np, method)
            ref = xv.astype(acc) if axis == () else red(xv.astype(acc), axis=axis, dtype=acc)
            ref = np.asarray(ref).astype(dtype)
        outs.append(out)
        want.append(ref)
    got = theano_dag.function([x], outs, mode=theano_dag.Mode(linker=linker))(xv)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, k
        np.testing.assert_array_equal(g, w, err_msg=str(k))


def test_cut_useless_reduce_is_a_tag_of_the_useless_reduce_rule():
    import theano_dag

    x = tt.imatrix("x")
    mode = theano_dag.compile.get_default_mode().excluding("local_cut_useless_reduce")
    f = theano_dag.function([x], x.sum(axis=[]), mode=mode)
    assert any(isinstance(n.op, tt.CAReduce) for n in f.maker.fgraph.toposort())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dot_with_an_integer_operand_has_float_gradients(dtype):
    import theano_dag
    from theano_dag.gradient import verify_grad

    a = tt.matrix("a", dtype=dtype)
    w = tt.constant(np.arange(3))
    ga, gw = theano_dag.grad(tt.dot(a, w).sum(), [a, w])
    assert gw.dtype == tt.dot(a, w).dtype  # the float dtype of the product
    f = theano_dag.function([a], [ga, gw])
    out_a, out_w = f(np.ones((2, 3), dtype=dtype))
    np.testing.assert_array_equal(out_a, [[0, 1, 2], [0, 1, 2]])
    # The integer operand's gradient as if it were real (Theano's): a.T . 1
    np.testing.assert_array_equal(out_w, [2, 2, 2])
    verify_grad(lambda m: tt.dot(m, np.arange(3)), [np.ones((2, 3))], rng=np.random.default_rng(0))
