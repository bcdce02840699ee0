/*
 * attention/attn_kern_avx512.c — the inner kernel for AVX-512 (F, with its
 * F16C-style _mm512_cvtph_ps, BW and VNNI): attn_kern_body.h with 16-lane
 * vectors.  Built with -mavx512f -mavx512bw -mavx512vnni -mfma -mf16c; only
 * called after the dispatcher saw all of them at run time (an AVX-512 CPU
 * without VNNI, e.g. Skylake-SP, runs the AVX2 kernel).  K/V widen in
 * registers as in the AVX2 kernel; q8 scores are int8 dot products
 * (attn_kern_q8dot.h): vpdpbusd on 16 keys at a time for head_dim a
 * multiple of 64, else the AVX2 32-byte ones.
 */
#include <immintrin.h>

#define VW 16
#ifndef KERN_NAME /* attn_kern_avx512b.c names its own */
#define KERN_NAME attn__kern_avx512
#endif

#define vload_h(p) ((vf)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p))))
#define vload_bf(p)                                                                                \
    ((vf)_mm512_castsi512_ps(_mm512_slli_epi32(                                                    \
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p))), 16)))
#define vload_q8(p)                                                                                \
    ((vf)_mm512_cvtepi32_ps(                                                                       \
        _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p)))))

#include "attn_kern_q8dot.h"

#include "attn_kern_body.h"
