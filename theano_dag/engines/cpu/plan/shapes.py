"""Shape inference for one input-shape signature: every intermediate's concrete shape.

The CPU engine plans memory per *signature* (the tuple of the input shapes).
For a signature, :func:`infer_shapes` walks the nodes in run order and asks each
op for its output shapes with plain integer input shapes: a few common ops have
fast rules here (elementwise broadcasting, ``DimShuffle``, reductions, ``Dot``,
``Subtensor`` with its indices known);
every other op answers through its own ``infer_shape``.

``infer_shape`` may answer with symbolic expressions (``Reshape`` does, from the
value of its shape input). Those are evaluated with the values known at plan
time: constants, and small integer values computed only from shapes (``Shape``,
``Shape_i``, ``MakeVector`` of them and arithmetic on them), which this module
computes too. A shape that cannot be known before the run (it depends on data)
is ``None``: the engine then runs that value unplanned, and so everything whose
shape depends on it, but for a value whose type fixes its shape (a scalar after it).
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Constant, Variable
from theano_dag.tensor.blas import Dot22, Dot22Scalar
from theano_dag.tensor.elemwise import DimShuffle, Elemwise
from theano_dag.tensor.math import Dot
from theano_dag.tensor.shape import Reshape, Shape, Shape_i
from theano_dag.tensor.subtensor import Subtensor
from theano_dag.tensor.type import TensorType

__all__ = ["ShapeError", "infer_shapes", "broadcast_shapes", "evaluate_expression"]

# Values up to this many elements are computed at plan time when they derive from
# shapes only (shape vectors, their entries, arithmetic on them).
KNOWN_VALUE_MAX_SIZE = 64


class ShapeError(ValueError):
    """Input shapes that a node cannot accept (raised at plan time, with the node)."""

    def __init__(self, msg, node=None, in_shapes=None):
        super().__init__(msg)
        self.node = node
        self.in_shapes = in_shapes


class _Unknown(Exception):
    """An expression needs a value that is not known before the run."""


def broadcast_shapes(shapes):
    """numpy's broadcasting of integer shapes (``None`` if one is unknown or they clash).

    >>> broadcast_shapes([(3, 1), (4,)])
    (3, 4)
    >>> broadcast_shapes([(3,), (4,)]) is None
    True
    """
    if any(s is None for s in shapes):
        return None
    first = shapes[0] if shapes else None
    if (
        type(first) is tuple
        and all(type(s) is tuple for s in shapes)
        and all(type(d) is int and d >= 0 for d in first)
        and shapes.count(first) == len(shapes)  # tuples of ints: compared in C
    ):
        return first  # the common case (an elementwise step's equal shapes), without numpy
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


def _as_int(v):
    """A shape entry as a Python int (``_Unknown`` if it is not a non-negative integer)."""
    if isinstance(v, (bool, np.bool_)):
        raise _Unknown
    if isinstance(v, (int, np.integer)):
        iv = int(v)
    elif isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "iu":
        iv = int(v)
    else:
        raise _Unknown
    if iv < 0:
        raise _Unknown
    return iv


def evaluate_expression(var, known):
    """Evaluate a symbolic expression with ``known`` values (``{Variable: value}``).

    Iterative (no recursion limit); raises ``LookupError`` when a needed value is
    neither a constant nor known.

    >>> import theano_dag.tensor as tt
    >>> n = tt.lscalar("n")
    >>> int(evaluate_expression(n * 2 + 1, {n: np.int64(3)}))
    7
    """
    try:
        return _evaluate(var, known)
    except _Unknown:
        raise LookupError(f"evaluate_expression: {var} needs a value that is not known") from None


def _evaluate(var, known):
    if not isinstance(var, Variable):
        return var
    cache: dict = {}
    stack = [var]
    while stack:
        v = stack[-1]
        if v in cache:
            stack.pop()
            continue
        if isinstance(v, Constant):
            cache[v] = v.data
            stack.pop()
            continue
        if v in known:
            cache[v] = known[v]
            stack.pop()
            continue
        node = v.owner
        if node is None:
            raise _Unknown
        missing = [i for i in node.inputs if i not in cache]
        if missing:
            stack.extend(missing)
            continue
        args = [cache[i] for i in node.inputs]
        # An inplace op (a fused ``(n - 1) * 2`` on a Shape_i) would write into a
        # known value that other expressions read again: it works on a copy.
        for j in {j for js in (getattr(node.op, "destroy_map", None) or {}).values() for j in js}:
            args[j] = np.array(args[j], copy=True)
        cells = [[None] for _ in node.outputs]
        with np.errstate(all="ignore"):
            node.op.perform(node, args, cells)
        for o, c in zip(node.outputs, cells):
            cache[o] = c[0]
        stack.pop()
    return cache[var]


# -- fast rules for common ops -----------------------------------------------------


def _elemwise(fgraph, node, in_shapes):
    static = node.outputs[0].type.shape
    nd = len(static)
    # Equal input shapes (most nodes): the output's, with nothing to broadcast.
    first = in_shapes[0] if in_shapes else None
    same = type(first) is tuple and len(first) == nd
    if same:
        for s in in_shapes:
            if s is not first and (type(s) is not tuple or s != first):
                same = False
                break
    out = first if same else _broadcast_elemwise(node, in_shapes, nd)
    for d, s in enumerate(static if static.count(None) != nd else ()):
        if s is not None and out[d] != s:
            raise ShapeError(
                f"{node.op}: output length {out[d]} along dimension {d} differs from the "
                f"static shape {node.outputs[0].type.shape}",
                node,
            )
    return [tuple(out)] * len(node.outputs)


def _broadcast_elemwise(node, in_shapes, nd):
    """The broadcast shape of an Elemwise node's inputs (a list), or ShapeError."""
    out = []
    for d in range(nd):
        lengths = {s[d] for s in in_shapes}
        if len(lengths) > 1:
            for x, s in zip(node.inputs, in_shapes):
                if s[d] == 1 and not x.type.broadcastable[d]:
                    raise ShapeError(
                        f"{node.op}: input shapes {list(in_shapes)} differ along dimension {d}, "
                        f"and input {node.inputs.index(x)} ({x}) has length 1 there but is not "
                        "declared broadcastable. Declare it broadcastable (e.g. tt.row/tt.col "
                        "or x.dimshuffle('x', 0)) to broadcast it.",
                        node,
                    )
            rest = lengths - {1}
            if len(rest) > 1:
                raise ShapeError(
                    f"{node.op}: input shapes {list(in_shapes)} do not match along dimension {d}",
                    node,
                )
            out.append(rest.pop())
        else:
            out.append(lengths.pop() if lengths else 1)
    return out


