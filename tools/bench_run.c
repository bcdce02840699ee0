/*
 * tools/bench_run.c — the libuv engine of `folio bench` (API in
 * bench_run.h).
 *
 * Owns: the loop, one `struct conn` per open connection (a request, a
 * /metrics scrape, or a one-off GET), the arrival timer, the 1 s tick
 * timer (client in-flight count, metrics scrape, progress bar).
 *
 *   reqs[0 .. started) sent or skipped      arrival timer moves `arrived`
 *   reqs[started .. arrived) arrived, waiting for a concurrency slot
 *   reqs[arrived .. n) not yet due
 *
 * A conn's life: init handle + timeout timer → connect → write request →
 * read (llhttp, response mode; on_body → SSE → chunk scan, or for
 * /v1/embeddings the body kept and read once complete) → finish
 * (record the outcome once) → close both handles → freed in the second
 * close callback.  finish() is idempotent (`finished`), so an error after
 * the response completed, or a timeout racing a read, is harmless.
 *
 * Timing: one uv_hrtime() per read callback, stored in run->now_read and
 * used for every chunk that read completes; nothing else on the read path
 * asks the clock.  The read buffer is one 64 KiB static area (the loop is
 * single-threaded and each read is consumed before the next).
 *
 * Single-threaded: everything here runs on the loop thread.
 */
#include "bench_run.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <llhttp.h>
#include <math.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "bench_core.h"
#include "folio/common.h"

enum conn_kind { CONN_REQ, CONN_SCRAPE };

struct run;

struct conn {
    union {
        uv_handle_t h;
        uv_stream_t s;
        uv_pipe_t pipe;
        uv_tcp_t tcp;
    } u;
    uv_timer_t timer;
    uv_connect_t connect;
    uv_write_t write;
    llhttp_t parser;
    struct bench_sse sse;
    enum conn_kind kind;
    struct run *run;
    struct bench_req *req; /* CONN_REQ */
    char *head;            /* request head (owned) */
    const char *body;
    size_t head_len, body_len;
    struct folio_buf rbody; /* response body kept for errors / scrapes */
    size_t rbody_max;
    int status;
    char hfield[24]; /* the header name being read (lower case, truncated) */
    size_t hfield_len, replica_len;
    int closing; /* handles still to close */
    bool finished, complete;
    uint64_t started;
};

struct run {
    uv_loop_t loop;
    const struct bench_run_cfg *cfg;
    struct bench_req *reqs;
    int32_t n, started, arrived, n_done, inflight;
    bool stop_sending, in_dispatch;
    uv_timer_t arrival, tick;
    bool timers_closed;
    uint64_t t0, now_read;
    bool embed; /* /v1/embeddings: JSON answers, not streams */
    struct bench_run_out *out;
    struct conn *scrape; /* in flight */
    int32_t cap_metrics, cap_ticks;
    int32_t failed;
};

static char rbuf[65536];
static llhttp_settings_t settings;

/* ---- targets ---------------------------------------------------------- */

int bench_target_unix(struct bench_target *t, const char *path, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(t->path)) {
        snprintf(err, errlen, "socket path '%s' is empty or longer than 107 bytes", path);
        return -ENAMETOOLONG;
    }
    t->is_unix = true;
    memcpy(t->path, path, n + 1);
    snprintf(t->host, sizeof(t->host), "localhost");
    return 0;
}

