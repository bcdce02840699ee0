/*
 * attention/attn_kern_body.h — the inner paged-attention kernel, written
 * once with GCC vector extensions and compiled once per instruction set.
 *
 * Included by
 *   attn_kern_portable.c   VW = 1: plain scalar code, any head_dim
 *   attn_kern_portable4.c  VW = 4: generic 16-byte vectors (SSE2 on
 *                          baseline x86-64, NEON elsewhere)
 *   attn_kern_avx2.c       VW = 8: AVX2 + FMA + F16C
 *   attn_kern_avx512.c     VW = 16: AVX-512F
 * each built with its own compiler flags; the including file defines
 *   VW                 lanes of one vector (head_dim must be a multiple)
 *   KERN_NAME          the exported function, e.g. attn__kern_avx2
 *   vhsum(v)           sum of the lanes of v
 * and may define the widening loads (else the generic vector code below):
 *   vload_h(p)         VW binary16 values at p -> vf
 *   vload_bf(p)        VW bfloat16 values at p -> vf
 *   vload_q8(p)        VW int8 values at p -> vf
 *
 * One call runs one piece (attn_internal.h): n_kvh consecutive KV heads
 * and their hv = n_kvh * group query heads.  Rows are taken in tiles of rt
 * rows x hv heads (mcap query vectors, at most 32 unless hv is larger), so
 * every K/V row is read once per tile, not once per query head.  A decode
 * piece takes all KV heads of the layer at once, so each block is read as
 * one contiguous run of K and one of V rather than n_kv_heads short tiles.
 * For each tile the visible key range is walked in chunks of at most KC =
 * 16 keys that never cross a block boundary:
 *
 *   chunk rows  read in place from the block's tiles in every dtype and
 *               widened to f32 in registers as they are used (f16 by F16C,
 *               bf16 by a 16-bit shift, q8 by sign extension and int->float
 *               conversion), so a K/V byte is read once per tile, from the
 *               arena, never through a copy;
 *               q8: the chunk's row scales go to ksc / vsc [n_kvh][KC]
 *   scores      s[qi][k] = (q_qi * scale) . K[k] (q8: times K's row scale,
 *               once per key, after the sum), -inf where k is not
 *               visible to qi's row (causal) or past the chunk; VW keys'
 *               dot-product vectors are folded into one vector of VW
 *               scores by a shuffle tree (no horizontal sum per key)
 *   softmax     online: m_new = max(m, max_k s), corr = exp(m - m_new),
 *               p = exp(s - m_new), l = l * corr + sum p, acc *= corr
 *   values      acc[qi] += p[qi][k] * V[k]   (acc row held in registers;
 *               q8: p[qi][k] times V's row scale)
 *
 * While a chunk is used, the K and V rows PF_CHUNKS chunks ahead are
 * prefetched into L2 through the page table (the jump between pages is
 * where the hardware prefetcher loses the stream); a chunk that is a whole
 * block is prefetched as one run of K and one of V over the piece's KV
 * heads.  Measured on the development machine (bench_attention, decode):
 * prefetching whole next blocks into L1 was slower than no prefetch; this
 * rolling L2 prefetch was ~7% faster than none for f32 K/V and neutral for
 * f16.  On the 2-core EPYC VM a distance of 2, 4, 8 or 16 chunks, and a
 * demand load of each next block (in case prefetches across a TLB miss are
 * dropped), were all within that machine's +-15% run-to-run noise.
 *
 * Where the time goes (perf cpu-clock, q8 decode 32 x 4096, one thread,
 * AVX2, with the scores computed as int8 dot products): about 40% in the
 * scores, 35% in the values loop (its samples fall on the first V load of
 * each row: memory latency, not arithmetic), 13% in the online softmax and
 * 10% in the prefetch loop.  Integer dot products for q8 QK^T (q quantized
 * to int8 per vector, vpmaddubsw + vpmaddwd: a third of the score loop's
 * instructions) were measured and left out: single-thread CPU time and
 * 2-thread wall time were within the noise of the widening loop, and they
 * would change q8 results by ~2e-3 (normalised) for no measured gain.
 *
 * exp is a vectorised Cody-Waite reduction and degree-6 polynomial
 * (relative error ~2e-7) for x <= 0, exactly 0 below -87 and for -inf, so
 * masked keys and huge score gaps never produce NaN.
 *
 * No allocation; everything lives in the caller's scratch.
 */
