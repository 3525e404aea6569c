"""Segments of C kernels (``engines.cpu.native.segment``): consecutive kernel steps of a
plan run by one call, in C once the library is loaded, in numpy before; a kernel that
fails inside a segment is explained (or its operand converted) and the rest run."""

from __future__ import annotations

import itertools
import re
import warnings

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag import scalar as ts
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.engines.cpu import CPULinker
from theano_dag.engines.cpu.emit.csource import array_layout
from theano_dag.engines.cpu.native import cc, ckernel, segment
from theano_dag.engines.cpu.native.ckernel import kernel_calls
from theano_dag.tensor.elemwise import Elemwise
from theano_dag.tensor.type import TensorType

pytestmark = [
    pytest.mark.skipif(
        cc.get_toolchain(config.cxx) is None or array_layout() is None,
        reason="no C compiler (config.cxx) or an unknown ndarray layout",
    ),
    pytest.mark.usefixtures("no_kernel_builds_in_flight"),
]

native = pytest.mark.skipif(
    not segment.available(), reason="the C half of the call has no Segment (not rebuilt)"
)


@pytest.fixture
def engine_kernels():
    already = bool(ckernel._REGISTERED)
    ckernel.register()
    yield
    if not already:
        ckernel.unregister()


def composite(fn, nin, dtype="float64", inplace=None):
    """An Elemwise op of the scalar function ``fn`` of ``nin`` inputs of ``dtype``."""
    ss = [ts.get_scalar_type(dtype)(f"s{j}") for j in range(nin)]
    return Elemwise(ts.Composite(ss, [fn(*ss)]), inplace or {})


def chain():
    """x, y -> three Elemwise{Composite} nodes one after the other (three kernels)."""
    x, y = tt.dvector("x"), tt.dvector("y")
    a = composite(lambda s: ts.exp(s) * 2, 1)(x)
    b = composite(lambda s, t: ts.tanh(s) - t, 2)(a, x)
    c = composite(lambda s, t: s * t + 1, 2)(b, y)
    return [x, y], [c, a]


def want_chain(xv, yv):
    a = np.exp(xv) * 2
    return [(np.tanh(a) - xv) * yv + 1, a]


def compile_sync(inputs, outputs, tmp_path, **linker):
    linker.setdefault("poison", False)  # a poisoned plan runs each step alone (the flag)
    with config.change_flags(compiledir=str(tmp_path)), ckernel.compile_mode("sync"):
        f = function(inputs, outputs, mode=Mode(linker=CPULinker(**linker), optimizer=None))
        f(*[np.zeros(3)] * len(inputs))
        assert ckernel.wait_for_kernels(f)
    return f


def segments_of(f):
    """The segments the current plan's code calls, in order, by name."""
    plan = f.fn.current
    code = plan.fast if plan.fast is not None else plan.core
    names = re.findall(r"(_SEG\d+)\.c\(", f.fn.source())
    return [code.__globals__[n] for n in names]


@native
def test_consecutive_kernels_run_as_one_segment(engine_kernels, tmp_path):
    inputs, outputs = chain()
    f = compile_sync(inputs, outputs, tmp_path, min_plan_bytes=0)
    src = f.fn.source()
    (seg,) = segments_of(f)
    assert len(seg.kernels) == 3 and seg.native
    assert src.count(".c(") == 1 and "_K" not in src
    rng = np.random.default_rng(1)
    for n in (5, 5, 17):  # the second call reuses the plan, the third plans anew
        xv, yv = rng.standard_normal(n), rng.standard_normal(n)
        for got, want in zip(f(xv, yv), want_chain(xv, yv)):
            np.testing.assert_allclose(got, want, rtol=1e-13)


@native
def test_segment_order_follows_the_graph(engine_kernels, tmp_path):
    inputs, outputs = chain()
    f = compile_sync(inputs, outputs, tmp_path, min_plan_bytes=0)
    (seg,) = segments_of(f)
    scalar_ops = [k.node.op.scalar_op for k in seg.kernels]
    c, a = outputs
    b = c.owner.inputs[0]
    assert scalar_ops == [a.owner.op.scalar_op, b.owner.op.scalar_op, c.owner.op.scalar_op]


