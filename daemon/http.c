/*
 * daemon/http.c — client connections: accept, read, HTTP/1.1 parsing with
 * llhttp (keep-alive, pipelining), one request at a time handed up.  The
 * layer below server.c (see http.h): requests go up through the
 * callbacks in struct http_server, nothing here calls the server.  The
 * layer's other files: http_out.c (output queue, responses, streams),
 * http_clock.c (the per-connection timer), http_admit.c (admission,
 * linger, body accounting, drain); what they share is http_internal.h.
 *
 * Connection lifecycle: http_accept allocates a struct http_conn, links
 * it into hs->conns, opens its stream and timer (handles = 2), asks
 * http__admit, and starts reading.  http_close abandons a held request,
 * stops reading and closes both handles; the struct is freed in
 * on_closed when the last one is closed (its accounting released, the
 * owner's on_closed told).
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
 * Parse errors are answered with a 400 (413 body too large, 414 URL too
 * long, 417 an expectation other than 100-continue, 431 headers too large,
 * 503 a body over the owner's budget) and `Connection: close`; they affect
 * only their own connection, which then closes the lingering way
 * (http__conn_linger: the rest of the request, still arriving, is read
 * and dropped, so the close does not reset the connection and destroy the
 * answer).  They get an access line here (the owner never sees the
 * request), with the method and path if they were parsed.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stddef.h>

#include <llhttp.h>

#include "folio/common.h"
#include "http_internal.h"
#include "log.h"

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
    http__oq_free(c);
    folio_free(c->in);
    folio_buf_free(&c->url);
    folio_buf_free(&c->body);
    folio_buf_free(&c->hfield);
    folio_buf_free(&c->hval);
    folio_buf_free(&c->auth);
    folio_buf_free(&c->host);
    folio_buf_free(&c->origin);
    folio_buf_free(&c->fetch_site);
    folio_buf_free(&c->ctype);
    folio_free(c);
    if (hs->cb.on_closed)
        hs->cb.on_closed(hs->cb.user);
}

/* The held request is given up: the owner is told (it must stop using c). */
void http__abandon(struct http_conn *c)
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
    http__abandon(c);
    uv_read_stop(&c->u.s);
    uv_close(&c->u.h, on_closed);
    uv_close((uv_handle_t *)&c->timer, on_closed);
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
    struct folio_buf *bufs[] = {&c->url,  &c->body,   &c->hfield,     &c->hval, &c->auth,
                                &c->host, &c->origin, &c->fetch_site, &c->ctype};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(bufs); i++) {
        bufs[i]->len = 0;
        if (bufs[i]->p)
            bufs[i]->p[0] = 0;
    }
    http__body_release(c);
    c->header_bytes = 0;
    c->reject_status = 0;
    c->reject_why = NULL;
    c->msg_done = false;
    c->msg_t0 = folio_now_ns();
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
        {"content-type", offsetof(struct http_conn, ctype)},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(keep); i++)
        if (header_is(c, keep[i].name)) {
            struct folio_buf *b = (struct folio_buf *)((char *)c + keep[i].off);
            b->len = 0;
            folio_buf_append(b, c->hval.p ? c->hval.p : "", c->hval.len);
        }
    /* Anthropic's clients send the key alone in x-api-key: taken as a
     * bearer key unless the request has an Authorization header (which
     * wins, whichever comes first) */
    if (header_is(c, "x-api-key") && !c->auth.len) {
        folio_buf_puts(&c->auth, "Bearer ");
        folio_buf_append(&c->auth, c->hval.p ? c->hval.p : "", c->hval.len);
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
        http__clock_update(c);
    }
    /* the interim answer the client waits for before sending its body
     * (HTTP/1.1 only; sent even if some of the body is already here) */
    if (c->expect_continue && body && p->http_major == 1 && p->http_minor >= 1)
        http__oq_push(c, "HTTP/1.1 100 Continue\r\n\r\n", 25, NULL, 0, NULL, false);
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

static void consume(struct http_conn *c, size_t n)
{
    memmove(c->in, c->in + n, c->in_len - n);
    c->in_len -= n;
}

