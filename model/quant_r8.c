/*
 * model/quant_r8.c — the load-time layouts of the quantized types: each
 * file type's rows interleaved in groups of eight (Q4_K_R8 .. IQ4_XS_R8,
 * model/quant.h), drawn below, with their conversion from and back to the
 * file's layout (quant_repack, quant_unpack), their rows as f32, and
 * their plain C product kernels: the references the AVX2 and AVX-512
 * kernels (quant_avx2.c, quant_avx512.c) are held to bit for bit.
 *
 * A layout holds a group's bytes in place of its eight file rows (the same
 * byte count), so repacking needs one group of scratch and the type
 * table's row sizes stay the file type's.  The table itself and the ISA
 * choice are model/quant.c's, the file types' codecs model/quant.c's and
 * model/quant_k.c's.
 *
 * Threading: reentrant; kernels never allocate.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"
#include "quant.h"
#include "quant_codes.h"
#include "quant_internal.h"

/* ---- Q4_K_R8: Q4_K rows interleaved in eights (load-time layout) ------ */

/*
 * Why.  A decode step (one row of activations) reads every weight once, so
 * its product must run at the rate memory delivers W.  On the file's layout
 * a Q4_K row costs about 100 instructions per 256 weights at M = 1: the
 * 6-bit scales unpacked and spread, the nibbles split, an activation load
 * per 32 products; in cache that is about one core's read bandwidth, not
 * more, so from memory it falls short.  Interleaving eight rows puts row r
 * of the group in 32-bit lane r of every vector: four codes of each of
 * eight rows meet the same four activation bytes (one broadcast load), a
 * sub-block's 32 columns sum in 16-bit lanes and take their scale in one
 * vpmaddwd, and the scales and mins of eight rows are unpacked by a few
 * vector operations per block instead of scalar work per row.  The group
 * is also one contiguous stream of bytes where four file rows were four.
 *
 * Layout (struct blk_q4_k_r8, 1152 bytes = 8 x 144): a group of rows
 * 8g..8g+7 occupies the same bytes its eight file rows did (rows are
 * wstride apart, so the group starts at W + 8 g wstride), its blocks in
 * column order:
 *
 *   [d x8 f16][dmin x8 f16][sl 32][ml 32][sh 16][mh 16][qs 1024]
 *
 * The values are the file's (same f16 scales, same 6-bit codes), so
 * quant_unpack restores the file's bytes exactly and a row dequantizes to
 * the same floats.  quant_repack refuses a matrix whose rows are not a
 * multiple of 8: it stays in the file's layout and its kernels.
 *
 * Products: for each row r and activation row, per 256-column block the
 * integer sums isum = sum_j sc_j sum_k q x and msum = sum_j m_j (bsum_2j +
 * bsum_2j+1) (exact), then acc = fma(isum, d x_d, acc), acc = fma(-msum,
 * dmin x_d, acc) in block order, one float accumulator per output.  The
 * scalar kernel below and the AVX2 one (quant_avx2.c) do exactly these
 * operations, so they agree bit for bit and row m of Y never depends on M.
 */
#define R8 QUANT_GROUP

_Static_assert(sizeof(struct blk_q4_k_r8) == R8 * sizeof(struct blk_q4_k), "q4_K_r8 layout");

/* byte and nibble of value v = 8 j + r in sl / ml, byte and shift in sh / mh */
static inline int r8_lo_byte(int v)
{
    return (v >= 32 ? 16 : 0) + (v & 15);
}

static inline int r8_lo_shift(int v)
{
    return 4 * ((v >> 4) & 1);
}

static inline int r8_hi_shift(int v)
{
    return 2 * (v >> 4);
}

/* Row r's scales and mins (6-bit codes) from the sl, ml, sh, mh fields
 * that Q4_K_R8 and Q5_K_R8 blocks share. */
static void r8_scales_get(const uint8_t *sl, const uint8_t *ml, const uint8_t *sh,
                          const uint8_t *mh, int r, int *sc, int *mn)
{
    for (int j = 0; j < 8; j++) {
        const int v = 8 * j + r, lb = r8_lo_byte(v), ls = r8_lo_shift(v), hs = r8_hi_shift(v);
        sc[j] = ((sl[lb] >> ls) & 15) | (((sh[v & 15] >> hs) & 3) << 4);
        mn[j] = ((ml[lb] >> ls) & 15) | (((mh[v & 15] >> hs) & 3) << 4);
    }
}

/* Row r's scales and mins into those fields from a Q4_K or Q5_K block's
 * 12 bytes of them. */
static void r8_scales_put(uint8_t *sl, uint8_t *ml, uint8_t *sh, uint8_t *mh, int r,
                          const uint8_t *scales)
{
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        k4_scale_min(j, scales, &sc, &mn);
        const int v = 8 * j + r, lb = r8_lo_byte(v), ls = r8_lo_shift(v), hs = r8_hi_shift(v);
        sl[lb] = (uint8_t)((sl[lb] & ~(15 << ls)) | ((sc & 15) << ls));
        ml[lb] = (uint8_t)((ml[lb] & ~(15 << ls)) | ((mn & 15) << ls));
        sh[v & 15] = (uint8_t)((sh[v & 15] & ~(3 << hs)) | ((sc >> 4) << hs));
        mh[v & 15] = (uint8_t)((mh[v & 15] & ~(3 << hs)) | ((mn >> 4) << hs));
    }
}

/* Row r of a Q4_K_R8 block: scales, mins (6-bit codes) and codes q[256] in
 * column order. */
static void r8_row(const struct blk_q4_k_r8 *w, int r, int *sc, int *mn, uint8_t *q)
{
    r8_scales_get(w->sl, w->ml, w->sh, w->mh, r, sc, mn);
    for (int j = 0; j < 8; j++)
        for (int t = 0; t < 4; t++)
            for (int i = 0; i < 4; i++) {
                const uint8_t c = w->qs[128 * j + 32 * t + 4 * r + i];
                q[32 * j + 4 * t + i] = c & 15;
                q[32 * j + 16 + 4 * t + i] = c >> 4;
            }
}

/* Writes row r of a Q4_K_R8 block from its file block. */
static void r8_put(void *wp, int r, const void *xp)
{
    struct blk_q4_k_r8 *w = wp;
    const struct blk_q4_k *x = xp;
    w->d[r] = x->d;
    w->dmin[r] = x->dmin;
    r8_scales_put(w->sl, w->ml, w->sh, w->mh, r, x->scales);
    uint8_t L[QK_K];
    quant__q4_k_codes(x, L);
    for (int j = 0; j < 8; j++)
        for (int t = 0; t < 4; t++)
            for (int i = 0; i < 4; i++)
                w->qs[128 * j + 32 * t + 4 * r + i] =
                    (uint8_t)(L[32 * j + 4 * t + i] | (L[32 * j + 16 + 4 * t + i] << 4));
}

/* Row r of a Q4_K_R8 block back to its file block. */
static void r8_get(const void *wp, int r, void *xp)
{
    const struct blk_q4_k_r8 *w = wp;
    struct blk_q4_k *x = xp;
    int sc[8], mn[8];
    uint8_t L[QK_K];
    r8_row(w, r, sc, mn, L);
    x->d = w->d[r];
    x->dmin = w->dmin[r];
    quant__k4_pack_scales(sc, mn, x->scales);
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++)
            x->qs[32 * j + l] = (uint8_t)(L[64 * j + l] | (L[64 * j + 32 + l] << 4));
}

/* ---- Q5_K_R8: Q5_K rows interleaved in eights (load-time layout) ------ */

/*
 * Q4_K_R8's layout with the codes' fifth bits beside them (struct
 * blk_q5_k_r8, 1408 bytes = 8 x 176, drawn in model/quant_internal.h): the
 * bits of the 8 code vectors of a sub-block (4 loads, low and high
 * nibbles) sit in one 32-byte vector at the same bytes, bit 2 t and 2 t +
 * 1, so a kernel gets each vector's fifth bits by one shift and mask of a
 * vector it loads once per sub-block.  Products: as Q4_K_R8's, codes 0..31.
 */
_Static_assert(sizeof(struct blk_q5_k_r8) == R8 * sizeof(struct blk_q5_k), "q5_K_r8 layout");

/* Row r of a Q5_K_R8 block: scales, mins and codes q[256] (0..31) in column
 * order. */
