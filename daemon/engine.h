/*
 * daemon/engine.h — the one narrow interface between the HTTP server and
 * whatever computes tokens.
 *
 * A backend (struct eng_backend_ops) is a scheduler plus a model: the
 * server submits requests and aborts them; the driver (engine.c) runs the
 * backend's steps:
 *
 *   loop thread:    plan()  ── a batch, immutable while it runs ──┐
 *   engine thread:  run()   ── model forward + sampling ─────────┤
 *   loop thread:    commit() ◄── uv_async_send ─────────────────-┘
 *                   (emits token / finished events, then plans again)
 *
 * Events (struct eng_events) are delivered on the loop thread from plan()
 * or commit(), never from submit() or abort() (the driver defers work to
 * its async callback, so server code is never re-entered).  The backend
 * reports `finished` exactly once per submitted request; after it, the
 * backend never touches the request and the server may free it.  abort()
 * only marks: a request in an in-flight batch is reclaimed at commit
 * (nothing referenced by a running step is freed during the step).
 *
 * Threading: every op except run() is called on the loop thread, and never
 * while run() executes for the ops that mutate (submit/abort only mark or
 * queue; plan/commit run only between steps).  stats/block_info may be
 * called during a step: backends must answer them from loop-thread state
 * that run() does not write.
 */
#ifndef FOLIO_DAEMON_ENGINE_H
#define FOLIO_DAEMON_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <uv.h>

#include "config.h"
#include "folio/grammar.h"
#include "folio/pager.h"
#include "folio/sampler.h"
#include "folio/scheduler.h"

/* Why a sequence ended: one vocabulary from the backend through the
 * completion state to the JSON writer and /metrics (eng_finish_name is
 * OpenAI's finish_reason). */
enum eng_finish {
    ENG_FINISH_NONE,   /* still running */
    ENG_FINISH_STOP,   /* an end-of-generation token, or a stop string */
    ENG_FINISH_LENGTH, /* max_tokens reached (or the context is full) */
    ENG_FINISH_ABORT,  /* aborted by the server */
    ENG_FINISH_ERROR,  /* the backend failed this request */
    ENG_FINISH_COUNT
};

/* "stop", "length", "abort", "error" ("" for NONE). */
const char *eng_finish_name(enum eng_finish f);

/* What one sequence asks of the sampler and the scheduler: filled by the
 * request parser (api_fields.c's table, one row per field) and consumed as
 * is — the backend hands `sp` to sampler_sample unchanged, and max_tokens
 * / ignore_eos to the scheduler.  A new sampling field is one row in that
 * table plus its use in the sampler. */
struct eng_gen {
    struct sampler_params sp; /* sp.bias: owned by the request description */
    int32_t max_tokens;
    bool ignore_eos;
    int32_t n_logprobs;           /* < 0: none; else the top-N (<= SAMPLER_MAX_TOP) to report */
    int32_t n_prompt_logprobs;    /* < 0: none; else every prompt token's logprob, rank and
                                     top-N (<= SAMPLER_MAX_TOP): the `prompt_logprobs` event */
    struct sampler_penalties pen; /* applied to the logits before sampling */
    int32_t min_tokens;           /* end-of-generation and stop ids banned before this many */
    int32_t priority;             /* lower runs earlier, within the request's tenant only */
    const int32_t *stop_ids;      /* [n_stop_ids] end the sequence too (owned by the request
                                     description); shown as end-of-generation tokens are */
    int32_t n_stop_ids;
    gram_t *grammar; /* constrained decoding (response_format, tools); NULL: none.  A
                      * reference owned by the request description */
    /* hidden_hi > 0: an embedding request (n = 1): the final hidden states
     * of prompt positions [hidden_lo, hidden_hi) go out through the
     * `hidden` event; the one token it samples (max_tokens 1) is not the
     * client's */
    int32_t hidden_lo, hidden_hi;
    /* 0: the base model; i in 1..eng_model_info.n_loras: through LoRA
     * adapter lora_names[i - 1] (its own prefix cache) */
    int32_t lora;
};

