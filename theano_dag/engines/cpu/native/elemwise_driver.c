/*! td_run, the driver of every fused elementwise kernel: checks the operands
   (ndarray type, dtype, layout), broadcasts, and calls the kernel's loop body over
   contiguous runs, split over OpenMP threads from a size on. Appended verbatim to each
   kernel library by theano_dag.engines.cpu.emit.csource.preamble. */
static const void *td_ndarray;
static const void *td_descr[11];
static const int td_size[11] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 4, 8};

/* 1 in a child process forked after OpenMP ran: its thread pool did not survive the
   fork (a parallel loop would wait for it forever), so loops run on one thread. */
static int td_serial;

void td_set_serial(int serial) { td_serial = serial; }

/* Called once after loading: the ndarray type and the dtype descriptors, by address. */
void td_init(const void *ndarray_type, const void *const *descrs)
{
    td_ndarray = ndarray_type;
    for (int i = 0; i < 11; i++) td_descr[i] = descrs[i];
}

enum { TD_ETYPE = 1, TD_EDTYPE = 2, TD_ENDIM = 3, TD_ESHAPE = 4, TD_ENOMEM = 5 };
#define TD_ERR(kind, k) (((kind) << 16) | (k))
#define TD_F(o, off, T) (*(T *)((char *)(o) + (off)))

typedef void (*td_fn)(char **p, ptrdiff_t n);

static inline void td_copy(char *dst, ptrdiff_t ds, const char *src, ptrdiff_t ss,
                           ptrdiff_t n, int es)
{
    switch (es) {
    case 8: for (ptrdiff_t i = 0; i < n; i++) memcpy(dst + i * ds, src + i * ss, 8); break;
    case 4: for (ptrdiff_t i = 0; i < n; i++) memcpy(dst + i * ds, src + i * ss, 4); break;
    case 2: for (ptrdiff_t i = 0; i < n; i++) memcpy(dst + i * ds, src + i * ss, 2); break;
    default: for (ptrdiff_t i = 0; i < n; i++) dst[i * ds] = src[i * ss]; break;
    }
}

/* Elements [i0, i0 + len) in C order of an operand with strides st over shape:
   gathered into buf (scatter = 0) or scattered from it (scatter = 1). */
static void td_walk(char *base, const ptrdiff_t *st, const ptrdiff_t *shape, int nd,
                    ptrdiff_t i0, ptrdiff_t len, char *buf, int es, int scatter)
{
    ptrdiff_t idx[64];
    char *p = base;
    ptrdiff_t r = i0;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = r % shape[d];
        r /= shape[d];
        p += idx[d] * st[d];
    }
    const ptrdiff_t inner = shape[nd - 1], s = st[nd - 1];
    while (len > 0) {
        ptrdiff_t run = inner - idx[nd - 1];
        if (run > len) run = len;
        if (scatter) td_copy(p, s, buf, es, run, es);
        else td_copy(buf, es, p, s, run, es);
        buf += run * es;
        len -= run;
        p += run * s;
        idx[nd - 1] += run;
        if (idx[nd - 1] == inner && len > 0) {
            p -= inner * s;
            idx[nd - 1] = 0;
            for (int d = nd - 2; d >= 0; d--) {
                idx[d]++;
                p += st[d];
                if (idx[d] < shape[d]) break;
                p -= shape[d] * st[d];
                idx[d] = 0;
            }
        }
    }
}

static ptrdiff_t td_split(ptrdiff_t n, int t, int nt)
{
    if (t >= nt) return n;
    ptrdiff_t b = (ptrdiff_t)((double)n * t / nt);
    return b & ~(ptrdiff_t)63;  /* whole cache lines per thread */
}

/* Blocks [b0, b1) of B elements, in C order of the output. */
static int td_blocks(int nin, int na, char **base, const int *es, const int *kind, int nd,
                     const ptrdiff_t *shape, const ptrdiff_t *st, ptrdiff_t n, ptrdiff_t B,
                     ptrdiff_t b0, ptrdiff_t b1, td_fn fn)
{
    /* A small loop's buffers on the stack: a malloc costs as much as its work. */
    char local[8192];
    const size_t need = (size_t)na * B * 8;
    char *bufs = need <= sizeof local ? local : (char *)malloc(need);
    char *p[na];
    int failed = !bufs;
    if (!failed) {
        for (int k = 0; k < na; k++)
            if (kind[k] == 1) td_copy(bufs + k * B * 8, es[k], base[k], 0, B, es[k]);
        for (ptrdiff_t b = b0; b < b1; b++) {
            const ptrdiff_t i0 = b * B, len = (n - i0 < B) ? n - i0 : B;
            for (int k = 0; k < na; k++) {
                char *buf = bufs + k * B * 8;
                if (kind[k] == 0) {
                    p[k] = base[k] + i0 * es[k];
                } else {
                    p[k] = buf;
                    if (kind[k] == 2 && k < nin)
                        td_walk(base[k], st + k * nd, shape, nd, i0, len, buf, es[k], 0);
                }
            }
            fn(p, len);
            for (int k = nin; k < na; k++)
                if (kind[k] != 0)
                    td_walk(base[k], st + k * nd, shape, nd, i0, len, p[k], es[k], 1);
        }
    }
    if (bufs != local) free(bufs);
    return failed;
}

