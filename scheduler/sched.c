/*
 * scheduler/sched.c — queues, step planning, commit, preemption, fair share
 * (the contract and the policy are described in include/folio/scheduler.h).
 *
 * Data layout:
 *
 *   sched ─┬─ table: open-addressing hash, request id -> struct req
 *          ├─ running:   req <-> req <-> ...  admission order (admit_seq
 *          │             asc; priority protects only from one's own
 *          │             tenant: pick_victim)
 *          ├─ preempted: req <-> ...          (priority desc, admit_seq asc)
 *          ├─ tenants[]: config, vtc, waiting list (priority desc, id asc),
 *          │             per-queue counts, stats
 *          └─ the step: tokens[max_batch_tokens], slices[max_seqs],
 *                       info[max_seqs], refs[max_seqs] (req, sample)
 *
 *   struct req ─ samples[n]: stream[cap] = prompt ++ generated tokens,
 *                            len (= n_prompt + generated), computed,
 *                            seq (pager_seq or NULL), finish reason;
 *                plp_done: prompt positions whose rows went out (prompt
 *                logits or hidden states: positions [plp_done, plp_end)
 *                are still owed)
 *
 * Invariants (sched_check walks them):
 *   - each request is on exactly one list, the one its `queue` names;
 *   - WAITING and PREEMPTED requests hold no page table;
 *   - a RUNNING request's live samples hold page tables (before the fork
 *     of an n > 1 request: sample 0 only) with exactly `computed` tokens,
 *     equal to the stream's first `computed` tokens, plus, while a step is
 *     in flight, the step's tokens of that sample; computed < len;
 *   - finished samples hold nothing; running_seqs = sum of live samples
 *     over running requests <= max_seqs;
 *   - a request that still owes prompt rows (plp_done < plp_end: prompt
 *     logits, or hidden states) has computed no position past plp_done on
 *     sample 0 (cached prefixes are cut there), so every owed row gets
 *     computed;
 *   - a step has <= max_batch_tokens tokens and <= max_seqs slices, its
 *     logits rows follow slice order, its all_logits slices hold <=
 *     max_prompt_logits tokens, its hidden rows follow slice order.
 *
 * Threading: none (see the header).  Nothing referenced by the batch is
 * freed before sched_step_commit: aborts are only applied at commit or at
 * the start of a plan.
 */
#include "folio/scheduler.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum queue { Q_WAITING, Q_RUNNING, Q_PREEMPTED };

struct sample {
    int32_t *stream; /* [cap]: prompt ++ generated */
    int32_t len;     /* stream tokens known */
    int32_t cap;     /* min(n_prompt + max_tokens, max_ctx) */
    int32_t computed;
    int32_t hiwater; /* most tokens ever computed (recompute is not charged) */
    int32_t step_n;  /* tokens of this sample in the step in flight */
    pager_seq_t *seq;
    enum sched_finish_reason fin;
    bool aborted; /* sched_sample_abort: finish at the next reclaim */
};

struct req {
    uint64_t id;
    struct req *prev, *next; /* queue links */
    enum queue queue;
    int32_t tenant; /* index into sched.tenants */
    int32_t priority;
    uint64_t admit_seq; /* order of the latest admission */
    uint64_t step_mark; /* == sched.step_no: has tokens in the step being planned */
    int32_t n_prompt, max_tokens, n, n_live;
    int32_t eos_id, n_stop;
    int32_t *stop_ids;
    bool ignore_eos, forked, aborted, ever_admitted, done_pending;
    bool sample_aborts; /* some sample is marked aborted, not yet reclaimed */
    int32_t cached;     /* prefix-cache hit of the first admission (sample 0) */
    bool prompt_logits; /* wants prompt log-probabilities (else hidden states) ... */
    int32_t plp_end;    /* ... of positions below this (0: none) ... */
    int32_t plp_done;   /* ... and has been delivered them below this */
    int32_t lora;       /* model_slice.lora of its slices */
    const void *sampling;
    void *user;
    uint64_t arrival_ns;
    struct sample *samples; /* [n] */
};

struct list {
    struct req *head, *tail;
    int32_t len;
};

struct tenant {
    struct sched_tenant_config cfg;
    double vtc;
    struct list waiting;
    int32_t n_running, n_preempted, running_seqs;
    int32_t kv_blocks; /* valid while planning */
    uint64_t skip_step;
    int64_t prefill_tokens, decode_tokens, generated_tokens;
    int64_t preemptions, admitted, finished, refused;
};

struct ref {
    struct req *r;
    int32_t sample;
};

struct sched {
    struct sched_config cfg;
    pager_t *pg;
    int32_t bs;
    int32_t watermark;
    int64_t blocks_total;
    /* id -> req */
    struct req **table;
    uint32_t table_cap, table_len;
    uint64_t next_id, admit_counter, step_no;
    struct list running, preempted;
    int32_t running_seqs;
    int64_t reserved_blocks; /* reserve_max_len policy */
    /* Most blocks one sample can hold: its whole max_ctx, or with a
     * sliding window the blocks of one window plus a step's chunk. */
    int32_t seq_max_blocks;
    int32_t n_aborted;  /* marked, not yet reclaimed */
    int32_t n_unforked; /* n > 1 requests not yet forked */
    bool any_kv_limit;  /* some tenant has max_kv_blocks: track kv_blocks */
    struct tenant *tenants;
    int32_t n_tenants, cap_tenants;
    /* the step */
    bool in_flight;
    int32_t *tokens;
    struct model_slice *slices;
    struct sched_slice *info;
    struct ref *refs;
    pager_seq_t **scratch_seqs; /* [max_seqs] */
    int32_t *scratch_chunks;    /* [max_seqs] */
    int32_t n_tokens, n_slices, n_sample;
    int32_t n_logits, n_plp; /* logits rows; prompt rows to deliver */
    int32_t n_hidden;        /* hidden-state rows (tokens of hidden slices) */
    int32_t plp_tokens;      /* tokens of all_logits slices (<= max_prompt_logits) */
    struct sched_stats st;
};

/* ---- small helpers ---------------------------------------------------- */

static void emit(sched_t *s, const struct req *r, enum sched_event_type type, int32_t sample)
{
    if (!s->cfg.on_event)
        return;
    struct sched_event ev = {
        .type = type,
        .request_id = r->id,
        .user = r->user,
        .sample = sample,
        .token = -1,
        .token_index = -1,
        .tenant = s->tenants[r->tenant].cfg.id,
    };
    if (type == SCHED_EV_FINISHED)
        ev.reason = r->samples[sample].fin;
    s->cfg.on_event(s->cfg.event_ctx, &ev);
}

static void list_unlink(struct list *l, struct req *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        l->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        l->tail = r->prev;
    r->prev = r->next = NULL;
    l->len--;
}

static void list_insert_after(struct list *l, struct req *pos, struct req *r)
{
    r->prev = pos;
    r->next = pos ? pos->next : l->head;
    if (r->next)
        r->next->prev = r;
    else
        l->tail = r;
    if (pos)
        pos->next = r;
    else
        l->head = r;
    l->len++;
}

/* true if a runs before b: higher priority, then earlier key */
static bool before(int32_t pa, uint64_t ka, int32_t pb, uint64_t kb)
{
    return pa > pb || (pa == pb && ka < kb);
}

/* Sorted insert by (priority desc, admit_seq asc), walking from the tail
 * (new admissions are the most recent, so usually O(1)). */
static void list_insert_admitted(struct list *l, struct req *r)
{
    struct req *p = l->tail;
    while (p && before(r->priority, r->admit_seq, p->priority, p->admit_seq))
        p = p->prev;
    list_insert_after(l, p, r);
}

/* Running requests: admission order only (tenant-neutral: a priority
 * must not put one tenant's requests ahead of another's in a step). */
static void list_insert_running(struct list *l, struct req *r)
{
    struct req *p = l->tail;
    while (p && r->admit_seq < p->admit_seq)
        p = p->prev;
    list_insert_after(l, p, r);
}

static void list_insert_waiting(struct list *l, struct req *r)
{
    struct req *p = l->tail;
    while (p && before(r->priority, r->id, p->priority, p->id))
        p = p->prev;
    list_insert_after(l, p, r);
}

