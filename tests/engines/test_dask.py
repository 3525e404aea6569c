"""The Dask engine: every op of the table against the reference engine with several
chunkings, inputs and shared variables as dask arrays, the lowering, the task graph."""

from __future__ import annotations

import gc
import os
import pickle
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
import dask  # noqa: E402
from dask.core import flatten  # noqa: E402

import theano_dag  # noqa: E402
import theano_dag.tensor as tt  # noqa: E402
from theano_dag import formats, printing  # noqa: E402
from theano_dag import scalar as ts  # noqa: E402
from theano_dag import typed_list as tl  # noqa: E402
from theano_dag.compile.mode import Mode, get_mode  # noqa: E402
from theano_dag.engines.dask import (  # noqa: E402
    ChunkError,
    ChunkKernel,
    DaskGather,
    DaskLinker,
    DaskSharedVariable,
    DaskTaskError,
    GatherWarning,
    RowChunked,
    dask_collections,
    dask_shared,
    dask_task_graph,
    translate,
)
from theano_dag.engines.dask.errors import task_error  # noqa: E402
from theano_dag.graph.rewriting.db import Query  # noqa: E402
from theano_dag.opt import optdb  # noqa: E402
from theano_dag.scan import scan  # noqa: E402
from theano_dag.tensor import inplace  # noqa: E402
from theano_dag.tensor.arrays import assert_op  # noqa: E402
from theano_dag.tensor.random.utils import RandomStream  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tensor"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dask_helpers import one_chunk_flat  # noqa: E402
from op_table import TABLE, row_inputs  # noqa: E402

REF = Mode(linker="py", optimizer=None)
SYNC = {"scheduler": "sync"}

# one chunk, uneven chunks (2 along every axis of the table's 3- and 4-long axes), length 1
CHUNKINGS = {"one": -1, "uneven": 2, "ones": 1}


def _close(g, w, tol):
    g, w = np.asarray(g), np.asarray(w)
    if g.shape != w.shape or g.dtype != w.dtype:
        return f"{g.shape} {g.dtype}, reference {w.shape} {w.dtype}"
    if w.dtype.kind in "fc":
        ok = np.allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
    else:
        ok = np.array_equal(g, w)
    return None if ok else f"max difference {np.max(np.abs(g.astype(float) - w))}"


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int32", "int64", "bool"])
def test_op_table_matches_reference_engine(dtype, chunking):
    # All rows in one function: one compile, each row still checked alone.
    rng = np.random.default_rng(1234)
    rows = [r for r in TABLE if dtype in r.dtypes]
    syms, values, outs = [], [], []
    for row in rows:
        s, v = row_inputs(row, dtype, rng)
        outs.append(row.build(*s))
        syms += s
        values += v
    mode = Mode(linker=DaskLinker(chunks=CHUNKINGS[chunking], **SYNC), optimizer="fast_run")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GatherWarning)
        f = theano_dag.function(syms, outs, mode=mode, on_unused_input="ignore")
    ref = theano_dag.function(syms, outs, mode=REF, on_unused_input="ignore")
    copies = [v.copy() for v in values]
    got, want = f(*values), ref(*values)
    tol = 1e-4 if dtype == "float32" else 1e-7
    bad = [f"{row}: {msg}" for row, g, w in zip(rows, got, want) if (msg := _close(g, w, tol))]
    assert not bad, "\n".join(bad)
    for v, c in zip(values, copies):
        np.testing.assert_array_equal(v, c, err_msg="the engine modified an input")


# -- the Mode, the optdb, the lowering ----------------------------------------------------


def test_dask_mode_by_name_runs_the_lowering_and_no_inplace_rewrite():
    mode = get_mode("DASK")
    names = [o.name for o in mode.optimizer]
    assert names[-1] == "dask_gathering"
    assert "insert_inplace" not in names and "fused_reduce" not in names
    assert "cpu_row_tiling" not in names
    assert "dask_gathering" in [o.name for o in optdb.query(Query(include=["dask"]))]
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.exp(x).sum(), mode="DASK")
    np.testing.assert_allclose(f(np.arange(5.0)), np.exp(np.arange(5.0)).sum())
    assert not any(n.op.destroy_map for n in f.maker.fgraph.apply_nodes)


