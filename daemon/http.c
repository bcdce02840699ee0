/*
 * daemon/http.c — client connections: accept, read, HTTP/1.1 parsing with
 * llhttp (keep-alive, pipelining), response writing, back-pressure.  The
 * layer below server.c (see http.h): requests go up through the
 * callbacks in struct http_server, nothing here calls the server.
 *
 * Input: bytes read are appended to conn->in and parsed from the front.
 * on_message_complete pauses the parser, so exactly one request is routed
 * at a time; the unparsed rest (pipelined requests) stays in conn->in
 * until the held request is done (http_request_done).  While a
 * completion is active the connection keeps reading (to notice a client
 * that goes away) but stops once 64 KiB of further input is buffered.
 *
 * Output: each write owns its buffer (struct wreq) until its callback.
 * Back-pressure policy: when a client leaves more than
 * --max-pending-output bytes unsent (libuv's write queue), the daemon does
 * not buffer further: it logs "slow reader", closes the connection, and the
 * request is aborted (its pages are freed at the next step commit).  This
 * bounds memory per connection by the cap plus one chunk.
 *
 * Idle clock: a connection has --idle-timeout-ms to send each complete
 * request (from accept, and from the end of the previous response); one
 * that sends nothing, or half a request, is closed (slowloris).  A request
 * being served is never timed out.
 *
 * Parse errors are answered with a 400 (413 body too large, 414 URL too
 * long, 431 headers too large) and `Connection: close`; they affect only
 * their own connection.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <llhttp.h>

#include "folio/common.h"
#include "http.h"
#include "log.h"

#define MAX_URL                 8192
#define MAX_HEADERS             65536
#define MAX_BUFFERED_WHILE_BUSY 65536

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
    bool reading;
    /* the message being parsed */
    struct folio_buf url, body, hfield, hval, auth;
    size_t header_bytes;
    int reject_status; /* 413 / 431 / 414 found while parsing */
    bool msg_done, in_msg, keep_alive;
    /* serving */
    void *active; /* the held request (http_conn_hold), the owner's */
    bool closing, close_after_write;
    int writes_out;  /* uv_write requests in flight */
    uv_timer_t idle; /* closes a connection that sends no complete request */
    int handles;     /* open libuv handles (stream, timer); freed at 0 */
};

struct wreq {
    uv_write_t req;
    struct http_conn *c;
    char *hdr, *body;
};

