"""``scan``: build a :class:`~theano_dag.scan.op.Scan` node from a Python step function,
with Theano 1.1.2's arguments and results."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from theano_dag import tensor as tt
from theano_dag.config import config
from theano_dag.graph.basic import Constant, Variable, clone_replace, graph_inputs
from theano_dag.graph.fg import MissingInputError
from theano_dag.graph.shared import SharedVariable
from theano_dag.graph.updates import OrderedUpdates
from theano_dag.graph.utils import TestValueError
from theano_dag.scan.op import Scan

__all__ = ["scan", "until"]


class until:  # noqa: N801 (Theano's name)
    """The condition a step function returns to end the loop after this step.

    >>> import theano_dag.tensor as tt
    >>> until(tt.dscalar("x") > 2).condition.type
    TensorType(bool, scalar)
    """

    def __init__(self, condition):
        condition = tt.as_tensor_variable(condition)
        if condition.type.ndim != 0:
            raise TypeError(
                f"until: the condition must be a scalar, got {condition} of type {condition.type}"
            )
        self.condition = condition


class StrictScanError(MissingInputError, ValueError):
    """``scan(strict=True)``'s step reads a shared variable nobody passed: Theano's
    MissingInputError, and a ValueError as theano_dag raised before."""


class StepTypeError(TypeError, ValueError):
    """A step output whose dtype or number of dimensions is not its state's: a
    TypeError, and the ValueError Theano raises there."""


def _as_list(x):
    if x is None:
        return []
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def _is_outputs(x):
    return isinstance(x, Variable) or (
        isinstance(x, (list, tuple)) and all(isinstance(e, (Variable, int, float)) for e in x)
    )


def _is_updates(x):
    return isinstance(x, dict) or (
        isinstance(x, (list, tuple))
        and len(x) > 0
        and all(isinstance(e, (list, tuple)) and len(e) == 2 for e in x)
    )


def _split_step_result(ls):
    """``(condition, outputs, updates)`` of what a step function returned (Theano's
    accepted forms: outputs, updates, ``until``, and pairs or triples of them)."""
    if ls is None:
        return None, [], OrderedDict()
    if isinstance(ls, until):
        return ls.condition, [], OrderedDict()
    if _is_outputs(ls):
        return None, _as_list(ls), OrderedDict()
    if _is_updates(ls):
        return None, [], OrderedDict(ls)
    if isinstance(ls, (list, tuple)) and len(ls) in (2, 3):
        cond, outs, ups = None, None, None
        for part in ls:
            if isinstance(part, until) and cond is None:
                cond = part.condition
            elif _is_outputs(part) and outs is None:
                outs = _as_list(part)
            elif ups is None and (
                _is_updates(part) or (isinstance(part, (list, tuple)) and not part)
            ):
                # an empty tuple after the outputs: no updates (Theano accepts it)
                ups = OrderedDict(part)
            else:
                break
        else:
            return cond, outs or [], ups or OrderedDict()
    raise ValueError(
        "scan: the step function must return outputs (a variable, or a list or tuple of "
        "them), a dictionary of updates, an `until` condition, or a tuple of these "
        f"(outputs first); it returned {ls!r}"
    )


def _taps(taps):
    """A dict's ``taps`` as a list: Theano takes one tap as a plain int (``taps=-2``)."""
    return [int(taps)] if isinstance(taps, (int, np.integer)) else list(taps)


