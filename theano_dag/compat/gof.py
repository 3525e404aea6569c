"""Theano 1.0's ``theano.gof``, the graph framework that theano-pymc 1.1 split into
``theano.graph`` and ``theano.link``: its names, where theano_dag holds them, for programs
written for Theano 1.0 that run under the ``theano`` alias (Lasagne checks
``isinstance(x, theano.gof.Variable)`` and walks ``theano.gof.graph.inputs``).

The alias gives this module as ``theano.gof``, its submodules by the table of
``compat.theano_names`` (``theano.gof.graph`` is ``theano_dag.graph.basic``), and the names
Theano 1.0 put at the top of ``theano`` from here (``theano.Variable``, ``theano.Op``...).
Theano 1.0's C-backend names that theano_dag has no counterpart of (``DualLinker``,
``OpenMPOp``, ``EnumType``...) are not given.

>>> from theano_dag.compat import gof
>>> from theano_dag.graph import basic
>>> gof.Variable is basic.Variable, gof.graph is basic
(True, True)
"""

from theano_dag.engines.basic import (
    Container,
    Linker,
    LocalLinker,
    PerformLinker,
    WrapLinker,
    WrapLinkerMany,
)
from theano_dag.engines.theano_linkers import CLinker, OpWiseCLinker
from theano_dag.graph import basic as graph
from theano_dag.graph import rewriting as opt
from theano_dag.graph import toolbox, utils
from theano_dag.graph.basic import Apply, Constant, Variable
from theano_dag.graph.destroyhandler import DestroyHandler
from theano_dag.graph.fg import FunctionGraph, MissingInputError
from theano_dag.graph.op import ExternalCOp, Op, PureOp
from theano_dag.graph.rewriting import (
    DB,
    EquilibriumDB,
    EquilibriumOptimizer,
    LocalGroupDB,
    LocalOptGroup,
    LocalOptimizer,
    MergeOptimizer,
    NavigatorOptimizer,
    OpKeyOptimizer,
    OpRemove,
    OpSub,
    Optimizer,
    PatternSub,
    ProxyDB,
    Query,
    SeqOptimizer,
    SequenceDB,
    TopoOptimizer,
    inplace_optimizer,
    local_optimizer,
    optimizer,
)
from theano_dag.graph.toolbox import (
    Bookkeeper,
    Feature,
    History,
    NodeFinder,
    NoOutputFromInplace,
    PrintListener,
    ReplaceValidate,
    Validator,
)
from theano_dag.graph.type import Generic, Type, generic
from theano_dag.graph.utils import InconsistencyError, MethodNotDefined
from theano_dag.misc.safe_asarray import _asarray

# The names Theano 1.0's ``theano/__init__.py`` imported from ``theano.gof`` that theano_dag
# has (and ``_asarray``, which it imported from ``theano.misc.safe_asarray``): the alias's
# ``theano`` gives them where theano_dag's own namespace has none.
TOP_LEVEL = (
    "CLinker",
    "OpWiseCLinker",
    "Linker",
    "LocalLinker",
    "PerformLinker",
    "Container",
    "InconsistencyError",
    "FunctionGraph",
    "Apply",
    "Variable",
    "Constant",
    "Op",
    "opt",
    "toolbox",
    "Type",
    "Generic",
    "generic",
    "utils",
    "_asarray",
)

# Theano 1.0's COp is the op whose C code is in files (theano-pymc renamed it ExternalCOp;
# its COp is the one with C code in methods, theano_dag.graph.op.COp).
COp = ExternalCOp

__all__ = [
    "graph",
    "opt",
    "toolbox",
    "utils",
    "Container",
    "Linker",
    "LocalLinker",
    "PerformLinker",
    "WrapLinker",
    "WrapLinkerMany",
    "CLinker",
    "OpWiseCLinker",
    "Apply",
    "Constant",
    "Variable",
    "DestroyHandler",
    "FunctionGraph",
    "MissingInputError",
    "COp",
    "Op",
    "PureOp",
    "DB",
    "EquilibriumDB",
    "EquilibriumOptimizer",
    "LocalGroupDB",
    "LocalOptGroup",
    "LocalOptimizer",
    "MergeOptimizer",
    "NavigatorOptimizer",
    "OpKeyOptimizer",
    "OpRemove",
    "OpSub",
    "Optimizer",
    "PatternSub",
    "ProxyDB",
    "Query",
    "SeqOptimizer",
    "SequenceDB",
    "TopoOptimizer",
    "inplace_optimizer",
    "local_optimizer",
    "optimizer",
    "Bookkeeper",
    "Feature",
    "History",
    "NodeFinder",
    "NoOutputFromInplace",
    "PrintListener",
    "ReplaceValidate",
    "Validator",
    "Generic",
    "Type",
    "generic",
    "InconsistencyError",
    "MethodNotDefined",
    "TOP_LEVEL",
    "_asarray",
]