@pytest.mark.parametrize("flag", ["poison", "profile"])
def test_no_segments_where_each_step_stands_alone(engine_kernels, tmp_path, flag):
    inputs, outputs = chain()
    kw = {"poison": True} if flag == "poison" else {"profile": True}
    with config.change_flags(compiledir=str(tmp_path)), ckernel.compile_mode("sync"):
        f = function(inputs, outputs, mode=Mode(linker=CPULinker(min_plan_bytes=0, **kw)))
        xv, yv = np.linspace(-1, 1, 6), np.linspace(2, 3, 6)
        f(xv, yv)
        assert ckernel.wait_for_kernels(f)
        got = f(xv, yv)
    assert "_SEG" not in f.fn.source()
    for g, w in zip(got, want_chain(xv, yv)):
        np.testing.assert_allclose(g, w, rtol=1e-13)


def test_failing_compiler_leaves_segments_on_numpy(engine_kernels, tmp_path):
    cc_path = tmp_path / "fake-cc"
    cc_path.write_text('#!/bin/sh\necho "fake-cc: broken" >&2; exit 3\n')
    cc_path.chmod(0o755)
    inputs, outputs = chain()
    xv, yv = np.linspace(-1, 1, 6), np.linspace(2, 3, 6)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with (
            config.change_flags(cxx=str(cc_path), compiledir=str(tmp_path / "c")),
            ckernel.compile_mode("sync"),
        ):
            f = function(inputs, outputs, mode=Mode(linker=CPULinker(min_plan_bytes=0)))
            results = [f(xv, yv) for _ in range(3)]
    msgs = [str(w.message) for w in got if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == 1 and "fake-cc: broken" in msgs[0], msgs
    assert all(not s.native for s in segments_of(f))
    for r in results:
        for g, w in zip(r, want_chain(xv, yv)):
            np.testing.assert_allclose(g, w, rtol=1e-13)


def _library(tmp_path, nodes):
    lib = ckernel.kernel_library(compiledir=str(tmp_path), mode="sync")
    return lib, [lib.add(n) for n in nodes]


@native
def test_segment_made_before_the_library_loads_switches_to_c(tmp_path):
    x = tt.dvector()
    lib, (k1, k2) = _library(
        tmp_path,
        [composite(lambda s: ts.exp(s) + 1, 1)(x).owner, composite(lambda s: s * s, 1)(x).owner],
    )
    seg = lib.segment([k1, k2], ((0, 1), (1, 2)), 3)
    assert not seg.native and not lib.ready
    v, t, out = np.linspace(-1, 1, 7), np.empty(7), np.empty(7)
    assert not seg.c(v, t, out)  # numpy first: its first kernel's call builds the library
    np.testing.assert_allclose(out, (np.exp(v) + 1) ** 2, rtol=1e-13)
    assert lib.ready and seg.native
    out[:] = 0
    assert not seg.c(v, t, out)  # now in C
    np.testing.assert_allclose(out, (np.exp(v) + 1) ** 2, rtol=1e-13)


@native
def test_segment_stops_at_the_kernel_that_fails_and_explains_it(tmp_path):
    x, y = tt.dvector(), tt.dvector()
    lib, (k1, k2) = _library(
        tmp_path,
        [composite(lambda s: s + 1, 1)(x).owner, composite(lambda s, t: s * t, 2)(x, y).owner],
    )
    assert lib.wait()
    seg = lib.segment([k1, k2], ((0, 1), (1, 2, 3)), 4)
    v, t, bad, out = np.arange(4.0), np.empty(4), np.ones(3), np.full(4, -7.0)
    assert seg.c(v, t, bad, out)
    assert seg.c.failed_step == 1
    np.testing.assert_array_equal(t, v + 1)  # the first kernel ran
    np.testing.assert_array_equal(out, -7.0)  # the failing one wrote nothing
    with pytest.raises(ValueError, match=r"input shapes \[\(4,\), \(3,\)\] do not match"):
        seg.fail(v, t, bad, out)
    assert seg.at == 1


@native
def test_a_segment_bound_again_after_it_failed_finishes_from_its_failed_step(tmp_path):
    # The library binds its segments when its kernels load and again when the step
    # library does, from the thread that loaded it. A second bind between a segment's
    # failure and its ``fail`` once replaced the C segment with a new one that knew no
    # failed step: ``fail`` ran every kernel again, so a kernel that updates its
    # operand in place (here ``a += 1``) ran twice and the result was wrong.
    d0 = TensorType("float64", ())
    s, t = d0(), d0()
    lib, (k1, k2) = _library(
        tmp_path,
        [composite(lambda a: a + 1, 1)(s).owner, composite(lambda a, b: a * b, 2)(s, t).owner],
    )
    assert lib.wait()
    seg = lib.segment([k1, k2], ((0, 0), (0, 1, 2)), 3)
    assert seg.native
    a, out = np.array(1.0), np.empty(())
    assert seg.c(a, np.float64(3.0), out)  # the numpy scalar: the second kernel refuses it
    assert seg.c.failed_step == 1 and a == 2.0
    seg.bind(lib._lib)  # the step library's load binds it again
    assert seg.fail(a, np.float64(3.0), out) is None
    assert a == 2.0 and out == 6.0
    assert seg.at == 1


@native
def test_segment_converts_a_numpy_scalar_and_runs_the_rest(tmp_path):
    d0 = TensorType("float64", ())
    s = d0()
    lib, (k1, k2) = _library(
        tmp_path,
        [composite(lambda a: ts.exp(a), 1)(s).owner, composite(lambda a: -a, 1)(s).owner],
    )
    assert lib.wait()
    seg = lib.segment([k1, k2], ((0, 1), (1, 2)), 3)
    t, out = np.empty(()), np.empty(())
    # numpy hands a 0-d op a scalar, not a 0-d array: the kernel refuses it, its fail
    # converts it, and the next kernel runs after it.
    assert seg.c(np.float64(0.5), t, out)
    assert seg.fail(np.float64(0.5), t, out) is None
    assert out == -np.exp(0.5)


@native
def test_error_inside_a_segment_names_its_node(engine_kernels, tmp_path):
    inputs, outputs = chain()
    f = compile_sync(inputs, outputs, tmp_path, min_plan_bytes=0)
    (seg,) = segments_of(f)

    class FailsAtTheSecond:
        # as the C segment does: the first kernel runs, the second refuses its operands
        failed_step = 1

        def __call__(self, *args):
            first = seg.kernels[0]
            assert not first.c(*[args[i] for i in seg.operands[0]])
            return True

    seg.c = FailsAtTheSecond()
    # The second kernel runs again through its own fail. Where its repeat succeeds (a
    # refusal that no longer holds: the step library loaded meanwhile) that finishes the
    # call, with numpy's values.
    xv, yv = np.linspace(-1, 1, 3), np.arange(3.0)
    for got, want in zip(f(xv, yv), want_chain(xv, yv)):
        np.testing.assert_allclose(got, want, rtol=1e-13)
    # Where the repeat refuses too (a wrong shape), the message names the node that raised.
    second = seg.kernels[1]
    second.c = lambda *arrays: 4 << 16  # input 0's shape
    with pytest.raises(ValueError) as info:
        f(xv, yv)
    assert f"Apply node that caused the error: {second.node}" in str(info.value)
    assert "input 0 has shape (3,)" in str(info.value)


# -- full sums in C ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_full_sum_is_numpys_bit_for_bit(tmp_path, dtype):
    x = TensorType(dtype, (None,))()
    lib = ckernel.kernel_library(compiledir=str(tmp_path), mode="sync")
    k = lib.add_sum(x.sum().owner, dtype, (0,))
    assert lib.wait() and k.ready
    rng = np.random.default_rng(3)
    sizes = [*range(0, 140), 255, 256, 1000, 4097, 100_003]
    for n in sizes:
        # Magnitudes over six decades: the order of the additions shows in the last bits.
        v = (rng.standard_normal(n) * 10 ** rng.uniform(-3, 3, n)).astype(dtype)
        for arr in (v, v.reshape(1, n), v[::2], v[::-1]):
            out = np.full((), np.nan, dtype)
            if k.c(arr, out):  # not C-contiguous: numpy runs
                assert not arr.flags.c_contiguous
                k.fail(arr, out)
            want = np.asarray(np.add.reduce(arr, axis=None), dtype)
            assert out.tobytes() == want.tobytes(), (n, arr.strides, out, want)
    out = np.empty((), dtype)
    assert k.c(np.full(9, -0.0, dtype), out) == 0 and out.tobytes() == np.zeros((), dtype).tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["lead", "trail"])
