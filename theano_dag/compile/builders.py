"""``OpFromGraph``: a graph used as one op (``theano.compile.builders``), and the rewrite
that inlines it.

The inner graph is compiled once, on first run, by the engines' entry point for inner
graphs (``engines.inner.compile_inner``). Its gradient and R-operator are the inner
graph's own, unless overridden as in Theano (``lop_overrides``, ``grad_overrides``,
``rop_overrides``). With ``inline=True`` the rewrite ``local_inline_ofg`` (in
canonicalize, FAST_COMPILE too) puts the inner graph in place of the node, so the
optimizer sees through it.
"""

from __future__ import annotations

import functools
import operator

from theano_dag import tensor as tt
from theano_dag.config import config
from theano_dag.engines.inner import compile_inner
from theano_dag.gradient.reverse import Rop, grad
from theano_dag.graph.algorithms import io_connection_pattern
from theano_dag.graph.basic import (
    Apply,
    Constant,
    Variable,
    clone_replace,
    graph_inputs,
    io_toposort,
)
from theano_dag.graph.null_type import DisconnectedType
from theano_dag.graph.op import Op, compute_test_value
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.graph.shared import SharedVariable
from theano_dag.opt.optdb import register_canonicalize

__all__ = ["OpFromGraph", "local_inline_ofg"]

_DEFAULT = "default"


def _is_float(var):
    return str(getattr(var.type, "dtype", "")).startswith(("float", "complex"))


