"""Global optimizers: the ``Optimizer`` base class, ``SeqOptimizer`` and failure handling.

Mirrors ``theano.graph.opt`` (theano-pymc 1.1.2). A global optimizer receives a whole
``FunctionGraph`` and rewrites it through ``fgraph.replace``/``replace_validate``.

What this module adds to Theano's contract:

* every optimizer run inside a ``SeqOptimizer`` (or an ``EquilibriumOptimizer``) runs
  under a checkpoint of the ``ChangeLog`` feature; when it raises, every change it made is
  undone, the failure is reported (its name and the error) and optimization goes on with a
  valid graph. ``config.on_opt_error`` chooses between ``'warn'`` (a warning),
  ``'raise'`` (re-raise after the rollback) and ``'ignore'``;
* each ``apply`` returns a small profile object (time, number of changes, nodes before and
  after) that ``print_profile`` prints.
"""

from __future__ import annotations

import abc
import contextlib
import gc
import inspect
import logging
import sys
import time
import warnings
from collections import UserList

from theano_dag.config import config
from theano_dag.graph.destroyhandler import DestroyHandler
from theano_dag.graph.toolbox import AlreadyThere, BadOptimization, Feature, InputReorder
from theano_dag.graph.utils import tag_trace_paused

__all__ = [
    "GlobalOptimizer",
    "Optimizer",
    "FromFunctionOptimizer",
    "optimizer",
    "inplace_optimizer",
    "SeqOptimizer",
    "ChangeLog",
    "OptimizationWarning",
    "OptimizationAbort",
    "report_failure",
    "opt_name",
    "print_profile",
    "SeqProfile",
    "gc_frozen",
]

_logger = logging.getLogger("theano_dag.opt")


class OptimizationWarning(UserWarning):
    """Warning category of optimizers that failed (and were rolled back) or looped."""


class OptimizationAbort(Exception):
    """Base of errors that must stop optimization whatever ``config.on_opt_error`` says.

    ``DebugMode``'s ``BadOptimization`` is one: a rewrite that computes a wrong value
    must never be silently skipped.
    """


def _always_raise() -> tuple:
    kinds = [OptimizationAbort]
    try:  # BadOptimization lives with the FunctionGraph tools; it must always propagate.
        kinds.append(BadOptimization)
    except ImportError:
        pass
    return tuple(kinds)


def opt_name(opt) -> str:
    """Return the name an optimizer is known by: ``name``, ``__name__``, else its class.

    >>> class Nop(GlobalOptimizer):
    ...     def apply(self, fgraph):
    ...         pass
    >>> opt_name(Nop())
    'Nop'
    """
    for attr in ("name", "__name__"):
        val = getattr(opt, attr, None)
        if isinstance(val, str) and val:
            return val
    if isinstance(opt, type):
        return opt.__name__
    s = type(opt).__str__
    if s is not object.__str__:
        return str(opt)
    return type(opt).__name__


def report_failure(exc: BaseException, optimizer, node=None, policy: str | None = None):
    """Report that ``optimizer`` raised ``exc``; re-raise it if the policy says so.

    ``policy`` defaults to ``config.on_opt_error``: ``'warn'`` issues an
    ``OptimizationWarning`` naming the optimizer (and the node), ``'raise'`` re-raises,
    ``'ignore'`` says nothing. Errors of the ``OptimizationAbort`` family always propagate.
    The caller must already have rolled back the optimizer's changes.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     report_failure(ValueError("boom"), "my_rule", policy="warn")
    >>> print(w[0].message)
    Optimization my_rule failed and was rolled back: ValueError: boom ...
    """
    # A replacement of the wrong type is BadOptimization in Theano's replace, but it is
    # a rewrite's mistake caught before any change (a TypeError too): the policy applies.
    if isinstance(exc, _always_raise()) and not isinstance(exc, TypeError):
        raise exc
    policy = policy or config.on_opt_error
    if policy == "raise":
        raise exc
    name = optimizer if isinstance(optimizer, str) else opt_name(optimizer)
    _logger.debug("Optimization %s failed", name, exc_info=exc)
    if policy == "ignore":
        return
    where = f" on node {node}" if node is not None else ""
    warnings.warn(
        f"Optimization {name} failed{where} and was rolled back: "
        f"{type(exc).__name__}: {exc} (set config.on_opt_error='raise' to get the traceback)",
        OptimizationWarning,
        stacklevel=3,
    )


