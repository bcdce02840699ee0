/*
 * model/quant_avx512.c — quantized products with AVX512-VNNI (vpdpbusd),
 * built with its own flags and chosen at run time by quant.c: Q8_0 in its
 * file layout (256-bit vectors, below) for matrices left as the file has
 * them, and the load-time layouts (512-bit, further down) Q8_0_R8,
 * IQ4_NL_R8, Q4_0_R8, Q5_0_R8, Q4_1_R8, Q5_1_R8, Q4_K_R8, Q5_K_R8,
 * IQ4_XS_R8, Q3_K_R8, Q2_K_R8 and Q6_K_R8, which the loader gives matrices
 * of those file types whose rows come in whole eights.  One thread, M = 64
 * and 256, `small`'s shapes
 * (bench_quant --reps 7 on a Zen 5, quiet): Q8_0_R8 518-555 GOP/s,
 * 3.7-3.9x the AVX2 Q8_0_R8 kernel and 4.7-5.0x the file layout's kernel
 * below; Q4_K_R8 457-495, 2.3-2.4x its AVX2 kernel; Q6_K_R8 296-339,
 * 1.9-2.1x its AVX2 kernel and 3.6-4.2x Q6_K's file layout (AVX2).  The
 * others, the same way (--reps 5, both shapes; BENCHMARKS.md, the
 * AVX-512 machine's ninth session), against the AVX2 kernels they
 * replace: Q4_0_R8 2.6-3.3x, Q5_0_R8 3.0-3.2x, Q4_1_R8 2.9-3.2x, Q5_1_R8
 * 3.0-3.3x, IQ4_NL_R8 3.8-4.2x, Q2_K_R8 2.2-2.3x, Q3_K_R8 2.0x, Q5_K_R8
 * 2.4-2.6x, IQ4_XS_R8 2.3-2.9x (315-490 GOP/s); Q4_K_R8 and Q6_K_R8 1.06-1.18x
 * their first tiles, whose spills are gone (tile_kr8).
 *
 * The file layout:
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
#include <stdbool.h>
#include <string.h>

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

/* ---- Q8_0_R8: eight Q8_0 rows interleaved (model/quant_r8.c draws it) --- */

/*
 * Two groups of eight weight rows side by side in one 512-bit vector: per
 * 32-column block and quad t of columns (4t .. 4t + 3), the 256-bit vector
 * t of group g (row r in 32-bit lane r, four codes each) in the low half and
 * that of group g + 1 in the high half, so lane i of every product is
 * weight row 16 u + i of the tile and no lanes are ever folded.  The tile
 * is Q8R_MR rows of X by Q8R_NV such vectors (32 weight rows).
 *
 * vpdpbusd multiplies unsigned by signed bytes; here the weights are made
 * unsigned (w ^ 0x80 = w + 128, one xor per vector, shared by Q8R_MR rows
 * of X) and the activations stay signed, broadcast four codes to every
 * lane straight from memory (vpbroadcastd).  The excess, 128 times the sum
 * of the activation block's 32 codes, depends on the row of X and the
 * block only: it is computed once per pass of X (xinfo, with the block's
 * scale as a float) and starts that block's accumulator, so the 32-bit sum
 * per lane is exactly sum_k w_k x_k.  Then acc = fma(isum, d_w x_d, acc)
 * per block, in the scalar kernel's order: bit for bit its result, and row
 * m of Y never depends on M.
 *
 * Per block and tile: 64 vpdpbusd (Q8R_MR x Q8R_NV x 8) against 16 loads
 * and inserts of W, 16 xors, 32 broadcasts and the scaling.  The first
 * pass of X over a tile's groups (the decode case: one row, W streamed
 * from memory) prefetches Q8R_PF blocks ahead.
 */
#define Q8R_MR    4
#define Q8R_NV    2 /* 512-bit vectors (pairs of groups) per tile */
#define Q8R_PF    4 /* blocks (272 bytes per group) ahead */
#define Q8R_CHUNK 64
#define XINFO_MAX 8192 /* (row, block) entries of one pass of X */
/* the four-bit 32-blocks' layouts (Q4_0_R8 .. Q5_1_R8, IQ4_NL_R8): blocks
 * ahead, about 1.1 KiB per group, as the AVX2 tiles */
#define R0_PF 8

struct xinfo {
    int32_t corr; /* -128 * sum of the block's codes */
    float d;      /* the block's scale */
};
static _Thread_local struct xinfo xinfo_tls[XINFO_MAX];

/* xinfo of rows [0, rows) of X (xstride apart), nb blocks each. */
static void xinfo_fill(struct xinfo *xi, const uint8_t *X, size_t xstride, int64_t rows, int64_t nb)
{
    const __m256i k80 = _mm256_set1_epi8((char)0x80), zero = _mm256_setzero_si256();
    for (int64_t m = 0; m < rows; m++)
        for (int64_t b = 0; b < nb; b++) {
            const struct blk_q8_0 *x = (const struct blk_q8_0 *)(X + (size_t)m * xstride) + b;
            /* sums of (code + 128) in four 64-bit lanes */
            const __m256i s = _mm256_sad_epu8(
                _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x->qs), k80), zero);
            const __m128i h =
                _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            const int32_t sum =
                (int32_t)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1)) - 32 * 128;
            xi[m * nb + b] = (struct xinfo){-128 * sum, h2f(x->d)};
        }
}

/* 32 bytes at a in the low half, at b in the high. */
static inline __m512i load2(const uint8_t *a, const uint8_t *b)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}

/* Block b of the 2 NV groups grp[] (bb bytes a block) into g[], with
 * block b + ahead of each prefetched when pf. */
static inline __attribute__((always_inline)) void groups_at(const int NV, const bool pf,
                                                            const uint8_t *const *grp, int64_t b,
                                                            size_t bb, int ahead, const uint8_t **g)
{
    for (int i = 0; i < 2 * NV; i++) {
        g[i] = grp[i] + (size_t)b * bb;
        if (pf)
            for (size_t o = 0; o < bb; o += 64)
                _mm_prefetch((const char *)g[i] + (size_t)ahead * bb + o, _MM_HINT_T0);
    }
}

/* MR rows of X by NV vectors of two groups each (grp[2 u], grp[2 u + 1]):
 * out[m][16 u + i], weight row 16 u + i of the tile, row m of X.  iq4:
 * the groups are IQ4_NL_R8's, whose codes (Q4_0_R8's bytes: vector t's
 * low nibbles are columns 4 t + i, its high ones 16 + 4 t + i) are looked
 * up by vpshufb in the table of the format's values plus 128, so the
 * weight bytes come out unsigned as Q8_0_R8's flipped codes do and the
 * same correction (-128 sum x, xinfo) starts each block's sums: exact, so
 * acc = fma(isum, d_w x_d, acc) per block is the scalar kernel's result
 * bit for bit for both layouts. */
static inline __attribute__((always_inline)) void
tile_q8r8(const int MR, const int NV, const bool iq4, const bool pf, const uint8_t *const *grp,
          int64_t nb, const uint8_t *X, size_t xstride, const struct xinfo *xi,
          float out[Q8R_MR][16 * Q8R_NV])
{
    const size_t bb = iq4 ? sizeof(struct blk_iq4_nl_r8) : sizeof(struct blk_q8_0_r8);
    /* d first in both layouts, then the codes */
    _Static_assert(offsetof(struct blk_q8_0_r8, qs) == offsetof(struct blk_iq4_nl_r8, qs),
                   "Q8_0_R8's and IQ4_NL_R8's codes at one offset");
    const size_t qs_at = offsetof(struct blk_q8_0_r8, qs);
    const __m512i k80 = _mm512_set1_epi8((char)0x80), m4 = _mm512_set1_epi8(15);
    const __m512i tab =
        iq4 ? _mm512_xor_si512(
                  _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)quant__iq4_values)), k80)
            : k80;
    __m512 acc[Q8R_MR][Q8R_NV];
    for (int m = 0; m < MR; m++)
        for (int u = 0; u < NV; u++)
            acc[m][u] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *g[2 * Q8R_NV];
        groups_at(NV, pf, grp, b, bb, iq4 ? R0_PF : Q8R_PF, g);
        const int8_t *xq[Q8R_MR];
        __m512i isum[Q8R_MR][Q8R_NV];
        for (int m = 0; m < MR; m++) {
            xq[m] = ((const struct blk_q8_0 *)(X + (size_t)m * xstride) + b)->qs;
            const __m512i c = _mm512_set1_epi32(xi[m * nb + b].corr);
            for (int u = 0; u < NV; u++)
                isum[m][u] = c;
        }
        /* quad t: four codes of every row, columns 4 t .. 4 t + 3 */