static int td_general(int nin, int na, char **base, const int *es, int nd,
                      const ptrdiff_t *shape, const ptrdiff_t *st, ptrdiff_t n,
                      td_fn fn, ptrdiff_t par_min)
{
    int kind[na];  /* 0: read in place, 1: one element broadcast, 2: walked */
    for (int k = 0; k < na; k++) {
        ptrdiff_t expect = es[k];
        int contig = 1, zero = 1;
        for (int d = nd - 1; d >= 0; d--) {
            if (st[k * nd + d] != expect) contig = 0;
            if (st[k * nd + d] != 0) zero = 0;
            expect *= shape[d];
        }
        kind[k] = contig ? 0 : (zero && k < nin) ? 1 : 2;
    }
    ptrdiff_t B = 65536 / (8 * na);
    if (B > 2048) B = 2048;
    if (B < 16) B = 16;
    B &= ~(ptrdiff_t)15;
    /* No longer than the loop: a broadcast operand fills its whole buffer each call. */
    if (B > n) B = (n + 15) & ~(ptrdiff_t)15;
    const ptrdiff_t nblk = (n + B - 1) / B;
    int failed = 0;
#ifdef _OPENMP
    if (!td_serial && n >= par_min && nblk > 1) {
        #pragma omp parallel reduction(|| : failed)
        {
            const int t = omp_get_thread_num(), nt = omp_get_num_threads();
            failed = td_blocks(nin, na, base, es, kind, nd, shape, st, n, B,
                               nblk * t / nt, nblk * (t + 1) / nt, fn);
        }
        return failed ? TD_ERR(TD_ENOMEM, 0) : 0;
    }
#endif
    failed = td_blocks(nin, na, base, es, kind, nd, shape, st, n, B, 0, nblk, fn);
    return failed ? TD_ERR(TD_ENOMEM, 0) : 0;
}

/* Check the operands, broadcast the inputs to the first output's shape, drop length-1
   axes, merge axes every operand walks contiguously, and run. */
static int td_run(int nin, int nout, void **arrs, const int *codes,
                  const unsigned long long *bcast, int ndim, td_fn fn, ptrdiff_t par_min)
{
    const int na = nin + nout, nd1 = ndim > 0 ? ndim : 1;
    char *base[na];
    int es[na];
    ptrdiff_t shape[nd1], st[na * nd1], cshape[nd1], cst[na * nd1];
    for (int k = 0; k < na; k++) {
        void *o = arrs[k];
        if (TD_F(o, TD_OFF_TYPE, const void *) != td_ndarray) return TD_ERR(TD_ETYPE, k);
        if (TD_F(o, TD_OFF_DESCR, const void *) != td_descr[codes[k]])
            return TD_ERR(TD_EDTYPE, k);
        if (TD_F(o, TD_OFF_ND, int) != ndim) return TD_ERR(TD_ENDIM, k);
        base[k] = TD_F(o, TD_OFF_DATA, char *);
        es[k] = td_size[codes[k]];
    }
    const ptrdiff_t *od = TD_F(arrs[nin], TD_OFF_DIMS, const ptrdiff_t *);
    ptrdiff_t n = 1;
    for (int d = 0; d < ndim; d++) {
        shape[d] = od[d];
        n *= od[d];
    }
    for (int k = 0; k < na; k++) {
        const ptrdiff_t *dims = TD_F(arrs[k], TD_OFF_DIMS, const ptrdiff_t *);
        const ptrdiff_t *strides = TD_F(arrs[k], TD_OFF_STRIDES, const ptrdiff_t *);
        for (int d = 0; d < ndim; d++) {
            if (dims[d] == shape[d]) st[k * nd1 + d] = strides[d];
            else if (k < nin && dims[d] == 1 && ((bcast[k] >> d) & 1)) st[k * nd1 + d] = 0;
            else return TD_ERR(TD_ESHAPE, k);
        }
    }
    if (n == 0) return 0;
    int nd = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 1) continue;
        int merge = nd > 0;
        for (int k = 0; merge && k < na; k++)
            merge = cst[k * nd1 + nd - 1] == st[k * nd1 + d] * shape[d];
        if (merge) {
            cshape[nd - 1] *= shape[d];
            for (int k = 0; k < na; k++) cst[k * nd1 + nd - 1] = st[k * nd1 + d];
        } else {
            cshape[nd] = shape[d];
            for (int k = 0; k < na; k++) cst[k * nd1 + nd] = st[k * nd1 + d];
            nd++;
        }
    }
    if (nd == 0) {
        nd = 1;
        cshape[0] = 1;
        for (int k = 0; k < na; k++) cst[k * nd1] = es[k];
    }
    int contig = nd == 1;
    for (int k = 0; contig && k < na; k++) contig = cst[k * nd1] == es[k];
    if (contig) {
        if (n < par_min || td_serial) {
            fn(base, n);
            return 0;
        }
#ifdef _OPENMP
        #pragma omp parallel
        {
            const int t = omp_get_thread_num(), nt = omp_get_num_threads();
            const ptrdiff_t lo = td_split(n, t, nt), hi = td_split(n, t + 1, nt);
            char *p[na];
            for (int k = 0; k < na; k++) p[k] = base[k] + lo * es[k];
            if (hi > lo) fn(p, hi - lo);
        }
#else
        fn(base, n);
#endif
        return 0;
    }
    /* td_general wants the strides packed nd per operand */
    ptrdiff_t pst[na * nd];
    for (int k = 0; k < na; k++)
        for (int d = 0; d < nd; d++) pst[k * nd + d] = cst[k * nd1 + d];
    return td_general(nin, na, base, es, nd, cshape, pst, n, fn, par_min);
}
