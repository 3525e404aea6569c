"""Rewrites of ``Scan`` nodes, in the optdb's canonicalize (FAST_RUN).

- ``local_scan_hoist_invariants``: what the step computes from non-sequences and
  constants alone is the same at every step: compute it once, before the loop, and pass
  it in as a non-sequence (Theano's ``scan_opt.PushOutNonSeqScan``). Non-sequences the
  step no longer reads are dropped.
- ``local_scan_remove_unused_inputs``: sequences and non-sequences the step does not
  read are not sliced or passed (a gradient loop often leaves some).
- ``local_scan_subsume`` (useless and canonicalize): a loop whose node the gradient built
  again with extra per-step outputs (its residuals, :mod:`~theano_dag.scan.grad`) is
  that other node: the forward loop runs once, for the cost and for the gradient.
- ``local_scan_push_out_seq_dot``: a product of a sequence's row by a non-sequence
  matrix (an RNN's input projection ``x_t @ W``) is one product over all the steps'
  rows before the loop, read by the step as a sequence: one large matrix product instead
  of ``n_steps`` small ones (PyTensor's ``push_out_seq`` does this for elementwise work
  only; JAX users write it by hand).
- ``local_scan_push_out_seq`` (tagged ``scanOp_pushout_seqs_ops``, Theano's name): a
  per-step output computed by elementwise work (and DimShuffles) on the sequences' rows,
  non-sequences and constants alone is computed on all the steps' rows at once before
  the loop, one vectorised operation instead of ``n_steps`` small ones, and the step
  returns its rows as read (Theano's ``PushOutSeqScan``, for the work no other part of
  the step reads: that work stays fused into the step's kernels). A loop left returning
  a sequence's rows is then no loop at all.
- ``local_scan_push_out_output_dot`` (tagged ``scanOp_pushout_output``, Theano's name):
  a per-step output ``dot(x_t, W)`` of a value the step computes (an RNN's output
  projection ``h_t @ V``) by a non-sequence matrix is one product after the loop over
  the rows of all the steps of ``x`` (a state's buffer, or a per-step output the loop
  gives, made one when it is not): one large matrix product instead of ``n_steps``
  small ones (Theano's ``PushOutScanOutput``).
- ``local_scan_nitsot_of_sequence``: a per-step output that is a sequence's row as it
  is (what the two rewrites above leave of a stored input projection) is that sequence;
  one that is a non-sequence as it is (what hoisting leaves of a step whose work is all
  invariant) is that value repeated over the steps, an ``Alloc`` (Theano's pushout of
  a whole invariant step).
- ``local_scan_push_out_dot_sum``: a state that only accumulates products
  ``acc + a_t.T @ b_t`` and of which only the last value is read (a weight's gradient in
  backpropagation through time) becomes one product after the loop,
  ``acc_0 + A.T @ B`` over the rows of all the steps (``A``, ``B`` sequences or per-step
  outputs): one large product instead of ``n_steps`` small ones and additions into the
  accumulator (PyTensor's ``push_out_add``). Likewise ``acc + sum(g_t, axis=0)`` (a
  bias's gradient) is one sum over the rows of all the steps.
- ``local_scan_remove_unused_nitsot``: per-step outputs nothing reads are not computed
  (a gradient loop's sequence gradients, when only the weights' are asked for).
- ``local_add_of_slices_to_join``: the gradient of a value read by slices that tile an
  axis (an LSTM's four gates, ``z[:, :H]``, ``z[:, H:2H]``, ...) is a sum of increments
  of zeros, one per slice; it is the slices' gradients joined on that axis (no zero
  buffers, one write per element). Not about loops alone, but what a recurrent step's
  gradient is made of.
- ``local_scan_merge``: two loops over the same number of steps, neither reading the
  other, become one loop (Theano's ``ScanMerge``): one pass over the steps, one inner
  call per step. Loops with a stopping condition merge when the conditions compute the
  same from the same outer values.
- ``local_scan_save_memory`` (specialize): a state of which only the last steps are
  read (``out[-1]``, ``out[-j]``, or nothing) keeps a circular buffer of those rows
  instead of all ``n_steps`` (Theano's "save memory" rewrite): a 100,000-step loop whose
  last state alone is used holds two rows of it.
- ``local_elemwise_as_kernel`` (:mod:`~theano_dag.scan.step_kernels`; only in a loop's
  step, after its optimizer, when the CPU engine has its C loop): each elementwise node
  fusion left alone becomes a one-op ``Elemwise{Composite}``.
"""

from __future__ import annotations

from theano_dag import tensor as tt
from theano_dag.graph.basic import (
    Constant,
    ancestors,
    clone_replace,
    graph_inputs,
    io_toposort,
    is_in_ancestors,
)
from theano_dag.graph.comparison import equal_computations
from theano_dag.graph.rewriting.basic import GlobalOptimizer
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.graph.rewriting.navigator import in2out
from theano_dag.opt.optdb import register_canonicalize, register_specialize, register_useless
from theano_dag.opt.rewrites.utils import keep_static_shape
from theano_dag.scalar.arith import Second
from theano_dag.scan.grad import cast_like
from theano_dag.scan.op import Scan
from theano_dag.scan.step_kernels import local_elemwise_as_kernel
from theano_dag.tensor.basic import Alloc, NotScalarConstantError, get_scalar_constant_value
from theano_dag.tensor.elemwise import DimShuffle, Elemwise, Sum
from theano_dag.tensor.math import Dot
from theano_dag.tensor.subtensor import IncSubtensor, Subtensor
from theano_dag.tensor.type import TensorType