#pragma GCC unroll 8
        for (int t = 0; t < 8; t++) {
            __m512i wv[Q8R_NV];
            for (int u = 0; u < NV; u++) {
                if (iq4) {
                    const int tv = t & 3; /* t < 4: low nibbles of vector t, else high of t - 4 */
                    const __m512i v =
                        load2(g[2 * u] + qs_at + 32 * tv, g[2 * u + 1] + qs_at + 32 * tv);
                    wv[u] = _mm512_shuffle_epi8(
                        tab, _mm512_and_si512(t < 4 ? v : _mm512_srli_epi16(v, 4), m4));
                } else {
                    wv[u] = _mm512_xor_si512(
                        load2(g[2 * u] + qs_at + 32 * t, g[2 * u + 1] + qs_at + 32 * t), k80);
                }
            }
            for (int m = 0; m < MR; m++) {
                int32_t x4;
                memcpy(&x4, xq[m] + 4 * t, 4);
                const __m512i xb = _mm512_set1_epi32(x4);
                for (int u = 0; u < NV; u++)
                    isum[m][u] = _mm512_dpbusd_epi32(isum[m][u], wv[u], xb);
            }
        }
        for (int u = 0; u < NV; u++) {
            const __m512 dw = _mm512_cvtph_ps(
                _mm256_loadu2_m128i((const __m128i *)g[2 * u + 1], (const __m128i *)g[2 * u]));
            for (int m = 0; m < MR; m++)
                acc[m][u] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[m][u]),
                                    _mm512_mul_ps(dw, _mm512_set1_ps(xi[m * nb + b].d)), acc[m][u]);
        }
    }
    for (int m = 0; m < MR; m++)
        for (int u = 0; u < NV; u++)
            _mm512_storeu_ps(&out[m][16 * u], acc[m][u]);
}

typedef void (*q8r8_fn)(bool pf, const uint8_t *const *grp, int64_t nb, const uint8_t *X,
                        size_t xstride, const struct xinfo *xi, float out[Q8R_MR][16 * Q8R_NV]);
#define Q8R8_FN(mr, nv)                                                                            \
    static void q8r8_##mr##_##nv(bool pf, const uint8_t *const *grp, int64_t nb, const uint8_t *X, \
                                 size_t xs, const struct xinfo *xi,                                \
                                 float out[Q8R_MR][16 * Q8R_NV])                                   \
    {                                                                                              \
        tile_q8r8(mr, nv, false, pf, grp, nb, X, xs, xi, out);                                     \
    }
Q8R8_FN(1, 1)
Q8R8_FN(2, 1)
Q8R8_FN(3, 1)
Q8R8_FN(4, 1)
Q8R8_FN(1, 2)
Q8R8_FN(2, 2)
Q8R8_FN(3, 2)
Q8R8_FN(4, 2)
static const q8r8_fn q8r8_fns[Q8R_NV][Q8R_MR] = {
    {q8r8_1_1, q8r8_2_1, q8r8_3_1, q8r8_4_1},
    {q8r8_1_2, q8r8_2_2, q8r8_3_2, q8r8_4_2},
};

/* Y's columns [c0, c1) from a tile's out (ostride floats a row, column
 * cb of the tile first), rows < mr: added to Y when beta != 0. */
static void store_cols(const float *out, size_t ostride, int mr, int64_t cb, int64_t c0, int64_t c1,
                       float *Y, int64_t ldy, float beta)
{
    for (int m = 0; m < mr; m++)
        for (int64_t c = c0; c < c1; c++) {
            float *y = &Y[m * ldy + c];
            const float v = out[(size_t)m * ostride + (size_t)(c - cb)];
            *y = beta != 0.0f ? *y + v : v;
        }
}

/* The tile of groups from g0 on of the band [n0, n1) (Wb's rows wstride
 * bytes apart): up to 2 Q8R_NV groups, an odd last one twice, into grp;
 * the columns [c0, c1) of Y they give; returns NV, the 512-bit vectors. */
static int band_groups(const uint8_t *Wb, size_t wstride, int64_t g0, int64_t n0, int64_t n1,
                       const uint8_t **grp, int64_t *c0, int64_t *c1)
{
    int64_t ng = (n1 + 7) / 8 - g0; /* groups of the band left */
    if (ng > 2 * Q8R_NV)
        ng = 2 * Q8R_NV;
    const int nv = (int)(ng + 1) / 2;
    for (int i = 0; i < 2 * nv; i++)
        grp[i] = Wb + (size_t)(g0 + (i < ng ? i : ng - 1)) * 8 * wstride;
    const int64_t cb = 8 * g0;
    *c0 = cb < n0 ? n0 : cb;
    *c1 = cb + 8 * ng > n1 ? n1 : cb + 8 * ng;
    return nv;
}

/* IQ4_NL_R8: Q8_0_R8's tile with each code vector looked up */
#define IQ4R8_FN(mr, nv)                                                                           \
    static void iq4r8_##mr##_##nv(bool pf, const uint8_t *const *grp, int64_t nb,                  \
                                  const uint8_t *X, size_t xs, const struct xinfo *xi,             \
                                  float out[Q8R_MR][16 * Q8R_NV])                                  \
    {                                                                                              \
        tile_q8r8(mr, nv, true, pf, grp, nb, X, xs, xi, out);                                      \
    }
IQ4R8_FN(1, 1)
IQ4R8_FN(2, 1)
IQ4R8_FN(3, 1)
IQ4R8_FN(4, 1)
IQ4R8_FN(1, 2)
IQ4R8_FN(2, 2)
IQ4R8_FN(3, 2)
IQ4R8_FN(4, 2)
static const q8r8_fn iq4r8_fns[Q8R_NV][Q8R_MR] = {
    {iq4r8_1_1, iq4r8_2_1, iq4r8_3_1, iq4r8_4_1},
    {iq4r8_1_2, iq4r8_2_2, iq4r8_3_2, iq4r8_4_2},
};

/*
 * The groups of eight rows over [n0, n1) four at a time (a tile of two
 * 512-bit vectors; the last one, two or three groups of the band in a
 * narrower tile, an odd group paired with itself), X in passes of at most
 * Q8R_CHUNK rows (fewer when K is so long that xinfo would not fit), MR
 * rows at a time: Q8_0_R8's and IQ4_NL_R8's products (fns; bb: bytes of
 * one block of a group).  A tile's groups (35 KiB at K = 2048) stay in L1
 * while a pass walks them.
 */
static void gemm_q8r8(const q8r8_fn fns[Q8R_NV][Q8R_MR], QUANT__GEMM_ARGS)
{
    const int64_t nb = K / QK8_0;
    int64_t chunk = XINFO_MAX / nb < Q8R_CHUNK ? XINFO_MAX / nb : Q8R_CHUNK;
    if (chunk < 1)
        chunk = 1; /* K > 262144: never in a model; xinfo below would overflow */
    struct xinfo *xi = xinfo_tls;
    const uint8_t *Wb = (const uint8_t *)W;
    for (int64_t mc = 0; mc < M; mc += chunk) {
        const int64_t me = M - mc < chunk ? M : mc + chunk;
        xinfo_fill(xi, (const uint8_t *)Xq + (size_t)mc * xstride, xstride, me - mc, nb);
        for (int64_t g0 = n0 / 8; 8 * g0 < n1; g0 += 2 * Q8R_NV) {
            const uint8_t *grp[2 * Q8R_NV];
            int64_t c0, c1;
            const int nv = band_groups(Wb, wstride, g0, n0, n1, grp, &c0, &c1);
            const int64_t cb = 8 * g0;
            for (int64_t m = mc; m < me; m += Q8R_MR) {
                const int mr = me - m < Q8R_MR ? (int)(me - m) : Q8R_MR;
                float out[Q8R_MR][16 * Q8R_NV];
                fns[nv - 1][mr - 1](m == mc, grp, nb, (const uint8_t *)Xq + (size_t)m * xstride,
                                    xstride, xi + (m - mc) * nb, out);
                store_cols(&out[0][0], 16 * Q8R_NV, mr, cb, c0, c1, Y + m * ldy, ldy, beta);
            }
        }
    }
}

