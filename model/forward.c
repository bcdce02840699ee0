/*
 * model/forward.c — the transformer forward pass over a flat batch of
 * tokens from many sequences, with K/V in the pager's pages.
 *
 * Owns: model_ctx_t, i.e. the workspaces of one step, the thread pool, and
 * the copy of the pager's KV view the step writes into.
 *
 * One step (n = batch tokens, D = dim, Hq/Hk = query/KV heads, d = head_dim,
 * F = ffn_dim, V = n_vocab, S = sampling slices):
 *
 *   x   [n][D]        residual stream     = tok_embd[tokens]
 *   per layer:
 *     xb  [n][D]      = rmsnorm(x) * attn_norm
 *     qkv [n][(Hq+2Hk)d] = xb · wqkvᵀ                   (one product, all tokens)
 *     q   [n][Hq d]   = rope(qkv[:, Q]);  K/V slots ← rope(qkv[:, K]), qkv[:, V]
 *     att [n][Hq d]   = paged attention(q, K/V through the block tables)
 *                       (in xb's memory: xb is not read again before the
 *                       next rmsnorm writes it)
 *     x  += att · woᵀ                                   (beta = 1)
 *     xb              = rmsnorm(x) * ffn_norm
 *     for each chunk c of up to FFN_ROWS rows (gu holds one chunk):
 *       gu  [c][2F]   = xb[c] · w_gate_upᵀ               (one product: gate | up)
 *       gu[:, :F]     = silu(gate) * up                  (in place, row stride 2F)
 *       x[c] += gu[:, :F] · w_downᵀ                     (beta = 1, lda 2F)
 *   xs  [L][D]        = rmsnorm(x[the logit rows]) * out_norm: the last row
 *                       of each sampling slice, every row of an all_logits one
 *   logits [L][V]     = xs · outputᵀ                    (one product, those rows only)
 *   hidden [H][D]     = rmsnorm(x[every row of a hidden slice]) * out_norm
 *                       (model_forward_hidden's output: embeddings)
 *
 * LoRA: the rows of a slice with an adapter (model_slice.lora) get its
 * low-rank correction s·Btᵀ·(A·x) added right after each product (qkv
 * before RoPE and biases, gate|up before SwiGLU, into x after wo and
 * down), on the pool (job_lora): each thread takes its share of the
 * rows, an adapter's rows up to eight at a time (its A and B read once for
 * them), each row computed as if alone; rows without one, and steps where
 * no slice has one, cost nothing.
 *
 * Every product goes through the matmul layer (model/matmul.h), whose
 * weights the ctx registers, and so prepares, once at model_ctx_new in the
 * backend cfg->matmul resolves to; the weights stay in their file's type.
 *
 * RoPE follows llama.cpp: within each head it rotates adjacent pairs
 * (x[2i], x[2i+1]) (llama) or the halves (x[i], x[i + d/2]) (qwen2, qwen3:
 * NeoX) by pos * base^(-2i/d), scaled as the file asks (linear, YaRN,
 * per-dimension divisors from rope_freqs.weight or llama3's keys: see
 * rope_init).  The cos/sin of every token's angles are computed once per
 * step (double, then rounded to float) and reused by every layer.  Before
 * RoPE, qwen2 adds its Q/K/V biases and qwen3 RMS-normalises each Q and K
 * head (job_rope_kv).  A Q/K/V whose parts differ in type is three
 * products into the columns of the same qkv rows; gate/up of differing
 * types two products into the columns of the same gu rows.  A sliding window
 * (hp.n_swa) is the attention kernel's (attn_batch.window).
 *
 * Threads.  Two kinds of parallel work alternate and never overlap:
 *   - element-wise and attention work runs on the ctx's pool (pool_run,
 *     rows, slices or attention pieces split by ith/nth);
 *   - matrix products.  By default (cfg->blas_threads == false) they are
 *     split over the same pool too: thread ith computes a band of output
 *     columns (a band of W's rows) with a single-threaded kernel (cblas,
 *     a portable 16-bit or quantized kernel, or a oneDNN primitive that
 *     runs on its calling thread alone: model/matmul.c), and OpenBLAS is
 *     set to one thread.  The number of busy threads is then
 *     n_threads at every moment, and small-M products (decode batches)
 *     parallelise over N, which OpenBLAS's own threading does poorly.
 *     With cfg->blas_threads (F32 weights on the OpenBLAS backend only;
 *     other products stay on the pool) the caller makes each sgemm call with
 *     openblas_set_num_threads(n_threads) while the pool sleeps (its
 *     workers spin at most POOL_SPIN_NS, 30 us, after a job, then sleep
 *     on a futex; that short spin is the only overlap).
 *   The default keeps exactly n_threads busy threads and was faster in
 *   bench_model on small batches (see BENCHMARKS.md).
 *   openblas_set_num_threads is process-wide: all contexts of a process
 *   should use the same n_threads and mode (the daemon has one).
 *   Element-wise jobs on fewer than MODEL_MIN_ROWS_PER_DISPATCH rows run
 *   on the caller alone: waking the pool would cost more than the work.
 *
 * Attention goes through model__attention(), the one place that chooses
 * the kernel: the fast attn_paged, ATTN_PHASES pool dispatches over a
 * workspace sized once at model_ctx_new by attn_paged_work_bound.  A step
 * of one row (a single stream's decode) splits its KV heads over the pool
 * instead, each thread running both phases on its heads in its own
 * workspace (job_attn_heads; not with batch_invariant): the kernel's plan
 * keeps such a row on one thread below a few hundred keys.  A batch
 * whose plan needed more (never, by that bound) would fall back to the
 * scalar reference (stats.attn_ref_layers counts it; the tests assert it
 * never happens).
 *
 * Invariants: model_forward never allocates; every workspace is sized at
 * model_ctx_new from cfg (max_tokens, max_slices).  The model and the KV
 * view are borrowed and must outlive the ctx.  One thread at a time may
 * call model_forward on a ctx.
 */
#include "model_internal.h"
#include "matmul.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "folio/attention.h"
#include "folio/common.h"
#include "folio/lora.h"
#include "folio/pool.h"

