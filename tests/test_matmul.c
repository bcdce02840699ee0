/*
 * tests/test_matmul.c — the matmul layer (model/matmul.h) against a plain
 * double-precision product written here.
 *
 * For every weight type (F32, F16, BF16, Q8_0), every backend built
 * (OpenBLAS; oneDNN when found) and 1 to 3 threads, random shapes (N not a
 * multiple of the band alignment, K a multiple of 32), every M from the
 * fused 16-bit range to beyond it, row strides wider than the matrices and
 * beta 0 and 1: C must equal beta C + A · Wᵀ computed in double from W's
 * dequantized values, within a tolerance that depends on how the path
 * treats A:
 *   - f32 arithmetic on W's exact values (F32, the portable 16-bit path):
 *     1e-4 relative to the row's scale;
 *   - A rounded to bf16 (oneDNN bf16, model/gemm_bf16.h's kernel): 2e-2;
 *   - A quantized to 8 bits per 32-block (Q8_0): 2e-2.
 * Run it again with DNNL_MAX_CPU_ISA set (meson does, as test_matmul_isa)
 * to force oneDNN's lower ISA paths.
 *
 * F32 through the packed-weight gemm (model/gemm.h, the default; its
 * AVX-512 kernel where the CPU has it) is also compared with sgemm
 * directly on `small`'s K (test_packed_vs_sgemm).  model/gemm_bf16.h's
 * AVX512-BF16 kernel and its plain reference are held to a double product
 * on their own (test_gemm_bf16).
 *
 * Quantized weights of many rows (Q8_0, Q4_K, Q6_K from 256, 128, 32 rows
 * of A) run as widened tiles and sgemm with AVX2 (model/matmul.c): those
 * products must be exact to 1e-4 (no activation quantization), the AVX2
 * widening must equal quant_to_float, and with batch_invariant they stay
 * on the int8 kernels.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>

#include <cblas.h>

#include "../model/gemm_bf16.h"
#include "../model/matmul.h"
#include "../model/quant.h"
#include "test_isa.h"
#if defined(__x86_64__)
#include "../model/widen.h"
#endif
#include "folio/common.h"
#include "folio/pool.h"

static uint64_t rng = 7;
static double urand(void) /* [-1, 1) */
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 4503599627370496.0 - 1.0;
}

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* W[N][K] of random values stored as type t (a fresh allocation). */
static void *make_weight(enum gguf_tensor_type t, int32_t N, int32_t K)
{
    float *f = malloc(sizeof(float) * (size_t)N * K);
    assert_non_null(f);
    for (size_t i = 0; i < (size_t)N * K; i++)
        f[i] = (float)urand() * 0.5f;
    if (t == GGUF_TENSOR_F32)
        return f;
    void *w = malloc(gguf_tensor_nbytes(t, (int64_t)N * K));
    assert_non_null(w);
    if (t == GGUF_TENSOR_Q8_0) {
        quant_rows(t, f, K, K, 0, N, w);
    } else if (t != GGUF_TENSOR_F16 && t != GGUF_TENSOR_BF16) {
        assert_int_equal(quant_from_float(t, f, w, (int64_t)N * K), 0);
    } else {
        uint16_t *h = w;
        for (size_t i = 0; i < (size_t)N * K; i++)
            h[i] = t == GGUF_TENSOR_F16 ? folio_f32_to_f16(f[i]) : to_bf16(f[i]);
    }
    free(f);
    return w;
}