def test_an_op_without_chunked_form_is_gathered_with_a_warning_naming_it():
    x = tt.dvector("x")
    with pytest.warns(GatherWarning, match=r"SortOp.*no chunked form"):
        f = theano_dag.function([x], tt.sort(x) * 2, mode=Mode(linker=DaskLinker(chunks=2)))
    gathers = [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, DaskGather)]
    assert len(gathers) == 1
    assert "DaskGather" in printing.debugprint(f, file="str")
    v = np.array([3.0, 1.0, 2.0, 0.0, 5.0])
    np.testing.assert_array_equal(f(v), np.sort(v) * 2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_small_elementwise_value_read_by_several_kernels_is_computed_in_each(dtype):
    # The gradient step of logistic regression: dot(x, w) + b is read by the cost's
    # kernel and the gradient's; fusion keeps it apart, the Dask lowering not.
    x, y = tt.matrix("x", dtype=dtype), tt.vector("y", dtype=dtype)
    w, b = tt.vector("w", dtype=dtype), tt.scalar("b", dtype=dtype)
    p = tt.nnet.sigmoid(tt.dot(x, w) + b)
    cost = tt.nnet.binary_crossentropy(p, y).mean()
    gw, gb = theano_dag.grad(cost, [w, b])
    outs = [cost, w - 0.5 * gw, b - 0.5 * gb]
    chunks = {"x": (64, 5), "y": 64}
    # Without the row-chunks pass, which makes the step's row work one node
    # (test_the_row_work_and_its_sums_over_rows_are_one_task_per_chunk).
    mode = Mode(linker=DaskLinker(chunks=chunks, **SYNC), optimizer="fast_run").excluding(
        "dask_rows"
    )
    f = theano_dag.function([x, y, w, b], outs, mode=mode)
    apart = theano_dag.function([x, y, w, b], outs, mode=mode.excluding("dask_inline"))

    def shared_elementwise(fn):
        fg = fn.maker.fgraph
        return [
            n
            for n in fg.apply_nodes
            if type(n.op) is tt.Elemwise
            and sum(
                c != "output" and type(c.op) is tt.Elemwise for c, _ in fg.clients[n.outputs[0]]
            )
            > 1
        ]

    assert shared_elementwise(f) == []
    kept = {str(n.op) for n in shared_elementwise(apart)}
    assert "Elemwise{add,no_inplace}" in kept
    xv, yv = _logreg(dtype)
    wv, bv = np.linspace(-1, 1, 5).astype(dtype), np.asarray(0.1, dtype)
    assert len(dask_task_graph(f, xv, yv, wv, bv)) < len(dask_task_graph(apart, xv, yv, wv, bv))
    ref = theano_dag.function([x, y, w, b], outs, mode=REF)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for got, want in zip(f(xv, yv, wv, bv), ref(xv, yv, wv, bv)):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_fused_elementwise_is_one_task_per_chunk():
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    out = tt.tanh(tt.exp(x) * y + tt.sin(x) - y**2)
    f = theano_dag.function([x, y], out, mode=Mode(linker=DaskLinker(chunks=(2, 3))))
    (node,) = f.maker.fgraph.apply_nodes  # the whole expression fused into one Composite
    a, b = np.random.default_rng(0).random((2, 5, 7))
    graph = dask_task_graph(f, a, b)
    kernel_tasks = [k for k in graph if isinstance(k, tuple) and "Composite" in k[0]]
    assert len(kernel_tasks) == 3 * 3  # chunks (2, 2, 1) x (3, 3, 1)
    np.testing.assert_allclose(f(a, b), np.tanh(np.exp(a) * b + np.sin(a) - b**2))


def test_chunk_kernel_pickles_and_compiles_where_it_runs():
    x = tt.fvector("x")
    k = ChunkKernel((tt.exp(x) * 2 + 1).owner)  # add(mul(...), 1): two inputs
    k2 = pickle.loads(pickle.dumps(k))
    v = np.arange(4, dtype="float32")
    np.testing.assert_allclose(k2(v, np.ones(1, "int8")), v + 1, rtol=1e-6)
    assert k2(v, np.ones(1, "int8")).dtype == np.float32


# -- inputs, outputs, shared variables ----------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dask_array_inputs_and_dask_outputs(dtype):
    x, w = tt.matrix("x", dtype=dtype), tt.vector("w", dtype=dtype)
    out = tt.nnet.sigmoid(tt.dot(x, w)).mean()
    rng = np.random.default_rng(0)
    xv, wv = rng.random((30, 4)).astype(dtype), rng.random(4).astype(dtype)
    want = (1 / (1 + np.exp(-(xv @ wv)))).mean()
    f = theano_dag.function([x, w], out, mode="DASK")
    got = f(da.from_array(xv, chunks=(7, 4)), wv)
    assert isinstance(got, np.ndarray) and got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-5)
    lazy = theano_dag.function([x, w], out, mode=Mode(linker=DaskLinker(return_dask=True)))
    res = lazy(da.from_array(xv, chunks=(7, 4)), wv)
    assert isinstance(res, da.Array)
    np.testing.assert_allclose(res.compute(), want, rtol=1e-5)


def test_a_dask_input_of_the_wrong_dtype_is_refused_naming_it():
    x = tt.dvector("x")
    f = theano_dag.function([x], x * 2, mode="DASK")
    with pytest.raises(TypeError, match=r"bad input 'x'.*dask array of dtype float64"):
        f(da.zeros(3, dtype="float32"))


def test_chunks_per_input_by_name():
    x, y = tt.dvector("x"), tt.dvector("y")
    f = theano_dag.function(
        [x, y], [x + 1, y * 2], mode=Mode(linker=DaskLinker(chunks={"x": 2, "y": 5}))
    )
    a, b = dask_collections(f, np.zeros(6), np.zeros(6))
    assert a.chunks == ((2, 2, 2),) and b.chunks == ((5, 1),)


def _logreg(dtype, n=200, d=5, seed=0):
    rng = np.random.default_rng(seed)
    xv = rng.normal(size=(n, d)).astype(dtype)
    yv = (xv @ rng.normal(size=d) > 0).astype(dtype)
    return xv, yv


def _train_numpy(xv, yv, steps, lr):
    w, b = np.zeros(xv.shape[1], xv.dtype), xv.dtype.type(0)
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(xv @ w + b)))
        g = p - yv
        w = w - lr * (xv.T @ g) / len(yv)
        b = b - lr * g.mean()
    return w, b