struct model_ctx {
    const struct model *m;
    struct pager_kv_view kv;
    struct model_ctx_config cfg;
    pool_t *pool;
    matmul_t *mm;
    int32_t *mm_id;    /* [n_layers][MM_PER_LAYER] (see MM_*), then output */
    int32_t n_qkv;     /* (Hq + 2 Hk) * d */
    int32_t n_q, n_kv; /* Hq * d, Hk * d */
    /* workspaces, [max_tokens] rows unless noted; att is xb's memory */
    float *x, *xb, *qkv, *q, *att;
    float *gu;              /* [ffn_rows][2F]: one chunk of the FFN's rows */
    int32_t ffn_rows;       /* min(max_tokens, FFN_ROWS) */
    float *rope_cs;         /* [max_tokens][d/2][2]: cos, sin */
    int32_t *tok_pos;       /* position of each token */
    int32_t *tok_slice;     /* slice of each token */
    struct attn_seq *aseqs; /* [max_slices] */
    int32_t *sample_rows;   /* [max_logits] rows whose logits are wanted */
    int32_t *hidden_rows;   /* [max_tokens] rows of hidden slices */
    int32_t n_hidden;       /* this step's */
    bool any_lora;          /* this step has a slice with an adapter */
    float *xs;              /* [max_logits][D] */
    double *inv_freq;       /* [d/2] base^(-2i/d) */
    double *rope_mix;       /* [d/2] YaRN's extrapolation share of angle i */
    double rope_fscale;     /* positions scale (1 / factor; 1 without scaling) */
    double rope_mscale;     /* cos/sin magnitude (YaRN's attention factor) */
    void *arena;            /* one allocation behind the float workspaces */
    void *attn_work;        /* fast attention kernel's workspace */
    size_t attn_work_bytes;
    void *attn_head_work;   /* [n_threads][attn_head_bytes]: one-row head split */
    size_t attn_head_bytes; /* 64-byte multiple; 0: no head split */
    struct model_ctx_stats stats;
};

/* Slots of a layer's products in mm_id: Q|K|V (fused in MM_QKV, or the
 * three parts of a mixed-type QKV in MM_QKV + 0..2), wo, gate|up (fused in
 * MM_GATE_UP, or gate and up of differing types in MM_GATE_UP + 0..1),
 * down. */
enum { MM_QKV = 0, MM_WO = 3, MM_GATE_UP = 4, MM_DOWN = 6, MM_PER_LAYER = 7 };

/* Rows of one FFN chunk.  gu, [rows][2F] floats, is the largest workspace
 * (8 MiB for `small` at 512 rows); in chunks of 256 rows it is half that,
 * and the products keep the kind of kernel they had at 512 rows (oneDNN's
 * and sgemm's rates are flat from 256 rows up; quantized weights widen
 * from widen_min_m() rows, at most 256, model/matmul.c). */
#define FFN_ROWS 256

/* ---- pool jobs -------------------------------------------------------- */

/* What one dispatch works on; fields used depend on the job. */
struct fwd_job {
    struct model_ctx *ctx;
    const struct model_batch *b;
    int32_t n; /* rows */
    int32_t layer;
    const float *w; /* norm weights */
    const float *src;
    float *dst;
    const int32_t *rows; /* gather: source rows, or NULL for identity */
    int stage;           /* job_lora: enum lora_stage */
    int32_t r0;          /* job_lora: batch row of the job's row 0 (an FFN chunk's) */
};

/* Share [lo, hi) of n items for thread ith of nth. */
static void split_range(int32_t n, int ith, int nth, int32_t *lo, int32_t *hi)
{
    int64_t per = ((int64_t)n + nth - 1) / nth;
    int64_t a = per * ith, z = a + per;
    *lo = (int32_t)FOLIO_MIN(a, (int64_t)n);
    *hi = (int32_t)FOLIO_MIN(z, (int64_t)n);
}

/* dst[r] = src[rows ? rows[r] : r] / rms * w, for r in [0, n). */
static void job_rmsnorm(void *arg, int ith, int nth)
{
    struct fwd_job *j = arg;
    const int32_t D = j->ctx->m->hp.dim;
    const float eps = j->ctx->m->hp.norm_eps;
    int32_t lo, hi;
    split_range(j->n, ith, nth, &lo, &hi);
    for (int32_t r = lo; r < hi; r++) {
        const float *s = j->src + (size_t)(j->rows ? j->rows[r] : r) * D;
        float *d = j->dst + (size_t)r * D;
        float acc[16] = {0}; /* 16 partial sums: vectorisable, and accurate enough */
        int32_t i = 0;
        for (; i + 16 <= D; i += 16)
            for (int k = 0; k < 16; k++)
                acc[k] += s[i + k] * s[i + k];
        double ss = 0;
        for (; i < D; i++)
            ss += (double)s[i] * s[i];
        for (int k = 0; k < 16; k++)
            ss += acc[k];
        float inv = (float)(1.0 / sqrt(ss / D + eps));
        for (i = 0; i < D; i++)
            d[i] = s[i] * inv * j->w[i];
    }
}

static void job_embed(void *arg, int ith, int nth)
{
    struct fwd_job *j = arg;
    const struct model *m = j->ctx->m;
    const size_t D = (size_t)m->hp.dim;
    int32_t lo, hi;
    split_range(j->n, ith, nth, &lo, &hi);
    for (int32_t r = lo; r < hi; r++) /* the row in f32, whatever tok_embd's type */
        matmul_mat_rows_f32(&m->tok_embd, j->b->tokens[r], 1, j->ctx->x + r * D);
}

/* Rotates one head of d values from src into dst with the token's cos/sin:
 * pairs (x[2i], x[2i+1]) (llama), or (x[i], x[i + d/2]) (neox: qwen2,
 * qwen3), pair i by angle i. */
static inline void rope_head(float *dst, const float *src, const float *cs, int32_t d, bool neox)
{
    const int32_t h = d / 2, a = neox ? 1 : 2, b = neox ? h : 1;
    for (int32_t i = 0; i < h; i++) {
        float c = cs[2 * i], s = cs[2 * i + 1];
        float x0 = src[a * i], x1 = src[a * i + b];
        dst[a * i] = x0 * c - x1 * s;
        dst[a * i + b] = x0 * s + x1 * c;
    }
}

/* x[d] ← x / rms(x) * w (qwen3's per-head Q/K norm), in place. */
static inline void rmsnorm_head(float *x, const float *w, int32_t d, float eps)
{
    double ss = 0;
    for (int32_t i = 0; i < d; i++)
        ss += (double)x[i] * x[i];
    const float inv = (float)(1.0 / sqrt(ss / d + eps));
    for (int32_t i = 0; i < d; i++)
        x[i] = x[i] * inv * w[i];
}

