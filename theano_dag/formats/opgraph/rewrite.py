"""BasicOps, and rewriting an OpGraph into the operations an engine supports.

Each engine declares the operations it can run as a :class:`BasicOps`.
:func:`rewrite_for` keeps every supported operation and replaces each other one
by a small subgraph of supported operations, found from the rule table below
(rules may produce operations that need rewriting in turn). When no rule can
express an operation it raises :class:`UnsupportedOperationError` naming the
node, the operation, the engine and why each rule failed.

There is one rewriting engine, :mod:`theano_dag.opt`: the OpGraph is read into a
FunctionGraph of :class:`Step` nodes (an operation with the modes of its edges), the
rules are local rewrites (``local_optimizer``) of those Steps, and a navigator applies
:class:`LowerToBasicOps` to each Step before the result is read back into an OpGraph.
"""

from __future__ import annotations

import itertools
import math

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
from theano_dag.graph import basic_ops as graph_basic_ops
from theano_dag.graph.basic import Apply, io_toposort
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.op import Op
from theano_dag.graph.rewriting.local import LocalOptimizer, local_optimizer
from theano_dag.graph.rewriting.navigator import in2out
from theano_dag.graph.type import Generic

__all__ = [
    "REFERENCE_OPS",
    "REWRITES",
    "BasicOps",
    "LowerToBasicOps",
    "Step",
    "UnsupportedOperationError",
    "rewrite_for",
    "step_tensor",
]


class BasicOps(graph_basic_ops.BasicOps):
    """The set of operations an engine can run: operation classes (any parameters) or
    operation instances (exactly those parameters); the engines' one
    :class:`~theano_dag.graph.basic_ops.BasicOps`, holding OpGraph operations.

    >>> cpu = BasicOps([Add, MatrixMultiply, Pow(2)], name="cpu")
    >>> Add() in cpu, Pow(2) in cpu, Pow(3) in cpu, MatrixMultiply in cpu
    (True, True, False, True)
    >>> cpu | BasicOps([Permute])
    BasicOps(['Add', 'MatrixMultiply', 'Permute', 'Pow(2)'])
    """

    kind = Operation


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


# -- the OpGraph as a FunctionGraph that theano_dag.opt rewrites ------------------------------


class Step(Op):
    """One OpGraph operation as a graph Op: the operation and the modes of its edges.

    Its Variables are tensors of the OpGraph; each carries its shape in ``tag.shape``
    (entries None where unknown), inferred by ``make_node`` from the inputs' shapes.

    >>> a, b = step_tensor((2, 3)), step_tensor((3, 4))
    >>> c = Step(MatrixMultiply(), ("i", "k"), ("k", "j"), outs=[("i", "j")])(a, b)
    >>> c.owner.op, c.tag.shape
    (MatrixMultiply, (2, 4))
    """

    __props__ = ("operation", "ins", "outs")

    def __init__(self, operation, *ins, outs):
        self.operation = operation
        self.ins = tuple(tuple(m) for m in ins)
        self.outs = tuple(tuple(m) for m in outs)

    def make_node(self, *inputs):
        shapes = [v.tag.shape for v in inputs]
        out_shapes = self.operation.infer_shape(shapes, self.ins, self.outs)
        node = Apply(self, list(inputs), [step_tensor(s) for s in out_shapes])
        node.tag.made = next(_MADE)
        return node

    def perform(self, node, inputs, output_storage):
        for cell, value in zip(output_storage, self.operation.compute(inputs, self.ins, self.outs)):
            cell[0] = value

    def __str__(self):
        return self.operation.label()


_MADE = itertools.count()  # creation order of Steps: the order a rule made them in


def step_tensor(shape=None, name=None):
    """A Variable standing for an OpGraph tensor of ``shape`` (kept in ``tag.shape``).

    >>> step_tensor((2, None), "A").tag.shape
    (2, None)
    """
    var = Generic()(name)
    var.tag.shape = None if shape is None else tuple(shape)
    return var


def _apply(operation, ins, out_modes):
    """The output Variables of ``operation`` on ``ins`` (``[(variable, modes)]``)."""
    step = Step(operation, *(m for _, m in ins), outs=out_modes)
    return step.make_node(*(v for v, _ in ins)).outputs


