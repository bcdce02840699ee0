/*
 * model/quant_k.c — the block codecs of the 256-element types and IQ4:
 * Q2_K .. Q6_K and IQ4_XS (and IQ4_NL, which shares IQ4_XS's table and
 * scale search), and Q8_K, the activations of their products.  Each type
 * has a dequantizer (quant__T_to_float), a quantizer (quant__T_from_float,
 * llama.cpp's formats; the K-quants' scale searches are below) and
 * a scalar dot against its activation type (quant__T_dot); model/quant.c's
 * table holds them.  The block layouts are drawn in model/quant.c's header
 * and model/quant_internal.h.
 *
 * Threading: reentrant; nothing here allocates.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"
#include "quant.h"
#include "quant_codes.h"
#include "quant_internal.h"

/* ---- Q8_K (activations of K-quant products) --------------------------- */

void quant__q8_k_from_float(const float *x, void *dst, int64_t n)
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

void quant__q8_k_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_q8_k *x = src;
    for (int64_t b = 0; b < n / QK_K; b++)
        for (int j = 0; j < QK_K; j++)
            y[b * QK_K + j] = x[b].d * (float)x[b].qs[j];
}

/* ---- IQ4_NL / IQ4_XS -------------------------------------------------- */

/* The formats' 16 values a 4-bit code selects (ascending, denser near 0). */
const int8_t quant__iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};

/* The midpoints between adjacent values of that table: the code nearest x
 * (ties to the lower) is the number of midpoints x is above.  Counting
 * them has no branches, so the codes of a block go 8 at a time. */
static const float iq4_mid[15] = {-115.5f, -93.5f, -74.0f, -57.0f, -42.0f, -28.5f, -16.0f, -4.5f,
                                  7.0f,    19.0f,  31.5f,  45.5f,  61.0f,  79.0f,  101.0f};

/* Codes of x[0..n) (n <= 256) against scale d; returns the squared error,
 * each element's weighted by w[j] (NULL: 1). */
static float iq4_codes(const float *x, const float *w, int n, float d, uint8_t *L)
{
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    float y[QK_K];
    int32_t c[QK_K];
    for (int j = 0; j < n; j++) {
        y[j] = x[j] * id;
        c[j] = 0;
    }
    for (int k = 0; k < 15; k++)
        for (int j = 0; j < n; j++)
            c[j] += y[j] > iq4_mid[k];
    float err = 0.0f;
    for (int j = 0; j < n; j++) {
        L[j] = (uint8_t)c[j];
        const float e = x[j] - d * (float)quant__iq4_values[c[j]];
        err += (w ? w[j] : 1.0f) * e * e;
    }
    return err;
}

/* A scale for x[0..n) on the IQ4 table: the largest magnitude mapped to
 * either end of the table, each start refined once by least squares (d =
 * sum w x v / sum w v v over the codes it picked), the best of the
 * candidates by squared error weighted by w (NULL: unweighted).  0 for an
 * all-zero x. */
static float iq4_scale(const float *x, const float *w, int n)
{
    const float max = signed_absmax(x, n);
    if (max == 0.0f)
        return 0.0f;
    uint8_t L[QK_K];
    float best = 0.0f, best_err = INFINITY;
    for (int t = 0; t < 18; t++) {
        /* the extreme on -127 or on 113, the scale shrunk or stretched by up to 8% */
        const float d0 = max / (t < 9 ? -127.0f : 113.0f) * (1.0f + 0.02f * (float)(t % 9 - 4));
        float err = iq4_codes(x, w, n, d0, L);
        if (err < best_err) {
            best_err = err;
            best = d0;
        }
        double xv = 0.0, vv = 0.0;
        for (int j = 0; j < n; j++) {
            const double wj = w ? w[j] : 1.0, v = quant__iq4_values[L[j]];
            xv += wj * x[j] * v;
            vv += wj * v * v;
        }
        const float d1 = vv > 0.0 ? (float)(xv / vv) : d0;
        err = iq4_codes(x, w, n, d1, L);
        if (err < best_err) {
            best_err = err;
            best = d1;
        }
    }
    return best;
}

void quant__iq4_nl_from_float(const float *x, void *dst, int64_t n)
{
    quant__iq4_nl_from_float_w(x, dst, n, NULL);
}

void quant__iq4_nl_from_float_w(const float *x, void *dst, int64_t n, const float *qw)
{
    struct blk_iq4_nl *y = dst;
    for (int64_t b = 0; b < n / QK4_NL; b++, x += QK4_NL, qw = qw ? qw + QK4_NL : NULL) {
        y[b].d = f2h(iq4_scale(x, qw, QK4_NL));
        uint8_t L[QK4_NL];
        iq4_codes(x, NULL, QK4_NL, h2f(y[b].d), L);
        for (int j = 0; j < 16; j++)
            y[b].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

void quant__iq4_nl_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_iq4_nl *x = src;
    for (int64_t b = 0; b < n / QK4_NL; b++, y += QK4_NL) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)quant__iq4_values[x[b].qs[j] & 15];
            y[j + 16] = d * (float)quant__iq4_values[x[b].qs[j] >> 4];
        }
    }
}

