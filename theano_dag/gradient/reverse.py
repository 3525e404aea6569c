"""Reverse-mode differentiation: ``grad``, ``Lop``, ``Rop`` and ``subgraph_grad``.

``grad`` runs reverse mode over ``Op.L_op`` (which defaults to ``Op.grad``) and returns
ordinary graphs, so the optimizer sees and simplifies them like any other expression.
The walk is iterative: it visits the nodes that connect ``wrt`` to the cost in reverse
topological order, so a graph of any depth works without touching the recursion limit.

Placeholders, as in Theano: a ``DisconnectedType`` variable stands for a gradient that is
zero because there is no path; a ``NullType`` variable stands for one that is undefined
or not implemented (and makes ``grad`` raise ``NullTypeGradError`` naming the op).
"""

from __future__ import annotations

import functools
import operator
import warnings
from collections.abc import Mapping

from theano_dag import scalar as ts
from theano_dag import tensor as tt
from theano_dag.config import config
from theano_dag.graph.algorithms import clone_replace, graph_inputs
from theano_dag.graph.basic import Variable, general_toposort, io_toposort
from theano_dag.graph.null_type import (
    DisconnectedType,
    NullType,
    disconnected_type,
    grad_not_implemented,
)
from theano_dag.graph.op import Op
from theano_dag.graph.utils import MethodNotDefined
from theano_dag.scalar.basic import ScalarType
from theano_dag.sparse.type import SparseType

__all__ = [
    "grad",
    "Lop",
    "Rop",
    "subgraph_grad",
    "DisconnectedInputError",
    "NullTypeGradError",
    "NullTypeRopError",
    "GradArgumentError",
    "GradArgumentTypeError",
]


class DisconnectedInputError(ValueError):
    """Raised when ``grad`` is asked for the gradient with respect to a variable the cost
    does not depend on, and ``disconnected_inputs='raise'``."""


class GradArgumentError(ValueError, AssertionError):
    """An argument of ``grad``, ``jacobian`` or ``hessian`` of the wrong kind (a matrix
    expression for a Jacobian, a matrix to differentiate a Hessian with respect to, no
    cost and no known gradients). A ``ValueError``, and an ``AssertionError`` as Theano's
    asserts raised there, so that code catching either runs unchanged.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.gradient import jacobian
    >>> try:
    ...     jacobian(tt.dmatrix("m"), tt.dvector("v"))
    ... except AssertionError as err:
    ...     print(type(err).__name__, isinstance(err, ValueError))
    GradArgumentError True
    """


class GradArgumentTypeError(TypeError, AssertionError):
    """``GradArgumentError``'s kin for an argument of the wrong type (the cost of a Hessian
    that is not a scalar): a ``TypeError``, and an ``AssertionError`` as Theano's."""


class NullTypeGradError(TypeError):
    """Raised when a requested gradient is undefined or not implemented (a NullType)."""


class NullTypeRopError(NullTypeGradError, DisconnectedInputError):
    """Raised by ``Rop`` when ``f`` depends on ``wrt`` only through an undefined gradient.

    A ``NullTypeGradError`` like ``grad``'s, and a ``DisconnectedInputError`` (so a
    ``ValueError``) as Theano's ``Rop`` raised for an output reached only through a
    non-differentiable op.
    """


def _dtype(var):
    return getattr(var.type, "dtype", None)


def _is_discrete(var) -> bool:
    dt = _dtype(var)
    return dt is not None and (dt == "bool" or dt.startswith(("int", "uint")))


def _is_placeholder(var) -> bool:
    return isinstance(var.type, (NullType, DisconnectedType))


def _float_dtype_of(var) -> str:
    dt = _dtype(var)
    return dt if dt is not None and dt.startswith(("float", "complex")) else config.floatX


def _float_zeros_like(var):
    dtype = _float_dtype_of(var)
    if isinstance(var.type, ScalarType):
        # A scalar's (a cotangent of ScalarFromTensor's output): a scalar, not a 0-d tensor.
        return ts.second(var, ts.constant(0, dtype=dtype))
    return tt.zeros_like(var, dtype=dtype)


def _float_ones_like(var):
    return tt.ones_like(var, dtype=_float_dtype_of(var))


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _format_as(using_list, using_tuple, outputs):
    """Return ``outputs`` as a list, a tuple, or a single value (how the caller passed them)."""
    if using_list:
        return list(outputs)
    if using_tuple:
        return tuple(outputs)
    if isinstance(outputs, (list, tuple)):
        if len(outputs) != 1:
            raise ValueError(f"expected a single result, got {len(outputs)}")
        return outputs[0]
    return outputs


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