/* Per token: the Q|K|V biases are added (qwen2), Q and K heads normed
 * (qwen3); q ← rope(Q part); the K (roped) and V parts go to the token's
 * slot in layer j->layer of the KV arena, converted to the arena's dtype by
 * pager_kv_row_put (f16 / bf16 rounding, q8 quantization with the row's
 * scale: quantize on write, so the arena only ever holds stored rows). */
static void job_rope_kv(void *arg, int ith, int nth)
{
    struct fwd_job *j = arg;
    struct model_ctx *ctx = j->ctx;
    const struct pager_kv_view *kv = &ctx->kv;
    const struct model_hparams *hp = &ctx->m->hp;
    const struct model_layer *L = &ctx->m->layers[j->layer];
    const int32_t d = hp->head_dim, Hq = hp->n_heads, Hk = hp->n_kv_heads;
    const bool neox = hp->rope_neox;
    float kbuf[1024];
    int32_t lo, hi;
    split_range(j->n, ith, nth, &lo, &hi);
    for (int32_t r = lo; r < hi; r++) {
        float *row = ctx->qkv + (size_t)r * ctx->n_qkv;
        if (L->bqkv)
            for (int32_t i = 0; i < ctx->n_qkv; i++)
                row[i] += L->bqkv[i];
        if (L->q_norm) {
            for (int32_t h = 0; h < Hq; h++)
                rmsnorm_head(row + (size_t)h * d, L->q_norm, d, hp->norm_eps);
            for (int32_t h = 0; h < Hk; h++)
                rmsnorm_head(row + ctx->n_q + (size_t)h * d, L->k_norm, d, hp->norm_eps);
        }
        const float *cs = ctx->rope_cs + (size_t)r * d;
        for (int32_t h = 0; h < Hq; h++)
            rope_head(ctx->q + (size_t)r * ctx->n_q + (size_t)h * d, row + (size_t)h * d, cs, d,
                      neox);
        const int32_t pos = ctx->tok_pos[r];
        const int32_t *bt = j->b->slices[ctx->tok_slice[r]].block_table;
        const int32_t blk = bt[pos / kv->block_size], slot = pos % kv->block_size;
        for (int32_t h = 0; h < Hk; h++) {
            const float *k = row + ctx->n_q + (size_t)h * d;
            const float *v = row + ctx->n_q + ctx->n_kv + (size_t)h * d;
            if (kv->dtype == FOLIO_F32) { /* rotate straight into the arena */
                const size_t ki = (size_t)blk * kv->block_stride +
                                  (size_t)j->layer * kv->layer_stride +
                                  (size_t)h * kv->head_stride + (size_t)slot * d;
                rope_head((float *)kv->base + ki, k, cs, d, neox);
                memcpy((float *)kv->base + ki + kv->v_offset, v, (size_t)d * sizeof(float));
            } else {
                rope_head(kbuf, k, cs, d, neox);
                pager_kv_row_put(kv, blk, j->layer, 0, h, slot, kbuf);
                pager_kv_row_put(kv, blk, j->layer, 1, h, slot, v);
            }
        }
    }
}

/* gu[r][i] = silu(gate) * up for i < F, in place over the gate half. */
static void job_swiglu(void *arg, int ith, int nth)
{
    struct fwd_job *j = arg;
    const int32_t F = j->ctx->m->hp.ffn_dim;
    int32_t lo, hi;
    split_range(j->n, ith, nth, &lo, &hi);
    for (int32_t r = lo; r < hi; r++) {
        float *g = j->ctx->gu + (size_t)r * 2 * F;
        model__swiglu(g, g + F, F);
    }
}

/* C[M][N] (ldc) = A[M][K] (lda) · W[N][K]ᵀ + beta · C for the weight the
 * matmul layer knows as id (W = w, N = w->rows, K = w->cols). */
static void gemm(struct model_ctx *ctx, int32_t id, const struct matmul_mat *w, int32_t M,
                 const float *A, int32_t lda, float beta, float *C, int32_t ldc)
{
    uint64_t t0 = folio_now_ns();
    if (ctx->cfg.blas_threads && w->type == GGUF_TENSOR_F32 &&
        matmul_backend_used(ctx->mm) == MODEL_MATMUL_OPENBLAS) {
        /* OpenBLAS's own threads (cfg->blas_threads), on the caller */
        if (M == 1)
            cblas_sgemv(CblasRowMajor, CblasNoTrans, w->rows, w->cols, 1.0f, w->data, w->cols, A, 1,
                        beta, C, 1);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, w->rows, w->cols, 1.0f, A, lda,
                        w->data, w->cols, beta, C, ldc);
    } else {
        matmul_run(ctx->mm, ctx->pool, id, M, A, lda, beta, C, ldc);
    }
    ctx->stats.ns_gemm += folio_now_ns() - t0;
}

/* The input `a` of layer l (l = n_layers, a = 0: the output's) into the
 * ctx's activation statistics, when it has them. */
static void act_add(struct model_ctx *ctx, int32_t l, int a, const float *A, int32_t lda, int32_t M)
{
    if (ctx->cfg.act_stats)
        model__act_add(ctx->cfg.act_stats, l * MODEL_ACT_PER_LAYER + a, A, lda, M);
}

/* Element-wise jobs on fewer rows than this run on the caller alone (a
 * decode step's norms cost about as much as one dispatch). */
#define MODEL_MIN_ROWS_PER_DISPATCH 4

/* Runs one element-wise job on the pool, counting its time. */
static void run_other(struct model_ctx *ctx, pool_fn fn, struct fwd_job *j)
{
    uint64_t t0 = folio_now_ns();
    if (j->n < MODEL_MIN_ROWS_PER_DISPATCH)
        fn(j, 0, 1); /* a few rows: cheaper than waking the pool */
    else
        pool_run(ctx->pool, fn, j);
    ctx->stats.ns_other += folio_now_ns() - t0;
}

/* LoRA corrections after a layer's products (model/lora.c): each row of a
 * slice with an adapter gets s·Btᵀ·(A·x) added to the product's output
 * columns, in groups of that adapter's rows whose every row is computed
 * as if alone (so a row's result never depends on its batch). */
enum lora_stage { LORA_QKV, LORA_O, LORA_GU, LORA_DOWN };

/* Rows of one adapter, up to MODEL_LORA_ROWS at a time, through the
 * stage's targets; gu's row 0 is batch row gu_r0 (the FFN chunk's first). */
