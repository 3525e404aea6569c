"""``FunctionMaker`` builds, optimizes and links a graph; ``Function`` is the callable it makes.

The memory contract (``theano.compile.function.types``):

* an input is never modified unless declared ``In(mutable=True)``: a
  :class:`Supervisor` makes any rewrite that would destroy it fail;
* an output handed to the caller is never overwritten by a later call: its
  storage is in the linker's ``no_recycling`` list, and an output that would
  alias an input, a constant or another output gets a ``DeepCopyOp``
  (``Out(borrow=True)`` lifts both);
* updates are applied after every output is computed, all at once.

Inputs are checked before any op runs: wrong count, unknown keyword, missing
value, and any value its type's ``filter`` refuses raise an error that names
the input and its position.

Those semantics are written once, in ``engines.callspec.PlainCall``: once the
graph is linked, ``FunctionMaker`` describes the call in a frozen ``CallSpec``
and the engine's thunk turns it into the call path (``thunk.make_call(spec)``),
the plain call or an engine's specialisation of it.
"""

from __future__ import annotations

import bisect
import copy as _copy
import threading
import time
import warnings
from dataclasses import replace

import numpy as np

from theano_dag.compile import function_cache
from theano_dag.compile.io import In, SymbolicInput, SymbolicOutput
from theano_dag.compile.mode import get_mode
from theano_dag.compile.profiling import print_at_exit
from theano_dag.compile.sharedvalue import SharedVariable
from theano_dag.config import config
from theano_dag.engines.basic import Container
from theano_dag.engines.callspec import CallBase, CallProfile, CallSpec, InputSpec, as_thunk
from theano_dag.graph.basic import Constant, Variable, ancestors, clone_get_equiv, graph_inputs
from theano_dag.graph.destroyhandler import DestroyHandler
from theano_dag.graph.fg import FunctionGraph, InconsistencyError, MissingInputError
from theano_dag.graph.identity_ops import deep_copy_op, view_op
from theano_dag.graph.toolbox import PreserveVariableAttributes, Supervisor
from theano_dag.graph.utils import tag_trace_paused

__all__ = [
    "Function",
    "FunctionMaker",
    "Supervisor",
    "UnusedInputError",
    "DuplicateInputError",
    "std_fgraph",
    "insert_deepcopy",
    "infer_reuse_pattern",
    "alias_root",
]


# ---------------------------------------------------------------------------
# The FunctionGraph a function compiles, and its memory contract's graph side


# ---------------------------------------------------------------------------
# Aliasing analysis


def _aliased_inputs(var) -> list:
    """Input positions that output ``var`` views or destroys (view_map + destroy_map)."""
    op = var.owner.op
    pos = var.owner.outputs.index(var)
    return list(getattr(op, "view_map", {}).get(pos, [])) + list(
        getattr(op, "destroy_map", {}).get(pos, [])
    )


def alias_root(v):
    """The variable whose memory ``v`` shares, following view_map and destroy_map."""
    while v.owner is not None:
        aliased = _aliased_inputs(v)
        if len(aliased) > 1:
            raise NotImplementedError(
                f"{v} is a view or destroyed version of more than one input; only one is "
                "supported"
            )
        if not aliased:
            break
        v = v.owner.inputs[aliased[0]]
    return v


def view_tree_set(fgraph, v, treeset: set):
    """Add to ``treeset`` ``v`` and every variable of ``fgraph`` that views or destroys it."""
    todo = [v]
    while todo:
        cur = todo.pop()
        if cur in treeset:
            continue
        treeset.add(cur)
        for client, pos in fgraph.clients.get(cur, ()):
            if client == "output":
                continue
            op = client.op
            for maps in (getattr(op, "view_map", {}), getattr(op, "destroy_map", {})):
                for opos, iposlist in maps.items():
                    if pos in iposlist:
                        todo.append(client.outputs[opos])


def infer_reuse_pattern(fgraph, outputs_to_disown) -> set:
    """Every computed variable that may share storage with one of ``outputs_to_disown``:
    the linker must not reuse their storage between calls (``no_recycling``)."""
    rval: set = set()
    for o in outputs_to_disown:
        view_tree_set(fgraph, alias_root(o), rval)
    return {r for r in rval if r.owner is not None}


# ---------------------------------------------------------------------------
# Building the FunctionGraph


def _has_destroy_op(fgraph) -> bool:
    return any(getattr(node.op, "destroy_map", None) for node in fgraph.apply_nodes)


