"""The modes the tests of the CPU engine's steps compile a graph in: the reference engine
(``"py"``), the two default modes, and ``"c_sync"``: the CPU engine with every value
planned and its C kernels built before the first call."""

from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.cpu.native import ckernel

MODES = ["py", "FAST_COMPILE", "FAST_RUN", "c_sync"]


def compile_in(ins, outs, mode):
    """``function(ins, outs)`` in ``mode``, one of :data:`MODES`."""
    if mode == "py":
        return function(ins, outs, mode=Mode(linker="py", optimizer=None))
    if mode == "c_sync":
        with ckernel.compile_mode("sync"):
            return function(ins, outs, mode=Mode(linker=CPULinker(min_plan_bytes=0)))
    return function(ins, outs, mode=mode)
