"""The engines the 3-D convolution and pooling tests run on, and each one's mode: the
reference engine (``py``, no rewrites), the CPU engine planning every value, and OpenCL
(PoCL here), skipped with the reason when no OpenCL platform is found; and each one with
the fast_run rewrites (:func:`rewritten_mode`)."""

from __future__ import annotations

import pytest

from theano_dag.compile.mode import Mode
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.opencl.context import opencl_available

REF = Mode(linker="py", optimizer=None)
OCL_OK, OCL_WHY = opencl_available()
ENGINES = [
    "py",
    "cpu",
    pytest.param("opencl", marks=pytest.mark.skipif(not OCL_OK, reason=f"no OpenCL: {OCL_WHY}")),
]
FLOATS = ("float32", "float64")


def mode_of(engine):
    if engine == "py":
        return REF
    if engine == "cpu":
        return Mode(linker=CPULinker(min_plan_bytes=0))
    return Mode(linker="opencl")


def rewritten_mode(engine):
    """The engine with the fast_run rewrites (the reference engine runs them too): what a
    rewrite's value test compiles with."""
    if engine == "py":
        return Mode(linker="py", optimizer="fast_run")
    if engine == "cpu":
        return Mode(linker=CPULinker(min_plan_bytes=0), optimizer="fast_run")
    return Mode(linker="opencl", optimizer="fast_run")
