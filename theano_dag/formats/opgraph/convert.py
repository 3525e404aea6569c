"""OpGraph <-> FunctionGraph, so that an OpGraph compiles with ``function`` and runs.

OpGraph -> FunctionGraph: every source tensor becomes an input Variable (named after
the Tensor, dtype from its value or ``dtype=``, static shape from its ``shape``), and
every operation becomes theano_dag ops, with the edge labels turned into transposes:
elementwise operations into ``add``/``sub``/``mul``/``true_div``/``**``, a
``Multiplication`` into ``dot`` when it is a matrix or vector product, a transpose
when it only permutes, else ``einsum``; ``Slice``/``Chip`` into indexing,
``Reshape`` into ``reshape``, ``Cholesky``/``EigenSolve`` into the ops of
:mod:`theano_dag.tensor.linalg`.

FunctionGraph -> OpGraph goes the other way for the ops that have an OpGraph
operation (the ones above, ``Einsum``, ``DimShuffle``, constant ``Subtensor`` and
``Reshape``) and raises :class:`UnsupportedOperationError` naming any other op.
Both directions are registered with :func:`~theano_dag.formats.chain.convert` under
the format name ``'opgraph'``.
"""

from __future__ import annotations

import numpy as np

from theano_dag import scalar as ts
from theano_dag import tensor as tt
from theano_dag.formats.chain import register_conversion
from theano_dag.formats.opgraph.graph import OpGraph
from theano_dag.formats.opgraph.nodes import (
    Add,
    Chip,
    Cholesky,
    Division,
    EigenSolve,
    ElementwiseMultiplication,
    MatrixMultiply,
    Multiplication,
    Permute,
    Pow,
    Reshape,
    Scale,
    Slice,
    Subtraction,
    Tensor,
)
from theano_dag.formats.opgraph.rewrite import UnsupportedOperationError
from theano_dag.graph.basic import Constant
from theano_dag.graph.fg import FunctionGraph
from theano_dag.sparse.type import SparseType
from theano_dag.tensor import contractions, linalg
from theano_dag.tensor.basic import NotScalarConstantError, get_scalar_constant_value
from theano_dag.tensor.contractions import Einsum
from theano_dag.tensor.elemwise import DimShuffle, Elemwise
from theano_dag.tensor.linalg import Cholesky as CholeskyOp
from theano_dag.tensor.linalg import Eigh, GeneralizedEigh
from theano_dag.tensor.math import Dot
from theano_dag.tensor.shape import Reshape as ReshapeOp
from theano_dag.tensor.shape import reshape
from theano_dag.tensor.subtensor import Subtensor, _rebuild

__all__ = ["fgraph_to_opgraph", "opgraph_to_fgraph"]


# -- OpGraph -> FunctionGraph ---------------------------------------------------------------------


def _align(x, modes, target):
    """``x`` (axes named ``modes``) transposed to the order ``target``."""
    perm = [modes.index(m) for m in target]
    return x if perm == list(range(len(perm))) else x.dimshuffle(*perm)


def _dot_plan(ins, out):
    """``(a_order, b_order, result_modes)`` when ``ins -> out`` is a matrix/vector product."""
    if len(ins) != 2 or any(len(m) > 2 or len(set(m)) != len(m) for m in ins):
        return None
    a, b = ins
    shared = set(a) & set(b)
    if len(shared) != 1 or shared & set(out):
        return None
    (k,) = shared
    free_a, free_b = [m for m in a if m != k], [m for m in b if m != k]
    if sorted(free_a + free_b) != sorted(out) or len(set(out)) != len(out):
        return None
    return (*free_a, k), (k, *free_b), (*free_a, *free_b)


def _multiplication(xs, ins, out, op):
    if len(xs) == 1 and sorted(ins[0]) == sorted(out) and len(set(out)) == len(out):
        return _align(xs[0], ins[0], out)
    plan = _dot_plan(ins, out)
    if plan is not None:
        a_order, b_order, result = plan
        product = tt.dot(_align(xs[0], ins[0], a_order), _align(xs[1], ins[1], b_order))
        return _align(product, result, out)
    return contractions.einsum(op.subscripts(ins, [out]), *xs)


