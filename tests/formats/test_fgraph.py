"""FunctionGraph <-> the dict formats: exact round trips in structure and in values."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from random_graphs import random_args, tensor_graphs

from theano_dag import function
from theano_dag import tensor as tt
from theano_dag.formats import (
    FORMATS,
    GraphFormatError,
    convert,
    dag_jobs,
    detect_format,
    fgraph_to_tuple_dag,
    graph_inputs,
    index,
    interpret,
    to_dot,
    to_networkx,
    tuple_dag_to_fgraph,
)
from theano_dag.graph.basic import Constant, equal_computations, is_same_graph
from theano_dag.graph.fg import FunctionGraph
from theano_dag.tensor.contractions import einsum
from theano_dag.tensor.nnet import softmax

rng = np.random.default_rng(1)


def round_trip(fg, fmt):
    """FunctionGraph -> ``fmt`` -> FunctionGraph, through convert()."""
    _, inputs, outputs = fgraph_to_tuple_dag(fg)
    graph = convert(fg, to=fmt)
    options = {"inputs": inputs, "outputs": outputs}
    if fmt == "unidag":
        options["jobs"] = dag_jobs(convert(fg, to="dag"))
    return convert(graph, to="fgraph", **options)


def values(fg, args):
    return function(fg.inputs, fg.outputs, on_unused_input="ignore")(*args)


def assert_same(fg, fg2, args):
    assert fg2.inputs == fg.inputs
    assert equal_computations(fg.outputs, fg2.outputs)
    for out, out2 in zip(fg.outputs, fg2.outputs):
        assert is_same_graph(out, out2)
    for a, b in zip(values(fg, args), values(fg2, args)):
        np.testing.assert_array_equal(a, b)


def small_graph():
    x, v = tt.dmatrix("x"), tt.dvector("v")
    s = tt.exp(x).sum(axis=1)
    outs = [s + v * 2, x[1:, 0], tt.dot(x, v), s]  # s is both an output and used
    return FunctionGraph([x, v], outs, clone=False), [rng.random((3, 3)), rng.random(3)]


def test_fgraph_to_tuple_dag_entries():
    fg, _ = small_graph()
    tdag, inputs, outputs = fgraph_to_tuple_dag(fg)
    assert inputs == tuple(fg.inputs) and outputs == tuple(fg.outputs)
    nodes = fg.toposort()
    assert list(tdag) == [tuple(n.outputs) for n in nodes]
    assert [e["fn"] for e in tdag.values()] == [n.op for n in nodes]
    assert [e["args"] for e in tdag.values()] == [tuple(n.inputs) for n in nodes]
    free = graph_inputs(tdag)
    assert set(free) - set(inputs) == {
        a for n in nodes for a in n.inputs if isinstance(a, Constant)
    }
    assert detect_format(fg) == "fgraph"


@pytest.mark.parametrize("fmt", FORMATS)
def test_hand_made_round_trips(fmt):
    fg, args = small_graph()
    assert_same(fg, round_trip(fg, fmt), args)


def test_direct_round_trip_and_names():
    fg, args = small_graph()
    fg2 = tuple_dag_to_fgraph(*fgraph_to_tuple_dag(fg))
    assert_same(fg, fg2, args)
    assert [n.op for n in fg2.toposort()] == [n.op for n in fg.toposort()]
    assert fg2.outputs[0] is not fg.outputs[0]  # rebuilt with make_node, not shared


def test_outputs_that_are_inputs_constants_or_repeated():
    x = tt.dvector("x")
    c = tt.constant(np.array([1.0, 2.0, 3.0]))
    y = tt.exp(x)
    fg = FunctionGraph([x], [x, c, y, y], clone=False)
    for fmt in FORMATS:
        fg2 = round_trip(fg, fmt)
        assert fg2.outputs[0] is x and fg2.outputs[1] is c
        assert fg2.outputs[2] is fg2.outputs[3]
        assert_same(fg, fg2, [np.arange(3.0)])


def test_multi_output_node_and_index_dag():
    x = tt.dmatrix("x")
    a, b = softmax(x), tt.max(x, axis=0)
    out = einsum("ij,j->i", a, b)
    split = tt.split(x, [1, 2], 2, axis=0)  # one node, two outputs
    fg = FunctionGraph([x], [out, split[1], split[0]], clone=False)
    idag = convert(fg, to="index_dag")
    split_key = tuple(split[0].owner.outputs)
    assert idag[split[1]] == {"fn": index, "args": (split_key, 1)}
    assert_same(fg, round_trip(fg, "index_dag"), [rng.random((3, 3))])


def test_constants_must_be_given_to_interpret():
    fg, args = small_graph()
    tdag, inputs, outputs = fgraph_to_tuple_dag(fg)
    consts = [a for a in graph_inputs(tdag) if isinstance(a, Constant)]
    with pytest.raises(GraphFormatError, match="has no value: put the constant in env"):
        interpret(tdag, dict(zip(inputs, args)), lambda fn, xs: ())
    env = dict(zip(inputs, args)) | {c: c.data for c in consts}

    def run(op, xs):
        node = op.make_node(*[tt.as_tensor_variable(v) for v in xs])
        storage = [[None] for _ in node.outputs]
        op.perform(node, xs, storage)
        return [s[0] for s in storage]

    got = interpret(tdag, env, run)
    for out, want in zip(outputs, values(fg, args)):
        np.testing.assert_allclose(got[out], want)


def test_errors():
    fg, _ = small_graph()
    tdag, inputs, outputs = fgraph_to_tuple_dag(fg)
    with pytest.raises(TypeError, match="needs a FunctionGraph, got dict"):
        fgraph_to_tuple_dag(tdag)
    with pytest.raises(TypeError, match="input 0 is 'x'; tuple_dag_to_fgraph needs"):
        tuple_dag_to_fgraph(tdag, ("x",), outputs)
    with pytest.raises(GraphFormatError, match="is defined by no entry and is not a declared"):
        tuple_dag_to_fgraph(tdag, inputs[:1], outputs)
    with pytest.raises(TypeError, match="has fn 'neg', which is not an Op"):
        tuple_dag_to_fgraph({(tt.dscalar(),): {"fn": "neg", "args": inputs[:1]}}, inputs, ())
    x = inputs[0]
    two = {(tt.dmatrix("p"), tt.dmatrix("q")): {"fn": tt.exp(x).owner.op, "args": (x,)}}
    with pytest.raises(GraphFormatError, match="names 2 outputs, but Elemwise{exp,no_inplace}"):
        tuple_dag_to_fgraph(two, (x,), ())


def test_plain_values_become_constants_and_inputs_are_inferred():
    x = tt.dvector("x")
    add = (x + x).owner.op
    y = tt.dvector("y")
    tdag = {(y,): {"fn": add, "args": (x, 2.0)}}
    fg = convert(tdag, to="fgraph")
    assert fg.inputs == [x]
    np.testing.assert_array_equal(values(fg, [np.array([1.0])])[0], [3.0])


def test_dot_and_networkx_of_a_fgraph():
    fg, _ = small_graph()
    g = to_networkx(fg)
    jobs = [n for n, a in g.nodes(data=True) if a["kind"] == "job"]
    assert len(jobs) == len(fg.apply_nodes)
    x = fg.inputs[0]
    assert g.nodes[x]["kind"] == "input"
    dot = to_dot(fg)
    assert dot.count("shape=box") == len(fg.apply_nodes)
    assert '[label="Elemwise{exp,no_inplace}", shape=box]' in dot


# -- random tensor graphs ------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(tensor_graphs(), st.sampled_from(FORMATS))
def test_random_round_trips(fg, fmt):
    args = random_args(rng)
    fg2 = round_trip(fg, fmt)
    assert_same(fg, fg2, args)
    # and back again: the second trip gives the same dict
    tdag, _, _ = fgraph_to_tuple_dag(fg2)
    assert [e["fn"] for e in tdag.values()] == [n.op for n in fg.toposort()]
