/*
 * daemon/http.c — client connections: accept, read, HTTP/1.1 parsing with
 * llhttp (keep-alive, pipelining), response writing, back-pressure.  The
 * layer below server.c (see http.h): requests go up through the
 * callbacks in struct http_server, nothing here calls the server.
 *
 * Input: bytes read are appended to conn->in and parsed from the front.
 * on_message_complete pauses the parser, so exactly one request is routed
 * at a time; the unparsed rest (pipelined requests) stays in conn->in
 * until the held request is done (http_request_done) and the previous
 * response has mostly left (less than OUT_PARSE_LIMIT queued): a client
 * that pipelines requests without reading the answers stops being read.
 * While a request is served the connection keeps reading (to notice a
 * client that goes away) but stops once 64 KiB of further input is
 * buffered.
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
 * the request generates in OVER_CAP_MS.
 *
 * Clocks (one timer per connection):
 *   - idle: a connection has --idle-timeout-ms to send each complete
 *     request (from accept, and from the end of the previous response);
 *     one that sends nothing, or half a request, is closed (slowloris);
 *   - body rate: once its headers are in, a request body must arrive at
 *     MIN_BODY_RATE bytes/s on average after BODY_GRACE_MS, or the request
 *     gets a 408 (a body is buffered only while it arrives at that rate);
 *   - write progress: while output is queued the timer measures the time
 *     since the last completed write, never the idle time: a response
 *     being written is not timed out while the client reads it;
 *   - a request being served with nothing queued is never timed out.
 *
 * End of input: a client may half-close (shutdown(SHUT_WR)) after its
 * request, as socat and curl -T do: its requests are still answered and
 * the connection closes after the last answer.  On a Unix socket a full
 * close (POLLHUP) while a request is served aborts it at once; on TCP the
 * two look alike until a write fails, which then aborts it.
 *
 * HTTP details: header names must be tokens (RFC 9110 tchar: a space in a
 * name is a 400); `Expect: 100-continue` gets its interim response before
 * the body is read (other expectations: 417); an HTTP/1.0 client gets a
 * stream as a close-delimited body (no chunked encoding).
 *
 * Early ends (http_conn_fail): a request cut short (drain timeout, slow
 * reader, engine error) ends with something the client can read: before
 * the headers an error response, in a stream a final
 * `data: {"error":...}` event and the end of the body.
 *
 * Drain: idle connections are not closed at once; they get DRAIN_IDLE_MS
 * to send a request (answered, e.g. /health with 503, and closed), so a
 * kept-alive client sees the drain instead of a reset.
 *
 * Parse errors are answered with a 400 (413 body too large, 414 URL too
 * long, 431 headers too large) and `Connection: close`; they affect only
 * their own connection.
 *
 * Admission (the accept path): a connection over --max-connections, or
 * one the owner's on_accept refuses (a per-client limit), is answered 503
 * at once and kept only to linger: its input is read and dropped until
 * the client closes or REFUSED_LINGER_MS pass (closing with unread input
 * would reset the connection and could destroy the answer).  Lingering
 * connections are not counted against --max-connections; beyond as many
 * again they are closed at once.  Request-body bytes are reported to the
 * owner's on_buffer as they arrive and given back when the request has
 * been handled (the body buffer is freed then if it grew large); a
 * refusal answers 503.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>

#include <llhttp.h>

#include "folio/common.h"
#include "http.h"
#include "log.h"

#define MAX_URL                 8192
#define MAX_HEADERS             65536
#define MAX_BUFFERED_WHILE_BUSY 65536
#define REFUSED_LINGER_MS       1000
#define OUT_CHUNK               65536 /* bytes of one uv_write */
#define OUT_IOV                 16    /* segments gathered into one uv_write */
#define OUT_PARSE_LIMIT         65536 /* parse the next request below this */
#define WRITE_CLOCK_DEFAULT_MS  60000 /* write progress when idle_timeout_ms is 0 */
#define OVER_CAP_MS             1000  /* a stream backlog over the cap this long */
#define FAIL_LINGER_MS          5000  /* a failed connection's last bytes */
#define DRAIN_IDLE_MS           2000  /* idle connections while draining */
#define MIN_BODY_RATE           8192  /* bytes/s */
#define BODY_GRACE_MS           2000
#define BODY_CHECK_MS           500

