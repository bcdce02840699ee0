/*
 * daemon/api_fields.c — the request table: every JSON field a completion
 * (or embeddings) request may carry, one row each, with the typed readers the rows use
 * and the parsers of the rows that are not a plain number or boolean.
 * Adding a sampling field is one row here plus the sampler.
 *
 * A row (struct srv_field, api.h) names the field, its type, the
 * endpoints that accept it, where it lands in struct srv_comp_params
 * (sampling fields land in gen: struct eng_gen, which the engine request
 * carries to the sampler and scheduler unchanged), its bounds and
 * default.  Fields of other servers' request types that foliod knows but
 * does not implement are NOOP rows: their neutral value passes, any other
 * is a 400 naming them (so a client never silently gets other behaviour
 * than it asked for from a field foliod recognises).  Numbers arrive as
 * doubles from cJSON: integers are checked to be integral and inside
 * their bounds before conversion, so 1e300, -1 or 2.5 for max_tokens are
 * refused instead of saturating.
 *
 * Invariants: every row's off lands inside struct srv_comp_params with
 * the width its type says; the first row matching name and endpoint wins
 * (api.c's loop); CUSTOM rows without a parser (prompt, messages) are
 * parsed by api.c after the others.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "api_internal.h"
#include "folio/common.h"
#include "folio/sampler.h"
#include "tools.h"

/* An integral JSON number in [lo, hi]. */
int srv__get_int(const cJSON *v, const char *name, double lo, double hi, int64_t *out,
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

int srv__get_num(const cJSON *v, const char *name, double lo, double hi, bool lo_open, double *out,
                 struct srv_api_error *err)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        BAD(name, "'%s' must be a number", name);
    double d = v->valuedouble;
    if (d < lo || d > hi || (lo_open && d == lo))
        BAD(name, "'%s' must be in %s%g, %g]", name, lo_open ? "(" : "[", lo, hi);
    *out = d;
    return 0;
}

int srv__get_bool(const cJSON *v, const char *name, bool *out, struct srv_api_error *err)
{
    if (!cJSON_IsBool(v))
        BAD(name, "'%s' must be a boolean", name);
    *out = cJSON_IsTrue(v);
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
    if (!cJSON_IsString(it))
        BAD("model", "'model' must be a string");
    int32_t lora = eng_model_lookup(mi, it->valuestring);
    if (lora < 0) {
        srv_api_error_set(err, 404, "NotFoundError", "model", "model_not_found",
                          "The model '%.64s' does not exist (this server has '%s'%s)",
                          it->valuestring, mi->name,
                          mi->n_loras ? " and its LoRA adapters: GET /v1/models" : "");
        return -EINVAL;
    }
    p->gen.lora = lora;
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
        if (srv__get_num(it, "logit_bias", -100, 100, false, &b, err))
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
            if (srv__get_bool(o, "stream_options.include_usage", &p->include_usage, err))
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

/* Embeddings: "float" (default) or "base64". */
static int parse_encoding_format(const void *json, const struct eng_model_info *mi,
                                 struct srv_comp_params *p, struct srv_api_error *err)
{
    const cJSON *v = json;
    (void)mi;
    if (cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v) || (strcmp(v->valuestring, "float") && strcmp(v->valuestring, "base64")))
        BAD("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
    p->emb.base64 = !strcmp(v->valuestring, "base64");
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
        if (srv__get_int(it, "stop_token_ids", 0, mi->n_vocab - 1, &id, err))
            return -EINVAL;
        p->stop_ids[p->gen.n_stop_ids++] = (int32_t)id;
    }
    return 0;
}

#define OFF(f) offsetof(struct srv_comp_params, f)
#define BOTH   (SRV_EP_COMP | SRV_EP_CHAT)
#define ALL                                                                                        \
    (SRV_EP_COMP | SRV_EP_CHAT | SRV_EP_EMBED | SRV_EP_RERANK | SRV_EP_SCORE | SRV_EP_CLASSIFY)
