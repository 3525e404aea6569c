/*! Small matrix-vector products as steps of a segment: td_mv_* (out = A @ x),
   td_vm_* (out = x @ A) and td_gemv_* (out = beta * y + alpha * (A @ x), rounded as
   the engine's numpy steps round it: y * beta, the product times alpha, then their
   sum). A plain loop over any strides: below TD_MV_MAX elements of A numpy's call
   (about 0.5 us) costs more than the product. A larger A, or any operand of another
   type, dtype, rank or shape, returns an error code before anything is written, and
   the engine runs numpy (BLAS) instead. In the step library, after the sums. */
#define TD_MV_MAX 16384
#define TD_MV_LOCAL 256
enum { TD_EBIG = 6 };

/* The checks shared by the three: operand k of ops is an ndarray of dtype code and
   rank nd. */
static int td_mv_operand(void *a, int code, int nd, int k)
{
    if (TD_F(a, TD_OFF_TYPE, const void *) != td_ndarray) return TD_ERR(TD_ETYPE, k);
    if (TD_F(a, TD_OFF_DESCR, const void *) != td_descr[code]) return TD_ERR(TD_EDTYPE, k);
    if (TD_F(a, TD_OFF_ND, int) != nd) return TD_ERR(TD_ENDIM, k);
    return 0;
}

#define TD_DIM(a, d) (TD_F(a, TD_OFF_DIMS, const ptrdiff_t *)[d])
#define TD_STR(a, d) (TD_F(a, TD_OFF_STRIDES, const ptrdiff_t *)[d])

/* The byte range [lo, hi) an array's elements span. */
static void td_extent(void *a, int es, char **lo, char **hi)
{
    const int nd = TD_F(a, TD_OFF_ND, int);
    char *p = TD_F(a, TD_OFF_DATA, char *);
    ptrdiff_t l = 0, h = es;
    for (int d = 0; d < nd; d++) {
        const ptrdiff_t n = TD_DIM(a, d), s = TD_STR(a, d);
        if (n == 0) { *lo = *hi = p; return; }
        if (s < 0) l += (n - 1) * s; else h += (n - 1) * s;
    }
    *lo = p + l;
    *hi = p + h;
}

/* Whether the elements of arrays a and b share memory (by their byte ranges). */
static int td_overlap(void *a, void *b, int es)
{
    char *al, *ah, *bl, *bh;
    td_extent(a, es, &al, &ah);
    td_extent(b, es, &bl, &bh);
    return al < bh && bl < ah;
}

/* buf[i] = sum_j A[i, j] * x[j] for the m x n matrix at a with byte strides (s0, s1)
   and the vector at x with byte stride sx: four partial sums over j (a chain of
   additions one after the other waits on each one's latency), then their sum. A short
   row (n < 8) is summed column by column instead, all rows at once: no chain then. buf
   shares no memory with the operands. */
#define TD_MV_CORE(T, S)                                                                \
    static void td_mv_core_##S(const char *a, ptrdiff_t m, ptrdiff_t n, ptrdiff_t s0,   \
                               ptrdiff_t s1, const char *x, ptrdiff_t sx,               \
                               T *restrict buf)                                         \
    {                                                                                   \
        if (n < 8) {                                                                    \
            for (ptrdiff_t i = 0; i < m; i++) buf[i] = 0;                               \
            for (ptrdiff_t j = 0; j < n; j++) {                                         \
                const T xj = *(const T *)(x + j * sx);                                  \
                const char *col = a + j * s1;                                           \
                for (ptrdiff_t i = 0; i < m; i++) buf[i] += *(const T *)(col + i * s0) * xj; \
            }                                                                           \
            return;                                                                     \
        }                                                                               \
        if (s1 == (ptrdiff_t)sizeof(T) && sx == (ptrdiff_t)sizeof(T)) {                 \
            /* contiguous rows: eight partial sums, a vector loop */                    \
            const T *xv = (const T *)x;                                                 \
            for (ptrdiff_t i = 0; i < m; i++) {                                         \
                const T *r = (const T *)(a + i * s0);                                   \
                T p[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                      \
                ptrdiff_t j = 0;                                                        \
                for (; j + 8 <= n; j += 8)                                              \
                    for (int k = 0; k < 8; k++) p[k] += r[j + k] * xv[j + k];           \
                for (; j < n; j++) p[0] += r[j] * xv[j];                                \
                buf[i] = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7])); \
            }                                                                           \
            return;                                                                     \
        }                                                                               \
        for (ptrdiff_t i = 0; i < m; i++) {                                             \
            const char *row = a + i * s0;                                               \
            T p0 = 0, p1 = 0, p2 = 0, p3 = 0;                                           \
            ptrdiff_t j = 0;                                                            \
            for (; j + 4 <= n; j += 4) {                                                \
                p0 += *(const T *)(row + j * s1) * *(const T *)(x + j * sx);            \
                p1 += *(const T *)(row + (j + 1) * s1) * *(const T *)(x + (j + 1) * sx); \
                p2 += *(const T *)(row + (j + 2) * s1) * *(const T *)(x + (j + 2) * sx); \
                p3 += *(const T *)(row + (j + 3) * s1) * *(const T *)(x + (j + 3) * sx); \
            }                                                                           \
            for (; j < n; j++) p0 += *(const T *)(row + j * s1) * *(const T *)(x + j * sx); \
            buf[i] = (p0 + p1) + (p2 + p3);                                             \
        }                                                                               \
    }

