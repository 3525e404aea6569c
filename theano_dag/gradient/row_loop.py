"""Row loops for ``jacobian`` and ``hessian``: ``MapOverIndex`` and ``map_over_index``.

``MapOverIndex`` stacks ``f(i, ...)`` for ``i in range(n)`` (Theano builds Jacobians
with ``scan``; this is the one loop they need). ``map_over_index`` builds it from a graph
of a free index variable, hoisting everything that does not depend on the index out
of the loop so it is computed once.
"""

from __future__ import annotations

import functools
import operator

import numpy as np

from theano_dag import tensor as tt
from theano_dag.config import config
from theano_dag.engines.inner import compile_inner
from theano_dag.gradient.ops import _GradIdentity
from theano_dag.gradient.reverse import (
    GradArgumentError,
    GradArgumentTypeError,
    _as_list,
    _format_as,
    grad,
)
from theano_dag.graph.basic import (
    Apply,
    Constant,
    Variable,
    clone_replace,
    graph_inputs,
    io_toposort,
)
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.null_type import DisconnectedType, disconnected_type
from theano_dag.graph.op import Op
from theano_dag.graph.utils import MethodNotDefined, TestValueError

__all__ = ["MapOverIndex", "map_over_index", "jacobian", "hessian"]


def _is_float(var):
    return str(getattr(var.type, "dtype", "")).startswith(("float", "complex"))


