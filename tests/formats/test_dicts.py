"""Tests of the dict graph formats (dag, tuple-dag, index-dag, unidag) and their conversions."""

import copy
import operator
import pickle
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from theano_dag.formats import (
    FORMATS,
    CycleError,
    GraphFormatError,
    IndexOutOfRangeError,
    convert,
    dag_jobs,
    dag_to_index_dag,
    dag_to_unidag,
    detect_format,
    graph_inputs,
    graph_outputs,
    index,
    index_dag_to_dag,
    index_dag_to_tuple_dag,
    interpret,
    to_dot,
    to_networkx,
    toposort,
    tuple_dag_to_index_dag,
    unidag_to_dag,
    validate,
)


class Op:
    """A toy op: any object can be a dag's ``fn``."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


op = Op("op")


def e(fn, *args):
    return {"fn": fn, "args": args}


# A hand-made graph: x, y inputs; divmod has two outputs; 'q' is used twice by one job.
TUPLE_DAG = {
    ("s",): e(operator.add, "x", "y"),
    ("q", "r"): e(divmod, "s", "y"),
    ("t",): e(operator.mul, "q", "q"),
    ("u",): e(operator.sub, "t", "r"),
}
INDEX_DAG = {
    ("s",): e(operator.add, "x", "y"),
    "s": e(index, ("s",), 0),
    ("q", "r"): e(divmod, "s", "y"),
    "q": e(index, ("q", "r"), 0),
    "r": e(index, ("q", "r"), 1),
    ("t",): e(operator.mul, "q", "q"),
    "t": e(index, ("t",), 0),
    ("u",): e(operator.sub, "t", "r"),
    "u": e(index, ("u",), 0),
}
DAG = {
    "s": e(operator.add, "x", "y"),
    ("q", "r"): e(divmod, "s", "y"),
    "q": e(index, ("q", "r"), 0),
    "r": e(index, ("q", "r"), 1),
    "t": e(operator.mul, "q", "q"),
    "u": e(operator.sub, "t", "r"),
}
UNIDAG = {"s": (("q", "r"),), ("q", "r"): ("t", "u"), "t": ("u",), "u": ()}
JOBS = {
    "s": e(operator.add, "x", "y"),
    ("q", "r"): e(divmod, "s", "y"),
    "t": e(operator.mul, "q", "q"),
    "u": e(operator.sub, "t", "r"),
}
BY_FORMAT = {"tuple_dag": TUPLE_DAG, "index_dag": INDEX_DAG, "dag": DAG, "unidag": UNIDAG}


def test_seed_example_exactly():
    got = tuple_dag_to_index_dag({("c", "d"): {"fn": op, "args": ("a", "b")}})
    assert got == {
        "c": {"fn": index, "args": (("c", "d"), 0)},
        "d": {"fn": index, "args": (("c", "d"), 1)},
        ("c", "d"): {"fn": op, "args": ("a", "b")},
    }
    assert got[("c", "d")]["fn"] is op


def test_single_output_simplification():
    tdag = {("c",): e(op, "a", "b")}
    idag = tuple_dag_to_index_dag(tdag)
    assert idag == {("c",): e(op, "a", "b"), "c": e(index, ("c",), 0)}
    assert index_dag_to_dag(idag) == {"c": e(op, "a", "b")}
    assert dag_to_index_dag({"c": e(op, "a", "b")}) == idag
    # several outputs keep their index entries in a dag
    tdag2 = {("c", "d"): e(op, "a")}
    assert index_dag_to_dag(tuple_dag_to_index_dag(tdag2)) == tuple_dag_to_index_dag(tdag2)


def test_hand_made_conversions_both_ways():
    assert tuple_dag_to_index_dag(TUPLE_DAG) == INDEX_DAG
    assert index_dag_to_tuple_dag(INDEX_DAG) == TUPLE_DAG
    assert index_dag_to_dag(INDEX_DAG) == DAG
    assert dag_to_index_dag(DAG) == INDEX_DAG
    assert dag_to_unidag(DAG) == UNIDAG
    assert dag_jobs(DAG) == JOBS
    assert unidag_to_dag(UNIDAG, JOBS) == DAG


def test_seed_unidag_example():
    dag = {"a": e(op, "x"), "b": e(op, "a"), "c": e(op, "a", "b")}
    assert dag_to_unidag(dag) == {"a": ("b", "c"), "b": ("c",), "c": ()}


@pytest.mark.parametrize("frm", FORMATS)
@pytest.mark.parametrize("to", FORMATS)
def test_convert_every_pair(frm, to):
    got = convert(BY_FORMAT[frm], to=to, jobs=JOBS)
    assert got == BY_FORMAT[to]
    assert convert(BY_FORMAT[frm], to=to, frm=frm.replace("_", "-"), jobs=JOBS) == got


def test_convert_output_is_a_new_dict():
    got = convert(DAG, to="dag")
    assert got == DAG and got is not DAG
    got["s"]["args"] = ()
    assert DAG["s"]["args"] == ("x", "y")


@pytest.mark.parametrize("fmt", FORMATS)
def test_detect_format(fmt):
    assert detect_format(BY_FORMAT[fmt]) == fmt
    assert validate(BY_FORMAT[fmt]) == fmt


def test_detect_format_edge_cases():
    assert detect_format({}) == "dag"
    with pytest.raises(TypeError, match="cannot tell the format of a list"):
        detect_format([1])
    with pytest.raises(TypeError, match="mixes unidag entries"):
        detect_format({"a": (), "b": e(op, "a")})
    with pytest.raises(TypeError, match="entry for 'a' is neither"):
        detect_format({"a": 3})
    with pytest.raises(ValueError, match="unknown graph format 'dagg'"):
        convert(DAG, to="dagg")


def test_unidag_needs_jobs():
    with pytest.raises(TypeError, match="converting it needs jobs="):
        convert(UNIDAG, to="tuple_dag")


def test_unidag_to_dag_errors():
    with pytest.raises(GraphFormatError, match=r"job 'u' of the unidag has no entry in jobs"):
        unidag_to_dag(UNIDAG, {k: v for k, v in JOBS.items() if k != "u"})
    with pytest.raises(GraphFormatError, match=r"jobs has an entry for 'w'"):
        unidag_to_dag(UNIDAG, {**JOBS, "w": e(op, "u")})
    # the unidag claims an edge the arguments do not have
    wrong = {**UNIDAG, "s": (("q", "r"), "t")}
    with pytest.raises(GraphFormatError, match=r"unidag says that job 's' precedes 't'"):
        unidag_to_dag(wrong, JOBS)
    # ... and misses one they have
    missing = {**UNIDAG, "t": ()}
    with pytest.raises(GraphFormatError, match=r"does not say that job 't' precedes 'u'"):
        unidag_to_dag(missing, JOBS)


def test_unidag_validation():
    with pytest.raises(GraphFormatError, match=r"job 'a' precedes 'b', which is not a job"):
        validate({"a": ("b",)})
    with pytest.raises(GraphFormatError, match=r"job 'a' lists 'b' twice"):
        validate({"a": ("b", "b"), "b": ()})
    with pytest.raises(TypeError, match=r"unidag entry for job 'a' must be a tuple"):
        validate({"a": ["b"], "b": ()}, fmt="unidag")
    with pytest.raises(CycleError, match=r"cycle through the jobs 'a' -> 'b' -> 'a'") as info:
        validate({"a": ("b",), "b": ("a",), "c": ()})
    assert info.value.cycle == ("a", "b", "a")
    assert toposort({"c": (), "a": ("b", "c"), "b": ("c",)}) == ["a", "b", "c"]


# -- errors in the job formats -----------------------------------------------------------------


def test_cycle_names_the_variables():
    dag = {"a": e(op, "x"), "b": e(op, "a", "c"), "c": e(op, "b")}
    with pytest.raises(CycleError, match=r"cycle through the variables 'b' -> 'c' -> 'b'") as info:
        validate(dag)
    assert info.value.cycle == ("b", "c", "b")
    assert isinstance(info.value, ValueError)


def test_cycle_through_a_tuple_job_and_self_loop():
    tdag = {("p", "q"): e(op, "x", "r"), ("r",): e(op, "q")}
    with pytest.raises(CycleError, match=r"variables 'q' -> 'r' -> 'q'"):
        tuple_dag_to_index_dag(tdag)
    with pytest.raises(CycleError, match=r"variables 'a' -> 'a'$"):
        dag_to_unidag({"a": e(op, "a")})


def test_undefined_argument():
    with pytest.raises(
        GraphFormatError,
        match=r"argument 'z' of job 's' is defined by no entry and is not a declared input",
    ):
        dag_to_unidag({"s": e(op, "x", "z")}, inputs=("x",))
    # without declared inputs, undefined arguments are the graph inputs
    assert graph_inputs({"s": e(op, "x", "z"), "t": e(op, "s", "w")}) == ("x", "z", "w")
    with pytest.raises(GraphFormatError, match=r"output 'o' is defined by no entry and is no"):
        validate(DAG, inputs=("x", "y"), outputs=("u", "o"))
    assert validate(DAG, inputs=("x", "y"), outputs=("u", "x")) == "dag"


def test_index_out_of_range():
    idag = {("c", "d"): e(op, "a"), "c": e(index, ("c", "d"), 0), "d": e(index, ("c", "d"), 2)}
    with pytest.raises(
        IndexOutOfRangeError, match=r"entry for 'd' picks output 2 of job \('c', 'd'\), which has 2"
    ) as info:
        index_dag_to_dag(idag)
    assert isinstance(info.value, IndexError) and isinstance(info.value, ValueError)
    idag["d"] = e(index, ("c", "d"), -1)
    with pytest.raises(IndexOutOfRangeError, match="picks output -1"):
        index_dag_to_dag(idag)


def test_key_given_twice():
    with pytest.raises(
        GraphFormatError, match=r"variable 'c' is defined by jobs \('c', 'd'\) and \('c',\)"
    ):
        tuple_dag_to_index_dag({("c", "d"): e(op, "a"), ("c",): e(op, "b")})
    with pytest.raises(
        GraphFormatError, match=r"variable 'c' is defined twice by job \('c', 'c'\)"
    ):
        tuple_dag_to_index_dag({("c", "c"): e(op, "a")})
    with pytest.raises(GraphFormatError, match=r"input 'x' is declared twice"):
        validate(DAG, inputs=("x", "y", "x"))
    with pytest.raises(GraphFormatError, match=r"input 's' is also defined by job 's'"):
        validate(DAG, inputs=("x", "y", "s"))


def test_bad_index_entries():
    base = {("c", "d"): e(op, "a"), "c": e(index, ("c", "d"), 0)}
    with pytest.raises(GraphFormatError, match=r"output 'd' of job \('c', 'd'\) has no `index`"):
        index_dag_to_tuple_dag(base)
    with pytest.raises(GraphFormatError, match=r"picks output 0 of job \('c', 'd'\), which is 'c'"):
        index_dag_to_tuple_dag({**base, "d": e(index, ("c", "d"), 0)})
    with pytest.raises(GraphFormatError, match=r"refers to \('p', 'q'\), which is no job"):
        index_dag_to_tuple_dag({**base, "d": e(index, ("p", "q"), 1)})
    with pytest.raises(GraphFormatError, match=r"must have args \(outputs_tuple, position\)"):
        index_dag_to_tuple_dag({**base, "d": e(index, ("c", "d"))})
    with pytest.raises(TypeError, match=r"position of `index` entry 'd' must be an int"):
        index_dag_to_tuple_dag({**base, "d": e(index, ("c", "d"), 1.0)})


def test_format_rules():
    with pytest.raises(GraphFormatError, match=r"uses `index`, which a tuple-dag does not have"):
        tuple_dag_to_index_dag(INDEX_DAG)
    with pytest.raises(GraphFormatError, match=r"key 's' of a tuple_dag entry must be a tuple"):
        tuple_dag_to_index_dag(DAG)
    with pytest.raises(
        GraphFormatError, match=r"job \('s',\) has one output; a dag keys it by 's'"
    ):
        dag_to_unidag(INDEX_DAG)
    with pytest.raises(GraphFormatError, match=r"at least one output"):
        tuple_dag_to_index_dag({(): e(op, "a")})
    with pytest.raises(GraphFormatError, match=r"argument 0 of job 'b' is the tuple \('a',\)"):
        validate({"b": e(op, ("a",))})
    with pytest.raises(TypeError, match=r"argument 0 of job 'b' is \['a'\], which is not hashable"):
        validate({"b": e(op, ["a"])})
    with pytest.raises(TypeError, match=r"'args' of entry 'b' must be a tuple, got \['a'\]"):
        validate({"b": {"fn": op, "args": ["a"]}})
    with pytest.raises(TypeError, match=r"entry for 'b' must be a dict \{'fn'"):
        validate({"b": {"fn": op, "args": (), "name": "b"}}, fmt="dag")
    with pytest.raises(TypeError, match=r"a dag must be a dict, got list"):
        validate([], fmt="dag")


# -- any keys, any fns --------------------------------------------------------------------------


class Var:
    """Hashes by identity, like theano_dag Variables."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


