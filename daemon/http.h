/*
 * daemon/http.h — the HTTP/1.1 layer: connections, llhttp parsing,
 * keep-alive and pipelining, response writing, back-pressure, idle
 * clocks.  It knows nothing of routes, completions or the engine: it hands
 * each parsed request up through callbacks and calls nothing above it
 * (the model is Knot Resolver's daemon/http.c below its session layer,
 * and Redis's ae.c calling up only through registered callbacks).
 *
 * Ownership:
 *   struct http_server  owned by the caller (embedded in struct srv); it
 *                       owns the list of connections and their counters.
 *   struct http_conn    one per accepted socket, owned by the layer
 *                       (http*.c, defined in http_internal.h), freed in
 *                       its libuv close callback.  At most one request is
 *                       served at a time per connection: pipelined requests
 *                       wait, parsed one by one.
 *
 * A request's life: on_request(view) — the handler answers at once
 * (http_respond / http_error), or keeps the request open by calling
 * http_conn_hold(c, active) and later streams / responds and calls
 * http_request_done(c).  If the connection closes while a request is
 * held, on_abandon(active) tells the owner (the request must stop using
 * c; http.c never touches `active`).  on_closed fires after a connection
 * is freed (drain bookkeeping).
 *
 * Threading: loop thread only.
 */
#ifndef FOLIO_DAEMON_HTTP_H
#define FOLIO_DAEMON_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "api.h"

struct http_conn;

enum http_method { HTTP_M_OTHER, HTTP_M_GET, HTTP_M_POST, HTTP_M_DELETE };

/* One parsed request, valid during on_request only. */
struct http_request {
    enum http_method method;
    const char *method_name; /* as sent */
    const char *url;         /* NUL-terminated */
    size_t path_len;         /* url bytes before '?' or '#' */
    const char *body;        /* NUL-terminated, "" when empty */
    size_t body_len;
    const char *auth; /* the Authorization header (else "Bearer " + x-api-key), or NULL */
    /* Host, Origin and Sec-Fetch-Site headers, or NULL (TCP checks) */
    const char *host, *origin, *fetch_site;
    const char *content_type; /* the Content-Type header, or NULL */
    int64_t peer_uid;         /* Unix socket peer (SO_PEERCRED); -1 on TCP */
    bool is_tcp;
    void *acct; /* the connection's accounting object (on_accept), or NULL */
};

/* Who is at the other end, for accept-time admission. */
struct http_peer {
    bool is_tcp;
    int64_t uid;    /* Unix socket: SO_PEERCRED uid; -1 on TCP */
    uint8_t ip[16]; /* TCP: the address (IPv4 as v4-mapped IPv6) */
};

struct http_limits {
    int64_t max_body;           /* bytes: 413 above */
    int64_t max_pending_output; /* stream bytes unsent before a slow reader is dropped */
    int64_t idle_timeout_ms;    /* to send each complete request, and for queued output to
                                   make progress; 0: none (output: 60 s) */
    int64_t max_connections;
};

struct http_callbacks {
    void *user;
    void (*on_request)(void *user, struct http_conn *c, const struct http_request *rq);
    void (*on_abandon)(void *user, void *active);
    void (*on_closed)(void *user);
    /* Admission and accounting (each may be NULL).  on_accept: 0 with
     * *acct set (kept for the connection's life, released by on_release
     * when it is freed), or -EBUSY with e filled: the connection is
     * answered with e (503) and closed after a short linger.  on_buffer:
     * request-body bytes taken (delta > 0; -ENOBUFS refuses them: the
     * request is answered 503 and the connection closed) or let go. */
    int (*on_accept)(void *user, const struct http_peer *p, void **acct, struct srv_api_error *e);
    void (*on_release)(void *user, void *acct);
    int (*on_buffer)(void *user, void *acct, int64_t delta);
};

/* Counters for /metrics. */
struct http_stats {
    double connections_total;
    double disconnects_total;  /* connections closed by the peer with a request held */
    double dropped_slow_total; /* slow readers dropped */
    double responses[6];       /* by status class 1xx..5xx; index 0 unused */
    double refused_total;      /* connections answered 503 at accept (a connection limit) */
    int n_open;
    int n_refused; /* of n_open: lingering after an error that ends them (http_admit.c) */
};

struct http_server {
    uv_loop_t *loop;
    struct http_limits lim;
    struct http_callbacks cb;
    struct http_stats st;
    struct http_conn *conns;
    uint64_t next_id;
    bool draining;       /* responses say Connection: close */
    const char *replica; /* X-Folio-Replica on every response (set after init) */
};

void http_server_init(struct http_server *hs, uv_loop_t *loop, const struct http_limits *lim,
                      const struct http_callbacks *cb);
/* Accepts one connection from a listener (call from its connection cb). */
void http_accept(struct http_server *hs, uv_stream_t *listener, bool is_tcp);
/* Drain: from now on every response closes its connection; idle
 * connections close now (after their pending writes).  Held requests go
 * on until done. */
void http_server_drain(struct http_server *hs);
/* Closes every connection (held requests are abandoned). */
void http_server_close_all(struct http_server *hs, const char *why);
/* Ends every connection: those serving a request with http_conn_fail(e)
 * (the client reads e), idle ones closed now. */
void http_server_fail_all(struct http_server *hs, const struct srv_api_error *e);

/* Keeps the request open past on_request; `active` is the owner's. */
void http_conn_hold(struct http_conn *c, void *active);
/* The held request is done: parse the next pipelined one, if any. */
void http_request_done(struct http_conn *c);
/* The next response on c says Connection: close, and c closes after it. */
void http_conn_close_after(struct http_conn *c);

/* A complete response with a Content-Length body.  extra: header lines,
 * each ending in \r\n, or NULL. */
void http_respond(struct http_conn *c, int status, const char *ctype, const char *body, size_t len,
                  const char *extra);
void http_error(struct http_conn *c, const struct srv_api_error *e, const char *extra);
/* The current request's errors are written in Anthropic's shape
 * (srv_api_error_json_anthropic): its Messages routes. */
void http_conn_anthropic(struct http_conn *c);
/* Streaming: headers for a text/event-stream response (chunked; for an
 * HTTP/1.0 client close-delimited), then chunks, then the end.  -EPIPE
 * when the connection went away (dropped for a slow reader, with a final
 * error event, or closed: on_abandon has run then).  Every response is
 * queued and written in bounded chunks (see http_out.c); the body passed in is
 * copied. */
int http_stream_begin(struct http_conn *c);
int http_stream_chunk(struct http_conn *c, const char *data, size_t len);
void http_stream_end(struct http_conn *c);
void http_close(struct http_conn *c, const char *why);
/* Ends the request on c early with an error the client can read: before
 * the headers an error response; in a stream a final `data: {"error":...}`
 * event, then the end of the body.  The held request is abandoned
 * (on_abandon), nothing further is sent or read, and the connection
 * closes once that is written (or after a short linger). */
void http_conn_fail(struct http_conn *c, const struct srv_api_error *e);
/* The same, with event (len bytes: complete SSE events, the API's own
 * shape of a failure) as a stream's last event instead; NULL: the
 * default one. */
void http_conn_fail_sse(struct http_conn *c, const struct srv_api_error *e, const char *event,
                        size_t len);
/* The status of the response to the current request (0: none yet). */
int http_conn_status(const struct http_conn *c);
const char *http_status_text(int status);

#endif