struct oseg {
    struct oseg *next;
    size_t len, off; /* bytes before off were handed to libuv */
    bool capped;     /* a stream chunk: counted against max_pending_output */
    char data[];
};

struct http_conn {
    union {
        uv_handle_t h;
        uv_stream_t s;
        uv_pipe_t pipe;
        uv_tcp_t tcp;
    } u;
    struct http_server *hs;
    struct http_conn *prev, *next;
    uint64_t id;
    bool is_tcp;
    int64_t peer_uid; /* -1 unknown (TCP) */
    llhttp_t parser;
    /* unparsed input (kept while a request is being served) */
    char *in;
    size_t in_len, in_cap;
    bool reading, peer_eof;
    /* the message being parsed */
    struct folio_buf url, body, hfield, hval, auth, host, origin, fetch_site;
    void *acct;           /* the owner's accounting object (on_accept) */
    int64_t body_counted; /* body bytes reported to on_buffer, not yet given back */
    bool refused;         /* answered 503 at accept; lingers until the client closes */
    size_t header_bytes;
    int reject_status; /* 413 / 414 / 417 / 431 / 400 found while parsing */
    const char *reject_why;
    int status; /* of the current request's response; 0 before it starts */
    bool msg_done, in_msg, keep_alive, expect_continue, in_body;
    uint64_t body_t0;       /* ns: headers complete */
    uint64_t idle_deadline; /* ns: the idle clock's end; 0 none */
    /* serving */
    void *active; /* the held request (http_conn_hold), the owner's */
    bool closing, close_after_write;
    bool streaming, chunked; /* http_stream_begin ran; chunked framing */
    bool failed;             /* http_conn_fail ran: nothing more is queued */
    /* output queue (see the top) */
    struct oseg *oq_head, *oq_tail;
    size_t out_queued; /* bytes in the queue not yet acknowledged */
    size_t out_capped; /* stream bytes not yet handed to libuv */
    bool over_cap;     /* out_capped > max_pending_output: the short write clock */
    bool writing;
    size_t wr_len;
    uv_write_t wr;
    uv_timer_t timer; /* the clocks above */
    int handles;      /* open libuv handles (stream, timer); freed at 0 */
};

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

static void process(struct http_conn *c);
static void clock_update(struct http_conn *c);

/* ---- closing ---------------------------------------------------------- */

static void oq_free(struct http_conn *c)
{
    for (struct oseg *s = c->oq_head, *n; s; s = n) {
        n = s->next;
        folio_free(s);
    }
    c->oq_head = c->oq_tail = NULL;
    c->out_queued = c->out_capped = 0;
}

static void on_closed(uv_handle_t *h)
{
    struct http_conn *c = h->data;
    struct http_server *hs = c->hs;
    if (--c->handles > 0)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        hs->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    hs->st.n_open--;
    if (c->refused)
        hs->st.n_refused--;
    if (hs->cb.on_release && c->acct)
        hs->cb.on_release(hs->cb.user, c->acct); /* its body bytes too */
    oq_free(c);
    folio_free(c->in);
    folio_buf_free(&c->url);
    folio_buf_free(&c->body);
    folio_buf_free(&c->hfield);
    folio_buf_free(&c->hval);
    folio_buf_free(&c->auth);
    folio_buf_free(&c->host);
    folio_buf_free(&c->origin);
    folio_buf_free(&c->fetch_site);
    folio_free(c);
    if (hs->cb.on_closed)
        hs->cb.on_closed(hs->cb.user);
}

/* The held request is given up: the owner is told (it must stop using c). */
static void abandon(struct http_conn *c)
{
    if (c->active) {
        void *active = c->active;
        c->active = NULL;
        if (c->hs->cb.on_abandon)
            c->hs->cb.on_abandon(c->hs->cb.user, active);
    }
}

void http_close(struct http_conn *c, const char *why)
{
    if (c->closing)
        return;
    c->closing = true;
    if (why)
        srv_log(SRV_LOG_DEBUG, "conn %llu: closing: %s", (unsigned long long)c->id, why);
    abandon(c);
    uv_read_stop(&c->u.s);
    uv_close(&c->u.h, on_closed);
    uv_close((uv_handle_t *)&c->timer, on_closed);
}

static void slow_reader(struct http_conn *c, const char *what)
{
    srv_log(SRV_LOG_INFO, "conn %llu: slow reader: %s; dropping it", (unsigned long long)c->id,
            what);
    c->hs->st.dropped_slow_total++;
}

