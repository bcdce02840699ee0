/*
 * tools/bench_trace.c — request traces for `folio bench --dataset trace`
 * (API in bench_core.h).  The format is `folio sim`'s, so one trace file
 * drives both the simulator and a real server:
 *
 *     # comment lines and blank lines are ignored
 *     arrival_s  tenant  prompt_len  output_len  prefix_id
 *     0.000      1       212         180         -1
 *     0.031      2       95          400         3
 *
 * arrival_s >= 0 (seconds from the start), tenant an unsigned id,
 * prompt_len >= 1, output_len >= 1, prefix_id -1 (no shared prefix) or
 * k >= 0 (the prompt starts with shared prefix k).  Fields are separated
 * by blanks; a bad line is an error naming the line.  The loaded array is
 * sorted by arrival (stable for equal times) and owned by the trace.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench_core.h"
#include "folio/common.h"

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

int bench_trace_parse(const char *text, size_t n, struct bench_trace *t, char *err, size_t errlen)
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
        struct bench_trace_req r;
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
            struct bench_trace_req *nr = folio_realloc(t->reqs, (size_t)nc * sizeof(*nr));
            if (!nr) {
                snprintf(err, errlen, "out of memory");
                bench_trace_free(t);
                return -ENOMEM;
            }
            t->reqs = nr;
            cap = nc;
        }
        t->reqs[t->n++] = r;
    }
    /* insertion sort keeps equal arrivals in file order (qsort would not) */
    for (int32_t i = 1; i < t->n; i++) {
        struct bench_trace_req r = t->reqs[i];
        int32_t j = i;
        while (j > 0 && t->reqs[j - 1].arrival_s > r.arrival_s) {
            t->reqs[j] = t->reqs[j - 1];
            j--;
        }
        t->reqs[j] = r;
    }
    return 0;
bad:
    bench_trace_free(t);
    return -EINVAL;
}

int bench_trace_load(const char *path, struct bench_trace *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = folio_malloc(cap);
    int rc = 0;
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (len < cap)
            break;
        char *nb = folio_realloc(buf, cap * 2);
        if (!nb) {
            folio_free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    if (ferror(f)) {
        snprintf(err, errlen, "%s: read error", path);
        rc = -EIO;
    }
    fclose(f);
    if (!buf) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (!rc) {
        char e2[200];
        rc = bench_trace_parse(buf, len, t, e2, sizeof(e2));
        if (rc)
            snprintf(err, errlen, "%s: %s", path, e2);
    }
    folio_free(buf);
    return rc;
}

void bench_trace_free(struct bench_trace *t)
{
    folio_free(t->reqs);
    t->reqs = NULL;
    t->n = 0;
}
