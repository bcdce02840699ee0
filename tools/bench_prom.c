/*
 * tools/bench_prom.c — the tools' Prometheus text exposition parser:
 * `folio bench --scrape-metrics` and `folio top` (API in bench_core.h).
 *
 * Lines are `name{labels} value [timestamp]`, `# HELP` / `# TYPE` /
 * comments, or blank.  Label values may contain escaped quotes and '}',
 * so the label block is scanned quote-aware.  Values: decimal or
 * exponent floats, +Inf, -Inf, NaN.  A malformed line is skipped and
 * counted, never fatal: the scraped server is not ours.
 *
 * bench_prom_extract() maps the names foliod exposes (daemon/server.c:
 * folio_kv_cache_usage_ratio, folio_num_requests_running / _waiting,
 * folio_num_preemptions_total, folio_kv_blocks_used, folio_kv_num_blocks)
 * and, as fallbacks, vLLM's (vllm:gpu_cache_usage_perc or
 * vllm:kv_cache_usage_perc, vllm:num_requests_running / _waiting,
 * vllm:num_preemptions_total) and llama.cpp server's
 * (llamacpp:kv_cache_usage_ratio, llamacpp:requests_processing /
 * _deferred).  Samples of one name are summed over their label sets; the
 * first name of a list that appears wins.
 *
 * bench_prom_sum() and bench_prom_buckets() read one series or one
 * histogram (folio top's counters, gauges and latency quantiles).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_core.h"

static bool is_name_char(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
}

/* Parses a value token [p, e) (not NUL-terminated). */
static int parse_value(const char *p, const char *e, double *out)
{
    char tmp[64];
    size_t n = (size_t)(e - p);
    if (n == 0 || n >= sizeof(tmp))
        return -EINVAL;
    memcpy(tmp, p, n);
    tmp[n] = 0;
    if (!strcmp(tmp, "+Inf") || !strcmp(tmp, "Inf")) {
        *out = INFINITY;
        return 0;
    }
    if (!strcmp(tmp, "-Inf")) {
        *out = -INFINITY;
        return 0;
    }
    if (!strcmp(tmp, "NaN")) {
        *out = NAN;
        return 0;
    }
    char *end;
    *out = strtod(tmp, &end);
    return *end || end == tmp ? -EINVAL : 0;
}

static int parse_line(const char *p, const char *e, bench_prom_fn fn, void *user)
{
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    if (p == e || *p == '#')
        return 0;
    const char *name = p;
    if (!is_name_char(*p, true))
        return -EINVAL;
    while (p < e && is_name_char(*p, false))
        p++;
    size_t name_len = (size_t)(p - name);
    const char *labels = p;
    size_t labels_len = 0;
    if (p < e && *p == '{') {
        labels = ++p;
        bool in_str = false;
        while (p < e) {
            if (in_str) {
                if (*p == '\\')
                    p++;
                else if (*p == '"')
                    in_str = false;
            } else if (*p == '"')
                in_str = true;
            else if (*p == '}')
                break;
            p++;
        }
        if (p >= e)
            return -EINVAL;
        labels_len = (size_t)(p - labels);
        p++;
    }
    if (p >= e || (*p != ' ' && *p != '\t'))
        return -EINVAL;
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    const char *v = p;
    while (p < e && *p != ' ' && *p != '\t')
        p++;
    double val;
    if (parse_value(v, p, &val))
        return -EINVAL;
    /* an optional timestamp follows; nothing else may */
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    if (p < e) {
        const char *t = p;
        while (p < e && ((*p >= '0' && *p <= '9') || *p == '-'))
            p++;
        while (p < e && (*p == ' ' || *p == '\t'))
            p++;
        if (p != e || t == p)
            return -EINVAL;
    }
    fn(user, name, name_len, labels, labels_len, val);
    return 0;
}

int bench_prom_parse(const char *text, size_t n, bench_prom_fn fn, void *user, int *bad_lines)
{
    const char *p = text, *end = text + n;
    int bad = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *lt = le;
        if (lt > p && lt[-1] == '\r')
            lt--;
        if (parse_line(p, lt, fn, user))
            bad++;
        p = nl ? nl + 1 : end;
    }
    if (bad_lines)
        *bad_lines = bad;
    return 0;
}