void quant__gemm_q8_0_r8_avx512(QUANT__GEMM_ARGS)
{
    gemm_q8r8(q8r8_fns, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
}

/* IQ4_NL_R8: eight IQ4_NL rows interleaved (model/quant_r8.c), tile_q8r8's iq4 */
void quant__gemm_iq4_nl_r8_avx512(QUANT__GEMM_ARGS)
{
    gemm_q8r8(iq4r8_fns, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
}

/* The fifth bit of Q5_K_R8 code vector (t, low | high nibble) at bit b =
 * 2 t (+ 1) of each byte of h, moved to bit 4 (the caller masks). */
static inline __attribute__((always_inline)) __m512i r5_bit4(__m512i h, int b)
{
    return b < 4 ? _mm512_slli_epi16(h, 4 - b) : b == 4 ? h : _mm512_srli_epi16(h, b - 4);
}

/* ---- Q4_0_R8 .. Q5_1_R8: the 32-blocks of four bits, rows in eights ---- */

/*
 * Q8_0_R8's tile above with the four-bit layouts' codes (the AVX2 tile_r0
 * in model/quant_avx2.c has the layouts): two groups side by side in each
 * 512-bit vector, the codes unpacked once per block (low and high nibbles,
 * the five-bit types' fifth bit from the block's qh as Q5_K_R8's) and
 * unsigned already (0..15, 0..31), so vpdpbusd takes them as they are
 * against the signed activation bytes, exactly, with no 16-bit sums.  Q4_0's
 * and Q5_0's offset comes off the integer sum (isum - o s, s the
 * activation block's code sum, Q8_0S); then acc = fma(isum, d_w x_d, acc),
 * and Q4_1's and Q5_1's mins acc = fma(m_w, x_d s, acc): the scalar
 * kernel's operations in its order, bit for bit its result.
 */

/* MR rows of X by NV vectors of two groups each (grp[2 u], grp[2 u + 1]):
 * out[m][16 u + i]; q5: five-bit codes (Q5_0, Q5_1); asym: mins, not an
 * offset (Q4_1, Q5_1). */
static inline __attribute__((always_inline)) void tile_r0(const int MR, const int NV, const bool q5,
                                                          const bool asym, const bool pf,
                                                          const uint8_t *const *grp, int64_t nb,
                                                          const uint8_t *X, size_t xstride,
                                                          float out[Q8R_MR][16 * Q8R_NV])
{
    const size_t bb = asym ? (q5 ? sizeof(struct blk_q5_1_r8) : sizeof(struct blk_q4_1_r8))
                           : (q5 ? sizeof(struct blk_q5_0_r8) : sizeof(struct blk_q4_0_r8));
    /* d first in every layout, then m (asym), then qs, then qh (q5) */
    const size_t qs_at = asym ? offsetof(struct blk_q4_1_r8, qs) : offsetof(struct blk_q4_0_r8, qs);
    const int off = asym ? 0 : q5 ? 16 : 8;
    const __m512i m4 = _mm512_set1_epi8(15), m10 = _mm512_set1_epi8(16);
    __m512 acc[Q8R_MR][Q8R_NV];
    for (int m = 0; m < MR; m++)
        for (int u = 0; u < NV; u++)
            acc[m][u] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *g[2 * Q8R_NV];
        groups_at(NV, pf, grp, b, bb, R0_PF, g);
        /* the activations: Q8_0S blocks, or Q8_1 (asym), their codes at
         * the same offset */
        const int8_t *xq[Q8R_MR];
        float dx[Q8R_MR], sx[Q8R_MR];
        __m512i isum[Q8R_MR][Q8R_NV];
        for (int m = 0; m < MR; m++) {
            const uint8_t *xr = X + (size_t)m * xstride;
            int32_t c = 0;
            if (asym) {
                const struct blk_q8_1 *x = (const struct blk_q8_1 *)xr + b;
                xq[m] = x->qs, dx[m] = h2f(x->d), sx[m] = h2f(x->s);
            } else {
                const struct blk_q8_0s *x = (const struct blk_q8_0s *)xr + b;
                xq[m] = x->qs, dx[m] = h2f(x->d), sx[m] = 0;
                c = -off * (int32_t)x->s;
            }
            for (int u = 0; u < NV; u++)
                isum[m][u] = _mm512_set1_epi32(c);
        }
        __m512i hv[Q8R_NV];
        for (int u = 0; u < NV; u++)
            hv[u] = q5 ? load2(g[2 * u] + qs_at + 128, g[2 * u + 1] + qs_at + 128)
                       : _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
            __m512i lo[Q8R_NV], hi[Q8R_NV];
            for (int u = 0; u < NV; u++) {
                const __m512i v = load2(g[2 * u] + qs_at + 32 * t, g[2 * u + 1] + qs_at + 32 * t);
                lo[u] = _mm512_and_si512(v, m4);
                hi[u] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                if (q5) {
                    lo[u] = _mm512_or_si512(lo[u], _mm512_and_si512(r5_bit4(hv[u], 2 * t), m10));
                    hi[u] =
                        _mm512_or_si512(hi[u], _mm512_and_si512(r5_bit4(hv[u], 2 * t + 1), m10));
                }
            }
            for (int m = 0; m < MR; m++) {
                int32_t x4lo, x4hi;
                memcpy(&x4lo, xq[m] + 4 * t, 4);
                memcpy(&x4hi, xq[m] + 16 + 4 * t, 4);
                const __m512i xl = _mm512_set1_epi32(x4lo), xh = _mm512_set1_epi32(x4hi);
                for (int u = 0; u < NV; u++) {
                    isum[m][u] = _mm512_dpbusd_epi32(isum[m][u], lo[u], xl);
                    isum[m][u] = _mm512_dpbusd_epi32(isum[m][u], hi[u], xh);
                }
            }
        }
        for (int u = 0; u < NV; u++) {
            const __m512 dw = _mm512_cvtph_ps(
                _mm256_loadu2_m128i((const __m128i *)g[2 * u + 1], (const __m128i *)g[2 * u]));
            const __m512 mw =
                asym ? _mm512_cvtph_ps(_mm256_loadu2_m128i((const __m128i *)(g[2 * u + 1] + 16),
                                                           (const __m128i *)(g[2 * u] + 16)))
                     : _mm512_setzero_ps();
            for (int m = 0; m < MR; m++) {
                acc[m][u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[m][u]),
                                            _mm512_mul_ps(dw, _mm512_set1_ps(dx[m])), acc[m][u]);
                if (asym)
                    acc[m][u] = _mm512_fmadd_ps(mw, _mm512_set1_ps(sx[m]), acc[m][u]);
            }
        }
    }
    for (int m = 0; m < MR; m++)
        for (int u = 0; u < NV; u++)
            _mm512_storeu_ps(&out[m][16 * u], acc[m][u]);
}

typedef void (*r0_fn)(bool pf, const uint8_t *const *grp, int64_t nb, const uint8_t *X,
                      size_t xstride, float out[Q8R_MR][16 * Q8R_NV]);
#define R0_FN(name, q5, asym, mr, nv)                                                              \
    static void name##_##mr##_##nv(bool pf, const uint8_t *const *grp, int64_t nb,                 \
                                   const uint8_t *X, size_t xs, float out[Q8R_MR][16 * Q8R_NV])    \
    {                                                                                              \
        tile_r0(mr, nv, q5, asym, pf, grp, nb, X, xs, out);                                        \
    }
