"""``CPULinker``: the CPU engine's linker (``Mode(linker="cpu")``, the default).

``accept(fgraph)`` then ``make_thunk()`` give a :class:`CPUThunk`; the first call
with a given input-shape signature infers every shape, plans memory and
generates the plan's code; later calls with that signature run the generated
code directly. ``Function`` asks the thunk for its call path
(:meth:`CPUThunk.make_call`, given the frozen ``CallSpec``): a :class:`CPUCall`
whose entry is a generated specialisation of the spec's call for the current
signature. It checks the inputs with a few identity and tuple compares, runs,
stores the updates and returns the outputs, so a call costs little more than the
numpy calls themselves; anything unusual goes to the plain call
(``engines.callspec.PlainCall``) of the same spec.

One thread at a time: the plan's blocks are reused by every call (as Theano's
storage is). ``Function`` sees to it: a thread other than the one that made the
function calls a copy of its own (``Function._call_in_other_thread``). The generated
code runs where numpy ignores floating-point errors: inside one
``contextvars.Context`` per function, entered by the C half of the call, or, when
that is busy or not built, with numpy's error state set in the caller's own context.
"""

from __future__ import annotations

import functools
import time
from collections import OrderedDict

import numpy as np

from theano_dag.config import config
from theano_dag.engines.basic import Container, Linker, PerformLinker, io_storage_map
from theano_dag.engines.callspec import (
    NATIVE_CALL,
    CallPath,
    CallSpec,
    Guard,
    PlainCall,
    Thunk,
    buffer_owner,
)
from theano_dag.engines.cpu.emit.codegen import (
    _persistent,
    build_core,
    build_fast,
    err_off,
    err_on,
    errstate_var,
    ignoring_context,
)
from theano_dag.engines.cpu.plan.program import Program
from theano_dag.engines.cpu.profile import CPUProfile
from theano_dag.engines.profile import ProfileStats
from theano_dag.graph.utils import gc_paused
from theano_dag.scalar.basic import ScalarType
from theano_dag.sparse.type import SparseType
from theano_dag.tensor.type import TensorType

__all__ = ["CPULinker", "CPUThunk", "CPUCall", "MAX_PLANS"]

# Plans (each with its blocks) kept per function; the least recently made goes first.
MAX_PLANS = 8


