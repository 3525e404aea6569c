"""The OpenCL engine: the same graphs on any OpenCL device (pyopencl; PoCL on a CPU).

``Mode(linker='opencl')`` compiles a graph for the device chosen by
``config.opencl__platform``/``config.opencl__device`` (substrings of their
names; ``THEANO_DAG_FLAGS=device=opencl,opencl__device=...``). Ops listed in
``BASIC_OPS`` run as kernels generated from the graph; the others run on the
host with explicit ``GpuFromHost``/``HostFromGpu`` nodes when
``config.opencl__host_fallback`` is on, and are an error naming the op when it
is off.

Importing this package needs no pyopencl: the device is opened when a
function is first compiled for it.

>>> from theano_dag.compile.mode import get_linker
>>> type(get_linker("opencl")).__name__
'OpenCLLinker'
"""

from __future__ import annotations

from theano_dag.compile.sharedvalue import shared_constructor
from theano_dag.engines import register_linker

__all__ = [
    "OpenCLLinker",
    "BASIC_OPS",
    "GpuFromHost",
    "HostFromGpu",
    "opencl_shared",
    "opencl_source",
    "opencl_profile",
    "to_device",
    "to_host",
    "get_context",
    "opencl_available",
]


def __getattr__(name):
    # Everything heavy (the tensor library, the kernels) loads on first use.
    if name == "OpenCLLinker":
        from theano_dag.engines.opencl.linker import OpenCLLinker

        return OpenCLLinker
    if name == "BASIC_OPS":
        _load_impls()
        from theano_dag.engines.opencl.impl import BASIC_OPS

        return BASIC_OPS
    if name in ("GpuFromHost", "HostFromGpu"):
        from theano_dag.engines.opencl import ops

        return getattr(ops, name)
    if name in ("opencl_shared", "to_device", "to_host", "OpenCLSharedVariable"):
        from theano_dag.engines.opencl import shared

        return getattr(shared, name)
    if name in ("get_context", "opencl_available"):
        from theano_dag.engines.opencl import context

        return getattr(context, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _load_impls():
    from theano_dag.engines.opencl import blas, elemwise, reduce  # noqa: F401


def _make_linker(**kwargs):
    _load_impls()
    from theano_dag.engines.opencl.linker import OpenCLLinker

    return OpenCLLinker(**kwargs)


def opencl_source(f) -> str:
    """The OpenCL program a compiled function runs (all its kernels), as text."""
    fn = getattr(f, "fn", f)
    if not hasattr(fn, "opencl_source"):
        raise TypeError(f"{f!r} was not compiled with the OpenCL engine (Mode(linker='opencl'))")
    return fn.opencl_source()


def opencl_profile(f) -> str:
    """The OpenCL engine's report for a compiled function: plan, device bytes, transfers."""
    fn = getattr(f, "fn", f)
    if not hasattr(fn, "profile_summary"):
        raise TypeError(f"{f!r} was not compiled with the OpenCL engine (Mode(linker='opencl'))")
    return fn.profile_summary()


register_linker("opencl", _make_linker, override=True)
register_linker("opencl_device", lambda: _make_linker(return_device_arrays=True), override=True)


@shared_constructor
def _opencl_shared_constructor(value, **kwargs):
    from theano_dag.engines.opencl.shared import opencl_shared_constructor

    return opencl_shared_constructor(value, **kwargs)
