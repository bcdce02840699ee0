/*
 * model/quant.c — the tensor type table, scalar conversions, quantizers,
 * scalar dot kernels, the reference product, and run-time ISA choice.
 *
 * What it owns.  The table `traits[]`, indexed by ggml type number: one row
 * per type (name, block, bytes per block, dot type, to/from f32, scalar dot,
 * per-ISA product kernels).  A new type is one row plus its functions.
 *
 * Block layouts (ggml's, byte for byte; see quant_internal.h):
 *
 *   Q8_0  [d:f16][q:i8 x32]                    34 B / 32
 *   Q4_0  [d:f16][nibbles x16]                 18 B / 32  lo = x[0..15], hi = x[16..31]
 *   Q4_1  [d:f16][m:f16][nibbles x16]          20 B / 32
 *   Q5_0  [d:f16][qh:4 B][nibbles x16]         22 B / 32  bit 5 of x[j] = qh bit j
 *   Q5_1  [d:f16][m:f16][qh:4 B][nibbles x16]  24 B / 32
 *   Q4_K  [d][dmin][scales 12 B][nibbles x128] 144 B / 256 (8 x 32, 6-bit sc/m)
 *   Q5_K  ... + [qh 32 B]                      176 B / 256
 *   Q6_K  [ql 128 B][qh 64 B][sc:i8 x16][d]    210 B / 256 (16 x 16)
 *   Q8_K  [d:f32][q:i8 x256][bsums:i16 x16]    292 B / 256 (activations only)
 *   Q8_0S [d:f16][s:i16][q:i8 x32]             36 B / 32 (activations only)
 *
 * Rounding.  The weight quantizers follow llama.cpp's reference rounding
 * where it is a closed formula (Q8_0: d = amax/127, q = round(x/d); Q4_0:
 * d = max/-8 with max the signed value of largest magnitude, q = trunc(x/d
 * + 8.5) capped at 15; Q4_1: d = (max-min)/15; Q5_0/Q5_1 the same with 16 /
 * 31).  The K-quant quantizers here are simpler than llama.cpp's iterative
 * searches (per sub-block min/max scales, 6-bit scale codes by rounding,
 * codes re-rounded against the stored scales); their files are the same
 * format and llama.cpp reads them.  Activations: Q8_0/Q8_1 as llama.cpp
 * (amax/127 per 32, round to nearest); Q8_K with amax/127 per 256 and the
 * 16-element sums the K-quant kernels use for their mins; Q8_0S as Q8_0
 * with the sum of its codes (for the Q4_0_R8 .. Q5_1_R8 kernels).
 *
 * ISA.  quant_gemm takes the kernel of the chosen ISA from the type's row;
 * a row without one at that ISA falls back to the next lower ISA, and
 * finally to the scalar loop over the row's vec_dot.  The ISA is chosen once
 * (FOLIO_QUANT_ISA, else the best the CPU has) and may be forced.
 *
 * Threading: reentrant; the ISA choice is an atomic set once.
 */
#include "quant.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"
#include "quant_internal.h"

_Static_assert(sizeof(struct blk_q8_0) == 34, "q8_0 layout");
_Static_assert(sizeof(struct blk_q8_1) == 36, "q8_1 layout");
_Static_assert(sizeof(struct blk_q4_0) == 18, "q4_0 layout");
_Static_assert(sizeof(struct blk_q4_1) == 20, "q4_1 layout");
_Static_assert(sizeof(struct blk_q5_0) == 22, "q5_0 layout");
_Static_assert(sizeof(struct blk_q5_1) == 24, "q5_1 layout");
_Static_assert(sizeof(struct blk_q4_k) == 144, "q4_K layout");
_Static_assert(sizeof(struct blk_q5_k) == 176, "q5_K layout");
_Static_assert(sizeof(struct blk_q6_k) == 210, "q6_K layout");
_Static_assert(sizeof(struct blk_q8_k) == 292, "q8_K layout");
_Static_assert(sizeof(struct blk_q8_0s) == 36, "q8_0s layout");

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

uint16_t quant_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

/* ---- plain floating types --------------------------------------------- */

static void f32_to_float(const void *src, float *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * 4);
}

static void f32_from_float(const float *src, void *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * 4);
}

static void f16_to_float(const void *src, float *dst, int64_t n)
{
    const uint8_t *s = src;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, s + 2 * i, 2);
        dst[i] = h2f(h);
    }
}

static void f16_from_float(const float *src, void *dst, int64_t n)
{
    uint8_t *d = dst;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = f2h(src[i]);
        memcpy(d + 2 * i, &h, 2);
    }
}

static void bf16_to_float(const void *src, float *dst, int64_t n)
{
    const uint8_t *s = src;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, s + 2 * i, 2);
        dst[i] = folio_bf16_to_f32(h);
    }
}

static void bf16_from_float(const float *src, void *dst, int64_t n)
{
    uint8_t *d = dst;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = quant_f32_to_bf16(src[i]);
        memcpy(d + 2 * i, &h, 2);
    }
}

/* ---- Q8_0 / Q8_1 ------------------------------------------------------ */

static float q8_block(const float *x, int8_t *q, int n)
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

static void q8_0_from_float(const float *x, void *dst, int64_t n)
{
    struct blk_q8_0 *y = dst;
    for (int64_t b = 0; b < n / QK8_0; b++)
        y[b].d = f2h(q8_block(x + b * QK8_0, y[b].qs, QK8_0));
}

static void q8_0_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_q8_0 *x = src;
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK8_0; j++)
            y[b * QK8_0 + j] = d * (float)x[b].qs[j];
    }
}

static float q8_0_dot(int64_t K, const void *w, const void *xq)
{
    const struct blk_q8_0 *a = w, *b = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < K / QK8_0; i++) {
        int32_t s = 0;
        for (int j = 0; j < QK8_0; j++)
            s += (int32_t)a[i].qs[j] * (int32_t)b[i].qs[j];
        sum += h2f(a[i].d) * h2f(b[i].d) * (float)s;
    }
    return sum;
}

static void q8_1_from_float(const float *x, void *dst, int64_t n)
{
    struct blk_q8_1 *y = dst;
    for (int64_t b = 0; b < n / QK8_1; b++) {
        const float d = q8_block(x + b * QK8_1, y[b].qs, QK8_1);
        int32_t s = 0;
        for (int j = 0; j < QK8_1; j++)
            s += y[b].qs[j];
        y[b].d = f2h(d);
        y[b].s = f2h(d * (float)s);
    }
}

static void q8_1_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_q8_1 *x = src;
    for (int64_t b = 0; b < n / QK8_1; b++) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK8_1; j++)
            y[b * QK8_1 + j] = d * (float)x[b].qs[j];
    }
}

/* Q8_0S: Q8_0's d and codes, and s = the sum of the codes (exact) */
static void q8_0s_from_float(const float *x, void *dst, int64_t n)
{
    struct blk_q8_0s *y = dst;
    for (int64_t b = 0; b < n / QK8_0; b++) {
        y[b].d = f2h(q8_block(x + b * QK8_0, y[b].qs, QK8_0));
        int32_t s = 0;
        for (int j = 0; j < QK8_0; j++)
            s += y[b].qs[j];
        y[b].s = (int16_t)s;
    }
}

static void q8_0s_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_q8_0s *x = src;
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK8_0; j++)
            y[b * QK8_0 + j] = d * (float)x[b].qs[j];
    }
}

/* ---- Q4_0 / Q4_1 / Q5_0 / Q5_1 --------------------------------------- */

/* the value of largest magnitude, with its sign */
static float signed_absmax(const float *x, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

static void q4_0_from_float(const float *x, void *dst, int64_t n)
{
    struct blk_q4_0 *y = dst;
    for (int64_t b = 0; b < n / QK4_0; b++, x += QK4_0) {
        const float d = signed_absmax(x, QK4_0) / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f2h(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            int q0 = (int8_t)(x[j] * id + 8.5f), q1 = (int8_t)(x[j + 16] * id + 8.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

static void q4_0_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_q4_0 *x = src;
    for (int64_t b = 0; b < n / QK4_0; b++, y += QK4_0) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = d * (float)((x[b].qs[j] & 15) - 8);
            y[j + 16] = d * (float)((x[b].qs[j] >> 4) - 8);
        }
    }
}

static float q4_0_dot(int64_t K, const void *w, const void *xq)
{
    const struct blk_q4_0 *a = w;
    const struct blk_q8_0 *b = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < K / QK4_0; i++) {
        int32_t s = 0;
        for (int j = 0; j < 16; j++)
            s += ((a[i].qs[j] & 15) - 8) * b[i].qs[j] + ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + 16];
        sum += h2f(a[i].d) * h2f(b[i].d) * (float)s;
    }
    return sum;
}

static void minmax(const float *x, int n, float *mn, float *mx)
{
    float lo = x[0], hi = x[0];
    for (int j = 1; j < n; j++) {
        lo = fminf(lo, x[j]);
        hi = fmaxf(hi, x[j]);
    }
    *mn = lo;
    *mx = hi;
}

static void q4_1_from_float(const float *x, void *dst, int64_t n)
{
    struct blk_q4_1 *y = dst;
    for (int64_t b = 0; b < n / QK4_1; b++, x += QK4_1) {
        float mn, mx;
        minmax(x, QK4_1, &mn, &mx);
        const float d = (mx - mn) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f2h(d);
        y[b].m = f2h(mn);
        for (int j = 0; j < 16; j++) {
            int q0 = (int8_t)((x[j] - mn) * id + 0.5f), q1 = (int8_t)((x[j + 16] - mn) * id + 0.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

static void q4_1_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_q4_1 *x = src;
    for (int64_t b = 0; b < n / QK4_1; b++, y += QK4_1) {
        const float d = h2f(x[b].d), m = h2f(x[b].m);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)(x[b].qs[j] & 15) + m;
            y[j + 16] = d * (float)(x[b].qs[j] >> 4) + m;
        }
    }
}

static float q4_1_dot(int64_t K, const void *w, const void *xq)
{
    const struct blk_q4_1 *a = w;
    const struct blk_q8_1 *b = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < K / QK4_1; i++) {
        int32_t s = 0;
        for (int j = 0; j < 16; j++)
            s += (a[i].qs[j] & 15) * b[i].qs[j] + (a[i].qs[j] >> 4) * b[i].qs[j + 16];
        sum += h2f(a[i].d) * h2f(b[i].d) * (float)s + h2f(a[i].m) * h2f(b[i].s);
    }
    return sum;
}

