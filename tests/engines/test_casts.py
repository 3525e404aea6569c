"""One rule for casts from a float to an integer, on every engine (docs/engines.md,
"Casts"): the reference engine, the CPU engine's numpy path, its C kernels and OpenCL.

In range, a value truncates toward zero (-0.0 and (-1, 0) give 0, no sign); NaN, the
infinities and values whose truncation is out of the integer's range give the integer's
minimum (0 for an unsigned one). A cast to bool is ``x != 0`` (NaN is True).

Plus the engines' answers on NaN and inf constants (issue 28, case 5: PoCL's library
folded on a NaN literal returned garbage).
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag import scalar as ts
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.engines.cpu.native import ckernel
from theano_dag.engines.dask import backend as dask_backend
from theano_dag.engines.dask.linker import DaskLinker
from theano_dag.engines.opencl.context import opencl_available

OCL_OK, OCL_WHY = opencl_available()
INTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
FLOATS = ("float32", "float64")

#: Each engine: its mode, the config flags and the C kernels' build mode it runs under.
ENGINES = {
    "py": (lambda: Mode(linker="py"), {}, None),
    "cpu_numpy": (lambda: Mode(linker="cpu", optimizer="fast_run"), {"cxx": ""}, None),
    "cpu_c": (lambda: Mode(linker="cpu", optimizer="fast_run"), {}, "sync"),
    "opencl": (lambda: Mode(linker="opencl"), {}, None),
}
ENGINE_PARAMS = [
    "py",
    "cpu_numpy",
    "cpu_c",
    pytest.param("opencl", marks=pytest.mark.skipif(not OCL_OK, reason=f"no OpenCL: {OCL_WHY}")),
]


def compile_on(engine, inputs, outputs):
    """``function(inputs, outputs)`` on ``engine``, its C kernels (if any) loaded."""
    mode, flags, build = ENGINES[engine]
    if engine == "cpu_c" and not theano_dag.config.cxx:
        pytest.skip("no C compiler (config.cxx is empty)")
    building = ckernel.compile_mode(build) if build else contextlib.nullcontext()
    with config.change_flags(**flags), building:
        return theano_dag.function(inputs, outputs, mode=mode())


def rule(value, dtype):
    """The cast rule, written independently of the engines: Python's exact arithmetic."""
    v = float(value)
    if dtype == "bool":
        return v != 0
    info = np.iinfo(dtype)
    if math.isnan(v) or math.isinf(v):
        return int(info.min)
    t = math.trunc(v)
    return t if info.min <= t <= info.max else int(info.min)


def rule_values(src, dst):
    """Values of ``src`` around every edge of the rule for ``dst``."""
    ft = np.dtype(src).type
    vals = [0.0, -0.0, 0.7, -0.7, -0.5, 1.0, -1.0, 3.7, -3.7, 100.5, -100.5]
    vals += [1e30, -1e30, np.nan, np.inf, -np.inf]
    if dst != "bool":
        info = np.iinfo(dst)
        for edge in (info.min, info.max, info.min - 1, info.max + 1):
            # The floats of src nearest the edge, on both sides (in range or just out).
            f = ft(float(edge))
            vals += [f, np.nextafter(f, ft(np.inf)), np.nextafter(f, ft(-np.inf))]
        vals += [info.min - 0.5, info.max + 0.5, -(2.0**70), 2.0**70]
    with np.errstate(over="ignore"):
        x = np.array(vals, dtype=src)
    return x[np.isfinite(x) | ~np.isfinite(np.array(vals, dtype="float64"))]


def test_rule_oracle_agrees_with_numpy_in_range():
    # The part of the rule numpy defines (and this machine's numpy gives): truncation.
    for src in FLOATS:
        for dst in INTS + ("bool",):
            x = rule_values(src, dst)
            got = ts.cast_array(x, dst)
            assert got.dtype == np.dtype(dst)
            want = np.array([rule(v, dst) for v in x], dtype=dst)
            np.testing.assert_array_equal(got, want, err_msg=f"{src} -> {dst}")
            if dst != "bool":
                info = np.iinfo(dst)
                t = np.trunc(x.astype("float64"))
                ok = np.isfinite(x) & (t >= info.min) & (t < float(info.max) + 1)
                np.testing.assert_array_equal(got[ok], x[ok].astype(dst))


