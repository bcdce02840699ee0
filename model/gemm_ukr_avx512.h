/*
 * model/gemm_ukr_avx512.h — what the two AVX-512 product kernels share
 * (gemm_avx512.c: f32 panels; gemm_bf16_avx512.c: bf16 k-pair panels):
 * the load and store of a microkernel's C tile, the table of microkernel
 * instances and the mask of a panel's first lanes.  Only for those two
 * files, each built with its own AVX-512 flags.
 *
 * The including file defines MR (rows of a microkernel, at most 12), NR
 * (16: columns of one panel) and GEMM_UKR_T (the element type of A and the
 * panels) before including this, then its microkernel
 *
 *   ukr(K, A, lda, B0, B1, C, ldc, acc, k0, k1, pf0, pf1, mr, np)
 *
 * for mr rows of A (1..MR) against np (1 or 2) panels B0, B1 (k0, k1: the
 * lanes of C each one stores), adding to C when acc, prefetching pf0 and
 * pf1 as it goes; then GEMM_UKR_TABLE: one instance per (mr, np) with both
 * constant, so the accumulators live in registers, as
 * ukrs[np - 1][mr - 1].
 */
#ifndef FOLIO_GEMM_UKR_AVX512_H
#define FOLIO_GEMM_UKR_AVX512_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>

_Static_assert(MR == 12 && NR == 16, "the table below has 12 rows of 16-column panels");

/* c0[i], c1[i] (i < mr): C's row i in panel 0 (lanes k0) and, for np 2,
 * panel 1 (lanes k1) when acc, else zeros */
static inline __attribute__((always_inline)) void ukr_c_load(__m512 *c0, __m512 *c1, const float *C,
                                                             int32_t ldc, bool acc, __mmask16 k0,
                                                             __mmask16 k1, const int mr,
                                                             const int np)
{
    for (int i = 0; i < mr; i++) {
        c0[i] = acc ? _mm512_maskz_loadu_ps(k0, C + (size_t)i * ldc) : _mm512_setzero_ps();
        c1[i] = np == 2 && acc ? _mm512_maskz_loadu_ps(k1, C + (size_t)i * ldc + NR)
                               : _mm512_setzero_ps();
    }
}

/* c0, c1 back to C's lanes k0 and (np 2) k1 */
static inline __attribute__((always_inline)) void ukr_c_store(const __m512 *c0, const __m512 *c1,
                                                              float *C, int32_t ldc, __mmask16 k0,
                                                              __mmask16 k1, const int mr,
                                                              const int np)
{
    for (int i = 0; i < mr; i++) {
        _mm512_mask_storeu_ps(C + (size_t)i * ldc, k0, c0[i]);
        if (np == 2)
            _mm512_mask_storeu_ps(C + (size_t)i * ldc + NR, k1, c1[i]);
    }
}

typedef void (*ukr_fn)(int32_t K, const GEMM_UKR_T *A, int32_t lda, const GEMM_UKR_T *B0,
                       const GEMM_UKR_T *B1, float *C, int32_t ldc, bool acc, __mmask16 k0,
                       __mmask16 k1, const GEMM_UKR_T *pf0, const GEMM_UKR_T *pf1);

#define UKR(mr, np)                                                                                \
    static void ukr_##mr##_##np(int32_t K, const GEMM_UKR_T *A, int32_t lda, const GEMM_UKR_T *B0, \
                                const GEMM_UKR_T *B1, float *C, int32_t ldc, bool acc,             \
                                __mmask16 k0, __mmask16 k1, const GEMM_UKR_T *pf0,                 \
                                const GEMM_UKR_T *pf1)                                             \
    {                                                                                              \
        ukr(K, A, lda, B0, B1, C, ldc, acc, k0, k1, pf0, pf1, mr, np);                             \
    }
#define UKR_NP(mr) UKR(mr, 1) UKR(mr, 2)
/* expanded after ukr: its 24 instances and ukrs[np - 1][mr - 1] */
#define GEMM_UKR_TABLE                                                                             \
    UKR_NP(1)                                                                                      \
    UKR_NP(2)                                                                                      \
    UKR_NP(3)                                                                                      \
    UKR_NP(4)                                                                                      \
    UKR_NP(5)                                                                                      \
    UKR_NP(6)                                                                                      \
    UKR_NP(7)                                                                                      \
    UKR_NP(8)                                                                                      \
    UKR_NP(9)                                                                                      \
    UKR_NP(10)                                                                                     \
    UKR_NP(11)                                                                                     \
    UKR_NP(12)                                                                                     \
    static const ukr_fn ukrs[2][MR] = {                                                            \
        {ukr_1_1, ukr_2_1, ukr_3_1, ukr_4_1, ukr_5_1, ukr_6_1, ukr_7_1, ukr_8_1, ukr_9_1,          \
         ukr_10_1, ukr_11_1, ukr_12_1},                                                            \
        {ukr_1_2, ukr_2_2, ukr_3_2, ukr_4_2, ukr_5_2, ukr_6_2, ukr_7_2, ukr_8_2, ukr_9_2,          \
         ukr_10_2, ukr_11_2, ukr_12_2},                                                            \
    };

/* the first n (0..NR, else NR) lanes */
static inline __mmask16 lanes(int32_t n)
{
    return n >= NR ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

#endif /* FOLIO_GEMM_UKR_AVX512_H */
