/*
 * attention/attn_kern_q8dot.h — q8 scores as int8 dot products with AVX2
 * integer instructions, for the kernels built with AVX2 (attn_kern_avx2.c,
 * and attn_kern_avx512.c, whose AVX-512 flags include AVX2), and with
 * AVX512-VNNI where the kernel is built for it (kq8z_dot16, below).
 * Included before attn_kern_body.h, which uses it for q8 K/V when head_dim
 * is a multiple of KQ8_W (KQ8_ZW for the VNNI one).
 *
 * A q8 score is sum_e qq[e] * k[e] over int8 query and key values (the
 * query quantized by attn_q8_quantize_q), then scaled in f32.  32 elements
 * per step by the sign trick: vpmaddubsw multiplies unsigned by signed
 * bytes, so it takes |k| (once per key vector, shared by the query heads
 * of the pass) against q with k's sign (vpsignb, per head).  Adjacent
 * products are summed to int16: |k| <= 128 and |q| <= 127 bound a pair by
 * 2 * 128 * 127 = 32512 < 2^15, so nothing saturates; vpmaddwd by ones
 * widens the pairs to int32, summed over the row (|sum| <= 512 * 128 * 127
 * < 2^24).  The four keys' 8-lane sums are folded to four int32 by two
 * levels of in-lane unpack + add and one add across the 128-bit halves.
 * With AVX512-VNNI, kq8z_dot16 takes 16 keys at a time with vpdpbusd, the
 * keys in lanes (its comment).
 * Every sum is exact, and so is the float path of the other ISAs (int8
 * products and their sums are integers below 2^24 in f32): all paths give
 * bit-identical q8 scores.
 */
#ifndef FOLIO_ATTN_KERN_Q8DOT_H
#define FOLIO_ATTN_KERN_Q8DOT_H

#include <immintrin.h>
#include <stdint.h>

#define KQ8_W 32 /* head_dim multiple the int8 path takes */

/* Per 128-bit half, lanes of key a's and key b's dot-product vectors for
 * G query heads: [a0 + a2, b0 + b2, a1 + a3, b1 + b3] (the first level of
 * the fold), so only one vector per head is live per pair of keys. */
static inline __attribute__((always_inline)) void kq8_dot2(const int8_t *q, const char *ka_row,
                                                           const char *kb_row, const int hd,
                                                           const int G, __m256i *t)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i d[3][2];
#pragma GCC unroll 4
    for (int g = 0; g < G; g++)
        d[g][0] = d[g][1] = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int c = 0; c < hd / KQ8_W; c++) {
#pragma GCC unroll 2
        for (int k = 0; k < 2; k++) {
            const __m256i kv =
                _mm256_loadu_si256((const __m256i *)(const void *)((k ? kb_row : ka_row) + 32 * c));
            const __m256i ka = _mm256_abs_epi8(kv);
            /* q's address made opaque for each key, so each key reads
             * its query vectors from L1 again: held across the 4 keys
             * instead (3 x 2 vectors at head_dim 64, beside the sums and
             * more than AVX2's 16 registers), GCC spilled them, a store
             * and a reload per vector per step.  bench_attention (e) q8
             * on the Zen 3: 15.5-15.7 against 16.0-16.2 ns per (key, KV
             * head). */
            const int8_t *qk = q;
            __asm__("" : "+r"(qk));
#pragma GCC unroll 4
            for (int g = 0; g < G; g++) {
                const __m256i qv = _mm256_loadu_si256(
                    (const __m256i *)(const void *)(qk + (size_t)g * hd + 32 * c));
                const __m256i p = _mm256_maddubs_epi16(ka, _mm256_sign_epi8(qv, kv));
                d[g][k] = _mm256_add_epi32(d[g][k], _mm256_madd_epi16(p, ones));
            }
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; g++)
        t[g] = _mm256_add_epi32(_mm256_unpacklo_epi32(d[g][0], d[g][1]),
                                _mm256_unpackhi_epi32(d[g][0], d[g][1]));
}

/* out[g] lane k = sum_e q[g * hd + e] * kr[k][e], for G <= 3 int8 query
 * vectors (hd apart) and 4 int8 key rows: two pairs of keys, each folded
 * once as it is done, so at most G x 2 sums are live (no spills). */
static inline __attribute__((always_inline)) void kq8_dot4(const int8_t *q, const char *const *kr,
                                                           const int hd, const int G, __m128i *out)
{
    __m256i t0[3], t1[3];
    kq8_dot2(q, kr[0], kr[1], hd, G, t0);
    kq8_dot2(q, kr[2], kr[3], hd, G, t1);
#pragma GCC unroll 4
    for (int g = 0; g < G; g++) {
        /* per half: the four keys' partial sums */
        const __m256i u = _mm256_add_epi32(_mm256_unpacklo_epi64(t0[g], t1[g]),
                                           _mm256_unpackhi_epi64(t0[g], t1[g]));
        out[g] = _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
    }
}

#if defined(__AVX512BW__) && defined(__AVX512VNNI__)
/* With AVX512-VNNI, for head_dim a multiple of KQ8_ZW, 16 keys at a time
 * with the keys in lanes (kq8z_dot16, below), so no fold at all. */
#define KQ8_ZW 64

/* -128 * sum_e q[e] for one int8 query vector: what kq8z_dot16 adds to
 * its sums, which take k + 128 as the unsigned operand.  Taken once per
 * query vector of a tile (kern_body's qb), not per chunk and head pass:
 * bench_attention (e) q8 1.02-1.04x, decode 32 x 4096 from memory
 * 1.00-1.05x (the Zen 5, both kernels in one process, BENCHMARKS.md). */
