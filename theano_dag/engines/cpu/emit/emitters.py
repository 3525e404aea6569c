"""CPU engine emitters for the non-elementwise ops: views, reductions, BLAS, copies, shapes.

Each function here turns one Apply node into :class:`~.impls.Step` objects (see
:mod:`.impls` for the contract) and is registered for its Op class by
:func:`register_defaults`, which :mod:`.impls` runs when imported.
"""

from __future__ import annotations

import numpy as np

from theano_dag.engines.cpu.emit.impls import (
    Step,
    _composite_steps,
    _is_composite,
    _is_tensor,
    elementwise_step,
    make_call,
    register_impl,
)
from theano_dag.graph.identity_ops import DeepCopyOp, ViewOp
from theano_dag.tensor import blas
from theano_dag.tensor.basic import Alloc, Join, Split
from theano_dag.tensor.elemwise import CAReduce, DimShuffle, reduce_last_axis
from theano_dag.tensor.extra_ops import CumOp, ExtractDiag
from theano_dag.tensor.fused import FusedReduce
from theano_dag.tensor.math import Dot
from theano_dag.tensor.shape import EqualLengths, MakeVector, Reshape, Shape, Shape_i
from theano_dag.tensor.subtensor import (
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    AdvancedSubtensor,
    IncSubtensor,
    Subtensor,
    _rebuild,
    index_is_basic,
)

__all__ = ["register_defaults"]


def _dimshuffle_steps(node, ctx):
    op = node.op
    x = node.inputs[0]
    if not _is_tensor(x):
        return None
    drop = tuple(op.drop)
    remaining = [d for d in range(x.type.ndim) if d not in drop]
    kept = [o for o in op.new_order if o != "x"]
    perm = tuple(remaining.index(k) for k in kept)
    need_perm = perm != tuple(range(len(perm)))
    augment = any(o == "x" for o in op.new_order)
    index = tuple(None if o == "x" else slice(None) for o in op.new_order)
    dname = ctx.const(drop, "drop") if drop else None
    pname = ctx.const(perm, "perm") if need_perm else None
    iname = ctx.const(index, "idx") if augment else None

    def emit(ins, outs, target):
        e = ins[0]
        if dname:
            e = f"{e}.squeeze({dname})"
        if pname:
            e = f"{e}.transpose({pname})"
        if iname:
            e = f"{e}[{iname}]"
        if e == ins[0]:
            e = f"{e}.view()"
        return [f"{outs[0]} = {e}"]

    return [Step(node, node.outputs, node.inputs, emit, kind="view", views={0: 0})]


def _careduce_steps(node, ctx):
    (x,) = node.inputs
    if not _is_tensor(x) or ctx.is_const(x):
        return None
    return _reduce_steps(node, ctx, node.op, x, x.type.dtype, x.type.ndim)


def _reduce_steps(node, ctx, op, x, x_dtype, x_ndim):
    """The step reducing value ``x`` with CAReduce ``op`` into the node's output."""
    od = node.outputs[0].type.dtype
    axes = tuple(op._axes(x_ndim))
    if not axes:
        return None
    out_ndim = node.outputs[0].type.ndim
    asarray = ctx.glob(np.asarray, "asarray")
    odn = ctx.glob(np.dtype(od), "D")
    axn = ctx.const(axes, "axes")
    if type(op).perform is CAReduce.perform and hasattr(op, "ufunc"):
        acc = op.acc_dtype_for(x_dtype)
        if acc != od:
            return None
        initial = op.initial_for(acc)
        if _by_columns(op.ufunc, axes, x_dtype, x_ndim, od):
            return [_last_axis_step(node, ctx, op.ufunc, x, initial)]
        fn = ctx.glob(op.ufunc.reduce, op.ufunc.__name__ + "_reduce")
        # The reduce is given the accumulator's dtype (numpy's add and multiply reduce
        # small ints into the platform's int); add and multiply convert as they go, as
        # the op's perform does, where a converted copy first (an int64 copy of a uint8
        # image) took eight times the input's memory at every call.
        cast = ""
        if x_dtype != acc and op.ufunc not in (np.add, np.multiply):
            cast = f".astype({ctx.glob(np.dtype(acc), 'D')})"
        cast += f", dtype={ctx.glob(np.dtype(acc), 'D')}"
        if initial is not None:  # a max of no elements: its identity, not numpy's error
            cast += f", initial={ctx.const(initial, 'ini')}"
    elif od == "bool" and type(op.scalar_op).__name__ in ("AND", "OR"):
        # All / Any: numpy's truth of each element, as their perform does; of a number
        # array, the ufunc's reduce that np.all and np.any run under their Python wrapper
        # (which cost as much again).
        is_and = type(op.scalar_op).__name__ == "AND"
        if np.dtype(x_dtype).kind in "biufc":
            uf = np.logical_and if is_and else np.logical_or
            fn = ctx.glob(uf.reduce, uf.__name__ + "_reduce")
        else:
            fn = ctx.glob(np.all if is_and else np.any, "allany")
        cast = ""
    else:
        return None

    def emit(ins, outs, target):
        o = outs[0]
        if target is not None:
            return [f"{o} = {fn}({ins[0]}{cast}, axis={axn}, out={target})"]
        e = f"{fn}({ins[0]}{cast}, axis={axn})"
        return [f"{o} = {asarray}({e}, {odn})" if out_ndim == 0 else f"{o} = {e}"]

    # Without a target the reduction's own result has the output's dtype and shape: a
    # value whose shape depends on data needs no planned block.
    emit.allocates = True
    return [Step(node, node.outputs, (x,), emit)]


