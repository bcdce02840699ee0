/*
 * daemon/api_responses.c — OpenAI's Responses API (POST /v1/responses), as
 * vLLM serves it: the body is translated into the chat completion body it
 * means and parsed by srv_chat_parse, so a response runs, is limited and
 * is refused exactly as a chat completion is (the errors name the
 * Responses fields).
 *
 * The translation:
 *   instructions                        -> a first "system" message
 *   input: a string                     -> one "user" message
 *   input: items                        -> messages, in order:
 *     {role, content} (type "message"     {role, content}: the text parts
 *       or none; content a string or      (input_text, output_text, text)
 *       text parts)                       joined
 *     {type function_call, call_id,       the tool_calls of an assistant
 *       name, arguments}                  message (the preceding one when
 *                                         it is the assistant's)
 *     {type function_call_output,         {role tool, tool_call_id,
 *       call_id, output}                  content}
 *   previous_response_id                -> the stored conversation of that
 *                                          response (its input and output,
 *                                          without its instructions) first
 *   max_output_tokens                   -> max_tokens
 *   text.format {type text|json_object| -> response_format
 *     json_schema, name, schema, strict}
 *   tools [{type function, name,        -> tools [{type function, function:
 *     description, parameters, strict}]    {name, description, ...}}]
 *   tool_choice {type function, name}   -> {type function, function: {name}}
 *   model, temperature, top_p, stream,  -> the same chat fields
 *     parallel_tool_calls, user, and
 *     vLLM's extra sampling fields
 *   store, metadata, truncation,        -> nothing but the echo (below)
 *     service_tier, prompt_cache_key,
 *     safety_identifier, stream_options
 *   include ["message.output_text.logprobs"] -> logprobs
 *   top_logprobs                        -> top_logprobs, with include's
 *                                          logprobs only (as OpenAI)
 *   background                          -> p->resp->background: answered
 *                                          at once, run detached (comp.c);
 *                                          stored, never streamed
 * Images, files, reasoning items, hosted tools (web search, file search,
 * ...), `conversation`, other `include` values and
 * reasoning effort are refused with a 400 naming them.  Other fields are unknown fields, as for
 * any route.
 *
 * The response object repeats the request's settings; they are rendered
 * here once into p->resp->echo (JSON members), the conversation the
 * response store keeps (the messages without instructions) into
 * p->resp->conv, and the input as GET /v1/responses/{id}/input_items
 * lists it into p->resp->input.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "api_internal.h"
#include "folio/common.h"

#define NOMEM(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            return -ENOMEM;                                                                        \
    } while (0)

/* Responses' text parts: input_text, output_text (an earlier answer sent
 * back), text; their annotations and logprobs ignored. */
static const char *const text_types[] = {"input_text", "output_text", "text", NULL};

static const cJSON *str_field(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v : NULL;
}

/* A function_call item: one tool call of the last message when it is the
 * assistant's, else of a new assistant message. */
static int add_call(cJSON *arr, const cJSON *it, const char *what, struct srv_api_error *err)
{
    const cJSON *id = str_field(it, "call_id"), *name = str_field(it, "name");
    const cJSON *args = str_field(it, "arguments");
    if (!id || !name || !args)
        BAD("input", "%s: a function_call needs call_id, name and arguments strings", what);
    cJSON *last = cJSON_GetArrayItem(arr, cJSON_GetArraySize(arr) - 1);
    const cJSON *role = last ? str_field(last, "role") : NULL;
    if (!role || strcmp(role->valuestring, "assistant")) {
        last = cJSON_CreateObject();
        NOMEM(last);
        cJSON_AddItemToArray(arr, last);
        NOMEM(cJSON_AddStringToObject(last, "role", "assistant"));
    }
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(last, "tool_calls");
    if (!calls)
        NOMEM(calls = cJSON_AddArrayToObject(last, "tool_calls"));
    cJSON *c = cJSON_CreateObject(), *fn;
    NOMEM(c);
    cJSON_AddItemToArray(calls, c);
    NOMEM(cJSON_AddStringToObject(c, "id", id->valuestring));
    NOMEM(cJSON_AddStringToObject(c, "type", "function"));
    NOMEM(fn = cJSON_AddObjectToObject(c, "function"));
    NOMEM(cJSON_AddStringToObject(fn, "name", name->valuestring));
    NOMEM(cJSON_AddStringToObject(fn, "arguments", args->valuestring));
    return 0;
}

