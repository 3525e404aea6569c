"""Fused elementwise C kernels (theano_dag.engines.cpu.native.ckernel) against numpy.

Every kernel is compared with ``Elemwise.perform`` (numpy) on random values and on
NaN, +-inf, -0.0, denormals and integer extremes, through the contiguous, the
broadcast and the strided paths of the C driver.
"""

import ctypes
import gc
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import warnings
import weakref

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag import scalar as ts
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.engines.cpu import CPULinker
from theano_dag.engines.cpu.emit import csource as csource_module
from theano_dag.engines.cpu.emit.csource import NotCompilable, array_layout, kernel_source
from theano_dag.engines.cpu.native import cc, ckernel
from theano_dag.engines.cpu.native.ckernel import kernel_calls
from theano_dag.tensor.elemwise import Elemwise, Max, Sum
from theano_dag.tensor.fused import FusedReduce
from theano_dag.tensor.type import TensorType
from theano_dag.testing import fuzz

pytestmark = pytest.mark.skipif(
    cc.get_toolchain(config.cxx) is None or array_layout() is None,
    reason="no C compiler (config.cxx) or an unknown ndarray layout",
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N = 301  # not a multiple of any vector width: the loop epilogues run too


@pytest.fixture(scope="module")
def compiledir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("ckernels"))


def build(nodes, compiledir):
    """Kernels for ``nodes``, compiled together (one library, synchronously)."""
    lib = ckernel.kernel_library(compiledir=compiledir, mode="sync")
    kernels = [lib.add(n) for n in nodes]
    assert lib.wait(), lib.error
    assert all(k.ready for k in kernels)
    return kernels


def reference(node, inputs):
    cells = [[None] for _ in node.outputs]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        node.op.perform(node, inputs, cells)
    return [c[0] for c in cells]


