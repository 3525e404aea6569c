"""Checks over rewritten graphs: ``check_stack_trace`` (``theano.graph.opt``'s), which
asks whether the nodes a rewrite made carry the user's stack of what they replaced."""

from __future__ import annotations

import inspect
import warnings

from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.op import Op

__all__ = ["check_stack_trace"]


def _nodes_to_check(fgraph, ops_to_check):
    if isinstance(ops_to_check, Op) or (
        inspect.isclass(ops_to_check) and issubclass(ops_to_check, Op)
    ):
        ops_to_check = (ops_to_check,)
    if isinstance(ops_to_check, str):
        if ops_to_check == "last":
            return [out.owner for out in fgraph.outputs if out.owner is not None]
        if ops_to_check == "all":
            return list(fgraph.apply_nodes)
        raise ValueError(f"check_stack_trace: ops_to_check {ops_to_check!r} is not 'last' or 'all'")
    if isinstance(ops_to_check, (tuple, list)):
        instances = [o for o in ops_to_check if isinstance(o, Op)]
        classes = tuple(o for o in ops_to_check if not isinstance(o, Op))
        # An Elemwise counts as its scalar op's class too (Theano's rule).
        return [
            node
            for node in fgraph.apply_nodes
            if node.op in instances
            or isinstance(node.op, classes)
            or isinstance(getattr(node.op, "scalar_op", None), classes)
        ]
    if callable(ops_to_check):
        return [node for node in fgraph.apply_nodes if ops_to_check(node)]
    raise ValueError("check_stack_trace: ops_to_check does not have the right type")


def check_stack_trace(f_or_fgraph, ops_to_check="last", bug_print="raise") -> bool:
    """Whether the outputs of the chosen nodes of a compiled function (or FunctionGraph)
    have a stack trace (``tag.trace``), as rewrites keep it (``copy_stack_trace``).

    ``ops_to_check``: ``"last"`` (the nodes of the outputs), ``"all"``, an Op class or
    instance or a list of them, or a predicate on nodes. ``bug_print`` says what to do
    when no node matches: ``"raise"``, ``"warn"`` or ``"ignore"``.

    >>> import theano_dag
    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> f = theano_dag.function([x], tt.exp(x) * 2)
    >>> check_stack_trace(f, ops_to_check="all")
    True
    """
    maker = getattr(f_or_fgraph, "maker", None)  # a compiled Function (a floor above)
    fgraph = maker.fgraph if maker is not None else f_or_fgraph
    if not isinstance(fgraph, FunctionGraph):
        raise ValueError("check_stack_trace: expected a Function or a FunctionGraph")
    nodes = _nodes_to_check(fgraph, ops_to_check)
    if not nodes:
        msg = "Provided op instances/classes are not in the graph or the graph is empty"
        if bug_print == "raise":
            raise Exception(msg)
        if bug_print == "warn":
            warnings.warn(msg, stacklevel=2)
        elif bug_print != "ignore":
            raise ValueError(f"check_stack_trace: bug_print {bug_print!r} is not recognised")
    return all(getattr(out.tag, "trace", None) for node in nodes for out in node.outputs)
