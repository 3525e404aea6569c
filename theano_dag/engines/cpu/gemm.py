"""Matrix products in C for the CPU engine: ``C = alpha * A @ B + beta * C``.

Dot22, Dot (of two matrices) and Gemm run here when the C toolchain targets AVX-512
(``-march=x86-64-v4``); elsewhere, and for products this kernel declines (complex
dtypes, a dimension below 8, operands that overlap the output), numpy's BLAS runs.

Why not always numpy's BLAS: two reasons measured on the 2-core machine of the
benchmarks (``benchmarks/mlp_training.py``).

* numpy's OpenBLAS keeps its worker threads spinning for a while after each call. The
  fused elementwise kernels that come next use OpenMP's threads, and on 2 cores the two
  pools fight: elementwise steps between products ran 2-3x slower than alone. Running
  the products on OpenMP too leaves one pool.
* OpenBLAS picks its kernels from ``OPENBLAS_CORETYPE`` or its CPU table; where that
  means AVX2 on an AVX-512 CPU it reaches half of what the CPU can do.

The algorithm is the one of BLIS (Van Zee and van de Geijn, 2015): B is packed into
panels of ``NR`` columns, A into panels of ``MR`` rows, and a register-blocked micro
kernel (``MR x NR`` accumulators in vector registers, written with GCC's vector
extensions) runs over them. Threads split the longer output dimension; each packs its
own panels. ``config.cpu_gemm`` picks the implementation: ``"auto"`` (this kernel on
AVX-512), ``"c"`` (this kernel wherever a compiler is; tests use it) or ``"numpy"``.

>>> import numpy as np
>>> a, b = np.ones((2, 3)), np.ones((3, 2))
>>> gemm(a, b, np.empty((2, 2)), 1.0, 0.0)
array([[3., 3.],
       [3., 3.]])
"""

from __future__ import annotations

import ctypes
import threading
import warnings

import numpy as np

from theano_dag.config import config
from theano_dag.engines.cpu import cc
from theano_dag.engines.cpu.csource import array_layout

__all__ = ["gemm", "load", "ready", "wanted", "gemm_source", "MIN_DIM"]

# A product with an output side below this runs in numpy (a matrix-vector product in
# disguise: the micro kernel would compute mostly padding).
MIN_DIM = 8
# m * n * k from which the product splits over threads (waking them costs microseconds).
PARALLEL_WORK = 1 << 21

