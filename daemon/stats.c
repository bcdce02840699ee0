/*
 * daemon/stats.c — /metrics (Prometheus text), /v1/kv (JSON) and /version:
 * the backend's pool and queue statistics, the HTTP layer's counters
 * (struct http_stats), the server's latency and length histograms and
 * per-tenant counters, the build and the process.
 *
 * Metric names follow vLLM's with a folio_ prefix; every folio_* sample
 * carries model_name="<served model>" as vLLM's do (so one Prometheus can
 * scrape several daemons and tell them apart), tenant series add
 * tenant="<name>".  The process_* series are the Prometheus client
 * libraries' standard ones, read from /proc/self.
 *
 * Views: the operator gets everything below.  A tenant gets the pool's
 * geometry and its own entries only (metrics_tenant_view, kv_tenant_view):
 * no global counter or gauge that moves with other tenants' traffic (queue
 * lengths, pool use, prefix-cache hits, token totals, latencies, the
 * process), no other tenant's name.  In a tenant's block map every block
 * it does not hold reads "free" (free or another's: not told apart).
 *
 * /v1/kv's block map is compact by default (one character per block, see
 * kv_map_compact and daemon/README.md): 100,000 blocks cost ~100 KB a poll.
 * ?map=full gives one JSON object per block (~60 bytes each), for tools.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "folio/common.h"
#include "resp_store.h"
#include "server.h"
#include "systemd.h"
#include "version.h"

/* model_name="..." (escaped) into out. */
static void model_label(const struct srv *s, char *out, size_t cap)
{
    char esc[256];
    srv_prom_label_escape(s->mi.name ? s->mi.name : "", esc, sizeof(esc));
    snprintf(out, cap, "model_name=\"%s\"", esc);
}

static void tenant_label(const struct srv *s, int t, char *out, size_t cap)
{
    char esc[160], ml[300];
    model_label(s, ml, sizeof(ml));
    srv_prom_label_escape(srv_auth_tenant_name(&s->auth, t), esc, sizeof(esc));
    snprintf(out, cap, "%s,tenant=\"%s\"", ml, esc);
}

/* process_* series from /proc/self (Linux). */
static void metrics_process(struct folio_buf *b)
{
    long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    double cpu = -1, start = -1, vsz = -1, rss = -1;
    FILE *f = fopen("/proc/self/stat", "r");
    if (f) {
        char line[1024];
        if (fgets(line, sizeof(line), f)) {
            /* fields after the parenthesised command: state is field 3 */
            const char *p = strrchr(line, ')');
            unsigned long long ut, st, starttime, vsize;
            long long rsspages;
            if (p && sscanf(p + 2,
                            "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d "
                            "%*d %*d %*d %llu %llu %lld",
                            &ut, &st, &starttime, &vsize, &rsspages) == 5) {
                cpu = (double)(ut + st) / (double)tck;
                vsz = (double)vsize;
                rss = (double)rsspages * (double)page;
                /* boot time + start ticks */
                FILE *sf = fopen("/proc/stat", "r");
                char l2[256];
                while (sf && fgets(l2, sizeof(l2), sf)) {
                    unsigned long long btime;
                    if (sscanf(l2, "btime %llu", &btime) == 1) {
                        start = (double)btime + (double)starttime / (double)tck;
                        break;
                    }
                }
                if (sf)
                    fclose(sf);
            }
        }
        fclose(f);
    }
    double fds = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            fds += e->d_name[0] != '.';
        closedir(d);
        fds -= 1; /* the directory stream's own */
    }
    struct rlimit rl;
    double maxfds = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (double)rl.rlim_cur : -1;
    const struct {
        const char *name, *type, *help;
        double v;
    } p[] = {
        {"process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
         cpu},
        {"process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", rss},
        {"process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", vsz},
        {"process_open_fds", "gauge", "Number of open file descriptors.", fds},
        {"process_max_fds", "gauge", "Maximum number of open file descriptors.", maxfds},
        {"process_start_time_seconds", "gauge",
         "Start time of the process since unix epoch in seconds.", start},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(p); i++) {
        if (p[i].v < 0)
            continue;
        srv_prom_family(b, p[i].name, p[i].type, p[i].help);
        srv_prom_sample(b, p[i].name, NULL, p[i].v);
    }
}

