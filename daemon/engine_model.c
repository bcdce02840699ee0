/*
 * daemon/engine_model.c — foliod's step function (daemon/backend.h): the
 * model (model/) runs the planned batch and the sampler picks each
 * sampling row's token; the scheduler and the pager are the backend's.
 *
 *   run (engine thread)  model_forward(batch) → logits [n_sample][n_vocab]
 *                        → penalties (sampler_penalize over the row's
 *                        history) → grammar mask (requests with a
 *                        matcher, eng_req.gm) → sampler_sample(
 *                        eng_slice_req's params) per sampling row → the
 *                        matcher advances over the sampled token
 *                        (token_index keeps a preempted stream identical);
 *                        prompt rows (all_logits slices of requests that
 *                        want prompt logprobs) → sampler_score of the
 *                        next prompt token; hidden slices (embedding
 *                        requests) → their rows' final hidden states,
 *                        straight from model_forward_hidden
 *
 * Penalties, masks and the matchers run on the engine thread, row by row;
 * the draws between them run on the model's thread pool, rows dealt out
 * in turn (row j to thread j mod n), each thread with its own sampler
 * workspace.  A draw is a function of the row's logits, its parameters
 * and token_index alone, so which thread draws it changes nothing.  On
 * the Zen 3 VM a top-p draw over 32000 logits costs 0.12-0.19 ms (0.4 ms
 * before model/sampler.c's finer buckets): at 64 rows, 8-12 ms of an
 * 80-110 ms decode step on one thread, half that on two.
 *
 * The tokenizer: the model file's, or for the default model the
 * synthetic vocabulary; chat template read from the file's
 * tokenizer.chat_template at load (the default model has none: -ENOENT),
 * and a reranker's tokenizer.chat_template.rerank (kept as text: the
 * server fills it in) beside the model's classification head.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> /* sysconf */

#include "backend.h"
#include "folio/chat.h"
#include "folio/common.h"
#include "folio/gguf.h"
#include "folio/grammar.h"
#include "folio/lora.h"
#include "folio/model.h"
#include "folio/pager.h"
#include "folio/sampler.h"
#include "folio/scheduler.h"
#include "folio/tokenizer.h"

int eng_model_factory(const struct srv_config *cfg, const struct eng_backend_ops **ops, void **b,
                      char *err, size_t errlen);

struct em {
    const struct srv_config *cfg;
    model_t *model;
    struct model_hparams hp;
    model_ctx_t *mctx;
    float *logits;         /* [max_logits][n_vocab] */
    int32_t max_logits;    /* rows: max_seqs + eng_prompt_logits, at most a step's tokens */
    void *work;            /* sampler workspaces: [n_threads][sampler_work_size] */
    size_t work_size;      /* bytes of one */
    int n_threads;         /* of the model ctx's pool */
    struct em_draw *draws; /* [max_seqs]: one step's draws */
    tok_t *tok;            /* NULL: token ids only */
    gram_vocab_t *gv;      /* the vocabulary's bytes for grammar masks; NULL: none */
    int tmpl, tmpl_rc;     /* chat template from the file (see eng_model_info) */
    int32_t pooling;       /* the file's {arch}.pooling_type; -1: none */
    char *rerank_tmpl;     /* the file's tokenizer.chat_template.rerank, or NULL */
    char **cls_labels;     /* the file's {arch}.classifier.output_labels, or NULL */
    int32_t n_labels;
    char name[80];
    model_lora_t *loras[SRV_MAX_LORAS]; /* cfg->lora_paths' adapters */
    int32_t lora_ranks[SRV_MAX_LORAS];
};

static void em_info(void *b, struct eng_model_info *mi)
{
    struct em *m = b;
    mi->name = m->name;
    mi->n_vocab = m->hp.n_vocab;
    mi->ctx_len = m->hp.ctx_len;
    mi->eos_id = m->hp.eos_id;
    mi->has_tokenizer = m->tok != NULL;
    mi->chat_template = m->tmpl;
    mi->chat_template_rc = m->tmpl_rc;
    mi->matmul = model_matmul_name(model_ctx_matmul(m->mctx));
    mi->constrained = m->gv != NULL;
    mi->n_embd = m->hp.dim;
    mi->pooling = m->pooling;
    mi->n_cls = model_cls_head(m->model, &mi->cls_w, &mi->cls_b);
    mi->rerank_tmpl = m->rerank_tmpl;
    mi->cls_labels = m->n_labels == mi->n_cls ? (const char *const *)m->cls_labels
                                              : NULL; /* the loader's check */
    mi->n_loras = m->cfg->n_loras;
    mi->lora_names = m->cfg->lora_names;
    mi->lora_paths = m->cfg->lora_paths;
    mi->lora_ranks = m->lora_ranks;
}