_TYPE = r"""
typedef @T@ v@S@ __attribute__((vector_size(64)));
#define VL_@S@ (64 / (int)sizeof(@T@))
#define MR_@S@ 12
#define NR_@S@ (2 * VL_@S@)

static __thread @T@ *buf_a_@S@, *buf_b_@S@;
static __thread size_t cap_a_@S@, cap_b_@S@;

/* MR-row panels of the mc x kc block of A, zero-padded (A(i, k) at a[i*rs + k*cs]). */
static void pack_a_@S@(int mc, int kc, const @T@ *a, ptrdiff_t rs, ptrdiff_t cs, @T@ *ap)
{
    for (int i0 = 0; i0 < mc; i0 += MR_@S@) {
        const int mr = mc - i0 < MR_@S@ ? mc - i0 : MR_@S@;
        for (int k = 0; k < kc; k++) {
            for (int i = 0; i < mr; i++) ap[k * MR_@S@ + i] = a[(i0 + i) * rs + k * cs];
            for (int i = mr; i < MR_@S@; i++) ap[k * MR_@S@ + i] = 0;
        }
        ap += MR_@S@ * kc;
    }
}

/* NR-column panels of the kc x nc block of B, zero-padded. */
static void pack_b_@S@(int kc, int nc, const @T@ *b, ptrdiff_t rs, ptrdiff_t cs, @T@ *bp)
{
    for (int j0 = 0; j0 < nc; j0 += NR_@S@) {
        const int nr = nc - j0 < NR_@S@ ? nc - j0 : NR_@S@;
        for (int k = 0; k < kc; k++) {
            @T@ *dst = bp + k * NR_@S@;
            if (nr == NR_@S@ && cs == 1) {
                memcpy(dst, b + k * rs + j0, sizeof(@T@) * NR_@S@);
            } else {
                for (int j = 0; j < nr; j++) dst[j] = b[k * rs + (j0 + j) * cs];
                for (int j = nr; j < NR_@S@; j++) dst[j] = 0;
            }
        }
        bp += NR_@S@ * kc;
    }
}

static inline v@S@ ld_@S@(const @T@ *p) { v@S@ v; memcpy(&v, p, sizeof v); return v; }
static inline void st_@S@(@T@ *p, v@S@ v) { memcpy(p, &v, sizeof v); }

/* One MR x NR tile of C from packed panels: C = alpha * acc + beta * C (beta == 0:
   C is not read, as in BLAS). Partial tiles and strided C go through a buffer. */
/* A(i, k) at ap[i*ars + k*acs]: a packed panel (ars 1, acs MR, constants once inlined)
   or MR full rows of A read where they are (see part_). */
static inline __attribute__((always_inline)) void
micro_core_@S@(int kc, const @T@ *ap, ptrdiff_t ars, ptrdiff_t acs, const @T@ *bp, @T@ *c,
               ptrdiff_t rsc, ptrdiff_t csc, int mr, int nr, @T@ alpha, @T@ beta)
{
    v@S@ acc[MR_@S@][2];
    #pragma GCC unroll 12
    for (int i = 0; i < MR_@S@; i++) acc[i][0] = acc[i][1] = (v@S@){0};
    for (int k = 0; k < kc; k++) {
        const v@S@ b0 = ld_@S@(bp + k * NR_@S@), b1 = ld_@S@(bp + k * NR_@S@ + VL_@S@);
        #pragma GCC unroll 12
        for (int i = 0; i < MR_@S@; i++) {
            const @T@ a = ap[i * ars + k * acs];
            acc[i][0] += a * b0;
            acc[i][1] += a * b1;
        }
    }
    if (mr == MR_@S@ && nr == NR_@S@ && csc == 1) {
        #pragma GCC unroll 12
        for (int i = 0; i < MR_@S@; i++) {
            @T@ *ci = c + i * rsc;
            if (beta == 0) {
                st_@S@(ci, alpha * acc[i][0]);
                st_@S@(ci + VL_@S@, alpha * acc[i][1]);
            } else {
                st_@S@(ci, alpha * acc[i][0] + beta * ld_@S@(ci));
                st_@S@(ci + VL_@S@, alpha * acc[i][1] + beta * ld_@S@(ci + VL_@S@));
            }
        }
        return;
    }
    @T@ t[MR_@S@][NR_@S@];
    for (int i = 0; i < MR_@S@; i++) {
        st_@S@(t[i], acc[i][0]);
        st_@S@(t[i] + VL_@S@, acc[i][1]);
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            @T@ *cij = c + i * rsc + j * csc;
            *cij = beta == 0 ? alpha * t[i][j] : alpha * t[i][j] + beta * *cij;
        }
}

static void micro_@S@(int kc, const @T@ *ap, const @T@ *bp, @T@ *c, ptrdiff_t rsc,
                      ptrdiff_t csc, int mr, int nr, @T@ alpha, @T@ beta)
{
    micro_core_@S@(kc, ap, 1, MR_@S@, bp, c, rsc, csc, mr, nr, alpha, beta);
}

static void micro_direct_@S@(int kc, const @T@ *a, ptrdiff_t rs, ptrdiff_t cs,
                             const @T@ *bp, @T@ *c, ptrdiff_t rsc, ptrdiff_t csc, int nr,
                             @T@ alpha, @T@ beta)
{
    micro_core_@S@(kc, a, rs, cs, bp, c, rsc, csc, MR_@S@, nr, alpha, beta);
}

/* The m x n block of C, packing into this thread's buffers. */
static int part_@S@(int m, int n, int k, @T@ alpha, const @T@ *a, ptrdiff_t rsa,
                    ptrdiff_t csa, const @T@ *b, ptrdiff_t rsb, ptrdiff_t csb, @T@ beta,
                    @T@ *c, ptrdiff_t rsc, ptrdiff_t csc)
{
    const int nkb = (k + TD_KC - 1) / TD_KC, kb = (k + nkb - 1) / nkb;
    const int nmb = (m + TD_MC - 1) / TD_MC;
    const int mb = ((m + nmb - 1) / nmb + MR_@S@ - 1) / MR_@S@ * MR_@S@;
    const int nc_max = n < TD_NC ? n : TD_NC;
    const size_t need_a = (size_t)(mb + MR_@S@) * kb;
    const size_t need_b = (size_t)kb * (nc_max + NR_@S@);
    if (need_a > cap_a_@S@) {
        free(buf_a_@S@);
        buf_a_@S@ = aligned_alloc(64, (need_a * sizeof(@T@) + 63) / 64 * 64);
        cap_a_@S@ = buf_a_@S@ ? need_a : 0;
    }
    if (need_b > cap_b_@S@) {
        free(buf_b_@S@);
        buf_b_@S@ = aligned_alloc(64, (need_b * sizeof(@T@) + 63) / 64 * 64);
        cap_b_@S@ = buf_b_@S@ ? need_b : 0;
    }
    @T@ *ap = buf_a_@S@, *bp = buf_b_@S@;
    if (!ap || !bp) return 1;
    for (int jc = 0; jc < n; jc += TD_NC) {
        const int nc = n - jc < TD_NC ? n - jc : TD_NC;
        for (int pc = 0; pc < k; pc += kb) {
            const int kc = k - pc < kb ? k - pc : kb;
            const @T@ bet = pc == 0 ? beta : 1;
            pack_b_@S@(kc, nc, b + pc * rsb + jc * csb, rsb, csb, bp);
            if (nc <= NR_@S@) {
                /* One panel of B: each element of A is read once, so packing A would
                   only copy it. Full row panels read A in place; a last partial one
                   is packed (zero rows instead of reading past the end). */
                const @T@ *ak = a + pc * csa;
                int ir = 0;
                for (; ir + MR_@S@ <= m; ir += MR_@S@)
                    micro_direct_@S@(kc, ak + ir * rsa, rsa, csa, bp, c + ir * rsc + jc * csc,
                                     rsc, csc, nc, alpha, bet);
                if (ir < m) {
                    pack_a_@S@(m - ir, kc, ak + ir * rsa, rsa, csa, ap);
                    micro_@S@(kc, ap, bp, c + ir * rsc + jc * csc, rsc, csc, m - ir, nc,
                              alpha, bet);
                }
                continue;
            }
            for (int ic = 0; ic < m; ic += mb) {
                const int mc = m - ic < mb ? m - ic : mb;
                pack_a_@S@(mc, kc, a + ic * rsa + pc * csa, rsa, csa, ap);
                for (int jr = 0; jr < nc; jr += NR_@S@)
                    for (int ir = 0; ir < mc; ir += MR_@S@)
                        micro_@S@(kc, ap + ir * kc, bp + jr * kc,
                                  c + (ic + ir) * rsc + (jc + jr) * csc, rsc, csc,
                                  mc - ir < MR_@S@ ? mc - ir : MR_@S@,
                                  nc - jr < NR_@S@ ? nc - jr : NR_@S@, alpha, bet);
            }
        }
    }
    return 0;
}

static int gemm_@S@(int m, int n, int k, @T@ alpha, const @T@ *a, ptrdiff_t rsa,
                    ptrdiff_t csa, const @T@ *b, ptrdiff_t rsb, ptrdiff_t csb, @T@ beta,
                    @T@ *c, ptrdiff_t rsc, ptrdiff_t csc)
{
    int nt = 1;
#ifdef _OPENMP
    if (!td_serial && (double)m * n * k >= TD_PARALLEL_WORK) nt = omp_get_max_threads();
#endif
    const int split_n = n / NR_@S@ >= 2 * nt || n >= m;
    const int len = split_n ? n : m, unit = split_n ? NR_@S@ : MR_@S@;
    const int units = (len + unit - 1) / unit;
    if (nt > units) nt = units;
    if (nt <= 1) return part_@S@(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
    int failed = 0;
#ifdef _OPENMP
    #pragma omp parallel num_threads(nt) reduction(|| : failed)
    {
        const int t = omp_get_thread_num(), nth = omp_get_num_threads();
        const int lo = units * t / nth * unit;
        int hi = units * (t + 1) / nth * unit;
        if (hi > len) hi = len;
        if (hi > lo) {
            if (split_n)
                failed = part_@S@(m, hi - lo, k, alpha, a, rsa, csa, b + lo * csb, rsb, csb,
                                  beta, c + lo * csc, rsc, csc);
            else
                failed = part_@S@(hi - lo, n, k, alpha, a + lo * rsa, rsa, csa, b, rsb, csb,
                                  beta, c + lo * rsc, rsc, csc);
        }
    }
#endif
    return failed;
}
"""

