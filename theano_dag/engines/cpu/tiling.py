"""Row tiling: run the row-local part of a graph over a few rows of the batch at a time.

In MLP inference, ``relu(dot(relu(dot(x, W1) + b1), W2) + b2)`` on a batch of 4096
rows, Owl's planner can at best keep two 4096x512 activations alive at once (16 MiB
in float32), although the caller only wants the 4096x10 result. Every row of the
result depends on the same row of ``x`` only, so the engine can compute the whole
chain on, say, 128 rows at a time: the activations then take a few hundred KiB and
stay in cache, and only the (small) result is full size.

:func:`tile_rows` finds that part of an optimized graph (the *region*) and replaces
it by one :class:`RowTiled` node that holds it as an inner graph, compiled on first
use by the CPU engine (through ``engines.inner.compile_inner``). It runs as the optdb
pass ``row_tiling`` (tags ``cpu``, ``row_tiling``; ``theano_dag.opt.lowering``), which
the CPU engine's Modes include: ``Mode.excluding("row_tiling")`` or
``CPULinker(tile=False)`` turns it off.

A value is *row-tiled* when its axis 0 is the batch axis of a
non-shared graph input: row ``i`` depends on row ``i`` of the inputs only. The
rules (:func:`row_local`): elementwise ops whose other inputs broadcast along axis 0,
``dot``/Gemm/Gemv with the batch on the left, convolutions and pooling of a batch of
images, DimShuffles that keep axis 0 first, softmax-like ops and reductions along
other axes. A node joins the region only if
its other inputs do not depend on the region (the region stays one convex piece), and
it does not overwrite a value that is read outside the region.

The region is only replaced when it contains a product (elementwise chains are
already one fused loop) and keeps some value to itself. At run time,
:meth:`RowTiled.perform` works out the bytes per row of the region's own values and
tiles only when they add up to more than :data:`MIN_TILED_BYTES`; otherwise the
inner graph runs once over the whole batch.
"""

from __future__ import annotations

import threading

import numpy as np

from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.cpu.plan.shapes import FAST_RULES, infer_shapes
from theano_dag.engines.inner import InnerMode, compile_inner
from theano_dag.graph.basic import Apply, Constant, clone_get_equiv
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.op import Op
from theano_dag.tensor import blas, math
from theano_dag.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from theano_dag.tensor.fused import FusedReduce
from theano_dag.tensor.nnet import nnet
from theano_dag.tensor.nnet.abstract_conv import AbstractConv2d
from theano_dag.tensor.nnet.pool import Pool
from theano_dag.tensor.shape import Shape_i

__all__ = ["RowTiled", "row_local", "find_region", "tile_rows", "TILE_BYTES", "MIN_TILED_BYTES"]

# A tile's own values take about this many bytes: measured on the MLP at batch 4096,
# 1 MiB tiles ran 13% slower than no tiling, 2 and 4 MiB 6%.
TILE_BYTES = 2 << 20
# Tiling pays when the region's own values would take more than this at full size.
MIN_TILED_BYTES = 4 << 20
# Rows per tile are a multiple of this when there are more (BLAS blocks rows in
# multiples of 8 or 16).
ROW_MULTIPLE = 16


_SOFTMAXES = (nnet.Softmax, nnet.LogSoftmax, nnet.SoftmaxGrad)


def _leading_broadcast(v):
    shape = getattr(v.type, "shape", None)
    return bool(shape) and shape[0] == 1


def row_local(node, tiled) -> bool:
    """Whether output row ``i`` of ``node`` depends only on row ``i`` of the inputs
    flagged in ``tiled`` (one bool per input; the others are whole values).

    >>> import theano_dag.tensor as tt
    >>> x, w = tt.dmatrix("x"), tt.dmatrix("w")
    >>> row_local(tt.dot(x, w).owner, [True, False]), row_local(tt.dot(x, w).owner, [False, True])
    (True, False)
    """
    op = node.op
    if not any(tiled) or any(getattr(o.type, "ndim", 0) < 1 for o in node.outputs):
        return False
    if isinstance(op, Elemwise):
        return all(t or _leading_broadcast(v) for v, t in zip(node.inputs, tiled))
    if isinstance(op, (blas.Dot22, blas.Dot22Scalar, math.Dot)):
        return (
            node.inputs[0].type.ndim == 2
            and node.inputs[1].type.ndim == 2
            and tiled[0]
            and not any(tiled[1:])
        )
    if isinstance(op, blas.Gemm):  # z, a, x, y, b
        return tiled[0] and tiled[2] and not (tiled[1] or tiled[3] or tiled[4])
    if isinstance(op, blas.Gemv):  # y, alpha, A, x, beta
        return tiled[0] and tiled[2] and not (tiled[1] or tiled[3] or tiled[4])
    if isinstance(op, DimShuffle):
        return bool(op.new_order) and op.new_order[0] == 0
    if isinstance(op, AbstractConv2d):  # images (N, C, H, W): each image on its own
        return tiled[0] and not any(tiled[1:])
    if isinstance(op, Pool):  # pools the last op.ndim axes
        return tiled[0] and node.inputs[0].type.ndim > op.ndim
    if isinstance(op, _SOFTMAXES):
        ndim = node.inputs[0].type.ndim
        return ndim >= 2 and op.axis % ndim != 0 and all(tiled)
    if isinstance(op, (CAReduce, FusedReduce)):
        reduce_op = op.reduce_op if isinstance(op, FusedReduce) else op
        ndim = node.inputs[0].type.ndim
        axes = reduce_op._axes(ndim)
        # FusedReduce's other inputs broadcast into the reduced one, as in Elemwise
        return 0 not in axes and all(t or _leading_broadcast(v) for v, t in zip(node.inputs, tiled))
    return False


