"""Row chunks: the per-row work of a batch graph and its sums over rows, one task per chunk.

A logistic-regression step reads a batch ``x`` of ``n`` rows and computes, row by row,
``p = sigmoid(x @ w + b)`` and the residual, then reduces over the rows: the cost
(a sum), ``x.T @ r`` (a product whose contracted axis is the batch) and ``sum(r)``.
Lowered op by op onto dask.array, that is a blocked product, a fused kernel and a
tree of sums each, with chunks stored between them (215 tasks at 20 chunks). Since
every one of those reductions is a sum of per-chunk sums, the whole of it can run as
**one task per row chunk** (the CPU engine's compiled kernels of the region, on the
chunk, returning the chunk's partial sums packed in one small array), then one tree
reduction of the partials.

:func:`fuse_row_chunks` (the optdb pass ``dask_row_chunks``, tag ``dask``) finds that
part of the optimized graph and replaces it by one :class:`RowChunked` node:

* the *batch* inputs are chosen among the graph's inputs (not the updated shared
  ones): greedily, the set whose region is the largest and connected (``x`` and the
  labels ``y``, not the weights ``w``);
* the region's nodes are row-local (``engines.cpu.tiling.row_local``, and a matrix
  times a whole vector); a reduction over the batch axis (``sum``, ``prod``, ``max``,
  ``min``, ``all``, ``any``) and a product ``v.T @ u`` of two batch values join it as
  *partial* outputs: each chunk gives its own, combined by the same reduction;
* a ``Gemv``/``Gemm`` over ``v.T`` becomes ``beta * y + alpha * dot(v.T, u)`` first,
  so its product is a partial output; the batch length (``Shape_i{0}`` of a value of
  the region, as in a mean) is read from a batch input instead, so it does not wait
  for the region.

The region is replaced only when it holds a product (an elementwise chain is one
fused kernel per chunk already). On other engines the node runs its graph once on the
whole inputs (``perform``); the Dask engine's rule (:func:`row_chunks`) is the point.
"""

from __future__ import annotations

import numpy as np

from theano_dag.engines.cpu.plan.shapes import infer_shapes
from theano_dag.engines.cpu.tiling import RowGraphOp, row_local
from theano_dag.engines.dask import backend
from theano_dag.engines.dask.backend import is_dask_array
from theano_dag.engines.dask.translate import (
    CHECKS,
    RULES,
    ChunkError,
    ChunkKernel,
    _as_dask,
    _gathered,
    _meta,
    _reducer_name,
    _task_error,
)
from theano_dag.graph.basic import Constant, clone_get_equiv
from theano_dag.graph.fg import FunctionGraph
from theano_dag.tensor import blas, math
from theano_dag.tensor.elemwise import CAReduce, DimShuffle
from theano_dag.tensor.shape import Shape_i

__all__ = ["RowChunked", "fuse_row_chunks", "row_chunks", "COMBINE", "TREE_FAN_IN"]

# A partial output's reduction -> the ufunc combining two chunks' partials.
COMBINE = {
    "sum": np.add,
    "prod": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "all": np.logical_and,
    "any": np.logical_or,
}
# Partials combined per task of the tree (dask.array's reductions take 16 at a
# level; the partials are a few numbers each, so the tree's depth is what costs).
TREE_FAN_IN = 16

_PRODUCTS = (math.Dot, blas.Dot22, blas.Dot22Scalar, blas.Gemv, blas.Gemm)


