/*! The convolution emitters' two copy loops (theano_dag/engines/cpu/emit/conv.py), for
    float32 and float64: numpy makes the same arrays through strided views, 1.05x to 1.35x
    slower per layer of InceptionV3 (docs/performance.md, "Convolution"). */
#include <stddef.h>
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
