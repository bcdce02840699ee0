/*
 * daemon/engine_model.c — the real backend behind daemon/engine.h: the
 * scheduler (scheduler/) plans, the model (model/) runs the step and the
 * sampler picks tokens, the pager (pager/) holds K/V.
 *
 *   plan   (loop)    sched_step_plan → batch (arrays owned by the scheduler,
 *                    unchanged until commit); `started` for new requests
 *   run    (engine)  model_forward(batch) → logits [n_sample][n_vocab] →
 *                    sampler_sample per sampling row (token_index keeps a
 *                    preempted stream identical) → sampled[]
 *   commit (loop)    sched_step_commit(sampled) → TOKEN / FINISHED / DONE
 *                    events, translated to eng_events
 *
 * One engine request (one choice of a completion) is one scheduler request
 * with n = 1; its sampling parameters live in struct em_req, which the
 * batch points at (sched_slice.sampling) and which is freed only at DONE.
 * Tenants: scheduler tenant id = index in the config's tenant table.
 *
 * Logprobs: a request with n_logprobs >= 0 has run() fill res[sample_row]
 * (sampler_result: the chosen token's logprob and the top-N); commit copies
 * it into the request's em_req before sched_step_commit, and the TOKEN
 * event hands it to the server through eng_req.lp (one sampled token per
 * request per step, so the copy is that token's).
 *
 * Chat template: read from the model file's tokenizer.chat_template at
 * load (chat_template_from_gguf); the default model has none (-ENOENT).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../model/vocab_synth.h" /* the default model's vocabulary */
#include "engine.h"
#include "folio/chat.h"
#include "folio/common.h"
#include "folio/gguf.h"
#include "folio/model.h"
#include "folio/pager.h"
#include "folio/sampler.h"
#include "folio/scheduler.h"
#include "folio/tokenizer.h"

int eng_model_factory(const struct srv_config *cfg, const struct eng_backend_ops **ops, void **b,
                      char *err, size_t errlen);

struct em_req {
    struct eng_req *r;
    uint64_t sid;
    bool started, failed;
    enum eng_finish why;
    int32_t n_top;             /* < 0: no logprobs */
    struct sampler_result res; /* the last sampled token's, when n_top >= 0 */
};

struct em {
    const struct srv_config *cfg;
    model_t *model;
    struct model_hparams hp;
    pager_t *pg;
    sched_t *sched;
    model_ctx_t *mctx;
    struct sched_batch batch;
    float *logits;              /* [max_seqs][n_vocab] */
    int32_t *sampled;           /* [max_seqs] */
    struct sampler_result *res; /* [max_seqs] by sample row */
    int *slice_rc;              /* [max_seqs]: run()'s result per slice */
    void *work;                 /* sampler workspace */
    int step_rc;
    const struct eng_events *ev; /* during plan / commit */
    tok_t *tok;                  /* NULL: token ids only */
    int32_t *eog, n_eog;         /* end-of-generation ids: every request's stop ids */
    int tmpl, tmpl_rc;           /* chat template from the file (see eng_model_info) */
    char name[80];
};

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void on_sched_event(void *ctx, const struct sched_event *e)
{
    struct em *m = ctx;
    struct eng_req *r = e->user;
    struct em_req *q = r ? r->priv : NULL;
    if (!q || !m->ev)
        return;
    switch (e->type) {
    case SCHED_EV_TOKEN:
        r->lp = q->n_top >= 0 ? &q->res : NULL;
        m->ev->token(m->ev->user, r, e->token);
        r->lp = NULL;
        break;
    case SCHED_EV_FINISHED:
        q->why = e->reason == SCHED_FINISH_LENGTH  ? ENG_FINISH_LENGTH
                 : e->reason == SCHED_FINISH_ABORT ? ENG_FINISH_ABORT
                                                   : ENG_FINISH_STOP; /* EOS or a stop id */
        break;
    case SCHED_EV_DONE: {
        enum eng_finish why = q->failed ? ENG_FINISH_ERROR : q->why;
        folio_free(q);
        r->priv = NULL;
        m->ev->finished(m->ev->user, r, why);
        break;
    }
    case SCHED_EV_PREEMPTED:
    case SCHED_EV_RESUMED:
        break;
    }
}

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
}