def std_fgraph(input_specs, output_specs, accept_inplace=False):
    """The FunctionGraph of a function: outputs, then one extra output per update.

    Returns ``(fgraph, update_outputs)``. Graphs with in-place ops are refused
    unless ``accept_inplace`` (then a DestroyHandler tracks them); immutable
    inputs are protected by a :class:`Supervisor`.
    """
    orig_inputs = [spec.variable for spec in input_specs]
    updates, update_mapping = [], {}
    out_idx = len(output_specs)
    for inp_idx, spec in enumerate(input_specs):
        if spec.update is not None:
            updates.append(spec.update)
            update_mapping[out_idx] = inp_idx
            out_idx += 1
    orig_outputs = [spec.variable for spec in output_specs] + updates
    try:
        fgraph = FunctionGraph(orig_inputs, orig_outputs, update_mapping=update_mapping)
    except MissingInputError as e:
        raise _scan_step_hint(e, input_specs) from None
    attach_protection(fgraph, input_specs, accept_inplace)
    return fgraph, [SymbolicOutput(u) for u in updates]


def _scan_step_hint(error, input_specs):
    """``error`` itself, or, where its missing variable is one of a scan step's own
    (``tag.scan_step``), the same error naming the shared variables whose update reads
    it: a default update made in the step (a random draw's), which scan's returned
    updates carry to the loop's outputs, as in Theano."""
    var = error.variable
    if var is None or not getattr(var.tag, "scan_step", False):
        return error
    # (the FunctionGraph raised on its clone of the graph: the originals are told by
    # their tag, not by identity)
    names = [
        f"shared variable {spec.variable.name!r}"
        if spec.variable.name
        else f"an unnamed shared {spec.variable.type}"
        for spec in input_specs
        if spec.update is not None
        and any(getattr(a.tag, "scan_step", False) for a in ancestors([spec.update]))
    ]
    whose = f"the update of {', '.join(names)}" if names else "an output"
    return MissingInputError(
        f"{error}. {var} is a variable of a scan step's graph, and {whose} reads it: a "
        f"default update made in the step (a random draw's) is valid only inside the "
        f"loop. Pass the updates scan returned: `outputs, updates = scan(...)` and "
        f"`function(..., updates=updates)`",
        variable=var,
    )


def attach_protection(fgraph, input_specs, accept_inplace):
    """Attach to ``fgraph`` what keeps a function's memory contract while it is
    rewritten: a DestroyHandler (only if the graph already has in-place ops, which
    ``accept_inplace`` must allow), a Supervisor over the inputs not declared mutable,
    and PreserveVariableAttributes."""
    has_inplace = _has_destroy_op(fgraph)
    if has_inplace:
        if not accept_inplace:
            node = next(n for n in fgraph.toposort() if getattr(n.op, "destroy_map", None))
            raise TypeError(
                f"Graph must not contain inplace operations (found {node.op} in {node}); pass "
                "accept_inplace=True to allow them"
            )

        fgraph.attach_feature(DestroyHandler(algo=config.cycle_detection))
    # As in Theano, an input that the caller's own graph destroys (an in-place op written
    # by hand, allowed by accept_inplace=True) is overwritten: both say so explicitly.
    # Every other input is protected: a rewrite overwrites only In(mutable=True) ones.
    protected = [
        inp
        for spec, inp in zip(input_specs, fgraph.inputs)
        if not (spec.mutable or (has_inplace and _has_destroyers(fgraph, inp)))
    ]
    fgraph.attach_feature(Supervisor(protected))
    # A rewrite that replaces a named variable keeps the name (for debugprint).
    fgraph.attach_feature(PreserveVariableAttributes())
    if has_inplace:
        try:
            fgraph.validate()
        except InconsistencyError as e:
            raise InconsistencyError(
                f"{e}. A function may only overwrite an input declared In(variable, "
                "mutable=True)"
            ) from e


def _has_destroyers(fgraph, var) -> bool:
    has = getattr(fgraph, "has_destroyers", None)
    return bool(has([var])) if has is not None else False