/* One sequence to generate.  Owned by the server; the backend keeps a
 * pointer from submit() until it reports `finished`. */
struct eng_req {
    uint64_t id;
    int tenant; /* index into the config's tenant table */
    const int32_t *prompt;
    int32_t n_prompt;
    struct eng_gen g;
    /* Set by the backend only for the duration of a `token` event when
     * g.n_logprobs >= 0: that token's logprob and top-N.  NULL otherwise. */
    const struct sampler_result *lp;
    /* Set by the backend with each `token` event: prompt tokens its first
     * admission found in the prefix cache (not computed). */
    int32_t cached_tokens;
    /* With g.grammar: this sequence's matcher (owned by the server, created
     * before submit, freed after `finished`); the step masks the logits
     * with it and advances it over each sampled token (engine thread). */
    gram_matcher_t *gm;
    void *user; /* the server's */
    void *priv; /* the backend's */
};

struct eng_events {
    void *user;
    /* First time the request is scheduled (its queue time ends). */
    void (*started)(void *user, struct eng_req *r);
    void (*token)(void *user, struct eng_req *r, int32_t token);
    void (*finished)(void *user, struct eng_req *r, enum eng_finish why);
    /* g.n_prompt_logprobs >= 0: prompt positions [first, first + n) were
     * scored: res[j] is prompt token first + j + 1's (the first prompt
     * token has none).  r is the first of the submitted choices (they
     * share one prompt).  From commit, before that step's token events;
     * every position once, in order, all of them before the first token.
     * May be NULL. */
    void (*prompt_logprobs)(void *user, struct eng_req *r, int32_t first, int32_t n,
                            const struct sampler_result *res);
    /* g.hidden_hi > 0: prompt positions [first, first + n) were computed:
     * rows[j * dim .. (j + 1) * dim) is position first + j's final hidden
     * state (the output norm's).  From commit, before that step's token
     * events; every position of [hidden_lo, hidden_hi) once, in order.
     * May be NULL. */
    void (*hidden)(void *user, struct eng_req *r, int32_t first, int32_t n, const float *rows,
                   int32_t dim);
};

struct eng_model_info {
    const char *name;
    const char *kind; /* what computes the tokens: "model", "fake" */
    int32_t n_vocab, ctx_len, eos_id;
    bool has_tokenizer; /* text prompts and text output */
    /* The model file's tokenizer.chat_template: chat_template_rc is 0 (then
     * chat_template is an enum chat_template), -ENOENT (no key) or -ENOTSUP
     * (a template chat.h does not recognise). */
    int chat_template, chat_template_rc;
    const char *matmul; /* matrix-product backend in use; NULL: none */
    bool constrained;   /* the step honours eng_gen.grammar (constrained decoding) */
    int32_t n_embd;     /* width of the hidden states (eng_gen.hidden_*); 0: none */
    /* the model file's {arch}.pooling_type (llama.cpp's numbering: 0 none,
     * 1 mean, 2 cls, 3 last, 4 rank); -1: no such key */
    int32_t pooling;
    /* A reranker's classification head (model_cls_head: cls_w [n_cls][n_embd],
     * cls_b [n_cls] or NULL), borrowed for the backend's lifetime; n_cls 0:
     * none (/v1/rerank is refused).  rerank_tmpl: the file's
     * tokenizer.chat_template.rerank ({query}, {document}), or NULL. */
    int32_t n_cls;
    const float *cls_w, *cls_b;
    const char *rerank_tmpl;
    /* the head's output names ({arch}.classifier.output_labels), n_cls of
     * them, or NULL (/classify then says LABEL_0, LABEL_1, ...) */
    const char *const *cls_labels;
    /* LoRA adapters requests may name ("model": lora_names[i] is eng_gen.lora
     * i + 1), their files, and ranks; n_loras 0: none */
    int32_t n_loras;
    const char *const *lora_names, *const *lora_paths;
    const int32_t *lora_ranks;
};

/* What a request's "model" names: 0 the model (mi->name), i >= 1 LoRA
 * adapter lora_names[i - 1] (eng_gen.lora); -1 neither. */