def _one_step(outputs, updates, seq_rows, seq_slices, states, tap_rows, return_list):
    """``scan``'s result for ``n_steps=1``: the step's outputs on the sequences' first
    rows and the initial states, each with a leading axis of length 1, and its updates,
    as Theano gives them (an output's dtype is the step's, whatever its initial state's).
    """
    replace = {row: sl[0] for row, sl in zip(seq_rows, seq_slices)}
    for st, rows in zip(states, tap_rows):
        if st is None:
            continue
        init, taps = st
        for tap, row in zip(taps, rows):
            replace[row] = init if taps == [-1] else init[tap - min(taps)]
    updates = OrderedUpdates(updates)
    # A shared variable's default update made inside the step (a random draw's next
    # state) reads the step's rows: it is moved onto the first rows too, as Theano's one
    # step, which calls fn on them, gives it; function then finds it valid.
    rows = set(replace)
    defaults = [
        v
        for v in _default_updated([*outputs, *updates.values()], updates)
        if rows.intersection(graph_inputs([v.default_update]))
    ]
    roots = [*outputs, *updates.values(), *(v.default_update for v in defaults)]
    new = clone_replace(roots, replace) if replace else None
    if new is not None:
        n_out, n_upd = len(outputs), len(updates)
        outputs = new[:n_out]
        updates = OrderedUpdates(zip(updates, new[n_out : n_out + n_upd]))
        for v, default in zip(defaults, new[n_out + n_upd :]):
            v.default_update = default
    out_list = [tt.unbroadcast(tt.shape_padleft(o), 0) for o in outputs]
    if not out_list:
        return None, updates
    if len(out_list) == 1 and not return_list:
        return out_list[0], updates
    return out_list, updates


def _default_updated(roots, updates, blockers=None):
    """The shared variables the step's graph ``roots`` reads that have a default update
    (a random generator's next state) and no update of the step's own."""
    return [
        v
        for v in graph_inputs(roots, blockers=blockers)
        if isinstance(v, SharedVariable) and v not in updates and v.default_update is not None
    ]


def _placeholder(var, name):
    # A fresh free variable of var's type: the step function's view of one step.
    return _step_variable(var.type, name)


def _step_variable(type_, name=None):
    """A free variable of ``type_`` for the step's graph, tagged ``scan_step`` so that a
    function reaching it (through a default update made in the step and not passed on
    by scan's updates) can say so."""
    new = type_()
    new.name = name
    new.tag.scan_step = True
    return new


def _give_test_value(inner, outer, pick=lambda v: v):
    """Tag the step function's free variable ``inner`` with ``pick`` of ``outer``'s test
    value, as Theano's scan does: the step graph then gets test values while it is built."""
    if config.compute_test_value == "off":
        return
    try:
        value = outer.get_test_value()
    except TestValueError:
        return
    inner.tag.test_value = pick(np.asarray(value) if not isinstance(value, np.ndarray) else value)


def _row(x):
    """A free variable of the type of one row of ``x``."""
    return _step_variable(tt.TensorType(x.type.dtype, broadcastable=x.type.broadcastable[1:]))