static void lora_group(struct model_ctx *ctx, const struct model_lora *ad, int32_t l, int stage,
                       int32_t gu_r0, const int32_t *rows, int nr)
{
    const int32_t D = ctx->m->hp.dim, F = ctx->m->hp.ffn_dim;
    const float *x[MODEL_LORA_ROWS];
    float *y[MODEL_LORA_ROWS];
    /* the targets of a stage: input rows, output rows and column offsets */
    int targets[3], n_t = 0;
    int32_t col[3] = {0, 0, 0};
    const float *in = NULL;
    int32_t ldi = 0, ldo = 0, in_r0 = 0, out_r0 = 0; /* gu's row 0 is batch row gu_r0 */
    float *outp = NULL;
    switch (stage) {
    case LORA_QKV:
        targets[0] = MODEL_LORA_Q, targets[1] = MODEL_LORA_K, targets[2] = MODEL_LORA_V, n_t = 3;
        col[1] = ctx->n_q, col[2] = ctx->n_q + ctx->n_kv;
        in = ctx->xb, ldi = D, outp = ctx->qkv, ldo = ctx->n_qkv;
        break;
    case LORA_O:
        targets[0] = MODEL_LORA_O, n_t = 1;
        in = ctx->att, ldi = ctx->n_q, outp = ctx->x, ldo = D;
        break;
    case LORA_GU:
        targets[0] = MODEL_LORA_GATE, targets[1] = MODEL_LORA_UP, n_t = 2;
        col[1] = F;
        in = ctx->xb, ldi = D, outp = ctx->gu, ldo = 2 * F, out_r0 = gu_r0;
        break;
    default:
        targets[0] = MODEL_LORA_DOWN, n_t = 1;
        in = ctx->gu, ldi = 2 * F, outp = ctx->x, ldo = D, in_r0 = gu_r0;
        break;
    }
    for (int k = 0; k < nr; k++)
        x[k] = in + (size_t)(rows[k] - in_r0) * (size_t)ldi;
    for (int t = 0; t < n_t; t++) {
        for (int k = 0; k < nr; k++)
            y[k] = outp + (size_t)(rows[k] - out_r0) * (size_t)ldo + col[t];
        model__lora_rows(ad, l, targets[t], x, y, nr);
    }
}

static void job_lora(void *arg, int ith, int nth)
{
    struct fwd_job *j = arg;
    struct model_ctx *ctx = j->ctx;
    int32_t lo, hi;
    split_range(j->n, ith, nth, &lo, &hi);
    /* each adapter's rows of this share, MODEL_LORA_ROWS at a time */
    for (int32_t a = 1; a <= ctx->cfg.n_loras; a++) {
        int32_t rows[MODEL_LORA_ROWS];
        int nr = 0;
        for (int32_t r = j->r0 + lo; r < j->r0 + hi; r++) {
            if (j->b->slices[ctx->tok_slice[r]].lora != a)
                continue;
            rows[nr++] = r;
            if (nr == MODEL_LORA_ROWS) {
                lora_group(ctx, ctx->cfg.loras[a - 1], j->layer, j->stage, j->r0, rows, nr);
                nr = 0;
            }
        }
        if (nr)
            lora_group(ctx, ctx->cfg.loras[a - 1], j->layer, j->stage, j->r0, rows, nr);
    }
}

/* The stage's corrections for this step's rows that have an adapter
 * (counted with the products). */
static void lora_stage(struct model_ctx *ctx, struct fwd_job *j, int stage)
{
    if (!ctx->any_lora)
        return;
    uint64_t t0 = folio_now_ns();
    j->stage = stage;
    if (j->n < MODEL_MIN_ROWS_PER_DISPATCH)
        job_lora(j, 0, 1);
    else
        pool_run(ctx->pool, job_lora, j);
    ctx->stats.ns_gemm += folio_now_ns() - t0;
}

/* The reference kernel on the slices [lo, hi) of thread ith's share. */
static void job_attn_ref(void *arg, int ith, int nth)
{
    const struct attn_batch *ab = arg;
    int32_t lo, hi;
    split_range(ab->n_seqs, ith, nth, &lo, &hi);
    if (hi <= lo)
        return;
    struct attn_batch part = *ab; /* rows are addressed by q_row: any subset works */
    part.seqs = ab->seqs + lo;
    part.n_seqs = hi - lo;
    attn_paged_ref(&part);
}

struct attn_job {
    const struct attn_batch *ab;
    void *work;
    int phase;
};

static void job_attn(void *arg, int ith, int nth)
{
    struct attn_job *a = arg;
    attn_paged(a->ab, a->work, a->phase, ith, nth);
}

/* KV heads [lo, hi) of thread ith of nth: the view of those heads alone
 * (same strides, base moved to head lo), the query heads they serve. */
static void head_share(const struct attn_batch *ab, int ith, int nth, struct pager_kv_view *kv,
                       struct attn_batch *part)
{
    int32_t lo, hi;
    split_range(ab->kv->n_kv_heads, ith, nth, &lo, &hi);
    const int32_t g = ab->n_heads / ab->kv->n_kv_heads, d = ab->kv->head_dim;
    *kv = *ab->kv;
    kv->n_kv_heads = hi - lo;
    kv->base = (char *)kv->base + (size_t)lo * kv->head_stride * folio_dtype_size(kv->dtype);
    *part = *ab;
    part->kv = kv;
    part->n_heads = (hi - lo) * g;
    part->q = ab->q + (size_t)lo * g * d;
    part->out = ab->out + (size_t)lo * g * d;
}

/* One row (a single decode): thread ith runs the whole kernel, both
 * phases, on its share of the KV heads in its own workspace.  With one
 * row the q / out row stride never matters, so a share is a batch of its
 * own; every head is computed as in the whole batch's plan (a decode's
 * item takes all KV heads of the slice at once, each head on its own
 * arithmetic).  The kernel's own split of such a row is by context and
 * only past MIN_SPLIT_CTX keys per piece: below that one thread did it
 * all while the other waited. */
static void job_attn_heads(void *arg, int ith, int nth)
{
    struct model_ctx *ctx = ((const struct attn_job *)arg)->work;
    const struct attn_batch *ab = ((const struct attn_job *)arg)->ab;
    struct pager_kv_view kv;
    struct attn_batch part;
    head_share(ab, ith, nth, &kv, &part);
    if (kv.n_kv_heads < 1)
        return;
    void *w = (char *)ctx->attn_head_work + (size_t)ith * ctx->attn_head_bytes;
    for (int ph = 0; ph < ATTN_PHASES; ph++)
        attn_paged(&part, w, ph, 0, 1);
}