static void q5_pack(const int *q, uint8_t qs[16], uint8_t qh[4])
{
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 15) | ((q[j + 16] & 15) << 4));
        h |= (uint32_t)((q[j] >> 4) & 1) << j;
        h |= (uint32_t)((q[j + 16] >> 4) & 1) << (j + 16);
    }
    memcpy(qh, &h, 4);
}

/* the 5-bit codes of a Q5 block, 0..31 */
static void q5_unpack(const uint8_t qs[16], const uint8_t qh[4], int *q)
{
    uint32_t h;
    memcpy(&h, qh, 4);
    for (int j = 0; j < 16; j++) {
        q[j] = (qs[j] & 15) | (int)(((h >> j) & 1) << 4);
        q[j + 16] = (qs[j] >> 4) | (int)(((h >> (j + 16)) & 1) << 4);
    }
}

static void q5_0_from_float(const float *x, void *dst, int64_t n)
{
    struct blk_q5_0 *y = dst;
    for (int64_t b = 0; b < n / QK5_0; b++, x += QK5_0) {
        const float d = signed_absmax(x, QK5_0) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int q[32];
        for (int j = 0; j < 32; j++) {
            q[j] = (int8_t)(x[j] * id + 16.5f);
            q[j] = q[j] > 31 ? 31 : q[j];
        }
        y[b].d = f2h(d);
        q5_pack(q, y[b].qs, y[b].qh);
    }
}

static void q5_0_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_q5_0 *x = src;
    for (int64_t b = 0; b < n / QK5_0; b++, y += QK5_0) {
        int q[32];
        q5_unpack(x[b].qs, x[b].qh, q);
        const float d = h2f(x[b].d);
        for (int j = 0; j < 32; j++)
            y[j] = d * (float)(q[j] - 16);
    }
}

static float q5_0_dot(int64_t K, const void *w, const void *xq)
{
    const struct blk_q5_0 *a = w;
    const struct blk_q8_0 *b = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < K / QK5_0; i++) {
        int q[32];
        q5_unpack(a[i].qs, a[i].qh, q);
        int32_t s = 0;
        for (int j = 0; j < 32; j++)
            s += (q[j] - 16) * b[i].qs[j];
        sum += h2f(a[i].d) * h2f(b[i].d) * (float)s;
    }
    return sum;
}

static void q5_1_from_float(const float *x, void *dst, int64_t n)
{
    struct blk_q5_1 *y = dst;
    for (int64_t b = 0; b < n / QK5_1; b++, x += QK5_1) {
        float mn, mx;
        minmax(x, QK5_1, &mn, &mx);
        const float d = (mx - mn) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int q[32];
        for (int j = 0; j < 32; j++) {
            q[j] = (uint8_t)((x[j] - mn) * id + 0.5f);
            q[j] = q[j] > 31 ? 31 : q[j];
        }
        y[b].d = f2h(d);
        y[b].m = f2h(mn);
        q5_pack(q, y[b].qs, y[b].qh);
    }
}

static void q5_1_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_q5_1 *x = src;
    for (int64_t b = 0; b < n / QK5_1; b++, y += QK5_1) {
        int q[32];
        q5_unpack(x[b].qs, x[b].qh, q);
        const float d = h2f(x[b].d), m = h2f(x[b].m);
        for (int j = 0; j < 32; j++)
            y[j] = d * (float)q[j] + m;
    }
}

static float q5_1_dot(int64_t K, const void *w, const void *xq)
{
    const struct blk_q5_1 *a = w;
    const struct blk_q8_1 *b = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < K / QK5_1; i++) {
        int q[32];
        q5_unpack(a[i].qs, a[i].qh, q);
        int32_t s = 0;
        for (int j = 0; j < 32; j++)
            s += q[j] * b[i].qs[j];
        sum += h2f(a[i].d) * h2f(b[i].d) * (float)s + h2f(a[i].m) * h2f(b[i].s);
    }
    return sum;
}

/* ---- Q8_K (activations of K-quant products) --------------------------- */

static void q8_k_from_float(const float *x, void *dst, int64_t n)
{
    struct blk_q8_k *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        y[b].d = q8_block(x, y[b].qs, QK_K);
        for (int j = 0; j < QK_K / 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++)
                s += y[b].qs[16 * j + l];
            y[b].bsums[j] = (int16_t)s;
        }
    }
}

static void q8_k_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_q8_k *x = src;
    for (int64_t b = 0; b < n / QK_K; b++)
        for (int j = 0; j < QK_K; j++)
            y[b * QK_K + j] = x[b].d * (float)x[b].qs[j];
}

/* ---- Q4_K / Q5_K ------------------------------------------------------ */

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

static void k4_pack_scales(const int *ls, const int *lm, uint8_t *q)
{
    memset(q, 0, K_SCALE_SIZE);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            q[j] = (uint8_t)ls[j];
            q[j + 4] = (uint8_t)lm[j];
        } else {
            q[j + 4] = (uint8_t)((ls[j] & 15) | ((lm[j] & 15) << 4));
            q[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            q[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

/* One 256-block of an asymmetric K-quant with codes 0..nmax: fills the
 * packed scales, d, dmin, and L[256] (codes). */
static void kq_asym_block(const float *x, int nmax, uint8_t *scales, uint16_t *d_out,
                          uint16_t *dmin_out, uint8_t *L)
{
    float sc[8], mn[8], max_sc = 0.0f, max_mn = 0.0f;
    for (int j = 0; j < 8; j++) {
        float lo, hi;
        minmax(x + 32 * j, 32, &lo, &hi);
        mn[j] = lo < 0.0f ? -lo : 0.0f; /* x = d*q - m with m >= 0 */
        sc[j] = (hi + mn[j]) / (float)nmax;
        max_sc = fmaxf(max_sc, sc[j]);
        max_mn = fmaxf(max_mn, mn[j]);
    }
    const float isc = max_sc > 0.0f ? 63.0f / max_sc : 0.0f;
    const float imn = max_mn > 0.0f ? 63.0f / max_mn : 0.0f;
    int ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        ls[j] = nearest(isc * sc[j]);
        lm[j] = nearest(imn * mn[j]);
        ls[j] = ls[j] > 63 ? 63 : ls[j];
        lm[j] = lm[j] > 63 ? 63 : lm[j];
    }
    k4_pack_scales(ls, lm, scales);
    *d_out = f2h(max_sc / 63.0f);
    *dmin_out = f2h(max_mn / 63.0f);
    const float d = h2f(*d_out), dmin = h2f(*dmin_out);
    for (int j = 0; j < 8; j++) {
        const float dd = d * (float)ls[j], dm = dmin * (float)lm[j];
        for (int l = 0; l < 32; l++) {
            int q = dd != 0.0f ? nearest((x[32 * j + l] + dm) / dd) : 0;
            L[32 * j + l] = (uint8_t)(q < 0 ? 0 : q > nmax ? nmax : q);
        }
    }
}

static void q4_k_from_float(const float *x, void *dst, int64_t n)
{
    struct blk_q4_k *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        uint8_t L[QK_K];
        kq_asym_block(x, 15, y[b].scales, &y[b].d, &y[b].dmin, L);
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++)
                y[b].qs[32 * j + l] = (uint8_t)(L[64 * j + l] | (L[64 * j + 32 + l] << 4));
    }
}

/* the codes (0..15) of a Q4_K block, element order */
static void q4_k_codes(const struct blk_q4_k *x, uint8_t *L)
{
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) {
            L[64 * j + l] = x->qs[32 * j + l] & 15;
            L[64 * j + 32 + l] = x->qs[32 * j + l] >> 4;
        }
}

static void q4_k_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_q4_k *x = src;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        uint8_t L[QK_K];
        q4_k_codes(&x[b], L);
        const float d = h2f(x[b].d), dmin = h2f(x[b].dmin);
        for (int j = 0; j < 8; j++) {
            int sc, m;
            k4_scale_min(j, x[b].scales, &sc, &m);
            for (int l = 0; l < 32; l++)
                y[32 * j + l] = d * (float)sc * (float)L[32 * j + l] - dmin * (float)m;
        }
    }
}

/* dot of a K-quant block with asymmetric codes L and 8 (sc, m) pairs */
static float kq_asym_dot(const uint8_t *L, const uint8_t *scales, float d, float dmin,
                         const struct blk_q8_k *b)
{
    int32_t sumi = 0, summ = 0;
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k4_scale_min(j, scales, &sc, &m);
        int32_t s = 0;
        for (int l = 0; l < 32; l++)
            s += L[32 * j + l] * b->qs[32 * j + l];
        sumi += sc * s;
        summ += m * (b->bsums[2 * j] + b->bsums[2 * j + 1]);
    }
    return b->d * (d * (float)sumi - dmin * (float)summ);
}

static float q4_k_dot(int64_t K, const void *w, const void *xq)
{
    const struct blk_q4_k *a = w;
    const struct blk_q8_k *b = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < K / QK_K; i++) {
        uint8_t L[QK_K];
        q4_k_codes(&a[i], L);
        sum += kq_asym_dot(L, a[i].scales, h2f(a[i].d), h2f(a[i].dmin), &b[i]);
    }
    return sum;
}

static void q5_k_from_float(const float *x, void *dst, int64_t n)
{
    struct blk_q5_k *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        uint8_t L[QK_K];
        kq_asym_block(x, 31, y[b].scales, &y[b].d, &y[b].dmin, L);
        memset(y[b].qh, 0, sizeof y[b].qh);
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) {
                int lo = L[64 * j + l], hi = L[64 * j + 32 + l];
                if (lo > 15) {
                    y[b].qh[l] |= (uint8_t)(1u << (2 * j));
                    lo -= 16;
                }
                if (hi > 15) {
                    y[b].qh[l] |= (uint8_t)(1u << (2 * j + 1));
                    hi -= 16;
                }
                y[b].qs[32 * j + l] = (uint8_t)(lo | (hi << 4));
            }
    }
}

