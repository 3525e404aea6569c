"""The ``Scan`` op: a loop over an inner graph, with recurrent states and per-step outputs.

The layout is Theano's, reduced to three kinds of loop values:

- *sequences*: outer arrays of at least ``n_steps`` rows; step ``t`` reads row ``t``
  (``scan()`` turns each tap of a user's sequence into a slice of its own, and
  ``go_backwards`` into a reversed slice, so the op only walks forward);
- *states*: each with its taps (negative offsets into its own past); the outer input is
  the initial buffer of ``m = -min(taps)`` rows, the outer output the full buffer of
  ``m + n_steps`` rows (the initial rows first), written in place step after step;
- *per-step outputs* (Theano's "nit-sot"): row ``t`` of an outer output of ``n_steps``
  rows, allocated once the first step gives its shape.

*Carried values* (any type: a shared random generator updated by the step) go from
one step to the next and only their last value comes out (no buffer, no gradient).
Non-sequences are read unchanged at every step. With ``has_until`` the inner graph's
last output is a boolean scalar: the loop stops after the step where it is true, and the
outputs keep only the steps run.

Outer inputs: ``[n_steps, *sequences, *initial buffers, *carried, *non_sequences]``.
Inner inputs: ``[*sequence rows, *state taps (state by state, tap by tap), *carried,
*non_sequences]``. Outer outputs: ``[*state buffers, *per-step outputs, *carried]``; inner
outputs the same, by row, then the condition.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from theano_dag import tensor as tt
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.cpu.loop import KernelLoop, loop_library, record_step
from theano_dag.engines.inner import InnerMode, compile_inner, inner_mode
from theano_dag.graph.algorithms import io_connection_pattern
from theano_dag.graph.basic import Apply, Constant, Variable, ancestors, io_toposort
from theano_dag.graph.comparison import equal_computations
from theano_dag.graph.null_type import DisconnectedType, disconnected_type
from theano_dag.graph.op import Op
from theano_dag.graph.utils import MethodNotDefined
from theano_dag.scan.grad import scan_grad
from theano_dag.scan.step_kernels import StepOptimizer

__all__ = ["Scan"]
# Fewer steps than this run in Python: setting up the C loop costs a few steps' time.
C_LOOP_MIN_STEPS = 8


class Scan(Op):
    """A loop over an inner graph (see the module docstring for the layout).

    ``state_taps``: one tuple of negative taps per state. ``mode`` compiles the inner
    graph (through ``engines.inner.compile_inner``, once, on first run; None: the
    default mode; see ``engines.inner.inner_mode`` for the linker).
    ``truncate_gradient``: how many steps back the gradient flows (-1: all of them).
    ``store``: per state, 0 to keep all its steps, or ``S`` to keep its
    last ``S`` rows only, in a circular buffer (set by the memory rewrite
    ``local_scan_save_memory`` when only the last steps are read); the output is then
    those last rows.
    """

    __props__ = (
        "inner_inputs",
        "inner_outputs",
        "n_seqs",
        "state_taps",
        "n_nitsot",
        "has_until",
        "truncate_gradient",
        "mode",
        "name",
        "store",
        "n_carry",
    )

    def __init__(
        self,
        inner_inputs,
        inner_outputs,
        n_seqs,
        state_taps,
        n_nitsot,
        has_until=False,
        truncate_gradient=-1,
        mode=None,
        name=None,
        store=None,
        n_carry=0,
    ):
        self.inner_inputs = tuple(inner_inputs)
        self.inner_outputs = tuple(inner_outputs)
        self.n_seqs = int(n_seqs)
        self.state_taps = tuple(tuple(int(t) for t in taps) for taps in state_taps)
        self.n_nitsot = int(n_nitsot)
        self.has_until = bool(has_until)
        self.truncate_gradient = int(truncate_gradient)
        self.mode = mode
        self.name = name
        for taps in self.state_taps:
            if not taps or any(t >= 0 for t in taps):
                raise ValueError(f"Scan: state taps must be negative, got {list(taps)}")
        self.mintaps = tuple(-min(taps) for taps in self.state_taps)
        self.n_states = len(self.state_taps)
        self.store = tuple(int(s) for s in store) if store else (0,) * self.n_states
        if len(self.store) != self.n_states or any(
            0 < s <= m for s, m in zip(self.store, self.mintaps)
        ):
            raise ValueError(
                f"Scan: store {list(self.store)} must give each state 0 (all its steps) or "
                f"more rows than its taps reach back ({list(self.mintaps)})"
            )
        n_tap_inputs = sum(len(t) for t in self.state_taps)
        self.n_carry = int(n_carry)
        self.n_nonseqs = len(self.inner_inputs) - self.n_seqs - n_tap_inputs - self.n_carry
        n_out = self.n_states + self.n_nitsot + self.n_carry + int(self.has_until)
        if self.n_nonseqs < 0 or len(self.inner_outputs) != n_out:
            raise ValueError(
                f"Scan: {len(self.inner_inputs)} inner inputs and {len(self.inner_outputs)} "
                f"inner outputs do not fit {self.n_seqs} sequences, states with taps "
                f"{[list(t) for t in self.state_taps]} and {self.n_nitsot} per-step outputs"
            )
        self._fn = None
        self._loop_lib = None  # the C loop driver, when the step's engine has one

    def rebuilt(self, **changes):
        """A Scan like this one, with ``changes`` to its arguments (``inner_outputs``,
        ``n_nitsot``, ``store``...): what the loop rewrites and the gradient build from.
        """
        args = dict(
            inner_inputs=self.inner_inputs,
            inner_outputs=self.inner_outputs,
            n_seqs=self.n_seqs,
            state_taps=self.state_taps,
            n_nitsot=self.n_nitsot,
            has_until=self.has_until,
            truncate_gradient=self.truncate_gradient,
            mode=self.mode,
            name=self.name,
            store=self.store,
            n_carry=self.n_carry,
        )
        args.update(changes)
        return type(self)(**args)

    # Loops with the same inner computation are the same op (as Theano's), whatever their
    # inner variables: the merge rewrite then computes two such loops over one input once.
    _GRAPH_PROPS = ("inner_inputs", "inner_outputs")

    def _plain_props(self):
        return tuple(getattr(self, p) for p in self.__props__ if p not in self._GRAPH_PROPS)

    def __hash__(self):
        types = tuple(v.type for v in self.inner_inputs)
        return hash((type(self), self._plain_props(), types, len(self.inner_outputs)))

    def __eq__(self, other):
        if self is other:
            return True
        if type(other) is not type(self) or self._plain_props() != other._plain_props():
            return False
        a, b = self.inner_inputs, other.inner_inputs
        if a == b and self.inner_outputs == other.inner_outputs:
            return True
        if len(a) != len(b) or any(x.type != y.type for x, y in zip(a, b)):
            return False
        if len(self.inner_outputs) != len(other.inner_outputs):
            return False
        return equal_computations(self.inner_outputs, other.inner_outputs, a, b)

    @property
    def inputs(self):
        """Theano's name of the inner graph's inputs (``inner_inputs``)."""
        return list(self.inner_inputs)

    @property
    def outputs(self):
        """Theano's name of the inner graph's outputs (``inner_outputs``)."""
        return list(self.inner_outputs)

    def __str__(self):
        name = f"{self.name}, " if self.name else ""
        return (
            f"Scan{{{name}{self.n_seqs} seqs, {self.n_states} states, "
            f"{self.n_nitsot} outputs{', until' if self.has_until else ''}}}"
        )

    def __getstate__(self):
        # The compiled inner function is a cache; it is rebuilt on first run.
        state = dict(self.__dict__)
        state["_fn"] = None
        state["_loop_lib"] = None
        return state

    # -- the layout ------------------------------------------------------------------------

    def split_outer(self, inputs):
        """``(n_steps, sequences, initial buffers, carried, non_sequences)`` of the outer
        inputs."""
        a = 1 + self.n_seqs
        b = a + self.n_states
        c = b + self.n_carry
        return inputs[0], inputs[1:a], inputs[a:b], inputs[b:c], inputs[c:]

    # Theano's names of the layout's parts: of a list of inner inputs (``op.inputs``), or
    # of a node's outer inputs.
    def inner_seqs(self, inner_inputs):
        """The sequences' rows among ``inner_inputs``."""
        return list(inner_inputs[: self.n_seqs])

    def inner_non_seqs(self, inner_inputs):
        """The non-sequences among ``inner_inputs``."""
        return list(inner_inputs[len(inner_inputs) - self.n_nonseqs :])

    def outer_seqs(self, node):
        """The sequences among ``node``'s inputs."""
        return list(self.split_outer(node.inputs)[1])

    def outer_non_seqs(self, node):
        """The non-sequences among ``node``'s inputs."""
        return list(self.split_outer(node.inputs)[4])

    def inner_carry_inputs(self):
        """The inner inputs of the carried values."""
        first = self.n_seqs + sum(len(t) for t in self.state_taps)
        return list(self.inner_inputs[first : first + self.n_carry])

    def inner_tap_inputs(self):
        """The inner inputs of the states' taps, one list per state."""
        pos, out = self.n_seqs, []
        for taps in self.state_taps:
            out.append(list(self.inner_inputs[pos : pos + len(taps)]))
            pos += len(taps)
        return out

    @property
    def fn(self):
        """The compiled step (Theano's ``Scan.fn``), compiled on first use: called with the
        inner inputs' values, it returns the inner outputs'; ``fn.maker.fgraph`` is the
        step's graph as its rewrites left it.

        >>> import theano_dag.tensor as tt
        >>> from theano_dag.scan.basic import scan
        >>> x, w = tt.dvector("x"), tt.dscalar("w")
        >>> out, _ = scan(lambda v, w: v * w, sequences=x, non_sequences=w)
        >>> step = out.owner.op.fn
        >>> [float(v) for v in step(2.0, 3.0)], len(step.maker.fgraph.outputs)
        ([6.0], 1)
        """
        return CompiledStep(self._function())

    @property
    def var_mappings(self):
        """Theano's index maps between the node's outer inputs and outputs and the inner
        graph's (``Scan.var_mappings``): ``"<to>_from_<from>"`` for each pair of
        ``outer_inp``, ``inner_inp``, ``inner_out``, ``outer_out``. A map to an inner side
        gives a list of indices (a state's taps are several inner inputs), one to an outer
        side an index, -1 for none (n_steps and the non-sequences have no output; a
        per-step output has no outer input here: the layout has no buffer-length inputs,
        unlike Theano's, so the outer indices past the states differ from Theano's).

        >>> import theano_dag.tensor as tt
        >>> from theano_dag.scan.basic import scan
        >>> x, a0 = tt.dvector("x"), tt.dvector("a0")
        >>> out, _ = scan(lambda v, a2, a1: a2 + a1 * v, sequences=x,
        ...               outputs_info=dict(initial=a0, taps=[-2, -1]))
        >>> m = out.owner.inputs[0].owner.op.var_mappings
        >>> m["outer_inp_from_outer_out"], m["inner_inp_from_outer_inp"]
        ({0: 2}, {0: [], 1: [0], 2: [1, 2]})
        """
        # One entry per loop value: (outer input, inner inputs, inner outputs, outer output)
        entries = [(0, [], [], -1)]
        entries += [(1 + k, [k], [], -1) for k in range(self.n_seqs)]
        inner_in, inner_out = self.n_seqs, 0
        for k, taps in enumerate(self.state_taps):
            ins = list(range(inner_in, inner_in + len(taps)))
            entries.append((1 + self.n_seqs + k, ins, [inner_out], inner_out))
            inner_in, inner_out = inner_in + len(taps), inner_out + 1
        entries += [(-1, [], [inner_out + j], inner_out + j) for j in range(self.n_nitsot)]
        inner_out += self.n_nitsot
        first_carry = 1 + self.n_seqs + self.n_states
        for j in range(self.n_carry):
            entries.append((first_carry + j, [inner_in + j], [inner_out + j], inner_out + j))
        inner_in += self.n_carry
        first_ns = first_carry + self.n_carry
        entries += [(first_ns + j, [inner_in + j], [], -1) for j in range(self.n_nonseqs)]
        kinds = ("outer_inp", "inner_inp", "inner_out", "outer_out")
        maps = {f"{to}_from_{src}": {} for src in kinds for to in kinds if to != src}
        for entry in entries:
            for s, src in enumerate(kinds):
                keys = entry[s] if isinstance(entry[s], list) else [entry[s]]
                for key in keys:
                    if key == -1:
                        continue
                    for t, to in enumerate(kinds):
                        if t != s:
                            maps[f"{to}_from_{src}"][key] = entry[t]
        return maps

    # -- building ---------------------------------------------------------------------------

    def make_node(self, n_steps, *args):
        n_steps = tt.as_tensor_variable(n_steps)
        if n_steps.type.ndim != 0 or not n_steps.type.dtype.startswith(("int", "uint")):
            raise TypeError(f"{self}: n_steps must be an integer scalar, got type {n_steps.type}")
        if n_steps.type.dtype != "int64":
            n_steps = tt.cast(n_steps, "int64")
        expected = self.n_seqs + self.n_states + self.n_carry + self.n_nonseqs
        if len(args) != expected:
            raise TypeError(f"{self}: expected {expected} inputs after n_steps, got {len(args)}")
        args = [a if isinstance(a, Variable) else tt.as_tensor_variable(a) for a in args]
        _, seqs, inits, carries, nonseqs = self.split_outer([None, *args])
        inner_seqs = self.inner_inputs[: self.n_seqs]
        for k, (s, inner) in enumerate(zip(seqs, inner_seqs)):
            _check_row_type(self, f"sequence {k}", s, inner.type)
        taps = self.inner_tap_inputs()
        for k, (init, tap_vars) in enumerate(zip(inits, taps)):
            _check_row_type(self, f"initial state {k}", init, tap_vars[0].type)
        new_nonseqs = []
        inner_nonseqs = self.inner_inputs[len(self.inner_inputs) - self.n_nonseqs :]
        carry_vars = self.inner_carry_inputs()
        new_carries = [inner.type.filter_variable(a) for a, inner in zip(carries, carry_vars)]
        for k, (a, inner) in enumerate(zip(nonseqs, inner_nonseqs)):
            if a.type != inner.type:
                try:
                    a = inner.type.filter_variable(a)
                except TypeError as e:
                    raise TypeError(
                        f"{self}: non-sequence {k} should have type {inner.type}, "
                        f"got {a} of type {a.type}"
                    ) from e
            new_nonseqs.append(a)
        outs = [_rows_type(t[0].type)() for t in taps]
        nit = self.inner_outputs[self.n_states : self.n_states + self.n_nitsot]
        outs += [_rows_type(o.type)() for o in nit]
        outs += [v.type() for v in carry_vars]
        return Apply(self, [n_steps, *seqs, *inits, *new_carries, *new_nonseqs], outs)

    # -- running ----------------------------------------------------------------------------

    def _function(self):
        if self._fn is None:
            mode = inner_mode(self.mode)
            linker = mode.linker
            lib = None
            if self.n_carry == 0 and isinstance(linker, CPULinker):
                lib = loop_library()
            if lib is not None:
                # The C loop replays steps made of kernels only: make every elementwise
                # node one (a plain mul would be numpy's ufunc, called from Python).
                mode = InnerMode(linker, StepOptimizer(mode.optimizer))
            self._fn = compile_inner(list(self.inner_inputs), list(self.inner_outputs), mode)
            self._loop_lib = lib
        return self._fn

    def _c_loop(self, fn, calls, args, reads, outs, writes, nitsot, n):
        """The :class:`~theano_dag.engines.cpu.loop.KernelLoop` of the steps after the
        recorded first one, or None when its outputs cannot be copied as rows."""
        nst, n_read = self.n_states, len(reads)
        views = [(a, rows) for a, rows in zip(args[:n_read], reads)]
        copies = [(outs[k], (buf, m, size)) for k, (buf, m, size) in enumerate(writes)]
        copies += [(outs[nst + j], (arr, 0, n)) for j, arr in enumerate(nitsot)]
        if not KernelLoop.fits([o for o, _ in copies], [r for _, r in copies]):
            return None
        if any(not isinstance(a, np.ndarray) for a in args):
            return None
        cond = None
        if self.has_until:
            cond = outs[-1]
            if not isinstance(cond, np.ndarray) or cond.dtype.kind not in "biu":
                return None
        return KernelLoop(self._loop_lib, views, calls, copies, cond)

    def check_steps(self, n_steps, seqs) -> int:
        """The number of steps as an int, after checking it against the sequences'
        lengths (every engine's loop checks its inputs this way)."""
        n = int(n_steps)
        if n < 0:
            raise ValueError(f"{self}: n_steps must not be negative, got {n}")
        for k, s in enumerate(seqs):
            if s.shape[0] < n:
                raise ValueError(
                    f"{self}: sequence {k} has {s.shape[0]} steps, fewer than the "
                    f"{n} steps (n_steps) the loop runs"
                )
        return n

    def perform(self, node, inputs, output_storage, params=None):
        n_steps, seqs, inits, carries, nonseqs = self.split_outer(inputs)
        n = self.check_steps(n_steps, seqs)
        buffers, sizes = [], []
        for k, (init, m, var) in enumerate(zip(inits, self.mintaps, node.outputs)):
            if init.shape[0] < m:
                raise ValueError(
                    f"{self}: state {k} has taps {list(self.state_taps[k])} and needs "
                    f"{m} initial steps, but its initial value has {init.shape[0]}"
                )
            # Row p of the state's history lives at p % size (size < m + n: circular).
            size = m + n if not self.store[k] else min(self.store[k], m + n)
            buf = np.empty((size, *init.shape[1:]), dtype=var.type.dtype)
            buf[:m] = init[:m]
            buffers.append(buf)
            sizes.append(size)
        # Where each step reads: (buffer, offset of the tap from t, size) per tap input.
        tap_reads = [
            (buf, m + tap, size)
            for buf, m, size, taps in zip(buffers, self.mintaps, sizes, self.state_taps)
            for tap in taps
        ]
        writes = [(buf, m, size) for buf, m, size in zip(buffers, self.mintaps, sizes)]
        # Each step's reads, sequences first: (array, offset from t, rows); a sequence
        # has at least n rows, so its row is t.
        reads = [(s, 0, max(s.shape[0], 1)) for s in seqs] + tap_reads
        nitsot = [None] * self.n_nitsot
        nst, n_nitsot, has_until = self.n_states, self.n_nitsot, self.has_until
        n_carry, first_carry = self.n_carry, self.n_states + self.n_nitsot
        carries = list(carries)
        rows = [(buf, m, size, buf.shape[1:]) for buf, m, size in writes]
        run = None
        steps = n
        # The calling thread's own link: its kernels and buffers are the steps' alone.
        fn = self._function().for_this_thread()
        # With the CPU engine's C loop, the first step is recorded and the others replayed.
        c_loop = n >= C_LOOP_MIN_STEPS and self._loop_lib is not None
        t = 0
        while t < n:
            # `a[i, ...]` is a 0-d array for a vector: the inner function takes arrays.
            args = [a[(t + off) % size, ...] for a, off, size in reads]
            args += carries
            args += nonseqs
            if run is None:
                # Every step reads values of the same types and shapes: check them once.
                run = fn.checked_runner(args)
            calls = None
            if c_loop:
                outs, calls = record_step(fn, run, args)
                c_loop = False
            else:
                outs = run(args)
            for k, (buf, m, size, shape) in enumerate(rows):
                row = outs[k]
                if type(row) is not np.ndarray:
                    row = _host(row)
                if row.shape != shape:
                    raise ValueError(
                        f"{self}: step {t} gave state {k} the shape {row.shape}, but "
                        f"its initial value has rows of shape {shape}"
                    )
                buf[(t + m) % size] = row
            for j in range(n_nitsot):
                row = _host(outs[nst + j])
                if nitsot[j] is None:
                    dtype = node.outputs[nst + j].type.dtype
                    nitsot[j] = np.empty((n, *row.shape), dtype=dtype)
                elif row.shape != nitsot[j].shape[1:]:
                    raise ValueError(
                        f"{self}: step {t} gave output {nst + j} the shape {row.shape}, "
                        f"the steps before {nitsot[j].shape[1:]}"
                    )
                nitsot[j][t] = row
            if n_carry:
                carries = list(outs[first_carry : first_carry + n_carry])
            if has_until and _host(outs[-1]):
                steps = t + 1
                break
            t += 1
            if calls is not None:
                loop = self._c_loop(fn, calls, args, reads, outs, writes, nitsot, n)
                if loop is not None:
                    t, status = loop.run(t, n)
                    if status == 1:
                        steps = t
                        break
                    # status 2: step t failed in a kernel; Python runs it to say why.
        for k, (buf, size) in enumerate(zip(buffers, sizes)):
            written = self.mintaps[k] + steps  # rows of history: initial ones, then steps
            if written > size:
                buf = np.roll(buf, -(written % size), axis=0)  # oldest kept row first
            elif written < size:
                buf = buf[:written].copy()
            output_storage[k][0] = buf
        empty_rows = None
        if n_nitsot and nitsot[0] is None:
            empty_rows = self._rows_without_steps(seqs, inits, nonseqs)
        for j, arr in enumerate(nitsot):
            var = node.outputs[nst + j]
            if arr is None:
                # No step ran: an empty stack, its rows of the shape infer_shape gives.
                if empty_rows is not None:
                    shape = (0, *empty_rows[j])
                elif all(var.type.broadcastable[1:]):
                    shape = (0, *(1 for _ in var.type.broadcastable[1:]))
                else:
                    # A guess (0 for each unknown length) would be a wrong shape for
                    # what reads the stack (a sum over the steps); Theano refuses every
                    # loop of 0 steps.
                    raise ValueError(
                        f"{self}: the loop ran no step, and the shape of the rows of its "
                        f"per-step output {j} is not known without running one (it depends "
                        "on what a step computes); give it at least one step"
                    )
                arr = np.zeros(shape, dtype=var.type.dtype)
            elif steps != n:
                arr = arr[:steps].copy()
            output_storage[nst + j][0] = arr
        for j, value in enumerate(carries):
            output_storage[first_carry + j][0] = value

    def infer_shape(self, fgraph, node, input_shapes):
        if self.has_until or self.n_carry:
            # The steps run, or the carried values, are known only from running the loop.
            raise MethodNotDefined(f"{self}: output shapes are known when the loop has run")
        n = node.inputs[0]
        _, seq_shapes, init_shapes, _, ns_shapes = self.split_outer(input_shapes)
        states = [
            (m + n if not store else tt.minimum(m + n, store), *s[1:])
            for m, store, s in zip(self.mintaps, self.store, init_shapes)
        ]
        rows = self._row_shapes(seq_shapes, init_shapes, ns_shapes)
        return states + [(n, *r) for r in rows]

    def _rows_without_steps(self, seqs, inits, nonseqs):
        """The per-step outputs' row shapes (ints) from the values' shapes, or None."""
        if self.has_until or self.n_carry:
            return None
        try:
            rows = self._row_shapes(
                [np.shape(v) for v in seqs],
                [np.shape(v) for v in inits],
                [np.shape(v) if isinstance(v, np.ndarray) else None for v in nonseqs],
                on_values=True,
            )
        except MethodNotDefined:
            return None
        dims = [d for r in rows for d in r if isinstance(d, Variable)]
        # A length computed by a graph (h[i, :D] with D = X.shape[1]) is known without a
        # step when that graph reads only the non-sequences, whose values are here.
        value = self._nonseq_values(dims, nonseqs) if dims else {}
        if value is None:
            return None  # a length that depends on what a step reads: unknown
        return [tuple(int(value[d] if isinstance(d, Variable) else d) for d in r) for r in rows]

    def _nonseq_values(self, variables, nonseqs):
        """The values of inner ``variables`` computed from the non-sequences' values alone
        (each node's ``perform``), or None when one reads a sequence, a state or a carry."""
        inner_ns = self.inner_inputs[len(self.inner_inputs) - self.n_nonseqs :]
        value = dict(zip(inner_ns, nonseqs))
        for node in io_toposort(list(self.inner_inputs), variables):
            args = []
            for i in node.inputs:
                if isinstance(i, Constant):
                    args.append(i.data)
                elif i in value:
                    args.append(value[i])
                else:
                    return None
            storage = [[None] for _ in node.outputs]
            try:
                node.op.perform(node, args, storage)
            except Exception:  # a value it cannot read here (on a device...): unknown
                return None
            value.update((o, cell[0]) for o, cell in zip(node.outputs, storage))
        if not all(v in value for v in variables):
            return None
        return value

    def _row_shapes(self, seq_shapes, init_shapes, ns_shapes, on_values=False):
        """The shapes of the per-step outputs' rows, from the outer inputs' shapes: each
        inner node's ``infer_shape`` in turn. MethodNotDefined when one has none, or when
        a row's shape depends on the step's values (not on its inputs' shapes); with
        ``on_values``, such a length is returned as the inner graph that computes it."""
        wanted = list(self.inner_outputs[self.n_states : self.n_states + self.n_nitsot])
        if not wanted:
            return []
        shape_of = {}
        for v, s in zip(self.inner_inputs[: self.n_seqs], seq_shapes):
            shape_of[v] = tuple(s[1:])
        for tap_vars, s in zip(self.inner_tap_inputs(), init_shapes):
            for v in tap_vars:
                shape_of[v] = tuple(s[1:])
        inner_ns = self.inner_inputs[len(self.inner_inputs) - self.n_nonseqs :]
        for v, s in zip(inner_ns, ns_shapes):
            shape_of[v] = tuple(s) if s is not None else None
        inner_vars = set(self.inner_inputs)
        for inner in io_toposort(list(self.inner_inputs), wanted):
            ins = []
            for i in inner.inputs:
                if isinstance(i, Constant):
                    ins.append(tuple(np.shape(i.data)))
                elif shape_of.get(i) is not None:
                    ins.append(shape_of[i])
                else:
                    raise MethodNotDefined(f"{self}: no shape for the step's {i}")
            try:
                outs = inner.op.infer_shape(None, inner, ins)
            except Exception as e:  # no infer_shape, or one that needs a graph
                raise MethodNotDefined(f"{self}: {inner.op} gives no shape") from e
            shape_of.update(zip(inner.outputs, (tuple(o) for o in outs)))
            inner_vars.update(inner.outputs)
        rows = []
        for o in wanted:
            if isinstance(o, Constant):
                rows.append(tuple(np.shape(o.data)))
            elif shape_of.get(o) is not None:
                rows.append(shape_of[o])
            else:
                raise MethodNotDefined(f"{self}: no shape for the step's output {o}")
        dims = [d for r in rows for d in r if isinstance(d, Variable)]
        if not on_values and any(a in inner_vars for a in ancestors(dims)):
            raise MethodNotDefined(f"{self}: a row's shape depends on the step's values")
        return rows

    # -- gradient ---------------------------------------------------------------------------

    def connection_pattern(self, node):
        """Which outer outputs depend on each outer input, through the steps: a state's
        output depends on what its inner output reads, and on what the states whose taps
        it reads depend on, with their initial values (as Theano's: a state whose step
        ignores its own previous value is not connected to its initial value). n_steps
        and the carried values (random generators) pass no gradient."""
        if getattr(node.tag, "connection_pattern", None) is not None:
            return node.tag.connection_pattern
        n_in, nst = len(self.inner_inputs), self.n_states
        n_out = len(node.outputs)
        inner = io_connection_pattern(list(self.inner_inputs), list(self.inner_outputs))
        # Each inner input as the outer input behind it, or the state of its taps.
        outer_of, state_of = [None] * n_in, [None] * n_in
        for k in range(self.n_seqs):
            outer_of[k] = 1 + k
        pos = self.n_seqs
        for j, taps in enumerate(self.state_taps):
            for _ in taps:
                state_of[pos] = j
                pos += 1
        pos += self.n_carry
        first_nonseq = 1 + self.n_seqs + nst + self.n_carry
        for k in range(self.n_nonseqs):
            outer_of[pos + k] = first_nonseq + k
        deps = [set() for _ in range(n_out)]
        reads = [set() for _ in range(n_out)]  # the states whose taps each output reads
        for o in range(min(n_out, len(self.inner_outputs))):
            for i in range(n_in):
                if inner[i][o]:
                    if outer_of[i] is not None:
                        deps[o].add(outer_of[i])
                    elif state_of[i] is not None:
                        reads[o].add(state_of[i])
        changed = True
        while changed:
            changed = False
            for o in range(n_out):
                for j in reads[o]:
                    more = deps[j] | {1 + self.n_seqs + j}
                    if not more <= deps[o]:
                        deps[o] |= more
                        changed = True
        carried = range(1 + self.n_seqs + nst, first_nonseq)
        rows = [
            [i in deps[o] and i not in carried for o in range(n_out)]
            for i in range(len(node.inputs))
        ]
        node.tag.connection_pattern = rows
        return rows

    def L_op(self, inputs, outputs, output_grads):
        grads = scan_grad(self, inputs, outputs, output_grads)
        # An input none of the outputs with a gradient depends on is disconnected.
        pattern = self.connection_pattern(outputs[0].owner)
        live = [not isinstance(g.type, DisconnectedType) for g in output_grads]
        return [
            g if any(c and a for c, a in zip(row, live)) else disconnected_type()
            for g, row in zip(grads, pattern)
        ]