static void r5_row(const struct blk_q5_k_r8 *w, int r, int *sc, int *mn, uint8_t *q)
{
    r8_scales_get(w->sl, w->ml, w->sh, w->mh, r, sc, mn);
    for (int j = 0; j < 8; j++)
        for (int t = 0; t < 4; t++)
            for (int i = 0; i < 4; i++) {
                const uint8_t c = w->qs[128 * j + 32 * t + 4 * r + i];
                const uint8_t h = w->qh[32 * j + 4 * r + i];
                q[32 * j + 4 * t + i] = (uint8_t)((c & 15) | (((h >> (2 * t)) & 1) << 4));
                q[32 * j + 16 + 4 * t + i] = (uint8_t)((c >> 4) | (((h >> (2 * t + 1)) & 1) << 4));
            }
}

/* Writes row r of a Q5_K_R8 block from its file block. */
static void r5_put(void *wp, int r, const void *xp)
{
    struct blk_q5_k_r8 *w = wp;
    const struct blk_q5_k *x = xp;
    w->d[r] = x->d;
    w->dmin[r] = x->dmin;
    r8_scales_put(w->sl, w->ml, w->sh, w->mh, r, x->scales);
    uint8_t L[QK_K];
    quant__q5_k_codes(x, L);
    for (int j = 0; j < 8; j++)
        for (int i = 0; i < 4; i++) {
            uint8_t h = 0;
            for (int t = 0; t < 4; t++) {
                const int lo = L[32 * j + 4 * t + i], hi = L[32 * j + 16 + 4 * t + i];
                w->qs[128 * j + 32 * t + 4 * r + i] = (uint8_t)((lo & 15) | ((hi & 15) << 4));
                h |= (uint8_t)(((lo >> 4) << (2 * t)) | ((hi >> 4) << (2 * t + 1)));
            }
            w->qh[32 * j + 4 * r + i] = h;
        }
}

/* Row r of a Q5_K_R8 block back to its file block. */
static void r5_get(const void *wp, int r, void *xp)
{
    const struct blk_q5_k_r8 *w = wp;
    struct blk_q5_k *x = xp;
    int sc[8], mn[8];
    uint8_t L[QK_K];
    r5_row(w, r, sc, mn, L);
    x->d = w->d[r];
    x->dmin = w->dmin[r];
    quant__k4_pack_scales(sc, mn, x->scales);
    memset(x->qh, 0, sizeof x->qh);
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) {
            const int lo = L[64 * j + l], hi = L[64 * j + 32 + l];
            x->qs[32 * j + l] = (uint8_t)((lo & 15) | ((hi & 15) << 4));
            x->qh[l] |= (uint8_t)(((lo >> 4) << (2 * j)) | ((hi >> 4) << (2 * j + 1)));
        }
}

static void r6_put(void *wp, int r, const void *xp);
static void r6_get(const void *wp, int r, void *xp);
static void r3_put(void *wp, int r, const void *xp);
static void r3_get(const void *wp, int r, void *xp);
static void r80_put(void *wp, int r, const void *xp);
static void r80_get(const void *wp, int r, void *xp);
static void r40_put(void *wp, int r, const void *xp);
static void r40_get(const void *wp, int r, void *xp);
static void r50_put(void *wp, int r, const void *xp);
static void r50_get(const void *wp, int r, void *xp);
static void r41_put(void *wp, int r, const void *xp);
static void r41_get(const void *wp, int r, void *xp);
static void r51_put(void *wp, int r, const void *xp);
static void r51_get(const void *wp, int r, void *xp);
static void r2_put(void *wp, int r, const void *xp);
static void r2_get(const void *wp, int r, void *xp);
static void rnl_put(void *wp, int r, const void *xp);
static void rnl_get(const void *wp, int r, void *xp);
static void rxs_put(void *wp, int r, const void *xp);
static void rxs_get(const void *wp, int r, void *xp);

/* The load-time layouts' codecs: file type, its layout, its block
 * (elements) and block bytes, and row r of a layout block written from its
 * file block (put) or back (get). */
static const struct r8_codec {
    enum gguf_tensor_type t, rt;
    int32_t blk;
    size_t fb;
    void (*put)(void *w, int r, const void *x);
    void (*get)(const void *w, int r, void *x);
} r8_codecs[] = {
    {GGUF_TENSOR_Q4_K, QUANT_Q4_K_R8, QK_K, sizeof(struct blk_q4_k), r8_put, r8_get},
    {GGUF_TENSOR_Q5_K, QUANT_Q5_K_R8, QK_K, sizeof(struct blk_q5_k), r5_put, r5_get},
    {GGUF_TENSOR_Q6_K, QUANT_Q6_K_R8, QK_K, sizeof(struct blk_q6_k), r6_put, r6_get},
    {GGUF_TENSOR_Q3_K, QUANT_Q3_K_R8, QK_K, sizeof(struct blk_q3_k), r3_put, r3_get},
    {GGUF_TENSOR_Q8_0, QUANT_Q8_0_R8, QK8_0, sizeof(struct blk_q8_0), r80_put, r80_get},
    {GGUF_TENSOR_Q4_0, QUANT_Q4_0_R8, QK4_0, sizeof(struct blk_q4_0), r40_put, r40_get},
    {GGUF_TENSOR_Q5_0, QUANT_Q5_0_R8, QK5_0, sizeof(struct blk_q5_0), r50_put, r50_get},
    {GGUF_TENSOR_Q4_1, QUANT_Q4_1_R8, QK4_1, sizeof(struct blk_q4_1), r41_put, r41_get},
    {GGUF_TENSOR_Q5_1, QUANT_Q5_1_R8, QK5_1, sizeof(struct blk_q5_1), r51_put, r51_get},
    {GGUF_TENSOR_Q2_K, QUANT_Q2_K_R8, QK_K, sizeof(struct blk_q2_k), r2_put, r2_get},
    {GGUF_TENSOR_IQ4_NL, QUANT_IQ4_NL_R8, QK4_NL, sizeof(struct blk_iq4_nl), rnl_put, rnl_get},
    {GGUF_TENSOR_IQ4_XS, QUANT_IQ4_XS_R8, QK_K, sizeof(struct blk_iq4_xs), rxs_put, rxs_get},
};

static const struct r8_codec *r8_codec_of(enum gguf_tensor_type t)
{
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(r8_codecs); i++)
        if (r8_codecs[i].t == t)
            return &r8_codecs[i];
    return NULL;
}

/* Both directions over every group of W (a file type of r8_codecs),
 * through one group of scratch. */
static int r8_convert(enum gguf_tensor_type t, bool pack, void *W, int64_t N, int64_t K)
{
    const struct r8_codec *c = r8_codec_of(t);
    if (!c || N < 0 || N % R8 || K <= 0 || K % c->blk)
        return -EINVAL;
    const int64_t nb = K / c->blk;
    const size_t fb = c->fb;
    const size_t gbytes = (size_t)nb * R8 * fb;
    uint8_t *tmp = malloc(gbytes);
    if (!tmp)
        return -ENOMEM;
    for (int64_t g = 0; g < N / R8; g++) {
        uint8_t *grp = (uint8_t *)W + (size_t)g * gbytes;
        memcpy(tmp, grp, gbytes);
        if (pack)
            memset(grp, 0, gbytes);
        for (int r = 0; r < R8; r++)
            for (int64_t b = 0; b < nb; b++) {
                const size_t fo = ((size_t)r * (size_t)nb + (size_t)b) * fb,
                             ro = (size_t)b * R8 * fb;
                if (pack)
                    c->put(grp + ro, r, tmp + fo);
                else
                    c->get(tmp + ro, r, grp + fo);
            }
    }
    free(tmp);
    return 0;
}

/* ---- the plain C kernels' frame ----------------------------------------- */

/* One block's part of an output: row r of a layout block wb against an
 * activation block xb, added into acc as the layout's AVX2 kernel adds it
 * (the same float operations in the same order); returns the new acc. */
typedef float (*r8_part_fn)(const uint8_t *wb, int r, const uint8_t *xb, float acc);

/* The plain C product: output n of [n0, n1) is row n % 8 of the group at
 * W + (n / 8) 8 wstride; for each row m of X the parts of its nb blocks
 * (wbb and xbb bytes each) are summed from 0 in block order, then Y[m][n]
 * = acc (beta 0) or Y[m][n] + acc (beta 1). */