static void q5_k_codes(const struct blk_q5_k *x, uint8_t *L)
{
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) {
            L[64 * j + l] =
                (uint8_t)((x->qs[32 * j + l] & 15) | (((x->qh[l] >> (2 * j)) & 1) << 4));
            L[64 * j + 32 + l] =
                (uint8_t)((x->qs[32 * j + l] >> 4) | (((x->qh[l] >> (2 * j + 1)) & 1) << 4));
        }
}

static void q5_k_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_q5_k *x = src;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        uint8_t L[QK_K];
        q5_k_codes(&x[b], L);
        const float d = h2f(x[b].d), dmin = h2f(x[b].dmin);
        for (int j = 0; j < 8; j++) {
            int sc, m;
            k4_scale_min(j, x[b].scales, &sc, &m);
            for (int l = 0; l < 32; l++)
                y[32 * j + l] = d * (float)sc * (float)L[32 * j + l] - dmin * (float)m;
        }
    }
}

static float q5_k_dot(int64_t K, const void *w, const void *xq)
{
    const struct blk_q5_k *a = w;
    const struct blk_q8_k *b = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < K / QK_K; i++) {
        uint8_t L[QK_K];
        q5_k_codes(&a[i], L);
        sum += kq_asym_dot(L, a[i].scales, h2f(a[i].d), h2f(a[i].dmin), &b[i]);
    }
    return sum;
}

/* ---- Q6_K ------------------------------------------------------------- */

/* codes L[256] (0..63, element order) into a Q6_K block's ql and qh */
static void q6_k_pack(const uint8_t *L, uint8_t *ql_out, uint8_t *qh_out)
{
    for (int h = 0; h < 2; h++) {
        uint8_t *ql = ql_out + 64 * h, *qh = qh_out + 32 * h;
        const uint8_t *Lh = L + 128 * h;
        for (int l = 0; l < 32; l++) {
            ql[l] = (uint8_t)((Lh[l] & 15) | ((Lh[l + 64] & 15) << 4));
            ql[l + 32] = (uint8_t)((Lh[l + 32] & 15) | ((Lh[l + 96] & 15) << 4));
            qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                              ((Lh[l + 96] >> 4) << 6));
        }
    }
}

static void q6_k_from_float(const float *x, void *dst, int64_t n)
{
    struct blk_q6_k *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float sc[16], max_sc = 0.0f, amax = 0.0f;
        for (int j = 0; j < 16; j++) {
            sc[j] = signed_absmax(x + 16 * j, 16) / -32.0f;
            if (fabsf(sc[j]) > amax) {
                amax = fabsf(sc[j]);
                max_sc = sc[j];
            }
        }
        const float iscale = max_sc != 0.0f ? -128.0f / max_sc : 0.0f;
        y[b].d = f2h(iscale != 0.0f ? 1.0f / iscale : 0.0f);
        const float d = h2f(y[b].d);
        uint8_t L[QK_K];
        for (int j = 0; j < 16; j++) {
            int s = nearest(iscale * sc[j]);
            y[b].scales[j] = (int8_t)(s > 127 ? 127 : s < -128 ? -128 : s);
            const float dd = d * (float)y[b].scales[j];
            for (int l = 0; l < 16; l++) {
                int q = dd != 0.0f ? nearest(x[16 * j + l] / dd) : 0;
                q = q < -32 ? -32 : q > 31 ? 31 : q;
                L[16 * j + l] = (uint8_t)(q + 32);
            }
        }
        q6_k_pack(L, y[b].ql, y[b].qh);
    }
}

/* the signed codes (-32..31) of a Q6_K block, element order */
static void q6_k_codes(const struct blk_q6_k *x, int8_t *q)
{
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
        int8_t *o = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            o[l] = (int8_t)(((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32);
            o[l + 32] = (int8_t)(((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
            o[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

static void q6_k_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_q6_k *x = src;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        int8_t q[QK_K];
        q6_k_codes(&x[b], q);
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK_K; j++)
            y[j] = d * (float)x[b].scales[j / 16] * (float)q[j];
    }
}

static float q6_k_dot(int64_t K, const void *w, const void *xq)
{
    const struct blk_q6_k *a = w;
    const struct blk_q8_k *b = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < K / QK_K; i++) {
        int8_t q[QK_K];
        q6_k_codes(&a[i], q);
        int32_t sumi = 0;
        for (int j = 0; j < 16; j++) {
            int32_t s = 0;
            for (int l = 0; l < 16; l++)
                s += q[16 * j + l] * b[i].qs[16 * j + l];
            sumi += a[i].scales[j] * s;
        }
        sum += h2f(a[i].d) * b[i].d * (float)sumi;
    }
    return sum;
}

/* ---- Q4_K_R8: Q4_K rows interleaved in eights (load-time layout) ------ */

/*
 * Why.  A decode step (one row of activations) reads every weight once, so
 * its product must run at the rate memory delivers W.  On the file's layout
 * a Q4_K row costs about 100 instructions per 256 weights at M = 1: the
 * 6-bit scales unpacked and spread, the nibbles split, an activation load
 * per 32 products; in cache that is about one core's read bandwidth, not
 * more, so from memory it falls short.  Interleaving eight rows puts row r
 * of the group in 32-bit lane r of every vector: four codes of each of
 * eight rows meet the same four activation bytes (one broadcast load), a
 * sub-block's 32 columns sum in 16-bit lanes and take their scale in one
 * vpmaddwd, and the scales and mins of eight rows are unpacked by a few
 * vector operations per block instead of scalar work per row.  The group
 * is also one contiguous stream of bytes where four file rows were four.
 *
 * Layout (struct blk_q4_k_r8, 1152 bytes = 8 x 144): a group of rows
 * 8g..8g+7 occupies the same bytes its eight file rows did (rows are
 * wstride apart, so the group starts at W + 8 g wstride), its blocks in
 * column order:
 *
 *   [d x8 f16][dmin x8 f16][sl 32][ml 32][sh 16][mh 16][qs 1024]
 *
 * The values are the file's (same f16 scales, same 6-bit codes), so
 * quant_unpack restores the file's bytes exactly and a row dequantizes to
 * the same floats.  quant_repack refuses a matrix whose rows are not a
 * multiple of 8: it stays in the file's layout and its kernels.
 *
 * Products: for each row r and activation row, per 256-column block the
 * integer sums isum = sum_j sc_j sum_k q x and msum = sum_j m_j (bsum_2j +
 * bsum_2j+1) (exact), then acc = fma(isum, d x_d, acc), acc = fma(-msum,
 * dmin x_d, acc) in block order, one float accumulator per output.  The
 * scalar kernel below and the AVX2 one (quant_avx2.c) do exactly these
 * operations, so they agree bit for bit and row m of Y never depends on M.
 */
#define R8 8

_Static_assert(sizeof(struct blk_q4_k_r8) == R8 * sizeof(struct blk_q4_k), "q4_K_r8 layout");

/* byte and nibble of value v = 8 j + r in sl / ml, byte and shift in sh / mh */
static inline int r8_lo_byte(int v)
{
    return (v >= 32 ? 16 : 0) + (v & 15);
}

static inline int r8_lo_shift(int v)
{
    return 4 * ((v >> 4) & 1);
}

static inline int r8_hi_shift(int v)
{
    return 2 * (v >> 4);
}

/* Row r's scales and mins (6-bit codes) from the sl, ml, sh, mh fields
 * that Q4_K_R8 and Q5_K_R8 blocks share. */
static void r8_scales_get(const uint8_t *sl, const uint8_t *ml, const uint8_t *sh,
                          const uint8_t *mh, int r, int *sc, int *mn)
{
    for (int j = 0; j < 8; j++) {
        const int v = 8 * j + r, lb = r8_lo_byte(v), ls = r8_lo_shift(v), hs = r8_hi_shift(v);
        sc[j] = ((sl[lb] >> ls) & 15) | (((sh[v & 15] >> hs) & 3) << 4);
        mn[j] = ((ml[lb] >> ls) & 15) | (((mh[v & 15] >> hs) & 3) << 4);
    }
}

/* Row r's scales and mins into those fields from a Q4_K or Q5_K block's
 * 12 bytes of them. */
static void r8_scales_put(uint8_t *sl, uint8_t *ml, uint8_t *sh, uint8_t *mh, int r,
                          const uint8_t *scales)
{
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        k4_scale_min(j, scales, &sc, &mn);
        const int v = 8 * j + r, lb = r8_lo_byte(v), ls = r8_lo_shift(v), hs = r8_hi_shift(v);
        sl[lb] = (uint8_t)((sl[lb] & ~(15 << ls)) | ((sc & 15) << ls));
        ml[lb] = (uint8_t)((ml[lb] & ~(15 << ls)) | ((mn & 15) << ls));
        sh[v & 15] = (uint8_t)((sh[v & 15] & ~(3 << hs)) | ((sc >> 4) << hs));
        mh[v & 15] = (uint8_t)((mh[v & 15] & ~(3 << hs)) | ((mn >> 4) << hs));
    }
}

/* Row r of a Q4_K_R8 block: scales, mins (6-bit codes) and codes q[256] in
 * column order. */
static void r8_row(const struct blk_q4_k_r8 *w, int r, int *sc, int *mn, uint8_t *q)
{
    r8_scales_get(w->sl, w->ml, w->sh, w->mh, r, sc, mn);
    for (int j = 0; j < 8; j++)
        for (int t = 0; t < 4; t++)
            for (int i = 0; i < 4; i++) {
                const uint8_t c = w->qs[128 * j + 32 * t + 4 * r + i];
                q[32 * j + 4 * t + i] = c & 15;
                q[32 * j + 16 + 4 * t + i] = c >> 4;
            }
}

/* Writes row r of a Q4_K_R8 block from its file block. */
static void r8_put(void *wp, int r, const void *xp)
{
    struct blk_q4_k_r8 *w = wp;
    const struct blk_q4_k *x = xp;
    w->d[r] = x->d;
    w->dmin[r] = x->dmin;
    r8_scales_put(w->sl, w->ml, w->sh, w->mh, r, x->scales);
    uint8_t L[QK_K];
    q4_k_codes(x, L);
    for (int j = 0; j < 8; j++)
        for (int t = 0; t < 4; t++)
            for (int i = 0; i < 4; i++)
                w->qs[128 * j + 32 * t + 4 * r + i] =
                    (uint8_t)(L[32 * j + 4 * t + i] | (L[32 * j + 16 + 4 * t + i] << 4));
}

/* Row r of a Q4_K_R8 block back to its file block. */
static void r8_get(const void *wp, int r, void *xp)
{
    const struct blk_q4_k_r8 *w = wp;
    struct blk_q4_k *x = xp;
    int sc[8], mn[8];
    uint8_t L[QK_K];
    r8_row(w, r, sc, mn, L);
    x->d = w->d[r];
    x->dmin = w->dmin[r];
    k4_pack_scales(sc, mn, x->scales);
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++)
            x->qs[32 * j + l] = (uint8_t)(L[64 * j + l] | (L[64 * j + 32 + l] << 4));
}

/* ---- Q5_K_R8: Q5_K rows interleaved in eights (load-time layout) ------ */

/*
 * Q4_K_R8's layout with the codes' fifth bits beside them (struct
 * blk_q5_k_r8, 1408 bytes = 8 x 176, drawn in model/quant_internal.h): the
 * bits of the 8 code vectors of a sub-block (4 loads, low and high
 * nibbles) sit in one 32-byte vector at the same bytes, bit 2 t and 2 t +
 * 1, so a kernel gets each vector's fifth bits by one shift and mask of a
 * vector it loads once per sub-block.  Products: as Q4_K_R8's, codes 0..31.
 */
_Static_assert(sizeof(struct blk_q5_k_r8) == R8 * sizeof(struct blk_q5_k), "q5_K_r8 layout");

/* Row r of a Q5_K_R8 block: scales, mins and codes q[256] (0..31) in column
 * order. */
static void r5_row(const struct blk_q5_k_r8 *w, int r, int *sc, int *mn, uint8_t *q)
{
    r8_scales_get(w->sl, w->ml, w->sh, w->mh, r, sc, mn);
    for (int j = 0; j < 8; j++)
        for (int t = 0; t < 4; t++)
            for (int i = 0; i < 4; i++) {
                const uint8_t c = w->qs[128 * j + 32 * t + 4 * r + i];
                const uint8_t h = w->qh[32 * j + 4 * r + i];
                q[32 * j + 4 * t + i] = (uint8_t)((c & 15) | (((h >> (2 * t)) & 1) << 4));
                q[32 * j + 16 + 4 * t + i] = (uint8_t)((c >> 4) | (((h >> (2 * t + 1)) & 1) << 4));
            }
}

/* Writes row r of a Q5_K_R8 block from its file block. */
static void r5_put(void *wp, int r, const void *xp)
{
    struct blk_q5_k_r8 *w = wp;
    const struct blk_q5_k *x = xp;
    w->d[r] = x->d;
    w->dmin[r] = x->dmin;
    r8_scales_put(w->sl, w->ml, w->sh, w->mh, r, x->scales);
    uint8_t L[QK_K];
    q5_k_codes(x, L);
    for (int j = 0; j < 8; j++)
        for (int i = 0; i < 4; i++) {
            uint8_t h = 0;
            for (int t = 0; t < 4; t++) {
                const int lo = L[32 * j + 4 * t + i], hi = L[32 * j + 16 + 4 * t + i];
                w->qs[128 * j + 32 * t + 4 * r + i] = (uint8_t)((lo & 15) | ((hi & 15) << 4));
                h |= (uint8_t)(((lo >> 4) << (2 * t)) | ((hi >> 4) << (2 * t + 1)));
            }
            w->qh[32 * j + 4 * r + i] = h;
        }
}

/* Row r of a Q5_K_R8 block back to its file block. */
static void r5_get(const void *wp, int r, void *xp)
{
    const struct blk_q5_k_r8 *w = wp;
    struct blk_q5_k *x = xp;
    int sc[8], mn[8];
    uint8_t L[QK_K];
    r5_row(w, r, sc, mn, L);
    x->d = w->d[r];
    x->dmin = w->dmin[r];
    k4_pack_scales(sc, mn, x->scales);
    memset(x->qh, 0, sizeof x->qh);
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) {
            const int lo = L[64 * j + l], hi = L[64 * j + 32 + l];
            x->qs[32 * j + l] = (uint8_t)((lo & 15) | ((hi & 15) << 4));
            x->qh[l] |= (uint8_t)(((lo >> 4) << (2 * j)) | ((hi >> 4) << (2 * j + 1)));
        }
}

