/*
 * daemon/backend.c — scheduler + pager + a step function (see backend.h).
 *
 * Per request (struct br, the backend's half of an eng_req, r->priv): the
 * scheduler's id, whether `started` was sent, the finish reason the
 * scheduler reported, a failed flag (its step row failed), and the last
 * sampled token's logprobs when asked for.  It is freed at DONE, after
 * which `finished` hands the eng_req back to the server.
 *
 * Logprobs: run() fills res[sample_row]; commit copies it into the
 * request's br before sched_step_commit, and the TOKEN event hands it to
 * the server through eng_req.lp (one sampled token per request per step,
 * so the copy is that token's).
 */
#include "backend.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "folio/common.h"

struct br {
    struct eng_req *r;
    uint64_t sid;
    bool started, failed;
    enum eng_finish why;
    struct sampler_result res; /* the last sampled token's, when r->g.n_logprobs >= 0 */
};

struct eng_backend {
    const struct srv_config *cfg;
    pager_t *pg;
    sched_t *sched;
    struct sched_batch batch;
    int32_t *sampled;            /* [max_seqs] */
    struct sampler_result *res;  /* [max_seqs] by sample row */
    int *slice_rc;               /* [max_seqs]: run()'s result per slice */
    const struct eng_events *ev; /* during plan / commit */
    int32_t *eog, n_eog;         /* end-of-generation ids */
    int32_t eos_id;
    const struct eng_step *step;
    void *ctx;
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
    struct eng_backend *b = ctx;
    struct eng_req *r = e->user;
    struct br *q = r ? r->priv : NULL;
    if (!q || !b->ev)
        return;
    switch (e->type) {
    case SCHED_EV_TOKEN:
        r->lp = r->g.n_logprobs >= 0 ? &q->res : NULL;
        b->ev->token(b->ev->user, r, e->token);
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
        b->ev->finished(b->ev->user, r, why);
        break;
    }
    case SCHED_EV_PREEMPTED:
    case SCHED_EV_RESUMED:
        break;
    }
}

static void be_info(void *p, struct eng_model_info *mi)
{
    struct eng_backend *b = p;
    b->step->info(b->ctx, mi);
    mi->kind = b->step->kind;
}

static int be_submit(void *p, struct eng_req *r)
{
    struct eng_backend *b = p;
    struct br *q = folio_calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    q->r = r;
    if (r->g.n_logprobs > SAMPLER_MAX_TOP)
        r->g.n_logprobs = SAMPLER_MAX_TOP;
    struct sched_request_params sp = {
        .prompt = r->prompt,
        .n_prompt = r->n_prompt,
        .max_tokens = r->g.max_tokens,
        .eos_id = b->eos_id,
        .ignore_eos = r->g.ignore_eos,
        .stop_ids = r->g.ignore_eos ? NULL : b->eog,
        .n_stop = r->g.ignore_eos ? 0 : b->n_eog,
        .n = 1,
        .tenant = (uint32_t)r->tenant,
        .sampling = r,
        .user = r,
        .arrival_ns = folio_now_ns(),
    };
    r->priv = q;
    int rc = sched_request_add(b->sched, &sp, &q->sid);
    if (rc) {
        r->priv = NULL;
        folio_free(q);
        return rc == -E2BIG ? -EINVAL : rc;
    }
    return 0;
}

static void be_abort(void *p, struct eng_req *r)
{
    struct eng_backend *b = p;
    struct br *q = r->priv;
    if (q)
        sched_request_abort(b->sched, q->sid);
}

