/*
 * model/quant_avx2.c — quantized products with AVX2 (vpmaddubsw), built with
 * its own flags and chosen at run time by quant.c; the scalar kernels of
 * quant.c and quant_r8.c and quant_gemm_ref are the references the tests
 * hold them to.
 *
 * vpmaddubsw multiplies unsigned by signed bytes and adds pairs into int16
 * with saturation.  The usual sign trick keeps it exact: |w| (unsigned) times
 * x with w's sign moved onto it (vpsignb), so each pair is at most 2 * 128 *
 * 127 < 32767; vpmaddwd by ones widens the pairs to int32.  |w| is computed
 * once per weight block and reused for MR activation rows.
 *
 * Register blocking: MR <= 6 rows of X by NR = 4 rows of W per tile.  Per
 * 32-block and row of X, the four int32 vectors of partial sums (one per W
 * row) are folded by two levels of vphaddd into one vector whose lane i
 * (and 4 + i) belongs to W row i; one conversion and one fma by the
 * block's scales (the four W scales in lanes, times X's) then serve four
 * outputs, where scaling each sum on its own took a conversion, a scalar
 * product, a broadcast and an fma per output.  What remains per 32 x 4
 * products is vpsignb + vpmaddubsw + vpmaddwd per W row, the floor of the
 * signed x signed trick on AVX2; the W rows stay in L1 while the tile
 * walks every row of X, and the next blocks of W are prefetched for the
 * first pass.  The four lanes come out of the final 128-bit fold in order,
 * and a row's sum never depends on how many rows share its tile (row
 * invariance: row m of Y is the same for every M).  Q4_0 and Q5_0 share
 * the kernel: their blocks are unpacked to signed bytes (code - 8, code -
 * 16) as they are loaded, once per MR rows.
 *
 * K-quants (Q4_K, Q5_K, Q6_K) against Q8_K activations: a weight super-block's
 * codes are unpacked once into eight 32-byte vectors of unsigned codes
 * (Q4_K 0..15, Q5_K 0..31, Q6_K 0..63) and its scales into 16-bit vectors, then reused
 * for up to KMR = 4 activation rows.  Per row: vpmaddubsw (codes x
 * activations, at most 2 * 63 * 127 per pair, no saturation), vpmaddwd by
 * the sub-block scales, integer sums over the super-block, one conversion
 * and fma.  The mins of Q4_K (x = d sc q - dmin m) and the offset 32 of
 * Q6_K's codes come off through the activations' 16-element sums (bsums):
 * sum_j m_j bsum_j, and 32 sum_j sc_j bsum_j.  The scales reach their
 * 16-bit lanes by one byte shuffle each from a vector built in registers.
 * Decode (M = 1) runs four W rows per call and folds their four
 * accumulators with vhaddps into one 4-float store; every other path sums
 * a row's lanes in that same order (hsum8_pairs), so results do not depend
 * on M.
 *
 * Activation rows (quant_rows to Q8_0 and Q8_K) are quantized here too,
 * byte-identical to the scalar quantizers (same scale, same rounding half
 * away from zero), at about a tenth of their cost (where quant.c runs the
 * AVX-512 kernels, model/quant_rows_avx512.c's rows instead).
 */
#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

#include "quant_internal.h"
#include "quant_x86.h"

#define MR_MAX 6
/* rows of X per pass over the band of W: their quantized rows (<= 64 x
 * 2.3 KB at K = 2048) stay in L2 while every weight row meets them */
#define M_CHUNK 64
#define NR_MAX  4
/* weight blocks ahead to prefetch (rows are read in order, 4 at a time) */
#define PF_BLOCKS 8

/* Weight block b of a row of type T (Q8_0, Q4_0, Q5_0: all against Q8_0
 * activations) as 32 signed bytes, and its scale. */
enum wt { WT_Q8_0, WT_Q4_0, WT_Q5_0 };

static inline int64_t wt_bytes(const enum wt T)
{
    return T == WT_Q8_0   ? (int64_t)sizeof(struct blk_q8_0)
           : T == WT_Q4_0 ? (int64_t)sizeof(struct blk_q4_0)
                          : (int64_t)sizeof(struct blk_q5_0);
}

static inline __attribute__((always_inline)) __m256i load_w(const enum wt T, const uint8_t *row,
                                                            int64_t b, float *d)
{
    if (T == WT_Q8_0) {
        const struct blk_q8_0 *w = (const struct blk_q8_0 *)row + b;
        *d = h2f(w->d);
        return _mm256_loadu_si256((const __m256i *)w->qs);
    }
    const __m256i lo4 = _mm256_set1_epi8(15);
    if (T == WT_Q4_0) {
        const struct blk_q4_0 *w = (const struct blk_q4_0 *)row + b;
        *d = h2f(w->d);
        const __m128i v = _mm_loadu_si128((const __m128i *)w->qs);
        const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), lo4);
        return _mm256_sub_epi8(q, _mm256_set1_epi8(8));
    }
    const struct blk_q5_0 *w = (const struct blk_q5_0 *)row + b;
    *d = h2f(w->d);
    const __m128i v = _mm_loadu_si128((const __m128i *)w->qs);
    const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), lo4);
    /* bit j of qh -> 0x10 in byte j: byte j of a broadcast picks qh byte
     * j / 8, then the mask keeps bit j % 8 */
    uint32_t qh;
    memcpy(&qh, w->qh, 4);
    const __m256i bytes = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int)qh),
        _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll, 0x0101010101010101ll, 0));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i hb = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit),
                                        _mm256_set1_epi8(16));
    return _mm256_sub_epi8(_mm256_or_si256(q, hb), _mm256_set1_epi8(16));
}

static inline __attribute__((always_inline)) void tile(const enum wt T, const int MR, const int NR,
                                                       const uint8_t *W, size_t wstride, int64_t nb,
                                                       const uint8_t *X, size_t xstride, float *Y,
                                                       int64_t ldy, float beta)
{
    __m256 acc[MR_MAX];
    for (int j = 0; j < MR; j++)
        acc[j] = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < nb; b++) {
        __m256i wv[NR_MAX], wa[NR_MAX];
        float dw[NR_MAX] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int i = 0; i < NR; i++) {
            const uint8_t *row = W + (size_t)i * wstride;
            _mm_prefetch((const char *)row + (b + PF_BLOCKS) * wt_bytes(T), _MM_HINT_T0);
            wv[i] = load_w(T, row, b, &dw[i]);
            wa[i] = _mm256_abs_epi8(wv[i]);
        }
        /* lane i (and 4 + i) of the reduced sums belongs to W row i */
        const __m128 d4 = _mm_setr_ps(dw[0], dw[1], dw[2], dw[3]);
        const __m256 d8 = _mm256_set_m128(d4, d4);
        for (int j = 0; j < MR; j++) {
            const struct blk_q8_0 *x = (const struct blk_q8_0 *)(X + (size_t)j * xstride) + b;
            const __m256i xv = _mm256_loadu_si256((const __m256i *)x->qs);
            __m256i s[NR_MAX];
            for (int i = 0; i < NR_MAX; i++)
                s[i] = i < NR ? _mm256_madd_epi16(
                                    _mm256_maddubs_epi16(wa[i], _mm256_sign_epi8(xv, wv[i])), ones)
                              : _mm256_setzero_si256();
            /* 4 x 8 int32 partial sums -> [s0 s1 s2 s3 | s0 s1 s2 s3] */
            const __m256i h =
                _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h),
                                     _mm256_mul_ps(d8, _mm256_set1_ps(h2f(x->d))), acc[j]);
        }
    }
    for (int j = 0; j < MR; j++) {
        float v[4];
        _mm_storeu_ps(v,
                      _mm_add_ps(_mm256_castps256_ps128(acc[j]), _mm256_extractf128_ps(acc[j], 1)));
        float *y = &Y[j * ldy];
        for (int i = 0; i < NR; i++)
            y[i] = beta != 0.0f ? y[i] + v[i] : v[i];
    }
}

#define TILE_FN(T, mr, nr)                                                                         \
    static void T##_##mr##_##nr(const uint8_t *W, size_t ws, int64_t nb, const uint8_t *X,         \
                                size_t xs, float *Y, int64_t ldy, float beta)                      \
    {                                                                                              \
        tile(WT_##T, mr, nr, W, ws, nb, X, xs, Y, ldy, beta);                                      \
    }
#define TILE_ROW(T, mr) TILE_FN(T, mr, 1) TILE_FN(T, mr, 2) TILE_FN(T, mr, 3) TILE_FN(T, mr, 4)

typedef void (*tile_fn)(const uint8_t *, size_t, int64_t, const uint8_t *, size_t, float *, int64_t,
                        float);

static void gemm_tiles(const tile_fn tiles[MR_MAX][NR_MAX], int64_t blk, QUANT__GEMM_ARGS)
{
    const int64_t nb = K / blk;
    for (int64_t mc = 0; mc < M; mc += M_CHUNK) {
        const int64_t me = M - mc < M_CHUNK ? M : mc + M_CHUNK;
        for (int64_t n = n0; n < n1; n += NR_MAX) {
            const int nr = n1 - n < NR_MAX ? (int)(n1 - n) : NR_MAX;
            for (int64_t m = mc; m < me; m += MR_MAX) {
                const int mr = me - m < MR_MAX ? (int)(me - m) : MR_MAX;
                tiles[mr - 1][nr - 1]((const uint8_t *)W + (size_t)n * wstride, wstride, nb,
                                      (const uint8_t *)Xq + (size_t)m * xstride, xstride,
                                      Y + m * ldy + n, ldy, beta);
            }
        }
    }
}

/* ---- decode (M = 1) ------------------------------------------------------ */

/*
 * One row of X streams every row of W once, so the product runs at the rate
 * W comes from memory, not at the tile's arithmetic rate (in cache the 1 x 4
 * tile runs at about twice one core's share of the read bandwidth).  What
 * limits it is how many cache lines are in flight: the hardware prefetcher
 * follows the four rows of a tile as four short streams (a row of K = 768
 * is 13 lines) and loses them at every new group.  The thread's band of W
 * is one contiguous range of bytes, so the decode path walks it in groups
 * of four rows and, while it computes a group, prefetches the next group
 * one block column at a time (the bytes of the next group in proportion to
 * the blocks done: about two lines per block).  The arithmetic is the 1 x 4
 * tile's, in the same order, so row m of Y is still the same for every M.
 */
/* Prefetches a line every 64 bytes of [p, p + bytes): consecutive spans
 * cover every line between them. */
static inline __attribute__((always_inline)) void prefetch_span(const uint8_t *p, int64_t bytes)
{
    for (int64_t o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)p + o, _MM_HINT_T0);
}

