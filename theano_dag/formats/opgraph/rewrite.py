"""BasicOps, and rewriting an OpGraph into the operations an engine supports.

Each engine declares the operations it can run as a :class:`BasicOps`.
:func:`rewrite_for` keeps every supported operation and replaces each other one
by a small subgraph of supported operations, found from the rule table below
(rules may produce operations that need rewriting in turn). When no rule can
express an operation it raises :class:`UnsupportedOperationError` naming the
node, the operation, the engine and why each rule failed.
"""

from __future__ import annotations

import math
from collections.abc import Set
from dataclasses import dataclass

from theano_dag.formats.opgraph.graph import OpGraph, infer_shapes
from theano_dag.formats.opgraph.nodes import (
    Add,
    Chip,
    Cholesky,
    Division,
    EigenSolve,
    ElementwiseMultiplication,
    MatrixMultiply,
    Multiplication,
    Operation,
    Permute,
    Pow,
    Reshape,
    Scale,
    Slice,
    Subtraction,
    Tensor,
    _dims_by_mode,
    _is_perm,
)

__all__ = ["REFERENCE_OPS", "REWRITES", "BasicOps", "UnsupportedOperationError", "rewrite_for"]


class BasicOps(Set):
    """The set of operations an engine can run: operation classes (any parameters) or
    operation instances (exactly those parameters).

    >>> cpu = BasicOps([Add, MatrixMultiply, Pow(2)], name="cpu")
    >>> Add() in cpu, Pow(2) in cpu, Pow(3) in cpu, MatrixMultiply in cpu
    (True, True, False, True)
    >>> cpu | BasicOps([Permute])
    BasicOps(['Add', 'MatrixMultiply', 'Permute', 'Pow(2)'])
    """

    def __init__(self, ops=(), name=None):
        items = []
        for op in ops:
            if not (
                isinstance(op, Operation) or isinstance(op, type) and issubclass(op, Operation)
            ):
                raise TypeError(f"BasicOps holds operations or operation classes, got {op!r}")
            items.append(op)
        self._items = frozenset(items)
        self.name = name

    @classmethod
    def _from_iterable(cls, it):
        return cls(it)

    def __contains__(self, op):
        if isinstance(op, type):
            return op in self._items
        return type(op) in self._items or op in self._items

    def __iter__(self):
        return iter(sorted(self._items, key=_op_name))

    def __len__(self):
        return len(self._items)

    def __repr__(self):
        name = f", name={self.name!r}" if self.name else ""
        return f"BasicOps({[_op_name(op) for op in self]}{name})"


def _op_name(op):
    return op.__name__ if isinstance(op, type) else op.label()


#: Every built-in operation: what the numpy evaluator runs.
REFERENCE_OPS = BasicOps(
    [Add, Subtraction, ElementwiseMultiplication, Division, Scale, Pow, Permute, Multiplication,
     MatrixMultiply, Slice, Reshape, Chip, Cholesky, EigenSolve],
    name="numpy reference",
)  # fmt: skip


class UnsupportedOperationError(NotImplementedError):
    """An operation that an engine cannot run and no rewrite can express."""


class _NoRewrite(Exception):
    """A rule does not apply; the message says why."""


@dataclass(eq=False)
class _T:
    """A tensor of a rewrite plan; compared by identity."""

    shape: tuple | None = None


@dataclass
class _Step:
    op: Operation
    ins: list  # [(_T, modes)]
    outs: list


# -- the rule table: operation class -> rules, tried in order -----------------------------------

REWRITES: dict[type, list] = {}


def _rule(op_type):
    def register(fn):
        REWRITES.setdefault(op_type, []).append(fn)
        return fn

    return register


def _retarget(steps, result, modes, out):
    """Make the plan write ``out`` (tensor, modes): permute ``result`` into it if needed."""
    target, target_modes = out
    if modes == target_modes and steps and steps[-1].outs[0][0] is result:
        steps[-1].outs[0] = (target, target_modes)
    else:
        steps.append(_Step(Permute(), [(result, modes)], [out]))
    return steps


def _permuted(steps, t, modes, target):
    target = tuple(target)
    if target == modes:
        return t
    new = _T()
    steps.append(_Step(Permute(), [(t, modes)], [(new, target)]))
    return new


def _reshaped(steps, t, modes, groups, new_modes, dims, what):
    """``t`` with each group of its modes fused into one of ``new_modes`` (or split back)."""
    if tuple(modes) == tuple(new_modes):  # one mode per group, unchanged
        return t
    new = _T()
    shape = _sizes(groups, dims, what)
    steps.append(_Step(Reshape(shape), [(t, tuple(modes))], [(new, tuple(new_modes))]))
    return new


def _sizes(groups, dims, what):
    """Reshape sizes for groups of modes: products of known sizes, one unknown -> -1."""
    sizes = [math.prod(dims[m] for m in g) if all(dims.get(m) for m in g) else None for g in groups]
    if sizes.count(None) > 1:
        unknown = sorted({m for g in groups for m in g if dims.get(m) is None})
        raise _NoRewrite(
            f"{what} needs the sizes of modes {unknown}, which are unknown "
            "(give the sources' shapes)"
        )
    return tuple(-1 if s is None else s for s in sizes)