def insert_deepcopy(fgraph, wrapped_inputs, wrapped_outputs):
    """Break aliasing between outputs, and between an output and an input or constant.

    An output that views another output, a constant, or an input (other than a
    shared variable being updated) is wrapped in ``DeepCopyOp``, or in
    ``ViewOp`` when every side involved is borrowed.
    """
    if len(wrapped_inputs) != len(fgraph.inputs) or len(wrapped_outputs) != len(fgraph.outputs):
        raise ValueError("insert_deepcopy: the specs do not match the graph's inputs/outputs")
    reason = "insert_deepcopy"
    updated_inputs = {
        inp for spec, inp in zip(wrapped_inputs, fgraph.inputs) if spec.update is not None
    }
    input_index = {inp: k for k, inp in enumerate(fgraph.inputs)}

    # Where each output and each graph input sits: the first later output (or the first
    # graph input) among an output's views is found from its views, which are few,
    # rather than by scanning every output and input for each output (quadratic in
    # the number of outputs). Wrapping output i changes no output after it.
    later_positions: dict = {}  # output variable -> its positions, ascending
    for j, out in enumerate(fgraph.outputs):
        later_positions.setdefault(out, []).append(j)
    # The graph inputs (constants too, though not fgraph.inputs) in the order of
    # graph_inputs, which picks among several aliased ones: made on first need. Every
    # ownerless variable an output views is one (a graph's nodes all feed its outputs).
    graph_input_rank: dict = {}

    def wrap(i, borrowed):
        op = view_op if borrowed else deep_copy_op
        fgraph.change_input("output", i, op(fgraph.outputs[i]), reason=reason)

    for i in range(len(fgraph.outputs)):
        views_of_output_i: set = set()
        view_tree_set(fgraph, alias_root(fgraph.outputs[i]), views_of_output_i)
        first_j = None
        for v in views_of_output_i:
            positions = later_positions.get(v)
            if positions:
                j = positions[bisect.bisect_right(positions, i)] if positions[-1] > i else None
                if j is not None and (first_j is None or j < first_j):
                    first_j = j
        aliased = [
            v
            for v in views_of_output_i
            # An updated shared variable's old value may be returned as is: the
            # update gives the variable a new object, it does not write into it.
            if v.owner is None and v not in updated_inputs and not _has_destroyers(fgraph, v)
        ]
        if first_j is not None:
            # Two borrowed outputs may share memory, but not hand out an input that is not
            # borrowed too (Theano's did, for an output that is also a later one: the
            # caller's own array came back as a borrowed output).
            unborrowed = any(
                v in input_index and not wrapped_inputs[input_index[v]].borrow for v in aliased
            )
            both = wrapped_outputs[i].borrow and wrapped_outputs[first_j].borrow
            wrap(i, both and not unborrowed)
            continue
        if aliased:
            if len(aliased) > 1 and not graph_input_rank:
                for k, inp in enumerate(graph_inputs(fgraph.outputs)):
                    graph_input_rank.setdefault(inp, k)
            input_j = (
                min(aliased, key=graph_input_rank.__getitem__) if len(aliased) > 1 else aliased[0]
            )
            if input_j in input_index:
                spec = wrapped_inputs[input_index[input_j]]
                wrap(i, wrapped_outputs[i].borrow and spec.borrow)
            else:
                wrap(i, wrapped_outputs[i].borrow)


class UnusedInputError(ValueError):
    """A declared input of ``function`` is not needed to compute the outputs or updates."""


class DuplicateInputError(UnusedInputError):
    """A variable is given twice in the inputs of ``function`` (Theano raises an
    UnusedInputError there: one of the two values a call gives would go unused)."""


# ---------------------------------------------------------------------------
# The callable


def _input_desc(spec, position) -> str:
    if spec.name is not None:
        return f"'{spec.name}' (position {position})"
    return f"at position {position} (unnamed, {spec.variable.type})"