def _is_product(node):
    products = (blas.Dot22, blas.Dot22Scalar, math.Dot, blas.Gemm, blas.Gemv, AbstractConv2d)
    return isinstance(node.op, products)


def _is_row_invariant_shape(node, tiled):
    # Shape_i{k}, k >= 1, of a row-tiled value: the same for every tile and the whole.
    return isinstance(node.op, Shape_i) and node.op.i >= 1 and tiled[0]


def find_region(fgraph, order, seeds, banned=()):
    """The row-local nodes of ``order`` reachable from ``seeds`` (graph inputs whose
    axis 0 is a batch axis), as a list in ``order``; ``banned`` nodes never join.

    A node joins when :func:`row_local` holds and its whole (untiled) inputs do not
    depend on the region, so that the region can run as one node. Values that depend
    on the region but not on the batch (the ``H*W`` of a spatial mean, from
    ``Shape_i`` of an activation) join too, as whole values computed in each tile;
    :func:`tile_rows` keeps them inside the region.
    """
    tiled = set(seeds)
    invariant = set()  # made in the region, the same for every tile
    tainted = set()  # depends on the region without being row-tiled
    region = []
    for node in order:
        flags = [v in tiled for v in node.inputs]
        inv = [v in invariant for v in node.inputs]
        if not (any(flags) or any(inv) or any(v in tainted for v in node.inputs)):
            continue
        ok = node not in banned and not any(v in tainted for v in node.inputs)
        if ok and (_is_row_invariant_shape(node, flags) or (any(inv) and not any(flags))):
            region.append(node)
            invariant.update(node.outputs)
        elif ok and row_local(node, flags):
            region.append(node)
            tiled.update(node.outputs)
        else:
            tainted.update(node.outputs)
    return region


def _boundary(fgraph, region):
    """``(inputs, outputs)`` of the region: the values it reads from outside, and the
    values it makes that the rest of the graph (or the caller) reads."""
    members = set(region)
    made = {o for n in region for o in n.outputs}
    inputs, seen = [], set()
    for n in region:
        for v in n.inputs:
            if v not in made and v not in seen and not isinstance(v, Constant):
                seen.add(v)
                inputs.append(v)
    graph_outputs = set(fgraph.outputs)
    outputs = [
        o
        for n in region
        for o in n.outputs
        if o in graph_outputs
        or any(c == "output" or c not in members for c, _ in fgraph.clients[o])
    ]
    return inputs, outputs


def _is_whole(v):
    """Whether region value ``v`` is a whole value (made from shapes, the same for every
    tile) rather than row-tiled: row-tiled values have a batch axis, of no static 1."""
    shape = getattr(v.type, "shape", None)
    return not shape or shape[0] == 1


def _overwrites_boundary(region, inputs, outputs):
    """Region nodes that overwrite a value read outside the region (an input of it,
    or one of its outputs): inside a tile loop they would change what others read."""
    boundary = set(inputs) | set(outputs)
    bad = []
    for n in region:
        for ins in (getattr(n.op, "destroy_map", None) or {}).values():
            if any(n.inputs[i] in boundary for i in ins):
                bad.append(n)
    return bad


