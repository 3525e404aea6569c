"""Elementwise fusion: trees of Elemwise nodes become one ``Elemwise{Composite}``.

An engine runs a Composite as one loop over the elements, computing the whole tree per
element without storing the intermediates. ``FusionOptimizer`` walks the graph once,
from the outputs: each Elemwise node not yet fused starts a group and absorbs the
Elemwise nodes that compute its inputs, when those are used only inside the group and
have the group's broadcast pattern (fusing a row into a matrix loop would recompute the
row for every line). A group takes at most ``max_inputs`` distinct inputs. The work is
linear in the size of the graph.

``local_fused_reduce`` then turns a reduction of a (fused) Elemwise used only by that
reduction into one ``FusedReduce`` node.
"""

from __future__ import annotations

import time

import numpy as np

from theano_dag import scalar as ts
from theano_dag.graph.basic import Apply, Constant, _node_of_fresh_output
from theano_dag.graph.rewriting.basic import GlobalOptimizer
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.graph.toolbox import ReplaceValidate
from theano_dag.graph.utils import copy_stack_trace
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import fit, scalar_op, single_client
from theano_dag.scalar import Composite, ScalarVariable, get_scalar_type
from theano_dag.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from theano_dag.tensor.fused import FusedReduce

__all__ = ["FusionOptimizer", "MAX_FUSED_INPUTS", "local_fused_reduce"]

_SCALAR_MAKE_NODE = ts.ScalarOp.make_node

# Inputs of one fused loop at most (a C kernel's argument list stays reasonable): 31, as
# Theano's, so that with its output a kernel takes at most 32 arrays.
MAX_FUSED_INPUTS = 31


def _fusable(node) -> bool:
    sop = scalar_op(node)
    if sop is None or len(node.outputs) != 1 or getattr(sop, "nout", 1) != 1:
        return False
    # A complex value has no C type: a loop holding one runs in numpy, and would take
    # the real work fused with it there too.
    real = _REAL_DTYPES  # (the common case, without a call per input)
    for v in node.inputs:
        if getattr(v.type, "dtype", "") not in real and _is_complex(v):
            return False
    return not _is_complex(node.outputs[0])


def _fusable_memo(node, memo) -> bool:
    ok = memo.get(node)
    if ok is None:
        ok = memo[node] = _fusable(node)
    return ok


def _all_in(var_clients, nodes) -> bool:
    """Whether every client ``(node, i)`` of ``var_clients`` is one of ``nodes``."""
    for c, _ in var_clients:
        if c not in nodes:
            return False
    return True


def _takes_an_input(root, clients, memo) -> bool:
    """Whether the group ``root`` starts absorbs at least the node computing one of its
    inputs: ``_grow``'s first step, without its objects, for the many nodes that stay
    alone. (An input used elsewhere too waits in ``_grow`` for the group to take its
    other uses, which it can only do after a first absorption.)"""
    pattern = None
    for var in root.inputs:
        owner = var.owner
        if owner is None:
            continue
        for c, _ in clients.get(var, ()):
            if c is not root:
                break
        else:
            if pattern is None:
                pattern = root.outputs[0].type.broadcastable
            if var.type.broadcastable == pattern and _fusable_memo(owner, memo):
                return True
    return False


def _is_complex(var) -> bool:
    dtype = getattr(var.type, "dtype", "")
    if dtype in _REAL_DTYPES:  # the common case, without formatting the dtype
        return False
    return str(dtype).startswith("complex")


_REAL_DTYPES = frozenset(
    ("float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint64",
     "uint32", "uint16", "uint8", "bool")
)  # fmt: skip


def _scalar_constant(var):
    """The 0-d data of ``var`` when it is a constant broadcast everywhere (inlined into
    the Composite), else None."""
    base = var
    if base.owner is not None and isinstance(base.owner.op, DimShuffle):
        base = base.owner.inputs[0]
    if isinstance(base, Constant) and all(var.broadcastable):
        data = np.asarray(base.data)
        if data.size == 1:
            return data.reshape(())
    return None