def _train_graph(x, y, w, b, lr):
    p = tt.nnet.sigmoid(tt.dot(x, w) + b)
    cost = tt.nnet.binary_crossentropy(p, y).mean()
    gw, gb = theano_dag.grad(cost, [w, b])
    return cost, [(w, w - lr * gw), (b, b - lr * gb)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_training_loop_updates_stay_dask_arrays_until_get_value(dtype):
    xv, yv = _logreg(dtype)
    x, y = tt.matrix("x", dtype=dtype), tt.vector("y", dtype=dtype)
    w = dask_shared(np.zeros(5, dtype), name="w")
    b = dask_shared(np.zeros((), dtype), name="b")
    assert isinstance(w, DaskSharedVariable)
    cost, updates = _train_graph(x, y, w, b, 0.5)
    f = theano_dag.function([x, y], cost, updates=updates, mode="DASK")
    xd, yd = da.from_array(xv, chunks=(64, 5)), da.from_array(yv, chunks=64)
    for _ in range(20):
        f(xd, yd)
        assert isinstance(w.get_value(return_internal_type=True), da.Array)
    want_w, want_b = _train_numpy(xv, yv, 20, 0.5)
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(w.get_value(), want_w, rtol=tol, atol=tol)
    np.testing.assert_allclose(b.get_value(), want_b, rtol=tol, atol=tol)
    assert isinstance(w.get_value(), np.ndarray)


def test_shared_numpy_variables_are_updated_with_numpy_values():
    w = theano_dag.shared(np.ones(4), name="w")
    x = tt.dvector("x")
    f = theano_dag.function([x], (x * w).sum(), updates=[(w, w * 2)], mode="DASK")
    assert f(np.arange(4.0)) == 6.0
    assert type(w.get_value(borrow=True)) is np.ndarray
    np.testing.assert_array_equal(w.get_value(), np.full(4, 2.0))


def test_shared_of_a_dask_array_makes_a_dask_shared_variable():
    s = theano_dag.shared(da.ones((4, 2), chunks=2), name="s")
    assert isinstance(s, DaskSharedVariable)
    np.testing.assert_array_equal(s.get_value(), np.ones((4, 2)))


def test_task_graph_is_a_dag_of_tasks():
    x = tt.dvector("x")
    f = theano_dag.function([x], (tt.exp(x) * 2).sum(), mode=Mode(linker=DaskLinker(chunks=2)))
    graph = dask_task_graph(f, np.ones(6))
    keys = list(flatten(graph.pop("__outputs__")))
    assert len(keys) == 1 and keys[0] in graph
    assert len(graph) >= 3 + 3  # the chunks of x, one kernel task per chunk, the tree


def test_formats_emit_a_compiled_functions_dask_graph_as_a_dag():
    x, y = tt.dmatrix("x"), tt.dvector("y")
    f = theano_dag.function(
        [x, y], [tt.exp(x).sum(axis=1) + y], mode=Mode(linker=DaskLinker(chunks=(2, 3)))
    )
    a, b = np.random.default_rng(0).random((5, 6)), np.arange(5.0)
    dag, keys = formats.function_to_dag(f, a, b)
    assert formats.detect_format(dag) == "dag"
    formats.validate(dag)
    assert len(formats.convert(dag, "unidag")) == len(dag)
    values = formats.interpret(dag, {}, lambda fn, args: (fn(*args),))
    got = np.concatenate([values[k] for k in keys])
    np.testing.assert_allclose(got, f(a, b)[0])


# -- row chunks: the row work of a batch graph and its sums, one task per chunk -----------


def _logreg_step(dtype):
    x, y = tt.matrix("x", dtype=dtype), tt.vector("y", dtype=dtype)
    w, b = tt.vector("w", dtype=dtype), tt.scalar("b", dtype=dtype)
    p = tt.nnet.sigmoid(tt.dot(x, w) + b)
    cost = tt.nnet.binary_crossentropy(p, y).mean()
    gw, gb = theano_dag.grad(cost, [w, b])
    return [x, y, w, b], [cost, w - 0.5 * gw, b - 0.5 * gb]


def _row_nodes(f):
    return [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, RowChunked)]


@pytest.mark.parametrize("chunks", [-1, 64, 7, 1])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_row_work_and_its_sums_over_rows_are_one_task_per_chunk(dtype, chunks):
    ins, outs = _logreg_step(dtype)
    f = theano_dag.function(ins, outs, mode=_sync(chunks={"x": (chunks, 5), "y": chunks}))
    (node,) = _row_nodes(f)
    # x and y are the batch (w is not); the cost's sum, x.T @ r and sum(r) are partials
    assert [v.name for v in node.inputs if v.name] == ["x", "w", "y"]
    assert node.op.tiled[:2] == (True, False) and node.op.combine == ("sum",) * 3
    n = 200 if chunks != 1 else 30
    xv, yv = _logreg(dtype, n=n)
    wv, bv = np.linspace(-1, 1, 5).astype(dtype), np.asarray(0.1, dtype)
    graph = dask_task_graph(f, xv, yv, wv, bv)
    rows = len(da.core.normalize_chunks((chunks, 5), (n, 5))[0])
    fused = [k for k in graph if isinstance(k, tuple) and re.fullmatch(r"RowChunked-\w+", k[0])]
    assert len(fused) == rows  # one task per row chunk, and
    tasks = [k for k in graph if k != "__outputs__" and not k[0].startswith("array-")]
    assert len(tasks) <= rows + 11 + rows // 16  # a tree of partials and a few small tasks
    ref = theano_dag.function(ins, outs, mode=REF)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for got, want in zip(f(xv, yv, wv, bv), ref(xv, yv, wv, bv)):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    # the mean's 1/n is the whole batch's, not a chunk's
    p = 1 / (1 + np.exp(-(xv.astype(float) @ wv + bv)))
    np.testing.assert_allclose(f(xv, yv, wv, bv)[2], bv - 0.5 * (p - yv).mean(), rtol=tol * 10)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_row_outputs_keep_the_row_chunks_and_other_reductions_combine(dtype):
    # A two-layer forward pass: the softmax rows come back chunked like x; the
    # largest logit (max over rows), h.T @ x and the number of positive rows are partials.
    x = tt.matrix("x", dtype=dtype)
    w1, w2 = tt.matrix("w1", dtype=dtype), tt.matrix("w2", dtype=dtype)
    h = tt.tanh(tt.dot(x, w1))
    z = tt.dot(h, w2)
    outs = [tt.nnet.softmax(z), z.max(), tt.dot(h.T, x), (z > 0).all(axis=1).sum(), z.min(axis=0)]
    f = theano_dag.function([x, w1, w2], outs, mode=_sync(chunks=(6, 2)))
    (node,) = _row_nodes(f)
    assert sorted(c or "rows" for c in node.op.combine) == ["max", "min", "rows", "sum", "sum"]
    rng = np.random.default_rng(1)
    xv, w1v, w2v = (rng.normal(size=s).astype(dtype) for s in [(20, 4), (4, 3), (3, 5)])
    lazy = theano_dag.function(
        [x, w1, w2], outs[0], mode=Mode(linker=DaskLinker(chunks=(6, 2), return_dask=True))
    )
    assert lazy(xv, w1v, w2v).chunks == ((6, 6, 6, 2), (5,))
    ref = theano_dag.function([x, w1, w2], outs, mode=REF)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for got, want in zip(f(xv, w1v, w2v), ref(xv, w1v, w2v)):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_a_row_chunked_node_performs_its_whole_graph_and_pickles():
    # Outside the Dask engine's rule (another engine, a gathered fallback) the node
    # runs its graph once on the whole inputs.
    x, y, w = tt.dmatrix("x"), tt.dvector("y"), tt.dvector("w")
    r = tt.nnet.sigmoid(tt.dot(x, w)) - y
    f = theano_dag.function([x, y, w], [tt.dot(x.T, r), r.sum()], mode="DASK")
    (node,) = _row_nodes(f)
    assert [v.name for v in node.inputs] == ["x", "w", "y"]
    rng = np.random.default_rng(2)
    xv, yv, wv = rng.normal(size=(9, 3)), rng.random(9), rng.normal(size=3)
    rv = 1 / (1 + np.exp(-(xv @ wv))) - yv
    for op in (node.op, pickle.loads(pickle.dumps(node.op))):
        cells = [[None], [None]]
        op.perform(node, [xv, wv, yv], cells)
        np.testing.assert_allclose(cells[0][0], xv.T @ rv, rtol=1e-12)
        np.testing.assert_allclose(cells[1][0], rv.sum(), rtol=1e-12)


