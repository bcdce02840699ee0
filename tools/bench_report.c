/*
 * tools/bench_report.c — the end of `folio bench`: the per-request records
 * of a finished run reduced to the report `vllm bench serve` prints, the
 * --json file (everything, with per-request records) and the --plot SVG.
 *
 * Metric definitions (all over successful requests):
 *   TTFT  send → first chunk carrying a token (includes connect)
 *   TPOT  (E2E − TTFT) / (output tokens − 1), requests with > 1 token
 *   ITL   gaps between consecutive token-carrying chunks
 *   E2E   send → end of the response
 *   output tokens: usage.completion_tokens when the server sends usage,
 *   else tokens counted from chunks (token_ids length, else 1 per chunk)
 *   duration: start → last request finished; peak tokens/s: the largest
 *   count of tokens received within one 1 s window from the start.
 *
 * Memory: statistics work on scratch arrays owned by struct result and
 * freed before bench_report returns; the records are only read.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_core.h"
#include "bench_opts.h"
#include "folio/common.h"

/* ---- reduction --------------------------------------------------------- */

struct result {
    int32_t completed, failed, not_sent;
    int64_t input_tokens, output_tokens;
    double duration_s;
    double req_tput, out_tput, total_tput, peak_out_tput, goodput;
    int32_t good;
    struct bench_dist ttft, tpot, itl, e2el;
    /* failure tally */
    char reasons[32][64];
    int32_t reason_count[32];
    int n_reasons;
    /* 1 s series */
    int32_t n_buckets;
    double *bucket_t, *bucket_tokens, *bucket_kv, *bucket_running, *bucket_waiting,
        *bucket_inflight;
};

static int64_t req_out_tokens(const struct bench_req *r)
{
    return r->usage_completion >= 0 ? r->usage_completion : r->out_tokens;
}

static double ms(uint64_t a, uint64_t b)
{
    return (double)(int64_t)(b - a) * 1e-6;
}

