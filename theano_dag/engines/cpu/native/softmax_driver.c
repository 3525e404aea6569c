/*! Softmax, LogSoftmax and SoftmaxGrad along one axis as steps of a segment:
   td_softmax_*, td_logsoftmax_* (ops: x, axis, out) and td_smgrad_* (ops: dy, sm, axis,
   out), axis a 0-d int64 array. Each computes what the op's perform computes, in its
   order: the max of a lane subtracted first (an entry equal to a maximum of +inf gives
   0, the rest -inf; a NaN makes the lane NaN), exp, the sum of the lane as numpy's
   add.reduce sums it on a C-contiguous array (0 plus the pairwise sum of a contiguous
   last axis; 0 plus the values in order along another axis), then the quotient (or
   z - log(sum), or dy * sm - sm * sum(dy * sm)). The values differ from numpy's only
   where libm's exp and log round otherwise than numpy's (an ulp or so), and for a
   float32 LogSoftmax, whose sum, log and last subtraction are in double: in float32
   their roundings added up to 4.4 ulps (numpy's too), now about 1.5.

   Why: the perform of a softmax of a few hundred values cost 10-40 us of numpy calls
   (a sampler's mixture weights, a classifier's batch); here it is one step of a segment.
   Operands of another type, dtype, rank or shape, an input that is not C-contiguous,
   an output that shares memory with an input: an error code before anything is
   written, and the engine runs the op's perform instead. Along an axis of length 0
   the output is empty, as numpy's softmax written out is. Appended to the libraries
   that use it (KernelLibrary.extras). */
#define TD_SM_CHUNK 256

/* The lengths of the lanes (n), of the axes before the axis (outer) and after it
   (inner), after checking ops[0 .. nin) and the output ops[nin + 1]: ndarrays of dtype
   code, of one shape, C-contiguous, the output sharing no memory with an input; ops[nin]
   the axis, a 0-d int64 array in range. */
static int td_sm_check(void **ops, int nin, int code, ptrdiff_t *outer, ptrdiff_t *n,
                       ptrdiff_t *inner)
{
    void *out = ops[nin + 1], *ax = ops[nin];
    const int nd = TD_F(out, TD_OFF_ND, int);
    for (int k = 0; k < nin + 2; k++) {
        if (k == nin) continue;
        void *a = ops[k];
        if (TD_F(a, TD_OFF_TYPE, const void *) != td_ndarray) return TD_ERR(TD_ETYPE, k);
        if (TD_F(a, TD_OFF_DESCR, const void *) != td_descr[code]) return TD_ERR(TD_EDTYPE, k);
        if (TD_F(a, TD_OFF_ND, int) != nd) return TD_ERR(TD_ENDIM, k);
        for (int d = 0; d < nd; d++)
            if (TD_DIM(a, d) != TD_DIM(out, d)) return TD_ERR(TD_ESHAPE, k);
        if (!td_contig(a, code)) return TD_ERR(TD_ESHAPE, k);
        if (k < nin && td_overlap(a, out, td_size[code])) return TD_ERR(TD_ESHAPE, nin + 1);
    }
    if (TD_F(ax, TD_OFF_TYPE, const void *) != td_ndarray) return TD_ERR(TD_ETYPE, nin);
    if (TD_F(ax, TD_OFF_DESCR, const void *) != td_descr[4]) return TD_ERR(TD_EDTYPE, nin);
    if (TD_F(ax, TD_OFF_ND, int) != 0) return TD_ERR(TD_ENDIM, nin);
    const int64_t axis = *TD_F(ax, TD_OFF_DATA, const int64_t *);
    if (axis < 0 || axis >= nd) return TD_ERR(TD_ESHAPE, nin);
    *outer = *inner = 1;
    for (int d = 0; d < nd; d++) {
        if (d < axis) *outer *= TD_DIM(out, d);
        if (d > axis) *inner *= TD_DIM(out, d);
    }
    *n = TD_DIM(out, axis);
    return 0;
}

/* x - m, the entry of a lane less its max m, as _minus_max computes it: 0 where both
   are +inf (the softmax's limit puts the lane's mass on its infinite entries). */
#define TD_SM_Z(v, m) (((m) == INFINITY && (v) == INFINITY) ? 0 : (v) - (m))
/* The max of m and v, NaN once either is (numpy's maximum). */
#define TD_SM_MAX(m, v) (((v) > (m) || (v) != (v)) ? (v) : (m))

/* F over v[0 .. n) in place, in whole vectors only (td_turns): equal entries of one lane
   gave unequal results where libm's scalar F computed the values a vector left over. */
