"""``typed_list_inplace_opt`` (``theano.typed_list.opt``): a list op whose list input
nothing else reads, and that is not a function input the caller keeps, changes that list
in place instead of copying it. The inplace pass (``insert_inplace``, after the destroy
handler joins) does it, as for the other ops of its table.

>>> import theano_dag, theano_dag.tensor as tt
>>> from theano_dag.typed_list import TypedListType
>>> from theano_dag.typed_list.basic import Reverse
>>> lst = TypedListType(tt.dvector().type)()
>>> f = theano_dag.function([theano_dag.In(lst, mutable=True)], Reverse()(lst))
>>> f.maker.fgraph.toposort()[0].op
Reverse{inplace}
"""

from __future__ import annotations

from theano_dag.opt.rewrites.inplace import INPLACE_MAKERS
from theano_dag.typed_list.basic import Append, Extend, Insert, Remove, Reverse

__all__ = ["typed_list_inplace_opt"]


def typed_list_inplace_opt(node, i):
    """The inplace form of a list op, changing its list input ``i`` (0)."""
    return type(node.op)(inplace=True) if i == 0 else None


# The inplace pass's table: these ops may change their list input (input 0).
for _op in (Append, Extend, Insert, Remove, Reverse):
    INPLACE_MAKERS[_op] = ((0,), typed_list_inplace_opt)
