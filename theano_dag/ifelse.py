"""``ifelse(condition, then_branch, else_branch)``: pick whole values by a scalar condition
(``theano.ifelse``).

Unlike ``switch``, which chooses element by element, ``ifelse`` returns one branch or the
other, and its branches may have different shapes.

As in Theano, a compiled ``ifelse`` is *lazy*: only the branch taken is computed. The
rewrite ``ifelse_lazy_branches`` (pass ``lazy_branches``, after fusion) moves the nodes
that only one branch needs into a graph of that branch's own (:class:`LazyIfElse`),
which runs when the condition picks it; what both branches or other outputs need is
computed before. A branch that would fail when not taken (an index past the end of an
empty vector) does not run.

>>> import numpy as np
>>> import theano_dag
>>> from theano_dag import tensor as tt
>>> a, b = tt.dscalars("a", "b")
>>> x, y = tt.dvectors("x", "y")
>>> f = theano_dag.function([a, b, x, y], ifelse(tt.lt(a, b), tt.mean(x), tt.mean(y)))
>>> float(f(1.0, 2.0, np.ones(3), np.zeros(2)))
1.0
>>> n = tt.lscalar("n")
>>> last = theano_dag.function([n, x], ifelse(tt.gt(n, 0), x[n - 1], 0.0))
>>> float(last(0, np.zeros(0)))  # x[-1] of the empty vector is not computed
0.0
"""

from __future__ import annotations

import copy

import numpy as np

from theano_dag import tensor
from theano_dag.config import config
from theano_dag.engines.inner import compile_inner
from theano_dag.graph.basic import Apply, Variable, clone_replace, io_toposort
from theano_dag.graph.null_type import disconnected_type, is_disconnected
from theano_dag.graph.op import Op
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.opt.optdb import optdb, register_specialize, register_useless

