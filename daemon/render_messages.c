/*
 * daemon/render_messages.c — Anthropic's Messages API JSON (see
 * render.h: srv_render_message, srv_render_message_stream).
 *
 * Shapes:
 *   message  {"id","type":"message","role":"assistant","model",
 *            "content":[{"type":"text","text"}],"stop_reason","stop_sequence",
 *            "usage":{"input_tokens","output_tokens","cache_read_input_tokens"}}
 *   stream   event: TYPE\ndata: {"type":TYPE,...}\n\n for message_start (the
 *            message without content, stop_reason null), content_block_start,
 *            ping, content_block_delta ({"type":"text_delta","text"}) per
 *            emit, content_block_stop, message_delta (stop_reason,
 *            stop_sequence, usage.output_tokens), message_stop.
 * stop_reason: max_tokens unless the choice stopped; stop_sequence when a
 * stop string ended it (the detokenizer says which); else end_turn.
 */
#include "render.h"

#include <string.h>

#include "folio/common.h"
#include "server.h"

/* Anthropic's stop_reason for ch, and *seq the stop sequence that ended
 * it (or NULL). */
static const char *msg_stop_reason(const struct srv_comp *comp, const struct srv_choice *ch,
                                   const char **seq)
{
    *seq = NULL;
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
                            const struct srv_choice *ch)
{
    const char *seq;
    folio_buf_printf(b,
                     "\"stop_reason\":\"%s\",\"stop_sequence\":", msg_stop_reason(comp, ch, &seq));
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

void srv_render_message(struct folio_buf *b, const struct srv_render *r,
                        const struct srv_comp *comp)
{
    const struct srv_choice *ch = &comp->ch[0];
    msg_head(b, r, comp);
    folio_buf_puts(b, ",\"content\":[{\"type\":\"text\",\"text\":");
    folio_buf_json_str(b, ch->text.p ? ch->text.p : "", ch->text.len);
    folio_buf_puts(b, "}],");
    msg_stop_fields(b, comp, ch);
    folio_buf_printf(b,
                     ",\"usage\":{\"input_tokens\":%lld,\"output_tokens\":%lld,"
                     "\"cache_read_input_tokens\":%lld}}\n",
                     (long long)comp->prompt_tokens, (long long)ch->n_tokens,
                     (long long)comp->cached_tokens);
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

void srv_render_message_stream(struct folio_buf *b, const struct srv_render *r,
                               const struct srv_comp *comp, const struct srv_choice *ch,
                               size_t send, bool first, bool final)
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
        msg_event(b, "content_block_start");
        folio_buf_puts(b, ",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}");
        msg_event_end(b);
        msg_event(b, "ping");
        msg_event_end(b);
    }
    if (send) {
        msg_event(b, "content_block_delta");
        folio_buf_puts(b, ",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":");
        folio_buf_json_str(b, ch->text.p, send);
        folio_buf_puts(b, "}");
        msg_event_end(b);
    }
    if (final) {
        msg_event(b, "content_block_stop");
        folio_buf_puts(b, ",\"index\":0");
        msg_event_end(b);
        msg_event(b, "message_delta");
        folio_buf_puts(b, ",\"delta\":{");
        msg_stop_fields(b, comp, ch);
        folio_buf_printf(b, "},\"usage\":{\"output_tokens\":%lld}", (long long)ch->n_tokens);
        msg_event_end(b);
        msg_event(b, "message_stop");
        msg_event_end(b);
    }
}