const char *http_status_text(int status)
{
    switch (status) {
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
    case 413:
        return "Payload Too Large";
    case 414:
        return "URI Too Long";
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

/* ---- closing ---------------------------------------------------------- */

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
    folio_free(c->in);
    folio_buf_free(&c->url);
    folio_buf_free(&c->body);
    folio_buf_free(&c->hfield);
    folio_buf_free(&c->hval);
    folio_buf_free(&c->auth);
    folio_free(c);
    if (hs->cb.on_closed)
        hs->cb.on_closed(hs->cb.user);
}

void http_close(struct http_conn *c, const char *why)
{
    if (c->closing)
        return;
    c->closing = true;
    if (why)
        srv_log(SRV_LOG_DEBUG, "conn %llu: closing: %s", (unsigned long long)c->id, why);
    if (c->active) {
        void *active = c->active;
        c->active = NULL;
        if (c->hs->cb.on_abandon)
            c->hs->cb.on_abandon(c->hs->cb.user, active);
    }
    uv_read_stop(&c->u.s);
    uv_close(&c->u.h, on_closed);
    uv_close((uv_handle_t *)&c->idle, on_closed);
}

static void on_idle(uv_timer_t *t)
{
    struct http_conn *c = t->data;
    if (c->active || c->closing)
        return; /* re-armed when the request is done */
    srv_log(SRV_LOG_DEBUG, "conn %llu: idle timeout", (unsigned long long)c->id);
    http_close(c, NULL);
}

/* (Re)starts the idle clock: the client has idle-timeout-ms to send its
 * next complete request. */
static void idle_arm(struct http_conn *c)
{
    int64_t ms = c->hs->lim.idle_timeout_ms;
    if (ms > 0 && !c->closing)
        uv_timer_start(&c->idle, on_idle, (uint64_t)ms, 0);
}

/* ---- writing ---------------------------------------------------------- */

static void maybe_close_after_write(struct http_conn *c)
{
    if (c->close_after_write && !c->writes_out && !c->active)
        http_close(c, "response sent, connection: close");
}

static void on_written(uv_write_t *req, int status)
{
    struct wreq *w = (struct wreq *)req;
    struct http_conn *c = w->c;
    folio_free(w->hdr);
    folio_free(w->body);
    folio_free(w);
    c->writes_out--;
    if (c->closing)
        return;
    if (status < 0) {
        http_close(c, uv_strerror(status));
        return;
    }
    maybe_close_after_write(c);
}

/* Queues hdr + body (both owned, either may be NULL).  -EPIPE when the
 * connection is closing or was dropped for not reading. */
static int conn_write(struct http_conn *c, char *hdr, size_t hlen, char *body, size_t blen)
{
    if (c->closing) {
        folio_free(hdr);
        folio_free(body);
        return -EPIPE;
    }
    struct wreq *w = folio_calloc(1, sizeof(*w));
    if (!w) {
        folio_free(hdr);
        folio_free(body);
        http_close(c, "out of memory");
        return -EPIPE;
    }
    w->c = c;
    w->hdr = hdr;
    w->body = body;
    uv_buf_t bufs[2];
    int n = 0;
    if (hdr)
        bufs[n++] = uv_buf_init(hdr, (unsigned)hlen);
    if (body && blen)
        bufs[n++] = uv_buf_init(body, (unsigned)blen);
    int rc = uv_write(&w->req, &c->u.s, bufs, (unsigned)n, on_written);
    if (rc) {
        folio_free(hdr);
        folio_free(body);
        folio_free(w);
        http_close(c, uv_strerror(rc));
        return -EPIPE;
    }
    c->writes_out++;
    size_t pending = uv_stream_get_write_queue_size(&c->u.s);
    if (pending > (size_t)c->hs->lim.max_pending_output) {
        srv_log(SRV_LOG_INFO, "conn %llu: slow reader: %zu bytes unsent (cap %lld); dropping it",
                (unsigned long long)c->id, pending, (long long)c->hs->lim.max_pending_output);
        c->hs->st.dropped_slow_total++;
        http_close(c, NULL);
        return -EPIPE;
    }
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
    if (!c->keep_alive || c->hs->draining)
        c->close_after_write = true;
    folio_buf_printf(&h,
                     "HTTP/1.1 %d %s\r\nServer: foliod\r\nContent-Type: %s\r\n"
                     "Content-Length: %zu\r\n%s%s\r\n",
                     status, http_status_text(status), ctype, len,
                     c->close_after_write ? "Connection: close\r\n" : "", extra ? extra : "");
    count_status(c->hs, status);
    char *b = NULL;
    if (len) {
        b = folio_malloc(len);
        if (b)
            memcpy(b, body, len);
    }
    if (h.oom || (len && !b)) {
        folio_buf_free(&h);
        folio_free(b);
        http_close(c, "out of memory");
        return;
    }
    size_t hl;
    char *hp = folio_buf_steal(&h, &hl);
    conn_write(c, hp, hl, b, len);
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
    if (c->hs->draining || !c->keep_alive)
        c->close_after_write = true;
    struct folio_buf h = {0};
    folio_buf_printf(&h,
                     "HTTP/1.1 200 OK\r\nServer: foliod\r\nContent-Type: text/event-stream\r\n"
                     "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n%s\r\n",
                     c->close_after_write ? "Connection: close\r\n" : "");
    count_status(c->hs, 200);
    if (h.oom) {
        folio_buf_free(&h);
        return -ENOMEM;
    }
    size_t hl;
    char *hp = folio_buf_steal(&h, &hl);
    return conn_write(c, hp, hl, NULL, 0);
}

int http_stream_chunk(struct http_conn *c, const char *data, size_t len)
{
    if (!len)
        return 0;
    struct folio_buf b = {0};
    folio_buf_printf(&b, "%zx\r\n", len);
    folio_buf_append(&b, data, len);
    folio_buf_puts(&b, "\r\n");
    if (b.oom) {
        folio_buf_free(&b);
        http_close(c, "out of memory");
        return -EPIPE;
    }
    size_t n;
    char *p = folio_buf_steal(&b, &n);
    return conn_write(c, p, n, NULL, 0);
}

void http_stream_end(struct http_conn *c)
{
    char *p = folio_strdup("0\r\n\r\n");
    if (p)
        conn_write(c, p, 5, NULL, 0);
}

/* ---- parsing ---------------------------------------------------------- */

static struct http_conn *PC(llhttp_t *p)
{
    return p->data;
}

static int on_message_begin(llhttp_t *p)
{
    struct http_conn *c = PC(p);
    c->url.len = c->body.len = c->hfield.len = c->hval.len = c->auth.len = 0;
    c->header_bytes = 0;
    c->reject_status = 0;
    c->msg_done = false;
    c->in_msg = true;
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

static int on_header_value_complete(llhttp_t *p)
{
    struct http_conn *c = PC(p);
    if (c->hfield.len == 13 && !strncasecmp(c->hfield.p, "authorization", 13)) {
        c->auth.len = 0;
        folio_buf_append(&c->auth, c->hval.p ? c->hval.p : "", c->hval.len);
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
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    struct http_conn *c = PC(p);
    if (c->body.len + n > (size_t)c->hs->lim.max_body) {
        c->reject_status = 413;
        return -1;
    }
    folio_buf_append(&c->body, at, n);
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    struct http_conn *c = PC(p);
    c->msg_done = true;
    c->in_msg = false;
    c->keep_alive = llhttp_should_keep_alive(p);
    return HPE_PAUSED;
}

static const llhttp_settings_t settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

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
    else
        srv_api_error_set(&e, 400, "invalid_request_error", NULL, NULL, "malformed HTTP: %s (%s)",
                          llhttp_errno_name(rc), llhttp_get_error_reason(&c->parser));
    c->keep_alive = false;
    c->in_len = 0;
    http_error(c, &e, NULL);
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
        .auth = c->auth.p,
        .peer_uid = c->peer_uid,
        .is_tcp = c->is_tcp,
    };
    c->hs->cb.on_request(c->hs->cb.user, c, &rq);
}

static void process(struct http_conn *c)
{
    while (!c->closing && !c->active && !c->close_after_write && c->in_len > 0) {
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
    if (!c->closing && !c->reading && c->in_len < MAX_BUFFERED_WHILE_BUSY) {
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

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct http_conn *c = st->data;
    (void)buf;
    if (nread == 0 || c->closing)
        return;
    if (nread < 0) {
        if (nread == UV_ENOBUFS) {
            http_close(c, "out of memory");
            return;
        }
        /* EOF or error.  With a request active the client is gone: abort.
         * A half-parsed request gets a 400 if the socket can still
         * carry it (half-close). */
        c->hs->st.disconnects_total += c->active ? 1 : 0;
        if (!c->active && nread == UV_EOF && !c->close_after_write) {
            if (c->in_len)
                process(c);
            if (!c->closing && !c->active && c->in_msg && !c->close_after_write) {
                c->reject_status = 0;
                parse_error(c, HPE_INVALID_EOF_STATE);
                uv_read_stop(st);
                c->reading = false;
                return;
            }
            if (c->writes_out && !c->closing) {
                c->close_after_write = true;
                uv_read_stop(st);
                c->reading = false;
                return;
            }
        }
        http_close(c, nread == UV_EOF ? "peer closed" : uv_strerror((int)nread));
        return;
    }
    c->in_len += (size_t)nread;
    if (c->active) {
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
    hs->lim = *lim;
    hs->cb = *cb;
}

void http_conn_hold(struct http_conn *c, void *active)
{
    c->active = active;
}

void http_server_drain(struct http_server *hs)
{
    hs->draining = true;
    for (struct http_conn *c = hs->conns, *next; c; c = next) {
        next = c->next;
        if (c->active)
            continue;
        if (c->writes_out)
            c->close_after_write = true;
        else
            http_close(c, "draining");
    }
}

void http_server_close_all(struct http_server *hs, const char *why)
{
    for (struct http_conn *c = hs->conns, *next; c; c = next) {
        next = c->next;
        http_close(c, why);
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
    uv_timer_init(hs->loop, &c->idle); /* cannot fail */
    c->idle.data = c;
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
    if (hs->st.n_open > hs->lim.max_connections) {
        srv_log(SRV_LOG_INFO, "refusing connection: %d open (--max-connections)",
                hs->st.n_open - 1);
        http_close(c, NULL);
        return;
    }
    if (!is_tcp) {
        uv_os_fd_t fd;
        struct ucred cr;
        socklen_t len = sizeof(cr);
        if (!uv_fileno(&c->u.h, &fd) && !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
            c->peer_uid = cr.uid;
    }
    llhttp_init(&c->parser, HTTP_REQUEST, &settings);
    c->parser.data = c;
    idle_arm(c);
    if (!uv_read_start(&c->u.s, on_alloc, on_read))
        c->reading = true;
}
