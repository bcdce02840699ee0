/*
 * daemon/backend.c — scheduler + pager + a step function (see backend.h).
 *
 * Per scheduler request (struct br, r->priv of each of its engine
 * requests): the scheduler's id, its engine requests (one per sample: the
 * n choices of one prompt, forked after one prefill), whether `started`
 * was sent, each sample's finish reason and last sampled token's
 * logprobs, a failed flag (a step row failed: every sample ends with an
 * error), and the ids the sampler bans before min_tokens (the stop set:
 * end-of-generation ids unless ignore_eos, plus the request's stop ids,
 * plus its own banned ids).  A sample's `finished` goes to the server at
 * its FINISHED event; the br is freed at DONE (it touches no engine
 * request then: the server may have freed them all).
 *
 * Logprobs: run() fills res[sample_row]; commit copies it into the
 * sample's slot before sched_step_commit, and the TOKEN event hands it to
 * the server through eng_req.lp (one sampled token per sample per step,
 * so the copy is that token's).  Prompt logprobs: run() scores the rows
 * the scheduler marks (sched_slice.plp_*) into plp[]; commit hands each
 * slice's rows to the server (eng_events.prompt_logprobs) before
 * sched_step_commit, which counts them delivered.  Hidden states
 * (embeddings, eng_gen.hidden_*): run() writes every token's row of the
 * hidden slices into hidden[] (sched_slice.hid_row), and commit hands the
 * rows of the positions each slice delivers (hid_first, hid_n) to the
 * server (eng_events.hidden) the same way.
 */
#include "backend.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "folio/common.h"

struct br {
    uint64_t sid;
    int32_t n;
    bool started, failed;
    struct eng_req **reqs;      /* [n] by sample index */
    struct sampler_result *res; /* [n] the last sampled token's (logprobs) */
    int32_t *stop, n_stop;      /* the stop set (the scheduler copies it) */
    int32_t *ban, n_ban;        /* before min_tokens: g.sp.banned + the stop set */
};

static void br_free(struct br *q)
{
    if (!q)
        return;
    folio_free(q->reqs);
    folio_free(q->res);
    folio_free(q->stop);
    folio_free(q->ban);
    folio_free(q);
}

static int32_t br_sample_of(const struct br *q, const struct eng_req *r)
{
    for (int32_t i = 0; i < q->n; i++)
        if (q->reqs[i] == r)
            return i;
    return -1;
}

const struct eng_req *eng_slice_req(const struct sched_slice *s, struct sampler_params *sp,
                                    struct sampler_history *h)
{
    const struct br *q = s->sampling;
    const struct eng_req *r = q->reqs[s->sample_index];
    if (sp) {
        *sp = r->g.sp;
        if (s->token_index < r->g.min_tokens) {
            sp->banned = q->ban;
            sp->n_banned = q->n_ban;
        }
    }
    if (h)
        *h = (struct sampler_history){s->stream, s->n_prompt,
                                      s->stream ? s->stream + s->n_prompt : NULL,
                                      s->stream ? s->token_index : 0};
    return r;
}