@pytest.mark.parametrize("src", ("float16",) + FLOATS)
@pytest.mark.parametrize("dst", INTS)
def test_the_pairs_left_to_numpys_astype_follow_the_rule(src, dst):
    # Where the probe lets numpy's astype stand for the rule (x86: int32 and int64), it
    # must hold on values and layouts the probe did not see: random mixes of the edge
    # values at many lengths, offsets and strides, through astype and copyto.
    if not ts.astype_keeps_rule(src, dst):
        with np.errstate(all="ignore"):
            x = rule_values(src, dst)
        want = np.array([rule(v, dst) for v in x], dtype=dst)
        np.testing.assert_array_equal(ts.cast_array(x, dst), want)
        return
    rng = np.random.default_rng(28)
    with np.errstate(over="ignore"):  # float16 has no float for int32's edges: inf
        edges = rule_values(src, dst)
    want_edges = np.array([rule(v, dst) for v in edges], dtype=dst)
    for n in rng.integers(1, 3000, size=60):
        pick = rng.integers(0, len(edges), size=n + 3)
        x, want = edges[pick], want_edges[pick]
        for sl in (slice(0, n), slice(1, n + 1), slice(None, None, 2), slice(None, None, -3)):
            with np.errstate(all="ignore"):
                got = x[sl].astype(dst)
                into = np.empty(got.shape, dst)
                np.copyto(into, x[sl], casting="unsafe")
            np.testing.assert_array_equal(got, want[sl], err_msg=f"{src} -> {dst}, n={n}")
            np.testing.assert_array_equal(into, want[sl], err_msg=f"{src} -> {dst}, n={n}")


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
@pytest.mark.parametrize("src", FLOATS)
def test_cast_rule_table(engine, src):
    # Every integer and bool target, alone (a plain cast) and converted back to float64
    # inside a fused kernel (where GCC turned (double)(signed char)x into trunc(x)).
    x = tt.vector("x", dtype=src)
    targets = INTS + ("bool",)
    casts = [tt.cast(x, d) for d in targets]
    back = [tt.cast(c, "float64") * tt.constant(1.0, dtype="float64") for c in casts]
    f = compile_on(engine, [x], casts + back)
    for k, dst in enumerate(targets):
        v = rule_values(src, dst)
        outs = f(v)
        want = np.array([rule(e, dst) for e in v], dtype=dst)
        got, got_back = outs[k], outs[len(targets) + k]
        np.testing.assert_array_equal(got, want, err_msg=f"{engine}: {src} -> {dst}")
        want_back = want.astype("float64")
        np.testing.assert_array_equal(got_back, want_back, err_msg=f"{engine}: {src} -> {dst}")
        assert not np.signbit(got_back[want_back == 0]).any(), f"{engine}: -0.0 from {dst}"


# -- issue 28, case 4: a cast inside a fused kernel ---------------------------------


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
def test_out_of_range_cast_to_uint8_inside_a_fused_kernel(engine):
    # -1.0 is out of uint8's range: 0 by the rule. The C kernels gave tanh(-1).
    x = tt.fvector("x")
    f = compile_on(engine, [x], [tt.tanh(tt.cast(x, "uint8")), tt.cast(x, "uint8")])
    for _ in range(2):  # the first call and the next ones
        fused, alone = f(np.array([-1.0, 300.0, 2.5], dtype="float32"))
        np.testing.assert_array_equal(alone, np.array([0, 0, 2], dtype="uint8"))
        np.testing.assert_allclose(fused, np.tanh(np.float32([0, 0, 2])), rtol=1e-6)


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
def test_cast_to_int_of_a_negative_fraction_has_no_sign(engine):
    # int8(-0.5) is 0, and 1 / 0 is +inf... x / 0 with x = -0.25 is -inf; the C kernels
    # kept the sign of -0.0 (GCC's trunc) and gave +inf.
    x, c = tt.dscalar("x"), tt.dvector("c")
    f = compile_on(engine, [x, c], x / tt.cast(c, "int8"))
    for _ in range(2):
        got = f(-0.25, np.array([-0.5, -0.0, -0.9]))
        np.testing.assert_array_equal(got, [-np.inf, -np.inf, -np.inf])


# -- issue 28, case 5: NaN and inf constants -------------------------------------------

#: Unary ops whose value on a NaN constant came out as garbage on PoCL (its library
#: computes them through a float-to-int conversion that LLVM folds to poison on NaN).
NAN_OPS = ("ceil", "floor", "round_half_to_even", "trunc", "exp", "exp2", "expm1", "tanh",
           "sinh", "gamma")  # fmt: skip