int bench_target_url(struct bench_target *t, const char *url, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    if (strncmp(url, "http://", 7)) {
        snprintf(err, errlen, "--url '%s': only http://HOST:PORT is supported", url);
        return -EINVAL;
    }
    const char *h = url + 7, *slash = strchr(h, '/');
    size_t hl = slash ? (size_t)(slash - h) : strlen(h);
    if (hl == 0 || hl >= sizeof(t->host)) {
        snprintf(err, errlen, "--url '%s': bad host", url);
        return -EINVAL;
    }
    memcpy(t->host, h, hl);
    t->host[hl] = 0;
    if (slash) {
        size_t pl = strlen(slash);
        while (pl > 0 && slash[pl - 1] == '/')
            pl--;
        if (pl >= sizeof(t->prefix)) {
            snprintf(err, errlen, "--url '%s': path too long", url);
            return -EINVAL;
        }
        memcpy(t->prefix, slash, pl);
        t->prefix[pl] = 0;
    }
    char host[300], port[16] = "80";
    const char *colon = NULL;
    if (t->host[0] == '[') {
        const char *rb = strchr(t->host, ']');
        if (!rb) {
            snprintf(err, errlen, "--url '%s': bad IPv6 host", url);
            return -EINVAL;
        }
        snprintf(host, sizeof(host), "%.*s", (int)(rb - t->host - 1), t->host + 1);
        if (rb[1] == ':')
            colon = rb + 1;
    } else {
        colon = strrchr(t->host, ':');
        snprintf(host, sizeof(host), "%.*s",
                 (int)(colon ? (size_t)(colon - t->host) : strlen(t->host)), t->host);
    }
    if (colon)
        snprintf(port, sizeof(port), "%s", colon + 1);
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc || !res) {
        snprintf(err, errlen, "--url '%s': %s", url, gai_strerror(rc));
        return -EINVAL;
    }
    memcpy(&t->addr, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

void bench_req_free(struct bench_req *r)
{
    folio_free(r->body);
    folio_free(r->chunks);
    r->body = NULL;
    r->chunks = NULL;
}

/* ---- connections ------------------------------------------------------ */

static void dispatch(struct run *run);
static void maybe_stop(struct run *run);

static double since_start(const struct run *run, uint64_t t)
{
    return (double)(t - run->t0) * 1e-9;
}

static void conn_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    if (--c->closing > 0)
        return;
    struct run *run = c->run;
    bench_sse_free(&c->sse);
    folio_free(c->head);
    folio_buf_free(&c->rbody);
    folio_free(c);
    maybe_stop(run);
}

static void conn_close(struct conn *c)
{
    if (c->closing)
        return;
    c->closing = 2;
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, conn_closed);
    uv_close(&c->u.h, conn_closed);
}

static void scrape_done(struct conn *c, bool ok);

/* Records the outcome once, then closes. */
static void finish(struct conn *c, bool ok, const char *reason, const char *detail)
{
    if (c->finished)
        return;
    c->finished = true;
    struct run *run = c->run;
    if (c->kind == CONN_SCRAPE)
        scrape_done(c, ok);
    else {
        struct bench_req *r = c->req;
        r->done = true;
        r->ok = ok;
        r->t_end = run->now_read ? run->now_read : uv_hrtime();
        if (!ok) {
            snprintf(r->reason, sizeof(r->reason), "%s", reason ? reason : "failed");
            snprintf(r->detail, sizeof(r->detail), "%s", detail ? detail : "");
            run->failed++;
        }
        if (r->t_end > run->out->t_end)
            run->out->t_end = r->t_end;
        run->inflight--;
        run->n_done++;
    }
    conn_close(c);
    if (c->kind == CONN_REQ)
        dispatch(run);
}

