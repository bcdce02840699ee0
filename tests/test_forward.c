/*
 * tests/test_forward.c — the paged, batched forward pass against a dense
 * reference written plainly here.
 *
 * The reference runs one sequence from position 0 with contiguous K/V
 * arrays, double-precision activations and accumulation, and returns the
 * logits of every position.  The paged forward (model_forward, sgemm, K/V
 * in shuffled blocks of a hand-made arena, several sequences per batch) must
 * match it within 1e-4 (max abs logit difference) with f32 K/V, and within
 * F16_TOL with f16 K/V, for: a whole prompt at once, random chunks, token by
 * token, and mixed batches of many sequences at once.  Runs the full tiny
 * preset (8 layers); FOLIO_TEST_SHORT=1 uses 2 layers and a 4096 vocab.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "../model/model_internal.h"
#include "folio/common.h"
#include "folio/gguf.h"
#include "folio/lora.h"
#include "folio/model.h"
#include "folio/pager.h"
#include "folio/pool.h"
#include "test_isa.h"

#define F32_TOL 1e-4
#define F16_TOL 1e-2 /* K/V rounded to 11 significant bits (seen: ~3e-3) */
#define Q8_TOL  0.3  /* Q8_0 weights: see test_types_backends */

static struct model *g_model;
static int g_short;
/* a short run on the plain kernels (test_forward_plain): what does not
 * depend on the products' ISA runs in the default run only */
static int g_short_plain;
static bool g_inv; /* run_paged_on's ctx with batch_invariant */
/* run_paged_on with adapters: sequence s runs adapter s % (g_n_loras + 1)
 * (0: none) and is checked against g_lora_refs[that] */
static int32_t g_n_loras;
static const struct model_lora *g_loras[4];
static const struct model *g_lora_refs[5];

/* ---- deterministic test randomness ------------------------------------ */

static uint64_t rng_state = 42;
static uint32_t rnd(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}
static int32_t rnd_range(int32_t lo, int32_t hi) /* [lo, hi] */
{
    return lo + (int32_t)(rnd() % (uint32_t)(hi - lo + 1));
}

/* ---- dense reference -------------------------------------------------- */

static void ref_rmsnorm(double *out, const double *x, const float *w, int32_t D, float eps)
{
    double ss = 0;
    for (int32_t i = 0; i < D; i++)
        ss += x[i] * x[i];
    double inv = 1.0 / sqrt(ss / D + eps);
    for (int32_t i = 0; i < D; i++)
        out[i] = x[i] * inv * w[i];
}

/* out[n_out] = W[n_out][n_in] · x */
static void ref_matvec(double *out, const float *W, const double *x, int32_t n_out, int32_t n_in)
{
    for (int32_t o = 0; o < n_out; o++) {
        double s = 0;
        const float *w = W + (size_t)o * n_in;
        for (int32_t i = 0; i < n_in; i++)
            s += w[i] * x[i];
        out[o] = s;
    }
}

/* RoPE as llama.cpp defines it: pairs (2i, 2i+1), or (i, i + d/2) for
 * NeoX; angle pos * base^(-2i/d), divided by the factor for linear
 * scaling; YaRN blends the two per pair with a linear ramp between the
 * pairs that turn beta_fast and beta_slow times over the original
 * context, and scales cos/sin by 1 + 0.1 ln(factor).  Per-dimension
 * divisors: the model's rope_freqs, or Llama 3.1's rule (frequencies whose
 * wavelength exceeds orig / low are divided by the factor, those below
 * orig / high kept, a linear blend of 1/factor and 1 in between). */
static double ref_rope_divisor(const struct model *m, int32_t i)
{
    const struct model_hparams *hp = &m->hp;
    if (m->rope_freqs)
        return m->rope_freqs[i];
    if (hp->rope_scaling != MODEL_ROPE_LLAMA3)
        return 1;
    const double wl = 2 * M_PI * pow(hp->rope_base, 2.0 * i / hp->head_dim);
    const double orig = hp->rope_orig_ctx, lo = hp->rope_low_freq, hi = hp->rope_high_freq;
    if (orig / wl > hi) /* short wavelength: high frequency */
        return 1;
    if (orig / wl < lo)
        return hp->rope_factor;
    double s = (orig / wl - lo) / (hi - lo);
    return 1 / ((1 - s) / hp->rope_factor + s);
}

static void ref_rope(double *v, int32_t pos, const struct model *m)
{
    const struct model_hparams *hp = &m->hp;
    const int32_t d = hp->head_dim;
    double lo = 0, hi = 0, msc = 1;
    if (hp->rope_scaling == MODEL_ROPE_YARN) {
        const double orig = hp->rope_orig_ctx, lb = log(hp->rope_base);
        lo = floor(d * log(orig / (hp->yarn_beta_fast * 2 * M_PI)) / (2 * lb));
        hi = ceil(d * log(orig / (hp->yarn_beta_slow * 2 * M_PI)) / (2 * lb));
        lo = lo < 0 ? 0 : lo;
        hi = hi > d - 1 ? d - 1 : hi;
        msc = 1 + 0.1 * log(hp->rope_factor);
    }
    for (int32_t i = 0; i < d / 2; i++) {
        const double ex = pos * pow(hp->rope_base, -2.0 * i / d) / ref_rope_divisor(m, i);
        double a = ex;
        if (hp->rope_scaling == MODEL_ROPE_LINEAR) {
            a = ex / hp->rope_factor;
        } else if (hp->rope_scaling == MODEL_ROPE_YARN) {
            double y = (i - lo) / (hi - lo > 0.001 ? hi - lo : 0.001);
            double keep = 1 - (y < 0 ? 0 : y > 1 ? 1 : y); /* share of ex */
            a = ex / hp->rope_factor * (1 - keep) + ex * keep;
        }
        const int32_t i0 = hp->rope_neox ? i : 2 * i, i1 = hp->rope_neox ? i + d / 2 : 2 * i + 1;
        double x0 = v[i0], x1 = v[i1];
        v[i0] = (x0 * cos(a) - x1 * sin(a)) * msc;
        v[i1] = (x0 * sin(a) + x1 * cos(a)) * msc;
    }
}

/* x[d] / rms(x) * w, in place (qwen3's Q/K head norm). */
static void ref_head_norm(double *x, const float *w, int32_t d, float eps)
{
    double ss = 0;
    for (int32_t i = 0; i < d; i++)
        ss += x[i] * x[i];
    const double inv = 1.0 / sqrt(ss / d + eps);
    for (int32_t i = 0; i < d; i++)
        x[i] = x[i] * inv * w[i];
}

/* logits[n][V] of every position of tokens[0..n) run from position 0. */
/* Every position's logits [n][n_vocab], and (hidden not NULL) its final
 * hidden state [n][dim]: the output norm's. */
static void ref_forward_h(const struct model *m, const int32_t *tokens, int32_t n, double *logits,
                          double *hidden)
{
    const struct model_hparams *hp = &m->hp;
    const int32_t D = hp->dim, d = hp->head_dim, Hq = hp->n_heads, Hk = hp->n_kv_heads;
    const int32_t F = hp->ffn_dim, nq = Hq * d, nkv = Hk * d, group = Hq / Hk;
    double *x = calloc((size_t)n * D, sizeof(double));
    double *K = calloc((size_t)n * nkv, sizeof(double)); /* [pos][Hk][d] */
    double *V = calloc((size_t)n * nkv, sizeof(double));
    double *xb = malloc(sizeof(double) * D), *qkv = malloc(sizeof(double) * (nq + 2 * nkv));
    double *att = malloc(sizeof(double) * nq), *o = malloc(sizeof(double) * D);
    double *gu = malloc(sizeof(double) * 2 * F), *sc = malloc(sizeof(double) * n);
    double *Q = malloc(sizeof(double) * (size_t)n * nq);
    assert_non_null(x);
    for (int32_t t = 0; t < n; t++)
        for (int32_t i = 0; i < D; i++)
            x[(size_t)t * D + i] = model__f32(&m->tok_embd)[(size_t)tokens[t] * D + i];
    for (int32_t l = 0; l < hp->n_layers; l++) {
        const struct model_layer *L = &m->layers[l];
        for (int32_t t = 0; t < n; t++) {
            ref_rmsnorm(xb, x + (size_t)t * D, L->attn_norm, D, hp->norm_eps);
            ref_matvec(qkv, model__f32(&L->wqkv), xb, nq + 2 * nkv, D);
            for (int32_t i = 0; L->bqkv && i < nq + 2 * nkv; i++)
                qkv[i] += L->bqkv[i];
            for (int32_t h = 0; L->q_norm && h < Hq; h++)
                ref_head_norm(qkv + h * d, L->q_norm, d, hp->norm_eps);
            for (int32_t h = 0; L->k_norm && h < Hk; h++)
                ref_head_norm(qkv + nq + h * d, L->k_norm, d, hp->norm_eps);
            for (int32_t h = 0; h < Hq; h++)
                ref_rope(qkv + h * d, t, m);
            for (int32_t h = 0; h < Hk; h++)
                ref_rope(qkv + nq + h * d, t, m);
            memcpy(Q + (size_t)t * nq, qkv, sizeof(double) * nq);
            memcpy(K + (size_t)t * nkv, qkv + nq, sizeof(double) * nkv);
            memcpy(V + (size_t)t * nkv, qkv + nq + nkv, sizeof(double) * nkv);
        }
        for (int32_t t = 0; t < n; t++) {
            for (int32_t h = 0; h < Hq; h++) {
                const double *q = Q + (size_t)t * nq + h * d;
                int32_t kh = h / group;
                double mx = -INFINITY, sum = 0;
                const int32_t p0 = hp->n_swa > 0 && t - hp->n_swa + 1 > 0 ? t - hp->n_swa + 1 : 0;
                for (int32_t p = p0; p <= t; p++) {
                    double s = 0;
                    for (int32_t e = 0; e < d; e++)
                        s += q[e] * K[(size_t)p * nkv + kh * d + e];
                    sc[p] = s / sqrt((double)d);
                    mx = fmax(mx, sc[p]);
                }
                for (int32_t p = p0; p <= t; p++)
                    sum += (sc[p] = exp(sc[p] - mx));
                for (int32_t e = 0; e < d; e++) {
                    double a = 0;
                    for (int32_t p = p0; p <= t; p++)
                        a += sc[p] * V[(size_t)p * nkv + kh * d + e];
                    att[h * d + e] = a / sum;
                }
            }
            double *xt = x + (size_t)t * D;
            ref_matvec(o, model__f32(&L->wo), att, D, nq);
            for (int32_t i = 0; i < D; i++)
                xt[i] += o[i];
            ref_rmsnorm(xb, xt, L->ffn_norm, D, hp->norm_eps);
            ref_matvec(gu, model__f32(&L->w_gate_up), xb, 2 * F, D);
            for (int32_t i = 0; i < F; i++)
                gu[i] = gu[i] / (1 + exp(-gu[i])) * gu[F + i];
            ref_matvec(o, model__f32(&L->w_down), gu, D, F);
            for (int32_t i = 0; i < D; i++)
                xt[i] += o[i];
        }
    }
    for (int32_t t = 0; t < n; t++) {
        ref_rmsnorm(xb, x + (size_t)t * D, m->out_norm, D, hp->norm_eps);
        ref_matvec(logits + (size_t)t * hp->n_vocab, model__f32(&m->output), xb, hp->n_vocab, D);
        if (hidden)
            memcpy(hidden + (size_t)t * D, xb, sizeof(double) * D);
    }
    free(x), free(K), free(V), free(xb), free(qkv), free(att), free(o), free(gu), free(sc);
    free(Q);
}

