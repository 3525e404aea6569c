"""Graph optimization: global and local optimizers, navigators, merge and the databases.

The contract is ``theano.graph.opt`` and ``theano.graph.optdb`` of theano-pymc 1.1.2;
``docs/optimization.md`` walks through it with the Theano tutorial's examples.
``optdb`` is the database ``function`` draws its optimizer from (``theano_dag.opt.optdb``
lays it out); the rewrites live in ``theano_dag.opt.rewrites``.
"""

from theano_dag.opt.basic import (
    ChangeLog,
    FromFunctionOptimizer,
    GlobalOptimizer,
    OptimizationAbort,
    OptimizationWarning,
    Optimizer,
    SeqOptimizer,
    inplace_optimizer,
    opt_name,
    optimizer,
    print_profile,
    report_failure,
)
from theano_dag.opt.db import (
    DB,
    EquilibriumDB,
    LocalGroupDB,
    ProxyDB,
    Query,
    SequenceDB,
    TopoDB,
)
from theano_dag.opt.local import (
    FromFunctionLocalOptimizer,
    LocalOptGroup,
    LocalOptimizer,
    OpRemove,
    OpSub,
    local_optimizer,
)
from theano_dag.opt.merge import MergeFeature, MergeOptimizer, merge_optimizer, pre_constant_merge
from theano_dag.opt.navigator import (
    EquilibriumOptimizer,
    MaxUseRatioExceeded,
    NavigatorOptimizer,
    OpKeyOptimizer,
    TopoOptimizer,
    in2out,
    out2in,
)

# The global optimization database and the helpers that add rewrites to it (imported
# last: the rewrites are written with the framework above).
from theano_dag.opt.optdb import (  # noqa: E402
    build_optdb,
    optdb,
    register_canonicalize,
    register_specialize,
    register_stabilize,
    register_useless,
)
from theano_dag.opt.pattern import PatternSub

__all__ = [
    "ChangeLog",
    "DB",
    "EquilibriumDB",
    "EquilibriumOptimizer",
    "FromFunctionLocalOptimizer",
    "FromFunctionOptimizer",
    "GlobalOptimizer",
    "LocalGroupDB",
    "LocalOptGroup",
    "LocalOptimizer",
    "MaxUseRatioExceeded",
    "MergeFeature",
    "MergeOptimizer",
    "NavigatorOptimizer",
    "OpKeyOptimizer",
    "OpRemove",
    "OpSub",
    "OptimizationAbort",
    "OptimizationWarning",
    "Optimizer",
    "PatternSub",
    "ProxyDB",
    "Query",
    "SeqOptimizer",
    "SequenceDB",
    "TopoDB",
    "TopoOptimizer",
    "build_optdb",
    "optdb",
    "register_canonicalize",
    "register_specialize",
    "register_stabilize",
    "register_useless",
    "in2out",
    "inplace_optimizer",
    "local_optimizer",
    "merge_optimizer",
    "opt_name",
    "optimizer",
    "out2in",
    "pre_constant_merge",
    "print_profile",
    "report_failure",
]