static inline __attribute__((always_inline)) void tile_m1(const enum wt T, const uint8_t *W,
                                                          size_t wstride, int64_t nb,
                                                          const uint8_t *X, float *Y, float beta,
                                                          const uint8_t *next)
{
    __m256 acc = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    const int64_t col = 4 * wt_bytes(T); /* bytes of one block column of the group */
    for (int64_t b = 0; b < nb; b++) {
        prefetch_span(next + b * col, col);
        __m256i wv[NR_MAX], wa[NR_MAX];
        float dw[NR_MAX];
        for (int i = 0; i < NR_MAX; i++) {
            wv[i] = load_w(T, W + (size_t)i * wstride, b, &dw[i]);
            wa[i] = _mm256_abs_epi8(wv[i]);
        }
        const __m128 d4 = _mm_setr_ps(dw[0], dw[1], dw[2], dw[3]);
        const __m256 d8 = _mm256_set_m128(d4, d4);
        const struct blk_q8_0 *x = (const struct blk_q8_0 *)X + b;
        const __m256i xv = _mm256_loadu_si256((const __m256i *)x->qs);
        __m256i s[NR_MAX];
        for (int i = 0; i < NR_MAX; i++)
            s[i] =
                _mm256_madd_epi16(_mm256_maddubs_epi16(wa[i], _mm256_sign_epi8(xv, wv[i])), ones);
        const __m256i h =
            _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), _mm256_mul_ps(d8, _mm256_set1_ps(h2f(x->d))),
                              acc);
    }
    __m128 v = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    if (beta != 0.0f)
        v = _mm_add_ps(_mm_loadu_ps(Y), v);
    _mm_storeu_ps(Y, v);
}

/* The whole groups of four rows of [n0, n1) for one row of X; returns
 * where the rest (fewer than four rows) starts. */
static inline __attribute__((always_inline)) int64_t decode_groups(const enum wt T,
                                                                   QUANT__GEMM_ARGS)
{
    (void)xstride, (void)ldy, (void)M;
    const int64_t nb = K / 32;
    const uint8_t *w = (const uint8_t *)W;
    prefetch_span(w + (size_t)n0 * wstride, 4 * (int64_t)wstride); /* the first group */
    for (; n0 + 4 <= n1; n0 += 4)
        tile_m1(T, w + (size_t)n0 * wstride, wstride, nb, Xq, Y + n0, beta,
                w + (size_t)(n0 + 4) * wstride);
    return n0;
}

#define GEMM_FN(T, t)                                                                              \
    TILE_ROW(T, 1)                                                                                 \
    TILE_ROW(T, 2)                                                                                 \
    TILE_ROW(T, 3)                                                                                 \
    TILE_ROW(T, 4)                                                                                 \
    TILE_ROW(T, 5)                                                                                 \
    TILE_ROW(T, 6)                                                                                 \
    void quant__gemm_##t##_avx2(QUANT__GEMM_ARGS)                                                  \
    {                                                                                              \
        static const tile_fn tiles[MR_MAX][NR_MAX] = {                                             \
            {T##_1_1, T##_1_2, T##_1_3, T##_1_4}, {T##_2_1, T##_2_2, T##_2_3, T##_2_4},            \
            {T##_3_1, T##_3_2, T##_3_3, T##_3_4}, {T##_4_1, T##_4_2, T##_4_3, T##_4_4},            \
            {T##_5_1, T##_5_2, T##_5_3, T##_5_4}, {T##_6_1, T##_6_2, T##_6_3, T##_6_4},            \
        };                                                                                         \
        if (M == 1) /* decode: groups of four rows, the rest below */                              \
            n0 = decode_groups(WT_##T, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);       \
        gemm_tiles(tiles, 32, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);                \
    }
GEMM_FN(Q8_0, q8_0)
GEMM_FN(Q4_0, q4_0)
GEMM_FN(Q5_0, q5_0)

/* ---- K-quants ---------------------------------------------------------- */

#define KMR 4

/* Sum of the 8 lanes of v as ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 +
 * v7)): the order in which the four-row decode path (two hadd levels, then
 * the halves) sums each row, so that row m of Y never depends on M. */
static inline float hsum8_pairs(__m256 v)
{
    const __m256 h = _mm256_hadd_ps(v, v), h2 = _mm256_hadd_ps(h, h);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(h2), _mm256_extractf128_ps(h2, 1)));
}

/* Q4_K (FIVE = 0) and Q5_K (FIVE = 1: a fifth bit per code from qh, bit j
 * of qh[l] for element l of sub-block j) */
static inline __attribute__((always_inline)) void
tile_kasym(const int FIVE, const int MR, const uint8_t *row, int64_t nb, const uint8_t *X,
           size_t xstride, float *Y, int64_t ldy, float beta, __m256 *ret)
{
    __m256 acc[KMR];
    for (int j = 0; j < MR; j++)
        acc[j] = _mm256_setzero_ps();
    const __m256i lo4 = _mm256_set1_epi8(15);
    for (int64_t b = 0; b < nb; b++) {
        const struct blk_q4_k *w4 = (const struct blk_q4_k *)row + b;
        const struct blk_q5_k *w5 = (const struct blk_q5_k *)row + b;
        const uint8_t *qs = FIVE ? w5->qs : w4->qs;
        __m256i q[8], sc[8];
        for (int i = 0; i < 4; i++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * i));
            q[2 * i] = _mm256_and_si256(v, lo4);
            q[2 * i + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4);
        }
        if (FIVE) {
            const __m256i hv = _mm256_loadu_si256((const __m256i *)w5->qh);
            const __m256i one = _mm256_set1_epi8(1);
            for (int j = 0; j < 8; j++)
                q[j] = _mm256_or_si256(
                    q[j], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, j), one), 4));
        }
        /* the 12 scale bytes to 8 scales then 8 mins, one byte each, with
         * word operations: scale/min j < 4 are the low 6 bits of bytes j /
         * j + 4; j >= 4 take 4 bits from byte j + 4 and their top 2 from
         * bits 6-7 of bytes j - 4 / j */
        uint32_t u0, u1, u2;
        const uint8_t *sp = FIVE ? w5->scales : w4->scales;
        memcpy(&u0, sp, 4);
        memcpy(&u1, sp + 4, 4);
        memcpy(&u2, sp + 8, 4);
        const uint32_t km1 = 0x3f3f3f3fu, km2 = 0x0f0f0f0fu, km3 = 0x03030303u;
        /* built from registers: storing the words and loading them as one
         * vector would stall on store forwarding every block */
        const __m128i sm =
            _mm_setr_epi32((int)(u0 & km1), (int)((u2 & km2) | (((u0 >> 6) & km3) << 4)),
                           (int)(u1 & km1), (int)(((u2 >> 4) & km2) | (((u1 >> 6) & km3) << 4)));
        /* scale j broadcast to every 16-bit lane: one byte shuffle each */
        const __m256i sw = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        for (int j = 0; j < 8; j++)
            sc[j] = _mm256_shuffle_epi8(sw, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)));
        /* mins, each twice: one per 16-element sum of the activations */
        const __m256i mv = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(
            sm, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15)));
        const float d = h2f(FIVE ? w5->d : w4->d), dmin = h2f(FIVE ? w5->dmin : w4->dmin);
        for (int r = 0; r < MR; r++) {
            const struct blk_q8_k *x = (const struct blk_q8_k *)(X + (size_t)r * xstride) + b;
            __m256i isum = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * j));
                const __m256i p = _mm256_maddubs_epi16(q[j], xv);
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, sc[j]));
            }
            const __m256i bs = _mm256_loadu_si256((const __m256i *)x->bsums);
            const __m256i msum = _mm256_madd_epi16(bs, mv);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * x->d), acc[r]);
            acc[r] =
                _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(dmin * x->d), acc[r]);
        }
    }
    if (ret) { /* one row of X: the caller sums four rows' lanes at once */
        *ret = acc[0];
        return;
    }
    for (int r = 0; r < MR; r++) {
        const float v = hsum8_pairs(acc[r]);
        Y[r * ldy] = beta != 0.0f ? Y[r * ldy] + v : v;
    }
}

static inline __attribute__((always_inline)) void tile_q4_k(const int MR, const struct blk_q4_k *w,
                                                            int64_t nb, const uint8_t *X,
                                                            size_t xstride, float *Y, int64_t ldy,
                                                            float beta, __m256 *ret)
{
    tile_kasym(0, MR, (const uint8_t *)w, nb, X, xstride, Y, ldy, beta, ret);
}

static inline __attribute__((always_inline)) void tile_q5_k(const int MR, const struct blk_q5_k *w,
                                                            int64_t nb, const uint8_t *X,
                                                            size_t xstride, float *Y, int64_t ldy,
                                                            float beta, __m256 *ret)
{
    tile_kasym(1, MR, (const uint8_t *)w, nb, X, xstride, Y, ldy, beta, ret);
}

static inline __attribute__((always_inline)) void tile_q6_k(const int MR, const struct blk_q6_k *w,
                                                            int64_t nb, const uint8_t *X,
                                                            size_t xstride, float *Y, int64_t ldy,
                                                            float beta, __m256 *ret)
{
    __m256 acc[KMR];
    for (int j = 0; j < MR; j++)
        acc[j] = _mm256_setzero_ps();
    const __m256i lo4 = _mm256_set1_epi8(15), lo2 = _mm256_set1_epi8(3);
    for (int64_t b = 0; b < nb; b++) {
        const struct blk_q6_k *wb = &w[b];
        __m256i q[8], sc[8];
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h + 32));
            const __m256i hb = _mm256_loadu_si256((const __m256i *)(wb->qh + 32 * h));
            const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(hb, lo2), 4);
            const __m256i h1 =
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), lo2), 4);
            const __m256i h2 =
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), lo2), 4);
            const __m256i h3 =
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), lo2), 4);
            q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(l0, lo4), h0);
            q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, lo4), h1);
            q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), lo4), h2);
            q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), lo4), h3);
        }
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)wb->scales));
        /* sc[g]: scale 2g in lanes 0-7, 2g + 1 in lanes 8-15 (one shuffle
         * each from the copies of scales 0-7 and 8-15 in both halves) */
        const __m256i s07 = _mm256_permute4x64_epi64(sc16, 0x44),
                      s8f = _mm256_permute4x64_epi64(sc16, 0xee);
        for (int g = 0; g < 8; g++) {
            const int k = 4 * (g & 3);
            const __m256i pick = _mm256_set_m128i(_mm_set1_epi16((short)(0x0100 * (k + 3) + k + 2)),
                                                  _mm_set1_epi16((short)(0x0100 * (k + 1) + k)));
            sc[g] = _mm256_shuffle_epi8(g < 4 ? s07 : s8f, pick);
        }
        const float d = h2f(wb->d);
        for (int r = 0; r < MR; r++) {
            const struct blk_q8_k *x = (const struct blk_q8_k *)(X + (size_t)r * xstride) + b;
            __m256i isum = _mm256_setzero_si256();
            for (int g = 0; g < 8; g++) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * g));
                const __m256i p = _mm256_maddubs_epi16(q[g], xv);
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, sc[g]));
            }
            const __m256i bs = _mm256_loadu_si256((const __m256i *)x->bsums);
            const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 5);
            isum = _mm256_sub_epi32(isum, off);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * x->d), acc[r]);
        }
    }
    if (ret) { /* one row of X: the caller sums four rows' lanes at once */
        *ret = acc[0];
        return;
    }
    for (int r = 0; r < MR; r++) {
        const float v = hsum8_pairs(acc[r]);
        Y[r * ldy] = beta != 0.0f ? Y[r * ldy] + v : v;
    }
}