/* sum over 32 elements of the table values of 16 code bytes times q */
static int32_t iq4_dot32(const uint8_t *qs, const int8_t *q)
{
    int32_t s = 0;
    for (int j = 0; j < 16; j++)
        s += quant__iq4_values[qs[j] & 15] * q[j] + quant__iq4_values[qs[j] >> 4] * q[j + 16];
    return s;
}

float quant__iq4_nl_dot(int64_t K, const void *w, const void *xq)
{
    const struct blk_iq4_nl *a = w;
    const struct blk_q8_0 *b = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < K / QK4_NL; i++)
        sum += h2f(a[i].d) * h2f(b[i].d) * (float)iq4_dot32(a[i].qs, b[i].qs);
    return sum;
}

/* IQ4_XS's eight 6-bit scale codes (the scale is ls - 32) */
void quant__iq4_xs_scales(const struct blk_iq4_xs *x, int *ls)
{
    for (int j = 0; j < 8; j++)
        ls[j] =
            ((x->scales_l[j / 2] >> (4 * (j % 2))) & 15) | (((x->scales_h >> (2 * j)) & 3) << 4);
}

void quant__iq4_xs_from_float(const float *x, void *dst, int64_t n)
{
    quant__iq4_xs_from_float_w(x, dst, n, NULL);
}

void quant__iq4_xs_from_float_w(const float *x, void *dst, int64_t n, const float *qw)
{
    struct blk_iq4_xs *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : NULL) {
        float sc[8], max_sc = 0.0f, amax = 0.0f;
        for (int j = 0; j < 8; j++) {
            sc[j] = iq4_scale(x + 32 * j, qw ? qw + 32 * j : NULL, 32);
            if (fabsf(sc[j]) > amax) {
                amax = fabsf(sc[j]);
                max_sc = sc[j];
            }
        }
        y[b].d = f2h(max_sc / -32.0f);
        const float d = h2f(y[b].d), id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].scales_h = 0;
        memset(y[b].scales_l, 0, sizeof y[b].scales_l);
        for (int j = 0; j < 8; j++) {
            int s = nearest(sc[j] * id);
            s = s > 31 ? 31 : s < -32 ? -32 : s;
            const int ls = s + 32;
            y[b].scales_l[j / 2] |= (uint8_t)((ls & 15) << (4 * (j % 2)));
            y[b].scales_h |= (uint16_t)((ls >> 4) << (2 * j));
            uint8_t L[32];
            iq4_codes(x + 32 * j, NULL, 32, d * (float)s, L);
            for (int l = 0; l < 16; l++)
                y[b].qs[16 * j + l] = (uint8_t)(L[l] | (L[l + 16] << 4));
        }
    }
}

void quant__iq4_xs_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_iq4_xs *x = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int ls[8];
        quant__iq4_xs_scales(&x[b], ls);
        const float d = h2f(x[b].d);
        for (int j = 0; j < 8; j++, y += 32) {
            const float dl = d * (float)(ls[j] - 32);
            for (int l = 0; l < 16; l++) {
                y[l] = dl * (float)quant__iq4_values[x[b].qs[16 * j + l] & 15];
                y[l + 16] = dl * (float)quant__iq4_values[x[b].qs[16 * j + l] >> 4];
            }
        }
    }
}

float quant__iq4_xs_dot(int64_t K, const void *w, const void *xq)
{
    const struct blk_iq4_xs *a = w;
    const struct blk_q8_k *b = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < K / QK_K; i++) {
        int ls[8];
        quant__iq4_xs_scales(&a[i], ls);
        int32_t sumi = 0;
        for (int j = 0; j < 8; j++)
            sumi += (ls[j] - 32) * iq4_dot32(a[i].qs + 16 * j, b[i].qs + 32 * j);
        sum += h2f(a[i].d) * b[i].d * (float)sumi;
    }
    return sum;
}

/* ---- sub-block scale searches (the K-quants) ---------------------------
 *
 * A sub-block's scale (and min) is the one of a few candidates with the
 * least weighted squared error: each candidate rounds the values to codes
 * with a trial scale near the extremes' (the extremes mapped to the end
 * codes, then the range stretched and shrunk by up to one code in tenths),
 * and for those codes the error-minimising scale (and min) is solved in
 * closed form by least squares.  The error weights are k_weights'. */

#define K_TRIES 10 /* candidates (nmax + k/10) / range, k = -K_TRIES .. K_TRIES */

