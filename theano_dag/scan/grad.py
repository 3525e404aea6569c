"""The gradient of ``Scan``: backpropagation through time, as a second, backward Scan.

Step ``t`` of the forward loop computes ``f(seq rows, state taps, non_sequences)``. The
backward loop walks ``t = n-1 .. n-T`` (``T = n``, or ``truncate_gradient`` steps) and
applies the vector-Jacobian product of ``f`` (``gradient.Lop`` on the inner graph) to
the cotangents of step ``t``'s outputs. A state written at step ``t`` is read, through
its taps, by the steps up to ``t + m`` later; so the backward loop carries, per state,
a *window* of ``m`` accumulated cotangents (for the rows ``t+m .. t+1`` of the buffer):
its first row completes the cotangent of the row step ``t`` wrote, and each tap adds
its term at the place of the row it read. The non-sequences' gradients are summed in a
carried accumulator; the sequences' are per-step outputs of the backward loop.

What the derivative reads of the step's work comes from the forward loop's rows, not
from computing the step again: its states and per-step outputs, and its *residuals*,
the results of the step's matrix products that the derivative reads. For residuals the
gradient builds the forward node once more with them as extra per-step outputs (the
same inner graph and inputs); the rewrite ``local_scan_subsume`` makes the loop that
computes the cost that same node, so the forward loop runs once (Theano and PyTensor
compute the products again in the backward step).
"""

from __future__ import annotations

import functools
import operator

from theano_dag import tensor as tt
from theano_dag.config import config
from theano_dag.gradient.reverse import grad
from theano_dag.graph.basic import ancestors, clone_replace, io_toposort
from theano_dag.graph.null_type import DisconnectedType, disconnected_type, grad_not_implemented
from theano_dag.tensor.math import Dot
from theano_dag.tensor.type import TensorType

__all__ = ["scan_grad"]


def _building_inner_graph():
    """Test values off while the backward step's graph is built.

    Its placeholders (a row of the cotangents, a window, an accumulator) have no test
    values; the outer graph around the backward loop, built with the flag as the user
    set it, checks the whole computation on the outer test values.
    """
    return config.change_flags(compute_test_value="off")


def _is_float(var):
    return str(getattr(var.type, "dtype", "")).startswith(("float", "complex"))


def cast_like(x, var):
    """``x`` with the dtype and broadcastable pattern of ``var`` (the loop's types)."""
    if x.type.dtype != var.type.dtype:
        x = tt.cast(x, var.type.dtype)
    if x.type.broadcastable != var.type.broadcastable:
        x = tt.patternbroadcast(x, var.type.broadcastable)
    return x


def _vjp(outputs, wrt, cotangents):
    """``sum_i <cotangents[i], d outputs[i] / d wrt>`` for each of ``wrt``.

    Written as the gradient of one scalar rather than with known output gradients: an
    output may also be an intermediate of another (a step returning ``h`` and ``h * 2``),
    and a known gradient would stand for its whole gradient, dropping the other path.
    """
    if not outputs or not wrt:
        return [tt.zeros_like(w) for w in wrt]
    cost = functools.reduce(operator.add, [(o * c).sum() for o, c in zip(outputs, cotangents)])
    return grad(cost, wrt, disconnected_inputs="ignore", return_disconnected="zero")


# The ops whose results the forward loop stores for the backward step (residuals): the
# costly ones whose rows have one shape at every step. Everything else (elementwise work,
# views, a loop nested in the step: scan_checkpoints recomputes on purpose) the backward
# step computes again from the rows it reads.
STORED_OPS = (Dot,)


