/*
 * daemon/render_messages.c — Anthropic's Messages API JSON (see
 * render.h: srv_render_message, srv_render_message_stream).
 *
 * Shapes:
 *   message  {"id","type":"message","role":"assistant","model",
 *            "content":[{"type":"text","text"}, {"type":"tool_use","id",
 *            "name","input"}...],"stop_reason","stop_sequence",
 *            "usage":{"input_tokens","output_tokens","cache_read_input_tokens"}}
 *   stream   event: TYPE\ndata: {"type":TYPE,...}\n\n for message_start (the
 *            message without content, stop_reason null), content_block_start,
 *            ping, content_block_delta ({"type":"text_delta","text"}) per
 *            emit, content_block_stop, then per tool call its block
 *            (content_block_start with input {}, one input_json_delta,
 *            content_block_stop), message_delta (stop_reason,
 *            stop_sequence, usage.output_tokens), message_stop.  With
 *            tools offered the text's block opens once the text is known
 *            not to be a call (the chat stream's hold, tools.h).
 * stop_reason: tool_use when the text is tool calls (tools.h parses them
 * as the chat completion's); max_tokens unless the choice stopped;
 * stop_sequence when a stop string ended it (the detokenizer says which);
 * else end_turn.
 */
#include "render.h"

#include <cjson/cJSON.h>
#include <string.h>

#include "folio/common.h"
#include "server.h"
#include "tools.h"

/* The output of a choice's text: content bytes of text, then n tool
 * calls (tools offered, and not streamed as text already). */
struct msg_out {
    const char *text;
    size_t content;
    struct srv_tool_call *calls;
    int n;
};

static void out_parse(const struct srv_comp *comp, const struct srv_choice *ch, const char *text,
                      size_t len, struct msg_out *o)
{
    *o = (struct msg_out){text ? text : "", len, NULL, 0};
    srv_tools_choice_calls(comp, ch, o->text, len, &o->calls, &o->n, &o->content);
}

/* Anthropic's stop_reason for ch, and *seq the stop sequence that ended
 * it (or NULL). */
static const char *msg_stop_reason(const struct srv_comp *comp, const struct srv_choice *ch,
                                   bool tool_use, const char **seq)
{
    *seq = NULL;
    if (tool_use)
        return "tool_use";
    if (ch->finish != ENG_FINISH_STOP)
        return "max_tokens";
    int k = ch->stopped && ch->dt ? tok_detok_stopped(ch->dt) : -1;
    if (k >= 0 && k < comp->p.n_stop) {
        *seq = comp->p.stop[k];
        return "stop_sequence";
    }
    return "end_turn";
}

static void msg_stop_fields(struct folio_buf *b, const struct srv_comp *comp,
                            const struct srv_choice *ch, bool tool_use)
{
    const char *seq;
    folio_buf_printf(
        b, "\"stop_reason\":\"%s\",\"stop_sequence\":", msg_stop_reason(comp, ch, tool_use, &seq));
    if (seq)
        folio_buf_json_str(b, seq, strlen(seq));
    else
        folio_buf_puts(b, "null");
}

static void msg_head(struct folio_buf *b, const struct srv_render *r, const struct srv_comp *comp)
{
    folio_buf_printf(
        b, "{\"id\":\"%s\",\"type\":\"message\",\"role\":\"assistant\",\"model\":", comp->id);
    folio_buf_json_str(b, r->model, strlen(r->model));
}

/* A call's input: its arguments when they are a JSON object, else {}. */
static void call_input(struct folio_buf *b, const struct srv_tool_call *c)
{
    cJSON *j = cJSON_Parse(c->arguments);
    folio_buf_puts(b, cJSON_IsObject(j) ? c->arguments : "{}");
    cJSON_Delete(j);
}

/* The id of call k: "toolu_" and the message id's tail. */
static void call_id(struct folio_buf *b, const struct srv_comp *comp, int k)
{
    const char *tail = strncmp(comp->id, "msg-", 4) ? comp->id : comp->id + 4;
    folio_buf_printf(b, "\"toolu_%s_%d\"", tail, k);
}

/* A tool_use block; input NULL: {} (a stream's start). */
static void tool_use_block(struct folio_buf *b, const struct srv_comp *comp,
                           const struct srv_tool_call *c, int k, bool with_input)
{
    folio_buf_puts(b, "{\"type\":\"tool_use\",\"id\":");
    call_id(b, comp, k);
    folio_buf_puts(b, ",\"name\":");
    folio_buf_json_str(b, c->name, strlen(c->name));
    folio_buf_puts(b, ",\"input\":");
    if (with_input)
        call_input(b, c);
    else
        folio_buf_puts(b, "{}");
    folio_buf_puts(b, "}");
}