def assert_same(got, want, rtol=None, atol=None):
    """Equal as numpy computes it: exact for ints and bools; for floats, a few ulps,
    NaN where NaN, and the sign of zeros and infinities."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    if rtol is None:
        rtol = 2e-6 if want.dtype == np.float32 else 1e-13
    if atol is None:
        atol = np.finfo(want.dtype).tiny
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    ok = np.isnan(want) | (np.signbit(got) == np.signbit(want))
    assert ok.all(), f"signs differ at {np.nonzero(~ok)[0][:5]}: {got[~ok][:5]} vs {want[~ok][:5]}"


def special_values(dtype, n, rng, shuffle):
    """Random values in [-3, 3] (in range for ints) led by the special cases."""
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        v = rng.integers(max(info.min, -1000), min(info.max, 1000), n, endpoint=True)
        v = v.astype(dtype)
        head = [info.min, info.max, 0, 1, 2, info.max - 1, info.min + 1]
        if info.min < 0:
            head += [-1, -2, info.min, -1]
    else:
        fi = np.finfo(dtype)
        v = rng.uniform(-3, 3, n).astype(dtype)
        head = [
            np.nan,
            np.inf,
            -np.inf,
            0.0,
            -0.0,
            fi.smallest_subnormal,
            -3 * fi.smallest_subnormal,
            fi.tiny / 4,
            fi.tiny,
            fi.max,
            -fi.max,
            1.0,
            -1.0,
            0.5,
            -0.5,
            2.5,
            -2.5,
            3.0,
            1e-30,
            -1e-30,
            709.0,
            -745.0,
            88.5,
            -104.0,
            0.75,
        ]
    head = np.array(head, dtype=dtype)
    if shuffle:
        rng.shuffle(head)
    v[: len(head)] = head
    return v


# -- every scalar op, all dtypes ---------------------------------------------------------

FLOAT_UNARY = [
    "exp",
    "exp2",
    "log",
    "log2",
    "log10",
    "log1p",
    "expm1",
    "sqrt",
    "reciprocal",
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
    "floor",
    "ceil",
    "trunc",
    "round_half_to_even",
    "round_half_away_from_zero",
    "isnan",
    "isinf",
]
ANY_UNARY = ["neg", "abs_", "sgn", "sqr", "identity"]
BINARY = [
    "add",
    "sub",
    "mul",
    "true_div",
    "int_div",
    "mod",
    "pow",
    "maximum",
    "minimum",
    "lt",
    "gt",
    "le",
    "ge",
    "eq",
    "neq",
]
BINARY_DTYPES = [("float32",) * 2, ("float64",) * 2, ("int32",) * 2, ("int64",) * 2,
                 ("int8",) * 2, ("uint64",) * 2, ("int8", "float32"), ("int64", "uint64"),
                 ("bool", "bool")]  # fmt: skip


def _op_cases():
    cases = []
    for name in FLOAT_UNARY:
        cases += [(name, (d,)) for d in ("float32", "float64")]
    for name in ("exp", "sqrt", "tanh", "floor", "isnan"):  # integers are upgraded first
        cases += [(name, (d,)) for d in ("int8", "int64", "uint8")]
    for name in ANY_UNARY:
        cases += [(name, (d,)) for d in ("float32", "float64", "int8", "int32", "int64", "uint8")]
    for name in BINARY:
        cases += [(name, d) for d in BINARY_DTYPES]
    cases += [("arctan2", (d, d)) for d in ("float32", "float64")]
    for name in ("and_", "or_", "xor"):
        cases += [(name, d) for d in (("int32",) * 2, ("bool",) * 2, ("uint8", "int64"))]
    cases += [("invert", (d,)) for d in ("int32", "int64", "bool", "uint16")]
    cases += [("clip", d) for d in (("float64",) * 3, ("float32",) * 3, ("int32",) * 3)]
    cases += [
        ("switch", d)
        for d in (("bool", "float64", "float32"), ("int32", "int8", "int64"), ("float64",) * 3)
    ]
    cases += [("fma", d) for d in (("float64",) * 3, ("float32",) * 3, ("int32",) * 3)]
    cases += [("second", ("float64", "int32")), ("second", ("int8", "float32"))]
    cases += [
        (f"cast:{o}", (i,))
        for i, o in (
            ("int32", "float32"),
            ("int64", "int8"),
            ("bool", "float64"),
            ("float64", "float32"),
            ("float32", "float64"),
            ("uint8", "int8"),
            ("int64", "uint16"),
            ("float64", "bool"),
            # The cast rule's minimum for NaN, inf and out of range (docs/engines.md).
            ("float64", "int32"),
            ("float32", "int64"),
            ("float64", "uint8"),
            ("float32", "int8"),
            ("float64", "uint64"),
            ("float32", "uint32"),
        )
    ]
    return cases


def _scalar_op(name):
    if name.startswith("cast:"):
        return ts.convert_to(name.split(":")[1])
    return getattr(ts, name)


def _op_node(case):
    name, dtypes = case
    xs = [TensorType(d, (False,))() for d in dtypes]
    try:
        return Elemwise(_scalar_op(name))(*xs).owner
    except TypeError:  # the op refuses these dtypes (e.g. bitwise ops on floats)
        return None


OP_CASES = [c for c in _op_cases() if _op_node(c) is not None]


@pytest.fixture(scope="module")
def op_kernels():
    # The user's compile cache: this library is the same from run to run, so only the
    # first run pays its compilation (a few seconds).
    nodes, kernels, skipped = [], {}, []
    for case in OP_CASES:
        node = _op_node(case)
        nodes.append((case, node))
    lib = ckernel.kernel_library(mode="sync")
    for case, node in nodes:
        try:
            kernels[case] = (node, lib.add(node))
        except NotCompilable:
            skipped.append(case)
    assert lib.wait(), lib.error
    return kernels, skipped


@pytest.mark.parametrize("case", OP_CASES, ids=[f"{n}-{'-'.join(d)}" for n, d in OP_CASES])
def test_op_matches_numpy(op_kernels, case):
    kernels, skipped = op_kernels
    if case in skipped:
        assert case[0] == "pow" and np.dtype(case[1][0]).kind in "biu"
        return
    node, k = kernels[case]
    rng = np.random.default_rng(abs(hash(case)) % 2**32)
    inputs = [special_values(d, N, rng, shuffle=j > 0) for j, d in enumerate(case[1])]
    (want,) = reference(node, inputs)
    assert_same(k(*inputs), want)


def test_integer_pow_runs_through_numpy(compiledir):
    x = tt.ivector("x")
    with pytest.raises(NotCompilable, match="pow on integers"):
        build([(x**x).owner], compiledir)


# -- composites -----------------------------------------------------------------------


def composite_node(fn, dtypes, types=None):
    """Elemwise(Composite(fn)) over tensors of ``dtypes`` (vectors unless ``types``)."""
    ss = [ts.get_scalar_type(d)(f"s{j}") for j, d in enumerate(dtypes)]
    outs = fn(*ss)
    outs = outs if isinstance(outs, list) else [outs]
    comp = ts.Composite(ss, outs)
    types = types or [TensorType(d, (False,)) for d in dtypes]
    return Elemwise(comp)(*[t() for t in types], return_list=True)[0].owner


def bench_expr(x):
    half = ts.as_scalar(np.asarray(0.5, dtype=x.type.dtype))
    return ts.exp(-x * x) * ts.sin(x) + half * x * x * x - ts.tanh(x)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_composite_with_special_values(compiledir, dtype):
    node = composite_node(bench_expr, [dtype])
    (k,) = build([node], compiledir)
    x = special_values(dtype, 5000, np.random.default_rng(1), shuffle=False)
    (want,) = reference(node, [x])
    # The terms cancel near 0: compare to a few ulps of 1 there.
    eps = np.finfo(dtype).eps
    assert_same(k(x), want, rtol=8 * eps, atol=8 * eps)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_equal_inputs_give_equal_outputs_at_every_place(compiledir, dtype):
    # The loop computes whole vectors with libmvec's exp, erf... and the elements left
    # over with narrower vectors or the scalar functions, an ulp apart for some arguments:
    # exp(1.0) was 2.7182818284590455 in the body and 2.718281828459045 in the last
    # elements, so an argsort of the values ordered their ties otherwise than numpy's
    # (the fuzzer, seed 202, graph 120). Such a kernel runs whole turns only, the leftover
    # padded. Every length, contiguous and broadcast (a bool row over the rows, whose byte
    # operand makes a turn 64 elements on AVX-512), from an unaligned start (a loop
    # peeled for alignment would compute its first elements apart), split over threads
    # (60,001 elements) and walked in blocks (a transposed operand).
    def fn(c, x):
        return ts.exp(ts.switch(c, ts.as_scalar(np.asarray(0, dtype)), x)) + ts.erf(x)

    node = composite_node(fn, ["bool", dtype], [TensorType("bool", (True, False)),
                                                 TensorType(dtype, (False, False))])  # fmt: skip
    (k,) = build([node], compiledir)
    shapes = [(1, 2), (1, 7), (1, 63), (1, 65), (1, 1000), (48, 3), (48, 129), (5, 64), (1, 60001)]
    for rows, cols in shapes:
        c = np.zeros((1, cols), bool)
        c[0, ::5] = True
        for v in (1.0, 0.3):
            unaligned = np.full((rows, cols + 1), v, dtype)[:, 1:]
            transposed = np.full((cols, rows), v, dtype).T
            for x in (np.full((rows, cols), v, dtype), unaligned, transposed):
                got = k(c, x)
                picked = got[np.broadcast_to(~c, got.shape)]
                assert np.unique(picked).size == 1, (rows, cols, np.unique(picked))
                assert_same(got, reference(node, [c, x])[0], rtol=8 * np.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_equal_inputs_equal_outputs_at_every_length(compiledir, dtype):
    # Kernels of one float type, whose turn is a vector of it (8 doubles, 16 floats on
    # AVX-512), and one that computes in double from floats: every length to 3 turns of
    # bytes, values where libmvec's and libm's functions differ.
    def one_type(x):
        return ts.exp(x) + ts.erf(x) * ts.tanh(x)

    def widened(x):
        return ts.log1p(ts.cast(x, "float64")) + ts.exp(x)

    values = np.array([1.0, 0.3, 0.7, 2.5, -1.75, 11.0], dtype)
    for fn in (one_type, widened):
        node = composite_node(fn, [dtype])
        (k,) = build([node], compiledir)
        for n in range(1, 3 * 64 + 2):
            for v in values:
                x = np.full(n, v, dtype)
                got = k(x)
                assert np.unique(got).size == 1, (fn.__name__, n, v, np.unique(got))
            x = np.resize(values, n)
            assert_same(k(x), reference(node, [x])[0], rtol=8 * np.finfo(dtype).eps)


def test_small_int_intermediates_wrap(compiledir):
    # int8: (x + y) wraps before it is compared and divided, as numpy's arrays do.
    def fn(x, y):
        s = x + y
        return [ts.lt(s, 0), s // 3, (s * s) % 7, -s]

    node = composite_node(fn, ["int8", "int8"])
    (k,) = build([node], compiledir)
    rng = np.random.default_rng(2)
    x = special_values("int8", N, rng, False)
    y = special_values("int8", N, rng, True)
    for got, want in zip(k(x, y), reference(node, [x, y])):
        assert_same(got, want)


def test_integer_overflow_wraps(compiledir):
    def fn(x, y, z):
        return [x * y + z, ts.abs_(x) - y, -x, ts.int_div(x, y), ts.mod(x, y)]

    for d in ("int32", "int64", "uint32"):
        node = composite_node(fn, [d, d, d])
        (k,) = build([node], compiledir)
        rng = np.random.default_rng(3)
        args = [special_values(d, N, rng, j > 0) for j in range(3)]
        for got, want in zip(k(*args), reference(node, args)):
            assert_same(got, want)


def test_nested_composite_and_input_outputs(compiledir):
    a = ts.float64("a")
    inner = ts.Composite([a], [ts.exp(a) + 1, a * 2])
    x = ts.float64("x")
    e, d = inner(x * 3)
    comp = ts.Composite([x], [e / d, x])
    node = Elemwise(comp)(tt.dvector())[0].owner
    (k,) = build([node], compiledir)
    v = special_values("float64", N, np.random.default_rng(4), False)
    for got, want in zip(k(v), reference(node, [v])):
        assert_same(got, want)


# -- every integer dtype x every integer op, in a chain, on wrapping values -------------

INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
# The scalar ops the C fuse compiles for integers (pow: numpy computes it), by arity.
INT_OPS = {
    1: ("neg", "abs_", "sgn", "invert", "sqr", "identity"),
    2: ("add", "sub", "mul", "int_div", "mod", "maximum", "minimum", "and_", "or_", "xor"),
    3: ("clip", "switch", "fma", "inopenrange", "inclosedrange"),
}
INT_OPS[2] += ("true_div", "second", "lt", "le", "gt", "ge", "eq", "neq")
# Mixed operands: each dtype with the next one (int8 + uint8 is int16 ...).
MIXED = ("add", "sub", "mul", "int_div", "mod", "maximum", "lt")


def _wrap_chain(op, cast_to=None):
    """``r = op(*xs)`` (or ``xs[0]`` cast to ``cast_to``), then what sees whether ``r``
    wrapped in its dtype: ``r // 7`` and ``r < mid`` (0; unsigned: half the range)."""

    def fn(*xs):
        r = ts.convert_to(cast_to)(xs[0]) if cast_to else getattr(ts, op)(*xs)
        d = r.type.dtype
        if d == "bool":
            return [r]
        if np.dtype(d).kind == "f":
            return [r, ts.lt(r * 2, 0)]
        mid = 0 if np.dtype(d).kind == "i" else np.iinfo(d).max // 2 + 1
        seven, mid = (ts.as_scalar(np.asarray(v, dtype=d)) for v in (7, mid))
        return [r, ts.int_div(r, seven), ts.lt(r, mid)]

    return fn


