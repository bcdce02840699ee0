/*
 * daemon/render_responses.c — OpenAI's Responses API JSON (see render.h:
 * srv_render_responses, srv_render_responses_stream, srv_render_responses_conv).
 *
 * Shapes:
 *   response  {"id":"resp_X","object":"response","created_at","status"
 *             (completed, incomplete, in_progress; a background one's also
 *             queued, cancelled, failed),"background","error" (null, or
 *             {"code","message"} when failed),"incomplete_details" (null or {"reason":
 *             "max_output_tokens"}),"model","output":[ITEM...], the
 *             request's settings (srv_resp_params.echo),"usage":{
 *             "input_tokens","input_tokens_details":{"cached_tokens"},
 *             "output_tokens","output_tokens_details":{"reasoning_tokens"},
 *             "total_tokens"}}
 *   ITEM      {"id":"msg_X","type":"message","status","role":"assistant",
 *             "content":[{"type":"output_text","text","annotations":[],
 *             "logprobs":[...] (the chat's logprobs content, when asked
 *             for)}]}, then per tool call {"id":"fc_X_K","type":
 *             "function_call","status":"completed","call_id":"call_...",
 *             "name","arguments"}; the message only when there is text
 *             before the calls, or no call
 *   stream    event: TYPE\ndata: {"type":TYPE,"sequence_number":N,...}\n\n:
 *             response.created and response.in_progress (the response
 *             in_progress, no output), then for the message
 *             response.output_item.added, response.content_part.added,
 *             response.output_text.delta per emit, response.output_text.done,
 *             response.content_part.done, response.output_item.done; per
 *             tool call response.output_item.added,
 *             response.function_call_arguments.delta and .done,
 *             response.output_item.done; last response.completed (or
 *             response.incomplete) with the whole response.
 * Tool calls are parsed from the whole text as the chat completion's are
 * (tools.h), unless the stream already sent the text as text (tool_mode 1).
 */
#include "render.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <string.h>

#include "folio/common.h"
#include "server.h"
#include "tools.h"

/* The output of a choice's text: content bytes of message text, then n
 * tool calls. */
struct resp_out {
    const char *text;
    size_t len, content;
    struct srv_tool_call *calls;
    int n;
};

static void out_parse(const struct srv_comp *comp, const struct srv_choice *ch, const char *text,
                      size_t len, struct resp_out *o)
{
    *o = (struct resp_out){text ? text : "", len, len, NULL, 0};
    srv_tools_choice_calls(comp, ch, o->text, len, &o->calls, &o->n, &o->content);
}

/* The id's part after "resp_": the message's and the calls' ids share it. */
static const char *id_tail(const struct srv_comp *comp)
{
    return strncmp(comp->id, "resp_", 5) ? comp->id : comp->id + 5;
}

static bool cut_short(const struct srv_choice *ch)
{
    return ch->finish == ENG_FINISH_LENGTH || ch->finish == ENG_FINISH_ABORT ||
           ch->finish == ENG_FINISH_ERROR;
}

/* An output_text part; ch: with its tokens' logprobs (when asked for),
 * else none yet. */
static void text_part(struct folio_buf *b, const struct srv_render *r, const struct srv_choice *ch,
                      const char *text, size_t len)
{
    folio_buf_puts(b, "{\"type\":\"output_text\",\"text\":");
    folio_buf_json_str(b, text, len);
    folio_buf_puts(b, ",\"annotations\":[],\"logprobs\":");
    if (ch)
        srv_render_token_logprobs(b, r, ch, 0, ch->n_tokens);
    else
        folio_buf_puts(b, "[]");
    folio_buf_puts(b, "}");
}

/* The message item; text NULL: in progress, no content yet. */
static void message_item(struct folio_buf *b, const struct srv_render *r,
                         const struct srv_comp *comp, const struct srv_choice *ch, const char *text,
                         size_t len)
{
    folio_buf_printf(b,
                     "{\"id\":\"msg_%s\",\"type\":\"message\",\"status\":\"%s\",\"role\":"
                     "\"assistant\",\"content\":[",
                     id_tail(comp),
                     !text           ? "in_progress"
                     : cut_short(ch) ? "incomplete"
                                     : "completed");
    if (text)
        text_part(b, r, ch, text, len);
    folio_buf_puts(b, "]}");
}