# ---------------------------------------------------------------------------
# Which variables connect wrt to the cost


def _node_to_pattern(node, cache=None) -> list:
    """The node's ``connection_pattern``, checked (one list of bools per input)."""
    if cache is not None and node in cache:
        return cache[node]
    pattern = node.op.connection_pattern(node)
    if not isinstance(pattern, list) or len(pattern) != len(node.inputs):
        raise TypeError(
            f"{node.op}.connection_pattern must return a list of {len(node.inputs)} lists "
            f"(one per input), got {pattern!r}"
        )
    for i, row in enumerate(pattern):
        if not isinstance(row, list) or len(row) != len(node.outputs):
            raise TypeError(
                f"{node.op}.connection_pattern row {i} must be a list of {len(node.outputs)} "
                f"bools (one per output), got {row!r}"
            )
    if cache is not None:
        cache[node] = pattern
    return pattern


def _populate_var_to_app_to_idx(outputs, wrt, consider_constant, patterns):
    """Map each variable on a path from ``wrt`` to ``outputs`` to ``{node: [input idx]}``.

    A variable is kept when some output truly depends on it (following connection
    patterns, stopping at ``consider_constant``) and it truly depends on some ``wrt``.
    Both walks use explicit stacks (no recursion).
    """
    consider = set(consider_constant)
    var_to_app_to_idx: dict = {}
    seen: set = set()
    stack = list(reversed(outputs))
    while stack:
        var = stack.pop()
        if var in seen:
            continue
        seen.add(var)
        if var in consider or var.owner is None:
            continue
        app = var.owner
        pattern = _node_to_pattern(app, patterns)
        out_idx = app.outputs.index(var)
        parents = []
        for i, ipt in enumerate(app.inputs):
            if not pattern[i][out_idx]:
                continue
            idx = var_to_app_to_idx.setdefault(ipt, {}).setdefault(app, [])
            if i not in idx:
                idx.append(i)
            parents.append(ipt)
        stack.extend(reversed(parents))

    # Forward from wrt along true connections: what depends on some wrt.
    visited: set = set()
    stack = list(wrt)
    while stack:
        var = stack.pop()
        if var in visited or var not in var_to_app_to_idx:
            continue
        visited.add(var)
        for node, idxs in var_to_app_to_idx[var].items():
            pattern = _node_to_pattern(node, patterns)
            for idx in idxs:
                stack.extend(o for k, o in enumerate(node.outputs) if pattern[idx][k])
    return {v: apps for v, apps in var_to_app_to_idx.items() if v in visited}


# ---------------------------------------------------------------------------
# grad


