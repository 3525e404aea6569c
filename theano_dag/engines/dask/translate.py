"""What each op becomes on Dask: the table of chunked forms, and the gathered fallback.

A call builds one dask collection per value of the graph, node by node (``build``).
A value is either a *dask array* (inputs, and what ops make of them) or a *local*
value (constants, shapes and the small integer arithmetic on them), which is
computed at once on the caller's side and never becomes a task.

* ``Elemwise`` (fused ``Composite`` included): one ``blockwise`` task per chunk that
  runs the CPU engine's compiled kernel on the chunk (:class:`ChunkKernel`): the C
  loop of the whole fused subgraph, never one task per scalar op.
* reductions: dask.array's tree reductions (``sum``, ``prod``, ``max`` ...).
* ``Dot``/``Dot22``/``Gemm``/``Gemv``/``Ger``: dask.array's blocked products.
* ``DimShuffle``, ``Subtensor``, ``Reshape``, ``Join``, ``Alloc``, ``Shape``...: the
  dask.array operation of the same meaning (rechunking only where dask needs it).
* anything else: one task over the gathered inputs (``DaskGather`` marks them, and
  the lowering pass warned at compile time), running the op's own ``perform``.
"""

from __future__ import annotations

import operator
import pickle
import threading
import uuid
import weakref
from collections import OrderedDict

import numpy as np

from theano_dag import scalar as ts
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.cpu.plan.shapes import infer_shapes
from theano_dag.engines.dask import backend
from theano_dag.engines.dask.backend import is_dask_array
from theano_dag.engines.dask.errors import DaskTaskError, task_error
from theano_dag.engines.dask.fusion import optimize_arrays
from theano_dag.engines.dask.ops import DaskGather
from theano_dag.engines.inner import InnerMode, compile_inner
from theano_dag.graph.basic import Constant, clone_get_equiv
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.identity_ops import DeepCopyOp, ViewOp
from theano_dag.tensor import elemwise as te
from theano_dag.tensor.basic import Alloc, Join
from theano_dag.tensor.blas import Dot22, Dot22Scalar, Gemm, Gemv, Ger
from theano_dag.tensor.math import Dot
from theano_dag.tensor.nnet.nnet import LogSoftmax, Softmax, SoftmaxGrad
from theano_dag.tensor.shape import Rebroadcast, Reshape, Shape, Shape_i, SpecifyShape
from theano_dag.tensor.subtensor import Subtensor, _rebuild
from theano_dag.tensor.type import TensorType

__all__ = [
    "RULES",
    "ChunkKernel",
    "ChunkError",
    "DaskTaskError",
    "has_chunked_form",
    "build",
    "check_chunks",
    "CHECKS",
    "LOCAL_MAX_SIZE",
    "FULL_FAN_IN",
]

# Values up to this many elements, computed from local values only, stay local.
LOCAL_MAX_SIZE = 64
# Chunks' partials combined per task of a reduction over all axes (per axis).
FULL_FAN_IN = 64

_ALPHABET = "abcdefghijklmnopqrstuvwxyz"


# ---------------------------------------------------------------------------
# The fused elementwise kernel, one task per chunk

# (token, thread) -> InnerFunction: the CPU engine's functions are not thread safe, and
# Dask's threaded scheduler runs several chunks of one node at once. Each holds its
# memory plan's blocks, so kept for every kernel ever made they grew without bound
# (gigabytes over Theano's test_sort.py). A kernel made in this process takes its
# functions with it when it dies (with its function); a kernel that came pickled (a
# worker's, one per task) leaves them for the next task of that kernel, the least
# recently used dropped beyond _VISITING_MAX.
_OWNED: dict = {}
_VISITING: OrderedDict = OrderedDict()
_COMPILED_LOCK = threading.Lock()
_VISITING_MAX = 128


def _forget(token):
    """Drop the compiled functions of the kernel ``token`` (in every thread)."""
    with _COMPILED_LOCK:
        for key in [k for k in _OWNED if k[0] == token]:
            del _OWNED[key]


class ChunkError(ValueError):
    """A value's chunks are ones that an op cannot run on (Dask engine); the message
    names the op, the chunks it got and the chunking it expects."""