def _int_chain_cases():
    cases = []
    for d in INTS:
        for arity, names in INT_OPS.items():
            cases += [(name, (d,) * arity, None) for name in names]
        cases += [("cast", (d,), e) for e in INTS if e != d]
        e = INTS[(INTS.index(d) + 1) % len(INTS)]
        cases += [(name, (d, e), None) for name in MIXED]
    return cases


INT_CHAIN_CASES = _int_chain_cases()


@pytest.fixture(scope="module")
def int_chain_kernels():
    # One library for them all, in the user's compile cache (built once, then loaded).
    lib = ckernel.kernel_library(mode="sync")
    kernels = {}
    for case in INT_CHAIN_CASES:
        name, dtypes, cast_to = case
        node = composite_node(_wrap_chain(name, cast_to), list(dtypes))
        kernels[case] = (node, lib.add(node))
    assert lib.wait(), lib.error
    return kernels


@pytest.mark.parametrize("dtype", INTS)
def test_integer_chains_wrap_as_numpy_in_every_dtype(int_chain_kernels, dtype):
    # A fused chain computes each op in its own dtype (C promotes int8 * int8 to int,
    # so each must be cast back): its values, compared with numpy's, on integers where
    # sums and products wrap (int8 100, uint8 200, the extremes, 0 and -1 divisors).
    bad = []
    for case, (node, k) in int_chain_kernels.items():
        name, dtypes, cast_to = case
        if dtypes[0] != dtype:
            continue
        args = [
            fuzz.input_value(11 + j, (N,), d, False, values="wide") for j, d in enumerate(dtypes)
        ]
        args[0][:3] = [np.iinfo(dtype).min, np.iinfo(dtype).max, 0]
        if len(args) > 1:
            args[1][:3] = np.array([-1 if dtype[0] == "i" else 1, 0, 2]).astype(dtypes[1])
        outs = k(*args)
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        for j, (got, want) in enumerate(zip(outs, reference(node, args))):
            if got.dtype != want.dtype or not np.array_equal(got, want, equal_nan=True):
                bad.append(f"{name}{dtypes}->{cast_to} output {j}")
    assert not bad, bad
    assert len(int_chain_kernels) > 8 * 30


# -- broadcasting, strides, sizes -----------------------------------------------------


def _bcast_node(dtype):
    mat = TensorType(dtype, (False, False))
    row = TensorType(dtype, (True, False))
    col = TensorType(dtype, (False, True))
    sca = TensorType(dtype, (True, True))
    return composite_node(
        lambda x, r, c, s: x * r + c - s * ts.exp(r) / (1 + x * x),
        [dtype] * 4,
        [mat, row, col, sca],
    )


@pytest.fixture(scope="module")
def bcast_kernels(compiledir):
    nodes = {d: _bcast_node(d) for d in ("float32", "float64")}
    ks = build(list(nodes.values()), compiledir)
    return {d: (nodes[d], k) for d, k in zip(nodes, ks)}