__all__ = [
    "ScanMerge",
    "local_add_of_slices_to_join",
    "local_scan_hoist_invariants",
    "local_scan_merge",
    "local_scan_nitsot_of_sequence",
    "local_scan_push_out_dot_sum",
    "local_scan_push_out_output_dot",
    "local_scan_push_out_seq",
    "local_scan_push_out_seq_dot",
    "local_scan_remove_unused_inputs",
    "local_scan_remove_unused_nitsot",
    "local_scan_save_memory",
    "local_scan_subsume",
    "local_elemwise_as_kernel",
]


def _hoistable(node, invariant, constants=False):
    """A node computed from loop-invariant values only, safe to run once outside
    (with ``constants``, also one of constants alone)."""
    if getattr(node.op, "destroy_map", None) or not node.inputs:
        return False
    if not all(isinstance(v.type, TensorType) for v in (*node.inputs, *node.outputs)):
        return False  # random generators and other state: leave them in the step
    # Constants alone are folded in the step (and a size-1 constant compiles into the
    # step's C kernel, where a hoisted one would be one more array read every step).
    return all(isinstance(i, Constant) or i in invariant for i in node.inputs) and (
        constants or any(not isinstance(i, Constant) for i in node.inputs)
    )


@register_canonicalize
@local_optimizer([Scan])
def local_scan_hoist_invariants(fgraph, node):
    """Move the step's loop-invariant computation out of the loop (see the module)."""
    # Scan(step(f(nonseqs), ...)) -> Scan(step(p, ...)) with p = f(nonseqs) outside
    op = node.op
    if not isinstance(op, Scan):
        return None
    n_in = len(op.inner_inputs)
    first_ns = n_in - op.n_nonseqs
    inner_ns = list(op.inner_inputs[first_ns:])
    outer_ns = list(node.inputs[len(node.inputs) - op.n_nonseqs :])
    invariant = set(inner_ns)
    hoisted_nodes = set()
    for inner_node in io_toposort(list(op.inner_inputs), list(op.inner_outputs)):
        if inner_node.inputs and _hoistable(inner_node, invariant):
            hoisted_nodes.add(inner_node)
            invariant.update(inner_node.outputs)
    if not hoisted_nodes:
        return None
    # The hoisted values the rest of the step reads (or that it returns as they are).
    frontier = {}
    for inner_node in io_toposort(list(op.inner_inputs), list(op.inner_outputs)):
        if inner_node in hoisted_nodes:
            continue
        for i in inner_node.inputs:
            if i.owner in hoisted_nodes:
                frontier.setdefault(i)
    for o in op.inner_outputs:
        if o.owner in hoisted_nodes:
            frontier.setdefault(o)
    frontier = list(frontier)
    if not frontier:
        return None
    holders = [v.type(v.name) for v in frontier]
    new_outs = clone_replace(list(op.inner_outputs), dict(zip(frontier, holders)))
    outer_values = clone_replace(frontier, dict(zip(inner_ns, outer_ns)))
    # Keep the non-sequences the step still reads.
    used = set(graph_inputs(new_outs))
    kept = [(h, o) for h, o in zip(inner_ns, outer_ns) if h in used]
    kept += [(h, o) for h, o in zip(holders, outer_values) if h in used]
    new_op = op.rebuilt(
        inner_inputs=[*op.inner_inputs[:first_ns], *(h for h, _ in kept)],
        inner_outputs=new_outs,
    )
    outer = node.inputs[: len(node.inputs) - op.n_nonseqs]
    return new_op(*outer, *(o for _, o in kept), return_list=True)


def _rows_from_end(client):
    """``j`` when ``client`` reads row ``-j`` (a constant) of its first input, else None."""
    if client == "output" or not isinstance(client.op, Subtensor):
        return None
    if client.op.idx_list[0][0] != "int" or not isinstance(client.inputs[1], Constant):
        return None
    index = int(client.inputs[1].data)
    return -index if index < 0 else None


def _is_steps_slice(client, m):
    """Whether ``client`` is ``buffer[m:]``, the steps after the initial rows."""
    if client == "output" or not isinstance(client.op, Subtensor):
        return False
    if client.op.idx_list[0] != ("slice", True, False, False):
        return False
    start = client.inputs[1]
    return isinstance(start, Constant) and int(start.data) == m


@register_specialize
@local_optimizer([Scan])
def local_scan_save_memory(fgraph, node):
    """Keep only the last rows of a state that is read only there (see the module)."""
    # Scan(...)[m:][-j] -> Scan(..., store=max(m+1, j))[-j]
    op = node.op
    if not isinstance(op, Scan):
        return None
    store = list(op.store)
    reads = {}  # state k -> [(variable read, its Subtensor node)]
    for k in range(op.n_states):
        if store[k]:
            continue
        m, need, found = op.mintaps[k], 1, []
        for client, _ in fgraph.clients.get(node.outputs[k], []):
            j = _rows_from_end(client)
            if j is not None:
                found.append(client)
                need = max(need, j)
                continue
            if not _is_steps_slice(client, m):
                break
            for grandchild, _ in fgraph.clients.get(client.outputs[0], []):
                j = _rows_from_end(grandchild)
                if j is None:
                    break
                found.append(grandchild)
                need = max(need, j)
            else:
                continue
            break
        else:
            store[k] = max(m + 1, need)
            reads[k] = found
    if not reads:
        return None
    new_op = op.rebuilt(store=store)
    new_outs = new_op(*node.inputs, return_list=True)
    replace = {
        old: new for k, (old, new) in enumerate(zip(node.outputs, new_outs)) if k not in reads
    }
    for k, clients in reads.items():
        for client in clients:
            # The same index from the end, on the rows kept.
            replace[client.outputs[0]] = client.op(new_outs[k], *client.inputs[1:])
    return replace


