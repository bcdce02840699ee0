/*
 * model/rows_avx512.h — one row of activations times F32, F16 or BF16
 * weight rows read in place, with AVX-512 F/BW/VL (+ F16C): the M = 1
 * products of model/matmul.c (single-stream decode), on x86-64 only
 * (FOLIO_ROWS_AVX512).  Callers check that the CPU has AVX-512 F, BW and
 * VL.  The references are matmul.c's plain fused rows and the tests'
 * double-precision sums.  Reentrant, never allocates.
 */
#ifndef FOLIO_MODEL_ROWS_AVX512_H
#define FOLIO_MODEL_ROWS_AVX512_H

#include <stdbool.h>
#include <stdint.h>

/* C[n] = dot(A, W[n]) (+ C[n] when beta is 1) for n in [n0, n1): W rows of
 * K 16-bit values (bf16, else f16), A K floats. */
void rows_m1_16_avx512(bool bf16, const uint16_t *W, int32_t K, int32_t n0, int32_t n1,
                       const float *A, float beta, float *C);
/* The same with W rows of K floats. */
void rows_m1_f32_avx512(const float *W, int32_t K, int32_t n0, int32_t n1, const float *A,
                        float beta, float *C);

#endif /* FOLIO_MODEL_ROWS_AVX512_H */