#define R0_FNS(name, q5, asym)                                                                     \
    R0_FN(name, q5, asym, 1, 1)                                                                    \
    R0_FN(name, q5, asym, 2, 1)                                                                    \
    R0_FN(name, q5, asym, 3, 1)                                                                    \
    R0_FN(name, q5, asym, 4, 1)                                                                    \
    R0_FN(name, q5, asym, 1, 2)                                                                    \
    R0_FN(name, q5, asym, 2, 2)                                                                    \
    R0_FN(name, q5, asym, 3, 2)                                                                    \
    R0_FN(name, q5, asym, 4, 2)                                                                    \
    static const r0_fn name##_fns[Q8R_NV][Q8R_MR] = {                                              \
        {name##_1_1, name##_2_1, name##_3_1, name##_4_1},                                          \
        {name##_1_2, name##_2_2, name##_3_2, name##_4_2},                                          \
    };
R0_FNS(q4_0r8, false, false)
R0_FNS(q5_0r8, true, false)
R0_FNS(q4_1r8, false, true)
R0_FNS(q5_1r8, true, true)

/* The groups of [n0, n1) as Q8_0_R8's, tiles fns[nv - 1][mr - 1]. */
static void gemm_r0(const r0_fn fns[Q8R_NV][Q8R_MR], QUANT__GEMM_ARGS)
{
    const int64_t nb = K / QK4_0;
    const uint8_t *Wb = (const uint8_t *)W;
    for (int64_t g0 = n0 / 8; 8 * g0 < n1; g0 += 2 * Q8R_NV) {
        const uint8_t *grp[2 * Q8R_NV];
        int64_t c0, c1;
        const int nv = band_groups(Wb, wstride, g0, n0, n1, grp, &c0, &c1);
        const int64_t cb = 8 * g0;
        for (int64_t m = 0; m < M; m += Q8R_MR) {
            const int mr = M - m < Q8R_MR ? (int)(M - m) : Q8R_MR;
            float out[Q8R_MR][16 * Q8R_NV];
            fns[nv - 1][mr - 1](m == 0, grp, nb, (const uint8_t *)Xq + (size_t)m * xstride, xstride,
                                out);
            store_cols(&out[0][0], 16 * Q8R_NV, mr, cb, c0, c1, Y + m * ldy, ldy, beta);
        }
    }
}

void quant__gemm_q4_0_r8_avx512(QUANT__GEMM_ARGS)
{
    gemm_r0(q4_0r8_fns, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
}

void quant__gemm_q5_0_r8_avx512(QUANT__GEMM_ARGS)
{
    gemm_r0(q5_0r8_fns, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
}

void quant__gemm_q4_1_r8_avx512(QUANT__GEMM_ARGS)
{
    gemm_r0(q4_1r8_fns, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
}

void quant__gemm_q5_1_r8_avx512(QUANT__GEMM_ARGS)
{
    gemm_r0(q5_1r8_fns, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
}

/* ---- Q4_K_R8: eight Q4_K rows interleaved (model/quant_r8.c draws it) --- */

/*
 * As Q8_0_R8 above, two groups of eight rows side by side in one 512-bit
 * vector (group g in lanes 0-7, g + 1 in lanes 8-15), a tile of K4_MR rows
 * of X by those sixteen weight rows.  The codes (0..15) are unsigned
 * already, so vpdpbusd takes them as they are against the signed Q8_K
 * activations: per sub-block j (32 columns) and row of X, eight vpdpbusd
 * (low nibbles against columns 4t.., high against 16 + 4t..) give each
 * row's 32-bit sum, which one vpmulld by the sub-block's scales (row r's
 * in lane r) adds into the block's sum.  The mins meet the activations'
 * 32-column sums as 16-bit pairs (mins of sub-blocks 2p, 2p + 1 in a lane,
 * against the pair of sums broadcast: four vpdpwssd per block), those sums
 * prepared once per pass of X (kinfo).  Per block and row: acc = fma(isum,
 * d x_d, acc), acc = fma(-msum, dmin x_d, acc), as the scalar kernel in
 * model/quant.c: bit for bit its result, row m of Y never depending on M.
 */
/* K4_M1: one row of X (single-stream decode, W streamed from memory) goes
 * to the AVX2 kernels of Q4_K_R8 and Q6_K_R8 (bit for bit the same
 * results): one thread, bench_quant, they read W at 83-95% of the
 * bandwidth there against 52-63% for the tiles below, whose per-block
 * unpacking of two groups' scales is paid for one row only. */
#define K4_MR     4
#define K4_PF     4 /* blocks (1152 bytes per group) ahead */
#define K4_CHUNK  64
#define KINFO_MAX 4096 /* (row, block) entries of one pass of X */

struct kinfo {
    float d;
    int32_t pair[4]; /* 32-column sums of sub-blocks 2p (low 16 bits), 2p + 1 */
};
static _Thread_local struct kinfo kinfo_tls[KINFO_MAX];

static void kinfo_fill(struct kinfo *ki, const uint8_t *X, size_t xstride, int64_t rows, int64_t nb)
{
    for (int64_t m = 0; m < rows; m++)
        for (int64_t b = 0; b < nb; b++) {
            const struct blk_q8_k *x = (const struct blk_q8_k *)(X + (size_t)m * xstride) + b;
            struct kinfo *k = &ki[m * nb + b];
            k->d = x->d;
            for (int p = 0; p < 4; p++) {
                const int16_t lo = (int16_t)(x->bsums[4 * p] + x->bsums[4 * p + 1]);
                const int16_t hi = (int16_t)(x->bsums[4 * p + 2] + x->bsums[4 * p + 3]);
                k->pair[p] = (int32_t)((uint32_t)(uint16_t)lo | (uint32_t)(uint16_t)hi << 16);
            }
        }
}

/* The 64 six-bit values (v = 8 j + r) of two groups' blocks: out[p] holds
 * sub-blocks 2p (bytes 0-7: rows 0-7) and 2p + 1 (bytes 8-15) of group a
 * in its low 128 bits, of group b in its high ones (model/quant.c packs
 * them: low four bits in lo, the top two in hi). */
static inline void six_pair(const uint8_t *alo, const uint8_t *ahi, const uint8_t *blo,
                            const uint8_t *bhi, __m256i out[4])
{
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(0x30);
    const __m256i a = _mm256_loadu2_m128i((const __m128i *)blo, (const __m128i *)alo);
    const __m256i b = _mm256_loadu2_m128i((const __m128i *)(blo + 16), (const __m128i *)(alo + 16));
    const __m256i h = _mm256_loadu2_m128i((const __m128i *)bhi, (const __m128i *)ahi);
    out[0] =
        _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m2));
    out[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4),
                             _mm256_and_si256(_mm256_slli_epi16(h, 2), m2));
    out[2] = _mm256_or_si256(_mm256_and_si256(b, m4), _mm256_and_si256(h, m2));
    out[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(h, 2), m2));
}

/* The K-quant tiles' per-block start: block b + K4_PF of both groups (bb
 * bytes a block) prefetched when pf, the MR rows' Q8_K blocks b in x, and
 * the rows' block sums isum zeroed. */
static inline __attribute__((always_inline)) void
kblock_start(const int MR, const bool pf, const void *wa, const void *wb, size_t bb,
             const uint8_t *X, size_t xstride, int64_t b, const struct blk_q8_k **x, __m512i *isum)
{
    if (pf)
        for (size_t o = 0; o < bb; o += 64) {
            _mm_prefetch((const char *)wa + K4_PF * bb + o, _MM_HINT_T0);
            _mm_prefetch((const char *)wb + K4_PF * bb + o, _MM_HINT_T0);
        }
    for (int m = 0; m < MR; m++) {
        x[m] = (const struct blk_q8_k *)(X + (size_t)m * xstride) + b;
        isum[m] = _mm512_setzero_si512();
    }
}

/* isum[m] += sm[m] sc (a sub-block's sums by its scales, row lanes), each
 * held where it is made: else GCC 12 sinks the sub-blocks' vpmulld to the
 * block's end and spills their sums. */
static inline __attribute__((always_inline)) void ksub_add(const int MR, __m512i *isum,
                                                           const __m512i *sm, __m512i sc)
{
    for (int m = 0; m < MR; m++) {
        isum[m] = _mm512_add_epi32(isum[m], _mm512_mullo_epi32(sm[m], sc));
        __asm__("" : "+v"(isum[m]));
    }
}

/* acc[m] = fma(isum[m], d_w x_d, acc[m]): the rows' scales d_w (f16, group
 * a's eight then b's) by row m of X's x_d. */
static inline __attribute__((always_inline)) void kblock_acc(const int MR, const uint16_t *da,
                                                             const uint16_t *db,
                                                             const struct blk_q8_k *const *x,
                                                             const __m512i *isum, __m512 *acc)
{
    const __m512 dw =
        _mm512_cvtph_ps(_mm256_loadu2_m128i((const __m128i *)db, (const __m128i *)da));
    for (int m = 0; m < MR; m++)
        acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[m]),
                                 _mm512_mul_ps(dw, _mm512_set1_ps(x[m]->d)), acc[m]);
}

