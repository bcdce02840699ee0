/*
 * daemon/api.c — /v1/completions, /v1/chat/completions, /v1/embeddings
 * and /v1/rerank request validation (cJSON) through the request table,
 * /tokenize and /detokenize bodies, and error objects.
 *
 * The accepted fields are the request table (api_fields.c: name, type,
 * endpoints, destination, bounds, default); anything else is listed in
 * srv_comp_params.unknown for the caller (ignored, or a 400 with
 * --strict-api).  This file owns what is not one row: the body's outer
 * checks (UTF-8, NUL, one JSON object, no key twice), the prompt (text,
 * token ids, or a list of them), the checks across fields once every row
 * is parsed, and the engine request built from the result.
 *
 * The routes share one field loop (parse_body) over that table; its
 * endpoint column switches `prompt` for `messages` (or embeddings'
 * `input`, parsed as `prompt` is, or rerank's `documents`, made into
 * prompts in api_rerank.c), completions' integer `logprobs` for
 * chat's boolean `logprobs` + `top_logprobs`, and leaves chat's echo to its
 * no-op value.  Chat messages are parsed and rendered in api_chat.c.
 */
#include "api.h"
#include "api_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/chat.h"
#include "folio/common.h"
#include "folio/sampler.h"
#include "tools.h"

void srv_api_error_set(struct srv_api_error *e, int status, const char *type, const char *param,
                       const char *code, const char *fmt, ...)
{
    e->status = status;
    e->type = type;
    e->param = NULL;
    if (param) {
        snprintf(e->param_buf, sizeof(e->param_buf), "%s", param);
        e->param = e->param_buf;
    }
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
}

static void json_str_or_null(struct folio_buf *b, const char *s)
{
    if (s)
        folio_buf_json_str(b, s, strlen(s));
    else
        folio_buf_puts(b, "null");
}

void srv_api_error_json(struct folio_buf *b, const struct srv_api_error *e)
{
    folio_buf_puts(b, "{\"error\":{\"message\":");
    /* messages quote user input: keep them valid UTF-8 */
    size_t n = strlen(e->message);
    if (folio_utf8_valid(e->message, n))
        folio_buf_json_str(b, e->message, n);
    else
        folio_buf_puts(b, "\"(message not valid UTF-8)\"");
    folio_buf_puts(b, ",\"type\":");
    json_str_or_null(b, e->type);
    folio_buf_puts(b, ",\"param\":");
    json_str_or_null(b, e->param);
    folio_buf_puts(b, ",\"code\":");
    if (e->code)
        json_str_or_null(b, e->code);
    else
        folio_buf_printf(b, "%d", e->status);
    folio_buf_puts(b, "}}");
}

void srv_api_error_json_anthropic(struct folio_buf *b, const struct srv_api_error *e)
{
    const int s = e->status;
    const char *type = s == 400   ? "invalid_request_error"
                       : s == 401 ? "authentication_error"
                       : s == 403 ? "permission_error"
                       : s == 404 ? "not_found_error"
                       : s == 413 ? "request_too_large"
                       : s == 429 ? "rate_limit_error"
                       : s == 503 ? "overloaded_error"
                       : s >= 500 ? "api_error"
                                  : "invalid_request_error";
    struct folio_buf m = {0};
    if (e->param)
        folio_buf_printf(&m, "%s: ", e->param);
    folio_buf_puts(&m, e->message);
    folio_buf_printf(b, "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":", type);
    if (!m.oom && m.p && folio_utf8_valid(m.p, m.len))
        folio_buf_json_str(b, m.p, m.len);
    else
        folio_buf_puts(b, "\"(message not valid UTF-8)\"");
    folio_buf_puts(b, "}}");
    folio_buf_free(&m);
}

void srv__note_unknown(char *names, int *n, const char *prefix, const char *name)
{
    size_t at = strlen(names), room = SRV_UNKNOWN_CAP - at;
    if (room > 1)
        snprintf(names + at, room, "%s%s%.64s", *n ? "," : "", prefix, name);
    (*n)++;
}

/* True when the JSON text holds a NUL, raw or as the escape \u0000: the
 * parser's C strings would end there and the rest be silently lost. */
static bool json_has_nul(const char *s, size_t n)
{
    if (memchr(s, 0, n))
        return true;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        if (!in_str) {
            in_str = s[i] == '"';
            continue;
        }
        if (s[i] == '"')
            in_str = false;
        else if (s[i] == '\\' && i + 1 < n) {
            if (s[i + 1] == 'u' && i + 5 < n && !memcmp(s + i + 2, "0000", 4))
                return true;
            i++; /* the escaped character */
        }
    }
    return false;
}

