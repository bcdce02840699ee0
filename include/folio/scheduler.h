/*
 * folio/scheduler.h — continuous batching: which tokens of which sequences
 * run in the next model step.
 *
 * The scheduler owns every request from sched_request_add() until its
 * SCHED_EV_DONE event.  It runs on the daemon's loop thread and knows
 * nothing of the model's arithmetic: each step is
 *
 *     sched_step_plan(s, &b)      retire aborted requests, fork n > 1
 *                                 requests, schedule decodes, continue and
 *                                 admit prefill chunks, preempt when pages
 *                                 run out; reserve a KV slot (pager_seq_append)
 *                                 for every token of the step
 *     <step function>(&b.mb)      the model (or the simulator's cost model)
 *                                 reads the batch, which is immutable and
 *                                 stays valid until the commit
 *     sched_step_commit(s, tok)   one sampled token per sampling slice:
 *                                 mark computed, append, stop checks,
 *                                 finish, free pages
 *
 * Requests and samples.  A request has a prompt and n >= 1 samples
 * (parallel completions).  Sample i's *stream* is prompt ++ generated_i.
 * Each live sample of a running request has a page table (pager_seq) that
 * holds the first `computed` tokens of its stream; the step after the
 * commit that produced generated token k computes it (a decode).  With
 * n > 1 the prompt is prefilled once, all but its last token, in sample 0's
 * page table; that table is then forked n ways (pager_seq_fork: the blocks
 * are shared, a partial last block is copied on write), and every sample
 * computes the last prompt token itself and samples from its own row, so
 * each sample has its own row and its own sampler stream
 * (struct sched_slice.sample_index, .token_index).
 *
 * Queues.  Every request is in exactly one of WAITING (never admitted; one
 * list per tenant, priority then arrival order), RUNNING (holds pages;
 * admission order: a tenant's priorities do not reorder other tenants')
 * and PREEMPTED (held pages once, lost them; priority then admission order).
 *
 * One step, under max_batch_tokens and max_seqs:
 *   1. running samples with one token to compute (decodes), in admission
 *      order; a sample that needs a new block when none is free preempts the
 *      least protected running request not yet in this step (possibly the
 *      sample's own request).  Priority protects a request only from its
 *      own tenant's: across tenants the most recent admission is the least
 *      protected; within the tenant that loses, the lowest priority (then
 *      the most recent) goes.  A tenant's priorities never take another
 *      tenant's pages;
 *   2. running samples in the middle of a prefill get a chunk of the
 *      leftover budget (long prompts span several steps while decodes keep
 *      flowing);
 *   3. unless this step preempted: admission, PREEMPTED requests first
 *      (resume: the tenant of the earliest admission, its highest-priority
 *      request), then WAITING ones from the backlogged tenant with the least
 *      virtual token counter.  Admission takes the cached prefix
 *      (pager_seq_adopt_prefix; only uncached tokens are computed), and needs
 *      pages for its first chunk (min(uncomputed tokens, leftover budget))
 *      plus `watermark_blocks` still free (none when nothing is running),
 *      the tenant's limits, and room under max_seqs.  The first request
 *      that does not fit stops admission for this step (no overtaking),
 *      except one stopped by its tenant's limits: that tenant is skipped.
 *
 * Preemption is by recompute: the victim's page tables are freed (full
 * computed blocks stay in the prefix cache, so resuming is often cheap) and
 * it moves to PREEMPTED.  When resumed, each live sample re-prefills
 * prompt ++ generated_i; only the last row of that re-prefill samples, and
 * it samples generated token n_generated_i, the NEXT one: a client reading
 * the stream sees nothing lost and nothing repeated.
 *
 * Prompt log-probabilities (sched_request_params.prompt_logits): such a
 * request needs the logits of every prompt position but the last (row p
 * scores prompt token p + 1).  Its prefill slices of sample 0 are
 * all_logits while positions below n_prompt - 1 are still undelivered;
 * their chunks are capped so that all_logits slices hold at most
 * max_prompt_logits tokens a step (a request that gets no room waits for
 * the next step, and stops admission as any request that does not fit).
 * It adopts no cached prefix beyond the positions already delivered
 * (cached tokens have no logits); delivered positions are counted at
 * commit and never sent again: after a preemption the re-prefill is
 * all_logits only where positions are still missing.  Each slice says
 * which positions its rows deliver (sched_slice.plp_first, plp_n).
 *
 * Hidden states (sched_request_params.hidden_lo, hidden_hi; embeddings):
 * such a request needs the final hidden state of prompt positions [lo, hi)
 * (the last position included, when hi = n_prompt).  It works as prompt
 * logits do, exactly once and in order, with no cached prefix adopted
 * beyond the positions delivered, but its slices are model_slice.hidden
 * (every token gives a hidden row, slice after slice; sched_slice.hid_*)
 * and need no logits rows, so max_prompt_logits does not cap them.  One
 * sample only.
 *
 * Fair share (VTC, "Fairness in Serving Large Language Models", OSDI 2024):
 * each tenant has a virtual counter, charged at plan time with
 * (weight_in * prefill tokens + weight_out * decode tokens) / tenant weight
 * (recomputation after a preemption is not charged).  Admission picks the
 * backlogged tenant (one with waiting requests) whose counter is least.  A
 * tenant that becomes backlogged lifts its counter to at least the least
 * counter among the backlogged tenants (or, if none, among tenants with
 * running requests), so idling banks no credit.  Per-tenant limits: KV
 * blocks held, running sequences, waiting requests (over it,
 * sched_request_add returns -EBUSY at once: HTTP 429).
 *
 * Finishing: at commit a sample finishes on max_tokens, on reaching the
 * context length, on the eos token (unless ignore_eos), on a stop token, or
 * when its request was aborted.  The finishing token is still reported
 * (SCHED_EV_TOKEN) before SCHED_EV_FINISHED; the daemon decides whether the
 * client sees eos/stop tokens.  Pages of a finished sample are freed at
 * that commit.  After the last sample finishes, SCHED_EV_DONE; then the
 * request id is forgotten.
 *
 * Events are delivered synchronously through sched_config.on_event from
 * sched_step_plan (PREEMPTED, RESUMED, and FINISHED/DONE for aborted
 * requests) and sched_step_commit (TOKEN, FINISHED, DONE).  The callback
 * must not call back into the scheduler except sched_request_abort.
 *
 * Use (the daemon's loop; the engine thread runs only model_forward):
 *
 *     struct sched_batch b;
 *     if (sched_step_plan(s, &b) == 0) {
 *         model_forward(ctx, &b.mb, logits);          // [b.n_logits][n_vocab]
 *         for (k = 0; k < b.mb.n_slices; k++)
 *             if (b.mb.slices[k].sample) {
 *                 const struct sched_slice *in = &b.info[k];
 *                 // seed the sampler's stream with (request seed,
 *                 // in->sample_index) and draw token number in->token_index
 *                 tok[in->sample_row] = sample(in->sampling,
 *                                              logits + in->logits_row * n_vocab);
 *             }
 *         sched_step_commit(s, tok, b.n_sample);      // events: TOKEN, FINISHED, DONE
 *     }
 *
 * Errors: 0 or -errno.  Threading: none; one thread owns the scheduler and
 * its pager.  A step in flight (between plan and commit) may run on another
 * thread; it only reads the batch.  During that time the loop thread may
 * call sched_request_add, sched_request_abort and the getters, never plan.
 */