def _task_error(key, what, exc) -> DaskTaskError:
    # Of the type the task raised (a nested graph's error: the type it carries).
    kind = exc.error_type if isinstance(exc, DaskTaskError) else type(exc)
    return task_error(
        f"Dask engine: task {key!r} ({what}) failed: {type(exc).__name__}: {exc}", kind
    )


class KeyedTask:
    """A chunk task that knows its key: ``task(block_id, *chunks)`` runs ``fn(*chunks)``
    and turns an exception into a :class:`DaskTaskError` naming the key (the layer's
    ``name`` and the block index) and ``label`` (the op), raised where it ran.

    >>> import numpy as np
    >>> t = KeyedTask(np.log, "log-0", "Elemwise{log}")
    >>> t((0,), np.ones(2))
    array([0., 0.])
    """

    def __init__(self, fn, name, label):
        self.fn, self.name, self.label = fn, name, label

    def __dask_tokenize__(self):
        return ("theano_dag.KeyedTask", self.name)

    def __call__(self, block_id, *chunks):
        try:
            return self.fn(*chunks)
        except Exception as exc:
            raise _task_error((self.name, *block_id), f"running {self.label}", exc) from exc

    def __repr__(self):
        return f"KeyedTask({self.label})"


def _keyed_blockwise(fn, name, label, ind, arrays, meta):
    """``da.blockwise`` of ``KeyedTask(fn)`` over ``arrays`` (all indexed ``ind``): the
    chunks unified first, as ``blockwise`` would, so each task gets its block index.
    A numpy value among ``arrays`` (one element) goes to every task as it is."""
    pairs = []
    for a in arrays:
        if is_dask_array(a):
            pairs += [a, ind]
    chunkss, unified = backend.da.core.unify_chunks(*pairs)
    unified = iter(unified)
    out_chunks = tuple(chunkss[c] for c in ind)
    args = [backend.BlockIdDep(out_chunks), ind]
    for a in arrays:
        args += [next(unified), ind] if is_dask_array(a) else [a, None]
    return backend.da.blockwise(
        KeyedTask(fn, name, label), ind, *args, meta=meta, name=name, align_arrays=False
    )


class ChunkKernel:
    """One elementwise node run on one chunk of each input by the CPU engine.

    The node's graph is compiled by the CPU engine (its generated C kernel for a fused
    ``Composite``) once per process and thread, on first use: a ``ChunkKernel`` is
    pickled to the workers of a cluster as its graph (bytes pickled once) and a token,
    and compiles there.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> k = ChunkKernel(tt.exp(x).owner)
    >>> k(np.zeros(2))
    array([1., 1.])
    """

    def __init__(self, node):
        # A chunk is shorter than the whole: only the length-1 (broadcastable) axes
        # keep their static length.
        inputs = [
            TensorType(v.type.dtype, shape=tuple(1 if s == 1 else None for s in v.type.shape))()
            for v in node.inputs
        ]
        outputs = node.op.make_node(*inputs).outputs
        self.inputs, self.outputs = inputs, outputs
        self.label = str(node.op)
        self.token = uuid.uuid4().hex
        self.owned = True  # made here: its compiled functions live as long as it does
        weakref.finalize(self, _forget, self.token)

    @classmethod
    def of_graph(cls, fgraph, label):
        """The kernel of a whole graph (a copy of ``fgraph``'s, so that pickling it
        carries the graph's variables, not the FunctionGraph they belong to)."""
        equiv = clone_get_equiv(fgraph.inputs, fgraph.outputs, copy_inputs=True)
        kern = cls.__new__(cls)
        kern.inputs = [equiv[v] for v in fgraph.inputs]
        kern.outputs = [equiv[v] for v in fgraph.outputs]
        kern.label, kern.token, kern.owned = label, uuid.uuid4().hex, True
        weakref.finalize(kern, _forget, kern.token)
        return kern

    def __getstate__(self):
        # The graph goes as bytes pickled once: a task is pickled for each chunk and
        # unpickled on its worker (about 10 ms each for a logistic-regression step's
        # graph), while the worker compiles the graph once and then needs the token only.
        blob = self.__dict__.get("_blob")
        if blob is None:
            blob = self._blob = pickle.dumps((self.inputs, self.outputs), protocol=5)
        return {"_blob": blob, "label": self.label, "token": self.token}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.inputs = self.outputs = None  # unpickled from _blob when compiled
        self.owned = False  # a task's copy: its compiled functions are kept for the next

    def __dask_tokenize__(self):
        return ("theano_dag.ChunkKernel", self.token)

    def _function(self):
        key = (self.token, threading.get_ident())
        visiting = not self.owned
        table = _VISITING if visiting else _OWNED
        with _COMPILED_LOCK:
            fn = table.get(key)
            if fn is not None:
                if visiting:
                    _VISITING.move_to_end(key)
                return fn
        if self.inputs is None:
            self.inputs, self.outputs = pickle.loads(self._blob)
        fg = FunctionGraph(self.inputs, self.outputs, clone=True)
        fn = compile_inner(fg, mode=InnerMode(CPULinker()), borrow=False)
        with _COMPILED_LOCK:
            table[key] = fn
            while visiting and len(_VISITING) > _VISITING_MAX:
                _VISITING.popitem(last=False)
        return fn

    def __call__(self, *chunks):
        outs = self._function()(*chunks)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __repr__(self):
        return f"ChunkKernel({self.label})"