static void r8_gemm(r8_part_fn part, size_t wbb, size_t xbb, int64_t nb, const void *W,
                    size_t wstride, int64_t n0, int64_t n1, const void *Xq, size_t xstride,
                    int64_t M, float *Y, int64_t ldy, float beta)
{
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *g = (const uint8_t *)W + (size_t)(n / R8) * R8 * wstride;
        const int r = (int)(n % R8);
        for (int64_t m = 0; m < M; m++) {
            const uint8_t *x = (const uint8_t *)Xq + (size_t)m * xstride;
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++)
                acc = part(g + (size_t)b * wbb, r, x + (size_t)b * xbb, acc);
            float *y = &Y[m * ldy + n];
            *y = beta != 0.0f ? *y + acc : acc;
        }
    }
}

/* Defines the plain C kernel `name` of a layout of WT blocks (blk
 * columns each) on XT activation blocks, its parts by `part`. */
#define R8_GEMM(name, part, WT, XT, blk)                                                           \
    void name(const void *W, size_t wstride, int64_t K, int64_t n0, int64_t n1, const void *Xq,    \
              size_t xstride, int64_t M, float *Y, int64_t ldy, float beta)                        \
    {                                                                                              \
        r8_gemm(part, sizeof(WT), sizeof(XT), K / (blk), W, wstride, n0, n1, Xq, xstride, M, Y,    \
                ldy, beta);                                                                        \
    }

/* Row r of block b of a Q4_K_R8 (q5 false) or Q5_K_R8 group at g: its
 * scales, mins, codes (column order) and f16 d, dmin. */
static void kr8_block(bool q5, const uint8_t *g, int64_t b, int r, int *sc, int *mn, uint8_t *L,
                      float *d, float *dmin)
{
    if (q5) {
        const struct blk_q5_k_r8 *w = (const struct blk_q5_k_r8 *)g + b;
        r5_row(w, r, sc, mn, L);
        *d = h2f(w->d[r]), *dmin = h2f(w->dmin[r]);
    } else {
        const struct blk_q4_k_r8 *w = (const struct blk_q4_k_r8 *)g + b;
        r8_row(w, r, sc, mn, L);
        *d = h2f(w->d[r]), *dmin = h2f(w->dmin[r]);
    }
}

/* Row r of the Q4_K_R8 / Q5_K_R8 group at g (nb blocks) to f32, as
 * q4_k_to_float / q5_k_to_float compute the file's row. */
static void kr8_row_to_float(bool q5, const uint8_t *g, int64_t nb, int r, float *y)
{
    for (int64_t b = 0; b < nb; b++, y += QK_K) {
        int sc[8], mn[8];
        uint8_t L[QK_K];
        float d, dmin;
        kr8_block(q5, g, b, r, sc, mn, L, &d, &dmin);
        for (int j = 0; j < 8; j++)
            for (int l = 0; l < 32; l++)
                y[32 * j + l] = d * (float)sc[j] * (float)L[32 * j + l] - dmin * (float)mn[j];
    }
}

/* A Q4_K_R8 / Q5_K_R8 block's part; the operations of the AVX2 kernels, in
 * the same order (see above). */
static inline float kr8_part(bool q5, const uint8_t *wb, int r, const uint8_t *xb, float acc)
{
    const struct blk_q8_k *x = (const struct blk_q8_k *)xb;
    int sc[8], mn[8];
    uint8_t L[QK_K];
    float d, dmin;
    kr8_block(q5, wb, 0, r, sc, mn, L, &d, &dmin);
    int32_t isum = 0, msum = 0;
    for (int j = 0; j < 8; j++) {
        int32_t s = 0;
        for (int l = 0; l < 32; l++)
            s += L[32 * j + l] * x->qs[32 * j + l];
        isum += sc[j] * s;
        msum += mn[j] * (x->bsums[2 * j] + x->bsums[2 * j + 1]);
    }
    acc = fmaf((float)isum, d * x->d, acc);
    return fmaf(-(float)msum, dmin * x->d, acc);
}

static float q4_k_r8_part(const uint8_t *wb, int r, const uint8_t *xb, float acc)
{
    return kr8_part(false, wb, r, xb, acc);
}

static float q5_k_r8_part(const uint8_t *wb, int r, const uint8_t *xb, float acc)
{
    return kr8_part(true, wb, r, xb, acc);
}

R8_GEMM(quant__gemm_q4_k_r8_scalar, q4_k_r8_part, struct blk_q4_k_r8, struct blk_q8_k, QK_K)
R8_GEMM(quant__gemm_q5_k_r8_scalar, q5_k_r8_part, struct blk_q5_k_r8, struct blk_q8_k, QK_K)

/* ---- Q6_K_R8: Q6_K rows interleaved in eights (load-time layout) ------ */

/*
 * The same idea for Q6_K (struct blk_q6_k_r8, 1680 bytes = 8 x 210): row
 * r in 32-bit lane r, four codes of each of eight rows per activation
 * broadcast.  Codes are stored as 0..63 (the file's q + 32), the offset
 * coming off through the activations' 16-column sums.  Per 256-column
 * block, row and activation row: isum = sum_j sc_j (sum_k q x - 32 bsum_j)
 * (exact), then acc = fma(isum, d x_d, acc); scalar and AVX2 agree bit for
 * bit.
 */
_Static_assert(sizeof(struct blk_q6_k_r8) == R8 * sizeof(struct blk_q6_k), "q6_K_r8 layout");

/* Row r of a Q6_K_R8 block: scales and codes q[256] (0..63) in column
 * order. */
static void r6_row(const struct blk_q6_k_r8 *w, int r, int *sc, uint8_t *q)
{
    for (int j = 0; j < 16; j++)
        sc[j] = w->sc[8 * j + r];
    for (int c = 0; c < 8; c++)
        for (int t = 0; t < 4; t++)
            for (int i = 0; i < 4; i++) {
                const uint8_t l = w->ql[128 * c + 32 * t + 4 * r + i];
                const uint8_t h0 = w->qh[64 * c + 4 * r + i], h1 = w->qh[64 * c + 32 + 4 * r + i];
                q[32 * c + 4 * t + i] = (uint8_t)((l & 15) | (((h0 >> (2 * t)) & 3) << 4));
                q[32 * c + 16 + 4 * t + i] = (uint8_t)((l >> 4) | (((h1 >> (2 * t)) & 3) << 4));
            }
}

static void r6_put(void *wp, int r, const void *xp)
{
    struct blk_q6_k_r8 *w = wp;
    const struct blk_q6_k *x = xp;
    int8_t q[QK_K];
    quant__q6_k_codes(x, q);
    w->d[r] = x->d;
    for (int j = 0; j < 16; j++)
        w->sc[8 * j + r] = x->scales[j];
    for (int c = 0; c < 8; c++)
        for (int t = 0; t < 4; t++)
            for (int i = 0; i < 4; i++) {
                const int lo = q[32 * c + 4 * t + i] + 32, hi = q[32 * c + 16 + 4 * t + i] + 32;
                w->ql[128 * c + 32 * t + 4 * r + i] = (uint8_t)((lo & 15) | ((hi & 15) << 4));
                uint8_t *h0 = &w->qh[64 * c + 4 * r + i], *h1 = &w->qh[64 * c + 32 + 4 * r + i];
                *h0 = (uint8_t)((*h0 & ~(3 << (2 * t))) | ((lo >> 4) << (2 * t)));
                *h1 = (uint8_t)((*h1 & ~(3 << (2 * t))) | ((hi >> 4) << (2 * t)));
            }
}

static void r6_get(const void *wp, int r, void *xp)
{
    const struct blk_q6_k_r8 *w = wp;
    struct blk_q6_k *x = xp;
    int sc[16];
    uint8_t L[QK_K];
    r6_row(w, r, sc, L);
    x->d = w->d[r];
    for (int j = 0; j < 16; j++)
        x->scales[j] = (int8_t)sc[j];
    quant__q6_k_pack(L, x->ql, x->qh);
}

static void q6_k_r8_row_to_float(const struct blk_q6_k_r8 *w, int64_t nb, int r, float *y)
{
    for (int64_t b = 0; b < nb; b++, y += QK_K) {
        int sc[16];
        uint8_t L[QK_K];
        r6_row(&w[b], r, sc, L);
        const float d = h2f(w[b].d[r]);
        for (int j = 0; j < QK_K; j++)
            y[j] = d * (float)sc[j / 16] * (float)((int)L[j] - 32);
    }
}

