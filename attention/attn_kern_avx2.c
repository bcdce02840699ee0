/*
 * attention/attn_kern_avx2.c — the inner kernel for AVX2 + FMA + F16C
 * (attn_kern_body.h with 8-lane vectors).  Built with -mavx2 -mfma -mf16c
 * -mno-avx512f; only called after the dispatcher saw those at run time.
 * K/V widen in registers: f16 by vcvtph2ps, bf16 by zero extension and a
 * 16-bit shift, q8 V by vpmovsxbd + vcvtdq2ps; q8 scores are int8 dot
 * products (vpmaddubsw + vpmaddwd) when head_dim is a multiple of 32.
 */
#include <immintrin.h>

#include "attn_internal.h"

#define VW        8
#define KERN_NAME attn__kern_avx2

#define vload_h(p) ((vf)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p))))
#define vload_bf(p)                                                                                \
    ((vf)_mm256_castsi256_ps(_mm256_slli_epi32(                                                    \
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p))), 16)))
#define vload_q8(p)                                                                                \
    ((vf)_mm256_cvtepi32_ps(                                                                       \
        _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p)))))

static inline float hsum8(__m256 v)
{
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}
#define vhsum(v) hsum8((__m256)(v))

/* q8 scores: int8 query . int8 key, 32 elements per step, by the sign
 * trick: vpmaddubsw takes |q| (unsigned) and k with q's sign (signed);
 * pairs sum to at most 2 * 127 * 127 < 2^15 (stored keys are in
 * [-127, 127]), vpmaddwd by ones widens to 8 int32 sums, which are
 * converted to float (exact, < 2^24) for the body's fold. */
#define KQ8_W 32
typedef struct {
    __m256i s[ATTN__HD_MAX / 32], a[ATTN__HD_MAX / 32]; /* q and |q|, head_dim / 32 of each */
} kq8_t;

static inline __attribute__((always_inline)) void kq8_load(kq8_t *t, const int8_t *q, int hd)
{
#pragma GCC unroll 16
    for (int c = 0; c < hd / 32; c++) {
        t->s[c] = _mm256_loadu_si256((const __m256i *)(const void *)(q + 32 * c));
        t->a[c] = _mm256_abs_epi8(t->s[c]);
    }
}

static inline __attribute__((always_inline)) __m256 kq8_dot(const kq8_t *t, const char *k, int hd)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int c = 0; c < hd / 32; c++) {
        const __m256i kv = _mm256_loadu_si256((const __m256i *)(const void *)(k + 32 * c));
        const __m256i p = _mm256_maddubs_epi16(t->a[c], _mm256_sign_epi8(kv, t->s[c]));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
    }
    return _mm256_cvtepi32_ps(acc);
}

#include "attn_kern_body.h"