static const char *prompt_field(const struct srv_comp_params *p);

/* Takes toks and text (may be NULL) whatever happens. */
int srv__add_prompt(struct srv_comp_params *p, int32_t *toks, int32_t n, char *text,
                    struct srv_api_error *err)
{
    const int max = p->embed ? SRV_MAX_INPUTS : SRV_MAX_PROMPTS;
    if (p->n_prompts >= max) {
        folio_free(toks);
        folio_free(text);
        if (p->rerank)
            BAD(prompt_field(p), "at most %d documents per request", max);
        if (p->embed)
            BAD("input", "at most %d inputs per request", max);
        BAD("prompt", "at most %d prompts per request", max);
    }
    int32_t **pp = folio_realloc(p->prompts, (p->n_prompts + 1) * sizeof(*pp));
    if (pp)
        p->prompts = pp;
    int32_t *pl = pp ? folio_realloc(p->prompt_lens, (p->n_prompts + 1) * sizeof(*pl)) : NULL;
    if (pl)
        p->prompt_lens = pl;
    char **pt = pl ? folio_realloc(p->prompt_text, (p->n_prompts + 1) * sizeof(*pt)) : NULL;
    if (!pt) {
        folio_free(toks);
        folio_free(text);
        srv_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        return -ENOMEM;
    }
    p->prompt_text = pt;
    p->prompts[p->n_prompts] = toks;
    p->prompt_text[p->n_prompts] = text;
    p->prompt_lens[p->n_prompts++] = n;
    return 0;
}

/* The prompt field's name: "prompt", embeddings' "input", rerank's
 * "documents" (or TEI's "texts"). */
static const char *prompt_field(const struct srv_comp_params *p)
{
    return p->rr.score ? "text_2"
           : p->rerank ? (p->rr.tei ? "texts" : "documents")
           : p->embed  ? "input"
                       : "prompt";
}

static int token_array(const cJSON *a, const struct eng_model_info *mi, struct srv_comp_params *p,
                       struct srv_api_error *err)
{
    const char *pf = prompt_field(p);
    int n = cJSON_GetArraySize(a);
    if (n == 0)
        BAD(pf, "'%s' must not be empty", pf);
    if (n > mi->ctx_len && !p->emb.truncate_set) { /* truncated later */
        srv_api_error_set(err, 400, "invalid_request_error", pf, "context_length_exceeded",
                          "This model's maximum context length is %d tokens; %s has %d",
                          mi->ctx_len, pf, n);
        return -EINVAL;
    }
    int32_t *toks = folio_malloc((size_t)n * sizeof(int32_t));
    if (!toks) {
        srv_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        return -ENOMEM;
    }
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, a)
    {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) ||
            it->valuedouble < 0 || it->valuedouble >= mi->n_vocab) {
            folio_free(toks);
            BAD(pf, "%s token %d is not a token id in [0, %d)", pf, i, mi->n_vocab);
        }
        toks[i++] = (int32_t)it->valuedouble;
    }
    return srv__add_prompt(p, toks, n, NULL, err);
}

static int text_prompt(const cJSON *s, srv_tokenize_fn tok, void *tok_ctx,
                       struct srv_comp_params *p, struct srv_api_error *err)
{
    const char *pf = prompt_field(p);
    int32_t *toks = NULL, n = 0;
    int rc = tok ? tok(tok_ctx, s->valuestring, strlen(s->valuestring), false, &toks, &n) : -ENOSYS;
    if (rc == -ENOSYS)
        BAD(pf,
            "text prompts are not supported yet (no tokenizer in this build): send "
            "'%s' as an array of token ids",
            pf);
    if (rc < 0)
        BAD(pf, "cannot tokenize '%s' (%s)", pf, strerror(-rc));
    if (n == 0) {
        folio_free(toks);
        BAD(pf, "'%s' must not be empty", pf);
    }
    char *text = folio_strdup(s->valuestring);
    if (!text) {
        folio_free(toks);
        return -ENOMEM;
    }
    return srv__add_prompt(p, toks, n, text, err);
}

