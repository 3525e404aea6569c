"""Regression tests for issue 18 (reliability): the reproducers of the issue, each as
it was filed, checked against numpy on every engine that can run it."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.cpu.native import ckernel
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.gradient import grad, verify_grad
from theano_dag.testing.procmem import traced_peak

OPENCL, _WHY = opencl_available()
needs_opencl = pytest.mark.skipif(not OPENCL, reason=f"no OpenCL device: {_WHY}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_zero_d_dot_into_a_planned_block_is_an_array(dtype):
    # numpy.dot(u, v, out) returns a numpy scalar for a 0-d out; the inplace add
    # after it needs the block itself.
    x = tt.vector("x", dtype=dtype)
    mode = Mode(linker=CPULinker(min_plan_bytes=0), optimizer="fast_run")
    f = function([x], tt.dot(x, x) + 1, mode=mode)
    v = np.arange(3, dtype=dtype)
    for _ in range(2):
        out = f(v)
        assert isinstance(out, np.ndarray) and out.shape == ()
        np.testing.assert_allclose(out, np.dot(v, v) + 1)


@needs_opencl
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_opencl_returns_a_copied_zero_d_value(dtype):
    # A 0-d host value was uploaded as shape (1,) (ascontiguousarray), so the copy
    # kernel compiled for 0 dimensions was looked up for 1: KeyError 'copy1_double'.
    s = tt.scalar("s", dtype=dtype)
    f = function([s], s, mode=Mode(linker="opencl"))
    out = f(1.5)
    assert np.asarray(out).shape == () and out == 1.5
    g = function([s], [s, s * 2], mode=Mode(linker="opencl"))
    assert [float(o) for o in g(2.0)] == [2.0, 4.0]


@needs_opencl
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_opencl_copies_a_repeated_output_computed_on_the_host(dtype):
    # Found by the fuzzer on the H200 (seed 402, graph 570): two equal set_subtensor
    # outputs merge into one, computed on the host (no device kernel); the DeepCopyOp
    # that keeps the second apart, added after the optimizer, wanted its input on the
    # device and compiling raised NotPlaced.
    x = tt.TensorType(dtype, shape=(None, 1))("x")
    s = tt.scalar("s", dtype=dtype)
    f = function(
        [x, s], [tt.set_subtensor(x[1:], s), tt.set_subtensor(x[1:], s)], mode=Mode(linker="opencl")
    )
    v = np.ones((3, 1), dtype=dtype)
    want = v.copy()
    want[1:] = -0.5
    a, b = f(v, -0.5)
    np.testing.assert_array_equal(a, want)
    np.testing.assert_array_equal(b, want)
    assert a is not b and not np.shares_memory(a, b)
    np.testing.assert_array_equal(v, 1.0)


def test_log_exp_rewrite_is_tagged_nonfinite_unsafe():
    # Found by the fuzzer (seed 407, graph 475): where exp(x) overflows, log(exp(x)) is
    # inf as written and x once rewritten; the difference belongs to the tag.
    x = tt.dvector("x")
    v = np.array([1.0, 800.0])
    rewritten = function([x], tt.log(tt.exp(x)), mode=Mode(linker="py", optimizer="fast_run"))
    np.testing.assert_array_equal(rewritten(v), [1.0, 800.0])
    written = function(
        [x],
        tt.log(tt.exp(x)),
        mode=Mode(linker="py", optimizer="fast_run").excluding("nonfinite_unsafe"),
    )
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(written(v), [1.0, np.inf])


@pytest.mark.parametrize("op", [tt.maximum, tt.minimum])
def test_maximum_minimum_gradient_at_a_tie_is_not_doubled(op):
    # The first input equal to the result takes the gradient (Theano, PyTensor).
    x = tt.dvector("x")
    f = function([x], grad(op(x, x).sum(), x))
    np.testing.assert_array_equal(f(np.array([1.0, -2.0])), [1.0, 1.0])
    y = tt.dvector("y")
    gx, gy = grad(op(x, y).sum(), [x, y])
    g = function([x, y], [gx, gy])
    a, b = np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 5.0])
    want_x = (op(x, y).eval({x: a, y: b}) == a).astype(float)
    rx, ry = g(a, b)
    np.testing.assert_array_equal(rx, want_x)
    np.testing.assert_array_equal(ry, 1 - want_x)
    # Away from ties the gradient is the finite-difference one.
    rng = np.random.default_rng(0)
    verify_grad(lambda u, w: op(u, w), [rng.random(4), rng.random(4) + 2], rng=rng)


# -- the cold first call: while the C library builds, numpy runs at the floor ---------


def _chain(y, lib, ops):
    x = y
    for k in range(ops):
        r = k % 4
        y = y * 0.999 if r == 0 else lib.sin(y) if r == 1 else lib.tanh(y) + x if r == 2 else abs(y)
    return y


@pytest.mark.parametrize("first_call", [True, False])
def test_cold_call_runs_the_fused_chain_in_place(monkeypatch, first_call):
    # A library that never finishes building: every call runs the numpy fallback. A
    # 40-op chain on 2^17 float64 (1 MiB a value) must hold about the output and one
    # scratch value, not the 40 intermediates Elemwise.perform keeps (issue 18: 96x).
    def never(self):
        self.started = True

    monkeypatch.setattr(ckernel.KernelLibrary, "start", never)
    x = tt.dvector("x")
    f = function([x], _chain(x, tt, 40))
    (lib,) = [f.fn.program.ckernels]
    assert lib is not None and lib.kernels, "the chain is one fused kernel"
    v = np.linspace(-1, 1, 1 << 17)
    want = _chain(v, np, 40)
    if not first_call:
        f(v)
    got, peak = traced_peak(f, v)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert not lib.kernels[0].ready
    assert peak < 3.5 * v.nbytes, f"peak {peak / v.nbytes:.1f} values"
    np.testing.assert_array_equal(v, np.linspace(-1, 1, 1 << 17))  # input intact


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cold_fallback_runs_block_by_block_with_the_same_values(monkeypatch, dtype):
    # The numpy steps run over blocks of FALLBACK_BLOCK elements (the scratch values stay
    # in the cache): full-shape inputs are cut into blocks; a broadcast row, a 0-d value
    # and a transposed (non-contiguous) input make the steps run whole. Same values as
    # the reference engine either way, the input intact.
    def never(self):
        self.started = True

    monkeypatch.setattr(ckernel.KernelLibrary, "start", never)
    calls = []
    blocked = ckernel._blocked

    def spy(fb, block=ckernel.FALLBACK_BLOCK):
        def run(*args):
            calls.append(args[-1].shape)
            return fb(*args)

        return blocked(run, block)

    monkeypatch.setattr(ckernel, "_blocked", spy)
    m, r = tt.matrix("m", dtype=dtype), tt.TensorType(dtype, shape=(1, None))("r")
    c = tt.scalar("c", dtype=dtype)
    cases = [
        ([m], tt.tanh(m * 0.5) + abs(m) * 2, False),
        ([m, c], tt.sin(m) * c + m, False),
        ([m, r], tt.sin(m) * r + m, True),
    ]
    rng = np.random.default_rng(0)
    mv = rng.uniform(-1, 1, (300, 250)).astype(dtype)
    vals = {m: mv, c: np.asarray(1.5, dtype), r: rng.uniform(-1, 1, (1, 250)).astype(dtype)}
    ref = Mode(linker="py", optimizer=None)
    for ins, out, whole in cases:
        f = function(ins, out)
        want = function(ins, out, mode=ref)(*[vals[v] for v in ins])
        for args in ([vals[v] for v in ins], [mv.T.copy().T] + [vals[v] for v in ins[1:]]):
            calls.clear()
            for _ in range(2):  # the first call runs Elemwise.perform (small) or the steps
                np.testing.assert_allclose(
                    f(*args), want, rtol=1e-6 if dtype == "float32" else 1e-14
                )
            np.testing.assert_array_equal(args[0], mv)
            blocks = len([s for s in calls if s == (1, ckernel.FALLBACK_BLOCK)])
            contiguous = args[0].flags.c_contiguous
            assert (blocks > 0) == (contiguous and not whole), (out, contiguous, calls[:3])


# -- bugs the fuzzer found (theano_dag/testing/fuzz.py) --------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inc_subtensor_of_a_full_slice_of_a_slice(dtype):
    # x[:] was x itself, so inc_subtensor(v[1:][:], y) updated v, not v[1:] (fuzzer
    # seed 1, graph 453: shape (3, 4) where numpy and PyTensor give (2, 4)).
    v = tt.matrix("v", dtype=dtype)
    y = tt.scalar("y", dtype=dtype)
    a = np.arange(12, dtype=dtype).reshape(3, 4)
    for op, want in ((tt.inc_subtensor, a[1:] + 2), (tt.set_subtensor, np.full((2, 4), 2))):
        for mode in (None, Mode(linker="py", optimizer=None)):
            f = function([v, y], op(v[1:][:], y), mode=mode)
            np.testing.assert_array_equal(f(a, 2), want.astype(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_zero_minus_x_keeps_the_shape_of_the_zeros(dtype):
    # (v - v) - u -> -u dropped the zeros' shape (fuzzer seed 2, graph 29): (1, 4)
    # where numpy gives (3, 4).
    u = tt.vector("u", dtype=dtype)
    v = tt.TensorType(dtype, shape=(None, 1))("v")
    a, b = np.arange(4, dtype=dtype), np.ones((3, 1), dtype)
    for mode in (None, Mode(linker="py", optimizer="fast_run")):
        f = function([u, v], (v - v) - u, mode=mode)
        np.testing.assert_array_equal(f(a, b), np.broadcast_to(-a, (3, 4)))


def test_a_broadcast_fill_output_is_its_own_array():
    # u + (m - m) -> a fill of u to m's shape: the CPU engine returned a read-only
    # broadcast view of the input u (fuzzer seed 2, graph 310).
    u, m = tt.dvector("u"), tt.dmatrix("m")
    f = function([u, m], u + (m - m))
    a = np.arange(4.0)
    r = f(a, np.ones((3, 4)))
    np.testing.assert_array_equal(r, np.broadcast_to(a, (3, 4)))
    assert not np.shares_memory(r, a) and r.flags.writeable


def _engine_modes():
    modes = [("py", Mode(linker="py", optimizer=None)), ("cpu", None)]
    if OPENCL:
        modes.append(("opencl", Mode(linker="opencl")))
    return modes


def test_cold_call_of_a_0d_chain_gives_numpy_scalars_no_out(monkeypatch):
    # The in-place fallback wrote a step into its dying scratch input; on 0-d values that
    # input is a numpy scalar, and the ufunc refused it ("return arrays must be of
    # ArrayType", seen in a fresh clone's CI run: Rop through scan on a cold cache).
    def never(self):
        self.started = True

    monkeypatch.setattr(ckernel.KernelLibrary, "start", never)
    x, c = tt.dscalar("x"), tt.dscalar("c")
    y = tt.fma(c, (x + 1) * tt.cos(x), -(c * (x + 2) * tt.sin(x)))
    f = function([x, c], y)
    want = 0.7 * ((0.3 + 1) * np.cos(0.3)) - 0.7 * (0.3 + 2) * np.sin(0.3)
    for _ in range(3):  # the first call runs Elemwise.perform, the next the numpy steps
        np.testing.assert_allclose(f(0.3, 0.7), want, rtol=1e-14)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_engines_agree_on_non_finite_clip_and_floor_division(dtype):
    # OpenCL's clip ignored a NaN bound, and its floor(x / y) gave inf for inf // 0.5
    # and 10 for 1 // 0.1 (numpy: NaN and 9); the C kernels run numpy's divmod too.
    x, lo, hi, y = (tt.vector("x", dtype=dtype), tt.scalar("lo", dtype=dtype),
                    tt.scalar("hi", dtype=dtype), tt.vector("y", dtype=dtype))  # fmt: skip
    xv = np.array([-2.0, 0.5, 3.0, np.nan, np.inf, -np.inf, 1.0, -7.5], dtype)
    yv = np.array([0.5, 0.1, -0.3, 2.0, 0.5, 0.5, np.inf, -np.inf], dtype)
    nan = np.array(np.nan, dtype)
    for name, mode in _engine_modes():
        with ckernel.compile_mode("sync"):
            f = function([x, lo, hi, y], [tt.clip(x, lo, hi), x // y], mode=mode)
            for bounds in ((nan, np.array(1, dtype)), (np.array(0, dtype), nan)):
                c, d = f(xv, *bounds, yv)
                np.testing.assert_array_equal(np.asarray(c), np.clip(xv, *bounds), err_msg=name)
                with np.errstate(all="ignore"):
                    want = np.floor_divide(xv, yv)
                np.testing.assert_array_equal(np.asarray(d), want, err_msg=name)


def _theanos_clip(x, lo, hi):
    return np.where(x < lo, lo, np.where(x > hi, hi, x))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_engines_clip_as_theano_where_lo_exceeds_hi(dtype):
    # Theano's clip gives lo where x < lo, then hi where x > hi: with lo > hi, lo below
    # lo and hi elsewhere (numpy's minimum(maximum(x, lo), hi) gives hi everywhere). Alone,
    # and fused into a larger kernel (clip(2 * x, ...) + 1).
    x, lo, hi = (
        tt.vector("x", dtype=dtype),
        tt.scalar("lo", dtype=dtype),
        tt.scalar("hi", dtype=dtype),
    )
    xv = np.array([-4, -1, 0, 1, 2, 5], dtype)
    for name, mode in _engine_modes():
        with ckernel.compile_mode("sync"):
            f = function([x, lo, hi], [tt.clip(x, lo, hi), tt.clip(2 * x, lo, hi) + 1], mode=mode)
            for bounds in ((1, -1), (-1, 1), (2, 2), (0, -3)):
                b = [np.array(v, dtype) for v in bounds]
                for _ in range(2):  # a first call and the compiled kernels' calls
                    c, d = f(xv, *b)
                    np.testing.assert_array_equal(c, _theanos_clip(xv, *b), err_msg=name)
                    np.testing.assert_array_equal(d, _theanos_clip(2 * xv, *b) + 1, err_msg=name)


def test_clip_gradient_goes_to_the_bound_it_gives():
    x, lo, hi = tt.dvector("x"), tt.dscalar("lo"), tt.dscalar("hi")
    out = tt.clip(x, lo, hi).sum()
    f = function([x, lo, hi], grad(out, [x, lo, hi]))
    xv = np.array([-3.0, 0.0, 0.5, 3.0])
    gx, glo, ghi = f(xv, 1.0, -1.0)  # lo > hi: lo for -3, 0 and 0.5, hi for 3
    np.testing.assert_array_equal(gx, [0, 0, 0, 0])
    assert (glo, ghi) == (3.0, 1.0)
    gx, glo, ghi = f(xv, -1.0, 1.0)
    np.testing.assert_array_equal(gx, [0, 1, 1, 0])
    assert (glo, ghi) == (1.0, 1.0)
    verify_grad(lambda v: tt.clip(v, 0.7, -0.7), [np.array([-2.0, 0.1, 0.9, 3.0])])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_product_with_an_infinite_constant_is_left_as_written(dtype):
    # x / (inf / x) became sqr(x) / inf: NaN once sqr(x) overflows (float32 x = -1e30)
    # where the graph as written gives 0, on every engine and FAST_RUN's rewrites.
    x = tt.vector("x", dtype=dtype)
    xv = np.array([-1e30, 2.0, -3.0, 1e-30], dtype)
    with np.errstate(all="ignore"):
        want = xv / (np.array(np.inf, dtype) / xv)
    modes = _engine_modes() + [("py fast_run", Mode(linker="py", optimizer="fast_run"))]
    for name, mode in modes:
        with ckernel.compile_mode("sync"):
            f = function([x], x / (np.array(np.inf, dtype) / x), mode=mode)
            np.testing.assert_array_equal(np.asarray(f(xv)), want, err_msg=name)


def test_reassociated_products_are_tagged_and_can_be_excluded():
    # The canonical product reorders factors: float32 x * (x * 1e-30) is 1e30 at x =
    # 1e30, its reorder (x * x) * 1e-30 inf. Excluding "reassociate" (the flattening of
    # nested products and both canonizers) keeps the written order.
    x = tt.fvector("x")
    xv = np.array([1e30, 2.0], "float32")
    y = x * (x * np.float32(1e-30))
    want = xv * (xv * np.float32(1e-30))
    fast_run = Mode(linker="py", optimizer="fast_run")
    assert np.isinf(function([x], y, mode=fast_run)(xv)[0])
    f = function([x], y, mode=fast_run.excluding("reassociate"))
    np.testing.assert_array_equal(f(xv), want)


@needs_opencl
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_opencl_trigonometry_with_a_lane_near_overflow(dtype):
    # PoCL's float8 sin/cos/tan: with 8.5e37 in one lane, sin(4.7e-38) in another gave
    # 0.0078 (fuzzer seed 13, graph 192); float32 trigonometry runs the scalar kernel.
    info = np.finfo(dtype)
    xv = np.array([np.nan, np.inf, -np.inf, info.max / 4, -info.max / 4, info.tiny * 4, 0, 3.0])
    xv = np.tile(xv.astype(dtype), 4)
    x = tt.vector("x", dtype=dtype)
    f = function([x], [tt.sin(x), tt.cos(x), tt.tan(x)], mode=Mode(linker="opencl"))
    with np.errstate(all="ignore"):
        wants = [np.sin(xv), np.cos(xv), np.tan(xv)]
    for got, want in zip(f(xv), wants):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=0, equal_nan=True)