static int reduce(const struct opts *o, const struct bench_req *reqs, int32_t n,
                  const struct bench_run_out *ro, struct result *res)
{
    memset(res, 0, sizeof(*res));
    size_t n_itl = 0;
    for (int32_t i = 0; i < n; i++)
        if (reqs[i].ok && reqs[i].n_chunks > 1)
            n_itl += (size_t)reqs[i].n_chunks - 1;
    double *ttft = folio_malloc(((size_t)n + 1) * sizeof(double));
    double *tpot = folio_malloc(((size_t)n + 1) * sizeof(double));
    double *e2el = folio_malloc(((size_t)n + 1) * sizeof(double));
    double *itl = folio_malloc((n_itl + 1) * sizeof(double));
    res->duration_s = (double)(ro->t_end - ro->t0) * 1e-9;
    int32_t nb = (int32_t)ceil(res->duration_s);
    if (nb < 1)
        nb = 1;
    res->n_buckets = nb;
    res->bucket_t = folio_calloc((size_t)nb, sizeof(double));
    res->bucket_tokens = folio_calloc((size_t)nb, sizeof(double));
    res->bucket_kv = folio_calloc((size_t)nb, sizeof(double));
    res->bucket_running = folio_calloc((size_t)nb, sizeof(double));
    res->bucket_waiting = folio_calloc((size_t)nb, sizeof(double));
    res->bucket_inflight = folio_calloc((size_t)nb, sizeof(double));
    if (!ttft || !tpot || !e2el || !itl || !res->bucket_t || !res->bucket_tokens ||
        !res->bucket_kv || !res->bucket_running || !res->bucket_waiting || !res->bucket_inflight) {
        folio_free(ttft);
        folio_free(tpot);
        folio_free(e2el);
        folio_free(itl);
        return -ENOMEM;
    }
    size_t nt = 0, np = 0, ne = 0, ni = 0;
    for (int32_t i = 0; i < n; i++) {
        const struct bench_req *r = &reqs[i];
        if (!r->sent) {
            res->not_sent++;
            continue;
        }
        if (!r->ok) {
            res->failed++;
            int k;
            for (k = 0; k < res->n_reasons; k++)
                if (!strcmp(res->reasons[k], r->reason))
                    break;
            if (k == res->n_reasons && k < 32) {
                snprintf(res->reasons[k], sizeof(res->reasons[k]), "%s", r->reason);
                res->n_reasons++;
            }
            if (k < 32)
                res->reason_count[k]++;
            continue;
        }
        res->completed++;
        int64_t out = req_out_tokens(r);
        res->input_tokens += r->usage_prompt >= 0 ? r->usage_prompt : r->prompt_len;
        res->output_tokens += out;
        double e = ms(r->t_send, r->t_end);
        e2el[ne++] = e;
        double tt = r->t_first ? ms(r->t_send, r->t_first) : NAN;
        if (r->t_first)
            ttft[nt++] = tt;
        double tp = NAN;
        if (out > 1 && r->t_first) {
            tp = (e - tt) / (double)(out - 1);
            tpot[np++] = tp;
        }
        for (int32_t c = 1; c < r->n_chunks; c++)
            itl[ni++] = ms(r->chunks[c - 1].t_ns, r->chunks[c].t_ns);
        for (int32_t c = 0; c < r->n_chunks; c++) {
            int64_t b = (int64_t)((r->chunks[c].t_ns - ro->t0) / 1000000000ull);
            if (b >= nb)
                b = nb - 1;
            res->bucket_tokens[b] += r->chunks[c].n_tokens;
        }
        bool good = true;
        if (!isnan(o->slo_ttft) && !(tt <= o->slo_ttft))
            good = false;
        if (!isnan(o->slo_tpot) && out > 1 && !(tp <= o->slo_tpot))
            good = false;
        if (!isnan(o->slo_e2el) && !(e <= o->slo_e2el))
            good = false;
        res->good += good;
    }
    bench_dist_of(ttft, nt, &res->ttft);
    bench_dist_of(tpot, np, &res->tpot);
    bench_dist_of(itl, ni, &res->itl);
    bench_dist_of(e2el, ne, &res->e2el);
    folio_free(ttft);
    folio_free(tpot);
    folio_free(e2el);
    folio_free(itl);
    double d = res->duration_s > 0 ? res->duration_s : NAN;
    res->req_tput = res->completed / d;
    res->out_tput = (double)res->output_tokens / d;
    res->total_tput = (double)(res->output_tokens + res->input_tokens) / d;
    res->goodput = res->good / d;
    for (int32_t b = 0; b < nb; b++) {
        res->bucket_t[b] = b + 1; /* the window (b, b+1] s ends here */
        if (res->bucket_tokens[b] > res->peak_out_tput)
            res->peak_out_tput = res->bucket_tokens[b];
        /* last scrape / tick at or before the window's end */
        res->bucket_kv[b] = res->bucket_running[b] = res->bucket_waiting[b] = NAN;
        res->bucket_inflight[b] = NAN;
        for (int32_t k = 0; k < ro->n_metrics && ro->metrics[k].t_s <= b + 1; k++) {
            res->bucket_kv[b] = ro->metrics[k].kv_usage * 100.0;
            res->bucket_running[b] = ro->metrics[k].running;
            res->bucket_waiting[b] = ro->metrics[k].waiting;
        }
        for (int32_t k = 0; k < ro->n_ticks && ro->ticks[k].t_s <= b + 1; k++)
            res->bucket_inflight[b] = ro->ticks[k].inflight;
    }
    return 0;
}

static void result_free(struct result *r)
{
    folio_free(r->bucket_t);
    folio_free(r->bucket_tokens);
    folio_free(r->bucket_kv);
    folio_free(r->bucket_running);
    folio_free(r->bucket_waiting);
    folio_free(r->bucket_inflight);
}

/* ---- report ------------------------------------------------------------- */

static void line_s(const char *k, const char *v)
{
    printf("%-40s %-10s\n", k, v);
}

static void line_i(const char *k, long long v)
{
    char b[32];
    snprintf(b, sizeof(b), "%lld", v);
    line_s(k, b);
}

