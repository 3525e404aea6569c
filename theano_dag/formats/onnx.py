"""ONNX: export a theano_dag graph (a compiled function, a FunctionGraph, or inputs and
outputs) to an ``onnx.ModelProto``, and import the operators it exports back.

What is exported is the graph as the user wrote it (a compiled function's source graph,
before any engine lowered it): elementwise arithmetic, comparisons, logic, casts and
the common functions (exponentials, logarithms, trigonometric, rounding, ``erf``),
``dot``, ``conv2d``, ``pool_2d``, softmax and log-softmax, reductions, ``concatenate``,
``dimshuffle``, ``reshape`` and shapes, each with theano_dag's meaning where ONNX's
operator means something else (an integer sum accumulates in the op's accumulator
dtype, int64 for int8, as on the engines). Shared variables and constants become
initializers. Needs the ``onnx`` extra (``pip install 'theano_dag[onnx]'``); ONNX
Runtime runs what it writes.

>>> import numpy as np
>>> import theano_dag.tensor as tt
>>> from theano_dag.formats.onnx import from_onnx, to_onnx
>>> x = tt.fmatrix("x")
>>> model = to_onnx([x], [tt.exp(x).sum(axis=1)])
>>> [n.op_type for n in model.graph.node]
['Exp', 'ReduceSum', 'Identity']
>>> inputs, outputs = from_onnx(model)
>>> outputs[0].eval({inputs[0]: np.zeros((2, 3), "float32")})
array([3., 3.], dtype=float32)
"""

from __future__ import annotations

import functools

import numpy as np

from theano_dag.formats.decompose import DECOMPOSITIONS, expand
from theano_dag.graph.algorithms import io_toposort
from theano_dag.graph.basic import Constant
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.identity_ops import DeepCopyOp, ViewOp
from theano_dag.graph.shared import SharedVariable, shared
from theano_dag.scalar import arith as sb
from theano_dag.scalar.arith import int_cast_bounds
from theano_dag.scalar.basic import get_scalar_type
from theano_dag.tensor import basic as tb
from theano_dag.tensor import math as tm
from theano_dag.tensor.arrays import Assert
from theano_dag.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from theano_dag.tensor.nnet import (
    AbstractConv2d,
    LogSoftmax,
    Pool,
    Softmax,
    border_mode_to_pad,
    conv2d,
    log_softmax,
    pool_2d,
    softmax,
)
from theano_dag.tensor.shape import (
    EqualLengths,
    IndicesInBounds,
    MakeVector,
    Reshape,
    Shape,
    Shape_i,
    reshape,
    shape,
)
from theano_dag.tensor.subtensor import Subtensor
from theano_dag.tensor.type import TensorType, discrete_dtypes

__all__ = ["OPSET", "OnnxExportError", "from_onnx", "to_onnx"]

OPSET = 18  # the first opset whose reductions all take their axes as an input
_MISSING = "theano_dag.formats.onnx needs the onnx package: pip install 'theano_dag[onnx]'"


class OnnxExportError(NotImplementedError):
    """An op (or a form of one) that has no ONNX operator here; or an ONNX node that
    :func:`from_onnx` does not import."""


def _onnx():
    try:
        import onnx  # noqa: PLC0415 (optional extra: theano_dag[onnx])
    except ImportError as exc:
        raise ImportError(_MISSING) from exc
    return onnx


# theano_dag scalar op name -> ONNX operator (elementwise, numpy broadcasting in both)
_ELEMWISE = {
    "add": "Add",
    "mul": "Mul",
    "sub": "Sub",
    "true_div": "Div",
    "neg": "Neg",
    "exp": "Exp",
    "log": "Log",
    "sqrt": "Sqrt",
    "abs": "Abs",
    "maximum": "Max",
    "minimum": "Min",
    "pow": "Pow",
    "tanh": "Tanh",
    "sigmoid": "Sigmoid",
    "gt": "Greater",
    "lt": "Less",
    "eq": "Equal",
    "switch": "Where",
    "identity": "Identity",
    "ge": "GreaterOrEqual",
    "le": "LessOrEqual",
    "sin": "Sin",
    "cos": "Cos",
    "tan": "Tan",
    "arcsin": "Asin",
    "arccos": "Acos",
    "arctan": "Atan",
    "sinh": "Sinh",
    "cosh": "Cosh",
    "arcsinh": "Asinh",
    "arccosh": "Acosh",
    "arctanh": "Atanh",
    "isnan": "IsNaN",
    "isinf": "IsInf",
    "sgn": "Sign",
    "floor": "Floor",
    "ceil": "Ceil",
    "round_half_to_even": "Round",  # ONNX's Round is half to even
    "erf": "Erf",
    "reciprocal": "Reciprocal",
    # Spelled in other operators (_Exporter.elemwise): same meaning, numpy's.
    "neq": None,
    "sqr": None,
    "clip": None,
    "second": None,
    "log1p": None,  # (ONNX has neither: _Exporter.log1p and expm1 write them)
    "expm1": None,
    "and_": None,
    "or_": None,
    "xor": None,
    "invert": None,
}
# Bitwise on integers, logical on bools (theano_dag's and_, or_, xor and invert are both).
_BITWISE = {
    "and_": ("BitwiseAnd", "And"),
    "or_": ("BitwiseOr", "Or"),
    "xor": ("BitwiseXor", "Xor"),
    "invert": ("BitwiseNot", "Not"),
}
# Comparisons: the operands in their common dtype, a bool out.
_COMPARE = ("Greater", "Less", "Equal", "GreaterOrEqual", "LessOrEqual")
_REDUCE = {"add": "ReduceSum", "mul": "ReduceProd", "maximum": "ReduceMax", "minimum": "ReduceMin"}
_POOL = {"max": ("MaxPool", None), "average_inc_pad": ("AveragePool", 1)}
_POOL["average_exc_pad"] = ("AveragePool", 0)