static void on_chunk(void *user, const char *data, size_t len)
{
    struct conn *c = user;
    struct bench_req *r = c->req;
    struct bench_chunk ch;
    if (c->finished)
        return;
    if (bench_chunk_scan(data, len, &ch)) {
        finish(c, false, "bad SSE chunk", "a data: payload is not a JSON object");
        return;
    }
    if (ch.done) {
        r->saw_done = true;
        return;
    }
    if (ch.has_error) {
        char d[200];
        snprintf(d, sizeof(d), "%.*s", (int)(len < 180 ? len : 180), data);
        finish(c, false, "error event in stream", d);
        return;
    }
    if (ch.finish_error) {
        finish(c, false, "finish_reason error", "the server ended the choice with an error");
        return;
    }
    if (ch.has_usage) { /* Anthropic's message_delta has output_tokens only */
        r->usage_completion = ch.usage_completion;
        if (ch.usage_prompt >= 0)
            r->usage_prompt = ch.usage_prompt;
    }
    if (ch.n_tokens <= 0)
        return;
    uint64_t now = c->run->now_read;
    if (!r->t_first)
        r->t_first = now;
    if (r->n_chunks == r->cap_chunks) {
        int32_t nc = r->cap_chunks ? r->cap_chunks * 2 : 64;
        struct bench_chunk_rec *q = folio_realloc(r->chunks, (size_t)nc * sizeof(*q));
        if (!q) {
            finish(c, false, "out of memory", NULL);
            return;
        }
        r->chunks = q;
        r->cap_chunks = nc;
    }
    r->chunks[r->n_chunks++] = (struct bench_chunk_rec){now, ch.n_tokens};
    r->out_tokens += ch.n_tokens;
}

static struct conn *conn_of(llhttp_t *p)
{
    return p->data;
}

static int keep_body(struct conn *c, const char *at, size_t len)
{
    if (c->rbody.len + len > c->rbody_max)
        len = c->rbody_max - c->rbody.len;
    if (!len)
        return 0;
    folio_buf_append(&c->rbody, at, len);
    return c->rbody.oom ? -ENOMEM : 0;
}

/* Header names may arrive in pieces: the name is gathered (lower-cased, up
 * to 23 bytes) until its value starts; an X-Folio-Replica value goes into
 * the request's replica field, also in pieces. */
static const char replica_hdr[] = "x-folio-replica";

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
    struct conn *c = conn_of(p);
    for (size_t i = 0; i < len && c->hfield_len < sizeof(c->hfield) - 1; i++) {
        char ch = at[i];
        c->hfield[c->hfield_len++] = ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
    }
    c->hfield[c->hfield_len] = 0;
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    struct conn *c = conn_of(p);
    if (!c->req || strcmp(c->hfield, replica_hdr))
        return 0;
    char *dst = c->req->replica;
    size_t cap = sizeof(c->req->replica) - 1;
    for (size_t i = 0; i < len && c->replica_len < cap; i++)
        dst[c->replica_len++] = at[i];
    dst[c->replica_len] = 0;
    return 0;
}

static int on_header_value_complete(llhttp_t *p)
{
    struct conn *c = conn_of(p);
    c->hfield_len = 0;
    c->hfield[0] = 0;
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    struct conn *c = conn_of(p);
    c->status = llhttp_get_status_code(p);
    if (c->req)
        c->req->http_status = c->status;
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    struct conn *c = conn_of(p);
    if (c->finished)
        return 0;
    if (c->kind == CONN_REQ && c->status == 200 && !c->run->embed) {
        if (bench_sse_feed(&c->sse, at, len, on_chunk, c))
            finish(c, false, "out of memory", NULL);
        return 0;
    }
    if (keep_body(c, at, len))
        finish(c, false, "out of memory", NULL);
    return 0;
}

static void error_detail(struct conn *c, char *out, size_t cap)
{
    out[0] = 0;
    if (!c->rbody.len)
        return;
    cJSON *j = cJSON_ParseWithLength(c->rbody.p, c->rbody.len);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    const cJSON *m = cJSON_IsObject(e)   ? cJSON_GetObjectItemCaseSensitive(e, "message")
                     : cJSON_IsString(e) ? e
                                         : cJSON_GetObjectItemCaseSensitive(j, "message");
    if (cJSON_IsString(m))
        snprintf(out, cap, "%s", m->valuestring);
    else
        snprintf(out, cap, "%.*s", (int)(c->rbody.len < 180 ? c->rbody.len : 180), c->rbody.p);
    cJSON_Delete(j);
}

/* An embeddings answer, complete: a "data" list of embeddings (arrays,
 * or base64 strings) and the input tokens in usage.  Its arrival is the
 * request's first (TTFT) and last moment. */
