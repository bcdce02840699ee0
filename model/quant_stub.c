/*
 * model/quant_stub.c — TEMPORARY plain-C stand-in for model/quant.c.
 *
 * Implements exactly the functions of model/quant.h for Q8_0 (blocks of 32
 * int8 with one f16 scale, activations quantized the same way) so the
 * matmul layer builds and its Q8_0 path is exercised.  The quantized-kernel
 * change replaces this file with model/quant.c (fast kernels beside a
 * reference); delete this file and its line in model/meson.build then.
 */
#include "quant.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "folio/common.h"

#define QK     32
#define QBYTES 34 /* f16 scale + 32 int8 */

enum gguf_tensor_type quant_dot_type(enum gguf_tensor_type t)
{
    return t == GGUF_TENSOR_Q8_0 ? GGUF_TENSOR_Q8_0 : GGUF_TENSOR_F32;
}

size_t quant_row_bytes(enum gguf_tensor_type t, int64_t K)
{
    return gguf_tensor_nbytes(t, K);
}

void quant_rows(enum gguf_tensor_type t, const float *X, int64_t ldx, int64_t K, int64_t m0,
                int64_t m1, void *Xq)
{
    assert(t == GGUF_TENSOR_Q8_0 && K % QK == 0);
    const size_t rb = quant_row_bytes(GGUF_TENSOR_Q8_0, K);
    for (int64_t m = m0; m < m1; m++) {
        const float *x = X + m * ldx;
        uint8_t *q = (uint8_t *)Xq + (size_t)m * rb;
        for (int64_t b = 0; b < K / QK; b++, x += QK, q += QBYTES) {
            float amax = 0;
            for (int i = 0; i < QK; i++)
                amax = fmaxf(amax, fabsf(x[i]));
            float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
            uint16_t h = folio_f32_to_f16(d);
            memcpy(q, &h, 2);
            for (int i = 0; i < QK; i++)
                q[2 + i] = (uint8_t)(int8_t)lrintf(x[i] * id);
        }
    }
}

void quant_gemm(enum gguf_tensor_type t, const void *W, int64_t K, int64_t n0, int64_t n1,
                const void *Xq, int64_t M, float *Y, int64_t ldy, float beta)
{
    assert(t == GGUF_TENSOR_Q8_0 && K % QK == 0);
    const size_t rb = quant_row_bytes(GGUF_TENSOR_Q8_0, K);
    for (int64_t m = 0; m < M; m++) {
        const uint8_t *x = (const uint8_t *)Xq + (size_t)m * rb;
        for (int64_t n = n0; n < n1; n++) {
            const uint8_t *w = (const uint8_t *)W + (size_t)n * rb;
            float acc = 0;
            for (int64_t b = 0; b < K / QK; b++) {
                const uint8_t *xb = x + b * QBYTES, *wb = w + b * QBYTES;
                uint16_t hx, hw;
                memcpy(&hx, xb, 2);
                memcpy(&hw, wb, 2);
                int32_t s = 0;
                for (int i = 0; i < QK; i++)
                    s += (int32_t)(int8_t)xb[2 + i] * (int32_t)(int8_t)wb[2 + i];
                acc += (float)s * folio_f16_to_f32(hx) * folio_f16_to_f32(hw);
            }
            float *y = Y + m * ldy + n;
            *y = beta != 0.0f ? *y + acc : acc;
        }
    }
}

void quant_to_float(enum gguf_tensor_type t, const void *src, float *dst, int64_t n)
{
    gguf_tensor_to_f32(t, src, dst, n);
}