static void metrics_tenants(struct srv *s, struct folio_buf *b, int only);

/* A tenant's /metrics: the pool's geometry and its own series. */
static void metrics_tenant_view(struct srv *s, struct folio_buf *b, int t)
{
    struct eng_stats st;
    s->ops->stats(s->backend, &st);
    char ml[300];
    model_label(s, ml, sizeof(ml));
    srv_prom_family(b, "folio_kv_num_blocks", "gauge", "KV blocks in the pool.");
    srv_prom_sample(b, "folio_kv_num_blocks", ml, (double)st.pager.blocks_total);
    srv_prom_family(b, "folio_kv_block_size_tokens", "gauge", "Token slots per KV block.");
    srv_prom_sample(b, "folio_kv_block_size_tokens", ml, (double)st.block_size);
    srv_prom_family(b, "folio_kv_bytes_per_token", "gauge",
                    "KV cache bytes one token takes (K and V, every layer and KV head).");
    srv_prom_sample(b, "folio_kv_bytes_per_token", ml,
                    st.block_size ? (double)st.pager.bytes_per_block / (double)st.block_size : 0);
    metrics_tenants(s, b, t);
}

/* The operator's gauges and counters: one sample each, from the
 * scheduler's and pager's stats and the server's own counters. */
static void metrics_gauges(struct srv *s, struct folio_buf *b, const struct eng_stats *stp,
                           const char *ml)
{
    const struct eng_stats st = *stp;
    struct {
        const char *name, *type, *help;
        double v;
    } g[] = {
        {"folio_num_requests_running", "gauge", "Requests in the running batch.",
         (double)st.sched.running},
        {"folio_num_requests_waiting", "gauge", "Requests waiting to be scheduled.",
         (double)st.sched.waiting},
        {"folio_num_requests_preempted", "gauge", "Requests preempted and waiting to resume.",
         (double)st.sched.preempted},
        {"folio_num_preemptions_total", "counter", "Preemptions since start.",
         (double)st.sched.preemptions},
        {"folio_kv_num_blocks", "gauge", "KV blocks in the pool.", (double)st.pager.blocks_total},
        {"folio_kv_blocks_used", "gauge", "KV blocks mapped by a sequence.",
         (double)st.pager.blocks_used},
        {"folio_kv_blocks_free", "gauge", "KV blocks on the free list.",
         (double)st.pager.blocks_free},
        {"folio_kv_blocks_cached", "gauge", "Unreferenced KV blocks kept in the prefix cache.",
         (double)st.pager.blocks_cached},
        {"folio_kv_resident_bytes", "gauge",
         "Bytes of the KV pool committed in memory (all of it from start-up; with --kv-lazy, "
         "the pages written at least once).",
         (double)st.kv_resident},
        {"folio_kv_cache_usage_ratio", "gauge", "Fraction of KV blocks in use (0..1).",
         st.pager.blocks_total ? (double)st.pager.blocks_used / (double)st.pager.blocks_total : 0},
        {"folio_kv_tokens_held", "gauge", "Tokens held by live sequences' page tables.",
         (double)st.pager.tokens_held},
        {"folio_kv_slots_empty", "gauge", "Token slots allocated but not yet filled.",
         (double)st.pager.slots_empty},
        {"folio_kv_block_size_tokens", "gauge", "Token slots per KV block.", (double)st.block_size},
        {"folio_kv_bytes_per_token", "gauge",
         "KV cache bytes one token takes (K and V, every layer and KV head).",
         st.block_size ? (double)st.pager.bytes_per_block / (double)st.block_size : 0},
        {"folio_prefix_cache_queries_total", "counter",
         "Prompt tokens looked up in the prefix cache.", (double)st.pager.prefix_queries},
        {"folio_prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.",
         (double)st.pager.prefix_hits},
        {"folio_kv_evictions_total", "counter", "Cached KV blocks reclaimed for new data.",
         (double)st.pager.evictions},
        {"folio_kv_cow_copies_total", "counter", "Copy-on-write KV block copies.",
         (double)st.pager.cow_copies},
        {"folio_kv_blocks_shared", "gauge", "Used KV blocks mapped by more than one sequence.",
         (double)st.pager.blocks_shared},
        {"folio_prefill_computed_tokens_total", "counter",
         "Prompt tokens computed by the model (prefix-cache hits and forked samples share "
         "theirs; recompute included).",
         (double)st.sched.prefill_tokens},
        {"folio_recompute_tokens_total", "counter",
         "Prompt tokens computed again after a preemption.", (double)st.sched.recompute_tokens},
        {"folio_steps_total", "counter", "Engine steps run.", s->steps_total},
        {"folio_request_unknown_fields_total", "counter",
         "Request fields ignored because the API does not know them.", s->unknown_fields_total},
        {"folio_connections_total", "counter", "Connections accepted.",
         s->http.st.connections_total},
        {"folio_connections_open", "gauge", "Connections open.", (double)s->http.st.n_open},
        {"folio_client_disconnects_total", "counter",
         "Requests aborted because their client went away.", s->http.st.disconnects_total},
        {"folio_slow_reader_drops_total", "counter",
         "Connections dropped for leaving too much output unread.", s->http.st.dropped_slow_total},
        {"folio_draining", "gauge", "1 while the server drains for shutdown.", s->draining ? 1 : 0},
        {"folio_connections_refused_total", "counter",
         "Connections and request bodies answered 503 for a connection or buffer limit.",
         s->http.st.refused_total + s->auth.refused_total},
        {"folio_config_reloads_total", "counter", "Configuration reloads (SIGHUP) applied.",
         s->reloads_total},
        {"folio_config_reload_failures_total", "counter",
         "Configuration reloads (SIGHUP) refused or partly applied.", s->reload_failures_total},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(g); i++) {
        srv_prom_family(b, g[i].name, g[i].type, g[i].help);
        srv_prom_sample(b, g[i].name, ml, g[i].v);
    }
}