/* Method and path as far as they were parsed ("-" before), no tenant:
 * the owner never saw the request. */
void http__access_log(struct http_conn *c, int status)
{
    bool have_url = c->in_msg && c->url.len; /* the method is parsed before the URL */
    const char *url = have_url ? c->url.p : "-";
    struct srv_access_line a = {
        .method =
            have_url ? llhttp_method_name((llhttp_method_t)llhttp_get_method(&c->parser)) : "-",
        .path = url,
        .path_len = (int)FOLIO_MIN(strcspn(url, "?#"), 512),
        .status = status,
        .prompt_tokens = -1,
        .ttft_s = -1,
        .duration_s = c->in_msg ? (double)(folio_now_ns() - c->msg_t0) * 1e-9 : 0,
    };
    srv_log_access(&a);
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
    http__access_log(c, status);
    c->keep_alive = false;
    c->in_len = 0;
    http__body_release(c);
    c->in_msg = false;
    http_error(c, &e, NULL);
    /* the rest of the request may be in flight, whatever the error (a
     * body after a bad request line, a 417's body): closing with it unread
     * would reset the connection, and the client could lose the answer (a
     * 2 MB chunked body answered 413 after its first megabyte did; 2 MB
     * after a 400, 414, 417 or 431 lost it on TCP nearly every time) */
    http__conn_linger(c);
}

/* Hands the parsed message up as a request view. */
static void dispatch(struct http_conn *c)
{
    const char *url = c->url.p ? c->url.p : "";
    llhttp_method_t m = (llhttp_method_t)llhttp_get_method(&c->parser);
    struct http_request rq = {
        .method = m == HTTP_GET      ? HTTP_M_GET
                  : m == HTTP_POST   ? HTTP_M_POST
                  : m == HTTP_DELETE ? HTTP_M_DELETE
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
        .content_type = c->ctype.len ? c->ctype.p : NULL,
        .peer_uid = c->peer_uid,
        .is_tcp = c->is_tcp,
        .acct = c->acct,
    };
    c->status = 0;
    c->anthropic = false;
    c->hs->cb.on_request(c->hs->cb.user, c, &rq);
    /* the view is gone: the body's bytes are no longer held for it */
    http__body_release(c);
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
        return; /* http__process() goes on */
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

void http__process(struct http_conn *c)
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
            http__idle_arm(c);
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
        if (!uv_read_start(&c->u.s, http__on_alloc, http__on_read))
            c->reading = true;
    }
}

void http_request_done(struct http_conn *c)
{
    c->active = NULL;
    if (c->closing)
        return;
    http__idle_arm(c);
    if (c->hs->draining && !c->in_len)
        c->close_after_write = true; /* pipelined requests still get their 503 */
    if (c->close_after_write) {
        http__maybe_close_after_write(c);
        return;
    }
    http__process(c);
}

void http__on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
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

void http__on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct http_conn *c = st->data;
    (void)buf;
    if (nread == 0 || c->closing)
        return;
    if (c->refused) { /* lingering: drop input, close at the client's end */
        c->in_len = 0;
        if (nread > 0) { /* still sending: another gap's grace, up to the end */
            const uint64_t d = folio_now_ns() + (uint64_t)REFUSED_LINGER_MS * 1000000;
            c->idle_deadline = d < c->linger_end ? d : c->linger_end;
        } else if (nread == UV_EOF && c->out_queued) {
            /* its answer is not all out: closed once it is (on_written) */
            uv_read_stop(st);
            c->reading = false;
            c->peer_eof = true;
        } else if (nread < 0)
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
            http__process(c);
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
    http__process(c);
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
    http__clock_update(c);
}

void http_conn_close_after(struct http_conn *c)
{
    c->close_after_write = true;
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
    if (http__admit(c))
        return;
    llhttp_init(&c->parser, HTTP_REQUEST, &settings);
    c->parser.data = c;
    http__idle_arm(c);
    if (!uv_read_start(&c->u.s, http__on_alloc, http__on_read))
        c->reading = true;
}
