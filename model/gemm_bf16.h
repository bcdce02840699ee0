/*
 * model/gemm_bf16.h — a bf16 matrix product on weights packed once, for
 * model/matmul.c's BF16 products of many rows on CPUs with AVX512-BF16
 * (model/gemm_bf16.c: packing, the plain C reference, the dispatch;
 * model/gemm_bf16_avx512.c: the vdpbf16ps microkernel).
 *
 *     C[M][n0:n1] (ldc) = A[M][K] (lda) · W[n0:n1][K]ᵀ + beta · C
 *
 * with A and W in bf16, products exact in f32 and sums in f32.
 *
 * Layout.  vdpbf16ps multiplies pairs: lane j of the result gains
 * a[2j] b[2j] + a[2j+1] b[2j+1].  So W[N][K] is packed into panels of
 * GEMM_BF16_NR = 16 rows of W (16 columns of C), each holding its K
 * columns as Kp / 2 pairs (Kp: K rounded up to even, the pad zero):
 *
 *     P[p][kp][j][t] = W[16 p + j][2 kp + t]    (rows past N zero)
 *
 * so one k-pair of a panel is one 64-byte vector, and a panel is read
 * front to back.  A row's pair (A[m][2kp], A[m][2kp + 1]) is one 32-bit
 * broadcast.  A's rows are bf16 with lda >= Kp elements, A[m][K] = 0 when
 * K is odd.
 *
 * The microkernel keeps up to 12 rows x 32 columns (two panels) of C in
 * 24 registers over one k-block; the driver takes k in blocks of 768 and
 * A's rows in blocks of at most 192 (288 KiB of A, held in L2), and for
 * each walks the band's panel pairs, each against the block's rows in
 * twelves (the pair's k-block stays in L1/L2 while they read it).  The
 * sum for one element of C runs k-pair by k-pair from k = 0 in every path
 * (a later k-block adds to C), so the plain reference gives the same sums
 * up to the order of the two products of one pair inside the instruction,
 * its handling of denormals, and the rounding of C between k-blocks.
 *
 * Reentrant; never allocates; threads give disjoint bands [n0, n1).
 */
#ifndef FOLIO_MODEL_GEMM_BF16_H
#define FOLIO_MODEL_GEMM_BF16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GEMM_BF16_NR 16 /* rows of W (columns of C) per panel */
#define GEMM_BF16_MR 12 /* rows of A per microkernel call */

/* K rounded up to even: the elements of a packed column and of A's rows. */
static inline int32_t gemm_bf16_kp(int32_t K)
{
    return (K + 1) & ~1;
}

/* Bytes of W[N][K] packed. */
static inline size_t gemm_bf16_packed_bytes(int32_t N, int32_t K)
{
    return (size_t)((N + GEMM_BF16_NR - 1) / GEMM_BF16_NR) * GEMM_BF16_NR *
           (size_t)gemm_bf16_kp(K) * sizeof(uint16_t);
}

/* W[N][K] (row-major bf16) into P[gemm_bf16_packed_bytes(N, K)]. */
void gemm_bf16_pack(const uint16_t *W, int32_t N, int32_t K, uint16_t *P);

/* Whether gemm_bf16_run has its AVX512-BF16 kernel here (built and the
 * CPU has AVX-512 F/BW and AVX512_BF16 with the OS saving zmm state). */
bool gemm_bf16_supported(void);

/* C[M][n0:n1] = A[M][K] · W[n0:n1]ᵀ + beta C, W[N][K] packed in P; n0 a
 * multiple of GEMM_BF16_NR, beta 0 or 1.  The AVX512-BF16 kernel where
 * gemm_bf16_supported(), else the plain one (slow: for tests). */
void gemm_bf16_run(const uint16_t *P, int32_t N, int32_t K, int32_t n0, int32_t n1, int32_t M,
                   const uint16_t *A, int32_t lda, float beta, float *C, int32_t ldc);

/* The same product in plain C, from the same packed panels: the
 * reference the kernel is tested against; runs anywhere. */
void gemm_bf16_run_plain(const uint16_t *P, int32_t N, int32_t K, int32_t n0, int32_t n1, int32_t M,
                         const uint16_t *A, int32_t lda, float beta, float *C, int32_t ldc);

#if defined(__x86_64__)
/* the AVX512-BF16 driver (model/gemm_bf16_avx512.c) */
void gemm_bf16_run_avx512(const uint16_t *P, int32_t K, int32_t n0, int32_t n1, int32_t M,
                          const uint16_t *A, int32_t lda, float beta, float *C, int32_t ldc);
#endif

#endif /* FOLIO_MODEL_GEMM_BF16_H */