/* The write clock: how long queued output may make no progress. */
static int64_t write_clock_ms(const struct http_conn *c)
{
    if (c->over_cap && !c->failed)
        return OVER_CAP_MS;
    int64_t ms = c->failed ? FAIL_LINGER_MS : c->hs->lim.idle_timeout_ms;
    return ms > 0 ? ms : WRITE_CLOCK_DEFAULT_MS;
}

/* The kernel would take more bytes now (the client has been reading). */
static bool sock_writable(struct http_conn *c)
{
    uv_os_fd_t fd;
    if (uv_fileno(&c->u.h, &fd))
        return false;
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    return poll(&pf, 1, 0) == 1 && (pf.revents & POLLOUT) && !(pf.revents & (POLLERR | POLLHUP));
}

static void on_timer(uv_timer_t *t)
{
    struct http_conn *c = t->data;
    if (c->closing)
        return;
    if (c->out_queued) {
        /* the socket has room: the client reads, the loop was busy */
        if (sock_writable(c)) {
            clock_update(c);
            return;
        }
        char what[112];
        if (c->over_cap && !c->failed) {
            snprintf(what, sizeof(what),
                     "%zu bytes of stream unsent (cap %lld), none taken in %d ms", c->out_capped,
                     (long long)c->hs->lim.max_pending_output, OVER_CAP_MS);
            slow_reader(c, what);
            struct srv_api_error e;
            srv_api_error_set(&e, 503, "server_error", NULL, "slow_reader",
                              "the client read too slowly: more than %lld bytes unsent; stream "
                              "ended",
                              (long long)c->hs->lim.max_pending_output);
            http_conn_fail(c, &e);
            return;
        }
        snprintf(what, sizeof(what), "no write progress for %lld ms (%zu bytes queued)",
                 (long long)write_clock_ms(c), c->out_queued);
        if (!c->failed)
            slow_reader(c, what);
        http_close(c, what);
        return;
    }
    if (c->active)
        return; /* re-armed when the request is done */
    uint64_t now = folio_now_ns();
    if (c->in_msg && c->in_body) {
        uint64_t ms = (now - c->body_t0) / 1000000;
        if (ms > BODY_GRACE_MS &&
            c->body.len < (uint64_t)MIN_BODY_RATE * (ms - BODY_GRACE_MS) / 1000) {
            struct srv_api_error e;
            srv_log(SRV_LOG_INFO,
                    "conn %llu: request body arriving too slowly (%zu bytes in %llu ms)",
                    (unsigned long long)c->id, c->body.len, (unsigned long long)ms);
            srv_api_error_set(&e, 408, "invalid_request_error", NULL, NULL,
                              "request body arriving slower than %d bytes/s", MIN_BODY_RATE);
            c->keep_alive = false;
            c->in_len = 0;
            c->in_msg = false;
            http_error(c, &e, NULL);
            return;
        }
    }
    if (c->idle_deadline && now + 1000000 >= c->idle_deadline) {
        srv_log(SRV_LOG_DEBUG, "conn %llu: idle timeout", (unsigned long long)c->id);
        http_close(c, NULL);
        return;
    }
    clock_update(c);
}

/* (Re)starts the idle clock: the client has idle-timeout-ms (while
 * draining: at most DRAIN_IDLE_MS) to send its next complete request. */
static void idle_arm(struct http_conn *c)
{
    if (c->refused) { /* lingering: its deadline stays (conn_linger) */
        clock_update(c);
        return;
    }
    int64_t ms = c->hs->lim.idle_timeout_ms;
    if (c->hs->draining && (ms <= 0 || ms > DRAIN_IDLE_MS))
        ms = DRAIN_IDLE_MS;
    c->idle_deadline = ms > 0 ? folio_now_ns() + (uint64_t)ms * 1000000 : 0;
    clock_update(c);
}

