"""The conv_fold pass: batch normalization, bias and relu folded into the convolution.

Each rule is checked for structure (the ops left in the optimized graph) and for values
(the folded graph against the unoptimized one on the reference engine), float32 and
float64, on the CPU engine and on OpenCL (PoCL); the fused op itself against numpy, its
``infer_shape`` and its gradient by finite differences."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode, get_mode
from theano_dag.engines.cpu.emit.conv import ConvGeometry
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.gradient import verify_grad
from theano_dag.tensor import nnet
from theano_dag.tensor.nnet import AbstractConv2d, Conv2dBiasAct

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tensor"))
from nnet_reference import ref_conv2d  # noqa: E402

REF = Mode(linker="py", optimizer=None)
OCL_OK, OCL_WHY = opencl_available()
ENGINES = [
    "cpu",
    pytest.param("opencl", marks=pytest.mark.skipif(not OCL_OK, reason=f"no OpenCL: {OCL_WHY}")),
]
FLOATS = ("float32", "float64")


def mode_of(engine):
    if engine == "cpu":
        return Mode(linker=CPULinker(min_plan_bytes=0), optimizer="fast_run")
    return Mode(linker="opencl", optimizer="fast_run")


def _ops(f):
    return [n.op for n in f.maker.fgraph.toposort()]


def _channel(v):
    return v.dimshuffle("x", 0, "x", "x")


def _inputs(dtype, seed=0, n_filters=4):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 6, 5)).astype(dtype)
    w = rng.standard_normal((n_filters, 3, 3, 3)).astype(dtype)
    p = [rng.standard_normal(n_filters).astype(dtype) for _ in range(3)]
    var = rng.uniform(0.5, 2.0, n_filters).astype(dtype)
    return x, w, p, var


def _check(outputs_of, dtype, engine, expect_ops, seed=0):
    """Build with ``outputs_of(x, w, gamma, beta, mean, var)`` (symbolic), compile with
    the engine's fast_run, and compare with the unoptimized reference."""
    t4 = tt.TensorType(dtype, shape=(None,) * 4)
    x, w = t4("x"), t4("w")
    g, b, m, v = (tt.TensorType(dtype, shape=(None,))(n) for n in "gbmv")
    out = outputs_of(x, w, g, b, m, v)
    ins = [x, w, g, b, m, v]
    xv, wv, (gv, bv, mv), vv = _inputs(dtype, seed)
    vals = [xv, wv, gv, bv, mv, vv]
    f = function(ins, out, mode=mode_of(engine), on_unused_input="ignore")
    want = function(ins, out, mode=REF, on_unused_input="ignore")(*vals)
    tol = 2e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(f(*vals), want, rtol=tol, atol=tol)
    kinds = [type(op) for op in _ops(f) if isinstance(op, (AbstractConv2d, Conv2dBiasAct))]
    assert [(k, getattr(op, "activation", "-")) for k, op in zip(kinds, _conv_ops(f))] == (
        expect_ops
    )
    return f


def _conv_ops(f):
    return [op for op in _ops(f) if isinstance(op, (AbstractConv2d, Conv2dBiasAct))]


def _bn(x, w, g, b, m, v):
    c = nnet.conv2d(x, w, border_mode="half")
    return nnet.batch_normalization_test(c, g, b, m, v, axes="spatial", epsilon=1e-3)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("engine", ENGINES)
def test_batch_norm_and_relu_fold_into_the_convolution(engine, dtype):
    f = _check(lambda *a: nnet.relu(_bn(*a)), dtype, engine, [(Conv2dBiasAct, "relu")], seed=1)
    # The folded filters are computed from the filters and the statistics: nothing of
    # the image's size is left besides the convolution.
    assert sum(1 for op in _ops(f) if isinstance(op, (AbstractConv2d, Conv2dBiasAct))) == 1


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("engine", ENGINES)
def test_batch_norm_folds_without_relu(engine, dtype):
    _check(_bn, dtype, engine, [(Conv2dBiasAct, None)])


@pytest.mark.parametrize("engine", ENGINES)
def test_scale_and_shift_fold(engine):
    def build(x, w, g, b, m, v):
        return nnet.conv2d(x, w) * _channel(g) + _channel(b)

    _check(build, "float64", engine, [(Conv2dBiasAct, None)])


