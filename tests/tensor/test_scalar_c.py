"""Each scalar op's C expression, compiled for real, computes what its numpy function does.

The same expressions are compiled as C99 (gcc, via ctypes) and as OpenCL C (pyopencl,
when installed with a device), since the fused kernels of both engines use them.
"""

from __future__ import annotations

import ctypes
import os
import subprocess

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag import scalar as ts
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.scalar import C_TYPES, OPENCL_TYPES

N = 64
F = ("float32", "float64")
UNARY_FLOAT = [
    "exp",
    "exp2",
    "log",
    "log2",
    "log10",
    "log1p",
    "expm1",
    "sqrt",
    "sin",
    "cos",
    "tan",
    "arcsin",
    "arccos",
    "arctan",
    "sinh",
    "cosh",
    "tanh",
    "sigmoid",
    "softplus",
    "erf",
    "erfc",
    "reciprocal",
    "floor",
    "ceil",
    "trunc",
    "round_half_to_even",
    "round_half_away_from_zero",
    "isnan",
    "isinf",
    "gammaln",
    "gamma",
    "log1mexp",
    "xlogx",
    "erfcx",
    "erfcx_deriv",
    "log_erfc",
]


def _cases():
    cases = []
    for name in UNARY_FLOAT:
        for dts in (("float32",), ("float64",), ("int32",), ("int8",)):
            if name in ("isnan", "isinf") and dts[0].startswith("int"):
                continue
            cases.append((name, dts))
    for name in ("neg", "abs_", "sgn", "sqr", "identity"):
        cases += [(name, (d,)) for d in ("float32", "float64", "int8", "int32", "int64")]
    cases += [("invert", (d,)) for d in ("int8", "int32", "int64", "bool", "uint8")]
    arith = [
        ("float64", "float64"),
        ("float32", "float32"),
        ("int32", "int32"),
        ("int64", "int8"),
        ("int8", "int8"),
        ("float32", "int16"),
        ("uint8", "int8"),
    ]
    for name in (
        "add",
        "sub",
        "mul",
        "true_div",
        "int_div",
        "mod",
        "maximum",
        "minimum",
        "lt",
        "gt",
        "le",
        "ge",
        "eq",
        "neq",
    ):
        cases += [(name, d) for d in arith]
    cases += [("add", ("bool", "bool")), ("mul", ("bool", "bool")), ("maximum", ("bool", "bool"))]
    # Integer powers have no C expression (numpy computes them: it raises on a negative
    # exponent and wraps): test_integer_pow_has_no_c_expression.
    cases += [("pow", d) for d in (("float64", "float64"), ("float32", "float32"))]
    cases += [("arctan2", d) for d in (("float64", "float64"), ("float32", "float32"))]
    cases += [("xlogy0", d) for d in (("float64", "float64"), ("float32", "float32"))]
    cases += [("logaddexp", d) for d in (("float64", "float64"), ("float32", "int8"))]
    cases += [("exp_sub", d) for d in (("float64", "float64"), ("float32", "float32"))]
    for name in ("and_", "or_", "xor"):
        cases += [(name, d) for d in (("int32", "int32"), ("bool", "bool"), ("int8", "int64"))]
    cases += [("clip", d) for d in (("float64",) * 3, ("float32",) * 3, ("int32",) * 3)]
    cases += [
        ("switch", d)
        for d in (
            ("bool", "float64", "float32"),
            ("int32", "int8", "int64"),
            ("float64", "float64", "float64"),
        )
    ]
    cases += [("fma", d) for d in (("float64",) * 3, ("float32",) * 3, ("int32",) * 3)]
    cases += [("second", ("float64", "int32")), ("second", ("int8", "float32"))]
    cases += [
        (f"cast:{o}", (i,))
        for i, o in (
            ("float64", "int32"),
            ("float32", "bool"),
            ("int32", "float32"),
            ("int64", "int8"),
            ("bool", "float64"),
            ("float64", "float32"),
        )
    ]
    return cases


CASES = _cases()


def _op(name):
    if name.startswith("cast:"):
        return ts.convert_to(name.split(":")[1])
    return getattr(ts, name)