/* Sets the timer for whichever clock runs now (see the top). */
static void clock_update(struct http_conn *c)
{
    if (c->closing)
        return;
    int64_t ms = -1;
    if (c->out_queued)
        ms = write_clock_ms(c);
    else if (!c->active) {
        if (c->idle_deadline) {
            uint64_t now = folio_now_ns();
            ms = c->idle_deadline > now ? (int64_t)((c->idle_deadline - now) / 1000000) + 1 : 0;
        }
        if (c->in_msg && c->in_body && (ms < 0 || ms > BODY_CHECK_MS))
            ms = BODY_CHECK_MS;
    }
    if (ms >= 0) {
        /* from now, not from the start of this loop turn (which may have
         * been long: a large burst rendered) */
        uv_update_time(c->hs->loop);
        uv_timer_start(&c->timer, on_timer, (uint64_t)ms, 0);
    } else
        uv_timer_stop(&c->timer);
}

/* ---- writing ---------------------------------------------------------- */

static void maybe_close_after_write(struct http_conn *c)
{
    if (c->close_after_write && !c->out_queued && !c->active && !c->refused)
        http_close(c, "response sent, connection: close");
}

/* Gives the request body's bytes back to the owner's accounting. */
static void body_release(struct http_conn *c)
{
    if (c->body_counted && c->hs->cb.on_buffer)
        c->hs->cb.on_buffer(c->hs->cb.user, c->acct, -c->body_counted);
    c->body_counted = 0;
}

static void pump(struct http_conn *c);

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
        maybe_close_after_write(c);
        if (c->closing)
            return;
        if (c->peer_eof && !c->active && !c->in_len) {
            http_close(c, "peer closed, answers sent");
            return;
        }
    }
    if (!c->out_queued && !c->active)
        idle_arm(c); /* the idle clock runs from the end of the response */
    else
        clock_update(c); /* progress: the write clock starts again */
    if (!c->active && c->in_len && c->out_queued < OUT_PARSE_LIMIT)
        process(c);
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
static int oq_push(struct http_conn *c, const char *a, size_t an, const char *b, size_t bn,
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
        clock_update(c); /* the write clock starts */
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
    oq_push(c, h.p, h.len, body, len, NULL, false);
    folio_buf_free(&h);
    maybe_close_after_write(c);
}

void http_error(struct http_conn *c, const struct srv_api_error *e, const char *extra)
{
    struct folio_buf b = {0};
    srv_api_error_json(&b, e);
    folio_buf_puts(&b, "\n");
    srv_log(SRV_LOG_DEBUG, "conn %llu: %d %s", (unsigned long long)c->id, e->status, e->message);
    http_respond(c, e->status, "application/json", b.p ? b.p : "", b.len, extra);
    folio_buf_free(&b);
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
    int rc = oq_push(c, h.p, h.len, NULL, 0, NULL, false);
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
    int rc = oq_push(c, head, (size_t)hn, data, len, c->chunked ? "\r\n" : NULL, true);
    if (rc)
        return rc;
    if (!c->over_cap && c->out_capped > (size_t)c->hs->lim.max_pending_output) {
        c->over_cap = true;
        clock_update(c); /* OVER_CAP_MS for the client to take some */
    }
    return 0;
}

void http_stream_end(struct http_conn *c)
{
    if (c->chunked)
        oq_push(c, "0\r\n\r\n", 5, NULL, 0, NULL, false);
    c->streaming = false;
    maybe_close_after_write(c);
}

void http_conn_fail(struct http_conn *c, const struct srv_api_error *e)
{
    if (c->closing || c->failed)
        return;
    abandon(c);
    if (!c->streaming) {
        c->keep_alive = false;
        http_error(c, e, NULL);
    } else {
        oq_drop_unsent(c);
        struct folio_buf ev = {0}, b = {0};
        folio_buf_puts(&ev, "data: ");
        srv_api_error_json(&ev, e);
        folio_buf_puts(&ev, "\n\n");
        if (c->chunked)
            folio_buf_printf(&b, "%zx\r\n%s\r\n0\r\n\r\n", ev.len, ev.p ? ev.p : "");
        else
            folio_buf_append(&b, ev.p, ev.len);
        if (!b.oom && !ev.oom)
            oq_push(c, b.p, b.len, NULL, 0, NULL, false);
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
    maybe_close_after_write(c);
    clock_update(c);
}
/* ---- parsing ---------------------------------------------------------- */

static struct http_conn *PC(llhttp_t *p)
{
    return p->data;
}

static int on_message_begin(llhttp_t *p)
{
    struct http_conn *c = PC(p);
    /* the previous message's strings end here too: a request without a
     * body or an Authorization header must not see the last one's */
    struct folio_buf *bufs[] = {&c->url,  &c->body, &c->hfield, &c->hval,
                                &c->auth, &c->host, &c->origin, &c->fetch_site};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(bufs); i++) {
        bufs[i]->len = 0;
        if (bufs[i]->p)
            bufs[i]->p[0] = 0;
    }
    body_release(c);
    c->header_bytes = 0;
    c->reject_status = 0;
    c->reject_why = NULL;
    c->msg_done = false;
    c->in_msg = true;
    c->in_body = false;
    c->expect_continue = false;
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    struct http_conn *c = PC(p);
    if (c->url.len + n > MAX_URL) {
        c->reject_status = 414;
        return -1;
    }
    folio_buf_append(&c->url, at, n);
    return 0;
}

