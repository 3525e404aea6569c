/*! The packed-panel matrix product for one float type: packing of A and B blocks,
   the register-blocked micro kernel and the blocked driver gemm_@S@. A template: @T@
   is the C type, @S@ its suffix (s, d); gemm.gemm_source instantiates it twice. */
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