# ---------------------------------------------------------------------------
# Helpers


def _as_dask(value):
    return (
        value
        if is_dask_array(value)
        else backend.da.from_array(np.asarray(value), chunks=-1, name=False)
    )


def _without_empty_chunks(value):
    """A dask array whose chunks of length 0 (a join with an empty part makes them:
    ``(1, 0)``) are merged into their neighbours (an empty axis into one chunk): dask.array's
    ``unify_chunks`` (2026.8) gives such an array back as one chunk while it reports two,
    and an elementwise op with a length-1 operand then made a (0, 2) result of (0, 1)
    operands. A value that is no dask array, or has no such chunk, is returned as it is."""
    if not is_dask_array(value):
        return value
    merged = {
        axis: tuple(c for c in chunks if c) or (0,)
        for axis, chunks in enumerate(value.chunks)
        if len(chunks) > 1 and 0 in chunks
    }
    return value.rechunk(merged) if merged else value


def _local(value) -> bool:
    return not is_dask_array(value)


def _meta(ndim, dtype):
    return np.empty((0,) * ndim, dtype=dtype)


def _out_dtype(node, k=0):
    return np.dtype(node.outputs[k].dtype)


def _cast(x, node, k=0):
    dt = _out_dtype(node, k)
    if x.dtype == dt:
        return x
    if x.dtype.kind == "f" and np.dtype(dt).kind in "iu":
        # The engines' cast rule (a float out of the integer's range gives its minimum),
        # not astype's, which keeps x86's low bits: a sum of uint64 in float64.
        return x.map_blocks(ts.cast_array, dt, meta=_meta(x.ndim, dt))
    return x.astype(dt)


# ---------------------------------------------------------------------------
# The rules: node, input values -> output values


def _elemwise(node, vals, kernels):
    ndim = node.outputs[0].ndim
    ind = _ALPHABET[:ndim]
    # A local value of one element (a constant, mostly) is an argument of each task,
    # not a task of its own that every chunk's task waits for.
    arrays = [
        np.asarray(v) if _local(v) and np.size(v) == 1 and np.ndim(v) == ndim else _as_dask(v)
        for v in vals
    ]
    if not any(is_dask_array(a) for a in arrays):
        arrays[0] = _as_dask(arrays[0])
    # One kernel per node for the life of the function: compiled once per worker.
    kern = kernels.get(node)
    if kern is None:
        kern = kernels[node] = ChunkKernel(node)
    # A readable key prefix, then a token of the kernel and of the inputs' keys.
    name = f"{str(node.op.scalar_op)[:40]}-{backend.tokenize(kern, *vals)}".replace(" ", "")
    label = str(node.op)
    if len(node.outputs) == 1:
        meta = _meta(ndim, _out_dtype(node))
        return [_keyed_blockwise(kern, name, label, ind, arrays, meta)]
    both = _keyed_blockwise(kern, name, label, ind, arrays, _meta(ndim, object))
    return [
        both.map_blocks(operator.getitem, k, meta=_meta(ndim, _out_dtype(node, k)))
        for k in range(len(node.outputs))
    ]


