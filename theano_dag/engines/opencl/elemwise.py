"""Elementwise kernels: one OpenCL kernel per ``Elemwise`` node (``Composite`` included).

The loop body comes from the scalar ops' C expressions (``ScalarOp.c_code`` and
``Composite.c_code_statements`` with the OpenCL type names), the same source
of truth as the CPU engine's C kernels. Each node gets up to three kernels:

* a *strided* one: each work-item turns its index into a multi-index and reads
  every input through its own element strides, 0 along broadcast dimensions;
* a *contiguous* one, used when every input is C-contiguous in the output's
  shape (or a single broadcast element): the index is the offset;
* a *vector* one (``floatN`` loads and stores) for graphs made only of
  arithmetic and math functions on one float dtype, which lets a CPU driver
  use its vectorised math library.

Inputs of size one that are constants become literals, except NaN and the infinities
(see :class:`KernelConstants`); 0-d values computed on the host are passed by value.
Outputs are always written contiguously.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from theano_dag import scalar as ts
from theano_dag.engines.opencl.impl import I64, Impl, Unsupported, register_impl
from theano_dag.graph.basic import Constant
from theano_dag.scalar.basic import OPENCL_TYPES, ScalarConstant, get_scalar_type
from theano_dag.scalar.composite import Composite, c_literal
from theano_dag.tensor.elemwise import Elemwise
from theano_dag.tensor.fused import Adagrad

__all__ = ["ElemwiseImpl", "KernelConstants", "elemwise_body", "vectorizable", "uses_double"]

# Scalar ops whose C expressions stay valid when every operand is a floatN vector.
_VECTOR_SAFE = {
    "add", "sub", "mul", "true_div", "neg", "sqr", "exp", "exp2", "log", "log2", "log10",
    "log1p", "expm1", "sqrt", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh",
    "cosh", "tanh", "sech2", "erf", "erfc", "floor", "ceil", "trunc", "identity", "fma",
}  # fmt: skip

VECTOR_WIDTH = {"float32": 8, "float64": 4}

# Safe in C, not in PoCL's float8 maths: one lane near overflow (8.5e37, the argument
# reduction's slow path) spoils the others, and sin(4.7e-38) gave 0.0078, cos 0.99997
# (found by the fuzzer; the scalar functions are right). float32 trigonometry runs the
# scalar kernel.
_VECTOR_UNSAFE = {"float32": {"sin", "cos", "tan"}}


def _scalar_nodes(op):
    return op.nodes if isinstance(op, Composite) else None


def vectorizable(scalar_op, dtypes) -> bool:
    """True when the scalar op (or every node of a Composite) may run on floatN vectors.

    >>> from theano_dag import scalar as ts
    >>> vectorizable(ts.exp, ["float32", "float32"]), vectorizable(ts.lt, ["float32"] * 3)
    (True, False)
    >>> vectorizable(ts.sin, ["float32", "float32"]), vectorizable(ts.sin, ["float64"] * 2)
    (False, True)
    """
    if len(set(dtypes)) != 1 or dtypes[0] not in VECTOR_WIDTH:
        return False
    safe = _VECTOR_SAFE - _VECTOR_UNSAFE.get(dtypes[0], set())
    nodes = _scalar_nodes(scalar_op)
    if nodes is None:
        return getattr(scalar_op, "name", "") in safe
    for n in nodes:
        if getattr(n.op, "name", "") not in safe:
            return False
        # Constants become scalar literals cast to the compute type: fine with vectors.
        used = [v for v in n.inputs if not isinstance(v, Constant)] + list(n.outputs)
        if any(v.type.dtype != dtypes[0] for v in used):
            return False
    return True


class KernelConstants:
    """The constants of one kernel, as its source writes them: a literal, except NaN and
    the infinities, which become scalar arguments (``c0``, ``c1``, ...).

    An OpenCL compiler may fold a call on a constant argument, and folding may not give
    what the function gives at run time: PoCL (3.0, LLVM 14) propagates a constant into
    its library's ``ceil``, ``exp``, ``tanh``..., whose code converts the value to an int
    on the way (undefined in C for NaN: LLVM makes it ``poison``), and returned garbage
    (``ceil(NAN)`` = -2.0000343, 2.9e8...). Passed as arguments, the non-finite values
    reach the functions at run time, as an input's would: right on any conforming
    device, whatever its compiler folds. Finite constants stay literals.

    >>> kc = KernelConstants()
    >>> kc.literal(float("nan"), "float32"), kc.literal(2.5, "float32"), kc.params()
    ('((float)c0)', '((float)2.5)', ['const float c0'])
    """

    def __init__(self):
        self._items = {}  # (dtype, bytes) -> (name, numpy scalar)

    def literal(self, value, dtype, types=OPENCL_TYPES) -> str:
        """The expression of the constant ``value`` of ``dtype`` (``c_literal``'s signature)."""
        v = np.asarray(value).reshape(-1)[0].astype(dtype)
        if v.dtype.kind != "f" or np.isfinite(v):
            return c_literal(v, dtype, types)
        key = (dtype, v.tobytes())
        if key not in self._items:
            self._items[key] = (f"c{len(self._items)}", v)
        return f"(({types[dtype]}){self._items[key][0]})"

    def params(self) -> list:
        """The kernel parameters of the constants taken as arguments."""
        return [f"const {OPENCL_TYPES[v.dtype.name]} {n}" for n, v in self._items.values()]

    def args(self) -> list:
        """Their values, in the order of :meth:`params`."""
        return [v for _, v in self._items.values()]


_LOG1P = re.compile(r"\blog1p\(")


def elemwise_body(
    scalar_op, in_exprs, in_dtypes, out_dtypes, types=OPENCL_TYPES, literal=c_literal
):
    """``(statements, output expressions)`` computing the scalar op with OpenCL types;
    ``literal(value, dtype, types)`` writes a Composite's constants.

    >>> from theano_dag import scalar as ts
    >>> elemwise_body(ts.add, ["x0", "x1"], ["float32", "float32"], ["float32"])
    ([], ['(x0 + x1)'])
    """
    if isinstance(scalar_op, Composite):
        stmts, outs = scalar_op.c_code_statements(in_exprs, types=types, literal=literal)
    else:
        stmts = []
        outs = scalar_op.c_code(in_exprs, list(in_dtypes), list(out_dtypes), types=types)
    # log1p through the program header's td_log1p (context.LOG1P_MACRO: PoCL's log1p
    # flushes subnormal inputs to 0)
    return [_LOG1P.sub("td_log1p(", s) for s in stmts], [_LOG1P.sub("td_log1p(", e) for e in outs]


def uses_double(dtypes, code: str) -> bool:
    """Whether a kernel needs float64 support (a float64 value or a ``double`` in its code).

    >>> uses_double(["float32"], "(float)(x)"), uses_double(["int32"], "pow((double)x, 2)")
    (False, True)
    """
    return "float64" in dtypes or "double" in code


def check_fp64(ctx, node, dtypes, code=""):
    """Raise TypeError naming the dtype and the device if float64 is needed but missing."""
    if ctx.has_fp64 or not uses_double(dtypes, code):
        return
    raise TypeError(
        f"The OpenCL device {ctx.describe()} does not support float64 (no cl_khr_fp64), "
        f"which {node.op} needs ({node}). Use float32 (e.g. config.floatX='float32' and "
        "float32 inputs), or pick a device with float64 via config.opencl__device."
    )


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:12]


