"""Inplace: make nodes overwrite an input that nothing else needs.

Runs after ``add_destroy_handler`` (position 49.5), so the ``DestroyHandler`` knows every
overwritten value, and the ``Supervisor`` that ``function`` attaches refuses to overwrite
a caller's input (unless declared ``In(mutable=True)``) or an output.

An input is overwritten only if its one use is this node, it is not a view of another
value, and it is not protected: then no other node can read it after it is overwritten,
whatever the order. Those changes are all made at once and the graph validated once (a
validation walks the whole graph, so validating after each change would be quadratic);
if that validation fails, which the conditions above should make impossible, the changes
are undone and made again one at a time, each validated.
"""

from __future__ import annotations

import copy
import time

from theano_dag.config import config
from theano_dag.graph.basic import Constant
from theano_dag.graph.destroyhandler import DestroyHandler
from theano_dag.graph.rewriting.basic import ChangeLog, GlobalOptimizer
from theano_dag.graph.toolbox import Supervisor
from theano_dag.tensor.blas import Gemm, Gemv, Ger, gemm_inplace, gemv_inplace, ger_destructive
from theano_dag.tensor.elemwise import Elemwise, broadcast_static_shape
from theano_dag.tensor.nnet.blocksparse import SparseBlockGemv, SparseBlockOuter
from theano_dag.tensor.random.op import RandomVariable
from theano_dag.tensor.subtensor import AdvancedIncSubtensor, AdvancedIncSubtensor1, IncSubtensor

__all__ = ["InplaceOptimizer", "inplace_candidates"]


def _elemwise_inplace(node, i):
    op = node.op
    if op.inplace_items or len(node.outputs) != 1:
        return None
    v = node.inputs[i]
    if v.type != node.outputs[0].type:
        return None
    # The node made again must give that type too: a rewrite may have replaced another
    # input by one of a known static shape since the node was made (PyMC3's reshaped
    # free variables), so that it would now infer a more specific output than ``v``.
    try:
        shape = broadcast_static_shape([w.type.shape for w in node.inputs], op)
    except (TypeError, ValueError):
        return None
    if shape != v.type.shape:
        return None
    return Elemwise(op.scalar_op, {0: i}, name=op.name)


def _blas_inplace(node, i):
    if i != 0 or node.inputs[0].type != node.outputs[0].type:
        return None
    op = node.op
    if isinstance(op, Gemm) and not op.inplace:
        return gemm_inplace
    if isinstance(op, Gemv) and not op.inplace:
        return gemv_inplace
    if isinstance(op, Ger) and not op.destructive:
        return ger_destructive
    return None


def _inc_subtensor_inplace(node, i):
    """The inplace twin of a set/inc_subtensor: it writes ``y`` into ``x`` itself.

    The gradient of a value unpacked from a flat vector chains them (a SetSubtensor into
    zeros, then one IncSubtensor per slice): inplace, the chain writes one array instead
    of copying it at each link. ``inplace_candidates`` has checked that ``x`` has no
    other reader and is no view, so ``y`` cannot be a view of ``x`` either.
    """
    op = node.op
    if i != 0 or op.inplace or node.inputs[0].type != node.outputs[0].type:
        return None
    new = copy.copy(op)
    new.inplace = True
    new.destroy_map = {0: [0]}
    return new


def _random_inplace(node, i):
    """The draw advancing its generator itself, where the function replaces that
    generator by the new one anyway (a shared generator with an update, which makes it
    a mutable input): no copy of the generator's state per call."""
    op = node.op
    if i != 0 or op.inplace:
        return None
    return op.inplace_twin()


# Op class -> (positions of the inputs that may be overwritten, maker(node, i) -> new op)
INPLACE_MAKERS = {
    Elemwise: (None, _elemwise_inplace),
    Gemm: ((0,), _blas_inplace),
    Gemv: ((0,), _blas_inplace),
    Ger: ((0,), _blas_inplace),
    IncSubtensor: ((0,), _inc_subtensor_inplace),
    AdvancedIncSubtensor1: ((0,), _inc_subtensor_inplace),
    AdvancedIncSubtensor: ((0,), _inc_subtensor_inplace),
    # the block-sparse products add into their first input, as inc_subtensor does
    SparseBlockGemv: ((0,), _inc_subtensor_inplace),
    SparseBlockOuter: ((0,), _inc_subtensor_inplace),
}
# Op base class -> the same, for the classes of a family (each distribution is a class)
INPLACE_FAMILIES = {RandomVariable: ((0,), _random_inplace)}


def _maker_entry(op):
    entry = INPLACE_MAKERS.get(type(op))
    if entry is None:
        for base, fam in INPLACE_FAMILIES.items():
            if isinstance(op, base):
                return fam
    return entry