_REDUCERS = {
    te.Sum: "sum",
    te.Prod: "prod",
    te.Max: "max",
    te.Min: "min",
    te.All: "all",
    te.Any: "any",
}
_CA_REDUCERS = {ts.Add: "sum", ts.Mul: "prod", ts.Maximum: "max", ts.Minimum: "min"}


def _reducer_name(op):
    name = _REDUCERS.get(type(op))
    if name is None and type(op) is te.CAReduce:
        name = _CA_REDUCERS.get(type(op.scalar_op))
    return name


#: The reductions without an identity, by dask.array's name: numpy's ufunc's name.
_NO_IDENTITY = {"max": "maximum", "min": "minimum"}


def _empty_extremum(x, axis, name, node):
    """The max or min of an empty ``x`` (a length 0 on an axis known now) as numpy's:
    an error where a reduced axis is empty (the op's identity with ``empty_identity``),
    else an empty array of the output's shape.
    dask.array's (2026.8) gives an empty array where numpy raises (the max over axis 0
    of a (0, 3) array, whose 3 maxima do not exist) and raises where numpy's is empty
    (the max over axis 1 of the same array)."""
    axes = set(range(x.ndim)) if axis is None else {a % x.ndim for a in axis}
    shape = tuple(n for a, n in enumerate(x.shape) if a not in axes)
    initial = node.op.initial_for(_out_dtype(node))
    if initial is not None:
        return backend.da.full(shape, initial, dtype=_out_dtype(node), chunks=-1)
    if any(x.shape[a] == 0 for a in axes):
        raise ValueError(
            f"zero-size array to reduction operation {_NO_IDENTITY[name]} which has no "
            f"identity (Dask engine: {node.op} of a value of shape {x.shape})"
        )
    return backend.da.zeros(shape, dtype=_out_dtype(node), chunks=-1)


def _reduce(node, vals):
    op = node.op
    x = _as_dask(vals[0])
    name = _reducer_name(op)
    if name in _NO_IDENTITY and 0 in x.shape and not np.isnan(x.shape).any():
        return [_empty_extremum(x, op.axis, name, node)]
    fn = getattr(backend.da, name)
    axis = op.axis
    kw = {}
    if x.ndim and (axis is None or len({a % x.ndim for a in axis}) == x.ndim):
        # Every chunk's partial is one number: combined at once (up to FULL_FAN_IN
        # per task), not by dask's tree of 4 at a level (20 chunks: 7 tasks in 3
        # levels, a scheduler round trip each, for adding 20 numbers).
        kw["split_every"] = FULL_FAN_IN
    if isinstance(op, te._DtypeReduce):
        acc = op.acc_dtype_for(node.inputs[0].dtype)
        out = fn(x, axis=axis, dtype=acc, **kw)
    else:
        out = fn(x, axis=axis, **kw)
    return [_cast(out, node)]


def _dot(node, vals):
    x, y = (_as_dask(v) for v in vals[:2])
    if x.ndim == 0 or y.ndim == 0:
        out = x * y
    else:
        out = backend.da.tensordot(x, y, axes=([x.ndim - 1], [0]))
    if isinstance(node.op, Dot22Scalar):
        out = out * _as_dask(vals[2])
    return [_cast(out, node)]


# The BLAS ops' shapes checked first, as their perform checks them: the sum below would
# broadcast a z of one row over the product's rows.
def _check_blas(node, *arrays):
    shapes = [a.shape for a in arrays]
    if not _unknown_lengths(shapes):
        node.op.check_shapes(*shapes)


def _unknown_lengths(shapes):
    """Whether a length is NaN: an input's chunks dask knows only once computed."""
    return any(np.isnan(n) for s in shapes for n in s)