class RowChunked(RowGraphOp):
    """The graph ``inner`` run chunk by chunk over the rows of its ``tiled`` inputs.

    ``combine`` says per output how the chunks' values make the whole one: ``None``
    for a row value (the chunks' rows, in order), or a reduction name of
    :data:`COMBINE` for a partial output. ``perform`` runs ``inner`` once on the
    whole inputs (the CPU engine compiles it), which is the same value.
    """

    def __init__(self, inner, tiled, combine):
        super().__init__(inner, tiled)
        self.combine = tuple(combine)

    def __str__(self):
        n = len(self.inner.apply_nodes)
        parts = sum(c is not None for c in self.combine)
        return f"RowChunked{{{n} nodes, {sum(self.tiled)} row inputs, {parts} partials}}"

    __repr__ = __str__

    def summary(self) -> str:
        """The ops of the inner graph, once each, in order."""
        ops = (str(n.op) for n in self.inner.toposort() if not isinstance(n.op, DimShuffle))
        return ", ".join(dict.fromkeys(o if len(o) <= 40 else o[:37] + "..." for o in ops))

    def perform(self, node, inputs, output_storage, params=None):
        for cell, r in zip(output_storage, self._function()(*inputs)):
            cell[0] = np.array(r, copy=True)  # the inner function's buffers are reused


# ---------------------------------------------------------------------------
# Finding the region


def _row_local(node, flags) -> bool:
    op = node.op
    if isinstance(op, math.Dot) and len(flags) == 2:
        a, b = node.inputs
        # a batch matrix times a whole vector: one number per row
        if a.type.ndim == 2 and b.type.ndim == 1 and flags[0] and not flags[1]:
            return True
    return row_local(node, flags)


def _partial_kind(node, flags, coltiled):
    """How ``node`` reduces the batch axis chunk by chunk (a key of COMBINE, or
    ``"gemv"``/``"gemm"`` to be split first), else None."""
    op, ins = node.op, node.inputs
    if isinstance(op, CAReduce) and flags[0]:
        name = _reducer_name(op)
        if name is not None and 0 in op._axes(ins[0].type.ndim):
            return name
        return None
    cols = [v in coltiled for v in ins]
    if isinstance(op, (math.Dot, blas.Dot22)) and cols[0] and flags[1]:
        return "sum"
    if isinstance(op, blas.Gemv) and cols[2] and flags[3] and not any(flags[:3] + flags[4:]):
        return "gemv"
    if isinstance(op, blas.Gemm) and cols[2] and flags[3] and not any(flags[:3] + flags[4:]):
        return "gemm"
    return None


class _Walk:
    """One pass over the graph's order with ``seeds`` as the batch inputs."""

    def __init__(self, order, seeds):
        self.tiled = set(seeds)
        self.parent = {s: s for s in seeds}  # union-find over the seeds
        self.comp = {s: s for s in seeds}  # row value -> a seed it descends from
        self.coltiled = {}  # v.T of a row value -> the DimShuffle node
        self.rows, self.partials, self.batch_len = [], [], []
        tainted = set()
        for node in order:
            ins = node.inputs
            if not any(v in self.tiled or v in self.coltiled or v in tainted for v in ins):
                continue
            if any(v in tainted for v in ins):
                tainted.update(node.outputs)
                continue
            flags = [v in self.tiled for v in ins]
            op = node.op
            if isinstance(op, Shape_i) and op.i == 0 and flags[0]:
                self.batch_len.append(node)  # the batch length: read from a seed instead
            elif isinstance(op, DimShuffle) and tuple(op.new_order) == (1, 0) and flags[0]:
                self.coltiled[node.outputs[0]] = node
                self.comp[node.outputs[0]] = self.comp[ins[0]]
            elif not any(v in self.coltiled for v in ins) and _row_local(node, flags):
                self._join(node)
                self.rows.append(node)
                self.tiled.update(node.outputs)
            elif (kind := _partial_kind(node, flags, self.coltiled)) is not None:
                self._join(node)
                self.partials.append((node, kind))
                tainted.update(node.outputs)
            else:
                tainted.update(node.outputs)

    def _find(self, s):
        while self.parent[s] is not s:
            s = self.parent[s]
        return s

    def _join(self, node):
        roots = [self._find(self.comp[v]) for v in node.inputs if v in self.comp]
        for r in roots[1:]:
            self.parent[r] = roots[0]
        for o in node.outputs:
            self.comp[o] = roots[0]

    def connected(self) -> bool:
        return len({self._find(s) for s in self.parent}) == 1

    def score(self) -> int:
        nodes = self.rows + [n for n, _ in self.partials]
        if not any(isinstance(n.op, _PRODUCTS) for n in nodes):
            return 0
        return len(self.rows) + 2 * len(self.partials)


