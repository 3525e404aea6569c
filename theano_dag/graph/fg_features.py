"""What ``FunctionGraph`` shares with its features: attaching them, calling them back on
each change of the graph, and gathering the orderings they ask for.

``FeatureHost`` is the base class of ``FunctionGraph`` (``theano_dag.graph.fg``), which
creates the attributes it uses (``_features``, ``_callbacks``, ``profile`` and the
callback timers) before any feature is attached.
"""

from __future__ import annotations

from time import perf_counter

__all__ = ["FeatureHost"]


class FeatureHost:
    """Attaches features to a graph and calls them back (``FunctionGraph``'s base)."""

    def attach_feature(self, feature):
        """Add ``feature`` and call its ``on_attach(fgraph)``.

        A feature that is already attached, or whose ``on_attach`` raises
        ``AlreadyThere``, is silently not added.
        """
        from theano_dag.graph.toolbox import AlreadyThere

        if any(f is feature for f in self._features):
            return
        attach = getattr(feature, "on_attach", None)
        if attach is not None:
            try:
                attach(self)
            except AlreadyThere:
                return
        self.execute_callbacks_times.setdefault(feature, 0.0)
        self._features.append(feature)
        # The toposort cache stays valid: it is only used when no feature adds orderings,
        # and optimizers attach and remove features all the time.
        self._callbacks = {}

    def remove_feature(self, feature):
        """Remove ``feature`` and call its ``on_detach(fgraph)``; unknown features are ignored."""
        for k, f in enumerate(self._features):
            if f is feature:
                del self._features[k]
                break
        else:
            return
        self._callbacks = {}
        detach = getattr(feature, "on_detach", None)
        if detach is not None:
            detach(self)

    def _get_callbacks(self, name):
        cbs = self._callbacks.get(name)
        if cbs is None:
            from theano_dag.graph.toolbox import Feature

            # Methods a feature inherits unchanged from Feature do nothing: skip them.
            noop = getattr(Feature, name, None)
            cbs = []
            for f in self._features:
                fn = getattr(f, name, None)
                if fn is None:
                    continue
                if noop is not None and getattr(type(f), name, None) is noop:
                    continue
                cbs.append((f, fn))
            self._callbacks[name] = cbs
        return cbs

    def execute_callbacks(self, name, *args, **kwargs):
        """Call ``feature.<name>(fgraph, *args, **kwargs)`` on every feature that has it."""
        cbs = self._callbacks.get(name)
        if cbs is None:
            cbs = self._get_callbacks(name)
        if not cbs:
            return
        t0 = perf_counter()
        if self.profile is None:
            # Every change of the graph comes here: without a profile to fill, only the
            # total is timed (as for on_import, see _import_graph).
            for _, fn in cbs:
                fn(self, *args, **kwargs)
        else:
            times = self.execute_callbacks_times
            for feature, fn in cbs:
                tf0 = perf_counter()
                fn(self, *args, **kwargs)
                times[feature] = times.get(feature, 0.0) + perf_counter() - tf0
        self.execute_callbacks_time += perf_counter() - t0

    def collect_callbacks(self, name, *args):
        """Return ``{feature: feature.<name>(*args)}`` for every feature that has ``name``."""
        d = {}
        for feature in self._features:
            fn = getattr(feature, name, None)
            if fn is not None:
                d[feature] = fn(*args)
        return d

    def orderings(self):
        """Return ``{node: [nodes that must run before it]}`` gathered from the features.

        Features give extra constraints through ``orderings(fgraph)`` (DestroyHandler
        uses this to run every reader of a value before the node that destroys it).
        """
        all_ords = []
        for feature, fn in self._get_callbacks("orderings"):
            ords = fn(self)
            if not isinstance(ords, dict):
                raise TypeError(
                    f"{feature}.orderings must return a dict {{node: [prerequisites]}}, "
                    f"got {type(ords).__name__}"
                )
            for node, prereqs in ords.items():
                if isinstance(prereqs, (set, frozenset)):
                    raise TypeError(
                        f"{feature}.orderings gave a {type(prereqs).__name__} of prerequisites "
                        f"for {node}; use an ordered collection so toposort is deterministic"
                    )
            if ords:
                all_ords.append(ords)
        if len(all_ords) == 1:
            return {k: list(v) for k, v in all_ords[0].items()}
        combined: dict = {}
        for ords in all_ords:
            for node, prereqs in ords.items():
                combined.setdefault(node, []).extend(prereqs)
        return combined