static void embed_done(struct conn *c)
{
    struct bench_req *r = c->req;
    cJSON *j = c->rbody.oom ? NULL : cJSON_ParseWithLength(c->rbody.p, c->rbody.len);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data");
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens");
    const cJSON *e0 = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(data, 0), "embedding");
    bool ok = cJSON_GetArraySize(data) > 0 &&
              ((cJSON_IsArray(e0) && cJSON_GetArraySize(e0) > 0) || cJSON_IsString(e0));
    if (ok && cJSON_IsNumber(pt))
        r->usage_prompt = (int32_t)pt->valuedouble;
    cJSON_Delete(j);
    if (!ok) {
        finish(c, false, "bad embeddings answer", "no \"data\" list of embeddings");
        return;
    }
    r->t_first = c->run->now_read;
    r->saw_done = true;
    finish(c, true, NULL, NULL);
}

static int on_message_complete(llhttp_t *p)
{
    struct conn *c = conn_of(p);
    c->complete = true;
    if (c->finished)
        return 0;
    if (c->status != 200) {
        char reason[64], detail[200];
        snprintf(reason, sizeof(reason), "HTTP %d", c->status);
        error_detail(c, detail, sizeof(detail));
        finish(c, false, reason, detail);
        return 0;
    }
    if (c->kind != CONN_REQ) {
        finish(c, true, NULL, NULL);
        return 0;
    }
    if (c->run->embed) {
        embed_done(c);
        return 0;
    }
    bench_sse_finish(&c->sse, on_chunk, c);
    if (c->finished)
        return 0;
    if (!c->req->saw_done && c->req->out_tokens == 0)
        finish(c, false, "empty stream", "HTTP 200 but no tokens and no [DONE]");
    else
        finish(c, true, NULL, NULL);
    return 0;
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    *buf = uv_buf_init(rbuf, sizeof(rbuf));
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = s->data;
    struct run *run = c->run;
    run->now_read = uv_hrtime();
    if (nread > 0) {
        llhttp_errno_t e = llhttp_execute(&c->parser, buf->base, (size_t)nread);
        if (e != HPE_OK && !c->finished) {
            char d[200];
            snprintf(d, sizeof(d), "%s", llhttp_get_error_reason(&c->parser));
            finish(c, false, "bad HTTP response", d);
        }
    } else if (nread == UV_EOF) {
        if (!c->finished) {
            llhttp_errno_t e = llhttp_finish(&c->parser);
            if (!c->finished) {
                if (e != HPE_OK || !c->complete)
                    finish(c, false,
                           c->status ? "connection closed mid-response"
                                     : "connection closed before a response",
                           NULL);
                else
                    finish(c, false, "connection closed", NULL);
            }
        }
    } else if (nread < 0) {
        char reason[64];
        snprintf(reason, sizeof(reason), "read: %s", uv_err_name((int)nread));
        finish(c, false, reason, uv_strerror((int)nread));
    }
    run->now_read = 0;
}

static void write_cb(uv_write_t *w, int status)
{
    struct conn *c = w->data;
    if (status < 0 && !c->finished && status != UV_ECANCELED) {
        char reason[64];
        snprintf(reason, sizeof(reason), "write: %s", uv_err_name(status));
        finish(c, false, reason, uv_strerror(status));
    }
}

static void connect_cb(uv_connect_t *req, int status)
{
    struct conn *c = req->data;
    if (c->finished)
        return;
    if (status < 0) {
        char reason[64];
        snprintf(reason, sizeof(reason), "connect: %s", uv_err_name(status));
        finish(c, false, reason, uv_strerror(status));
        return;
    }
    uv_buf_t bufs[2] = {uv_buf_init(c->head, (unsigned)c->head_len),
                        uv_buf_init((char *)c->body, (unsigned)c->body_len)};
    c->write.data = c;
    int rc = uv_write(&c->write, &c->u.s, bufs, c->body_len ? 2 : 1, write_cb);
    if (!rc)
        rc = uv_read_start(&c->u.s, alloc_cb, read_cb);
    if (rc) {
        char reason[64];
        snprintf(reason, sizeof(reason), "write: %s", uv_err_name(rc));
        finish(c, false, reason, uv_strerror(rc));
    }
}