def _fresh(base, used):
    name = base
    while name in used:
        name += "'"
    used.add(name)
    return name


@_rule(Multiplication)
def _contraction_as_gemm(op, ins, outs):
    """Multiplication -> Permute + Reshape + MatrixMultiply"""
    if len(ins) != 2:
        raise _NoRewrite(f"a product of {len(ins)} tensors; a matrix product takes two")
    (a, am), (b, bm) = ins
    cm = outs[0][1]
    if cm and cm[0] in bm and cm[0] not in am:
        (a, am), (b, bm) = (b, bm), (a, am)  # C = B A needs fewer permutes than C = (A^T B^T)^T
    for k, modes in enumerate((am, bm)):
        for m in modes:
            if modes.count(m) > 1:
                raise _NoRewrite(f"mode {m!r} repeats on input {k} (a trace or diagonal)")
    for m in dict.fromkeys(am + bm):
        on = (m in am) + (m in bm) + (m in cm)
        if on == 3:
            raise _NoRewrite(f"mode {m!r} is on both inputs and the output (a batched product)")
        if on == 1:
            raise _NoRewrite(f"mode {m!r} is on one input only (a sum over it)")
    free_a, free_b = [m for m in cm if m in am], [m for m in cm if m in bm]
    con = [m for m in am if m in bm]
    steps = []
    a2 = _permuted(steps, a, am, free_a + con)
    b2 = _permuted(steps, b, bm, con + free_b)
    # each group of modes becomes one matrix mode; a group of several (or none) is fused
    dims = _dims_by_mode([a.shape, b.shape], [am, bm])
    used = set(am) | set(bm) | set(cm)
    i, k, j = (
        g[0] if len(g) == 1 else _fresh(x, used) for g, x in zip((free_a, con, free_b), "MKN")
    )
    a3 = _reshaped(steps, a2, free_a + con, [free_a, con], (i, k), dims, "fusing input 0")
    b3 = _reshaped(steps, b2, con + free_b, [con, free_b], (k, j), dims, "fusing input 1")
    result = _T()
    steps.append(_Step(MatrixMultiply(), [(a3, (i, k)), (b3, (k, j))], [(result, (i, j))]))
    modes = tuple(free_a + free_b)
    result = _reshaped(steps, result, (i, j), [[m] for m in modes], modes, dims, "the output")
    return _retarget(steps, result, modes, outs[0])


@_rule(Multiplication)
def _product_without_sums(op, ins, outs):
    """Multiplication -> ElementwiseMultiplication or Permute"""
    cm = outs[0][1]
    if not all(_is_perm(modes, cm) for _, modes in ins):
        raise _NoRewrite("it sums over a mode or repeats one, so it is not elementwise")
    new = ElementwiseMultiplication() if len(ins) > 1 else Permute()
    return [_Step(new, list(ins), list(outs))]


@_rule(ElementwiseMultiplication)
def _hadamard_as_einsum(op, ins, outs):
    """ElementwiseMultiplication -> Multiplication"""
    return [_Step(Multiplication(), list(ins), list(outs))]


@_rule(Permute)
def _permute_as_einsum(op, ins, outs):
    """Permute -> Multiplication"""
    return [_Step(Multiplication(), list(ins), list(outs))]


@_rule(Subtraction)
def _subtraction_as_sum(op, ins, outs):
    """Subtraction -> Scale(-1) + Add"""
    (a, am), (b, bm) = ins
    neg = _T()
    return [
        _Step(Scale(-1), [(b, bm)], [(neg, bm)]),
        _Step(Add(), [(a, am), (neg, bm)], list(outs)),
    ]


@_rule(Division)
def _division_as_product(op, ins, outs):
    """Division -> Pow(-1) + ElementwiseMultiplication"""
    (a, am), (b, bm) = ins
    inv = _T()
    return [
        _Step(Pow(-1), [(b, bm)], [(inv, bm)]),
        _Step(ElementwiseMultiplication(), [(a, am), (inv, bm)], list(outs)),
    ]


@_rule(Chip)
def _chip_as_slice(op, ins, outs):
    """Chip -> Slice + Reshape"""
    ((t, modes),) = ins
    rank = len(modes)
    begin = tuple(op.offset if k == op.mode else 0 for k in range(rank))
    end = tuple(op.offset + 1 if k == op.mode else None for k in range(rank))
    rest = modes[: op.mode] + modes[op.mode + 1 :]
    dims = _dims_by_mode([t.shape], [modes])
    block, result = _T(), _T()
    shape = _sizes([[m] for m in rest], dims, "dropping the chipped mode")
    steps = [
        _Step(Slice(begin, end), [(t, modes)], [(block, modes)]),
        _Step(Reshape(shape), [(block, modes)], [(result, rest)]),
    ]
    return _retarget(steps, result, rest, outs[0])


# -- the driver ---------------------------------------------------------------------------------