/* 8 floats as GCC vectors (AVX in a native build, SSE pairs otherwise) */
typedef float f8 __attribute__((vector_size(32)));
typedef float f8_u __attribute__((vector_size(32), aligned(4), may_alias));
typedef int32_t i8 __attribute__((vector_size(32)));
/* x in every lane (a macro: a function returning a vector has an ABI that
 * depends on the build's ISA flags, which GCC warns about) */
#define F8_SPLAT(x) ((f8){(x), (x), (x), (x), (x), (x), (x), (x)})
/* v with each lane held to [lo, hi] (lane masks: GCC's C has no vector ?:) */
#define F8_SEL(m, a, b)     ((f8)(((i8)(a) & (m)) | ((i8)(b) & ~(m))))
#define F8_CLAMP(v, lo, hi) F8_SEL((v) > (hi), (hi), F8_SEL((v) < (lo), (lo), (v)))

/* Error weights of a 256-block: with an importance matrix (qw: each
 * column's mean square activation over a text, `folio imatrix`) a
 * weight's rounding error counts as much as it moves the products, its
 * column's qw; without, all 1, the plain squared error.  A weight's error
 * reaches the product through its activation, so with no activation
 * statistics every column counts the same; on `small` this beat weighting
 * by x^2 + the block's mean square (Q4_K_M KL divergence 0.120 against
 * 0.124, Q2_K 1.06 against 1.15). */
static void k_weights(const float *x, const float *qw, float *w)
{
    (void)x;
    for (int i = 0; i < QK_K; i++)
        w[i] = qw ? qw[i] : 1.0f;
}

/* x ~= s * L - m with codes L in [0, nmax], s >= 0, and m >= 0 (the
 * K-quants' mins) or of either sign (free_min: Q4_1's and Q5_1's): returns
 * s, *m gets m.  All-equal values give s = 0 and m = -x (when x <= 0 or
 * free_min). */
static float fit_asym(const float *x, const float *w, int n, int nmax, bool free_min, float *m_out)
{
    float lo, hi;
    minmax(x, n, &lo, &hi);
    if (!free_min)
        lo = fminf(lo, 0.0f);
    if (hi <= lo) {
        *m_out = -lo;
        return 0.0f;
    }
    float a = 0.0f, c1 = 0.0f, xx = 0.0f; /* sums of w, w x, w x^2 */
    for (int i = 0; i < n; i++) {
        a += w[i];
        c1 += w[i] * x[i];
        xx += w[i] * x[i] * x[i];
    }
    float best_s = (hi - lo) / (float)nmax, best_m = -lo;
    double best_e = INFINITY;
    for (int k = -K_TRIES; k <= K_TRIES; k++) {
        const float is = ((float)nmax + 0.1f * (float)k) / (hi - lo);
        /* sums of w L, w L^2, w x L, 8 lanes at a time (n is 16 or 32);
         * codes round half up (as nearest() for these non-negative
         * values): truncation of v + 0.5 */
        const f8 vis = F8_SPLAT(is), vlo = F8_SPLAT(lo), half = F8_SPLAT(0.5f);
        const f8 zero = F8_SPLAT(0.0f), top = F8_SPLAT((float)nmax);
        f8 v1 = zero, v2 = zero, v3 = zero;
        for (int i = 0; i < n; i += 8) {
            const f8 xv = *(const f8_u *)(const void *)(x + i);
            const f8 wv = *(const f8_u *)(const void *)(w + i);
            f8 q =
                __builtin_convertvector(__builtin_convertvector(vis * (xv - vlo) + half, i8), f8);
            q = F8_CLAMP(q, zero, top);
            v1 += wv * q;
            v2 += wv * q * q;
            v3 += wv * xv * q;
        }
        float b1 = 0.0f, b2 = 0.0f, c2 = 0.0f;
        for (int l = 0; l < 8; l++) {
            b1 += v1[l];
            b2 += v2[l];
            c2 += v3[l];
        }
        /* least squares x ~ sc L + t: the 2 x 2 normal equations */
        const double det = (double)a * b2 - (double)b1 * b1;
        if (!(det > 0))
            continue;
        double sc = ((double)a * c2 - (double)b1 * c1) / det;
        double t = ((double)b2 * c1 - (double)b1 * c2) / det;
        if (t > 0 && !free_min) { /* the min must not be positive: x ~ sc L */
            t = 0;
            sc = c2 / (double)b2;
        }
        if (!(sc > 0))
            continue;
        /* sum w (sc L + t - x)^2, expanded over the sums */
        const double e = xx - 2 * sc * c2 - 2 * t * c1 + sc * sc * b2 + 2 * sc * t * b1 + t * t * a;
        if (e < best_e) {
            best_e = e;
            best_s = (float)sc;
            best_m = (float)-t;
        }
    }
    *m_out = best_m;
    return best_s;
}

