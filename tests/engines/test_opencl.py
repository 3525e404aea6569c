"""The OpenCL engine (PoCL on the CPU is enough): values vs the reference engine, transfers,
device arrays, shared variables on the device, the program cache, host fallback."""

from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest

from theano_dag.engines.opencl.context import opencl_available

OK, WHY = opencl_available()
if not OK:
    pytest.skip(f"no OpenCL platform/device available: {WHY}", allow_module_level=True)

import theano_dag  # noqa: E402
import theano_dag.engines.opencl as ocl  # noqa: E402
import theano_dag.engines.opencl.context as ocl_context  # noqa: E402
import theano_dag.tensor as tt  # noqa: E402
from theano_dag import printing, typed_list  # noqa: E402
from theano_dag.compile.io import Out  # noqa: E402
from theano_dag.compile.mode import Mode  # noqa: E402
from theano_dag.config import config  # noqa: E402
from theano_dag.engines.opencl.context import OpenCLUnavailable, get_context  # noqa: E402
from theano_dag.engines.opencl.linker import OpenCLLinker  # noqa: E402
from theano_dag.graph.basic import Constant  # noqa: E402
from theano_dag.graph.rewriting.utils import check_stack_trace  # noqa: E402
from theano_dag.tensor import inplace  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tensor"))
from op_table import TABLE  # noqa: E402

CTX = get_context()
OCL = Mode(linker="opencl")
REF = Mode(linker="py", optimizer=None)


def cl_array(a):
    return ocl.to_device(np.asarray(a))


def is_dev(v):
    return type(v).__module__.startswith("pyopencl")


# -- every op of the table, float32 and float64, vs the reference engine ---------------