def _scalar_type_of(dtype):
    """``get_scalar_type(str(dtype))`` for a numpy dtype, kept per dtype: numpy names a
    dtype in Python code, slower than making the rest of a scalar constant."""
    stype = _SCALAR_TYPES.get(dtype)
    if stype is None:
        stype = _SCALAR_TYPES[dtype] = get_scalar_type(str(dtype))
    return stype


_SCALAR_TYPES: dict = {}  # numpy dtype -> ScalarType


class _Group:
    """One fused loop under construction: the nodes it computes and its inputs."""

    def __init__(self, root):
        self.root = root
        self.nodes = {root}
        self.inputs: dict = {}  # outside variable -> None (ordered set)


class FusionOptimizer(GlobalOptimizer):
    """Fuse trees of elementwise nodes into ``Elemwise{Composite}`` nodes.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> x, y = tt.dvector("x"), tt.dvector("y")
    >>> fg = FunctionGraph([x, y], [tt.exp(x) * y + 1])
    >>> _ = FusionOptimizer().optimize(fg)
    >>> fg
    FunctionGraph(Elemwise{Composite{add(mul(exp(i0), i1), 1)},no_inplace}(x, y))
    """

    def __init__(self, max_inputs=MAX_FUSED_INPUTS):
        if max_inputs < 2:
            raise ValueError(f"FusionOptimizer: max_inputs must be >= 2, got {max_inputs}")
        self.max_inputs = max_inputs

    def add_requirements(self, fgraph):
        if not hasattr(fgraph, "replace_all_validate"):
            fgraph.attach_feature(ReplaceValidate())

    def apply(self, fgraph):
        t0 = time.perf_counter()
        done: set = set()
        fused = 0
        # _fusable of each node, asked once: groups ask it of the same inputs again.
        memo: dict = {}
        apply_nodes = fgraph.apply_nodes
        clients = fgraph.clients
        for node in reversed(fgraph.toposort()):
            if node in done or node not in apply_nodes or not _fusable_memo(node, memo):
                continue
            if not _takes_an_input(node, clients, memo):
                continue  # a group of one (most nodes when values have several uses)
            group = self._grow(fgraph, node, memo)
            done.update(group.nodes)
            if len(group.nodes) < 2:
                continue
            new = self._build(group)
            if new is None:
                continue
            # The fused node answers for the lines of every node it holds.
            copy_stack_trace([n.outputs[0] for n in group.nodes], new)
            fgraph.replace(node.outputs[0], new, reason=self)
            fused += 1
        return {"fused": fused, "time": time.perf_counter() - t0}

    def _grow(self, fgraph, root, memo=None):
        """The group ``root`` starts; ``memo`` keeps ``_fusable`` of the nodes met."""
        memo = {} if memo is None else memo
        group = _Group(root)
        nodes = group.nodes
        pattern = root.outputs[0].type.broadcastable
        clients = fgraph.clients
        # The group's inputs so far (distinct, constants inlined); absorbing the node
        # computing one of them replaces it by that node's inputs.
        frontier = group.inputs
        for i in root.inputs:
            if _scalar_constant(i) is None:
                frontier[i] = None
        todo = list(frontier)
        max_inputs = self.max_inputs
        while todo:
            deferred = []
            progress = False
            while todo:
                var = todo.pop()
                owner = var.owner
                if (
                    owner is None
                    or var not in frontier
                    or var.type.broadcastable != pattern
                    or not _fusable_memo(owner, memo)
                ):
                    continue
                if not _all_in(clients.get(var, ()), nodes):
                    deferred.append(var)  # another use may join the group later
                    continue
                new = [i for i in owner.inputs if i not in frontier and _scalar_constant(i) is None]
                if len(frontier) - 1 + len(dict.fromkeys(new)) > max_inputs:
                    continue
                del frontier[var]
                for i in new:
                    frontier[i] = None
                todo.extend(new)
                nodes.add(owner)
                progress = True
            if progress:
                todo = deferred
        return group

    def _build(self, group):
        """The ``Elemwise{Composite}`` computing the group's root, or None."""
        order, inputs = _postorder(group)
        if len(inputs) > self.max_inputs:
            return None
        # The scalar standing for each tensor variable: the group's inputs, then the
        # output of each node as it is made.
        scalars = {v: get_scalar_type(v.type.dtype).make_variable() for v in inputs}
        in_scalars = list(scalars.values())
        nodes = []  # the scalar nodes, made in ``order``: io_toposort's order of them
        # Scalar nodes made without Apply's checks when a scalar variable's constructor
        # adds nothing to Variable's (the arguments are this function's variables).
        plain = ScalarVariable._plain_copy()
        inlined = False
        for node in order:
            sop = node.op.scalar_op
            args = []
            for i in node.inputs:
                s = scalars.get(i)
                if s is None:
                    data = _scalar_constant(i)
                    if data is None:
                        raise KeyError(i)
                    s = ts.ScalarConstant(_scalar_type_of(data.dtype), data[()])
                args.append(s)
            out_dtype = node.outputs[0].type.dtype
            if isinstance(sop, Composite):
                out = _inline(sop, args)[0]
                inlined = True
                if out.type.dtype != out_dtype:
                    return None
            elif type(sop).make_node is _SCALAR_MAKE_NODE:
                # The scalar node made directly: its inputs have the dtypes of the tensor
                # node's, so ScalarOp.make_node's output dtype is that node's, which
                # Elemwise.make_node got from the same output_types.
                stype = get_scalar_type(out_dtype)
                if plain:
                    new = _node_of_fresh_output(sop, args, stype, ScalarVariable)
                else:
                    new = Apply(sop, args, [stype.make_variable()])
                nodes.append(new)
                out = new.outputs[0]
            else:
                new = sop.make_node(*args)
                nodes.append(new)
                out = new.outputs[0]
                if out.type.dtype != out_dtype:
                    return None
            scalars[node.outputs[0]] = out
        root_scalar = scalars[group.root.outputs[0]]
        # The scalar graph was made here for this Composite only: it need not copy it;
        # without an inlined composite, its nodes were made in the order Composite
        # sorts them in (a walk from the root, inputs left to right), so it need not
        # sort them either.
        comp = Composite(in_scalars, [root_scalar], copy=False, nodes=None if inlined else nodes)
        new = Elemwise(comp)(*inputs)
        return fit(group.root.outputs[0], new)

    def __str__(self):
        return getattr(self, "name", None) or "FusionOptimizer"