def test_any_hashable_keys_and_any_fn():
    x, c, d = Var("x"), Var("c"), Var("d")
    weird_fn = np.arange(3)  # == on it is elementwise: conversions must never compare fns
    tdag = {(c, d): e(weird_fn, x, 7), (frozenset({1}),): e(None, d, c)}
    idag = tuple_dag_to_index_dag(tdag)
    assert idag[c] == e(index, (c, d), 0)
    dag = index_dag_to_dag(idag)
    assert dag[frozenset({1})]["fn"] is None
    assert dag[(c, d)]["fn"] is weird_fn
    assert graph_inputs(dag) == (x, 7)
    unidag = dag_to_unidag(dag)
    assert unidag == {(c, d): (frozenset({1}),), frozenset({1}): ()}
    back = index_dag_to_tuple_dag(dag_to_index_dag(unidag_to_dag(unidag, dag_jobs(dag))))
    assert list(back) == list(tdag)
    assert all(back[k]["fn"] is tdag[k]["fn"] and back[k]["args"] == tdag[k]["args"] for k in tdag)


def test_index_keyword():
    assert repr(index) == "index" and str(index) == "index"
    assert pickle.loads(pickle.dumps(index)) is index
    assert copy.copy(index) is index and copy.deepcopy(INDEX_DAG)["q"]["fn"] is index
    assert type(index)() is index
    assert index(("c", "d"), 1) == "d"