static void ref_forward(const struct model *m, const int32_t *tokens, int32_t n, double *logits)
{
    ref_forward_h(m, tokens, n, logits, NULL);
}

/* ---- paged KV arena made by hand ------------------------------------- */

struct arena {
    struct pager_kv_view kv;
    int32_t *perm; /* shuffled block ids; sequence s owns perm[s*per ...] */
    int32_t per_seq;
};

static void arena_init(struct arena *a, const struct model *m, enum folio_dtype dt,
                       int32_t block_size, int32_t n_seqs, int32_t max_len)
{
    struct pager_kv_view *kv = &a->kv;
    a->per_seq = FOLIO_DIV_CEIL(max_len, block_size);
    const struct pager_config pc = {
        .num_blocks = a->per_seq * n_seqs + 3, /* spare blocks nobody uses */
        .block_size = block_size,
        .n_layers = m->hp.n_layers,
        .n_kv_heads = m->hp.n_kv_heads,
        .head_dim = m->hp.head_dim,
        .dtype = dt,
    };
    const size_t bytes = pager_kv_layout(&pc, kv); /* the pager's arena layout */
    assert_true(bytes > 0);
    kv->base = folio_aligned_alloc(64, bytes);
    assert_non_null(kv->base);
    memset(kv->base, 0xff, bytes); /* NaN everywhere: reading an unwritten slot shows */
    a->perm = malloc(sizeof(int32_t) * kv->num_blocks);
    for (int32_t i = 0; i < kv->num_blocks; i++)
        a->perm[i] = i;
    for (int32_t i = kv->num_blocks - 1; i > 0; i--) {
        int32_t j = rnd_range(0, i), t = a->perm[i];
        a->perm[i] = a->perm[j];
        a->perm[j] = t;
    }
}

static const int32_t *arena_table(const struct arena *a, int32_t s)
{
    return a->perm + (size_t)s * a->per_seq;
}

static void arena_free(struct arena *a)
{
    folio_free(a->kv.base);
    free(a->perm);
}

static double max_abs_diff(const float *a, const double *b, int32_t n)
{
    double mx = 0;
    for (int32_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= mx)) /* NaN counts as infinitely wrong */
            mx = isnan(e) ? INFINITY : e;
    }
    return mx;
}

static void random_tokens(int32_t *t, int32_t n, int32_t vocab)
{
    for (int32_t i = 0; i < n; i++)
        t[i] = rnd_range(0, vocab - 1);
}

/* ---- tests ------------------------------------------------------------ */

/* Drives n_seqs sequences of lengths len[] through model_forward with
 * steps of random chunk sizes (chunk 0 = whole prompt at once, 1 = token by
 * token, else random in [1, chunk]), several sequences per batch, and
 * compares every sampled row with the reference: a slice's last row, or
 * (one slice in four: all_logits) every row.  Returns the max error. */
static double run_paged_on(const struct model *m, const struct model *ref_m, enum model_matmul be,
                           enum folio_dtype dt, int32_t block_size, int32_t n_seqs,
                           const int32_t *len, int32_t chunk, int n_threads, int blas_threads)
{
    const int32_t V = m->hp.n_vocab, D = m->hp.dim;
    int32_t max_len = 0, total = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        max_len = FOLIO_MAX(max_len, len[s]);
        total += len[s];
    }
    struct arena a;
    arena_init(&a, m, dt, block_size, n_seqs, max_len);
    int32_t **tok = malloc(sizeof(int32_t *) * n_seqs);
    double **ref = malloc(sizeof(double *) * n_seqs);
    double **ref_h = malloc(sizeof(double *) * n_seqs);
    for (int32_t s = 0; s < n_seqs; s++) {
        tok[s] = malloc(sizeof(int32_t) * len[s]);
        random_tokens(tok[s], len[s], V);
        ref[s] = malloc(sizeof(double) * (size_t)len[s] * V);
        ref_h[s] = malloc(sizeof(double) * (size_t)len[s] * D);
        ref_forward_h(g_n_loras ? g_lora_refs[s % (g_n_loras + 1)] : ref_m, tok[s], len[s], ref[s],
                      ref_h[s]);
    }
    model_ctx_t *ctx;
    struct model_ctx_config cfg = {.max_tokens = total,
                                   .max_slices = n_seqs,
                                   .max_logits = total,
                                   .n_threads = n_threads,
                                   .blas_threads = blas_threads,
                                   .matmul = be,
                                   .batch_invariant = g_inv,
                                   .loras = g_loras,
                                   .n_loras = g_n_loras};
    assert_int_equal(model_ctx_new(m, &a.kv, &cfg, &ctx), 0);
    if (be != MODEL_MATMUL_AUTO)
        assert_int_equal(model_ctx_matmul(ctx), be);
    int32_t *done = calloc(n_seqs, sizeof(int32_t));
    int32_t *btok = malloc(sizeof(int32_t) * total);
    struct model_slice *sl = malloc(sizeof(*sl) * n_seqs);
    int32_t *sl_seq = malloc(sizeof(int32_t) * n_seqs);
    float *logits = malloc(sizeof(float) * (size_t)total * V);
    float *hidden = malloc(sizeof(float) * (size_t)total * D);
    double worst = 0;
    int32_t n_hidden = 0;
    for (;;) {
        struct model_batch b = {.tokens = btok, .slices = sl};
        for (int32_t s = 0; s < n_seqs; s++) {
            if (done[s] == len[s] || (n_seqs > 1 && rnd() % 4 == 0))
                continue; /* finished, or sits this step out */
            int32_t left = len[s] - done[s];
            int32_t c = chunk == 0 ? left : chunk == 1 ? 1 : rnd_range(1, chunk);
            c = FOLIO_MIN(c, left);
            memcpy(btok + b.n_tokens, tok[s] + done[s], sizeof(int32_t) * c);
            sl[b.n_slices] = (struct model_slice){.first_pos = done[s],
                                                  .n_tokens = c,
                                                  .block_table = arena_table(&a, s),
                                                  .sample = rnd() % 8 != 0,
                                                  .all_logits = rnd() % 4 == 0,
                                                  .hidden = rnd() % 3 == 0,
                                                  .lora = s % (g_n_loras + 1)};
            sl_seq[b.n_slices++] = s;
            b.n_tokens += c;
            done[s] += c;
        }
        if (b.n_slices == 0) {
            int all = 1;
            for (int32_t s = 0; s < n_seqs; s++)
                all &= done[s] == len[s];
            if (all)
                break;
            continue;
        }
        assert_int_equal(model_forward_hidden(ctx, &b, logits, hidden), 0);
        /* hidden slices: every token's final hidden state, slice after slice */
        for (int32_t i = 0, h = 0; i < b.n_slices; i++)
            for (int32_t j = 0; sl[i].hidden && j < sl[i].n_tokens; j++, h++, n_hidden++) {
                const double *want = ref_h[sl_seq[i]] + (size_t)(sl[i].first_pos + j) * D;
                worst = FOLIO_MAX(worst, max_abs_diff(hidden + (size_t)h * D, want, D));
            }
        int32_t k = 0;
        for (int32_t i = 0; i < b.n_slices; i++) {
            if (!sl[i].sample && !sl[i].all_logits)
                continue;
            const int32_t s = sl_seq[i], last = sl[i].first_pos + sl[i].n_tokens - 1;
            for (int32_t pos = sl[i].all_logits ? sl[i].first_pos : last; pos <= last; pos++) {
                double e = max_abs_diff(logits + (size_t)k * V, ref[s] + (size_t)pos * V, V);
                worst = FOLIO_MAX(worst, e);
                k++;
            }
        }
    }
    struct model_ctx_stats st;
    model_ctx_stats_get(ctx, &st);
    assert_int_equal(st.attn_ref_layers, 0); /* the fast kernel ran every layer */
    assert_int_equal(st.tokens, (uint64_t)total);
    assert_true(n_hidden <= total);
    model_ctx_free(ctx);
    for (int32_t s = 0; s < n_seqs; s++)
        free(tok[s]), free(ref[s]), free(ref_h[s]);
    free(tok), free(ref), free(ref_h), free(done), free(btok), free(sl), free(sl_seq);
    free(logits), free(hidden);
    arena_free(&a);
    return worst;
}

/* The model m itself is the reference, on the backend auto picks. */
static double run_paged(const struct model *m, enum folio_dtype dt, int32_t block_size,
                        int32_t n_seqs, const int32_t *len, int32_t chunk, int n_threads,
                        int blas_threads)
{
    return run_paged_on(m, m, MODEL_MATMUL_AUTO, dt, block_size, n_seqs, len, chunk, n_threads,
                        blas_threads);
}

static void test_whole_prompt(void **state)
{
    (void)state;
    int32_t len[] = {g_short ? 9 : 24};
    double e = run_paged(g_model, FOLIO_F32, 16, 1, len, 0, 1, 0);
    printf("# whole prompt: max |diff| = %.3g\n", e);
    assert_true(e <= F32_TOL);
}

static void test_random_chunks(void **state)
{
    (void)state;
    int32_t len[] = {g_short ? 11 : 29};
    double e = run_paged(g_model, FOLIO_F32, 5, 1, len, 7, 1, 0);
    printf("# random chunks (block 5): max |diff| = %.3g\n", e);
    assert_true(e <= F32_TOL);
}

