/*
 * daemon/api_chat.c — the `messages` of /v1/chat/completions (api.h,
 * srv_chat_parse): each message's role and content (a string, or an array
 * of {type:"text", text} parts joined) become a chat_msg array, rendered
 * with the chat template and the generation prompt, then tokenized with
 * special-token parsing: one prompt.
 *
 * Tools (the template's chat_tool_format): "developer" messages render as
 * "system"; an assistant message's tool_calls are written after its
 * content in the family's call format; "tool" messages take the family's
 * result role and wrapping; with tools offered, their definitions end the
 * first message when it is a system message, else a system message of
 * their own comes first.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "api_internal.h"
#include "folio/chat.h"
#include "folio/common.h"
#include "tools.h"

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

/* An assistant message's tool_calls written in the template's format
 * after its content: calls_open {"name": N, ARGS: A} (call_sep ...)
 * calls_close, A the arguments string parsed as JSON (kept as a string
 * when it is not JSON). */
static int tool_calls_text(const cJSON *calls, int i, const struct chat_tool_format *f,
                           struct folio_buf *out, struct srv_api_error *err)
{
    if (!cJSON_IsArray(calls))
        BAD("messages", "messages[%d].tool_calls must be an array", i);
    if (!calls->child)
        return 0;
    folio_buf_puts(out, f->calls_open);
    const cJSON *c;
    int k = 0;
    cJSON_ArrayForEach(c, calls)
    {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (!cJSON_IsString(name) || (args && !cJSON_IsString(args) && !cJSON_IsObject(args)))
            BAD("messages",
                "messages[%d].tool_calls[%d] must be {\"function\": {\"name\", \"arguments\"}}", i,
                k);
        if (k++)
            folio_buf_puts(out, f->call_sep);
        folio_buf_puts(out, "{\"name\": ");
        folio_buf_json_str(out, name->valuestring, strlen(name->valuestring));
        folio_buf_printf(out, ", \"%s\": ", f->args_key);
        cJSON *parsed = cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : NULL;
        char *a = parsed                 ? cJSON_PrintUnformatted(parsed)
                  : cJSON_IsObject(args) ? cJSON_PrintUnformatted(args)
                                         : NULL;
        if (a)
            folio_buf_puts(out, a);
        else if (cJSON_IsString(args))
            folio_buf_json_str(out, args->valuestring, strlen(args->valuestring));
        else
            folio_buf_puts(out, "{}");
        cJSON_free(a);
        cJSON_Delete(parsed);
        folio_buf_puts(out, "}");
    }
    folio_buf_puts(out, f->calls_close);
    return 0;
}

/* The tool definitions for the system message. */
static void tools_text(const struct srv_tools *t, const struct chat_tool_format *f,
                       struct folio_buf *out)
{
    folio_buf_puts(out, f->tools_intro);
    for (int i = 0; i < t->n_tools; i++) {
        if (i)
            folio_buf_puts(out, f->tools_sep);
        folio_buf_puts(out, t->tools[i].def);
    }
    folio_buf_puts(out, f->tools_outro);
}

/* messages[i]'s fields checked: a known role, content (or, for an
 * assistant, tool_calls), nothing unsupported.  0 with the role string,
 * content and tool_calls (either may be NULL), or -EINVAL with *err. */
static int message_fields(const cJSON *m, int i, const char **role_out, const cJSON **content_out,
                          const cJSON **calls_out, struct srv_api_error *err)
{
    const cJSON *f, *role = NULL, *c = NULL, *calls = NULL;
    int rc = 0;
    cJSON_ArrayForEach(f, m)
    {
        if (!strcmp(f->string, "role"))
            role = f;
        else if (!strcmp(f->string, "content"))
            c = f;
        else if (!strcmp(f->string, "tool_calls"))
            calls = f;
        else if (!strcmp(f->string, "tool_call_id") || !strcmp(f->string, "refusal"))
            continue; /* nothing in the rendered prompt */
        else if (strcmp(f->string, "name") || !cJSON_IsString(f)) {
            srv_api_error_set(err, 400, "invalid_request_error", "messages", NULL,
                              "unsupported field 'messages[%d].%.64s'", i, f->string);
            rc = -EINVAL;
            break;
        }
    }
    if (rc)
        return rc;
    static const char *const roles[] = {"system", "user", "assistant", "developer", "tool"};
    bool known = false;
    for (size_t k = 0; role && cJSON_IsString(role) && k < FOLIO_ARRAY_LEN(roles); k++)
        known |= !strcmp(role->valuestring, roles[k]);
    if (!known) {
        srv_api_error_set(err, 400, "invalid_request_error", "messages", NULL,
                          "messages[%d].role must be \"system\", \"developer\", \"user\", "
                          "\"assistant\" or \"tool\"",
                          i);
        return -EINVAL;
    }
    const char *r = role->valuestring;
    bool assistant = !strcmp(r, "assistant");
    *role_out = r;
    *content_out = c;
    *calls_out = calls;
    if (calls && !assistant) {
        srv_api_error_set(err, 400, "invalid_request_error", "messages", NULL,
                          "messages[%d].tool_calls is only for assistant messages", i);
        return -EINVAL;
    }
    if (!c && !(assistant && calls)) {
        srv_api_error_set(err, 400, "invalid_request_error", "messages", NULL,
                          "messages[%d].content is required", i);
        return -EINVAL;
    }
    return 0;
}

