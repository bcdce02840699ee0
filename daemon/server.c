/*
 * daemon/server.c — foliod's process: start-up ladder, listeners, signals
 * and drain (the rest of the server: see server.h).
 *
 * Start-up (srv_main): config → log → backend → loop → engine driver →
 * signals → listeners → READY=1 → uv_run.  Teardown runs in reverse through
 * one `goto` ladder.  Listeners: sockets passed by systemd (foliod.socket:
 * its path, mode and group; the file is systemd's, never removed here),
 * else the Unix socket (stale-socket check, umask 0117 around bind: mode
 * 0660) and the optional TCP one (any address; keys required unless
 * --insecure-listen, which is warned about).  The soft RLIMIT_NOFILE is
 * raised to the hard one, and --max-connections lowered to what it leaves
 * room for, so that a refused connection can still be answered (a 503)
 * rather than reset for want of a descriptor.
 *
 * Under systemd (Type=notify, systemd.c) the loop sends READY=1 once it
 * accepts, STATUS= with the load every few seconds, WATCHDOG=1 at half the
 * unit's WatchdogSec (a loop that stalls stops them), STOPPING=1 on drain.
 *
 * SIGHUP reopens --log-file and reloads the configuration file's tenant
 * sections (weights, quotas, uids, keys: srv_config_reload); [foliod]
 * options that changed are named in the log and keep their running value.
 * Streams in flight are untouched.
 *
 * Drain (SIGTERM, or the first SIGINT): listeners close and the socket file
 * is removed (new connections are refused), /health answers 503, new
 * completions get 503, idle connections close; running requests finish
 * (their responses say Connection: close).  After --drain-timeout-ms the
 * rest are aborted.  When no connection and no completion is left the
 * engine thread is joined and uv_run returns: exit 0.  A second SIGINT
 * exits at once (status 130).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "folio/chat.h"
#include "folio/common.h"
#include "resp_store.h"
#include "server.h"
#include "systemd.h"
#include "version.h"

const char *srv_matmul_built = "none";

void srv_version_line(char *out, size_t cap)
{
    snprintf(out, cap, "foliod %s (git %s, %s build, matmul built: %s, systemd: %s)", FOLIO_VERSION,
             FOLIO_GIT_REVISION, FOLIO_BUILDTYPE, srv_matmul_built, srv_sd_built() ? "yes" : "no");
}

/* The X-Folio-Replica value: --replica-id, else the host name.  Letters,
 * digits and ".-_:" only, 1..63 bytes (it goes into a header as is); a bad
 * --replica-id is refused, a host name outside that set falls back to
 * "foliod". */
