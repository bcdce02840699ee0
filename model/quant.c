/*
 * model/quant.c — the tensor type table, scalar conversions, quantizers,
 * scalar dot kernels, the reference product, and run-time ISA choice.
 *
 * What it owns.  The table `traits[]`, indexed by ggml type number: one row
 * per type (name, block, bytes per block, dot type, to/from f32, scalar dot,
 * per-ISA product kernels).  A new type is one row plus its functions.  The
 * float types' and 32-element blocks' codecs are here; the 256-element
 * types' and IQ4's (Q2_K .. Q6_K, IQ4_NL, IQ4_XS, Q8_K) are
 * model/quant_k.c's.
 *
 * Block layouts (ggml's, byte for byte; see quant_internal.h):
 *
 *   Q8_0  [d:f16][q:i8 x32]                    34 B / 32
 *   Q4_0  [d:f16][nibbles x16]                 18 B / 32  lo = x[0..15], hi = x[16..31]
 *   Q4_1  [d:f16][m:f16][nibbles x16]          20 B / 32
 *   Q5_0  [d:f16][qh:4 B][nibbles x16]         22 B / 32  bit 5 of x[j] = qh bit j
 *   Q5_1  [d:f16][m:f16][qh:4 B][nibbles x16]  24 B / 32
 *   IQ4_NL [d][nibbles x16]                   18 B / 32  codes index a table of 16
 *   IQ4_XS [d][sh:u16][sl 4 B][nibbles x128]  136 B / 256 (8 x 32, 6-bit sc)
 *   Q2_K  [sc|m x16][2-bit x256][d][dmin]     84 B / 256 (16 x 16, 4-bit sc/m)
 *   Q3_K  [hmask 32][2-bit x256][scales 12 B][d] 110 B / 256 (16 x 16, 6-bit sc)
 *   Q4_K  [d][dmin][scales 12 B][nibbles x128] 144 B / 256 (8 x 32, 6-bit sc/m)
 *   Q5_K  ... + [qh 32 B]                      176 B / 256
 *   Q6_K  [ql 128 B][qh 64 B][sc:i8 x16][d]    210 B / 256 (16 x 16)
 *   Q8_K  [d:f32][q:i8 x256][bsums:i16 x16]    292 B / 256 (activations only)
 *   Q8_0S [d:f16][s:i16][q:i8 x32]             36 B / 32 (activations only)
 *
 * Rounding.  Q8_0 follows llama.cpp's reference rounding (d = amax/127,
 * q = round(x/d)).  The other weight quantizers search the scale (and
 * min) of each block (Q4_0 .. Q5_1) or sub-block (the K-quants) by least
 * squares over a few trial roundings (model/quant_k.c), the reference's
 * extremes-based scale among them, then round the values against the
 * stored scales (the K-quants: their 6-bit, 4-bit or 8-bit codes); their
 * files are the same format and llama.cpp reads them.  Activations:
 * Q8_0/Q8_1 as llama.cpp (amax/127 per 32, round to nearest); Q8_K with
 * amax/127 per 256 and the 16-element sums the K-quant kernels use for
 * their mins; Q8_0S as Q8_0 with the sum of its codes (for the Q4_0_R8 and
 * Q5_0_R8 kernels).
 *
 * The load-time layouts (Q4_K_R8 .. IQ4_XS_R8: rows in eights) have rows
 * in the table here; model/quant_r8.c draws them and holds their
 * conversions and plain C kernels, and model/quant_codes.h the block
 * pieces the three files share.
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
#include "quant_codes.h"
#include "quant_internal.h"

_Static_assert(sizeof(struct blk_q8_0) == 34, "q8_0 layout");
_Static_assert(sizeof(struct blk_q8_1) == 36, "q8_1 layout");
_Static_assert(sizeof(struct blk_q4_0) == 18, "q4_0 layout");
_Static_assert(sizeof(struct blk_q4_1) == 20, "q4_1 layout");
_Static_assert(sizeof(struct blk_q5_0) == 22, "q5_0 layout");
_Static_assert(sizeof(struct blk_q5_1) == 24, "q5_1 layout");
_Static_assert(sizeof(struct blk_iq4_nl) == 18, "iq4_nl layout");
_Static_assert(sizeof(struct blk_iq4_xs) == 136, "iq4_xs layout");
_Static_assert(sizeof(struct blk_q2_k) == 84, "q2_K layout");
_Static_assert(sizeof(struct blk_q3_k) == 110, "q3_K layout");
_Static_assert(sizeof(struct blk_q4_k) == 144, "q4_K layout");
_Static_assert(sizeof(struct blk_q5_k) == 176, "q5_K layout");
_Static_assert(sizeof(struct blk_q6_k) == 210, "q6_K layout");
_Static_assert(sizeof(struct blk_q8_k) == 292, "q8_K layout");
_Static_assert(sizeof(struct blk_q8_0s) == 36, "q8_0s layout");

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

/* Q4_0, Q5_0 (x = d * (q - 8), d * (q - 16)) and Q4_1, Q5_1 (x = d * q +
 * m): each block's scale (and min) is the one of least squared error over
 * a few trial roundings (quant__sym_scale, quant__asym_scale: the
 * K-quants' search), weighted by an importance matrix's column weights
 * (_w, qw) or all 1.  The codes are then rounded to nearest against the
 * stored f16 scale and min, clamped at both ends.  (llama.cpp's reference
 * rounding, d from the extremes, is one of the trials.) */