def _dimshuffle(fgraph, node, in_shapes):
    (s,) = in_shapes
    for d in node.op.drop:
        if s[d] != 1:
            raise ShapeError(
                f"{node.op}: cannot drop dimension {d} of an input of shape {s} (its length "
                "is not 1)",
                node,
            )
    return [tuple(1 if o == "x" else s[o] for o in node.op.new_order)]


def _dot(fgraph, node, in_shapes):
    xs, ys = in_shapes[0], in_shapes[1]
    if xs[-1] != ys[0]:
        raise ShapeError(
            f"{node.op}: shapes {xs} and {ys} are not aligned ({xs[-1]} != {ys[0]})", node
        )
    return [tuple(xs[:-1]) + tuple(ys[1:])]


FAST_RULES: dict = {}


FAST_RULES[Elemwise] = _elemwise
FAST_RULES[DimShuffle] = _dimshuffle
FAST_RULES[Dot] = FAST_RULES[Dot22] = FAST_RULES[Dot22Scalar] = _dot


def _subtensor(fgraph, node, in_shapes, known):
    """Basic indexing with integers: Subtensor's own ``infer_shape`` builds a symbolic
    ``slice_length`` graph per slice and evaluating it cost milliseconds per node (a
    loop's gradient reads dozens of row ranges). ``None`` when an index is not known
    before the run; the node then runs unplanned, as through ``infer_shape``."""
    x_shape = in_shapes[0]
    values = []
    for v in node.inputs[1:]:
        if isinstance(v, Constant):
            values.append(v.data)
        elif v in known:
            values.append(known[v])
        else:
            return None
    it = iter(values)
    out = []
    try:
        for d, entry in enumerate(node.op.idx_list):
            if entry[0] == "int":
                i = int(next(it))
                if not -x_shape[d] <= i < x_shape[d]:
                    return None  # the run raises numpy's IndexError
                continue
            parts = [int(next(it)) if present else None for present in entry[1:]]
            out.append(len(range(x_shape[d])[slice(*parts)]))
    except (ValueError, TypeError, IndexError):  # a zero step, a non-integer: the run says
        return None
    out.extend(x_shape[len(node.op.idx_list) :])
    return [tuple(out)]