/* ---- the gauges we plot ----------------------------------------------- */

enum { M_KV, M_RUN, M_WAIT, M_PREEMPT, M_USED, M_TOTAL, N_M };

static const char *const names[N_M][4] = {
    [M_KV] = {"folio_kv_cache_usage_ratio", "vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc",
              "llamacpp:kv_cache_usage_ratio"},
    [M_RUN] = {"folio_num_requests_running", "vllm:num_requests_running",
               "llamacpp:requests_processing", NULL},
    [M_WAIT] = {"folio_num_requests_waiting", "vllm:num_requests_waiting",
                "llamacpp:requests_deferred", NULL},
    [M_PREEMPT] = {"folio_num_preemptions_total", "vllm:num_preemptions_total",
                   "vllm:num_preemptions", NULL},
    [M_USED] = {"folio_kv_blocks_used", NULL, NULL, NULL},
    [M_TOTAL] = {"folio_kv_num_blocks", NULL, NULL, NULL},
};

struct extract {
    double sum[N_M][4];
    bool seen[N_M][4];
};

static void on_sample(void *user, const char *name, size_t name_len, const char *labels,
                      size_t labels_len, double value)
{
    (void)labels;
    (void)labels_len;
    struct extract *x = user;
    for (int m = 0; m < N_M; m++)
        for (int k = 0; k < 4 && names[m][k]; k++)
            if (strlen(names[m][k]) == name_len && !memcmp(names[m][k], name, name_len)) {
                x->sum[m][k] += value;
                x->seen[m][k] = true;
            }
}

void bench_prom_extract(const char *text, size_t n, struct bench_prom_sample *out)
{
    struct extract x;
    memset(&x, 0, sizeof(x));
    bench_prom_parse(text, n, on_sample, &x, NULL);
    double v[N_M];
    for (int m = 0; m < N_M; m++) {
        v[m] = NAN;
        for (int k = 0; k < 4 && names[m][k]; k++)
            if (x.seen[m][k]) {
                v[m] = x.sum[m][k];
                break;
            }
    }
    out->kv_usage = v[M_KV];
    out->running = v[M_RUN];
    out->waiting = v[M_WAIT];
    out->preemptions = v[M_PREEMPT];
    out->kv_blocks_used = v[M_USED];
    out->kv_blocks_total = v[M_TOTAL];
}

/* ---- single series (folio top) ---------------------------------------- */

struct sum_q {
    const char *name, *label;
    double sum;
    bool any;
};

static void on_sum(void *user, const char *name, size_t name_len, const char *labels,
                   size_t labels_len, double value)
{
    struct sum_q *q = user;
    if (strlen(q->name) != name_len || memcmp(q->name, name, name_len))
        return;
    if (q->label && !memmem(labels, labels_len, q->label, strlen(q->label)))
        return;
    q->sum += value;
    q->any = true;
}

double bench_prom_sum(const char *text, size_t n, const char *name, const char *label)
{
    struct sum_q q = {.name = name, .label = label};
    bench_prom_parse(text, n, on_sum, &q, NULL);
    return q.any ? q.sum : NAN;
}

struct bucket_q {
    char name[160];
    double *le, *cum;
    int cap, n;
};

static void on_bucket(void *user, const char *name, size_t name_len, const char *labels,
                      size_t labels_len, double value)
{
    struct bucket_q *q = user;
    if (q->n >= q->cap || strlen(q->name) != name_len || memcmp(q->name, name, name_len))
        return;
    const char *le = memmem(labels, labels_len, "le=\"", 4);
    if (!le)
        return;
    le += 4;
    const char *e = memchr(le, '"', labels_len - (size_t)(le - labels));
    double v;
    if (!e || parse_value(le, e, &v))
        return;
    q->le[q->n] = v;
    q->cum[q->n] = value;
    q->n++;
}

int bench_prom_buckets(const char *text, size_t n, const char *name, double *le, double *cum,
                       int cap)
{
    struct bucket_q q = {.le = le, .cum = cum, .cap = cap};
    snprintf(q.name, sizeof(q.name), "%s_bucket", name);
    bench_prom_parse(text, n, on_bucket, &q, NULL);
    return q.n;
}
