"""How the CPU engine runs each op: per-Op-class emitters of numpy code, kept out of the ops.

An *emitter* turns one Apply node into :class:`Step` objects; a Step knows the
values it reads and writes and emits the Python source lines computing them.
Emitters are registered per Op class (:func:`register_impl`), looked up along
the class's MRO; an op with none runs through its own ``perform`` (a *call*
step, unplanned: numpy allocates its outputs).

Kinds of steps:

* ``out`` steps write their one output into a target array the engine chooses
  (``np.add(a, b, out=t)``) or, given none, let numpy allocate it. Elementwise
  ones may overwrite an input of the output's exact shape (``inplace``).
* ``view`` steps alias an input (``DimShuffle``, ``ViewOp``, views an op declares
  in its ``view_map``, outputs an op writes over an input in its ``destroy_map``).
* ``call`` steps run ``Op.perform`` through the op's thunk.

A fused ``Elemwise{Composite}`` expands into one ``out`` step per scalar node,
each writing a planned scratch value, until the C kernels take them over.
"""

from __future__ import annotations

import numpy as np

from theano_dag import scalar as ts
from theano_dag.graph.basic import Constant, NoParams
from theano_dag.graph.op import Op
from theano_dag.scalar.basic import ScalarOp
from theano_dag.tensor.elemwise import Elemwise

__all__ = ["Step", "Temp", "KernelCall", "register_impl", "get_impl", "make_steps", "IMPLS"]

IMPLS: dict = {}


def register_impl(*op_classes):
    """Register ``fn(node, ctx) -> list[Step] | None`` as the emitter of ``op_classes``.

    Returning None makes the engine fall back to ``perform`` for that node.

    >>> from theano_dag.graph.op import Op
    >>> class MyOp(Op):
    ...     __props__ = ()
    >>> @register_impl(MyOp)
    ... def _my_impl(node, ctx):
    ...     return None
    >>> get_impl(MyOp()) is _my_impl
    True
    >>> del IMPLS[MyOp]
    """

    def deco(fn):
        for cls in op_classes:
            IMPLS[cls] = fn
        return fn

    return deco


def get_impl(op):
    """The emitter registered for ``op``'s class or its nearest base class (None if none)."""
    for cls in type(op).__mro__:
        fn = IMPLS.get(cls)
        if fn is not None:
            return fn
    return None


class Temp:
    """A scratch value made by an expanded node (a scalar node inside a Composite)."""

    __slots__ = ("dtype", "label", "like")

    def __init__(self, dtype, label, like=None):
        self.dtype = dtype
        self.label = label
        # Values (or ("const", data) items) whose broadcast shape is this value's shape,
        # when it is not the broadcast of the inputs of the step that writes it.
        self.like = like

    @property
    def type(self):
        return None

    def __repr__(self):
        return f"<temp {self.label} {self.dtype}>"


class KernelCall(str):
    """The line of a step that runs a C kernel into its target, ``if K.c(a, o):
    K.fail(a, o)``, knowing its kernel and argument names: the code generator runs
    consecutive ones as one segment (the kernel's ``library.segment``).

    >>> line = KernelCall("_K0", None, ["v0", "b1"])
    >>> print(line)
    if _K0.c(v0, b1): _K0.fail(v0, b1)
    >>> line.args
    ('v0', 'b1')
    """

    def __new__(cls, name, kernel, args):
        args = tuple(args)
        joined = ", ".join(args)
        self = super().__new__(cls, f"if {name}.c({joined}): {name}.fail({joined})")
        self.kernel = kernel
        self.args = args
        return self