# -- queries and interpretation -----------------------------------------------------------------


def _call(fn, args):
    out = fn(*args)
    return out if fn is divmod else (out,)


@pytest.mark.parametrize("fmt", ["tuple_dag", "index_dag", "dag"])
def test_interpret_values(fmt):
    values = interpret(BY_FORMAT[fmt], {"x": 17, "y": 3}, _call)
    s = 17 + 3
    q, r = divmod(s, 3)
    assert values == {"x": 17, "y": 3, "s": s, "q": q, "r": r, "t": q * q, "u": q * q - r}


def test_interpret_errors():
    with pytest.raises(GraphFormatError, match=r"argument 'y' of job \('s',\) is defined by no"):
        interpret(TUPLE_DAG, {"x": 1}, _call)
    with pytest.raises(ValueError, match=r"job \('q', 'r'\) has 2 outputs but apply returned 1"):
        interpret(TUPLE_DAG, {"x": 1, "y": 2}, lambda fn, args: (0,))
    with pytest.raises(TypeError, match="a unidag has no variables"):
        interpret(UNIDAG, {}, _call)


def test_toposort_and_outputs():
    shuffled = dict(reversed(list(DAG.items())))
    order = toposort(shuffled)
    assert order == ["s", ("q", "r"), "t", "u"]
    assert toposort(DAG, inputs=("x", "y")) == order
    assert graph_outputs(DAG) == ("u",)
    assert graph_outputs(TUPLE_DAG) == ("u",)
    assert graph_inputs(INDEX_DAG) == ("x", "y")


