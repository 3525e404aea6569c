"""floatX=float32: the dtypes a float32 program gets (Theano's, checked with theano-pymc
1.1.2 at floatX=float32) and the values, against numpy's."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.config import config


@pytest.mark.parametrize("args", [(0.0, 1.0, 0.25), (0.5,), (1.5, 3), (np.float32(3.5),)])
def test_arange_of_python_floats_is_floatx(args):
    # A float64 range would upcast every float32 graph it enters: arange(0, 1, 0.25) + x
    # was float64 for a float32 x.
    with config.change_flags(floatX="float32"):
        r = tt.arange(*args)
        x = tt.fvector("x")
        f = theano_dag.function([x], [r, r + x])
        n = len(np.arange(*args))
        got, shifted = f(np.ones(n, dtype="float32"))
    assert r.dtype == "float32" and (r + x).dtype == "float32"
    assert got.dtype == shifted.dtype == np.float32
    np.testing.assert_array_equal(got, np.arange(*args, dtype="float32"))
    np.testing.assert_array_equal(shifted, np.arange(*args, dtype="float32") + 1)


def test_arange_dtype_from_its_arguments_under_float32():
    with config.change_flags(floatX="float32"):
        assert tt.arange(tt.fscalar()).dtype == "float32"
        assert tt.arange(tt.dscalar()).dtype == "float64"
        assert tt.arange(0, 1, np.float64(0.25)).dtype == "float64"  # an explicit float64
        assert tt.arange(tt.iscalar(), 10, 0.5).dtype == "float64"  # int32 with a float
        assert tt.arange(4).dtype == "int64"
    with config.change_flags(floatX="float64"):
        assert tt.arange(0.0, 1.0, 0.25).dtype == "float64"  # as numpy's


@pytest.mark.parametrize("floatx", ["float32", "float64"])
def test_floatx_is_a_dtype_name_wherever_a_dtype_is_given(floatx):
    # Theano reads "floatX" as config.floatX in every dtype argument; these raised
    # "data type 'floatX' not understood".
    iv = tt.ivector("i")
    with config.change_flags(floatX=floatx):
        outs = {
            "zeros_like": tt.zeros_like(iv, dtype="floatX"),
            "ones_like": tt.ones_like(iv, dtype="floatX"),
            "zeros": tt.zeros((2,), dtype="floatX"),
            "ones": tt.ones((2,), dtype="floatX"),
            "constant": tt.constant(2, dtype="floatX"),
            "eye": tt.eye(2, dtype="floatX"),
            "arange": tt.arange(3, dtype="floatX"),
            "sum": tt.sum(iv, dtype="floatX"),
            "prod": tt.prod(iv, dtype="floatX"),
            "mean": tt.mean(iv, dtype="floatX"),
        }
        f = theano_dag.function([iv], list(outs.values()))
        got = dict(zip(outs, f(np.array([1, 2, 4], dtype="int32"))))
    assert {k: v.dtype for k, v in outs.items()} == dict.fromkeys(outs, floatx)
    assert {k: v.dtype for k, v in got.items()} == dict.fromkeys(outs, np.dtype(floatx))
    expected = {
        "zeros_like": np.zeros(3),
        "ones_like": np.ones(3),
        "zeros": np.zeros(2),
        "ones": np.ones(2),
        "constant": 2.0,
        "eye": np.eye(2),
        "arange": np.arange(3.0),
        "sum": 7.0,
        "prod": 8.0,
        "mean": 7 / 3,
    }
    for k, v in expected.items():
        np.testing.assert_allclose(got[k], v, rtol=1e-6, err_msg=k)


def test_a_reduction_asked_for_floatx_is_the_op_of_that_dtype():
    iv = tt.ivector("i")
    with config.change_flags(floatX="float32"):
        assert tt.sum(iv, dtype="floatX").owner.op == tt.sum(iv, dtype="float32").owner.op


def test_numpy_floatx_cast_policy_keeps_floatx_unless_float64_is_asked_for():
    # cast_policy=numpy+floatX: Python ints are int64 (as numpy), and a float32 with an
    # int64 stays float32 (Theano's upcast), where numpy would give float64: x * 2 and
    # x / 3 were float64 graphs for a float32 x.
    xv = np.array([1.5, -2.0, 3.25], dtype="float32")
    iv = np.array([1, 2, 3], dtype="int64")
    dv = np.array([0.5, 1.0, 2.0])
    with config.change_flags(floatX="float32", cast_policy="numpy+floatX"):
        x, i, d = tt.fvector("x"), tt.lvector("i"), tt.dvector("d")
        cases = [
            (x * 2, "float32", xv * 2),
            (x / 3, "float32", xv / np.float32(3)),
            (x**2, "float32", xv**2),
            (x + i, "float32", xv + iv.astype("float32")),
            (i * 0.5, "float32", iv * np.float32(0.5)),
            (tt.mean(x) * 2, "float32", np.float32(xv.mean() * 2)),
            (x + d, "float64", xv + dv),  # an explicit float64 is kept
            (x * np.float64(2.0), "float64", xv * 2.0),
            (i * 2, "int64", iv * 2),
        ]
        f = theano_dag.function([x, i, d], [c[0] for c in cases], on_unused_input="ignore")
        got = f(xv, iv, dv)
    for (out, dtype, want), g in zip(cases, got):
        assert out.dtype == dtype and g.dtype == np.dtype(dtype), (out, dtype, g.dtype)
        np.testing.assert_allclose(g, want, rtol=1e-6)
    # the custom policy (the default) is unchanged: Python ints are small ints
    with config.change_flags(floatX="float32"):
        x, i = tt.fvector("x"), tt.lvector("i")
        assert (x * 2).dtype == "float32" and (x + i).dtype == "float64"


@pytest.mark.parametrize("linker", ["py", "cpu"])
def test_a_comparison_computes_in_numpys_common_dtype_under_numpy_floatx(linker):
    # The cast policy keeps float32 results float32; a comparison's operands are still
    # compared in numpy's common dtype (float64 for int64 and float32), on every engine:
    # 2**24 + 1 is not 2**24, which float32 would round it to.
    iv = np.array([2**24 + 1, 3], "int64")
    fv = np.array([2.0**24, 3.0], "float32")
    with config.change_flags(cast_policy="numpy+floatX", floatX="float32"):
        i, f = tt.vector("i", dtype="int64"), tt.vector("f", dtype="float32")
        mode = theano_dag.compile.mode.Mode(linker=linker, optimizer=None)
        g = theano_dag.function([i, f], [tt.eq(i, f), tt.lt(f, i)], mode=mode)
        eq, lt = g(iv, fv)
    np.testing.assert_array_equal(eq, np.equal(iv, fv))
    np.testing.assert_array_equal(lt, np.less(fv, iv))
