"""Navigators: global optimizers that walk the graph applying local optimizers.

``TopoOptimizer`` makes one pass in topological order (or its reverse);
``OpKeyOptimizer`` visits only the nodes of one op; ``EquilibriumOptimizer`` applies
local and global optimizers until none changes the graph.

Speed: the optimizers to try on a node come from a ``TrackIndex`` (one dict lookup per
node). After its first full pass, ``EquilibriumOptimizer`` only revisits what changed: a
feature records the nodes imported and the nodes whose inputs changed, and the next
round visits those and their clients (``revisit_depth`` levels down), so the work after
the first pass is proportional to the number of changes, not to the size of the graph.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections import deque

from theano_dag.config import config
from theano_dag.graph.basic import io_toposort
from theano_dag.graph.rewriting.basic import (
    ChangeLog,
    GlobalOptimizer,
    OptimizationWarning,
    _call_failure_callback,
    opt_name,
    report_failure,
)
from theano_dag.graph.rewriting.local import (
    LocalOptGroup,
    LocalOptimizer,
    LocalStats,
    TrackIndex,
    as_replacements,
    plain_transforms,
)
from theano_dag.graph.rewriting.merge import MergeOptimizer, use_graph_constants
from theano_dag.graph.rewriting.presence import OpPresence, holds_any, needs_of
from theano_dag.graph.toolbox import Feature, ReplaceValidate
from theano_dag.graph.utils import InconsistencyError

__all__ = [
    "NavigatorOptimizer",
    "TopoOptimizer",
    "in2out",
    "out2in",
    "OpKeyOptimizer",
    "EquilibriumOptimizer",
    "MaxUseRatioExceeded",
    "NavigatorProfile",
    "DEFAULT_MAX_USE_RATIO",
]

# Theano's optdb.max_use_ratio: a rule may apply at most this many times per node.
DEFAULT_MAX_USE_RATIO = 8.0


class MaxUseRatioExceeded(RuntimeError):
    """An EquilibriumOptimizer rule applied too often: it (or a pair of rules) loops."""


def _toposort(fgraph, start_from):
    """``io_toposort(fgraph.inputs, start_from)``, from the graph's cache when it can be:
    passes that change nothing (stabilize, blas on most graphs) leave it valid for the
    next one."""
    if start_from is fgraph.outputs and not fgraph._get_callbacks("orderings"):
        return fgraph.toposort()  # the same order, cached while the graph is unchanged
    return io_toposort(fgraph.inputs, start_from)


def _meets_nothing(fgraph, index) -> bool:
    """Whether no node of ``fgraph`` would be offered a rewrite of ``index`` (a
    ``TrackIndex``), judged from the op classes the graph's ``OpPresence`` counts: a
    pass would then sort the graph and visit nothing. False when the graph has no
    ``OpPresence`` (nothing is known)."""
    presence = getattr(fgraph, "op_presence", None)
    if presence is None or index is None:
        return False
    return not index.can_meet([k for k, n in presence.counts.items() if n > 0])


class Updater(Feature):
    """Calls the navigator back when nodes are imported or their inputs change."""

    def __init__(self, importer=None, chin=None, name=None):
        self.importer = importer
        self.chin = chin
        self.name = name

    def on_import(self, fgraph, node, reason=None):
        if self.importer is not None:
            self.importer(node)

    def on_change_input(self, fgraph, node, i, r, new_r, reason=None):
        if self.chin is not None:
            self.chin(node, i, r, new_r, reason)

    def on_detach(self, fgraph):
        self.importer = self.chin = None

    def __str__(self):
        return f"Updater{{{self.name}}}"


class NavigatorProfile:
    """What a navigator did: time, replacements, node counts and per-rewrite stats."""

    def __init__(self, kind, name, nodes_before):
        self.kind = kind
        self.name = name
        self.nodes_before = nodes_before
        self.nodes_after = nodes_before
        self.max_nodes = nodes_before
        self.changes = 0
        self.rounds = 0
        self.visited = 0
        self.time = 0.0
        self.toposort_time = 0.0
        self.stats = LocalStats()
        self.global_rows: list = []  # (name, seconds, changed)
        self.looped: str | None = None

    def write(self, stream=sys.stdout, level=0):
        pad = "    " * level
        print(f"{pad}{self.kind} {self.name}", file=stream)
        print(
            f"{pad}  time {self.time:.4f}s ({self.toposort_time:.4f}s toposort), "
            f"{self.rounds} round(s), {self.visited} node visits, {self.changes} changes",
            file=stream,
        )
        print(
            f"{pad}  nodes (start, end, max) {self.nodes_before} {self.nodes_after} "
            f"{self.max_nodes}",
            file=stream,
        )
        if self.looped:
            print(f"{pad}  STOPPED: {self.looped}", file=stream)
        self.stats.write(stream, level)
        for name, t, changed in self.global_rows:
            print(f"{pad}  global {name}: {t:.6f}s{' (changed)' if changed else ''}", file=stream)


class NavigatorOptimizer(GlobalOptimizer):
    """Base of the navigators: applies ``local_opt`` to nodes, replacing their outputs.

    ``ignore_newtrees``: True, nodes created by a rewrite are not visited in the same
    pass; 'auto', take it from ``local_opt.reentrant``.

    ``failure_callback(exc, navigator, repl_pairs, local_opt, node)`` is called when a
    rewrite raises or its replacement is rejected (the change is rolled back first).
    The default, None, reports according to ``config.on_opt_error``.
    """

    # Whether a merge follows every change (see ``use_graph_constants``).
    _merges_constants = False

    @staticmethod
    def warn(exc, nav, repl_pairs, local_opt, node):
        """Failure callback: report following ``config.on_opt_error``."""
        report_failure(exc, local_opt, node)

    @staticmethod
    def warn_inplace(exc, nav, repl_pairs, local_opt, node):
        """Failure callback: ignore InconsistencyError (an unsafe inplace), else ``warn``."""
        if isinstance(exc, InconsistencyError):
            return
        report_failure(exc, local_opt, node)

    @staticmethod
    def warn_ignore(exc, nav, repl_pairs, local_opt, node):
        """Failure callback: ignore every error."""

    def __init__(self, local_opt, ignore_newtrees="auto", failure_callback=None):
        if local_opt is not None and not isinstance(local_opt, LocalOptimizer):
            raise TypeError(f"{type(self).__name__}: expected a LocalOptimizer, got {local_opt!r}")
        self.local_opt = local_opt
        if ignore_newtrees == "auto":
            self.ignore_newtrees = not getattr(local_opt, "reentrant", True)
        else:
            self.ignore_newtrees = ignore_newtrees
        self.failure_callback = failure_callback
        self._index = TrackIndex([local_opt]) if local_opt is not None else None

    def add_requirements(self, fgraph):
        if not hasattr(fgraph, "replace_all_validate"):
            fgraph.attach_feature(ReplaceValidate())
        ChangeLog.attach(fgraph)
        if self.local_opt is not None:
            self.local_opt.add_requirements(fgraph)

    def _fail(self, exc, repl_pairs, lopt, node):
        if self.failure_callback is None:
            report_failure(exc, lopt, node)
        else:
            _call_failure_callback(self.failure_callback, exc, self, repl_pairs, lopt, node)

    def process_node(self, fgraph, node, lopt=None):
        """Apply ``lopt`` (default ``self.local_opt``) to ``node``; True if it replaced.

        A rewrite that raises, or whose replacement the graph rejects, is rolled back
        and reported; the graph stays as it was.
        """
        lopt = lopt or self.local_opt
        log = getattr(fgraph, "change_log", None)
        if log is None:
            log = ChangeLog.attach(fgraph)
        # log.begin() written out: this runs for every rewrite tried on every node.
        log.depth += 1
        token = len(log.log)
        try:
            replacements = lopt.transform(fgraph, node)
        except Exception as exc:
            return self._transform_failed(fgraph, node, lopt, exc, log, token)
        return self._transform_done(fgraph, node, lopt, replacements, log, token)

    def _transform_failed(self, fgraph, node, lopt, exc, log, token):
        """``lopt.transform`` raised ``exc``: undo what it changed, report, close the
        checkpoint ``token``; False."""
        try:
            log.revert(fgraph, token)
            self._fail(exc, [(x, None) for x in node.outputs], lopt, node)
        finally:
            log.end(token)
        return False

    def _transform_done(self, fgraph, node, lopt, replacements, log, token):
        """Make the replacements ``lopt.transform`` returned, closing the checkpoint
        ``token`` (opened before the transform); True if the graph changed."""
        if replacements is False or replacements is None:
            # log.end(token) written out: most rewrites tried find nothing to do.
            log.depth -= 1
            if log.depth <= 0:
                log.depth = 0
                log.log.clear()
            return False
        if replacements is True:
            try:
                as_replacements(node, True)  # raises: a local rewrite changed the graph
            except Exception as exc:
                return self._transform_failed(fgraph, node, lopt, exc, log, token)
        try:
            return self._replace(fgraph, node, lopt, replacements, log, token)
        finally:
            log.end(token)

    def _replace(self, fgraph, node, lopt, replacements, log, token):
        """Replace ``node``'s outputs as ``replacements`` (what ``lopt`` returned) says."""
        try:
            repl_pairs, remove = self._pairs(fgraph, node, lopt, replacements)
        except (TypeError, ValueError) as exc:
            self._fail(exc, [], lopt, node)
            return False
        if not repl_pairs:
            return False
        if self._merges_constants:
            use_graph_constants(fgraph, [new for _, new in repl_pairs])
        # A group names the rewrite of it that applied (reports, DebugMode).
        applied = getattr(lopt, "applied_rewrite", None)
        reason = (applied() if applied is not None else None) or lopt
        try:
            if remove:
                fgraph.replace_all_validate_remove(repl_pairs, reason=reason, remove=remove)
            else:
                fgraph.replace_all_validate(repl_pairs, reason=reason)
            return True
        except Exception as exc:
            log.revert(fgraph, token)
            self._fail(exc, repl_pairs, lopt, node)
            return False

    @staticmethod
    def _pairs(fgraph, node, lopt, replacements):
        old_vars = node.outputs
        remove = []
        if isinstance(replacements, dict):
            replacements = dict(replacements)
            remove = replacements.pop("remove", [])
            old_vars = list(replacements)
            replacements = list(replacements.values())
        elif not isinstance(replacements, (list, tuple)):
            raise TypeError(
                f"Local optimizer {opt_name(lopt)} returned {replacements!r}; expected False, "
                "None, a list of replacements or a dict"
            )
        if len(old_vars) != len(replacements):
            raise ValueError(
                f"Local optimizer {opt_name(lopt)} returned {len(replacements)} replacements "
                f"for a node with {len(old_vars)} outputs ({node})"
            )
        for r, new in zip(old_vars, replacements):
            if new is None and fgraph.clients.get(r):
                raise ValueError(
                    f"Local optimizer {opt_name(lopt)} tried to remove {r}, which is still used"
                )
        return [
            (r, new) for r, new in zip(old_vars, replacements) if new is not None and new is not r
        ], remove

    def print_summary(self, stream=sys.stdout, level=0, depth=-1):
        super().print_summary(stream, level, depth)
        if depth != 0 and self.local_opt is not None:
            self.local_opt.print_summary(stream, level=level + 2, depth=depth - 1)


