"""Which kinds of op a graph holds, so that a navigator skips rewrites that cannot apply.

A local rewrite may say what it ``needs``: classes of Op (or of scalar op, for the
Elemwise nodes applying one) of which the graph must hold at least one node for the
rewrite to possibly apply anywhere (a rule folding a bias into a convolution needs a
convolution). ``OpPresence`` counts the graph's nodes by those classes as it changes,
and a navigator does not try such a rewrite while the graph holds none of what it
needs: it would have returned nothing, after costing a call per node.

The counts are exact at every moment, so skipping is exactly the same as trying: a
node of a needed class that a rewrite adds mid-pass makes the rules needing it
active again at once (``generation`` counts the classes that appeared).
"""

from __future__ import annotations

from theano_dag.graph.toolbox import AlreadyThere, Feature

__all__ = ["OpPresence", "needs_of", "presence_keys"]


def presence_keys(node):
    """The classes ``node`` counts under: its op's, and its scalar op's when the op
    applies one (an Elemwise: rewrites match its scalar op).

    >>> import theano_dag.tensor as tt
    >>> [k.__name__ for k in presence_keys(tt.exp(tt.dvector()).owner)]
    ['Elemwise', 'Exp']
    """
    op = node.op
    sop = getattr(op, "scalar_op", None)
    if sop is None:
        return (type(op),)
    return (type(op), type(sop))


def needs_of(lopt):
    """The classes ``lopt`` needs in the graph (a tuple), or None when it needs nothing.

    >>> from theano_dag.graph.rewriting.local import local_optimizer
    >>> from theano_dag.graph.op import Op
    >>> @local_optimizer(None, needs=[Op])
    ... def local_any(fgraph, node):
    ...     return False
    >>> needs_of(local_any) == (Op,)
    True
    """
    fn = getattr(lopt, "needs", None)
    if fn is None:
        return None
    needs = fn()
    return tuple(needs) if needs else None


class OpPresence(Feature):
    """``fgraph.op_presence``: the number of the graph's nodes under each class of
    ``presence_keys``, kept up to date as the graph changes.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag import scalar as ts
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> x = tt.dvector("x")
    >>> fg = FunctionGraph([x], [tt.exp(x) + 1], features=[OpPresence()])
    >>> fg.op_presence.holds((type(ts.exp),)), fg.op_presence.holds((type(ts.sigmoid),))
    (True, False)
    """

    def __init__(self):
        self.counts: dict = {}
        # How many times a class went from no node to one: a navigator's cached view of
        # which rewrites can apply is stale when this moved.
        self.generation = 0

    def on_attach(self, fgraph):
        if hasattr(fgraph, "op_presence"):
            raise AlreadyThere()
        fgraph.op_presence = self
        self.counts = {}
        for node in fgraph.apply_nodes:
            self.on_import(fgraph, node, None)

    def on_detach(self, fgraph):
        del fgraph.op_presence

    # presence_keys written out: every node a rewrite makes or drops comes here.
    def on_import(self, fgraph, node, reason):
        counts = self.counts
        op = node.op
        key = type(op)
        n = counts.get(key, 0)
        if not n:
            self.generation += 1
        counts[key] = n + 1
        sop = getattr(op, "scalar_op", None)
        if sop is not None:
            key = type(sop)
            n = counts.get(key, 0)
            if not n:
                self.generation += 1
            counts[key] = n + 1

    def on_prune(self, fgraph, node, reason):
        counts = self.counts
        op = node.op
        counts[type(op)] -= 1
        sop = getattr(op, "scalar_op", None)
        if sop is not None:
            counts[type(sop)] -= 1

    def holds(self, needs) -> bool:
        """Whether the graph holds a node under a subclass of one of ``needs``."""
        return holds_any(self.present(), needs)

    def present(self) -> frozenset:
        """The classes (ops' and scalar ops') of the nodes the graph holds."""
        return frozenset([k for k, n in self.counts.items() if n > 0])

    def clone(self):
        return OpPresence()


def holds_any(present, needs) -> bool:
    """Whether one of the classes ``present`` is a subclass of one of ``needs``.

    >>> from theano_dag import scalar as ts
    >>> exp = type(ts.exp)
    >>> holds_any(frozenset([exp]), (ts.UnaryScalarOp,)), holds_any(frozenset(), (exp,))
    (True, False)
    """
    return any(issubclass(k, need) for need in needs for k in present)