static uint64_t hash_id(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static int table_grow(sched_t *s)
{
    uint32_t ncap = s->table_cap ? s->table_cap * 2 : 64;
    struct req **nt = folio_calloc(ncap, sizeof(*nt));
    if (!nt)
        return -ENOMEM;
    for (uint32_t i = 0; i < s->table_cap; i++) {
        struct req *r = s->table[i];
        if (!r)
            continue;
        uint32_t j = (uint32_t)hash_id(r->id) & (ncap - 1);
        while (nt[j])
            j = (j + 1) & (ncap - 1);
        nt[j] = r;
    }
    folio_free(s->table);
    s->table = nt;
    s->table_cap = ncap;
    return 0;
}

static uint32_t table_slot(const sched_t *s, uint64_t id)
{
    uint32_t mask = s->table_cap - 1;
    uint32_t j = (uint32_t)hash_id(id) & mask;
    while (s->table[j] && s->table[j]->id != id)
        j = (j + 1) & mask;
    return j;
}

static struct req *table_find(const sched_t *s, uint64_t id)
{
    if (!s->table_cap)
        return NULL;
    return s->table[table_slot(s, id)];
}

static void table_remove(sched_t *s, uint64_t id)
{
    uint32_t mask = s->table_cap - 1;
    uint32_t j = table_slot(s, id);
    if (!s->table[j])
        return;
    s->table[j] = NULL;
    s->table_len--;
    /* backward-shift deletion keeps every probe chain unbroken */
    for (uint32_t k = (j + 1) & mask; s->table[k]; k = (k + 1) & mask) {
        uint32_t home = (uint32_t)hash_id(s->table[k]->id) & mask;
        bool movable = (k > j) ? (home <= j || home > k) : (home <= j && home > k);
        if (movable) {
            s->table[j] = s->table[k];
            s->table[k] = NULL;
            j = k;
        }
    }
}

/* Blocks a page table holds (with a window, those still in it). */
static int32_t seq_blocks(const sched_t *s, const pager_seq_t *seq)
{
    (void)s;
    return seq ? pager_seq_blocks_held(seq) : 0;
}

/* Most blocks a sample of at most cap tokens holds at once. */
static int32_t cap_blocks(const sched_t *s, int32_t cap)
{
    return FOLIO_MIN(FOLIO_DIV_CEIL(cap, s->bs),
                     pager_window_blocks(s->pg, s->cfg.max_batch_tokens));
}

static uint64_t tenant_salt(const struct sched_tenant_config *c)
{
    return c->salt ? c->salt : hash_id(((uint64_t)c->id << 1) | 1) ^ 0x666f6c696fULL;
}

/* The prefix-cache salt of r's sequences: its tenant's, and, with an
 * adapter, one of that adapter's own (K/V computed through an adapter
 * differ from the base model's, so they are never shared across them). */
static uint64_t req_salt(const sched_t *s, const struct req *r)
{
    uint64_t salt = tenant_salt(&s->tenants[r->tenant].cfg);
    return r->lora ? salt ^ hash_id(((uint64_t)(uint32_t)r->lora << 32) | 0x4c6f5241u) : salt;
}

static int tenant_find(const sched_t *s, uint32_t id)
{
    for (int i = 0; i < s->n_tenants; i++)
        if (s->tenants[i].cfg.id == id)
            return i;
    return -1;
}

static int tenant_get(sched_t *s, uint32_t id, int *idx)
{
    int i = tenant_find(s, id);
    if (i < 0) {
        if (s->n_tenants == s->cap_tenants) {
            int32_t ncap = s->cap_tenants ? s->cap_tenants * 2 : 8;
            struct tenant *nt = folio_realloc(s->tenants, (size_t)ncap * sizeof(*nt));
            if (!nt)
                return -ENOMEM;
            s->tenants = nt;
            s->cap_tenants = ncap;
        }
        i = s->n_tenants++;
        struct tenant *t = &s->tenants[i];
        memset(t, 0, sizeof(*t));
        t->cfg = s->cfg.default_tenant;
        t->cfg.id = id;
        t->skip_step = UINT64_MAX;
    }
    *idx = i;
    return 0;
}

/* ---- lifetime --------------------------------------------------------- */

void sched_config_default(struct sched_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->max_batch_tokens = 2048;
    cfg->max_seqs = 256;
    cfg->max_ctx = 4096;
    cfg->watermark_blocks = -1;
    cfg->weight_in = 1.0;
    cfg->weight_out = 2.0;
    cfg->max_prompt_logits = 128;
    cfg->default_tenant.weight = 1.0;
}

int sched_new(const struct sched_config *cfg, pager_t *pg, sched_t **out)
{
    *out = NULL;
    if (!pg || cfg->max_seqs < 1 || cfg->max_batch_tokens < cfg->max_seqs || cfg->max_ctx < 2 ||
        cfg->max_prompt_logits < 0 || cfg->default_tenant.weight < 0)
        return -EINVAL;
    sched_t *s = folio_calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->cfg = *cfg;
    if (s->cfg.weight_in <= 0)
        s->cfg.weight_in = 1.0;
    if (s->cfg.weight_out <= 0)
        s->cfg.weight_out = 2.0;
    if (s->cfg.default_tenant.weight <= 0)
        s->cfg.default_tenant.weight = 1.0;
    s->pg = pg;
    s->bs = pager_block_size(pg);
    struct pager_stats ps;
    pager_stats_get(pg, &ps);
    s->blocks_total = ps.blocks_total;
    s->seq_max_blocks = cap_blocks(s, cfg->max_ctx);
    s->watermark =
        cfg->watermark_blocks >= 0 ? cfg->watermark_blocks : (int32_t)(ps.blocks_total / 100);
    s->next_id = 1;
    s->any_kv_limit = cfg->default_tenant.max_kv_blocks > 0;
    s->tokens = folio_malloc((size_t)cfg->max_batch_tokens * sizeof(*s->tokens));
    s->slices = folio_calloc((size_t)cfg->max_seqs, sizeof(*s->slices));
    s->info = folio_calloc((size_t)cfg->max_seqs, sizeof(*s->info));
    s->refs = folio_calloc((size_t)cfg->max_seqs, sizeof(*s->refs));
    s->scratch_seqs = folio_calloc((size_t)cfg->max_seqs, sizeof(*s->scratch_seqs));
    s->scratch_chunks = folio_calloc((size_t)cfg->max_seqs, sizeof(*s->scratch_chunks));
    if (!s->tokens || !s->slices || !s->info || !s->refs || !s->scratch_seqs ||
        !s->scratch_chunks || table_grow(s)) {
        sched_free(s);
        return -ENOMEM;
    }
    *out = s;
    return 0;
}

static void req_release(sched_t *s, struct req *r)
{
    for (int32_t i = 0; i < r->n; i++) {
        if (r->samples[i].seq)
            pager_seq_free(s->pg, r->samples[i].seq);
        folio_free(r->samples[i].stream);
    }
    folio_free(r->samples);
    folio_free(r->stop_ids);
    folio_free(r);
}

void sched_free(sched_t *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < s->table_cap; i++)
        if (s->table[i])
            req_release(s, s->table[i]);
    folio_free(s->table);
    folio_free(s->tenants);
    folio_free(s->tokens);
    folio_free(s->slices);
    folio_free(s->info);
    folio_free(s->refs);
    folio_free(s->scratch_seqs);
    folio_free(s->scratch_chunks);
    folio_free(s);
}

int sched_tenant_set(sched_t *s, const struct sched_tenant_config *tc)
{
    if (tc->weight < 0 || tc->max_kv_blocks < 0 || tc->max_running_seqs < 0 || tc->max_waiting < 0)
        return -EINVAL;
    int i;
    int rc = tenant_get(s, tc->id, &i);
    if (rc)
        return rc;
    s->tenants[i].cfg = *tc;
    if (s->tenants[i].cfg.weight <= 0)
        s->tenants[i].cfg.weight = 1.0;
    if (tc->max_kv_blocks)
        s->any_kv_limit = true;
    return 0;
}

/* ---- requests --------------------------------------------------------- */

/* VTC: a tenant that becomes backlogged gets no credit for idling. */
static void tenant_lift(sched_t *s, struct tenant *t)
{
    double lo = 0;
    bool any = false;
    for (int i = 0; i < s->n_tenants; i++) {
        struct tenant *o = &s->tenants[i];
        if (o != t && o->waiting.len > 0 && (!any || o->vtc < lo)) {
            lo = o->vtc;
            any = true;
        }
    }
    if (!any)
        for (int i = 0; i < s->n_tenants; i++) {
            struct tenant *o = &s->tenants[i];
            if (o != t && o->n_running + o->n_preempted > 0 && (!any || o->vtc < lo)) {
                lo = o->vtc;
                any = true;
            }
        }
    if (any && t->vtc < lo)
        t->vtc = lo;
}

