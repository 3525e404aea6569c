"""theano_dag.formats.onnx: exported graphs run in ONNX Runtime and give theano_dag's
values; what is exported imports back to the same values."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from compound_cases import COMPOUND

import theano_dag
import theano_dag.tensor as tt
from theano_dag.formats.onnx import OnnxExportError, from_onnx, to_onnx
from theano_dag.models import Net, TensorOps, init_params, resnet50, tensor_forward
from theano_dag.models.resnet import _bottleneck
from theano_dag.tensor import nnet

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

RNG = np.random.default_rng(0)


def _run_ort(model, values):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, dict(zip(names, values)))


def _check(inputs, outputs, values, rtol, ort_too=True):
    expected = theano_dag.function(inputs, outputs)(*values)
    expected = expected if isinstance(expected, list) else [expected]
    model = to_onnx(inputs, outputs)
    for got, want in zip(_run_ort(model, values) if ort_too else [], expected):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    # and back: the imported graph computes the same
    back_in, back_out = from_onnx(model)
    again = theano_dag.function(back_in, back_out)(*values)
    for got, want in zip(again, expected):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    return model


def _conv_case(dtype, **kw):
    # 'half' and 'full' padding read the filters' static shape
    x, w = tt.tensor4("x", dtype=dtype), tt.TensorType(dtype, shape=(4, 3, 3, 2))("w")
    vals = [RNG.random((2, 3, 9, 8)).astype(dtype), RNG.random((4, 3, 3, 2)).astype(dtype)]
    return [x, w], [nnet.conv2d(x, w, **kw)], vals


def _case(name, dtype):
    m = tt.matrix("m", dtype=dtype)
    v = tt.vector("v", dtype=dtype)
    mv = [RNG.random((3, 4)).astype(dtype) + 0.5]
    x4 = tt.tensor4("x", dtype=dtype)
    img = [RNG.standard_normal((2, 3, 7, 6)).astype(dtype)]
    if name == "elementwise":
        y = tt.exp(-m) * 2 + tt.sqrt(m) / (m + 1) - abs(m - 1) ** 2
        return [m], [tt.maximum(y, 0.1), tt.tanh(m), tt.cast(m, "float64")], mv
    if name == "broadcast_and_reduce":
        vals = mv + [RNG.random(4).astype(dtype)]
        return (
            [m, v],
            [(m + v).sum(axis=0), m.max(axis=1), m.T.mean(), m.dimshuffle(1, "x", 0)],
            vals,
        )
    if name == "dot":
        vals = mv + [RNG.random((4, 5)).astype(dtype)]
        return [m, tt.matrix("b", dtype=dtype)], None, vals
    if name == "conv_flip_half":
        return _conv_case(dtype, border_mode="half")
    if name == "conv_stride_pad_correlate":
        return _conv_case(dtype, border_mode=(2, 1), subsample=(2, 1), filter_flip=False)
    if name == "conv_full_dilated":
        return _conv_case(dtype, border_mode="full", filter_dilation=(2, 1))
    if name == "max_pool_padded":
        return [x4], [nnet.pool_2d(x4, (3, 3), ignore_border=True, stride=(2, 2), pad=(1, 1))], img
    if name == "avg_pools":
        outs = [
            nnet.pool_2d(x4, (3, 3), True, (1, 1), (1, 1), mode="average_inc_pad"),
            nnet.pool_2d(x4, (2, 2), True, (2, 2), (1, 0), mode="average_exc_pad"),
        ]
        return [x4], outs, img
    if name == "batch_norm":
        g, b, mu, var = (tt.vector(n, dtype=dtype) for n in "gbmv")
        out = nnet.batch_normalization_test(x4, g, b, mu, var, axes="spatial", epsilon=1e-3)
        stats = [RNG.random(3).astype(dtype) + 0.5 for _ in range(4)]
        return [x4, g, b, mu, var], [out], img + stats
    if name == "softmax":
        return [m], [nnet.softmax(m), nnet.log_softmax(m), nnet.relu(m - 1)], mv
    if name == "concat_reshape_shape":
        y = tt.concatenate([x4, x4 * 2], axis=1)
        outs = [y.reshape((x4.shape[0], -1)), tt.flatten(x4, 2), x4[1:, ::-1, 2]]
        return [x4], outs, img
    raise AssertionError(name)


CASES = [
    "elementwise",
    "broadcast_and_reduce",
    "dot",
    "conv_flip_half",
    "conv_stride_pad_correlate",
    "conv_full_dilated",
    "max_pool_padded",
    "avg_pools",
    "batch_norm",
    "softmax",
    "concat_reshape_shape",
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", CASES)
def test_exported_graph_runs_in_onnx_runtime_and_imports_back(name, dtype):
    inputs, outputs, values = _case(name, dtype)
    if outputs is None:  # dot
        outputs = [tt.dot(inputs[0], inputs[1])]
    # ONNX Runtime's CPU Conv and AveragePool take float32 only: float64 checks the round
    # trip alone there
    ort_too = dtype == "float32" or not name.startswith(("avg_pools", "conv"))
    _check(inputs, outputs, values, rtol=1e-5 if dtype == "float32" else 1e-10, ort_too=ort_too)


def _resnet_block(dtype):
    """A ResNet bottleneck with projection, weights as shared variables."""
    x = tt.tensor4("x", dtype=dtype)
    net = Net(TensorOps(), init_params(resnet50, (1, 3, 8, 8), dtype=dtype))

    stem = net.conv_bn(x, "stem", 64, 7, 2, 3)
    return x, _bottleneck(net, stem, "res2.0", 64, 1, project=True)


def test_a_resnet_block_and_a_compiled_function_export():
    x, y = _resnet_block("float32")
    f = theano_dag.function([x], y)
    images = RNG.random((2, 3, 16, 16)).astype("float32")
    model = to_onnx(f)
    assert sum(n.op_type == "Conv" for n in model.graph.node) == 5
    assert len(model.graph.input) == 1  # the weights are initializers
    got = _run_ort(model, [images])[0]
    np.testing.assert_allclose(got, f(images), rtol=1e-4, atol=1e-4)


def test_resnet50_exports_and_runs_in_onnx_runtime():
    params = init_params(resnet50, (1, 3, 32, 32))
    x, probs = tensor_forward(resnet50, params)
    f = theano_dag.function([x], probs)
    images = RNG.random((2, 3, 32, 32)).astype("float32")
    model = to_onnx(f)
    np.testing.assert_allclose(_run_ort(model, [images])[0], f(images), rtol=1e-4, atol=1e-6)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value or d.dim_param for d in dims][1] == 3 and dims[0].dim_param


def test_a_function_graph_exports():
    m = tt.dmatrix("m")
    fg = theano_dag.graph.fg.FunctionGraph([m], [tt.exp(m) + 1], clone=True)
    model = to_onnx(fg)
    kinds = [n.op_type for n in model.graph.node]
    assert kinds[0] == "Exp" and kinds[-2:] == ["Add", "Identity"]


def test_batch_normalization_in_training_mode_exports():
    # Its output passes through an identity that carries the gradient: an ONNX Identity.
    x, g, b = tt.dtensor3("x"), tt.dvector("g"), tt.dvector("b")
    outs = nnet.batch_normalization_train(x, g, b, axes="spatial", epsilon=1e-3)
    vals = [RNG.standard_normal((4, 3, 5)), RNG.standard_normal(3), RNG.standard_normal(3)]
    _check([x, g, b], list(outs), vals, 1e-9)


def test_unsupported_ops_are_named():
    m = tt.dmatrix("m")
    with pytest.raises(OnnxExportError, match="no ONNX operator for .*Sort"):
        to_onnx([m], [tt.sort(m)])
    with pytest.raises(OnnxExportError, match="ignore_border=True"):
        to_onnx([m], [nnet.pool_2d(m, (2, 2), ignore_border=False)])
    model = to_onnx([m], [tt.exp(m)])
    model.graph.node[0].op_type = "Hardmax"
    with pytest.raises(OnnxExportError, match="no import for the ONNX operator Hardmax"):
        from_onnx(model)
    with pytest.raises(TypeError, match="give a compiled function, a FunctionGraph"):
        to_onnx(object())


def test_a_missing_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)
    m = tt.dmatrix("m")
    with pytest.raises(ImportError, match=r"pip install 'theano_dag\[onnx\]'"):
        to_onnx([m], [m + 1])


def _same_everywhere(inputs, outputs, values):
    """numpy's values (the reference engine) from theano_dag, ONNX Runtime and the model
    imported back: equal dtypes, equal values (NaN where NaN)."""
    ref = theano_dag.function(inputs, outputs, mode="FAST_COMPILE")(*values)
    model = to_onnx(inputs, outputs)
    back_in, back_out = from_onnx(model)
    back = theano_dag.function(back_in, back_out)(*values)
    for got in (_run_ort(model, values), back):
        for g, w in zip(got, ref):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
    return model


def test_semantics_that_onnx_spells_otherwise_are_kept():
    x = tt.dvector("x")
    i8, u8, b = tt.bvector("i8"), tt.vector("u8", dtype="uint8"), tt.vector("b", dtype="bool")
    xv = np.array([0.0, -2.5, np.nan, 300.0, -1e10, 7.9])
    i8v = np.array([-128, -1, 0, 5, 127, 3], dtype="int8")
    u8v = np.array([0, 1, 2, 200, 255, 9], dtype="uint8")
    bv = np.array([True, False, True, True, False, False])
    outs = [
        tt.switch(x, x * 2, -x),  # a float condition: nonzero (NaN too) is true
        tt.cast(x, "int8"),  # NaN and out of range: int8's minimum (the engines' rule)
        tt.cast(x, "uint16"),
        tt.sum(i8),  # int8 adds up in int64
        tt.sum(tt.cast(i8, "int32") * 20000000, acc_dtype="int32"),  # wraps in int32
        tt.concatenate([x, tt.cast(b, "float64")]),  # mixed dtypes join in their upcast
        abs(b),
        abs(u8),
        -u8,  # wraps
        tt.max(x.dimshuffle("x", 0), axis=()),  # no axes: the input itself
        tt.max(x),  # NaN where a NaN is among the values (ONNX Runtime skips it)
        tt.min(tt.stack([x, x * 2]), axis=1),
    ]
    h = tt.vector("h", dtype="float16")
    outs += [tt.cast(h, "int64"), tt.cast(h, "int8")]
    hv = np.array([np.inf, -70000, -3.5, 2000, np.nan, 1], dtype="float16")
    model = _same_everywhere([x, i8, u8, b, h], outs, [xv, i8v, u8v, bv, hv])
    assert "Where" in {n.op_type for n in model.graph.node}


def test_a_dtype_an_onnx_operator_does_not_take_is_refused_at_export():
    v = tt.bvector("v")
    with pytest.raises(OnnxExportError, match=r"dtypes.*Pow.*int8"):
        to_onnx([v], [v**3])


def test_operators_imported_as_onnx_defines_them():
    # Variadic Max/Min, integer Div (truncating toward zero), Where, a reduction over
    # an empty axes list (all axes), Pow in the base's dtype: models another exporter
    # writes.
    h = onnx.helper
    tp = onnx.TensorProto
    nodes = [
        h.make_node("Max", ["a", "b", "c"], ["mx"]),
        h.make_node("Min", ["a", "b", "c"], ["mn"]),
        h.make_node("Div", ["i", "j"], ["q"]),
        h.make_node("Where", ["cond", "a", "b"], ["w"]),
        h.make_node("ReduceSum", ["a", "noaxes"], ["s"], keepdims=0),
        h.make_node("Pow", ["a", "j64"], ["p"]),
    ]
    vec = [h.make_tensor_value_info(n, tp.FLOAT, [3]) for n in "abc"]
    ints = [h.make_tensor_value_info(n, tp.INT32, [4]) for n in "ij"]
    others = [
        h.make_tensor_value_info("cond", tp.BOOL, [3]),
        h.make_tensor_value_info("j64", tp.INT64, [3]),
    ]
    noaxes = onnx.numpy_helper.from_array(np.zeros(0, dtype="int64"), "noaxes")
    outs = [h.make_tensor_value_info(n, tp.FLOAT, None) for n in ("mx", "mn", "w", "s", "p")]
    outs.insert(2, h.make_tensor_value_info("q", tp.INT32, None))
    graph = h.make_graph(nodes, "g", vec + ints + others, outs, initializer=[noaxes])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    values = [
        np.array([1.0, 5.0, -2.0], "float32"),
        np.array([3.0, 0.5, -1.0], "float32"),
        np.array([2.0, 7.0, -3.0], "float32"),
        np.array([7, -7, 7, -7], "int32"),
        np.array([2, 2, -2, -2], "int32"),
        np.array([True, False, True]),
        np.array([2, 0, 3], "int64"),
    ]
    want = _run_ort(model, values)
    back_in, back_out = from_onnx(model)
    got = theano_dag.function(back_in, back_out)(*values)
    np.testing.assert_array_equal(want[2], [3, -3, -3, 3])  # what ONNX says Div is
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_more_elementwise_operators_export_and_import(dtype):
    x, y = tt.vector("x", dtype=dtype), tt.vector("y", dtype=dtype)
    i, j = tt.ivector("i"), tt.ivector("j")
    b = tt.vector("b", dtype="bool")
    xv = np.array([-0.5, 0.25, 0.75, 2.5, -3.5], dtype=dtype)
    yv = np.array([0.5, 0.25, -1.0, 2.0, np.inf], dtype=dtype)
    iv, jv = np.array([3, -4, 0, 7, 12], "int32"), np.array([5, 5, -1, 2, 12], "int32")
    bv = np.array([True, False, True, False, True])
    outs = [
        x >= y, x <= y, tt.neq(x, y), tt.sqr(x), tt.sin(x), tt.cos(x), tt.tan(x),
        tt.arcsin(x / 4), tt.arccos(x / 4), tt.arctan(x), tt.sinh(x), tt.cosh(x),
        tt.arcsinh(x), tt.arccosh(abs(x) + 1), tt.arctanh(x / 4), tt.isnan(y), tt.isinf(y),
        tt.sgn(x), tt.floor(x), tt.ceil(x), tt.round(x, mode="half_to_even"), tt.erf(x),
        tt.reciprocal(y), tt.clip(x, -1, 0.5), tt.clip(x, 1, -1), tt.second(y, i),
        i & j, i | j, i ^ j, ~i, b & ~b, b | b, b ^ np.True_,
    ]  # fmt: skip
    model = to_onnx([x, y, i, j, b], outs)
    values = [xv, yv, iv, jv, bv]
    want = theano_dag.function([x, y, i, j, b], outs, mode="FAST_COMPILE")(*values)
    back_in, back_out = from_onnx(model)
    again = theano_dag.function(back_in, back_out)(*values)
    rtol = 1e-6 if dtype == "float32" else 1e-12
    # ONNX Runtime's CPU kernels of the trigonometric and hyperbolic functions other
    # than sin and cos take float32 only: float64 checks the round trip alone there.
    try:
        ran = _run_ort(model, values)
    except Exception as exc:
        assert dtype == "float64" and "NOT_IMPLEMENTED" in str(exc)
        ran = again
    for got in (ran, again):
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=rtol)


# theano_dag's compound scalar ops are their formulas in ONNX's operators; ONNX has no
# Log1p or Expm1 either: written in its operators, exact for small arguments
_COMPOUND = {
    **COMPOUND,
    "log1p": (tt.log1p, ([-1, -0.5, -1e-20, 0, -0.0, 1e-10, 1e-3, 0.7, 1e30, np.inf, np.nan],)),
    "expm1": (tt.expm1, ([-np.inf, -800, -1e-3, -1e-20, 0, -0.0, 1e-10, 0.7, 80, np.inf],)),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(_COMPOUND))
def test_compound_scalar_ops_export_as_their_formulas(name, dtype):
    build, args = _COMPOUND[name]
    xs = [tt.vector(f"x{k}", dtype=dtype) for k in range(len(args))]
    values = [np.asarray(a, dtype=dtype) for a in args]
    out = build(*xs)  # (compound_case's, with two more)
    with np.errstate(all="ignore"):
        (want,) = theano_dag.function(xs, [out])(*values)
    model = to_onnx(xs, [out])
    back_in, back_out = from_onnx(model)
    (again,) = theano_dag.function(back_in, back_out)(*values)
    rtol = 8 * np.finfo(dtype).eps  # a few roundings apart: log1p(y) ONNX's is not libm's
    for got in (_run_ort(model, values)[0], again):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0)  # (NaN where NaN)


def test_binary_crossentropy_and_its_gradient_export():
    o, t = tt.dvector("o"), tt.dvector("t")
    cost = nnet.binary_crossentropy(o, t).sum()
    outs = [cost, theano_dag.grad(cost, o)]  # the gradient is binary_crossentropy_grad
    values = [np.array([0.0, 1.0, 0.25, 0.9]), np.array([0.0, 1.0, 1.0, 0.5])]
    want = theano_dag.function([o, t], outs)(*values)
    assert np.isfinite(want[0]) and np.isfinite(want[1]).all()
    model = to_onnx([o, t], outs)
    back_in, back_out = from_onnx(model)
    for got in (_run_ort(model, values), theano_dag.function(back_in, back_out)(*values)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-14)


def test_a_compound_op_whose_formula_onnx_lacks_is_named():
    x = tt.dvector("x")
    with pytest.raises(OnnxExportError, match="no ONNX operator for the elementwise erfcx"):
        to_onnx([x], [tt.erfcx_deriv(x)])


def test_log1p_and_expm1_come_back_as_themselves_and_only_those_forms_do():
    y = tt.dvector("y")
    back_in, back_out = from_onnx(to_onnx([y], [tt.log1p(y), tt.expm1(y)]))
    assert [o.owner.op.scalar_op.name for o in back_out] == ["log1p", "expm1"]
    assert [o.owner.inputs[0] for o in back_out] == back_in * 2
    # the same Where and Equal around another formula stay what they are
    u = 1 + y
    other = tt.switch(tt.eq(u, 1), y, tt.switch(tt.eq(u, np.inf), u, tt.log(u) * y))
    back_in, (back,) = from_onnx(to_onnx([y], [other]))
    assert back.owner.op.scalar_op.name == "switch"
    values = np.array([1e-20, 0.5, np.inf])
    want = theano_dag.function([y], other)(values)
    np.testing.assert_array_equal(theano_dag.function(back_in, back)(values), want)


def test_logsumexp_and_its_gradient_export():
    # its terms are exp_sub(x, max): 1 at a +inf maximum, whose gradient is the softmax's limit
    x = tt.dmatrix("x")
    lse = tt.logsumexp(x, axis=1)
    outs = [lse, theano_dag.grad(lse.sum(), x)]
    values = [np.array([[np.inf, 0.0, 1.0], [-1.0, 2.0, 3.0], [np.inf, np.inf, 0.0]])]
    want = theano_dag.function([x], outs)(*values)
    np.testing.assert_array_equal(want[1][2], [0.5, 0.5, 0.0])
    model = to_onnx([x], outs)
    back_in, back_out = from_onnx(model)
    for got in (_run_ort(model, values), theano_dag.function(back_in, back_out)(*values)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-14)