def _fill_shapes(steps):
    for step in steps:
        shapes = step.op.infer_shape(
            [t.shape for t, _ in step.ins], [m for _, m in step.ins], [m for _, m in step.outs]
        )
        for (t, _), shape in zip(step.outs, shapes):
            if t.shape is None or None in t.shape:
                t.shape = shape


def _expand(op, ins, outs, basic_ops, rewrites, chain=frozenset()):
    """Steps of supported operations computing ``op``; raises ``_NoRewrite`` saying why not."""
    if op in basic_ops:
        return [_Step(op, list(ins), list(outs))]
    if type(op) in chain:
        raise _NoRewrite(f"{type(op).__name__} again (the rewrites go round in a circle)")
    rules = rewrites.get(type(op), [])
    if not rules:
        raise _NoRewrite(f"no rewrite exists for {type(op).__name__}")
    reasons = []
    for rule in rules:
        try:
            steps = rule(op, ins, outs)
            _fill_shapes(steps)
            return [
                flat
                for step in steps
                for flat in _expand(
                    step.op, step.ins, step.outs, basic_ops, rewrites, chain | {type(op)}
                )
            ]
        except _NoRewrite as err:
            reasons.append(f"[{rule.__doc__.strip()}: {err}]")
    raise _NoRewrite(" ".join(reasons))


def _describe(ins, outs):
    return (
        "".join(f"({','.join(m)})" for m in ins) + "->" + "".join(f"({','.join(m)})" for m in outs)
    )


def rewrite_for(opgraph, basic_ops, shapes=None, rewrites=None):
    """A new OpGraph computing the same tensors with only operations in ``basic_ops``.

    Tensor nodes and supported operations keep their indices, so values keyed by
    tensor index work on both graphs; new nodes (intermediate tensors and the
    operations of a rewrite) follow. ``shapes`` (``{tensor: shape}``) supplies
    source shapes when a rewrite needs sizes (fusing modes for a matrix product).
    ``rewrites`` replaces the rule table :data:`REWRITES` (operation class -> rules).

    >>> import numpy as np
    >>> from theano_dag.formats.opgraph import evaluate, Tensor
    >>> g = OpGraph()
    >>> a, b, m, c = (g.add_node(x) for x in (Tensor("A"), Tensor("B"), Multiplication(),
    ...                                      Tensor("C")))
    >>> _ = g.add_edge(a, m, "k,i"), g.add_edge(b, m, "k,j"), g.add_edge(m, c, "i,j")
    >>> gemm = rewrite_for(g, BasicOps([MatrixMultiply, Permute]))
    >>> [n.label() for n in gemm.nodes()]
    ['A', 'B', 'Permute', 'C', 'tmp2_0', 'MatrixMultiply']
    >>> x, y = np.arange(6.0).reshape(2, 3), np.arange(8.0).reshape(2, 4)
    >>> np.allclose(evaluate(gemm, {a: x, b: y})[c], x.T @ y)
    True
    """
    if not isinstance(basic_ops, BasicOps):
        basic_ops = BasicOps(basic_ops)
    rewrites = REWRITES if rewrites is None else rewrites
    known = infer_shapes(opgraph, shapes)  # also validates the graph
    refs = {n: _T(known[n]) for n in known}
    plans = {}
    for n, node in enumerate(opgraph.nodes()):
        if node.is_tensor:
            continue
        in_modes, out_modes = opgraph.op_labels(n)
        ins = [(refs[t], m) for t, m in zip(opgraph.inputs(n), in_modes)]
        outs = [(refs[t], m) for t, m in zip(opgraph.outputs(n), out_modes)]
        try:
            plans[n] = _expand(node, ins, outs, basic_ops, rewrites)
        except _NoRewrite as err:
            engine = f"engine {basic_ops.name!r}" if basic_ops.name else "this engine"
            raise UnsupportedOperationError(
                f"node {n} ({node.label()} {_describe(in_modes, out_modes)}) cannot run on "
                f"{engine}, which supports {', '.join(map(_op_name, basic_ops)) or 'nothing'}; "
                f"no rewrite expresses it: {err}"
            ) from None
    new = OpGraph(opgraph.n_reserve)
    index = {id(refs[n]): n for n in refs}  # plan tensor -> node index in the new graph
    step_index = {}  # id(step) -> node index in the new graph
    for n, node in enumerate(opgraph.nodes()):
        # tensors keep their index; the first step of each plan takes its operation's index
        added = new.add_node(node if node.is_tensor else plans[n][0].op)
        if not node.is_tensor:
            step_index[id(plans[n][0])] = added
    for n, plan in plans.items():
        for k, step in enumerate(plan):
            if k:
                step_index[id(step)] = new.add_node(step.op)
            for t, _ in step.outs:
                if id(t) not in index:
                    index[id(t)] = new.add_node(Tensor(f"tmp{n}_{len(index) - len(refs)}", t.shape))
    for plan in plans.values():
        for step in plan:
            s = step_index[id(step)]
            for t, modes in step.ins:
                new.add_edge(index[id(t)], s, modes)
            for t, modes in step.outs:
                new.add_edge(s, index[id(t)], modes)
    new.validate()
    return new