static int parse_prompt(const cJSON *v, const struct eng_model_info *mi, srv_tokenize_fn tok,
                        void *tok_ctx, struct srv_comp_params *p, struct srv_api_error *err)
{
    const char *pf = prompt_field(p);
    if (cJSON_IsString(v))
        return text_prompt(v, tok, tok_ctx, p, err);
    if (!cJSON_IsArray(v))
        BAD(pf, "'%s' must be a string, an array of token ids, or a list of them", pf);
    if (p->embed && !v->child)
        BAD(pf, "'%s' must not be empty", pf);
    const cJSON *first = v->child;
    if (!first || cJSON_IsNumber(first))
        return token_array(v, mi, p, err);
    const cJSON *it;
    cJSON_ArrayForEach(it, v)
    {
        int rc;
        if (cJSON_IsString(it))
            rc = text_prompt(it, tok, tok_ctx, p, err);
        else if (cJSON_IsArray(it))
            rc = token_array(it, mi, p, err);
        else
            BAD(pf, "'%s' list items must be strings or arrays of token ids", pf);
        if (rc)
            return rc;
    }
    return 0;
}

/* Embeddings, once the fields and inputs are parsed: inputs cut to
 * truncate_prompt_tokens or refused when they do not fit; the one greedy
 * token each generates (never shown). */
static int embed_finish(struct srv_comp_params *p, const struct eng_model_info *mi,
                        struct srv_api_error *err)
{
    const int32_t fit = mi->ctx_len - 1; /* room for the token the step samples */
    int32_t keep = !p->emb.truncate_set ? 0 : p->emb.truncate < 0 ? fit : p->emb.truncate;
    if (keep > fit) {
        srv_api_error_set(err, 400, "invalid_request_error", "truncate_prompt_tokens", NULL,
                          "'truncate_prompt_tokens' (%d) must be at most %d (the model's context "
                          "less one)",
                          keep, fit);
        return -EINVAL;
    }
    for (int i = 0; i < p->n_prompts; i++) {
        int32_t n = p->prompt_lens[i];
        if (keep > 0 && n > keep) { /* the last tokens, as vLLM keeps them */
            memmove(p->prompts[i], p->prompts[i] + (n - keep), (size_t)keep * sizeof(int32_t));
            p->prompt_lens[i] = keep;
        } else if (n > fit) {
            srv_api_error_set(err, 400, "invalid_request_error", prompt_field(p),
                              "context_length_exceeded",
                              "This model's maximum context length is %d tokens; %s %d has %d "
                              "(at most %d fit; 'truncate_prompt_tokens' keeps the last ones)",
                              mi->ctx_len, p->rerank ? "document" : "input", i, n, fit);
            return -EINVAL;
        }
    }
    p->n = 1;
    p->gen.max_tokens = 1;
    p->gen.sp.temperature = 0;
    p->gen.ignore_eos = true;
    p->gen.n_logprobs = p->gen.n_prompt_logprobs = -1;
    return 0;
}

