"""Pooling with a window, stride and padding known only when the function runs
(``pool_2d(x, ws=iv, stride=iv)``, as Theano allows; Lasagne's spatial pyramid pooling
computes them from the input's shape): ``SymbolicWindowPool`` nodes, values against the
numpy reference of the 3-D pooling tests, float32 and float64, every mode, with and
without ``ignore_border``; ``infer_shape`` against the real shape; gradients (and the max
pool's second order) by finite differences; on the reference, CPU and OpenCL engines."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.gradient import grad, verify_grad
from theano_dag.graph.basic import ancestors
from theano_dag.tensor.nnet.pool import Pool, SymbolicWindowPool, pool_2d, pool_3d

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_modes import ENGINES, FLOATS, mode_of  # noqa: E402
from nnet3d_reference import ref_pool3d, ref_pool3d_grad  # noqa: E402

MODES = ("max", "sum", "average_inc_pad", "average_exc_pad")
# (input shape, ws, stride, pad, ignore_border)
CASES = {
    "overlap": ((2, 1, 5, 4, 5), (3, 2, 2), (1, 2, 1), (0, 0, 0), False),
    "stride>ws": ((1, 2, 7, 5, 6), (2, 1, 2), (3, 2, 3), (0, 0, 0), False),
    "pad": ((1, 2, 5, 4, 6), (3, 3, 2), (2, 2, 1), (1, 1, 1), True),
}


def _distinct(shape, rng, dtype):
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) * 0.1 - n * 0.05).astype(dtype)


def _pool_ops(outputs):
    return [v.owner.op for v in ancestors(outputs) if v.owner is not None]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_values_shape_and_gradient_against_reference(engine, dtype, case):
    shape, ws, stride, pad, ignore_border = CASES[case]
    rng = np.random.default_rng(3)
    xv = _distinct(shape, rng, dtype)
    x = tt.tensor(dtype, shape=(None,) * len(shape), name="x")
    w, s, p = tt.lvector("w"), tt.lvector("s"), tt.lvector("p")
    modes = MODES if ignore_border else ("max", "sum", "average_exc_pad")
    outs = [pool_3d(x, ws=w, stride=s, pad=p, ignore_border=ignore_border, mode=m) for m in modes]
    assert all(isinstance(o.owner.op, SymbolicWindowPool) for o in outs)
    gz = [tt.tensor(dtype, shape=(None,) * len(shape)) for _ in modes]
    gx = [grad((o * g).sum(), x) for o, g in zip(outs, gz)]
    f = function([x, w, s, p], outs + [o.shape for o in outs], mode=mode_of(engine))
    got = f(xv, ws, stride, pad)
    want = [ref_pool3d(xv, ws, stride, pad, ignore_border, m) for m in modes]
    tol = 1e-5 if dtype == "float32" else 1e-12
    for m, g, r, sh in zip(modes, got[: len(modes)], want, got[len(modes) :]):
        assert g.dtype == dtype, m
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol, err_msg=m)
        assert tuple(sh) == r.shape, m
    gzv = [rng.normal(size=r.shape).astype(dtype) for r in want]
    fg = function([x, w, s, p, *gz], gx, mode=mode_of(engine))
    for m, g, gv in zip(modes, fg(xv, ws, stride, pad, *gzv), gzv):
        ref = ref_pool3d_grad(xv, gv, ws, stride, pad, ignore_border, m)
        np.testing.assert_allclose(g, ref, rtol=tol, atol=tol, err_msg=m)


@pytest.mark.parametrize("mode", MODES)
def test_gradient_by_finite_differences(mode):
    # The window lives in shared variables: symbolic, so the node is SymbolicWindowPool.
    rng = np.random.default_rng(0)
    xv = _distinct((2, 5, 6), rng, "float64")
    w = theano_dag.shared(np.array([2, 3]), name="w")
    s = theano_dag.shared(np.array([2, 2]), name="s")

    def pooled(x):
        y = pool_2d(x, ws=w, stride=s, ignore_border=True, mode=mode)
        assert isinstance(y.owner.op, SymbolicWindowPool)
        return y

    verify_grad(pooled, [xv], rng=np.random.default_rng(1))
    if mode == "max":  # second order: the gradient's gradient (MaxPoolGrad's own)
        x = tt.dtensor3("x")
        g = grad((pooled(x) ** 2).sum(), x)
        assert any(
            isinstance(op, SymbolicWindowPool) and op.base.__name__ == "MaxPoolGrad"
            for op in _pool_ops([g])
        )
        verify_grad(lambda x: grad((pooled(x) ** 2).sum(), x), [xv], rng=np.random.default_rng(2))


@pytest.mark.parametrize("engine", ENGINES)
def test_window_from_the_input_shape(engine):
    # Lasagne's spatial pyramid pooling: ceil(size / d) windows, floor(size / d) strides.
    x = tt.tensor4("x")
    d = 3
    size = x.shape[2:]
    win = [(size[i] + d - 1) // d for i in range(2)]
    strides = [size[i] // d for i in range(2)]
    y = pool_2d(x, ws=win, stride=strides, ignore_border=True)
    assert isinstance(y.owner.op, SymbolicWindowPool)
    f = function([x], [y, y.shape], mode=mode_of(engine))
    for h, wd in ((7, 8), (9, 5)):
        xv = _distinct((2, 2, h, wd), np.random.default_rng(h), "float64")
        ws = ((h + d - 1) // d, (wd + d - 1) // d)
        st = (h // d, wd // d)
        want = ref_pool3d(xv, (1, *ws), (1, *st), (0, 0, 0), True, "max")
        got, shape = f(xv)
        np.testing.assert_array_equal(got, want)
        assert tuple(shape) == want.shape


def test_known_window_still_makes_the_static_op():
    x = tt.dmatrix("x")
    assert isinstance(pool_2d(x, ws=tt.constant([2, 2]), ignore_border=True).owner.op, Pool)
    # Lasagne's check that Theano takes symbolic windows builds without error.
    y = pool_2d(tt.tensor4(), ws=tt.ivector(), stride=tt.ivector(), ignore_border=True, pad=None)
    assert isinstance(y.owner.op, SymbolicWindowPool) and y.ndim == 4


def test_bad_windows_when_the_function_runs():
    x, w = tt.dmatrix("x"), tt.lvector("w")
    f = function([x, w], pool_2d(x, ws=w, ignore_border=True), mode=mode_of("py"))
    with pytest.raises(ValueError, match=r"ws must have 2 entries, got \[2 2 2\]"):
        f(np.ones((4, 4)), [2, 2, 2])
    p = tt.lvector("p")
    g = function([x, w, p], pool_2d(x, ws=w, pad=p, ignore_border=True), mode=mode_of("py"))
    with pytest.raises(NotImplementedError, match="must be smaller than the window"):
        g(np.ones((4, 4)), [2, 2], [2, 0])
    np.testing.assert_array_equal(g(np.arange(16.0).reshape(4, 4), [2, 2], [1, 1])[0], [0, 2, 3])