/* One sampling row's draw, set up on the engine thread and run on any
 * thread of the pool. */
struct em_draw {
    int32_t slice; /* of the batch */
    const struct eng_req *req;
    struct sampler_params sp;
    const float *row;
    uint64_t t;
    int32_t n_top; /* < 0: no sampler_result wanted (res NULL) */
    int32_t *token;
    struct sampler_result *res;
    int rc;
};

struct em_draws {
    struct em *m;
    int32_t n;
};

static void em_draw_rows(void *arg, int ith, int nth)
{
    const struct em_draws *d = arg;
    struct em *m = d->m;
    void *work = (char *)m->work + (size_t)ith * m->work_size;
    for (int32_t j = ith; j < d->n; j += nth) {
        struct em_draw *x = &m->draws[j];
        x->rc = sampler_sample(&x->sp, x->row, m->hp.n_vocab, x->t, work,
                               x->n_top >= 0 ? x->n_top : 0, x->token, x->res);
    }
}

/* The step's prompt rows (sched_slice.plp_*), dealt out like the draws. */
struct em_scores {
    struct em *m;
    const struct sched_batch *batch;
    struct sampler_result *plp;
    int *rc; /* [n_plp] */
};

static void em_score_rows(void *arg, int ith, int nth)
{
    const struct em_scores *d = arg;
    struct em *m = d->m;
    void *work = (char *)m->work + (size_t)ith * m->work_size;
    int32_t j = 0; /* the prompt row's number in the step */
    for (int32_t k = 0; k < d->batch->mb.n_slices; k++) {
        const struct sched_slice *s = &d->batch->info[k];
        if (!s->plp_n)
            continue;
        const struct model_slice *sl = &d->batch->mb.slices[k];
        const struct eng_req *r = eng_slice_req(s, NULL, NULL);
        for (int32_t i = 0; i < s->plp_n; i++, j++) {
            if (j % nth != ith)
                continue;
            int32_t pos = s->plp_first + i; /* scores prompt token pos + 1 */
            int32_t row = s->logits_row - (sl->first_pos + sl->n_tokens - 1 - pos);
            d->rc[j] = sampler_score(m->logits + (size_t)row * m->hp.n_vocab, m->hp.n_vocab,
                                     r->prompt[pos + 1], work, r->g.n_prompt_logprobs,
                                     &d->plp[s->plp_index + i]);
        }
    }
}

