/*! td_gemm, the entry point of the matrix products: checks both operands and the
   output (ndarray type, dtype, 2-d, alignment, no overlap) and calls gemm_s or gemm_d.
   Appended verbatim by gemm.gemm_source. */
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