static int be_plan(void *p, const struct eng_events *ev)
{
    struct eng_backend *b = p;
    b->ev = ev;
    int rc = sched_step_plan(b->sched, &b->batch);
    if (rc == -EAGAIN)
        return 0;
    if (rc)
        return rc;
    for (int32_t i = 0; i < b->batch.mb.n_slices; i++) {
        struct eng_req *r = b->batch.info[i].user;
        struct br *q = r ? r->priv : NULL;
        if (q && !q->started) {
            q->started = true;
            /* a new request's first slice starts after its cached prefix */
            r->n_cached = b->batch.mb.slices[i].first_pos;
            ev->started(ev->user, r);
        }
    }
    return b->batch.mb.n_tokens > 0 ? b->batch.mb.n_tokens : 1;
}

static void be_run(void *p)
{
    struct eng_backend *b = p;
    b->step->run(b->ctx, &b->batch, b->sampled, b->res, b->slice_rc);
}

static void be_commit(void *p, const struct eng_events *ev)
{
    struct eng_backend *b = p;
    b->ev = ev;
    /* A failed row ends its request alone (its token is dropped); a failed
     * forward pass fails every row of the step. */
    for (int32_t i = 0; i < b->batch.mb.n_slices; i++) {
        const struct sched_slice *sl = &b->batch.info[i];
        struct eng_req *r = sl->user;
        struct br *q = r ? r->priv : NULL;
        if (b->slice_rc[i]) {
            if (q) {
                q->failed = true;
                sched_request_abort(b->sched, q->sid);
            }
            if (sl->sample_row >= 0)
                b->sampled[sl->sample_row] = 0;
        } else if (q && r->g.n_logprobs >= 0 && sl->sample_row >= 0)
            q->res = b->res[sl->sample_row];
    }
    sched_step_commit(b->sched, b->sampled, b->batch.n_sample);
}

static void be_stats(void *p, struct eng_stats *st)
{
    struct eng_backend *b = p;
    memset(st, 0, sizeof(*st));
    pager_stats_get(b->pg, &st->pager);
    sched_stats_get(b->sched, &st->sched);
    st->block_size = pager_block_size(b->pg);
    st->kv_dtype = b->cfg->kv_dtype;
}

static int be_tenant_set(void *p, int t, const struct srv_tenant_cfg *tc)
{
    struct eng_backend *b = p;
    struct sched_tenant_config stc = {
        .id = (uint32_t)t,
        .weight = (double)tc->weight,
        .max_kv_blocks = (int32_t)tc->max_kv_blocks,
        .max_running_seqs = (int32_t)tc->max_running,
        .max_waiting = (int32_t)tc->max_waiting,
        .salt = fnv1a(tc->name), /* tenants never share cached blocks */
    };
    return sched_tenant_set(b->sched, &stc);
}

static void be_tenant_stats(void *p, int t, struct sched_tenant_stats *st)
{
    struct eng_backend *b = p;
    if (sched_tenant_stats_find(b->sched, (uint32_t)t, st))
        memset(st, 0, sizeof(*st));
}

static int32_t be_n_blocks(void *p)
{
    struct pager_stats ps;
    pager_stats_get(((struct eng_backend *)p)->pg, &ps);
    return (int32_t)ps.blocks_total;
}

static void be_block_info(void *p, int32_t i, struct pager_block_info *bi)
{
    pager_block_info_get(((struct eng_backend *)p)->pg, i, bi);
}

static int be_detok(void *p, int32_t tok, char *buf, size_t cap)
{
    struct eng_backend *b = p;
    return b->step->detok(b->ctx, tok, buf, cap);
}

static int be_tokenize(void *p, const char *text, size_t n, bool parse_special, int32_t **out,
                       int32_t *n_out)
{
    struct eng_backend *b = p;
    if (!b->step->tokenize)
        return -ENOSYS;
    return b->step->tokenize(b->ctx, text, n, parse_special, out, n_out);
}

static bool be_is_eog(void *p, int32_t tok)
{
    struct eng_backend *b = p;
    return b->step->is_eog(b->ctx, tok);
}