static void em_run(void *b, const struct sched_batch *batch, int32_t *sampled,
                   struct sampler_result *res, struct sampler_result *plp, float *hidden,
                   int *slice_rc)
{
    struct em *m = b;
    int rc = model_forward_hidden(m->mctx, &batch->mb, m->logits, hidden);
    for (int32_t i = 0; i < batch->mb.n_slices; i++)
        slice_rc[i] = rc;
    if (!rc && batch->n_plp) {
        int prc[ENG_PROMPT_LOGITS] = {0};
        struct em_scores d = {m, batch, plp, prc};
        if (batch->n_plp > 1 && m->n_threads > 1)
            model_ctx_run(m->mctx, em_score_rows, &d);
        else
            em_score_rows(&d, 0, 1);
        for (int32_t k = 0; k < batch->mb.n_slices; k++)
            for (int32_t i = 0; i < batch->info[k].plp_n; i++)
                if (prc[batch->info[k].plp_index + i])
                    slice_rc[k] = prc[batch->info[k].plp_index + i];
    }
    int32_t nd = 0;
    for (int32_t i = 0; i < batch->mb.n_slices; i++) {
        const struct sched_slice *s = &batch->info[i];
        if (s->sample_row < 0 || slice_rc[i])
            continue;
        struct em_draw *x = &m->draws[nd];
        struct sampler_history h;
        const struct eng_req *r = eng_slice_req(s, &x->sp, &h);
        float *row = m->logits + (size_t)s->logits_row * m->hp.n_vocab;
        if (sampler_penalties_active(&r->g.pen) &&
            (slice_rc[i] = sampler_penalize(&r->g.pen, &h, row, m->hp.n_vocab,
                                            sampler_work_counts(m->work, m->hp.n_vocab))))
            continue;
        /* constrained decoding: tokens that cannot continue the document
         * are masked; the budget keeps room to close it by max_tokens */
        if (r->gm && m->gv) {
            int32_t left = r->g.max_tokens - s->token_index;
            int grc = gram_matcher_apply(r->gm, m->gv, left > 0 ? left : 1, row);
            if (grc < 0) {
                slice_rc[i] = grc;
                continue;
            }
        }
        x->row = row;
        x->t = (uint64_t)s->token_index;
        x->n_top = r->g.n_logprobs;
        x->token = &sampled[s->sample_row];
        x->res = x->n_top >= 0 ? &res[s->sample_row] : NULL;
        x->slice = i;
        x->req = r;
        nd++;
    }
    struct em_draws d = {m, nd};
    if (nd > 1 && m->n_threads > 1)
        model_ctx_run(m->mctx, em_draw_rows, &d);
    else
        em_draw_rows(&d, 0, 1);
    for (int32_t j = 0; j < nd; j++) {
        const struct em_draw *x = &m->draws[j];
        const struct eng_req *r = x->req;
        slice_rc[x->slice] = x->rc;
        if (r->gm && m->gv && !x->rc) {
            slice_rc[x->slice] = gram_matcher_accept(r->gm, m->gv, *x->token);
            /* masked tokens are not alternatives: no -inf in top_logprobs */
            struct sampler_result *lp = x->res;
            while (lp && lp->n_top > 0 && isinf(lp->top_logprobs[lp->n_top - 1]))
                lp->n_top--;
        }
    }
}

static int em_detok(void *b, int32_t tok, char *buf, size_t cap)
{
    struct em *m = b;
    if (!m->tok) /* no tokenizer: a token reads as its id */
        return snprintf(buf, cap, " %d", tok);
    size_t n = 0;
    int rc = tok_token_to_piece(m->tok, tok, 0, buf, cap, &n);
    return rc ? rc : (int)n;
}

static bool em_is_eog(void *b, int32_t tok)
{
    struct em *m = b;
    return m->tok ? tok_is_eog(m->tok, tok) : tok == m->hp.eos_id;
}

static int em_tokenize(void *b, const char *text, size_t n, bool parse_special, int32_t **out,
                       int32_t *n_out)
{
    struct em *m = b;
    if (!m->tok)
        return -ENOSYS;
    int32_t cap = (int32_t)FOLIO_MIN(n + 8, (size_t)INT32_MAX / 8), got = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        int32_t *ids = folio_malloc((size_t)cap * sizeof(int32_t));
        if (!ids)
            return -ENOMEM;
        int rc = tok_encode(m->tok, text, n, true, parse_special, ids, cap, &got);
        if (rc == -ENOSPC && attempt == 0) {
            folio_free(ids);
            cap = got;
            continue;
        }
        if (rc) {
            folio_free(ids);
            return rc;
        }
        *out = ids;
        *n_out = got;
        return 0;
    }
    return -ENOSPC;
}

/* The file's {arch}.pooling_type (llama.cpp's key), or -1. */
static int32_t file_pooling(const gguf_file_t *f)
{
    const char *arch = NULL;
    size_t n = 0;
    int64_t k = gguf_find_key(f, "general.architecture");
    if (k < 0 || gguf_get_str(f, k, &arch, &n) || n > 64)
        return -1;
    char key[96];
    snprintf(key, sizeof(key), "%.*s.pooling_type", (int)n, arch);
    uint64_t v = 0;
    k = gguf_find_key(f, key);
    return k >= 0 && !gguf_get_u64(f, k, &v) && v <= 4 ? (int32_t)v : -1;
}

/* The classification head's output names, when the file has them (the
 * loader checked their count). */
