/*
 * model/gemm.c — the packed-weight f32 product (contract in model/gemm.h):
 * W's packing, the blocked loops, and the plain C microkernel that is the
 * reference for the AVX2 one (model/gemm_avx2.c).
 *
 * Why: OpenBLAS's sgemm packs both operands on every call.  In foliod's
 * products W is the large operand (thousands of rows) and A the small one
 * (M = 5..512 tokens), so sgemm spends a large share of a batched decode
 * step re-packing weights that never change (measured: about 18% of the
 * CPU under 64 concurrent streams).  Here W is packed once, at load, into
 * the layout the microkernel reads, and only A is packed per call.
 *
 * Layout (GEMM_NR = 16, K columns):
 *
 *     panel p  = rows 16p .. 16p+15 of W, k-major:
 *                [k = 0][w16p,0  w16p+1,0  ..  w16p+15,0]
 *                [k = 1][w16p,1  ...                    ]
 *                ...                                      (K x 16 floats)
 *     P        = panel 0 | panel 1 | ... (rows past N are zero)
 *
 * Loops, for one thread's band of columns [n0, n1) (GotoBLAS's order):
 *
 *     for k0 in K by GEMM_KC:                       one k-block
 *       for m0 in M by ~GEMM_MC:                    A[m0.., k0..] packed
 *                                                   into GEMM_MR-row panels
 *         for each panel of W in the band:          [kc][16], 16 KiB: L1
 *           for each GEMM_MR-row panel of A:        from L2
 *             microkernel: C[6][16] (+)= Ap · Bp over kc
 *
 * The first k-block writes C with the caller's beta, the others add.  A's
 * packed block (at most GEMM_MC x GEMM_KC floats, 192 KiB) stays in L2
 * while every panel of the band streams past it once; W is read once per
 * block of A's rows (once in all for M <= GEMM_MC).  Partial tiles (the
 * last rows of A, the last columns of W) go through the same kernel with
 * mr < 6 or nr < 16: A's packed rows are zero past mr, and only mr x nr
 * results are stored.
 *
 * Results differ from sgemm's only in the order of the sums (each C
 * element is one chain over k per k-block, blocks added in order).
 */
#include "gemm.h"

#include <string.h>

#include "folio/common.h"

typedef void (*gemm_ukr_fn)(int32_t, const float *, const float *, float *, int32_t, int, int, bool,
                            const float *);

static gemm_ukr_fn ukr = gemm_ukr_plain;
static const char *ukr_name = "plain";

void gemm_isa_init(bool plain)
{
#if defined(__x86_64__)
    if (!plain && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        ukr = gemm_ukr_avx2;
        ukr_name = "avx2";
        return;
    }
#else
    (void)plain;
#endif
    ukr = gemm_ukr_plain;
    ukr_name = "plain";
}

const char *gemm_isa_name(void)
{
    return ukr_name;
}

void gemm_pack_f32(const float *W, int32_t N, int32_t K, float *P)
{
    for (int32_t n0 = 0; n0 < N; n0 += GEMM_NR) {
        float *p = P + (size_t)n0 * K;
        const int32_t nr = FOLIO_MIN(GEMM_NR, N - n0);
        /* k in blocks of 64 so the 16 source rows' lines stay in L1 */
        for (int32_t kb = 0; kb < K; kb += 64) {
            const int32_t ke = FOLIO_MIN(K, kb + 64);
            for (int32_t j = 0; j < GEMM_NR; j++) {
                const float *w = W + (size_t)(n0 + j) * K;
                for (int32_t k = kb; k < ke; k++)
                    p[(size_t)k * GEMM_NR + j] = j < nr ? w[k] : 0.0f;
            }
        }
    }
}

void gemm_transpose_panel(const float *rows, int32_t nr, int32_t kc, float *panel)
{
#if defined(__x86_64__)
    if (ukr == gemm_ukr_avx2 && nr == GEMM_NR && kc % 8 == 0) {
        gemm_transpose16_avx2(rows, kc, panel);
        return;
    }
#endif
    for (int32_t k = 0; k < kc; k++)
        for (int32_t j = 0; j < GEMM_NR; j++)
            panel[(size_t)k * GEMM_NR + j] = j < nr ? rows[(size_t)j * kc + k] : 0.0f;
}

void gemm_ukr_plain(int32_t kc, const float *Ap, const float *Bp, float *C, int32_t ldc, int mr,
                    int nr, bool acc, const float *pf)
{
    (void)pf;
    float t[GEMM_MR][GEMM_NR];
    memset(t, 0, sizeof(t));
    for (int32_t k = 0; k < kc; k++)
        for (int i = 0; i < GEMM_MR; i++) {
            const float a = Ap[(size_t)k * GEMM_MR + i];
            for (int j = 0; j < GEMM_NR; j++)
                t[i][j] += a * Bp[(size_t)k * GEMM_NR + j];
        }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float *c = C + (size_t)i * ldc + j;
            *c = acc ? *c + t[i][j] : t[i][j];
        }
}

