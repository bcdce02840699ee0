/*
 * daemon/backend.h — the one backend behind the server: the scheduler
 * (scheduler/) plans every step over the pager's (pager/) block pool, and
 * a step function computes the sampled tokens.  foliod's step function is
 * the model's forward pass and the sampler (engine_model.c); the test
 * double's is a deterministic token function (tests/integration/
 * fake_engine.c).  Either way the server talks to the real scheduler.
 *
 *   plan   (loop)    sched_step_plan → batch (arrays owned by the scheduler,
 *                    unchanged until commit); `started` for new requests
 *   run    (engine)  step->run(batch) → sampled[], res[] (logprobs rows),
 *                    slice_rc[] (a failed row ends its request alone)
 *   commit (loop)    sched_step_commit(sampled) → TOKEN / FINISHED / DONE
 *                    events, translated to eng_events
 *
 * One submit (the n choices of one prompt) is one scheduler request with n
 * samples: one prefill, then its pages forked n ways; sample i is engine
 * request rs[i].  The batch's sched_slice.sampling is the backend's; a
 * step function reads a sampling slice through eng_slice_req (the choice's
 * engine request, its sampler parameters, its history for penalties).
 * Tenants: scheduler tenant id = index in the config's tenant table.
 * End-of-generation ids (eng_backend_set_step) are every request's stop
 * ids unless ignore_eos, with the request's own stop ids (g.stop_ids).
 *
 * Threading: as engine.h; step->run runs on the engine thread and reads
 * only the batch.
 */
#ifndef FOLIO_DAEMON_BACKEND_H
#define FOLIO_DAEMON_BACKEND_H

#include "engine.h"
#include "folio/pager.h"
#include "folio/scheduler.h"

struct eng_backend;

/* Prompt tokens a step scores for prompt log-probabilities (the
 * scheduler's max_prompt_logits; longer prompts take several steps): as
 * many rows as 64 MiB of logits hold, 16 to 512 (eng_prompt_logits). */
#define ENG_PROMPT_LOGITS 512

static inline int32_t eng_prompt_logits(int32_t n_vocab)
{
    int64_t rows = n_vocab > 0 ? ((int64_t)1 << 24) / n_vocab : ENG_PROMPT_LOGITS;
    return (int32_t)(rows < 16 ? 16 : rows > ENG_PROMPT_LOGITS ? ENG_PROMPT_LOGITS : rows);
}

/* What the pool is sized for. */
struct eng_geom {
    int32_t n_layers, n_kv_heads, head_dim; /* K/V geometry */
    int32_t ctx_len;                        /* the scheduler's max_ctx */
    bool no_arena;                          /* bookkeeping only (test double) */
    int32_t window;                         /* sliding window of every layer (0: none) */
    enum folio_dtype kv_auto;               /* what --kv-dtype auto means here */
    int32_t n_vocab;                        /* sizes the prompt-logit rows (eng_prompt_logits) */
    int32_t n_embd; /* hidden-state width (embeddings; 0: none): sizes the hidden rows */
};

struct eng_step {
    const char *kind; /* "model", "fake" */
    void (*info)(void *ctx, struct eng_model_info *mi);
    /* Engine thread.  sampled[batch->n_sample]; res[sample_row] for rows of
     * requests with g.n_logprobs >= 0; plp[batch->n_plp]: the prompt rows
     * (sched_slice.plp_*: slice k's position plp_first + j at
     * plp[plp_index + j], scored with sampler_score); slice_rc[n_slices]:
     * 0 or -errno.  The batch has at most eng_prompt_logits(n_vocab)
     * all_logits tokens, so at most max_seqs + that many logits rows.
     * hidden[batch->n_hidden][n_embd]: every token's final hidden state
     * of the hidden slices (model_forward_hidden's rows; NULL when
     * eng_geom.n_embd is 0). */
    void (*run)(void *ctx, const struct sched_batch *batch, int32_t *sampled,
                struct sampler_result *res, struct sampler_result *plp, float *hidden,
                int *slice_rc);
    int (*detok)(void *ctx, int32_t token, char *buf, size_t cap);
    /* NULL: no tokenizer (as eng_backend_ops.tokenize). */
    int (*tokenize)(void *ctx, const char *text, size_t n, bool parse_special, int32_t **out,
                    int32_t *n_out);
    bool (*is_eog)(void *ctx, int32_t token);
    void (*free)(void *ctx);
};

/* Engine thread, for a sampling slice s of the batch in flight: its
 * choice's engine request; *sp (may be NULL) gets its sampler parameters
 * (g.sp, with the stop set banned while fewer than g.min_tokens tokens are
 * generated); *h (may be NULL) its history: prompt ++ generated so far. */
const struct eng_req *eng_slice_req(const struct sched_slice *s, struct sampler_params *sp,
                                    struct sampler_history *h);

/* Creates the pool (kv_mem / kv_blocks, block_size, kv_dtype from cfg; auto
 * is g->kv_auto) and the scheduler (max_batch_tokens, max_seqs, tenants).
 * err gets a message on failure. */
int eng_backend_new(const struct srv_config *cfg, const struct eng_geom *g,
                    struct eng_backend **out, char *err, size_t errlen);
pager_t *eng_backend_pager(struct eng_backend *b);
/* The step function; ctx is freed with the backend (step->free).  The
 * end-of-generation ids are found with step->is_eog over n_vocab ids. */
int eng_backend_set_step(struct eng_backend *b, const struct eng_step *step, void *ctx);
/* The ops the server drives; b is their backend pointer. */
extern const struct eng_backend_ops eng_backend_ops;

#endif