class ElemwiseImpl(Impl):
    """Device implementation of ``Elemwise`` (see the module docstring)."""

    def __init__(self, node, ctx, host_scalars=frozenset()):
        super().__init__(node, ctx)
        op = node.op
        self.ndim = node.outputs[0].ndim
        self.in_dtypes = [v.type.dtype for v in node.inputs]
        self.out_dtypes = [v.type.dtype for v in node.outputs]
        for d in self.in_dtypes + self.out_dtypes:
            if d not in OPENCL_TYPES or d == "float16":
                raise Unsupported(f"{op}: dtype {d} has no OpenCL kernel here")
        # How each input reaches the kernel: "lit" (a constant inlined), "arg" (a host
        # scalar passed by value), "one" (a device value of one element), "full".
        self.modes = []
        for k, v in enumerate(node.inputs):
            if isinstance(v, Constant) and np.size(v.data) == 1:
                self.modes.append("lit")
            elif k in host_scalars and all(v.type.broadcastable):
                self.modes.append("arg")
            elif all(v.type.broadcastable):
                self.modes.append("one")
            else:
                self.modes.append("full")
        self.host_inputs = tuple(k for k, m in enumerate(self.modes) if m == "arg")
        self.consts = KernelConstants()
        try:
            names = [self._in_expr(k) for k in range(len(node.inputs))]
            stmts, outs = elemwise_body(
                op.scalar_op,
                names,
                self.in_dtypes,
                self.out_dtypes,
                literal=self.consts.literal,
            )
        except (NotImplementedError, KeyError, TypeError) as e:
            raise Unsupported(f"{op}: its scalar op has no OpenCL expression ({e})") from None
        self.stmts, self.out_exprs = stmts, outs
        check_fp64(ctx, node, self.in_dtypes + self.out_dtypes, "\n".join(stmts + outs))
        body = "\n".join(stmts + outs)
        self.scalar_op = op.scalar_op
        self.tag = _digest(repr((self.in_dtypes, self.out_dtypes, self.modes, self.ndim, body)))
        self.vector = vectorizable(op.scalar_op, self.in_dtypes + self.out_dtypes) and all(
            m in ("full", "lit") for m in self.modes
        )

    # -- code generation --------------------------------------------------------

    def _in_expr(self, k):
        if self.modes[k] == "lit":
            v = self.node.inputs[k]
            return self.consts.literal(v.data, v.type.dtype)
        return f"x{k}"

    def _params(self, strided: bool, vector: bool = False):
        ps = ["const long n"]
        if strided:
            ps += [f"const long d{j}" for j in range(1, self.ndim)]
        for k, (m, d) in enumerate(zip(self.modes, self.in_dtypes)):
            t = OPENCL_TYPES[d]
            if m == "arg":
                ps.append(f"const {t} a{k}")
            elif m in ("one", "full"):
                ps += [f"__global const {t}* p{k}", f"const long o{k}"]
                if strided and m == "full":
                    ps += [f"const long s{k}_{j}" for j in range(self.ndim)]
        ps += self.consts.params()
        for j, d in enumerate(self.out_dtypes):
            ps += [f"__global {OPENCL_TYPES[d]}* q{j}", f"const long u{j}"]
        return ", ".join(ps)

    def _loads(self, strided: bool, width: int = 0):
        lines = []
        if strided and self.ndim:
            lines.append("    long r = gid;")
            for j in range(self.ndim - 1, 0, -1):
                lines.append(f"    const long i{j} = r % d{j}; r /= d{j};")
            lines.append("    const long i0 = r;")
        for k, (m, d) in enumerate(zip(self.modes, self.in_dtypes)):
            t = OPENCL_TYPES[d]
            if m == "arg":
                lines.append(f"    const {t} x{k} = a{k};")
            elif m == "one":
                lines.append(f"    const {t} x{k} = p{k}[o{k}];")
            elif m == "full" and width:
                lines.append(f"    const {t}{width} x{k} = vload{width}(0, p{k} + o{k} + gid);")
            elif m == "full" and strided:
                idx = "".join(f" + i{j} * s{k}_{j}" for j in range(self.ndim))
                lines.append(f"    const {t} x{k} = p{k}[o{k}{idx}];")
            elif m == "full":
                lines.append(f"    const {t} x{k} = p{k}[o{k} + gid];")
        return lines

    def _stores(self, width: int = 0):
        stmts = self.stmts
        if width:
            # The same graph with every float of the (single) dtype a floatN vector.
            d = self.out_dtypes[0]
            vtypes = dict(OPENCL_TYPES, **{d: f"{OPENCL_TYPES[d]}{width}"})
            names = [self._in_expr(k) for k in range(len(self.node.inputs))]
            stmts, outs = elemwise_body(
                self.scalar_op,
                names,
                self.in_dtypes,
                self.out_dtypes,
                vtypes,
                literal=self.consts.literal,
            )
            lines = ["    " + s for s in stmts]
            for j, e in enumerate(outs):
                lines.append(f"    vstore{width}({e}, 0, q{j} + u{j} + gid);")
            return lines
        lines = ["    " + s for s in stmts]
        for j, (e, d) in enumerate(zip(self.out_exprs, self.out_dtypes)):
            t = OPENCL_TYPES[d]
            if width:
                lines.append(f"    vstore{width}(({t}{width})({e}), 0, q{j} + u{j} + gid);")
            else:
                lines.append(f"    q{j}[u{j} + gid] = ({t})({e});")
        return lines

    def _kernel(self, name, strided, width=0):
        head = f"__kernel void {name}({self._params(strided, bool(width))})\n{{\n"
        if width:
            # Each work-item handles `width` consecutive elements; the tail is left to
            # the scalar contiguous kernel.
            guard = f"    const long gid = get_global_id(0) * {width};\n    if (gid >= n) return;\n"
        else:
            guard = "    const long gid = get_global_id(0);\n    if (gid >= n) return;\n"
        body = "\n".join(self._loads(strided, width) + self._stores(width))
        return head + guard + body + "\n}\n"

    def sources(self):
        base = f"ew_{self.tag}"
        out = {
            base + "_s": self._kernel(base + "_s", True),
            base + "_c": self._kernel(base + "_c", False),
        }
        if self.vector:
            w = VECTOR_WIDTH[self.in_dtypes[0] if self.in_dtypes else self.out_dtypes[0]]
            out[base + "_v"] = self._kernel(base + "_v", False, w)
        return out

    # -- running ----------------------------------------------------------------

    def inplace_pairs(self):
        pairs = []
        out_b = self.node.outputs[0].type.broadcastable
        for j, o in enumerate(self.node.outputs):
            for k, v in enumerate(self.node.inputs):
                if (
                    self.modes[k] == "full"
                    and v.type.broadcastable == out_b
                    and v.type.dtype == o.type.dtype
                ):
                    pairs.append((j, k))
        return pairs

    def _out_shape(self, inputs):
        shapes = [x.shape for x, m in zip(inputs, self.modes) if m in ("one", "full")]
        out = []
        for d in range(self.ndim):
            lengths = {s[d] for s in shapes}
            rest = lengths - {1}
            if len(rest) > 1:
                raise ValueError(
                    f"{self.node.op}: input shapes {shapes} do not match along " f"dimension {d}"
                )
            if rest and len(lengths) > 1:
                full = [k for k, m in enumerate(self.modes) if m == "full"]
                refuse_undeclared_broadcast(self.node, inputs, d, full, shapes)
            out.append(rest.pop() if rest else 1)
        return tuple(out)

    def run(self, inputs, out):
        shape = self._out_shape(inputs)
        n = int(np.prod(shape)) if shape else 1
        outs = [out(j, shape, d) for j, d in enumerate(self.out_dtypes)]
        contiguous = all(
            m != "full" or (x.shape == shape and x.is_c_contiguous)
            for x, m in zip(inputs, self.modes)
        )
        base = f"ew_{self.tag}"
        if contiguous:
            start = 0
            if self.vector:
                w = VECTOR_WIDTH[self.in_dtypes[0] if self.in_dtypes else self.out_dtypes[0]]
                nv = n // w
                if nv:
                    self.launch(base + "_v", (nv,), self._args(inputs, outs, nv * w, False, 0))
                start = nv * w
            if start < n:
                self.launch(
                    base + "_c", (n - start,), self._args(inputs, outs, n - start, False, start)
                )
        else:
            self.launch(base + "_s", (n,), self._args(inputs, outs, n, True, 0, shape))
        return outs

    def _args(self, inputs, outs, n, strided, start, shape=()):
        args = [I64(n)]
        if strided:
            args += [I64(d) for d in shape[1:]]
        for k, (x, m) in enumerate(zip(inputs, self.modes)):
            if m == "arg":
                args.append(np.asarray(x).reshape(-1)[0].astype(self.in_dtypes[k]))
            elif m == "one":
                args += [x.data, I64(x.elem_offset)]
            elif m == "full":
                args += [x.data, I64(x.elem_offset + (start if not strided else 0))]
                if strided:
                    st = x.elem_strides()
                    args += [I64(0 if x.shape[j] == 1 else st[j]) for j in range(self.ndim)]
        args += self.consts.args()
        for y in outs:
            args += [y.data, I64(y.elem_offset + start)]
        return args