def _by_columns(ufunc, axes, x_dtype, x_ndim, od):
    """Whether reduce_last_axis computes this reduction (over the last axis only, in the
    input's dtype), which it does by columns where that axis is short."""
    if x_ndim < 2 or axes != (x_ndim - 1,) or x_dtype != od:
        return False
    return ufunc in (np.maximum, np.minimum) or (ufunc is np.add and od in ("float32", "float64"))


def _last_axis_step(node, ctx, ufunc, x, initial=None):
    """The step of ``reduce_last_axis(ufunc, x, initial=initial)`` into the node's
    output."""
    fn = ctx.glob(reduce_last_axis, "reduce_last")
    uf = ctx.glob(ufunc, ufunc.__name__)
    ini = "" if initial is None else f", initial={ctx.const(initial, 'ini')}"

    def emit(ins, outs, target):
        if target is not None:
            return [f"{outs[0]} = {fn}({uf}, {ins[0]}, {target}{ini})"]
        return [f"{outs[0]} = {fn}({uf}, {ins[0]}{ini})"]

    emit.allocates = True  # (in the input's dtype, the output's: _by_columns)
    return Step(node, node.outputs, (x,), emit)


def _fused_reduce_steps(node, ctx):
    """FusedReduce: the elementwise part into a planned scratch value, then the reduction
    (the numpy path; a C kernel may run both as one loop)."""
    op = node.op
    sop = op.scalar_op
    in_dtypes = tuple(v.type.dtype for v in node.inputs)
    mid_dtype = sop.output_types(in_dtypes)[0]
    ndim = max(v.type.ndim for v in node.inputs)
    if any(v.type.ndim != ndim for v in node.inputs) or not all(map(_is_tensor, node.inputs)):
        return None
    items = [("const", ctx.value_of(v)) if ctx.is_const(v) else v for v in node.inputs]
    mid = ctx.temp(mid_dtype, "fused_mid")
    mid.like = items
    if not any(not isinstance(i, tuple) for i in items):
        return None
    if _is_composite(sop):
        steps = _composite_steps(ctx, node, sop, items, None, out_ids=[mid])
    else:
        steps = [elementwise_step(ctx, node, sop, items, list(in_dtypes), mid, mid_dtype, None)]
    if steps is None:
        return None
    red = _reduce_steps(node, ctx, op.reduce_op, mid, mid_dtype, ndim)
    if red is None:
        return None
    return steps + red


_BLAS_DTYPES = ("float32", "float64", "complex64", "complex128")


