/*
 * daemon/api_messages.c — Anthropic's Messages API (POST /v1/messages,
 * /v1/messages/count_tokens), as llama-server and vLLM serve it: the body
 * is translated into the chat completion body it means and parsed by
 * srv_chat_parse, so a message runs, is limited and is refused exactly as
 * a chat completion is.
 *
 * The translation:
 *   system (a string or text blocks)   -> a first "system" message
 *   messages[i] {role user|assistant,  -> {role, content}: the text
 *     content: string or text blocks}     blocks joined
 *   an assistant's tool_use blocks     -> its tool_calls ({id, function:
 *     {id, name, input}                   {name, arguments: input as JSON
 *                                         text}})
 *   a user's tool_result blocks        -> "tool" messages before its text
 *     {tool_use_id, content, is_error}    (is_error: "Error: " first)
 *   a final assistant message          -> continue_final_message (the
 *                                         answer continues it: prefill)
 *   tools [{name, description,         -> function tools (parameters:
 *     input_schema}]                      input_schema)
 *   tool_choice {type auto|any|none|   -> "auto" | "required" | "none" |
 *     tool, name}                         {function: {name}};
 *     disable_parallel_tool_use           parallel_tool_calls false
 *   max_tokens (required), temperature, top_p, top_k, stream, model,
 *     and vLLM's seed, ignore_eos, min_p, logit_bias, penalties
 *                                      -> the same chat fields
 *   stop_sequences                     -> stop
 *   metadata, thinking {type disabled} -> nothing
 * Blocks of other types (image, document, thinking), Anthropic's own
 * tools (bash, text editor, web search) and enabled thinking are refused
 * with a 400 naming them; other fields are unknown fields (ignored, or
 * refused with --strict-api), listed in p->unknown as for any route.  The
 * answer's tool calls are parsed as a chat completion's (tools.h) and
 * written as tool_use blocks (render_messages.c).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "api_internal.h"
#include "folio/common.h"

/* Anthropic's text blocks: {type:"text", text} (cache_control and
 * citations ignored). */
static const char *const text_type[] = {"text", NULL};

/* A tool_result block's content: a string or text blocks; is_error
 * marks it for the model. */
static int tool_result(const cJSON *blk, const char *what, cJSON *out, struct srv_api_error *err)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(blk, "tool_use_id");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(blk, "content");
    if (!cJSON_IsString(id))
        BAD("messages", "%s.tool_use_id must be a string", what);
    char *text = NULL;
    int rc = c ? srv__parts_text(c, text_type, "messages", what, &text, err) : 0;
    if (rc)
        return rc;
    bool error = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(blk, "is_error"));
    struct folio_buf b = {0};
    folio_buf_printf(&b, "%s%s", error ? "Error: " : "", text ? text : "");
    folio_free(text);
    cJSON *m = cJSON_CreateObject();
    bool ok = !b.oom && m && cJSON_AddStringToObject(m, "role", "tool") &&
              cJSON_AddStringToObject(m, "tool_call_id", id->valuestring) &&
              cJSON_AddStringToObject(m, "content", b.p ? b.p : "");
    folio_buf_free(&b);
    if (m)
        cJSON_AddItemToArray(out, m);
    return ok ? 0 : -ENOMEM;
}

/* A tool_use block as a chat tool call, onto calls. */
static int tool_use(const cJSON *blk, const char *what, cJSON *calls, struct srv_api_error *err)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(blk, "id");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(blk, "name");
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(blk, "input");
    if (!cJSON_IsString(id) || !cJSON_IsString(name) || !cJSON_IsObject(input))
        BAD("messages", "%s: a tool_use block needs id and name strings and an input object", what);
    char *args = cJSON_PrintUnformatted(input);
    cJSON *c = cJSON_CreateObject(), *fn = NULL;
    bool ok = args && c && cJSON_AddStringToObject(c, "id", id->valuestring) &&
              cJSON_AddStringToObject(c, "type", "function") &&
              (fn = cJSON_AddObjectToObject(c, "function")) &&
              cJSON_AddStringToObject(fn, "name", name->valuestring) &&
              cJSON_AddStringToObject(fn, "arguments", args);
    cJSON_free(args);
    if (c)
        cJSON_AddItemToArray(calls, c);
    return ok ? 0 : -ENOMEM;
}

