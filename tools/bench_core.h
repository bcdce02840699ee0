/*
 * tools/bench_core.h — the parts of `folio bench` (tools/cmd_bench.c) that
 * need no server and are unit-tested on their own (tests/test_bench.c):
 *
 *   bench_sse_*     Server-Sent Events framing, fed any byte split
 *   bench_chunk_*   a cheap scan of one OpenAI streaming chunk (token count,
 *                   usage, error) without building a JSON tree
 *   bench_rng_*     seeded generator, exponential / gamma inter-arrivals
 *   bench_pct       percentiles (linear interpolation between order
 *                   statistics, as numpy.percentile and vllm bench do)
 *   bench_prom_*    Prometheus text exposition parsing
 *   bench_svg_*     the time-series plot
 *
 * All of it is single-threaded plain C; nothing here allocates per token:
 * the SSE parser reuses one growing buffer per stream, the chunk scanner
 * allocates nothing.  Fallible calls return 0 or -errno.
 */
#ifndef FOLIO_TOOLS_BENCH_CORE_H
#define FOLIO_TOOLS_BENCH_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "folio/buf.h"

/* ---- SSE framing ------------------------------------------------------ */

/* One event's data: its "data:" lines joined by '\n', without the field
 * name and its optional single space; data[len] == 0. */
typedef void (*bench_sse_fn)(void *user, const char *data, size_t len);

struct bench_sse {
    struct folio_buf line; /* the current incomplete line */
    struct folio_buf data; /* the current event's data */
    bool has_data;
    bool cr; /* last byte was '\r' (a following '\n' belongs to it) */
    int oom;
};

void bench_sse_init(struct bench_sse *s);
void bench_sse_free(struct bench_sse *s);
/* Feeds n bytes; calls fn once per complete event that has data.  Returns
 * 0 or -ENOMEM (then the stream is broken). */
int bench_sse_feed(struct bench_sse *s, const char *p, size_t n, bench_sse_fn fn, void *user);
/* End of stream: dispatches a final event not closed by a blank line. */
int bench_sse_finish(struct bench_sse *s, bench_sse_fn fn, void *user);

/* ---- one streaming chunk ---------------------------------------------- */

struct bench_chunk {
    int32_t n_tokens;     /* tokens carried: token_ids' length if present, else 1
                             when some choice has non-empty text/content */
    bool has_token_ids;   /* a "token_ids" array was present */
    bool has_text;        /* non-empty "text" or "content" */
    bool has_usage;       /* a "usage" object with completion_tokens */
    int64_t usage_prompt; /* usage.prompt_tokens (-1 if absent) */
    int64_t usage_completion;
    bool has_error;    /* an "error" key at the top level */
    bool finished;     /* a non-null finish_reason */
    bool finish_error; /* finish_reason "error": the server failed the request */
    bool done;         /* the payload was [DONE] */
};

/* Scans one data payload.  -EINVAL if it is not a JSON object (nor [DONE]). */
int bench_chunk_scan(const char *p, size_t n, struct bench_chunk *out);

/* ---- random numbers and arrivals -------------------------------------- */

struct bench_rng {
    uint64_t s;
};

void bench_rng_seed(struct bench_rng *r, uint64_t seed);
uint64_t bench_rng_u64(struct bench_rng *r);
double bench_rng_uniform(struct bench_rng *r); /* (0, 1) */
double bench_rng_normal(struct bench_rng *r);
/* Gamma(shape k, scale 1), k > 0 (Marsaglia-Tsang). */
double bench_rng_gamma(struct bench_rng *r, double k);
/* Inter-arrival gap in seconds for `rate` requests/s: gamma with shape
 * `burstiness` and mean 1/rate (burstiness 1 = exponential = Poisson
 * arrivals).  rate = +inf gives 0. */
double bench_arrival_gap(struct bench_rng *r, double rate, double burstiness);
/* Integer uniform in [lo, hi]. */
int64_t bench_rng_range(struct bench_rng *r, int64_t lo, int64_t hi);

/* ---- statistics ------------------------------------------------------- */

/* p-th percentile (0..100) of v[0..n) sorted ascending, linear
 * interpolation between closest ranks; NaN for n == 0. */
double bench_pct(const double *sorted, size_t n, double p);
/* Sorts v in place (ascending). */
void bench_sort(double *v, size_t n);

struct bench_dist {
    double mean, median, p90, p99, std, min, max;
    size_t n;
};
/* Sorts v in place and fills d (all NaN when n == 0). */
void bench_dist_of(double *v, size_t n, struct bench_dist *d);

/* ---- Prometheus text -------------------------------------------------- */

/* One sample: name, labels as written between the braces (no braces, may
 * be empty), value. */
typedef void (*bench_prom_fn)(void *user, const char *name, size_t name_len, const char *labels,
                              size_t labels_len, double value);
/* Parses the exposition text; malformed lines are skipped and counted. */
int bench_prom_parse(const char *text, size_t n, bench_prom_fn fn, void *user, int *bad_lines);

/* The handful of gauges the bench plots, summed over label sets; NaN when
 * the server exposes none of the known names. */
struct bench_prom_sample {
    double kv_usage;    /* 0..1 */
    double running;     /* requests running */
    double waiting;     /* requests waiting */
    double preemptions; /* cumulative */
    double kv_blocks_used, kv_blocks_total;
};
void bench_prom_extract(const char *text, size_t n, struct bench_prom_sample *out);

/* Sum of the samples named `name` whose label block contains `label` (a
 * substring such as tenant="alice"; NULL: every sample of the name,
 * labelled or not).  NaN when there is none. */
double bench_prom_sum(const char *text, size_t n, const char *name, const char *label);

/* Histogram `name`'s cumulative buckets (the name_bucket samples, in the
 * text's order): bound le[i] (+Inf as INFINITY) and count cum[i], up to
 * cap of them.  Returns how many were stored. */
int bench_prom_buckets(const char *text, size_t n, const char *name, double *le, double *cum,
                       int cap);

/* ---- SVG plot --------------------------------------------------------- */

/* One panel: up to 3 series over a shared time axis (seconds).  NaN values
 * are gaps. */
#define BENCH_SVG_MAX_SERIES 3
struct bench_svg_panel {
    const char *title, *unit;
    int n_series;
    const char *names[BENCH_SVG_MAX_SERIES];
    const double *y[BENCH_SVG_MAX_SERIES];
};
/* Writes a complete SVG document: panels stacked vertically over x[0..n). */
int bench_svg_write(FILE *f, const char *title, const double *x, size_t n,
                    const struct bench_svg_panel *panels, int n_panels);

#endif