static int replica_id_resolve(const char *given, char *out, size_t cap)
{
    char host[256] = "";
    const char *v = given;
    if (!v) {
        if (gethostname(host, sizeof(host) - 1) < 0)
            host[0] = 0;
        v = host;
    }
    size_t n = strlen(v);
    bool ok = n >= 1 && n < cap && n <= 63;
    for (size_t i = 0; ok && i < n; i++) {
        char ch = v[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
             ch == '.' || ch == '-' || ch == '_' || ch == ':';
    }
    if (!ok && given)
        return -EINVAL;
    snprintf(out, cap, "%s", ok ? v : "foliod");
    return 0;
}

/* ---- listeners, signals, drain ---------------------------------------- */

static void on_unix_conn(uv_stream_t *l, int status)
{
    struct srv *s = l->data;
    if (status == 0)
        http_accept(&s->http, l, false);
}

static void on_tcp_conn(uv_stream_t *l, int status)
{
    struct srv *s = l->data;
    if (status == 0)
        http_accept(&s->http, l, true);
}

/* Refuses to replace a live daemon's socket; removes a stale one. */
static int socket_claim(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(sb.st_mode)) {
        srv_log(SRV_LOG_ERROR, "%s exists and is not a socket; not touching it", path);
        return -EEXIST;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, path, strlen(path) + 1);
    int rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
    int err = errno;
    close(fd);
    if (rc == 0) {
        srv_log(SRV_LOG_ERROR, "another daemon is listening on %s; refusing to start", path);
        return -EADDRINUSE;
    }
    if (err != ECONNREFUSED && err != ENOENT) {
        srv_log(SRV_LOG_ERROR, "cannot probe %s: %s", path, strerror(err));
        return -err;
    }
    srv_log(SRV_LOG_INFO, "removing stale socket %s", path);
    if (unlink(path) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}

static int listen_unix(struct srv *s)
{
    const char *path = s->cfg->socket;
    int rc = socket_claim(path);
    if (rc)
        return rc;
    if ((rc = uv_pipe_init(s->loop, &s->unix_srv, 0)))
        return rc;
    s->unix_srv.data = s;
    s->have_unix = true;
    mode_t old = umask(0117); /* socket file mode 0660 from creation on */
    rc = uv_pipe_bind(&s->unix_srv, path);
    umask(old);
    if (rc) {
        srv_log(SRV_LOG_ERROR, "cannot bind %s: %s", path, uv_strerror(rc));
        return rc;
    }
    if ((rc = uv_listen((uv_stream_t *)&s->unix_srv, 511, on_unix_conn))) {
        srv_log(SRV_LOG_ERROR, "cannot listen on %s: %s", path, uv_strerror(rc));
        unlink(path);
        return rc;
    }
    srv_log(SRV_LOG_INFO, "listening on %s", path);
    return 0;
}

static int listen_tcp(struct srv *s)
{
    const char *hp = s->cfg->listen;
    const char *colon = strrchr(hp, ':');
    char host[256];
    size_t hl = FOLIO_MIN((size_t)(colon - hp), sizeof(host) - 1);
    memcpy(host, hp, hl);
    host[hl] = 0;
    char *h = host;
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
        h[hl - 1] = 0;
        h++;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE},
                    *ai = NULL;
    int rc = getaddrinfo(h, colon + 1, &hints, &ai);
    if (rc) {
        srv_log(SRV_LOG_ERROR, "--listen %s: %s", hp, gai_strerror(rc));
        return UV_EINVAL;
    }
    if ((rc = uv_tcp_init(s->loop, &s->tcp_srv))) {
        freeaddrinfo(ai);
        return rc;
    }
    s->tcp_srv.data = s;
    s->have_tcp = true;
    rc = uv_tcp_bind(&s->tcp_srv, ai->ai_addr, 0);
    freeaddrinfo(ai);
    if (rc || (rc = uv_listen((uv_stream_t *)&s->tcp_srv, 511, on_tcp_conn))) {
        srv_log(SRV_LOG_ERROR, "cannot listen on %s: %s", hp, uv_strerror(rc));
        return rc;
    }
    srv_log(SRV_LOG_INFO, "listening on tcp %s (%s)", hp,
            srv_config_has_keys(s->cfg) ? "API keys required" : "no API keys");
    if (!srv_config_has_keys(s->cfg))
        srv_log(SRV_LOG_ERROR,
                "warning: --insecure-listen: TCP clients need no key; anyone who can reach %s "
                "is served as tenant 'default'",
                hp);
    return 0;
}

/* Room for the connections: the soft descriptor limit up to the hard one;
 * --max-connections (and the per-client limit) within it. */
static void fd_room(struct srv_config *cfg)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl))
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    /* descriptors beyond the connections: listeners, the loop, the model
     * file, threads' eventfds; refused connections linger briefly */
    int64_t room = rl.rlim_cur == RLIM_INFINITY ? INT64_MAX : ((int64_t)rl.rlim_cur - 64) / 2;
    if (cfg->max_connections > room) {
        srv_log(SRV_LOG_INFO,
                "--max-connections %lld lowered to %lld (RLIMIT_NOFILE %lld: half stays free "
                "to answer refused connections)",
                (long long)cfg->max_connections, (long long)FOLIO_MAX(room, 1),
                (long long)rl.rlim_cur);
        cfg->max_connections = FOLIO_MAX(room, 1);
    }
    if (cfg->max_client_connections > cfg->max_connections)
        cfg->max_client_connections = cfg->max_connections;
}

/* Sockets from systemd (socket activation): the first Unix and the first
 * TCP stream socket become the listeners; others are refused. */
