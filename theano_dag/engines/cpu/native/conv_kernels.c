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

/* The filters' transform, U = G g G' for each 3x3 filter g of w (F rows of C*9, ld
   apart): U[k][f][c] at k*kstride + f*C + c. */
#define TD_WINO_FILTERS(T, NAME)                                                           \
    void NAME(const T *w, ptrdiff_t ld, int F, int C, T *U, ptrdiff_t kstride)             \
    {                                                                                      \
        for (int f = 0; f < F; f++)                                                        \
            for (int c = 0; c < C; c++) {                                                  \
                const T *g = w + f * ld + (ptrdiff_t)c * 9;                                \
                T u[4][3];                                                                 \
                for (int j = 0; j < 3; j++) { /* G g: the columns */                       \
                    T g0 = g[j], g1 = g[3 + j], g2 = g[6 + j];                             \
                    u[0][j] = g0;                                                          \
                    u[1][j] = (T)0.5 * (g0 + g1 + g2);                                     \
                    u[2][j] = (T)0.5 * (g0 - g1 + g2);                                     \
                    u[3][j] = g2;                                                          \
                }                                                                          \
                T *o = U + (ptrdiff_t)f * C + c;                                           \
                for (int i = 0; i < 4; i++) { /* (G g) G': the rows */                     \
                    o[(4 * i + 0) * kstride] = u[i][0];                                    \
                    o[(4 * i + 1) * kstride] = (T)0.5 * (u[i][0] + u[i][1] + u[i][2]);     \
                    o[(4 * i + 2) * kstride] = (T)0.5 * (u[i][0] - u[i][1] + u[i][2]);     \
                    o[(4 * i + 3) * kstride] = u[i][2];                                    \
                }                                                                          \
            }                                                                              \
    }
TD_WINO_FILTERS(float, td_wino_filters_f32)
TD_WINO_FILTERS(double, td_wino_filters_f64)

/* 2-D pooling of P planes of H x W (x, planes HW apart, rows W apart) into P planes of
   OH x OW: the window of output (i, j) covers rows i*sh - pt + [0, kh) and columns
   j*sw - pl + [0, kw), clipped to the image (the padding adds nothing to a max or a
   sum). is_max: the maximum (a NaN wins, as with numpy's maximum; a window wholly in
   the padding is -inf), else the sum, divided by div[i][j] when div is not NULL.
   Separable: each image row is folded along its columns into h (H x OW, the columns
   whose windows lie inside the image in branch-free loops that the compiler
   vectorizes), then each output row folds kh rows of h. */
#define TD_FOLD(T, is_max, a, v) ((is_max) ? ((a) != (a) ? (a) : ((a) > (v) ? (a) : (v))) : (a) + (v))

#define TD_POOL_SPAN(T, SW)                                                                \
    do {                                                                                   \
        if (is_max)                                                                        \
            for (int j = j0; j < j1; j++) {                                                \
                T v = s[j * (SW)], a = hr[j];                                              \
                T m = a > v ? a : v;                                                       \
                hr[j] = a != a ? a : m;                                                    \
            }                                                                              \
        else                                                                               \
            for (int j = j0; j < j1; j++) hr[j] += s[j * (SW)];                            \
    } while (0)