#define TD_TURNS(T, S, F)                                                               \
    static void td_##F##_all_##S(char **p, ptrdiff_t n)                                \
    {                                                                                   \
        const T *x = (const T *)p[0];                                                   \
        T *o = (T *)p[1];                                                               \
        _Pragma("omp simd")                                                             \
        for (ptrdiff_t k = 0; k < n; k++) o[k] = F(x[k]);                               \
    }                                                                                   \
    static void td_##F##_turns_##S(T *v, ptrdiff_t n)                                   \
    {                                                                                   \
        static const int es[2] = {sizeof(T), sizeof(T)};                                \
        char *p[2] = {(char *)v, (char *)v};                                            \
        td_turns(p, n, TD_VECTOR_BYTES / sizeof(T), 1, 2, es, td_##F##_all_##S);        \
    }
TD_TURNS(double, f64, exp)
TD_TURNS(float, f32, exp)
TD_TURNS(double, f64, log)

#define TD_SOFTMAX(T, S)                                                                \
    /* Rows of n contiguous values (the last axis), x to o, log_ for LogSoftmax: up to  \
       TD_SM_CHUNK rows at a time, each pass over all of them (the exp and log of short \
       rows in one vector loop, not a few calls a row). */                             \
    static void td_smrows_##S(const T *restrict x, T *restrict o, ptrdiff_t rows,       \
                              ptrdiff_t n, int log_)                                    \
    {                                                                                   \
        T m[TD_SM_CHUNK], s[TD_SM_CHUNK];                                               \
        double ls[TD_SM_CHUNK];                                                         \
        for (ptrdiff_t r0 = 0; r0 < rows; r0 += TD_SM_CHUNK) {                          \
            const ptrdiff_t h = rows - r0 < TD_SM_CHUNK ? rows - r0 : TD_SM_CHUNK;      \
            const T *xb = x + r0 * n;                                                   \
            T *ob = o + r0 * n;                                                         \
            for (ptrdiff_t r = 0; r < h; r++) {                                         \
                const T *xr = xb + r * n;                                               \
                T mr = xr[0];                                                           \
                for (ptrdiff_t k = 1; k < n; k++) mr = TD_SM_MAX(mr, xr[k]);            \
                m[r] = mr;                                                              \
                for (ptrdiff_t k = 0; k < n; k++) ob[r * n + k] = TD_SM_Z(xr[k], mr);   \
            }                                                                           \
            const ptrdiff_t len = h * n;                                                \
            td_exp_turns_##S(ob, len);                                                  \
            if (!log_) {                                                                \
                for (ptrdiff_t r = 0; r < h; r++)                                       \
                    s[r] = (T)0 + td_pairwise_##S(ob + r * n, n);                       \
                for (ptrdiff_t r = 0; r < h; r++)                                       \
                    for (ptrdiff_t k = 0; k < n; k++) ob[r * n + k] = ob[r * n + k] / s[r]; \
                continue;                                                               \
            }                                                                           \
            for (ptrdiff_t r = 0; r < h; r++) {                                         \
                if (sizeof(T) == sizeof(double)) {                                      \
                    ls[r] = (T)0 + td_pairwise_##S(ob + r * n, n);                      \
                } else {                                                                \
                    double acc = 0;                                                     \
                    for (ptrdiff_t k = 0; k < n; k++) acc += ob[r * n + k];             \
                    ls[r] = acc;                                                        \
                }                                                                       \
            }                                                                           \
            td_log_turns_f64(ls, h);                                                    \
            for (ptrdiff_t r = 0; r < h; r++)                                           \
                for (ptrdiff_t k = 0; k < n; k++)                                       \
                    ob[r * n + k] =                                                     \
                        (T)(TD_SM_Z((double)xb[r * n + k], (double)m[r]) - ls[r]);      \
        }                                                                               \
    }                                                                                   \
    /* Lanes along an axis of stride inner (values): w lanes side by side at a time. */ \
    static void td_smcols_##S(const T *restrict x, T *restrict o, ptrdiff_t n,          \
                              ptrdiff_t inner, int log_)                                \
    {                                                                                   \
        T m[TD_SM_CHUNK];                                                               \
        /* (in double for a float32 LogSoftmax: see the top) */                         \
        double s[TD_SM_CHUNK];                                                          \
        for (ptrdiff_t i0 = 0; i0 < inner; i0 += TD_SM_CHUNK) {                         \
            const ptrdiff_t w = inner - i0 < TD_SM_CHUNK ? inner - i0 : TD_SM_CHUNK;    \
            const T *xb = x + i0;                                                       \
            T *ob = o + i0;                                                             \
            for (ptrdiff_t i = 0; i < w; i++) { m[i] = xb[i]; s[i] = 0; }               \
            for (ptrdiff_t k = 1; k < n; k++)                                           \
                for (ptrdiff_t i = 0; i < w; i++) m[i] = TD_SM_MAX(m[i], xb[k * inner + i]); \
            for (ptrdiff_t k = 0; k < n; k++) {                                         \
                const T *xk = xb + k * inner;                                           \
                T *ok = ob + k * inner;                                                 \
                for (ptrdiff_t i = 0; i < w; i++) ok[i] = TD_SM_Z(xk[i], m[i]);         \
                td_exp_turns_##S(ok, w);                                                \
                if (log_ || sizeof(T) == sizeof(double))                                \
                    for (ptrdiff_t i = 0; i < w; i++) s[i] += ok[i];                    \
                else /* the softmax of floats: numpy's float32 sum */                   \
                    for (ptrdiff_t i = 0; i < w; i++) s[i] = (T)((T)s[i] + ok[i]);      \
            }                                                                           \
            if (log_) td_log_turns_f64(s, w);                                           \
            for (ptrdiff_t k = 0; k < n; k++) {                                         \
                const T *xk = xb + k * inner;                                           \
                T *ok = ob + k * inner;                                                 \
                if (log_)                                                               \
                    for (ptrdiff_t i = 0; i < w; i++)                                   \
                        ok[i] = (T)(TD_SM_Z((double)xk[i], (double)m[i]) - s[i]);       \
                else                                                                    \
                    for (ptrdiff_t i = 0; i < w; i++) ok[i] = ok[i] / (T)s[i];          \
            }                                                                           \
        }                                                                               \
    }                                                                                   \
    static int td_sm_run_##S(void **ops, int log_)                                      \
    {                                                                                   \
        ptrdiff_t outer, n, inner;                                                      \
        const int rc = td_sm_check(ops, 1, td_code_##S, &outer, &n, &inner);            \
        if (rc) return rc;                                                              \
        if (outer == 0 || n == 0 || inner == 0) return 0; /* an empty output */        \
        const T *x = TD_F(ops[0], TD_OFF_DATA, const T *);                              \
        T *o = TD_F(ops[2], TD_OFF_DATA, T *);                                          \
        if (inner == 1) {                                                               \
            td_smrows_##S(x, o, outer, n, log_);                                        \
            return 0;                                                                   \
        }                                                                               \
        for (ptrdiff_t j = 0; j < outer; j++)                                           \
            td_smcols_##S(x + j * n * inner, o + j * n * inner, n, inner, log_);        \
        return 0;                                                                       \
    }                                                                                   \
    int td_softmax_##S##_v(void **ops) { return td_sm_run_##S(ops, 0); }                \
    int td_logsoftmax_##S##_v(void **ops) { return td_sm_run_##S(ops, 1); }             \
    /* SoftmaxGrad: o = dy * sm, then o - sm * sum(o) along the axis. */                \
    int td_smgrad_##S##_v(void **ops)                                                   \
    {                                                                                   \
        ptrdiff_t outer, n, inner;                                                      \
        const int rc = td_sm_check(ops, 2, td_code_##S, &outer, &n, &inner);            \
        if (rc) return rc;                                                              \
        if (outer == 0 || n == 0 || inner == 0) return 0;                               \
        const T *dy = TD_F(ops[0], TD_OFF_DATA, const T *);                             \
        const T *sm = TD_F(ops[1], TD_OFF_DATA, const T *);                             \
        T *o = TD_F(ops[3], TD_OFF_DATA, T *);                                          \
        const ptrdiff_t lane = n * inner, total = outer * lane;                         \
        for (ptrdiff_t k = 0; k < total; k++) o[k] = dy[k] * sm[k];                     \
        T s[TD_SM_CHUNK];                                                               \
        for (ptrdiff_t j = 0; j < outer; j++) {                                         \
            const T *smj = sm + j * lane;                                               \
            T *oj = o + j * lane;                                                       \
            if (inner == 1) {                                                           \
                const T t = (T)0 + td_pairwise_##S(oj, n);                              \
                for (ptrdiff_t k = 0; k < n; k++) oj[k] = oj[k] - smj[k] * t;           \
                continue;                                                               \
            }                                                                           \
            for (ptrdiff_t i0 = 0; i0 < inner; i0 += TD_SM_CHUNK) {                     \
                const ptrdiff_t w = inner - i0 < TD_SM_CHUNK ? inner - i0 : TD_SM_CHUNK; \
                for (ptrdiff_t i = 0; i < w; i++) s[i] = 0;                             \
                for (ptrdiff_t k = 0; k < n; k++)                                       \
                    for (ptrdiff_t i = 0; i < w; i++) s[i] += oj[k * inner + i0 + i];   \
                for (ptrdiff_t k = 0; k < n; k++) {                                     \
                    T *ok = oj + k * inner + i0;                                        \
                    const T *sk = smj + k * inner + i0;                                 \
                    for (ptrdiff_t i = 0; i < w; i++) ok[i] = ok[i] - sk[i] * s[i];     \
                }                                                                       \
            }                                                                           \
        }                                                                               \
        return 0;                                                                       \
    }

TD_SOFTMAX(double, f64)
TD_SOFTMAX(float, f32)
