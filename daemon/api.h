/*
 * daemon/api.h — the JSON side of the HTTP API, free of sockets so it can
 * be unit-tested: parsing and validating a /v1/completions,
 * /v1/chat/completions or /v1/embeddings body (the chat messages rendered
 * with a chat template, then tokenized), and writing OpenAI-style error
 * objects.
 *
 * Validation: wrong types, out-of-range numbers, values foliod cannot
 * honour and prompts that do not fit the context are refused with a 400
 * naming the field (`param`).  Fields the table does not know (clients
 * and proxies add them freely: `store`, `metadata`, vLLM's and
 * llama-server's extensions) are not errors here: they are listed in
 * srv_comp_params.unknown and the caller decides (foliod ignores them, or
 * refuses them with --strict-api).  Nothing here allocates on behalf of
 * anyone else: struct srv_comp_params owns its arrays;
 * srv_comp_params_free frees them.
 */
#ifndef FOLIO_DAEMON_API_H
#define FOLIO_DAEMON_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "folio/buf.h"
#include "engine.h"

#define SRV_MAX_STOP     4
#define SRV_MAX_STOP_LEN 256
#define SRV_MAX_N        16
#define SRV_MAX_PROMPTS  64
#define SRV_MAX_INPUTS   2048 /* /v1/embeddings inputs (OpenAI's limit) */
#define SRV_MAX_MESSAGES 1024
#define SRV_MAX_STOP_IDS 64
#define SRV_UNKNOWN_CAP  192 /* bytes of unknown field names kept */

struct srv_api_error {
    int status;        /* HTTP status */
    const char *type;  /* "invalid_request_error", ... */
    const char *param; /* field name or NULL (points at param_buf: a copy) */
    const char *code;  /* or NULL */
    char message[320];
    char param_buf[96]; /* the field name may come from a request freed before the answer */
};

/* One completion request as parsed.  `gen` is what each choice's engine
 * request carries (struct eng_gen: the sampler's and the scheduler's own
 * parameters); the rest is the server's (prompts, n, stop strings,
 * streaming, echo). */
struct srv_tools;

/* /v1/embeddings: how each input's vector is made (daemon/embed.h). */
enum srv_emb_norm {
    SRV_EMB_NORM_NONE = -1,  /* the pooled hidden state as is */
    SRV_EMB_NORM_MAXABS = 0, /* scaled so the largest magnitude is 32760 (int16's range) */
    SRV_EMB_NORM_TAXICAB = 1,
    SRV_EMB_NORM_EUCLID = 2, /* unit length (the default; greater values: that p-norm) */
};
struct srv_emb_params {
    bool base64;      /* encoding_format "base64": little-endian float32 bytes */
    int32_t dims;     /* dimensions: the first this many values (0: all) */
    bool normalize;   /* vLLM's normalize (default true: EUCLID, false: NONE) */
    int32_t norm;     /* llama-server's embd_normalize, when given (norm_set) */
    bool norm_set;    /* ... it wins over normalize */
    int32_t truncate; /* truncate_prompt_tokens: keep each input's last this many
                         tokens (-1: as many as fit; 0: none, a 400 when too long) */
    bool truncate_set;
};

/* /v1/rerank: the query, and how the answer is written (render.h). */
struct srv_rerank_params {
    char *query;           /* owned */
    bool score;            /* /v1/score (vLLM's): pairs (text_1 [i or 0], text_2 [i]) */
    char **queries;        /* score: text_1's texts, owned */
    int32_t n_queries;     /* 1 (paired with every text_2) or text_2's count */
    bool tei;              /* the documents came as `texts` (text-embeddings-inference's
                              form): the answer is its bare array of {index, score} */
    int32_t top_n;         /* the best this many (0: every document) */
    bool return_documents; /* each result's {"document": {"text"}} (default true) */
    bool return_text;      /* TEI's: each result's "text" (default false) */
};

/* /v1/responses (OpenAI's Responses API, api_responses.c): what the
 * response object repeats and what the response store keeps. */
