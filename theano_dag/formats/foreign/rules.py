"""The op tables of the Theano/PyTensor conversion: which op means which.

``TO_RULES`` maps a theano_dag Op class to ``rule(flavor, node, foreign_inputs)``,
``FROM_RULES`` maps the *name* of a foreign Op class (Theano and PyTensor agree on
names; only classes from their ``tensor``, ``scalar`` and ``compile`` packages count)
to ``rule(flavor, foreign_node, our_inputs)``. Sparse ops (Theano's vocabulary on both
sides) map by class name too, to the op of the same properties: ours in the flavor's
``sparse_modules``, theirs in ``theano_dag.sparse``. A rule returns the new output
variables, or ``None`` when this node has no counterpart (it is then wrapped). Scalar
ops (inside ``Elemwise`` and ``Composite``) map by name through
:data:`~theano_dag.formats.foreign.scalars.SCALAR_NAMES`.
"""

from __future__ import annotations

import types as pytypes

import numpy as np

from theano_dag import scalar as ts
from theano_dag import tensor as tt
from theano_dag.formats.decompose import DECOMPOSITIONS, expand
from theano_dag.formats.foreign.flavor import cast_to
from theano_dag.formats.foreign.scalars import _composite, scalar_from_foreign, scalar_to_foreign
from theano_dag.graph.basic import Constant, io_toposort
from theano_dag.graph.op import Op
from theano_dag.sparse import basic as sparse_basic
from theano_dag.sparse import opt as sparse_opt
from theano_dag.sparse.sandbox import sp2 as sparse_sp2
from theano_dag.sparse.type import SparseType
from theano_dag.tensor import basic, contractions, elemwise, linalg, math, subtensor
from theano_dag.tensor.arrays import Assert
from theano_dag.tensor.elemwise import DimShuffle, Elemwise
from theano_dag.tensor.math import Argmax, Dot
from theano_dag.tensor.nnet import bn, nnet
from theano_dag.tensor.shape import EqualLengths, MakeVector, Reshape, Shape, Shape_i

__all__ = ["FROM_RULES", "TO_RULES", "from_rule", "to_rule"]


# -- theano_dag -> foreign ------------------------------------------------------------------------


def _decomposed_to(fl, node, ins):
    """Our compound scalar op (binary_crossentropy, sech2...) as the other side's Elemwise
    ops of its formula (:mod:`~theano_dag.formats.decompose`), which its optimizer fuses
    where it can: Theano's C code of a Composite cannot hold an op without C (erfcx)."""
    xs = [ts.get_scalar_type(v.dtype)() for v in node.inputs]
    has = lambda op: scalar_to_foreign(fl, op) is not None
    (out,) = expand(xs, node.op.scalar_op.make_node(*xs).outputs, has)
    fvars = dict(zip(xs, ins))
    for snode in io_toposort(xs, [out]):
        fop = scalar_to_foreign(fl, snode.op)
        if fop is None:
            return None
        args = [
            fvars[v] if v in fvars else fl.tensor_constant(v.data, fl.tensor_type(v.dtype, ()))
            for v in snode.inputs
        ]
        (fvars[snode.outputs[0]],) = fl.Elemwise(fop)(*args, return_list=True)
    return [fvars[out]]


def _elemwise_to(fl, node, ins):
    op = node.op.scalar_op
    fop = scalar_to_foreign(fl, op)
    if fop is None and type(op) in DECOMPOSITIONS:
        return _decomposed_to(fl, node, ins)
    if fop is None and not isinstance(op, ts.Composite):
        # a scalar op the other side lacks may still be a composite of ops it has
        xs = [ts.get_scalar_type(v.dtype)() for v in node.inputs]
        fop = _composite(fl, ts.Composite(xs, op.make_node(*xs).outputs), to_foreign=True)
    if fop is None:
        return None
    pattern = node.op.inplace_pattern or None
    wanted = {v.dtype for v in node.outputs}
    discrete = all(v.dtype.startswith(("int", "uint", "bool")) for v in node.inputs)
    if len(wanted) == 1 and discrete and not isinstance(op, ts.Cast):
        (dtype,) = wanted
        if dtype.startswith("float"):
            # A float function of integers or bools: its inputs in the output's float
            # first, as ours computes it (PyTensor's Python kernels compute a float32
            # softplus of a bool in float16, numpy's float for a bool).
            ins = [cast_to(fl, i, dtype, ours=False) for i in ins]
    return fl.Elemwise(fop, pattern)(*ins, return_list=True)


