"""Checks shared by the FunctionGraph tests: recompute the structure from scratch."""

from collections import Counter


def clients_from_scratch(fg):
    """``{var: Counter((id(node) or "output", i))}`` recomputed by walking the outputs."""
    inputs = set(fg.inputs)
    expected = {v: Counter() for v in fg.inputs}
    seen = set()
    todo = list(fg.outputs)
    for k, out in enumerate(fg.outputs):
        expected.setdefault(out, Counter())[("output", k)] += 1
    while todo:
        var = todo.pop()
        expected.setdefault(var, Counter())
        node = var.owner
        if node is None or var in inputs or node in seen:
            continue
        seen.add(node)
        for o in node.outputs:
            expected.setdefault(o, Counter())
        for i, inp in enumerate(node.inputs):
            expected.setdefault(inp, Counter())[(id(node), i)] += 1
            todo.append(inp)
    return expected


def cached_clients(fg):
    return {
        v: Counter((c if c == "output" else id(c), i) for c, i in cl)
        for v, cl in fg.clients.items()
    }


def assert_valid(fg):
    """check_integrity, plus an independent recomputation of the exact clients."""
    fg.check_integrity()
    assert cached_clients(fg) == clients_from_scratch(fg)
    assert set(fg.variables) == set(fg.clients)


def snapshot(fg):
    """Everything that defines the graph's state, for 'unchanged' comparisons."""
    return (
        repr(fg),
        list(fg.inputs),
        list(fg.outputs),
        set(fg.apply_nodes),
        set(fg.variables),
        cached_clients(fg),
        {n: list(n.inputs) for n in fg.apply_nodes},
    )
