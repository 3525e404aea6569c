"""The protocol between ``Function`` and an engine: a frozen call specification.

``FunctionMaker`` links the graph (``linker.make_thunk()`` gives a :class:`Thunk`
and the storage cells), describes the call in a :class:`CallSpec` (inputs with
their types and flags, defaults, updates, which outputs are returned, borrow
flags) and asks the thunk for the call: ``thunk.make_call(spec)`` returns one
:class:`CallPath`. A call of the Function runs ``path.entry``.

The call semantics are written once, here, in :class:`PlainCall`: input
checking and its messages, keywords, defaults, updates, what is returned,
``trust_input``. An engine may return a generated specialisation of the same
spec (the CPU engine does); it must behave as ``PlainCall(spec, thunk)`` does,
and hands anything unusual to it.

This module sits in the engines floor so that both ``compile`` (above) and every
engine can import it.

>>> import numpy as np
>>> from theano_dag.engines.basic import PerformLinker
>>> from theano_dag.graph.fg import FunctionGraph
>>> import theano_dag.tensor as tt
>>> x = tt.dvector("x")
>>> thunk, ins, outs = PerformLinker().accept(FunctionGraph([x], [x * 2])).make_thunk()
>>> spec = CallSpec(
...     inputs=(InputSpec(x.type, name="x", index=0, position=0),),
...     input_cells=tuple(c.storage for c in ins),
...     output_cells=tuple(c.storage for c in outs),
...     n_returned=1,
...     borrow=(False,),
...     unpack_single=True,
... )
>>> call = thunk.make_call(spec)
>>> call.entry([1.0, 2.0])
array([2., 4.])
>>> call.entry(y=1)
Traceback (most recent call last):
...
TypeError: Function got an unexpected keyword argument 'y'; its inputs are 'x'
"""

from __future__ import annotations

import copy as _copy
import operator
import os
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np

from theano_dag.graph.type import Type

try:  # the C half of the call, built by `pip install` where a C compiler is found
    from theano_dag.engines._callstub import CallBase as _NativeCallBase
except ImportError:
    _NativeCallBase = None

__all__ = [
    "InputSpec",
    "CallSpec",
    "CallPath",
    "CallBase",
    "Guard",
    "NATIVE_CALL",
    "CallProfile",
    "PlainCall",
    "Thunk",
    "CallableThunk",
    "as_thunk",
    "refuse_none",
    "with_message",
    "buffer_owner",
    "unaliased",
]


# ---------------------------------------------------------------------------
# The specification


_UNSET = object()  # a position a keyword call has not filled yet


@dataclass(frozen=True, eq=False)
class InputSpec:
    """One input of a compiled function, as a call sees it.

    ``index``: its place among all the graph's inputs; ``position``: its place among
    the inputs a caller gives (None: implicit, a shared variable's or a state's value,
    never given in a call). ``required``: a call must give it. ``refeed``: a call
    that does not give it uses ``default`` (already filtered). ``shared``: its cell is
    a shared variable's container. ``mutable``: the function may overwrite the value.
    ``strict``/``allow_downcast``: how ``type.filter`` converts a given value.
    ``update``: the index of the graph output that holds its next value.
    ``none_refused_by``: an op that reads the input and takes no None for it (a call
    giving None is refused, naming both), or None where a None may be given (its type
    has None among its values, or its readers take one: ``Op.takes_none``).
    """

    type: Type
    name: str | None = None
    index: int = 0
    position: int | None = None
    required: bool = True
    refeed: bool = False
    default: Any = None
    shared: bool = False
    mutable: bool = False
    strict: bool = False
    allow_downcast: bool | None = None
    update: int | None = None
    none_refused_by: Any = None

    @property
    def implicit(self) -> bool:
        return self.position is None

    def describe(self) -> str:
        """How an error message names this input."""
        pos = self.index if self.position is None else self.position
        if self.name is not None:
            return f"'{self.name}' (position {pos})"
        return f"at position {pos} (unnamed, {self.type})"