/* Call k's item; args NULL: in progress, its arguments still to come. */
static void call_item(struct folio_buf *b, const struct srv_comp *comp,
                      const struct srv_tool_call *c, int k, bool done)
{
    folio_buf_printf(b,
                     "{\"id\":\"fc_%s_%d\",\"type\":\"function_call\",\"status\":\"%s\","
                     "\"call_id\":\"call_%s_0_%d\",\"name\":",
                     id_tail(comp), k, done ? "completed" : "in_progress", comp->id, k);
    folio_buf_json_str(b, c->name, strlen(c->name));
    folio_buf_puts(b, ",\"arguments\":");
    if (done)
        folio_buf_json_str(b, c->arguments, strlen(c->arguments));
    else
        folio_buf_puts(b, "\"\"");
    folio_buf_puts(b, "}");
}

static void output_json(struct folio_buf *b, const struct srv_render *r,
                        const struct srv_comp *comp, const struct srv_choice *ch,
                        const struct resp_out *o)
{
    folio_buf_puts(b, "[");
    bool msg = o->content || !o->n;
    if (msg)
        message_item(b, r, comp, ch, o->text, o->content);
    for (int k = 0; k < o->n; k++) {
        if (msg || k)
            folio_buf_puts(b, ",");
        call_item(b, comp, &o->calls[k], k, true);
    }
    folio_buf_puts(b, "]");
}

/* The response object; o NULL: in progress (no output, no usage).  A
 * background response's status is comp->rstatus where set (queued,
 * cancelled, failed). */
static void object(struct folio_buf *b, const struct srv_render *r, const struct srv_comp *comp,
                   const struct srv_choice *ch, const struct resp_out *o)
{
    const char *st = comp->rstatus;
    bool inc = !st && o && cut_short(ch), failed = st && !strcmp(st, "failed");
    folio_buf_printf(b,
                     "{\"id\":\"%s\",\"object\":\"response\",\"created_at\":%lld,\"status\":\"%s\","
                     "\"background\":%s,\"error\":%s,\"incomplete_details\":%s,\"model\":",
                     comp->id, (long long)comp->created,
                     st    ? st
                     : !o  ? "in_progress"
                     : inc ? "incomplete"
                           : "completed",
                     comp->p.resp && comp->p.resp->background ? "true" : "false",
                     failed ? "{\"code\":\"server_error\",\"message\":\"the engine failed\"}"
                            : "null",
                     inc ? "{\"reason\":\"max_output_tokens\"}" : "null");
    folio_buf_json_str(b, r->model, strlen(r->model));
    folio_buf_puts(b, ",\"output\":");
    if (o)
        output_json(b, r, comp, ch, o);
    else
        folio_buf_puts(b, "[]");
    const char *echo = comp->p.resp && comp->p.resp->echo ? comp->p.resp->echo : "";
    folio_buf_printf(b, "%s%s,\"usage\":", *echo ? "," : "", echo);
    if (!o) {
        folio_buf_puts(b, "null}");
        return;
    }
    long long in = comp->prompt_tokens, out = ch->n_tokens;
    folio_buf_printf(b,
                     "{\"input_tokens\":%lld,\"input_tokens_details\":{\"cached_tokens\":%lld},"
                     "\"output_tokens\":%lld,\"output_tokens_details\":{\"reasoning_tokens\":0},"
                     "\"total_tokens\":%lld}}",
                     in, (long long)comp->cached_tokens, out, in + out);
}

void srv_render_responses(struct folio_buf *b, const struct srv_render *r,
                          const struct srv_comp *comp, const char *text, size_t len)
{
    const struct srv_choice *ch = &comp->ch[0];
    struct resp_out o;
    out_parse(comp, ch, text, len, &o);
    object(b, r, comp, ch, &o);
    srv_tool_calls_free(o.calls, o.n);
}

void srv_render_responses_pending(struct folio_buf *b, const struct srv_render *r,
                                  const struct srv_comp *comp)
{
    object(b, r, comp, &comp->ch[0], NULL);
}

void srv_render_responses_conv(struct folio_buf *b, const struct srv_comp *comp, const char *text,
                               size_t len)
{
    const struct srv_choice *ch = &comp->ch[0];
    const char *conv = comp->p.resp && comp->p.resp->conv ? comp->p.resp->conv : "[]";
    size_t n = strlen(conv);
    while (n && conv[n - 1] != ']')
        n--;
    folio_buf_append(b, conv, n ? n - 1 : 0);
    if (n > 2)
        folio_buf_puts(b, ",");
    struct resp_out o;
    out_parse(comp, ch, text, len, &o);
    folio_buf_puts(b, "{\"role\":\"assistant\",\"content\":");
    if (o.content || !o.n)
        folio_buf_json_str(b, o.text, o.content);
    else
        folio_buf_puts(b, "null");
    if (o.n) {
        folio_buf_puts(b, ",\"tool_calls\":[");
        for (int k = 0; k < o.n; k++) {
            folio_buf_printf(b,
                             "%s{\"id\":\"call_%s_0_%d\",\"type\":\"function\",\"function\":"
                             "{\"name\":",
                             k ? "," : "", comp->id, k);
            folio_buf_json_str(b, o.calls[k].name, strlen(o.calls[k].name));
            folio_buf_puts(b, ",\"arguments\":");
            folio_buf_json_str(b, o.calls[k].arguments, strlen(o.calls[k].arguments));
            folio_buf_puts(b, "}}");
        }
        folio_buf_puts(b, "]");
    }
    folio_buf_puts(b, "}]");
    srv_tool_calls_free(o.calls, o.n);
}