#ifndef FOLIO_SCHEDULER_H
#define FOLIO_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>

#include "folio/model.h"
#include "folio/pager.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sched sched_t;

/* ---- events ----------------------------------------------------------- */

enum sched_event_type {
    SCHED_EV_TOKEN,     /* sample `sample` produced `token`, its token_index-th */
    SCHED_EV_FINISHED,  /* sample `sample` finished with `reason` */
    SCHED_EV_DONE,      /* every sample finished; the request id is now gone */
    SCHED_EV_PREEMPTED, /* the request lost its pages (`preempt` says why) */
    SCHED_EV_RESUMED,   /* a preempted request was admitted again */
};

enum sched_finish_reason {
    SCHED_FINISH_NONE = 0,
    SCHED_FINISH_LENGTH, /* max_tokens reached, or the context length */
    SCHED_FINISH_STOP,   /* one of stop_ids */
    SCHED_FINISH_EOS,    /* eos_id (not with ignore_eos) */
    SCHED_FINISH_ABORT,  /* sched_request_abort */
};

enum sched_preempt_reason {
    SCHED_PREEMPT_NONE = 0,
    SCHED_PREEMPT_NO_BLOCKS,    /* the pool had no free block for a running sample */
    SCHED_PREEMPT_TENANT_LIMIT, /* its tenant reached max_kv_blocks */
};