def _candidates(fgraph):
    mapping = getattr(fgraph, "update_mapping", None) or {}
    updated = {fgraph.inputs[i] for i in mapping.values()}
    return [
        v
        for v in fgraph.inputs
        if getattr(v.type, "ndim", 0) >= 1 and v.type.shape[0] != 1 and v not in updated
    ]


def _choose_seeds(order, candidates):
    """Greedily, the batch inputs whose region scores best and is connected."""
    best, seeds = 0, []
    while True:
        pick = None
        for c in candidates:
            if c in seeds:
                continue
            walk = _Walk(order, seeds + [c])
            if walk.connected() and walk.score() > best:
                best, pick = walk.score(), c
        if pick is None:
            return seeds
        seeds.append(pick)


def _split_products(fgraph, partials):
    """``Gemv``/``Gemm`` over ``v.T`` -> ``beta * y + alpha * dot(v.T, u)``."""
    for node, kind in partials:
        if kind not in ("gemv", "gemm"):
            continue
        y, alpha, a, u, beta = node.inputs
        prod = math.Dot()(a, u) if kind == "gemv" else blas.Dot22()(a, u)
        new = beta * y + alpha * prod
        if new.type != node.outputs[0].type:
            new = new.astype(node.outputs[0].dtype)
        fgraph.replace(node.outputs[0], new, reason="dask_row_chunks")


def fuse_row_chunks(fgraph):
    """Replace the row region of ``fgraph`` and its reductions over the batch by one
    :class:`RowChunked` node (see the module docstring); return it, or None.

    >>> import theano_dag.tensor as tt
    >>> x, y, w = tt.dmatrix("x"), tt.dvector("y"), tt.dvector("w")
    >>> r = tt.nnet.sigmoid(tt.dot(x, w)) - y
    >>> fg = FunctionGraph([x, y, w], [tt.dot(x.T, r), r.sum()], clone=True)
    >>> fuse_row_chunks(fg).op
    RowChunked{6 nodes, 2 row inputs, 2 partials}
    """
    candidates = _candidates(fgraph)
    if not candidates or not any(isinstance(n.op, _PRODUCTS) for n in fgraph.apply_nodes):
        return None
    seeds = _choose_seeds(fgraph.toposort(), candidates)
    if not seeds:
        return None
    walk = _Walk(fgraph.toposort(), seeds)
    if walk.batch_len or any(k in ("gemv", "gemm") for _, k in walk.partials):
        for node in walk.batch_len:
            fgraph.replace(node.outputs[0], Shape_i(0)(seeds[0]), reason="dask_row_chunks")
        _split_products(fgraph, walk.partials)
        walk = _Walk(fgraph.toposort(), seeds)
    if not walk.score() or not walk.connected():
        return None
    kinds = dict(walk.partials)
    members = set(walk.rows) | set(kinds)
    for ds in walk.coltiled.values():  # v.T read by partials only is the region's own
        if all(c != "output" and c in kinds for c, _ in fgraph.clients[ds.outputs[0]]):
            members.add(ds)
    made = {o for n in members for o in n.outputs}
    inputs = list(
        dict.fromkeys(
            v
            for n in fgraph.toposort()
            if n in members
            for v in n.inputs
            if v not in made and not isinstance(v, Constant)
        )
    )
    graph_outputs = set(fgraph.outputs)
    outputs = [
        o
        for n in fgraph.toposort()
        if n in members
        for o in n.outputs
        if o in graph_outputs
        or any(c == "output" or c not in members for c, _ in fgraph.clients[o])
    ]
    if not outputs:
        return None
    equiv = clone_get_equiv(inputs, outputs, copy_inputs=True)
    inner = FunctionGraph([equiv[v] for v in inputs], [equiv[o] for o in outputs], clone=False)
    combine = [kinds.get(o.owner) for o in outputs]
    op = RowChunked(inner, [v in walk.tiled for v in inputs], combine)
    node = op.make_node(*inputs)
    pairs = list(zip(outputs, node.outputs))
    for old, new in pairs:
        new.name = old.name
    fgraph.replace_all_validate(pairs, reason="dask_row_chunks")
    return node