/* Threads of this process now (/proc/self/task entries). */
static int n_tasks(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static bool g_inv;   /* run_case with cfg.batch_invariant */
static bool g_any_k; /* run_case with K of any size (the one-row kernels' tails) */

static void run_case(enum model_matmul be, enum gguf_tensor_type t, int nth)
{
    const int32_t N = 16 * (1 + (int32_t)((urand() + 1) * 8)) + 5;       /* 21 .. 277 */
    const int32_t K = g_any_k ? 1 + (int32_t)((urand() + 1) * 150)       /* 1 .. 300 */
                              : 32 * (1 + (int32_t)((urand() + 1) * 4)); /* 32 .. 288 */
    const int32_t Ms[] = {1, 2, 4, 5, 17, 40};
    const int32_t max_m = 40, lda = K + 3, ldc = N + 7;
    void *wdata = make_weight(t, N, K);
    struct matmul_mat w = {.type = t, .rows = N, .cols = K, .data = wdata};
    float *wf = malloc(sizeof(float) * (size_t)N * K);
    matmul_mat_rows_f32(&w, 0, N, wf);

    pool_t *pool;
    assert_int_equal(pool_new(nth, &pool), 0);
    const int tasks0 = n_tasks(); /* the pool, and OpenBLAS's idle workers */
    matmul_t *mm;
    struct matmul_config cfg = {.backend = be,
                                .n_threads = nth,
                                .max_m = max_m,
                                .max_k = K,
                                .max_weights = 1,
                                .batch_invariant = g_inv};
    assert_int_equal(matmul_new(&cfg, &mm), 0);
    assert_int_equal(matmul_backend_used(mm), be);
    openblas_set_num_threads(1); /* as model_ctx_new does */
    int32_t id;
    assert_int_equal(matmul_add(mm, &w, &id), 0);

    float *A = malloc(sizeof(float) * (size_t)max_m * lda);
    float *C = malloc(sizeof(float) * (size_t)max_m * ldc);
    float *C0 = malloc(sizeof(float) * (size_t)max_m * ldc);
    for (size_t i = 0; i < (size_t)max_m * lda; i++)
        A[i] = (float)urand();
    /* bf16 arithmetic on oneDNN and in model/gemm_bf16.h's kernel (a
     * prepared copy of a BF16 W is one of those); F16 goes to oneDNN
     * widened to f32, exact */
    const bool narrows =
        t == GGUF_TENSOR_Q8_0 || (!g_inv && t == GGUF_TENSOR_BF16 && matmul_prepared_bytes(mm) > 0);
    const double tol = narrows ? 2e-2 : 1e-4;
    for (size_t mi = 0; mi < FOLIO_ARRAY_LEN(Ms); mi++) {
        const int32_t M = Ms[mi];
        for (int beta = 0; beta < 2; beta++) {
            for (size_t i = 0; i < (size_t)max_m * ldc; i++)
                C[i] = C0[i] = (float)urand();
            matmul_run(mm, pool, id, M, A, lda, (float)beta, C, ldc);
            for (int32_t m = 0; m < max_m; m++)
                for (int32_t n = 0; n < ldc; n++) {
                    size_t i = (size_t)m * ldc + n;
                    if (m >= M || n >= N) { /* outside the product: untouched */
                        if (C[i] != C0[i])
                            fail_msg("%s %s M=%d: C[%d][%d] written outside", model_matmul_name(be),
                                     gguf_tensor_type_name(t), M, m, n);
                        continue;
                    }
                    double s = 0, scale = 0;
                    for (int32_t k = 0; k < K; k++) {
                        s += (double)A[(size_t)m * lda + k] * wf[(size_t)n * K + k];
                        scale += fabs((double)A[(size_t)m * lda + k] * wf[(size_t)n * K + k]);
                    }
                    if (beta)
                        s += C0[i];
                    double e = fabs(C[i] - s) / (scale + 1e-6);
                    if (!(e <= tol))
                        fail_msg("%s %s nth=%d M=%d N=%d K=%d beta=%d: C[%d][%d] = %g, want %g",
                                 model_matmul_name(be), gguf_tensor_type_name(t), nth, M, N, K,
                                 beta, m, n, C[i], s);
                }
        }
    }
    /* oneDNN really ran F32 and F16 (it has f32 kernels on every x86-64
     * ISA; F16 is widened to f32 for it) */
    if (be == MODEL_MATMUL_ONEDNN && (t == GGUF_TENSOR_F32 || t == GGUF_TENSOR_F16))
        assert_true((matmul_prepared_bytes(mm) > 0) == !g_inv);
    /* no oversubscription: the products started no thread (OpenMP held to
     * the calling pool thread, OpenBLAS to one thread).  Fewer is fine: a
     * thread of the previous case's pool, joined, may still have been
     * listed in /proc when tasks0 was counted. */
    int tasks = n_tasks();
    if (tasks > tasks0)
        fail_msg("%s %s nth=%d: %d threads in the process (%d before)", model_matmul_name(be),
                 gguf_tensor_type_name(t), nth, tasks, tasks0);
    matmul_free(mm);
    pool_free(pool);
    free(A), free(C), free(C0), free(wf), free(wdata);
}

static void test_products(void **state)
{
    (void)state;
    static const enum gguf_tensor_type types[] = {GGUF_TENSOR_F32, GGUF_TENSOR_F16,
                                                  GGUF_TENSOR_BF16, GGUF_TENSOR_Q8_0};
    enum model_matmul bes[2] = {MODEL_MATMUL_OPENBLAS, MODEL_MATMUL_ONEDNN};
    int n_be = model_matmul_onednn_built() ? 2 : 1;
    /* three random shapes per case; one in short runs (FOLIO_TEST_SHORT: the
     * sanitizer build, where these products at -O0 were most of the test) */
    const char *sh = getenv("FOLIO_TEST_SHORT");
    const int reps = sh && *sh && strcmp(sh, "0") ? 1 : 3;
    for (int b = 0; b < n_be; b++)
        for (size_t t = 0; t < FOLIO_ARRAY_LEN(types); t++)
            for (int nth = 1; nth <= 3; nth++)
                for (int rep = 0; rep < reps; rep++) {
                    g_inv = false;
                    run_case(bes[b], types[t], nth);
                    if (types[t] != GGUF_TENSOR_Q8_0) { /* the batch-invariant kernels */
                        g_inv = true;
                        run_case(bes[b], types[t], nth);
                        g_inv = false, g_any_k = true; /* K that is no multiple of 32 */
                        run_case(bes[b], types[t], nth);
                        g_any_k = false;
                    }
                }
    g_inv = false;
}

/* Whether this process runs matmul.c's AVX2 paths (FOLIO_MATMUL_ISA). */
static bool avx2_paths(void)
{
    const char *e = getenv("FOLIO_MATMUL_ISA");
#if defined(__x86_64__)
    return !(e && !strcmp(e, "plain")) && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("fma") && folio_cpu_f16c();
#else
    (void)e;
    return false;
#endif
}

/* Batch invariance: row m of C is bit for bit the same whatever M is (a
 * request's logits must not depend on what it is batched with).  For each
 * type and thread count, C of M = 40 rows is compared with each row run
 * alone (M = 1) and with the rows in groups of 3 and of 5 (the kernels'
 * edges).  The int8 quantized kernels are invariant as they are; F32, F16
 * and BF16 only with batch_invariant (the rowdot kernels; K then has a tail
 * that is not a multiple of 8), and so are the quantized types that run as
 * widened tiles from some M on. */
/* Returns the number of elements that differ. */
static long row_invariance_case(enum model_matmul be, enum gguf_tensor_type t, int nth, bool inv)
{
    long bad = 0;
    const bool b16 = t == GGUF_TENSOR_F32 || t == GGUF_TENSOR_F16 || t == GGUF_TENSOR_BF16;
    const int32_t N = 16 * 9 + 5, K = 256 * 2 + (inv && b16 ? 32 + 4 : 0), max_m = 40;
    void *wdata = make_weight(t, N, K);
    struct matmul_mat w = {.type = t, .rows = N, .cols = K, .data = wdata};
    pool_t *pool;
    assert_int_equal(pool_new(nth, &pool), 0);
    matmul_t *mm;
    struct matmul_config cfg = {.backend = be,
                                .n_threads = nth,
                                .max_m = max_m,
                                .max_k = K,
                                .max_weights = 1,
                                .batch_invariant = inv};
    assert_int_equal(matmul_new(&cfg, &mm), 0);
    openblas_set_num_threads(1);
    int32_t id;
    assert_int_equal(matmul_add(mm, &w, &id), 0);
    float *A = malloc(sizeof(float) * (size_t)max_m * K);
    float *C = malloc(sizeof(float) * (size_t)max_m * N);
    float *R = malloc(sizeof(float) * (size_t)max_m * N);
    for (size_t i = 0; i < (size_t)max_m * K; i++)
        A[i] = (float)urand();
    for (int beta = 0; beta < 2; beta++) {
        for (size_t i = 0; i < (size_t)max_m * N; i++)
            C[i] = R[i] = (float)(i % 7) * 0.25f;
        matmul_run(mm, pool, id, max_m, A, K, (float)beta, C, N);
        const int32_t groups[] = {1, 3, 5};
        for (size_t g = 0; g < FOLIO_ARRAY_LEN(groups); g++) {
            float *G = malloc(sizeof(float) * (size_t)max_m * N);
            memcpy(G, R, sizeof(float) * (size_t)max_m * N);
            for (int32_t m = 0; m < max_m; m += groups[g]) {
                int32_t M = FOLIO_MIN(groups[g], max_m - m);
                matmul_run(mm, pool, id, M, A + (size_t)m * K, K, (float)beta, G + (size_t)m * N,
                           N);
            }
            for (size_t i = 0; i < (size_t)max_m * N; i++)
                if (memcmp(&G[i], &C[i], sizeof(float)) && bad++ == 0)
                    print_message("%s %s nth=%d beta=%d: row %zu col %zu is %.9g in groups of "
                                  "%d, %.9g in one product of %d\n",
                                  model_matmul_name(be), gguf_tensor_type_name(t), nth, beta, i / N,
                                  i % N, G[i], groups[g], C[i], max_m);
            free(G);
        }
    }
    matmul_free(mm);
    pool_free(pool);
    free(A), free(C), free(R), free(wdata);
    return bad;
}

static void test_row_invariance(void **state)
{
    (void)state;
    static const enum gguf_tensor_type types[] = {
        GGUF_TENSOR_F32,  GGUF_TENSOR_F16,  GGUF_TENSOR_BF16, GGUF_TENSOR_Q8_0,
        GGUF_TENSOR_Q4_0, GGUF_TENSOR_Q4_K, GGUF_TENSOR_Q5_K, GGUF_TENSOR_Q6_K};
    enum model_matmul bes[2] = {MODEL_MATMUL_OPENBLAS, MODEL_MATMUL_ONEDNN};
    int n_be = model_matmul_onednn_built() ? 2 : 1;
    for (int b = 0; b < n_be; b++)
        for (size_t t = 0; t < FOLIO_ARRAY_LEN(types); t++)
            for (int nth = 1; nth <= 2; nth++)
                for (int inv = 0; inv < 2; inv++) {
                    const bool quant = types[t] != GGUF_TENSOR_F32 && types[t] != GGUF_TENSOR_F16 &&
                                       types[t] != GGUF_TENSOR_BF16;
                    if (!inv && !quant)
                        continue; /* sgemm, sgemv, oneDNN: row m depends on M (measured) */
                    /* Q6_K from 32 rows (of max_m 40) runs as widened
                     * tiles and sgemm with AVX2 unless batch_invariant; the
                     * other quantized products here are invariant either
                     * way */
                    const bool wide = avx2_paths() && types[t] == GGUF_TENSOR_Q6_K;
                    if (quant && inv != wide)
                        continue;
                    long bad = row_invariance_case(bes[b], types[t], nth, inv);
                    if (bad)
                        fail_msg("%s %s nth=%d invariant=%d: %ld elements differ with the batch",
                                 model_matmul_name(bes[b]), gguf_tensor_type_name(types[t]), nth,
                                 inv, bad);
                }
}

/* Q8_0, Q4_K and Q6_K at M around their widening thresholds (256, 128,
 * 32: matmul.c's widen_min_m), 1 and 2 threads, beta 0 and 1: within 1e-4 of the double
 * product where the widened tiles run, 2e-2 (int8 kernels) elsewhere;
 * with batch_invariant, the int8 kernels' results bit for bit. */
static void test_widened_quant(void **state)
{
    (void)state;
    static const enum gguf_tensor_type types[] = {GGUF_TENSOR_Q8_0, GGUF_TENSOR_Q4_K,
                                                  GGUF_TENSOR_Q6_K};
    enum { N = 16 * 5 + 4 }; /* not a multiple of the band alignment */
    const int32_t K = 512, Ms[] = {31, 32, 128, 256}, max_m = 256;
    float *A = malloc(sizeof(float) * (size_t)max_m * K);
    float *C = malloc(sizeof(float) * (size_t)max_m * N);
    float *R = malloc(sizeof(float) * (size_t)max_m * N);
    float *wf = malloc(sizeof(float) * (size_t)N * K);
    for (size_t i = 0; i < (size_t)max_m * K; i++)
        A[i] = (float)urand();
    for (size_t t = 0; t < FOLIO_ARRAY_LEN(types); t++) {
        void *wdata = make_weight(types[t], N, K);
        struct matmul_mat w = {.type = types[t], .rows = N, .cols = K, .data = wdata};
        matmul_mat_rows_f32(&w, 0, N, wf);
#if defined(__x86_64__)
        if (avx2_paths()) { /* the AVX2 widening against quant_to_float */
            float *v = malloc(sizeof(float) * (size_t)N * K);
            assert_true(widen_supports(types[t], K));
            widen_rows_avx2(types[t], wdata, K, 3, N - 3, v);
            for (size_t i = 0; i < (size_t)(N - 3) * K; i++)
                if (!(fabsf(v[i] - wf[3 * K + i]) <= 1e-6f * fabsf(wf[3 * K + i]) + 1e-30f))
                    fail_msg("%s: widened element %zu is %g, quant_to_float %g",
                             gguf_tensor_type_name(types[t]), i, v[i], wf[3 * K + i]);
            free(v);
        }
#endif
        for (int nth = 1; nth <= 2; nth++) {
            pool_t *pool;
            assert_int_equal(pool_new(nth, &pool), 0);
            matmul_t *mm, *mi;
            struct matmul_config cfg = {.backend = MODEL_MATMUL_OPENBLAS,
                                        .n_threads = nth,
                                        .max_m = max_m,
                                        .max_k = K,
                                        .max_weights = 1};
            assert_int_equal(matmul_new(&cfg, &mm), 0);
            cfg.batch_invariant = true;
            assert_int_equal(matmul_new(&cfg, &mi), 0);
            openblas_set_num_threads(1);
            int32_t id, idi;
            assert_int_equal(matmul_add(mm, &w, &id), 0);
            assert_int_equal(matmul_add(mi, &w, &idi), 0);
            for (size_t mx = 0; mx < FOLIO_ARRAY_LEN(Ms); mx++) {
                const int32_t M = Ms[mx];
                const int32_t from = types[t] == GGUF_TENSOR_Q8_0   ? 256
                                     : types[t] == GGUF_TENSOR_Q4_K ? 128
                                                                    : 32;
                const bool wide = avx2_paths() && M >= from;
                if (!avx2_paths() && M > 32)
                    continue; /* the int8 kernels at every M: covered above */
                for (int beta = 0; beta < 2; beta++) {
                    for (size_t i = 0; i < (size_t)max_m * N; i++)
                        C[i] = R[i] = (float)(i % 5) * 0.5f;
                    matmul_run(mm, pool, id, M, A, K, (float)beta, C, N);
                    double worst = 0;
                    for (int32_t m = 0; m < M; m++)
                        for (int32_t n = 0; n < N; n++) {
                            double s = beta ? R[(size_t)m * N + n] : 0.0, scale = 0;
                            for (int32_t k = 0; k < K; k++) {
                                const double p =
                                    (double)A[(size_t)m * K + k] * wf[(size_t)n * K + k];
                                s += p, scale += fabs(p);
                            }
                            worst = fmax(worst, fabs(C[(size_t)m * N + n] - s) / (scale + 1e-6));
                        }
                    if (!(worst <= (wide ? 1e-4 : 2e-2)))
                        fail_msg("%s nth=%d M=%d beta=%d: error %g (widened tiles: %d)",
                                 gguf_tensor_type_name(types[t]), nth, M, beta, worst, wide);
                    /* batch invariant: the int8 kernels, row by row equal to M = 1 */
                    matmul_run(mi, pool, idi, M, A, K, (float)beta, R, N);
                    for (int32_t m = 0; m < M; m += 37) {
                        float row[N];
                        for (int32_t n = 0; n < N; n++)
                            row[n] = (float)(((size_t)m * N + n) % 5) * 0.5f;
                        matmul_run(mi, pool, idi, 1, A + (size_t)m * K, K, (float)beta, row, N);
                        assert_memory_equal(row, R + (size_t)m * N, sizeof(row));
                    }
                }
            }
            matmul_free(mm);
            matmul_free(mi);
            pool_free(pool);
        }
        free(wdata);
    }
    free(A), free(C), free(R), free(wf);
}

/* Q8_0, Q4_0, Q5_1, Q3_K, Q2_K, IQ4_NL and IQ4_XS in their load-time
 * layouts (Q8_0_R8, Q4_0_R8, Q5_1_R8, Q3_K_R8, Q2_K_R8, IQ4_NL_R8,
 * IQ4_XS_R8, as model__repack leaves them; Q4_0_R8's activations are
 * Q8_0S, not its file type's Q8_0) through matmul_run: the int8 kernel at
 * every M, past where Q8_0's file layout widens (256), within 2e-2 of the
 * double product; row m of C the same bit for bit as the row alone (no
 * widening, so no batch_invariant needed); 1 to 3 threads (bands of whole
 * groups of eight rows).  K is three blocks of 32, or two of 256. */
static void check_repacked(enum gguf_tensor_type t)
{
    const int32_t N = 40, K = quant_traits_of(t)->block == 256 ? 512 : 96;
    const int32_t Ms[] = {1, 5, 40, 300}, max_m = 300;
    void *wdata = make_weight(t, N, K);
    float *wf = malloc(sizeof(float) * (size_t)N * K);
    struct matmul_mat w = {.type = t, .rows = N, .cols = K, .data = wdata};
    matmul_mat_rows_f32(&w, 0, N, wf);
    assert_int_equal(quant_repack(t, wdata, N, K), 0);
    w.type = quant_repack_type(t);
    float *A = malloc(sizeof(float) * (size_t)max_m * K);
    float *C = malloc(sizeof(float) * (size_t)max_m * N);
    for (size_t i = 0; i < (size_t)max_m * K; i++)
        A[i] = (float)urand();
    for (int nth = 1; nth <= 3; nth++) {
        pool_t *pool;
        assert_int_equal(pool_new(nth, &pool), 0);
        matmul_t *mm;
        struct matmul_config cfg = {.backend = MODEL_MATMUL_OPENBLAS,
                                    .n_threads = nth,
                                    .max_m = max_m,
                                    .max_k = K,
                                    .max_weights = 1};
        assert_int_equal(matmul_new(&cfg, &mm), 0);
        int32_t id;
        assert_int_equal(matmul_add(mm, &w, &id), 0);
        for (size_t mx = 0; mx < FOLIO_ARRAY_LEN(Ms); mx++) {
            const int32_t M = Ms[mx];
            matmul_run(mm, pool, id, M, A, K, 0.0f, C, N);
            for (int32_t m = 0; m < M; m++)
                for (int32_t n = 0; n < N; n++) {
                    double s = 0, scale = 0;
                    for (int32_t k = 0; k < K; k++) {
                        const double p = (double)A[(size_t)m * K + k] * wf[(size_t)n * K + k];
                        s += p, scale += fabs(p);
                    }
                    if (!(fabs(C[(size_t)m * N + n] - s) / (scale + 1e-6) <= 2e-2))
                        fail_msg("%s nth=%d M=%d: C[%d][%d] = %g, want %g",
                                 quant_traits_of(w.type)->name, nth, M, m, n, C[(size_t)m * N + n],
                                 s);
                }
            for (int32_t m = 0; m < M; m += 7) {
                float row[40];
                matmul_run(mm, pool, id, 1, A + (size_t)m * K, K, 0.0f, row, N);
                assert_memory_equal(row, C + (size_t)m * N, sizeof(row));
            }
        }
        matmul_free(mm);
        pool_free(pool);
    }
    free(A), free(C), free(wf), free(wdata);
}

static void test_repacked(void **state)
{
    (void)state;
    check_repacked(GGUF_TENSOR_Q8_0);
    check_repacked(GGUF_TENSOR_Q4_0);
    check_repacked(GGUF_TENSOR_Q5_1);
    check_repacked(GGUF_TENSOR_Q3_K);
    check_repacked(GGUF_TENSOR_Q2_K);
    check_repacked(GGUF_TENSOR_IQ4_NL);
    check_repacked(GGUF_TENSOR_IQ4_XS);
}

/* F32 through the packed-weight gemm (the default) against sgemm on the
 * same weight and rows: they differ only in the order of the sums.  Shapes
 * of `small` (K 768 and 2048), M from one row (gemm_gemv) to several
 * blocks of A's rows, beta 0 and 1, 2 threads.  Prints the largest
 * absolute difference seen. */
static void test_packed_vs_sgemm(void **state)
{
    (void)state;
    const int32_t Ks[] = {768, 2048}, Ms[] = {1, 3, 5, 64, 200, 512}, N = 300, max_m = 512;
    pool_t *pool;
    assert_int_equal(pool_new(2, &pool), 0);
    openblas_set_num_threads(1);
    double worst = 0;
    for (size_t ki = 0; ki < FOLIO_ARRAY_LEN(Ks); ki++) {
        const int32_t K = Ks[ki];
        float *W = make_weight(GGUF_TENSOR_F32, N, K);
        float *A = malloc(sizeof(float) * (size_t)max_m * K);
        float *C0 = malloc(sizeof(float) * (size_t)max_m * N),
              *C1 = malloc(sizeof(float) * (size_t)max_m * N);
        assert_true(A && C0 && C1);
        for (size_t i = 0; i < (size_t)max_m * K; i++)
            A[i] = (float)urand();
        struct matmul_mat w = {.type = GGUF_TENSOR_F32, .rows = N, .cols = K, .data = W};
        matmul_t *mm[2];
        int32_t id[2];
        for (int v = 0; v < 2; v++) {
            struct matmul_config cfg = {.backend = MODEL_MATMUL_OPENBLAS,
                                        .n_threads = 2,
                                        .max_m = max_m,
                                        .max_k = K,
                                        .max_weights = 1,
                                        .gemm = v ? MATMUL_GEMM_PACKED : MATMUL_GEMM_SGEMM};
            assert_int_equal(matmul_new(&cfg, &mm[v]), 0);
            assert_int_equal(matmul_add(mm[v], &w, &id[v]), 0);
        }
        assert_int_equal(matmul_prepared_bytes(mm[0]), 0);
        assert_true(matmul_prepared_bytes(mm[1]) >= (size_t)N * K * sizeof(float));
        for (size_t mi = 0; mi < FOLIO_ARRAY_LEN(Ms); mi++)
            for (int beta = 0; beta < 2; beta++) {
                const int32_t M = Ms[mi];
                for (size_t i = 0; i < (size_t)M * N; i++)
                    C0[i] = C1[i] = (float)urand();
                matmul_run(mm[0], pool, id[0], M, A, K, (float)beta, C0, N);
                matmul_run(mm[1], pool, id[1], M, A, K, (float)beta, C1, N);
                for (size_t i = 0; i < (size_t)M * N; i++) {
                    const double d = fabs((double)C1[i] - C0[i]);
                    worst = d > worst ? d : worst;
                    /* |A| < 1, |W| < 0.5: a row's sum of |products| < K / 4 */
                    if (!(d <= 1e-6 * K))
                        fail_msg("K %d M %d beta %d: packed %g, sgemm %g", (int)K, (int)M, beta,
                                 (double)C1[i], (double)C0[i]);
                }
            }
        matmul_free(mm[0]), matmul_free(mm[1]);
        free(W), free(A), free(C0), free(C1);
    }
    print_message("packed gemm vs sgemm, F32: max abs difference %.3g\n", worst);
    pool_free(pool);
}

/* model/gemm_bf16.h: the AVX512-BF16 kernel (where the CPU has it) and the
 * plain one against a double product of the same bf16 values, over row
 * counts through every microkernel height and past it, odd K (the pad),
 * N and bands that end inside a panel or a panel pair, beta 0 and 1; C
 * outside the band's rows and columns untouched.  The sums are f32 over
 * exact products: 1e-5 of the row's sum of |products|.  Then a BF16
 * weight in the matmul layer runs the kernel (its packed copy) where
 * supported, unless oneDNN is asked for by name. */
static void test_gemm_bf16(void **state)
{
    (void)state;
    const int32_t Ks[] = {1, 2, 7, 64, 130}, Ns[] = {16, 21, 33, 64, 100};
    const bool fast = gemm_bf16_supported() && avx2_paths();
    int cases = 0;
    for (size_t ki = 0; ki < FOLIO_ARRAY_LEN(Ks); ki++)
        for (size_t ni = 0; ni < FOLIO_ARRAY_LEN(Ns); ni++) {
            const int32_t K = Ks[ki], N = Ns[ni], Kp = gemm_bf16_kp(K), lda = Kp + 4, ldc = N + 3,
                          max_m = 30;
            uint16_t *W = make_weight(GGUF_TENSOR_BF16, N, K);
            uint16_t *P = malloc(gemm_bf16_packed_bytes(N, K));
            uint16_t *A = malloc(sizeof(uint16_t) * (size_t)max_m * lda);
            float *C = malloc(sizeof(float) * (size_t)max_m * ldc),
                  *C0 = malloc(sizeof(float) * (size_t)max_m * ldc);
            assert_true(W && P && A && C && C0);
            gemm_bf16_pack(W, N, K, P);
            for (int32_t m = 0; m < max_m; m++)
                for (int32_t k = 0; k < lda; k++)
                    A[(size_t)m * lda + k] = k < K ? to_bf16((float)urand()) : 0;
            /* bands as the layer cuts them: whole, from a panel boundary,
             * ending inside a panel */
            const int32_t bands[][2] = {{0, N}, {16, N}, {0, N < 20 ? N : 20}};
            for (int32_t M = 1; M <= max_m; M += M < 14 ? 1 : 8)
                for (size_t bi = 0; bi < FOLIO_ARRAY_LEN(bands); bi++)
                    for (int beta = 0; beta < 2; beta++)
                        for (int v = 0; v < 1 + fast; v++) {
                            const int32_t n0 = bands[bi][0], n1 = bands[bi][1];
                            if (n0 >= n1)
                                continue;
                            for (size_t i = 0; i < (size_t)max_m * ldc; i++)
                                C[i] = C0[i] = (float)urand();
                            if (v)
                                gemm_bf16_run(P, N, K, n0, n1, M, A, lda, (float)beta, C, ldc);
                            else
                                gemm_bf16_run_plain(P, N, K, n0, n1, M, A, lda, (float)beta, C,
                                                    ldc);
                            cases++;
                            for (int32_t m = 0; m < max_m; m++)
                                for (int32_t n = 0; n < ldc; n++) {
                                    const size_t i = (size_t)m * ldc + n;
                                    if (m >= M || n < n0 || n >= n1) {
                                        if (C[i] != C0[i])
                                            fail_msg("%s K %d N %d M %d band [%d, %d): C[%d][%d] "
                                                     "written outside",
                                                     v ? "avx512" : "plain", K, N, M, n0, n1, m, n);
                                        continue;
                                    }
                                    double s = beta ? C0[i] : 0, scale = 0;
                                    for (int32_t k = 0; k < K; k++) {
                                        uint32_t ua = (uint32_t)A[(size_t)m * lda + k] << 16,
                                                 uw = (uint32_t)W[(size_t)n * K + k] << 16;
                                        float fa, fw;
                                        memcpy(&fa, &ua, 4), memcpy(&fw, &uw, 4);
                                        s += (double)fa * fw;
                                        scale += fabs((double)fa * fw);
                                    }
                                    if (!(fabs(C[i] - s) <= 1e-5 * (scale + fabs(C0[i]) + 1e-6)))
                                        fail_msg("%s K %d N %d M %d band [%d, %d) beta %d: "
                                                 "C[%d][%d] = %g, want %g",
                                                 v ? "avx512" : "plain", K, N, M, n0, n1, beta, m,
                                                 n, (double)C[i], s);
                                }
                        }
            free(W), free(P), free(A), free(C), free(C0);
        }
    /* the driver's blocks: K over two k-blocks of 768 (odd: the pad in
     * the last), M over two row blocks of at most 192 */
    if (fast) {
        const int32_t K = 1601, N = 40, Kp = gemm_bf16_kp(K), M = 200;
        uint16_t *W = make_weight(GGUF_TENSOR_BF16, N, K);
        uint16_t *P = malloc(gemm_bf16_packed_bytes(N, K));
        uint16_t *A = malloc(sizeof(uint16_t) * (size_t)M * Kp);
        float *C = malloc(sizeof(float) * (size_t)M * N),
              *C1 = malloc(sizeof(float) * (size_t)M * N);
        assert_true(W && P && A && C && C1);
        gemm_bf16_pack(W, N, K, P);
        for (size_t i = 0; i < (size_t)M * Kp; i++)
            A[i] = (int32_t)(i % Kp) < K ? to_bf16((float)urand()) : 0;
        for (int beta = 0; beta < 2; beta++) {
            for (size_t i = 0; i < (size_t)M * N; i++)
                C[i] = C1[i] = (float)urand();
            gemm_bf16_run(P, N, K, 0, N, M, A, Kp, (float)beta, C, N);
            gemm_bf16_run_plain(P, N, K, 0, N, M, A, Kp, (float)beta, C1, N);
            for (size_t i = 0; i < (size_t)M * N; i++) /* |A|, |W| < 1: sums of |products| < K */
                if (!(fabs((double)C[i] - C1[i]) <= 1e-5 * K))
                    fail_msg("blocks: beta %d C[%d][%d] = %g, plain %g", beta, (int)(i / N),
                             (int)(i % N), (double)C[i], (double)C1[i]);
            cases++;
        }
        free(W), free(P), free(A), free(C), free(C1);
    }
    print_message("gemm_bf16: %d products (%s)\n", cases,
                  fast ? "avx512-bf16 and plain" : "plain only: no AVX512-BF16 here");

    /* the layer: a BF16 weight on OpenBLAS gets a packed copy of its bytes
     * where the kernel runs, none where it does not */
    const int32_t N = 40, K = 64;
    uint16_t *W = make_weight(GGUF_TENSOR_BF16, N, K);
    struct matmul_mat w = {.type = GGUF_TENSOR_BF16, .rows = N, .cols = K, .data = W};
    {
        matmul_t *mm;
        struct matmul_config cfg = {.backend = MODEL_MATMUL_OPENBLAS,
                                    .n_threads = 2,
                                    .max_m = 8,
                                    .max_k = K,
                                    .max_weights = 1};
        assert_int_equal(matmul_new(&cfg, &mm), 0);
        int32_t id;
        assert_int_equal(matmul_add(mm, &w, &id), 0);
        const bool layer = matmul_bf16_kernel(MODEL_MATMUL_OPENBLAS);
        const char *e = getenv("FOLIO_MATMUL_ISA"); /* holds matmul.c's AVX-512 paths back */
        assert_true(!layer ||
                    (gemm_bf16_supported() && !(e && (!strcmp(e, "plain") || !strcmp(e, "avx2")))));
        assert_int_equal(matmul_prepared_bytes(mm),
                         layer ? gemm_bf16_packed_bytes(N, K) : (size_t)0);
        matmul_free(mm);
    }
    free(W);
}

static void test_names_and_resolve(void **state)
{
    (void)state;
    enum model_matmul b;
    assert_int_equal(model_matmul_parse("openblas", &b), 0);
    assert_int_equal(b, MODEL_MATMUL_OPENBLAS);
    assert_int_equal(model_matmul_parse("onednn", &b), 0);
    assert_int_equal(b, MODEL_MATMUL_ONEDNN);
    assert_int_equal(model_matmul_parse("auto", &b), 0);
    assert_int_equal(b, MODEL_MATMUL_AUTO);
    assert_int_equal(model_matmul_parse("mkl", &b), -EINVAL);
    assert_string_equal(model_matmul_name(MODEL_MATMUL_ONEDNN), "onednn");
    assert_int_equal(model_matmul_resolve(MODEL_MATMUL_AUTO, &b), 0);
    assert_true(b == MODEL_MATMUL_OPENBLAS || b == MODEL_MATMUL_ONEDNN);
    assert_int_equal(model_matmul_resolve(MODEL_MATMUL_ONEDNN, &b),
                     model_matmul_onednn_built() ? 0 : -ENOTSUP);
    /* a bad weight is refused, not run */
    matmul_t *mm;
    struct matmul_config cfg = {.backend = MODEL_MATMUL_OPENBLAS,
                                .n_threads = 1,
                                .max_m = 4,
                                .max_k = 64,
                                .max_weights = 1};
    assert_int_equal(matmul_new(&cfg, &mm), 0);
    float w[64 * 2] = {0};
    int32_t id;
    struct matmul_mat big = {.type = GGUF_TENSOR_F32, .rows = 1, .cols = 65, .data = w};
    assert_int_equal(matmul_add(mm, &big, &id), -EINVAL);
    struct matmul_mat q = {.type = GGUF_TENSOR_Q8_0, .rows = 1, .cols = 48, .data = w};
    assert_int_equal(matmul_add(mm, &q, &id), -EINVAL);
    struct matmul_mat ok = {.type = GGUF_TENSOR_F32, .rows = 2, .cols = 64, .data = w};
    assert_int_equal(matmul_add(mm, &ok, &id), 0);
    assert_int_equal(matmul_add(mm, &ok, &id), -EINVAL); /* max_weights */
    matmul_free(mm);
}

int main(void)
{
    if (test_isa_repeats_default())
        return TEST_ISA_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_resolve), cmocka_unit_test(test_products),
        cmocka_unit_test(test_row_invariance),    cmocka_unit_test(test_widened_quant),
        cmocka_unit_test(test_packed_vs_sgemm),   cmocka_unit_test(test_repacked),
        cmocka_unit_test(test_gemm_bf16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