@dataclass(frozen=True, eq=False)
class CallSpec:
    """Everything a call of a compiled function needs to know, fixed once linked.

    ``input_cells``/``output_cells``: the storage cells the thunk reads and fills
    (one per graph input/output). The graph's first ``n_returned`` outputs are the
    function's outputs, the others the updates' new values. ``borrow[j]``: the
    engine may hand out output ``j`` in a buffer it reuses. The copies an output
    needs (one that would alias an input, a constant or another output) are in the
    graph already (``DeepCopyOp``, see ``compile.function_module.insert_deepcopy``),
    so a call never copies an output itself. ``freed_outputs``: the
    outputs whose cells a call empties once read (the engine frees memory early, so
    the function keeps no reference). ``unpack_single``/``return_none``/
    ``output_keys``: the call returns one value, None, or a dict. ``trust_input``:
    given values go to the thunk unchecked. ``profile``: counts calls and their
    time (None: no counting, which costs nothing).
    """

    inputs: tuple[InputSpec, ...]
    input_cells: tuple[list, ...]
    output_cells: tuple[list, ...]
    n_returned: int
    borrow: tuple[bool, ...]
    unpack_single: bool = False
    return_none: bool = False
    output_keys: tuple | None = None
    freed_outputs: tuple[int, ...] = ()
    trust_input: bool = False
    name: str | None = None
    profile: CallProfile | None = None

    def __post_init__(self):
        if len(self.input_cells) != len(self.inputs):
            raise ValueError(
                f"CallSpec: {len(self.input_cells)} input cells for {len(self.inputs)} inputs"
            )
        if len(self.borrow) != len(self.output_cells):
            raise ValueError(
                f"CallSpec: {len(self.borrow)} borrow flags for {len(self.output_cells)} outputs"
            )
        for spec in self.inputs:
            if spec.update is not None and not self.n_returned <= spec.update < len(
                self.output_cells
            ):
                raise ValueError(
                    f"CallSpec: the update of input {spec.describe()} is output {spec.update}, "
                    f"not one of the update outputs {self.n_returned}..{len(self.output_cells) - 1}"
                )

    # Derived once (a frozen spec never changes, so neither do these).

    @cached_property
    def label(self) -> str:
        return f"Function '{self.name}'" if self.name else "Function"

    @cached_property
    def explicit(self) -> tuple[int, ...]:
        """Indices of the inputs a caller gives, in call order."""
        return tuple(
            k for _, k in sorted((s.position, s.index) for s in self.inputs if not s.implicit)
        )

    @cached_property
    def updates(self) -> tuple[tuple[int, int], ...]:
        """``(input index, output index)`` of every update."""
        return tuple((s.index, s.update) for s in self.inputs if s.update is not None)

    @cached_property
    def by_name(self) -> dict:
        """Keyword name -> input index (ambiguous names are in ``ambiguous``)."""
        return {self.inputs[k].name: k for k in self.explicit if self.inputs[k].name is not None}

    @cached_property
    def ambiguous(self) -> frozenset:
        names = [self.inputs[k].name for k in self.explicit if self.inputs[k].name is not None]
        return frozenset(n for n in names if names.count(n) > 1)

    @cached_property
    def position_by_name(self) -> dict:
        """Keyword name -> the input's position in a call by position (names that are
        not ambiguous)."""
        names = ((self.inputs[k].name, p) for p, k in enumerate(self.explicit))
        return {n: p for n, p in names if n is not None and n not in self.ambiguous}

    def by_position(self, args, kwargs):
        """``args`` and ``kwargs`` of a call as one tuple by position, where they give
        every explicit input exactly once, each keyword the unambiguous name of an
        input; None for anything else (the plain call then sorts it out, or raises)."""
        if len(args) + len(kwargs) != len(self.explicit) or "output_subset" in kwargs:
            return None  # (output_subset is the plain call's keyword, not an input's)
        out = list(args) + [_UNSET] * len(kwargs)
        where = self.position_by_name
        for key, value in kwargs.items():
            p = where.get(key)
            if p is None or out[p] is not _UNSET:
                return None
            out[p] = value
        return tuple(out)

    def names_list(self) -> str:
        """The explicit inputs, as an error message lists them."""
        labels = []
        for pos, k in enumerate(self.explicit):
            nm = self.inputs[k].name
            labels.append(f"'{nm}'" if nm is not None else f"<unnamed {pos}>")
        return ", ".join(labels) if labels else "no inputs"

    def filter(self, k, value):
        """``value`` converted by input ``k``'s type, or an error that names the input.
        None is passed through (as Theano does) to the ops that read one."""
        if value is None:
            spec = self.inputs[k]
            if spec.none_refused_by is None:
                return None
            raise TypeError(
                f"{self.label}: bad input {spec.describe()}: None, where {spec.type} is "
                f"read by {spec.none_refused_by}, which takes a value (a None passes only "
                "to the ops that read one: default, eye's and tri's M, ifelse's branches)"
            )
        spec = self.inputs[k]
        try:
            return spec.type.filter(value, strict=spec.strict, allow_downcast=spec.allow_downcast)
        except Exception as e:
            raise with_message(e, f"{self.label}: bad input {spec.describe()}: {e}") from e

    def with_default(self, k, value) -> CallSpec:
        """A spec in which input ``k`` defaults to ``value`` (already filtered)."""
        spec = self.inputs[k]
        new = replace(spec, required=False, refeed=True, default=value)
        return replace(self, inputs=self.inputs[:k] + (new,) + self.inputs[k + 1 :])