static float q_sym(const float *x, const float *qw, int n, int qmax, float *id)
{
    const float d = h2f(f2h(quant__sym_scale(x, qw, n, qmax)));
    *id = d != 0.0f ? 1.0f / d : 0.0f;
    return d;
}

static float q_asym(const float *x, const float *qw, int n, int nmax, float *id, float *m)
{
    float mn;
    const float d = h2f(f2h(quant__asym_scale(x, qw, n, nmax, &mn)));
    *m = h2f(f2h(mn));
    *id = d != 0.0f ? 1.0f / d : 0.0f;
    return d;
}

/* v rounded half up, clamped to [0, top] */
static inline int code_of(float v, int top)
{
    const int q = (int)floorf(v + 0.5f);
    return q > top ? top : q < 0 ? 0 : q;
}

static void q4_0_from_float_w(const float *x, void *dst, int64_t n, const float *qw)
{
    struct blk_q4_0 *y = dst;
    for (int64_t b = 0; b < n / QK4_0; b++, x += QK4_0, qw = qw ? qw + QK4_0 : NULL) {
        float id;
        y[b].d = f2h(q_sym(x, qw, QK4_0, 8, &id));
        for (int j = 0; j < QK4_0 / 2; j++)
            y[b].qs[j] = (uint8_t)(code_of(x[j] * id + 8.0f, 15) |
                                   (code_of(x[j + 16] * id + 8.0f, 15) << 4));
    }
}

