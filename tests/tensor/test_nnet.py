"""Neural-network ops: one table of rows (op, inputs, numpy reference written
independently with plain loops) checked for float32/float64 values, ``infer_shape``
against the real shape, and gradients by finite differences; then the graph
structure of the gradients and the error messages."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag.compile.function import function as _function
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.engines.cpu.native import ckernel
from theano_dag.gradient import grad
from theano_dag.gradient import verify_grad as _verify_grad
from theano_dag.graph.basic import ancestors
from theano_dag.scalar import sigmoid_binary_crossentropy as sigmoid_binary_crossentropy_scalar
from theano_dag.tensor import nnet
from theano_dag.tensor.nnet import (
    AbstractConv2d,
    AbstractConv2d_gradInputs,
    AbstractConv2d_gradWeights,
    AveragePoolGrad,
    DownsampleFactorMaxGradGrad,
    MaxPoolGrad,
    Pool,
    SoftmaxGrad,
)
from theano_dag.tensor.shape import shape_i

# The references live next to this file; --import-mode=importlib does not put it on sys.path.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nnet_reference import (  # noqa: E402
    ref_avg_pool_grad,
    ref_bn_train,
    ref_conv2d,
    ref_conv_grad_inputs,
    ref_conv_grad_weights,
    ref_log_softmax,
    ref_max_pool_grad,
    ref_pool,
    ref_softmax,
)

# Ops are checked on the reference engine (Op.perform in order, no rewrites): the
# ground truth that every other engine and rewrite is compared with.
MODE = Mode(linker="py", optimizer=None)


def function(inputs, outputs, **kwargs):
    return _function(inputs, outputs, mode=MODE, **kwargs)


def verify_grad(fun, pt, **kwargs):
    return _verify_grad(fun, pt, mode=MODE, **kwargs)


FLOATS = ("float32", "float64")


# -- input generators ------------------------------------------------------------------


def normal(*shape):
    return lambda rng, dtype: rng.standard_normal(shape).astype(dtype)


def away_from_zero(*shape):
    def gen(rng, dtype):
        return (rng.choice([-1, 1], size=shape) * rng.uniform(0.2, 2.0, shape)).astype(dtype)

    return gen


def distinct(*shape):
    """Distinct values (no ties: max pooling is differentiable there)."""
    return lambda rng, dtype: (
        rng.permutation(int(np.prod(shape))).reshape(shape) / 7.0 - 1.0
    ).astype(dtype)


def probs(*shape):
    return lambda rng, dtype: ref_softmax(rng.standard_normal(shape)).astype(dtype)


def uniform(*shape, lo=0.1, hi=0.9):
    return lambda rng, dtype: rng.uniform(lo, hi, shape).astype(dtype)


def labels(n, k):
    return lambda rng, dtype: rng.integers(0, k, n).astype("int64")


@dataclass
class Row:
    name: str
    build: object
    ref: object
    gens: tuple
    grad: bool = True

    def __str__(self):
        return self.name


def conv_row(name, xs, ws, **kw):
    return Row(
        f"conv2d-{name}",
        lambda x, w: nnet.conv2d(x, w, **kw),
        lambda x, w: ref_conv2d(x, w, **kw),
        (normal(*xs), normal(*ws)),
    )


def conv_grad_rows(name, xs, ws, **kw):
    gys = ref_conv2d(np.zeros(xs), np.zeros(ws), **kw).shape
    gi = AbstractConv2d_gradInputs(**kw)
    gw = AbstractConv2d_gradWeights(**kw)
    return [
        Row(
            f"conv_grad_inputs-{name}",
            lambda w, gy: gi(w, gy, list(xs[2:])),
            lambda w, gy: ref_conv_grad_inputs(w, gy, xs[2:], **kw),
            (normal(*ws), normal(*gys)),
        ),
        Row(
            f"conv_grad_weights-{name}",
            lambda x, gy: gw(x, gy, list(ws[2:])),
            lambda x, gy: ref_conv_grad_weights(x, gy, ws[2:], **kw),
            (normal(*xs), normal(*gys)),
        ),
    ]


def pool_rows(name, xs, ws, mode_list=("max", "sum", "average_inc_pad", "average_exc_pad"), **kw):
    rows = []
    for mode in mode_list:
        rows.append(
            Row(
                f"pool-{name}-{mode}",
                lambda x, mode=mode: nnet.pool_2d(x, ws, mode=mode, **kw),
                lambda x, mode=mode: ref_pool(x, ws, mode=mode, **kw),
                (distinct(*xs),),
            )
        )
    gz_shape = ref_pool(np.zeros(xs), ws, **kw).shape
    p = dict(
        stride=kw.get("stride"),
        pad=kw.get("pad", (0, 0)),
        ignore_border=kw.get("ignore_border", True),
    )
    rows.append(
        Row(
            f"max_pool_grad-{name}",
            lambda x, gz: MaxPoolGrad(ws, **p)(x, Pool(ws, **p)(x), gz),
            lambda x, gz: ref_max_pool_grad(x, gz, ws, **p),
            (distinct(*xs), normal(*gz_shape)),
        )
    )
    rows.append(
        Row(
            f"avg_pool_grad-{name}",
            lambda x, gz: AveragePoolGrad(ws, mode="average_inc_pad", **p)(x, gz),
            lambda x, gz: ref_avg_pool_grad(x, gz, ws, mode="average_inc_pad", **p),
            (distinct(*xs), normal(*gz_shape)),
        )
    )
    return rows


def _xent_fused(k):
    def build(x, b, y):
        return nnet.crossentropy_softmax_argmax_1hot_with_bias(x, b, y)[k]

    def ref(x, b, y):
        sm = ref_softmax(x + b)
        return [-np.log(sm[np.arange(len(y)), y]), sm, np.argmax(x + b, axis=1)][k]

    return build, ref


def _bn_train_row(name, xs, axes, k, param_shape):
    def build(x, g, b):
        return nnet.batch_normalization_train(x, g, b, axes=axes, epsilon=1e-3)[k]

    def ref(x, g, b):
        ax = (0,) if axes == "per-activation" else (0,) + tuple(range(2, x.ndim))
        full = tuple(1 if d in ax else s for d, s in enumerate(x.shape))
        out = ref_bn_train(x, g.reshape(full), b.reshape(full), ax, 1e-3)[k]
        return out if k == 0 else out.reshape(g.shape)

    return Row(
        f"bn_train-{name}-{k}",
        build,
        ref,
        (normal(*xs), uniform(*param_shape, lo=0.5, hi=1.5), normal(*param_shape)),
        grad=True,
    )


ROWS = [
    Row("relu", nnet.relu, lambda x: np.maximum(x, 0), (away_from_zero(3, 4),)),
    Row(
        "relu-leaky",
        lambda x: nnet.relu(x, 0.1),
        lambda x: np.where(x > 0, x, 0.1 * x),
        (away_from_zero(3, 4),),
    ),
    Row("elu", nnet.elu, lambda x: np.where(x > 0, x, np.expm1(x)), (away_from_zero(3, 4),)),
    Row(
        "selu",
        nnet.selu,
        lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)),
        (away_from_zero(3, 4),),
    ),
    Row("softsign", nnet.softsign, lambda x: x / (1 + np.abs(x)), (normal(3, 4),)),
    Row("softmax", nnet.softmax, ref_softmax, (normal(3, 5),)),
    # Theano's softmax of a vector: the softmax of its one row, a (1, n) matrix
    Row("softmax-vector", nnet.softmax, lambda v: ref_softmax(v[None, :]), (normal(5),)),
    Row(
        "softmax-vector-axis",
        lambda v: nnet.softmax(v, axis=-1),
        ref_softmax,
        (normal(5),),
    ),
    Row(
        "log_softmax-vector", nnet.log_softmax, lambda v: ref_log_softmax(v[None, :]), (normal(5),)
    ),
    Row(
        "softmax-axis0",
        lambda x: nnet.softmax(x, axis=0),
        lambda x: ref_softmax(x, 0),
        (normal(3, 5),),
    ),
    Row(
        "softmax-3d-axis1",
        lambda x: nnet.softmax(x, axis=1),
        lambda x: ref_softmax(x, 1),
        (normal(2, 3, 4),),
    ),
    Row("log_softmax", nnet.log_softmax, ref_log_softmax, (normal(3, 5),)),
    Row(
        "log_softmax-axis0",
        lambda x: nnet.log_softmax(x, axis=0),
        lambda x: ref_log_softmax(x, 0),
        (normal(3, 5),),
    ),
    Row(
        "softmax_grad",
        lambda dy, sm: SoftmaxGrad(-1)(dy, sm),
        lambda dy, sm: dy * sm - sm * (dy * sm).sum(axis=-1, keepdims=True),
        (normal(3, 4), probs(3, 4)),
    ),
    Row(
        "categorical_crossentropy-dense",
        nnet.categorical_crossentropy,
        lambda p, t: -(t * np.log(p)).sum(axis=1),
        (probs(4, 3), probs(4, 3)),
    ),
    Row(
        "categorical_crossentropy-labels",
        nnet.categorical_crossentropy,
        lambda p, y: -np.log(p[np.arange(len(y)), y]),
        (probs(4, 3), labels(4, 3)),
    ),
    Row(
        "crossentropy_categorical_1hot_grad",
        nnet.crossentropy_categorical_1hot_grad,
        lambda g, p, y: np.eye(p.shape[1])[y] * (-g / p[np.arange(len(y)), y])[:, None],
        (normal(4), probs(4, 3), labels(4, 3)),
    ),
    Row(
        "binary_crossentropy",
        nnet.binary_crossentropy,
        lambda o, t: -(t * np.log(o) + (1 - t) * np.log(1 - o)),
        (uniform(3, 4), uniform(3, 4, lo=0.0, hi=1.0)),
    ),
    Row(
        "sigmoid_binary_crossentropy",
        nnet.sigmoid_binary_crossentropy,
        lambda o, t: -(
            t * np.log(1 / (1 + np.exp(-o))) + (1 - t) * np.log(1 - 1 / (1 + np.exp(-o)))
        ),
        (normal(3, 4), uniform(3, 4, lo=0.0, hi=1.0)),
    ),
    Row("xent_fused-nll", *_xent_fused(0), (normal(4, 3), normal(3), labels(4, 3))),
    Row("xent_fused-softmax", *_xent_fused(1), (normal(4, 3), normal(3), labels(4, 3))),
    Row("xent_fused-argmax", *_xent_fused(2), (normal(4, 3), normal(3), labels(4, 3)), grad=False),
    Row(
        "xent_fused-dx",
        nnet.crossentropy_softmax_1hot_with_bias_dx,
        lambda dy, sm, y: dy[:, None] * (sm - np.eye(sm.shape[1])[y]),
        (normal(4), probs(4, 3), labels(4, 3)),
    ),
    conv_row("valid", (2, 3, 5, 6), (4, 3, 3, 2)),
    conv_row("half", (2, 3, 5, 5), (2, 3, 3, 3), border_mode="half"),
    conv_row("full-stride2", (1, 2, 5, 4), (3, 2, 2, 3), border_mode="full", subsample=2),
    conv_row(
        "asym-pad-dilated",
        (2, 2, 7, 6),
        (2, 2, 2, 3),
        border_mode=(1, (0, 2)),
        subsample=(2, 1),
        filter_dilation=(2, 1),
    ),
    conv_row("groups-noflip", (2, 4, 5, 5), (6, 2, 3, 3), num_groups=2, filter_flip=False),
    conv_row("1x1-pad2-stride3", (1, 3, 4, 5), (2, 3, 1, 1), border_mode=2, subsample=3),
    *conv_grad_rows("valid", (2, 3, 5, 6), (4, 3, 3, 2)),
    *conv_grad_rows(
        "strided-dilated",
        (2, 2, 7, 6),
        (2, 2, 2, 3),
        border_mode=(1, (0, 2)),
        subsample=(2, 1),
        filter_dilation=(2, 1),
    ),
    *conv_grad_rows(
        "groups", (1, 4, 5, 5), (4, 2, 3, 3), num_groups=2, border_mode="half", subsample=2
    ),
    *pool_rows("2x2", (2, 2, 4, 6), (2, 2), ignore_border=True),
    *pool_rows("3x2-stride1x2", (1, 2, 5, 6), (3, 2), ignore_border=True, stride=(1, 2)),
    *pool_rows("3x3-partial", (2, 1, 7, 5), (3, 3), ignore_border=False, stride=(2, 2)),
    *pool_rows("3x3-pad", (1, 2, 5, 6), (3, 3), ignore_border=True, pad=(1, 2), stride=(2, 2)),
    *pool_rows("2d-input", (5, 4), (2, 3), ignore_border=False, mode_list=("max",)),
    Row(
        "batch_normalization",
        nnet.batch_normalization,
        lambda x, g, b, m, s: (x - m) * g / s + b,
        (normal(4, 3), normal(1, 3), normal(1, 3), normal(1, 3), uniform(1, 3, lo=0.5, hi=2)),
    ),
    *[_bn_train_row("per-activation", (5, 3), "per-activation", k, (3,)) for k in range(3)],
    *[_bn_train_row("spatial", (3, 2, 2, 3), "spatial", k, (2,)) for k in range(3)],
    Row(
        "bn_test-spatial",
        lambda x, g, b, m, v: nnet.batch_normalization_test(x, g, b, m, v, axes="spatial"),
        lambda x, g, b, m, v: (x - m[:, None, None])
        * g[:, None, None]
        / np.sqrt(v[:, None, None] + 1e-4)
        + b[:, None, None],
        (normal(2, 3, 2, 2), normal(3), normal(3), normal(3), uniform(3, lo=0.5, hi=2)),
    ),
]


def _row_values(row, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [g(rng, dtype) for g in row.gens]


def _sym(value):
    return tt.TensorType(value.dtype, shape=tuple(1 if s == 1 else None for s in value.shape))()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("row", ROWS, ids=str)
def test_value_and_infer_shape(row, dtype):
    vals = _row_values(row, dtype)
    xs = [_sym(v) for v in vals]
    out = row.build(*xs)
    f = function(xs, out, on_unused_input="ignore")
    got = f(*vals)
    want = row.ref(*[v.astype("float64") if v.dtype.kind == "f" else v for v in vals])
    if out.dtype.startswith("float"):
        assert out.dtype == dtype
        tol = 2e-4 if dtype == "float32" else 1e-9
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)
    # infer_shape of the node that computed the output, evaluated, against the value.
    node = out.owner
    in_shapes = [tuple(shape_i(v, d) for d in range(v.ndim)) for v in node.inputs]
    for o, shp in zip(node.outputs, node.op.infer_shape(None, node, in_shapes)):
        real = function(xs, o, on_unused_input="ignore")(*vals).shape
        entries = [tt.as_tensor_variable(s) for s in shp]
        got_shape = function(xs, entries, on_unused_input="ignore")(*vals) if entries else []
        assert tuple(int(s) for s in got_shape) == real, (o, real)


@pytest.mark.parametrize("row", [r for r in ROWS if r.grad], ids=str)
def test_grad(row):
    vals = _row_values(row, "float64", seed=1)
    floats = [k for k, v in enumerate(vals) if v.dtype.kind == "f"]

    def fun(*fs):
        args = list(vals)
        for k, f in zip(floats, fs):
            args[k] = f
        args = [a if k in floats else tt.constant(a) for k, a in enumerate(args)]
        return row.build(*args)

    verify_grad(fun, [vals[k] for k in floats], rng=np.random.default_rng(2))


# -- gradients: structure and second order ------------------------------------------------


def _ops_in(v):
    return {type(a.owner.op) for a in ancestors([v]) if a.owner is not None}


def test_gradient_graphs_use_the_grad_ops():
    x, w = tt.dtensor4("x"), tt.dtensor4("w")
    gx, gw = grad(nnet.conv2d(x, w).sum(), [x, w])
    assert AbstractConv2d_gradInputs in _ops_in(gx)
    assert AbstractConv2d_gradWeights in _ops_in(gw)
    m = tt.dmatrix("m")
    assert SoftmaxGrad in _ops_in(grad(nnet.softmax(m)[0, 0], m))
    assert MaxPoolGrad in _ops_in(grad(nnet.max_pool_2d(x, (2, 2)).sum(), x))
    assert AveragePoolGrad in _ops_in(grad(nnet.avg_pool_2d(x, (2, 2)).sum(), x))


@pytest.mark.parametrize("kw", [dict(), dict(border_mode="half", subsample=2)])
def test_conv2d_second_order(kw):
    rng = np.random.default_rng(3)

    def grad_wrt_x(x, w):
        return grad((nnet.conv2d(x, w, **kw) ** 2).sum(), x)

    verify_grad(
        grad_wrt_x, [rng.standard_normal((1, 2, 5, 5)), rng.standard_normal((2, 2, 3, 3))], rng=rng
    )


def test_pool_grad_grad_ops():
    rng = np.random.default_rng(4)
    x = distinct(1, 2, 4, 5)(rng, "float64")

    def max_grad_grad(ggx):
        xv = tt.constant(x)
        return DownsampleFactorMaxGradGrad((2, 2), ignore_border=False)(
            xv, Pool((2, 2), ignore_border=False)(xv), ggx
        )

    verify_grad(max_grad_grad, [rng.standard_normal(x.shape)], rng=rng)

    def max_grad(gz):
        xv = tt.constant(x)
        return MaxPoolGrad((2, 2), ignore_border=False)(
            xv, Pool((2, 2), ignore_border=False)(xv), gz
        )

    verify_grad(max_grad, [rng.standard_normal((1, 2, 2, 3))], rng=rng)


def test_softmax_is_stable_and_fused_xent_gradient():
    x, b, y = tt.dmatrix("x"), tt.dvector("b"), tt.lvector("y")
    nll, sm, _ = nnet.crossentropy_softmax_argmax_1hot_with_bias(x, b, y)
    gx = grad(nll.sum(), x)
    f = function([x, b, y], [nll, sm, gx])
    xv = np.array([[0.0, 1000.0, -1000.0]])
    nv, smv, gv = f(xv, np.zeros(3), np.array([0]))
    np.testing.assert_allclose(nv, [1000.0])
    np.testing.assert_allclose(smv, [[0.0, 1.0, 0.0]], atol=1e-300)
    np.testing.assert_allclose(gv, [[-1.0, 1.0, 0.0]])
    assert np.isfinite(function([x], nnet.log_softmax(x))(xv)).all()


@pytest.mark.parametrize("linker", ["py", "cpu"])
def test_sigmoid_gradient_cancels_the_users_one_minus_sigmoid(linker):
    # The gradient of log(1 - sigmoid(x)) is s * (1 - s) / (1 - s). Its ``1 - s`` must be
    # the user's ``1.0 - s`` (the same constant), so that canonicalize, with no other
    # rewrite, cancels it (Theano's test_grad_useless_sum): otherwise 0 / 0 at x = 100,
    # where 1 - s rounds to 0. (float64, as Theano's test: in float32 canonicalize leaves
    # this graph alone.)
    dtype = "float64"
    x = tt.TensorType(dtype, (True,))("x")
    g = grad(tt.log(1.0 - nnet.sigmoid(x))[0], x)
    xs = [-100.0, -1.0, 0.0, 1.0, 100.0]
    want = [-1.0 / (1.0 + np.exp(-v)) for v in xs]  # d/dx log(1 - s) = -s
    # "None", the empty query (a Mode of optimizer None has no query to include into).
    mode = Mode(linker=linker, optimizer="None").including("canonicalize")
    f = _function([x], g, mode=mode)
    got = [f(np.array([v], dtype=dtype)) for v in xs]
    assert {r.dtype for r in got} == {np.dtype(dtype)}
    np.testing.assert_allclose(np.concatenate(got), want, rtol=1e-6, atol=1e-300)
    # With no rewrites at all the graph keeps the 0 / 0 (Theano's does too); the values
    # where 1 - s does not round to 0 are right.
    f = _function([x], g, mode=Mode(linker=linker, optimizer=None))
    got = [f(np.array([v], dtype=dtype)) for v in xs[:4]]
    np.testing.assert_allclose(np.concatenate(got), want[:4], rtol=1e-6, atol=1e-300)


@pytest.mark.parametrize("build_mode", ["off", "sync"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sigmoid_binary_crossentropy_at_infinite_logits(dtype, build_mode):
    # t * softplus(-z) + (1 - t) * softplus(z) was 0 * inf = NaN at z = -inf, t = 0 and
    # z = inf, t = 1; the gradient wrt t (-z) stays unblocked at t = 0 and 1, and the one
    # wrt z does not round to 0 where sigmoid(z) rounds to 1
    z, t = tt.TensorType(dtype, (None,))("z"), tt.TensorType(dtype, (None,))("t")
    out = nnet.sigmoid_binary_crossentropy(z, t)
    gz, gt = grad(out.sum(), [z, t])
    with ckernel.compile_mode(build_mode):
        f = _function([z, t], [out, gz, gt], mode=Mode(linker="cpu", optimizer="fast_run"))
    zv = np.array([-np.inf, np.inf, -np.inf, 40.0, -800.0, 0.0, np.nan], dtype)
    tv = np.array([0.0, 1.0, 1.0, 1.0, 0.0, 0.25, 0.0], dtype)
    val, dz, dt = f(zv, tv)
    np.testing.assert_array_equal(val[:3], [0.0, 0.0, np.inf])
    np.testing.assert_allclose(val[3:6], [np.exp(-40.0), np.log1p(np.exp(-800.0)), np.log(2)])
    np.testing.assert_allclose(dz[:6], [0.0, 0.0, -1.0, -np.exp(-40.0), 0.0, 0.25], rtol=1e-6)
    np.testing.assert_array_equal(dt[:6], -zv[:6])
    assert np.isnan([val[6], dz[6], dt[6]]).all()
    ops = [n.op for n in f.maker.fgraph.toposort() if n.outputs[0] is f.maker.fgraph.outputs[0]]
    assert ops[0].scalar_op == sigmoid_binary_crossentropy_scalar


@pytest.mark.parametrize("build_mode", ["off", "sync"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_crossentropy_where_a_term_has_weight_zero(dtype, build_mode):
    # t * log(o) was 0 * -inf = NaN at o = t = 0 (and (1 - t) * log(1 - o) at o = t = 1),
    # and its derivative -t / o 0 / 0: a term of weight 0 takes no part, in the value and
    # in the derivative in o; the derivative in t, log(1 - o) - log(o), is +-inf there
    o, t = tt.TensorType(dtype, (None,))("o"), tt.TensorType(dtype, (None,))("t")
    out = nnet.binary_crossentropy(o, t)
    go, gt = grad(out.sum(), [o, t])
    with ckernel.compile_mode(build_mode):
        f = _function([o, t], [out, go, gt], mode=Mode(linker="cpu", optimizer="fast_run"))
    ov = np.array([0.0, 1.0, 0.0, 1e-30, 0.5], dtype)
    tv = np.array([0.0, 1.0, 1.0, 0.0, 0.25], dtype)
    val, d_o, d_t = f(ov, tv)
    np.testing.assert_array_equal(val[:3], [0.0, 0.0, np.inf])
    np.testing.assert_allclose(val[3:], [1e-30, np.log(2)], rtol=1e-6)
    np.testing.assert_allclose(d_o, [1.0, -1.0, -np.inf, 1.0, 1.0], rtol=1e-6)
    np.testing.assert_array_equal(d_t[:3], [np.inf, -np.inf, np.inf])


def test_sigmoid_binary_crossentropy_gradients_by_finite_differences():
    rng = np.random.default_rng(3)
    _verify_grad(
        nnet.sigmoid_binary_crossentropy,
        [rng.normal(size=(3, 4)) * 5, rng.uniform(size=(3, 4))],
        rng=rng,
    )


def test_categorical_crossentropy_label_graph():
    p, y = tt.dmatrix("p"), tt.lvector("y")
    out = nnet.categorical_crossentropy(p, y)
    assert isinstance(out.owner.op, nnet.CrossentropyCategorical1Hot)


def test_batch_normalization_train_running_averages():
    x = tt.dmatrix("x")
    g, b, rm, rv = tt.dvector("g"), tt.dvector("b"), tt.dvector("rm"), tt.dvector("rv")
    outs = nnet.batch_normalization_train(
        x, g, b, epsilon=1e-4, running_average_factor=0.25, running_mean=rm, running_var=rv
    )
    assert len(outs) == 5
    rng = np.random.default_rng(5)
    xv = rng.standard_normal((6, 3))
    vals = function([x, g, b, rm, rv], list(outs))(
        xv, np.ones(3), np.zeros(3), np.ones(3), np.full(3, 2.0)
    )
    np.testing.assert_allclose(vals[3], 0.75 + 0.25 * xv.mean(0))
    np.testing.assert_allclose(vals[4], 1.5 + 0.25 * xv.var(0, ddof=1))
    np.testing.assert_allclose(vals[0], (xv - xv.mean(0)) / np.sqrt(xv.var(0) + 1e-4))


def test_batch_normalization_train_full_rank_params():
    x = tt.dtensor4("x")
    g = tt.TensorType("float64", shape=(1, None, 1, 1))("g")
    b = tt.TensorType("float64", shape=(1, None, 1, 1))("b")
    out, mean, invstd = nnet.batch_normalization_train(x, g, b, axes="spatial")
    assert mean.type.shape == (1, None, 1, 1)
    rng = np.random.default_rng(6)
    xv, gv, bv = rng.standard_normal((2, 3, 2, 2)), rng.random((1, 3, 1, 1)), np.zeros((1, 3, 1, 1))
    got = function([x, g, b], out)(xv, gv, bv)
    np.testing.assert_allclose(got, ref_bn_train(xv, gv, bv, (0, 2, 3), 1e-4)[0])


def _bn_second_order_case(axes, shape, reduced):
    """Batch norm's first-order gradients, and the second-order ones with the batch
    statistics held constant and not, next to the same for the normalization written
    out (Theano's test_batch_normalization_train holds the written-out mean and var)."""
    ndim = len(shape)
    ax = (0,) if axes == "per-activation" else (0,) + tuple(range(2, ndim))
    keep = [d for d in range(ndim) if d not in ax]
    x, dy, dx = (tt.TensorType("float64", shape=(None,) * ndim)(n) for n in ("x", "dy", "dx"))
    if reduced:
        ptype = tt.TensorType("float64", shape=(None,) * len(keep))
        pshape = tuple(shape[d] for d in keep)
    else:
        ptype = tt.TensorType("float64", shape=tuple(1 if d in ax else None for d in range(ndim)))
        pshape = tuple(1 if d in ax else s for d, s in enumerate(shape))
    g, b, dg, db = (ptype(n) for n in ("g", "b", "dg", "db"))
    out, mean, invstd = nnet.batch_normalization_train(x, g, b, axes, 1e-3)
    if reduced:
        pattern = ["x"] * ndim
        for i, d in enumerate(keep):
            pattern[d] = i
        g_full, b_full = g.dimshuffle(pattern), b.dimshuffle(pattern)
    else:
        g_full, b_full = g, b
    mean2 = x.mean(axis=ax, keepdims=True)
    var2 = x.var(axis=ax, keepdims=True)
    out2 = (x - mean2) * (g_full / tt.sqrt(var2 + 1e-3)) + b_full
    outs = []
    for o, held in ((out, [mean, invstd]), (out2, [mean2, var2])):
        first = grad(None, [x, g, b], known_grads={o: dy})
        outs += first
        for consider_constant in (held, []):
            outs += grad(
                None,
                [x, dy, g],
                known_grads=dict(zip(first, (dx, dg, db))),
                consider_constant=consider_constant,
                return_disconnected="zero",
            )
    rng = np.random.default_rng(10)
    vals = [
        4 + 3 * rng.standard_normal(shape),
        rng.standard_normal(pshape),
        rng.standard_normal(pshape),
        rng.standard_normal(shape),
        rng.standard_normal(shape),
        rng.standard_normal(pshape),
        rng.standard_normal(pshape),
    ]
    f = function([x, g, b, dy, dx, dg, db], outs, on_unused_input="ignore")
    return f(*vals)


@pytest.mark.parametrize("reduced", [True, False], ids=["reduced", "full-rank"])
@pytest.mark.parametrize(
    "axes,shape", [("per-activation", (5, 3)), ("spatial", (3, 2, 2, 3))], ids=str
)
def test_batch_normalization_train_second_order(axes, shape, reduced):
    got = _bn_second_order_case(axes, shape, reduced)
    ours, written_out = got[:9], got[9:]
    # first order, then held constant (x, dy, g), then not held (x, dy, g)
    for k, (a, w) in enumerate(zip(ours, written_out)):
        np.testing.assert_allclose(a, w, rtol=1e-9, atol=1e-9, err_msg=f"output {k}")
    # Holding the statistics changes the second order in x: the test sees both.
    assert not np.allclose(ours[3], ours[6])


def test_batch_normalization_train_second_order_by_finite_differences():
    rng = np.random.default_rng(11)
    w = rng.standard_normal((4, 3))

    def grad_wrt_x(x, g):
        out = nnet.batch_normalization_train(x, g, tt.zeros_like(g), epsilon=1e-3)[0]
        return grad(((out * w) ** 2).sum(), x)

    verify_grad(grad_wrt_x, [1 + rng.standard_normal((4, 3)), rng.standard_normal(3)], rng=rng)


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build,exc,match",
    [
        (
            lambda: nnet.softmax(tt.lmatrix()),
            TypeError,
            r"Softmax\{axis=-1\}: argument x must be a float tensor",
        ),
        (lambda: nnet.softmax(tt.dmatrix(), axis=2), ValueError, "axis 2 is out of range"),
        (lambda: nnet.Softmax()(tt.dscalar()), TypeError, "at least 1 dimension"),
        (
            lambda: SoftmaxGrad(-1)(tt.dmatrix(), tt.dvector()),
            TypeError,
            "same number of dimensions",
        ),
        (
            lambda: nnet.categorical_crossentropy(tt.dmatrix(), tt.dtensor3()),
            TypeError,
            "rank mismatch",
        ),
        (
            lambda: nnet.crossentropy_categorical_1hot(tt.dmatrix(), tt.dvector()),
            TypeError,
            "argument true_one_of_n must be an integer vector",
        ),
        (
            lambda: nnet.crossentropy_softmax_argmax_1hot_with_bias(
                tt.dmatrix(), tt.dmatrix(), tt.lvector()
            ),
            TypeError,
            "argument b must have 1 dimension",
        ),
        (
            lambda: nnet.conv2d(tt.dtensor3(), tt.dtensor4()),
            TypeError,
            r"AbstractConv2d\{.*\}: argument img must be a 4-D tensor",
        ),
        (
            lambda: nnet.conv2d(tt.dtensor4(), tt.ltensor4()),
            TypeError,
            "argument kern must be a float tensor",
        ),
        (
            lambda: nnet.conv2d(
                tt.TensorType("float64", shape=(None, 3, 5, 5))(),
                tt.TensorType("float64", shape=(2, 2, 3, 3))(),
            ),
            ValueError,
            "img has 3 channels but kern expects 2",
        ),
        (
            lambda: nnet.conv2d(
                tt.TensorType("float64", shape=(None, 1, 2, 2))(),
                tt.TensorType("float64", shape=(1, 1, 3, 3))(),
            ),
            ValueError,
            "do not fit",
        ),
        (
            lambda: nnet.conv2d(tt.dtensor4(), tt.dtensor4(), border_mode="same"),
            ValueError,
            "border_mode must be",
        ),
        (
            lambda: nnet.conv2d(tt.dtensor4(), tt.dtensor4(), subsample=0),
            ValueError,
            "subsample must be ints >= 1",
        ),
        (
            lambda: nnet.conv2d(tt.dtensor4(), tt.dtensor4(), padding=1, border_mode="half"),
            ValueError,
            "not both",
        ),
        (
            lambda: AbstractConv2d_gradInputs()(tt.dtensor4(), tt.dtensor4(), tt.dvector()),
            TypeError,
            "argument shape must be an int vector",
        ),
        (
            # None is not taken for the default (Theano refuses it too)
            lambda: nnet.conv2d(tt.dtensor4(), tt.dtensor4(), border_mode=None),
            ValueError,
            r"border_mode must be 'valid', 'full', 'half', an int or a pair, got None",
        ),
        (
            lambda: nnet.pool_2d(tt.dvector(), (2, 2), ignore_border=True),
            NotImplementedError,
            "2 or more dimensions",
        ),
        (
            lambda: nnet.pool_2d(tt.dmatrix(), (2, 2), ignore_border=False, pad=(1, 1)),
            NotImplementedError,
            "padding works only with ignore_border=True",
        ),
        (
            lambda: nnet.pool_2d(tt.dmatrix(), (2, 2), ignore_border=True, mode="median"),
            ValueError,
            "mode must be one of",
        ),
        (
            lambda: nnet.pool_2d(tt.dmatrix(), (2, 2), ignore_border=True, pad=(2, 0)),
            NotImplementedError,
            "smaller than the window",
        ),
        (
            lambda: nnet.pool_2d(tt.dmatrix(), (2, 0), ignore_border=True),
            ValueError,
            "ws must be 2 ints >= 1",
        ),
        (
            lambda: nnet.batch_normalization_train(
                tt.dmatrix(), tt.dvector(), tt.dvector(), axes="cross"
            ),
            ValueError,
            "axes must be",
        ),
        (
            lambda: nnet.batch_normalization_train(
                tt.dmatrix(), tt.dvector(), tt.dvector(), epsilon=1e-7
            ),
            ValueError,
            "at least 1e-5",
        ),
        (
            lambda: nnet.batch_normalization_train(tt.dtensor3(), tt.dvector(), tt.dmatrix()),
            ValueError,
            "gamma has 1, beta has 2",
        ),
        (
            lambda: nnet.batch_normalization_train(
                tt.dmatrix(), tt.dvector(), tt.dvector(), running_mean=tt.dvector()
            ),
            ValueError,
            "both be given",
        ),
    ],
)
def test_bad_inputs(build, exc, match):
    with pytest.raises(exc, match=match):
        build()


