/*
 * tests/test_sched_harness.h — a driver for scheduler tests (included by
 * test_sched.c and test_sched_prop.c; header-only, everything static).
 *
 * The harness owns a pager (no arena) and a scheduler, a record of every
 * request it added (prompt, the tokens each sample was sent, the events),
 * and a deterministic fake model: the token sampled after the stream
 * prefix ending in `last`, at generated index k of sample i, is
 * fake_next(seed, i, k, last).  Because that is a function of the stream
 * alone, a request's output does not depend on how it was batched, chunked
 * or preempted — which is exactly what the tests compare.
 *
 * Every step it checks: the batch is within budget, each slice's tokens are
 * the request's stream at [first_pos, first_pos + n), the block table is
 * there, sampling rows are consecutive, logits rows follow slice order
 * (one per sampling slice, n per all_logits slice), and prompt
 * log-probability rows go only to requests that asked, sample 0, in
 * position order, each position once (all of [0, n_prompt - 1) by DONE
 * unless aborted); events arrive in order (token
 * indices 0, 1, 2, ... per sample, nothing after FINISHED, DONE once after
 * every sample finished); and sched_check() holds after plan and commit.
 */
#ifndef TEST_SCHED_HARNESS_H
#define TEST_SCHED_HARNESS_H

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "folio/pager.h"
#include "folio/scheduler.h"

#define H_MAX_N 4

struct hreq {
    uint64_t id;
    uint64_t seed;
    uint32_t tenant;
    int32_t n, n_prompt, max_tokens;
    int32_t *prompt;
    int32_t *gen[H_MAX_N];
    int32_t n_gen[H_MAX_N];
    enum sched_finish_reason fin[H_MAX_N];
    bool added, done, aborted;
    bool prompt_logits;
    int32_t plp_next;             /* prompt positions delivered: [0, plp_next) */
    int32_t hidden_lo, hidden_hi; /* hidden states wanted (hi 0: none) */
    int32_t hid_next;             /* ... delivered: [hidden_lo, hid_next) */
    int preempts, resumes;
    int64_t add_step, admit_step, first_tok_step, done_step;
};

struct harness {
    pager_t *pg;
    sched_t *s;
    struct sched_config cfg;
    struct hreq *reqs;
    int32_t nreq, cap;
    int32_t vocab;
    int64_t step;
    int64_t events, preempt_events, done_count;
    int64_t steps_with_preempt;
    int32_t max_slice_tokens;
    bool saw_mixed;                     /* a step had both a decode and a prefill slice */
    int64_t plp_rows, plp_rows_resumed; /* prompt rows delivered; of them after a preemption */
    int64_t hid_rows, hid_rows_resumed; /* hidden rows delivered; of them after a preemption */
};

static inline uint64_t h_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* Token ids are 1..vocab-1 (0 is reserved as "never produced"). */
static inline int32_t fake_next(const struct harness *h, uint64_t seed, int32_t sample,
                                int32_t index, int32_t last)
{
    uint64_t x = h_mix(seed ^ h_mix((uint64_t)sample * 1000003u + (uint64_t)index) ^
                       ((uint64_t)(uint32_t)last << 32));
    return 1 + (int32_t)(x % (uint64_t)(h->vocab - 1));
}

static inline void h_fail_check(const struct harness *h, const char *where)
{
    char msg[256];
    int rc = sched_check(h->s, msg, sizeof(msg));
    if (rc)
        fail_msg("sched_check after %s at step %lld: %s", where, (long long)h->step, msg);
}

static inline struct hreq *h_find(struct harness *h, uint64_t id)
{
    for (int32_t i = 0; i < h->nreq; i++)
        if (h->reqs[i].id == id && h->reqs[i].added)
            return &h->reqs[i];
    return NULL;
}