/* folio_build_info and the info series (KV dtype, matmul backend). */
static void metrics_info(struct srv *s, struct folio_buf *b, const struct eng_stats *stp,
                         const char *ml)
{
    const struct eng_stats st = *stp;
    {
        char lab[1024], rev[64];
        srv_prom_label_escape(FOLIO_GIT_REVISION, rev, sizeof(rev));
        snprintf(lab, sizeof(lab),
                 "%s,version=\"%s\",revision=\"%s\",build_type=\"%s\",matmul=\"%s\","
                 "matmul_built=\"%s\",kv_dtype=\"%s\",systemd=\"%s\"",
                 ml, FOLIO_VERSION, rev, FOLIO_BUILDTYPE, s->mi.matmul ? s->mi.matmul : "none",
                 srv_matmul_built, st.kv_dtype ? st.kv_dtype : "f32",
                 srv_sd_built() ? "yes" : "no");
        srv_prom_family(b, "folio_build_info", "gauge",
                        "Build and serving configuration (labels); always 1.");
        srv_prom_sample(b, "folio_build_info", lab, 1);
    }
    /* info series: the label values are fixed identifiers, no escaping needed */
    const struct {
        const char *name, *help, *label, *value;
    } info[] = {
        {"folio_kv_dtype_info", "KV element type (label dtype); 1.", "dtype",
         st.kv_dtype ? st.kv_dtype : "f32"},
        {"folio_matmul_info", "Matrix-product backend in use (label backend); 1.", "backend",
         s->mi.matmul ? s->mi.matmul : "none"},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(info); i++) {
        char lab[400];
        snprintf(lab, sizeof(lab), "%s,%s=\"%s\"", ml, info[i].label, info[i].value);
        srv_prom_family(b, info[i].name, "gauge", info[i].help);
        srv_prom_sample(b, info[i].name, lab, 1);
    }
    if (s->mi.n_loras > 0) {
        /* adapter names are printable ASCII without quotes or backslashes
         * (config.c), so they need no escaping */
        srv_prom_family(
            b, "folio_lora_info", "gauge",
            "A LoRA adapter requests may name as \"model\" (labels lora_name, rank); 1.");
        for (int32_t i = 0; i < s->mi.n_loras; i++) {
            char lab[400];
            snprintf(lab, sizeof(lab), "%s,lora_name=\"%s\",rank=\"%d\"", ml, s->mi.lora_names[i],
                     (int)s->mi.lora_ranks[i]);
            srv_prom_sample(b, "folio_lora_info", lab, 1);
        }
        srv_prom_family(b, "folio_lora_requests_total", "counter",
                        "Requests admitted through a LoRA adapter (label lora_name).");
        for (int32_t i = 0; i < s->mi.n_loras; i++) {
            char lab[400];
            snprintf(lab, sizeof(lab), "%s,lora_name=\"%s\"", ml, s->mi.lora_names[i]);
            srv_prom_sample(b, "folio_lora_requests_total", lab, (double)s->lora_requests[i]);
        }
    }
}