/* Q4_K_R8's tile, or Q5_K_R8's when q5 (the same leading fields, and each
 * code's fifth bit from the sub-block's qh vector, as the AVX2 tile_k:
 * codes 0..31, still unsigned for vpdpbusd, which sums in 32 bits, so the
 * sub-block's scale is applied once as for Q4_K). */
static inline __attribute__((always_inline)) void
tile_kr8(const int MR, const bool q5, const bool pf, const uint8_t *ga, const uint8_t *gb,
         int64_t nb, const uint8_t *X, size_t xstride, const struct kinfo *ki, float out[K4_MR][16])
{
    const size_t bb = q5 ? sizeof(struct blk_q5_k_r8) : sizeof(struct blk_q4_k_r8);
    const __m512i m4 = _mm512_set1_epi8(15), m10 = _mm512_set1_epi8(16);
    __m512 acc[K4_MR];
    for (int m = 0; m < MR; m++)
        acc[m] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        /* the fields Q4_K_R8 has sit at the same offsets in Q5_K_R8 */
        const struct blk_q4_k_r8 *wa = (const struct blk_q4_k_r8 *)(ga + (size_t)b * bb);
        const struct blk_q4_k_r8 *wb = (const struct blk_q4_k_r8 *)(gb + (size_t)b * bb);
        const struct blk_q8_k *x[K4_MR];
        __m512i isum[K4_MR];
        kblock_start(MR, pf, wa, wb, bb, X, xstride, b, x, isum);
        __m256i sv[4];
        six_pair(wa->sl, wa->sh, wb->sl, wb->sh, sv);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            /* sub-block j's scales: qwords (j & 1) of both halves */
            const __m256i sq = (j & 1) ? _mm256_permute4x64_epi64(sv[j >> 1], 0x0d)
                                       : _mm256_permute4x64_epi64(sv[j >> 1], 0x08);
            const __m512i sc = _mm512_cvtepu8_epi32(_mm256_castsi256_si128(sq));
            __m512i hv = _mm512_setzero_si512();
            if (q5)
                hv = load2(((const struct blk_q5_k_r8 *)wa)->qh + 32 * j,
                           ((const struct blk_q5_k_r8 *)wb)->qh + 32 * j);
            /* loads outer, rows of X inner, as the AVX2 tile_k: only one
             * load's two code vectors are live beside the rows' sums (all
             * eight first spilled: 39 stack stores in the 4-row tile) */
            __m512i s[K4_MR];
            for (int m = 0; m < MR; m++)
                s[m] = _mm512_setzero_si512();
            for (int t = 0; t < 4; t++) {
                const __m512i v = load2(wa->qs + 128 * j + 32 * t, wb->qs + 128 * j + 32 * t);
                __m512i lo = _mm512_and_si512(v, m4);
                __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                if (q5) {
                    lo = _mm512_or_si512(lo, _mm512_and_si512(r5_bit4(hv, 2 * t), m10));
                    hi = _mm512_or_si512(hi, _mm512_and_si512(r5_bit4(hv, 2 * t + 1), m10));
                }
                for (int m = 0; m < MR; m++) {
                    const int8_t *xq = x[m]->qs + 32 * j;
                    int32_t x4lo, x4hi;
                    memcpy(&x4lo, xq + 4 * t, 4);
                    memcpy(&x4hi, xq + 16 + 4 * t, 4);
                    s[m] = _mm512_dpbusd_epi32(s[m], lo, _mm512_set1_epi32(x4lo));
                    s[m] = _mm512_dpbusd_epi32(s[m], hi, _mm512_set1_epi32(x4hi));
                    __asm__("" : "+v"(s[m])); /* as tile_q8r8 in quant_avx2.c */
                }
            }
            ksub_add(MR, isum, s, sc);
        }
        /* mins: 16-bit pairs (sub-blocks 2p, 2p + 1) per row lane, after
         * the codes (not beside them: MR more live vectors there) */
        __m256i mv[4];
        six_pair(wa->ml, wa->mh, wb->ml, wb->mh, mv);
        __m512i msum[K4_MR];
        for (int m = 0; m < MR; m++)
            msum[m] = _mm512_setzero_si512();
        for (int p = 0; p < 4; p++) {
            const __m512i mp =
                _mm512_cvtepu8_epi16(_mm256_unpacklo_epi8(mv[p], _mm256_srli_si256(mv[p], 8)));
            for (int m = 0; m < MR; m++)
                msum[m] =
                    _mm512_dpwssd_epi32(msum[m], mp, _mm512_set1_epi32(ki[m * nb + b].pair[p]));
        }
        const __m512 dw =
            _mm512_cvtph_ps(_mm256_loadu2_m128i((const __m128i *)wb->d, (const __m128i *)wa->d));
        const __m512 dm = _mm512_cvtph_ps(
            _mm256_loadu2_m128i((const __m128i *)wb->dmin, (const __m128i *)wa->dmin));
        for (int m = 0; m < MR; m++) {
            const __m512 dx = _mm512_set1_ps(ki[m * nb + b].d);
            acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[m]), _mm512_mul_ps(dw, dx), acc[m]);
            acc[m] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum[m]), _mm512_mul_ps(dm, dx), acc[m]);
        }
    }
    for (int m = 0; m < MR; m++)
        _mm512_storeu_ps(out[m], acc[m]);
}

/* The tile of a K-quant layout in rows of eights: MR rows of X by the
 * groups ga, gb (an odd last group: gb = ga), ki the pass's kinfo at the
 * tile's first row (Q4_K_R8; Q6_K_R8 reads its bsums itself). */
typedef void (*kpair_fn)(bool pf, const uint8_t *ga, const uint8_t *gb, int64_t nb,
                         const uint8_t *X, size_t xstride, const struct kinfo *ki,
                         float out[K4_MR][16]);
/* name_1 .. name_4, the tiles of 1..4 rows of X, and their table
 * name_fns: CALL(mr) in a kpair_fn's body (its arguments by name). */
#define KPAIR_FN(name, CALL, mr)                                                                   \
    static void name##_##mr(bool pf, const uint8_t *ga, const uint8_t *gb, int64_t nb,             \
                            const uint8_t *X, size_t xs, const struct kinfo *ki,                   \
                            float out[K4_MR][16])                                                  \
    {                                                                                              \
        (void)ki;                                                                                  \
        CALL(mr);                                                                                  \
    }
#define KPAIR_FNS(name, CALL)                                                                      \
    KPAIR_FN(name, CALL, 1)                                                                        \
    KPAIR_FN(name, CALL, 2)                                                                        \
    KPAIR_FN(name, CALL, 3)                                                                        \
    KPAIR_FN(name, CALL, 4)                                                                        \
    static const kpair_fn name##_fns[K4_MR] = {name##_1, name##_2, name##_3, name##_4};
#define Q4KR8_CALL(mr) tile_kr8(mr, false, pf, ga, gb, nb, X, xs, ki, out)
#define Q5KR8_CALL(mr) tile_kr8(mr, true, pf, ga, gb, nb, X, xs, ki, out)
KPAIR_FNS(q4kr8, Q4KR8_CALL)
KPAIR_FNS(q5kr8, Q5KR8_CALL)

