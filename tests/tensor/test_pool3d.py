"""3-D pooling (``signal.pool.pool_3d``, ``Pool(ndim=3)`` and its gradient Ops): values
and gradients against a numpy reference that visits Theano's windows one at a time,
float32 and float64, every mode, with and without ``ignore_border``, strides and
padding, any leading dimensions; ``infer_shape`` and ``Pool.out_shape`` against the real
shape; gradients (and the max pool's second order) by finite differences; on the
reference, CPU and OpenCL (PoCL) engines; Theano's way of building the Ops."""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.gradient import grad, verify_grad
from theano_dag.graph.basic import ancestors
from theano_dag.tensor import nnet
from theano_dag.tensor.shape import shape_i
from theano_dag.tensor.signal import pool
from theano_dag.tensor.signal.pool import (
    AveragePoolGrad,
    DownsampleFactorMaxGradGrad,
    MaxPoolGrad,
    Pool,
    pool_3d,
)

# The references live next to this file; --import-mode=importlib does not put it on sys.path.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_modes import ENGINES, FLOATS, REF, mode_of  # noqa: E402
from nnet3d_reference import ref_pool3d, ref_pool3d_grad  # noqa: E402

MODES = ("max", "sum", "average_inc_pad", "average_exc_pad")


# -- the cases ------------------------------------------------------------------------------

# name: (input shape, ws, stride, pad, ignore_border)
CASES = {
    "2x2x2": ((2, 3, 4, 6, 4), (2, 2, 2), None, (0, 0, 0), True),
    "partial-windows": ((1, 2, 5, 5, 3), (2, 2, 2), None, (0, 0, 0), False),
    "overlap": ((2, 1, 5, 4, 5), (3, 2, 2), (1, 2, 1), (0, 0, 0), False),
    "overlap-cut": ((1, 1, 6, 5, 7), (3, 3, 2), (2, 2, 3), (0, 0, 0), True),
    "stride>ws": ((1, 2, 7, 5, 6), (2, 1, 2), (3, 2, 3), (0, 0, 0), False),
    "pad": ((1, 2, 5, 4, 6), (3, 3, 2), (2, 2, 1), (1, 1, 1), True),
    "pad-one-axis": ((2, 5, 4, 5), (2, 3, 3), (2, 1, 2), (0, 2, 1), True),
    "no-leading": ((4, 5, 6), (2, 3, 2), None, (0, 0, 0), False),
    "six-d": ((2, 1, 2, 4, 3, 4), (2, 2, 2), (1, 1, 2), (0, 0, 0), True),
}


def _distinct(shape, rng, dtype):
    """Values far apart (no ties, and finite differences keep each window's maximum)."""
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) * 0.1 - n * 0.05).astype(dtype)


def _values(case, dtype, mode, seed=0):
    shape, ws, stride, pad, ib = CASES[case]
    rng = np.random.default_rng(seed)
    x = _distinct(shape, rng, dtype) if mode == "max" else rng.standard_normal(shape)
    x = x.astype(dtype)
    out_shape = ref_pool3d(np.zeros(shape), ws, stride, pad, ib).shape
    return x, rng.standard_normal(out_shape).astype(dtype)


def _graph(case, dtype, mode):
    shape, ws, stride, pad, ib = CASES[case]
    x = tt.TensorType(dtype, shape=(None,) * len(shape))("x")
    gz = tt.TensorType(dtype, shape=(None,) * len(shape))("gz")
    y = pool_3d(x, ws, ignore_border=ib, stride=stride, pad=pad, mode=mode)
    return [x, gz], [y, grad((y * gz).sum(), x)]


