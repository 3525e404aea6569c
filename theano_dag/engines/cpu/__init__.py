"""The CPU engine: shape plan, Owl's memory plan, and generated straight-line numpy code.

``Mode(linker="cpu")`` (the default linker) uses :class:`CPULinker`. By stage:

- ``plan/``: ``shapes`` (shape inference per input-shape signature) and ``program``
  (steps, value placement, Owl's memory plan);
- ``emit/``: ``impls`` (per-Op-class numpy implementations), ``emitters`` (the code each
  step emits), ``csource`` (C loops of fused elementwise nodes), ``codegen`` (the
  generated Python: the run and the specialised call);
- ``native/``: ``cc`` (the compiler driver and its cache), ``ckernel`` (loading the C
  kernels; with no compiler, or ``config.cxx=''``, they run through numpy), ``gemm``
  (the matrix product), ``cop`` (users' ``COp`` C code), with the fixed C sources as
  ``.c`` files;
- ``linker`` (the linker and its thunk), ``tiling`` (``RowTiled``: the row tiling that
  the ``cpu_row_tiling`` pass of the optdb makes), ``profile``
  (``function(..., profile=True)``).
"""

from theano_dag.engines import register_linker
from theano_dag.engines.cpu.emit.impls import Step, get_impl, register_impl
from theano_dag.engines.cpu.linker import CPULinker, CPUThunk
from theano_dag.engines.cpu.profile import CPUProfile

__all__ = ["CPULinker", "CPUThunk", "CPUProfile", "Step", "register_impl", "get_impl"]

register_linker("cpu", CPULinker, override=True)


def _cpu_nogc():
    return CPULinker(allow_gc=False)


# Theano's C and VM linkers ran an op's C code where it had some and its perform where
# not: the CPU engine does both, so Theano's names run on it.
for _name in ("c", "cvm", "vm", "c|py"):
    register_linker(_name, CPULinker, override=True)
for _name in ("cvm_nogc", "vm_nogc", "c|py_nogc"):
    register_linker(_name, _cpu_nogc, override=True)

# The C kernels take over Elemwise{Composite} (and Elemwise without a ufunc) from the
# numpy implementations registered by ``impls``, and small matrix-vector products
# (Dot, Gemv) from their numpy emitters; see ckernel.register and register_matvec.
from theano_dag.engines.cpu.native import ckernel, cop  # noqa: E402, F401 (cop: COps' C)

ckernel.register()
ckernel.register_matvec()