static int parse_body(const char *body, size_t len, const struct eng_model_info *mi, unsigned ep,
                      int tmpl, srv_tokenize_fn tok, void *tok_ctx, struct srv_comp_params *p,
                      struct srv_api_error *err)
{
    memset(p, 0, sizeof(*p));
    const bool chat = ep == SRV_EP_CHAT;
    p->chat = chat;
    p->rr.score = ep == SRV_EP_SCORE;
    p->rerank = ep == SRV_EP_RERANK || p->rr.score;
    p->classify = ep == SRV_EP_CLASSIFY;
    p->embed = ep == SRV_EP_EMBED || p->rerank || p->classify;
    size_t n_fields;
    const struct srv_field *fields = srv_fields(&n_fields);
    for (size_t i = 0; i < n_fields; i++)
        srv__field_default(&fields[i], p);
    if (!folio_utf8_valid(body, len))
        BAD(NULL, "request body is not valid UTF-8");
    if (json_has_nul(body, len))
        BAD(NULL, "request body holds a NUL character (\\u0000), which is not accepted");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!root)
        BAD(NULL, "request body is not valid JSON");
    int rc = 0;
    for (; end && end < body + len; end++)
        if (*end != ' ' && *end != '\t' && *end != '\r' && *end != '\n') {
            srv_api_error_set(err, 400, "invalid_request_error", NULL, NULL,
                              "request body has data after the JSON value");
            rc = -EINVAL;
            goto out;
        }
    if ((rc = srv__object_once(root, err)))
        goto out;
    const cJSON *prompt = NULL, *it;
    const char *prompt_name = chat ? "messages" : prompt_field(p);
    cJSON_ArrayForEach(it, root)
    {
        const struct srv_field *f = NULL;
        for (size_t i = 0; i < n_fields && !f; i++)
            if ((fields[i].endpoints & ep) && !strcmp(it->string, fields[i].name))
                f = &fields[i];
        if (!f)
            srv__note_unknown(p->unknown, &p->n_unknown, "", it->string);
        else if (f->type == SRV_F_CUSTOM && !f->parse && prompt) { /* documents and texts */
            srv_api_error_set(err, 400, "invalid_request_error", it->string, NULL,
                              "give '%s' or '%s', not both", prompt->string, it->string);
            rc = -EINVAL;
        } else if (f->type == SRV_F_CUSTOM && !f->parse) {
            prompt = it;
            p->rr.tei = p->rerank && !strcmp(it->string, "texts");
        } else
            rc = srv__field_parse(f, it, mi, p, err);
        if (rc)
            goto out;
    }
    if (!prompt) {
        srv_api_error_set(err, 400, "invalid_request_error", prompt_name, NULL, "'%s' is required",
                          prompt_name);
        rc = -EINVAL;
        goto out;
    }
    if (p->rerank && !p->rr.query && !p->rr.queries) {
        const char *q = p->rr.score ? "text_1" : "query";
        srv_api_error_set(err, 400, "invalid_request_error", q, NULL, "'%s' is required", q);
        rc = -EINVAL;
        goto out;
    }
    if ((rc = chat        ? srv__chat_messages(prompt, tmpl, tok, tok_ctx, p, err)
              : p->rerank ? srv__rerank_prompts(prompt, mi, tok, tok_ctx, p, err)
                          : parse_prompt(prompt, mi, tok, tok_ctx, p, err)))
        goto out;
    if (p->embed) {
        rc = embed_finish(p, mi, err);
        goto out;
    }
    if ((rc = srv__structured_finish(p, mi, tmpl, err)))
        goto out;
    if (p->include_usage && !p->stream) {
        srv_api_error_set(err, 400, "invalid_request_error", "stream_options", NULL,
                          "'stream_options' is only allowed with 'stream': true");
        rc = -EINVAL;
        goto out;
    }
    if (p->n_prompts * p->n > SRV_MAX_PROMPTS) {
        srv_api_error_set(err, 400, "invalid_request_error", "n", NULL,
                          "prompts x n must be at most %d", SRV_MAX_PROMPTS);
        rc = -EINVAL;
        goto out;
    }
    if (chat && (p->chat_logprobs || (p->top_logprobs_set && p->top_logprobs > 0)))
        p->gen.n_logprobs = p->top_logprobs;
    if (p->prompt_logprobs >= 0 && p->stream) {
        srv_api_error_set(err, 400, "invalid_request_error", "prompt_logprobs", NULL,
                          "'prompt_logprobs' is not available with 'stream': true");
        rc = -EINVAL;
        goto out;
    }
    /* the prompt's logprobs: asked for, or echoed with logprobs */
    p->gen.n_prompt_logprobs = FOLIO_MAX(p->prompt_logprobs, p->echo ? p->gen.n_logprobs : -1);
    /* chat: no max_tokens means "until the context is full" (as OpenAI) */
    if (chat && !p->max_tokens_set && p->prompt_lens[0] < mi->ctx_len)
        p->gen.max_tokens = mi->ctx_len - p->prompt_lens[0];
    if (p->gen.min_tokens > p->gen.max_tokens) {
        srv_api_error_set(err, 400, "invalid_request_error", "min_tokens", NULL,
                          "'min_tokens' (%d) must not exceed max_tokens (%d)", p->gen.min_tokens,
                          p->gen.max_tokens);
        rc = -EINVAL;
        goto out;
    }
    for (int i = 0; i < p->n_prompts; i++) {
        int64_t need = (int64_t)p->prompt_lens[i] + p->gen.max_tokens;
        if (need > mi->ctx_len) {
            srv_api_error_set(err, 400, "invalid_request_error",
                              p->max_tokens_set ? "max_tokens"
                              : chat            ? "messages"
                                                : "prompt",
                              "context_length_exceeded",
                              "This model's maximum context length is %d tokens. However, you "
                              "requested %lld tokens (%d in the prompt, %d for the completion).",
                              mi->ctx_len, (long long)need, p->prompt_lens[i], p->gen.max_tokens);
            rc = -EINVAL;
            goto out;
        }
    }