static void test_token_by_token(void **state)
{
    (void)state;
    int32_t len[] = {g_short ? 8 : 20};
    double e = run_paged(g_model, FOLIO_F32, 4, 1, len, 1, 1, 0);
    printf("# token by token: max |diff| = %.3g\n", e);
    assert_true(e <= F32_TOL);
}

/* Several sequences of different lengths share each batch (prefill chunks
 * and decodes mixed), on 1 and 2 threads, both sgemm threading schemes. */
static void test_many_sequences(void **state)
{
    (void)state;
    int32_t len_long[] = {17, 3, 26, 9, 1, 12};
    int32_t len_short[] = {7, 3, 10, 1};
    const int32_t *len = g_short ? len_short : len_long;
    int32_t n = g_short ? 4 : 6;
    const struct {
        int threads, blas, chunk;
    } runs[] = {{1, 0, 6}, {2, 0, 5}, {2, 1, 0}, {2, 0, 1}};
    for (size_t r = 0; r < FOLIO_ARRAY_LEN(runs); r++) {
        double e =
            run_paged(g_model, FOLIO_F32, 8, n, len, runs[r].chunk, runs[r].threads, runs[r].blas);
        printf("# %d sequences, %d threads%s, chunk %d: max |diff| = %.3g\n", n, runs[r].threads,
               runs[r].blas ? " (openblas threads)" : "", runs[r].chunk, e);
        assert_true(e <= F32_TOL);
    }
}

/* One sequence token by token on several threads: every step is a single
 * row, whose attention the threads split by KV heads (tiny has 2; with 3
 * threads the kernel's own plan runs instead) and whose products leave the
 * idle workers prefetching the next one; f32 and f16 K/V. */
static void test_single_decode_threads(void **state)
{
    (void)state;
    int32_t len[] = {g_short ? 8 : 20};
    const struct {
        enum folio_dtype dt;
        int threads;
        double tol;
    } runs[] = {{FOLIO_F32, 2, F32_TOL}, {FOLIO_F16, 2, F16_TOL}, {FOLIO_F32, 3, F32_TOL}};
    for (size_t r = 0; r < FOLIO_ARRAY_LEN(runs); r++) {
        double e = run_paged(g_model, runs[r].dt, 16, 1, len, 1, runs[r].threads, 0);
        printf("# one sequence token by token, %s K/V, %d threads: max |diff| = %.3g\n",
               folio_dtype_name(runs[r].dt), runs[r].threads, e);
        assert_true(e <= runs[r].tol);
    }
}

static void test_f16_kv(void **state)
{
    (void)state;
    int32_t len[] = {g_short ? 7 : 19, 5, g_short ? 9 : 14};
    double e = run_paged(g_model, FOLIO_F16, 16, 3, len, 4, 2, 0);
    printf("# f16 K/V: max |diff| = %.3g (bound %.3g)\n", e, F16_TOL);
    assert_true(e <= F16_TOL);
}

/* m's values in an all-F32 model: the reference's view of m. */
static struct model *f32_twin(const struct model *src)
{
    struct model *m;
    assert_int_equal(model__alloc(&src->hp, &m), 0);
    memcpy(m->storage, src->storage, src->storage_bytes); /* norms */
    matmul_mat_rows_f32(&src->tok_embd, 0, src->tok_embd.rows, model__f32(&m->tok_embd));
    matmul_mat_rows_f32(&src->output, 0, src->output.rows, model__f32(&m->output));
    for (int32_t l = 0; l < src->hp.n_layers; l++) {
        const struct model_layer *S = &src->layers[l];
        struct model_layer *L = &m->layers[l];
        float *qkv = model__f32(&L->wqkv), *gu = model__f32(&L->w_gate_up);
        if (S->wqkv.data) {
            matmul_mat_rows_f32(&S->wqkv, 0, S->wqkv.rows, qkv);
        } else { /* Q, K, V of differing types: their rows one after another */
            for (int i = 0; i < 3; i++) {
                matmul_mat_rows_f32(&S->qkv_part[i], 0, S->qkv_part[i].rows, qkv);
                qkv += (size_t)S->qkv_part[i].rows * S->qkv_part[i].cols;
            }
        }
        matmul_mat_rows_f32(&S->wo, 0, S->wo.rows, model__f32(&L->wo));
        if (S->w_gate_up.data) {
            matmul_mat_rows_f32(&S->w_gate_up, 0, S->w_gate_up.rows, gu);
        } else { /* gate and up of differing types */
            matmul_mat_rows_f32(&S->gu_part[0], 0, S->gu_part[0].rows, gu);
            matmul_mat_rows_f32(&S->gu_part[1], 0, S->gu_part[1].rows,
                                gu + (size_t)S->gu_part[0].rows * S->gu_part[0].cols);
        }
        matmul_mat_rows_f32(&S->w_down, 0, S->w_down.rows, model__f32(&L->w_down));
    }
    return m;
}

/* Gate and up of differing types (as a file whose ffn_gate is Q8_0 and
 * ffn_up F16 loads: w_gate_up.data NULL, gu_part[0..1] each in its type)
 * run as two products into the columns of the same rows: the forward
 * matches the dense reference on the same values, on every backend. */
static void test_gate_up_mixed(void **state)
{
    (void)state;
    struct model *q8, *f16;
    assert_int_equal(model__retype(g_model, GGUF_TENSOR_Q8_0, &q8), 0);
    assert_int_equal(model__retype(g_model, GGUF_TENSOR_F16, &f16), 0);
    const int32_t F = g_model->hp.ffn_dim;
    for (int32_t l = 0; l < q8->hp.n_layers; l++) {
        struct model_layer *L = &q8->layers[l];
        const struct matmul_mat *up = &f16->layers[l].w_gate_up;
        L->gu_part[0] = L->w_gate_up;
        L->gu_part[0].rows = F;
        L->gu_part[1] = *up;
        L->gu_part[1].rows = F;
        L->gu_part[1].data = (const char *)up->data + (size_t)F * matmul_mat_row_bytes(up);
        L->w_gate_up.data = NULL;
    }
    struct model *ref = f32_twin(q8);
    enum model_matmul bes[2] = {MODEL_MATMUL_OPENBLAS, MODEL_MATMUL_ONEDNN};
    const int n_be = model_matmul_onednn_built() ? 2 : 1;
    int32_t len[] = {g_short ? 6 : 11, 1, g_short ? 9 : 15};
    for (int b = 0; b < n_be; b++) {
        double e = run_paged_on(q8, ref, bes[b], FOLIO_F32, 8, 3, len, 5, 2, 0);
        printf("# gate Q8_0, up F16, %s: max |diff| = %.3g (bound %.3g)\n",
               model_matmul_name(bes[b]), e, Q8_TOL);
        assert_true(e <= Q8_TOL);
    }
    model_free(ref);
    model_free(q8);
    model_free(f16);
}

/* Paged forward = dense reference for every weight type on every backend
 * built: the reference runs on the typed model's values widened to f32,
 * so the difference is the products' arithmetic alone.  Tolerances: f32
 * arithmetic on the exact weights (F32, portable 16-bit) as F32_TOL;
 * activations rounded to bf16 (oneDNN with 16-bit weights, BF16 on
 * model/gemm_bf16.h's kernel): BF16_ACT_TOL;
 * activations quantized to 8 bits per 32-block before every product
 * (Q8_0): Q8_TOL (seen 0.09 on 2 layers, 0.17 on 8, of logits with sd 2;
 * the error compounds over the layers). */
#define BF16_ACT_TOL 0.15
static void test_types_backends(void **state)
{
    (void)state;
    static const enum gguf_tensor_type types[] = {GGUF_TENSOR_F32, GGUF_TENSOR_F16,
                                                  GGUF_TENSOR_BF16, GGUF_TENSOR_Q8_0};
    enum model_matmul bes[2] = {MODEL_MATMUL_OPENBLAS, MODEL_MATMUL_ONEDNN};
    const int n_be = model_matmul_onednn_built() ? 2 : 1;
    int32_t len[] = {g_short ? 6 : 11, 1, g_short ? 9 : 15, 4};
    for (size_t t = 0; t < FOLIO_ARRAY_LEN(types); t++) {
        struct model *m = g_model;
        if (types[t] != GGUF_TENSOR_F32)
            assert_int_equal(model__retype(g_model, types[t], &m), 0);
        struct model *ref = m == g_model ? g_model : f32_twin(m);
        for (int b = 0; b < n_be; b++) {
            double e = run_paged_on(m, ref, bes[b], FOLIO_F32, 8, 4, len, 5, 2, 0);
            /* BF16 on OpenBLAS runs model/gemm_bf16.h's kernel (bf16
             * activations) where the CPU has AVX512-BF16 */
            const bool exact_w = types[t] == GGUF_TENSOR_F32 ||
                                 (bes[b] == MODEL_MATMUL_OPENBLAS && types[t] != GGUF_TENSOR_Q8_0 &&
                                  !(types[t] == GGUF_TENSOR_BF16 && matmul_bf16_kernel(bes[b])));
            const double tol = exact_w                        ? F32_TOL
                               : types[t] == GGUF_TENSOR_Q8_0 ? Q8_TOL
                                                              : BF16_ACT_TOL;
            printf("# %s weights, %s: max |diff| = %.3g (bound %.3g)\n",
                   gguf_tensor_type_name(types[t]), model_matmul_name(bes[b]), e, tol);
            assert_true(e <= tol);
        }
        if (ref != g_model)
            model_free(ref);
        if (m != g_model)
            model_free(m);
    }
}