static void line_f(const char *k, double v)
{
    char b[32];
    if (isnan(v))
        snprintf(b, sizeof(b), "n/a");
    else
        snprintf(b, sizeof(b), "%.2f", v);
    line_s(k, b);
}

static void rule(const char *title, char fill)
{
    int w = 50, tl = (int)strlen(title);
    int left = (w - tl) / 2, right = w - tl - left;
    for (int i = 0; i < left; i++)
        putchar(fill);
    fputs(title, stdout);
    for (int i = 0; i < right; i++)
        putchar(fill);
    putchar('\n');
}

static void dist_block(const char *title, const char *abbr, const struct bench_dist *d)
{
    char k[64];
    rule(title, '-');
    snprintf(k, sizeof(k), "Mean %s (ms):", abbr);
    line_f(k, d->mean);
    snprintf(k, sizeof(k), "Median %s (ms):", abbr);
    line_f(k, d->median);
    snprintf(k, sizeof(k), "P90 %s (ms):", abbr);
    line_f(k, d->p90);
    snprintf(k, sizeof(k), "P99 %s (ms):", abbr);
    line_f(k, d->p99);
}

/* Requests per X-Folio-Replica, and the prefix-cache hit rate of the
 * replicas given with --replica-metrics. */
static void print_cluster(const struct opts *o, const struct bench_req *reqs, int32_t n)
{
    struct bench_replica_count rc[BENCH_MAX_REPLICAS];
    int m = bench_replica_tally(reqs, n, rc, BENCH_MAX_REPLICAS);
    if (m == 1 && !strcmp(rc[0].id, "-") && !o->n_replicas)
        return; /* a server that does not name itself */
    rule(" Replicas (X-Folio-Replica) ", '-');
    for (int k = 0; k < m; k++) {
        char key[96], v[64];
        snprintf(key, sizeof(key), "Requests on %.60s:", rc[k].id);
        snprintf(v, sizeof(v), "%d (%d failed)", rc[k].requests, rc[k].failed);
        line_s(key, v);
    }
    if (!o->n_replicas)
        return;
    int used;
    double hr = bench_cluster_hit_rate(o->replicas, o->n_replicas, &used);
    line_f("Cluster prefix-cache hit rate (%):", hr * 100.0);
    for (int i = 0; i < o->n_replicas; i++) {
        const struct bench_replica_scrape *s = &o->replicas[i];
        if (s->ok[0] && s->ok[1]) {
            double dq = s->queries[1] - s->queries[0], dh = s->hits[1] - s->hits[0];
            printf("  %-38s queries %.0f, hits %.0f (%.1f%%)\n", s->url, dq, dh,
                   dq > 0 ? 100.0 * dh / dq : 0.0);
        } else
            printf("  %-38s not counted: %s\n", s->url, s->err);
    }
}

static void print_report(const struct opts *o, const struct result *res,
                         const struct bench_run_out *ro, const struct bench_req *reqs, int32_t n)
{
    rule(" Serving Benchmark Result ", '=');
    line_i("Successful requests:", res->completed);
    line_i("Failed requests:", res->failed);
    for (int k = 0; k < res->n_reasons; k++) {
        char key[96];
        snprintf(key, sizeof(key), "  %.60s:", res->reasons[k]);
        line_i(key, res->reason_count[k]);
    }
    if (res->not_sent)
        line_i("Requests not sent (--duration):", res->not_sent);
    if (o->max_concurrency > 0)
        line_i("Maximum request concurrency:", o->max_concurrency);
    line_i("Peak concurrent requests:", ro->max_inflight);
    line_f("Benchmark duration (s):", res->duration_s);
    line_i("Total input tokens:", res->input_tokens);
    line_i("Total generated tokens:", res->output_tokens);
    line_f("Request throughput (req/s):", res->req_tput);
    if (!isnan(o->slo_ttft) || !isnan(o->slo_tpot) || !isnan(o->slo_e2el))
        line_f("Request goodput (req/s):", res->goodput);
    line_f("Output token throughput (tok/s):", res->out_tput);
    line_f("Peak output token throughput (tok/s):", res->peak_out_tput);
    line_f("Total token throughput (tok/s):", res->total_tput);
    dist_block("Time to First Token", "TTFT", &res->ttft);
    dist_block("Time per Output Token (excl. 1st token)", "TPOT", &res->tpot);
    dist_block("Inter-token Latency", "ITL", &res->itl);
    dist_block("End-to-end Latency", "E2EL", &res->e2el);
    if (o->scrape)
        printf("%-40s %d (%d failed)\n", "Metrics samples:", ro->n_metrics, ro->metrics_failures);
    print_cluster(o, reqs, n);
    rule("", '=');
    fflush(stdout);
}