static int em_submit(void *b, struct eng_req *r)
{
    struct em *m = b;
    struct em_req *q = folio_calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    q->r = r;
    q->n_top = FOLIO_MIN(r->g.n_logprobs, SAMPLER_MAX_TOP);
    struct sched_request_params p = {
        .prompt = r->prompt,
        .n_prompt = r->n_prompt,
        .max_tokens = r->g.max_tokens,
        .eos_id = m->hp.eos_id,
        .ignore_eos = r->g.ignore_eos,
        .stop_ids = r->g.ignore_eos ? NULL : m->eog,
        .n_stop = r->g.ignore_eos ? 0 : m->n_eog,
        .n = 1,
        .tenant = (uint32_t)r->tenant,
        .sampling = q,
        .user = r,
        .arrival_ns = folio_now_ns(),
    };
    r->priv = q;
    int rc = sched_request_add(m->sched, &p, &q->sid);
    if (rc) {
        r->priv = NULL;
        folio_free(q);
        return rc == -E2BIG ? -EINVAL : rc;
    }
    return 0;
}

static void em_abort(void *b, struct eng_req *r)
{
    struct em *m = b;
    struct em_req *q = r->priv;
    if (q)
        sched_request_abort(m->sched, q->sid);
}

static int em_plan(void *b, const struct eng_events *ev)
{
    struct em *m = b;
    m->ev = ev;
    int rc = sched_step_plan(m->sched, &m->batch);
    if (rc == -EAGAIN)
        return 0;
    if (rc)
        return rc;
    for (int32_t i = 0; i < m->batch.mb.n_slices; i++) {
        struct eng_req *r = m->batch.info[i].user;
        struct em_req *q = r ? r->priv : NULL;
        if (q && !q->started) {
            q->started = true;
            ev->started(ev->user, r);
        }
    }
    m->step_rc = 0;
    return m->batch.mb.n_tokens > 0 ? m->batch.mb.n_tokens : 1;
}

static void em_run(void *b)
{
    struct em *m = b;
    m->step_rc = model_forward(m->mctx, &m->batch.mb, m->logits);
    for (int32_t i = 0; i < m->batch.mb.n_slices; i++) {
        const struct sched_slice *s = &m->batch.info[i];
        m->slice_rc[i] = m->step_rc;
        if (s->sample_row < 0 || m->step_rc)
            continue;
        const struct em_req *q = s->sampling;
        struct sampler_result *res = q->n_top >= 0 ? &m->res[s->sample_row] : NULL;
        m->slice_rc[i] =
            sampler_sample(&q->r->g.sp, m->logits + (size_t)s->sample_row * m->hp.n_vocab,
                           m->hp.n_vocab, (uint64_t)s->token_index, m->work,
                           q->n_top >= 0 ? q->n_top : 0, &m->sampled[s->sample_row], res);
    }
}

static void em_commit(void *b, const struct eng_events *ev)
{
    struct em *m = b;
    m->ev = ev;
    /* A failed row ends its request alone (its token is dropped); a failed
     * forward pass ends every request of the step. */
    for (int32_t i = 0; i < m->batch.mb.n_slices; i++) {
        if (!m->slice_rc[i])
            continue;
        struct eng_req *r = m->batch.info[i].user;
        struct em_req *q = r ? r->priv : NULL;
        if (q) {
            q->failed = true;
            sched_request_abort(m->sched, q->sid);
        }
        if (m->batch.info[i].sample_row >= 0)
            m->sampled[m->batch.info[i].sample_row] = 0;
    }
    for (int32_t i = 0; i < m->batch.mb.n_slices; i++) {
        const struct sched_slice *sl = &m->batch.info[i];
        struct eng_req *r = sl->user;
        struct em_req *q = r ? r->priv : NULL;
        if (q && q->n_top >= 0 && sl->sample_row >= 0 && !m->slice_rc[i])
            q->res = m->res[sl->sample_row];
    }
    sched_step_commit(m->sched, m->sampled, m->batch.n_sample);
}

static void em_stats(void *b, struct eng_stats *st)
{
    struct em *m = b;
    memset(st, 0, sizeof(*st));
    pager_stats_get(m->pg, &st->pager);
    sched_stats_get(m->sched, &st->sched);
    st->block_size = pager_block_size(m->pg);
    st->kv_dtype = m->cfg->kv_dtype;
}

static void em_tenant_stats(void *b, int t, struct sched_tenant_stats *st)
{
    struct em *m = b;
    if (sched_tenant_stats_find(m->sched, (uint32_t)t, st))
        memset(st, 0, sizeof(*st));
}

static int32_t em_n_blocks(void *b)
{
    struct pager_stats ps;
    pager_stats_get(((struct em *)b)->pg, &ps);
    return (int32_t)ps.blocks_total;
}