def test_partial_sums_are_numpys_bit_for_bit(tmp_path, dtype, kind):
    lib = ckernel.kernel_library(compiledir=str(tmp_path), mode="sync")
    x3 = TensorType(dtype, (None, None, None))()
    k = lib.add_sum(x3.sum(axis=0).owner, dtype, (0,), kind)
    assert lib.wait() and k.ready
    rng = np.random.default_rng(5)
    shapes = [(r, c) for r in (1, 2, 3, 7, 8, 9, 17, 130, 300) for c in (1, 2, 3, 8, 9, 33)]
    shapes += [(0, 3), (3, 0), (4, 5, 6), (9, 1, 7), (2, 130, 3), (1000, 2), (2, 1000)]
    for shape in shapes:
        v = (rng.standard_normal(shape) * 10 ** rng.uniform(-3, 3, shape)).astype(dtype)
        for n_red in range(1, len(shape)):
            axes = (
                tuple(range(n_red))
                if kind == "lead"
                else tuple(range(len(shape) - n_red, len(shape)))
            )
            want = np.add.reduce(v, axis=axes)
            out = np.full(want.shape, np.nan, dtype)
            assert k.c(v, out) == 0, (shape, axes)
            assert out.tobytes() == want.tobytes(), (shape, axes, out, want)
        # Not C-contiguous, or of other shapes: refused before anything is written.
        if len(shape) == 2 and min(shape) > 1:
            out = np.full(want.shape[::-1], np.nan, dtype)
            assert k.c(v.T, out) and np.isnan(out).all()
    out = np.empty(3, dtype)
    assert k.c(np.ones((4, 4), dtype), out)  # no axis of length 3 to keep


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("poisoned", [False, True])
def test_sum_nodes_run_as_kernels(engine_kernels, tmp_path, dtype, poisoned):
    x = TensorType(dtype, (None,))("x")
    m = TensorType(dtype, (None, None))("m")
    # float32 sums accumulate in float64 unless told (as Theano's): told here.
    acc = {"acc_dtype": dtype}
    outs = [
        tt.sum(tt.exp(x) * 2, **acc),
        tt.sum(m, **acc),
        tt.sum(m, axis=0, **acc),
        tt.sum(x * x, **acc) + tt.sum(m, **acc),
        tt.sum(m, axis=1, **acc),
        tt.sum(m.dimshuffle(1, 0), axis=0, **acc),  # a transposed input: numpy runs
    ]
    ref = function([x, m], outs, mode=Mode(linker="py", optimizer=None))
    with config.change_flags(cxx=""):  # the engine's numpy path, on the same graph
        numpy_path = function([x, m], outs, mode=Mode(linker=CPULinker(poison=poisoned)))
    with config.change_flags(compiledir=str(tmp_path)), ckernel.compile_mode("sync"):
        f = function([x, m], outs, mode=Mode(linker=CPULinker(poison=poisoned)))
        f(np.zeros(3, dtype), np.zeros((2, 3), dtype))
        assert ckernel.wait_for_kernels(f)
    rng = np.random.default_rng(4)
    for n in (3, 3, 40):
        xv, mv = rng.standard_normal(n).astype(dtype), rng.standard_normal((5, n)).astype(dtype)
        got, want, same = f(xv, mv), ref(xv, mv), numpy_path(xv, mv)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-5 if dtype == "float32" else 1e-13)
        # exp in C and in numpy may differ in the last bit; sums and products may not.
        for g, w in zip(got[1:], same[1:]):
            assert g.tobytes() == w.tobytes()
    sums = [k for k in kernel_calls(f) if isinstance(k, ckernel.SumKernel)]
    # Every sum: of the fused exp, of m, over m's rows, of the fused square, over m's
    # columns, over the transpose's rows (C on a contiguous array only, else numpy).
    assert len(sums) >= 5 and all(k.ready for k in sums)
    kinds = {k.name.split("_")[1] for k in sums}
    assert kinds == {"sum", "sumlead", "sumtrail"}
    if not poisoned and segment.available():
        assert "_SUM" not in f.fn.source()  # each runs inside a segment