def _values(name, dtype, k, rng):
    """Inputs that keep every op in its domain, with special float values mixed in."""
    if dtype == "bool":
        return rng.integers(0, 2, N).astype(bool)
    if np.dtype(dtype).kind in "iu":
        lo, hi = (-20, 20)
        if np.dtype(dtype).kind == "u":
            lo = 0
        v = rng.integers(lo, hi, N)
        if name in ("int_div", "mod") and k == 1:
            v[:4] = 0  # numpy gives 0 there; so must C
        return v.astype(dtype)
    v = rng.uniform(-3, 3, N)
    if name in ("arcsin", "arccos"):
        v = rng.uniform(-1, 1, N)
    if name in ("sigmoid", "softplus"):
        v = rng.uniform(-60, 60, N)
    v[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 2.5]
    return v.astype(dtype)


def _inputs(case, rng):
    name, dtypes = case
    return [_values(name, d, k, rng) for k, d in enumerate(dtypes)]


def _expected(case, inputs):
    name, dtypes = case
    op = _op(name)
    (out_dtype,) = op.output_types(tuple(dtypes))
    (want,) = op.compute(inputs, [out_dtype])
    return out_dtype, np.broadcast_to(want, (N,))


def _compare(case, got, want):
    if want.dtype.kind == "f":
        rtol = 2e-6 if want.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(
            got, want, rtol=rtol, atol=rtol, equal_nan=True, err_msg=str(case)
        )
    else:
        np.testing.assert_array_equal(got, want, err_msg=str(case))


def _expr(case, types):
    name, dtypes = case
    op = _op(name)
    (out_dtype,) = op.output_types(tuple(dtypes))
    args = [f"a{k}[i]" for k in range(len(dtypes))]
    return out_dtype, op.c_code(args, list(dtypes), [out_dtype], types)[0]


@pytest.fixture(scope="module")
def c_library(tmp_path_factory):
    if not config.cxx:
        pytest.skip("no C compiler (config.cxx is empty)")
    lines = ["#include <math.h>"]
    for k, case in enumerate(CASES):
        out_dtype, expr = _expr(case, C_TYPES)
        params = ", ".join(f"const {C_TYPES[d]}* a{j}" for j, d in enumerate(case[1]))
        lines.append(
            f"void f{k}({params}, {C_TYPES[out_dtype]}* out, long n) "
            f"{{ for (long i = 0; i < n; i++) out[i] = {expr}; }}"
        )
    d = tmp_path_factory.mktemp("scalar_c")
    src, lib = os.path.join(d, "ops.c"), os.path.join(d, "ops.so")
    with open(src, "w") as f:
        f.write("\n".join(lines))
    subprocess.run(
        [
            config.cxx,
            "-std=c99",
            "-O1",
            "-shared",
            "-fPIC",
            "-Werror=implicit",
            src,
            "-o",
            lib,
            "-lm",
        ],
        check=True,
        capture_output=True,
    )
    return ctypes.CDLL(lib)


@pytest.mark.parametrize("k", range(len(CASES)), ids=[f"{n}{d}" for n, d in CASES])
def test_c_expression_matches_numpy(c_library, k):
    case = CASES[k]
    inputs = _inputs(case, np.random.default_rng(k))
    out_dtype, want = _expected(case, inputs)
    out = np.zeros(N, dtype=out_dtype)
    ptrs = [np.ascontiguousarray(a).ctypes.data_as(ctypes.c_void_p) for a in inputs]
    getattr(c_library, f"f{k}")(*ptrs, out.ctypes.data_as(ctypes.c_void_p), ctypes.c_long(N))
    _compare(case, out, want)