def refuse_none(engine: str, variables, cells) -> None:
    """Raise TypeError naming the input where a cell of ``cells`` holds None and its
    variable's type has no None among its values: for an engine that computes on arrays
    only (a function passes a caller's None through, as Theano does, to the ops that read
    one, ``default`` or ``eye``; the CPU and OpenCL engines run those on the host).

    >>> import theano_dag.tensor as tt
    >>> refuse_none("Dask engine", [tt.dvector("x")], [[None]])
    Traceback (most recent call last):
    ...
    TypeError: Dask engine: input 'x' is None, not a value of TensorType(float64, vector): ...
    """
    for v, cell in zip(variables, cells):
        if cell[0] is None:
            try:
                v.type.filter(None)
            except Exception:
                name = f"'{v.name}'" if v.name else "(unnamed)"
                raise TypeError(
                    f"{engine}: input {name} is None, not a value of {v.type}: this engine "
                    "computes on arrays only (the CPU and OpenCL engines hand a None to the "
                    "ops that read one, as Theano does)"
                ) from None


def buffer_owner(value):
    """The object that owns ``value``'s memory: an array that owns its data, or the buffer
    (a memory map, bytes) an array was made over. Two arrays can share memory only if
    they have the same owner: numpy keeps a view's ``base`` at the array (or the foreign
    buffer) that owns the data, however many views lie between.

    >>> import numpy as np
    >>> a = np.zeros((3, 4))
    >>> buffer_owner(a[1:][:, 2]) is a, buffer_owner(a) is a
    (True, True)
    """
    base = getattr(value, "base", None)
    if base is None:
        return value
    # An array over a foreign buffer (np.frombuffer, a memmap): the buffer itself.
    outer = getattr(base, "base", None)
    return base if outer is None else outer


def unaliased(given, held):
    """``given`` (the arrays a caller passed) with a copy in place of each one that may
    share memory with an array of ``held`` (shared values that the call overwrites in
    place), or None when none does. A caller may pass a shared variable's own array
    (``get_value(borrow=True)``, or one given to ``shared(..., borrow=True)``), or a view
    of it: the call must read the value it had, not what an in-place update wrote there.

    >>> import numpy as np
    >>> w = np.ones(3)
    >>> unaliased((np.zeros(2),), (w,)) is None
    True
    >>> x, = unaliased((w[1:],), (w,))
    >>> x.base is None and x.tolist() == [1.0, 1.0]
    True
    """
    owners = {id(buffer_owner(h)) for h in held}
    if not any(id(buffer_owner(g)) in owners for g in given):
        return None
    return tuple(_copy.copy(g) if id(buffer_owner(g)) in owners else g for g in given)


def with_message(exc: BaseException, msg: str, fallback=TypeError) -> BaseException:
    """An exception of the same type as ``exc`` with message ``msg``. A type that cannot
    be built from one message (KeyError quotes it, some need several arguments) gives
    ``fallback(msg)``; with ``fallback=None``, ``exc`` itself with ``msg`` added.

    >>> with_message(ValueError("bad"), "input x: bad")
    ValueError('input x: bad')
    >>> with_message(KeyError("k"), "no k")
    TypeError('no k')
    """
    try:
        new = type(exc)(msg)
        if str(new) == msg:
            return new
    except Exception:
        pass
    if fallback is not None:
        return fallback(msg)
    exc.args = (msg,) if len(exc.args) <= 1 else exc.args + (msg,)
    return exc


