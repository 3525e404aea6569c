"""The one table from Theano's module names to theano_dag's.

Theano (theano-pymc 1.1.2) code names modules that theano_dag holds under another path:
``theano.graph.opt`` is ``theano_dag.graph.rewriting``, ``theano.tensor.opt`` is
``theano_dag.opt.tensor_opt``. ``MODULES`` lists those; every other ``theano.X`` is
``theano_dag.X``. The ``theano`` import alias (``python -m theano_dag.compat
install-theano-alias``), the tools that run Theano's tests on theano_dag and
docs/migrating.md all read this table.

>>> theano_dag_module("theano.graph.opt_utils")
'theano_dag.graph.rewriting'
>>> theano_dag_module("theano.tensor.nnet.sigm"), theano_dag_module("theano")
('theano_dag.tensor.nnet.sigm', 'theano_dag')
"""

from __future__ import annotations

# Theano module -> the theano_dag module with the same names. The longest prefix wins: an
# entry maps its submodules too (theano.link.c.basic.X -> theano_dag.engines...X).
MODULES = {
    "theano.configdefaults": "theano_dag.config",
    "theano.configparser": "theano_dag.config",
    # Theano's compile.function package is theano_dag's compile.function module (function,
    # pfunc) beside compile.function_module (Function, FunctionMaker).
    "theano.compile.function.pfunc": "theano_dag.compile.function",
    "theano.compile.function.types": "theano_dag.compile.function_module",
    "theano.graph.opt": "theano_dag.graph.rewriting",
    "theano.graph.optdb": "theano_dag.graph.rewriting.db",
    "theano.graph.opt_utils": "theano_dag.graph.rewriting",
    "theano.graph.sched": "theano_dag.graph.sched",
    "theano.link.basic": "theano_dag.engines.basic",
    "theano.link.utils": "theano_dag.engines.basic",
    "theano.link.c.basic": "theano_dag.engines.theano_linkers",
    "theano.link.c.exceptions": "theano_dag.engines.theano_linkers",
    "theano.link.vm": "theano_dag.engines.theano_linkers",
    "theano.tensor.opt": "theano_dag.opt.tensor_opt",
    "theano.tensor.opt_uncanonicalize": "theano_dag.opt.rewrites.uncanonicalize",
    "theano.tensor.blas": "theano_dag.opt.tensor_blas",
    "theano.tensor.var": "theano_dag.tensor.variable",
    "theano.tensor.type_other": "theano_dag.tensor.type_other",
    "theano.updates": "theano_dag.graph.updates",
    "theano.misc.pkl_utils": "theano_dag.compile.pkl_utils",
    "theano.gradient": "theano_dag.gradient",
    "theano.utils": "theano_dag.utils",
    # Theano 1.0's paths, which theano-pymc 1.1 renamed and Lasagne still writes: gof, the
    # graph framework (compat.gof holds its names), and scan's helpers.
    "theano.gof": "theano_dag.compat.gof",
    "theano.gof.graph": "theano_dag.graph.basic",
    "theano.gof.fg": "theano_dag.graph.fg",
    "theano.gof.op": "theano_dag.graph.op",
    "theano.gof.type": "theano_dag.graph.type",
    "theano.gof.utils": "theano_dag.graph.utils",
    "theano.gof.toolbox": "theano_dag.graph.toolbox",
    "theano.gof.destroyhandler": "theano_dag.graph.destroyhandler",
    "theano.gof.opt": "theano_dag.graph.rewriting",
    "theano.gof.optdb": "theano_dag.graph.rewriting.db",
    "theano.gof.link": "theano_dag.engines.basic",
    "theano.gof.cc": "theano_dag.engines.theano_linkers",
    "theano.gof.vm": "theano_dag.engines.theano_linkers",
    "theano.scan_module.scan_utils": "theano_dag.scan.utils",
    "theano.scan_module.scan_op": "theano_dag.scan.op",
    "theano.scan_module.scan": "theano_dag.scan.basic",
    "theano.scan_module.scan_views": "theano_dag.scan.views",
    "theano.scan_module.scan_checkpoints": "theano_dag.scan.checkpoints",
    # Theano-PyMC 1.1's scan rewrites (ScanMerge...) and Theano 1.0's path of them.
    "theano.scan.opt": "theano_dag.scan.rewriting",
    "theano.scan_module.scan_opt": "theano_dag.scan.rewriting",
    "theano": "theano_dag",
}


# What ``from theano.X import *`` gives beyond the names theano_dag's module exports
# (its ``__all__``): Theano's packages have no ``__all__``, so a star import of one gave
# every public name in it, its submodules among them (``from theano.graph import *`` then
# ``basic.Apply``, as aesara-theano-fallback writes) and the functions it imported
# (``grad`` from ``theano.tensor``). The alias adds these, where the module has them.
STAR_NAMES = {
    "theano": (
        "compile", "configparser", "gradient", "graph", "link", "misc", "scalar", "tensor",
        "updates", "utils",
    ),
    "theano.graph": (
        "basic", "destroyhandler", "fg", "null_type", "op", "opt", "optdb", "sched", "toolbox",
        "type", "utils",
    ),
    "theano.tensor": (
        "Lop", "Rop", "basic", "blas_c", "elemwise", "extra_ops", "grad", "hessian", "io",
        "jacobian", "load", "opt_uncanonicalize", "sharedvar", "subtensor", "type",
        "verify_grad",
    ),
    "theano.tensor.nnet": (
        "abstract_conv", "blocksparse", "bn", "conv", "corr", "corr3d", "nnet", "sigm",
    ),
    "theano.scalar": ("basic", "basic_scipy", "math"),
    "theano.scan": ("basic", "checkpoints", "op", "opt", "utils", "views"),
    "theano.sparse": ("basic", "opt", "sharedvar", "type", "utils"),
    "theano.compile": (
        "builders", "debugmode", "io", "mode", "monitormode", "ops", "profiling",
        "sharedvalue",
    ),
}  # fmt: skip


def theano_dag_module(name: str) -> str:
    """The theano_dag module that holds the names of Theano's module ``name``: the entry of
    ``MODULES`` with the longest matching prefix, the rest of the name appended.

    >>> theano_dag_module("theano.link.c.basic")
    'theano_dag.engines.theano_linkers'
    >>> theano_dag_module("theano.graph.optdb")
    'theano_dag.graph.rewriting.db'
    """
    prefix = name
    while prefix:
        if prefix in MODULES:
            return MODULES[prefix] + name[len(prefix) :]
        prefix = prefix.rpartition(".")[0]
    raise ValueError(f"{name!r} is not a Theano module name")