static float q6_k_r8_part(const uint8_t *wb, int r, const uint8_t *xb, float acc)
{
    const struct blk_q6_k_r8 *w = (const struct blk_q6_k_r8 *)wb;
    const struct blk_q8_k *x = (const struct blk_q8_k *)xb;
    int sc[16];
    uint8_t L[QK_K];
    r6_row(w, r, sc, L);
    int32_t isum = 0;
    for (int j = 0; j < 16; j++) {
        int32_t s = 0;
        for (int l = 0; l < 16; l++)
            s += L[16 * j + l] * x->qs[16 * j + l];
        isum += sc[j] * (s - 32 * x->bsums[j]);
    }
    return fmaf((float)isum, h2f(w->d[r]) * x->d, acc);
}

R8_GEMM(quant__gemm_q6_k_r8_scalar, q6_k_r8_part, struct blk_q6_k_r8, struct blk_q8_k, QK_K)

/* ---- Q3_K_R8: Q3_K rows interleaved in eights (load-time layout) ------ */

/*
 * Q6_K_R8's idea for Q3_K (struct blk_q3_k_r8, 880 bytes = 8 x 110): row r
 * in 32-bit lane r, four codes of each of eight rows per activation
 * broadcast, codes stored as 0..7 (the file's q + 4) with the offset
 * coming off through the activations' 16-column sums.
 *
 * Layout, per block and 32-column chunk c (sub-blocks 2c, 2c + 1):
 *
 *   [d x8 f16][s 96: 12 per chunk][q 768: 96 per chunk, three 32-byte vectors]
 *
 * Scales: the file's 6-bit codes as the scales themselves, sc - 32 in
 * 6-bit two's complement (the code with its top bit flipped), 16 values
 * per chunk in 12 bytes (value v = 8 h + r: row r, sub-block 2c + h): the
 * low 4 bits in the nibbles of bytes 0..7 (byte v % 8, high nibble for v
 * >= 8), the top 2 at bits 2 (v / 4) of byte 8 + v % 4.  A kernel unpacks
 * a chunk's 16 in one vector (shifts, masks, one variable shift), each at
 * bits 2-7 of its byte, where one arithmetic shift sign-extends it with no
 * offset to take off.
 *
 * Codes: byte 4 r + i of the chunk's three vectors holds row r's eight
 * codes of columns 32 c + 4 k + i (slot k = 0..7; sub-block 2c for k <
 * 4): slots 2e and 2e + 1 whole in bits 0-2 and 3-5 of vector e, slots 6
 * and 7 split (low 2 bits in bits 6-7 of vectors 0 and 1, third bits at
 * bits 6 and 7 of vector 2).  Six of the eight code vectors are a mask
 * (and a shift) away, where 2-bit codes and a plane of third bits (the
 * file's split) took four or five operations each.
 *
 * The values are the file's (f16 d, 6-bit scales, 3-bit codes), so
 * quant_unpack restores its bytes exactly and a row dequantizes to the
 * same floats.  Products: per 256-column block, row and activation row,
 * isum = sum_j s_j (sum_k c x - 4 bsum_j) with s_j = sc_j - 32 (exact),
 * then acc = fma(isum, d x_d, acc); scalar and AVX2 agree bit for bit.
 */
_Static_assert(sizeof(struct blk_q3_k_r8) == R8 * sizeof(struct blk_q3_k), "q3_K_r8 layout");

/* Row r's code of column 32 c + 4 k + i from chunk c's codes q (96 bytes). */
static inline int r3_code(const uint8_t *q, int r, int k, int i)
{
    const int o = 4 * r + i;
    if (k < 6)
        return (q[32 * (k / 2) + o] >> (3 * (k % 2))) & 7;
    return (q[32 * (k - 6) + o] >> 6) | (((q[64 + o] >> k) & 1) << 2);
}

/* Row r of a Q3_K_R8 block: scale codes sc[16] (0..63) and codes L[256]
 * (0..7) in column order. */
static void r3_row(const struct blk_q3_k_r8 *w, int r, int *sc, uint8_t *L)
{
    for (int c = 0; c < 8; c++) {
        const uint8_t *s = w->s + 12 * c;
        for (int h = 0; h < 2; h++) {
            const int v = 8 * h + r;
            sc[2 * c + h] =
                (((s[v % 8] >> (4 * h)) & 15) | (((s[8 + v % 4] >> (2 * (v / 4))) & 3) << 4)) ^ 32;
        }
        for (int k = 0; k < 8; k++)
            for (int i = 0; i < 4; i++)
                L[32 * c + 4 * k + i] = (uint8_t)r3_code(w->q + 96 * c, r, k, i);
    }
}

/* Writes row r of a Q3_K_R8 block from its file block. */
static void r3_put(void *wp, int r, const void *xp)
{
    struct blk_q3_k_r8 *w = wp;
    const struct blk_q3_k *x = xp;
    int sc[16];
    uint8_t L[QK_K];
    quant__q3_k_scales(x->scales, sc);
    quant__q3_k_codes(x, L);
    w->d[r] = x->d;
    for (int c = 0; c < 8; c++) {
        uint8_t *s = w->s + 12 * c, *q = w->q + 96 * c;
        for (int h = 0; h < 2; h++) {
            const int v = 8 * h + r, code = sc[2 * c + h] ^ 32; /* sc - 32, 6 bits */
            uint8_t *lo = &s[v % 8], *hi = &s[8 + v % 4];
            *lo = (uint8_t)((*lo & ~(15 << (4 * h))) | ((code & 15) << (4 * h)));
            *hi = (uint8_t)((*hi & ~(3 << (2 * (v / 4)))) | ((code >> 4) << (2 * (v / 4))));
        }
        for (int i = 0; i < 4; i++) {
            const uint8_t *l = &L[32 * c + i]; /* slot k: l[4 k] */
            const int o = 4 * r + i;
            q[o] = (uint8_t)(l[0] | l[4] << 3 | (l[24] & 3) << 6);
            q[32 + o] = (uint8_t)(l[8] | l[12] << 3 | (l[28] & 3) << 6);
            q[64 + o] = (uint8_t)(l[16] | l[20] << 3 | (l[24] >> 2) << 6 | (l[28] >> 2) << 7);
        }
    }
}

/* Row r of a Q3_K_R8 block back to its file block. */
static void r3_get(const void *wp, int r, void *xp)
{
    const struct blk_q3_k_r8 *w = wp;
    struct blk_q3_k *x = xp;
    int sc[16];
    uint8_t L[QK_K];
    r3_row(w, r, sc, L);
    x->d = w->d[r];
    quant__q3_k_pack_scales(sc, x->scales);
    quant__q2_pack(L, x->qs);
    memset(x->hmask, 0, sizeof x->hmask);
    for (int e = 0; e < QK_K; e++)
        x->hmask[e % 32] |= (uint8_t)((L[e] >> 2) << (e / 32));
}

static void q3_k_r8_row_to_float(const struct blk_q3_k_r8 *w, int64_t nb, int r, float *y)
{
    for (int64_t b = 0; b < nb; b++, y += QK_K) {
        int sc[16];
        uint8_t L[QK_K];
        r3_row(&w[b], r, sc, L);
        const float d = h2f(w[b].d[r]);
        for (int e = 0; e < QK_K; e++)
            y[e] = d * (float)(sc[e / 16] - 32) * (float)(L[e] - 4);
    }
}

static float q3_k_r8_part(const uint8_t *wb, int r, const uint8_t *xb, float acc)
{
    const struct blk_q3_k_r8 *w = (const struct blk_q3_k_r8 *)wb;
    const struct blk_q8_k *x = (const struct blk_q8_k *)xb;
    int sc[16];
    uint8_t L[QK_K];
    r3_row(w, r, sc, L);
    int32_t isum = 0;
    for (int j = 0; j < 16; j++) {
        int32_t s = 0;
        for (int l = 0; l < 16; l++)
            s += L[16 * j + l] * x->qs[16 * j + l];
        isum += (sc[j] - 32) * (s - 4 * x->bsums[j]);
    }
    return fmaf((float)isum, h2f(w->d[r]) * x->d, acc);
}

R8_GEMM(quant__gemm_q3_k_r8_scalar, q3_k_r8_part, struct blk_q3_k_r8, struct blk_q8_k, QK_K)

/* ---- Q8_0_R8: Q8_0 rows interleaved in eights (load-time layout) ------ */