def _tol(dtype):
    return 1e-5 if dtype == "float32" else 1e-12


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_pool3d_values_and_gradient(case, mode, engine, dtype):
    shape, ws, stride, pad, ib = CASES[case]
    ins, outs = _graph(case, dtype, mode)
    x, gz = _values(case, dtype, mode)
    got_y, got_gx = function(ins, outs, mode=mode_of(engine))(x, gz)
    x64, gz64 = x.astype("float64"), gz.astype("float64")
    want_y = ref_pool3d(x64, ws, stride, pad, ib, mode)
    want_gx = ref_pool3d_grad(x64, gz64, ws, stride, pad, ib, mode)
    for got, want in ((got_y, want_y), (got_gx, want_gx)):
        got = np.asarray(got)
        assert got.dtype == dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=_tol(dtype), atol=_tol(dtype))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_infer_shape_and_out_shape(case, mode):
    shape, ws, stride, pad, ib = CASES[case]
    ins, outs = _graph(case, "float64", mode)
    vals = _values(case, "float64", mode)
    nodes = [
        a.owner
        for a in ancestors(outs)
        if a.owner is not None and isinstance(a.owner.op, (Pool, MaxPoolGrad, AveragePoolGrad))
    ]
    assert len(nodes) == 2
    for node in nodes:
        assert node.op.ndim == 3
        in_shapes = [tuple(shape_i(v, d) for d in range(v.ndim)) for v in node.inputs]
        (shp,) = node.op.infer_shape(None, node, in_shapes)
        real = function(ins, node.outputs[0], mode=REF, on_unused_input="ignore")(*vals).shape
        entries = [tt.as_tensor_variable(s) for s in shp]
        inferred = function(ins, entries, mode=REF, on_unused_input="ignore")(*vals)
        assert tuple(int(s) for s in inferred) == real
    want = list(ref_pool3d(np.zeros(shape), ws, stride, pad, ib).shape)
    assert Pool.out_shape(shape, ws, ib, stride, pad, ndim=3) == want
    # Symbolic lengths give symbolic entries of the same values.
    sym = Pool.out_shape(ins[0].shape, ws, ib, stride, pad, ndim=3)
    got = function(ins[:1], [tt.as_tensor_variable(s) for s in sym], mode=REF)(vals[0])
    assert [int(s) for s in got] == want


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", ["partial-windows", "overlap", "pad", "six-d"])
def test_pool3d_grad_by_finite_differences(case, mode):
    shape, ws, stride, pad, ib = CASES[case]
    rng = np.random.default_rng(7)
    x, _ = _values(case, "float64", mode, seed=7)
    verify_grad(
        lambda v: pool_3d(v, ws, ignore_border=ib, stride=stride, pad=pad, mode=mode),
        [x],
        rng=rng,
        mode=REF,
    )


@pytest.mark.parametrize("case", ["partial-windows", "overlap", "pad"])
def test_max_pool3d_second_order(case):
    shape, ws, stride, pad, ib = CASES[case]
    rng = np.random.default_rng(8)
    x, gz = _values(case, "float64", "max", seed=8)
    params = dict(ws=ws, stride=stride, pad=pad, ignore_border=ib, ndim=3)
    xv = tt.constant(x)
    maxout = Pool(**params)(xv)

    # The max pool's gradient is linear in gz, and its gradient is the grad-grad Op.
    verify_grad(lambda g: MaxPoolGrad(**params)(xv, maxout, g), [gz], rng=rng, mode=REF)
    verify_grad(
        lambda gg: DownsampleFactorMaxGradGrad(**params)(xv, maxout, gg),
        [rng.standard_normal(x.shape)],
        rng=rng,
        mode=REF,
    )
    # Second order through grad: the graph holds the grad-grad Op, values as finite
    # differences of the first gradient.
    v = tt.dtensor5("v")
    g1 = grad((pool_3d(v, ws, ib, stride, pad) ** 2).sum(), v)
    g2 = grad((g1 * tt.constant(gz.sum() + x)).sum(), v)
    ops = {type(a.owner.op) for a in ancestors([g2]) if a.owner is not None}
    assert DownsampleFactorMaxGradGrad in ops
    verify_grad(
        lambda u: grad((pool_3d(u, ws, ib, stride, pad) ** 2).sum(), u), [x], rng=rng, mode=REF
    )


