/*
 * bench/bench_model.c — model runtime throughput on the `small` preset
 * (weights generated in memory, then stored as each type; no file needed).
 *
 *   bench_model [--threads N] [--blas-threads] [--preset small] [--quick]
 *               [--single TOKENS] [--matmul auto|openblas|onednn]
 *               [--dtype all|f32|f16|bf16|q8_0|q4_0|q2_k|q3_k_m|q4_k_m|q5_k_m|q6_k]
 *               [--kv-dtype auto|f32|f16|bf16|q8]
 *
 * For each weight type (--dtype all: F32, F16, BF16, Q8_0, the Q4_0, Q4_K_M
 * and Q5_K_M mixes, Q6_K; see retype()), on the backend
 * --matmul resolves to, with K/V pages of --kv-dtype (auto, the default:
 * what foliod's --kv-dtype auto picks for those weights, model_kv_dtype_auto):
 * Prints, in one run (first):
 *   - this machine's cblas_sgemm peak for C = A·Bᵀ at 2048³ and at the
 *     64x2048x768 shape of a decode batch's gate|up product (OpenBLAS at
 *     N threads, best of a few repetitions);
 *   - the machine's read bandwidth: n_threads threads summing a 256 MiB
 *     array (best of a few passes), the bound single-stream decode is held
 *     to (each token reads every matrix once);
 * then per type:
 *   - prefill: one 512-token prompt in one step, the median of 5 (2 with
 *     --quick) after an untimed one;
 *   - single-stream decode: 128 tokens one by one after a 16-token prompt,
 *     with the weight bytes one token reads, the read rate that implies
 *     and its share of the measured bandwidth;
 *   - aggregate decode: B = 1, 8, 32, 64, 128 sequences, each at a 128-token
 *     context (--decode-ctx), a few steps of one token each after an
 *     untimed one (the first step of a context runs at about half the rate
 *     of later ones: its buffers and oneDNN's scratch are first touched
 *     then; a server pays that once).  K/V contents are arbitrary: the
 *     arithmetic does not depend on them.  The K/V arena is laid out as
 *     the pager's, and the page tables are what the pager hands out to a
 *     batch growing a block at a time in turn (tables_from_pager).
 * --decode B,B,... runs only the batched decodes of those batch sizes, 16
 * steps each (for profiling one of them).
 * --decode-ctx N starts the batched decodes at an N-token context instead
 * of 128 (long contexts: where attention's read of the K/V is a large
 * part of a step).
 * --single TOKENS runs only the single-stream decode, TOKENS tokens, and
 * measures the read bandwidth again before every 16 of them: each chunk's
 * weight read rate is set against the bandwidth measured just before it,
 * and the median of those shares is printed (this machine's bandwidth
 * drifts by tens of percent between seconds, so one figure taken at the
 * start is a poor yardstick for a run).  It also prints where a token's
 * time went (products, attention, the rest; pool dispatches, the caller's
 * wait for the other threads, each side's time in its shares), then runs
 * the step's products alone, M = 1 in the step's order, each timed: per
 * kind of matrix its read rate against the bandwidth of that pass.
 * Each with tokens/s, GFLOP/s of model arithmetic, the rate of the matrix
 * products alone (matrix FLOPs / time inside sgemm: compare with the peak)
 * and the split of time between sgemm, attention and the rest
 * (model_ctx_stats), and tokens per second of the process's CPU time (all
 * threads summed; pool spin-waits count): on a shared machine the figure
 * that leaves out time spent descheduled.
 *
 * FLOPs counted per token: 2 x (matrix parameters of all layers: wqkv, wo,
 * gate|up, down), plus 4 x n_heads x head_dim x (visible context) per layer
 * for attention (QKᵀ and PV), plus 2 x n_vocab x dim for every row whose
 * logits are computed.  Norms, RoPE, softmax and SwiGLU are not counted.
 */
#include <cblas.h>
#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../model/matmul.h"
#include "../model/model_internal.h"
#include "../model/quant.h"
#include "folio/common.h"
#include "folio/model.h"
#include "folio/sampler.h"

#define BLOCK 16

static int n_threads = 2, blas_threads = 0, quick = 0, invariant = 0, single = 0;
/* --decode LIST: only these batched decodes (no prefill, no single stream), 16 steps each */
static int32_t only_batch[8];
static int n_only_batch = 0;
/* --decode-ctx N: the context the batched decodes start at (128) */
static int32_t decode_ctx = 128;
static enum model_matmul matmul = MODEL_MATMUL_AUTO;
static int kv_dtype = -1; /* --kv-dtype; -1: what foliod's auto picks for the weights */
static double read_bw;    /* bytes/s, measured at start */

struct bw_arg {
    const float *p;
    size_t n;
    float sum;
};