/* Whether one layer's attention runs as job_attn_heads. */
static bool attn_by_heads(const struct model_ctx *ctx, const struct attn_batch *ab)
{
    const int nth = pool_size(ctx->pool);
    if (ab->n_rows != 1 || nth < 2 || ab->kv->n_kv_heads < nth || ab->batch_invariant ||
        !ctx->attn_head_bytes)
        return false;
    for (int ith = 0; ith < nth; ith++) {
        struct pager_kv_view kv;
        struct attn_batch part;
        head_share(ab, ith, nth, &kv, &part);
        if (attn_paged_work_size(&part, 1) > ctx->attn_head_bytes)
            return false;
    }
    return true;
}

/* The attention of one layer: the single place that picks the kernel.
 * The fast kernel runs its ATTN_PHASES phases over the pool in the
 * workspace sized at model_ctx_new by attn_paged_work_bound; a batch whose
 * plan needed more (never, by that bound) would fall back to the
 * reference, counted in stats.attn_ref_layers.  One row goes by KV heads
 * (job_attn_heads) when attn_by_heads allows. */
static void model__attention(struct model_ctx *ctx, const struct attn_batch *ab)
{
    const int nth = pool_size(ctx->pool);
    if (attn_by_heads(ctx, ab)) {
        struct attn_job a = {.ab = ab, .work = ctx};
        pool_run(ctx->pool, job_attn_heads, &a);
        return;
    }
    if (attn_paged_work_size(ab, nth) <= ctx->attn_work_bytes) {
        struct attn_job a = {.ab = ab, .work = ctx->attn_work};
        for (a.phase = 0; a.phase < ATTN_PHASES; a.phase++)
            pool_run(ctx->pool, job_attn, &a);
        return;
    }
    ctx->stats.attn_ref_layers++;
    if (ab->n_seqs > 1)
        pool_run(ctx->pool, job_attn_ref, (void *)ab);
    else
        attn_paged_ref(ab);
}

/* ---- context ---------------------------------------------------------- */

/* YaRN's correction dimension: the rotary pair index whose wavelength fits
 * n_rot times in the original context. */
static double yarn_corr_dim(int32_t d, int32_t n_ctx_orig, double n_rot, double base)
{
    return d * log(n_ctx_orig / (n_rot * 2.0 * M_PI)) / (2.0 * log(base));
}

/* The RoPE frequencies and their scaling (hp->rope_scaling):
 *   none    angle_i = p · base^(-2i/d)
 *   linear  angle_i = p / factor · base^(-2i/d)
 *   yarn    pairs below the ramp [lo, hi] (high frequencies, measured by
 *           yarn_corr_dim at beta_fast / beta_slow rotations over orig_ctx)
 *           keep p · f_i, pairs above it use p / factor · f_i, and the ramp
 *           blends linearly; cos and sin are scaled by
 *           attn · (1 + 0.1 ln factor).
 * This is how llama.cpp's RoPE reads the same GGUF keys. */
static void rope_init(struct model_ctx *ctx, const struct model_hparams *hp)
{
    const int32_t d = hp->head_dim;
    ctx->rope_fscale = 1.0;
    ctx->rope_mscale = 1.0;
    for (int32_t i = 0; i < d / 2; i++) {
        /* divided by rope_freqs / llama3's divisor (1 without) */
        ctx->inv_freq[i] = pow((double)hp->rope_base, -2.0 * (double)i / (double)d) /
                           model__rope_divisor(ctx->m, i);
        ctx->rope_mix[i] = 0.0;
    }
    if (hp->rope_scaling == MODEL_ROPE_NONE || hp->rope_scaling == MODEL_ROPE_LLAMA3 ||
        !(hp->rope_factor > 0))
        return;
    ctx->rope_fscale = 1.0 / hp->rope_factor;
    if (hp->rope_scaling != MODEL_ROPE_YARN)
        return;
    const double base = hp->rope_base;
    const int32_t orig = hp->rope_orig_ctx > 0 ? hp->rope_orig_ctx : hp->ctx_len;
    const double fast = hp->yarn_beta_fast > 0 ? hp->yarn_beta_fast : 32.0;
    const double slow = hp->yarn_beta_slow > 0 ? hp->yarn_beta_slow : 1.0;
    double lo = floor(yarn_corr_dim(d, orig, fast, base));
    double hi = ceil(yarn_corr_dim(d, orig, slow, base));
    lo = FOLIO_MAX(0.0, lo);
    hi = FOLIO_MIN((double)(d - 1), hi);
    for (int32_t i = 0; i < d / 2; i++) {
        const double y = (i - lo) / FOLIO_MAX(0.001, hi - lo);
        ctx->rope_mix[i] = 1.0 - FOLIO_MIN(1.0, FOLIO_MAX(0.0, y));
    }
    ctx->rope_mscale =
        (hp->yarn_attn > 0 ? hp->yarn_attn : 1.0) * (1.0 + 0.1 * log((double)hp->rope_factor));
}

/* Whether every product weight of m runs foliod's own kernels whatever
 * the backend: quantized types, and BF16 too when bf16 (model/gemm_bf16.h's
 * kernel runs here).  None of them calls the float backend. */
static bool all_products_own(const struct model *m, bool bf16)
{
    const struct matmul_mat *list[9];
    for (int32_t l = -1; l < m->hp.n_layers; l++) {
        int n = 0;
        if (l < 0) {
            list[n++] = &m->output;
        } else {
            const struct model_layer *L = &m->layers[l];
            const struct matmul_mat *all[] = {&L->wqkv,        &L->qkv_part[0], &L->qkv_part[1],
                                              &L->qkv_part[2], &L->wo,          &L->w_gate_up,
                                              &L->gu_part[0],  &L->gu_part[1],  &L->w_down};
            for (size_t i = 0; i < FOLIO_ARRAY_LEN(all); i++)
                if (all[i]->data)
                    list[n++] = all[i];
        }
        for (int i = 0; i < n; i++)
            if (list[i]->type == GGUF_TENSOR_F32 || list[i]->type == GGUF_TENSOR_F16 ||
                (list[i]->type == GGUF_TENSOR_BF16 && !bf16))
                return false;
    }
    return true;
}