/* Opens one event: "event: TYPE" and the start of its data (closed with
 * event_end). */
static void event(struct folio_buf *b, struct srv_resp_stream *st, const char *type)
{
    folio_buf_printf(b, "event: %s\ndata: {\"type\":\"%s\",\"sequence_number\":%lld", type, type,
                     (long long)st->seq++);
}

static void event_end(struct folio_buf *b)
{
    folio_buf_puts(b, "}\n\n");
}

static void msg_ids(struct folio_buf *b, const struct srv_comp *comp)
{
    folio_buf_printf(b, ",\"item_id\":\"msg_%s\",\"output_index\":0,\"content_index\":0",
                     id_tail(comp));
}

void srv_render_responses_stream_head(struct folio_buf *b, const struct srv_render *r,
                                      const struct srv_comp *comp, struct srv_resp_stream *st)
{
    static const char *const types[] = {"response.created", "response.in_progress"};
    for (int i = 0; i < 2; i++) {
        event(b, st, types[i]);
        folio_buf_puts(b, ",\"response\":");
        object(b, r, comp, &comp->ch[0], NULL);
        event_end(b);
    }
}

/* The message item opened: output_item.added and content_part.added. */
static void open_message(struct folio_buf *b, const struct srv_render *r,
                         const struct srv_comp *comp, const struct srv_choice *ch,
                         struct srv_resp_stream *st)
{
    event(b, st, "response.output_item.added");
    folio_buf_puts(b, ",\"output_index\":0,\"item\":");
    message_item(b, r, comp, ch, NULL, 0);
    event_end(b);
    event(b, st, "response.content_part.added");
    msg_ids(b, comp);
    folio_buf_puts(b, ",\"part\":");
    text_part(b, r, NULL, "", 0);
    event_end(b);
    st->item_open = true;
}

/* A delta of t, with the logprobs of the tokens not yet sent. */
static void text_delta(struct folio_buf *b, const struct srv_render *r, const struct srv_comp *comp,
                       const struct srv_choice *ch, const char *t, size_t n,
                       struct srv_resp_stream *st)
{
    event(b, st, "response.output_text.delta");
    msg_ids(b, comp);
    folio_buf_puts(b, ",\"delta\":");
    folio_buf_json_str(b, t, n);
    folio_buf_puts(b, ",\"logprobs\":");
    srv_render_token_logprobs(b, r, ch, ch->sent_tokens, ch->n_tokens);
    event_end(b);
}

