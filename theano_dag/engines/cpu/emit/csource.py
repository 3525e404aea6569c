"""C source of fused elementwise kernels: one C function per ``Elemwise`` node.

Each kernel is a loop body over contiguous arrays (``kN_body``, vectorized with
``#pragma omp simd``) and an entry point ``int kN(PyObject *a0, ..., PyObject *o0)``
that reads the numpy arrays' data, shape and strides itself (at byte offsets
measured once per process, see :func:`array_layout`) and hands them to the
shared driver ``td_run`` of the preamble (``int kN_v(void **operands)`` is the same
entry taking an array of operands: a segment of kernels runs by one call through it,
see :mod:`theano_dag.engines.cpu.native.segment`):

* all operands contiguous and of the output's shape: one flat loop, split over
  OpenMP threads when the work is large enough;
* otherwise (broadcast, strided, transposed operands): the output's elements in
  C order, in blocks; an operand contiguous in that order is read in place, one
  broadcast from a single element fills a buffer once, others are gathered into
  (outputs scattered from) a buffer a run of the innermost axis at a time: the
  step library's ``td_general``, which a kernel library is given once both are
  loaded (until then such a call returns an error code and numpy runs it).

The scalar C comes from each scalar op's C expression (``op.c_code``), except
for the few below whose plain C differs from numpy (integer division and
remainder by 0 or -1, float floor division and remainder on signed zeros and
exact multiples), which call helper functions of the preamble.
"""

from __future__ import annotations

import ctypes
import re
import struct

import numpy as np

from theano_dag import scalar as ts
from theano_dag.config import config
from theano_dag.engines.cpu.native import c_source, cc
from theano_dag.graph.basic import Constant
from theano_dag.scalar.basic import C_TYPES, warn_theano_c_code

__all__ = [
    "NotCompilable",
    "DTYPE_CODES",
    "array_layout",
    "preamble",
    "steps_source",
    "kernel_source",
]


class NotCompilable(Exception):
    """This node has no C kernel (an op without a C expression, an unsupported dtype)."""


# Dtype codes shared by the preamble's descriptor table and the kernels.
DTYPE_CODES = {
    d: k
    for k, d in enumerate(
        ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
         "float32", "float64"]
    )
}  # fmt: skip
_SIGNED = ("int8", "int16", "int32", "int64")
_UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
_FLOATS = ("float32", "float64")
_SUFFIX = {d: d.replace("uint", "u").replace("int", "i").replace("float", "f") for d in C_TYPES}

_LAYOUT = []


def array_layout():
    """Byte offsets of an ndarray's type, data, nd, dims, strides and descr fields,
    measured on a live array and checked; None when they cannot be trusted.

    >>> lay = array_layout()
    >>> lay is None or sorted(lay) == ['data', 'descr', 'dims', 'nd', 'strides', 'type']
    True
    """
    if _LAYOUT:
        return _LAYOUT[0]
    layout = None
    try:
        layout = _measure_layout()
    except Exception:  # an unknown object layout: C kernels stay off
        layout = None
    _LAYOUT.append(layout)
    return layout


def _words(obj, n):
    return struct.unpack(f"{n}P", ctypes.string_at(id(obj), n * ctypes.sizeof(ctypes.c_void_p)))