/*
 * Why.  Batched products (M = 64..576 rows of activations under a serving
 * load) are bound by the arithmetic of the int8 tile.  On the file's
 * layout each 32-byte weight vector is one row's block, so every product of
 * four weight rows ends in horizontal adds (vphaddd) to bring the four
 * rows' sums together, and each row's scale is converted on its own.  With
 * eight rows interleaved (struct blk_q8_0_r8, 272 bytes = 8 x 34), row r of
 * the group sits in 32-bit lane r of every vector: four codes of each of
 * eight rows meet the same four activation bytes (one broadcast), the
 * 32-bit sums come out one lane per row with no horizontal adds, and the
 * eight rows' scales convert in one instruction.
 *
 * Layout: a group of rows 8g..8g+7 occupies the same bytes its eight file
 * rows did, its blocks in column order:
 *
 *   [d x8 f16][qs 256: vector t = 0..7, byte 4 r + i = row r, column 4 t + i]
 *
 * The scales and codes are the file's, so quant_unpack restores its bytes
 * exactly and a row dequantizes to the same floats.
 *
 * Products: for each row r and activation row, per 32-column block the
 * integer sum isum = sum_k q x (exact), then acc = fma(isum, d_w x_d, acc)
 * in block order, one float accumulator per output.  The scalar kernel
 * below and the AVX2 one (quant_avx2.c) do exactly these operations, so
 * they agree bit for bit and row m of Y never depends on M.
 */
_Static_assert(sizeof(struct blk_q8_0_r8) == R8 * sizeof(struct blk_q8_0), "q8_0_r8 layout");

static void r80_put(void *wp, int r, const void *xp)
{
    struct blk_q8_0_r8 *w = wp;
    const struct blk_q8_0 *x = xp;
    w->d[r] = x->d;
    for (int t = 0; t < 8; t++)
        for (int i = 0; i < 4; i++)
            w->qs[32 * t + 4 * r + i] = x->qs[4 * t + i];
}

static void r80_get(const void *wp, int r, void *xp)
{
    const struct blk_q8_0_r8 *w = wp;
    struct blk_q8_0 *x = xp;
    x->d = w->d[r];
    for (int t = 0; t < 8; t++)
        for (int i = 0; i < 4; i++)
            x->qs[4 * t + i] = w->qs[32 * t + 4 * r + i];
}

static void q8_0_r8_row_to_float(const struct blk_q8_0_r8 *w, int64_t nb, int r, float *y)
{
    for (int64_t b = 0; b < nb; b++, y += QK8_0) {
        struct blk_q8_0 x;
        r80_get(&w[b], r, &x);
        const float d = h2f(x.d);
        for (int k = 0; k < QK8_0; k++)
            y[k] = d * (float)x.qs[k];
    }
}

static float q8_0_r8_part(const uint8_t *wb, int r, const uint8_t *xb, float acc)
{
    const struct blk_q8_0_r8 *w = (const struct blk_q8_0_r8 *)wb;
    const struct blk_q8_0 *x = (const struct blk_q8_0 *)xb;
    int32_t isum = 0;
    for (int t = 0; t < 8; t++)
        for (int i = 0; i < 4; i++)
            isum += w->qs[32 * t + 4 * r + i] * x->qs[4 * t + i];
    return fmaf((float)isum, h2f(w->d[r]) * h2f(x->d), acc);
}

R8_GEMM(quant__gemm_q8_0_r8_scalar, q8_0_r8_part, struct blk_q8_0_r8, struct blk_q8_0, QK8_0)

/* ---- Q4_0_R8 .. Q5_1_R8: the 32-blocks of four bits, rows in eights ---- */

/*
 * Why.  On the file's layout a Q4_0 block's 16 bytes are one row's: the
 * AVX2 kernel unpacked them to 32 signed bytes (code - 8) and ran Q8_0's
 * sign trick, vpsignb + vpmaddubsw + vpmaddwd per 32 products of one row,
 * at about a third of the Q4_K_R8 kernel's rate; Q4_1 and Q5_1 had no
 * AVX2 kernel at all.  Interleaved by eight as Q4_K_R8's sub-blocks are
 * (row r in 32-bit lane r), the codes stay unsigned (0..15; the five-bit
 * types' 0..31) and vpmaddubsw multiplies them by the activations as they
 * are: a block's eight (five bits: four) products of eight rows sum in 16
 * bits before one vpmaddwd widens them.  The activations' code sums do the
 * rest: Q4_0's and Q5_0's offset o (8, 16) comes off as sum_k (c - o) x =
 * sum_k c x - o s, with s carried in the activation block (Q8_0S: Q8_0's
 * d and codes, and s), and Q4_1's and Q5_1's mins meet Q8_1's x_d s (a
 * half float, as llama.cpp's): sum_k (d c + m) x = d x_d sum_k c q + m
 * x_d s.
 *
 * Layout (blk_q4_0_r8 144 bytes = 8 x 18, blk_q5_0_r8 176 = 8 x 22,
 * blk_q4_1_r8 160 = 8 x 20, blk_q5_1_r8 192 = 8 x 24): a group of rows
 * 8g..8g+7 occupies the same bytes its eight file rows did, its blocks in
 * column order:
 *
 *   Q4_0_R8  [d x8 f16][qs 128: vector t = 0..3, byte 4 r + i = row r's
 *            codes of columns 4 t + i (low nibble), 16 + 4 t + i (high)]
 *   Q5_0_R8  [d x8 f16][qs 128][qh 32: byte 4 r + i, bit 2 t (2 t + 1) =
 *            the fifth bit of the code in qs vector t's low (high) nibble]
 *   Q4_1_R8  [d x8 f16][m x8 f16][qs 128]
 *   Q5_1_R8  [d x8 f16][m x8 f16][qs 128][qh 32]
 *
 * A qs byte is the file's byte 4 t + i of row r as it is (the file holds
 * column j in byte j's low nibble, j + 16 in its high one).  Scales, mins
 * and codes are the file's: quant_unpack restores its bytes exactly and a
 * row dequantizes to the same floats.
 *
 * Products: per block, row r and activation row, the integer isum = sum_k
 * c x (minus o s for Q4_0, Q5_0: exactly the file layout's sum_k (c - o)
 * x), then acc = fma(isum, d_w x_d, acc), and for Q4_1, Q5_1 acc = fma(m_w,
 * (x_d s), acc), in block order.  (Q8_1's half-float x_d s, llama.cpp's
 * too, keeps a `tiny` Q4_1 file's logits within 6e-6 of llama.cpp's; an
 * exact s moved them 6e-2 away, the size of that rounding.)  The scalar
 * kernel below and the AVX2 one (quant_avx2.c) do exactly these
 * operations, so they agree bit for bit and row m of Y never depends on
 * M.
 */
_Static_assert(sizeof(struct blk_q4_0_r8) == R8 * sizeof(struct blk_q4_0), "q4_0_r8 layout");
_Static_assert(sizeof(struct blk_q5_0_r8) == R8 * sizeof(struct blk_q5_0), "q5_0_r8 layout");
_Static_assert(sizeof(struct blk_q4_1_r8) == R8 * sizeof(struct blk_q4_1), "q4_1_r8 layout");
_Static_assert(sizeof(struct blk_q5_1_r8) == R8 * sizeof(struct blk_q5_1), "q5_1_r8 layout");

/* Row r's codes into a layout block's qs (and qh, for the five-bit types;
 * else NULL) from its file block's qs (qh). */
static void r0_put_codes(uint8_t *qs, uint8_t *qh, int r, const uint8_t *fqs, const uint8_t *fqh)
{
    for (int t = 0; t < 4; t++)
        memcpy(qs + 32 * t + 4 * r, fqs + 4 * t, 4);
    if (!qh)
        return;
    uint32_t h;
    memcpy(&h, fqh, 4); /* bit j: column j's fifth bit */
    for (int i = 0; i < 4; i++) {
        uint8_t b = 0;
        for (int t = 0; t < 4; t++) {
            const uint32_t lo = (h >> (4 * t + i)) & 1, hi = (h >> (16 + 4 * t + i)) & 1;
            b |= (uint8_t)(lo << (2 * t) | hi << (2 * t + 1));
        }
        qh[4 * r + i] = b;
    }
}

