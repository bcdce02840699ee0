/*
 * model/matmul.h — the matrix products of the forward pass, behind one
 * interface, with the weights in their file's precision.
 *
 * Every product of a step has the shape
 *
 *     C[M][N] (row stride ldc) = A[M][K] (row stride lda) · W[N][K]ᵀ + beta · C
 *
 * with A an f32 activation matrix (M = tokens of the step, 1..max_m), W a
 * weight matrix stored row-major [N][K] in one of the GGUF tensor types
 * (F32, F16, BF16 or a quantized type of model/quant.c) and beta 0 (overwrite) or 1 (accumulate
 * into the residual stream).
 *
 * Contract:
 *   - matmul_new() fixes the backend, the number of threads and the largest
 *     M and K; matmul_add() registers a weight and prepares it ONCE into
 *     the layout its backend wants (oneDNN: a reorder of each thread's band
 *     of rows into the primitive's blocked format, in bf16 for BF16).
 *     Nothing is prepared per step.
 *   - The weight's data is borrowed: it must outlive the matmul_t (the
 *     OpenBLAS, portable and quantized paths read it in place).
 *   - matmul_run() splits the N output columns over the pool's threads
 *     (each thread one band, fixed at matmul_new); a type that quantizes or
 *     narrows A first runs one more pool dispatch over the rows of A into a
 *     workspace sized at matmul_new.  It never allocates, except that the
 *     oneDNN backend wraps A and C in two oneDNN memory objects per band
 *     and call (small descriptors; oneDNN needs concrete dims per call).
 *   - Results: F32 through OpenBLAS is the reference; the other paths are
 *     compared with it by the tests (tests/test_forward.c, test_matmul.c).
 *
 * Threading: one thread at a time calls matmul_run for a given matmul_t
 * (the owner of its pool).  See model/matmul.c for how oneDNN's OpenMP is
 * kept at one thread per pool thread.
 */
#ifndef FOLIO_MODEL_MATMUL_H
#define FOLIO_MODEL_MATMUL_H

#include <stdbool.h>
#include <stdint.h>

#include "folio/gguf.h"
#include "folio/model.h"
#include "folio/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A weight matrix W[rows][cols] of one tensor type, row-major. */
struct matmul_mat {
    enum gguf_tensor_type type;
    int32_t rows, cols; /* N, K */
    const void *data;
};

struct matmul_config {
    enum model_matmul backend; /* AUTO is resolved by matmul_new */
    int32_t n_threads;         /* pool size: one band of columns each */
    int32_t max_m;             /* largest M of any call */
    int32_t max_k;             /* largest K of any weight */
    int32_t max_weights;       /* matmul_add calls allowed */
    /* F32/F16/BF16 products through the batch-invariant kernels (row m of
     * C does not depend on M or on A's other rows; model/matmul.c), and
     * quantized ones on their int8 kernels at every M (they are batch
     * invariant; without this flag large M runs widened tiles and sgemm). */
    bool batch_invariant;
    /* Products of more than a few rows (M > 4) on F32 weights, and on
     * widened 16-bit or quantized tiles, with the OpenBLAS backend: the
     * packed-weight gemm (model/gemm.h; F32 weights packed once at
     * matmul_add) or sgemm.  MATMUL_GEMM_AUTO is the measured choice. */
    enum matmul_gemm { MATMUL_GEMM_AUTO = 0, MATMUL_GEMM_SGEMM, MATMUL_GEMM_PACKED } gemm;
    /* Quantized weights run as widened tiles from this many rows of A on
     * (with AVX2; 0: the crossover measured per type, model/matmul.c). */
    int32_t widen_min_m;
};

typedef struct matmul matmul_t;

/* -EINVAL, -ENOMEM, -ENOTSUP (oneDNN asked for, not built). */
int matmul_new(const struct matmul_config *cfg, matmul_t **out);
void matmul_free(matmul_t *mm);
/* The backend in use (never AUTO). */
enum model_matmul matmul_backend_used(const matmul_t *mm);

/* Registers w (borrowed) and prepares it; *id names it in matmul_run.
 * -EINVAL (type, shape, too many weights), -ENOMEM. */
int matmul_add(matmul_t *mm, const struct matmul_mat *w, int32_t *id);

/* C[M][N] (ldc) = A[M][K] (lda) · W[id]ᵀ + beta · C over pool (whose size
 * must be cfg->n_threads).  1 <= M <= max_m, beta 0 or 1. */
void matmul_run(matmul_t *mm, pool_t *pool, int32_t id, int32_t M, const float *A, int32_t lda,
                float beta, float *C, int32_t ldc);

/* Bytes of W's prepared copies held by mm (0 when every weight is read in
 * place). */
size_t matmul_prepared_bytes(const matmul_t *mm);

/* FOLIO_MATMUL_ISA's cap on the kernels picked at run time by the matmul
 * layer and the forward pass's other per-ISA steps (model/swiglu.c):
 * MATMUL_ISA_PLAIN (=plain: plain C / generic lanes), MATMUL_ISA_AVX2
 * (=avx2: nothing past AVX2), MATMUL_ISA_ANY (unset or anything else).
 * Read once per process. */
enum matmul_isa_cap { MATMUL_ISA_PLAIN, MATMUL_ISA_AVX2, MATMUL_ISA_ANY };
enum matmul_isa_cap matmul_isa_cap(void);

/* Whether BF16 weights run model/gemm_bf16.h's AVX512-BF16 kernel (A
 * rounded to bf16) for more than a few rows under backend b in this
 * process: the CPU has it, matmul.c's AVX-512 paths are not held back
 * (FOLIO_MATMUL_ISA), and b is not oneDNN by name. */
bool matmul_bf16_kernel(enum model_matmul b);

/* Whether F32 and F16 weights run model/gemm.h's AVX-512 kernel on packed
 * panels (f32 arithmetic, F16 widened once at load) where the backend
 * resolved to `used`: the OpenBLAS one, on a CPU with AVX-512 whose paths
 * matmul.c does not hold back. */
bool matmul_f32_avx512(enum model_matmul used);

/* Rows [r0, r0 + n) of w dequantized to f32 into dst[n][cols]. */
void matmul_mat_rows_f32(const struct matmul_mat *w, int64_t r0, int64_t n, float *dst);
/* Bytes of one row of w. */
static inline size_t matmul_mat_row_bytes(const struct matmul_mat *w)
{
    return gguf_tensor_nbytes(w->type, w->cols);
}

#ifdef __cplusplus
}
#endif
#endif