int sched_request_add(sched_t *s, const struct sched_request_params *p, uint64_t *id)
{
    if (!p->prompt || p->n_prompt < 1 || p->max_tokens < 1 || p->n < 1 || p->n > s->cfg.max_seqs ||
        p->n_stop < 0 || (p->n_stop && !p->stop_ids) || p->lora < 0 ||
        (p->prompt_logits && s->cfg.max_prompt_logits < 1) ||
        (p->hidden_hi && (p->prompt_logits || p->n != 1 || p->hidden_lo < 0 ||
                          p->hidden_lo >= p->hidden_hi || p->hidden_hi > p->n_prompt)))
        return -EINVAL;
    if (p->n_prompt >= s->cfg.max_ctx)
        return -E2BIG;
    int ti;
    int rc = tenant_get(s, p->tenant, &ti);
    if (rc)
        return rc;
    struct tenant *t = &s->tenants[ti];
    int32_t cap = (int32_t)FOLIO_MIN((int64_t)p->n_prompt + p->max_tokens, s->cfg.max_ctx);
    int64_t need = (int64_t)p->n * cap_blocks(s, cap);
    if (need > s->blocks_total || (t->cfg.max_kv_blocks && need > t->cfg.max_kv_blocks) ||
        (t->cfg.max_running_seqs && p->n > t->cfg.max_running_seqs))
        return -E2BIG; /* could never run, even alone */
    if (s->cfg.reserve_max_len && (int64_t)p->n * s->seq_max_blocks > s->blocks_total)
        return -E2BIG;
    if (t->cfg.max_waiting && t->waiting.len >= t->cfg.max_waiting) {
        t->refused++;
        s->st.refused++;
        return -EBUSY;
    }
    if (s->table_len + 1 > s->table_cap / 2 && (rc = table_grow(s)))
        return rc;

    struct req *r = folio_calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->samples = folio_calloc((size_t)p->n, sizeof(*r->samples));
    r->stop_ids = p->n_stop ? folio_malloc((size_t)p->n_stop * sizeof(int32_t)) : NULL;
    r->n = p->n;
    if (!r->samples || (p->n_stop && !r->stop_ids))
        goto nomem;
    for (int32_t i = 0; i < p->n; i++) {
        struct sample *sm = &r->samples[i];
        sm->stream = folio_malloc((size_t)cap * sizeof(int32_t));
        if (!sm->stream)
            goto nomem;
        memcpy(sm->stream, p->prompt, (size_t)p->n_prompt * sizeof(int32_t));
        sm->len = p->n_prompt;
        sm->cap = cap;
    }
    if (p->n_stop)
        memcpy(r->stop_ids, p->stop_ids, (size_t)p->n_stop * sizeof(int32_t));
    r->id = s->next_id++;
    r->queue = Q_WAITING;
    r->tenant = ti;
    r->priority = p->priority;
    r->n_prompt = p->n_prompt;
    r->max_tokens = p->max_tokens;
    r->n_live = p->n;
    r->eos_id = p->eos_id;
    r->n_stop = p->n_stop;
    r->ignore_eos = p->ignore_eos;
    r->forked = p->n == 1;
    r->prompt_logits = p->prompt_logits;
    r->lora = p->lora;
    r->plp_end = p->prompt_logits ? p->n_prompt - 1 : p->hidden_hi;
    r->plp_done = p->prompt_logits ? 0 : p->hidden_lo;
    s->n_unforked += !r->forked;
    r->sampling = p->sampling;
    r->user = p->user;
    r->arrival_ns = p->arrival_ns;
    r->step_mark = UINT64_MAX;

    s->table[table_slot(s, r->id)] = r;
    s->table_len++;
    if (t->waiting.len == 0)
        tenant_lift(s, t);
    list_insert_waiting(&t->waiting, r);
    *id = r->id;
    return 0;
nomem:
    req_release(s, r);
    return -ENOMEM;
}

int sched_request_abort(sched_t *s, uint64_t id)
{
    struct req *r = table_find(s, id);
    if (!r)
        return -ENOENT;
    if (!r->aborted)
        s->n_aborted++;
    r->aborted = true;
    return 0;
}

int sched_sample_abort(sched_t *s, uint64_t id, int32_t sample)
{
    struct req *r = table_find(s, id);
    if (!r)
        return -ENOENT;
    if (sample < 0 || sample >= r->n)
        return -EINVAL;
    struct sample *sm = &r->samples[sample];
    if (sm->fin != SCHED_FINISH_NONE || sm->aborted || r->aborted)
        return 0;
    sm->aborted = true;
    bool all = true;
    for (int32_t i = 0; i < r->n; i++)
        all &= r->samples[i].fin != SCHED_FINISH_NONE || r->samples[i].aborted;
    if (all)
        return sched_request_abort(s, id);
    if (!r->sample_aborts)
        s->n_aborted++;
    r->sample_aborts = true;
    return 0;
}

/* ---- retiring --------------------------------------------------------- */

static void sample_release(sched_t *s, struct req *r, struct sample *sm)
{
    if (!sm->seq)
        return;
    if (r->queue == Q_RUNNING) {
        s->tenants[r->tenant].kv_blocks -= seq_blocks(s, sm->seq);
    }
    pager_seq_free(s->pg, sm->seq);
    sm->seq = NULL;
}

/* Finishes one live sample (its pages are freed). */
static void sample_finish(sched_t *s, struct req *r, int32_t i, enum sched_finish_reason why)
{
    struct sample *sm = &r->samples[i];
    sm->fin = why;
    sample_release(s, r, sm);
    r->n_live--;
    if (r->queue == Q_RUNNING) {
        s->running_seqs--;
        s->tenants[r->tenant].running_seqs--;
    }
    emit(s, r, SCHED_EV_FINISHED, i);
}

/* Removes a request whose samples all finished: DONE, then forgotten. */
static void req_done(sched_t *s, struct req *r)
{
    struct tenant *t = &s->tenants[r->tenant];
    for (int32_t i = 0; i < r->n; i++)
        sample_release(s, r, &r->samples[i]);
    switch (r->queue) {
    case Q_WAITING:
        list_unlink(&t->waiting, r);
        break;
    case Q_RUNNING:
        list_unlink(&s->running, r);
        t->n_running--;
        s->running_seqs -= r->n_live;
        t->running_seqs -= r->n_live;
        if (s->cfg.reserve_max_len)
            s->reserved_blocks -= (int64_t)r->n * s->seq_max_blocks;
        break;
    case Q_PREEMPTED:
        list_unlink(&s->preempted, r);
        t->n_preempted--;
        break;
    }
    t->finished++;
    s->st.finished++;
    table_remove(s, r->id);
    s->n_unforked -= !r->forked;
    emit(s, r, SCHED_EV_DONE, -1);
    req_release(s, r);
}

static void req_abort_now(sched_t *s, struct req *r)
{
    for (int32_t i = 0; i < r->n; i++)
        if (r->samples[i].fin == SCHED_FINISH_NONE)
            sample_finish(s, r, i, SCHED_FINISH_ABORT);
    req_done(s, r);
}

/* Reclaims the samples marked by sched_sample_abort; an unforked request
 * keeps its marks until the fork (counted again in n_aborted). */
static void reap_samples(sched_t *s, struct req *r)
{
    if (!r->forked) {
        s->n_aborted++;
        return;
    }
    r->sample_aborts = false;
    for (int32_t i = 0; i < r->n; i++)
        if (r->samples[i].aborted && r->samples[i].fin == SCHED_FINISH_NONE)
            sample_finish(s, r, i, SCHED_FINISH_ABORT);
    if (r->n_live == 0)
        req_done(s, r);
}

static void reap_list(sched_t *s, struct list *l)
{
    for (struct req *r = l->head, *nx; r; r = nx) {
        nx = r->next;
        if (r->aborted)
            req_abort_now(s, r);
        else if (r->sample_aborts)
            reap_samples(s, r);
    }
}

static void reap_aborted(sched_t *s)
{
    if (!s->n_aborted)
        return;
    s->n_aborted = 0; /* every marked request is on one of these lists */
    reap_list(s, &s->running);
    reap_list(s, &s->preempted);
    for (int i = 0; i < s->n_tenants; i++)
        reap_list(s, &s->tenants[i].waiting);
}

/* ---- preemption ------------------------------------------------------- */

static void req_preempt(sched_t *s, struct req *r, enum sched_preempt_reason why)
{
    struct tenant *t = &s->tenants[r->tenant];
    for (int32_t i = 0; i < r->n; i++) {
        struct sample *sm = &r->samples[i];
        sample_release(s, r, sm);
        sm->computed = 0;
    }
    list_unlink(&s->running, r);
    t->n_running--;
    s->running_seqs -= r->n_live;
    t->running_seqs -= r->n_live;
    if (s->cfg.reserve_max_len)
        s->reserved_blocks -= (int64_t)r->n * s->seq_max_blocks;
    r->queue = Q_PREEMPTED;
    list_insert_admitted(&s->preempted, r);
    t->n_preempted++;
    t->preemptions++;
    s->st.preemptions++;
    struct sched_event ev = {
        .type = SCHED_EV_PREEMPTED,
        .request_id = r->id,
        .user = r->user,
        .sample = -1,
        .token = -1,
        .token_index = -1,
        .preempt = why,
        .tenant = t->cfg.id,
    };
    if (s->cfg.on_event)
        s->cfg.on_event(s->cfg.event_ctx, &ev);
}