/* A bad batch is -EINVAL and touches nothing. */
static void test_invalid_batches(void **state)
{
    (void)state;
    const struct model *m = g_model;
    struct arena a;
    arena_init(&a, m, FOLIO_F32, 4, 2, 8);
    model_ctx_t *ctx;
    struct model_ctx_config cfg = {.max_tokens = 8, .max_slices = 2, .n_threads = 1};
    assert_int_equal(model_ctx_new(m, &a.kv, &cfg, &ctx), 0);
    float *logits = malloc(sizeof(float) * 2 * m->hp.n_vocab);
    int32_t toks[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    struct model_slice sl[3] = {
        {.first_pos = 0, .n_tokens = 4, .block_table = arena_table(&a, 0), .sample = true},
        {.first_pos = 0, .n_tokens = 4, .block_table = arena_table(&a, 1), .sample = true},
    };
    struct model_batch ok = {.n_tokens = 8, .tokens = toks, .n_slices = 2, .slices = sl};
    assert_int_equal(model_forward(ctx, &ok, logits), 0);

    struct model_batch b = ok;
    b.n_tokens = 9; /* beyond max_tokens, and != sum of slices */
    assert_int_equal(model_forward(ctx, &b, logits), -EINVAL);
    b = ok, b.n_tokens = 7;
    assert_int_equal(model_forward(ctx, &b, logits), -EINVAL);
    b = ok, b.n_slices = 3;
    assert_int_equal(model_forward(ctx, &b, logits), -EINVAL);
    assert_int_equal(model_forward(ctx, &ok, NULL), -EINVAL);
    sl[1].block_table = NULL;
    assert_int_equal(model_forward(ctx, &ok, logits), -EINVAL);
    sl[1].block_table = arena_table(&a, 1);
    sl[1].first_pos = m->hp.ctx_len - 3; /* runs past ctx_len */
    assert_int_equal(model_forward(ctx, &ok, logits), -EINVAL);
    sl[1].first_pos = -1;
    assert_int_equal(model_forward(ctx, &ok, logits), -EINVAL);
    sl[1].first_pos = 0;
    int32_t bad_bt[2] = {a.kv.num_blocks, 0};
    sl[1].block_table = bad_bt; /* block id out of the arena */
    assert_int_equal(model_forward(ctx, &ok, logits), -EINVAL);
    bad_bt[0] = -1;
    assert_int_equal(model_forward(ctx, &ok, logits), -EINVAL);
    sl[1].block_table = arena_table(&a, 1);
    toks[2] = m->hp.n_vocab; /* token out of the vocabulary */
    assert_int_equal(model_forward(ctx, &ok, logits), -EINVAL);
    toks[2] = 3;
    assert_int_equal(model_forward(ctx, &ok, logits), 0);
    sl[0].all_logits = true; /* 4 + 1 logit rows; max_logits is max_slices, 2 */
    assert_int_equal(model_forward(ctx, &ok, logits), -EINVAL);
    sl[0].all_logits = false;
    sl[0].hidden = true; /* hidden rows with nowhere to put them */
    assert_int_equal(model_forward(ctx, &ok, logits), -EINVAL);
    float *hidden = malloc(sizeof(float) * 8 * m->hp.dim);
    assert_int_equal(model_forward_hidden(ctx, &ok, logits, hidden), 0);
    free(hidden);
    sl[0].hidden = false;

    /* a ctx whose KV geometry does not match the model */
    struct pager_kv_view bad = a.kv;
    bad.n_layers++;
    model_ctx_t *c2 = NULL;
    assert_int_equal(model_ctx_new(m, &bad, &cfg, &c2), -EINVAL);
    assert_null(c2);
    model_ctx_free(ctx);
    free(logits);
    arena_free(&a);
}

/* Runs tok[0..L) as one sequence in steps of `chunk` tokens (each step's
 * last row sampled) with the ctx gathering activation statistics st. */
static void act_run(const struct model *m, const int32_t *tok, int32_t L, int32_t chunk,
                    struct model_act_stats *st)
{
    struct arena a;
    arena_init(&a, m, FOLIO_F32, 16, 1, L);
    model_ctx_t *ctx;
    const struct model_ctx_config cfg = {
        .max_tokens = L, .max_slices = 1, .n_threads = 2, .act_stats = st};
    assert_int_equal(model_ctx_new(m, &a.kv, &cfg, &ctx), 0);
    float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    for (int32_t p = 0; p < L; p += chunk) {
        const int32_t n = FOLIO_MIN(chunk, L - p);
        struct model_slice sl = {
            .first_pos = p, .n_tokens = n, .block_table = arena_table(&a, 0), .sample = true};
        struct model_batch b = {.n_tokens = n, .tokens = tok + p, .n_slices = 1, .slices = &sl};
        assert_int_equal(model_forward(ctx, &b, logits), 0);
    }
    free(logits);
    model_ctx_free(ctx);
    arena_free(&a);
}

/* Activation statistics (folio imatrix): every layer input counts each
 * token once and the output's input each sampled row; layer 0's attention
 * input is the normed embeddings, whose squares are summed here directly;
 * the sums do not depend on how the prompt was cut into steps. */
static void test_act_stats(void **state)
{
    (void)state;
    const struct model *m = g_model;
    const struct model_hparams *hp = &m->hp;
    enum { L = 24 };
    int32_t tok[L];
    random_tokens(tok, L, hp->n_vocab);
    struct model_act_stats *whole, *steps;
    assert_int_equal(model_act_stats_new(m, &whole), 0);
    assert_int_equal(model_act_stats_new(m, &steps), 0);
    assert_int_equal(whole->n_inputs, hp->n_layers * MODEL_ACT_PER_LAYER + 1);
    act_run(m, tok, L, L, whole);
    act_run(m, tok, L, 5, steps);

    const int32_t D = hp->dim, out = whole->n_inputs - 1;
    assert_int_equal(whole->len[MODEL_ACT_ATTN_IN], D);
    assert_int_equal(whole->len[MODEL_ACT_ATTN_OUT], hp->n_heads * hp->head_dim);
    assert_int_equal(whole->len[MODEL_ACT_FFN_HIDDEN], hp->ffn_dim);
    assert_int_equal(whole->len[out], D);
    for (int32_t i = 0; i < out; i++) {
        assert_int_equal(whole->rows[i], L);
        assert_int_equal(steps->rows[i], L);
    }
    assert_int_equal(whole->rows[out], 1);
    assert_int_equal(steps->rows[out], (L + 4) / 5);

    /* layer 0's attention input: rmsnorm(embedding) * attn_norm, squared */
    double *xe = calloc((size_t)D, sizeof(double)), *xn = calloc((size_t)D, sizeof(double));
    double *want = calloc((size_t)D, sizeof(double));
    for (int32_t t = 0; t < L; t++) {
        for (int32_t k = 0; k < D; k++)
            xe[k] = model__f32(&m->tok_embd)[(size_t)tok[t] * D + k];
        ref_rmsnorm(xn, xe, m->layers[0].attn_norm, D, hp->norm_eps);
        for (int32_t k = 0; k < D; k++)
            want[k] += xn[k] * xn[k];
    }
    double worst = 0, worst_steps = 0;
    for (int32_t k = 0; k < D; k++)
        worst = fmax(worst, fabs(whole->sq[k] - want[k]) / want[k]);
    /* every input, whole against in steps */
    const size_t total = whole->off[out] + (size_t)D;
    for (size_t k = 0; k < whole->off[out]; k++) {
        assert_true(isfinite(whole->sq[k]) && whole->sq[k] >= 0);
        worst_steps = fmax(worst_steps, fabs(whole->sq[k] - steps->sq[k]) / (whole->sq[k] + 1e-9));
    }
    printf("# activation statistics: layer 0 input vs direct %.3g, whole vs steps of 5 %.3g "
           "(relative, %zu columns)\n",
           worst, worst_steps, total);
    assert_true(worst < 1e-5);
    assert_true(worst_steps < 1e-3);
    free(xe), free(xn), free(want);
    model_act_stats_free(whole);
    model_act_stats_free(steps);
}

/* The synthetic model's logits are finite, spread out, and their top two
 * are almost never tied (the greedy path does not hinge on tie-breaking). */
static void test_logits_healthy(void **state)
{
    (void)state;
    const struct model *m = g_model;
    const int32_t V = m->hp.n_vocab, n = g_short ? 8 : 32;
    struct arena a;
    arena_init(&a, m, FOLIO_F32, 16, 1, n);
    model_ctx_t *ctx;
    struct model_ctx_config cfg = {.max_tokens = n, .max_slices = n, .n_threads = 1};
    assert_int_equal(model_ctx_new(m, &a.kv, &cfg, &ctx), 0);
    int32_t *tok = malloc(sizeof(int32_t) * n);
    random_tokens(tok, n, V);
    float *logits = malloc(sizeof(float) * V);
    int ties = 0;
    double min_sd = INFINITY, max_sd = 0;
    for (int32_t p = 0; p < n; p++) {
        struct model_slice sl = {
            .first_pos = p, .n_tokens = 1, .block_table = arena_table(&a, 0), .sample = true};
        struct model_batch b = {.n_tokens = 1, .tokens = tok + p, .n_slices = 1, .slices = &sl};
        assert_int_equal(model_forward(ctx, &b, logits), 0);
        double s = 0, s2 = 0;
        float t1 = -INFINITY, t2 = -INFINITY;
        for (int32_t i = 0; i < V; i++) {
            assert_true(isfinite(logits[i]));
            s += logits[i], s2 += (double)logits[i] * logits[i];
            if (logits[i] > t1)
                t2 = t1, t1 = logits[i];
            else if (logits[i] > t2)
                t2 = logits[i];
        }
        double sd = sqrt(s2 / V - (s / V) * (s / V));
        min_sd = fmin(min_sd, sd), max_sd = fmax(max_sd, sd);
        ties += t1 - t2 < 1e-4f;
    }
    printf("# logits: sd in [%.3g, %.3g], top-2 ties %d of %d\n", min_sd, max_sd, ties, n);
    assert_true(min_sd > 0.5 && max_sd < 20);
    assert_true(ties <= 1);
    model_ctx_free(ctx);
    free(tok), free(logits);
    arena_free(&a);
}

/* The generator is byte-for-byte reproducible: a fixed small model hashes
 * to the value recorded when it was written (any machine, any compiler). */
static void test_fill_random_fixed(void **state)
{
    (void)state;
    struct model_hparams hp;
    assert_int_equal(model_preset("tiny", &hp), 0);
    hp.n_layers = 1, hp.n_vocab = 64, hp.dim = 64, hp.n_heads = 4, hp.n_kv_heads = 2;
    hp.head_dim = 16, hp.ffn_dim = 96;
    struct model *m;
    assert_int_equal(model__alloc(&hp, &m), 0);
    model__fill_random(m, 7);
    uint64_t h = 0xcbf29ce484222325ull;
    const unsigned char *p = m->storage;
    for (size_t i = 0; i < m->storage_bytes; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    printf("# fill_random hash %016llx\n", (unsigned long long)h);
    assert_true(h == 0x36d0c74e213af450ull);
    /* and a different seed gives different weights */
    model__fill_random(m, 8);
    uint64_t h2 = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < m->storage_bytes; i++)
        h2 = (h2 ^ p[i]) * 0x100000001b3ull;
    assert_true(h2 != h);
    model_free(m);

    model_t *def;
    char err[128];
    assert_int_equal(model_load_default(&def, err, sizeof(err)), 0);
    assert_string_equal(model_name(def), "folio-tiny-default");
    assert_int_equal(model_hparams(def)->dim, 512);
    assert_int_equal(model_hparams(def)->head_dim, 64);
    model_free(def);
    assert_int_equal(model_preset("huge", &hp), -EINVAL);
}

/* ---- thread pool ------------------------------------------------------ */

struct pool_probe {
    int nth_seen;
    long calls[8]; /* per ith; each written only by its own thread */
    long round;
    long sums[8];
};

static void probe_fn(void *arg, int ith, int nth)
{
    struct pool_probe *p = arg;
    p->nth_seen = nth;
    p->calls[ith]++;
    p->sums[ith] += p->round; /* sees the caller's writes before the dispatch */
}

/* Every dispatch runs fn exactly once per thread index, sees the state the
 * caller wrote before it, and is complete when pool_run returns; workers
 * that went to sleep (after a pause longer than the spin) wake up. */
static void test_pool(void **state)
{
    (void)state;
    for (int n = 1; n <= 4; n++) {
        pool_t *pool;
        assert_int_equal(pool_new(n, &pool), 0);
        assert_int_equal(pool_size(pool), n);
        struct pool_probe p = {0};
        uint64_t t0 = folio_now_ns();
        const long rounds = g_short ? 2000 : 10000;
        long want = 0;
        for (p.round = 1; p.round <= rounds; p.round++) {
            pool_run(pool, probe_fn, &p);
            want += p.round;
            if (p.round % 500 == 0) {
                for (int i = 0; i < n; i++) /* complete on return */
                    assert_int_equal(p.calls[i], p.round);
                struct timespec ts = {0, 200000}; /* let the workers fall asleep */
                nanosleep(&ts, NULL);
            }
        }
        printf("# pool of %d: %ld dispatches in %.1f ms (with %ld pauses of 0.2 ms)\n", n, rounds,
               (folio_now_ns() - t0) * 1e-6, rounds / 500);
        assert_int_equal(p.nth_seen, n);
        for (int i = 0; i < n; i++) {
            assert_int_equal(p.calls[i], rounds);
            assert_true(p.sums[i] == want);
        }
        struct pool_stats ps; /* every dispatch counted; workers' times only with workers */
        pool_stats_get(pool, &ps);
        assert_true(ps.runs == (uint64_t)rounds);
        assert_true(n > 1 ? ps.work_ns > 0 && ps.late_ns > 0 : ps.work_ns == 0 && ps.late_ns == 0);
        pool_free(pool);
    }
    pool_t *bad;
    assert_int_equal(pool_new(0, &bad), -EINVAL);
    pool_free(NULL);
}

/* Every allocation of model__alloc and model_ctx_new may fail: the call
 * returns -ENOMEM, leaves *out NULL and leaks nothing (ASan checks). */
static void test_alloc_failures(void **state)
{
    (void)state;
    struct model_hparams hp;
    assert_int_equal(model_preset("tiny", &hp), 0);
    hp.n_layers = 1, hp.n_vocab = 64;
    int rc;
    long n = 1;
    do {
        struct model *m = (struct model *)1;
        folio_alloc_fail_at(n++);
        rc = model__alloc(&hp, &m);
        folio_alloc_fail_at(0);
        if (rc == 0) {
            model_free(m);
            break;
        }
        assert_int_equal(rc, -ENOMEM);
        assert_null(m);
    } while (n < 100);
    assert_int_equal(rc, 0);

    struct arena a;
    arena_init(&a, g_model, FOLIO_F16, 16, 2, 64);
    struct model_ctx_config cfg = {.max_tokens = 64, .max_slices = 4, .n_threads = 2};
    n = 1;
    do {
        model_ctx_t *ctx = (model_ctx_t *)1;
        folio_alloc_fail_at(n++);
        rc = model_ctx_new(g_model, &a.kv, &cfg, &ctx);
        folio_alloc_fail_at(0);
        if (rc == 0) {
            model_ctx_free(ctx);
            break;
        }
        assert_int_equal(rc, -ENOMEM);
        assert_null(ctx);
    } while (n < 1000);
    assert_int_equal(rc, 0);
    printf("# model_ctx_new: %ld allocations, each failure handled\n", n - 2);
    arena_free(&a);
}

/* ---- with the real pager --------------------------------------------- */

/* Runs one step over the given sequences (tokens[i][0..n[i]) appended to
 * seqs[i] first) and checks each slice's logits against ref rows. */
static void pager_step(pager_t *pg, model_ctx_t *ctx, pager_seq_t **seqs, int ns,
                       const int32_t *const *tokens, const int32_t *n, const double *const *ref,
                       double *worst)
{
    const int32_t V = g_model->hp.n_vocab;
    int32_t btok[64], total = 0;
    struct model_slice sl[4];
    int32_t first[4];
    for (int i = 0; i < ns; i++) {
        first[i] = pager_seq_len(seqs[i]);
        assert_int_equal(pager_seq_append(pg, seqs[i], tokens[i], n[i]), 0);
        assert_int_equal(pager_check(pg, NULL, 0), 0);
    }
    for (int i = 0; i < ns; i++) { /* tables are final once every append is done */
        int32_t nb;
        sl[i] = (struct model_slice){.first_pos = first[i],
                                     .n_tokens = n[i],
                                     .block_table = pager_seq_block_table(seqs[i], &nb),
                                     .sample = true};
        memcpy(btok + total, tokens[i], sizeof(int32_t) * n[i]);
        total += n[i];
    }
    float *logits = malloc(sizeof(float) * ns * V);
    struct model_batch b = {.n_tokens = total, .tokens = btok, .n_slices = ns, .slices = sl};
    assert_int_equal(model_forward(ctx, &b, logits), 0);
    for (int i = 0; i < ns; i++) {
        int32_t last = first[i] + n[i] - 1;
        *worst =
            FOLIO_MAX(*worst, max_abs_diff(logits + (size_t)i * V, ref[i] + (size_t)last * V, V));
        pager_seq_mark_computed(pg, seqs[i], first[i] + n[i]);
        assert_int_equal(pager_check(pg, NULL, 0), 0);
    }
    free(logits);
}

/* The forward over the pager's own page tables: a prompt, then a fork whose
 * two children decode different tokens in one batch (copy-on-write of the
 * shared partial block), and a third sequence that adopts the prompt's
 * cached full blocks and computes only the rest.  Every row matches the
 * dense reference of its whole token sequence. */
static void test_pager_fork_and_prefix(void **state)
{
    (void)state;
    const struct model *m = g_model;
    enum { P = 20 };
    const int32_t V = m->hp.n_vocab;
    struct pager_config pc = {.num_blocks = 32,
                              .block_size = 8,
                              .n_layers = m->hp.n_layers,
                              .n_kv_heads = m->hp.n_kv_heads,
                              .head_dim = m->hp.head_dim,
                              .dtype = FOLIO_F32};
    pager_t *pg;
    assert_int_equal(pager_init(&pg, &pc), 0);
    struct pager_kv_view kv;
    pager_kv_view(pg, &kv);
    model_ctx_t *ctx;
    struct model_ctx_config cfg = {.max_tokens = 64, .max_slices = 4, .n_threads = 2};
    assert_int_equal(model_ctx_new(m, &kv, &cfg, &ctx), 0);

    int32_t ta[P + 2], tb[P + 1], tc[P + 1];
    random_tokens(ta, P + 2, V);
    memcpy(tb, ta, sizeof(int32_t) * P);
    memcpy(tc, ta, sizeof(int32_t) * P);
    tb[P] = (ta[P] + 1) % V;
    tc[P] = (ta[P] + 2) % V;
    double *ra = malloc(sizeof(double) * (P + 2) * V), *rb = malloc(sizeof(double) * (P + 1) * V);
    double *rc = malloc(sizeof(double) * (P + 1) * V);
    ref_forward(m, ta, P + 2, ra);
    ref_forward(m, tb, P + 1, rb);
    ref_forward(m, tc, P + 1, rc);
    double worst = 0;

    pager_seq_t *a, *b, *c;
    assert_int_equal(pager_seq_new(pg, 7, 1, 0, &a), 0);
    {
        const int32_t *tk[] = {ta};
        const int32_t n[] = {P};
        const double *r[] = {ra};
        pager_step(pg, ctx, &a, 1, tk, n, r, &worst);
    }
    assert_int_equal(pager_seq_fork(pg, a, 2, 0, &b), 0);
    {
        pager_seq_t *ss[] = {a, b};
        const int32_t *tk[] = {ta + P, tb + P};
        const int32_t n[] = {1, 1};
        const double *r[] = {ra, rb};
        pager_step(pg, ctx, ss, 2, tk, n, r, &worst);
    }
    struct pager_stats st;
    pager_stats_get(pg, &st);
    assert_true(st.cow_copies >= 1);
    assert_int_equal(pager_seq_new(pg, 7, 3, 0, &c), 0);
    int32_t hit = 0;
    assert_int_equal(pager_seq_adopt_prefix(pg, c, tc, P + 1, &hit), 0);
    assert_int_equal(hit, 16); /* the prompt's two full blocks */
    {
        pager_seq_t *ss[] = {c, a};
        const int32_t *tk[] = {tc + hit, ta + P + 1};
        const int32_t n[] = {P + 1 - hit, 1};
        const double *r[] = {rc, ra};
        pager_step(pg, ctx, ss, 2, tk, n, r, &worst);
    }
    printf("# pager: fork + copy-on-write + prefix hit: max |diff| = %.3g\n", worst);
    assert_true(worst <= F32_TOL);
    pager_seq_free(pg, a);
    pager_seq_free(pg, b);
    pager_seq_free(pg, c);
    assert_int_equal(pager_check(pg, NULL, 0), 0);
    model_ctx_free(ctx);
    pager_free(pg);
    free(ra), free(rb), free(rc);
}

/* The other architectures and RoPE/attention variants against the
 * reference: qwen2 (Q/K/V biases, NeoX RoPE, tied output), qwen3 (Q/K head
 * norms, NeoX), linear, YaRN and llama3 RoPE scaling, per-dimension
 * frequency divisors (rope_freqs.weight), a sliding window shorter
 * than the prompts (block 8, so whole blocks fall out of it); random
 * chunks, several sequences per batch, 2 threads; and again with
 * batch_invariant (the rowdot products, unsplit attention).  Short runs
 * (FOLIO_TEST_SHORT) take the batch-invariant pass on one variant of each
 * architecture, both windows among them (inv below): that pass differs
 * from the first in its products and attention split, which do not depend
 * on the RoPE variant, and in the sanitizer build (-O0) its plain row-dot
 * products made this test 72 s of test_forward_plain's 89.  Short runs on
 * the plain kernels take only those variants: the architectures' own code
 * (biases, head norms, RoPE, windows) is the same whatever the products'
 * ISA, and the default short run has every variant (39 s of the
 * sanitizers' test_forward_plain's 56 before). */
static void test_archs(void **state)
{
    (void)state;
    static const struct {
        const char *what;
        int32_t arch, scaling, swa;
        float factor;
        int32_t orig;
        bool inv; /* batch-invariant pass in short runs too */
    } v[] = {
        {"qwen2", MODEL_ARCH_QWEN2, 0, 0, 0, 0, false},
        {"qwen3", MODEL_ARCH_QWEN3, 0, 0, 0, 0, false},
        {"llama, linear rope x4", MODEL_ARCH_LLAMA, MODEL_ROPE_LINEAR, 0, 4, 0, false},
        {"qwen2, yarn x4 over 64", MODEL_ARCH_QWEN2, MODEL_ROPE_YARN, 0, 4, 64, true},
        {"llama, window 13", MODEL_ARCH_LLAMA, 0, 13, 0, 0, true},
        {"qwen3, window 24", MODEL_ARCH_QWEN3, 0, 24, 0, 0, true},
        {"llama, llama3 rope x8 over 16", MODEL_ARCH_LLAMA, MODEL_ROPE_LLAMA3, 0, 8, 16, false},
        {"qwen2, rope_freqs tensor", MODEL_ARCH_QWEN2, 0, 0, 0, -1, false},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(v); i++) {
        if (g_short_plain && !v[i].inv)
            continue;
        struct model_hparams hp;
        assert_int_equal(model_preset("tiny", &hp), 0);
        hp.n_layers = 2, hp.n_vocab = 4096;
        hp.arch = v[i].arch;
        hp.rope_neox = v[i].arch != MODEL_ARCH_LLAMA;
        hp.rope_scaling = v[i].scaling;
        hp.rope_factor = v[i].factor;
        hp.rope_orig_ctx = v[i].orig > 0 ? v[i].orig : 0;
        hp.yarn_attn = 1, hp.yarn_beta_fast = 32, hp.yarn_beta_slow = 1;
        hp.rope_low_freq = 1, hp.rope_high_freq = 4;
        hp.n_swa = v[i].swa;
        struct model *m;
        assert_int_equal(model__alloc(&hp, &m), 0);
        if (v[i].arch == MODEL_ARCH_QWEN2)
            model__tie_output(m);
        model__fill_random(m, 77);
        float freqs[512];
        if (v[i].orig < 0) { /* a file's own divisors, between 1 and 40 */
            assert_true(hp.head_dim / 2 <= 512);
            for (int32_t k = 0; k < hp.head_dim / 2; k++)
                freqs[k] = 1.0f + (float)(rnd() % 3900) / 100.0f;
            m->rope_freqs = freqs;
        }
        int32_t len[] = {g_short ? 30 : 45, 17, 33};
        double e = run_paged_on(m, m, MODEL_MATMUL_AUTO, FOLIO_F32, 8, 3, len, 5, 2, 0);
        double ei = 0;
        const bool inv = !g_short || v[i].inv;
        if (inv) {
            g_inv = true;
            ei = run_paged_on(m, m, MODEL_MATMUL_AUTO, FOLIO_F32, 8, 3, len, 5, 2, 0);
            g_inv = false;
            printf("# %s: max |diff| = %.3g (batch invariant %.3g)\n", v[i].what, e, ei);
        } else {
            printf("# %s: max |diff| = %.3g (batch invariant: not in short runs)\n", v[i].what, e);
        }
        if (!(e < F32_TOL) || !(ei < F32_TOL))
            fail_msg("%s: paged vs reference %g / %g", v[i].what, e, ei);
        model_free(m);
    }
}

/* Index of the largest logit (ties to the lower id) and the gap to the
 * second largest. */
static int32_t argmax_gap(const float *l, int32_t n, double *gap)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (l[i] > l[best])
            best = i;
    double second = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (i != best && l[i] > second)
            second = l[i];
    *gap = l[best] - second;
    return best;
}