static inline int32_t kq8z_qbias(const int8_t *q, const int hd)
{
    int32_t sum = 0;
    for (int e = 0; e < hd; e++)
        sum += q[e];
    return -128 * sum;
}

/* out[g] lane k = sum_e q[g * hd + e] * (kr[k] + off)[e], for 16 int8 key
 * rows and G <= 3 int8 query vectors: the keys in lanes, with no fold per
 * key.  Per 64 bytes of the rows, taken four rows at a time, and per
 * 128-bit lane L of the vectors (32-bit words 4L .. 4L + 3 of each row,
 * word j holding elements 4j .. 4j + 3):
 *   - xor 0x80 makes each row's bytes k + 128, unsigned;
 *   - two rounds of unpacks (8 per four rows, shared by the heads) give
 *     b[m] with word 4L + m of the four rows in lane L;
 *   - per head, qw[m] holds q's word 4L + m in all four words of lane L
 *     (one vpermd of q per m and head, per call), so one vpdpbusd of b[m]
 *     by qw[m] adds (k + 128) * q over word 4L + m of each of the four
 *     rows: four of them, m = 0 .. 3, and each row's lane L sums its lane's
 *     16 elements;
 *   - the four lanes are added at the end, per head: a 4 x 4 transpose of
 *     128-bit lanes over the four groups of rows (6 shuffles, 3 adds), so
 *     lane k of out is key k.
 * Adding bias[g] (kq8z_qbias: -128 * sum q) leaves sum q * k, exact (every
 * partial sum is below 255 * 127 * 512 < 2^31 in size, the result below
 * 2^24): the scores equal kq8_dot4's bit for bit.  Per key, for three
 * heads: 3 vpdpbusd, 2 unpacks, about 2 shuffles or permutes and a
 * load.  It replaced a four-key vpdpbusd version (per key |k| and k's sign
 * as a mask, per head q negated where k < 0 and one vpdpbusd, each
 * head's four sums folded as kq8_dot4's: 9 instructions per
 * key plus about 3 per head for the fold).  A full 16 x 16 transpose of
 * the words instead (64 shuffles per 16 keys, q's words broadcast) was
 * slower.  Measured on the Zen 5 (bench_attention (e), 1 x 1024, K/V in
 * L2, one thread, six alternated rounds): q8 decode 6.4-6.9 ns per (key,
 * KV head) against 7.6-8.0 with the four-key version, 6.9-7.4 with the
 * full transpose. */
static inline __attribute__((always_inline)) void kq8z_dot16(const int8_t *q, const char *const *kr,
                                                             size_t off, const int hd, const int G,
                                                             const __m512i *bias, __m512i *out)
{
    const __m512i x80 = _mm512_set1_epi8((char)0x80);
    __m512i acc[3][4]; /* [head][group of four rows] */
#pragma GCC unroll 4
    for (int g = 0; g < G; g++)
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            acc[g][i] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int c = 0; c < hd / KQ8_ZW; c++) {
        __m512i qw[3][4];
#pragma GCC unroll 4
        for (int g = 0; g < G; g++) {
            const __m512i qv = _mm512_loadu_si512((const void *)(q + (size_t)g * hd + 64 * c));
#pragma GCC unroll 4
            for (int m = 0; m < 4; m++)
                qw[g][m] = _mm512_permutexvar_epi32(
                    _mm512_set_epi32(12 + m, 12 + m, 12 + m, 12 + m, 8 + m, 8 + m, 8 + m, 8 + m,
                                     4 + m, 4 + m, 4 + m, 4 + m, m, m, m, m),
                    qv);
        }
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            __m512i r[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                r[k] = _mm512_xor_si512(
                    _mm512_loadu_si512((const void *)(kr[4 * i + k] + off + 64 * c)), x80);
            const __m512i l0 = _mm512_unpacklo_epi32(r[0], r[1]);
            const __m512i h0 = _mm512_unpackhi_epi32(r[0], r[1]);
            const __m512i l1 = _mm512_unpacklo_epi32(r[2], r[3]);
            const __m512i h1 = _mm512_unpackhi_epi32(r[2], r[3]);
            const __m512i b[4] = {_mm512_unpacklo_epi64(l0, l1), _mm512_unpackhi_epi64(l0, l1),
                                  _mm512_unpacklo_epi64(h0, h1), _mm512_unpackhi_epi64(h0, h1)};
#pragma GCC unroll 4
            for (int m = 0; m < 4; m++)
#pragma GCC unroll 4
                for (int g = 0; g < G; g++)
                    acc[g][i] = _mm512_dpbusd_epi32(acc[g][i], b[m], qw[g][m]);
        }
    }
    /* lane L of acc[g][i] holds rows 4i .. 4i + 3's sums over lane L: add
     * lanes 0 + 2 and 1 + 3 of two groups at a time, then the halves */
#pragma GCC unroll 4
    for (int g = 0; g < G; g++) {
        const __m512i u01 = _mm512_add_epi32(_mm512_shuffle_i32x4(acc[g][0], acc[g][1], 0x44),
                                             _mm512_shuffle_i32x4(acc[g][0], acc[g][1], 0xee));
        const __m512i u23 = _mm512_add_epi32(_mm512_shuffle_i32x4(acc[g][2], acc[g][3], 0x44),
                                             _mm512_shuffle_i32x4(acc[g][2], acc[g][3], 0xee));
        out[g] = _mm512_add_epi32(bias[g], _mm512_add_epi32(_mm512_shuffle_i32x4(u01, u23, 0x88),
                                                            _mm512_shuffle_i32x4(u01, u23, 0xdd)));
    }
}
#endif

#endif /* FOLIO_ATTN_KERN_Q8DOT_H */
