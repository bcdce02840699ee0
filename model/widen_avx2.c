/*
 * model/widen_avx2.c — weight rows of F16, BF16, Q8_0, Q4_K and Q6_K
 * widened to f32 with AVX2 + F16C (contract in model/widen.h), for
 * model/matmul.c's widened tiles: a tile of W is widened once per product
 * and multiplied by sgemm with every row of A, so the conversion costs one
 * pass over the tile whatever M is, and must stay a small fraction of
 * sgemm's time on it (the plain C conversions of model/quant.c cost
 * several times more than these for the K-quants).
 *
 * F16 by vcvtph2ps, BF16 by a shift; Q8_0, Q4_K and Q6_K decode their codes
 * with masks and shifts to bytes, widen them to int32, convert, and apply
 * the block's scale (and Q4_K's min) in one multiply or FMA.  The scales
 * are formed in f32 as model/quant.c's to_float forms them (d * sc, dmin *
 * m); Q4_K's d sc q - dmin m is one fused multiply-subtract here, two
 * roundings there, so an element may differ from quant_to_float's in its
 * last bit (the tests compare within a relative 1e-6).
 */
#include "widen.h"

#include <immintrin.h>
#include <string.h>

#include "quant.h"
#include "quant_internal.h"
#include "quant_x86.h"

bool widen_supports(enum gguf_tensor_type t, int64_t K)
{
    if (K < 8 || K % 8)
        return false;
    switch (t) {
    case GGUF_TENSOR_F16:
    case GGUF_TENSOR_BF16:
        return true;
    case GGUF_TENSOR_Q8_0:
        return K % QK8_0 == 0;
    case GGUF_TENSOR_Q4_K:
    case GGUF_TENSOR_Q6_K:
        return K % QK_K == 0;
    default:
        return false;
    }
}

/* ---- widening one k-block of W rows into the tile ----------------------- */

static inline void widen_f16(const uint16_t *w, int64_t kc, float *dst)
{
    for (int64_t k = 0; k < kc; k += 8)
        _mm256_storeu_ps(dst + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + k))));
}

static inline void widen_bf16(const uint16_t *w, int64_t kc, float *dst)
{
    for (int64_t k = 0; k < kc; k += 8) {
        const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(w + k)));
        _mm256_storeu_ps(dst + k, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
    }
}

/* 8 signed / unsigned bytes to f32 */
static inline __m256 i8x8(__m128i v)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
}
static inline __m256 u8x8(__m128i v)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
}

static inline void widen_q8_0(const struct blk_q8_0 *w, int64_t kc, float *dst)
{
    for (int64_t b = 0; b < kc / QK8_0; b++, dst += QK8_0) {
        const __m256 d = _mm256_set1_ps(h2f(w[b].d));
        const __m128i lo = _mm_loadu_si128((const __m128i *)w[b].qs),
                      hi = _mm_loadu_si128((const __m128i *)(w[b].qs + 16));
        _mm256_storeu_ps(dst, _mm256_mul_ps(d, i8x8(lo)));
        _mm256_storeu_ps(dst + 8, _mm256_mul_ps(d, i8x8(_mm_srli_si128(lo, 8))));
        _mm256_storeu_ps(dst + 16, _mm256_mul_ps(d, i8x8(hi)));
        _mm256_storeu_ps(dst + 24, _mm256_mul_ps(d, i8x8(_mm_srli_si128(hi, 8))));
    }
}

/* 32 unsigned codes (two 16-byte halves) times s minus m, to dst */
static inline void codes32(__m128i lo, __m128i hi, __m256 s, __m256 m, float *dst)
{
    _mm256_storeu_ps(dst, _mm256_fmsub_ps(u8x8(lo), s, m));
    _mm256_storeu_ps(dst + 8, _mm256_fmsub_ps(u8x8(_mm_srli_si128(lo, 8)), s, m));
    _mm256_storeu_ps(dst + 16, _mm256_fmsub_ps(u8x8(hi), s, m));
    _mm256_storeu_ps(dst + 24, _mm256_fmsub_ps(u8x8(_mm_srli_si128(hi, 8)), s, m));
}