def _table_inputs(row, dtype, rng, tag):
    values = [np.asarray(gen(rng, dtype)) for gen in row.gens]
    # Length-1 dims are broadcastable, so the row/column rows broadcast.
    syms = [
        tt.TensorType(v.dtype, shape=tuple(1 if s == 1 else None for s in v.shape))(f"{tag}_{k}")
        for k, v in enumerate(values)
    ]
    return syms, values


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int32", "int64", "bool"])
def test_op_table_matches_reference_engine(dtype):
    # All rows in one function: one program build, and every row still checked alone.
    rng = np.random.default_rng(1234)
    rows = [r for r in TABLE if dtype in r.dtypes]
    syms, values, outs = [], [], []
    for i, row in enumerate(rows):
        s, v = _table_inputs(row, dtype, rng, f"r{i}")
        outs.append(row.build(*s))
        syms += s
        values += v
    # Compiler optimisations off: a cold driver cache builds the ~250 kernels 3x faster.
    fast_build = Mode(linker=OpenCLLinker(build_options=["-cl-opt-disable"]))
    f = theano_dag.function(syms, outs, mode=fast_build, on_unused_input="ignore")
    ref = theano_dag.function(syms, outs, mode=REF, on_unused_input="ignore")
    copies = [v.copy() for v in values]
    got, want = f(*values), ref(*values)
    bad = []
    for row, g, w in zip(rows, got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            bad.append(f"{row}: {g.shape} {g.dtype}, reference {w.shape} {w.dtype}")
            continue
        tol = row.rtol32 if dtype == "float32" else row.rtol64
        if w.dtype.kind in "fc":
            ok = np.allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
        else:
            ok = np.array_equal(g, w)
        if not ok:
            bad.append(f"{row}: max difference {np.max(np.abs(g - w))}")
    assert not bad, "\n".join(bad)
    for v, c in zip(values, copies):
        np.testing.assert_array_equal(v, c, err_msg="the engine modified an input")
    # Most of the table runs as kernels; what does not is on the host, visibly.
    fn = f.fn
    device_nodes = [n for n, w in fn.where.items() if w == "device"]
    assert len(device_nodes) > 0.9 * len(rows)  # (about one kernel a row, more or less)
    fallback_ops = {type(n.op).__name__ for n, _ in fn.placement.fallbacks}
    assert "CAReduce" not in fallback_ops
    # An Elemwise runs on the host only for a scalar op with no C expression (scipy's
    # special functions: psi, jv...) or a complex dtype, and says so.
    host_elemwise = [why for n, why in fn.placement.fallbacks if type(n.op).__name__ == "Elemwise"]
    assert all(
        "has no C expression" in why or "no OpenCL type for complex" in why for why in host_elemwise
    ), host_elemwise


def test_strided_and_broadcast_inputs_use_the_strided_kernel():
    x, r = tt.fmatrix("x"), tt.frow("r")
    f = theano_dag.function([x, r], tt.exp(x.T) * r + x.T, mode=OCL)
    a = np.random.default_rng(0).random((5, 3)).astype("float32")
    b = np.random.default_rng(1).random((1, 5)).astype("float32")
    np.testing.assert_allclose(f(a, b), np.exp(a.T) * b + a.T, rtol=1e-6)
    # a transposed device array, used in place
    dev_t = ocl.to_device(a.T.copy()).transpose()  # shape (5, 3), not contiguous
    np.testing.assert_allclose(f(dev_t, b), np.exp(a.T) * b + a.T, rtol=1e-6)
    with pytest.raises(ValueError, match="do not match along dimension"):
        f(a, np.ones((1, 4), "float32"))


def test_generated_kernel_source_snapshot():
    x = tt.fvector("x")
    f = theano_dag.function([x], tt.exp(x), mode=Mode(linker="opencl", optimizer=None))
    src = ocl.opencl_source(f)
    assert src.count("__kernel void ew_") == 3  # strided, contiguous, vector
    contiguous = src[src.index("_c(") :].split("}")[0]
    assert "const float x0 = p0[o0 + gid];" in contiguous
    assert "q0[u0 + gid] = (float)(exp(x0));" in contiguous
    vector = src[src.index("_v(") :].split("}")[0]
    assert "vstore8(exp(x0), 0, q0 + u0 + gid);" in vector
    strided = src[src.index("_s(") :].split("}")[0]
    assert "const float x0 = p0[o0 + i0 * s0_0];" in strided


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gemm_kernels_for_every_layout(dtype):
    # Sizes with tails (not multiples of the 4x8 blocks or 16x16 tiles); each layout
    # picks another kernel: row-blocked (B rows contiguous), dot products (A rows and
    # B columns contiguous), tiled (neither), direct (small).
    rng = np.random.default_rng(5)
    a, b = rng.random((37, 45)).astype(dtype), rng.random((45, 29)).astype(dtype)
    z = rng.random((37, 29)).astype(dtype)
    x, y, w = (tt.matrix(n, dtype=dtype) for n in "xyw")
    v = tt.vector("v", dtype=dtype)
    exprs = [
        tt.dot(x, y),
        tt.dot(x, w.T),
        tt.dot(y.T, x.T).T,
        tt.dot(x[:3, :4], y[:4, :2]),
        tt.dot(x, v),
        theano_dag.tensor.blas.gemm_no_inplace(
            z_ := tt.matrix("z", dtype=dtype), np.asarray(0.5, dtype), x, y, np.asarray(2.0, dtype)
        ),
    ]
    f = theano_dag.function([x, y, w, v, z_], exprs, mode=OCL, on_unused_input="ignore")
    got = f(a, b, b.T.copy(), b[:, 0].copy(), z)
    want = [a @ b, a @ b, a @ b, a[:3, :4] @ b[:4, :2], a @ b[:, 0], 2 * z + 0.5 * (a @ b)]
    tol = 1e-5 if dtype == "float32" else 1e-12
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(g, w_, rtol=tol)
    launched = {
        impl.last_launch.rsplit("_", 1)[-1]
        for impl in f.fn.impls.values()
        if (impl.last_launch or "").startswith("gemm_")
    }
    assert launched == {"v", "n", "t", "d"}


@pytest.mark.parametrize("dtype", ["float64", "int64", "float32"])
def test_gemm_vector_kernels_at_tail_sizes(dtype):
    # The row-blocked (4x8 blocks) and dot-product (vector loads along K) kernels at sizes
    # around their blocks and vector widths. Their float64 and int64 forms once used
    # 64-byte vectors (double8, long8) through vload8/vstore8, which segfaulted the process
    # on PoCL 3.0 with LLVM 14 on an AVX-512 CPU (see blas.VECTOR_BYTES); none may remain.
    x, y, w = (tt.matrix(n, dtype=dtype) for n in "xyw")
    f = theano_dag.function([x, y, w], [tt.dot(x, y), tt.dot(x, w.T)], mode=OCL)
    assert not re.search(r"\b(double|u?long)(8|16)\b|\b(float|u?int)16\b", ocl.opencl_source(f))
    rng = np.random.default_rng(7)
    # (M, K, N): all big enough for the vector kernels; M, N around the 4x8 blocks and K
    # around the vector widths (4, 8), exact multiples last.
    for m, k, n in [(37, 45, 29), (33, 35, 31), (4, 97, 90), (61, 9, 67), (40, 64, 16)]:
        a = rng.integers(-9, 10, (m, k)).astype(dtype)
        b = rng.integers(-9, 10, (k, n)).astype(dtype)
        got = f(a, b, b.T.copy())
        for g in got:
            np.testing.assert_allclose(g, a @ b, rtol=1e-6 if dtype == "float32" else 0)
        launched = [impl.last_launch or "" for impl in f.fn.impls.values()]
        kinds = {name.rsplit("_", 1)[-1] for name in launched if name.startswith("gemm_")}
        assert kinds == {"v", "n"}, (m, k, n)


# -- placement: host fallback and the error without it --------------------------------


def test_host_fallback_inserts_visible_transfers():
    x, i = tt.fmatrix("x"), tt.lvector("i")
    y = tt.exp(x)[i] * 2  # AdvancedSubtensor1 has no kernel
    f = theano_dag.function([x, i], y, mode=OCL)
    a = np.random.default_rng(2).random((4, 3)).astype("float32")
    idx = np.array([3, 0, 3])
    np.testing.assert_allclose(f(a, idx), np.exp(a)[idx] * 2, rtol=1e-6)
    text = printing.debugprint(f, file="str")
    assert "HostFromGpu" in text and "GpuFromHost" in text
    assert [type(n.op).__name__ for n, _ in f.fn.placement.fallbacks] == ["AdvancedSubtensor1"]
    assert "AdvancedSubtensor1" in ocl.opencl_profile(f)
    # each transfer has the stack trace of the value it copies (Theano-PyMC's
    # check_stack_trace(f, ops_to_check="all") found them without one)
    transfers = [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, ocl.HostFromGpu)]
    transfers += [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, ocl.GpuFromHost)]
    assert transfers and check_stack_trace(f, ops_to_check="all")
    for node in transfers:
        assert node.outputs[0].tag.trace == node.inputs[0].tag.trace