/* A sequence adopting the first P + 1 tokens' cached blocks (released
 * by the window from the tables that computed them, still cached) computes
 * the rest; its last logits match the dense reference. */
static void window_prefix_hit(pager_t *pg, model_ctx_t *ctx, const struct model *m,
                              const int32_t *tok, int32_t P, int32_t want_hit)
{
    const int32_t V = m->hp.n_vocab;
    pager_seq_t *c;
    assert_int_equal(pager_seq_new(pg, 5, 3, 0, &c), 0);
    int32_t hit = 0;
    assert_int_equal(pager_seq_adopt_prefix(pg, c, tok, P + 1, &hit), 0);
    assert_int_equal(hit, want_hit);
    assert_int_equal(pager_seq_append(pg, c, tok + hit, P + 1 - hit), 0);
    struct model_slice sl = {.first_pos = hit,
                             .n_tokens = P + 1 - hit,
                             .block_table = pager_seq_block_table(c, NULL),
                             .sample = true};
    struct model_batch b = {
        .n_tokens = P + 1 - hit, .tokens = tok + hit, .n_slices = 1, .slices = &sl};
    float *logits = malloc(sizeof(float) * V);
    double *ref = malloc(sizeof(double) * (P + 1) * V);
    assert_int_equal(model_forward(ctx, &b, logits), 0);
    ref_forward(m, tok, P + 1, ref);
    double e = max_abs_diff(logits, ref + (size_t)P * V, V);
    printf("# window: prefix hit of %d tokens the window had released: |diff| = %.3g\n", hit, e);
    assert_true(e <= F32_TOL);
    pager_seq_free(pg, c);
    free(logits);
    free(ref);
}