static int translate_input(const cJSON *v, cJSON *out, struct srv_api_error *err)
{
    if (cJSON_IsString(v))
        return srv__add_message(out, "user", folio_strdup(v->valuestring));
    if (!cJSON_IsArray(v) || !v->child)
        BAD("input", "'input' must be a string or a non-empty array of input items");
    int i = 0, rc;
    const cJSON *it;
    cJSON_ArrayForEach(it, v)
    {
        char what[32];
        snprintf(what, sizeof(what), "input[%d]", i++);
        if (!cJSON_IsObject(it))
            BAD("input", "%s must be an input item (an object)", what);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(it, "type");
        const char *t = cJSON_IsString(type) ? type->valuestring : type ? NULL : "message";
        if (!t)
            BAD("input", "%s.type must be a string", what);
        if (!strcmp(t, "message")) {
            const cJSON *role = str_field(it, "role");
            const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
            static const char *const roles[] = {"user", "assistant", "system", "developer"};
            bool known = false;
            for (size_t k = 0; role && k < FOLIO_ARRAY_LEN(roles); k++)
                known |= !strcmp(role->valuestring, roles[k]);
            if (!known)
                BAD("input", "%s.role must be \"user\", \"assistant\", \"system\" or \"developer\"",
                    what);
            if (!content)
                BAD("input", "%s.content is required", what);
            char cwhat[48], *text = NULL;
            snprintf(cwhat, sizeof(cwhat), "%s.content", what);
            if ((rc = srv__parts_text(content, text_types, "input", cwhat, &text, err)) ||
                (rc = srv__add_message(out, role->valuestring, text)))
                return rc;
        } else if (!strcmp(t, "function_call")) {
            if ((rc = add_call(out, it, what, err)))
                return rc;
        } else if (!strcmp(t, "function_call_output")) {
            const cJSON *id = str_field(it, "call_id");
            const cJSON *o = cJSON_GetObjectItemCaseSensitive(it, "output");
            if (!id || !o)
                BAD("input", "%s: a function_call_output needs call_id and output", what);
            char owhat[48], *text = NULL;
            snprintf(owhat, sizeof(owhat), "%s.output", what);
            if ((rc = srv__parts_text(o, text_types, "input", owhat, &text, err)))
                return rc;
            cJSON *m = cJSON_CreateObject();
            bool ok = m && cJSON_AddStringToObject(m, "role", "tool") &&
                      cJSON_AddStringToObject(m, "tool_call_id", id->valuestring) &&
                      cJSON_AddStringToObject(m, "content", text);
            folio_free(text);
            if (m)
                cJSON_AddItemToArray(out, m);
            NOMEM(ok);
        } else
            BAD("input",
                "%s: input items of type '%.40s' are not supported (message, "
                "function_call, function_call_output)",
                what, t);
    }
    return 0;
}

/* One listed input item (GET /v1/responses/{id}/input_items) for item v
 * (accepted by translate_input): a message with its text as one part
 * (input_text, output_text for the assistant's), a call and a call's
 * output as given; ids are given when they are listed. */
