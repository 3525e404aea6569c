"""``DestroyHandler``: keeps in-place and view ops safe (``theano.graph.destroyhandler``).

An op declares ``destroy_map = {output: [input]}`` when it overwrites that input,
and ``view_map = {output: [input]}`` when that output aliases the input's memory.
Views chain, so destroying any variable destroys its *root* (the non-view value
at the bottom of the chain) and every view of that root.

The DestroyHandler refuses (InconsistencyError from ``validate``) a graph where

* a root is destroyed by two nodes;
* a destroyed root is a Constant or is tagged ``tag.indestructible``;
* a destroyed value, or a view of it, is an output of the graph;
* a node destroys one input while another of its inputs aliases the same memory
  (unless the op tolerates it, see ``destroyhandler_tolerate_same`` and
  ``destroyhandler_tolerate_aliased``);
* a destroyed value is still needed after its destroyer, in a way that no order
  of execution fixes.

Its ``orderings`` make each destroyer run after every other reader of what it
destroys. Protecting the inputs of a compiled function is the job of
``toolbox.Supervisor``, which asks the handler through ``fgraph.destroyers(var)``.
"""

from __future__ import annotations

from collections import deque

from theano_dag.graph.algorithms import indexed_toposort
from theano_dag.graph.basic import Constant
from theano_dag.graph.fg import InconsistencyError
from theano_dag.graph.toolbox import AlreadyThere, Bookkeeper, Supervisor

__all__ = ["DestroyHandler", "ProtocolError", "Supervisor", "fast_inplace_check"]


class ProtocolError(Exception):
    """The FunctionGraph called the DestroyHandler's callbacks in an impossible order."""


def _cycle_nodes(fgraph, orderings):
    """Return the Apply nodes that cannot be scheduled (empty when there is no cycle).

    :func:`~theano_dag.graph.algorithms.indexed_toposort` over the Apply nodes, with
    ``orderings`` as extra edges.
    """
    nodes = list(fgraph.apply_nodes)
    index = {node: k for k, node in enumerate(nodes)}
    deps = []
    for node in nodes:
        parents = {index[i.owner] for i in node.inputs if i.owner in index}
        parents.update(index[p] for p in orderings.get(node, ()) if p in index)
        deps.append(parents)
    order, waiting = indexed_toposort(deps)
    if len(order) == len(nodes):
        return set()
    return {node for node, w in zip(nodes, waiting) if w}


