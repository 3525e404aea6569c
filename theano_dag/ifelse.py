"""``ifelse(condition, then_branch, else_branch)``: pick whole values by a scalar condition
(``theano.ifelse``).

Unlike ``switch``, which chooses element by element, ``ifelse`` returns one branch or the
other, and its branches may have different shapes.

In Theano, ``IfElse`` is *lazy* on its VM linkers: only the branch taken is computed.
theano_dag's engines run every node of the graph, so here **both branches are computed**
and the op returns the one the condition picks. The result is the same; only the time
saved by skipping a branch is not.

>>> import numpy as np
>>> import theano_dag
>>> from theano_dag import tensor as tt
>>> a, b = tt.dscalars("a", "b")
>>> x, y = tt.dvectors("x", "y")
>>> f = theano_dag.function([a, b, x, y], ifelse(tt.lt(a, b), tt.mean(x), tt.mean(y)))
>>> float(f(1.0, 2.0, np.ones(3), np.zeros(2)))
1.0
"""

from __future__ import annotations

import copy

import numpy as np

from theano_dag import tensor
from theano_dag.config import config
from theano_dag.graph.basic import Apply, Variable
from theano_dag.graph.null_type import disconnected_type, is_disconnected
from theano_dag.graph.op import Op
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.opt.optdb import register_specialize

__all__ = ["IfElse", "cond_make_inplace", "ifelse"]


def _tt():
    return tensor


def _join_types(t, f, k):
    """The type of output ``k``: both branches' type, with lengths kept where they agree."""
    tt = _tt()
    if t.type == f.type:
        return t.type
    if isinstance(t.type, tt.TensorType) and isinstance(f.type, tt.TensorType):
        if t.dtype == f.dtype and t.ndim == f.ndim:
            shape = tuple(a if a == b else None for a, b in zip(t.type.shape, f.type.shape))
            return tt.TensorType(t.dtype, shape=shape)
    raise TypeError(
        f"IfElse: the two branches of output {k} should have the same type (dtype and "
        f"number of dimensions), but they are {t.type} and {f.type}. Cast one of them, or "
        "check that both branches are lists of the same length."
    )


def _as_branch(value, other, tt):
    """A branch value as a Variable; a plain number takes the dtype of the other branch
    when it fits there exactly (``ifelse(c, 0, x)`` for a float64 ``x``)."""
    if isinstance(value, Variable):
        return value
    v = tt.as_tensor_variable(value)
    dtype = getattr(other, "dtype", None)
    if isinstance(other, Variable) and dtype is not None and dtype != v.dtype:
        data = np.asarray(value)
        with np.errstate(all="ignore"):
            same = data.dtype != object and np.array_equal(data.astype(dtype), data)
        if same:
            return tt.constant(data.astype(dtype))
    return v