static cJSON *listed_item(const cJSON *v)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(v, "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : "message";
    struct srv_api_error err;
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cJSON_AddStringToObject(o, "type", t);
    if (ok && !strcmp(t, "message")) {
        const char *role = str_field(v, "role")->valuestring;
        char *text = NULL;
        cJSON *parts, *part;
        ok = !srv__parts_text(cJSON_GetObjectItemCaseSensitive(v, "content"), text_types, "input",
                              "content", &text, &err) &&
             cJSON_AddStringToObject(o, "role", role) &&
             (parts = cJSON_AddArrayToObject(o, "content")) && (part = cJSON_CreateObject()) &&
             cJSON_AddItemToArray(parts, part) &&
             cJSON_AddStringToObject(part, "type",
                                     strcmp(role, "assistant") ? "input_text" : "output_text") &&
             cJSON_AddStringToObject(part, "text", text);
        folio_free(text);
    } else if (ok && !strcmp(t, "function_call")) {
        static const char *const keys[] = {"call_id", "name", "arguments"};
        for (size_t k = 0; ok && k < FOLIO_ARRAY_LEN(keys); k++)
            ok = cJSON_AddStringToObject(o, keys[k], str_field(v, keys[k])->valuestring) != NULL;
    } else if (ok) {
        char *text = NULL;
        ok = !srv__parts_text(cJSON_GetObjectItemCaseSensitive(v, "output"), text_types, "input",
                              "output", &text, &err) &&
             cJSON_AddStringToObject(o, "call_id", str_field(v, "call_id")->valuestring) &&
             cJSON_AddStringToObject(o, "output", text);
        folio_free(text);
    }
    if (ok)
        ok = cJSON_AddStringToObject(o, "status", "completed") != NULL;
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* The input as its listed items, a JSON array text into *out. */
static int listed_items(const cJSON *input, char **out)
{
    cJSON *arr = cJSON_CreateArray();
    bool ok = arr != NULL;
    if (ok && cJSON_IsString(input)) {
        cJSON *m = cJSON_CreateObject();
        ok = m && cJSON_AddStringToObject(m, "type", "message") &&
             cJSON_AddStringToObject(m, "role", "user") &&
             cJSON_AddItemToObject(m, "content", cJSON_CreateArray());
        if (ok) {
            cJSON *part = cJSON_CreateObject();
            ok = part && cJSON_AddItemToArray(cJSON_GetObjectItem(m, "content"), part) &&
                 cJSON_AddStringToObject(part, "type", "input_text") &&
                 cJSON_AddStringToObject(part, "text", input->valuestring) &&
                 cJSON_AddStringToObject(m, "status", "completed");
        }
        if (m)
            cJSON_AddItemToArray(arr, m);
    } else if (ok) {
        const cJSON *it;
        cJSON_ArrayForEach(it, input)
        {
            cJSON *o = ok ? listed_item(it) : NULL;
            ok = o && cJSON_AddItemToArray(arr, o);
        }
    }
    char *s = ok ? cJSON_PrintUnformatted(arr) : NULL;
    cJSON_Delete(arr);
    *out = s ? folio_strdup(s) : NULL;
    cJSON_free(s);
    return *out ? 0 : -ENOMEM;
}

/* tools: function tools only, re-shaped into chat's. */
static int translate_tools(const cJSON *v, cJSON *chat, struct srv_api_error *err)
{
    if (cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsArray(v))
        BAD("tools", "'tools' must be an array of function tools");
    cJSON *arr = cJSON_AddArrayToObject(chat, "tools");
    NOMEM(arr);
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, v)
    {
        const cJSON *type = str_field(t, "type"), *name = str_field(t, "name");
        if (!type || strcmp(type->valuestring, "function"))
            BAD("tools",
                "tools[%d]: only function tools are supported (type \"function\"), not "
                "'%.40s'",
                i, type ? type->valuestring : "(none)");
        if (!name)
            BAD("tools", "tools[%d].name must be a string", i);
        cJSON *ct = cJSON_CreateObject(), *fn;
        NOMEM(ct);
        cJSON_AddItemToArray(arr, ct);
        NOMEM(cJSON_AddStringToObject(ct, "type", "function"));
        NOMEM(fn = cJSON_AddObjectToObject(ct, "function"));
        static const char *const keys[] = {"name", "description", "parameters", "strict"};
        for (size_t k = 0; k < FOLIO_ARRAY_LEN(keys); k++) {
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, keys[k]);
            if (f && !cJSON_IsNull(f))
                NOMEM(cJSON_AddItemToObject(fn, keys[k], cJSON_Duplicate(f, true)));
        }
        i++;
    }
    return 0;
}

static int translate_tool_choice(const cJSON *v, cJSON *chat, struct srv_api_error *err)
{
    if (cJSON_IsString(v) || cJSON_IsNull(v)) {
        NOMEM(cJSON_AddItemToObject(chat, "tool_choice", cJSON_Duplicate(v, false)));
        return 0;
    }
    const cJSON *type = str_field(v, "type"), *name = str_field(v, "name");
    if (!cJSON_IsObject(v) || !type || strcmp(type->valuestring, "function") || !name)
        BAD("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or "
                           "{\"type\": \"function\", \"name\": ...}");
    cJSON *c = cJSON_AddObjectToObject(chat, "tool_choice"), *fn;
    NOMEM(c);
    NOMEM(cJSON_AddStringToObject(c, "type", "function"));
    NOMEM(fn = cJSON_AddObjectToObject(c, "function"));
    NOMEM(cJSON_AddStringToObject(fn, "name", name->valuestring));
    return 0;
}