/* Sliding window through the real pager: a windowed model (window 12,
 * blocks of 4) decodes two sequences that share a prompt (a fork) far past
 * the window, token by token in one batch; midway a third sequence adopts
 * the prompt's cached blocks (window_prefix_hit).  The pager releases the blocks that left the
 * window: each table holds at most pager_window_blocks(1) blocks after
 * every step, the pool (16 blocks; the dense run needs 46, 30 with
 * FOLIO_TEST_SHORT) never has more
 * in use than the tables hold, and
 * every logit matches the dense reference of the whole sequence (greedy
 * tokens identical except at a near-tie). */
static void test_window_frees_pages(void **state)
{
    (void)state;
    enum { W = 12, BS = 4, P = 10, MAX_LEN = 96 };
    const int32_t LEN = g_short ? 64 : MAX_LEN; /* both far past the window */
    struct model_hparams hp;
    assert_int_equal(model_preset("tiny", &hp), 0);
    hp.n_layers = 2, hp.n_vocab = 4096, hp.n_swa = W;
    struct model *m;
    assert_int_equal(model__alloc(&hp, &m), 0);
    model__fill_random(m, 4242);
    const int32_t V = hp.n_vocab;
    struct pager_config pc = {.num_blocks = 16,
                              .block_size = BS,
                              .n_layers = hp.n_layers,
                              .n_kv_heads = hp.n_kv_heads,
                              .head_dim = hp.head_dim,
                              .dtype = FOLIO_F32,
                              .window = W};
    pager_t *pg;
    assert_int_equal(pager_init(&pg, &pc), 0);
    struct pager_kv_view kv;
    pager_kv_view(pg, &kv);
    model_ctx_t *ctx;
    struct model_ctx_config cfg = {.max_tokens = 64, .max_slices = 4, .n_threads = 2};
    assert_int_equal(model_ctx_new(m, &kv, &cfg, &ctx), 0);
    const int32_t bound = pager_window_blocks(pg, 1);
    assert_int_equal(bound, 4); /* positions [c - 11, c + 1): 12 keys in at most 4 blocks */

    static int32_t tok[2][MAX_LEN];
    static float got[2][MAX_LEN][4096];
    assert_true(V <= 4096);
    random_tokens(tok[0], P, V);
    memcpy(tok[1], tok[0], sizeof(int32_t) * P);
    pager_seq_t *sq[2];
    assert_int_equal(pager_seq_new(pg, 5, 1, 0, &sq[0]), 0);
    float *logits = malloc(sizeof(float) * 2 * V);
    struct model_slice sl[2];
    /* the prompt, then the fork */
    assert_int_equal(pager_seq_append(pg, sq[0], tok[0], P), 0);
    sl[0] = (struct model_slice){.first_pos = 0,
                                 .n_tokens = P,
                                 .block_table = pager_seq_block_table(sq[0], NULL),
                                 .sample = true};
    struct model_batch b = {.n_tokens = P, .tokens = tok[0], .n_slices = 1, .slices = sl};
    assert_int_equal(model_forward(ctx, &b, logits), 0);
    pager_seq_mark_computed(pg, sq[0], P);
    assert_int_equal(pager_seq_fork(pg, sq[0], 2, 0, &sq[1]), 0);
    double gap;
    memcpy(got[0][P - 1], logits, sizeof(float) * V);
    memcpy(got[1][P - 1], logits, sizeof(float) * V);
    tok[0][P] = argmax_gap(logits, V, &gap);
    tok[1][P] = (tok[0][P] + 1) % V; /* the fork takes another token */
    int32_t most_held = 0, most_used = 0;
    for (int32_t t = P; t + 1 < LEN; t++) {
        int32_t bt[2];
        for (int i = 0; i < 2; i++) {
            assert_int_equal(pager_seq_append(pg, sq[i], &tok[i][t], 1), 0);
            sl[i] = (struct model_slice){
                .first_pos = t, .n_tokens = 1, .block_table = NULL, .sample = true};
            bt[i] = tok[i][t];
        }
        for (int i = 0; i < 2; i++)
            sl[i].block_table = pager_seq_block_table(sq[i], NULL);
        b = (struct model_batch){.n_tokens = 2, .tokens = bt, .n_slices = 2, .slices = sl};
        assert_int_equal(model_forward(ctx, &b, logits), 0);
        for (int i = 0; i < 2; i++) {
            pager_seq_mark_computed(pg, sq[i], t + 1);
            memcpy(got[i][t], logits + (size_t)i * V, sizeof(float) * V);
            tok[i][t + 1] = argmax_gap(logits + (size_t)i * V, V, &gap);
            most_held = FOLIO_MAX(most_held, pager_seq_blocks_held(sq[i]));
        }
        char msg[256];
        if (pager_check(pg, msg, sizeof msg))
            fail_msg("step %d: %s", t, msg);
        struct pager_stats st;
        pager_stats_get(pg, &st);
        most_used = FOLIO_MAX(most_used, (int32_t)st.blocks_used);
        assert_true(st.blocks_used <= st.blocks_held);
        if (t == 24) /* blocks 0 and 1 left both windows; the pool is not full yet */
            window_prefix_hit(pg, ctx, m, tok[0], P, 8);
    }
    struct pager_stats st;
    pager_stats_get(pg, &st);
    printf("# window %d, blocks of %d: %d tokens per sequence, at most %d blocks held by one "
           "(bound %d), %d in use (dense: %d each); %lld released\n",
           W, BS, LEN, most_held, bound, most_used, LEN / BS, (long long)st.window_frees);
    assert_true(most_held <= bound);
    assert_true(most_used <= 2 * bound);
    assert_true(st.window_frees >= 2 * (LEN - W) / BS - 2);

    /* the dense reference of each whole sequence */
    double *ref = malloc(sizeof(double) * LEN * V);
    double worst = 0;
    int compared = 0, ties = 0;
    for (int i = 0; i < 2; i++) {
        ref_forward(m, tok[i], LEN, ref);
        for (int32_t t = P - 1; t + 1 < LEN; t++) {
            const double *r = ref + (size_t)t * V;
            worst = FOLIO_MAX(worst, max_abs_diff(got[i][t], r, V));
            if (i == 1 && t == P - 1)
                continue; /* the fork's chosen token */
            int32_t best = 0;
            for (int32_t k = 1; k < V; k++)
                if (r[k] > r[best])
                    best = k;
            argmax_gap(got[i][t], V, &gap);
            compared++;
            if (best != tok[i][t + 1]) {
                if (gap > 1e-3)
                    fail_msg("seq %d position %d: token %d, reference %d (gap %g)", i, t,
                             tok[i][t + 1], best, gap);
                ties++;
            }
        }
    }
    printf("# window: %d greedy tokens compared (%d near-ties), max |diff| = %.3g\n", compared,
           ties, worst);
    assert_true(worst <= F32_TOL);

    for (int i = 0; i < 2; i++)
        pager_seq_free(pg, sq[i]);
    assert_int_equal(pager_check(pg, NULL, 0), 0);
    free(ref);
    free(logits);
    model_ctx_free(ctx);
    pager_free(pg);
    model_free(m);
}