static void h_on_event(void *ctx, const struct sched_event *ev)
{
    struct harness *h = ctx;
    struct hreq *r = ev->user;
    assert_non_null(r);
    assert_true(r->id == ev->request_id);
    assert_false(r->done);
    h->events++;
    switch (ev->type) {
    case SCHED_EV_TOKEN:
        assert_true(ev->sample >= 0 && ev->sample < r->n);
        assert_int_equal(r->fin[ev->sample], SCHED_FINISH_NONE);
        /* nothing lost, nothing repeated */
        assert_int_equal(ev->token_index, r->n_gen[ev->sample]);
        assert_true(r->n_gen[ev->sample] < r->max_tokens);
        r->gen[ev->sample][r->n_gen[ev->sample]++] = ev->token;
        if (r->first_tok_step < 0)
            r->first_tok_step = h->step;
        break;
    case SCHED_EV_FINISHED:
        assert_true(ev->sample >= 0 && ev->sample < r->n);
        assert_int_equal(r->fin[ev->sample], SCHED_FINISH_NONE);
        assert_true(ev->reason != SCHED_FINISH_NONE);
        r->fin[ev->sample] = ev->reason;
        break;
    case SCHED_EV_DONE:
        for (int i = 0; i < r->n; i++)
            assert_true(r->fin[i] != SCHED_FINISH_NONE);
        if (r->prompt_logits && !r->aborted)
            assert_int_equal(r->plp_next, r->n_prompt - 1);
        if (r->hidden_hi && !r->aborted)
            assert_int_equal(r->hid_next, r->hidden_hi);
        r->done = true;
        r->done_step = h->step;
        h->done_count++;
        break;
    case SCHED_EV_PREEMPTED:
        assert_true(ev->preempt != SCHED_PREEMPT_NONE);
        r->preempts++;
        h->preempt_events++;
        break;
    case SCHED_EV_RESUMED:
        assert_true(r->preempts > r->resumes);
        r->resumes++;
        break;
    }
}

/* window: the pager's sliding window (0: none). */
static inline void h_init_window(struct harness *h, int32_t num_blocks, int32_t block_size,
                                 const struct sched_config *cfg, int32_t window)
{
    memset(h, 0, sizeof(*h));
    struct pager_config pc = {
        .num_blocks = num_blocks,
        .block_size = block_size,
        .n_layers = 1,
        .n_kv_heads = 1,
        .head_dim = 1,
        .dtype = FOLIO_F32,
        .no_arena = true,
        .window = window,
    };
    assert_int_equal(pager_init(&h->pg, &pc), 0);
    h->cfg = *cfg;
    h->cfg.on_event = h_on_event;
    h->cfg.event_ctx = h;
    assert_int_equal(sched_new(&h->cfg, h->pg, &h->s), 0);
    h->vocab = 1000;
    h->cap = 1024;
    h->reqs = calloc((size_t)h->cap, sizeof(*h->reqs));
    assert_non_null(h->reqs);
}

static inline void h_init(struct harness *h, int32_t num_blocks, int32_t block_size,
                          const struct sched_config *cfg)
{
    h_init_window(h, num_blocks, block_size, cfg, 0);
}

static inline void h_free(struct harness *h)
{
    sched_free(h->s);
    pager_free(h->pg);
    for (int32_t i = 0; i < h->nreq; i++) {
        free(h->reqs[i].prompt);
        for (int j = 0; j < H_MAX_N; j++)
            free(h->reqs[i].gen[j]);
    }
    free(h->reqs);
}

struct h_params {
    const int32_t *prompt;
    int32_t n_prompt, max_tokens, n, priority, eos_id, n_stop;
    const int32_t *stop_ids;
    uint32_t tenant;
    bool ignore_eos, prompt_logits;
    int32_t hidden_lo, hidden_hi;
    uint64_t seed;
};

/* Adds a request; returns its record index, or the negative errno. */
static inline int h_add(struct harness *h, const struct h_params *p)
{
    /* the record's address is the event `user`: never move it (h_reserve) */
    assert_true(h->nreq < h->cap);
    struct hreq *r = &h->reqs[h->nreq];
    memset(r, 0, sizeof(*r));
    r->n = p->n ? p->n : 1;
    assert_true(r->n <= H_MAX_N);
    r->n_prompt = p->n_prompt;
    r->max_tokens = p->max_tokens;
    r->tenant = p->tenant;
    r->prompt_logits = p->prompt_logits;
    r->hidden_lo = r->hid_next = p->hidden_lo;
    r->hidden_hi = p->hidden_hi;
    r->seed = p->seed ? p->seed : (uint64_t)h->nreq * 7919u + 17u;
    r->prompt = malloc((size_t)p->n_prompt * sizeof(int32_t));
    memcpy(r->prompt, p->prompt, (size_t)p->n_prompt * sizeof(int32_t));
    for (int i = 0; i < r->n; i++)
        r->gen[i] = calloc((size_t)p->max_tokens + 1, sizeof(int32_t));
    r->add_step = h->step;
    r->admit_step = r->first_tok_step = r->done_step = -1;
    struct sched_request_params sp = {
        .prompt = p->prompt,
        .n_prompt = p->n_prompt,
        .max_tokens = p->max_tokens,
        .stop_ids = p->stop_ids,
        .n_stop = p->n_stop,
        .eos_id = p->eos_id,
        .ignore_eos = p->ignore_eos,
        .n = r->n,
        .tenant = p->tenant,
        .priority = p->priority,
        .user = r,
        .prompt_logits = p->prompt_logits,
        .hidden_lo = p->hidden_lo,
        .hidden_hi = p->hidden_hi,
    };
    int rc = sched_request_add(h->s, &sp, &r->id);
    if (rc) {
        free(r->prompt);
        for (int i = 0; i < r->n; i++) {
            free(r->gen[i]);
            r->gen[i] = NULL;
        }
        return rc;
    }
    r->added = true;
    return h->nreq++;
}