static void r6_put(void *wp, int r, const void *xp);
static void r6_get(const void *wp, int r, void *xp);
static void r80_put(void *wp, int r, const void *xp);
static void r80_get(const void *wp, int r, void *xp);
static void r40_put(void *wp, int r, const void *xp);
static void r40_get(const void *wp, int r, void *xp);
static void r50_put(void *wp, int r, const void *xp);
static void r50_get(const void *wp, int r, void *xp);
static void r41_put(void *wp, int r, const void *xp);
static void r41_get(const void *wp, int r, void *xp);
static void r51_put(void *wp, int r, const void *xp);
static void r51_get(const void *wp, int r, void *xp);

/* The load-time layouts' codecs: file type, its block (elements) and block
 * bytes, and row r of a layout block written from its file block (put) or
 * back (get). */
static const struct r8_codec {
    enum gguf_tensor_type t;
    int32_t blk;
    size_t fb;
    void (*put)(void *w, int r, const void *x);
    void (*get)(const void *w, int r, void *x);
} r8_codecs[] = {
    {GGUF_TENSOR_Q4_K, QK_K, sizeof(struct blk_q4_k), r8_put, r8_get},
    {GGUF_TENSOR_Q5_K, QK_K, sizeof(struct blk_q5_k), r5_put, r5_get},
    {GGUF_TENSOR_Q6_K, QK_K, sizeof(struct blk_q6_k), r6_put, r6_get},
    {GGUF_TENSOR_Q8_0, QK8_0, sizeof(struct blk_q8_0), r80_put, r80_get},
    {GGUF_TENSOR_Q4_0, QK4_0, sizeof(struct blk_q4_0), r40_put, r40_get},
    {GGUF_TENSOR_Q5_0, QK5_0, sizeof(struct blk_q5_0), r50_put, r50_get},
    {GGUF_TENSOR_Q4_1, QK4_1, sizeof(struct blk_q4_1), r41_put, r41_get},
    {GGUF_TENSOR_Q5_1, QK5_1, sizeof(struct blk_q5_1), r51_put, r51_get},
};

static const struct r8_codec *r8_codec_of(enum gguf_tensor_type t)
{
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(r8_codecs); i++)
        if (r8_codecs[i].t == t)
            return &r8_codecs[i];
    return NULL;
}

/* Both directions over every group of W (a file type of r8_codecs),
 * through one group of scratch. */
static int r8_convert(enum gguf_tensor_type t, bool pack, void *W, int64_t N, int64_t K)
{
    const struct r8_codec *c = r8_codec_of(t);
    if (!c || N < 0 || N % R8 || K <= 0 || K % c->blk)
        return -EINVAL;
    const int64_t nb = K / c->blk;
    const size_t fb = c->fb;
    const size_t gbytes = (size_t)nb * R8 * fb;
    uint8_t *tmp = malloc(gbytes);
    if (!tmp)
        return -ENOMEM;
    for (int64_t g = 0; g < N / R8; g++) {
        uint8_t *grp = (uint8_t *)W + (size_t)g * gbytes;
        memcpy(tmp, grp, gbytes);
        if (pack)
            memset(grp, 0, gbytes);
        for (int r = 0; r < R8; r++)
            for (int64_t b = 0; b < nb; b++) {
                const size_t fo = ((size_t)r * (size_t)nb + (size_t)b) * fb,
                             ro = (size_t)b * R8 * fb;
                if (pack)
                    c->put(grp + ro, r, tmp + fo);
                else
                    c->get(tmp + ro, r, grp + fo);
            }
    }
    free(tmp);
    return 0;
}

/* Row r of block b of a Q4_K_R8 (q5 false) or Q5_K_R8 group at g: its
 * scales, mins, codes (column order) and f16 d, dmin. */
static void kr8_block(bool q5, const uint8_t *g, int64_t b, int r, int *sc, int *mn, uint8_t *L,
                      float *d, float *dmin)
{
    if (q5) {
        const struct blk_q5_k_r8 *w = (const struct blk_q5_k_r8 *)g + b;
        r5_row(w, r, sc, mn, L);
        *d = h2f(w->d[r]), *dmin = h2f(w->dmin[r]);
    } else {
        const struct blk_q4_k_r8 *w = (const struct blk_q4_k_r8 *)g + b;
        r8_row(w, r, sc, mn, L);
        *d = h2f(w->d[r]), *dmin = h2f(w->dmin[r]);
    }
}

/* Row r of the Q4_K_R8 / Q5_K_R8 group at g (nb blocks) to f32, as
 * q4_k_to_float / q5_k_to_float compute the file's row. */
static void kr8_row_to_float(bool q5, const uint8_t *g, int64_t nb, int r, float *y)
{
    for (int64_t b = 0; b < nb; b++, y += QK_K) {
        int sc[8], mn[8];
        uint8_t L[QK_K];
        float d, dmin;
        kr8_block(q5, g, b, r, sc, mn, L, &d, &dmin);
        for (int j = 0; j < 8; j++)
            for (int l = 0; l < 32; l++)
                y[32 * j + l] = d * (float)sc[j] * (float)L[32 * j + l] - dmin * (float)mn[j];
    }
}

/* The scalar Q4_K_R8 / Q5_K_R8 product kernel; the operations of the AVX2
 * ones, in the same order (see above). */
static void kr8_gemm(bool q5, const void *W, size_t wstride, int64_t K, int64_t n0, int64_t n1,
                     const void *Xq, size_t xstride, int64_t M, float *Y, int64_t ldy, float beta)
{
    const int64_t nb = K / QK_K;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *g = (const uint8_t *)W + (size_t)(n / R8) * R8 * wstride;
        const int r = (int)(n % R8);
        for (int64_t m = 0; m < M; m++) {
            const struct blk_q8_k *x = (const struct blk_q8_k *)((const uint8_t *)Xq + m * xstride);
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                int sc[8], mn[8];
                uint8_t L[QK_K];
                float d, dmin;
                kr8_block(q5, g, b, r, sc, mn, L, &d, &dmin);
                int32_t isum = 0, msum = 0;
                for (int j = 0; j < 8; j++) {
                    int32_t s = 0;
                    for (int l = 0; l < 32; l++)
                        s += L[32 * j + l] * x[b].qs[32 * j + l];
                    isum += sc[j] * s;
                    msum += mn[j] * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
                }
                acc = fmaf((float)isum, d * x[b].d, acc);
                acc = fmaf(-(float)msum, dmin * x[b].d, acc);
            }
            float *y = &Y[m * ldy + n];
            *y = beta != 0.0f ? *y + acc : acc;
        }
    }
}

