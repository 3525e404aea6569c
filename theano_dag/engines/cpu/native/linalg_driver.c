/*! Small dense linear algebra as steps of a segment: the lower Cholesky factor
   (td_chol_*, and td_cholnan_* for on_error='nan'), triangular solves (td_trsl_*,
   td_trsu_*, and td_trsl1_*, td_trsu1_* with a unit diagonal), the Cholesky factor's
   gradient (td_cholgrad_*) and a diagonal matrix from a vector (td_allocdiag_*, of any
   size: numpy's zeros and indexed write cost more).

   Why not LAPACK: at the sizes of a Gaussian process's covariance in a sampler (tens of
   rows) numpy's or scipy's call costs more than the arithmetic (a few us of Python per
   call), and OpenBLAS wakes its threads for a 40 x 40 triangular solve: on a busy
   machine that call then waits for a core and costs several times its work. These
   loops run on the calling thread, in double precision (float32 operands are read as
   doubles and the result rounded once). Above TD_LA_MAX rows, or for any operand of
   another type, dtype or rank, a step returns an error code before anything is
   written, and the engine runs numpy/scipy instead. So does a factorization or a solve
   that LAPACK would refuse (a matrix that is not positive definite with
   on_error='raise', a zero on a triangle's diagonal): numpy raises its own error then.
   In the step library, after the matrix-vector steps (gemv_driver.c). */
#define TD_LA_MAX 128

/* The rows and columns of the vector (cols = 1) or matrix a, which must be an ndarray
   of dtype code; rank 2 only unless vec. */
static int td_la_shape(void *a, int code, int k, int vec, ptrdiff_t *rows, ptrdiff_t *cols)
{
    if (TD_F(a, TD_OFF_TYPE, const void *) != td_ndarray) return TD_ERR(TD_ETYPE, k);
    if (TD_F(a, TD_OFF_DESCR, const void *) != td_descr[code]) return TD_ERR(TD_EDTYPE, k);
    const int nd = TD_F(a, TD_OFF_ND, int);
    if (nd != 2 && !(vec && nd == 1)) return TD_ERR(TD_ENDIM, k);
    *rows = TD_DIM(a, 0);
    *cols = nd == 2 ? TD_DIM(a, 1) : 1;
    if (*rows > TD_LA_MAX || *cols > TD_LA_MAX) return TD_ERR(TD_EBIG, k);
    return 0;
}

/* A square matrix of at most TD_LA_MAX rows at ops[k]. */
static int td_la_square(void *a, int code, int k, ptrdiff_t *n)
{
    ptrdiff_t c;
    int rc = td_la_shape(a, code, k, 0, n, &c);
    if (rc) return rc;
    return c == *n ? 0 : TD_ERR(TD_ESHAPE, k);
}

/* The out operand at ops[k]: of dtype code, rows x cols (rank 1 when vec), sharing no
   memory with the operands before it. */
static int td_la_out(void **ops, int k, int code, int vec, ptrdiff_t rows, ptrdiff_t cols,
                     int es)
{
    ptrdiff_t r, c;
    int rc = td_la_shape(ops[k], code, k, vec, &r, &c);
    if (rc) return rc;
    if (r != rows || c != cols || (TD_F(ops[k], TD_OFF_ND, int) == 1) != vec)
        return TD_ERR(TD_ESHAPE, k);
    for (int j = 0; j < k; j++)
        if (td_overlap(ops[j], ops[k], es)) return TD_ERR(TD_ESHAPE, k);
    return 0;
}