#define TD_POOL(T, NAME)                                                                   \
    int NAME(const T *restrict x, int P, int H, int W, T *restrict out, int OH, int OW,    \
             int kh, int kw, int sh, int sw, int pt, int pl, int is_max, const double *div) \
    {                                                                                      \
        T *restrict h = malloc(sizeof(T) * (size_t)H * (size_t)OW);                        \
        if (!h) return -1;                                                                 \
        T fill = is_max ? -(T)INFINITY : (T)0;                                             \
        int j0 = (pl + sw - 1) / sw; /* the first column whose window starts inside */     \
        int j1 = W - kw + pl >= 0 ? (W - kw + pl) / sw + 1 : 0; /* past the last inside */ \
        if (j1 > OW) j1 = OW;                                                              \
        if (j0 > j1) j0 = j1;                                                              \
        int same = sw == 1 && sh == 1 && OW == W && OH == H && 2 * pl == kw - 1 &&          \
                   2 * pt == kh - 1;                                                       \
        for (int p = 0; p < P && same; p++) {                                              \
            /* A stride of 1 and the output the image's size: each pass is one loop over  \
               the plane (rows joined), then the columns and rows at the border again. */ \
            const T *img = x + (ptrdiff_t)p * H * W;                                       \
            T *restrict o = out + (ptrdiff_t)p * H * W;                                    \
            ptrdiff_t n = (ptrdiff_t)H * W;                                                \
            for (ptrdiff_t k = 0; k < n; k++) h[k] = fill;                                 \
            for (int b = 0; b < kw; b++) {                                                 \
                const T *s = img + b - pl;                                                 \
                ptrdiff_t k0 = pl - b > 0 ? pl - b : 0, k1 = n - (b - pl > 0 ? b - pl : 0); \
                if (is_max)                                                                \
                    for (ptrdiff_t k = k0; k < k1; k++) {                                  \
                        T v = s[k], a = h[k];                                              \
                        T m = a > v ? a : v;                                               \
                        h[k] = a != a ? a : m;                                             \
                    }                                                                      \
                else                                                                       \
                    for (ptrdiff_t k = k0; k < k1; k++) h[k] += s[k];                      \
            }                                                                              \
            for (int r = 0; r < H; r++) /* the border columns, without the wrapped taps */ \
                for (int j = 0; j < W; j++) {                                              \
                    if (j == pl && W - (kw - 1 - pl) > j) j = W - (kw - 1 - pl);           \
                    if (j >= W) break;                                                     \
                    T a = fill;                                                            \
                    for (int b = 0; b < kw; b++) {                                         \
                        int c = j + b - pl;                                                \
                        if (c >= 0 && c < W) a = TD_FOLD(T, is_max, a, img[(ptrdiff_t)r * W + c]); \
                    }                                                                      \
                    h[(ptrdiff_t)r * W + j] = a;                                           \
                }                                                                          \
            for (ptrdiff_t k = 0; k < n; k++) o[k] = fill;                                 \
            for (int a = 0; a < kh; a++) { /* along the rows: output row i, row i+a-pt */  \
                int i0 = pt - a > 0 ? pt - a : 0, i1 = H - (a - pt > 0 ? a - pt : 0);      \
                const T *hs = h + (ptrdiff_t)(a - pt) * W;                                 \
                ptrdiff_t k0 = (ptrdiff_t)i0 * W, k1 = (ptrdiff_t)i1 * W;                  \
                if (is_max)                                                                \
                    for (ptrdiff_t k = k0; k < k1; k++) {                                  \
                        T v = hs[k], c = o[k];                                             \
                        T m = c > v ? c : v;                                               \
                        o[k] = c != c ? c : m;                                             \
                    }                                                                      \
                else                                                                       \
                    for (ptrdiff_t k = k0; k < k1; k++) o[k] += hs[k];                     \
            }                                                                              \
            if (div)                                                                       \
                for (ptrdiff_t k = 0; k < n; k++) o[k] = (T)(o[k] / div[k]);               \
        }                                                                                  \
        for (int p = 0; p < P && !same; p++) {                                             \
            const T *img = x + (ptrdiff_t)p * H * W;                                       \
            for (int r = 0; r < H; r++) { /* along the columns */                          \
                const T *row = img + (ptrdiff_t)r * W;                                     \
                T *hr = h + (ptrdiff_t)r * OW;                                             \
                for (int j = 0; j < OW; j++) hr[j] = fill;                                 \
                for (int b = 0; b < kw; b++) {                                             \
                    const T *s = row + b - pl;                                             \
                    if (sw == 1) /* a constant stride, for the vectorizer */               \
                        TD_POOL_SPAN(T, 1);                                                \
                    else if (sw == 2)                                                      \
                        TD_POOL_SPAN(T, 2);                                                \
                    else                                                                   \
                        TD_POOL_SPAN(T, sw);                                               \
                }                                                                          \
                for (int j = 0; j < OW; j++) { /* the border columns */                    \
                    if (j == j0) j = j1;                                                   \
                    if (j >= OW) break;                                                    \
                    for (int b = 0; b < kw; b++) {                                         \
                        int c = j * sw + b - pl;                                           \
                        if (c >= 0 && c < W) hr[j] = TD_FOLD(T, is_max, hr[j], row[c]);    \
                    }                                                                      \
                }                                                                          \
            }                                                                              \
            T *restrict o = out + (ptrdiff_t)p * OH * OW;                                  \
            for (int i = 0; i < OH; i++, o += OW) { /* along the rows */                   \
                int r0 = i * sh - pt, r1 = r0 + kh;                                        \
                if (r0 < 0) r0 = 0;                                                        \
                if (r1 > H) r1 = H;                                                        \
                if (r1 <= r0) {                                                            \
                    for (int j = 0; j < OW; j++) o[j] = fill;                              \
                } else {                                                                   \
                    memcpy(o, h + (ptrdiff_t)r0 * OW, sizeof(T) * (size_t)OW);             \
                    for (int r = r0 + 1; r < r1; r++) {                                    \
                        const T *hr = h + (ptrdiff_t)r * OW;                               \
                        if (is_max)                                                        \
                            for (int j = 0; j < OW; j++) {                                 \
                                T a = o[j], v = hr[j];                                     \
                                T m = a > v ? a : v;                                       \
                                o[j] = a != a ? a : m;                                     \
                            }                                                              \
                        else                                                               \
                            for (int j = 0; j < OW; j++) o[j] += hr[j];                    \
                    }                                                                      \
                }                                                                          \
                if (div)                                                                   \
                    for (int j = 0; j < OW; j++) o[j] = (T)(o[j] / div[i * OW + j]);       \
            }                                                                              \
        }                                                                                  \
        free(h);                                                                           \
        return 0;                                                                          \
    }
TD_POOL(float, td_pool_f32)
TD_POOL(double, td_pool_f64)
