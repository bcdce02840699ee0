/*
 * model/gemm.h — an f32 matrix product on weights packed once, for
 * model/matmul.c's products of many rows (model/gemm.c, the AVX2 + FMA
 * microkernel in model/gemm_avx2.c).
 *
 *     C[M][n0:n1] (ldc) = A[M][K] (lda) · W[n0:n1][K]ᵀ + beta · C
 *
 * W is never read row-major by the product: gemm_pack_f32 turns W[N][K]
 * into column panels of GEMM_NR rows of W each, the panel holding its K
 * columns k-major (P[p][k][j] = W[16 p + j][k], rows past N zero), so any
 * run of k of a panel is one contiguous [kc][GEMM_NR] block.  Packed once
 * at load, it serves every call; a weight of another type is widened per
 * call straight into that layout, a tile of panels at a time
 * (gemm_transpose_panel on 16 widened rows, model/matmul.c).
 *
 * With AVX-512, gemm_run_avx512 (model/gemm_avx512.c) runs the same
 * panels two at a time against A's rows in place (12 x 32 tiles, k in
 * blocks, no workspace); model/matmul.c picks it.
 *
 * Kernels never allocate: gemm_run takes a per-thread workspace of
 * gemm_ws_floats() floats.  Reentrant; the ISA is chosen by gemm_isa_init.
 */
#ifndef FOLIO_MODEL_GEMM_H
#define FOLIO_MODEL_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GEMM_MR 6   /* rows of A per microkernel call */
#define GEMM_NR 16  /* rows of W (columns of C) per panel */
#define GEMM_KC 256 /* k per block (a multiple of 256: every quant block fits) */
#define GEMM_MC 192 /* rows of A packed per block (GEMM_MR multiple) */

/* Floats of W[N][K] packed: ceil(N / GEMM_NR) panels of K x GEMM_NR. */
static inline size_t gemm_packed_floats(int32_t N, int32_t K)
{
    return (size_t)((N + GEMM_NR - 1) / GEMM_NR) * GEMM_NR * (size_t)K;
}

/* Floats of one thread's workspace: A's packed block. */
static inline size_t gemm_ws_floats(void)
{
    return (size_t)GEMM_MC * GEMM_KC;
}

/* W[N][K] (row-major f32) into P[gemm_packed_floats(N, K)]. */
void gemm_pack_f32(const float *W, int32_t N, int32_t K, float *P);

/* rows[nr][kc] (nr <= GEMM_NR) into panel[kc][GEMM_NR], zero past nr. */
void gemm_transpose_panel(const float *rows, int32_t nr, int32_t kc, float *panel);

/* C[M][n0:n1] = A[M][K] · W[n0:n1]ᵀ + beta C with W[N][K] packed in P
 * (gemm_pack_f32 or gemm_transpose_panel per panel); n0 a multiple of
 * GEMM_NR, beta 0 or 1, ws[gemm_ws_floats()]. */
void gemm_run(const float *P, int32_t N, int32_t K, int32_t n0, int32_t n1, int32_t M,
              const float *A, int32_t lda, float beta, float *C, int32_t ldc, float *ws);

/* One row of A (decode): c[n0:n1] = a[K] · W[n0:n1]ᵀ + beta c, W packed
 * in P; reads each panel once, front to back (memory bound). */
void gemm_gemv(const float *P, int32_t N, int32_t K, int32_t n0, int32_t n1, const float *a,
               float beta, float *c);

/* Chooses the microkernel: AVX2 + FMA where the CPU has them unless plain
 * (the plain C one is the reference).  Call before any gemm_run. */
void gemm_isa_init(bool plain);
/* "avx2" or "plain". */
const char *gemm_isa_name(void);

/* The microkernels: C[mr][nr] (ldc) = (acc ? C : 0) + Ap · Bp over kc,
 * Ap [kc][GEMM_MR] (rows past mr zero), Bp [kc][GEMM_NR]. */
void gemm_ukr_plain(int32_t kc, const float *Ap, const float *Bp, float *C, int32_t ldc, int mr,
                    int nr, bool acc, const float *pf);
#if defined(__x86_64__)
void gemm_ukr_avx2(int32_t kc, const float *Ap, const float *Bp, float *C, int32_t ldc, int mr,
                   int nr, bool acc, const float *pf);
/* C[M][n0:n1] = A[M][K] · W[n0:n1]ᵀ + beta C as gemm_run, with AVX-512F
 * (model/gemm_avx512.c: 12 x 32 tiles, A read in place, no workspace);
 * the caller checks the CPU (matmul.c's use_avx512). */
void gemm_run_avx512(const float *P, int32_t K, int32_t n0, int32_t n1, int32_t M, const float *A,
                     int32_t lda, float beta, float *C, int32_t ldc);
/* gemm_gemv's panels [n0, n1) (n1 - n0 <= nr of the last one). */
void gemm_gemv_avx2(const float *P, int32_t K, int32_t n0, int32_t n1, const float *a, float beta,
                    float *c);
/* gemm_transpose_panel for nr = GEMM_NR, kc a multiple of 8. */
void gemm_transpose16_avx2(const float *rows, int32_t kc, float *panel);
#endif

#endif /* FOLIO_MODEL_GEMM_H */