@register_canonicalize
@local_optimizer([Scan])
def local_scan_remove_unused_inputs(fgraph, node):
    """Drop the sequences and non-sequences the step does not read (see the module)."""
    # Scan(n, s_unused, ..., w_unused) -> Scan(n, ...)
    op = node.op
    if not isinstance(op, Scan):
        return None
    used = set(graph_inputs(list(op.inner_outputs)))
    ns, first_ns = op.n_seqs, len(op.inner_inputs) - op.n_nonseqs
    n_steps, seqs, inits, carries, nonseqs = op.split_outer(node.inputs)
    keep_seq = [k for k in range(ns) if op.inner_inputs[k] in used]
    keep_ns = [k for k in range(op.n_nonseqs) if op.inner_inputs[first_ns + k] in used]
    if len(keep_seq) == ns and len(keep_ns) == op.n_nonseqs:
        return None
    new_op = op.rebuilt(
        inner_inputs=[
            *(op.inner_inputs[k] for k in keep_seq),
            *op.inner_inputs[ns:first_ns],
            *(op.inner_inputs[first_ns + k] for k in keep_ns),
        ],
        n_seqs=len(keep_seq),
    )
    return new_op(
        n_steps,
        *(seqs[k] for k in keep_seq),
        *inits,
        *carries,
        *(nonseqs[k] for k in keep_ns),
        return_list=True,
    )


def _inner_parts(op):
    """The op's inner inputs and outputs, by kind."""
    ins, outs = list(op.inner_inputs), list(op.inner_outputs)
    n_taps = sum(len(t) for t in op.state_taps)
    a, b = op.n_seqs, op.n_seqs + n_taps
    c = b + op.n_carry
    nst, nit = op.n_states, op.n_nitsot
    return (
        (ins[:a], ins[a:b], ins[b:c], ins[c:]),
        (outs[:nst], outs[nst : nst + nit], outs[nst + nit : nst + nit + op.n_carry]),
    )


def _own_inner_inputs(op, other):
    """``op``, or a copy of it whose inner graph has inputs of its own when it shares some
    with ``other``'s: a loop and its clone (``theano.clone`` of a graph with a scan) hold
    the same inner graph, and the merged loop's inner function takes each input once."""
    if not set(op.inner_inputs) & set(other.inner_inputs):
        return op
    inputs = [x.clone() for x in op.inner_inputs]
    outputs = clone_replace(list(op.inner_outputs), dict(zip(op.inner_inputs, inputs)))
    return op.rebuilt(inner_inputs=inputs, inner_outputs=outputs)


def _same_value(x, y):
    """Whether scalars ``x`` and ``y`` are the same variable or equal constants."""
    if x is y:
        return True
    try:
        return get_scalar_constant_value(x) == get_scalar_constant_value(y)
    except NotScalarConstantError:
        return False


def _same_condition(node, other):
    """Whether Scan nodes ``node`` and ``other`` stop after the same steps: neither has a
    stopping condition, or both have one computing the same from the same outer
    sequences and non-sequences."""
    a, b = node.op, other.op
    if not (a.has_until or b.has_until):
        return True
    if not (a.has_until and b.has_until):
        return False
    # Inner inputs of the two loops that read the same outer value, row by row or whole.
    (sa, _, _, wa), _ = _inner_parts(a)
    (sb, _, _, wb), _ = _inner_parts(b)
    _, seq_a, _, _, ns_a = a.split_outer(node.inputs)
    _, seq_b, _, _, ns_b = b.split_outer(other.inputs)
    pairs = [
        (x, y)
        for xs, ys, outer_x, outer_y in ((sa, sb, seq_a, seq_b), (wa, wb, ns_a, ns_b))
        for x, ox in zip(xs, outer_x)
        for y, oy in zip(ys, outer_y)
        if ox is oy
    ]
    return equal_computations(
        [a.inner_outputs[-1]],
        [b.inner_outputs[-1]],
        [x for x, _ in pairs],
        [y for _, y in pairs],
    )


def _mergeable(node, other):
    """Whether Scan nodes ``node`` and ``other`` can run as one loop: the same ``n_steps``
    variable, the same stopping condition (or none), the same mode and truncation,
    neither reading the other."""
    a, b = node.op, other.op
    return (
        isinstance(b, Scan)
        and _same_value(other.inputs[0], node.inputs[0])
        and _same_condition(node, other)
        and a.mode == b.mode
        and a.truncate_gradient == b.truncate_gradient
        and not is_in_ancestors(other, node)
        and not is_in_ancestors(node, other)
    )


