"""Schedules: orders of a graph's Apply nodes that respect comparison functions
(``theano.graph.sched``).

A comparison ``cmp(a, b)`` is negative when ``a`` should run before ``b``. ``posort``
takes several, in decreasing priority: a later one only orders pairs the earlier ones
(and the orders they imply) left free. ``sort_schedule_fn`` makes a linker's
``schedule`` from comparisons, data dependencies first.

>>> posort(["b10", "a2", "a1"], lambda a, b: cmp(a[0], b[0]), lambda a, b: cmp(a, b))
['a1', 'a2', 'b10']
"""

from __future__ import annotations

from theano_dag.graph.algorithms import list_of_nodes
from theano_dag.graph.utils import cmp

__all__ = [
    "cmp",
    "make_depends",
    "make_dependence_cmp",
    "reverse_dict",
    "posort",
    "sort_apply_nodes",
    "sort_schedule_fn",
    "key_to_cmp",
]


def make_depends():
    """``depends((a, b))``: does Apply ``a`` use, directly or not, an output of ``b``?
    Answers are kept, so a schedule asks about each pair once."""
    known: dict = {}

    def depends(pair):
        if pair in known:
            return known[pair]
        a, b = pair
        # Walk a's ancestors (iteratively: deep graphs) looking for b.
        found = False
        seen = set()
        stack = [a]
        while stack and not found:
            node = stack.pop()
            for inp in node.inputs:
                owner = inp.owner
                if owner is None or owner in seen:
                    continue
                if owner is b:
                    found = True
                    break
                seen.add(owner)
                stack.append(owner)
        known[pair] = found
        return found

    return depends


def make_dependence_cmp():
    """A comparison putting a node after the nodes whose outputs it needs."""
    depends = make_depends()

    def dependence(a, b):
        if depends((a, b)):
            return 1
        if depends((b, a)):
            return -1
        return 0

    return dependence


def reverse_dict(d):
    """``{value: (keys that list it, ...)}`` for a dict of key -> iterable of values.

    >>> reverse_dict({"a": (1, 2), "b": (2,)})
    {1: ('a',), 2: ('a', 'b')}
    """
    out: dict = {}
    for key, values in d.items():
        for v in values:
            out[v] = (*out.get(v, ()), key)
    return out


def _toposort(edges):
    """The keys and values of ``edges`` (node -> nodes that must come after it) in an
    order that honours every edge; ValueError on a cycle."""
    preds = {n: 0 for n in edges}
    for targets in edges.values():
        for t in targets:
            preds[t] = preds.get(t, 0) + 1
    ready = [n for n, k in preds.items() if k == 0]
    order = []
    while ready:
        n = ready.pop()
        order.append(n)
        for t in edges.get(n, ()):
            preds[t] -= 1
            if preds[t] == 0:
                ready.append(t)
    if len(order) != len(preds):
        raise ValueError("Input has cycles")
    return order


def posort(nodes, *cmps):
    """``nodes`` sorted by the partial orders ``cmps`` (first has priority): a pair is
    ordered by the first comparison that orders it without contradicting what is
    already decided, directly or through other nodes."""
    nodes = list(nodes)
    after = {n: set() for n in nodes}  # n -> every node decided to come after n
    before = {n: set() for n in nodes}
    for compare in cmps:
        for a in nodes:
            for b in nodes:
                if a is b or b in after[a] or b in before[a] or compare(a, b) >= 0:
                    continue
                # a before b, and so everything before a before everything after b.
                firsts = before[a] | {a}
                lasts = after[b] | {b}
                for f in firsts:
                    after[f] |= lasts
                for s in lasts:
                    before[s] |= firsts
    return _toposort(after)


def sort_apply_nodes(inputs, outputs, cmps):
    """The Apply nodes between ``inputs`` and ``outputs``, sorted by ``cmps``."""
    return posort(list_of_nodes(inputs, outputs), *cmps)


def sort_schedule_fn(*cmps):
    """A linker ``schedule`` (fgraph -> nodes): data dependencies, then ``cmps``.

    >>> import theano_dag, theano_dag.tensor as tt
    >>> from theano_dag.engines.basic import PerformLinker
    >>> x = tt.dvector("x")
    >>> by_name = key_to_cmp(str)
    >>> mode = theano_dag.Mode(linker=PerformLinker(schedule=sort_schedule_fn(by_name)))
    >>> theano_dag.function([x], tt.exp(x) + tt.sin(x), mode=mode)([0.0])
    array([1.])
    """
    dependence = make_dependence_cmp()
    everything = (dependence, *cmps)

    def schedule(fgraph):
        return sort_apply_nodes(fgraph.inputs, fgraph.outputs, everything)

    return schedule


def key_to_cmp(key):
    """A comparison of ``key(a)`` and ``key(b)``."""

    def key_cmp(a, b):
        return cmp(key(a), key(b))

    return key_cmp
