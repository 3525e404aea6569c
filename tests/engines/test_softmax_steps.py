"""Softmax, LogSoftmax and SoftmaxGrad as steps of a segment (``native/softmax_driver.c``):
in C once the library is loaded, through the ops' ``perform`` before it and wherever C
refuses an operand (an input that is not C-contiguous). Values against scipy and the
reference engine on every mode, special lanes (NaN, infinities), empty arrays, axes,
dtypes, the generated code, gradients by finite differences through the step."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.special
from step_modes import MODES, compile_in

import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.engines.cpu.emit.csource import array_layout
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.cpu.native import cc, ckernel, segment
from theano_dag.engines.cpu.native.ckernel import SoftmaxKernel, kernel_calls
from theano_dag.gradient import verify_grad
from theano_dag.tensor.nnet import nnet
from theano_dag.tensor.type import TensorType

RTOL = {"float32": 2e-6, "float64": 1e-14}  # libm's exp and log against numpy's
_has_c = pytest.mark.skipif(
    cc.get_toolchain(config.cxx) is None or array_layout() is None or not segment.available(),
    reason="no C compiler (config.cxx), an unknown ndarray layout, or no Segment",
)
pytestmark = pytest.mark.usefixtures("no_kernel_builds_in_flight")


def _c_function(ins, outs, optimizer=None, **linker):
    with ckernel.compile_mode("sync"):
        return function(
            ins, outs, mode=Mode(linker=CPULinker(min_plan_bytes=0, **linker), optimizer=optimizer)
        )


def _var(dtype, ndim):
    return TensorType(dtype, shape=(None,) * ndim)()


def _three(x, dy, axis):
    """Softmax, LogSoftmax and SoftmaxGrad(dy, softmax) of ``x`` along ``axis``."""
    sm = nnet.Softmax(axis)(x)
    return [sm, nnet.LogSoftmax(axis)(x), nnet.SoftmaxGrad(axis)(dy, sm)]


def _want(xv, dv, axis):
    """scipy's softmax and log-softmax, and the softmax's gradient, in float64."""
    x64, d64 = xv.astype("float64"), dv.astype("float64")
    sm = scipy.special.softmax(x64, axis=axis)
    g = sm * (d64 - (d64 * sm).sum(axis=axis, keepdims=True))
    return [sm, scipy.special.log_softmax(x64, axis=axis), g]


SHAPES = [((500, 2), -1), ((2,), 0), ((256, 10), 1), ((3, 4, 5), 1), ((3, 4, 5), 0),
          ((7, 300), 0), ((6, 9), -1), ((2, 3, 600), -1)]  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,axis", SHAPES)
def test_softmaxes_match_scipy_on_every_mode(mode, dtype, shape, axis):
    x, dy = _var(dtype, len(shape)), _var(dtype, len(shape))
    f = compile_in([x, dy], _three(x, dy, axis), mode)
    rng = np.random.default_rng(len(shape) + shape[0])
    xv = (rng.standard_normal(shape) * 5).astype(dtype)
    dv = rng.standard_normal(shape).astype(dtype)
    x0, d0 = xv.copy(), dv.copy()
    got = f(xv, dv)
    np.testing.assert_array_equal(xv, x0)  # no input written
    np.testing.assert_array_equal(dv, d0)
    tol = 2e-5 if dtype == "float32" else 1e-12
    for g, w in zip(got, _want(xv, dv, axis)):
        assert g.dtype == dtype and g.shape == shape
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def _special_rows(dtype):
    inf, nan = np.inf, np.nan
    rows = [[inf, 1.0, 2.0], [inf, inf, 0.0], [-inf, -inf, -inf], [nan, 1.0, 2.0],
            [-inf, 0.0, 1.0], [1e30, -1e30, 0.0], [-0.0, 0.0, -0.0], [inf, -inf, nan],
            [700.0, 700.0, -700.0], [inf, inf, inf]]  # fmt: skip
    return np.array(rows, dtype=dtype)


@_has_c
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis", [0, 1])
def test_special_lanes_are_performs(dtype, axis):
    # +inf maxima share the mass, an all -inf or NaN lane is NaN: as perform gives them
    xv = _special_rows(dtype)
    if axis == 0:
        xv = np.ascontiguousarray(xv.T)
    dv = np.ones_like(xv)
    x, dy = _var(dtype, 2), _var(dtype, 2)
    outs = _three(x, dy, axis)
    f = _c_function([x, dy], outs)
    ref = compile_in([x, dy], outs, "py")
    with np.errstate(all="ignore"):
        want = ref(xv, dv)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy warning from the step
        got = f(xv, dv)
    ks = kernel_calls(f)
    assert len(ks) == 3 and all(type(k) is SoftmaxKernel and k.ready for k in ks), ks
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        np.testing.assert_array_equal(np.isinf(g) * np.sign(g), np.isinf(w) * np.sign(w))
        np.testing.assert_allclose(g, w, rtol=RTOL[dtype], equal_nan=True)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 4), (0,)])
def test_empty_arrays(mode, dtype, shape):
    # no lanes, or lanes of no values: an empty result, as numpy's exp(x) / sum(exp(x))
    # (the lanes of no values raised once: a max of no values)
    for axis in range(-1, len(shape)):
        x, dy = _var(dtype, len(shape)), _var(dtype, len(shape))
        sm, lsm, _ = _three(x, dy, axis)
        xv = np.zeros(shape, dtype)
        for ins, out in (([x, dy], nnet.SoftmaxGrad(axis)(dy, x)), ([x], sm), ([x], lsm)):
            (got,) = compile_in(ins, [out], mode)(*[xv] * len(ins))
            assert got.shape == shape and got.dtype == dtype


@_has_c
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_plan_runs_a_softmax_step_not_perform(dtype):
    x, dy = _var(dtype, 2), _var(dtype, 2)
    f = _c_function([x, dy], _three(x, dy, -1))
    xv = np.random.default_rng(3).standard_normal((500, 2)).astype(dtype)
    got = f(xv, xv)
    src = f.fn.source()
    assert "_F(" not in src, src  # no perform: one segment of the three steps
    ks = kernel_calls(f)
    assert [k.kind for k in ks] == ["softmax", "logsoftmax", "smgrad"], ks
    assert all(type(k) is SoftmaxKernel and k.ready for k in ks)
    assert {k.name for k in ks} == {f"td_{k.kind}_{dtype[0]}{dtype[-2:]}" for k in ks}
    # the outputs are planned blocks of their own: a second call leaves the first's alone
    first = [g.copy() for g in got]
    again = f(xv + 1, xv)
    for a, b in zip(got, first):
        np.testing.assert_array_equal(a, b)
    assert not any(np.shares_memory(a, b) for a in got for b in again)


@_has_c
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_equal_entries_of_a_lane_give_equal_values(dtype):
    # The exp of a lane's entries (and the log of the sums) ran in vectors of libmvec and
    # the entries left over in libm's scalar exp, an ulp apart for some arguments: the
    # equal entries of a row [0, v, v, ..., v] came out unequal, and an argmax of them
    # picked another. Every length of row and of column, along both axes.
    x = _var(dtype, 2)
    f = _c_function([x], [nnet.Softmax(-1)(x), nnet.LogSoftmax(-1)(x)])
    g = _c_function([x], [nnet.Softmax(0)(x), nnet.LogSoftmax(0)(x)])
    for n in range(2, 70):
        for v in (-1.0, -0.3, -2.7, -1.3):
            xv = np.full((3, n), v, dtype)
            xv[:, 0] = 0
            for h, a in ((f, xv), (g, np.ascontiguousarray(xv.T))):
                for out in h(a):
                    lane = out if h is f else out.T
                    assert np.unique(lane[:, 1:]).size == 1, (n, v, np.unique(lane[:, 1:]))
                    assert np.unique(lane[:, 0]).size == 1
    assert {k.kind for k in kernel_calls(f)} == {"softmax", "logsoftmax"}


@_has_c
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("op", [nnet.Softmax, nnet.LogSoftmax, nnet.SoftmaxGrad])
def test_gradients_through_the_step_match_finite_differences(op, axis):
    rng = np.random.default_rng(4)
    w = rng.standard_normal((5, 3))
    pt = [rng.standard_normal((5, 3))]
    if op is nnet.SoftmaxGrad:  # its own gradient, of dy and sm
        pt.append(scipy.special.softmax(rng.standard_normal((5, 3)), axis=axis))
    mode = Mode(linker=CPULinker(min_plan_bytes=0), optimizer="fast_run")
    with ckernel.compile_mode("sync"):
        verify_grad(lambda *a: op(axis)(*a) * w, pt, mode=mode, rng=rng)
    x = tt.dmatrix("x")
    f = _c_function([x], tt.grad(tt.sum(op(axis)(*[x] * len(pt)) * w), x), "fast_run")
    f(pt[0])
    kinds = [getattr(k, "kind", None) for k in kernel_calls(f)]
    own = {nnet.Softmax: "softmax", nnet.LogSoftmax: "logsoftmax"}.get(op, "smgrad")
    assert own in kinds and (op is not nnet.Softmax or "smgrad" in kinds), kinds


@_has_c
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inputs_of_other_layouts_run_perform_without_warnings(dtype):
    x, dy = _var(dtype, 2), _var(dtype, 2)
    f = _c_function([x, dy], _three(x, dy, -1))
    ref = compile_in([x, dy], _three(x, dy, -1), "py")
    big = np.random.default_rng(5).standard_normal((9, 14)).astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for xv in (big[::2, 1::3], big.T, np.asfortranarray(big)):
            for _ in range(3):
                got = f(xv, xv)
            for g, w in zip(got, ref(xv, xv)):
                np.testing.assert_allclose(g, w, rtol=RTOL[dtype])


@_has_c
def test_a_view_of_the_input_goes_through_the_step():
    # a transposed input: the kernel refuses it, perform runs; its values are perform's
    x = tt.dmatrix("x")
    f = _c_function([x], nnet.Softmax(-1)(x.T))
    xv = np.random.default_rng(6).standard_normal((3, 5))
    np.testing.assert_allclose(f(xv), scipy.special.softmax(xv.T, axis=-1), rtol=1e-14)


@_has_c
def test_shapes_that_differ_raise_the_ops_error():
    dy, sm = tt.dmatrix("dy"), tt.dmatrix("sm")
    f = _c_function([dy, sm], nnet.SoftmaxGrad(-1)(dy, sm))
    f(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"dy \(2, 4\) and sm \(2, 3\) differ in shape"):
        f(np.ones((2, 4)), np.ones((2, 3)))


@_has_c
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_poisoned_run_and_constant_inputs(dtype):
    x = _var(dtype, 2)
    c = np.arange(6, dtype=dtype).reshape(2, 3)
    outs = [nnet.Softmax(0)(x) * 2, nnet.SoftmaxGrad(-1)(tt.constant(c), nnet.LogSoftmax(-1)(x))]
    f = _c_function([x], outs, poison=True)
    xv = np.random.default_rng(7).standard_normal((2, 3)).astype(dtype)
    got = f(xv)
    assert "_poison(" in f.fn.source()
    kinds = [getattr(k, "kind", None) for k in kernel_calls(f)]
    assert sorted(k for k in kinds if k) == ["logsoftmax", "smgrad", "softmax"], kinds
    tol = 2e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(got[0], 2 * scipy.special.softmax(xv, axis=0), rtol=tol)
    lsm = scipy.special.log_softmax(xv, axis=-1)
    want = c * lsm - lsm * (c * lsm).sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(got[1], want, rtol=tol * 10)


def test_mixed_dtypes_keep_perform():
    dy, sm = tt.fmatrix("dy"), tt.dmatrix("sm")
    f = _c_function([dy, sm], nnet.SoftmaxGrad(-1)(dy, sm))
    dv, sv = np.ones((2, 3), "float32"), np.full((2, 3), 1 / 3)
    got = f(dv, sv)
    assert got.dtype == "float64"
    np.testing.assert_allclose(got, np.zeros((2, 3)), atol=1e-15)
    assert "_F(" in f.fn.source()