@pytest.mark.parametrize("engine", ENGINES)
def test_bias_and_relu_as_maximum_fold(engine):
    def build(x, w, g, b, m, v):
        return tt.maximum(nnet.conv2d(x, w, subsample=2) + _channel(b), 0)

    _check(build, "float64", engine, [(Conv2dBiasAct, "relu")])


def test_bias_then_relu_in_float32_fold():
    def build(x, w, g, b, m, v):
        return nnet.relu(nnet.conv2d(x, w, border_mode=1) + _channel(b))

    _check(build, "float32", "cpu", [(Conv2dBiasAct, "relu")])


def test_no_fold_when_the_convolution_is_read_elsewhere():
    def build(x, w, g, b, m, v):
        c = nnet.conv2d(x, w)
        return [nnet.relu(c + _channel(b)), c]

    _check(build, "float64", "cpu", [(AbstractConv2d, "-")])


def test_no_fold_of_a_relu_whose_input_is_read_elsewhere():
    def build(x, w, g, b, m, v):
        y = nnet.conv2d(x, w) + _channel(b)
        return [nnet.relu(y), y * 2]

    _check(build, "float64", "cpu", [(Conv2dBiasAct, None)])


def test_no_fold_of_a_scalar_added_to_every_filter():
    # (1, 1, 1, 1) against filters of unknown number: not a per-filter bias.
    def build(x, w, g, b, m, v):
        return nnet.conv2d(x, w) + tt.constant(np.ones((1, 1, 1, 1)))

    _check(build, "float64", "cpu", [(AbstractConv2d, "-")])


def test_conv_fold_is_a_named_pass():
    names = [o.name for o in get_mode("FAST_RUN").optimizer]
    assert names.index("conv_fold") < names.index("canonicalize")
    x, w, b = tt.dtensor4("x"), tt.dtensor4("w"), tt.dvector("b")
    y = nnet.relu(nnet.conv2d(x, w) + _channel(b))
    f = function([x, w, b], y, mode=get_mode("FAST_RUN").excluding("conv_fold"))
    assert not any(isinstance(op, Conv2dBiasAct) for op in _ops(f))


@pytest.mark.parametrize("engine", ENGINES)
def test_batch_norm_fold_is_nonfinite_unsafe(engine):
    # (C - m) * s + b with an infinite s is an infinity as written; folded, C * s and
    # b - m * s are opposite infinities and their sum NaN. Excluding nonfinite_unsafe
    # keeps the written form.
    x, w, b, s, m = tt.dtensor4("x"), tt.dtensor4("w"), *(tt.dvector(n) for n in "bsm")
    y = (nnet.conv2d(x, w) - _channel(m)) * _channel(s) + _channel(b)
    vals = (np.ones((1, 1, 3, 3)), np.ones((2, 1, 2, 2)), np.zeros(2), [np.inf, 1.0], np.ones(2))
    ref = function([x, w, b, s, m], y, mode=REF)(*vals)
    assert ref[0, :, 0, 0].tolist() == [np.inf, 3.0]
    folded = function([x, w, b, s, m], y, mode=mode_of(engine))
    assert any(isinstance(op, Conv2dBiasAct) for op in _ops(folded))
    assert np.isnan(folded(*vals)[0, 0]).all()
    kept = function([x, w, b, s, m], y, mode=mode_of(engine).excluding("nonfinite_unsafe"))
    assert not any(isinstance(op, Conv2dBiasAct) for op in _ops(kept))
    np.testing.assert_array_equal(kept(*vals), ref)