def test_composite_c_code_compiles_and_matches(tmp_path):
    if not config.cxx:
        pytest.skip("no C compiler")
    x, y = ts.float32("x"), ts.int32("y")
    e = ts.exp(x)
    comp = ts.Composite([x, y], [ts.sigmoid(e * y - 1.5) + e, ts.maximum(y, 3) // 2])
    lines, outs = comp.c_code_statements(["a[i]", "b[i]"])
    exprs = comp.c_code(["a[i]", "b[i]"], ["float32", "int32"], list(comp.out_dtypes))
    body = " ".join(lines) + f" o0[i] = {outs[0]}; o1[i] = {outs[1]}; p0[i] = {exprs[0]};"
    t1 = C_TYPES[comp.out_dtypes[1]]
    src = (
        "#include <math.h>\nvoid f(const float* a, const int* b, float* o0, "
        f"{t1}* o1, float* p0, long n) {{ for (long i = 0; i < n; i++) {{ {body} }} }}"
    )
    (tmp_path / "c.c").write_text(src)
    lib = tmp_path / "c.so"
    subprocess.run(
        [config.cxx, "-std=c99", "-shared", "-fPIC", str(tmp_path / "c.c"), "-o", str(lib), "-lm"],
        check=True,
        capture_output=True,
    )
    f = ctypes.CDLL(str(lib)).f
    rng = np.random.default_rng(0)
    a = rng.uniform(-2, 2, N).astype("float32")
    b = rng.integers(-5, 9, N).astype("int32")
    o0, p0 = np.zeros(N, "float32"), np.zeros(N, "float32")
    o1 = np.zeros(N, comp.out_dtypes[1])
    f(*[v.ctypes.data_as(ctypes.c_void_p) for v in (a, b, o0, o1, p0)], ctypes.c_long(N))
    w0, w1 = comp.compute([a, b], list(comp.out_dtypes))
    np.testing.assert_allclose(o0, w0, rtol=1e-5)
    np.testing.assert_allclose(p0, w0, rtol=1e-5)
    np.testing.assert_array_equal(o1, w1)


def test_opencl_expressions_match_numpy():
    cl = pytest.importorskip("pyopencl")
    try:
        ctx = cl.Context(devices=[cl.get_platforms()[0].get_devices()[0]])
    except Exception as e:  # no platform or device
        pytest.skip(f"no OpenCL device: {e}")
    if not ctx.devices[0].double_fp_config:
        pytest.skip("the OpenCL device has no float64")
    try:
        cl.Program(ctx, "__kernel void probe(__global float* a) { a[0] = 1; }").build()
    except cl.Error as e:
        pytest.skip(f"the OpenCL device cannot build kernels here: {str(e).splitlines()[0]}")
    src = ["#pragma OPENCL EXTENSION cl_khr_fp64 : enable"]
    for k, case in enumerate(CASES):
        out_dtype, expr = _expr(case, OPENCL_TYPES)
        params = ", ".join(f"__global const {OPENCL_TYPES[d]}* a{j}" for j, d in enumerate(case[1]))
        src.append(
            f"__kernel void f{k}({params}, __global {OPENCL_TYPES[out_dtype]}* out) "
            f"{{ size_t i = get_global_id(0); out[i] = {expr}; }}"
        )
    prg = cl.Program(ctx, "\n".join(src)).build()
    queue = cl.CommandQueue(ctx)
    mf = cl.mem_flags
    for k, case in enumerate(CASES):
        inputs = _inputs(case, np.random.default_rng(k))
        out_dtype, want = _expected(case, inputs)
        bufs = [
            cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(a))
            for a in inputs
        ]
        out = np.zeros(N, dtype=out_dtype)
        obuf = cl.Buffer(ctx, mf.WRITE_ONLY, out.nbytes)
        getattr(prg, f"f{k}")(queue, (N,), None, *bufs, obuf)
        cl.enqueue_copy(queue, out, obuf)
        _compare(case, out, want)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("src", ["float32", "float64"])
@pytest.mark.parametrize("linker", ["py", "cpu", "opencl"])
def test_float_to_int_cast_of_nonfinite_and_out_of_range_is_the_minimum(linker, src, dtype):
    # C leaves these conversions undefined; x86 (and numpy there) gives the minimum,
    # NVIDIA's OpenCL saturated (+inf -> 2147483647) before the template said it.
    if linker == "opencl":
        pytest.importorskip("pyopencl")
    x = tt.vector("x", dtype=src)
    v = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 3.7, -3.7, 2.0**20], dtype=src)
    lo = np.iinfo(dtype).min
    want = np.array([lo, lo, lo, lo, lo, 3, -3, 2**20], dtype=dtype)
    got = function([x], tt.cast(x, dtype), mode=Mode(linker=linker))(v)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint64"])
def test_integer_pow_has_no_c_expression(dtype):
    # Through double (the expression it had), OpenCL's 3 ** 39 in int64 lost its low bits
    # and 0 ** -1 gave a value where numpy raises: both engines leave it to numpy.
    with pytest.raises(NotImplementedError, match="pow of integers"):
        ts.pow.c_code(["x", "y"], [dtype, dtype], [dtype], C_TYPES)
