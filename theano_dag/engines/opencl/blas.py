"""Matrix products: one GEMM kernel for Dot, Dot22, Dot22Scalar, Gemm, Gemv and Ger.

Every product is ``C = alpha * A @ B + beta * Z`` with ``A`` (M, K), ``B`` (K, N)
and ``Z`` (M, N) read through element strides, so vectors (stride 0 along the
added dimension) and transposed views need no copies. ``C`` is written
contiguously. Two kernels: a tiled one (16x16 tiles in local memory), used when
both M and N are at least a tile; and a direct one (one work-item per output
element, a plain loop over K) for thin products such as matrix-vector.
Scalars (``alpha``, ``beta``) are literals when constant, values passed by
value when on the host, and read from the device otherwise.
"""

from __future__ import annotations

import numpy as np

from theano_dag.engines.opencl.elemwise import _digest, check_fp64
from theano_dag.engines.opencl.impl import I64, Impl, Unsupported, register_impl
from theano_dag.graph.basic import Constant
from theano_dag.scalar.basic import OPENCL_TYPES
from theano_dag.scalar.composite import c_literal

__all__ = ["GemmImpl", "TILE"]

TILE = 16


class GemmImpl(Impl):
    """See the module docstring; ``kind`` says which op's inputs map to A, B, Z, alpha, beta."""

    def __init__(self, node, ctx, host_scalars=frozenset()):
        super().__init__(node, ctx)
        from theano_dag.tensor.blas import Dot22, Dot22Scalar, Gemm, Gemv, Ger
        from theano_dag.tensor.math import Dot

        op = node.op
        ins = node.inputs
        # Input positions of A, B, Z, alpha, beta (None: absent).
        if isinstance(op, Gemm):
            self.pos = (2, 3, 0, 1, 4)
        elif isinstance(op, Gemv):
            self.pos = (2, 3, 0, 1, 4)
        elif isinstance(op, Ger):
            self.pos = (2, 3, 0, 1, None)
        elif isinstance(op, Dot22Scalar):
            self.pos = (0, 1, None, 2, None)
        elif isinstance(op, (Dot, Dot22)):
            self.pos = (0, 1, None, None, None)
        else:  # pragma: no cover - registered classes only
            raise Unsupported(f"{op}: not a product")
        self.is_ger = isinstance(op, Ger)
        self.out_dtype = node.outputs[0].type.dtype
        dtypes = [v.type.dtype for v in ins] + [self.out_dtype]
        for d in dtypes:
            if d not in OPENCL_TYPES or d in ("float16", "bool"):
                raise Unsupported(f"{op}: dtype {d}")
        check_fp64(ctx, node, dtypes)
        self.modes = {}
        for role, p in zip(("alpha", "beta"), self.pos[3:]):
            if p is None:
                continue
            v = ins[p]
            if isinstance(v, Constant):
                self.modes[role] = "lit"
            elif p in host_scalars:
                self.modes[role] = "arg"
            else:
                self.modes[role] = "dev"
        self.host_inputs = tuple(self.pos[3 + i] for i, r in enumerate(("alpha", "beta"))
                                 if self.modes.get(r) == "arg")
        key = repr((dtypes, self.pos, self.modes, self.is_ger, self._literals()))
        self.name = "gemm_" + _digest(key)

    def _literals(self):
        out = {}
        for role, p in zip(("alpha", "beta"), self.pos[3:]):
            if self.modes.get(role) == "lit":
                v = self.node.inputs[p]
                out[role] = c_literal(np.asarray(v.data).reshape(-1)[0], self.out_dtype,
                                      OPENCL_TYPES)
        return out

    # -- code -----------------------------------------------------------------------

    def _params(self):
        ins = self.node.inputs
        t = lambda p: OPENCL_TYPES[ins[p].type.dtype]  # noqa: E731
        a, b, z = self.pos[:3]
        ps = ["const long M", "const long N", "const long K"]
        ps += [f"__global const {t(a)}* A", "const long ao", "const long sa0", "const long sa1"]
        ps += [f"__global const {t(b)}* B", "const long bo", "const long sb0", "const long sb1"]
        if z is not None:
            ps += [f"__global const {t(z)}* Z", "const long zo", "const long sz0",
                   "const long sz1"]
        for role, p in zip(("alpha", "beta"), self.pos[3:]):
            m = self.modes.get(role)
            if m == "arg":
                ps.append(f"const {t(p)} {role}_v")
            elif m == "dev":
                ps += [f"__global const {t(p)}* {role}_p", f"const long {role}_o"]
        ps += [f"__global {OPENCL_TYPES[self.out_dtype]}* C", "const long co"]
        return ", ".join(ps)

    def _scalars(self):
        tc = OPENCL_TYPES[self.out_dtype]
        lits = self._literals()
        lines = []
        for role, default in (("alpha", f"(({tc})1)"), ("beta", f"(({tc})1)")):
            m = self.modes.get(role)
            if m == "lit":
                e = lits[role]
            elif m == "arg":
                e = f"({tc}){role}_v"
            elif m == "dev":
                e = f"({tc}){role}_p[{role}_o]"
            else:
                e = default
            lines.append(f"    const {tc} {role} = {e};")
        return lines

    def _store(self):
        tc = OPENCL_TYPES[self.out_dtype]
        if self.pos[2] is None:
            val = "alpha * acc"
        elif self.is_ger:
            val = "Z[zo + i * sz0 + j * sz1] + alpha * acc"
        else:
            # b == 0 ignores z entirely (it may hold NaN), as the reference does.
            val = "(beta == 0 ? alpha * acc : beta * Z[zo + i * sz0 + j * sz1] + alpha * acc)"
        return f"C[co + i * N + j] = ({tc})({val});"

    def sources(self):
        tc = OPENCL_TYPES[self.out_dtype]
        direct = "\n".join([
            f"__kernel void {self.name}_d({self._params()})",
            "{",
            "    const long i = get_global_id(0), j = get_global_id(1);",
            "    if (i >= M || j >= N) return;",
            *self._scalars(),
            f"    {tc} acc = 0;",
            "    for (long k = 0; k < K; ++k)",
            f"        acc += ({tc})A[ao + i * sa0 + k * sa1] * ({tc})B[bo + k * sb0 + j * sb1];",
            "    " + self._store(),
            "}",
        ])
        tiled = "\n".join([
            f"__kernel void {self.name}_t({self._params()})",
            "{",
            f"    __local {tc} As[{TILE}][{TILE}];",
            f"    __local {tc} Bs[{TILE}][{TILE + 1}];",
            "    const int li = get_local_id(0), lj = get_local_id(1);",
            "    const long i = get_global_id(0), j = get_global_id(1);",
            "    const long i0 = get_group_id(0) * " + str(TILE) + ";",
            "    const long j0 = get_group_id(1) * " + str(TILE) + ";",
            *self._scalars(),
            f"    {tc} acc = 0;",
            f"    for (long k0 = 0; k0 < K; k0 += {TILE}) {{",
            # Work-item (li, lj) loads A[i0+li, k0+lj] and B[k0+li, j0+lj].
            f"        As[li][lj] = (i < M && k0 + lj < K) ? ({tc})A[ao + i * sa0 + (k0 + lj) * sa1]"
            " : 0;",
            f"        Bs[li][lj] = (k0 + li < K && j0 + lj < N) ? "
            f"({tc})B[bo + (k0 + li) * sb0 + (j0 + lj) * sb1] : 0;",
            "        barrier(CLK_LOCAL_MEM_FENCE);",
            f"        for (int kk = 0; kk < {TILE}; ++kk) acc += As[li][kk] * Bs[kk][lj];",
            "        barrier(CLK_LOCAL_MEM_FENCE);",
            "    }",
            "    if (i < M && j < N) " + self._store(),
            "}",
        ])
        return {self.name + "_d": direct + "\n", self.name + "_t": tiled + "\n"}

    # -- running --------------------------------------------------------------------

    @staticmethod
    def _as_matrix(x, role):
        """(rows, cols, row stride, col stride) in elements; vectors become a row/column."""
        st = x.elem_strides()
        if x.ndim == 2:
            return x.shape[0], x.shape[1], st[0], st[1]
        if x.ndim == 1:
            if role == "A":  # a vector on the left is one row
                return 1, x.shape[0], 0, st[0]
            return x.shape[0], 1, st[0], 0  # on the right or as Z: one column
        return 1, 1, 0, 0

    def run(self, inputs, out):
        op = self.node.op
        pa, pb, pz = self.pos[:3]
        a, b = inputs[pa], inputs[pb]
        if self.is_ger:  # A + alpha * outer(x, y): x a column, y a row, K = 1
            m, n, k = a.shape[0], b.shape[0], 1
            sa0, sa1 = a.elem_strides()[0], 0
            sb0, sb1 = 0, b.elem_strides()[0]
        else:
            m, k, sa0, sa1 = self._as_matrix(a, "A")
            k2, n, sb0, sb1 = self._as_matrix(b, "B")
            if k != k2:
                raise ValueError(f"{op}: shapes {a.shape} and {b.shape} are not aligned "
                                 f"({k} != {k2})")
        out_shape = self.node.outputs[0].type.ndim
        if pz is not None:
            z = inputs[pz]
            shape = z.shape
            if tuple(z.shape) != ((m, n) if z.ndim == 2 else (m,)):
                raise ValueError(f"{op}: incompatible shapes: z {z.shape}, operands "
                                 f"{a.shape} and {b.shape}")
        else:
            shape = tuple(([m] if a.ndim == 2 else []) + ([n] if b.ndim == 2 else []))
        if len(shape) != out_shape:  # pragma: no cover - make_node guarantees it
            raise ValueError(f"{op}: unexpected output rank")
        y = out(0, shape, self.out_dtype)
        args = [I64(m), I64(n), I64(k)]
        args += [a.data, I64(a.elem_offset), I64(sa0), I64(sa1)]
        args += [b.data, I64(b.elem_offset), I64(sb0), I64(sb1)]
        if pz is not None:
            _, _, sz0, sz1 = self._as_matrix(z, "Z")
            args += [z.data, I64(z.elem_offset), I64(sz0), I64(sz1)]
        for role, p in zip(("alpha", "beta"), self.pos[3:]):
            mode = self.modes.get(role)
            if mode == "arg":
                dt = self.node.inputs[p].type.dtype
                args.append(np.asarray(inputs[p]).reshape(-1)[0].astype(dt))
            elif mode == "dev":
                args += [inputs[p].data, I64(inputs[p].elem_offset)]
        args += [y.data, I64(y.elem_offset)]
        if m >= TILE and n >= TILE:
            gs = (-(-m // TILE) * TILE, -(-n // TILE) * TILE)
            self.launch(self.name + "_t", gs, args, (TILE, TILE))
        else:
            self.launch(self.name + "_d", (m, n), args)
        return [y]


def _gemm_factory(node, ctx, host_scalars=frozenset()):
    return GemmImpl(node, ctx, host_scalars)


_gemm_factory.takes_host_scalars = True


def _install():
    from theano_dag.tensor.blas import Dot22, Dot22Scalar, Gemm, Gemv, Ger
    from theano_dag.tensor.math import Dot

    register_impl(Dot, Dot22, Dot22Scalar, Gemm, Gemv, Ger)(_gemm_factory)


_install()
