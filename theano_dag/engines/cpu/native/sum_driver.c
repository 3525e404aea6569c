/*! td_sum_f64 / td_sum_f32: the sum of all elements of a C-contiguous float array into
   a 0-d array, bit for bit as numpy's add.reduce computes it there (0 plus its pairwise
   summation: eight accumulators over blocks of at most 128 elements, halves above);
   td_sumlead_* and td_sumtrail_*: over its leading or its trailing axes. Any other
   operand returns an error code before anything is written, and the engine runs numpy
   instead. In the step library (csource.steps_source), after the elementwise driver. */
#define TD_PAIRWISE(T, NAME)                                                            \
    static T NAME(const T *a, ptrdiff_t n)                                              \
    {                                                                                   \
        if (n < 8) {                                                                    \
            T res = 0.;                                                                 \
            for (ptrdiff_t i = 0; i < n; i++) res += a[i];                              \
            return res;                                                                 \
        }                                                                               \
        if (n <= 128) {                                                                 \
            T r[8];                                                                     \
            for (int k = 0; k < 8; k++) r[k] = a[k];                                    \
            ptrdiff_t i;                                                                \
            for (i = 8; i < n - (n % 8); i += 8)                                        \
                for (int k = 0; k < 8; k++) r[k] += a[i + k];                           \
            T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));  \
            for (; i < n; i++) res += a[i];                                             \
            return res;                                                                 \
        }                                                                               \
        ptrdiff_t n2 = n / 2;                                                           \
        n2 -= n2 % 8;                                                                   \
        return NAME(a, n2) + NAME(a + n2, n - n2);                                      \
    }

TD_PAIRWISE(double, td_pairwise_f64)
TD_PAIRWISE(float, td_pairwise_f32)

/* The checks of a full sum: x an array of dtype code, C-contiguous; o a 0-d array of
   the same dtype. The number of elements of x, or -1 with *rc set. */
static ptrdiff_t td_sum_check(void **arrs, int code, int *rc)
{
    for (int k = 0; k < 2; k++) {
        void *a = arrs[k];
        if (TD_F(a, TD_OFF_TYPE, const void *) != td_ndarray) { *rc = TD_ERR(TD_ETYPE, k); return -1; }
        if (TD_F(a, TD_OFF_DESCR, const void *) != td_descr[code]) { *rc = TD_ERR(TD_EDTYPE, k); return -1; }
    }
    if (TD_F(arrs[1], TD_OFF_ND, int) != 0) { *rc = TD_ERR(TD_ENDIM, 1); return -1; }
    const int nd = TD_F(arrs[0], TD_OFF_ND, int);
    const ptrdiff_t *dims = TD_F(arrs[0], TD_OFF_DIMS, const ptrdiff_t *);
    const ptrdiff_t *strides = TD_F(arrs[0], TD_OFF_STRIDES, const ptrdiff_t *);
    ptrdiff_t n = 1, expect = td_size[code];
    for (int d = 0; d < nd; d++) n *= dims[d];
    if (n == 0) return 0;
    for (int d = nd - 1; d >= 0; d--) {
        if (dims[d] != 1 && strides[d] != expect) { *rc = TD_ERR(TD_ESHAPE, 0); return -1; }
        expect *= dims[d];
    }
    return n;
}

int td_sum_f64_v(void **arrs)
{
    int rc = 0;
    const ptrdiff_t n = td_sum_check(arrs, 10, &rc);
    if (n < 0) return rc;
    const double *x = TD_F(arrs[0], TD_OFF_DATA, const double *);
    *TD_F(arrs[1], TD_OFF_DATA, double *) = 0. + td_pairwise_f64(x, n);
    return 0;
}

int td_sum_f32_v(void **arrs)
{
    int rc = 0;
    const ptrdiff_t n = td_sum_check(arrs, 9, &rc);
    if (n < 0) return rc;
    const float *x = TD_F(arrs[0], TD_OFF_DATA, const float *);
    *TD_F(arrs[1], TD_OFF_DATA, float *) = 0.f + td_pairwise_f32(x, n);
    return 0;
}

