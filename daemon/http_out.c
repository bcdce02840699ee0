/*
 * daemon/http_out.c — the write side of a connection: its output queue,
 * bounded writes, back-pressure, complete responses, SSE streams and early
 * ends.  Shares struct http_conn with the rest of the layer
 * (http_internal.h); the clocks that judge a slow reader are in
 * http_clock.c.
 *
 * Output: every response goes through the connection's output queue, a
 * list of owned segments (headers, a body, one SSE chunk each):
 *
 *     oq_head -> [seg: off/len] -> [seg] -> ... -> oq_tail
 *                 ^ bytes before off were handed to libuv
 *
 * At most one uv_write is in flight, of at most OUT_CHUNK bytes gathered
 * from the front of the queue; its callback frees the segments it
 * finished and writes the next chunk.  So no response is ever one write,
 * libuv's own queue never holds more than OUT_CHUNK, and a fast reader
 * receives any size of response.  Back-pressure policy:
 *   - a complete response (http_respond) is rendered before it is queued;
 *     its size does not depend on the reader, so it is not counted
 *     against --max-pending-output;
 *   - stream chunks are: a client that leaves more than
 *     --max-pending-output bytes of them unsent and takes none of them
 *     for OVER_CAP_MS is a slow reader (a burst of large events that a
 *     reader is taking in is not; one that stops reading is).  "Takes
 *     none" is judged when the clock fires by the socket itself: if the
 *     kernel has room again, the client has been reading while the loop
 *     was busy (rendering a large burst), and the clock starts again.  It is
 *     logged and counted, its request is abandoned (pages freed at the
 *     next step commit), the unsent chunks are discarded and replaced by
 *     a final error event, and the connection closes once that is out (or
 *     after the linger below);
 *   - a connection whose queued output makes no progress for the write
 *     clock (--idle-timeout-ms, 60 s when that is 0; judged the same way)
 *     is a slow reader too and is closed.
 * Memory per connection is bounded by its request's answer (rendered, or
 * streamed to a reader that keeps reading), or else by the cap and what
 * the request generates in OVER_CAP_MS.  (The clocks that judge a slow
 * reader run in http_clock.c; "the linger" is FAIL_LINGER_MS.)
 *
 * Early ends (http_conn_fail): a request cut short (drain timeout, slow
 * reader, engine error) ends with something the client can read: before
 * the headers an error response, in a stream a final
 * `data: {"error":...}` event and the end of the body.
 *
 * The end of a connection (close_after_write): once its last answer is
 * written it closes, except one that lingers after an error answered
 * mid-request (http_admit.c): that one only shuts its write side then,
 * and keeps dropping its input until the client closes.
 *
 * Invariants: out_queued is the sum of (len - acknowledged bytes) over
 * the queue; out_capped the sum of unsent bytes of capped segments; a
 * segment is freed only by the write callback that finished it, or by
 * oq_drop_unsent when no byte of it was handed to libuv.
 *
 * Threading: loop thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"
#include "http_internal.h"
#include "log.h"

static void pump(struct http_conn *c);

const char *http_status_text(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 413:
        return "Payload Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 417:
        return "Expectation Failed";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    }
    return "Unknown";
}

void http__oq_free(struct http_conn *c)
{
    for (struct oseg *s = c->oq_head, *n; s; s = n) {
        n = s->next;
        folio_free(s);
    }
    c->oq_head = c->oq_tail = NULL;
    c->out_queued = c->out_capped = 0;
}

/* Ends a connection whose last answer is out: closes it, or, while it
 * lingers (http_admit.c), shuts its write side; one whose client ended
 * its input while the answer was being written closes. */
void http__maybe_close_after_write(struct http_conn *c)
{
    if (!c->close_after_write || c->out_queued || c->active)
        return;
    if (c->refused && !c->peer_eof)
        http__linger_shut(c);
    else
        http_close(c, "response sent, connection: close");
}

static void on_written(uv_write_t *req, int status)
{
    struct http_conn *c = req->data;
    c->writing = false;
    if (c->closing)
        return; /* the queue is freed with the connection */
    if (status < 0) {
        c->hs->st.disconnects_total += c->active ? 1 : 0;
        http_close(c, uv_strerror(status));
        return;
    }
    /* every byte handed so far is written: free the segments it finished */
    c->out_queued -= c->wr_len;
    while (c->oq_head && c->oq_head->off == c->oq_head->len) {
        struct oseg *s = c->oq_head;
        c->oq_head = s->next;
        folio_free(s);
    }
    if (!c->oq_head)
        c->oq_tail = NULL;
    pump(c);
    if (c->closing)
        return;
    if (!c->out_queued) {
        http__maybe_close_after_write(c);
        if (c->closing)
            return;
        if (c->peer_eof && !c->active && !c->in_len) {
            http_close(c, "peer closed, answers sent");
            return;
        }
    }
    if (!c->out_queued && !c->active)
        http__idle_arm(c); /* the idle clock runs from the end of the response */
    else
        http__clock_update(c); /* progress: the write clock starts again */
    if (!c->active && c->in_len && c->out_queued < OUT_PARSE_LIMIT)
        http__process(c);
}