class _Exporter:
    def __init__(self, onnx):
        self.onnx, self.h = onnx, onnx.helper
        self.names: dict[object, str] = {}
        self.nodes, self.initializers = [], []

    def name(self, var):
        if var not in self.names:
            base = var.name or "v"
            self.names[var] = f"{base}_{len(self.names)}"
            if isinstance(var, (Constant, SharedVariable)):
                value = var.data if isinstance(var, Constant) else var.get_value(borrow=True)
                self.initializer(np.asarray(value, dtype=var.dtype), self.names[var])
        return self.names[var]

    def initializer(self, value, name):
        self.initializers.append(self.onnx.numpy_helper.from_array(np.asarray(value), name))
        return name

    def const(self, value, dtype="int64"):
        return self.initializer(np.asarray(value, dtype=dtype), f"c{len(self.initializers)}")

    def tmp(self):
        self.names[object()] = name = f"t{len(self.names)}"
        return name

    def emit(self, op_type, inputs, output=None, **attrs):
        output = output or self.tmp()
        self.nodes.append(self.h.make_node(op_type, list(inputs), [output], **attrs))
        return output

    def value_info(self, var, name):
        dims = [d if d is not None else f"{name}_d{i}" for i, d in enumerate(var.type.shape)]
        elem = self.h.np_dtype_to_tensor_dtype(np.dtype(var.dtype))
        return self.h.make_tensor_value_info(name, elem, dims)

    # -- one Apply node ---------------------------------------------------------------

    def apply(self, node):
        op, ins = node.op, [self.name(v) for v in node.inputs]
        out = self.name(node.outputs[0])
        if isinstance(op, Elemwise):
            return self.elemwise(node, ins, out)
        if isinstance(op, (DeepCopyOp, ViewOp)):
            # a ViewOp's value is its first input (batch norm's gradient identity has more)
            return self.emit("Identity", ins[:1], out)
        if isinstance(op, DimShuffle):
            return self.dimshuffle(op, node.inputs[0].ndim, ins[0], out)
        if isinstance(op, CAReduce) and op.scalar_op.name in _REDUCE:
            return self.reduce(op, node, ins[0], out)
        if isinstance(op, tm.Dot):
            return self.emit("MatMul", ins, out)
        if isinstance(op, (Softmax, LogSoftmax)):
            kind = "Softmax" if isinstance(op, Softmax) else "LogSoftmax"
            return self.emit(kind, ins, out, axis=op.axis)
        if isinstance(op, tb.Join):
            axis = int(node.inputs[0].data) if op.axis is None else op.axis
            parts = ins[1:] if op.axis is None else ins
            part_vars = node.inputs[1:] if op.axis is None else node.inputs
            dst = node.outputs[0].dtype  # theano_dag joins mixed dtypes in their upcast
            parts = [
                self.cast(v.dtype, dst, n) if v.dtype != dst else n
                for v, n in zip(part_vars, parts)
            ]
            return self.emit("Concat", parts, out, axis=axis)
        if isinstance(op, Shape_i):
            shape = self.emit("Shape", ins, start=op.i, end=op.i + 1)
            return self.emit("Squeeze", [shape, self.const([0])], out)
        if isinstance(op, Shape):
            return self.emit("Shape", ins, out)
        if isinstance(op, Reshape):
            shape = self.emit("Cast", [ins[1]], to=self.onnx.TensorProto.INT64)
            return self.emit("Reshape", [ins[0], shape], out)
        if isinstance(op, MakeVector):
            parts = [self.vector(n) for n in ins]
            return self.emit("Concat", parts, out, axis=0)
        if isinstance(op, Subtensor):
            return self.subtensor(op, node, ins, out)
        if isinstance(op, AbstractConv2d) and not op.unshared:  # (no ONNX locally connected)
            return self.conv(op, node, ins, out)
        if isinstance(op, Pool):
            return self.pool(op, node, ins, out)
        if isinstance(op, (EqualLengths, IndicesInBounds, Assert)):
            # ONNX has no operator that raises: a check would silently pass.
            raise OnnxExportError(
                f"to_onnx: no ONNX operator for {op} ({type(op).__name__}), a check that "
                "raises when lengths or conditions fail; ONNX has none. Export the graph "
                "before its checks are made (its outputs' expressions, or a function "
                "compiled with mode.excluding('ShapeOpt')), or drop them: "
                "mode.including('local_remove_all_assert')"
            )
        raise OnnxExportError(f"to_onnx: no ONNX operator for {op} ({type(op).__name__})")

    def elemwise(self, node, ins, out):
        """An Elemwise node, or a node of a scalar graph (its variables know their dtypes,
        ONNX's operators broadcast as ours)."""
        scalar_op = node.op.scalar_op if isinstance(node.op, Elemwise) else node.op
        name = scalar_op.name
        if isinstance(scalar_op, sb.Cast):
            return self.cast(node.inputs[0].dtype, node.outputs[0].dtype, ins[0], out)
        if name not in _ELEMWISE and type(scalar_op) in DECOMPOSITIONS:
            return self.compound(scalar_op, node, ins, out)
        if name not in _ELEMWISE:
            raise OnnxExportError(f"to_onnx: no ONNX operator for the elementwise {name}")
        kind_of_input = np.dtype(node.inputs[0].dtype).kind
        if name == "abs" and kind_of_input in "bu":  # ONNX's Abs takes no bool
            return self.emit("Identity", ins, out)
        if name == "neg" and kind_of_input == "u":  # ONNX's Neg takes signed types only
            return self.emit("Sub", [self.const(0, node.inputs[0].dtype), ins[0]], out)
        kind = _ELEMWISE[name]
        dtypes = [v.dtype for v in node.inputs]
        if name in ("isnan", "isinf"):
            if kind_of_input == "f":
                return self.emit(kind, ins, out)
            # no integer or bool is NaN or infinite (ONNX's take floats only)
            return self.emit("Not", [self.emit("Equal", [ins[0], ins[0]])], out)
        if name == "neq":
            kind = "Equal"
        elif name in _BITWISE:
            kind = _BITWISE[name][node.outputs[0].dtype == "bool"]
        elif name == "second":  # the second input, broadcast against the first
            y = ins[1]
            if dtypes[1] != node.outputs[0].dtype:
                y = self.cast(dtypes[1], node.outputs[0].dtype, y)
            return self.emit("Expand", [y, self.emit("Shape", [ins[0]])], out)
        elif name in ("sqr", "clip"):
            kind = "Mul" if name == "sqr" else "Max"
        # theano_dag upcasts mixed dtypes (x - 1 with an int8 1); ONNX wants them equal
        if kind == "Where":
            target, first = node.outputs[0].dtype, 1
        elif kind in _COMPARE:
            target, first = np.result_type(*dtypes).name, 0
        else:
            target, first = node.outputs[0].dtype, 0
        elem = self.h.np_dtype_to_tensor_dtype(np.dtype(target))
        ins = [
            self.emit("Cast", [n], to=elem) if i >= first and d != target else n
            for i, (n, d) in enumerate(zip(ins, dtypes))
        ]
        if kind == "Where" and dtypes[0] != "bool":
            # theano_dag's condition is any dtype, true where nonzero (NaN too); ONNX's
            # is a bool.
            zero = self.const(0, dtypes[0])
            ins[0] = self.emit("Not", [self.emit("Equal", [ins[0], zero])])
        while len(ins) > 2 and kind in ("Add", "Mul"):  # n-ary in theano_dag, binary in ONNX
            ins = [self.emit(kind, ins[:2]), *ins[2:]]
        if name == "neq":
            return self.emit("Not", [self.emit("Equal", ins)], out)
        if name == "sqr":
            return self.emit("Mul", [ins[0], ins[0]], out)
        if name in ("log1p", "expm1"):
            return getattr(self, name)(ins[0], target, out)
        if name == "clip":  # numpy's minimum(maximum(x, lo), hi), but lo where x < lo > hi
            x, lo, hi = ins
            low = self.emit("And", [self.emit("Less", [x, lo]), self.emit("Greater", [lo, hi])])
            return self.emit(
                "Where", [low, lo, self.emit("Min", [self.emit("Max", [x, lo]), hi])], out
            )
        return self.emit(kind, ins, out)

    def compound(self, scalar_op, node, ins, out):
        """One of our compound scalar ops (binary_crossentropy, sech2...) in the ONNX
        operators of its elementary decomposition (:mod:`theano_dag.formats.decompose`)."""
        xs = [get_scalar_type(v.dtype)() for v in node.inputs]
        has = lambda op: isinstance(op, sb.Cast) or op.name in _ELEMWISE
        (res,) = expand(xs, scalar_op.make_node(*xs).outputs, has)
        names = dict(zip(xs, ins))
        for snode in io_toposort(xs, [res]):
            for v in snode.inputs:
                if v not in names:  # a constant: one initializer however often it is used
                    names[v] = self.const(v.data, v.dtype)
            sins = [names[v] for v in snode.inputs]
            last = out if snode.outputs[0] is res else None
            names[snode.outputs[0]] = self.elemwise(snode, sins, last)
        return names[res]

    def log1p(self, y, dtype, out=None):
        """``log(1 + y)``, exact for a small ``y`` (ONNX has no Log1p): ``y`` where
        ``u = 1 + y`` rounds to 1, else ``log(u) * (y / (u - 1))``, whose ratio cancels
        the rounding of ``u`` (Kahan); ``u`` itself at ``+inf``. :func:`from_onnx` reads
        the form back as ``log1p``."""
        one, inf = self.const(1, dtype), self.const(np.inf, dtype)
        u = self.emit("Add", [one, y])
        ratio = self.emit("Div", [y, self.emit("Sub", [u, one])])
        r = self.emit("Mul", [self.emit("Log", [u]), ratio])
        r = self.emit("Where", [self.emit("Equal", [u, inf]), u, r])
        return self.emit("Where", [self.emit("Equal", [u, one]), y, r], out)

    def expm1(self, x, dtype, out=None):
        """``exp(x) - 1``, exact for a small ``x`` (ONNX has no Expm1): ``x`` where
        ``u = exp(x)`` rounds to 1, -1 where ``u - 1`` does, ``u`` at ``+inf``, else
        ``(u - 1) * (x / log(u))`` (Kahan). :func:`from_onnx` reads it back as ``expm1``."""
        one, minus_one, inf = (self.const(c, dtype) for c in (1, -1, np.inf))
        u = self.emit("Exp", [x])
        um1 = self.emit("Sub", [u, one])
        r = self.emit("Mul", [um1, self.emit("Div", [x, self.emit("Log", [u])])])
        r = self.emit("Where", [self.emit("Equal", [u, inf]), u, r])
        r = self.emit("Where", [self.emit("Equal", [um1, minus_one]), minus_one, r])
        return self.emit("Where", [self.emit("Equal", [u, one]), x, r], out)

    def cast(self, src, dst, x, out=None):
        """``Cast`` with the engines' rule for a float out of an integer's range (and
        NaN): the integer's minimum, where ONNX leaves the result undefined."""
        to = self.h.np_dtype_to_tensor_dtype(np.dtype(dst))
        if np.dtype(src).kind != "f" or np.dtype(dst).kind not in "iu":
            return self.emit("Cast", [x], out, to=to)
        if np.dtype(src).itemsize < 4:  # float16 cannot hold int32's minimum: float32 can
            x, src = self.emit("Cast", [x], to=self.onnx.TensorProto.FLOAT), "float32"
        lo, hi = (self.const(b, src) for b in int_cast_bounds(src, dst))
        inside = self.emit("And", [self.emit("Greater", [x, lo]), self.emit("Less", [x, hi])])
        # The minimum is a power of two (or 0): exact in every float dtype, so the
        # choice is made on the floats (ONNX Runtime's Where takes few integer dtypes).
        minimum = self.const(np.iinfo(dst).min, src)
        return self.emit("Cast", [self.emit("Where", [inside, x, minimum])], out, to=to)

    def reduce(self, op, node, x, out):
        """A reduction accumulating in the op's accumulator dtype (ONNX's reduce in the
        input's), over the op's axes (an empty ONNX axes list means all of them)."""
        axes = list(range(node.inputs[0].ndim) if op.axis is None else op.axis)
        src, dst = node.inputs[0].dtype, node.outputs[0].dtype
        acc = getattr(op, "acc_dtype_for", lambda d: dst)(src) or dst
        if not axes:
            return self.cast(src, dst, x, out)
        if np.dtype(src).kind == "f" and src == dst:
            # A float sum in its own dtype: a wider accumulator changes only the
            # rounding, and ONNX Runtime's own sum is what its users know.
            acc = src
        if acc != src:
            x = self.cast(src, acc, x)
        nan_aware = op.scalar_op.name in ("maximum", "minimum") and np.dtype(acc).kind == "f"
        last = out if acc == dst and not nan_aware else None
        r = self.emit(_REDUCE[op.scalar_op.name], [x, self.const(axes)], last, keepdims=0)
        if nan_aware:
            # numpy's max and min are NaN where a NaN is among the values; ONNX Runtime's
            # ReduceMax and ReduceMin skip it.
            nan = self.emit("Cast", [self.emit("IsNaN", [x])], to=self.onnx.TensorProto.FLOAT)
            seen = self.emit("ReduceMax", [nan, self.const(axes)], keepdims=0)
            seen = self.emit("Greater", [seen, self.const(0, "float32")])
            last = out if acc == dst else None
            r = self.emit("Where", [seen, self.const(np.nan, acc), r], last)
        return self.cast(acc, dst, r, out) if acc != dst else r

    def vector(self, scalar):
        """A 0-d integer as the 1-d int64 ONNX takes for indices."""
        v = self.emit("Unsqueeze", [scalar, self.const([0])])
        return self.emit("Cast", [v], to=self.onnx.TensorProto.INT64)

    def subtensor(self, op, node, ins, out):
        x, idx, ints = ins[0], iter(node.inputs[1:]), []
        big = 2**62  # ONNX clamps a start or end past the length to the length

        def vec(var, default):
            if var is None:
                return self.const([default])
            if isinstance(var, Constant):  # constants stay constants, for the import
                return self.const([int(var.data)])
            return self.vector(self.name(var))

        for d, entry in enumerate(op.idx_list):
            if entry[0] == "int":
                ints.append((d, self.name(next(idx))))
                continue
            start, stop, step = (next(idx) if present else None for present in entry[1:])
            if step is not None and not isinstance(step, Constant):
                raise OnnxExportError("to_onnx: a slice's step must be a constant")
            neg = step is not None and int(step.data) < 0
            parts = [vec(start, big if neg else 0), vec(stop, -big if neg else big)]
            x = self.emit("Slice", [x, *parts, self.const([d]), vec(step, 1)])
        for d, i in reversed(ints):  # the last axes first: the earlier keep their numbers
            i = self.emit("Cast", [i], to=self.onnx.TensorProto.INT64)
            x = self.emit("Gather", [x, i], axis=d)
        return self.emit("Identity", [x], out)

    def dimshuffle(self, op, ndim, x, out):
        order = op.new_order
        dropped = [d for d in range(ndim) if d not in order]
        if dropped:
            x = self.emit("Squeeze", [x, self.const(dropped)])
        kept = [d for d in order if d != "x"]
        perm = [sorted(kept).index(d) for d in kept]
        if perm != sorted(perm):
            x = self.emit("Transpose", [x], perm=perm)
        new = [i for i, d in enumerate(order) if d == "x"]
        return (
            self.emit("Unsqueeze", [x, self.const(new)], out)
            if new
            else self.emit("Identity", [x], out)
        )

    def conv(self, op, node, ins, out):
        kshp = node.inputs[1].type.shape[2:]
        if op.border_mode in ("half", "full") and None in kshp:
            raise OnnxExportError("to_onnx: conv2d padding needs the filters' static shape")
        if op.border_mode in ("half", "full"):
            (top, bottom), (left, right) = border_mode_to_pad(
                op.border_mode, kshp, op.filter_dilation
            )
        elif op.border_mode == "valid":
            top = bottom = left = right = 0
        else:  # explicit padding: an int or a (before, after) pair per axis
            (top, bottom), (left, right) = (
                p if isinstance(p, tuple) else (p, p) for p in op.border_mode
            )
        w = ins[1]
        if op.filter_flip:  # ONNX's Conv correlates: a true convolution flips the filters
            w = self.emit(
                "Slice",
                [w, self.const([-1, -1]), self.const([-(2**62)] * 2), self.const([2, 3])]
                + [self.const([-1, -1])],
            )
        return self.emit(
            "Conv",
            [ins[0], w],
            out,
            strides=list(op.subsample),
            dilations=list(op.filter_dilation),
            pads=[top, left, bottom, right],
            group=op.num_groups,
        )

    def pool(self, op, node, ins, out):
        if op.ndim != 2 or not op.ignore_border or op.mode not in _POOL:
            raise OnnxExportError(
                f"to_onnx: {op} (ONNX pools 2-d windows with ignore_border=True, "
                f"modes {sorted(_POOL)})"
            )
        kind, include_pad = _POOL[op.mode]
        attrs = {"kernel_shape": list(op.ws), "strides": list(op.stride)}
        attrs["pads"] = [op.pad[0], op.pad[1], op.pad[0], op.pad[1]]
        if include_pad is not None:
            attrs["count_include_pad"] = include_pad
        return self.emit(kind, ins, out, **attrs)


