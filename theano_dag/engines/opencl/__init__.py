"""The OpenCL engine: the same graphs on any OpenCL device (pyopencl; PoCL on a CPU).

``Mode(linker='opencl')`` compiles a graph for the device chosen by
``config.opencl__platform``/``config.opencl__device`` (substrings of their
names; ``THEANO_DAG_FLAGS=device=opencl,opencl__device=...``). Ops listed in
``BASIC_OPS`` run as kernels generated from the graph; the others run on the
host with explicit ``GpuFromHost``/``HostFromGpu`` nodes when
``config.opencl__host_fallback`` is on, and are an error naming the op when it
is off.

Importing this package needs no pyopencl (only ``context`` and ``values`` import it,
inside the functions that open the device): the device is opened when a function is
first compiled for it.

>>> from theano_dag.compile.mode import get_linker
>>> type(get_linker("opencl")).__name__
'OpenCLLinker'
"""

from __future__ import annotations

from theano_dag.engines import register_linker
from theano_dag.engines.opencl.context import get_context, opencl_available
from theano_dag.engines.opencl.impl import BASIC_OPS
from theano_dag.engines.opencl.linker import OpenCLLinker, _Runner  # kernels register on import
from theano_dag.engines.opencl.loop import HostStepWarning  # Scan's device loop registers
from theano_dag.engines.opencl.ops import GpuFromHost, HostFromGpu
from theano_dag.engines.opencl.shared import (
    OpenCLSharedVariable,
    opencl_shared,
    opencl_shared_constructor,
    to_device,
    to_host,
)
from theano_dag.graph.shared import shared_constructor

__all__ = [
    "OpenCLLinker",
    "BASIC_OPS",
    "GpuFromHost",
    "HostFromGpu",
    "OpenCLSharedVariable",
    "opencl_shared",
    "opencl_source",
    "opencl_profile",
    "to_device",
    "to_host",
    "get_context",
    "opencl_available",
    "HostStepWarning",
]


def opencl_source(f) -> str:
    """The OpenCL program a compiled function runs (all its kernels), as text."""
    fn = getattr(f, "fn", f)
    if not isinstance(fn, _Runner):
        raise TypeError(f"{f!r} was not compiled with the OpenCL engine (Mode(linker='opencl'))")
    return fn.opencl_source()


def opencl_profile(f) -> str:
    """The OpenCL engine's report for a compiled function: plan, device bytes, transfers."""
    fn = getattr(f, "fn", f)
    if not isinstance(fn, _Runner):
        raise TypeError(f"{f!r} was not compiled with the OpenCL engine (Mode(linker='opencl'))")
    return fn.profile_summary()


def _device_linker():
    return OpenCLLinker(return_device_arrays=True)


register_linker("opencl", OpenCLLinker, override=True)
register_linker("opencl_device", _device_linker, override=True)

shared_constructor(opencl_shared_constructor)
