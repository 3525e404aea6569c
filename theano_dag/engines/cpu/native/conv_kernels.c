/*! The convolution emitters' two copy loops (theano_dag/engines/cpu/emit/conv.py), for
    float32 and float64: numpy makes the same arrays through strided views, 1.05x to 1.35x
    slower per layer of InceptionV3 (docs/performance.md, "Convolution"). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* im2col of one image: cols[(c*KH + a)*KW + b][i*OW + j]
     = x[c*sc + (i*sh + a*dh)*rs + j*sw + b*dw]
   for the nrows output rows of a tile (x points at the tile's first source row); rows
   of cols are ldc apart. A unit stride along the row makes each output row one memcpy. */
#define TD_IM2COL(T, NAME)                                                                 \
    void NAME(const T *x, ptrdiff_t sc, ptrdiff_t rs, int C, int KH, int KW, int nrows,    \
              int OW, int sh, int sw, int dh, int dw, T *cols, ptrdiff_t ldc)              \
    {                                                                                      \
        for (int c = 0; c < C; c++)                                                        \
            for (int a = 0; a < KH; a++)                                                   \
                for (int b = 0; b < KW; b++) {                                             \
                    T *dst = cols + (ptrdiff_t)((c * KH + a) * KW + b) * ldc;              \
                    const T *src = x + c * sc + (ptrdiff_t)a * dh * rs + (ptrdiff_t)b * dw; \
                    for (int i = 0; i < nrows; i++, dst += OW) {                           \
                        const T *s = src + (ptrdiff_t)i * sh * rs;                         \
                        if (sw == 1)                                                       \
                            memcpy(dst, s, sizeof(T) * (size_t)OW);                        \
                        else                                                               \
                            for (int j = 0; j < OW; j++) dst[j] = s[(ptrdiff_t)j * sw];    \
                    }                                                                      \
                }                                                                          \
    }
TD_IM2COL(float, td_im2col_f32)
TD_IM2COL(double, td_im2col_f64)

/* The fused convolution's epilogue, in place and in one pass (numpy makes one pass per
   operation): o[f][p] = o[f][p] * scale[f] + bias[f], then max(., 0) when relu; F rows
   of P values, ld apart; scale or bias NULL when absent. */
#define TD_EPILOGUE(T, NAME)                                                               \
    void NAME(T *o, ptrdiff_t ld, int F, ptrdiff_t P, const T *scale, const T *bias,       \
              int relu)                                                                    \
    {                                                                                      \
        for (int f = 0; f < F; f++) {                                                      \
            T *r = o + f * ld;                                                             \
            T s = scale ? scale[f] : (T)1, b = bias ? bias[f] : (T)0;                      \
            if (relu)                                                                      \
                for (ptrdiff_t p = 0; p < P; p++) {                                        \
                    T v = r[p] * s + b;                                                    \
                    r[p] = v < 0 ? (T)0 : v; /* NaN stays, as numpy's maximum */             \
                }                                                                          \
            else                                                                           \
                for (ptrdiff_t p = 0; p < P; p++) r[p] = r[p] * s + b;                     \
        }                                                                                  \
    }
TD_EPILOGUE(float, td_epilogue_f32)
TD_EPILOGUE(double, td_epilogue_f64)

/* Winograd's F(2x2, 3x3) (Lavin and Gray, 2016): a 3x3 convolution at stride 1 as 16
   matrix products of the transformed filters by the transformed 4x4 tiles of the image,
   each tile giving 2x2 outputs: 2.25x fewer multiplications than the direct sum. Each
   transform runs along a row of tiles in loops of unit stride (the columns split into
   even and odd first), which the compiler vectorizes across tiles.

   The image's transform, V = B' d B for each 4x4 tile d (tiles 2 apart, zeros past the
   H x W image): V[k][c][t] at k*kstride + c*ldv + t, k = 4*i + j, t = the tile's index
   in the band of ntr tile rows from tile row tr0, TW tiles a row (TW <= W/2 + 1). */
#define TD_WINO_IN(T, NAME)                                                                \
    void NAME(const T *restrict x, ptrdiff_t sc, ptrdiff_t rs, int C, int H, int W,        \
              int tr0, int ntr, int TW, T *restrict V, ptrdiff_t ldv, ptrdiff_t kstride)   \
    {                                                                                      \
        int n = TW + 1, pairs = W / 2; /* columns 2t, 2t + 1 for t < n; inside: < pairs */ \
        T zero[W + 2], even[4][n], odd[4][n];                                              \
        memset(zero, 0, sizeof(zero));                                                     \
        for (int c = 0; c < C; c++)                                                        \
            for (int tr = 0; tr < ntr; tr++) {                                             \
                int y0 = 2 * (tr0 + tr);                                                   \
                const T *r[4];                                                             \
                for (int i = 0; i < 4; i++)                                                \
                    r[i] = y0 + i < H ? x + c * sc + (ptrdiff_t)(y0 + i) * rs : zero;      \
                const T *r0 = r[0], *r1 = r[1], *r2 = r[2], *r3 = r[3];                    \
                int m = pairs < n ? pairs : n;                                             \
                for (int t = 0; t < m; t++) { /* B' d: the columns, even and odd */        \
                    T e0 = r0[2 * t], e1 = r1[2 * t], e2 = r2[2 * t], e3 = r3[2 * t];      \
                    T o0 = r0[2 * t + 1], o1 = r1[2 * t + 1], o2 = r2[2 * t + 1];          \
                    T o3 = r3[2 * t + 1];                                                  \
                    even[0][t] = e0 - e2, even[1][t] = e1 + e2;                            \
                    even[2][t] = e2 - e1, even[3][t] = e1 - e3;                            \
                    odd[0][t] = o0 - o2, odd[1][t] = o1 + o2;                              \
                    odd[2][t] = o2 - o1, odd[3][t] = o1 - o3;                              \
                }                                                                          \
                for (int t = m; t < n; t++) { /* past the image's last pair */             \
                    T e[4], o[4];                                                          \
                    for (int i = 0; i < 4; i++) {                                          \
                        e[i] = 2 * t < W ? r[i][2 * t] : (T)0;                             \
                        o[i] = 2 * t + 1 < W ? r[i][2 * t + 1] : (T)0;                     \
                    }                                                                      \
                    even[0][t] = e[0] - e[2], even[1][t] = e[1] + e[2];                    \
                    even[2][t] = e[2] - e[1], even[3][t] = e[1] - e[3];                    \
                    odd[0][t] = o[0] - o[2], odd[1][t] = o[1] + o[2];                      \
                    odd[2][t] = o[2] - o[1], odd[3][t] = o[1] - o[3];                      \
                }                                                                          \
                T *v = V + c * ldv + (ptrdiff_t)tr * TW;                                   \
                for (int i = 0; i < 4; i++) { /* (B' d) B: the rows */                     \
                    const T *E = even[i], *O = odd[i];                                     \
                    T *v0 = v + (4 * i) * kstride, *v1 = v0 + kstride;                     \
                    T *v2 = v1 + kstride, *v3 = v2 + kstride;                              \
                    for (int t = 0; t < TW; t++) {                                         \
                        v0[t] = E[t] - E[t + 1];                                           \
                        v1[t] = O[t] + E[t + 1];                                           \
                        v2[t] = E[t + 1] - O[t];                                           \
                        v3[t] = O[t] - O[t + 1];                                           \
                    }                                                                      \
                }                                                                          \
            }                                                                              \
    }