def _operation(op, xs, ins, outs):
    """The output Variables of OpGraph operation ``op`` on the Variables ``xs``."""
    out = outs[0]
    if isinstance(op, MatrixMultiply):
        return [tt.dot(*xs)]
    if isinstance(op, Multiplication):
        return [_multiplication(xs, ins, out, op)]
    if isinstance(op, Add | Subtraction | ElementwiseMultiplication | Division):
        args = [_align(x, m, out) for x, m in zip(xs, ins)]
        fn = {Add: tt.add, Subtraction: tt.sub, Division: tt.true_div}.get(type(op), tt.mul)
        return [fn(*args)]
    if isinstance(op, Scale | Pow | Permute):
        x = _align(xs[0], ins[0], out)
        if isinstance(op, Scale):
            return [x * op.factor]
        return [x**op.exponent if isinstance(op, Pow) else x]
    if isinstance(op, Slice):
        block = xs[0][tuple(slice(b, e) for b, e in zip(op.begin, op.end))]
        return [_align(block, ins[0], out)]
    if isinstance(op, Chip):
        index = [slice(None)] * len(ins[0])
        index[op.mode] = op.offset
        rest = ins[0][: op.mode] + ins[0][op.mode + 1 :]
        return [_align(xs[0][tuple(index)], rest, out)]
    if isinstance(op, Reshape):
        return [reshape(xs[0], op.shape)]
    if isinstance(op, Cholesky):
        return [_align(linalg.cholesky(xs[0]), ins[0], out)]
    if isinstance(op, EigenSolve):
        if len(xs) == 1:
            w, v = linalg.eigh(xs[0])
        else:
            w, v = linalg.generalized_eigh(xs[0], _align(xs[1], ins[1], ins[0]))
        return [_align(v, ins[0], out), w]
    raise UnsupportedOperationError(
        f"opgraph_to_fgraph: the operation {op.label()} has no theano_dag counterpart"
    )


def opgraph_to_fgraph(opgraph, inputs=None, outputs=None, dtype="float64"):
    """A FunctionGraph computing the tensors ``outputs`` of ``opgraph`` from ``inputs``.

    ``inputs`` and ``outputs`` are tensor node indices; they default to
    ``opgraph.sources()`` and ``opgraph.sinks()``, and give the order of the
    FunctionGraph's inputs and outputs. A source tensor has the dtype of its
    ``value`` when it has one, else ``dtype``.

    >>> from theano_dag import function
    >>> from theano_dag.formats.opgraph import Add, Tensor
    >>> g = OpGraph()
    >>> a, b, add, c = (g.add_node(n) for n in (Tensor("A"), Tensor("B"), Add(), Tensor("C")))
    >>> _ = g.add_edge(a, add, "i,j"), g.add_edge(b, add, "j,i"), g.add_edge(add, c, "i,j")
    >>> fg = opgraph_to_fgraph(g)
    >>> fg
    FunctionGraph(Elemwise{add,no_inplace}(A, InplaceDimShuffle{1,0}(B)))
    >>> function(fg.inputs, fg.outputs[0])(np.ones((2, 3)), np.arange(6.0).reshape(3, 2))
    array([[1., 3., 5.],
           [2., 4., 6.]])
    """
    opgraph.validate()
    inputs = opgraph.sources() if inputs is None else tuple(inputs)
    outputs = opgraph.sinks() if outputs is None else tuple(outputs)
    for n in inputs:
        if not opgraph.is_tensor(n) or opgraph.in_degree(n):
            raise ValueError(f"input node {n} ({opgraph[n].label()}) is not a source tensor")
    variables = {}
    for n in inputs:
        node = opgraph[n]
        rank = opgraph.rank(n) or 0
        shape = node.shape if node.shape is not None else (None,) * rank
        dt = np.asarray(node.value).dtype.name if node.value is not None else dtype
        variables[n] = tt.TensorType(dt, shape=shape)(node.name or f"t{n}")
    for n in opgraph.toposort():
        node = opgraph[n]
        if node.is_tensor:
            if n not in variables and not opgraph.in_degree(n):
                if node.value is None:
                    raise ValueError(
                        f"source tensor node {n} ({node.label()}) is no input and " "has no value"
                    )
                variables[n] = tt.constant(np.asarray(node.value), name=node.name)
            continue
        ins, outs = opgraph.op_labels(n)
        results = _operation(node, [variables[t] for t in opgraph.inputs(n)], ins, outs)
        for t, var in zip(opgraph.outputs(n), results):
            if opgraph[t].name is not None:
                var.name = opgraph[t].name
            variables[t] = var
    for t in outputs:
        if t not in variables:
            raise ValueError(f"output node {t} is not a tensor of this OpGraph")
    return FunctionGraph(
        [variables[n] for n in inputs], [variables[t] for t in outputs], clone=False
    )