@dataclass
class CallProfile:
    """Calls of one function and the time spent in them (``function(..., profile=True)``
    with an engine that has no profile of its own)."""

    calls: int = 0
    call_time: float = 0.0
    optimizer_time: float = 0.0
    nodes: list = field(default_factory=list)

    def summary(self, file=None, n_ops_to_print=20, n_apply_to_print=20) -> None:
        """Print :meth:`text` to ``file`` (default: ``sys.stderr``), as Theano does; this
        profile has no per-op tables, so the counts are ignored."""
        print(self.text(), file=sys.stderr if file is None else file)

    def text(self) -> str:
        per = self.call_time / self.calls * 1e6 if self.calls else 0.0
        return (
            f"calls: {self.calls}, time in calls: {self.call_time:.6f} s ({per:.1f} us per "
            f"call); optimizer: {self.optimizer_time:.6f} s"
        )

    __str__ = text


# ---------------------------------------------------------------------------
# The engine side


class Guard(NamedTuple):
    """A call the caller may run itself, in C, when the arguments pass its checks.

    ``body(*arrays)`` takes exactly ``len(dtypes)`` positional arguments, each an
    exact ``numpy.ndarray`` whose ``dtype`` is the given object and whose shape is the
    given tuple, and runs inside ``ctx`` (a ``contextvars.Context`` in which numpy
    ignores floating-point errors; None: the body sets that itself). When it is busy
    (another thread, a nested call), the caller sets ``cv`` to ``ignore`` in its own
    context instead. A call that fails a check runs ``miss(args)``; anything else the
    path's ``entry``.
    """

    body: Callable[..., Any]
    miss: Callable[[tuple], Any]
    dtypes: tuple
    shapes: tuple
    ctx: Any = None
    cv: Any = None
    ignore: Any = None


class CallPath(ABC):
    """What ``thunk.make_call(spec)`` returns: ``entry`` is the function a call runs.

    An engine may replace ``entry`` between calls (the CPU engine installs the
    generated code of the inputs' shapes), with or without a :class:`Guard`.
    Whoever calls through the path subscribes with ``watch(callback)``: the callback
    gets ``(entry, guard)`` at once and at each change, so the caller can keep them
    where a call finds them fastest (``Function``, a :class:`CallBase`, keeps them in
    its C half).
    """

    spec: CallSpec

    def __init__(self):
        self._entry = None
        self._guard = None
        self._watchers: list = []

    @property
    def entry(self) -> Callable[..., Any]:
        return self._entry

    @entry.setter
    def entry(self, fn):
        self.set_entry(fn)

    @property
    def guard(self) -> Guard | None:
        return self._guard

    def set_entry(self, fn, guard: Guard | None = None) -> None:
        """Make ``fn`` the entry (and ``guard``, if any, its checked fast call)."""
        self._entry, self._guard = fn, guard
        for callback in self._watchers:
            callback(fn, guard)

    def watch(self, callback: Callable[[Callable, Guard | None], None]) -> None:
        """Call ``callback(entry, guard)`` now and whenever the entry changes."""
        self._watchers.append(callback)
        callback(self._entry, self._guard)


class _PyCallBase:
    """The call of a compiled function where the C half is not built: ``f(...)``
    reads this thread's entry through C-level getters and runs it; a guard is not
    used (the entry handles every call)."""

    __call__ = property(operator.attrgetter("_local.entry"), doc="Call the function.")
    _guarded = False
    _entry = None

    def _set_owner(self, ident, other):
        self._owner = ident
        self._local = _ThreadEntry(ident, other, self._entry)

    def _set_entry(self, entry):
        self._entry = entry
        if threading.get_ident() == self._owner:
            self._local.entry = entry

    def _set_guard(self, entry, body, miss, array_type, dtypes, shapes, ctx, cv, ignore):
        self._set_entry(entry)


class _ThreadEntry(threading.local):
    """The Python half's entry, per thread: the owner's, or ``other`` elsewhere."""

    def __init__(self, owner, other, entry):
        self.entry = entry if threading.get_ident() == owner else other