/* x ~= s * q with codes q in [-qmax, qmax - 1]: returns s with its sign
 * (the value of largest magnitude takes the code -qmax at the start). */
static float fit_sym(const float *x, const float *w, int n, int qmax)
{
    const float amax = signed_absmax(x, n);
    if (amax == 0.0f)
        return 0.0f;
    float best_s = amax / (float)-qmax;
    double best_e = INFINITY;
    for (int k = -K_TRIES; k <= K_TRIES; k++) {
        const float is = ((float)-qmax + 0.1f * (float)k) / amax;
        /* sums of w x q, w q^2, 8 lanes at a time (n is 16); codes round
         * to nearest even by the 1.5 * 2^23 addition (ties are as good
         * either way here) */
        const f8 vis = F8_SPLAT(is), magic = F8_SPLAT(12582912.0f);
        const f8 lo = F8_SPLAT((float)-qmax), hi = F8_SPLAT((float)(qmax - 1));
        f8 v1 = F8_SPLAT(0.0f), v2 = F8_SPLAT(0.0f);
        for (int i = 0; i < n; i += 8) {
            const f8 xv = *(const f8_u *)(const void *)(x + i);
            const f8 wv = *(const f8_u *)(const void *)(w + i);
            f8 q = (vis * xv + magic) - magic;
            q = F8_CLAMP(q, lo, hi);
            v1 += wv * xv * q;
            v2 += wv * q * q;
        }
        float num = 0.0f, den = 0.0f;
        for (int l = 0; l < 8; l++) {
            num += v1[l];
            den += v2[l];
        }
        if (!(den > 0))
            continue;
        /* at the least-squares scale num / den the error is
         * sum w x^2 - num^2 / den: the largest num^2 / den wins */
        const double e = -(double)num * num / den;
        if (e < best_e) {
            best_e = e;
            best_s = num / den;
        }
    }
    return best_s;
}

/* the weights of a block without an importance matrix */
static const float ones32[32] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

float quant__sym_scale(const float *x, const float *qw, int n, int qmax)
{
    return fit_sym(x, qw ? qw : ones32, n, qmax);
}

float quant__asym_scale(const float *x, const float *qw, int n, int nmax, float *min)
{
    float m;
    const float s = fit_asym(x, qw ? qw : ones32, n, nmax, true, &m);
    *min = -m;
    return s;
}

/* ---- the stored scale codes -------------------------------------------
 *
 * A sub-block's scale (and min) is stored as a small integer code times the
 * block's f16 scale (and min scale).  Rounding each code on its own ignores
 * how the values' codes then fall; instead each sub-block of Q2_K, Q4_K,
 * Q5_K and Q6_K keeps whichever of the rounded code (pair) and its
 * neighbours (+-1 each) gives the least weighted squared error, its values
 * re-rounded at each.  On Gaussian blocks under spread weights
 * (test_quant) this cuts the error of Q2_K by 14%, Q4_K 7%, Q5_K 18%; on
 * `small` the KL divergence from F32 of Q2_K by 2.6%, Q4_K_M 2.0%, Q5_K_M
 * 6.9% (BENCHMARKS.md).  Q3_K and IQ4_XS keep their rounded codes: there
 * the search cut the error by about 1% and moved the KL divergence by less
 * than its noise. */

/* Sum of the 8 lanes. */
static float f8_sum(f8 v)
{
    float s = 0.0f;
    for (int l = 0; l < 8; l++)
        s += v[l];
    return s;
}

/* Weighted squared error of n values (a multiple of 8) on codes 0..nmax
 * at x ~= dd * q - dm, the codes rounded to nearest as the quantizers
 * round them (half up here where they round half away from zero: only an
 * exact tie can differ, which decides nothing), 8 lanes at a time: these
 * errors are most of what the code search costs. */
static double asym_err(const float *x, const float *w, int n, int nmax, float dd, float dm)
{
    const f8 vdd = F8_SPLAT(dd), vdm = F8_SPLAT(dm), half = F8_SPLAT(0.5f);
    const f8 zero = F8_SPLAT(0.0f), top = F8_SPLAT((float)nmax + 0.5f);
    f8 acc = zero;
    for (int i = 0; i < n; i += 8) {
        const f8 xv = *(const f8_u *)(const void *)(x + i);
        const f8 wv = *(const f8_u *)(const void *)(w + i);
        f8 q = zero;    /* dd 0: every code 0 */
        if (dd != 0.0f) /* the code + 1/2, held to [0, nmax + 1/2] before truncating */
            q = __builtin_convertvector(
                __builtin_convertvector(F8_CLAMP((xv + vdm) / vdd + half, zero, top), i8), f8);
        const f8 r = vdd * q - vdm - xv;
        acc += wv * r * r;
    }
    return f8_sum(acc);
}