static void *bw_thread(void *arg)
{
    struct bw_arg *a = arg;
    float acc[16] = {0};
    for (size_t i = 0; i + 16 <= a->n; i += 16)
        for (int k = 0; k < 16; k++)
            acc[k] += a->p[i + k];
    for (int k = 0; k < 16; k++)
        a->sum += acc[k];
    return NULL;
}

static float *bw_buf; /* 256 MiB, filled once */

/* Read bandwidth of n_threads threads each summing its part of 256 MiB,
 * best of `passes`. */
static double measure_read_bw_passes(int passes)
{
    const size_t n = (size_t)64 << 20; /* floats */
    if (!bw_buf) {
        bw_buf = folio_aligned_alloc(64, n * sizeof(float));
        for (size_t i = 0; i < n; i++)
            bw_buf[i] = (float)(i & 7);
    }
    double best = 0;
    for (int r = 0; r < passes; r++) {
        pthread_t th[64];
        struct bw_arg a[64];
        int nt = n_threads < 64 ? n_threads : 64;
        uint64_t t0 = folio_now_ns();
        for (int t = 0; t < nt; t++) {
            a[t] = (struct bw_arg){.p = bw_buf + n / nt * t, .n = n / nt};
            pthread_create(&th[t], NULL, bw_thread, &a[t]);
        }
        for (int t = 0; t < nt; t++)
            pthread_join(th[t], NULL);
        double s = (folio_now_ns() - t0) * 1e-9;
        best = FOLIO_MAX(best, n * sizeof(float) / s);
    }
    return best;
}

static double measure_read_bw(void)
{
    return measure_read_bw_passes(quick ? 2 : 5);
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double gemm_gflops(int M, int N, int K, int reps)
{
    float *A = folio_aligned_alloc(64, sizeof(float) * (size_t)M * K);
    float *B = folio_aligned_alloc(64, sizeof(float) * (size_t)N * K);
    float *C = folio_aligned_alloc(64, sizeof(float) * (size_t)M * N);
    for (size_t i = 0; i < (size_t)M * K; i++)
        A[i] = (float)(i % 13) * 0.01f;
    for (size_t i = 0; i < (size_t)N * K; i++)
        B[i] = (float)(i % 7) * 0.01f;
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) {
        uint64_t t0 = folio_now_ns();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
        double s = (folio_now_ns() - t0) * 1e-9;
        if (r > 0 && s < best) /* first run warms up */
            best = s;
    }
    folio_free(A), folio_free(B), folio_free(C);
    return 2.0 * M * N * K / best * 1e-9;
}

struct env {
    const struct model *m;
    struct pager_kv_view kv;
    int32_t per_seq;      /* blocks per sequence */
    int32_t *bt;          /* sequence s: bt[s * per_seq ...] */
    double mat_flops_tok; /* 2 x matrix params of the layers */
    size_t kv_bytes;      /* of kv.base */
};

/* Page tables as the pager hands them out (its default, locality policy):
 * n_seqs sequences admitted together, growing a block at a time in turn,
 * as a batch that prefills and decodes in lockstep does.  Sequence s gets
 * per_seq blocks at out[s * per_seq ...]. */
static void tables_from_pager(const struct pager_config *arena, int32_t n_seqs, int32_t per_seq,
                              int32_t *out)
{
    struct pager_config c = *arena;
    c.no_arena = true;
    pager_t *pg;
    pager_seq_t **sq = calloc((size_t)n_seqs, sizeof *sq);
    int32_t toks[BLOCK] = {0};
    if (!sq || pager_init(&pg, &c) != 0) {
        fprintf(stderr, "bench_model: no pager for the page tables\n");
        exit(1);
    }
    for (int32_t s = 0; s < n_seqs; s++)
        if (pager_seq_new(pg, (uint64_t)s, (uint64_t)s, 0, &sq[s]) != 0)
            exit(1);
    for (int32_t b = 0; b < per_seq; b++)
        for (int32_t s = 0; s < n_seqs; s++)
            if (pager_seq_append(pg, sq[s], toks, BLOCK) != 0) {
                fprintf(stderr, "bench_model: pager out of blocks\n");
                exit(1);
            }
    for (int32_t s = 0; s < n_seqs; s++) {
        int32_t n;
        const int32_t *t = pager_seq_block_table(sq[s], &n);
        memcpy(out + (size_t)s * per_seq, t, sizeof(int32_t) * (size_t)per_seq);
        pager_seq_free(pg, sq[s]);
    }
    pager_free(pg);
    free(sq);
}

