/*! td_general, the loop of a fused kernel over operands that are not all contiguous
   (broadcast, transposed, sliced): blocks of the output in C order, each operand read in
   place, from one broadcast element, or gathered into a buffer (outputs scattered back),
   the blocks split over OpenMP threads from a size on. In the step library
   (csource.steps_source), after the elementwise driver; a kernel library's td_run calls
   it through the address td_set_general gives it. */
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

int td_general(int nin, int na, char **base, const int *es, int nd, const ptrdiff_t *shape,
               const ptrdiff_t *st, ptrdiff_t n, td_fn fn, ptrdiff_t par_min)
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