/* Token totals over all tenants, responses by status class, and the
 * latency / size histograms. */
static void metrics_totals(struct srv *s, struct folio_buf *b, const char *ml)
{
    double prompt_total = 0, gen_total = 0;
    for (int t = 0; t < srv_auth_tenant_count(&s->auth); t++) {
        prompt_total += s->tm[t].prompt_tokens;
        gen_total += s->tm[t].generation_tokens;
    }
    srv_prom_family(b, "folio_prompt_tokens_total", "counter",
                    "Prompt tokens of admitted requests.");
    srv_prom_sample(b, "folio_prompt_tokens_total", ml, prompt_total);
    srv_prom_family(b, "folio_generation_tokens_total", "counter", "Tokens generated.");
    srv_prom_sample(b, "folio_generation_tokens_total", ml, gen_total);
    srv_prom_family(b, "folio_http_responses_total", "counter", "HTTP responses by status class.");
    for (int k = 1; k <= 5; k++) {
        char lab[400];
        snprintf(lab, sizeof(lab), "%s,code=\"%dxx\"", ml, k);
        srv_prom_sample(b, "folio_http_responses_total", lab, s->http.st.responses[k]);
    }
    struct {
        const char *name, *help;
        const struct srv_hist *h;
    } hs[] = {
        {"folio_time_to_first_token_seconds", "Time from arrival to the first token.", &s->ttft},
        {"folio_inter_token_latency_seconds", "Time between consecutive tokens of a sequence.",
         &s->itl},
        {"folio_e2e_request_latency_seconds", "Time from arrival to finish, per sequence.",
         &s->e2e},
        {"folio_request_queue_time_seconds", "Time from arrival to first scheduling.", &s->queue},
        {"folio_step_duration_seconds", "Wall time of one engine step.", &s->step},
        {"folio_iteration_tokens", "Tokens computed per engine step.", &s->step_tokens},
        {"folio_request_prefill_time_seconds",
         "Time from first scheduling to the first token, per sequence.", &s->prefill},
        {"folio_request_decode_time_seconds",
         "Time from the first to the last token, per sequence.", &s->decode},
        {"folio_request_prompt_tokens", "Prompt length in tokens, per prompt (once whatever n).",
         &s->prompt_len},
        {"folio_request_generation_tokens", "Generated tokens, per sequence.", &s->gen_len},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(hs); i++) {
        srv_prom_family(b, hs[i].name, "histogram", hs[i].help);
        srv_prom_hist(b, hs[i].name, ml, hs[i].h);
    }
}