struct srv_resp_params {
    char *echo;      /* the request's settings as JSON members ("instructions":...,"tools":...,
                        ...; no braces), as the response object repeats them */
    char *conv;      /* the conversation as a JSON array of chat messages: the previous
                        response's, then this input (without instructions) */
    char *prev_id;   /* previous_response_id, or NULL */
    char *input;     /* this request's input as a JSON array of items (message, function_call,
                        function_call_output; no ids), as input_items lists it */
    bool store;      /* keep the response (store, and a store on this server) */
    bool background; /* answered at once (status queued), run detached, kept in the store */
};
void srv_resp_params_free(struct srv_resp_params *r);

struct srv_comp_params {
    bool chat;      /* /v1/chat/completions: one prompt, rendered messages */
    bool embed;     /* /v1/embeddings (and /v1/rerank): each prompt's pooled final hidden state */
    bool rerank;    /* /v1/rerank: embed too, each document's prompt scored by the model's head */
    bool classify;  /* /classify: embed too, each input's class probabilities by the head */
    bool messages;  /* /v1/messages (Anthropic's): a chat completion answered in its shape */
    bool responses; /* /v1/responses (OpenAI's): the same, in the Responses shape */
    struct srv_resp_params *resp; /* owned; responses only */
    struct srv_emb_params emb;
    struct srv_rerank_params rr;
    int n_prompts;
    char **prompt_text; /* [n_prompts]: the text of text prompts, NULL for ids */
    int32_t **prompts;  /* [n_prompts][prompt_lens[i]] token ids */
    int32_t *prompt_lens;
    struct eng_gen gen;
    struct sampler_bias *bias; /* owned; gen.sp.bias points here */
    bool has_seed;             /* else each request gets its own seed */
    bool max_tokens_set;
    int32_t n;
    int n_stop;
    char *stop[SRV_MAX_STOP];
    size_t stop_len[SRV_MAX_STOP];
    bool stream, include_usage;
    bool echo;                      /* completions: the prompt text starts each choice's text */
    int32_t *stop_ids;              /* owned; gen.stop_ids points here */
    bool chat_logprobs;             /* chat `logprobs` (gen.n_logprobs = top_logprobs, else 0) */
    bool add_generation_prompt;     /* chat: the rendered text ends with the assistant's header
                                       (vLLM's field; default true) */
    bool add_generation_prompt_set; /* ... given (not null) */
    bool continue_final_message;    /* chat: the text ends inside the final message, which the
                                       model continues (vLLM's field; no generation prompt) */
    int32_t top_logprobs;           /* chat: 0..SAMPLER_MAX_TOP */
    bool top_logprobs_set;          /* given (implies logprobs) */
    int32_t prompt_logprobs;        /* -1, or 0..SAMPLER_MAX_TOP: the `prompt_logprobs` field
                                       (gen.n_prompt_logprobs also serves echo + logprobs) */
    int n_unknown;                  /* fields the table does not know (ignored unless strict) */
    char unknown[SRV_UNKNOWN_CAP];  /* their names, comma-separated (truncated) */
    /* response_format, grammar, tools (daemon/tools.h); NULL: none given.
     * gen.grammar, when set, is a reference this struct owns. */
    struct srv_tools *tools;
};

/* The request table (api.c): one row per accepted JSON field.  Exposed
 * for tests, which walk it. */
enum srv_field_type {
    SRV_F_I32,    /* int32_t, integral, in [lo, hi] */
    SRV_F_I64,    /* int64_t / uint64_t bits, integral, in [lo, hi] */
    SRV_F_F32,    /* float in [lo, hi] ((lo, hi] with lo_open) */
    SRV_F_BOOL,   /* bool */
    SRV_F_NOOP,   /* a field foliod knows but does not implement: accepted only as null,
                     `def` (a number), or the boolean `def != 0`; else a 400 */
    SRV_F_CUSTOM, /* parsed by the row's function */
};
/* hi: the number, ctx_len, n_vocab, n_embd */
enum srv_field_hi { SRV_HI_CONST, SRV_HI_CTX, SRV_HI_VOCAB, SRV_HI_EMBD };
#define SRV_EP_COMP     1u  /* /v1/completions */
#define SRV_EP_CHAT     2u  /* /v1/chat/completions */
#define SRV_EP_EMBED    4u  /* /v1/embeddings */
#define SRV_EP_RERANK   8u  /* /v1/rerank */
#define SRV_EP_SCORE    16u /* /v1/score */
#define SRV_EP_CLASSIFY 32u /* /classify (vLLM's) */