struct sched_event {
    enum sched_event_type type;
    uint64_t request_id;
    void *user;                        /* sched_request_params.user */
    int32_t sample;                    /* TOKEN, FINISHED: sample index 0..n-1; else -1 */
    int32_t token;                     /* TOKEN: the token id */
    int32_t token_index;               /* TOKEN: its index among the sample's generated tokens */
    int32_t cached;                    /* TOKEN: prompt tokens found in the prefix cache at the
                                          request's first admission (before any preemption) */
    enum sched_finish_reason reason;   /* FINISHED */
    enum sched_preempt_reason preempt; /* PREEMPTED */
    uint32_t tenant;
};

typedef void (*sched_event_fn)(void *ctx, const struct sched_event *ev);

/* ---- configuration ---------------------------------------------------- */

struct sched_tenant_config {
    uint32_t id;              /* tenant id (the daemon uses the peer uid) */
    double weight;            /* share of service, > 0 (default 1) */
    int32_t max_kv_blocks;    /* blocks its running sequences may hold; 0 = no limit */
    int32_t max_running_seqs; /* 0 = no limit */
    int32_t max_waiting;      /* waiting requests before -EBUSY; 0 = no limit */
    uint64_t salt;            /* prefix-cache salt (0: derived from id) */
};

struct sched_config {
    int32_t max_batch_tokens; /* tokens per step, >= max_seqs */
    int32_t max_seqs;         /* running sequences (samples), >= 1 */
    int32_t max_ctx;          /* context length: prompt + generated <= max_ctx */
    int32_t watermark_blocks; /* free blocks admission must leave; < 0: 1% of the pool */
    double weight_in;         /* VTC cost of a prefill token (default 1 when 0) */
    double weight_out;        /* VTC cost of a decode token (default 2 when 0) */
    /* Baseline policy for the simulator: every sequence reserves max_ctx
     * slots (contiguous max-length allocation) at admission, on the same
     * pool; nothing is ever preempted. */
    bool reserve_max_len;
    /* Tokens of all_logits slices (prompt log-probabilities) a step may
     * hold, >= 0 (default 128); 0 refuses requests that ask for them. */
    int32_t max_prompt_logits;
    struct sched_tenant_config default_tenant; /* for tenants never configured (id ignored) */
    sched_event_fn on_event;                   /* may be NULL */
    void *event_ctx;
};

/* Fills cfg with defaults: 2048 batch tokens, 256 seqs, 4096 context,
 * watermark 1%, weights 1/2, 128 prompt-logit tokens a step, default
 * tenant weight 1 and no limits. */
void sched_config_default(struct sched_config *cfg);

/* ---- lifetime --------------------------------------------------------- */

/* A scheduler over pg (borrowed: it must outlive the scheduler, and
 * nothing else may append to its sequences).  -EINVAL for a bad config. */
int sched_new(const struct sched_config *cfg, pager_t *pg, sched_t **out);
/* Frees every request (no events) and their page tables. */
void sched_free(sched_t *s);

/* Adds or updates a tenant.  A new weight applies from now on. */
int sched_tenant_set(sched_t *s, const struct sched_tenant_config *tc);