class CPULinker(Linker):
    """Link a FunctionGraph into planned, generated numpy code.

    ``incremental``: recompute only what depends on inputs that changed since the
    last call. ``min_plan_bytes``: values smaller than this are left to numpy's
    allocator (0 plans everything; default: the flag ``cpu__min_plan_bytes``, read when
    a function is made, as ``poison`` is). ``profile``: collect a :class:`CPUProfile`
    (``function(..., profile=True)`` sets it). ``tile``: run the row-local part of
    the graph over tiles of the batch where that saves memory (see ``tiling``); the
    tiling is the optdb pass tagged ``row_tiling``, which ``tile=False`` (like
    ``Mode.excluding("row_tiling")``) leaves out of the Mode's query. ``poison``: a
    checking mode for tests (default: the flag ``cpu__poison``): each plan is checked
    (:meth:`~theano_dag.engines.cpu.plan.program.Plan.check`), every planned buffer is
    filled with NaN (floats) or ``0xA5`` bytes (integers) before it is written, and
    each step must leave its output in the buffer it was given; a value read before
    it is written then shows every time, instead of by luck.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> from theano_dag.compile.function import function
    >>> from theano_dag.compile.mode import Mode
    >>> x = tt.dvector("x")
    >>> f = function([x], tt.exp(x) * 2 + 1, mode=Mode(linker=CPULinker(), optimizer=None))
    >>> f(np.zeros(3))
    array([3., 3., 3.])
    """

    supports_incremental = True

    def __init__(
        self,
        *,
        incremental=False,
        min_plan_bytes=None,
        profile=None,
        schedule=None,
        allow_gc=None,
        tile=True,
        poison=None,
    ):
        super().__init__(allow_gc=allow_gc, scheduler=schedule)
        if min_plan_bytes is not None and (
            not isinstance(min_plan_bytes, int)
            or isinstance(min_plan_bytes, bool)
            or min_plan_bytes < 0
        ):
            raise ValueError(
                f"CPULinker: min_plan_bytes must be an int >= 0, got " f"{min_plan_bytes!r}"
            )
        self.incremental = bool(incremental)
        self.min_plan_bytes = min_plan_bytes
        self.profile = profile
        self.tile = bool(tile)
        self.poison = None if poison is None else bool(poison)
        self.fgraph = None
        self.no_recycling = None
        self.updates = {}

    # The Mode's query runs the CPU engine's lowering passes (row tiling).
    required_rewrites = ("cpu",)

    @property
    def incompatible_rewrites(self):
        """Row tiling is left out when switched off, and for incremental runs (which
        track the nodes of the graph itself)."""
        return ("row_tiling",) if not self.tile or self.incremental else ()

    def _options(self):
        return dict(
            incremental=self.incremental,
            min_plan_bytes=self.min_plan_bytes,
            profile=self.profile,
            schedule=self._scheduler,
            allow_gc=self._allow_gc,
            tile=self.tile,
            poison=self.poison,
        )

    def accept(self, fgraph, no_recycling=None, profile=None):
        """Bind to ``fgraph`` (a fresh linker when already bound to another graph); the
        graph is left as it is (row tiling ran before, as an optdb pass)."""
        if self.fgraph is not None and self.fgraph is not fgraph:
            return type(self)(**self._options()).accept(fgraph, no_recycling, profile)
        self.fgraph = fgraph
        # None: nothing known, every output is the caller's; a list (FunctionMaker's):
        # the outputs not in it are borrowed (Out(borrow=True)).
        self.no_recycling = None if no_recycling is None else list(no_recycling)
        if profile:
            self.profile = profile
        mapping = getattr(fgraph, "update_mapping", None) or {}
        self.updates = {fgraph.inputs[i]: fgraph.outputs[o] for o, i in mapping.items()}
        return self

    def accept_var_updates(self, updates):
        """``{shared input variable: update output variable}`` (FunctionMaker's hook)."""
        self.updates = dict(updates)

    def make_thunk(self, input_storage=None, output_storage=None, storage_map=None):
        """Return ``(thunk, input_containers, output_containers)``."""
        fgraph = self.fgraph
        if fgraph is None:
            raise ValueError("CPULinker.make_thunk: call accept(fgraph) first")
        t0 = time.perf_counter()
        if input_storage is None:
            input_storage = [[None] for _ in fgraph.inputs]
        if len(input_storage) != len(fgraph.inputs):
            raise ValueError(
                f"input_storage has {len(input_storage)} cells, the graph has "
                f"{len(fgraph.inputs)} inputs"
            )
        if output_storage is None:
            output_storage = [[None] for _ in fgraph.outputs]
        if len(output_storage) != len(fgraph.outputs):
            raise ValueError(
                f"output_storage has {len(output_storage)} cells, the graph has "
                f"{len(fgraph.outputs)} outputs"
            )
        # Outputs the caller may keep between calls; all others (Out(borrow=True)) may
        # live in buffers the plan reuses.
        borrowed = []
        if self.no_recycling is not None:
            kept = set(self.no_recycling)
            borrowed = [o for o in fgraph.outputs if o.owner is not None and o not in kept]
        program = Program(
            fgraph,
            self.schedule(fgraph),
            updates=self.updates,
            borrowed=borrowed,
            incremental=self.incremental,
            min_plan_bytes=(
                config.cpu__min_plan_bytes if self.min_plan_bytes is None else self.min_plan_bytes
            ),
            poison=config.cpu__poison if self.poison is None else self.poison,
        )
        profile = None
        if self.profile:
            profile = (
                self.profile
                if isinstance(self.profile, ProfileStats)
                else CPUProfile(name=getattr(fgraph, "name", None))
            )
            profile.set_nodes([n for n, _, _ in program.node_steps])
            profile.link_time += time.perf_counter() - t0
        thunk = CPUThunk(program, input_storage, output_storage, profile)
        thunk.given_cells = storage_map  # a copy's cells of the original (share_memory)
        ins = [Container(r, cell) for r, cell in zip(fgraph.inputs, input_storage)]
        outs = [
            Container(r, cell, readonly=True) for r, cell in zip(fgraph.outputs, output_storage)
        ]
        return thunk, ins, outs