class Step:
    """A few lines of generated code computing ``outputs`` from ``inputs`` (value ids).

    ``emit(ins, outs, target)`` returns the source lines: ``ins``/``outs`` are the
    local names of the values, ``target`` the expression of the array to write the
    single output into, or None to let numpy allocate it. ``kind`` is ``"out"``,
    ``"view"`` or ``"call"``; ``views`` maps output positions to the input position
    they alias; ``inplace`` lists ``(output position, input position)`` pairs the
    output may overwrite when the input has its exact shape and dtype.
    ``elementwise`` out steps broadcast their inputs, plus ``const_shapes``, to their
    natural output shape; ``prefer_fresh`` steps are cheaper writing fresh arrays,
    ``prefer_target`` ones cheaper writing into a given array even when it is small (a
    C kernel: its Python wrapper that allocates costs more than the planned block).
    ``temp_shape(input shapes)`` gives the shape of a scratch output (a Temp); with
    ``temp_shape_outputs`` it is called as ``temp_shape(input shapes, shapes of the
    node's outputs)`` (a workspace sized by what the node makes).
    """

    __slots__ = (
        "node",
        "outputs",
        "inputs",
        "emit",
        "kind",
        "views",
        "inplace",
        "elementwise",
        "const_shapes",
        "prefer_fresh",
        "prefer_target",
        "dtypes",
        "temp_shape",
        "temp_shape_outputs",
    )

    def __init__(
        self,
        node,
        outputs,
        inputs,
        emit,
        kind="out",
        views=None,
        inplace=(),
        elementwise=False,
        const_shapes=(),
        prefer_fresh=False,
        prefer_target=False,
        dtypes=None,
        temp_shape=None,
        temp_shape_outputs=False,
    ):
        self.node = node
        self.outputs = tuple(outputs)
        self.inputs = tuple(inputs)
        self.emit = emit
        self.kind = kind
        self.views = dict(views or {})
        self.inplace = tuple(inplace)
        self.elementwise = elementwise
        self.const_shapes = tuple(const_shapes)
        self.prefer_fresh = prefer_fresh
        self.prefer_target = prefer_target
        self.temp_shape = temp_shape
        self.temp_shape_outputs = temp_shape_outputs
        if dtypes is None:
            dtypes = tuple(_dtype_of(o) for o in self.outputs)
        self.dtypes = tuple(dtypes)

    @classmethod
    def elementwise_out(cls, node, outputs, inputs, emit, kind, inplace, const_shapes, dtypes):
        """``Step(node, outputs, inputs, emit, kind=kind, inplace=inplace,
        elementwise=kind == "out", const_shapes=const_shapes, prefer_target=True,
        dtypes=dtypes)`` from tuples, without the constructor's keywords and copies:
        the step of every C kernel node (a fifth of the constructor's time).

        >>> s = Step.elementwise_out(None, ("y",), ("x",), None, "out", ((0, 0),), (), ("f8",))
        >>> s.elementwise, s.prefer_target, s.views, s.inplace
        (True, True, {}, ((0, 0),))
        """
        s = object.__new__(cls)
        s.node, s.outputs, s.inputs, s.emit, s.kind = node, outputs, inputs, emit, kind
        s.views, s.inplace, s.elementwise, s.const_shapes = {}, inplace, kind == "out", const_shapes
        s.prefer_fresh, s.prefer_target, s.dtypes = False, True, dtypes
        s.temp_shape, s.temp_shape_outputs = None, False
        return s


def _dtype_of(v):
    if isinstance(v, Temp):
        return v.dtype
    return getattr(getattr(v, "type", None), "dtype", None)


def _is_tensor(v):
    t = getattr(v, "type", None)
    return getattr(t, "dtype", None) is not None and getattr(t, "ndim", None) is not None


# -- the fallback: Op.perform through the op's thunk ------------------------------------


