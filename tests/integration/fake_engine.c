/*
 * tests/integration/fake_engine.c — a small deterministic backend for
 * testing the server (foliod_fake = server + this).  Not a model.
 *
 * It behaves like a paged continuous-batching engine, on bookkeeping only:
 * a pool of KV blocks (free stack, cached FIFO of unreferenced full blocks,
 * used blocks with owner tags), FIFO admission under --max-seqs and the
 * pool, a --max-batch-tokens budget with chunked prefill, tenant
 * max_running / max_kv_blocks, and preemption by recompute (the latest
 * admitted sequence loses its blocks and re-prefills prompt + generated
 * tokens when it resumes).
 *
 * Tokens: the i-th generated token is a pure function of (seed, prompt,
 * i) — seed ignored at temperature 0 — so a stream is identical alone,
 * under load and across preemptions.  Generated ids are in [3, 512);
 * logit_bias +100 forces a token (forcing 2 = EOS ends the sequence
 * unless ignore_eos).  Text: ids < 256 are single bytes (so output
 * exercises the UTF-8 holdback), others are words " wNNN".
 *
 * Env: FOLIO_FAKE_STEP_US (default 1000) sleeps in run() to make steps
 * take time, FOLIO_FAKE_CTX (default 2048) sets the context length.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "folio/common.h"
#include "server.h"

#define VOCAB 512
#define EOS   2

enum { Q_WAIT, Q_RUN };

struct fq {
    struct eng_req *r;
    int state;
    int32_t *toks, len, cap; /* prompt + generated */
    int32_t computed, gen;
    int32_t *blocks, nblk, cap_blk;
    uint64_t phash;
    bool aborted, started, preempted;
    struct fq *prev, *next; /* waiting list */
};

struct slice {
    struct fq *q;
    int32_t n;
    bool sample;
    int32_t out;
};

struct fake {
    int32_t nb, bs, max_seqs, budget;
    uint8_t *bstate; /* PAGER_BLOCK_* */
    int32_t *btokens, *free_stack, n_free;
    uint64_t *bowner;
    uint32_t *btenant;
    int32_t *cached_ring, c_head, n_cached;
    struct fq *wait_head, *wait_tail;
    struct fq **running;
    int n_running;
    struct slice *slices;
    int n_slices;
    unsigned step_us;
    int32_t ctx;
    int64_t preemptions;
    const struct srv_config *cfg;
    int64_t t_blocks[SRV_MAX_TENANTS], t_running[SRV_MAX_TENANTS], t_waiting[SRV_MAX_TENANTS];
};

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static void f_info(void *b, struct eng_model_info *mi)
{
    struct fake *f = b;
    mi->name = "fake-tiny";
    mi->n_vocab = VOCAB;
    mi->ctx_len = f->ctx;
    mi->eos_id = EOS;
}

static int32_t avail(const struct fake *f)
{
    return f->n_free + f->n_cached;
}

static int32_t block_take(struct fake *f, struct fq *q)
{
    int32_t b;
    if (f->n_free)
        b = f->free_stack[--f->n_free];
    else {
        b = f->cached_ring[f->c_head];
        f->c_head = (f->c_head + 1) % f->nb;
        f->n_cached--;
    }
    f->bstate[b] = PAGER_BLOCK_USED;
    f->btokens[b] = 0;
    f->bowner[b] = q->r->id;
    f->btenant[b] = (uint32_t)q->r->tenant;
    f->t_blocks[q->r->tenant]++;
    return b;
}

static void blocks_release(struct fake *f, struct fq *q)
{
    for (int32_t i = 0; i < q->nblk; i++) {
        int32_t b = q->blocks[i];
        if (f->btokens[b] == f->bs && i * f->bs + f->bs <= q->computed) {
            f->bstate[b] = PAGER_BLOCK_CACHED;
            f->cached_ring[(f->c_head + f->n_cached) % f->nb] = b;
            f->n_cached++;
        } else {
            f->bstate[b] = PAGER_BLOCK_FREE;
            f->btokens[b] = 0;
            f->free_stack[f->n_free++] = b;
        }
    }
    f->t_blocks[q->r->tenant] -= q->nblk;
    q->nblk = 0;
}

