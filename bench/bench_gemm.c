/*
 * bench/bench_gemm.c — the products of many rows (batched decode, prefill)
 * through matmul_run, every way of running them in ONE process, in turn.
 *
 *   bench_gemm [--threads N] [--reps R] [--type f32|f16|bf16|q8_0|q4_k|q6_k]
 *              [--m 16,32,64,...] [--widen-min-m M]
 *
 * One layer of `small` (Q|K|V 1280 x 768, O 768 x 768, gate|up 4096 x 768,
 * down 768 x 2048) at each M, through each variant: OpenBLAS backend with
 * sgemm, OpenBLAS backend with the packed-weight gemm (model/gemm.h), and
 * oneDNN (when built; F32 and BF16 only, the others run as OpenBLAS).
 * This machine's speed drifts by tens of percent over seconds, so the
 * variants are not run one after the other: each rep runs the layer once
 * per variant, in an order rotated every rep, and the table gives each
 * variant's median GFLOP/s over the reps and the median of its per-rep
 * ratio to sgemm (the ratio of two runs a few milliseconds apart).
 * --widen-min-m M: quantized weights widen from M rows of A on (matmul's
 * crossover to the int8 kernels below; 0 keeps the measured one).
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../model/matmul.h"
#include "../model/quant.h"
#include "folio/common.h"
#include "folio/pool.h"

#define N_SHAPES 4
static const int32_t shapes[N_SHAPES][2] = {{1280, 768}, {768, 768}, {4096, 768}, {768, 2048}};

enum { V_SGEMM, V_PACKED, V_DNNL, N_VAR };
static const char *const var_names[N_VAR] = {"sgemm", "packed", "onednn"};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / (float)0x1000000 - 0.5f;
}

int main(int argc, char **argv)
{
    int n_threads = 2, reps = 21, widen_min_m = 0;
    const char *type = "f32", *mlist = "16,32,64,128,256,512";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--type") && i + 1 < argc)
            type = argv[++i];
        else if (!strcmp(argv[i], "--widen-min-m") && i + 1 < argc)
            widen_min_m = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--m") && i + 1 < argc)
            mlist = argv[++i];
        else {
            fprintf(stderr, "usage: bench_gemm [--threads N] [--reps R] "
                            "[--type f32|f16|bf16|q8_0|q4_k|q6_k] [--m 16,32,...] "
                            "[--widen-min-m M]\n");
            return 2;
        }
    }
    enum gguf_tensor_type t = GGUF_TENSOR_F32;
    bool found = false;
    for (int i = 0; i <= GGUF_TENSOR_BF16 && !found; i++) {
        const struct quant_traits *qt = quant_traits_of((enum gguf_tensor_type)i);
        if (qt && qt->in_files && !strcasecmp(qt->name, type))
            t = (enum gguf_tensor_type)i, found = true;
    }
    if (!found || n_threads < 1 || reps < 1) {
        fprintf(stderr, "bench_gemm: bad --type, --threads or --reps\n");
        return 2;
    }
    openblas_set_num_threads(1); /* one band per pool thread, as the forward pass */
    int32_t ms[32], n_m = 0, max_m = 1;
    for (const char *p = mlist; *p && n_m < 32;) {
        ms[n_m] = atoi(p);
        max_m = FOLIO_MAX(max_m, ms[n_m]);
        n_m++;
        p = strchr(p, ',');
        if (!p)
            break;
        p++;
    }
    const int n_var = model_matmul_onednn_built() ? N_VAR : V_DNNL;
    pool_t *pool = NULL;
    if (pool_new(n_threads, &pool))
        return 1;
    void *W[N_SHAPES];
    double flops1 = 0; /* per row of A */
    for (int i = 0; i < N_SHAPES; i++) {
        const int64_t n = (int64_t)shapes[i][0] * shapes[i][1];
        float *wf = malloc((size_t)n * sizeof(float));
        W[i] = malloc(quant_row_bytes(t, shapes[i][1]) * (size_t)shapes[i][0]);
        if (!wf || !W[i])
            return 1;
        for (int64_t k = 0; k < n; k++)
            wf[k] = rnd() * 0.05f;
        quant_from_float(t, wf, W[i], n);
        free(wf);
        flops1 += 2.0 * (double)n;
    }
    matmul_t *mm[N_VAR] = {0};
    int32_t id[N_VAR][N_SHAPES];
    for (int v = 0; v < n_var; v++) {
        struct matmul_config cfg = {.backend =
                                        v == V_DNNL ? MODEL_MATMUL_ONEDNN : MODEL_MATMUL_OPENBLAS,
                                    .n_threads = n_threads,
                                    .max_m = max_m,
                                    .max_k = 2048,
                                    .max_weights = N_SHAPES,
                                    .widen_min_m = widen_min_m,
                                    .gemm = v == V_PACKED ? MATMUL_GEMM_PACKED : MATMUL_GEMM_SGEMM};
        if (matmul_new(&cfg, &mm[v]))
            return 1;
        for (int i = 0; i < N_SHAPES; i++) {
            struct matmul_mat w = {
                .type = t, .rows = shapes[i][0], .cols = shapes[i][1], .data = W[i]};
            if (matmul_add(mm[v], &w, &id[v][i]))
                return 1;
        }
    }
    float *A = malloc((size_t)max_m * 2048 * sizeof(float)),
          *C = malloc((size_t)max_m * 4096 * sizeof(float));
    double *ts = malloc(sizeof(double) * (size_t)reps * N_VAR),
           *rt = malloc(sizeof(double) * (size_t)reps);
    if (!A || !C || !ts || !rt)
        return 1;
    for (int64_t i = 0; i < (int64_t)max_m * 2048; i++)
        A[i] = rnd();
    printf("# one layer of small, %s weights, %d threads, %d reps, variants in turn\n",
           quant_traits_of(t)->name, n_threads, reps);
    printf("| M |");
    for (int v = 0; v < n_var; v++)
        printf(" %s GFLOP/s |", var_names[v]);
    for (int v = 1; v < n_var; v++)
        printf(" %s / sgemm |", var_names[v]);
    printf("\n|---|");
    for (int v = 1; v < 2 * n_var; v++)
        printf("---|");
    printf("\n");
    for (int mi = 0; mi < n_m; mi++) {
        const int32_t M = ms[mi];
        for (int r = -1; r < reps; r++) { /* r = -1 warms up */
            for (int o = 0; o < n_var; o++) {
                const int v = (o + (r < 0 ? 0 : r)) % n_var;
                double t0 = now();
                for (int i = 0; i < N_SHAPES; i++)
                    matmul_run(mm[v], pool, id[v][i], M, A, shapes[i][1], 0.0f, C, shapes[i][0]);
                if (r >= 0)
                    ts[(size_t)v * reps + r] = now() - t0;
            }
        }
        printf("| %d |", (int)M);
        for (int v = 0; v < n_var; v++) {
            double tv[4096];
            for (int r = 0; r < reps && r < 4096; r++)
                tv[r] = ts[(size_t)v * reps + r];
            printf(" %.1f |", flops1 * M / median(tv, FOLIO_MIN(reps, 4096)) / 1e9);
        }
        for (int v = 1; v < n_var; v++) {
            for (int r = 0; r < reps; r++)
                rt[r] = ts[r] / ts[(size_t)v * reps + r]; /* speed ratio: > 1 is faster */
            printf(" %.2fx |", median(rt, reps));
        }
        printf("\n");
        fflush(stdout);
    }
    for (int v = 0; v < n_var; v++)
        matmul_free(mm[v]);
    for (int i = 0; i < N_SHAPES; i++)
        free(W[i]);
    free(A), free(C), free(ts), free(rt);
    pool_free(pool);
    return 0;
}