int td_sum_f64(void *x, void *o)
{
    void *arrs[2] = {x, o};
    return td_sum_f64_v(arrs);
}

int td_sum_f32(void *x, void *o)
{
    void *arrs[2] = {x, o};
    return td_sum_f32_v(arrs);
}

/* Sums over the leading or the trailing axes of a C-contiguous array into a C-contiguous
   array of the other axes, as numpy's add.reduce computes them there: over leading axes
   each output element adds its column's values in order to 0 (a single column is one
   contiguous run: numpy sums it pairwise); over trailing axes each output element is 0
   plus the pairwise sum of its contiguous row. */
static int td_contig(void *a, int code)
{
    const int nd = TD_F(a, TD_OFF_ND, int);
    const ptrdiff_t *dims = TD_F(a, TD_OFF_DIMS, const ptrdiff_t *);
    const ptrdiff_t *strides = TD_F(a, TD_OFF_STRIDES, const ptrdiff_t *);
    ptrdiff_t expect = td_size[code];
    for (int d = 0; d < nd; d++)
        if (dims[d] == 0) return 1;  /* numpy gives an empty array any strides */
    for (int d = nd - 1; d >= 0; d--) {
        if (dims[d] != 1 && strides[d] != expect) return 0;
        expect *= dims[d];
    }
    return 1;
}

/* The checks of a partial sum; the rows and columns of x seen as a matrix, or -1. */
static int td_part_check(void **arrs, int code, int lead, ptrdiff_t *rows, ptrdiff_t *cols)
{
    for (int k = 0; k < 2; k++) {
        void *a = arrs[k];
        if (TD_F(a, TD_OFF_TYPE, const void *) != td_ndarray) return TD_ERR(TD_ETYPE, k);
        if (TD_F(a, TD_OFF_DESCR, const void *) != td_descr[code]) return TD_ERR(TD_EDTYPE, k);
    }
    const int nx = TD_F(arrs[0], TD_OFF_ND, int), no = TD_F(arrs[1], TD_OFF_ND, int);
    if (no < 1 || no >= nx) return TD_ERR(TD_ENDIM, 1);
    const ptrdiff_t *xd = TD_F(arrs[0], TD_OFF_DIMS, const ptrdiff_t *);
    const ptrdiff_t *od = TD_F(arrs[1], TD_OFF_DIMS, const ptrdiff_t *);
    const int off = lead ? nx - no : 0;
    ptrdiff_t kept = 1, all = 1;
    for (int d = 0; d < no; d++) {
        if (od[d] != xd[off + d]) return TD_ERR(TD_ESHAPE, 1);
        kept *= od[d];
    }
    for (int d = 0; d < nx; d++) all *= xd[d];
    if (!td_contig(arrs[0], code)) return TD_ERR(TD_ESHAPE, 0);
    if (!td_contig(arrs[1], code)) return TD_ERR(TD_ESHAPE, 1);
    const ptrdiff_t red = kept ? all / kept : 0;
    *rows = lead ? red : kept;
    *cols = lead ? kept : red;
    return 0;
}