# -- FunctionGraph -> OpGraph ---------------------------------------------------------------------

_NAMES = "ijklmnopqrstuvwxyzabcdefgh"


def _modes(ndim):
    if ndim > len(_NAMES):
        raise UnsupportedOperationError(f"fgraph_to_opgraph: {ndim} dimensions are too many")
    return ",".join(_NAMES[:ndim])


def _scalar_constant(var):
    try:
        return get_scalar_constant_value(var)
    except NotScalarConstantError:
        return None


def _plain(value):
    return value.item() if hasattr(value, "item") else value


class _Builder:
    """Adds the tensors and operations of a FunctionGraph to an OpGraph, on demand."""

    def __init__(self):
        self.g = OpGraph()
        self.tensor = {}  # Variable -> tensor node index

    def leaf(self, var):
        """The tensor node of ``var``, made for an input or a constant on first use."""
        if var not in self.tensor:
            if isinstance(var, Constant):
                node = Tensor(var.name or str(var), value=np.asarray(var.data))
            else:
                node = Tensor(var.name, shape=var.type.shape)
            self.tensor[var] = self.g.add_node(node)
        return self.tensor[var]

    def op(self, operation, args, outs):
        """Add ``operation`` reading ``args`` ([(var, labels)]) and writing ``outs`` (same)."""
        srcs = []
        for var, labels in args:  # inputs and constants get their nodes first
            src = self.leaf(var)
            if src in srcs:
                # one edge per pair of nodes: a second use reads an identity copy
                copy = self.g.add_node(Permute())
                self.g.add_edge(src, copy, labels)
                src = self.g.add_node(Tensor(var.name, shape=var.type.shape))
                self.g.add_edge(copy, src, labels)
            srcs.append(src)
        n = self.g.add_node(operation)
        for src, (_, labels) in zip(srcs, args):
            self.g.add_edge(src, n, labels)
        for var, labels in outs:
            t = self.tensor.get(var)
            if t is None:
                t = self.tensor[var] = self.g.add_node(Tensor(var.name, shape=var.type.shape))
            self.g.add_edge(n, t, labels)
        return n

    def fresh(self, like, name=None):
        """A tensor node for an intermediate result that has no Variable of its own."""
        return like.type(name)


def _unsupported(node, why=""):
    why = f" ({why})" if why else ""
    return UnsupportedOperationError(f"fgraph_to_opgraph: {node.op} has no OpGraph operation{why}")


def _elemwise(b, node):
    out = node.outputs[0]
    labels = _modes(out.ndim)
    scalar_op = node.op.scalar_op
    if any(x.broadcastable != out.broadcastable for x in node.inputs):
        consts = [_scalar_constant(x) for x in node.inputs]
        if len(node.inputs) == 2 and scalar_op in (ts.mul, ts.pow) and consts[1] is not None:
            op = Pow(_plain(consts[1])) if scalar_op is ts.pow else Scale(_plain(consts[1]))
            return b.op(op, [(node.inputs[0], labels)], [(out, labels)])
        if len(node.inputs) == 2 and scalar_op is ts.mul and consts[0] is not None:
            return b.op(Scale(_plain(consts[0])), [(node.inputs[1], labels)], [(out, labels)])
        raise _unsupported(node, "broadcasting")
    kinds = {ts.add: Add, ts.mul: ElementwiseMultiplication, ts.sub: Subtraction,
             ts.true_div: Division}  # fmt: skip
    if scalar_op not in kinds:
        raise _unsupported(node)
    return b.op(kinds[scalar_op](), [(x, labels) for x in node.inputs], [(out, labels)])