class CPUThunk(Thunk):
    """The thunk a CPULinker makes: runs the plan of the inputs' signature.

    Called with no arguments, it reads the input cells and fills the output
    cells (the ``Thunk`` protocol). ``make_call(spec)`` gives the generated call
    path, ``memory_plan()`` the current plan's
    :class:`~theano_dag.engines.memory.MemoryPlan`, ``source()`` its code.
    """

    allow_gc = True

    def __init__(self, program, input_storage, output_storage, profile=None):
        self.program = program
        self.input_storage = input_storage
        self.output_storage = output_storage
        self.profile = profile
        self.plans: OrderedDict = OrderedDict()
        self.current = None
        self.nodes_run = None
        self._reference = None  # the ops' perform over the same cells, made on first need
        self.given_cells = None
        self._storage_map = None
        p = program
        self._tensor = [_is_tensor_type(v.type) for v in p.inputs]
        self._sparse = [isinstance(v.type, SparseType) for v in p.inputs]
        self._dtypes = [
            np.dtype(v.type.dtype) if t else None for v, t in zip(p.inputs, self._tensor)
        ]
        if p.incremental:
            self._down = _downstream_masks(p)
            self._all = (1 << len(p.node_steps)) - 1
            self._last = [_NOTHING] * len(p.inputs)
            self._snap = [None] * len(p.inputs)

    # -- plans ---------------------------------------------------------------------

    def _signature(self, vals):
        sig = []
        for k, (v, is_t) in enumerate(zip(vals, self._tensor)):
            if not is_t:
                # A sparse matrix's shape lets the dense values after it be planned.
                sig.append(v.shape if self._sparse[k] and v is not None else None)
                continue
            if not isinstance(v, np.ndarray):
                var = self.program.inputs[k]
                raise InputValueError(
                    f"CPU engine: input {k} ({var}) has no array value "
                    f"(got {type(v).__name__}); expected {var.type}"
                )
            sig.append(v.shape)
        return tuple(sig)

    def plan_for(self, sig):
        """The plan of signature ``sig`` (made and cached on first use)."""
        plan = self.plans.get(sig)
        if plan is None:
            # Shapes, plan and code of a big graph: many small objects, which the thunk
            # keeps (promoted: the collection after the block does not walk them all).
            with gc_paused(promote=True):
                plan = self.program.plan(sig)
            if len(self.plans) >= MAX_PLANS:
                self.plans.popitem(last=False)
            self.plans[sig] = plan
            prof = self.profile
            if prof is not None:
                prof.plan_time += plan.plan_time
                prof.n_plans += 1
        if self.profile is not None:
            self.profile.memory = plan.memory
            self.profile.n_unplanned = plan.n_unplanned
            self.profile.own_bytes = plan.own_bytes
        self.current = plan
        return plan

    def _core(self, plan):
        if plan.core is None:
            p = self.program
            if p.incremental:
                n = len(_persistent(plan))
                plan.inc_values = [None] * n
                plan.core, plan.source_core = build_core(
                    plan, "incremental", {"_V": plan.inc_values}
                )
            elif self.profile is not None:
                prof = self.profile
                # One time and count per node, shared by every plan.
                times, calls = _Counters(prof), _Counters(prof, calls=True)
                plan.core, plan.source_core = build_core(
                    plan, "profile", {"_T": times, "_N": calls}
                )
            else:
                plan.core, plan.source_core = build_core(plan, "core")
            if self.profile is not None:
                self.profile.codegen_time += plan.codegen_time
        return plan.core

    # -- calls ---------------------------------------------------------------------

    def __call__(self):
        t0 = time.perf_counter()
        vals = [c[0] for c in self.input_storage]
        try:
            sig = self._signature(vals)
        except InputValueError:
            if not any(v is None and t for v, t in zip(vals, self._tensor)):
                raise
            self._run_reference()
            return
        plan = self.plan_for(sig)
        core = self._core(plan)
        if plan.kept_ids:
            # A value given in a buffer the plan keeps (a borrowed output fed back): a copy
            # (the call overwrites that buffer before it has read the value).
            kept = plan.kept_ids
            vals = [
                v.copy() if isinstance(v, np.ndarray) and id(buffer_owner(v)) in kept else v
                for v in vals
            ]
        if self.program.incremental:
            outs = self._run_incremental(plan, core, vals)
        else:
            outs = core(*vals)
        for cell, v in zip(self.output_storage, outs):
            cell[0] = v
        if self.profile is not None:
            self.profile.calls += 1
            self.profile.call_time += time.perf_counter() - t0

    def _run_reference(self):
        """Run this call on the ops' ``perform``, over the same cells: Theano lets an array
        input's value be None (``Default`` and ``Eye`` read it), which has no shape to plan
        memory for."""
        if self._reference is None:
            linker = PerformLinker().accept(self.program.fgraph, no_recycling=[])
            self._reference = linker.make_thunk(
                input_storage=self.input_storage, output_storage=self.output_storage
            )[0]
        self._reference()

    @property
    def storage_map(self) -> dict:
        """Theano's ``fn.storage_map`` of the cells this engine has (made on first use):
        the inputs', the outputs' and the constants'. The values between them live in
        the plans' blocks, which have no cells."""
        if self._storage_map is None:
            fgraph = self.program.fgraph
            self._storage_map = io_storage_map(
                fgraph, self.input_storage, self.output_storage, self.given_cells
            )
        return self._storage_map

    def free(self):
        """Drop the plans, with their blocks and code: the memory kept between calls.
        The next call plans its signature again."""
        self.plans.clear()
        self.current = None

    def run_values(self, vals):
        """Run on ``vals`` (one value per input) and return the outputs, without the
        cells: the call of an inner graph (``engines.inner``). The same plans and code as
        a call through the cells; profiles and incremental runs go through the cells.
        """
        if self.profile is not None or self.program.incremental or not all(self._tensor):
            for cell, v in zip(self.input_storage, vals):
                cell[0] = v
            self()
            return [cell[0] for cell in self.output_storage]
        plan = self.plans.get(tuple(v.shape for v in vals))
        if plan is None:
            plan = self.plan_for(self._signature(vals))
        core = plan.core if plan.core is not None else self._core(plan)
        return list(core(*vals))

    def fixed_shape_runner(self, vals):
        """``run(values) -> outputs`` for values of the shapes of ``vals`` (a loop's
        steps, ``engines.inner.InnerFunction.checked_runner``): ``run_values`` with the
        plan looked up once. None where ``run_values`` goes through the cells."""
        if self.profile is not None or self.program.incremental or not all(self._tensor):
            return None
        plan = self.plans.get(tuple(v.shape for v in vals))
        if plan is None:
            plan = self.plan_for(self._signature(vals))
        core = plan.core if plan.core is not None else self._core(plan)
        return lambda values: core(*values)

    def _run_incremental(self, plan, core, vals):
        fresh = getattr(plan, "inc_fresh", True) or self.program.has_destroyers
        plan.inc_fresh = False
        mask = self._all if fresh else 0
        for k, v in enumerate(vals):
            if fresh or _changed(v, self._last[k], self._snap[k]):
                mask |= self._down[k]
                self._last[k] = v
                self._snap[k] = _snapshot(v)
        outs = core(mask, *vals)
        self.nodes_run = bin(mask & self._all).count("1")
        if self.profile is not None:
            self.profile.nodes_run_last = self.nodes_run
            self.profile.nodes_run_total += self.nodes_run
        # Kept values must not reach the caller: hand out copies.
        return [np.array(o, copy=True) if isinstance(o, np.ndarray) else o for o in outs]

    def make_call(self, spec: CallSpec) -> CallPath:
        """The call path of a function over this thunk: a :class:`CPUCall` when the
        graph and the spec allow generated calls (tensor inputs, none of them mutable
        and given by the caller, no profiling, incremental run or dict of outputs),
        else the plain call."""
        p = self.program
        if (
            p.incremental
            or self.profile is not None
            or spec.profile is not None
            or spec.output_keys is not None
            or not all(self._tensor)
            or any(spec.inputs[k].mutable for k in spec.explicit)
        ):
            return PlainCall(spec, self)
        return CPUCall(self, spec)

    # -- inspection ----------------------------------------------------------------

    def memory_plan(self, shapes=None):
        """The MemoryPlan for ``shapes`` (one shape per input), or of the last call."""
        if shapes is not None:
            shapes = tuple(tuple(s) if s is not None else None for s in shapes)
            if len(shapes) != len(self.program.inputs):
                raise ValueError(
                    f"memory_plan: {len(shapes)} shapes for " f"{len(self.program.inputs)} inputs"
                )
            return self.plan_for(shapes).memory
        if self.current is None:
            static = [getattr(v.type, "shape", None) for v in self.program.inputs]
            if all(s is not None and None not in s for s in static):
                return self.plan_for(tuple(tuple(s) for s in static)).memory
            raise ValueError(
                "memory_plan: no call yet and the input shapes are not static; "
                "call the function once or pass shapes=[...]"
            )
        return self.current.memory

    def source(self):
        """The generated source of the current plan (the fast call's if it has one)."""
        plan = self.current
        if plan is None:
            raise ValueError("source: no plan yet; call the function first")
        if plan.fast is not None:
            return plan.source_fast
        self._core(plan)
        return plan.source_core