def test_no_fallback_raises_naming_the_op():
    x, i = tt.fmatrix("x"), tt.lvector("i")
    with config.change_flags(opencl__host_fallback=False):
        with pytest.raises(NotImplementedError, match="AdvancedSubtensor1"):
            theano_dag.function([x, i], tt.exp(x)[i], mode=OCL)
    with pytest.raises(NotImplementedError, match="cannot run AdvancedSubtensor1"):
        theano_dag.function([x, i], x[i], mode=Mode(linker=OpenCLLinker(host_fallback=False)))


def test_float64_on_a_device_without_it_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(CTX, "has_fp64", False)
    x = tt.dvector("x")
    with pytest.raises(TypeError, match="does not support float64") as e:
        theano_dag.function([x], tt.exp(x), mode=OCL)
    assert CTX.device.name in str(e.value)
    y = tt.fvector("y")
    g = theano_dag.function([y], tt.exp(y), mode=OCL)  # float32 still compiles
    np.testing.assert_allclose(g(np.zeros(2, "float32")), [1, 1])


# -- device arrays in and out, shared variables on the device ---------------------------


def test_device_arrays_in_and_out():
    x = tt.fvector("x")
    a = np.arange(6, dtype="float32")
    dev = cl_array(a)
    f = theano_dag.function([x], Out(x * 2, borrow=True), mode=OCL)
    before = CTX.transfers.snapshot()
    out = f(dev)
    moved = CTX.transfers - before
    assert is_dev(out)
    assert (moved.h2d, moved.d2h) == (0, 0)  # in place in, kept on the device out
    np.testing.assert_array_equal(out.get(), a * 2)
    g = theano_dag.function([x], x * 2, mode=OCL)  # default: back to numpy
    res = g(dev)
    assert isinstance(res, np.ndarray)
    np.testing.assert_array_equal(res, a * 2)
    h = theano_dag.function([x], [x + 1, x.sum()], mode=Mode(linker="opencl_device"))
    r1, r2 = h(a)
    assert is_dev(r1) and is_dev(r2)
    assert float(r2.get()) == a.sum()
    with pytest.raises(TypeError, match="dtype float32"):
        f(cl_array(a.astype("float64")))


