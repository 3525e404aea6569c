"""The reference engine: the contract of ``theano.link.basic``, run with ``Op.perform``.

A *linker* turns a FunctionGraph into a thunk (a no-argument callable) plus
storage *containers* for its inputs and outputs. Every value lives in a
one-element list, a "storage cell", so that a thunk and its callers share it
by reference. ``PerformLinker`` runs each node's ``perform`` in topological
order: it is the ground truth that every other engine and every rewrite is
checked against.

Engines that reuse storage between calls must honour ``no_recycling`` (the
variables handed to ``accept``): their cells are emptied before each run, so
an output returned to the user is never written into again.

The thunk is a :class:`~theano_dag.engines.callspec.Thunk`: besides running, it
says what ``Function`` may ask of it (``allow_gc``, ``storage_map``, ``profile``,
``memory_plan``) and makes the call path from a frozen ``CallSpec``
(``make_call``); see ``engines.callspec``.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from copy import copy

from theano_dag.config import config
from theano_dag.engines.callspec import CallableThunk, Thunk, as_thunk, with_message
from theano_dag.engines.profile import ProfileStats
from theano_dag.graph.basic import Constant
from theano_dag.graph.shared import Container
from theano_dag.graph.utils import get_stack_trace

__all__ = [
    "Container",
    "Linker",
    "LocalLinker",
    "PerformLinker",
    "WrapLinker",
    "WrapLinkerMany",
    "map_storage",
    "io_storage_map",
    "gc_helper",
    "streamline",
    "Streamline",
    "raise_with_op",
    "creation_lines",
    "describe_value",
]


# ---------------------------------------------------------------------------
# Helpers every LocalLinker uses


def map_storage(fgraph, order, input_storage=None, output_storage=None, storage_map=None):
    """Give every variable of ``fgraph`` a storage cell; return ``(inputs, outputs, map)``.

    ``input_storage``/``output_storage`` are lists of cells to use for
    ``fgraph.inputs``/``fgraph.outputs`` (new cells when None). Constants get a
    cell holding their data.
    """
    storage_map = {} if storage_map is None else storage_map
    if input_storage is None:
        input_storage = [[None] for _ in fgraph.inputs]
    elif len(input_storage) != len(fgraph.inputs):
        raise ValueError(
            f"input_storage has {len(input_storage)} cells, the graph has "
            f"{len(fgraph.inputs)} inputs"
        )
    for r, cell in zip(fgraph.inputs, input_storage):
        if storage_map.setdefault(r, cell) is not cell:
            raise ValueError(f"input_storage for {r} conflicts with the given storage_map")
    if output_storage is not None:
        if len(output_storage) != len(fgraph.outputs):
            raise ValueError(
                f"output_storage has {len(output_storage)} cells, the graph has "
                f"{len(fgraph.outputs)} outputs"
            )
        for r, cell in zip(fgraph.outputs, output_storage):
            if storage_map.setdefault(r, cell) is not cell:
                raise ValueError(f"output_storage for {r} conflicts with the given storage_map")
    for node in order:
        for r in node.inputs:
            if r not in storage_map:
                if not isinstance(r, Constant):
                    raise ValueError(
                        f"{r} is needed by {node.op} but is neither a graph input, a constant "
                        "nor computed by an earlier node"
                    )
                storage_map[r] = [r.data]
        for r in node.outputs:
            storage_map.setdefault(r, [None])
    for r in fgraph.outputs:
        if isinstance(r, Constant):
            storage_map.setdefault(r, [r.data])
    if output_storage is None:
        output_storage = [storage_map[r] for r in fgraph.outputs]
    return input_storage, output_storage, storage_map


def io_storage_map(fgraph, input_storage, output_storage, given=None) -> dict:
    """Theano's ``fn.storage_map`` for an engine whose values between nodes have no cells
    (they live in planned blocks or on a device): the inputs', the outputs' and the
    constants' cells. A constant's cell is its cell in ``given`` when it has one (a copy
    of a function that shares memory with it), else a new one.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> x = tt.dvector("x")
    >>> fg = FunctionGraph([x], [x * 2])
    >>> smap = io_storage_map(fg, [[None]], [[None]])
    >>> sorted(str(v) for v in smap)
    ['2', 'Elemwise{mul,no_inplace}.0', 'x']
    """
    given = given or {}
    smap = dict(zip(fgraph.inputs, input_storage))
    for var, cell in zip(fgraph.outputs, output_storage):
        smap.setdefault(var, cell)
    for node in fgraph.apply_nodes:
        for var in node.inputs:
            if var.owner is None and var not in smap and isinstance(var, Constant):
                smap[var] = given.get(var) or [var.data]
    return smap


def gc_helper(node_list):
    """Return ``(computed, last_user)``: the variables ``node_list`` computes, and the
    last node that reads each variable."""
    last_user, computed = {}, set()
    for node in node_list:
        for inp in node.inputs:
            last_user[inp] = node
        computed.update(node.outputs)
    return computed, last_user


def describe_value(value) -> str:
    """Short ``shape dtype`` description of a runtime value, for error messages.

    >>> import numpy as np
    >>> describe_value(np.zeros((2, 3), dtype="float32")), describe_value(None)
    ('(2, 3) float32', 'None (not computed)')
    """
    if value is None:
        return "None (not computed)"
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{tuple(shape)} {dtype}"
    return type(value).__name__


def raise_with_op(fgraph, node, exc: BaseException, position=None, storage_map=None):
    """Re-raise ``exc`` (raised while running ``node``) with where and on what it failed.

    The message says the op, the node's position in the run order, and the
    shape and dtype of each input; the exception type is kept and the original
    is chained as ``__cause__``. The new exception also carries ``.node`` and
    ``.position`` for programs.
    """
    if position is None:
        try:
            position = fgraph.toposort().index(node)
        except Exception:
            position = "?"
    lines = [str(exc) or type(exc).__name__]
    lines.append(f"Apply node that caused the error: {node}")
    lines.append(f"Toposort index: {position}")
    lines.append("Inputs types: [" + ", ".join(str(i.type) for i in node.inputs) + "]")
    if storage_map is not None:
        values = [(storage_map.get(i) or [None])[0] for i in node.inputs]
        described = [
            # None in a graph input's cell is what the call gave (Theano passes None
            # through to the ops): not a value left uncomputed.
            "None (given as the input's value)"
            if v is None and i.owner is None
            else describe_value(v)
            for i, v in zip(node.inputs, values)
        ]
        lines.append("Inputs shapes and dtypes: [" + ", ".join(described) + "]")
    lines.extend(creation_lines(node))
    if config.exception_verbosity == "high" and storage_map is not None:
        lines.append("Inputs values:")
        for i, v in zip(node.inputs, values):
            text = repr(v).replace("\n", " ")
            lines.append(f"  {i}: {text[:200] + ' ...' if len(text) > 200 else text}")
    else:
        lines.append(
            "HINT: Use the flag exception_verbosity=high for the values of the node's inputs."
        )
    msg = "\n".join(lines)
    new = with_message(exc, msg, fallback=None)
    if isinstance(new, MemoryError) and str(new) != msg:
        # numpy's MemoryError prints its array's shape whatever its args: a plain one.
        new = MemoryError(msg)
    new.node = node
    new.position = position
    if new is exc:
        raise exc
    raise new from exc


def creation_lines(node) -> list:
    """Where the user made ``node`` (Theano's "Backtrace when the node is created"), from
    its outputs' ``tag.trace``: one stack per node of the user's graph it stands for."""
    stacks: list = []
    for out in node.outputs:
        for stack in get_stack_trace(out):
            if stack not in stacks:
                stacks.append(stack)
    if not stacks:
        return [
            "HINT: Re-running with the flag traceback__limit=N (N > 0, the default is 8) "
            "gives the back-trace of where this node was created."
        ]
    lines = [
        "Backtrace when the node is created (use the flag traceback__limit=N to make it " "longer):"
    ]
    for k, stack in enumerate(stacks):
        if k:
            lines.append("and (a node fused or rewritten into this one):")
        lines.extend(line.rstrip("\n") for line in traceback.format_list(stack))
    return lines


class Streamline(Thunk):
    """Empty the ``no_recycling`` cells, then run every node's thunk in order."""

    def __init__(self, fgraph, thunks, order, steps, no_recycling, storage_map):
        self.fgraph, self.thunks, self.nodes = fgraph, thunks, order
        self.steps, self.no_recycling, self.storage_map = steps, no_recycling, storage_map

    def __call__(self):
        for cell in self.no_recycling:
            cell[0] = None
        k = 0
        try:
            for thunk, old_storage in self.steps:
                thunk()
                for cell in old_storage:
                    cell[0] = None
                k += 1
        except Exception as e:
            raise_with_op(self.fgraph, self.nodes[k], e, position=k, storage_map=self.storage_map)


class ProfiledStreamline(Streamline):
    """A Streamline that times each node into ``profile`` (a ProfileStats): a class
    of its own, so the plain run keeps its loop without a clock."""

    def __init__(self, *args, profile):
        super().__init__(*args)
        self.profile = profile
        profile.set_nodes(self.nodes)

    def __call__(self):
        prof, clock = self.profile, time.perf_counter
        times, calls = prof.node_time, prof.node_calls
        start = clock()
        for cell in self.no_recycling:
            cell[0] = None
        k = 0
        try:
            for thunk, old_storage in self.steps:
                t0 = clock()
                thunk()
                times[k] += clock() - t0
                calls[k] += 1
                for cell in old_storage:
                    cell[0] = None
                k += 1
        except Exception as e:
            raise_with_op(self.fgraph, self.nodes[k], e, position=k, storage_map=self.storage_map)
        finally:
            prof.calls += 1
            prof.call_time += clock() - start


def streamline(
    fgraph,
    thunks,
    order,
    post_thunk_old_storage=None,
    no_recycling=None,
    storage_map=None,
    profile=None,
) -> Streamline:
    """Return one Thunk that empties ``no_recycling`` cells, then runs every thunk.

    ``post_thunk_old_storage[k]`` lists the cells to empty after thunk ``k``
    (garbage collection of intermediates); None disables that. ``profile`` (a
    ProfileStats) makes the thunk time each node into it.
    """
    no_recycling = list(no_recycling or [])
    if len(thunks) != len(order):
        raise ValueError(f"{len(thunks)} thunks for {len(order)} nodes")
    if post_thunk_old_storage is not None and len(post_thunk_old_storage) != len(thunks):
        raise ValueError(f"{len(post_thunk_old_storage)} gc lists for {len(thunks)} thunks")
    steps = list(zip(thunks, post_thunk_old_storage or [()] * len(thunks)))
    args = (fgraph, list(thunks), list(order), steps, no_recycling, storage_map)
    if profile is not None:
        return ProfiledStreamline(*args, profile=profile)
    return Streamline(*args)


# ---------------------------------------------------------------------------
# Linkers


class Linker:
    """Base of all linkers: ``accept(fgraph)`` then ``make_thunk()``.

    ``allow_gc`` says whether intermediates may be freed during a run;
    ``scheduler`` (a callable ``fgraph -> [Apply]``) replaces ``fgraph.toposort``.

    A linker only links: ``accept`` never changes the graph. The graph changes an
    engine needs (its *lowering*: row tiling, device placement) are passes of the
    optimizer database tagged with the engine's name; a Mode's query includes the
    tags in ``required_rewrites`` and leaves out those in ``incompatible_rewrites``
    (PyTensor's names).

    ``supports_incremental``: the engine can recompute only what changed
    (``function(..., incremental=True)`` sets its ``incremental``).
    """

    required_rewrites: tuple = ()
    incompatible_rewrites: tuple = ()
    supports_incremental = False

    def __init__(self, *, allow_gc: bool | None = None, scheduler: Callable | None = None):
        self._allow_gc = allow_gc
        self._scheduler = scheduler

    @property
    def allow_gc(self) -> bool | None:
        return self._allow_gc

    def clone(self, allow_gc: bool | None = None):
        """A copy of this linker, not bound to a graph, optionally with another ``allow_gc``."""
        new = copy(self)
        if allow_gc is not None:
            new._allow_gc = allow_gc
        if hasattr(new, "fgraph"):
            new.fgraph = None
        return new

    def accept(self, fgraph, no_recycling=None, profile=None):
        raise NotImplementedError(f"{type(self).__name__}.accept is not implemented")

    def inner_linker(self):
        """The linker of the inner graphs (a scan's step, a lazy branch, an OpFromGraph's
        body) that an op of a graph of this engine compiles with no mode of its own
        (``engines.inner.inner_mode``): this linker itself. An engine whose per-call
        cost is too high for a step answers with another: the Dask engine runs a scan
        node as one task, and its step on the CPU engine inside it.

        >>> linker = PerformLinker()
        >>> linker.inner_linker() is linker
        True
        """
        return self

    def accept_var_updates(self, updates):
        """``{shared input variable: its update output}`` (FunctionMaker tells every linker;
        engines that keep updated values in place use it)."""

    def make_thunk(self, **kwargs):
        """Return ``(thunk, input_containers, output_containers)``; the thunk is a
        :class:`~theano_dag.engines.callspec.Thunk`."""
        raise NotImplementedError(f"{type(self).__name__}.make_thunk is not implemented")

    def make_function(self, unpack_single=True, **kwargs):
        """A plain callable over the graph's inputs (no input checking beyond ``filter``)."""
        thunk, inputs, outputs = self.make_thunk(**kwargs)

        def execute(*args):
            if len(args) != len(inputs):
                raise TypeError(
                    f"Function call takes exactly {len(inputs)} args ({len(args)} given)"
                )
            for arg, container in zip(args, inputs):
                container.data = arg
            thunk()
            values = [c.data for c in outputs]
            return values[0] if unpack_single and len(values) == 1 else values

        execute.thunk, execute.inputs, execute.outputs = thunk, inputs, outputs
        return execute

    def schedule(self, fgraph) -> list:
        """The order in which nodes run: the scheduler's, else ``fgraph.toposort()``."""
        if callable(self._scheduler):
            return self._scheduler(fgraph)
        return fgraph.toposort()


class LocalLinker(Linker):
    """A linker that keeps every node and runs one thunk per node.

    Subclasses implement ``make_all`` returning
    ``(fn, input_containers, output_containers, thunks, order)``.
    """

    def make_thunk(self, input_storage=None, output_storage=None, storage_map=None):
        return self.make_all(
            input_storage=input_storage, output_storage=output_storage, storage_map=storage_map
        )[:3]

    def make_all(self, input_storage=None, output_storage=None, storage_map=None):
        raise NotImplementedError(f"{type(self).__name__}.make_all is not implemented")


class PerformLinker(LocalLinker):
    """Run ``Op.perform`` of every node in topological order: the reference engine.

    With ``allow_gc`` (default: ``config.allow_gc``) an intermediate value is
    dropped as soon as its last reader has run.

    >>> from theano_dag.graph.basic import Apply
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> from theano_dag.graph.op import Op
    >>> from theano_dag.graph.type import Generic
    >>> class Concat(Op):
    ...     __props__ = ()
    ...     def make_node(self, a, b):
    ...         return Apply(self, [a, b], [Generic()()])
    ...     def perform(self, node, inputs, out):
    ...         out[0][0] = inputs[0] + inputs[1]
    >>> a, b = Generic()("a"), Generic()("b")
    >>> fg = FunctionGraph([a, b], [Concat()(Concat()(a, b), a)])
    >>> f = PerformLinker().accept(fg).make_function()
    >>> f("x", "y")
    'xyx'
    """

    def __init__(self, allow_gc=None, schedule=None):
        if allow_gc is None:
            allow_gc = config.allow_gc
        super().__init__(allow_gc=allow_gc, scheduler=schedule)
        self.fgraph = None
        self.no_recycling = []
        self.profile = None

    def accept(self, fgraph, no_recycling=None, profile=None):
        """Bind this linker to ``fgraph`` (a new linker if already bound to another).
        ``profile`` (True or a ProfileStats): time every node."""
        if self.fgraph is not None and self.fgraph is not fgraph:
            return type(self)(allow_gc=self.allow_gc, schedule=self._scheduler).accept(
                fgraph, no_recycling, profile
            )
        self.fgraph = fgraph
        self.no_recycling = list(no_recycling or [])
        self.profile = profile
        return self

    def make_all(self, input_storage=None, output_storage=None, storage_map=None):
        fgraph = self.fgraph
        if fgraph is None:
            raise ValueError("PerformLinker.make_all: call accept(fgraph) first")
        t0 = time.perf_counter()
        order = self.schedule(fgraph)
        input_storage, output_storage, storage_map = map_storage(
            fgraph, order, input_storage, output_storage, storage_map
        )
        compute_map = {k: [k.owner is None] for k in storage_map}
        thunks = []
        for node in order:
            thunk = node.op.make_thunk(node, storage_map, compute_map, self.no_recycling, "py")
            thunk.inputs = [storage_map[v] for v in node.inputs]
            thunk.outputs = [storage_map[v] for v in node.outputs]
            thunks.append(thunk)

        post_thunk_old_storage = None
        if self.allow_gc:
            computed, last_user = gc_helper(order)
            outputs = set(fgraph.outputs)
            post_thunk_old_storage = [
                [
                    storage_map[i]
                    for i in dict.fromkeys(node.inputs)
                    if i in computed and i not in outputs and last_user[i] is node
                ]
                for node in order
            ]
        graph_inputs = set(fgraph.inputs)
        no_recycling = [storage_map[r] for r in self.no_recycling if r not in graph_inputs]
        profile = None
        if self.profile:
            profile = (
                self.profile
                if isinstance(self.profile, ProfileStats)
                else ProfileStats(name=getattr(fgraph, "name", None), engine="reference engine")
            )
        fn = streamline(
            fgraph,
            thunks,
            order,
            post_thunk_old_storage,
            no_recycling,
            storage_map=storage_map,
            profile=profile,
        )
        if profile is not None:
            profile.link_time += time.perf_counter() - t0
        fn.allow_gc = self.allow_gc
        return (
            fn,
            [Container(r, cell) for r, cell in zip(fgraph.inputs, input_storage)],
            [Container(r, cell, readonly=True) for r, cell in zip(fgraph.outputs, output_storage)],
            thunks,
            order,
        )


class WrapLinker(Linker):
    """Run several LocalLinkers side by side, node by node, through a ``wrapper``.

    ``wrapper(fgraph, i, node, *thunks)`` is called for the ``i``-th node with
    one thunk per linker (it must call them to run them). Each linker has its
    own storage; the first linker's inputs and outputs are the ones returned.
    This is how an engine is checked against the reference one node at a time.
    """

    def __init__(self, linkers, wrapper):
        super().__init__()
        self.fgraph = None
        self.linkers = list(linkers)
        self.wrapper = wrapper
        self.no_recycling = []

    def __copy__(self):
        return type(self)(linkers=[copy(x) for x in self.linkers], wrapper=self.wrapper)

    def clone(self, allow_gc=None):
        return type(self)(
            linkers=[x.clone(allow_gc=allow_gc) for x in self.linkers], wrapper=self.wrapper
        )

    def accept(self, fgraph, no_recycling=None, profile=None):
        if self.fgraph is not None and self.fgraph is not fgraph:
            return type(self)(self.linkers, self.wrapper).accept(fgraph, no_recycling)
        self.fgraph = fgraph
        self.no_recycling = list(no_recycling or [])
        self.linkers = [lk.accept(fgraph, no_recycling) for lk in self.linkers]
        return self

    def pre(self, f, inputs, order, thunk_groups):
        """Hook run before each call with the input values (nothing by default)."""

    def make_thunk(self, **kwargs):
        no_recycling = set(self.no_recycling)
        made = [self.linkers[0].make_all(**kwargs)]
        kwargs.pop("input_storage", None)
        made += [lk.make_all(**kwargs) for lk in self.linkers[1:]]
        fns, input_lists, output_lists, thunk_lists, order_lists = zip(*made)
        for other in order_lists[1:]:
            if list(other) != list(order_lists[0]):
                raise ValueError(
                    "All linkers to WrapLinker should execute operations in the same order."
                )
        inputs0, outputs0 = input_lists[0], output_lists[0]
        thunk_groups = list(zip(*thunk_lists))
        order = list(order_lists[0])
        to_reset = [
            thunk.outputs[j]
            for thunks, node in zip(thunk_groups, order)
            for j, out in enumerate(node.outputs)
            if out in no_recycling
            for thunk in thunks
        ]
        fgraph, wrapper, pre = self.fgraph, self.wrapper, self.pre
        storage_map = as_thunk(fns[0]).storage_map

        def f():
            for inputs in input_lists[1:]:
                for c0, c in zip(inputs0, inputs):
                    c.storage[0] = copy(c0.storage[0])
            for cell in to_reset:
                cell[0] = None
            pre(self, [c.data for c in inputs0], order, thunk_groups)
            for i, (thunks, node) in enumerate(zip(thunk_groups, order)):
                try:
                    wrapper(fgraph, i, node, *thunks)
                except Exception as e:
                    raise_with_op(fgraph, node, e, position=i, storage_map=storage_map)

        thunk = CallableThunk(f, storage_map=storage_map)
        thunk.thunk_groups = thunk_groups
        return thunk, inputs0, outputs0


def WrapLinkerMany(linkers, wrappers):
    """A WrapLinker whose wrapper calls each of ``wrappers`` in turn."""

    def wrapper(*args):
        for w in wrappers:
            w(*args)

    return WrapLinker(linkers, wrapper)
