/*
 * tools/bench_cluster.c — per-replica request counts and the cluster's
 * prefix-cache hit rate for `folio bench` (API in bench_cluster.h).
 *
 * The tally is a linear scan over at most BENCH_MAX_REPLICAS ids (a
 * cluster has a handful of replicas; requests number in the thousands).
 * The hit rate is a ratio of summed counter deltas, not a mean of each
 * replica's rate: a replica that served little weighs little.  Counters
 * are read from foliod's global prefix-cache series, which foliod shows
 * only to its operator; a replica that restarted between the two scrapes
 * (a counter that went down) is left out.
 */
#include "bench_cluster.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench_core.h"
#include "folio/buf.h"
#include "http_client.h"

int bench_replica_tally(const struct bench_req *reqs, int32_t n, struct bench_replica_count *out,
                        int cap)
{
    int m = 0;
    if (cap <= 0)
        return 0;
    for (int32_t i = 0; i < n; i++) {
        const struct bench_req *r = &reqs[i];
        if (!r->sent)
            continue;
        const char *id = r->replica[0] ? r->replica : "-";
        int k;
        for (k = 0; k < m; k++)
            if (!strcmp(out[k].id, id))
                break;
        if (k == m) {
            if (m == cap) {
                k = cap - 1;
                snprintf(out[k].id, sizeof(out[k].id), "other");
            } else {
                memset(&out[m], 0, sizeof(out[m]));
                snprintf(out[m].id, sizeof(out[m].id), "%s", id);
                m++;
            }
        }
        out[k].requests++;
        if (r->ok)
            out[k].ok++;
        else
            out[k].failed++;
    }
    return m;
}

void bench_replica_scrape(struct bench_replica_scrape *s, const char *key, int phase)
{
    struct bench_target t;
    struct folio_buf body = {0};
    char err[160];
    int status = 0;
    s->ok[phase] = false;
    if (bench_target_url(&t, s->url, err, sizeof(err))) {
        snprintf(s->err, sizeof(s->err), "%s", err);
        return;
    }
    if (http_client_get(&t, "/metrics", key, &status, &body, err, sizeof(err))) {
        snprintf(s->err, sizeof(s->err), "%s", err);
    } else if (status != 200) {
        snprintf(s->err, sizeof(s->err), "GET /metrics: HTTP %d%s", status,
                 status == 401 || status == 403 ? " (--metrics-key: the operator key)" : "");
    } else {
        double q = bench_prom_sum(body.p, body.len, "folio_prefix_cache_queries_total", NULL);
        double h = bench_prom_sum(body.p, body.len, "folio_prefix_cache_hits_total", NULL);
        if (isnan(q) || isnan(h)) {
            snprintf(s->err, sizeof(s->err),
                     "no folio_prefix_cache_{queries,hits}_total (not the operator key?)");
        } else {
            s->queries[phase] = q;
            s->hits[phase] = h;
            s->ok[phase] = true;
        }
    }
    folio_buf_free(&body);
}

double bench_cluster_hit_rate(const struct bench_replica_scrape *s, int n, int *n_used)
{
    double q = 0, h = 0;
    int used = 0;
    for (int i = 0; i < n; i++) {
        if (!s[i].ok[0] || !s[i].ok[1] || s[i].queries[1] < s[i].queries[0] ||
            s[i].hits[1] < s[i].hits[0])
            continue;
        q += s[i].queries[1] - s[i].queries[0];
        h += s[i].hits[1] - s[i].hits[0];
        used++;
    }
    if (n_used)
        *n_used = used;
    return used && q > 0 ? h / q : NAN;
}
