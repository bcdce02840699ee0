/*
 * daemon/api.h — the JSON side of the HTTP API, free of sockets so it can
 * be unit-tested: parsing and validating a /v1/completions or
 * /v1/chat/completions body (the chat messages rendered with a chat
 * template, then tokenized), and writing OpenAI-style error objects.
 *
 * Validation is strict: unknown fields, wrong types, out-of-range numbers
 * and prompts that do not fit the context are refused with a 400 naming
 * the field (`param`).  Nothing here allocates on behalf of anyone else:
 * struct srv_comp_params owns its arrays; srv_comp_params_free frees them.
 */
#ifndef FOLIO_DAEMON_API_H
#define FOLIO_DAEMON_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "engine.h"

#define SRV_MAX_STOP     4
#define SRV_MAX_STOP_LEN 256
#define SRV_MAX_N        16
#define SRV_MAX_PROMPTS  64
#define SRV_MAX_MESSAGES 1024

struct srv_api_error {
    int status;        /* HTTP status */
    const char *type;  /* "invalid_request_error", ... */
    const char *param; /* field name or NULL */
    const char *code;  /* or NULL */
    char message[320];
};

struct srv_comp_params {
    bool chat; /* /v1/chat/completions: one prompt, rendered messages */
    int n_prompts;
    char **prompt_text; /* [n_prompts]: the text of text prompts, NULL for ids */
    int32_t **prompts;  /* [n_prompts][prompt_lens[i]] token ids */
    int32_t *prompt_lens;
    int32_t max_tokens;
    float temperature, top_p;
    int32_t top_k;
    bool has_seed;
    uint64_t seed;
    int n;
    int n_stop;
    char *stop[SRV_MAX_STOP];
    size_t stop_len[SRV_MAX_STOP];
    bool ignore_eos, stream, include_usage;
    bool echo;        /* completions: the prompt text starts each choice's text */
    int32_t logprobs; /* completions: top-N (0..20) per token; -1: none */
    int32_t n_bias;
    int32_t *bias_tokens;
    float *bias_values;
};

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
void srv_api_error_json(struct srv_buf *b, const struct srv_api_error *e);

/* POST /tokenize {"prompt": "text"[, "model"]}: *text (folio_free) gets
 * the prompt.  POST /detokenize {"tokens": [ids][, "model"]}: *ids
 * (folio_free) and *n.  0, or -EINVAL with err filled. */
int srv_tokenize_parse(const char *body, size_t len, const struct eng_model_info *mi, char **text,
                       struct srv_api_error *err);
int srv_detokenize_parse(const char *body, size_t len, const struct eng_model_info *mi,
                         int32_t **ids, int32_t *n, struct srv_api_error *err);

/* True when s[0..n) is valid UTF-8. */
bool srv_utf8_valid(const char *s, size_t n);

#endif