#define KTILE_FNS(type)                                                                            \
    static void type##_1(const struct blk_##type *w, int64_t nb, const uint8_t *X, size_t xs,      \
                         float *Y, int64_t ldy, float beta)                                        \
    {                                                                                              \
        tile_##type(1, w, nb, X, xs, Y, ldy, beta, NULL);                                          \
    }                                                                                              \
    static void type##_2(const struct blk_##type *w, int64_t nb, const uint8_t *X, size_t xs,      \
                         float *Y, int64_t ldy, float beta)                                        \
    {                                                                                              \
        tile_##type(2, w, nb, X, xs, Y, ldy, beta, NULL);                                          \
    }                                                                                              \
    static void type##_3(const struct blk_##type *w, int64_t nb, const uint8_t *X, size_t xs,      \
                         float *Y, int64_t ldy, float beta)                                        \
    {                                                                                              \
        tile_##type(3, w, nb, X, xs, Y, ldy, beta, NULL);                                          \
    }                                                                                              \
    static void type##_4(const struct blk_##type *w, int64_t nb, const uint8_t *X, size_t xs,      \
                         float *Y, int64_t ldy, float beta)                                        \
    {                                                                                              \
        tile_##type(4, w, nb, X, xs, Y, ldy, beta, NULL);                                          \
    }                                                                                              \
    /* one row of X by four rows of W, their sums reduced together */                              \
    static void type##_w4(const uint8_t *W, size_t ws, int64_t nb, const uint8_t *X, float *Y,     \
                          float beta)                                                              \
    {                                                                                              \
        __m256 a[4];                                                                               \
        for (int i = 0; i < 4; i++) {                                                              \
            prefetch_span(W + (size_t)(i + 4) * ws, (int64_t)ws); /* the next group's row */       \
            tile_##type(1, (const struct blk_##type *)(W + (size_t)i * ws), nb, X, 0, NULL, 0,     \
                        0.0f, &a[i]);                                                              \
        }                                                                                          \
        const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));   \
        __m128 v = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));             \
        if (beta != 0.0f)                                                                          \
            v = _mm_add_ps(v, _mm_loadu_ps(Y));                                                    \
        _mm_storeu_ps(Y, v);                                                                       \
    }                                                                                              \
    void quant__gemm_##type##_avx2(QUANT__GEMM_ARGS)                                               \
    {                                                                                              \
        static void (*const fns[KMR])(const struct blk_##type *, int64_t, const uint8_t *, size_t, \
                                      float *, int64_t,                                            \
                                      float) = {type##_1, type##_2, type##_3, type##_4};           \
        const int64_t nb = K / QK_K;                                                               \
        if (M == 1) /* decode: four rows of W per call, the rest below */                          \
            for (; n0 + 4 <= n1; n0 += 4)                                                          \
                type##_w4((const uint8_t *)W + (size_t)n0 * wstride, wstride, nb, Xq, Y + n0,      \
                          beta);                                                                   \
        for (int64_t mc = 0; mc < M; mc += M_CHUNK) {                                              \
            const int64_t me = M - mc < M_CHUNK ? M : mc + M_CHUNK;                                \
            for (int64_t n = n0; n < n1; n++) {                                                    \
                const struct blk_##type *w =                                                       \
                    (const struct blk_##type *)((const uint8_t *)W + (size_t)n * wstride);         \
                for (int64_t m = mc; m < me; m += KMR) {                                           \
                    const int mr = me - m < KMR ? (int)(me - m) : KMR;                             \
                    fns[mr - 1](w, nb, (const uint8_t *)Xq + (size_t)m * xstride, xstride,         \
                                Y + m * ldy + n, ldy, beta);                                       \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
KTILE_FNS(q4_k)
KTILE_FNS(q5_k)
KTILE_FNS(q6_k)

/* ---- Q4_K_R8: eight Q4_K rows interleaved (model/quant_r8.c draws it) --- */

/*
 * Row r of the group lives in 32-bit lane r of every vector.  Per
 * sub-block j (32 columns) and row of X: four 32-byte loads of W give,
 * after one and (low nibbles) and one shift and and (high nibbles), eight
 * vectors of four codes per row; each meets four activation bytes
 * broadcast to every lane (vpbroadcastd from memory) in one vpmaddubsw.
 * The eight 16-bit products stay below 8 * 2 * 15 * 127 = 30480, so they
 * are summed in 16 bits, then one vpmaddwd by the sub-block's scales (row
 * r's in 16-bit lanes 2r, 2r + 1) gives each row's 32-bit sum.  The mins
 * meet the activations' 32-column sums (pairs of bsums, one vphaddw) in
 * four vpmaddwd per block.  Scales and mins of the eight rows are unpacked
 * once per block (r8_six) and shared by up to KMR rows of X.  Per block and
 * row: acc = fma(isum, d x_d, acc), acc = fma(-msum, dmin x_d, acc), as the
 * scalar kernel in model/quant_r8.c, so the two agree bit for bit.  The group
 * is one contiguous run of bytes; R8_PF blocks ahead of it are prefetched.
 */
/* blocks (1152 bytes each) ahead: without it the group read from memory
 * ran at 0.8x the file layout's rate, with 2-8 blocks ahead at 1.1-1.25x
 * (no order among 2, 4 and 8 within the noise; T1 / NTA hints no better) */
#define R8_PF 4

/* The 64 six-bit values (scales or mins; v = 8 j + r) of a block as four
 * vectors: out[p] holds values 16 p .. 16 p + 15 (sub-blocks 2p, 2p + 1,
 * rows 0..7) in both 128-bit halves. */
static inline __attribute__((always_inline)) void r8_six(const uint8_t *lo, const uint8_t *hi,
                                                         __m256i out[4])
{
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(0x30);
    const __m256i a = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lo));
    const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(lo + 16)));
    const __m256i h = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hi));
    out[0] =
        _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m2));
    out[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4),
                             _mm256_and_si256(_mm256_slli_epi16(h, 2), m2));
    out[2] = _mm256_or_si256(_mm256_and_si256(b, m4), _mm256_and_si256(h, m2));
    out[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(h, 2), m2));
}

static inline __m256i bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* The eight outputs of rows m < MR of a group tile into Y (ldy), added to
 * what is there when beta != 0. */
static inline __attribute__((always_inline)) void store_r8(const int MR, const __m256 *acc,
                                                           float *Y, int64_t ldy, float beta)
{
    for (int m = 0; m < MR; m++) {
        float *y = Y + m * ldy;
        __m256 v = acc[m];
        if (beta != 0.0f)
            v = _mm256_add_ps(_mm256_loadu_ps(y), v);
        _mm256_storeu_ps(y, v);
    }
}

/* Sub-block j's scales from r8_six's out (sv): rows 0-3 in the low half,
 * 4-7 in the high one, each row's twice (16-bit lanes 2r, 2r + 1), for
 * one vpmaddwd against the sub-block's 16-bit sums. */
static inline __attribute__((always_inline)) __m256i r8_sub_scales(const __m256i *sv, int j)
{
    const int8_t Z = -1;
    const __m256i spat0 = _mm256_setr_epi8(0, Z, 0, Z, 1, Z, 1, Z, 2, Z, 2, Z, 3, Z, 3, Z, 4, Z, 4,
                                           Z, 5, Z, 5, Z, 6, Z, 6, Z, 7, Z, 7, Z);
    const __m256i spat1 = _mm256_add_epi8(spat0, _mm256_set1_epi16(8));
    return _mm256_shuffle_epi8(sv[j >> 1], (j & 1) ? spat1 : spat0);
}

/* The end of a Q4_K_R8 / Q5_K_R8 block (mins ml, mh, f16 scales d, dmin)
 * for rows m < MR of X: the mins meet the activations' 32-column sums
 * (pairs of bsums) in four vpmaddwd, then acc = fma(isum, d x_d, acc),
 * acc = fma(-msum, dmin x_d, acc), as the scalar kernel. */
static inline __attribute__((always_inline)) void
r8_block_end(const int MR, const uint8_t *ml, const uint8_t *mh, const uint16_t *d,
             const uint16_t *dmin, const uint8_t *X, size_t xstride, int64_t b, const __m256i *isum,
             __m256 *acc)
{
    const int8_t Z = -1;
    /* sub-blocks 2p and 2p + 1's mins of row r in 16-bit lanes 2r, 2r + 1 */
    const __m256i mpat = _mm256_setr_epi8(0, Z, 8, Z, 1, Z, 9, Z, 2, Z, 10, Z, 3, Z, 11, Z, 4, Z,
                                          12, Z, 5, Z, 13, Z, 6, Z, 14, Z, 7, Z, 15, Z);
    __m256i mv[4], mp[4];
    r8_six(ml, mh, mv);
    for (int p = 0; p < 4; p++)
        mp[p] = _mm256_shuffle_epi8(mv[p], mpat);
    const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d));
    const __m256 m8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dmin));
    for (int m = 0; m < MR; m++) {
        const struct blk_q8_k *x = (const struct blk_q8_k *)(X + (size_t)m * xstride) + b;
        /* 32-bit lanes 0, 1 | 4, 5: column sums of sub-blocks (0, 1),
         * (2, 3) | (4, 5), (6, 7) */
        const __m256i bs = _mm256_loadu_si256((const __m256i *)x->bsums);
        const __m256i s2 = _mm256_hadd_epi16(bs, bs);
        __m256i msum =
            _mm256_madd_epi16(mp[0], _mm256_permutevar8x32_epi32(s2, _mm256_set1_epi32(0)));
        msum = _mm256_add_epi32(
            msum, _mm256_madd_epi16(mp[1], _mm256_permutevar8x32_epi32(s2, _mm256_set1_epi32(1))));
        msum = _mm256_add_epi32(
            msum, _mm256_madd_epi16(mp[2], _mm256_permutevar8x32_epi32(s2, _mm256_set1_epi32(4))));
        msum = _mm256_add_epi32(
            msum, _mm256_madd_epi16(mp[3], _mm256_permutevar8x32_epi32(s2, _mm256_set1_epi32(5))));
        const __m256 dx = _mm256_set1_ps(x->d);
        acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m]), _mm256_mul_ps(d8, dx), acc[m]);
        acc[m] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(m8, dx), acc[m]);
    }
}