/* The groups of [n0, n1) two at a time (an odd last group paired with
 * itself), X in passes of at most K4_CHUNK rows (fewer when K is so long
 * that kinfo would not fit; filled when with_kinfo), K4_MR rows at a
 * time: Q4_K_R8's and Q6_K_R8's products of more than one row. */
static void gemm_kpairs(const kpair_fn *fns, bool with_kinfo, QUANT__GEMM_ARGS)
{
    const int64_t nb = K / QK_K;
    int64_t chunk = KINFO_MAX / nb < K4_CHUNK ? KINFO_MAX / nb : K4_CHUNK;
    if (chunk < 1)
        chunk = 1; /* K > 1M: never in a model; kinfo below would overflow */
    struct kinfo *ki = kinfo_tls;
    const uint8_t *Wb = (const uint8_t *)W;
    for (int64_t mc = 0; mc < M; mc += chunk) {
        const int64_t me = M - mc < chunk ? M : mc + chunk;
        if (with_kinfo)
            kinfo_fill(ki, (const uint8_t *)Xq + (size_t)mc * xstride, xstride, me - mc, nb);
        for (int64_t g0 = n0 / 8; 8 * g0 < n1; g0 += 2) {
            const int64_t ng = 8 * (g0 + 1) < n1 ? 2 : 1;
            const uint8_t *ga = Wb + (size_t)g0 * 8 * wstride;
            const uint8_t *gb = Wb + (size_t)(g0 + ng - 1) * 8 * wstride;
            const int64_t cb = 8 * g0, c0 = cb < n0 ? n0 : cb;
            const int64_t c1 = cb + 8 * ng > n1 ? n1 : cb + 8 * ng;
            for (int64_t m = mc; m < me; m += K4_MR) {
                const int mr = me - m < K4_MR ? (int)(me - m) : K4_MR;
                float out[K4_MR][16];
                fns[mr - 1](m == mc, ga, gb, nb, (const uint8_t *)Xq + (size_t)m * xstride, xstride,
                            ki + (m - mc) * nb, out);
                store_cols(&out[0][0], 16, mr, cb, c0, c1, Y + m * ldy, ldy, beta);
            }
        }
    }
}

void quant__gemm_q4_k_r8_avx512(QUANT__GEMM_ARGS)
{
    if (M == 1) /* see K4_M1 */
        quant__gemm_q4_k_r8_avx2(W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
    else
        gemm_kpairs(q4kr8_fns, true, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
}

/* Q5_K_R8: as Q4_K_R8, one row of X on the AVX2 kernel (K4_M1) */
void quant__gemm_q5_k_r8_avx512(QUANT__GEMM_ARGS)
{
    if (M == 1)
        quant__gemm_q5_k_r8_avx2(W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
    else
        gemm_kpairs(q5kr8_fns, true, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
}

/* ---- IQ4_XS_R8: eight IQ4_XS rows interleaved (model/quant_r8.c) ------- */

/*
 * Q4_K_R8's tile shape (two groups per 512-bit vector, the sub-block's
 * codes unpacked once per block) with IQ4_NL_R8's lookup: each code's
 * table value plus 128, unsigned for vpdpbusd, the sub-block's sum started
 * at -128 times its activations' sum (two bsums), so it is exact; then one
 * vpmulld by the sub-block's scales less 32 (six bits per row at bits 6 r
 * of the 48 at sc + 6 j: a 64-bit variable shift per row lane and a
 * narrowing to 32 bits) into the block's sum, and acc = fma(isum, d_w x_d,
 * acc): the scalar kernel's result bit for bit.
 */
static inline __attribute__((always_inline)) __m512i iq4xs_scales512(const uint8_t *sa,
                                                                     const uint8_t *sb)
{
    int64_t va, vb;
    memcpy(&va, sa, 8); /* the 48 bits, and 16 of the next: masked off */
    memcpy(&vb, sb, 8);
    const __m512i sh = _mm512_setr_epi64(0, 6, 12, 18, 24, 30, 36, 42);
    const __m512i m63 = _mm512_set1_epi64(63);
    const __m256i a =
        _mm512_cvtepi64_epi32(_mm512_and_si512(_mm512_srlv_epi64(_mm512_set1_epi64(va), sh), m63));
    const __m256i b =
        _mm512_cvtepi64_epi32(_mm512_and_si512(_mm512_srlv_epi64(_mm512_set1_epi64(vb), sh), m63));
    return _mm512_sub_epi32(_mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1),
                            _mm512_set1_epi32(32));
}

static inline __attribute__((always_inline)) void tile_iq4xsr8(const int MR, const bool pf,
                                                               const struct blk_iq4_xs_r8 *ga,
                                                               const struct blk_iq4_xs_r8 *gb,
                                                               int64_t nb, const uint8_t *X,
                                                               size_t xstride, float out[K4_MR][16])
{
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m512i tab = _mm512_xor_si512(
        _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)quant__iq4_values)),
        _mm512_set1_epi8((char)0x80));
    __m512 acc[K4_MR];
    for (int m = 0; m < MR; m++)
        acc[m] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const struct blk_iq4_xs_r8 *wa = ga + b, *wb = gb + b;
        const struct blk_q8_k *x[K4_MR];
        __m512i isum[K4_MR];
        kblock_start(MR, pf, wa, wb, sizeof(*wa), X, xstride, b, x, isum);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const __m512i sc = iq4xs_scales512(wa->sc + 6 * j, wb->sc + 6 * j);
            /* loads outer, rows of X inner, as tile_kr8 */
            __m512i sm[K4_MR];
            for (int m = 0; m < MR; m++)
                sm[m] = _mm512_set1_epi32(-128 * (x[m]->bsums[2 * j] + x[m]->bsums[2 * j + 1]));
            for (int t = 0; t < 4; t++) {
                const __m512i v = load2(wa->qs + 128 * j + 32 * t, wb->qs + 128 * j + 32 * t);
                const __m512i lo = _mm512_shuffle_epi8(tab, _mm512_and_si512(v, m4));
                const __m512i hi =
                    _mm512_shuffle_epi8(tab, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
                for (int m = 0; m < MR; m++) {
                    const int8_t *xq = x[m]->qs + 32 * j;
                    int32_t x4lo, x4hi;
                    memcpy(&x4lo, xq + 4 * t, 4);
                    memcpy(&x4hi, xq + 16 + 4 * t, 4);
                    sm[m] = _mm512_dpbusd_epi32(sm[m], lo, _mm512_set1_epi32(x4lo));
                    sm[m] = _mm512_dpbusd_epi32(sm[m], hi, _mm512_set1_epi32(x4hi));
                    __asm__("" : "+v"(sm[m]));
                }
            }
            ksub_add(MR, isum, sm, sc);
        }
        kblock_acc(MR, wa->d, wb->d, x, isum, acc);
    }
    for (int m = 0; m < MR; m++)
        _mm512_storeu_ps(out[m], acc[m]);
}

#define IQ4XSR8_CALL(mr)                                                                           \
    tile_iq4xsr8(mr, pf, (const struct blk_iq4_xs_r8 *)ga, (const struct blk_iq4_xs_r8 *)gb, nb,   \
                 X, xs, out)
KPAIR_FNS(iq4xsr8, IQ4XSR8_CALL)

/* one row of X on the AVX2 kernel, as Q4_K_R8 (K4_M1): bench_quant --threads
 * 1, M = 1 from memory on the Zen 5, W read at 78% of the streaming read
 * by the AVX2 kernel against 47% by this tile */
