"""Features: listeners that extend a FunctionGraph (``theano.graph.toolbox``).

A Feature gets callbacks (``on_attach``, ``on_import``, ``on_prune``,
``on_change_input``, ...) and may add methods to the graph, record history,
or veto a change by raising from ``validate``.
"""

from __future__ import annotations

import warnings
from functools import partial
from time import perf_counter

from theano_dag.graph.basic import io_toposort, is_same_graph
from theano_dag.graph.utils import InconsistencyError

__all__ = [
    "AlreadyThere",
    "ReplacementDidNotRemoveError",
    "BadOptimization",
    "Feature",
    "Bookkeeper",
    "History",
    "Validator",
    "ReplaceValidate",
    "NodeFinder",
    "PrintListener",
    "PreserveNames",
    "PreserveVariableAttributes",
    "NoOutputFromInplace",
    "Supervisor",
    "is_same_graph",
]


class InputReorder:
    """The reason given to features for a change made by ``FunctionGraph.reorder_inputs``.

    A moved input is not a replacement of equal value: the node's result is unchanged
    because its op ignores the order. ``old_inputs`` is the order before, ``reason`` the
    caller's reason.
    """

    __slots__ = ("reason", "old_inputs")

    def __init__(self, reason, old_inputs):
        self.reason = reason
        self.old_inputs = old_inputs

    def __str__(self):
        return str(self.reason)


class AlreadyThere(Exception):
    """Raised by ``on_attach`` when an equivalent feature is already attached."""


class ReplacementDidNotRemoveError(Exception):
    """A replacement was meant to remove a node or variable, but it is still in the graph."""


class BadOptimization(Exception):
    """A variable and its replacement took different values at run time.

    ``old_r``/``new_r`` are the variables, ``old_r_val``/``new_r_val`` their values,
    ``reason`` the rewrite that made the replacement. A lone string argument is
    used as the whole message.

    >>> import numpy as np
    >>> e = BadOptimization("x", "y", np.array([1.0, 2.0]), np.array([1.0, 2.5]), reason="opt")
    >>> "Max Abs Diff:  0.5" in str(e), e.reason
    (True, 'opt')
    """

    def __init__(
        self,
        old_r,
        new_r=None,
        old_r_val=None,
        new_r_val=None,
        reason=None,
        old_graph=None,
        new_graph=None,
    ):
        super().__init__()
        self.old_r = old_r
        self.new_r = new_r
        self.old_r_val = old_r_val
        self.new_r_val = new_r_val
        self.reason = reason
        self.old_graph = old_graph
        self.new_graph = new_graph
        only_message = isinstance(old_r, str) and all(
            a is None for a in (new_r, old_r_val, new_r_val, reason, old_graph, new_graph)
        )
        self.full_err = old_r if only_message else None

    def __str__(self):
        return self.str_diagnostic()

    def str_diagnostic(self):
        """Return a multi-line description: the variables, both values and their difference."""
        if self.full_err is not None:
            return self.full_err
        limit = 800
        lines = [
            "BadOptimization Error",
            f"  Variable: id {id(self.new_r)} {self.new_r}",
            f"  Op {getattr(self.new_r, 'owner', None)}",
            f"  Value Type: {type(self.new_r_val).__name__}",
        ]
        for which, val in (("Old", self.old_r_val), ("New", self.new_r_val)):
            if hasattr(val, "shape") and hasattr(val, "dtype"):
                lines.append(f"  {which} Value shape, dtype: {val.shape} {val.dtype}")
            s = str(val)
            lines.append(f"  {which} Value:  {s[:limit]}{' ...' if len(s) > limit else ''}")
        lines.extend(_value_difference(self.old_r_val, self.new_r_val))
        lines.append(f"  Reason:  {self.reason}")
        lines.append("  Old Graph:")
        lines.append(str(self.old_graph if self.old_graph is not None else ""))
        lines.append("  New Graph:")
        lines.append(str(self.new_graph if self.new_graph is not None else ""))
        return "\n".join(lines)