/* The fifth bit of Q5_K_R8 code vector (t, low | high nibble) at bit b =
 * 2 t (+ 1) of each byte of h, moved to bit 4 (within each byte: 16-bit
 * shifts by at most 4 left or 3 right, then the caller's mask). */
static inline __attribute__((always_inline)) __m256i r5_bit4(__m256i h, int b)
{
    return b < 4 ? _mm256_slli_epi16(h, 4 - b) : b == 4 ? h : _mm256_srli_epi16(h, b - 4);
}

/* A 32-byte vector v of packed codes (Q4_K_R8 / Q4_0_R8 vector t) as its
 * low and high nibbles, with their fifth bits from hv when q5 (Q5_K_R8,
 * Q5_0_R8, Q5_1_R8: bits 2 t and 2 t + 1 of each byte). */
static inline __attribute__((always_inline)) void r4_codes(const bool q5, __m256i v, __m256i hv,
                                                           int t, __m256i *lo, __m256i *hi)
{
    const __m256i m4 = _mm256_set1_epi8(15), m10 = _mm256_set1_epi8(16);
    *lo = _mm256_and_si256(v, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    if (q5) {
        *lo = _mm256_or_si256(*lo, _mm256_and_si256(r5_bit4(hv, 2 * t), m10));
        *hi = _mm256_or_si256(*hi, _mm256_and_si256(r5_bit4(hv, 2 * t + 1), m10));
    }
}

/* MR rows of X (xstride apart) by the group G (nb blocks) of Q4_K_R8, or
 * Q5_K_R8 when q5: Y[m][0..8). */
static inline __attribute__((always_inline)) void tile_k(const int MR, const bool q5,
                                                         const uint8_t *G, int64_t nb,
                                                         const uint8_t *X, size_t xstride, float *Y,
                                                         int64_t ldy, float beta)
{
    const size_t bb = q5 ? sizeof(struct blk_q5_k_r8) : sizeof(struct blk_q4_k_r8);
    __m256 acc[KMR];
    for (int m = 0; m < MR; m++)
        acc[m] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = G + (size_t)b * bb;
        /* d, dmin, the scales, mins and qs: at the same offsets in both
         * layouts (model/quant_internal.h) */
        const struct blk_q4_k_r8 *w = (const struct blk_q4_k_r8 *)blk;
        prefetch_span(blk + R8_PF * bb, (int64_t)bb);
        __m256i sv[4], isum[KMR];
        r8_six(w->sl, w->sh, sv);
        for (int m = 0; m < MR; m++)
            isum[m] = _mm256_setzero_si256();
        for (int j = 0; j < 8; j++) {
            const __m256i sc = r8_sub_scales(sv, j);
            const __m256i hv =
                q5 ? _mm256_loadu_si256(
                         (const __m256i *)(((const struct blk_q5_k_r8 *)blk)->qh + 32 * j))
                   : _mm256_setzero_si256();
            /* loads outer, rows of X inner: one load's two code vectors
             * meet every row's activations before the next load, so only
             * 2 code vectors, not 8, are live beside the rows' 16-bit sums
             * (the 8 spilled: 20 stores in the 4-row Q4_K tile, none in
             * this loop now; the kernel alone 1.14x, Q6_K_R8's the same
             * way 1.06x, Q4_K_M decode 64 1.16x: BENCHMARKS.md) */
            __m256i s16[KMR];
            for (int m = 0; m < MR; m++) /* set below before use; for the compiler */
                s16[m] = _mm256_setzero_si256();
            for (int t = 0; t < 4; t++) {
                __m256i lo, hi;
                r4_codes(q5, _mm256_loadu_si256((const __m256i *)(w->qs + 128 * j + 32 * t)), hv, t,
                         &lo, &hi);
                for (int m = 0; m < MR; m++) {
                    const int8_t *xq =
                        ((const struct blk_q8_k *)(X + (size_t)m * xstride) + b)->qs + 32 * j;
                    const __m256i p =
                        _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4(xq + 4 * t)),
                                         _mm256_maddubs_epi16(hi, bcast4(xq + 16 + 4 * t)));
                    /* Q4_K's codes (0..15): all eight products of the
                     * sub-block sum in 16 bits; Q5_K's (0..31): four */
                    const bool start = q5 ? (t & 1) == 0 : t == 0;
                    s16[m] = start ? p : _mm256_add_epi16(s16[m], p);
                    __asm__("" : "+x"(s16[m])); /* as in tile_q8r8 below */
                    if (q5 && (t & 1)) {
                        isum[m] = _mm256_add_epi32(isum[m], _mm256_madd_epi16(s16[m], sc));
                        __asm__("" : "+x"(isum[m]));
                    }
                }
            }
            if (!q5)
                for (int m = 0; m < MR; m++)
                    isum[m] = _mm256_add_epi32(isum[m], _mm256_madd_epi16(s16[m], sc));
        }
        r8_block_end(MR, w->ml, w->mh, w->d, w->dmin, X, xstride, b, isum, acc);
    }
    store_r8(MR, acc, Y, ldy, beta);
}

/* A tile of a load-time layout: MR rows of X (xs bytes apart) by the
 * group G of eight weight rows, nb blocks: Y[m][0..8) (ldy apart), added
 * to what is there when beta != 0.  first: the first pass of X over the
 * group (the decode case streams W from memory: the tile may prefetch). */
typedef void (*group_fn)(bool first, const uint8_t *G, int64_t nb, const uint8_t *X, size_t xs,
                         float *Y, int64_t ldy, float beta);
#define GROUP_MR_MAX 4 /* the tallest tile of any layout below */

/* The groups of eight rows over [n0, n1) for every layout of rows in
 * eights: fns[mr - 1] is the tile of mr rows of X (mr <= MR <=
 * GROUP_MR_MAX), blk the layout's block (elements).  X is walked in passes
 * of M_CHUNK rows over the band (a group, at most 18 KiB at K = 2048,
 * stays in L1 while a pass walks it), MR rows of X at a time; a group that
 * the range cuts is computed whole into a scratch tile, then the columns
 * asked for are stored. */
static inline __attribute__((always_inline)) void gemm_groups(const group_fn *fns, const int MR,
                                                              const int64_t blk, QUANT__GEMM_ARGS)
{
    const int64_t nb = K / blk;
    for (int64_t mc = 0; mc < M; mc += M_CHUNK) {
        const int64_t me = M - mc < M_CHUNK ? M : mc + M_CHUNK;
        for (int64_t g = n0 / 8; 8 * g < n1; g++) {
            const uint8_t *G = (const uint8_t *)W + (size_t)g * 8 * wstride;
            const int64_t c0 = 8 * g < n0 ? n0 : 8 * g, c1 = 8 * g + 8 > n1 ? n1 : 8 * g + 8;
            for (int64_t m = mc; m < me; m += MR) {
                const int mr = me - m < MR ? (int)(me - m) : MR;
                const uint8_t *Xm = (const uint8_t *)Xq + (size_t)m * xstride;
                if (c1 - c0 == 8) {
                    fns[mr - 1](m == mc, G, nb, Xm, xstride, Y + m * ldy + 8 * g, ldy, beta);
                    continue;
                }
                float tmp[GROUP_MR_MAX * 8];
                fns[mr - 1](m == mc, G, nb, Xm, xstride, tmp, 8, 0.0f);
                for (int i = 0; i < mr; i++)
                    for (int64_t n = c0; n < c1; n++) {
                        float *y = &Y[(m + i) * ldy + n];
                        const float v = tmp[i * 8 + (n - 8 * g)];
                        *y = beta != 0.0f ? *y + v : v;
                    }
            }
        }
    }
}

/* The product of one layout of rows in eights: its tiles of 1..4 rows of X
 * (name_1 .. name_4: TILE(mr, first, G, nb, X, xs, Y, ldy, beta) with mr
 * a constant, so each height is compiled on its own and keeps its sums in
 * registers) and quant__gemm_<name>_avx2 over them, blocks of blk
 * elements.  MR is the layout's tallest tile, which must be
 * GROUP_MR_MAX. */
#define GROUP_TILE_FN(name, TILE, mr)                                                              \
    static void name##_##mr(bool first, const uint8_t *G, int64_t nb, const uint8_t *X, size_t xs, \
                            float *Y, int64_t ldy, float beta)                                     \
    {                                                                                              \
        (void)first; /* the tiles that prefetch on every pass do not look at it */                 \
        TILE(mr, first, G, nb, X, xs, Y, ldy, beta);                                               \
    }