def _reshape(fgraph, node, in_shapes, known):
    """Reshape's own ``infer_shape``, kept only when it holds the input's element count:
    that rule gives the asked shape unchecked, and a later node's plan-time check would
    then report a mismatch that is the reshape's (an ``add`` of shapes (1, 2) and (1, 3)
    for a 2-vector reshaped to (1, 3)). ``None`` runs it unplanned: Reshape itself says
    what it cannot reshape, as Theano does."""
    result = _generic(fgraph, node, in_shapes, known)
    if result and result[0] is not None and _size(result[0]) != _size(in_shapes[0]):
        return None
    return result


# Rules that read the values known at plan time (index inputs), not only shapes.
KNOWN_RULES: dict = {Subtensor: _subtensor, Reshape: _reshape}

# the op classes whose output is a function of their input's *shape* only
_SHAPE, _SHAPE_I = Shape, Shape_i
_SHAPE_OPS = tuple(c for c in (_SHAPE, _SHAPE_I) if c is not None)


def _size(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def infer_shapes(fgraph, order, input_shapes, constants=None):
    """Concrete shapes of every variable for one signature.

    ``input_shapes`` maps each graph input to its shape tuple (``None`` for a
    value with no shape); ``constants`` maps variables whose value is fixed
    (constants, values folded at link time) to it. Returns ``(shapes, known)``:
    ``shapes[v]`` is a tuple of ints or ``None`` (unknown before the run, or not
    an array); ``known`` holds the small values computed from shapes alone.
    Raises :class:`ShapeError` (carrying ``.node``) when a node cannot accept its
    input shapes.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.basic import io_toposort
    >>> x, y = tt.dmatrix("x"), tt.drow("y")
    >>> z = tt.dot(tt.exp(x) + y, x.T).sum(axis=0)
    >>> shapes, _ = infer_shapes(None, io_toposort([x, y], [z]), {x: (3, 4), y: (1, 4)})
    >>> shapes[z]
    (3,)
    """
    shapes: dict = dict(input_shapes)
    known: dict = {}
    typed: set = set()  # values whose shape is their type's, their inputs' unknown
    # Each op class's rules (KNOWN_RULES, FAST_RULES) and whether it is a shape op,
    # looked up once a class: a graph has a few classes of op and many nodes.
    rules_of: dict = {}
    for v, val in (constants or {}).items():
        known[v] = val
        shapes[v] = np.shape(val) if isinstance(val, np.ndarray | np.generic) else None
    for node in order:
        in_shapes = []
        for v in node.inputs:
            if v not in shapes:
                if isinstance(v, Constant):
                    data = v.data
                    known[v] = data
                    shapes[v] = (
                        np.shape(data) if isinstance(data, np.ndarray | np.generic) else None
                    )
                else:
                    shapes[v] = None
            in_shapes.append(shapes[v])
        outs = node.outputs
        if outs[0] in known if len(outs) == 1 else all(o in known for o in outs):
            continue  # folded at link time
        op = node.op
        rules = rules_of.get(type(op))
        if rules is None:
            t = type(op)
            rules = rules_of[t] = (KNOWN_RULES.get(t), FAST_RULES.get(t), issubclass(t, _SHAPE_OPS))
        known_rule, rule, shape_op = rules
        result = None
        for v, s in zip(node.inputs, in_shapes):
            # A value that is not an array (a random generator, a slice) has no shape:
            # the op's rule gets None for it, as Theano's infer_shape does.
            if s is None and getattr(v.type, "ndim", None) is not None:
                # Not known before the run (after a data-dependent index, an op without
                # infer_shape): a value whose type fixes its shape (a scalar, a vector
                # of 2) has that shape all the same, and is planned with what follows
                # it (a kernel checks its operands' shapes when it runs).
                result = [_static_shape(o) for o in outs]
                typed.update(o for o, r in zip(outs, result) if r is not None)
                break
        else:
            try:
                if known_rule is not None:
                    result = known_rule(fgraph, node, in_shapes, known)
                elif rule is not None:
                    result = rule(fgraph, node, in_shapes)
                else:
                    result = _generic(fgraph, node, in_shapes, known)
            except ShapeError as e:
                if typed and any(v in typed for v in node.inputs):
                    # A shape taken from a type that its value will not have (a reshape
                    # that fails when it runs): the error is the run's to raise, there.
                    result = None
                else:
                    e.in_shapes = in_shapes
                    raise
        if result is None:
            result = [None] * len(outs)
        for o, s in zip(outs, result):
            shapes[o] = s
        # (Most nodes have an input whose value is not known: _know_values would stop
        # at the first one; asked here without the call.)
        ins = node.inputs
        if ((ins and ins[0] in known) or shape_op) and not (typed and any(v in typed for v in ins)):
            _know_values(node, in_shapes, result, known)
    return shapes, known


def _static_shape(v):
    """``v``'s shape as its tensor type fixes it, or None."""
    t = v.type
    if not isinstance(t, TensorType):
        return None
    shape = t.shape
    return None if None in shape else tuple(shape)


def _generic(fgraph, node, in_shapes, known):
    if all(getattr(o.type, "ndim", None) is None for o in node.outputs):
        return None
    try:
        raw = node.op.infer_shape(
            fgraph, node, [None if s is None else tuple(s) for s in in_shapes]
        )
    except Exception:
        return None
    if raw is None or len(raw) != len(node.outputs):
        return None
    result = []
    for o, shp in zip(node.outputs, raw):
        if shp is None or getattr(o.type, "ndim", None) is None:
            result.append(None)  # not an array (a random draw's new generator)
            continue
        try:
            entries = tuple(_as_int(_evaluate(e, known)) for e in shp)
        except Exception:
            result.append(None)
            continue
        if len(entries) != o.type.ndim:
            result.append(None)
            continue
        result.append(entries)
    return result


def _know_values(node, in_shapes, out_shapes, known):
    """Compute the node's outputs now when they derive from shapes alone and are small."""
    op = node.op
    if _SHAPE is not None and isinstance(op, _SHAPE):
        if in_shapes[0] is not None:
            known[node.outputs[0]] = np.asarray(in_shapes[0], dtype="int64")
        return
    if _SHAPE_I is not None and isinstance(op, _SHAPE_I):
        if in_shapes[0] is not None:
            known[node.outputs[0]] = np.asarray(in_shapes[0][op.i], dtype="int64")
        return
    # (Runs for every node of every plan: most have an input not known, the first
    # one met ends it; no generator.)
    if not node.inputs:
        return
    for v in node.inputs:
        if v not in known:
            return
    if any(s is None or _size(s) > KNOWN_VALUE_MAX_SIZE for s in out_shapes):
        return
    if getattr(op, "destroy_map", None):
        return
    try:
        if not op.do_constant_folding(None, node):
            return
    except Exception:
        return
    cells = [[None] for _ in node.outputs]
    try:
        with np.errstate(all="ignore"):
            op.perform(node, [known[v] for v in node.inputs], cells)
    except Exception:
        return
    for o, c in zip(node.outputs, cells):
        known[o] = c[0]
