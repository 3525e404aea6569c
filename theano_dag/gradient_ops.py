"""Ops that exist for differentiation: gradient-shaping identities and the row loop.

The identity ops (``ZeroGrad``, ``DisconnectedGrad``, ``UndefinedGrad``,
``ConsiderConstant``, ``GradClip``, ``GradScale``) return their input unchanged and only
change what ``grad`` does when it passes through them. They run (``perform`` returns a
view of the input) but the optimizer ought to remove them before a function runs.

``MapOverIndex`` stacks ``f(i, ...)`` for ``i in range(n)``; ``jacobian`` and ``hessian``
build their rows with it (Theano uses ``scan`` for this).
"""

from __future__ import annotations

import numpy as np

from theano_dag.compile.ops import ViewOp
from theano_dag.graph.basic import Apply, Constant, Variable, clone_replace, io_toposort
from theano_dag.graph.op import Op
from theano_dag.gradient_types import disconnected_type, grad_undefined

__all__ = [
    "ZeroGrad",
    "DisconnectedGrad",
    "UndefinedGrad",
    "ConsiderConstant",
    "GradClip",
    "GradScale",
    "MapOverIndex",
    "zero_grad",
    "disconnected_grad",
    "undefined_grad",
    "consider_constant",
    "grad_clip",
    "grad_scale",
    "map_over_index",
]


def _tt():
    import theano_dag.tensor as tt

    return tt


class _GradIdentity(ViewOp):
    """Identity in the forward pass (a view of its input); subclasses set the gradient.

    Being ViewOps, they are what the optimizer's view-removing rewrite takes out.
    """

    __props__ = ()

    def make_node(self, x):
        if not isinstance(x, Variable):
            x = _tt().as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = inputs[0]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def R_op(self, inputs, eval_points):
        return list(eval_points)


class ZeroGrad(_GradIdentity):
    """Identity whose gradient is zero (the graph behind it still counts as connected)."""

    def grad(self, inputs, output_grads):
        return [_tt().zeros_like(output_grads[0])]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        return [_tt().zeros_like(eval_points[0])]


class ConsiderConstant(ZeroGrad):
    """Theano's older name for ``ZeroGrad`` (what ``consider_constant(x)`` applies)."""


class DisconnectedGrad(_GradIdentity):
    """Identity that cuts the graph for ``grad``: nothing behind it is differentiated."""

    def grad(self, inputs, output_grads):
        return [disconnected_type()]

    def R_op(self, inputs, eval_points):
        return [None]

    def connection_pattern(self, node):
        return [[False]]


class UndefinedGrad(_GradIdentity):
    """Identity whose gradient is undefined: ``grad`` through it raises NullTypeGradError."""

    def grad(self, inputs, output_grads):
        return [grad_undefined(self, 0, inputs[0])]

    def R_op(self, inputs, eval_points):
        return [None]


class GradClip(_GradIdentity):
    """Identity whose gradient is clipped to ``[clip_lower_bound, clip_upper_bound]``."""

    __props__ = ("clip_lower_bound", "clip_upper_bound")

    def __init__(self, clip_lower_bound, clip_upper_bound):
        if clip_upper_bound < clip_lower_bound:
            raise ValueError(f"GradClip: the upper bound {clip_upper_bound} is below the "
                             f"lower bound {clip_lower_bound}")
        self.clip_lower_bound = clip_lower_bound
        self.clip_upper_bound = clip_upper_bound

    def grad(self, inputs, output_grads):
        return [_tt().clip(output_grads[0], self.clip_lower_bound, self.clip_upper_bound)]


class GradScale(_GradIdentity):
    """Identity whose gradient is multiplied by ``multiplier``."""

    __props__ = ("multiplier",)

    def __init__(self, multiplier):
        self.multiplier = multiplier

    def grad(self, inputs, output_grads):
        return [output_grads[0] * self.multiplier]


def zero_grad(x):
    """Return ``x`` unchanged, but with a zero gradient.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.gradient import grad
    >>> x = tt.dscalar("x")
    >>> float(grad(x * zero_grad(x), x).eval({x: 3.0}))
    3.0
    """
    return ZeroGrad()(x)


def disconnected_grad(x):
    """Return ``x`` unchanged, but with no gradient path through it (faster than zero_grad).

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.gradient import grad
    >>> x = tt.dscalar("x")
    >>> float(grad(x * disconnected_grad(x), x).eval({x: 3.0}))
    3.0
    """
    return DisconnectedGrad()(x)


def undefined_grad(x):
    """Return ``x`` unchanged, but with an undefined gradient (``grad`` through it raises).

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.gradient import grad
    >>> x = tt.dscalar("x")
    >>> grad(undefined_grad(x) * 2, x)
    Traceback (most recent call last):
    ...
    theano_dag.gradient.NullTypeGradError: grad: the gradient with respect to x is undefined...
    """
    return UndefinedGrad()(x)


