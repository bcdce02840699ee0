/*
 * attention/attn_kern_avx2.c — the inner kernel for AVX2 + FMA + F16C
 * (attn_kern_body.h with 8-lane vectors).  Built with -mavx2 -mfma -mf16c
 * -mno-avx512f; only called after the dispatcher saw those at run time.
 * K/V widen in registers: f16 by vcvtph2ps, bf16 by zero extension and a
 * 16-bit shift, q8 by vpmovsxbd + vcvtdq2ps; q8 scores are int8 dot
 * products (attn_kern_q8dot.h: vpmaddubsw + vpmaddwd).
 */
#include <immintrin.h>

#define VW        8
#define KERN_NAME attn__kern_avx2

#define vload_h(p) ((vf)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p))))
#define vload_bf(p)                                                                                \
    ((vf)_mm256_castsi256_ps(_mm256_slli_epi32(                                                    \
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p))), 16)))
#define vload_q8(p)                                                                                \
    ((vf)_mm256_cvtepi32_ps(                                                                       \
        _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p)))))

#include "attn_kern_q8dot.h"

#include "attn_kern_body.h"