#define GROUP_GEMM(name, TILE, MR, blk)                                                            \
    _Static_assert((MR) == GROUP_MR_MAX, #name ": tiles of 1..4 rows");                            \
    GROUP_TILE_FN(name, TILE, 1)                                                                   \
    GROUP_TILE_FN(name, TILE, 2)                                                                   \
    GROUP_TILE_FN(name, TILE, 3)                                                                   \
    GROUP_TILE_FN(name, TILE, 4)                                                                   \
    void quant__gemm_##name##_avx2(QUANT__GEMM_ARGS)                                               \
    {                                                                                              \
        static const group_fn fns[GROUP_MR_MAX] = {name##_1, name##_2, name##_3, name##_4};        \
        gemm_groups(fns, GROUP_MR_MAX, blk, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);  \
    }

/* the K-quant tiles prefetch on every pass: first is not theirs */
#define TILE_Q4_K_R8(mr, first, ...) tile_k(mr, false, __VA_ARGS__)
GROUP_GEMM(q4_k_r8, TILE_Q4_K_R8, KMR, QK_K)

/* ---- Q5_K_R8: eight Q5_K rows interleaved (model/quant_r8.c draws it) --- */

/*
 * Q4_K_R8's tile (tile_k above, q5 true), with each code vector's fifth
 * bit from the sub-block's qh vector (one load): the bit of vector (t, low
 * | high nibble) sits at bit 2 t (+ 1) of the code's byte, and a 16-bit
 * shift and a mask move it to bit 4.  Codes are 0..31, so a vpmaddubsw
 * pair is at most 2 * 31 * 128 = 7936 and only four products sum in 16
 * bits: the sub-block's scale is applied (vpmaddwd) after loads 0-1 and
 * after loads 2-3.  Mins, scales and the accumulation as Q4_K_R8, so the
 * scalar kernel agrees bit for bit.
 */
#define TILE_Q5_K_R8(mr, first, ...) tile_k(mr, true, __VA_ARGS__)
GROUP_GEMM(q5_k_r8, TILE_Q5_K_R8, KMR, QK_K)

/* ---- Q6_K_R8: eight Q6_K rows interleaved (model/quant_r8.c draws it) --- */

/*
 * As Q4_K_R8: row r in 32-bit lane r, four codes per row meeting one
 * activation broadcast.  Per 32-column chunk: four ql and two qh loads give
 * eight vectors of codes 0..63 (nibble, or the top two bits from their
 * pair in qh).  A product pair is at most 2 * 63 * 127 = 16002, so two
 * steps are summed in 16 bits before each vpmaddwd by the sub-block's
 * scales (sign-extended from a byte shuffle by an arithmetic shift); the
 * same shuffle with a shift of 3 instead of 8 gives 32 sc, whose vpmaddwd
 * with the bsums takes the codes' offset off.  Per block, row and row of
 * X: acc = fma(isum, d x_d, acc), as the scalar kernel.
 */
static inline __attribute__((always_inline)) void tile_r6(const int MR, const uint8_t *G,
                                                          int64_t nb, const uint8_t *X,
                                                          size_t xstride, float *Y, int64_t ldy,
                                                          float beta)
{
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    const int8_t Z = -1;
    /* rows 0-3 of a sub-block (bytes 0-7 of the pair's 16) in the low
     * half, 4-7 in the high one, each row's byte in the high byte of 16-bit
     * lanes 2r, 2r + 1; patb: the pair's second sub-block (bytes 8-15) */
    const __m256i pata = _mm256_setr_epi8(Z, 0, Z, 0, Z, 1, Z, 1, Z, 2, Z, 2, Z, 3, Z, 3, Z, 4, Z,
                                          4, Z, 5, Z, 5, Z, 6, Z, 6, Z, 7, Z, 7);
    const __m256i patb = _mm256_add_epi8(pata, _mm256_set1_epi16(0x0800));
    /* the pair's two sub-blocks of row r in 16-bit lanes 2r, 2r + 1 */
    const __m256i pato = _mm256_setr_epi8(Z, 0, Z, 8, Z, 1, Z, 9, Z, 2, Z, 10, Z, 3, Z, 11, Z, 4, Z,
                                          12, Z, 5, Z, 13, Z, 6, Z, 14, Z, 7, Z, 15);
    __m256 acc[KMR];
    for (int m = 0; m < MR; m++)
        acc[m] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const struct blk_q6_k_r8 *w = (const struct blk_q6_k_r8 *)G + b;
        prefetch_span((const uint8_t *)(w + R8_PF), (int64_t)sizeof(*w));
        __m256i isum[KMR];
        for (int m = 0; m < MR; m++)
            isum[m] = _mm256_setzero_si256();
        for (int c = 0; c < 8; c++) {
            const __m256i s2 =
                _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(w->sc + 16 * c)));
            const __m256i sa = _mm256_srai_epi16(_mm256_shuffle_epi8(s2, pata), 8);
            const __m256i sb = _mm256_srai_epi16(_mm256_shuffle_epi8(s2, patb), 8);
            const __m256i so = _mm256_srai_epi16(_mm256_shuffle_epi8(s2, pato), 3); /* 32 sc */
            const __m256i h0 = _mm256_loadu_si256((const __m256i *)(w->qh + 64 * c));
            const __m256i h1 = _mm256_loadu_si256((const __m256i *)(w->qh + 64 * c + 32));
            /* four passes over the rows of X, each with two code vectors:
             * g = 0, 1 the low nibbles of loads 2g, 2g + 1 (scales sa), g =
             * 2, 3 the high nibbles of loads 2g - 4, 2g - 3 (sb); only those
             * two are live beside the rows' sums, not all eight (which
             * spilled) */
            for (int g = 0; g < 4; g++) {
                __m256i cv[2];
                for (int u = 0; u < 2; u++) {
                    const int t = 2 * (g & 1) + u;
                    const __m256i v =
                        _mm256_loadu_si256((const __m256i *)(w->ql + 128 * c + 32 * t));
                    /* bits 2t, 2t + 1 of the qh bytes to bits 4, 5 */
                    const __m256i h = g < 2 ? h0 : h1;
                    const __m256i a = t == 0   ? _mm256_slli_epi16(h, 4)
                                      : t == 1 ? _mm256_slli_epi16(h, 2)
                                      : t == 2 ? h
                                               : _mm256_srli_epi16(h, 2);
                    const __m256i n = g < 2 ? v : _mm256_srli_epi16(v, 4);
                    cv[u] = _mm256_or_si256(_mm256_and_si256(n, m4), _mm256_and_si256(a, m30));
                }
                const __m256i sg = g < 2 ? sa : sb;
                for (int m = 0; m < MR; m++) {
                    const int8_t *xq =
                        ((const struct blk_q8_k *)(X + (size_t)m * xstride) + b)->qs + 32 * c +
                        8 * g;
                    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(cv[0], bcast4(xq)),
                                                       _mm256_maddubs_epi16(cv[1], bcast4(xq + 4)));
                    isum[m] = _mm256_add_epi32(isum[m], _mm256_madd_epi16(p, sg));
                    __asm__("" : "+x"(isum[m])); /* as in tile_q8r8 below */
                }
            }
            for (int m = 0; m < MR; m++) {
                const struct blk_q8_k *x = (const struct blk_q8_k *)(X + (size_t)m * xstride) + b;
                /* the offset: 32 sc_j bsum_j for sub-blocks 2c, 2c + 1 */
                isum[m] = _mm256_sub_epi32(
                    isum[m], _mm256_madd_epi16(so, bcast4((const int8_t *)(x->bsums + 2 * c))));
            }
        }
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d));
        for (int m = 0; m < MR; m++) {
            const struct blk_q8_k *x = (const struct blk_q8_k *)(X + (size_t)m * xstride) + b;
            acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m]),
                                     _mm256_mul_ps(d8, _mm256_set1_ps(x->d)), acc[m]);
        }
    }
    store_r8(MR, acc, Y, ldy, beta);
}

#define TILE_Q6_K_R8(mr, first, ...) tile_r6(mr, __VA_ARGS__)
GROUP_GEMM(q6_k_r8, TILE_Q6_K_R8, KMR, QK_K)

/* ---- Q3_K_R8: eight Q3_K rows interleaved (model/quant_r8.c draws it) --- */

/*
 * As Q6_K_R8: row r in 32-bit lane r, four codes per row meeting one
 * activation broadcast.  Per 32-column chunk c: the sixteen 6-bit scales
 * unpack in one vector from their 12 bytes (loaded into both halves), each
 * to bits 2-7 of its byte (the low 4 bits by a shift and a mask of either
 * nibble, joined by vpunpcklqdq; the top 2 by vpshufd of bytes 8-11, a
 * variable shift by 6, 4, 2, 0 and a mask), so that tile_r6's shuffles
 * with an arithmetic shift of 10 sign-extend each sub-block's scales into
 * 16-bit lanes; a blend of the two and a shift by 2 give 4 s for the
 * offset.  The codes of slots 0-5 are a mask (and a 16-bit shift) of a
 * vector away, slots 6-7 two of each and an or.  Codes are 0..7, so a
 * vpmaddubsw pair is at most 2 * 7 * 128 = 1792 and a sub-block's four
 * products sum in 16 bits before one vpmaddwd by its scales; the offset 4
 * comes off as tile_r6's 32, by vpmaddwd of 4 s with the two sub-blocks'
 * bsums.  Per block, row and row of X: acc = fma(isum, d x_d, acc), as the
 * scalar kernel.  In the 4-row tile (GCC 12, -O3) the chunk loop holds
 * the sums and code vectors in registers and reloads only three byte masks
 * from the stack; acc goes to the stack and back once per block.
 */