/* Grows q's blocks to cover n tokens; caller checked availability. */
static int blocks_cover(struct fake *f, struct fq *q, int32_t n)
{
    int32_t need = FOLIO_DIV_CEIL(n, f->bs);
    if (need > q->cap_blk) {
        int32_t *p = folio_realloc(q->blocks, (size_t)need * 2 * sizeof(int32_t));
        if (!p)
            return -ENOMEM;
        q->blocks = p;
        q->cap_blk = need * 2;
    }
    while (q->nblk < need)
        q->blocks[q->nblk++] = block_take(f, q);
    return 0;
}

static void fill_tokens(struct fake *f, struct fq *q)
{
    for (int32_t i = 0; i < q->nblk; i++) {
        int32_t t = q->len - i * f->bs;
        f->btokens[q->blocks[i]] = t < 0 ? 0 : t > f->bs ? f->bs : t;
    }
}

static void wait_unlink(struct fake *f, struct fq *q)
{
    if (q->prev)
        q->prev->next = q->next;
    else
        f->wait_head = q->next;
    if (q->next)
        q->next->prev = q->prev;
    else
        f->wait_tail = q->prev;
    q->prev = q->next = NULL;
    f->t_waiting[q->r->tenant]--;
}

static void wait_push(struct fake *f, struct fq *q, bool front)
{
    q->state = Q_WAIT;
    if (front) {
        q->next = f->wait_head;
        if (f->wait_head)
            f->wait_head->prev = q;
        else
            f->wait_tail = q;
        f->wait_head = q;
    } else {
        q->prev = f->wait_tail;
        if (f->wait_tail)
            f->wait_tail->next = q;
        else
            f->wait_head = q;
        f->wait_tail = q;
    }
    f->t_waiting[q->r->tenant]++;
}

static int f_submit(void *b, struct eng_req *r)
{
    struct fake *f = b;
    int32_t need = FOLIO_DIV_CEIL(r->n_prompt + r->g.max_tokens, f->bs);
    const struct srv_tenant_cfg *tc = &f->cfg->tenants[r->tenant];
    if (need > f->nb || (tc->max_kv_blocks && need > tc->max_kv_blocks))
        return -EINVAL;
    struct fq *q = folio_calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    q->cap = r->n_prompt + r->g.max_tokens;
    q->toks = folio_malloc((size_t)q->cap * sizeof(int32_t));
    if (!q->toks) {
        folio_free(q);
        return -ENOMEM;
    }
    memcpy(q->toks, r->prompt, (size_t)r->n_prompt * sizeof(int32_t));
    q->len = r->n_prompt;
    uint64_t h = 1469598103934665603ull;
    for (int32_t i = 0; i < r->n_prompt; i++)
        h = mix(h ^ (uint64_t)r->prompt[i]);
    q->phash = h;
    q->r = r;
    r->priv = q;
    wait_push(f, q, false);
    return 0;
}

static void f_abort(void *b, struct eng_req *r)
{
    (void)b;
    struct fq *q = r->priv;
    q->aborted = true;
}

static void running_remove(struct fake *f, int i)
{
    f->t_running[f->running[i]->r->tenant]--;
    memmove(&f->running[i], &f->running[i + 1], (size_t)(f->n_running - i - 1) * sizeof(void *));
    f->n_running--;
}

static void q_finish(struct fake *f, struct fq *q, const struct eng_events *ev, enum eng_finish why)
{
    blocks_release(f, q);
    struct eng_req *r = q->r;
    folio_free(q->toks);
    folio_free(q->blocks);
    folio_free(q);
    r->priv = NULL;
    ev->finished(ev->user, r, why);
}

static void preempt(struct fake *f, int i)
{
    struct fq *v = f->running[i];
    running_remove(f, i);
    blocks_release(f, v);
    v->computed = 0;
    v->preempted = true;
    f->preemptions++;
    wait_push(f, v, true);
}

