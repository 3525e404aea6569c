"""Nodes keep the user's stack where they were made (``tag.trace``), rewrites and
fusion carry it, and a runtime error prints it ("Backtrace when the node is created")."""

import linecache
import pickle

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.graph import utils
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.utils import Scratchpad, copy_stack_trace, get_stack_trace

HERE = __file__


def _lines(var):
    return [(f[0], f[1]) for stack in get_stack_trace(var) for f in stack]


def test_op_call_keeps_the_users_frames_only():
    x = tt.dvector("x")
    y = tt.exp(x)  # the line the trace names
    (stack,) = y.tag.trace
    filename, lineno, name, _line = stack[-1]
    assert filename == HERE and name == "test_op_call_keeps_the_users_frames_only"
    assert linecache.getline(filename, lineno).strip() == (
        "y = tt.exp(x)  # the line the trace names"
    )
    assert all("theano_dag/" not in f[0].replace("\\", "/") for f in stack)


def test_an_elemwise_call_walks_the_users_stack_once(monkeypatch):
    # The outputs' stack is recorded by Op.__call__; make_node does not record one too.

    walks = []
    user_stack = utils.user_stack
    monkeypatch.setattr(utils, "user_stack", lambda *a: walks.append(1) or user_stack(*a))
    x = tt.dvector("x")
    walks.clear()
    y = tt.exp(x)
    assert len(walks) == 1
    assert _lines(y)[-1][0] == HERE


def test_traceback_limit_flag():
    x = tt.dvector("x")
    with config.change_flags(traceback__limit=1):
        assert len(tt.exp(x).tag.trace[0]) == 1
    with config.change_flags(traceback__limit=0):
        assert get_stack_trace(tt.exp(x)) == []


def test_rewrites_carry_the_trace_of_what_they_replace():
    x = tt.dvector("x")
    y = tt.log(1 + x)  # rewritten to log1p
    fg = FunctionGraph([x], [y], clone=True)
    theano_dag.compile.mode.get_mode("FAST_RUN").optimizer.optimize(fg)
    (out,) = fg.outputs
    assert "log1p" in str(out.owner.op) or "Composite" in str(out.owner.op)
    assert (HERE, y.tag.trace[0][-1][1]) in _lines(out)


def test_copy_stack_trace_merges_the_stacks():
    x = tt.dvector("x")
    a = tt.exp(x)
    b = tt.sin(x)
    c = tt.cos(x)
    copy_stack_trace([a, b], c)
    assert c.tag.trace == a.tag.trace + b.tag.trace


@pytest.mark.parametrize("mode", ["FAST_RUN", "FAST_COMPILE", Mode(linker="cpu", optimizer=None)])
def test_runtime_error_names_the_users_line(mode):
    x, i = tt.dvector("x"), tt.lscalar("i")
    z = tt.log(tt.exp(x) + 1)[i]  # the failing index
    f = theano_dag.function([x, i], z, mode=mode)
    np.testing.assert_allclose(f(np.zeros(3), 1), np.log(2.0))
    with pytest.raises(IndexError) as info:
        f(np.zeros(3), 5)
    text = str(info.value)
    assert "Backtrace when the node is created" in text
    assert f'File "{HERE}", line {z.tag.trace[0][-1][1]}' in text
    assert "z = tt.log(tt.exp(x) + 1)[i]  # the failing index" in text
    assert "exception_verbosity=high" in text


def test_error_in_a_fused_node_names_every_line_it_fused():
    x, v = tt.dmatrix("x"), tt.dvector("v")
    a = tt.exp(x)  # line a
    b = a * v  # line b
    s = b.sum(axis=1)  # line s
    f = theano_dag.function([x, v], s)
    (fused,) = [n for n in f.maker.fgraph.apply_nodes if "Fused" in type(n.op).__name__]
    with pytest.raises(ValueError) as info:
        f(np.ones((2, 3)), np.ones(4))
    text = str(info.value)
    assert f"Apply node that caused the error: {fused}" in text
    for marker in ("# line a", "# line b", "# line s"):
        assert marker in text, marker
    assert "and (a node fused or rewritten into this one):" in text