static inline __attribute__((always_inline)) void tile_r3(const int MR, const uint8_t *G,
                                                          int64_t nb, const uint8_t *X,
                                                          size_t xstride, float *Y, int64_t ldy,
                                                          float beta)
{
    const __m256i m3 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(4), m7 = _mm256_set1_epi8(7);
    const __m256i m3c = _mm256_set1_epi8(0x3c), mc0 = _mm256_set1_epi8((char)0xc0);
    /* the top 2 bits of value 4 k + i at bits 2 k of byte 8 + i: dword k
     * of each half shifted to bits 6-7 */
    const __m256i tops = _mm256_setr_epi32(6, 4, 2, 0, 6, 4, 2, 0);
    const int8_t Z = -1;
    /* as tile_r6's: sub-block 2c's scale of row r (byte r) in the high
     * byte of 16-bit lanes 2r, 2r + 1; patb sub-block 2c + 1's (byte 8 +
     * r) */
    const __m256i pata = _mm256_setr_epi8(Z, 0, Z, 0, Z, 1, Z, 1, Z, 2, Z, 2, Z, 3, Z, 3, Z, 4, Z,
                                          4, Z, 5, Z, 5, Z, 6, Z, 6, Z, 7, Z, 7);
    const __m256i patb = _mm256_add_epi8(pata, _mm256_set1_epi16(0x0800));
    __m256 acc[KMR];
    for (int m = 0; m < MR; m++)
        acc[m] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const struct blk_q3_k_r8 *w = (const struct blk_q3_k_r8 *)G + b;
        prefetch_span((const uint8_t *)(w + R8_PF), (int64_t)sizeof(*w));
        __m256i isum[KMR];
        for (int m = 0; m < MR; m++)
            isum[m] = _mm256_setzero_si256();
        for (int c = 0; c < 8; c++) {
            /* the chunk's 12 bytes of scales (and 4 it does not use: the
             * next chunk's, the codes' at c = 7) in both halves */
            const __m256i sv =
                _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(w->s + 12 * c)));
            const __m256i lo =
                _mm256_unpacklo_epi64(_mm256_and_si256(_mm256_slli_epi16(sv, 2), m3c),
                                      _mm256_and_si256(_mm256_srli_epi16(sv, 2), m3c));
            const __m256i hi =
                _mm256_and_si256(_mm256_sllv_epi32(_mm256_shuffle_epi32(sv, 0xaa), tops), mc0);
            /* byte v = 8 h + r: row r's scale of sub-block 2c + h, times 4 */
            const __m256i s2 = _mm256_or_si256(lo, hi);
            const __m256i sa = _mm256_srai_epi16(_mm256_shuffle_epi8(s2, pata), 10);
            const __m256i sb = _mm256_srai_epi16(_mm256_shuffle_epi8(s2, patb), 10);
            /* 4 s: row r's of sub-blocks 2c, 2c + 1 in lanes 2r, 2r + 1 */
            const __m256i so = _mm256_slli_epi16(_mm256_blend_epi16(sa, sb, 0xaa), 2);
            for (int m = 0; m < MR; m++) {
                const struct blk_q8_k *x = (const struct blk_q8_k *)(X + (size_t)m * xstride) + b;
                /* the offset: 4 s_j bsum_j for sub-blocks 2c, 2c + 1 */
                isum[m] = _mm256_sub_epi32(
                    isum[m], _mm256_madd_epi16(so, bcast4((const int8_t *)(x->bsums + 2 * c))));
                __asm__("" : "+x"(isum[m]));
            }
            const uint8_t *q = w->q + 96 * c;
            /* sub-block 2c + u: slots 4u .. 4u + 3, their four code
             * vectors meeting every row of X before the next sub-block's */
            for (int u = 0; u < 2; u++) {
                const __m256i v0 = _mm256_loadu_si256((const __m256i *)q);
                const __m256i v1 = _mm256_loadu_si256((const __m256i *)(q + 32));
                const __m256i v2 = _mm256_loadu_si256((const __m256i *)(q + 64));
                __m256i cv[4];
                if (u == 0) {
                    cv[0] = _mm256_and_si256(v0, m7);
                    cv[1] = _mm256_and_si256(_mm256_srli_epi16(v0, 3), m7);
                    cv[2] = _mm256_and_si256(v1, m7);
                    cv[3] = _mm256_and_si256(_mm256_srli_epi16(v1, 3), m7);
                } else {
                    cv[0] = _mm256_and_si256(v2, m7);
                    cv[1] = _mm256_and_si256(_mm256_srli_epi16(v2, 3), m7);
                    /* slots 6, 7: bits 6-7 of v0, v1 and bits 6, 7 of v2 */
                    cv[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v0, 6), m3),
                                            _mm256_and_si256(_mm256_srli_epi16(v2, 4), m4));
                    cv[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v1, 6), m3),
                                            _mm256_and_si256(_mm256_srli_epi16(v2, 5), m4));
                }
                const __m256i sg = u ? sb : sa;
                for (int m = 0; m < MR; m++) {
                    const int8_t *xq =
                        ((const struct blk_q8_k *)(X + (size_t)m * xstride) + b)->qs + 32 * c +
                        16 * u;
                    __m256i p = _mm256_maddubs_epi16(cv[0], bcast4(xq));
                    p = _mm256_add_epi16(p, _mm256_maddubs_epi16(cv[1], bcast4(xq + 4)));
                    p = _mm256_add_epi16(p, _mm256_maddubs_epi16(cv[2], bcast4(xq + 8)));
                    p = _mm256_add_epi16(p, _mm256_maddubs_epi16(cv[3], bcast4(xq + 12)));
                    isum[m] = _mm256_add_epi32(isum[m], _mm256_madd_epi16(p, sg));
                    __asm__("" : "+x"(isum[m])); /* as in tile_q8r8 below */
                }
            }
        }
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d));
        for (int m = 0; m < MR; m++) {
            const struct blk_q8_k *x = (const struct blk_q8_k *)(X + (size_t)m * xstride) + b;
            acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m]),
                                     _mm256_mul_ps(d8, _mm256_set1_ps(x->d)), acc[m]);
        }
    }
    store_r8(MR, acc, Y, ldy, beta);
}

#define TILE_Q3_K_R8(mr, first, ...) tile_r3(mr, __VA_ARGS__)
GROUP_GEMM(q3_k_r8, TILE_Q3_K_R8, KMR, QK_K)

/* ---- Q8_0_R8: eight Q8_0 rows interleaved (model/quant_r8.c draws it) --- */

/*
 * Row r of the group lives in 32-bit lane r of every vector.  Per 32-column
 * block: eight 32-byte loads of W, each holding four codes of every row;
 * |w| once per load (shared by up to Q8R_MR rows of X), then per row of X
 * the four activation bytes of those columns broadcast to every lane
 * (vpbroadcastd from memory), vpsignb moving w's sign onto them,
 * vpmaddubsw (|w| x signed x: a pair is at most 2 * 128 * 127, no
 * saturation, -128 codes included), vpmaddwd by ones and an add into the
 * row's 32-bit sums: the sums come out one lane per weight row, with no
 * horizontal adds, and the eight scales of the block convert in one
 * vcvtph2ps.  Per block and row of X: acc = fma(isum, d_w x_d, acc), as the
 * scalar kernel in model/quant_r8.c, so the two agree bit for bit and row m of
 * Y never depends on M.  The group is one contiguous run of bytes; the
 * first pass of X over it prefetches Q8R_PF blocks ahead (the decode case:
 * the one pass of one row, W streamed from memory).
 */
#define Q8R_MR 4
/* blocks (272 bytes) ahead: 1.1 KiB, as Q4_K_R8's four blocks */
#define Q8R_PF 4

static inline __attribute__((always_inline)) void tile_q8r8(const int MR, const bool pf,
                                                            const uint8_t *G, int64_t nb,
                                                            const uint8_t *X, size_t xstride,
                                                            float *Y, int64_t ldy, float beta)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[Q8R_MR];
    for (int m = 0; m < MR; m++)
        acc[m] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const struct blk_q8_0_r8 *w = (const struct blk_q8_0_r8 *)G + b;
        if (pf)
            prefetch_span((const uint8_t *)(w + Q8R_PF), (int64_t)sizeof(*w));
        const struct blk_q8_0 *x[Q8R_MR];
        __m256i isum[Q8R_MR];
        for (int m = 0; m < MR; m++) {
            x[m] = (const struct blk_q8_0 *)(X + (size_t)m * xstride) + b;
            isum[m] = _mm256_setzero_si256();
        }
        for (int t = 0; t < 8; t++) {
            const __m256i wv = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * t));
            const __m256i wa = _mm256_abs_epi8(wv);
            for (int m = 0; m < MR; m++) {
                const __m256i p =
                    _mm256_maddubs_epi16(wa, _mm256_sign_epi8(bcast4(x[m]->qs + 4 * t), wv));
                isum[m] = _mm256_add_epi32(isum[m], _mm256_madd_epi16(p, ones));
                /* an empty asm holds each running sum in its register:
                 * without it GCC 12 regrouped the block's 32 integer adds
                 * into a tree and spilled most of the 32 products to the stack
                 * (a store and a load each); Q8_0 decode 64 in
                 * bench_model ran 1.05-1.08x faster with it (BENCHMARKS.md) */
                __asm__("" : "+x"(isum[m]));
            }
        }
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d));
        for (int m = 0; m < MR; m++)
            acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m]),
                                     _mm256_mul_ps(d8, _mm256_set1_ps(h2f(x[m]->d))), acc[m]);
    }
    store_r8(MR, acc, Y, ldy, beta);
}

GROUP_GEMM(q8_0_r8, tile_q8r8, Q8R_MR, QK8_0)

/* ---- Q4_0_R8 .. Q5_1_R8: the 32-blocks of four bits, rows in eights ---- */

/*
 * As Q4_K_R8's sub-blocks (model/quant_r8.c draws the layouts): per 32-column
 * block, four loads give eight vectors of unsigned codes (0..15, the
 * five-bit types' 0..31 with the fifth bit from one qh load, moved as
 * Q5_K_R8's), row r in 32-bit lane r, each meeting one broadcast of four
 * activation bytes in a vpmaddubsw.  A pair is at most 2 * 15 * 127 (five
 * bits: 2 * 31 * 127), so all eight products of a four-bit block sum in
 * 16 bits (30480), a five-bit one's in two halves of four (31496), before
 * vpmaddwd by ones widens them.  Q4_0's and Q5_0's offset comes off in the
 * integer sum, isum - o s (s: the activation block's code sum, Q8_0S),
 * then acc = fma(isum, d_w x_d, acc) per block; Q4_1's and Q5_1's mins
 * add acc = fma(m_w, x_d s, acc) (x_d s: Q8_1's half float): the scalar
 * kernel's operations, so the two agree bit for bit.  Codes are unpacked
 * once per block and shared by up to Q0R_MR rows of X; the first pass
 * over a group (decode) prefetches Q0R_PF blocks ahead.
 */
#define Q0R_MR 4
/* blocks ahead: about 1.1 KiB, as the other layouts */
#define Q0R_PF 8

/* q5: five-bit codes (Q5_0, Q5_1); asym: mins, not an offset (Q4_1, Q5_1) */
static inline __attribute__((always_inline)) void
tile_r0(const int MR, const bool q5, const bool asym, const bool pf, const uint8_t *G, int64_t nb,
        const uint8_t *X, size_t xstride, float *Y, int64_t ldy, float beta)
{
    const size_t bb = asym ? (q5 ? sizeof(struct blk_q5_1_r8) : sizeof(struct blk_q4_1_r8))
                           : (q5 ? sizeof(struct blk_q5_0_r8) : sizeof(struct blk_q4_0_r8));
    /* d first in every layout, then m (asym), then qs, then qh (q5):
     * model/quant_internal.h */
    const size_t qs_at = asym ? offsetof(struct blk_q4_1_r8, qs) : offsetof(struct blk_q4_0_r8, qs);
    const int off = asym ? 0 : q5 ? 16 : 8;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[Q0R_MR];
    for (int m = 0; m < MR; m++)
        acc[m] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = G + (size_t)b * bb, *qs = blk + qs_at;
        if (pf)
            prefetch_span(blk + Q0R_PF * bb, (int64_t)bb);
        /* the activations: Q8_0S blocks, or Q8_1 (asym), their codes at
         * the same offset */
        const struct blk_q8_0s *x0[Q0R_MR];
        const struct blk_q8_1 *x1[Q0R_MR];
        const int8_t *xq[Q0R_MR];
        __m256i s16[Q0R_MR], isum[Q0R_MR];
        for (int m = 0; m < MR; m++) {
            const uint8_t *xr = X + (size_t)m * xstride;
            if (asym)
                x1[m] = (const struct blk_q8_1 *)xr + b, xq[m] = x1[m]->qs;
            else
                x0[m] = (const struct blk_q8_0s *)xr + b, xq[m] = x0[m]->qs;
            s16[m] = isum[m] = _mm256_setzero_si256();
        }
        const __m256i hv =
            q5 ? _mm256_loadu_si256((const __m256i *)(qs + 128)) : _mm256_setzero_si256();
        for (int t = 0; t < 4; t++) {
            __m256i lo, hi;
            r4_codes(q5, _mm256_loadu_si256((const __m256i *)(qs + 32 * t)), hv, t, &lo, &hi);
            for (int m = 0; m < MR; m++) {
                const __m256i p =
                    _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4(xq[m] + 4 * t)),
                                     _mm256_maddubs_epi16(hi, bcast4(xq[m] + 16 + 4 * t)));
                const bool start = q5 ? (t & 1) == 0 : t == 0;
                s16[m] = start ? p : _mm256_add_epi16(s16[m], p);
                __asm__("" : "+x"(s16[m])); /* as in tile_q8r8 */
                if (q5 && (t & 1)) {
                    isum[m] = _mm256_add_epi32(isum[m], _mm256_madd_epi16(s16[m], ones));
                    __asm__("" : "+x"(isum[m]));
                }
            }
        }
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
        const __m256 m8 = asym ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16)))
                               : _mm256_setzero_ps();
        for (int m = 0; m < MR; m++) {
            if (!q5)
                isum[m] = _mm256_madd_epi16(s16[m], ones);
            const __m256 dx = _mm256_set1_ps(h2f(asym ? x1[m]->d : x0[m]->d));
            if (!asym)
                isum[m] = _mm256_sub_epi32(isum[m], _mm256_set1_epi32(off * (int32_t)x0[m]->s));
            acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m]), _mm256_mul_ps(d8, dx), acc[m]);
            if (asym)
                acc[m] = _mm256_fmadd_ps(m8, _mm256_set1_ps(h2f(x1[m]->s)), acc[m]);
        }
    }
    store_r8(MR, acc, Y, ldy, beta);
}