/* Read the matrix (or vector) a into buf, row-major doubles; write buf back to a. */
#define TD_LA_IO(T, S)                                                                  \
    static void td_la_read_##S(void *a, double *buf)                                    \
    {                                                                                   \
        const int nd = TD_F(a, TD_OFF_ND, int);                                         \
        const ptrdiff_t r = TD_DIM(a, 0), c = nd == 2 ? TD_DIM(a, 1) : 1;               \
        const ptrdiff_t s0 = TD_STR(a, 0), s1 = nd == 2 ? TD_STR(a, 1) : 0;             \
        const char *p = TD_F(a, TD_OFF_DATA, const char *);                             \
        for (ptrdiff_t i = 0; i < r; i++)                                               \
            for (ptrdiff_t j = 0; j < c; j++) buf[i * c + j] = *(const T *)(p + i * s0 + j * s1); \
    }                                                                                   \
    static void td_la_write_##S(void *a, const double *buf)                             \
    {                                                                                   \
        const int nd = TD_F(a, TD_OFF_ND, int);                                         \
        const ptrdiff_t r = TD_DIM(a, 0), c = nd == 2 ? TD_DIM(a, 1) : 1;               \
        const ptrdiff_t s0 = TD_STR(a, 0), s1 = nd == 2 ? TD_STR(a, 1) : 0;             \
        char *p = TD_F(a, TD_OFF_DATA, char *);                                         \
        for (ptrdiff_t i = 0; i < r; i++)                                               \
            for (ptrdiff_t j = 0; j < c; j++) *(T *)(p + i * s0 + j * s1) = (T)buf[i * c + j]; \
    }

TD_LA_IO(double, f64)
TD_LA_IO(float, f32)

/* The lower Cholesky factor of the n x n matrix a (row-major; its lower triangle read)
   into l, zeros above the diagonal. Returns 1, l undefined, where a pivot is not
   positive (or is NaN): LAPACK's potrf reports those. */
static int td_la_chol(const double *a, double *l, ptrdiff_t n)
{
    for (ptrdiff_t i = 0; i < n; i++) {
        double *li = l + i * n;
        for (ptrdiff_t j = 0; j < i; j++) {
            const double *lj = l + j * n;
            double s = a[i * n + j];
            for (ptrdiff_t k = 0; k < j; k++) s -= li[k] * lj[k];
            li[j] = s / lj[j];
        }
        double d = a[i * n + i];
        for (ptrdiff_t k = 0; k < i; k++) d -= li[k] * li[k];
        if (!(d > 0)) return 1;
        li[i] = sqrt(d);
        for (ptrdiff_t j = i + 1; j < n; j++) li[j] = 0;
    }
    return 0;
}

/* x <- T^-1 x for the n x n triangle of t (row-major), x n rows of m right-hand sides
   (row-major): the lower triangle (lower) or the upper one, read transposed (trans:
   T[i][j] is t[j][i]), with ones on the diagonal (unit). Returns 1 at a zero on the
   diagonal (LAPACK's trtrs refuses it), x then partly solved. Each row solved is
   subtracted from the rows after it (vector loops over the right-hand sides). */
static int td_la_trsolve(const double *t, double *x, ptrdiff_t n, ptrdiff_t m, int lower,
                         int trans, int unit)
{
    /* the triangle that T is in, in t's own layout */
    const int low = lower != trans;
    for (ptrdiff_t s = 0; s < n; s++) {
        const ptrdiff_t j = low ? s : n - 1 - s;
        double *xj = x + j * m;
        if (!unit) {
            const double d = t[j * n + j];
            if (d == 0) return 1;
            for (ptrdiff_t c = 0; c < m; c++) xj[c] /= d;
        }
        const ptrdiff_t lo = low ? j + 1 : 0, hi = low ? n : j;
        for (ptrdiff_t i = lo; i < hi; i++) {
            const double f = trans ? t[j * n + i] : t[i * n + j];
            double *xi = x + i * m;
            for (ptrdiff_t c = 0; c < m; c++) xi[c] -= f * xj[c];
        }
    }
    return 0;
}

/* Scratch of w doubles: on the stack when small. */
#define TD_LA_LOCAL 2048