def test_shared_variables_stay_on_the_device_across_calls():
    rng = np.random.default_rng(3)
    w0 = rng.random((4, 3)).astype("float32")
    w = ocl.opencl_shared(w0, name="w")
    x = tt.fmatrix("x")
    cost = tt.sqr(tt.dot(x, w)).sum()
    g = theano_dag.grad(cost, w)
    step = theano_dag.function([x], cost, updates=[(w, w - np.float32(0.01) * g)], mode=OCL)
    xs = rng.random((5, 4)).astype("float32")
    before = CTX.transfers.snapshot()
    ref_w = w0.astype("float64")
    for _ in range(4):
        c = step(xs)
        ref_c = np.sum((xs @ ref_w) ** 2)
        ref_w = ref_w - 0.01 * 2 * xs.T @ (xs @ ref_w)
        np.testing.assert_allclose(c, ref_c, rtol=1e-4)
    moved = CTX.transfers - before
    # Per call: x up, the cost down; w never moves.
    assert (moved.h2d, moved.d2h) == (4, 4)
    assert moved.h2d_bytes == 4 * xs.nbytes
    assert is_dev(w.get_value(borrow=True, return_internal_type=True))
    np.testing.assert_allclose(w.get_value(), ref_w, rtol=1e-4)
    # the same with a plain (host) shared variable: w goes up and comes back each call
    wh = theano_dag.shared(w0.copy(), name="wh")
    gh = theano_dag.grad(tt.sqr(tt.dot(x, wh)).sum(), wh)
    step_h = theano_dag.function([x], [], updates=[(wh, wh - np.float32(0.01) * gh)], mode=OCL)
    before = CTX.transfers.snapshot()
    step_h(xs)
    moved = CTX.transfers - before
    assert (moved.h2d, moved.d2h) == (2, 1)
    assert isinstance(wh.get_value(borrow=True), np.ndarray)


def test_shared_constructor_with_device_opencl():
    with config.change_flags(device="opencl"):
        v = theano_dag.shared(np.ones(3, dtype="float32"), name="v")
    assert type(v).__name__ == "OpenCLSharedVariable"
    u = theano_dag.shared(cl_array(np.zeros(2)))
    assert type(u).__name__ == "OpenCLSharedVariable"
    f = theano_dag.function([], v * 2, updates=[(v, v + 1)], mode=OCL)
    np.testing.assert_array_equal(f(), [2, 2, 2])
    np.testing.assert_array_equal(v.get_value(), [2, 2, 2])
    v.set_value(np.full(3, 5, dtype="float32"))
    np.testing.assert_array_equal(f(), [10, 10, 10])


# -- what a Function gives and takes on the engine, as on the CPU engine ------------------


def test_a_none_input_reaches_a_host_op():
    # Default(x, y) runs on the host; an input given None was taken for a missing host
    # value and looked up on the device (KeyError).
    x, y = tt.dscalar("x"), tt.dscalar("y")
    f = theano_dag.function([x, y], tt.default(x, y), mode=OCL)
    assert f(1.0, 2.0) == 1.0
    assert f(None, 2.0) == 2.0
    assert f(1.0, None) == 1.0


def test_a_scalar_type_output_is_a_numpy_scalar():
    # The DeepCopyOp of a ScalarType constant was copied on the device and came back as
    # a 0-d array; the reference engine gives numpy's scalar.
    folded = tt.scalar_from_tensor(tt.constant(np.int8(56)))
    xs = tt.lscalar("xs")
    computed = tt.scalar_from_tensor(xs * 2)
    f = theano_dag.function([xs], [folded, computed], mode=OCL)
    got = f(3)
    want = theano_dag.function([xs], [folded, computed], mode=REF)(3)
    assert [type(g) for g in got] == [type(w) for w in want] == [np.int8, np.int64]
    assert got == want == [56, 6]