def _source(graph, outputs):
    """(inputs, outputs) of what to export: a compiled function's source graph, a
    FunctionGraph's, or the lists given."""
    if outputs is not None:
        return list(graph), list(outputs)
    if isinstance(graph, FunctionGraph):
        return list(graph.inputs), list(graph.outputs)
    maker = getattr(graph, "maker", None)
    if maker is not None and getattr(maker, "_source", None) is not None:
        ins, outs = maker._source  # the graph as given, before the engine lowered it
        ins = [getattr(i, "variable", i) for i in (ins if isinstance(ins, list) else [ins])]
        ins = [i for i in ins if not isinstance(i, SharedVariable)]  # initializers
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        return ins, [getattr(o, "variable", o) for o in outs]
    raise TypeError(
        "to_onnx: give a compiled function, a FunctionGraph, or inputs and outputs; "
        f"got {type(graph).__name__}"
    )


def to_onnx(graph, outputs=None, name="theano_dag", opset=OPSET):
    """The ONNX model of ``graph``: a function compiled by ``theano_dag.function``, a
    ``FunctionGraph``, or a list of inputs with ``outputs``. The inputs stay inputs
    (their unknown dimensions named), shared variables and constants become initializers.
    Raises :class:`OnnxExportError` naming an op without an ONNX counterpart.
    """
    onnx = _onnx()
    inputs, outputs = _source(graph, outputs)
    ex = _Exporter(onnx)
    in_names = [ex.name(v) for v in inputs]
    if any(isinstance(v, SharedVariable) for v in inputs):
        raise TypeError("to_onnx: a shared variable is an initializer, not an input")
    for node in io_toposort(inputs, outputs):
        ex.apply(node)
    out_names = []
    for i, v in enumerate(outputs):
        out_names.append(f"output_{i}")
        ex.emit("Identity", [ex.name(v)], out_names[-1])
    graph_proto = onnx.helper.make_graph(
        ex.nodes,
        name,
        [ex.value_info(v, n) for v, n in zip(inputs, in_names)],
        [ex.value_info(v, n) for v, n in zip(outputs, out_names)],
        initializer=ex.initializers,
    )
    model = onnx.helper.make_model(
        graph_proto,
        opset_imports=[onnx.helper.make_opsetid("", opset)],
        producer_name="theano_dag",
    )
    try:
        # full_check: ONNX's type inference too, which refuses an operator applied to a
        # dtype it does not take (Pow of int8): a model ONNX Runtime would not load.
        onnx.checker.check_model(model, full_check=True)
    except onnx.shape_inference.InferenceError as exc:
        raise OnnxExportError(f"to_onnx: ONNX does not take this graph's dtypes: {exc}") from exc
    return model