SHAPES = [(5, 7), (0, 7), (5, 0), (1, 7), (5, 1), (1, 1), (300, 1001)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{a}x{b}" for a, b in SHAPES])
def test_broadcasting(bcast_kernels, dtype, shape):
    node, k = bcast_kernels[dtype]
    rng = np.random.default_rng(5)
    m, n = shape
    x = rng.standard_normal(shape).astype(dtype)
    r = rng.standard_normal((1, n)).astype(dtype)
    c = rng.standard_normal((m, 1)).astype(dtype)
    s = np.full((1, 1), 0.25, dtype=dtype)
    (want,) = reference(node, [x, r, c, s])
    eps = np.finfo(dtype).eps
    assert_same(k(x, r, c, s), want, rtol=8 * eps, atol=8 * eps)


@pytest.mark.parametrize("layout", ["transposed", "strided", "reversed", "out_strided"])
def test_non_contiguous_operands(bcast_kernels, layout):
    node, k = bcast_kernels["float64"]
    rng = np.random.default_rng(6)
    m, n = 301, 257
    big = rng.standard_normal((2 * m, 3 * n))
    x = {"transposed": np.asfortranarray(big[:m, :n]), "strided": big[::2, ::3],
         "reversed": big[:m, ::-3], "out_strided": big[:m, :n]}[layout]  # fmt: skip
    r = big[:1, ::-3][:, :n]
    c = big[1 : 2 * m : 2, 7:8]
    s = np.full((1, 1), -1.5)
    (want,) = reference(node, [x, r, c, s])
    if layout == "out_strided":
        out_base = np.zeros((m, 2 * n))
        out = out_base[:, ::2]
        assert k(x, r, c, s, out=out) is out
        assert_same(out, want, rtol=1e-12, atol=1e-14)
        assert not out_base[:, 1::2].any()  # the gaps are untouched
    else:
        assert_same(k(x, r, c, s), want, rtol=1e-12, atol=1e-14)


def test_strided_operands_run_in_the_step_librarys_loop(bcast_kernels):
    # The loop over operands that are not all contiguous is the step library's, which the
    # kernel library is given once both are loaded: the call returns no error code. Without
    # it (the step library not loaded yet, or failed), the call refuses those operands
    # (error kind 6, nothing written) and the kernel's numpy runs them.
    node, k = bcast_kernels["float64"]
    lib = k.library
    assert lib.steps.lib is not None and lib.steps.general
    rng = np.random.default_rng(8)
    x = np.asfortranarray(rng.standard_normal((31, 17)))
    r, c, s = rng.standard_normal((1, 17)), rng.standard_normal((31, 1)), np.full((1, 1), 0.5)
    (want,) = reference(node, [x, r, c, s])
    out = np.full((31, 17), np.nan)
    assert k.c(x, r, c, s, out) == 0
    assert_same(out, want, rtol=1e-12, atol=1e-14)
    lib._lib.td_set_general(None)
    try:
        out[:] = np.nan
        assert k.c(x, r, c, s, out) == 6 << 16
        assert np.isnan(out).all()
        assert_same(k(x, r, c, s), want, rtol=1e-12, atol=1e-14)
        # Operands all contiguous and of the output's shape need no strided loop.
        full = [np.ascontiguousarray(np.broadcast_to(a, x.shape)) for a in (x, r, c, s)]
        assert k.c(*full, out) == 0
        assert_same(out, reference(node, full)[0], rtol=1e-12, atol=1e-14)
    finally:
        lib._lib.td_set_general(ctypes.c_void_p(lib.steps.general))
    assert k.c(x, r, c, s, out) == 0


def test_a_call_refused_before_the_step_library_loaded_is_finished_by_fail(bcast_kernels):
    # On a cold cache the step library loads in a background thread: a call on strided
    # operands may be refused (kind 6) just before the kernel library is given the strided
    # loop, and ``fail``'s repeat of the call then succeeds. That is the result, not an
    # error: the repeat wrote the output (it once raised "input 0 ... does not broadcast").
    node, k = bcast_kernels["float64"]
    lib = k.library
    rng = np.random.default_rng(9)
    x = np.asfortranarray(rng.standard_normal((31, 17)))
    r, c, s = rng.standard_normal((1, 17)), rng.standard_normal((31, 1)), np.full((1, 1), 0.5)
    (want,) = reference(node, [x, r, c, s])
    out = np.full((31, 17), np.nan)
    lib._lib.td_set_general(None)
    try:
        assert k.c(x, r, c, s, out) == 6 << 16  # refused, nothing written
        assert np.isnan(out).all()
    finally:
        lib._lib.td_set_general(ctypes.c_void_p(lib.steps.general))  # loaded meanwhile
    assert k.fail(x, r, c, s, out) is None
    assert_same(out, want, rtol=1e-12, atol=1e-14)


def test_scalar_kernels_take_numpy_scalars(compiledir):
    d0 = TensorType("float64", ())
    node = composite_node(lambda a, b: ts.exp(a) * b, ["float64", "float64"], [d0, d0])
    (k,) = build([node], compiledir)
    got = k(np.float64(1.0), np.array(2.0))  # a numpy scalar is not an ndarray
    assert got.shape == () and got == np.exp(1.0) * 2


def test_bad_shapes_raise_like_elemwise(bcast_kernels):
    node, k = bcast_kernels["float64"]
    x, c, s = np.ones((4, 5)), np.ones((4, 1)), np.ones((1, 1))
    with pytest.raises(ValueError, match="do not match|does not broadcast"):
        k(x, np.ones((1, 6)), c, s, out=np.empty((4, 5)))
    vec = composite_node(lambda a, b: a + b, ["float64"] * 2)
    (kv,) = build([vec], os.path.dirname(os.path.dirname(k.library.path)))
    with pytest.raises(ValueError, match="not declared broadcastable"):
        kv(np.ones(3), np.ones(1))
    with pytest.raises(TypeError, match="must have dtype float64, got float32"):
        kv(np.ones(3, "float32"), np.ones(3))
    with pytest.raises(TypeError, match="takes 2 arrays"):
        kv(np.ones(3))


def test_inplace_pattern_writes_over_its_input(compiledir):
    x = tt.dvector()
    comp = ts.Composite([s := ts.float64("s")], [ts.exp(s) - 1])
    node = Elemwise(comp, {0: 0})(x).owner
    (k,) = build([node], compiledir)
    v = np.linspace(-1, 1, N)
    want = np.expm1(v)
    got = k(v)
    assert got is v
    assert_same(got, want, rtol=1e-12)


# -- source, cache, compiler runs -----------------------------------------------------


def test_kernel_source_snapshot():
    node = composite_node(lambda a, b: a * b + 1, ["float32", "float32"])
    src = kernel_source("k0", node, [0, 1], {})
    assert src == textwrap.dedent("""
        static __attribute__((noinline)) void k0_body(ptrdiff_t n, const float *restrict a0, \
const float *restrict a1, float *restrict o0)
        {
            #pragma omp simd
            for (ptrdiff_t i = 0; i < n; i++) {
                const float x0 = a0[i];
                const float x1 = a1[i];
                float t0 = (x0 * x1);
                float t1 = (t0 + ((float)(1)));
                o0[i] = t1;
            }
        }

        static void k0_fn(char **p, ptrdiff_t n)
        {
            k0_body(n, (const float *)p[0], (const float *)p[1], (float *)p[2]);
        }

        int k0_v(void **arrs)
        {
            static const int codes[3] = {9, 9, 9};
            static const unsigned long long bcast[2] = {0x0ULL, 0x0ULL};
            return td_run(2, 1, arrs, codes, bcast, 1, k0_fn, 524288);
        }

        int k0(void *a0, void *a1, void *o0)
        {
            void *arrs[3] = {a0, a1, o0};
            return k0_v(arrs);
        }
        """)


def test_equal_fused_nodes_share_their_c(monkeypatch):
    # Equal composites (made apart, as fusion makes them) share one C function in a
    # library, and a later library of the process takes that C without making it
    # again; a composite that differs in a constant's dtype alone, or a change of what
    # else kernel_source reads (the threads' threshold), gets C of its own.
    def node(const_dtype="float64", bcast=(False,)):
        s = ts.float64("s")
        c = ts.as_scalar(np.asarray(2.0, dtype=const_dtype))
        comp = ts.Composite([s], [ts.exp(s) * c + s])
        return Elemwise(comp)(TensorType("float64", bcast)()).owner

    made = []
    real = ckernel.kernel_source
    monkeypatch.setattr(ckernel, "kernel_source", lambda *a: made.append(a) or real(*a))
    monkeypatch.setattr(ckernel, "_TEMPLATES", {})
    lib = ckernel.KernelLibrary()
    a, b = lib.add(node()), lib.add(node())
    assert a.node.op is not b.node.op and (a.name, b.name) == ("k0", "k0")
    assert a.template is b.template and len(made) == 1
    c, d = lib.add(node("float32")), lib.add(node(bcast=(True,)))
    assert (c.name, d.name) == ("k1", "k2") and len(made) == 3
    lib2 = ckernel.KernelLibrary()
    e = lib2.add(node())
    assert e.template is a.template and e.name == "k0" and len(made) == 3
    monkeypatch.setattr(csource_module, "PARALLEL_WORK", 1 << 12)
    f = ckernel.KernelLibrary().add(node())
    assert len(made) == 4 and f.template != a.template
    assert f.template == real("@K@", f.node, f.arg_pos, {})


def test_nodes_of_one_op_and_types_share_their_kernel_kind(monkeypatch):
    # Nodes of one op on the same types (a function's many plain nodes) take the first
    # one's C, dtypes and layout without making them again; the same op on another
    # dtype or broadcast pattern, or with a compiled-in constant, gets its own.
    made = []
    real = ckernel.kernel_source
    monkeypatch.setattr(ckernel, "kernel_source", lambda *a: made.append(a) or real(*a))
    monkeypatch.setattr(ckernel, "_TEMPLATES", {})
    vec, fvec, row = (
        TensorType("float64", (False,)),
        TensorType("float32", (False,)),
        TensorType("float64", (True, False)),
    )
    op = Elemwise(ts.Composite([a := ts.float64("a")], [ts.exp(a) * a]))
    lib = ckernel.KernelLibrary()
    k0, k1 = lib.add(op.make_node(vec())), lib.add(op.make_node(vec()))
    assert k0.node is not k1.node and k1.template is k0.template and len(made) == 1
    assert (k1.name, k1.nin, k1.nout, k1.ndim) == ("k0", 1, 1, 1)
    assert k1.in_dtypes == k1.out_dtypes == [np.dtype("float64")] and not k1.consts
    k2, k3 = lib.add(op.make_node(fvec())), lib.add(op.make_node(row()))
    assert (k2.name, k3.name) == ("k1", "k2") and len(made) == 3
    assert k2.in_dtypes == [np.dtype("float32")] and k3.ndim == 2
    add = Elemwise(ts.add)
    k4 = lib.add(add.make_node(vec(), tt.constant(np.full(1, 2.0))))
    k5 = lib.add(add.make_node(vec(), vec()))
    assert k4.name != k5.name and list(k4.consts) == [1] and k4.nin == 1 and k5.nin == 2
    x = np.linspace(-1, 1, 5)
    np.testing.assert_allclose(k1(x), np.exp(x) * x, rtol=1e-14)
    np.testing.assert_allclose(k4(x), x + 2, rtol=1e-14)


def test_second_build_hits_the_cache(tmp_path, no_kernel_builds_in_flight, step_library_loaded):
    # (The step library this process loaded serves the new cache too: its kernels alone.)
    node = composite_node(lambda a: ts.cos(a) * 3, ["float64"])
    before = dict(cc.stats)
    (k,) = build([node], str(tmp_path))
    assert cc.stats["compiles"] == before["compiles"] + 1
    assert k.library.steps is step_library_loaded
    (k,) = build([node], str(tmp_path))
    assert cc.stats["compiles"] == before["compiles"] + 1  # no compiler run
    assert cc.stats["cache_hits"] == before["cache_hits"] + 1
    assert_same(k(np.arange(5.0)), np.cos(np.arange(5.0)) * 3, rtol=1e-13)
    names = [n for n in os.listdir(os.path.join(str(tmp_path), "kernels")) if n != ".sized"]
    # No temporaries: the source, the library, its checksum and the compile lock (and
    # the folder bound's marker, misc.cache_eviction).
    assert sorted(n.split(".", 1)[1] for n in names) == ["c", "lock", "so", "so.sum"]


def test_vector_math_comes_from_libmvec(compiledir):
    tc = cc.get_toolchain(config.cxx)
    if "exp" not in tc.simd or shutil.which("objdump") is None:
        pytest.skip("no libmvec or no objdump here")
    (k,) = build([composite_node(lambda a: ts.exp(a) * ts.sin(a), ["float32"])], compiledir)
    dis = subprocess.run(["objdump", "-d", k.library.path], capture_output=True, text=True)
    assert "_ZGV" in dis.stdout and "v_expf" in dis.stdout


CONCURRENT = """
import sys
sys.path.insert(0, {root!r})
from theano_dag.engines.cpu.native import cc
from theano_dag.config import config
tc = cc.get_toolchain(config.cxx)
src = "int answer(void) {{ return 42; }}\\n" + "/* padding */\\n" * 20000
path = cc.compile_library(tc, src, {directory!r})
import ctypes
print(ctypes.CDLL(path).answer(), cc.stats["compiles"])
"""


def test_concurrent_processes_compile_the_same_source(tmp_path):
    script = CONCURRENT.format(root=ROOT, directory=str(tmp_path))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err
        assert out.split()[0] == "42"
    files = sorted(n for n in os.listdir(tmp_path) if n != ".sized")  # (the bound's marker)
    assert sorted(f.split(".", 1)[1] for f in files) == ["c", "lock", "so", "so.sum"]
    assert sum(int(out.split()[1]) for out, _ in results) == 1  # the lock: one compile


class _Owner:
    """What a build's callback belongs to (a function's kernel library, in the engine)."""


@pytest.fixture
def compiler_busy(monkeypatch):
    """One compiler slot, taken: the background builds started in the test wait for it
    until the test calls the fixture's value, which frees it."""
    slots = threading.BoundedSemaphore(1)
    monkeypatch.setattr(cc, "_SLOTS", slots)
    slots.acquire()
    freed = []

    def free():
        freed.append(True)
        slots.release()

    yield free
    if not freed:
        slots.release()


def test_a_background_build_whose_owners_all_died_is_not_run(tmp_path, compiler_busy):
    # A program making functions faster than the compiler builds them queued the builds
    # of every function it dropped ahead of those of the ones it keeps.
    tc = cc.get_toolchain(config.cxx)
    d = str(tmp_path)
    ended = []
    kept, dropped, shared = _Owner(), _Owner(), _Owner()
    b_dropped = cc.Build.start(tc, "int f1(void) { return 1; }\n", d, True, ended.append, dropped)
    b_kept = cc.Build.start(tc, "int f2(void) { return 2; }\n", d, True, ended.append, kept)
    b_plain = cc.Build.start(tc, "int f3(void) { return 3; }\n", d, True, ended.append)
    b_shared = cc.Build.start(tc, "int f4(void) { return 4; }\n", d, True, ended.append, shared)
    assert cc.Build.start(tc, "int f4(void) { return 4; }\n", d, True, ended.append, kept) is (
        b_shared
    )
    cancelled = cc.stats["cancelled"]
    del dropped, shared  # b_shared still has an owner: kept
    compiler_busy()
    for b in (b_dropped, b_kept, b_plain, b_shared):
        assert b.wait(600)
    assert isinstance(b_dropped.error, cc.BuildCancelled) and b_dropped.path is None
    assert cc.stats["cancelled"] == cancelled + 1
    for b, answer in ((b_kept, 2), (b_plain, 3), (b_shared, 4)):
        assert b.error is None
        assert getattr(ctypes.CDLL(b.path), f"f{answer}")() == answer
    assert len(ended) == 5  # every callback, the cancelled build's too
    assert len([n for n in os.listdir(d) if n.endswith(".so")]) == 3
    assert not any(b in cc._BUILDS.values() for b in (b_dropped, b_kept, b_plain, b_shared))


def test_a_function_dropped_while_its_kernels_wait_for_the_compiler_is_freed(
    tmp_path, step_library_loaded, compiler_busy
):
    node = composite_node(lambda a: ts.sin(a) * 7 - a, ["float64"])
    lib = ckernel.kernel_library(compiledir=str(tmp_path), mode="background")
    lib.add(node)
    lib.start()
    build, alive = lib.build, weakref.ref(lib)
    assert build is not None and not build.done.is_set()
    del lib
    gc.collect()
    assert alive() is None  # the queued build does not hold it
    compiler_busy()
    assert build.wait(600)
    assert isinstance(build.error, cc.BuildCancelled)


# -- through the CPU engine -----------------------------------------------------------


@pytest.fixture
def engine_kernels():
    """The engine with C kernels registered (as it is once the engine registers them)."""
    already = bool(ckernel._REGISTERED)
    ckernel.register()
    yield
    if not already:
        ckernel.unregister()


def _fn(inputs, outputs):
    return function(inputs, outputs, mode=Mode(linker=CPULinker(), optimizer=None))


def test_function_compiles_all_kernels_in_one_call(
    engine_kernels, tmp_path, no_kernel_builds_in_flight, step_library_loaded
):
    x, y = tt.dvector("x"), tt.dmatrix("y")
    z1 = Elemwise(ts.Composite([a := ts.float64("a")], [ts.exp(a) * a]))(x)
    z2 = Elemwise(ts.Composite([b := ts.float64("b"), c := ts.float64("c")], [ts.tanh(b) - c * c]))(
        z1, y
    )
    before = cc.stats["compiles"]
    with config.change_flags(compiledir=str(tmp_path)), ckernel.compile_mode("sync"):
        f = _fn([x, y], [z2, z1 + 1])
        xv, yv = np.linspace(-2, 2, 50), np.random.default_rng(7).standard_normal((40, 50))
        r = f(xv, yv)
    assert cc.stats["compiles"] == before + 1  # (the step library is the process's)
    assert ckernel.wait_for_kernels(f)
    assert f.fn.program.ckernels.compile_seconds > 0
    src = ckernel.c_code(f)
    assert "int k0(" in src and "int k1(" in src
    # z1 + 1, a plain op, joins the function's kernels (inside a segment it costs less
    # than numpy's call).
    assert sorted(k.name for k in kernel_calls(f)) == ["k0", "k1", "k2"]
    e = np.exp(xv) * xv
    np.testing.assert_allclose(r[0], np.tanh(e) - yv * yv, rtol=1e-12)
    np.testing.assert_allclose(r[1], e + 1, rtol=1e-12)


def test_plain_ops_share_c_by_op_types_and_constants(engine_kernels, tmp_path):
    # Plain ops joining the function's kernels: equal ops on equal types with equal
    # compiled-in constants share one C function; another constant, dtype or static
    # shape gets its own.
    x, y = tt.dvector("x"), tt.dvector("y")
    xf, r = tt.fvector("xf"), tt.drow("r")
    z = Elemwise(ts.Composite([a := ts.float64("a")], [ts.exp(a) * a]))(x)

    def c(v, dtype="float64", ndim=1):  # a size-1 constant, compiled into the kernel
        return tt.constant(np.full((1,) * ndim, v, dtype=dtype))

    outs = [z * c(2), y * c(2), x * c(3), xf * c(2, "float32"), r * c(2, ndim=2), (z + y) + (x + y)]
    with config.change_flags(compiledir=str(tmp_path)), ckernel.compile_mode("sync"):
        f = _fn([x, y, xf, r], outs)
        xv, yv = np.linspace(-2, 2, 9), np.random.default_rng(3).standard_normal(9)
        xfv, rv = xv.astype("float32"), yv[None, :]
        got = f(xv, yv, xfv, rv)
    assert ckernel.wait_for_kernels(f)
    kernels = f.fn.program.ckernels.kernels
    assert len(kernels) == 9

    def names(sop, dtype, bcast, const=None):
        return {
            k.name
            for k in kernels
            if k.node.op.scalar_op == sop
            and k.node.outputs[0].type == TensorType(dtype, bcast)
            and [c.item() for c in k.consts.values()] == ([] if const is None else [const])
        }

    times2, times3 = (
        names(ts.mul, "float64", (False,), 2.0),
        names(ts.mul, "float64", (False,), 3.0),
    )
    assert len(times2) == 1  # z * 2 and y * 2: one function
    others = [
        times3,
        names(ts.mul, "float32", (False,), 2.0),
        names(ts.mul, "float64", (True, False), 2.0),
    ]
    assert all(len(n) == 1 for n in others) and len(set.union(times2, *others)) == 4
    assert len(names(ts.add, "float64", (False,))) == 1  # the three additions
    assert len({k.template for k in kernels}) == len({k.name for k in kernels}) == 6
    e = np.exp(xv) * xv
    want = [e * 2, yv * 2, xv * 3, xfv * np.float32(2), rv * 2, (e + yv) + (xv + yv)]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6 if w.dtype == np.float32 else 1e-13)


