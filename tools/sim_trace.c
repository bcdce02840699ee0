/*
 * tools/sim_trace.c — trace files and synthetic traces (format and
 * distributions: tools/sim_trace.h).  Owns the request array of a trace;
 * plain single-threaded code, deterministic for a given seed.
 */
#include "sim_trace.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

struct rng {
    uint64_t s;
};

static double uniform01(struct rng *r) /* (0, 1) */
{
    r->s += 0x9e3779b97f4a7c15ull;
    return ((double)(mix64(r->s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double normal(struct rng *r)
{
    double u = uniform01(r), v = uniform01(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Gamma(k, 1): Marsaglia and Tsang; k < 1 by the boost U^(1/k). */
static double gamma_k(struct rng *r, double k)
{
    if (k < 1.0)
        return gamma_k(r, k + 1.0) * pow(uniform01(r), 1.0 / k);
    double d = k - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = normal(r), v = 1.0 + c * x;
        if (v <= 0)
            continue;
        v = v * v * v;
        double u = uniform01(r);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
            return d * v;
    }
}

static int cmp_arrival(const void *a, const void *b)
{
    const struct sim_trace_req *x = a, *y = b;
    return (x->arrival_s > y->arrival_s) - (x->arrival_s < y->arrival_s);
}

int sim_trace_load(const char *path, struct sim_trace *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    FILE *f = fopen(path, "r");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    char line[512];
    int32_t cap = 0, lineno = 0;
    int rc = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '#' || *p == '\n' || *p == '\0')
            continue;
        struct sim_trace_req q;
        char extra[8];
        int n = sscanf(p, "%lf %u %d %d %d %7s", &q.arrival_s, &q.tenant, &q.prompt_len,
                       &q.output_len, &q.prefix_id, extra);
        if (n != 5 || q.arrival_s < 0 || q.prompt_len < 1 || q.output_len < 1 || q.prefix_id < -1) {
            snprintf(err, errlen, "%s:%d: want 'arrival_s tenant prompt_len output_len prefix_id'",
                     path, lineno);
            rc = -EINVAL;
            break;
        }
        if (t->n == cap) {
            cap = cap ? 2 * cap : 256;
            struct sim_trace_req *nr = folio_realloc(t->reqs, (size_t)cap * sizeof(*nr));
            if (!nr) {
                rc = -ENOMEM;
                snprintf(err, errlen, "out of memory");
                break;
            }
            t->reqs = nr;
        }
        t->reqs[t->n++] = q;
    }
    fclose(f);
    if (rc) {
        sim_trace_free(t);
        return rc;
    }
    if (t->n == 0) {
        snprintf(err, errlen, "%s: no requests", path);
        return -EINVAL;
    }
    qsort(t->reqs, (size_t)t->n, sizeof(*t->reqs), cmp_arrival);
    return 0;
}

static int32_t lognormal_len(struct rng *r, double mean, double sigma)
{
    double mu = log(mean) - 0.5 * sigma * sigma;
    double x = exp(mu + sigma * normal(r));
    return x < 1 ? 1 : x > 1e6 ? 1000000 : (int32_t)(x + 0.5);
}

int sim_trace_synth(const struct sim_synth_opts *o, struct sim_trace *t)
{
    memset(t, 0, sizeof(*t));
    if (o->num < 1 || o->rate <= 0 || o->ctx_len < 2)
        return -EINVAL;
    t->reqs = folio_calloc((size_t)o->num, sizeof(*t->reqs));
    if (!t->reqs)
        return -ENOMEM;
    t->n = o->num;
    struct rng r = {mix64(o->seed + 12345)};
    double share_sum = 0;
    for (int32_t k = 0; k < o->n_tenants; k++)
        share_sum += o->tenants[k].share;
    double cv = o->cv > 0 ? o->cv : 3.0;
    double shape = 1.0 / (cv * cv);
    double now = 0;
    for (int32_t i = 0; i < o->num; i++) {
        struct sim_trace_req *q = &t->reqs[i];
        double gap =
            o->bursty ? gamma_k(&r, shape) / (shape * o->rate) : -log(uniform01(&r)) / o->rate;
        now += gap;
        q->arrival_s = now;
        q->tenant = 0;
        if (o->n_tenants > 0) {
            double u = uniform01(&r) * share_sum, acc = 0;
            q->tenant = o->tenants[o->n_tenants - 1].id;
            for (int32_t k = 0; k < o->n_tenants; k++) {
                acc += o->tenants[k].share;
                if (u < acc) {
                    q->tenant = o->tenants[k].id;
                    break;
                }
            }
        }
        q->prompt_len = lognormal_len(&r, o->in_mean, o->sigma);
        q->output_len = lognormal_len(&r, o->out_mean, o->sigma);
        if (q->prompt_len > o->ctx_len - 1)
            q->prompt_len = o->ctx_len - 1;
        if (q->prompt_len + q->output_len > o->ctx_len)
            q->output_len = o->ctx_len - q->prompt_len;
        q->prefix_id = -1;
        if (o->prefixes > 0 && uniform01(&r) < 0.5)
            q->prefix_id = (int32_t)(uniform01(&r) * o->prefixes);
    }
    return 0;
}

int sim_trace_write(const struct sim_trace *t, FILE *out)
{
    fprintf(out, "# arrival_s tenant prompt_len output_len prefix_id\n");
    for (int32_t i = 0; i < t->n; i++) {
        const struct sim_trace_req *q = &t->reqs[i];
        fprintf(out, "%.6f %u %d %d %d\n", q->arrival_s, q->tenant, q->prompt_len, q->output_len,
                q->prefix_id);
    }
    return ferror(out) ? -EIO : 0;
}

void sim_trace_free(struct sim_trace *t)
{
    folio_free(t->reqs);
    t->reqs = NULL;
    t->n = 0;
}

int sim_tenants_parse(const char *spec, struct sim_tenant_spec **out, int32_t *n)
{
    *out = NULL;
    *n = 0;
    int32_t cap = 1;
    for (const char *p = spec; *p; p++)
        cap += *p == ',';
    struct sim_tenant_spec *ts = folio_calloc((size_t)cap, sizeof(*ts));
    if (!ts)
        return -ENOMEM;
    const char *p = spec;
    int32_t k = 0;
    while (*p) {
        char *end;
        unsigned long id = strtoul(p, &end, 10);
        if (end == p)
            goto bad;
        ts[k] = (struct sim_tenant_spec){(uint32_t)id, 1.0, 1.0};
        p = end;
        if (*p == ':') {
            ts[k].weight = strtod(p + 1, &end);
            if (end == p + 1 || ts[k].weight <= 0)
                goto bad;
            p = end;
            if (*p == ':') {
                ts[k].share = strtod(p + 1, &end);
                if (end == p + 1 || ts[k].share < 0)
                    goto bad;
                p = end;
            }
        }
        k++;
        if (*p == ',')
            p++;
        else if (*p)
            goto bad;
    }
    if (k == 0)
        goto bad;
    *out = ts;
    *n = k;
    return 0;
bad:
    folio_free(ts);
    return -EINVAL;
}

void sim_trace_prompt(const struct sim_trace *t, int32_t i, uint64_t seed, int32_t prefix_len,
                      int32_t vocab, int32_t *out)
{
    const struct sim_trace_req *q = &t->reqs[i];
    int32_t shared = 0;
    if (q->prefix_id >= 0)
        shared = FOLIO_MIN(prefix_len, q->prompt_len - 1);
    for (int32_t j = 0; j < q->prompt_len; j++) {
        uint64_t h = j < shared
                         ? mix64(seed ^ mix64(0x70726566ull + (uint64_t)q->prefix_id) ^ (uint64_t)j)
                         : mix64(seed ^ mix64((uint64_t)i + 0x1000000ull) ^ (uint64_t)j);
        out[j] = 1 + (int32_t)(h % (uint64_t)(vocab - 1));
    }
}
