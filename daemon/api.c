/*
 * daemon/api.c — /v1/completions and /v1/chat/completions request
 * validation (cJSON) through the request table, and error objects.
 *
 * The accepted fields are the table `fields` below (name, type, endpoints,
 * destination, bounds, default); anything else is listed in
 * srv_comp_params.unknown for the caller (ignored, or a 400 with
 * --strict-api).  Fields of other servers' request types that foliod
 * knows but does not implement are NOOP rows: their neutral value passes,
 * any other is a 400 naming them (so a client never silently gets other
 * behaviour than it asked for from a field foliod recognises).  Numbers arrive as
 * doubles from cJSON: integers are checked to be integral and inside their bounds before
 * conversion, so 1e300, -1 or 2.5 for max_tokens are refused instead of saturating.
 *
 * Both routes share one field loop (parse_body) over that table; its
 * endpoint column switches `prompt` for `messages`, completions' integer
 * `logprobs` for chat's boolean `logprobs` + `top_logprobs`, and leaves
 * chat's echo to its no-op value.  Chat messages are parsed and rendered
 * in api_chat.c.
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

/* An integral JSON number in [lo, hi]. */
static int get_int(const cJSON *v, const char *name, double lo, double hi, int64_t *out,
                   struct srv_api_error *err)
{
    if (!cJSON_IsNumber(v))
        BAD(name, "'%s' must be an integer", name);
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d))
        BAD(name, "'%s' must be an integer", name);
    if (d < lo || d > hi)
        BAD(name, "'%s' must be in [%.0f, %.0f]", name, lo, hi);
    *out = (int64_t)d;
    return 0;
}

static int get_num(const cJSON *v, const char *name, double lo, double hi, bool lo_open,
                   double *out, struct srv_api_error *err)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        BAD(name, "'%s' must be a number", name);
    double d = v->valuedouble;
    if (d < lo || d > hi || (lo_open && d == lo))
        BAD(name, "'%s' must be in %s%g, %g]", name, lo_open ? "(" : "[", lo, hi);
    *out = d;
    return 0;
}

