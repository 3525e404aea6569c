"""The Dask engine's linear fusion: a fused chain keeps its last key, so two chains of
long keys never get one name (dask's own renamer cuts a long name to 115 characters
and four hex digits of a hash), and every graph the engine computes goes through it."""

from __future__ import annotations

import uuid
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
import dask._task_spec  # noqa: E402
import dask.array.optimization  # noqa: E402
from dask._task_spec import DataNode, Task, TaskRef  # noqa: E402
from dask.local import get_sync  # noqa: E402

import theano_dag  # noqa: E402
import theano_dag.tensor as tt  # noqa: E402
from theano_dag.compile.mode import Mode  # noqa: E402
from theano_dag.engines.dask import DaskLinker, GatherWarning  # noqa: E402
from theano_dag.engines.dask.fusion import fuse_linear  # noqa: E402

# Names as long as the engine's elementwise keys: an op's name, then a token.
STEPS = ["Composite{add,mul,exp,log,sub,neg,sqr}", "Composite{mul,add,exp,log,sub,neg,sqrt}"]


def _chains(n):
    """``n`` chains ``source -> step -> step -> out`` of long keys (block 0 of each)
    and the keys of their ends; chain ``i`` computes ``i + 3``."""
    graph, ends = {}, []
    for i in range(n):
        keys = [(f"{name}-{uuid.uuid4().hex}", 0) for name in ["source", *STEPS, STEPS[0]]]
        graph[keys[0]] = DataNode(keys[0], i)
        for prev, key in zip(keys, keys[1:]):
            graph[key] = Task(key, int.__add__, TaskRef(prev), 1)
        ends.append(keys[-1])
    return graph, ends


def test_fused_chains_of_long_keys_keep_their_own_keys_and_values():
    # 2000 chains: with dask's renamer about a tenth of them got another chain's task.
    graph, ends = _chains(2000)
    fused = fuse_linear(graph, ends)
    assert sorted(fused) == sorted(ends)  # one task per chain, under its last key
    assert list(get_sync(fused, ends)) == [i + 3 for i in range(2000)]


def test_a_task_read_twice_or_wanted_is_not_fused_into_its_reader():
    graph = {
        "a": DataNode("a", 2),
        "b": Task("b", abs, TaskRef("a")),
        "c": Task("c", int.__neg__, TaskRef("b")),
        "d": Task("d", int.__sub__, TaskRef("b"), TaskRef("c")),
        "e": Task("e", int.__mul__, TaskRef("d"), 10),
        "f": Task("f", int.__neg__, TaskRef("e")),
    }
    fused = fuse_linear(graph, ["f", "e"])
    # a goes into b, d into e; b has two readers, d reads two tasks, e is wanted
    assert sorted(fused) == ["b", "c", "e", "f"]
    assert get_sync(fused, ["f", "e"]) == get_sync(graph, ["f", "e"]) == (-40, 40)


def _refuse(*args, **kwargs):
    raise AssertionError("dask's linear fusion ran")


@pytest.mark.parametrize("how", ["plan", "rebuilt", "reads values"])
def test_the_engine_never_runs_dasks_linear_fusion(monkeypatch, how):
    monkeypatch.setattr(dask.array.optimization, "fuse_linear_task_spec", _refuse)
    monkeypatch.setattr(dask._task_spec, "fuse_linear_task_spec", _refuse)
    x = tt.dvector("x")
    y = (tt.exp(x) * 2 + 1).sum() + tt.sort(x)
    if how == "reads values":
        y = tt.extra_ops.unique(y) * 3
    linker = DaskLinker(chunks=2, scheduler="threads", reuse_graph=how == "plan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GatherWarning)
        f = theano_dag.function([x], y, mode=Mode(linker=linker))
        ref = theano_dag.function([x], y, mode=Mode(linker="py", optimizer=None))
    rng = np.random.default_rng(0)
    for _ in range(2):
        v = rng.random(7)
        np.testing.assert_allclose(f(v), ref(v), rtol=1e-12)