def test_no_row_chunks_without_a_product_or_with_the_pass_excluded():
    x = tt.dmatrix("x")
    f = theano_dag.function([x], tt.exp(x).sum(axis=0), mode="DASK")
    assert _row_nodes(f) == []
    ins, outs = _logreg_step("float64")
    g = theano_dag.function(ins, outs, mode=get_mode("DASK").excluding("dask_rows"))
    assert _row_nodes(g) == []
    assert "dask_row_chunks" in [o.name for o in optdb.query(Query(include=["dask"]))]


def test_row_inputs_chunked_apart_are_rechunked_or_refused_naming_the_op():
    ins, outs = _logreg_step("float64")
    xv, yv = _logreg("float64", n=20)
    args = (da.from_array(xv, chunks=(5, 2)), da.from_array(yv, chunks=8), np.ones(5), 0.0)
    want = theano_dag.function(ins, outs, mode=REF)(xv, yv, np.ones(5), 0.0)
    for got, w in zip(theano_dag.function(ins, outs, mode=_sync())(*args), want):
        np.testing.assert_allclose(got, w, rtol=1e-12)
    strict = theano_dag.function(ins, outs, mode=_sync(rechunk=False))
    with pytest.raises(ChunkError) as err:
        strict(*args)
    assert str(err.value).startswith(
        "Dask engine: RowChunked{8 nodes, 2 row inputs, 3 partials} (the row work of Dot, "
    )
    assert str(err.value).endswith(
        ") needs its row input 0 (x) chunked by rows only; got chunks ((5, 5, 5, 5), (2, 2, "
        "1)), expected ((5, 5, 5, 5), (5,)) (or let the engine rechunk: "
        "DaskLinker(rechunk=True))"
    )
    with pytest.raises(ValueError, match=r"its row inputs have \[20, 19\] rows"):
        strict(da.from_array(xv, chunks=(5, -1)), yv[:19], np.ones(5), 0.0)


# -- chunkings an op needs, errors naming the task ---------------------------------------


def _sync(**kw):
    return Mode(linker=DaskLinker(scheduler="sync", **kw))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_runs_chunk_by_chunk_with_its_axis_rechunked_whole(dtype):
    x = tt.matrix("x", dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GatherWarning)  # it has a chunked form now
        f = theano_dag.function([x], tt.nnet.softmax(x), mode=_sync(chunks=(2, 3)))
    v = np.random.default_rng(0).normal(size=(5, 6)).astype(dtype)
    graph = dask_task_graph(f, v)
    tasks = [k for k in graph if isinstance(k, tuple) and k[0].startswith("Softmax")]
    assert len(tasks) == 3  # one per row chunk: axis 1 rechunked to one chunk, rows kept
    e = np.exp(v - v.max(axis=1, keepdims=True))
    np.testing.assert_allclose(f(v), e / e.sum(axis=1, keepdims=True), rtol=1e-5)


def test_a_chunking_an_op_cannot_run_on_is_an_error_naming_the_op_and_the_chunks():
    x = tt.dmatrix("x")
    f = theano_dag.function([x], tt.nnet.softmax(x), mode=_sync(chunks=(2, 3), rechunk=False))
    with pytest.raises(ChunkError) as err:
        f(np.ones((5, 6)))
    assert str(err.value) == (
        "Dask engine: Softmax{axis=-1} needs axis 1 of its input 0 in one chunk; got chunks "
        "((2, 2, 1), (3, 3)), expected ((2, 2, 1), (6,)) (chunk that axis -1, or let the "
        "engine rechunk: DaskLinker(rechunk=True))"
    )
    # the chunking it asks for runs; so do dask inputs chunked so
    np.testing.assert_allclose(f(da.ones((5, 6), chunks=(2, -1))), np.full((5, 6), 1 / 6))
    f2 = theano_dag.function([x], tt.nnet.softmax(x), mode=_sync(chunks=(2, -1), rechunk=False))
    np.testing.assert_allclose(f2(np.ones((5, 6))), np.full((5, 6), 1 / 6))


SOFTMAX_CHUNKS = (
    "Dask engine: Softmax{axis=-1} needs axis 1 of its input 0 in one chunk; got chunks "
    "((2, 2, 1), (3, 3)), expected ((2, 2, 1), (6,)) (chunk that axis -1, or let the "
    "engine rechunk: DaskLinker(rechunk=True))"
)


