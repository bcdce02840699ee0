/*
 * daemon/server.h — foliod's server state, shared by server.c (listeners,
 * signals, drain, routes, completions, metrics) and http.c (connections,
 * HTTP/1.1 parsing, response writing).  Internal to daemon/.
 *
 * Ownership:
 *   struct srv        one per process; owns listeners, connections list,
 *                     the engine driver and the backend.
 *   struct srv_conn   one per accepted socket; freed in its close callback.
 *                     At most one completion is active per connection
 *                     (pipelined requests wait, parsed one at a time).
 *   struct srv_comp   one per POST /v1/completions; owns its choices.  It
 *                     outlives its connection when the client goes away:
 *                     conn is set NULL, every choice is aborted, and the
 *                     comp is freed when the backend has reported the last
 *                     `finished` (never while a step references it).
 *
 * Threading: everything here is loop-thread only.
 */
#ifndef FOLIO_DAEMON_SERVER_H
#define FOLIO_DAEMON_SERVER_H

#include <llhttp.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "api.h"
#include "buf.h"
#include "config.h"
#include "engine.h"
#include "metrics.h"
#include "utf8.h"

struct srv;
struct srv_comp;

struct srv_conn {
    union {
        uv_handle_t h;
        uv_stream_t s;
        uv_pipe_t pipe;
        uv_tcp_t tcp;
    } u;
    struct srv *srv;
    struct srv_conn *prev, *next;
    uint64_t id;
    bool is_tcp;
    int64_t peer_uid; /* -1 unknown (TCP) */
    llhttp_t parser;
    /* unparsed input (kept while a request is being served) */
    char *in;
    size_t in_len, in_cap;
    bool reading;
    /* the message being parsed */
    struct srv_buf url, body, hfield, hval, auth;
    size_t header_bytes;
    int reject_status; /* 413 / 431 / 414 found while parsing */
    bool msg_done, in_msg, keep_alive;
    /* serving */
    struct srv_comp *comp;
    bool closing, close_after_write;
    int writes_out;  /* uv_write requests in flight */
    uv_timer_t idle; /* closes a connection that sends no complete request */
    int handles;     /* open libuv handles (stream, timer); freed at 0 */
};

struct srv_choice {
    struct eng_req er;
    struct srv_comp *comp;
    int index;
    struct srv_utf8 u8;
    struct srv_buf text; /* non-stream: all text; stream: text not yet sent */
    size_t scanned;      /* text bytes already searched for stop strings */
    int32_t *tokens;     /* generated ids */
    int32_t n_tokens, cap_tokens;
    int32_t sent_tokens;        /* stream: ids already sent */
    struct sampler_result *lps; /* [cap_tokens] per generated token, with logprobs */
    size_t echo_len;            /* leading text bytes that are the echoed prompt */
    int64_t lp_offset;          /* logprobs text_offset of the next token */
    bool role_sent;             /* chat stream: the {"role"} delta went out */
    bool prompt_lp_sent;        /* echo + logprobs: the prompt tokens went out */
    const char *finish;         /* "stop" | "length" | NULL (running) */
    bool done;                  /* backend reported finished */
    bool stopped;               /* a stop string ended it (abort sent) */
    uint64_t t_first, t_last;
};

struct srv_comp {
    struct srv *srv;
    struct srv_conn *conn; /* NULL once the client is gone */
    struct srv_comp_params p;
    int tenant;
    char id[48];
    int64_t created;
    int n_choices, n_live; /* n_live: choices the backend still holds */
    struct srv_choice *ch;
    int64_t prompt_tokens;
    uint64_t t_arrival;
    bool headers_sent, failed;
};

struct srv_tenant_metrics {
    double prompt_tokens, generation_tokens;
    double req_stop, req_length, req_abort, req_error;
    double rejected_429;
    struct srv_hist e2e;
};

struct srv {
    uv_loop_t *loop;
    struct srv_config *cfg;
    uv_pipe_t unix_srv;
    uv_tcp_t tcp_srv;
    bool have_unix, have_tcp;
    uv_signal_t sig_term, sig_int, sig_pipe_dummy;
    uv_timer_t drain_timer;
    bool draining, drain_timer_on, stopping;
    int sigint_count;
    int log_level; /* 0 error, 1 info, 2 debug */

    const struct eng_backend_ops *ops;
    void *backend;
    struct eng_model_info mi;
    int chat_tmpl; /* enum chat_template for chat requests; 0: none usable */
    srv_engine_t *eng;

    struct srv_conn *conns;
    int n_conns;
    int n_comps; /* live completions (including detached ones) */
    uint64_t next_id;
    int64_t started_at;

    /* metrics */
    struct srv_hist ttft, itl, e2e, queue, step, step_tokens;
    double steps_total, connections_total, disconnects_total, dropped_slow_total;
    double http_requests[6]; /* by status class: 1xx..5xx, index 0 unused */
    struct srv_tenant_metrics tm[SRV_MAX_TENANTS];
};

/* ---- http.c ----------------------------------------------------------- */

/* Accepts one connection from a listener. */
void srv_http_accept(struct srv *s, uv_stream_t *listener, bool is_tcp);
/* A complete response with a Content-Length body.  extra: header lines,
 * each ending in \r\n, or NULL. */
void srv_http_respond(struct srv_conn *c, int status, const char *ctype, const char *body,
                      size_t len, const char *extra);
void srv_http_error(struct srv_conn *c, const struct srv_api_error *e, const char *extra);
/* Streaming: headers for a chunked text/event-stream response, then
 * chunks, then the terminator.  Returns -EPIPE when the connection went
 * away (dropped for a slow reader, or closed). */
int srv_http_stream_begin(struct srv_conn *c);
int srv_http_stream_chunk(struct srv_conn *c, const char *data, size_t len);
void srv_http_stream_end(struct srv_conn *c);
/* The active request is done: parse the next pipelined one, if any. */
void srv_http_request_done(struct srv_conn *c);
void srv_http_close(struct srv_conn *c, const char *why);
const char *srv_http_status_text(int status);

/* ---- server.c --------------------------------------------------------- */

/* Routes one parsed request (conn->url, body, method). */
void srv_route(struct srv_conn *c);
/* The connection is closing with a completion active: abort it. */
void srv_comp_detach(struct srv_comp *comp);
void srv_log(struct srv *s, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Called when a connection is gone (drain bookkeeping). */
void srv_conn_gone(struct srv *s);

/* Entry point of foliod (main.c) and of test daemons with another backend. */
int srv_main(int argc, char **argv, eng_backend_factory factory);

/* Renders /metrics and /v1/kv (server.c). */
void srv_metrics_render(struct srv *s, struct srv_buf *b);
void srv_kv_render(struct srv *s, struct srv_buf *b);

#endif