int model_ctx_new(const model_t *m, const struct pager_kv_view *kv,
                  const struct model_ctx_config *cfg, model_ctx_t **out)
{
    *out = NULL;
    if (!m || !kv || !cfg || cfg->max_tokens < 1 || cfg->max_slices < 1 || cfg->n_threads < 0 ||
        cfg->n_loras < 0 || (cfg->n_loras > 0 && !cfg->loras))
        return -EINVAL;
    for (int32_t i = 0; i < cfg->n_loras; i++)
        if (!cfg->loras[i])
            return -EINVAL;
    const struct model_hparams *hp = &m->hp;
    if (!kv->base || kv->n_layers != hp->n_layers || kv->n_kv_heads != hp->n_kv_heads ||
        kv->head_dim != hp->head_dim ||
        (kv->dtype != FOLIO_F32 && kv->dtype != FOLIO_F16 && kv->dtype != FOLIO_BF16 &&
         kv->dtype != FOLIO_Q8) ||
        kv->block_size < 1 || kv->num_blocks < 1 || hp->head_dim > 1024)
        return -EINVAL;

    struct model_ctx *ctx = folio_calloc(1, sizeof(*ctx));
    if (!ctx)
        return -ENOMEM;
    ctx->m = m;
    ctx->kv = *kv;
    ctx->cfg = *cfg;
    if (ctx->cfg.n_threads == 0)
        ctx->cfg.n_threads = 1;
    if (ctx->cfg.max_slices > ctx->cfg.max_tokens) /* a slice has at least one token */
        ctx->cfg.max_slices = ctx->cfg.max_tokens;
    if (ctx->cfg.max_logits < ctx->cfg.max_slices)
        ctx->cfg.max_logits = ctx->cfg.max_slices;
    if (ctx->cfg.max_logits > ctx->cfg.max_tokens) /* a row per token at most */
        ctx->cfg.max_logits = ctx->cfg.max_tokens;
    ctx->n_q = hp->n_heads * hp->head_dim;
    ctx->n_kv = hp->n_kv_heads * hp->head_dim;
    ctx->n_qkv = ctx->n_q + 2 * ctx->n_kv;

    const size_t T = (size_t)ctx->cfg.max_tokens, S = (size_t)ctx->cfg.max_slices;
    const size_t R = (size_t)ctx->cfg.max_logits;
    const size_t D = (size_t)hp->dim, d = (size_t)hp->head_dim;
    ctx->ffn_rows = FOLIO_MIN(ctx->cfg.max_tokens, FFN_ROWS);
    /* float workspaces, each rounded to 16 floats (64 bytes) */
    const size_t sizes[] = {T * D,
                            T * FOLIO_MAX(D, (size_t)ctx->n_q), /* xb, and att */
                            T * (size_t)ctx->n_qkv,
                            T * (size_t)ctx->n_q,
                            (size_t)ctx->ffn_rows * 2 * (size_t)hp->ffn_dim,
                            T * d,
                            R * D};
    float **slots[] = {&ctx->x, &ctx->xb, &ctx->qkv, &ctx->q, &ctx->gu, &ctx->rope_cs, &ctx->xs};
    size_t total = 0;
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(sizes); i++)
        total += (sizes[i] + 15) & ~(size_t)15;
    int rc = -ENOMEM;
    ctx->arena = folio_aligned_alloc(64, total * sizeof(float));
    ctx->tok_pos = folio_malloc(T * sizeof(int32_t));
    ctx->tok_slice = folio_malloc(T * sizeof(int32_t));
    ctx->aseqs = folio_malloc(S * sizeof(struct attn_seq));
    ctx->sample_rows = folio_malloc(R * sizeof(int32_t));
    ctx->hidden_rows = folio_malloc(T * sizeof(int32_t));
    ctx->inv_freq = folio_malloc(d / 2 * sizeof(double));
    ctx->rope_mix = folio_malloc(d / 2 * sizeof(double));
    if (!ctx->arena || !ctx->tok_pos || !ctx->tok_slice || !ctx->aseqs || !ctx->sample_rows ||
        !ctx->hidden_rows || !ctx->inv_freq || !ctx->rope_mix)
        goto fail;
    float *p = ctx->arena;
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(sizes); i++) {
        *slots[i] = p;
        p += (sizes[i] + 15) & ~(size_t)15;
    }
    ctx->att = ctx->xb;
    rope_init(ctx, hp);
    /* The kernel's proven bound over every batch this ctx accepts. */
    ctx->attn_work_bytes =
        attn_paged_work_bound(kv, hp->n_heads, ctx->cfg.max_tokens, ctx->cfg.n_threads);
    ctx->attn_work = folio_aligned_alloc(64, ctx->attn_work_bytes);
    if (!ctx->attn_work)
        goto fail;
    if (ctx->cfg.n_threads > 1 && kv->n_kv_heads >= ctx->cfg.n_threads) {
        /* one-row batches split by KV heads: each thread's share is at
         * most ceil(n_kv_heads / n_threads) heads of one row */
        struct pager_kv_view sub = *kv;
        sub.n_kv_heads = FOLIO_DIV_CEIL(kv->n_kv_heads, ctx->cfg.n_threads);
        const int32_t g = hp->n_heads / kv->n_kv_heads;
        ctx->attn_head_bytes =
            (attn_paged_work_bound(&sub, sub.n_kv_heads * g, 1, 1) + 63) & ~(size_t)63;
        ctx->attn_head_work =
            folio_aligned_alloc(64, ctx->attn_head_bytes * (size_t)ctx->cfg.n_threads);
        if (!ctx->attn_head_work)
            goto fail;
    }
    rc = pool_new(ctx->cfg.n_threads, &ctx->pool);
    if (rc < 0)
        goto fail;
    openblas_set_num_threads(ctx->cfg.blas_threads ? ctx->cfg.n_threads : 1);
    /* the products' weights, prepared once for the backend; a model whose
     * every product runs foliod's own kernels (quantized, or BF16 with
     * AVX512-BF16) never calls the float backend, so "auto" takes OpenBLAS
     * and names it: it neither calibrates nor starts oneDNN (that would
     * only grow the resident set) */
    const int32_t n_mm = MM_PER_LAYER * hp->n_layers + 1;
    const struct matmul_config mc = {
        .backend = ctx->cfg.matmul == MODEL_MATMUL_AUTO &&
                           all_products_own(m, matmul_bf16_kernel(MODEL_MATMUL_AUTO))
                       ? MODEL_MATMUL_OPENBLAS
                       : ctx->cfg.matmul,
        .n_threads = ctx->cfg.n_threads,
        .max_m = ctx->cfg.max_tokens,
        .max_k = FOLIO_MAX(FOLIO_MAX(hp->dim, hp->ffn_dim), ctx->n_q),
        .max_weights = n_mm,
        .batch_invariant = ctx->cfg.batch_invariant,
    };
    rc = -ENOMEM;
    if (!(ctx->mm_id = folio_malloc((size_t)n_mm * sizeof(int32_t))))
        goto fail;
    if ((rc = matmul_new(&mc, &ctx->mm)))
        goto fail;
    for (int32_t l = 0; l < hp->n_layers && rc == 0; l++) {
        const struct model_layer *L = &m->layers[l];
        const bool fused = L->wqkv.data != NULL, gu_fused = L->w_gate_up.data != NULL;
        const struct matmul_mat *w[MM_PER_LAYER] = {fused ? &L->wqkv : &L->qkv_part[0],
                                                    fused ? NULL : &L->qkv_part[1],
                                                    fused ? NULL : &L->qkv_part[2],
                                                    &L->wo,
                                                    gu_fused ? &L->w_gate_up : &L->gu_part[0],
                                                    gu_fused ? NULL : &L->gu_part[1],
                                                    &L->w_down};
        for (int i = 0; i < MM_PER_LAYER && rc == 0; i++) {
            ctx->mm_id[MM_PER_LAYER * l + i] = -1;
            if (w[i])
                rc = matmul_add(ctx->mm, w[i], &ctx->mm_id[MM_PER_LAYER * l + i]);
        }
    }
    if (rc == 0)
        rc = matmul_add(ctx->mm, &m->output, &ctx->mm_id[n_mm - 1]);
    if (rc)
        goto fail;
    ctx->cfg.matmul = matmul_backend_used(ctx->mm);
    *out = ctx;
    return 0;