class CompiledStep:
    """A Scan's compiled step as Theano's ``Scan.fn`` shows it: callable on the inner
    inputs' values, with ``maker.fgraph`` the linked graph."""

    def __init__(self, inner):
        self._inner = inner
        self.maker = SimpleNamespace(fgraph=inner.fgraph)

    def __call__(self, *values):
        # (copies: the step's outputs are buffers its next call reuses)
        return [np.array(_host(v)) for v in self._inner(*values)]


def _host(value):
    # An engine may leave a borrowed output on its device (engines.inner): bring it here.
    if type(value) is np.ndarray:
        return value
    get = getattr(value, "get", None)
    return np.asarray(get() if get is not None else value)


def _rows_type(row_type):
    """The type of a stack of ``row_type`` rows."""
    return tt.TensorType(row_type.dtype, broadcastable=(False, *row_type.broadcastable))


def _check_row_type(op, what, outer, row_type):
    ndim = getattr(outer.type, "ndim", None)
    if (
        ndim != row_type.ndim + 1
        or outer.type.dtype != row_type.dtype
        or any(b and not ob for ob, b in zip(outer.type.broadcastable[1:], row_type.broadcastable))
    ):
        raise TypeError(
            f"{op}: {what} should have rows of type {row_type}, got {outer} of type {outer.type}"
        )