static inline void widen_q4_k(const struct blk_q4_k *w, int64_t kc, float *dst)
{
    const __m128i lo4 = _mm_set1_epi8(15);
    for (int64_t b = 0; b < kc / QK_K; b++, dst += QK_K) {
        const float d = h2f(w[b].d), dmin = h2f(w[b].dmin);
        const uint8_t *q = w[b].scales;
        for (int i = 0; i < 4; i++) { /* sub-blocks 2i (low nibbles), 2i + 1 (high) */
            const __m128i a = _mm_loadu_si128((const __m128i *)(w[b].qs + 32 * i)),
                          c = _mm_loadu_si128((const __m128i *)(w[b].qs + 32 * i + 16));
            for (int h = 0; h < 2; h++) {
                const int j = 2 * i + h;
                int sc, m;
                if (j < 4) {
                    sc = q[j] & 63;
                    m = q[j + 4] & 63;
                } else {
                    sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
                    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
                }
                const __m128i lo = _mm_and_si128(h ? _mm_srli_epi16(a, 4) : a, lo4),
                              hi = _mm_and_si128(h ? _mm_srli_epi16(c, 4) : c, lo4);
                codes32(lo, hi, _mm256_set1_ps(d * (float)sc), _mm256_set1_ps(dmin * (float)m),
                        dst + 32 * j);
            }
        }
    }
}

static inline void widen_q6_k(const struct blk_q6_k *w, int64_t kc, float *dst)
{
    const __m128i lo4 = _mm_set1_epi8(15), lo2 = _mm_set1_epi8(3), o32 = _mm_set1_epi8(32);
    for (int64_t b = 0; b < kc / QK_K; b++, dst += QK_K) {
        const float d = h2f(w[b].d);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[b].ql + 64 * h, *qh = w[b].qh + 32 * h;
            for (int half = 0; half < 2; half++) { /* l in [16 half, 16 half + 16) */
                const __m128i l0 = _mm_loadu_si128((const __m128i *)(ql + 16 * half)),
                              l1 = _mm_loadu_si128((const __m128i *)(ql + 32 + 16 * half)),
                              hb = _mm_loadu_si128((const __m128i *)(qh + 16 * half));
                __m128i g[4];
                g[0] =
                    _mm_or_si128(_mm_and_si128(l0, lo4), _mm_slli_epi16(_mm_and_si128(hb, lo2), 4));
                g[1] = _mm_or_si128(_mm_and_si128(l1, lo4),
                                    _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(hb, 2), lo2), 4));
                g[2] = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(l0, 4), lo4),
                                    _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(hb, 4), lo2), 4));
                g[3] = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(l1, 4), lo4),
                                    _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(hb, 6), lo2), 4));
                for (int gi = 0; gi < 4; gi++) {
                    /* elements 128 h + 32 gi + 16 half + [0, 16): one scale */
                    const int e = 128 * h + 32 * gi + 16 * half;
                    const __m256 s = _mm256_set1_ps(d * (float)w[b].scales[e / 16]);
                    const __m128i v = _mm_sub_epi8(g[gi], o32);
                    _mm256_storeu_ps(dst + e, _mm256_mul_ps(i8x8(v), s));
                    _mm256_storeu_ps(dst + e + 8, _mm256_mul_ps(i8x8(_mm_srli_si128(v, 8)), s));
                }
            }
        }
    }
}

void widen_rows_avx2(enum gguf_tensor_type t, const void *W, int64_t K, int64_t r0, int64_t n,
                     float *dst)
{
    const size_t ws = quant_row_bytes(t, K);
    for (int64_t r = 0; r < n; r++, dst += K) {
        const uint8_t *row = (const uint8_t *)W + (size_t)(r0 + r) * ws;
        switch (t) {
        case GGUF_TENSOR_F16:
            widen_f16((const uint16_t *)row, K, dst);
            break;
        case GGUF_TENSOR_BF16:
            widen_bf16((const uint16_t *)row, K, dst);
            break;
        case GGUF_TENSOR_Q8_0:
            widen_q8_0((const struct blk_q8_0 *)row, K, dst);
            break;
        case GGUF_TENSOR_Q4_K:
            widen_q4_k((const struct blk_q4_k *)row, K, dst);
            break;
        default: /* Q6_K (widen_supports) */
            widen_q6_k((const struct blk_q6_k *)row, K, dst);
            break;
        }
    }
}
