"""The stability corpus's runner: a formula as people write it, at inputs where naive
arithmetic overflows, underflows or cancels, compiled on every engine (the reference, the
CPU engine with numpy and with C kernels, OpenCL, Dask) with the default
rewrites, its value and its gradient compared with references computed another way
(mpmath at 50 digits, or a stable numpy formula).

A case is a :class:`Case`; :func:`check` runs one on one engine in one dtype. The
gradient is ``theano_dag.grad`` of ``sum(weights * formula)`` (fixed weights, so that
every output's gradient counts and none cancels another), built from the formula as
written, as a user's program builds it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence

import mpmath
import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.cpu.native import ckernel
from theano_dag.engines.opencl.context import opencl_available

OCL_OK, OCL_WHY = opencl_available()
try:
    import dask.array  # noqa: F401  (the Dask engine compiles only where dask is installed)

    DASK_OK, DASK_WHY = True, ""
except ImportError as err:
    DASK_OK, DASK_WHY = False, str(err)

#: name -> (mode, the C kernels' build mode: "off" runs numpy kernels, "sync" builds C
#: before the first call). Every engine runs the default rewrites (fast_run): the stable
#: forms are rewrites, and the reference engine without them is the naive arithmetic.
ENGINES = {
    "py": (lambda: Mode(linker="py", optimizer="fast_run"), "off"),
    "cpu": (lambda: Mode(linker=CPULinker(min_plan_bytes=0), optimizer="fast_run"), "off"),
    "cpu_c": (lambda: Mode(linker=CPULinker(min_plan_bytes=0), optimizer="fast_run"), "sync"),
    "opencl": (lambda: Mode(linker="opencl", optimizer="fast_run"), "off"),
    # the default scheduler (threads in this process): the same chunk kernels as a cluster
    "dask": (lambda: Mode(linker="dask", optimizer="fast_run"), "off"),
}

#: The engines as pytest parameters (OpenCL skipped, with the reason, without a device).
ENGINE_PARAMS = [
    "py",
    "cpu",
    "cpu_c",
    pytest.param("opencl", marks=pytest.mark.skipif(not OCL_OK, reason=f"no OpenCL: {OCL_WHY}")),
    pytest.param("dask", marks=pytest.mark.skipif(not DASK_OK, reason=f"no dask: {DASK_WHY}")),
]
FLOATS = ("float32", "float64")

#: Relative tolerance per dtype: a stable form loses a few ulps, not digits.
RTOL = {"float32": 2e-5, "float64": 1e-11}


@dataclasses.dataclass
class Case:
    """One formula of the corpus.

    ``build(*symbols)`` returns the formula as a user writes it; ``inputs`` are its input
    values (float64 arrays are given the dtype under test, integer arrays are kept);
    ``ref(*inputs)`` the exact value (float64) and ``ref_grad(*inputs, weights)`` the
    exact gradient of ``sum(weights * value)`` for each float input, in order.
    ``atol`` is relative to the largest magnitude of the reference (for values that
    cancel to near 0), a number or a dict per dtype. ``rtol`` overrides :data:`RTOL`
    per dtype.
    """

    name: str
    build: Callable
    inputs: Sequence[np.ndarray]
    ref: Callable
    ref_grad: Callable | None = None
    atol: float | dict = 0.0
    rtol: dict | None = None
    dtypes: Sequence[str] = FLOATS

    def __str__(self):
        return self.name


def _symbol(value, dtype, name):
    dt = dtype if value.dtype.kind == "f" else str(value.dtype)
    return tt.TensorType(dt, shape=(None,) * value.ndim)(name)


def _weights(shape):
    n = int(np.prod(shape)) if shape else 1
    return (1.0 + 0.25 * np.arange(n) % 3).reshape(shape)  # 1, 1.25, 1.5, 1, ...


@contextlib.contextmanager
def _engine(engine):
    _, build = ENGINES[engine]
    with ckernel.compile_mode(build):
        yield


def _compare(what, got, want, dtype, case):
    want = np.asarray(want, dtype="float64")
    got = np.asarray(got)
    assert got.shape == want.shape, f"{case}: {what} has shape {got.shape}, want {want.shape}"
    assert str(got.dtype) == dtype, f"{case}: {what} is {got.dtype}, want {dtype}"
    finite = np.isfinite(want)
    assert np.array_equal(
        np.isfinite(got), finite
    ), f"{case} ({dtype}): {what} is {got}, want {want} (finite where the reference is)"
    rtol = (case.rtol or RTOL)[dtype]
    scale = np.max(np.abs(want[finite]), initial=0.0)
    atol = case.atol[dtype] if isinstance(case.atol, dict) else case.atol
    np.testing.assert_allclose(
        got[finite].astype("float64"),
        want[finite],
        rtol=rtol,
        atol=atol * scale,
        err_msg=f"{case} ({dtype}): {what}",
    )
    np.testing.assert_array_equal(got[~finite], want[~finite], err_msg=f"{case}: {what}")


def check(case: Case, engine: str, dtype: str, grad: bool = True):
    """Compile ``case`` on ``engine`` in ``dtype``; compare its value and gradient."""
    values = [
        np.asarray(v, dtype=dtype) if np.asarray(v).dtype.kind == "f" else np.asarray(v)
        for v in case.inputs
    ]
    syms = [_symbol(v, dtype, f"i{k}") for k, v in enumerate(values)]
    out = case.build(*syms)
    wrt = [s for s, v in zip(syms, values) if v.dtype.kind == "f"]
    want = case.ref(*[v.astype("float64") if v.dtype.kind == "f" else v for v in values])
    w = _weights(np.shape(want))
    outputs = [out]
    if grad and case.ref_grad is not None:
        cost = tt.sum(out * w.astype(dtype))
        outputs += theano_dag.grad(cost, wrt)
    mode = ENGINES[engine][0]()
    with _engine(engine):
        f = theano_dag.function(syms, outputs, mode=mode)
        got = f(*values)
    _compare("value", got[0], want, dtype, case)
    if len(outputs) > 1:
        exact = [v.astype("float64") if v.dtype.kind == "f" else v for v in values]
        want_g = case.ref_grad(*exact, w)
        for k, (g, wg) in enumerate(zip(got[1:], want_g)):
            _compare(f"gradient {k}", g, wg, dtype, case)


# ---- references ---------------------------------------------------------------------

mpmath.mp.dps = 50


def mp_elementwise(fn, *arrays):
    """``fn`` (of mpf arguments) at every element of the broadcast ``arrays``, in float64."""
    arrays = np.broadcast_arrays(*[np.asarray(a, dtype="float64") for a in arrays])
    out = np.empty(arrays[0].shape)
    for idx in np.ndindex(out.shape):
        out[idx] = float(fn(*[mpmath.mpf(float(a[idx])) for a in arrays]))
    return out


def mp_derivative(fn, *arrays, arg=0):
    """The derivative of the elementwise ``fn`` in its ``arg``-th argument, by mpmath."""

    def d(*xs):
        xs = list(xs)
        return mpmath.diff(lambda t: fn(*xs[:arg], t, *xs[arg + 1 :]), xs[arg])

    return mp_elementwise(d, *arrays)


def elementwise(name, build, fn, inputs, **kw):
    """A :class:`Case` of an elementwise ``fn`` of mpf arguments: its value and its
    gradients by mpmath."""

    def ref(*xs):
        return mp_elementwise(fn, *xs)

    def ref_grad(*args):
        *xs, w = args
        shape = np.shape(ref(*xs))
        out = []
        for k, x in enumerate(xs):
            if np.asarray(x).dtype.kind != "f":
                continue
            d = w * mp_derivative(fn, *xs, arg=k)
            # the gradient of a broadcast input sums over the axes it was broadcast along
            x = np.asarray(x)
            extra = d.ndim - x.ndim
            d = d.sum(axis=tuple(range(extra))) if extra else d
            axes = tuple(i for i, n in enumerate(x.shape) if n == 1 and shape[extra + i] != 1)
            out.append(d.sum(axis=axes, keepdims=True) if axes else d)
        return out

    return Case(name, build, inputs, ref, ref_grad, **kw)