/* The scale and min codes (*ls, *lm in 0..top) of a sub-block of n values
 * on codes 0..nmax, x ~= d * ls * q - dmin * lm: the rounded pair given, or
 * the neighbour of least error. */
static void asym_codes(const float *x, const float *w, int n, int nmax, float d, float dmin,
                       int top, int *ls, int *lm)
{
    double best = asym_err(x, w, n, nmax, d * (float)*ls, dmin * (float)*lm);
    int bs = *ls, bm = *lm;
    for (int a = *ls - 1; a <= *ls + 1; a++)
        for (int b = *lm - 1; b <= *lm + 1; b++) {
            if (a < 0 || a > top || b < 0 || b > top || (a == *ls && b == *lm))
                continue;
            const double e = asym_err(x, w, n, nmax, d * (float)a, dmin * (float)b);
            if (e < best)
                best = e, bs = a, bm = b;
        }
    *ls = bs, *lm = bm;
}

/* Weighted squared error of 16 values on codes lo..hi at x ~= dd * q
 * (Q6_K's sub-blocks), rounded as asym_err rounds (in codes shifted by
 * -lo, so that they are non-negative). */
static double sym_err(const float *x, const float *w, int lo, int hi, float dd)
{
    const f8 vdd = F8_SPLAT(dd), vlo = F8_SPLAT((float)lo), half = F8_SPLAT(0.5f);
    const f8 zero = F8_SPLAT(0.0f), top = F8_SPLAT((float)(hi - lo) + 0.5f);
    f8 acc = zero;
    for (int i = 0; i < 16; i += 8) {
        const f8 xv = *(const f8_u *)(const void *)(x + i);
        const f8 wv = *(const f8_u *)(const void *)(w + i);
        f8 q = zero; /* dd 0: every code 0 */
        if (dd != 0.0f)
            q = __builtin_convertvector(
                    __builtin_convertvector(F8_CLAMP(xv / vdd - vlo + half, zero, top), i8), f8) +
                vlo;
        const f8 r = vdd * q - xv;
        acc += wv * r * r;
    }
    return f8_sum(acc);
}

/* A symmetric sub-block's scale code *s (smin..smax) for codes lo..hi: the
 * rounded one given or a neighbour, whichever has the least error. */
static void sym_code(const float *x, const float *w, int lo, int hi, float d, int smin, int smax,
                     int *s)
{
    double best = sym_err(x, w, lo, hi, d * (float)*s);
    int bs = *s;
    for (int a = *s - 1; a <= *s + 1; a += 2) {
        if (a < smin || a > smax)
            continue;
        const double e = sym_err(x, w, lo, hi, d * (float)a);
        if (e < best)
            best = e, bs = a;
    }
    *s = bs;
}

/* The sixteen sub-block scales of a symmetric K-quant block (Q3_K, Q6_K)
 * by fit_sym; returns the scale of largest magnitude, with its sign. */
static float k16_scales(const float *x, const float *qw, float qmax, float *sc)
{
    float max_sc = 0.0f, amax = 0.0f, w[QK_K];
    k_weights(x, qw, w);
    for (int j = 0; j < 16; j++) {
        sc[j] = fit_sym(x + 16 * j, w + 16 * j, 16, (int)qmax);
        if (fabsf(sc[j]) > amax) {
            amax = fabsf(sc[j]);
            max_sc = sc[j];
        }
    }
    return max_sc;
}

/* ---- Q2_K / Q3_K ----------------------------------------------------- */

/* Both hold 2-bit codes the same way: element 128 n + 32 j + idx (idx < 32)
 * at bits 2 j of qs[32 n + idx]; Q3_K adds a third bit at bit 4 n + j of
 * hmask[idx]. */
void quant__q2_pack(const uint8_t *L, uint8_t *qs)
{
    memset(qs, 0, QK_K / 4);
    for (int e = 0; e < QK_K; e++)
        qs[32 * (e / 128) + e % 32] |= (uint8_t)((L[e] & 3) << (2 * ((e / 32) % 4)));
}

