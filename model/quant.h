/*
 * model/quant.h — quantized dot-product kernels (interface).
 *
 * TEMPORARY COPY: the declarations the matmul layer calls for quantized
 * weights.  The quantized-kernel change owns this header and model/quant.c;
 * at merge its version replaces this one and model/quant_stub.c is deleted.
 */
#ifndef FOLIO_MODEL_QUANT_H
#define FOLIO_MODEL_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "folio/gguf.h"

/* The activation type X is quantized to for products with weights of type t
 * (Q8_0 activations for Q8_0 weights). */
enum gguf_tensor_type quant_dot_type(enum gguf_tensor_type t);
/* Bytes of one row of K elements of type t. */
size_t quant_row_bytes(enum gguf_tensor_type t, int64_t K);
/* Quantize rows [m0, m1) of X (row stride ldx floats, K columns) into Xq
 * (row stride quant_row_bytes(quant_dot_type(t), K)), for weights of type t. */
void quant_rows(enum gguf_tensor_type t, const float *X, int64_t ldx, int64_t K, int64_t m0,
                int64_t m1, void *Xq);
/* Y[m][n] = beta * Y[m][n] + sum_k x[m][k] w[n][k] for m in [0, M), n in [n0, n1).
 * W: rows of K elements of type t, row stride quant_row_bytes(t, K).
 * Xq: M rows from quant_rows. beta is 0 or 1. Never allocates. */
void quant_gemm(enum gguf_tensor_type t, const void *W, int64_t K, int64_t n0, int64_t n1,
                const void *Xq, int64_t M, float *Y, int64_t ldy, float beta);
/* Dequantize n elements (multiple of the block) of type t to f32. */
void quant_to_float(enum gguf_tensor_type t, const void *src, float *dst, int64_t n);

#endif