void srv_render_message(struct folio_buf *b, const struct srv_render *r,
                        const struct srv_comp *comp)
{
    const struct srv_choice *ch = &comp->ch[0];
    struct msg_out o;
    out_parse(comp, ch, ch->text.p, ch->text.len, &o);
    msg_head(b, r, comp);
    folio_buf_puts(b, ",\"content\":[");
    bool text = o.content || !o.n;
    if (text) {
        folio_buf_puts(b, "{\"type\":\"text\",\"text\":");
        folio_buf_json_str(b, o.text, o.content);
        folio_buf_puts(b, "}");
    }
    for (int k = 0; k < o.n; k++) {
        if (text || k)
            folio_buf_puts(b, ",");
        tool_use_block(b, comp, &o.calls[k], k, true);
    }
    folio_buf_puts(b, "],");
    msg_stop_fields(b, comp, ch, o.n > 0);
    folio_buf_printf(b,
                     ",\"usage\":{\"input_tokens\":%lld,\"output_tokens\":%lld,"
                     "\"cache_read_input_tokens\":%lld}}\n",
                     (long long)comp->prompt_tokens, (long long)ch->n_tokens,
                     (long long)comp->cached_tokens);
    srv_tool_calls_free(o.calls, o.n);
}

/* One server-sent event: "event: TYPE" and its data line (the JSON that
 * follows, closed by the caller with msg_event_end). */
static void msg_event(struct folio_buf *b, const char *type)
{
    folio_buf_printf(b, "event: %s\ndata: {\"type\":\"%s\"", type, type);
}

static void msg_event_end(struct folio_buf *b)
{
    folio_buf_puts(b, "}\n\n");
}

static void block_start_text(struct folio_buf *b, struct srv_resp_stream *st)
{
    msg_event(b, "content_block_start");
    folio_buf_puts(b, ",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}");
    msg_event_end(b);
    st->item_open = true;
}

static void block_stop(struct folio_buf *b, int index)
{
    msg_event(b, "content_block_stop");
    folio_buf_printf(b, ",\"index\":%d", index);
    msg_event_end(b);
}

static void text_delta(struct folio_buf *b, const char *t, size_t n)
{
    msg_event(b, "content_block_delta");
    folio_buf_puts(b, ",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":");
    folio_buf_json_str(b, t, n);
    folio_buf_puts(b, "}");
    msg_event_end(b);
}

void srv_render_message_stream_error(struct folio_buf *b, const char *message)
{
    folio_buf_puts(b, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\","
                      "\"message\":");
    folio_buf_json_str(b, message, strlen(message));
    folio_buf_puts(b, "}}\n\n");
}

void srv_render_message_stream(struct folio_buf *b, const struct srv_render *r,
                               const struct srv_comp *comp, const struct srv_choice *ch,
                               size_t send, bool first, bool final, int hold,
                               struct srv_resp_stream *st)
{
    if (first) {
        msg_event(b, "message_start");
        folio_buf_puts(b, ",\"message\":");
        msg_head(b, r, comp);
        folio_buf_printf(b,
                         ",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,"
                         "\"usage\":{\"input_tokens\":%lld,\"output_tokens\":0,"
                         "\"cache_read_input_tokens\":%lld}}",
                         (long long)comp->prompt_tokens, (long long)comp->cached_tokens);
        msg_event_end(b);
        if (!hold) /* text for sure: its block opens at once */
            block_start_text(b, st);
        msg_event(b, "ping");
        msg_event_end(b);
    }
    if (hold == 1)
        return;
    if (send && hold == 0) {
        if (!st->item_open)
            block_start_text(b, st);
        text_delta(b, ch->text.p, send);
    }
    if (!final)
        return;
    struct msg_out o = {ch->text.p ? ch->text.p : "", 0, NULL, 0};
    if (hold == 2) /* held to the end: the whole text, parsed for calls */
        out_parse(comp, ch, ch->text.p, ch->text.len, &o);
    if (!st->item_open && (o.content || !o.n))
        block_start_text(b, st);
    if (o.content)
        text_delta(b, o.text, o.content);
    if (st->item_open)
        block_stop(b, 0);
    int at = st->item_open ? 1 : 0;
    for (int k = 0; k < o.n; k++) {
        msg_event(b, "content_block_start");
        folio_buf_printf(b, ",\"index\":%d,\"content_block\":", at + k);
        tool_use_block(b, comp, &o.calls[k], k, false);
        msg_event_end(b);
        msg_event(b, "content_block_delta");
        folio_buf_printf(
            b, ",\"index\":%d,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":", at + k);
        struct folio_buf in = {0};
        call_input(&in, &o.calls[k]);
        folio_buf_json_str(b, in.p ? in.p : "{}", in.p ? in.len : 2);
        folio_buf_free(&in);
        folio_buf_puts(b, "}");
        msg_event_end(b);
        block_stop(b, at + k);
    }
    msg_event(b, "message_delta");
    folio_buf_puts(b, ",\"delta\":{");
    msg_stop_fields(b, comp, ch, o.n > 0);
    folio_buf_printf(b, "},\"usage\":{\"output_tokens\":%lld}", (long long)ch->n_tokens);
    msg_event_end(b);
    msg_event(b, "message_stop");
    msg_event_end(b);
    srv_tool_calls_free(o.calls, o.n);
}