class OpFromGraph(Op):
    """The graph from ``inputs`` to ``outputs`` as one op: ``op(*values)`` applies it.

    Shared variables the graph reads become extra inputs, added by each call.
    ``lop_overrides`` is ``'default'``, a callable ``(inputs, outputs, output_grads) ->
    grads``, or a list with one entry per input (``'default'``, a callable, or a
    variable such as ``disconnected_type()``); ``grad_overrides`` the same with callables
    ``(inputs, output_grads)``. ``rop_overrides``: ``'default'``, a callable ``(inputs,
    eval_points) -> outputs``, or a list per output. ``mode`` compiles the inner graph
    (None: the default mode).

    >>> import numpy as np
    >>> import theano_dag
    >>> import theano_dag.tensor as tt
    >>> x, y = tt.dscalars("x", "y")
    >>> op = OpFromGraph([x, y], [x * y + 1])
    >>> a, b = tt.dscalars("a", "b")
    >>> f = theano_dag.function([a, b], [op(a, b), theano_dag.grad(op(a, b), a)])
    >>> [float(v) for v in f(2.0, 3.0)]
    [7.0, 3.0]
    """

    def __init__(
        self,
        inputs,
        outputs,
        inline=False,
        lop_overrides=_DEFAULT,
        grad_overrides=_DEFAULT,
        rop_overrides=_DEFAULT,
        connection_pattern=None,
        name=None,
        mode=None,
        **kwargs,
    ):
        if not isinstance(outputs, (list, tuple)):
            outputs = [outputs]
        inputs, outputs = list(inputs), list(outputs)
        for v in inputs + outputs:
            if not isinstance(v, Variable):
                raise TypeError(f"OpFromGraph: inputs and outputs must be Variables, got {v!r}")
        for v in inputs:
            if v.owner is not None or isinstance(v, Constant):
                raise TypeError(
                    f"OpFromGraph: input {v} must be a free variable (no owner, not a constant)"
                )
        known = set(inputs)
        shared, missing = [], []
        for v in graph_inputs(outputs):
            if v in known or isinstance(v, Constant):
                continue
            (shared if isinstance(v, SharedVariable) else missing).append(v)
        if missing:
            raise ValueError(
                f"OpFromGraph: the outputs depend on {missing}, which are not in inputs"
            )
        holders = [v.type() for v in inputs + shared]
        for h, v in zip(holders, inputs + shared):
            h.name = v.name
        self.inner_inputs = holders
        self.inner_outputs = clone_replace(outputs, dict(zip(inputs + shared, holders)))
        self.shared_inputs = shared
        self.n_explicit = len(inputs)
        self.is_inline = bool(inline)
        self.lop_overrides = lop_overrides
        self.grad_overrides = grad_overrides
        self.rop_overrides = rop_overrides
        self._connection_pattern = connection_pattern
        self.name = name
        self.mode = mode
        self._fn = None

    def __str__(self):
        return f"OpFromGraph{{{self.name or 'inline' if self.is_inline else self.name or ''}}}"

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_fn"] = None
        return state

    def make_node(self, *inputs):
        if len(inputs) == self.n_explicit:
            inputs = (*inputs, *self.shared_inputs)
        if len(inputs) != len(self.inner_inputs):
            raise TypeError(
                f"{self}: expected {self.n_explicit} inputs, "
                f"got {len(inputs) - len(self.shared_inputs)}"
            )
        checked = []
        for k, (v, inner) in enumerate(zip(inputs, self.inner_inputs)):
            v = v if isinstance(v, Variable) else tt.as_tensor_variable(v)
            try:
                checked.append(inner.type.filter_variable(v))
            except TypeError as e:
                raise TypeError(
                    f"{self}: input {k} should have type {inner.type}, got {v} of type {v.type}"
                ) from e
        return Apply(self, checked, [o.type() for o in self.inner_outputs])

    def _replace(self, node_inputs):
        return dict(zip(self.inner_inputs, node_inputs))

    def perform(self, node, inputs, output_storage, params=None):
        if self._fn is None:
            # borrow=False: no output is a view of an input (x[1:]), whose memory the
            # outer function reuses once this node has read it (no view_map is declared).
            self._fn = compile_inner(self.inner_inputs, self.inner_outputs, self.mode, borrow=False)
        for cell, value in zip(output_storage, self._fn(*inputs)):
            cell[0] = value

    def infer_shape(self, fgraph, node, input_shapes):
        shapes = [[o.shape[i] for i in range(o.type.ndim)] for o in self.inner_outputs]
        flat = [s for shp in shapes for s in shp]
        flat = clone_replace(flat, self._replace(node.inputs)) if flat else []
        out, pos = [], 0
        for shp in shapes:
            out.append(tuple(flat[pos : pos + len(shp)]))
            pos += len(shp)
        return out

    def connection_pattern(self, node):
        if self._connection_pattern is not None:
            return [list(row) for row in self._connection_pattern]
        pattern = io_connection_pattern(self.inner_inputs, self.inner_outputs)
        # An input whose gradient is overridden by a disconnected one is disconnected.
        for overrides in (self.lop_overrides, self.grad_overrides):
            if isinstance(overrides, list):
                for k, ov in enumerate(overrides):
                    if isinstance(ov, Variable) and isinstance(ov.type, DisconnectedType):
                        pattern[k] = [False] * len(pattern[k])
        return pattern

    def _default_lop(self, inputs, outputs, output_grads):
        # The inner graph's vector-Jacobian product, put on the outer variables. The
        # cotangents enter as placeholders, so that the outer ones are kept, not cloned
        # (Rop differentiates with respect to them); and as the gradient of one scalar,
        # since an output may be an intermediate of another.
        # The inner graph has no test values: it is built without them, and the outer
        # graph gets them when the gradient is put on the outer variables.
        terms, replace = [], self._replace(inputs)
        with config.change_flags(compute_test_value="off"):
            for o, g in zip(self.inner_outputs, output_grads):
                if isinstance(g.type, DisconnectedType) or not _is_float(o):
                    continue
                holder = g.type()
                replace[holder] = g
                terms.append((o * holder).sum())
            if not terms:
                return [tt.zeros_like(i) for i in inputs]
            grads = grad(
                functools.reduce(operator.add, terms),
                list(self.inner_inputs),
                disconnected_inputs="ignore",
                return_disconnected="Disconnected",
                # An input without a gradient (a random generator the draws read) gets an
                # undefined one, which fails only if a gradient asked for goes through it.
                null_gradients="return",
            )
        grads = clone_replace(grads, replace)
        if config.compute_test_value != "off":
            outer = [g for g in grads if g is not None and not isinstance(g.type, DisconnectedType)]
            for node in io_toposort(list(inputs) + list(output_grads), outer):
                if not all(hasattr(o.tag, "test_value") for o in node.outputs):
                    compute_test_value(node)
        return grads

    def L_op(self, inputs, outputs, output_grads):
        lop, grad_ov = self.lop_overrides, self.grad_overrides
        if callable(lop):
            return _call(lop, inputs, outputs, output_grads)
        if callable(grad_ov):
            return _call(grad_ov, inputs, output_grads)
        default = None
        overrides = lop if isinstance(lop, list) else grad_ov if isinstance(grad_ov, list) else None
        if overrides is None:
            return self._default_lop(inputs, outputs, output_grads)
        if len(overrides) != len(inputs):
            raise ValueError(
                f"{self}: the gradient overrides have {len(overrides)} entries for "
                f"{len(inputs)} inputs"
            )
        grads = []
        for k, ov in enumerate(overrides):
            if isinstance(ov, str) and ov == _DEFAULT:
                if default is None:
                    default = self._default_lop(inputs, outputs, output_grads)
                grads.append(default[k])
            elif callable(ov):
                args = (
                    (inputs, outputs, output_grads) if overrides is lop else (inputs, output_grads)
                )
                grads.append(_call(ov, *args)[0])
            else:
                grads.append(ov)
        return grads

    @property
    def overrides_rop(self) -> bool:
        """Whether the R-operator is the user's (``Rop`` then runs each op's ``R_op``)."""
        return not (isinstance(self.rop_overrides, str) and self.rop_overrides == _DEFAULT)

    def R_op(self, inputs, eval_points):
        rop = self.rop_overrides
        if callable(rop):
            return _call(rop, inputs, eval_points)
        holders = [p.type() if p is not None else None for p in eval_points]
        wrt = [i for i, h in zip(self.inner_inputs, holders) if h is not None]
        pts = [h for h in holders if h is not None]
        default = (
            Rop(list(self.inner_outputs), wrt, pts, disconnected_outputs="ignore") if wrt else None
        )
        replace = self._replace(inputs)
        replace.update((h, p) for h, p in zip(holders, eval_points) if h is not None)
        default = clone_replace(default, replace) if default else None
        if isinstance(rop, list):
            out = []
            for k, ov in enumerate(rop):
                if callable(ov):
                    out.append(_call(ov, inputs, eval_points)[0])
                elif isinstance(ov, str) and ov == _DEFAULT:
                    out.append(default[k])
                else:
                    out.append(ov)
            return out
        return default


def _call(override, *groups):
    """An override's result as a list: a function gets the groups of variables (inputs,
    outputs, gradients), an OpFromGraph their concatenation as its inputs (Theano's
    convention for overrides that are graphs themselves)."""
    if isinstance(override, OpFromGraph):
        out = override(*[v for group in groups for v in group])
    else:
        out = override(*groups)
    return list(out) if isinstance(out, (list, tuple)) else [out]


@register_canonicalize("fast_compile")
@local_optimizer([OpFromGraph])
def local_inline_ofg(fgraph, node):
    """An ``OpFromGraph(..., inline=True)`` node is replaced by its inner graph."""
    # op(x, y) -> the inner graph on x, y
    op = node.op
    if not isinstance(op, OpFromGraph) or not op.is_inline:
        return None
    return clone_replace(list(op.inner_outputs), op._replace(node.inputs))