def _to_fgraph(opgraph, shapes):
    """``(fgraph, variables)``: the FunctionGraph of Steps and each tensor's Variable."""
    known = infer_shapes(opgraph, shapes)  # also validates the graph
    variables, written = {}, []
    for n in opgraph.toposort():
        node = opgraph.node(n)
        if node.is_tensor:
            if n not in variables:  # a source
                variables[n] = step_tensor(known[n], node.name)
            continue
        in_modes, out_modes = opgraph.op_labels(n)
        ins = [(variables[t], m) for t, m in zip(opgraph.inputs(n), in_modes)]
        outs = _apply(node, ins, out_modes)
        outs[0].owner.tag.index = n
        for t, var in zip(opgraph.outputs(n), outs):
            var.tag.shape = known[t]
            variables[t] = var
            written.append(t)
    sources = [n for n in sorted(variables) if n not in written]
    fgraph = FunctionGraph(
        [variables[n] for n in sources], [variables[n] for n in written], clone=False
    )
    return fgraph, sources, written


# -- the rule table: operation class -> local rewrites of a Step, tried in order ---------------
#
# A rule is a LocalOptimizer of theano_dag.opt whose transform(fgraph, node) returns the
# Variables computing node's outputs with other Steps, or raises _NoRewrite saying why it
# does not apply (returning False/None says nothing). Its docstring's first line names it
# in error messages.

REWRITES: dict[type, list] = {}


def _rule(op_type):
    def register(fn):
        rule = local_optimizer([Step])(fn)
        REWRITES.setdefault(op_type, []).append(rule)
        return rule

    return register


def _edges(node):
    """``(ins, out)``: ``[(variable, modes)]`` of the node's inputs, and its one output's modes."""
    return list(zip(node.inputs, node.op.ins)), node.op.outs[0]


def _retarget(result, modes, target, ins):
    """``result`` (axes ``modes``) as a Step output with the axes ``target``: permuted
    into it when the order differs or ``result`` is an input of the rule."""
    if modes == target and all(result is not v for v, _ in ins):
        return result
    return _apply(Permute(), [(result, modes)], [target])[0]


def _permuted(t, modes, target):
    target = tuple(target)
    if target == tuple(modes):
        return t
    return _apply(Permute(), [(t, tuple(modes))], [target])[0]


def _reshaped(t, modes, groups, new_modes, dims, what):
    """``t`` with each group of its modes fused into one of ``new_modes`` (or split back)."""
    if tuple(modes) == tuple(new_modes):  # one mode per group, unchanged
        return t
    shape = _sizes(groups, dims, what)
    return _apply(Reshape(shape), [(t, tuple(modes))], [tuple(new_modes)])[0]


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
def local_contraction_as_gemm(fgraph, node):
    """Multiplication -> Permute + Reshape + MatrixMultiply"""
    ins, cm = _edges(node)
    if len(ins) != 2:
        raise _NoRewrite(f"a product of {len(ins)} tensors; a matrix product takes two")
    (a, am), (b, bm) = ins
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
    a2 = _permuted(a, am, free_a + con)
    b2 = _permuted(b, bm, con + free_b)
    # each group of modes becomes one matrix mode; a group of several (or none) is fused
    dims = _dims_by_mode([a.tag.shape, b.tag.shape], [am, bm])
    used = set(am) | set(bm) | set(cm)
    i, k, j = (
        g[0] if len(g) == 1 else _fresh(x, used) for g, x in zip((free_a, con, free_b), "MKN")
    )
    a3 = _reshaped(a2, free_a + con, [free_a, con], (i, k), dims, "fusing input 0")
    b3 = _reshaped(b2, con + free_b, [con, free_b], (k, j), dims, "fusing input 1")
    (result,) = _apply(MatrixMultiply(), [(a3, (i, k)), (b3, (k, j))], [(i, j)])
    modes = tuple(free_a + free_b)
    result = _reshaped(result, (i, j), [[m] for m in modes], modes, dims, "the output")
    return [_retarget(result, modes, cm, ins)]


@_rule(Multiplication)
def local_product_without_sums(fgraph, node):
    """Multiplication -> ElementwiseMultiplication or Permute"""
    ins, cm = _edges(node)
    if not all(_is_perm(modes, cm) for _, modes in ins):
        raise _NoRewrite("it sums over a mode or repeats one, so it is not elementwise")
    new = ElementwiseMultiplication() if len(ins) > 1 else Permute()
    return _apply(new, ins, [cm])