static int read_labels(struct em *m, const gguf_file_t *f)
{
    const char *arch;
    size_t al;
    int64_t k = gguf_find_key(f, "general.architecture");
    if (k < 0 || gguf_get_str(f, k, &arch, &al) || al > 32)
        return 0;
    char key[96];
    snprintf(key, sizeof(key), "%.*s.classifier.output_labels", (int)al, arch);
    enum gguf_type et;
    uint64_t n;
    k = gguf_find_key(f, key);
    if (k < 0 || gguf_arr_info(f, k, &et, &n) || et != GGUF_TYPE_STRING || n < 1 || n > 64)
        return 0;
    m->cls_labels = folio_calloc((size_t)n, sizeof(*m->cls_labels));
    if (!m->cls_labels)
        return -ENOMEM;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        if (gguf_arr_str(f, k, i, &s, &len) || memchr(s, 0, len))
            s = "", len = 0;
        if (!(m->cls_labels[i] = folio_malloc(len + 1)))
            return -ENOMEM;
        memcpy(m->cls_labels[i], s, len);
        m->cls_labels[i][len] = 0;
        m->n_labels = (int32_t)i + 1;
    }
    return 0;
}

static int load_tokenizer(struct em *m, char *err, size_t errlen)
{
    m->tmpl_rc = -ENOENT;
    if (!m->cfg->model)
        return tok_new_synthetic(m->hp.n_vocab, &m->tok, err, errlen); /* the default model's */
    gguf_file_t *f = NULL;
    int rc = gguf_open(m->cfg->model, &f, err, errlen);
    if (!rc) {
        char terr[200];
        enum chat_template t = 0;
        m->tmpl_rc = chat_template_from_gguf(f, &t, terr, sizeof(terr));
        m->tmpl = m->tmpl_rc ? 0 : (int)t;
        if (m->tmpl_rc && m->tmpl_rc != -ENOENT)
            m->tmpl_rc = -ENOTSUP;
        m->pooling = file_pooling(f);
        int64_t k = gguf_find_key(f, "tokenizer.chat_template.rerank");
        const char *s;
        size_t n;
        if (k >= 0 && !gguf_get_str(f, k, &s, &n) && n > 0 && !memchr(s, 0, n)) {
            if ((m->rerank_tmpl = folio_malloc(n + 1))) {
                memcpy(m->rerank_tmpl, s, n);
                m->rerank_tmpl[n] = 0;
            } else {
                rc = -ENOMEM;
                folio_errf(err, errlen, "%s: out of memory", m->cfg->model);
            }
        }
        if (!rc)
            rc = read_labels(m, f);
        if (rc == -ENOMEM)
            folio_errf(err, errlen, "%s: out of memory", m->cfg->model);
        if (!rc)
            rc = tok_load(f, &m->tok, err, errlen);
    }
    gguf_close(f);
    return rc;
}

/* The vocabulary as the bytes each token adds to the text (what the
 * streaming detokenizer emits), for grammar masks. */
static int vocab_bytes(const tok_t *t, gram_vocab_t **out)
{
    int32_t n = tok_n_vocab(t);
    const char **piece = folio_malloc((size_t)n * sizeof(*piece));
    size_t *len = folio_malloc((size_t)n * sizeof(*len));
    bool *eog = folio_malloc((size_t)n * sizeof(*eog));
    int rc = piece && len && eog ? 0 : -ENOMEM;
    for (int32_t i = 0; i < n && !rc; i++) {
        piece[i] = tok_piece(t, i, 0, &len[i]);
        eog[i] = tok_is_eog(t, i);
        /* unknown tokens render as U+FFFD: never generated under a grammar */
        if (tok_token_type(t, i) == TOK_TYPE_UNKNOWN)
            len[i] = 0;
    }
    if (!rc)
        rc = gram_vocab_new(n, piece, len, eog, out);
    folio_free(piece);
    folio_free(len);
    folio_free(eog);
    return rc;
}