def test_a_typed_list_input_of_ragged_arrays():
    # The plan's signature took np.shape of every input: a list of arrays of two lengths
    # made numpy raise ValueError (inhomogeneous shape).
    tl = typed_list.TypedListType(tt.dvector)("tl")
    outs = [typed_list.length(tl), typed_list.getitem(tl, 1) * 2]
    f = theano_dag.function([tl], outs, mode=OCL)
    ref = theano_dag.function([tl], outs, mode=REF)
    for value in ([np.ones(2), np.arange(3.0)], [np.ones(2), np.ones(2)], [np.ones(1), np.ones(4)]):
        got, want = f(value), ref(value)
        assert [g.tolist() for g in got] == [w.tolist() for w in want]


def test_float16_values_are_computed_on_the_host():
    # The copy, assignment and join kernels loaded and stored half values directly, which
    # needs cl_khr_fp16: without it (PoCL on a CPU) the program failed to build.
    m, v = tt.matrix("m", dtype="float16"), tt.vector("v", dtype="float16")
    outs = [
        tt.dot(m, m.T),
        m[1:, ::2] * 1,
        tt.set_subtensor(m[0], v),
        tt.inc_subtensor(m[:, 1], m[:, 0]),
        m.T.reshape((-1,)),
        tt.concatenate([m, m], axis=1),
        tt.cast(m, "float32") * 2,
    ]
    vals = [np.arange(9, dtype="float16").reshape(3, 3) / 4, np.ones(3, dtype="float16")]
    f = theano_dag.function([m, v], outs, mode=OCL)
    want = theano_dag.function([m, v], outs, mode=REF)(*vals)
    for got, w in zip(f(*vals), want):
        assert got.dtype == w.dtype and got.tolist() == w.tolist()
    assert not f.fn.impls  # no node of this graph runs on the device


def test_trust_input_values_of_another_dtype_are_not_misread():
    # With trust_input the Function does not filter its inputs: a float64 or int64 array,
    # or a list, given for a float32 input was uploaded as it was and its bytes read as
    # float32 by the kernels ([0, 0, 0] for arange(3.0); [0, 3.75] for [1.0, 2.0]).
    x = tt.fvector("x")
    f = theano_dag.function([x], x * 2, mode=OCL)
    f.trust_input = True
    for value in (np.arange(3.0), np.arange(3), [0.0, 1.0, 2.0]):
        got = f(value)
        assert got.dtype == np.float32 and got.tolist() == [0.0, 2.0, 4.0]
    with pytest.raises(TypeError, match="expected a device array of dtype float32"):
        f(cl_array(np.arange(3.0)))


INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