def _gemm(node, vals):
    z, a, x, y, b = (_as_dask(v) for v in vals)
    _check_blas(node, z, x, y)
    return [_cast(b * z + a * backend.da.dot(x, y), node)]


def _gemv(node, vals):
    y, alpha, a, x, beta = (_as_dask(v) for v in vals)
    _check_blas(node, y, a, x)
    return [_cast(beta * y + alpha * backend.da.dot(a, x), node)]


def _ger(node, vals):
    a, alpha, x, y = (_as_dask(v) for v in vals)
    _check_blas(node, a, x, y)
    return [_cast(a + alpha * backend.da.outer(x, y), node)]


def _dimshuffle(node, vals):
    op = node.op
    x = vals[0]
    if op.drop:
        x = x.squeeze(axis=tuple(op.drop)) if x.ndim else x
    kept = [o for o in op.new_order if o != "x"]
    rank = {d: k for k, d in enumerate(sorted(kept))}
    perm = [rank[d] for d in kept]
    if perm != sorted(perm):
        x = x.transpose(perm)
    if "x" in op.new_order:
        x = x[tuple(None if o == "x" else slice(None) for o in op.new_order)]
    return [x]


def _subtensor(node, vals):
    x, *idx = vals
    index, axis = [], 0
    for entry in _rebuild(node.op.idx_list, idx):
        if isinstance(entry, slice) and not np.isnan(x.shape[axis]):
            entry = _numpy_slice(entry, x.shape[axis])
        index.append(entry)
        axis += entry is not None
    return [x[tuple(index)]]


def _numpy_slice(s, n):
    """The slice that picks from a length ``n`` what numpy's ``s`` picks, in the bounds:
    dask.array reads a start before the first entry with a negative step as the last
    entry (``x[-4::-1]`` of 1 entry was ``x``, numpy's is empty)."""
    r = range(*s.indices(n))
    if not r:
        return slice(0, 0, 1)
    stop = r[-1] + r.step
    return slice(r[0], None if stop < 0 else stop, r.step)


def _reshape(node, vals):
    x, shape = vals
    # numpy's rules and perform's errors: dask would read a second -1 as a length of 1.
    shape = node.op.target_shape(node, x.shape, np.asarray(shape).reshape(-1))
    if x.size == 0:  # (dask.array's reshape of no values fails for some shapes)
        return [backend.da.zeros(shape, dtype=x.dtype)]
    try:
        return [x.reshape(shape)]
    except NotImplementedError:
        # Dimensions split unevenly: through the flat array (dask merges, then splits).
        return [x.reshape((x.size,)).reshape(shape)]


def _join(node, vals):
    # dask's concatenate leaves out an input of no values whatever its other lengths
    # ((0, 2) and (3, 4) along axis 1 gave the (3, 4) one): numpy's check of the lengths
    # first, on inputs cut to no length along the axis (no values to copy), with the
    # error perform gives.
    axis = node.op.axis % vals[0].ndim
    shapes = [tuple(v.shape) for v in vals]
    if not _unknown_lengths(shapes):
        cut = [np.empty(s[:axis] + (0,) + s[axis + 1 :], v.dtype) for s, v in zip(shapes, vals)]
        try:
            np.concatenate(cut, axis=axis)
        except ValueError as e:
            raise ValueError(f"{node.op}: cannot join shapes {shapes}: {e}") from None
    return [_cast(backend.da.concatenate([_as_dask(v) for v in vals], axis=axis), node)]


def _alloc(node, vals):
    v, *shape = vals
    shape = tuple(int(np.asarray(s)) for s in shape)
    v = _as_dask(np.asarray(v, dtype=_out_dtype(node)) if _local(v) else _cast(v, node))
    return [backend.da.broadcast_to(v, shape)]


def _shape(node, vals):
    return [np.asarray(vals[0].shape, dtype=_out_dtype(node))]


def _shape_i(node, vals):
    return [np.asarray(vals[0].shape[node.op.i], dtype=_out_dtype(node))]