def _value_difference(old, new):
    """Summary lines of ``|new - old|`` when both are numeric arrays of one shape."""
    import numpy as np

    try:
        ov = np.asarray(old, dtype=float)
        nv = np.asarray(new, dtype=float)
        if ov.shape != nv.shape or ov.size == 0:
            return []
    except (TypeError, ValueError):
        return []
    abs_diff = np.abs(nv - ov)
    # The floor avoids a division by zero where both values are 0.
    rel_diff = abs_diff / np.maximum(np.abs(nv) + np.abs(ov), 1e-8)
    k = int(np.argmax(abs_diff))
    return [
        f"  Max Abs Diff:  {abs_diff.max()}",
        f"  Mean Abs Diff:  {abs_diff.mean()}",
        f"  Value at Max Diff:  {(nv.flat[k].item(), ov.flat[k].item())}",
        f"  Max Rel Diff:  {rel_diff.max()}",
        f"  Mean Rel Diff:  {rel_diff.mean()}",
    ]


class Feature:
    """Base class of FunctionGraph extensions; every callback here does nothing.

    >>> from theano_dag.graph.type import Generic
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> from theano_dag.graph.op import Op
    >>> from theano_dag.graph.basic import Apply
    >>> class F(Op):
    ...     def make_node(self, x):
    ...         return Apply(self, [x], [Generic()()])
    >>> class Counter(Feature):
    ...     def __init__(self):
    ...         self.imports = 0
    ...     def on_import(self, fgraph, node, reason):
    ...         self.imports += 1
    >>> x = Generic()("x")
    >>> counter = Counter()
    >>> fg = FunctionGraph([x], [F()(F()(x))], features=[counter])
    >>> counter.imports
    2
    """

    def on_attach(self, fgraph):
        """Called by ``attach_feature``; may raise AlreadyThere to cancel the attach."""

    def on_detach(self, fgraph):
        """Called by ``remove_feature``; undo what ``on_attach`` installed."""

    def on_import(self, fgraph, node, reason):
        """Called when ``node`` enters the graph."""

    def on_change_input(self, fgraph, node, i, var, new_var, reason=None):
        """Called after ``node.inputs[i]`` changed from ``var`` to ``new_var``."""

    def on_prune(self, fgraph, node, reason):
        """Called after ``node`` left the graph."""

    def orderings(self, fgraph):
        """Return ``{node: [nodes that must run before it]}``."""
        return {}

    def clone(self):
        """Return a feature to attach to a copy of the graph (``self`` when stateless)."""
        return self


class Bookkeeper(Feature):
    """A Feature that sees every node already in the graph as imported on attach
    and as pruned on detach."""

    def on_attach(self, fgraph):
        for node in io_toposort(fgraph.inputs, fgraph.outputs):
            self.on_import(fgraph, node, "on_attach")

    def on_detach(self, fgraph):
        for node in io_toposort(fgraph.inputs, fgraph.outputs):
            self.on_prune(fgraph, node, "Bookkeeper.detach")


class GetCheckpoint:
    """``fgraph.checkpoint()``: forget the recorded history and return a checkpoint number."""

    def __init__(self, history, fgraph):
        self.h = history
        self.fgraph = fgraph
        self.nb = 0

    def __call__(self):
        self.h.history[self.fgraph] = []
        self.nb += 1
        return self.nb


class LambdExtract:
    """One recorded change; calling it undoes the change."""

    def __init__(self, fgraph, node, i, r, reason=None):
        self.fgraph = fgraph
        self.node = node
        self.i = i
        self.r = r
        self.reason = reason

    def __call__(self):
        return self.fgraph.change_input(self.node, self.i, self.r, reason=("Revert", self.reason))