#: The base class of ``Function``: its call checked and dispatched in C
#: (``engines/callstub.c``) when that was built, else :class:`_PyCallBase`.
#: ``THEANO_DAG_PY_CALL=1`` chooses the Python one (to test it, or to rule the C one out).
NATIVE_CALL = _NativeCallBase is not None and not os.environ.get("THEANO_DAG_PY_CALL")
CallBase = _NativeCallBase if NATIVE_CALL else _PyCallBase


class Thunk(ABC):
    """What ``linker.make_thunk()`` returns first: one run of the graph over the cells.

    Called with no arguments it reads the input cells and fills the output cells.
    ``allow_gc``: the engine frees intermediate values during a run. ``storage_map``:
    variable -> cell of every value (None if the engine keeps no such map).
    ``profile``: the engine's profile object (with ``summary()``), or None.
    ``make_call(spec)`` gives the call path (default: :class:`PlainCall`).
    """

    allow_gc: bool = False
    storage_map: dict | None = None
    profile: Any = None

    @abstractmethod
    def __call__(self) -> None: ...

    def make_call(self, spec: CallSpec) -> CallPath:
        """The call of a function over this thunk; engines may specialise it."""
        return PlainCall(spec, self)

    def memory_plan(self, shapes=None):
        """The engine's memory plan for ``shapes`` (engines that plan memory override this)."""
        raise NotImplementedError(
            f"its engine ({type(self).__name__}) does not plan memory; use Mode(linker='cpu')"
        )


class CallableThunk(Thunk):
    """A plain callable as a :class:`Thunk` (for engines that make a closure)."""

    def __init__(self, run: Callable[[], None], *, storage_map=None, allow_gc=False):
        self.run = run
        self.storage_map = storage_map
        self.allow_gc = allow_gc

    def __call__(self):
        self.run()


def as_thunk(fn) -> Thunk:
    """``fn`` if it is a :class:`Thunk`, else ``fn`` wrapped as one."""
    return fn if isinstance(fn, Thunk) else CallableThunk(fn)


# ---------------------------------------------------------------------------
# The semantics, written once