# -- the fused op ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("engine", ["ref", *ENGINES])
@pytest.mark.parametrize("activation", [None, "relu"])
def test_conv2d_bias_act_values_and_infer_shape(activation, engine, dtype):
    t4 = tt.TensorType(dtype, shape=(None,) * 4)
    x, w = t4("x"), t4("w")
    b = tt.TensorType(dtype, shape=(None,))("b")
    params = dict(border_mode=(1, 2), subsample=(2, 1), num_groups=1)
    y = Conv2dBiasAct(activation=activation, **params)(x, w, b)
    xv, wv, (bv, _, _), _ = _inputs(dtype, seed=2)
    mode = REF if engine == "ref" else Mode(linker=mode_of(engine).linker, optimizer=None)
    got = function([x, w, b], y, mode=mode)(xv, wv, bv)
    want = ref_conv2d(xv.astype("float64"), wv.astype("float64"), **params) + bv[:, None, None]
    if activation == "relu":
        want = np.maximum(want, 0)
    tol = 2e-4 if dtype == "float32" else 1e-10
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    node = y.owner
    entries = node.op.infer_shape(None, node, [x.shape, w.shape, b.shape])[0]
    shape = function([x, w, b], list(entries), mode=REF, on_unused_input="ignore")
    assert tuple(int(s) for s in shape(xv, wv, bv)) == got.shape


@pytest.mark.parametrize("engine", ["ref", *ENGINES])
@pytest.mark.parametrize("activation", [None, "relu"])
def test_conv2d_bias_act_verify_grad(activation, engine):
    xv, wv, (bv, _, _), _ = _inputs("float64", seed=3)
    op = Conv2dBiasAct(activation=activation, border_mode="half", num_groups=1)
    mode = REF if engine == "ref" else mode_of(engine)
    verify_grad(op, [xv, wv, bv], rng=np.random.default_rng(4), mode=mode)


def test_conv2d_bias_act_errors():
    x, w = tt.dtensor4("x"), tt.dtensor4("w")
    with pytest.raises(TypeError, match="bias must be a vector of the output's dtype float64"):
        Conv2dBiasAct()(x, w, tt.fvector("b"))
    with pytest.raises(ValueError, match="activation must be one of"):
        Conv2dBiasAct(activation="tanh")
    f = theano_dag.function([x, w, b := tt.dvector("b")], Conv2dBiasAct()(x, w, b), mode=REF)
    with pytest.raises(ValueError, match=r"bias has shape \(3,\)"):
        f(np.ones((1, 1, 3, 3)), np.ones((2, 1, 2, 2)), np.ones(3))
    g = theano_dag.function([x, w, b], Conv2dBiasAct()(x, w, b), mode=mode_of("cpu"))
    with pytest.raises(ValueError, match=r"bias has shape \(3,\)"):
        g(np.ones((1, 1, 3, 3)), np.ones((2, 1, 2, 2)), np.ones(3))


# -- the scale input ---------------------------------------------------------------------


def test_batch_norm_of_variable_filters_keeps_its_scale_an_input():
    # The filters are not rescaled in the graph (a pass over all of them at every call):
    # the scale is the fused node's fourth input, and the filters reach it unchanged.
    t4 = tt.TensorType("float64", shape=(None,) * 4)
    x, w = t4("x"), t4("w")
    g, b, m, v = (tt.dvector(n) for n in "gbmv")
    f = function([x, w, g, b, m, v], nnet.relu(_bn(x, w, g, b, m, v)), mode=mode_of("cpu"))
    (node,) = [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, Conv2dBiasAct)]
    assert len(node.inputs) == 4 and node.inputs[1] is f.maker.fgraph.inputs[1]
    assert [c for c, _ in f.maker.fgraph.clients[node.inputs[1]]] == [node]


@pytest.mark.parametrize("engine", ENGINES)
def test_batch_norm_statistics_fold_as_vectors(engine):
    # gamma / sqrt(var + eps) is computed on the statistics' vectors, not on their
    # (1, F, 1, 1) broadcasts taken back to vectors: no DimShuffle is left, and the
    # statistics cost two elementwise nodes per convolution (scale, and shift).
    t4 = tt.TensorType("float64", shape=(None,) * 4)
    x, w = t4("x"), t4("w")
    g, b, m, v = (tt.dvector(n) for n in "gbmv")
    f = function([x, w, g, b, m, v], nnet.relu(_bn(x, w, g, b, m, v)), mode=mode_of(engine))
    kinds = sorted(type(op).__name__ for op in _ops(f) if "Gpu" not in type(op).__name__)
    assert kinds == ["Conv2dBiasAct", "Elemwise", "Elemwise"]  # transfers aside (OpenCL)
    (node,) = [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, Conv2dBiasAct)]
    assert [i.type.ndim for i in node.inputs] == [4, 4, 1, 1]
    xv, wv, (gv, bv, mv), vv = _inputs("float64", seed=3)
    want = function([x, w, g, b, m, v], nnet.relu(_bn(x, w, g, b, m, v)), mode=REF)
    np.testing.assert_allclose(
        f(xv, wv, gv, bv, mv, vv), want(xv, wv, gv, bv, mv, vv), rtol=1e-10, atol=1e-10
    )