@_rule(ElementwiseMultiplication)
def local_hadamard_as_einsum(fgraph, node):
    """ElementwiseMultiplication -> Multiplication"""
    ins, cm = _edges(node)
    return _apply(Multiplication(), ins, [cm])


@_rule(Permute)
def local_permute_as_einsum(fgraph, node):
    """Permute -> Multiplication"""
    ins, cm = _edges(node)
    return _apply(Multiplication(), ins, [cm])


@_rule(Subtraction)
def local_subtraction_as_sum(fgraph, node):
    """Subtraction -> Scale(-1) + Add"""
    ((a, am), (b, bm)), cm = _edges(node)
    (neg,) = _apply(Scale(-1), [(b, bm)], [bm])
    return _apply(Add(), [(a, am), (neg, bm)], [cm])


@_rule(Division)
def local_division_as_product(fgraph, node):
    """Division -> Pow(-1) + ElementwiseMultiplication"""
    ((a, am), (b, bm)), cm = _edges(node)
    (inv,) = _apply(Pow(-1), [(b, bm)], [bm])
    return _apply(ElementwiseMultiplication(), [(a, am), (inv, bm)], [cm])


@_rule(Chip)
def local_chip_as_slice(fgraph, node):
    """Chip -> Slice + Reshape"""
    ins, cm = _edges(node)
    ((t, modes),) = ins
    op, rank = node.op.operation, len(modes)
    begin = tuple(op.offset if k == op.mode else 0 for k in range(rank))
    end = tuple(op.offset + 1 if k == op.mode else None for k in range(rank))
    rest = modes[: op.mode] + modes[op.mode + 1 :]
    dims = _dims_by_mode([t.tag.shape], [modes])
    shape = _sizes([[m] for m in rest], dims, "dropping the chipped mode")
    (block,) = _apply(Slice(begin, end), [(t, modes)], [modes])
    (result,) = _apply(Reshape(shape), [(block, modes)], [rest])
    return [_retarget(result, rest, cm, ins)]


# -- the lowering: one local rewrite, run by a theano_dag.opt navigator --------------------------


class LowerToBasicOps(LocalOptimizer):
    """Replace a Step the engine cannot run by Steps it can, from the rules of ``rewrites``.

    The rules of the Step's operation class are tried in order; the Steps a rule makes
    are lowered in turn, and a rule fails when one of them cannot be (or when an
    operation class comes round again). ``plans[node]`` keeps the Steps that replaced
    a node, in the order the rules made them; ``failures[node]`` why none did.

    >>> from theano_dag.graph.fg import FunctionGraph
    >>> from theano_dag.graph.rewriting.navigator import in2out
    >>> x = step_tensor((2, 3), "x")
    >>> ij = ("i", "j")
    >>> fg = FunctionGraph([x], [Step(Subtraction(), ij, ij, outs=[ij])(x, x)])
    >>> lower = LowerToBasicOps(BasicOps([Add, Scale]), REWRITES)
    >>> _ = in2out(lower).optimize(fg)
    >>> [str(node.op) for node in fg.toposort()]
    ['Scale(-1)', 'Add']
    """

    reentrant = False  # what it makes is lowered already

    def __init__(self, basic_ops, rewrites):
        self.basic_ops = basic_ops
        self.rewrites = rewrites
        self.plans = {}
        self.failures = {}

    def tracks(self):
        return [Step]

    def transform(self, fgraph, node):
        if node.op.operation in self.basic_ops:
            return False
        plan = []
        try:
            outs = self._lower(fgraph, node, frozenset(), plan)
        except _NoRewrite as err:
            self.failures[node] = str(err)
            return False
        self.plans[node] = plan
        return outs

    def _lower(self, fgraph, node, chain, plan):
        op = node.op.operation
        if op in self.basic_ops:
            plan.append(node)
            return node.outputs
        if type(op) in chain:
            raise _NoRewrite(f"{type(op).__name__} again (the rewrites go round in a circle)")
        rules = self.rewrites.get(type(op), [])
        if not rules:
            raise _NoRewrite(f"no rewrite exists for {type(op).__name__}")
        reasons, within = [], chain | {type(op)}
        for rule in rules:
            tried = []
            try:
                outs = rule.transform(fgraph, node)
                if not outs:
                    raise _NoRewrite("it does not apply")
                lowered = {v: v for v in node.inputs}
                # the rule's Steps in the order it made them (a topological order too)
                for sub in sorted(io_toposort(node.inputs, outs), key=lambda n: n.tag.made):
                    args = [lowered[v] for v in sub.inputs]
                    step = sub if args == sub.inputs else sub.op.make_node(*args)
                    lowered.update(zip(sub.outputs, self._lower(fgraph, step, within, tried)))
                plan.extend(tried)
                return [lowered[o] for o in outs]
            except _NoRewrite as err:
                reasons.append(f"[{rule.__doc__.strip()}: {err}]")
        raise _NoRewrite(" ".join(reasons))


