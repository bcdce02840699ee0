/*
 * daemon/metrics.h — Prometheus text exposition helpers and fixed-bucket
 * histograms.  Formatting only; the server decides what to expose
 * (stats.c, srv_metrics_render).  Names follow vLLM's with a folio_ prefix.
 *
 * Histograms are cumulative at render time: counts[i] holds observations
 * in (bounds[i-1], bounds[i]]; counts[n] the ones above the last bound.
 */
#ifndef FOLIO_DAEMON_METRICS_H
#define FOLIO_DAEMON_METRICS_H

#include <stdint.h>

#include "folio/buf.h"

#define SRV_HIST_MAX_BUCKETS 32

struct srv_hist {
    const double *bounds; /* ascending, [n] */
    int n;
    uint64_t counts[SRV_HIST_MAX_BUCKETS + 1];
    uint64_t count;
    double sum;
};

void srv_hist_init(struct srv_hist *h, const double *bounds, int n);
void srv_hist_observe(struct srv_hist *h, double v);

/* The shortest decimal that reads back as v ("0.1", "12345678901"), or
 * NaN / +Inf / -Inf. */
void srv_prom_number(double v, char out[32]);
/* # HELP and # TYPE lines (type: counter, gauge, histogram). */
void srv_prom_family(struct folio_buf *b, const char *name, const char *type, const char *help);
/* name{labels} value — labels is 'k="v",...' without braces, or NULL. */
void srv_prom_sample(struct folio_buf *b, const char *name, const char *labels, double v);
/* The _bucket / _sum / _count samples of one histogram. */
void srv_prom_hist(struct folio_buf *b, const char *name, const char *labels,
                   const struct srv_hist *h);
/* Escapes a label value (\\, \", \n) into out (cap bytes, NUL-terminated). */
void srv_prom_label_escape(const char *v, char *out, size_t cap);

#endif