class Function(CallBase):
    """A compiled function: call it with the input values, get the outputs.

    Positional arguments fill the explicit inputs in order; keywords fill
    them by name. One output (given not in a list) is returned alone, a list
    of outputs as a list, no outputs as None. ``f.maker.fgraph`` is the
    optimized graph, ``f.fn`` the engine's thunk and ``f.spec`` the frozen
    :class:`~theano_dag.engines.callspec.CallSpec` the engine made the call from.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> from theano_dag.compile.function import function
    >>> x, y = tt.dvector("x"), tt.dvector("y")
    >>> f = function([x, y], x + y, name="add")
    >>> f([1.0, 2.0], y=np.ones(2))
    array([2., 3.])
    >>> f.spec.label, [s.name for s in f.spec.inputs]
    ("Function 'add'", ['x', 'y'])
    """

    def __init__(self, fn, input_storage, output_storage, maker, spec, name=None):
        self.fn = fn
        self.input_storage = input_storage
        self.output_storage = output_storage
        self.maker = maker
        self.name = name
        # The engine's own profile object when it keeps one, else the call counter.
        if fn.profile is not None:
            print_at_exit(fn.profile)  # printed if config.profile is set at exit
            fn.profile.optimizer_time = maker.optimizer_time
            self.profile = fn.profile
        elif spec.profile is not None:
            print_at_exit(spec.profile)
            spec.profile.optimizer_time = maker.optimizer_time
            self.profile = spec.profile
        else:
            self.profile = maker.profile
        # User-visible lookup of inputs: variable or unambiguous name -> index.
        self._finder: dict = {}
        for k, inp in enumerate(maker.inputs):
            self._finder[inp.variable] = k
            if inp.name is not None and inp.name not in spec.ambiguous:
                self._finder.setdefault(inp.name, k)
        self._set_spec(spec)

    def _set_spec(self, spec):
        """Use ``spec`` from now on: the engine makes the call path anew from it.

        The thread doing so owns the function's storage; see :meth:`_call_in_other_thread`."""
        self.spec = spec
        # The engines reuse a function's storage from call to call (the CPU engine's
        # planned blocks, the reference engine's cells): the thread that sets the spec
        # calls the function itself, any other a copy of its own.
        self._copies = threading.local()
        self._set_owner(threading.get_ident(), self._call_in_other_thread)
        self._path = self.fn.make_call(spec)
        self._path.watch(self._use_entry)

    def _call_in_other_thread(self, *args, **kwargs):
        """A call from a thread other than the owner's runs that thread's own copy
        (:meth:`copy`: the same graph and engine, its own storage, the same shared
        variables), made on its first call and kept while the thread lives. Updates of
        shared variables from several threads at once race as they would in numpy."""
        mine = getattr(self._copies, "function", None)
        if mine is None:
            mine = self._copies.function = self._copy(as_list=False)
        return mine(*args, **kwargs)

    def _use_entry(self, entry, guard):
        # ``f(...)`` runs in the C half of CallBase: the guard's body when the arguments
        # pass its checks, else the path's entry (see CallPath.watch).
        if guard is None:
            self._set_entry(entry)
        else:
            self._set_guard(entry, guard.body, guard.miss, np.ndarray, *guard[2:])

    @property
    def _label(self) -> str:
        return self.spec.label

    @property
    def defaults(self) -> list:
        """``(required, refeed, value)`` of each input (Theano's ``Function.defaults``)."""
        return [(s.required, s.refeed, s.default) for s in self.spec.inputs]

    @property
    def outputs(self) -> list:
        """The output specs (``SymbolicOutput``: ``.variable``, ``.borrow``) the function
        was made with, as Theano's ``Function.outputs``.

        >>> import theano_dag, theano_dag.tensor as tt
        >>> x = tt.dvector("x")
        >>> y = x + 1
        >>> theano_dag.function([x], y).outputs[0].variable is y
        True
        """
        return self.maker.outputs

    @property
    def _check_for_aliased_inputs(self) -> bool:
        """Theano's flag: whether an explicit input is declared ``In(borrow=True)`` or
        ``In(mutable=True)``, the inputs whose arguments a call may find sharing memory
        with another's (shared variables never are). A call copies such an argument when
        an input is mutable, as an op may then overwrite it.

        >>> import theano_dag, theano_dag.tensor as tt
        >>> x = tt.dvector("x")
        >>> theano_dag.function([x], x + 1)._check_for_aliased_inputs
        False
        >>> theano_dag.function([theano_dag.In(x, mutable=True)], x + 1)._check_for_aliased_inputs
        True
        """
        return any(
            not spec.implicit and (getattr(spec, "borrow", False) or spec.mutable)
            for spec in self.maker.inputs
        )

    @property
    def trust_input(self) -> bool:
        """When True, a call hands its arguments to the engine unchecked (all of them
        must be given, by position, as valid values of their types)."""
        return self.spec.trust_input

    @trust_input.setter
    def trust_input(self, value):
        if bool(value) != self.spec.trust_input:
            self._set_spec(replace(self.spec, trust_input=bool(value)))

    # -- pickling ---------------------------------------------------------------

    def __reduce__(self):
        """Pickle the maker (the user's graph and the Mode, never the engine's thunk
        and its compiled closures) and each input's current value; loading compiles
        the graph again, as Theano does (the CPU engine's kernels come from its cache).
        Shared variables travel with the graph, so the loaded function reads and updates
        the loaded copies of them. A default or state travels in its Container, with the
        default: functions pickled (or deep-copied) together that share a storage cell
        (``In(s, value=f.container[s])``) share the loaded cell too."""
        values = []
        for k, (spec, container) in enumerate(zip(self.maker.inputs, self.input_storage)):
            if isinstance(spec.value, Container) or _is_shared(spec.value):
                values.append(None)  # the container comes with the maker's specs
            elif self.maker.required[k]:
                values.append(None)
            else:
                values.append((container, self._current(k)))
        return (_rebuild_function, (self.maker, values, self.trust_input, self.name))

    def memory_plan(self, shapes=None):
        """The engine's memory plan (blocks, planned bytes, eager and live peaks) for
        ``shapes`` (one shape per input) or for the last call's input shapes."""
        try:
            return self.fn.memory_plan(shapes)
        except NotImplementedError as e:
            raise NotImplementedError(f"{self._label}: {e}") from None

    # -- access to input values -----------------------------------------------

    def _index(self, item) -> int:
        if isinstance(item, (str, Variable)) and item in self._finder:
            return self._finder[item]
        if isinstance(item, int) and 0 <= item < len(self.input_storage):
            return item
        if isinstance(item, str) and item in self.spec.ambiguous:
            raise KeyError(f"{self._label}: the name '{item}' is ambiguous")
        raise KeyError(
            f"{self._label} has no input {item!r}; its inputs are {self.spec.names_list()}"
        )

    def __getitem__(self, item):
        """The current default (or state) value of an input, by name, variable or index."""
        return self._current(self._index(item))

    def _current(self, k):
        inp = self.spec.inputs[k]
        if inp.refeed:
            # A default given again to every call that omits the input: a call that
            # gave another value (f(x, a=2.0)) changed it for that call only.
            return inp.default
        return self.input_storage[k].storage[0]

    def __setitem__(self, item, value):
        """Set the default (or state) value of an input."""
        k = self._index(item)
        filtered = self.spec.filter(k, value)
        self.input_storage[k].storage[0] = filtered
        inp = self.spec.inputs[k]
        if inp.refeed or inp.required:
            self._set_spec(self.spec.with_default(k, filtered))

    def __contains__(self, item):
        try:
            self._index(item)
        except KeyError:
            return False
        return True

    @property
    def container(self):
        """``f.container[name]``: the Container of an input (by name, variable or index)."""
        return _InputView(self, lambda k: self.input_storage[k])

    @property
    def value(self):
        """``f.value[name]``: an input's value, as ``f[name]`` (Theano's attribute).

        >>> import theano_dag, theano_dag.tensor as tt
        >>> x = tt.dscalar("x")
        >>> f = theano_dag.function([theano_dag.In(x, value=2.0)], x * 3)
        >>> float(f.value["x"]), "x" in f.value, "y" in f.value
        (2.0, True, False)
        """
        return _InputView(self, self._current, self.__setitem__)

    def get_shared(self):
        """The shared variables this function reads or updates."""
        return [spec.variable for spec in self.maker.inputs if spec.implicit]

    def free(self):
        """Drop the intermediate values kept between calls: the cells of an engine that
        keeps them (``allow_gc`` off), the CPU engine's plans with their blocks (the
        next call plans again). Inputs' values, defaults and shared values stay.

        >>> import numpy as np, theano_dag, theano_dag.tensor as tt
        >>> x = tt.dvector("x")
        >>> f = theano_dag.function([x], tt.exp(x) * 2)
        >>> f(np.zeros(3)); f.free(); f(np.zeros(2))
        array([2., 2., 2.])
        array([2., 2.])
        """
        engine_free = getattr(self.fn, "free", None)
        if engine_free is not None:
            engine_free()
            self._set_spec(self.spec)  # a call path over what the engine keeps now
        storage_map = self.fn.storage_map
        if storage_map is None or self.fn.allow_gc:
            return
        for var, cell in storage_map.items():
            if not isinstance(var, Constant) and var.owner is not None:
                cell[0] = None

    @property
    def indices(self) -> list:
        """Theano's ``Function.indices``: ``(input spec, None, [input spec])`` per input
        (the last two served Theano's retired input kits).

        >>> import theano_dag, theano_dag.tensor as tt
        >>> x = tt.dscalar("x")
        >>> theano_dag.function([x], x + 1).indices[0][0].variable is x
        True
        """
        return [(spec, None, [spec]) for spec in self.maker.inputs]

    # -- copying --------------------------------------------------------------

    def __copy__(self):
        return self.copy()

    def copy(self, share_memory=False, swap=None, delete_updates=False, name=None):
        """A new Function over a copy of the optimized graph, with its own storage.

        Shared variables stay shared (the copy reads and updates the same
        values) except those in ``swap``, a ``{old: new}`` dict of shared
        variables of the same type. ``delete_updates`` drops every update.
        ``share_memory`` shares the intermediate storage (not inputs/outputs). As in
        Theano, the copy returns its outputs as a list, even where the original returned
        one value.
        """
        return self._copy(share_memory, swap, delete_updates, name, as_list=True)

    def _copy(self, share_memory=False, swap=None, delete_updates=False, name=None, *, as_list):
        # as_list=False: the copy returns what the original returns (a thread's own copy)

        maker = self.maker
        n_out = len(maker.outputs)
        out_vars = maker.fgraph.outputs if not delete_updates else maker.fgraph.outputs[:n_out]
        swap = dict(swap or {})
        user_vars = [spec.variable for spec in maker.inputs]
        for old, new in swap.items():
            if old not in user_vars:
                raise ValueError(f"copy(swap=...): {old} is not an input of this function")
            if not isinstance(new, SharedVariable) or not isinstance(old, SharedVariable):
                raise TypeError(f"copy(swap=...): {old} -> {new}: both must be SharedVariables")
            if old.type != new.type:
                raise TypeError(
                    f"copy(swap=...): {new} has type {new.type}, {old} has type {old.type}"
                )
        # A swapped-in shared variable is itself the copy's graph input, as in Theano.
        memo = {inp: swap[var] for inp, var in zip(maker.fgraph.inputs, user_vars) if var in swap}
        memo = clone_get_equiv(maker.fgraph.inputs, out_vars, memo=memo)
        fg_cpy = FunctionGraph(
            [memo[i] for i in maker.fgraph.inputs], [memo[o] for o in out_vars], clone=False
        )
        ins, storage = [], []
        update_i = n_out
        for k, (spec, cur) in enumerate(zip(maker.inputs, self.input_storage)):
            new = _copy.copy(spec)
            if spec.variable in swap:
                new.variable = swap[spec.variable]
                new.value = new.variable.container
            if spec.update is not None and not delete_updates:
                new.update = fg_cpy.outputs[update_i]
                update_i += 1
            else:
                new.update = None
            ins.append(new)
            if isinstance(new.value, Container):
                storage.append(new.value)
            elif spec.update is not None or spec.mutable:
                # State of the original: the copy starts from the same value, not the object.
                storage.append(_copy.deepcopy(cur.storage[0]))
            else:
                storage.append(self.defaults[k][2])
        outs = [SymbolicOutput(v, borrow=o.borrow) for v, o in zip(fg_cpy.outputs, maker.outputs)]
        storage_map = None
        if share_memory:
            io_vars = set(maker.fgraph.inputs) | set(maker.fgraph.outputs)
            storage_map = {
                memo[v]: cell
                for v, cell in (self.fn.storage_map or {}).items()
                if v not in io_vars and v in memo
            }
        new_maker = FunctionMaker(
            ins,
            outs if as_list or not maker.unpack_single else outs[0],
            mode=maker.mode,
            accept_inplace=True,
            on_unused_input="ignore",
            fgraph=fg_cpy,
            name=name or (f"{self.name} copy" if self.name else None),
            profile=maker.profile,
            output_keys=maker.output_keys,
        )
        new_maker.return_none = maker.return_none
        return new_maker.create(storage, storage_map=storage_map)