def _subtensor_to(fl, node, ins):
    idx = _index_tuple(fl, node.op.idx_list, node.inputs[1:], ins[1:])
    return [ins[0][idx]]


def _index_tuple(fl, idx_list, our_idx, f_idx):
    """A Python index of foreign variables from our idx_list; a constant index becomes a
    foreign scalar constant of its dtype, as the foreign packages write constant indices."""
    pairs = iter(zip(our_idx, f_idx))

    def one():
        ours, theirs = next(pairs)
        if isinstance(ours, Constant):
            return fl.scalar_constant(ours.data, ours.type.dtype)
        return theirs

    out = []
    for entry in idx_list:
        if entry[0] == "int":
            out.append(one())
        else:
            out.append(slice(*[one() if present else None for present in entry[1:]]))
    return tuple(out)


def _incsubtensor_to(fl, node, ins):
    x, y = ins[:2]
    target = x[_index_tuple(fl, node.op.idx_list, node.inputs[2:], ins[2:])]
    fn = fl.set_subtensor if node.op.set_instead_of_inc else fl.inc_subtensor
    return [fn(target, y)]


def _careduce_to(fl, node, ins):
    op, axis = node.op, fl.reduce_axis(node.op.axis)
    if isinstance(op, elemwise.Sum | elemwise.Prod):
        cls = fl.Sum if isinstance(op, elemwise.Sum) else fl.Prod
        return [cls(axis=axis, dtype=op.dtype, acc_dtype=op.acc_dtype)(*ins)]
    for name in ("Min", "Max", "All", "Any"):
        if isinstance(op, getattr(elemwise, name)):
            return [getattr(fl, name)(axis)(*ins)]
    fop = scalar_to_foreign(fl, op.scalar_op)
    return None if fop is None else [fl.CAReduce(fop, axis)(*ins)]


def _linalg_to(fl, node, ins):
    op = node.op
    if isinstance(op, linalg.Cholesky):
        return [fl.cholesky(ins[0], op.lower)]
    if isinstance(op, linalg.Eigh):
        return fl.eigh(ins[0], op.UPLO)
    return None


def _argmax_to(fl, node, ins):
    if type(node.op) is not Argmax:
        return None  # a subclass means more than an argmax
    return [fl.tensor.argmax(ins[0], axis=node.op.axis)]


def _equal_lengths_to(fl, node, ins):
    """A check of lengths as the foreign package's Assert, where it has one: the length
    passed on, asserted equal to the others (its message names them)."""
    assert_cls = getattr(fl, "Assert", None)
    if assert_cls is None:
        return None  # (wrapped: the op runs its own perform)
    op = node.op
    compared = ins[1:] if op.guard else ins
    conds = [fl.tensor.eq(compared[0], n) for n in compared[1:]]
    msg = f"{op.what}: lengths that must be equal differ ({', '.join(op.names)})"
    return [assert_cls(msg)(ins[0], *conds)]


#: our Op class -> rule(flavor, node, foreign inputs); looked up along the op's MRO
TO_RULES = {
    EqualLengths: _equal_lengths_to,
    elemwise.Elemwise: _elemwise_to,
    elemwise.DimShuffle: lambda fl, node, ins: [fl.dimshuffle(ins[0], node.op.new_order)],
    elemwise.CAReduce: _careduce_to,
    math.Argmax: _argmax_to,
    math.Dot: lambda fl, node, ins: [fl.tensor.dot(*ins)],
    subtensor.Subtensor: _subtensor_to,
    subtensor.IncSubtensor: _incsubtensor_to,
    subtensor.AdvancedSubtensor1: lambda fl, node, ins: [fl.AdvancedSubtensor1()(*ins)],
    Reshape: lambda fl, node, ins: [fl.Reshape(node.op.ndim)(*ins)],
    Shape: lambda fl, node, ins: [fl.Shape()(*ins)],
    Shape_i: lambda fl, node, ins: [fl.Shape_i(node.op.i)(*ins)],
    MakeVector: lambda fl, node, ins: [fl.MakeVector(node.op.dtype)(*ins)],
    basic.Join: lambda fl, node, ins: [
        fl.tensor.join(*ins) if node.op.axis is None else fl.tensor.join(node.op.axis, *ins)
    ],
    basic.Alloc: lambda fl, node, ins: [fl.tensor.alloc(*ins)],
    basic.Eye: lambda fl, node, ins: [fl.Eye(node.op.dtype)(*ins)],
    nnet.Softmax: lambda fl, node, ins: fl.softmax("Softmax", node.op.axis, ins),
    nnet.LogSoftmax: lambda fl, node, ins: fl.softmax("LogSoftmax", node.op.axis, ins),
    nnet.SoftmaxGrad: lambda fl, node, ins: fl.softmax("SoftmaxGrad", node.op.axis, ins),
    linalg.Cholesky: _linalg_to,
    linalg.Eigh: _linalg_to,
    contractions.Einsum: lambda fl, node, ins: fl.einsum(node.op.subscripts, ins),
    # Its value is its first input, whose graph the other side differentiates as it is.
    bn.BatchNormTrainGradient: lambda fl, node, ins: ins[:1],
}