#define POOLED   (SRV_EP_EMBED | SRV_EP_RERANK | SRV_EP_SCORE | SRV_EP_CLASSIFY)
#define MAX_SEED 9007199254740991.0 /* 2^53 - 1: exact in a JSON double */

/* Every JSON field a completion or embeddings request may carry.  A row names the
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
    {"input", SRV_F_CUSTOM, SRV_EP_EMBED | SRV_EP_CLASSIFY, 0, 0, 0, 0, 0, false, false, -1, NULL,
     NULL},
    {"documents", SRV_F_CUSTOM, SRV_EP_RERANK, 0, 0, 0, 0, 0, false, false, -1, NULL, NULL},
    {"texts", SRV_F_CUSTOM, SRV_EP_RERANK, 0, 0, 0, 0, 0, false, false, -1, NULL, NULL},
    {"text_2", SRV_F_CUSTOM, SRV_EP_SCORE, 0, 0, 0, 0, 0, false, false, -1, NULL, NULL},
    {"model", SRV_F_CUSTOM, ALL, 0, 0, 0, 0, 0, false, false, -1, NULL, parse_model},
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
    {"user", SRV_F_CUSTOM, ALL, 0, 0, 0, 0, 0, false, false, -1, NULL, parse_user},
    {"echo", SRV_F_BOOL, SRV_EP_COMP, OFF(echo), 0, 0, 0, 0, false, true, -1, NULL, NULL},
    {"logprobs", SRV_F_I32, SRV_EP_COMP, OFF(gen.n_logprobs), 0, SAMPLER_MAX_TOP, -1, 0, false,
     true, -1, NULL, NULL},
    {"logprobs", SRV_F_BOOL, SRV_EP_CHAT, OFF(chat_logprobs), 0, 0, 0, 0, false, true, -1, NULL,
     NULL},
    {"top_logprobs", SRV_F_I32, SRV_EP_CHAT, OFF(top_logprobs), 0, SAMPLER_MAX_TOP, 0, 0, false,
     true, OFF(top_logprobs_set), NULL, NULL},
    /* vLLM's: every prompt token's logprob, rank and top-N (not with stream) */
    {"prompt_logprobs", SRV_F_I32, BOTH, OFF(prompt_logprobs), 0, SAMPLER_MAX_TOP, -1, 0, false,
     true, -1, NULL, NULL},
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
    {"priority", SRV_F_I32, ALL, OFF(gen.priority), -1000000, 1000000, 0, 0, false, true, -1, NULL,
     NULL},
    /* embeddings (daemon/embed.h): OpenAI's encoding_format and dimensions
     * (the first N values, then normalized), vLLM's normalize and
     * truncate_prompt_tokens, llama-server's embd_normalize */
    {"encoding_format", SRV_F_CUSTOM, SRV_EP_EMBED, 0, 0, 0, 0, 0, false, false, -1, NULL,
     parse_encoding_format},
    {"dimensions", SRV_F_I32, SRV_EP_EMBED, OFF(emb.dims), 1, 0, 0, SRV_HI_EMBD, false, true, -1,
     NULL, NULL},
    {"normalize", SRV_F_BOOL, SRV_EP_EMBED, OFF(emb.normalize), 0, 0, 1, 0, false, true, -1, NULL,
     NULL},
    {"embd_normalize", SRV_F_I32, SRV_EP_EMBED, OFF(emb.norm), -1, 1000, 2, 0, false, true,
     OFF(emb.norm_set), NULL, NULL},
    {"truncate_prompt_tokens", SRV_F_I32, POOLED, OFF(emb.truncate), -1, 0, 0, SRV_HI_CTX, false,
     true, OFF(emb.truncate_set), NULL, NULL},
    /* rerank (api_rerank.c): Jina's, Cohere's and vLLM's fields, and TEI's
     * return_text (its documents come as `texts`) */
    {"query", SRV_F_CUSTOM, SRV_EP_RERANK, 0, 0, 0, 0, 0, false, false, -1, NULL, srv__parse_query},
    /* vLLM's /v1/score: text_1 (parsed here), text_2 (the documents) */
    {"text_1", SRV_F_CUSTOM, SRV_EP_SCORE, 0, 0, 0, 0, 0, false, false, -1, NULL,
     srv__parse_text_1},
    {"top_n", SRV_F_I32, SRV_EP_RERANK, OFF(rr.top_n), 0, SRV_MAX_INPUTS, 0, 0, false, true, -1,
     NULL, NULL},
    {"return_documents", SRV_F_BOOL, SRV_EP_RERANK, OFF(rr.return_documents), 0, 0, 1, 0, false,
     true, -1, NULL, NULL},
    {"return_text", SRV_F_BOOL, SRV_EP_RERANK, OFF(rr.return_text), 0, 0, 0, 0, false, true, -1,
     NULL, NULL},
    /* known, not implemented: only their neutral values pass */
    {"best_of", SRV_F_NOOP, BOTH, 0, 0, 0, 1, 0, false, true, -1, NULL, NULL},
    {"suffix", SRV_F_NOOP, BOTH, 0, 0, 0, 0, 0, false, true, -1, NULL, NULL},
    {"echo", SRV_F_NOOP, SRV_EP_CHAT, 0, 0, 0, 0, 0, false, true, -1, NULL, NULL},
    {"use_beam_search", SRV_F_NOOP, BOTH, 0, 0, 0, 0, 0, false, true, -1, NULL, NULL},
    {"length_penalty", SRV_F_NOOP, BOTH, 0, 0, 0, 1, 0, false, true, -1, NULL, NULL},
    {"skip_special_tokens", SRV_F_NOOP, BOTH, 0, 0, 0, 1, 0, false, true, -1, NULL, NULL},
    {"spaces_between_special_tokens", SRV_F_NOOP, BOTH, 0, 0, 0, 1, 0, false, true, -1, NULL, NULL},
    {"include_stop_str_in_output", SRV_F_NOOP, BOTH, 0, 0, 0, 0, 0, false, true, -1, NULL, NULL},
    {"add_generation_prompt", SRV_F_BOOL, SRV_EP_CHAT, OFF(add_generation_prompt), 0, 0, 1, 0,
     false, true, OFF(add_generation_prompt_set), NULL, NULL},
    /* vLLM's: the final message left open for the model to continue */
    {"continue_final_message", SRV_F_BOOL, SRV_EP_CHAT, OFF(continue_final_message), 0, 0, 0, 0,
     false, true, -1, NULL, NULL},
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