void quant__gemm_iq4_xs_r8_avx512(QUANT__GEMM_ARGS)
{
    if (M == 1)
        quant__gemm_iq4_xs_r8_avx2(W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
    else
        gemm_kpairs(iq4xsr8_fns, false, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
}

/* ---- Q3_K_R8, Q2_K_R8: the 2- and 3-bit K-quants, rows in eights ------- */

/*
 * Q3_K_R8 (model/quant_avx2.c's tile_r3 has the layout): two groups per
 * 512-bit vector, as Q6_K_R8.  Per 32-column chunk c, each group's sixteen
 * 6-bit scales unpack in one 128-bit vector as tile_r3 does (byte 8 h + r:
 * row r's scale of sub-block 2c + h, times 4, two's complement), and the
 * two groups' bytes of one sub-block sign-extend to the row lanes and
 * shift back by 2.  The codes (0..7, unsigned) of the four slots of a
 * sub-block meet the activations in four vpdpbusd started at -4 bsum_j
 * (the codes' offset, exact), and one vpmulld by the scales adds the
 * sub-block into the block's sum: isum = sum_j (sc_j - 32)(s_j - 4
 * bsum_j), then acc = fma(isum, d x_d, acc), the scalar kernel's result
 * bit for bit.
 */
static inline __attribute__((always_inline)) __m128i q3_scales4(const uint8_t *s)
{
    const __m128i sv = _mm_loadu_si128((const __m128i *)s);
    const __m128i m3c = _mm_set1_epi8(0x3c);
    const __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(_mm_slli_epi16(sv, 2), m3c),
                                          _mm_and_si128(_mm_srli_epi16(sv, 2), m3c));
    const __m128i hi =
        _mm_and_si128(_mm_sllv_epi32(_mm_shuffle_epi32(sv, 0xaa), _mm_setr_epi32(6, 4, 2, 0)),
                      _mm_set1_epi8((char)0xc0));
    return _mm_or_si128(lo, hi);
}

static inline __attribute__((always_inline)) void
tile_q3kr8(const int MR, const bool pf, const struct blk_q3_k_r8 *ga, const struct blk_q3_k_r8 *gb,
           int64_t nb, const uint8_t *X, size_t xstride, float out[K4_MR][16])
{
    const __m512i m3 = _mm512_set1_epi8(3), m4 = _mm512_set1_epi8(4), m7 = _mm512_set1_epi8(7);
    __m512 acc[K4_MR];
    for (int m = 0; m < MR; m++)
        acc[m] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const struct blk_q3_k_r8 *wa = ga + b, *wb = gb + b;
        const struct blk_q8_k *x[K4_MR];
        __m512i isum[K4_MR];
        kblock_start(MR, pf, wa, wb, sizeof(*wa), X, xstride, b, x, isum);
        for (int c = 0; c < 8; c++) {
            const __m128i s2a = q3_scales4(wa->s + 12 * c), s2b = q3_scales4(wb->s + 12 * c);
            const __m512i v0 = load2(wa->q + 96 * c, wb->q + 96 * c);
            const __m512i v1 = load2(wa->q + 96 * c + 32, wb->q + 96 * c + 32);
            const __m512i v2 = load2(wa->q + 96 * c + 64, wb->q + 96 * c + 64);
            for (int u = 0; u < 2; u++) {
                /* sub-block 2c + u's scales less 32, row lanes */
                const __m512i sc =
                    _mm512_srai_epi32(_mm512_cvtepi8_epi32(u ? _mm_unpackhi_epi64(s2a, s2b)
                                                             : _mm_unpacklo_epi64(s2a, s2b)),
                                      2);
                __m512i cv[4];
                if (u == 0) {
                    cv[0] = _mm512_and_si512(v0, m7);
                    cv[1] = _mm512_and_si512(_mm512_srli_epi16(v0, 3), m7);
                    cv[2] = _mm512_and_si512(v1, m7);
                    cv[3] = _mm512_and_si512(_mm512_srli_epi16(v1, 3), m7);
                } else {
                    cv[0] = _mm512_and_si512(v2, m7);
                    cv[1] = _mm512_and_si512(_mm512_srli_epi16(v2, 3), m7);
                    cv[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v0, 6), m3),
                                            _mm512_and_si512(_mm512_srli_epi16(v2, 4), m4));
                    cv[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v1, 6), m3),
                                            _mm512_and_si512(_mm512_srli_epi16(v2, 5), m4));
                }
                for (int m = 0; m < MR; m++) {
                    const int8_t *xq = x[m]->qs + 32 * c + 16 * u;
                    __m512i sm = _mm512_set1_epi32(-4 * x[m]->bsums[2 * c + u]);
                    for (int t = 0; t < 4; t++) {
                        int32_t x4;
                        memcpy(&x4, xq + 4 * t, 4);
                        sm = _mm512_dpbusd_epi32(sm, cv[t], _mm512_set1_epi32(x4));
                    }
                    isum[m] = _mm512_add_epi32(isum[m], _mm512_mullo_epi32(sm, sc));
                    __asm__("" : "+v"(isum[m])); /* as tile_kr8 */
                }
            }
        }
        kblock_acc(MR, wa->d, wb->d, x, isum, acc);
    }
    for (int m = 0; m < MR; m++)
        _mm512_storeu_ps(out[m], acc[m]);
}

/*
 * Q2_K_R8 (model/quant_avx2.c's tile_r2 has the layout): two groups per
 * 512-bit vector.  Per sub-block j (16 columns) one load pair gives its
 * four code vectors (0..3, a 16-bit shift by 2 t and a mask), which meet
 * the activations in four vpdpbusd per row of X, then one vpmulld by the
 * sub-block's scales (the low nibbles of the two groups' eight bytes at
 * sc + 8 j, zero-extended to the row lanes).  The mins after the codes,
 * as tile_r2: per chunk c the high nibbles of sub-blocks 2c, 2c + 1 as
 * 16-bit pairs per row lane against the pair of bsums broadcast, one
 * vpdpwssd per row of X.  acc = fma(isum, d x_d, acc), then acc =
 * fma(-msum, dmin x_d, acc): the scalar kernel's result bit for bit.
 */
static inline __attribute__((always_inline)) void
tile_q2kr8(const int MR, const bool pf, const struct blk_q2_k_r8 *ga, const struct blk_q2_k_r8 *gb,
           int64_t nb, const uint8_t *X, size_t xstride, float out[K4_MR][16])
{
    const __m512i m3 = _mm512_set1_epi8(3);
    const __m128i m15 = _mm_set1_epi8(15);
    __m512 acc[K4_MR];
    for (int m = 0; m < MR; m++)
        acc[m] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const struct blk_q2_k_r8 *wa = ga + b, *wb = gb + b;
        const struct blk_q8_k *x[K4_MR];
        __m512i isum[K4_MR];
        kblock_start(MR, pf, wa, wb, sizeof(*wa), X, xstride, b, x, isum);
        for (int j = 0; j < 16; j++) {
            const __m128i s8 =
                _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(wa->sc + 8 * j)),
                                   _mm_loadl_epi64((const __m128i *)(wb->sc + 8 * j)));
            const __m512i sc = _mm512_cvtepu8_epi32(_mm_and_si128(s8, m15));
            const __m512i v = load2(wa->qs + 32 * j, wb->qs + 32 * j);
            __m512i sm[K4_MR];
            for (int m = 0; m < MR; m++)
                sm[m] = _mm512_setzero_si512();
            for (int t = 0; t < 4; t++) {
                const __m512i cv = _mm512_and_si512(_mm512_srli_epi16(v, 2 * t), m3);
                for (int m = 0; m < MR; m++) {
                    int32_t x4;
                    memcpy(&x4, x[m]->qs + 16 * j + 4 * t, 4);
                    sm[m] = _mm512_dpbusd_epi32(sm[m], cv, _mm512_set1_epi32(x4));
                    __asm__("" : "+v"(sm[m]));
                }
            }
            ksub_add(MR, isum, sm, sc);
        }
        kblock_acc(MR, wa->d, wb->d, x, isum, acc);
        __m512i msum[K4_MR];
        for (int m = 0; m < MR; m++)
            msum[m] = _mm512_setzero_si512();
        const __m256i m15y = _mm256_set1_epi8(15);
        for (int c = 0; c < 8; c++) {
            /* per half: the group's bytes of sub-blocks 2c (0-7) and 2c +
             * 1 (8-15) interleaved by row, then their high nibbles */
            const __m256i s2 = _mm256_loadu2_m128i((const __m128i *)(wb->sc + 16 * c),
                                                   (const __m128i *)(wa->sc + 16 * c));
            const __m256i il = _mm256_unpacklo_epi8(s2, _mm256_srli_si256(s2, 8));
            const __m512i mp =
                _mm512_cvtepu8_epi16(_mm256_and_si256(_mm256_srli_epi16(il, 4), m15y));
            for (int m = 0; m < MR; m++) {
                int32_t bs2;
                memcpy(&bs2, x[m]->bsums + 2 * c, 4);
                msum[m] = _mm512_dpwssd_epi32(msum[m], mp, _mm512_set1_epi32(bs2));
            }
        }
        const __m512 dm = _mm512_cvtph_ps(
            _mm256_loadu2_m128i((const __m128i *)wb->dmin, (const __m128i *)wa->dmin));
        for (int m = 0; m < MR; m++)
            acc[m] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum[m]),
                                      _mm512_mul_ps(dm, _mm512_set1_ps(x[m]->d)), acc[m]);
    }
    for (int m = 0; m < MR; m++)
        _mm512_storeu_ps(out[m], acc[m]);
}