/* text: {format: {type text | json_object | json_schema, ...}, verbosity} */
static int translate_text(const cJSON *v, cJSON *chat, struct srv_api_error *err)
{
    if (cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsObject(v))
        BAD("text", "'text' must be an object");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(v, "format");
    if (!f || cJSON_IsNull(f))
        return 0;
    const cJSON *type = str_field(f, "type");
    if (!type)
        BAD("text", "text.format must be {\"type\": \"text\" | \"json_object\" | \"json_schema\"}");
    cJSON *rf = cJSON_AddObjectToObject(chat, "response_format");
    NOMEM(rf);
    NOMEM(cJSON_AddStringToObject(rf, "type", type->valuestring));
    if (!strcmp(type->valuestring, "json_schema")) {
        cJSON *js = cJSON_AddObjectToObject(rf, "json_schema");
        NOMEM(js);
        static const char *const keys[] = {"name", "description", "schema", "strict"};
        for (size_t k = 0; k < FOLIO_ARRAY_LEN(keys); k++) {
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(f, keys[k]);
            if (x)
                NOMEM(cJSON_AddItemToObject(js, keys[k], cJSON_Duplicate(x, true)));
        }
    } else if (strcmp(type->valuestring, "text") && strcmp(type->valuestring, "json_object"))
        BAD("text", "text.format.type must be \"text\", \"json_object\" or \"json_schema\"");
    return 0;
}

/* The fields the response object repeats, with their defaults. */
struct echo {
    const cJSON *instructions, *max_output_tokens, *metadata, *parallel_tool_calls, *temperature,
        *text, *tool_choice, *tools, *top_logprobs, *top_p, *truncation, *user;
    const char *prev;
    bool store, background;
};

static int add_or(cJSON *o, const char *k, const cJSON *v, cJSON *def)
{
    cJSON *x = v && !cJSON_IsNull(v) ? cJSON_Duplicate(v, true) : def;
    if (x != def)
        cJSON_Delete(def);
    return cJSON_AddItemToObject(o, k, x) ? 0 : -ENOMEM;
}

/* text as the response repeats it: as given, with the default format
 * when it names none (def: {"format":{"type":"text"}}, taken). */
static cJSON *text_echo(const cJSON *given, cJSON *def)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(given, "format");
    if (!cJSON_IsObject(given) || !def)
        return def;
    cJSON *t = cJSON_Duplicate(given, true);
    if (t && (!f || cJSON_IsNull(f))) {
        cJSON_DeleteItemFromObjectCaseSensitive(t, "format");
        cJSON_AddItemToObject(t, "format", cJSON_DetachItemFromObject(def, "format"));
    }
    cJSON_Delete(def);
    return t;
}

/* The echo as JSON members ("k":v,...; no braces), into *out. */
static int echo_render(const struct echo *e, char **out)
{
    cJSON *o = cJSON_CreateObject();
    int rc = o ? 0 : -ENOMEM;
    cJSON *reasoning = cJSON_CreateObject();
    if (reasoning) {
        cJSON_AddNullToObject(reasoning, "effort");
        cJSON_AddNullToObject(reasoning, "summary");
    }
    cJSON *text = cJSON_CreateObject();
    if (text)
        cJSON_AddItemToObject(text, "format", cJSON_CreateObject());
    cJSON *tf = text ? cJSON_GetObjectItemCaseSensitive(text, "format") : NULL;
    if (tf)
        cJSON_AddStringToObject(tf, "type", "text");
    text = text_echo(e->text, text);
    if (!rc && !(rc = add_or(o, "instructions", e->instructions, cJSON_CreateNull())) &&
        !(rc = add_or(o, "max_output_tokens", e->max_output_tokens, cJSON_CreateNull())) &&
        !(rc = add_or(o, "metadata", e->metadata, cJSON_CreateObject())) &&
        !(rc = add_or(o, "parallel_tool_calls", e->parallel_tool_calls, cJSON_CreateTrue())) &&
        !(rc = add_or(o, "previous_response_id", NULL,
                      e->prev ? cJSON_CreateString(e->prev) : cJSON_CreateNull())) &&
        !(rc = add_or(o, "reasoning", NULL, reasoning)) &&
        !(rc = add_or(o, "store", NULL, cJSON_CreateBool(e->store))) &&
        !(rc = add_or(o, "temperature", e->temperature, cJSON_CreateNumber(1.0))) &&
        !(rc = add_or(o, "text", NULL, text)) &&
        !(rc = add_or(o, "tool_choice", e->tool_choice, cJSON_CreateString("auto"))) &&
        !(rc = add_or(o, "tools", e->tools, cJSON_CreateArray())) &&
        !(rc = add_or(o, "top_logprobs", e->top_logprobs, cJSON_CreateNumber(0))) &&
        !(rc = add_or(o, "top_p", e->top_p, cJSON_CreateNumber(1.0))) &&
        !(rc = add_or(o, "truncation", e->truncation, cJSON_CreateString("disabled"))))
        rc = add_or(o, "user", e->user, cJSON_CreateNull());
    else {
        /* whichever defaults were not handed to add_or */
        if (!cJSON_GetObjectItemCaseSensitive(o, "reasoning"))
            cJSON_Delete(reasoning);
        if (!cJSON_GetObjectItemCaseSensitive(o, "text"))
            cJSON_Delete(text);
    }
    char *s = rc ? NULL : cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s)
        return -ENOMEM;
    size_t n = strlen(s); /* {...}: the members between the braces */
    *out = folio_malloc(n - 1);
    if (*out) {
        memcpy(*out, s + 1, n - 2);
        (*out)[n - 2] = 0;
    }
    cJSON_free(s);
    return *out ? 0 : -ENOMEM;
}