void srv_render_responses_stream(struct folio_buf *b, const struct srv_render *r,
                                 const struct srv_comp *comp, const struct srv_choice *ch,
                                 const char *all, size_t all_len, size_t send, bool final,
                                 struct srv_resp_stream *st)
{
    if (send) {
        if (!st->item_open)
            open_message(b, r, comp, ch, st);
        text_delta(b, r, comp, ch, all + all_len - send, send, st);
    }
    if (!final)
        return;
    struct resp_out o;
    out_parse(comp, ch, all, all_len, &o);
    if (!st->item_open && (o.content || !o.n)) {
        open_message(b, r, comp, ch, st);
        if (o.content)
            text_delta(b, r, comp, ch, o.text, o.content, st);
    }
    if (st->item_open) {
        event(b, st, "response.output_text.done");
        msg_ids(b, comp);
        folio_buf_puts(b, ",\"text\":");
        folio_buf_json_str(b, o.text, o.content);
        folio_buf_puts(b, ",\"logprobs\":");
        srv_render_token_logprobs(b, r, ch, 0, ch->n_tokens);
        event_end(b);
        event(b, st, "response.content_part.done");
        msg_ids(b, comp);
        folio_buf_puts(b, ",\"part\":");
        text_part(b, r, ch, o.text, o.content);
        event_end(b);
        event(b, st, "response.output_item.done");
        folio_buf_puts(b, ",\"output_index\":0,\"item\":");
        message_item(b, r, comp, ch, o.text, o.content);
        event_end(b);
    }
    for (int k = 0; k < o.n; k++) {
        int idx = k + (st->item_open ? 1 : 0);
        const struct srv_tool_call *c = &o.calls[k];
        event(b, st, "response.output_item.added");
        folio_buf_printf(b, ",\"output_index\":%d,\"item\":", idx);
        call_item(b, comp, c, k, false);
        event_end(b);
        event(b, st, "response.function_call_arguments.delta");
        folio_buf_printf(
            b, ",\"item_id\":\"fc_%s_%d\",\"output_index\":%d,\"delta\":", id_tail(comp), k, idx);
        folio_buf_json_str(b, c->arguments, strlen(c->arguments));
        event_end(b);
        event(b, st, "response.function_call_arguments.done");
        folio_buf_printf(
            b, ",\"item_id\":\"fc_%s_%d\",\"output_index\":%d,\"name\":", id_tail(comp), k, idx);
        folio_buf_json_str(b, c->name, strlen(c->name));
        folio_buf_puts(b, ",\"arguments\":");
        folio_buf_json_str(b, c->arguments, strlen(c->arguments));
        event_end(b);
        event(b, st, "response.output_item.done");
        folio_buf_printf(b, ",\"output_index\":%d,\"item\":", idx);
        call_item(b, comp, c, k, true);
        event_end(b);
    }
    event(b, st, cut_short(ch) ? "response.incomplete" : "response.completed");
    folio_buf_puts(b, ",\"response\":");
    object(b, r, comp, ch, &o);
    event_end(b);
    srv_tool_calls_free(o.calls, o.n);
}

void srv_render_responses_stream_failed(struct folio_buf *b, const struct srv_render *r,
                                        const struct srv_comp *comp, struct srv_resp_stream *st)
{
    event(b, st, "response.failed");
    folio_buf_puts(b, ",\"response\":");
    object(b, r, comp, &comp->ch[0], NULL);
    event_end(b);
}

int srv_render_input_items(struct folio_buf *b, const char *resp_id, const char *input, int limit,
                           bool desc, const char *after)
{
    cJSON *items = cJSON_Parse(input);
    int n = cJSON_GetArraySize(items);
    const char *tail = strncmp(resp_id, "resp_", 5) ? resp_id : resp_id + 5;
    char(*ids)[80] = n > 0 ? folio_calloc((size_t)n, sizeof(*ids)) : NULL;
    if (!cJSON_IsArray(items) || (n > 0 && !ids)) {
        cJSON_Delete(items);
        folio_free(ids);
        return -ENOMEM;
    }
    int k = 0, first = -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, items)
    {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(it, "type");
        const char *type = cJSON_IsString(t) ? t->valuestring : "";
        snprintf(ids[k], sizeof(ids[k]), "%s_%s_in%d",
                 !strcmp(type, "function_call")          ? "fc"
                 : !strcmp(type, "function_call_output") ? "fco"
                                                         : "msg",
                 tail, k);
        k++;
    }
    /* the listing's order: position i is item desc ? n-1-i : i */
    int start = 0;
    if (after) {
        start = -1;
        for (int i = 0; i < n && start < 0; i++)
            if (!strcmp(ids[desc ? n - 1 - i : i], after))
                start = i + 1;
        if (start < 0) {
            cJSON_Delete(items);
            folio_free(ids);
            return -EINVAL;
        }
    }
    int end = start + limit < n ? start + limit : n;
    folio_buf_puts(b, "{\"object\":\"list\",\"data\":[");
    for (int i = start; i < end; i++) {
        int j = desc ? n - 1 - i : i;
        cJSON *o = cJSON_Duplicate(cJSON_GetArrayItem(items, j), true);
        char *txt = NULL;
        if (o && cJSON_AddStringToObject(o, "id", ids[j]))
            txt = cJSON_PrintUnformatted(o);
        if (!txt)
            b->oom = true;
        else
            folio_buf_printf(b, "%s%s", i > start ? "," : "", txt);
        cJSON_free(txt);
        cJSON_Delete(o);
        first = first < 0 ? j : first;
    }
    folio_buf_puts(b, "],\"first_id\":");
    if (first >= 0) {
        folio_buf_printf(b, "\"%s\",\"last_id\":\"%s\"", ids[first], ids[desc ? n - end : end - 1]);
    } else
        folio_buf_puts(b, "null,\"last_id\":null");
    folio_buf_printf(b, ",\"has_more\":%s}\n", end < n ? "true" : "false");
    cJSON_Delete(items);
    folio_free(ids);
    return 0;
}