def _specify_shape(node, vals):
    # The shapes of dask arrays are known before anything runs: check them now,
    # with the op's own message (its perform on an empty array of the same shape).
    x, shape = vals
    NodeTask(node)(np.broadcast_to(np.zeros((), x.dtype), x.shape), shape)
    return [x]


def _identity(node, vals):
    return [vals[0]]


def _gather(node, vals):
    x = vals[0]
    # One chunk: the node that reads it gets the whole array in one task.
    return [x.rechunk(x.shape) if x.numblocks != (1,) * x.ndim else x]


def _deep_copy(node, vals):
    # Dask never writes to a chunk; only an input given as a numpy array could come
    # back as itself (a single chunk of from_array), so the copy is one per chunk.
    return [vals[0].map_blocks(np.copy, meta=_meta(vals[0].ndim, vals[0].dtype))]


RULES: dict = {
    te.Elemwise: _elemwise,
    Dot: _dot,
    Dot22: _dot,
    Dot22Scalar: _dot,
    Gemm: _gemm,
    Gemv: _gemv,
    Ger: _ger,
    te.DimShuffle: _dimshuffle,
    Subtensor: _subtensor,
    Reshape: _reshape,
    Join: _join,
    Alloc: _alloc,
    Shape: _shape,
    Shape_i: _shape_i,
    SpecifyShape: _specify_shape,
    Rebroadcast: _identity,
    ViewOp: _identity,
    DaskGather: _gather,
    DeepCopyOp: _deep_copy,
}
for _cls in _REDUCERS:
    RULES[_cls] = _reduce
RULES[te.CAReduce] = _reduce


def _rule(op):
    rule = RULES.get(type(op))
    if rule is _reduce and _reducer_name(op) is None:
        return None
    if rule is _join and op.axis is None:  # an axis known only at run time: gathered
        return None
    return rule


def has_chunked_form(node) -> bool:
    """True when the engine runs ``node`` chunk by chunk (or on local values only)."""
    return _rule(node.op) is not None


# ---------------------------------------------------------------------------
# The gathered fallback: one task over whole inputs, running the op's perform


class NodeTask:
    """Run one node's ``perform`` on whole (gathered) input values; picklable."""

    def __init__(self, node):
        self.node = node

    def __dask_tokenize__(self):
        return ("theano_dag.NodeTask", id(self.node), str(self.node.op))

    def __call__(self, *values):
        node = self.node
        storage = [[None] for _ in node.outputs]
        node.op.perform(node, list(values), storage)
        outs = tuple(
            np.asarray(s[0], dtype=o.dtype) if hasattr(o.type, "dtype") else s[0]
            for s, o in zip(storage, node.outputs)
        )
        return outs[0] if len(outs) == 1 else outs


def _run_local(node, vals):
    out = NodeTask(node)(*vals)
    return [out] if len(node.outputs) == 1 else list(out)


def _gathered(node, vals):
    task = NodeTask(node)
    shapes, _ = infer_shapes(
        None,
        [node],
        {v: tuple(x.shape) for v, x in zip(node.inputs, vals) if is_dask_array(x)},
        constants={v: x for v, x in zip(node.inputs, vals) if not is_dask_array(x)},
    )
    outs = node.outputs
    if any(shapes.get(o) is None for o in outs):
        if getattr(_CHECKING, "on", False):
            raise _Unknown  # computing is not checking
        # Its output shape depends on the data: run it now on the computed inputs. An
        # output that is no array (a random op's new generator) stays a local value.
        lazy = iter(
            backend.dask.compute(
                *optimize_arrays([v for v in vals if is_dask_array(v)]), optimize_graph=False
            )
        )
        computed = [next(lazy) if is_dask_array(v) else v for v in vals]
        return [
            _as_dask(v) if isinstance(o.type, TensorType) else v
            for o, v in zip(outs, _run_local(node, list(computed)))
        ]
    # The task's key is chosen here, so that its errors can name it.
    key = f"{str(node.op)[:40]}-{backend.tokenize(task, *vals)}".replace(" ", "")
    keyed = _KeyedWhole(task, key, str(node.op))
    return _whole_task(keyed, key, vals, [(shapes[o], np.dtype(o.dtype)) for o in outs])