#define Q3KR8_CALL(mr)                                                                             \
    tile_q3kr8(mr, pf, (const struct blk_q3_k_r8 *)ga, (const struct blk_q3_k_r8 *)gb, nb, X, xs,  \
               out)
#define Q2KR8_CALL(mr)                                                                             \
    tile_q2kr8(mr, pf, (const struct blk_q2_k_r8 *)ga, (const struct blk_q2_k_r8 *)gb, nb, X, xs,  \
               out)
KPAIR_FNS(q3kr8, Q3KR8_CALL)
KPAIR_FNS(q2kr8, Q2KR8_CALL)

void quant__gemm_q3_k_r8_avx512(QUANT__GEMM_ARGS)
{
    gemm_kpairs(q3kr8_fns, false, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
}

void quant__gemm_q2_k_r8_avx512(QUANT__GEMM_ARGS)
{
    gemm_kpairs(q2kr8_fns, false, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
}

/* ---- Q6_K_R8: eight Q6_K rows interleaved (model/quant_r8.c draws it) --- */

/*
 * As Q4_K_R8 above: two groups per 512-bit vector, codes 0..63 (the
 * file's q + 32) unsigned for vpdpbusd.  Per 32-column chunk c (sub-blocks
 * 2c, 2c + 1) and row of X: four vpdpbusd per sub-block, one vpmulld each by
 * its scales (signed bytes, sign-extended), and the codes' offset, 32 sc_j
 * bsum_j, through one vpdpwssd of the pair of scales (16-bit, per row
 * lane) against the pair of 16-column sums broadcast, taken off once per
 * block.  acc = fma(isum, d x_d, acc) per block, as the scalar kernel.
 */
static inline __attribute__((always_inline)) void
tile_q6kr8(const int MR, const bool pf, const struct blk_q6_k_r8 *ga, const struct blk_q6_k_r8 *gb,
           int64_t nb, const uint8_t *X, size_t xstride, float out[K4_MR][16])
{
    const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
    __m512 acc[K4_MR];
    for (int m = 0; m < MR; m++)
        acc[m] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const struct blk_q6_k_r8 *wa = ga + b, *wb = gb + b;
        const struct blk_q8_k *x[K4_MR];
        __m512i isum[K4_MR], off[K4_MR];
        kblock_start(MR, pf, wa, wb, sizeof(*wa), X, xstride, b, x, isum);
        for (int m = 0; m < MR; m++)
            off[m] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {
            /* scales of sub-blocks 2c (bytes 0-7: rows 0-7) and 2c + 1 */
            const __m256i s2 = _mm256_loadu2_m128i((const __m128i *)(wb->sc + 16 * c),
                                                   (const __m128i *)(wa->sc + 16 * c));
            const __m256i sq = _mm256_permute4x64_epi64(s2, 0xd8); /* a0 b0 | a1 b1 */
            const __m512i sa = _mm512_cvtepi8_epi32(_mm256_castsi256_si128(sq));
            const __m512i sb = _mm512_cvtepi8_epi32(_mm256_extracti128_si256(sq, 1));
            const __m512i sp =
                _mm512_cvtepi8_epi16(_mm256_unpacklo_epi8(s2, _mm256_srli_si256(s2, 8)));
            const __m512i h0 = load2(wa->qh + 64 * c, wb->qh + 64 * c);
            const __m512i h1 = load2(wa->qh + 64 * c + 32, wb->qh + 64 * c + 32);
            /* loads outer, rows of X inner, as tile_kr8: one load's two
             * code vectors live beside the rows' sums, not eight (which
             * spilled: 96 stack stores in the 4-row tile) */
            __m512i s_a[K4_MR], s_b[K4_MR];
            for (int m = 0; m < MR; m++)
                s_a[m] = s_b[m] = _mm512_setzero_si512();
            for (int t = 0; t < 4; t++) {
                const __m512i v = load2(wa->ql + 128 * c + 32 * t, wb->ql + 128 * c + 32 * t);
                /* bits 2t, 2t + 1 of the qh bytes to bits 4, 5 */
                __m512i a0, a1;
                if (t == 0)
                    a0 = _mm512_slli_epi16(h0, 4), a1 = _mm512_slli_epi16(h1, 4);
                else if (t == 1)
                    a0 = _mm512_slli_epi16(h0, 2), a1 = _mm512_slli_epi16(h1, 2);
                else if (t == 2)
                    a0 = h0, a1 = h1;
                else
                    a0 = _mm512_srli_epi16(h0, 2), a1 = _mm512_srli_epi16(h1, 2);
                const __m512i lo =
                    _mm512_or_si512(_mm512_and_si512(v, m4), _mm512_and_si512(a0, m30));
                const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                                                   _mm512_and_si512(a1, m30));
                for (int m = 0; m < MR; m++) {
                    const int8_t *xq = x[m]->qs + 32 * c;
                    int32_t x4lo, x4hi;
                    memcpy(&x4lo, xq + 4 * t, 4);
                    memcpy(&x4hi, xq + 16 + 4 * t, 4);
                    s_a[m] = _mm512_dpbusd_epi32(s_a[m], lo, _mm512_set1_epi32(x4lo));
                    s_b[m] = _mm512_dpbusd_epi32(s_b[m], hi, _mm512_set1_epi32(x4hi));
                    __asm__("" : "+v"(s_a[m]), "+v"(s_b[m]));
                }
            }
            for (int m = 0; m < MR; m++) {
                isum[m] =
                    _mm512_add_epi32(isum[m], _mm512_add_epi32(_mm512_mullo_epi32(s_a[m], sa),
                                                               _mm512_mullo_epi32(s_b[m], sb)));
                int32_t bs2;
                memcpy(&bs2, x[m]->bsums + 2 * c, 4);
                off[m] = _mm512_dpwssd_epi32(off[m], sp, _mm512_set1_epi32(bs2));
                __asm__("" : "+v"(isum[m]), "+v"(off[m])); /* as tile_kr8 */
            }
        }
        const __m512 dw =
            _mm512_cvtph_ps(_mm256_loadu2_m128i((const __m128i *)wb->d, (const __m128i *)wa->d));
        for (int m = 0; m < MR; m++) {
            const __m512i is = _mm512_sub_epi32(isum[m], _mm512_slli_epi32(off[m], 5));
            acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is),
                                     _mm512_mul_ps(dw, _mm512_set1_ps(x[m]->d)), acc[m]);
        }
    }
    for (int m = 0; m < MR; m++)
        _mm512_storeu_ps(out[m], acc[m]);
}

#define Q6KR8_CALL(mr)                                                                             \
    tile_q6kr8(mr, pf, (const struct blk_q6_k_r8 *)ga, (const struct blk_q6_k_r8 *)gb, nb, X, xs,  \
               out)
KPAIR_FNS(q6kr8, Q6KR8_CALL)

void quant__gemm_q6_k_r8_avx512(QUANT__GEMM_ARGS)
{
    if (M == 1) /* see K4_M1 */
        quant__gemm_q6_k_r8_avx2(W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
    else
        gemm_kpairs(q6kr8_fns, false, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
}