# -- import ---------------------------------------------------------------------------


def _binary(fn):
    return lambda ins, attrs: fn(*ins)


def _ints(v, what):
    if not isinstance(v, np.ndarray):
        raise OnnxExportError(f"from_onnx: {what} must be a constant")
    return [int(a) for a in v.ravel()]


def _squeeze(ins, attrs, known):
    x, axes = ins[0], _ints(known(ins[1]), "Squeeze axes")
    return x.dimshuffle([d for d in range(x.ndim) if d not in axes])


def _unsqueeze(ins, attrs, known):
    x, axes = ins[0], _ints(known(ins[1]), "Unsqueeze axes")
    order, it = [], iter(range(x.ndim))
    for i in range(x.ndim + len(axes)):
        order.append("x" if i in axes else next(it))
    return x.dimshuffle(order)


def _isinf(ins, attrs, known):
    x = ins[0]
    neg, pos = attrs.get("detect_negative", 1), attrs.get("detect_positive", 1)
    if neg and pos:
        return tm.isinf(x)
    return tm.eq(x, -np.inf if neg else np.inf) if neg or pos else tm.lt(x, x)


def _expand(ins, attrs, known):
    """``x`` broadcast against a tensor of the given shape (both ways, as ONNX's)."""
    x, shape = ins
    if shape.owner is not None and isinstance(shape.owner.op, Shape):
        # Expand(x, Shape(a)), as to_onnx writes second(a, x): against a itself, whose
        # type knows which of its dimensions broadcast
        return tb.second(shape.owner.inputs[0], x)
    n = shape.type.shape[0]
    if n is None:
        raise OnnxExportError("from_onnx: Expand to a shape of unknown length")
    value = known(shape)
    dims = (
        [int(d) for d in value] if isinstance(value, np.ndarray) else [shape[i] for i in range(n)]
    )
    return tb.second(tb.alloc(np.zeros((), dtype=x.dtype), *dims), x)