class IfElse(Op):
    """``IfElse(n_outs)(condition, *then_values, *else_values)``: the ``n_outs`` then-values
    where the scalar ``condition`` is nonzero, else the else-values (copies).

    Both branches are computed (see the module docstring). The gradient of a branch is the
    output gradient where that branch was taken, zeros where it was not.

    >>> from theano_dag import tensor as tt
    >>> IfElse(1)(tt.bscalar("c"), tt.dvector("t"), tt.dvector("e")).type
    TensorType(float64, vector)
    """

    __props__ = ("as_view", "gpu", "n_outs")

    def __init__(self, n_outs, as_view=False, gpu=False, name=None):
        if not isinstance(n_outs, (int, np.integer)) or n_outs < 1:
            raise TypeError(f"IfElse: n_outs must be a positive int, got {n_outs!r}")
        self.n_outs = int(n_outs)
        self.as_view = bool(as_view)
        self.gpu = bool(gpu)  # Theano's flag, kept for its signature and equality
        self.name = name
        if self.as_view:
            # Output k is the then-value itself when that branch is taken; the else-value
            # is copied (a view of either input would be more than view_map can say).
            self.view_map = {k: [k + 1] for k in range(self.n_outs)}

    def __str__(self):
        args = [a for a in (self.name, "inplace" if self.as_view else None) if a]
        return f"if{{{','.join(args)}}}"

    __repr__ = __str__

    def make_node(self, condition, *branches):
        tt = _tt()
        if len(branches) != 2 * self.n_outs:
            raise TypeError(
                f"{self}: expected a condition and {2 * self.n_outs} branch values "
                f"({self.n_outs} then, {self.n_outs} else), got {len(branches)} values"
            )
        c = tt.as_tensor_variable(condition)
        if c.ndim != 0:
            raise TypeError(
                f"{self}: the condition must be a scalar (0 stands for False, anything else "
                f"for True), got {c.type}"
            )
        n = self.n_outs
        values = [_as_branch(b, branches[(k + n) % (2 * n)], tt) for k, b in enumerate(branches)]
        ts, fs = values[:n], values[n:]
        outs = [_join_types(t, f, k)() for k, (t, f) in enumerate(zip(ts, fs))]
        return Apply(self, [c, *values], outs)

    def perform(self, node, inputs, output_storage, params=None):
        cond, values = inputs[0], inputs[1:]
        chosen = values[: self.n_outs] if cond else values[self.n_outs :]
        for cell, v in zip(output_storage, chosen):
            if self.as_view and cond:
                cell[0] = v  # the view view_map declares
                continue
            # A copy: the output must not alias an input that other nodes may overwrite.
            cell[0] = v.copy() if isinstance(v, np.ndarray) else copy.deepcopy(v)

    def infer_shape(self, fgraph, node, input_shapes):
        tt = _tt()
        c = node.inputs[0]
        shapes_t = input_shapes[1 : 1 + self.n_outs]
        shapes_f = input_shapes[1 + self.n_outs :]
        out = []
        for st, sf in zip(shapes_t, shapes_f):
            if st is None or sf is None:
                out.append(None)
                continue
            dims = []
            for a, b in zip(st, sf):
                ints = isinstance(a, (int, np.integer)) and isinstance(b, (int, np.integer))
                same = a is b or (ints and a == b)
                # Shapes are cheap scalars: a switch picks the taken branch's length.
                dims.append(a if same else tt.switch(tt.neq(c, 0), a, b))
            out.append(tuple(dims))
        return out

    def connection_pattern(self, node):
        n = self.n_outs
        cond = [[True] * n]
        branch = [[k == j for j in range(n)] for k in range(n)]
        return cond + branch + branch

    def L_op(self, inputs, outputs, output_grads):
        tt = _tt()

        c, values = inputs[0], inputs[1:]
        ts, fs = values[: self.n_outs], values[self.n_outs :]
        grads_t, grads_f = [], []
        for t, f, g in zip(ts, fs, output_grads):
            if is_disconnected(g):
                grads_t.append(disconnected_type())
                grads_f.append(disconnected_type())
                continue
            gd = g.dtype if g.dtype.startswith(("float", "complex")) else config.floatX
            zt, zf = tt.zeros_like(t, dtype=gd), tt.zeros_like(f, dtype=gd)
            grads_t.append(ifelse(c, g, zt))  # g where the then-branch was taken
            grads_f.append(ifelse(c, zf, g))
        cond_grad = tt.zeros_like(c, dtype=config.floatX)
        return [cond_grad, *grads_t, *grads_f]

    def R_op(self, inputs, eval_points):
        if any(e is None for e in eval_points[1:]):
            return [None] * self.n_outs
        return self(inputs[0], *eval_points[1:], return_list=True)


def ifelse(condition, then_branch, else_branch, name=None):
    """``then_branch`` if the scalar ``condition`` is nonzero, else ``else_branch``.

    The branches are single variables (the result is one variable) or lists/tuples of
    equal length (the result is a list/tuple). Matching values must have the same dtype
    and number of dimensions; their shapes may differ. Both branches are computed.

    >>> from theano_dag import tensor as tt
    >>> c = tt.lscalar("c")
    >>> x, y = tt.dvector("x"), tt.dmatrix("y")
    >>> outs = ifelse(c, [x, y], [x * 2, y.T])
    >>> type(outs).__name__, [o.ndim for o in outs]
    ('list', [1, 2])
    >>> import theano_dag
    >>> f = theano_dag.function([c, x], ifelse(c, [x, x + 1], [x * 2, x * 3]))
    >>> [v.tolist() for v in f(0, [1.0, 2.0])]
    [[2.0, 4.0], [3.0, 6.0]]
    """
    result_type = type(then_branch) if isinstance(then_branch, (list, tuple)) else None
    then_list = list(then_branch) if result_type else [then_branch]
    else_list = list(else_branch) if isinstance(else_branch, (list, tuple)) else [else_branch]
    if len(then_list) != len(else_list):
        raise ValueError(
            f"ifelse: the then branch has {len(then_list)} values and the else branch "
            f"{len(else_list)}; they must have the same number"
        )
    if not then_list:
        raise ValueError("ifelse: the branches are empty")
    outs = IfElse(len(then_list), name=name)(condition, *then_list, *else_list, return_list=True)
    if result_type is None:
        return outs[0]
    return result_type(outs)


@register_specialize("inplace")
@local_optimizer([IfElse])
def cond_make_inplace(fgraph, node):
    """Theano's ``cond_make_inplace`` (fast_run, inplace): an ``IfElse`` returns its
    then-values without a copy (``as_view``); not for scalar outputs in a graph of 500
    nodes or more, where the copy costs less than the rewrite's bookkeeping. A view needs
    no destroy handler: it runs in specialize (Theano's at 95, after it)."""
    op = node.op
    if op.as_view:
        return None
    if len(fgraph.apply_nodes) >= 500 and all(
        getattr(o.type, "ndim", -1) == 0 for o in node.outputs
    ):
        return None
    new = IfElse(op.n_outs, as_view=True, gpu=op.gpu, name=op.name)
    return new(*node.inputs, return_list=True)