static void em_free(void *b)
{
    struct em *m = b;
    if (!m)
        return;
    if (m->mctx)
        model_ctx_free(m->mctx);
    for (int i = 0; i < SRV_MAX_LORAS; i++)
        model_lora_free(m->loras[i]); /* after the ctx that names them */
    if (m->model)
        model_free(m->model);
    if (m->tok)
        tok_free(m->tok);
    gram_vocab_free(m->gv);
    folio_free(m->logits);
    folio_free(m->rerank_tmpl);
    for (int32_t i = 0; i < m->n_labels; i++)
        folio_free(m->cls_labels[i]);
    folio_free(m->cls_labels);
    folio_free(m->work);
    folio_free(m->draws);
    folio_free(m);
}

static const struct eng_step em_step = {
    .kind = "model",
    .info = em_info,
    .run = em_run,
    .detok = em_detok,
    .tokenize = em_tokenize,
    .is_eog = em_is_eog,
    .free = em_free,
};

/* Two forward steps before serving (unless --no-warmup), on free blocks:
 * one of the full token budget in a single sequence, then the same budget
 * split over as many sampled sequences as a step may hold (max_seqs, at
 * most max_logits), the shape of a busy step's decodes and prefill chunks.
 * They touch the context's buffers and set up the product libraries'
 * kernels and scratch at the sizes a step uses: a fresh context ran its
 * first step at about half the rate of the next ones, and with only the
 * first warm-up step its first step of several sequences still took
 * 80-160 ms longer than the next (BENCHMARKS.md), so the first requests
 * pay for neither.  Their K/V go to the pool's first blocks, all free at
 * this point: a slot is always written before any step reads it, so
 * nothing ever sees these values (with --kv-lazy the caller gives their
 * pages back). */
static void warm_up(struct em *m, const struct pager_kv_view *kv)
{
    const int64_t cap = (int64_t)kv->num_blocks * kv->block_size;
    const int32_t n =
        (int32_t)FOLIO_MIN(FOLIO_MIN(m->cfg->max_batch_tokens, cap), (int64_t)m->hp.ctx_len);
    if (n < 1)
        return;
    /* the split step: k sequences of `per` tokens, one block table each */
    int32_t k = (int32_t)FOLIO_MIN(FOLIO_MIN(m->cfg->max_seqs, m->max_logits), n);
    int32_t per = n / k;
    int32_t bper = FOLIO_DIV_CEIL(per, kv->block_size);
    while (k > 1 && (int64_t)k * bper > kv->num_blocks) { /* a small pool: fewer */
        k /= 2;
        per = n / k;
        bper = FOLIO_DIV_CEIL(per, kv->block_size);
    }
    const int32_t nb = FOLIO_MAX(FOLIO_DIV_CEIL(n, kv->block_size), k * bper);
    int32_t *tokens = folio_calloc((size_t)n, sizeof(*tokens));
    int32_t *table = folio_malloc((size_t)nb * sizeof(*table));
    struct model_slice *sl = folio_calloc((size_t)k, sizeof(*sl));
    if (tokens && table && sl) {
        for (int32_t i = 0; i < nb; i++)
            table[i] = i;
        sl[0] = (struct model_slice){
            .first_pos = 0, .n_tokens = n, .block_table = table, .sample = true};
        const struct model_batch whole = {
            .n_tokens = n, .tokens = tokens, .n_slices = 1, .slices = sl};
        (void)model_forward(m->mctx, &whole, m->logits);
        if (k > 1) {
            for (int32_t i = 0; i < k; i++)
                sl[i] = (struct model_slice){.first_pos = 0,
                                             .n_tokens = per,
                                             .block_table = table + (size_t)i * bper,
                                             .sample = true};
            const struct model_batch split = {
                .n_tokens = per * k, .tokens = tokens, .n_slices = k, .slices = sl};
            (void)model_forward(m->mctx, &split, m->logits);
        }
    }
    folio_free(tokens);
    folio_free(table);
    folio_free(sl);
}