def test_theano_way_of_building_the_ops():
    x = tt.dtensor5("x")
    # Pool(ignore_border, mode, ndim) with the window given at the call, as Theano's.
    y = Pool(ndim=3, ignore_border=True, mode="sum")(x, (2, 2, 2))
    assert y.owner.op == Pool((2, 2, 2), ignore_border=True, mode="sum", ndim=3)
    assert Pool(True, "average_exc_pad", 3)(x, [2, 1, 2], (1, 1, 1), (1, 0, 1)).owner.op == Pool(
        (2, 1, 2), (1, 1, 1), (1, 0, 1), True, "average_exc_pad", 3
    )
    # Theano's Pool without a window defaults to ignore_border=False.
    assert Pool(ndim=3)(x, tt.constant(np.array([2, 2, 2]))).owner.op.ignore_border is False
    assert pool_3d(x, (2, 2, 2), True).owner.op == Pool((2, 2, 2), ndim=3)
    maxout, gz = tt.dtensor5(), tt.dtensor5()
    mg = MaxPoolGrad(False, 3)(x, maxout, gz, (2, 2, 2))
    assert mg.owner.op == MaxPoolGrad((2, 2, 2), ignore_border=False, ndim=3)
    ag = AveragePoolGrad(True, ndim=3)(x, gz, (2, 2, 2), (1, 1, 1))
    assert ag.owner.op == AveragePoolGrad(
        (2, 2, 2), (1, 1, 1), ignore_border=True, mode="average_inc_pad", ndim=3
    )
    gg = DownsampleFactorMaxGradGrad(True, ndim=3)(x, maxout, gz, (3, 3, 3))
    assert gg.owner.op.ws == (3, 3, 3)
    assert pool.pool_3d is nnet.pool_3d


@pytest.mark.parametrize(
    "build, exc, match",
    [
        (lambda: pool_3d(tt.dmatrix(), (2, 2, 2), True), NotImplementedError, "3 or more"),
        (lambda: pool_3d(tt.dtensor3(), (2, 2), True), ValueError, "ws must be 3 ints"),
        (lambda: pool_3d(tt.dtensor3(), None, True), ValueError, "window size"),
        (lambda: pool_3d(tt.dtensor3(), (2, 2, 2), True, mode="median"), ValueError, "mode"),
        (
            lambda: pool_3d(tt.dtensor3(), (2, 2, 2), False, pad=(1, 0, 0)),
            NotImplementedError,
            "ignore_border=True",
        ),
        (
            lambda: pool_3d(tt.dtensor3(), (2, 2, 2), True, pad=(2, 0, 0)),
            NotImplementedError,
            "smaller than",
        ),
        (
            # A symbolic window makes a SymbolicWindowPool from a template only.
            lambda: Pool((2, 2, 2), ndim=3)(tt.dtensor3(), tt.lvector()),
            NotImplementedError,
            "known when the graph is built",
        ),
        (lambda: Pool(ndim=3)(tt.dtensor3()), TypeError, "without a window"),
        (
            lambda: Pool((2, 2, 2), ndim=3)(tt.dtensor3(), (3, 3, 3)),
            ValueError,
            "another window",
        ),
    ],
    ids=[
        "ndim",
        "short-ws",
        "no-ws",
        "bad-mode",
        "pad-needs-ignore",
        "pad-too-big",
        "symbolic-ws",
        "template",
        "other-window",
    ],
)
def test_bad_inputs(build, exc, match):
    with pytest.raises(exc, match=match):
        build()


def test_deprecated_names_and_default_border():
    x = tt.dtensor3("x")
    with pytest.warns(DeprecationWarning, match="ignore_border=None"):
        assert pool_3d(x, (2, 2, 2)).owner.op.ignore_border is False
    with pytest.warns(DeprecationWarning, match="ds is deprecated"):
        y = pool_3d(x, ds=(2, 2, 2), ignore_border=True)
    assert y.owner.op.ws == (2, 2, 2)
    with pytest.warns(DeprecationWarning, match="padding is deprecated"):
        y = pool_3d(x, (2, 2, 2), True, padding=(1, 1, 1))
    assert y.owner.op.pad == (1, 1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pool_3d(x, (2, 2, 2), ignore_border=True)  # the plain call warns of nothing


def test_integer_max_pool3d():
    x = tt.ltensor3("x")
    v = np.arange(60).reshape(3, 4, 5)[:, ::-1] * 7 % 11
    got = function([x], pool_3d(x, (2, 2, 2), ignore_border=False), mode=REF)(v)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, ref_pool3d(v, (2, 2, 2), ignore_border=False))