/* No system message to carry the tool definitions: one is put first
 * (msgs and content have a slot free at the end).  0 or -ENOMEM. */
static int tools_system_message(const struct srv_tools *tools, const struct chat_tool_format *fmt,
                                struct chat_msg *msgs, char **content, int *out_n, size_t *need)
{
    int rc = 0;
    struct folio_buf sb = {0};
    tools_text(tools, fmt, &sb);
    char *t = sb.p;
    size_t skip = 0;
    while (t && (t[skip] == '\n' || t[skip] == ' '))
        skip++;
    if (sb.oom || !t)
        rc = -ENOMEM;
    else {
        memmove(msgs + 1, msgs, (size_t)*out_n * sizeof(*msgs));
        memmove(content + 1, content, (size_t)*out_n * sizeof(*content));
        memmove(t, t + skip, sb.len - skip + 1);
        content[0] = t;
        msgs[0].role = "system";
        msgs[0].content = t;
        *need += sb.len + 64;
        (*out_n)++;
        sb.p = NULL;
    }
    folio_buf_free(&sb);
    return rc;
}

/* The conversation rendered with template tmpl into *text (NUL-ended,
 * *len bytes): a first try in need bytes, a second in what the first said
 * it takes.  0, -ENOMEM, or -EINVAL with *err (the template refused the
 * conversation). */
