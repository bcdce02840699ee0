/*
 * daemon/api_chat.c — the `messages` of /v1/chat/completions (api.h,
 * srv_chat_parse): each message's role and content (a string, or an array
 * of {type:"text", text} parts joined) become a chat_msg array, rendered
 * with the chat template and the generation prompt, then tokenized with
 * special-token parsing: one prompt.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "api_internal.h"
#include "folio/chat.h"
#include "folio/common.h"

/* One message's content: a string, or an array of {type:"text", text}
 * parts joined.  *out is folio_malloc'd. */
static int message_content(const cJSON *c, int i, char **out, struct srv_api_error *err)
{
    if (cJSON_IsString(c)) {
        *out = folio_strdup(c->valuestring);
        return *out ? 0 : -ENOMEM;
    }
    if (!cJSON_IsArray(c))
        BAD("messages", "messages[%d].content must be a string or an array of text parts", i);
    size_t total = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, c)
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsObject(part) || !cJSON_IsString(type) || strcmp(type->valuestring, "text"))
            BAD("messages",
                "messages[%d].content parts must be {\"type\": \"text\", ...} (only text is "
                "supported)",
                i);
        if (!cJSON_IsString(text) || cJSON_GetArraySize(part) != 2)
            BAD("messages",
                "messages[%d].content text parts must be {\"type\": \"text\", \"text\": string}",
                i);
        total += strlen(text->valuestring);
    }
    char *s = folio_malloc(total + 1);
    if (!s)
        return -ENOMEM;
    size_t at = 0;
    cJSON_ArrayForEach(part, c)
    {
        const char *t = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
        size_t n = strlen(t);
        memcpy(s + at, t, n);
        at += n;
    }
    s[at] = 0;
    *out = s;
    return 0;
}

int srv__chat_messages(const cJSON *v, int tmpl, srv_tokenize_fn tok, void *tok_ctx,
                       struct srv_comp_params *p, struct srv_api_error *err)
{
    if (!cJSON_IsArray(v))
        BAD("messages", "'messages' must be an array of {role, content} objects");
    int n = cJSON_GetArraySize(v);
    if (n == 0)
        BAD("messages", "'messages' must not be empty");
    if (n > SRV_MAX_MESSAGES)
        BAD("messages", "at most %d messages", SRV_MAX_MESSAGES);
    struct chat_msg *msgs = folio_calloc((size_t)n, sizeof(*msgs));
    char **content = folio_calloc((size_t)n, sizeof(*content));
    char *text = NULL;
    int32_t *toks = NULL, n_toks = 0;
    int rc = msgs && content ? 0 : -ENOMEM, i = 0;
    const cJSON *m;
    size_t need = 64;
    cJSON_ArrayForEach(m, v)
    {
        if (rc)
            break;
        if (!cJSON_IsObject(m)) {
            srv_api_error_set(err, 400, "invalid_request_error", "messages", NULL,
                              "messages[%d] must be an object", i);
            rc = -EINVAL;
            break;
        }
        const cJSON *f, *role = NULL, *c = NULL;
        cJSON_ArrayForEach(f, m)
        {
            if (!strcmp(f->string, "role"))
                role = f;
            else if (!strcmp(f->string, "content"))
                c = f;
            else if (strcmp(f->string, "name") || !cJSON_IsString(f)) {
                srv_api_error_set(err, 400, "invalid_request_error", "messages", NULL,
                                  "unsupported field 'messages[%d].%.64s'", i, f->string);
                rc = -EINVAL;
                break;
            }
        }
        if (rc)
            break;
        if (!role || !cJSON_IsString(role) ||
            (strcmp(role->valuestring, "system") && strcmp(role->valuestring, "user") &&
             strcmp(role->valuestring, "assistant"))) {
            srv_api_error_set(err, 400, "invalid_request_error", "messages", NULL,
                              "messages[%d].role must be \"system\", \"user\" or \"assistant\"", i);
            rc = -EINVAL;
            break;
        }
        if (!c) {
            srv_api_error_set(err, 400, "invalid_request_error", "messages", NULL,
                              "messages[%d].content is required", i);
            rc = -EINVAL;
            break;
        }
        if ((rc = message_content(c, i, &content[i], err)))
            break;
        msgs[i].role = role->valuestring;
        msgs[i].content = content[i];
        need += strlen(content[i]) + 64;
        i++;
    }
    if (!rc && !tmpl) {
        srv_api_error_set(err, 400, "invalid_request_error", NULL, NULL,
                          "model has no usable chat template; start foliod with --chat-template "
                          "NAME");
        rc = -EINVAL;
    }
    size_t len = 0;
    char rerr[200] = "";
    for (int attempt = 0; !rc && attempt < 2; attempt++) {
        folio_free(text);
        if (!(text = folio_malloc(need + 1))) {
            rc = -ENOMEM;
            break;
        }
        rc = chat_render((enum chat_template)tmpl, msgs, (size_t)n, true, text, need + 1, &len,
                         rerr, sizeof(rerr));
        if (rc == -ENOSPC && attempt == 0) {
            need = len;
            rc = 0;
            continue;
        }
        if (rc == -EINVAL)
            srv_api_error_set(err, 400, "invalid_request_error", "messages", NULL,
                              "cannot render the conversation with the %s template: %s",
                              chat_template_name((enum chat_template)tmpl), rerr);
        break;
    }
    if (!rc) {
        rc = tok ? tok(tok_ctx, text, len, true, &toks, &n_toks) : -ENOSYS;
        if (rc == -ENOSYS)
            srv_api_error_set(err, 400, "invalid_request_error", "messages", NULL,
                              "this server has no tokenizer: chat needs one");
        else if (rc && rc != -ENOMEM)
            srv_api_error_set(err, 400, "invalid_request_error", "messages", NULL,
                              "cannot tokenize the rendered conversation (%s)", strerror(-rc));
        if (rc && rc != -ENOMEM)
            rc = -EINVAL;
    }
    for (int k = 0; k < n && content; k++)
        folio_free(content[k]);
    folio_free(content);
    folio_free(msgs);
    if (rc) {
        folio_free(text);
        return rc;
    }
    return srv__add_prompt(p, toks, n_toks, text, err);
}