static void env_init(struct env *e, const struct model *m, int32_t n_seqs, int32_t max_len)
{
    const struct model_hparams *hp = &m->hp;
    e->m = m;
    e->per_seq = (max_len + BLOCK - 1) / BLOCK;
    struct pager_kv_view *kv = &e->kv;
    const enum folio_dtype dt = kv_dtype >= 0 ? (enum folio_dtype)kv_dtype : model_kv_dtype_auto(m);
    /* a quarter spare, as a serving pool has */
    const struct pager_config pc = {.num_blocks =
                                        e->per_seq * n_seqs + (e->per_seq * n_seqs + 3) / 4,
                                    .block_size = BLOCK,
                                    .n_layers = hp->n_layers,
                                    .n_kv_heads = hp->n_kv_heads,
                                    .head_dim = hp->head_dim,
                                    .dtype = dt};
    const size_t bytes = pager_kv_layout(&pc, kv); /* the pager's arena layout */
    if (bytes == 0) {
        fprintf(stderr, "bench_model: K/V of %d blocks does not fit\n", (int)pc.num_blocks);
        exit(1);
    }
    /* as the pager's arena: resident, on huge pages where the kernel
     * gives them */
    kv->base = folio_region_alloc(bytes, FOLIO_REGION_HUGE | FOLIO_REGION_RESIDENT);
    e->kv_bytes = bytes;
    if (!kv->base) {
        fprintf(stderr, "bench_model: no memory for %zu MiB of K/V\n", bytes >> 20);
        exit(1);
    }
    memset(kv->base, 0, bytes);
    e->bt = malloc(sizeof(int32_t) * (size_t)e->per_seq * n_seqs);
    tables_from_pager(&pc, n_seqs, e->per_seq, e->bt);
    const double D = hp->dim, nq = (double)hp->n_heads * hp->head_dim,
                 nkv = (double)hp->n_kv_heads * hp->head_dim, F = hp->ffn_dim;
    e->mat_flops_tok = 2.0 * hp->n_layers * (D * (nq + 2 * nkv) + nq * D + 2 * F * D + F * D);
}

static void env_free(struct env *e)
{
    folio_region_free(e->kv.base, e->kv_bytes);
    free(e->bt);
}

/* Attention FLOPs of one token at position pos (pos + 1 visible). */
static double attn_flops(const struct model_hparams *hp, int32_t pos)
{
    return 4.0 * hp->n_layers * hp->n_heads * hp->head_dim * (pos + 1.0);
}

/* CPU time of the whole process (every pool thread), seconds */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void report(const char *what, int32_t tokens_out, double secs, double cpu, double flops,
                   double mat_flops, const struct model_ctx_stats *a,
                   const struct model_ctx_stats *b)
{
    double g = (b->ns_gemm - a->ns_gemm) * 1e-9, at = (b->ns_attn - a->ns_attn) * 1e-9,
           o = (b->ns_other - a->ns_other) * 1e-9;
    printf("| %-28s | %9.1f | %7.1f | %8.1f | %5.1f%% | %5.1f%% | %5.1f%% | %8.1f |\n", what,
           tokens_out / secs, flops / secs * 1e-9, mat_flops / g * 1e-9, 100 * g / secs,
           100 * at / secs, 100 * o / secs, tokens_out / cpu);
    fflush(stdout);
}

static model_ctx_t *ctx_new(const struct env *e, int32_t max_tokens, int32_t max_slices)
{
    struct model_ctx_config cfg = {.max_tokens = max_tokens,
                                   .max_slices = max_slices,
                                   .n_threads = n_threads,
                                   .blas_threads = blas_threads,
                                   .matmul = matmul,
                                   .batch_invariant = invariant};
    model_ctx_t *ctx;
    if (model_ctx_new(e->m, &e->kv, &cfg, &ctx) < 0) {
        fprintf(stderr, "bench_model: model_ctx_new failed\n");
        exit(1);
    }
    return ctx;
}