/* The inverse: row r's codes back into a file block's qs (qh). */
static void r0_get_codes(const uint8_t *qs, const uint8_t *qh, int r, uint8_t *fqs, uint8_t *fqh)
{
    for (int t = 0; t < 4; t++)
        memcpy(fqs + 4 * t, qs + 32 * t + 4 * r, 4);
    if (!qh)
        return;
    uint32_t h = 0;
    for (int i = 0; i < 4; i++)
        for (int t = 0; t < 4; t++) {
            const uint32_t b = qh[4 * r + i];
            h |= ((b >> (2 * t)) & 1) << (4 * t + i) | ((b >> (2 * t + 1)) & 1) << (16 + 4 * t + i);
        }
    memcpy(fqh, &h, 4);
}

static void r40_put(void *wp, int r, const void *xp)
{
    struct blk_q4_0_r8 *w = wp;
    const struct blk_q4_0 *x = xp;
    w->d[r] = x->d;
    r0_put_codes(w->qs, NULL, r, x->qs, NULL);
}

static void r40_get(const void *wp, int r, void *xp)
{
    const struct blk_q4_0_r8 *w = wp;
    struct blk_q4_0 *x = xp;
    x->d = w->d[r];
    r0_get_codes(w->qs, NULL, r, x->qs, NULL);
}

static void r50_put(void *wp, int r, const void *xp)
{
    struct blk_q5_0_r8 *w = wp;
    const struct blk_q5_0 *x = xp;
    w->d[r] = x->d;
    r0_put_codes(w->qs, w->qh, r, x->qs, x->qh);
}

static void r50_get(const void *wp, int r, void *xp)
{
    const struct blk_q5_0_r8 *w = wp;
    struct blk_q5_0 *x = xp;
    x->d = w->d[r];
    r0_get_codes(w->qs, w->qh, r, x->qs, x->qh);
}

static void r41_put(void *wp, int r, const void *xp)
{
    struct blk_q4_1_r8 *w = wp;
    const struct blk_q4_1 *x = xp;
    w->d[r] = x->d;
    w->m[r] = x->m;
    r0_put_codes(w->qs, NULL, r, x->qs, NULL);
}

static void r41_get(const void *wp, int r, void *xp)
{
    const struct blk_q4_1_r8 *w = wp;
    struct blk_q4_1 *x = xp;
    x->d = w->d[r];
    x->m = w->m[r];
    r0_get_codes(w->qs, NULL, r, x->qs, NULL);
}

static void r51_put(void *wp, int r, const void *xp)
{
    struct blk_q5_1_r8 *w = wp;
    const struct blk_q5_1 *x = xp;
    w->d[r] = x->d;
    w->m[r] = x->m;
    r0_put_codes(w->qs, w->qh, r, x->qs, x->qh);
}

static void r51_get(const void *wp, int r, void *xp)
{
    const struct blk_q5_1_r8 *w = wp;
    struct blk_q5_1 *x = xp;
    x->d = w->d[r];
    x->m = w->m[r];
    r0_get_codes(w->qs, w->qh, r, x->qs, x->qh);
}

/* Row r of block b of a group at g of layout t (Q4_0_R8 .. Q5_1_R8). */
struct r0_row {
    float d, m; /* scale, and min (Q4_1, Q5_1; else 0) */
    int o;      /* the codes' offset (Q4_0 8, Q5_0 16; else 0) */
    int c[32];  /* codes, column order */
};

static void r0_block(enum gguf_tensor_type t, const uint8_t *g, int64_t b, int r, struct r0_row *o)
{
    const bool q5 = t == QUANT_Q5_0_R8 || t == QUANT_Q5_1_R8;
    const bool asym = t == QUANT_Q4_1_R8 || t == QUANT_Q5_1_R8;
    const size_t bb = t == QUANT_Q4_0_R8   ? sizeof(struct blk_q4_0_r8)
                      : t == QUANT_Q5_0_R8 ? sizeof(struct blk_q5_0_r8)
                      : t == QUANT_Q4_1_R8 ? sizeof(struct blk_q4_1_r8)
                                           : sizeof(struct blk_q5_1_r8);
    const uint8_t *blk = g + (size_t)b * bb;
    const uint8_t *qs =
        blk + (asym ? offsetof(struct blk_q4_1_r8, qs) : offsetof(struct blk_q4_0_r8, qs));
    uint16_t d, m = 0;
    memcpy(&d, blk + 2 * r, 2);
    if (asym)
        memcpy(&m, blk + offsetof(struct blk_q4_1_r8, m) + 2 * r, 2);
    o->d = h2f(d);
    o->m = asym ? h2f(m) : 0.0f;
    o->o = asym ? 0 : q5 ? 16 : 8;
    for (int tt = 0; tt < 4; tt++)
        for (int i = 0; i < 4; i++) {
            const int v = qs[32 * tt + 4 * r + i];
            const int h = q5 ? qs[128 + 4 * r + i] >> (2 * tt) : 0; /* qh follows qs */
            o->c[4 * tt + i] = (v & 15) | (h & 1) << 4;
            o->c[16 + 4 * tt + i] = (v >> 4) | (h >> 1 & 1) << 4;
        }
}

/* Row r of the group at g (nb blocks of layout t) to f32, as the file
 * type's to_float computes it. */
static void r0_row_to_float(enum gguf_tensor_type t, const uint8_t *g, int64_t nb, int r, float *y)
{
    for (int64_t b = 0; b < nb; b++, y += QK4_0) {
        struct r0_row w;
        r0_block(t, g, b, r, &w);
        for (int k = 0; k < QK4_0; k++)
            y[k] = w.o ? w.d * (float)(w.c[k] - w.o) : w.d * (float)w.c[k] + w.m;
    }
}

/* A Q4_0_R8 .. Q5_1_R8 block's part (see above). */
static inline float r0_part(enum gguf_tensor_type t, const uint8_t *wb, int r, const uint8_t *xb,
                            float acc)
{
    struct r0_row w;
    r0_block(t, wb, 0, r, &w);
    if (t == QUANT_Q4_1_R8 || t == QUANT_Q5_1_R8) { /* Q8_1 activations */
        const struct blk_q8_1 *x = (const struct blk_q8_1 *)xb;
        int32_t isum = 0;
        for (int k = 0; k < QK4_0; k++)
            isum += w.c[k] * x->qs[k];
        acc = fmaf((float)isum, w.d * h2f(x->d), acc);
        return fmaf(w.m, h2f(x->s), acc);
    }
    const struct blk_q8_0s *x = (const struct blk_q8_0s *)xb;
    int32_t isum = 0;
    for (int k = 0; k < QK4_0; k++)
        isum += w.c[k] * x->qs[k];
    return fmaf((float)(isum - w.o * x->s), w.d * h2f(x->d), acc);
}

#define R0_PART(name, T)                                                                           \
    static float name(const uint8_t *wb, int r, const uint8_t *xb, float acc)                      \
    {                                                                                              \
        return r0_part(T, wb, r, xb, acc);                                                         \
    }
R0_PART(q4_0_r8_part, QUANT_Q4_0_R8)
R0_PART(q5_0_r8_part, QUANT_Q5_0_R8)
R0_PART(q4_1_r8_part, QUANT_Q4_1_R8)
R0_PART(q5_1_r8_part, QUANT_Q5_1_R8)
R8_GEMM(quant__gemm_q4_0_r8_scalar, q4_0_r8_part, struct blk_q4_0_r8, struct blk_q8_0s, QK4_0)
R8_GEMM(quant__gemm_q5_0_r8_scalar, q5_0_r8_part, struct blk_q5_0_r8, struct blk_q8_0s, QK5_0)
R8_GEMM(quant__gemm_q4_1_r8_scalar, q4_1_r8_part, struct blk_q4_1_r8, struct blk_q8_1, QK4_1)
R8_GEMM(quant__gemm_q5_1_r8_scalar, q5_1_r8_part, struct blk_q5_1_r8, struct blk_q8_1, QK5_1)

/* ---- Q2_K_R8: Q2_K rows interleaved in eights (load-time layout) ------ */