TD_MV_CORE(double, f64)
TD_MV_CORE(float, f32)

/* The product of the matrix mat (transposed when trans) and the vector vec into buf,
   after the checks; out is the 1-d result (position ko), its length checked. */
#define TD_MV_RUN(T, S)                                                                 \
    static int td_mv_run_##S(void *mat, int km, void *vec, int kv, void *out, int ko,   \
                             int trans, int force, T **bufp, T *local, ptrdiff_t nlocal, \
                             ptrdiff_t *len)                                            \
    {                                                                                   \
        int rc;                                                                         \
        if ((rc = td_mv_operand(mat, td_code_##S, 2, km))) return rc;                   \
        if ((rc = td_mv_operand(vec, td_code_##S, 1, kv))) return rc;                   \
        if ((rc = td_mv_operand(out, td_code_##S, 1, ko))) return rc;                   \
        ptrdiff_t m = TD_DIM(mat, 0), n = TD_DIM(mat, 1);                               \
        ptrdiff_t s0 = TD_STR(mat, 0), s1 = TD_STR(mat, 1);                             \
        if (trans) {                                                                    \
            ptrdiff_t t = m; m = n; n = t;                                              \
            t = s0; s0 = s1; s1 = t;                                                    \
        }                                                                               \
        if (TD_DIM(vec, 0) != n) return TD_ERR(TD_ESHAPE, kv);                          \
        if (TD_DIM(out, 0) != m) return TD_ERR(TD_ESHAPE, ko);                          \
        if (m * n > TD_MV_MAX || m > TD_MV_MAX) return TD_ERR(TD_EBIG, km);             \
        /* Straight into out, unless out shares memory with an operand: then through a \
           buffer, written once every operand was read. */                              \
        T *buf = TD_F(out, TD_OFF_DATA, T *);                                           \
        if (force || TD_STR(out, 0) != (ptrdiff_t)sizeof(T) ||                          \
            td_overlap(out, mat, sizeof(T)) ||                                          \
            td_overlap(out, vec, sizeof(T))) {                                          \
            buf = m <= nlocal ? local : (T *)malloc(sizeof(T) * (m ? m : 1));           \
            if (buf == NULL) return TD_ERR(TD_ENOMEM, ko);                              \
        }                                                                               \
        td_mv_core_##S(TD_F(mat, TD_OFF_DATA, const char *), m, n, s0, s1,              \
                       TD_F(vec, TD_OFF_DATA, const char *), TD_STR(vec, 0), buf);      \
        *bufp = buf;                                                                    \
        *len = m;                                                                       \
        return 0;                                                                       \
    }

TD_MV_RUN(double, f64)
TD_MV_RUN(float, f32)

/* The entry points: operands checked, then the product (through a buffer where out
   shares memory with an operand: written once every element of them was read). */
#define TD_MV_ENTRIES(T, S)                                                             \
    static int td_mv2_##S(void **ops, int trans)                                        \
    {                                                                                   \
        T local[TD_MV_LOCAL], *buf;                                                     \
        ptrdiff_t m;                                                                    \
        const int km = trans ? 1 : 0, kv = trans ? 0 : 1;                               \
        const int rc = td_mv_run_##S(ops[km], km, ops[kv], kv, ops[2], 2, trans, 0, &buf, \
                                     local, TD_MV_LOCAL, &m);                           \
        if (rc) return rc;                                                              \
        char *o = TD_F(ops[2], TD_OFF_DATA, char *);                                    \
        if (buf != (T *)o) {                                                            \
            const ptrdiff_t so = TD_STR(ops[2], 0);                                     \
            for (ptrdiff_t i = 0; i < m; i++) *(T *)(o + i * so) = buf[i];              \
            if (buf != local) free(buf);                                                \
        }                                                                               \
        return 0;                                                                       \
    }                                                                                   \
    int td_mv_##S##_v(void **ops) { return td_mv2_##S(ops, 0); }                        \
    int td_vm_##S##_v(void **ops) { return td_mv2_##S(ops, 1); }                        \
    int td_gemv_##S##_v(void **ops)                                                     \
    {                                                                                   \
        T local[TD_MV_LOCAL], *buf;                                                     \
        ptrdiff_t m;                                                                    \
        int rc;                                                                         \
        if ((rc = td_mv_operand(ops[0], td_code_##S, 1, 0))) return rc;                 \
        if ((rc = td_mv_operand(ops[1], td_code_##S, 0, 1))) return rc;                 \
        if ((rc = td_mv_operand(ops[4], td_code_##S, 0, 4))) return rc;                 \
        if (TD_DIM(ops[0], 0) != TD_DIM(ops[5], 0)) return TD_ERR(TD_ESHAPE, 0);        \
        /* y is read at the element written: out is y itself (the product through the \
           buffer then), or apart from it. */                                           \
        const int same = td_overlap(ops[0], ops[5], sizeof(T));                         \
        if (same && (TD_F(ops[0], TD_OFF_DATA, char *) != TD_F(ops[5], TD_OFF_DATA, char *) \
                     || TD_STR(ops[0], 0) != TD_STR(ops[5], 0)))                        \
            return TD_ERR(TD_ESHAPE, 0);                                                \
        if ((rc = td_mv_run_##S(ops[2], 2, ops[3], 3, ops[5], 5, 0, same, &buf, local,   \
                                TD_MV_LOCAL, &m)))                                      \
            return rc;                                                                  \
        const T a = *TD_F(ops[1], TD_OFF_DATA, const T *);                              \
        const T b = *TD_F(ops[4], TD_OFF_DATA, const T *);                              \
        const char *y = TD_F(ops[0], TD_OFF_DATA, const char *);                        \
        char *o = TD_F(ops[5], TD_OFF_DATA, char *);                                    \
        const ptrdiff_t sy = TD_STR(ops[0], 0), so = TD_STR(ops[5], 0);                 \
        for (ptrdiff_t i = 0; i < m; i++) {                                             \
            T t = buf[i], r;                                                            \
            if (b == 0) {                                                               \
                r = t * a;                                                              \
            } else {                                                                    \
                const T yi = *(const T *)(y + i * sy);                                  \
                const T zb = b == 1 ? yi : yi * b;                                      \
                if (a != 1) t = t * a;                                                  \
                r = zb + t;                                                             \
            }                                                                           \
            *(T *)(o + i * so) = r;                                                     \
        }                                                                               \
        if (buf != (T *)o && buf != local) free(buf);                                   \
        return 0;                                                                       \
    }

TD_MV_ENTRIES(double, f64)
TD_MV_ENTRIES(float, f32)

/* td_setsub_* / td_incsub_*: x[index] = y or x[index] += y, in place, for an index of
   known integers and slices, as a step of a segment. ops: x, y, and a 1-d int64 array
   encoding the index: per entry of the index 0, i (an integer) or 1, start, stop, step
   (a slice, TD_NONE for a bound left out); x's axes after them are taken whole. y
   broadcasts to the indexed region as numpy's assignment broadcasts it. An index out
   of range, a y that does not broadcast, a y sharing memory with x, or any operand of
   another type or dtype returns an error code before anything is written: the engine
   runs numpy instead (which raises its own error). */
#define TD_NONE INT64_MIN
#define TD_SUB_MAXD 32

static ptrdiff_t td_bound(int64_t v, ptrdiff_t len, ptrdiff_t step, int is_start)
{
    if (v == TD_NONE) return is_start ? (step < 0 ? len - 1 : 0) : (step < 0 ? -1 : len);
    if (v < 0) {
        v += len;
        if (v < 0) return step < 0 ? -1 : 0;
        return v;
    }
    if (v >= len) return step < 0 ? len - 1 : len;
    return v;
}

static int td_sub_region(void **ops, int code, char **base, int *rnd, ptrdiff_t *shape,
                         ptrdiff_t *st)
{
    int rc;
    if ((rc = td_mv_operand(ops[0], code, TD_F(ops[0], TD_OFF_ND, int), 0))) return rc;
    if ((rc = td_mv_operand(ops[1], code, TD_F(ops[1], TD_OFF_ND, int), 1))) return rc;
    if ((rc = td_mv_operand(ops[2], 4, 1, 2))) return rc;  /* int64 */
    void *x = ops[0];
    const int nx = TD_F(x, TD_OFF_ND, int);
    const int64_t *ix = TD_F(ops[2], TD_OFF_DATA, const int64_t *);
    const ptrdiff_t nix = TD_DIM(ops[2], 0);
    char *p = TD_F(x, TD_OFF_DATA, char *);
    int d = 0, r = 0;
    for (ptrdiff_t k = 0; k < nix;) {
        if (d >= nx || r >= TD_SUB_MAXD) return TD_ERR(TD_ENDIM, 0);
        const ptrdiff_t len = TD_DIM(x, d), s = TD_STR(x, d);
        if (ix[k] == 0) {
            int64_t i = ix[k + 1];
            if (i < 0) i += len;
            if (i < 0 || i >= len) return TD_ERR(TD_ESHAPE, 0);
            p += i * s;
            k += 2;
        } else {
            const int64_t step = ix[k + 3] == TD_NONE ? 1 : ix[k + 3];
            if (step == 0) return TD_ERR(TD_ESHAPE, 0);
            const ptrdiff_t a = td_bound(ix[k + 1], len, step, 1);
            const ptrdiff_t b = td_bound(ix[k + 2], len, step, 0);
            ptrdiff_t n = 0;
            if (step > 0 && a < b) n = (b - a - 1) / step + 1;
            if (step < 0 && b < a) n = (a - b - 1) / (-step) + 1;
            if (n > 0) p += a * s;
            shape[r] = n;
            st[r] = s * step;
            r++;
            k += 4;
        }
        d++;
    }
    for (; d < nx; d++, r++) {
        if (r >= TD_SUB_MAXD) return TD_ERR(TD_ENDIM, 0);
        shape[r] = TD_DIM(x, d);
        st[r] = TD_STR(x, d);
    }
    *base = p;
    *rnd = r;
    return 0;
}

#define TD_SUB(T, S)                                                                    \
    static int td_sub_##S(void **ops, int inc)                                          \
    {                                                                                   \
        char *p;                                                                        \
        int r;                                                                          \
        ptrdiff_t shape[TD_SUB_MAXD], st[TD_SUB_MAXD], ys[TD_SUB_MAXD], idx[TD_SUB_MAXD]; \
        int rc = td_sub_region(ops, td_code_##S, &p, &r, shape, st);                    \
        if (rc) return rc;                                                              \
        void *y = ops[1];                                                               \
        const int ny = TD_F(y, TD_OFF_ND, int);                                         \
        if (ny > r) return TD_ERR(TD_ENDIM, 1);                                         \
        ptrdiff_t n = 1;                                                                \
        for (int d = 0; d < r; d++) {                                                   \
            const int e = d - (r - ny);                                                 \
            ys[d] = 0;                                                                  \
            if (e >= 0) {                                                               \
                const ptrdiff_t yd = TD_DIM(y, e);                                      \
                if (yd == shape[d]) ys[d] = TD_STR(y, e);                               \
                else if (yd != 1) return TD_ERR(TD_ESHAPE, 1);                          \
            }                                                                           \
            n *= shape[d];                                                              \
            idx[d] = 0;                                                                 \
        }                                                                               \
        if (n == 0) return 0;                                                           \
        char *xl, *xh, *yl, *yh;                                                        \
        td_extent(ops[0], sizeof(T), &xl, &xh);                                         \
        td_extent(y, sizeof(T), &yl, &yh);                                              \
        if (yl < xh && xl < yh) return TD_ERR(TD_ESHAPE, 1);                            \
        const char *q = TD_F(y, TD_OFF_DATA, const char *);                             \
        for (ptrdiff_t i = 0; i < n; i++) {                                             \
            if (inc) *(T *)p += *(const T *)q;                                          \
            else *(T *)p = *(const T *)q;                                               \
            for (int d = r - 1; d >= 0; d--) {                                          \
                p += st[d];                                                             \
                q += ys[d];                                                             \
                if (++idx[d] < shape[d]) break;                                         \
                p -= st[d] * shape[d];                                                  \
                q -= ys[d] * shape[d];                                                  \
                idx[d] = 0;                                                             \
            }                                                                           \
        }                                                                               \
        return 0;                                                                       \
    }                                                                                   \
    int td_setsub_##S##_v(void **ops) { return td_sub_##S(ops, 0); }                    \
    int td_incsub_##S##_v(void **ops) { return td_sub_##S(ops, 1); }

TD_SUB(double, f64)
TD_SUB(float, f32)

/* td_take_* (out = x[i]) and td_setrows_* / td_incrows_* (x[i] = y, x[i] += y in place,
   repeated rows accumulating as numpy's add.at), for a float vector or matrix x (its
   rows) and an int64 vector i, as steps of a segment. ops: x, i, out for take; x, y, i
   for set and inc (y broadcasts to x[i] as numpy's assignment broadcasts it). Every
   index is checked before anything is written: a negative one counts from the end as
   numpy's do, one out of range, a y that does not broadcast or shares memory with x,
   an out that shares memory with x, or any operand of another type, dtype or rank
   returns an error code, and the engine runs numpy instead (which raises its own
   IndexError). */

/* The index vector at ops[k] (int64, 1-d), each entry within -len..len-1. */
static int td_rows_index(void *ix, int k, ptrdiff_t len, const char **p, ptrdiff_t *n,
                         ptrdiff_t *s)
{
    int rc;
    if ((rc = td_mv_operand(ix, 4, 1, k))) return rc; /* int64 */
    *p = TD_F(ix, TD_OFF_DATA, const char *);
    *n = TD_DIM(ix, 0);
    *s = TD_STR(ix, 0);
    for (ptrdiff_t j = 0; j < *n; j++) {
        const int64_t i = *(const int64_t *)(*p + j * *s);
        if (i < -(int64_t)len || i >= (int64_t)len) return TD_ERR(TD_ESHAPE, k);
    }
    return 0;
}

/* Row j of the index (checked by td_rows_index), a negative one counted from the end. */
static inline ptrdiff_t td_row_at(const char *p, ptrdiff_t s, ptrdiff_t j, ptrdiff_t len)
{
    const int64_t i = *(const int64_t *)(p + j * s);
    return (ptrdiff_t)(i < 0 ? i + len : i);
}

#define TD_ROWS(T, S)                                                                   \
    int td_take_##S##_v(void **ops)                                                     \
    {                                                                                   \
        void *x = ops[0], *out = ops[2];                                                \
        int rc;                                                                         \
        const int nd = TD_F(x, TD_OFF_ND, int);                                         \
        if (nd != 1 && nd != 2) return TD_ERR(TD_ENDIM, 0);                             \
        if ((rc = td_mv_operand(x, td_code_##S, nd, 0))) return rc;                     \
        if ((rc = td_mv_operand(out, td_code_##S, nd, 2))) return rc;                   \
        const ptrdiff_t len = TD_DIM(x, 0), m = nd == 2 ? TD_DIM(x, 1) : 1;             \
        const char *ip;                                                                 \
        ptrdiff_t n, si;                                                                \
        if ((rc = td_rows_index(ops[1], 1, len, &ip, &n, &si))) return rc;              \
        if (TD_DIM(out, 0) != n || (nd == 2 && TD_DIM(out, 1) != m))                    \
            return TD_ERR(TD_ESHAPE, 2);                                                \
        if (td_overlap(out, x, sizeof(T))) return TD_ERR(TD_ESHAPE, 2);                 \
        const char *xp = TD_F(x, TD_OFF_DATA, const char *);                            \
        char *op = TD_F(out, TD_OFF_DATA, char *);                                      \
        const ptrdiff_t sx0 = TD_STR(x, 0), so0 = TD_STR(out, 0);                       \
        const ptrdiff_t sx1 = nd == 2 ? TD_STR(x, 1) : 0, so1 = nd == 2 ? TD_STR(out, 1) : 0; \
        for (ptrdiff_t j = 0; j < n; j++) {                                             \
            const char *r = xp + td_row_at(ip, si, j, len) * sx0;                       \
            char *o = op + j * so0;                                                     \
            for (ptrdiff_t c = 0; c < m; c++) *(T *)(o + c * so1) = *(const T *)(r + c * sx1); \
        }                                                                               \
        return 0;                                                                       \
    }                                                                                   \
    static int td_rows_##S(void **ops, int inc)                                         \
    {                                                                                   \
        void *x = ops[0], *y = ops[1];                                                  \
        int rc;                                                                         \
        const int nd = TD_F(x, TD_OFF_ND, int), ny = TD_F(y, TD_OFF_ND, int);           \
        if (nd != 1 && nd != 2) return TD_ERR(TD_ENDIM, 0);                             \
        if (ny > nd) return TD_ERR(TD_ENDIM, 1);                                        \
        if ((rc = td_mv_operand(x, td_code_##S, nd, 0))) return rc;                     \
        if ((rc = td_mv_operand(y, td_code_##S, ny, 1))) return rc;                     \
        const ptrdiff_t len = TD_DIM(x, 0), m = nd == 2 ? TD_DIM(x, 1) : 1;             \
        const char *ip;                                                                 \
        ptrdiff_t n, si;                                                                \
        if ((rc = td_rows_index(ops[2], 2, len, &ip, &n, &si))) return rc;              \
        /* y's strides over the region (n, m): 0 along an axis it broadcasts over */    \
        ptrdiff_t want[2] = {n, m}, ys[2] = {0, 0};                                     \
        const int r = nd;                                                               \
        for (int d = 0; d < r; d++) {                                                   \
            const int e = d - (r - ny);                                                 \
            if (e < 0) continue;                                                        \
            const ptrdiff_t yd = TD_DIM(y, e);                                          \
            if (yd == want[d]) ys[d] = TD_STR(y, e);                                    \
            else if (yd != 1) return TD_ERR(TD_ESHAPE, 1);                              \
        }                                                                               \
        if (n == 0 || m == 0) return 0;                                                 \
        if (td_overlap(x, y, sizeof(T))) return TD_ERR(TD_ESHAPE, 1);                   \
        char *xp = TD_F(x, TD_OFF_DATA, char *);                                        \
        const char *yp = TD_F(y, TD_OFF_DATA, const char *);                            \
        const ptrdiff_t sx0 = TD_STR(x, 0), sx1 = nd == 2 ? TD_STR(x, 1) : 0;           \
        const ptrdiff_t ys0 = ys[0], ys1 = nd == 2 ? ys[1] : 0;                         \
        for (ptrdiff_t j = 0; j < n; j++) {                                             \
            char *row = xp + td_row_at(ip, si, j, len) * sx0;                           \
            const char *q = yp + j * ys0;                                               \
            if (inc)                                                                    \
                for (ptrdiff_t c = 0; c < m; c++)                                       \
                    *(T *)(row + c * sx1) += *(const T *)(q + c * ys1);                 \
            else                                                                        \
                for (ptrdiff_t c = 0; c < m; c++)                                       \
                    *(T *)(row + c * sx1) = *(const T *)(q + c * ys1);                  \
        }                                                                               \
        return 0;                                                                       \
    }                                                                                   \
    int td_setrows_##S##_v(void **ops) { return td_rows_##S(ops, 0); }                  \
    int td_incrows_##S##_v(void **ops) { return td_rows_##S(ops, 1); }

TD_ROWS(double, f64)
TD_ROWS(float, f32)