static void bench_prefill(const struct model *m, int32_t n)
{
    struct env e;
    env_init(&e, m, 1, n);
    model_ctx_t *ctx = ctx_new(&e, n, 1);
    int32_t *tok = malloc(sizeof(int32_t) * n);
    for (int32_t i = 0; i < n; i++)
        tok[i] = (i * 7919 + 13) % m->hp.n_vocab;
    float *logits = malloc(sizeof(float) * m->hp.n_vocab);
    struct model_slice sl = {.first_pos = 0, .n_tokens = n, .block_table = e.bt, .sample = true};
    struct model_batch b = {.n_tokens = n, .tokens = tok, .n_slices = 1, .slices = &sl};
    /* one untimed forward first: the first step of a context faults in
     * its buffers and oneDNN's scratch (half the rate of later ones),
     * which a serving process pays once; then PREFILL_REPS timed ones,
     * the median reported */
    if (model_forward(ctx, &b, logits) < 0)
        exit(1);
    enum { PREFILL_REPS = 5 };
    const int reps = quick ? 2 : PREFILL_REPS;
    struct {
        double secs, cpu;
        struct model_ctx_stats s0, s1;
    } r[PREFILL_REPS];
    for (int i = 0; i < reps; i++) {
        model_ctx_stats_get(ctx, &r[i].s0);
        uint64_t t0 = folio_now_ns();
        double c0 = cpu_now();
        if (model_forward(ctx, &b, logits) < 0)
            exit(1);
        r[i].secs = (folio_now_ns() - t0) * 1e-9, r[i].cpu = cpu_now() - c0;
        model_ctx_stats_get(ctx, &r[i].s1);
    }
    int med = 0; /* the rep of median time */
    for (int i = 0; i < reps; i++) {
        int below = 0;
        for (int j = 0; j < reps; j++)
            below += r[j].secs < r[i].secs || (r[j].secs == r[i].secs && j < i);
        if (below == reps / 2)
            med = i;
    }
    double flops = e.mat_flops_tok * n + 2.0 * m->hp.n_vocab * m->hp.dim;
    for (int32_t p = 0; p < n; p++)
        flops += attn_flops(&m->hp, p);
    char what[64];
    snprintf(what, sizeof(what), "prefill %d tokens", n);
    double mat = e.mat_flops_tok * n + 2.0 * m->hp.n_vocab * m->hp.dim;
    report(what, n, r[med].secs, r[med].cpu, flops, mat, &r[med].s0, &r[med].s1);
    model_ctx_free(ctx);
    free(tok), free(logits);
    env_free(&e);
}

/* n_seqs sequences decode `steps` tokens each, starting at position p0
 * (the first p0 positions' K/V are taken as already there). */
static void bench_decode(const struct model *m, int32_t n_seqs, int32_t p0, int32_t steps,
                         const char *what)
{
    if (p0 + steps > m->hp.ctx_len) {
        fprintf(stderr, "bench_model: decode from %d for %d steps: past the model's %d positions\n",
                p0, steps, m->hp.ctx_len);
        exit(2);
    }
    struct env e;
    env_init(&e, m, n_seqs, p0 + steps);
    model_ctx_t *ctx = ctx_new(&e, n_seqs, n_seqs);
    int32_t *tok = malloc(sizeof(int32_t) * n_seqs);
    struct model_slice *sl = malloc(sizeof(*sl) * n_seqs);
    float *logits = malloc(sizeof(float) * (size_t)n_seqs * m->hp.n_vocab);
    struct model_ctx_stats s0, s1;
    double flops = 0, secs = 0, mat = 0, cpu = 0;
    /* --single: the read bandwidth is measured again before every chunk
     * of PAIR tokens and each chunk's read rate set against it (the
     * machine's bandwidth drifts by tens of percent over seconds) */
    enum { PAIR = 16 };
    double pair_bw = 0, pair_secs = 0, ratios[4096];
    int n_ratios = 0;
    /* one untimed step first (as bench_prefill): every sequence's token
     * at p0, which the first timed step then writes again */
    for (int32_t s = 0; s < n_seqs; s++) {
        tok[s] = (s * 31 + 5) % m->hp.n_vocab;
        sl[s] = (struct model_slice){.first_pos = p0,
                                     .n_tokens = 1,
                                     .block_table = e.bt + (size_t)s * e.per_seq,
                                     .sample = true};
    }
    struct model_batch warm = {.n_tokens = n_seqs, .tokens = tok, .n_slices = n_seqs, .slices = sl};
    if (model_forward(ctx, &warm, logits) < 0)
        exit(1);
    model_ctx_stats_get(ctx, &s0);
    for (int32_t st = 0; st < steps; st++) {
        if (single && n_seqs == 1 && st % PAIR == 0) {
            if (st > 0 && n_ratios < 4096)
                ratios[n_ratios++] =
                    (double)model__weight_bytes_per_token(m) * PAIR / pair_secs / pair_bw;
            pair_bw = measure_read_bw_passes(2), pair_secs = 0;
        }
        for (int32_t s = 0; s < n_seqs; s++) {
            tok[s] = (s * 31 + st * 17 + 5) % m->hp.n_vocab;
            sl[s] = (struct model_slice){.first_pos = p0 + st,
                                         .n_tokens = 1,
                                         .block_table = e.bt + (size_t)s * e.per_seq,
                                         .sample = true};
            flops +=
                e.mat_flops_tok + attn_flops(&m->hp, p0 + st) + 2.0 * m->hp.n_vocab * m->hp.dim;
            mat += e.mat_flops_tok + 2.0 * m->hp.n_vocab * m->hp.dim;
        }
        struct model_batch b = {
            .n_tokens = n_seqs, .tokens = tok, .n_slices = n_seqs, .slices = sl};
        uint64_t t0 = folio_now_ns();
        double c0 = cpu_now();
        if (model_forward(ctx, &b, logits) < 0)
            exit(1);
        secs += (folio_now_ns() - t0) * 1e-9;
        pair_secs += (folio_now_ns() - t0) * 1e-9;
        cpu += cpu_now() - c0;
    }
    model_ctx_stats_get(ctx, &s1);
    report(what, n_seqs * steps, secs, cpu, flops, mat, &s0, &s1);
    if (n_seqs == 1) { /* memory bound: weight bytes per token vs bandwidth */
        double wb = (double)model__weight_bytes_per_token(m), rate = wb * steps / secs;
        printf("|   single stream: %.1f MB of weights/token, read at %.1f GB/s = %.0f%% of "
               "the measured %.1f GB/s (bound %.1f tokens/s) |\n",
               wb * 1e-6, rate * 1e-9, 100 * rate / read_bw, read_bw * 1e-9, read_bw / wb);
        printf("|   per token: %.2f ms, %.1f pool dispatches, the caller waiting on the pool "
               "%.3f ms (products %.3f ms, attention %.3f ms, other %.3f ms) |\n",
               secs * 1e3 / steps, (double)(s1.pool_runs - s0.pool_runs) / steps,
               (s1.ns_pool_wait - s0.ns_pool_wait) * 1e-6 / steps,
               (s1.ns_gemm - s0.ns_gemm) * 1e-6 / steps, (s1.ns_attn - s0.ns_attn) * 1e-6 / steps,
               (s1.ns_other - s0.ns_other) * 1e-6 / steps);
        printf("|   per token in dispatches: the caller %.3f ms in its shares; the other threads "
               "%.3f ms in theirs, %.3f ms from dispatch to starting (summed over threads) |\n",
               (s1.ns_pool_own - s0.ns_pool_own) * 1e-6 / steps,
               (s1.ns_pool_work - s0.ns_pool_work) * 1e-6 / steps,
               (s1.ns_pool_late - s0.ns_pool_late) * 1e-6 / steps);
        if (n_ratios > 0) {
            qsort(ratios, (size_t)n_ratios, sizeof(double), cmp_double);
            printf("|   paired with the bandwidth measured before each %d tokens: median %.0f%% "
                   "(min %.0f%%, max %.0f%%, %d chunks) |\n",
                   PAIR, 100 * ratios[n_ratios / 2], 100 * ratios[0], 100 * ratios[n_ratios - 1],
                   n_ratios);
        }
    }
    model_ctx_free(ctx);
    free(tok), free(sl), free(logits);
    env_free(&e);
}