# -- networkx and DOT ---------------------------------------------------------------------------


def test_to_networkx_dag():
    g = to_networkx(DAG)
    assert set(g.nodes) == {"x", "y", "s", ("q", "r"), "q", "r", "t", "u"}
    assert g.nodes["x"]["kind"] == "input"
    assert g.nodes["s"] == {"kind": "job", "fn": operator.add, "label": "s: add"}
    assert g.nodes["q"]["fn"] is index and g.nodes["q"]["kind"] == "variable"
    assert g.edges["q", "t"] == {"argnums": (0, 1)}
    assert g.edges[("q", "r"), "r"] == {"index": 1}
    assert g.edges["r", "u"] == {"argnums": (1,)}
    assert g.number_of_edges() == 9


def test_to_networkx_tuple_dag_and_unidag():
    import networkx as nx

    g = to_networkx(TUPLE_DAG)
    assert ("s",) in g and "s" in g and "fn" not in g.nodes["s"]
    assert g.edges[("s",), "s"] == {"index": 0}
    assert nx.is_directed_acyclic_graph(g)
    u = to_networkx(UNIDAG)
    assert set(u.edges) == {("s", ("q", "r")), (("q", "r"), "t"), (("q", "r"), "u"), ("t", "u")}
    assert to_networkx(INDEX_DAG, fmt="index_dag").number_of_nodes() == 2 + 4 + 5