static void q4_k_r8_gemm(const void *W, size_t wstride, int64_t K, int64_t n0, int64_t n1,
                         const void *Xq, size_t xstride, int64_t M, float *Y, int64_t ldy,
                         float beta)
{
    kr8_gemm(false, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
}

static void q5_k_r8_gemm(const void *W, size_t wstride, int64_t K, int64_t n0, int64_t n1,
                         const void *Xq, size_t xstride, int64_t M, float *Y, int64_t ldy,
                         float beta)
{
    kr8_gemm(true, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
}

/* ---- Q6_K_R8: Q6_K rows interleaved in eights (load-time layout) ------ */

/*
 * The same idea for Q6_K (struct blk_q6_k_r8, 1680 bytes = 8 x 210): row
 * r in 32-bit lane r, four codes of each of eight rows per activation
 * broadcast.  Codes are stored as 0..63 (the file's q + 32), the offset
 * coming off through the activations' 16-column sums.  Per 256-column
 * block, row and activation row: isum = sum_j sc_j (sum_k q x - 32 bsum_j)
 * (exact), then acc = fma(isum, d x_d, acc); scalar and AVX2 agree bit for
 * bit.
 */
_Static_assert(sizeof(struct blk_q6_k_r8) == R8 * sizeof(struct blk_q6_k), "q6_K_r8 layout");

/* Row r of a Q6_K_R8 block: scales and codes q[256] (0..63) in column
 * order. */
static void r6_row(const struct blk_q6_k_r8 *w, int r, int *sc, uint8_t *q)
{
    for (int j = 0; j < 16; j++)
        sc[j] = w->sc[8 * j + r];
    for (int c = 0; c < 8; c++)
        for (int t = 0; t < 4; t++)
            for (int i = 0; i < 4; i++) {
                const uint8_t l = w->ql[128 * c + 32 * t + 4 * r + i];
                const uint8_t h0 = w->qh[64 * c + 4 * r + i], h1 = w->qh[64 * c + 32 + 4 * r + i];
                q[32 * c + 4 * t + i] = (uint8_t)((l & 15) | (((h0 >> (2 * t)) & 3) << 4));
                q[32 * c + 16 + 4 * t + i] = (uint8_t)((l >> 4) | (((h1 >> (2 * t)) & 3) << 4));
            }
}

static void r6_put(void *wp, int r, const void *xp)
{
    struct blk_q6_k_r8 *w = wp;
    const struct blk_q6_k *x = xp;
    int8_t q[QK_K];
    q6_k_codes(x, q);
    w->d[r] = x->d;
    for (int j = 0; j < 16; j++)
        w->sc[8 * j + r] = x->scales[j];
    for (int c = 0; c < 8; c++)
        for (int t = 0; t < 4; t++)
            for (int i = 0; i < 4; i++) {
                const int lo = q[32 * c + 4 * t + i] + 32, hi = q[32 * c + 16 + 4 * t + i] + 32;
                w->ql[128 * c + 32 * t + 4 * r + i] = (uint8_t)((lo & 15) | ((hi & 15) << 4));
                uint8_t *h0 = &w->qh[64 * c + 4 * r + i], *h1 = &w->qh[64 * c + 32 + 4 * r + i];
                *h0 = (uint8_t)((*h0 & ~(3 << (2 * t))) | ((lo >> 4) << (2 * t)));
                *h1 = (uint8_t)((*h1 & ~(3 << (2 * t))) | ((hi >> 4) << (2 * t)));
            }
}

static void r6_get(const void *wp, int r, void *xp)
{
    const struct blk_q6_k_r8 *w = wp;
    struct blk_q6_k *x = xp;
    int sc[16];
    uint8_t L[QK_K];
    r6_row(w, r, sc, L);
    x->d = w->d[r];
    for (int j = 0; j < 16; j++)
        x->scales[j] = (int8_t)sc[j];
    q6_k_pack(L, x->ql, x->qh);
}

static void q6_k_r8_row_to_float(const struct blk_q6_k_r8 *w, int64_t nb, int r, float *y)
{
    for (int64_t b = 0; b < nb; b++, y += QK_K) {
        int sc[16];
        uint8_t L[QK_K];
        r6_row(&w[b], r, sc, L);
        const float d = h2f(w[b].d[r]);
        for (int j = 0; j < QK_K; j++)
            y[j] = d * (float)sc[j / 16] * (float)((int)L[j] - 32);
    }
}

static void q6_k_r8_gemm(const void *W, size_t wstride, int64_t K, int64_t n0, int64_t n1,
                         const void *Xq, size_t xstride, int64_t M, float *Y, int64_t ldy,
                         float beta)
{
    const int64_t nb = K / QK_K;
    for (int64_t n = n0; n < n1; n++) {
        const struct blk_q6_k_r8 *w =
            (const struct blk_q6_k_r8 *)((const uint8_t *)W + (size_t)(n / R8) * R8 * wstride);
        const int r = (int)(n % R8);
        for (int64_t m = 0; m < M; m++) {
            const struct blk_q8_k *x = (const struct blk_q8_k *)((const uint8_t *)Xq + m * xstride);
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                int sc[16];
                uint8_t L[QK_K];
                r6_row(&w[b], r, sc, L);
                int32_t isum = 0;
                for (int j = 0; j < 16; j++) {
                    int32_t s = 0;
                    for (int l = 0; l < 16; l++)
                        s += L[16 * j + l] * x[b].qs[16 * j + l];
                    isum += sc[j] * (s - 32 * x[b].bsums[j]);
                }
                acc = fmaf((float)isum, h2f(w[b].d[r]) * x[b].d, acc);
            }
            float *y = &Y[m * ldy + n];
            *y = beta != 0.0f ? *y + acc : acc;
        }
    }
}

/* ---- Q8_0_R8: Q8_0 rows interleaved in eights (load-time layout) ------ */

/*
 * Why.  Batched products (M = 64..576 rows of activations under a serving
 * load) are bound by the arithmetic of the int8 tile.  On the file's
 * layout each 32-byte weight vector is one row's block, so every product of
 * four weight rows ends in horizontal adds (vphaddd) to bring the four
 * rows' sums together, and each row's scale is converted on its own.  With
 * eight rows interleaved (struct blk_q8_0_r8, 272 bytes = 8 x 34), row r of
 * the group sits in 32-bit lane r of every vector: four codes of each of
 * eight rows meet the same four activation bytes (one broadcast), the
 * 32-bit sums come out one lane per row with no horizontal adds, and the
 * eight rows' scales convert in one instruction.
 *
 * Layout: a group of rows 8g..8g+7 occupies the same bytes its eight file
 * rows did, its blocks in column order:
 *
 *   [d x8 f16][qs 256: vector t = 0..7, byte 4 r + i = row r, column 4 t + i]
 *
 * The scales and codes are the file's, so quant_unpack restores its bytes
 * exactly and a row dequantizes to the same floats.
 *
 * Products: for each row r and activation row, per 32-column block the
 * integer sum isum = sum_k q x (exact), then acc = fma(isum, d_w x_d, acc)
 * in block order, one float accumulator per output.  The scalar kernel
 * below and the AVX2 one (quant_avx2.c) do exactly these operations, so
 * they agree bit for bit and row m of Y never depends on M.
 */
_Static_assert(sizeof(struct blk_q8_0_r8) == R8 * sizeof(struct blk_q8_0), "q8_0_r8 layout");

static void r80_put(void *wp, int r, const void *xp)
{
    struct blk_q8_0_r8 *w = wp;
    const struct blk_q8_0 *x = xp;
    w->d[r] = x->d;
    for (int t = 0; t < 8; t++)
        for (int i = 0; i < 4; i++)
            w->qs[32 * t + 4 * r + i] = x->qs[4 * t + i];
}

static void r80_get(const void *wp, int r, void *xp)
{
    const struct blk_q8_0_r8 *w = wp;
    struct blk_q8_0 *x = xp;
    x->d = w->d[r];
    for (int t = 0; t < 8; t++)
        for (int i = 0; i < 4; i++)
            x->qs[4 * t + i] = w->qs[32 * t + 4 * r + i];
}

static void q8_0_r8_row_to_float(const struct blk_q8_0_r8 *w, int64_t nb, int r, float *y)
{
    for (int64_t b = 0; b < nb; b++, y += QK8_0) {
        struct blk_q8_0 x;
        r80_get(&w[b], r, &x);
        q8_0_to_float(&x, y, QK8_0);
    }
}

static void q8_0_r8_gemm(const void *W, size_t wstride, int64_t K, int64_t n0, int64_t n1,
                         const void *Xq, size_t xstride, int64_t M, float *Y, int64_t ldy,
                         float beta)
{
    const int64_t nb = K / QK8_0;
    for (int64_t n = n0; n < n1; n++) {
        const struct blk_q8_0_r8 *w =
            (const struct blk_q8_0_r8 *)((const uint8_t *)W + (size_t)(n / R8) * R8 * wstride);
        const int r = (int)(n % R8);
        for (int64_t m = 0; m < M; m++) {
            const struct blk_q8_0 *x = (const struct blk_q8_0 *)((const uint8_t *)Xq + m * xstride);
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                int32_t isum = 0;
                for (int t = 0; t < 8; t++)
                    for (int i = 0; i < 4; i++)
                        isum += w[b].qs[32 * t + 4 * r + i] * x[b].qs[4 * t + i];
                acc = fmaf((float)isum, h2f(w[b].d[r]) * h2f(x[b].d), acc);
            }
            float *y = &Y[m * ldy + n];
            *y = beta != 0.0f ? *y + acc : acc;
        }
    }
}

