/*
 * model/gemm_avx512.c — the packed-weight f32 product with AVX-512F
 * (contract in model/gemm.h, gemm_run_avx512; W in gemm_pack_f32's
 * panels; reference: gemm_run with the plain microkernel).
 *
 * Up to 12 rows x 32 columns of C (two 16-column panels of W) live in 24
 * zmm accumulators.  Each k loads one 64-byte vector from each panel and
 * broadcasts A[i][k] straight from A's row-major rows (no packing of A:
 * the twelve rows' current cache lines stay in L1), then issues two FMAs
 * per row.  K is walked in blocks of 512 per panel pair: the pair's
 * k-block (64 KiB) stays in L2 while each block of rows reads it, A's rows
 * stay in L1/L2, and the first block of rows prefetches the next k-block
 * (or the next pair's first; W streams from memory).  The rows are cut
 * into blocks of near equal size (64 = 6 x 10-11, not 5 x 12 + 4: a short
 * block runs at a fraction of the rate); the band's last 16 or fewer
 * columns run one panel, the columns past the band's end masked out of C.
 *
 * Each C element is one chain of FMAs over k within a k-block, later
 * blocks adding to C, as in gemm_run; the blocks' lengths differ (512
 * here, GEMM_KC there), so the two round differently.
 *
 * Measured on the AVX-512 Zen 5 (one thread, `small`'s shapes, W in
 * cache): 185-205 GFLOP/s at M = 64..512, of the core's ~224.
 */
#include "gemm.h"

#include <immintrin.h>

#define AI static inline __attribute__((always_inline))
#define MR 12
#define NR GEMM_NR

#define GEMM_UKR_T float
#include "gemm_ukr_avx512.h"

AI void ukr(int32_t K, const float *A, int32_t lda, const float *B0, const float *B1, float *C,
            int32_t ldc, bool acc, __mmask16 k0, __mmask16 k1, const float *pf0, const float *pf1,
            const int mr, const int np)
{
    __m512 c0[MR], c1[MR];
    ukr_c_load(c0, c1, C, ldc, acc, k0, k1, mr, np);
    for (int32_t k = 0; k < K; k++) {
        _mm_prefetch((const char *)(pf0 + (size_t)k * NR), _MM_HINT_T0);
        _mm_prefetch((const char *)(pf1 + (size_t)k * NR), _MM_HINT_T0);
        const __m512 b0 = _mm512_loadu_ps(B0 + (size_t)k * NR);
        const __m512 b1 = np == 2 ? _mm512_loadu_ps(B1 + (size_t)k * NR) : b0;
        for (int i = 0; i < mr; i++) {
            const __m512 a = _mm512_set1_ps(A[(size_t)i * lda + k]);
            c0[i] = _mm512_fmadd_ps(a, b0, c0[i]);
            if (np == 2)
                c1[i] = _mm512_fmadd_ps(a, b1, c1[i]);
        }
    }
    ukr_c_store(c0, c1, C, ldc, k0, k1, mr, np);
}

GEMM_UKR_TABLE

#ifndef KCB
#define KCB 512 /* k per block */
#endif

void gemm_run_avx512(const float *P, int32_t K, int32_t n0, int32_t n1, int32_t M, const float *A,
                     int32_t lda, float beta, float *C, int32_t ldc)
{
    const size_t pstride = (size_t)NR * K; /* floats of one panel */
    const int32_t nb = (M + MR - 1) / MR, base = M / nb, extra = M % nb;
    for (int32_t n = n0; n < n1; n += 2 * NR) {
        const int np = n1 - n > NR ? 2 : 1;
        const float *B0 = P + (size_t)(n / NR) * pstride, *B1 = np == 2 ? B0 + pstride : B0;
        const __mmask16 k0 = lanes(n1 - n), k1 = lanes(n1 - n - NR);
        const int npn = n1 - n - 2 * NR > NR ? 2 : 1;
        const float *N0 = n + 2 * NR < n1 ? B0 + 2 * pstride : B0;
        const float *N1 = n + 2 * NR < n1 ? N0 + (npn - 1) * pstride : B1;
        for (int32_t kb = 0; kb < K; kb += KCB) {
            const int32_t kc = K - kb < KCB ? K - kb : KCB;
            /* the first row block prefetches the next k-block of the pair
             * (or the next pair's first): W streams from memory */
            const bool last = kb + KCB >= K;
            const float *F0 = last ? N0 : B0 + (size_t)(kb + KCB) * NR;
            const float *F1 = last ? N1 : B1 + (size_t)(kb + KCB) * NR;
            for (int32_t b = 0, m = 0; b < nb; b++) {
                const int mr = (int)(base + (b < extra));
                const float *b0 = B0 + (size_t)kb * NR, *b1 = B1 + (size_t)kb * NR;
                ukrs[np - 1][mr - 1](kc, A + (size_t)m * lda + kb, lda, b0, b1,
                                     C + (size_t)m * ldc + n, ldc, beta != 0.0f || kb > 0, k0, k1,
                                     b ? b0 : F0, b ? b1 : F1);
                m += mr;
            }
        }
    }
}
