/*
 * bench/bench_quant.c — quantized product figures (quant_gemm) for
 * BENCHMARKS.md.
 *
 *   bench_quant [--threads N] [--reps N] [--isa NAME] [--type NAME] [--quick] [--cputime]
 *               [--sgemm] [--hot] [--layer]
 *
 * For each weight type and each ISA the CPU has (or the one --isa names),
 * the products of `small`'s shapes: M x 768 by 768 x 2048 and M x 2048 by
 * 2048 x 768, M = 1, 64, 256.  Prints GOP/s (2 M N K per product) of
 * quant_gemm alone (the activations are quantized once beforehand; the
 * cost of quant_rows, one thread, median of --reps, is printed on its own
 * line), the median of --reps
 * runs after a warm-up, best in brackets.  At M = 1 the product is bound by
 * memory: the weights are cycled through copies totalling 256 MiB (more
 * than the last-level cache, as a decode step reads every layer once), and
 * the GB/s of weight bytes read is printed beside the machine's read
 * bandwidth, measured in the same run by a streaming sum over 512 MiB with
 * the same number of threads.
 *
 * --cputime (one thread only) times by the thread's CPU time instead of
 * wall time, which leaves out time spent descheduled on a shared machine
 * (for comparing kernels; the figures to publish are wall time).
 *
 * --hot: M = 1 on one copy of the weights, which stays in the caches: the
 * kernel's arithmetic ceiling, to compare with the read bandwidth (a
 * kernel whose hot rate is well above it is bound by memory when cold).
 *
 * --sgemm: for M > 1, the same product in F32 (the weights before
 * quantization) through OpenBLAS's cblas_sgemm on the same split and
 * timing, with the ratio of its time to quant_gemm's (above 1: the
 * quantized product is faster).
 *
 * --layer: instead of the above, one layer of `small` (Q|K|V, O, gate|up,
 * down) through matmul_run (model/matmul.h, OpenBLAS backend, a pool of
 * --threads) for F32, F16, BF16, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K
 * weights (the quantized ones also in their load-time layouts) at M = 8 ..
 * 512: GFLOP/s of the whole layer, the median of --reps.  What
 * model/matmul.c's choice between int8 kernels and widened tiles was
 * measured with.
 *
 * Q4_K_R8, Q5_K_R8, Q6_K_R8, Q8_0_R8, Q4_0_R8, Q5_0_R8, Q4_1_R8, Q5_1_R8,
 * Q3_K_R8, Q2_K_R8, IQ4_NL_R8 and IQ4_XS_R8 are the file types of those
 * names in their load-time layouts (quant_repack, as the loader leaves
 * them): compare them with the file types' lines.
 *
 * Threads split the N rows of W as the forward pass does (quant_gemm on
 * [n0, n1) per thread, started together by a barrier).
 */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "folio/common.h"
#include "folio/pool.h"
#include "matmul.h"
#include "quant.h"

static uint64_t rng_s = 42;