@pytest.mark.parametrize("dtype,want", [("int8", "float32"), ("int32", "float64")])
def test_softsign_of_integers_is_theanos_float_whatever_floatx(dtype, want):
    # Theano upgrades integers to the float holding them; x / (1 + |x|) of integers alone
    # would be floatX, float32 here.
    v = np.array([-100, -1, 0, 3, 120], dtype=dtype)
    with config.change_flags(floatX="float32"):
        x = tt.vector("x", dtype=dtype)
        out = nnet.softsign(x)
        assert out.dtype == want
        got = _function([x], out)(v)
    assert got.dtype == want
    np.testing.assert_array_equal(got, (v / (1 + np.abs(v))).astype(want))


def test_relu_of_a_numpy_array_is_an_array():
    # Theano's relu is arithmetic on x as given (Lasagne calls rectify on arrays).
    xv = np.array([[-2.0, 0.0], [0.5, 3.0]], dtype="float32")
    got = nnet.relu(xv)
    assert type(got) is np.ndarray and got.dtype == np.float32
    np.testing.assert_array_equal(got, np.maximum(xv, 0))
    assert nnet.relu(-1.5) == 0.0 and nnet.relu(2.5) == 2.5
    # A slope makes a tensor of it, so the result is symbolic (as in Theano).
    leaky = nnet.relu(xv, 0.1)
    assert isinstance(leaky, tt.TensorVariable)
    np.testing.assert_allclose(leaky.eval(), np.where(xv > 0, xv, 0.1 * xv), rtol=1e-6)