/* the four layouts' tiles: tile_r0(mr, q5, asym, first, ...) */
#define TILE_Q4_0_R8(mr, ...) tile_r0(mr, false, false, __VA_ARGS__)
#define TILE_Q5_0_R8(mr, ...) tile_r0(mr, true, false, __VA_ARGS__)
#define TILE_Q4_1_R8(mr, ...) tile_r0(mr, false, true, __VA_ARGS__)
#define TILE_Q5_1_R8(mr, ...) tile_r0(mr, true, true, __VA_ARGS__)
GROUP_GEMM(q4_0_r8, TILE_Q4_0_R8, Q0R_MR, QK4_0)
GROUP_GEMM(q5_0_r8, TILE_Q5_0_R8, Q0R_MR, QK4_0)
GROUP_GEMM(q4_1_r8, TILE_Q4_1_R8, Q0R_MR, QK4_0)
GROUP_GEMM(q5_1_r8, TILE_Q5_1_R8, Q0R_MR, QK4_0)

/* ---- Q2_K_R8: eight Q2_K rows interleaved (model/quant_r8.c draws it) --- */

/*
 * As Q6_K_R8: row r in 32-bit lane r, four codes per row meeting one
 * activation broadcast.  Per sub-block j (16 columns of the eight rows):
 * one 32-byte load of qs + 32 j gives its four code vectors t = 0..3 by a
 * 16-bit shift by 2 t and a byte mask of 3, and a broadcast 16-byte load
 * of the scales bytes of its chunk (sub-blocks 2c, 2c + 1) one vpshufb
 * and mask of 15 gives its scales, row r's in 16-bit lanes 2r, 2r + 1.
 * Per row of X the four vpmaddubsw (codes 0..3 by activation codes: a
 * pair is at most 2 * 3 * 128 = 768) sum in 16 bits, then one vpmaddwd by
 * the scales adds the sub-block into the row's isum.  Per block and row
 * of X: acc = fma(isum, d x_d, acc), then the mins: per chunk one vpshufb
 * and a shift by 4 put the pair's mins of row r in lanes 2r, 2r + 1,
 * which meet bsums[2c], bsums[2c + 1] (one broadcast) in one vpmaddwd per
 * row of X into msum, and acc = fma(-msum, dmin x_d, acc): the scalar
 * kernel's operations in its order (model/quant_r8.c), so the two agree
 * bit for bit.  The mins are summed after the codes, not beside them (the
 * rows' msum would be MR more live vectors in the codes' loop, where the
 * 4-row tile has none to spare), and after acc has taken isum (with isum
 * still live there, GCC 12 -O3 kept a row's isum on the stack through the
 * codes' loop: a store and a load per sub-block).  R8_PF blocks ahead of
 * the group are prefetched on every pass, as Q6_K_R8's.
 */
static inline __attribute__((always_inline)) void tile_r2(const int MR, const uint8_t *G,
                                                          int64_t nb, const uint8_t *X,
                                                          size_t xstride, float *Y, int64_t ldy,
                                                          float beta)
{
    const __m256i m3 = _mm256_set1_epi8(3), m15 = _mm256_set1_epi8(15);
    const int8_t Z = -1;
    /* a chunk's 16 scales bytes: sub-block 2c's of row r (byte r) in the
     * low byte of 16-bit lanes 2r, 2r + 1, rows 0-3 in the low half, 4-7
     * in the high one; patb: sub-block 2c + 1's (byte 8 + r) */
    const __m256i pata = _mm256_setr_epi8(0, Z, 0, Z, 1, Z, 1, Z, 2, Z, 2, Z, 3, Z, 3, Z, 4, Z, 4,
                                          Z, 5, Z, 5, Z, 6, Z, 6, Z, 7, Z, 7, Z);
    const __m256i patb = _mm256_add_epi8(pata, _mm256_set1_epi16(8));
    /* the pair's two bytes of row r in 16-bit lanes 2r, 2r + 1 */
    const __m256i pato = _mm256_setr_epi8(0, Z, 8, Z, 1, Z, 9, Z, 2, Z, 10, Z, 3, Z, 11, Z, 4, Z,
                                          12, Z, 5, Z, 13, Z, 6, Z, 14, Z, 7, Z, 15, Z);
    __m256 acc[KMR];
    for (int m = 0; m < MR; m++)
        acc[m] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const struct blk_q2_k_r8 *w = (const struct blk_q2_k_r8 *)G + b;
        prefetch_span((const uint8_t *)(w + R8_PF), (int64_t)sizeof(*w));
        const struct blk_q8_k *x[KMR];
        __m256i isum[KMR];
        for (int m = 0; m < MR; m++) {
            x[m] = (const struct blk_q8_k *)(X + (size_t)m * xstride) + b;
            isum[m] = _mm256_setzero_si256();
        }
        for (int j = 0; j < 16; j++) {
            const __m256i s2 = _mm256_broadcastsi128_si256(
                _mm_loadu_si128((const __m128i *)(w->sc + 8 * (j & ~1))));
            const __m256i sc =
                _mm256_and_si256(_mm256_shuffle_epi8(s2, (j & 1) ? patb : pata), m15);
            const __m256i v = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * j));
            __m256i cv[4];
            for (int t = 0; t < 4; t++)
                cv[t] = _mm256_and_si256(_mm256_srli_epi16(v, 2 * t), m3);
            for (int m = 0; m < MR; m++) {
                const int8_t *xq = x[m]->qs + 16 * j;
                /* at most 4 * 768 in each 16-bit lane; the empty asm keeps
                 * the four products summed one after another (without it
                 * GCC 12 -O3 left 6 stack moves in the 2-row tile and 23 in
                 * the 4-row one; with it 0 and 19, and no store in this
                 * loop) */
                __m256i p = _mm256_maddubs_epi16(cv[0], bcast4(xq));
                for (int t = 1; t < 4; t++) {
                    p = _mm256_add_epi16(p, _mm256_maddubs_epi16(cv[t], bcast4(xq + 4 * t)));
                    __asm__("" : "+x"(p));
                }
                isum[m] = _mm256_add_epi32(isum[m], _mm256_madd_epi16(p, sc));
                __asm__("" : "+x"(isum[m])); /* as in tile_q8r8 */
            }
        }
        /* the codes' part of acc, then the mins' (the scalar kernel's
         * order): isum dies before msum is summed */
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d));
        for (int m = 0; m < MR; m++)
            acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m]),
                                     _mm256_mul_ps(d8, _mm256_set1_ps(x[m]->d)), acc[m]);
        __m256i msum[KMR];
        for (int m = 0; m < MR; m++)
            msum[m] = _mm256_setzero_si256();
        for (int c = 0; c < 8; c++) {
            const __m256i s2 =
                _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(w->sc + 16 * c)));
            const __m256i mn = _mm256_srli_epi16(_mm256_shuffle_epi8(s2, pato), 4);
            for (int m = 0; m < MR; m++) {
                msum[m] = _mm256_add_epi32(
                    msum[m], _mm256_madd_epi16(mn, bcast4((const int8_t *)(x[m]->bsums + 2 * c))));
                __asm__("" : "+x"(msum[m]));
            }
        }
        const __m256 m8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->dmin));
        for (int m = 0; m < MR; m++)
            acc[m] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum[m]),
                                      _mm256_mul_ps(m8, _mm256_set1_ps(x[m]->d)), acc[m]);
    }
    store_r8(MR, acc, Y, ldy, beta);
}

#define TILE_Q2_K_R8(mr, first, ...) tile_r2(mr, __VA_ARGS__)
GROUP_GEMM(q2_k_r8, TILE_Q2_K_R8, KMR, QK_K)

/* ---- IQ4_NL_R8, IQ4_XS_R8: codes into a table, rows in eights ---------- */

/*
 * Q4_0_R8's and Q4_K_R8's code vectors (model/quant_r8.c draws the
 * layouts): four loads per 32 columns, each split by r4_codes into two
 * vectors of four-bit codes, row r in 32-bit lane r.  vpshufb looks each
 * vector up in the format's 16 values v (quant__iq4_values: -127 .. 113,
 * never 0) and vpabsb gives |v| (unsigned bytes; a second table, of |v|,
 * would hold one more register); then per row of X, as tile_q8r8, the
 * four activation bytes of those columns are broadcast to every lane,
 * vpsignb moves v's sign onto them (v is never 0, so none is zeroed) and
 * vpmaddubsw multiplies |v| by them.  That needs the activation codes
 * within +-127 (vpsignb leaves -128 as it is): quant_rows writes no -128
 * (Q8_0 and Q8_K: d = amax / 127).  A pair is at most 2 * 127 * 127 =
 * 32258, so no two products may be summed in 16 bits: each vpmaddubsw
 * gets its own vpmaddwd, by ones for IQ4_NL_R8, and for IQ4_XS_R8 by the
 * sub-block's scale codes less 32 (row r's in 16-bit lanes 2r, 2r + 1; a
 * lane at most 2 * 32258 * 32), which scales the products as it widens
 * them.  The lookups and code vectors are shared by up to IQ4R_MR rows of
 * X; each code vector meets every row before the next is used, so one
 * load's vectors are live beside the rows' sums, not a block's.  (GCC 12
 * -O3 spills nothing in the IQ4_NL_R8 tiles; in the 3- and 4-row
 * IQ4_XS_R8 tiles it keeps two or three of the float accumulators on the
 * stack around the sub-block loop, a store and a load each per 256
 * columns, rather than reload the scale unpacking's constants per
 * sub-block.)  Per block and row: acc = fma(isum, d_w x_d, acc), the
 * scalar kernels' operations, so the two agree bit for bit.  IQ4_NL_R8
 * prefetches Q0R_PF blocks ahead on the first pass over a group (decode),
 * as Q4_0_R8; IQ4_XS_R8 R8_PF blocks ahead on every pass, as Q4_K_R8.
 */