class ScanMerge(GlobalOptimizer):
    """Theano's global form of :func:`local_scan_merge`: merges the graph's mergeable
    loops (``belongs_to_set`` tells whether a Scan node can join a group of others).

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.scan.basic import scan
    >>> x = tt.vector("x")
    >>> a, _ = scan(lambda v: v * 2, sequences=x, n_steps=3)
    >>> b, _ = scan(lambda v: v + 1, sequences=x, n_steps=3)
    >>> ScanMerge().belongs_to_set(a.owner, [b.owner])
    True
    """

    def belongs_to_set(self, node, set_nodes):
        """Whether Scan node ``node`` can be merged with every node of ``set_nodes``."""
        return all(_mergeable(node, other) for other in set_nodes)

    def apply(self, fgraph):
        return in2out(local_scan_merge).optimize(fgraph)


@register_canonicalize
@local_optimizer([Scan])
def local_scan_merge(fgraph, node):
    """Merge ``node`` with another loop over the same steps (see the module)."""
    # Scan_a(n, ...), Scan_b(n, ...) -> Scan_ab(n, ...)
    op = node.op
    if not isinstance(op, Scan):
        return None
    n_steps = node.inputs[0]
    other = None
    for client, _ in fgraph.clients.get(n_steps, []):
        if client != "output" and client is not node and _mergeable(node, client):
            other = client
            break
    if other is None:
        return None
    nodes = [node, other]
    parts = [_inner_parts(node.op), _inner_parts(_own_inner_inputs(other.op, op))]
    outer = [nd.op.split_outer(nd.inputs) for nd in nodes]
    (s1, t1, c1, w1), (o1, y1, k1) = parts[0]
    (s2, t2, c2, w2), (o2, y2, k2) = parts[1]
    merged = Scan(
        [*s1, *s2, *t1, *t2, *c1, *c2, *w1, *w2],
        # (the conditions are the same: the first loop's stops the merged one)
        [*o1, *o2, *y1, *y2, *k1, *k2, *op.inner_outputs[len(op.inner_outputs) - op.has_until :]],
        n_seqs=len(s1) + len(s2),
        state_taps=[*op.state_taps, *other.op.state_taps],
        n_nitsot=len(y1) + len(y2),
        has_until=op.has_until,
        truncate_gradient=op.truncate_gradient,
        mode=op.mode,
        name=op.name or other.op.name,
        store=[*op.store, *other.op.store],
        n_carry=len(k1) + len(k2),
    )
    (_, sq1, in1, ca1, ns1), (_, sq2, in2, ca2, ns2) = outer
    res = merged(n_steps, *sq1, *sq2, *in1, *in2, *ca1, *ca2, *ns1, *ns2, return_list=True)
    st1, st2 = op.n_states, other.op.n_states
    ny1, ny2 = op.n_nitsot, other.op.n_nitsot
    states = res[: st1 + st2]
    nits = res[st1 + st2 : st1 + st2 + ny1 + ny2]
    carries = res[st1 + st2 + ny1 + ny2 :]
    new_first = [*states[:st1], *nits[:ny1], *carries[: op.n_carry]]
    new_second = [*states[st1:], *nits[ny1:], *carries[op.n_carry :]]
    replace = dict(zip(node.outputs, new_first))
    replace.update(zip(other.outputs, new_second))
    return replace


def _extends(small, big):
    """Whether Scan op ``big`` is ``small`` with extra per-step outputs after its own
    (the same inner inputs and outputs, the same variables)."""
    a, b = small, big
    if a.inner_inputs != b.inner_inputs or b.n_nitsot < a.n_nitsot:
        return False
    same = ("n_seqs", "state_taps", "has_until", "truncate_gradient", "mode", "store", "n_carry")
    if any(getattr(a, k) != getattr(b, k) for k in same):
        return False
    k = a.n_states + a.n_nitsot
    extra = b.n_nitsot - a.n_nitsot
    return a.inner_outputs[:k] == b.inner_outputs[:k] and (
        a.inner_outputs[k:] == b.inner_outputs[k + extra :]
    )


@register_useless
@local_optimizer([Scan])
def local_scan_subsume(fgraph, node):
    """Make ``node`` the loop that computes the same with more outputs (see the module)."""
    # Scan_a(inputs), Scan_ab(inputs) with Scan_ab = Scan_a + outputs -> Scan_ab
    op = node.op
    if not isinstance(op, Scan):
        return None
    for client, _ in fgraph.clients.get(node.inputs[0], []):
        if (
            client == "output"
            or client is node
            or not isinstance(client.op, Scan)
            or client.inputs != node.inputs
            or not _extends(op, client.op)
        ):
            continue
        k = op.n_states + op.n_nitsot
        extra = client.op.n_nitsot - op.n_nitsot
        return [*client.outputs[:k], *client.outputs[k + extra :]]
    return None


def _rows_of(x):
    """``x`` of 3 dimensions (steps, rows, columns) as a matrix of all the rows."""
    # (-1: one shape entry less to compute; the columns fix it even with no rows)
    return tt.reshape(x, (-1, x.shape[2]), ndim=2)


def _steps_dot(rows, w, row_ndim):
    """``dot(x_t, w)`` for every step at once, ``rows`` the steps' rows of ``x`` (vectors,
    ``row_ndim`` 1: one matrix product; matrices: one product of their rows, reshaped
    back to a stack)."""
    if row_ndim == 1:
        return tt.dot(rows, w)
    flat = tt.dot(_rows_of(rows), w)
    return tt.reshape(flat, (rows.shape[0], rows.shape[1], w.shape[1]), ndim=3)