class History(Feature):
    """Record changes so they can be undone back to the last checkpoint.

    Installs ``fgraph.checkpoint()`` and ``fgraph.revert(checkpoint)`` (every
    FunctionGraph has them through its ReplaceValidate).

    >>> from theano_dag.graph.type import Generic
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> from theano_dag.graph.op import Op
    >>> from theano_dag.graph.basic import Apply
    >>> class F(Op):
    ...     __props__ = ()
    ...     def make_node(self, x):
    ...         return Apply(self, [x], [Generic()()])
    >>> x, y = Generic()("x"), Generic()("y")
    >>> fg = FunctionGraph([x, y], [F()(x)], clone=False)
    >>> chk = fg.checkpoint()
    >>> fg.replace(x, y)
    >>> fg
    FunctionGraph(F(y))
    >>> fg.revert(chk)
    >>> fg
    FunctionGraph(F(x))
    """

    pickle_rm_attr = ["checkpoint", "revert"]
    records_changes = True  # FunctionGraph calls it before the other features

    def __init__(self):
        self.history = {}

    def clone(self):
        return type(self)()

    def on_attach(self, fgraph):
        if hasattr(fgraph, "checkpoint") or hasattr(fgraph, "revert"):
            raise AlreadyThere("History feature is already present or in conflict with another")
        self.history[fgraph] = []
        fgraph.checkpoint = GetCheckpoint(self, fgraph)
        fgraph.revert = partial(self.revert, fgraph)

    def unpickle(self, fgraph):
        if not hasattr(self, "history"):
            self.history = {}
        self.history[fgraph] = []
        fgraph.checkpoint = GetCheckpoint(self, fgraph)
        fgraph.revert = partial(self.revert, fgraph)

    def on_detach(self, fgraph):
        del fgraph.checkpoint
        del fgraph.revert
        del self.history[fgraph]

    def on_change_input(self, fgraph, node, i, r, new_r, reason=None):
        h = self.history[fgraph]
        if h is not None:
            # A tuple, made into a LambdExtract only when undone: most changes never are.
            h.append((node, i, r, reason))

    def revert(self, fgraph, checkpoint):
        """Undo every change made since ``checkpoint`` (the latest one), newest first."""
        if fgraph.checkpoint.nb != checkpoint:
            raise ValueError(
                f"Can only revert to the latest checkpoint ({fgraph.checkpoint.nb}), "
                f"got {checkpoint}"
            )
        h = self.history[fgraph]
        self.history[fgraph] = None  # the undo steps must not be recorded themselves
        try:
            while h:
                step = h.pop()
                if type(step) is tuple:
                    step = LambdExtract(fgraph, *step)
                step()
        finally:
            self.history[fgraph] = h

    def __getstate__(self):
        d = dict(self.__dict__)
        d.pop("history", None)  # keyed by graphs and full of closures; restored empty
        return d


class Validator(Feature):
    """Installs ``fgraph.validate()`` (run every feature's ``validate``) and
    ``fgraph.consistent()`` (the same, as a bool)."""

    pickle_rm_attr = ["validate", "consistent"]

    def on_attach(self, fgraph):
        for attr in ("validate", "validate_time"):
            if hasattr(fgraph, attr):
                raise AlreadyThere("Validator feature is already present or in conflict")
        fgraph.validate = partial(self.validate_, fgraph)
        fgraph.consistent = partial(self.consistent_, fgraph)

    def unpickle(self, fgraph):
        fgraph.validate = partial(self.validate_, fgraph)
        fgraph.consistent = partial(self.consistent_, fgraph)

    def on_detach(self, fgraph):
        del fgraph.validate
        del fgraph.consistent

    def validate_(self, fgraph):
        """Call ``validate(fgraph)`` on every feature; they raise to say the graph is bad."""
        t0 = perf_counter()
        fgraph.execute_callbacks("validate")
        if fgraph.profile is not None and hasattr(fgraph.profile, "validate_time"):
            fgraph.profile.validate_time += perf_counter() - t0
        return True

    def consistent_(self, fgraph):
        try:
            fgraph.validate()
            return True
        except Exception:
            return False