def _residuals(op, terms, stops):
    """The forward step's variables the backward step should read stored, not compute.

    Walks the derivative ``terms`` up to the forward step's inputs and ``stops`` (what
    the forward loop stores anyway): a variable of the step that depends on its
    sequences or states and comes from a node in ``STORED_OPS`` is a residual (the
    walk stops there). Loop-invariant nodes are left to be computed (hoisted) again.

    So is a tensor drawn from a carried random state (a random op's sample): the
    backward loop has no step's state to draw it again, and must read the very numbers
    the forward step used (Theano keeps its MRG generator's state, a tensor, per step).
    """
    n_taps = sum(len(t) for t in op.state_taps)
    variant = set(op.inner_inputs[: op.n_seqs + n_taps + op.n_carry])
    # The carried states and what is derived from them that is not a tensor (a random
    # op's advanced generator): a tensor a node makes from one of them is a draw.
    drawn_from = set(op.inner_carry_inputs())
    fwd_nodes = io_toposort(list(op.inner_inputs), list(op.inner_outputs))
    for node in fwd_nodes:
        if any(i in variant for i in node.inputs):
            variant.update(node.outputs)
        if any(i in drawn_from for i in node.inputs):
            drawn_from.update(o for o in node.outputs if not isinstance(o.type, TensorType))
    computed = {o for node in fwd_nodes for o in node.outputs}
    found, seen, todo = [], set(stops), list(terms)
    while todo:
        v = todo.pop()
        if v in seen or v.owner is None:
            continue
        seen.add(v)
        if (
            v in computed
            and v in variant
            and isinstance(v.type, TensorType)
            and (isinstance(v.owner.op, STORED_OPS) or any(i in drawn_from for i in v.owner.inputs))
        ):
            found.append(v)
            continue
        todo.extend(v.owner.inputs)
    order = {o: k for k, node in enumerate(fwd_nodes) for o in node.outputs}
    return sorted(found, key=order.__getitem__)


def _with_residuals(op, inputs, residuals):
    """The forward node again, with ``residuals`` as extra per-step outputs after its
    own: ``(outputs laid out as the op's, the residuals' rows)``."""
    nst, nit = op.n_states, op.n_nitsot
    outs = list(op.inner_outputs)
    fwd = op.rebuilt(
        inner_outputs=[*outs[: nst + nit], *residuals, *outs[nst + nit :]],
        n_nitsot=nit + len(residuals),
    )
    res = fwd(*inputs, return_list=True)
    k = nst + nit
    return [*res[:k], *res[k + len(residuals) :]], res[k : k + len(residuals)]


def _not_implemented(op, inputs, why):
    """No gradient for any input (n_steps and carried values: disconnected)."""
    first_carry = 1 + op.n_seqs + op.n_states
    carry_pos = range(first_carry, first_carry + op.n_carry)
    return [
        disconnected_type() if i == 0 or i in carry_pos else grad_not_implemented(op, i, x, why)
        for i, x in enumerate(inputs)
    ]