@register_canonicalize
@local_optimizer([Scan])
def local_scan_push_out_seq_dot(fgraph, node):
    """One product before the loop for the steps' ``x_t @ W`` (see the module)."""
    # Scan(step(dot(x_t, W)), X, W) -> Scan(step(p_t), P) with P = dot(X[:n], W) by rows
    op = node.op
    if not isinstance(op, Scan):
        return None
    n_in = len(op.inner_inputs)
    seq_vars = list(op.inner_inputs[: op.n_seqs])
    ns_vars = list(op.inner_inputs[n_in - op.n_nonseqs :])
    found = []
    for inner in io_toposort(list(op.inner_inputs), list(op.inner_outputs)):
        if not isinstance(inner.op, Dot):
            continue
        x, w = inner.inputs
        if x in seq_vars and w in ns_vars and w.ndim == 2 and x.ndim in (1, 2):
            found.append(inner)
    if not found:
        return None
    n_steps, seqs, inits, carries, nonseqs = op.split_outer(node.inputs)
    holders, outer = [], []
    for inner in found:
        x, w = inner.inputs
        rows = seqs[seq_vars.index(x)][:n_steps]
        product = _steps_dot(rows, nonseqs[ns_vars.index(w)], x.ndim)
        out = inner.outputs[0]
        holder = out.type(f"{x.name or 'x'}_dot")
        holders.append(holder)
        outer.append(
            cast_like(product, tt.TensorType(out.type.dtype, (False, *out.broadcastable))())
        )
    new_outs = clone_replace(
        list(op.inner_outputs), {n.outputs[0]: h for n, h in zip(found, holders)}
    )
    new_op = op.rebuilt(
        inner_inputs=[*seq_vars, *holders, *op.inner_inputs[op.n_seqs :]],
        inner_outputs=new_outs,
        n_seqs=op.n_seqs + len(holders),
    )
    return new_op(n_steps, *seqs, *outer, *inits, *carries, *nonseqs, return_list=True)


def _per_step(node, per_step, fixed):
    """Whether ``node`` (of the step) is an Elemwise or a DimShuffle of values that are
    per-step rows pushed out (``per_step``: a sequence's row, or such work on it) or the
    same at every step (``fixed``, or constants), at least one per-step."""
    if getattr(node.op, "destroy_map", None) or len(node.outputs) != 1:
        return False
    if not isinstance(node.op, (Elemwise, DimShuffle)):
        return False
    if not isinstance(node.outputs[0].type, TensorType):
        return False
    return any(i in per_step for i in node.inputs) and all(
        i in per_step or i in fixed or isinstance(i, Constant) for i in node.inputs
    )


def _over_steps(node, per_step, stacked, fixed):
    """``node`` (see :func:`_per_step`) applied to all the steps' rows at once:
    ``stacked(v)`` is the stack of rows of a value of ``per_step``, ``fixed(v)`` the
    outer equal of another (the same for every step, with a dimension for the steps)."""
    out = node.outputs[0]
    if isinstance(node.op, DimShuffle):
        # (the row's dims shift by one behind the steps' axis)
        order = [0, *("x" if o == "x" else o + 1 for o in node.op.new_order)]
        result = stacked(node.inputs[0]).dimshuffle(*order)
    else:
        result = node.op(*(stacked(i) if i in per_step else fixed(i) for i in node.inputs))
    return cast_like(result, TensorType(out.type.dtype, (False, *out.broadcastable))())


@register_canonicalize("scan", "scanOp_pushout_seqs_ops")
@local_optimizer([Scan])
def local_scan_push_out_seq(fgraph, node):
    """A per-step output made by elementwise work on the sequences' rows is computed on
    all the steps' rows at once, before the loop (see the module)."""
    # Scan(outputs=[f(x_t, w)], X, w) -> Scan(outputs=[p_t], P) with P = f(X[:n], w[None])
    op = node.op
    if not isinstance(op, Scan):
        return None
    seq_vars = list(op.inner_inputs[: op.n_seqs])
    ns_vars = list(op.inner_inputs[len(op.inner_inputs) - op.n_nonseqs :])
    inner_nodes = io_toposort(list(op.inner_inputs), list(op.inner_outputs))
    # Which nodes: decided on the step's graph alone, before building anything outside.
    per_step, fixed, pushable = set(seq_vars), set(ns_vars), []
    for inner in inner_nodes:
        if _hoistable(inner, fixed, constants=True):
            fixed.update(inner.outputs)  # (a constant broadcast to the row's dims)
        elif _per_step(inner, per_step, fixed):
            pushable.append(inner)
            per_step.add(inner.outputs[0])
    # Only work whose results are per-step outputs, read by nothing else of the step: the
    # loop stores those rows anyway, so one vectorised operation replaces n_steps small
    # ones at no cost in memory. (Work the step reads stays in it, fused with the rest
    # into the step's kernels: stored over all the steps, it would cost more than it
    # saves.)
    nst, nit = op.n_states, op.n_nitsot
    stored = set(op.inner_outputs[nst : nst + nit])
    others = set(op.inner_outputs) - stored
    readers = {}
    for inner in inner_nodes:
        for i in inner.inputs:
            readers.setdefault(i, []).append(inner)
    done = set()
    for inner in reversed(pushable):
        out = inner.outputs[0]
        if out in others or not (out in stored or out in readers):
            continue
        if all(r in done for r in readers.get(out, ())):
            done.add(inner)
    if not done:
        return None
    n_steps, seqs, inits, carries, nonseqs = op.split_outer(node.inputs)
    outer = {}
    outer_ns = dict(zip(ns_vars, nonseqs))

    def stacked(v):
        if v not in outer:
            outer[v] = seqs[seq_vars.index(v)][:n_steps]
        return outer[v]

    def fixed_value(v):
        # the same for every step: a dimension in front for the steps
        if isinstance(v, Constant):
            value = v
        else:
            value = outer_ns[v] if v in outer_ns else clone_replace([v], outer_ns)[0]
        return value.dimshuffle("x", *range(v.ndim))

    needed, candidates = set(done), set(pushable)
    for inner in reversed(pushable):
        if inner in needed:
            needed.update(i.owner for i in inner.inputs if i.owner in candidates)
    for inner in pushable:
        if inner in needed:
            outer[inner.outputs[0]] = _over_steps(inner, per_step, stacked, fixed_value)
    # The per-step outputs computed before the loop: the step returns their rows as read.
    frontier = list(dict.fromkeys(o for o in op.inner_outputs if o.owner in done))
    holders = [v.type(v.name) for v in frontier]
    new_op = op.rebuilt(
        inner_inputs=[*seq_vars, *holders, *op.inner_inputs[op.n_seqs :]],
        inner_outputs=clone_replace(list(op.inner_outputs), dict(zip(frontier, holders))),
        n_seqs=op.n_seqs + len(holders),
    )
    new_seqs = [outer[v] for v in frontier]
    return new_op(n_steps, *seqs, *new_seqs, *inits, *carries, *nonseqs, return_list=True)