static int render_conversation(int tmpl, const struct chat_msg *msgs, int n, bool gen_prompt,
                               size_t need, char **text_out, size_t *len_out,
                               struct srv_api_error *err)
{
    int rc = 0;
    char *text = NULL;
    size_t len = 0;
    char rerr[200] = "";
    for (int attempt = 0; !rc && attempt < 2; attempt++) {
        folio_free(text);
        if (!(text = folio_malloc(need + 1))) {
            rc = -ENOMEM;
            break;
        }
        rc = chat_render((enum chat_template)tmpl, msgs, (size_t)n, gen_prompt, text, need + 1,
                         &len, rerr, sizeof(rerr));
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
    *text_out = text;
    *len_out = len;
    return rc;
}

/* The last occurrence of needle[0..nl) in hay[0..hl), or NULL. */
static const char *last_in(const char *hay, size_t hl, const char *needle, size_t nl)
{
    for (size_t at = hl >= nl ? hl - nl + 1 : 0; at-- > 0;)
        if (!memcmp(hay + at, needle, nl))
            return hay + at;
    return NULL;
}

/* continue_final_message: the rendered text (rendered without a
 * generation prompt) cut right after the final message's content, so
 * that whatever the template closes a turn with is gone and the model
 * continues that message.  The content is found as the template wrote
 * it: verbatim, or without its surrounding whitespace (templates that
 * trim).  0, or -EINVAL with *err. */
static int cut_after_final(char *text, size_t *len, const char *content, struct srv_api_error *err)
{
    size_t n = strlen(content), tn = n;
    const char *t = content; /* without its surrounding whitespace */
    while (tn && strchr(" \t\r\n", t[tn - 1]))
        tn--;
    while (tn && strchr(" \t\r\n", *t))
        t++, tn--;
    if (!tn)
        BAD("continue_final_message",
            "'continue_final_message' needs a final message with text to continue");
    const char *at = last_in(text, *len, content, n);
    if (!at && (at = last_in(text, *len, t, tn))) /* a template that trims */
        n = tn;
    if (!at)
        BAD("continue_final_message", "'continue_final_message': the final message does not "
                                      "appear in the conversation as the chat template renders it");
    *len = (size_t)(at - text) + n;
    text[*len] = 0;
    return 0;
}

int srv__chat_messages(const cJSON *v, int tmpl, srv_tokenize_fn tok, void *tok_ctx,
                       struct srv_comp_params *p, struct srv_api_error *err)
{
    if (p->continue_final_message && p->add_generation_prompt_set && p->add_generation_prompt)
        BAD("continue_final_message",
            "'continue_final_message' and 'add_generation_prompt' cannot both be true");
    if (!cJSON_IsArray(v))
        BAD("messages", "'messages' must be an array of {role, content} objects");
    int n = cJSON_GetArraySize(v);
    if (n == 0)
        BAD("messages", "'messages' must not be empty");
    if (n > SRV_MAX_MESSAGES)
        BAD("messages", "at most %d messages", SRV_MAX_MESSAGES);
    const struct chat_tool_format *fmt =
        chat_tool_format(tmpl > 0 ? (enum chat_template)tmpl : CHAT_TMPL_CHATML);
    if (p->tools)
        p->tools->fmt = fmt;
    bool offered = srv_tools_offered(p);
    /* one extra slot: a system message for the tool definitions */
    struct chat_msg *msgs = folio_calloc((size_t)n + 1, sizeof(*msgs));
    char **content = folio_calloc((size_t)n + 1, sizeof(*content));
    char *text = NULL;
    int32_t *toks = NULL, n_toks = 0;
    int rc = msgs && content ? 0 : -ENOMEM, i = 0, out_n = 0, n_slots = n + 1;
    const cJSON *m;
    size_t need = 64;
    bool tools_placed = false;
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
        const char *r;
        const cJSON *c, *calls;
        if ((rc = message_fields(m, i, &r, &c, &calls, err)))
            break;
        bool assistant = !strcmp(r, "assistant");
        char *body = NULL;
        if (c && !(cJSON_IsNull(c) && assistant) && (rc = message_content(c, i, &body, err)))
            break;
        struct folio_buf sb = {0};
        bool system = !strcmp(r, "system") || !strcmp(r, "developer");
        bool tool = !strcmp(r, "tool");
        if (tool)
            folio_buf_puts(&sb, fmt->result_open);
        folio_buf_puts(&sb, body ? body : "");
        if (tool)
            folio_buf_puts(&sb, fmt->result_close);
        folio_free(body);
        if (calls && (rc = tool_calls_text(calls, i, fmt, &sb, err))) {
            folio_buf_free(&sb);
            break;
        }
        if (system && offered && !tools_placed && out_n == 0) {
            tools_text(p->tools, fmt, &sb); /* definitions at the end of the first system text */
            tools_placed = true;
        }
        if (sb.oom) {
            folio_buf_free(&sb);
            rc = -ENOMEM;
            break;
        }
        if (!sb.p && !(sb.p = folio_strdup(""))) {
            rc = -ENOMEM;
            break;
        }
        content[out_n] = sb.p;
        msgs[out_n].role = system ? "system" : tool ? fmt->tool_role : r;
        msgs[out_n].content = content[out_n];
        need += sb.len + 64;
        out_n++;
        i++;
    }
    if (!rc && offered && !tools_placed) /* no system message: one holding the tools */
        rc = tools_system_message(p->tools, fmt, msgs, content, &out_n, &need);
    n = out_n;
    if (!rc && !tmpl) {
        srv_api_error_set(err, 400, "invalid_request_error", NULL, NULL,
                          "model has no usable chat template; start foliod with --chat-template "
                          "NAME");
        rc = -EINVAL;
    }
    size_t len = 0;
    /* continue_final_message: no generation prompt, whatever the default */
    bool gen_prompt = p->add_generation_prompt && !p->continue_final_message;
    if (!rc)
        rc = render_conversation(tmpl, msgs, n, gen_prompt, need, &text, &len, err);
    if (!rc && p->continue_final_message)
        rc = cut_after_final(text, &len, msgs[n - 1].content, err);
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
    if (!rc && n_toks == 0) {
        folio_free(toks);
        srv_api_error_set(err, 400, "invalid_request_error", "messages", NULL,
                          "the conversation renders to no tokens with this template (it needs a "
                          "user message)");
        rc = -EINVAL;
    }
    for (int k = 0; k < n_slots && content; k++)
        folio_free(content[k]);
    folio_free(content);
    folio_free(msgs);
    if (rc) {
        folio_free(text);
        return rc;
    }
    return srv__add_prompt(p, toks, n_toks, text, err);
}