_gc_frozen_depth = 0


@contextlib.contextmanager
def gc_frozen():
    """Keep the objects alive now out of the garbage collector's passes for a while.

    Optimizing a big graph allocates many objects, so the collector runs often, and each
    full pass walks every object alive: the graph itself included. That makes the time
    of a long optimization grow faster than the graph. ``gc.freeze`` moves the objects
    alive now out of the collector's sight until ``gc.unfreeze``; garbage made meanwhile
    is still collected. Nested uses do nothing.

    >>> with gc_frozen():
    ...     pass
    """
    global _gc_frozen_depth
    # Nothing to do when nested, when the collector is off, or when the program froze
    # objects itself (unfreezing would undo that).
    if _gc_frozen_depth or not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    _gc_frozen_depth += 1
    gc.freeze()
    try:
        yield
    finally:
        _gc_frozen_depth -= 1
        gc.unfreeze()


# ---------------------------------------------------------------------------
# Recording changes so that a failing optimizer can be undone


class ChangeLog(Feature):
    """FunctionGraph feature that counts changes and can undo them back to a checkpoint.

    Unlike ``History`` (one checkpoint, taken by every ``replace_validate``), checkpoints
    here nest: ``SeqOptimizer`` takes one around each optimizer, the navigators one
    around each local rewrite. Changes are logged only while a checkpoint is open.
    ``fgraph.change_log`` gives access to it; attach it with ``ChangeLog.attach(fgraph)``.
    """

    records_changes = True  # FunctionGraph calls it before the other features

    def __init__(self):
        self.log: list = []
        self.depth = 0
        self.replaying = False
        self.n_changes = 0  # change_input events ever seen (for profiles)
        self.n_imports = 0  # nodes ever imported

    @classmethod
    def attach(cls, fgraph) -> ChangeLog:
        """Return the ChangeLog of ``fgraph``, attaching one first if it has none."""
        log = getattr(fgraph, "change_log", None)
        if log is None:
            log = cls()
            fgraph.attach_feature(log)
        return log

    def on_attach(self, fgraph):
        if getattr(fgraph, "change_log", None) is not None:
            raise AlreadyThere("fgraph already has a ChangeLog")
        fgraph.change_log = self

    def on_detach(self, fgraph):
        if getattr(fgraph, "change_log", None) is self:
            del fgraph.change_log

    def on_import(self, fgraph, node, reason=None):
        self.n_imports += 1

    def on_change_input(self, fgraph, node, i, r, new_r, reason=None):
        self.n_changes += 1
        if self.depth and not self.replaying:
            if type(reason) is InputReorder:
                # One entry per reorder, undone as one: undoing its moves one at a time
                # would prune an input whose only use had moved, and import it again.
                if not self.log or self.log[-1][2] is not reason:
                    self.log.append((node, None, reason))
                return
            self.log.append((node, i, r))

    def begin(self) -> int:
        """Open a checkpoint; return its token for ``revert``/``end``."""
        self.depth += 1
        return len(self.log)

    def end(self, token: int):
        """Close the checkpoint ``token``; the log is dropped when none is left open."""
        self.depth -= 1
        if self.depth <= 0:
            self.depth = 0
            self.log.clear()

    def revert(self, fgraph, token: int):
        """Undo every change logged since checkpoint ``token`` (newest first)."""
        log = self.log
        self.replaying = True
        try:
            while len(log) > token:
                node, i, r = log.pop()
                if i is None:
                    fgraph.reorder_inputs(node, r.old_inputs, reason="rollback")
                else:
                    fgraph.change_input(node, i, r, reason="rollback")
        finally:
            self.replaying = False


# ---------------------------------------------------------------------------
# Global optimizers