#define IQ4R_MR 4

/* quant__iq4_values (model/quant_k.c) in both 128-bit halves */
static inline __m256i iq4_table(void)
{
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant__iq4_values));
}

/* A vector of codes c (0..15 per byte) against rows m < MR of X, whose
 * activation bytes of its columns start at xq[m] + off (four per lane):
 * isum[m] += vpmaddwd(vpmaddubsw(|v|, x with v's sign), mul). */
static inline __attribute__((always_inline)) void iq4_rows(const int MR, __m256i c, __m256i tab,
                                                           __m256i mul, const int8_t *const *xq,
                                                           int off, __m256i *isum)
{
    const __m256i s = _mm256_shuffle_epi8(tab, c), a = _mm256_abs_epi8(s);
    for (int m = 0; m < MR; m++) {
        const __m256i p = _mm256_maddubs_epi16(a, _mm256_sign_epi8(bcast4(xq[m] + off), s));
        isum[m] = _mm256_add_epi32(isum[m], _mm256_madd_epi16(p, mul));
        __asm__("" : "+x"(isum[m])); /* as in tile_q8r8 */
    }
}

/* IQ4_XS_R8 sub-block j's scale codes less 32 from sc = the block's sc +
 * 6 j, row r's in 16-bit lanes 2r and 2r + 1: the 8 bytes at sc (two past
 * the sub-block's six, still in the block) in every 64-bit lane; 32-bit
 * lane r takes bytes k, k + 1 twice (k = 6 r / 8; row r's code is at bit
 * s = 6 r - 8 k <= 6 of them), a shift of the lane by s puts it at bit 0
 * of both its 16-bit halves, and a mask keeps its 6 bits. */
static inline __attribute__((always_inline)) __m256i iq4xs_scales(const uint8_t *sc)
{
    int64_t v;
    memcpy(&v, sc, 8);
    const __m256i pick =
        _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 1, 2, 1, 2, 2, 3, 2, 3,  /* rows 0-3 */
                         3, 4, 3, 4, 3, 4, 3, 4, 4, 5, 4, 5, 5, 6, 5, 6); /* 4-7 */
    const __m256i f = _mm256_srlv_epi32(_mm256_shuffle_epi8(_mm256_set1_epi64x(v), pick),
                                        _mm256_setr_epi32(0, 6, 4, 2, 0, 6, 4, 2));
    return _mm256_sub_epi16(_mm256_and_si256(f, _mm256_set1_epi16(63)), _mm256_set1_epi16(32));
}

/* MR rows of X (Q8_0, xstride apart) by the IQ4_NL_R8 group G (nb blocks):
 * Y[m][0..8). */
static inline __attribute__((always_inline)) void tile_iq4nl(const int MR, const bool pf,
                                                             const uint8_t *G, int64_t nb,
                                                             const uint8_t *X, size_t xstride,
                                                             float *Y, int64_t ldy, float beta)
{
    const __m256i tab = iq4_table(), ones = _mm256_set1_epi16(1);
    __m256 acc[IQ4R_MR];
    for (int m = 0; m < MR; m++)
        acc[m] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const struct blk_iq4_nl_r8 *w = (const struct blk_iq4_nl_r8 *)G + b;
        if (pf)
            prefetch_span((const uint8_t *)(w + Q0R_PF), (int64_t)sizeof(*w));
        const struct blk_q8_0 *x[IQ4R_MR];
        const int8_t *xq[IQ4R_MR];
        __m256i isum[IQ4R_MR];
        for (int m = 0; m < MR; m++) {
            x[m] = (const struct blk_q8_0 *)(X + (size_t)m * xstride) + b;
            xq[m] = x[m]->qs;
            isum[m] = _mm256_setzero_si256();
        }
        for (int t = 0; t < 4; t++) {
            __m256i lo, hi;
            r4_codes(false, _mm256_loadu_si256((const __m256i *)(w->qs + 32 * t)),
                     _mm256_setzero_si256(), t, &lo, &hi);
            iq4_rows(MR, lo, tab, ones, xq, 4 * t, isum);
            iq4_rows(MR, hi, tab, ones, xq, 16 + 4 * t, isum);
        }
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d));
        for (int m = 0; m < MR; m++)
            acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m]),
                                     _mm256_mul_ps(d8, _mm256_set1_ps(h2f(x[m]->d))), acc[m]);
    }
    store_r8(MR, acc, Y, ldy, beta);
}

/* MR rows of X (Q8_K, xstride apart) by the IQ4_XS_R8 group G (nb blocks):
 * Y[m][0..8). */
static inline __attribute__((always_inline)) void tile_iq4xs(const int MR, const uint8_t *G,
                                                             int64_t nb, const uint8_t *X,
                                                             size_t xstride, float *Y, int64_t ldy,
                                                             float beta)
{
    const __m256i tab = iq4_table();
    __m256 acc[IQ4R_MR];
    for (int m = 0; m < MR; m++)
        acc[m] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const struct blk_iq4_xs_r8 *w = (const struct blk_iq4_xs_r8 *)G + b;
        prefetch_span((const uint8_t *)(w + R8_PF), (int64_t)sizeof(*w));
        const struct blk_q8_k *x[IQ4R_MR];
        __m256i isum[IQ4R_MR];
        for (int m = 0; m < MR; m++) {
            x[m] = (const struct blk_q8_k *)(X + (size_t)m * xstride) + b;
            isum[m] = _mm256_setzero_si256();
        }
        for (int j = 0; j < 8; j++) {
            const __m256i sc = iq4xs_scales(w->sc + 6 * j);
            const int8_t *xq[IQ4R_MR];
            for (int m = 0; m < MR; m++)
                xq[m] = x[m]->qs + 32 * j;
            for (int t = 0; t < 4; t++) {
                __m256i lo, hi;
                r4_codes(false, _mm256_loadu_si256((const __m256i *)(w->qs + 128 * j + 32 * t)),
                         _mm256_setzero_si256(), t, &lo, &hi);
                iq4_rows(MR, lo, tab, sc, xq, 4 * t, isum);
                iq4_rows(MR, hi, tab, sc, xq, 16 + 4 * t, isum);
            }
        }
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d));
        for (int m = 0; m < MR; m++)
            acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m]),
                                     _mm256_mul_ps(d8, _mm256_set1_ps(x[m]->d)), acc[m]);
    }
    store_r8(MR, acc, Y, ldy, beta);
}

GROUP_GEMM(iq4_nl_r8, tile_iq4nl, IQ4R_MR, QK4_NL)
/* IQ4_XS_R8 prefetches on every pass, as the K-quant tiles */
#define TILE_IQ4_XS_R8(mr, first, ...) tile_iq4xs(mr, __VA_ARGS__)
GROUP_GEMM(iq4_xs_r8, TILE_IQ4_XS_R8, IQ4R_MR, QK_K)

/* ---- activation rows ---------------------------------------------------- */

/* max |x| over n (a multiple of 8) floats */
static inline float absmax8n(const float *x, int n)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < n; j += 8)
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* n (a multiple of 32) floats to int8 codes round(x * id), rounding half
 * away from zero exactly as the scalar quantizer (roundf): trunc(v), plus or
 * minus one where v - trunc(v) reaches +-0.5 (that difference is exact). */
static inline void codes8n(const float *x, float id, int8_t *q, int n)
{
    const __m256 vid = _mm256_set1_ps(id), half = _mm256_set1_ps(0.5f),
                 mhalf = _mm256_set1_ps(-0.5f), one = _mm256_set1_ps(1.0f);
    for (int j = 0; j < n; j += 32) {
        __m256i r[4];
        for (int k = 0; k < 4; k++) {
            const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), vid);
            const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            const __m256 f = _mm256_sub_ps(v, t);
            const __m256 up = _mm256_and_ps(_mm256_cmp_ps(f, half, _CMP_GE_OQ), one);
            const __m256 dn = _mm256_and_ps(_mm256_cmp_ps(f, mhalf, _CMP_LE_OQ), one);
            r[k] = _mm256_cvttps_epi32(_mm256_sub_ps(_mm256_add_ps(t, up), dn));
        }
        /* 32 int32 -> 32 int8 in order (packs work per 128-bit lane) */
        const __m256i p01 = _mm256_packs_epi32(r[0], r[1]), p23 = _mm256_packs_epi32(r[2], r[3]);
        const __m256i p = _mm256_packs_epi16(p01, p23);
        const __m256i ord =
            _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(q + j), ord);
    }
}

/* One Q8_0 block of 32 floats: its codes into qs, its f16 scale returned. */
static inline uint16_t q8_0_block(const float *x, int8_t *qs, float *d_out)
{
    const float amax = absmax8n(x, QK8_0);
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    codes8n(x, id, qs, QK8_0);
    *d_out = d;
    return _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
}

/* The sum of 32 int8 codes: byte pairs, then 16-bit pairs, then the lanes. */
static inline int32_t sum32_i8(const int8_t *qs)
{
    const __m256i q = _mm256_loadu_si256((const __m256i *)qs);
    const __m256i s8 =
        _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
    return _mm_cvtsi128_si32(h);
}

void quant__rows_q8_0_avx2(const float *x, void *dst, int64_t n)
{
    struct blk_q8_0 *y = dst;
    float d;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0)
        y[b].d = q8_0_block(x, y[b].qs, &d);
}

void quant__rows_q8_0s_avx2(const float *x, void *dst, int64_t n)
{
    struct blk_q8_0s *y = dst;
    float d;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        y[b].d = q8_0_block(x, y[b].qs, &d);
        y[b].s = (int16_t)sum32_i8(y[b].qs);
    }
}

/* as the scalar quantizer: s = the codes' sum times the unrounded d, as a
 * half float */
void quant__rows_q8_1_avx2(const float *x, void *dst, int64_t n)
{
    struct blk_q8_1 *y = dst;
    float d;
    for (int64_t b = 0; b < n / QK8_1; b++, x += QK8_1) {
        y[b].d = q8_0_block(x, y[b].qs, &d);
        y[b].s = _cvtss_sh(d * (float)sum32_i8(y[b].qs), _MM_FROUND_TO_NEAREST_INT);
    }
}

void quant__rows_q8_k_avx2(const float *x, void *dst, int64_t n)
{
    struct blk_q8_k *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        const float amax = absmax8n(x, QK_K);
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = d;
        codes8n(x, id, y[b].qs, QK_K);
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++)
                sum += y[b].qs[16 * j + l];
            y[b].bsums[j] = (int16_t)sum;
        }
    }
}