def consider_constant(x):
    """Deprecated (as in Theano): use ``zero_grad`` or ``disconnected_grad``.

    >>> import warnings
    >>> import theano_dag.tensor as tt
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     y = consider_constant(tt.dscalar("x"))
    >>> y.owner.op
    ConsiderConstant
    """
    import warnings

    warnings.warn("consider_constant() is deprecated, use zero_grad() or disconnected_grad()",
                  DeprecationWarning, stacklevel=2)
    return ConsiderConstant()(x)


def grad_clip(x, lower_bound, upper_bound):
    """Return ``x`` unchanged; its gradient is clipped to ``[lower_bound, upper_bound]``.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.gradient import grad
    >>> x = tt.dscalar("x")
    >>> float(grad(grad_clip(x, -1, 1) ** 2, x).eval({x: 2.0}))
    1.0
    """
    return GradClip(lower_bound, upper_bound)(x)


def grad_scale(x, multiplier):
    """Return ``x`` unchanged; its gradient is multiplied by ``multiplier``.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.gradient import grad
    >>> x = tt.dscalar("x")
    >>> float(grad(grad_scale(x ** 2, -0.5), x).eval({x: 2.0}))
    -2.0
    """
    return GradScale(multiplier)(x)


# ---------------------------------------------------------------------------
# A loop over a row index


class MapOverIndex(Op):
    """``out[k][i] = inner_outputs[k](i, *args)`` for ``i in range(n)``, stacked on axis 0.

    ``inner_inputs[0]`` is the integer row index; the others stand for the op's inputs
    after ``n``. ``row_shape_of[k]`` names the argument whose shape is row ``k``'s shape
    (for ``infer_shape`` and for ``n == 0``). The inner graph is compiled once, on first run.
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
        tt = _tt()
        n = tt.as_tensor_variable(n)
        if n.type.ndim != 0 or not n.type.dtype.startswith(("int", "uint")):
            raise TypeError(f"{self}: n must be an integer scalar, got {n} of type {n.type}")
        if len(args) != len(self.inner_inputs) - 1:
            raise TypeError(f"{self}: expected {len(self.inner_inputs) - 1} arguments after n, "
                            f"got {len(args)}")
        args = [a if isinstance(a, Variable) else tt.as_tensor_variable(a) for a in args]
        for k, (a, inner) in enumerate(zip(args, self.inner_inputs[1:])):
            if a.type != inner.type:
                raise TypeError(f"{self}: argument {k} should have type {inner.type}, "
                                f"got {a} of type {a.type}")
        outs = [
            tt.TensorType(o.type.dtype, broadcastable=(False, *o.type.broadcastable))()
            for o in self.inner_outputs
        ]
        return Apply(self, [n, *args], outs)

    def _function(self):
        if self._fn is None:
            from theano_dag.compile.function import function

            self._fn = function(list(self.inner_inputs), list(self.inner_outputs),
                                mode=self.mode, on_unused_input="ignore")
        return self._fn

    def perform(self, node, inputs, output_storage, params=None):
        n, *args = inputs
        fn = self._function()
        idx_dtype = self.inner_inputs[0].type.dtype
        rows = [fn(np.asarray(i, dtype=idx_dtype), *args) for i in range(int(n))]
        for k, (cell, out) in enumerate(zip(output_storage, node.outputs)):
            if rows:
                cell[0] = np.stack([np.asarray(r[k]) for r in rows]).astype(out.type.dtype)
            else:
                j = self.row_shape_of[k]
                row_shape = np.shape(args[j]) if j is not None else ()
                cell[0] = np.zeros((0, *row_shape), dtype=out.type.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        from theano_dag.graph.utils import MethodNotDefined

        if any(j is None for j in self.row_shape_of):
            raise MethodNotDefined(f"{self}: the shape of some rows is unknown")
        n = node.inputs[0]
        return [(n, *input_shapes[1 + j]) for j in self.row_shape_of]

    def connection_pattern(self, node):
        nout = len(node.outputs)
        return [[False] * nout] + [[True] * nout for _ in node.inputs[1:]]

    def L_op(self, inputs, outputs, output_grads):
        # d/d args of sum_i <g[i], f(i, args)> = sum_i Lop(f(i, args), args, g[i]):
        # rewrite the inner graph over the outer variables and loop again.
        from theano_dag.gradient import Lop
        from theano_dag.gradient_types import DisconnectedType

        tt = _tt()
        n, *args = inputs
        idx = self.inner_inputs[0].type("grad_row")
        outer = {self.inner_inputs[0]: idx, **dict(zip(self.inner_inputs[1:], args))}
        f_rows, g_rows = [], []
        for out, g in zip(self.inner_outputs, output_grads):
            if not isinstance(g.type, DisconnectedType):
                f_rows.append(out)
                g_rows.append(g[idx])
        f_rows = clone_replace(f_rows, outer)
        terms = Lop(f_rows, list(args), g_rows, disconnected_inputs="ignore")
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
    tt = _tt()
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
