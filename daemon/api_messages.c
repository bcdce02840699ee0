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
 *   a final assistant message          -> continue_final_message (the
 *                                         answer continues it: prefill)
 *   max_tokens (required), temperature, top_p, top_k, stream, model
 *                                      -> the same chat fields
 *   stop_sequences                     -> stop
 *   metadata, thinking {type disabled}, tool_choice {type none}
 *                                      -> nothing
 * Blocks of other types (image, document, tool_use, tool_result,
 * thinking), non-empty tools and enabled thinking are refused with a 400
 * naming them; other fields are unknown fields (ignored, or refused with
 * --strict-api), listed in p->unknown as for any route.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "api_internal.h"
#include "folio/common.h"

/* A content value's text: a string, or an array of {type:"text", text}
 * blocks (their other fields, cache_control and citations, ignored)
 * joined.  what names it in errors.  *out is folio_malloc'd. */
static int blocks_text(const cJSON *c, const char *param, const char *what, char **out,
                       struct srv_api_error *err)
{
    if (cJSON_IsString(c)) {
        *out = folio_strdup(c->valuestring);
        return *out ? 0 : -ENOMEM;
    }
    if (!cJSON_IsArray(c))
        BAD(param, "%s must be a string or an array of content blocks", what);
    struct folio_buf b = {0};
    const cJSON *blk;
    int k = 0;
    cJSON_ArrayForEach(blk, c)
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(blk, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(blk, "text");
        if (!cJSON_IsString(type)) {
            folio_buf_free(&b);
            BAD(param, "%s[%d] must be a content block with a \"type\"", what, k);
        }
        if (strcmp(type->valuestring, "text")) {
            srv_api_error_set(err, 400, "invalid_request_error", param, NULL,
                              "%s[%d]: content blocks of type '%.32s' are not supported here "
                              "(text only)",
                              what, k, type->valuestring);
            folio_buf_free(&b);
            return -EINVAL;
        }
        if (!cJSON_IsString(text)) {
            folio_buf_free(&b);
            BAD(param, "%s[%d].text must be a string", what, k);
        }
        folio_buf_puts(&b, text->valuestring);
        k++;
    }
    if (b.oom) {
        folio_buf_free(&b);
        return -ENOMEM;
    }
    *out = b.p ? b.p : folio_strdup("");
    return *out ? 0 : -ENOMEM;
}

/* Adds {role, content: text} to arr (takes text). */
static int add_message(cJSON *arr, const char *role, char *text)
{
    cJSON *m = cJSON_CreateObject();
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
        char what[48], *text = NULL;
        snprintf(what, sizeof(what), "messages[%d].content", i);
        int rc = blocks_text(content, "messages", what, &text, err);
        if (!rc)
            rc = add_message(out, role->valuestring, text);
        if (rc)
            return rc;
        *last_assistant = !strcmp(role->valuestring, "assistant");
        i++;
    }
    return 0;
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
                 (!count && (!strcmp(k, "max_tokens") || !strcmp(k, "temperature") ||
                             !strcmp(k, "top_p") || !strcmp(k, "top_k") || !strcmp(k, "stream")))) {
            if (!cJSON_AddItemToObject(c, k, cJSON_Duplicate(f, true)))
                rc = -ENOMEM;
        } else if (!count && !strcmp(k, "stop_sequences")) {
            if (!cJSON_AddItemToObject(c, "stop", cJSON_Duplicate(f, true)))
                rc = -ENOMEM;
        } else if (!strcmp(k, "tools")) {
            if (!cJSON_IsArray(f) || f->child) {
                srv_api_error_set(err, 400, "invalid_request_error", "tools", NULL,
                                  "tools are not supported on /v1/messages (use "
                                  "/v1/chat/completions)");
                rc = -EINVAL;
            }
        } else if (!strcmp(k, "tool_choice")) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(f, "type");
            if (!cJSON_IsString(t) ||
                (strcmp(t->valuestring, "none") && strcmp(t->valuestring, "auto"))) {
                srv_api_error_set(err, 400, "invalid_request_error", "tool_choice", NULL,
                                  "tool_choice must be {\"type\": \"none\"} or \"auto\" here "
                                  "(no tools)");
                rc = -EINVAL;
            }
        } else if (!strcmp(k, "thinking")) {
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
        if ((rc = blocks_text(system, "system", "system", &text, err)) ||
            (rc = add_message(msgs, "system", text)))
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