def _div(a, b):
    """ONNX's Div: integers divide truncating toward zero (C's), floats as floats."""
    if a.dtype in discrete_dtypes and b.dtype in discrete_dtypes:
        q = tm.int_div(a, b)  # floor: one less than the truncation where the signs differ
        inexact = tm.neq(q * b, a)
        return tb.cast(q + (inexact & tm.neq(tm.lt(a, 0), tm.lt(b, 0))), q.dtype)
    return tm.true_div(a, b)


def _reduce(fn):
    def build(ins, attrs, known):
        axes = None if len(ins) < 2 else _ints(known(ins[1]), "reduction axes")
        if axes == [] and not attrs.get("noop_with_empty_axes", 0):
            axes = None  # no axes: all of them
        keep = bool(attrs.get("keepdims", 1))
        if axes == []:
            return ins[0]
        return tb.cast(fn(ins[0], axis=axes, keepdims=keep), ins[0].dtype)  # the input's

    return build


def _conv(ins, attrs, known):
    pads = attrs.get("pads", [0, 0, 0, 0])
    return conv2d(
        ins[0],
        ins[1],
        border_mode=((pads[0], pads[2]), (pads[1], pads[3])),
        subsample=tuple(attrs.get("strides", (1, 1))),
        filter_dilation=tuple(attrs.get("dilations", (1, 1))),
        num_groups=attrs.get("group", 1),
        filter_flip=False,
    )