void srv_metrics_render(struct srv *s, struct folio_buf *b, const struct srv_caller *who)
{
    if (!who->operator) {
        metrics_tenant_view(s, b, who->tenant);
        return;
    }
    struct eng_stats st;
    s->ops->stats(s->backend, &st);
    char ml[300];
    model_label(s, ml, sizeof(ml));
    metrics_gauges(s, b, &st, ml);
    metrics_info(s, b, &st, ml);
    metrics_totals(s, b, ml);
    metrics_tenants(s, b, -1);
    metrics_process(b);
}

/* The per-tenant series (label tenant="NAME"): every tenant's, or only
 * tenant `only`'s (>= 0). */
static void metrics_tenants(struct srv *s, struct folio_buf *b, int only)
{
    int nt = srv_auth_tenant_count(&s->auth);
    int t0 = only >= 0 ? only : 0;
    if (only >= 0)
        nt = only + 1;
    struct sched_tenant_stats ts[SRV_TENANT_SLOTS];
    struct srv_resp_store_stats rs[SRV_TENANT_SLOTS];
    for (int t = t0; t < nt; t++) {
        s->ops->tenant_stats(s->backend, t, &ts[t]);
        srv_resp_store_stats(s->resp_store, t, &rs[t]);
    }
    char lab[700];
#define TENANT_SERIES(NAME, TYPE, HELP, EXPR)                                                      \
    do {                                                                                           \
        srv_prom_family(b, NAME, TYPE, HELP);                                                      \
        for (int t = t0; t < nt; t++) {                                                            \
            tenant_label(s, t, lab, sizeof(lab));                                                  \
            srv_prom_sample(b, NAME, lab, (double)(EXPR));                                         \
        }                                                                                          \
    } while (0)
    TENANT_SERIES("folio_tenant_requests_running", "gauge", "Running requests per tenant.",
                  ts[t].running);
    TENANT_SERIES("folio_tenant_requests_waiting", "gauge", "Waiting requests per tenant.",
                  (int64_t)ts[t].waiting + ts[t].preempted);
    TENANT_SERIES("folio_tenant_kv_blocks_used", "gauge", "KV blocks held per tenant.",
                  ts[t].kv_blocks);
    TENANT_SERIES("folio_tenant_prompt_tokens_total", "counter", "Prompt tokens per tenant.",
                  s->tm[t].prompt_tokens);
    TENANT_SERIES("folio_tenant_generation_tokens_total", "counter", "Generated tokens per tenant.",
                  s->tm[t].generation_tokens);
    TENANT_SERIES("folio_tenant_rejected_requests_total", "counter",
                  "Requests refused with 429 per tenant.", s->tm[t].rejected_429);
    TENANT_SERIES("folio_tenant_responses_stored", "gauge",
                  "Responses kept for GET /v1/responses/{id} and previous_response_id, per "
                  "tenant.",
                  rs[t].responses);
    TENANT_SERIES("folio_tenant_responses_stored_bytes", "gauge",
                  "Bytes of the responses kept per tenant (at most --responses-store).",
                  rs[t].bytes);
    TENANT_SERIES("folio_tenant_responses_evicted_total", "counter",
                  "Kept responses dropped for newer ones of the same tenant.", rs[t].evicted);
#undef TENANT_SERIES
    srv_prom_family(b, "folio_request_success_total", "counter",
                    "Finished sequences by tenant and finish reason.");
    for (int t = t0; t < nt; t++) {
        char tl[600];
        tenant_label(s, t, tl, sizeof(tl));
        for (int k = ENG_FINISH_NONE + 1; k < ENG_FINISH_COUNT; k++) {
            snprintf(lab, sizeof(lab), "%s,finished_reason=\"%s\"", tl,
                     eng_finish_name((enum eng_finish)k));
            srv_prom_sample(b, "folio_request_success_total", lab, s->tm[t].finished[k]);
        }
    }
    srv_prom_family(b, "folio_tenant_e2e_request_latency_seconds", "histogram",
                    "Time from arrival to finish, per sequence, per tenant.");
    for (int t = t0; t < nt; t++) {
        tenant_label(s, t, lab, sizeof(lab));
        srv_prom_hist(b, "folio_tenant_e2e_request_latency_seconds", lab, &s->tm[t].e2e);
    }
}

