"""Comparing graphs (re-exported from ``theano_dag.graph.basic``): ``equal_computations``
and ``is_same_graph``, as in ``theano.graph.basic``, and ``nodes_constructed``, which
collects the variables a block of code builds. Iterative, like ``algorithms``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from theano_dag.graph.algorithms import clone_replace
from theano_dag.graph.basic import Constant, Variable

__all__ = ["nodes_constructed", "equal_computations", "is_same_graph"]


@contextlib.contextmanager
def nodes_constructed():
    """Collect every Variable constructed inside the ``with`` block.

    >>> from theano_dag.graph.type import Generic
    >>> with nodes_constructed() as new:
    ...     v = Variable(Generic(), name="v")
    >>> new
    [v]
    """
    new_nodes: list = []
    Variable.append_construction_observer(new_nodes.append)
    try:
        yield new_nodes
    finally:
        Variable.remove_construction_observer(new_nodes.append)


def equal_computations(xs: Sequence, ys: Sequence, in_xs=None, in_ys=None) -> bool:
    """Return True if each ``xs[k]`` computes the same thing as ``ys[k]``.

    Apply nodes must have equal ops and pairwise equal inputs, free variables must be
    identical and constants must hold equal data; a pair ``(in_xs[k], in_ys[k])`` is
    taken as equal. A non-Variable entry is compared by value (with a Constant's data).

    >>> from theano_dag.graph.basic import Apply
    >>> from theano_dag.graph.type import Generic
    >>> from theano_dag.graph.op import Op
    >>> class F(Op):
    ...     __props__ = ()
    ...     def make_node(self, *xs):
    ...         return Apply(self, list(xs), [Generic()()])
    >>> x, y = Generic()("x"), Generic()("y")
    >>> equal_computations([F()(x)], [F()(x)]), equal_computations([F()(x)], [F()(y)])
    (True, False)
    >>> equal_computations([F()(x)], [F()(y)], in_xs=[x], in_ys=[y])
    True
    """
    if len(xs) != len(ys):
        raise ValueError("The number of graphs/variables in each argument must match.")
    if not in_xs and not in_ys and len(xs) == 1:
        # (one pair, as most callers ask: settled by its top node without the walk's sets)
        x, y = xs[0], ys[0]
        if x is y and isinstance(x, Variable):
            return True
        xo, yo = getattr(x, "owner", None), getattr(y, "owner", None)
        if xo is not None and yo is not None and (x.index != y.index or xo.op != yo.op):
            return False
    in_xs, in_ys = list(in_xs or []), list(in_ys or [])
    if len(in_xs) != len(in_ys):
        return False
    if any(a.type != b.type for a, b in zip(in_xs, in_ys)):
        return False
    # Pairs are keyed by id: a Variable subclass may overload ``==`` symbolically.
    common = {(id(a), id(b)) for a, b in zip(in_xs, in_ys)}
    in_x_ids = {id(a) for a in in_xs}
    todo = []
    for x, y in zip(xs, ys):
        if not isinstance(x, Variable) or not isinstance(y, Variable):
            if not _value_equal(x, y):
                return False
            continue
        if (x.owner is None) != (y.owner is None):
            return False
        if x.owner is not None and x.index != y.index:
            return False
        if id(x) not in in_x_ids and x.type != y.type:
            return False
        todo.append((x, y))
    checked: set = set()
    while todo:
        x, y = todo.pop()
        key = (id(x), id(y))
        if key in common or key in checked:
            continue
        if x is y:
            continue  # (its whole graph the same: a walk of it would find each pair equal)
        checked.add(key)
        xo, yo = x.owner, y.owner
        if xo is None or yo is None:
            if xo is not yo:
                return False
            if x is y:
                continue
            if isinstance(x, Constant) and isinstance(y, Constant) and _const_equal(x, y):
                continue
            return False
        if (
            x.index != y.index
            or xo.op != yo.op
            or len(xo.inputs) != len(yo.inputs)
            or len(xo.outputs) != len(yo.outputs)
        ):
            return False
        todo.extend(zip(xo.inputs, yo.inputs))
    return True


def _value_equal(x, y) -> bool:
    """Compare a plain value with a plain value or a Constant's data (numpy semantics)."""
    import numpy as np

    if isinstance(x, Variable):
        x, y = y, x
    if isinstance(y, Variable):
        if not isinstance(y, Constant):
            return False
        y = y.data
    try:
        return bool(np.array_equal(x, y))
    except Exception:  # objects numpy cannot compare are not provably equal
        return False


def _const_equal(x, y) -> bool:
    try:
        return bool(x.equals(y))
    except Exception:  # an unusual data type whose comparison raises: not provably equal
        return False


def is_same_graph(var1, var2, givens=None) -> bool:
    """Return True if ``var1`` and ``var2`` compute the same thing once ``givens`` are applied.

    ``givens`` maps variables to the variables that replace them in both graphs.

    >>> from theano_dag.graph.basic import Apply
    >>> from theano_dag.graph.type import generic
    >>> x, y = generic("x"), generic("y")
    >>> z = Apply("f", [x, y], [generic("z")]).outputs[0]
    >>> z2 = Apply("f", [y, y], [generic()]).outputs[0]
    >>> is_same_graph(z, z2), is_same_graph(z, z2, givens={x: y})
    (False, True)
    """
    if givens:
        givens = dict(givens)
        var1 = clone_replace(var1, givens, strict=False)
        var2 = clone_replace(var2, givens, strict=False)
    return equal_computations([var1], [var2])