def test_plain_op_c_follows_dtypes_broadcast_patterns_constants_and_props(tmp_path):
    # A plain op's C is looked up by the op, its operands' dtypes and broadcast
    # patterns and its compiled-in constants: a static length alone changes nothing in
    # the C (shared), any of the others does (C of its own), and every kernel computes
    # its own node's values.
    m, m2, r, c = tt.dmatrix("m"), tt.dmatrix("m2"), tt.drow("r"), tt.dcol("c")
    s = TensorType("float64", shape=(3, None))("s")  # m's broadcast pattern, a static length
    mf = tt.fmatrix("mf")

    def k(v, dtype):  # a size-1 constant, compiled into the kernel
        return tt.constant(np.full((1, 1), v, dtype=dtype))

    cases = {
        "m+r": ((m + r).owner, ["m", "r"]),
        "s+r": ((s + r).owner, ["s", "r"]),  # shares m+r's C
        "m+c": ((m + c).owner, ["m", "c"]),  # another broadcast pattern
        "m+m2": ((m + m2).owner, ["m", "m2"]),
        "mf+mf": ((mf + mf).owner, ["mf", "mf"]),  # another dtype
        "m*2f64": ((m * k(2, "float64")).owner, ["m"]),
        "m*2f32": ((m * k(2, "float32")).owner, ["m"]),  # the constant's dtype
        "m*3f64": ((m * k(3, "float64")).owner, ["m"]),  # its value
        "m->f32": (tt.cast(m, "float32").owner, ["m"]),  # the op's prop (output dtype)
        "m->i32": (tt.cast(m, "int32").owner, ["m"]),
    }
    lib = ckernel.kernel_library(compiledir=str(tmp_path), mode="sync")
    kernels = {name: lib.add(node) for name, (node, _) in cases.items()}
    assert lib.wait(), lib.error
    names = {name: kern.name for name, kern in kernels.items()}
    assert names["m+r"] == names["s+r"]
    assert len(set(names.values())) == len(cases) - 1
    rng = np.random.default_rng(11)
    values = {
        "m": rng.standard_normal((3, 5)) * 4,
        "m2": rng.standard_normal((3, 5)),
        "r": rng.standard_normal((1, 5)),
        "c": rng.standard_normal((3, 1)),
        "s": rng.standard_normal((3, 5)),
        "mf": rng.standard_normal((3, 5)).astype("float32"),
    }
    for name, (node, args) in cases.items():
        kern = kernels[name]
        assert kern.ready
        ins = [values[a] for a in args]
        got = kern(*ins)
        (want,) = reference(
            node, [values[a] for a in args] + [v.data for v in node.inputs[len(args) :]]
        )
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_background_build_runs_numpy_first(engine_kernels, tmp_path):
    x = tt.fvector("x")
    z = Elemwise(ts.Composite([a := ts.float32("a")], [ts.sigmoid(a) * 3 - a]))(x)
    with config.change_flags(compiledir=str(tmp_path)), ckernel.compile_mode("background"):
        f = _fn([x], z)
        xv = special_values("float32", N, np.random.default_rng(8), False)
        first = f(xv)  # numpy, or C if the build already ended
        assert ckernel.wait_for_kernels(f, timeout=120)
        lib = f.fn.program.ckernels
        assert all(k.ready for k in lib.kernels)
        assert_same(f(xv), first, rtol=1e-6, atol=1e-6)