void quant__q2_codes(const uint8_t *qs, uint8_t *L)
{
    for (int e = 0; e < QK_K; e++)
        L[e] = (qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3;
}

void quant__q2_k_from_float(const float *x, void *dst, int64_t n)
{
    quant__q2_k_from_float_w(x, dst, n, NULL);
}

void quant__q2_k_from_float_w(const float *x, void *dst, int64_t n, const float *qw)
{
    struct blk_q2_k *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : NULL) {
        float sc[16], mn[16], max_sc = 0.0f, max_mn = 0.0f, w[QK_K];
        k_weights(x, qw, w);
        for (int j = 0; j < 16; j++) {
            sc[j] =
                fit_asym(x + 16 * j, w + 16 * j, 16, 3, false, &mn[j]); /* x = d*q - m, m >= 0 */
            max_sc = fmaxf(max_sc, sc[j]);
            max_mn = fmaxf(max_mn, mn[j]);
        }
        y[b].d = f2h(max_sc / 15.0f);
        y[b].dmin = f2h(max_mn / 15.0f);
        const float isc = max_sc > 0.0f ? 15.0f / max_sc : 0.0f;
        const float imn = max_mn > 0.0f ? 15.0f / max_mn : 0.0f;
        const float d = h2f(y[b].d), dmin = h2f(y[b].dmin);
        uint8_t L[QK_K];
        for (int j = 0; j < 16; j++) {
            int ls = nearest(isc * sc[j]), lm = nearest(imn * mn[j]);
            ls = ls > 15 ? 15 : ls;
            lm = lm > 15 ? 15 : lm;
            asym_codes(x + 16 * j, w + 16 * j, 16, 3, d, dmin, 15, &ls, &lm);
            y[b].scales[j] = (uint8_t)(ls | (lm << 4));
            const float dd = d * (float)ls, dm = dmin * (float)lm;
            for (int l = 0; l < 16; l++) {
                const int q = dd != 0.0f ? nearest((x[16 * j + l] + dm) / dd) : 0;
                L[16 * j + l] = (uint8_t)(q < 0 ? 0 : q > 3 ? 3 : q);
            }
        }
        quant__q2_pack(L, y[b].qs);
    }
}

void quant__q2_k_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_q2_k *x = src;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        uint8_t L[QK_K];
        quant__q2_codes(x[b].qs, L);
        const float d = h2f(x[b].d), dmin = h2f(x[b].dmin);
        for (int e = 0; e < QK_K; e++) {
            const int s = x[b].scales[e / 16];
            y[e] = d * (float)(s & 15) * (float)L[e] - dmin * (float)(s >> 4);
        }
    }
}

float quant__q2_k_dot(int64_t K, const void *w, const void *xq)
{
    const struct blk_q2_k *a = w;
    const struct blk_q8_k *b = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < K / QK_K; i++) {
        uint8_t L[QK_K];
        quant__q2_codes(a[i].qs, L);
        int32_t sumi = 0, summ = 0;
        for (int j = 0; j < 16; j++) {
            int32_t s = 0;
            for (int l = 0; l < 16; l++)
                s += L[16 * j + l] * b[i].qs[16 * j + l];
            sumi += (a[i].scales[j] & 15) * s;
            summ += (a[i].scales[j] >> 4) * b[i].bsums[j];
        }
        sum += b[i].d * (h2f(a[i].d) * (float)sumi - h2f(a[i].dmin) * (float)summ);
    }
    return sum;
}

/* Q3_K's sixteen 6-bit scale codes (0..63; the scale is sc - 32) */
void quant__q3_k_scales(const uint8_t *p, int *sc)
{
    for (int j = 0; j < 16; j++) {
        const int lo = j < 8 ? p[j] & 15 : p[j - 8] >> 4;
        sc[j] = lo | (((p[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
    }
}

void quant__q3_k_pack_scales(const int *sc, uint8_t *p)
{
    memset(p, 0, K_SCALE_SIZE);
    for (int j = 0; j < 16; j++) {
        p[j % 8] |= (uint8_t)((sc[j] & 15) << (j < 8 ? 0 : 4));
        p[8 + j % 4] |= (uint8_t)((sc[j] >> 4) << (2 * (j / 4)));
    }
}

/* the codes of a Q3_K block as q + 4 (0..7), element order */
void quant__q3_k_codes(const struct blk_q3_k *x, uint8_t *L)
{
    quant__q2_codes(x->qs, L);
    for (int e = 0; e < QK_K; e++)
        L[e] |= (uint8_t)(((x->hmask[e % 32] >> (e / 32)) & 1) << 2);
}

void quant__q3_k_from_float(const float *x, void *dst, int64_t n)
{
    quant__q3_k_from_float_w(x, dst, n, NULL);
}

void quant__q3_k_from_float_w(const float *x, void *dst, int64_t n, const float *qw)
{
    struct blk_q3_k *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : NULL) {
        float sc[16];
        const float max_sc = k16_scales(x, qw, 4.0f, sc);
        const float iscale = max_sc != 0.0f ? -32.0f / max_sc : 0.0f;
        y[b].d = f2h(iscale != 0.0f ? 1.0f / iscale : 0.0f);
        const float d = h2f(y[b].d);
        int ls[16];
        uint8_t L[QK_K];
        for (int j = 0; j < 16; j++) {
            /* the scale code rounded only: a neighbour search as Q6_K's
             * cut the error about 1% and left Q3_K_M's KL divergence on
             * `small` where it was (0.3705 with it, 0.3699 without) */
            int s = nearest(iscale * sc[j]);
            s = s > 31 ? 31 : s < -32 ? -32 : s;
            ls[j] = s + 32;
            const float dd = d * (float)s;
            for (int l = 0; l < 16; l++) {
                int q = dd != 0.0f ? nearest(x[16 * j + l] / dd) : 0;
                q = q < -4 ? -4 : q > 3 ? 3 : q;
                L[16 * j + l] = (uint8_t)(q + 4);
            }
        }
        quant__q3_k_pack_scales(ls, y[b].scales);
        quant__q2_pack(L, y[b].qs);
        memset(y[b].hmask, 0, sizeof y[b].hmask);
        for (int e = 0; e < QK_K; e++)
            y[b].hmask[e % 32] |= (uint8_t)((L[e] >> 2) << (e / 32));
    }
}

void quant__q3_k_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_q3_k *x = src;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        uint8_t L[QK_K];
        int sc[16];
        quant__q3_k_codes(&x[b], L);
        quant__q3_k_scales(x[b].scales, sc);
        const float d = h2f(x[b].d);
        for (int e = 0; e < QK_K; e++)
            y[e] = d * (float)(sc[e / 16] - 32) * (float)(L[e] - 4);
    }
}

float quant__q3_k_dot(int64_t K, const void *w, const void *xq)
{
    const struct blk_q3_k *a = w;
    const struct blk_q8_k *b = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < K / QK_K; i++) {
        uint8_t L[QK_K];
        int sc[16];
        quant__q3_k_codes(&a[i], L);
        quant__q3_k_scales(a[i].scales, sc);
        int32_t sumi = 0;
        for (int j = 0; j < 16; j++) {
            int32_t s = 0;
            for (int l = 0; l < 16; l++)
                s += (L[16 * j + l] - 4) * b[i].qs[16 * j + l];
            sumi += (sc[j] - 32) * s;
        }
        sum += h2f(a[i].d) * b[i].d * (float)sumi;
    }
    return sum;
}