def make_call(node):
    """A callable running ``node`` through its op's thunk: args in, output(s) out."""
    cells = {}
    for v in list(node.inputs) + list(node.outputs):
        cells.setdefault(v, [None])
    compute_map = {v: [v.owner is None or v not in node.outputs] for v in cells}
    thunk = node.op.make_thunk(node, cells, compute_map, [], "py")
    direct = _direct_perform(node, thunk)
    if direct is not None:
        return direct
    in_cells = [cells[v] for v in node.inputs]
    out_cells = [cells[v] for v in node.outputs]
    single = len(out_cells) == 1
    pairs = list(zip(in_cells, range(len(in_cells))))

    def call(*args):
        for cell, k in pairs:
            cell[0] = args[k]
        for cell in out_cells:
            cell[0] = None
        try:
            thunk()
        finally:
            for cell in in_cells:
                cell[0] = None
        if single:
            r = out_cells[0][0]
            out_cells[0][0] = None
            return r
        r = tuple(c[0] for c in out_cells)
        for c in out_cells:
            c[0] = None
        return r

    return call


def _direct_perform(node, thunk):
    """``call(*args)`` running ``perform`` on fresh output cells, where ``thunk`` is
    Op's own Python thunk of an op without params (most): the cells of the thunk and
    their clearing cost about 2 us a call, as much as a small op's numpy work."""
    op = node.op
    cls = type(op)
    if cls.make_thunk is not Op.make_thunk or cls.make_py_thunk is not Op.make_py_thunk:
        return None
    if getattr(thunk, "perform", None) != op.perform or node.run_params() is not NoParams:
        return None
    perform = op.perform
    n_out = len(node.outputs)
    if n_out == 1:

        def call(*args):
            cell = [None]
            perform(node, list(args), [cell])
            return cell[0]

        return call

    def call_many(*args):
        cells = [[None] for _ in range(n_out)]
        perform(node, list(args), cells)
        return tuple([c[0] for c in cells])

    return call_many


def call_steps(node, ctx):
    """The fallback step of ``node``: run its ``perform``; outputs alias inputs as declared."""
    fn = ctx.glob(make_call(node), "F")
    op = node.op
    views = {}
    for maps in (getattr(op, "view_map", None) or {}, getattr(op, "destroy_map", None) or {}):
        for o, ins in maps.items():
            if ins:
                views[o] = ins[0]
    n_out = len(node.outputs)

    def emit(ins, outs, target):
        lhs = outs[0] if n_out == 1 else ", ".join(outs) + ("," if n_out == 1 else "")
        return [f"{lhs} = {fn}({', '.join(ins)})"]

    return [Step(node, node.outputs, node.inputs, emit, kind="call", views=views)]


# -- elementwise: one scalar op over arrays ---------------------------------------------

_NATURAL: dict = {}


def _natural_dtype(uf, dtypes):
    """The dtype numpy's ``uf`` gives for inputs of ``dtypes`` (None if it has no loop)."""
    key = (uf, dtypes)
    if key not in _NATURAL:
        try:
            with np.errstate(all="ignore"):
                r = uf(*[np.ones(1, dtype=d) for d in dtypes])
            _NATURAL[key] = np.asarray(r).dtype.name
        except Exception:
            _NATURAL[key] = None
    return _NATURAL[key]


def _ufunc_form(sop, n_in, in_dtypes, od):
    """``(ufuncs, work_dtypes)`` when numpy ufuncs compute ``sop`` exactly, else None.

    ``ufuncs`` is one ufunc of ``n_in`` inputs, or a *chain* of binary ufuncs folded
    left to right over the inputs (``add``/``mul`` of many inputs, ``fma``).
    ``work_dtypes`` are the dtypes the reference casts the inputs to before computing
    (``ScalarOp.compute``): the output dtype, or the inputs' common dtype for
    comparisons, or the inputs' own.
    """
    cls = type(sop)
    if getattr(sop, "nout", 1) != 1:
        return None
    if isinstance(sop, (ts.Add, ts.Mul)) and cls.compute is ScalarOp.compute:
        if n_in < 2:
            return None
        ufs = [np.add if isinstance(sop, ts.Add) else np.multiply] * (n_in - 1)
    elif isinstance(sop, getattr(ts, "FMA", ())) and cls.compute is ScalarOp.compute:
        ufs = [np.multiply, np.add]  # x * y + z, rounded twice as numpy does
    else:
        uf = getattr(sop, "nfunc", None)
        if not isinstance(uf, np.ufunc) or uf.nout != 1 or uf.nin != n_in:
            return None
        if cls.impl is not ScalarOp.impl:
            return None
        ufs = [uf]
    compare = getattr(getattr(ts, "arith", None), "_Compare", None)
    if cls.compute is ScalarOp.compute:
        if sop.compute_in_output_dtype:
            work = (od,) * n_in
        else:
            work = tuple(in_dtypes)
    elif compare is not None and isinstance(sop, compare) and "compute" not in cls.__dict__:
        if ts.signed_with_uint64(*in_dtypes):
            return None  # compared exactly by the op's compute, not in their common dtype
        work = (ts.numpy_upcast(*in_dtypes),) * n_in
    else:
        return None
    if len(ufs) > 1 and len(set(work)) != 1:
        return None
    return ufs, work