static void json_dist(cJSON *root, const char *abbr, const struct bench_dist *d)
{
    char k[64];
    const struct {
        const char *name;
        double v;
    } f[] = {{"mean", d->mean}, {"median", d->median}, {"p90", d->p90},
             {"p99", d->p99},   {"std", d->std},       {"max", d->max}};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(f); i++) {
        snprintf(k, sizeof(k), "%s_%s_ms", f[i].name, abbr);
        cJSON_AddNumberToObject(root, k, f[i].v);
    }
}

static cJSON *num_array(const double *v, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, isfinite(v[i]) ? cJSON_CreateNumber(v[i]) : cJSON_CreateNull());
    return a;
}

static void json_cluster(cJSON *root, const struct opts *o, const struct bench_req *reqs, int32_t n)
{
    struct bench_replica_count rc[BENCH_MAX_REPLICAS];
    int m = bench_replica_tally(reqs, n, rc, BENCH_MAX_REPLICAS);
    cJSON *a = cJSON_AddArrayToObject(root, "replicas");
    for (int k = 0; k < m; k++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "id", rc[k].id);
        cJSON_AddNumberToObject(e, "requests", rc[k].requests);
        cJSON_AddNumberToObject(e, "ok", rc[k].ok);
        cJSON_AddNumberToObject(e, "failed", rc[k].failed);
        cJSON_AddItemToArray(a, e);
    }
    if (!o->n_replicas)
        return;
    int used;
    double hr = bench_cluster_hit_rate(o->replicas, o->n_replicas, &used);
    cJSON *c = cJSON_AddObjectToObject(root, "cluster_prefix_cache");
    if (isnan(hr))
        cJSON_AddNullToObject(c, "hit_rate");
    else
        cJSON_AddNumberToObject(c, "hit_rate", hr);
    cJSON_AddNumberToObject(c, "replicas_counted", used);
    cJSON *ra = cJSON_AddArrayToObject(c, "replicas");
    for (int i = 0; i < o->n_replicas; i++) {
        const struct bench_replica_scrape *s = &o->replicas[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "url", s->url);
        if (s->ok[0] && s->ok[1]) {
            cJSON_AddNumberToObject(e, "queries", s->queries[1] - s->queries[0]);
            cJSON_AddNumberToObject(e, "hits", s->hits[1] - s->hits[0]);
        } else
            cJSON_AddStringToObject(e, "error", s->err);
        cJSON_AddItemToArray(ra, e);
    }
}

