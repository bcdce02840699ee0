/*
 * bench/bench_kv_quality.c — what a narrower KV cache does to greedy
 * decoding, for BENCHMARKS.md ("KV dtypes").
 *
 *   bench_kv_quality [--model FILE|default] [--dtype f16|bf16|q8]
 *                    [--prompts N] [--tokens N] [--threads N] [--seed N]
 *
 * Runs the same N prompts (token ids drawn from a seeded generator, 8 to 64
 * long) twice in lockstep: once with f32 K/V (the baseline), once with
 * --dtype K/V (default q8).  Each run prefills every prompt in one batch,
 * then decodes --tokens greedy tokens per prompt, one batched step each.
 * Both runs see the same model and the same batches; only the KV pool's
 * element type differs.
 *
 * For each prompt it prints the first step where the two continuations
 * differ, and the baseline's top-2 logit margin at that step.  Acceptance
 * (issue: q8 KV on `small`): a continuation may differ from the baseline's
 * only after a step whose top-2 margin is under 0.05 — a near tie that any
 * rounding may flip.  While the two contexts are still identical, it
 * averages |logit_dtype - logit_f32| of the baseline's top-1 token ("mean
 * top-1 logit difference") and its maximum.  Exit status 1 when a
 * divergence follows a margin >= 0.05.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/model.h"
#include "folio/pager.h"

#define BS      16
#define MAXP    64
#define MARGIN  0.05f
#define MAX_LEN (64 + 4096)

struct run {
    pager_t *pg;
    pager_seq_t *seq[MAXP];
    model_ctx_t *ctx;
    float *logits; /* [n_prompts][V] */
    int32_t *toks; /* [n_prompts][MAX_LEN] */
    int32_t len[MAXP];
};

static uint64_t rng = 1;

static uint32_t rnd32(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}

static int run_init(struct run *r, const model_t *m, enum folio_dtype dt, int np, int ntok, int nth,
                    int32_t total_prompt)
{
    const struct model_hparams *hp = model_hparams(m);
    memset(r, 0, sizeof(*r));
    struct pager_config pc = {.num_blocks = np * FOLIO_DIV_CEIL(MAXP + ntok + 1, BS),
                              .block_size = BS,
                              .n_layers = hp->n_layers,
                              .n_kv_heads = hp->n_kv_heads,
                              .head_dim = hp->head_dim,
                              .dtype = dt};
    int rc = pager_init(&r->pg, &pc);
    if (rc)
        return rc;
    struct pager_kv_view kv;
    pager_kv_view(r->pg, &kv);
    struct model_ctx_config cfg = {.max_tokens = total_prompt, .max_slices = np, .n_threads = nth};
    if ((rc = model_ctx_new(m, &kv, &cfg, &r->ctx)))
        return rc;
    r->logits = malloc(sizeof(float) * (size_t)np * hp->n_vocab);
    r->toks = malloc(sizeof(int32_t) * (size_t)np * MAX_LEN);
    if (!r->logits || !r->toks)
        return -ENOMEM;
    for (int p = 0; p < np; p++)
        if ((rc = pager_seq_new(r->pg, (uint64_t)p + 1, (uint64_t)p, 0, &r->seq[p])))
            return rc;
    return 0;
}

static void run_free(struct run *r)
{
    for (int p = 0; p < MAXP; p++)
        if (r->seq[p])
            pager_seq_free(r->pg, r->seq[p]);
    model_ctx_free(r->ctx);
    pager_free(r->pg);
    free(r->logits);
    free(r->toks);
}

/* One step: prompt p appends n tokens (its whole prompt, or its last
 * sampled token); every prompt samples. */
static int run_step(struct run *r, int np, const int32_t *n_new)
{
    struct model_slice sl[MAXP];
    static int32_t flat[MAXP * MAX_LEN];
    int32_t nt = 0, nb;
    for (int p = 0; p < np; p++) {
        const int32_t *t = r->toks + (size_t)p * MAX_LEN + r->len[p];
        int rc = pager_seq_append(r->pg, r->seq[p], t, n_new[p]);
        if (rc)
            return rc;
        sl[p] = (struct model_slice){.first_pos = r->len[p],
                                     .n_tokens = n_new[p],
                                     .block_table = pager_seq_block_table(r->seq[p], &nb),
                                     .sample = true};
        memcpy(flat + nt, t, sizeof(int32_t) * (size_t)n_new[p]);
        nt += n_new[p];
    }
    struct model_batch b = {.n_tokens = nt, .tokens = flat, .n_slices = np, .slices = sl};
    int rc = model_forward(r->ctx, &b, r->logits);
    for (int p = 0; p < np && !rc; p++) {
        r->len[p] += n_new[p];
        pager_seq_mark_computed(r->pg, r->seq[p], r->len[p]);
    }
    return rc;
}

static void top2(const float *l, int32_t V, int32_t *best, float *margin)
{
    int32_t b = 0;
    float m1 = -INFINITY, m2 = -INFINITY;
    for (int32_t i = 0; i < V; i++) {
        if (l[i] > m1) {
            m2 = m1;
            m1 = l[i];
            b = i;
        } else if (l[i] > m2) {
            m2 = l[i];
        }
    }
    *best = b;
    *margin = m1 - m2;
}