#define TD_LA_ENTRIES(T, S)                                                             \
    static int td_chol_##S(void **ops, int nan_on_error)                                \
    {                                                                                   \
        ptrdiff_t n;                                                                    \
        int rc;                                                                         \
        if ((rc = td_la_square(ops[0], td_code_##S, 0, &n))) return rc;                 \
        if ((rc = td_la_out(ops, 1, td_code_##S, 0, n, n, sizeof(T)))) return rc;       \
        double local[TD_LA_LOCAL], *a = local;                                          \
        if (2 * n * n > TD_LA_LOCAL && !(a = malloc(2 * n * n * sizeof(double))))       \
            return TD_ERR(TD_ENOMEM, 1);                                                \
        double *l = a + n * n;                                                          \
        td_la_read_##S(ops[0], a);                                                      \
        if (td_la_chol(a, l, n)) {                                                      \
            if (!nan_on_error) rc = TD_ERR(TD_ESHAPE, 0);                               \
            else for (ptrdiff_t i = 0; i < n * n; i++) l[i] = NAN;                      \
        }                                                                               \
        if (!rc) td_la_write_##S(ops[1], l);                                            \
        if (a != local) free(a);                                                        \
        return rc;                                                                      \
    }                                                                                   \
    int td_chol_##S##_v(void **ops) { return td_chol_##S(ops, 0); }                     \
    int td_cholnan_##S##_v(void **ops) { return td_chol_##S(ops, 1); }                  \
    /* ops: A, b (vector or matrix), out (b's shape) */                                 \
    static int td_trs_##S(void **ops, int lower, int unit)                              \
    {                                                                                   \
        ptrdiff_t n, r, m;                                                              \
        int rc;                                                                         \
        if ((rc = td_la_square(ops[0], td_code_##S, 0, &n))) return rc;                 \
        if ((rc = td_la_shape(ops[1], td_code_##S, 1, 1, &r, &m))) return rc;           \
        if (r != n) return TD_ERR(TD_ESHAPE, 1);                                        \
        const int vec = TD_F(ops[1], TD_OFF_ND, int) == 1;                              \
        if ((rc = td_la_out(ops, 2, td_code_##S, vec, n, m, sizeof(T)))) return rc;     \
        double local[TD_LA_LOCAL], *t = local;                                          \
        const ptrdiff_t w = n * n + n * m;                                              \
        if (w > TD_LA_LOCAL && !(t = malloc(w * sizeof(double)))) return TD_ERR(TD_ENOMEM, 2); \
        double *x = t + n * n;                                                          \
        td_la_read_##S(ops[0], t);                                                      \
        td_la_read_##S(ops[1], x);                                                      \
        if (td_la_trsolve(t, x, n, m, lower, 0, unit)) rc = TD_ERR(TD_ESHAPE, 0);       \
        else td_la_write_##S(ops[2], x);                                                \
        if (t != local) free(t);                                                        \
        return rc;                                                                      \
    }                                                                                   \
    int td_trsl_##S##_v(void **ops) { return td_trs_##S(ops, 1, 0); }                   \
    int td_trsu_##S##_v(void **ops) { return td_trs_##S(ops, 0, 0); }                   \
    int td_trsl1_##S##_v(void **ops) { return td_trs_##S(ops, 1, 1); }                  \
    int td_trsu1_##S##_v(void **ops) { return td_trs_##S(ops, 0, 1); }                  \
    /* ops: A (unread), L, dL, out: CholeskyGrad's S = L^-T Phi(L^T dL) L^-1 (Phi: the \
       lower triangle, its diagonal halved), folded onto the lower triangle of out as   \
       S + S^T with S's own diagonal. */                                               \
    int td_cholgrad_##S##_v(void **ops)                                                 \
    {                                                                                   \
        ptrdiff_t n, r;                                                                 \
        int rc;                                                                         \
        if ((rc = td_la_square(ops[1], td_code_##S, 1, &n))) return rc;                 \
        if ((rc = td_la_square(ops[2], td_code_##S, 2, &r))) return rc;                 \
        if (r != n) return TD_ERR(TD_ESHAPE, 2);                                        \
        if ((rc = td_la_out(ops, 3, td_code_##S, 0, n, n, sizeof(T)))) return rc;       \
        double local[TD_LA_LOCAL], *l = local;                                          \
        if (4 * n * n > TD_LA_LOCAL && !(l = malloc(4 * n * n * sizeof(double))))       \
            return TD_ERR(TD_ENOMEM, 3);                                                \
        double *g = l + n * n, *p = g + n * n, *z = p + n * n;                          \
        td_la_read_##S(ops[1], l);                                                      \
        td_la_read_##S(ops[2], g);                                                      \
        /* P = tril(L^T dL), the whole of L read as numpy's product reads it */         \
        for (ptrdiff_t i = 0; i < n * n; i++) p[i] = 0;                                 \
        for (ptrdiff_t k = 0; k < n; k++)                                               \
            for (ptrdiff_t i = 0; i < n; i++) {                                         \
                const double a = l[k * n + i];                                          \
                double *pi = p + i * n;                                                 \
                const double *gk = g + k * n;                                           \
                for (ptrdiff_t j = 0; j <= i; j++) pi[j] += a * gk[j];                  \
            }                                                                           \
        for (ptrdiff_t i = 0; i < n; i++) p[i * n + i] *= 0.5;                          \
        /* Y = L^-T P, then Z = L^-T Y^T: S = Z^T */                                   \
        if (td_la_trsolve(l, p, n, n, 1, 1, 0)) rc = TD_ERR(TD_ESHAPE, 1);              \
        if (!rc) {                                                                      \
            for (ptrdiff_t i = 0; i < n; i++)                                           \
                for (ptrdiff_t j = 0; j < n; j++) z[j * n + i] = p[i * n + j];          \
            td_la_trsolve(l, z, n, n, 1, 1, 0);                                         \
            for (ptrdiff_t i = 0; i < n; i++)                                           \
                for (ptrdiff_t j = 0; j < n; j++)                                       \
                    p[i * n + j] = j < i ? z[j * n + i] + z[i * n + j]                  \
                                         : j == i ? z[i * n + i] : 0.0;                 \
            td_la_write_##S(ops[3], p);                                                 \
        }                                                                               \
        if (l != local) free(l);                                                        \
        return rc;                                                                      \
    }                                                                                   \
    /* ops: v (a vector), offset (a 0-d int64), out: the square matrix with v on its    \
       diagonal offset (above it when positive), zeros elsewhere. */                   \
    int td_allocdiag_##S##_v(void **ops)                                                \
    {                                                                                   \
        int rc;                                                                         \
        if ((rc = td_mv_operand(ops[0], td_code_##S, 1, 0))) return rc;                 \
        if ((rc = td_mv_operand(ops[1], 4, 0, 1))) return rc; /* int64 */               \
        if ((rc = td_mv_operand(ops[2], td_code_##S, 2, 2))) return rc;                 \
        const ptrdiff_t r = TD_DIM(ops[2], 0), c = TD_DIM(ops[2], 1);                   \
        const int64_t k = *TD_F(ops[1], TD_OFF_DATA, const int64_t *);                  \
        const ptrdiff_t m = TD_DIM(ops[0], 0), n = m + (k < 0 ? -k : k);                \
        if (r != n || c != n) return TD_ERR(TD_ESHAPE, 2);                              \
        if (td_overlap(ops[0], ops[2], sizeof(T))) return TD_ERR(TD_ESHAPE, 2);         \
        const char *v = TD_F(ops[0], TD_OFF_DATA, const char *);                        \
        char *o = TD_F(ops[2], TD_OFF_DATA, char *);                                    \
        const ptrdiff_t sv = TD_STR(ops[0], 0), s0 = TD_STR(ops[2], 0), s1 = TD_STR(ops[2], 1); \
        for (ptrdiff_t i = 0; i < n; i++)                                               \
            for (ptrdiff_t j = 0; j < n; j++) *(T *)(o + i * s0 + j * s1) = 0;          \
        const ptrdiff_t i0 = k < 0 ? -k : 0, j0 = k > 0 ? k : 0;                        \
        for (ptrdiff_t i = 0; i < m; i++)                                               \
            *(T *)(o + (i + i0) * s0 + (i + j0) * s1) = *(const T *)(v + i * sv);       \
        return 0;                                                                       \
    }

TD_LA_ENTRIES(double, f64)
TD_LA_ENTRIES(float, f32)