/* Hands the next chunk of the queue to libuv (one write in flight). */
static void pump(struct http_conn *c)
{
    if (c->writing || c->closing)
        return;
    uv_buf_t bufs[OUT_IOV];
    unsigned n = 0;
    size_t total = 0;
    for (struct oseg *s = c->oq_head; s && n < OUT_IOV && total < OUT_CHUNK; s = s->next) {
        if (s->off == s->len)
            continue;
        size_t take = FOLIO_MIN(s->len - s->off, (size_t)OUT_CHUNK - total);
        bufs[n++] = uv_buf_init(s->data + s->off, (unsigned)take);
        s->off += take;
        if (s->capped)
            c->out_capped -= take;
        total += take;
    }
    if (!n)
        return;
    if (c->out_capped <= (size_t)c->hs->lim.max_pending_output)
        c->over_cap = false;
    c->wr.data = c;
    c->wr_len = total;
    int rc = uv_write(&c->wr, &c->u.s, bufs, n, on_written);
    if (rc) {
        http_close(c, uv_strerror(rc));
        return;
    }
    c->writing = true;
}

/* Queues a copy of the byte runs (a, an) + (b, bn) + the string tail (or
 * NULL) as one segment.  -EPIPE when the connection is closing or failed. */
int http__oq_push(struct http_conn *c, const char *a, size_t an, const char *b, size_t bn,
                  const char *tail, bool capped)
{
    if (c->closing || c->failed)
        return -EPIPE;
    size_t tn = tail ? strlen(tail) : 0;
    if (!an && !bn && !tn)
        return 0;
    struct oseg *s = folio_malloc(sizeof(*s) + an + bn + tn);
    if (!s) {
        http_close(c, "out of memory");
        return -EPIPE;
    }
    s->next = NULL;
    s->len = an + bn + tn;
    s->off = 0;
    s->capped = capped;
    if (an)
        memcpy(s->data, a, an);
    if (bn)
        memcpy(s->data + an, b, bn);
    if (tn)
        memcpy(s->data + an + bn, tail, tn);
    if (c->oq_tail)
        c->oq_tail->next = s;
    else
        c->oq_head = s;
    c->oq_tail = s;
    bool was_empty = !c->out_queued;
    c->out_queued += s->len;
    if (capped)
        c->out_capped += s->len;
    pump(c);
    if (c->closing)
        return -EPIPE;
    if (was_empty)
        http__clock_update(c); /* the write clock starts */
    return 0;
}

static void count_status(struct http_server *hs, int status)
{
    int cls = status / 100;
    if (cls >= 1 && cls <= 5)
        hs->st.responses[cls]++;
}

void http_respond(struct http_conn *c, int status, const char *ctype, const char *body, size_t len,
                  const char *extra)
{
    struct folio_buf h = {0};
    if (!c->keep_alive || c->hs->draining || (c->peer_eof && !c->in_len))
        c->close_after_write = true; /* (after a half-close: the last request's answer) */
    folio_buf_printf(&h,
                     "HTTP/1.1 %d %s\r\nServer: foliod\r\nX-Folio-Replica: %s\r\n"
                     "Content-Type: %s\r\nContent-Length: %zu\r\n%s%s\r\n",
                     status, http_status_text(status), c->hs->replica, ctype, len,
                     c->close_after_write ? "Connection: close\r\n" : "", extra ? extra : "");
    count_status(c->hs, status);
    c->status = status;
    if (h.oom) {
        folio_buf_free(&h);
        http_close(c, "out of memory");
        return;
    }
    http__oq_push(c, h.p, h.len, body, len, NULL, false);
    folio_buf_free(&h);
    http__maybe_close_after_write(c);
}