def _pool(mode):
    def build(ins, attrs, known):
        pads = attrs.get("pads", [0, 0, 0, 0])
        if pads[:2] != pads[2:] or attrs.get("ceil_mode", 0):
            raise OnnxExportError("from_onnx: pools with asymmetric pads or ceil_mode")
        if mode != "max":
            inc = attrs.get("count_include_pad", 0)
            name = "average_inc_pad" if inc else "average_exc_pad"
        else:
            name = "max"
        return pool_2d(
            ins[0],
            tuple(attrs["kernel_shape"]),
            ignore_border=True,
            stride=tuple(attrs.get("strides", (1, 1))),
            pad=tuple(pads[:2]),
            mode=name,
        )

    return build


def _entries(var, known):
    """The entries of a 1-d index: ints where constant, else scalar variables."""
    value = known(var)
    if isinstance(value, np.ndarray):
        return [int(a) for a in value.ravel()]
    return [var[i] for i in range(var.type.shape[0])]


def _slice(ins, attrs, known):
    starts, ends = _entries(ins[1], known), _entries(ins[2], known)
    axes = _ints(known(ins[3]), "axes") if len(ins) > 3 else list(range(len(starts)))
    steps = _ints(known(ins[4]), "steps") if len(ins) > 4 else [1] * len(starts)
    index = [slice(None)] * ins[0].ndim
    limit = 2**61  # ONNX's "to the end" is any start or end past the length

    def bound(v):
        return None if isinstance(v, int) and abs(v) >= limit else v

    for a, s, e, st in zip(axes, starts, ends, steps):
        index[a] = slice(bound(s), bound(e), st)
    return ins[0][tuple(index)]


