/*
 * model/gemm_bf16_avx512.c — the bf16 product's AVX512-BF16 microkernel
 * and driver (contract and layout in model/gemm_bf16.h; reference:
 * gemm_bf16_run_plain).
 *
 * Up to 12 rows x 32 columns of C live in 24 zmm accumulators.  Each
 * k-pair loads one 64-byte vector from each of the two panels, broadcasts
 * each row's pair of A (32 bits), and issues two vdpbf16ps per row: 24
 * independent chains keep both of the FMA pipes busy through the
 * instruction's latency, and the 14 loads per k-pair fit the load ports.
 * Fewer rows or one panel (the band's last 16 or fewer columns) run the
 * same code with mr / np constant (one instance each); the columns past
 * the band's end are masked out of C's loads and stores.
 *
 * Measured on the AVX-512 Zen 5: one thread, `small`'s shapes with W in
 * cache, 370-390 GFLOP/s at M = 64..512 of the core's ~450 for vdpbf16ps;
 * one layer of `small` on 2 threads (bench_gemm --type bf16), 320 at
 * M = 8, 550-620 at 64 (oneDNN 460-500), 585-595 at 512 (oneDNN 690-700:
 * ahead there).  k-blocks of 256 or 384 ran 5-15% slower than 768.
 */
#include "gemm_bf16.h"

#include <immintrin.h>
#include <string.h>

#define AI static inline __attribute__((always_inline))
#define MR GEMM_BF16_MR
#define NR GEMM_BF16_NR

#define GEMM_UKR_T uint16_t
#include "gemm_ukr_avx512.h"

AI void ukr(int32_t kh, const uint16_t *A, int32_t lda, const uint16_t *B0, const uint16_t *B1,
            float *C, int32_t ldc, bool acc, __mmask16 k0, __mmask16 k1, const uint16_t *pf0,
            const uint16_t *pf1, const int mr, const int np)
{
    __m512 c0[MR], c1[MR];
    ukr_c_load(c0, c1, C, ldc, acc, k0, k1, mr, np);
    for (int32_t kp = 0; kp < kh; kp++) {
        _mm_prefetch((const char *)(pf0 + (size_t)kp * 2 * NR), _MM_HINT_T0);
        _mm_prefetch((const char *)(pf1 + (size_t)kp * 2 * NR), _MM_HINT_T0);
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(B0 + (size_t)kp * 2 * NR);
        const __m512bh b1 = np == 2 ? (__m512bh)_mm512_loadu_si512(B1 + (size_t)kp * 2 * NR) : b0;
        for (int i = 0; i < mr; i++) {
            int32_t pair; /* A[i][2 kp], A[i][2 kp + 1] */
            memcpy(&pair, A + (size_t)i * lda + 2 * (size_t)kp, sizeof(pair));
            const __m512bh a = (__m512bh)_mm512_set1_epi32(pair);
            c0[i] = _mm512_dpbf16_ps(c0[i], a, b0);
            if (np == 2)
                c1[i] = _mm512_dpbf16_ps(c1[i], a, b1);
        }
    }
    ukr_c_store(c0, c1, C, ldc, k0, k1, mr, np);
}

GEMM_UKR_TABLE

#ifndef MC
#define MC 192 /* rows of A per block */
#endif
#ifndef KCB
#define KCB 768 /* k per block (even): MC x KCB of A is 288 KiB, in L2 */
#endif

/* The band's panel pairs against rows [0, M) of A (M <= MC) over the
 * k-pairs of one k-block: P, A at the block's first k. */
static void band(const uint16_t *P, size_t pstride, int32_t kh, int32_t n0, int32_t n1, int32_t M,
                 const uint16_t *A, int32_t lda, bool acc, float *C, int32_t ldc)
{
    /* rows in nb blocks of near equal size (64 = 6 x 10-11, not
     * 5 x 12 + 4: a short block runs at a fraction of the rate) */
    const int32_t nb = (M + MR - 1) / MR, base = M / nb, extra = M % nb;
    for (int32_t n = n0; n < n1; n += 2 * NR) {
        const int np = n1 - n > NR ? 2 : 1;
        const uint16_t *B0 = P + (size_t)(n / NR) * pstride, *B1 = np == 2 ? B0 + pstride : B0;
        const __mmask16 k0 = lanes(n1 - n), k1 = lanes(n1 - n - NR);
        /* the first row block prefetches the next panel pair's k-block (W
         * streams from memory: the first block's reads would otherwise
         * wait on it), the others their own, already in cache */
        const int npn = n1 - n - 2 * NR > NR ? 2 : 1;
        const uint16_t *N0 = n + 2 * NR < n1 ? B0 + 2 * pstride : B0;
        const uint16_t *N1 = n + 2 * NR < n1 ? N0 + (npn - 1) * pstride : B1;
        for (int32_t b = 0, m = 0; b < nb; b++) {
            const int mr = (int)(base + (b < extra));
            ukrs[np - 1][mr - 1](kh, A + (size_t)m * lda, lda, B0, B1, C + (size_t)m * ldc + n, ldc,
                                 acc, k0, k1, b ? B0 : N0, b ? B1 : N1);
            m += mr;
        }
    }
}

void gemm_bf16_run_avx512(const uint16_t *P, int32_t K, int32_t n0, int32_t n1, int32_t M,
                          const uint16_t *A, int32_t lda, float beta, float *C, int32_t ldc)
{
    const int32_t Kp = gemm_bf16_kp(K);
    const size_t pstride = (size_t)NR * Kp; /* elements of one panel */
    /* GotoBLAS's order: a k-block, a block of rows, the band's panels; row
     * blocks of near equal size, at most MC */
    const int32_t nmb = (M + MC - 1) / MC;
    for (int32_t kb = 0; kb < Kp; kb += KCB) {
        const int32_t kc = Kp - kb < KCB ? Kp - kb : KCB;
        for (int32_t i = 0, m0 = 0; i < nmb; i++) {
            const int32_t mc = M / nmb + (i < M % nmb);
            band(P + (size_t)kb * NR, pstride, kc / 2, n0, n1, mc, A + (size_t)m0 * lda + kb, lda,
                 beta != 0.0f || kb > 0, C + (size_t)m0 * ldc, ldc);
            m0 += mc;
        }
    }
}
