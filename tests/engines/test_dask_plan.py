"""The Dask engine's graph of a call, built once per chunk structure of the inputs and
reused: when it is built again, the values and updates of the calls that reuse it,
results never shared between calls, errors named by the key a call ran."""

from __future__ import annotations

import re
import uuid
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")

import theano_dag  # noqa: E402
import theano_dag.tensor as tt  # noqa: E402
from theano_dag.compile.mode import Mode  # noqa: E402
from theano_dag.engines.dask import (  # noqa: E402
    DaskLinker,
    DaskTaskError,
    GatherWarning,
    dask_shared,
    dask_task_graph,
)
from theano_dag.engines.dask import linker as dask_linker  # noqa: E402


@pytest.fixture
def builds(monkeypatch):
    """The number of times a call's graph was built (``translate.build`` by the linker)."""
    calls = []
    real = dask_linker.build

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(dask_linker, "build", counted)
    return calls


def _mode(**kw):
    kw.setdefault("scheduler", "sync")
    return Mode(linker=DaskLinker(**kw))


def one_layer(blocks, chunks):
    """A dask array of one graph layer (as a persisted one is) of ``chunks``, from
    ``{block index: ndarray}`` (a block may lie about its shape)."""
    name = f"given-{uuid.uuid4().hex}"
    dsk = {(name, *k): v for k, v in blocks.items()}
    return da.Array(dsk, name, chunks, dtype="float64")


def test_the_graph_is_built_once_per_chunk_structure(builds):
    x = tt.dvector("x")
    f = theano_dag.function([x], (tt.exp(x) * 2).sum(), mode=_mode(chunks=4))
    rng = np.random.default_rng(0)
    for _ in range(3):
        a = rng.random(12)
        np.testing.assert_allclose(f(a), (np.exp(a) * 2).sum(), rtol=1e-12)
    assert len(builds) == 1
    b = rng.random(13)  # another shape: other chunks
    np.testing.assert_allclose(f(b), (np.exp(b) * 2).sum(), rtol=1e-12)
    assert len(builds) == 2
    f(rng.random(12))
    assert len(builds) == 2  # the first structure's graph is still kept
    # dask inputs: by their chunks
    for chunks, want in [(4, 3), (6, 4), (6, 4), (4, 4)]:
        a = rng.random(12)
        np.testing.assert_allclose(
            f(da.from_array(a, chunks=chunks)), (np.exp(a) * 2).sum(), rtol=1e-12
        )
        assert len(builds) == want
    f(rng.random(12).astype("float32"))  # cast to the input's dtype first: same structure
    assert len(builds) == 4


def test_without_reuse_the_graph_is_built_at_every_call(builds):
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.exp(x), mode=_mode(chunks=4, reuse_graph=False))
    for k in range(3):
        np.testing.assert_allclose(f(np.full(8, float(k))), np.exp(np.full(8, float(k))))
    assert len(builds) == 3


def test_a_graph_whose_build_reads_input_values_is_built_at_every_call(builds):
    # unique's output length depends on the values: its input is computed while the
    # graph is built, so the graph is not reused.
    x = tt.dvector("x")
    with pytest.warns(GatherWarning):
        f = theano_dag.function([x], tt.extra_ops.unique(x) * 2, mode=_mode(chunks=2))
    rng = np.random.default_rng(1)
    for _ in range(3):
        v = rng.random(5)
        np.testing.assert_array_equal(f(v), np.unique(v) * 2)
    assert len(builds) == 3 + 1  # one more: the first call's try with placeholders
    assert list(f.fn.plans.values()) == [None]


def test_a_graph_with_a_gathered_op_of_known_output_shape_is_reused(builds):
    # sort runs gathered, in one task over its input's one chunk: its output's shape is
    # known before it runs, and building the graph reads no value.
    x = tt.dvector("x")
    with pytest.warns(GatherWarning):
        f = theano_dag.function([x], tt.sort(x) * 2, mode=_mode(chunks=2))
    rng = np.random.default_rng(1)
    for _ in range(3):
        v = rng.random(5)
        np.testing.assert_array_equal(f(v), np.sort(v) * 2)
    assert len(builds) == 1
    assert [p is not None for p in f.fn.plans.values()] == [True]


def test_a_call_s_results_are_never_overwritten_by_a_later_call():
    x = tt.dvector("x")
    f = theano_dag.function([x], [tt.exp(x), x.shape * 2], mode=_mode(chunks=2))
    a, b = np.arange(6.0), np.ones(6)
    first = f(a)
    second = f(b)
    assert first[0] is not second[0] and first[1] is not second[1]
    np.testing.assert_allclose(first[0], np.exp(a))
    np.testing.assert_allclose(second[0], np.exp(b))
    first[1][0] = 99  # a local output: a copy per call
    np.testing.assert_array_equal(f(a)[1], [12])


