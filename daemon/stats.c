/*
 * daemon/stats.c — /metrics (Prometheus text) and /v1/kv (JSON): the
 * backend's pool and queue statistics, the HTTP layer's counters
 * (struct http_stats) and the server's latency histograms and per-tenant
 * counters.  Metric names follow vLLM's with a folio_ prefix.
 */
#include <stdio.h>
#include <string.h>

#include "folio/common.h"
#include "server.h"

static void tenant_label(const struct srv *s, int t, char *out, size_t cap)
{
    char esc[160];
    srv_prom_label_escape(s->cfg->tenants[t].name, esc, sizeof(esc));
    snprintf(out, cap, "tenant=\"%s\"", esc);
}

static void metrics_tenants(struct srv *s, struct folio_buf *b);

void srv_metrics_render(struct srv *s, struct folio_buf *b)
{
    struct eng_stats st;
    s->ops->stats(s->backend, &st);
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
        {"folio_recompute_tokens_total", "counter",
         "Prompt tokens computed again after a preemption.", (double)st.sched.recompute_tokens},
        {"folio_steps_total", "counter", "Engine steps run.", s->steps_total},
        {"folio_connections_total", "counter", "Connections accepted.",
         s->http.st.connections_total},
        {"folio_connections_open", "gauge", "Connections open.", (double)s->http.st.n_open},
        {"folio_client_disconnects_total", "counter",
         "Requests aborted because their client went away.", s->http.st.disconnects_total},
        {"folio_slow_reader_drops_total", "counter",
         "Connections dropped for leaving too much output unread.", s->http.st.dropped_slow_total},
        {"folio_draining", "gauge", "1 while the server drains for shutdown.", s->draining ? 1 : 0},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(g); i++) {
        srv_prom_family(b, g[i].name, g[i].type, g[i].help);
        srv_prom_sample(b, g[i].name, NULL, g[i].v);
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
        char lab[64];
        snprintf(lab, sizeof(lab), "%s=\"%s\"", info[i].label, info[i].value);
        srv_prom_family(b, info[i].name, "gauge", info[i].help);
        srv_prom_sample(b, info[i].name, lab, 1);
    }
    double prompt_total = 0, gen_total = 0;
    for (int t = 0; t < s->cfg->n_tenants; t++) {
        prompt_total += s->tm[t].prompt_tokens;
        gen_total += s->tm[t].generation_tokens;
    }
    srv_prom_family(b, "folio_prompt_tokens_total", "counter",
                    "Prompt tokens of admitted requests.");
    srv_prom_sample(b, "folio_prompt_tokens_total", NULL, prompt_total);
    srv_prom_family(b, "folio_generation_tokens_total", "counter", "Tokens generated.");
    srv_prom_sample(b, "folio_generation_tokens_total", NULL, gen_total);
    srv_prom_family(b, "folio_http_responses_total", "counter", "HTTP responses by status class.");
    for (int k = 1; k <= 5; k++) {
        char lab[32];
        snprintf(lab, sizeof(lab), "code=\"%dxx\"", k);
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
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(hs); i++) {
        srv_prom_family(b, hs[i].name, "histogram", hs[i].help);
        srv_prom_hist(b, hs[i].name, NULL, hs[i].h);
    }
    metrics_tenants(s, b);
}