# ---------------------------------------------------------------------------
# The maker


class FunctionMaker:
    """Build the FunctionGraph, optimize it, link it; ``create()`` returns a Function.

    ``inputs`` are ``In`` (or Variables), ``outputs`` ``Out``/Variables, a
    list of them, or None. Given ``fgraph`` (an already optimized graph whose
    inputs and outputs match the specs, updates last), nothing is rebuilt.
    """

    @staticmethod
    def wrap_in(inp):
        if isinstance(inp, SymbolicInput):
            return inp
        if isinstance(inp, Variable):
            return In(inp)
        raise TypeError(
            f"Unknown input type: {type(inp).__name__} ({inp!r}), expected In or a " "Variable"
        )

    @staticmethod
    def wrap_out(out):
        if isinstance(out, SymbolicOutput):
            return out
        if isinstance(out, Variable):
            return SymbolicOutput(out)
        raise TypeError(
            f"Unknown output type: {type(out).__name__} ({out!r}), expected Out or a " "Variable"
        )

    def __init__(
        self,
        inputs,
        outputs,
        mode=None,
        accept_inplace=False,
        profile=None,
        on_unused_input=None,
        fgraph=None,
        name=None,
        output_keys=None,
        incremental=False,
    ):
        self.mode = get_mode(mode)
        if profile is None and config.profile:
            profile = True
        self.profile = profile
        self.incremental = incremental
        self.accept_inplace = accept_inplace
        # What __reduce__ pickles: the graph as the user gave it (std_fgraph clones it, so
        # rewrites never touch it), not the optimized graph whose ops an engine lowered.
        self._source = None if fgraph is not None else (inputs, outputs)
        self.output_keys = output_keys
        self.unpack_single = False
        self.return_none = False
        if outputs is None:
            self.return_none = True
            outputs = []
        if not isinstance(outputs, (list, tuple)):
            self.unpack_single = True
            outputs = [outputs]
        if not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        inputs = [self.wrap_in(i) for i in inputs]
        outputs = [self.wrap_out(o) for o in outputs]
        mode = self.mode
        if incremental:
            linker = mode.linker
            if not getattr(linker, "supports_incremental", False):
                raise ValueError(
                    f"incremental=True needs an engine that recomputes incrementally (the "
                    f"CPU engine, Mode(linker='cpu')); {type(linker).__name__} does not"
                )
            linker = linker.clone()  # the Mode's own linker stays as it was
            linker.incremental = True
            # The query follows the engine's options (no row tiling when incremental).
            mode = mode.clone(linker=linker)
        cached = None
        if fgraph is None:
            # A graph compiled before (in any process) is loaded, not rewritten again.
            cache_entry = function_cache.entry_for(inputs, outputs, mode, accept_inplace, profile)
            self._check_unused_inputs(inputs, outputs, on_unused_input, cache_entry)
            if cache_entry is not None:
                cached = cache_entry.load()
        if cached is not None:
            fgraph = cached
            fgraph.profile = profile
            additional = [SymbolicOutput(s.update) for s in inputs if s.update is not None]
            self.optimizer_time = 0.0
        elif fgraph is None:
            fgraph, additional = std_fgraph(inputs, outputs, accept_inplace)
            fgraph.profile = profile
            t0 = time.perf_counter()
            optimizer = mode.optimizer
            if optimizer is not None:
                run = getattr(optimizer, "optimize", None) or optimizer
                # Rewrites build nodes whose inputs carry no test value (Theano's flag
                # compute_test_value_opt, "off" unless set, applies while they run).
                with (
                    tag_trace_paused(),  # an optimizer that is a bare callable, too
                    config.change_flags(compute_test_value=config.compute_test_value_opt),
                ):
                    run(fgraph)
            self.optimizer_time = time.perf_counter() - t0
            # Under the same flag, as in Theano: the copies wrap rewritten outputs, which
            # carry no test value, and a loaded graph (which has them) skips this step.
            with config.change_flags(compute_test_value=config.compute_test_value_opt):
                insert_deepcopy(fgraph, inputs, outputs + additional)
            if cache_entry is not None:
                cache_entry.store(fgraph)
        else:
            additional = [SymbolicOutput(s.update) for s in inputs if s.update is not None]
            attach_protection(fgraph, inputs, accept_inplace=True)
            self.optimizer_time = 0.0
        self.fgraph = fgraph
        fgraph.name = name
        specs = outputs + additional
        if len(specs) != len(fgraph.outputs):
            raise ValueError(
                f"FunctionMaker: {len(specs)} output specs for a graph with "
                f"{len(fgraph.outputs)} outputs"
            )
        self.output_specs = specs  # the outputs', then the updates'
        no_borrow = [v for v, spec in zip(fgraph.outputs, specs) if not spec.borrow]
        linker = mode.linker
        if not hasattr(linker, "accept"):
            raise ValueError(f"The linker of {self.mode} ({linker!r}) has no accept method")
        no_recycling = sorted(infer_reuse_pattern(fgraph, no_borrow), key=_topo_key(fgraph))
        self.linker = linker.accept(fgraph, no_recycling=no_recycling, profile=profile)
        mapping = fgraph.update_mapping or {}
        self.linker.accept_var_updates(
            {fgraph.inputs[i]: fgraph.outputs[o] for o, i in mapping.items()}
        )
        self.inputs = inputs
        self.expanded_inputs = inputs
        self.outputs = outputs
        self.accept_inplace = accept_inplace
        self.name = name
        self.required = [spec.value is None for spec in inputs]
        self.refeed = [
            spec.value is not None
            and not isinstance(spec.value, Container)
            and not _is_shared(spec.value)
            and spec.update is None
            for spec in inputs
        ]

    def __reduce__(self):
        if self._source is None:
            raise TypeError(
                "This FunctionMaker was built from an already optimized graph (Function.copy); "
                "only functions compiled by function() or FunctionMaker(inputs, outputs) pickle"
            )
        inputs, outputs = self._source
        state = dict(
            inputs=inputs,
            outputs=outputs,
            mode=self.mode,
            accept_inplace=self.accept_inplace,
            # A profile object holds timings of this process; the loaded function
            # starts a fresh one when profiling was asked for.
            profile=bool(self.profile) if self.profile is not None else None,
            name=self.name,
            output_keys=self.output_keys,
            incremental=self.incremental,
        )
        return (_rebuild_maker, (state,))

    def _check_unused_inputs(self, inputs, outputs, on_unused_input, cache_entry=None):
        if on_unused_input is None:
            on_unused_input = config.on_unused_input
        if on_unused_input not in ("raise", "warn", "ignore"):
            raise ValueError(
                f"Invalid value for on_unused_input: {on_unused_input!r}; expected 'raise', "
                "'warn' or 'ignore'"
            )
        if on_unused_input == "ignore":
            return
        needed = None if cache_entry is None else cache_entry.used_inputs
        if needed is None:  # (else the key's walk of the graph saw which are used)
            used = set(
                ancestors(
                    [o.variable for o in outputs]
                    + [i.update for i in inputs if i.update is not None],
                    blockers=[i.variable for i in inputs],
                )
            )
            needed = [spec.variable in used for spec in inputs]
        for k, spec in enumerate(inputs):
            if needed[k] or spec.update is not None:
                continue
            msg = (
                f"function was asked to compute outputs from input {_input_desc(spec, k)}, but "
                "that input is not part of the computational graph needed to compute the outputs. "
            )
            if on_unused_input == "warn":
                warnings.warn(
                    msg + "Pass on_unused_input='raise' to make this an error, or 'ignore'.",
                    stacklevel=5,
                )
            else:
                raise UnusedInputError(
                    msg + "Pass on_unused_input='warn' to make this a warning, or 'ignore'."
                )

    def create(self, input_storage=None, storage_map=None) -> Function:
        """Link the graph and return a Function; ``input_storage`` gives each input's
        initial value (or its Container to share)."""
        if input_storage is None:
            input_storage = [spec.value for spec in self.inputs]
        if len(input_storage) != len(self.inputs):
            raise ValueError(
                f"create: {len(input_storage)} initial values for {len(self.inputs)} inputs"
            )
        cells, defaults = [], []
        for k, (spec, init) in enumerate(zip(self.inputs, input_storage)):
            if _is_shared(init):
                init = init.container
            if isinstance(init, Container):
                cells.append(init.storage)
                value = init.storage[0]
            else:
                cells.append([None])
                value = init
            required, refeed = self.required[k], self.refeed[k]
            if spec.implicit or required:
                value = None
            defaults.append((required, refeed, value))
        fn, in_containers, out_containers = self.linker.make_thunk(
            input_storage=cells, storage_map=storage_map
        )
        fn = as_thunk(fn)
        for spec, c in zip(self.inputs, in_containers):
            c.strict = spec.strict
            c.allow_downcast = spec.allow_downcast
            c.name = spec.name
        call_spec = self._call_spec(fn, in_containers, out_containers, defaults)
        # Defaults and non-shared state go through the type's filter once, here.
        for k, (spec, (_required, refeed, value)) in enumerate(zip(self.inputs, defaults)):
            if (
                value is not None
                and not isinstance(spec.value, Container)
                and not _is_shared(spec.value)
            ):
                filtered = call_spec.filter(k, value)
                in_containers[k].storage[0] = filtered
                if refeed:
                    call_spec = call_spec.with_default(k, filtered)
        return Function(fn, in_containers, out_containers, self, call_spec, name=self.name)

    def _call_spec(self, fn, in_containers, out_containers, defaults) -> CallSpec:
        """The frozen description of a call that the engine makes the call path from."""
        fgraph = self.fgraph
        n_out = len(self.outputs)
        explicit = [k for k, spec in enumerate(self.inputs) if not spec.implicit]
        inputs, j = [], n_out
        for k, (spec, (required, refeed, value)) in enumerate(zip(self.inputs, defaults)):
            update = None
            if spec.update is not None:
                update, j = j, j + 1
            inputs.append(
                InputSpec(
                    # The container's type: an engine may accept more than the variable's
                    # type does (the OpenCL engine takes device arrays too).
                    in_containers[k].type,
                    name=spec.name,
                    index=k,
                    position=None if spec.implicit else explicit.index(k),
                    required=required,
                    refeed=refeed,
                    default=value if refeed else None,
                    shared=isinstance(spec.value, Container) or _is_shared(spec.value),
                    mutable=bool(spec.mutable),
                    strict=bool(spec.strict),
                    allow_downcast=spec.allow_downcast,
                    update=update,
                    none_refused_by=_none_refused_by(fgraph, fgraph.inputs[k]),
                )
            )
        # With allow_gc the engine empties computed outputs' cells after a call, so the
        # function keeps no reference to what it returned.
        freed = (
            tuple(j for j, v in enumerate(fgraph.outputs) if v.owner is not None)
            if fn.allow_gc
            else ()
        )
        profile = CallProfile() if self.profile and fn.profile is None else None
        return CallSpec(
            inputs=tuple(inputs),
            input_cells=tuple(c.storage for c in in_containers),
            output_cells=tuple(c.storage for c in out_containers),
            n_returned=n_out,
            borrow=tuple(bool(o.borrow) for o in self.output_specs),
            unpack_single=self.unpack_single,
            return_none=self.return_none,
            output_keys=None if self.output_keys is None else tuple(self.output_keys),
            freed_outputs=freed,
            name=self.name,
            profile=profile,
        )