/* ---- Q4_0_R8 .. Q5_1_R8: the 32-blocks of four bits, rows in eights ---- */

/*
 * Why.  On the file's layout a Q4_0 block's 16 bytes are one row's: the
 * AVX2 kernel unpacked them to 32 signed bytes (code - 8) and ran Q8_0's
 * sign trick, vpsignb + vpmaddubsw + vpmaddwd per 32 products of one row,
 * at about a third of the Q4_K_R8 kernel's rate; Q4_1 and Q5_1 had no
 * AVX2 kernel at all.  Interleaved by eight as Q4_K_R8's sub-blocks are
 * (row r in 32-bit lane r), the codes stay unsigned (0..15; the five-bit
 * types' 0..31) and vpmaddubsw multiplies them by the activations as they
 * are: a block's eight (five bits: four) products of eight rows sum in 16
 * bits before one vpmaddwd widens them.  The activations' code sums do the
 * rest: Q4_0's and Q5_0's offset o (8, 16) comes off as sum_k (c - o) x =
 * sum_k c x - o s, and Q4_1's and Q5_1's mins meet s, sum_k (d c + m) x =
 * d sum_k c x + m s, with s carried in the activation block (Q8_0S: Q8_0's
 * d and codes, and s).
 *
 * Layout (blk_q4_0_r8 144 bytes = 8 x 18, blk_q5_0_r8 176 = 8 x 22,
 * blk_q4_1_r8 160 = 8 x 20, blk_q5_1_r8 192 = 8 x 24): a group of rows
 * 8g..8g+7 occupies the same bytes its eight file rows did, its blocks in
 * column order:
 *
 *   Q4_0_R8  [d x8 f16][qs 128: vector t = 0..3, byte 4 r + i = row r's
 *            codes of columns 4 t + i (low nibble), 16 + 4 t + i (high)]
 *   Q5_0_R8  [d x8 f16][qs 128][qh 32: byte 4 r + i, bit 2 t (2 t + 1) =
 *            the fifth bit of the code in qs vector t's low (high) nibble]
 *   Q4_1_R8  [d x8 f16][m x8 f16][qs 128]
 *   Q5_1_R8  [d x8 f16][m x8 f16][qs 128][qh 32]
 *
 * A qs byte is the file's byte 4 t + i of row r as it is (the file holds
 * column j in byte j's low nibble, j + 16 in its high one).  Scales, mins
 * and codes are the file's: quant_unpack restores its bytes exactly and a
 * row dequantizes to the same floats.
 *
 * Products: per block, row r and activation row, the integer isum = sum_k
 * c x (minus o s for Q4_0, Q5_0: exactly the file layout's sum_k (c - o)
 * x), then acc = fma(isum, d_w x_d, acc), and for Q4_1, Q5_1 acc = fma(s,
 * m_w x_d, acc), in block order.  (Their file layout's kernel takes m s
 * from Q8_1's half-float d s instead; s is exact here.)  The scalar kernel
 * below and the AVX2 one (quant_avx2.c) do exactly these operations, so
 * they agree bit for bit and row m of Y never depends on M.
 */
_Static_assert(sizeof(struct blk_q4_0_r8) == R8 * sizeof(struct blk_q4_0), "q4_0_r8 layout");
_Static_assert(sizeof(struct blk_q5_0_r8) == R8 * sizeof(struct blk_q5_0), "q5_0_r8 layout");
_Static_assert(sizeof(struct blk_q4_1_r8) == R8 * sizeof(struct blk_q4_1), "q4_1_r8 layout");
_Static_assert(sizeof(struct blk_q5_1_r8) == R8 * sizeof(struct blk_q5_1), "q5_1_r8 layout");

/* Row r's codes into a layout block's qs (and qh, for the five-bit types;
 * else NULL) from its file block's qs (qh). */
static void r0_put_codes(uint8_t *qs, uint8_t *qh, int r, const uint8_t *fqs, const uint8_t *fqh)
{
    for (int t = 0; t < 4; t++)
        memcpy(qs + 32 * t + 4 * r, fqs + 4 * t, 4);
    if (!qh)
        return;
    uint32_t h;
    memcpy(&h, fqh, 4); /* bit j: column j's fifth bit */
    for (int i = 0; i < 4; i++) {
        uint8_t b = 0;
        for (int t = 0; t < 4; t++)
            b |= (uint8_t)(((h >> (4 * t + i)) & 1) << (2 * t) | ((h >> (16 + 4 * t + i)) & 1)
                                                                     << (2 * t + 1));
        qh[4 * r + i] = b;
    }
}

/* The inverse: row r's codes back into a file block's qs (qh). */
static void r0_get_codes(const uint8_t *qs, const uint8_t *qh, int r, uint8_t *fqs, uint8_t *fqh)
{
    for (int t = 0; t < 4; t++)
        memcpy(fqs + 4 * t, qs + 32 * t + 4 * r, 4);
    if (!qh)
        return;
    uint32_t h = 0;
    for (int i = 0; i < 4; i++)
        for (int t = 0; t < 4; t++) {
            const uint32_t b = qh[4 * r + i];
            h |= ((b >> (2 * t)) & 1) << (4 * t + i) | ((b >> (2 * t + 1)) & 1) << (16 + 4 * t + i);
        }
    memcpy(fqh, &h, 4);
}

static void r40_put(void *wp, int r, const void *xp)
{
    struct blk_q4_0_r8 *w = wp;
    const struct blk_q4_0 *x = xp;
    w->d[r] = x->d;
    r0_put_codes(w->qs, NULL, r, x->qs, NULL);
}

static void r40_get(const void *wp, int r, void *xp)
{
    const struct blk_q4_0_r8 *w = wp;
    struct blk_q4_0 *x = xp;
    x->d = w->d[r];
    r0_get_codes(w->qs, NULL, r, x->qs, NULL);
}

static void r50_put(void *wp, int r, const void *xp)
{
    struct blk_q5_0_r8 *w = wp;
    const struct blk_q5_0 *x = xp;
    w->d[r] = x->d;
    r0_put_codes(w->qs, w->qh, r, x->qs, x->qh);
}

static void r50_get(const void *wp, int r, void *xp)
{
    const struct blk_q5_0_r8 *w = wp;
    struct blk_q5_0 *x = xp;
    x->d = w->d[r];
    r0_get_codes(w->qs, w->qh, r, x->qs, x->qh);
}

static void r41_put(void *wp, int r, const void *xp)
{
    struct blk_q4_1_r8 *w = wp;
    const struct blk_q4_1 *x = xp;
    w->d[r] = x->d;
    w->m[r] = x->m;
    r0_put_codes(w->qs, NULL, r, x->qs, NULL);
}

static void r41_get(const void *wp, int r, void *xp)
{
    const struct blk_q4_1_r8 *w = wp;
    struct blk_q4_1 *x = xp;
    x->d = w->d[r];
    x->m = w->m[r];
    r0_get_codes(w->qs, NULL, r, x->qs, NULL);
}

static void r51_put(void *wp, int r, const void *xp)
{
    struct blk_q5_1_r8 *w = wp;
    const struct blk_q5_1 *x = xp;
    w->d[r] = x->d;
    w->m[r] = x->m;
    r0_put_codes(w->qs, w->qh, r, x->qs, x->qh);
}

static void r51_get(const void *wp, int r, void *xp)
{
    const struct blk_q5_1_r8 *w = wp;
    struct blk_q5_1 *x = xp;
    x->d = w->d[r];
    x->m = w->m[r];
    r0_get_codes(w->qs, w->qh, r, x->qs, x->qh);
}

/* Row r of block b of a group at g of layout t (Q4_0_R8 .. Q5_1_R8). */
struct r0_row {
    float d, m; /* scale, and min (Q4_1, Q5_1; else 0) */
    int o;      /* the codes' offset (Q4_0 8, Q5_0 16; else 0) */
    int c[32];  /* codes, column order */
};

static void r0_block(enum gguf_tensor_type t, const uint8_t *g, int64_t b, int r, struct r0_row *o)
{
    const bool q5 = t == QUANT_Q5_0_R8 || t == QUANT_Q5_1_R8;
    const bool asym = t == QUANT_Q4_1_R8 || t == QUANT_Q5_1_R8;
    const size_t bb = t == QUANT_Q4_0_R8   ? sizeof(struct blk_q4_0_r8)
                      : t == QUANT_Q5_0_R8 ? sizeof(struct blk_q5_0_r8)
                      : t == QUANT_Q4_1_R8 ? sizeof(struct blk_q4_1_r8)
                                           : sizeof(struct blk_q5_1_r8);
    const uint8_t *blk = g + (size_t)b * bb;
    const uint8_t *qs =
        blk + (asym ? offsetof(struct blk_q4_1_r8, qs) : offsetof(struct blk_q4_0_r8, qs));
    uint16_t d, m = 0;
    memcpy(&d, blk + 2 * r, 2);
    if (asym)
        memcpy(&m, blk + offsetof(struct blk_q4_1_r8, m) + 2 * r, 2);
    o->d = h2f(d);
    o->m = asym ? h2f(m) : 0.0f;
    o->o = asym ? 0 : q5 ? 16 : 8;
    for (int tt = 0; tt < 4; tt++)
        for (int i = 0; i < 4; i++) {
            const int v = qs[32 * tt + 4 * r + i];
            const int h = q5 ? qs[128 + 4 * r + i] >> (2 * tt) : 0; /* qh follows qs */
            o->c[4 * tt + i] = (v & 15) | (h & 1) << 4;
            o->c[16 + 4 * tt + i] = (v >> 4) | (h >> 1 & 1) << 4;
        }
}

/* Row r of the group at g (nb blocks of layout t) to f32, as the file
 * type's to_float computes it. */
static void r0_row_to_float(enum gguf_tensor_type t, const uint8_t *g, int64_t nb, int r, float *y)
{
    for (int64_t b = 0; b < nb; b++, y += QK4_0) {
        struct r0_row w;
        r0_block(t, g, b, r, &w);
        for (int k = 0; k < QK4_0; k++)
            y[k] = w.o ? w.d * (float)(w.c[k] - w.o) : w.d * (float)w.c[k] + w.m;
    }
}