class RowGraphOp(Op):
    """An op running the FunctionGraph ``inner`` over row pieces of the inputs flagged
    ``tiled``: its inputs and outputs are the inner graph's, it is equal only to itself,
    and the inner graph is compiled once, on first use, with the CPU engine (no
    rewrites: the graph is already optimized; ``_function``). The compiled function and
    its lock stay in the process when the op is pickled (a Dask task's)."""

    def __init__(self, inner, tiled):
        self.inner = inner
        self.tiled = tuple(bool(t) for t in tiled)
        self._fn = None
        self._lock = threading.Lock()

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("_fn", "_lock")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._fn, self._lock = None, threading.Lock()

    def make_node(self, *inputs):
        if len(inputs) != len(self.inner.inputs):
            raise TypeError(f"{self}: expected {len(self.inner.inputs)} inputs, got {len(inputs)}")
        for k, (v, i) in enumerate(zip(inputs, self.inner.inputs)):
            if v.type != i.type:
                raise TypeError(f"{self}: input {k} has type {v.type}, expected {i.type}")
        return Apply(self, list(inputs), [o.type() for o in self.inner.outputs])

    def infer_shape(self, fgraph, node, in_shapes):
        """The outputs' shapes, from the inner graph's (concrete input shapes only: the
        engines' plans are the users of these ops)."""
        shapes, _ = infer_shapes(
            self.inner, self.inner.toposort(), dict(zip(self.inner.inputs, in_shapes))
        )
        return [shapes[o] for o in self.inner.outputs]

    def _function(self):
        with self._lock:
            if self._fn is None:
                self._fn = compile_inner(self.inner, mode=InnerMode(CPULinker(tile=False)))
            return self._fn