class TopoOptimizer(NavigatorOptimizer):
    """Apply one local optimizer to each node once, in topological order or its reverse.

    ``order`` is ``'in_to_out'`` (inputs first) or ``'out_to_in'``. Nodes the rewrite
    creates are visited too unless ``ignore_newtrees``.
    """

    def __init__(self, local_opt, order="in_to_out", ignore_newtrees=False, failure_callback=None):
        if order not in ("out_to_in", "in_to_out"):
            raise ValueError(
                f"TopoOptimizer: order must be 'out_to_in' or 'in_to_out', " f"got {order!r}"
            )
        self.order = order
        super().__init__(local_opt, ignore_newtrees, failure_callback)

    def apply(self, fgraph, start_from=None):
        if start_from is None:
            start_from = fgraph.outputs
        prof = NavigatorProfile("TopoOptimizer", opt_name(self), len(fgraph.apply_nodes))
        t0 = time.perf_counter()
        if _meets_nothing(fgraph, self._index):
            prof.time = time.perf_counter() - t0
            return prof
        q = deque(_toposort(fgraph, start_from))
        prof.toposort_time = time.perf_counter() - t0
        current = [None]

        def importer(node):
            if node is not current[0]:
                q.append(node)

        updater = None
        if not self.ignore_newtrees:
            updater = Updater(importer, name=opt_name(self))
            fgraph.attach_feature(updater)
        lookup = self._index.lookup
        lopt = self.local_opt
        stats = prof.stats
        apply_nodes = fgraph.apply_nodes
        pop = q.popleft if self.order == "in_to_out" else q.pop
        perf_counter = time.perf_counter
        # process_node written out up to the transform, for a rewrite that finds nothing
        # to do (most nodes), unless a subclass has its own.
        inline = type(self).process_node is NavigatorOptimizer.process_node
        log = ChangeLog.attach(fgraph)
        log_list = log.log
        # As EquilibriumOptimizer's loop: one checkpoint for the pass when none is open,
        # opened per node only for a replacement or a rollback.
        own_checkpoint = log.depth <= 0
        if own_checkpoint:
            pass_token = log.begin()
        tracked: dict = {}  # id(op) -> (op, whether the rewrite tracks it)
        n_tried = 0
        spent = 0.0
        try:
            while q:
                node = pop()
                if node not in apply_nodes:
                    continue
                op = node.op
                seen = tracked.get(id(op))
                if seen is None or seen[0] is not op:
                    seen = tracked[id(op)] = (op, bool(lookup(op)))
                if not seen[1]:
                    continue
                current[0] = node
                prof.visited += 1
                t1 = perf_counter()
                if not inline:
                    changed = self.process_node(fgraph, node, lopt)
                else:
                    token = len(log_list)
                    try:
                        replacements = lopt.transform(fgraph, node)
                    except Exception as exc:
                        log.depth += 1
                        changed = self._transform_failed(fgraph, node, lopt, exc, log, token)
                    else:
                        if replacements is False or replacements is None:
                            changed = False
                        else:
                            log.depth += 1
                            changed = self._transform_done(
                                fgraph, node, lopt, replacements, log, token
                            )
                spent += perf_counter() - t1
                n_tried += 1
                if changed:
                    stats.applied[lopt] += 1
                    prof.changes += 1
        finally:
            if n_tried:
                stats.time[lopt] += spent
                stats.tried[lopt] += n_tried
            if own_checkpoint:
                log.end(pass_token)
            if updater is not None:
                fgraph.remove_feature(updater)
        prof.rounds = 1
        prof.time = time.perf_counter() - t0
        prof.nodes_after = prof.max_nodes = len(fgraph.apply_nodes)
        return prof

    def __str__(self):
        return getattr(self, "__name__", None) or f"TopoOptimizer({opt_name(self.local_opt)})"