/* The scalar Q4_0_R8 .. Q5_1_R8 product kernel (see above). */
static void r0_gemm(enum gguf_tensor_type t, const void *W, size_t wstride, int64_t K, int64_t n0,
                    int64_t n1, const void *Xq, size_t xstride, int64_t M, float *Y, int64_t ldy,
                    float beta)
{
    const int64_t nb = K / QK4_0;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *g = (const uint8_t *)W + (size_t)(n / R8) * R8 * wstride;
        const int r = (int)(n % R8);
        for (int64_t m = 0; m < M; m++) {
            const struct blk_q8_0s *x =
                (const struct blk_q8_0s *)((const uint8_t *)Xq + m * xstride);
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                struct r0_row w;
                r0_block(t, g, b, r, &w);
                int32_t isum = 0;
                for (int k = 0; k < QK4_0; k++)
                    isum += w.c[k] * x[b].qs[k];
                const float dx = h2f(x[b].d);
                acc = fmaf((float)(isum - w.o * x[b].s), w.d * dx, acc);
                if (t == QUANT_Q4_1_R8 || t == QUANT_Q5_1_R8)
                    acc = fmaf((float)x[b].s, w.m * dx, acc);
            }
            float *y = &Y[m * ldy + n];
            *y = beta != 0.0f ? *y + acc : acc;
        }
    }
}

#define R0_GEMM(name, T)                                                                           \
    static void name(const void *W, size_t wstride, int64_t K, int64_t n0, int64_t n1,             \
                     const void *Xq, size_t xstride, int64_t M, float *Y, int64_t ldy, float beta) \
    {                                                                                              \
        r0_gemm(T, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);                           \
    }
R0_GEMM(q4_0_r8_gemm, QUANT_Q4_0_R8)
R0_GEMM(q5_0_r8_gemm, QUANT_Q5_0_R8)
R0_GEMM(q4_1_r8_gemm, QUANT_Q4_1_R8)
R0_GEMM(q5_1_r8_gemm, QUANT_Q5_1_R8)

/* ---- the table -------------------------------------------------------- */

#if defined(__x86_64__) && defined(FOLIO_QUANT_X86)
#define X86(f) f
#else
#define X86(f) NULL
#endif

/* One row per type: name, elements per block, bytes per block, a file type?,
 * activations' type, to f32, from f32, scalar dot, AVX2 and AVX-512 kernels
 * (NULL: the next lower ISA's, finally the scalar dot). */