static int f_plan(void *b, const struct eng_events *ev)
{
    struct fake *f = b;
    /* retire aborted requests (no step is in flight) */
    for (int i = 0; i < f->n_running;) {
        struct fq *q = f->running[i];
        if (q->aborted) {
            running_remove(f, i);
            q_finish(f, q, ev, ENG_FINISH_ABORT);
        } else
            i++;
    }
    for (struct fq *q = f->wait_head, *next; q; q = next) {
        next = q->next;
        if (q->aborted) {
            wait_unlink(f, q);
            q_finish(f, q, ev, ENG_FINISH_ABORT);
        }
    }
    /* admit, FIFO; a tenant at its limits is skipped */
    for (struct fq *q = f->wait_head, *next; q && f->n_running < f->max_seqs; q = next) {
        next = q->next;
        int t = q->r->tenant;
        const struct srv_tenant_cfg *tc = &f->cfg->tenants[t];
        int32_t need = FOLIO_DIV_CEIL(q->len + 1, f->bs);
        if (tc->max_running && f->t_running[t] >= tc->max_running)
            continue;
        if (tc->max_kv_blocks && f->t_blocks[t] + need > tc->max_kv_blocks)
            continue;
        if (need > avail(f))
            break;
        if (blocks_cover(f, q, q->len))
            break;
        fill_tokens(f, q);
        wait_unlink(f, q);
        q->state = Q_RUN;
        q->preempted = false;
        f->running[f->n_running++] = q;
        f->t_running[t]++;
        if (!q->started) {
            q->started = true;
            ev->started(ev->user, q->r);
        }
    }
    /* slices under the token budget; reserve the slot of each token a
     * slice will sample, preempting the latest admitted when out of blocks */
    f->n_slices = 0;
    int32_t budget = f->budget, total = 0;
    for (int i = 0; i < f->n_running && budget > 0; i++) {
        struct fq *q = f->running[i];
        int32_t n = FOLIO_MIN(q->len - q->computed, budget);
        if (n <= 0)
            continue;
        bool sample = q->computed + n == q->len;
        if (sample && FOLIO_DIV_CEIL(q->len + 1, f->bs) > q->nblk) {
            while (!avail(f) && f->n_running - 1 > i)
                preempt(f, f->n_running - 1);
            if (!avail(f)) {
                preempt(f, i);
                i--;
                continue;
            }
            blocks_cover(f, q, q->len + 1);
        }
        f->slices[f->n_slices++] = (struct slice){q, n, sample, -1};
        budget -= n;
        total += n;
    }
    return total;
}

static void f_run(void *b)
{
    struct fake *f = b;
    if (f->step_us)
        usleep(f->step_us);
    for (int i = 0; i < f->n_slices; i++) {
        struct slice *s = &f->slices[i];
        if (!s->sample)
            continue;
        const struct eng_req *r = s->q->r;
        uint64_t seed = r->g.sp.temperature == 0 ? 0 : r->g.sp.seed;
        uint64_t x = mix(seed ^ s->q->phash ^ mix((uint64_t)s->q->gen + 1));
        int32_t tok = 3 + (int32_t)(x % (VOCAB - 3));
        for (int32_t k = 0; k < r->g.sp.n_bias; k++)
            if (r->g.sp.bias[k].bias >= 100)
                tok = r->g.sp.bias[k].token;
        s->out = tok;
    }
}

static void f_commit(void *b, const struct eng_events *ev)
{
    struct fake *f = b;
    for (int i = 0; i < f->n_slices; i++) {
        struct slice *s = &f->slices[i];
        struct fq *q = s->q;
        q->computed += s->n;
        if (!s->sample || q->aborted)
            continue;
        q->toks[q->len++] = s->out;
        q->gen++;
        fill_tokens(f, q);
        ev->token(ev->user, q->r, s->out);
        enum eng_finish why = ENG_FINISH_ERROR;
        bool done = false;
        if (s->out == EOS && !q->r->g.ignore_eos)
            why = ENG_FINISH_STOP, done = true;
        else if (q->gen >= q->r->g.max_tokens || q->len >= f->ctx)
            why = ENG_FINISH_LENGTH, done = true;
        if (done) {
            for (int k = 0; k < f->n_running; k++)
                if (f->running[k] == q) {
                    running_remove(f, k);
                    break;
                }
            s->q = NULL;
            q_finish(f, q, ev, why);
        }
    }
    f->n_slices = 0;
}

static void f_stats(void *b, struct eng_stats *st)
{
    struct fake *f = b;
    memset(st, 0, sizeof(*st));
    st->pager.blocks_total = f->nb;
    st->pager.blocks_free = f->n_free;
    st->pager.blocks_cached = f->n_cached;
    st->pager.blocks_used = f->nb - f->n_free - f->n_cached;
    st->pager.bytes_per_block = (size_t)f->bs * 4096;
    st->block_size = f->bs;
    st->kv_dtype = f->cfg->kv_dtype;
    for (int i = 0; i < f->n_running; i++) {
        st->pager.tokens_held += f->running[i]->len;
        st->pager.slots_empty += (int64_t)f->running[i]->nblk * f->bs - f->running[i]->len;
    }
    st->sched.running = f->n_running;
    for (struct fq *q = f->wait_head; q; q = q->next) {
        st->sched.waiting++;
        st->sched.preempted += q->preempted;
    }
    st->sched.preemptions = f->preemptions;
}