def _none_refused_by(fgraph, var):
    """The op of the first node of ``fgraph`` that reads ``var`` and takes no None for it
    (``Op.takes_none``), or None where a call may give None: ``var``'s type has None
    among its values, or every reader takes one (or returns it)."""
    try:
        var.type.filter(None)
        return None
    except Exception:
        pass
    for node, _ in fgraph.clients.get(var, ()):
        if not isinstance(node, str) and not node.op.takes_none:
            return node.op
    return None


def _rebuild_function(maker, values, trust_input, name):
    """Unpickle a Function: its maker compiled the graph again, each input gets its value
    (a default or state its Container, whose cell other loaded functions may share)."""
    storage = []
    for spec, v in zip(maker.inputs, values):
        if isinstance(spec.value, Container) or _is_shared(spec.value):
            storage.append(spec.value)
        elif v is None:
            storage.append(None)
        else:
            container, value = v
            # A call given another value left it in the cell; the default is what a call
            # without one reads.
            container.storage[0] = value
            storage.append(container)
    fn = maker.create(storage)
    fn.name = name
    fn.trust_input = trust_input
    return fn


def _rebuild_maker(state):
    """Unpickle a FunctionMaker: build, optimize and link the pickled user graph."""
    maker = FunctionMaker(**state, on_unused_input="ignore")
    return maker


def _is_shared(value) -> bool:
    return isinstance(value, SharedVariable)


def _topo_key(fgraph):
    """Sort key giving a deterministic (topological) order to a set of variables."""
    rank = {}
    for k, node in enumerate(fgraph.toposort()):
        for j, o in enumerate(node.outputs):
            rank[o] = (k, j)
    return lambda v: rank.get(v, (-1, 0))


class _InputView:
    """``f.container`` and ``f.value``: a function's inputs looked up by name, variable or
    index, with ``in``."""

    def __init__(self, fn, get, set_=None):
        self._fn, self._get, self._set = fn, get, set_

    def __getitem__(self, item):
        return self._get(self._fn._index(item))

    def __setitem__(self, item, value):
        if self._set is None:
            raise TypeError("f.container is read-only: set a value with f[name] = value")
        self._set(item, value)

    def __contains__(self, item):
        return item in self._fn