static float rnd(void)
{
    rng_s = rng_s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_s >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

static bool use_cputime;

static double now(void)
{
    struct timespec ts;
    clock_gettime(use_cputime ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- threads ---------------------------------------------------------- */

struct job {
    enum gguf_tensor_type t;
    const uint8_t *W; /* current copy */
    int64_t K, N, M;
    const void *Xq;
    float *Y;
    const float *Wf, *Xf; /* F32 reference: sgemm on the same split (NULL: quant_gemm) */
    const float *stream;  /* bandwidth probe: sum over stream_n floats */
    size_t stream_n;
    double sink;
};

static struct job job;
static int n_threads = 1;
static pthread_barrier_t bar_start, bar_end;
static volatile int quit;
static double sinks[64];

static void run_part(int ith)
{
    if (job.stream) {
        size_t per = job.stream_n / (size_t)n_threads;
        const uint32_t *p = (const uint32_t *)job.stream + per * (size_t)ith;
        uint32_t acc = 0; /* integer adds vectorise: the loop runs at memory speed */
        for (size_t i = 0; i < per; i++)
            acc += p[i];
        sinks[ith] += (double)acc;
        return;
    }
    /* rows in multiples of 16 per thread */
    int64_t chunk = (job.N / n_threads + 15) / 16 * 16;
    int64_t n0 = chunk * ith, n1 = n0 + chunk < job.N ? n0 + chunk : job.N;
    if (n0 < n1 && job.Wf) /* Y[M][n0:n1] = X[M][K] · Wf[n0:n1][K]ᵀ */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)job.M, (int)(n1 - n0), (int)job.K,
                    1.0f, job.Xf, (int)job.K, job.Wf + n0 * job.K, (int)job.K, 0.0f, job.Y + n0,
                    (int)job.N);
    else if (n0 < n1)
        quant_gemm(job.t, job.W, job.K, n0, n1, job.Xq, job.M, job.Y, job.N, 0.0f);
}

static void *worker(void *arg)
{
    int ith = (int)(intptr_t)arg;
    for (;;) {
        pthread_barrier_wait(&bar_start);
        if (quit)
            return NULL;
        run_part(ith);
        pthread_barrier_wait(&bar_end);
    }
}

static double run_once(void)
{
    double t0 = now();
    pthread_barrier_wait(&bar_start);
    run_part(0);
    pthread_barrier_wait(&bar_end);
    return now() - t0;
}

/* ---- cases ------------------------------------------------------------ */

static int reps = 7;
static bool with_sgemm, hot;

static double stream_gbs(void)
{
    size_t n = (512u << 20) / sizeof(float);
    float *a = malloc(n * sizeof(float));
    if (!a)
        return 0.0;
    for (size_t i = 0; i < n; i++)
        a[i] = (float)(i & 7);
    job.stream = a;
    job.stream_n = n;
    double best = 1e30;
    for (int r = 0; r < 5; r++)
        best = fmin(best, run_once());
    job.stream = NULL;
    free(a);
    return (double)n * sizeof(float) / best / 1e9;
}

/* W[N][K] of type t from wf; a load-time layout (Q4_K_R8) is its file
 * type's blocks repacked, as the loader does. */
static void quantize(enum gguf_tensor_type t, const float *wf, void *W, int64_t N, int64_t K)
{
    const struct quant_traits *r = quant_traits_of(t);
    if (!r->group) {
        quant_from_float(t, wf, W, N * K);
        return;
    }
    quant_from_float(r->file_type, wf, W, N * K);
    if (quant_repack(r->file_type, W, N, K))
        exit(1);
}

static void bench_case(enum gguf_tensor_type t, int64_t M, int64_t K, int64_t N, double bw)
{
    const size_t ws = quant_row_bytes(t, K), wbytes = ws * (size_t)N;
    const enum gguf_tensor_type dt = quant_dot_type(t);
    size_t copies = M == 1 && !hot ? (256u << 20) / wbytes + 1 : 1;
    uint8_t *W = malloc(wbytes * copies);
    float *wf = malloc((size_t)(N * K) * sizeof(float));
    float *X = malloc((size_t)(M * K) * sizeof(float));
    void *Xq = malloc(quant_row_bytes(dt, K) * (size_t)M);
    float *Y = malloc((size_t)(M * N) * sizeof(float));
    if (!W || !wf || !X || !Xq || !Y) {
        fprintf(stderr, "bench_quant: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < N * K; i++)
        wf[i] = rnd() * 0.05f;
    quantize(t, wf, W, N, K);
    for (size_t c = 1; c < copies; c++)
        memcpy(W + c * wbytes, W, wbytes);
    for (int64_t i = 0; i < M * K; i++)
        X[i] = rnd();
    /* quant_rows alone: one thread, the median of reps after a warm-up
     * (the first call also faults Xq in) */
    double tqs[64];
    const int rq = reps < 64 ? reps : 64;
    quant_rows(t, X, K, K, 0, M, Xq);
    for (int r = 0; r < rq; r++) {
        tqs[r] = now();
        quant_rows(t, X, K, K, 0, M, Xq);
        tqs[r] = now() - tqs[r];
    }
    qsort(tqs, (size_t)rq, sizeof(double), cmp_double);
    const double tq = tqs[rq / 2];
    job = (struct job){.t = t, .W = W, .K = K, .N = N, .M = M, .Xq = Xq, .Y = Y};
    int r_all = reps + 1;
    if (M == 1)
        r_all = (int)copies > 4 * reps ? (int)copies : 4 * reps;
    double *ts = malloc((size_t)r_all * sizeof(double));
    int nt = 0;
    run_once(); /* warm-up */
    for (int r = 0; r < r_all; r++) {
        job.W = W + (size_t)(r % (int)copies) * wbytes;
        ts[nt++] = run_once();
    }
    qsort(ts, (size_t)nt, sizeof(double), cmp_double);
    const double med = ts[nt / 2], best = ts[0], ops = 2.0 * (double)(M * N * K);
    printf("%-5s %-7s M %4lld  %4lld x %4lld  %8.1f GOP/s [%8.1f]", quant_traits_of(t)->name,
           quant_isa_name(), (long long)M, (long long)K, (long long)N, ops / med / 1e9,
           ops / best / 1e9);
    if (M == 1)
        printf("  %6.1f GB/s [%6.1f] = %3.0f%% of %.1f", (double)wbytes / med / 1e9,
               (double)wbytes / best / 1e9, 100.0 * (double)wbytes / med / 1e9 / bw, bw);
    printf("  (quant_rows %.3f ms)", tq * 1e3);
    if (M > 1 && with_sgemm) {
        /* the same product in F32 through OpenBLAS, same split and timing */
        job = (struct job){.W = W, .K = K, .N = N, .M = M, .Y = Y, .Wf = wf, .Xf = X};
        run_once();
        for (int r = 0; r < r_all; r++)
            ts[r] = run_once();
        qsort(ts, (size_t)r_all, sizeof(double), cmp_double);
        const double fmed = ts[r_all / 2];
        printf("  sgemm %.1f GFLOP/s: %.2fx", ops / fmed / 1e9, fmed / med);
    }
    printf("\n");
    free(ts);
    free(W);
    free(wf);
    free(X);
    free(Xq);
    free(Y);
}

/* --layer: one layer of `small` (Q|K|V 1280 x 768, O 768 x 768, gate|up
 * 4096 x 768, down 768 x 2048) through matmul_run on a pool of n_threads,
 * weights of type t, M rows; GFLOP/s of the four products together, median
 * of reps runs. */
static double bench_layer(enum gguf_tensor_type t, int32_t M)
{
    static const int32_t shapes[4][2] = {{1280, 768}, {768, 768}, {4096, 768}, {768, 2048}};
    struct matmul_config cfg = {.backend = MODEL_MATMUL_OPENBLAS,
                                .n_threads = n_threads,
                                .max_m = M,
                                .max_k = 2048,
                                .max_weights = 4};
    matmul_t *mm = NULL;
    pool_t *pool = NULL;
    void *W[4] = {0};
    int32_t id[4];
    float *A = malloc((size_t)M * 2048 * sizeof(float)),
          *C = malloc((size_t)M * 4096 * sizeof(float));
    if (!A || !C || matmul_new(&cfg, &mm) || pool_new(n_threads, &pool)) {
        fprintf(stderr, "bench_quant: matmul setup failed\n");
        exit(1);
    }
    for (int64_t i = 0; i < (int64_t)M * 2048; i++)
        A[i] = rnd();
    double flops = 0;
    for (int i = 0; i < 4; i++) {
        const int64_t n = (int64_t)shapes[i][0] * shapes[i][1];
        float *wf = malloc((size_t)n * sizeof(float));
        W[i] = malloc(quant_row_bytes(t, shapes[i][1]) * (size_t)shapes[i][0]);
        if (!wf || !W[i])
            exit(1);
        for (int64_t k = 0; k < n; k++)
            wf[k] = rnd() * 0.05f;
        quantize(t, wf, W[i], shapes[i][0], shapes[i][1]);
        free(wf);
        struct matmul_mat w = {.type = t, .rows = shapes[i][0], .cols = shapes[i][1], .data = W[i]};
        if (matmul_add(mm, &w, &id[i]))
            exit(1);
        flops += 2.0 * M * (double)n;
    }
    double *ts = malloc((size_t)(reps + 1) * sizeof(double));
    for (int r = 0; r <= reps; r++) {
        double t0 = now();
        for (int i = 0; i < 4; i++)
            matmul_run(mm, pool, id[i], M, A, shapes[i][1], 0.0f, C, shapes[i][0]);
        ts[r] = now() - t0;
    }
    qsort(ts + 1, (size_t)reps, sizeof(double), cmp_double); /* ts[0]: warm-up */
    const double g = flops / ts[1 + reps / 2] / 1e9;
    free(ts);
    for (int i = 0; i < 4; i++)
        free(W[i]);
    free(A), free(C);
    pool_free(pool);
    matmul_free(mm);
    return g;
}

int main(int argc, char **argv)
{
    const char *isa = NULL, *type = NULL;
    bool quick = false, layer = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--isa") && i + 1 < argc)
            isa = argv[++i];
        else if (!strcmp(argv[i], "--type") && i + 1 < argc)
            type = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--hot"))
            hot = true;
        else if (!strcmp(argv[i], "--sgemm"))
            with_sgemm = true;
        else if (!strcmp(argv[i], "--layer"))
            layer = true;
        else if (!strcmp(argv[i], "--cputime"))
            use_cputime = true;
        else {
            fprintf(stderr,
                    "usage: bench_quant [--threads N] [--reps N] [--isa "
                    "scalar|avx2|avx512] [--type Q8_0|...] [--quick] [--cputime] [--sgemm] [--hot] "
                    "[--layer]\n");
            return 2;
        }
    }
    if (n_threads < 1 || n_threads > 64 || reps < 1 || (use_cputime && n_threads != 1))
        return 2;
    openblas_set_num_threads(1); /* one band per thread, as the forward pass runs it */
    if (layer) {
        const enum gguf_tensor_type lt[] = {GGUF_TENSOR_F32,  GGUF_TENSOR_F16,  GGUF_TENSOR_BF16,
                                            GGUF_TENSOR_Q8_0, QUANT_Q8_0_R8,    GGUF_TENSOR_Q2_K,
                                            QUANT_Q2_K_R8,    GGUF_TENSOR_Q3_K, QUANT_Q3_K_R8,
                                            GGUF_TENSOR_Q4_K, QUANT_Q4_K_R8,    GGUF_TENSOR_Q5_K,
                                            QUANT_Q5_K_R8,    GGUF_TENSOR_Q6_K, QUANT_Q6_K_R8};
        const int32_t lm[] = {8, 16, 32, 64, 128, 256, 512};
        printf("# one layer of small through matmul_run, %d threads, GFLOP/s (median of %d)\n",
               n_threads, reps);
        printf("| type |");
        for (size_t mi = 0; mi < FOLIO_ARRAY_LEN(lm); mi++)
            printf(" M %d |", (int)lm[mi]);
        printf("\n");
        for (size_t ti = 0; ti < FOLIO_ARRAY_LEN(lt); ti++) {
            if (type && strcasecmp(type, quant_traits_of(lt[ti])->name))
                continue;
            printf("| %s |", quant_traits_of(lt[ti])->name);
            for (size_t mi = 0; mi < FOLIO_ARRAY_LEN(lm); mi++) {
                printf(" %.1f |", bench_layer(lt[ti], lm[mi]));
                fflush(stdout);
            }
            printf("\n");
        }
        return 0;
    }
    pthread_barrier_init(&bar_start, NULL, (unsigned)n_threads);
    pthread_barrier_init(&bar_end, NULL, (unsigned)n_threads);
    pthread_t th[64];
    for (int i = 1; i < n_threads; i++)
        pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);

    const double bw = stream_gbs();
    printf("# threads %d, read bandwidth %.1f GB/s (streaming sum over 512 MiB)\n", n_threads, bw);
    const enum gguf_tensor_type types[] = {
        GGUF_TENSOR_Q8_0, GGUF_TENSOR_Q4_0, GGUF_TENSOR_Q4_1,   GGUF_TENSOR_Q5_0,
        GGUF_TENSOR_Q5_1, GGUF_TENSOR_Q2_K, GGUF_TENSOR_Q3_K,   GGUF_TENSOR_Q4_K,
        GGUF_TENSOR_Q5_K, GGUF_TENSOR_Q6_K, GGUF_TENSOR_IQ4_NL, GGUF_TENSOR_IQ4_XS,
        QUANT_Q4_K_R8,    QUANT_Q5_K_R8,    QUANT_Q6_K_R8,      QUANT_Q8_0_R8,
        QUANT_Q4_0_R8,    QUANT_Q5_0_R8,    QUANT_Q4_1_R8,      QUANT_Q5_1_R8,
        QUANT_Q3_K_R8,    QUANT_Q2_K_R8,    QUANT_IQ4_NL_R8,    QUANT_IQ4_XS_R8};
    const char *isas[] = {"scalar", "avx2", "avx512"};
    const int64_t Ms[] = {1, 64, 256};
    const int64_t shapes[2][2] = {{768, 2048}, {2048, 768}};
    for (size_t a = 0; a < FOLIO_ARRAY_LEN(isas); a++) {
        if (isa && strcmp(isa, isas[a]))
            continue;
        if (quant_force_isa(isas[a]))
            continue;
        for (size_t ti = 0; ti < FOLIO_ARRAY_LEN(types); ti++) {
            if (type && strcasecmp(type, quant_traits_of(types[ti])->name))
                continue;
            for (size_t mi = 0; mi < FOLIO_ARRAY_LEN(Ms); mi++) {
                if (quick && Ms[mi] == 256)
                    continue;
                if (!strcmp(isas[a], "scalar") && Ms[mi] > 64)
                    continue; /* minutes, and says nothing new */
                for (int s = 0; s < 2; s++)
                    bench_case(types[ti], Ms[mi], shapes[s][0], shapes[s][1], bw);
            }
        }
    }
    quit = 1;
    pthread_barrier_wait(&bar_start);
    for (int i = 1; i < n_threads; i++)
        pthread_join(th[i], NULL);
    return 0;
}