def _dimshuffle(b, node):
    (x,), (out,) = node.inputs, node.outputs
    order = node.op.new_order
    kept = [o for o in order if o != "x"]
    names = _NAMES[: x.ndim]
    if len(kept) == len(order) == x.ndim:  # a pure transpose: labels permuted on the edge
        return b.op(Permute(), [(x, ",".join(names))], [(out, ",".join(names[o] for o in kept))])
    shape = out.type.shape
    if shape.count(None) > 1:
        raise _unsupported(node, "adds or drops dimensions of unknown length")
    src = x
    if kept != sorted(kept):  # transpose first, then reshape in C order
        src = b.fresh(x)
        labels = [names[o] for o in kept] + [names[d] for d in range(x.ndim) if d not in kept]
        b.op(Permute(), [(x, ",".join(names))], [(src, ",".join(labels))])
    target = tuple(-1 if s is None else s for s in shape)
    return b.op(Reshape(target), [(src, ",".join(names))], [(out, _modes(out.ndim))])


def _subtensor(b, node):
    x, out = node.inputs[0], node.outputs[0]
    consts = [_scalar_constant(v) for v in node.inputs[1:]]
    if any(c is None for c in consts):
        raise _unsupported(node, "symbolic index")
    index = _rebuild(node.op.idx_list, consts)
    begin, end, chips = [], [], {}
    for d in range(x.ndim):
        idx = index[d] if d < len(index) else slice(None)
        if isinstance(idx, slice):
            bounds = (idx.start, idx.stop)
            if idx.step not in (None, 1) or any(v is not None and v < 0 for v in bounds):
                raise _unsupported(node, "negative bound or step")
            begin.append(idx.start or 0)
            end.append(idx.stop)
        else:
            if idx < 0:
                raise _unsupported(node, "negative index")
            begin.append(0)
            end.append(None)
            chips[d] = int(idx)
    names = _NAMES[: x.ndim]
    src = x
    if any(begin) or any(e is not None for e in end) or not chips:  # x[:] is a copy
        src = b.fresh(x) if chips else out
        op = Slice(tuple(begin), tuple(end))
        b.op(op, [(x, ",".join(names))], [(src, ",".join(names))])
    rest = list(names)
    for k, d in enumerate(sorted(chips, reverse=True)):  # the last dims first: d stays valid
        dst = out if k == len(chips) - 1 else b.fresh(x)
        modes = ",".join(rest)
        del rest[d]
        b.op(Chip(d, chips[d]), [(src, modes)], [(dst, ",".join(rest))])
        src = dst


def _reshape(b, node):
    x, shp = node.inputs
    if not isinstance(shp, Constant):
        raise _unsupported(node, "symbolic shape")
    shape = tuple(int(s) for s in np.asarray(shp.data))
    out = node.outputs[0]
    return b.op(Reshape(shape), [(x, _modes(x.ndim))], [(out, _modes(out.ndim))])


def _einsum_like(b, node):
    if isinstance(node.op, Einsum):
        ins, out = node.op.in_terms, node.op.out_term
        if len(set(out)) != len(out):
            raise _unsupported(node, "a repeated output subscript")
    else:
        a, c = (v.ndim for v in node.inputs)
        ins = ["ik"[2 - a :], "kj"[:c]]
        out = ins[0][:-1] + ins[1][1:]
    args = [(x, ",".join(t)) for x, t in zip(node.inputs, ins)]
    return b.op(Multiplication(), args, [(node.outputs[0], ",".join(out))])


def _linalg(b, node):
    x = node.inputs[0]
    if isinstance(node.op, Eigh):
        if node.op.UPLO != "L":
            raise _unsupported(node, "UPLO='U'")
        w, v = node.outputs
        return b.op(EigenSolve(), [(x, "i,j")], [(v, "i,j"), (w, "j")])
    if isinstance(node.op, GeneralizedEigh):
        w, v = node.outputs
        return b.op(EigenSolve(), [(x, "i,j"), (node.inputs[1], "i,j")], [(v, "i,j"), (w, "j")])
    labels = "i,j" if node.op.lower else "j,i"
    return b.op(Cholesky(), [(x, "i,j")], [(node.outputs[0], labels)])