static int write_json(const char *path, const struct opts *o, const struct result *res,
                      const struct bench_req *reqs, int32_t n, const struct bench_run_out *ro,
                      const char *target, const char *model)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return -ENOMEM;
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    cJSON_AddStringToObject(root, "date", date);
    cJSON_AddStringToObject(root, "backend", "openai");
    cJSON_AddStringToObject(root, "target", target);
    cJSON_AddStringToObject(root, "endpoint", o->endpoint);
    if (model)
        cJSON_AddStringToObject(root, "model_id", model);
    const char *ds[] = {"random", "prefix", "trace"};
    cJSON_AddStringToObject(root, "dataset", ds[o->dataset]);
    cJSON_AddNumberToObject(root, "num_prompts", n);
    cJSON_AddNumberToObject(root, "input_len", o->input_len);
    cJSON_AddNumberToObject(root, "output_len", o->output_len);
    cJSON_AddNumberToObject(root, "seed", (double)o->seed);
    if (isinf(o->rate))
        cJSON_AddStringToObject(root, "request_rate", "inf");
    else
        cJSON_AddNumberToObject(root, "request_rate", o->rate);
    cJSON_AddNumberToObject(root, "burstiness", o->burstiness);
    if (o->max_concurrency > 0)
        cJSON_AddNumberToObject(root, "max_concurrency", o->max_concurrency);
    else
        cJSON_AddNullToObject(root, "max_concurrency");
    cJSON_AddNumberToObject(root, "duration", res->duration_s);
    cJSON_AddNumberToObject(root, "completed", res->completed);
    cJSON_AddNumberToObject(root, "failed", res->failed);
    cJSON_AddNumberToObject(root, "not_sent", res->not_sent);
    cJSON *fr = cJSON_AddObjectToObject(root, "failure_reasons");
    for (int k = 0; k < res->n_reasons; k++)
        cJSON_AddNumberToObject(fr, res->reasons[k], res->reason_count[k]);
    cJSON_AddNumberToObject(root, "peak_concurrent_requests", ro->max_inflight);
    cJSON_AddNumberToObject(root, "total_input_tokens", (double)res->input_tokens);
    cJSON_AddNumberToObject(root, "total_output_tokens", (double)res->output_tokens);
    cJSON_AddNumberToObject(root, "request_throughput", res->req_tput);
    cJSON_AddNumberToObject(root, "request_goodput", res->goodput);
    cJSON_AddNumberToObject(root, "output_throughput", res->out_tput);
    cJSON_AddNumberToObject(root, "max_output_tokens_per_s", res->peak_out_tput);
    cJSON_AddNumberToObject(root, "total_token_throughput", res->total_tput);
    json_dist(root, "ttft", &res->ttft);
    json_dist(root, "tpot", &res->tpot);
    json_dist(root, "itl", &res->itl);
    json_dist(root, "e2el", &res->e2el);
    cJSON *slo = cJSON_AddObjectToObject(root, "slo");
    if (!isnan(o->slo_ttft))
        cJSON_AddNumberToObject(slo, "ttft_ms", o->slo_ttft);
    if (!isnan(o->slo_tpot))
        cJSON_AddNumberToObject(slo, "tpot_ms", o->slo_tpot);
    if (!isnan(o->slo_e2el))
        cJSON_AddNumberToObject(slo, "e2el_ms", o->slo_e2el);
    /* 1 s windows */
    cJSON *ts = cJSON_AddObjectToObject(root, "time_series");
    cJSON_AddItemToObject(ts, "t_s", num_array(res->bucket_t, (size_t)res->n_buckets));
    cJSON_AddItemToObject(ts, "output_tokens_per_s",
                          num_array(res->bucket_tokens, (size_t)res->n_buckets));
    cJSON_AddItemToObject(ts, "client_in_flight",
                          num_array(res->bucket_inflight, (size_t)res->n_buckets));
    /* raw scrapes */
    cJSON *m = cJSON_AddArrayToObject(root, "metrics");
    for (int32_t k = 0; k < ro->n_metrics; k++) {
        const struct bench_metrics_point *p = &ro->metrics[k];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "t_s", p->t_s);
        cJSON_AddNumberToObject(e, "kv_usage", p->kv_usage);
        cJSON_AddNumberToObject(e, "running", p->running);
        cJSON_AddNumberToObject(e, "waiting", p->waiting);
        cJSON_AddNumberToObject(e, "preemptions", p->preemptions);
        cJSON_AddNumberToObject(e, "kv_blocks_used", p->kv_blocks_used);
        cJSON_AddNumberToObject(e, "kv_blocks_total", p->kv_blocks_total);
        cJSON_AddItemToArray(m, e);
    }
    cJSON_AddNumberToObject(root, "metrics_failures", ro->metrics_failures);
    json_cluster(root, o, reqs, n);
    cJSON *rs = cJSON_AddArrayToObject(root, "requests");
    for (int32_t i = 0; i < n; i++) {
        const struct bench_req *r = &reqs[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "index", r->idx);
        cJSON_AddNumberToObject(e, "tenant", r->tenant_id);
        cJSON_AddNumberToObject(e, "arrival_s", r->arrival_s);
        cJSON_AddNumberToObject(e, "prompt_len", r->prompt_len);
        cJSON_AddNumberToObject(e, "max_tokens", r->output_len);
        cJSON_AddBoolToObject(e, "sent", r->sent);
        cJSON_AddBoolToObject(e, "success", r->ok);
        if (r->replica[0])
            cJSON_AddStringToObject(e, "replica", r->replica);
        if (r->sent) {
            cJSON_AddNumberToObject(e, "start_s", (double)(r->t_send - ro->t0) * 1e-9);
            cJSON_AddNumberToObject(e, "http_status", r->http_status);
            cJSON_AddNumberToObject(e, "output_tokens", (double)req_out_tokens(r));
            cJSON_AddNumberToObject(e, "chunk_tokens", r->out_tokens);
            cJSON_AddNumberToObject(e, "ttft_ms", r->t_first ? ms(r->t_send, r->t_first) : NAN);
            cJSON_AddNumberToObject(e, "e2el_ms", r->done ? ms(r->t_send, r->t_end) : NAN);
            double *itl = folio_malloc(((size_t)r->n_chunks + 1) * sizeof(double));
            for (int32_t c = 1; itl && c < r->n_chunks; c++)
                itl[c - 1] = ms(r->chunks[c - 1].t_ns, r->chunks[c].t_ns);
            cJSON_AddItemToObject(
                e, "itl_ms", num_array(itl, itl && r->n_chunks > 1 ? (size_t)r->n_chunks - 1 : 0));
            folio_free(itl);
            if (!r->ok) {
                cJSON_AddStringToObject(e, "error", r->reason);
                cJSON_AddStringToObject(e, "error_detail", r->detail);
            }
        }
        cJSON_AddItemToArray(rs, e);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text)
        return -ENOMEM;
    FILE *f = fopen(path, "w");
    int rc = 0;
    if (!f)
        rc = -errno;
    else {
        fputs(text, f);
        fputc('\n', f);
        if (fclose(f))
            rc = -errno;
    }
    cJSON_free(text);
    return rc;
}