/* The harness must not reallocate reqs while requests are live: reserve. */
static inline void h_reserve(struct harness *h, int32_t n)
{
    if (h->cap >= n)
        return;
    assert_int_equal(h->nreq, 0);
    h->cap = n;
    h->reqs = realloc(h->reqs, (size_t)n * sizeof(*h->reqs));
    memset(h->reqs, 0, (size_t)n * sizeof(*h->reqs));
    assert_non_null(h->reqs);
}

static inline int32_t h_stream_at(const struct hreq *r, int32_t sample, int32_t pos)
{
    return pos < r->n_prompt ? r->prompt[pos] : r->gen[sample][pos - r->n_prompt];
}

/* One step: plan, verify, fake model, commit, verify.  Returns the plan's
 * result (0 or -EAGAIN).  With `out` the batch is copied for inspection. */
static inline int h_step_ex(struct harness *h, struct sched_batch *out,
                            bool (*between)(struct harness *))
{
    struct sched_batch b;
    int rc = sched_step_plan(h->s, &b);
    if (rc == -EAGAIN) {
        h_fail_check(h, "plan (idle)");
        return rc;
    }
    assert_int_equal(rc, 0);
    h_fail_check(h, "plan");
    if (out)
        *out = b;
    assert_true(b.mb.n_tokens > 0 && b.mb.n_tokens <= h->cfg.max_batch_tokens);
    assert_true(b.mb.n_slices > 0 && b.mb.n_slices <= h->cfg.max_seqs);
    if (b.n_preempted > 0) {
        h->steps_with_preempt++;
        assert_int_equal(b.n_admitted, 0);
    }
    int32_t *sampled = calloc((size_t)b.mb.n_slices + 1, sizeof(int32_t));
    int32_t off = 0, row = 0, n_sum = 0, lrow = 0, plp = 0, hrow = 0;
    bool dec = false, pre = false;
    for (int32_t k = 0; k < b.mb.n_slices; k++) {
        const struct model_slice *sl = &b.mb.slices[k];
        const struct sched_slice *in = &b.info[k];
        struct hreq *r = in->user;
        assert_non_null(r);
        assert_true(r->id == in->request_id);
        assert_non_null(sl->block_table);
        assert_true(sl->n_tokens >= 1);
        if (r->admit_step < 0)
            r->admit_step = h->step;
        if (in->prefill)
            pre = true;
        else
            dec = true;
        for (int32_t j = 0; j < sl->n_tokens; j++)
            assert_int_equal(b.mb.tokens[off + j],
                             h_stream_at(r, in->sample_index, sl->first_pos + j));
        if (sl->sample) {
            assert_int_equal(in->sample_row, row);
            assert_int_equal(sl->first_pos + sl->n_tokens,
                             r->n_prompt + r->n_gen[in->sample_index]);
            assert_int_equal(in->token_index, r->n_gen[in->sample_index]);
            sampled[row++] = fake_next(h, r->seed, in->sample_index, in->token_index,
                                       b.mb.tokens[off + sl->n_tokens - 1]);
        } else {
            assert_int_equal(in->sample_row, -1);
        }
        lrow += sl->all_logits ? sl->n_tokens : sl->sample;
        assert_int_equal(in->logits_row, sl->all_logits || sl->sample ? lrow - 1 : -1);
        assert_int_equal(in->plp_index, plp);
        if (sl->all_logits || in->plp_n) {
            assert_true(r->prompt_logits && sl->all_logits && in->sample_index == 0);
            assert_true(in->plp_n > 0); /* a slice of delivered positions needs no rows */
            assert_int_equal(in->plp_first, r->plp_next); /* in order, none twice */
            assert_true(in->plp_first >= sl->first_pos &&
                        in->plp_first + in->plp_n <= sl->first_pos + sl->n_tokens &&
                        in->plp_first + in->plp_n <= r->n_prompt - 1);
            r->plp_next += in->plp_n;
            plp += in->plp_n;
            h->plp_rows += in->plp_n;
            h->plp_rows_resumed += r->preempts ? in->plp_n : 0;
        }
        /* hidden rows: every token of a hidden slice, slice after slice */
        assert_int_equal(in->hid_row, sl->hidden ? hrow : -1);
        if (sl->hidden || in->hid_n) {
            assert_true(r->hidden_hi > 0 && sl->hidden && in->sample_index == 0);
            assert_false(sl->all_logits);
            assert_true(in->hid_n > 0);
            assert_int_equal(in->hid_first, r->hid_next); /* in order, none twice */
            assert_true(in->hid_first >= sl->first_pos &&
                        in->hid_first + in->hid_n <= sl->first_pos + sl->n_tokens &&
                        in->hid_first + in->hid_n <= r->hidden_hi);
            r->hid_next += in->hid_n;
            hrow += sl->n_tokens;
            h->hid_rows += in->hid_n;
            h->hid_rows_resumed += r->preempts ? in->hid_n : 0;
        }
        if (sl->n_tokens > h->max_slice_tokens)
            h->max_slice_tokens = sl->n_tokens;
        off += sl->n_tokens;
        n_sum += sl->n_tokens;
    }
    assert_int_equal(n_sum, b.mb.n_tokens);
    assert_int_equal(row, b.n_sample);
    assert_int_equal(lrow, b.n_logits);
    assert_int_equal(plp, b.n_plp);
    assert_int_equal(hrow, b.n_hidden);
    if (dec && pre)
        h->saw_mixed = true;
    if (between && between(h))
        h_fail_check(h, "between");
    assert_int_equal(sched_step_commit(h->s, sampled, row), 0);
    free(sampled);
    h->step++;
    h_fail_check(h, "commit");
    return 0;
}