class ReplaceValidate(History, Validator):
    """Replace, then validate; on any failure undo the replacement and re-raise.

    Every FunctionGraph has one. It installs ``replace_validate(r, new_r)``,
    ``replace_all_validate(pairs)`` and ``replace_all_validate_remove(pairs, remove)``.

    >>> from theano_dag.graph.type import Generic
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> from theano_dag.graph.op import Op
    >>> from theano_dag.graph.basic import Apply
    >>> class F(Op):
    ...     __props__ = ()
    ...     def make_node(self, x):
    ...         return Apply(self, [x], [Generic()()])
    >>> class Veto(Feature):
    ...     def validate(self, fgraph):
    ...         if len(fgraph.apply_nodes) > 1:
    ...             raise InconsistencyError("too big")
    >>> x = Generic()("x")
    >>> fg = FunctionGraph([x], [F()(x)], features=[Veto()], clone=False)
    >>> fg.replace_validate(fg.outputs[0], F()(F()(x)))
    Traceback (most recent call last):
    ...
    theano_dag.graph.utils.InconsistencyError: too big
    >>> fg
    FunctionGraph(F(x))
    """

    pickle_rm_attr = (
        ["replace_validate", "replace_all_validate", "replace_all_validate_remove"]
        + History.pickle_rm_attr
        + Validator.pickle_rm_attr
    )

    def on_attach(self, fgraph):
        for attr in ("replace_validate", "replace_all_validate", "replace_all_validate_remove"):
            if hasattr(fgraph, attr):
                raise AlreadyThere("ReplaceValidate feature is already present or in conflict")
        self._nodes_removed = set()
        self.fail_validate = False
        History.on_attach(self, fgraph)
        Validator.on_attach(self, fgraph)
        self.unpickle(fgraph)

    def unpickle(self, fgraph):
        History.unpickle(self, fgraph)
        Validator.unpickle(self, fgraph)
        fgraph.replace_validate = partial(self.replace_validate, fgraph)
        fgraph.replace_all_validate = partial(self.replace_all_validate, fgraph)
        fgraph.replace_all_validate_remove = partial(self.replace_all_validate_remove, fgraph)

    def on_detach(self, fgraph):
        History.on_detach(self, fgraph)
        Validator.on_detach(self, fgraph)
        del self._nodes_removed
        del fgraph.replace_validate
        del fgraph.replace_all_validate
        del fgraph.replace_all_validate_remove

    def replace_validate(self, fgraph, r, new_r, reason=None, **kwargs):
        """Replace ``r`` by ``new_r`` and validate; undo and re-raise on failure."""
        self.replace_all_validate(fgraph, [(r, new_r)], reason=reason, **kwargs)

    def replace_all_validate(
        self, fgraph, replacements, reason=None, verbose=None, import_missing=False
    ):
        """Replace each ``(r, new_r)`` then validate once; undo all and re-raise on failure.

        Every ``r`` must be in the graph when the call starts; one that an earlier
        pair of the same call removed from the graph is skipped.
        Returns the checkpoint taken before the changes.
        """
        replacements = list(replacements)
        for r, _ in replacements:
            if r not in fgraph.variables:
                raise ValueError(
                    f"Cannot replace {r}: it does not belong to this FunctionGraph "
                    f"(reason: {reason})"
                )
        chk = fgraph.checkpoint()
        for r, new_r in replacements:
            if r not in fgraph.variables:
                continue
            try:
                fgraph.replace(
                    r, new_r, reason=reason, verbose=False, import_missing=import_missing
                )
            except Exception:
                fgraph.revert(chk)
                raise
        try:
            fgraph.validate()
        except Exception as e:
            fgraph.revert(chk)
            if verbose:
                print(f"validate failed on node {r}.\n Reason: {reason}, {e}")
            raise
        if verbose:
            print(reason, r, new_r)
        return chk

    def replace_all_validate_remove(self, fgraph, replacements, remove, reason=None, warn=True):
        """Like ``replace_all_validate``, but undo and raise ReplacementDidNotRemoveError
        when a node or variable of ``remove`` is still in the graph afterwards."""
        chk = fgraph.replace_all_validate(replacements, reason)
        for rm in remove:
            if rm in fgraph.apply_nodes or rm in fgraph.variables:
                fgraph.revert(chk)
                msg = (
                    f"A rewrite wanted to remove {rm} from the graph, but its replacement "
                    f"did not remove it; the rewrite was undone ({reason}: {replacements})"
                )
                if warn:
                    warnings.warn(msg, stacklevel=2)
                raise ReplacementDidNotRemoveError(msg)
        self._nodes_removed.update(remove)

    def revert(self, fgraph, checkpoint):
        History.revert(self, fgraph, checkpoint)
        # Undoing may re-import nodes removed earlier; that is no reason to
        # refuse the next validation.
        self.fail_validate = False

    def __getstate__(self):
        return History.__getstate__(self)

    def on_import(self, fgraph, node, reason):
        if node in self._nodes_removed:
            self.fail_validate = True

    def validate(self, fgraph):
        if self.fail_validate:
            self.fail_validate = False
            raise InconsistencyError("Trying to reintroduce a removed node")