static int setup(void **state)
{
    (void)state;
    const char *s = getenv("FOLIO_TEST_SHORT");
    g_short = s && *s && strcmp(s, "0");
    const char *isa = getenv("FOLIO_MATMUL_ISA");
    g_short_plain = g_short && isa && !strcmp(isa, "plain");
    struct model_hparams hp;
    assert_int_equal(model_preset("tiny", &hp), 0);
    if (g_short)
        hp.n_layers = 2, hp.n_vocab = 4096;
    assert_int_equal(model__alloc(&hp, &g_model), 0);
    model__fill_random(g_model, 1234);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    model_free(g_model);
    return 0;
}

/* The vectorised SwiGLUs against the plain loop: the same bits for every
 * length (the tail), values across exp's whole range and its clamp, zeros,
 * infinities and NaN; model__swiglu (the one this run picks), the generic
 * lanes, and each x86 ISA's where this CPU has it. */
static void test_swiglu_lanes(void **state)
{
    (void)state;
    enum { N = 4099 };
    static float g[N], u[N], g_ref[N];
    void (*fns[4])(float *restrict, const float *restrict, int32_t) = {model__swiglu,
                                                                       model__swiglu_generic};
    int n_fns = 2;
#ifdef FOLIO_SWIGLU_X86
    if (__builtin_cpu_supports("avx2"))
        fns[n_fns++] = model__swiglu_avx2;
    if (__builtin_cpu_supports("avx512f"))
        fns[n_fns++] = model__swiglu_avx512;
#endif
    uint64_t rng = 0x5eed;
    for (int round = 0; round < 16 * n_fns; round++) {
        const int sc = round % 4;
        for (int i = 0; i < N; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            float a = (float)((double)(rng >> 11) * 0x1.0p-53);
            float scale = sc == 0 ? 8.0f : sc == 1 ? 40.0f : sc == 2 ? 200.0f : 1e-3f;
            g[i] = (2.0f * a - 1.0f) * scale;
            u[i] = (1.0f - 2.0f * a) * 3.0f + 0.25f;
        }
        const float special[] = {0.0f,  -0.0f,  87.0f,    -87.0f,    88.5f, -88.5f,
                                 1e30f, -1e30f, INFINITY, -INFINITY, NAN,   1e-40f};
        for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
            g[i * 7 + (size_t)(round % 16)] = special[i];
        memcpy(g_ref, g, sizeof(g));
        /* function round / 16 on 4099 - 3k values, k = round % 16: every
         * tail length mod 16, each scale four times */
        const int f = round / 16;
        int32_t n = N - (round % 16) * 3;
        fns[f](g, u, n);
        model__swiglu_ref(g_ref, u, n);
        for (int32_t i = 0; i < n; i++)
            if (memcmp(&g[i], &g_ref[i], sizeof(float)) && !(isnan(g[i]) && isnan(g_ref[i])))
                fail_msg("round %d (function %d), i %d: %a vs %a", round, f, i, (double)g[i],
                         (double)g_ref[i]);
    }
}

/* ---- LoRA adapters ---------------------------------------------------- */

/* m (all F32) with the adapter file at path merged into its matrices,
 * W += s·B·A with s = scale · alpha / r (scale without alpha), read from
 * the file here (not through model/lora.c) and summed in double. */
static struct model *lora_merged(const struct model *m, const char *path, float scale)
{
    struct model *o = f32_twin(m);
    gguf_file_t *f;
    char err[256];
    assert_int_equal(gguf_open(path, &f, err, sizeof(err)), 0);
    float alpha = 0;
    int64_t ka = gguf_find_key(f, "adapter.lora.alpha");
    if (ka >= 0)
        assert_int_equal(gguf_get_f32(f, ka, &alpha), 0);
    const struct model_hparams *hp = &m->hp;
    const int32_t D = hp->dim, F = hp->ffn_dim, nq = hp->n_heads * hp->head_dim,
                  nkv = hp->n_kv_heads * hp->head_dim;
    static const char *const names[7] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                         "ffn_gate", "ffn_up", "ffn_down"};
    for (int32_t l = 0; l < hp->n_layers; l++) {
        struct model_layer *L = &o->layers[l];
        /* each target's rows in o: W (row length in), first row */
        float *W[7] = {model__f32(&L->wqkv),
                       model__f32(&L->wqkv) + (size_t)nq * D,
                       model__f32(&L->wqkv) + (size_t)(nq + nkv) * D,
                       model__f32(&L->wo),
                       model__f32(&L->w_gate_up),
                       model__f32(&L->w_gate_up) + (size_t)F * D,
                       model__f32(&L->w_down)};
        const int32_t in[7] = {D, D, D, nq, D, D, F}, out[7] = {nq, nkv, nkv, D, F, F, D};
        for (int t = 0; t < 7; t++) {
            char na[96], nb[96];
            snprintf(na, sizeof(na), "blk.%d.%s.weight.lora_a", (int)l, names[t]);
            snprintf(nb, sizeof(nb), "blk.%d.%s.weight.lora_b", (int)l, names[t]);
            int64_t ia = gguf_find_tensor(f, na), ib = gguf_find_tensor(f, nb);
            assert_true((ia < 0) == (ib < 0));
            if (ia < 0)
                continue;
            struct gguf_tensor_info A, B;
            gguf_tensor_get(f, ia, &A);
            gguf_tensor_get(f, ib, &B);
            const int32_t r = (int32_t)A.ne[1];
            assert_int_equal(A.ne[0], in[t]);
            assert_int_equal(B.ne[0], r);
            assert_int_equal(B.ne[1], out[t]);
            float *a = malloc(sizeof(float) * (size_t)r * in[t]);
            float *b = malloc(sizeof(float) * (size_t)r * out[t]);
            assert_int_equal(gguf_tensor_to_f32(A.type, A.data, a, (int64_t)r * in[t]), 0);
            assert_int_equal(gguf_tensor_to_f32(B.type, B.data, b, (int64_t)r * out[t]), 0);
            const double sc = alpha != 0 ? (double)scale * alpha / r : (double)scale;
            for (int32_t row = 0; row < out[t]; row++)
                for (int32_t i = 0; i < in[t]; i++) {
                    double acc = 0;
                    for (int32_t j = 0; j < r; j++)
                        acc += (double)b[(size_t)row * r + j] * a[(size_t)j * in[t] + i];
                    W[t][(size_t)row * in[t] + i] += (float)(sc * acc);
                }
            free(a), free(b);
        }
    }
    gguf_close(f);
    return o;
}

/* Sequences on the base model and on two adapters (one of every matrix,
 * alpha 16, rank 8, F32; one of Q, V and down only, no alpha, rank 4,
 * F16, loaded at scale 0.5) share batches: each one's logits and hidden
 * states match the dense reference of the base with its adapter merged
 * in; and the adapters do change the logits. */