fail:
    model_ctx_free(ctx);
    return rc;
}

void model_ctx_free(model_ctx_t *ctx)
{
    if (!ctx)
        return;
    pool_free(ctx->pool);
    matmul_free(ctx->mm);
    folio_free(ctx->mm_id);
    folio_free(ctx->arena);
    folio_free(ctx->attn_work);
    folio_free(ctx->attn_head_work);
    folio_free(ctx->tok_pos);
    folio_free(ctx->tok_slice);
    folio_free(ctx->aseqs);
    folio_free(ctx->sample_rows);
    folio_free(ctx->hidden_rows);
    folio_free(ctx->inv_freq);
    folio_free(ctx->rope_mix);
    folio_free(ctx);
}

/* ---- forward ---------------------------------------------------------- */

/* Checks b against the ctx's limits and the model; fills the per-token
 * position/slice tables, the attention slices, the sampling rows and the
 * hidden rows.  Returns the number of logit rows or -EINVAL. */
static int prepare(struct model_ctx *ctx, const struct model_batch *b)
{
    const struct model_hparams *hp = &ctx->m->hp;
    const struct pager_kv_view *kv = &ctx->kv;
    if (!b || b->n_tokens < 1 || b->n_tokens > ctx->cfg.max_tokens || b->n_slices < 1 ||
        b->n_slices > ctx->cfg.max_slices || !b->tokens || !b->slices)
        return -EINVAL;
    int32_t row = 0, n_sample = 0;
    ctx->n_hidden = 0;
    ctx->any_lora = false;
    for (int32_t s = 0; s < b->n_slices; s++) {
        const struct model_slice *sl = &b->slices[s];
        if (sl->n_tokens < 1 || sl->first_pos < 0 || !sl->block_table ||
            sl->n_tokens > b->n_tokens - row || sl->first_pos > hp->ctx_len - sl->n_tokens)
            return -EINVAL;
        int32_t end = sl->first_pos + sl->n_tokens;
        /* with a window, blocks before the first row's window are never
         * read: the pager may have released them (PAGER_HOLE) */
        int32_t lo =
            hp->n_swa > 0 ? FOLIO_MAX(0, sl->first_pos - hp->n_swa + 1) / kv->block_size : 0;
        for (int32_t i = lo; i < FOLIO_DIV_CEIL(end, kv->block_size); i++)
            if (sl->block_table[i] < 0 || sl->block_table[i] >= kv->num_blocks)
                return -EINVAL;
        for (int32_t i = 0; i < sl->n_tokens; i++) {
            int32_t t = b->tokens[row + i];
            if (t < 0 || t >= hp->n_vocab)
                return -EINVAL;
            ctx->tok_pos[row + i] = sl->first_pos + i;
            ctx->tok_slice[row + i] = s;
        }
        if (sl->lora < 0 || sl->lora > ctx->cfg.n_loras)
            return -EINVAL;
        ctx->any_lora |= sl->lora > 0;
        ctx->aseqs[s] = (struct attn_seq){
            .q_row = row, .n_q = sl->n_tokens, .p0 = sl->first_pos, .block_table = sl->block_table};
        const int32_t first = sl->all_logits ? row : row + sl->n_tokens - 1;
        if (sl->hidden)
            for (int32_t r = row; r < row + sl->n_tokens; r++)
                ctx->hidden_rows[ctx->n_hidden++] = r;
        row += sl->n_tokens;
        if (!sl->sample && !sl->all_logits)
            continue;
        if (n_sample + (row - first) > ctx->cfg.max_logits)
            return -EINVAL;
        for (int32_t r = first; r < row; r++)
            ctx->sample_rows[n_sample++] = r;
    }
    if (row != b->n_tokens)
        return -EINVAL;
    return n_sample;
}

int model_forward(model_ctx_t *ctx, const struct model_batch *b, float *logits)
{
    return model_forward_hidden(ctx, b, logits, NULL);
}