@register_canonicalize("scan", "scanOp_pushout_output")
@local_optimizer([Scan])
def local_scan_push_out_output_dot(fgraph, node):
    """A per-step output ``dot(x_t, W)`` (``W`` a non-sequence matrix, ``x_t`` computed
    by the step) is one product after the loop (see the module)."""
    # Scan(outputs=[h_t, dot(h_t, W)]) -> Scan(outputs=[h_t]); dot(H[m:], W) by rows
    op = node.op
    if not isinstance(op, Scan):
        return None
    nst, nit = op.n_states, op.n_nitsot
    outs = list(op.inner_outputs)
    ns_vars = list(op.inner_inputs[len(op.inner_inputs) - op.n_nonseqs :])
    found = {}  # per-step output j -> (x_t, W)
    for j in range(nit):
        o = outs[nst + j]
        if o.owner is None or not isinstance(o.owner.op, Dot) or outs.count(o) > 1:
            continue
        x, w = o.owner.inputs
        # (x_t an inner input: a sequence's row is pushed out before the loop, a tap
        # would be a shifted buffer)
        if w in ns_vars and w.ndim == 2 and x.ndim in (1, 2) and x.owner is not None:
            k = outs.index(x) if x in outs[:nst] else None
            if k is None or not op.store[k]:
                found[j] = (x, w)
    if not found:
        return None
    nitsots = outs[nst : nst + nit]
    # Values the loop must now give per step: those it does not give already.
    new_nits = []
    for x, _ in found.values():
        if (
            x not in outs[:nst]
            and x not in new_nits
            and (x not in nitsots or nitsots.index(x) in found)
        ):
            new_nits.append(x)
    kept = [j for j in range(nit) if j not in found]
    new_op = op.rebuilt(
        inner_outputs=[
            *outs[:nst],
            *(nitsots[j] for j in kept),
            *new_nits,
            *outs[nst + nit :],
        ],
        n_nitsot=len(kept) + len(new_nits),
    )
    res = new_op(*node.inputs, return_list=True)
    new_rows = dict(zip((nitsots[j] for j in kept), res[nst : nst + len(kept)]))
    new_rows.update(zip(new_nits, res[nst + len(kept) : nst + len(kept) + len(new_nits)]))
    n_steps, _, _, _, nonseqs = op.split_outer(node.inputs)
    replace = dict(zip(node.outputs[:nst], res[:nst]))
    replace.update(zip((node.outputs[nst + j] for j in kept), res[nst : nst + len(kept)]))
    replace.update(zip(node.outputs[nst + nit :], res[nst + len(kept) + len(new_nits) :]))
    for j, (x, w) in found.items():
        if x in outs[:nst]:
            k = outs.index(x)
            rows = res[k][op.mintaps[k] :]  # the state's steps, after its initial rows
        else:
            rows = new_rows[x]
        product = _steps_dot(rows, nonseqs[ns_vars.index(w)], x.ndim)
        replace[node.outputs[nst + j]] = cast_like(product, node.outputs[nst + j])
    return replace


@register_canonicalize
@local_optimizer([Scan])
def local_scan_nitsot_of_sequence(fgraph, node):
    """A per-step output that is a sequence's row is that sequence; one that is a
    non-sequence is that value repeated over the steps (see the module)."""
    # Scan(outputs=[..., x_t]) -> X[:n];  Scan(outputs=[..., w]) -> alloc(w, n, *w.shape)
    op = node.op
    if not isinstance(op, Scan) or op.has_until:
        return None
    nst, nit = op.n_states, op.n_nitsot
    seq_vars = list(op.inner_inputs[: op.n_seqs])
    ns_vars = list(op.inner_inputs[len(op.inner_inputs) - op.n_nonseqs :])
    gone = [j for j in range(nit) if op.inner_outputs[nst + j] in (*seq_vars, *ns_vars)]
    if not gone:
        return None
    n_steps, seqs, _, _, nonseqs = op.split_outer(node.inputs)
    outs = list(op.inner_outputs)
    kept = [o for j, o in enumerate(outs) if j - nst not in gone]
    new_op = op.rebuilt(inner_outputs=kept, n_nitsot=nit - len(gone))
    res = iter(new_op(*node.inputs, return_list=True))
    replace = {}
    for j, old in enumerate(node.outputs):
        if j - nst not in gone:
            replace[old] = next(res)
        elif outs[j] in seq_vars:
            replace[old] = cast_like(seqs[seq_vars.index(outs[j])][:n_steps], old)
        else:
            w = nonseqs[ns_vars.index(outs[j])]
            replace[old] = cast_like(tt.alloc(w, n_steps, *w.shape), old)
    return replace