def _dot_steps(node, ctx, scale=False):
    x, y = node.inputs[0], node.inputs[1]
    od = node.outputs[0].type.dtype
    if not (_is_tensor(x) and _is_tensor(y)) or (ctx.is_const(x) and ctx.is_const(y)):
        return None
    if not (x.type.dtype == y.type.dtype == od and od in _BLAS_DTYPES):
        return None
    dot = ctx.glob(np.dot, "dot")
    mul = ctx.glob(np.multiply, "multiply")
    asarray = ctx.glob(np.asarray, "asarray")
    zero_d = node.outputs[0].type.ndim == 0
    inputs = node.inputs[:2]
    scale_name = None
    if scale:
        if ctx.is_const(node.inputs[2]):
            scale_name = ctx.const(ctx.value_of(node.inputs[2]), "k")
        else:
            inputs = node.inputs[:3]

    def emit(ins, outs, target):
        o = outs[0]
        a = scale_name or (ins[2] if scale else None)
        if target is not None:
            # numpy.dot with a 0-d out= fills it but returns a numpy scalar:
            # bind the block itself so an inplace op after it gets an array.
            lines = [f"{dot}({ins[0]}, {ins[1]}, {target})", f"{o} = {target}"]
        elif zero_d:
            lines = [f"{o} = {asarray}({dot}({ins[0]}, {ins[1]}))"]
        else:
            lines = [f"{o} = {dot}({ins[0]}, {ins[1]})"]
        if scale:
            lines.append(f"{mul}({o}, {a}, out={o})")
        return lines

    emit.allocates = True  # numpy's product of two arrays of the output's dtype
    return [Step(node, node.outputs, inputs, emit)]


def _axpby(z, a, p, b, out):
    """``out = b*z + a*p`` rounding as the BLAS ops' reference (``p`` is scratch)."""
    if out is None:
        out = np.empty_like(z)
    if b == 0:
        return np.multiply(p, a, out=out)
    if b != 1:
        np.multiply(z, b, out=out)
    elif out is not z:
        np.copyto(out, z)
    if a != 1:
        np.multiply(p, a, out=p)
    return np.add(out, p, out=out)


def _blas_steps(node, ctx, kind):
    """Gemm / Gemv / Ger as a product into a planned scratch value, then ``b*z + a*p``."""
    ins = node.inputs
    z = ins[0]
    od = node.outputs[0].type.dtype
    # A constant matrix or vector operand is read as it is (a global of the program); the
    # z combined into the result may not be one (an inplace op writes over it).
    if od not in _BLAS_DTYPES or ctx.is_const(z):
        return None
    if any(v.type.dtype != od for v in ins if v.type.ndim > 0):
        return None
    if kind == "ger":
        _, alpha, x, y = ins
        prod_fn, a, b = ctx.glob(np.outer, "outer"), alpha, None
    else:
        _, a, x, y, b = ins
        prod_fn = ctx.glob(np.dot, "dot")
    p = ctx.temp(od, f"{kind}_product")
    pn = prod_fn

    def emit_prod(names, outs, target):
        if target is not None:
            return [f"{outs[0]} = {pn}({names[0]}, {names[1]}, {target})"]
        return [f"{outs[0]} = {pn}({names[0]}, {names[1]})"]

    if kind == "ger":

        def pshape(shapes):
            return (shapes[0][0], shapes[1][0])
    else:

        def pshape(shapes):
            return tuple(shapes[0][:-1]) + tuple(shapes[1][1:])

    steps = [Step(node, (p,), (x, y), emit_prod, dtypes=(od,), temp_shape=pshape)]
    axpby = ctx.glob(_axpby, "axpby")
    scalars = [a] if b is None else [a, b]
    sc = [ctx.const(ctx.value_of(s), "k") if ctx.is_const(s) else s for s in scalars]
    vals = [z, p] + [s for s in sc if not isinstance(s, str)]
    destroy = bool(getattr(node.op, "destroy_map", None))

    # ``b*z + a*p`` as numpy calls inline, in _axpby's order of roundings (z scaled first:
    # p may only be scaled once z is read), instead of a Python function around them.
    # Where a and b are known (b not 0) the lines skip the products by 1; an inplace
    # call writes into z itself; otherwise a ``b == 0`` test picks BLAS's ``a*p``.
    known = [np.asarray(ctx.value_of(v)).item() if ctx.is_const(v) else None for v in (a, b)]
    a_val, b_val = known[0], (1 if b is None else known[1])
    same_dtype = all(v is None or v.type.dtype == od for v in (a, b))  # fresh results keep od
    mul = ctx.glob(np.multiply, "multiply")
    add = ctx.glob(np.add, "add")

    def names_of(names):
        it = iter(names[2:])
        return [s if isinstance(s, str) else next(it) for s in sc]

    if a_val is not None and b_val is not None and b_val != 0 and same_dtype:

        def emit_inline(names, outs, target):
            z_n, p_n, o = names[0], names[1], outs[0]
            if destroy:
                target = z_n
            lines = []
            if a_val != 1:
                lines.append(f"{mul}({p_n}, {sc[0]}, out={p_n})")
            if b_val == 1:
                if target is None:
                    return [*lines, f"{o} = {z_n} + {p_n}"]
                if target == z_n:
                    return [*lines, f"{add}({z_n}, {p_n}, out={z_n})", f"{o} = {z_n}"]
                return [*lines, f"{o} = {add}({z_n}, {p_n}, out={target})"]
            first = (
                f"{o} = {z_n} * {sc[1]}"
                if target is None
                else f"{o} = {mul}({z_n}, {sc[1]}, out={target})"
            )
            return [first, *lines, f"{add}({o}, {p_n}, out={o})"]

        if destroy:
            steps.append(
                Step(node, node.outputs, vals, emit_inline, kind="view", views={0: 0}, dtypes=(od,))
            )
        else:
            steps.append(
                Step(node, node.outputs, vals, emit_inline, inplace=[(0, 0)], dtypes=(od,))
            )
        return steps

    def emit_comb(names, outs, target):
        sn = names_of(names)
        bn = "1" if b is None else sn[1]
        t = names[0] if destroy else target
        if b is not None and same_dtype:
            # a*p where b is 0 (z is not read), else b*z + a*p, into t (or a fresh array
            # holding b*z first)
            z_n, p_n, o = names[0], names[1], outs[0]
            lines = [] if t is not None else [f"{o} = {mul}({z_n}, {bn})"]
            t = t or o
            zb = f"{mul}({z_n}, {bn}, out={t})" if lines == [] else o
            return [
                *lines,
                f"{o} = {mul}({p_n}, {sn[0]}, out={t}) if {bn} == 0 else "
                f"{add}({zb}, {mul}({p_n}, {sn[0]}, out={p_n}), out={t})",
            ]
        t = t if t is not None else "None"
        return [f"{outs[0]} = {axpby}({names[0]}, {sn[0]}, {names[1]}, {bn}, {t})"]

    if destroy:
        steps.append(
            Step(node, node.outputs, vals, emit_comb, kind="view", views={0: 0}, dtypes=(od,))
        )
    else:
        steps.append(Step(node, node.outputs, vals, emit_comb, inplace=[(0, 0)], dtypes=(od,)))
    return steps


