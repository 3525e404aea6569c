"""``MergeOptimizer``: one node per distinct computation, one Constant per distinct value.

Two Apply nodes with equal ops and *identical* inputs compute the same thing, so the
clients of one can use the other. ``MergeFeature`` keeps, incrementally, a dict
``(op, ids of inputs) -> node`` and ``constant signature -> Constant``; a node whose key
is taken is scheduled for merging. Merging changes the inputs of the merged node's
clients, which re-keys them and may schedule them in turn, so a whole duplicated
subgraph collapses in one ``apply``. Each node is keyed once per change of its inputs:
the work is linear in the size of the graph (plus the changes), never quadratic.
"""

from __future__ import annotations

import sys
import time
from collections import deque

from theano_dag.graph.basic import Constant, Variable
from theano_dag.graph.fg import InconsistencyError
from theano_dag.graph.rewriting.basic import GlobalOptimizer
from theano_dag.graph.toolbox import AlreadyThere, Feature

__all__ = [
    "MergeFeature",
    "MergeOptimizer",
    "merge_optimizer",
    "MergeProfile",
    "pre_constant_merge",
    "use_graph_constants",
]


def constant_key(c):
    """A hashable key such that equal keys mean equal constants (None: do not merge).

    >>> from theano_dag.graph.type import Generic
    >>> constant_key(Constant(Generic(), 3)) == constant_key(Constant(Generic(), 3))
    True
    """
    sig = c.merge_signature() if hasattr(c, "merge_signature") else c.signature()
    try:
        hash(sig)
        return sig
    except TypeError:
        pass
    data = c.data
    tobytes = getattr(data, "tobytes", None)
    if tobytes is None:
        return None
    return (c.type, str(getattr(data, "dtype", "")), getattr(data, "shape", None), tobytes())