def _navigator_helper(order, local_opts, name, kwargs):
    if not local_opts:
        raise TypeError(f"{order}: give at least one local optimizer")
    if len(local_opts) > 1:
        lopt = LocalOptGroup(*local_opts)
    else:
        (lopt,) = local_opts
        name = name or opt_name(lopt)
    kwargs.setdefault("failure_callback", TopoOptimizer.warn_inplace)
    ret = TopoOptimizer(lopt, order="out_to_in" if order == "out2in" else "in_to_out", **kwargs)
    if name:
        ret.__name__ = name
    return ret


def out2in(*local_opts, name=None, **kwargs):
    """A TopoOptimizer applying ``local_opts`` from the outputs towards the inputs."""
    return _navigator_helper("out2in", local_opts, name, kwargs)


def in2out(*local_opts, name=None, **kwargs):
    """A TopoOptimizer applying ``local_opts`` from the inputs towards the outputs."""
    return _navigator_helper("in2out", local_opts, name, kwargs)


class OpKeyOptimizer(NavigatorOptimizer):
    """Apply a local optimizer to the nodes whose op equals ``local_opt.op_key()``."""

    def __init__(self, local_opt, ignore_newtrees=False, failure_callback=None):
        if not hasattr(local_opt, "op_key"):
            raise TypeError("OpKeyOptimizer: the local optimizer must have an op_key method")
        super().__init__(local_opt, ignore_newtrees, failure_callback)

    def apply(self, fgraph):
        key = self.local_opt.op_key()
        keys = list(key) if isinstance(key, (list, tuple)) else [key]
        prof = NavigatorProfile("OpKeyOptimizer", opt_name(self), len(fgraph.apply_nodes))
        t0 = time.perf_counter()
        q = [n for n in io_toposort(fgraph.inputs, fgraph.outputs) if n.op in keys]
        current = [None]

        def importer(node):
            if node is not current[0] and node.op in keys:
                q.append(node)

        updater = None
        if not self.ignore_newtrees:
            updater = Updater(importer, name=opt_name(self))
            fgraph.attach_feature(updater)
        try:
            while q:
                node = q.pop()
                if node not in fgraph.apply_nodes:
                    continue
                current[0] = node
                prof.visited += 1
                prof.changes += self.process_node(fgraph, node)
        finally:
            if updater is not None:
                fgraph.remove_feature(updater)
        prof.time = time.perf_counter() - t0
        prof.nodes_after = len(fgraph.apply_nodes)
        return prof


