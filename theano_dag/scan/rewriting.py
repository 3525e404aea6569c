"""Rewrites of ``Scan`` nodes, in the optdb's canonicalize (FAST_RUN).

- ``local_scan_hoist_invariants``: what the step computes from non-sequences and
  constants alone is the same at every step: compute it once, before the loop, and pass
  it in as a non-sequence (Theano's ``scan_opt.PushOutNonSeqScan``). Non-sequences the
  step no longer reads are dropped.
- ``local_scan_remove_unused_inputs``: sequences and non-sequences the step does not
  read are not sliced or passed (a gradient loop often leaves some).
- ``local_scan_merge``: two loops over the same number of steps, neither reading the
  other, become one loop (Theano's ``ScanMerge``): one pass over the steps, one inner
  call per step.
- ``local_scan_save_memory`` (specialize): a state of which only the last steps are
  read (``out[-1]``, ``out[-j]``, or nothing) keeps a circular buffer of those rows
  instead of all ``n_steps`` (Theano's "save memory" rewrite): a 100,000-step loop whose
  last state alone is used holds two rows of it.
- ``local_elemwise_as_kernel`` (:mod:`~theano_dag.scan.step_kernels`; only in a loop's
  step, after its optimizer, when the CPU engine has its C loop): each elementwise node
  fusion left alone becomes a one-op ``Elemwise{Composite}``.
"""

from __future__ import annotations

from theano_dag.graph.basic import (
    Constant,
    clone_replace,
    graph_inputs,
    io_toposort,
    is_in_ancestors,
)
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.opt.optdb import register_canonicalize, register_specialize
from theano_dag.scan.op import Scan
from theano_dag.scan.step_kernels import local_elemwise_as_kernel
from theano_dag.tensor.subtensor import Subtensor
from theano_dag.tensor.type import TensorType

__all__ = [
    "local_scan_hoist_invariants",
    "local_scan_merge",
    "local_scan_remove_unused_inputs",
    "local_scan_save_memory",
    "local_elemwise_as_kernel",
]


def _hoistable(node, invariant):
    """A node computed from loop-invariant values only, safe to run once outside."""
    if getattr(node.op, "destroy_map", None):
        return False
    if not all(isinstance(v.type, TensorType) for v in (*node.inputs, *node.outputs)):
        return False  # random generators and other state: leave them in the step
    # Constants alone are folded in the step (and a size-1 constant compiles into the
    # step's C kernel, where a hoisted one would be one more array read every step).
    return all(isinstance(i, Constant) or i in invariant for i in node.inputs) and any(
        not isinstance(i, Constant) for i in node.inputs
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
    new_op = Scan(
        [*op.inner_inputs[:first_ns], *(h for h, _ in kept)],
        new_outs,
        n_seqs=op.n_seqs,
        state_taps=op.state_taps,
        n_nitsot=op.n_nitsot,
        has_until=op.has_until,
        truncate_gradient=op.truncate_gradient,
        mode=op.mode,
        name=op.name,
        store=op.store,
        n_carry=op.n_carry,
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
    new_op = Scan(
        op.inner_inputs,
        op.inner_outputs,
        n_seqs=op.n_seqs,
        state_taps=op.state_taps,
        n_nitsot=op.n_nitsot,
        has_until=op.has_until,
        truncate_gradient=op.truncate_gradient,
        mode=op.mode,
        name=op.name,
        store=store,
        n_carry=op.n_carry,
    )
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
    new_op = Scan(
        [
            *(op.inner_inputs[k] for k in keep_seq),
            *op.inner_inputs[ns:first_ns],
            *(op.inner_inputs[first_ns + k] for k in keep_ns),
        ],
        op.inner_outputs,
        n_seqs=len(keep_seq),
        state_taps=op.state_taps,
        n_nitsot=op.n_nitsot,
        has_until=op.has_until,
        truncate_gradient=op.truncate_gradient,
        mode=op.mode,
        name=op.name,
        store=op.store,
        n_carry=op.n_carry,
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


@register_canonicalize
@local_optimizer([Scan])
def local_scan_merge(fgraph, node):
    """Merge ``node`` with another loop over the same steps (see the module)."""
    # Scan_a(n, ...), Scan_b(n, ...) -> Scan_ab(n, ...)
    op = node.op
    if not isinstance(op, Scan) or op.has_until:
        return None
    n_steps = node.inputs[0]
    other = None
    for client, _ in fgraph.clients.get(n_steps, []):
        if (
            client != "output"
            and client is not node
            and isinstance(client.op, Scan)
            and client.inputs[0] is n_steps
            and not client.op.has_until
            and client.op.mode == op.mode
            and client.op.truncate_gradient == op.truncate_gradient
            and not is_in_ancestors(client, node)
            and not is_in_ancestors(node, client)
        ):
            other = client
            break
    if other is None:
        return None
    nodes = [node, other]
    parts = [_inner_parts(nd.op) for nd in nodes]
    outer = [nd.op.split_outer(nd.inputs) for nd in nodes]
    (s1, t1, c1, w1), (o1, y1, k1) = parts[0]
    (s2, t2, c2, w2), (o2, y2, k2) = parts[1]
    merged = Scan(
        [*s1, *s2, *t1, *t2, *c1, *c2, *w1, *w2],
        [*o1, *o2, *y1, *y2, *k1, *k2],
        n_seqs=len(s1) + len(s2),
        state_taps=[*op.state_taps, *other.op.state_taps],
        n_nitsot=len(y1) + len(y2),
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
