"""theano_dag.graph.sched: partial-order sorts and linker schedules."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.engines.basic import PerformLinker
from theano_dag.graph.basic import io_toposort
from theano_dag.graph.sched import (
    _toposort,
    key_to_cmp,
    make_dependence_cmp,
    make_depends,
    posort,
    reverse_dict,
    sort_apply_nodes,
    sort_schedule_fn,
)
from theano_dag.graph.utils import cmp


def test_toposort_honours_edges_and_finds_cycles():
    edges = {1: {4, 6, 7}, 2: {4, 6, 7}, 3: {5, 7}, 4: {6, 7}, 5: {7}}
    order = _toposort(edges)
    assert sorted(order) == [1, 2, 3, 4, 5, 6, 7]
    pos = {n: k for k, n in enumerate(order)}
    assert all(pos[a] < pos[b] for a, bs in edges.items() for b in bs)
    with pytest.raises(ValueError, match="Input has cycles"):
        _toposort({1: {2}, 2: {1}})


def test_posort_priorities():
    nums = list(range(1, 20))
    by_last_digit = key_to_cmp(lambda a: a % 10)
    by_value = key_to_cmp(lambda a: a)
    out = posort(nums, by_last_digit, by_value)
    assert [a % 10 for a in out] == sorted(a % 10 for a in nums)
    # Within one last digit, the second comparison decides.
    assert out.index(1) < out.index(11) and out.index(9) < out.index(19)
    assert posort("asdfghjkl", cmp) == list("adfghjkls")


def test_reverse_dict():
    assert reverse_dict({"a": (1, 2), "b": (2, 3), "c": ()}) == {
        1: ("a",),
        2: ("a", "b"),
        3: ("b",),
    }


def test_dependence_and_sorted_nodes():
    x = tt.dmatrix("x")
    y = tt.dot(x * 2, x + 1)
    nodes = io_toposort([x], [y])
    dependence = make_dependence_cmp()
    depends = make_depends()
    assert all(dependence(a, b) <= 0 for a, b in zip(nodes[:-1], nodes[1:]))
    assert depends((y.owner, nodes[0])) and not depends((nodes[0], y.owner))
    by_str = sort_apply_nodes([x], [y], [key_to_cmp(str)])
    assert [str(n) for n in by_str] == sorted(str(n) for n in nodes)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_schedule_orders_independent_nodes_by_name(dtype):
    x = tt.vector("x", dtype=dtype)
    out = tt.exp(x) + tt.sin(x) * tt.cos(x)
    linker = PerformLinker(schedule=sort_schedule_fn(key_to_cmp(str)))
    f = theano_dag.function([x], out, mode=theano_dag.Mode(optimizer=None, linker=linker))
    v = np.linspace(0, 1, 5).astype(dtype)
    np.testing.assert_allclose(f(v), np.exp(v) + np.sin(v) * np.cos(v), rtol=1e-6)
    order = f.maker.linker.make_all()[-1]
    depends = make_depends()
    for a, b in zip(order[:-1], order[1:]):
        assert depends((b, a)) or str(a) <= str(b)