static void em_block_info(void *b, int32_t i, struct pager_block_info *bi)
{
    pager_block_info_get(((struct em *)b)->pg, i, bi);
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

/* The default model has no file: its tokenizer is the synthetic vocabulary
 * (model/vocab_synth.h), written as a small GGUF holding only the
 * tokenizer keys (the same keys `folio gen-model` writes) and read back by
 * tok_load. */
static int synth_tokenizer(int32_t n_vocab, tok_t **out, char *err, size_t errlen)
{
    struct vocab_synth v;
    int rc = vocab_synth_build(n_vocab, &v);
    if (rc)
        return rc;
    gguf_writer_t *w = NULL;
    char path[] = "/tmp/foliod-vocab-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        vocab_synth_free(&v);
        return -errno;
    }
    close(fd);
    if (!(rc = gguf_writer_new(&w)) && !(rc = gguf_w_str(w, "general.architecture", "llama")) &&
        !(rc = gguf_w_str(w, "tokenizer.ggml.model", "llama")) &&
        !(rc = gguf_w_arr_str(w, "tokenizer.ggml.tokens", v.tokens, (uint64_t)n_vocab)) &&
        !(rc = gguf_w_arr_f32(w, "tokenizer.ggml.scores", v.scores, (uint64_t)n_vocab)) &&
        !(rc = gguf_w_arr_i32(w, "tokenizer.ggml.token_type", v.types, (uint64_t)n_vocab)) &&
        !(rc = gguf_w_u32(w, "tokenizer.ggml.bos_token_id", VOCAB_SYNTH_BOS_ID)) &&
        !(rc = gguf_w_u32(w, "tokenizer.ggml.eos_token_id", VOCAB_SYNTH_EOS_ID)) &&
        !(rc = gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", VOCAB_SYNTH_UNK_ID)) &&
        !(rc = gguf_w_bool(w, "tokenizer.ggml.add_bos_token", true)) &&
        !(rc = gguf_w_bool(w, "tokenizer.ggml.add_eos_token", false)) &&
        !(rc = gguf_writer_write(w, path, err, errlen))) {
        gguf_file_t *f = NULL;
        if (!(rc = gguf_open(path, &f, err, errlen)))
            rc = tok_load(f, out, err, errlen);
        gguf_close(f);
    }
    gguf_writer_free(w);
    unlink(path);
    vocab_synth_free(&v);
    return rc;
}

static int load_tokenizer(struct em *m, char *err, size_t errlen)
{
    m->tmpl_rc = -ENOENT;
    if (!m->cfg->model)
        return synth_tokenizer(m->hp.n_vocab, &m->tok, err, errlen);
    gguf_file_t *f = NULL;
    int rc = gguf_open(m->cfg->model, &f, err, errlen);
    if (!rc) {
        char terr[200];
        enum chat_template t = 0;
        m->tmpl_rc = chat_template_from_gguf(f, &t, terr, sizeof(terr));
        m->tmpl = m->tmpl_rc ? 0 : (int)t;
        if (m->tmpl_rc && m->tmpl_rc != -ENOENT)
            m->tmpl_rc = -ENOTSUP;
        rc = tok_load(f, &m->tok, err, errlen);
    }
    gguf_close(f);
    return rc;
}

static void em_free(void *b)
{
    struct em *m = b;
    if (!m)
        return;
    if (m->sched)
        sched_free(m->sched);
    if (m->mctx)
        model_ctx_free(m->mctx);
    if (m->pg)
        pager_free(m->pg);
    if (m->model)
        model_free(m->model);
    if (m->tok)
        tok_free(m->tok);
    folio_free(m->eog);
    folio_free(m->logits);
    folio_free(m->sampled);
    folio_free(m->res);
    folio_free(m->slice_rc);
    folio_free(m->work);
    folio_free(m);
}

static const struct eng_backend_ops em_ops = {
    .kind = "model",
    .info = em_info,
    .submit = em_submit,
    .abort = em_abort,
    .plan = em_plan,
    .run = em_run,
    .commit = em_commit,
    .stats = em_stats,
    .tenant_stats = em_tenant_stats,
    .n_blocks = em_n_blocks,
    .block_info = em_block_info,
    .detok = em_detok,
    .tokenize = em_tokenize,
    .is_eog = em_is_eog,
    .free = em_free,
};

int eng_model_factory(const struct srv_config *cfg, const struct eng_backend_ops **ops, void **out,
                      char *err, size_t errlen)
{
    struct em *m = folio_calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->cfg = cfg;
    int rc = cfg->model ? model_load_file(cfg->model, &m->model, err, errlen)
                        : model_load_default(&m->model, err, errlen);
    if (rc)
        goto fail;
    m->hp = *model_hparams(m->model);
    snprintf(m->name, sizeof(m->name), "%s", model_name(m->model));
    enum folio_dtype dt = cfg->kv_dtype_id == SRV_KV_F16 ? FOLIO_F16 : FOLIO_F32;
    int64_t bpb = 2LL * m->hp.n_layers * m->hp.n_kv_heads * m->hp.head_dim * cfg->block_size *
                  (int64_t)folio_dtype_size(dt);
    int64_t nb = cfg->kv_blocks ? cfg->kv_blocks : cfg->kv_mem / bpb;
    if (nb < 1 || nb > INT32_MAX) {
        snprintf(err, errlen, "--kv-mem %lld holds %lld blocks of %lld bytes",
                 (long long)cfg->kv_mem, (long long)nb, (long long)bpb);
        rc = -EINVAL;
        goto fail;
    }
    struct pager_config pc = {
        .num_blocks = (int32_t)nb,
        .block_size = (int32_t)cfg->block_size,
        .n_layers = m->hp.n_layers,
        .n_kv_heads = m->hp.n_kv_heads,
        .head_dim = m->hp.head_dim,
        .dtype = dt,
    };
    if ((rc = pager_init(&m->pg, &pc))) {
        snprintf(err, errlen, "cannot allocate the KV pool (%lld blocks): %s", (long long)nb,
                 strerror(-rc));
        goto fail;
    }
    struct pager_kv_view view;
    pager_kv_view(m->pg, &view);
    struct model_ctx_config mc = {
        .max_tokens = (int32_t)cfg->max_batch_tokens,
        .max_slices = (int32_t)cfg->max_seqs,
        /* --threads 0: one compute thread per online CPU */
        .n_threads = cfg->threads > 0 ? (int32_t)cfg->threads
                                      : (int32_t)FOLIO_MAX(1, sysconf(_SC_NPROCESSORS_ONLN)),
    };
    if ((rc = model_ctx_new(m->model, &view, &mc, &m->mctx))) {
        snprintf(err, errlen, "cannot create the model context: %s", strerror(-rc));
        goto fail;
    }
    struct sched_config sc;
    sched_config_default(&sc);
    sc.max_batch_tokens = (int32_t)cfg->max_batch_tokens;
    sc.max_seqs = (int32_t)cfg->max_seqs;
    sc.max_ctx = m->hp.ctx_len;
    sc.on_event = on_sched_event;
    sc.event_ctx = m;
    if ((rc = sched_new(&sc, m->pg, &m->sched))) {
        snprintf(err, errlen,
                 "bad scheduler configuration (--max-batch-tokens %lld must be >= --max-seqs "
                 "%lld): %s",
                 (long long)cfg->max_batch_tokens, (long long)cfg->max_seqs, strerror(-rc));
        goto fail;
    }
    for (int t = 0; t < cfg->n_tenants; t++) {
        const struct srv_tenant_cfg *tc = &cfg->tenants[t];
        struct sched_tenant_config stc = {
            .id = (uint32_t)t,
            .weight = (double)tc->weight,
            .max_kv_blocks = (int32_t)tc->max_kv_blocks,
            .max_running_seqs = (int32_t)tc->max_running,
            .max_waiting = (int32_t)tc->max_waiting,
            .salt = fnv1a(tc->name),
        };
        if ((rc = sched_tenant_set(m->sched, &stc))) {
            snprintf(err, errlen, "tenant '%s': %s", tc->name, strerror(-rc));
            goto fail;
        }
    }
    m->logits = folio_malloc((size_t)cfg->max_seqs * (size_t)m->hp.n_vocab * sizeof(float));
    m->sampled = folio_calloc((size_t)cfg->max_seqs, sizeof(int32_t));
    m->slice_rc = folio_calloc((size_t)cfg->max_seqs, sizeof(int));
    m->res = folio_calloc((size_t)cfg->max_seqs, sizeof(*m->res));
    m->work = folio_malloc(sampler_work_size(m->hp.n_vocab));
    if (!m->logits || !m->sampled || !m->slice_rc || !m->res || !m->work) {
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    /* Without a usable tokenizer the server still serves token ids. */
    char terr[256] = "";
    if (load_tokenizer(m, terr, sizeof(terr)) || tok_n_vocab(m->tok) != m->hp.n_vocab) {
        if (m->tok)
            tok_free(m->tok);
        m->tok = NULL;
    }
    /* end of generation: the tokenizer's EOS / EOT ids, else eos_id */
    m->eog = folio_malloc(sizeof(int32_t) * (size_t)m->hp.n_vocab);
    if (!m->eog) {
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (int32_t id = 0; id < m->hp.n_vocab; id++)
        if (em_is_eog(m, id))
            m->eog[m->n_eog++] = id;
    *ops = &em_ops;
    *out = m;
    return 0;
fail:
    em_free(m);
    return rc;
}