TD_WINO_IN(float, td_wino_in_f32)
TD_WINO_IN(double, td_wino_in_f64)

/* The output's transform, Y = A' m A for each tile's 4x4 products m (M[k][f][t] at
   k*kstride + f*ldm + t), then the epilogue (scale, bias, relu as td_epilogue), into
   out[f][y][x] (f*fs + y*OW + x) where inside the OH x OW output. The relu is
   max(lo, v), without a branch (a NaN stays, as with numpy's maximum). */
#define TD_WINO_OUT(T, NAME)                                                               \
    void NAME(const T *restrict M, ptrdiff_t ldm, ptrdiff_t kstride, int F, int tr0,       \
              int ntr, int TW, T *restrict out, ptrdiff_t fs, int OH, int OW,              \
              const T *scale, const T *bias, int relu)                                     \
    {                                                                                      \
        T lo = relu ? (T)0 : -(T)INFINITY;                                                 \
        T y[2][2][TW];                                                                     \
        for (int f = 0; f < F; f++) {                                                      \
            T s = scale ? scale[f] : (T)1, b = bias ? bias[f] : (T)0;                      \
            for (int tr = 0; tr < ntr; tr++) {                                             \
                int y0 = 2 * (tr0 + tr);                                                   \
                const T *m = M + f * ldm + (ptrdiff_t)tr * TW;                             \
                for (int t = 0; t < TW; t++) {                                             \
                    T u[2][4];                                                             \
                    for (int j = 0; j < 4; j++) { /* A' m: the columns */                  \
                        T m0 = m[j * kstride + t], m1 = m[(4 + j) * kstride + t];          \
                        T m2 = m[(8 + j) * kstride + t], m3 = m[(12 + j) * kstride + t];   \
                        u[0][j] = m0 + m1 + m2;                                            \
                        u[1][j] = m1 - m2 - m3;                                            \
                    }                                                                      \
                    for (int i = 0; i < 2; i++) { /* (A' m) A: the rows; the epilogue */   \
                        T a = (u[i][0] + u[i][1] + u[i][2]) * s + b;                       \
                        T c = (u[i][1] - u[i][2] - u[i][3]) * s + b;                       \
                        y[i][0][t] = a < lo ? lo : a;                                      \
                        y[i][1][t] = c < lo ? lo : c;                                      \
                    }                                                                      \
                }                                                                          \
                int pairs = OW / 2 < TW ? OW / 2 : TW;                                     \
                for (int i = 0; i < 2 && y0 + i < OH; i++) {                               \
                    T *o = out + f * fs + (ptrdiff_t)(y0 + i) * OW;                        \
                    const T *ye = y[i][0], *yo = y[i][1];                                  \
                    for (int t = 0; t < pairs; t++) o[2 * t] = ye[t], o[2 * t + 1] = yo[t]; \
                    if (OW % 2) o[OW - 1] = ye[TW - 1]; /* the last tile's first column */ \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
    }
TD_WINO_OUT(float, td_wino_out_f32)
TD_WINO_OUT(double, td_wino_out_f64)

/* One row r of (G g) G' from the row (x0, x1, x2) of G g, into o[(4r + k)*kstride + i]. */
#define TD_WINO_GROW(T, r, x0, x1, x2, o, kstride, i)                                      \
    do {                                                                                   \
        o[(4 * (r) + 0) * kstride + (i)] = x0;                                             \
        o[(4 * (r) + 1) * kstride + (i)] = (T)0.5 * (x0 + x1 + x2);                        \
        o[(4 * (r) + 2) * kstride + (i)] = (T)0.5 * (x0 - x1 + x2);                        \
        o[(4 * (r) + 3) * kstride + (i)] = x2;                                             \
    } while (0)

/* U = G g G' for the 3x3 filter g (rows (a0 a1 a2), (a3 a4 a5), (a6 a7 a8)) into
   o[k*kstride + i], k < 16: G g along the columns, then the rows. */
#define TD_WINO_G(T, a0, a1, a2, a3, a4, a5, a6, a7, a8, o, kstride, i)                    \
    do {                                                                                   \
        T p0 = (T)0.5 * (a0 + a3 + a6), p1 = (T)0.5 * (a1 + a4 + a7);                     \
        T p2 = (T)0.5 * (a2 + a5 + a8), q0 = (T)0.5 * (a0 - a3 + a6);                     \
        T q1 = (T)0.5 * (a1 - a4 + a7), q2 = (T)0.5 * (a2 - a5 + a8);                     \
        TD_WINO_GROW(T, 0, a0, a1, a2, o, kstride, i);                                     \
        TD_WINO_GROW(T, 1, p0, p1, p2, o, kstride, i);                                     \
        TD_WINO_GROW(T, 2, q0, q1, q2, o, kstride, i);                                     \
        TD_WINO_GROW(T, 3, a6, a7, a8, o, kstride, i);                                     \
    } while (0)

/* A block of nb channels of one filter gathered tap by tap: t[j][i] = gb[i*TAPS + j],
   tap j of the block's channel i, so that a filter transform runs along the block with
   unit strides (TD_WINO_FILTERS, TD_WINO_FILTERS5, TD_W4_FILTERS, TD_W7_FILTERS). */
#define TD_GATHER_TAPS(t, gb, TAPS, nb)                                                    \
    for (int j_ = 0; j_ < (TAPS); j_++)                                                    \
        for (int i_ = 0; i_ < (nb); i_++) (t)[j_][i_] = (gb)[i_ * (TAPS) + j_]

/* The loop of the filters' transforms: for each filter f of w (F rows of C*TAPS, ld
   apart) and each block of up to 64 of its channels, the block's taps gathered into
   t[TAPS][nb] (TD_GATHER_TAPS) and u = U + f*FSTRIDE + c0; then the statements of the
   variadic argument for each channel i of the block, which write the transform of
   t[.][i] at u[k*kstride + i]. */
#define TD_FILTER_BLOCKS(T, TAPS, FSTRIDE, ...)                                            \
    do {                                                                                   \
        enum { B = 64 };                                                                   \
        T t[TAPS][B];                                                                      \
        for (int f = 0; f < F; f++)                                                        \
            for (int c0 = 0; c0 < C; c0 += B) {                                            \
                int nb = C - c0 < B ? C - c0 : B;                                          \
                const T *gb = w + f * ld + (ptrdiff_t)c0 * (TAPS);                         \
                TD_GATHER_TAPS(t, gb, TAPS, nb);                                           \
                T *restrict u = U + (ptrdiff_t)f * (FSTRIDE) + c0;                         \
                _Pragma("GCC ivdep") for (int i = 0; i < nb; i++) { __VA_ARGS__ }          \
            }                                                                              \
    } while (0)

/* The filters' transform, U = G g G' for each 3x3 filter g of w (F rows of C*9, ld
   apart): U[k][f][c] at k*kstride + f*C + c. Each block of filters is copied tap by
   tap first, so that the transform runs along the block with unit strides (a filter
   at a time, its 16 values 16 slabs apart, ran 5x slower). */
#define TD_WINO_FILTERS(T, NAME)                                                           \
    void NAME(const T *restrict w, ptrdiff_t ld, int F, int C, T *restrict U,              \
              ptrdiff_t kstride)                                                           \
    {                                                                                      \
        TD_FILTER_BLOCKS(T, 9, C,                                                          \
                         TD_WINO_G(T, t[0][i], t[1][i], t[2][i], t[3][i], t[4][i],         \
                                   t[5][i], t[6][i], t[7][i], t[8][i], u, kstride, i););   \
    }
TD_WINO_FILTERS(float, td_wino_filters_f32)
TD_WINO_FILTERS(double, td_wino_filters_f64)

/* A 5x5 convolution as four 3x3 ones: the filters zeroed to 6x6, the 3x3 block (p, q)
   applied to the image moved by (3p, 3q); their F(2x2, 3x3) products summed by one
   product over 4C channels. The blocks' transform, for each 5x5 filter of w (F rows of
   C*25, ld apart): U[k][f][b*C + c] at k*kstride + f*4C + b*C + c, block b = 2p + q. */
#define TD_WINO_FILTERS5(T, NAME)                                                          \
    void NAME(const T *restrict w, ptrdiff_t ld, int F, int C, T *restrict U,              \
              ptrdiff_t kstride)                                                           \
    {                                                                                      \
        const T z = 0;                                                                     \
        /* the four blocks' outputs C apart: u, u + C, u + 2C, u + 3C */                   \
        TD_FILTER_BLOCKS(T, 25, 4 * C,                                                     \
                         TD_WINO_G(T, t[0][i], t[1][i], t[2][i], t[5][i], t[6][i],         \
                                   t[7][i], t[10][i], t[11][i], t[12][i], u, kstride, i);  \
                         TD_WINO_G(T, t[3][i], t[4][i], z, t[8][i], t[9][i], z, t[13][i],  \
                                   t[14][i], z, (u + C), kstride, i);                      \
                         TD_WINO_G(T, t[15][i], t[16][i], t[17][i], t[20][i], t[21][i],    \
                                   t[22][i], z, z, z, (u + 2 * C), kstride, i);            \
                         TD_WINO_G(T, t[18][i], t[19][i], z, t[23][i], t[24][i], z, z, z,  \
                                   z, (u + 3 * C), kstride, i););                          \
    }
TD_WINO_FILTERS5(float, td_wino_filters5_f32)
TD_WINO_FILTERS5(double, td_wino_filters5_f64)

/* Winograd's F(4x4, 3x3) (Lavin and Gray, 2016; points 0, +-1, +-2 and infinity): 6x6
   tiles 4 apart, 36 products, each tile giving 4x4 outputs: 4x fewer multiplications
   than the direct sum (F(2x2, 3x3): 2.25x), for the big 3x3 layers. The image's
   columns are split modulo 4 first, so that the transforms run along a row of tiles
   with unit strides. TD_W4_BT: (o0..o5) = B' (d0..d5). */
#define TD_W4_BT(o0, o1, o2, o3, o4, o5, d0, d1, d2, d3, d4, d5, T)                        \
    do {                                                                                   \
        o0 = (T)4 * d0 - (T)5 * d2 + d4;                                                   \
        o1 = d3 + d4 - (T)4 * (d1 + d2);                                                   \
        o2 = d4 - d3 + (T)4 * (d1 - d2);                                                   \
        o3 = d4 - d2 + (T)2 * (d3 - d1);                                                   \
        o4 = d4 - d2 + (T)2 * (d1 - d3);                                                   \
        o5 = (T)4 * d1 - (T)5 * d3 + d5;                                                   \
    } while (0)

/* The image's transform, V = B' d B for each 6x6 tile d (tiles 4 apart, zeros past the
   H x W image): V[k][c][t] at k*kstride + c*ldv + t, k = 6*i + j, t = the tile's index
   in the band of ntr tile rows from tile row tr0, TW tiles a row (TW <= W/4 + 1). */
#define TD_W4_IN(T, NAME)                                                                  \
    void NAME(const T *restrict x, ptrdiff_t sc, ptrdiff_t rs, int C, int H, int W,        \
              int tr0, int ntr, int TW, T *restrict V, ptrdiff_t ldv, ptrdiff_t kstride)   \
    {                                                                                      \
        int n = TW + 1, quads = W / 4; /* columns 4t + q for t < n; inside: t < quads */  \
        int m = quads < n ? quads : n;                                                     \
        T zero[W + 8], e[6][4][n];                                                         \
        memset(zero, 0, sizeof(zero));                                                     \
        for (int c = 0; c < C; c++)                                                        \
            for (int tr = 0; tr < ntr; tr++) {                                             \
                int y0 = 4 * (tr0 + tr);                                                   \
                const T *r[6];                                                             \
                for (int i = 0; i < 6; i++)                                                \
                    r[i] = y0 + i < H ? x + c * sc + (ptrdiff_t)(y0 + i) * rs : zero;      \
                const T *r0 = r[0], *r1 = r[1], *r2 = r[2], *r3 = r[3], *r4 = r[4];        \
                const T *r5 = r[5];                                                        \
                for (int q = 0; q < 4; q++) { /* B' d: the columns, modulo 4 */           \
                    T *e0 = e[0][q], *e1 = e[1][q], *e2 = e[2][q], *e3 = e[3][q];          \
                    T *e4 = e[4][q], *e5 = e[5][q];                                        \
                    for (int t = 0; t < m; t++) {                                          \
                        ptrdiff_t k = 4 * t + q;                                           \
                        TD_W4_BT(e0[t], e1[t], e2[t], e3[t], e4[t], e5[t], r0[k], r1[k],   \
                                 r2[k], r3[k], r4[k], r5[k], T);                           \
                    }                                                                      \
                    for (int t = m; t < n; t++) { /* past the image's last quad */         \
                        ptrdiff_t k = 4 * t + q;                                           \
                        T d[6];                                                            \
                        for (int i = 0; i < 6; i++) d[i] = k < W ? r[i][k] : (T)0;         \
                        TD_W4_BT(e0[t], e1[t], e2[t], e3[t], e4[t], e5[t], d[0], d[1],     \
                                 d[2], d[3], d[4], d[5], T);                               \
                    }                                                                      \
                }                                                                          \
                T *v = V + c * ldv + (ptrdiff_t)tr * TW;                                   \
                for (int i = 0; i < 6; i++) { /* (B' d) B: the rows */                     \
                    const T *a = e[i][0], *b = e[i][1], *cc = e[i][2], *dd = e[i][3];      \
                    T *restrict v0 = v + (6 * i) * kstride, *restrict v1 = v0 + kstride;   \
                    T *restrict v2 = v1 + kstride, *restrict v3 = v2 + kstride;            \
                    T *restrict v4 = v3 + kstride, *restrict v5 = v4 + kstride;            \
                    _Pragma("GCC ivdep") for (int t = 0; t < TW; t++) {                    \
                        /* the tile's columns 4t + j: j = 0..3 from t, 4..5 from t + 1 */ \
                        TD_W4_BT(v0[t], v1[t], v2[t], v3[t], v4[t], v5[t], a[t], b[t],     \
                                 cc[t], dd[t], a[t + 1], b[t + 1], T);                     \
                    }                                                                      \
                }                                                                          \
            }                                                                              \
    }
TD_W4_IN(float, td_w4_in_f32)
TD_W4_IN(double, td_w4_in_f64)

/* (y0..y3) = A' (m0..m5) */
#define TD_W4_AT(y0, y1, y2, y3, m0, m1, m2, m3, m4, m5, T)                                \
    do {                                                                                   \
        T s12_ = m1 + m2, d12_ = m1 - m2, s34_ = m3 + m4, d34_ = m3 - m4;                  \
        y0 = m0 + s12_ + s34_;                                                             \
        y1 = d12_ + (T)2 * d34_;                                                           \
        y2 = s12_ + (T)4 * s34_;                                                           \
        y3 = d12_ + (T)8 * d34_ + m5;                                                      \
    } while (0)

/* The output's transform, Y = A' m A for each tile's 6x6 products m (M[k][f][t] at
   k*kstride + f*ldm + t), then the epilogue (as TD_WINO_OUT), into out[f][y][x]
   (f*fs + y*OW + x) where inside the OH x OW output. */
#define TD_W4_OUT(T, NAME)                                                                 \
    void NAME(const T *restrict M, ptrdiff_t ldm, ptrdiff_t kstride, int F, int tr0,       \
              int ntr, int TW, T *restrict out, ptrdiff_t fs, int OH, int OW,              \
              const T *scale, const T *bias, int relu)                                     \
    {                                                                                      \
        T lo = relu ? (T)0 : -(T)INFINITY;                                                 \
        T y[4][4][TW];                                                                     \
        int whole = OW / 4 < TW ? OW / 4 : TW, rest = OW - 4 * whole;                      \
        for (int f = 0; f < F; f++) {                                                      \
            T s = scale ? scale[f] : (T)1, b = bias ? bias[f] : (T)0;                      \
            for (int tr = 0; tr < ntr; tr++) {                                             \
                int y0 = 4 * (tr0 + tr);                                                   \
                const T *m = M + f * ldm + (ptrdiff_t)tr * TW;                             \
                _Pragma("GCC ivdep") for (int t = 0; t < TW; t++) {                        \
                    T u[4][6];                                                             \
                    for (int j = 0; j < 6; j++) /* A' m: the columns */                    \
                        TD_W4_AT(u[0][j], u[1][j], u[2][j], u[3][j], m[j * kstride + t],   \
                                 m[(6 + j) * kstride + t], m[(12 + j) * kstride + t],      \
                                 m[(18 + j) * kstride + t], m[(24 + j) * kstride + t],     \
                                 m[(30 + j) * kstride + t], T);                            \
                    for (int i = 0; i < 4; i++) { /* (A' m) A: the rows; the epilogue */   \
                        T a0, a1, a2, a3;                                                  \
                        TD_W4_AT(a0, a1, a2, a3, u[i][0], u[i][1], u[i][2], u[i][3],       \
                                 u[i][4], u[i][5], T);                                     \
                        a0 = a0 * s + b, a1 = a1 * s + b, a2 = a2 * s + b, a3 = a3 * s + b; \
                        y[i][0][t] = a0 < lo ? lo : a0;                                    \
                        y[i][1][t] = a1 < lo ? lo : a1;                                    \
                        y[i][2][t] = a2 < lo ? lo : a2;                                    \
                        y[i][3][t] = a3 < lo ? lo : a3;                                    \
                    }                                                                      \
                }                                                                          \
                for (int i = 0; i < 4 && y0 + i < OH; i++) {                               \
                    T *o = out + f * fs + (ptrdiff_t)(y0 + i) * OW;                        \
                    const T *q0 = y[i][0], *q1 = y[i][1], *q2 = y[i][2], *q3 = y[i][3];    \
                    for (int t = 0; t < whole; t++)                                        \
                        o[4 * t] = q0[t], o[4 * t + 1] = q1[t], o[4 * t + 2] = q2[t],      \
                                  o[4 * t + 3] = q3[t];                                    \
                    for (int j = 0; j < rest; j++) o[4 * whole + j] = y[i][j][whole];      \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
    }
TD_W4_OUT(float, td_w4_out_f32)
TD_W4_OUT(double, td_w4_out_f64)

/* (o0..o5) = G (g0, g1, g2) */
#define TD_W4_G(o0, o1, o2, o3, o4, o5, g0, g1, g2, T)                                     \
    do {                                                                                   \
        T e_ = g0 + g2, p_ = (T)(1.0 / 24) * g0 + (T)(1.0 / 6) * g2;                       \
        o0 = (T)0.25 * g0;                                                                 \
        o1 = (T)(-1.0 / 6) * (e_ + g1);                                                    \
        o2 = (T)(-1.0 / 6) * (e_ - g1);                                                    \
        o3 = p_ + (T)(1.0 / 12) * g1;                                                      \
        o4 = p_ - (T)(1.0 / 12) * g1;                                                      \
        o5 = g2;                                                                           \
    } while (0)

/* Row k of (G g) G' from the row (x0, x1, x2) of G g, into u[(6k + l)*kstride + i]. */
#define TD_W4_GROW(T, k, x0, x1, x2, u, kstride, i)                                        \
    do {                                                                                   \
        T o0_, o1_, o2_, o3_, o4_, o5_;                                                    \
        TD_W4_G(o0_, o1_, o2_, o3_, o4_, o5_, x0, x1, x2, T);                              \
        u[(6 * (k) + 0) * kstride + (i)] = o0_;                                            \
        u[(6 * (k) + 1) * kstride + (i)] = o1_;                                            \
        u[(6 * (k) + 2) * kstride + (i)] = o2_;                                            \
        u[(6 * (k) + 3) * kstride + (i)] = o3_;                                            \
        u[(6 * (k) + 4) * kstride + (i)] = o4_;                                            \
        u[(6 * (k) + 5) * kstride + (i)] = o5_;                                            \
    } while (0)

/* The filters' transform, U = G g G' for each 3x3 filter g of w (F rows of C*9, ld
   apart): U[k][f][c] at k*kstride + f*C + c, k = 6*i + j; a block of filters copied tap
   by tap first, as TD_WINO_FILTERS. */
#define TD_W4_FILTERS(T, NAME)                                                             \
    void NAME(const T *restrict w, ptrdiff_t ld, int F, int C, T *restrict U,              \
              ptrdiff_t kstride)                                                           \
    {                                                                                      \
        TD_FILTER_BLOCKS(T, 9, C,                                                          \
                         T a0, a1, a2, a3, a4, a5, b0, b1, b2, b3, b4, b5;                 \
                         T c0_, c1, c2, c3, c4, c5;                                        \
                         /* G g: the columns (a, b, c: columns 0, 1, 2), then each row */  \
                         TD_W4_G(a0, a1, a2, a3, a4, a5, t[0][i], t[3][i], t[6][i], T);    \
                         TD_W4_G(b0, b1, b2, b3, b4, b5, t[1][i], t[4][i], t[7][i], T);    \
                         TD_W4_G(c0_, c1, c2, c3, c4, c5, t[2][i], t[5][i], t[8][i], T);   \
                         TD_W4_GROW(T, 0, a0, b0, c0_, u, kstride, i);                     \
                         TD_W4_GROW(T, 1, a1, b1, c1, u, kstride, i);                      \
                         TD_W4_GROW(T, 2, a2, b2, c2, u, kstride, i);                      \
                         TD_W4_GROW(T, 3, a3, b3, c3, u, kstride, i);                      \
                         TD_W4_GROW(T, 4, a4, b4, c4, u, kstride, i);                      \
                         TD_W4_GROW(T, 5, a5, b5, c5, u, kstride, i););                    \
    }
TD_W4_FILTERS(float, td_w4_filters_f32)
TD_W4_FILTERS(double, td_w4_filters_f64)

/* Winograd's F(3, 7) along one axis, for the 1x7 and 7x1 convolutions (InceptionV3's
   17x17 blocks): each tile of 9 input values along the filter's axis gives 3 outputs,
   from 9 products of the transformed filters by the transformed tiles, 2.33x fewer
   multiplications than the direct sum. Toom-Cook at the points 0, 1, -1, 2, -2, 1/2,
   -1/2, -3/2 and infinity (as Lavin and Gray build F(6, 3)): B', G and A' below are
   written out from them (B' and A' exact in binary). TD_W7_IN: v = B' d for the 9
   values d0..d8 of a tile, slab k at v[k*kstride + s]. */
#define TD_W7_IN(T, v, s)                                                                  \
    do {                                                                                   \
        v[0 * kstride + (s)] = -(T)1.5 * d0 - d1 + (T)7.875 * d2 + (T)5.25 * d3 -          \
                               (T)7.875 * d4 - (T)5.25 * d5 + (T)1.5 * d6 + d7;            \
        v[1 * kstride + (s)] = (T)1.5 * d1 + (T)2.5 * d2 - (T)5.375 * d3 -                 \
                               (T)10.625 * d4 - (T)2.75 * d5 + (T)2.5 * d6 + d7;           \
        v[2 * kstride + (s)] = -(T)1.5 * d1 + (T)0.5 * d2 + (T)7.375 * d3 -                \
                               (T)2.125 * d4 - (T)5.75 * d5 + (T)0.5 * d6 + d7;            \
        v[3 * kstride + (s)] = (T)0.75 * d1 + (T)0.875 * d2 - (T)3.5 * d3 -                \
                               (T)4.375 * d4 + (T)1.75 * d5 + (T)3.5 * d6 + d7;            \
        v[4 * kstride + (s)] = -(T)0.75 * d1 - (T)0.125 * d2 + (T)4 * d3 +                 \
                               (T)0.625 * d4 - (T)4.25 * d5 - (T)0.5 * d6 + d7;            \
        v[5 * kstride + (s)] = (T)3 * d1 + (T)8 * d2 + (T)0.25 * d3 - (T)10 * d4 -         \
                               (T)4.25 * d5 + (T)2 * d6 + d7;                              \
        v[6 * kstride + (s)] = -(T)3 * d1 + (T)4 * d2 + (T)7.75 * d3 - (T)5 * d4 -         \
                               (T)5.75 * d5 + d6 + d7;                                     \
        v[7 * kstride + (s)] = -d1 + (T)5.25 * d3 - (T)5.25 * d5 + d7;                     \
        v[8 * kstride + (s)] = -(T)1.5 * d1 - d2 + (T)7.875 * d3 + (T)5.25 * d4 -          \
                               (T)7.875 * d5 - (T)5.25 * d6 + (T)1.5 * d7 + d8;            \
    } while (0)

/* The 3 outputs of a tile from its 9 products (y = A' m, slab k at m[k*kstride + s]),
   scaled, biased and rectified (max(lo, .): a NaN stays, as with numpy's maximum) as
   td_epilogue. */
#define TD_W7_OUT(T, m, s, y0, y1, y2)                                                     \
    do {                                                                                   \
        T m0 = m[(s)], m1 = m[kstride + (s)], m2 = m[2 * kstride + (s)];                   \
        T m3 = m[3 * kstride + (s)], m4 = m[4 * kstride + (s)];                            \
        T m5 = m[5 * kstride + (s)], m6 = m[6 * kstride + (s)];                            \
        T m7 = m[7 * kstride + (s)], m8 = m[8 * kstride + (s)];                            \
        T a_ = (m0 + m1 + m2 + m3 + m4 + m5 + m6 + m7) * sf + bf;                          \
        T b_ = (m1 - m2 + (T)2 * (m3 - m4) + (T)0.5 * (m5 - m6) - (T)1.5 * m7) * sf + bf;  \
        T c_ = (m1 + m2 + (T)4 * (m3 + m4) + (T)0.25 * (m5 + m6) + (T)2.25 * m7 + m8) *    \
                   sf +                                                                    \
               bf;                                                                         \
        y0 = a_ < lo ? lo : a_;                                                            \
        y1 = b_ < lo ? lo : b_;                                                            \
        y2 = c_ < lo ? lo : c_;                                                            \
    } while (0)

/* 7x1 filters (taps along the rows): the tiles of tile rows tr0 .. tr0 + ntr (output
   rows 3 tr + [0, 3); input rows 3 tr - off + [0, 9), zeros outside the H x W image:
   off rows of padding above it), one tile per column: V[k][c][tr * W + s] at
   k*kstride + c*ldv + tr*W + s. */
#define TD_W7_IN_ROWS(T, NAME)                                                             \
    void NAME(const T *restrict x, ptrdiff_t sc, ptrdiff_t rs, int C, int H, int W,        \
              int tr0, int ntr, T *restrict V, ptrdiff_t ldv, ptrdiff_t kstride, int off)  \
    {                                                                                      \
        T zero[W];                                                                         \
        memset(zero, 0, sizeof(zero));                                                     \
        for (int c = 0; c < C; c++)                                                        \
            for (int tr = 0; tr < ntr; tr++) {                                             \
                int y0 = 3 * (tr0 + tr) - off;                                             \
                const T *r[9];                                                             \
                for (int j = 0; j < 9; j++) {                                              \
                    int y = y0 + j;                                                        \
                    r[j] = y >= 0 && y < H ? x + c * sc + (ptrdiff_t)y * rs : zero;        \
                }                                                                          \
                const T *r0 = r[0], *r1 = r[1], *r2 = r[2], *r3 = r[3], *r4 = r[4];        \
                const T *r5 = r[5], *r6 = r[6], *r7 = r[7], *r8 = r[8];                    \
                T *restrict v = V + c * ldv + (ptrdiff_t)tr * W;                           \
                _Pragma("GCC ivdep") for (int s = 0; s < W; s++) {                         \
                    T d0 = r0[s], d1 = r1[s], d2 = r2[s], d3 = r3[s], d4 = r4[s];          \
                    T d5 = r5[s], d6 = r6[s], d7 = r7[s], d8 = r8[s];                      \
                    TD_W7_IN(T, v, s);                                                     \
                }                                                                          \
            }                                                                              \
    }
TD_W7_IN_ROWS(float, td_w7_in_rows_f32)
TD_W7_IN_ROWS(double, td_w7_in_rows_f64)

/* 1x7 filters (taps along the columns): as TD_W7_IN_ROWS on the image transposed, the
   columns 3 tr0 - off .. 3 (tr0 + ntr) + 6 - off of each channel copied as rows first
   (zeros outside the W columns: off columns of padding on the left), so that the
   transform runs along the H rows with unit strides: V[k][c][tr * H + s], s the
   image's row. 1 if out of memory, else 0. */
#define TD_W7_IN_COLS(T, NAME)                                                             \
    int NAME(const T *restrict x, ptrdiff_t sc, ptrdiff_t rs, int C, int H, int W,         \
             int tr0, int ntr, T *restrict V, ptrdiff_t ldv, ptrdiff_t kstride, int off)   \
    {                                                                                      \
        int x0 = 3 * tr0 - off, nx = 3 * ntr + 6;                                          \
        T *restrict buf = malloc(sizeof(T) * (size_t)nx * (size_t)H);                      \
        if (!buf) return 1;                                                                \
        for (int c = 0; c < C; c++) {                                                      \
            for (int s = 0; s < H; s++) {                                                  \
                const T *row = x + c * sc + (ptrdiff_t)s * rs;                             \
                for (int j = 0; j < nx; j++)                                               \
                    buf[(ptrdiff_t)j * H + s] =                                            \
                        x0 + j >= 0 && x0 + j < W ? row[x0 + j] : (T)0;                    \
            }                                                                              \
            for (int tr = 0; tr < ntr; tr++) {                                             \
                const T *r0 = buf + (ptrdiff_t)3 * tr * H, *r1 = r0 + H, *r2 = r1 + H;     \
                const T *r3 = r2 + H, *r4 = r3 + H, *r5 = r4 + H, *r6 = r5 + H;            \
                const T *r7 = r6 + H, *r8 = r7 + H;                                        \
                T *restrict v = V + c * ldv + (ptrdiff_t)tr * H;                           \
                _Pragma("GCC ivdep") for (int s = 0; s < H; s++) {                         \
                    T d0 = r0[s], d1 = r1[s], d2 = r2[s], d3 = r3[s], d4 = r4[s];          \
                    T d5 = r5[s], d6 = r6[s], d7 = r7[s], d8 = r8[s];                      \
                    TD_W7_IN(T, v, s);                                                     \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
        free(buf);                                                                         \
        return 0;                                                                          \
    }
TD_W7_IN_COLS(float, td_w7_in_cols_f32)
TD_W7_IN_COLS(double, td_w7_in_cols_f64)

/* The outputs of TD_W7_IN_ROWS's tiles from the products M[k][f][tr * W + s] (at
   k*kstride + f*ldm + ...), with the epilogue, into out[f][y][s] (f*fs + y*W + s) for
   the output rows y < OH. */
#define TD_W7_OUT_ROWS(T, NAME)                                                            \
    void NAME(const T *restrict M, ptrdiff_t ldm, ptrdiff_t kstride, int F, int tr0,       \
              int ntr, int W, T *restrict out, ptrdiff_t fs, int OH, const T *scale,       \
              const T *bias, int relu)                                                     \
    {                                                                                      \
        T lo = relu ? (T)0 : -(T)INFINITY;                                                 \
        T spare[2][W]; /* the rows of the last tile past the output */                    \
        for (int f = 0; f < F; f++) {                                                      \
            T sf = scale ? scale[f] : (T)1, bf = bias ? bias[f] : (T)0;                    \
            for (int tr = 0; tr < ntr; tr++) {                                             \
                int y = 3 * (tr0 + tr);                                                    \
                const T *m = M + f * ldm + (ptrdiff_t)tr * W;                              \
                T *restrict o0 = out + f * fs + (ptrdiff_t)y * W;                          \
                T *restrict o1 = y + 1 < OH ? o0 + W : spare[0];                           \
                T *restrict o2 = y + 2 < OH ? o0 + 2 * W : spare[1];                       \
                _Pragma("GCC ivdep") for (int s = 0; s < W; s++)                           \
                    TD_W7_OUT(T, m, s, o0[s], o1[s], o2[s]);                               \
            }                                                                              \
        }                                                                                  \
    }
TD_W7_OUT_ROWS(float, td_w7_out_rows_f32)
TD_W7_OUT_ROWS(double, td_w7_out_rows_f64)

/* The outputs of TD_W7_IN_COLS's tiles from the products M[k][f][tr * H + s], with the
   epilogue, into out[f][s][x] (f*fs + s*OW + x) for the columns x < OW: each tile
   row's three output columns made along the H rows, then copied into place. 1 if out
   of memory, else 0. */
#define TD_W7_OUT_COLS(T, NAME)                                                            \
    int NAME(const T *restrict M, ptrdiff_t ldm, ptrdiff_t kstride, int F, int tr0,        \
             int ntr, int H, T *restrict out, ptrdiff_t fs, int OW, const T *scale,        \
             const T *bias, int relu)                                                      \
    {                                                                                      \
        T lo = relu ? (T)0 : -(T)INFINITY;                                                 \
        T *restrict y = malloc(sizeof(T) * 3 * (size_t)H);                                 \
        if (!y) return 1;                                                                  \
        T *restrict y0 = y, *restrict y1 = y + H, *restrict y2 = y + 2 * H;                \
        for (int f = 0; f < F; f++) {                                                      \
            T sf = scale ? scale[f] : (T)1, bf = bias ? bias[f] : (T)0;                    \
            for (int tr = 0; tr < ntr; tr++) {                                             \
                int x = 3 * (tr0 + tr), nx = OW - x < 3 ? OW - x : 3;                      \
                const T *m = M + f * ldm + (ptrdiff_t)tr * H;                              \
                _Pragma("GCC ivdep") for (int s = 0; s < H; s++)                           \
                    TD_W7_OUT(T, m, s, y0[s], y1[s], y2[s]);                               \
                T *o = out + f * fs + x;                                                   \
                for (int s = 0; s < H; s++, o += OW)                                       \
                    for (int i = 0; i < nx; i++) o[i] = y[(ptrdiff_t)i * H + s];           \
            }                                                                              \
        }                                                                                  \
        free(y);                                                                           \
        return 0;                                                                          \
    }
TD_W7_OUT_COLS(float, td_w7_out_cols_f32)
TD_W7_OUT_COLS(double, td_w7_out_cols_f64)

/* F(3, 7)'s filters' transform, U = G g for each 7-tap filter g of w (F rows of C*7, ld
   apart): U[k][f][c] at k*kstride + f*C + c; each block of filters is copied tap by tap
   first, so that the transform runs with unit strides. */
#define TD_W7_FILTERS(T, NAME)                                                             \
    void NAME(const T *restrict w, ptrdiff_t ld, int F, int C, T *restrict U,              \
              ptrdiff_t kstride)                                                           \
    {                                                                                      \
        TD_FILTER_BLOCKS(T, 7, C,                                                          \
                         T g0 = t[0][i], g1 = t[1][i], g2 = t[2][i], g3 = t[3][i];         \
                         T g4 = t[4][i], g5 = t[5][i], g6 = t[6][i];                       \
                         T e = g0 + g2 + g4 + g6, o = g1 + g3 + g5;                        \
                         u[i] = (T)(-2.0 / 3) * g0;                                        \
                         u[kstride + i] = (T)(-4.0 / 45) * (e + o);                        \
                         u[2 * kstride + i] = (T)(-4.0 / 9) * (e - o);                     \
                         e = g0 + (T)4 * g2 + (T)16 * g4 + (T)64 * g6;                     \
                         o = (T)2 * g1 + (T)8 * g3 + (T)32 * g5;                           \
                         u[3 * kstride + i] = (T)(1.0 / 315) * (e + o);                    \
                         u[4 * kstride + i] = (T)(1.0 / 45) * (o - e);                     \
                         e = (T)16 * g0 + (T)4 * g2 + g4 + (T)0.25 * g6;                   \
                         o = (T)8 * g1 + (T)2 * g3 + (T)0.5 * g5;                          \
                         u[5 * kstride + i] = (T)(1.0 / 45) * (e + o);                     \
                         u[6 * kstride + i] = (T)(2.0 / 45) * (e - o);                     \
                         u[7 * kstride + i] = (T)(16.0 / 105) *                            \
                             (g0 + (T)-1.5 * g1 + (T)2.25 * g2 +                           \
                             (T)-3.375 * g3 + (T)5.0625 * g4 +                             \
                             (T)-7.59375 * g5 + (T)11.390625 * g6);                        \
                         u[8 * kstride + i] = g6;);                                        \
    }
TD_W7_FILTERS(float, td_w7_filters_f32)
TD_W7_FILTERS(double, td_w7_filters_f64)

/* Whether the C x H x W image (channels sc apart, rows rs apart) holds only finite
   values: F(3, 7) would spread a NaN or an infinity to outputs whose windows do not
   hold it (the direct sum leaves them finite), so such an image takes im2col. */
#define TD_ALL_FINITE(T, NAME)                                                             \
    int NAME(const T *restrict x, ptrdiff_t sc, ptrdiff_t rs, int C, int H, int W)         \
    {                                                                                      \
        int bad = 0;                                                                       \
        for (int c = 0; c < C; c++)                                                        \
            for (int r = 0; r < H; r++) {                                                  \
                const T *row = x + c * sc + (ptrdiff_t)r * rs;                             \
                for (int s = 0; s < W; s++) bad |= row[s] - row[s] != (T)0;                \
            }                                                                              \
        return !bad;                                                                       \
    }
TD_ALL_FINITE(float, td_all_finite_f32)
TD_ALL_FINITE(double, td_all_finite_f64)

/* 2-D pooling of P planes of H x W (x, planes HW apart, rows W apart) into P planes of
   OH x OW: the window of output (i, j) covers rows i*sh - pt + [0, kh) and columns
   j*sw - pl + [0, kw), clipped to the image (the padding adds nothing to a max or a
   sum). is_max: the maximum (a NaN wins, as with numpy's maximum; a window wholly in
   the padding is -inf), else the sum, divided by div[i][j] (of the same type: the
   quotient is the one numpy's division gives) when div is not NULL.
   Separable, rows first: the kh rows of each output row are folded into vs (OH x W),
   then each row of vs along its columns, so that the strided reads (sw > 1) are made on
   OH rows, not H. Where the windows lie inside the image the loops run over the whole
   plane (rows joined) with unit stride, which the compiler vectorizes; the few windows
   at the border are folded again, clipped. A stride of 2 splits each row of vs into its
   even and odd columns first (unit-stride loops again). */
/* max(a, v), a NaN in either wins (numpy's maximum), in the form gcc turns into vector
   compares and blends (nested conditionals stay branches: 8x slower on random data) */
static inline float td_max_f32(float a, float v)
{
    float m = a > v ? a : v;
    return a != a ? a : m;
}
static inline double td_max_f64(double a, double v)
{
    double m = a > v ? a : v;
    return a != a ? a : m;
}
#define TD_MAX(a, v) _Generic((a), float: td_max_f32, double: td_max_f64)(a, v)

#define TD_FOLD_LOOP(is_max, k0, k1, dst, src)                                             \
    do {                                                                                   \
        if (is_max)                                                                        \
            for (ptrdiff_t k = (k0); k < (k1); k++) dst[k] = TD_MAX(dst[k], src[k]);       \
        else                                                                               \
            for (ptrdiff_t k = (k0); k < (k1); k++) dst[k] += src[k];                      \
    } while (0)

/* dst[k] = fold(fold(a[k*STEP], b[k*STEP]), c[k*STEP]): a 3-wide window in one pass */
#define TD_FOLD3_LOOP(is_max, k0, k1, dst, a, b, c, STEP)                                  \
    do {                                                                                   \
        if (is_max)                                                                        \
            for (ptrdiff_t k = (k0); k < (k1); k++)                                        \
                dst[k] = TD_MAX(TD_MAX(a[k * (STEP)], b[k * (STEP)]), c[k * (STEP)]);      \
        else                                                                               \
            for (ptrdiff_t k = (k0); k < (k1); k++)                                        \
                dst[k] = a[k * (STEP)] + b[k * (STEP)] + c[k * (STEP)];                    \
    } while (0)

#define TD_POOL(T, NAME)                                                                   \
    int NAME(const T *restrict x, int P, int H, int W, T *restrict out, int OH, int OW,    \
             int kh, int kw, int sh, int sw, int pt, int pl, int is_max, const T *div)     \
    {                                                                                      \
        ptrdiff_t L = (ptrdiff_t)(OW - 1) * sw + kw; /* a padded row the windows read */   \
        ptrdiff_t half = (L + 1) / 2, plane = (ptrdiff_t)OH * W;                           \
        T *restrict vs = malloc(sizeof(T) * (size_t)(plane + L + 2 * half + 2));           \
        if (!vs) return -1;                                                                \
        T *restrict row = vs + plane, *restrict ev = row + L, *restrict od = ev + half;    \
        T fill = is_max ? -(T)INFINITY : (T)0;                                             \
        int i0 = (pt + sh - 1) / sh; /* the output rows whose windows lie inside */        \
        int i1 = H - kh + pt >= 0 ? (H - kh + pt) / sh + 1 : 0;                            \
        if (i1 > OH) i1 = OH;                                                              \
        if (i0 > i1) i0 = i1;                                                              \
        int j0 = (pl + sw - 1) / sw; /* the output columns whose windows lie inside */     \
        int j1 = W - kw + pl >= 0 ? (W - kw + pl) / sw + 1 : 0;                            \
        if (j1 > OW) j1 = OW;                                                              \
        if (j0 > j1) j0 = j1;                                                              \
        ptrdiff_t cw = L - pl < W ? L - pl : W; /* the image's columns a window reads */  \
        for (int p = 0; p < P; p++) {                                                      \
            const T *img = x + (ptrdiff_t)p * H * W;                                       \
            T *restrict o = out + (ptrdiff_t)p * OH * OW;                                  \
            /* along the rows: vs[i][c] = fold over a of img[i*sh - pt + a][c] */         \
            if (sh == 1 && i1 > i0) { /* the inside rows: one loop over the plane */      \
                const T *s = img + (ptrdiff_t)(i0 - pt) * W;                               \
                T *restrict d = vs + (ptrdiff_t)i0 * W;                                    \
                ptrdiff_t n = (ptrdiff_t)(i1 - i0) * W;                                    \
                if (kh == 3) {                                                             \
                    const T *s1 = s + W, *s2 = s1 + W;                                     \
                    TD_FOLD3_LOOP(is_max, 0, n, d, s, s1, s2, 1);                          \
                } else {                                                                   \
                    memcpy(d, s, sizeof(T) * (size_t)n);                                   \
                    for (int a = 1; a < kh; a++) {                                         \
                        const T *sa = s + (ptrdiff_t)a * W;                                \
                        TD_FOLD_LOOP(is_max, 0, n, d, sa);                                 \
                    }                                                                      \
                }                                                                          \
            }                                                                              \
            for (int i = 0; i < OH; i++) {                                                 \
                if (sh == 1 && i >= i0 && i < i1) continue; /* done above */               \
                int r0 = i * sh - pt, r1 = r0 + kh;                                        \
                if (r0 < 0) r0 = 0;                                                        \
                if (r1 > H) r1 = H;                                                        \
                T *restrict d = vs + (ptrdiff_t)i * W;                                     \
                if (r1 <= r0) {                                                            \
                    for (int c = 0; c < W; c++) d[c] = fill;                               \
                    continue;                                                              \
                }                                                                          \
                const T *s0 = img + (ptrdiff_t)r0 * W;                                     \
                if (r1 - r0 == 3) {                                                        \
                    const T *s1 = s0 + W, *s2 = s1 + W;                                    \
                    TD_FOLD3_LOOP(is_max, 0, W, d, s0, s1, s2, 1);                         \
                    continue;                                                              \
                }                                                                          \
                memcpy(d, s0, sizeof(T) * (size_t)W);                                      \
                for (int r = r0 + 1; r < r1; r++) {                                        \
                    const T *sr = img + (ptrdiff_t)r * W;                                  \
                    TD_FOLD_LOOP(is_max, 0, W, d, sr);                                     \
                }                                                                          \
            }                                                                              \
            /* along the columns: o[i][j] = fold over b of vs[i][j*sw - pl + b] */        \
            if (sw == 1 && OW == W && kw - 1 - pl >= 0) { /* one loop over the plane */   \
                ptrdiff_t k0 = pl, k1 = plane - (kw - 1 - pl);                             \
                const T *s = vs - pl;                                                      \
                if (k1 > k0 && kw == 3) {                                                  \
                    const T *s1 = s + 1, *s2 = s + 2;                                      \
                    TD_FOLD3_LOOP(is_max, k0, k1, o, s, s1, s2, 1);                        \
                } else if (k1 > k0) {                                                      \
                    memcpy(o + k0, s + k0, sizeof(T) * (size_t)(k1 - k0));                 \
                    for (int b = 1; b < kw; b++) {                                         \
                        const T *sb = s + b;                                               \
                        TD_FOLD_LOOP(is_max, k0, k1, o, sb);                               \
                    }                                                                      \
                }                                                                          \
                for (int j = 0; j < OW; j++) { /* the border columns, clipped */         \
                    if (j == j0 && j1 > j) j = j1;                                         \
                    if (j >= OW) break;                                                    \
                    int c0 = j - pl > 0 ? j - pl : 0, c1 = j - pl + kw < W ? j - pl + kw : W; \
                    for (int i = 0; i < OH; i++) {                                         \
                        const T *vi = vs + (ptrdiff_t)i * W;                               \
                        T a = c1 > c0 ? vi[c0] : fill;                                     \
                        for (int c = c0 + 1; c < c1; c++)                                  \
                            a = is_max ? TD_MAX(a, vi[c]) : a + vi[c];                     \
                        o[(ptrdiff_t)i * OW + j] = a;                                      \
                    }                                                                      \
                }                                                                          \
            } else {                                                                       \
                for (int i = 0; i < OH; i++) {                                             \
                    T *restrict oi = o + (ptrdiff_t)i * OW;                                \
                    const T *vi = vs + (ptrdiff_t)i * W;                                   \
                    if (pl == 0 && L <= W && kw == 3) { /* inside: one pass, no copy */   \
                        const T *v1 = vi + 1, *v2 = vi + 2;                                \
                        if (sw == 1)                                                       \
                            TD_FOLD3_LOOP(is_max, 0, OW, oi, vi, v1, v2, 1);               \
                        else if (sw == 2)                                                  \
                            TD_FOLD3_LOOP(is_max, 0, OW, oi, vi, v1, v2, 2);               \
                        else                                                               \
                            TD_FOLD3_LOOP(is_max, 0, OW, oi, vi, v1, v2, sw);              \
                        continue;                                                          \
                    }                                                                      \
                    for (int c = 0; c < pl; c++) row[c] = fill; /* a padded row */         \
                    memcpy(row + pl, vi, sizeof(T) * (size_t)cw);                          \
                    for (ptrdiff_t c = pl + cw; c < L; c++) row[c] = fill;                 \
                    const T *src = row;                                                    \
                    int step = sw;                                                         \
                    if (sw == 2) { /* even and odd columns apart: unit strides */         \
                        for (ptrdiff_t t = 0; t < L / 2; t++)                              \
                            ev[t] = row[2 * t], od[t] = row[2 * t + 1];                    \
                        if (L % 2) ev[half - 1] = row[L - 1], od[half - 1] = fill;         \
                        step = 1;                                                          \
                    }                                                                      \
                    for (int b = 0; b < kw; b++) {                                         \
                        ptrdiff_t off = b;                                                 \
                        if (sw == 2) src = b % 2 ? od : ev, off = b / 2;                   \
                        const T *sb = src + off;                                           \
                        if (b == 0 && step == 1)                                           \
                            memcpy(oi, sb, sizeof(T) * (size_t)OW);                        \
                        else if (b == 0)                                                   \
                            for (int j = 0; j < OW; j++) oi[j] = sb[(ptrdiff_t)j * step];  \
                        else if (step == 1)                                                \
                            TD_FOLD_LOOP(is_max, 0, OW, oi, sb);                           \
                        else if (is_max)                                                   \
                            for (int j = 0; j < OW; j++)                                   \
                                oi[j] = TD_MAX(oi[j], sb[(ptrdiff_t)j * step]);            \
                        else                                                               \
                            for (int j = 0; j < OW; j++) oi[j] += sb[(ptrdiff_t)j * step]; \
                    }                                                                      \
                }                                                                          \
            }                                                                              \
            if (div)                                                                       \
                for (ptrdiff_t k = 0; k < (ptrdiff_t)OH * OW; k++) o[k] = o[k] / div[k];   \
        }                                                                                  \
        free(vs);                                                                          \
        return 0;                                                                          \
    }
TD_POOL(float, td_pool_f32)
TD_POOL(double, td_pool_f64)
