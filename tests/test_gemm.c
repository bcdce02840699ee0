/*
 * tests/test_gemm.c — the packed-weight f32 gemm (model/gemm.h) against a
 * double-precision product written here, and its microkernels against each
 * other.
 *
 * Shapes are chosen to miss every blocking: M around and past GEMM_MR and
 * GEMM_MC (several blocks of A's rows, a last partial panel), N not a
 * multiple of GEMM_NR (a last partial panel of W), K below, at and past
 * GEMM_KC with a remainder (several k-blocks, the first one taking beta),
 * bands starting inside W, row strides wider than the matrices, beta 0 and
 * 1; every element outside the band must stay untouched (M = 1 runs
 * gemm_gemv, the decode kernel, instead of gemm_run).  The packed
 * layout itself is checked element by element, and gemm_transpose_panel
 * (how model/matmul.c widens 16-bit and quantized tiles into it) against
 * its definition.  The whole test runs with each microkernel the CPU has (AVX2 + FMA, and
 * the plain C reference), and with the AVX-512 driver (gemm_run_avx512).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../model/gemm.h"
#include "folio/common.h"

static uint64_t rng = 11;
static bool g_avx512;    /* run_shape calls gemm_run_avx512 for M > 1 */
static float urand(void) /* [-1, 1) */
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) / 4503599627370496.0 - 1.0);
}

static void run_shape(int32_t M, int32_t N, int32_t K, int32_t n0, int32_t n1, int beta)
{
    const int32_t lda = K + 5, ldc = N + 3;
    float *W = malloc(sizeof(float) * (size_t)N * K), *A = malloc(sizeof(float) * (size_t)M * lda);
    float *C0 = malloc(sizeof(float) * (size_t)M * ldc), *C1 = malloc(sizeof(float) * M * ldc);
    float *P = folio_aligned_alloc(64, sizeof(float) * gemm_packed_floats(N, K));
    float *ws = folio_aligned_alloc(64, sizeof(float) * gemm_ws_floats());
    assert_true(W && A && C0 && C1 && P && ws);
    for (size_t i = 0; i < (size_t)N * K; i++)
        W[i] = urand();
    for (size_t i = 0; i < (size_t)M * lda; i++)
        A[i] = urand();
    for (size_t i = 0; i < (size_t)M * ldc; i++)
        C0[i] = C1[i] = urand();
    gemm_pack_f32(W, N, K, P);
    /* the layout: P[p][k][j] = W[16 p + j][k], zero past N */
    for (int32_t n = 0; n < (N + GEMM_NR - 1) / GEMM_NR * GEMM_NR; n++)
        for (int32_t k = 0; k < K; k += 7)
            assert_true(
                P[(size_t)(n / GEMM_NR) * GEMM_NR * K + (size_t)k * GEMM_NR + n % GEMM_NR] ==
                (n < N ? W[(size_t)n * K + k] : 0.0f));
    if (M == 1) /* the decode kernel */
        gemm_gemv(P, N, K, n0, n1, A, (float)beta, C1);
#if defined(__x86_64__)
    else if (g_avx512)
        gemm_run_avx512(P, K, n0, n1, M, A, lda, (float)beta, C1, ldc);
#endif
    else
        gemm_run(P, N, K, n0, n1, M, A, lda, (float)beta, C1, ldc, ws);
    for (int32_t m = 0; m < M; m++)
        for (int32_t n = 0; n < ldc; n++) {
            const size_t i = (size_t)m * ldc + n;
            if (n < n0 || n >= n1) { /* outside the band: untouched */
                assert_true(C1[i] == C0[i]);
                continue;
            }
            double ref = beta ? C0[i] : 0.0, mag = 0;
            for (int32_t k = 0; k < K; k++) {
                const double p = (double)A[(size_t)m * lda + k] * W[(size_t)n * K + k];
                ref += p;
                mag += fabs(p);
            }
            if (fabs(C1[i] - ref) > 1e-5 * (mag + 1))
                fail_msg("M %d N %d K %d band [%d, %d) beta %d: C[%d][%d] %g, want %g", (int)M,
                         (int)N, (int)K, (int)n0, (int)n1, beta, (int)m, (int)n, (double)C1[i],
                         ref);
        }
    free(W), free(A), free(C0), free(C1);
    folio_free(P), folio_free(ws);
}