def _gather(ins, attrs, known):
    if ins[1].ndim != 0:
        raise OnnxExportError("from_onnx: Gather with an index array")
    axis = attrs.get("axis", 0)
    return ins[0][(slice(None),) * axis + (ins[1],)]


def _shape(ins, attrs, known):
    start, end = attrs.get("start", 0), attrs.get("end", None)
    whole = shape(ins[0])
    return whole if start == 0 and end is None else whole[start:end]


def _reshape(ins, attrs, known):
    shape = known(ins[1])
    if isinstance(shape, np.ndarray):
        return reshape(ins[0], [int(d) for d in shape])
    ndim = ins[1].type.shape[0]
    if ndim is None:
        raise OnnxExportError("from_onnx: Reshape to a shape of unknown length")
    return reshape(ins[0], ins[1], ndim=ndim)


def _cast(ins, attrs, known):
    onnx = _onnx()
    dtype = onnx.helper.tensor_dtype_to_np_dtype(attrs["to"])
    return tb.cast(ins[0], dtype.name)


def _match(pattern, var, known, binds):
    """Whether ``var`` is built as ``pattern`` says: a tuple ``(scalar op name, *inputs)``
    for an Elemwise, a number for a constant of that value (broadcast or not), a string
    for a variable, the same one wherever the string recurs (bound in ``binds``)."""
    if isinstance(pattern, str):
        return binds.setdefault(pattern, var) is var
    while var.owner is not None and isinstance(var.owner.op, DimShuffle):
        kept = [d for d in var.owner.op.new_order if d != "x"]
        if kept != list(range(var.owner.inputs[0].ndim)):
            return False  # (a transpose or a dropped axis: no broadcast)
        var = var.owner.inputs[0]  # (a constant broadcast: as our Elemwise writes it)
    if not isinstance(pattern, tuple):
        value = known(var)
        return isinstance(value, np.ndarray) and value.shape == () and value == pattern
    node = var.owner
    if node is None or not isinstance(node.op, Elemwise) or len(node.inputs) != len(pattern) - 1:
        return False
    if node.op.scalar_op.name != pattern[0]:
        return False
    return all(_match(p, v, known, binds) for p, v in zip(pattern[1:], node.inputs))


# The forms _Exporter.log1p and expm1 write: read back as the ops, since our
# canonicalization would simplify their corrections ((1 + y) - 1 to y) away.
_KAHAN = {  # name: (pattern, what its named parts are), "x" the op's argument
    "log1p": (
        ("switch", ("eq", "u", 1), "x", ("switch", ("eq", "u", np.inf), "u", "r")),
        {"u": ("add", 1, "x"), "r": ("mul", ("log", "u"), ("true_div", "x", ("sub", "u", 1)))},
    ),
    "expm1": (
        ("switch", ("eq", "u", 1), "x", ("switch", ("eq", "m", -1), -1, "s")),
        {
            "u": ("exp", "x"),
            "m": ("sub", "u", 1),
            "s": (
                "switch",
                ("eq", "u", np.inf),
                "u",
                ("mul", "m", ("true_div", "x", ("log", "u"))),
            ),
        },
    ),
}


def _where(ins, attrs, known):
    out = tm.switch(ins[0], ins[1], ins[2])
    for name, (pattern, parts) in _KAHAN.items():
        binds = {}
        if _match(pattern, out, known, binds) and all(
            _match(p, binds[k], known, binds) for k, p in parts.items()
        ):
            return getattr(tm, name)(binds["x"])
    return out