void srv__field_default(const struct srv_field *f, struct srv_comp_params *p)
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
int srv__field_parse(const struct srv_field *f, const cJSON *v, const struct eng_model_info *mi,
                     struct srv_comp_params *p, struct srv_api_error *err)
{
    const char *name = f->param ? f->param : f->name;
    char *at = (char *)p + f->off;
    double hi = f->hi_from == SRV_HI_CTX     ? mi->ctx_len
                : f->hi_from == SRV_HI_VOCAB ? mi->n_vocab
                : f->hi_from == SRV_HI_EMBD  ? mi->n_embd
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
        if (srv__get_int(v, name, f->lo, hi, &x, err))
            return -EINVAL;
        *(int32_t *)at = (int32_t)x;
        break;
    case SRV_F_I64:
        if (srv__get_int(v, name, f->lo, hi, &x, err))
            return -EINVAL;
        *(int64_t *)at = x;
        break;
    case SRV_F_F32:
        if (srv__get_num(v, name, f->lo, hi, f->lo_open, &d, err))
            return -EINVAL;
        *(float *)at = (float)d;
        break;
    case SRV_F_BOOL:
        if (srv__get_bool(v, name, (bool *)at, err))
            return -EINVAL;
        break;
    default:
        break;
    }
    if (f->set_off >= 0)
        *(bool *)((char *)p + f->set_off) = true;
    return 0;
}