struct srv_field {
    const char *name;
    enum srv_field_type type;
    unsigned endpoints; /* SRV_EP_* accepting it */
    size_t off;         /* into struct srv_comp_params */
    double lo, hi, def; /* bounds; default (also the accepted no-op value) */
    enum srv_field_hi hi_from;
    bool lo_open;
    bool nullable;     /* null means the default */
    ssize_t set_off;   /* a bool set when given (not null), or -1 */
    const char *param; /* error `param` (default: name) */
    int (*parse)(const void *json, const struct eng_model_info *mi, struct srv_comp_params *p,
                 struct srv_api_error *err); /* SRV_F_CUSTOM */
};

const struct srv_field *srv_fields(size_t *n);

/* Tokenizer hook for text prompts: NULL or returning -ENOSYS means text
 * prompts are refused with a 400.  special: control tokens written in the
 * text become their ids (rendered chat prompts). */
typedef int (*srv_tokenize_fn)(void *ctx, const char *text, size_t n, bool special, int32_t **out,
                               int32_t *n_out);

/* Parses and validates a completion request body.  0, or -EINVAL with err
 * filled (status 400/404).  p is always safe to srv_comp_params_free. */
int srv_comp_parse(const char *body, size_t len, const struct eng_model_info *mi,
                   srv_tokenize_fn tok, void *tok_ctx, struct srv_comp_params *p,
                   struct srv_api_error *err);
void srv_comp_params_free(struct srv_comp_params *p);
/* Parses an embeddings body (OpenAI's and vLLM's fields, llama-server's
 * embd_normalize): `input` a string, an array of token ids, or a list of
 * either (up to SRV_MAX_INPUTS); each input becomes one prompt with n = 1
 * and a generation of one greedy token the client never sees (gen:
 * max_tokens 1, temperature 0, ignore_eos); the caller sets the hidden
 * range (eng_gen.hidden_*) from its pooling.  An input is at most ctx_len
 * - 1 tokens (truncate_prompt_tokens cuts longer ones to their last
 * tokens; else a 400). */
int srv_embed_parse(const char *body, size_t len, const struct eng_model_info *mi,
                    srv_tokenize_fn tok, void *tok_ctx, struct srv_comp_params *p,
                    struct srv_api_error *err);
/* Parses an Anthropic Messages body (api_messages.c says how it maps onto
 * a chat completion; count: /v1/messages/count_tokens's, without
 * max_tokens and the sampling fields) into a chat completion's params,
 * p->messages set.  The errors name the Messages fields. */
int srv_messages_parse(const char *body, size_t len, bool count, const struct eng_model_info *mi,
                       int tmpl, srv_tokenize_fn tok, void *tok_ctx, struct srv_comp_params *p,
                       struct srv_api_error *err);
/* Parses a /classify body (vLLM's: `input` as for embeddings, `model`,
 * `user`, `truncate_prompt_tokens`, `priority`): each input one prompt,
 * scored as an embedding is made, pooled at its last position. */
int srv_classify_parse(const char *body, size_t len, const struct eng_model_info *mi,
                       srv_tokenize_fn tok, void *tok_ctx, struct srv_comp_params *p,
                       struct srv_api_error *err);
/* The stored conversation (srv_resp_params.conv) of response id, as the
 * caller may see it, or NULL. */
typedef const char *(*srv_resp_lookup_fn)(void *ctx, const char *id);
/* Parses an OpenAI Responses body (api_responses.c says how it maps onto a
 * chat completion) into a chat completion's params, p->responses and
 * p->resp set; previous_response_id through lookup (not found: a 404);
 * can_store: this server keeps responses.  The errors name the Responses
 * fields. */
int srv_responses_parse(const char *body, size_t len, const struct eng_model_info *mi, int tmpl,
                        srv_tokenize_fn tok, void *tok_ctx, srv_resp_lookup_fn lookup,
                        void *lookup_ctx, bool can_store, struct srv_comp_params *p,
                        struct srv_api_error *err);