def test_chunks_known_when_compiling_are_checked_then():
    # An input of static shape with the linker's chunks: compiling raises.
    m = tt.TensorType("float64", shape=(5, 6))("m")
    with pytest.raises(ChunkError) as err:
        theano_dag.function([m], tt.nnet.softmax(m), mode=_sync(chunks=(2, 3), rechunk=False))
    assert str(err.value) == SOFTMAX_CHUNKS
    # A shared variable's dask array: its chunks.
    s = dask_shared(da.ones((5, 6), chunks=(2, 3)), name="s")
    with pytest.raises(ChunkError) as err:
        theano_dag.function([], tt.nnet.softmax(s) * 2, mode=_sync(rechunk=False))
    assert str(err.value) == SOFTMAX_CHUNKS
    # The row inputs of a RowChunked node, the other inputs unknown until the call.
    xs = dask_shared(da.ones((20, 5), chunks=(5, 2)), name="xs")
    w = tt.dvector("w")
    out = tt.dot(xs.T, tt.nnet.sigmoid(tt.dot(xs, w)))
    with pytest.raises(ChunkError, match=r"needs its row input 0 \(xs\) chunked by rows only; "):
        theano_dag.function([w], out, mode=_sync(rechunk=False))
    # Chunks it can run on compile; unknown shapes wait for the call (and rechunk=True
    # rechunks).
    ok = theano_dag.function([m], tt.nnet.softmax(m), mode=_sync(chunks=(2, -1), rechunk=False))
    np.testing.assert_allclose(ok(np.ones((5, 6))), np.full((5, 6), 1 / 6))
    f = theano_dag.function([w], out, mode=_sync())
    np.testing.assert_allclose(f(np.zeros(5)), np.full(5, 10.0))


def test_an_error_in_a_chunk_task_names_its_key_and_op():
    x = tt.dmatrix("x")
    f = theano_dag.function([x], tt.exp(x), mode=_sync(chunks=2))

    bad = one_chunk_flat()
    with pytest.raises(DaskTaskError) as err:
        f(bad)
    assert re.fullmatch(
        r"Dask engine: task \('exp-[0-9a-f]{32}', 1, 0\) \(running Elemwise\{exp,no_inplace\}\) "
        r"failed: TypeError: \('TensorType\(float64, matrix\): wrong number of dimensions: "
        r"expected 2, got 1 with shape \(4,\)\.', 'Container name \"None\"'\)",
        str(err.value),
    ), str(err.value)
    np.testing.assert_allclose(f(np.zeros((4, 4))), np.ones((4, 4)))  # the next call works


def test_an_error_in_a_gathered_task_names_its_key_and_op():
    x = tt.dmatrix("x")
    with pytest.warns(GatherWarning):
        f = theano_dag.function([x], tt.linalg.cholesky(x) * 2, mode=_sync(chunks=2))
    with pytest.raises(DaskTaskError) as err:
        f(-np.eye(3))
    assert re.fullmatch(
        r"Dask engine: task 'Cholesky\{lower=True\}-[0-9a-f]{32}' \(running "
        r"Cholesky\{lower=True\}\) failed: LinAlgError: Matrix is not positive definite",
        str(err.value),
    ), str(err.value)
    np.testing.assert_allclose(f(np.eye(3) * 4), np.eye(3) * 4)


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_an_error_in_a_task_of_dask_arrays_own_names_its_key_the_operation_and_op(scheduler):
    # The second chunk of rows comes back flat: dask.array's tree reduction of the
    # column sums fails joining the chunks' sums.
    x = tt.dmatrix("x")
    f = theano_dag.function([x], x.sum(axis=0), mode=_sync() if scheduler == "sync" else "DASK")

    bad = one_chunk_flat()
    with pytest.raises(DaskTaskError) as err:
        f(bad)
    assert re.fullmatch(
        r"Dask engine: task \('sum-aggregate-[0-9a-f]{32}', 0\) \(dask.array's sum-aggregate "
        r"for Sum\{axis=\(0,\)\}\) failed: ValueError: all the input arrays must have same "
        r"number of dimensions, .*",
        str(err.value),
    ), str(err.value)
    np.testing.assert_allclose(f(np.ones((4, 4))), np.full(4, 4.0))  # the next call works


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_a_failed_task_raises_an_error_of_the_type_it_raised(scheduler):
    # A program catches LinAlgError, AssertionError or ValueError on every engine: the
    # engine's error is a DaskTaskError and of the type the task raised.
    x = tt.dmatrix("x")
    mode = Mode(linker=DaskLinker(scheduler=scheduler, chunks=2))
    with pytest.warns(GatherWarning):
        chol = theano_dag.function([x], tt.linalg.cholesky(x) * 2, mode=mode)
    with pytest.raises(np.linalg.LinAlgError) as err:
        chol(-np.eye(3))
    assert isinstance(err.value, DaskTaskError)
    assert str(err.value).endswith("failed: LinAlgError: Matrix is not positive definite")

    n = tt.lscalar("n")
    checked = assert_op(x, tt.eq(x.shape[0], n)) * 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GatherWarning)
        f = theano_dag.function([x, n], checked, mode=mode)
    np.testing.assert_allclose(f(np.ones((3, 3)), 3), np.full((3, 3), 2.0))
    with pytest.raises(AssertionError):
        f(np.ones((3, 3)), 4)

    s = theano_dag.function([x], x.sum(axis=0), mode=mode)
    with pytest.raises(ValueError) as err:  # a task of dask.array's own
        s(one_chunk_flat())
    assert isinstance(err.value, DaskTaskError) and "sum-aggregate" in str(err.value)