/* ---- Q4_K / Q5_K ------------------------------------------------------ */

void quant__k4_pack_scales(const int *ls, const int *lm, uint8_t *q)
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
static void kq_asym_block(const float *x, const float *qw, int nmax, uint8_t *scales,
                          uint16_t *d_out, uint16_t *dmin_out, uint8_t *L)
{
    float sc[8], mn[8], max_sc = 0.0f, max_mn = 0.0f, w[QK_K];
    k_weights(x, qw, w);
    for (int j = 0; j < 8; j++) {
        sc[j] = fit_asym(x + 32 * j, w + 32 * j, 32, nmax, false, &mn[j]); /* x = d*q - m, m >= 0 */
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
    *d_out = f2h(max_sc / 63.0f);
    *dmin_out = f2h(max_mn / 63.0f);
    const float d = h2f(*d_out), dmin = h2f(*dmin_out);
    for (int j = 0; j < 8; j++)
        asym_codes(x + 32 * j, w + 32 * j, 32, nmax, d, dmin, 63, &ls[j], &lm[j]);
    quant__k4_pack_scales(ls, lm, scales);
    for (int j = 0; j < 8; j++) {
        const float dd = d * (float)ls[j], dm = dmin * (float)lm[j];
        for (int l = 0; l < 32; l++) {
            int q = dd != 0.0f ? nearest((x[32 * j + l] + dm) / dd) : 0;
            L[32 * j + l] = (uint8_t)(q < 0 ? 0 : q > nmax ? nmax : q);
        }
    }
}

void quant__q4_k_from_float(const float *x, void *dst, int64_t n)
{
    quant__q4_k_from_float_w(x, dst, n, NULL);
}

void quant__q4_k_from_float_w(const float *x, void *dst, int64_t n, const float *qw)
{
    struct blk_q4_k *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : NULL) {
        uint8_t L[QK_K];
        kq_asym_block(x, qw, 15, y[b].scales, &y[b].d, &y[b].dmin, L);
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++)
                y[b].qs[32 * j + l] = (uint8_t)(L[64 * j + l] | (L[64 * j + 32 + l] << 4));
    }
}

/* the codes (0..15) of a Q4_K block, element order */
void quant__q4_k_codes(const struct blk_q4_k *x, uint8_t *L)
{
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) {
            L[64 * j + l] = x->qs[32 * j + l] & 15;
            L[64 * j + 32 + l] = x->qs[32 * j + l] >> 4;
        }
}

/* A Q4_K / Q5_K block's 256 values from its codes L and 8 (sc, m) pairs */
static void kq_asym_to_float(const uint8_t *L, const uint8_t *scales, float d, float dmin, float *y)
{
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k4_scale_min(j, scales, &sc, &m);
        for (int l = 0; l < 32; l++)
            y[32 * j + l] = d * (float)sc * (float)L[32 * j + l] - dmin * (float)m;
    }
}