static inline int32_t eng_model_lookup(const struct eng_model_info *mi, const char *name)
{
    if (!strcmp(name, mi->name))
        return 0;
    for (int32_t i = 0; i < mi->n_loras; i++)
        if (!strcmp(name, mi->lora_names[i]))
            return i + 1;
    return -1;
}

/* The pool's and the queues' statistics: the pager's and the scheduler's
 * own structs, as they report them (nothing mirrored field by field). */
struct eng_stats {
    struct pager_stats pager;
    struct sched_stats sched;
    int64_t block_size; /* token slots per block */
    const char *kv_dtype;
    int64_t kv_resident; /* bytes of the pool's memory committed (pager_arena_resident) */
};

struct eng_backend_ops {
    void (*info)(void *b, struct eng_model_info *mi);
    /* Queues rs[0..n): n > 1 are the choices of one prompt, identical but
     * for g.sp.seed: one prefill, then the pages are forked (shared,
     * copy-on-write) n ways.  -EINVAL if it can never run (e.g. needs more
     * KV blocks than the pool or its tenant may hold); no event is sent
     * then.  abort() takes any one of them (the others go on). */
    int (*submit)(void *b, struct eng_req **rs, int32_t n);
    void (*abort)(void *b, struct eng_req *r);
    /* Retires aborted requests (finished events) and plans the next step.
     * Returns the step's token count (> 0: call run then commit), 0 when
     * idle, or -errno. */
    int (*plan)(void *b, const struct eng_events *ev);
    void (*run)(void *b);
    void (*commit)(void *b, const struct eng_events *ev);
    void (*stats)(void *b, struct eng_stats *st);
    /* Applies a tenant's weight and limits (config index t) from now on:
     * at start and on a reload (SIGHUP).  0 or -errno. */
    int (*tenant_set)(void *b, int t, const struct srv_tenant_cfg *tc);
    /* Zeroes st for a tenant the scheduler has not seen. */
    void (*tenant_stats)(void *b, int tenant, struct sched_tenant_stats *st);
    int32_t (*n_blocks)(void *b);
    void (*block_info)(void *b, int32_t block, struct pager_block_info *bi);
    /* Bytes of one token's text into buf; returns the length or -errno. */
    int (*detok)(void *b, int32_t token, char *buf, size_t cap);
    /* Text -> token ids (*out owned by the caller, folio_free), with the
     * model's BOS; parse_special: control tokens written in the text (chat
     * markers) become their ids.  NULL or -ENOSYS: no tokenizer. */
    int (*tokenize)(void *b, const char *text, size_t n, bool parse_special, int32_t **out,
                    int32_t *n_out);
    /* End-of-generation token (EOS, end of turn)?  NULL: only eos_id. */
    bool (*is_eog)(void *b, int32_t token);
    void (*free)(void *b);
};

/* Creates a backend from the configuration; err gets a message on failure. */
typedef int (*eng_backend_factory)(const struct srv_config *cfg, const struct eng_backend_ops **ops,
                                   void **b, char *err, size_t errlen);

/* ---- the driver (engine.c) ------------------------------------------- */

typedef struct srv_engine srv_engine_t;

struct srv_engine_step_stats {
    double seconds; /* wall time of run() */
    int tokens;
};

/* admit_wait_ms: after a commit that finished sequences, the next plan
 * waits up to this long for as many submitted ones (0: plans at once; see
 * engine.c). */
int srv_engine_init(srv_engine_t **out, uv_loop_t *loop, const struct eng_backend_ops *ops,
                    void *backend, const struct eng_events *ev, uint64_t admit_wait_ms,
                    void (*on_step)(void *user, const struct srv_engine_step_stats *st));
int srv_engine_submit(srv_engine_t *e, struct eng_req **rs, int32_t n);
void srv_engine_abort(srv_engine_t *e, struct eng_req *r);
/* Joins the engine thread (after the current step) and closes the async
 * and timer handles; frees e in the last close callback; the backend is not
 * freed. */
void srv_engine_close(srv_engine_t *e);

#endif