@pytest.mark.parametrize("dtype", INTS)
def test_integer_arithmetic_wraps_as_numpy_before_the_next_op(dtype):
    # OpenCL C leaves a signed overflow undefined (no -fwrapv) and promotes narrow
    # operands to int (uint16 * uint16 overflows it): PoCL computed an int32 -127 * x in
    # 64 bits and floor-divided the unwrapped product (found by the fuzzer, --values wide,
    # seed 4, graph 172). Each product, sum, difference and square here wraps in its dtype
    # before a division or a comparison sees it, as on the reference engine.
    x, y, z = (tt.vector(n, dtype=dtype) for n in "xyz")
    u = tt.scalar("u", dtype="uint32")
    seven = tt.constant(np.asarray(7, dtype))
    outs = [(x * y) // seven, (x + y + z) // seven, (x - y) // seven, tt.sqr(x) // seven]
    outs += [tt.lt(x * y * z, x), (tt.constant(np.asarray(-127, "int8")) * x) // u]
    outs += [(x * y + z) % seven, (x * y * z * x * y) // seven]
    rng = np.random.default_rng(4)
    info = np.iinfo(dtype)
    wraps = [info.min, info.max, 12, 100 % (info.max + 1), 200 % (info.max + 1), info.max // 2 + 1]
    values = [rng.choice(np.array(wraps + [0, 1, 3], dtype=object), 64).astype(dtype)]
    values += [rng.integers(info.min, info.max, 64, dtype=dtype, endpoint=True) for _ in "yz"]
    args = values + [np.uint32(9)]
    got = theano_dag.function([x, y, z, u], outs, mode=OCL)(*args)
    want = theano_dag.function([x, y, z, u], outs, mode=REF)(*args)
    for j, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and np.array_equal(g, w), (j, g[:4], w[:4])


def test_reductions_to_bool_are_whether_the_result_is_nonzero():
    # A sum in a bool accumulator is numpy's logical or, and a bool result is whether the
    # sum is nonzero. The kernel added trues in a uchar (256 of them wrapped to false) and
    # cast a float sum of 0.5 to uchar 0.
    b, y, x = tt.vector("b", dtype="bool"), tt.ivector("y"), tt.dmatrix("x")
    outs = [b.sum(dtype="bool"), b.sum(acc_dtype="bool"), y.sum(dtype="bool"), b.prod()]
    outs += [x.sum(axis=1, dtype="bool"), x.prod(axis=0, dtype="bool"), y.prod(dtype="bool")]
    args = [np.ones(256, bool), np.array([256, 0, 512] * 30, "int32")]
    args += [np.array([[0.5, -0.25, 0.0], [0.0, 0.0, 0.0], [1e-300, 0.0, 2.0]])]
    got = theano_dag.function([b, y, x], outs, mode=OCL)(*args)
    want = theano_dag.function([b, y, x], outs, mode=REF)(*args)
    for j, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and np.array_equal(g, w), (j, g, w)
    assert got[0] and got[2] and got[4].tolist() == [True, False, True]


def test_the_engine_never_writes_into_an_input():
    # docs/engines.md: an in-place op overwrites the device copy of a numpy input, and a
    # device array passed in is left as it was, even when the input is declared mutable.
    x = tt.dvector("x")
    fs = [
        theano_dag.function([x], inplace.exp_inplace(x), mode=OCL, accept_inplace=True),
        theano_dag.function([theano_dag.In(x, mutable=True)], tt.exp(x) * 2, mode=OCL),
    ]
    want = [np.exp(np.arange(3.0)), np.exp(np.arange(3.0)) * 2]
    for f, w in zip(fs, want):
        host = np.arange(3.0)
        dev = cl_array(np.arange(3.0))
        assert np.allclose(f(host), w) and np.allclose(ocl.to_host(f(dev)), w)
        assert host.tolist() == ocl.to_host(dev).tolist() == [0.0, 1.0, 2.0]


def test_storage_map_and_a_copy_sharing_memory():
    # Theano's fn.storage_map: the cells of the inputs, outputs and constants; a copy made
    # with share_memory=True shares the constants' cells.
    x = tt.fscalar("x")
    z = theano_dag.shared(np.float32(2.0), name="z")
    out = tt.tanh((x + 2) / (x + z - np.float32(0.2)) ** 2)
    f = theano_dag.function([x], out, mode=OCL, updates={z: z + 1})
    smap = f.fn.storage_map
    fg = f.maker.fgraph
    assert all(smap[v] is cell for v, cell in zip(fg.inputs, f.fn.input_storage))
    consts = [v for v in smap if isinstance(v, Constant)]
    assert consts and all(smap[c][0] is c.data for c in consts)
    g = f.copy(share_memory=True)
    g_cells = [cell for v, cell in g.fn.storage_map.items() if isinstance(v, Constant)]
    assert g_cells and all(any(cell is c for c in smap.values()) for cell in g_cells)
    assert np.allclose(g(1.0), np.tanh(3.0 / (3.0 - 0.2) ** 2), rtol=1e-6)


# -- memory plan, profile, program cache, device selection -------------------------------


def test_memory_plan_and_profile_report_device_bytes():
    x = tt.dvector("x")
    y = x
    for k in range(6):  # reductions between the steps keep them apart: buffers are reused
        y = (y * (k + 2)).sum() * y + y.max()
    f = theano_dag.function([x], y, mode=Mode(linker="opencl", optimizer=None))
    a = np.linspace(-1, 1, 1000)
    ref = theano_dag.function([x], y, mode=REF)
    np.testing.assert_allclose(f(a), ref(a), rtol=1e-9)
    plan = f.fn.last_plan.memory_plan
    assert plan.planned_bytes > 0
    assert plan.planned_bytes < plan.eager_peak_bytes  # blocks were reused
    assert f.fn.planned_device_bytes == plan.planned_bytes
    text = ocl.opencl_profile(f)
    assert f"planned device bytes: {plan.planned_bytes}" in text


def test_program_cache_hit():
    x = tt.fvector("x")
    expr = tt.tanh(x) * 3 - tt.sqrt(tt.abs(x))
    theano_dag.function([x], expr, mode=OCL)
    before = dict(CTX.program_stats)
    theano_dag.function([x], expr, mode=OCL)  # same kernels: no rebuild
    after = CTX.program_stats
    assert after["builds"] == before["builds"]
    assert after["memory_hits"] == before["memory_hits"] + 1
    # On disk (what a second process finds): pyopencl's binary cache under cache_dir(),
    # unless the driver caches source builds itself (PoCL, NVIDIA): then it builds again.
    from pyopencl.characterize import has_src_build_cache

    src = CTX.header() + f"__kernel void cache_probe_{os.getpid()}(__global int* a) {{ a[0] = 7; }}"
    CTX.build_program(src)
    CTX.clear_memory_cache()
    builds, hits = CTX.program_stats["builds"], CTX.program_stats["disk_hits"]
    CTX.build_program(src)
    if has_src_build_cache(CTX.device):
        assert CTX.program_stats["builds"] == builds + 1
    else:
        assert os.listdir(CTX.cache_dir())
        assert CTX.program_stats["builds"] == builds
        assert CTX.program_stats["disk_hits"] == hits + 1


def test_a_build_lacking_its_kernels_is_built_again_without_the_caches(monkeypatch):
    # A damaged or stale cache entry can give a program without its kernels (PoCL 3.0's
    # cached build of a program that passes a double8 to a builtin lists none): one
    # warning, one build without the caches, and the kernel is there; else a clear error.
    name = f"lacking_{os.getpid()}"
    src = CTX.header() + f"__kernel void {name}(__global int* a) {{ a[0] = 3; }}\n"
    real = ocl_context._missing_kernels
    prg = CTX.build_program(src)
    assert real(CTX.cl, prg, src) == []
    assert real(CTX.cl, prg, src + "__kernel void absent(__global int* a) {}") == ["absent"]
    CTX.clear_memory_cache()
    calls = []

    def first_lacks(cl, program, source):
        calls.append(source)
        return [name] if len(calls) == 1 else real(cl, program, source)

    monkeypatch.setattr(ocl_context, "_missing_kernels", first_lacks)
    with pytest.warns(RuntimeWarning, match="lacks its kernels"):
        prg = CTX.build_program(src)
    assert len(calls) == 2
    CTX.cl.Kernel(prg, name)
    CTX.clear_memory_cache()
    monkeypatch.setattr(ocl_context, "_missing_kernels", lambda cl, program, source: [name])
    with pytest.warns(RuntimeWarning), pytest.raises(RuntimeError, match="without the kernels"):
        CTX.build_program(src)


def test_device_selection_by_config():
    with config.change_flags(opencl__device="no-such-device-xyz"):
        with pytest.raises(OpenCLUnavailable, match="no-such-device-xyz"):
            get_context()
    name = CTX.device.name.split()[0]
    with config.change_flags(opencl__device=name.lower()):
        assert get_context().device.name == CTX.device.name


# -- the digits MLP trains to the same accuracy as on the reference engine ---------------


def test_digits_mlp_trains_like_the_reference_engine():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    import train_digits

    fast_build = Mode(linker=OpenCLLinker(build_options=["-cl-opt-disable"]))
    got = train_digits.main(epochs=2, mode=fast_build)
    want = train_digits.main(epochs=2, mode=Mode(linker="py"))
    assert got == pytest.approx(want, abs=0.005)
    assert got[1] > 0.75