/* Block i as a view shows it: for a tenant's view (only >= 0), a block
 * that is not that tenant's reads free. */
static void kv_block(struct srv *s, int32_t i, int only, struct pager_block_info *bi)
{
    s->ops->block_info(s->backend, i, bi);
    if (only >= 0 && bi->state != PAGER_BLOCK_FREE && bi->tenant != (uint32_t)only)
        *bi = (struct pager_block_info){.state = PAGER_BLOCK_FREE};
}

/* The compact block map (documented in daemon/README.md):
 *
 *   "block_map": {"encoding": "char-per-block-v2",
 *                 "states": "..::AAAB.....",   one entry per block:
 *                                               '.' free, ':' cached,
 *                                               used: the tenant index t, for
 *                                               t < 64 one base64url digit
 *                                               (A-Z a-z 0-9 - _), else '~'
 *                                               and two digits (t / 64, t % 64)
 *                 "shared": [[first, count], ...],  runs of blocks with refcount > 1
 *                 "partial": [[block, tokens], ...]} used blocks not full
 *
 * Blocks not listed in "partial" hold block_size tokens when used or
 * cached, none when free.  Sizes: one byte per block plus the runs; three
 * for a block of tenant slot 64 or later (configured tenants are slots
 * below 64: only the per-uid tenants of the 64th unconfigured uid on pay).
 *
 * only >= 0: a tenant's view: only that tenant's blocks are shown (its
 * digit is 'A', the one entry of its "tenants"); every other block reads
 * '.' and is in neither list. */
static void kv_map_compact(struct srv *s, struct folio_buf *b, int32_t nb, int32_t bs, int only)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    _Static_assert(SRV_MAX_TENANTS <= 64, "configured tenants take one digit");
    _Static_assert(SRV_TENANT_SLOTS <= 64 * 64, "every slot takes at most two digits");
    folio_buf_puts(b, "\"block_map\":{\"encoding\":\"char-per-block-v2\",\"states\":\"");
    char chunk[4096];
    size_t k = 0;
    for (int32_t i = 0; i < nb; i++) {
        struct pager_block_info bi;
        kv_block(s, i, only, &bi);
        uint32_t t = only >= 0 ? 0 : bi.tenant % SRV_TENANT_SLOTS;
        if (bi.state != PAGER_BLOCK_USED)
            chunk[k++] = bi.state == PAGER_BLOCK_CACHED ? ':' : '.';
        else if (t < 64)
            chunk[k++] = digits[t];
        else {
            chunk[k++] = '~';
            chunk[k++] = digits[t / 64];
            chunk[k++] = digits[t % 64];
        }
        if (k + 3 > sizeof(chunk)) {
            folio_buf_append(b, chunk, k);
            k = 0;
        }
    }
    folio_buf_append(b, chunk, k);
    folio_buf_puts(b, "\",\"shared\":[");
    bool first = true;
    for (int32_t i = 0; i < nb;) {
        struct pager_block_info bi;
        kv_block(s, i, only, &bi);
        if (bi.state != PAGER_BLOCK_USED || bi.refcount <= 1) {
            i++;
            continue;
        }
        int32_t j = i + 1;
        for (; j < nb; j++) {
            kv_block(s, j, only, &bi);
            if (bi.state != PAGER_BLOCK_USED || bi.refcount <= 1)
                break;
        }
        folio_buf_printf(b, "%s[%d,%d]", first ? "" : ",", i, j - i);
        first = false;
        i = j + 1;
    }
    folio_buf_puts(b, "],\"partial\":[");
    first = true;
    for (int32_t i = 0; i < nb; i++) {
        struct pager_block_info bi;
        kv_block(s, i, only, &bi);
        if (bi.state == PAGER_BLOCK_USED && bi.tokens < bs) {
            folio_buf_printf(b, "%s[%d,%d]", first ? "" : ",", i, bi.tokens);
            first = false;
        }
    }
    folio_buf_puts(b, "]}");
}