def test_batch_norm_of_constant_filters_folds_them_once():
    xv, wv, (gv, bv, mv), vv = _inputs("float64", seed=5)
    x = tt.dtensor4("x")
    consts = [tt.constant(a) for a in (wv, gv, bv, mv, vv)]
    y = nnet.relu(_bn(x, *consts))
    f = function([x], y, mode=mode_of("cpu"))
    (node,) = [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, Conv2dBiasAct)]
    # W * s and the bias were computed at compile time: the node reads two constants.
    assert len(node.inputs) == 3
    assert all(isinstance(i, theano_dag.graph.basic.Constant) for i in node.inputs[1:])
    want = function([x], y, mode=REF)(xv)
    np.testing.assert_allclose(f(xv), want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("engine", ["ref", *ENGINES])
# valid: 27 filter taps per filter > 2 x 3 x 3 output pixels, the output is scaled;
# half: 27 < 2 x 6 x 5, the filters are (into a workspace)
@pytest.mark.parametrize("border_mode", ["valid", "half"])
def test_conv2d_bias_act_scale_values(border_mode, engine, dtype):
    t4 = tt.TensorType(dtype, shape=(None,) * 4)
    x, w = t4("x"), t4("w")
    b, s = (tt.TensorType(dtype, shape=(None,))(n) for n in "bs")
    y = Conv2dBiasAct(activation="relu", border_mode=border_mode, num_groups=1)(x, w, b, s)
    xv, wv, (bv, sv, _), _ = _inputs(dtype, seed=6)
    mode = REF if engine == "ref" else Mode(linker=mode_of(engine).linker, optimizer=None)
    f = function([x, w, b, s], y, mode=mode)
    got = f(xv, wv, bv, sv)
    want = ref_conv2d(xv.astype("float64"), wv.astype("float64"), border_mode=border_mode)
    want = np.maximum(want * sv[:, None, None] + bv[:, None, None], 0)
    tol = 2e-4 if dtype == "float32" else 1e-10
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    # the filters themselves are left as they were
    np.testing.assert_array_equal(wv, _inputs(dtype, seed=6)[1])


def test_cpu_scale_goes_where_it_costs_less():
    half = ConvGeometry(AbstractConv2d(border_mode="half"), (3, 3))
    valid = ConvGeometry(AbstractConv2d(), (3, 3))
    assert half.scales_filters((2, 3, 6, 5), (4, 3, 3, 3))  # 27 taps < 60 pixels
    assert not valid.scales_filters((2, 3, 6, 5), (4, 3, 3, 3))  # 27 > 18


@pytest.mark.parametrize("engine", ["ref", *ENGINES])
def test_conv2d_bias_act_scale_verify_grad(engine):
    xv, wv, (bv, sv, _), _ = _inputs("float64", seed=7)
    op = Conv2dBiasAct(activation="relu", border_mode="half", num_groups=1)
    mode = REF if engine == "ref" else mode_of(engine)
    verify_grad(op, [xv, wv, bv, sv], rng=np.random.default_rng(8), mode=mode)


def test_conv2d_bias_act_scale_errors():
    x, w, b = tt.dtensor4("x"), tt.dtensor4("w"), tt.dvector("b")
    with pytest.raises(TypeError, match="scale must be a vector of the output's dtype float64"):
        Conv2dBiasAct()(x, w, b, tt.fvector("s"))
    s = tt.dvector("s")
    for mode in (REF, mode_of("cpu")):
        f = theano_dag.function([x, w, b, s], Conv2dBiasAct()(x, w, b, s), mode=mode)
        with pytest.raises(ValueError, match=r"scale has shape \(3,\)"):
            f(np.ones((1, 1, 3, 3)), np.ones((2, 1, 2, 2)), np.ones(2), np.ones(3))