def to_rule(op):
    """The rule for our ``op`` (looked up along its class's MRO), or None."""
    if type(op).__module__.startswith(_OUR_SPARSE):
        return _sparse_to
    return next((TO_RULES[c] for c in type(op).__mro__ if c in TO_RULES), None)


# -- sparse ops, both ways: the two vocabularies are Theano's, so they map by class name --

_OUR_SPARSE = "theano_dag.sparse."
_OUR_SPARSE_MODULES = (sparse_basic, sparse_opt, sparse_sp2)


def _same_op(cls, op, base):
    """``cls`` built with ``op``'s properties, when ``cls`` is an op class of ``base`` whose
    instances have exactly those properties (else None: the node is then wrapped)."""
    if not (isinstance(cls, type) and issubclass(cls, base)):
        return None
    props = tuple(getattr(op, "__props__", ()))
    if tuple(getattr(cls, "__props__", ())) != props:
        return None
    try:
        new = cls(*[getattr(op, p) for p in props])
    except Exception:  # noqa: BLE001 (a constructor that takes them otherwise: wrapped)
        return None
    return new if all(getattr(new, p) == getattr(op, p) for p in props) else None


def _apply_alike(new_op, node, ins, is_sparse):
    """``new_op`` applied to ``ins``, when its outputs are sparse where ``node``'s are and
    of the same number of dimensions (else None)."""
    try:
        outs = new_op(*ins, return_list=True)
    except Exception:  # noqa: BLE001 (inputs the other side's op refuses: wrapped)
        return None
    if len(outs) != len(node.outputs):
        return None
    for new, old in zip(outs, node.outputs):
        if is_sparse(new.type) != is_sparse(old.type) or new.type.ndim != old.type.ndim:
            return None
    return outs


def _sparse_to(fl, node, ins):
    name = type(node.op).__name__
    for module in fl.sparse_mods:
        fop = _same_op(getattr(module, name, None), node.op, fl.Op)
        if fop is not None:
            is_sparse = lambda t: isinstance(t, SparseType) or fl.is_sparse_type(t)  # noqa: E731
            return _apply_alike(fop, node, ins, is_sparse)
    return None


def _sparse_from(fl, node, ins):
    name = type(node.op).__name__
    for module in _OUR_SPARSE_MODULES:
        op = _same_op(getattr(module, name, None), node.op, Op)
        if op is not None:
            is_sparse = lambda t: isinstance(t, SparseType) or fl.is_sparse_type(t)  # noqa: E731
            return _apply_alike(op, node, ins, is_sparse)
    return None


# -- foreign -> theano_dag ------------------------------------------------------------------------


def _elemwise_from(fl, node, ins):
    fop = node.op.scalar_op
    op = scalar_from_foreign(fl, fop)
    if op is None and not isinstance(fop, fl.Composite):
        # a scalar op without a namesake may still be a composite of ours (clip)
        xs = [fl.get_scalar_type(v.type.dtype)() for v in node.inputs]
        op = _composite(fl, fl.Composite(xs, fop.make_node(*xs).outputs), to_foreign=False)
    if op is None:
        return None
    return Elemwise(op, dict(node.op.inplace_pattern) or None)(*ins, return_list=True)