out:
    cJSON_Delete(root);
    if (rc == -ENOMEM)
        srv_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    return rc;
}

int srv_comp_parse(const char *body, size_t len, const struct eng_model_info *mi,
                   srv_tokenize_fn tok, void *tok_ctx, struct srv_comp_params *p,
                   struct srv_api_error *err)
{
    return parse_body(body, len, mi, SRV_EP_COMP, 0, tok, tok_ctx, p, err);
}

int srv_embed_parse(const char *body, size_t len, const struct eng_model_info *mi,
                    srv_tokenize_fn tok, void *tok_ctx, struct srv_comp_params *p,
                    struct srv_api_error *err)
{
    return parse_body(body, len, mi, SRV_EP_EMBED, 0, tok, tok_ctx, p, err);
}

int srv_rerank_parse(const char *body, size_t len, const struct eng_model_info *mi,
                     srv_tokenize_fn tok, void *tok_ctx, struct srv_comp_params *p,
                     struct srv_api_error *err)
{
    return parse_body(body, len, mi, SRV_EP_RERANK, 0, tok, tok_ctx, p, err);
}

int srv_score_parse(const char *body, size_t len, const struct eng_model_info *mi,
                    srv_tokenize_fn tok, void *tok_ctx, struct srv_comp_params *p,
                    struct srv_api_error *err)
{
    return parse_body(body, len, mi, SRV_EP_SCORE, 0, tok, tok_ctx, p, err);
}

int srv_classify_parse(const char *body, size_t len, const struct eng_model_info *mi,
                       srv_tokenize_fn tok, void *tok_ctx, struct srv_comp_params *p,
                       struct srv_api_error *err)
{
    return parse_body(body, len, mi, SRV_EP_CLASSIFY, 0, tok, tok_ctx, p, err);
}

int srv_chat_parse(const char *body, size_t len, const struct eng_model_info *mi, int tmpl,
                   srv_tokenize_fn tok, void *tok_ctx, struct srv_comp_params *p,
                   struct srv_api_error *err)
{
    return parse_body(body, len, mi, SRV_EP_CHAT, tmpl, tok, tok_ctx, p, err);
}

void srv_comp_req_init(const struct srv_comp_params *p, int choice, uint64_t seed,
                       struct eng_req *er)
{
    int pi = choice / p->n;
    er->prompt = p->prompts[pi];
    er->n_prompt = p->prompt_lens[pi];
    er->g = p->gen;
    er->g.sp.seed = (p->has_seed ? p->gen.sp.seed : seed) + (uint64_t)(choice % p->n);
}