static inline int h_step(struct harness *h)
{
    return h_step_ex(h, NULL, NULL);
}

/* Runs until nothing is left (or max_steps); returns the steps taken. */
static inline int64_t h_drain(struct harness *h, int64_t max_steps)
{
    int64_t n = 0;
    while (n < max_steps) {
        if (h_step(h) == -EAGAIN)
            break;
        n++;
    }
    return n;
}

/* The expected output of one sample when run alone with unlimited memory:
 * the fake model's chain with the same stop rules. */
static inline int32_t h_expected(const struct harness *h, const struct hreq *r, int32_t sample,
                                 int32_t eos_id, bool ignore_eos, const int32_t *stop,
                                 int32_t n_stop, int32_t max_ctx, int32_t *out,
                                 enum sched_finish_reason *why)
{
    int32_t last = r->prompt[r->n_prompt - 1];
    int32_t n = 0;
    *why = SCHED_FINISH_NONE;
    while (*why == SCHED_FINISH_NONE) {
        int32_t t = fake_next(h, r->seed, sample, n, last);
        out[n++] = t;
        last = t;
        if (!ignore_eos && eos_id >= 0 && t == eos_id)
            *why = SCHED_FINISH_EOS;
        else {
            for (int32_t k = 0; k < n_stop; k++)
                if (stop[k] == t)
                    *why = SCHED_FINISH_STOP;
            if (*why == SCHED_FINISH_NONE && (n >= r->max_tokens || r->n_prompt + n >= max_ctx))
                *why = SCHED_FINISH_LENGTH;
        }
    }
    return n;
}

static inline void h_prompt(int32_t *p, int32_t n, uint64_t seed, int32_t vocab)
{
    for (int32_t i = 0; i < n; i++)
        p[i] = 1 + (int32_t)(h_mix(seed * 31 + (uint64_t)i) % (uint64_t)(vocab - 1));
}

static inline bool h_short(void)
{
    const char *e = getenv("FOLIO_TEST_SHORT");
    return e && *e && strcmp(e, "0");
}

#endif