class _DirtyTracker(Feature):
    """Records the nodes an EquilibriumOptimizer must look at again, each with the
    ``clock`` (the number of the node visit under way) at its latest change."""

    def __init__(self, run):
        self.run = run
        self.imported: dict = {}
        self.changed: dict = {}
        self.n_imported = 0

    def on_import(self, fgraph, node, reason=None):
        self.n_imported += 1
        self.imported[node] = self.run.clock

    def on_change_input(self, fgraph, node, i, r, new_r, reason=None):
        if type(node) is not str:  # not the "output" marker (and no Op.__ne__ call)
            self.changed[node] = self.run.clock

    def any(self) -> bool:
        return bool(self.imported or self.changed)

    def take(self):
        imported, changed = self.imported, self.changed
        self.imported, self.changed = {}, {}
        return imported, changed


class _Run:
    """The state of one EquilibriumOptimizer.apply."""

    def __init__(self, fgraph, prof):
        self.fgraph = fgraph
        self.prof = prof
        self.tracker = _DirtyTracker(self)
        # Node visits are numbered (clock); last_visit[node] is the number of its latest
        # one. A change at clock t is stale for a node whose latest visit is not after t.
        self.clock = 0
        self.last_visit: dict = {}
        self.counts: dict = {}
        self.max_nodes = max(len(fgraph.apply_nodes), 1)
        self.looped: str | None = None
        # Changes made and kept (a rolled-back one is not counted).
        self.version = 0
        # (node, rewrite) -> ``version`` when the graph refused its replacement. While the
        # version is unchanged the graph is the one the rewrite was refused on, so trying
        # it again would only be refused again (and each rollback would revisit the node).
        self.refused: dict = {}

    def see_size(self):
        self.max_nodes = max(self.max_nodes, len(self.fgraph.apply_nodes))