def test_no_compiler_runs_numpy(engine_kernels):
    x = tt.dvector("x")
    z = Elemwise(ts.Composite([a := ts.float64("a")], [ts.exp(a) + a]))(x)
    with config.change_flags(cxx=""):
        assert ckernel.kernel_library() is None
        f = _fn([x], z)
        np.testing.assert_allclose(f(np.arange(4.0)), np.exp(np.arange(4.0)) + np.arange(4.0))
    assert ckernel.c_code(f) == ""
    assert not ckernel.wait_for_kernels(f)
    assert "_K0" not in f.fn.source()


def test_numpy_fallbacks_while_the_library_builds(engine_kernels, monkeypatch):
    # A build that never ends: the first call runs Elemwise.perform, later calls the
    # engine's numpy steps, compiled for all kernels at once.
    def never(self):
        self.started = True

    monkeypatch.setattr(ckernel.KernelLibrary, "start", never)
    x, y = tt.dmatrix("x"), tt.drow("y")
    a, b = ts.float64("a"), ts.float64("b")
    z = Elemwise(ts.Composite([a, b], [ts.exp(a) * b - a]))(x, y)
    f = _fn([x, y], [z, z * 2])
    xv = np.random.default_rng(9).standard_normal((300, 70))
    yv = np.random.default_rng(10).standard_normal((1, 70))
    want = np.exp(xv) * yv - xv
    # The fused node's kernel, and z * 2's: a plain op joins the function's kernels.
    k, k2 = f.fn.program.ckernels.kernels
    assert k2.node.op.scalar_op == ts.mul
    for call in range(3):
        r = f(xv, yv)
        np.testing.assert_allclose(r[0], want, rtol=1e-13)
        np.testing.assert_allclose(r[1], 2 * want, rtol=1e-13)
        assert not k.ready
        if call >= 1:
            assert k.fallback.__name__ == "fb0"  # the compiled numpy steps
            # z * 2's too: the plain op's numpy steps, made when first needed
            assert k2.fallback.__name__ == "fb1"
    assert not ckernel.wait_for_kernels(f, timeout=0)