class GlobalOptimizer(abc.ABC):
    """Rewrites a whole ``FunctionGraph``; subclasses implement ``apply``.

    ``optimize(fgraph)`` is ``add_requirements(fgraph)`` followed by ``apply(fgraph)``.

    >>> from theano_dag.graph.basic import Apply
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> from theano_dag.graph.op import Op
    >>> from theano_dag.graph.type import Generic
    >>> class Twice(Op):
    ...     __props__ = ()
    ...     def make_node(self, x):
    ...         return Apply(self, [x], [Generic()()])
    >>> class RemoveTwice(GlobalOptimizer):
    ...     def apply(self, fgraph):
    ...         for node in fgraph.toposort():
    ...             if isinstance(node.op, Twice):
    ...                 fgraph.replace_validate(node.outputs[0], node.inputs[0])
    >>> x = Generic()("x")
    >>> fg = FunctionGraph([x], [Twice()(Twice()(x))])
    >>> RemoveTwice().optimize(fg)
    >>> fg
    FunctionGraph(x)
    """

    @abc.abstractmethod
    def apply(self, fgraph):
        """Rewrite ``fgraph`` in place; may return a profile object."""
        raise NotImplementedError()

    def optimize(self, fgraph, *args, **kwargs):
        """Attach what this optimizer needs, then apply it; return ``apply``'s profile.

        The nodes it makes get no creation stack of their own (it would only name the
        caller of ``optimize``): each takes the stacks of what it replaces."""
        self.add_requirements(fgraph)
        with tag_trace_paused():
            return self.apply(fgraph, *args, **kwargs)

    def __call__(self, fgraph):
        """Same as ``optimize(fgraph)``."""
        return self.optimize(fgraph)

    def add_requirements(self, fgraph):  # noqa: B027 - optional hook, not abstract
        """Attach the features ``apply`` relies on (``fgraph.attach_feature(...)``)."""

    def print_summary(self, stream=sys.stdout, level=0, depth=-1):
        """Print the optimizer (and, for containers, what it contains)."""
        print(f"{' ' * level}{type(self).__name__} {opt_name(self)} id={id(self)}", file=stream)

    @staticmethod
    def print_profile(stream, prof, level=0):
        """Print the profile ``apply`` returned (nothing for ``None``)."""
        print_profile(prof, stream, level)


Optimizer = GlobalOptimizer


class FromFunctionOptimizer(GlobalOptimizer):
    """A global optimizer made from a function ``fn(fgraph)``; see ``optimizer``."""

    def __init__(self, fn, requirements=()):
        self.fn = fn
        self.requirements = tuple(requirements)
        self.__name__ = getattr(fn, "__name__", "FromFunctionOptimizer")
        # As FromFunctionLocalOptimizer: doctest finds the function's examples.
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__module__ = getattr(fn, "__module__", None)
        self.__wrapped__ = fn

    def apply(self, fgraph, *args, **kwargs):
        return self.fn(fgraph, *args, **kwargs)

    def add_requirements(self, fgraph):
        for req in self.requirements:
            req(fgraph)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __str__(self):
        return self.__name__


def optimizer(f):
    """Decorator: turn ``f(fgraph)`` into a global optimizer.

    >>> @optimizer
    ... def do_nothing(fgraph):
    ...     pass
    >>> type(do_nothing).__name__, str(do_nothing)
    ('FromFunctionOptimizer', 'do_nothing')
    """
    return FromFunctionOptimizer(f)


def _attach_destroy_handler(fgraph):
    fgraph.attach_feature(DestroyHandler())


def inplace_optimizer(f):
    """Like ``optimizer``, but attaches a ``DestroyHandler`` first (for inplace rewrites).

    >>> @inplace_optimizer
    ... def nothing_inplace(fgraph):
    ...     pass
    >>> len(nothing_inplace.requirements)
    1
    """
    return FromFunctionOptimizer(f, (_attach_destroy_handler,))


def _call_failure_callback(callback, exc, *args):
    """Call a failure callback, passing only as many arguments as it takes."""
    try:
        sig = inspect.signature(callback)
        positional = [
            p
            for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        takes_all = any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values())
    except (TypeError, ValueError):
        takes_all, positional = True, []
    if takes_all:
        return callback(exc, *args)
    return callback(exc, *args[: max(len(positional) - 1, 0)])


class SeqProfile:
    """What a ``SeqOptimizer`` run did: one row per optimizer, with sub-profiles."""

    def __init__(self, name, nodes_before):
        self.name = name
        self.nodes_before = nodes_before
        self.nodes_after = nodes_before
        self.rows: list = []  # (name, class name, seconds, changes, before, after, sub, error)

    @property
    def time(self) -> float:
        return sum(r[2] for r in self.rows)

    def write(self, stream=sys.stdout, level=0):
        pad = "    " * level
        print(
            f"{pad}SeqOptimizer {self.name}: {self.time:.4f}s for "
            f"{self.nodes_before}/{self.nodes_after} nodes before/after",
            file=stream,
        )
        print(f"{pad}  time - changes - (name, class, nodes before -> after)", file=stream)
        for name, cls, t, changes, before, after, sub, error in sorted(
            self.rows, key=lambda r: -r[2]
        ):
            status = f"  FAILED: {error}" if error else ""
            print(
                f"{pad}  {t:.6f}s - {changes} - ({name}, {cls}, {before} -> {after}){status}",
                file=stream,
            )
            if sub is not None and hasattr(sub, "write"):
                sub.write(stream, level + 1)


