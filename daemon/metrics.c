/*
 * daemon/metrics.c — see metrics.h.  Values (and histogram `le` labels)
 * print as the shortest decimal that reads back to the same double, so
 * 0.1 is "0.1" (a selector on le="0.1" matches) and integer counters stay
 * exact up to 2^53; special values as +Inf / -Inf / NaN.
 */
#include "metrics.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void srv_hist_init(struct srv_hist *h, const double *bounds, int n)
{
    memset(h, 0, sizeof(*h));
    h->bounds = bounds;
    h->n = n > SRV_HIST_MAX_BUCKETS ? SRV_HIST_MAX_BUCKETS : n;
}

void srv_hist_observe(struct srv_hist *h, double v)
{
    int i = 0;
    while (i < h->n && v > h->bounds[i])
        i++;
    h->counts[i]++;
    h->count++;
    h->sum += v;
}

void srv_prom_number(double v, char out[32])
{
    if (isnan(v)) {
        snprintf(out, 32, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(out, 32, "%s", v > 0 ? "+Inf" : "-Inf");
        return;
    }
    if (v == (double)(int64_t)v && fabs(v) < 1e17) { /* integers in full, never 1e+01 */
        snprintf(out, 32, "%lld", (long long)v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, 32, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            return;
    }
}

static void prom_value(struct folio_buf *b, double v)
{
    char t[32];
    srv_prom_number(v, t);
    folio_buf_puts(b, t);
}

void srv_prom_family(struct folio_buf *b, const char *name, const char *type, const char *help)
{
    folio_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void srv_prom_sample(struct folio_buf *b, const char *name, const char *labels, double v)
{
    folio_buf_puts(b, name);
    if (labels && *labels)
        folio_buf_printf(b, "{%s}", labels);
    folio_buf_puts(b, " ");
    prom_value(b, v);
    folio_buf_puts(b, "\n");
}

void srv_prom_hist(struct folio_buf *b, const char *name, const char *labels,
                   const struct srv_hist *h)
{
    const char *sep = labels && *labels ? "," : "";
    const char *lab = labels ? labels : "";
    uint64_t cum = 0;
    for (int i = 0; i <= h->n; i++) {
        cum += h->counts[i];
        folio_buf_printf(b, "%s_bucket{%s%sle=\"", name, lab, sep);
        if (i < h->n)
            prom_value(b, h->bounds[i]);
        else
            folio_buf_puts(b, "+Inf");
        folio_buf_printf(b, "\"} %llu\n", (unsigned long long)cum);
    }
    char nm[160];
    snprintf(nm, sizeof(nm), "%s_sum", name);
    srv_prom_sample(b, nm, labels, h->sum);
    snprintf(nm, sizeof(nm), "%s_count", name);
    srv_prom_sample(b, nm, labels, (double)h->count);
}

void srv_prom_label_escape(const char *v, char *out, size_t cap)
{
    size_t o = 0;
    for (; *v && o + 3 < cap; v++) {
        if (*v == '\\' || *v == '"') {
            out[o++] = '\\';
            out[o++] = *v;
        } else if (*v == '\n') {
            out[o++] = '\\';
            out[o++] = 'n';
        } else
            out[o++] = *v;
    }
    out[o] = 0;
}
