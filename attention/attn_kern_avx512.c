/*
 * attention/attn_kern_avx512.c — the inner kernel for AVX-512F (with its
 * F16C-style _mm512_cvtph_ps): attn_kern_body.h with 16-lane vectors.
 * Built with -mavx512f -mfma -mf16c; only called after the dispatcher saw
 * AVX-512F at run time.
 */
#include <immintrin.h>

#define VW        16
#define KERN_NAME attn__kern_avx512

#define vload_h(p) ((vf)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p))))
#define vhsum(v)   _mm512_reduce_add_ps((__m512)(v))

#include "attn_kern_body.h"