class MergeFeature(Feature):
    """Index the graph's nodes and constants to find duplicates as the graph changes.

    Installs ``fgraph.merge_feature``; ``scheduled`` holds ``(duplicate, kept)`` pairs.
    With ``deferred``, the graph is indexed when its index is first asked for (a merge,
    ``scheduled``), not when the feature is attached: the graph a compiled function
    loads from the function cache is already merged and seldom rewritten again, and a
    rewrite that does come later finds the index of the graph as it is then, what a
    feature attached then would have found.
    """

    # The index; a deferred feature makes it on the first read of any of these.
    _STATE = frozenset(
        ("key_node", "node_key", "sig_const", "op_canon", "canon_of", "scheduled", "blacklist")
    )
    _pending = False  # attached deferred, not indexed yet

    def __init__(self, deferred=False):
        self.deferred = deferred

    def __getattr__(self, name):
        # Only for attributes not set: the index of a deferred feature, made now.
        if name in MergeFeature._STATE and self.__dict__.get("_pending"):
            self._index_all(self.fgraph)
            return getattr(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def on_attach(self, fgraph):
        if getattr(fgraph, "merge_feature", None) is not None:
            raise AlreadyThere("fgraph already has a MergeFeature")
        fgraph.merge_feature = self
        self.fgraph = fgraph
        if self.__dict__.get("deferred"):
            self._pending = True
            return
        self._index_all(fgraph)

    def _index_all(self, fgraph):
        self._pending = False
        self.key_node: dict = {}
        self.node_key: dict = {}
        self.sig_const: dict = {}
        # id(op) -> (op, id of the first equal op seen): hashing an op through its
        # __props__ is slow, so each op instance is hashed once, not once per node.
        self.op_canon: dict = {}
        self.canon_of: dict = {}
        self.scheduled: deque = deque()
        self.blacklist: set = set()
        cls = type(self)
        if (
            cls.on_import is MergeFeature.on_import
            and cls.process_node is MergeFeature.process_node
            and cls.op_id is MergeFeature.op_id
        ):
            self._index_graph(fgraph, fgraph.toposort())
        else:  # a subclass's own
            for node in fgraph.toposort():
                self.on_import(fgraph, node, "on_attach")

    def _index_graph(self, fgraph, nodes):
        """``on_import`` of each of ``nodes`` in turn, written out: every node of the
        graph comes here when the feature is attached (merge1 and each later merge)."""
        key_node, node_key, op_canon = self.key_node, self.node_key, self.op_canon
        apply_nodes = fgraph.apply_nodes
        scheduled = self.scheduled
        process_constant = self.process_constant
        for node in nodes:
            inputs = node.inputs
            for c in inputs:
                if isinstance(c, Constant):
                    process_constant(fgraph, c)
            # process_node(fgraph, node), with op_id's cache read here
            op = node.op
            entry = op_canon.get(id(op))
            op_key = entry[1] if entry is not None and entry[0] is op else self.op_id(op)
            key = (op_key, *map(id, inputs))
            other = key_node.get(key)
            if other is node:
                continue
            if other is None or other not in apply_nodes or node_key.get(other) != key:
                key_node[key] = node
                node_key[node] = key
                continue
            scheduled.append((node, other))

    def on_detach(self, fgraph):
        if getattr(fgraph, "merge_feature", None) is self:
            del fgraph.merge_feature
        self._pending = False
        self.key_node = self.node_key = self.sig_const = self.op_canon = self.canon_of = {}
        self.scheduled = deque()

    def clone(self):
        return type(self)()

    def on_import(self, fgraph, node, reason=None):
        if self._pending:  # (indexed later as the graph is then)
            return
        for c in node.inputs:
            if isinstance(c, Constant):
                self.process_constant(fgraph, c)
        self.process_node(fgraph, node)

    def on_change_input(self, fgraph, node, i, r, new_r, reason=None):
        if self._pending:
            return
        if isinstance(new_r, Constant):
            self.process_constant(fgraph, new_r)
        if node == "output":
            return
        self._forget(node)
        if node in fgraph.apply_nodes:
            self.process_node(fgraph, node)

    def on_prune(self, fgraph, node, reason=None):
        if not self._pending:
            self._forget(node)

    def _forget(self, node):
        key = self.node_key.pop(node, None)
        if key is not None and self.key_node.get(key) is node:
            del self.key_node[key]

    def process_constant(self, fgraph, c):
        """Schedule ``c`` to be replaced by an equal constant already in the graph."""
        key = constant_key(c)
        if key is None:
            return
        other = self.sig_const.get(key)
        if other is c:
            return
        if other is None or other not in fgraph.variables:
            self.sig_const[key] = c
            return
        self.scheduled.append((c, other))

    def op_id(self, op) -> int:
        """The id of the first op seen that equals ``op`` (ops are compared once)."""
        entry = self.op_canon.get(id(op))
        if entry is None or entry[0] is not op:
            try:
                canon = self.canon_of.setdefault(op, op)
            except TypeError:  # an op that cannot be hashed only merges with itself
                canon = op
            entry = self.op_canon[id(op)] = (op, id(canon), canon)
        return entry[1]

    def process_node(self, fgraph, node):
        """Schedule ``node`` to be replaced by an equal node already in the graph."""
        key = (self.op_id(node.op), *map(id, node.inputs))
        other = self.key_node.get(key)
        if other is node:
            return
        if other is None or other not in fgraph.apply_nodes or self.node_key.get(other) != key:
            self.key_node[key] = node
            self.node_key[node] = key
            return
        self.scheduled.append((node, other))


def _same_computation(feature, node, other) -> bool:
    return (
        len(node.inputs) == len(other.inputs)
        and all(a is b for a, b in zip(node.inputs, other.inputs))
        and len(node.outputs) == len(other.outputs)
        and all(a.type == b.type for a, b in zip(node.outputs, other.outputs))
        and feature.op_id(node.op) == feature.op_id(other.op)
    )


class MergeProfile:
    def __init__(self):
        self.merged = 0
        self.constants = 0
        self.failed = 0
        self.time = 0.0

    def write(self, stream=sys.stdout, level=0):
        pad = "    " * level
        print(
            f"{pad}MergeOptimizer: merged {self.merged} nodes and {self.constants} constants "
            f"({self.failed} refused) in {self.time:.4f}s",
            file=stream,
        )


class MergeOptimizer(GlobalOptimizer):
    """Merge the parts of the graph that compute the same thing.

    The tutorial's example: in ``div(mul(add(y, z), x), add(y, z))`` the two
    ``add(y, z)`` become one node used twice.
    """

    def add_requirements(self, fgraph):
        if getattr(fgraph, "merge_feature", None) is None:
            fgraph.attach_feature(MergeFeature())

    @staticmethod
    def has_work(fgraph) -> bool:
        """False when ``apply`` would certainly change nothing (no duplicate is known)."""
        feature = getattr(fgraph, "merge_feature", None)
        return feature is None or bool(feature.scheduled)

    def apply(self, fgraph):
        prof = MergeProfile()
        t0 = time.perf_counter()
        feature = getattr(fgraph, "merge_feature", None)
        if feature is None:
            self.add_requirements(fgraph)
            feature = fgraph.merge_feature
        sched = feature.scheduled
        # Without inplace ops a merge cannot make the graph invalid: skip validation.
        check = hasattr(fgraph, "destroy_handler")

        while sched:
            old, new = sched.popleft()
            if isinstance(old, Constant):
                if old not in fgraph.variables:
                    continue
                if new not in fgraph.variables:
                    feature.process_constant(fgraph, old)  # ``new`` left: ``old`` is kept
                    continue
                fgraph.replace(old, new, reason="MergeOptimizer")
                prof.constants += 1
                continue
            node, other = old, new
            if node not in fgraph.apply_nodes:
                continue
            if other not in fgraph.apply_nodes:
                feature.process_node(fgraph, node)  # ``other`` left: ``node`` is kept
                continue
            if (node, other) in feature.blacklist or not _same_computation(feature, node, other):
                continue
            pairs = [(o, n) for o, n in zip(node.outputs, other.outputs) if o in fgraph.variables]
            for o, n in pairs:
                if o.name and not n.name:
                    n.name = o.name
            try:
                if check:
                    fgraph.replace_all_validate(pairs, reason="MergeOptimizer")
                else:
                    fgraph.replace_all(pairs, reason="MergeOptimizer")
            except InconsistencyError:
                feature.blacklist.add((node, other))
                prof.failed += 1
                continue
            prof.merged += 1
        feature.blacklist.clear()
        prof.time = time.perf_counter() - t0
        return prof

    def __str__(self):
        return getattr(self, "name", None) or "MergeOptimizer"


merge_optimizer = MergeOptimizer()


def pre_constant_merge(fgraph, variables):
    """Merge equal constants inside the (not yet imported) graphs of ``variables``.

    Used by rewrites that build many nodes at once; graphs already in ``fgraph`` are not
    touched. Changes the new nodes' inputs in place and returns the variables (a list,
    also for one variable, as Theano's does).
    """
    seen: set = set()
    by_key: dict = {}
    todo = [variables] if isinstance(variables, Variable) else list(variables)
    out = []

    def fresh(node):
        return node is not None and node not in fgraph.apply_nodes and node not in seen

    # Depth first in input order (an input's whole graph before the next input), as
    # Theano's recursion goes: the first constant met of each value is the one kept.
    for root in todo:
        if isinstance(root, Constant):
            key = constant_key(root)
            root = by_key.setdefault(key, root) if key is not None else root
        elif fresh(root.owner):
            seen.add(root.owner)
            stack = [(root.owner, 0)]
            while stack:
                node, i = stack.pop()
                if i == len(node.inputs):
                    continue
                stack.append((node, i + 1))
                inp = node.inputs[i]
                if isinstance(inp, Constant):
                    key = constant_key(inp)
                    if key is not None:
                        node.inputs[i] = by_key.setdefault(key, inp)
                elif fresh(inp.owner):
                    seen.add(inp.owner)
                    stack.append((inp.owner, 0))
        out.append(root)
    return out


def use_graph_constants(fgraph, variables):
    """Make the new nodes of the graphs of ``variables`` use the constants of ``fgraph``.

    A rewrite builds fresh constants (the ``0.5`` of ``x * 0.5``); once imported, each
    would be replaced by the equal constant the graph already has, at the next merge,
    a replacement like any other. When a merge runs right after every change anyway
    (canonicalize), taking the graph's constant at once gives the same graph for less.
    Only nodes not yet in ``fgraph`` are changed (in place).
    """
    feature = getattr(fgraph, "merge_feature", None)
    if feature is None:
        return
    sig_const = feature.sig_const
    apply_nodes = fgraph.apply_nodes
    graph_vars = fgraph.variables
    seen: set = set()
    stack = [v.owner for v in variables if v is not None and v.owner is not None]
    while stack:
        node = stack.pop()
        if node in seen or node in apply_nodes:
            continue
        seen.add(node)
        inputs = node.inputs
        for i, inp in enumerate(inputs):
            if inp.owner is not None:
                stack.append(inp.owner)
            elif isinstance(inp, Constant) and inp not in graph_vars:
                key = constant_key(inp)
                other = sig_const.get(key) if key is not None else None
                if other is not None and other is not inp and other in graph_vars:
                    inputs[i] = other