def _whole_task(fn, key, vals, outs):
    """The arrays (one chunk each, of ``outs``: (shape, dtype) per output) of one task
    ``fn(*vals)`` of key ``key``, its dask array arguments each read as one chunk.

    Written by hand as a layer whose task refers to its inputs' keys: ``dask.delayed``
    of a dask array copies the array's whole graph under fresh keys (dask's
    ProhibitReuse), so each gathered node got its own copy of everything upstream and
    ran it again: a chain of such nodes made a graph exponential in its length.

    >>> import numpy as np, dask.array as da
    >>> x = da.ones((2, 3), chunks=(1, 3))
    >>> total, = _whole_task(np.sum, "sum-0", [x], [((), np.dtype(float))])
    >>> float(total.compute())
    6.0
    """
    args, deps = [], []
    for v in vals:
        if is_dask_array(v):
            if v.numblocks != (1,) * v.ndim:
                v = v.rechunk(v.shape)
            deps.append(v)
            args.append(backend.TaskRef((v.name, *(0,) * v.ndim)))
        else:
            args.append(backend.DataNode(None, v))
    whole = backend.HighLevelGraph.from_collections(
        key, {key: backend.Task(key, fn, *args)}, dependencies=deps
    )
    arrays = []
    for k, (shape, dtype) in enumerate(outs):
        name = f"{key}-{k}" if len(outs) > 1 else f"{key}-out"
        block = (name, *(0,) * len(shape))
        ref = backend.TaskRef(key)
        task = (
            backend.Task(block, operator.getitem, ref, k)
            if len(outs) > 1
            else backend.Alias(block, key)
        )
        graph = backend.HighLevelGraph(
            {**whole.layers, name: {block: task}},
            {**whole.dependencies, name: {key}},
        )
        chunks = tuple((int(s),) for s in shape)
        arrays.append(backend.da.Array(graph, name, chunks, meta=_meta(len(shape), dtype)))
    return arrays


class _KeyedWhole(KeyedTask):
    """A gathered op's one task (key ``name``, see :func:`_whole_task`)."""

    def __call__(self, *values):
        try:
            return self.fn(*values)
        except Exception as exc:
            raise _task_error(self.name, f"running {self.label}", exc) from exc


# ---------------------------------------------------------------------------
# Ops that run chunk by chunk when one axis is whole in every chunk


_WHOLE_AXIS = (Softmax, LogSoftmax, SoftmaxGrad)


def _whole_axis(node, vals, rechunk=True):
    """One task per chunk running the op's ``perform``: the op's axis must be in one
    chunk. Else the engine rechunks that axis (``rechunk``) or raises ChunkError."""
    op = node.op
    arrays = [_as_dask(v) for v in vals]
    ndim = arrays[0].ndim
    axis = op.axis % ndim
    for k, a in enumerate(arrays):
        if len(a.chunks[axis]) == 1:
            continue
        if not rechunk:
            want = tuple(c if d != axis else (a.shape[axis],) for d, c in enumerate(a.chunks))
            raise ChunkError(
                f"Dask engine: {op} needs axis {axis} of its input {k} in one chunk; got "
                f"chunks {a.chunks}, expected {want} (chunk that axis -1, or let the "
                "engine rechunk: DaskLinker(rechunk=True))"
            )
        arrays[k] = a.rechunk({axis: -1})
    task = NodeTask(_standalone(node))
    name = f"{str(op)}-{backend.tokenize(task, *arrays)}".replace(" ", "")
    ind = _ALPHABET[:ndim]
    return [_keyed_blockwise(task, name, str(op), ind, arrays, _meta(ndim, _out_dtype(node)))]


def _standalone(node):
    """``node``'s op applied to fresh inputs of the types a chunk has (length-1 axes
    stay so): pickled to the workers alone, not with the graph around ``node``."""
    inputs = [
        TensorType(v.type.dtype, shape=tuple(1 if s == 1 else None for s in v.type.shape))()
        for v in node.inputs
    ]
    return node.op.make_node(*inputs)


for _cls in _WHOLE_AXIS:
    RULES[_cls] = _whole_axis