static int write_plot(const char *path, const struct result *res, const char *target)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    struct bench_svg_panel p[3] = {
        {.title = "Output token throughput",
         .unit = "tokens/s, 1 s windows",
         .n_series = 1,
         .names = {"output tokens/s"},
         .y = {res->bucket_tokens}},
        {.title = "KV cache usage",
         .unit = "% of blocks",
         .n_series = 1,
         .names = {"KV usage (server)"},
         .y = {res->bucket_kv}},
        {.title = "Queue depth",
         .unit = "requests",
         .n_series = 3,
         .names = {"running (server)", "waiting (server)", "in flight (client)"},
         .y = {res->bucket_running, res->bucket_waiting, res->bucket_inflight}},
    };
    char title[440];
    snprintf(title, sizeof(title), "folio bench: %s", target);
    int rc = bench_svg_write(f, title, res->bucket_t, (size_t)res->n_buckets, p, 3);
    if (fclose(f) && !rc)
        rc = -errno;
    return rc;
}

/* Reduces the finished run and writes the report, --json and --plot: the
 * exit status. */
int bench_report(const struct opts *o, const struct bench_req *reqs, int32_t n,
                 const struct bench_run_out *ro, const char *target_desc, const char *model)
{
    struct result res;
    int status, rc;
    if (reduce(o, reqs, n, ro, &res)) {
        fprintf(stderr, "folio bench: out of memory\n");
        result_free(&res);
        return 1;
    }
    print_report(o, &res, ro, reqs, n);
    status = res.completed > 0 ? 0 : 1;
    if (o->json && (rc = write_json(o->json, o, &res, reqs, n, ro, target_desc, model))) {
        fprintf(stderr, "folio bench: %s: %s\n", o->json, strerror(-rc));
        status = 1;
    }
    if (o->plot && (rc = write_plot(o->plot, &res, target_desc))) {
        fprintf(stderr, "folio bench: %s: %s\n", o->plot, strerror(-rc));
        status = 1;
    }
    result_free(&res);
    return status;
}