int srv__parts_text(const cJSON *c, const char *const *types, const char *param, const char *what,
                    char **out, struct srv_api_error *err)
{
    if (cJSON_IsString(c)) {
        *out = folio_strdup(c->valuestring);
        return *out ? 0 : -ENOMEM;
    }
    if (!cJSON_IsArray(c))
        BAD(param, "%s must be a string or an array of content parts", what);
    struct folio_buf b = {0};
    const cJSON *part;
    int k = 0, rc = 0;
    cJSON_ArrayForEach(part, c)
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        bool known = false;
        for (const char *const *t = types; cJSON_IsString(type) && *t && !known; t++)
            known = !strcmp(type->valuestring, *t);
        if (!cJSON_IsString(type))
            srv_api_error_set(err, 400, "invalid_request_error", param, NULL,
                              "%s[%d] must be a content part with a \"type\"", what, k);
        else if (!known)
            srv_api_error_set(err, 400, "invalid_request_error", param, NULL,
                              "%s[%d]: content of type '%.32s' is not supported here (text only)",
                              what, k, type->valuestring);
        else if (!cJSON_IsString(text))
            srv_api_error_set(err, 400, "invalid_request_error", param, NULL,
                              "%s[%d].text must be a string", what, k);
        else {
            folio_buf_puts(&b, text->valuestring);
            k++;
            continue;
        }
        rc = -EINVAL;
        break;
    }
    if (!rc && b.oom)
        rc = -ENOMEM;
    if (rc) {
        folio_buf_free(&b);
        return rc;
    }
    *out = b.p ? b.p : folio_strdup("");
    return *out ? 0 : -ENOMEM;
}

int srv__add_message(cJSON *arr, const char *role, char *text)
{
    cJSON *m = text ? cJSON_CreateObject() : NULL;
    bool ok = m && cJSON_AddStringToObject(m, "role", role) &&
              cJSON_AddStringToObject(m, "content", text);
    folio_free(text);
    if (!ok) {
        cJSON_Delete(m);
        return -ENOMEM;
    }
    cJSON_AddItemToArray(arr, m);
    return 0;
}

void srv_comp_params_free(struct srv_comp_params *p)
{
    for (int i = 0; i < p->n_prompts; i++) {
        folio_free(p->prompts[i]);
        if (p->prompt_text)
            folio_free(p->prompt_text[i]);
    }
    folio_free(p->prompt_text);
    folio_free(p->prompts);
    folio_free(p->prompt_lens);
    for (int i = 0; i < p->n_stop; i++)
        folio_free(p->stop[i]);
    folio_free(p->bias);
    folio_free(p->stop_ids);
    srv_tools_free(p->tools);
    folio_free(p->rr.query);
    for (int32_t i = 0; i < p->rr.n_queries; i++)
        folio_free(p->rr.queries[i]);
    folio_free(p->rr.queries);
    srv_resp_params_free(p->resp);
    gram_unref(p->gen.grammar);
    memset(p, 0, sizeof(*p));
}

/* Shared by /tokenize and /detokenize: an object with the text or ids
 * under one of `want` (NULL-terminated spellings), optionally "model",
 * the add-special flag (both peers' spellings) and `extra` (a field of the
 * other route, accepted and ignored); anything else is counted in tp.
 * Returns the member or NULL (err set). */
static const cJSON *small_body(const cJSON *root, const struct eng_model_info *mi,
                               const char *const *want, struct srv_tok_params *tp,
                               struct srv_api_error *err)
{
    if (!cJSON_IsObject(root)) {
        srv_api_error_set(err, 400, "invalid_request_error", NULL, NULL,
                          "request body must be a JSON object");
        return NULL;
    }
    const cJSON *it, *found = NULL;
    cJSON_ArrayForEach(it, root)
    {
        bool is_want = false;
        for (const char *const *w = want; *w; w++)
            is_want |= !strcmp(it->string, *w);
        if (is_want)
            found = it;
        else if (!strcmp(it->string, "model")) {
            if (!cJSON_IsString(it) || eng_model_lookup(mi, it->valuestring) < 0) {
                srv_api_error_set(err, 404, "NotFoundError", "model", "model_not_found",
                                  "unknown model");
                return NULL;
            }
        } else if (!strcmp(it->string, "add_special_tokens") ||
                   !strcmp(it->string, "add_special")) {
            if (!cJSON_IsBool(it)) {
                srv_api_error_set(err, 400, "invalid_request_error", it->string, NULL,
                                  "'%s' must be a boolean", it->string);
                return NULL;
            }
            tp->add_special = cJSON_IsTrue(it);
        } else
            srv__note_unknown(tp->unknown, &tp->n_unknown, "", it->string);
    }
    if (!found)
        srv_api_error_set(err, 400, "invalid_request_error", want[0], NULL, "'%s' is required",
                          want[0]);
    return found;
}