class DestroyHandler(Bookkeeper):
    """Track destroy_map/view_map and refuse graphs where in-place work is unsafe.

    Installs ``fgraph.destroyers(var)`` (the nodes that destroy ``var`` or what it
    views), ``fgraph.has_destroyers(vars)`` and ``fgraph.destroy_handler``.

    >>> from theano_dag.graph.type import Generic
    >>> from theano_dag.graph.basic import Apply
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> from theano_dag.graph.op import Op
    >>> class Inc(Op):
    ...     __props__ = ("inplace",)
    ...     def __init__(self, inplace):
    ...         self.inplace = inplace
    ...         self.destroy_map = {0: [0]} if inplace else {}
    ...     def make_node(self, x):
    ...         return Apply(self, [x], [Generic()()])
    >>> x = Generic()("x")
    >>> a = Inc(False)(x)
    >>> fg = FunctionGraph([x], [Inc(False)(a), Inc(True)(a)], [DestroyHandler()], clone=False)
    >>> fg.destroyers(a)[0].op
    Inc{inplace=True}
    >>> [str(n.op) for n in fg.toposort()]  # the destroyer runs after the other reader of a
    ['Inc{inplace=False}', 'Inc{inplace=False}', 'Inc{inplace=True}']
    >>> fg.replace_validate(fg.outputs[0], a)  # a would be an output and be destroyed
    Traceback (most recent call last):
    ...
    theano_dag.graph.utils.InconsistencyError: Inc{inplace=True}(...) destroys ..., but ...
    """

    pickle_rm_attr = ["destroyers", "has_destroyers"]

    def __init__(self, do_imports_on_attach=True, algo=None):
        if algo not in (None, "regular", "fast"):
            raise ValueError(f"DestroyHandler algo must be 'regular' or 'fast', got {algo!r}")
        self.fgraph = None
        self.do_imports_on_attach = do_imports_on_attach
        # Both algorithms give the same answers here; "fast" is accepted for
        # compatibility with Theano's cycle_detection flag.
        self.algo = algo or "regular"
        self.droot: dict = {}  # destroyed variable or view of it -> its root
        self.impact: dict = {}  # destroyed root -> [root, every view of it]
        self.root_destroyer: dict = {}  # destroyed root -> the Apply destroying it

    def clone(self):
        return type(self)(self.do_imports_on_attach, self.algo)

    def on_attach(self, fgraph):
        if (
            self.fgraph is fgraph
            or hasattr(fgraph, "destroyers")
            or hasattr(fgraph, "destroy_handler")
        ):
            raise AlreadyThere("DestroyHandler feature is already present or in conflict")
        if self.fgraph is not None:
            raise ValueError("A DestroyHandler instance can only serve one FunctionGraph")
        self.fgraph = fgraph
        self.destroyers: dict = {}  # ordered set of Apply nodes with a destroy_map
        self.view_i: dict = {}  # view variable -> the variable it views
        self.view_o: dict = {}  # variable -> ordered set of its direct views
        self.stale_droot = True
        self.debug_all_apps: set = set()
        self.unpickle(fgraph)
        fgraph.destroy_handler = self
        if self.do_imports_on_attach:
            Bookkeeper.on_attach(self, fgraph)

    def unpickle(self, fgraph):
        def get_destroyers_of(r):
            try:
                droot, _, root_destroyer = self.refresh_droot_impact()
            except InconsistencyError:
                return []
            root = droot.get(r)
            return [root_destroyer[root]] if root is not None else []

        def has_destroyers(protected_list):
            droot, _, root_destroyer = self.refresh_droot_impact()
            return any(droot.get(v) in root_destroyer for v in protected_list)

        fgraph.destroyers = get_destroyers_of
        fgraph.has_destroyers = has_destroyers

    def on_detach(self, fgraph):
        if fgraph is not self.fgraph:
            raise ValueError(f"This DestroyHandler is not attached to {fgraph}")
        for attr in ("destroyers", "view_i", "view_o", "stale_droot", "debug_all_apps"):
            delattr(self, attr)
        del fgraph.destroyers
        del fgraph.has_destroyers
        del fgraph.destroy_handler
        self.fgraph = None

    # ------------------------------------------------------------------
    # Keeping the view/destroy structure up to date

    @staticmethod
    def _view_pairs(app):
        for o_idx, i_idxs in (getattr(app.op, "view_map", None) or {}).items():
            if len(i_idxs) != 1:
                raise NotImplementedError(
                    f"{app.op}: output {o_idx} views inputs {list(i_idxs)}; the "
                    f"DestroyHandler supports views of exactly one input"
                )
            yield o_idx, i_idxs[0]

    def on_import(self, fgraph, app, reason):
        if app in self.debug_all_apps:
            raise ProtocolError(f"{app} imported twice")
        self.debug_all_apps.add(app)
        if getattr(app.op, "destroy_map", None):
            self.destroyers[app] = None
        for o_idx, i_idx in self._view_pairs(app):
            o, i = app.outputs[o_idx], app.inputs[i_idx]
            self.view_i[o] = i
            self.view_o.setdefault(i, {})[o] = None
        self.stale_droot = True

    def on_prune(self, fgraph, app, reason):
        if app not in self.debug_all_apps:
            raise ProtocolError(f"{app} pruned without having been imported")
        self.debug_all_apps.remove(app)
        self.destroyers.pop(app, None)
        for o_idx, i_idx in self._view_pairs(app):
            o, i = app.outputs[o_idx], app.inputs[i_idx]
            del self.view_i[o]
            views = self.view_o[i]
            del views[o]
            if not views:
                del self.view_o[i]
        self.stale_droot = True

    def on_change_input(self, fgraph, app, i, old_r, new_r, reason=None):
        if type(app) is not str:
            if app not in self.debug_all_apps:
                raise ProtocolError(f"input of {app} changed, but it was never imported")
            for o_idx, i_idx in self._view_pairs(app):
                if i_idx != i:
                    continue
                output = app.outputs[o_idx]
                self.view_i[output] = new_r
                views = self.view_o[old_r]
                del views[output]
                if not views:
                    del self.view_o[old_r]
                self.view_o.setdefault(new_r, {})[output] = None
        self.stale_droot = True

    def refresh_droot_impact(self):
        """Recompute (when stale) and return ``(droot, impact, root_destroyer)``.

        Raises InconsistencyError when a root is destroyed by two nodes.
        """
        if self.stale_droot:
            droot, impact, root_destroyer = {}, {}, {}
            for app in self.destroyers:
                for root in self._destroyed_roots(app):
                    other = root_destroyer.get(root)
                    if other is app:
                        continue
                    if other is not None:
                        raise InconsistencyError(
                            f"Multiple destroyers of {root}: {other} and {app} both "
                            f"overwrite it (or a view of it)"
                        )
                    root_destroyer[root] = app
                    views = [root]
                    todo = deque([root])
                    while todo:
                        for v in self.view_o.get(todo.popleft(), ()):
                            views.append(v)
                            todo.append(v)
                    for v in views:
                        droot[v] = root
                    impact[root] = views
            self.droot, self.impact, self.root_destroyer = droot, impact, root_destroyer
            self.stale_droot = False
        return self.droot, self.impact, self.root_destroyer

    def _root(self, var):
        view_i = self.view_i
        while var in view_i:
            var = view_i[var]
        return var

    def _destroyed_roots(self, app):
        for i_idxs in app.op.destroy_map.values():
            for i_idx in i_idxs:
                yield self._root(app.inputs[i_idx])

    # ------------------------------------------------------------------
    # Checking and ordering

    def orderings(self, fgraph, ordered=True):
        """Return ``{destroyer: [every other reader of what it destroys]}``.

        Raises InconsistencyError for the illegal cases listed in the module doc
        (all but the cycle, which ``validate`` detects).
        """
        rval: dict = {}
        if not self.destroyers:
            return rval
        droot, impact, root_destroyer = self.refresh_droot_impact()
        illegal = [
            r for r in droot if getattr(r.tag, "indestructible", False) or isinstance(r, Constant)
        ]
        if illegal:
            raise InconsistencyError(
                f"Attempting to destroy indestructible variables: {illegal} "
                f"(destroyed by {root_destroyer[droot[illegal[0]]]})"
            )
        clients = fgraph.clients
        for root, views in impact.items():
            for v in views:
                if any(type(c) is str for c, _ in clients.get(v, ())):
                    what = "it" if v is root else f"{v}, a view of it,"
                    raise InconsistencyError(
                        f"{root_destroyer[root]} destroys {root}, but {what} is an output "
                        f"of the graph and would be returned overwritten"
                    )
        for app in self.destroyers:
            readers: dict = {}
            for i_idxs in app.op.destroy_map.values():
                for destroyed_idx in i_idxs:
                    destroyed = app.inputs[destroyed_idx]
                    root_impact = impact[droot[destroyed]]
                    self._check_aliasing(app, destroyed_idx, destroyed, set(root_impact))
                    for r in root_impact:
                        for c, _ in clients.get(r, ()):
                            if type(c) is not str:
                                readers[c] = None
            readers.pop(app, None)
            if readers:
                rval[app] = list(readers)
        return rval

    @staticmethod
    def _check_aliasing(app, destroyed_idx, destroyed, root_impact):
        op = app.op
        tolerated = {
            b for a, b in getattr(op, "destroyhandler_tolerate_same", []) if a == destroyed_idx
        }
        tolerated.add(destroyed_idx)
        ignored = {
            b for a, b in getattr(op, "destroyhandler_tolerate_aliased", []) if a == destroyed_idx
        }
        for i, inp in enumerate(app.inputs):
            if i in ignored or inp not in root_impact:
                continue
            if i not in tolerated or inp is not destroyed:
                raise InconsistencyError(
                    f"Input aliasing: {app} destroys its input {destroyed_idx} ({destroyed}) "
                    f"while its input {i} ({inp}) may share the same memory"
                )

    def validate(self, fgraph):
        """Raise InconsistencyError if the graph cannot be run safely in any order."""
        if not self.destroyers:
            return True
        ords = self.orderings(fgraph)
        stuck = _cycle_nodes(fgraph, ords)
        if stuck:
            culprit = next((a for a in self.destroyers if a in stuck), None)
            if culprit is None:
                raise InconsistencyError("Dependency graph contains cycles")
            destroyed = [
                str(culprit.inputs[i]) for idxs in culprit.op.destroy_map.values() for i in idxs
            ]
            raise InconsistencyError(
                f"{culprit} destroys {', '.join(destroyed)}, which is still needed after it "
                f"runs (the dependency graph contains cycles)"
            )
        return True


def fast_inplace_check(fgraph, inputs):
    """Return the variables of ``inputs`` that an in-place op could overwrite.

    Constants, graph outputs, variables already destroyed and variables a
    Supervisor protects are left out.
    """
    protected = set()
    for f in fgraph._features:
        if isinstance(f, Supervisor):
            protected.update(f.protected)
    protected.update(fgraph.outputs)
    return [
        i
        for i in inputs
        if not isinstance(i, Constant) and not fgraph.has_destroyers([i]) and i not in protected
    ]