/* ---- requests --------------------------------------------------------- */

struct sched_request_params {
    const int32_t *prompt;   /* copied */
    int32_t n_prompt;        /* 1 .. max_ctx - 1 */
    int32_t max_tokens;      /* >= 1 */
    const int32_t *stop_ids; /* copied; may be NULL */
    int32_t n_stop;
    int32_t eos_id; /* -1: none */
    bool ignore_eos;
    int32_t n; /* parallel samples, 1 .. max_seqs */
    uint32_t tenant;
    int32_t priority;     /* higher runs first within a tenant, preempted last */
    const void *sampling; /* opaque, carried into each sched_slice */
    void *user;           /* opaque, carried into each event */
    bool prompt_logits;   /* logits for every prompt position (see above) */
    /* hidden_hi > 0: hidden states of prompt positions [hidden_lo,
     * hidden_hi) (see above; 0 <= lo < hi <= n_prompt, n = 1, not with
     * prompt_logits) */
    int32_t hidden_lo, hidden_hi;
    uint64_t arrival_ns; /* for stats; the caller's clock */
    /* LoRA adapter of its slices (model_slice.lora; 0: none, >= 0).  Its
     * sequences' prefix-cache salt is the tenant's mixed with it: cached
     * blocks are shared only among requests of one tenant and adapter. */
    int32_t lora;
};

/* Queues a request (WAITING); *id names it until SCHED_EV_DONE.
 * -EINVAL bad params (empty prompt, n out of range, max_tokens < 1,
 * prompt_logits with max_prompt_logits 0),
 * -E2BIG prompt >= max_ctx, or the request could never run even alone
 * (n * blocks of min(prompt + max_tokens, max_ctx) tokens, or with the
 * pager's sliding window at most pager_window_blocks(max_batch_tokens)
 * blocks a sample, exceed the pool
 * or its tenant's max_kv_blocks, or n > its tenant's max_running_seqs),
 * -EBUSY tenant's waiting queue full (HTTP 429), -ENOMEM.  Stream tokens
 * are capped at max_ctx (the sample then finishes with LENGTH).  No event
 * is emitted. */
int sched_request_add(sched_t *s, const struct sched_request_params *p, uint64_t *id);

/* Marks a request aborted.  It is reclaimed (FINISHED with
 * SCHED_FINISH_ABORT for its unfinished samples, then DONE) at the next
 * sched_step_commit or, if no step is in flight, the next sched_step_plan;
 * safe while a step is in flight (that step's tokens for it are dropped).
 * -ENOENT unknown id. */
int sched_request_abort(sched_t *s, uint64_t id);

/* Marks one sample of a request aborted (a client that stopped reading
 * one choice): it finishes with SCHED_FINISH_ABORT when reclaimed, as
 * sched_request_abort does for the whole request, and its tokens from the
 * step in flight are dropped.  Before an n > 1 request is forked the
 * reclaim waits for the fork (sample 0's table holds the shared prefill).
 * Aborting every live sample aborts the request.  -ENOENT unknown id,
 * -EINVAL sample out of range; a finished sample is a no-op. */
int sched_sample_abort(sched_t *s, uint64_t id, int32_t sample);

/* ---- steps ------------------------------------------------------------ */

