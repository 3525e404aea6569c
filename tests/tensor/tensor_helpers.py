"""Helpers for the tensor tests: a tiny reference evaluator and a finite-difference check.

The evaluator runs ``op.perform`` in topological order (what the reference engine
does) and checks each output value against its variable's type, so a test of the
tensor library does not depend on ``theano_dag.function``.
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Constant, io_toposort
from theano_dag.tensor.shape import shape_i
from theano_dag.tensor.variable import as_tensor_variable


def evaluate_all(outputs, givens=None):
    """Run the graph of ``outputs``; return the ``{variable: value}`` of every variable."""
    outs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    givens = dict(givens or {})
    storage = {v: v.type.filter(val) for v, val in givens.items()}
    for node in io_toposort(list(givens), outs):
        args = []
        for v in node.inputs:
            if v in storage:
                args.append(storage[v])
            elif isinstance(v, Constant):
                args.append(v.data)
            else:
                raise ValueError(f"evaluate: no value for the input {v}")
        cells = [[None] for _ in node.outputs]
        node.op.perform(node, args, cells)
        for o, c in zip(node.outputs, cells):
            if not o.type.is_valid_value(c[0]):
                raise AssertionError(
                    f"{node.op} produced {type(c[0]).__name__} "
                    f"{getattr(c[0], 'dtype', '')}{getattr(c[0], 'shape', '')} for {o.type}"
                )
            storage[o] = c[0]
    for o in outs:
        if isinstance(o, Constant):
            storage[o] = o.data
    return storage


def evaluate(outputs, givens=None):
    """Values of ``outputs`` (a variable or a list) with inputs bound by ``givens``."""
    single = not isinstance(outputs, (list, tuple))
    outs = [outputs] if single else list(outputs)
    storage = evaluate_all(outs, givens)
    vals = [storage[o] for o in outs]
    return vals[0] if single else vals


def inferred_node_shapes(node, givens):
    """The shapes ``node.op.infer_shape`` gives, evaluated with ``givens``; None where it
    says a shape (or a length) is known only from the value (``numpy.unique``'s count)."""
    in_shapes = [
        tuple(shape_i(v, d) for d in range(v.ndim)) if hasattr(v, "ndim") else None
        for v in node.inputs
    ]  # None: not a tensor (a typed list, a slice)
    shapes = node.op.infer_shape(None, node, in_shapes)
    result = []
    for shp in shapes:
        if shp is None:
            result.append(None)
            continue
        known = [as_tensor_variable(s) for s in shp if s is not None]
        vals = iter(evaluate(known, givens) if known else [])
        result.append(tuple(None if s is None else int(next(vals)) for s in shp))
    return result


def same_shapes(inferred, real):
    """Whether ``inferred_node_shapes``'s shapes match the real ones where they are known."""
    return len(inferred) == len(real) and all(
        i is None or (len(i) == len(r) and all(a is None or a == b for a, b in zip(i, r)))
        for i, r in zip(inferred, real)
    )


def inferred_shapes(out, givens):
    """The shapes ``infer_shape`` of ``out``'s node gives, evaluated with ``givens``."""
    return inferred_node_shapes(out.owner, givens)


def numeric_grad(f, values, eps):
    """Central finite differences of the scalar function ``f(*values)``."""
    grads = []
    for k, v in enumerate(values):
        v = np.array(v, dtype="float64")
        g = np.zeros_like(v)
        for idx in np.ndindex(v.shape):
            old = v[idx]
            args = [np.array(a, dtype="float64") for a in values]
            args[k] = v.copy()
            args[k][idx] = old + eps
            hi = f(*args)
            args[k][idx] = old - eps
            lo = f(*args)
            g[idx] = (hi - lo) / (2 * eps)
        grads.append(g)
    return grads


def check_grad(build, values, rng, eps=1e-6, rtol=1e-4, atol=1e-6):
    """Compare the symbolic gradient of ``sum(build(*inputs) * w)`` with finite differences.

    ``values`` are float64 arrays; a random weight ``w`` makes every output element count.
    """
    from theano_dag import tensor as tt

    # Length-1 dims are declared broadcastable, so that values like (1, n) broadcast.
    inputs = [
        tt.TensorType("float64", shape=tuple(1 if s == 1 else None for s in np.shape(v)))()
        for v in values
    ]
    out = build(*inputs)
    w = rng.uniform(0.5, 1.5, size=evaluate(out, dict(zip(inputs, values))).shape)
    cost = (out * tt.constant(w)).sum()
    sym = _symbolic_grad(cost, inputs)
    got = evaluate(sym, dict(zip(inputs, values)))

    def f(*vals):
        return float(evaluate(cost, dict(zip(inputs, vals))))

    want = numeric_grad(f, values, eps)
    for k, (g, n) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, n, rtol=rtol, atol=atol, err_msg=f"gradient wrt input {k}")


def _symbolic_grad(cost, wrt):
    """Reverse mode over L_op: theano_dag.gradient.grad when it exists, else a local one."""
    try:
        from theano_dag.gradient import grad
    except ImportError:
        grad = _local_grad
    return grad(cost, wrt)


def _local_grad(cost, wrt):
    from theano_dag.graph.null_type import is_disconnected, is_null
    from theano_dag.tensor.basic import ones_like, zeros_like

    nodes = io_toposort(list(wrt), [cost])
    grads = {cost: ones_like(cost)}
    for node in reversed(nodes):
        gz = [grads.get(o) for o in node.outputs]
        if all(g is None for g in gz):
            continue
        gz = [zeros_like(o) if g is None else g for g, o in zip(gz, node.outputs)]
        gi = node.op.L_op(node.inputs, node.outputs, gz)
        for v, g in zip(node.inputs, gi):
            if g is None or is_disconnected(g):
                continue
            if is_null(g):
                raise TypeError(g.type.why_null)
            grads[v] = grads[v] + g if v in grads else g
    return [grads[v] if v in grads else zeros_like(v) for v in wrt]