static void timeout_cb(uv_timer_t *t)
{
    struct conn *c = t->data;
    finish(c, false, "timeout", NULL);
}

static int conn_start(struct run *run, struct conn *c, const struct bench_target *t,
                      const char *method, const char *path, const char *key, double timeout_s)
{
    c->run = run;
    c->u.h.data = c;
    c->timer.data = c;
    c->connect.data = c;
    /* an error's body; a scrape's; an embeddings answer (a few floats'
     * text per value) */
    c->rbody_max = c->kind != CONN_REQ || run->embed ? (64u << 20) : 4096;
    bench_sse_init(&c->sse);
    llhttp_init(&c->parser, HTTP_RESPONSE, &settings);
    c->parser.data = c;
    char auth[400] = "";
    if (key)
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", key);
    size_t cap = 512 + strlen(path) + strlen(t->prefix) + strlen(auth) + strlen(t->host);
    c->head = folio_malloc(cap);
    if (!c->head)
        return -ENOMEM;
    int hl;
    if (c->body_len)
        hl = snprintf(c->head, cap,
                      "%s %s%s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\n"
                      "Accept: text/event-stream\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n",
                      method, t->prefix, path, t->host, auth, c->body_len);
    else
        hl = snprintf(c->head, cap, "%s %s%s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n",
                      method, t->prefix, path, t->host, auth);
    c->head_len = (size_t)hl;
    int rc = uv_timer_init(&run->loop, &c->timer);
    if (rc)
        return rc;
    rc = t->is_unix ? uv_pipe_init(&run->loop, &c->u.pipe, 0) : uv_tcp_init(&run->loop, &c->u.tcp);
    if (rc) {
        c->closing = 1;
        uv_close((uv_handle_t *)&c->timer, conn_closed);
        return rc;
    }
    c->started = uv_hrtime();
    uv_timer_start(&c->timer, timeout_cb, (uint64_t)(timeout_s * 1000.0 + 0.5), 0);
    if (t->is_unix)
        uv_pipe_connect(&c->connect, &c->u.pipe, t->path, connect_cb);
    else {
        uv_tcp_nodelay(&c->u.tcp, 1);
        rc = uv_tcp_connect(&c->connect, &c->u.tcp, (const struct sockaddr *)&t->addr, connect_cb);
        if (rc) {
            /* the handles exist: report through finish so they close */
            char reason[64];
            snprintf(reason, sizeof(reason), "connect: %s", uv_err_name(rc));
            finish(c, false, reason, uv_strerror(rc));
        }
    }
    return 0;
}

/* ---- requests and arrivals -------------------------------------------- */

static void start_request(struct run *run, struct bench_req *r)
{
    const struct bench_run_cfg *cfg = run->cfg;
    struct conn *c = folio_calloc(1, sizeof(*c));
    r->sent = true;
    r->t_send = uv_hrtime();
    r->usage_completion = r->usage_prompt = -1;
    if (!r->chunks && r->output_len > 0) {
        r->chunks = folio_malloc((size_t)(r->output_len + 1) * sizeof(*r->chunks));
        r->cap_chunks = r->chunks ? r->output_len + 1 : 0;
    }
    run->inflight++;
    if (run->inflight > run->out->max_inflight)
        run->out->max_inflight = run->inflight;
    if (!c) {
        r->done = true;
        snprintf(r->reason, sizeof(r->reason), "out of memory");
        r->t_end = uv_hrtime();
        run->failed++;
        run->inflight--;
        run->n_done++;
        return;
    }
    c->kind = CONN_REQ;
    c->req = r;
    c->body = r->body;
    c->body_len = r->body_len;
    const struct bench_target *t = &cfg->targets[r->tenant % cfg->n_targets];
    const char *key = cfg->n_keys ? cfg->keys[r->tenant % cfg->n_keys] : NULL;
    int rc = conn_start(run, c, t, "POST", cfg->endpoint, key, cfg->timeout_s);
    if (rc) {
        r->done = true;
        snprintf(r->reason, sizeof(r->reason), "setup: %s", uv_err_name(rc));
        r->t_end = uv_hrtime();
        run->failed++;
        run->inflight--;
        run->n_done++;
        if (!c->closing) {
            bench_sse_free(&c->sse);
            folio_free(c->head);
            folio_free(c);
        }
    }
}

