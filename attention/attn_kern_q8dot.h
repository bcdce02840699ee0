/*
 * attention/attn_kern_q8dot.h — q8 scores as int8 dot products with AVX2
 * integer instructions, for the kernels built with AVX2 (attn_kern_avx2.c,
 * and attn_kern_avx512.c, whose AVX-512 flags include AVX2), and with
 * AVX512-VNNI where the kernel is built for it (kq8z_dot4, below).
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
/* The same four keys' scores with AVX512-VNNI, 64 elements per step, for
 * head_dim a multiple of KQ8_ZW: per key |k| (vpabsb) and k's sign as a
 * mask (vpmovb2m) once, then per head q negated where k < 0 (a masked
 * vpsubb) and one vpdpbusd, which multiplies |k| (unsigned, <= 128) by
 * that signed q and adds each group of four products to an int32 lane
 * without saturation: exact, so the scores equal kq8_dot4's bit for bit.
 * The four keys' 16-lane sums per head are folded as in kq8_dot4.  Per
 * key and query head: 2 instructions on 64 elements where kq8_dot4 has 8
 * on 32.  Measured on the Zen 5 (bench_attention (e), K/V in L2, one
 * thread): q8 decode 1.15x faster per key than with kq8_dot4 (medians
 * of three alternated rounds, 8.6-8.7 against 9.9-10.0 ns). */
#define KQ8_ZW 64

static inline __attribute__((always_inline)) void kq8z_dot4(const int8_t *q, const char *const *kr,
                                                            const int hd, const int G, __m128i *out)
{
    __m512i d[3][4];
    const __m512i zero = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int g = 0; g < G; g++)
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            d[g][k] = zero;
#pragma GCC unroll 8
    for (int c = 0; c < hd / KQ8_ZW; c++) {
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m512i kv = _mm512_loadu_si512((const void *)(kr[k] + 64 * c));
            const __m512i ka = _mm512_abs_epi8(kv);
            const __mmask64 neg = _mm512_movepi8_mask(kv);
#pragma GCC unroll 4
            for (int g = 0; g < G; g++) {
                const __m512i qv = _mm512_loadu_si512((const void *)(q + (size_t)g * hd + 64 * c));
                d[g][k] = _mm512_dpbusd_epi32(d[g][k], ka, _mm512_mask_sub_epi8(qv, neg, zero, qv));
            }
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; g++) {
        /* per 128-bit lane: [a0 + a2, b0 + b2, a1 + a3, b1 + b3], then
         * the four keys' partial sums; then the four lanes added */
        const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(d[g][0], d[g][1]),
                                            _mm512_unpackhi_epi32(d[g][0], d[g][1]));
        const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(d[g][2], d[g][3]),
                                            _mm512_unpackhi_epi32(d[g][2], d[g][3]));
        const __m512i u =
            _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
        const __m256i h =
            _mm256_add_epi32(_mm512_castsi512_si256(u), _mm512_extracti64x4_epi64(u, 1));
        out[g] = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    }
}
#endif

#endif /* FOLIO_ATTN_KERN_Q8DOT_H */