static int header_bytes(struct http_conn *c, size_t n)
{
    c->header_bytes += n;
    if (c->header_bytes > MAX_HEADERS) {
        c->reject_status = 431;
        return -1;
    }
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    struct http_conn *c = PC(p);
    if (header_bytes(c, n))
        return -1;
    folio_buf_append(&c->hfield, at, n);
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    struct http_conn *c = PC(p);
    if (header_bytes(c, n))
        return -1;
    folio_buf_append(&c->hval, at, n);
    return 0;
}

/* RFC 9110 tchar: what a header name may hold. */
static bool is_tchar(unsigned char ch)
{
    if ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))
        return true;
    return ch && strchr("!#$%&'*+-.^_`|~", ch);
}

static int on_header_field_complete(llhttp_t *p)
{
    struct http_conn *c = PC(p);
    if (!c->hfield.len) {
        c->reject_why = "empty header name";
        return -1;
    }
    for (size_t i = 0; i < c->hfield.len; i++)
        if (!is_tchar((unsigned char)c->hfield.p[i])) {
            c->reject_why = "invalid character in a header name";
            return -1;
        }
    return 0;
}

static bool header_is(const struct http_conn *c, const char *name)
{
    size_t n = strlen(name);
    return c->hfield.len == n && !strncasecmp(c->hfield.p, name, n);
}

static int on_header_value_complete(llhttp_t *p)
{
    struct http_conn *c = PC(p);
    static const struct {
        const char *name;
        size_t off;
    } keep[] = {
        {"authorization", offsetof(struct http_conn, auth)},
        {"host", offsetof(struct http_conn, host)},
        {"origin", offsetof(struct http_conn, origin)},
        {"sec-fetch-site", offsetof(struct http_conn, fetch_site)},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(keep); i++)
        if (header_is(c, keep[i].name)) {
            struct folio_buf *b = (struct folio_buf *)((char *)c + keep[i].off);
            b->len = 0;
            folio_buf_append(b, c->hval.p ? c->hval.p : "", c->hval.len);
        }
    if (header_is(c, "expect")) {
        const char *v = c->hval.p ? c->hval.p : "";
        size_t n = c->hval.len;
        while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
            n--;
        if (n == 12 && !strncasecmp(v, "100-continue", 12))
            c->expect_continue = true;
        else {
            c->reject_status = 417;
            return -1;
        }
    }
    c->hfield.len = c->hval.len = 0;
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    struct http_conn *c = PC(p);
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > (uint64_t)c->hs->lim.max_body) {
        c->reject_status = 413;
        return -1;
    }
    bool body = ((p->flags & F_CONTENT_LENGTH) && p->content_length) || (p->flags & F_CHUNKED);
    if (body) {
        c->in_body = true;
        c->body_t0 = folio_now_ns();
        clock_update(c);
    }
    /* the interim answer the client waits for before sending its body
     * (HTTP/1.1 only; sent even if some of the body is already here) */
    if (c->expect_continue && body && p->http_major == 1 && p->http_minor >= 1)
        oq_push(c, "HTTP/1.1 100 Continue\r\n\r\n", 25, NULL, 0, NULL, false);
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    struct http_conn *c = PC(p);
    if (c->body.len + n > (size_t)c->hs->lim.max_body) {
        c->reject_status = 413;
        return -1;
    }
    if (c->hs->cb.on_buffer) {
        if (c->hs->cb.on_buffer(c->hs->cb.user, c->acct, (int64_t)n)) {
            c->reject_status = 503;
            return -1;
        }
        c->body_counted += (int64_t)n;
    }
    folio_buf_append(&c->body, at, n);
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    struct http_conn *c = PC(p);
    c->msg_done = true;
    c->in_msg = false;
    c->in_body = false;
    c->keep_alive = llhttp_should_keep_alive(p);
    return HPE_PAUSED;
}