def test_a_task_error_pickles_as_an_error_of_both_types():
    # A distributed worker's error comes back pickled.
    err = task_error("Dask engine: task 'k' (running Op) failed: KeyError: 'a'", KeyError)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and isinstance(back, KeyError)
    assert str(back) == "Dask engine: task 'k' (running Op) failed: KeyError: 'a'"
    plain = pickle.loads(pickle.dumps(DaskTaskError("gone")))
    assert type(plain) is DaskTaskError and str(plain) == "gone"


@pytest.mark.parametrize("chunks", [-1, 2])
def test_an_input_that_the_callers_in_place_ops_destroy_holds_their_value_after_the_call(
    chunks,
):
    # As on the CPU engine, In-place ops written by hand (accept_inplace=True) leave
    # their result in the input's array; the Dask engine computes new chunks, then
    # puts the last op's value there. An output that views that input keeps what it
    # read before.
    x, y = tt.dmatrices("x", "y")
    outs = [inplace.exp_inplace(inplace.add_inplace(x, y)), x[0] * y[1], y * 2]
    f = theano_dag.function(
        [x, y], outs, mode=Mode(linker=DaskLinker(chunks=chunks, **SYNC)), accept_inplace=True
    )
    b = np.arange(6.0).reshape(2, 3) / 10
    for _ in range(2):  # the second call runs the graph reused
        a = np.ones((2, 3))
        got = f(a, b)
        np.testing.assert_allclose(a, np.exp(1 + b))
        np.testing.assert_allclose(got[0], np.exp(1 + b))
        np.testing.assert_allclose(got[1], b[1])
        np.testing.assert_allclose(got[2], b * 2)
    np.testing.assert_allclose(b, np.arange(6.0).reshape(2, 3) / 10)  # not destroyed

    v = tt.bvector("v")
    g = theano_dag.function(
        [v],
        inplace.neg_inplace(v) * 2,
        mode=Mode(linker=DaskLinker(chunks=chunks, **SYNC)),
        accept_inplace=True,
    )
    data = np.array([1, -2, 3], dtype="int8")
    np.testing.assert_array_equal(g(data), [-2, 4, -6])
    np.testing.assert_array_equal(data, [-1, 2, -3])


@pytest.mark.parametrize("chunks", [-1, 2])
def test_scalar_inputs_and_outputs_are_numpy_scalars_as_on_the_cpu_engine(chunks):
    # A graph of ScalarType values (which have an ndim but no shape) failed to compile:
    # the engine took them for arrays.
    xi, yi = ts.int8("xi"), ts.int8("yi")
    mode = Mode(linker=DaskLinker(chunks=chunks, **SYNC))
    f = theano_dag.function([xi, yi], ts.true_div(xi, yi), mode=mode)
    got = f(7, -3)
    assert type(got) is np.float64 and got == 7 / -3

    xf, v = ts.float64("xf"), tt.dvector("v")
    s = tt.scalar_from_tensor(v.sum())
    outs = [ts.exp(s) * xf, tt.tensor_from_scalar(s * xf) * v]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GatherWarning)
        g = theano_dag.function([xf, v], outs, mode=mode)
    ref = theano_dag.function([xf, v], outs, mode=REF)
    for _ in range(2):
        got, want = g(0.5, np.arange(5.0)), ref(0.5, np.arange(5.0))
        assert type(got[0]) is np.float64 and np.isclose(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1])


@pytest.mark.parametrize("chunks", [-1, 2])
def test_random_draws_are_the_cpu_engines_and_a_draw_can_feed_a_scan(chunks):
    # A draw of a size given by an input's shape runs when its inputs are computed;
    # its new generator was made a dask array, and the scan reading the generator
    # got an array of one object.
    def build(mode):
        srng = RandomStream(123)
        x = tt.dmatrix("x")
        a = srng.normal(0, 1, size=x.shape)
        b = srng.binomial(1, tt.nnet.sigmoid(x), size=x.shape)
        z, updates = scan(lambda v: v * 2, non_sequences=b, n_steps=2)
        c = srng.uniform(x, x + 1)
        outs = [a * x, b, z, c, (a + c).sum()]
        return theano_dag.function([x], outs, updates=updates, mode=mode)

    xv = np.random.default_rng(1).uniform(size=(6, 5))
    mode = Mode(linker=DaskLinker(chunks=chunks, **SYNC))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GatherWarning)
        f, ref = build(mode), build("FAST_RUN")
    draws = []
    for _ in range(2):  # the generators' states advance alike
        got, want = f(xv), ref(xv)
        for g, w in zip(got, want):
            assert np.asarray(g).dtype == np.asarray(w).dtype
            np.testing.assert_allclose(g, w)
        np.testing.assert_array_equal(got[2], [got[1] * 2] * 2)
        draws.append(got[0])
    assert not np.allclose(draws[0], draws[1])


