/*
 * model/widen.h — weight rows widened to f32 with AVX2 + F16C
 * (model/widen_avx2.c), for model/matmul.c's widened tiles.  Only built on
 * x86-64 (FOLIO_WIDEN_X86); callers check widen_supports() and that the
 * CPU has AVX2, FMA and F16C.  The reference is quant_to_float
 * (model/quant.h).  Reentrant, never allocates.
 */
#ifndef FOLIO_MODEL_WIDEN_H
#define FOLIO_MODEL_WIDEN_H

#include <stdbool.h>
#include <stdint.h>

#include "folio/gguf.h"

/* True when widen_rows_avx2 takes rows of K elements of type t: F16, BF16
 * (K a multiple of 8), Q8_0, Q4_K, Q6_K. */
bool widen_supports(enum gguf_tensor_type t, int64_t K);

/* Rows [r0, r0 + n) of W (rows of K elements of type t, row stride
 * quant_row_bytes(t, K)) to f32: dst[n][K]. */
void widen_rows_avx2(enum gguf_tensor_type t, const void *W, int64_t K, int64_t r0, int64_t n,
                     float *dst);

#endif /* FOLIO_MODEL_WIDEN_H */