def _deepcopy_steps(node, ctx):
    x = node.inputs[0]
    if not _is_tensor(x) or ctx.is_const(x):
        return None

    def emit(ins, outs, target):
        return [f"{outs[0]} = {ins[0]}.copy()"]

    return [Step(node, node.outputs, (x,), emit, kind="call")]


def _extract_diag_steps(node, ctx):
    """ExtractDiag: ``x.diagonal(offset, axis1, axis2).copy()`` inline, as its ``perform``
    (a copy: the op declares no view), a sixth of the cost of the perform's call."""
    x = node.inputs[0]
    if not _is_tensor(x) or ctx.is_const(x):
        return None
    op = node.op
    args = f"{op.offset}, {op.axis1}, {op.axis2}"

    def emit(ins, outs, target):
        return [f"{outs[0]} = {ins[0]}.diagonal({args}).copy()"]

    return [Step(node, node.outputs, (x,), emit, kind="call")]


def _viewop_steps(node, ctx):
    def emit(ins, outs, target):
        return [f"{outs[0]} = {ins[0]}"]

    return [Step(node, node.outputs, node.inputs, emit, kind="view", views={0: 0})]


def _shape_steps(node, ctx):
    x = node.inputs[0]
    if not _is_tensor(x) or ctx.is_const(x):
        return None
    arr = ctx.glob(np.array, "array")
    i64 = ctx.glob(np.dtype("int64"), "D")
    i = getattr(node.op, "i", None)

    def emit(ins, outs, target):
        sub = f".shape[{i}]" if i is not None else ".shape"
        return [f"{outs[0]} = {arr}({ins[0]}{sub}, dtype={i64})"]

    return [Step(node, node.outputs, (x,), emit, kind="call")]


def _equal_lengths_steps(node, ctx):
    """A check of lengths inline: the comparison, and the op's ``perform`` (which says
    which lengths differ) only when it fails; the output is the first input."""
    fail = ctx.glob(make_call(node), "F")
    first = 1 if node.op.guard else 0

    def emit(ins, outs, target):
        a = ins[first]
        cond = " or ".join(f"{a} != {b}" for b in ins[first + 1 :])
        return [f"if {cond}: {fail}({', '.join(ins)})", f"{outs[0]} = {ins[0]}"]

    return [Step(node, node.outputs, node.inputs, emit, kind="view", views={0: 0})]