/* --single: the step's products alone, in the step's order on a pool of
 * n_threads, M = 1, each timed: per kind of matrix, the time per token and
 * its read rate against the bandwidth measured just before (what the
 * matrices reach with nothing between them; the decode row's time minus
 * theirs is what the rest of the step costs). */
static void bench_products(const struct model *m, int32_t tokens)
{
    enum { QKV, WO, GU, DOWN, OUT, KINDS };
    static const char *const names[KINDS] = {"q|k|v", "wo", "gate|up", "down", "output"};
    const struct model_hparams *hp = &m->hp;
    const int32_t n_mat = 9 * hp->n_layers + 1;
    struct matmul_mat *mats = calloc((size_t)n_mat, sizeof(*mats));
    int *kind = calloc((size_t)n_mat, sizeof(int));
    int32_t n = 0, max_k = 0, max_n = 0;
    for (int32_t l = 0; l < hp->n_layers; l++) {
        const struct model_layer *L = &m->layers[l];
        const struct matmul_mat *w[] = {&L->wqkv,        &L->qkv_part[0], &L->qkv_part[1],
                                        &L->qkv_part[2], &L->wo,          &L->w_gate_up,
                                        &L->gu_part[0],  &L->gu_part[1],  &L->w_down};
        const int k[] = {QKV, QKV, QKV, QKV, WO, GU, GU, GU, DOWN};
        for (int i = 0; i < 9; i++)
            if (w[i]->data)
                mats[n] = *w[i], kind[n++] = k[i];
    }
    mats[n] = m->output, kind[n++] = OUT;
    for (int32_t i = 0; i < n; i++)
        max_k = FOLIO_MAX(max_k, mats[i].cols), max_n = FOLIO_MAX(max_n, mats[i].rows);
    pool_t *pool;
    matmul_t *mm;
    const struct matmul_config mc = {.backend = matmul,
                                     .n_threads = n_threads,
                                     .max_m = 1,
                                     .max_k = max_k,
                                     .max_weights = n,
                                     .batch_invariant = invariant};
    if (pool_new(n_threads, &pool) || matmul_new(&mc, &mm)) {
        fprintf(stderr, "bench_model: cannot set up the products\n");
        exit(1);
    }
    int32_t *id = calloc((size_t)n, sizeof(int32_t));
    for (int32_t i = 0; i < n; i++)
        if (matmul_add(mm, &mats[i], &id[i])) {
            fprintf(stderr, "bench_model: matmul_add failed\n");
            exit(1);
        }
    float *a = folio_aligned_alloc(64, sizeof(float) * (size_t)max_k);
    float *c = folio_aligned_alloc(64, sizeof(float) * (size_t)max_n);
    for (int32_t k = 0; k < max_k; k++)
        a[k] = (float)((k * 37) % 17 - 8) * 0.05f;
    double ns[KINDS] = {0}, bytes[KINDS] = {0}, total = 0, bw = 0;
    for (int32_t t = -1; t < tokens; t++) { /* t = -1 warms up */
        if (t >= 0 && t % 16 == 0)
            bw += measure_read_bw_passes(2);
        uint64_t t0 = folio_now_ns();
        for (int32_t i = 0; i < n; i++) {
            const uint64_t s0 = folio_now_ns();
            matmul_run(mm, pool, id[i], 1, a, mats[i].cols, 0.0f, c, mats[i].rows);
            if (t >= 0) {
                ns[kind[i]] += (double)(folio_now_ns() - s0);
                bytes[kind[i]] += (double)matmul_mat_row_bytes(&mats[i]) * mats[i].rows;
            }
        }
        if (t >= 0)
            total += (double)(folio_now_ns() - t0);
    }
    bw /= (tokens + 15) / 16;
    printf("|   products alone, %d tokens: %.3f ms/token; read bandwidth %.1f GB/s |\n", tokens,
           total * 1e-6 / tokens, bw * 1e-9);
    for (int k = 0; k < KINDS; k++)
        if (ns[k] > 0)
            printf("|     %-8s %6.1f MB/token %7.3f ms/token  %5.1f GB/s = %3.0f%% |\n", names[k],
                   bytes[k] / tokens * 1e-6, ns[k] * 1e-6 / tokens, bytes[k] / ns[k],
                   100 * bytes[k] / ns[k] / (bw * 1e-9));
    folio_free(a), folio_free(c);
    free(id), free(mats), free(kind);
    matmul_free(mm);
    pool_free(pool);
}