_ENTRY = r"""
#define TD_F(o, off, T) (*(T *)((char *)(o) + (off)))
static const void *td_ndarray, *td_f32, *td_f64;

/* Whether this build targets AVX-512 (a compiler that refused -march=x86-64-v4 built
   the fallback without it: then "auto" leaves products to numpy). */
int td_gemm_avx512(void)
{
#ifdef __AVX512F__
    return 1;
#else
    return 0;
#endif
}

void td_gemm_init(const void *ndarray_type, const void *f32, const void *f64)
{
    td_ndarray = ndarray_type;
    td_f32 = f32;
    td_f64 = f64;
}

/* The first and one-past-last byte an array's elements occupy. */
static void extent(const void *o, size_t es, char **lo, char **hi)
{
    char *p = TD_F(o, TD_OFF_DATA, char *);
    const ptrdiff_t *d = TD_F(o, TD_OFF_DIMS, const ptrdiff_t *);
    const ptrdiff_t *s = TD_F(o, TD_OFF_STRIDES, const ptrdiff_t *);
    *lo = p;
    *hi = p + es;
    for (int i = 0; i < 2; i++) {
        const ptrdiff_t span = (d[i] - 1) * s[i];
        if (span < 0) *lo += span; else *hi += span;
    }
}

/* c = alpha * a @ b + beta * c for 2-d ndarrays of one float dtype. 0: done; 1: not
   taken (another dtype or layout, a small side, overlapping operands, mismatched
   shapes): nothing was written and the caller computes it otherwise; 2: no memory. */
int td_gemm(const void *a, const void *b, void *c, double alpha, double beta)
{
    const void *arrs[3] = {a, b, c};
    const void *descr = TD_F(c, TD_OFF_DESCR, const void *);
    if (descr != td_f32 && descr != td_f64) return 1;
    const size_t es = descr == td_f32 ? 4 : 8;
    for (int i = 0; i < 3; i++) {
        const void *o = arrs[i];
        if (TD_F(o, TD_OFF_TYPE, const void *) != td_ndarray) return 1;
        if (TD_F(o, TD_OFF_DESCR, const void *) != descr) return 1;
        if (TD_F(o, TD_OFF_ND, int) != 2) return 1;
        const ptrdiff_t *s = TD_F(o, TD_OFF_STRIDES, const ptrdiff_t *);
        if (s[0] % (ptrdiff_t)es || s[1] % (ptrdiff_t)es) return 1;
        if ((size_t)TD_F(o, TD_OFF_DATA, char *) % es) return 1;
    }
    const ptrdiff_t *da = TD_F(a, TD_OFF_DIMS, const ptrdiff_t *);
    const ptrdiff_t *db = TD_F(b, TD_OFF_DIMS, const ptrdiff_t *);
    const ptrdiff_t *dc = TD_F(c, TD_OFF_DIMS, const ptrdiff_t *);
    const ptrdiff_t m = da[0], k = da[1], n = db[1];
    if (db[0] != k || dc[0] != m || dc[1] != n) return 1;
    if (m < TD_MIN_DIM || n < TD_MIN_DIM || k < 1) return 1;
    if (m > 0x7fffffff || n > 0x7fffffff || k > 0x7fffffff) return 1;
    char *clo, *chi, *lo, *hi;
    extent(c, es, &clo, &chi);
    for (int i = 0; i < 2; i++) {
        extent(arrs[i], es, &lo, &hi);
        if (lo < chi && clo < hi) return 1;
    }
    const ptrdiff_t *sa = TD_F(a, TD_OFF_STRIDES, const ptrdiff_t *);
    const ptrdiff_t *sb = TD_F(b, TD_OFF_STRIDES, const ptrdiff_t *);
    const ptrdiff_t *sc = TD_F(c, TD_OFF_STRIDES, const ptrdiff_t *);
    const ptrdiff_t e = (ptrdiff_t)es;
    int failed;
    if (es == 4)
        failed = gemm_s((int)m, (int)n, (int)k, (float)alpha,
                        TD_F(a, TD_OFF_DATA, const float *), sa[0] / e, sa[1] / e,
                        TD_F(b, TD_OFF_DATA, const float *), sb[0] / e, sb[1] / e,
                        (float)beta, TD_F(c, TD_OFF_DATA, float *), sc[0] / e, sc[1] / e);
    else
        failed = gemm_d((int)m, (int)n, (int)k, alpha,
                        TD_F(a, TD_OFF_DATA, const double *), sa[0] / e, sa[1] / e,
                        TD_F(b, TD_OFF_DATA, const double *), sb[0] / e, sb[1] / e,
                        beta, TD_F(c, TD_OFF_DATA, double *), sc[0] / e, sc[1] / e);
    return failed ? 2 : 0;
}
"""