def _postorder(group):
    """``(nodes, inputs)``: the group's nodes, each after the group nodes computing its
    inputs, left to right; and the group's inputs in the order that reading the
    expression left to right meets them."""
    order, seen = [], set()
    found: dict = {}  # the inputs met, in order (an ordered set)
    members, inputs = group.nodes, group.inputs
    stack = [(group.root, iter(group.root.inputs))]
    while stack:
        node, it = stack[-1]
        for i in it:
            o = i.owner
            if o in members and o not in seen and i not in inputs:
                stack.append((o, iter(o.inputs)))
                break
        else:
            stack.pop()
            if node not in seen:
                seen.add(node)
                order.append(node)
                for i in node.inputs:
                    if i in inputs:
                        found[i] = None
    return order, list(found)


def _inline(comp, args):
    """The outputs of Composite ``comp``'s scalar graph, rebuilt on ``args``."""
    env = dict(zip(comp.inputs, args))
    for node in comp.nodes:
        ins = [v if isinstance(v, Constant) else env[v] for v in node.inputs]
        env.update(zip(node.outputs, node.op.make_node(*ins).outputs))
    return [env[o] for o in comp.outputs]


@RULES.fused_reduce("fusion", "fused_reduce")
@local_optimizer([CAReduce], fit=fit)
def local_fused_reduce(fgraph, node):
    """A reduction of an elementwise result used nowhere else, as one loop."""
    # sum(elemwise(x, y), axis) -> FusedReduce{sum, elemwise}(x, y)
    (x,) = node.inputs
    inner = x.owner
    if not _fusable(inner) or not single_client(fgraph, x):
        return False
    out = FusedReduce(node.op, inner.op.scalar_op)(*inner.inputs)
    copy_stack_trace([node.outputs[0], x], out)
    return out