def _small_local(vals) -> bool:
    return all(_local(v) and _local_size(v) <= LOCAL_MAX_SIZE for v in vals)


def _local_size(value) -> int:
    # A typed list's value (a list of arrays, of different lengths maybe) counts its
    # arrays' elements: numpy would make it one array, or refuse a ragged one.
    if isinstance(value, (list, tuple)):
        return sum(_local_size(v) for v in value)
    return np.size(value)


def build(
    order, values: dict, kernels: dict | None = None, rechunk=True, owners: dict | None = None
) -> dict:
    """Fill ``values`` (variable -> value, the inputs given) with every node's outputs,
    in ``order``; constants are read from the graph. ``kernels``: the function's
    :class:`ChunkKernel` per elementwise node (filled as they are made). ``rechunk``:
    whether an op that needs other chunks gets them (else :class:`ChunkError`).
    ``owners``, if given, gets ``{layer name: node}`` for the layers each node made."""
    kernels = {} if kernels is None else kernels
    for node in order:
        vals = []
        for v in node.inputs:
            if v not in values:
                if not isinstance(v, Constant):
                    raise ValueError(f"Dask engine: no value for {v} (input of {node.op})")
                values[v] = v.data
            vals.append(values[v])
        rule = _rule(node.op)
        if _small_local(vals) and not isinstance(node.op, Alloc):
            outs = _run_local(node, vals)
        elif rule is None:
            outs = _gathered(node, vals)
        elif all(_local(v) for v in vals) and rule in (_shape, _shape_i, _identity):
            outs = _run_local(node, vals)
        else:
            if node.inputs and rule not in (_elemwise, _alloc, _gemm, _gemv, _ger, _dot):
                if _local(vals[0]):
                    vals = [_as_dask(vals[0])] + vals[1:]
            if rule is _elemwise:
                outs = rule(node, vals, kernels)
            elif rule is _whole_axis:
                outs = rule(node, vals, rechunk)
            elif getattr(rule, "engine_args", False):  # a rule of an engine-own op
                outs = rule(node, vals, kernels, rechunk)
            else:
                outs = rule(node, vals)
        for o, val in zip(node.outputs, outs):
            val = values[o] = _without_empty_chunks(val)
            if owners is not None and is_dask_array(val):
                for name in val.dask.layers:
                    owners.setdefault(name, node)
    return values


# ---------------------------------------------------------------------------
# Chunks checked before the call


class _Unknown(Exception):
    """A value that cannot be known before the call (its shape depends on the data)."""


_CHECKING = threading.local()

# Op type -> check(node, known values, rechunk) of the chunks it will get, for a node
# some of whose inputs are unknown before the call (the rule checks the others).
CHECKS: dict = {}


def check_chunks(order, values: dict, kernels: dict | None = None, rechunk=True):
    """Lower ``order`` as :func:`build` does, on the inputs whose shapes and chunks are
    known before any call (``values``: variable -> dask array; the other inputs are
    unknown), computing nothing, so that a chunking an op cannot run on is a
    :class:`ChunkError` then. Nodes that read an unknown value are skipped, and so is
    a node that fails otherwise (the call reports it, as every engine does).

    >>> import theano_dag.tensor as tt
    >>> import dask.array as da
    >>> x = tt.dmatrix("x")
    >>> y = tt.nnet.softmax(x)
    >>> try:
    ...     check_chunks([y.owner], {x: da.empty((4, 6), chunks=(2, 3))}, rechunk=False)
    ... except ChunkError as e:
    ...     print(str(e)[:57])
    Dask engine: Softmax{axis=-1} needs axis 1 of its input 0
    """
    known = dict(values)
    _CHECKING.on = True
    try:
        for node in order:
            try:
                if any(v not in known and not isinstance(v, Constant) for v in node.inputs):
                    check = CHECKS.get(type(node.op))
                    if check is not None:
                        check(node, known, rechunk)
                    continue
                build([node], known, kernels, rechunk)
            except ChunkError:
                raise
            except Exception:  # noqa: S112 (unknown before the call: the call says)
                continue
    finally:
        _CHECKING.on = False