int srv__object_once(const cJSON *obj, struct srv_api_error *err)
{
    if (!cJSON_IsObject(obj)) {
        srv_api_error_set(err, 400, "invalid_request_error", NULL, NULL,
                          "request body must be a JSON object");
        return -EINVAL;
    }
    for (const cJSON *a = obj->child; a; a = a->next)
        for (const cJSON *q = obj->child; q != a; q = q->next)
            if (a->string && q->string && !strcmp(a->string, q->string)) {
                srv_api_error_set(err, 400, "invalid_request_error", a->string, NULL,
                                  "field '%.64s' is given twice", a->string);
                return -EINVAL;
            }
    return 0;
}

cJSON *srv__parse_root(const char *body, size_t len, struct srv_api_error *err)
{
    const char *end = NULL;
    if (!folio_utf8_valid(body, len)) {
        srv_api_error_set(err, 400, "invalid_request_error", NULL, NULL,
                          "request body is not valid UTF-8");
        return NULL;
    }
    if (json_has_nul(body, len)) {
        srv_api_error_set(err, 400, "invalid_request_error", NULL, NULL,
                          "request body holds a NUL character (\\u0000), which is not accepted");
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    for (; root && end && end < body + len; end++)
        if (*end != ' ' && *end != '\t' && *end != '\r' && *end != '\n') {
            cJSON_Delete(root);
            root = NULL;
        }
    if (!root)
        srv_api_error_set(err, 400, "invalid_request_error", NULL, NULL,
                          "request body is not valid JSON");
    return root;
}

int srv_tokenize_parse(const char *body, size_t len, const struct eng_model_info *mi,
                       struct srv_tok_params *tp, struct srv_api_error *err)
{
    static const char *const want[] = {"prompt", "content", NULL};
    memset(tp, 0, sizeof(*tp));
    tp->add_special = true;
    cJSON *root = srv__parse_root(body, len, err);
    if (!root)
        return -EINVAL;
    if (cJSON_IsObject(root) && cJSON_GetObjectItemCaseSensitive(root, "messages")) {
        tp->chat = true;
        cJSON_Delete(root);
        return 0;
    }
    const cJSON *p = small_body(root, mi, want, tp, err);
    int rc = -EINVAL;
    if (p && !cJSON_IsString(p))
        srv_api_error_set(err, 400, "invalid_request_error", p->string, NULL,
                          "'%s' must be a string", p->string);
    else if (p) {
        tp->text = folio_strdup(p->valuestring);
        rc = tp->text ? 0 : -ENOMEM;
        if (rc)
            srv_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    cJSON_Delete(root);
    return rc;
}

int srv_detokenize_parse(const char *body, size_t len, const struct eng_model_info *mi,
                         int32_t **ids, int32_t *n, struct srv_tok_params *tp,
                         struct srv_api_error *err)
{
    static const char *const want[] = {"tokens", NULL};
    *ids = NULL;
    *n = 0;
    memset(tp, 0, sizeof(*tp));
    tp->add_special = true;
    cJSON *root = srv__parse_root(body, len, err);
    if (!root)
        return -EINVAL;
    const cJSON *t = small_body(root, mi, want, tp, err);
    int rc = -EINVAL;
    if (t && !cJSON_IsArray(t))
        srv_api_error_set(err, 400, "invalid_request_error", "tokens", NULL,
                          "'tokens' must be an array of token ids");
    else if (t) {
        struct srv_comp_params p = {0};
        if (cJSON_GetArraySize(t) == 0)
            rc = 0;
        else if (!(rc = token_array(t, mi, &p, err))) {
            *ids = p.prompts[0];
            *n = p.prompt_lens[0];
            p.prompts[0] = NULL;
        } else if (err->param && !strcmp(err->param, "prompt"))
            err->param = "tokens";
        srv_comp_params_free(&p);
    }
    cJSON_Delete(root);
    return rc;
}