static bool tenant_blocks_ok(const sched_t *s, const struct tenant *t, int64_t need)
{
    (void)s;
    return !t->cfg.max_kv_blocks || t->kv_blocks + need <= t->cfg.max_kv_blocks;
}

/* v may be preempted for r: priority counts only between requests of one
 * tenant; across tenants the later admission is the less protected (a
 * tenant's priorities never take pages from another tenant). */
static bool less_protected(const struct req *v, const struct req *r)
{
    if (v->tenant == r->tenant)
        return before(r->priority, r->admit_seq, v->priority, v->admit_seq);
    return v->admit_seq > r->admit_seq;
}

/* The victim for r: among the running requests less protected than r with
 * nothing in this step (only r's tenant's when own_tenant), the tenant of
 * the most recent admission loses, and within it the request with the
 * lowest priority (the most recent among equals).  NULL: none. */
static struct req *pick_victim(sched_t *s, const struct req *r, bool own_tenant)
{
    struct req *latest = NULL, *victim = NULL;
    for (struct req *v = s->running.head; v; v = v->next)
        if (v != r && v->step_mark != s->step_no && (!own_tenant || v->tenant == r->tenant) &&
            less_protected(v, r) && (!latest || v->admit_seq > latest->admit_seq))
            latest = v;
    if (!latest)
        return NULL;
    for (struct req *v = s->running.head; v; v = v->next)
        if (v->tenant == latest->tenant && v != r && v->step_mark != s->step_no &&
            less_protected(v, r) &&
            (!victim || before(victim->priority, victim->admit_seq, v->priority, v->admit_seq)))
            victim = v;
    return victim;
}

/* Makes `need` blocks available to running request r, which has nothing
 * in the step yet, by preempting less protected running requests that have
 * nothing in the step either (least protected first; only r's tenant's when
 * the tenant limit is what is short).  Returns 1 if r itself had to go. */
static int make_room(sched_t *s, struct req *r, int32_t need, int *preempted)
{
    struct tenant *t = &s->tenants[r->tenant];
    for (;;) {
        bool pool_ok = pager_blocks_available(s->pg) >= need;
        bool ten_ok = tenant_blocks_ok(s, t, need);
        if (pool_ok && ten_ok)
            return 0;
        struct req *victim = pick_victim(s, r, !ten_ok);
        enum sched_preempt_reason why =
            ten_ok ? SCHED_PREEMPT_NO_BLOCKS : SCHED_PREEMPT_TENANT_LIMIT;
        (*preempted)++;
        if (!victim) {
            req_preempt(s, r, why);
            return 1;
        }
        req_preempt(s, victim, why);
    }
}

/* ---- planning --------------------------------------------------------- */

/* Target of sample i's computation: its whole stream, except that an
 * unforked n > 1 request prefills all but the last prompt token. */
static int32_t sample_target(const struct req *r, const struct sample *sm)
{
    return r->forked ? sm->len : r->n_prompt - 1;
}

static bool sample_live(const struct req *r, int32_t i)
{
    return r->samples[i].fin == SCHED_FINISH_NONE && (r->forked || i == 0);
}

/* Prompt rows (log-probabilities or hidden states): sample i of r still
 * owes some (only sample 0 computes prompt positions below n_prompt - 1;
 * a request with hidden states has no other sample). */
static bool plp_pending(const struct req *r, int32_t i)
{
    return i == 0 && r->plp_done < r->plp_end;
}

/* Most tokens sample i of r may compute this step under max_prompt_logits
 * (hidden rows have no cap: the step's hidden output holds every token). */
static int32_t plp_cap(const sched_t *s, const struct req *r, int32_t i)
{
    return r->prompt_logits && plp_pending(r, i) ? s->cfg.max_prompt_logits - s->plp_tokens
                                                 : INT32_MAX;
}

/* Stream tokens a cached-prefix lookup of sample i may cover: positions
 * still owed logits rows must be computed. */
static int32_t adopt_len(const struct req *r, int32_t i)
{
    return plp_pending(r, i) ? r->plp_done + 1 : r->samples[i].len;
}

/* Appends `n` stream tokens of sample i to its page table and the batch.
 * Pages must be available and n within plp_cap (checked by the caller). */
static int add_slice(sched_t *s, struct req *r, int32_t i, int32_t n)
{
    struct sample *sm = &r->samples[i];
    struct tenant *t = &s->tenants[r->tenant];
    int32_t first = sm->computed;
    int32_t nb0 = seq_blocks(s, sm->seq);
    int32_t *dst = s->tokens + s->n_tokens;
    memcpy(dst, sm->stream + first, (size_t)n * sizeof(int32_t));
    int rc = pager_seq_append(s->pg, sm->seq, dst, n);
    if (rc)
        return rc;
    t->kv_blocks += seq_blocks(s, sm->seq) - nb0;
    bool sample = r->forked && first + n == sm->len;
    int32_t k = s->n_slices++;
    struct model_slice *sl = &s->slices[k];
    sl->first_pos = first;
    sl->n_tokens = n;
    sl->block_table = pager_seq_block_table(sm->seq, NULL);
    sl->sample = sample;
    sl->lora = r->lora;
    /* prompt rows: every row of a slice that reaches an undelivered
     * position below plp_end, logits or hidden states */
    bool owed = plp_pending(r, i) && first < r->plp_end && first + n > r->plp_done;
    sl->all_logits = owed && r->prompt_logits;
    sl->hidden = owed && !r->prompt_logits;
    int32_t logits_row = -1, plp_first = 0, plp_n = 0, hid_first = 0, hid_n = 0, hid_row = -1;
    if (sl->all_logits) {
        s->plp_tokens += n;
        s->n_logits += n;
        logits_row = s->n_logits - 1;
        plp_first = FOLIO_MAX(first, r->plp_done);
        plp_n = FOLIO_MIN(first + n, r->plp_end) - plp_first;
    } else if (sample) {
        logits_row = s->n_logits++;
    }
    if (sl->hidden) {
        hid_row = s->n_hidden;
        s->n_hidden += n;
        hid_first = FOLIO_MAX(first, r->plp_done);
        hid_n = FOLIO_MIN(first + n, r->plp_end) - hid_first;
    }
    bool decode = n == 1 && first >= r->n_prompt;
    s->info[k] = (struct sched_slice){
        .request_id = r->id,
        .user = r->user,
        .sampling = r->sampling,
        .sample_index = i,
        .token_index = sample ? sm->len - r->n_prompt : -1,
        .sample_row = sample ? s->n_sample++ : -1,
        .logits_row = logits_row,
        .plp_first = plp_first,
        .plp_n = plp_n,
        .plp_index = s->n_plp,
        .hid_first = hid_first,
        .hid_n = hid_n,
        .hid_row = hid_row,
        .prefill = !decode,
        .stream = sample ? sm->stream : NULL,
        .n_prompt = r->n_prompt,
    };
    s->refs[k] = (struct ref){r, i};
    s->n_plp += plp_n;
    s->n_tokens += n;
    sm->step_n = n;
    r->step_mark = s->step_no;

    /* accounting: recomputed tokens are not charged to the tenant */
    int32_t fresh = first + n > sm->hiwater ? first + n - FOLIO_MAX(first, sm->hiwater) : 0;
    sm->hiwater = FOLIO_MAX(sm->hiwater, first + n);
    if (decode) {
        s->st.decode_tokens += n;
        t->decode_tokens += fresh;
        t->vtc += s->cfg.weight_out * fresh / t->cfg.weight;
    } else {
        s->st.prefill_tokens += n;
        s->st.recompute_tokens += n - fresh;
        t->prefill_tokens += fresh;
        t->vtc += s->cfg.weight_in * fresh / t->cfg.weight;
    }
    return 0;
}