void http_error(struct http_conn *c, const struct srv_api_error *e, const char *extra)
{
    struct folio_buf b = {0};
    if (c->anthropic)
        srv_api_error_json_anthropic(&b, e);
    else
        srv_api_error_json(&b, e);
    folio_buf_puts(&b, "\n");
    srv_log(SRV_LOG_DEBUG, "conn %llu: %d %s", (unsigned long long)c->id, e->status, e->message);
    http_respond(c, e->status, "application/json", b.p ? b.p : "", b.len, extra);
    folio_buf_free(&b);
}

void http_conn_anthropic(struct http_conn *c)
{
    c->anthropic = true;
}

int http_stream_begin(struct http_conn *c)
{
    if (c->hs->draining || !c->keep_alive || (c->peer_eof && !c->in_len))
        c->close_after_write = true;
    /* HTTP/1.0 has no chunked encoding: the body ends when the connection does */
    c->chunked = !(c->parser.http_major == 1 && c->parser.http_minor == 0);
    if (!c->chunked)
        c->close_after_write = true;
    c->streaming = true;
    struct folio_buf h = {0};
    folio_buf_printf(&h,
                     "HTTP/1.1 200 OK\r\nServer: foliod\r\nX-Folio-Replica: %s\r\n"
                     "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n%s%s\r\n",
                     c->hs->replica, c->chunked ? "Transfer-Encoding: chunked\r\n" : "",
                     c->close_after_write ? "Connection: close\r\n" : "");
    count_status(c->hs, 200);
    c->status = 200;
    if (h.oom) {
        folio_buf_free(&h);
        return -ENOMEM;
    }
    int rc = http__oq_push(c, h.p, h.len, NULL, 0, NULL, false);
    folio_buf_free(&h);
    return rc;
}

/* Drops the stream chunks no byte of which was handed to libuv (the
 * stream stays well-formed: a chunk is one segment). */
static void oq_drop_unsent(struct http_conn *c)
{
    struct oseg **pp = &c->oq_head, *last = NULL;
    while (*pp) {
        struct oseg *s = *pp;
        if (s->off == 0 && s->capped) {
            *pp = s->next;
            c->out_queued -= s->len;
            c->out_capped -= s->len;
            folio_free(s);
        } else {
            last = s;
            pp = &s->next;
        }
    }
    c->oq_tail = last;
}

int http_stream_chunk(struct http_conn *c, const char *data, size_t len)
{
    if (!len)
        return 0;
    if (c->closing || c->failed)
        return -EPIPE;
    char head[24];
    int hn = c->chunked ? snprintf(head, sizeof(head), "%zx\r\n", len) : 0;
    /* one segment per chunk, framing included (oq_drop_unsent) */
    int rc = http__oq_push(c, head, (size_t)hn, data, len, c->chunked ? "\r\n" : NULL, true);
    if (rc)
        return rc;
    if (!c->over_cap && c->out_capped > (size_t)c->hs->lim.max_pending_output) {
        c->over_cap = true;
        http__clock_update(c); /* OVER_CAP_MS for the client to take some */
    }
    return 0;
}

void http_stream_end(struct http_conn *c)
{
    if (c->chunked)
        http__oq_push(c, "0\r\n\r\n", 5, NULL, 0, NULL, false);
    c->streaming = false;
    http__maybe_close_after_write(c);
}

void http_conn_fail(struct http_conn *c, const struct srv_api_error *e)
{
    http_conn_fail_sse(c, e, NULL, 0);
}

void http_conn_fail_sse(struct http_conn *c, const struct srv_api_error *e, const char *event,
                        size_t len)
{
    if (c->closing || c->failed)
        return;
    http__abandon(c);
    if (!c->streaming) {
        c->keep_alive = false;
        http_error(c, e, NULL);
    } else {
        oq_drop_unsent(c);
        struct folio_buf ev = {0}, b = {0};
        if (event) {
            folio_buf_append(&ev, event, len);
        } else {
            folio_buf_puts(&ev, "data: ");
            srv_api_error_json(&ev, e);
            folio_buf_puts(&ev, "\n\n");
        }
        if (c->chunked)
            folio_buf_printf(&b, "%zx\r\n%s\r\n0\r\n\r\n", ev.len, ev.p ? ev.p : "");
        else
            folio_buf_append(&b, ev.p, ev.len);
        if (!b.oom && !ev.oom)
            http__oq_push(c, b.p, b.len, NULL, 0, NULL, false);
        folio_buf_free(&ev);
        folio_buf_free(&b);
        c->streaming = false;
    }
    if (c->closing)
        return;
    c->failed = true;
    c->close_after_write = true;
    c->in_len = 0;
    uv_read_stop(&c->u.s);
    c->reading = false;
    http__maybe_close_after_write(c);
    http__clock_update(c);
}