__all__ = [
    "IfElse",
    "LazyIfElse",
    "cond_make_inplace",
    "ifelse",
    "ifelse_constant_condition",
    "ifelse_lazy_branches",
]


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

    Its inputs are computed before it; a compiled function has the nodes that only one
    branch needs in a :class:`LazyIfElse` instead (see the module docstring). The
    gradient of a branch is the output gradient where that branch was taken, zeros
    where it was not.

    >>> from theano_dag import tensor as tt
    >>> IfElse(1)(tt.bscalar("c"), tt.dvector("t"), tt.dvector("e")).type
    TensorType(float64, vector)
    """

    __props__ = ("as_view", "gpu", "n_outs")
    # A compiled function may compute an input only when its branch is taken (the shape
    # rewrites read this: a value an IfElse reads may never be computed).
    lazy_inputs = True
    takes_none = True  # a branch's value is passed on as it is

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
    and number of dimensions; their shapes may differ. A compiled function computes only
    the branch taken (what only that branch needs).

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


@register_useless("fast_compile")
@local_optimizer([IfElse])
def ifelse_constant_condition(fgraph, node):
    """``ifelse(c, a, b)`` where ``c`` is a constant: the branch it picks. Nothing is left
    to choose when the function runs (a condition such as ``all(eq(flag, 0))`` on a
    constant ``flag`` folds to one), and the branch computed directly runs among the
    function's other nodes rather than as a graph of its own.

    >>> import theano_dag
    >>> from theano_dag import tensor as tt
    >>> x = tt.dvector("x")
    >>> f = theano_dag.function([x], ifelse(tt.all(tt.eq(tt.zeros(2), 0)), x * 2, x))
    >>> [type(n.op).__name__ for n in f.maker.fgraph.toposort()]
    ['Elemwise']
    """
    tt = _tt()
    try:
        c = tt.get_scalar_constant_value(node.inputs[0], only_process_constants=True)
    except tt.NotScalarConstantError:
        return None
    n = node.op.n_outs
    picked = node.inputs[1 : 1 + n] if c else node.inputs[1 + n :]
    out = []
    for v, old in zip(picked, node.outputs):
        if v.type != old.type:
            try:
                v = old.type.filter_variable(v)
            except TypeError:
                return None
        out.append(v)
    return out


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


class LazyIfElse(Op):
    """An ``IfElse`` whose branches are graphs of their own: only the taken one runs.

    ``LazyIfElse(n_outs, then_graph, else_graph)(condition, *then_inputs, *else_inputs)``;
    a branch graph is ``(inner_inputs, inner_outputs)``, the ``n_outs`` outputs computed
    from the inner inputs, which stand for the node's inputs of that branch. The
    rewrite ``ifelse_lazy_branches`` makes it; each branch is compiled (by the default
    mode, as a loop's step is) when it is first taken. Outputs are the caller's arrays;
    an output that is a branch input is copied, as ``IfElse`` copies, but for a then-input
    with ``as_view`` (``cond_make_inplace``'s view, which ``view_map`` declares).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> a, b = tt.dvector("a"), tt.dvector("b")
    >>> op = LazyIfElse(1, ([a], [tt.exp(a)]), ([b], [b]))
    >>> c = tt.bscalar("c")
    >>> f = op(c, a, b)
    >>> [float(v) for v in f.eval({c: 1, a: np.zeros(2), b: np.ones(2)})]
    [1.0, 1.0]
    """

    def __init__(self, n_outs, then_graph, else_graph, as_view=False):
        self.n_outs = int(n_outs)
        self.as_view = bool(as_view)
        self.branches = []
        for inputs, outputs in (then_graph, else_graph):
            inputs, outputs = list(inputs), list(outputs)
            if len(outputs) != self.n_outs:
                raise TypeError(
                    f"LazyIfElse: a branch has {len(outputs)} outputs, expected {self.n_outs}"
                )
            self.branches.append((inputs, outputs))
        self.n_then = len(self.branches[0][0])
        self._fns = [None, None]
        if self.as_view:
            then_inputs, then_outputs = self.branches[0]
            self.view_map = {
                k: [1 + then_inputs.index(o)]
                for k, o in enumerate(then_outputs)
                if o in then_inputs
            }

    def __str__(self):
        return "lazy_if{inplace}" if self.as_view else "lazy_if"

    __repr__ = __str__

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_fns"] = [None, None]
        return state

    def make_node(self, condition, *inputs):
        tt = _tt()
        c = tt.as_tensor_variable(condition)
        if c.ndim != 0:
            raise TypeError(f"{self}: the condition must be a scalar, got {c.type}")
        n_else = len(self.branches[1][0])
        if len(inputs) != self.n_then + n_else:
            raise TypeError(
                f"{self}: expected {self.n_then} then-inputs and {n_else} else-inputs, "
                f"got {len(inputs)} values"
            )
        inners = self.branches[0][0] + self.branches[1][0]
        checked = [inner.type.filter_variable(v) for v, inner in zip(inputs, inners)]
        outs = []
        for k, (t, f) in enumerate(zip(self.branches[0][1], self.branches[1][1])):
            outs.append(_join_types(t, f, k)())
        return Apply(self, [c, *checked], outs)

    def _branch_values(self, which, args):
        inputs, outputs = self.branches[which]
        computed = [o for o in outputs if o.owner is not None]
        values = iter(())
        if computed:
            fn = self._fns[which]
            if fn is None:
                # borrow=False: each output is an array of the caller's, not a view of a
                # branch input (x[1:]), whose memory the outer function reuses once this
                # node has read it (view_map does not declare such a view).
                fn = self._fns[which] = compile_inner(inputs, computed, borrow=False)
            values = iter(fn(*args))
        position = {v: k for k, v in enumerate(inputs)}
        out = []
        for o in outputs:
            if o.owner is not None:
                out.append(next(values))
            elif o in position:
                v = args[position[o]]
                if which == 0 and self.as_view:
                    out.append(v)  # the view view_map declares
                else:
                    out.append(v.copy() if isinstance(v, np.ndarray) else copy.deepcopy(v))
            else:  # a constant
                out.append(np.array(o.data, copy=True))
        # An array given for two outputs (a value in two places of a branch) is copied:
        # outputs of one node must not alias each other unseen by view_map.
        seen: set = set()
        for k, v in enumerate(out):
            if isinstance(v, np.ndarray) and id(v) in seen:
                out[k] = v.copy()
            seen.add(id(out[k]))
        return out

    def perform(self, node, inputs, output_storage, params=None):
        cond, args = inputs[0], inputs[1:]
        if cond:
            values = self._branch_values(0, args[: self.n_then])
        else:
            values = self._branch_values(1, args[self.n_then :])
        for cell, v, var in zip(output_storage, values, node.outputs):
            cell[0] = var.type.filter(v)


def _only_for(fgraph, ifnode, values, positions) -> dict:
    """The nodes computing ``values`` that nothing needs but ``ifnode`` at ``positions``
    (through each other): what the branch may compute only when it is taken."""
    clients = fgraph.clients
    own: dict = {}  # in reverse topological order (deterministic: the branch's inputs)
    for node in reversed(io_toposort(fgraph.inputs, values)):
        if node.op.destroy_map:  # an in-place node's effect is not the branch's alone
            continue
        if all(
            (client is ifnode and i in positions) or client in own
            for out in node.outputs
            for client, i in clients.get(out, ())
        ):
            own[node] = None
    return own


def _branch_graph(own, values):
    """``(inner_inputs, inner_outputs, outer_inputs)`` of the graph of ``own`` nodes
    giving ``values``."""
    outer = []
    seen = set()
    for node in reversed(own):  # topological order
        for v in node.inputs:
            if v not in seen and (v.owner is None or v.owner not in own):
                if not isinstance(v, tensor.TensorConstant):
                    seen.add(v)
                    outer.append(v)
    for v in values:  # a value computed before the branch is an input of it
        if v not in seen and (v.owner is None or v.owner not in own):
            if not isinstance(v, tensor.TensorConstant):
                seen.add(v)
                outer.append(v)
    holders = [v.type() for v in outer]
    for h, v in zip(holders, outer):
        h.name = v.name
    inner = clone_replace(list(values), dict(zip(outer, holders)))
    return holders, inner, outer


@local_optimizer([IfElse])
def ifelse_lazy_branches(fgraph, node):
    """``IfElse`` -> :class:`LazyIfElse` where a branch needs nodes nothing else needs:
    those run only when their branch is taken (Theano's lazy evaluation of ``ifelse``)."""
    n = node.op.n_outs
    then_vals, else_vals = node.inputs[1 : 1 + n], node.inputs[1 + n :]
    own_t = _only_for(fgraph, node, then_vals, set(range(1, 1 + n)))
    own_e = _only_for(fgraph, node, else_vals, set(range(1 + n, 1 + 2 * n)))
    if not own_t and not own_e:
        return None
    t_in, t_out, t_outer = _branch_graph(own_t, then_vals)
    e_in, e_out, e_outer = _branch_graph(own_e, else_vals)
    op = LazyIfElse(n, (t_in, t_out), (e_in, e_out), as_view=node.op.as_view)
    outs = op(node.inputs[0], *t_outer, *e_outer, return_list=True)
    return [
        o if o.type == old.type else old.type.filter_variable(o)
        for o, old in zip(outs, node.outputs)
    ]


optdb["lazy_branches"].db.register(
    "ifelse_lazy_branches", ifelse_lazy_branches, "fast_run", "fast_compile"
)
