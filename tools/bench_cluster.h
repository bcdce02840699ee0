/*
 * tools/bench_cluster.h — `folio bench` against several foliod replicas
 * behind a load balancer: which replica served each request (the
 * X-Folio-Replica response header, recorded by bench_run.c) and the
 * cluster's prefix-cache hit rate (each replica's /metrics scraped before
 * and after the run).
 *
 * The tally is plain C over the finished requests (unit-tested in
 * tests/test_bench.c); the scrape uses the blocking client
 * (http_client.h).  Nothing here is on the load's hot path.
 */
#ifndef FOLIO_TOOLS_BENCH_CLUSTER_H
#define FOLIO_TOOLS_BENCH_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include "bench_run.h"

#define BENCH_MAX_REPLICAS 64

/* Requests per replica id, in order of first appearance; requests answered
 * without the header (a balancer's own error, a connection that failed)
 * count under the id "-". */
struct bench_replica_count {
    char id[64];
    int32_t requests, ok, failed;
};

/* Fills out[0..return) from the sent requests of reqs[0..n); at most cap
 * ids (more distinct ids are counted under the last slot's "other"). */
int bench_replica_tally(const struct bench_req *reqs, int32_t n, struct bench_replica_count *out,
                        int cap);

/* One replica's /metrics, scraped before and after the run. */
struct bench_replica_scrape {
    const char *url;   /* http://HOST:PORT */
    double queries[2]; /* folio_prefix_cache_queries_total, before / after */
    double hits[2];    /* folio_prefix_cache_hits_total */
    bool ok[2];        /* that scrape found both counters */
    char err[160];     /* why a scrape failed (the last failure) */
};

/* Scrapes s->url/metrics with key (the operator key: the counters are
 * operator-only on foliod) into slot `phase` (0 before, 1 after). */
void bench_replica_scrape(struct bench_replica_scrape *s, const char *key, int phase);

/* The cluster's hit rate over the run: sum of hit deltas / sum of query
 * deltas over the replicas scraped both times (NaN when no query was made
 * or none was scraped twice); *n_used: how many replicas counted. */
double bench_cluster_hit_rate(const struct bench_replica_scrape *s, int n, int *n_used);

#endif