def print_profile(prof, stream=None, level=0):
    """Print a profile returned by an optimizer's ``apply`` (``None`` prints nothing).

    >>> import io
    >>> p = SeqProfile("demo", 3)
    >>> p.rows.append(("merge", "MergeOptimizer", 0.001, 2, 3, 2, None, None))
    >>> out = io.StringIO(); print_profile(p, out); "merge" in out.getvalue()
    True
    """
    if prof is None:
        return
    stream = stream or sys.stdout
    if hasattr(prof, "write"):
        prof.write(stream, level)
    else:
        print(f"{'    ' * level}{prof}", file=stream)


class SeqOptimizer(GlobalOptimizer, UserList):
    """Apply a list of optimizers one after the other.

    Each runs under a checkpoint: if it raises, its changes are undone and
    ``failure_callback(exc, self, optimizer)`` is called; the default follows
    ``config.on_opt_error`` (warn and go on, raise, or ignore).

    >>> seq = SeqOptimizer(optimizer(lambda fg: None), optimizer(lambda fg: None))
    >>> len(seq)
    2
    """

    @staticmethod
    def warn(exc, self, optimizer):
        """Default failure callback: report according to ``config.on_opt_error``."""
        report_failure(exc, optimizer)

    def __init__(self, *opts, failure_callback=None, name=None):
        if len(opts) == 1 and isinstance(opts[0], (list, tuple)):
            opts = opts[0]
        for o in opts:
            if not hasattr(o, "optimize"):
                raise TypeError(
                    f"SeqOptimizer: {o!r} is not an optimizer (it has no optimize method)"
                )
        super().__init__(opts)
        self.failure_callback = failure_callback
        if name is not None:
            self.name = name

    def add_requirements(self, fgraph):
        ChangeLog.attach(fgraph)

    def apply(self, fgraph):
        with gc_frozen():
            return self._apply(fgraph)

    def _apply(self, fgraph):
        log = ChangeLog.attach(fgraph)
        prof = SeqProfile(opt_name(self), len(fgraph.apply_nodes))
        for opt in self.data:
            before = len(fgraph.apply_nodes)
            changes_before = log.n_changes
            token = log.begin()
            t0 = time.perf_counter()
            sub = error = None
            try:
                sub = opt.optimize(fgraph)
            except Exception as exc:
                log.revert(fgraph, token)
                error = f"{type(exc).__name__}: {exc}"
                prof.rows.append(
                    (
                        opt_name(opt),
                        type(opt).__name__,
                        time.perf_counter() - t0,
                        0,
                        before,
                        len(fgraph.apply_nodes),
                        None,
                        error,
                    )
                )
                log.end(token)
                token = None
                if self.failure_callback is not None:
                    _call_failure_callback(self.failure_callback, exc, self, opt)
                else:
                    report_failure(exc, opt)
                continue
            finally:
                if token is not None:
                    log.end(token)
            prof.rows.append(
                (
                    opt_name(opt),
                    type(opt).__name__,
                    time.perf_counter() - t0,
                    log.n_changes - changes_before,
                    before,
                    len(fgraph.apply_nodes),
                    sub,
                    error,
                )
            )
        prof.nodes_after = len(fgraph.apply_nodes)
        return prof

    def __repr__(self):
        return f"SeqOptimizer({', '.join(opt_name(o) for o in self.data)})"

    def __str__(self):
        return getattr(self, "name", None) or "SeqOptimizer"

    def print_summary(self, stream=sys.stdout, level=0, depth=-1):
        super().print_summary(stream, level, depth)
        if depth != 0:
            for opt in self.data:
                if hasattr(opt, "print_summary"):
                    opt.print_summary(stream, level=level + 2, depth=depth - 1)

    __hash__ = object.__hash__
    __eq__ = object.__eq__