#include <math.h>
#include <string.h>

#include "attn_internal.h"

#ifndef VW
#error "define VW before including attn_kern_body.h"
#endif

#define KC        ATTN__KC
#define PF_CHUNKS 2 /* prefetch distance, in chunks */
/* values loop: GB query heads of one KV head x CB vectors of acc at once
 * (GB x CB + GB + 1 vector registers) */
#define GB 4
#if VW == 1
#define CB 1
#else
#define CB 2
#endif

typedef float vf __attribute__((vector_size(VW * 4)));
typedef float vf_u __attribute__((vector_size(VW * 4), aligned(4), may_alias));
typedef int32_t vi __attribute__((vector_size(VW * 4)));

#define AI static inline __attribute__((always_inline))
/* loops over the vectors of one head_dim row: unrolled fully when head_dim
 * is a constant, so the row lives in registers */
#define UNROLL _Pragma("GCC unroll 32")

/* x in every lane (a broadcast; not 0 + x, which is an add: -0 + 0 = +0) */
AI vf vsplat(float x)
{
#if VW == 1
    return (vf){x};
#elif VW == 4
    return (vf){x, x, x, x};
#elif VW == 8
    return (vf){x, x, x, x, x, x, x, x};
#else
    return (vf){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};
#endif
}

AI vf vload(const float *p)
{
    return *(const vf_u *)p;
}

AI void vstore(float *p, vf v)
{
    *(vf_u *)p = v;
}

/* exp(x) for x <= 0; 0 for x < -87 (including -inf). */
AI vf vexp_neg(vf x)
{
    const vf lo = vsplat(-87.0f);
    vi dead = x < lo;
    x = (vf)(((vi)x & ~dead) | ((vi)lo & dead));
    const vf magic = vsplat(12582912.0f); /* 1.5 * 2^23: round to nearest */
    vf t = x * 1.44269504088896341f + magic;
    vf n = t - magic;
    vi ni = (vi)t - (vi)magic;
    vf r = x - n * 0.693145751953125f;
    r = r - n * 1.42860682030941723e-6f;
    vf p = vsplat(1.0f / 720.0f);
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    vi bits = (vi)p + (ni << 23);
    return (vf)(bits & ~dead);
}

AI vi vsplat_i(int32_t x)
{
    vi z = {0};
    return z + x;
}

/* ---- widening loads: VW stored K/V elements -> VW floats ---------------- */

#ifndef vload_h
/* binary16 -> binary32 with integer vector ops: shift exponent and mantissa
 * into place, rescale by 2^112 (normals and subnormals), patch inf / nan,
 * add the sign */
AI vf vload_h_gen(const uint16_t *p)
{
    vi h;
    for (int i = 0; i < VW; i++)
        h[i] = p[i];
    const vi em = h & 0x7fff;
    vi u = (vi)((vf)(em << 13) * 0x1p112f);
    const vi special = em >= vsplat_i(0x7c00);
    u = (u & ~special) | ((((em & 0x3ff) << 13) | 0x7f800000) & special);
    return (vf)(u | ((h & 0x8000) << 16));
}
#define vload_h(p) vload_h_gen(p)
#endif

#ifndef vload_bf
AI vf vload_bf_gen(const uint16_t *p)
{
    vi h;
    for (int i = 0; i < VW; i++)
        h[i] = p[i];
    return (vf)(h << 16);
}
#define vload_bf(p) vload_bf_gen(p)
#endif

#ifndef vload_q8
AI vf vload_q8_gen(const int8_t *p)
{
    vi x;
    for (int i = 0; i < VW; i++)
        x[i] = p[i];
    return __builtin_convertvector(x, vf);
}
#define vload_q8(p) vload_q8_gen(p)
#endif

/* VW elements of a K/V row of dtype dt (a constant in every caller), from
 * element i on. */
AI vf kv_load(const char *row, int i, const int dt)
{
    if (dt == FOLIO_F16)
        return vload_h((const uint16_t *)(const void *)row + i);
    if (dt == FOLIO_BF16)
        return vload_bf((const uint16_t *)(const void *)row + i);
    if (dt == FOLIO_Q8)
        return vload_q8((const int8_t *)row + i);
    return vload((const float *)(const void *)row + i);
}