def _last_row_reads(fgraph, buffer, m):
    """The nodes reading ``buffer[-1]`` or ``buffer[m:][-1]`` when those are all its
    reads, else None."""
    found = []
    for client, _ in fgraph.clients.get(buffer, []):
        if _rows_from_end(client) == 1:
            found.append(client)
            continue
        if not _is_steps_slice(client, m):
            return None
        grandchildren = [c for c, _ in fgraph.clients.get(client.outputs[0], [])]
        if not grandchildren or any(_rows_from_end(c) != 1 for c in grandchildren):
            return None
        found.extend(grandchildren)
    return found or None


def _dot_total(a_rows, b_rows):
    # sum_t a_t.T @ b_t over all the steps' rows
    return tt.dot(_rows_of(a_rows).T, _rows_of(b_rows))


def _dot_sum_term(op, acc_in, out):
    """``(per-step values, total)`` when the state's step is ``acc + dot(a_t.T, b_t)``
    (``a_t``, ``b_t`` matrices) or ``acc + sum(g_t, axis=0)`` (``g_t`` a matrix, the sum
    maybe under DimShuffles) with terms that do not read ``acc``; ``total`` gives the
    sum over the steps from the values' stacked rows. Else None."""
    if out.owner is None or not isinstance(out.owner.op, Elemwise):
        return None
    if getattr(out.owner.op.scalar_op, "name", None) != "add" or len(out.owner.inputs) != 2:
        return None
    a, b = out.owner.inputs
    term = b if a is acc_in else a if b is acc_in else None
    if term is None or term.owner is None or out.type.dtype != term.type.dtype:
        return None
    if isinstance(term.owner.op, Dot):
        at, bt = term.owner.inputs
        if not (
            at.owner is not None
            and isinstance(at.owner.op, DimShuffle)
            and at.owner.op.new_order == (1, 0)
            and bt.ndim == 2
        ):
            return None
        values, total = (at.owner.inputs[0], bt), _dot_total
    else:
        summed = term
        while summed.owner is not None and isinstance(summed.owner.op, DimShuffle):
            summed = summed.owner.inputs[0]
        if summed.owner is None or not isinstance(summed.owner.op, Sum):
            return None
        (g_t,) = summed.owner.inputs
        if summed.owner.op.axis != (0,) or g_t.ndim != 2:
            return None

        def total(g_rows):
            # sum_t sum(g_t, axis=0) over all the steps' rows, under the same DimShuffles
            # (a state of a known length: the stacked rows' sum is known only to be a vector)
            whole = keep_static_shape(cast_like(tt.sum(g_rows, axis=(0, 1)), summed), summed)
            return clone_replace([term], {summed: whole})[0]

        values = (g_t,)
    if acc_in in ancestors(list(values)):
        return None
    return values, total


@register_canonicalize
@local_optimizer([Scan])
def local_scan_push_out_dot_sum(fgraph, node):
    """Accumulated products become one product after the loop (see the module)."""
    # Scan(acc + dot(a_t.T, b_t))[-1] -> acc_0[-1] + dot(rows(A).T, rows(B))
    # Scan(acc + sum(g_t, 0))[-1] -> acc_0[-1] + sum(G, (0, 1))
    op = node.op
    if not isinstance(op, Scan) or op.has_until:
        return None
    nst, nit = op.n_states, op.n_nitsot
    taps = op.inner_tap_inputs()
    inner_nodes = io_toposort(list(op.inner_inputs), list(op.inner_outputs))
    readers = {}
    for inner in inner_nodes:
        for i in inner.inputs:
            readers.setdefault(i, set()).add(inner)
    found = {}
    for k in range(nst):
        if op.state_taps[k] != (-1,):
            continue
        acc_in, out = taps[k][0], op.inner_outputs[k]
        pair = _dot_sum_term(op, acc_in, out)
        # The accumulator is read by its own sum alone, and the sum is no other output.
        if pair is None or readers.get(acc_in) != {out.owner}:
            continue
        if any(o is out for j, o in enumerate(op.inner_outputs) if j != k):
            continue
        clients = _last_row_reads(fgraph, node.outputs[k], op.mintaps[k])
        if clients:
            found[k] = (pair, clients)
    if not found:
        return None
    n_steps, seqs, inits, carries, nonseqs = op.split_outer(node.inputs)
    seq_vars = list(op.inner_inputs[: op.n_seqs])
    outs = list(op.inner_outputs)
    new_nits = []  # inner variables made per-step outputs
    for (values, _), _ in found.values():
        for v in values:
            if v not in seq_vars and v not in outs[nst : nst + nit] and v not in new_nits:
                new_nits.append(v)
    keep = [k for k in range(nst) if k not in found]
    dropped = {taps[k][0] for k in found}
    n_tap_inputs = sum(len(t) for t in op.state_taps)
    new_op = op.rebuilt(
        inner_inputs=[
            *seq_vars,
            *(v for v in op.inner_inputs[op.n_seqs : op.n_seqs + n_tap_inputs] if v not in dropped),
            *op.inner_inputs[op.n_seqs + n_tap_inputs :],
        ],
        inner_outputs=[
            *(outs[k] for k in keep),
            *outs[nst : nst + nit],
            *new_nits,
            *outs[nst + nit :],
        ],
        n_nitsot=nit + len(new_nits),
        state_taps=[op.state_taps[k] for k in keep],
        store=[op.store[k] for k in keep],
    )
    res = new_op(n_steps, *seqs, *(inits[k] for k in keep), *carries, *nonseqs, return_list=True)
    new_states, rest = res[: len(keep)], res[len(keep) :]
    new_nit_rows = rest[nit : nit + len(new_nits)]
    replace = dict(zip((node.outputs[k] for k in keep), new_states))
    replace.update(zip(node.outputs[nst:], [*rest[:nit], *rest[nit + len(new_nits) :]]))

    def all_rows(v):
        if v in seq_vars:
            return seqs[seq_vars.index(v)][:n_steps]
        if v in new_nits:
            return new_nit_rows[new_nits.index(v)]
        return rest[outs[nst : nst + nit].index(v)]

    for k, ((values, sum_of), clients) in found.items():
        total = inits[k][-1] + sum_of(*(all_rows(v) for v in values))
        for client in clients:
            old = client.outputs[0]
            replace[old] = keep_static_shape(cast_like(total, old), old)
    return replace


