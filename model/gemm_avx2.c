/*
 * model/gemm_avx2.c — the 6 x 16 f32 microkernel of model/gemm.c with
 * AVX2 + FMA (contract in model/gemm.h; reference: gemm_ukr_plain).
 *
 * Twelve ymm accumulators hold C's 6 x 16 tile; each k loads the panel's
 * 16 floats of W (two ymm), broadcasts A's 6 values one at a time, and
 * issues 12 FMAs: two FMA pipes, four cycles of latency, so 12 independent
 * chains keep both pipes busy, and the 8 loads per k fit the load ports.
 * A full tile is loaded from and stored to C directly; a partial one (the
 * last rows of A, the last columns of W) goes through a local tile.
 */
#include "gemm.h"

#include <immintrin.h>
#include <string.h>

/* gemm_gemv_avx2 prefetches this many k (x 64 bytes) ahead: 16 KiB,
 * measured best of 16..1024 at M = 1 (within a few percent). */
#define GEMV_PF 256

#define ROW(i)                                                                                     \
    do {                                                                                           \
        const __m256 a = _mm256_broadcast_ss(Ap + (i));                                            \
        c##i##0 = _mm256_fmadd_ps(a, b0, c##i##0);                                                 \
        c##i##1 = _mm256_fmadd_ps(a, b1, c##i##1);                                                 \
    } while (0)

void gemm_ukr_avx2(int32_t kc, const float *Ap, const float *Bp, float *C, int32_t ldc, int mr,
                   int nr, bool acc, const float *pf)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    if (pf) /* the next panel, one line of it (one k) per k */
        for (int32_t k = 0; k < kc; k++, Ap += GEMM_MR, Bp += GEMM_NR, pf += GEMM_NR) {
            _mm_prefetch((const char *)pf, _MM_HINT_T0);
            const __m256 b0 = _mm256_load_ps(Bp), b1 = _mm256_load_ps(Bp + 8);
            ROW(0);
            ROW(1);
            ROW(2);
            ROW(3);
            ROW(4);
            ROW(5);
        }
    else
        for (int32_t k = 0; k < kc; k++, Ap += GEMM_MR, Bp += GEMM_NR) {
            const __m256 b0 = _mm256_load_ps(Bp), b1 = _mm256_load_ps(Bp + 8);
            ROW(0);
            ROW(1);
            ROW(2);
            ROW(3);
            ROW(4);
            ROW(5);
        }
    const __m256 r[GEMM_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                                  {c30, c31}, {c40, c41}, {c50, c51}};
    if (mr == GEMM_MR && nr == GEMM_NR) {
        for (int i = 0; i < GEMM_MR; i++) {
            float *c = C + (size_t)i * ldc;
            __m256 v0 = r[i][0], v1 = r[i][1];
            if (acc) {
                v0 = _mm256_add_ps(v0, _mm256_loadu_ps(c));
                v1 = _mm256_add_ps(v1, _mm256_loadu_ps(c + 8));
            }
            _mm256_storeu_ps(c, v0);
            _mm256_storeu_ps(c + 8, v1);
        }
        return;
    }
    float t[GEMM_MR][GEMM_NR];
    for (int i = 0; i < GEMM_MR; i++) {
        _mm256_storeu_ps(t[i], r[i][0]);
        _mm256_storeu_ps(t[i] + 8, r[i][1]);
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float *c = C + (size_t)i * ldc + j;
            *c = acc ? *c + t[i][j] : t[i][j];
        }
}

/* 8 x 8 blocks: rows j0..j0+7 at k..k+7 become panel rows k..k+7, lanes
 * j0..j0+7 (unpack pairs, then quads, then 128-bit halves). */
void gemm_transpose16_avx2(const float *rows, int32_t kc, float *panel)
{
    for (int32_t k = 0; k < kc; k += 8)
        for (int j0 = 0; j0 < GEMM_NR; j0 += 8) {
            __m256 r[8], t[8];
            for (int j = 0; j < 8; j++)
                r[j] = _mm256_loadu_ps(rows + (size_t)(j0 + j) * kc + k);
            for (int j = 0; j < 8; j += 2) {
                t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
                t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
            }
            for (int j = 0; j < 8; j += 4) {
                r[j] = _mm256_shuffle_ps(t[j], t[j + 2], 0x44);
                r[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], 0xee);
                r[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0x44);
                r[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0xee);
            }
            for (int i = 0; i < 4; i++) {
                float *p = panel + (size_t)(k + i) * GEMM_NR + j0;
                _mm256_storeu_ps(p, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
                _mm256_storeu_ps(p + 4 * GEMM_NR, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
            }
        }
}

/* Each panel is K x 16 contiguous floats: four k at a time into eight
 * accumulators (two per k, independent chains), folded at the end. */
void gemm_gemv_avx2(const float *P, int32_t K, int32_t n0, int32_t n1, const float *a, float beta,
                    float *c)
{
    for (int32_t n = n0; n < n1; n += GEMM_NR) {
        const float *p = P + (size_t)n * K;
        __m256 s[8];
        for (int i = 0; i < 8; i++)
            s[i] = _mm256_setzero_ps();
        int32_t k = 0;
        for (; k + 4 <= K; k += 4, p += 4 * GEMM_NR) {
            _mm_prefetch((const char *)(p + GEMV_PF * GEMM_NR), _MM_HINT_T0);
            _mm_prefetch((const char *)(p + GEMV_PF * GEMM_NR + 32), _MM_HINT_T0);
            for (int i = 0; i < 4; i++) {
                const __m256 x = _mm256_broadcast_ss(a + k + i);
                s[2 * i] = _mm256_fmadd_ps(x, _mm256_load_ps(p + i * GEMM_NR), s[2 * i]);
                s[2 * i + 1] =
                    _mm256_fmadd_ps(x, _mm256_load_ps(p + i * GEMM_NR + 8), s[2 * i + 1]);
            }
        }
        for (; k < K; k++, p += GEMM_NR) {
            const __m256 x = _mm256_broadcast_ss(a + k);
            s[0] = _mm256_fmadd_ps(x, _mm256_load_ps(p), s[0]);
            s[1] = _mm256_fmadd_ps(x, _mm256_load_ps(p + 8), s[1]);
        }
        const __m256 lo = _mm256_add_ps(_mm256_add_ps(s[0], s[2]), _mm256_add_ps(s[4], s[6]));
        const __m256 hi = _mm256_add_ps(_mm256_add_ps(s[1], s[3]), _mm256_add_ps(s[5], s[7]));
        float t[GEMM_NR];
        _mm256_storeu_ps(t, lo);
        _mm256_storeu_ps(t + 8, hi);
        for (int j = 0; j < GEMM_NR && n + j < n1; j++)
            c[n + j] = beta != 0.0f ? c[n + j] + t[j] : t[j];
    }
}