def _const_index(node, ctx, idx_inputs):
    """The numpy index of a basic Subtensor/IncSubtensor node whose index values are all
    known now (constants, or folded), with ``...`` last; None otherwise.

    ``x[0, ...]`` is a 0-d view where ``x[0]`` would be a numpy scalar: with the
    Ellipsis an index always gives an array, as the op's output is.
    """
    if not all(ctx.is_const(v) for v in idx_inputs):
        return None
    it = iter(int(ctx.value_of(v)) for v in idx_inputs)
    out = []
    for entry in node.op.idx_list:
        if entry[0] == "int":
            out.append(next(it))
        elif entry[0] == "slice":
            out.append(slice(*[next(it) if present else None for present in entry[1:]]))
        else:
            return None
    return tuple(out) + (Ellipsis,)


def _subtensor_steps(node, ctx):
    """Basic indexing by known integers and slices: a numpy view, indexed inline."""
    x, *idx_inputs = node.inputs
    if not _is_tensor(x) or ctx.is_const(x):
        return None
    index = _const_index(node, ctx, idx_inputs)
    if index is None:
        return None
    iname = ctx.const(index, "idx")

    def emit(ins, outs, target):
        return [f"{outs[0]} = {ins[0]}[{iname}]"]

    return [Step(node, node.outputs, (x,), emit, kind="view", views={0: 0})]


def _inc_subtensor_steps(node, ctx):
    """set/inc_subtensor at known integers and slices: ``x[idx] = y`` (or ``+=``) inline,
    into ``x`` itself when the op is inplace, else into a copy (as its ``perform``)."""
    op = node.op
    x, y, *idx_inputs = node.inputs
    if not (_is_tensor(x) and _is_tensor(y)) or ctx.is_const(x):
        return None
    index = _const_index(node, ctx, idx_inputs)
    if index is None:
        return None
    iname = ctx.const(index[:-1], "idx")
    sign = "=" if op.set_instead_of_inc else "+="
    # perform adds y cast to x's dtype (numpy's in-place add would refuse float into int).
    cast = None
    if not op.set_instead_of_inc and y.type.dtype != x.type.dtype:
        cast = ctx.glob(np.dtype(x.type.dtype), "D")
    y_in = ()
    if ctx.is_const(y):
        yv = np.asarray(ctx.value_of(y))
        yname = ctx.const(yv if cast is None else yv.astype(x.type.dtype), "k")
        cast = None
    else:
        y_in = (y,)
        yname = None
    asarray = ctx.glob(np.asarray, "asarray")

    def emit(ins, outs, target):
        o = outs[0]
        yv = yname or ins[1]
        if cast is not None:
            yv = f"{asarray}({yv}, {cast})"
        if op.inplace:
            return [f"{ins[0]}[{iname}] {sign} {yv}", f"{o} = {ins[0]}"]
        return [f"{o} = {ins[0]}.copy()", f"{o}[{iname}] {sign} {yv}"]

    if op.inplace:
        return [Step(node, node.outputs, (x, *y_in), emit, kind="view", views={0: 0})]
    return [Step(node, node.outputs, (x, *y_in), emit, kind="call")]


def _reshape_steps(node, ctx):
    """Reshape to a known shape: ``x.reshape(shape)`` inline; a shape numpy refuses
    goes through the op's ``perform``, which says why."""
    x, shp = node.inputs
    if not _is_tensor(x) or ctx.is_const(x):
        return None
    if not ctx.is_const(shp):
        return _reshape_by_steps(node, ctx)
    shape = tuple(int(s) for s in np.asarray(ctx.value_of(shp)).ravel())
    static = node.outputs[0].type.shape
    if len(shape) != node.op.ndim or any(k == -1 and s is not None for k, s in zip(shape, static)):
        return None  # the op checks a computed length against its static shape
    perform = make_call(node)
    shp_value = ctx.value_of(shp)

    def reshape(a):
        try:
            return a.reshape(shape)
        except ValueError:
            perform(a, shp_value)  # raises the op's own message
            raise

    fn = ctx.glob(reshape, "reshape")

    def emit(ins, outs, target):
        return [f"{outs[0]} = {fn}({ins[0]})"]

    return [Step(node, node.outputs, (x,), emit, kind="view", views={0: 0})]