/* The per-tenant series (label tenant="NAME"). */
static void metrics_tenants(struct srv *s, struct folio_buf *b)
{
    int nt = s->cfg->n_tenants;
    struct sched_tenant_stats ts[SRV_MAX_TENANTS];
    for (int t = 0; t < nt; t++)
        s->ops->tenant_stats(s->backend, t, &ts[t]);
    char lab[256];
#define TENANT_SERIES(NAME, TYPE, HELP, EXPR)                                                      \
    do {                                                                                           \
        srv_prom_family(b, NAME, TYPE, HELP);                                                      \
        for (int t = 0; t < nt; t++) {                                                             \
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
#undef TENANT_SERIES
    srv_prom_family(b, "folio_request_success_total", "counter",
                    "Finished sequences by tenant and finish reason.");
    for (int t = 0; t < nt; t++) {
        char tl[200];
        tenant_label(s, t, tl, sizeof(tl));
        for (int k = ENG_FINISH_NONE + 1; k < ENG_FINISH_COUNT; k++) {
            snprintf(lab, sizeof(lab), "%s,finished_reason=\"%s\"", tl,
                     eng_finish_name((enum eng_finish)k));
            srv_prom_sample(b, "folio_request_success_total", lab, s->tm[t].finished[k]);
        }
    }
    srv_prom_family(b, "folio_tenant_e2e_request_latency_seconds", "histogram",
                    "Time from arrival to finish, per sequence, per tenant.");
    for (int t = 0; t < nt; t++) {
        tenant_label(s, t, lab, sizeof(lab));
        srv_prom_hist(b, "folio_tenant_e2e_request_latency_seconds", lab, &s->tm[t].e2e);
    }
}

void srv_kv_render(struct srv *s, struct folio_buf *b)
{
    struct eng_stats st;
    s->ops->stats(s->backend, &st);
    folio_buf_printf(
        b,
        "{\"block_size\":%lld,\"num_blocks\":%lld,\"bytes_per_block\":%lld,"
        "\"bytes_per_token\":%lld,\"dtype\":\"%s\",\"blocks\":{\"free\":%lld,\"used\":%"
        "lld,\"cached\":%lld},"
        "\"tokens_held\":%lld,\"slots_empty\":%lld,\"requests\":{\"running\":%lld,"
        "\"waiting\":%lld,\"preempted\":%lld},\"preemptions_total\":%lld,"
        "\"prefix_cache\":{\"queries\":%lld,\"hits\":%lld},\"tenants\":[",
        (long long)st.block_size, (long long)st.pager.blocks_total,
        (long long)st.pager.bytes_per_block,
        (long long)(st.block_size ? st.pager.bytes_per_block / st.block_size : 0),
        st.kv_dtype ? st.kv_dtype : "f32", (long long)st.pager.blocks_free,
        (long long)st.pager.blocks_used, (long long)st.pager.blocks_cached,
        (long long)st.pager.tokens_held, (long long)st.pager.slots_empty,
        (long long)st.sched.running, (long long)st.sched.waiting, (long long)st.sched.preempted,
        (long long)st.sched.preemptions, (long long)st.pager.prefix_queries,
        (long long)st.pager.prefix_hits);
    for (int t = 0; t < s->cfg->n_tenants; t++) {
        struct sched_tenant_stats ts;
        s->ops->tenant_stats(s->backend, t, &ts);
        folio_buf_printf(b, "%s{\"name\":", t ? "," : "");
        folio_buf_json_str(b, s->cfg->tenants[t].name, strlen(s->cfg->tenants[t].name));
        folio_buf_printf(b, ",\"blocks_used\":%lld,\"running\":%lld,\"waiting\":%lld",
                         (long long)ts.kv_blocks, (long long)ts.running,
                         (long long)ts.waiting + ts.preempted);
        folio_buf_printf(b, ",\"max_kv_blocks\":%lld,\"max_running\":%lld}", /* 0: no limit */
                         (long long)s->cfg->tenants[t].max_kv_blocks,
                         (long long)s->cfg->tenants[t].max_running);
    }
    folio_buf_puts(b, "],\"block_map\":[");
    int32_t nb = s->ops->n_blocks(s->backend);
    static const char *names[] = {"free", "used", "cached"};
    for (int32_t i = 0; i < nb; i++) {
        struct pager_block_info bi;
        s->ops->block_info(s->backend, i, &bi);
        folio_buf_printf(b,
                         "%s{\"state\":\"%s\",\"seq\":%llu,\"tenant\":%u,\"refcount\":%d,"
                         "\"tokens\":%d}",
                         i ? "," : "", names[bi.state], (unsigned long long)bi.owner, bi.tenant,
                         bi.refcount, bi.tokens);
    }
    folio_buf_puts(b, "]}\n");
}