def _measure_layout():
    w = ctypes.sizeof(ctypes.c_void_p)
    a = np.empty((3, 5), dtype=np.float64)
    words = _words(a, 12)
    data = words.index(a.ctypes.data)
    tp = words.index(id(np.ndarray))
    descr = words.index(id(a.dtype))
    lay = {"type": tp * w, "data": data * w, "nd": (data + 1) * w, "dims": (data + 2) * w,
           "strides": (data + 3) * w, "descr": descr * w}  # fmt: skip
    # Check every field on arrays of other shapes, dtypes and strides.
    for b in (np.zeros((2, 3, 4), np.float32)[:, ::2], np.zeros(7, np.int8), np.zeros(())):
        ws = _words(b, 12)
        if ws[lay["type"] // w] != id(np.ndarray) or ws[lay["data"] // w] != b.ctypes.data:
            return None
        if ws[lay["descr"] // w] != id(b.dtype):
            return None
        nd = ctypes.c_int.from_address(id(b) + lay["nd"]).value
        if nd != b.ndim:
            return None
        if b.ndim:
            dims = (ctypes.c_ssize_t * b.ndim).from_address(ws[lay["dims"] // w])
            strides = (ctypes.c_ssize_t * b.ndim).from_address(ws[lay["strides"] // w])
            if tuple(dims) != b.shape or tuple(strides) != b.strides:
                return None
    return lay


def c_literal(value, dtype) -> str:
    """A C literal of ``value`` as ``dtype`` (any int64, NaN, inf and -0.0 included).

    >>> c_literal(-2**63, "int64"), c_literal(-0.0, "float32"), c_literal(7, "uint8")
    ('(-9223372036854775807LL - 1)', '((float)-0.0)', '((unsigned char)7ULL)')
    """
    v = np.asarray(value).astype(dtype)[()]
    t = C_TYPES[dtype]
    if dtype == "bool":
        return "1" if v else "0"
    if dtype in _FLOATS:
        if np.isnan(v):
            return f"(({t})NAN)"
        if np.isinf(v):
            return f"(({t})INFINITY)" if v > 0 else f"(-({t})INFINITY)"
        return f"(({t}){float(v)!r})"
    i = int(v)
    if dtype in _UNSIGNED:
        return f"(({t}){i}ULL)"
    if -(2**31) < i < 2**31:
        return str(i)  # an int: C promotes the small types to int anyway
    if i == -(2**63):
        return "(-9223372036854775807LL - 1)"
    return f"{i}LL"


# -- scalar C with numpy's semantics -------------------------------------------------


def _cast_args(args, in_dtypes, od):
    return [a if d == od else f"(({C_TYPES[od]})({a}))" for a, d in zip(args, in_dtypes)]


def _intdiv_c(op, args, in_dtypes, out_dtypes):
    od = out_dtypes[0]
    if od == "bool" or od not in _SUFFIX:
        return None
    x, y = _cast_args(args, in_dtypes, od)
    return [f"td_floordiv_{_SUFFIX[od]}({x}, {y})"]


def _mod_c(op, args, in_dtypes, out_dtypes):
    od = out_dtypes[0]
    if od == "bool" or od not in _SUFFIX:
        return None
    x, y = _cast_args(args, in_dtypes, od)
    return [f"td_mod_{_SUFFIX[od]}({x}, {y})"]


def _pow_c(op, args, in_dtypes, out_dtypes):
    if out_dtypes[0] not in _FLOATS:
        # numpy raises on negative integer exponents; a C loop cannot, so numpy runs it.
        raise NotCompilable(f"{op} on integers")
    return None


def _clip_c(op, args, in_dtypes, out_dtypes):
    # numpy's minimum(maximum(x, lo), hi) (a NaN argument gives NaN), but lo where
    # x < lo > hi: Theano's rule (ts.Clip)
    od = out_dtypes[0]
    x, lo, hi = _cast_args(args, in_dtypes, od)
    (m,) = scalar_c(ts.maximum, [x, lo], [od, od], [od])
    (m,) = scalar_c(ts.minimum, [m, hi], [od, od], [od])
    return [f"(({x} < {lo} && {lo} > {hi}) ? {lo} : {m})"]


def _fma_c(op, args, in_dtypes, out_dtypes):
    # Rounded twice, as the numpy path computes it (C's fma() rounds once, which differs
    # in the last bit, and where x*y overflows: fma(big, 2, -inf) is -inf, numpy's NaN).
    x, y, z = _cast_args(args, in_dtypes, out_dtypes[0])
    return [f"({x} * {y} + {z})"]


# dtype -> c_literal(0, dtype): the text of a constant zero operand, as the kernels write it.
_ZERO_TEXT: dict = {}


def _is_zero_literal(arg, dtype) -> bool:
    text = _ZERO_TEXT.get(dtype)
    if text is None:
        text = _ZERO_TEXT[dtype] = c_literal(0, dtype)
    return arg == text


def _signed_zero_c(op, args, in_dtypes, out_dtypes):
    """``0.0 - y`` and ``y + 0.0`` (a constant +0, of any dtype) of floats as
    conditionals: GCC 12 folds them into ``-y`` and ``y`` wherever it deduces that ``y``
    is no -0.0 (an integer converted, an ``abs``, ``-(double)i``), even at -O0, but ``y``
    may be +0.0, and ``0.0 - 0.0`` is ``0.0``, ``-(double)0 + 0.0`` is ``0.0`` (numpy's,
    and the kernels' numpy path). None where no operand is such a constant (the op's own
    C)."""
    od = out_dtypes[0]
    zero = [_is_zero_literal(a, d) for a, d in zip(args, in_dtypes)]
    if od not in _FLOATS or not any(zero):
        return None
    xs = _cast_args(args, in_dtypes, od)
    t = C_TYPES[od]
    if isinstance(op, ts.Sub):
        return [f"(({xs[1]}) == 0 ? ({t})0.0 : -({xs[1]}))"] if zero[0] else None
    # a sum, added left to right as C's a + b + c
    acc, acc_zero = xs[0], zero[0]
    for b, b_zero in zip(xs[1:], zero[1:]):
        if b_zero or acc_zero:
            a = acc if b_zero else b
            acc = f"(({a}) == 0 ? ({t})0.0 : ({a}))"
        else:
            acc = f"({acc} + {b})"
        acc_zero = False
    return [acc]


def _overrides():
    return {
        ts.Sub: _signed_zero_c,
        ts.Add: _signed_zero_c,
        ts.IntDiv: _intdiv_c,
        ts.Mod: _mod_c,
        ts.Pow: _pow_c,
        ts.Clip: _clip_c,
        ts.FMA: _fma_c,
    }


_OVERRIDES: dict = {}
# type(op) -> its override (None: the op's own c_code); resolved once per class, as
# the MRO walk costs more than the C expression itself.
_OVERRIDE_OF: dict = {}


def _override_of(cls):
    fn = _OVERRIDE_OF.get(cls, False)
    if fn is False:
        if not _OVERRIDES:
            _OVERRIDES.update(_overrides())
        fn = next((_OVERRIDES[c] for c in cls.__mro__ if c in _OVERRIDES), None)
        _OVERRIDE_OF[cls] = fn
    return fn


def scalar_c(op, args, in_dtypes, out_dtypes) -> list:
    """One C expression per output of scalar ``op`` applied to C expressions ``args``.

    >>> from theano_dag import scalar as ts
    >>> scalar_c(ts.int_div, ["a", "b"], ["int32", "int32"], ["int32"])
    ['td_floordiv_i32(a, b)']
    >>> scalar_c(ts.exp, ["a"], ["float32"], ["float32"])
    ['exp(a)']
    """
    fn = _override_of(type(op))
    if fn is not None:
        r = fn(op, args, in_dtypes, out_dtypes)
        if r is not None:
            return r
    try:
        return op.c_code(args, list(in_dtypes), list(out_dtypes), C_TYPES)
    except NotImplementedError as e:
        raise NotCompilable(f"{op} has no C expression ({e})") from None


# -- scalar ops written for Theano ----------------------------------------------------

_NPY_TYPE = re.compile(r"\bnpy_(bool|u?int(?:8|16|32|64)|float(?:32|64))\b")
# Theano's %(fail)s: the kernels have no way out of the loop, so code using it is not taken.
_FAIL = "td_theano_fail"
# C unit -> None when it compiles, else the compiler's complaint (once per process; the
# library itself is in the kernel cache, so a later process runs no compiler).
_CHECKED: dict = {}


def _theano_block(op, in_dt, out_dt, ins, outs, name) -> str:
    """The user's Theano-form C of ``op`` as one C block: Theano's numpy type names
    defined, the inputs as named constants, the outputs ``outs`` (declared by the
    caller) assigned."""
    node = op.make_node(*[ts.get_scalar_type(d)() for d in in_dt])
    in_names = [f"{name}_i{j}" for j in range(len(in_dt))]
    code = op.theano_c_code(node, name, list(in_names), list(outs), {"fail": _FAIL})
    if not isinstance(code, str):
        raise NotCompilable(f"{op}: c_code returned {type(code).__name__}, expected C source")
    if _FAIL in code:
        raise NotCompilable(f"{op}: its C code can fail, which a kernel loop cannot")
    head = [f"typedef {C_TYPES[t]} npy_{t};" for t in sorted(set(_NPY_TYPE.findall(code)))]
    head += [f"const {C_TYPES[d]} {n} = {a};" for d, n, a in zip(in_dt, in_names, ins)]
    return "{ " + " ".join(head) + "\n" + code + "\n}"


def _theano_code_compiles(op, in_dt, out_dt) -> str | None:
    """None when the Theano-form C of ``op`` compiles on its own (one small library,
    cached like the kernels'), else the compiler's first complaint."""
    params = ", ".join(f"{C_TYPES[d]} p{j}" for j, d in enumerate(in_dt))
    results = ", ".join(f"{C_TYPES[d]} *r{j}" for j, d in enumerate(out_dt))
    outs = [f"td_o{j}" for j in range(len(out_dt))]
    block = _theano_block(op, in_dt, out_dt, [f"p{j}" for j in range(len(in_dt))], outs, "n")
    unit = "\n".join(
        [
            "#include <math.h>",
            "#include <stdint.h>",
            f"void td_check({params}, {results}) {{",
            *[f"{C_TYPES[d]} {o};" for d, o in zip(out_dt, outs)],
            block,
            *[f"*r{j} = {o};" for j, o in enumerate(outs)],
            "}",
        ]
    )
    if unit not in _CHECKED:
        tc = cc.get_toolchain(config.cxx)
        if tc is None:
            _CHECKED[unit] = "no C compiler"
        else:
            try:
                # loaded too: C lets an undeclared function through to the linker
                ctypes.CDLL(cc.compile_library(tc, unit, cc.kernel_dir(config.compiledir)))
                _CHECKED[unit] = None
            except cc.CompileError as e:
                lines = [ln for ln in str(e).splitlines() if "error:" in ln] or [str(e)]
                _CHECKED[unit] = lines[0][lines[0].find("error:") :].strip()
            except OSError as e:  # "<path>: <path>: undefined symbol: f"
                _CHECKED[unit] = str(e).rsplit(".so: ", 1)[-1]
    return _CHECKED[unit]


def theano_statements(op, args, in_dt, out_dt, name, lines) -> list:
    r"""Append the C statements of scalar ``op``, whose ``c_code`` has Theano's form
    (``op.theano_c_code``), applied to C expressions ``args``; return its outputs' C
    names. Code that does not compile on its own, or that can fail, raises
    NotCompilable (the op then runs with its ``impl``, warned once per class).

    >>> from theano_dag import scalar as ts
    >>> class Twice(ts.UnaryScalarOp):
    ...     def impl(self, x):
    ...         return 2 * x
    ...     def c_code(self, node, name, inp, out, sub):
    ...         return f"{out[0]} = 2 * {inp[0]};"
    >>> lines = []
    >>> theano_statements(Twice(ts.upgrade_to_float), ["a0[i]"], ["float64"], ["float64"],
    ...                   "t0", lines)
    ['t0_0']
    >>> print("\n".join(lines))
    double t0_0;
    { const double t0_i0 = a0[i];
    t0_0 = 2 * t0_i0;
    }
    """
    try:
        why = _theano_code_compiles(op, in_dt, out_dt)
    except NotCompilable as e:
        why = str(e)
    if why is not None:
        warn_theano_c_code(op, f"whose C statements do not compile in a kernel ({why})")
        raise NotCompilable(f"{op}: {why}")
    outs = [f"{name}_{j}" for j in range(len(out_dt))]
    lines.extend(f"{C_TYPES[d]} {o};" for d, o in zip(out_dt, outs))
    lines.append(_theano_block(op, in_dt, out_dt, args, outs, name))
    return outs


def _dtype_error(d, what) -> NotCompilable:
    """The error for a value (``what``) of a dtype C kernels do not handle. Callers test
    ``d in DTYPE_CODES`` first: this runs for every scalar of every kernel, and the
    description (it formats graph values) is only worth making for the error."""
    return NotCompilable(f"{what} has dtype {d}, which C kernels do not handle")


def composite_statements(comp, in_exprs, prefix, lines) -> list:
    """Append one typed C temporary per scalar node of ``comp`` to ``lines``; return the
    C expressions of its outputs. Nested Composites are expanded in place."""
    # This runs for every scalar node of every fused kernel when a function is linked,
    # cache hit or not: no per-node closures or generators, one dtype lookup per value.
    names = dict(zip(comp.inputs, in_exprs))
    append = lines.append
    codes = DTYPE_CODES
    for k, node in enumerate(comp.nodes):
        ins, outs, op = node.inputs, node.outputs, node.op
        args = []
        in_dt = []
        bad = None  # the first input's dtype C does not handle (raised after the constants')
        for v in ins:
            d = v.type.dtype
            if isinstance(v, Constant):
                if d not in codes:
                    raise _dtype_error(d, f"constant {v}")
                args.append(c_literal(v.data, d))
            else:
                if bad is None and d not in codes:
                    bad = d
                args.append(names[v])
            in_dt.append(d)
        out_dt = [o.type.dtype for o in outs]
        if bad is not None:
            raise _dtype_error(bad, f"scalar op {op}")
        for d in out_dt:
            if d not in codes:
                raise _dtype_error(d, f"scalar op {op}")
        if hasattr(op, "nodes") and hasattr(op, "inputs"):
            exprs = composite_statements(op, args, f"{prefix}{k}n", lines)
        elif getattr(op, "theano_c_code", None) is not None:
            exprs = theano_statements(op, args, in_dt, out_dt, f"{prefix}{k}t", lines)
        else:
            exprs = scalar_c(op, args, in_dt, out_dt)
        if len(outs) == 1 and exprs:
            name = f"{prefix}{k}"
            append(f"{C_TYPES[out_dt[0]]} {name} = {exprs[0]};")
            names[outs[0]] = name
            continue
        for j, (o, d, e) in enumerate(zip(outs, out_dt, exprs)):
            name = f"{prefix}{k}_{j}"
            append(f"{C_TYPES[d]} {name} = {e};")
            names[o] = name
    exprs = []
    for o in comp.outputs:
        if isinstance(o, Constant):
            d = o.type.dtype
            if d not in DTYPE_CODES:
                raise _dtype_error(d, f"constant {o}")
            exprs.append(c_literal(o.data, d))
        else:
            exprs.append(names[o])
    return exprs


# -- one kernel ------------------------------------------------------------------------

# Per-element cost of scalar ops relative to an add: decides when threads pay off.
_EXPENSIVE = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
              "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh", "sech2",
              "sigmoid", "softplus", "erf", "erfc", "pow"}  # fmt: skip
_MEDIUM = {"true_div", "int_div", "mod", "sqrt", "reciprocal"}
# Elements times cost above which a kernel runs on all OpenMP threads. Waking the
# sleeping workers (OMP_WAIT_POLICY=PASSIVE, see ckernel) took tens of microseconds on
# the 2-core benchmark machine: below this, one thread finishes first (the MLP step's
# 256 x 512 elementwise kernels: 3.23 -> 3.03 ms with 1 << 20 instead of 1 << 18).
PARALLEL_WORK = 1 << 20
MIN_PARALLEL = 4096


def _cost(sop):
    nodes = getattr(sop, "nodes", None)
    if nodes is not None:
        total = 0
        for n in nodes:
            total += _cost(n.op)
        return total or 1
    name = getattr(sop, "name", "")
    return 20 if name in _EXPENSIVE else 4 if name in _MEDIUM else 1


def parallel_threshold(sop) -> int:
    """Output size from which the kernel of ``sop`` splits its loop over threads.

    >>> from theano_dag import scalar as ts
    >>> parallel_threshold(ts.add), parallel_threshold(ts.exp)
    (1048576, 52428)
    """
    return max(MIN_PARALLEL, PARALLEL_WORK // _cost(sop))


def kernel_body(node, arg_pos, consts):
    """``(loop statements, output expressions)`` of the Elemwise ``node``; inputs at
    ``arg_pos`` are read from arrays ``a0, a1, ...``, the others are ``consts``."""
    in_dt = [v.type.dtype for v in node.inputs]
    out_dt = [o.type.dtype for o in node.outputs]
    return _kernel_body(node, arg_pos, consts, in_dt, out_dt)


def _kernel_body(node, arg_pos, consts, in_dt, out_dt):
    sop = node.op.scalar_op
    exprs, lines = [], []
    for p, d in enumerate(in_dt):
        if d not in DTYPE_CODES:
            raise _dtype_error(d, f"input {p} ({node.inputs[p]})")
        if p in consts:
            exprs.append(c_literal(consts[p], d))
        else:
            j = arg_pos.index(p)
            lines.append(f"const {C_TYPES[d]} x{j} = a{j}[i];")
            exprs.append(f"x{j}")
    for o, d in zip(node.outputs, out_dt):
        if d not in DTYPE_CODES:
            raise _dtype_error(d, f"output {o}")
    if hasattr(sop, "nodes") and hasattr(sop, "inputs"):
        outs = composite_statements(sop, exprs, "t", lines)
    elif getattr(sop, "theano_c_code", None) is not None:
        outs = theano_statements(sop, exprs, in_dt, out_dt, "t", lines)
    else:
        outs = scalar_c(sop, exprs, in_dt, out_dt)
    return lines, outs


def kernel_source(name, node, arg_pos, consts) -> str:
    """The C of one kernel: ``name_body`` (the loop), ``name_fn`` and the entry ``name``."""
    outputs = node.outputs
    ndim = outputs[0].type.ndim
    if ndim > 62:
        raise NotCompilable(f"{ndim} dimensions")
    in_types = [v.type for v in node.inputs]
    in_dt = [t.dtype for t in in_types]
    out_dt = [o.type.dtype for o in outputs]
    lines, outs = _kernel_body(node, arg_pos, consts, in_dt, out_dt)
    for j, e in enumerate(outs):
        lines.append(f"o{j}[i] = {e};")
    body = "        " + "\n        ".join(lines) if lines else ""
    # Everything around the loop body depends on a few properties only, which many
    # kernels share: it is made once per process for each combination.
    key = (
        name,
        tuple([in_dt[p] for p in arg_pos]),
        tuple(out_dt),
        tuple([in_types[p].broadcastable for p in arg_pos]),
        ndim,
        parallel_threshold(node.op.scalar_op),
        _turn(in_dt, out_dt, body) if _CALLS_MVEC.search(body) else 0,
    )
    frame = _FRAMES.get(key)
    if frame is None:
        if len(_FRAMES) >= 4096:  # a bound for long-lived processes; rarely reached
            _FRAMES.clear()
        frame = _FRAMES[key] = _kernel_frame(*key)
    return frame[0] + body + frame[1]


_FRAMES: dict = {}


# A call of a function libmvec vectorizes. Such a loop computes whole vectors with the
# vector variant and the elements a vector leaves over with a narrower one or the scalar
# libm function, which differ by an ulp for some arguments (exp(1.0): 2.7182818284590455
# and 2.718281828459045): equal inputs at two places of one array gave unequal outputs,
# and an argsort of them ordered their ties otherwise than numpy. Such a kernel runs its
# loop over whole turns only, the leftover as one more turn over a padded copy; kernels
# of plain arithmetic compute the same bits in every lane and are not padded.
_CALLS_MVEC = re.compile(r"\b(?:" + "|".join(sorted(cc.MVEC_FUNCTIONS)) + r")f?\s*\(")
# A turn: the elements of a 512-bit vector of the loop's smallest type, operands and
# temporaries ("unsigned char", "int"... in the body), which GCC's vectorization factor
# divides (it is the vector's bytes over the smallest type's, on AVX-512 and narrower).
# A turn no longer than it has to be: padding 32 doubles to 64 cost a logistic
# regression's step 12% (benchmarks/small_graphs.py).
_C_WORD_SIZE = {"char": 1, "short": 2, "int": 4, "float": 4}
_C_WORDS = re.compile(r"\b(char|short|int|float)\b")
VECTOR_BYTES = 64


def _turn(in_dt, out_dt, body):
    sizes = [np.dtype(d).itemsize for d in (*in_dt, *out_dt)]
    sizes += [_C_WORD_SIZE[w] for w in set(_C_WORDS.findall(body))]
    return VECTOR_BYTES // min(sizes)


def _kernel_frame(name, in_dtypes, out_dtypes, in_broadcastable, ndim, threshold, turn):
    """The C of a kernel before and after its loop body."""
    nin, nout = len(in_dtypes), len(out_dtypes)
    ctys = [C_TYPES[d] for d in in_dtypes + out_dtypes]
    params = [f"const {ctys[j]} *restrict a{j}" for j in range(nin)]
    params += [f"{ctys[nin + j]} *restrict o{j}" for j in range(nout)]
    casts = [f"(const {ctys[j]} *)p[{j}]" for j in range(nin)]
    casts += [f"({ctys[j]} *)p[{j}]" for j in range(nin, nin + nout)]
    codes = ", ".join([str(DTYPE_CODES[d]) for d in in_dtypes + out_dtypes])
    masks = []
    for bcast in in_broadcastable:
        m = sum(1 << d for d, b in enumerate(bcast) if b)
        masks.append(f"{m:#x}ULL")
    operands = [f"a{j}" for j in range(nin)] + [f"o{j}" for j in range(nout)]
    entry_params = ", ".join(["void *" + a for a in operands])
    loop = "turns" if turn else "fn"
    head = f"""
static __attribute__((noinline)) void {name}_body(ptrdiff_t n, {", ".join(params)})
{{
    #pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) {{
"""
    tail = f"""
    }}
}}

static void {name}_fn(char **p, ptrdiff_t n)
{{
    {name}_body(n, {", ".join(casts)});
}}
{_turns_fn(name, in_dtypes + out_dtypes, nin, turn) if turn else ""}
int {name}_v(void **arrs)
{{
    static const int codes[{nin + nout}] = {{{codes}}};
    static const unsigned long long bcast[{max(nin, 1)}] = {{{", ".join(masks) or "0"}}};
    return td_run({nin}, {nout}, arrs, codes, bcast, {ndim}, {name}_{loop}, {threshold});
}}

int {name}({entry_params})
{{
    void *arrs[{nin + nout}] = {{{", ".join(operands)}}};
    return {name}_v(arrs);
}}
"""
    return head, tail


def _turns_fn(name, dtypes, nin, turn):
    # The loop in whole turns (td_turns, elemwise_driver.c), for a kernel calling libmvec.
    sizes = ", ".join(str(np.dtype(d).itemsize) for d in dtypes)
    return f"""
static void {name}_turns(char **p, ptrdiff_t n)
{{
    static const int es[{len(dtypes)}] = {{{sizes}}};
    td_turns(p, n, {turn}, {nin}, {len(dtypes)}, es, {name}_fn);
}}
"""


# -- the preamble ------------------------------------------------------------------------


def _helpers():
    # Python's floor division and remainder, as numpy gives them: for signed integers
    # x // 0 = x % 0 = 0 and x // -1 = -x wrapping (C's / traps on INT_MIN / -1); for
    # floats numpy's npy_divmod (the quotient from fmod, the remainder with the divisor's
    # sign). One C template per kind of dtype, instantiated per dtype.
    groups = (
        ("floordiv_int.c", _SIGNED),
        ("floordiv_uint.c", _UNSIGNED + ("bool",)),
        ("floordiv_float.c", _FLOATS),
    )
    out = []
    for name, dtypes in groups:
        template = c_source(name).removesuffix("\n")
        for d in dtypes:
            out.append(template.replace("@T@", C_TYPES[d]).replace("@S@", _SUFFIX[d]))
    return "\n".join(out)


def _simd_decls(functions):
    decls = []
    for fn in functions:
        nargs = cc.MVEC_FUNCTIONS[fn]
        dargs = ", ".join(["double"] * nargs)
        fargs = ", ".join(["float"] * nargs)
        decls.append(f"TD_SIMD double ({fn})({dargs}); TD_SIMD float ({fn}f)({fargs});")
    return "\n".join(decls)


def preamble(layout, simd_functions) -> str:
    """The C every kernel library starts with: headers, libmvec declarations,
    numpy-exact helpers and the ``td_run`` driver of the fused kernels (inlined into
    each kernel's entry, so it is compiled with them; its loop over operands that are
    not all contiguous is the step library's)."""
    # The same text for every library of a process: made once per combination.
    key = (tuple(sorted(layout.items())), tuple(simd_functions))
    text = _PREAMBLES.get(key)
    if text is None:
        text = _PREAMBLES[key] = _make_preamble(layout, simd_functions)
    return text


_PREAMBLES: dict = {}

# The C of the step library (``native/*_driver.c``): the loop of the fused kernels over
# operands that are not all contiguous, then the steps every library may call: the sums,
# the small matrix-vector products and subtensor writes, the small linear algebra, the
# softmaxes.
STEP_DRIVERS = (
    "strided_driver.c",
    "sum_driver.c",
    "gemv_driver.c",
    "linalg_driver.c",
    "softmax_driver.c",
)


def steps_source(layout, simd_functions) -> str:
    """The C of the step library (``ckernel.StepLibrary``): the preamble, the kernels'
    loop over strided and broadcast operands (``td_general``) and the fixed C of every
    step that is not a generated kernel (``td_sum_*``, ``td_mv_*``, ``td_chol_*``,
    ``td_softmax_*`` ...). One library per compiler and cache, built once: in each
    kernel library it would cost most of its compile time."""
    drivers = "\n\n".join(c_source(name) for name in STEP_DRIVERS)
    return f"{preamble(layout, simd_functions)}\n\n{drivers}"


def _make_preamble(layout, simd_functions) -> str:
    defines = "\n".join(f"#define TD_OFF_{k.upper()} {v}" for k, v in sorted(layout.items()))
    return f"""/* theano_dag fused elementwise kernels (generated) */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
/* glibc declares libmvec's vector variants only under -ffast-math; declaring them here
   lets GCC vectorize these calls with IEEE semantics intact. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TD_SIMD __attribute__((simd("notinbranch")))
{_simd_decls(simd_functions)}
#endif
/* bytes of the widest vector: a loop calling them runs whole vectors of its smallest
   type (see csource._CALLS_MVEC) */
#define TD_VECTOR_BYTES {VECTOR_BYTES}
/* exp(float) is expf, as numpy computes float32 in float32 */
#include <tgmath.h>

{defines}

{_helpers()}

{c_source("elemwise_driver.c")}"""