# Python operators that call exactly these ufuncs: ``a + b`` skips the argument parsing
# of ``np.add(a, b)`` (about 0.2 us a call on small arrays). Not ``**``: numpy turns
# ``x ** 2`` and ``x ** 0.5`` into other ufuncs.
_BINARY_OPERATORS = {
    np.add: "+",
    np.subtract: "-",
    np.multiply: "*",
    np.true_divide: "/",
    np.floor_divide: "//",
    np.remainder: "%",
    np.less: "<",
    np.greater: ">",
    np.less_equal: "<=",
    np.greater_equal: ">=",
    np.equal: "==",
    np.not_equal: "!=",
    np.bitwise_and: "&",
    np.bitwise_or: "|",
    np.bitwise_xor: "^",
}
_UNARY_OPERATORS = {np.negative: "-", np.invert: "~"}


def _fresh_call(uf, ufn, es):
    """Source computing ``uf(*es)`` into a new array, by operator where one exists."""
    if len(es) == 2 and uf in _BINARY_OPERATORS:
        return f"({es[0]} {_BINARY_OPERATORS[uf]} {es[1]})"
    if len(es) == 1 and uf in _UNARY_OPERATORS:
        return f"({_UNARY_OPERATORS[uf]}{es[0]})"
    return f"{ufn}({', '.join(es)})"


def _const_for(value, dtype):
    arr = np.asarray(value, dtype=dtype)
    return arr[()] if arr.ndim == 0 else arr


class _Arg:
    """One input of an elementwise step: a value (by position) or a constant (a name)."""

    __slots__ = ("value", "const", "shape", "cast")

    def __init__(self, value=None, const=None, shape=None, cast=None):
        self.value, self.const, self.shape, self.cast = value, const, shape, cast


