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

/* -128 * sum_e q[g * hd + e] in every lane, for G int8 query vectors: where
 * kq8z_dot16's sums start, since they take k + 128 as the unsigned operand. */
static inline __attribute__((always_inline)) void kq8z_bias(const int8_t *q, const int hd,
                                                            const int G, __m512i *bias)
{
    const __m512i one = _mm512_set1_epi8(1);
#pragma GCC unroll 4
    for (int g = 0; g < G; g++) {
        __m512i t = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int c = 0; c < hd / KQ8_ZW; c++)
            t = _mm512_dpbusd_epi32(
                t, one, _mm512_loadu_si512((const void *)(q + (size_t)g * hd + 64 * c)));
        bias[g] = _mm512_set1_epi32(-128 * _mm512_reduce_add_epi32(t));
    }
}

/* out[g] lane k = sum_e q[g * hd + e] * (kr[k] + off)[e], for 16 int8 key
 * rows and G <= 3 int8 query vectors: the keys in lanes.  Per 64 bytes of
 * the rows, the 16 x 16 matrix of their 32-bit words (word j of row k:
 * elements 4j .. 4j + 3) is transposed in registers, 64 shuffles shared by
 * the G heads, so that word j of all 16 keys is one vector; xor 0x80 has
 * made its bytes k + 128, unsigned, and one vpdpbusd per word and head adds
 * (k + 128) * q over the word's four elements, q's word broadcast.  Each
 * sum starts at bias[g] (kq8z_bias: -128 * sum q), which leaves sum q * k,
 * exact (|sum| < 2^31 at every step): the scores equal kq8_dot4's bit for
 * bit, with no fold per head.  Per key, for three heads: 3 vpdpbusd and
 * their broadcasts, 4 shuffles and a load.  It replaced a four-key
 * vpdpbusd version (per key |k| and k's sign as a mask, per head q negated
 * where k < 0 and one vpdpbusd, each head's four sums folded as kq8_dot4's:
 * 9 instructions per key plus about 3 per head for the fold).  Measured on
 * the Zen 5 (bench_attention (e), 1 x 1024, K/V in L2, one thread, five
 * alternated rounds): q8 decode 7.4-7.6 ns per (key, KV head) against
 * 8.1-8.3, the scores' share (the kernel without them: 5.3-5.4) down from
 * about 2.8 ns to 2.1. */
static inline __attribute__((always_inline)) void kq8z_dot16(const int8_t *q, const char *const *kr,
                                                             size_t off, const int hd, const int G,
                                                             const __m512i *bias, __m512i *out)
{
    const __m512i x80 = _mm512_set1_epi8((char)0x80);
    __m512i acc[3][2]; /* two chains per head: even and odd words */
#pragma GCC unroll 4
    for (int g = 0; g < G; g++) {
        acc[g][0] = bias[g];
        acc[g][1] = _mm512_setzero_si512();
    }
#pragma GCC unroll 8
    for (int c = 0; c < hd / KQ8_ZW; c++) {
        __m512i r[16], a[16];
#pragma GCC unroll 16
        for (int k = 0; k < 16; k++)
            r[k] = _mm512_xor_si512(_mm512_loadu_si512((const void *)(kr[k] + off + 64 * c)), x80);
            /* per 128-bit lane L (words 4L .. 4L + 3 of every row): a[4i + m]
             * holds word 4L + m of rows 4i .. 4i + 3 */
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            const __m512i l0 = _mm512_unpacklo_epi32(r[4 * i], r[4 * i + 1]);
            const __m512i h0 = _mm512_unpackhi_epi32(r[4 * i], r[4 * i + 1]);
            const __m512i l1 = _mm512_unpacklo_epi32(r[4 * i + 2], r[4 * i + 3]);
            const __m512i h1 = _mm512_unpackhi_epi32(r[4 * i + 2], r[4 * i + 3]);
            a[4 * i + 0] = _mm512_unpacklo_epi64(l0, l1);
            a[4 * i + 1] = _mm512_unpackhi_epi64(l0, l1);
            a[4 * i + 2] = _mm512_unpacklo_epi64(h0, h1);
            a[4 * i + 3] = _mm512_unpackhi_epi64(h0, h1);
        }
        /* the 4 x 4 lanes of a[m], a[4 + m], a[8 + m], a[12 + m]
         * transposed: r[4L + m] lane i = a[4i + m] lane L, word 4L + m of
         * rows 4i .. 4i + 3, so r[j] is word j of every row */
#pragma GCC unroll 4
        for (int m = 0; m < 4; m++) {
            const __m512i c0 = _mm512_shuffle_i32x4(a[m], a[4 + m], 0x44);
            const __m512i c1 = _mm512_shuffle_i32x4(a[m], a[4 + m], 0xee);
            const __m512i c2 = _mm512_shuffle_i32x4(a[8 + m], a[12 + m], 0x44);
            const __m512i c3 = _mm512_shuffle_i32x4(a[8 + m], a[12 + m], 0xee);
            r[m] = _mm512_shuffle_i32x4(c0, c2, 0x88);
            r[4 + m] = _mm512_shuffle_i32x4(c0, c2, 0xdd);
            r[8 + m] = _mm512_shuffle_i32x4(c1, c3, 0x88);
            r[12 + m] = _mm512_shuffle_i32x4(c1, c3, 0xdd);
        }
        /* q's address made opaque, so its words are broadcast from L1
         * at each use rather than held in (and spilled from) 48 registers
         * across the calls of a chunk */
        const int8_t *qc = q + 64 * c;
        __asm__("" : "+r"(qc));
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++)
#pragma GCC unroll 4
            for (int g = 0; g < G; g++) {
                int32_t w;
                __builtin_memcpy(&w, qc + (size_t)g * hd + 4 * j, 4);
                acc[g][j & 1] = _mm512_dpbusd_epi32(acc[g][j & 1], r[j], _mm512_set1_epi32(w));
            }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; g++)
        out[g] = _mm512_add_epi32(acc[g][0], acc[g][1]);
}
#endif

#endif /* FOLIO_ATTN_KERN_Q8DOT_H */