static void shapes(void)
{
    const int32_t Ms[] = {1, 5, 6, 7, 13, 64, GEMM_MC + 1, 2 * GEMM_MC + 11};
    const int32_t Ks[] = {1, 9, GEMM_KC, GEMM_KC + 3, 2 * GEMM_KC + 100};
    for (size_t mi = 0; mi < FOLIO_ARRAY_LEN(Ms); mi++)
        for (size_t ki = 0; ki < FOLIO_ARRAY_LEN(Ks); ki++)
            for (int beta = 0; beta < 2; beta++) {
                const int32_t N = 16 * (1 + (int32_t)((urand() + 1) * 3)) + (int32_t)(mi % 16);
                const int32_t M = Ms[mi], K = Ks[ki];
                run_shape(M, N, K, 0, N, beta);
                /* a band from inside W to its end, and one inside it */
                if (N > GEMM_NR)
                    run_shape(M, N, K, GEMM_NR, N, beta);
                if (N > 2 * GEMM_NR)
                    run_shape(M, N, K, GEMM_NR, 2 * GEMM_NR, beta);
            }
}

static void test_plain(void **state)
{
    (void)state;
    gemm_isa_init(true);
    assert_string_equal(gemm_isa_name(), "plain");
    shapes();
}

/* The fast microkernel against the plain one on the same packed panels:
 * every mr x nr, kc from 1 up, both accumulate modes. */
static void test_ukr_vs_plain(void **state)
{
    (void)state;
    gemm_isa_init(false);
    if (strcmp(gemm_isa_name(), "plain") == 0)
        skip();
    shapes();
#if defined(__x86_64__)
    enum { KC = 37, LDC = 21 };
    float *Ap = folio_aligned_alloc(64, sizeof(float) * KC * GEMM_MR);
    float *Bp = folio_aligned_alloc(64, sizeof(float) * KC * GEMM_NR);
    float C0[GEMM_MR * LDC], C1[GEMM_MR * LDC], C2[GEMM_MR * LDC];
    assert_true(Ap && Bp);
    for (int mr = 1; mr <= GEMM_MR; mr++)
        for (int nr = 1; nr <= GEMM_NR; nr++)
            for (int acc = 0; acc < 2; acc++) {
                for (int i = 0; i < KC * GEMM_MR; i++)
                    Ap[i] = i % GEMM_MR < mr ? urand() : 0.0f;
                for (int i = 0; i < KC * GEMM_NR; i++)
                    Bp[i] = urand();
                for (int i = 0; i < GEMM_MR * LDC; i++)
                    C0[i] = C1[i] = C2[i] = urand();
                gemm_ukr_plain(KC, Ap, Bp, C1, LDC, mr, nr, acc, NULL);
                gemm_ukr_avx2(KC, Ap, Bp, C2, LDC, mr, nr, acc, mr == 1 ? Bp : NULL);
                for (int i = 0; i < GEMM_MR; i++)
                    for (int j = 0; j < LDC; j++) {
                        const size_t x = (size_t)i * LDC + j;
                        if (i >= mr || j >= nr)
                            assert_true(C2[x] == C0[x]);
                        else
                            assert_true(fabsf(C2[x] - C1[x]) <= 1e-5f * (1 + fabsf(C1[x])));
                    }
            }
    folio_free(Ap), folio_free(Bp);
#endif
}

/* The AVX-512 driver (gemm_run_avx512: 12 x 32 tiles, k-blocks of 512,
 * A read in place) on the same shapes: row blocks of every height, bands
 * ending inside a panel or a panel pair, K over several k-blocks. */
static void test_avx512(void **state)
{
    (void)state;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f"))
        skip();
    g_avx512 = true;
    shapes();
    for (int32_t M = 2; M <= 26; M++) /* every microkernel height, one and two panels */
        for (int beta = 0; beta < 2; beta++) {
            run_shape(M, 45, 1100, 0, 45, beta);
            run_shape(M, 45, 33, 16, 45, beta);
        }
    g_avx512 = false;
#else
    skip();
#endif
}

/* gemm_transpose_panel (the AVX2 8 x 8 blocks when nr = 16 and kc % 8 = 0,
 * else plain) against the definition. */
static void transpose_check(void)
{
    float rows[GEMM_NR * 40], panel[40 * GEMM_NR];
    for (int32_t kc = 8; kc <= 40; kc += 8 + (kc == 16 ? -5 : 0))
        for (int32_t nr = 1; nr <= GEMM_NR; nr += 5) {
            for (int i = 0; i < GEMM_NR * kc; i++)
                rows[i] = urand();
            gemm_transpose_panel(rows, nr, kc, panel);
            for (int32_t k = 0; k < kc; k++)
                for (int32_t j = 0; j < GEMM_NR; j++)
                    assert_true(panel[k * GEMM_NR + j] == (j < nr ? rows[j * kc + k] : 0.0f));
        }
}

static void test_transpose(void **state)
{
    (void)state;
    gemm_isa_init(true);
    transpose_check();
    gemm_isa_init(false);
    transpose_check();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_ukr_vs_plain),
        cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_avx512),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
