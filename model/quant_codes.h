/*
 * model/quant_codes.h — the scalar pieces of the file types' blocks that
 * model/quant.c and model/quant_k.c (the file types) and model/quant_r8.c
 * (their load-time layouts) share: half floats, rounding and the
 * quantizers' searches, the K-quants' packed scales and codes, and a
 * layout's row as f32 (for quant_rows_to_float).
 * Private to those three files; the x86 kernel files have their own
 * (quant_x86.h).
 */
#ifndef FOLIO_MODEL_QUANT_CODES_H
#define FOLIO_MODEL_QUANT_CODES_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "folio/common.h"
#include "quant.h"
#include "quant_internal.h"

/* IEEE half -> float, exact (inline: the scalar kernels call it per block) */
static inline float h2f(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t u;
    float f;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13);
    } else if (exp == 0) {
        f = (float)man * 0x1p-24f; /* zero or subnormal: exact */
        memcpy(&u, &f, 4);
        u |= sign;
    } else {
        u = sign | ((exp + 112u) << 23) | (man << 13);
    }
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t f2h(float f)
{
    return folio_f32_to_f16(f);
}

/* round half away from zero, as roundf (inline: quant_rows runs it per
 * activation); exact for |x| < 2^23, where x - trunc(x) is exact; larger
 * magnitudes (and NaN) come back as +-2^30, which every caller clamps */
static inline int nearest(float x)
{
    if (!(fabsf(x) < 8388608.0f))
        return x > 0.0f ? (1 << 30) : -(1 << 30);
    const int i = (int)x;
    const float r = x - (float)i;
    return i + (r >= 0.5f) - (r <= -0.5f);
}

/* the value of largest magnitude, with its sign */
static inline float signed_absmax(const float *x, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

static inline void minmax(const float *x, int n, float *mn, float *mx)
{
    float lo = x[0], hi = x[0];
    for (int j = 1; j < n; j++) {
        lo = fminf(lo, x[j]);
        hi = fmaxf(hi, x[j]);
    }
    *mn = lo;
    *mx = hi;
}

/* n values to int8 codes q with the scale amax / 127 (returned), rounded
 * half away from zero: the activations' blocks (Q8_0, Q8_1, Q8_K). */
static inline float q8_block(const float *x, int8_t *q, int n)
{
    float amax = 0.0f;
    for (int j = 0; j < n; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < n; j++)
        q[j] = (int8_t)nearest(x[j] * id);
    return d;
}

/* scale and min codes (6 bits each) of sub-block j of a Q4_K/Q5_K block */
static inline void k4_scale_min(int j, const uint8_t *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K / Q5_K: the 6-bit scale and min codes ls[8], lm[8] into q[12] */
void quant__k4_pack_scales(const int *ls, const int *lm, uint8_t *q);
/* a block's codes in column order: Q4_K 0..15, Q5_K 0..31 */
void quant__q4_k_codes(const struct blk_q4_k *x, uint8_t *L);
void quant__q5_k_codes(const struct blk_q5_k *x, uint8_t *L);
/* IQ4_XS's eight 6-bit scale codes (the scale is ls - 32) */
void quant__iq4_xs_scales(const struct blk_iq4_xs *x, int *ls);

/* Q2_K / Q3_K: 2-bit codes L[256] into qs[64] and back; Q3_K's codes as
 * q + 4 (0..7) and its sixteen 6-bit scale codes (the scale is sc - 32),
 * from and into the block's 12 bytes of them */
void quant__q2_pack(const uint8_t *L, uint8_t *qs);
void quant__q2_codes(const uint8_t *qs, uint8_t *L);
void quant__q3_k_codes(const struct blk_q3_k *x, uint8_t *L);
void quant__q3_k_scales(const uint8_t *p, int *sc);
void quant__q3_k_pack_scales(const int *sc, uint8_t *p);

/* Q6_K: codes L[256] (0..63) into ql[128], qh[64]; and back as q - 32 */
void quant__q6_k_pack(const uint8_t *L, uint8_t *ql_out, uint8_t *qh_out);
void quant__q6_k_codes(const struct blk_q6_k *x, int8_t *q);
/* Row r of the group at g of load-time layout t, K columns, to f32
 * (model/quant_r8.c) */
void quant__r8_row_to_float(enum gguf_tensor_type t, const uint8_t *g, int64_t K, int r, float *y);

#endif /* FOLIO_MODEL_QUANT_CODES_H */