def _split_steps(node, ctx):
    """Split at a known axis into parts of known sizes: each part a slice of ``x``,
    copied (Theano's parts are not views), inline; a length that the sizes do not add
    up to goes through the op's ``perform``, which says why."""
    op = node.op
    if op.axis is None:
        return None
    x, splits = node.inputs
    if not _is_tensor(x) or ctx.is_const(x) or not ctx.is_const(splits):
        return None
    sizes = np.asarray(ctx.value_of(splits)).tolist()
    if len(sizes) != op.len_splits or any(s < 0 for s in sizes):
        return None  # perform raises its error at every call
    axis = op.axis % x.type.ndim
    lead = (slice(None),) * axis
    bounds = np.cumsum([0, *sizes]).tolist()
    parts = [ctx.const((*lead, slice(a, b)), "idx") for a, b in zip(bounds, bounds[1:])]
    perform = ctx.glob(make_call(node), "F")
    sname = ctx.const(ctx.value_of(splits), "k")
    total = bounds[-1]

    def emit(ins, outs, target):
        x_n = ins[0]
        check = f"if {x_n}.shape[{axis}] != {total}: {perform}({x_n}, {sname})  # raises"
        return [check, *(f"{o} = {x_n}[{i}].copy()" for o, i in zip(outs, parts))]

    return [Step(node, node.outputs, (x,), emit, kind="call")]


def _reshape_by_steps(node, ctx):
    """Reshape to a shape computed when the function runs: ``x.reshape(shape)`` where
    its length and the static shape of the output allow it, else the op's ``perform``
    (which raises its own error)."""
    x, shp = node.inputs
    if not _is_tensor(x) or ctx.is_const(x):
        return None
    ndim = node.op.ndim
    static = [(d, s) for d, s in enumerate(node.outputs[0].type.shape) if s is not None]
    perform = make_call(node)

    def reshape(a, s):
        if len(s) == ndim:
            try:
                out = a.reshape(s.tolist())
            except ValueError:
                out = None
            if out is not None and all(out.shape[d] == n for d, n in static):
                return out
        return perform(a, s)  # raises the op's message

    fn = ctx.glob(reshape, "reshape")

    def emit(ins, outs, target):
        return [f"{outs[0]} = {fn}({ins[0]}, {ins[1]})"]

    return [Step(node, node.outputs, (x, shp), emit, kind="view", views={0: 0})]


def _make_vector_steps(node, ctx):
    """MakeVector: ``numpy.array((a, b, ...), dtype)`` inline, as its ``perform``."""
    if not all(_is_tensor(v) and v.type.ndim == 0 for v in node.inputs):
        return None
    arr = ctx.glob(np.array, "array")
    dt = ctx.glob(np.dtype(node.op.dtype), "D")

    def emit(ins, outs, target):
        items = "".join(f"{i}, " for i in ins)
        return [f"{outs[0]} = {arr}(({items}), {dt})"]

    return [Step(node, node.outputs, node.inputs, emit, kind="call")]


def _join_steps(node, ctx):
    """Join at a known axis of inputs of the output's dtype: ``numpy.concatenate``, and
    the op's ``perform`` for its message where numpy refuses the shapes. (A Join that
    may return one input as it is, ``view=k``, keeps its ``perform``.)"""
    op = node.op
    od = node.outputs[0].type.dtype
    if op.axis is None or op.view != -1:
        return None
    if not all(_is_tensor(v) and v.type.dtype == od for v in node.inputs):
        return None
    if all(ctx.is_const(v) for v in node.inputs):
        return None
    concatenate = np.concatenate
    axis = op.axis % node.outputs[0].type.ndim
    perform = make_call(node)

    def join(*xs):
        try:
            return concatenate(xs, axis=axis)
        except ValueError:
            perform(*xs)  # raises the op's message
            raise

    fn = ctx.glob(join, "join")

    def emit(ins, outs, target):
        return [f"{outs[0]} = {fn}({', '.join(ins)})"]

    return [Step(node, node.outputs, node.inputs, emit, kind="call")]