# ---------------------------------------------------------------------------
# The Dask engine's rule: one task per row chunk, one tree per group of partials


class _ChunkTask:
    """Chunk ``i``'s task: the region's kernel on the chunk, the partials packed by
    group (one flat array each), the row outputs as they are."""

    def __init__(self, kernel, name, label, groups, rows):
        self.kernel, self.name, self.label = kernel, name, label
        self.groups, self.rows = groups, rows  # [(dtype, [output index])], [index]

    def __dask_tokenize__(self):
        return ("theano_dag.RowChunkTask", self.name)

    def __call__(self, i, *chunks):
        try:
            outs = self.kernel(*chunks)
        except Exception as exc:
            raise _task_error((self.name, i), f"running {self.label}", exc) from exc
        outs = outs if isinstance(outs, tuple) else (outs,)
        res = [
            np.concatenate([np.ravel(np.asarray(outs[k], dtype=dt)) for k in idx])
            for dt, idx in self.groups
        ] + [outs[k] for k in self.rows]
        return res[0] if len(res) == 1 else tuple(res)


class _Combine:
    def __init__(self, kind):
        self.kind = kind

    def __call__(self, *parts):
        ufunc = COMBINE[self.kind]
        acc = parts[0]
        for p in parts[1:]:
            acc = ufunc(acc, p)
        return acc


def _unpack(packed, start, stop, shape):
    return packed[start:stop].reshape(shape)


def _get(value, k):
    return value[k]


def _row_inputs(node, vals, rechunk=True):
    """``vals`` with the row inputs chunked alike, by rows only (rechunked, or else a
    ChunkError naming the op and the chunks it expects); the others as they are."""
    op = node.op
    arrays = [_as_dask(v) if t else v for v, t in zip(vals, op.tiled)]
    tiled = [k for k, t in enumerate(op.tiled) if t]
    first = arrays[tiled[0]]
    if any(arrays[k].shape[0] != first.shape[0] for k in tiled):
        lengths = [arrays[k].shape[0] for k in tiled]
        raise ValueError(f"Dask engine: {op}: its row inputs have {lengths} rows")
    rows = first.chunks[0]
    for k in tiled:
        a = arrays[k]
        want = (rows,) + tuple((s,) for s in a.shape[1:])
        if a.chunks != want:
            if not rechunk:
                name = node.inputs[k].name
                raise ChunkError(
                    f"Dask engine: {op} (the row work of {op.summary()}) needs its row "
                    f"input {k}{f' ({name})' if name else ''} chunked by rows only; got "
                    f"chunks {a.chunks}, expected {want} (or let the engine rechunk: "
                    "DaskLinker(rechunk=True))"
                )
            arrays[k] = a.rechunk(want)
    return arrays


def _check_row_inputs(node, known, rechunk):
    # Before the call: the row inputs' chunks alone say whether the node can run.
    vals = [known.get(v) for v in node.inputs]
    if all(v is not None for v, t in zip(vals, node.op.tiled) if t):
        _row_inputs(node, vals, rechunk)