def test_numpy_fallbacks_refuse_a_length_1_the_type_does_not_declare_broadcastable(
    engine_kernels, monkeypatch
):
    # Lengths known only at run time (after a data-dependent index) are checked by the
    # kernel; while its library builds, numpy's fallback broadcast a length 1 anyway.
    def never(self):
        self.started = True

    monkeypatch.setattr(ckernel.KernelLibrary, "start", never)
    x, y = tt.dvector("x"), tt.dvector("y")
    a, b = x[tt.nonzero(x > 0.5)[0]], y[tt.nonzero(y > 0.5)[0]]
    f = _fn([x, y], [tt.exp(a) * b + tt.sin(a), a, b])
    xv, one = np.array([0.9, 0.1, 0.7, 0.8]), np.array([0.9, 0.1, 0.1, 0.1])
    np.testing.assert_allclose(
        f(xv, xv)[0], np.exp(xv[xv > 0.5]) * xv[xv > 0.5] + np.sin(xv[xv > 0.5])
    )
    for _ in range(2):  # Elemwise.perform, then the engine's numpy steps
        with pytest.raises(
            ValueError, match="has length 1 there but is not declared broadcastable"
        ):
            f(xv, one)
    assert not ckernel.wait_for_kernels(f, timeout=0)


@pytest.mark.parametrize("addend_first", [False, True])
def test_numpy_fallback_of_a_kernel_planned_over_its_input(
    engine_kernels, monkeypatch, addend_first
):
    # The plan puts fma's output over exp(x), which dies there: the C kernel may, and
    # the numpy fallback (x * y into the output, then + z) must not read z after that.
    # It did, from the second call on while the library built: 4 * x * y, not
    # 2 * (x * y + exp(x)) (PyMC3's Dirichlet gradient through its stick-breaking
    # transform, silently wrong until the kernels were compiled).
    def never(self):
        self.started = True

    monkeypatch.setattr(ckernel.KernelLibrary, "start", never)
    x, y = tt.dvector("x"), tt.dvector("y")
    a, b, c = ts.float64("a"), ts.float64("b"), ts.float64("c")
    fma = ts.fma(c, a, b) if addend_first else ts.fma(a, b, c)
    z = Elemwise(ts.Composite([a, b, c], [fma]))(x, y, tt.exp(x))
    f = function([x, y], z * 2, mode=Mode(linker=CPULinker(min_plan_bytes=0), optimizer=None))
    xv, yv = np.linspace(-1, 1, 5), np.linspace(2, 3, 5)
    want = 2 * (np.exp(xv) * xv + yv) if addend_first else 2 * (xv * yv + np.exp(xv))
    (k,) = [k for k in f.fn.program.ckernels.kernels if k.node.op == z.owner.op]
    for _call in range(3):  # the first runs perform, the later ones the numpy steps
        np.testing.assert_allclose(f(xv, yv), want, rtol=1e-15)
        assert not k.ready
    assert k.fallback.__name__.startswith("fb")  # the compiled numpy steps ran


def test_openmp_workers_sleep_between_kernels_unless_the_user_chose():
    # Spinning OpenMP workers starve the BLAS threads of the next Dot/Gemm on machines
    # with few cores; a user's own OMP_WAIT_POLICY is left alone.
    code = "import os, theano_dag.engines.cpu.native.ckernel; print(os.environ['OMP_WAIT_POLICY'])"
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "PASSIVE"
    env["OMP_WAIT_POLICY"] = "ACTIVE"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "ACTIVE"


# -- FusedReduce: the elementwise part in C --------------------------------------------


def _fused_reduce_graph(dtype):
    """Reductions of a gradient's elementwise expressions (a ``switch`` on an int8 mask,
    a ``second``), as the fusion makes them, over declared and run-time broadcasting."""
    x = tt.TensorType(dtype, shape=(None, None))("x")
    m = tt.TensorType("int8", shape=(1, None))("m")
    a, c = ts.get_scalar_type(dtype)("a"), ts.int8("c")
    half = np.asarray(0.5, dtype)
    sw = ts.Composite([a, c], [ts.switch(c, a * half, ts.second(a, np.asarray(0.0, dtype)))])
    sq = ts.Composite([a, c], [ts.switch(c, ts.sqr(a), -a)])
    outs = [
        FusedReduce(Sum(axis=(0,)), sw)(x, m),
        FusedReduce(Sum(axis=None), sq)(x, m),
        FusedReduce(Max(axis=(1,)), sq)(x, m),
        # x[:1] has run-time length 1 along axis 0 without declaring it: FusedReduce
        # broadcasts it as numpy does (its perform), the kernel too.
        FusedReduce(Sum(axis=(1,)), sw)(x[:1], m),
    ]
    return [x, m], outs


