"""``typed_list_inplace_opt`` (``theano.typed_list.opt``): a list op whose list input
nothing else reads, and that is not a function input the caller keeps, changes that list
in place instead of copying it (in the inplace phase, after the destroy handler joins).

>>> from theano_dag.graph.rewriting.db import Query
>>> from theano_dag.opt.optdb import optdb
>>> "typed_list_inplace_opt" in [o.name for o in optdb.query(Query(include=["fast_run"]))]
True
"""

from __future__ import annotations

from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.graph.rewriting.navigator import in2out
from theano_dag.opt.optdb import optdb
from theano_dag.typed_list.basic import Append, Extend, Insert, Remove, Reverse

__all__ = ["typed_list_inplace_opt"]


@local_optimizer([Append, Extend, Insert, Remove, Reverse])
def typed_list_inplace_opt(fgraph, node):
    """``Op()`` -> ``Op(inplace=True)`` when the destroy handler allows changing the list."""
    if node.op.inplace:
        return None
    new = type(node.op)(inplace=True)(*node.inputs, return_list=True)
    # The destroy handler refuses the change (the list is read elsewhere, or is a
    # function input that may not be changed): the validation step undoes it.
    return new


optdb.register(
    "typed_list_inplace_opt",
    in2out(typed_list_inplace_opt, ignore_newtrees=True),
    60,
    "fast_run",
    "inplace",
)