@pytest.mark.parametrize("alpha", [0, 0.1])
def test_relu_of_booleans_is_one_where_true(alpha):
    # 0.5 * (x + |x|) of a bool: bool + bool is a logical or, so relu(True) was 0.5
    # (Theano gives 1.0); on a tensor and on a numpy array alike.
    bv = np.array([True, False, True])
    b = tt.TensorType("bool", shape=(None,))("b")
    got = function([b], nnet.relu(b, alpha))(bv)
    np.testing.assert_array_equal(got, [1.0, 0.0, 1.0])
    got_array = nnet.relu(bv, alpha)
    got_array = got_array.eval() if isinstance(got_array, tt.TensorVariable) else got_array
    np.testing.assert_array_equal(got_array, [1.0, 0.0, 1.0])


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64"])
@pytest.mark.parametrize("alpha", [0, 0.1])
def test_relu_of_integers_does_not_wrap(dtype, alpha):
    # 0.5 * (x + |x|) in int8 wrapped from 64 on (relu(int8 64) was -64.0), and |x| of
    # int8 -128 is -128; x is now cast to the result's float dtype first.
    info = np.iinfo(dtype)
    v = np.array([info.min, max(-3, info.min), 0, 1, 63, 64, 100, info.max]).astype(dtype)
    x = tt.vector("x", dtype=dtype)
    want = np.where(v > 0, v.astype("float64"), alpha * v.astype("float64"))
    for mode in ("FAST_RUN", "FAST_COMPILE"):
        got = _function([x], nnet.relu(x, alpha), mode=mode)(v)
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=mode)
    got_array = nnet.relu(v, alpha)
    got_array = got_array.eval() if isinstance(got_array, tt.TensorVariable) else got_array
    np.testing.assert_allclose(got_array, want, rtol=1e-6)