@pytest.mark.parametrize("chunk_size", [None, "64B"])
def test_empty_inputs_are_one_chunk(chunk_size):
    # dask's "auto" chunks divide by the other axes' size: an empty input of a long
    # other axis (or any empty input, with dask's array.chunk-size small) raised
    # ZeroDivisionError before anything ran.
    x, y = tt.dmatrices("x", "y")
    outs = [tt.dot(x, y), (x * 2).sum(axis=1), x.T.shape]
    f = theano_dag.function([x, y], outs, mode=Mode(linker=DaskLinker(**SYNC)))
    ref = theano_dag.function([x, y], outs, mode=REF)
    config = {} if chunk_size is None else {"array.chunk-size": chunk_size}
    cases = [((0, 20_000_000), (20_000_000, 0)), ((5, 0), (0, 2)), ((0, 9), (9, 3))]
    with dask.config.set(config):
        for xs, ys in cases:
            a, b = np.ones(xs), np.ones(ys)
            for g, w in zip(f(a, b), ref(a, b)):
                assert g.shape == w.shape and g.dtype == w.dtype
                np.testing.assert_array_equal(g, w)
        s = dask_shared(np.zeros((0, 20_000_000)), name="s")
        np.testing.assert_array_equal(np.asarray(s.get_value()), np.zeros((0, 20_000_000)))


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_max_and_min_of_empty_values_are_numpys_or_raise_as_numpy(chunking, dtype):
    # dask.array's max over axis 0 of a (0, 3) array gave an empty array (numpy raises:
    # the 3 maxima do not exist), and over axis 1 raised (numpy's is empty).
    x = tt.matrix("x", dtype=dtype)
    mode = Mode(linker=DaskLinker(chunks=CHUNKINGS[chunking], **SYNC))
    cases = [
        (tt.max(x, axis=0), lambda v: np.max(v, axis=0)),
        (tt.max(x, axis=1), lambda v: np.max(v, axis=1)),
        (tt.min(x, axis=-1, keepdims=True), lambda v: np.min(v, axis=-1, keepdims=True)),
        (tt.min(x, axis=0) * 2, lambda v: np.min(v, axis=0)),
        (tt.max(x), np.max),
    ]
    for out, numpys in cases:
        f = theano_dag.function([x], out, mode=mode)
        ref = theano_dag.function([x], out, mode=REF)
        for shape in [(0, 3), (0, 1), (3, 0), (1, 0), (0, 0), (2, 3)]:
            v = (np.arange(np.prod(shape)).reshape(shape) % 3).astype(dtype)
            try:
                numpys(v)
            except ValueError as e:
                with pytest.raises(ValueError, match=re.escape(str(e))):
                    f(v)
                continue
            got, want = np.asarray(f(v)), ref(v)
            assert got.shape == want.shape and got.dtype == want.dtype, (out, shape)
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
def test_a_join_with_an_empty_part_then_an_elementwise_op_keeps_numpys_shape(chunking):
    # roll along a length-1 axis joins x[:, 0:] and x[:, 0:0]: chunks (1, 0) on axis 1,
    # which dask.array's unify_chunks gave back as one chunk while reporting two, so
    # x - y of (0, 1) operands was (0, 2).
    x = tt.TensorType("int32", shape=(None, 1))("x")
    y = tt.TensorType("float32", shape=(None, 1))("y")
    r = tt.roll(x, -1, axis=1)
    outs = [r, r - y, tt.join(1, x, x[:, :0]) * 2, tt.arctan2(r, np.int32(-5)) - y]
    mode = Mode(linker=DaskLinker(chunks=CHUNKINGS[chunking], **SYNC))
    f = theano_dag.function([x, y], outs, mode=mode)
    ref = theano_dag.function([x, y], outs, mode=REF)
    for n in (0, 1, 3):
        xv, yv = np.arange(n, dtype="int32").reshape(n, 1), np.ones((n, 1), "float32")
        for got, want in zip(f(xv, yv), ref(xv, yv)):
            got = np.asarray(got)
            assert got.shape == want.shape and got.dtype == want.dtype, (n, got.shape)
            # (arctan2's last bit: the chunks' C kernels call libmvec's, numpy libm's)
            np.testing.assert_allclose(got, want, rtol=4 * np.finfo("float64").eps)


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
def test_a_join_of_parts_whose_other_lengths_differ_raises(chunking):
    # dask.array's concatenate left out a part of no values whatever its other
    # lengths: (0, 2) and (3, 2) joined along axis 1 gave the (3, 2) part.
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    outs = [tt.concatenate([a, b], axis=1), tt.stack([a, b], axis=-1)]
    mode = Mode(linker=DaskLinker(chunks=CHUNKINGS[chunking], **SYNC))
    f = theano_dag.function([a, b], outs, mode=mode)
    ref = theano_dag.function([a, b], outs, mode=REF)
    for sa, sb in [((0, 2), (3, 2)), ((3, 2), (0, 2)), ((2, 2), (3, 2))]:
        va, vb = np.ones(sa), np.zeros(sb)
        with pytest.raises(ValueError) as want:
            ref(va, vb)
        with pytest.raises(ValueError, match=re.escape(f"cannot join shapes {[sa, sb]}")):
            f(va, vb)
        assert "cannot join shapes" in str(want.value)
    for sa, sb in [((3, 2), (3, 2)), ((0, 2), (0, 2)), ((3, 0), (3, 0))]:
        va, vb = np.ones(sa), np.zeros(sb)
        for got, r in zip(f(va, vb), ref(va, vb)):
            assert got.shape == r.shape
            np.testing.assert_array_equal(got, r)


@pytest.mark.parametrize("chunks", [-1, 2])
def test_outputs_of_one_value_are_distinct_arrays(chunks):
    # function([x], [x, x]) copies x twice; Dask computes the two equal copies once,
    # and a one-chunk result is the chunk itself: the outputs were one array.
    x = tt.scalar(dtype="uint8")
    v = tt.vector()
    mode = Mode(linker=DaskLinker(chunks=chunks, **SYNC))
    f = theano_dag.function([x, v], [x, tt.second(x, x), v, v, v + 1, v + 1], mode=mode)
    outs = f(np.uint8(3), np.arange(5.0))
    for j in range(len(outs)):
        for i in range(j):
            assert not np.shares_memory(outs[i], outs[j]), (i, j)
    outs[0][...] = 7
    outs[2][0] = -1.0
    assert outs[1] == 3 and outs[3][0] == 0.0
    np.testing.assert_array_equal(outs[4], np.arange(5.0) + 1)


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
def test_reshape_follows_numpys_rules_and_raises_where_perform_raises(chunking):
    # A shape with two -1 gave a (12, 1) array: dask read the second -1 as a length of
    # its own. Every shape is resolved as numpy does (one negative entry takes what the
    # others leave), and refused with perform's ValueError.
    a, shp = tt.dmatrix("a"), tt.lvector("shp")
    mode = Mode(linker=DaskLinker(chunks=CHUNKINGS[chunking], **SYNC))
    f = theano_dag.function([a, shp], a.reshape(shp, ndim=2), mode=mode)
    ref = theano_dag.function([a, shp], a.reshape(shp, ndim=2), mode=REF)
    av = np.arange(12.0).reshape(3, 4)
    for good in ([-1, 6], [2, -2], [12, 1], [6, -1]):
        np.testing.assert_array_equal(np.asarray(f(av, good)), ref(av, good))
    for bad, why in (
        ([-1, -1], "can only specify one unknown dimension"),
        ([7, 5], "cannot reshape array of size 12"),
        ([-1, 5], "cannot reshape array of size 12"),
        ([0, -1], "cannot reshape array of size 12"),
    ):
        with pytest.raises(ValueError) as want:
            ref(av, bad)
        with pytest.raises(ValueError, match=re.escape(why)) as got:
            f(av, bad)
        assert str(want.value).startswith("Reshape{2}: cannot reshape an array of shape (3, 4)")
        assert str(got.value).startswith("Reshape{2}: cannot reshape an array of shape (3, 4)")