def test_to_networkx_without_networkx(monkeypatch):
    monkeypatch.setitem(sys.modules, "networkx", None)  # makes `import networkx` fail
    with pytest.raises(ImportError, match=r"pip install '\.\[networkx\]'"):
        to_networkx(DAG)


def test_to_dot():
    text = to_dot(
        {
            ("q", "r"): e(divmod, "a", "b"),
            "q": e(index, ("q", "r"), 0),
            "r": e(index, ("q", "r"), 1),
            's"1': e(op, "q"),
        },
        name="div",
    )
    assert text == "\n".join([
        'digraph "div" {',
        '  n0 [label="a", shape=ellipse];',
        '  n1 [label="b", shape=ellipse];',
        '  n2 [label="divmod", shape=box];',
        '  n3 [label="q", shape=ellipse];',
        '  n4 [label="r", shape=ellipse];',
        '  n5 [label="s\\"1: op", shape=box];',
        '  n2 -> n3 [label="0"];',
        '  n2 -> n4 [label="1"];',
        '  n0 -> n2 [label="0"];',
        '  n1 -> n2 [label="1"];',
        "  n3 -> n5;",
        "}",
    ])  # fmt: skip
    unidag_text = to_dot({"a": ("b",), "b": ()})
    assert '  n0 [label="a", shape=box];' in unidag_text and "  n0 -> n1;" in unidag_text


# -- random graphs ------------------------------------------------------------------------------


class Multi(Op):
    """A toy op that knows how many outputs it has."""

    def __init__(self, name, n_out):
        super().__init__(name)
        self.n_out = n_out


def _fn(kind, n_out):
    # several kinds of fn object: op instances, plain tuples, strings
    if kind == 0:
        return Multi("m", n_out)
    if kind == 1:
        return ("t", n_out)
    return f"s{n_out}"


def _n_out(fn):
    return fn.n_out if isinstance(fn, Multi) else fn[1] if isinstance(fn, tuple) else int(fn[1:])


def _var(k):
    # mixed key types: ints, strings and frozensets must all work
    return (k, f"v{k}", frozenset({k}))[k % 3]