def grad(
    cost,
    wrt,
    consider_constant=None,
    disconnected_inputs="raise",
    add_names=True,
    known_grads=None,
    return_disconnected="zero",
    null_gradients="raise",
):
    """Return the symbolic gradient of the scalar ``cost`` with respect to ``wrt``.

    ``wrt`` is a variable or a list/tuple of them; the result has the same form.
    ``consider_constant`` lists variables not to backpropagate through;
    ``disconnected_inputs`` ('raise', 'warn', 'ignore') says what a ``wrt`` the cost does
    not depend on does; ``known_grads`` maps variables to gradients to start from (then
    ``cost`` may be None); ``return_disconnected`` ('zero', 'None', 'Disconnected') and
    ``null_gradients`` ('raise', 'return') choose what disconnected and undefined
    gradients become. Integer-valued variables get zero (float) gradients.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dscalar("x")
    >>> g = grad(x ** 3, x)
    >>> float(g.eval({x: 2.0}))
    12.0
    """
    _check_choice("disconnected_inputs", disconnected_inputs, ("ignore", "warn", "raise"))
    _check_choice("return_disconnected", return_disconnected, ("zero", "None", "Disconnected"))
    _check_choice("null_gradients", null_gradients, ("raise", "return"))
    if cost is None and known_grads is None:
        raise GradArgumentError("grad: cost and known_grads can't both be None")
    if cost is not None:
        if not isinstance(cost, Variable):
            raise TypeError(f"grad: cost must be a symbolic Variable, got {cost!r}")
        if isinstance(cost.type, NullType):
            raise ValueError(
                f"grad: can't differentiate the undefined cost {cost}: {cost.type.why_null}"
            )
        if getattr(cost.type, "ndim", None) != 0:
            raise TypeError(
                f"grad: cost must be a scalar (0-d tensor), but {cost} has type {cost.type}"
                " (use .sum() or index it first)"
            )
    if isinstance(wrt, (set, frozenset)):
        raise TypeError(
            "grad: wrt must be a variable or a list/tuple, not a set "
            "(a set has no order to match the results to)"
        )
    using_list, using_tuple = isinstance(wrt, list), isinstance(wrt, tuple)
    wrt = _as_list(wrt)
    for k, elem in enumerate(wrt):
        if not isinstance(elem, Variable):
            raise TypeError(
                f"grad: wrt[{k}] must be a symbolic Variable, got {elem!r} "
                f"of type {type(elem).__name__}"
            )
    consider_constant = _check_consider_constant(consider_constant)
    known_grads = _check_known_grads(known_grads)

    outputs = ([cost] if cost is not None else []) + list(known_grads)
    patterns: dict = {}
    var_to_app_to_idx = _populate_var_to_app_to_idx(outputs, wrt, consider_constant, patterns)

    if disconnected_inputs == "raise":
        # Fail before building anything: these wrt cannot be reached from the outputs.
        for elem in wrt:
            if elem not in var_to_app_to_idx and elem not in known_grads and elem is not cost:
                _handle_disconnected(elem, disconnected_inputs)

    grad_dict: dict = {}
    if cost is not None:
        g_cost = known_grads[cost] if cost in known_grads else _float_ones_like(cost)
        dt = _dtype(cost)
        if _dtype(g_cost) is not None and dt and dt.startswith(("float", "complex")):
            if _dtype(g_cost) != dt:
                g_cost = tt.cast(g_cost, dt)
        grad_dict[cost] = g_cost
    # As in Theano, a known gradient replaces (is not added to) what flows from the cost.
    grad_dict.update(known_grads)

    cost_name = cost.name if (add_names and cost is not None) else None
    rval = _populate_grad_dict(var_to_app_to_idx, grad_dict, wrt, cost_name, patterns)

    for i, (elem, g) in enumerate(zip(wrt, rval)):
        if isinstance(g.type, NullType) and null_gradients == "raise":
            raise NullTypeGradError(
                f"grad: the gradient with respect to {elem} is undefined (NullType): "
                f"{g.type.why_null}"
            )
        if isinstance(g.type, DisconnectedType):
            _handle_disconnected(elem, disconnected_inputs)
            if return_disconnected == "zero":
                rval[i] = _float_zeros_like(elem)
            elif return_disconnected == "None":
                rval[i] = None
    return _format_as(using_list, using_tuple, rval)


def _check_consider_constant(consider_constant) -> list:
    if consider_constant is None:
        return []
    if isinstance(consider_constant, Variable) or not hasattr(consider_constant, "__iter__"):
        raise TypeError(
            "grad: consider_constant must be a list of Variables, got "
            f"{type(consider_constant).__name__}"
        )
    out = list(consider_constant)
    for elem in out:
        if not isinstance(elem, Variable):
            raise TypeError(
                f"grad: elements of consider_constant must be Variables, got "
                f"{elem!r} of type {type(elem).__name__}"
            )
    return out


def _check_known_grads(known_grads) -> dict:
    if known_grads is None:
        return {}
    if not isinstance(known_grads, Mapping):
        raise TypeError(
            "grad: known_grads must be a dict {variable: gradient}, got "
            f"{type(known_grads).__name__}"
        )
    out = {}
    for var, g in known_grads.items():
        if not isinstance(var, Variable):
            raise TypeError(f"grad: known_grads keys must be Variables, got {var!r}")
        if not isinstance(g, Variable):
            g = tt.as_tensor_variable(g)
        if not _is_placeholder(g):
            dt = _dtype(g)
            if dt is None or not dt.startswith(("float", "complex")):
                raise TypeError(
                    f"grad: the known gradient of {var} must be a float tensor, "
                    f"NullType or DisconnectedType, got type {g.type}"
                )
            # Fewer dimensions broadcast (Theano accepts a scalar gradient for a vector).
            nd, g_nd = getattr(var.type, "ndim", None), getattr(g.type, "ndim", None)
            if nd is not None and g_nd is not None and nd < g_nd:
                raise ValueError(
                    f"grad: the known gradient of {var} has {g_nd} dimensions, "
                    f"but {var} has {nd}"
                )
        out[var] = g
    return out