def _scalar_op_from(fl, node, ins):
    """A foreign scalar op applied to scalars: our Elemwise on 0-d tensors."""
    op = scalar_from_foreign(fl, node.op)
    return None if op is None else Elemwise(op)(*ins, return_list=True)


def _norm_axis(axis, ndim):
    if axis is None:
        return None
    axis = (axis,) if isinstance(axis, int | np.integer) else axis
    return tuple(sorted(int(a) % max(ndim, 1) for a in axis))


def _careduce_from(fl, node, ins):
    op, x = node.op, ins[0]
    axis = _norm_axis(op.axis, x.ndim)
    name = type(op).__name__
    if name in ("Sum", "Prod"):
        cls = elemwise.Sum if name == "Sum" else elemwise.Prod
        default = cls(axis)
        # keep the dtypes implicit where they are what ours would pick anyway
        dtype = op.dtype if op.dtype != default.output_dtype(x.dtype) else None
        acc = op.acc_dtype if op.acc_dtype != default.acc_dtype_for(x.dtype) else None
        return [cls(axis, dtype=dtype, acc_dtype=acc)(x)]
    if name in ("Max", "Min", "All", "Any"):
        return [getattr(elemwise, name)(axis)(x)]
    sop = scalar_from_foreign(fl, op.scalar_op)
    return None if sop is None else [elemwise.CAReduce(sop, axis)(x)]


def _argmax_axis(axis, ndim):
    axis = _norm_axis(axis, ndim)
    if axis is None or len(axis) == ndim:
        return None, True
    return (axis[0], True) if len(axis) == 1 else (None, False)


def _max_and_argmax_from(fl, node, ins):
    x = ins[0]
    axis, ok = _argmax_axis(node.op.axis, x.ndim)
    if not ok:
        return None
    return [elemwise.Max(_norm_axis(node.op.axis, x.ndim))(x), Argmax(axis)(x)]


def _argmax_from(fl, node, ins):
    if len(ins) != 1:
        return None
    axis, ok = _argmax_axis(node.op.axis, ins[0].ndim)
    return [Argmax(axis)(ins[0])] if ok else None


def _subtensor_from(fl, node, ins):
    idx_list, idx_ins = _our_index(fl, node, ins, 1)
    return [subtensor.Subtensor(idx_list)(ins[0], *idx_ins)]


def _our_index(fl, node, ins, n_lead):
    """Our ``(idx_list, index inputs)`` from a foreign (Inc)Subtensor node."""
    where = {v: ins[k] for k, v in enumerate(node.inputs) if k >= n_lead}
    entries = fl.get_idx_list(node, n_lead)
    idx_list, idx_ins = [], []

    def take(v):
        idx_ins.append(where[v] if v in where else tt.constant(np.int64(v)))

    for e in entries:
        if isinstance(e, slice):
            parts = (e.start, e.stop, e.step)
            idx_list.append(("slice", *[p is not None for p in parts]))
            for p in parts:
                if p is not None:
                    take(p)
        else:
            idx_list.append(("int",))
            take(e)
    return tuple(idx_list), idx_ins


def _incsubtensor_from(fl, node, ins):
    idx_list, idx_ins = _our_index(fl, node, ins, 2)
    op = subtensor.IncSubtensor(idx_list, set_instead_of_inc=node.op.set_instead_of_inc)
    return [op(ins[0], ins[1], *idx_ins)]


def _join_from(fl, node, ins):
    axis = node.inputs[0]
    if not isinstance(axis, fl.Constant):
        return None
    return [basic.Join(int(np.asarray(axis.data)))(*ins[1:])]


def _softmax_from(fl, node, ins):
    axis = fl.softmax_axis(node.op, ins[0].ndim)
    if axis is None:
        return None
    axis = -1 if axis % ins[0].ndim == ins[0].ndim - 1 else axis % ins[0].ndim  # (as ours carry it)
    return [getattr(nnet, type(node.op).__name__)(axis)(*ins)]


def _linalg_from(fl, node, ins):
    op = node.op
    if type(op).__name__ == "Cholesky":
        return [linalg.Cholesky(op.lower)(*ins)]
    uplo = getattr(op, "UPLO", None) or ("L" if getattr(op, "lower", True) else "U")
    if len(ins) != 1:
        return None
    return linalg.Eigh(uplo)(*ins, return_list=True)


