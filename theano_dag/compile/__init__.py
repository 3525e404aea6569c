"""Compiling graphs into callables: ``function``, ``In``/``Out``, shared variables, ``Mode``."""

from theano_dag.compile import ops  # noqa: F401 (Theano's theano.compile.ops, an attribute)
from theano_dag.compile.builders import OpFromGraph
from theano_dag.compile.debugmode import DebugMode
from theano_dag.compile.function import function, pfunc, rebuild_collect_shared
from theano_dag.compile.function_module import (
    DuplicateInputError,
    Function,
    FunctionMaker,
    Supervisor,
    UnusedInputError,
)
from theano_dag.compile.io import In, Out, SymbolicInput, SymbolicOutput
from theano_dag.compile.mode import (
    FAST_COMPILE,
    FAST_RUN,
    Mode,
    PerformOnly,
    get_default_mode,
    get_mode,
    register_linker,
    register_mode,
    register_optimizer,
)
from theano_dag.compile.monitormode import MonitorMode
from theano_dag.compile.nanguardmode import NanGuardMode
from theano_dag.compile.profiling import ProfileStats
from theano_dag.compile.sharedvalue import SharedVariable, shared, shared_constructor
from theano_dag.graph.identity_ops import DeepCopyOp, ViewOp, deep_copy_op, view_op
from theano_dag.opt.optdb import optdb  # Theano's theano.compile.optdb: the global one

__all__ = [
    "OpFromGraph",
    "DebugMode",
    "MonitorMode",
    "NanGuardMode",
    "function",
    "pfunc",
    "rebuild_collect_shared",
    "Function",
    "FunctionMaker",
    "Supervisor",
    "UnusedInputError",
    "DuplicateInputError",
    "In",
    "Out",
    "SymbolicInput",
    "SymbolicOutput",
    "Mode",
    "FAST_RUN",
    "FAST_COMPILE",
    "PerformOnly",
    "get_mode",
    "get_default_mode",
    "register_linker",
    "register_mode",
    "register_optimizer",
    "DeepCopyOp",
    "ViewOp",
    "deep_copy_op",
    "view_op",
    "SharedVariable",
    "shared",
    "shared_constructor",
    "optdb",
    "ProfileStats",
]