/* Rows [m0, m0 + mc) and k in [k0, k0 + kc) of A into GEMM_MR-row panels
 * [kc][GEMM_MR], zero past the last row. */
static void pack_a(const float *A, int32_t lda, int32_t m0, int32_t mc, int32_t k0, int32_t kc,
                   float *Ap)
{
    for (int32_t i0 = 0; i0 < mc; i0 += GEMM_MR) {
        float *p = Ap + (size_t)i0 * kc;
        const int32_t mr = FOLIO_MIN(GEMM_MR, mc - i0);
        for (int32_t i = 0; i < GEMM_MR; i++) {
            if (i >= mr) {
                for (int32_t k = 0; k < kc; k++)
                    p[(size_t)k * GEMM_MR + i] = 0.0f;
                continue;
            }
            const float *a = A + (size_t)(m0 + i0 + i) * lda + k0;
            for (int32_t k = 0; k < kc; k++)
                p[(size_t)k * GEMM_MR + i] = a[k];
        }
    }
}

void gemm_gemv(const float *P, int32_t N, int32_t K, int32_t n0, int32_t n1, const float *a,
               float beta, float *c)
{
    FOLIO_CHECK(n0 % GEMM_NR == 0 && n0 <= n1 && n1 <= N, "gemv band [%d, %d) of %d", (int)n0,
                (int)n1, (int)N);
#if defined(__x86_64__)
    if (ukr == gemm_ukr_avx2) {
        gemm_gemv_avx2(P, K, n0, n1, a, beta, c);
        return;
    }
#endif
    for (int32_t n = n0; n < n1; n += GEMM_NR) {
        const float *p = P + (size_t)n * K;
        float t[GEMM_NR] = {0};
        for (int32_t k = 0; k < K; k++)
            for (int j = 0; j < GEMM_NR; j++)
                t[j] += a[k] * p[(size_t)k * GEMM_NR + j];
        for (int j = 0; j < GEMM_NR && n + j < n1; j++)
            c[n + j] = beta != 0.0f ? c[n + j] + t[j] : t[j];
    }
}

void gemm_run(const float *P, int32_t N, int32_t K, int32_t n0, int32_t n1, int32_t M,
              const float *A, int32_t lda, float beta, float *C, int32_t ldc, float *ws)
{
    FOLIO_CHECK(n0 % GEMM_NR == 0 && n0 <= n1 && n1 <= N && M >= 1 && lda >= K,
                "gemm band [%d, %d) of %d, M %d, lda %d, K %d", (int)n0, (int)n1, (int)N, (int)M,
                (int)lda, (int)K);
    float *Ap = ws;
    /* blocks of A's rows of equal size, multiples of GEMM_MR */
    const int32_t nmb = (M + GEMM_MC - 1) / GEMM_MC;
    const int32_t MB = FOLIO_MIN(GEMM_MC, ((M + nmb - 1) / nmb + GEMM_MR - 1) / GEMM_MR * GEMM_MR);
    for (int32_t k0 = 0; k0 < K; k0 += GEMM_KC) {
        const int32_t kc = FOLIO_MIN(GEMM_KC, K - k0);
        const bool acc = k0 > 0 || beta != 0.0f;
        for (int32_t m0 = 0; m0 < M; m0 += MB) {
            const int32_t mc = FOLIO_MIN(MB, M - m0);
            pack_a(A, lda, m0, mc, k0, kc, Ap);
            for (int32_t n = n0; n < n1; n += GEMM_NR) {
                const int nr = FOLIO_MIN(GEMM_NR, n1 - n);
                const float *Bp = P + (size_t)n * K + (size_t)k0 * GEMM_NR;
                /* the first call on this panel prefetches the next one, in
                 * the first block of A's rows: the pass that brings W from
                 * memory (measured: 1.05-1.2x at M = 16..64; at M = 512 the
                 * later blocks find W in L3, and prefetching cost there) */
                const float *next = m0 == 0 && n + GEMM_NR < n1 ? Bp + (size_t)GEMM_NR * K : NULL;
                for (int32_t i0 = 0; i0 < mc; i0 += GEMM_MR)
                    ukr(kc, Ap + (size_t)i0 * kc, Bp, C + (size_t)(m0 + i0) * ldc + n, ldc,
                        FOLIO_MIN(GEMM_MR, mc - i0), nr, acc, i0 == 0 ? next : NULL);
            }
        }
    }
}