static void dispatch(struct run *run)
{
    int maxc = run->cfg->max_concurrency;
    /* a request that fails synchronously finishes inside start_request and
     * calls back here: the loop below already picks up its slot */
    if (run->in_dispatch)
        return;
    run->in_dispatch = true;
    if (run->cfg->duration_s > 0 && !run->stop_sending &&
        since_start(run, uv_hrtime()) >= run->cfg->duration_s)
        run->stop_sending = true;
    while (run->started < run->arrived && !run->stop_sending &&
           (maxc <= 0 || run->inflight < maxc)) {
        struct bench_req *r = &run->reqs[run->started++];
        start_request(run, r);
    }
    run->in_dispatch = false;
    maybe_stop(run);
}

static void close_timers(struct run *run)
{
    if (run->timers_closed)
        return;
    run->timers_closed = true;
    uv_timer_stop(&run->arrival);
    uv_timer_stop(&run->tick);
    uv_close((uv_handle_t *)&run->arrival, NULL);
    uv_close((uv_handle_t *)&run->tick, NULL);
}

/* Everything sent has finished and nothing more will be sent. */
static void maybe_stop(struct run *run)
{
    if (run->timers_closed)
        return;
    bool nothing_left = run->stop_sending || run->started == run->n;
    if (nothing_left && run->inflight == 0) {
        if (run->scrape && !run->scrape->finished) {
            /* closing it re-enters maybe_stop via finish -> close callback */
            struct conn *s = run->scrape;
            s->finished = true;
            run->scrape = NULL;
            conn_close(s);
        }
        close_timers(run);
    }
}

static void arrival_cb(uv_timer_t *t)
{
    struct run *run = t->data;
    uint64_t now = uv_hrtime();
    double el = since_start(run, now);
    if (run->cfg->duration_s > 0 && el >= run->cfg->duration_s)
        run->stop_sending = true;
    if (!run->stop_sending)
        while (run->arrived < run->n && run->reqs[run->arrived].arrival_s <= el)
            run->arrived++;
    dispatch(run);
    if (run->stop_sending || run->arrived == run->n)
        return;
    double next = run->reqs[run->arrived].arrival_s - el;
    if (run->cfg->duration_s > 0 && run->cfg->duration_s - el < next)
        next = run->cfg->duration_s - el;
    uint64_t ms = next <= 0 ? 0 : (uint64_t)ceil(next * 1000.0);
    uv_timer_start(&run->arrival, arrival_cb, ms, 0);
}

/* ---- scrapes, ticks, progress ------------------------------------------- */

static void scrape_done(struct conn *c, bool ok)
{
    struct run *run = c->run;
    if (run->scrape == c)
        run->scrape = NULL;
    if (!ok || !c->rbody.p) {
        run->out->metrics_failures++;
        return;
    }
    struct bench_prom_sample s;
    bench_prom_extract(c->rbody.p, c->rbody.len, &s);
    struct bench_run_out *o = run->out;
    if (o->n_metrics == run->cap_metrics) {
        int32_t nc = run->cap_metrics ? run->cap_metrics * 2 : 64;
        struct bench_metrics_point *q = folio_realloc(o->metrics, (size_t)nc * sizeof(*q));
        if (!q)
            return;
        o->metrics = q;
        run->cap_metrics = nc;
    }
    o->metrics[o->n_metrics++] = (struct bench_metrics_point){
        .t_s = since_start(run, c->started),
        .kv_usage = s.kv_usage,
        .running = s.running,
        .waiting = s.waiting,
        .preemptions = s.preemptions,
        .kv_blocks_used = s.kv_blocks_used,
        .kv_blocks_total = s.kv_blocks_total,
    };
}

