"""The node levels of a FunctionGraph (what its cycle check stops at) stay cheap to
keep when rewrites put deeper expressions in: the work of a replacement does not grow
with what lies downstream of it."""

import sys

from toy import MyVar, op1, op2

from theano_dag.graph.fg import FunctionGraph


def _calls(fn):
    n = 0

    def profile(frame, event, arg):
        nonlocal n
        if event in ("call", "c_call"):
            n += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return n


def _chain_with_insertions(length, insertions):
    x = MyVar("x")
    ys = [op1(x)]
    for _ in range(length):
        ys.append(op1(ys[-1]))
    fg = FunctionGraph([x], [ys[-1]], clone=False)
    reader = ys[2].owner  # reads ys[1]; everything after it is downstream

    def insert():
        for _ in range(insertions):
            cur = reader.inputs[0]
            fg.replace(cur, op2(op2(cur)), reason="test")  # two levels deeper each time

    return fg, insert


def test_deeper_replacements_do_not_raise_everything_downstream():
    fg_small, small = _chain_with_insertions(200, 20)
    fg_big, big = _chain_with_insertions(3000, 20)
    n_small, n_big = _calls(small), _calls(big)
    # 15x the nodes downstream; raising all of them each time would cost ~15x.
    assert n_big < 2 * n_small, (n_small, n_big)
    for fg, length in ((fg_small, 200), (fg_big, 3000)):
        fg.check_integrity()
        assert len(fg.apply_nodes) == length + 1 + 40


def test_levels_stay_topological_past_the_gap():
    # Many more insertions at one place than the gap between the original levels:
    # the levels downstream are raised where needed and stay topological.
    fg, insert = _chain_with_insertions(50, 200)
    insert()
    fg.check_integrity()
    assert len(fg.apply_nodes) == 51 + 400
