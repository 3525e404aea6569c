"""3-D convolution (``nnet.conv3d``, ``AbstractConv3d`` and its two gradient Ops): values
against a numpy reference written with a loop over output voxels (and against
``scipy.signal.convolve`` where it applies), float32 and float64, every border mode,
stride, dilation, group count and flip; ``infer_shape`` against the real shape;
gradients by finite differences; on the reference, CPU and OpenCL (PoCL) engines."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag import printing
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.engines.cpu.emit.impls import get_impl
from theano_dag.gradient import grad, verify_grad
from theano_dag.graph.basic import ancestors
from theano_dag.tensor import nnet
from theano_dag.tensor.nnet import abstract_conv
from theano_dag.tensor.nnet.abstract_conv import (
    AbstractConv2d,
    AbstractConv3d,
    AbstractConv3d_gradInputs,
    AbstractConv3d_gradWeights,
)
from theano_dag.tensor.shape import shape_i

# The references live next to this file; --import-mode=importlib does not put it on sys.path.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_modes import ENGINES, FLOATS, OCL_OK, OCL_WHY, REF, mode_of  # noqa: E402
from nnet3d_reference import (  # noqa: E402
    ref_conv3d,
    ref_conv3d_grad_inputs,
    ref_conv3d_grad_weights,
)

# -- the cases ------------------------------------------------------------------------------

# name: (image shape, filter shape, conv3d keywords)
CASES = {
    "valid": ((2, 2, 4, 5, 3), (3, 2, 2, 3, 2), {}),
    "full": ((1, 2, 3, 4, 3), (2, 2, 2, 2, 3), dict(border_mode="full")),
    "half": ((1, 2, 5, 4, 5), (2, 2, 3, 3, 3), dict(border_mode="half")),
    "int-pad-stride2": ((2, 1, 5, 5, 4), (2, 1, 3, 2, 2), dict(border_mode=1, subsample=2)),
    "tuple-pad-stride": (
        (1, 2, 5, 6, 4),
        (3, 2, 2, 3, 2),
        dict(border_mode=(0, 2, 1), subsample=(1, 2, 3)),
    ),
    "asym-pad": ((1, 1, 4, 4, 4), (2, 1, 2, 2, 2), dict(border_mode=((1, 0), 0, (0, 2)))),
    "dilated": ((1, 2, 6, 5, 7), (2, 2, 2, 2, 3), dict(filter_dilation=(2, 1, 2))),
    "dilated-half-stride": (
        (1, 1, 7, 6, 6),
        (2, 1, 3, 2, 2),
        dict(border_mode="half", filter_dilation=2, subsample=(2, 1, 2)),
    ),
    "groups-noflip": (
        (2, 4, 4, 3, 4),
        (6, 2, 2, 2, 2),
        dict(num_groups=2, filter_flip=False, border_mode=1),
    ),
    "1x1x1": ((2, 3, 3, 4, 2), (4, 3, 1, 1, 1), {}),
}


def _values(case, dtype, seed=0):
    xs, ws, kw = CASES[case]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    gy = rng.standard_normal(ref_conv3d(np.zeros(xs), np.zeros(ws), **kw).shape).astype(dtype)
    return x, w, gy


def _graph(case, dtype):
    xs, ws, kw = CASES[case]
    x = tt.TensorType(dtype, shape=(None,) * 5)("x")
    w = tt.TensorType(dtype, shape=(None,) * 5)("w")
    gy = tt.TensorType(dtype, shape=(None,) * 5)("gy")
    y = nnet.conv3d(x, w, **kw)
    gx, gw = grad((y * gy).sum(), [x, w])  # the gradients for an output gradient gy
    return [x, w, gy], [y, gx, gw]


def _tol(dtype):
    return 2e-4 if dtype == "float32" else 1e-10


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_conv3d_values_and_gradients(case, engine, dtype):
    xs, ws, kw = CASES[case]
    ins, outs = _graph(case, dtype)
    vals = _values(case, dtype)
    got = function(ins, outs, mode=mode_of(engine))(*vals)
    x, w, gy = (v.astype("float64") for v in vals)
    refs = [
        ref_conv3d(x, w, **kw),
        ref_conv3d_grad_inputs(w, gy, xs[2:], **kw),
        ref_conv3d_grad_weights(x, gy, ws[2:], **kw),
    ]
    for g, r in zip(got, refs):
        g = np.asarray(g)
        assert g.dtype == dtype and g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=_tol(dtype), atol=_tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", ["valid", "full"])
def test_conv3d_matches_scipy(mode, dtype):
    signal = pytest.importorskip("scipy.signal")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 5, 4, 6)).astype(dtype)
    w = rng.standard_normal((2, 3, 2, 3, 2)).astype(dtype)
    xv, wv = tt.TensorType(dtype, shape=(None,) * 5)(), tt.TensorType(dtype, shape=(None,) * 5)()
    got = function([xv, wv], nnet.conv3d(xv, wv, border_mode=mode), mode=REF)(x, w)
    # A true convolution: scipy's, summed over the input channels.
    want = np.array(
        [
            [sum(signal.convolve(x[n, c], w[f, c], mode=mode) for c in range(3)) for f in range(2)]
            for n in range(2)
        ]
    )
    np.testing.assert_allclose(got, want, rtol=_tol(dtype), atol=_tol(dtype))


@pytest.mark.parametrize("case", sorted(CASES))
def test_infer_shape_of_the_three_ops(case):
    ins, outs = _graph(case, "float64")
    vals = _values(case, "float64")
    nodes = [a.owner for a in ancestors(outs) if a.owner is not None]
    ops = (AbstractConv3d, AbstractConv3d_gradWeights, AbstractConv3d_gradInputs)
    conv_nodes = [n for n in nodes if isinstance(n.op, ops)]
    assert {type(n.op) for n in conv_nodes} == set(ops)
    for node in conv_nodes:
        in_shapes = [tuple(shape_i(v, d) for d in range(v.ndim)) for v in node.inputs]
        (shp,) = node.op.infer_shape(None, node, in_shapes)
        real = function(ins, node.outputs[0], mode=REF, on_unused_input="ignore")(*vals).shape
        entries = [tt.as_tensor_variable(s) for s in shp]
        inferred = function(ins, entries, mode=REF, on_unused_input="ignore")(*vals)
        assert tuple(int(s) for s in inferred) == real, (node.op, real)


def test_static_output_shape():
    x = tt.TensorType("float64", shape=(None, 2, 7, 8, 9))("x")
    w = tt.TensorType("float64", shape=(4, 2, 3, 3, 3))("w")
    y = nnet.conv3d(x, w, border_mode=(1, 0, (2, 0)), subsample=(2, 1, 3))
    assert y.type.shape == (None, 4, 4, 6, 3)
    assert nnet.get_conv_output_shape(
        (5, 2, 7, 8, 9), (4, 2, 3, 3, 3), (1, 0, (2, 0)), (2, 1, 3)
    ) == (5, 4, 4, 6, 3)
    assert nnet.get_conv_output_shape(
        (1, 1, 5, 5, 5), (1, 1, 3, 3, 3), "half", (1, 1, 1), (2, 2, 2)
    ) == (1, 1, 5, 5, 5)


@pytest.mark.parametrize("case", ["valid", "int-pad-stride2", "dilated", "groups-noflip"])
def test_conv3d_grad_by_finite_differences(case):
    xs, ws, kw = CASES[case]
    rng = np.random.default_rng(5)
    verify_grad(
        lambda x, w: nnet.conv3d(x, w, **kw),
        [rng.standard_normal(xs), rng.standard_normal(ws)],
        rng=rng,
        mode=REF,
    )


@pytest.mark.parametrize("kw", [dict(), dict(border_mode="half", subsample=(1, 2, 2))])
def test_conv3d_second_order(kw):
    rng = np.random.default_rng(6)

    def grad_wrt_x(x, w):
        return grad((nnet.conv3d(x, w, **kw) ** 2).sum(), x)

    def grad_wrt_w(x, w):
        return grad((nnet.conv3d(x, w, **kw) ** 2).sum(), w)

    pts = [rng.standard_normal((1, 2, 4, 4, 4)), rng.standard_normal((2, 2, 2, 3, 2))]
    verify_grad(grad_wrt_x, pts, rng=rng, mode=REF)
    verify_grad(grad_wrt_w, pts, rng=rng, mode=REF)


@pytest.mark.parametrize("dtype", FLOATS)
def test_grad_functions_and_ops(dtype):
    xs, ws, kw = CASES["tuple-pad-stride"]
    x, w, gy = _values("tuple-pad-stride", dtype)
    T5 = tt.TensorType(dtype, shape=(None,) * 5)
    xv, wv, gv = T5("x"), T5("w"), T5("gy")
    gx = nnet.conv3d_grad_wrt_inputs(gv, wv, xs, filter_shape=ws, **kw)
    gw = nnet.conv3d_grad_wrt_weights(xv, gv, ws, input_shape=xs, **kw)
    assert isinstance(gx.owner.op, AbstractConv3d_gradInputs)
    assert isinstance(gw.owner.op, AbstractConv3d_gradWeights)
    assert gx.type.shape[2:] == xs[2:] and gw.type.shape[2:] == ws[2:]
    got_gx, got_gw = function([xv, wv, gv], [gx, gw], mode=REF)(x, w, gy)
    x64, w64, gy64 = (v.astype("float64") for v in (x, w, gy))
    tol = _tol(dtype)
    want_gx = ref_conv3d_grad_inputs(w64, gy64, xs[2:], **kw)
    np.testing.assert_allclose(got_gx, want_gx, rtol=tol, atol=tol)
    want_gw = ref_conv3d_grad_weights(x64, gy64, ws[2:], **kw)
    np.testing.assert_allclose(got_gw, want_gw, rtol=tol, atol=tol)


def test_gradient_graph_uses_the_3d_grad_ops():
    x, w = tt.dtensor5("x"), tt.dtensor5("w")
    gx, gw = grad(nnet.conv3d(x, w, border_mode="half").sum(), [x, w])
    types = {type(a.owner.op) for a in ancestors([gx, gw]) if a.owner is not None}
    assert {AbstractConv3d_gradInputs, AbstractConv3d_gradWeights} <= types
    assert not any(issubclass(t, AbstractConv2d) for t in types)


def test_theano_names_and_signatures():
    # Theano's constructor: the shape hints first; the 2-D Ops are not 3-D ones.
    op = AbstractConv3d((None, 2, 5, 5, 5), (3, 2, 3, 3, 3), "half", (1, 2, 2))
    assert op == AbstractConv3d(border_mode="half", subsample=(1, 2, 2))
    assert op.convdim == 3 and op.kshp == (3, 2, 3, 3, 3)
    assert AbstractConv3d(border_mode=1) == AbstractConv3d(border_mode=(1, 1, (1, 1)))
    assert AbstractConv3d(border_mode=(0, 0, 0)) == AbstractConv3d()
    assert AbstractConv3d(subsample=2).subsample == (2, 2, 2)
    assert AbstractConv3d() != AbstractConv2d()
    assert not isinstance(op, AbstractConv2d)
    for name in ("AbstractConv3d", "AbstractConv3d_gradWeights", "AbstractConv3d_gradInputs"):
        assert getattr(nnet, name) is getattr(abstract_conv, name)
    assert nnet.abstract_conv.conv3d is nnet.conv3d
    assert abstract_conv.border_mode_to_pad("half", (3, 5, 1), (2, 1, 1)) == (
        (2, 2),
        (2, 2),
        (0, 0),
    )


@pytest.mark.parametrize(
    "build, exc, match",
    [
        (lambda: nnet.conv3d(tt.dtensor4(), tt.dtensor5()), TypeError, r"5-D tensor \(NCDHW\)"),
        (lambda: nnet.conv3d(tt.ltensor5(), tt.dtensor5()), TypeError, "must be a float tensor"),
        (
            lambda: nnet.conv3d(tt.dtensor5(), tt.dtensor5(), border_mode="same"),
            ValueError,
            "border_mode",
        ),
        (
            lambda: nnet.conv3d(tt.dtensor5(), tt.dtensor5(), border_mode=(1, 1)),
            ValueError,
            "a tuple of 3",
        ),
        (
            lambda: nnet.conv3d(tt.dtensor5(), tt.dtensor5(), subsample=(1, 1)),
            TypeError,
            "subsample",
        ),
        (lambda: nnet.conv3d(tt.dtensor5(), tt.dtensor5(), filter_dilation=0), ValueError, ">= 1"),
        (
            lambda: nnet.conv3d(
                tt.TensorType("float64", shape=(None, 2, 4, 4, 4))(),
                tt.dtensor5(),
                input_shape=(None, 3, 4, 4, 4),
            ),
            ValueError,
            "imshp",
        ),
        (
            lambda: nnet.conv3d(
                tt.TensorType("float64", shape=(None, 2, 4, 4, 4))(),
                tt.TensorType("float64", shape=(None, 2, 9, 3, 3))(),
            ),
            ValueError,
            "do not fit",
        ),
        (
            lambda: AbstractConv3d_gradInputs()(tt.dtensor5(), tt.dtensor5(), [4, 4]),
            TypeError,
            "3 entries",
        ),
    ],
    ids=[
        "ndim",
        "int-dtype",
        "bad-mode",
        "short-pad",
        "short-stride",
        "dilation-0",
        "hint",
        "too-big",
        "shape-len",
    ],
)
def test_bad_inputs(build, exc, match):
    with pytest.raises(exc, match=match):
        build()


def test_runtime_shape_errors():
    x, w = tt.dtensor5("x"), tt.dtensor5("w")
    f = function([x, w], nnet.conv3d(x, w), mode=REF)
    with pytest.raises(ValueError, match="larger than the padded image"):
        f(np.zeros((1, 1, 2, 5, 5)), np.zeros((1, 1, 3, 3, 3)))
    with pytest.raises(ValueError, match="channels"):
        f(np.zeros((1, 2, 5, 5, 5)), np.zeros((1, 3, 3, 3, 3)))


def test_cpu_engine_runs_3d_through_perform():
    # The CPU engine's emitters are 2-D: no 3-D node is handed to them.
    for op in (AbstractConv3d(), AbstractConv3d_gradWeights(), AbstractConv3d_gradInputs()):
        assert get_impl(op) is None
    assert get_impl(AbstractConv2d()) is not None
    ins, outs = _graph("half", "float64")
    f = function(ins, outs, mode=mode_of("cpu"))
    f(*_values("half", "float64"))
    src = f.fn.source()
    assert "conv_forward" not in src and "conv_grad_inputs" not in src


@pytest.mark.skipif(not OCL_OK, reason=f"no OpenCL: {OCL_WHY}")
def test_opencl_runs_3d_on_the_host_visibly():
    x, w = tt.ftensor5("x"), tt.ftensor5("w")
    # tanh and exp run on the device, the convolution on the host between two transfers.
    y = tt.exp(nnet.conv3d(tt.tanh(x), w, border_mode="half")) * 2
    f = function([x, w], y, mode=Mode(linker="opencl"))
    text = printing.debugprint(f, file="str")
    assert "HostFromGpu" in text and "GpuFromHost" in text and "AbstractConv3d" in text
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((1, 1, 3, 3, 3)).astype("float32") * 0.1
    wv = rng.standard_normal((1, 1, 3, 3, 3)).astype("float32") * 0.1
    xt = np.tanh(xv.astype("float64"))
    want = np.exp(ref_conv3d(xt, wv.astype("float64"), border_mode="half")) * 2
    np.testing.assert_allclose(f(xv, wv), want, rtol=1e-5)
    with config.change_flags(opencl__host_fallback=False):
        with pytest.raises(NotImplementedError, match="cannot run AbstractConv3d"):
            function([x, w], y, mode=Mode(linker="opencl"))