def gemm_source(layout=None) -> str:
    """The C source of the library (``layout``: ndarray field offsets, measured).

    >>> "int td_gemm(" in gemm_source()
    True
    """
    layout = layout or array_layout() or {}
    defines = [f"#define TD_OFF_{k.upper()} {v}" for k, v in sorted(layout.items())]
    defines += [
        "#define TD_KC 256",
        "#define TD_MC 192",
        "#define TD_NC 4096",
        f"#define TD_MIN_DIM {MIN_DIM}",
        f"#define TD_PARALLEL_WORK {PARALLEL_WORK}.0",
    ]
    head = "\n".join(
        [
            "/* theano_dag matrix products (generated) */",
            "#include <stddef.h>",
            "#include <stdlib.h>",
            "#include <string.h>",
            "#ifdef _OPENMP",
            "#include <omp.h>",
            "#endif",
            *defines,
            "/* 1 in a child forked after OpenMP ran (see csource): one thread. */",
            "static int td_serial;",
            "void td_set_serial(int serial) { td_serial = serial; }",
        ]
    )
    body = [_TYPE.replace("@T@", t).replace("@S@", s) for t, s in (("float", "s"), ("double", "d"))]
    return "\n".join([head, *body, _ENTRY])


# -- loading ---------------------------------------------------------------------------

