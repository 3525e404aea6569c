"""The FunctionGraph a function compiles, and its memory contract's graph side.

``std_fgraph`` builds it (outputs, then one extra output per update) and attaches the
protections: a ``Supervisor`` over the immutable inputs, a ``DestroyHandler`` when the
user's graph has in-place ops. ``insert_deepcopy`` then breaks the aliasing between
outputs, inputs and constants, and ``infer_reuse_pattern`` lists the storage the linker
must not reuse between calls. ``FunctionMaker`` (``function_module``) calls these.
"""

from __future__ import annotations

from theano_dag.compile.io import SymbolicOutput
from theano_dag.graph.basic import graph_inputs
from theano_dag.graph.destroyhandler import DestroyHandler
from theano_dag.graph.fg import FunctionGraph, InconsistencyError
from theano_dag.graph.identity_ops import deep_copy_op, view_op
from theano_dag.graph.toolbox import PreserveVariableAttributes, Supervisor

__all__ = [
    "std_fgraph",
    "attach_protection",
    "insert_deepcopy",
    "infer_reuse_pattern",
    "alias_root",
    "view_tree_set",
]


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
    fgraph = FunctionGraph(orig_inputs, orig_outputs, update_mapping=update_mapping)
    attach_protection(fgraph, input_specs, accept_inplace)
    return fgraph, [SymbolicOutput(u) for u in updates]


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

        fgraph.attach_feature(DestroyHandler())
    # Unlike Theano, an input the user's own graph destroys is protected too:
    # only In(mutable=True) lets a function overwrite what the caller passed.
    protected = [inp for spec, inp in zip(input_specs, fgraph.inputs) if not spec.mutable]
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
    # Constants are graph inputs too, though not fgraph.inputs.
    all_graph_inputs = list(graph_inputs(fgraph.outputs))

    def wrap(i, borrowed):
        op = view_op if borrowed else deep_copy_op
        fgraph.change_input("output", i, op(fgraph.outputs[i]), reason=reason)

    for i in range(len(fgraph.outputs)):
        views_of_output_i: set = set()
        view_tree_set(fgraph, alias_root(fgraph.outputs[i]), views_of_output_i)
        copied = False
        for j in range(i + 1, len(fgraph.outputs)):
            if fgraph.outputs[j] in views_of_output_i:
                wrap(i, wrapped_outputs[i].borrow and wrapped_outputs[j].borrow)
                copied = True
                break
        if copied:
            continue
        for input_j in all_graph_inputs:
            # An updated shared variable's old value may be returned as is: the
            # update gives the variable a new object, it does not write into it.
            if input_j in updated_inputs:
                continue
            if input_j in views_of_output_i and not _has_destroyers(fgraph, input_j):
                if input_j in input_index:
                    spec = wrapped_inputs[input_index[input_j]]
                    wrap(i, wrapped_outputs[i].borrow and spec.borrow)
                else:
                    wrap(i, wrapped_outputs[i].borrow)
                break