struct eng_backend {
    const struct srv_config *cfg;
    pager_t *pg;
    enum folio_dtype kv_dtype; /* the pool's (--kv-dtype, auto resolved) */
    sched_t *sched;
    struct sched_batch batch;
    int32_t *sampled;           /* [max_seqs] */
    struct sampler_result *res; /* [max_seqs] by sample row */
    struct sampler_result *plp; /* [eng_prompt_logits] the step's prompt rows */
    float *hidden;              /* [max_batch_tokens][n_embd] the step's hidden rows */
    int32_t n_embd;
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
    struct br *q = e->user;
    if (!q || !b->ev)
        return;
    struct eng_req *r = e->sample >= 0 && e->sample < q->n ? q->reqs[e->sample] : NULL;
    switch (e->type) {
    case SCHED_EV_TOKEN:
        r->lp = r->g.n_logprobs >= 0 ? &q->res[e->sample] : NULL;
        r->cached_tokens = e->cached;
        b->ev->token(b->ev->user, r, e->token);
        r->lp = NULL;
        break;
    case SCHED_EV_FINISHED: {
        enum eng_finish why = q->failed                          ? ENG_FINISH_ERROR
                              : e->reason == SCHED_FINISH_LENGTH ? ENG_FINISH_LENGTH
                              : e->reason == SCHED_FINISH_ABORT
                                  ? ENG_FINISH_ABORT
                                  : ENG_FINISH_STOP; /* EOS, stop id */
        r->priv = NULL;
        b->ev->finished(b->ev->user, r, why); /* the server may free r */
        break;
    }
    case SCHED_EV_DONE:
        br_free(q);
        break;
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

/* Appends ids[0, n) not yet in set (set has room for them). */
static void set_add(int32_t *set, int32_t *n_set, const int32_t *ids, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        int32_t k = 0;
        while (k < *n_set && set[k] != ids[i])
            k++;
        if (k == *n_set)
            set[(*n_set)++] = ids[i];
    }
}

static int be_submit(void *p, struct eng_req **rs, int32_t n)
{
    struct eng_backend *b = p;
    const struct eng_gen *g = &rs[0]->g;
    struct br *q = folio_calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    int32_t n_eog = g->ignore_eos ? 0 : b->n_eog;
    q->n = n;
    q->reqs = folio_calloc((size_t)n, sizeof(*q->reqs));
    q->res = folio_calloc((size_t)n, sizeof(*q->res));
    q->stop = folio_malloc(sizeof(int32_t) * (size_t)(n_eog + g->n_stop_ids + 1));
    q->ban = folio_malloc(sizeof(int32_t) * (size_t)(n_eog + g->n_stop_ids + g->sp.n_banned + 1));
    if (!q->reqs || !q->res || !q->stop || !q->ban) {
        br_free(q);
        return -ENOMEM;
    }
    set_add(q->stop, &q->n_stop, b->eog, n_eog);
    set_add(q->stop, &q->n_stop, g->stop_ids, g->n_stop_ids);
    set_add(q->ban, &q->n_ban, g->sp.banned, g->sp.n_banned);
    set_add(q->ban, &q->n_ban, q->stop, q->n_stop);
    for (int32_t i = 0; i < n; i++) {
        q->reqs[i] = rs[i];
        if (rs[i]->g.n_logprobs > SAMPLER_MAX_TOP)
            rs[i]->g.n_logprobs = SAMPLER_MAX_TOP;
        if (rs[i]->g.n_prompt_logprobs > SAMPLER_MAX_TOP)
            rs[i]->g.n_prompt_logprobs = SAMPLER_MAX_TOP;
    }
    struct sched_request_params sp = {
        .prompt = rs[0]->prompt,
        .n_prompt = rs[0]->n_prompt,
        .max_tokens = g->max_tokens,
        .eos_id = b->eos_id,
        .ignore_eos = g->ignore_eos,
        .stop_ids = q->stop,
        .n_stop = q->n_stop,
        .n = n,
        .tenant = (uint32_t)rs[0]->tenant,
        /* the API's priority runs lower first (as vLLM); the scheduler's higher */
        .priority = -g->priority, /* the API's bounds keep this in range */
        .sampling = q,
        .user = q,
        .arrival_ns = folio_now_ns(),
        .prompt_logits = g->n_prompt_logprobs >= 0,
        .hidden_lo = g->hidden_lo,
        .hidden_hi = g->hidden_hi,
        .lora = g->lora,
    };
    if (g->hidden_hi > 0 && !b->n_embd) {
        br_free(q);
        return -EINVAL;
    }
    int rc = sched_request_add(b->sched, &sp, &q->sid);
    if (rc) {
        br_free(q);
        return rc == -E2BIG ? -EINVAL : rc;
    }
    for (int32_t i = 0; i < n; i++)
        rs[i]->priv = q;
    return 0;
}

static void be_abort(void *p, struct eng_req *r)
{
    struct eng_backend *b = p;
    struct br *q = r->priv;
    int32_t i = q ? br_sample_of(q, r) : -1;
    if (i >= 0)
        sched_sample_abort(b->sched, q->sid, i);
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
        struct br *q = b->batch.info[i].user;
        if (q && !q->started) {
            q->started = true;
            for (int32_t k = 0; k < q->n; k++)
                ev->started(ev->user, q->reqs[k]);
        }
    }
    return b->batch.mb.n_tokens > 0 ? b->batch.mb.n_tokens : 1;
}