_STATE = {"fn": None, "lib": None, "build": None, "error": None, "key": None}
_LOCK = threading.Lock()


def wanted() -> bool:
    """Whether ``config.cpu_gemm`` and this machine call for the C products.

    >>> with config.change_flags(cpu_gemm="numpy"):
    ...     wanted()
    False
    """
    return _wanted(cc.get_toolchain(config.cxx))


def _wanted(tc) -> bool:
    choice = config.cpu_gemm
    if choice == "numpy" or tc is None or array_layout() is None:
        return False
    return choice == "c" or tc.level >= 4


def load(wait=False) -> bool:
    """Make the C products available: from the compile cache, else build them (in the
    background unless ``wait``). True once they run. False while building, and where
    ``config.cpu_gemm`` or the machine rules them out (then numpy runs).

    >>> isinstance(load(), bool)
    True
    """
    tc = cc.get_toolchain(config.cxx)
    key = (config.cpu_gemm, config.cxx, config.compiledir)
    with _LOCK:
        if _STATE["key"] != key:  # a flag changed: decide again
            _STATE.update(fn=None, lib=None, build=None, error=None, key=key)
        if not _wanted(tc):
            _STATE["fn"] = None
            return False
        if _STATE["fn"] is not None:
            return True
        build = _STATE["build"]
        if build is None and _STATE["error"] is None:
            src = gemm_source()
            directory = cc.kernel_dir(config.compiledir)
            path = cc.cached_library(tc, src, directory)
            if path is not None:
                _bind(path)
                return _STATE["fn"] is not None
            build = _STATE["build"] = cc.Build.start(tc, src, directory, background=not wait)
            build.add_done_callback(_built)
    if build is not None and wait:
        build.wait()
    return _STATE["fn"] is not None