def _raise(exc, *_):
    raise exc


def rewrite_for(opgraph, basic_ops, shapes=None, rewrites=None):
    """A new OpGraph computing the same tensors with only operations in ``basic_ops``.

    Tensor nodes and supported operations keep their indices, so values keyed by
    tensor index work on both graphs; new nodes (intermediate tensors and the
    operations of a rewrite) follow. ``shapes`` (``{tensor: shape}``) supplies
    source shapes when a rewrite needs sizes (fusing modes for a matrix product).
    ``rewrites`` replaces the rule table :data:`REWRITES` (operation class -> rules).

    The OpGraph becomes a FunctionGraph of :class:`Step` nodes, which the navigator
    ``in2out`` of :mod:`theano_dag.opt` rewrites with :class:`LowerToBasicOps`; the
    result is read back into an OpGraph.

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
    fgraph, sources, written = _to_fgraph(opgraph, shapes)
    originals = {node.tag.index: node for node in fgraph.apply_nodes}
    lower = LowerToBasicOps(basic_ops, REWRITES if rewrites is None else rewrites)
    in2out(lower, ignore_newtrees=True, failure_callback=_raise).optimize(fgraph)
    plans = {}
    for n in sorted(originals):
        node = originals[n]
        if node in lower.failures:
            in_modes, out_modes = opgraph.op_labels(n)
            engine = f"engine {basic_ops.name!r}" if basic_ops.name else "this engine"
            raise UnsupportedOperationError(
                f"node {n} ({opgraph.node(n).label()} {_describe(in_modes, out_modes)}) cannot "
                f"run on {engine}, which supports "
                f"{', '.join(map(BasicOps.label, basic_ops)) or 'nothing'}; "
                f"no rewrite expresses it: {lower.failures[node]}"
            )
        plans[n] = lower.plans.get(node, [node])
    tensors = dict(zip(sources, fgraph.inputs)) | dict(zip(written, fgraph.outputs))
    return _to_opgraph(opgraph, tensors, plans)


def _describe(ins, outs):
    return (
        "".join(f"({','.join(m)})" for m in ins) + "->" + "".join(f"({','.join(m)})" for m in outs)
    )


def _to_opgraph(opgraph, tensors, plans):
    """The OpGraph of the rewritten Steps: the tensors of ``opgraph`` at their indices
    (``tensors``: index -> Variable), each operation's ``plans[n]`` from index ``n`` on."""
    new = OpGraph(opgraph.n_reserve)
    index = {var: n for n, var in tensors.items()}  # Variable -> node index in the new graph
    step_index = {}  # Step node -> node index in the new graph
    for n, node in enumerate(opgraph.nodes()):
        # tensors keep their index; the first step of each plan takes its operation's index
        added = new.add_node(node if node.is_tensor else plans[n][0].op.operation)
        if not node.is_tensor:
            step_index[plans[n][0]] = added
    for n, plan in plans.items():
        for k, step in enumerate(plan):
            if k:
                step_index[step] = new.add_node(step.op.operation)
            for t in step.outputs:
                if t not in index:
                    name = f"tmp{n}_{len(index) - len(tensors)}"
                    index[t] = new.add_node(Tensor(name, t.tag.shape))
    for plan in plans.values():
        for step in plan:
            s = step_index[step]
            for t, modes in zip(step.inputs, step.op.ins):
                new.add_edge(index[t], s, modes)
            for t, modes in zip(step.outputs, step.op.outs):
                new.add_edge(s, index[t], modes)
    new.validate()
    return new
