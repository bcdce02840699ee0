/*
 * model/quant_x86.h — small AVX2 helpers shared by the x86 kernel files of
 * model/quant (quant_avx2.c, quant_avx512.c).  Static inline: each file
 * compiles them with its own target flags (both include AVX2 and F16C).
 */
#ifndef FOLIO_MODEL_QUANT_X86_H
#define FOLIO_MODEL_QUANT_X86_H

#include <immintrin.h>
#include <stdint.h>

/* One IEEE half to float (F16C). */
static inline float h2f(uint16_t h)
{
    return _cvtsh_ss(h);
}

/* Sum of the 8 lanes of v. */
static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#endif