#if VW > 1
/* Source lane of output lane i when folding a pair (a, b) of vectors made
 * of segments of w lanes: the output holds the segments of a then of b,
 * each halved; "hi" picks the upper halves.  Lane i of the last fold is the
 * sum of all lanes of input vector i. */
#define FOLD_SRC(i, w, hi)                                                                         \
    (((i) >= VW / 2 ? VW : 0) + (((i) % (VW / 2)) / ((w) / 2)) * (w) + ((i) % ((w) / 2)) +         \
     ((hi) ? (w) / 2 : 0))
#if VW == 16
#define FOLD_MASK(w, hi)                                                                           \
    {                                                                                              \
        FOLD_SRC(0, w, hi), FOLD_SRC(1, w, hi), FOLD_SRC(2, w, hi), FOLD_SRC(3, w, hi),            \
            FOLD_SRC(4, w, hi), FOLD_SRC(5, w, hi), FOLD_SRC(6, w, hi), FOLD_SRC(7, w, hi),        \
            FOLD_SRC(8, w, hi), FOLD_SRC(9, w, hi), FOLD_SRC(10, w, hi), FOLD_SRC(11, w, hi),      \
            FOLD_SRC(12, w, hi), FOLD_SRC(13, w, hi), FOLD_SRC(14, w, hi), FOLD_SRC(15, w, hi)     \
    }
#elif VW == 8
#define FOLD_MASK(w, hi)                                                                           \
    {                                                                                              \
        FOLD_SRC(0, w, hi), FOLD_SRC(1, w, hi), FOLD_SRC(2, w, hi), FOLD_SRC(3, w, hi),            \
            FOLD_SRC(4, w, hi), FOLD_SRC(5, w, hi), FOLD_SRC(6, w, hi), FOLD_SRC(7, w, hi)         \
    }
#elif VW == 4
#define FOLD_MASK(w, hi)                                                                           \
    {                                                                                              \
        FOLD_SRC(0, w, hi), FOLD_SRC(1, w, hi), FOLD_SRC(2, w, hi), FOLD_SRC(3, w, hi)             \
    }
#else
#error "VW must be 1, 4, 8 or 16"
#endif

#define FOLD_LEVEL(w)                                                                              \
    do {                                                                                           \
        const vi ma = FOLD_MASK(w, 0), mb = FOLD_MASK(w, 1);                                       \
        UNROLL                                                                                     \
        for (int i_ = 0; i_ < (w) / 2; i_++)                                                       \
            d[i_] = __builtin_shuffle(d[2 * i_], d[2 * i_ + 1], ma) +                              \
                    __builtin_shuffle(d[2 * i_], d[2 * i_ + 1], mb);                               \
    } while (0)

/* d[0..VW) -> one vector whose lane k is the sum of the lanes of d[k]. */
AI vf fold_all(vf *d)
{
#if VW == 16
    FOLD_LEVEL(16);
#endif
#if VW >= 8
    FOLD_LEVEL(8);
#endif
    FOLD_LEVEL(4);
    FOLD_LEVEL(2);
    return d[0];
}

AI vi lane_index(void)
{
#if VW == 16
    vi v = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
#elif VW == 8
    vi v = {0, 1, 2, 3, 4, 5, 6, 7};
#else
    vi v = {0, 1, 2, 3};
#endif
    return v;
}
#endif

/* acc[g] += sum_k p[g][k] * V[k] for G consecutive query heads of one KV
 * head (p rows KC apart, acc rows hd apart): each V vector is widened once
 * and used by all G heads, with G x CB accumulators in registers. */
AI void values_heads(const float *p, float *acc, const char *vh, int32_t nvis, size_t rb,
                     const int hd, const int dt, const int G)
{
    const int nv = hd / VW;
    for (int c0 = 0; c0 < nv; c0 += CB) {
        vf a[GB][CB];
        UNROLL
        for (int g = 0; g < G; g++)
            UNROLL
        for (int c = 0; c < CB; c++)
            a[g][c] = c0 + c < nv ? vload(acc + (size_t)g * hd + (c0 + c) * VW) : vsplat(0.0f);
        for (int32_t k = 0; k < nvis; k++) {
            const char *vr = vh + (size_t)k * rb;
            vf pk[GB];
            UNROLL
            for (int g = 0; g < G; g++)
                pk[g] = vsplat(p[(size_t)g * KC + k]);
            UNROLL
            for (int c = 0; c < CB; c++) {
                if (c0 + c >= nv) /* head_dim not a multiple of CB vectors */
                    break;
                const vf x = kv_load(vr, (c0 + c) * VW, dt);
                UNROLL
                for (int g = 0; g < G; g++)
                    a[g][c] += pk[g] * x;
            }
        }
        UNROLL
        for (int g = 0; g < G; g++)
            UNROLL
        for (int c = 0; c < CB; c++)
            if (c0 + c < nv)
                vstore(acc + (size_t)g * hd + (c0 + c) * VW, a[g][c]);
    }
}