/* Microseconds per sampler_sample call over n_vocab logits. */
static void bench_sampler(int32_t V)
{
    float *l = malloc(sizeof(float) * V);
    void *work = malloc(sampler_work_size(V));
    uint64_t st = 5;
    for (int32_t i = 0; i < V; i++) { /* logits ~ the synthetic model's: sd 2 */
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        l[i] = (float)((double)(st >> 11) * 0x1.0p-53 * 6.9 - 3.46);
    }
    const struct {
        const char *name;
        struct sampler_params p;
        int n_top;
    } cases[] = {
        {"greedy", {.temperature = 0}, 0},
        {"greedy + top-5 logprobs", {.temperature = 0}, 5},
        {"T=0.8", {.temperature = 0.8f}, 0},
        {"T=0.8 top-k 40", {.temperature = 0.8f, .top_k = 40}, 0},
        {"T=0.8 top-p 0.9 (flat logits: deep cut)", {.temperature = 0.8f, .top_p = 0.9f}, 0},
    };
    printf("# sampler, %d logits, us per call:", V);
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const int reps = quick ? 20 : 200;
        int32_t tok;
        struct sampler_result res;
        uint64_t t0 = folio_now_ns();
        for (int r = 0; r < reps; r++)
            sampler_sample(&cases[c].p, l, V, (uint64_t)r, work, cases[c].n_top, &tok,
                           cases[c].n_top ? &res : NULL);
        printf("%s %s %.0f", c ? ";" : "", cases[c].name, (folio_now_ns() - t0) * 1e-3 / reps);
    }
    printf("\n");
    free(l);
    free(work);
}

static void bench_type(const struct model *m, enum gguf_tensor_type t)
{
    struct env e;
    env_init(&e, m, 1, 16);
    model_ctx_t *ctx = ctx_new(&e, 1, 1);
    printf("\n## %s weights, matmul %s, KV %s\n\n", gguf_tensor_type_name(t),
           model_matmul_name(model_ctx_matmul(ctx)), folio_dtype_name(e.kv.dtype));
    model_ctx_free(ctx);
    env_free(&e);
    printf("| %-28s | %9s | %7s | %8s | %6s | %6s | %6s | %8s |\n", "workload", "tokens/s",
           "GFLOP/s", "matmul GF", "matmul", "attn", "other", "tok/CPU-s");
    printf("|---|---|---|---|---|---|---|---|\n");
    char what[64];
    if (single) { /* --single: the single-stream row alone */
        snprintf(what, sizeof(what), "decode 1 stream, %d tokens", single);
        bench_decode(m, 1, 16, single, what);
        bench_products(m, single);
        return;
    }
    if (n_only_batch > 0) {
        for (int i = 0; i < n_only_batch; i++) {
            snprintf(what, sizeof(what), "decode %d seqs @%d ctx", only_batch[i], decode_ctx);
            bench_decode(m, only_batch[i], decode_ctx, 16, what);
        }
        return;
    }
    bench_prefill(m, quick ? 128 : 512);
    snprintf(what, sizeof(what), "decode 1 stream, %d tokens", quick ? 16 : 128);
    bench_decode(m, 1, 16, quick ? 16 : 128, what);
    const int32_t batch[] = {8, 32, 64, 128};
    for (size_t i = 0; i < sizeof(batch) / sizeof(batch[0]); i++) {
        snprintf(what, sizeof(what), "decode %d seqs @%d ctx", batch[i], decode_ctx);
        bench_decode(m, batch[i], decode_ctx, quick ? 2 : 4, what);
    }
}