static const llhttp_settings_t settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

/* Keeps a connection that was answered a 503 only to let its client read
 * the answer: input is dropped, and it closes at the client's end or after
 * REFUSED_LINGER_MS. */
static void conn_linger(struct http_conn *c)
{
    if (c->closing || c->refused)
        return;
    c->refused = true;
    c->hs->st.n_refused++;
    c->in_msg = false;
    c->idle_deadline = folio_now_ns() + (uint64_t)REFUSED_LINGER_MS * 1000000;
    clock_update(c);
    if (!c->reading && !uv_read_start(&c->u.s, on_alloc, on_read))
        c->reading = true;
}

static void consume(struct http_conn *c, size_t n)
{
    memmove(c->in, c->in + n, c->in_len - n);
    c->in_len -= n;
}

static void parse_error(struct http_conn *c, llhttp_errno_t rc)
{
    struct srv_api_error e;
    int status = c->reject_status ? c->reject_status : 400;
    if (status == 413)
        srv_api_error_set(&e, 413, "invalid_request_error", NULL, NULL,
                          "request body is larger than %lld bytes", (long long)c->hs->lim.max_body);
    else if (status == 414)
        srv_api_error_set(&e, 414, "invalid_request_error", NULL, NULL, "URL too long");
    else if (status == 431)
        srv_api_error_set(&e, 431, "invalid_request_error", NULL, NULL, "headers too large");
    else if (status == 503)
        srv_api_error_set(&e, 503, "service_unavailable", NULL, NULL,
                          "too many request bytes are being received from this client; retry");
    else if (status == 417)
        srv_api_error_set(&e, 417, "invalid_request_error", NULL, NULL,
                          "only 'Expect: 100-continue' is supported");
    else if (c->reject_why)
        srv_api_error_set(&e, 400, "invalid_request_error", NULL, NULL, "malformed HTTP: %s",
                          c->reject_why);
    else
        srv_api_error_set(&e, 400, "invalid_request_error", NULL, NULL, "malformed HTTP: %s (%s)",
                          llhttp_errno_name(rc), llhttp_get_error_reason(&c->parser));
    c->keep_alive = false;
    c->in_len = 0;
    body_release(c);
    c->in_msg = false;
    http_error(c, &e, NULL);
    if (status == 503)
        conn_linger(c); /* the rest of its body may be in flight */
}

/* Hands the parsed message up as a request view. */
static void dispatch(struct http_conn *c)
{
    const char *url = c->url.p ? c->url.p : "";
    llhttp_method_t m = (llhttp_method_t)llhttp_get_method(&c->parser);
    struct http_request rq = {
        .method = m == HTTP_GET    ? HTTP_M_GET
                  : m == HTTP_POST ? HTTP_M_POST
                                   : HTTP_M_OTHER,
        .method_name = llhttp_method_name(m),
        .url = url,
        .path_len = strcspn(url, "?#"),
        .body = c->body.p ? c->body.p : "",
        .body_len = c->body.len,
        .auth = c->auth.len ? c->auth.p : NULL,
        .host = c->host.len ? c->host.p : NULL,
        .origin = c->origin.len ? c->origin.p : NULL,
        .fetch_site = c->fetch_site.len ? c->fetch_site.p : NULL,
        .peer_uid = c->peer_uid,
        .is_tcp = c->is_tcp,
        .acct = c->acct,
    };
    c->status = 0;
    c->hs->cb.on_request(c->hs->cb.user, c, &rq);
    /* the view is gone: the body's bytes are no longer held for it */
    body_release(c);
    if (c->body.cap > MAX_BUFFERED_WHILE_BUSY)
        folio_buf_free(&c->body);
}

static bool can_parse(const struct http_conn *c)
{
    return !c->closing && !c->active && !c->close_after_write && !c->failed &&
           c->out_queued < OUT_PARSE_LIMIT;
}

