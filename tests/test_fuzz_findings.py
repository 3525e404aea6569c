"""What the fuzzer found (issue 28's generators: integers, casts, switch, fill/alloc,
constants, large lengths, planned and poisoned values), each shrunk to its smallest graph:
one test per finding, beside the fuzzer's recipe that found it. A finding not yet fixed
is marked xfail (strict: the test says so once the fix lands) with the bug in the
reason. Issue 28's own reproducers (cases 0 to 6) are tested beside the code they fix."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.engines.cpu.native import ckernel
from theano_dag.engines.opencl.context import opencl_available

needs_opencl = pytest.mark.skipif(not opencl_available()[0], reason="no OpenCL device")

FAST_RUN = Mode(linker="cpu", optimizer="fast_run")
FAST_COMPILE = Mode(linker="cpu", optimizer="fast_compile")


@pytest.mark.xfail(
    strict=True,
    reason="opt local_abs_neg: |-x| -> |x| is wrong for unsigned integers (-x wraps)",
)
@pytest.mark.parametrize("mode", [FAST_RUN, FAST_COMPILE], ids=["fast_run", "fast_compile"])
def test_abs_of_a_negated_unsigned_integer_wraps_as_numpy(mode):
    # Found with seed 2, graph 671, shrunk to Recipe(nodes=[("input", ("a", 1), "uint16"),
    # ("neg", (0,), None), ("abs", (1,), None)], ...): numpy's |-5| in uint16 is 65531
    # (-5 wraps); the rewrite gave 5.
    x = tt.TensorType("uint16", shape=(None,))("x")
    f = function([x], abs(-x), mode=mode)
    v = np.array([5, 0, 1], "uint16")
    np.testing.assert_array_equal(f(v), np.abs(-v))


@needs_opencl
@pytest.mark.xfail(
    strict=True,
    reason="OpenCL: a comparison of a signed integer and an unsigned one of 32 or 64 bits "
    "compares in C's unsigned type, not in their common dtype (numpy's)",
)
@pytest.mark.parametrize(
    "unsigned, signed", [("uint32", "int32"), ("uint64", "int64"), ("uint32", "int8")]
)
def test_opencl_compares_signed_and_unsigned_integers_in_their_common_dtype(unsigned, signed):
    # Found with seed 77, graph 19 (shrunk: uint32 < int32(-1) gave True) and seed 28028,
    # graph 9770 (neq(uint32, int8)).
    u = tt.TensorType(unsigned, shape=(None,))("u")
    i = tt.TensorType(signed, shape=(None,))("i")
    f = function([u, i], [tt.lt(u, i), tt.eq(u, i), tt.gt(u, i)], mode=Mode(linker="opencl"))
    uv = np.array([0, 1, np.iinfo(unsigned).max], unsigned)
    iv = np.array([-1, -1, -1], signed)
    got = [np.asarray(g) for g in f(uv, iv)]
    want = [np.less(uv, iv), np.equal(uv, iv), np.greater(uv, iv)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def _c_kernels_mode():
    return Mode(linker="cpu", optimizer="fast_run")


@pytest.mark.xfail(
    strict=True,
    reason="Switch's C expression (x != 0 ? y : z, compute_in_output_dtype False) converts "
    "a signed branch to the other, unsigned branch's type by C's rules before the result's "
    "dtype: -5 -> 2**64 - 5 (int32, uint64), -4 -> 2**32 - 4 (int8, uint32)",
)
@pytest.mark.parametrize("engine", ["cpu_c", pytest.param("opencl", marks=needs_opencl)])
@pytest.mark.parametrize("signed, unsigned", [("int32", "uint64"), ("int8", "uint32")])
def test_switch_of_a_signed_and_an_unsigned_branch_keeps_the_signed_values(
    engine, signed, unsigned
):
    # Found with seed 7, graph 260 (switch(c, int32, uint64) is float64) and with seed
    # 28028, graphs 5485, 8000 and 8490 (switch(c, int8, uint32(0)) is int64).
    c = tt.TensorType("bool", shape=(None,))("c")
    i = tt.TensorType(signed, shape=(None,))("i")
    u = tt.TensorType(unsigned, shape=(None,))("u")
    mode = Mode(linker="opencl") if engine == "opencl" else _c_kernels_mode()
    cv = np.array([1, 0, 1], bool)
    iv, uv = np.array([-5, 3, 7], signed), np.arange(3, dtype=unsigned)
    with ckernel.compile_mode("sync"):
        f = function([c, i, u], tt.switch(c, i, u), mode=mode)
        got = np.asarray(f(cv, iv, uv))
    np.testing.assert_array_equal(got, np.where(cv, iv, uv))  # [-5, 1, 7]


@needs_opencl
@pytest.mark.xfail(
    strict=True,
    reason="OpenCL IncSubtensor of a bool array adds as integers: True += True stores 2",
)
def test_opencl_inc_subtensor_of_bools_stays_bool():
    # Found with seed 7, graph 800 (shrunk): maximum(l, inc_subtensor(b[1:], s)) read a 2.
    b = tt.TensorType("bool", shape=(None,))("b")
    s = tt.TensorType("bool", shape=())("s")
    f = function([b, s], tt.inc_subtensor(b[1:], s) + 0, mode=Mode(linker="opencl"))
    bv = np.array([True, True, False])
    want = bv.copy()
    want[1:] += True
    np.testing.assert_array_equal(np.asarray(f(bv, np.array(True))), want.astype("int8"))


@needs_opencl
@pytest.mark.xfail(
    strict=True,
    reason="OpenCL (PoCL): float32 tanh of +-inf is +-0.99999994, not +-1 (the OpenCL C "
    "spec's edge case; numpy and the C kernels give +-1), so a cast to an integer gives 0",
)
def test_opencl_float32_tanh_of_an_infinity_is_one():
    # Found with seed 28028, graph 17830: a shared float32 updated to tanh(x + sum(log(b)))
    # = tanh(-inf), then cast to int16: numpy -1, OpenCL 0.
    x = tt.fvector("x")
    f = function([x], [tt.tanh(x), tt.cast(tt.tanh(x), "int16")], mode=Mode(linker="opencl"))
    xv = np.array([-np.inf, np.inf], "float32")
    got, as_int = (np.asarray(g) for g in f(xv))
    np.testing.assert_array_equal(got, [-1.0, 1.0])
    np.testing.assert_array_equal(as_int, [-1, 1])