def _cum_steps(node, ctx):
    """CumOp: the ufunc's ``accumulate`` in the output's dtype inline, what numpy's cumsum
    and cumprod run under their Python wrapper (3 us of a 4 us call on a short vector)."""
    op = node.op
    (x,) = node.inputs
    if not _is_tensor(x) or ctx.is_const(x):
        return None
    uf = np.add if op.mode == "add" else np.multiply
    fn = ctx.glob(uf.accumulate, uf.__name__ + "_accumulate")
    od = node.outputs[0].type.dtype
    dt = ctx.glob(np.dtype(od), "D")
    axis = op.axis

    def emit(ins, outs, target):
        o = outs[0]
        if x.type.dtype != od or axis is None:
            # Into one converted (or flattened) copy, in place, as the op's perform:
            # accumulate with a cast, or of a ravel that copies (an input not C-ordered),
            # holds that copy beside the output. C-ordered, so that axis=None flattens it
            # in numpy's order without another copy.
            flat = ".reshape(-1)" if axis is None else ""
            return [
                f"{o} = {ins[0]}.astype({dt}, order='C'){flat}",
                f"{fn}({o}, {0 if axis is None else axis}, out={o})",
            ]
        return [f"{o} = {fn}({ins[0]}, {axis}, {dt})"]

    return [Step(node, node.outputs, (x,), emit, kind="call")]


# The most values of an Alloc of a known value kept filled, copied at each call (a larger
# one is filled at each call, not held twice).
_FILLED_MAX = 4096


def _alloc_steps(node, ctx):
    """Alloc of a known shape: a copy of the filled array where the value is known too,
    else ``numpy.empty`` filled with the value (the op's ``perform`` for its message
    where the value does not broadcast)."""
    v, *shape = node.inputs
    if not all(ctx.is_const(s) for s in shape) or not _is_tensor(v):
        return None
    dtype = node.outputs[0].type.dtype
    shp = tuple(int(ctx.value_of(s)) for s in shape)
    if ctx.is_const(v) and int(np.prod(shp)) <= _FILLED_MAX:
        filled = np.empty(shp, dtype)
        try:
            filled[...] = ctx.value_of(v)
        except ValueError:
            return None  # perform raises its error at every call
        cname = ctx.const(filled, "filled")

        def emit_const(ins, outs, target):
            return [f"{outs[0]} = {cname}.copy()"]

        return [Step(node, node.outputs, (), emit_const, kind="call")]
    v_const = _const_or_none(ctx, v)
    empty = np.empty
    perform = make_call(node)
    values = [ctx.value_of(s) for s in shape]

    def alloc(a):
        out = empty(shp, dtype)
        try:
            out[...] = a
        except ValueError:
            perform(a, *values)  # raises the op's message
            raise
        return out

    fn = ctx.glob(alloc, "alloc")

    def emit(ins, outs, target):
        return [f"{outs[0]} = {fn}({v_const or ins[0]})"]

    return [Step(node, node.outputs, () if v_const else (v,), emit, kind="call")]


def _const_or_none(ctx, v):
    """The global name of value ``v`` where it is known now (lines read it by that
    name, and the step does not take it as an input), else None."""
    return ctx.const(np.asarray(ctx.value_of(v)), "k") if ctx.is_const(v) else None


def _advanced_index(node, ctx, idx_inputs):
    """The numpy index of an AdvancedSubtensor/AdvancedIncSubtensor node whose index
    inputs are all known now, built as its ``perform`` builds it; None otherwise."""
    if not all(ctx.is_const(v) for v in idx_inputs):
        return None
    return _rebuild(node.op.idx_list, [ctx.value_of(v) for v in idx_inputs])


def _advanced_subtensor_steps(node, ctx):
    """``x[index]`` at known index arrays inline (a copy, as numpy's advanced indexing)."""
    x, *idx_inputs = node.inputs
    if not _is_tensor(x) or ctx.is_const(x):
        return None
    index = _advanced_index(node, ctx, idx_inputs)
    if index is None:
        return None
    iname = ctx.const(index, "idx")
    asarray = ctx.glob(np.asarray, "asarray")
    zero_d = node.outputs[0].type.ndim == 0  # numpy gives a scalar there
    # numpy gives a view for an index without arrays: the op's output is its own array
    copy = ".copy()" if index_is_basic(index) and not zero_d else ""

    def emit(ins, outs, target):
        e = f"{ins[0]}[{iname}]"
        return [f"{outs[0]} = {asarray}({e})" if zero_d else f"{outs[0]} = {e}{copy}"]

    return [Step(node, node.outputs, (x,), emit, kind="call")]


