/*
 * tools/bench_stats.c — random numbers, arrival gaps and percentile
 * statistics for `folio bench` (API in bench_core.h).
 *
 * The generator is splitmix64: one 64-bit word of state, a fixed seed
 * gives the same workload and the same arrival times on every machine.
 * Gamma variates use Marsaglia and Tsang's squeeze method (shape >= 1) and
 * the U^(1/k) boost for shape < 1.  An arrival gap for rate r and
 * burstiness b is Gamma(b, 1) / (b r): mean 1/r, coefficient of variation
 * 1/sqrt(b); b = 1 is the exponential, i.e. Poisson arrivals — the same
 * definition as vllm bench serve's --burstiness.
 *
 * Percentiles interpolate linearly between the closest ranks of the sorted
 * sample (rank p/100 * (n-1)), which is numpy.percentile's default.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_core.h"

void bench_rng_seed(struct bench_rng *r, uint64_t seed)
{
    r->s = seed ^ 0x6a09e667f3bcc909ull;
}

uint64_t bench_rng_u64(struct bench_rng *r)
{
    uint64_t x = (r->s += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

double bench_rng_uniform(struct bench_rng *r)
{
    return ((double)(bench_rng_u64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

double bench_rng_normal(struct bench_rng *r)
{
    double u = bench_rng_uniform(r), v = bench_rng_uniform(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

double bench_rng_gamma(struct bench_rng *r, double k)
{
    if (k < 1.0)
        return bench_rng_gamma(r, k + 1.0) * pow(bench_rng_uniform(r), 1.0 / k);
    double d = k - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = bench_rng_normal(r), v = 1.0 + c * x;
        if (v <= 0)
            continue;
        v = v * v * v;
        double u = bench_rng_uniform(r);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
            return d * v;
    }
}

double bench_arrival_gap(struct bench_rng *r, double rate, double burstiness)
{
    if (isinf(rate) || rate <= 0)
        return 0;
    return bench_rng_gamma(r, burstiness) / (burstiness * rate);
}

int64_t bench_rng_range(struct bench_rng *r, int64_t lo, int64_t hi)
{
    if (hi <= lo)
        return lo;
    uint64_t span = (uint64_t)(hi - lo) + 1;
    return lo + (int64_t)(bench_rng_u64(r) % span);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void bench_sort(double *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof(*v), cmp_double);
}

double bench_pct(const double *sorted, size_t n, double p)
{
    if (n == 0)
        return NAN;
    if (p <= 0)
        return sorted[0];
    if (p >= 100)
        return sorted[n - 1];
    double rank = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)floor(rank);
    size_t hi = lo + 1 < n ? lo + 1 : lo;
    double f = rank - (double)lo;
    return sorted[lo] + (sorted[hi] - sorted[lo]) * f;
}

void bench_dist_of(double *v, size_t n, struct bench_dist *d)
{
    d->n = n;
    if (n == 0) {
        d->mean = d->median = d->p90 = d->p99 = d->std = d->min = d->max = NAN;
        return;
    }
    bench_sort(v, n);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    d->mean = sum / (double)n;
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (v[i] - d->mean) * (v[i] - d->mean);
    d->std = sqrt(ss / (double)n);
    d->median = bench_pct(v, n, 50);
    d->p90 = bench_pct(v, n, 90);
    d->p99 = bench_pct(v, n, 99);
    d->min = v[0];
    d->max = v[n - 1];
}