def _handle_disconnected(var, disconnected_inputs):
    message = (
        "grad method was asked to compute the gradient with respect to a variable that is "
        "not part of the computational graph of the cost, or is used only by a "
        f"non-differentiable operator: {var}"
    )
    if disconnected_inputs == "raise":
        raise DisconnectedInputError(message)
    if disconnected_inputs == "warn":
        warnings.warn(message, stacklevel=3)


def _populate_grad_dict(var_to_app_to_idx, grad_dict, wrt, cost_name, patterns):
    """Fill ``grad_dict`` for every variable that connects ``wrt`` to the outputs.

    Nodes run in reverse topological order, so by the time a node runs, every consumer
    of its outputs has contributed its term and the output gradients are final.
    """
    relevant = {}
    for apps in var_to_app_to_idx.values():
        relevant.update(dict.fromkeys(apps))

    def deps(node):
        return [i.owner for i in node.inputs if i.owner in relevant]

    order = general_toposort(list(relevant), deps)
    term_dict: dict = {}

    def total_grad(var):
        if var in grad_dict:
            return grad_dict[var]
        null_terms, terms = [], []
        for node, idxs in var_to_app_to_idx.get(var, {}).items():
            for idx in idxs:
                term = term_dict[node][idx]
                if isinstance(term.type, NullType):
                    null_terms.append(term)
                elif not isinstance(term.type, DisconnectedType):
                    v_nd, t_nd = getattr(var.type, "ndim", None), getattr(term.type, "ndim", None)
                    if v_nd is not None and t_nd is not None and v_nd != t_nd:
                        raise ValueError(
                            f"{node.op}.grad returned a term with {t_nd} dimensions for input "
                            f"{idx} ({var}), but {v_nd} are required"
                        )
                    terms.append(term)
        if null_terms:
            g = null_terms[0]
        elif len(terms) == 1:
            g = terms[0]
        elif terms and any(isinstance(t.type, SparseType) for t in terms):
            g = functools.reduce(operator.add, terms)  # sparse.add: sparse or dense as due
        elif terms:
            g = tt.add(*terms)
        else:
            g = disconnected_type()
        # A single term may be another variable's gradient passed through: keep its name.
        if cost_name and var.name and not _is_placeholder(g) and g.name is None:
            g.name = f"(d{cost_name}/d{var.name})"
        grad_dict[var] = g
        return g

    for node in reversed(order):
        output_grads = [total_grad(o) for o in node.outputs]
        term_dict[node] = _node_input_grads(node, output_grads, _node_to_pattern(node, patterns))
    return [total_grad(elem) for elem in wrt]


