"""What ``FunctionGraph`` does rarely: check its integrity, and pickle itself.

Kept out of ``fg.py`` so that the module the optimizers work through reads in one
sitting; ``FunctionGraph.check_integrity``, ``__getstate__`` and ``__setstate__`` call
these.
"""

from __future__ import annotations

import pickle
import warnings

from theano_dag.graph.basic import (
    Apply,
    Constant,
    Variable,
    applys_between,
    io_toposort,
    vars_between,
)
from theano_dag.graph.fg import IntegrityError, _is_output

__all__ = ["check_integrity", "pickle_state", "restore_state"]

# Attributes the FunctionGraph itself owns (the others were installed by features).
_CORE_ATTRS = frozenset(
    "execute_callbacks_time _features apply_nodes variables clients inputs outputs "
    "profile update_mapping _level _version _client_index _input_set".split()
)


def check_integrity(fgraph):
    """Recompute ``fgraph``'s structure from scratch; raise IntegrityError on a mismatch
    (see ``FunctionGraph.check_integrity``)."""
    nodes = set(applys_between(fgraph.inputs, fgraph.outputs))
    if fgraph.apply_nodes != nodes:
        raise IntegrityError(
            f"The nodes are inappropriately cached. missing: "
            f"{_few(nodes - fgraph.apply_nodes)}, in excess: {_few(fgraph.apply_nodes - nodes)}"
        )
    variables = set(vars_between(fgraph.inputs, fgraph.outputs))
    variables.update(fgraph.inputs)
    if fgraph.variables != variables:
        raise IntegrityError(
            f"The variables are inappropriately cached. missing: "
            f"{_few(variables - fgraph.variables)}, in excess: "
            f"{_few(fgraph.variables - variables)}"
        )
    if set(fgraph.clients) != variables:
        raise IntegrityError(
            f"The clients are kept for the wrong variables. missing: "
            f"{_few(variables - set(fgraph.clients))}, in excess: "
            f"{_few(set(fgraph.clients) - variables)}"
        )
    expected: dict = {v: [] for v in variables}
    for node in nodes:
        for i, inp in enumerate(node.inputs):
            expected[inp].append((node, i))
    for k, out in enumerate(fgraph.outputs):
        expected[out].append(("output", k))
    inputs = set(fgraph.inputs)
    for var in variables:
        if var.owner is None and var not in inputs and not isinstance(var, Constant):
            raise IntegrityError(f"Undeclared input: {var}")
        have = fgraph.clients[var]
        if len(have) != len(expected[var]) or set(map(_client_key, have)) != set(
            map(_client_key, expected[var])
        ):
            raise IntegrityError(
                f"Inconsistent clients of {var}: cached {have}, actual {expected[var]}"
            )
    if set(fgraph._level) != nodes:
        raise IntegrityError("The node levels are kept for the wrong nodes")
    for node in nodes:
        for inp in node.inputs:
            if inp.owner is not None and fgraph._level[inp.owner] >= fgraph._level[node]:
                raise IntegrityError(f"Node levels are not topological at {node}")
    try:
        io_toposort(fgraph.inputs, fgraph.outputs)
    except ValueError as e:
        raise IntegrityError(f"The graph contains a cycle: {e}") from None


def pickle_state(fgraph):
    """``fgraph.__getstate__``: features and attributes that cannot be pickled are dropped
    with a warning, and nodes are listed inputs-first (no recursion on deep chains)."""
    d = dict(fgraph.__dict__)
    for key in ("execute_callbacks_times", "_callbacks", "_toposort_cache"):
        d.pop(key, None)
    for feature in fgraph._features:
        for attr in getattr(feature, "pickle_rm_attr", ()):
            d.pop(attr, None)
    # Features and attributes they installed that cannot be pickled are
    # dropped with a warning rather than making the whole graph unpicklable.
    kept = []
    for feature in fgraph._features:
        err = _pickle_problem(fgraph, feature)
        if err is None:
            kept.append(feature)
        else:
            warnings.warn(
                f"FunctionGraph pickling: dropping feature {feature!r}, which cannot be "
                f"pickled ({err})",
                stacklevel=2,
            )
            for attr in getattr(feature, "pickle_rm_attr", ()):
                d.pop(attr, None)
    d["_features"] = kept
    for key in [k for k in d if k not in _CORE_ATTRS]:
        err = _pickle_problem(fgraph, d[key])
        if err is not None:
            warnings.warn(
                f"FunctionGraph pickling: dropping attribute {key!r}, which cannot be "
                f"pickled ({err})",
                stacklevel=2,
            )
            del d[key]
    # Pickle the nodes inputs-first: each node's inputs are then already in the
    # pickle memo, so pickling never recurses down a deep chain.
    order = list(fgraph.inputs)
    order.extend(io_toposort(fgraph.inputs, fgraph.outputs))
    return {"_pickle_order": order, **d}


def restore_state(fgraph, state):
    """``fgraph.__setstate__``."""
    state = dict(state)
    state.pop("_pickle_order", None)
    fgraph.__dict__.update(state)
    fgraph.execute_callbacks_times = {f: 0.0 for f in fgraph._features}
    fgraph._callbacks = {}
    fgraph._toposort_cache = None
    for feature in fgraph._features:
        unpickle = getattr(feature, "unpickle", None)
        if unpickle is not None:
            unpickle(fgraph)


def _client_key(client):
    node, i = client
    return (id(node) if not _is_output(node) else "output", i)


def _few(items, n=5):
    items = list(items)
    s = ", ".join(str(x) for x in items[:n])
    return f"[{s}{', ...' if len(items) > n else ''}]"


class _NullWriter:
    def write(self, b):
        return len(b)


def _pickle_problem(fgraph, obj):
    """Return why ``obj`` cannot be pickled (ignoring graph objects it refers to), or None."""

    class Probe(pickle.Pickler):
        def persistent_id(self, o):
            if o is fgraph or isinstance(o, (Variable, Apply)):
                return 1
            return None

    try:
        Probe(_NullWriter(), protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as e:
        return f"{type(e).__name__}: {e}"
    return None
