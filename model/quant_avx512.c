/*
 * model/quant_avx512.c — Q8_0 products with AVX512-VNNI (256-bit EVEX
 * vpdpbusd), built with its own flags and chosen at run time by quant.c.
 *
 * vpdpbusd multiplies unsigned by signed bytes.  Both Q8_0 operands are
 * signed, so the activations are flipped to unsigned (x + 128, an xor of
 * the sign bit, done once per activation block and reused for every weight
 * row) and the excess 128 * sum(w) is taken off by starting each block's
 * accumulator at -128 * (the weight bytes' sums per lane), computed once per
 * weight block and reused for every activation row.  Per (row of X, row of
 * W, block) the inner loop is then one vpdpbusd, one conversion, one scale
 * product and one fma.
 *
 * Register blocking: a tile of MR rows of X by NR rows of W (4 x 4 at most:
 * 16 accumulators, 4 weight vectors and their 4 corrections fit the 32
 * registers), so every weight block loaded serves MR activation rows and
 * every activation block NR weight rows.  The W tile (NR rows) stays in L1
 * while all M rows of X pass over it; at M = 1 the kernel streams W once.
 * Zen 4 splits 512-bit operations in two, so 256-bit vectors (one Q8_0
 * block each) lose nothing there and need no cross-lane shuffles.
 */
#include <immintrin.h>

#include "quant_internal.h"
#include "quant_x86.h"

#define MR_MAX 4
#define NR_MAX 4

static inline __attribute__((always_inline)) void tile(const int MR, const int NR, const uint8_t *W,
                                                       size_t wstride, int64_t nb, const uint8_t *X,
                                                       size_t xstride, float *Y, int64_t ldy,
                                                       float beta)
{
    __m256 acc[MR_MAX][NR_MAX];
    for (int j = 0; j < MR; j++)
        for (int i = 0; i < NR; i++)
            acc[j][i] = _mm256_setzero_ps();
    const __m256i k80 = _mm256_set1_epi8((char)0x80);
    const __m256i zero = _mm256_setzero_si256();
    for (int64_t b = 0; b < nb; b++) {
        __m256i wv[NR_MAX], corr[NR_MAX];
        float dw[NR_MAX];
        for (int i = 0; i < NR; i++) {
            const struct blk_q8_0 *w = (const struct blk_q8_0 *)(W + (size_t)i * wstride) + b;
            wv[i] = _mm256_loadu_si256((const __m256i *)w->qs);
            corr[i] = _mm256_sub_epi32(zero, _mm256_dpbusd_epi32(zero, k80, wv[i]));
            dw[i] = h2f(w->d);
        }
        for (int j = 0; j < MR; j++) {
            const struct blk_q8_0 *x = (const struct blk_q8_0 *)(X + (size_t)j * xstride) + b;
            const __m256i xu = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x->qs), k80);
            const float dx = h2f(x->d);
            for (int i = 0; i < NR; i++) {
                const __m256i s = _mm256_dpbusd_epi32(corr[i], xu, wv[i]);
                acc[j][i] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dx * dw[i]), acc[j][i]);
            }
        }
    }
    for (int j = 0; j < MR; j++)
        for (int i = 0; i < NR; i++) {
            float *y = &Y[j * ldy + i];
            const float v = hsum8(acc[j][i]);
            *y = beta != 0.0f ? *y + v : v;
        }
}

#define TILE_FN(mr, nr)                                                                            \
    static void tile_##mr##_##nr(const uint8_t *W, size_t ws, int64_t nb, const uint8_t *X,        \
                                 size_t xs, float *Y, int64_t ldy, float beta)                     \
    {                                                                                              \
        tile(mr, nr, W, ws, nb, X, xs, Y, ldy, beta);                                              \
    }
#define TILE_ROW(mr) TILE_FN(mr, 1) TILE_FN(mr, 2) TILE_FN(mr, 3) TILE_FN(mr, 4)
TILE_ROW(1)
TILE_ROW(2)
TILE_ROW(3)
TILE_ROW(4)

typedef void (*tile_fn)(const uint8_t *, size_t, int64_t, const uint8_t *, size_t, float *, int64_t,
                        float);
static const tile_fn tiles[MR_MAX][NR_MAX] = {
    {tile_1_1, tile_1_2, tile_1_3, tile_1_4},
    {tile_2_1, tile_2_2, tile_2_3, tile_2_4},
    {tile_3_1, tile_3_2, tile_3_3, tile_3_4},
    {tile_4_1, tile_4_2, tile_4_3, tile_4_4},
};

void quant__gemm_q8_0_avx512(QUANT__GEMM_ARGS)
{
    const int64_t nb = K / QK8_0;
    for (int64_t n = n0; n < n1; n += NR_MAX) {
        const int nr = n1 - n < NR_MAX ? (int)(n1 - n) : NR_MAX;
        for (int64_t m = 0; m < M; m += MR_MAX) {
            const int mr = M - m < MR_MAX ? (int)(M - m) : MR_MAX;
            tiles[mr - 1][nr - 1]((const uint8_t *)W + (size_t)n * wstride, wstride, nb,
                                  (const uint8_t *)Xq + (size_t)m * xstride, xstride,
                                  Y + m * ldy + n, ldy, beta);
        }
    }
}