class MapOverIndex(Op):
    """``out[k][i] = inner_outputs[k](i, *args)`` for ``i in range(n)``, stacked on axis 0.

    ``inner_inputs[0]`` is the integer row index; the others stand for the op's inputs
    after ``n``. ``row_shape_of[k]`` names the argument whose shape is row ``k``'s shape
    (for ``infer_shape`` and for ``n == 0``). The inner graph is compiled once, on first
    run, by the engines' entry point for inner graphs (``engines.inner.compile_inner``)
    with ``mode`` (None: the default mode).
    """

    __props__ = ("inner_inputs", "inner_outputs", "row_shape_of", "mode")

    def __init__(self, inner_inputs, inner_outputs, row_shape_of, mode=None):
        self.inner_inputs = tuple(inner_inputs)
        self.inner_outputs = tuple(inner_outputs)
        self.row_shape_of = tuple(row_shape_of)
        self.mode = mode
        self._fn = None

    def __str__(self):
        return f"MapOverIndex{{{len(self.inner_inputs) - 1} args, {len(self.inner_outputs)} rows}}"

    def make_node(self, n, *args):
        n = tt.as_tensor_variable(n)
        if n.type.ndim != 0 or not n.type.dtype.startswith(("int", "uint")):
            raise TypeError(f"{self}: n must be an integer scalar, got {n} of type {n.type}")
        if len(args) != len(self.inner_inputs) - 1:
            raise TypeError(
                f"{self}: expected {len(self.inner_inputs) - 1} arguments after n, "
                f"got {len(args)}"
            )
        args = [a if isinstance(a, Variable) else tt.as_tensor_variable(a) for a in args]
        for k, (a, inner) in enumerate(zip(args, self.inner_inputs[1:])):
            if a.type != inner.type:
                raise TypeError(
                    f"{self}: argument {k} should have type {inner.type}, "
                    f"got {a} of type {a.type}"
                )
        outs = [
            tt.TensorType(o.type.dtype, broadcastable=(False, *o.type.broadcastable))()
            for o in self.inner_outputs
        ]
        return Apply(self, [n, *args], outs)

    def __getstate__(self):
        # The compiled inner function is a cache; it is rebuilt on first run.
        state = dict(self.__dict__)
        state["_fn"] = None
        return state

    def _function(self):
        if self._fn is None:
            self._fn = compile_inner(
                list(self.inner_inputs), list(self.inner_outputs), self.mode, borrow=False
            )
        return self._fn

    def perform(self, node, inputs, output_storage, params=None):
        n, *args = inputs
        fn = self._function()
        idx_dtype = self.inner_inputs[0].type.dtype
        outs = None
        for i in range(int(n)):
            row = fn(np.asarray(i, dtype=idx_dtype), *args)
            if outs is None:
                outs = [
                    np.empty((int(n), *np.shape(r)), dtype=o.type.dtype)
                    for r, o in zip(row, node.outputs)
                ]
            for out, r in zip(outs, row):
                out[i] = r
        for k, (cell, out) in enumerate(zip(output_storage, node.outputs)):
            if outs is not None:
                cell[0] = outs[k]
            else:
                j = self.row_shape_of[k]
                row_shape = np.shape(args[j]) if j is not None else ()
                cell[0] = np.zeros((0, *row_shape), dtype=out.type.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        if any(j is None for j in self.row_shape_of):
            raise MethodNotDefined(f"{self}: the shape of some rows is unknown")
        n = node.inputs[0]
        return [(n, *input_shapes[1 + j]) for j in self.row_shape_of]

    def connection_pattern(self, node):
        nout = len(node.outputs)
        return [[False] * nout] + [[True] * nout for _ in node.inputs[1:]]

    def L_op(self, inputs, outputs, output_grads):
        # d/d args of sum_i <g[i], f(i, args)> = sum_i Lop(f(i, args), args, g[i]).
        # Differentiate the inner graph with respect to its placeholders (the arguments
        # are independent there; the outer grad adds how they depend on each other),
        # then put the outer variables back in and loop again.
        n, *args = inputs
        inner_idx, holders = self.inner_inputs[0], list(self.inner_inputs[1:])
        # The gradient of one scalar, sum_k <g_k[i], out_k>, not known output gradients:
        # an output that is also an intermediate of another keeps both its paths (known
        # gradients would replace the one flowing back from the other output).
        terms_of_cost, g_holders = [], {}
        for out, g in zip(self.inner_outputs, output_grads):
            if isinstance(g.type, DisconnectedType) or not _is_float(out):
                continue
            g_holder = g.type()
            g_holders[g_holder] = g
            terms_of_cost.append((out * g_holder[inner_idx]).sum())
        if not terms_of_cost:
            return [disconnected_type()] + [disconnected_type() for _ in args]
        cost = functools.reduce(operator.add, terms_of_cost)
        terms = grad(cost, holders, disconnected_inputs="ignore", return_disconnected="zero")
        idx = inner_idx.type("grad_row")
        outer = {inner_idx: idx, **dict(zip(holders, args))}
        outer.update(g_holders)
        terms = clone_replace(terms, outer)
        loops = map_over_index(idx, n, terms, row_shape_of=list(args), mode=self.mode)
        return [disconnected_type()] + [t.sum(axis=0) for t in loops]


def map_over_index(idx, n, outputs, row_shape_of=None, mode=None):
    """Return, for each of ``outputs`` (graphs of the integer scalar ``idx``), the stack of
    its values for ``idx = 0 .. n-1``.

    Nodes that do not depend on ``idx`` are computed once, outside the loop.
    ``row_shape_of`` optionally gives, per output, a variable of the row's shape.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> i, x = tt.lscalar("i"), tt.dvector("x")
    >>> (rows,) = map_over_index(i, x.shape[0], [x * i])
    >>> rows.eval({x: np.array([1.0, 2.0])})
    array([[0., 0.],
           [1., 2.]])
    """
    if not isinstance(idx, Variable) or idx.owner is not None:
        raise TypeError(f"map_over_index: idx must be a free symbolic variable, got {idx!r}")
    if getattr(idx.type, "ndim", None) != 0 or not idx.type.dtype.startswith(("int", "uint")):
        raise TypeError(f"map_over_index: idx must be an integer scalar, got type {idx.type}")
    outputs = [o if isinstance(o, Variable) else tt.as_tensor_variable(o) for o in outputs]
    if row_shape_of is None:
        row_shape_of = [None] * len(outputs)
    if len(row_shape_of) != len(outputs):
        raise ValueError("map_over_index: give one row_shape_of entry per output")

    depends = {idx}
    inner_nodes = []
    for node in io_toposort([], outputs):
        if any(i in depends for i in node.inputs):
            inner_nodes.append(node)
            depends.update(node.outputs)
    # Loop-invariant values the inner graph reads become the op's arguments.
    args: dict = {}
    for node in inner_nodes:
        for i in node.inputs:
            if i not in depends and not isinstance(i, Constant):
                args.setdefault(i)
    for o in outputs:
        if o not in depends:
            args.setdefault(o)
    shape_idx = []
    for v in row_shape_of:
        if v is None:
            shape_idx.append(None)
            continue
        args.setdefault(v)
        shape_idx.append(list(args).index(v))
    args = list(args)
    new_idx = idx.type(idx.name)
    holders = [a.type(a.name) for a in args]
    inner_outs = clone_replace(outputs, {idx: new_idx, **dict(zip(args, holders))})
    op = MapOverIndex([new_idx, *holders], inner_outs, shape_idx, mode=mode)
    n = tt.as_tensor_variable(n)
    if n.type.dtype != "int64":
        n = tt.cast(n, "int64")
    return op(n, *args, return_list=True)


# ---------------------------------------------------------------------------
# Jacobian and Hessian


def _give_first_row_test_value(idx, expression):
    """Under ``compute_test_value``, build (and check) the row graph for row 0, as
    Theano's jacobian builds it inside ``scan`` from the first index."""
    if config.compute_test_value == "off":
        return
    try:
        value = expression.get_test_value()
    except TestValueError:
        return  # the row graph's nodes report the missing value as the flag says
    if np.shape(value)[0] > 0:  # (no row 0: Theano's scan fails the same way)
        idx.tag.test_value = np.array(0, dtype=idx.type.dtype)


# The rewriting of an expression to its stable form before its rows are differentiated
# (_stable_form): theano_dag.compile, the floor that knows both this one and the optdb,
# puts here the function that applies the passes up to stabilize to a FunctionGraph
# (the optdb imports the engines, which import the scan, which differentiates here).
STABLE_FORM = []


def _keeps_its_gradient(node) -> bool:
    """Whether rewriting may take ``node`` out without changing a gradient through it:
    not a gradient-only op (``zero_grad``, ``grad_clip``...: identities in value, which
    the rewrites remove), an ``OpFromGraph`` (its gradient may be overridden, and the
    rewrites may inline it) or a scan with a truncated gradient."""
    op = node.op
    return not (
        isinstance(op, _GradIdentity)
        or hasattr(op, "lop_overrides")
        or getattr(op, "truncate_gradient", -1) != -1
    )


def _stable_form(expression, wrt):
    """``expression`` rewritten by the passes up to ``stabilize`` (``log(sum(exp(x)))`` as
    a max-shifted sum, ``log(erfc(x))`` by its asymptotic form...), over the same
    variables and ``wrt``; None where that may change a gradient or fails.

    Its rows are differentiated in a loop that reads the row-independent parts of the
    row graph as precomputed arguments (``map_over_index``), so the rewrites of the
    compiled function never see the second-order terms whole: ``exp(x)`` and
    ``sum(exp(x)) ** 2`` of the raw gradient overflowed into a NaN Hessian at x = 800.
    The derivatives of the stable form are stable.
    """
    if not STABLE_FORM:
        return None
    # wrt as inputs, intermediate or not: the rows differentiate with respect to them.
    free = graph_inputs([expression], blockers=wrt)
    inputs = list(dict.fromkeys([*wrt, *(v for v in free if not isinstance(v, Constant))]))
    try:
        fg = FunctionGraph(inputs, [expression], clone=True)
        if not all(_keeps_its_gradient(node) for node in fg.apply_nodes):
            return None
        STABLE_FORM[0](fg)
        (out,) = clone_replace(fg.outputs, dict(zip(fg.inputs, inputs)))
    except Exception:  # a graph the rewrites cannot take: differentiate it as written
        return None
    return out if out.type == expression.type else None


def jacobian(expression, wrt, consider_constant=None, disconnected_inputs="raise"):
    """Return the Jacobian of the vector ``expression``: ``J[i] = grad(expression[i], wrt)``.

    Rows are computed by a ``MapOverIndex`` loop (Theano uses ``scan``); work that does
    not depend on the row index is hoisted out of the loop. A scalar ``expression``
    gives ``grad``. The result has the form of ``wrt`` (one variable, list or tuple).

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> jacobian(x ** 2, x).eval({x: np.array([1.0, 2.0])})
    array([[2., 0.],
           [0., 4.]])
    """
    if not isinstance(expression, Variable):
        raise TypeError(f"jacobian: expression must be a symbolic Variable, got {expression!r}")
    ndim = getattr(expression.type, "ndim", None)
    if ndim is None or ndim > 1:
        raise GradArgumentError(
            f"jacobian: expression must be a scalar or a vector, but {expression} "
            f"has type {expression.type} (flatten it first)"
        )
    using_list, using_tuple = isinstance(wrt, list), isinstance(wrt, tuple)
    wrt = _as_list(wrt)
    kw = dict(consider_constant=consider_constant, disconnected_inputs=disconnected_inputs)
    if ndim == 0:
        return _format_as(using_list, using_tuple, grad(expression, wrt, **kw))
    idx = tt.lscalar("jacobian_row")
    _give_first_row_test_value(idx, expression)
    # The rows of the stable form (see _stable_form); of the expression as written where
    # it has none, or names variables (consider_constant) that the rewriting would copy.
    stable = None if consider_constant else _stable_form(expression, wrt)
    rows = None
    if stable is not None:
        try:
            rows = grad(stable[idx], wrt, **kw)
        except Exception:  # (an op of the stable form without a gradient)
            rows = None
    if rows is None:
        rows = grad(expression[idx], wrt, **kw)
    jacobs = map_over_index(idx, expression.shape[0], rows, row_shape_of=wrt)
    return _format_as(using_list, using_tuple, jacobs)


def hessian(cost, wrt, consider_constant=None, disconnected_inputs="raise"):
    """Return the Hessian of the scalar ``cost`` with respect to each vector in ``wrt``.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> hessian((x ** 3).sum(), x).eval({x: np.array([1.0, 2.0])})
    array([[ 6.,  0.],
           [ 0., 12.]])
    """
    if not isinstance(cost, Variable) or getattr(cost.type, "ndim", None) != 0:
        raise GradArgumentTypeError(f"hessian: cost must be a scalar (0-d) Variable, got {cost!r}")
    using_list, using_tuple = isinstance(wrt, list), isinstance(wrt, tuple)
    wrt = _as_list(wrt)
    hessians = []
    for w in wrt:
        if not isinstance(w, Variable) or getattr(w.type, "ndim", None) != 1:
            raise GradArgumentError(
                f"hessian: each wrt must be a vector (1-d) Variable, got {w!r} "
                f"of type {getattr(w, 'type', type(w))}"
            )
        g = grad(
            cost, w, consider_constant=consider_constant, disconnected_inputs=disconnected_inputs
        )
        # The gradient may be disconnected from w even when the cost is not (linear cost).
        hessians.append(
            jacobian(g, w, consider_constant=consider_constant, disconnected_inputs="ignore")
        )
    return _format_as(using_list, using_tuple, hessians)