def test_runtime_errors():
    x, w = tt.dtensor4("x"), tt.dtensor4("w")
    f = function([x, w], nnet.conv2d(x, w))
    with pytest.raises(ValueError, match="image has 3 channels"):
        f(np.ones((1, 3, 4, 4)), np.ones((2, 2, 3, 3)))
    with pytest.raises(ValueError, match="larger than the padded image"):
        f(np.ones((1, 2, 2, 2)), np.ones((2, 2, 3, 3)))
    p, y = tt.dmatrix("p"), tt.lvector("y")
    g = function([p, y], nnet.categorical_crossentropy(p, y))
    with pytest.raises(ValueError, match=r"class index out of range \[0, 2\)"):
        g(np.full((1, 2), 0.5), np.array([2]))


def test_pool_2d_default_ignore_border_warns():
    with pytest.warns(DeprecationWarning, match="ignore_border=None means False"):
        out = nnet.pool_2d(tt.dmatrix(), (2, 2))
    assert out.owner.op.ignore_border is False


def test_op_props_and_names():
    assert nnet.Conv2d is AbstractConv2d
    assert AbstractConv2d(border_mode=(0, 0)) == AbstractConv2d()
    assert AbstractConv2d(border_mode=1) == AbstractConv2d(border_mode=(1, (1, 1)))
    assert AbstractConv2d(subsample=2) != AbstractConv2d()
    assert Pool((2, 2)) == Pool((2, 2), stride=(2, 2), pad=(0, 0))
    assert nnet.softmax(tt.dmatrix()).owner.op == nnet.Softmax(-1)
    assert nnet.get_conv_output_shape((2, 3, 8, 8), (4, 3, 3, 3), "full", (1, 1)) == (2, 4, 10, 10)