/* After the client's end of input: answers what it sent, then closes. */
static void eof_settle(struct http_conn *c)
{
    if (c->closing || c->active || c->failed)
        return;
    if (c->in_len && can_parse(c))
        return; /* process() goes on */
    if (c->in_msg && !c->close_after_write && !c->in_len) {
        c->reject_status = 0;
        c->reject_why = NULL;
        parse_error(c, HPE_INVALID_EOF_STATE); /* half a request */
        return;
    }
    if (!c->out_queued && !c->in_len)
        http_close(c, "peer closed");
}

int http_conn_status(const struct http_conn *c)
{
    return c->status;
}

static void process(struct http_conn *c)
{
    while (can_parse(c) && c->in_len > 0) {
        llhttp_errno_t rc = llhttp_execute(&c->parser, c->in, c->in_len);
        size_t used = c->in_len;
        if (rc == HPE_PAUSED) {
            used = (size_t)(llhttp_get_error_pos(&c->parser) - c->in);
            llhttp_resume(&c->parser);
        } else if (rc != HPE_OK) {
            parse_error(c, rc);
            return;
        }
        consume(c, used);
        if (c->msg_done) {
            c->msg_done = false;
            idle_arm(c);
            dispatch(c);
        }
    }
    if (c->closing)
        return;
    if (c->peer_eof) {
        eof_settle(c);
        return;
    }
    if (!c->reading && !c->failed && c->in_len < MAX_BUFFERED_WHILE_BUSY) {
        if (!uv_read_start(&c->u.s, on_alloc, on_read))
            c->reading = true;
    }
}

