/*! td_run, the driver of every fused elementwise kernel: checks the operands
   (ndarray type, dtype, layout), broadcasts, and calls the kernel's loop body over
   contiguous operands, split over OpenMP threads from a size on; other operands go to
   the step library's td_general. Appended verbatim to each kernel library by
   theano_dag.engines.cpu.emit.csource.preamble. */
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

enum { TD_ETYPE = 1, TD_EDTYPE = 2, TD_ENDIM = 3, TD_ESHAPE = 4, TD_ENOMEM = 5, TD_ESTRIDED = 6 };
#define TD_ERR(kind, k) (((kind) << 16) | (k))
#define TD_F(o, off, T) (*(T *)((char *)(o) + (off)))

typedef void (*td_fn)(char **p, ptrdiff_t n);

/* fn over n elements in whole turns of `turn` (a power of two) only: the leftover is one
   more turn over stack copies of the inputs (filled up by repeating it), its
   outputs copied back; a lone element runs as it is. A loop calling libmvec's functions
   computes what whole vectors leave over with narrower vectors or libm's scalar
   functions, an ulp apart for some arguments: equal inputs at two places of one array
   gave unequal outputs (csource._CALLS_MVEC says which kernels, and their turn). A turn
   of an operand is at most TD_VECTOR_BYTES elements of 8 bytes. */
/* (inlined into each caller, whose constants it folds: the generic copies cost a padded
   kernel of 10 values about 100 ns a call as a function) */
static inline __attribute__((always_inline)) void
td_turns(char **p, ptrdiff_t n, ptrdiff_t turn, int nin, int na, const int *es, td_fn fn)
{
    ptrdiff_t w = n & ~(turn - 1), r = n - w;
    if (n == 1) w = 1, r = 0;
    if (w) fn(p, w);
    if (!r) return;
    char raw[na * TD_VECTOR_BYTES * 8 + 63];
    char *q[na], *base = (char *)(((uintptr_t)raw + 63) & ~(uintptr_t)63);
    for (int k = 0; k < na; k++) q[k] = base + k * TD_VECTOR_BYTES * 8;
    for (int k = 0; k < nin; k++) {
        memcpy(q[k], p[k] + w * es[k], r * es[k]);
        for (ptrdiff_t f = r, c; f < turn; f += c) {  /* the leftover repeated */
            c = f < turn - f ? f : turn - f;
            memcpy(q[k] + f * es[k], q[k], c * es[k]);
        }
    }
    fn(q, turn);
    for (int k = nin; k < na; k++) memcpy(p[k] + w * es[k], q[k], r * es[k]);
}

static ptrdiff_t td_split(ptrdiff_t n, int t, int nt)
{
    if (t >= nt) return n;
    ptrdiff_t b = (ptrdiff_t)((double)n * t / nt);
    return b & ~(ptrdiff_t)63;  /* whole cache lines per thread */
}


/* The loop over operands that are not all contiguous, td_general (strided_driver.c, in
   the step library: it would be half of a small kernel library's compile time), given by
   td_set_general once the step library is loaded. Until then, or where it failed to
   load, td_run refuses such operands (TD_ESTRIDED) and its caller runs numpy. */
typedef int (*td_general_fn)(int nin, int na, char **base, const int *es, int nd,
                             const ptrdiff_t *shape, const ptrdiff_t *st, ptrdiff_t n,
                             td_fn fn, ptrdiff_t par_min);
static td_general_fn td_general_p;

void td_set_general(void *fn) { td_general_p = (td_general_fn)fn; }

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
    if (!td_general_p) return TD_ERR(TD_ESTRIDED, 0);
    return td_general_p(nin, na, base, es, nd, cshape, pst, n, fn, par_min);
}