/* One message with content blocks: an assistant's text and tool_use
 * blocks become one message with tool_calls; a user's tool_result blocks
 * become tool messages, before a message of its text blocks. */
static int message_blocks(const cJSON *content, const char *role, int i, cJSON *out,
                          bool *had_calls, struct srv_api_error *err)
{
    bool assistant = !strcmp(role, "assistant");
    struct folio_buf text = {0};
    cJSON *calls = cJSON_CreateArray();
    int rc = calls ? 0 : -ENOMEM, k = 0, n_text = 0;
    const cJSON *blk;
    cJSON_ArrayForEach(blk, content)
    {
        if (rc)
            break;
        char what[64];
        snprintf(what, sizeof(what), "messages[%d].content[%d]", i, k++);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(blk, "type");
        const char *t = cJSON_IsString(type) ? type->valuestring : "";
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(blk, "text");
        if (!strcmp(t, "text") && cJSON_IsString(tx)) {
            folio_buf_puts(&text, tx->valuestring);
            n_text++;
        } else if (!strcmp(t, "text")) {
            srv_api_error_set(err, 400, "invalid_request_error", "messages", NULL,
                              "%s.text must be a string", what);
            rc = -EINVAL;
        } else if (assistant && !strcmp(t, "tool_use"))
            rc = tool_use(blk, what, calls, err);
        else if (!assistant && !strcmp(t, "tool_result"))
            rc = tool_result(blk, what, out, err);
        else {
            srv_api_error_set(err, 400, "invalid_request_error", "messages", NULL,
                              "%s: content blocks of type '%.32s' are not supported in %s "
                              "messages (text%s)",
                              what, *t ? t : "(none)", role,
                              assistant ? ", tool_use" : ", tool_result");
            rc = -EINVAL;
        }
    }
    if (!rc && text.oom)
        rc = -ENOMEM;
    bool any_calls = calls && calls->child;
    if (!rc && (n_text || any_calls || (!assistant && !content->child))) {
        cJSON *m = cJSON_CreateObject();
        bool ok = m && cJSON_AddStringToObject(m, "role", role);
        if (ok && (n_text || !any_calls))
            ok = cJSON_AddStringToObject(m, "content", text.p ? text.p : "") != NULL;
        if (ok && any_calls) {
            cJSON_AddItemToObject(m, "tool_calls", calls);
            calls = NULL;
        }
        if (m)
            cJSON_AddItemToArray(out, m);
        if (!ok)
            rc = -ENOMEM;
    }
    *had_calls = any_calls;
    cJSON_Delete(calls);
    folio_buf_free(&text);
    return rc;
}

static int translate_messages(const cJSON *v, cJSON *out, bool *last_assistant,
                              struct srv_api_error *err)
{
    if (!cJSON_IsArray(v) || !v->child)
        BAD("messages", "'messages' must be a non-empty array of {role, content} objects");
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, v)
    {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role) ||
            (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "assistant")))
            BAD("messages", "messages[%d].role must be \"user\" or \"assistant\"", i);
        if (!content)
            BAD("messages", "messages[%d].content is required", i);
        if (!cJSON_IsString(content) && !cJSON_IsArray(content))
            BAD("messages", "messages[%d].content must be a string or an array of content blocks",
                i);
        bool calls = false;
        int rc = cJSON_IsString(content)
                     ? srv__add_message(out, role->valuestring, folio_strdup(content->valuestring))
                     : message_blocks(content, role->valuestring, i, out, &calls, err);
        if (rc)
            return rc;
        *last_assistant = !strcmp(role->valuestring, "assistant");
        if (*last_assistant && calls && !m->next)
            BAD("messages",
                "messages[%d]: a final assistant message with tool_use blocks needs "
                "their tool_result blocks in a user message after it",
                i);
        i++;
    }
    return 0;
}

/* tools [{name, description, input_schema}] -> chat's function tools.
 * Anthropic's own tools (bash, text editor, web search ...) are refused. */