static void q4_0_from_float(const float *x, void *dst, int64_t n)
{
    q4_0_from_float_w(x, dst, n, NULL);
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

static void q4_1_from_float_w(const float *x, void *dst, int64_t n, const float *qw)
{
    struct blk_q4_1 *y = dst;
    for (int64_t b = 0; b < n / QK4_1; b++, x += QK4_1, qw = qw ? qw + QK4_1 : NULL) {
        float id, m;
        y[b].d = f2h(q_asym(x, qw, QK4_1, 15, &id, &m));
        y[b].m = f2h(m);
        for (int j = 0; j < 16; j++)
            y[b].qs[j] =
                (uint8_t)(code_of((x[j] - m) * id, 15) | (code_of((x[j + 16] - m) * id, 15) << 4));
    }
}

static void q4_1_from_float(const float *x, void *dst, int64_t n)
{
    q4_1_from_float_w(x, dst, n, NULL);
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

static void q5_0_from_float_w(const float *x, void *dst, int64_t n, const float *qw)
{
    struct blk_q5_0 *y = dst;
    for (int64_t b = 0; b < n / QK5_0; b++, x += QK5_0, qw = qw ? qw + QK5_0 : NULL) {
        float id;
        y[b].d = f2h(q_sym(x, qw, QK5_0, 16, &id));
        int q[32];
        for (int j = 0; j < 32; j++)
            q[j] = code_of(x[j] * id + 16.0f, 31);
        q5_pack(q, y[b].qs, y[b].qh);
    }
}

static void q5_0_from_float(const float *x, void *dst, int64_t n)
{
    q5_0_from_float_w(x, dst, n, NULL);
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

static void q5_1_from_float_w(const float *x, void *dst, int64_t n, const float *qw)
{
    struct blk_q5_1 *y = dst;
    for (int64_t b = 0; b < n / QK5_1; b++, x += QK5_1, qw = qw ? qw + QK5_1 : NULL) {
        float id, m;
        y[b].d = f2h(q_asym(x, qw, QK5_1, 31, &id, &m));
        y[b].m = f2h(m);
        int q[32];
        for (int j = 0; j < 32; j++)
            q[j] = code_of((x[j] - m) * id, 31);
        q5_pack(q, y[b].qs, y[b].qh);
    }
}

static void q5_1_from_float(const float *x, void *dst, int64_t n)
{
    q5_1_from_float_w(x, dst, n, NULL);
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

/* ---- the table -------------------------------------------------------- */

#if defined(__x86_64__) && defined(FOLIO_QUANT_X86)
#define X86(f) f
#else
#define X86(f) NULL
#endif
#if defined(__x86_64__) && defined(FOLIO_QUANT_X86) && !defined(FOLIO_QUANT_NO_AVX512)
#define X512(f) f
#else
#define X512(f) NULL /* none, or left out of this build (meson's host_isa_only) */
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
        X86(quant__gemm_q8_0_avx2), X512(quant__gemm_q8_0_avx512)),
    ROW(Q4_0, QK4_0, sizeof(struct blk_q4_0),  true,  Q8_0, q4_0_to_float, q4_0_from_float, q4_0_dot,
        X86(quant__gemm_q4_0_avx2), NULL),
    ROW(Q4_1, QK4_1, sizeof(struct blk_q4_1),  true,  Q8_1, q4_1_to_float, q4_1_from_float, q4_1_dot,  NULL, NULL),
    ROW(Q5_0, QK5_0, sizeof(struct blk_q5_0),  true,  Q8_0, q5_0_to_float, q5_0_from_float, q5_0_dot,
        X86(quant__gemm_q5_0_avx2), NULL),
    ROW(Q5_1, QK5_1, sizeof(struct blk_q5_1),  true,  Q8_1, q5_1_to_float, q5_1_from_float, q5_1_dot,  NULL, NULL),
    ROW(IQ4_NL, QK4_NL, sizeof(struct blk_iq4_nl), true, Q8_0, quant__iq4_nl_to_float, quant__iq4_nl_from_float,
        quant__iq4_nl_dot, NULL, NULL),
    ROW(IQ4_XS, QK_K, sizeof(struct blk_iq4_xs), true, Q8_K, quant__iq4_xs_to_float, quant__iq4_xs_from_float,
        quant__iq4_xs_dot, NULL, NULL),
    ROW(Q2_K, QK_K,  sizeof(struct blk_q2_k),  true,  Q8_K, quant__q2_k_to_float, quant__q2_k_from_float, quant__q2_k_dot,  NULL, NULL),
    ROW(Q3_K, QK_K,  sizeof(struct blk_q3_k),  true,  Q8_K, quant__q3_k_to_float, quant__q3_k_from_float, quant__q3_k_dot,  NULL, NULL),
    ROW(Q4_K, QK_K,  sizeof(struct blk_q4_k),  true,  Q8_K, quant__q4_k_to_float, quant__q4_k_from_float, quant__q4_k_dot,
        X86(quant__gemm_q4_k_avx2), NULL),
    ROW(Q5_K, QK_K,  sizeof(struct blk_q5_k),  true,  Q8_K, quant__q5_k_to_float, quant__q5_k_from_float, quant__q5_k_dot,
        X86(quant__gemm_q5_k_avx2), NULL),
    ROW(Q6_K, QK_K,  sizeof(struct blk_q6_k),  true,  Q8_K, quant__q6_k_to_float, quant__q6_k_from_float, quant__q6_k_dot,
        X86(quant__gemm_q6_k_avx2), NULL),
    /* activation types: in products only */
    ROW(Q8_1, QK8_1, sizeof(struct blk_q8_1),  false, Q8_1, q8_1_to_float, q8_1_from_float, NULL,      NULL, NULL),
    ROW(Q8_K, QK_K,  sizeof(struct blk_q8_k),  false, Q8_K, quant__q8_k_to_float, quant__q8_k_from_float, NULL,      NULL, NULL),
    /* load-time layouts: in memory only; rows through quant_rows_to_float */
    [QUANT_Q4_K_R8] = {"Q4_K_R8", QK_K, sizeof(struct blk_q4_k), false, GGUF_TENSOR_Q8_K,
                       NULL, NULL, NULL,
                       {quant__gemm_q4_k_r8_scalar, X86(quant__gemm_q4_k_r8_avx2),
                        X512(quant__gemm_q4_k_r8_avx512)},
                       QUANT_GROUP, GGUF_TENSOR_Q4_K},
    [QUANT_Q5_K_R8] = {"Q5_K_R8", QK_K, sizeof(struct blk_q5_k), false, GGUF_TENSOR_Q8_K,
                       NULL, NULL, NULL,
                       {quant__gemm_q5_k_r8_scalar, X86(quant__gemm_q5_k_r8_avx2),
                        X512(quant__gemm_q5_k_r8_avx512)},
                       QUANT_GROUP, GGUF_TENSOR_Q5_K},
    [QUANT_Q6_K_R8] = {"Q6_K_R8", QK_K, sizeof(struct blk_q6_k), false, GGUF_TENSOR_Q8_K,
                       NULL, NULL, NULL,
                       {quant__gemm_q6_k_r8_scalar, X86(quant__gemm_q6_k_r8_avx2),
                        X512(quant__gemm_q6_k_r8_avx512)},
                       QUANT_GROUP, GGUF_TENSOR_Q6_K},
    [QUANT_Q8_0_R8] = {"Q8_0_R8", QK8_0, sizeof(struct blk_q8_0), false, GGUF_TENSOR_Q8_0,
                       NULL, NULL, NULL,
                       {quant__gemm_q8_0_r8_scalar, X86(quant__gemm_q8_0_r8_avx2),
                        X512(quant__gemm_q8_0_r8_avx512)},
                       QUANT_GROUP, GGUF_TENSOR_Q8_0},
    [QUANT_Q4_0_R8] = {"Q4_0_R8", QK4_0, sizeof(struct blk_q4_0), false, QUANT_Q8_0S,
                       NULL, NULL, NULL,
                       {quant__gemm_q4_0_r8_scalar, X86(quant__gemm_q4_0_r8_avx2),
                        X512(quant__gemm_q4_0_r8_avx512)},
                       QUANT_GROUP, GGUF_TENSOR_Q4_0},
    [QUANT_Q5_0_R8] = {"Q5_0_R8", QK5_0, sizeof(struct blk_q5_0), false, QUANT_Q8_0S,
                       NULL, NULL, NULL,
                       {quant__gemm_q5_0_r8_scalar, X86(quant__gemm_q5_0_r8_avx2),
                        X512(quant__gemm_q5_0_r8_avx512)},
                       QUANT_GROUP, GGUF_TENSOR_Q5_0},
    [QUANT_Q4_1_R8] = {"Q4_1_R8", QK4_1, sizeof(struct blk_q4_1), false, GGUF_TENSOR_Q8_1,
                       NULL, NULL, NULL,
                       {quant__gemm_q4_1_r8_scalar, X86(quant__gemm_q4_1_r8_avx2),
                        X512(quant__gemm_q4_1_r8_avx512)},
                       QUANT_GROUP, GGUF_TENSOR_Q4_1},
    [QUANT_Q5_1_R8] = {"Q5_1_R8", QK5_1, sizeof(struct blk_q5_1), false, GGUF_TENSOR_Q8_1,
                       NULL, NULL, NULL,
                       {quant__gemm_q5_1_r8_scalar, X86(quant__gemm_q5_1_r8_avx2),
                        X512(quant__gemm_q5_1_r8_avx512)},
                       QUANT_GROUP, GGUF_TENSOR_Q5_1},
    [QUANT_Q3_K_R8] = {"Q3_K_R8", QK_K, sizeof(struct blk_q3_k), false, GGUF_TENSOR_Q8_K,
                       NULL, NULL, NULL,
                       {quant__gemm_q3_k_r8_scalar, X86(quant__gemm_q3_k_r8_avx2),
                        X512(quant__gemm_q3_k_r8_avx512)},
                       QUANT_GROUP, GGUF_TENSOR_Q3_K},
    [QUANT_Q2_K_R8] = {"Q2_K_R8", QK_K, sizeof(struct blk_q2_k), false, GGUF_TENSOR_Q8_K,
                       NULL, NULL, NULL,
                       {quant__gemm_q2_k_r8_scalar, X86(quant__gemm_q2_k_r8_avx2),
                        X512(quant__gemm_q2_k_r8_avx512)},
                       QUANT_GROUP, GGUF_TENSOR_Q2_K},
    [QUANT_IQ4_NL_R8] = {"IQ4_NL_R8", QK4_NL, sizeof(struct blk_iq4_nl), false, GGUF_TENSOR_Q8_0,
                         NULL, NULL, NULL,
                         {quant__gemm_iq4_nl_r8_scalar, X86(quant__gemm_iq4_nl_r8_avx2),
                          X512(quant__gemm_iq4_nl_r8_avx512)},
                         QUANT_GROUP, GGUF_TENSOR_IQ4_NL},
    [QUANT_IQ4_XS_R8] = {"IQ4_XS_R8", QK_K, sizeof(struct blk_iq4_xs), false, GGUF_TENSOR_Q8_K,
                         NULL, NULL, NULL,
                         {quant__gemm_iq4_xs_r8_scalar, X86(quant__gemm_iq4_xs_r8_avx2),
                          X512(quant__gemm_iq4_xs_r8_avx512)},
                         QUANT_GROUP, GGUF_TENSOR_IQ4_XS},
    /* the activations of Q4_0_R8 and Q5_0_R8 (Q4_1_R8 and Q5_1_R8 take
     * Q8_1, as their file types do) */
    [QUANT_Q8_0S] = {"Q8_0S", QK8_0, sizeof(struct blk_q8_0s), false, QUANT_Q8_0S,
                     q8_0s_to_float, q8_0s_from_float, NULL, {NULL, NULL, NULL}, 0,
                     QUANT_Q8_0S},
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
    for (int64_t i = 0; i < n; i++) /* a load-time layout: its group, its row */
        quant__r8_row_to_float(
            t, (const uint8_t *)W + (size_t)((r0 + i) / QUANT_GROUP) * QUANT_GROUP * rb, K,
            (int)((r0 + i) % QUANT_GROUP), dst + i * K);
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

/* The quantizers that weight their errors (model/quant_k.c, Q4_0 .. Q5_1
 * above), or NULL. */
static void (*from_float_w(enum gguf_tensor_type t))(const float *, void *, int64_t, const float *)
{
    switch (t) {
    case GGUF_TENSOR_Q2_K:
        return quant__q2_k_from_float_w;
    case GGUF_TENSOR_Q3_K:
        return quant__q3_k_from_float_w;
    case GGUF_TENSOR_Q4_K:
        return quant__q4_k_from_float_w;
    case GGUF_TENSOR_Q5_K:
        return quant__q5_k_from_float_w;
    case GGUF_TENSOR_Q6_K:
        return quant__q6_k_from_float_w;
    case GGUF_TENSOR_IQ4_NL:
        return quant__iq4_nl_from_float_w;
    case GGUF_TENSOR_IQ4_XS:
        return quant__iq4_xs_from_float_w;
    case GGUF_TENSOR_Q4_0:
        return q4_0_from_float_w;
    case GGUF_TENSOR_Q5_0:
        return q5_0_from_float_w;
    case GGUF_TENSOR_Q4_1:
        return q4_1_from_float_w;
    case GGUF_TENSOR_Q5_1:
        return q5_1_from_float_w;
    default:
        return NULL;
    }
}

bool quant_uses_imatrix(enum gguf_tensor_type t)
{
    return from_float_w(t) != NULL;
}

int quant_from_float_w(enum gguf_tensor_type t, const float *src, void *dst, int64_t n,
                       const float *qw, int64_t row)
{
    void (*fw)(const float *, void *, int64_t, const float *) = from_float_w(t);
    const struct quant_traits *r = quant_traits_of(t);
    if (!qw || !fw)
        return quant_from_float(t, src, dst, n);
    if (!r || row <= 0 || row % r->block || n < 0 || n % row)
        return -EINVAL;
    const size_t row_bytes = quant_row_bytes(t, row);
    for (int64_t i = 0; i < n / row; i++)
        fw(src + i * row, (uint8_t *)dst + (size_t)i * row_bytes, row, qw);
    return 0;
}

typedef void (*quant_rows_fn)(const float *, void *, int64_t);

/* The activation quantizer of dot type dt (r: its traits) at the current
 * ISA: the vector ones give the scalar from_float's bytes. */
static quant_rows_fn rows_kernel(enum gguf_tensor_type dt, const struct quant_traits *r)
{
    static const struct {
        enum gguf_tensor_type t;
        quant_rows_fn f[QUANT_ISA_N];
    } tab[] = {
        {GGUF_TENSOR_Q8_0, {NULL, X86(quant__rows_q8_0_avx2), X512(quant__rows_q8_0_avx512)}},
        {GGUF_TENSOR_Q8_K, {NULL, X86(quant__rows_q8_k_avx2), X512(quant__rows_q8_k_avx512)}},
        {QUANT_Q8_0S, {NULL, X86(quant__rows_q8_0s_avx2), X512(quant__rows_q8_0s_avx512)}},
        {GGUF_TENSOR_Q8_1, {NULL, X86(quant__rows_q8_1_avx2), X512(quant__rows_q8_1_avx512)}},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(tab); i++)
        if (tab[i].t == dt)
            for (int isa = isa_get(); isa > QUANT_ISA_SCALAR; isa--)
                if (tab[i].f[isa])
                    return tab[i].f[isa];
    return r->from_float;
}

void quant_rows(enum gguf_tensor_type t, const float *X, int64_t ldx, int64_t K, int64_t m0,
                int64_t m1, void *Xq)
{
    const enum gguf_tensor_type dt = quant_dot_type(t);
    const struct quant_traits *r = row_of(dt);
    const size_t stride = quant_row_bytes(dt, K);
    FOLIO_CHECK(stride > 0 && ldx >= K && m0 >= 0 && m1 >= m0,
                "quantized product: bad shape or stride");
    const quant_rows_fn from = rows_kernel(dt, r);
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
#ifdef FOLIO_QUANT_NO_AVX512
        return 0;
#endif
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