class PlainCall(CallPath):
    """The call of a function, in plain Python over a :class:`CallSpec`.

    Positional arguments fill the explicit inputs in order, keywords fill them by
    name (``output_subset=[...]`` picks outputs). Every value goes through its
    type's ``filter`` before any is stored, so a bad call leaves no trace. Inputs
    not given take their default. After the thunk runs, updates are stored all at
    once, and the outputs are returned as the spec says.
    """

    def __init__(self, spec: CallSpec, thunk: Callable[[], None]):
        super().__init__()
        self.spec = spec
        self.thunk = thunk
        cells = spec.input_cells
        self.explicit = spec.explicit
        self.explicit_cells = [cells[k] for k in spec.explicit]
        self.required_cells = [cells[k] for k in spec.explicit if spec.inputs[k].required]
        self.update_cells = [(cells[k], j) for k, j in spec.updates]
        self.out_cells = list(spec.output_cells)
        self.freed_cells = [spec.output_cells[j] for j in spec.freed_outputs]
        self.mutable = any(s.mutable for s in spec.inputs)
        # For each input, the earlier inputs of an equal type (the type tells whether two
        # values share memory): what a call compares when an input is mutable. Types
        # are fixed, so they are compared here once, not at every call. Arrays of other
        # types (a row of a shared matrix given for a vector) are compared by the owner
        # of their memory, in one pass (_unalias_inputs).
        types = [s.type for s in spec.inputs]
        self.alias_checks = []
        for k, t in enumerate(types):
            earlier = tuple(j for j in range(k) if types[j] == t)
            if earlier:
                self.alias_checks.append((k, t, earlier))
        self.implicit_names = {s.name for s in spec.inputs if s.implicit and s.name}
        self.entry = self.__call__

    def _collect(self, args, kwargs) -> dict:
        """Map each explicit input index to the raw value given for it; check the call."""
        spec = self.spec
        label, explicit = spec.label, self.explicit
        n = len(explicit)
        if len(args) > n:
            raise TypeError(
                f"{label} takes {n} input{'s' if n != 1 else ''} ({spec.names_list()}) "
                f"but {len(args)} {'was' if len(args) == 1 else 'were'} given"
            )
        given = {explicit[p]: a for p, a in enumerate(args)}
        for key, value in kwargs.items():
            if key in spec.ambiguous:
                raise TypeError(
                    f"{label}: the keyword '{key}' is ambiguous: several inputs have that "
                    "name; pass them by position"
                )
            k = spec.by_name.get(key)
            if k is None:
                if key in self.implicit_names:
                    raise TypeError(
                        f"{label}: input '{key}' is implicit (a shared variable or a "
                        "stored state) and cannot be given in a call; use set_value instead"
                    )
                raise TypeError(
                    f"{label} got an unexpected keyword argument '{key}'; its inputs are "
                    f"{spec.names_list()}"
                )
            if k in given:
                raise TypeError(
                    f"{label} got multiple values for input {spec.inputs[k].describe()}"
                )
            given[k] = value
        for k in explicit:
            if k not in given and spec.inputs[k].required:
                raise TypeError(f"{label} is missing a value for input {spec.inputs[k].describe()}")
        return given

    def __call__(self, *args, **kwargs):
        spec = self.spec
        t0 = time.perf_counter() if spec.profile is not None else 0.0
        output_subset = kwargs.pop("output_subset", None) if kwargs else None
        if spec.trust_input:
            for cell, a in zip(self.explicit_cells, args):
                cell[0] = a
        elif not kwargs and len(args) == len(self.explicit):
            # Every input given by position: the common case, kept short.
            values = [spec.filter(k, v) for k, v in zip(self.explicit, args)]
            for cell, v in zip(self.explicit_cells, values):
                cell[0] = v
            if self.mutable:
                self._unalias_inputs()
        else:
            given = self._collect(args, kwargs)
            # Filter everything before touching storage: a bad value leaves no trace.
            values = {k: spec.filter(k, v) for k, v in given.items()}
            for k, cell in zip(self.explicit, self.explicit_cells):
                if k in values:
                    cell[0] = values[k]
                elif spec.inputs[k].refeed:
                    default = spec.inputs[k].default
                    # A mutable input may be overwritten: never hand it the stored default.
                    cell[0] = _copy.copy(default) if spec.inputs[k].mutable else default
            if self.mutable:
                self._unalias_inputs()
        try:
            self.thunk()
        except Exception:
            self._clear_required()
            raise
        outputs = [cell[0] for cell in self.out_cells]
        self._clear_required()
        for cell in self.freed_cells:
            cell[0] = None
        # All updates at once, after every output is computed (so (a, b), (b, a) swaps).
        for cell, j in self.update_cells:
            cell[0] = outputs[j]
        if spec.profile is not None:
            spec.profile.calls += 1
            spec.profile.call_time += time.perf_counter() - t0
        if spec.return_none:
            return None
        if output_subset is not None:
            if spec.output_keys is not None:
                # Theano: with dict outputs, the subset names keys and a dict comes back.
                keys = spec.output_keys
                picked = [keys.index(k) if isinstance(k, str) else k for k in output_subset]
                return {keys[i]: outputs[i] for i in picked}
            return [outputs[i] for i in output_subset]
        if spec.unpack_single:
            return outputs[0]
        del outputs[spec.n_returned :]
        if spec.output_keys is not None:
            return dict(zip(spec.output_keys, outputs))
        return outputs

    def _clear_required(self):
        # Drop references to caller-provided values; they are not reused.
        for cell in self.required_cells:
            cell[0] = None

    def _unalias_inputs(self):
        """Copy input values that share memory with an earlier one, when any input is mutable
        (an op may destroy one and so change the other)."""
        cells = self.spec.input_cells
        copied = set()
        for k, t, earlier in self.alias_checks:
            val = cells[k][0]
            if val is None:
                continue
            for j in earlier:
                other = cells[j][0]
                if other is not None and j not in copied and t.may_share_memory(other, val):
                    cells[k][0] = _copy.copy(val)
                    copied.add(k)
                    break
        # Arrays of any types, by the owner of their memory: the first one keeps it.
        owners: dict = {}
        for k, cell in enumerate(cells):
            val = cell[0]
            if k in copied or not isinstance(val, np.ndarray):
                continue
            if owners.setdefault(id(buffer_owner(val)), k) != k:
                cell[0] = _copy.copy(val)