/*
 * Why.  Q2_K's file layout has only the scalar dot (q2_k_dot), which
 * unpacks a block's 256 codes one at a time for every pair of weight row
 * and activation row.  Interleaved by eight as Q6_K_R8 is (row r in
 * 32-bit lane r), a sub-block of 16 columns of the eight rows is one
 * 32-byte vector: byte 4 r + i holds row r's codes of columns 4 t + i (t =
 * 0..3, at bits 2 t), so one shift and one mask give the vector t of
 * codes, four columns of each of eight rows, which meets four activation
 * bytes broadcast to every lane in one vpmaddubsw.  The scales bytes are
 * the file's, the eight rows of a sub-block side by side, so one 16-byte
 * load holds two sub-blocks' scales and mins of eight rows.
 *
 * Layout (struct blk_q2_k_r8, 672 bytes = 8 x 84): a group of rows
 * 8g..8g+7 occupies the same bytes its eight file rows did, its blocks in
 * column order:
 *
 *   [d x8 f16][dmin x8 f16][sc 128][qs 512]
 *
 *   sc byte 8 j + r: row r's scales byte of sub-block j (scale | min << 4)
 *   qs + 64 c + 32 u (chunk c = 0..7, u = 0, 1: sub-block j = 2 c + u),
 *   byte 4 r + i:
 *
 *       bits   7 6     5 4     3 2     1 0
 *       row r  12 + i  8 + i   4 + i   i      (column of sub-block j)
 *
 * Scales, mins and codes are the file's: quant_unpack restores its bytes
 * exactly and a row dequantizes to the same floats.
 *
 * Products: per 256-column block, row r and activation row, the integer
 * sums isum = sum_j sc_j sum_k q x and msum = sum_j m_j bsum_j (Q8_K's
 * 16-column code sums), exact, then acc = fma(isum, d x_d, acc), acc =
 * fma(-msum, dmin x_d, acc) in block order, one float accumulator per
 * output (Q4_K_R8's order).  The scalar kernel below and the AVX2 one
 * (quant_avx2.c) do exactly these operations, so they agree bit for bit
 * and row m of Y never depends on M.
 */
_Static_assert(sizeof(struct blk_q2_k_r8) == R8 * sizeof(struct blk_q2_k), "q2_K_r8 layout");

/* Row r of a Q2_K_R8 block: its scales bytes sc[16] and codes q[256]
 * (0..3) in column order. */
static void r2_row(const struct blk_q2_k_r8 *w, int r, uint8_t *sc, uint8_t *q)
{
    for (int j = 0; j < 16; j++)
        sc[j] = w->sc[8 * j + r];
    for (int j = 0; j < 16; j++)
        for (int i = 0; i < 4; i++) {
            const uint8_t v = w->qs[32 * j + 4 * r + i]; /* qs + 64 c + 32 u, j = 2 c + u */
            for (int t = 0; t < 4; t++)
                q[16 * j + 4 * t + i] = (v >> (2 * t)) & 3;
        }
}

/* Writes row r of a Q2_K_R8 block from its file block. */
static void r2_put(void *wp, int r, const void *xp)
{
    struct blk_q2_k_r8 *w = wp;
    const struct blk_q2_k *x = xp;
    uint8_t L[QK_K];
    quant__q2_codes(x->qs, L);
    w->d[r] = x->d;
    w->dmin[r] = x->dmin;
    for (int j = 0; j < 16; j++) {
        w->sc[8 * j + r] = x->scales[j];
        for (int i = 0; i < 4; i++) {
            uint8_t v = 0;
            for (int t = 0; t < 4; t++)
                v |= (uint8_t)(L[16 * j + 4 * t + i] << (2 * t));
            w->qs[32 * j + 4 * r + i] = v;
        }
    }
}

/* Row r of a Q2_K_R8 block back to its file block. */
static void r2_get(const void *wp, int r, void *xp)
{
    const struct blk_q2_k_r8 *w = wp;
    struct blk_q2_k *x = xp;
    uint8_t L[QK_K];
    r2_row(w, r, x->scales, L);
    x->d = w->d[r];
    x->dmin = w->dmin[r];
    quant__q2_pack(L, x->qs);
}

/* Row r of the Q2_K_R8 group at g (nb blocks) to f32, as q2_k_to_float
 * computes the file's row. */
static void q2_k_r8_row_to_float(const struct blk_q2_k_r8 *w, int64_t nb, int r, float *y)
{
    for (int64_t b = 0; b < nb; b++, y += QK_K) {
        uint8_t sc[16], L[QK_K];
        r2_row(&w[b], r, sc, L);
        const float d = h2f(w[b].d[r]), dmin = h2f(w[b].dmin[r]);
        for (int e = 0; e < QK_K; e++) {
            const int s = sc[e / 16];
            y[e] = d * (float)(s & 15) * (float)L[e] - dmin * (float)(s >> 4);
        }
    }
}

static float q2_k_r8_part(const uint8_t *wb, int r, const uint8_t *xb, float acc)
{
    const struct blk_q2_k_r8 *w = (const struct blk_q2_k_r8 *)wb;
    const struct blk_q8_k *x = (const struct blk_q8_k *)xb;
    uint8_t sc[16], L[QK_K];
    r2_row(w, r, sc, L);
    int32_t isum = 0, msum = 0;
    for (int j = 0; j < 16; j++) {
        int32_t s = 0;
        for (int l = 0; l < 16; l++)
            s += L[16 * j + l] * x->qs[16 * j + l];
        isum += (sc[j] & 15) * s;
        msum += (sc[j] >> 4) * x->bsums[j];
    }
    acc = fmaf((float)isum, h2f(w->d[r]) * x->d, acc);
    return fmaf(-(float)msum, h2f(w->dmin[r]) * x->d, acc);
}

R8_GEMM(quant__gemm_q2_k_r8_scalar, q2_k_r8_part, struct blk_q2_k_r8, struct blk_q8_k, QK_K)

/* ---- IQ4_NL_R8 and IQ4_XS_R8: the 16-value table, rows in eights ------- */

/*
 * Why.  The file layouts of IQ4_NL and IQ4_XS have only the scalar dots
 * (a table look-up per weight).  Their codes are four bits, so the
 * interleaving of the other four-bit types serves them: IQ4_NL's 32-blocks
 * as Q4_0_R8's, IQ4_XS's 256-blocks of eight sub-blocks of 32 as
 * Q4_K_R8's, row r of a group in 32-bit lane r of every vector.  A code
 * selects a value v of quant__iq4_values (-127 .. 113, never 0), which an
 * AVX2 kernel looks up for 32 codes at once (vpshufb), so the products are
 * signed bytes by signed bytes, as Q8_0_R8's.
 *
 * Layout (blk_iq4_nl_r8 144 bytes = 8 x 18, blk_iq4_xs_r8 1088 = 8 x 136):
 * a group of rows 8g..8g+7 occupies the same bytes its eight file rows
 * did, its blocks in column order:
 *
 *   IQ4_NL_R8  [d x8 f16][qs 128: Q4_0_R8's]
 *   IQ4_XS_R8  [d x8 f16][sc 48: 6 bytes per sub-block j, row r's 6-bit
 *              scale code at bits 6 r .. 6 r + 5][qs 1024: Q4_K_R8's]
 *
 * An IQ4_NL_R8 qs byte is the file's byte 4 t + i of row r as it is; an
 * IQ4_XS_R8 one, in sub-block j, the file's byte 16 j + 4 t + i.  A
 * sub-block's scale codes are packed so that one 8-byte load, one byte
 * shuffle, one shift per 32-bit lane and a mask put row r's in 16-bit
 * lanes 2r and 2r + 1 (quant_avx2.c), with nothing kept between
 * sub-blocks.  Scales, scale codes and codes are the file's: quant_unpack
 * restores its bytes exactly and a row dequantizes to the same floats.
 *
 * Products: per block, row r and activation row, the integer isum = sum_k
 * v[c_k] x_k (IQ4_NL), or sum_j (ls_j - 32) sum_k v[c_k] x_k over the
 * sub-blocks j (IQ4_XS; |isum| <= 256 * 32 * 127 * 128 < 2^31), exact,
 * then acc = fma(isum, d_w x_d, acc), in block order.  The scalar kernels
 * below and the AVX2 ones (quant_avx2.c) do exactly these operations, so
 * they agree bit for bit and row m of Y never depends on M.
 */
_Static_assert(sizeof(struct blk_iq4_nl_r8) == R8 * sizeof(struct blk_iq4_nl), "iq4_nl_r8 layout");
_Static_assert(sizeof(struct blk_iq4_xs_r8) == R8 * sizeof(struct blk_iq4_xs), "iq4_xs_r8 layout");

static void rnl_put(void *wp, int r, const void *xp)
{
    struct blk_iq4_nl_r8 *w = wp;
    const struct blk_iq4_nl *x = xp;
    w->d[r] = x->d;
    r0_put_codes(w->qs, NULL, r, x->qs, NULL);
}

static void rnl_get(const void *wp, int r, void *xp)
{
    const struct blk_iq4_nl_r8 *w = wp;
    struct blk_iq4_nl *x = xp;
    x->d = w->d[r];
    r0_get_codes(w->qs, NULL, r, x->qs, NULL);
}