static void test_lora(void **state)
{
    (void)state;
    /* tiny's shapes, 2 layers and 4096 tokens in every mode: what is tested
     * is per layer and per row, and the dense reference of a full tiny
     * took most of this test's time (CI) */
    struct model_hparams hp = g_model->hp;
    hp.n_layers = 2, hp.n_vocab = 4096;
    struct model *base;
    assert_int_equal(model__alloc(&hp, &base), 0);
    model__fill_random(base, 4321);
    char dir[] = "/tmp/folio-lora.XXXXXX", p1[64], p2[64], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(p1, sizeof(p1), "%s/a1.gguf", dir);
    snprintf(p2, sizeof(p2), "%s/a2.gguf", dir);
    struct model_lora_gen_opts o1 = {.seed = 7, .rank = 8, .alpha = 16, .dtype = "f32"};
    struct model_lora_gen_opts o2 = {.seed = 8, .rank = 4, .dtype = "f16"};
    assert_int_equal(model_lora_targets_parse("q,v,ffn_down", &o2.targets), 0);
    assert_int_equal(model_lora_gen_file(base, &o1, p1, err, sizeof(err)), 0);
    assert_int_equal(model_lora_gen_file(base, &o2, p2, err, sizeof(err)), 0);
    model_lora_t *a1, *a2;
    assert_int_equal(model_lora_load(base, p1, 1.0f, &a1, err, sizeof(err)), 0);
    assert_int_equal(model_lora_load(base, p2, 0.5f, &a2, err, sizeof(err)), 0);
    struct model_lora_info i1, i2;
    model_lora_info(a1, &i1);
    model_lora_info(a2, &i2);
    assert_int_equal(i1.n_mats, 7 * base->hp.n_layers);
    assert_int_equal(i2.n_mats, 3 * base->hp.n_layers);
    assert_int_equal(i1.rank, 8);
    assert_int_equal(i2.rank, 4);

    struct model *r1 = lora_merged(base, p1, 1.0f), *r2 = lora_merged(base, p2, 0.5f);
    /* the adapters matter: merged logits differ from the base's */
    enum { P = 6 };
    const int32_t V = base->hp.n_vocab;
    int32_t tok[P] = {5, 17, 300, 41, 9, 77};
    double *l0 = malloc(sizeof(double) * P * V), *l1 = malloc(sizeof(double) * P * V);
    ref_forward(base, tok, P, l0);
    for (int k = 0; k < 2; k++) {
        ref_forward(k ? r2 : r1, tok, P, l1);
        double d = 0;
        for (int32_t i = 0; i < P * V; i++)
            d = FOLIO_MAX(d, fabs(l1[i] - l0[i]));
        printf("# adapter %d moves the logits by up to %.3g\n", k + 1, d);
        assert_true(d > 0.05);
    }
    free(l0), free(l1);

    g_n_loras = 2;
    g_loras[0] = a1, g_loras[1] = a2;
    g_lora_refs[0] = base, g_lora_refs[1] = r1, g_lora_refs[2] = r2;
    const int32_t len[6] = {19, 23, 14, 9, 30, 17};
    double e = run_paged(base, FOLIO_F32, 16, 6, len, 7, 2, 0);
    printf("# mixed base/adapter batches (chunks): max |diff| = %.3g\n", e);
    assert_true(e <= F32_TOL);
    e = run_paged(base, FOLIO_F32, 16, 6, len, 1, 1, 0);
    printf("# mixed base/adapter batches (decode): max |diff| = %.3g\n", e);
    assert_true(e <= F32_TOL);
    /* one step of 310 prompt tokens: the FFN runs in two chunks of rows
     * (FFN_ROWS, model/forward.c), adapter 2's rows on both sides of the cut */
    const int32_t big[3] = {120, 100, 90};
    e = run_paged(base, FOLIO_F32, 16, 3, big, 0, 2, 0);
    printf("# mixed base/adapter batch over two FFN chunks: max |diff| = %.3g\n", e);
    assert_true(e <= F32_TOL);
    g_n_loras = 0;

    /* batch invariance: with batch_invariant, a sequence through adapter 1
     * gives the same bits alone and beside others (whose rows share its
     * adapter's groups of up to four rows, or run other adapters) */
    {
        enum { NS = 5, PL = 9, DEC = 3 };
        const int32_t lo[NS] = {1, 1, 2, 0, 1};
        struct arena ar;
        arena_init(&ar, base, FOLIO_F32, 16, NS, PL + DEC);
        const struct model_lora *both[2] = {a1, a2};
        struct model_ctx_config ic = {.max_tokens = NS * PL,
                                      .max_slices = NS,
                                      .n_threads = 2,
                                      .batch_invariant = true,
                                      .loras = both,
                                      .n_loras = 2};
        model_ctx_t *ictx;
        assert_int_equal(model_ctx_new(base, &ar.kv, &ic, &ictx), 0);
        int32_t tk[NS][PL + DEC];
        for (int q = 0; q < NS; q++)
            random_tokens(tk[q], PL + DEC, V);
        float *out[2];
        for (int run = 0; run < 2; run++) {
            const int ns = run ? NS : 1;
            out[run] = malloc(sizeof(float) * (size_t)(DEC + 1) * NS * V);
            for (int step = 0; step <= DEC; step++) {
                struct model_slice sls[NS];
                int32_t toks[NS * PL], nt = 0;
                for (int q = 0; q < ns; q++) {
                    const int32_t first = step ? PL + step - 1 : 0, cnt = step ? 1 : PL;
                    memcpy(toks + nt, tk[q] + first, sizeof(int32_t) * (size_t)cnt);
                    sls[q] = (struct model_slice){.first_pos = first,
                                                  .n_tokens = cnt,
                                                  .block_table = arena_table(&ar, q),
                                                  .sample = true,
                                                  .lora = lo[q]};
                    nt += cnt;
                }
                struct model_batch ib = {
                    .n_tokens = nt, .tokens = toks, .n_slices = ns, .slices = sls};
                assert_int_equal(model_forward(ictx, &ib, out[run] + (size_t)step * NS * V), 0);
            }
        }
        for (int step = 0; step <= DEC; step++)
            assert_memory_equal(out[0] + (size_t)step * NS * V, out[1] + (size_t)step * NS * V,
                                sizeof(float) * (size_t)V);
        printf("# batch invariant through an adapter: %d steps alone = beside %d others, bit for "
               "bit\n",
               DEC + 1, NS - 1);
        free(out[0]), free(out[1]);
        model_ctx_free(ictx);
        arena_free(&ar);
    }

    /* a slice naming an adapter the ctx does not have */
    struct pager_kv_view kv = {0};
    struct arena ar;
    arena_init(&ar, base, FOLIO_F32, 16, 1, 16);
    kv = ar.kv;
    model_ctx_t *ctx;
    const struct model_lora *one[1] = {a1};
    struct model_ctx_config cfg = {
        .max_tokens = 8, .max_slices = 2, .n_threads = 1, .loras = one, .n_loras = 1};
    assert_int_equal(model_ctx_new(base, &kv, &cfg, &ctx), 0);
    float *lg = malloc(sizeof(float) * (size_t)V);
    int32_t t1 = 3;
    struct model_slice sl = {
        .n_tokens = 1, .block_table = arena_table(&ar, 0), .sample = true, .lora = 2};
    struct model_batch b = {.n_tokens = 1, .tokens = &t1, .n_slices = 1, .slices = &sl};
    assert_int_equal(model_forward(ctx, &b, lg), -EINVAL);
    sl.lora = -1;
    assert_int_equal(model_forward(ctx, &b, lg), -EINVAL);
    sl.lora = 1;
    assert_int_equal(model_forward(ctx, &b, lg), 0);
    model_ctx_free(ctx);
    cfg.loras = NULL;
    assert_int_equal(model_ctx_new(base, &kv, &cfg, &ctx), -EINVAL);
    free(lg);
    arena_free(&ar);

    model_free(r1), model_free(r2);
    model_lora_free(a1), model_lora_free(a2);

    /* refusals, each naming the file and the problem */
    struct {
        const char *arch, *type, *atype, *tensor;
        int64_t ne0, ne1;
        const char *want;
    } bad[] = {
        {"llama", "model", "lora", NULL, 0, 0, "not an adapter"},
        {"llama", "adapter", "ia3", NULL, 0, 0, "not a LoRA adapter"},
        {"qwen3", "adapter", "lora", NULL, 0, 0, "an adapter for 'qwen3'"},
        {"llama", "adapter", "lora", "blk.0.attn_q.weight.lora_a", base->hp.dim, 4,
         "has a lora_a but no lora_b"},
        {"llama", "adapter", "lora", "blk.0.attn_q.weight.lora_a", 100, 4, "do not fit"},
        {"llama", "adapter", "lora", "output.weight.lora_a", base->hp.dim, 4, "output.weight"},
        {"llama", "adapter", "lora", "blk.99.ffn_up.weight.lora_a", base->hp.dim, 4, "blk.99"},
    };
    static float zeros[4096 * 4];
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        gguf_writer_t *w;
        assert_int_equal(gguf_writer_new(&w), 0);
        assert_int_equal(gguf_w_str(w, "general.architecture", bad[k].arch), 0);
        assert_int_equal(gguf_w_str(w, "general.type", bad[k].type), 0);
        assert_int_equal(gguf_w_str(w, "adapter.type", bad[k].atype), 0);
        if (bad[k].tensor) {
            const int64_t ne[2] = {bad[k].ne0, bad[k].ne1};
            assert_int_equal(gguf_w_tensor(w, bad[k].tensor, GGUF_TENSOR_F32, 2, ne, zeros), 0);
            if (bad[k].ne0 == 100) { /* its lora_b, for the shape check */
                const int64_t nb[2] = {4, base->hp.n_heads * base->hp.head_dim};
                assert_int_equal(
                    gguf_w_tensor(w, "blk.0.attn_q.weight.lora_b", GGUF_TENSOR_F32, 2, nb, zeros),
                    0);
            }
        }
        assert_int_equal(gguf_writer_write(w, p1, err, sizeof(err)), 0);
        gguf_writer_free(w);
        model_lora_t *a = NULL;
        err[0] = 0;
        assert_int_equal(model_lora_load(base, p1, 1.0f, &a, err, sizeof(err)), -EINVAL);
        assert_null(a);
        printf("# refused: %s\n", err);
        assert_non_null(strstr(err, p1));
        assert_non_null(strstr(err, bad[k].want));
    }
    model_lora_t *a = NULL;
    assert_int_equal(model_lora_load(base, "/nonexistent/x.gguf", 1.0f, &a, err, sizeof(err)),
                     -ENOENT);
    assert_non_null(strstr(err, "/nonexistent/x.gguf"));
    model_free(base);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    if (test_isa_repeats_default())
        return TEST_ISA_SKIP;
    const struct CMUnitTest tests[] = {
        /* clang-format off */
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_swiglu_lanes),
        cmocka_unit_test(test_fill_random_fixed),
        cmocka_unit_test(test_whole_prompt),
        cmocka_unit_test(test_random_chunks),
        cmocka_unit_test(test_token_by_token),
        cmocka_unit_test(test_single_decode_threads),
        cmocka_unit_test(test_many_sequences),
        cmocka_unit_test(test_f16_kv),
        cmocka_unit_test(test_types_backends),
        cmocka_unit_test(test_gate_up_mixed),
        cmocka_unit_test(test_invalid_batches),
        cmocka_unit_test(test_logits_healthy),
        cmocka_unit_test(test_act_stats),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_pager_fork_and_prefix),
        cmocka_unit_test(test_archs),
        cmocka_unit_test(test_window_frees_pages),
        cmocka_unit_test(test_lora),
        /* clang-format on */
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