static int translate_tools(const cJSON *v, cJSON *chat, struct srv_api_error *err)
{
    if (!cJSON_IsArray(v))
        BAD("tools", "'tools' must be an array of tools");
    if (!v->child)
        return 0;
    cJSON *arr = cJSON_AddArrayToObject(chat, "tools");
    if (!arr)
        return -ENOMEM;
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, v)
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
        const cJSON *desc = cJSON_GetObjectItemCaseSensitive(t, "description");
        const cJSON *schema = cJSON_GetObjectItemCaseSensitive(t, "input_schema");
        if (type && !cJSON_IsNull(type) &&
            (!cJSON_IsString(type) || strcmp(type->valuestring, "custom")))
            BAD("tools",
                "tools[%d]: only client tools ({name, description, input_schema}) are "
                "supported, not type '%.40s'",
                i, cJSON_IsString(type) ? type->valuestring : "?");
        if (!cJSON_IsString(name) || !cJSON_IsObject(schema))
            BAD("tools", "tools[%d] must have a name string and an input_schema object", i);
        cJSON *ct = cJSON_CreateObject(), *fn = NULL;
        bool ok = ct && cJSON_AddStringToObject(ct, "type", "function") &&
                  (fn = cJSON_AddObjectToObject(ct, "function")) &&
                  cJSON_AddStringToObject(fn, "name", name->valuestring) &&
                  (!cJSON_IsString(desc) ||
                   cJSON_AddStringToObject(fn, "description", desc->valuestring)) &&
                  cJSON_AddItemToObject(fn, "parameters", cJSON_Duplicate(schema, true));
        if (ct)
            cJSON_AddItemToArray(arr, ct);
        if (!ok)
            return -ENOMEM;
        i++;
    }
    return 0;
}

/* tool_choice {type auto|any|tool (name)|none, disable_parallel_tool_use}
 * -> chat's tool_choice and parallel_tool_calls. */
static int translate_tool_choice(const cJSON *v, cJSON *chat, struct srv_api_error *err)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(v, "type");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(v, "name");
    const char *t = cJSON_IsString(type) ? type->valuestring : "";
    bool ok;
    if (!strcmp(t, "auto") || !strcmp(t, "none"))
        ok = cJSON_AddStringToObject(chat, "tool_choice", t) != NULL;
    else if (!strcmp(t, "any"))
        ok = cJSON_AddStringToObject(chat, "tool_choice", "required") != NULL;
    else if (!strcmp(t, "tool") && cJSON_IsString(name)) {
        cJSON *c = cJSON_AddObjectToObject(chat, "tool_choice"), *fn = NULL;
        ok = c && cJSON_AddStringToObject(c, "type", "function") &&
             (fn = cJSON_AddObjectToObject(c, "function")) &&
             cJSON_AddStringToObject(fn, "name", name->valuestring);
    } else
        BAD("tool_choice", "tool_choice must be {\"type\": \"auto\" | \"any\" | \"none\"} or "
                           "{\"type\": \"tool\", \"name\": ...}");
    if (ok && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "disable_parallel_tool_use")))
        ok = cJSON_AddFalseToObject(chat, "parallel_tool_calls") != NULL;
    return ok ? 0 : -ENOMEM;
}

/* vLLM's sampling fields beside Anthropic's, passed to the chat body as
 * they are (seed and ignore_eos make load tests repeatable). */
static bool vllm_extra(const char *k)
{
    static const char *const keys[] = {"seed",
                                       "ignore_eos",
                                       "min_p",
                                       "logit_bias",
                                       "presence_penalty",
                                       "frequency_penalty",
                                       "repetition_penalty"};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(keys); i++)
        if (!strcmp(k, keys[i]))
            return true;
    return false;
}

/* The chat completion body a Messages body means, into *chat (cJSON,
 * the caller's); unknown fields noted in p.  count: count_tokens's body
 * (no max_tokens). */