#: our Op class -> the step that adds its node to the OpGraph (looked up along the MRO)
_CONVERTERS = {
    Elemwise: _elemwise, DimShuffle: _dimshuffle, Subtensor: _subtensor,
    ReshapeOp: _reshape, Einsum: _einsum_like, Dot: _einsum_like,
    CholeskyOp: _linalg, Eigh: _linalg, GeneralizedEigh: _linalg,
}  # fmt: skip


def fgraph_to_opgraph(fgraph):
    """``(opgraph, inputs, outputs)``: an OpGraph computing ``fgraph``, and the tensor node
    indices of the FunctionGraph's inputs and outputs, in order.

    >>> from theano_dag import tensor as tt
    >>> from theano_dag.formats.opgraph import evaluate
    >>> a, b = tt.dmatrix("a"), tt.dmatrix("b")
    >>> g, ins, outs = fgraph_to_opgraph(FunctionGraph([a, b], [tt.dot(a, b.T)], clone=False))
    >>> [node.label() for node in g.nodes()]
    ['b', 'Permute', 'b.T', 'a', 'Multiplication', 'Tensor']
    >>> x = np.arange(4.0).reshape(2, 2)
    >>> evaluate(g, {ins[0]: x, ins[1]: x})[outs[0]]
    array([[ 1.,  3.],
           [ 3., 13.]])
    """
    if not isinstance(fgraph, FunctionGraph):
        raise TypeError(f"fgraph_to_opgraph needs a FunctionGraph, got {type(fgraph).__name__}")
    # The first sparse variable in data-flow order is named.
    for var in [*fgraph.inputs, *(v for n in fgraph.toposort() for v in (*n.inputs, *n.outputs))]:
        if isinstance(var.type, SparseType):
            raise UnsupportedOperationError(
                f"fgraph_to_opgraph: {var} is a sparse matrix ({var.type}), and an OpGraph "
                "holds dense tensors only"
            )
    table = _CONVERTERS
    b = _Builder()
    needed = set()  # variables some operation reads as a tensor, or outputs
    for out in fgraph.outputs:
        needed.add(out)
    for node in reversed(fgraph.toposort()):
        if not any(o in needed for o in node.outputs):
            continue  # e.g. the DimShuffle of a constant folded into Scale or Pow
        convert = next((table[c] for c in type(node.op).__mro__ if c in table), None)
        if convert is None:
            raise _unsupported(node)
        needed.update(_operands(node))
    for node in fgraph.toposort():
        if any(o in needed for o in node.outputs):
            next(table[c] for c in type(node.op).__mro__ if c in table)(b, node)
    inputs = [b.leaf(x) for x in fgraph.inputs]
    outputs = [b.tensor[o] if o in b.tensor else b.leaf(o) for o in fgraph.outputs]
    return b.g, inputs, outputs


def _operands(node):
    """The inputs of ``node`` that its OpGraph operation reads as tensors."""
    if isinstance(node.op, Subtensor | ReshapeOp):
        return node.inputs[:1]
    if isinstance(node.op, Elemwise) and node.op.scalar_op in (ts.mul, ts.pow):
        out = node.outputs[0]
        if any(x.broadcastable != out.broadcastable for x in node.inputs):
            consts = [_scalar_constant(x) for x in node.inputs]
            if consts[1] is not None:
                return node.inputs[:1]
            if consts[0] is not None:
                return node.inputs[1:]
    return node.inputs


# -- steps of convert() ---------------------------------------------------------------------------


def _to_fgraph_step(opgraph, opgraph_inputs=None, opgraph_outputs=None, **_):
    return opgraph_to_fgraph(opgraph, opgraph_inputs, opgraph_outputs)


register_conversion("opgraph", "fgraph", _to_fgraph_step, detect=lambda g: isinstance(g, OpGraph))
register_conversion("fgraph", "opgraph", lambda fg, **_: fgraph_to_opgraph(fg)[0])