/* The end of /v1/kv after the tenants array: the block map, compact or
 * (full) one object per block, as the view (only: see kv_block) shows it. */
static void kv_map(struct srv *s, struct folio_buf *b, int32_t nb, int32_t bs, int only, bool full)
{
    if (!full) {
        folio_buf_puts(b, "],");
        kv_map_compact(s, b, nb, bs, only);
        folio_buf_puts(b, "}\n");
        return;
    }
    folio_buf_puts(b, "],\"block_map\":[");
    static const char *names[] = {"free", "used", "cached"};
    for (int32_t i = 0; i < nb; i++) {
        struct pager_block_info bi;
        kv_block(s, i, only, &bi);
        folio_buf_printf(b,
                         "%s{\"state\":\"%s\",\"seq\":%llu,\"tenant\":%u,\"refcount\":%d,"
                         "\"tokens\":%d}",
                         i ? "," : "", names[bi.state], (unsigned long long)bi.owner, bi.tenant,
                         bi.refcount, bi.tokens);
    }
    folio_buf_puts(b, "]}\n");
}

static void kv_tenant_entry(struct srv *s, struct folio_buf *b, int t, bool first)
{
    struct sched_tenant_stats ts;
    s->ops->tenant_stats(s->backend, t, &ts);
    const char *name = srv_auth_tenant_name(&s->auth, t);
    const struct srv_tenant_cfg *tc = srv_auth_tenant_cfg(&s->auth, t);
    folio_buf_printf(b, "%s{\"name\":", first ? "" : ",");
    folio_buf_json_str(b, name, strlen(name));
    folio_buf_printf(b, ",\"blocks_used\":%lld,\"running\":%lld,\"waiting\":%lld",
                     (long long)ts.kv_blocks, (long long)ts.running,
                     (long long)ts.waiting + ts.preempted);
    folio_buf_printf(b, ",\"max_kv_blocks\":%lld,\"max_running\":%lld}", /* 0: no limit */
                     (long long)tc->max_kv_blocks, (long long)tc->max_running);
}

/* A tenant's /v1/kv: the same shape, counting only its own blocks and
 * requests; the others' blocks read "free". */
