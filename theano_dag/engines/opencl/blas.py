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
from theano_dag.tensor.blas import Dot22, Dot22Scalar, Gemm, Gemv, Ger
from theano_dag.tensor.math import Dot

__all__ = ["GemmImpl", "TILE", "VECTOR_BYTES"]

TILE = 16

#: The widest vector value the kernels make, in bytes (float8, double4, long4), as
#: elemwise's VECTOR_WIDTH. A 64-byte vector (double8, long8) passed to or returned by
#: a builtin (vload8, vstore8) crashes PoCL 3.0 with LLVM 14 on an AVX-512 CPU its LLVM
#: does not know (Zen 4): the kernel is compiled for the CPU it falls back to (znver3,
#: no AVX-512), the builtin library chosen by the CPU's features is the AVX-512 one, so
#: the two sides of the call disagree on how a 64-byte vector travels (clang warns "AVX
#: vector return of type 'double8' without 'avx512f' enabled changes the ABI"). The
#: float64 row-blocked kernel killed the process, and PoCL's cached build of such a
#: program lists no kernels (INVALID_KERNEL_NAME in the next process). 32 bytes
#: travel the same way in both (one AVX register).
VECTOR_BYTES = 32


class GemmImpl(Impl):
    """See the module docstring; ``kind`` says which op's inputs map to A, B, Z, alpha, beta."""

    def __init__(self, node, ctx, host_scalars=frozenset()):
        super().__init__(node, ctx)

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
        self.host_inputs = tuple(
            self.pos[3 + i] for i, r in enumerate(("alpha", "beta")) if self.modes.get(r) == "arg"
        )
        a_dt, b_dt = ins[self.pos[0]].type.dtype, ins[self.pos[1]].type.dtype
        self.vector_ok = not self.is_ger and a_dt == b_dt == self.out_dtype
        key = repr((dtypes, self.pos, self.modes, self.is_ger, self._literals()))
        self.name = "gemm_" + _digest(key)

    def _literals(self):
        out = {}
        for role, p in zip(("alpha", "beta"), self.pos[3:]):
            if self.modes.get(role) == "lit":
                v = self.node.inputs[p]
                out[role] = c_literal(
                    np.asarray(v.data).reshape(-1)[0], self.out_dtype, OPENCL_TYPES
                )
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
            ps += [f"__global const {t(z)}* Z", "const long zo", "const long sz0", "const long sz1"]
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
        direct = "\n".join(
            [
                f"__kernel void {self.name}_d({self._params()})",
                "{",
                "    const long i = get_global_id(0), j = get_global_id(1);",
                "    if (i >= M || j >= N) return;",
                *self._scalars(),
                f"    {tc} acc = 0;",
                "    for (long k = 0; k < K; ++k)",
                f"        acc += ({tc})A[ao + i * sa0 + k * sa1]"
                f" * ({tc})B[bo + k * sb0 + j * sb1];",
                "    " + self._store(),
                "}",
            ]
        )
        tiled = "\n".join(
            [
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
                f"        As[li][lj] = (i < M && k0 + lj < K) ? "
                f"({tc})A[ao + i * sa0 + (k0 + lj) * sa1] : 0;",
                f"        Bs[li][lj] = (k0 + li < K && j0 + lj < N) ? "
                f"({tc})B[bo + (k0 + li) * sb0 + (j0 + lj) * sb1] : 0;",
                "        barrier(CLK_LOCAL_MEM_FENCE);",
                f"        for (int kk = 0; kk < {TILE}; ++kk) acc += As[li][kk] * Bs[kk][lj];",
                "        barrier(CLK_LOCAL_MEM_FENCE);",
                "    }",
                "    if (i < M && j < N) " + self._store(),
                "}",
            ]
        )
        out = {self.name + "_d": direct + "\n", self.name + "_t": tiled + "\n"}
        if self.vector_ok:
            out[self.name + "_v"] = self._nn_source()
            out[self.name + "_n"] = self._nt_source()
        return out

    # Register-blocked kernels for CPUs (and fine on GPUs): the driver turns the
    # vector types into SIMD. "nn": B rows contiguous, a work-item computes a 4x8 block
    # of C from vector loads of B (one float8, or two double4, a row). "nt": A rows and
    # B columns contiguous along K, a work-item computes 1x4 dot products from vector
    # loads of both. Vectors are at most VECTOR_BYTES wide (see there).

    def _lanes(self):
        return min(8, VECTOR_BYTES // np.dtype(self.out_dtype).itemsize)

    def _row_stores(self, rows, width, lanes):
        tc = OPENCL_TYPES[self.out_dtype]
        lines = [f"    {tc} t[{width}];"]
        for r in range(rows):
            lines += [
                f"    if (i0 + {r} < M) {{",
                *(f"        vstore{lanes}(acc{r}_{h}, {h}, t);" for h in range(width // lanes)),
                f"        const long i = i0 + {r};",
                f"        for (int q = 0; q < {width}; ++q) {{",
                "            const long j = j0 + q;",
                f"            const {tc} acc = t[q];",
                "            if (j < N) " + self._store(),
                "        }",
                "    }",
            ]
        return lines

    def _nn_source(self):
        tc = OPENCL_TYPES[self.out_dtype]
        rows, w, lanes = 4, 8, self._lanes()
        vt, hs = f"{tc}{lanes}", range(w // lanes)  # acc{r}_{h}: lanes h*lanes.. of row r
        lines = [
            f"__kernel void {self.name}_v({self._params()})",
            "{",
            f"    const long i0 = get_global_id(0) * {rows}, j0 = get_global_id(1) * {w};",
            "    if (i0 >= M || j0 >= N) return;",
            *self._scalars(),
            # Rows past M read row M-1 (never stored): no branch in the loop.
            *(f"    const long a{r} = ao + min(i0 + {r}, M - 1) * sa0;" for r in range(rows)),
            *(f"    {vt} acc{r}_{h} = 0;" for r in range(rows) for h in hs),
            f"    if (j0 + {w} <= N) {{",
            "        for (long k = 0; k < K; ++k) {",
            "            const long brow = bo + k * sb0 + j0;",
            *(f"            const {vt} b{h} = vload{lanes}({h}, B + brow);" for h in hs),
            *(f"            const {tc} x{r} = ({tc})A[a{r} + k * sa1];" for r in range(rows)),
            *(f"            acc{r}_{h} += x{r} * b{h};" for r in range(rows) for h in hs),
            "        }",
            "    } else {",
            f"        {tc} t0[{w}] = {{0}}, t1[{w}] = {{0}}, t2[{w}] = {{0}}, t3[{w}] = {{0}};",
            "        for (long k = 0; k < K; ++k)",
            f"            for (int q = 0; q < {w} && j0 + q < N; ++q) {{",
            f"                const {tc} b = ({tc})B[bo + k * sb0 + j0 + q];",
            *(f"                t{r}[q] += ({tc})A[a{r} + k * sa1] * b;" for r in range(rows)),
            "            }",
            *(f"        acc{r}_{h} = vload{lanes}({h}, t{r});" for r in range(rows) for h in hs),
            "    }",
            *self._row_stores(rows, w, lanes),
            "}",
        ]
        return "\n".join(lines) + "\n"

    def _nt_source(self):
        tc = OPENCL_TYPES[self.out_dtype]
        cols, w = 4, self._lanes()
        lanes_sum = lambda c: " + ".join(f"v{c}.s{q}" for q in range(w))  # noqa: E731
        lines = [
            f"__kernel void {self.name}_n({self._params()})",
            "{",
            f"    const long i0 = get_global_id(0), j0 = get_global_id(1) * {cols};",
            "    if (i0 >= M || j0 >= N) return;",
            *self._scalars(),
            "    const long ar = ao + i0 * sa0;",
            *(f"    const long b{c} = bo + min(j0 + {c}, N - 1) * sb1;" for c in range(cols)),
            *(f"    {tc}{w} v{c} = 0;" for c in range(cols)),
            f"    const long KV = K - K % {w};",
            f"    for (long k = 0; k < KV; k += {w}) {{",
            f"        const {tc}{w} a = vload{w}(0, A + ar + k);",
            *(f"        v{c} += a * vload{w}(0, B + b{c} + k);" for c in range(cols)),
            "    }",
            f"    {tc} t[{cols}];",
            *(f"    t[{c}] = {lanes_sum(c)};" for c in range(cols)),
            "    for (long k = KV; k < K; ++k) {",
            *(f"        t[{c}] += A[ar + k] * B[b{c} + k];" for c in range(cols)),
            "    }",
            "    const long i = i0;",
            f"    for (int q = 0; q < {cols}; ++q) {{",
            "        const long j = j0 + q;",
            f"        const {tc} acc = t[q];",
            "        if (j < N) " + self._store(),
            "    }",
            "}",
        ]
        return "\n".join(lines) + "\n"

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
                raise ValueError(
                    f"{op}: shapes {a.shape} and {b.shape} are not aligned " f"({k} != {k2})"
                )
        out_shape = self.node.outputs[0].type.ndim
        if pz is not None:
            z = inputs[pz]
            shape = z.shape
            if tuple(z.shape) != ((m, n) if z.ndim == 2 else (m,)):
                raise ValueError(
                    f"{op}: incompatible shapes: z {z.shape}, operands " f"{a.shape} and {b.shape}"
                )
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
        big = m * n * k >= 32768
        if self.vector_ok and big and sb1 == 1 and n >= 8:
            self.launch(self.name + "_v", (-(-m // 4), -(-n // 8)), args)
        elif self.vector_ok and big and sa1 == 1 and sb0 == 1 and k >= 8:
            self.launch(self.name + "_n", (m, -(-n // 4)), args)
        elif m >= TILE and n >= TILE:
            gs = (-(-m // TILE) * TILE, -(-n // TILE) * TILE)
            self.launch(self.name + "_t", gs, args, (TILE, TILE))
        else:
            self.launch(self.name + "_d", (m, n), args)
        return [y]


def _gemm_factory(node, ctx, host_scalars=frozenset()):
    return GemmImpl(node, ctx, host_scalars)


_gemm_factory.takes_host_scalars = True


def _install():
    register_impl(Dot, Dot22, Dot22Scalar, Gemm, Gemv, Ger)(_gemm_factory)


_install()