/* qr[] / a[] are filled for c < nv before use; GCC cannot see that for a
 * run-time head_dim */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
AI void kern_body(const struct attn__piece *pc, const int hd, const int dt)
{
    const int nv = hd / VW;
    const int32_t group = pc->group, nkvh = pc->n_kvh, hv = nkvh * group;
    const int32_t bs = pc->block_size;
    const int32_t mcap = attn__mcap(hv);
    const int32_t rt = mcap / hv;
    float *m = pc->scratch;
    float *l = m + ATTN__ALIGN_F(mcap);
    float *s = l + ATTN__ALIGN_F(mcap);
    float *acc = s + ATTN__ALIGN_F((size_t)mcap * KC);
    float *ksc = acc + ATTN__ALIGN_F((size_t)mcap * hd);
    float *vsc = ksc + ATTN__ALIGN_F((size_t)KC * nkvh);
    const size_t rb = pc->row_bytes;
    const size_t hstride = pc->head_bytes; /* row k of KV head j: kp + j * hstride + k * rb */
    const float scale = pc->scale;

    for (int32_t r = 0; r < pc->n_rows; r += rt) {
        const int32_t nr = FOLIO_MIN(rt, pc->n_rows - r);
        const int32_t nq = nr * hv;
        for (int32_t qi = 0; qi < nq; qi++) {
            m[qi] = -INFINITY;
            l[qi] = 0;
            memset(acc + (size_t)qi * hd, 0, sizeof(float) * (size_t)hd);
        }
        const int32_t cend = FOLIO_MIN(pc->c1, pc->pos0 + r + nr);
        /* sliding window: the tile's first row sees nothing before wlo;
         * start at that block (whole blocks keep the chunk grid) */
        int32_t start = pc->c0;
        if (pc->window > 0) {
            const int32_t wlo = pc->pos0 + r - pc->window + 1;
            if (wlo > start)
                start = FOLIO_MAX(start, wlo / bs * bs);
        }
        int32_t n;
        for (int32_t pos = start; pos < cend; pos += n) {
            const int32_t bi = pos / bs, slot = pos % bs;
            n = FOLIO_MIN(FOLIO_MIN(KC, cend - pos), bs - slot);
            const char *t = pc->kbase + (size_t)pc->block_table[bi] * pc->block_bytes;
            const char *kp = t + (size_t)slot * rb;
            const char *vp = kp + pc->v_bytes;
            if (dt == FOLIO_Q8) {
                for (int32_t j = 0; j < nkvh; j++) {
                    const char *sk = t + (size_t)j * hstride + pc->scale_off + (size_t)slot * 4;
                    memcpy(ksc + (size_t)j * KC, sk, sizeof(float) * (size_t)n);
                    memcpy(vsc + (size_t)j * KC, sk + pc->v_bytes, sizeof(float) * (size_t)n);
                    for (int32_t k = n; k < KC; k++)
                        ksc[(size_t)j * KC + k] = vsc[(size_t)j * KC + k] = 0;
                }
            }
            /* prefetch (into L2) the rows PF_CHUNKS chunks ahead, every KV head */
            {
                const int32_t pp = pos + PF_CHUNKS * KC;
                if (pp < cend) {
                    const int32_t sp = pp % bs, np = FOLIO_MIN(FOLIO_MIN(KC, bs - sp), cend - pp);
                    const char *tp = pc->kbase + (size_t)pc->block_table[pp / bs] * pc->block_bytes;
                    const char *tr = tp + (size_t)sp * rb;
                    const size_t len = (size_t)np * rb;
                    if (sp == 0 && np == bs) {
                        /* a whole block: the tiles of the piece's KV heads
                         * (q8: with their scales) are one run of K, one of V */
                        const size_t all = (size_t)nkvh * hstride;
                        for (size_t off = 0; off < all; off += 64) {
                            __builtin_prefetch(tp + off, 0, 1);
                            __builtin_prefetch(tp + pc->v_bytes + off, 0, 1);
                        }
                    } else
                        for (int32_t j = 0; j < nkvh; j++) {
                            const char *tj = tr + (size_t)j * hstride;
                            for (size_t off = 0; off < len; off += 64) {
                                __builtin_prefetch(tj + off, 0, 1);
                                __builtin_prefetch(tj + pc->v_bytes + off, 0, 1);
                            }
                            if (dt == FOLIO_Q8) {
                                const char *ts =
                                    tp + (size_t)j * hstride + pc->scale_off + (size_t)sp * 4;
                                __builtin_prefetch(ts, 0, 1);
                                __builtin_prefetch(ts + pc->v_bytes, 0, 1);
                            }
                        }
                }
            }
            /* scores */
            for (int32_t rr = 0; rr < nr; rr++) {
                const int32_t nvis = FOLIO_MAX(0, FOLIO_MIN(n, pc->pos0 + r + rr - pos + 1));
                for (int32_t h = 0; h < hv; h++) {
                    const int32_t qi = rr * hv + h;
                    const float *qv = pc->q + (size_t)(r + rr) * pc->q_stride + (size_t)h * hd;
                    const char *kh = kp + (size_t)(h / group) * hstride;
                    const float *ks = ksc + (size_t)(h / group) * KC;
                    float *srow = s + (size_t)qi * KC;
                    vf qr[ATTN__HD_MAX / VW];
                    UNROLL
                    for (int c = 0; c < nv; c++)
                        qr[c] = vload(qv + c * VW) * scale;
#if VW == 1
                    for (int32_t k = 0; k < nvis; k++) {
                        const char *kr = kh + (size_t)k * rb;
                        vf a = vsplat(0.0f);
                        for (int c = 0; c < nv; c++)
                            a += qr[c] * kv_load(kr, c * VW, dt);
                        srow[k] = dt == FOLIO_Q8 ? a[0] * ks[k] : a[0];
                    }
                    for (int32_t k = nvis; k < KC; k++)
                        srow[k] = -INFINITY;
#else
                    /* VW keys at a time: VW dot-product vectors folded
                     * into one vector of VW scores (no per-key hsum) */
                    for (int32_t kb = 0; kb < KC; kb += VW) {
                        vf d[VW];
                        if (kb + VW <= nvis) { /* all VW keys visible: no tests */
                            UNROLL
                            for (int k = 0; k < VW; k++) {
                                const char *kr = kh + (size_t)(kb + k) * rb;
                                d[k] = qr[0] * kv_load(kr, 0, dt);
                                UNROLL
                                for (int c = 1; c < nv; c++)
                                    d[k] += qr[c] * kv_load(kr, c * VW, dt);
                            }
                        } else {
                            UNROLL
                            for (int k = 0; k < VW; k++) {
                                d[k] = vsplat(0.0f);
                                if (kb + k < nvis) {
                                    const char *kr = kh + (size_t)(kb + k) * rb;
                                    UNROLL
                                    for (int c = 0; c < nv; c++)
                                        d[k] += qr[c] * kv_load(kr, c * VW, dt);
                                }
                            }
                        }
                        vf sc = fold_all(d);
                        if (dt == FOLIO_Q8)
                            sc *= vload(ks + kb);
                        vi keep = lane_index() < vsplat_i(nvis - kb);
                        sc = (vf)(((vi)sc & keep) | ((vi)vsplat(-INFINITY) & ~keep));
                        vstore(srow + kb, sc);
                    }
#endif
                }
            }

            /* sliding window: keys before each row's window out */
            if (pc->window > 0)
                for (int32_t rr = 0; rr < nr; rr++) {
                    const int32_t cut = pc->pos0 + r + rr - pc->window + 1 - pos;
                    for (int32_t qi = rr * hv; cut > 0 && qi < (rr + 1) * hv; qi++)
                        for (int32_t k = 0; k < FOLIO_MIN(cut, KC); k++)
                            s[(size_t)qi * KC + k] = -INFINITY;
                }

            /* online softmax */
            for (int32_t qi = 0; qi < nq; qi++) {
                float *srow = s + (size_t)qi * KC;
                float mx = srow[0];
                for (int k = 1; k < KC; k++)
                    mx = srow[k] > mx ? srow[k] : mx;
                if (mx == -INFINITY) { /* nothing visible to this row yet */
                    for (int k = 0; k < KC; k++)
                        srow[k] = 0;
                    continue;
                }
                const float mnew = m[qi] > mx ? m[qi] : mx;
                const float corr = expf(m[qi] - mnew);
                vf sum = vsplat(0.0f);
                /* q8: p is stored times V's row scale (l sums p alone) */
                const float *vs = vsc + (size_t)((qi % hv) / group) * KC;
                for (int c = 0; c < KC / VW; c++) {
                    vf p = vexp_neg(vload(srow + c * VW) - mnew);
                    vstore(srow + c * VW, dt == FOLIO_Q8 ? p * vload(vs + c * VW) : p);
                    sum += p;
                }
                l[qi] = l[qi] * corr + vhsum(sum);
                m[qi] = mnew;
                if (corr != 1.0f) {
                    float *ar = acc + (size_t)qi * hd;
                    UNROLL
                    for (int c = 0; c < nv; c++)
                        vstore(ar + c * VW, vload(ar + c * VW) * corr);
                }
            }

            /* values: the query heads of one KV head take each V vector
             * in turn, so a V element is widened once per GB heads (not
             * once per head); acc[GB][CB] vectors live in registers */
            for (int32_t rr = 0; rr < nr; rr++) {
                const int32_t nvis = FOLIO_MAX(0, FOLIO_MIN(n, pc->pos0 + r + rr - pos + 1));
                if (nvis == 0)
                    continue;
                for (int32_t j = 0; j < nkvh; j++) {
                    const char *vh = vp + (size_t)j * hstride;
                    for (int32_t g0 = 0; g0 < group; g0 += GB) {
                        const int gb = FOLIO_MIN(GB, group - g0);
                        const int32_t qi0 = rr * hv + j * group + g0;
                        const float *ps = s + (size_t)qi0 * KC;
                        float *as = acc + (size_t)qi0 * hd;
                        if (gb == 4)
                            values_heads(ps, as, vh, nvis, rb, hd, dt, 4);
                        else if (gb == 3)
                            values_heads(ps, as, vh, nvis, rb, hd, dt, 3);
                        else if (gb == 2)
                            values_heads(ps, as, vh, nvis, rb, hd, dt, 2);
                        else
                            values_heads(ps, as, vh, nvis, rb, hd, dt, 1);
                    }
                }
            }
        }

        /* results of the tile */
        for (int32_t rr = 0; rr < nr; rr++) {
            for (int32_t h = 0; h < hv; h++) {
                const int32_t qi = rr * hv + h;
                const float *ar = acc + (size_t)qi * hd;
                if (pc->out) {
                    float *o = pc->out + (size_t)(r + rr) * pc->out_stride + (size_t)h * hd;
                    const float inv = 1.0f / l[qi];
                    UNROLL
                    for (int c = 0; c < nv; c++)
                        vstore(o + c * VW, vload(ar + c * VW) * inv);
                } else {
                    float *rec = pc->part + ((size_t)(r + rr) * hv + h) * ATTN__PSTRIDE(hd);
                    rec[0] = m[qi];
                    rec[1] = l[qi];
                    memcpy(rec + 16, ar, sizeof(float) * (size_t)hd);
                }
            }
        }
    }
}

#pragma GCC diagnostic pop

/* constant head_dim lets the compiler keep q / acc rows in registers; a
 * constant dtype picks the widening load */
#define KERN_HD(dt)                                                                                \
    do {                                                                                           \
        if (pc->hd == 64)                                                                          \
            kern_body(pc, 64, dt);                                                                 \
        else if (pc->hd == 128)                                                                    \
            kern_body(pc, 128, dt);                                                                \
        else                                                                                       \
            kern_body(pc, pc->hd, dt);                                                             \
    } while (0)

void KERN_NAME(const struct attn__piece *pc)
{
    switch (pc->dtype) {
    case FOLIO_F16:
        KERN_HD(FOLIO_F16);
        break;
    case FOLIO_BF16:
        KERN_HD(FOLIO_BF16);
        break;
    case FOLIO_Q8:
        KERN_HD(FOLIO_Q8);
        break;
    default:
        KERN_HD(FOLIO_F32);
        break;
    }
}