static void be_free(void *p)
{
    struct eng_backend *b = p;
    if (!b)
        return;
    if (b->sched)
        sched_free(b->sched);
    if (b->step && b->step->free)
        b->step->free(b->ctx); /* before the pool: a model context may view it */
    if (b->pg)
        pager_free(b->pg);
    folio_free(b->eog);
    folio_free(b->sampled);
    folio_free(b->res);
    folio_free(b->slice_rc);
    folio_free(b);
}

const struct eng_backend_ops eng_backend_ops = {
    .info = be_info,
    .submit = be_submit,
    .abort = be_abort,
    .plan = be_plan,
    .run = be_run,
    .commit = be_commit,
    .stats = be_stats,
    .tenant_set = be_tenant_set,
    .tenant_stats = be_tenant_stats,
    .n_blocks = be_n_blocks,
    .block_info = be_block_info,
    .detok = be_detok,
    .tokenize = be_tokenize,
    .is_eog = be_is_eog,
    .free = be_free,
};

int eng_backend_new(const struct srv_config *cfg, const struct eng_geom *g,
                    struct eng_backend **out, char *err, size_t errlen)
{
    struct eng_backend *b = folio_calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->cfg = cfg;
    int rc;
    const enum folio_dtype dt = (enum folio_dtype)cfg->kv_dtype_id;
    int64_t bpb =
        pager_kv_bytes_per_token(dt, g->n_layers, g->n_kv_heads, g->head_dim) * cfg->block_size;
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
        .n_layers = g->n_layers,
        .n_kv_heads = g->n_kv_heads,
        .head_dim = g->head_dim,
        .dtype = dt,
        .no_arena = g->no_arena,
    };
    if ((rc = pager_init(&b->pg, &pc))) {
        snprintf(err, errlen, "cannot allocate the KV pool (%lld blocks): %s", (long long)nb,
                 strerror(-rc));
        goto fail;
    }
    struct sched_config sc;
    sched_config_default(&sc);
    sc.max_batch_tokens = (int32_t)cfg->max_batch_tokens;
    sc.max_seqs = (int32_t)cfg->max_seqs;
    sc.max_ctx = g->ctx_len;
    sc.on_event = on_sched_event;
    sc.event_ctx = b;
    if ((rc = sched_new(&sc, b->pg, &b->sched))) {
        snprintf(err, errlen,
                 "bad scheduler configuration (--max-batch-tokens %lld must be >= --max-seqs "
                 "%lld): %s",
                 (long long)cfg->max_batch_tokens, (long long)cfg->max_seqs, strerror(-rc));
        goto fail;
    }
    for (int t = 0; t < cfg->n_tenants; t++)
        if ((rc = be_tenant_set(b, t, &cfg->tenants[t]))) {
            snprintf(err, errlen, "tenant '%s': %s", cfg->tenants[t].name, strerror(-rc));
            goto fail;
        }
    b->sampled = folio_calloc((size_t)cfg->max_seqs, sizeof(int32_t));
    b->slice_rc = folio_calloc((size_t)cfg->max_seqs, sizeof(int));
    b->res = folio_calloc((size_t)cfg->max_seqs, sizeof(*b->res));
    if (!b->sampled || !b->slice_rc || !b->res) {
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    *out = b;
    return 0;
fail:
    be_free(b);
    return rc;
}

pager_t *eng_backend_pager(struct eng_backend *b)
{
    return b->pg;
}

int eng_backend_set_step(struct eng_backend *b, const struct eng_step *step, void *ctx)
{
    b->step = step;
    b->ctx = ctx;
    struct eng_model_info mi = {0};
    step->info(ctx, &mi);
    b->eos_id = mi.eos_id;
    b->eog = folio_malloc(sizeof(int32_t) * (size_t)FOLIO_MAX(mi.n_vocab, 1));
    if (!b->eog)
        return -ENOMEM;
    for (int32_t id = 0; id < mi.n_vocab; id++)
        if (step->is_eog(ctx, id))
            b->eog[b->n_eog++] = id;
    return 0;
}