int eng_model_factory(const struct srv_config *cfg, const struct eng_backend_ops **ops, void **out,
                      char *err, size_t errlen)
{
    struct em *m = folio_calloc(1, sizeof(*m));
    struct eng_backend *be = NULL;
    if (!m)
        return -ENOMEM;
    m->cfg = cfg;
    m->pooling = -1;
    int rc = cfg->model ? model_load_file(cfg->model, &m->model, err, errlen)
                        : model_load_default(&m->model, err, errlen);
    if (rc)
        goto fail;
    m->hp = *model_hparams(m->model);
    snprintf(m->name, sizeof(m->name), "%s", model_name(m->model));
    for (int i = 0; i < cfg->n_loras; i++) {
        if (!strcmp(cfg->lora_names[i], m->name)) {
            snprintf(err, errlen, "--lora: the name '%s' is the model's own", m->name);
            rc = -EINVAL;
            goto fail;
        }
        if ((rc = model_lora_load(m->model, cfg->lora_paths[i], 1.0f, &m->loras[i], err, errlen)))
            goto fail;
        struct model_lora_info li;
        model_lora_info(m->loras[i], &li);
        m->lora_ranks[i] = li.rank;
    }
    struct eng_geom g = {m->hp.n_layers,
                         m->hp.n_kv_heads,
                         m->hp.head_dim,
                         m->hp.ctx_len,
                         false,
                         m->hp.n_swa,
                         model_kv_dtype_auto(m->model),
                         m->hp.n_vocab,
                         m->hp.dim};
    if ((rc = eng_backend_new(cfg, &g, &be, err, errlen)))
        goto fail;
    struct pager_kv_view view;
    pager_kv_view(eng_backend_pager(be), &view);
    m->max_logits =
        (int32_t)FOLIO_MIN(cfg->max_seqs + eng_prompt_logits(m->hp.n_vocab), cfg->max_batch_tokens);
    struct model_ctx_config mc = {
        .max_tokens = (int32_t)cfg->max_batch_tokens,
        .max_slices = (int32_t)cfg->max_seqs,
        .max_logits = m->max_logits,
        /* --threads 0: one compute thread per online CPU */
        .n_threads = cfg->threads > 0 ? (int32_t)cfg->threads
                                      : (int32_t)FOLIO_MAX(1, sysconf(_SC_NPROCESSORS_ONLN)),
        .matmul = (enum model_matmul)cfg->matmul_id, /* choices in enum order */
        .batch_invariant = cfg->batch_invariant,
        .loras = (const struct model_lora *const *)m->loras,
        .n_loras = cfg->n_loras,
    };
    if ((rc = model_ctx_new(m->model, &view, &mc, &m->mctx))) {
        snprintf(err, errlen, "cannot create the model context: %s", strerror(-rc));
        goto fail;
    }
    m->logits = folio_malloc((size_t)m->max_logits * (size_t)m->hp.n_vocab * sizeof(float));
    m->n_threads = model_ctx_threads(m->mctx);
    m->work_size = sampler_work_size(m->hp.n_vocab);
    m->work = folio_malloc((size_t)m->n_threads * m->work_size);
    m->draws = folio_calloc((size_t)cfg->max_seqs, sizeof(*m->draws));
    if (!m->logits || !m->work || !m->draws) {
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (!cfg->no_warmup) {
        warm_up(m, &view);
        /* the K/V it wrote are scratch: with --kv-lazy the pool is
         * committed by what requests write, not by the warm-up */
        if (cfg->kv_lazy)
            (void)pager_release_pages(eng_backend_pager(be));
    }
    /* Without a usable tokenizer the server still serves token ids; but a
     * tokenizer the file names and foliod lacks (model, pre-tokenizer) is
     * a refusal: text through it would be garbage. */
    char terr[256] = "";
    int trc = load_tokenizer(m, terr, sizeof(terr));
    if (trc == -ENOTSUP) {
        snprintf(err, errlen, "%s: %s", cfg->model, terr);
        rc = trc;
        goto fail;
    }
    if (trc || tok_n_vocab(m->tok) != m->hp.n_vocab) {
        if (m->tok)
            tok_free(m->tok);
        m->tok = NULL;
    }
    if (m->tok && (rc = vocab_bytes(m->tok, &m->gv))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if ((rc = eng_backend_set_step(be, &em_step, m))) { /* be owns m from here */
        snprintf(err, errlen, "out of memory");
        eng_backend_ops.free(be);
        return rc;
    }
    *ops = &eng_backend_ops;
    *out = be;
    return 0;
fail:
    if (m->mctx) { /* it views the pool: free it first */
        model_ctx_free(m->mctx);
        m->mctx = NULL;
    }
    if (be)
        eng_backend_ops.free(be);
    em_free(m);
    return rc;
}
