"""The CPU engine: shape plan, Owl's memory plan, and generated straight-line numpy code.

``Mode(linker="cpu")`` (the default linker) uses :class:`CPULinker`. Modules:
``shapes`` (shape inference per input-shape signature), ``impls`` (per-Op-class
numpy implementations), ``program`` (steps, value placement, memory plan),
``codegen`` (the generated source), ``linker`` (the linker and its thunk),
``profile`` (``function(..., profile=True)``), ``ckernel`` (fused elementwise nodes as
generated C loops; with no compiler, or ``config.cxx=''``, they run through numpy).
"""

from theano_dag.engines import register_linker
from theano_dag.engines.cpu.emit.impls import Step, get_impl, register_impl
from theano_dag.engines.cpu.linker import CPULinker, CPUThunk
from theano_dag.engines.cpu.profile import CPUProfile

__all__ = ["CPULinker", "CPUThunk", "CPUProfile", "Step", "register_impl", "get_impl"]

register_linker("cpu", CPULinker, override=True)

# The C kernels take over Elemwise{Composite} (and Elemwise without a ufunc) from the
# numpy implementations registered by ``impls``; see ckernel.register.
from theano_dag.engines.cpu.native import ckernel  # noqa: E402

ckernel.register()