def _fused_reduce_values(dtype):
    rng = np.random.default_rng(11)
    xv = rng.uniform(-3, 3, (30, 41)).astype(dtype)
    xv[0, :3] = [np.nan, np.inf, -0.0]
    mv = (rng.random((1, 41)) < 0.5).astype("int8")
    return xv, mv


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("min_plan_bytes", [0, None])
@pytest.mark.parametrize("poisoned", [False, True])
def test_fused_reduce_elementwise_part_is_a_c_kernel(
    engine_kernels, tmp_path, dtype, min_plan_bytes, poisoned
):
    inputs, outs = _fused_reduce_graph(dtype)
    xv, mv = _fused_reduce_values(dtype)
    ref = function(inputs, outs, mode=Mode(linker="py", optimizer=None))
    kw = {"poison": poisoned}
    if min_plan_bytes is not None:
        kw["min_plan_bytes"] = min_plan_bytes
    with config.change_flags(compiledir=str(tmp_path)), ckernel.compile_mode("sync"):
        f = function(inputs, outs, mode=Mode(linker=CPULinker(**kw), optimizer=None))
        got = f(xv, mv)
    assert ckernel.wait_for_kernels(f)
    lib = f.fn.program.ckernels
    # One kernel per FusedReduce: its node is the equivalent Elemwise of the scalar op;
    # the float64 sums (over all axes, the leading or the trailing ones) are kernels too,
    # and the max over the last axis (of either dtype).
    elem = [k for k in lib.kernels if not isinstance(k, ckernel.SumKernel)]
    sums = [k for k in lib.kernels if isinstance(k, ckernel.SumKernel)]
    assert len(elem) == 4 and len(sums) == (4 if dtype == "float64" else 1)
    assert all(isinstance(k.node.op, Elemwise) and k.ready for k in elem)
    assert {k.node.op.scalar_op for k in elem} == {o.owner.op.scalar_op for o in outs}
    assert all(k.ready for k in sums)
    assert sorted(type(k.node.op.reduce_op).__name__ for k in sums) == ["Max"] + ["Sum"] * (
        len(sums) - 1
    )
    steps = [st for _k, st in f.fn.current.steps if type(st.node.op) is FusedReduce]
    assert len(steps) == 8  # each: the kernel into a scratch value, then the reduction
    src = f.fn.source()
    assert len(kernel_calls(f)) == 4 + len(sums) and "_S(" not in src
    for _ in range(2):  # the second call reuses what the first one planned
        for g, w in zip(f(xv, mv), ref(xv, mv)):
            assert_same(g, w, rtol=1e-5 if dtype == "float32" else 1e-12)
    for g, w in zip(got, ref(xv, mv)):
        assert_same(g, w, rtol=1e-5 if dtype == "float32" else 1e-12)


def test_fused_reduce_without_a_compiler_runs_numpy(engine_kernels):
    inputs, outs = _fused_reduce_graph("float64")
    xv, mv = _fused_reduce_values("float64")
    ref = function(inputs, outs, mode=Mode(linker="py", optimizer=None))
    with config.change_flags(cxx=""):
        f = function(inputs, outs, mode=Mode(linker=CPULinker(min_plan_bytes=0), optimizer=None))
        got = f(xv, mv)
    assert "_K" not in f.fn.source() and "_S(" in f.fn.source()
    for g, w in zip(got, ref(xv, mv)):
        assert_same(g, w, rtol=1e-12)


def test_fused_reduce_kernel_refuses_shapes_that_do_not_broadcast(engine_kernels, tmp_path):
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    r = FusedReduce(Sum(axis=(0,)), ts.add)(x, y)
    with config.change_flags(compiledir=str(tmp_path)), ckernel.compile_mode("sync"):
        f = function([x, y], r, mode=Mode(linker=CPULinker(min_plan_bytes=0), optimizer=None))
        assert ckernel.wait_for_kernels(f)
    with pytest.raises(ValueError):
        f(np.ones((3, 4)), np.ones((2, 4)))
    # a length 1 not declared broadcastable is refused too, as Elemwise refuses it
    with pytest.raises(ValueError, match="not declared broadcastable"):
        f(np.ones((3, 4)), np.ones((1, 4)))
    np.testing.assert_array_equal(f(np.ones((3, 4)), np.full((3, 4), 2.0)), np.full(4, 9.0))
    row = tt.row("row", dtype="float64")
    r = FusedReduce(Sum(axis=(0,)), ts.add)(x, row)
    with config.change_flags(compiledir=str(tmp_path)), ckernel.compile_mode("sync"):
        g = function([x, row], r, mode=Mode(linker=CPULinker(min_plan_bytes=0), optimizer=None))
        assert ckernel.wait_for_kernels(g)
    np.testing.assert_array_equal(g(np.ones((3, 4)), np.ones((1, 4))), np.full(4, 6.0))


@pytest.mark.parametrize("poisoned", [False, True])
def test_zero_d_elementwise_nodes_are_kernels_writing_planned_blocks(
    engine_kernels, tmp_path, poisoned
):
    # numpy gives a 0-d op a scalar that a step wraps back into an array; a kernel
    # writes the planned 0-d block instead (and a small vector's kernel its block too).
    s, v = tt.dscalar("s"), tt.dvector("v")
    outs = [tt.exp(s) * 2, -tt.log(s), tt.sigmoid(v) + s]
    ref = function([s, v], outs, mode=Mode(linker="py", optimizer=None))
    with config.change_flags(compiledir=str(tmp_path)), ckernel.compile_mode("sync"):
        f = function([s, v], outs, mode=Mode(linker=CPULinker(poison=poisoned), optimizer=None))
        assert ckernel.wait_for_kernels(f)
    plain = [k for k in f.fn.program.ckernels.kernels if k.ndim == 0]
    assert len(plain) == 4  # exp, mul, log, neg: each its own kernel, not numpy's
    args = (np.array(0.7), np.linspace(-3, 3, 7))
    for _ in range(2):
        for g, w in zip(f(*args), ref(*args)):
            assert_same(g, w)
    src = f.fn.source()
    # and sigmoid(v), and its sum with s (a plain op joins the function's kernels)
    assert "asarray" not in src and len(kernel_calls(f)) == 6, src


def test_compile_mode_never_makes_libraries_that_never_build():
    # The fuzzer's cpu_fallback engine: a kernel's library is made, never built, so the
    # calls after its first run the kernel's numpy steps (the path the C kernels take
    # while their library compiles on a cold cache).
    x, y = tt.dvector("x"), tt.dvector("y")
    with ckernel.compile_mode("never"):
        f = function([x, y], tt.exp(x) * y + x, mode=Mode(linker=CPULinker(min_plan_bytes=0)))
        xv, yv = np.linspace(-1, 1, 7), np.linspace(2, 3, 7)
        for _call in range(3):
            np.testing.assert_allclose(f(xv, yv), np.exp(xv) * yv + xv, rtol=1e-15)
    kernels = f.fn.program.ckernels.kernels
    assert kernels and not any(k.ready for k in kernels)
    assert all(k.fallback.__name__.startswith("fb") for k in kernels)
    with pytest.raises(ValueError, match="'never', got 'later'"):
        with ckernel.compile_mode("later"):
            pass


def test_sync_kernel_compile_gives_the_c_kernels_values_from_the_first_call(tmp_path):
    # In the background (the default) a cold cache's first calls run numpy, whose exp
    # differs from the C kernel's in the last bits: the values would depend on when the
    # build ends. cpu__kernel_compile=sync makes the first call wait for the kernels.
    x = tt.dvector("x")
    v = np.linspace(-30.0, 30.0, 4001)
    flags = {"compiledir": str(tmp_path / "cache"), "cpu__kernel_compile": "sync"}
    with config.change_flags(**flags):
        f = function([x], tt.exp(x) * 3.0 + tt.sin(x))
        first = f(v)
        assert ckernel.wait_for_kernels(f, timeout=0)  # loaded when the first call ran
        assert [type(k) for k in kernel_calls(f)] == [ckernel.CKernel]
        np.testing.assert_array_equal(first, f(v))
    with pytest.raises(ValueError, match="cpu__kernel_compile"):
        config.cpu__kernel_compile = "later"
