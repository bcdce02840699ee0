/*
 * daemon/http_internal.h — what the files of the HTTP layer share: the
 * connection struct, the output segment, the limits and clocks' constants,
 * and the few functions one file calls in another (http__ prefix).  Not
 * for use outside http*.c; the public interface is http.h.
 *
 * The layer, by job:
 *   http.c        connection lifecycle (accept, close, free), reading and
 *                 llhttp parsing, dispatching one request at a time;
 *   http_out.c    the output queue, bounded writes, back-pressure,
 *                 responses, streams and early ends (http_conn_fail);
 *   http_clock.c  the one timer per connection: idle, body rate, write
 *                 progress;
 *   http_admit.c  admission at accept (connection limit, the owner's
 *                 on_accept), the lingering close of a connection
 *                 answered an error mid-request, request-body accounting,
 *                 drain and fail-all.
 *
 * Invariants of struct http_conn (all files keep them):
 *   - `handles` counts the open libuv handles (stream, timer); the struct is
 *     freed in the close callback that takes it to 0, never before;
 *   - at most one request is served at a time (`active` != NULL while held);
 *   - at most one uv_write is in flight (`writing`), of at most OUT_CHUNK
 *     bytes; out_queued counts queued bytes not yet acknowledged, out_capped
 *     the stream bytes among them not yet handed to libuv;
 *   - once `closing` or `failed`, nothing more is queued; nor once
 *     `refused` (its answer is the last: close_after_write is set), and
 *     once that answer is out its write side is shut (`shut_wr`).
 *
 * Threading: loop thread only.
 */
#ifndef FOLIO_DAEMON_HTTP_INTERNAL_H
#define FOLIO_DAEMON_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <llhttp.h>
#include <uv.h>

#include "folio/common.h"
#include "http.h"

#define MAX_URL                 8192
#define MAX_HEADERS             65536
#define MAX_BUFFERED_WHILE_BUSY 65536
#define REFUSED_LINGER_MS       1000  /* lingering: the longest gap between the client's bytes */
#define LINGER_TOTAL_MS         30000 /* lingering at most, however it keeps sending */
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
    struct folio_buf url, body, hfield, hval, auth, host, origin, fetch_site, ctype;
    void *acct;           /* the owner's accounting object (on_accept) */
    int64_t body_counted; /* body bytes reported to on_buffer, not yet given back */
    bool refused;         /* answered an error that ends the connection (503 at accept
                           * or over its body's budget, 413, any other parse error, 408):
                           * lingers, input dropped, until the client closes */
    bool shut_wr;         /* lingering, its answer out: uv_shutdown was asked */
    bool anthropic;       /* this request's errors in Anthropic's shape (http_conn_anthropic) */
    size_t header_bytes;
    int reject_status; /* 413 / 414 / 417 / 431 / 400 found while parsing */
    const char *reject_why;
    int status; /* of the current request's response; 0 before it starts */
    bool msg_done, in_msg, keep_alive, expect_continue, in_body;
    uint64_t msg_t0;        /* ns: the current message's first byte parsed */
    uint64_t body_t0;       /* ns: headers complete */
    uint64_t idle_deadline; /* ns: the idle clock's end; 0 none */
    uint64_t linger_end;    /* ns: lingering: idle_deadline never passes it */
    /* serving */
    void *active; /* the held request (http_conn_hold), the owner's */
    bool closing, close_after_write;
    bool streaming, chunked; /* http_stream_begin ran; chunked framing */
    bool failed;             /* http_conn_fail ran: nothing more is queued */
    /* output queue (see http_out.c) */
    struct oseg *oq_head, *oq_tail;
    size_t out_queued; /* bytes in the queue not yet acknowledged */
    size_t out_capped; /* stream bytes not yet handed to libuv */
    bool over_cap;     /* out_capped > max_pending_output: the short write clock */
    bool writing;
    size_t wr_len;
    uv_write_t wr;
    uv_shutdown_t shut; /* the lingering close's half-close (http_admit.c) */
    uv_timer_t timer;   /* the clocks (see http_clock.c) */
    int handles;        /* open libuv handles (stream, timer); freed at 0 */
};

/* http.c */
void http__abandon(struct http_conn *c);
void http__process(struct http_conn *c);
void http__on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
void http__on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);
/* The access line of a request answered by this layer before it reached
 * the owner (a parse error, a body too slow). */
void http__access_log(struct http_conn *c, int status);

/* http_out.c */
void http__oq_free(struct http_conn *c);
int http__oq_push(struct http_conn *c, const char *a, size_t an, const char *b, size_t bn,
                  const char *tail, bool capped);
void http__maybe_close_after_write(struct http_conn *c);

/* http_clock.c */
void http__idle_arm(struct http_conn *c);
void http__clock_update(struct http_conn *c);

/* http_admit.c */
int http__admit(struct http_conn *c);
void http__conn_linger(struct http_conn *c);
void http__linger_shut(struct http_conn *c);
void http__body_release(struct http_conn *c);

#endif