/* Parses a rerank body (the Jina / Cohere / vLLM form: `query`,
 * `documents` as strings or {"text"} objects, `top_n`,
 * `return_documents`; or text-embeddings-inference's: `texts`,
 * `return_text`), up to SRV_MAX_INPUTS documents.  Each document becomes
 * one prompt scored as an embedding is made (n 1, one unseen greedy
 * token), prompt_text[i] its text: the model's rerank template
 * (eng_model_info.rerank_tmpl) with {query} and {document} replaced,
 * tokenized with control tokens parsed and no BOS of its own (as
 * llama-server); without one, BOS + query + document (each with the EOS
 * the model adds, if any).  truncate_prompt_tokens as for embeddings. */
int srv_rerank_parse(const char *body, size_t len, const struct eng_model_info *mi,
                     srv_tokenize_fn tok, void *tok_ctx, struct srv_comp_params *p,
                     struct srv_api_error *err);
/* Parses a /v1/score body (vLLM's): `text_1` and `text_2`, each a string
 * or a list of strings; one text_1 is paired with every text_2, else the
 * two lists pair by index (equal lengths).  Each pair becomes a prompt as
 * a rerank document does (text_1 the query, text_2 the document);
 * rr.score set, rerank and embed too. */
int srv_score_parse(const char *body, size_t len, const struct eng_model_info *mi,
                    srv_tokenize_fn tok, void *tok_ctx, struct srv_comp_params *p,
                    struct srv_api_error *err);
/* The engine request of choice `choice` (prompts x n, prompt-major): its
 * prompt and a copy of p->gen, whose seed is the request's (else `seed`)
 * plus the choice's index within its prompt.  Borrows p's arrays. */
void srv_comp_req_init(const struct srv_comp_params *p, int choice, uint64_t seed,
                       struct eng_req *er);

/* Parses a chat completion body: the same sampling fields (plus
 * max_completion_tokens), `messages` [{role: system|user|assistant,
 * content: string or [{type:"text", text}]}] rendered with template tmpl
 * (an enum chat_template; 0: none, refused with a 400 that says to start
 * foliod with --chat-template) and tokenized with special tokens parsed.
 * p->prompt_text[0] gets the rendered text. */
int srv_chat_parse(const char *body, size_t len, const struct eng_model_info *mi, int tmpl,
                   srv_tokenize_fn tok, void *tok_ctx, struct srv_comp_params *p,
                   struct srv_api_error *err);

void srv_api_error_set(struct srv_api_error *e, int status, const char *type, const char *param,
                       const char *code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* {"error":{"message":...,"type":...,"param":...,"code":...}} */
void srv_api_error_json(struct folio_buf *b, const struct srv_api_error *e);
/* Anthropic's shape: {"type":"error","error":{"type":...,"message":...}},
 * the type from the status (400 invalid_request_error, 401
 * authentication_error, 403 permission_error, 404 not_found_error, 413
 * request_too_large, 429 rate_limit_error, 503 overloaded_error, other 5xx
 * api_error); the message names the field when there is one. */
void srv_api_error_json_anthropic(struct folio_buf *b, const struct srv_api_error *e);

/* POST /tokenize {"prompt" | "content": "text"[, "model"][,
 * "add_special_tokens" (vLLM) | "add_special" (llama-server): bool,
 * default true: the model's BOS]}: *text (folio_free) gets the text; a
 * body with "messages" (vLLM's chat form) only sets tp->chat.
 * POST /detokenize {"tokens": [ids][, "model"]}: *ids (folio_free) and
 * *n.  Other fields are counted in *n_unknown (and named in unknown, cap
 * SRV_UNKNOWN_CAP bytes, may be NULL), as for completions.  0, or -EINVAL
 * with err filled. */
struct srv_tok_params {
    char *text;       /* owned */
    bool chat;        /* /tokenize's chat form (vLLM's): the body has "messages" and is a
                         chat completion body; text is NULL (srv_chat_parse it) */
    bool add_special; /* the model's BOS (and EOS if it adds one) */
    int n_unknown;
    char unknown[SRV_UNKNOWN_CAP];
};
int srv_tokenize_parse(const char *body, size_t len, const struct eng_model_info *mi,
                       struct srv_tok_params *tp, struct srv_api_error *err);
int srv_detokenize_parse(const char *body, size_t len, const struct eng_model_info *mi,
                         int32_t **ids, int32_t *n, struct srv_tok_params *tp,
                         struct srv_api_error *err);

#endif