@st.composite
def tuple_dags(draw, max_jobs=8):
    n_in = draw(st.integers(1, 3))
    available = [_var(k) for k in range(n_in)]
    next_k, tdag = n_in, {}
    for _ in range(draw(st.integers(0, max_jobs))):
        n_out = draw(st.integers(1, 3))
        outs = tuple(_var(k) for k in range(next_k, next_k + n_out))
        next_k += n_out
        args = tuple(draw(st.lists(st.sampled_from(available), max_size=3)))
        tdag[outs] = {"fn": _fn(draw(st.integers(0, 2)), n_out), "args": args}
        available.extend(outs)
    keys = list(tdag)
    order = draw(st.permutations(keys))  # dict order need not be topological
    return {k: tdag[k] for k in order}


def _symbolic(fn, args):
    # outputs as nested tuples, so equal results mean equal computations
    return tuple((repr(fn), tuple(args), i) for i in range(_n_out(fn)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tuple_dags())
def test_random_round_trips(tdag):
    idag = tuple_dag_to_index_dag(tdag)
    dag = index_dag_to_dag(idag)
    unidag = dag_to_unidag(dag)
    assert index_dag_to_tuple_dag(idag) == tdag
    assert dag_to_index_dag(dag) == idag
    assert unidag_to_dag(unidag, dag_jobs(dag)) == dag
    assert dag_to_unidag(unidag_to_dag(unidag, dag_jobs(dag))) == unidag
    by_fmt = {"tuple_dag": tdag, "index_dag": idag, "dag": dag, "unidag": unidag}
    for frm in FORMATS:
        for to in FORMATS:
            assert convert(by_fmt[frm], to=to, frm=frm, jobs=dag_jobs(dag)) == by_fmt[to]
    if tdag:
        assert detect_format(tdag) == "tuple_dag" and detect_format(unidag) == "unidag"


@settings(max_examples=60, deadline=None)
@given(tuple_dags())
def test_random_order_and_values(tdag):
    order = toposort(tdag)
    done = set(graph_inputs(tdag))
    for outs in order:
        assert all(arg in done for arg in tdag[outs]["args"])
        done.update(outs)
    env = {v: ("input", v) for v in graph_inputs(tdag)}
    results = {fmt: interpret(convert(tdag, to=fmt), env, _symbolic) for fmt in FORMATS[:3]}
    assert results["tuple_dag"] == results["index_dag"] == results["dag"]


@settings(max_examples=60, deadline=None)
@given(tuple_dags(), st.data())
def test_random_cycles_are_reported(tdag, data):
    # rewire one argument of a job to a variable computed from it (or its own output)
    jobs = list(tdag)
    if not jobs:
        return
    order = toposort(tdag)
    target = data.draw(st.sampled_from(order))
    downstream = [outs for outs in order[order.index(target) :] if _depends(tdag, outs, target)]
    victim = data.draw(st.sampled_from(downstream))
    var = data.draw(st.sampled_from(victim))
    bad = dict(tdag)
    bad[target] = {"fn": tdag[target]["fn"], "args": tdag[target]["args"] + (var,)}
    with pytest.raises(CycleError) as info:
        tuple_dag_to_index_dag(bad)
    cycle = info.value.cycle
    assert cycle[0] == cycle[-1] and len(cycle) >= 2
    producer = {v: outs for outs in bad for v in outs}
    for a, b in zip(cycle, cycle[1:]):
        assert a in bad[producer[b]]["args"]  # a is used to compute b
    assert " -> ".join(map(repr, cycle)) in str(info.value)


def _depends(tdag, outs, target):
    """Whether job ``outs`` is ``target`` or uses, transitively, one of its outputs."""
    producer = {v: o for o in tdag for v in o}
    stack, seen = [outs], set()
    while stack:
        job = stack.pop()
        if job == target:
            return True
        if job in seen:
            continue
        seen.add(job)
        stack.extend(producer[a] for a in tdag[job]["args"] if a in producer)
    return False