class CPUCall(CallPath):
    """The CPU engine's call path: for each input signature, generated code that
    specialises the spec's call (``codegen.build_fast``); the plain call of the same
    spec for anything else (keywords, defaults, other types, bad values).

    ``entry`` is the generated function of the last signature seen; a call with
    another signature goes through ``_switch``, which finds (or makes) that
    signature's plan and code and installs it as the entry.
    """

    def __init__(self, thunk: CPUThunk, spec: CallSpec):
        super().__init__()
        self.thunk = thunk
        self.spec = spec
        self.plain = PlainCall(spec, thunk)
        self.slow = self.plain.entry
        self.generated: dict = {}  # signature -> generated call
        self._guard_sig = None  # the signature the installed guard checks
        # With the C half of the call (callspec.NATIVE_CALL) the generated code is the
        # body of a Guard: the caller checks the explicit inputs and enters ctx, a
        # Context where numpy ignores floating-point errors (or, when it is busy, sets
        # that in its own). Without it the generated code checks its inputs and runs
        # inside ctx through a C-level partial. Only the thread that owns the function
        # calls it (Function._call_in_other_thread), so ctx is never entered twice.
        self.guarded = NATIVE_CALL
        self.ctx = ignoring_context()
        self.cv, self.ignore = errstate_var()
        self._general = self._ignoring(self._first_call)
        self._miss = self._ignoring(self._switch)
        self._install(self._first_call)
        if TensorType.filter_checks_isfinite:
            # Theano's switch was on when the function was made: every call filters its
            # arguments (TensorType.filter refuses NaN and infinities), so the plain call
            # serves them all; the generated code checks only dtypes and shapes.
            self.entry = self.slow

    def _install(self, fast, sig=None):
        if self.guarded and sig is not None:
            spec, dtypes = self.spec, self.thunk._dtypes
            guard = Guard(
                fast,
                self._miss,
                tuple(dtypes[k] for k in spec.explicit),
                tuple(sig[k] for k in spec.explicit),
                self.ctx,
                self.cv,
                self.ignore,
            )
            self.set_entry(self._general, guard)
            self._guard_sig = sig
            return
        self._guard_sig = None
        if sig is None:
            self.entry = self._general
        elif self.ctx is not None:
            self.entry = functools.partial(self.ctx.run, fast)  # no Python frame added
        else:
            self.entry = fast

    @staticmethod
    def _ignoring(fn):
        """``fn`` run where numpy ignores floating-point errors, in the caller's own
        context (safe from any thread, and inside another call of the function)."""

        def call(*args, **kwargs):
            token = err_off()
            try:
                return fn(*args, **kwargs)
            finally:
                err_on(token)

        return call

    def _first_call(self, *args, **kwargs):
        if kwargs:
            # Every input named once (PyMC3's point functions: f(**point)): the
            # generated code of their shapes, as a call by position would run.
            pos = self.spec.by_position(args, kwargs)
            if pos is None:
                return self.slow(*args, **kwargs)  # it raises the Function's own errors
            args = pos
        return self._switch(args)

    def _switch(self, args):
        """The generated call's slow half: find the plan of these inputs, install its code."""
        spec, thunk = self.spec, self.thunk
        if len(args) != len(spec.explicit):
            return self.slow(*args)
        vals = [cell[0] for cell in spec.input_cells]
        for pos, k in enumerate(spec.explicit):
            vals[k] = args[pos]
        for k, v in enumerate(vals):
            if type(v) is not np.ndarray or v.dtype is not thunk._dtypes[k]:
                return self.slow(*args)
        sig = tuple(v.shape for v in vals)
        if sig not in thunk.plans:
            try:
                for v, var in zip(vals, thunk.program.inputs):
                    var.type.filter(v, strict=True)
            except Exception:
                return self.slow(*args)  # it raises the Function's own message
        plan = thunk.plan_for(sig)
        fast = self.generated.get(sig)
        if fast is None:
            with gc_paused(promote=True):  # the code is kept, as the plan is
                fast, source = build_fast(
                    plan,
                    spec,
                    self.slow,
                    self._switch,
                    errstate=self.ctx is None,
                    guarded=self.guarded,
                )
            self.generated[sig] = fast
            plan.fast, plan.source_fast = fast, source  # for source()
        elif sig == self._guard_sig:
            return fast(*args)  # a call by keywords: the guard of its shapes is in place
        self._install(fast, sig)
        return fast(*args)