int model_forward_hidden(model_ctx_t *ctx, const struct model_batch *b, float *logits,
                         float *hidden)
{
    const struct model *m = ctx->m;
    const struct model_hparams *hp = &m->hp;
    int n_sample = prepare(ctx, b);
    if (n_sample < 0)
        return n_sample;
    if ((n_sample > 0 && !logits) || (ctx->n_hidden > 0 && !hidden))
        return -EINVAL;
    const int32_t n = b->n_tokens, D = hp->dim, F = hp->ffn_dim, d = hp->head_dim;
    ctx->stats.steps++;
    ctx->stats.tokens += (uint64_t)n;
    ctx->stats.sampled_rows += (uint64_t)n_sample;

    /* cos/sin of every token's angles, shared by all layers: angle i of
     * position p is p·f_i scaled by rope_fscale, except YaRN's
     * extrapolated share rope_mix[i] of it, which keeps p·f_i */
    for (int32_t r = 0; r < n; r++) {
        float *cs = ctx->rope_cs + (size_t)r * d;
        for (int32_t i = 0; i < d / 2; i++) {
            const double ex = (double)ctx->tok_pos[r] * ctx->inv_freq[i];
            const double mix = ctx->rope_mix[i];
            const double a = ex * ctx->rope_fscale * (1.0 - mix) + ex * mix;
            cs[2 * i] = (float)(cos(a) * ctx->rope_mscale);
            cs[2 * i + 1] = (float)(sin(a) * ctx->rope_mscale);
        }
    }

    struct fwd_job j = {.ctx = ctx, .b = b, .n = n};
    run_other(ctx, job_embed, &j);

    struct attn_batch ab = {
        .kv = &ctx->kv,
        .n_heads = hp->n_heads,
        .scale = (float)(1.0 / sqrt((double)d)),
        .n_seqs = b->n_slices,
        .seqs = ctx->aseqs,
        .n_rows = n,
        .q = ctx->q,
        .out = ctx->att,
        .batch_invariant = ctx->cfg.batch_invariant,
        .window = hp->n_swa,
    };
    for (int32_t l = 0; l < hp->n_layers; l++) {
        const struct model_layer *L = &m->layers[l];
        j.layer = l;
        j.rows = NULL;

        j.src = ctx->x, j.dst = ctx->xb, j.w = L->attn_norm;
        run_other(ctx, job_rmsnorm, &j);
        act_add(ctx, l, MODEL_ACT_ATTN_IN, ctx->xb, D, n);
        /* qkv[n][n_qkv] = xb[n][D] · wqkv[n_qkv][D]ᵀ: one product, or one per
         * part into its columns when Q, K and V differ in type */
        const int32_t *id = ctx->mm_id + MM_PER_LAYER * l;
        if (L->wqkv.data) {
            gemm(ctx, id[MM_QKV], &L->wqkv, n, ctx->xb, D, 0.0f, ctx->qkv, ctx->n_qkv);
        } else {
            const int32_t col[3] = {0, ctx->n_q, ctx->n_q + ctx->n_kv};
            for (int i = 0; i < 3; i++)
                gemm(ctx, id[MM_QKV + i], &L->qkv_part[i], n, ctx->xb, D, 0.0f, ctx->qkv + col[i],
                     ctx->n_qkv);
        }
        lora_stage(ctx, &j, LORA_QKV);
        run_other(ctx, job_rope_kv, &j);

        ab.layer = l;
        uint64_t t0 = folio_now_ns();
        model__attention(ctx, &ab);
        ctx->stats.ns_attn += folio_now_ns() - t0;
        act_add(ctx, l, MODEL_ACT_ATTN_OUT, ctx->att, ctx->n_q, n);
        /* x[n][D] += att[n][Hq d] · wo[D][Hq d]ᵀ */
        gemm(ctx, id[MM_WO], &L->wo, n, ctx->att, ctx->n_q, 1.0f, ctx->x, D);
        lora_stage(ctx, &j, LORA_O);

        j.src = ctx->x, j.dst = ctx->xb, j.w = L->ffn_norm;
        run_other(ctx, job_rmsnorm, &j);
        act_add(ctx, l, MODEL_ACT_FFN_IN, ctx->xb, D, n);
        /* the FFN, ffn_rows rows at a time (gu holds that many) */
        for (int32_t r0 = 0; r0 < n; r0 += ctx->ffn_rows) {
            const int32_t nc = FOLIO_MIN(ctx->ffn_rows, n - r0);
            const float *xb = ctx->xb + (size_t)r0 * D;
            j.r0 = r0;
            j.n = nc;
            /* gu[nc][2F] = xb[nc][D] · w_gate_up[2F][D]ᵀ   (gate | up): one
             * product, or gate and up into their columns when they differ
             * in type */
            if (L->w_gate_up.data) {
                gemm(ctx, id[MM_GATE_UP], &L->w_gate_up, nc, xb, D, 0.0f, ctx->gu, 2 * F);
            } else {
                for (int i = 0; i < 2; i++)
                    gemm(ctx, id[MM_GATE_UP + i], &L->gu_part[i], nc, xb, D, 0.0f,
                         ctx->gu + (size_t)i * F, 2 * F);
            }
            lora_stage(ctx, &j, LORA_GU);
            run_other(ctx, job_swiglu, &j);
            act_add(ctx, l, MODEL_ACT_FFN_HIDDEN, ctx->gu, 2 * F, nc);
            /* x[nc][D] += h[nc][F] (= gu[:, :F], row stride 2F) · w_down[D][F]ᵀ */
            gemm(ctx, id[MM_DOWN], &L->w_down, nc, ctx->gu, 2 * F, 1.0f, ctx->x + (size_t)r0 * D,
                 D);
            lora_stage(ctx, &j, LORA_DOWN);
        }
        j.r0 = 0;
        j.n = n;
    }
    if (ctx->n_hidden > 0) {
        j.n = ctx->n_hidden, j.rows = ctx->hidden_rows;
        j.src = ctx->x, j.dst = hidden, j.w = m->out_norm;
        run_other(ctx, job_rmsnorm, &j);
    }
    if (n_sample == 0)
        return 0;

    j.n = n_sample, j.rows = ctx->sample_rows;
    j.src = ctx->x, j.dst = ctx->xs, j.w = m->out_norm;
    run_other(ctx, job_rmsnorm, &j);
    act_add(ctx, hp->n_layers, 0, ctx->xs, D, n_sample);
    /* logits[S][V] = xs[S][D] · output[V][D]ᵀ */
    gemm(ctx, ctx->mm_id[MM_PER_LAYER * hp->n_layers], &m->output, n_sample, ctx->xs, D, 0.0f,
         logits, hp->n_vocab);
    return 0;
}

enum model_matmul model_ctx_matmul(const model_ctx_t *ctx)
{
    return ctx->cfg.matmul;
}

int model_ctx_threads(const model_ctx_t *ctx)
{
    return pool_size(ctx->pool);
}

void model_ctx_run(model_ctx_t *ctx, pool_fn fn, void *arg)
{
    pool_run(ctx->pool, fn, arg);
}

void model_ctx_stats_get(const model_ctx_t *ctx, struct model_ctx_stats *st)
{
    *st = ctx->stats;
    struct pool_stats ps;
    pool_stats_get(ctx->pool, &ps);
    st->pool_runs = ps.runs;
    st->ns_pool_wait = ps.wait_ns;
    st->ns_pool_own = ps.own_ns;
    st->ns_pool_late = ps.late_ns;
    st->ns_pool_work = ps.work_ns;
}