def _protected(fgraph) -> set:
    protected = set(fgraph.outputs)
    for f in getattr(fgraph, "_features", ()):
        if isinstance(f, Supervisor):
            protected.update(f.protected)
    return protected


def _is_view(var) -> bool:
    owner = var.owner
    if owner is None:
        return False
    k = owner.outputs.index(var)
    op = owner.op
    return k in (getattr(op, "view_map", None) or {}) or k in (
        getattr(op, "destroy_map", None) or {}
    )


def inplace_candidates(fgraph, node, protected, shared_reads=False):
    """``(i, new_op)`` for each input ``i`` of ``node`` it may overwrite, first best.

    With ``shared_reads``, also inputs that other nodes read: overwriting one is then
    only legal if those readers can all run first, which the caller must validate.
    """
    entry = _maker_entry(node.op)
    if entry is None or getattr(node.op, "destroy_map", None):
        return []
    positions, maker = entry
    clients = fgraph.clients
    out = []
    for i in positions if positions is not None else range(len(node.inputs)):
        v = node.inputs[i]
        if isinstance(v, Constant) or v in protected or _is_view(v):
            continue
        uses = clients.get(v, [])
        if sum(1 for c, _ in uses if c is node) != 1:
            continue  # this node reads it twice
        if len(uses) != 1 and not shared_reads:
            continue  # another node reads it
        new_op = maker(node, i)
        if new_op is not None:
            out.append((i, new_op))
    return out


class InplaceOptimizer(GlobalOptimizer):
    """Replace Elemwise, Gemm, Gemv, Ger, set/inc_subtensor and random draw nodes by
    their inplace versions where safe."""

    def add_requirements(self, fgraph):
        if not hasattr(fgraph, "destroy_handler"):
            fgraph.attach_feature(DestroyHandler(algo=config.cycle_detection))

    def apply(self, fgraph):
        t0 = time.perf_counter()
        protected = _protected(fgraph)
        plan = []
        for node in fgraph.toposort():
            cands = inplace_candidates(fgraph, node, protected)
            if cands:
                plan.append((node, cands[0][1]))
        log = ChangeLog.attach(fgraph)
        token = log.begin()
        try:
            for node, new_op in plan:
                self._swap(fgraph, node, new_op, validate=False)
            try:
                fgraph.validate()
                done = len(plan)
            except Exception:
                log.revert(fgraph, token)
                done = self._one_by_one(fgraph, plan)
        finally:
            log.end(token)
        done += self._blas_on_read_inputs(fgraph, protected)
        return {"inplace": done, "time": time.perf_counter() - t0}

    # Validating one change walks the whole graph; a few tries bound the cost.
    MAX_SHARED_READ_TRIES = 16

    def _blas_on_read_inputs(self, fgraph, protected):
        """Gemm/Gemv/Ger that may overwrite a graph input other nodes also read.

        The case that matters is a training step's ``w <- w - lr * dot(a, b)``: the
        forward pass reads ``w``, and its update is a Gemm on ``w``. Overwriting ``w``
        in place (after its readers ran, an ordering the DestroyHandler adds) saves a
        copy of every weight matrix per step. Each change is validated on its own and
        kept only if the DestroyHandler finds an order.
        """
        done = tries = 0
        for node in list(fgraph.toposort()):
            if tries >= self.MAX_SHARED_READ_TRIES:
                break
            if type(node.op) not in (Gemm, Gemv, Ger) or node not in fgraph.apply_nodes:
                continue
            if node.inputs[0].owner is not None:
                continue
            cands = inplace_candidates(fgraph, node, protected, shared_reads=True)
            if not cands:
                continue
            tries += 1
            try:
                self._swap(fgraph, node, cands[0][1], validate=True)
                done += 1
            except Exception:  # the DestroyHandler found no order: keep the copy
                continue
        return done

    @staticmethod
    def _swap(fgraph, node, new_op, validate):
        new = new_op.make_node(*node.inputs)
        pairs = list(zip(node.outputs, new.outputs))
        if validate:
            fgraph.replace_all_validate(pairs, reason="inplace")
        else:
            fgraph.replace_all(pairs, reason="inplace")

    def _one_by_one(self, fgraph, plan):
        done = 0
        for node, new_op in plan:
            if node not in fgraph.apply_nodes:
                continue
            try:
                self._swap(fgraph, node, new_op, validate=True)
                done += 1
            except Exception:  # the DestroyHandler or the Supervisor said no: keep it
                continue
        return done

    def __str__(self):
        return getattr(self, "name", None) or "InplaceOptimizer"