#define TD_PARTIAL(T, S)                                                                \
    int td_sumlead_##S##_v(void **arrs)                                                 \
    {                                                                                   \
        ptrdiff_t R, C;                                                                 \
        const int rc = td_part_check(arrs, td_code_##S, 1, &R, &C);                     \
        if (rc) return rc;                                                              \
        const T *x = TD_F(arrs[0], TD_OFF_DATA, const T *);                             \
        T *o = TD_F(arrs[1], TD_OFF_DATA, T *);                                         \
        if (C == 1) {                                                                   \
            o[0] = (T)0 + td_pairwise_##S(x, R);                                        \
            return 0;                                                                   \
        }                                                                               \
        for (ptrdiff_t j = 0; j < C; j++) o[j] = 0;                                     \
        for (ptrdiff_t i = 0; i < R; i++)                                               \
            for (ptrdiff_t j = 0; j < C; j++) o[j] += x[i * C + j];                     \
        return 0;                                                                       \
    }                                                                                   \
    int td_sumtrail_##S##_v(void **arrs)                                                \
    {                                                                                   \
        ptrdiff_t R, C;                                                                 \
        const int rc = td_part_check(arrs, td_code_##S, 0, &R, &C);                     \
        if (rc) return rc;                                                              \
        const T *x = TD_F(arrs[0], TD_OFF_DATA, const T *);                             \
        T *o = TD_F(arrs[1], TD_OFF_DATA, T *);                                         \
        for (ptrdiff_t i = 0; i < R; i++) o[i] = (T)0 + td_pairwise_##S(x + i * C, C);  \
        return 0;                                                                       \
    }                                                                                   \
    int td_sumlead_##S(void *x, void *o)                                                \
    {                                                                                   \
        void *arrs[2] = {x, o};                                                         \
        return td_sumlead_##S##_v(arrs);                                                \
    }                                                                                   \
    int td_sumtrail_##S(void *x, void *o)                                               \
    {                                                                                   \
        void *arrs[2] = {x, o};                                                         \
        return td_sumtrail_##S##_v(arrs);                                               \
    }

enum { td_code_f64 = 10, td_code_f32 = 9 };
TD_PARTIAL(double, f64)
TD_PARTIAL(float, f32)

/* td_maxtrail_* and td_mintrail_*: the maximum or the minimum over the last axis of a
   C-contiguous float array of at least two axes into a C-contiguous array of the other
   axes, as numpy's maximum.reduce (minimum.reduce) gives it there, bit for bit: each row
   folded in order by the elementwise maximum's choice, NaN taking over and the second
   of two equal values (of two signed zeros) kept, which is numpy's (reduce_last_axis's
   columns) on a row of 1 to 4 values. On a longer row numpy's SIMD loop may pick
   another zero or NaN, so a row whose result is a zero or a NaN (whose bits only then
   depend on the order) returns an error code, as does an array of more than 16384
   values (numpy's vector loop is faster there), an empty axis and any other layout:
   the engine then runs numpy over the whole array. */
#define TD_SELECTTRAIL(T, S, NAME, CMP)                                                 \
    int NAME##_##S##_v(void **arrs)                                                     \
    {                                                                                   \
        ptrdiff_t R, C;                                                                 \
        const int rc = td_part_check(arrs, td_code_##S, 0, &R, &C);                     \
        if (rc) return rc;                                                              \
        const int nx = TD_F(arrs[0], TD_OFF_ND, int);                                   \
        const ptrdiff_t *xd = TD_F(arrs[0], TD_OFF_DIMS, const ptrdiff_t *);            \
        const ptrdiff_t n = xd[nx - 1];                                                 \
        if (n < 1 || TD_F(arrs[1], TD_OFF_ND, int) != nx - 1)                          \
            return TD_ERR(TD_ESHAPE, 0);                                                \
        const int exact = n <= 4;                                                       \
        if (!exact && R * n > 16384) return TD_ERR(TD_ESHAPE, 0);                       \
        const T *x = TD_F(arrs[0], TD_OFF_DATA, const T *);                             \
        T *o = TD_F(arrs[1], TD_OFF_DATA, T *);                                         \
        for (ptrdiff_t i = 0; i < R; i++) {                                             \
            const T *row = x + i * n;                                                   \
            T r = row[0];                                                               \
            for (ptrdiff_t j = 1; j < n; j++) {                                         \
                const T y = row[j];                                                     \
                r = (y != y) ? y : (!(r CMP y) ? r : y);                                \
            }                                                                           \
            if (!exact && (r != r || r == 0)) return TD_ERR(TD_ESHAPE, 0);              \
            o[i] = r;                                                                   \
        }                                                                               \
        return 0;                                                                       \
    }                                                                                   \
    int NAME##_##S(void *x, void *o)                                                    \
    {                                                                                   \
        void *arrs[2] = {x, o};                                                         \
        return NAME##_##S##_v(arrs);                                                    \
    }

TD_SELECTTRAIL(double, f64, td_maxtrail, <=)
TD_SELECTTRAIL(float, f32, td_maxtrail, <=)
TD_SELECTTRAIL(double, f64, td_mintrail, >=)
TD_SELECTTRAIL(float, f32, td_mintrail, >=)
