"""Convolution on the engines: the CPU engine's im2col emitters (forward, both gradients)
and the OpenCL engine (PoCL), each against the reference engine and the loop-written
numpy reference, float32 and float64; gradients by finite differences; the workspaces
planned by the memory planner."""

from __future__ import annotations

import contextlib
import os
import sys

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.engines.cpu.emit import conv as cpu_conv
from theano_dag.engines.cpu.emit.impls import Temp
from theano_dag.engines.cpu.linker import CPULinker, CPUThunk
from theano_dag.engines.memory import check_plan
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.gradient import grad, verify_grad
from theano_dag.tensor import nnet
from theano_dag.tensor.nnet import Conv2dBiasAct
from theano_dag.tensor.nnet.pool import Pool

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tensor"))
from nnet_reference import ref_conv2d, ref_conv_grad_inputs, ref_conv_grad_weights  # noqa: E402

REF = Mode(linker="py", optimizer=None)
CPU = Mode(linker=CPULinker(min_plan_bytes=0))
OCL_OK, OCL_WHY = opencl_available()
ENGINES = [
    "cpu",
    pytest.param("opencl", marks=pytest.mark.skipif(not OCL_OK, reason=f"no OpenCL: {OCL_WHY}")),
]
FLOATS = ("float32", "float64")

CASES = {
    "valid": ((2, 3, 5, 6), (4, 3, 3, 2), {}),
    "half": ((2, 3, 5, 5), (2, 3, 3, 3), dict(border_mode="half")),
    "full-stride2": ((1, 2, 5, 4), (3, 2, 2, 3), dict(border_mode="full", subsample=2)),
    "asym-pad-dilated": (
        (2, 2, 7, 6),
        (2, 2, 2, 3),
        dict(border_mode=(1, (0, 2)), subsample=(2, 1), filter_dilation=(2, 1)),
    ),
    "groups-noflip": ((2, 4, 5, 5), (6, 2, 3, 3), dict(num_groups=2, filter_flip=False)),
    "1x1-pad2-stride3": ((1, 3, 4, 5), (2, 3, 1, 1), dict(border_mode=2, subsample=3)),
    "1x1-plain": ((3, 4, 5, 5), (6, 4, 1, 1), {}),
    "1x1-groups": ((3, 4, 5, 5), (6, 2, 1, 1), dict(num_groups=2)),
    "7x7-stride2-pad3": ((1, 3, 13, 12), (4, 3, 7, 7), dict(border_mode=3, subsample=2)),
    "depthwise": ((2, 3, 6, 6), (3, 1, 3, 3), dict(num_groups=3, border_mode=1)),
}


def mode_of(engine):
    return CPU if engine == "cpu" else Mode(linker="opencl")


def _graph(xs, ws, kw, dtype):
    x = tt.TensorType(dtype, shape=(None,) * 4)("x")
    w = tt.TensorType(dtype, shape=(None, None) + ws[2:])("w")
    y = nnet.conv2d(x, w, **kw)
    gy = tt.TensorType(dtype, shape=(None,) * 4)("gy")
    # The gradients with a given output gradient: <y, gy> differentiated.
    gx, gw = grad((y * gy).sum(), [x, w])
    return [x, w, gy], [y, gx, gw]


def _values(xs, ws, kw, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    ys = ref_conv2d(np.zeros(xs), np.zeros(ws), **kw).shape
    return x, w, rng.standard_normal(ys).astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_conv_values(case, engine, dtype):
    xs, ws, kw = CASES[case]
    ins, outs = _graph(xs, ws, kw, dtype)
    vals = _values(xs, ws, kw, dtype)
    got = function(ins, outs, mode=mode_of(engine))(*vals)
    ref = function(ins, outs, mode=REF)(*vals)
    x, w, gy = (v.astype("float64") for v in vals)
    loops = [
        ref_conv2d(x, w, **kw),
        ref_conv_grad_inputs(w, gy, xs[2:], **kw),
        ref_conv_grad_weights(x, gy, ws[2:], **kw),
    ]
    tol = 1e-4 if dtype == "float32" else 1e-10
    for g, r, lp in zip(got, ref, loops):
        g = np.asarray(g)
        assert g.dtype == dtype and g.shape == lp.shape
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol)
        np.testing.assert_allclose(g, lp, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", ["half", "asym-pad-dilated", "groups-noflip", "1x1-plain"])
def test_cpu_conv_runs_the_emitters_with_planned_workspaces(case):
    xs, ws, kw = CASES[case]
    ins, outs = _graph(xs, ws, kw, "float64")
    f = function(ins, outs, mode=CPU)
    f(*_values(xs, ws, kw, "float64"))
    assert isinstance(f.fn, CPUThunk)
    src = f.fn.source()
    for name in ("conv_forward", "conv_grad_inputs", "conv_grad_weights"):
        assert name in src
    plan = f.fn.current
    check_plan(*plan.plan_input, plan.memory)
    temps = {}
    for v, c in plan.cat.items():
        if isinstance(v, Temp):
            assert c == "pooled"
            temps.setdefault(v.label, []).append(plan.shapes[v])
    assert sorted(temps) == ["conv_acc", "conv_cols", "conv_pad"]
    # A workspace the convolution does not need is empty.
    assert (temps["conv_cols"][0] == (0,)) == (case == "1x1-plain")
    assert all((s == (0,)) == (case not in ("half", "asym-pad-dilated")) for s in temps["conv_pad"])


@pytest.mark.parametrize("case", sorted(CASES))
def test_cpu_conv_filters_of_unknown_shape(case):
    # The filters' size known only at the call: the geometry and workspaces follow it.
    xs, ws, kw = CASES[case]
    x, w, gy = (tt.dtensor4(n) for n in ("x", "w", "gy"))
    y = nnet.conv2d(x, w, **kw)
    outs = [y, *grad((y * gy).sum(), [x, w])]
    vals = _values(xs, ws, kw, "float64")
    f = function([x, w, gy], outs, mode=CPU)
    got = f(*vals)
    assert "conv_grad_weights" in f.fn.source()
    for g, r in zip(got, function([x, w, gy], outs, mode=REF)(*vals)):
        np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-10)