@register_canonicalize
@local_optimizer([Scan])
def local_scan_remove_unused_nitsot(fgraph, node):
    """Drop the per-step outputs nothing reads (see the module)."""
    # Scan(outputs=[..., y_unused]) -> Scan(outputs=[...])
    op = node.op
    if not isinstance(op, Scan):
        return None
    nst, nit = op.n_states, op.n_nitsot
    unused = [j for j in range(nit) if not fgraph.clients.get(node.outputs[nst + j])]
    if not unused:
        return None
    kept = [o for j, o in enumerate(op.inner_outputs) if j - nst not in unused]
    new_op = op.rebuilt(inner_outputs=kept, n_nitsot=nit - len(unused))
    res = iter(new_op(*node.inputs, return_list=True))
    return {old: next(res) for j, old in enumerate(node.outputs) if j - nst not in unused}


FULL_SLICE = ("slice", False, False, False)


def _zeros_source(x):
    """What decides the shape of ``x`` when ``x`` is zeros made by ``second(z, 0)``
    (``z``) or ``alloc(0, *shape)`` (the shape), else None."""
    node = x.owner
    if node is None:
        return None
    if isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, Second):
        source = node.inputs[0]
    elif isinstance(node.op, Alloc):
        source = tuple(node.inputs[1:])
    else:
        return None
    try:
        return source if get_scalar_constant_value(x) == 0 else None
    except NotScalarConstantError:
        return None


def _slice_piece(var):
    """``(source, axis, start, stop, value)`` when ``var`` is zeros with one slice along
    one axis set or incremented by ``value`` (constant bounds, ``stop`` None to the
    end), else None."""
    node = var.owner
    if node is None or not isinstance(node.op, IncSubtensor):
        return None
    x, y, *bounds = node.inputs
    source = _zeros_source(x)
    idx = node.op.idx_list
    cut = [d for d, e in enumerate(idx) if e != FULL_SLICE]
    if source is None or len(cut) != 1 or y.ndim != x.ndim:
        return None
    (axis,) = cut
    kind, has_start, has_stop, has_step = idx[axis]
    if kind != "slice" or has_step or y.broadcastable != x.broadcastable:
        return None
    try:
        vals = [int(get_scalar_constant_value(b)) for b in bounds]
    except NotScalarConstantError:
        return None
    it = iter(vals)
    start = next(it) if has_start else 0
    stop = next(it) if has_stop else None
    if start < 0 or (stop is not None and stop <= start):
        return None
    return source, axis, start, stop, y


@register_canonicalize
@local_optimizer([Elemwise], needs=[IncSubtensor])
def local_add_of_slices_to_join(fgraph, node):
    """The sum of zeros with slices tiling an axis set is their join (see the module)."""
    # inc(zeros, a, [:, :H]) + inc(zeros, b, [:, H:]) -> join(1, a, b)
    if getattr(node.op.scalar_op, "name", None) != "add" or len(node.inputs) < 2:
        return None
    pieces = [_slice_piece(v) for v in node.inputs]
    found = [p for p in pieces if p is not None]
    if len(found) < 2 or len({(p[0], p[1]) for p in found}) != 1:
        return None
    found.sort(key=lambda p: p[2])
    ends = [p[3] for p in found]
    starts = [p[2] for p in found]
    if starts[0] != 0 or ends[-1] is not None or ends[:-1] != starts[1:]:
        return None  # not a tiling of the axis
    out = node.outputs[0]
    joined = tt.join(found[0][1], *(tt.cast(p[4], out.dtype) for p in found))
    rest = [v for v, p in zip(node.inputs, pieces) if p is None]
    return [cast_like(tt.add(joined, *rest) if rest else joined, out)]