static int get_bool(const cJSON *v, const char *name, bool *out, struct srv_api_error *err)
{
    if (!cJSON_IsBool(v))
        BAD(name, "'%s' must be a boolean", name);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* Takes toks and text (may be NULL) whatever happens. */
int srv__add_prompt(struct srv_comp_params *p, int32_t *toks, int32_t n, char *text,
                    struct srv_api_error *err)
{
    if (p->n_prompts >= SRV_MAX_PROMPTS) {
        folio_free(toks);
        folio_free(text);
        BAD("prompt", "at most %d prompts per request", SRV_MAX_PROMPTS);
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

static int token_array(const cJSON *a, const struct eng_model_info *mi, struct srv_comp_params *p,
                       struct srv_api_error *err)
{
    int n = cJSON_GetArraySize(a);
    if (n == 0)
        BAD("prompt", "'prompt' must not be empty");
    if (n > mi->ctx_len)
        BAD("prompt", "prompt has %d tokens; the model's context is %d", n, mi->ctx_len);
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
            BAD("prompt", "prompt token %d is not a token id in [0, %d)", i, mi->n_vocab);
        }
        toks[i++] = (int32_t)it->valuedouble;
    }
    return srv__add_prompt(p, toks, n, NULL, err);
}

static int text_prompt(const cJSON *s, srv_tokenize_fn tok, void *tok_ctx,
                       struct srv_comp_params *p, struct srv_api_error *err)
{
    int32_t *toks = NULL, n = 0;
    int rc = tok ? tok(tok_ctx, s->valuestring, strlen(s->valuestring), false, &toks, &n) : -ENOSYS;
    if (rc == -ENOSYS)
        BAD("prompt", "text prompts are not supported yet (no tokenizer in this build): send "
                      "'prompt' as an array of token ids");
    if (rc < 0)
        BAD("prompt", "cannot tokenize 'prompt' (%s)", strerror(-rc));
    if (n == 0) {
        folio_free(toks);
        BAD("prompt", "'prompt' must not be empty");
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
    if (cJSON_IsString(v))
        return text_prompt(v, tok, tok_ctx, p, err);
    if (!cJSON_IsArray(v))
        BAD("prompt", "'prompt' must be a string, an array of token ids, or a list of them");
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
            BAD("prompt", "'prompt' list items must be strings or arrays of token ids");
        if (rc)
            return rc;
    }
    return 0;
}

static int parse_stop(const cJSON *v, struct srv_comp_params *p, struct srv_api_error *err)
{
    if (cJSON_IsNull(v))
        return 0;
    const cJSON *one = v, *it;
    bool list = cJSON_IsArray(v);
    if (!list && !cJSON_IsString(v))
        BAD("stop", "'stop' must be a string or an array of strings");
    if (list && cJSON_GetArraySize(v) > SRV_MAX_STOP)
        BAD("stop", "at most %d stop sequences", SRV_MAX_STOP);
    for (it = list ? v->child : one; it; it = list ? it->next : NULL) {
        if (!cJSON_IsString(it))
            BAD("stop", "'stop' must be a string or an array of strings");
        size_t n = strlen(it->valuestring);
        if (n == 0 || n > SRV_MAX_STOP_LEN)
            BAD("stop", "stop sequences must be 1..%d bytes", SRV_MAX_STOP_LEN);
        p->stop[p->n_stop] = folio_strdup(it->valuestring);
        if (!p->stop[p->n_stop])
            return -ENOMEM;
        p->stop_len[p->n_stop++] = n;
    }
    return 0;
}

static int parse_model(const void *json, const struct eng_model_info *mi, struct srv_comp_params *p,
                       struct srv_api_error *err)
{
    const cJSON *it = json;
    (void)p;
    if (!cJSON_IsString(it))
        BAD("model", "'model' must be a string");
    if (strcmp(it->valuestring, mi->name)) {
        srv_api_error_set(err, 404, "NotFoundError", "model", "model_not_found",
                          "The model '%.64s' does not exist (this server has '%s')",
                          it->valuestring, mi->name);
        return -EINVAL;
    }
    return 0;
}

static int parse_stop_row(const void *json, const struct eng_model_info *mi,
                          struct srv_comp_params *p, struct srv_api_error *err)
{
    (void)mi;
    return parse_stop(json, p, err);
}

static int parse_bias(const void *json, const struct eng_model_info *mi, struct srv_comp_params *p,
                      struct srv_api_error *err)
{
    const cJSON *v = json;
    if (cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsObject(v))
        BAD("logit_bias", "'logit_bias' must be an object of token id -> bias");
    int n = cJSON_GetArraySize(v);
    if (n > 1024)
        BAD("logit_bias", "at most 1024 logit_bias entries");
    folio_free(p->bias); /* a repeated key: the last one counts */
    p->gen.sp.n_bias = 0;
    p->bias = folio_malloc((size_t)(n ? n : 1) * sizeof(*p->bias));
    if (!p->bias)
        return -ENOMEM;
    p->gen.sp.bias = p->bias;
    const cJSON *it;
    cJSON_ArrayForEach(it, v)
    {
        int64_t id;
        if (srv_parse_int(it->string, &id) || id < 0 || id >= mi->n_vocab)
            BAD("logit_bias", "logit_bias key '%.64s' is not a token id in [0, %d)", it->string,
                mi->n_vocab);
        double b;
        if (get_num(it, "logit_bias", -100, 100, false, &b, err))
            return -EINVAL;
        p->bias[p->gen.sp.n_bias++] = (struct sampler_bias){(int32_t)id, (float)b};
    }
    return 0;
}

static int parse_stream_options(const void *json, const struct eng_model_info *mi,
                                struct srv_comp_params *p, struct srv_api_error *err)
{
    const cJSON *it = json, *o;
    (void)mi;
    if (cJSON_IsNull(it))
        return 0;
    if (!cJSON_IsObject(it))
        BAD("stream_options", "'stream_options' must be an object");
    cJSON_ArrayForEach(o, it)
    {
        if (!strcmp(o->string, "include_usage")) {
            if (get_bool(o, "stream_options.include_usage", &p->include_usage, err))
                return -EINVAL;
        } else
            srv__note_unknown(p->unknown, &p->n_unknown, "stream_options.", o->string);
    }
    return 0;
}

static int parse_user(const void *json, const struct eng_model_info *mi, struct srv_comp_params *p,
                      struct srv_api_error *err)
{
    (void)mi;
    (void)p;
    if (!cJSON_IsString((const cJSON *)json) && !cJSON_IsNull((const cJSON *)json))
        BAD("user", "'user' must be a string");
    return 0;
}

static int parse_stop_token_ids(const void *json, const struct eng_model_info *mi,
                                struct srv_comp_params *p, struct srv_api_error *err)
{
    const cJSON *v = json, *it;
    if (cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsArray(v))
        BAD("stop_token_ids", "'stop_token_ids' must be an array of token ids");
    int n = cJSON_GetArraySize(v);
    if (n > SRV_MAX_STOP_IDS)
        BAD("stop_token_ids", "at most %d stop_token_ids", SRV_MAX_STOP_IDS);
    folio_free(p->stop_ids);
    p->stop_ids = folio_malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    if (!p->stop_ids)
        return -ENOMEM;
    p->gen.stop_ids = p->stop_ids;
    p->gen.n_stop_ids = 0;
    cJSON_ArrayForEach(it, v)
    {
        int64_t id;
        if (get_int(it, "stop_token_ids", 0, mi->n_vocab - 1, &id, err))
            return -EINVAL;
        p->stop_ids[p->gen.n_stop_ids++] = (int32_t)id;
    }
    return 0;
}

#define OFF(f)   offsetof(struct srv_comp_params, f)
#define BOTH     (SRV_EP_COMP | SRV_EP_CHAT)
#define MAX_SEED 9007199254740991.0 /* 2^53 - 1: exact in a JSON double */

/* Every JSON field a completion request may carry.  A row names the
 * field, its type, the endpoints that accept it, where it lands in struct
 * srv_comp_params (sampling fields land in gen: struct eng_gen, which the
 * engine request carries to the sampler and scheduler unchanged), its
 * bounds and default.  The first row matching name and endpoint wins.
 * prompt / messages are recognised here and parsed last (they need the
 * other fields and the tokenizer). */
static const struct srv_field fields[] = {
    /* name, type, endpoints, off, lo, hi, def, hi_from, lo_open, nullable, set_off, param, parse */
    {"prompt", SRV_F_CUSTOM, SRV_EP_COMP, 0, 0, 0, 0, 0, false, false, -1, NULL, NULL},
    {"messages", SRV_F_CUSTOM, SRV_EP_CHAT, 0, 0, 0, 0, 0, false, false, -1, NULL, NULL},
    {"model", SRV_F_CUSTOM, BOTH, 0, 0, 0, 0, 0, false, false, -1, NULL, parse_model},
    {"max_tokens", SRV_F_I32, BOTH, OFF(gen.max_tokens), 1, 0, 16, SRV_HI_CTX, false, true,
     OFF(max_tokens_set), NULL, NULL},
    {"max_completion_tokens", SRV_F_I32, BOTH, OFF(gen.max_tokens), 1, 0, 16, SRV_HI_CTX, false,
     true, OFF(max_tokens_set), NULL, NULL},
    {"temperature", SRV_F_F32, BOTH, OFF(gen.sp.temperature), 0, 2, 1, 0, false, true, -1, NULL,
     NULL},
    {"top_p", SRV_F_F32, BOTH, OFF(gen.sp.top_p), 0, 1, 1, 0, true, true, -1, NULL, NULL},
    {"top_k", SRV_F_I32, BOTH, OFF(gen.sp.top_k), -1, 0, -1, SRV_HI_VOCAB, false, true, -1, NULL,
     NULL},
    {"seed", SRV_F_I64, BOTH, OFF(gen.sp.seed), -MAX_SEED, MAX_SEED, 0, 0, false, true,
     OFF(has_seed), NULL, NULL},
    {"n", SRV_F_I32, BOTH, OFF(n), 1, SRV_MAX_N, 1, 0, false, false, -1, NULL, NULL},
    {"stop", SRV_F_CUSTOM, BOTH, 0, 0, 0, 0, 0, false, false, -1, NULL, parse_stop_row},
    {"ignore_eos", SRV_F_BOOL, BOTH, OFF(gen.ignore_eos), 0, 0, 0, 0, false, false, -1, NULL, NULL},
    {"stream", SRV_F_BOOL, BOTH, OFF(stream), 0, 0, 0, 0, false, true, -1, NULL, NULL},
    {"logit_bias", SRV_F_CUSTOM, BOTH, 0, 0, 0, 0, 0, false, false, -1, NULL, parse_bias},
    {"stream_options", SRV_F_CUSTOM, BOTH, 0, 0, 0, 0, 0, false, false, -1, NULL,
     parse_stream_options},
    {"user", SRV_F_CUSTOM, BOTH, 0, 0, 0, 0, 0, false, false, -1, NULL, parse_user},
    {"echo", SRV_F_BOOL, SRV_EP_COMP, OFF(echo), 0, 0, 0, 0, false, true, -1, NULL, NULL},
    {"logprobs", SRV_F_I32, SRV_EP_COMP, OFF(gen.n_logprobs), 0, SAMPLER_MAX_TOP, -1, 0, false,
     true, -1, NULL, NULL},
    {"logprobs", SRV_F_BOOL, SRV_EP_CHAT, OFF(chat_logprobs), 0, 0, 0, 0, false, true, -1, NULL,
     NULL},
    {"top_logprobs", SRV_F_I32, SRV_EP_CHAT, OFF(top_logprobs), 0, SAMPLER_MAX_TOP, 0, 0, false,
     true, OFF(top_logprobs_set), NULL, NULL},
    /* sampling (folio/sampler.h says in which order and over which tokens) */
    {"min_p", SRV_F_F32, BOTH, OFF(gen.sp.min_p), 0, 1, 0, 0, false, true, -1, NULL, NULL},
    {"typical_p", SRV_F_F32, BOTH, OFF(gen.sp.typical_p), 0, 1, 1, 0, true, true, -1, NULL, NULL},
    {"presence_penalty", SRV_F_F32, BOTH, OFF(gen.pen.presence), -2, 2, 0, 0, false, true, -1, NULL,
     NULL},
    {"frequency_penalty", SRV_F_F32, BOTH, OFF(gen.pen.frequency), -2, 2, 0, 0, false, true, -1,
     NULL, NULL},
    {"repetition_penalty", SRV_F_F32, BOTH, OFF(gen.pen.repetition), 0, 10, 1, 0, true, true, -1,
     NULL, NULL},
    {"repeat_penalty", SRV_F_F32, BOTH, OFF(gen.pen.repetition), 0, 10, 1, 0, true, true, -1, NULL,
     NULL}, /* llama-server's spelling */
    /* the repetition window: last N tokens of prompt ++ generated (-1: all) */
    {"repeat_last_n", SRV_F_I32, BOTH, OFF(gen.pen.repeat_last_n), -1, 0, 64, SRV_HI_CTX, false,
     true, -1, NULL, NULL},
    {"stop_token_ids", SRV_F_CUSTOM, BOTH, 0, 0, 0, 0, 0, false, false, -1, NULL,
     parse_stop_token_ids},
    {"min_tokens", SRV_F_I32, BOTH, OFF(gen.min_tokens), 0, 0, 0, SRV_HI_CTX, false, true, -1, NULL,
     NULL},
    /* lower runs earlier, among the requests of the same tenant (vLLM's sense) */
    {"priority", SRV_F_I32, BOTH, OFF(gen.priority), -1000000, 1000000, 0, 0, false, true, -1, NULL,
     NULL},
    /* known, not implemented: only their neutral values pass */
    {"best_of", SRV_F_NOOP, BOTH, 0, 0, 0, 1, 0, false, true, -1, NULL, NULL},
    {"suffix", SRV_F_NOOP, BOTH, 0, 0, 0, 0, 0, false, true, -1, NULL, NULL},
    {"echo", SRV_F_NOOP, SRV_EP_CHAT, 0, 0, 0, 0, 0, false, true, -1, NULL, NULL},
    {"use_beam_search", SRV_F_NOOP, BOTH, 0, 0, 0, 0, 0, false, true, -1, NULL, NULL},
    {"length_penalty", SRV_F_NOOP, BOTH, 0, 0, 0, 1, 0, false, true, -1, NULL, NULL},
    {"prompt_logprobs", SRV_F_NOOP, BOTH, 0, 0, 0, 0, 0, false, true, -1, NULL, NULL},
    {"skip_special_tokens", SRV_F_NOOP, BOTH, 0, 0, 0, 1, 0, false, true, -1, NULL, NULL},
    {"spaces_between_special_tokens", SRV_F_NOOP, BOTH, 0, 0, 0, 1, 0, false, true, -1, NULL, NULL},
    {"include_stop_str_in_output", SRV_F_NOOP, BOTH, 0, 0, 0, 0, 0, false, true, -1, NULL, NULL},
    {"add_generation_prompt", SRV_F_NOOP, SRV_EP_CHAT, 0, 0, 0, 1, 0, false, true, -1, NULL, NULL},
    {"continue_final_message", SRV_F_NOOP, SRV_EP_CHAT, 0, 0, 0, 0, 0, false, true, -1, NULL, NULL},
    {"mirostat", SRV_F_NOOP, BOTH, 0, 0, 0, 0, 0, false, true, -1, NULL, NULL},
    {"dry_multiplier", SRV_F_NOOP, BOTH, 0, 0, 0, 0, 0, false, true, -1, NULL, NULL},
    {"xtc_probability", SRV_F_NOOP, BOTH, 0, 0, 0, 0, 0, false, true, -1, NULL, NULL},
    /* structured output and tools (tools.c) */
    {"response_format", SRV_F_CUSTOM, BOTH, 0, 0, 0, 0, 0, false, false, -1, NULL,
     srv__parse_response_format},
    {"grammar", SRV_F_CUSTOM, BOTH, 0, 0, 0, 0, 0, false, false, -1, NULL, srv__parse_grammar},
    {"tools", SRV_F_CUSTOM, SRV_EP_CHAT, 0, 0, 0, 0, 0, false, false, -1, NULL, srv__parse_tools},
    {"tool_choice", SRV_F_CUSTOM, SRV_EP_CHAT, 0, 0, 0, 0, 0, false, false, -1, NULL,
     srv__parse_tool_choice},
    {"parallel_tool_calls", SRV_F_CUSTOM, SRV_EP_CHAT, 0, 0, 0, 0, 0, false, false, -1, NULL,
     srv__parse_parallel_tool_calls},
};

const struct srv_field *srv_fields(size_t *n)
{
    *n = FOLIO_ARRAY_LEN(fields);
    return fields;
}

static void field_default(const struct srv_field *f, struct srv_comp_params *p)
{
    char *at = (char *)p + f->off;
    switch (f->type) {
    case SRV_F_I32:
        *(int32_t *)at = (int32_t)f->def;
        break;
    case SRV_F_I64:
        *(int64_t *)at = (int64_t)f->def;
        break;
    case SRV_F_F32:
        *(float *)at = (float)f->def;
        break;
    case SRV_F_BOOL:
        *(bool *)at = f->def != 0;
        break;
    case SRV_F_NOOP:
    case SRV_F_CUSTOM:
        break;
    }
}

/* One typed field: bounds checked, stored at its offset. */
static int field_parse(const struct srv_field *f, const cJSON *v, const struct eng_model_info *mi,
                       struct srv_comp_params *p, struct srv_api_error *err)
{
    const char *name = f->param ? f->param : f->name;
    char *at = (char *)p + f->off;
    double hi = f->hi_from == SRV_HI_CTX     ? mi->ctx_len
                : f->hi_from == SRV_HI_VOCAB ? mi->n_vocab
                                             : f->hi;
    if (f->type == SRV_F_CUSTOM)
        return f->parse(v, mi, p, err);
    if (f->type == SRV_F_NOOP) {
        bool noop = cJSON_IsNull(v) || (cJSON_IsBool(v) && cJSON_IsTrue(v) == (f->def != 0)) ||
                    (cJSON_IsNumber(v) && v->valuedouble == f->def);
        if (!noop)
            BAD(name, "'%s' is not supported (only its default value is accepted)", name);
        return 0;
    }
    if (f->nullable && cJSON_IsNull(v))
        return 0;
    int64_t x;
    double d;
    switch (f->type) {
    case SRV_F_I32:
        if (get_int(v, name, f->lo, hi, &x, err))
            return -EINVAL;
        *(int32_t *)at = (int32_t)x;
        break;
    case SRV_F_I64:
        if (get_int(v, name, f->lo, hi, &x, err))
            return -EINVAL;
        *(int64_t *)at = x;
        break;
    case SRV_F_F32:
        if (get_num(v, name, f->lo, hi, f->lo_open, &d, err))
            return -EINVAL;
        *(float *)at = (float)d;
        break;
    case SRV_F_BOOL:
        if (get_bool(v, name, (bool *)at, err))
            return -EINVAL;
        break;
    default:
        break;
    }
    if (f->set_off >= 0)
        *(bool *)((char *)p + f->set_off) = true;
    return 0;
}

static int parse_body(const char *body, size_t len, const struct eng_model_info *mi, bool chat,
                      int tmpl, srv_tokenize_fn tok, void *tok_ctx, struct srv_comp_params *p,
                      struct srv_api_error *err)
{
    memset(p, 0, sizeof(*p));
    p->chat = chat;
    unsigned ep = chat ? SRV_EP_CHAT : SRV_EP_COMP;
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(fields); i++)
        field_default(&fields[i], p);
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
    if (!cJSON_IsObject(root)) {
        srv_api_error_set(err, 400, "invalid_request_error", NULL, NULL,
                          "request body must be a JSON object");
        rc = -EINVAL;
        goto out;
    }
    /* a key given twice is refused: each field is parsed once */
    for (const cJSON *a = root->child; a; a = a->next)
        for (const cJSON *q = root->child; q != a; q = q->next)
            if (a->string && q->string && !strcmp(a->string, q->string)) {
                srv_api_error_set(err, 400, "invalid_request_error", a->string, NULL,
                                  "field '%.64s' is given twice", a->string);
                rc = -EINVAL;
                goto out;
            }
    const cJSON *prompt = NULL, *it;
    const char *prompt_name = chat ? "messages" : "prompt";
    cJSON_ArrayForEach(it, root)
    {
        const struct srv_field *f = NULL;
        for (size_t i = 0; i < FOLIO_ARRAY_LEN(fields) && !f; i++)
            if ((fields[i].endpoints & ep) && !strcmp(it->string, fields[i].name))
                f = &fields[i];
        if (!f)
            srv__note_unknown(p->unknown, &p->n_unknown, "", it->string);
        else if (f->type == SRV_F_CUSTOM && !f->parse)
            prompt = it;
        else
            rc = field_parse(f, it, mi, p, err);
        if (rc)
            goto out;
    }
    if (!prompt) {
        srv_api_error_set(err, 400, "invalid_request_error", prompt_name, NULL, "'%s' is required",
                          prompt_name);
        rc = -EINVAL;
        goto out;
    }
    if ((rc = chat ? srv__chat_messages(prompt, tmpl, tok, tok_ctx, p, err)
                   : parse_prompt(prompt, mi, tok, tok_ctx, p, err)))
        goto out;
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
    return parse_body(body, len, mi, false, 0, tok, tok_ctx, p, err);
}

int srv_chat_parse(const char *body, size_t len, const struct eng_model_info *mi, int tmpl,
                   srv_tokenize_fn tok, void *tok_ctx, struct srv_comp_params *p,
                   struct srv_api_error *err)
{
    return parse_body(body, len, mi, true, tmpl, tok, tok_ctx, p, err);
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
            if (!cJSON_IsString(it) || strcmp(it->valuestring, mi->name)) {
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

static cJSON *parse_root(const char *body, size_t len, struct srv_api_error *err)
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
    cJSON *root = parse_root(body, len, err);
    if (!root)
        return -EINVAL;
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
    cJSON *root = parse_root(body, len, err);
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