def _node_input_grads(node, output_grads, pattern) -> list:
    """The terms ``node`` contributes to its inputs' gradients, with Theano's checks."""
    inputs = node.inputs
    outputs_connected = [not isinstance(g.type, DisconnectedType) for g in output_grads]
    ograd_is_null = [isinstance(g.type, NullType) for g in output_grads]
    inputs_connected = [any(p and c for p, c in zip(row, outputs_connected)) for row in pattern]
    only_null = [
        not any(p and c and not n for p, c, n in zip(row, outputs_connected, ograd_is_null))
        for row in pattern
    ]
    if not any(inputs_connected):
        return [disconnected_type() for _ in inputs]
    if all(only_null):
        # Every connected path carries an undefined gradient: pass the first one on.
        return [
            next(g for p, g in zip(row, output_grads) if p and isinstance(g.type, NullType))
            if conn
            else disconnected_type()
            for row, conn in zip(pattern, inputs_connected)
        ]

    # An op that overwrites an input would break a grad graph that reads it: give copies.
    destroyed = {node.inputs[idx[0]] for idx in getattr(node.op, "destroy_map", {}).values()}
    op_inputs = [i.copy() if i in destroyed and hasattr(i, "copy") else i for i in inputs]

    # Float outputs get gradients of their own dtype (no silent float64 in a float32 graph).
    new_output_grads = []
    for o, og in zip(node.outputs, output_grads):
        o_dt, og_dt = _dtype(o), _dtype(og)
        if og_dt is not None and o_dt is not None and not _is_discrete(o) and o_dt != og_dt:
            og = tt.cast(og, o_dt)
        new_output_grads.append(og)

    try:
        input_grads = node.op.L_op(op_inputs, node.outputs, new_output_grads)
    except MethodNotDefined:
        input_grads = [
            grad_not_implemented(node.op, i, inp) if conn else disconnected_type()
            for i, (inp, conn) in enumerate(zip(inputs, inputs_connected))
        ]
    if input_grads is None:
        raise TypeError(f"{node.op}.grad returned None, expected a list of gradient terms")
    input_grads = list(input_grads)
    if len(input_grads) != len(inputs):
        raise ValueError(
            f"{node.op}.grad returned {len(input_grads)} gradient terms for "
            f"{len(inputs)} inputs"
        )

    # Undefined output gradients make every input they reach undefined too.
    for i, row in enumerate(pattern):
        for k, is_null in enumerate(ograd_is_null):
            g = input_grads[i]
            if is_null and row[k] and isinstance(g, Variable):
                if not isinstance(g.type, DisconnectedType):
                    input_grads[i] = output_grads[k]

    output_is_int = [_is_discrete(o) for o in node.outputs]
    for i, term in enumerate(input_grads):
        if term is None:
            raise TypeError(
                f"{node.op}.grad returned None for the gradient of input {i}; return "
                "zeros_like(input), disconnected_type() or a NullType variable "
                "(grad_undefined / grad_not_implemented) instead"
            )
        if not isinstance(term, Variable):
            raise TypeError(f"{node.op}.grad returned {term!r} for input {i}, expected a Variable")
        connected = inputs_connected[i]
        actually_connected = not isinstance(term.type, DisconnectedType)
        if actually_connected and not connected:
            raise TypeError(
                f"{node.op}.grad returned {term} of type {term.type} for input {i}; its "
                "connection_pattern says that input is disconnected, so DisconnectedType "
                "was expected"
            )
        if connected and not actually_connected:
            msg = f"{node.op}.grad returned DisconnectedType for input {i}, which "
            if type(node.op).connection_pattern is not Op.connection_pattern:
                raise TypeError(msg + "its connection_pattern says is connected")
            warnings.warn(
                msg + "is connected by default; implement connection_pattern", stacklevel=4
            )
        if _is_placeholder(term):
            continue
        dt = _dtype(term)
        if dt is not None and not dt.startswith(("float", "complex")):
            raise TypeError(
                f"{node.op}.grad illegally returned an integer-valued variable "
                f"(input index {i}, dtype {dt}); gradients must be float"
            )
        only_int = not any(
            p and c and not is_int
            for p, c, is_int in zip(pattern[i], outputs_connected, output_is_int)
        )
        if only_int and _is_zero(term) == "no":
            raise ValueError(
                f"{node.op}.grad returned a nonzero gradient {term} for input {i}, which "
                "reaches the cost only through integer-valued outputs (it must be zero)"
            )
        if only_int and _is_discrete(inputs[i]):
            # An integer input that reaches the cost only through integer outputs: its
            # gradient is zero (the function is piecewise constant there); a float zero
            # keeps the gradient graph in floats. Through a float output (dot(X, W) of
            # an integer X) it is the op's gradient, as if the integers were reals: what
            # Theano gives.
            input_grads[i] = _float_zeros_like(inputs[i])
    return input_grads


def _is_zero(x) -> str:
    """'yes', 'no' or 'maybe': whether ``x`` is known to be all zeros."""
    if isinstance(x.type, NullType):
        return "no"
    if isinstance(x.type, DisconnectedType):
        return "yes"
    try:
        value = tt.get_scalar_constant_value(x)
    except Exception:
        return "maybe"
    return "yes" if value == 0 else "no"


# ---------------------------------------------------------------------------
# L and R operators


def Lop(
    f,
    wrt,
    eval_points,
    consider_constant=None,
    disconnected_inputs="raise",
    return_disconnected="zero",
):  # noqa: N802 (Theano's name)
    """Return ``eval_points`` (one per ``f``) left-multiplied by the Jacobian of ``f``.

    ``Lop(f, wrt, v)[j] = sum_i v[i] . d f[i] / d wrt[j]`` (vector-Jacobian product).

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> x, v = tt.dvector("x"), tt.dvector("v")
    >>> g = Lop(x ** 2, x, v)
    >>> g.eval({x: np.array([1.0, 2.0]), v: np.array([1.0, 10.0])})
    array([ 2., 40.])
    """
    using_list, using_tuple = isinstance(wrt, list), isinstance(wrt, tuple)
    f, eval_points = _as_list(f), _as_list(eval_points)
    if len(f) != len(eval_points):
        raise ValueError(
            f"Lop: f has {len(f)} variables but eval_points has "
            f"{len(eval_points)}; give one eval point per output"
        )
    known = {}
    for out, v in zip(f, eval_points):
        if not isinstance(out, Variable):
            raise TypeError(f"Lop: f must contain symbolic Variables, got {out!r}")
        if out in known:
            raise ValueError(f"Lop: {out} appears twice in f")
        known[out] = v
    ret = grad(
        cost=None,
        wrt=_as_list(wrt),
        known_grads=known,
        consider_constant=consider_constant,
        disconnected_inputs=disconnected_inputs,
        return_disconnected=return_disconnected,
    )
    return _format_as(using_list, using_tuple, ret)