static int listen_activated(struct srv *s, int n)
{
    for (int fd = SRV_SD_FD0; fd < SRV_SD_FD0 + n; fd++) {
        int kind = srv_sd_fd_kind(fd);
        int rc = -EINVAL;
        if (kind == SRV_SD_UNIX && !s->have_unix) {
            if ((rc = uv_pipe_init(s->loop, &s->unix_srv, 0)))
                return rc;
            s->unix_srv.data = s;
            s->have_unix = s->unix_activated = true;
            if ((rc = uv_pipe_open(&s->unix_srv, fd)) ||
                (rc = uv_listen((uv_stream_t *)&s->unix_srv, 511, on_unix_conn)))
                return rc;
            struct sockaddr_un a;
            socklen_t al = sizeof(a);
            memset(&a, 0, sizeof(a));
            getsockname(fd, (struct sockaddr *)&a, &al);
            srv_log(SRV_LOG_INFO, "listening on %s (fd %d from systemd)",
                    a.sun_path[0] ? a.sun_path : "(unnamed)", fd);
        } else if (kind == SRV_SD_TCP && !s->have_tcp) {
            if ((rc = uv_tcp_init(s->loop, &s->tcp_srv)))
                return rc;
            s->tcp_srv.data = s;
            s->have_tcp = true;
            if ((rc = uv_tcp_open(&s->tcp_srv, fd)) ||
                (rc = uv_listen((uv_stream_t *)&s->tcp_srv, 511, on_tcp_conn)))
                return rc;
            srv_log(SRV_LOG_INFO, "listening on tcp (fd %d from systemd)", fd);
        } else {
            srv_log(SRV_LOG_ERROR,
                    "systemd passed fd %d: not a listening stream socket or "
                    "one too many; closing it",
                    fd);
            close(fd);
        }
    }
    return 0;
}

static void close_listeners(struct srv *s)
{
    if (s->have_unix) {
        s->have_unix = false;
        uv_close((uv_handle_t *)&s->unix_srv, NULL);
        if (!s->unix_activated)
            unlink(s->cfg->socket);
    }
    if (s->have_tcp) {
        s->have_tcp = false;
        uv_close((uv_handle_t *)&s->tcp_srv, NULL);
    }
}

void srv_maybe_exit(struct srv *s)
{
    if (!s->draining || s->stopping || s->http.st.n_open || s->n_comps)
        return;
    s->stopping = true;
    srv_log(SRV_LOG_INFO, "drained; exiting");
    if (s->drain_timer_on)
        uv_close((uv_handle_t *)&s->drain_timer, NULL);
    if (s->sd_timer_on)
        uv_close((uv_handle_t *)&s->sd_timer, NULL);
    uv_close((uv_handle_t *)&s->sig_term, NULL);
    uv_close((uv_handle_t *)&s->sig_int, NULL);
    uv_close((uv_handle_t *)&s->sig_hup, NULL);
    srv_engine_close(s->eng);
    s->eng = NULL;
}

static void on_conn_closed(void *user)
{
    srv_maybe_exit(user);
}

/* http's accounting hooks: the client limits of auth.c. */
static int on_conn_accept(void *user, const struct http_peer *p, void **acct,
                          struct srv_api_error *e)
{
    return srv_auth_on_accept(&((struct srv *)user)->auth, p, acct, e);
}

static void on_conn_release(void *user, void *acct)
{
    srv_auth_on_release(&((struct srv *)user)->auth, acct);
}

static int on_conn_buffer(void *user, void *acct, int64_t delta)
{
    return srv_auth_on_buffer(&((struct srv *)user)->auth, acct, delta);
}

static void on_drain_timeout(uv_timer_t *t)
{
    struct srv *s = t->data;
    srv_log(SRV_LOG_INFO, "drain timeout: aborting %d requests", s->n_comps);
    struct srv_api_error e;
    srv_api_error_set(&e, 503, "service_unavailable", NULL, "drain_timeout",
                      "the server is shutting down: request aborted at the drain timeout");
    http_server_fail_all(&s->http, &e);
    for (struct srv_comp *bg = s->bg; bg; bg = bg->bg_next) /* no connection to fail */
        srv_comp_bg_cancel(bg, false);
}