static void kv_tenant_view(struct srv *s, struct folio_buf *b, int t, bool full)
{
    struct eng_stats st;
    s->ops->stats(s->backend, &st);
    struct sched_tenant_stats ts;
    s->ops->tenant_stats(s->backend, t, &ts);
    int32_t nb = s->ops->n_blocks(s->backend);
    long long used = 0, cached = 0, tokens = 0;
    for (int32_t i = 0; i < nb; i++) {
        struct pager_block_info bi;
        s->ops->block_info(s->backend, i, &bi);
        if (bi.state == PAGER_BLOCK_FREE || bi.tenant != (uint32_t)t)
            continue;
        if (bi.state == PAGER_BLOCK_USED) {
            used++;
            tokens += bi.tokens;
        } else
            cached++;
    }
    folio_buf_puts(b, "{\"view\":\"tenant\",\"tenant\":");
    const char *name = srv_auth_tenant_name(&s->auth, t);
    folio_buf_json_str(b, name, strlen(name));
    folio_buf_printf(b,
                     ",\"block_size\":%lld,\"num_blocks\":%lld,\"bytes_per_block\":%lld,"
                     "\"bytes_per_token\":%lld,\"dtype\":\"%s\",\"blocks\":{\"free\":%lld,"
                     "\"used\":%lld,\"cached\":%lld},\"tokens_held\":%lld,\"slots_empty\":%lld,"
                     "\"requests\":{\"running\":%lld,\"waiting\":%lld,\"preempted\":%lld},"
                     "\"tenants\":[",
                     (long long)st.block_size, (long long)nb, (long long)st.pager.bytes_per_block,
                     (long long)(st.block_size ? st.pager.bytes_per_block / st.block_size : 0),
                     st.kv_dtype ? st.kv_dtype : "f32", (long long)nb - used - cached, used, cached,
                     tokens, used * (long long)st.block_size - tokens, (long long)ts.running,
                     (long long)ts.waiting, (long long)ts.preempted);
    kv_tenant_entry(s, b, t, true);
    kv_map(s, b, nb, (int32_t)st.block_size, t, full);
}

void srv_kv_render(struct srv *s, struct folio_buf *b, const struct srv_caller *who, bool full)
{
    if (!who->operator) {
        kv_tenant_view(s, b, who->tenant, full);
        return;
    }
    struct eng_stats st;
    s->ops->stats(s->backend, &st);
    folio_buf_printf(
        b,
        "{\"block_size\":%lld,\"num_blocks\":%lld,\"bytes_per_block\":%lld,"
        "\"bytes_per_token\":%lld,\"dtype\":\"%s\",\"blocks\":{\"free\":%lld,\"used\":%"
        "lld,\"cached\":%lld},"
        "\"tokens_held\":%lld,\"slots_empty\":%lld,\"requests\":{\"running\":%lld,"
        "\"waiting\":%lld,\"preempted\":%lld},\"preemptions_total\":%lld,"
        "\"prefix_cache\":{\"queries\":%lld,\"hits\":%lld},\"resident_bytes\":%lld,"
        "\"tenants\":[",
        (long long)st.block_size, (long long)st.pager.blocks_total,
        (long long)st.pager.bytes_per_block,
        (long long)(st.block_size ? st.pager.bytes_per_block / st.block_size : 0),
        st.kv_dtype ? st.kv_dtype : "f32", (long long)st.pager.blocks_free,
        (long long)st.pager.blocks_used, (long long)st.pager.blocks_cached,
        (long long)st.pager.tokens_held, (long long)st.pager.slots_empty,
        (long long)st.sched.running, (long long)st.sched.waiting, (long long)st.sched.preempted,
        (long long)st.sched.preemptions, (long long)st.pager.prefix_queries,
        (long long)st.pager.prefix_hits, (long long)st.kv_resident);
    for (int t = 0; t < srv_auth_tenant_count(&s->auth); t++)
        kv_tenant_entry(s, b, t, t == 0);
    kv_map(s, b, s->ops->n_blocks(s->backend), (int32_t)st.block_size, -1, full);
}

void srv_version_render(struct srv *s, struct folio_buf *b)
{
    folio_buf_printf(b,
                     "{\"version\":\"%s\",\"git_revision\":\"%s\",\"build_type\":\"%s\","
                     "\"matmul\":\"%s\",\"matmul_built\":\"%s\",\"systemd\":%s,\"model\":",
                     FOLIO_VERSION, FOLIO_GIT_REVISION, FOLIO_BUILDTYPE,
                     s->mi.matmul ? s->mi.matmul : "none", srv_matmul_built,
                     srv_sd_built() ? "true" : "false");
    folio_buf_json_str(b, s->mi.name, strlen(s->mi.name));
    folio_buf_printf(b, ",\"engine\":\"%s\",\"started\":%lld}\n", s->mi.kind ? s->mi.kind : "?",
                     (long long)s->started_at);
}