def test_cpu_conv_batches_in_chunks(monkeypatch):
    # A workspace limit below one image's columns: one image per chunk.
    monkeypatch.setattr(cpu_conv, "WORKSPACE_MAX_BYTES", 64)
    xs, ws, kw = (5, 3, 6, 6), (4, 3, 3, 3), dict(border_mode="half", subsample=2)
    ins, outs = _graph(xs, ws, kw, "float64")
    vals = _values(xs, ws, kw, "float64")
    f = function(ins, outs, mode=Mode(linker=CPULinker(min_plan_bytes=0)))
    got = f(*vals)
    cols = [v for v in f.fn.current.cat if isinstance(v, Temp) and v.label == "conv_cols"]
    assert {f.fn.current.shapes[v][0] for v in cols} == {1}
    for g, r in zip(got, function(ins, outs, mode=REF)(*vals)):
        np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("num_groups", [1, 2])
def test_cpu_conv_columns_in_tiles_of_rows(monkeypatch, num_groups, dtype):
    # A tile limit of three output rows' columns (4 channels x 3 x 3 taps x 3 columns):
    # the forward convolution runs over rows 0-2, 3-5, 6-7 of each image, the last tile
    # shorter, with a bias, a scale and a relu applied tile by tile; stride and dilation
    # move each tile's first input row.
    itemsize = np.dtype(dtype).itemsize
    monkeypatch.setattr(cpu_conv, "TILE_BYTES", 4 * 9 * 3 * itemsize * 3 + 1)
    t4 = tt.TensorType(dtype, shape=(None,) * 4)
    x, w = t4("x"), t4("w")
    b, s = (tt.TensorType(dtype, shape=(None,))(n) for n in "bs")
    params = dict(border_mode=(2, 1), subsample=(2, 1), filter_dilation=(2, 1))
    y = Conv2dBiasAct(activation="relu", num_groups=num_groups, filter_flip=False, **params)(
        x, w, b, s
    )
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((2, 4, 15, 3)).astype(dtype)
    wv = rng.standard_normal((6, 4 // num_groups, 3, 3)).astype(dtype)
    bv, sv = rng.standard_normal((2, 6)).astype(dtype)
    f = function([x, w, b, s], y, mode=Mode(linker=CPULinker(min_plan_bytes=0), optimizer=None))
    got = f(xv, wv, bv, sv)
    assert got.shape == (2, 6, 8, 3)
    cols = [v for v in f.fn.current.cat if isinstance(v, Temp) and v.label == "conv_cols"]
    assert [f.fn.current.shapes[v] for v in cols] == [(1, 4 * 9, 3 * 3)]
    want = function([x, w, b, s], y, mode=REF)(xv, wv, bv, sv)
    tol = 2e-5 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_cpu_conv_non_contiguous_input():
    x = tt.dtensor4("x")
    w = tt.TensorType("float64", shape=(None, None, 3, 3))("w")
    y = nnet.conv2d(x.dimshuffle(0, 1, 3, 2), w, border_mode="half")
    rng = np.random.default_rng(5)
    xv, wv = rng.standard_normal((2, 3, 5, 4)), rng.standard_normal((2, 3, 3, 3))
    np.testing.assert_allclose(
        function([x, w], y, mode=CPU)(xv, wv),
        ref_conv2d(xv.transpose(0, 1, 3, 2), wv, border_mode="half"),
        rtol=1e-10,
        atol=1e-10,
    )


KERNELS = cpu_conv.conv_kernels()
needs_c = pytest.mark.skipif(KERNELS is None, reason="no C compiler (config.cxx)")


class _Counting(cpu_conv.ConvKernels):
    """The C kernels, counting the calls that they took."""

    def __init__(self, kernels):
        self.__dict__.update(kernels.__dict__)
        self.taken = {"im2col": 0, "epilogue": 0}

    def im2col(self, *args):
        took = super().im2col(*args)
        self.taken["im2col"] += took
        return took

    def epilogue(self, *args):
        took = super().epilogue(*args)
        self.taken["epilogue"] += took
        return took


@needs_c
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_cpu_conv_c_kernels_match_numpy(case, dtype, monkeypatch):
    # The C im2col and epilogue against numpy's strided copies, on every geometry (the
    # forward in tiles of two output rows, and the filters' gradient), with a scale, a
    # bias and a relu, and a NaN in the image that the relu keeps (numpy's maximum).
    monkeypatch.setattr(cpu_conv, "TILE_BYTES", 1)
    xs, ws, kw = CASES[case]
    x, w, gy = _values(xs, ws, kw, dtype)
    x[0, 0, 1, 1] = np.nan
    rng = np.random.default_rng(7)
    bias, scale = rng.standard_normal((2, ws[0])).astype(dtype)
    op = nnet.abstract_conv.AbstractConv2d(**kw)
    numpy_geo = cpu_conv.ConvGeometry(op, ws[2:])
    kernels = _Counting(KERNELS)
    c_geo = cpu_conv.ConvGeometry(op, ws[2:], kernels)
    for scaled in (None, scale):
        args = (x, w, None, None, None)
        want = cpu_conv.conv_forward(*args, numpy_geo, bias, True, scaled)
        got = cpu_conv.conv_forward(*args, c_geo, bias, True, scaled)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        assert np.isnan(want).any()
        tol = 1e-5 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    want = cpu_conv.conv_grad_weights(x, gy, None, None, None, None, numpy_geo)
    got = cpu_conv.conv_grad_weights(x, gy, None, None, None, None, c_geo)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert kernels.taken["epilogue"] > 0
    assert kernels.taken["im2col"] > 0 or numpy_geo.plain


WINOGRAD_CASES = {
    # image, filters, conv2d keywords: odd and even sides (tiles past the border), padding
    "half-flip-batch2": ((2, 3, 7, 9), (4, 3, 3, 3), dict(border_mode="half")),
    "valid-even": ((1, 4, 8, 8), (2, 4, 3, 3), dict(filter_flip=False)),
    "pad-2-1": ((2, 5, 6, 5), (3, 5, 3, 3), dict(border_mode=(2, 1))),
    "one-row-of-output": ((1, 2, 3, 11), (3, 2, 3, 3), dict(filter_flip=False)),
}


@needs_c
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", sorted(WINOGRAD_CASES))
def test_cpu_conv_winograd_matches_im2col(case, dtype, monkeypatch):
    # Every output size takes Winograd's F(2x2, 3x3) here; bands of one tile row; the
    # epilogue (scale, bias, relu) in its output transform. (An image with a NaN takes
    # im2col: test_cpu_conv_winograd_nonfinite_values_take_im2col.)
    monkeypatch.setattr(cpu_conv, "WINOGRAD_MIN_PIXELS", 0)
    monkeypatch.setattr(cpu_conv, "WINOGRAD_MIN_CHANNELS", 0)
    monkeypatch.setattr(cpu_conv, "WINOGRAD_BAND_BYTES", 1)
    xs, ws, x, w, bias, scale, numpy_geo, wino_geo = _winograd_case(WINOGRAD_CASES[case], dtype)
    assert wino_geo.winograd(numpy_geo.out_hw(xs[2:]), dtype, xs[1])
    calls = []
    monkeypatch.setattr(cpu_conv, "_winograd_forward", _spy(cpu_conv._winograd_forward, calls))
    tol = 2e-5 if dtype == "float32" else 1e-12
    for args in [(None, False, None), (bias, True, None), (bias, True, scale), (None, True, scale)]:
        want = cpu_conv.conv_forward(x, w, None, None, None, numpy_geo, *args)
        got = cpu_conv.conv_forward(x, w, None, None, None, wino_geo, *args)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert calls == [True] * 4


@needs_c
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", sorted(WINOGRAD_CASES))
def test_cpu_conv_winograd4_matches_im2col(case, dtype, monkeypatch):
    # F(4x4, 3x3): 6x6 tiles 4 apart (odd and even sides: tiles past the border), in
    # bands of one tile row and in one band; the epilogue in the output transform. An
    # image with a NaN or an infinity takes im2col: a 6x6 tile would spread it to
    # outputs whose windows do not hold it.
    monkeypatch.setattr(cpu_conv, "WINOGRAD_MIN_PIXELS", 0)
    monkeypatch.setattr(cpu_conv, "WINOGRAD_MIN_CHANNELS", 0)
    monkeypatch.setattr(cpu_conv, "WINOGRAD4_MIN_PIXELS", 0)
    xs, ws, x, w, bias, scale, numpy_geo, wino_geo = _winograd_case(WINOGRAD_CASES[case], dtype)
    out_hw = numpy_geo.out_hw(xs[2:])
    assert wino_geo.winograd(out_hw, dtype, xs[1]) and wino_geo.wino_tile(out_hw) == 4
    calls = []
    monkeypatch.setattr(cpu_conv, "_winograd_forward", _spy(cpu_conv._winograd_forward, calls))
    tol = 5e-5 if dtype == "float32" else 1e-12
    _matches_im2col_in_bands(x, w, bias, scale, numpy_geo, wino_geo, tol, monkeypatch)
    assert calls == [True] * 6
    for bad in (np.nan, np.inf):
        x[-1, -1, 1, 2] = bad
        want = cpu_conv.conv_forward(x, w, None, None, None, numpy_geo, bias, False, scale)
        got = cpu_conv.conv_forward(x, w, None, None, None, wino_geo, bias, False, scale)
        np.testing.assert_array_equal(got, want)
    assert calls == [True] * 6 + [False] * 2


def test_winograd_tile_by_output_size():
    geo = cpu_conv.ConvGeometry(nnet.abstract_conv.AbstractConv2d(border_mode="half"), (3, 3))
    big = cpu_conv.WINOGRAD4_MIN_PIXELS
    assert geo.wino_tile((35, 35)) == 4 and geo.wino_tile((1, big - 1)) == 2
    g5 = cpu_conv.ConvGeometry(nnet.abstract_conv.AbstractConv2d(border_mode="half"), (5, 5))
    assert g5.wino_tile((35, 35)) == 2 and g5.wino_blocks == 4  # 5x5: F(2x2, 3x3) blocks
    # F(4x4, 3x3)'s workspace: 36 slabs of filters, band image and products
    t = 9 * 9  # one band of 9 x 9 tiles: 35 / 4 rounded up
    slab = cpu_conv._slab
    assert geo.winograd_shape(8, 4, (35, 35), 8) == (
        36 * (4 * 8 + slab(8 * t, 8) + slab(4 * t, 8)),
    )


WINOGRAD5_CASES = {
    # 5x5 filters as four 3x3 blocks: odd and even sides, padding, flipped filters
    "half-flip-batch2": ((2, 3, 9, 7), (4, 3, 5, 5), dict(border_mode="half")),
    "valid-even": ((1, 4, 12, 10), (2, 4, 5, 5), dict(filter_flip=False)),
    "pad-1-2": ((1, 5, 6, 5), (3, 5, 5, 5), dict(border_mode=(1, 2))),
    "full": ((1, 2, 3, 4), (3, 2, 5, 5), dict(border_mode="full")),
}


@needs_c
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", sorted(WINOGRAD5_CASES))
def test_cpu_conv_winograd5_matches_im2col(case, dtype, monkeypatch):
    # 5x5 filters zeroed to 6x6 and split into four 3x3 blocks, each block's F(2x2, 3x3)
    # tiles of the image moved by (3p, 3q), one product over the blocks; in bands of one
    # tile row and in one band; the epilogue in the output transform. An image with a
    # NaN or an infinity takes im2col (the zeroed taps would pass it on).
    monkeypatch.setattr(cpu_conv, "WINOGRAD_MIN_PIXELS", 0)
    monkeypatch.setattr(cpu_conv, "WINOGRAD_MIN_CHANNELS", 0)
    xs, ws, x, w, bias, scale, numpy_geo, wino_geo = _winograd_case(WINOGRAD5_CASES[case], dtype)
    assert wino_geo.winograd(numpy_geo.out_hw(xs[2:]), dtype, xs[1]) and wino_geo.wino_blocks == 4
    calls = []
    monkeypatch.setattr(cpu_conv, "_winograd_forward", _spy(cpu_conv._winograd_forward, calls))
    tol = 2e-5 if dtype == "float32" else 1e-12
    _matches_im2col_in_bands(x, w, bias, scale, numpy_geo, wino_geo, tol, monkeypatch)
    assert calls == [True] * 6
    for bad in (np.nan, -np.inf):
        x[-1, -1, 1, 1] = bad
        want = cpu_conv.conv_forward(x, w, None, None, None, numpy_geo, bias, False, scale)
        got = cpu_conv.conv_forward(x, w, None, None, None, wino_geo, bias, False, scale)
        np.testing.assert_array_equal(got, want)
    assert calls == [True] * 6 + [False] * 2


class _FakeBlas:
    """Stands for threadpoolctl's controller: records the limits asked for."""

    def __init__(self):
        self.limits = []

    def limit(self, limits, user_api):
        self.limits.append((limits, user_api))
        return contextlib.nullcontext()


@needs_c
@pytest.mark.parametrize("dtype", FLOATS)
def test_cpu_conv_winograd_bands_shared_between_threads_are_bit_for_bit(dtype, monkeypatch):
    # With a BLAS of several threads (threadpoolctl), the bands go to as many threads of
    # the engine, each product on one BLAS thread: the same arithmetic, band by band.
    monkeypatch.setattr(cpu_conv, "WINOGRAD_MIN_PIXELS", 0)
    monkeypatch.setattr(cpu_conv, "WINOGRAD_MIN_CHANNELS", 0)
    monkeypatch.setattr(cpu_conv, "WINOGRAD_BAND_BYTES", 1)  # one tile row a band
    xs, ws, kw = (3, 5, 9, 11), (4, 5, 3, 3), dict(border_mode="half")
    x, w, _ = _values(xs, ws, kw, dtype)
    bias, scale = np.random.default_rng(9).standard_normal((2, ws[0])).astype(dtype)
    geo = cpu_conv.ConvGeometry(nnet.abstract_conv.AbstractConv2d(**kw), (3, 3), KERNELS)
    seen = []

    def share(workers):
        fake = _FakeBlas()

        def blas_threads(n_bands, flops):
            seen.append(n_bands)
            return None if workers == 1 else (fake, workers)

        return fake, blas_threads

    outs = []
    for workers in (1, 2, 4):
        fake, fn = share(workers)
        monkeypatch.setattr(cpu_conv, "_blas_threads", fn)
        outs.append(cpu_conv.conv_forward(x, w, None, None, None, geo, bias, True, scale))
        assert fake.limits == ([] if workers == 1 else [(1, "blas")])
    assert seen == [3 * 5] * 3  # 3 images of 5 tile rows
    for got in outs[1:]:
        np.testing.assert_array_equal(got, outs[0])
    numpy_geo = cpu_conv.ConvGeometry(nnet.abstract_conv.AbstractConv2d(**kw), (3, 3))
    want = cpu_conv.conv_forward(x, w, None, None, None, numpy_geo, bias, True, scale)
    tol = 2e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(outs[0], want, rtol=tol, atol=tol)


@needs_c
def test_cpu_conv_winograd_threads_fall_back_when_the_blas_refuses_a_limit(monkeypatch):
    monkeypatch.setattr(cpu_conv, "WINOGRAD_MIN_PIXELS", 0)
    monkeypatch.setattr(cpu_conv, "WINOGRAD_MIN_CHANNELS", 0)
    xs, ws, kw = WINOGRAD_CASES["half-flip-batch2"]
    x, w, _ = _values(xs, ws, kw, "float64")
    geo = cpu_conv.ConvGeometry(nnet.abstract_conv.AbstractConv2d(**kw), (3, 3), KERNELS)
    want = cpu_conv.conv_forward(x, w, None, None, None, geo, None, False, None)

    class Refusing:
        def limit(self, limits, user_api):
            raise OSError("no such symbol: openblas_set_num_threads")

    monkeypatch.setattr(cpu_conv, "_blas_threads", lambda n, flops: (Refusing(), 2))
    got = cpu_conv.conv_forward(x, w, None, None, None, geo, None, False, None)
    np.testing.assert_array_equal(got, want)


def test_winograd_threads_only_for_work_worth_them(monkeypatch):
    big = cpu_conv.WINOGRAD_THREADS_MIN_FLOPS
    assert cpu_conv._blas_threads(1, 10 * big) is None  # one band
    assert cpu_conv._blas_threads(8, big - 1) is None  # too little work
    monkeypatch.setattr(cpu_conv, "ThreadpoolController", None)  # threadpoolctl missing
    monkeypatch.setattr(cpu_conv, "_BLAS_CONTROL", [])
    assert cpu_conv._blas_threads(8, 10 * big) is None


def _winograd_case(case, dtype):
    """``(xs, ws, x, w, bias, scale, numpy_geo, wino_geo)`` of a Winograd test case
    ``(image shape, filters shape, the op's keywords)``: the values, an epilogue's bias
    and scale, and the geometries without and with the C kernels."""
    xs, ws, kw = case
    x, w, _ = _values(xs, ws, kw, dtype)
    bias, scale = np.random.default_rng(8).standard_normal((2, ws[0])).astype(dtype)
    op = nnet.abstract_conv.AbstractConv2d(**kw)
    numpy_geo = cpu_conv.ConvGeometry(op, ws[2:])
    return xs, ws, x, w, bias, scale, numpy_geo, cpu_conv.ConvGeometry(op, ws[2:], KERNELS)


def _matches_im2col_in_bands(x, w, bias, scale, numpy_geo, wino_geo, tol, monkeypatch):
    """The Winograd path's outputs against im2col's within ``tol``, in bands of one tile
    row and in one band, without and with the epilogue."""
    for band in (1, cpu_conv.WINOGRAD_BAND_BYTES):
        monkeypatch.setattr(cpu_conv, "WINOGRAD_BAND_BYTES", band)
        for args in [(None, False, None), (bias, True, None), (bias, True, scale)]:
            want = cpu_conv.conv_forward(x, w, None, None, None, numpy_geo, *args)
            got = cpu_conv.conv_forward(x, w, None, None, None, wino_geo, *args)
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def _spy(fn, calls):
    def spy(*args):
        calls.append(fn(*args))
        return calls[-1]

    return spy


@needs_c
@pytest.mark.parametrize("dtype", FLOATS)
def test_cpu_conv_winograd_in_a_function(dtype, monkeypatch):
    # Through the engine: the columns' workspace is planned with Winograd's shape
    # (transformed filters, then a band of image and products), values as the reference.
    monkeypatch.setattr(cpu_conv, "WINOGRAD_MIN_PIXELS", 0)
    monkeypatch.setattr(cpu_conv, "WINOGRAD_MIN_CHANNELS", 0)
    xs, ws, kw = WINOGRAD_CASES["half-flip-batch2"]
    t4 = tt.TensorType(dtype, shape=(None,) * 4)
    x, w = t4("x"), t4("w")
    y = nnet.conv2d(x, w, **kw)
    f = function([x, w], y, mode=CPU)
    xv, wv, _ = _values(xs, ws, kw, dtype)
    got = f(xv, wv)
    cols = [v for v in f.fn.current.cat if isinstance(v, Temp) and v.label == "conv_cols"]
    geo = cpu_conv.ConvGeometry(nnet.abstract_conv.AbstractConv2d(**kw), (3, 3), KERNELS)
    itemsize = np.dtype(dtype).itemsize
    assert [f.fn.current.shapes[v] for v in cols] == [geo.winograd_shape(3, 4, (7, 9), itemsize)]
    check_plan(*f.fn.current.plan_input, f.fn.current.memory)
    tol = 2e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, function([x, w], y, mode=REF)(xv, wv), rtol=tol, atol=tol)


WINOGRAD7_CASES = {
    # image, filters, conv2d keywords: odd and even sides (a last tile past the border),
    # padding along either axis or both, flipped filters, a batch
    "7x1-half-flip-batch2": ((2, 3, 9, 5), (4, 3, 7, 1), dict(border_mode="half")),
    "7x1-valid-even": ((1, 4, 12, 6), (2, 4, 7, 1), dict(filter_flip=False)),
    "7x1-pad-3-2": ((1, 5, 8, 7), (3, 5, 7, 1), dict(border_mode=(3, 2))),
    "1x7-half-flip-batch2": ((2, 3, 5, 9), (4, 3, 1, 7), dict(border_mode="half")),
    "1x7-valid-even": ((1, 4, 6, 12), (2, 4, 1, 7), dict(filter_flip=False)),
    "1x7-pad-1-3-narrow": ((1, 5, 4, 2), (3, 5, 1, 7), dict(border_mode=(1, 3))),
}


@needs_c
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", sorted(WINOGRAD7_CASES))
def test_cpu_conv_winograd7_matches_im2col(case, dtype, monkeypatch):
    # 1x7 and 7x1 filters as Winograd's F(3, 7) along their axis, in bands of one outer
    # row (and in one band); the epilogue in the output transform. An image with a NaN
    # takes im2col: F(3, 7) would spread it to outputs whose windows do not hold it.
    monkeypatch.setattr(cpu_conv, "WINOGRAD7_MIN_PIXELS", 0)
    monkeypatch.setattr(cpu_conv, "WINOGRAD_MIN_CHANNELS", 0)
    xs, ws, x, w, bias, scale, numpy_geo, wino_geo = _winograd_case(WINOGRAD7_CASES[case], dtype)
    axis = "rows" if ws[2] == 7 else "cols"
    assert wino_geo.winograd7(numpy_geo.out_hw(xs[2:]), dtype, xs[1]) == axis
    calls = []
    monkeypatch.setattr(cpu_conv, "_winograd7_forward", _spy(cpu_conv._winograd7_forward, calls))
    # F(3, 7) rounds more than im2col: its transforms scale by up to 10.6 and 1/315
    tol = 5e-5 if dtype == "float32" else 1e-12
    _matches_im2col_in_bands(x, w, bias, scale, numpy_geo, wino_geo, tol, monkeypatch)
    assert calls == [True] * 6
    for bad in (np.nan, np.inf):
        x[-1, -1, 1, 1] = bad
        want = cpu_conv.conv_forward(x, w, None, None, None, numpy_geo, bias, False, scale)
        got = cpu_conv.conv_forward(x, w, None, None, None, wino_geo, bias, False, scale)
        np.testing.assert_array_equal(got, want)  # im2col's, NaNs and infinities in place
        assert np.isnan(want).any() if bad != bad else np.isinf(want).any()
    assert calls == [True] * 6 + [False] * 2


NONFINITE_CASES = {
    # filters, the Winograd path (a thresholds override) that would take them
    "3x3-F(2x2)": ((3, 4, 3, 3), {"WINOGRAD4_MIN_PIXELS": 10**9}),
    "3x3-F(4x4)": ((3, 4, 3, 3), {"WINOGRAD4_MIN_PIXELS": 0}),
    "5x5-blocks": ((3, 4, 5, 5), {}),
    "7x1-F(3,7)": ((3, 4, 7, 1), {"WINOGRAD7_MIN_PIXELS": 0}),
    "1x7-F(3,7)": ((3, 4, 1, 7), {"WINOGRAD7_MIN_PIXELS": 0}),
}


@needs_c
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("where", ["image", "filters"])
@pytest.mark.parametrize("case", sorted(NONFINITE_CASES))
def test_cpu_conv_winograd_nonfinite_values_take_im2col(case, where, dtype, monkeypatch):
    # A Winograd transform adds and subtracts neighbours: an infinity in two products of
    # a tile gives inf - inf = NaN where the direct sum is an infinity (F(2x2, 3x3)
    # too), and one in a filter reaches every transformed tap. Such values take im2col,
    # whose result (infinities and NaNs in place) is the one returned.
    ws, limits = NONFINITE_CASES[case]
    monkeypatch.setattr(cpu_conv, "WINOGRAD_MIN_PIXELS", 0)
    monkeypatch.setattr(cpu_conv, "WINOGRAD_MIN_CHANNELS", 0)
    for name, value in limits.items():
        monkeypatch.setattr(cpu_conv, name, value)
    xs, kw = (1, 4, 9, 9), dict(border_mode="half")
    x, w, _ = _values(xs, ws, kw, dtype)
    op = nnet.abstract_conv.AbstractConv2d(**kw)
    numpy_geo = cpu_conv.ConvGeometry(op, ws[2:])
    wino_geo = cpu_conv.ConvGeometry(op, ws[2:], KERNELS)
    forward = "_winograd7_forward" if 7 in ws[2:] else "_winograd_forward"
    calls = []
    monkeypatch.setattr(cpu_conv, forward, _spy(getattr(cpu_conv, forward), calls))
    want = cpu_conv.conv_forward(x, w, None, None, None, numpy_geo, None, False, None)
    got = cpu_conv.conv_forward(x, w, None, None, None, wino_geo, None, False, None)
    assert calls == [True]  # finite values: the Winograd path
    tol = 5e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    for bad in (np.inf, -np.inf, np.nan):
        if where == "image":
            x[0, 1, 4, 4] = bad
        else:
            w[0, 1, ws[2] // 2, ws[3] // 2] = bad
        with np.errstate(invalid="ignore"):
            want = cpu_conv.conv_forward(x, w, None, None, None, numpy_geo, None, False, None)
            got = cpu_conv.conv_forward(x, w, None, None, None, wino_geo, None, False, None)
        np.testing.assert_array_equal(got, want)  # im2col's, infinities and NaNs in place
        assert np.isinf(want).any() if bad == bad else np.isnan(want).any()
    assert calls == [True] + [False] * 3


def test_winograd7_only_for_unit_strides_and_seven_taps():
    def axis(ws, out_hw=(17, 17), dtype="float32", channels=192, **kw):
        op = nnet.abstract_conv.AbstractConv2d(**kw)
        return cpu_conv.ConvGeometry(op, ws, KERNELS).winograd7(out_hw, dtype, channels)

    if KERNELS is None:
        assert axis((7, 1)) is None
        return
    assert (axis((7, 1)), axis((1, 7))) == ("rows", "cols")
    assert axis((7, 1), subsample=(2, 1)) is None
    assert axis((1, 7), filter_dilation=(1, 2)) is None
    assert axis((7, 7)) is None and axis((1, 3)) is None
    assert axis((1, 7), out_hw=(8, 8)) is None  # below WINOGRAD7_MIN_PIXELS
    assert axis((1, 7), dtype="int64") is None
    assert axis((1, 7), channels=cpu_conv.WINOGRAD_MIN_CHANNELS - 1) is None


@needs_c
@pytest.mark.parametrize("dtype", FLOATS)
def test_cpu_conv_winograd7_in_a_function(dtype, monkeypatch):
    # Through the engine: the columns' workspace is planned with the F(2, 7) shape, the
    # bands shared between threads when the BLAS has several, values as the reference.
    monkeypatch.setattr(cpu_conv, "WINOGRAD7_MIN_PIXELS", 0)
    monkeypatch.setattr(cpu_conv, "WINOGRAD_MIN_CHANNELS", 0)
    monkeypatch.setattr(cpu_conv, "WINOGRAD_BAND_BYTES", 1)
    xs, ws, kw = WINOGRAD7_CASES["1x7-half-flip-batch2"]
    t4 = tt.TensorType(dtype, shape=(None,) * 4)
    x, w = t4("x"), t4("w")
    y = nnet.relu(nnet.conv2d(x, w, **kw))
    f = function([x, w], y, mode=CPU)
    xv, wv, _ = _values(xs, ws, kw, dtype)
    fake = _FakeBlas()
    monkeypatch.setattr(cpu_conv, "_blas_threads", lambda n, flops: (fake, 2))
    got = f(xv, wv)
    assert fake.limits == [(1, "blas")]
    cols = [v for v in f.fn.current.cat if isinstance(v, Temp) and v.label == "conv_cols"]
    geo = cpu_conv.ConvGeometry(nnet.abstract_conv.AbstractConv2d(**kw), (1, 7), KERNELS)
    itemsize = np.dtype(dtype).itemsize
    assert [f.fn.current.shapes[v] for v in cols] == [geo.winograd7_shape(3, 4, (5, 9), itemsize)]
    # padded along the filters' axis only: the image is read in place, no padded copy
    pads = [v for v in f.fn.current.cat if isinstance(v, Temp) and v.label == "conv_pad"]
    assert [f.fn.current.shapes[v] for v in pads] == [(0,)]
    check_plan(*f.fn.current.plan_input, f.fn.current.memory)
    tol = 5e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, function([x, w], y, mode=REF)(xv, wv), rtol=tol, atol=tol)


@needs_c
def test_cpu_conv_c_kernels_decline_what_they_do_not_take():
    # Another dtype, an image whose rows are not contiguous, a bias of another dtype:
    # the kernels do nothing and say so (numpy then does the copy).
    geo = cpu_conv.ConvGeometry(nnet.abstract_conv.AbstractConv2d(), (3, 3))
    x = np.ones((1, 2, 5, 5), "float16")
    cols = np.empty((1, 18, 9), "float16")
    assert not KERNELS.im2col(x, cols, geo, 3, 3)
    xt = np.ones((1, 2, 5, 5)).transpose(0, 1, 3, 2)
    assert not KERNELS.im2col(xt, np.empty((1, 18, 9)), geo, 3, 3)
    o = np.ones((1, 2, 9))
    assert not KERNELS.epilogue(o, np.ones(2, "float32"), True, None)
    assert not KERNELS.epilogue(o[:, :, ::2], np.ones(2), True, None)
    swapped = o.astype(">f8" if np.little_endian else "<f8")  # the other byte order
    assert not KERNELS.epilogue(swapped, np.ones(2, swapped.dtype), True, None)
    np.testing.assert_array_equal(o, 1)
    assert KERNELS.epilogue(o, np.ones(2), True, None)
    np.testing.assert_array_equal(o, 2)


@needs_c
def test_cpu_conv_emitters_get_the_c_kernels():
    xs, ws, kw = CASES["half"]
    f = function(*_graph(xs, ws, kw, "float32"), mode=CPU)
    plans = [v for v in f.fn.program.ns.values() if isinstance(v, cpu_conv.ConvPlan)]
    # The forward's and the filters' gradient's (the image's gradient makes no columns).
    assert len(plans) == 3
    assert sum(p.native is KERNELS for p in plans) == 2


def test_cpu_conv_without_a_compiler_copies_in_numpy(monkeypatch):
    # config.cxx '' (no compiler): the emitters' geometry has no kernels, values hold.
    monkeypatch.setattr(cpu_conv, "conv_kernels", lambda: None)
    xs, ws, kw = CASES["asym-pad-dilated"]
    ins, outs = _graph(xs, ws, kw, "float32")
    vals = _values(xs, ws, kw, "float32")
    f = function(ins, outs, mode=CPU)
    plans = [v for v in f.fn.program.ns.values() if isinstance(v, cpu_conv.ConvPlan)]
    assert plans and all(p.native is None for p in plans)
    for g, r in zip(f(*vals), function(ins, outs, mode=REF)(*vals)):
        np.testing.assert_allclose(g, r, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", ["half", "asym-pad-dilated", "groups-noflip"])
def test_conv_verify_grad(case, engine):
    xs, ws, kw = CASES[case]
    rng = np.random.default_rng(7)
    x, w, _ = _values(xs, ws, kw, "float64", seed=8)
    verify_grad(lambda a, b: nnet.conv2d(a, b, **kw), [x, w], rng=rng, mode=mode_of(engine))


def test_cpu_conv_falls_back_for_mixed_dtypes():
    x, w = tt.ftensor4("x"), tt.dtensor4("w")
    f = function([x, w], nnet.conv2d(x, w), mode=CPU)
    rng = np.random.default_rng(9)
    xv, wv = rng.standard_normal((1, 2, 4, 4)).astype("float32"), rng.standard_normal((3, 2, 2, 2))
    np.testing.assert_allclose(f(xv, wv), ref_conv2d(xv.astype("float64"), wv), rtol=1e-6)
    assert "conv_forward" not in f.fn.source()


# -- pooling -----------------------------------------------------------------------------

POOL_CASES = {
    "2x2": ((2, 2, 4, 6), (2, 2), dict(ignore_border=True)),
    "3x2-stride1x2": ((1, 2, 5, 6), (3, 2), dict(ignore_border=True, stride=(1, 2))),
    "3x3-partial": ((2, 1, 7, 5), (3, 3), dict(ignore_border=False, stride=(2, 2))),
    "3x3-pad-stride2": ((1, 2, 5, 6), (3, 3), dict(ignore_border=True, pad=(1, 2), stride=(2, 2))),
    "3-d-input": ((3, 5, 4), (2, 3), dict(ignore_border=False)),
    # InceptionV3's average pool: separable on the CPU engine (rows, then columns)
    "3x3-pad1-stride1": ((2, 3, 6, 5), (3, 3), dict(ignore_border=True, pad=(1, 1), stride=(1, 1))),
}
POOL_MODES = ("max", "sum", "average_inc_pad", "average_exc_pad")


def _distinct(shape, dtype, seed=0):
    """Distinct values (no ties: max pooling is differentiable there)."""
    rng = np.random.default_rng(seed)
    return (rng.permutation(int(np.prod(shape))).reshape(shape) / 7.0 - 1.0).astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", POOL_MODES)
@pytest.mark.parametrize("case", sorted(POOL_CASES))
def test_pool_values(case, mode, engine, dtype):
    xs, ws, kw = POOL_CASES[case]
    x = tt.TensorType(dtype, shape=(None,) * len(xs))("x")
    y = nnet.pool_2d(x, ws, mode=mode, **kw)
    gy = tt.TensorType(dtype, shape=(None,) * len(xs))("gy")
    outs = [y, grad((y * gy).sum(), x)]
    xv = _distinct(xs, dtype)
    gv = np.random.default_rng(1).standard_normal(function([x], y, mode=REF)(xv).shape)
    vals = [xv, gv.astype(dtype)]
    got = function([x, gy], outs, mode=mode_of(engine))(*vals)
    ref = function([x, gy], outs, mode=REF)(*vals)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for g, r in zip(got, ref):
        assert np.asarray(g).dtype == dtype
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", ["2x2", "3x3-pad-stride2"])
def test_cpu_pool_runs_the_emitter(case):
    xs, ws, kw = POOL_CASES[case]
    x = tt.dtensor4("x")
    f = function([x], nnet.pool_2d(x, ws, mode="max", **kw), mode=CPU)
    f(_distinct(xs, "float64"))
    assert "pool_forward" in f.fn.source()
    plan = f.fn.current
    check_plan(*plan.plan_input, plan.memory)
    temps = {v.label for v in plan.cat if isinstance(v, Temp)}
    # a 3x3 window is folded along the rows into a workspace, then along the columns
    assert temps == ({"pool_pad", "pool_rows"} if case == "3x3-pad-stride2" else set())


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", ["max", "average_exc_pad"])
def test_pool_verify_grad(mode, engine):
    xs, ws, kw = POOL_CASES["3x3-pad-stride2"]
    verify_grad(
        lambda a: nnet.pool_2d(a, ws, mode=mode, **kw),
        [_distinct(xs, "float64", seed=3)],
        rng=np.random.default_rng(4),
        mode=mode_of(engine),
    )


@pytest.mark.parametrize("mode", POOL_MODES)
def test_cpu_global_pool(mode):
    # Windows as big as the image: reduced over the windows' view, not offset by offset.
    x = tt.dtensor4("x")
    f = function([x], nnet.pool_2d(x, (4, 5), mode=mode, ignore_border=True), mode=CPU)
    xv = _distinct((2, 3, 4, 5), "float64")
    want = xv.max(axis=(2, 3)) if mode == "max" else xv.sum(axis=(2, 3))
    if mode.startswith("average"):
        want = want / 20
    np.testing.assert_allclose(f(xv)[:, :, 0, 0], want, rtol=1e-12)
    assert "pool_forward" in f.fn.source()


@needs_c
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", POOL_MODES)
@pytest.mark.parametrize(
    "case",
    sorted(POOL_CASES)
    + ["5x3-pad2-1-same", "3x3-stride3-wide-pad", "1x1", "3x3-stride2-odd", "2x4-stride1x3"],
)
def test_cpu_pool_c_loop_matches_numpy(case, mode, dtype):
    # The C pooling loop (its whole-plane paths where the windows lie inside, its row
    # paths: 3-wide windows in one pass, a stride of 2 split into even and odd columns,
    # other strides) against numpy's strided slices, with a NaN (a max keeps it).
    extra = {
        "5x3-pad2-1-same": ((2, 3, 7, 6), (5, 3), dict(ignore_border=True, pad=(2, 1))),
        "3x3-stride3-wide-pad": ((1, 2, 8, 9), (3, 3), dict(pad=(2, 2), stride=(3, 3))),
        "1x1": ((2, 2, 3, 4), (1, 1), dict(ignore_border=True)),
        # InceptionV3's max pool: 3x3 at stride 2 on an odd image, no padding
        "3x3-stride2-odd": ((2, 3, 9, 11), (3, 3), dict(ignore_border=True, stride=(2, 2))),
        "2x4-stride1x3": ((2, 2, 6, 10), (2, 4), dict(ignore_border=False, stride=(1, 3))),
    }
    xs, ws, kw = extra[case] if case in extra else POOL_CASES[case]
    kw = dict(kw, ignore_border=kw.get("ignore_border", True))
    op = Pool(ws, mode=mode, **kw)
    x = _distinct(xs, dtype)
    x.flat[3] = np.nan
    in_c = cpu_conv._PoolPlan(op, KERNELS)
    assert in_c.in_c(x.shape)
    got = cpu_conv.pool_forward(x, None, None, in_c)
    in_numpy = cpu_conv._PoolPlan(op)
    xp = np.empty(in_numpy.padded_shape(x.shape), dtype)  # the numpy path's padded copy
    want = cpu_conv.pool_forward(x, xp, None, in_numpy)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    # a strided image is declined by the C loop: numpy's path, same values
    xt = np.swapaxes(np.swapaxes(x, -1, -2).copy(), -1, -2)
    np.testing.assert_allclose(cpu_conv.pool_forward(xt, xp, None, in_c), want, rtol=tol)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", ["valid", "half", "full-stride2", "1x1-plain", "groups-noflip"])
def test_conv_of_no_images(case, engine, dtype):
    # A batch of no images: no output, no input gradient, and a filter gradient (a sum
    # over the images) of zeros.
    xs, ws, kw = CASES[case]
    xs = (0,) + xs[1:]
    ins, outs = _graph(xs, ws, kw, dtype)
    vals = _values(xs, ws, kw, dtype)
    got = function(ins, outs, mode=mode_of(engine))(*vals)
    ref = function(ins, outs, mode=REF)(*vals)
    for g, r in zip(got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype
    assert got[2].shape == ws and not got[2].any()


@pytest.mark.parametrize("border_mode", ["valid", "half", 1])
def test_cpu_conv_grad_weights_of_no_images_writes_zeros(border_mode):
    # The emitter's output is a planned buffer that holds what an earlier step left
    # there: a sum over no images must write its zeros.
    op = nnet.abstract_conv.AbstractConv2d(border_mode=border_mode)
    geo = cpu_conv.ConvGeometry(op, (3, 3))
    x, gy = np.ones((0, 2, 5, 5)), np.ones((0, 4) + geo.out_hw((5, 5)))
    out = np.full((4, 2, 3, 3), np.nan)
    assert cpu_conv.conv_grad_weights(x, gy, None, None, None, out, geo) is out
    assert not out.any()


@pytest.mark.parametrize("engine", ENGINES)
def test_conv_of_filters_that_do_not_divide_by_the_groups_raises(engine):
    # 5 filters in 2 groups: the CPU engine's grouped products read 2 x 2 of them and
    # returned an output whose fifth channel no product wrote.
    x, w = tt.dtensor4("x"), tt.dtensor4("w")
    f = function([x, w], nnet.conv2d(x, w, num_groups=2), mode=mode_of(engine))
    with pytest.raises(ValueError, match=r"and 5 filters \(must divide by the groups\)"):
        f(np.ones((2, 2, 5, 4)), np.ones((5, 1, 2, 3)))


def test_cpu_conv_gradients_refuse_shapes_that_do_not_fit_the_groups():
    geo = cpu_conv.ConvGeometry(nnet.abstract_conv.AbstractConv2d(num_groups=2), (2, 3))
    x, gy, w = np.ones((2, 2, 5, 4)), np.ones((2, 5, 4, 2)), np.ones((5, 1, 2, 3))
    with pytest.raises(ValueError, match=r"conv_grad_weights: image \(2, 2, 5, 4\) and output"):
        cpu_conv.conv_grad_weights(x, gy, None, None, None, None, geo)
    with pytest.raises(ValueError, match=r"conv_grad_inputs: output gradient \(2, 5, 4, 2\)"):
        cpu_conv.conv_grad_inputs(w, gy, None, None, (5, 4), geo)


@pytest.mark.parametrize("engine", ["py", *ENGINES])
@pytest.mark.parametrize("border_mode", ["valid", "full", (1, 2)])
def test_conv_of_filters_with_no_taps_raises(border_mode, engine):
    # A filter of length 0 along a spatial axis: the reference engine padded by -1 (an
    # error of numpy's) or summed no taps (zeros), the CPU engine gave zeros.
    x, w = tt.dtensor4("x"), tt.dtensor4("w")
    mode = REF if engine == "py" else mode_of(engine)
    f = function([x, w], nnet.conv2d(x, w, border_mode=border_mode), mode=mode)
    with pytest.raises(ValueError, match=r"filters of spatial shape \(0, 3\) have no taps"):
        f(np.ones((2, 2, 5, 4)), np.ones((3, 2, 0, 3)))
