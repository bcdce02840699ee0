/*
 * tools/sim_trace.c — trace files and synthetic traces (format and
 * distributions: tools/sim_trace.h), the one parser of the trace format
 * for `folio sim` and `folio bench`; random variates from bench_core.h.  Owns the request array of
 * a trace; plain single-threaded code, deterministic for a given seed.
 */
#include "sim_trace.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "bench_core.h"
#include "folio/buf.h"
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

static int parse_i64(const char **p, long long *out)
{
    char *e;
    errno = 0;
    long long v = strtoll(*p, &e, 10);
    if (e == *p || errno || (*e && *e != ' ' && *e != '\t' && *e != '\n' && *e != '\r'))
        return -EINVAL;
    *p = e;
    *out = v;
    return 0;
}

int sim_trace_parse(const char *text, size_t n, struct sim_trace *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    int32_t cap = 0;
    const char *p = text, *end = text + n;
    int lineno = 0;
    char line[512];
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        lineno++;
        size_t ll = (size_t)(le - p);
        if (ll >= sizeof(line)) {
            snprintf(err, errlen, "line %d: too long", lineno);
            goto bad;
        }
        memcpy(line, p, ll);
        line[ll] = 0;
        p = nl ? nl + 1 : end;
        const char *q = line;
        while (*q == ' ' || *q == '\t' || *q == '\r')
            q++;
        if (!*q || *q == '#')
            continue;
        struct sim_trace_req r;
        char *e;
        r.arrival_s = strtod(q, &e);
        long long tenant, pl, ol, pid;
        if (e == q || (*e != ' ' && *e != '\t') || !(r.arrival_s >= 0) || r.arrival_s > 1e9) {
            snprintf(err, errlen, "line %d: arrival_s must be a number >= 0", lineno);
            goto bad;
        }
        q = e;
        if (parse_i64(&q, &tenant) || tenant < 0 || tenant > UINT32_MAX) {
            snprintf(err, errlen, "line %d: tenant must be an unsigned integer", lineno);
            goto bad;
        }
        if (parse_i64(&q, &pl) || pl < 1 || pl > (1 << 24)) {
            snprintf(err, errlen, "line %d: prompt_len must be an integer >= 1", lineno);
            goto bad;
        }
        if (parse_i64(&q, &ol) || ol < 1 || ol > (1 << 24)) {
            snprintf(err, errlen, "line %d: output_len must be an integer >= 1", lineno);
            goto bad;
        }
        if (parse_i64(&q, &pid) || pid < -1 || pid > INT32_MAX) {
            snprintf(err, errlen, "line %d: prefix_id must be -1 or an integer >= 0", lineno);
            goto bad;
        }
        while (*q == ' ' || *q == '\t' || *q == '\r')
            q++;
        if (*q && *q != '#') {
            snprintf(err, errlen, "line %d: unexpected text after prefix_id", lineno);
            goto bad;
        }
        r.tenant = (uint32_t)tenant;
        r.prompt_len = (int32_t)pl;
        r.output_len = (int32_t)ol;
        r.prefix_id = (int32_t)pid;
        if (t->n == cap) {
            int32_t nc = cap ? cap * 2 : 64;
            struct sim_trace_req *nr = folio_realloc(t->reqs, (size_t)nc * sizeof(*nr));
            if (!nr) {
                snprintf(err, errlen, "out of memory");
                sim_trace_free(t);
                return -ENOMEM;
            }
            t->reqs = nr;
            cap = nc;
        }
        t->reqs[t->n++] = r;
    }
    /* insertion sort keeps equal arrivals in file order (qsort would not) */
    for (int32_t i = 1; i < t->n; i++) {
        struct sim_trace_req r = t->reqs[i];
        int32_t j = i;
        while (j > 0 && t->reqs[j - 1].arrival_s > r.arrival_s) {
            t->reqs[j] = t->reqs[j - 1];
            j--;
        }
        t->reqs[j] = r;
    }
    return 0;
bad:
    sim_trace_free(t);
    return -EINVAL;
}

/* Reads the whole file and parses it (sim_trace_parse); a file without a
 * single request is an error. */
int sim_trace_load(const char *path, struct sim_trace *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    struct folio_buf buf = {0};
    int rc = 0;
    char chunk[1 << 16];
    size_t k;
    while ((k = fread(chunk, 1, sizeof(chunk), f)) > 0)
        folio_buf_append(&buf, chunk, k);
    if (ferror(f)) {
        snprintf(err, errlen, "%s: read error", path);
        rc = -EIO;
    }
    fclose(f);
    if (buf.oom) {
        folio_buf_free(&buf);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (!rc) {
        char e2[200];
        rc = sim_trace_parse(buf.p ? buf.p : "", buf.len, t, e2, sizeof(e2));
        if (rc)
            snprintf(err, errlen, "%s: %s", path, e2);
        else if (t->n == 0) {
            snprintf(err, errlen, "%s: no requests", path);
            rc = -EINVAL;
        }
    }
    folio_buf_free(&buf);
    return rc;
}

static int32_t lognormal_len(struct bench_rng *r, double mean, double sigma)
{
    double mu = log(mean) - 0.5 * sigma * sigma;
    double x = exp(mu + sigma * bench_rng_normal(r));
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
    /* state set directly (not bench_rng_seed): keeps the streams every
     * published `folio sim` figure was made with */
    struct bench_rng r = {.s = mix64(o->seed + 12345)};
    double share_sum = 0;
    for (int32_t k = 0; k < o->n_tenants; k++)
        share_sum += o->tenants[k].share;
    double cv = o->cv > 0 ? o->cv : 3.0;
    double shape = 1.0 / (cv * cv);
    double now = 0;
    for (int32_t i = 0; i < o->num; i++) {
        struct sim_trace_req *q = &t->reqs[i];
        double gap = o->bursty ? bench_rng_gamma(&r, shape) / (shape * o->rate)
                               : -log(bench_rng_uniform(&r)) / o->rate;
        now += gap;
        q->arrival_s = now;
        q->tenant = 0;
        if (o->n_tenants > 0) {
            double u = bench_rng_uniform(&r) * share_sum, acc = 0;
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
        if (o->prefixes > 0 && bench_rng_uniform(&r) < 0.5)
            q->prefix_id = (int32_t)(bench_rng_uniform(&r) * o->prefixes);
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