def Rop(
    f,
    wrt,
    eval_points,
    disconnected_outputs="raise",
    return_disconnected="zero",
    use_op_rop_implementation=False,
):  # noqa: N802 (Theano's name)
    """Return the Jacobian of ``f`` right-multiplied by ``eval_points`` (one per ``wrt``).

    ``Rop(f, wrt, v)[i] = sum_j d f[i] / d wrt[j] . v[j]`` (Jacobian-vector product).
    By default it is built from two reverse passes (the L-operator applied twice, with
    the cotangent ``u`` of ``f`` as a dummy: ``Lop(Lop(f, wrt, u), u, v)``), so every op
    with a gradient works; ``use_op_rop_implementation=True`` uses each ``Op.R_op``, as
    does a graph with an op whose R-operator the user gave (``overrides_rop``, as an
    ``OpFromGraph`` with ``rop_overrides``). An output reached from ``wrt`` only through
    an undefined gradient raises ``NullTypeRopError``. As in Theano, an output computed
    differentiably from another float variable or constant (not from ``wrt``) gives
    zeros; one that is itself such a variable, or an integer, or reached from them only
    through a shape or an op without a gradient, is disconnected
    (``disconnected_outputs``).

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> x, v = tt.dvector("x"), tt.dvector("v")
    >>> jv = Rop(x ** 2, x, v)
    >>> jv.eval({x: np.array([1.0, 2.0]), v: np.array([1.0, 10.0])})
    array([ 2., 40.])
    """
    _check_choice("disconnected_outputs", disconnected_outputs, ("ignore", "warn", "raise"))
    _check_choice("return_disconnected", return_disconnected, ("zero", "None", "Disconnected"))
    using_list, using_tuple = isinstance(f, list), isinstance(f, tuple)
    fs = [tt.as_tensor_variable(x) for x in _as_list(f)]
    wrt = [tt.as_tensor_variable(x) for x in _as_list(wrt)]
    eval_points = [tt.as_tensor_variable(x) for x in _as_list(eval_points)]
    if len(wrt) != len(eval_points):
        raise ValueError(
            f"Rop: wrt has {len(wrt)} variables but eval_points has "
            f"{len(eval_points)}; give one eval point per wrt variable"
        )
    for i, (w, v) in enumerate(zip(wrt, eval_points)):
        if w.type.ndim != v.type.ndim:
            raise ValueError(
                f"Rop: element {i} of wrt/eval_points have mismatched "
                f"dimensionality: {w} has {w.type.ndim}, its eval point "
                f"{v} has {v.type.ndim}"
            )
    # An op whose R-operator is the user's (OpFromGraph's rop_overrides) is honoured: the
    # forward pass over R_op then runs, as Theano's Rop always did.
    overridden = any(getattr(n.op, "overrides_rop", False) for n in io_toposort(wrt, fs))
    try:
        if use_op_rop_implementation or overridden:
            rval = _rop_legacy(fs, wrt, eval_points)
        else:
            rval = _pushforward_through_pullback(fs, wrt, eval_points)
    except NullTypeGradError as error:
        if isinstance(error, NullTypeRopError):
            raise
        raise NullTypeRopError(f"Rop: the Jacobian of f is undefined; {error}") from error
    if not overridden:
        rval = _keep_wrt(fs, wrt, eval_points, rval)
    out = []
    for k, (fk, r) in enumerate(zip(fs, rval)):
        if fk in wrt:
            r = eval_points[wrt.index(fk)]
        if r is None and fk.owner is not None and _reached_from_a_leaf(fk, wrt):
            # Not differentiably from wrt, but from another variable or constant: Theano's
            # forward pass gave it zeros (their eval points are zeros), not an error.
            r = _float_zeros_like(fk)
        if r is None:
            msg = (
                "Rop was asked for an output that does not depend on any variable of "
                f"wrt, or only through non-differentiable operators: f[{k}] = {fk}"
            )
            if disconnected_outputs == "raise":
                raise DisconnectedInputError(msg)
            if disconnected_outputs == "warn":
                warnings.warn(msg, stacklevel=2)
            if return_disconnected == "zero":
                r = _float_zeros_like(fk)
            elif return_disconnected == "Disconnected":
                r = disconnected_type()
        out.append(r)
    return _format_as(using_list, using_tuple, out)