// clang-format off
#define ROW(T, blk, bytes, files, dot, to, from, vdot, avx2, avx512) \
    [GGUF_TENSOR_##T] = {#T, blk, bytes, files, GGUF_TENSOR_##dot, to, from, vdot, \
                         {NULL, avx2, avx512}, 0, GGUF_TENSOR_##T}
static const struct quant_traits traits[] = {
    ROW(F32,  1,     4,                        true,  F32,  f32_to_float,  f32_from_float,  NULL,      NULL, NULL),
    ROW(F16,  1,     2,                        true,  F32,  f16_to_float,  f16_from_float,  NULL,      NULL, NULL),
    ROW(BF16, 1,     2,                        true,  F32,  bf16_to_float, bf16_from_float, NULL,      NULL, NULL),
    ROW(Q8_0, QK8_0, sizeof(struct blk_q8_0),  true,  Q8_0, q8_0_to_float, q8_0_from_float, q8_0_dot,
        X86(quant__gemm_q8_0_avx2), X86(quant__gemm_q8_0_avx512)),
    ROW(Q4_0, QK4_0, sizeof(struct blk_q4_0),  true,  Q8_0, q4_0_to_float, q4_0_from_float, q4_0_dot,
        X86(quant__gemm_q4_0_avx2), NULL),
    ROW(Q4_1, QK4_1, sizeof(struct blk_q4_1),  true,  Q8_1, q4_1_to_float, q4_1_from_float, q4_1_dot,  NULL, NULL),
    ROW(Q5_0, QK5_0, sizeof(struct blk_q5_0),  true,  Q8_0, q5_0_to_float, q5_0_from_float, q5_0_dot,
        X86(quant__gemm_q5_0_avx2), NULL),
    ROW(Q5_1, QK5_1, sizeof(struct blk_q5_1),  true,  Q8_1, q5_1_to_float, q5_1_from_float, q5_1_dot,  NULL, NULL),
    ROW(Q4_K, QK_K,  sizeof(struct blk_q4_k),  true,  Q8_K, q4_k_to_float, q4_k_from_float, q4_k_dot,
        X86(quant__gemm_q4_k_avx2), NULL),
    ROW(Q5_K, QK_K,  sizeof(struct blk_q5_k),  true,  Q8_K, q5_k_to_float, q5_k_from_float, q5_k_dot,
        X86(quant__gemm_q5_k_avx2), NULL),
    ROW(Q6_K, QK_K,  sizeof(struct blk_q6_k),  true,  Q8_K, q6_k_to_float, q6_k_from_float, q6_k_dot,
        X86(quant__gemm_q6_k_avx2), NULL),
    /* activation types: in products only */
    ROW(Q8_1, QK8_1, sizeof(struct blk_q8_1),  false, Q8_1, q8_1_to_float, q8_1_from_float, NULL,      NULL, NULL),
    ROW(Q8_K, QK_K,  sizeof(struct blk_q8_k),  false, Q8_K, q8_k_to_float, q8_k_from_float, NULL,      NULL, NULL),
    /* load-time layouts: in memory only; rows through quant_rows_to_float */
    [QUANT_Q4_K_R8] = {"Q4_K_R8", QK_K, sizeof(struct blk_q4_k), false, GGUF_TENSOR_Q8_K,
                       NULL, NULL, NULL, {q4_k_r8_gemm, X86(quant__gemm_q4_k_r8_avx2),
                        X86(quant__gemm_q4_k_r8_avx512)},
                       R8, GGUF_TENSOR_Q4_K},
    [QUANT_Q5_K_R8] = {"Q5_K_R8", QK_K, sizeof(struct blk_q5_k), false, GGUF_TENSOR_Q8_K,
                       NULL, NULL, NULL, {q5_k_r8_gemm, X86(quant__gemm_q5_k_r8_avx2), NULL},
                       R8, GGUF_TENSOR_Q5_K},
    [QUANT_Q6_K_R8] = {"Q6_K_R8", QK_K, sizeof(struct blk_q6_k), false, GGUF_TENSOR_Q8_K,
                       NULL, NULL, NULL, {q6_k_r8_gemm, X86(quant__gemm_q6_k_r8_avx2),
                        X86(quant__gemm_q6_k_r8_avx512)},
                       R8, GGUF_TENSOR_Q6_K},
    [QUANT_Q8_0_R8] = {"Q8_0_R8", QK8_0, sizeof(struct blk_q8_0), false, GGUF_TENSOR_Q8_0,
                       NULL, NULL, NULL, {q8_0_r8_gemm, X86(quant__gemm_q8_0_r8_avx2),
                        X86(quant__gemm_q8_0_r8_avx512)},
                       R8, GGUF_TENSOR_Q8_0},
    [QUANT_Q4_0_R8] = {"Q4_0_R8", QK4_0, sizeof(struct blk_q4_0), false, QUANT_Q8_0S,
                       NULL, NULL, NULL, {q4_0_r8_gemm, X86(quant__gemm_q4_0_r8_avx2), NULL},
                       R8, GGUF_TENSOR_Q4_0},
    [QUANT_Q5_0_R8] = {"Q5_0_R8", QK5_0, sizeof(struct blk_q5_0), false, QUANT_Q8_0S,
                       NULL, NULL, NULL, {q5_0_r8_gemm, X86(quant__gemm_q5_0_r8_avx2), NULL},
                       R8, GGUF_TENSOR_Q5_0},
    [QUANT_Q4_1_R8] = {"Q4_1_R8", QK4_1, sizeof(struct blk_q4_1), false, QUANT_Q8_0S,
                       NULL, NULL, NULL, {q4_1_r8_gemm, X86(quant__gemm_q4_1_r8_avx2), NULL},
                       R8, GGUF_TENSOR_Q4_1},
    [QUANT_Q5_1_R8] = {"Q5_1_R8", QK5_1, sizeof(struct blk_q5_1), false, QUANT_Q8_0S,
                       NULL, NULL, NULL, {q5_1_r8_gemm, X86(quant__gemm_q5_1_r8_avx2), NULL},
                       R8, GGUF_TENSOR_Q5_1},
    /* the activations of the four above */
    [QUANT_Q8_0S] = {"Q8_0S", QK8_0, sizeof(struct blk_q8_0s), false, QUANT_Q8_0S,
                     q8_0s_to_float, q8_0s_from_float, NULL, {NULL, NULL, NULL}, 0, QUANT_Q8_0S},
};
// clang-format on

const struct quant_traits *quant_traits_of(enum gguf_tensor_type t)
{
    if ((unsigned)t >= FOLIO_ARRAY_LEN(traits) || !traits[t].name)
        return NULL;
    return &traits[t];
}

static const struct quant_traits *row_of(enum gguf_tensor_type t)
{
    const struct quant_traits *r = quant_traits_of(t);
    FOLIO_CHECK(r != NULL, "tensor type %d has no row in the type table", (int)t);
    return r;
}

enum gguf_tensor_type quant_dot_type(enum gguf_tensor_type t)
{
    return row_of(t)->dot_type;
}

enum gguf_tensor_type quant_repack_type(enum gguf_tensor_type t)
{
    return t == GGUF_TENSOR_Q4_K   ? QUANT_Q4_K_R8
           : t == GGUF_TENSOR_Q5_K ? QUANT_Q5_K_R8
           : t == GGUF_TENSOR_Q6_K ? QUANT_Q6_K_R8
           : t == GGUF_TENSOR_Q8_0 ? QUANT_Q8_0_R8
           : t == GGUF_TENSOR_Q4_0 ? QUANT_Q4_0_R8
           : t == GGUF_TENSOR_Q5_0 ? QUANT_Q5_0_R8
           : t == GGUF_TENSOR_Q4_1 ? QUANT_Q4_1_R8
           : t == GGUF_TENSOR_Q5_1 ? QUANT_Q5_1_R8
                                   : t;
}

int quant_repack(enum gguf_tensor_type t, void *W, int64_t N, int64_t K)
{
    return r8_convert(t, true, W, N, K); /* -EINVAL: no load-time layout */
}

static int isa_get(void);

/* The highest ISA at or below the current one with a kernel for r. */
static int best_kernel_isa(const struct quant_traits *r)
{
    for (int isa = isa_get(); isa > QUANT_ISA_SCALAR; isa--)
        if (r->gemm[isa])
            return isa;
    return QUANT_ISA_SCALAR;
}

bool quant_repack_pays(enum gguf_tensor_type t)
{
    const struct quant_traits *f = quant_traits_of(t);
    const struct quant_traits *r = quant_traits_of(quant_repack_type(t));
    return f && r && r != f && best_kernel_isa(r) >= best_kernel_isa(f);
}

int quant_unpack(enum gguf_tensor_type rt, void *W, int64_t N, int64_t K)
{
    const struct quant_traits *r = quant_traits_of(rt);
    if (!r || !r->group)
        return -EINVAL;
    return r8_convert(r->file_type, false, W, N, K);
}

void quant_rows_to_float(enum gguf_tensor_type t, const void *W, int64_t K, int64_t r0, int64_t n,
                         float *dst)
{
    const struct quant_traits *r = row_of(t);
    const size_t rb = quant_row_bytes(t, K);
    FOLIO_CHECK(rb > 0 && r0 >= 0 && n >= 0, "rows of %s: bad shape", r->name);
    if (!r->group) {
        r->to_float((const uint8_t *)W + (size_t)r0 * rb, dst, n * K);
        return;
    }
    for (int64_t i = 0; i < n; i++) { /* a load-time layout: its group, its row */
        const int64_t row = r0 + i;
        const uint8_t *g = (const uint8_t *)W + (size_t)(row / R8) * R8 * rb;
        if (t == QUANT_Q4_K_R8 || t == QUANT_Q5_K_R8)
            kr8_row_to_float(t == QUANT_Q5_K_R8, g, K / QK_K, (int)(row % R8), dst + i * K);
        else if (t == QUANT_Q8_0_R8)
            q8_0_r8_row_to_float((const struct blk_q8_0_r8 *)g, K / QK8_0, (int)(row % R8),
                                 dst + i * K);
        else if (t == QUANT_Q4_0_R8 || t == QUANT_Q5_0_R8 || t == QUANT_Q4_1_R8 ||
                 t == QUANT_Q5_1_R8)
            r0_row_to_float(t, g, K / QK4_0, (int)(row % R8), dst + i * K);
        else
            q6_k_r8_row_to_float((const struct blk_q6_k_r8 *)g, K / QK_K, (int)(row % R8),
                                 dst + i * K);
    }
}

size_t quant_row_bytes(enum gguf_tensor_type t, int64_t K)
{
    const struct quant_traits *r = quant_traits_of(t);
    if (!r || K < 0 || K % r->block)
        return 0;
    return (size_t)(K / r->block) * (size_t)r->block_bytes;
}

void quant_to_float(enum gguf_tensor_type t, const void *src, float *dst, int64_t n)
{
    const struct quant_traits *r = row_of(t);
    FOLIO_CHECK(n >= 0 && n % r->block == 0, "%lld elements of %s: not whole blocks of %d",
                (long long)n, r->name, (int)r->block);
    FOLIO_CHECK(r->to_float != NULL, "%s: rows, not elements (quant_rows_to_float)", r->name);
    r->to_float(src, dst, n);
}

int quant_from_float(enum gguf_tensor_type t, const float *src, void *dst, int64_t n)
{
    const struct quant_traits *r = quant_traits_of(t);
    if (!r || !r->from_float || n < 0 || n % r->block)
        return -EINVAL;
    r->from_float(src, dst, n);
    return 0;
}

void quant_rows(enum gguf_tensor_type t, const float *X, int64_t ldx, int64_t K, int64_t m0,
                int64_t m1, void *Xq)
{
    const enum gguf_tensor_type dt = quant_dot_type(t);
    const struct quant_traits *r = row_of(dt);
    const size_t stride = quant_row_bytes(dt, K);
    FOLIO_CHECK(stride > 0 && ldx >= K && m0 >= 0 && m1 >= m0,
                "quantized product: bad shape or stride");
    void (*from)(const float *, void *, int64_t) = r->from_float;
#if defined(__x86_64__) && defined(FOLIO_QUANT_X86)
    if (isa_get() >= QUANT_ISA_AVX2 && dt == GGUF_TENSOR_Q8_0)
        from = quant__rows_q8_0_avx2;
    else if (isa_get() >= QUANT_ISA_AVX2 && dt == GGUF_TENSOR_Q8_K)
        from = quant__rows_q8_k_avx2;
    else if (isa_get() >= QUANT_ISA_AVX2 && dt == QUANT_Q8_0S)
        from = quant__rows_q8_0s_avx2;
#endif
    for (int64_t m = m0; m < m1; m++)
        from(X + m * ldx, (uint8_t *)Xq + (size_t)m * stride, K);
}

/* ---- instruction set -------------------------------------------------- */

static const char *const isa_names[QUANT_ISA_N] = {"scalar", "avx2", "avx512"};
static int isa_current = -1;

static int isa_supported(int isa)
{
    switch (isa) {
    case QUANT_ISA_SCALAR:
        return 1;
#if defined(__x86_64__) && defined(FOLIO_QUANT_X86)
    case QUANT_ISA_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && folio_cpu_f16c();
    case QUANT_ISA_AVX512:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
               __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && folio_cpu_f16c();
#endif
    default:
        return 0;
    }
}

static int isa_best(void)
{
    for (int i = QUANT_ISA_N - 1; i > QUANT_ISA_SCALAR; i--)
        if (isa_supported(i))
            return i;
    return QUANT_ISA_SCALAR;
}

static int isa_parse(const char *name)
{
    for (int i = 0; i < QUANT_ISA_N; i++)
        if (strcmp(name, isa_names[i]) == 0)
            return i;
    return -1;
}

static int isa_get(void)
{
    int isa = __atomic_load_n(&isa_current, __ATOMIC_ACQUIRE);
    if (isa >= 0)
        return isa;
    isa = isa_best();
    const char *env = getenv("FOLIO_QUANT_ISA");
    if (env && *env && strcmp(env, "auto") != 0) {
        int want = isa_parse(env);
        if (want >= 0 && isa_supported(want))
            isa = want;
    }
    __atomic_store_n(&isa_current, isa, __ATOMIC_RELEASE);
    return isa;
}

int quant_force_isa(const char *name)
{
    int isa;
    if (!name || strcmp(name, "auto") == 0) {
        isa = isa_best();
    } else {
        isa = isa_parse(name);
        if (isa < 0)
            return -EINVAL;
        if (!isa_supported(isa))
            return -ENOTSUP;
    }
    __atomic_store_n(&isa_current, isa, __ATOMIC_RELEASE);
    return 0;
}

const char *quant_isa_name(void)
{
    return isa_names[isa_get()];
}

/* ---- products --------------------------------------------------------- */

static void gemm_scalar(const struct quant_traits *r, const void *W, size_t wstride, int64_t K,
                        int64_t n0, int64_t n1, const void *Xq, size_t xstride, int64_t M, float *Y,
                        int64_t ldy, float beta)
{
    for (int64_t n = n0; n < n1; n++) {
        const void *w = (const uint8_t *)W + (size_t)n * wstride;
        for (int64_t m = 0; m < M; m++) {
            float v = r->vec_dot(K, w, (const uint8_t *)Xq + (size_t)m * xstride);
            float *y = &Y[m * ldy + n];
            *y = beta != 0.0f ? *y + v : v;
        }
    }
}

void quant_gemm(enum gguf_tensor_type t, const void *W, int64_t K, int64_t n0, int64_t n1,
                const void *Xq, int64_t M, float *Y, int64_t ldy, float beta)
{
    const struct quant_traits *r = row_of(t);
    const size_t wstride = quant_row_bytes(t, K);
    const size_t xstride = quant_row_bytes(r->dot_type, K);
    FOLIO_CHECK((r->vec_dot || r->gemm[QUANT_ISA_SCALAR]) && wstride > 0 && xstride > 0,
                "quantized product: bad shape or stride");
    FOLIO_CHECK(n0 >= 0 && n1 >= n0 && M >= 0 && ldy >= n1,
                "quantized product: bad shape or stride");
    FOLIO_CHECK(beta == 0.0f || beta == 1.0f, "quantized product: beta %g (0 or 1)", (double)beta);
    if (M == 0 || n1 == n0)
        return;
    for (int isa = isa_get(); isa > QUANT_ISA_SCALAR; isa--)
        if (r->gemm[isa]) {
            r->gemm[isa](W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
            return;
        }
    if (r->gemm[QUANT_ISA_SCALAR]) /* a layout of its own: its scalar kernel */
        r->gemm[QUANT_ISA_SCALAR](W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
    else
        gemm_scalar(r, W, wstride, K, n0, n1, Xq, xstride, M, Y, ldy, beta);
}

void quant_gemm_ref(enum gguf_tensor_type t, const void *W, int64_t K, int64_t n0, int64_t n1,
                    const void *Xq, int64_t M, float *Y, int64_t ldy, float beta)
{
    const struct quant_traits *r = row_of(t), *rx = row_of(r->dot_type);
    const size_t wstride = quant_row_bytes(t, K);
    const size_t xstride = quant_row_bytes(r->dot_type, K);
    FOLIO_CHECK(wstride > 0 && xstride > 0 && n0 >= 0 && n1 >= n0 && M >= 0 && ldy >= n1,
                "quantized product: bad shape or stride");
    float *w = malloc((size_t)K * sizeof(float)), *x = malloc((size_t)K * sizeof(float));
    FOLIO_CHECK(w && x, "quantized product: no weights or no activations");
    for (int64_t n = n0; n < n1; n++) {
        quant_rows_to_float(t, W, K, n, 1, w);
        for (int64_t m = 0; m < M; m++) {
            rx->to_float((const uint8_t *)Xq + (size_t)m * xstride, x, K);
            double s = 0.0;
            for (int64_t k = 0; k < K; k++)
                s += (double)w[k] * (double)x[k];
            float *y = &Y[m * ldy + n];
            *y = beta != 0.0f ? (float)((double)*y + s) : (float)s;
        }
    }
    free(w);
    free(x);
}