def test_compiled_chunk_kernels_go_with_their_function():
    # Each chunk kernel's compiled function (with its memory plan's blocks) stayed in a
    # per-thread cache for good: a session compiling many functions grew by gigabytes.
    x = tt.dmatrix("x")
    gc.collect()
    before = set(translate._OWNED)
    for k in range(3):
        f = theano_dag.function([x], tt.exp(x * (k + 1)) + 1, mode=Mode(linker="dask"))
        np.testing.assert_allclose(f(np.ones((4, 3))), np.exp(np.ones((4, 3)) * (k + 1)) + 1)
        assert set(translate._OWNED) - before  # compiled, and kept while f lives
        del f
        gc.collect()
        assert set(translate._OWNED) <= before


GC_AFTER_SLICES = """
import gc, sys
import numpy as np
import theano_dag, theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
assert "dask.array" not in sys.modules
x = tt.dmatrix("x")
f = theano_dag.function([x], (x[1:, ::2] * 2).sum(), mode=Mode(linker="dask"))
assert "dask.array" in sys.modules  # imported by the compile
print(float(f(np.arange(12.0).reshape(3, 4))), gc.isenabled())
"""


def test_a_compile_that_imports_dask_leaves_the_garbage_collector_on():
    # dask.array records at import whether the collector is on, and turns it off for
    # each slice, back on only if it was: imported while ``function`` paused it, the
    # first call's slices left it off for good (the process grew by every cycle made).
    proc = subprocess.run(
        [sys.executable, "-c", GC_AFTER_SLICES], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["56.0", "True"]


def test_typed_lists_in_and_out_are_lists_of_arrays():
    # A constant list output came back as one 2-d array (the local outputs' copy made
    # every value an array), and a ragged list input failed (numpy's size of it).
    m = tt.ones((1,), dtype="int8")
    f = theano_dag.function([], tl.make_list([m, m]), mode=Mode(linker="dask"))
    got = f()
    assert type(got) is list and len(got) == 2
    for a in got:
        assert a.dtype == np.int8 and a.shape == (1,) and a[0] == 1
    assert f()[0] is not got[0]  # each call's list is its own
    L, x = tl.TypedListType(tt.dvector)("L"), tt.dvector("x")
    outs = [tl.length(L), L[1] * 2, tl.append(L, x), (L[0][:50] + L[2]).sum()]
    for n in (3, 300):  # under and over the bound of values computed locally
        vals = [np.arange(100.0), np.ones(n), np.linspace(0, 1, 50)]
        want = theano_dag.function([L, x], outs, mode=Mode(linker="py"))(vals, np.ones(2))
        got = theano_dag.function([L, x], outs, mode=Mode(linker="dask"))(vals, np.ones(2))
        for w, g in zip(want, got):
            assert type(g) is type(w)
            if isinstance(w, list):
                assert len(g) == len(w) and all(np.array_equal(a, b) for a, b in zip(g, w))
            else:
                np.testing.assert_array_equal(g, w)


def test_an_older_dask_is_refused_with_the_version_the_engine_needs(monkeypatch):
    # dask 2024.12 has a task spec but no ContextAwareThreadPoolExecutor: the engine
    # failed at the first call with an AttributeError from its thread pool.
    monkeypatch.setattr(dask, "__version__", "2024.12.1")
    x = tt.dvector("x")
    want = (
        "the Dask engine needs dask >= 2026.3 (dask 2024.12.1 is installed): "
        "pip install -U 'theano_dag[dask]'"
    )
    with pytest.raises(ImportError, match=re.escape(want)):
        theano_dag.function([x], x * 2, mode=Mode(linker="dask"))
    monkeypatch.setattr(dask, "__version__", "2026.3.0+4.g1234abc")
    f = theano_dag.function([x], x * 2, mode=Mode(linker="dask"))
    np.testing.assert_array_equal(f(np.arange(3.0)), [0.0, 2.0, 4.0])


def test_unpickled_chunk_kernels_keep_at_most_the_bound(monkeypatch):
    # A worker's kernels arrive pickled for each task and die with it: their compiled
    # functions stay for the kernel's next task, the least recently used dropped first.
    # The kernels made here are never dropped while they live (a graph of many kernels
    # would compile them again at every call).
    monkeypatch.setattr(translate, "_VISITING_MAX", 2)
    x = tt.dvector("x")
    made = [ChunkKernel(tt.exp(x).owner) for _ in range(3)]
    visiting = [pickle.loads(pickle.dumps(kern)) for kern in made]
    for kern in made + visiting:
        np.testing.assert_allclose(kern(np.ones(2)), np.exp(np.ones(2)))
    owned = [key[0] for key in translate._OWNED]
    assert all(kern.token in owned for kern in made)
    kept = [key[0] for key in translate._VISITING]
    assert kept == [visiting[1].token, visiting[2].token]