class NodeFinder(Bookkeeper):
    """Index the graph's nodes by op; installs ``fgraph.get_nodes(op)``.

    >>> from theano_dag.graph.type import Generic
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> from theano_dag.graph.op import Op
    >>> from theano_dag.graph.basic import Apply
    >>> class F(Op):
    ...     __props__ = ()
    ...     def make_node(self, x):
    ...         return Apply(self, [x], [Generic()()])
    >>> x = Generic()("x")
    >>> fg = FunctionGraph([x], [F()(F()(x))], features=[NodeFinder()])
    >>> len(fg.get_nodes(F()))
    2
    """

    def __init__(self):
        self.fgraph = None
        self.d = {}

    def clone(self):
        return type(self)()

    def on_attach(self, fgraph):
        if self.fgraph is not None:
            raise ValueError("A NodeFinder instance can only serve one FunctionGraph")
        if hasattr(fgraph, "get_nodes"):
            raise AlreadyThere("NodeFinder is already present or in conflict with another")
        self.fgraph = fgraph
        fgraph.get_nodes = partial(self.query, fgraph)
        Bookkeeper.on_attach(self, fgraph)

    def on_detach(self, fgraph):
        if self.fgraph is not fgraph:
            raise ValueError("This NodeFinder instance was not attached to this FunctionGraph")
        self.fgraph = None
        del fgraph.get_nodes
        Bookkeeper.on_detach(self, fgraph)

    def on_import(self, fgraph, node, reason):
        try:
            self.d.setdefault(node.op, []).append(node)
        except TypeError:  # an unhashable op cannot be indexed (nor queried)
            pass

    def on_prune(self, fgraph, node, reason):
        try:
            nodes = self.d[node.op]
        except (TypeError, KeyError):
            return
        nodes.remove(node)
        if not nodes:
            del self.d[node.op]

    def query(self, fgraph, op):
        """Return the nodes of the graph whose op equals ``op``."""
        try:
            return list(self.d.get(op, []))
        except TypeError:
            raise TypeError(f"{op} is unhashable and cannot be queried") from None