def elementwise_step(ctx, node, sop, items, in_dtypes, out_id, od, out_ndim):
    """One step applying scalar op ``sop`` to ``items`` (Variables/Temps, or
    ``("const", data)`` pairs), writing value ``out_id`` of dtype ``od``."""
    form = _ufunc_form(sop, len(items), in_dtypes, od)
    if form is None:
        return _compute_step(ctx, node, sop, items, in_dtypes, out_id, od, out_ndim)
    ufs, work = form
    if len(ufs) == 1:
        natural = _natural_dtype(ufs[0], work)
    else:
        nat = {_natural_dtype(uf, (work[0], work[0])) for uf in ufs}
        natural = nat.pop() if len(nat) == 1 else None
    if natural is None or (len(ufs) > 1 and natural != work[0]):
        return _compute_step(ctx, node, sop, items, in_dtypes, out_id, od, out_ndim)
    args, values, const_shapes = [], [], []
    # With every input computed in one dtype and every array input already in it, a
    # one-element constant can be a Python number: numpy treats it as "weak" (it takes
    # the array's dtype, NEP 50), which gives the same result and is parsed faster than
    # a numpy scalar or a broadcast array (x + 1.0 is 0.2 us faster than x + array([1.0])).
    # Not where the constant's dtype is another (a float32 constant over a uint16
    # array: a Python float over integers gives float64). The array inputs have the
    # output's rank (Elemwise), so the shape is the same too.
    weak = (
        len(set(work)) == 1
        and any(not isinstance(i, tuple) for i in items)
        and all(d == w for i, d, w in zip(items, in_dtypes, work) if not isinstance(i, tuple))
    )
    for item, d, w in zip(items, in_dtypes, work):
        if isinstance(item, tuple):
            c = _const_for(item[1], w)
            if weak and np.size(c) == 1 and (np.ndim(c) == 0 or np.ndim(c) <= (out_ndim or 0)):
                c = c.item()
            args.append(_Arg(const=ctx.const(c, "k")))
            const_shapes.append(np.shape(c))
        else:
            cast = ctx.glob(np.dtype(w), "D") if d != w else None
            if item not in values:
                values.append(item)
            args.append(_Arg(value=values.index(item), cast=cast))
    ufns = [ctx.glob(uf, uf.__name__) for uf in ufs]
    odn = ctx.glob(np.dtype(od), "D")
    asarray = ctx.glob(np.asarray, "asarray")
    chain = len(ufs) > 1
    # Inputs of another dtype than the one loop that computes in the work dtype: the
    # ufunc converts them as it goes (dtype=, in buffers), as astype's unsafe cast
    # would, where a converted copy of the whole input was made first (a uint8 image's
    # int16 copy, twice its bytes, at every call without a C compiler).
    convert = ""
    if any(a.cast for a in args) and len(set(work)) == 1 and natural == work[0]:
        convert = f", dtype={ctx.glob(np.dtype(work[0]), 'D')}, casting='unsafe'"
    # The keywords of a call into a target (casting='unsafe' once: into od).
    kw = convert or (", casting='unsafe'" if natural != od else "")

    def expr(a, ins):
        if a.const is not None:
            return a.const
        name = ins[a.value]
        return f"{name}.astype({a.cast})" if a.cast and not convert else name

    def finish(e):
        if out_ndim == 0:
            return f"{asarray}({e}, {odn})"
        return f"{e}.astype({odn})" if natural != od else e

    def fresh(uf, ufn, es):
        return f"{ufn}({', '.join(es)}{convert})" if convert else _fresh_call(uf, ufn, es)

    def emit(ins, outs, target):
        o = outs[0]
        es = [expr(a, ins) for a in args]
        if not chain:
            if target is not None:
                return [f"{o} = {ufns[0]}({', '.join(es)}, out={target}{kw})"]
            return [f"{o} = {finish(fresh(ufs[0], ufns[0], es))}"]
        if target is not None:
            lines = [f"{o} = {ufns[0]}({es[0]}, {es[1]}, out={target}{kw})"]
            lines += [f"{u}({o}, {e}, out={o}{kw})" for u, e in zip(ufns[1:], es[2:])]
            return lines
        lines = [f"{o} = {fresh(ufs[0], ufns[0], es[:2])}"]
        lines += [f"{o} = {fresh(uf, u, [o, e])}" for uf, u, e in zip(ufs[1:], ufns[1:], es[2:])]
        if out_ndim == 0 or natural != od:
            lines.append(f"{o} = {finish(o)}")
        return lines

    # An input may be overwritten when it is read before the output is written: any
    # input of a one-call ufunc; only the first two of a chain, and only when they are
    # not read again later in the chain.
    inplace = []
    for pos, a in enumerate(args):
        if a.const is not None or a.cast is not None or in_dtypes[pos] != od:
            continue
        if chain and (pos >= 2 or any(b.value == a.value for b in args[2:])):
            continue
        inplace.append((0, a.value))
    return Step(
        node,
        (out_id,),
        values,
        emit,
        inplace=sorted(set(inplace)),
        elementwise=True,
        const_shapes=const_shapes,
        dtypes=(od,),
    )