void http_request_done(struct http_conn *c)
{
    c->active = NULL;
    if (c->closing)
        return;
    idle_arm(c);
    if (c->hs->draining && !c->in_len)
        c->close_after_write = true; /* pipelined requests still get their 503 */
    if (c->close_after_write) {
        maybe_close_after_write(c);
        return;
    }
    process(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct http_conn *c = h->data;
    (void)suggested;
    if (c->refused) { /* its input is dropped: one small buffer for all */
        static char sink[4096];
        *buf = uv_buf_init(sink, sizeof(sink));
        return;
    }
    size_t want = c->in_len + 65536;
    if (c->in_cap < want) {
        char *p = folio_realloc(c->in, want);
        if (!p) {
            *buf = uv_buf_init(NULL, 0);
            return;
        }
        c->in = p;
        c->in_cap = want;
    }
    *buf = uv_buf_init(c->in + c->in_len, (unsigned)(c->in_cap - c->in_len));
}

/* The peer closed both directions (not a half-close): POLLHUP. */
static bool peer_hung_up(struct http_conn *c)
{
    uv_os_fd_t fd;
    if (uv_fileno(&c->u.h, &fd))
        return true;
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    return poll(&pf, 1, 0) == 1 && (pf.revents & (POLLHUP | POLLERR));
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct http_conn *c = st->data;
    (void)buf;
    if (nread == 0 || c->closing)
        return;
    if (c->refused) { /* lingering: drop input, close at the client's end */
        c->in_len = 0;
        if (nread < 0)
            http_close(c, "refused connection closed by the client");
        return;
    }
    if (nread < 0) {
        if (nread == UV_ENOBUFS) {
            http_close(c, "out of memory");
            return;
        }
        uv_read_stop(st);
        c->reading = false;
        if (nread == UV_EOF && !peer_hung_up(c)) {
            /* half-close: the requests sent are still answered */
            c->peer_eof = true;
            process(c);
            return;
        }
        /* the client is gone: a request being served is aborted */
        c->hs->st.disconnects_total += c->active ? 1 : 0;
        http_close(c, nread == UV_EOF ? "peer closed" : uv_strerror((int)nread));
        return;
    }
    c->in_len += (size_t)nread;
    if (!can_parse(c)) {
        if (c->in_len >= MAX_BUFFERED_WHILE_BUSY) {
            uv_read_stop(st);
            c->reading = false;
        }
        return;
    }
    process(c);
}

void http_server_init(struct http_server *hs, uv_loop_t *loop, const struct http_limits *lim,
                      const struct http_callbacks *cb)
{
    memset(hs, 0, sizeof(*hs));
    hs->loop = loop;
    hs->replica = "foliod"; /* srv_main sets --replica-id */
    hs->lim = *lim;
    hs->cb = *cb;
}

void http_conn_hold(struct http_conn *c, void *active)
{
    c->active = active;
    clock_update(c);
}

void http_conn_close_after(struct http_conn *c)
{
    c->close_after_write = true;
}

void http_server_drain(struct http_server *hs)
{
    hs->draining = true;
    for (struct http_conn *c = hs->conns; c; c = c->next) {
        if (c->active || c->closing)
            continue;
        if (c->out_queued)
            c->close_after_write = true;
        else
            idle_arm(c); /* DRAIN_IDLE_MS to ask, e.g., /health */
    }
}

void http_server_close_all(struct http_server *hs, const char *why)
{
    for (struct http_conn *c = hs->conns, *next; c; c = next) {
        next = c->next;
        http_close(c, why);
    }
}

/* Answers e (a 503) at once and lingers (see the top of the file); at
 * most max_connections refused connections linger, more close at once. */
static void conn_refuse(struct http_conn *c, const struct srv_api_error *e)
{
    struct http_server *hs = c->hs;
    hs->st.refused_total++;
    if (hs->st.n_refused >= hs->lim.max_connections) {
        http_close(c, "refused, no room to linger");
        return;
    }
    http_error(c, e, NULL); /* keep_alive is false: Connection: close */
    conn_linger(c);
}

void http_server_fail_all(struct http_server *hs, const struct srv_api_error *e)
{
    for (struct http_conn *c = hs->conns, *next; c; c = next) {
        next = c->next;
        if (c->active || c->streaming)
            http_conn_fail(c, e);
        else
            http_close(c, e->message);
    }
}

void http_accept(struct http_server *hs, uv_stream_t *listener, bool is_tcp)
{
    struct http_conn *c = folio_calloc(1, sizeof(*c));
    if (!c)
        return;
    c->hs = hs;
    c->is_tcp = is_tcp;
    c->peer_uid = -1;
    c->id = ++hs->next_id;
    int rc = is_tcp ? uv_tcp_init(hs->loop, &c->u.tcp) : uv_pipe_init(hs->loop, &c->u.pipe, 0);
    if (rc) {
        folio_free(c);
        return;
    }
    c->u.h.data = c;
    uv_timer_init(hs->loop, &c->timer); /* cannot fail */
    c->timer.data = c;
    c->handles = 2;
    c->next = hs->conns;
    if (hs->conns)
        hs->conns->prev = c;
    hs->conns = c;
    hs->st.n_open++;
    hs->st.connections_total++;
    if ((rc = uv_accept(listener, &c->u.s))) {
        http_close(c, uv_strerror(rc));
        return;
    }
    struct http_peer peer = {.is_tcp = is_tcp, .uid = -1};
    if (!is_tcp) {
        uv_os_fd_t fd;
        struct ucred cr;
        socklen_t len = sizeof(cr);
        if (!uv_fileno(&c->u.h, &fd) && !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
            c->peer_uid = peer.uid = cr.uid;
    } else {
        struct sockaddr_storage sa;
        int len = sizeof(sa);
        if (!uv_tcp_getpeername(&c->u.tcp, (struct sockaddr *)&sa, &len)) {
            if (sa.ss_family == AF_INET6)
                memcpy(peer.ip, &((struct sockaddr_in6 *)&sa)->sin6_addr, 16);
            else if (sa.ss_family == AF_INET) {
                peer.ip[10] = peer.ip[11] = 0xff;
                memcpy(peer.ip + 12, &((struct sockaddr_in *)&sa)->sin_addr, 4);
            }
        }
    }
    struct srv_api_error e;
    if (hs->st.n_open - hs->st.n_refused > hs->lim.max_connections) {
        srv_log(SRV_LOG_INFO, "refusing connection: %d open (--max-connections)",
                hs->st.n_open - hs->st.n_refused - 1);
        srv_api_error_set(&e, 503, "service_unavailable", NULL, NULL,
                          "the server has %lld connections open (--max-connections); retry",
                          (long long)hs->lim.max_connections);
        conn_refuse(c, &e);
        return;
    }
    if (hs->cb.on_accept && hs->cb.on_accept(hs->cb.user, &peer, &c->acct, &e)) {
        srv_log(SRV_LOG_DEBUG, "conn %llu: refused: %s", (unsigned long long)c->id, e.message);
        conn_refuse(c, &e);
        return;
    }
    llhttp_init(&c->parser, HTTP_REQUEST, &settings);
    c->parser.data = c;
    idle_arm(c);
    if (!uv_read_start(&c->u.s, on_alloc, on_read))
        c->reading = true;
}