def _nonfinite_const(value, dtype):
    return tt.constant(np.asarray(value, dtype=dtype))


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_math_on_a_nan_constant_is_nan(engine, dtype):
    x = tt.vector("x", dtype=dtype)
    outs = [getattr(tt, name)(tt.fill(x, _nonfinite_const(np.nan, dtype))) for name in NAN_OPS]
    for name, out in zip(NAN_OPS, outs):
        # One function per op: the library function is then called with the NaN constant
        # alone in the program, which is when PoCL folded it.
        f = compile_on(engine, [x], out)
        for _ in range(2):
            got = f(np.zeros(5, dtype=dtype))
            assert got.dtype == np.dtype(dtype)
            assert np.isnan(got).all(), f"{engine}: {name}(NaN) = {got}"


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_issue_reproducers_on_nan_and_inf_constants(engine, dtype):
    x = tt.vector("x", dtype=dtype)
    nan, inf = _nonfinite_const(np.nan, dtype), _nonfinite_const(np.inf, dtype)
    cases = [
        (tt.ceil(tt.fill(x, nan)), np.nan),
        (tt.exp(tt.fill(x, nan)), np.nan),
        (tt.tanh(tt.fill(x, inf)), 1.0),
        (tt.exp(tt.fill(x, -inf)), 0.0),
        (tt.ceil(tt.fill(x, -inf)), -np.inf),
    ]
    for out, want in cases:
        f = compile_on(engine, [x], out)
        got = f(np.zeros(4, dtype=dtype))
        # tanh(inf): PoCL's float tanh gives 1 - 2**-24 for large arguments, 1 ulp from 1
        # (OpenCL allows 5): a precision, the same for an input, not a garbage value.
        np.testing.assert_allclose(got, np.full(4, want, dtype), rtol=2e-7, equal_nan=True)


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
def test_nan_constant_inside_a_fused_kernel(engine):
    # The constant inside a Composite (not an input of the Elemwise node): OpenCL gave 2 * x.
    x = tt.fvector("x")
    out = tt.ceil(tt.fill(x, _nonfinite_const(np.nan, "float32"))) + x
    f = compile_on(engine, [x], out)
    got = f(np.arange(6, dtype="float32"))
    assert np.isnan(got).all(), got


# -- a reduction's own conversion of its accumulator ------------------------------------


def _reduction_engines():
    engines = list(ENGINE_PARAMS)
    try:
        dask_backend.require()
        engines.append("dask")
    except ImportError:  # (an environment without dask)
        pass
    return engines


@pytest.mark.parametrize("engine", _reduction_engines())
def test_a_reduction_converts_its_float_accumulator_by_the_rule(engine):
    # A sum into an integer dtype accumulates in a float (float64 for a float32 input,
    # a float acc_dtype for uint64): its value out of the output's range is the minimum,
    # as a cast's. The reference engine and the CPU engine gave x86's low bits (301.5 as
    # int8: 45), OpenCL 2**63 for a uint64, the Dask engine x86's bits too.
    f32 = tt.fmatrix("f32")
    u64 = tt.matrix("u64", dtype="uint64")
    outs = [
        f32.sum(axis=1, dtype="int8"),
        (f32 * 2).prod(axis=0, dtype="uint8"),
        u64.sum(axis=1, acc_dtype="float64"),
        u64.sum(acc_dtype="float32"),
    ]
    if engine == "dask":
        mode = Mode(linker=DaskLinker(chunks=2, scheduler="sync"))
        f = theano_dag.function([f32, u64], outs, mode=mode)
    else:
        f = compile_on(engine, [f32, u64], outs)
    fv = np.array([[300.0, 1.5], [-2.5, np.nan], [100.0, 26.0], [-3.0, 0.5]], "float32")
    uv = np.array([[2**64 - 1, 2**63], [5, 7]], "uint64")
    for _ in range(2):
        got = f(fv, uv)
        sums = fv.astype("float64").sum(axis=1)
        np.testing.assert_array_equal(got[0], [rule(s, "int8") for s in sums])
        np.testing.assert_array_equal(got[0], [-128, -128, 126, -2])
        prods = (fv * 2).astype("float64").prod(axis=0)
        np.testing.assert_array_equal(got[1], [rule(p, "uint8") for p in prods])
        np.testing.assert_array_equal(got[2], [0, 12])
        assert got[3] == 0 and got[3].dtype == np.uint64