def test_returned_dask_arrays_of_two_calls_are_their_own_values():
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.exp(x) + 1, mode=_mode(chunks=2, return_dask=True))
    a, b = np.arange(6.0), np.ones(6)
    first, second = f(a), f(b)
    assert not set(first.__dask_graph__()) & {
        k for k in second.__dask_graph__() if k[0] == second.name
    }
    assert first.name != second.name
    np.testing.assert_allclose(first.compute(), np.exp(a) + 1)
    np.testing.assert_allclose(second.compute(), np.exp(b) + 1)


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_updates_of_dask_shared_variables_persist_across_reused_graphs(builds, scheduler):
    w = dask_shared(np.zeros(8), name="w")
    x = tt.dvector("x")
    f = theano_dag.function(
        [x], (x * w).sum(), updates=[(w, w * 0.5 + x)], mode=_mode(chunks=4, scheduler=scheduler)
    )
    rng = np.random.default_rng(2)
    w_np = np.zeros(8)
    for _ in range(5):
        a = rng.random(8)
        np.testing.assert_allclose(f(a), (a * w_np).sum(), rtol=1e-12)
        w_np = w_np * 0.5 + a
        assert isinstance(w.get_value(return_internal_type=True), da.Array)
    np.testing.assert_allclose(w.get_value(), w_np, rtol=1e-12)
    # two structures: w's first value in one chunk, then the updates in x's chunks
    assert len(builds) == 2


def test_updates_of_numpy_shared_variables_across_reused_graphs(builds):
    w = theano_dag.shared(np.ones(4), name="w")
    x = tt.dvector("x")
    f = theano_dag.function([x], (x * w).sum(), updates=[(w, w * 2)], mode=_mode(chunks=2))
    for k in range(4):
        assert f(np.arange(4.0)) == 6.0 * 2**k
        np.testing.assert_array_equal(w.get_value(), np.full(4, 2.0 ** (k + 1)))
    assert len(builds) == 1


def test_a_sum_over_every_axis_adds_the_chunks_partials_in_one_task():
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.tanh(x).sum(), mode=_mode(chunks=5))
    a = np.random.default_rng(3).standard_normal(100)
    graph = dask_task_graph(f, a)
    (out,) = graph.pop("__outputs__")
    names = [k[0] if isinstance(k, tuple) else k for k in graph]
    assert sum(n.startswith("sum-aggregate") for n in names) == 1
    assert not any(n.startswith("sum-partial") for n in names)
    # the input's 20 chunks and 20 tasks of the fused kernel and its chunk's sum
    assert len(graph) == 20 + 20 + 1
    np.testing.assert_allclose(f(a), np.tanh(a).sum(), rtol=1e-12)


def test_an_error_in_a_reused_graph_names_the_key_of_the_call():
    x = tt.dmatrix("x")
    f = theano_dag.function([x], tt.exp(x), mode=_mode(chunks=2))
    good = {(i, j): np.zeros((2, 2)) for i in range(2) for j in range(2)}
    np.testing.assert_allclose(f(one_layer(good, ((2, 2), (2, 2)))), np.ones((4, 4)))
    bad = dict(good)
    bad[(1, 0)] = np.zeros(4)  # the chunk comes back flat
    with pytest.raises(DaskTaskError) as err:
        f(one_layer(bad, ((2, 2), (2, 2))))
    m = re.fullmatch(
        r"Dask engine: task \('(exp-[0-9a-f]{32})', 1, 0\) \(running Elemwise\{exp,no_inplace\}\) "
        r"failed: TypeError: .*wrong number of dimensions: expected 2, got 1 with shape \(4,\).*",
        str(err.value),
    )
    assert m, str(err.value)
    assert m.group(1) in f.fn.renamed.values()  # this call's key, not the one built
    assert len(f.fn.plans) == 1 and None not in f.fn.plans.values()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(f(one_layer(good, ((2, 2), (2, 2)))), np.ones((4, 4)))


def test_inputs_of_unknown_chunks_or_several_layers_are_built_at_every_call(builds):
    x = tt.dvector("x")
    f = theano_dag.function([x], (x * 3).sum(), mode=_mode(chunks=4))
    a = np.arange(12.0)
    unknown = da.from_array(a, chunks=4)
    unknown = unknown[unknown >= 0]  # chunks known only once computed
    lazy = da.from_array(a, chunks=4) + 0  # a graph of two layers
    for _ in range(2):
        assert f(unknown) == 198.0
        assert f(lazy) == 198.0
    assert len(builds) == 4
    assert not f.fn.plans
