/*
 * model/quant_rows_avx512.c — activation rows with AVX-512 F/BW (+ F16C):
 * quant_rows' Q8_0, Q8_0S, Q8_1 and Q8_K quantizers (quant.c picks them
 * where it runs the AVX-512 kernels), built in the same library as
 * quant_avx512.c with its flags.
 *
 * Each gives the scalar quantizer's bytes (quant.c's from_float of the dot
 * type), which test_quant's test_rows_isas checks for every ISA: the block's
 * max |x| (exact in any order), d = amax / 127 and id = 1 / d as the scalar
 * code computes them, then per element v = x * id rounded half away from
 * zero as roundf does: trunc(v), plus or minus one where v - trunc(v) (an
 * exact difference) reaches +-0.5; int32 to int8 with signed saturation
 * (|v| <= 127 + rounding, so nothing saturates).  Block sums (Q8_0S, Q8_1,
 * Q8_K's bsums) are integer sums of the codes, exact in any order.
 *
 * Against quant_avx2.c's rows (8 lanes, a pack and a permute per 32 codes,
 * Q8_K's bsums summed byte by byte): 16 lanes, the rounding's corrections
 * as masked adds, the narrowing by vpmovsdb, and the 16 bsums of a Q8_K
 * block folded from the code vectors in one tree.  Measured on the Zen 5
 * (bench_quant --threads 1 --reps 21 --isa avx2 | avx512, its quant_rows
 * line, three alternated runs; BENCHMARKS.md): Q8_K rows 1.8-2.0x the
 * AVX2 ones (M = 256, K = 2048: 0.096-0.103 against 0.189-0.197 ms), Q8_0
 * rows 1.6-1.7x.
 */
#include <immintrin.h>
#include <stdint.h>

#include "quant_internal.h"

#define AI static inline __attribute__((always_inline))

/* max |x| over nv vectors of 16 floats (max(m, |x|): the AVX2 order) */
AI float absmax16n(const float *x, int nv)
{
    __m512 m = _mm512_setzero_ps();
    for (int j = 0; j < nv; j++)
        m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * j)));
    return _mm512_reduce_max_ps(m);
}

/* 16 floats times id to int32 codes, rounded half away from zero */
AI __m512i codes16(const float *x, __m512 vid)
{
    const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x), vid);
    const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(v, t);
    const __m512 one = _mm512_set1_ps(1.0f);
    const __mmask16 up = _mm512_cmp_ps_mask(f, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __mmask16 dn = _mm512_cmp_ps_mask(f, _mm512_set1_ps(-0.5f), _CMP_LE_OQ);
    const __m512 r = _mm512_mask_sub_ps(_mm512_mask_add_ps(t, up, t, one), dn, t, one);
    return _mm512_cvttps_epi32(r);
}

/* id as the scalar quantizer has it: 1 / (amax / 127), 0 for a zero block */
AI float inv_scale(float amax, float *d)
{
    *d = amax / 127.0f;
    return *d != 0.0f ? 1.0f / *d : 0.0f;
}

/* One block of 32 floats: codes into qs, d returned in *d, the codes' sum */
AI int32_t block32(const float *x, int8_t *qs, float *d)
{
    const __m512 vid = _mm512_set1_ps(inv_scale(absmax16n(x, 2), d));
    const __m512i r0 = codes16(x, vid), r1 = codes16(x + 16, vid);
    _mm_storeu_si128((__m128i *)(void *)qs, _mm512_cvtsepi32_epi8(r0));
    _mm_storeu_si128((__m128i *)(void *)(qs + 16), _mm512_cvtsepi32_epi8(r1));
    return _mm512_reduce_add_epi32(_mm512_add_epi32(r0, r1));
}

AI uint16_t half_of(float d)
{
    return _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
}

void quant__rows_q8_0_avx512(const float *x, void *dst, int64_t n)
{
    struct blk_q8_0 *y = dst;
    float d;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        (void)block32(x, y[b].qs, &d);
        y[b].d = half_of(d);
    }
}

void quant__rows_q8_0s_avx512(const float *x, void *dst, int64_t n)
{
    struct blk_q8_0s *y = dst;
    float d;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        y[b].s = (int16_t)block32(x, y[b].qs, &d);
        y[b].d = half_of(d);
    }
}

/* s = the codes' sum times the unrounded d, as a half float (as the
 * scalar quantizer) */
void quant__rows_q8_1_avx512(const float *x, void *dst, int64_t n)
{
    struct blk_q8_1 *y = dst;
    float d;
    for (int64_t b = 0; b < n / QK8_1; b++, x += QK8_1) {
        const int32_t s = block32(x, y[b].qs, &d);
        y[b].d = half_of(d);
        y[b].s = half_of(d * (float)s);
    }
}

/* Lane j of the result: the sum of the 16 lanes of r[j]. Two levels of
 * in-lane unpack + add leave, in 128-bit lane L of u[i], the lane-L sums
 * of r[4i .. 4i + 3]; the 128-bit lanes are then transposed and added. */
AI __m512i sums16(const __m512i *r)
{
    __m512i t[8], u[4];
    for (int i = 0; i < 8; i++)
        t[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]),
                                _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]));
    for (int i = 0; i < 4; i++)
        u[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * i], t[2 * i + 1]),
                                _mm512_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
    /* w01: (u0.L0 + u0.L1, u0.L2 + u0.L3, u1.L0 + u1.L1, u1.L2 + u1.L3) */
    const __m512i w01 = _mm512_add_epi32(_mm512_shuffle_i32x4(u[0], u[1], 0x88),
                                         _mm512_shuffle_i32x4(u[0], u[1], 0xdd));
    const __m512i w23 = _mm512_add_epi32(_mm512_shuffle_i32x4(u[2], u[3], 0x88),
                                         _mm512_shuffle_i32x4(u[2], u[3], 0xdd));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(w01, w23, 0x88),
                            _mm512_shuffle_i32x4(w01, w23, 0xdd));
}

void quant__rows_q8_k_avx512(const float *x, void *dst, int64_t n)
{
    struct blk_q8_k *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float d;
        const __m512 vid = _mm512_set1_ps(inv_scale(absmax16n(x, QK_K / 16), &d));
        y[b].d = d;
        __m512i r[QK_K / 16];
        for (int j = 0; j < QK_K / 16; j++) {
            r[j] = codes16(x + 16 * j, vid);
            _mm_storeu_si128((__m128i *)(void *)(y[b].qs + 16 * j), _mm512_cvtsepi32_epi8(r[j]));
        }
        _mm256_storeu_si256((__m256i *)(void *)y[b].bsums, _mm512_cvtepi32_epi16(sums16(r)));
    }
}