def scan_grad(op, inputs, outputs, output_grads):
    """``op.L_op``: the gradients of a Scan node's inputs, computed by a backward Scan."""
    n, seqs, inits, carries, nonseqs = op.split_outer(inputs)
    nst = op.n_states
    if any(op.store):
        why = "the gradient of a scan that keeps only its last steps (store)"
        return _not_implemented(op, inputs, why)
    if op.has_until:
        # The steps that ran are the rows the outputs kept: the backward loop walks
        # those (the condition itself has no gradient: it only picks the length).
        if nst:
            n = outputs[0].shape[0] - op.mintaps[0]
        elif op.n_nitsot:
            n = outputs[0].shape[0]
        else:
            why = "the gradient of a scan that ends on `until` and returns no rows"
            return _not_implemented(op, inputs, why)
    g_outs = [
        tt.zeros_like(o) if isinstance(g.type, DisconnectedType) else g
        for o, g in zip(outputs[: nst + op.n_nitsot], output_grads)
    ]
    g_bufs, g_nits = g_outs[:nst], g_outs[nst:]
    steps = n if op.truncate_gradient < 0 else tt.minimum(n, op.truncate_gradient)
    # Without truncation the backward loop starts at step 0: a constant, simpler slices.
    start = n - steps if op.truncate_gradient >= 0 else 0

    fwd_seqs = list(op.inner_inputs[: op.n_seqs])
    fwd_taps = op.inner_tap_inputs()
    fwd_nonseqs = list(op.inner_inputs[len(op.inner_inputs) - op.n_nonseqs :])
    fwd_state_outs = list(op.inner_outputs[:nst])
    fwd_nit_outs = list(op.inner_outputs[nst : nst + op.n_nitsot])

    def rev(x, at=0):
        # rows at+start .. at+n-1 of x, last first (one slice, then the reversal)
        return x[at + start : at + n][::-1]

    # The backward loop's sequences: the forward rows, the states' taps as they were
    # read, and the cotangents of what each step wrote.
    b_seqs, b_seq_outer = [], []
    replace = {}
    for v, s in zip(fwd_seqs, seqs):
        replace[v] = v.type(v.name)
        b_seqs.append(replace[v])
        b_seq_outer.append(rev(s))
    for k, (taps, tap_vars) in enumerate(zip(op.state_taps, fwd_taps)):
        m = op.mintaps[k]
        for tap, v in zip(taps, tap_vars):
            replace[v] = v.type(v.name)
            b_seqs.append(replace[v])
            b_seq_outer.append(rev(outputs[k], m + tap))
    # Only float outputs pass a cotangent back: an integer output's gradient (zeros, of
    # a float dtype) has no row type in the loop and is not read.
    g_state_rows = []
    for k in range(nst):
        row = fwd_taps[k][0].type("g_state") if _is_float(fwd_state_outs[k]) else None
        g_state_rows.append(row)
        if row is not None:
            b_seqs.append(row)
            b_seq_outer.append(rev(g_bufs[k], op.mintaps[k]))
    g_nit_rows = []
    for j, out in enumerate(fwd_nit_outs):
        row = None
        if _is_float(out):
            row = tt.TensorType(out.type.dtype, broadcastable=out.type.broadcastable)("g_out")
            b_seqs.append(row)
            b_seq_outer.append(rev(g_nits[j]))
        g_nit_rows.append(row)
    b_nonseqs = []
    for v in fwd_nonseqs:
        replace[v] = v.type(v.name)
        b_nonseqs.append(replace[v])

    # The carried values: a window per state, an accumulator per float non-sequence.
    # A window of one row (the common taps=[-1]) is that row itself.
    windows = [
        tt.TensorType(v[0].type.dtype, broadcastable=v[0].type.broadcastable)("window")
        if m == 1
        else tt.TensorType(v[0].type.dtype, broadcastable=(False, *v[0].type.broadcastable))(
            "window"
        )
        for v, m in zip(fwd_taps, op.mintaps)
    ]
    float_ns = [k for k, v in enumerate(fwd_nonseqs) if _is_float(v)]
    accs = [b_nonseqs[k].type("acc") for k in float_ns]

    cots, outs_f = [], []
    with _building_inner_graph():
        for k, out in enumerate(fwd_state_outs):
            if _is_float(out):
                outs_f.append(out)
                head = windows[k] if op.mintaps[k] == 1 else windows[k][0]
                cots.append(head + g_state_rows[k])
        for j, out in enumerate(fwd_nit_outs):
            if _is_float(out):
                outs_f.append(out)
                cots.append(g_nit_rows[j])
        wrt_seqs = [v for v in fwd_seqs if _is_float(v)]
        wrt_taps = [v for tap_vars in fwd_taps for v in tap_vars if _is_float(v)]
        wrt_ns = [fwd_nonseqs[k] for k in float_ns]
        wrt = wrt_seqs + wrt_taps + wrt_ns
        # The cotangents are inner variables of the backward loop: keep them out of the
        # replacement (they are not forward inner inputs).
        terms = _vjp(outs_f, wrt, cots)
    # A gradient that reads what the step computed (tanh's does) reads the forward
    # loop's stored rows instead of computing the step again.
    residuals = []
    if terms:
        residuals = _residuals(op, terms, [*fwd_state_outs, *fwd_nit_outs, *cots])
    res_rows = []
    if residuals:
        outputs, res_rows = _with_residuals(op, inputs, residuals)
    used = set(ancestors(terms)) if terms else set()
    # (inner variable, the outer rows of it, the row of step 0)
    stored = [(o, outputs[k], op.mintaps[k]) for k, o in enumerate(fwd_state_outs)]
    stored += [(o, outputs[nst + j], 0) for j, o in enumerate(fwd_nit_outs)]
    stored += [(o, rows, 0) for o, rows in zip(residuals, res_rows)]
    for o, rows, at in stored:
        if o.owner is None or o not in used or o in replace:
            continue
        replace[o] = o.type("out")
        b_seqs.append(replace[o])
        b_seq_outer.append(rev(rows, at))
    with _building_inner_graph():
        terms = clone_replace(terms, replace) if terms else []
    carried = set(op.inner_carry_inputs())
    if carried and carried & set(ancestors(terms)):
        # The gradient reads a carried state other than through a draw stored above.
        why = "the gradient of a scan whose step's derivative reads a carried random state"
        return _not_implemented(op, inputs, why)
    d_of = dict(zip(wrt, terms))

    with _building_inner_graph():
        new_windows = []
        for k, (taps, tap_vars) in enumerate(zip(op.state_taps, fwd_taps)):
            w = windows[k]
            if op.mintaps[k] == 1:
                # taps == (-1,): the new window is the cotangent of the row the step read.
                v = tap_vars[0]
                new_windows.append(d_of[v] if v in d_of else tt.zeros_like(w))
                continue
            shifted = tt.concatenate([w[1:], tt.zeros_like(w[:1])], axis=0)
            for tap, v in zip(taps, tap_vars):
                if v in d_of:
                    shifted = tt.inc_subtensor(shifted[-tap - 1], d_of[v])
            new_windows.append(shifted)
        new_windows = [cast_like(w, v) for w, v in zip(new_windows, windows)]
        new_accs = [cast_like(a + d_of[fwd_nonseqs[k]], a) for a, k in zip(accs, float_ns)]
        d_seqs = [cast_like(d_of[v], replace[v]) for v in wrt_seqs]

        back = type(op)(
            [*b_seqs, *windows, *accs, *b_nonseqs],
            [*new_windows, *new_accs, *d_seqs],
            n_seqs=len(b_seqs),
            state_taps=[(-1,)] * (len(windows) + len(accs)),
            n_nitsot=len(d_seqs),
            mode=op.mode,
            name=f"grad_of_{op.name}" if op.name else "grad_of_scan",
        )
    window_inits = [
        tt.shape_padleft(tt.zeros_like(outputs[k][0] if m == 1 else outputs[k][:m]))
        for k, m in enumerate(op.mintaps)
    ]
    acc_inits = [tt.shape_padleft(tt.zeros_like(nonseqs[k])) for k in float_ns]
    res = back(steps, *b_seq_outer, *window_inits, *acc_inits, *nonseqs, return_list=True)
    res_windows = res[: len(windows)]
    res_accs = res[len(windows) : len(windows) + len(accs)]
    res_dseqs = res[len(windows) + len(accs) :]

    grads = [disconnected_type()]
    dseq_of = dict(zip(wrt_seqs, res_dseqs))
    for v, s in zip(fwd_seqs, seqs):
        if v not in dseq_of:
            grads.append(tt.zeros_like(s, dtype="float64"))
            continue
        # Rows before `start` (truncated) and past `n` (unused) get no gradient.
        grads.append(tt.set_subtensor(tt.zeros_like(s)[start:n], dseq_of[v][::-1]))
    for k, (init, m) in enumerate(zip(inits, op.mintaps)):
        if not _is_float(init):
            grads.append(tt.zeros_like(init, dtype="float64"))
            continue
        # The last window holds the cotangents of the rows start+m-1 .. start of the
        # buffer (what the backward loop's last step, step `start`, read): those below m
        # are initial rows. With truncation (start > 0) the steps kept may still read
        # initial rows directly, as in Theano; rows below start get nothing.
        last = res_windows[k][-1]
        last = tt.shape_padleft(last) if m == 1 else last[::-1]
        shift = tt.minimum(start, m)
        reached = tt.concatenate([tt.zeros_like(last), last])[m - shift : 2 * m - shift]
        g = g_bufs[k][:m] + reached
        grads.append(tt.set_subtensor(tt.zeros_like(init)[:m], g))
    grads += [disconnected_type() for _ in carries]
    acc_of = dict(zip(float_ns, res_accs))
    for k, a in enumerate(nonseqs):
        grads.append(acc_of[k][-1] if k in acc_of else tt.zeros_like(a, dtype="float64"))
    return grads
