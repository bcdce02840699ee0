/*
 * model/sampler.c — greedy / temperature / top-k / top-p sampling (see
 * folio/sampler.h for the contract).
 *
 * Workspace layout (sampler_work_size):
 *
 *   work ─ l   [n_vocab] float    biased logits (banned and NaN -> -inf)
 *        ─ idx [n_vocab] int32    candidate ids: a binary max-heap in
 *                                 idx[0, hn) and, behind it, the ids
 *                                 popped so far in order (best first at
 *                                 idx[nc - 1], next at idx[nc - 2], ...)
 *
 * Ranking is by (l descending, id ascending), a total order, so the kept
 * set, the draw and the top-N list are deterministic.  Sorting is lazy:
 * the heap is built in O(n) and only as many ids are popped as top-k,
 * top-p and top-N need, O(k log n).  Without a top-k or top-p cut nothing
 * is sorted: the draw walks the candidates in id order (the same
 * distribution; u maps to a token through the cumulative sum in id order
 * instead of rank order).
 *
 * The random number for token t of a request is
 *   u = (splitmix64(seed ^ (t * 0x9E3779B97F4A7C15)) >> 11) * 2^-53,
 * a function of (seed, t) only (counter-based), never of the batch.
 */
#include "folio/sampler.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "folio/common.h"

size_t sampler_work_size(int32_t n_vocab)
{
    return n_vocab > 0 ? (size_t)n_vocab * (sizeof(float) + sizeof(int32_t)) : 0;
}

static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double sampler_uniform(uint64_t seed, uint64_t t)
{
    return (double)(mix64(seed ^ (t * 0x9E3779B97F4A7C15ull)) >> 11) * 0x1.0p-53;
}

/* a ranks before b */
static inline int better(const float *l, int32_t a, int32_t b)
{
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}

static void sift_down(const float *l, int32_t *h, int32_t n, int32_t i)
{
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && better(l, h[c + 1], h[c]))
            c++;
        if (!better(l, h[c], h[i]))
            return;
        int32_t t = h[c];
        h[c] = h[i];
        h[i] = t;
        i = c;
    }
}

struct ranker {
    const float *l;
    int32_t *idx;
    int32_t nc; /* candidates */
    int32_t hn; /* heap size; popped = nc - hn */
};

/* The k-th best candidate (k < nc), popping as needed. */
static int32_t ranked(struct ranker *r, int32_t k)
{
    while (r->nc - r->hn <= k) {
        int32_t top = r->idx[0];
        r->idx[0] = r->idx[--r->hn];
        r->idx[r->hn] = top;
        sift_down(r->l, r->idx, r->hn, 0);
    }
    return r->idx[r->nc - 1 - k];
}

int sampler_sample(const struct sampler_params *p, const float *logits, int32_t n_vocab, uint64_t t,
                   void *work, int32_t n_top, int32_t *token, struct sampler_result *res)
{
    if (!p || !logits || !work || !token || n_vocab < 1 || !(p->temperature >= 0) ||
        isinf(p->temperature) || n_top < 0 || n_top > SAMPLER_MAX_TOP || p->n_bias < 0 ||
        p->n_banned < 0 || (p->n_bias && !p->bias) || (p->n_banned && !p->banned))
        return -EINVAL;
    float *l = work;
    int32_t *idx = (int32_t *)(l + n_vocab);
    memcpy(l, logits, (size_t)n_vocab * sizeof(float));
    for (int32_t i = 0; i < p->n_bias; i++) {
        if (p->bias[i].token < 0 || p->bias[i].token >= n_vocab)
            return -EINVAL;
        l[p->bias[i].token] += p->bias[i].bias;
    }
    for (int32_t i = 0; i < p->n_banned; i++) {
        if (p->banned[i] < 0 || p->banned[i] >= n_vocab)
            return -EINVAL;
        l[p->banned[i]] = -INFINITY;
    }
    int32_t best = -1;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (isnan(l[i]))
            l[i] = -INFINITY;
        if (l[i] > -INFINITY && (best < 0 || l[i] > l[best]))
            best = i;
    }
    if (best < 0)
        return -EINVAL;
    const double mx = l[best];

    struct ranker r = {.l = l, .idx = idx};
    const int greedy = p->temperature == 0;
    const int cut_k = p->top_k > 0 && p->top_k < n_vocab;
    const int cut_p = p->top_p > 0 && p->top_p < 1;
    const int draw_ranked = !greedy && (cut_k || cut_p);
    if (draw_ranked || (res && n_top > 0)) {
        for (int32_t i = 0; i < n_vocab; i++)
            if (l[i] > -INFINITY)
                idx[r.nc++] = i;
        r.hn = r.nc;
        for (int32_t i = r.nc / 2 - 1; i >= 0; i--)
            sift_down(l, idx, r.nc, i);
    }

    int32_t choice = best;
    if (!greedy) {
        const double inv_t = 1.0 / p->temperature;
        double z = 0; /* sum of exp((l - max) / T) over all candidates */
        for (int32_t i = 0; i < n_vocab; i++)
            if (l[i] > -INFINITY)
                z += exp((l[i] - mx) * inv_t);
        const double u = sampler_uniform(p->seed, t);
        if (!draw_ranked) {
            /* no cut: walk the ids in order, no sorting needed */
            double target = u * z, acc = 0;
            for (int32_t i = 0; i < n_vocab; i++) {
                if (l[i] == -INFINITY)
                    continue;
                choice = i; /* rounding fallback: the last candidate */
                acc += exp((l[i] - mx) * inv_t);
                if (target < acc)
                    break;
            }
        } else {
            const int32_t limit = cut_k ? FOLIO_MIN(p->top_k, r.nc) : r.nc;
            double mass = 0;
            int32_t kept = 0;
            while (kept < limit) {
                mass += exp((l[ranked(&r, kept)] - mx) * inv_t);
                kept++;
                if (cut_p && mass >= (double)p->top_p * z)
                    break;
            }
            double target = u * mass, acc = 0;
            choice = ranked(&r, kept - 1); /* rounding fallback: the last kept */
            for (int32_t k = 0; k < kept; k++) {
                int32_t id = ranked(&r, k);
                acc += exp((l[id] - mx) * inv_t);
                if (target < acc) {
                    choice = id;
                    break;
                }
            }
        }
    }
    *token = choice;
    if (res) {
        double s = 0;
        for (int32_t i = 0; i < n_vocab; i++)
            if (l[i] > -INFINITY)
                s += exp(l[i] - mx);
        const double lse = mx + log(s);
        res->token = choice;
        res->logprob = (float)(l[choice] - lse);
        res->n_top = FOLIO_MIN(n_top, r.nc);
        for (int32_t k = 0; k < res->n_top; k++) {
            int32_t id = ranked(&r, k);
            res->top_ids[k] = id;
            res->top_logprobs[k] = (float)(l[id] - lse);
        }
    }
    return 0;
}