# ONNX operator -> builder(inputs, attributes, known constant value)
_IMPORT = {
    "Add": lambda i, a, k: i[0] + i[1],
    "Sub": lambda i, a, k: i[0] - i[1],
    "Mul": lambda i, a, k: i[0] * i[1],
    "Div": lambda i, a, k: _div(*i),
    "Pow": lambda i, a, k: tb.cast(i[0] ** i[1], i[0].dtype),  # the base's dtype
    "Max": lambda i, a, k: functools.reduce(tm.maximum, i),  # variadic in ONNX
    "Min": lambda i, a, k: functools.reduce(tm.minimum, i),
    "Neg": lambda i, a, k: -i[0],
    "Exp": lambda i, a, k: tm.exp(i[0]),
    "Log": lambda i, a, k: tm.log(i[0]),
    "Sqrt": lambda i, a, k: tm.sqrt(i[0]),
    "Abs": lambda i, a, k: abs(i[0]),
    "Tanh": lambda i, a, k: tm.tanh(i[0]),
    "Sigmoid": lambda i, a, k: tm.sigmoid(i[0]),
    "Greater": lambda i, a, k: tm.gt(i[0], i[1]),
    "Less": lambda i, a, k: tm.lt(i[0], i[1]),
    "Equal": lambda i, a, k: tm.eq(i[0], i[1]),
    "Where": _where,
    "Identity": lambda i, a, k: i[0],
    "IsNaN": lambda i, a, k: tm.isnan(i[0]),
    "IsInf": _isinf,
    "GreaterOrEqual": lambda i, a, k: tm.ge(i[0], i[1]),
    "LessOrEqual": lambda i, a, k: tm.le(i[0], i[1]),
    "Sin": lambda i, a, k: tm.sin(i[0]),
    "Cos": lambda i, a, k: tm.cos(i[0]),
    "Tan": lambda i, a, k: tm.tan(i[0]),
    "Asin": lambda i, a, k: tm.arcsin(i[0]),
    "Acos": lambda i, a, k: tm.arccos(i[0]),
    "Atan": lambda i, a, k: tm.arctan(i[0]),
    "Sinh": lambda i, a, k: tm.sinh(i[0]),
    "Cosh": lambda i, a, k: tm.cosh(i[0]),
    "Asinh": lambda i, a, k: tm.arcsinh(i[0]),
    "Acosh": lambda i, a, k: tm.arccosh(i[0]),
    "Atanh": lambda i, a, k: tm.arctanh(i[0]),
    "Sign": lambda i, a, k: tm.sgn(i[0]),
    "Floor": lambda i, a, k: tm.floor(i[0]),
    "Ceil": lambda i, a, k: tm.ceil(i[0]),
    "Round": lambda i, a, k: tm.round_half_to_even(i[0]),
    "Erf": lambda i, a, k: tm.erf(i[0]),
    "Reciprocal": lambda i, a, k: tm.reciprocal(i[0]),
    "BitwiseAnd": lambda i, a, k: tm.and_(i[0], i[1]),
    "BitwiseOr": lambda i, a, k: tm.or_(i[0], i[1]),
    "BitwiseXor": lambda i, a, k: tm.xor(i[0], i[1]),
    "BitwiseNot": lambda i, a, k: tm.invert(i[0]),
    "Expand": _expand,
    "Not": lambda i, a, k: tm.invert(i[0]),
    "And": lambda i, a, k: tm.and_(i[0], i[1]),
    "Or": lambda i, a, k: tm.or_(i[0], i[1]),
    "Xor": lambda i, a, k: tm.xor(i[0], i[1]),
    "Cast": _cast,
    "MatMul": lambda i, a, k: tm.dot(i[0], i[1]),
    "Softmax": lambda i, a, k: softmax(i[0], axis=a.get("axis", -1)),
    "LogSoftmax": lambda i, a, k: log_softmax(i[0], axis=a.get("axis", -1)),
    "ReduceSum": _reduce(tm.sum),
    "ReduceProd": _reduce(tm.prod),
    "ReduceMax": _reduce(tm.max),
    "ReduceMin": _reduce(tm.min),
    "Concat": lambda i, a, k: tb.concatenate(i, axis=a["axis"]),
    "Shape": _shape,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Transpose": lambda i, a, k: i[0].dimshuffle(a["perm"]),
    "Reshape": _reshape,
    "Conv": _conv,
    "MaxPool": _pool("max"),
    "AveragePool": _pool("average"),
    "Slice": _slice,
    "Gather": _gather,
}


def from_onnx(model, constants=True):
    """Build the theano_dag graph of an ONNX ``model`` made of the operators
    :func:`to_onnx` writes: returns ``(inputs, outputs)``, the inputs new tensor
    variables (dimensions without a size left free), the initializers constants (or
    shared variables with ``constants=False``). Raises :class:`OnnxExportError` for an
    operator it does not import.
    """
    onnx = _onnx()
    graph = model.graph if hasattr(model, "graph") else model
    env, values = {}, {}
    for init in graph.initializer:
        value = onnx.numpy_helper.to_array(init)
        values[init.name] = value
        if constants or value.dtype.kind not in "fc":
            env[init.name] = tb.constant(value, name=init.name)
        else:
            env[init.name] = shared(value, name=init.name)
    inputs = []
    for vi in graph.input:
        if vi.name in env:
            continue
        t = vi.type.tensor_type
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name
        shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
        env[vi.name] = TensorType(dtype, shape=shape)(vi.name)
        inputs.append(env[vi.name])

    def known(var):
        if isinstance(var, Constant):
            return np.asarray(var.data)
        return None

    for node in graph.node:
        if node.op_type == "Constant":
            value = onnx.numpy_helper.to_array(node.attribute[0].t)
            env[node.output[0]] = tb.constant(value)
            continue
        if node.op_type not in _IMPORT:
            raise OnnxExportError(f"from_onnx: no import for the ONNX operator {node.op_type}")
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        ins = [env[n] for n in node.input if n]
        env[node.output[0]] = _IMPORT[node.op_type](ins, attrs, known)
    return inputs, [env[o.name] for o in graph.output]