static int translate(const char *body, size_t len, bool count, cJSON **chat,
                     struct srv_comp_params *p, struct srv_api_error *err)
{
    *chat = NULL;
    cJSON *root = srv__parse_root(body, len, err);
    if (!root)
        return -EINVAL;
    int rc = 0;
    cJSON *c = cJSON_CreateObject(), *msgs = cJSON_CreateArray();
    if (!c || !msgs) {
        rc = -ENOMEM;
        goto out;
    }
    const cJSON *system = NULL, *messages = NULL, *f;
    bool last_assistant = false;
    if ((rc = srv__object_once(root, err)))
        goto out;
    cJSON_ArrayForEach(f, root)
    {
        const char *k = f->string;
        if (!strcmp(k, "system"))
            system = f;
        else if (!strcmp(k, "messages"))
            messages = f;
        else if (!strcmp(k, "model") ||
                 (!count &&
                  (!strcmp(k, "max_tokens") || !strcmp(k, "temperature") || !strcmp(k, "top_p") ||
                   !strcmp(k, "top_k") || !strcmp(k, "stream") || vllm_extra(k)))) {
            if (!cJSON_AddItemToObject(c, k, cJSON_Duplicate(f, true)))
                rc = -ENOMEM;
        } else if (!count && !strcmp(k, "stop_sequences")) {
            if (!cJSON_AddItemToObject(c, "stop", cJSON_Duplicate(f, true)))
                rc = -ENOMEM;
        } else if (!strcmp(k, "tools"))
            rc = translate_tools(f, c, err);
        else if (!strcmp(k, "tool_choice"))
            rc = translate_tool_choice(f, c, err);
        else if (!strcmp(k, "thinking")) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(f, "type");
            if (!cJSON_IsString(t) || strcmp(t->valuestring, "disabled")) {
                srv_api_error_set(err, 400, "invalid_request_error", "thinking", NULL,
                                  "extended thinking is not supported (thinking must be "
                                  "{\"type\": \"disabled\"})");
                rc = -EINVAL;
            }
        } else if (!strcmp(k, "metadata")) {
            if (!cJSON_IsObject(f) && !cJSON_IsNull(f)) {
                srv_api_error_set(err, 400, "invalid_request_error", "metadata", NULL,
                                  "metadata must be an object");
                rc = -EINVAL;
            }
        } else
            srv__note_unknown(p->unknown, &p->n_unknown, "", k);
        if (rc)
            goto out;
    }
    if (!count && !cJSON_GetObjectItemCaseSensitive(c, "max_tokens")) {
        srv_api_error_set(err, 400, "invalid_request_error", "max_tokens", NULL,
                          "'max_tokens' is required");
        rc = -EINVAL;
        goto out;
    }
    if (!messages) {
        srv_api_error_set(err, 400, "invalid_request_error", "messages", NULL,
                          "'messages' is required");
        rc = -EINVAL;
        goto out;
    }
    if (system) {
        char *text = NULL;
        if ((rc = srv__parts_text(system, text_type, "system", "system", &text, err)) ||
            (rc = srv__add_message(msgs, "system", text)))
            goto out;
    }
    if ((rc = translate_messages(messages, msgs, &last_assistant, err)))
        goto out;
    cJSON_AddItemToObject(c, "messages", msgs);
    msgs = NULL;
    if (last_assistant && !cJSON_AddTrueToObject(c, "continue_final_message"))
        rc = -ENOMEM;
out:
    cJSON_Delete(root);
    cJSON_Delete(msgs);
    if (rc)
        cJSON_Delete(c);
    else
        *chat = c;
    if (rc == -ENOMEM)
        srv_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    return rc;
}

int srv_messages_parse(const char *body, size_t len, bool count, const struct eng_model_info *mi,
                       int tmpl, srv_tokenize_fn tok, void *tok_ctx, struct srv_comp_params *p,
                       struct srv_api_error *err)
{
    struct srv_comp_params unk = {0}; /* the Messages body's own unknown fields */
    cJSON *chat = NULL;
    memset(p, 0, sizeof(*p));
    int rc = translate(body, len, count, &chat, &unk, err);
    if (rc)
        return rc;
    char *s = cJSON_PrintUnformatted(chat);
    cJSON_Delete(chat);
    if (!s) {
        srv_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        return -ENOMEM;
    }
    rc = srv_chat_parse(s, strlen(s), mi, tmpl, tok, tok_ctx, p, err);
    cJSON_free(s);
    p->messages = true;
    /* the fields as the client named them */
    const char *named = !rc || !err->param                              ? NULL
                        : !strcmp(err->param, "stop")                   ? "stop_sequences"
                        : !strcmp(err->param, "continue_final_message") ? "messages"
                                                                        : NULL;
    if (named) {
        char msg[sizeof(err->message)];
        memcpy(msg, err->message, sizeof(msg));
        srv_api_error_set(err, err->status, err->type, named, err->code, "%s", msg);
    }
    if (!rc && unk.n_unknown) {
        memcpy(p->unknown, unk.unknown, sizeof(p->unknown));
        p->n_unknown = unk.n_unknown;
    }
    return rc;
}