def _elemwise_factory(node, ctx, host_scalars=frozenset()):
    return ElemwiseImpl(node, ctx, host_scalars)


_elemwise_factory.takes_host_scalars = True


def _adagrad_factory(node, ctx, host_scalars=frozenset()):
    """``Adagrad(eps)`` as the Composite ``(acc + g*g, g / sqrt(acc + g*g + eps))``."""

    dtype = node.outputs[0].type.dtype
    acc, g = (get_scalar_type(v.type.dtype)() for v in node.inputs)
    eps = ScalarConstant(get_scalar_type(dtype), np.asarray(node.op.eps, dtype=dtype)[()])
    new_acc = ts.add(acc, ts.mul(g, g))
    step = ts.true_div(g, ts.sqrt(ts.add(new_acc, eps)))
    proxy = Elemwise(Composite([acc, g], [new_acc, step])).make_node(*node.inputs)
    impl = ElemwiseImpl(proxy, ctx, host_scalars)
    impl.node = node
    return impl


_adagrad_factory.takes_host_scalars = True


def _install():
    register_impl(Elemwise)(_elemwise_factory)
    register_impl(Adagrad)(_adagrad_factory)


_install()


def refuse_undeclared_broadcast(node, inputs, d, which, shapes):
    """Raise where one of the inputs ``which`` has length 1 along ``d``, which other
    inputs do not have, and is not declared broadcastable there (the broadcast follows
    the type, as on the other engines)."""
    for k in which:
        if inputs[k].shape[d] == 1 and not node.inputs[k].type.broadcastable[d]:
            raise ValueError(
                f"{node.op}: input shapes {shapes} differ along dimension {d}, "
                f"and input {k} has length 1 there but is not declared broadcastable"
            )
