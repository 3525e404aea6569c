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
"""

from __future__ import annotations

import copy as _copy
import operator
import time
import warnings

from theano_dag.compile.fgraph_setup import (
    alias_root,
    attach_protection,
    infer_reuse_pattern,
    insert_deepcopy,
    std_fgraph,
)
from theano_dag.compile.io import In, SymbolicInput, SymbolicOutput
from theano_dag.compile.mode import get_mode
from theano_dag.compile.sharedvalue import SharedVariable
from theano_dag.config import config
from theano_dag.engines.basic import Container
from theano_dag.graph.basic import Constant, Variable, ancestors, clone_get_equiv
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.toolbox import Supervisor

__all__ = [
    "Function",
    "FunctionMaker",
    "Supervisor",
    "UnusedInputError",
    "std_fgraph",
    "insert_deepcopy",
    "infer_reuse_pattern",
    "alias_root",
]


class UnusedInputError(ValueError):
    """A declared input of ``function`` is not needed to compute the outputs or updates."""


# ---------------------------------------------------------------------------
# The callable


def _input_desc(spec, position) -> str:
    if spec.name is not None:
        return f"'{spec.name}' (position {position})"
    return f"at position {position} (unnamed, {spec.variable.type})"


def _with_message(exc: BaseException, msg: str) -> BaseException:
    """An exception of the same type as ``exc`` with message ``msg`` (TypeError if the type
    cannot be built from a message)."""
    try:
        new = type(exc)(msg)
        if str(new) == msg:
            return new
    except Exception:
        pass
    return TypeError(msg)


class Function:
    """A compiled function: call it with the input values, get the outputs.

    Positional arguments fill the explicit inputs in order; keywords fill
    them by name. One output (given not in a list) is returned alone, a list
    of outputs as a list, no outputs as None. ``f.maker.fgraph`` is the
    optimized graph and ``f.fn`` the linker's thunk.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> from theano_dag.compile.function import function
    >>> x, y = tt.dvector("x"), tt.dvector("y")
    >>> f = function([x, y], x + y, name="add")
    >>> f([1.0, 2.0], y=np.ones(2))
    array([2., 3.])
    """

    def __init__(self, fn, input_storage, output_storage, maker, defaults, name=None):
        self.fn = fn
        self.input_storage = input_storage
        self.output_storage = output_storage
        self.maker = maker
        self.name = name
        self.profile = maker.profile
        # defaults[k] is (required, refeed, value) for each input.
        self.defaults = defaults
        self.trust_input = False
        inputs = maker.inputs
        self._explicit = [k for k, spec in enumerate(inputs) if not spec.implicit]
        self._by_name: dict = {}
        self._ambiguous: set = set()
        for k in self._explicit:
            nm = inputs[k].name
            if nm is None:
                continue
            if nm in self._by_name:
                self._ambiguous.add(nm)
            self._by_name[nm] = k
        self._implicit_names = {
            inputs[k].name: k for k, s in enumerate(inputs) if s.implicit and s.name
        }
        self._updates = [(k, spec) for k, spec in enumerate(inputs) if spec.update is not None]
        self._n_returned = len(maker.outputs)
        self._mutable = any(spec.mutable for spec in inputs)
        # Shared/implicit containers and user-visible lookup: variable or name -> index.
        self._finder: dict = {}
        for k, spec in enumerate(inputs):
            self._finder[spec.variable] = k
            if spec.name is not None and spec.name not in self._ambiguous:
                self._finder.setdefault(spec.name, k)
        self._prepare()
        # Engine hooks (the CPU engine): a profile object of its own, and a generated
        # call path it may install as self._entry (what a call runs; see __call__).
        prof = getattr(fn, "profile", None)
        if prof is not None and hasattr(prof, "summary"):
            prof.optimizer_time = getattr(maker, "optimizer_time", 0.0)
            self.profile = prof
        self._fast = None
        self._entry = self._call
        install = getattr(fn, "install_fast_call", None)
        if install is not None and getattr(maker, "output_keys", None) is None:
            install(self)

    # -- naming ---------------------------------------------------------------

    @property
    def _label(self) -> str:
        return f"Function '{self.name}'" if self.name else "Function"

    def _names_list(self) -> str:
        labels = []
        for k in self._explicit:
            nm = self.maker.inputs[k].name
            labels.append(f"'{nm}'" if nm is not None else f"<unnamed {self._explicit.index(k)}>")
        return ", ".join(labels) if labels else "no inputs"

    def _desc(self, k) -> str:
        pos = self._explicit.index(k) if k in self._explicit else k
        return _input_desc(self.maker.inputs[k], pos)

    # -- calling --------------------------------------------------------------

    def _collect(self, args, kwargs) -> dict:
        """Map each explicit input index to the raw value given for it; check the call."""
        n = len(self._explicit)
        if len(args) > n:
            raise TypeError(
                f"{self._label} takes {n} input{'s' if n != 1 else ''} ({self._names_list()}) "
                f"but {len(args)} {'was' if len(args) == 1 else 'were'} given"
            )
        given = {self._explicit[p]: a for p, a in enumerate(args)}
        for key, value in kwargs.items():
            if key in self._ambiguous:
                raise TypeError(
                    f"{self._label}: the keyword '{key}' is ambiguous: several inputs have that "
                    "name; pass them by position"
                )
            k = self._by_name.get(key)
            if k is None:
                if key in self._implicit_names:
                    raise TypeError(
                        f"{self._label}: input '{key}' is implicit (a shared variable or a "
                        "stored state) and cannot be given in a call; use set_value instead"
                    )
                raise TypeError(
                    f"{self._label} got an unexpected keyword argument '{key}'; its inputs are "
                    f"{self._names_list()}"
                )
            if k in given:
                raise TypeError(f"{self._label} got multiple values for input {self._desc(k)}")
            given[k] = value
        for k in self._explicit:
            if k not in given and self.defaults[k][0]:
                raise TypeError(f"{self._label} is missing a value for input {self._desc(k)}")
        return given

    def _filter(self, k, value):
        c = self.input_storage[k]
        if value is None:
            return None
        try:
            return c.type.filter(value, strict=c.strict, allow_downcast=c.allow_downcast)
        except Exception as e:
            msg = f"{self._label}: bad input {self._desc(k)}: {e}"
            raise _with_message(e, msg) from e

    def _prepare(self):
        """Precompute the per-call lists (storage cells never change once linked)."""
        cells = [c.storage for c in self.input_storage]
        self._explicit_cells = [cells[k] for k in self._explicit]
        self._required_cells = [cells[k] for k in self._explicit if self.defaults[k][0]]
        self._update_cells = [
            (cells[k], self._n_returned + j) for j, (k, _spec) in enumerate(self._updates)
        ]
        self._out_cells = [c.storage for c in self.output_storage]
        # With allow_gc the engine's output cells are emptied after a call, so the
        # function holds no reference to what it returned.
        self._gc_out_cells = (
            [
                c.storage
                for c, var in zip(self.output_storage, self.maker.fgraph.outputs)
                if var.owner is not None
            ]
            if getattr(self.fn, "allow_gc", False)
            else []
        )

    # ``f(...)`` calls ``f._entry(...)``: ``_call`` below, or the engine's generated call
    # path, which checks the inputs itself and falls back to ``_call`` for anything
    # unusual. Read through a C-level getter, so a call adds no Python frame of its own.
    __call__ = property(operator.attrgetter("_entry"), doc="Call the function.")

    def _call(self, *args, **kwargs):
        t0 = time.perf_counter()
        output_subset = kwargs.pop("output_subset", None) if kwargs else None
        if self.trust_input:
            for cell, a in zip(self._explicit_cells, args):
                cell[0] = a
        elif not kwargs and len(args) == len(self._explicit):
            # Every input given by position: the common case, kept short.
            values = [self._filter(k, v) for k, v in zip(self._explicit, args)]
            for cell, v in zip(self._explicit_cells, values):
                cell[0] = v
            if self._mutable:
                self._unalias_inputs()
        else:
            given = self._collect(args, kwargs)
            # Filter everything before touching storage: a bad value leaves no trace.
            values = {k: self._filter(k, v) for k, v in given.items()}
            for k, cell in zip(self._explicit, self._explicit_cells):
                if k in values:
                    cell[0] = values[k]
                elif self.defaults[k][1]:
                    default = self.defaults[k][2]
                    # A mutable input may be overwritten: never hand it the stored default.
                    cell[0] = _copy.copy(default) if self.maker.inputs[k].mutable else default
            if self._mutable:
                self._unalias_inputs()
        try:
            self.fn()
        except Exception:
            self._clear_required()
            raise
        outputs = [cell[0] for cell in self._out_cells]
        self._clear_required()
        for cell in self._gc_out_cells:
            cell[0] = None
        # All updates at once, after every output is computed (so (a, b), (b, a) swaps).
        for cell, j in self._update_cells:
            cell[0] = outputs[j]
        self.maker.mode.call_time += time.perf_counter() - t0
        if self.maker.return_none:
            return None
        if output_subset is not None:
            return [outputs[i] for i in output_subset]
        if self.maker.unpack_single:
            return outputs[0]
        if len(outputs) > self._n_returned:
            del outputs[self._n_returned :]
        if self.maker.output_keys is not None:
            return dict(zip(self.maker.output_keys, outputs))
        return outputs

    def _clear_required(self):
        # Drop references to caller-provided values; they are not reused.
        for cell in self._required_cells:
            cell[0] = None

    def _unalias_inputs(self):
        """Copy input values that share memory with an earlier one, when any input is mutable
        (an op may destroy one and so change the other)."""
        seen = []
        for c in self.input_storage:
            val = c.storage[0]
            if val is None:
                continue
            may_share = getattr(c.type, "may_share_memory", None)
            if may_share is None:
                continue
            if any(t == c.type and may_share(v, val) for t, v in seen):
                c.storage[0] = _copy.copy(val)
            else:
                seen.append((c.type, val))

    def memory_plan(self, shapes=None):
        """The engine's memory plan (blocks, planned bytes, eager and live peaks) for
        ``shapes`` (one shape per input) or for the last call's input shapes."""
        plan = getattr(self.fn, "memory_plan", None)
        if plan is None:
            raise NotImplementedError(
                f"{self._label}: its engine ({type(self.fn).__name__}) "
                "does not plan memory; use Mode(linker='cpu')"
            )
        return plan(shapes)

    # -- access to input values -----------------------------------------------

    def _index(self, item) -> int:
        if isinstance(item, (str, Variable)) and item in self._finder:
            return self._finder[item]
        if isinstance(item, int) and 0 <= item < len(self.input_storage):
            return item
        if isinstance(item, str) and item in self._ambiguous:
            raise KeyError(f"{self._label}: the name '{item}' is ambiguous")
        raise KeyError(f"{self._label} has no input {item!r}; its inputs are {self._names_list()}")

    def __getitem__(self, item):
        """The current default (or state) value of an input, by name, variable or index."""
        return self.input_storage[self._index(item)].storage[0]

    def __setitem__(self, item, value):
        """Set the default (or state) value of an input."""
        k = self._index(item)
        filtered = self._filter(k, value)
        self.input_storage[k].storage[0] = filtered
        required, refeed, _ = self.defaults[k]
        if refeed or required:
            self.defaults[k] = (False, True, filtered)
            self._prepare()

    def __contains__(self, item):
        try:
            self._index(item)
        except KeyError:
            return False
        return True

    @property
    def container(self):
        """``f.container[name]``: the Container of an input."""
        fn = self

        class _Containers:
            def __getitem__(self, item):
                return fn.input_storage[fn._index(item)]

        return _Containers()

    def get_shared(self):
        """The shared variables this function reads or updates."""
        return [spec.variable for spec in self.maker.inputs if spec.implicit]

    def free(self):
        """Drop the intermediate values kept between calls (when ``allow_gc`` is off)."""
        storage_map = getattr(self.fn, "storage_map", None)
        if storage_map is None or getattr(self.fn, "allow_gc", True):
            return
        for var, cell in storage_map.items():
            if not isinstance(var, Constant) and var.owner is not None:
                cell[0] = None

    # -- copying --------------------------------------------------------------

    def __copy__(self):
        return self.copy()

    def copy(self, share_memory=False, swap=None, delete_updates=False, name=None):
        """A new Function over a copy of the optimized graph, with its own storage.

        Shared variables stay shared (the copy reads and updates the same
        values) except those in ``swap``, a ``{old: new}`` dict of shared
        variables of the same type. ``delete_updates`` drops every update.
        ``share_memory`` shares the intermediate storage (not inputs/outputs).
        """

        maker = self.maker
        n_out = len(maker.outputs)
        out_vars = maker.fgraph.outputs if not delete_updates else maker.fgraph.outputs[:n_out]
        memo = clone_get_equiv(maker.fgraph.inputs, out_vars)
        fg_cpy = FunctionGraph(
            [memo[i] for i in maker.fgraph.inputs], [memo[o] for o in out_vars], clone=False
        )
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
                for v, cell in getattr(self.fn, "storage_map", {}).items()
                if v not in io_vars and v in memo
            }
        new_maker = FunctionMaker(
            ins,
            outs if not maker.unpack_single else outs[0],
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
        self.profile = profile
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
            if not hasattr(linker, "incremental"):
                raise ValueError(
                    f"incremental=True needs an engine that recomputes incrementally (the "
                    f"CPU engine, Mode(linker='cpu')); {type(linker).__name__} does not"
                )
            linker = linker.clone()  # the Mode's own linker stays as it was
            linker.incremental = True
            # The query follows the engine's options (no row tiling when incremental).
            mode = mode.clone(linker=linker)
        if fgraph is None:
            self._check_unused_inputs(inputs, outputs, on_unused_input)
            fgraph, additional = std_fgraph(inputs, outputs, accept_inplace)
            fgraph.profile = profile
            t0 = time.perf_counter()
            optimizer = mode.optimizer
            if optimizer is not None:
                run = getattr(optimizer, "optimize", None) or optimizer
                run(fgraph)
            self.optimizer_time = time.perf_counter() - t0
            insert_deepcopy(fgraph, inputs, outputs + additional)
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
        no_borrow = [v for v, spec in zip(fgraph.outputs, specs) if not spec.borrow]
        linker = mode.linker
        if not hasattr(linker, "accept"):
            raise ValueError(f"The linker of {self.mode} ({linker!r}) has no accept method")
        no_recycling = sorted(infer_reuse_pattern(fgraph, no_borrow), key=_topo_key(fgraph))
        self.linker = linker.accept(fgraph, no_recycling=no_recycling, profile=profile)
        if hasattr(self.linker, "accept_var_updates"):
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

    def _check_unused_inputs(self, inputs, outputs, on_unused_input):
        if on_unused_input is None:
            on_unused_input = config.on_unused_input
        if on_unused_input not in ("raise", "warn", "ignore"):
            raise ValueError(
                f"Invalid value for on_unused_input: {on_unused_input!r}; expected 'raise', "
                "'warn' or 'ignore'"
            )
        if on_unused_input == "ignore":
            return
        used = set(
            ancestors(
                [o.variable for o in outputs] + [i.update for i in inputs if i.update is not None],
                blockers=[i.variable for i in inputs],
            )
        )
        for k, spec in enumerate(inputs):
            if spec.variable in used or spec.update is not None:
                continue
            msg = (
                f"function was asked to compute outputs from input {_input_desc(spec, k)}, but "
                "that input is not part of the graph that computes the outputs. "
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
        for spec, c in zip(self.inputs, in_containers):
            c.strict = spec.strict
            c.allow_downcast = spec.allow_downcast
            c.name = spec.name
        f = Function(fn, in_containers, out_containers, self, defaults, name=self.name)
        # Defaults and non-shared state go through the type's filter once, here.
        for k, (spec, (required, refeed, value)) in enumerate(zip(self.inputs, defaults)):
            if (
                value is not None
                and not isinstance(spec.value, Container)
                and not _is_shared(spec.value)
            ):
                filtered = f._filter(k, value)
                in_containers[k].storage[0] = filtered
                if refeed:
                    f.defaults[k] = (required, refeed, filtered)
        return f


def _is_shared(value) -> bool:
    return isinstance(value, SharedVariable)


def _topo_key(fgraph):
    """Sort key giving a deterministic (topological) order to a set of variables."""
    rank = {}
    for k, node in enumerate(fgraph.toposort()):
        for j, o in enumerate(node.outputs):
            rank[o] = (k, j)
    return lambda v: rank.get(v, (-1, 0))
