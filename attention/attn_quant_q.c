/*
 * attention/attn_quant_q.c — the query quantizer of q8 attention
 * (attn_q8_quantize_q, contract in folio/attention.h), shared by the
 * reference and every kernel, so that all of them compute the same int8
 * query and scale.
 *
 * Two passes over the n values y = x * scale: the largest |y| and whether
 * all are finite, then each y rounded to int8 against it.  Both passes run
 * 8 values at a time (GCC vectors for the first; AVX2 for the second where
 * the build has it), with the tail one by one.  Their results equal, bit
 * for bit, the plain one-value-at-a-time loops that tests/test_attention.c
 * keeps as quantize_q_plain and holds them to.  The per-query cost
 * matters: a decode row quantizes every query head once per tile, against
 * as few as a hundred keys.
 */
#include "folio/attention.h"

#include <float.h>
#include <math.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

/* 8 floats as GCC vectors (AVX in a native build, SSE pairs otherwise) */
typedef float qf8 __attribute__((vector_size(32)));
typedef float qf8_u __attribute__((vector_size(32), aligned(4), may_alias));
typedef int32_t qi8 __attribute__((vector_size(32)));

float attn_q8_quantize_q(const float *x, int32_t n, float scale, int8_t *out)
{
    /* amax and whether every |y| is finite, 8 lanes at a time: a maximum
     * and a flag, the same in any order.  (As one scalar loop, the max's
     * dependency chain made this 18% of q8 decode's time at a 128-key
     * context on a Zen 3: bench_attention --only cache.)  Lane maxima keep
     * the old value unless a is larger, so a NaN never enters them. */
    qf8 mx = {0};
    qi8 bad = {0};
    int32_t e = 0;
    for (; e + 8 <= n; e += 8) {
        const qf8 a = (qf8)((qi8)(*(const qf8_u *)(const void *)(x + e) * scale) & 0x7fffffff);
        bad |= ~(a <= FLT_MAX); /* inf or NaN */
        const qi8 gt = a > mx;
        mx = (qf8)(((qi8)a & gt) | ((qi8)mx & ~gt));
    }
    float amax = 0;
    int finite = 1;
    for (int l = 0; l < 8; l++) {
        amax = mx[l] > amax ? mx[l] : amax;
        finite &= bad[l] == 0;
    }
    for (; e < n; e++) {
        const float a = fabsf(x[e] * scale);
        finite &= isfinite(a);
        amax = a > amax ? a : amax;
    }
    const float inv = finite && amax > 0 ? 127.0f / amax : 0.0f;
    if (inv > 0 && inv <= FLT_MAX) {
        /* every y * inv is finite and at most 127 give or take a
         * rounding: no NaN case, so the loop vectorizes as plain clamps.
         * With AVX2, 8 at a time by vcvtps2dq, which rounds in the
         * current mode as rintf does, and two saturating packs. */
        e = 0;
#ifdef __AVX2__
        const __m256 vs = _mm256_set1_ps(scale), vinv = _mm256_set1_ps(inv);
        for (; e + 8 <= n; e += 8) {
            const __m256 y = _mm256_mul_ps(_mm256_loadu_ps(x + e), vs);
            __m256i r = _mm256_cvtps_epi32(_mm256_mul_ps(y, vinv));
            r = _mm256_max_epi32(_mm256_min_epi32(r, _mm256_set1_epi32(127)),
                                 _mm256_set1_epi32(-127));
            const __m128i w =
                _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
            _mm_storel_epi64((__m128i *)(void *)(out + e), _mm_packs_epi16(w, w));
        }
#endif
        for (; e < n; e++) {
            float r = rintf(x[e] * scale * inv);
            r = r > 127.0f ? 127.0f : r;
            r = r < -127.0f ? -127.0f : r;
            out[e] = (int8_t)(int32_t)r;
        }
    } else /* zeros, non-finite y (inv 0), or inf from a subnormal amax */
        for (e = 0; e < n; e++) {
            const float r = rintf(x[e] * scale * inv);
            out[e] = (int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : r == r ? r : 0);
        }
    return finite ? amax / 127.0f : NAN;
}