def _compute_step(ctx, node, sop, items, in_dtypes, out_id, od, out_ndim):
    """A scalar op numpy has no single ufunc for: ``sop.compute`` (fresh arrays)."""
    values, parts = [], []
    for item in items:
        if isinstance(item, tuple):
            parts.append(("c", ctx.const(np.asarray(item[1]), "k")))
        else:
            if item not in values:
                values.append(item)
            parts.append(("v", values.index(item)))
    fn = ctx.glob(_compute_fn(sop, od), "S")
    copyto = ctx.glob(np.copyto, "copyto")
    const_shapes = [np.shape(item[1]) for item in items if isinstance(item, tuple)]

    def emit(ins, outs, target):
        es = [n if k == "c" else ins[n] for k, n in parts]
        o = outs[0]
        call = f"{fn}({', '.join(es)})"
        if target is None:
            return [f"{o} = {call}"]
        return [f"{copyto}({target}, {call}, casting='unsafe')", f"{o} = {target}"]

    return Step(
        node,
        (out_id,),
        values,
        emit,
        elementwise=True,
        const_shapes=const_shapes,
        prefer_fresh=True,
        dtypes=(od,),
    )


def _compute_fn(sop, od):
    out_dtypes = [od]
    compute = sop.compute
    ndarray = np.ndarray

    def run(*xs):
        r = compute(list(xs), out_dtypes)[0]
        # A compute may return a view of an input (Second's fill broadcasts it): the
        # step's value must be an array of its own, which may reach the caller or be
        # written over by a later step.
        if r.__class__ is ndarray and (r.base is not None or not r.flags.writeable):
            r = np.array(r, dtype=od)
        return r

    return run


def _copy_steps(ctx, node, x, out_id, od):
    """``out = x`` cast to ``od`` (Identity, Cast, Second's broadcast fill)."""
    copyto = ctx.glob(np.copyto, "copyto")
    odn = ctx.glob(np.dtype(od), "D")
    asarray = ctx.glob(np.array, "array")

    def emit(ins, outs, target):
        o = outs[0]
        if target is None:
            return [f"{o} = {asarray}({ins[0]}, dtype={odn})"]
        return [f"{copyto}({target}, {ins[0]}, casting='unsafe')", f"{o} = {target}"]

    # Elementwise: a fill (Second) broadcasts x to a bigger shape, so it needs a target.
    return Step(node, (out_id,), (x,), emit, elementwise=True, dtypes=(od,))


def _is_float_to_int_cast(sop, in_dtype) -> bool:
    """Whether scalar op ``sop`` on ``in_dtype`` is a cast from a float to an integer
    that numpy's ``astype`` does not do by the engines' rule on this machine (see
    ``ts.cast_array`` and ``ts.astype_keeps_rule``)."""
    return (
        type(sop) is ts.Cast
        and np.dtype(in_dtype).kind == "f"
        and np.dtype(sop.o_type).kind in "iu"
        and not ts.astype_keeps_rule(in_dtype, sop.o_type)
    )


def _cast_steps(ctx, node, x, out_id, od):
    """``out = x`` cast from a float to the integer ``od`` by the rule (``ts.cast_array``)."""
    cast = ctx.glob(ts.cast_array, "cast_array")
    odn = ctx.glob(np.dtype(od), "D")

    def emit(ins, outs, target):
        o = outs[0]
        if target is None:
            return [f"{o} = {cast}({ins[0]}, {odn})"]
        return [f"{o} = {cast}({ins[0]}, {odn}, {target})"]

    return Step(node, (out_id,), (x,), emit, elementwise=True, dtypes=(od,))


