/*
 * daemon/server.h — foliod's server state, shared by the files above
 * http.c (see http.h, which knows none of this):
 *
 *   server.c   lifecycle: start-up ladder, listeners, signals, drain
 *   routes.c   the {method, path, handler} table and the small routes
 *   comp.c     completions: per-request state, engine events, streaming
 *   render.c   OpenAI JSON rendering (pure functions, render.h)
 *   stats.c    /metrics and /v1/kv
 *
 * Ownership:
 *   struct srv        one per process; owns listeners, the HTTP layer
 *                     (struct http_server), the engine driver and the
 *                     backend.
 *   struct srv_comp   one per completion request; owns its choices.  It
 *                     outlives its connection when the client goes away
 *                     (http's on_abandon: srv_comp_abandon): conn is set
 *                     NULL, every choice is aborted, and the comp is freed
 *                     when the backend has reported the last `finished`
 *                     (never while a step references it) — Redis's
 *                     freeClientAsync idea.
 *
 * Threading: everything here is loop-thread only.
 */
#ifndef FOLIO_DAEMON_SERVER_H
#define FOLIO_DAEMON_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "api.h"
#include "buf.h"
#include "config.h"
#include "engine.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "utf8.h"

struct srv;
struct srv_comp;

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
    enum eng_finish finish;     /* NONE while running */
    bool done;                  /* backend reported finished */
    bool stopped;               /* a stop string ended it (abort sent) */
    uint64_t t_first, t_last;
};

struct srv_comp {
    struct srv *srv;
    struct http_conn *conn; /* NULL once the client is gone */
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
    double finished[ENG_FINISH_COUNT]; /* sequences by finish reason */
    double rejected_429;
    struct srv_hist e2e;
};

struct srv {
    uv_loop_t *loop;
    struct srv_config *cfg;
    uv_pipe_t unix_srv;
    uv_tcp_t tcp_srv;
    bool have_unix, have_tcp;
    uv_signal_t sig_term, sig_int;
    uv_timer_t drain_timer;
    bool draining, drain_timer_on, stopping;
    int sigint_count;

    const struct eng_backend_ops *ops;
    void *backend;
    struct eng_model_info mi;
    int chat_tmpl; /* enum chat_template for chat requests; 0: none usable */
    srv_engine_t *eng;
    struct http_server http;

    int n_comps; /* live completions (including detached ones) */
    uint64_t next_id;
    int64_t started_at;

    /* metrics */
    struct srv_hist ttft, itl, e2e, queue, step, step_tokens;
    double steps_total;
    struct srv_tenant_metrics tm[SRV_MAX_TENANTS];
};

/* ---- server.c --------------------------------------------------------- */

/* Entry point of foliod (main.c) and of test daemons with another backend. */
int srv_main(int argc, char **argv, eng_backend_factory factory);
/* Exits the loop once draining and nothing is left (after a completion or
 * a connection is gone). */
void srv_maybe_exit(struct srv *s);

/* ---- routes.c --------------------------------------------------------- */

/* http's on_request: routes one request. */
void srv_on_request(void *user, struct http_conn *c, const struct http_request *rq);
/* The backend's tokenizer as api.c's srv_tokenize_fn (ctx: struct srv). */
int srv_tokenize_hook(void *ctx, const char *text, size_t n, bool special, int32_t **out,
                      int32_t *n_out);

/* ---- comp.c ----------------------------------------------------------- */

void srv_comp_route(struct srv *s, struct http_conn *c, const struct http_request *rq, bool chat);
/* http's on_abandon: the connection of a held completion closed. */
void srv_comp_abandon(void *user, void *comp);
/* The engine events completions answer (user: struct srv). */
void srv_comp_events(struct srv *s, struct eng_events *ev);

/* ---- stats.c ---------------------------------------------------------- */

/* Renders /metrics and /v1/kv. */
void srv_metrics_render(struct srv *s, struct srv_buf *b);
void srv_kv_render(struct srv *s, struct srv_buf *b);

#endif
