"""The rewrite framework: optimizers, local rewrites, navigators, merge, patterns, databases.

The contract is ``theano.graph.opt`` and ``theano.graph.optdb`` of theano-pymc 1.1.2 (in
PyTensor, ``pytensor.graph.rewriting``). It knows graphs, not tensors: the rules written with it
live in ``theano_dag.opt``, which re-exports these names for users.
"""

from theano_dag.graph.rewriting.basic import (
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
from theano_dag.graph.rewriting.db import (
    DB,
    EquilibriumDB,
    LocalGroupDB,
    ProxyDB,
    Query,
    SequenceDB,
    TopoDB,
)
from theano_dag.graph.rewriting.local import (
    FromFunctionLocalOptimizer,
    LocalOptGroup,
    LocalOptimizer,
    OpRemove,
    OpSub,
    local_optimizer,
    pre_greedy_local_optimizer,
)
from theano_dag.graph.rewriting.merge import (
    MergeFeature,
    MergeOptimizer,
    merge_optimizer,
    pre_constant_merge,
)
from theano_dag.graph.rewriting.navigator import (
    EquilibriumOptimizer,
    MaxUseRatioExceeded,
    NavigatorOptimizer,
    OpKeyOptimizer,
    TopoOptimizer,
    in2out,
    out2in,
)
from theano_dag.graph.rewriting.pattern import PatternSub
from theano_dag.graph.rewriting.utils import check_stack_trace

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
    "check_stack_trace",
    "in2out",
    "inplace_optimizer",
    "local_optimizer",
    "merge_optimizer",
    "opt_name",
    "optimizer",
    "out2in",
    "pre_constant_merge",
    "pre_greedy_local_optimizer",
    "print_profile",
    "report_failure",
]