int main(int argc, char **argv)
{
    const char *model_path = NULL;
    enum folio_dtype dt = FOLIO_Q8;
    int np = 20, ntok = 128, nth = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "%s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--model"))
            model_path = v;
        else if (!strcmp(a, "--dtype")) {
            if (folio_dtype_parse(v, &dt)) {
                fprintf(stderr, "bad --dtype %s\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--prompts"))
            np = atoi(v);
        else if (!strcmp(a, "--tokens"))
            ntok = atoi(v);
        else if (!strcmp(a, "--threads"))
            nth = atoi(v);
        else if (!strcmp(a, "--seed"))
            rng = (uint64_t)strtoull(v, NULL, 10);
        else {
            fprintf(stderr,
                    "usage: %s [--model FILE|default] [--dtype f16|bf16|q8] [--prompts N]\n"
                    "          [--tokens N] [--threads N] [--seed N]\n",
                    argv[0]);
            return 2;
        }
    }
    if (np < 1 || np > MAXP || ntok < 1 || ntok > 4096 || nth < 1)
        return 2;
    char err[256] = "";
    model_t *m = NULL;
    int rc = !model_path || !strcmp(model_path, "default")
                 ? model_load_default(&m, err, sizeof(err))
                 : model_load_file(model_path, &m, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "cannot load the model: %s\n", err[0] ? err : strerror(-rc));
        return 1;
    }
    const struct model_hparams *hp = model_hparams(m);
    const int32_t V = hp->n_vocab;
    if (ntok + MAXP + 1 > hp->ctx_len)
        ntok = hp->ctx_len - MAXP - 1;

    struct run r[2];
    int32_t plen[MAXP], total = 0;
    for (int p = 0; p < np; p++)
        total += plen[p] = 8 + (int32_t)(rnd32() % (MAXP - 7));
    if ((rc = run_init(&r[0], m, FOLIO_F32, np, ntok, nth, total)) ||
        (rc = run_init(&r[1], m, dt, np, ntok, nth, total))) {
        fprintf(stderr, "setup: %s\n", strerror(-rc));
        return 1;
    }
    for (int p = 0; p < np; p++)
        for (int32_t i = 0; i < plen[p]; i++) {
            int32_t t = (int32_t)(rnd32() % (uint32_t)V);
            r[0].toks[(size_t)p * MAX_LEN + i] = r[1].toks[(size_t)p * MAX_LEN + i] = t;
        }

    int diverge[MAXP];     /* first step whose tokens differ, or ntok */
    float margin_at[MAXP]; /* baseline's top-2 margin there */
    double dsum = 0, dmax = 0;
    long dcount = 0;
    int32_t n_new[MAXP];
    for (int p = 0; p < np; p++) {
        diverge[p] = ntok;
        margin_at[p] = NAN;
        n_new[p] = plen[p];
    }
    printf("KV quality: %s, %d prompts x %d greedy tokens, f32 vs %s K/V, %d threads\n",
           model_name(m), np, ntok, folio_dtype_name(dt), nth);
    for (int step = 0; step < ntok; step++) {
        for (int k = 0; k < 2; k++) {
            if ((rc = run_step(&r[k], np, n_new))) {
                fprintf(stderr, "step %d: %s\n", step, strerror(-rc));
                return 1;
            }
        }
        for (int p = 0; p < np; p++) {
            const float *l0 = r[0].logits + (size_t)p * V, *l1 = r[1].logits + (size_t)p * V;
            int32_t b0, b1;
            float mg0, mg1;
            top2(l0, V, &b0, &mg0);
            top2(l1, V, &b1, &mg1);
            if (diverge[p] == ntok) { /* contexts identical so far */
                double d = fabs((double)l1[b0] - l0[b0]);
                dsum += d;
                dmax = d > dmax ? d : dmax;
                dcount++;
                if (b0 != b1) {
                    diverge[p] = step;
                    margin_at[p] = mg0;
                }
            }
            r[0].toks[(size_t)p * MAX_LEN + r[0].len[p]] = b0;
            r[1].toks[(size_t)p * MAX_LEN + r[1].len[p]] = b1;
            n_new[p] = 1;
        }
    }
    int bad = 0, same = 0;
    for (int p = 0; p < np; p++) {
        if (diverge[p] == ntok) {
            same++;
            printf("  prompt %2d (%2d tokens): identical for %d tokens\n", p, plen[p], ntok);
        } else {
            int ok = margin_at[p] < MARGIN;
            bad += !ok;
            printf("  prompt %2d (%2d tokens): differs from step %d, f32 top-2 margin there %.4f "
                   "(%s)\n",
                   p, plen[p], diverge[p], margin_at[p],
                   ok ? "near tie, allowed" : "NOT a near tie");
        }
    }
    printf("identical continuations: %d of %d; divergences after a margin >= %.2f: %d\n", same, np,
           MARGIN, bad);
    printf("top-1 logit |%s - f32| over %ld steps with identical context: mean %.5f, max %.5f\n",
           folio_dtype_name(dt), dcount, dcount ? dsum / (double)dcount : 0.0, dmax);
    run_free(&r[0]);
    run_free(&r[1]);
    model_free(m);
    return bad ? 1 : 0;
}