def _keep_wrt(fs, wrt, eval_points, rval) -> list:
    """``rval`` with each eval point whose ``wrt`` variable f reaches but the result does not
    (f linear in it: ``Rop(dot(x, W), W, V) = dot(x, V)``) checked against that variable's
    shape, the R-operator's contract. Theano's results kept such a ``wrt`` in their
    graph, so a function given it as an input does not find it unused; and a ``V`` of
    another shape than ``W`` raises rather than giving a result of another shape."""
    built = [r for r in rval if r is not None]
    reached, kept = set(graph_inputs(fs)), set(graph_inputs(built))
    ties = {
        v: tt.specify_shape(v, w.shape)
        for w, v in zip(wrt, eval_points)
        if w.type.ndim > 0 and w in reached and w not in kept and v in kept
    }
    if not ties:
        return rval
    tied = iter(clone_replace(built, replace=ties))
    return [None if r is None else next(tied) for r in rval]


def _reached_from_a_leaf(f, wrt) -> bool:
    """Whether a float variable or constant of ``f``'s graph other than ``wrt`` reaches
    ``f`` through differentiable ops (where Theano's forward pass carried its zero eval
    point to ``f``; through a shape or an argmax it carried none)."""
    floats = tt.float_dtypes
    if getattr(f.type, "dtype", None) not in floats:
        return False  # an integer (an argmax): Theano's R-operators carried nothing there
    leaves = [
        v for v in graph_inputs([f]) if v not in wrt and getattr(v.type, "dtype", None) in floats
    ]
    if not leaves:
        return False
    got = grad(
        None,
        leaves,
        known_grads={f: _float_zeros_like(f)},
        disconnected_inputs="ignore",
        return_disconnected="None",
        null_gradients="return",  # (an op without a gradient carries no eval point)
    )
    return any(g is not None and not isinstance(g.type, NullType) for g in got)


def _pushforward_through_pullback(fs, wrt, eval_points) -> list:
    """``J v`` as ``Lop(Lop(f, wrt, u), u, v)``; None where an output is disconnected.

    ``Lop(f, wrt, u) = u^T J`` is linear in the dummy cotangent ``u``, so its gradient
    with respect to ``u`` along ``v`` is ``J v`` (J. Towns, "A new trick for calculating
    Jacobian vector products", 2017). ``u`` only ever meets zeros; the optimizer cleans up.
    """
    cotangents = [_float_zeros_like(out) for out in fs]
    if _one_feeds_another(fs):
        # A known output gradient stands for the output's whole gradient (Lop's rule), so
        # with f = [m, m + v] the path from m + v back to m would be dropped: write the
        # pullback as the gradient of one scalar, sum_i <u_i, f_i>, instead.
        cost = _sum_of_inner_products(zip(fs, cotangents))
        input_cot = grad(cost, list(wrt), disconnected_inputs="ignore")
    else:
        input_cot = Lop(fs, list(wrt), cotangents, disconnected_inputs="ignore")
    known = {}
    for c, v in zip(input_cot, eval_points):
        # The same cotangent can serve two wrt entries: their eval points add up.
        known[c] = known[c] + v if c in known else v
    if _one_feeds_another(list(known)):
        # One input's cotangent computed from another's (Rop(a - b, [a, b], ...): the
        # cotangent of a is u itself, b's is -u): as known gradients the first would stand
        # for u's whole gradient and drop b's term, so differentiate sum_j <c_j, v_j>.
        cost = _sum_of_inner_products(known.items())
        return grad(cost, cotangents, disconnected_inputs="ignore", return_disconnected="None")
    return grad(
        None,
        cotangents,
        known_grads=known,
        disconnected_inputs="ignore",
        return_disconnected="None",
    )


def _sum_of_inner_products(pairs):
    """``sum_i <a_i, b_i>`` of the pairs ``(a_i, b_i)``: one scalar whose gradient stands
    for every path, where known gradients would each stand for a variable's whole one."""
    cost = None
    for a, b in pairs:
        term = (a * b).sum()
        cost = term if cost is None else cost + term
    return cost