/* Largest c <= want whose blocks fit in `avail`. */
static int32_t fit_tokens(const sched_t *s, const pager_seq_t *seq, int32_t want, int64_t avail)
{
    if (pager_seq_blocks_needed(s->pg, seq, want) <= avail)
        return want;
    int32_t lo = 0, hi = want; /* fits(lo), !fits(hi) */
    while (hi - lo > 1) {
        int32_t mid = lo + (hi - lo) / 2;
        if (pager_seq_blocks_needed(s->pg, seq, mid) <= avail)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static int64_t tenant_room(const struct tenant *t)
{
    return t->cfg.max_kv_blocks ? (int64_t)t->cfg.max_kv_blocks - t->kv_blocks : INT64_MAX;
}

/* An unforked n > 1 request whose prompt (but the last token) is
 * computed: fork sample 0's table to the others.  Returns the blocks the
 * new tables map in *blocks (for the tenant's count). */
static int req_fork(sched_t *s, struct req *r, int32_t *blocks)
{
    pager_seq_t **kids = s->scratch_seqs;
    int32_t i;
    *blocks = 0;
    for (i = 1; i < r->n; i++) {
        int rc =
            pager_seq_fork(s->pg, r->samples[0].seq, r->id, s->tenants[r->tenant].cfg.id, &kids[i]);
        if (rc) {
            while (--i >= 1)
                pager_seq_free(s->pg, kids[i]);
            return rc;
        }
    }
    for (i = 1; i < r->n; i++) {
        r->samples[i].seq = kids[i];
        r->samples[i].computed = r->samples[0].computed;
        r->samples[i].hiwater = r->samples[0].hiwater;
        *blocks += seq_blocks(s, kids[i]);
    }
    r->forked = true;
    s->n_unforked--;
    return 0;
}

static bool fork_due(const struct req *r)
{
    return !r->forked && r->samples[0].seq && r->samples[0].computed == r->n_prompt - 1;
}

enum admit_result { ADMIT_OK, ADMIT_NO_ROOM, ADMIT_TENANT_FULL };

static void req_unadmit(sched_t *s, struct req *r)
{
    for (int32_t i = 0; i < r->n; i++) {
        struct sample *sm = &r->samples[i];
        if (sm->seq) {
            pager_seq_free(s->pg, sm->seq);
            sm->seq = NULL;
        }
        sm->computed = 0;
    }
}

/* try_admit's first step, without touching the pager: sequence slots, the
 * tenant's limits, the reservation (*reserve: blocks reserved for r under
 * reserve_max_len), and the first live sample's first chunk after its
 * cached prefix above the watermark. */
static enum admit_result admit_precheck(sched_t *s, struct req *r, int32_t budget,
                                        int32_t watermark, int64_t *reserve)
{
    struct tenant *t = &s->tenants[r->tenant];
    uint64_t salt = req_salt(s, r);
    if (budget <= 0 || s->running_seqs + r->n_live > s->cfg.max_seqs)
        return ADMIT_NO_ROOM;
    if (t->cfg.max_running_seqs && t->running_seqs + r->n_live > t->cfg.max_running_seqs)
        return ADMIT_TENANT_FULL;
    *reserve = 0;
    if (s->cfg.reserve_max_len) {
        *reserve = (int64_t)r->n * s->seq_max_blocks;
        if (s->reserved_blocks + *reserve > s->blocks_total)
            return ADMIT_NO_ROOM;
        if (!tenant_blocks_ok(s, t, *reserve))
            return ADMIT_TENANT_FULL;
    }
    /* Precheck without touching the pager: the first live sample's chunk
     * after its cached prefix must fit with the watermark. */
    int32_t first_live = 0;
    while (!sample_live(r, first_live))
        first_live++;
    if (plp_cap(s, r, first_live) < 1)
        return ADMIT_NO_ROOM; /* no prompt-logit rows left this step */
    struct sample *s0 = &r->samples[first_live];
    int32_t hit0 = s->cfg.reserve_max_len
                       ? 0
                       : pager_prefix_match(s->pg, salt, s0->stream, adopt_len(r, first_live));
    int32_t want0 =
        FOLIO_MIN(FOLIO_MIN(sample_target(r, s0) - hit0, budget), plp_cap(s, r, first_live));
    int64_t avail = (int64_t)pager_blocks_available(s->pg) - watermark;
    if (want0 > 0) {
        int32_t need1 = FOLIO_DIV_CEIL(hit0 + 1, s->bs) - hit0 / s->bs;
        if (need1 > avail)
            return ADMIT_NO_ROOM;
        if (!tenant_blocks_ok(s, t, need1 + hit0 / s->bs))
            return ADMIT_TENANT_FULL;
    }
    return ADMIT_OK;
}

/* Page tables for r's live samples with their cached prefixes, and the
 * fork when it is due.  0, or the pager's error with r's tables freed. */
static int admit_tables(sched_t *s, struct req *r)
{
    struct tenant *t = &s->tenants[r->tenant];
    uint64_t salt = req_salt(s, r);
    int32_t fork_blocks = 0;
    /* page tables and cached prefixes */
    for (int32_t i = 0; i < r->n; i++) {
        if (!sample_live(r, i))
            continue;
        struct sample *sm = &r->samples[i];
        int rc = pager_seq_new(s->pg, salt, r->id, t->cfg.id, &sm->seq);
        if (rc) {
            req_unadmit(s, r);
            return rc;
        }
        int32_t hit = 0;
        if (!s->cfg.reserve_max_len &&
            (rc = pager_seq_adopt_prefix(s->pg, sm->seq, sm->stream, adopt_len(r, i), &hit))) {
            req_unadmit(s, r);
            return rc;
        }
        sm->computed = hit;
        if (!r->ever_admitted && i == 0)
            r->cached = hit;
    }
    if (fork_due(r)) {
        int rc = req_fork(s, r, &fork_blocks);
        if (rc) {
            req_unadmit(s, r);
            return rc;
        }
    }
    return 0;
}

/* The first chunk of each live sample into s->scratch_chunks; when the
 * pages do not fit (or the tenant's limit), r's tables are undone (and a
 * fork made by admit_tables) and the reason returned. */
static enum admit_result admit_chunks(sched_t *s, struct req *r, int32_t budget, int32_t watermark,
                                      bool alone, bool was_forked, int64_t *tenant_have_out)
{
    struct tenant *t = &s->tenants[r->tenant];
    /* the first chunk, sample after sample, as much as the budget allows:
     * its pages must fit above the watermark (and in the tenant's limit) */
    int64_t tenant_have = 0;
    for (int32_t i = 0; i < r->n; i++)
        tenant_have += seq_blocks(s, r->samples[i].seq);
    int32_t *chunks = s->scratch_chunks;
    int32_t total = 0;
    int64_t need = 0;
    for (int32_t i = 0; i < r->n; i++) {
        chunks[i] = 0;
        if (!sample_live(r, i))
            continue;
        struct sample *sm = &r->samples[i];
        int32_t want = FOLIO_MIN(sample_target(r, sm) - sm->computed, budget - total);
        want = FOLIO_MIN(want, plp_cap(s, r, i));
        if (want <= 0)
            continue;
        chunks[i] = want;
        need += pager_seq_blocks_needed(s->pg, sm->seq, want);
        total += want;
    }
    int64_t avail = (int64_t)pager_blocks_available(s->pg) - watermark;
    if (need > avail && alone) {
        int64_t room = avail;
        need = total = 0;
        for (int32_t i = 0; i < r->n; i++) {
            if (!chunks[i])
                continue;
            struct sample *sm = &r->samples[i];
            chunks[i] = room > 0 ? fit_tokens(s, sm->seq, chunks[i], room) : 0;
            int32_t nb = pager_seq_blocks_needed(s->pg, sm->seq, chunks[i]);
            room -= nb;
            need += nb;
            total += chunks[i];
        }
    }
    bool ten_ok = !t->cfg.max_kv_blocks || s->cfg.reserve_max_len ||
                  t->kv_blocks + tenant_have + need <= t->cfg.max_kv_blocks;
    if (total == 0 || need > avail || !ten_ok) {
        req_unadmit(s, r);
        if (r->forked != was_forked)
            s->n_unforked++;
        r->forked = was_forked;
        return ten_ok ? ADMIT_NO_ROOM : ADMIT_TENANT_FULL;
    }
    *tenant_have_out = tenant_have;
    return ADMIT_OK;
}

/* r moves to the running queue with its first chunks as slices. */
static void admit_commit(sched_t *s, struct req *r, int64_t tenant_have, int64_t reserve, int *err)
{
    struct tenant *t = &s->tenants[r->tenant];
    int32_t *chunks = s->scratch_chunks;
    /* commit the admission */
    if (r->queue == Q_WAITING) {
        list_unlink(&t->waiting, r);
    } else {
        list_unlink(&s->preempted, r);
        t->n_preempted--;
    }
    r->queue = Q_RUNNING;
    r->admit_seq = ++s->admit_counter;
    list_insert_running(&s->running, r);
    t->n_running++;
    s->running_seqs += r->n_live;
    t->running_seqs += r->n_live;
    t->kv_blocks += (int32_t)tenant_have;
    s->reserved_blocks += reserve;
    bool resumed = r->ever_admitted;
    r->ever_admitted = true;
    if (!resumed) {
        t->admitted++;
        s->st.admitted++;
    }
    for (int32_t i = 0; i < r->n; i++) {
        struct sample *sm = &r->samples[i];
        if (sm->seq)
            sm->hiwater = FOLIO_MAX(sm->hiwater, sm->computed);
    }
    for (int32_t i = 0; i < r->n; i++) {
        if (!chunks[i])
            continue;
        int rc = add_slice(s, r, i, chunks[i]);
        if (rc) { /* cannot happen: the pages were counted above */
            *err = rc;
            break;
        }
    }
    if (resumed)
        emit(s, r, SCHED_EV_RESUMED, -1);
}

/* Tries to admit r (waiting or preempted): page tables, cached prefix, and
 * a first chunk of the leftover budget, in the steps above. */
static enum admit_result try_admit(sched_t *s, struct req *r, int *err)
{
    int32_t budget = s->cfg.max_batch_tokens - s->n_tokens;
    bool was_forked = r->forked;
    *err = 0;
    /* With nothing running, nothing would ever free pages for it: no
     * watermark, and the chunk shrinks to what fits (sched_request_add made
     * sure the whole request fits in the pool). */
    bool alone = s->running.len == 0;
    int32_t watermark = alone || s->cfg.reserve_max_len ? 0 : s->watermark;
    int64_t reserve;
    enum admit_result ar = admit_precheck(s, r, budget, watermark, &reserve);
    if (ar != ADMIT_OK)
        return ar;
    if ((*err = admit_tables(s, r)))
        return ADMIT_NO_ROOM;
    int64_t tenant_have;
    ar = admit_chunks(s, r, budget, watermark, alone, was_forked, &tenant_have);
    if (ar != ADMIT_OK)
        return ar;
    admit_commit(s, r, tenant_have, reserve, err);
    return ADMIT_OK;
}

/* The backlogged tenant with the least virtual counter (not skipped). */
static struct tenant *pick_tenant(sched_t *s)
{
    struct tenant *best = NULL;
    for (int i = 0; i < s->n_tenants; i++) {
        struct tenant *t = &s->tenants[i];
        if (t->waiting.len == 0 || t->skip_step == s->step_no)
            continue;
        if (!best || t->vtc < best->vtc)
            best = t;
    }
    return best;
}

static int admit(sched_t *s, int32_t *n_admitted)
{
    int err = 0;
    /* resume first: the earliest admission among the tenants not skipped,
     * or rather its tenant's highest-priority preempted request (priority
     * orders a tenant's own requests only); a tenant at its limit is
     * skipped */
    for (;;) {
        struct req *r = NULL, *first = NULL;
        for (struct req *v = s->preempted.head; v; v = v->next)
            if (s->tenants[v->tenant].skip_step != s->step_no &&
                (!first || v->admit_seq < first->admit_seq))
                first = v;
        if (!first)
            break;
        for (struct req *v = s->preempted.head; v && !r; v = v->next)
            if (v->tenant == first->tenant)
                r = v; /* the list is by priority, then admission */
        enum admit_result res = try_admit(s, r, &err);
        if (err)
            return err;
        if (res == ADMIT_NO_ROOM)
            return 0;
        if (res == ADMIT_TENANT_FULL)
            s->tenants[r->tenant].skip_step = s->step_no;
        else
            (*n_admitted)++;
    }
    for (;;) {
        struct tenant *t = pick_tenant(s);
        if (!t)
            return 0;
        enum admit_result res = try_admit(s, t->waiting.head, &err);
        if (err)
            return err;
        if (res == ADMIT_NO_ROOM)
            return 0;
        if (res == ADMIT_TENANT_FULL)
            t->skip_step = s->step_no;
        else
            (*n_admitted)++;
    }
}

static void die_if_broken(const sched_t *s)
{
#if FOLIO_CHECKS
    char msg[256];
    FOLIO_CHECK(sched_check(s, msg, sizeof(msg)) == 0, "%s", msg);
#else
    (void)s;
#endif
}

/* sched_step_plan's steps, in its order.  Each add_slice reserves pages
 * for the step; on an error the caller undoes them all (plan_undo). */

/* Per-tenant blocks, recounted each step. */
static void plan_kv_recount(sched_t *s)
{
    /* per-tenant blocks, needed only to enforce max_kv_blocks */
    if (s->any_kv_limit) {
        for (int i = 0; i < s->n_tenants; i++)
            s->tenants[i].kv_blocks = 0;
        for (struct req *r = s->running.head; r; r = r->next)
            for (int32_t i = 0; i < r->n; i++)
                s->tenants[r->tenant].kv_blocks += seq_blocks(s, r->samples[i].seq);
    }
}

static int plan_forks(sched_t *s)
{
    int rc = 0;
    /* 0. forks due */
    for (struct req *r = s->running.head; r && s->n_unforked; r = r->next) {
        int32_t nb = 0;
        if (fork_due(r) && (rc = req_fork(s, r, &nb)))
            return rc;
        s->tenants[r->tenant].kv_blocks += nb;
    }
    return 0;
}

/* Every running sample with one token to compute gets its slice; room is
 * made by preempting less protected requests (*preempted counts them).
 * *n_prefilling: running samples with more than one token to compute. */
static int plan_decodes(sched_t *s, int32_t budget, int *preempted, int32_t *n_prefilling_out)
{
    int rc = 0;
    int32_t n_prefilling = 0;
    /* 1. decodes (and every other one-token remainder), most protected first */
    for (struct req *r = s->running.head, *nx; r; r = nx) {
        nx = r->next;
        if (r->n_live == 1 && r->forked && !s->tenants[r->tenant].cfg.max_kv_blocks) {
            /* fast path, one sequence: append, make room only on -ENOSPC */
            int32_t i = 0;
            while (r->samples[i].fin != SCHED_FINISH_NONE)
                i++;
            struct sample *sm = &r->samples[i];
            if (sm->len - sm->computed != 1) {
                n_prefilling++;
                continue;
            }
            if (s->n_tokens + 1 > budget)
                continue;
            rc = add_slice(s, r, i, 1);
            if (rc == -ENOSPC) {
                struct req *pv = r->prev;
                if (make_room(s, r, pager_seq_blocks_needed(s->pg, sm->seq, 1), preempted)) {
                    nx = pv ? pv->next : s->running.head;
                    continue;
                }
                nx = r->next;
                rc = add_slice(s, r, i, 1);
            }
            if (rc)
                return rc;
            continue;
        }
        int32_t need = 0, cnt = 0;
        bool no_plp = false;
        for (int32_t i = 0; i < r->n; i++) {
            if (!sample_live(r, i))
                continue;
            struct sample *sm = &r->samples[i];
            if (sample_target(r, sm) - sm->computed != 1) {
                n_prefilling += sample_target(r, sm) - sm->computed > 1;
                continue;
            }
            need += pager_seq_blocks_needed(s->pg, sm->seq, 1);
            cnt++;
            no_plp |= plp_cap(s, r, i) < 1; /* no room for its logits row this step */
        }
        if (!cnt || no_plp || s->n_tokens + cnt > budget)
            continue;
        struct req *pv = r->prev;
        if (need > 0 && make_room(s, r, need, preempted)) {
            nx = pv ? pv->next : s->running.head;
            continue;
        }
        nx = r->next; /* victims were unlinked behind r */
        for (int32_t i = 0; i < r->n; i++) {
            if (!sample_live(r, i))
                continue;
            struct sample *sm = &r->samples[i];
            if (sample_target(r, sm) - sm->computed == 1 && (rc = add_slice(s, r, i, 1)))
                return rc;
        }
    }
    *n_prefilling_out = n_prefilling;
    return 0;
}

static int plan_prefills(sched_t *s, int32_t budget, int32_t n_prefilling, int *preempted)
{
    int rc = 0;
    /* 2. prefill chunks of running requests, oldest admission first within
     *    the protection order */
    for (struct req *r = s->running.head, *nx; r && n_prefilling && s->n_tokens < budget; r = nx) {
        nx = r->next;
        for (int32_t i = 0; i < r->n && s->n_tokens < budget; i++) {
            if (!sample_live(r, i))
                continue;
            struct sample *sm = &r->samples[i];
            int32_t rem = sample_target(r, sm) - sm->computed;
            if (rem <= 1 || sm->step_n)
                continue; /* decodes were phase 1 */
            int32_t want = FOLIO_MIN(FOLIO_MIN(rem, budget - s->n_tokens), plp_cap(s, r, i));
            if (want <= 0)
                continue;
            struct tenant *t = &s->tenants[r->tenant];
            int64_t room = FOLIO_MIN((int64_t)pager_blocks_available(s->pg), tenant_room(t));
            int32_t c = fit_tokens(s, sm->seq, want, room);
            if (c == 0) {
                if (r->step_mark == s->step_no)
                    continue;
                int32_t need = pager_seq_blocks_needed(s->pg, sm->seq, 1);
                struct req *pv = r->prev;
                if (make_room(s, r, need, preempted)) {
                    nx = pv ? pv->next : s->running.head;
                    break;
                }
                nx = r->next;
                room = FOLIO_MIN((int64_t)pager_blocks_available(s->pg), tenant_room(t));
                c = fit_tokens(s, sm->seq, want, room);
            }
            if (c > 0 && (rc = add_slice(s, r, i, c)))
                return rc;
        }
    }
    return 0;
}

/* The planned step as the caller sees it. */
static void plan_output(sched_t *s, struct sched_batch *out, int preempted, int32_t n_admitted)
{
    s->in_flight = true;
    s->st.steps++;
    out->mb.n_tokens = s->n_tokens;
    out->mb.tokens = s->tokens;
    out->mb.n_slices = s->n_slices;
    out->mb.slices = s->slices;
    out->info = s->info;
    out->n_sample = s->n_sample;
    out->n_logits = s->n_logits;
    out->n_plp = s->n_plp;
    out->n_hidden = s->n_hidden;
    for (int32_t k = 0; k < s->n_slices; k++) {
        if (s->info[k].prefill)
            out->n_prefill_tokens += s->slices[k].n_tokens;
        else
            out->n_decode_tokens += s->slices[k].n_tokens;
    }
    out->n_preempted = preempted;
    out->n_admitted = n_admitted;
}

/* Undoes the slices already reserved: the step does not happen. */
static void plan_undo(sched_t *s)
{
    for (int32_t k = s->n_slices - 1; k >= 0; k--) {
        struct sample *sm = &s->refs[k].r->samples[s->refs[k].sample];
        pager_seq_truncate(s->pg, sm->seq, sm->computed);
        sm->step_n = 0;
    }
    s->n_tokens = s->n_slices = s->n_sample = 0;
    s->n_logits = s->n_plp = s->plp_tokens = s->n_hidden = 0;
}

int sched_step_plan(sched_t *s, struct sched_batch *out)
{
    if (s->in_flight)
        return -EBUSY;
    memset(out, 0, sizeof(*out));
    reap_aborted(s);
    s->step_no++;
    s->n_tokens = s->n_slices = s->n_sample = 0;
    s->n_logits = s->n_plp = s->plp_tokens = s->n_hidden = 0;
    int32_t budget = s->cfg.max_batch_tokens;
    int preempted = 0, rc = 0;
    int32_t n_admitted = 0;
    int32_t n_prefilling = 0; /* running samples with more than one token to compute */

    plan_kv_recount(s);
    /* 0. forks due; 1. decodes (and every other one-token remainder), most
     * protected first; 2. prefill chunks of running requests; 3. admission,
     * unless this step had to preempt */
    if ((rc = plan_forks(s)) || (rc = plan_decodes(s, budget, &preempted, &n_prefilling)) ||
        (rc = plan_prefills(s, budget, n_prefilling, &preempted)) ||
        (!preempted && (rc = admit(s, &n_admitted)))) {
        plan_undo(s);
        return rc;
    }
    if (s->n_tokens == 0)
        return -EAGAIN;
    plan_output(s, out, preempted, n_admitted);
    die_if_broken(s);
    return 0;
}

/* ---- commit ----------------------------------------------------------- */

static enum sched_finish_reason stop_reason(const sched_t *s, const struct req *r,
                                            const struct sample *sm, int32_t tok)
{
    if (!r->ignore_eos && r->eos_id >= 0 && tok == r->eos_id)
        return SCHED_FINISH_EOS;
    for (int32_t k = 0; k < r->n_stop; k++)
        if (r->stop_ids[k] == tok)
            return SCHED_FINISH_STOP;
    if (sm->len - r->n_prompt >= r->max_tokens || sm->len >= s->cfg.max_ctx)
        return SCHED_FINISH_LENGTH;
    return SCHED_FINISH_NONE;
}

int sched_step_commit(sched_t *s, const int32_t *sampled, int32_t n_sampled)
{
    if (!s->in_flight || n_sampled != s->n_sample || (n_sampled && !sampled))
        return -EINVAL;
    for (int32_t k = 0; k < s->n_slices; k++) {
        struct req *r = s->refs[k].r;
        int32_t i = s->refs[k].sample;
        struct sample *sm = &r->samples[i];
        const struct model_slice *sl = &s->slices[k];
        sm->computed = sl->first_pos + sl->n_tokens;
        sm->step_n = 0;
        pager_seq_mark_computed(s->pg, sm->seq, sm->computed);
        /* the backend delivered the slice's prompt rows before this call */
        if (sl->all_logits && !r->aborted)
            r->plp_done = FOLIO_MAX(r->plp_done, s->info[k].plp_first + s->info[k].plp_n);
        if (sl->hidden && !r->aborted)
            r->plp_done = FOLIO_MAX(r->plp_done, s->info[k].hid_first + s->info[k].hid_n);
        if (!sl->sample || r->aborted || sm->aborted)
            continue;
        int32_t tok = sampled[s->info[k].sample_row];
        sm->stream[sm->len++] = tok;
        struct tenant *t = &s->tenants[r->tenant];
        t->generated_tokens++;
        s->st.generated_tokens++;
        if (s->cfg.on_event) {
            struct sched_event ev = {
                .type = SCHED_EV_TOKEN,
                .request_id = r->id,
                .user = r->user,
                .sample = i,
                .token = tok,
                .token_index = sm->len - r->n_prompt - 1,
                .cached = r->cached,
                .tenant = t->cfg.id,
            };
            s->cfg.on_event(s->cfg.event_ctx, &ev);
        }
        enum sched_finish_reason why = stop_reason(s, r, sm, tok);
        if (why != SCHED_FINISH_NONE) {
            sample_finish(s, r, i, why);
            if (r->n_live == 0)
                r->done_pending = true;
        }
    }
    for (int32_t k = 0; k < s->n_slices; k++) {
        struct req *r = s->refs[k].r;
        if (!r || !r->done_pending)
            continue;
        for (int32_t j = k + 1; j < s->n_slices; j++)
            if (s->refs[j].r == r)
                s->refs[j].r = NULL;
        req_done(s, r);
    }
    s->in_flight = false;
    s->n_tokens = s->n_slices = s->n_sample = 0;
    s->n_logits = s->n_plp = s->plp_tokens = s->n_hidden = 0;
    reap_aborted(s);
    die_if_broken(s);
    return 0;
}

/* ---- stats and checks ------------------------------------------------- */

void sched_stats_get(const sched_t *s, struct sched_stats *st)
{
    *st = s->st;
    st->running = s->running.len;
    st->preempted = s->preempted.len;
    st->waiting = 0;
    for (int i = 0; i < s->n_tenants; i++)
        st->waiting += s->tenants[i].waiting.len;
    st->running_seqs = s->running_seqs;
}

int32_t sched_tenant_count(const sched_t *s)
{
    return s->n_tenants;
}

int sched_tenant_stats_get(const sched_t *s, int32_t idx, struct sched_tenant_stats *ts)
{
    if (idx < 0 || idx >= s->n_tenants)
        return -ENOENT;
    const struct tenant *t = &s->tenants[idx];
    memset(ts, 0, sizeof(*ts));
    ts->id = t->cfg.id;
    ts->weight = t->cfg.weight;
    ts->vtc = t->vtc;
    ts->waiting = t->waiting.len;
    ts->running = t->n_running;
    ts->preempted = t->n_preempted;
    ts->running_seqs = t->running_seqs;
    for (const struct req *r = s->running.head; r; r = r->next)
        if (r->tenant == idx)
            for (int32_t i = 0; i < r->n; i++)
                ts->kv_blocks += seq_blocks(s, r->samples[i].seq);
    ts->prefill_tokens = t->prefill_tokens;
    ts->decode_tokens = t->decode_tokens;
    ts->generated_tokens = t->generated_tokens;
    ts->preemptions = t->preemptions;
    ts->admitted = t->admitted;
    ts->finished = t->finished;
    ts->refused = t->refused;
    return 0;
}

int sched_tenant_stats_find(const sched_t *s, uint32_t id, struct sched_tenant_stats *ts)
{
    int i = tenant_find(s, id);
    return i < 0 ? -ENOENT : sched_tenant_stats_get(s, i, ts);
}

bool sched_step_in_flight(const sched_t *s)
{
    return s->in_flight;
}

static int fail(char *msg, size_t len, const char *fmt, ...)
{
    if (msg && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, len, fmt, ap);
        va_end(ap);
    }
    return -EUCLEAN;
}

static int check_list(const sched_t *s, const struct list *l, enum queue q, int tenant,
                      uint32_t *seen, char *msg, size_t len)
{
    int32_t n = 0;
    const struct req *prev = NULL;
    for (const struct req *r = l->head; r; prev = r, r = r->next) {
        n++;
        if (r->prev != prev)
            return fail(msg, len, "request %llu: broken links", (unsigned long long)r->id);
        if (r->queue != q)
            return fail(msg, len, "request %llu on list %d but queue %d", (unsigned long long)r->id,
                        q, r->queue);
        if (tenant >= 0 && r->tenant != tenant)
            return fail(msg, len, "request %llu on another tenant's list",
                        (unsigned long long)r->id);
        if (table_find(s, r->id) != r)
            return fail(msg, len, "request %llu not in the id table", (unsigned long long)r->id);
        if (r->n_live < 1)
            return fail(msg, len, "request %llu queued with no live sample",
                        (unsigned long long)r->id);
        (*seen)++;
        if (q != Q_RUNNING)
            for (int32_t i = 0; i < r->n; i++)
                if (r->samples[i].seq)
                    return fail(msg, len, "queued request %llu holds pages",
                                (unsigned long long)r->id);
    }
    if (l->tail != prev || n != l->len)
        return fail(msg, len, "list %d: length %d, counted %d", q, l->len, n);
    return 0;
}

int sched_check(const sched_t *s, char *msg, size_t len)
{
    uint32_t seen = 0;
    int rc;
    if ((rc = check_list(s, &s->running, Q_RUNNING, -1, &seen, msg, len)) ||
        (rc = check_list(s, &s->preempted, Q_PREEMPTED, -1, &seen, msg, len)))
        return rc;
    for (int i = 0; i < s->n_tenants; i++)
        if ((rc = check_list(s, &s->tenants[i].waiting, Q_WAITING, i, &seen, msg, len)))
            return rc;
    if (seen != s->table_len)
        return fail(msg, len, "%u requests queued, %u known", seen, s->table_len);

    int32_t seqs = 0;
    const struct req *prev = NULL;
    for (const struct req *r = s->running.head; r; prev = r, r = r->next) {
        if (prev && r->admit_seq < prev->admit_seq)
            return fail(msg, len, "running list out of order at %llu", (unsigned long long)r->id);
        seqs += r->n_live;
        int32_t live = 0;
        for (int32_t i = 0; i < r->n; i++) {
            const struct sample *sm = &r->samples[i];
            if (sm->fin != SCHED_FINISH_NONE) {
                if (sm->seq)
                    return fail(msg, len, "finished sample %llu/%d holds pages",
                                (unsigned long long)r->id, i);
                continue;
            }
            live++;
            if (!sample_live(r, i)) {
                if (sm->seq)
                    return fail(msg, len, "unforked sample %llu/%d holds pages",
                                (unsigned long long)r->id, i);
                continue;
            }
            if (!sm->seq)
                return fail(msg, len, "running sample %llu/%d has no page table",
                            (unsigned long long)r->id, i);
            int32_t plen = pager_seq_len(sm->seq);
            if (plen != sm->computed + sm->step_n)
                return fail(msg, len, "sample %llu/%d: %d tokens paged, %d computed + %d in step",
                            (unsigned long long)r->id, i, plen, sm->computed, sm->step_n);
            if (sm->step_n && !s->in_flight)
                return fail(msg, len, "step tokens outside a step");
            int32_t tgt = sample_target(r, sm);
            if (sm->computed + sm->step_n > tgt || (r->forked && sm->computed >= tgt))
                return fail(msg, len, "sample %llu/%d: computed %d + step %d, target %d",
                            (unsigned long long)r->id, i, sm->computed, sm->step_n, tgt);
            if (pager_seq_computed(sm->seq) < sm->computed)
                return fail(msg, len, "sample %llu/%d: pager has fewer computed tokens",
                            (unsigned long long)r->id, i);
            if (plp_pending(r, i) && sm->computed > r->plp_done)
                return fail(msg, len, "sample %llu/%d: computed %d past its prompt rows (%d)",
                            (unsigned long long)r->id, i, sm->computed, r->plp_done);
            if (plen > sm->len ||
                memcmp(pager_seq_tokens(sm->seq), sm->stream, (size_t)plen * sizeof(int32_t)))
                return fail(msg, len, "sample %llu/%d: page table differs from its stream",
                            (unsigned long long)r->id, i);
        }
        if (live != r->n_live)
            return fail(msg, len, "request %llu: n_live %d, counted %d", (unsigned long long)r->id,
                        r->n_live, live);
    }
    if (seqs != s->running_seqs || seqs > s->cfg.max_seqs)
        return fail(msg, len, "running seqs %d, counted %d, max %d", s->running_seqs, seqs,
                    s->cfg.max_seqs);
    for (int i = 0; i < s->n_tenants; i++) {
        const struct tenant *t = &s->tenants[i];
        int32_t tr = 0, tp = 0, tseq = 0;
        for (const struct req *r = s->running.head; r; r = r->next)
            if (r->tenant == i) {
                tr++;
                tseq += r->n_live;
            }
        for (const struct req *r = s->preempted.head; r; r = r->next)
            tp += r->tenant == i;
        if (t->n_running != tr || t->n_preempted != tp || t->running_seqs != tseq)
            return fail(msg, len, "tenant %u counts (%d %d %d) != (%d %d %d)", t->cfg.id,
                        t->n_running, t->n_preempted, t->running_seqs, tr, tp, tseq);
    }
    if (s->in_flight) {
        int32_t n = 0, ns = 0, rows = 0, all = 0, plp = 0, hid = 0;
        for (int32_t k = 0; k < s->n_slices; k++) {
            const struct model_slice *sl = &s->slices[k];
            const struct sched_slice *in = &s->info[k];
            n += sl->n_tokens;
            ns += sl->sample;
            if (sl->n_tokens < 1)
                return fail(msg, len, "empty slice %d", k);
            rows += sl->all_logits ? sl->n_tokens : sl->sample;
            all += sl->all_logits ? sl->n_tokens : 0;
            if (in->logits_row != (sl->all_logits || sl->sample ? rows - 1 : -1) ||
                in->plp_index != plp || in->plp_n < 0 ||
                (in->plp_n && (in->plp_first < sl->first_pos ||
                               in->plp_first + in->plp_n > sl->first_pos + sl->n_tokens ||
                               in->plp_first + in->plp_n > in->n_prompt - 1)))
                return fail(msg, len, "slice %d: logits row %d, prompt rows %d+%d at %d", k,
                            in->logits_row, in->plp_first, in->plp_n, in->plp_index);
            if (in->hid_row != (sl->hidden ? hid : -1) || in->hid_n < 0 ||
                (sl->hidden && in->hid_n < 1) || (!sl->hidden && in->hid_n) ||
                (in->hid_n && (in->hid_first < sl->first_pos ||
                               in->hid_first + in->hid_n > sl->first_pos + sl->n_tokens ||
                               in->hid_first + in->hid_n > in->n_prompt)))
                return fail(msg, len, "slice %d: hidden row %d, prompt rows %d+%d", k, in->hid_row,
                            in->hid_first, in->hid_n);
            plp += in->plp_n;
            hid += sl->hidden ? sl->n_tokens : 0;
        }
        if (n != s->n_tokens || n > s->cfg.max_batch_tokens || s->n_slices > s->cfg.max_seqs ||
            ns != s->n_sample || rows != s->n_logits || plp != s->n_plp || hid != s->n_hidden ||
            all > s->cfg.max_prompt_logits)
            return fail(msg, len,
                        "step: %d tokens (budget %d), %d slices, %d samples, %d logits rows, "
                        "%d all-logits tokens",
                        n, s->cfg.max_batch_tokens, s->n_slices, ns, rows, all);
    }
    if (s->cfg.reserve_max_len) {
        int64_t want = 0;
        for (const struct req *r = s->running.head; r; r = r->next)
            want += (int64_t)r->n * s->seq_max_blocks;
        if (want != s->reserved_blocks)
            return fail(msg, len, "reserved blocks %lld, expected %lld",
                        (long long)s->reserved_blocks, (long long)want);
    }
    return pager_check(s->pg, msg, len);
}