void quant__q4_k_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_q4_k *x = src;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        uint8_t L[QK_K];
        quant__q4_k_codes(&x[b], L);
        kq_asym_to_float(L, x[b].scales, h2f(x[b].d), h2f(x[b].dmin), y);
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

/* The dot of K columns of a Q4_K / Q5_K row (blk_T blocks, codes by
 * quant__T_codes) with a Q8_K row: kq_asym_dot per block, summed in order. */
#define KQ_ASYM_ROW_DOT(T)                                                                         \
    float quant__##T##_dot(int64_t K, const void *w, const void *xq)                               \
    {                                                                                              \
        const struct blk_##T *a = w;                                                               \
        const struct blk_q8_k *b = xq;                                                             \
        float sum = 0.0f;                                                                          \
        for (int64_t i = 0; i < K / QK_K; i++) {                                                   \
            uint8_t L[QK_K];                                                                       \
            quant__##T##_codes(&a[i], L);                                                          \
            sum += kq_asym_dot(L, a[i].scales, h2f(a[i].d), h2f(a[i].dmin), &b[i]);                \
        }                                                                                          \
        return sum;                                                                                \
    }
KQ_ASYM_ROW_DOT(q4_k)

void quant__q5_k_from_float(const float *x, void *dst, int64_t n)
{
    quant__q5_k_from_float_w(x, dst, n, NULL);
}

void quant__q5_k_from_float_w(const float *x, void *dst, int64_t n, const float *qw)
{
    struct blk_q5_k *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : NULL) {
        uint8_t L[QK_K];
        kq_asym_block(x, qw, 31, y[b].scales, &y[b].d, &y[b].dmin, L);
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

void quant__q5_k_codes(const struct blk_q5_k *x, uint8_t *L)
{
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) {
            L[64 * j + l] =
                (uint8_t)((x->qs[32 * j + l] & 15) | (((x->qh[l] >> (2 * j)) & 1) << 4));
            L[64 * j + 32 + l] =
                (uint8_t)((x->qs[32 * j + l] >> 4) | (((x->qh[l] >> (2 * j + 1)) & 1) << 4));
        }
}

void quant__q5_k_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_q5_k *x = src;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        uint8_t L[QK_K];
        quant__q5_k_codes(&x[b], L);
        kq_asym_to_float(L, x[b].scales, h2f(x[b].d), h2f(x[b].dmin), y);
    }
}

KQ_ASYM_ROW_DOT(q5_k)

/* ---- Q6_K ------------------------------------------------------------- */

/* codes L[256] (0..63, element order) into a Q6_K block's ql and qh */
void quant__q6_k_pack(const uint8_t *L, uint8_t *ql_out, uint8_t *qh_out)
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

void quant__q6_k_from_float(const float *x, void *dst, int64_t n)
{
    quant__q6_k_from_float_w(x, dst, n, NULL);
}

void quant__q6_k_from_float_w(const float *x, void *dst, int64_t n, const float *qw)
{
    struct blk_q6_k *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : NULL) {
        float sc[16], w[QK_K];
        const float max_sc = k16_scales(x, qw, 32.0f, sc);
        const float iscale = max_sc != 0.0f ? -128.0f / max_sc : 0.0f;
        y[b].d = f2h(iscale != 0.0f ? 1.0f / iscale : 0.0f);
        const float d = h2f(y[b].d);
        uint8_t L[QK_K];
        k_weights(x, qw, w);
        for (int j = 0; j < 16; j++) {
            int s = nearest(iscale * sc[j]);
            s = s > 127 ? 127 : s < -128 ? -128 : s;
            sym_code(x + 16 * j, w + 16 * j, -32, 31, d, -128, 127, &s);
            y[b].scales[j] = (int8_t)s;
            const float dd = d * (float)y[b].scales[j];
            for (int l = 0; l < 16; l++) {
                int q = dd != 0.0f ? nearest(x[16 * j + l] / dd) : 0;
                q = q < -32 ? -32 : q > 31 ? 31 : q;
                L[16 * j + l] = (uint8_t)(q + 32);
            }
        }
        quant__q6_k_pack(L, y[b].ql, y[b].qh);
    }
}

/* the signed codes (-32..31) of a Q6_K block, element order */
void quant__q6_k_codes(const struct blk_q6_k *x, int8_t *q)
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

void quant__q6_k_to_float(const void *src, float *y, int64_t n)
{
    const struct blk_q6_k *x = src;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        int8_t q[QK_K];
        quant__q6_k_codes(&x[b], q);
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK_K; j++)
            y[j] = d * (float)x[b].scales[j / 16] * (float)q[j];
    }
}

float quant__q6_k_dot(int64_t K, const void *w, const void *xq)
{
    const struct blk_q6_k *a = w;
    const struct blk_q8_k *b = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < K / QK_K; i++) {
        int8_t q[QK_K];
        quant__q6_k_codes(&a[i], q);
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