class PrintListener(Feature):
    """Print every event (when ``active``); handy when debugging a rewrite."""

    def __init__(self, active=True):
        self.active = active

    def on_attach(self, fgraph):
        if self.active:
            print("-- attaching to: ", fgraph)

    def on_detach(self, fgraph):
        if self.active:
            print("-- detaching from: ", fgraph)

    def on_import(self, fgraph, node, reason):
        if self.active:
            print(f"-- importing: {node}, reason: {reason}")

    def on_prune(self, fgraph, node, reason):
        if self.active:
            print(f"-- pruning: {node}, reason: {reason}")

    def on_change_input(self, fgraph, node, i, r, new_r, reason=None):
        if self.active:
            print(f"-- changing ({node}.inputs[{i}]) from {r} to {new_r}")


class PreserveNames(Feature):
    """Give a nameless replacement the name of the variable it replaces."""

    def on_change_input(self, fgraph, node, i, r, new_r, reason=None):
        if type(reason) is InputReorder:
            return  # moved arguments (reorder_inputs): nothing was replaced
        if r.name is not None and new_r.name is None:
            new_r.name = r.name


class PreserveVariableAttributes(PreserveNames):
    """Like PreserveNames, and also keep the ``nan_guard_mode_check`` tag."""

    def on_change_input(self, fgraph, node, i, r, new_r, reason=None):
        if type(reason) is InputReorder:
            return  # moved arguments (reorder_inputs): nothing was replaced
        # PreserveNames's, written out: every change of every graph comes here.
        if r.name is not None and new_r.name is None:
            new_r.name = r.name
        # r._tag, not r.tag: reading r.tag would make a scratchpad for every variable.
        if getattr(getattr(r, "_tag", None), "nan_guard_mode_check", False) and not getattr(
            new_r.tag, "nan_guard_mode_check", False
        ):
            new_r.tag.nan_guard_mode_check = r.tag.nan_guard_mode_check


class NoOutputFromInplace(Feature):
    """Refuse graphs where outputs ``[first_output_idx:last_output_idx]`` are computed
    by overwriting another value in place."""

    def __init__(self, first_output_idx=0, last_output_idx=None):
        self.first_idx = first_output_idx
        self.last_idx = last_output_idx

    def clone(self):
        return type(self)(self.first_idx, self.last_idx)

    def validate(self, fgraph):
        if not hasattr(fgraph, "destroyers"):
            return True
        for out in list(fgraph.outputs)[self.first_idx : self.last_idx]:
            node = out.owner
            if node is None:
                continue
            dmap = getattr(node.op, "destroy_map", None) or {}
            if node.outputs.index(out) in dmap:
                raise InconsistencyError(
                    f"Outputs of this graph may not be computed in place, but output {out} "
                    f"is computed by {node}, which overwrites one of its inputs"
                )
        return True


class Supervisor(Feature):
    """Refuse any graph that destroys one of ``protected`` or an output of the graph.

    ``function()`` attaches one protecting the inputs that are not declared mutable.
    It needs a DestroyHandler on the graph to know what is destroyed.

    >>> from theano_dag.graph.type import Generic
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> from theano_dag.graph.destroyhandler import DestroyHandler
    >>> from theano_dag.graph.op import Op
    >>> from theano_dag.graph.basic import Apply
    >>> class Clobber(Op):
    ...     __props__ = ()
    ...     destroy_map = {0: [0]}
    ...     def make_node(self, x):
    ...         return Apply(self, [x], [Generic()()])
    >>> x = Generic()("x")
    >>> fg = FunctionGraph([x], [Clobber()(x)], [DestroyHandler(), Supervisor([x])], clone=False)
    >>> fg.consistent()
    False
    """

    def __init__(self, protected):
        self.protected = list(protected)

    def clone(self):
        return type(self)(self.protected)

    def validate(self, fgraph):
        if not hasattr(fgraph, "destroyers"):
            return True
        for r in self.protected + list(fgraph.outputs):
            destroyers = fgraph.destroyers(r)
            if destroyers:
                raise InconsistencyError(
                    f"Trying to destroy a protected Variable: {r} would be overwritten by "
                    f"{destroyers[0]}"
                )
        return True