static void f_tenant_stats(void *b, int t, struct sched_tenant_stats *st)
{
    struct fake *f = b;
    memset(st, 0, sizeof(*st));
    st->kv_blocks = (int32_t)f->t_blocks[t];
    st->running = (int32_t)f->t_running[t];
    st->waiting = (int32_t)f->t_waiting[t];
}

static int32_t f_n_blocks(void *b)
{
    return ((struct fake *)b)->nb;
}

static void f_block_info(void *b, int32_t i, struct pager_block_info *bi)
{
    struct fake *f = b;
    bi->state = (enum pager_block_state)f->bstate[i];
    bi->refcount = f->bstate[i] == PAGER_BLOCK_USED;
    bi->tokens = f->btokens[i];
    bi->owner = f->bowner[i];
    bi->tenant = f->btenant[i];
}

static int f_detok(void *b, int32_t tok, char *buf, size_t cap)
{
    (void)b;
    if (tok < 0 || tok >= VOCAB)
        return -EINVAL;
    if (tok < 256) {
        buf[0] = (char)tok;
        return 1;
    }
    return snprintf(buf, cap, " w%03d", tok - 256);
}

static void f_free(void *b)
{
    struct fake *f = b;
    if (!f)
        return;
    folio_free(f->bstate);
    folio_free(f->btokens);
    folio_free(f->free_stack);
    folio_free(f->bowner);
    folio_free(f->btenant);
    folio_free(f->cached_ring);
    folio_free(f->running);
    folio_free(f->slices);
    folio_free(f);
}

static const struct eng_backend_ops fake_ops = {
    .kind = "fake",
    .info = f_info,
    .submit = f_submit,
    .abort = f_abort,
    .plan = f_plan,
    .run = f_run,
    .commit = f_commit,
    .stats = f_stats,
    .tenant_stats = f_tenant_stats,
    .n_blocks = f_n_blocks,
    .block_info = f_block_info,
    .detok = f_detok,
    .tokenize = NULL,
    .free = f_free,
};

static int fake_factory(const struct srv_config *cfg, const struct eng_backend_ops **ops,
                        void **out, char *err, size_t errlen)
{
    struct fake *f = folio_calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    f->cfg = cfg;
    f->bs = (int32_t)cfg->block_size;
    f->nb = cfg->kv_blocks ? (int32_t)cfg->kv_blocks
                           : (int32_t)FOLIO_MIN(cfg->kv_mem / ((int64_t)f->bs * 4096), 1 << 20);
    if (f->nb < 1) {
        snprintf(err, errlen, "--kv-mem %lld holds no block", (long long)cfg->kv_mem);
        folio_free(f);
        return -EINVAL;
    }
    f->max_seqs = (int32_t)cfg->max_seqs;
    f->budget = (int32_t)cfg->max_batch_tokens;
    const char *e = getenv("FOLIO_FAKE_STEP_US");
    f->step_us = e ? (unsigned)atoi(e) : 1000;
    e = getenv("FOLIO_FAKE_CTX");
    f->ctx = e ? atoi(e) : 2048;
    f->bstate = folio_calloc((size_t)f->nb, 1);
    f->btokens = folio_calloc((size_t)f->nb, sizeof(int32_t));
    f->free_stack = folio_calloc((size_t)f->nb, sizeof(int32_t));
    f->bowner = folio_calloc((size_t)f->nb, sizeof(uint64_t));
    f->btenant = folio_calloc((size_t)f->nb, sizeof(uint32_t));
    f->cached_ring = folio_calloc((size_t)f->nb, sizeof(int32_t));
    f->running = folio_calloc((size_t)f->max_seqs, sizeof(void *));
    f->slices = folio_calloc((size_t)f->max_seqs, sizeof(struct slice));
    if (!f->bstate || !f->btokens || !f->free_stack || !f->bowner || !f->btenant ||
        !f->cached_ring || !f->running || !f->slices) {
        f_free(f);
        return -ENOMEM;
    }
    for (int32_t i = 0; i < f->nb; i++)
        f->free_stack[f->n_free++] = f->nb - 1 - i;
    *ops = &fake_ops;
    *out = f;
    return 0;
}

int main(int argc, char **argv)
{
    return srv_main(argc, argv, fake_factory);
}