/* One matrix of the copy d (f32-sized storage) requantized to t from the
 * F32 original s. */
static void requant(struct matmul_mat *d, const struct matmul_mat *s, enum gguf_tensor_type t)
{
    if (quant_from_float(t, s->data, (void *)d->data, (int64_t)s->rows * s->cols) == 0)
        d->type = t;
}

/* The layers llama.cpp's Q4_K_M gives more bits (first and last eighth,
 * every third between), as tools/cmd_quantize.c. */
static bool more_bits(int32_t l, int32_t n)
{
    return l < n / 8 || l >= 7 * n / 8 || (l - n / 8) % 3 == 2;
}

/* m's weights as type t: F16/BF16/Q8_0 through model__retype; the
 * K-quants and Q4_0 from a Q8_0-shaped copy, each matrix requantized from
 * m's F32: Q6_K everywhere, the Q4_K_M (Q5_K_M) mix (Q4_K (Q5_K); output
 * and the "more bits" layers' ffn_down Q6_K; Q|K|V stay one matrix of the
 * mix's type here, where a file gives attn_v Q6_K in those layers),
 * `folio quantize --type q4_0`'s (Q4_0, output Q6_K), Q3_K_M's (Q3_K;
 * attn_output and ffn_down Q4_K, output Q6_K) or Q2_K's (Q2_K; attn_output
 * and ffn_down Q3_K, output Q6_K). */
static int retype(const struct model *m, enum gguf_tensor_type t, struct model **out)
{
    if (t != GGUF_TENSOR_Q4_K && t != GGUF_TENSOR_Q5_K && t != GGUF_TENSOR_Q6_K &&
        t != GGUF_TENSOR_Q4_0 && t != GGUF_TENSOR_Q3_K &&
        t != GGUF_TENSOR_Q2_K) { /* repacked as model_load_file does */
        int rc = model__retype(m, t, out);
        return rc ? rc : model__repack(*out);
    }
    if (m->hp.dim % 256 || m->hp.ffn_dim % 256 || (m->hp.n_heads * m->hp.head_dim) % 256)
        return -EINVAL;
    const enum gguf_tensor_type more = t == GGUF_TENSOR_Q4_0   ? t
                                       : t == GGUF_TENSOR_Q3_K ? GGUF_TENSOR_Q4_K
                                       : t == GGUF_TENSOR_Q2_K ? GGUF_TENSOR_Q3_K
                                                               : GGUF_TENSOR_Q6_K;
    /* Q3_K_M and Q2_K raise attn_output and every ffn_down */
    const bool low = t == GGUF_TENSOR_Q3_K || t == GGUF_TENSOR_Q2_K;
    int rc = model__retype(m, GGUF_TENSOR_Q8_0, out);
    if (rc)
        return rc;
    struct model *q = *out;
    requant(&q->tok_embd, &m->tok_embd, t);
    if (m->output.data == m->tok_embd.data) /* tied: one matrix, output's type */
        requant(&q->tok_embd, &m->tok_embd, GGUF_TENSOR_Q6_K), q->output = q->tok_embd;
    else
        requant(&q->output, &m->output, GGUF_TENSOR_Q6_K);
    for (int32_t l = 0; l < m->hp.n_layers; l++) {
        struct model_layer *L = &q->layers[l];
        const struct model_layer *S = &m->layers[l];
        requant(&L->wqkv, &S->wqkv, t);
        requant(&L->wo, &S->wo, low ? more : t);
        requant(&L->w_gate_up, &S->w_gate_up, t);
        requant(&L->w_down, &S->w_down, low || more_bits(l, m->hp.n_layers) ? more : t);
    }
    return model__repack(q); /* as model_load_file does */
}