/* Fields the chat body takes as they are. */
static bool passed(const char *k)
{
    static const char *const keys[] = {
        "model",
        "temperature",
        "top_p",
        "stream",
        "user",
        "parallel_tool_calls",
        "seed",
        "stop",
        "top_k",
        "min_p",
        "presence_penalty",
        "frequency_penalty",
        "repetition_penalty",
        "logit_bias",
        "ignore_eos",
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(keys); i++)
        if (!strcmp(k, keys[i]))
            return true;
    return false;
}

/* Refused unless null / false / empty. */
static int refuse_set(const cJSON *f, const char *k, const char *why, struct srv_api_error *err)
{
    bool unset = cJSON_IsNull(f) || cJSON_IsFalse(f) || (cJSON_IsArray(f) && !f->child);
    if (!unset)
        BAD(k, "'%s' is not supported: %s", k, why);
    return 0;
}

/* One top-level field of the Responses body. */
static int field(const cJSON *f, cJSON *c, struct echo *e, const cJSON **input,
                 struct srv_comp_params *p, struct srv_api_error *err)
{
    const char *k = f->string;
    if (!strcmp(k, "input"))
        *input = f;
    else if (!strcmp(k, "instructions")) {
        if (!cJSON_IsString(f) && !cJSON_IsNull(f))
            BAD(k, "'instructions' must be a string");
        e->instructions = f;
    } else if (!strcmp(k, "max_output_tokens")) {
        if (!cJSON_IsNull(f))
            NOMEM(cJSON_AddItemToObject(c, "max_tokens", cJSON_Duplicate(f, false)));
        e->max_output_tokens = f;
    } else if (!strcmp(k, "tools")) {
        e->tools = f;
        return translate_tools(f, c, err);
    } else if (!strcmp(k, "tool_choice")) {
        e->tool_choice = f;
        return translate_tool_choice(f, c, err);
    } else if (!strcmp(k, "text")) {
        e->text = f;
        return translate_text(f, c, err);
    } else if (!strcmp(k, "store")) {
        if (!cJSON_IsBool(f) && !cJSON_IsNull(f))
            BAD(k, "'store' must be a boolean");
        e->store = !cJSON_IsFalse(f);
    } else if (!strcmp(k, "previous_response_id")) {
        if (!cJSON_IsString(f) && !cJSON_IsNull(f))
            BAD(k, "'previous_response_id' must be a string");
        e->prev = cJSON_IsString(f) ? f->valuestring : NULL;
    } else if (!strcmp(k, "metadata")) {
        if (!cJSON_IsObject(f) && !cJSON_IsNull(f))
            BAD(k, "'metadata' must be an object");
        e->metadata = f;
    } else if (!strcmp(k, "truncation")) {
        if (!cJSON_IsNull(f) && (!cJSON_IsString(f) || (strcmp(f->valuestring, "disabled") &&
                                                        strcmp(f->valuestring, "auto"))))
            BAD(k, "'truncation' must be \"disabled\" or \"auto\"");
        e->truncation = f;
    } else if (!strcmp(k, "reasoning")) {
        const cJSON *effort = cJSON_GetObjectItemCaseSensitive(f, "effort");
        if (!cJSON_IsNull(f) && (!cJSON_IsObject(f) || (effort && !cJSON_IsNull(effort))))
            BAD(k, "reasoning.effort is not supported with this model (it does not reason)");
    } else if (!strcmp(k, "background")) {
        if (!cJSON_IsBool(f) && !cJSON_IsNull(f))
            BAD(k, "'background' must be a boolean");
        e->background = cJSON_IsTrue(f);
    } else if (!strcmp(k, "conversation"))
        return refuse_set(f, k, "chain responses with previous_response_id", err);
    else if (!strcmp(k, "include")) {
        if (!cJSON_IsArray(f) && !cJSON_IsNull(f))
            BAD(k, "'include' must be an array of strings");
        const cJSON *x;
        cJSON_ArrayForEach(x, f)
        {
            if (!cJSON_IsString(x) || strcmp(x->valuestring, "message.output_text.logprobs"))
                BAD(k, "include: only \"message.output_text.logprobs\" is available, not %.64s",
                    cJSON_IsString(x) ? x->valuestring : "a non-string");
            if (!cJSON_GetObjectItemCaseSensitive(c, "logprobs"))
                NOMEM(cJSON_AddTrueToObject(c, "logprobs"));
        }
    } else if (!strcmp(k, "top_logprobs")) {
        int64_t n; /* the chat's only with include's logprobs (translate) */
        if (!cJSON_IsNull(f) && srv__get_int(f, k, 0, SAMPLER_MAX_TOP, &n, err))
            return -EINVAL;
        e->top_logprobs = f;
    } else if (!strcmp(k, "prompt"))
        return refuse_set(f, k, "there are no stored prompt templates", err);
    else if (!strcmp(k, "service_tier") || !strcmp(k, "prompt_cache_key") ||
             !strcmp(k, "safety_identifier") || !strcmp(k, "stream_options") ||
             !strcmp(k, "max_tool_calls")) {
    } else if (passed(k)) {
        if (!strcmp(k, "temperature"))
            e->temperature = f;
        else if (!strcmp(k, "top_p"))
            e->top_p = f;
        else if (!strcmp(k, "parallel_tool_calls"))
            e->parallel_tool_calls = f;
        else if (!strcmp(k, "user"))
            e->user = f;
        NOMEM(cJSON_AddItemToObject(c, k, cJSON_Duplicate(f, true)));
    } else
        srv__note_unknown(p->unknown, &p->n_unknown, "", k);
    return 0;
}