/* Per slice, what commit and the sampler need (parallel to mb.slices). */
struct sched_slice {
    uint64_t request_id;
    void *user;
    const void *sampling; /* sched_request_params.sampling */
    int32_t sample_index; /* 0..n-1: the sampler's random stream */
    int32_t token_index;  /* sampling slices: index of the generated token
                             this row samples (stable across preemption) */
    int32_t sample_row;   /* index into the sampled-token array, or -1 */
    /* model_forward's logits row of the slice's last token (sampling and
     * all_logits slices; an all_logits slice's rows end there), or -1 */
    int32_t logits_row;
    /* all_logits slices: the rows of prompt positions [plp_first,
     * plp_first + plp_n) are that request's prompt log-probabilities, not
     * delivered before (position p's row scores prompt token p + 1);
     * plp_index: their first entry in the step's prompt-row numbering
     * (0 .. sched_batch.n_plp - 1, slice after slice) */
    int32_t plp_first, plp_n, plp_index;
    /* hidden slices (model_slice.hidden): the hidden rows of prompt
     * positions [hid_first, hid_first + hid_n) are that request's, not
     * delivered before; hid_row: the model's hidden row of the slice's first
     * token (position first_pos; -1 for other slices) */
    int32_t hid_first, hid_n, hid_row;
    bool prefill; /* not a single-token decode */
    /* sampling slices: the sample's stream so far, prompt ++ the
     * token_index tokens it generated (penalties read it); NULL otherwise */
    const int32_t *stream;
    int32_t n_prompt;
};

/* One step.  mb is directly a struct model_batch; every array points into
 * the scheduler and stays valid and unchanged until sched_step_commit. */
struct sched_batch {
    struct model_batch mb;
    const struct sched_slice *info; /* [mb.n_slices] */
    int32_t n_sample;               /* slices with mb.slices[i].sample */
    int32_t n_logits;               /* logits rows model_forward writes */
    int32_t n_plp;                  /* prompt rows to deliver (sum of plp_n) */
    int32_t n_hidden;               /* hidden rows model_forward writes (tokens of
                                       hidden slices) */
    int32_t n_prefill_tokens, n_decode_tokens;
    int32_t n_preempted; /* requests preempted while planning this step */
    int32_t n_admitted;  /* requests admitted (or resumed) this step */
};

/* Plans the next step into *out.  0: a batch with >= 1 token; -EAGAIN:
 * nothing can run (no requests, or none fits); -EBUSY: a step is already
 * in flight; -ENOMEM. */
int sched_step_plan(sched_t *s, struct sched_batch *out);

/* Completes the step: sampled[i] is the token of the i-th sampling slice
 * (n_sampled == batch.n_sample).  Emits TOKEN / FINISHED / DONE events.
 * -EINVAL if no step is in flight or n_sampled is wrong. */
int sched_step_commit(sched_t *s, const int32_t *sampled, int32_t n_sampled);

/* ---- stats and checks ------------------------------------------------- */

struct sched_stats {
    int32_t waiting, running, preempted; /* requests per queue */
    int32_t running_seqs;                /* live samples holding pages */
    int64_t steps, preemptions, admitted, finished, refused;
    int64_t prefill_tokens, decode_tokens; /* computed, incl. recompute */
    int64_t recompute_tokens;              /* of prefill_tokens, recomputed */
    int64_t generated_tokens;              /* sampled and reported */
};

struct sched_tenant_stats {
    uint32_t id;
    double weight;
    double vtc;                          /* virtual token counter */
    int32_t waiting, running, preempted; /* requests */
    int32_t running_seqs;
    int32_t kv_blocks; /* blocks held by its page tables (shared counted per table) */
    int64_t prefill_tokens, decode_tokens, generated_tokens;
    int64_t preemptions, admitted, finished, refused;
};

void sched_stats_get(const sched_t *s, struct sched_stats *st);
int32_t sched_tenant_count(const sched_t *s);
/* i-th tenant in order of first appearance: -ENOENT past the end. */
int sched_tenant_stats_get(const sched_t *s, int32_t i, struct sched_tenant_stats *ts);
/* By id: -ENOENT if the tenant was never seen. */
int sched_tenant_stats_find(const sched_t *s, uint32_t id, struct sched_tenant_stats *ts);
bool sched_step_in_flight(const sched_t *s);

/* Walks every queue and page table and verifies the invariants (each
 * request in exactly one queue, running samples hold pages for exactly
 * their computed tokens plus this step's, the stream prefix in each page
 * table, step within budget, per-tenant counts, and pager_check).  0 or
 * -EUCLEAN with a message. */
int sched_check(const sched_t *s, char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif
#endif /* FOLIO_SCHEDULER_H */