static void begin_drain(struct srv *s, const char *why)
{
    if (s->draining)
        return;
    s->draining = true;
    srv_log(SRV_LOG_INFO, "%s: draining (%d requests running, timeout %lld ms)", why, s->n_comps,
            (long long)s->cfg->drain_timeout_ms);
    srv_sd_notifyf("STOPPING=1\nSTATUS=draining: %d requests to finish", s->n_comps);
    close_listeners(s);
    http_server_drain(&s->http);
    if (!uv_timer_init(s->loop, &s->drain_timer)) {
        s->drain_timer.data = s;
        s->drain_timer_on = true;
        uv_timer_start(&s->drain_timer, on_drain_timeout, (uint64_t)s->cfg->drain_timeout_ms, 0);
        uv_unref((uv_handle_t *)&s->drain_timer);
    }
    srv_maybe_exit(s);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct srv *s = h->data;
    if (signum == SIGINT && ++s->sigint_count >= 2) {
        srv_log(SRV_LOG_ERROR, "second SIGINT: aborting");
        if (s->have_unix && !s->unix_activated)
            unlink(s->cfg->socket);
        _exit(130);
    }
    begin_drain(s, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* SIGHUP: a new log file, the tenants of the configuration file. */
static void on_hup(uv_signal_t *h, int signum)
{
    (void)signum;
    struct srv *s = h->data;
    int rc = srv_log_reopen();
    if (rc)
        srv_log(SRV_LOG_ERROR,
                "SIGHUP: cannot reopen --log-file %s: %s (still writing the old one)",
                s->cfg->log_file, strerror(-rc));
    char err[512] = "";
    struct srv_config_reload r;
    rc = srv_config_reload(s->cfg, s->argc, s->argv, &r, err, sizeof(err));
    if (rc) {
        s->reload_failures_total++;
        srv_log(SRV_LOG_ERROR, "SIGHUP: configuration not reloaded: %s (nothing changed)",
                err[0] ? err : strerror(-rc));
        return;
    }
    int failed = 0;
    int applied = srv_auth_reload(&s->auth);
    if (applied < s->cfg->n_tenants)
        srv_log(SRV_LOG_ERROR,
                "SIGHUP: %d new tenant section(s) not applied: unconfigured uids already have "
                "their own tenants after the configured ones (restart to add tenants)",
                s->cfg->n_tenants - applied);
    for (int t = 0; t < applied; t++)
        if ((r.changed[t / 64] >> (t % 64) & 1) &&
            (rc = s->ops->tenant_set(s->backend, t, &s->cfg->tenants[t]))) {
            failed++;
            srv_log(SRV_LOG_ERROR, "SIGHUP: tenant '%s': the scheduler refused its limits: %s",
                    s->cfg->tenants[t].name, strerror(-rc));
        }
    s->reloads_total++;
    if (failed)
        s->reload_failures_total++;
    srv_log(SRV_LOG_INFO, "SIGHUP: configuration reloaded; tenants: %s",
            r.tenants[0] ? r.tenants : "unchanged");
    if (r.kept[0])
        srv_log(SRV_LOG_ERROR,
                "SIGHUP: changed options not applied (they need a restart; the running values "
                "stay): %s",
                r.kept);
}

/* Every few seconds under systemd: STATUS with the load; WATCHDOG=1 when
 * the unit has WatchdogSec (the timer runs on the loop, so a stalled loop
 * stops the keep-alives and systemd restarts the service). */
static void on_sd_timer(uv_timer_t *t)
{
    struct srv *s = t->data;
    struct eng_stats st;
    s->ops->stats(s->backend, &st);
    double used = st.pager.blocks_total
                      ? 100.0 * (double)st.pager.blocks_used / (double)st.pager.blocks_total
                      : 0;
    srv_sd_notifyf("%sSTATUS=%s: %lld running, %lld waiting, KV %.1f%% used, %d connections",
                   s->wd_usec ? "WATCHDOG=1\n" : "", s->draining ? "draining" : "serving",
                   (long long)st.sched.running, (long long)st.sched.waiting + st.sched.preempted,
                   used, s->http.st.n_open);
}

static void on_step(void *user, const struct srv_engine_step_stats *st)
{
    struct srv *s = user;
    s->steps_total++;
    srv_hist_observe(&s->step, st->seconds);
    srv_hist_observe(&s->step_tokens, st->tokens);
}

/* The template chat requests are rendered with: --chat-template, else the
 * model file's, else (no template key: the default model, gen-model's)
 * ChatML, whose markers are then plain text for a vocabulary without
 * them.  An unrecognised template leaves chat disabled (400s). */
static void chat_template_choose(struct srv *s)
{
    enum chat_template t = (enum chat_template)s->cfg->chat_template_id; /* 0: auto */
    if (!s->mi.has_tokenizer) {
        srv_log(SRV_LOG_INFO, "chat: disabled (the model has no tokenizer)");
        return;
    }
    if (t) {
        s->chat_tmpl = (int)t;
        srv_log(SRV_LOG_INFO, "chat template: %s (--chat-template)", chat_template_name(t));
    } else if (s->mi.chat_template_rc == 0) {
        s->chat_tmpl = s->mi.chat_template;
        srv_log(SRV_LOG_INFO,
                "chat template: %s (recognised from the model's tokenizer.chat_template)",
                chat_template_name((enum chat_template)s->chat_tmpl));
    } else if (s->mi.chat_template_rc == -ENOENT) {
        s->chat_tmpl = CHAT_TMPL_CHATML;
        srv_log(SRV_LOG_INFO,
                "chat template: chatml (the model has no tokenizer.chat_template; its markers are "
                "plain text unless the vocabulary has them; --chat-template NAME to choose)");
    } else
        srv_log(SRV_LOG_ERROR,
                "warning: the model's tokenizer.chat_template is not one foliod knows; "
                "/v1/chat/completions will answer 400 (start foliod with --chat-template "
                "chatml|llama2|llama3|mistral|zephyr|phi3)");
}

/* How /v1/embeddings pools: --pooling, else the model file's
 * {arch}.pooling_type when it is one foliod has (mean, cls, last), else
 * last (the one position of a decoder that has seen the whole input). */
static void pooling_choose(struct srv *s)
{
    static const int from_opt[] = {0, SRV_POOL_MEAN, SRV_POOL_CLS, SRV_POOL_LAST}; /* auto|... */
    int p = from_opt[s->cfg->pooling_id];
    const char *why = "--pooling";
    if (!p && (s->mi.pooling == SRV_POOL_MEAN || s->mi.pooling == SRV_POOL_CLS ||
               s->mi.pooling == SRV_POOL_LAST)) {
        p = s->mi.pooling;
        why = "the model's pooling_type";
    } else if (!p) {
        p = SRV_POOL_LAST;
        why = s->mi.pooling < 0 ? "the model names none"
                                : "the model's pooling_type is not "
                                  "mean, cls or last";
    }
    s->pooling = p;
    if (s->mi.n_embd > 0)
        srv_log(SRV_LOG_INFO, "embeddings: %d values, pooling %s (%s)", (int)s->mi.n_embd,
                srv_pooling_name(p), why);
    if (s->mi.n_cls > 0)
        srv_log(SRV_LOG_INFO, "rerank: a classification head of %d outputs, %s", (int)s->mi.n_cls,
                s->mi.rerank_tmpl ? "the model's rerank template"
                                  : "no rerank template (BOS + query + document)");
}

/* The model's name as JSON and logs show it: a name that is not UTF-8
 * (it comes from the model file) has each invalid byte run as U+FFFD, and
 * control characters as '?', so every response stays valid JSON text that
 * clients can echo back in "model".  NULL: out of memory. */
static char *model_name_sanitize(const char *raw)
{
    size_t n = strlen(raw ? raw : "");
    char *out = folio_malloc(3 * n + 1);
    if (!out)
        return NULL;
    n = folio_utf8_sanitize(raw ? raw : "", n, out);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
            out[i] = '?';
    out[n] = 0;
    return out;
}

static const double lat_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,
                                    0.5,   0.75,   1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
static const double tok_bounds[] = {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
/* request lengths in tokens (vLLM's 1-2-5 series) */
static const double len_bounds[] = {1,    2,    5,    10,    20,    50,    100,    200,   500,
                                    1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000};

/* The latency and length histograms of /metrics. */
static void hists_init(struct srv *s)
{
    srv_hist_init(&s->ttft, lat_bounds, (int)FOLIO_ARRAY_LEN(lat_bounds));
    srv_hist_init(&s->itl, lat_bounds, (int)FOLIO_ARRAY_LEN(lat_bounds));
    srv_hist_init(&s->e2e, lat_bounds, (int)FOLIO_ARRAY_LEN(lat_bounds));
    srv_hist_init(&s->queue, lat_bounds, (int)FOLIO_ARRAY_LEN(lat_bounds));
    srv_hist_init(&s->step, lat_bounds, (int)FOLIO_ARRAY_LEN(lat_bounds));
    srv_hist_init(&s->step_tokens, tok_bounds, (int)FOLIO_ARRAY_LEN(tok_bounds));
    srv_hist_init(&s->prefill, lat_bounds, (int)FOLIO_ARRAY_LEN(lat_bounds));
    srv_hist_init(&s->decode, lat_bounds, (int)FOLIO_ARRAY_LEN(lat_bounds));
    srv_hist_init(&s->prompt_len, len_bounds, (int)FOLIO_ARRAY_LEN(len_bounds));
    srv_hist_init(&s->gen_len, len_bounds, (int)FOLIO_ARRAY_LEN(len_bounds));
    for (int t = 0; t < SRV_TENANT_SLOTS; t++)
        srv_hist_init(&s->tm[t].e2e, lat_bounds, (int)FOLIO_ARRAY_LEN(lat_bounds));
}

/* SIGTERM drains, SIGINT twice aborts, SIGHUP reloads (on_signal, on_hup). */
static void signals_start(struct srv *s)
{
    uv_signal_init(s->loop, &s->sig_term);
    uv_signal_init(s->loop, &s->sig_int);
    uv_signal_init(s->loop, &s->sig_hup);
    s->sig_term.data = s->sig_int.data = s->sig_hup.data = s;
    uv_signal_start(&s->sig_term, on_signal, SIGTERM);
    uv_signal_start(&s->sig_int, on_signal, SIGINT);
    uv_signal_start(&s->sig_hup, on_hup, SIGHUP);
}

/* Under systemd: a periodic status / watchdog keep-alive (on_sd_timer);
 * it does not keep the loop alive. */
static void sd_timer_start(struct srv *s)
{
    if (getenv("NOTIFY_SOCKET") && !uv_timer_init(s->loop, &s->sd_timer)) {
        uint64_t ms = s->wd_usec ? FOLIO_MAX(s->wd_usec / 2000, 1) : 5000;
        s->sd_timer.data = s;
        s->sd_timer_on = true;
        uv_timer_start(&s->sd_timer, on_sd_timer, ms, ms);
        uv_unref((uv_handle_t *)&s->sd_timer);
        if (s->wd_usec)
            srv_log(SRV_LOG_INFO, "systemd watchdog: keep-alive every %llu ms",
                    (unsigned long long)ms);
    }
}

/* --help, --version, --dump-config: printed, and true (nothing to serve). */
static bool info_only(const struct srv_config *cfg)
{
    if (cfg->help) {
        srv_config_help(stdout);
        return true;
    }
    if (cfg->version) {
        char v[256];
        srv_version_line(v, sizeof(v));
        printf("%s\n", v);
        return true;
    }
    if (cfg->dump) {
        srv_config_dump(cfg, stdout);
        return true;
    }
    return false;
}

/* The init ladder, read top to bottom, with its teardown in reverse at the
 * labels (out_loop, out_backend, out_cfg): kept as one function so each
 * step and what undoes it stay side by side. */
int srv_main(int argc, char **argv, eng_backend_factory factory)
{
    signal(SIGPIPE, SIG_IGN); /* a write to a vanished client must not kill us */
    struct srv_config cfg;
    char err[512] = "";
    int status = 1;
    bool log_opened = false;
    if (srv_config_parse(&cfg, argc, argv, err, sizeof(err))) {
        fprintf(stderr, "foliod: %s\n", err);
        srv_config_free(&cfg);
        return 2;
    }
    if (info_only(&cfg)) {
        srv_config_free(&cfg);
        return 0;
    }
    struct srv *s = folio_calloc(1, sizeof(*s));
    if (!s) {
        srv_config_free(&cfg);
        return 1;
    }
    s->cfg = &cfg;
    s->argc = argc;
    s->argv = argv;
    srv_log_set_level((enum srv_log_level)cfg.log_level_id);
    if (cfg.log_file) {
        int lrc = srv_log_open(cfg.log_file);
        if (lrc) {
            fprintf(stderr, "foliod: --log-file %s: %s\n", cfg.log_file, strerror(-lrc));
            srv_config_free(&cfg);
            folio_free(s);
            return 2;
        }
        log_opened = true;
    }
    srv_log_set_format((enum srv_log_format)cfg.log_format_id);
    srv_log_set_access(cfg.access_log_id == 0);
    {
        char v[256];
        srv_version_line(v, sizeof(v));
        srv_log(SRV_LOG_INFO, "%s", v);
    }
    s->started_at = (int64_t)time(NULL);
    hists_init(s);

    fd_room(&cfg);
    int rc = replica_id_resolve(cfg.replica_id, s->replica, sizeof(s->replica));
    if (rc) {
        srv_log(SRV_LOG_ERROR, "--replica-id '%s': 1..63 letters, digits or '.-_:'",
                cfg.replica_id);
        goto out_cfg;
    }
    srv_log(SRV_LOG_INFO, "replica id %s", s->replica);
    rc = srv_auth_init(&s->auth, &cfg);
    if (!rc)
        rc = srv_resp_store_new((size_t)cfg.responses_store, &s->resp_store);
    if (rc) {
        srv_log(SRV_LOG_ERROR, "out of memory");
        goto out_cfg;
    }
    rc = factory(&cfg, &s->ops, &s->backend, err, sizeof(err));
    if (rc) {
        srv_log(SRV_LOG_ERROR, "cannot start the engine: %s", err[0] ? err : strerror(-rc));
        goto out_cfg;
    }
    s->ops->info(s->backend, &s->mi);
    char *name = model_name_sanitize(s->mi.name);
    if (!name)
        goto out_backend;
    s->mi.name = name;
    chat_template_choose(s);
    pooling_choose(s);
    uv_loop_t loop;
    if (uv_loop_init(&loop))
        goto out_backend;
    s->loop = &loop;
    struct eng_events ev;
    srv_comp_events(s, &ev);
    struct http_limits lim = {cfg.max_body, cfg.max_pending_output, cfg.idle_timeout_ms,
                              cfg.max_connections};
    struct http_callbacks hcb = {s,
                                 srv_on_request,
                                 srv_comp_abandon,
                                 on_conn_closed,
                                 on_conn_accept,
                                 on_conn_release,
                                 on_conn_buffer};
    http_server_init(&s->http, &loop, &lim, &hcb);
    s->http.replica = s->replica;
    if ((rc = srv_engine_init(&s->eng, &loop, s->ops, s->backend, &ev, (uint64_t)cfg.admit_wait_ms,
                              on_step))) {
        srv_log(SRV_LOG_ERROR, "cannot start the engine thread: %s", uv_strerror(rc));
        goto out_loop;
    }
    signals_start(s);
    int n_sd = srv_sd_listen_fds();
    if (n_sd < 0)
        srv_log(SRV_LOG_ERROR, "systemd sockets: %s; ignoring them", strerror(-n_sd));
    if (n_sd > 0 ? (rc = listen_activated(s, n_sd))
                 : ((rc = listen_unix(s)) || (cfg.listen && (rc = listen_tcp(s))))) {
        if (n_sd > 0)
            srv_log(SRV_LOG_ERROR, "cannot listen on the sockets from systemd: %s",
                    uv_strerror(rc));
        close_listeners(s);
        s->draining = true; /* maybe_exit then tears down */
        srv_maybe_exit(s);
        uv_run(&loop, UV_RUN_DEFAULT);
        goto out_loop;
    }
    srv_log(SRV_LOG_INFO, "serving model '%s' (%s engine, matmul %s, ctx %d, vocab %d, %s)",
            s->mi.name, s->mi.kind, s->mi.matmul ? s->mi.matmul : "none", s->mi.ctx_len,
            s->mi.n_vocab,
            s->mi.has_tokenizer ? "tokenizer loaded" : "no tokenizer: token ids only");
    for (int32_t i = 0; i < s->mi.n_loras; i++)
        srv_log(SRV_LOG_INFO, "LoRA adapter '%s' (rank %d): %s; requests name it as \"model\"",
                s->mi.lora_names[i], (int)s->mi.lora_ranks[i], s->mi.lora_paths[i]);
    s->wd_usec = srv_sd_watchdog_usec();
    srv_sd_notifyf("READY=1\nSTATUS=serving model %s", s->mi.name);
    sd_timer_start(s);
    uv_run(&loop, UV_RUN_DEFAULT);
    status = 0;
out_loop:
    uv_loop_close(&loop);
out_backend:
    s->ops->free(s->backend);
    folio_free(name);
out_cfg:
    srv_resp_store_free(s->resp_store);
    srv_auth_free(&s->auth);
    folio_free(s);
    srv_config_free(&cfg);
    if (log_opened)
        srv_log_close();
    return status;
}