class EquilibriumOptimizer(NavigatorOptimizer):
    """Apply local and global optimizers until none of them changes the graph.

    Each rule may apply at most ``max_use_ratio`` times the (largest) number of nodes; a
    rule that exceeds it loops, and optimization stops, reporting the rule by name
    (``config.on_opt_error='raise'`` makes this a ``MaxUseRatioExceeded`` error).

    ``final_optimizers`` run after each round; ``cleanup_optimizers`` (merge, typically)
    run after every change. ``revisit_depth`` says how many levels of clients of a
    changed node are visited again in the next round.
    """

    def __init__(
        self,
        optimizers,
        failure_callback=None,
        ignore_newtrees=True,
        tracks_on_change_inputs=False,
        max_use_ratio=None,
        final_optimizers=None,
        cleanup_optimizers=None,
        revisit_depth=2,
        name=None,
    ):
        super().__init__(None, ignore_newtrees=ignore_newtrees, failure_callback=failure_callback)
        self.local_optimizers = []
        self.global_optimizers = []
        for o in optimizers:
            if isinstance(o, LocalOptimizer):
                self.local_optimizers.append(o)
            elif hasattr(o, "apply"):
                self.global_optimizers.append(o)
            else:
                raise TypeError(f"EquilibriumOptimizer: {o!r} is not an optimizer")
        self.final_optimizers = list(final_optimizers or [])
        self.cleanup_optimizers = list(cleanup_optimizers or [])
        self.tracks_on_change_inputs = tracks_on_change_inputs
        if max_use_ratio is None:
            max_use_ratio = getattr(config, "optdb__max_use_ratio", DEFAULT_MAX_USE_RATIO)
        if not max_use_ratio or max_use_ratio <= 0:
            raise ValueError(
                f"EquilibriumOptimizer: max_use_ratio must be > 0, got " f"{max_use_ratio!r}"
            )
        self.max_use_ratio = max_use_ratio
        self.revisit_depth = revisit_depth
        self._merges_constants = any(isinstance(o, MergeOptimizer) for o in self.cleanup_optimizers)
        self._index = TrackIndex(self.local_optimizers)
        # Rewrites that can only apply where the graph holds some kind of op: not tried
        # while it holds none (``presence``).
        self._needs = {}
        for o in self.local_optimizers:
            needs = needs_of(o)
            if needs:
                self._needs[o] = needs
        self._inactive_memo: dict = {}  # classes present -> rewrites that cannot apply
        if name is not None:
            self.name = name

    def get_local_optimizers(self):
        return list(self.local_optimizers)

    def add_requirements(self, fgraph):
        super().add_requirements(fgraph)
        if self._needs and not hasattr(fgraph, "op_presence"):
            fgraph.attach_feature(OpPresence())
        for o in self.local_optimizers:
            o.add_requirements(fgraph)
        for o in self.global_optimizers + self.final_optimizers + self.cleanup_optimizers:
            o.add_requirements(fgraph)

    def _run_global(self, fgraph, gopt, prof):
        """Run a global optimizer under a checkpoint; return whether it changed the graph."""
        log = ChangeLog.attach(fgraph)
        before = log.n_changes + log.n_imports
        token = log.begin()
        t0 = time.perf_counter()
        failed = False
        try:
            gopt.apply(fgraph)
        except Exception as exc:
            failed = True
            log.revert(fgraph, token)
            self._fail(exc, [], gopt, None)
        finally:
            log.end(token)
        dt = time.perf_counter() - t0
        changed = not failed and log.n_changes + log.n_imports != before
        prof.stats.time[gopt] += dt
        prof.stats.tried[gopt] += 1
        if changed:
            prof.stats.applied[gopt] += 1
        return changed

    def _expand(self, run, imported, changed):
        """Nodes to visit next round: new and changed nodes and their clients
        (``revisit_depth`` levels), those of them not visited since the change.

        A node visited after a change saw it: in the first round, which goes inputs
        first, that is most of the nodes a rewrite upstream touched.
        """
        apply_nodes = run.fgraph.apply_nodes
        clients = run.fgraph.clients
        last_visit = run.last_visit
        when: dict = {}  # changed node -> clock of its latest change
        for marks in (imported, changed):
            for n, t in marks.items():
                if n in apply_nodes and t > when.get(n, -1):
                    when[n] = t
        todo = {n: None for n, t in when.items() if last_visit.get(n, -1) <= t}
        frontier = when
        for _ in range(self.revisit_depth):
            nxt: dict = {}
            for node, t in frontier.items():
                for out in node.outputs:
                    for client, _i in clients.get(out, ()):
                        if type(client) is str or t <= nxt.get(client, -1):
                            continue
                        nxt[client] = t
                        if client not in todo and last_visit.get(client, -1) <= t:
                            todo[client] = None
            frontier = nxt
        return list(todo)

    def apply(self, fgraph, start_from=None):
        if start_from is None:
            start_from = fgraph.outputs
        run = _Run(
            fgraph,
            NavigatorProfile("EquilibriumOptimizer", opt_name(self), len(fgraph.apply_nodes)),
        )
        prof = run.prof
        t_start = time.perf_counter()
        if self._cannot_apply(fgraph):
            prof.time = time.perf_counter() - t_start
            return prof
        fgraph.attach_feature(run.tracker)
        try:
            while run.looped is None:
                prof.rounds += 1
                changed = self._run_globals(run, self.global_optimizers)
                changed |= self._cleanup(run)
                if prof.rounds == 1:
                    t0 = time.perf_counter()
                    # Inputs first: a node is then rewritten after its inputs took their
                    # final form, and commutative ops sort their arguments once instead of
                    # again in later rounds (function() on dag-1000 and dag-5000: -20%).
                    stack = _toposort(fgraph, start_from)[::-1]
                    prof.toposort_time += time.perf_counter() - t0
                    run.tracker.take()
                else:
                    stack = self._expand(run, *run.tracker.take())
                    stack.reverse()  # popped from the end: keep insertion order
                run.see_size()
                changed |= self._local_pass(run, stack)
                changed |= self._run_globals(run, self.final_optimizers)
                changed |= self._cleanup(run)
                run.see_size()
                if not changed and not run.tracker.any():
                    break
        finally:
            fgraph.remove_feature(run.tracker)
            self._release(fgraph)
        prof.time = time.perf_counter() - t_start
        prof.nodes_after = len(fgraph.apply_nodes)
        prof.max_nodes = run.max_nodes
        if run.looped is not None:
            prof.looped = run.looped
            self._report_loop(run.looped)
        return prof

    def _release(self, fgraph):
        """The pass is over: its global optimizers with a ``release(fgraph)`` drop what
        they kept up to date for it alone (the features whose callbacks would otherwise
        run at every change of the later passes); ``add_requirements`` brings it back
        when they run again."""
        for opt in self.global_optimizers + self.final_optimizers + self.cleanup_optimizers:
            release = getattr(opt, "release", None)
            if release is not None:
                release(fgraph)

    def _run_globals(self, run, opts):
        changed = False
        for gopt in opts:
            if self._run_global(run.fgraph, gopt, run.prof):
                changed = True
                run.version += 1
                run.looped = run.looped or self._count(gopt, run)
        return changed

    def _local_pass(self, run, stack):
        """Visit the nodes of ``stack`` (popped from the end); return whether any changed."""
        fgraph, prof, tracker = run.fgraph, run.prof, run.tracker
        stats = prof.stats
        apply_nodes = fgraph.apply_nodes
        lookup = self._index.lookup
        current = [None]
        updater = None
        # Nodes made during the pass are visited in it unless ignore_newtrees.
        if not self.ignore_newtrees or self.tracks_on_change_inputs:

            def importer(node):
                if node is not current[0] and not self.ignore_newtrees:
                    stack.append(node)

            def chin(node, i, r, new_r, reason):
                if (
                    self.tracks_on_change_inputs
                    and node is not current[0]
                    and type(node) is not str  # not "output"
                ):
                    stack.append(node)

            updater = Updater(importer, chin, name=opt_name(self))
            fgraph.attach_feature(updater)
        changed = False
        perf_counter = time.perf_counter
        transform_done = self._transform_done
        transform_failed = self._transform_failed
        process_node = None
        if type(self).process_node is not NavigatorOptimizer.process_node:
            process_node = self.process_node
        log = ChangeLog.attach(fgraph)
        log_list = log.log
        # A checkpoint held for the whole pass when none is open (a navigator run on
        # its own): the changes a rewrite makes are then logged without opening one per
        # rewrite tried (a SeqOptimizer holds one around every pass anyway).
        own_checkpoint = log.depth <= 0
        if own_checkpoint:
            pass_token = log.begin()
        # lopt -> [seconds, tries] of this pass, added to ``stats`` at its end: a list
        # item is updated faster than a dict entry, once per rewrite tried.
        counters: dict = {}
        direct = plain_transforms(self.local_optimizers)
        # id(op) -> (op, ((rewrite, its plain function or None, its fit), ...)): the rewrites to
        # try on the nodes of an op, looked up once per op instance in the pass.
        plans: dict = {}
        last_visit = run.last_visit
        presence = getattr(fgraph, "op_presence", None) if self._needs else None
        gen, inactive = self._inactive(presence)
        refused = run.refused
        try:
            while stack and run.looped is None:
                node = stack.pop()
                if node not in apply_nodes:
                    continue
                op = node.op
                plan = plans.get(id(op))
                if plan is None or plan[0] is not op:
                    found = tuple(
                        (o, *direct.get(o, (None, None)), counters.setdefault(o, [0.0, 0]))
                        for o in lookup(op)
                    )
                    plan = plans[id(op)] = (op, found)
                if not plan[1]:
                    continue
                current[0] = node
                prof.visited += 1
                run.clock += 1
                last_visit[node] = run.clock
                # Each try is timed from the end of the previous one (one clock read per
                # rewrite tried).
                t1 = perf_counter()
                for lopt, fn, fit, counter in plan[1]:
                    # A rewrite needing an op the graph does not hold would return
                    # nothing; a change since the last look may have added one.
                    if lopt in inactive:
                        if presence.generation == gen:
                            continue
                        gen, inactive = self._inactive(presence)
                        if lopt in inactive:
                            continue
                    if refused and refused.get((node, lopt)) == run.version:
                        continue
                    n_imp = tracker.n_imported
                    seen = log.n_changes  # a rollback changes inputs back
                    if process_node is not None:  # a subclass's own
                        ok = process_node(fgraph, node, lopt)
                    else:
                        # process_node(fgraph, node, lopt) written out up to the transform,
                        # and for a rewrite that finds nothing to do (most of them); the
                        # checkpoint it would open is opened only for the replacement or
                        # the rollback (whose ``end`` closes it).
                        token = len(log_list)
                        try:
                            if fn is None:
                                replacements = lopt.transform(fgraph, node)
                            else:
                                replacements = fn(fgraph, node)
                                if replacements is not None and replacements is not False:
                                    replacements = as_replacements(node, replacements, fit)
                        except Exception as exc:
                            log.depth += 1
                            ok = transform_failed(fgraph, node, lopt, exc, log, token)
                        else:
                            if replacements is False or replacements is None:
                                ok = False
                            else:
                                log.depth += 1
                                ok = transform_done(fgraph, node, lopt, replacements, log, token)
                    t2 = perf_counter()
                    counter[0] += t2 - t1
                    counter[1] += 1
                    t1 = t2
                    if not ok:
                        if log.n_changes != seen:
                            # It changed the graph and failed (raised, or its replacement
                            # was refused): rolled back, but the rollback is a change the
                            # next round revisits. Counted as a use, so max_use_ratio ends
                            # a rule that always does it.
                            refused[(node, lopt)] = run.version
                            run.looped = self._count(lopt, run)
                            if run.looped:
                                break
                        continue
                    changed = True
                    run.version += 1
                    prof.changes += 1
                    stats.applied[lopt] += 1
                    stats.created[lopt] += tracker.n_imported - n_imp
                    run.looped = self._count(lopt, run)
                    self._cleanup(run)
                    if run.looped or node not in apply_nodes:
                        break
                    t1 = perf_counter()  # the cleanup is timed as itself
        finally:
            if own_checkpoint:
                log.end(pass_token)
            if updater is not None:
                fgraph.remove_feature(updater)
            for lopt, (seconds, tries) in counters.items():
                if tries:
                    stats.time[lopt] += seconds
                    stats.tried[lopt] += tries
        return changed

    def _cannot_apply(self, fgraph) -> bool:
        """Whether no rewrite here can apply (and no global optimizer runs): none
        tracks an op the graph holds, or every one needs an op it does not hold. A pass
        would visit every node and change nothing."""
        if self.global_optimizers or self.final_optimizers or self.cleanup_optimizers:
            return False
        if self.local_optimizers and _meets_nothing(fgraph, self._index):
            return True  # no node's op is one a rewrite here tracks
        if not self.local_optimizers or len(self._needs) != len(self.local_optimizers):
            return False
        presence = getattr(fgraph, "op_presence", None)
        if presence is None:
            return False
        return len(self._inactive(presence)[1]) == len(self._needs)

    def _inactive(self, presence):
        """``(generation, rewrites that cannot apply)`` as the graph stands now."""
        if presence is None:
            return -1, frozenset()
        present = presence.present()
        # Remembered per set of classes present: a pass asks at its start and after each
        # change that brought a class in, and graphs of one kind hold the same classes.
        memo = self._inactive_memo
        inactive = memo.get(present)
        if inactive is None:
            inactive = frozenset(
                o for o, needs in self._needs.items() if not holds_any(present, needs)
            )
            if len(memo) >= 256:
                memo.clear()
            memo[present] = inactive
        return presence.generation, inactive

    def _cleanup(self, run):
        changed = False
        for copt in self.cleanup_optimizers:
            # Cleanups run after every change: skip a merge that has nothing to merge.
            if type(copt) is MergeOptimizer and not copt.has_work(run.fgraph):
                continue
            if self._run_global(run.fgraph, copt, run.prof):
                changed = True
                run.version += 1
        return changed

    def _count(self, opt, run):
        """Count one application of ``opt``; return a message if it exceeds the limit."""
        counts, max_nodes = run.counts, run.max_nodes
        n = counts.get(opt, 0) + 1
        counts[opt] = n
        limit = max_nodes * self.max_use_ratio
        if n <= limit:
            return None
        others = sorted((c, opt_name(o)) for o, c in counts.items() if o is not opt)[-3:]
        also = ", ".join(f"'{name}' {c} times" for c, name in reversed(others))
        return (
            f"EquilibriumOptimizer {opt_name(self)} stopped: rule '{opt_name(opt)}' was applied "
            f"{n} times, more than max_use_ratio ({self.max_use_ratio:g}) x {max_nodes} nodes; "
            f"it probably loops{' (other rules: ' + also + ')' if also else ''}. Raise "
            "max_use_ratio if the graph really needs that many rewrites."
        )

    def _report_loop(self, msg):
        policy = config.on_opt_error
        if policy == "raise":
            raise MaxUseRatioExceeded(msg)
        if policy == "warn":
            warnings.warn(msg, OptimizationWarning, stacklevel=3)

    def print_summary(self, stream=sys.stdout, level=0, depth=-1):
        GlobalOptimizer.print_summary(self, stream, level, depth)
        if depth != 0:
            for o in self.local_optimizers + self.global_optimizers:
                o.print_summary(stream, level=level + 2, depth=depth - 1)

    def __str__(self):
        return getattr(self, "name", None) or "EquilibriumOptimizer"