/* The chat completion body a Responses body means, into *chat (the
 * caller's), and p->resp. */
static int translate(const char *body, size_t len, srv_resp_lookup_fn lookup, void *lookup_ctx,
                     bool can_store, cJSON **chat, struct srv_comp_params *p,
                     struct srv_api_error *err)
{
    *chat = NULL;
    cJSON *root = srv__parse_root(body, len, err);
    if (!root)
        return -EINVAL;
    struct echo e = {.store = true};
    const cJSON *input = NULL, *f;
    cJSON *c = cJSON_CreateObject(), *msgs = cJSON_CreateArray(), *conv = NULL;
    int rc = c && msgs ? srv__object_once(root, err) : -ENOMEM;
    cJSON_ArrayForEach(f, root)
    {
        if (rc)
            break;
        rc = field(f, c, &e, &input, p, err);
    }
    if (!rc && !input) {
        srv_api_error_set(err, 400, "invalid_request_error", "input", NULL, "'input' is required");
        rc = -EINVAL;
    }
    /* alternatives per token only where include asks for logprobs, as OpenAI */
    if (!rc && e.top_logprobs && !cJSON_IsNull(e.top_logprobs) &&
        cJSON_GetObjectItemCaseSensitive(c, "logprobs") &&
        !cJSON_AddItemToObject(c, "top_logprobs", cJSON_Duplicate(e.top_logprobs, false)))
        rc = -ENOMEM;
    if (!rc && e.prev) {
        const char *prev = lookup ? lookup(lookup_ctx, e.prev) : NULL;
        if (!prev) {
            srv_api_error_set(err, 404, "invalid_request_error", "previous_response_id",
                              "previous_response_not_found",
                              "Previous response with id '%.64s' not found.", e.prev);
            rc = -EINVAL;
        } else if (!(conv = cJSON_Parse(prev)))
            rc = -ENOMEM;
    }
    if (!rc && !conv && !(conv = cJSON_CreateArray()))
        rc = -ENOMEM;
    if (!rc)
        rc = translate_input(input, conv, err);
    e.store &= can_store;
    if (!rc && e.background && !e.store) {
        srv_api_error_set(err, 400, "invalid_request_error", "background", NULL,
                          "a background response must be stored, and 'store' is false or "
                          "this server keeps no responses (--responses-store 0)");
        rc = -EINVAL;
    }
    if (!rc && e.background && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "stream"))) {
        srv_api_error_set(err, 400, "invalid_request_error", "background", NULL,
                          "a background response cannot be streamed here: poll "
                          "GET /v1/responses/{id}");
        rc = -EINVAL;
    }
    p->resp = folio_calloc(1, sizeof(*p->resp));
    if (!rc && !p->resp)
        rc = -ENOMEM;
    if (!rc) {
        p->resp->store = e.store;
        p->resp->background = e.background;
        char *s = cJSON_PrintUnformatted(conv);
        p->resp->conv = s ? folio_strdup(s) : NULL;
        cJSON_free(s);
        if (!p->resp->conv || (e.prev && !(p->resp->prev_id = folio_strdup(e.prev))))
            rc = -ENOMEM;
        if (!rc)
            rc = listed_items(input, &p->resp->input);
    }
    if (!rc)
        rc = echo_render(&e, &p->resp->echo);
    if (!rc && cJSON_IsString(e.instructions))
        rc = srv__add_message(msgs, "system", folio_strdup(e.instructions->valuestring));
    if (!rc) {
        cJSON *m;
        while (!rc && (m = cJSON_DetachItemFromArray(conv, 0)))
            cJSON_AddItemToArray(msgs, m);
        cJSON_AddItemToObject(c, "messages", msgs);
        msgs = NULL;
    }
    cJSON_Delete(root);
    cJSON_Delete(msgs);
    cJSON_Delete(conv);
    if (rc)
        cJSON_Delete(c);
    else
        *chat = c;
    if (rc == -ENOMEM)
        srv_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    return rc;
}