/* Row r's 32 codes of the four vectors at qs (an IQ4_NL_R8 block's, or an
 * IQ4_XS_R8 sub-block's), in column order. */
static void iq4_r8_codes(const uint8_t *qs, int r, uint8_t *c)
{
    for (int t = 0; t < 4; t++)
        for (int i = 0; i < 4; i++) {
            const uint8_t b = qs[32 * t + 4 * r + i];
            c[4 * t + i] = b & 15;
            c[16 + 4 * t + i] = b >> 4;
        }
}

/* The 48 bits of IQ4_XS_R8 sub-block j's scale codes, and back. */
static uint64_t rxs_sc_get(const uint8_t *sc, int j)
{
    uint64_t f = 0;
    for (int i = 0; i < 6; i++)
        f |= (uint64_t)sc[6 * j + i] << (8 * i);
    return f;
}

static void rxs_sc_put(uint8_t *sc, int j, uint64_t f)
{
    for (int i = 0; i < 6; i++)
        sc[6 * j + i] = (uint8_t)(f >> (8 * i));
}

static void rxs_put(void *wp, int r, const void *xp)
{
    struct blk_iq4_xs_r8 *w = wp;
    const struct blk_iq4_xs *x = xp;
    int ls[8];
    quant__iq4_xs_scales(x, ls);
    w->d[r] = x->d;
    for (int j = 0; j < 8; j++) {
        const uint64_t f = rxs_sc_get(w->sc, j) & ~(63ull << (6 * r));
        rxs_sc_put(w->sc, j, f | (uint64_t)ls[j] << (6 * r));
        r0_put_codes(w->qs + 128 * j, NULL, r, x->qs + 16 * j, NULL);
    }
}

/* Row r of an IQ4_XS_R8 block: its scale codes ls[8] and codes c[256] in
 * column order. */
static void rxs_row(const struct blk_iq4_xs_r8 *w, int r, int *ls, uint8_t *c)
{
    for (int j = 0; j < 8; j++) {
        ls[j] = (int)((rxs_sc_get(w->sc, j) >> (6 * r)) & 63);
        iq4_r8_codes(w->qs + 128 * j, r, c + 32 * j);
    }
}

static void rxs_get(const void *wp, int r, void *xp)
{
    const struct blk_iq4_xs_r8 *w = wp;
    struct blk_iq4_xs *x = xp;
    x->d = w->d[r];
    x->scales_h = 0;
    memset(x->scales_l, 0, sizeof x->scales_l);
    for (int j = 0; j < 8; j++) {
        const int ls = (int)((rxs_sc_get(w->sc, j) >> (6 * r)) & 63);
        x->scales_l[j / 2] |= (uint8_t)((ls & 15) << (4 * (j % 2)));
        x->scales_h |= (uint16_t)((ls >> 4) << (2 * j));
        r0_get_codes(w->qs + 128 * j, NULL, r, x->qs + 16 * j, NULL);
    }
}

/* Row r of the IQ4_NL_R8 / IQ4_XS_R8 group at g (nb blocks) to f32, as
 * iq4_nl_to_float / iq4_xs_to_float compute the file's row. */
static void iq4_nl_r8_row_to_float(const struct blk_iq4_nl_r8 *w, int64_t nb, int r, float *y)
{
    for (int64_t b = 0; b < nb; b++, y += QK4_NL) {
        uint8_t c[QK4_NL];
        iq4_r8_codes(w[b].qs, r, c);
        const float d = h2f(w[b].d[r]);
        for (int k = 0; k < QK4_NL; k++)
            y[k] = d * (float)quant__iq4_values[c[k]];
    }
}

static void iq4_xs_r8_row_to_float(const struct blk_iq4_xs_r8 *w, int64_t nb, int r, float *y)
{
    for (int64_t b = 0; b < nb; b++, y += QK_K) {
        int ls[8];
        uint8_t c[QK_K];
        rxs_row(&w[b], r, ls, c);
        const float d = h2f(w[b].d[r]);
        for (int j = 0; j < 8; j++) {
            const float dl = d * (float)(ls[j] - 32);
            for (int l = 0; l < 32; l++)
                y[32 * j + l] = dl * (float)quant__iq4_values[c[32 * j + l]];
        }
    }
}

static float iq4_nl_r8_part(const uint8_t *wb, int r, const uint8_t *xb, float acc)
{
    const struct blk_iq4_nl_r8 *w = (const struct blk_iq4_nl_r8 *)wb;
    const struct blk_q8_0 *x = (const struct blk_q8_0 *)xb;
    uint8_t c[QK4_NL];
    iq4_r8_codes(w->qs, r, c);
    int32_t isum = 0;
    for (int k = 0; k < QK4_NL; k++)
        isum += quant__iq4_values[c[k]] * x->qs[k];
    return fmaf((float)isum, h2f(w->d[r]) * h2f(x->d), acc);
}

R8_GEMM(quant__gemm_iq4_nl_r8_scalar, iq4_nl_r8_part, struct blk_iq4_nl_r8, struct blk_q8_0, QK4_NL)

static float iq4_xs_r8_part(const uint8_t *wb, int r, const uint8_t *xb, float acc)
{
    const struct blk_iq4_xs_r8 *w = (const struct blk_iq4_xs_r8 *)wb;
    const struct blk_q8_k *x = (const struct blk_q8_k *)xb;
    int ls[8];
    uint8_t c[QK_K];
    rxs_row(w, r, ls, c);
    int32_t isum = 0;
    for (int j = 0; j < 8; j++) {
        int32_t s = 0;
        for (int l = 0; l < 32; l++)
            s += quant__iq4_values[c[32 * j + l]] * x->qs[32 * j + l];
        isum += (ls[j] - 32) * s;
    }
    return fmaf((float)isum, h2f(w->d[r]) * x->d, acc);
}

R8_GEMM(quant__gemm_iq4_xs_r8_scalar, iq4_xs_r8_part, struct blk_iq4_xs_r8, struct blk_q8_k, QK_K)

/* ---- the layouts' API ---------------------------------------------------- */

enum gguf_tensor_type quant_repack_type(enum gguf_tensor_type t)
{
    const struct r8_codec *c = r8_codec_of(t);
    return c ? c->rt : t;
}

int quant_repack(enum gguf_tensor_type t, void *W, int64_t N, int64_t K)
{
    return r8_convert(t, true, W, N, K); /* -EINVAL: no load-time layout */
}

int quant_unpack(enum gguf_tensor_type rt, void *W, int64_t N, int64_t K)
{
    const struct quant_traits *r = quant_traits_of(rt);
    if (!r || !r->group)
        return -EINVAL;
    return r8_convert(r->file_type, false, W, N, K);
}

/* Row r of the group at g of layout t, K columns, to f32 (as the file
 * type's to_float computes the file's row). */
void quant__r8_row_to_float(enum gguf_tensor_type t, const uint8_t *g, int64_t K, int r, float *y)
{
    if (t == QUANT_Q4_K_R8 || t == QUANT_Q5_K_R8)
        kr8_row_to_float(t == QUANT_Q5_K_R8, g, K / QK_K, r, y);
    else if (t == QUANT_Q3_K_R8)
        q3_k_r8_row_to_float((const struct blk_q3_k_r8 *)g, K / QK_K, r, y);
    else if (t == QUANT_Q8_0_R8)
        q8_0_r8_row_to_float((const struct blk_q8_0_r8 *)g, K / QK8_0, r, y);
    else if (t == QUANT_Q4_0_R8 || t == QUANT_Q5_0_R8 || t == QUANT_Q4_1_R8 || t == QUANT_Q5_1_R8)
        r0_row_to_float(t, g, K / QK4_0, r, y);
    else if (t == QUANT_Q2_K_R8)
        q2_k_r8_row_to_float((const struct blk_q2_k_r8 *)g, K / QK_K, r, y);
    else if (t == QUANT_IQ4_NL_R8)
        iq4_nl_r8_row_to_float((const struct blk_iq4_nl_r8 *)g, K / QK4_NL, r, y);
    else if (t == QUANT_IQ4_XS_R8)
        iq4_xs_r8_row_to_float((const struct blk_iq4_xs_r8 *)g, K / QK_K, r, y);
    else
        q6_k_r8_row_to_float((const struct blk_q6_k_r8 *)g, K / QK_K, r, y);
}