def _built(build):
    if build.error is not None:
        _STATE["error"] = build.error
        warnings.warn(
            f"theano_dag: C matrix products unavailable, numpy runs them: {build.error}",
            RuntimeWarning,
            stacklevel=2,
        )
        return
    _bind(build.path)


def _bind(path):
    try:
        lib = ctypes.CDLL(path)  # the GIL is released while a product runs
        lib.td_gemm_init(
            ctypes.c_void_p(id(np.ndarray)),
            ctypes.c_void_p(id(np.dtype("float32"))),
            ctypes.c_void_p(id(np.dtype("float64"))),
        )
        if config.cpu_gemm == "auto" and not lib.td_gemm_avx512():
            _STATE["error"] = "the library was built without AVX-512"
            return
        cc.register_library(lib)
        fn = lib.td_gemm
        fn.argtypes = [ctypes.py_object] * 3 + [ctypes.c_double] * 2
        fn.restype = ctypes.c_int
    except (OSError, AttributeError) as e:
        _STATE["error"] = e
        warnings.warn(f"theano_dag: cannot load {path}: {e}", RuntimeWarning, stacklevel=2)
        return
    _STATE["lib"] = lib
    _STATE["fn"] = fn


def ready() -> bool:
    """Whether products run in C now (see :func:`load`).

    >>> isinstance(ready(), bool)
    True
    """
    return _STATE["fn"] is not None


def gemm(a, b, c, alpha, beta):
    """``c = alpha * a @ b + beta * c`` in place, and return ``c``; ``beta == 0``
    ignores what ``c`` held (NaN included), as BLAS does. In C where :func:`load` made
    it available and the operands suit it, else with numpy.

    >>> import numpy as np
    >>> c = np.ones((2, 2))
    >>> gemm(np.eye(2), np.full((2, 2), 2.0), c, 0.5, 3.0)
    array([[4., 3.],
           [3., 4.]])
    """
    fn = _STATE["fn"]
    # (read-only memory, say a borrowed np.load(mmap_mode="r") array, gets numpy's error)
    if fn is not None and c.flags.writeable:
        rc = fn(a, b, c, alpha, beta)
        if rc == 0:
            return c
        if rc == 2:
            raise MemoryError("gemm: out of memory for the packing buffers")
    return _numpy_gemm(a, b, c, alpha, beta)


def _numpy_gemm(a, b, c, alpha, beta):
    if beta == 0 and c.flags.c_contiguous and not _overlap(c, a, b):
        np.dot(a, b, out=c)
        if alpha != 1:
            np.multiply(c, alpha, out=c)
        return c
    p = np.dot(a, b)
    if alpha != 1:
        np.multiply(p, alpha, out=p)
    if beta == 0:
        np.copyto(c, p)
        return c
    if beta != 1:
        np.multiply(c, beta, out=c)
    np.add(c, p, out=c)
    return c


def _overlap(c, a, b):
    return np.may_share_memory(c, a) or np.may_share_memory(c, b)
