/*
 * tools/bench_run.h — the load generator's engine: one thread, one libuv
 * loop, one connection per request (Unix socket or TCP), HTTP/1.1
 * responses parsed by llhttp, SSE chunks by bench_sse (bench_core.h).
 *
 * The caller prepares every request (body, intended arrival time, tenant)
 * before the run; bench_run_exec() sends them at their arrival times,
 * never more than max_concurrency at once, records per-chunk timestamps
 * (uv_hrtime() taken once per read callback) and fills in the results.
 * Nothing is allocated per token: a request's chunk array is sized for its
 * expected output and grows geometrically if the server sends more.
 */
#ifndef FOLIO_TOOLS_BENCH_RUN_H
#define FOLIO_TOOLS_BENCH_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct bench_target {
    bool is_unix;
    char path[108];               /* Unix socket */
    struct sockaddr_storage addr; /* TCP */
    char host[300];               /* Host header */
    char prefix[200];             /* URL path prefix ("" or "/x") */
};

/* Parses "http://HOST:PORT[/prefix]" (HOST: IPv4, [IPv6] or a name). */
int bench_target_url(struct bench_target *t, const char *url, char *err, size_t errlen);
int bench_target_unix(struct bench_target *t, const char *path, char *err, size_t errlen);

struct bench_chunk_rec {
    uint64_t t_ns; /* uv_hrtime() of the read that completed the chunk */
    int32_t n_tokens;
};

struct bench_req {
    /* set by the caller */
    int32_t idx;
    double arrival_s; /* intended send time from the start */
    int tenant;       /* index: targets[tenant % n_targets], keys[tenant % n_keys] */
    uint32_t tenant_id;
    int32_t prompt_len, output_len;
    char *body; /* JSON request body (owned; freed by bench_req_free) */
    size_t body_len;
    /* results */
    bool sent, done, ok;
    int http_status;
    char reason[64];                        /* failure class, the key of the tally */
    char detail[200];                       /* e.g. the server's error message */
    uint64_t t_send, t_first, t_end;        /* ns, uv_hrtime() */
    int32_t out_tokens;                     /* counted from chunks */
    int64_t usage_completion, usage_prompt; /* from usage, -1 if not sent */
    bool saw_done;
    char replica[64]; /* X-Folio-Replica of the response ("" when none) */
    struct bench_chunk_rec *chunks;
    int32_t n_chunks, cap_chunks;
};

void bench_req_free(struct bench_req *r);

struct bench_metrics_point {
    double t_s;
    double kv_usage, running, waiting, preemptions, kv_blocks_used, kv_blocks_total;
};

struct bench_tick {
    double t_s;
    int32_t inflight; /* client-side requests in flight */
};

struct bench_run_cfg {
    const struct bench_target *targets;
    int n_targets;
    const char *const *keys; /* API keys (Authorization: Bearer), may be NULL */
    int n_keys;
    /* "/v1/completions", "/v1/chat/completions" (streamed: TTFT is the
     * first token's) or "/v1/embeddings" (one JSON answer: its arrival is
     * the request's first and last moment, usage its input tokens) */
    const char *endpoint;
    int max_concurrency; /* <= 0: unlimited */
    double duration_s;   /* stop sending after this (<= 0: no bound) */
    double timeout_s;    /* per request */
    bool scrape_metrics; /* GET /metrics on targets[0] once a second */
    bool progress;       /* a progress bar on stderr */
};

struct bench_run_out {
    uint64_t t0;    /* uv_hrtime() at the start */
    uint64_t t_end; /* last request finished */
    int32_t max_inflight;
    struct bench_metrics_point *metrics;
    int32_t n_metrics;
    int metrics_failures;
    struct bench_tick *ticks;
    int32_t n_ticks;
};

/* Runs the requests (sorted by arrival_s).  0, or -errno for a setup
 * failure (the loop); per-request failures are in the requests. */
int bench_run_exec(const struct bench_run_cfg *cfg, struct bench_req *reqs, int32_t n,
                   struct bench_run_out *out);
void bench_run_out_free(struct bench_run_out *o);

#endif