def _proxy(node, op):
    """A stand-in for ``node`` with another op (a Blockwise's core op, say) for the rules."""
    return pytypes.SimpleNamespace(op=op, inputs=node.inputs, outputs=node.outputs)


def _blockwise_from(fl, node, ins):
    core = node.op.core_op
    if any(x.ndim != len(sig) for x, sig in zip(ins, node.op.inputs_sig)):
        return None  # batched: no counterpart
    rule = from_rule(fl, core)
    return None if rule is None else rule(fl, _proxy(node, core), ins)


def _expanded(var, order):
    """The input of ``var`` when ``var`` is a DimShuffle with ``new_order`` ``order``."""
    node = var.owner
    if node is not None and isinstance(node.op, DimShuffle) and node.op.new_order == order:
        return node.inputs[0]
    return None


def _dimshuffle_from(fl, node, ins):
    x, order = ins[0], tuple(node.op.new_order)
    # PyTensor's Dot takes matrices: dot(a, v) is written squeeze(dot(a, v[:, None])).
    # Dropping the length-1 axis of such a Dot gives back our vector Dot.
    owner = x.owner
    if owner is not None and isinstance(owner.op, Dot):
        a, b = owner.inputs
        if x.ndim == 2 and order == (0,) and _expanded(b, (0, "x")) is not None:
            return [Dot()(a, _expanded(b, (0, "x")))]
        if x.ndim == 2 and order == (1,) and _expanded(a, ("x", 0)) is not None:
            return [Dot()(_expanded(a, ("x", 0)), b)]
        if x.ndim == 1 and order == () and a.ndim == 1 and _expanded(b, (0, "x")) is not None:
            return [Dot()(a, _expanded(b, (0, "x")))]
    return [DimShuffle(x.broadcastable, order)(x)]


def _identity(fl, node, ins):
    return ins[:1]


#: a foreign Op class's name -> rule(flavor, foreign node, our inputs)
FROM_RULES = {
    "Elemwise": _elemwise_from,
    "DimShuffle": _dimshuffle_from,
    "Eye": lambda fl, node, ins: [basic.Eye(node.op.dtype)(*ins)],
    "CAReduce": _careduce_from,
    "MaxAndArgmax": _max_and_argmax_from,
    "Argmax": _argmax_from,
    "Dot": lambda fl, node, ins: [math.Dot()(*ins)],
    "Subtensor": _subtensor_from,
    "IncSubtensor": _incsubtensor_from,
    "AdvancedSubtensor1": lambda fl, node, ins: [subtensor.AdvancedSubtensor1()(*ins)],
    "Reshape": lambda fl, node, ins: [Reshape(node.op.ndim)(*ins)],
    "Shape": lambda fl, node, ins: [Shape()(*ins)],
    "Shape_i": lambda fl, node, ins: [Shape_i(node.op.i)(*ins)],
    "MakeVector": lambda fl, node, ins: [MakeVector(node.op.dtype)(*ins)],
    "Join": _join_from,
    "Alloc": lambda fl, node, ins: [basic.Alloc()(*ins)],
    "Assert": lambda fl, node, ins: [Assert(node.op.msg)(*ins)],
    "Softmax": _softmax_from,
    "LogSoftmax": _softmax_from,
    "SoftmaxGrad": _softmax_from,
    "Cholesky": _linalg_from,
    "Eigh": _linalg_from,
    "Blockwise": _blockwise_from,
    "Einsum": lambda fl, node, ins: [contractions.einsum(node.op.subscripts, *ins)],
    # ops that hand their input on unchanged, as far as values go
    "ScalarFromTensor": _identity,
    "TensorFromScalar": _identity,
    "DeepCopyOp": _identity,
    "OutputGuard": _identity,
    "ViewOp": _identity,
    "SpecifyShape": _identity,
}


def from_rule(fl, fop):
    """The rule for the foreign ``fop``, by class name along its MRO, or None."""
    if isinstance(fop, fl.ScalarOp):
        return _scalar_op_from
    if type(fop).__module__.startswith(f"{fl.package}.sparse."):
        return _sparse_from
    packages = tuple(f"{fl.package}.{p}" for p in ("tensor", "scalar", "compile", "raise_op"))
    for cls in type(fop).__mro__:
        if cls.__module__.startswith(packages) and cls.__name__ in FROM_RULES:
            return FROM_RULES[cls.__name__]
    return None