int srv_responses_parse(const char *body, size_t len, const struct eng_model_info *mi, int tmpl,
                        srv_tokenize_fn tok, void *tok_ctx, srv_resp_lookup_fn lookup,
                        void *lookup_ctx, bool can_store, struct srv_comp_params *p,
                        struct srv_api_error *err)
{
    struct srv_comp_params own = {0}; /* the Responses body's own unknown fields and resp */
    cJSON *chat = NULL;
    memset(p, 0, sizeof(*p));
    int rc = translate(body, len, lookup, lookup_ctx, can_store, &chat, &own, err);
    if (rc) {
        srv_resp_params_free(own.resp);
        return rc;
    }
    char *s = cJSON_PrintUnformatted(chat);
    cJSON_Delete(chat);
    if (!s) {
        srv_resp_params_free(own.resp);
        srv_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        return -ENOMEM;
    }
    rc = srv_chat_parse(s, strlen(s), mi, tmpl, tok, tok_ctx, p, err);
    cJSON_free(s);
    p->responses = true;
    p->resp = own.resp;
    /* the fields as the client named them */
    const char *named = !rc || !err->param                       ? NULL
                        : !strcmp(err->param, "messages")        ? "input"
                        : !strcmp(err->param, "max_tokens")      ? "max_output_tokens"
                        : !strcmp(err->param, "response_format") ? "text"
                                                                 : NULL;
    if (named) { /* in the message too: 'max_tokens' -> 'max_output_tokens' */
        char msg[sizeof(err->message)], old[40];
        snprintf(old, sizeof(old), "'%s'", err->param);
        const char *at = strstr(err->message, old);
        if (at)
            snprintf(msg, sizeof(msg), "%.*s'%s'%s", (int)(at - err->message), err->message, named,
                     at + strlen(old));
        else
            memcpy(msg, err->message, sizeof(msg));
        srv_api_error_set(err, err->status, err->type, named, err->code, "%s", msg);
    }
    if (!rc && own.n_unknown) {
        memcpy(p->unknown, own.unknown, sizeof(p->unknown));
        p->n_unknown = own.n_unknown;
    }
    return rc;
}

void srv_resp_params_free(struct srv_resp_params *r)
{
    if (!r)
        return;
    folio_free(r->input);
    folio_free(r->echo);
    folio_free(r->conv);
    folio_free(r->prev_id);
    folio_free(r);
}