static void be_run(void *p)
{
    struct eng_backend *b = p;
    b->step->run(b->ctx, &b->batch, b->sampled, b->res, b->plp, b->hidden, b->slice_rc);
}

static void be_commit(void *p, const struct eng_events *ev)
{
    struct eng_backend *b = p;
    b->ev = ev;
    /* A failed row ends its request alone (its token is dropped); a failed
     * forward pass fails every row of the step. */
    for (int32_t i = 0; i < b->batch.mb.n_slices; i++) {
        const struct sched_slice *sl = &b->batch.info[i];
        struct br *q = sl->user;
        if (b->slice_rc[i]) {
            if (q) {
                q->failed = true;
                sched_request_abort(b->sched, q->sid);
            }
            if (sl->sample_row >= 0)
                b->sampled[sl->sample_row] = 0;
            continue;
        }
        if (q && sl->sample_row >= 0 && q->reqs[sl->sample_index]->g.n_logprobs >= 0)
            q->res[sl->sample_index] = b->res[sl->sample_row];
        if (q && sl->plp_n > 0 && ev->prompt_logprobs && !q->failed)
            ev->prompt_logprobs(ev->user, q->reqs[0], sl->plp_first, sl->plp_n,
                                b->plp + sl->plp_index);
        if (q && sl->hid_n > 0 && ev->hidden && !q->failed) {
            int32_t row = sl->hid_row + sl->hid_first - b->batch.mb.slices[i].first_pos;
            ev->hidden(ev->user, q->reqs[0], sl->hid_first, sl->hid_n,
                       b->hidden + (size_t)row * (size_t)b->n_embd, b->n_embd);
        }
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
    st->kv_dtype = folio_dtype_name(b->kv_dtype);
    st->kv_resident = (int64_t)pager_arena_resident(b->pg);
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
    folio_free(b->plp);
    folio_free(b->hidden);
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

/* MemAvailable of /proc/meminfo in bytes; -1 when it cannot be read. */
static int64_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return -1;
    char line[128];
    long long kib = -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1)
            break;
    fclose(f);
    return kib < 0 ? -1 : (int64_t)kib << 10;
}

int eng_backend_new(const struct srv_config *cfg, const struct eng_geom *g,
                    struct eng_backend **out, char *err, size_t errlen)
{
    struct eng_backend *b = folio_calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->cfg = cfg;
    int rc;
    const enum folio_dtype dt =
        cfg->kv_dtype_id == SRV_KV_DTYPE_AUTO ? g->kv_auto : (enum folio_dtype)cfg->kv_dtype_id;
    b->kv_dtype = dt;
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
        .prefault = !cfg->kv_lazy,
        .window = g->window,
    };
    /* a pool the machine could never hold fails now, with a message that
     * says so (with --kv-lazy it would fail only under load) */
    const int64_t avail = mem_available();
    if (!g->no_arena && avail >= 0 && nb * bpb > avail) {
        snprintf(err, errlen,
                 "the KV pool (%lld MiB) exceeds the memory available (%lld MiB, MemAvailable in "
                 "/proc/meminfo): lower --kv-mem or --kv-blocks",
                 (long long)(nb * bpb >> 20), (long long)(avail >> 20));
        rc = -ENOMEM;
        goto fail;
    }
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
    sc.max_prompt_logits = eng_prompt_logits(g->n_vocab);
    sc.on_event = on_sched_event;
    sc.event_ctx = b;
    /* tenants the config does not name (one per unconfigured uid) take
     * tenant "default"'s limits, and each its own salt (from its id) */
    sc.default_tenant = (struct sched_tenant_config){
        .weight = (double)cfg->tenants[0].weight,
        .max_kv_blocks = (int32_t)cfg->tenants[0].max_kv_blocks,
        .max_running_seqs = (int32_t)cfg->tenants[0].max_running,
        .max_waiting = (int32_t)cfg->tenants[0].max_waiting,
    };
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
    b->plp = folio_calloc((size_t)sc.max_prompt_logits, sizeof(*b->plp));
    b->n_embd = g->n_embd;
    if (g->n_embd > 0)
        b->hidden = folio_malloc(sizeof(float) * (size_t)cfg->max_batch_tokens * (size_t)g->n_embd);
    if (!b->sampled || !b->slice_rc || !b->res || !b->plp || (g->n_embd > 0 && !b->hidden)) {
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