class RowTiled(RowGraphOp):
    """Run ``inner`` (a FunctionGraph) over row tiles of the inputs flagged ``tiled``.

    Its outputs are the inner graph's, with the batch axis first. Compiled on first
    use with the CPU engine (``compile_inner``, no rewrites: the graph is already
    optimized); ``tile_rows`` makes these nodes.
    """

    def __init__(self, inner, tiled):
        super().__init__(inner, tiled)
        self._rows = {}  # input-shape signature -> rows per tile (0: no tiling)

    def __str__(self):
        n = len(self.inner.apply_nodes)
        return f"RowTiled{{{n} nodes, {sum(self.tiled)} tiled inputs}}"

    __repr__ = __str__

    def rows_per_tile(self, inputs):
        """Rows per tile for these input values (0: run once over the whole batch)."""
        sig = tuple(np.shape(a) for a in inputs)
        rows = self._rows.get(sig)
        if rows is None:
            rows = self._rows[sig] = self._choose_rows(inputs)
        return rows

    def _choose_rows(self, inputs):
        tiled = [a for a, t in zip(inputs, self.tiled) if t]
        n = tiled[0].shape[0]
        if n == 0 or any(a.shape[0] != n for a in tiled):
            return 0  # let the inner graph report the mismatch
        one_row = {
            v: ((1,) + np.shape(a)[1:] if t else np.shape(a))
            for v, a, t in zip(self.inner.inputs, inputs, self.tiled)
        }
        try:
            shapes, _ = infer_shapes(self.inner, self.inner.toposort(), one_row)
        except Exception:
            return 0
        ends = set(self.inner.inputs) | set(self.inner.outputs)
        row_bytes = 0
        for node in self.inner.apply_nodes:
            for o in node.outputs:
                s = shapes.get(o)
                if o in ends or s is None or getattr(o.type, "dtype", None) is None:
                    continue
                row_bytes += int(np.prod(s, dtype=np.int64)) * np.dtype(o.type.dtype).itemsize
        if row_bytes * n <= MIN_TILED_BYTES:
            return 0
        rows = max(1, TILE_BYTES // max(row_bytes, 1))
        if rows >= ROW_MULTIPLE:  # big rows (images) may go a few at a time
            rows -= rows % ROW_MULTIPLE
        return rows if rows < n else 0

    def perform(self, node, inputs, output_storage, params=None):
        fn = self._function()
        rows = self.rows_per_tile(inputs)
        if not rows:
            res = fn(*inputs)
            for cell, r in zip(output_storage, res):
                cell[0] = np.array(r, copy=True)  # the inner function's buffers are reused
            return
        n = next(a for a, t in zip(inputs, self.tiled) if t).shape[0]
        outs = None
        for r0 in range(0, n, rows):
            args = [a[r0 : r0 + rows] if t else a for a, t in zip(inputs, self.tiled)]
            res = fn(*args)
            if outs is None:
                outs = [np.empty((n,) + r.shape[1:], r.dtype) for r in res]
            for o, r in zip(outs, res):
                o[r0 : r0 + r.shape[0]] = r
        for cell, o in zip(output_storage, outs):
            cell[0] = o


def _plan_rule(fgraph, node, in_shapes):
    # The CPU engine's shape rule: a wrong input shape is reported at plan time, before
    # any op runs, naming the inner node at fault (as without tiling).
    return node.op.infer_shape(fgraph, node, in_shapes)


FAST_RULES[RowTiled] = _plan_rule


def _value_shape(v):
    """A whole (untiled) value's shape where it is known at link time: its static
    shape, a shared variable's current value, a DimShuffle of such a value."""
    steps = []
    while True:
        shape = getattr(v.type, "shape", None)
        if shape is not None and all(s is not None for s in shape):
            break
        if hasattr(v, "get_value"):
            shape = np.shape(v.get_value(borrow=True))
            break
        if v.owner is None or not hasattr(v.owner.op, "new_order"):
            return None
        steps.append(v.owner.op.new_order)
        v = v.owner.inputs[0]
    for order in reversed(steps):
        shape = tuple(1 if o == "x" else shape[o] for o in order)
    return tuple(shape)


def _row_widths(region):
    """Elements per row of each value the region makes, where it can be told at link
    time (None where not): the batch axis is the only unknown length."""
    widths = {}

    def width(v):
        if v in widths:
            return widths[v]
        shape = _value_shape(v)
        return None if shape is None else int(np.prod(shape[1:], dtype=np.int64))

    for node in region:
        op = node.op
        if isinstance(op, (blas.Dot22, blas.Dot22Scalar, math.Dot)):
            shape = _value_shape(node.inputs[1])
            w = None if shape is None else shape[1]
        elif isinstance(op, blas.Gemm):
            w = width(node.inputs[0])
        elif isinstance(op, blas.Gemv):
            w = 1
        elif isinstance(op, (Elemwise, DimShuffle, *_SOFTMAXES)):
            known = [width(v) for v in node.inputs if getattr(v.type, "ndim", 0) >= 1]
            w = None if not known or None in known else max(known)
        elif isinstance(op, (CAReduce, FusedReduce)) and node.outputs[0].type.ndim == 1:
            w = 1  # a row reduced to one value
        else:
            w = None
        for o in node.outputs:
            widths[o] = w
    return widths


def _pays(region, outputs):
    """Tiling saves memory when the values the region keeps to itself are wider (per
    row) than the ones it hands out; an MLP's forward pass keeps its activations and
    hands out logits, a training step's forward pass hands out its activations."""
    widths = _row_widths(region)
    out_set = set(outputs)
    out_width = [widths[o] for o in outputs]
    if None in out_width:
        return False
    own = [widths[o] for n in region for o in n.outputs if o not in out_set]
    if own and None in own:
        return True  # widths unknown until run time (convolutions): the run decides
    return sum(own) > 2 * sum(out_width)


def _seeds(fgraph, updates):
    # A shared variable (it has a value: get_value) holds parameters, not a batch.
    return [
        v
        for v in fgraph.inputs
        if getattr(v.type, "ndim", 0) >= 1
        and not _leading_broadcast(v)
        and not hasattr(v, "get_value")
        and v not in updates
    ]


def tile_rows(fgraph, updates=()):
    """Replace the row-local region of ``fgraph`` by one :class:`RowTiled` node, where
    that pays (see the module docstring). Returns ``{old output: new output}`` (empty
    when nothing changed).
    """
    seeds = _seeds(fgraph, set(updates))
    if not seeds or not any(_is_product(n) for n in fgraph.apply_nodes):
        return {}  # the common quick answer: elementwise graphs have no product
    order = fgraph.toposort()
    banned = set()
    while True:
        region = find_region(fgraph, order, seeds, banned)
        if not any(_is_product(n) for n in region):
            return {}
        inputs, outputs = _boundary(fgraph, region)
        bad = _overwrites_boundary(region, inputs, outputs)
        # a whole value made inside the region has no tiles to hand out: its maker
        # stays outside (and so do the nodes that need it)
        bad += [o.owner for o in outputs if _is_whole(o)]
        if not bad:
            break
        banned.update(bad)
    if not outputs or not _pays(region, outputs):
        return {}
    equiv = clone_get_equiv(inputs, outputs, copy_inputs=True)
    inner = FunctionGraph([equiv[v] for v in inputs], [equiv[o] for o in outputs], clone=False)
    tiled_inputs = set(seeds)
    op = RowTiled(inner, [v in tiled_inputs for v in inputs])
    node = op.make_node(*inputs)
    pairs = list(zip(outputs, node.outputs))
    for old, new in pairs:
        if old.name is not None:
            new.name = old.name
    fgraph.replace_all_validate(pairs, reason="row_tiling")
    return dict(pairs)