def row_chunks(node, vals, kernels, rechunk=True):
    """The Dask engine's rule for a :class:`RowChunked` node (see the module docstring)."""
    op = node.op
    da = backend.da
    arrays = _row_inputs(node, vals, rechunk)
    tiled = [k for k, t in enumerate(op.tiled) if t]
    rows = arrays[tiled[0]].chunks[0]
    shapes, _ = infer_shapes(
        op.inner,
        op.inner.toposort(),
        {i: tuple(np.shape(a)) for i, a in zip(op.inner.inputs, arrays)},
    )
    out_shapes = [shapes.get(o) for o in op.inner.outputs]
    if any(s is None for s in out_shapes):
        return _gathered(node, vals)
    deps = []
    for k, a in enumerate(arrays):
        if not is_dask_array(a):
            a = da.from_array(np.asarray(a), chunks=-1, name=False)
        elif k not in tiled and a.numblocks != (1,) * a.ndim:
            a = a.rechunk(-1)
        arrays[k] = a
        deps.append(a)
    # One kernel per node for the life of the function: compiled once per worker.
    kernel = kernels.get(node)
    if kernel is None:
        kernel = kernels[node] = ChunkKernel.of_graph(op.inner, str(op))
    name = f"RowChunked-{backend.tokenize(kernel, *arrays)}"
    groups: dict = {}
    for j, c in enumerate(op.combine):
        if c is not None:
            groups.setdefault((c, op.inner.outputs[j].dtype), []).append(j)
    row_outs = [j for j, c in enumerate(op.combine) if c is None]
    task = _ChunkTask(
        kernel, name, str(op), [(dt, idx) for (_, dt), idx in groups.items()], row_outs
    )
    graph = {}
    for i in range(len(rows)):
        keys = [
            (a.name, i, *(0,) * (a.ndim - 1)) if k in tiled else (a.name, *(0,) * a.ndim)
            for k, a in enumerate(arrays)
        ]
        graph[(name, i)] = (task, i, *keys)
    items = len(groups) + len(row_outs)
    layers = {}

    def item(g, i):
        return (name, i) if items == 1 else (f"{name}-item{g}", i)

    if items > 1:
        for g in range(items):
            for i in range(len(rows)):
                graph[item(g, i)] = (_get, (name, i), g)
    outs = [None] * len(op.combine)
    for g, ((kind, _), idx) in enumerate(groups.items()):
        level, keys = 0, [item(g, i) for i in range(len(rows))]
        while len(keys) > 1:
            tree = f"{name}-{kind}{g}-{level}"
            nxt = []
            for m in range(0, len(keys), TREE_FAN_IN):
                graph[(tree, m)] = (_Combine(kind), *keys[m : m + TREE_FAN_IN])
                nxt.append((tree, m))
            level, keys = level + 1, nxt
        start = 0
        for j in idx:
            shape = out_shapes[j]
            size = int(np.prod(shape, dtype=np.int64))
            out_name = f"{name}-out{j}"
            layers[out_name] = {(out_name, *(0,) * len(shape)): (
                _unpack, keys[0], start, start + size, shape
            )}  # fmt: skip
            outs[j] = (out_name, tuple((s,) for s in shape))
            start += size
    for g, j in enumerate(row_outs, start=len(groups)):
        shape = out_shapes[j]
        out_name = f"{name}-out{j}"
        layers[out_name] = {
            (out_name, i, *(0,) * (len(shape) - 1)): item(g, i) for i in range(len(rows))
        }
        outs[j] = (out_name, (rows, *((s,) for s in shape[1:])))
    hlg = _graph(name, graph, deps, layers)
    return [
        da.Array(hlg, out_name, chunks, meta=_meta(len(chunks), o.dtype))
        for (out_name, chunks), o in zip(outs, node.outputs)
    ]


row_chunks.engine_args = True


def _graph(name, graph, deps, layers):
    """A HighLevelGraph: ``deps``' layers, ``name``'s tasks over them, and one layer
    per output over ``name``'s."""
    hlg_mod = backend.dask.highlevelgraph
    all_layers, dependencies = {}, {}
    for a in deps:
        g = a.__dask_graph__()
        all_layers.update(g.layers)
        dependencies.update(g.dependencies)
    all_layers[name] = hlg_mod.MaterializedLayer(graph)
    dependencies[name] = {n for a in deps for n in a.__dask_layers__()}
    for out_name, tasks in layers.items():
        all_layers[out_name] = hlg_mod.MaterializedLayer(tasks)
        dependencies[out_name] = {name}
    return hlg_mod.HighLevelGraph(all_layers, dependencies)


RULES[RowChunked] = row_chunks
CHECKS[RowChunked] = _check_row_inputs