_SPECIAL = [-0.0, 0.0, 1.0, -1.5, np.nan, np.inf, -np.inf]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_and_min_over_a_short_last_axis_run_as_kernels(engine_kernels, tmp_path, dtype):
    # The (500, 2) max of a mixture's log-sum-exp: a SumKernel step inside the segment,
    # the rows' signed zeros, NaN and infinities chosen as numpy's reduce chooses them
    # (on rows of more than 4 values, through numpy where the result is a zero or NaN).
    m = TensorType(dtype, (None, None))("m")
    t = TensorType(dtype, (None, None, None))("t")
    outs = [tt.max(m * 1, axis=1), tt.min(m * 1, axis=-1), tt.max(t * 1, axis=2)]
    ref = function([m, t], outs, mode=Mode(linker="py", optimizer=None))
    with config.change_flags(cxx=""):  # the engine's numpy path, on the same graph
        numpy_path = function([m, t], outs, mode=Mode(linker=CPULinker()))
    with config.change_flags(compiledir=str(tmp_path)), ckernel.compile_mode("sync"):
        f = function([m, t], outs, mode=Mode(linker=CPULinker()))
        f(np.zeros((2, 2), dtype), np.zeros((1, 2, 2), dtype))
        assert ckernel.wait_for_kernels(f)
    kinds = {k.name for k in kernel_calls(f) if isinstance(k, ckernel.SumKernel)}
    assert kinds == {f"td_maxtrail_f{dtype[5:]}", f"td_mintrail_f{dtype[5:]}"}
    if segment.available():
        assert "reduce_last" not in f.fn.source()  # inside a segment
    rng = np.random.default_rng(5)
    for n in (1, 2, 3, 4, 5, 8):
        k = min(n, 3)
        rows = np.array(list(itertools.product(_SPECIAL, repeat=k)), dtype=dtype)
        mv = np.concatenate([rows, rng.standard_normal((len(rows), n - k)).astype(dtype)], 1)
        tv = (rng.standard_normal((3, 7, n)) * 1e3).astype(dtype)
        for args in ((mv, tv), (mv[:0], tv[:, :0]), (mv.T.copy().T, tv)):
            with np.errstate(all="ignore"):
                got, want, same = f(*args), ref(*args), numpy_path(*args)
            for g, w, s in zip(got, want, same):
                assert g.dtype == w.dtype and g.shape == w.shape
                assert g.tobytes() == w.tobytes() == s.tobytes(), (n, g, w)
    # A long row whose result is a zero or a NaN, more than 16384 values: numpy runs.
    for mv in (np.zeros((3, 6), dtype), rng.standard_normal((2000, 9)).astype(dtype)):
        mv[0] = [-0.0, 0.0, -0.0, 0.0, -0.0, 0.0] + [-1.0] * (mv.shape[1] - 6)
        mv[1, 3] = np.nan
        got, want = f(mv, tv), ref(mv, tv)
        assert all(g.tobytes() == w.tobytes() for g, w in zip(got, want))
    # A non-contiguous input (numpy runs) and an empty axis (numpy's error).
    mv = np.arange(12.0, dtype=dtype).reshape(3, 4)
    got, want = f(mv.T, tv), ref(mv.T, tv)
    assert all(g.tobytes() == w.tobytes() for g, w in zip(got, want))
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum"):
        f(np.zeros((3, 0), dtype), tv)