@pytest.mark.parametrize(
    "build",
    [
        nnet.softmax,
        nnet.log_softmax,
        lambda x: nnet.conv2d(x, tt.constant(np.linspace(-1, 1, 18).reshape(2, 1, 3, 3))),
        lambda x: nnet.max_pool_2d(x, (2, 2)),
        lambda x: nnet.avg_pool_2d(x, (2, 2), stride=(1, 1)),
    ],
    ids=["softmax", "log_softmax", "conv2d", "max_pool", "avg_pool"],
)
def test_rop_matches_finite_differences(build):
    from theano_dag.gradient import Rop

    rng = np.random.default_rng(7)
    x, v = tt.dtensor4("x"), tt.dtensor4("v")
    xv = distinct(1, 1, 4, 4)(rng, "float64")
    vv = rng.standard_normal(xv.shape)
    jv = function([x, v], Rop(build(x), x, v), on_unused_input="ignore")(xv, vv)
    f = function([x], build(x))
    eps = 1e-6
    np.testing.assert_allclose(
        jv, (f(xv + eps * vv) - f(xv - eps * vv)) / (2 * eps), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("optimizer", ["fast_compile", None])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_elu_gradient_without_the_stabilize_rewrites(optimizer, dtype):
    # The switch's branch not taken multiplies its gradient by 0: expm1's derivative there
    # was exp(x) = inf past x = 88 (float32) / 709 (float64), and 0 * inf NaN without the
    # rewrites that sink the switch (FAST_COMPILE, no optimizer). (Far below 0, expm1's
    # derivative, written expm1(x) + 1 so that canonicalize cancels it against a
    # 1 + expm1(x) below it, is 0 there: stabilize's local_1_plus_expm1 mends that.)
    x = tt.vector("x", dtype=dtype)
    xv = np.array([-800.0, -1.0, 0.5, 100.0, 800.0, 1e30, np.inf], dtype=dtype)
    g = grad(nnet.elu(x, 0.5).sum(), x)
    got = _function([x], g, mode=Mode(linker="py", optimizer=optimizer))(xv)
    want = np.where(xv > 0, 1.0, 0.5 * np.exp(xv.astype("float64"))).astype(dtype)
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-14, atol=0)


@pytest.mark.parametrize("dtype", ["int8", "int16", "bool"])
def test_selu_of_small_integers_has_the_digits_of_its_dtype(dtype):
    # selu of an int8 is float64 (its slope and scale are no float32s), but expm1 was
    # taken in float32, the float that holds an int8: -1 gave -1.11133072, 5e-8 off
    v = np.array([-1, -5, 0, 3] if dtype != "bool" else [0, 1], dtype=dtype)
    x = tt.vector("x", dtype=dtype)
    out = nnet.selu(x)
    assert out.dtype == "float64"
    got = _function([x], out, mode=Mode(linker="py", optimizer=None))(v)
    xf = v.astype("float64")
    want = 1.0507009873554805 * np.where(xf > 0, xf, 1.6732632423543772 * np.expm1(xf))
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)