def _expand_elemwise(node, ctx):
    op = node.op
    sop = op.scalar_op
    if len(node.outputs) != 1 and not _is_composite(sop):
        return None
    destroy = dict(getattr(op, "inplace_pattern", {}) or {})
    out_ndim = node.outputs[0].type.ndim
    items = [("const", ctx.value_of(v)) if ctx.is_const(v) else v for v in node.inputs]
    in_dtypes = [v.type.dtype for v in node.inputs]
    if _is_composite(sop):
        steps = _composite_steps(ctx, node, sop, items, out_ndim)
    else:
        od = node.outputs[0].type.dtype
        x = node.outputs[0]
        if _is_float_to_int_cast(sop, in_dtypes[0]):
            if isinstance(items[0], tuple):
                return None
            steps = [_cast_steps(ctx, node, items[0], x, od)]
        elif type(sop) in (
            getattr(ts, "Identity", None),
            getattr(ts, "Cast", None),
        ):
            if isinstance(items[0], tuple):
                return None
            steps = [_copy_steps(ctx, node, items[0], x, od)]
        elif type(sop) is getattr(ts, "Second", None):
            if isinstance(items[1], tuple):
                return None
            steps = [_copy_steps(ctx, node, items[1], x, od)]
        else:
            steps = [elementwise_step(ctx, node, sop, items, in_dtypes, x, od, out_ndim)]
    if steps is None:
        return None
    if destroy:
        # Written over the destroyed input: a final step copies the result there unless
        # the last step can write there itself.
        return _destroying(ctx, node, steps, destroy)
    return steps


def _destroying(ctx, node, steps, destroy):
    """Make the last step of an inplace Elemwise write its output over the destroyed input."""
    if len(destroy) != 1 or len(node.outputs) != 1:
        return None
    ((_, i),) = destroy.items()
    last = steps[-1]
    base = node.inputs[i]
    if last.kind != "out" or isinstance(base, Constant):
        return None
    if base in last.inputs:
        # The step must read the input before writing over it.
        p = last.inputs.index(base)
        if not (last.prefer_fresh or (0, p) in last.inplace):
            return None
        inputs = last.inputs
    else:
        inputs = last.inputs + (base,)
    k = inputs.index(base)
    n_own = len(last.inputs)
    inner = last.emit

    def emit(ins, outs, target):
        return inner(ins[:n_own], outs, ins[k])

    steps[-1] = Step(
        node, last.outputs, inputs, emit, kind="view", views={0: k}, dtypes=last.dtypes
    )
    return steps


def _is_composite(sop):
    nodes = getattr(sop, "nodes", None)
    return nodes is not None and hasattr(sop, "inputs") and hasattr(sop, "outputs")


def _composite_steps(ctx, node, comp, items, out_ndim, out_ids=None):
    """One elementwise step per scalar node of ``comp``; its outputs are ``out_ids``
    (default: the node's outputs)."""
    outs = list(comp.outputs)
    if len(set(outs)) != len(outs):
        return None
    env = dict(zip(comp.inputs, items))
    final = dict(zip(outs, node.outputs if out_ids is None else out_ids))
    for o in outs:
        if o.owner is None:  # an output that is an input or a constant
            return None
    steps = []
    for k, inode in enumerate(comp.nodes):
        if len(inode.outputs) != 1 or _is_composite(inode.op):
            return None
        o = inode.outputs[0]
        args = []
        for v in inode.inputs:
            if isinstance(v, Constant):
                args.append(("const", v.data))
            else:
                args.append(env[v])
        in_dtypes = [v.type.dtype for v in inode.inputs]
        od = o.type.dtype
        out_id = final.get(o)
        if out_id is None:
            out_id = ctx.temp(od, f"{inode.op}#{k}")
        nd = out_ndim if o in final else None
        step = elementwise_step(ctx, node, inode.op, args, in_dtypes, out_id, od, nd)
        steps.append(step)
        env[o] = out_id
    return steps


register_impl(Elemwise)(_expand_elemwise)


def make_steps(node, ctx):
    """The steps running ``node``: its registered emitter's, else a ``perform`` call."""
    fn = get_impl(node.op)
    steps = None
    if fn is not None:
        try:
            steps = fn(node, ctx)
        except NotImplementedError:
            steps = None
    if steps is None:
        steps = call_steps(node, ctx)
    return steps


# The emitters of the other ops register themselves (kept in their own module).
from theano_dag.engines.cpu.emit import conv as _conv  # noqa: E402, F401
from theano_dag.engines.cpu.emit import emitters as _emitters  # noqa: E402, F401