def _set_lines(op, x_n, o, index, y_n, add_at=None, dtype=None):
    """The lines of ``x[index] = y`` (or ``numpy.add.at``) into ``x`` itself when ``op`` is
    inplace, else into a copy of it, binding the result to ``o``."""
    target = x_n if op.inplace else o
    first = [] if op.inplace else [f"{o} = {x_n}.copy()"]
    if add_at is None:
        write = f"{target}[{index}] = {y_n}"
    else:
        write = f"{add_at}({target}, {index}, {y_n}.astype({dtype}, copy=False))"
    last = [f"{o} = {x_n}"] if op.inplace else []
    return [*first, write, *last]


def _set_step(node, op, ins, emit):
    if op.inplace:
        return [Step(node, node.outputs, ins, emit, kind="view", views={0: 0})]
    return [Step(node, node.outputs, ins, emit, kind="call")]


def _advanced_inc_subtensor_steps(node, ctx):
    """set/inc at known index arrays inline: ``x[index] = y`` or ``numpy.add.at`` (repeated
    positions accumulate), as its ``perform``."""
    op = node.op
    x, y, *idx_inputs = node.inputs
    if not (_is_tensor(x) and _is_tensor(y)) or ctx.is_const(x):
        return None
    index = _advanced_index(node, ctx, idx_inputs)
    if index is None:
        return None
    iname = ctx.const(index, "idx")
    add_at = None if op.set_instead_of_inc else ctx.glob(np.add.at, "add_at")
    dt = ctx.glob(np.dtype(x.type.dtype), "D")
    y_const = _const_or_none(ctx, y)
    y_in = () if y_const else (y,)

    def emit(ins, outs, target):
        y_n = y_const or ins[1]
        return _set_lines(op, ins[0], outs[0], iname, y_n, add_at, dt)

    return _set_step(node, op, (x, *y_in), emit)


def _advanced_set_rows_steps(node, ctx):
    """set_subtensor(x[i], y) of an index vector inline: ``x[i] = y`` (into a copy of x
    unless the op is inplace), as its ``perform``; an increment keeps its ``perform``."""
    op = node.op
    x, y, i = node.inputs
    if not op.set_instead_of_inc or not all(map(_is_tensor, (x, y, i))) or ctx.is_const(x):
        return None
    y_const, i_const = _const_or_none(ctx, y), _const_or_none(ctx, i)
    ins = (x, *(() if y_const else (y,)), *(() if i_const else (i,)))

    def emit(names, outs, target):
        it = iter(names[1:])
        y_n = y_const or next(it)
        i_n = i_const or next(it)
        return _set_lines(op, names[0], outs[0], i_n, y_n)

    return _set_step(node, op, ins, emit)


def register_defaults():
    """Register the emitters of this module for their ops (idempotent)."""
    # compile/ holds ViewOp and DeepCopyOp until they move down to graph/: an upward import

    register_impl(DimShuffle)(_dimshuffle_steps)
    register_impl(CAReduce)(_careduce_steps)
    register_impl(FusedReduce)(_fused_reduce_steps)
    register_impl(Dot)(_dot_steps)
    register_impl(blas.Dot22)(_dot_steps)
    register_impl(blas.Dot22Scalar)(lambda node, ctx: _dot_steps(node, ctx, scale=True))
    register_impl(blas.Gemm)(lambda node, ctx: _blas_steps(node, ctx, "gemm"))
    register_impl(blas.Gemv)(lambda node, ctx: _blas_steps(node, ctx, "gemv"))
    register_impl(blas.Ger)(lambda node, ctx: _blas_steps(node, ctx, "ger"))
    register_impl(DeepCopyOp)(_deepcopy_steps)
    register_impl(ViewOp)(_viewop_steps)
    register_impl(Shape, Shape_i)(_shape_steps)
    register_impl(EqualLengths)(_equal_lengths_steps)
    register_impl(Subtensor)(_subtensor_steps)
    register_impl(IncSubtensor)(_inc_subtensor_steps)
    register_impl(Reshape)(_reshape_steps)
    register_impl(Split)(_split_steps)
    register_impl(MakeVector)(_make_vector_steps)
    register_impl(Join)(_join_steps)
    register_impl(CumOp)(_cum_steps)
    register_impl(ExtractDiag)(_extract_diag_steps)
    register_impl(Alloc)(_alloc_steps)
    register_impl(AdvancedSubtensor)(_advanced_subtensor_steps)
    register_impl(AdvancedIncSubtensor)(_advanced_inc_subtensor_steps)
    register_impl(AdvancedIncSubtensor1)(_advanced_set_rows_steps)


register_defaults()