static void progress(struct run *run, bool final)
{
    int width = 30;
    int32_t total = run->n;
    int filled = total ? (int)((int64_t)width * run->n_done / total) : width;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[width] = 0;
    fprintf(stderr, "\r[%s] %d/%d done, %d in flight, %d failed, %.0f s%s", bar, run->n_done, total,
            run->inflight, run->failed, since_start(run, uv_hrtime()), final ? "\n" : "");
    fflush(stderr);
}

static void tick_cb(uv_timer_t *t)
{
    struct run *run = t->data;
    struct bench_run_out *o = run->out;
    if (o->n_ticks == run->cap_ticks) {
        int32_t nc = run->cap_ticks ? run->cap_ticks * 2 : 64;
        struct bench_tick *q = folio_realloc(o->ticks, (size_t)nc * sizeof(*q));
        if (q) {
            o->ticks = q;
            run->cap_ticks = nc;
        }
    }
    if (o->n_ticks < run->cap_ticks)
        o->ticks[o->n_ticks++] = (struct bench_tick){since_start(run, uv_hrtime()), run->inflight};
    if (run->cfg->scrape_metrics && !run->scrape) {
        struct conn *c = folio_calloc(1, sizeof(*c));
        if (c) {
            c->kind = CONN_SCRAPE;
            run->scrape = c;
            if (conn_start(run, c, &run->cfg->targets[0], "GET", "/metrics",
                           run->cfg->n_keys ? run->cfg->keys[0] : NULL, 5.0)) {
                run->scrape = NULL;
                o->metrics_failures++;
                if (!c->closing) {
                    bench_sse_free(&c->sse);
                    folio_free(c->head);
                    folio_free(c);
                }
            }
        }
    }
    if (run->cfg->progress)
        progress(run, false);
    dispatch(run);
}

int bench_run_exec(const struct bench_run_cfg *cfg, struct bench_req *reqs, int32_t n,
                   struct bench_run_out *out)
{
    memset(out, 0, sizeof(*out));
    llhttp_settings_init(&settings);
    settings.on_header_field = on_header_field;
    settings.on_header_value = on_header_value;
    settings.on_header_value_complete = on_header_value_complete;
    settings.on_headers_complete = on_headers_complete;
    settings.on_body = on_body;
    settings.on_message_complete = on_message_complete;
    struct run *run = folio_calloc(1, sizeof(*run));
    if (!run)
        return -ENOMEM;
    run->cfg = cfg;
    run->embed = cfg->endpoint && strstr(cfg->endpoint, "embeddings") != NULL;
    run->reqs = reqs;
    run->n = n;
    run->out = out;
    int rc = uv_loop_init(&run->loop);
    if (rc) {
        folio_free(run);
        return rc;
    }
    uv_timer_init(&run->loop, &run->arrival);
    uv_timer_init(&run->loop, &run->tick);
    run->arrival.data = run;
    run->tick.data = run;
    run->t0 = out->t0 = out->t_end = uv_hrtime();
    uv_timer_start(&run->tick, tick_cb, 0, 1000);
    uv_timer_start(&run->arrival, arrival_cb, 0, 0);
    if (n == 0)
        maybe_stop(run);
    uv_run(&run->loop, UV_RUN_DEFAULT);
    if (cfg->progress)
        progress(run, true);
    rc = uv_loop_close(&run->loop);
    folio_free(run);
    return rc == UV_EBUSY ? -EBUSY : 0;
}

void bench_run_out_free(struct bench_run_out *o)
{
    folio_free(o->metrics);
    folio_free(o->ticks);
    memset(o, 0, sizeof(*o));
}
