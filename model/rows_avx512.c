/*
 * model/rows_avx512.c — one row of activations against F32, F16 or BF16
 * weight rows read in place, with AVX-512 (contract: model/rows_avx512.h).
 *
 * This is single-stream decode's product: every byte of W is used once, so
 * what bounds it is how fast W streams in, and a kernel that does its
 * arithmetic in 256-bit halves (matmul.c's AVX2 fused rows) is already the
 * bottleneck on a core that reads 25-30 GB/s: widening BF16 takes a
 * zero-extend, a shift and an FMA per 8 elements there, per 16 here.
 *
 * Layout walked: the band [n0, n1) of W's rows is one contiguous range of
 * bytes.  Rows go four at a time; each takes a cache line of W per step
 * (16 floats, or 32 16-bit values) into two accumulators, so a group has
 * eight independent FMA chains and four streams in flight, and the next
 * group's lines are prefetched in step with the current ones.  The tail of
 * K (its last K % 32 columns, and every column of a last group of fewer
 * than four rows) goes through masked loads: masked-off lanes read as
 * zero and add nothing, and the sums run in the same order as the main
 * loop's, so a row's result does not depend on its group.  Each row's sum is its two accumulators
 * added, then reduced across lanes; the order differs from the AVX2 and plain kernels', so results
 * agree with theirs to rounding, not bit for bit (this path is never used with
 * cfg.batch_invariant).
 *
 * Measured on the AVX-512 Zen 5 (2 threads, a 200 MB band of rows of 2048,
 * 8 alternated rounds): BF16 and F16 at 45-59 GB/s where a plain sum of
 * the same bytes read 48-58, F32 at 65-96% of it (median 86%); walking
 * one row at a time instead (one sequential stream, four accumulators)
 * read 37-44, and two lines per row per step 34-47.
 */
#include "rows_avx512.h"

#include <immintrin.h>

enum { RK_F32, RK_F16, RK_BF16 }; /* element kinds of W */

/* 16 elements of W from element k of row w as f32, lanes outside m read as
 * zero. */
static inline __m512 load16(int kind, const void *w, int32_t k, __mmask16 m)
{
    const bool all = m == (__mmask16)0xffff; /* a constant in the main loop: plain loads */
    if (kind == RK_F32)
        return all ? _mm512_loadu_ps((const float *)w + k)
                   : _mm512_maskz_loadu_ps(m, (const float *)w + k);
    const uint16_t *p = (const uint16_t *)w + k;
    const __m256i h = all ? _mm256_loadu_si256((const __m256i *)p) : _mm256_maskz_loadu_epi16(m, p);
    if (kind == RK_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

/* The first n of 16 lanes (none for n <= 0). */
static inline __mmask16 tail_mask(int32_t n)
{
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* The one body of both entry points, inlined into each with kind a
 * constant, so each is compiled for its element type (not inlined, the
 * kind tests stay in the inner loop: measured 10-20% slower). */
static inline __attribute__((always_inline)) void rows_m1(int kind, const void *W, int32_t K,
                                                          int32_t n0, int32_t n1, const float *A,
                                                          float beta, float *C)
{
    const size_t es = kind == RK_F32 ? 4 : 2, rs = (size_t)K * es; /* bytes per row */
    const int32_t kfull = K & ~31;
    for (int32_t n = n0; n < n1; n += 4) {
        const int32_t g = n1 - n < 4 ? n1 - n : 4; /* rows in this group */
        const char *w = (const char *)W + (size_t)n * rs;
        const char *next = w + 4 * rs;
        const bool pf = n + 4 < n1;
        __m512 acc[4][2];
        for (int i = 0; i < 4; i++)
            acc[i][0] = acc[i][1] = _mm512_setzero_ps();
        int32_t k = 0;
        if (g == 4) {
            for (; k < kfull; k += 32) {
                if (pf) /* the next group's 32 elements of each row: 1 or 2 lines */
                    for (int i = 0; i < 4; i++)
                        for (size_t o = 0; o < 32 * es; o += 64)
                            _mm_prefetch(next + (size_t)i * rs + (size_t)k * es + o, _MM_HINT_T0);
                const __m512 a0 = _mm512_loadu_ps(A + k), a1 = _mm512_loadu_ps(A + k + 16);
                for (int i = 0; i < 4; i++) {
                    const char *wi = w + (size_t)i * rs;
                    acc[i][0] = _mm512_fmadd_ps(load16(kind, wi, k, 0xffff), a0, acc[i][0]);
                    acc[i][1] = _mm512_fmadd_ps(load16(kind, wi, k + 16, 0xffff), a1, acc[i][1]);
                }
            }
        }
        /* the tail of K, and every column of a last group of < 4 rows */
        for (; k < K; k += 32) {
            const __mmask16 m0 = tail_mask(K - k), m1 = tail_mask(K - k - 16);
            const __m512 a0 = _mm512_maskz_loadu_ps(m0, A + k);
            const __m512 a1 = K - k > 16 ? _mm512_maskz_loadu_ps(m1, A + k + 16) : a0;
            for (int i = 0; i < g; i++) {
                const char *wi = w + (size_t)i * rs;
                acc[i][0] = _mm512_fmadd_ps(load16(kind, wi, k, m0), a0, acc[i][0]);
                if (K - k > 16)
                    acc[i][1] = _mm512_fmadd_ps(load16(kind, wi, k + 16, m1), a1, acc[i][1]);
            }
        }
        for (int i = 0; i < g; i++) {
            const float s = _mm512_reduce_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]));
            C[n + i] = beta != 0.0f ? C[n + i] + s : s;
        }
    }
}

void rows_m1_16_avx512(bool bf16, const uint16_t *W, int32_t K, int32_t n0, int32_t n1,
                       const float *A, float beta, float *C)
{
    if (bf16)
        rows_m1(RK_BF16, W, K, n0, n1, A, beta, C);
    else
        rows_m1(RK_F16, W, K, n0, n1, A, beta, C);
}

void rows_m1_f32_avx512(const float *W, int32_t K, int32_t n0, int32_t n1, const float *A,
                        float beta, float *C)
{
    rows_m1(RK_F32, W, K, n0, n1, A, beta, C);
}