def scan(
    fn,
    sequences=None,
    outputs_info=None,
    non_sequences=None,
    n_steps=None,
    truncate_gradient=-1,
    go_backwards=False,
    mode=None,
    name=None,
    profile=False,
    allow_gc=None,
    strict=False,
    return_list=False,
):
    """Apply ``fn`` step by step over ``sequences``, feeding back ``outputs_info``.

    Theano 1.1.2's ``scan``: ``fn`` receives, in order, each sequence's taps (default
    ``[0]``; ``dict(input=x, taps=[-1, 1])`` for others), each fed-back output's taps
    (``dict(initial=x0, taps=[-1, -3])``; a plain ``x0`` is ``taps=[-1]``; ``None`` for an
    output that is not fed back), then ``non_sequences``. It returns its outputs, and
    optionally a dictionary of shared-variable updates and an ``until(condition)``.
    ``scan`` returns ``(outputs, updates)``: the stack of each output over the steps and
    the updates to pass to ``function`` (a shared variable updated in ``fn`` is carried
    through the loop and ends with its last value). ``n_steps`` (an int or a symbolic
    integer) defaults to the shortest sequence; ``go_backwards`` walks the sequences
    from their end. ``truncate_gradient=k`` backpropagates through the last ``k``
    steps only. ``strict=True`` asks that every shared variable ``fn`` uses be passed in
    (as ``non_sequences`` or ``sequences``); other outer variables it reads are passed for it.
    ``mode`` compiles the inner graph (a Mode; None or a name: the default mode); a mode
    whose linker is the ``linker`` flag's (``FAST_RUN``, the default) takes the linker
    that engine names for inner graphs: under the Dask engine, the CPU engine, inside
    the loop's one task (``engines.inner.inner_mode``); a mode naming its linker is kept;
    ``profile`` and ``allow_gc`` are accepted for Theano's signature.

    >>> import numpy as np
    >>> import theano_dag
    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> sums, _ = scan(lambda v, acc: acc + v, sequences=x, outputs_info=np.float64(0.0))
    >>> theano_dag.function([x], sums)(np.array([1.0, 2.0, 3.0]))
    array([1., 3., 6.])
    """
    if mode is not None and not hasattr(mode, "linker"):
        mode = None  # a mode's name: the inner graph uses the default mode
    seqs = []
    for s in _as_list(sequences):
        if not isinstance(s, dict):
            s = {"input": s}
        if "input" not in s:
            raise ValueError(f"scan: a sequence given as a dict needs 'input', got {s!r}")
        taps = _taps(s.get("taps", [0]))
        if not taps:
            raise ValueError(f"scan: a sequence has no taps: {s!r}")
        seqs.append((tt.as_tensor_variable(s["input"]), taps))

    outs_info = _as_list(outputs_info)
    states = []  # per output: None, or (initial, taps)
    for k, o in enumerate(outs_info):
        if isinstance(o, dict):
            if o.get("initial") is None:
                if o.get("taps"):
                    raise ValueError(
                        f"scan: outputs_info[{k}] has taps {o['taps']} but no initial value"
                    )
                states.append(None)
                continue
            taps = _taps(o.get("taps", [-1]))
            init = o["initial"]
        elif o is None:
            states.append(None)
            continue
        else:
            taps, init = [-1], o
        if any(t >= 0 for t in taps):
            raise ValueError(
                f"scan: outputs_info[{k}] has taps {taps}; an output's taps must be negative"
            )
        if len(set(taps)) != len(taps):
            raise ValueError(f"scan: outputs_info[{k}] has taps {taps}, one of them twice")
        states.append((tt.as_tensor_variable(init), taps))

    given_nonseqs = [
        s if isinstance(s, Variable) else tt.as_tensor_variable(s) for s in _as_list(non_sequences)
    ]

    # -- the step function's arguments, and the outer slices behind them ------------------
    n_fixed = None
    if n_steps is not None:
        if isinstance(n_steps, (int, np.integer)):
            n_fixed = int(n_steps)
        n_steps = tt.as_tensor_variable(n_steps)
        if n_steps.type.ndim != 0 or not n_steps.type.dtype.startswith(("int", "uint")):
            raise ValueError(f"scan: n_steps must be an integer scalar, got type {n_steps.type}")
    if n_fixed is not None and n_fixed < 0:
        raise ValueError(f"scan: n_steps must not be negative, got {n_fixed}")
    args, seq_rows, seq_slices, lengths = [], [], [], []
    for x, taps in seqs:
        if x.type.ndim < 1:
            raise ValueError(f"scan: sequence {x} of type {x.type} has no steps (it is a scalar)")
        lo, hi = min(min(taps), 0), max(max(taps), 0)
        lengths.append(x.shape[0] - (hi - lo))
        for tap in taps:
            row = _row(x)
            _give_test_value(row, x, lambda v, i=tap - lo: v[i])
            if x.name:
                row.name = f"{x.name}[t{tap:+d}]" if tap else f"{x.name}[t]"
            args.append(row)
            seq_rows.append(row)
            start = tap - lo
            sl = x[start:] if tap == hi else x[start : tap - hi]
            seq_slices.append(sl[::-1] if go_backwards else sl)
    if n_steps is None:
        if not lengths:
            raise ValueError(
                "scan: no information about the number of steps: give n_steps, or a sequence"
            )
        n = lengths[0]
        for length in lengths[1:]:
            n = tt.minimum(n, length)
    else:
        n = n_steps
    seq_slices = [s[:n] for s in seq_slices]

    tap_rows = []
    for k, st in enumerate(states):
        if st is None:
            tap_rows.append(None)
            continue
        init, taps = st
        if taps == [-1]:
            row_type_of = init.type
        else:
            if init.type.ndim < 1:
                raise ValueError(
                    f"scan: outputs_info[{k}] has taps {taps}, so its initial value needs "
                    f"a leading dimension of at least {-min(taps)} steps; got {init} of "
                    f"type {init.type}"
                )
            row_type_of = _row(init).type
        rows = []
        for tap in taps:
            r = _step_variable(row_type_of)
            if taps == [-1]:
                _give_test_value(r, init)
            else:
                first = tap - min(taps)
                _give_test_value(r, init, lambda v, i=first: v[i])
            if init.name:
                r.name = f"{init.name}[t{tap:+d}]"
            rows.append(r)
        args.extend(rows)
        tap_rows.append(rows)

    # fn gets the non-sequences themselves, as in Theano: a step that reads one through
    # a closure instead of its argument (Lasagne's recurrent layers) uses the same
    # variable. The non-shared ones are swapped for the loop's inputs once fn has built
    # the step; shared variables stay themselves (fn may return updates keyed by them).
    args.extend(given_nonseqs)
    nonseq_holders = []
    for v in given_nonseqs:
        h = v if isinstance(v, SharedVariable) else _placeholder(v, v.name)
        if h is not v:
            _give_test_value(h, v)
        nonseq_holders.append(h)
    swapped = {v: h for v, h in zip(given_nonseqs, nonseq_holders) if h is not v}

    condition, outputs, updates = _split_step_result(fn(*args))
    outputs = [tt.as_tensor_variable(o) for o in outputs]
    if n_fixed == 1:
        # As Theano: one step needs no loop (its condition, if any, is not looked at).
        return _one_step(outputs, updates, seq_rows, seq_slices, states, tap_rows, return_list)
    if not outs_info:
        states = [None] * len(outputs)
        tap_rows = [None] * len(outputs)
    if len(states) != len(outputs):
        raise ValueError(
            f"scan: outputs_info has {len(states)} entries but the step function returned "
            f"{len(outputs)} outputs; give one entry (None for no feedback) per output"
        )
    for k, (st, out) in enumerate(zip(states, outputs)):
        if st is None:
            continue
        expected = tap_rows[k][0].type
        if out.type.dtype != expected.dtype or out.type.ndim != expected.ndim:
            raise StepTypeError(
                f"scan: the step function's output {k} ({out}) has type {out.type}, but "
                f"its initial state (outputs_info[{k}]) gives steps of type {expected}; "
                "make them agree (cast the initial state, or the output)"
            )
        if out.type.broadcastable != expected.broadcastable:
            outputs[k] = tt.patternbroadcast(out, expected.broadcastable)

    # -- shared variables: updated ones become carried states, the rest inputs ------------
    updates = OrderedDict(updates)
    for var, new in list(updates.items()):
        if not isinstance(var, SharedVariable):
            raise TypeError(f"scan: updates must be keyed by shared variables, got {var!r}")
        updates[var] = var.type.filter_variable(
            new if isinstance(new, Variable) else tt.as_tensor_variable(new)
        )
    # What the step reads stops at the non-sequences: their own inputs are the outer
    # graph's business (one computed from shared variables is fine under strict=True).
    roots = [*outputs, *updates.values(), *([condition] if condition is not None else [])]
    for v in _default_updated(roots, updates, blockers=swapped):
        updates[v] = v.type.filter_variable(v.default_update)
    roots = [*outputs, *updates.values(), *([condition] if condition is not None else [])]
    own = {h for h in args if not isinstance(h, SharedVariable)}
    free = [
        v
        for v in graph_inputs(roots, blockers=swapped)
        if v not in own and not isinstance(v, Constant)
    ]
    free = list(dict.fromkeys([*free, *updates]))
    if strict:
        # As Theano: strict is about shared variables; another outer variable the step
        # reads is an implicit non-sequence either way.
        missing = [
            v
            for v in free
            if isinstance(v, SharedVariable) and v not in updates and v not in given_nonseqs
        ]
        if missing:
            raise StrictScanError(
                f"scan(strict=True): the step function uses {missing}, which are not in "
                "sequences, outputs_info or non_sequences; pass them as non_sequences"
            )
    # Updated shared variables are carried through the loop; every other outer variable
    # fn reads (shared or not) is a non-sequence of the loop (Theano adds them for the user).
    # Tensors are states (a buffer, a gradient); others (random generators) are carried.
    shared_states = [v for v in updates if isinstance(v.type, tt.TensorType)]
    shared_carried = [v for v in updates if not isinstance(v.type, tt.TensorType)]
    shared_rows = [_placeholder(v, v.name) for v in shared_states]
    carried_rows = [_placeholder(v, v.name) for v in shared_carried]
    outer_nonseqs = [v for v, h in zip(given_nonseqs, nonseq_holders) if h is not v]
    inner_nonseqs = [h for v, h in zip(given_nonseqs, nonseq_holders) if h is not v]
    implicit = [v for v in free if v not in updates]
    replace = dict(swapped)
    replace.update(zip(shared_states, shared_rows))
    replace.update(zip(shared_carried, carried_rows))
    for v in implicit:
        outer_nonseqs.append(v)
        inner_nonseqs.append(_placeholder(v, v.name))
        replace[v] = inner_nonseqs[-1]

    state_idx = [k for k, st in enumerate(states) if st is not None]
    nit_idx = [k for k, st in enumerate(states) if st is None]
    inner_outs = [outputs[k] for k in state_idx]
    inner_outs += [updates[v] for v in shared_states]
    inner_outs += [outputs[k] for k in nit_idx]
    inner_outs += [updates[v] for v in shared_carried]
    if condition is not None:
        inner_outs.append(condition)
    inner_outs = clone_replace(inner_outs, replace) if inner_outs else []

    inner_ins = list(seq_rows)
    state_taps, inits = [], []
    for k in state_idx:
        init, taps = states[k]
        inner_ins.extend(tap_rows[k])
        state_taps.append(tuple(taps))
        if taps == [-1]:
            inits.append(tt.unbroadcast(tt.shape_padleft(init), 0))
        else:
            inits.append(init[: -min(taps)])
    for v, row in zip(shared_states, shared_rows):
        inner_ins.append(row)
        state_taps.append((-1,))
        inits.append(tt.unbroadcast(tt.shape_padleft(v), 0))
    inner_ins.extend(carried_rows)
    inner_ins.extend(inner_nonseqs)

    op = Scan(
        inner_ins,
        inner_outs,
        n_seqs=len(seq_rows),
        state_taps=state_taps,
        n_nitsot=len(nit_idx),
        has_until=condition is not None,
        truncate_gradient=truncate_gradient,
        mode=mode,
        name=name,
        n_carry=len(shared_carried),
    )
    results = op(n, *seq_slices, *inits, *shared_carried, *outer_nonseqs, return_list=True)

    n_user_states = len(state_idx)
    out_list = [None] * len(outputs)
    for k, buf in zip(state_idx, results[:n_user_states]):
        out_list[k] = buf[-min(states[k][1]) :]
    shared_bufs = results[n_user_states : n_user_states + len(shared_states)]
    first_nit = n_user_states + len(shared_states)
    for k, stack in zip(nit_idx, results[first_nit : first_nit + len(nit_idx)]):
        out_list[k] = stack
    finals = {v: buf[-1] for v, buf in zip(shared_states, shared_bufs)}
    finals.update(zip(shared_carried, results[first_nit + len(nit_idx) :]))
    new_updates = OrderedUpdates((v, finals[v]) for v in updates)
    if not out_list:
        return None, new_updates
    if len(out_list) == 1 and not return_list:
        return out_list[0], new_updates
    return out_list, new_updates