class _Counters:
    """A list-like view of a profile's per-node times (or call counts)."""

    __slots__ = ("prof", "calls")

    def __init__(self, prof, calls=False):
        self.prof, self.calls = prof, calls

    def __getitem__(self, k):
        return (self.prof.node_calls if self.calls else self.prof.node_time)[k]

    def __setitem__(self, k, v):
        (self.prof.node_calls if self.calls else self.prof.node_time)[k] = v


class _Nothing:
    pass


_NOTHING = _Nothing()


class InputValueError(TypeError, ValueError):
    """A tensor input's value is no ndarray (only with ``trust_input``, which skips the
    conversion): a TypeError, and the ValueError Theano programs catch."""


def _is_tensor_type(t):
    # A sparse matrix has a dtype and two dimensions too, but its value is no ndarray:
    # it runs through its op's perform and is never planned into a block; so does a
    # ScalarType input, whose value is a numpy scalar (np.int8(0)), not a 0-d array.
    return (
        getattr(t, "dtype", None) is not None
        and getattr(t, "ndim", None) is not None
        and not isinstance(t, (SparseType, ScalarType))
    )


def _downstream_masks(program):
    """For each input, the bit mask of the nodes (run order) that depend on it."""
    deps: dict = {}
    for k, v in enumerate(program.inputs):
        deps[v] = 1 << k
    down = [0] * len(program.inputs)
    for j, (node, _steps, _call) in enumerate(program.node_steps):
        d = 0
        for v in node.inputs:
            d |= deps.get(v, 0)
        for o in node.outputs:
            deps[o] = d
        k = 0
        while d:
            if d & 1:
                down[k] |= 1 << j
            d >>= 1
            k += 1
    return down


_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), tuple, np.generic)


def _snapshot(v):
    if isinstance(v, np.ndarray):
        return np.array(v, copy=True, order="C")
    return None


def _changed(v, last, snap):
    if v is not last:
        return True
    if isinstance(v, np.ndarray):
        if snap is None or snap.shape != v.shape or snap.dtype != v.dtype:
            return True
        # Bytes, not values: -0.0 against 0.0 or one NaN against another counts.
        a = np.ascontiguousarray(v).reshape(-1).view(np.uint8)
        return not np.array_equal(a, snap.reshape(-1).view(np.uint8))
    return not isinstance(v, _IMMUTABLE)