def _one_feeds_another(fs) -> bool:
    """Whether one of the outputs ``fs`` is computed from another (or given twice)."""
    if len(set(fs)) < len(fs):
        return True
    outs = set(fs)
    for f in fs:
        if f.owner is not None and any(
            v in outs for node in io_toposort([], [f]) for v in node.inputs
        ):
            return True
    return False


def _rop_legacy(fs, wrt, eval_points) -> list:
    """Forward pass over ``Op.R_op`` in topological order; None where disconnected.

    A node whose op has no ``R_op`` is pushed forward through its gradient instead.
    """
    point = dict(zip(wrt, eval_points))
    for node in io_toposort(wrt, fs):
        if not any(point.get(i) is not None for i in node.inputs):
            continue  # does not depend on wrt: its R_op would be all zeros
        local = []
        for inp in node.inputs:
            p = point.get(inp)
            if p is None and not isinstance(inp.type, NullType):
                try:
                    p = inp.zeros_like()
                except Exception:  # non-tensor inputs (random states...) have no tangent
                    p = None
            if p is not None and p.type != inp.type:
                p = inp.type.filter_variable(tt.cast(p, inp.type.dtype))
            local.append(p)
        moving = {i: point[i] for i in node.inputs if point.get(i) is not None}
        try:
            outs = list(node.op.R_op(node.inputs, local))
        except MethodNotDefined:
            outs = _node_pushforward(node, moving, node.outputs)
        for k, (o, r) in enumerate(zip(node.outputs, outs)):
            if r is None and _dtype(o) is not None and not _is_discrete(o):
                # None from R_op means "zero" or "undefined": the pullback tells them apart
                # (None where disconnected, NullTypeGradError where undefined), so a path
                # through an op without a derivative is never dropped as if it were zero.
                outs[k] = _node_pushforward(node, moving, [o])[0]
        for o, r in zip(node.outputs, outs):
            if o not in point:
                point[o] = r
    return [point.get(fk) for fk in fs]


def _node_pushforward(node, moving, outputs) -> list:
    """``J v`` of ``outputs`` (some of ``node``'s) through ``node`` alone: ``moving`` maps
    its inputs that carry a tangent to the tangent. Those inputs are fresh variables in a
    copy of the node, so that a node reading ``x`` and a function of ``x`` (``x +
    abs(x)``) counts the path through the function once, in that function's own step
    (the pullback through the graph itself went back through it again)."""
    fresh = {i: i.type() for i in moving}
    copy = node.clone_with_new_inputs([fresh.get(i, i) for i in node.inputs])
    place = {o: k for k, o in enumerate(node.outputs)}
    rs = _pushforward_through_pullback(
        [copy.outputs[place[o]] for o in outputs], list(fresh.values()), list(moving.values())
    )
    back = {f: i for i, f in fresh.items()}
    return [None if r is None else clone_replace(r, replace=back) for r in rs]


def subgraph_grad(wrt, end, start=None, cost=None, details=False):
    """Gradients with respect to ``wrt`` and ``end`` of ``cost`` and/or known ``start``
    gradients, treating ``end`` as constants (backpropagate one stage at a time).

    Returns ``(wrt_grads, end_grads)`` (plus the start and cost parts if ``details``).

    >>> import theano_dag.tensor as tt
    >>> x = tt.dscalar("x")
    >>> h = x * 3.0
    >>> (gx,), (gh,) = subgraph_grad([x], [h], cost=h ** 2)
    >>> float(gh.eval({x: 1.0})), float(gx.eval({x: 1.0}))
    (6.0, 0.0)
    """
    if cost is None and start is None:
        raise ValueError("subgraph_grad: give a cost, start gradients, or both")
    if not isinstance(end, list) or not isinstance(wrt, list):
        raise TypeError("subgraph_grad: wrt and end must be lists")
    params = list(dict.fromkeys(wrt + end))
    parts = []
    start_grads = cost_grads = None
    if start is not None:
        start_grads = grad(
            None, params, known_grads=start, consider_constant=end, disconnected_inputs="ignore"
        )
        parts.append(start_grads)
    if cost is not None:
        cost_grads = grad(cost, params, consider_constant=end, disconnected_inputs="ignore")
        parts.append(cost_grads)
    grads = parts[0] if len(parts) == 1 else [a + b for a, b in zip(*parts)]
    by_param = dict(zip(params, grads))
    wrt_grads, end_grads = [by_param[k] for k in wrt], [by_param[k] for k in end]
    if details:
        return wrt_grads, end_grads, start_grads, cost_grads
    return wrt_grads, end_grads