def test_exception_verbosity_high_shows_the_input_values():
    x, i = tt.dvector("x"), tt.lscalar("i")
    f = theano_dag.function([x, i], x[i], mode="FAST_COMPILE")
    with config.change_flags(exception_verbosity="high"):
        with pytest.raises(IndexError, match=r"Inputs values:\n  x: array\(\[7\., 7\.\]\)"):
            f(np.full(2, 7.0), 3)


def test_graph_inputs_made_by_a_type_keep_a_trace_too():
    # Theano's tests/graph/test_utils.py::test_stack_trace, in this suite's terms.
    with config.change_flags(traceback__limit=1):
        v = tt.vector()
        assert len(v.tag.trace) == 1 and len(v.tag.trace[0]) == 1
    with config.change_flags(traceback__limit=2):
        v = tt.vector()
        assert len(v.tag.trace) == 1 and len(v.tag.trace[0]) == 2
        assert v.tag.trace[0][-1][0] == HERE


def _made_in_a_loop(x, n):
    return [tt.exp(x) for _ in range(n)]  # the loop's line


def _made_on_two_lines(x):
    a = tt.sin(x)  # first line
    b = tt.cos(x)  # second line
    return a, b


def test_nodes_made_by_the_same_lines_share_their_stack_and_others_do_not():
    # The stacks are kept once per distinct stack: nodes made by the same lines get the
    # same frames, nodes made elsewhere (another line of the same function, another
    # caller of the same line) their own.
    x = tt.dvector("x")
    outs = _made_in_a_loop(x, 3)
    assert outs[0].tag.trace == outs[1].tag.trace == outs[2].tag.trace
    assert linecache.getline(*outs[0].tag.trace[0][-1][:2]).strip().endswith("# the loop's line")
    a, b = _made_on_two_lines(x)
    (sa,), (sb,) = a.tag.trace, b.tag.trace
    assert sa[:-1] == sb[:-1] and sa[-1][1] + 1 == sb[-1][1]
    assert linecache.getline(*sa[-1][:2]).strip().endswith("# first line")
    assert linecache.getline(*sb[-1][:2]).strip().endswith("# second line")

    def other_caller():
        return _made_in_a_loop(x, 1)[0]

    (stack,) = other_caller().tag.trace
    assert stack[-1] == outs[0].tag.trace[0][-1]  # the same innermost line ...
    names = [f[2] for f in stack]  # ... reached from another frame
    assert "other_caller" in names and "other_caller" not in [f[2] for f in outs[0].tag.trace[0]]


def test_the_shared_stacks_survive_a_full_cache():
    x = tt.dvector("x")
    traces = []
    for _ in range(2):
        traces.append(_made_in_a_loop(x, 1)[0].tag.trace)
        utils._STACKS.clear()
    before, after = traces
    assert after == before and after[0] is not before[0]


def test_the_trace_waits_outside_the_tag_until_the_tag_is_made():
    x = tt.dvector("x")
    y = tt.exp(x)
    assert y._tag is None  # no Scratchpad made for the trace alone
    stacks = get_stack_trace(y)
    assert stacks and stacks[0][-1][2] == (
        "test_the_trace_waits_outside_the_tag_until_the_tag_is_made"
    )
    c = y.clone()
    assert c._tag is None and get_stack_trace(c) == stacks
    back = pickle.loads(pickle.dumps(y))
    assert get_stack_trace(back) == stacks
    y.tag.note = 1  # the tag, once made, holds the trace
    assert y.tag.trace == stacks and y._trace is None and get_stack_trace(y) == stacks
    assert get_stack_trace(y.clone()) == stacks and y.clone().tag.note == 1
    c.tag = Scratchpad()  # a tag given whole replaces the notes, the trace included
    assert get_stack_trace(c) == []
    copy_stack_trace(y, c)
    assert get_stack_trace(c) == stacks


def test_elemwise_outputs_of_one_type_share_it():
    x = tt.dvector("x")
    a, b = tt.exp(x), tt.sin(x) + x
    assert a.type is b.type and a.type == tt.dvector().type
    assert tt.exp(tt.fmatrix()).type is not a.type