int main(int argc, char **argv)
{
    const char *preset = "small", *dtype = "all";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--blas-threads"))
            blas_threads = 1;
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--single") && i + 1 < argc)
            single = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--decode") && i + 1 < argc) {
            char *p = argv[++i];
            while (*p && n_only_batch < (int)FOLIO_ARRAY_LEN(only_batch)) {
                long b = strtol(p, &p, 10);
                if (b >= 1 && b <= 1024)
                    only_batch[n_only_batch++] = (int32_t)b;
                p += *p == ',';
                if (b < 1 || b > 1024)
                    break;
            }
        } else if (!strcmp(argv[i], "--decode-ctx") && i + 1 < argc) {
            decode_ctx = atoi(argv[++i]);
            if (decode_ctx < 1 || decode_ctx > 1 << 20) {
                fprintf(stderr, "bench_model: --decode-ctx %s: 1 to 1048576 tokens\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--batch-invariant"))
            invariant = 1;
        else if (!strcmp(argv[i], "--preset") && i + 1 < argc)
            preset = argv[++i];
        else if (!strcmp(argv[i], "--matmul") && i + 1 < argc &&
                 !model_matmul_parse(argv[i + 1], &matmul))
            i++;
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc)
            dtype = argv[++i];
        else if (!strcmp(argv[i], "--kv-dtype") && i + 1 < argc) {
            enum folio_dtype t;
            if (!strcmp(argv[++i], "auto"))
                kv_dtype = -1;
            else if (folio_dtype_parse(argv[i], &t) == 0)
                kv_dtype = (int)t;
            else {
                fprintf(stderr, "bench_model: --kv-dtype %s: f32, f16, bf16, q8 or auto\n",
                        argv[i]);
                return 2;
            }
        } else {
            fprintf(stderr, "usage: bench_model [--threads N] [--blas-threads] [--preset P] "
                            "[--quick] [--single TOKENS] [--decode B,B,...] [--decode-ctx N] "
                            "[--matmul auto|openblas|onednn] "
                            "[--batch-invariant] [--dtype "
                            "all|f32|f16|bf16|q8_0|q4_0|q2_k|q3_k_m|q4_k_m|q5_k_m|q6_k] "
                            "[--kv-dtype auto|f32|f16|bf16|q8]\n");
            return 2;
        }
    }
    if (n_threads < 1)
        n_threads = 1;
    struct model_hparams hp;
    struct model *m;
    if (model_preset(preset, &hp) < 0 || model__alloc(&hp, &m) < 0) {
        fprintf(stderr, "bench_model: cannot build preset %s\n", preset);
        return 1;
    }
    model__fill_random(m, 1);

    openblas_set_num_threads(n_threads);
    printf("# bench_model: preset %s (dim %d, %d layers, %d/%d heads, ffn %d, vocab %d), "
           "%d threads, products %s\n",
           preset, hp.dim, hp.n_layers, hp.n_heads, hp.n_kv_heads, hp.ffn_dim, hp.n_vocab,
           n_threads, blas_threads ? "OpenBLAS-threaded" : "split over the pool");
    if (!single) {
        printf("# cblas_sgemm peak (OpenBLAS, %d threads): 2048x2048x2048 %.1f GFLOP/s, "
               "64x2048x768 %.1f GFLOP/s, 1x2048x768 %.1f GFLOP/s\n",
               n_threads, gemm_gflops(2048, 2048, 2048, quick ? 1 : 3),
               gemm_gflops(64, 2048, 768, quick ? 5 : 30), gemm_gflops(1, 2048, 768, 50));
        bench_sampler(hp.n_vocab);
    }
    read_bw = measure_read_bw();
    printf("# read bandwidth (%d threads summing 256 MiB): %.1f GB/s\n", n_threads, read_bw * 1e-9);
    static const struct {
        const char *name;
        enum gguf_tensor_type t;
    } types[] = {{"f32", GGUF_TENSOR_F32},     {"f16", GGUF_TENSOR_F16},
                 {"bf16", GGUF_TENSOR_BF16},   {"q8_0", GGUF_TENSOR_Q8_0},
                 {"q4_0", GGUF_TENSOR_Q4_0},   {"q2_k", GGUF_TENSOR_Q2_K},
                 {"q3_k_m", GGUF_TENSOR_Q3_K}, {"q4_k_m", GGUF_TENSOR_Q4_K},
                 {"q5_k_m", GGUF_TENSOR_Q5_K}, {"q6_k", GGUF_TENSOR_Q6_K}};
    int ran = 0;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (strcmp(dtype, "all") && strcmp(dtype, types[i].name))
            continue;
        struct model *tm = m;
        if (types[i].t != GGUF_TENSOR_F32 && retype(m, types[i].t, &tm) < 0) {
            fprintf(stderr, "bench_model: cannot store the weights as %s\n", types[i].name);
            return 1;
        }
        bench_type(tm, types[i].t);
        if (tm != m)
            model_free(tm);
        ran++;
    }
    if (!ran) {
        fprintf(stderr, "bench_model: --dtype %s: unknown type\n", dtype);
        return 2;
    }
    model_free(m);
    folio_free(bw_buf);
    return 0;
}
