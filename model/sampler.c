/*
 * model/sampler.c — greedy / temperature / top-k / top-p sampling (see
 * folio/sampler.h for the contract).
 *
 * Workspace layout (sampler_work_size):
 *
 *   work ─ l   [n_vocab] float    biased logits (banned and NaN -> -inf)
 *        ─ w   [n_vocab] float    exp((l - max) / T), 0 for -inf
 *        ─ idx [n_vocab] int32    ranked candidate ids (see below)
 *        ─ aux [n_vocab] 4 bytes  typical_p's keys; sampler_penalize's counts;
 *                                 draw_bucketed's bucket ids (16 bits)
 *
 * Ranking is by (l descending, id ascending), a total order, so the kept
 * set, the draw and the top-N list are deterministic.  Two ways to rank:
 *   - selection, when at most SELECT_MAX ranks are needed (top-k <=
 *     SELECT_MAX, top-N logprobs): one pass keeps the K best in a min-heap
 *     (a candidate is compared with the heap's worst and almost always
 *     skipped), then the K are sorted, best first, into idx[0, K);
 *   - buckets otherwise (top-p without a small top-k): a histogram of the
 *     weights by eighths of an octave finds the bucket where the cut falls
 *     (T=0.8, top-p 0.9 over 32000 flat logits: 115-185 us a draw on the
 *     Zen 3 VM, 411-457 with whole octaves and branchy passes); only
 *     that bucket's tokens are ranked, by a max-heap built in O(n) in
 *     idx[0, hn) with the ids popped so far behind it (best at
 *     idx[nc - 1], next at idx[nc - 2], ...), popped as deep as the cut
 *     goes (see draw_bucketed).
 * Without a top-k or top-p cut nothing is ranked: the draw walks the
 * candidates in id order (the same distribution; u maps to a token through
 * the cumulative sum in id order instead of rank order).  min_p or
 * typical_p take a third way, draw_filtered: the survivors of those two
 * cuts are listed and fully sorted (typical_p needs an order that is not
 * the logits' anyway), then top-k / top-p / the draw walk them in rank
 * order.  Its cost is the sort of the survivors, so min_p alone (which
 * usually leaves few) stays cheap.
 *
 * The passes over the whole vocabulary run in 8-lane GCC vectors,
 * branch-free: the clean-up, max and greedy id (logits_prepare), and the
 * exp weights with their 16 partial sums, which also give the
 * log-sum-exp (exp_sum).  exp is model__exp_approx lane by lane (relative
 * error < 2e-7, far below what sampling or reported logprobs can
 * notice).
 *
 * The random number for token t of a request is
 *   u = (splitmix64(seed ^ (t * 0x9E3779B97F4A7C15)) >> 11) * 2^-53,
 * a function of (seed, t) only (counter-based), never of the batch.
 */
#include "folio/sampler.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "fastmath.h"
#include "folio/common.h"

#define SELECT_MAX 256

size_t sampler_work_size(int32_t n_vocab)
{
    return n_vocab > 0 ? (size_t)n_vocab * (3 * sizeof(float) + sizeof(int32_t)) : 0;
}

int32_t *sampler_work_counts(void *work, int32_t n_vocab)
{
    return (int32_t *)((char *)work + (size_t)n_vocab * (2 * sizeof(float) + sizeof(int32_t)));
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

/* a is ranked after b (worse); the min-heap's order */
static void sift_down_min(const float *l, int32_t *h, int32_t n, int32_t i)
{
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && better(l, h[c], h[c + 1]))
            c++; /* the worse child */
        if (!better(l, h[i], h[c]))
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
    int32_t nc; /* candidates (finite l) */
    int32_t hn; /* full sort: heap size; popped = nc - hn */
    int32_t k;  /* selection: ranks available in idx[0, k); 0 = full sort */
};

/* Selection of the best min(k, candidates) into idx[0, k), best first. */
static void rank_select(struct ranker *r, int32_t n_vocab, int32_t k)
{
    const float *l = r->l;
    int32_t *h = r->idx, n = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (l[i] == -INFINITY)
            continue;
        if (n < k) {
            h[n++] = i; /* sift up */
            for (int32_t c = n - 1; c > 0 && better(l, h[(c - 1) / 2], h[c]); c = (c - 1) / 2) {
                int32_t t = h[c];
                h[c] = h[(c - 1) / 2];
                h[(c - 1) / 2] = t;
            }
        } else if (l[i] > l[h[0]]) { /* ties lose: ids ascend */
            h[0] = i;
            sift_down_min(l, h, n, 0);
        }
    }
    for (int32_t m = n; m > 1; m--) { /* heapsort: worst to the back */
        int32_t t = h[0];
        h[0] = h[m - 1];
        h[m - 1] = t;
        sift_down_min(l, h, m - 1, 0);
    }
    r->k = n;
}

/* The k-th best candidate (k < number of ranks available). */
static int32_t ranked(struct ranker *r, int32_t k)
{
    if (r->k)
        return r->idx[k];
    while (r->nc - r->hn <= k) {
        int32_t top = r->idx[0];
        r->idx[0] = r->idx[--r->hn];
        r->idx[r->hn] = top;
        sift_down(r->l, r->idx, r->hn, 0);
    }
    return r->idx[r->nc - 1 - k];
}

/* 8 floats as GCC vectors (AVX in a native build, SSE pairs otherwise) */
typedef float f8 __attribute__((vector_size(32)));
typedef float f8_u __attribute__((vector_size(32), aligned(4), may_alias));
typedef int32_t i8 __attribute__((vector_size(32)));

/* x in every lane (a macro: a function returning a vector has an ABI
 * that depends on the build's ISA flags, which GCC warns about) */
#define F8_SPLAT(x) ((f8){(x), (x), (x), (x), (x), (x), (x), (x)})

/* sum over i of exp((l[i] - mx) * inv_t), 0 for -inf; w (may be NULL)
 * receives each term.  16 partial sums, element i in sum i % 16 (two
 * 8-lane vectors), then the tail and the partial sums in double. */
static double exp_sum(const float *l, float *w, int32_t n, float mx, float inv_t)
{
    f8 acc[2] = {F8_SPLAT(0.0f), F8_SPLAT(0.0f)};
    int32_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int h = 0; h < 2; h++) {
            const f8 v = *(const f8_u *)(const void *)(l + i + 8 * h);
            const i8 dead = v == -INFINITY;
            f8 e = (v - mx) * inv_t;
            MODEL__EXP_LANES(f8, i8, e); /* the scalar exp's bits (test_sampler) */
            e = (f8)((i8)e & ~dead);
            if (w)
                *(f8_u *)(void *)(w + i + 8 * h) = e;
            acc[h] += e;
        }
    double s = 0;
    for (; i < n; i++) {
        float e = l[i] == -INFINITY ? 0.0f : model__exp_approx((l[i] - mx) * inv_t);
        if (w)
            w[i] = e;
        s += e;
    }
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 8; k++)
            s += acc[h][k];
    return s;
}

/* Weight buckets: eighths of an octave, from the bits of w in (0, 1]:
 * (bits of 1.0f - bits of w) / 2^20, so bucket 0 holds (15/16, 1], and
 * each power of two below 1 is cut into 8 equal steps of its mantissa;
 * the tail below about 2^-63 shares NB - 1; 0 (not a candidate) goes to
 * NB.  For positive floats the bits order as the values, so bucket order
 * is rank order: a lower bucket's tokens all rank first. */
#define NB 512
static inline int32_t bucket_of(float w)
{
    int32_t bits;
    memcpy(&bits, &w, sizeof(bits));
    const int32_t d = (0x3F800000 - bits) >> 20; /* w a hair above 1: 0 */
    return w > 0 ? (d < 0 ? 0 : d < NB - 1 ? d : NB - 1) : NB;
}

/* The draw for a top-p cut (and/or a large top-k): the kept set is the
 * longest rank prefix with fewer than kmax tokens before it and mass
 * before it below pmass.  A histogram of the weights by bucket finds the
 * bucket B where the cut falls: every token of the buckets before B is
 * kept, and only B's tokens are ranked (lazy heap in r), so the cost is
 * three branch-free passes over the vocabulary (buckets and histogram,
 * B's members, the draw) plus |B| log |B|, with |B| an eighth of an
 * octave's tokens.  bk: n_vocab 16-bit slots of scratch (the workspace's
 * aux).  u maps to a token through the cumulative weight: buckets before
 * B in id order, then B's kept tokens in rank order. */
static int32_t draw_bucketed(struct ranker *r, const float *w, uint16_t *bk, int32_t n_vocab,
                             int32_t kmax, double pmass, double u)
{
    for (int32_t i = 0; i < n_vocab; i++)
        bk[i] = (uint16_t)bucket_of(w[i]);
    double bmass[NB + 1] = {0};
    int32_t bcnt[NB + 1] = {0};
    for (int32_t i = 0; i < n_vocab; i++) {
        bmass[bk[i]] += w[i];
        bcnt[bk[i]]++;
    }
    int32_t B = 0, cnt = 0;
    double mass = 0;
    for (; B < NB - 1; B++) {
        if (cnt + bcnt[B] >= kmax || mass + bmass[B] >= pmass)
            break;
        cnt += bcnt[B];
        mass += bmass[B];
    }
    /* rank bucket B (max-heap of its members, popped lazily) */
    int32_t nc = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        r->idx[nc] = i;
        nc += bk[i] == B;
    }
    r->nc = r->hn = nc;
    r->k = 0;
    for (int32_t i = r->nc / 2 - 1; i >= 0; i--)
        sift_down(r->l, r->idx, r->nc, i);
    int32_t kept = 0;
    while (kept < r->nc && cnt < kmax) {
        mass += w[ranked(r, kept)];
        cnt++;
        kept++;
        if (mass >= pmass)
            break;
    }
    double target = u * mass, acc = 0;
    int32_t choice = -1, i = 0;
    for (; i < n_vocab; i++) { /* the buckets before B, in id order */
        acc += bk[i] < B ? (double)w[i] : 0.0;
        if (target < acc)
            break;
    }
    if (i < n_vocab)
        return i;
    for (int32_t j = n_vocab - 1; kept == 0 && j >= 0 && choice < 0; j--)
        if (bk[j] < B)
            choice = j; /* rounding fallback: the last kept */
    for (int32_t k = 0; k < kept; k++) {
        choice = ranked(r, k);
        acc += w[choice];
        if (target < acc)
            return choice;
    }
    return choice;
}

/* ---- min_p / typical_p: the survivors, fully sorted ------------------ */

/* a before b in a filtered list: by key ascending (when key), then by
 * rank (l descending, id ascending) */
static inline int filt_before(const float *key, const float *l, int32_t a, int32_t b)
{
    if (key && key[a] != key[b])
        return key[a] < key[b];
    return better(l, a, b);
}

/* Heapsort of ids[0, n) by filt_before (no allocation, no callback
 * context, deterministic: the order is total). */
static void filt_sort(const float *key, const float *l, int32_t *ids, int32_t n)
{
    for (int32_t start = n / 2 - 1, end = n;;) {
        int32_t i;
        if (start >= 0)
            i = start--;
        else {
            if (--end <= 0)
                return;
            int32_t t = ids[0];
            ids[0] = ids[end];
            ids[end] = t;
            i = 0;
        }
        for (;;) { /* sift down: the "largest" (last in order) on top */
            int32_t c = 2 * i + 1;
            if (c >= end)
                break;
            if (c + 1 < end && filt_before(key, l, ids[c], ids[c + 1]))
                c++;
            if (!filt_before(key, l, ids[i], ids[c]))
                break;
            int32_t t = ids[c];
            ids[c] = ids[i];
            ids[i] = t;
            i = c;
        }
    }
}

/* The draw when min_p or typical_p is on.  w[i] = exp((l_i - max) / T)
 * (so w = p_i / max p), 0 for -inf.  Survivors of min_p go to idx; with
 * typical_p they are ordered by |-ln p - H| and cut to typical_p of their
 * mass; then ranked, cut by top_k and top_p (of the survivors' mass) and
 * drawn with u in rank order. */
static int32_t draw_filtered(const struct sampler_params *p, const float *l, const float *w,
                             int32_t *idx, float *key, int32_t n_vocab, double u)
{
    const float min_p = p->min_p > 0 ? p->min_p : 0;
    int32_t n = 0;
    double mass = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (w[i] > 0 && w[i] >= min_p) {
            idx[n++] = i;
            mass += w[i];
        }
    /* the max always survives (w = 1), so n >= 1 */
    if (p->typical_p > 0 && p->typical_p < 1 && n > 1) {
        double s = 0; /* sum w ln w */
        for (int32_t k = 0; k < n; k++)
            s += (double)w[idx[k]] * log((double)w[idx[k]]);
        const double lnm = log(mass), h = lnm - s / mass; /* entropy of w / mass */
        for (int32_t k = 0; k < n; k++)
            key[idx[k]] = (float)fabs(lnm - log((double)w[idx[k]]) - h);
        filt_sort(key, l, idx, n);
        double acc = 0;
        int32_t kept = 0;
        while (kept < n) {
            acc += w[idx[kept++]];
            if (acc >= (double)p->typical_p * mass)
                break;
        }
        n = kept;
        mass = acc;
    }
    filt_sort(NULL, l, idx, n);
    if (p->top_k > 0 && p->top_k < n)
        n = p->top_k;
    const int cut_p = p->top_p > 0 && p->top_p < 1;
    double acc = 0;
    int32_t kept = 0;
    while (kept < n) {
        acc += w[idx[kept++]];
        if (cut_p && acc >= (double)p->top_p * mass)
            break;
    }
    double target = u * acc;
    acc = 0;
    for (int32_t k = 0; k < kept; k++) {
        acc += w[idx[k]];
        if (target < acc)
            return idx[k];
    }
    return idx[kept - 1]; /* rounding */
}

/* sampler_sample's first step: l = the logits with the biases added, the
 * banned ids at -inf and NaN as -inf; *mx_out their maximum and *best_out
 * the lowest id holding it (the greedy token).  -EINVAL for an id out of
 * range, or when every logit is -inf. */
static int logits_prepare(const struct sampler_params *p, const float *logits, int32_t n_vocab,
                          float *l, float *mx_out, int32_t *best_out)
{
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
    /* NaN -> -inf, the max and the lowest id holding it, 8 lanes at a
     * time.  Lane k keeps its largest value and, as it moves only to a
     * strictly larger one, the lowest id of lane k holding it; the lanes
     * then give the lowest id over all.  (A plain loop with 16 maxima,
     * which GCC left scalar, then a scan for the id took 32-49 us of a
     * greedy call over 32000 logits on a Zen 3.) */
    const f8 ninf8 = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                      -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    f8 m8 = ninf8;
    i8 at8 = {0, 1, 2, 3, 4, 5, 6, 7}, id8 = at8;
    int32_t i = 0;
    for (; i + 8 <= n_vocab; i += 8, id8 += 8) {
        f8 v = *(const f8_u *)(const void *)(l + i);
        const i8 nan = v != v;
        v = (f8)(((i8)v & ~nan) | ((i8)ninf8 & nan));
        *(f8_u *)(void *)(l + i) = v;
        const i8 up = v > m8;
        m8 = (f8)(((i8)v & up) | ((i8)m8 & ~up));
        at8 = (id8 & up) | (at8 & ~up);
    }
    float mx = -INFINITY;
    int32_t best = 0;
    for (int k = 0; k < 8; k++)
        if (m8[k] > mx || (m8[k] == mx && at8[k] < best))
            mx = m8[k], best = at8[k];
    for (; i < n_vocab; i++) {
        if (l[i] != l[i])
            l[i] = -INFINITY;
        if (l[i] > mx)
            mx = l[i], best = i;
    }
    if (mx == -INFINITY)
        return -EINVAL; /* everything banned */
    *mx_out = mx;
    *best_out = best;
    return 0;
}

/* No cut: walk the ids in order, no ranking needed.  w: the weights, z
 * their sum; fallback when every weight is 0. */
static int32_t draw_in_order(const float *w, int32_t n_vocab, double z, double u, int32_t fallback)
{
    int32_t choice = fallback;
    double target = u * z, acc = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (w[i] == 0)
            continue;
        choice = i; /* rounding fallback: the last candidate */
        acc += w[i];
        if (target < acc)
            break;
    }
    return choice;
}

/* Top-k over the ranker's selection (k <= SELECT_MAX), then top-p of
 * the total mass z when cut_p. */
static int32_t draw_small_k(const struct sampler_params *p, struct ranker *rk, const float *w,
                            double z, double u, int cut_p)
{
    const int32_t limit = FOLIO_MIN(p->top_k, rk->k);
    double mass = 0;
    int32_t kept = 0;
    while (kept < limit) {
        mass += w[ranked(rk, kept)];
        kept++;
        if (cut_p && mass >= (double)p->top_p * z)
            break;
    }
    double target = u * mass, acc = 0;
    int32_t choice = ranked(rk, kept - 1); /* rounding fallback: the last kept */
    for (int32_t k = 0; k < kept; k++) {
        int32_t id = ranked(rk, k);
        acc += w[id];
        if (target < acc) {
            choice = id;
            break;
        }
    }
    return choice;
}

int sampler_sample(const struct sampler_params *p, const float *logits, int32_t n_vocab, uint64_t t,
                   void *work, int32_t n_top, int32_t *token, struct sampler_result *res)
{
    if (!p || !logits || !work || !token || n_vocab < 1 || !(p->temperature >= 0) ||
        isinf(p->temperature) || n_top < 0 || n_top > SAMPLER_MAX_TOP || p->n_bias < 0 ||
        p->n_banned < 0 || (p->n_bias && !p->bias) || (p->n_banned && !p->banned))
        return -EINVAL;
    float *l = work, *w = l + n_vocab;
    int32_t *idx = (int32_t *)(w + n_vocab);
    float mx;
    int32_t best; /* the lowest id among the maxima */
    int rc = logits_prepare(p, logits, n_vocab, l, &mx, &best);
    if (rc)
        return rc;

    const int greedy = p->temperature == 0;
    const int cut_k = p->top_k > 0 && p->top_k < n_vocab;
    const int cut_p = p->top_p > 0 && p->top_p < 1;
    const int filtered = (p->min_p > 0 && p->min_p <= 1) || (p->typical_p > 0 && p->typical_p < 1);
    const int draw_ranked = !greedy && !filtered && (cut_k || cut_p);
    const int small_k = cut_k && p->top_k <= SELECT_MAX;
    const int want_top = res && n_top > 0;
    struct ranker r = {.l = l, .idx = idx};
    int32_t sel_k = 0; /* ranks requested from the current selection */
    if (draw_ranked && small_k) {
        sel_k = FOLIO_MAX(p->top_k, want_top ? n_top : 0);
        rank_select(&r, n_vocab, sel_k);
    }

    int32_t choice = best;
    double z = 0;
    const float inv_t = greedy ? 1.0f : 1.0f / p->temperature;
    if (!greedy) {
        z = exp_sum(l, w, n_vocab, mx, inv_t);
        const double u = sampler_uniform(p->seed, t);
        if (filtered) {
            choice = draw_filtered(p, l, w, idx, (float *)sampler_work_counts(work, n_vocab),
                                   n_vocab, u);
        } else if (!draw_ranked) {
            choice = draw_in_order(w, n_vocab, z, u, choice);
        } else if (small_k) {
            choice = draw_small_k(p, &r, w, z, u, cut_p);
        } else {
            choice = draw_bucketed(&r, w, (uint16_t *)(void *)sampler_work_counts(work, n_vocab),
                                   n_vocab, cut_k ? p->top_k : INT32_MAX,
                                   cut_p ? (double)p->top_p * z : INFINITY, u);
        }
    }
    *token = choice;
    if (res) {
        if (want_top && sel_k < n_top) { /* (re)rank for the top-N list */
            sel_k = n_top;
            rank_select(&r, n_vocab, sel_k);
        }
        /* log_softmax at temperature 1: reuse z when T is 1 */
        double s = !greedy && inv_t == 1.0f ? z : exp_sum(l, NULL, n_vocab, mx, 1.0f);
        const double lse = mx + log(s);
        res->token = choice;
        res->logprob = (float)(l[choice] - lse);
        res->n_top = want_top ? FOLIO_MIN(n_top, r.k) : 0;
        for (int32_t k = 0; k < res->n_top; k++) {
            int32_t id = ranked(&r, k);
            res->top_ids[k] = id;
            res->top_logprobs[k] = (float)(l[id] - lse);
        }
    }
    return 0;
}

int sampler_score(const float *logits, int32_t n_vocab, int32_t token, void *work, int32_t n_top,
                  struct sampler_result *res)
{
    if (!logits || !work || !res || n_vocab < 1 || token < 0 || token >= n_vocab || n_top < 0 ||
        n_top > SAMPLER_MAX_TOP)
        return -EINVAL;
    const struct sampler_params raw = {0}; /* no bias, nothing banned */
    float *l = work;
    int32_t *idx = (int32_t *)(l + 2 * (size_t)n_vocab);
    float mx;
    int32_t best;
    int rc = logits_prepare(&raw, logits, n_vocab, l, &mx, &best);
    if (rc)
        return rc; /* every logit NaN or -inf */
    const double lse = mx + log(exp_sum(l, NULL, n_vocab, mx, 1.0f));
    int32_t above = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        above += l[i] > l[token];
    res->token = token;
    res->logprob = (float)(l[token] - lse);
    res->rank = above + 1;
    struct ranker r = {.l = l, .idx = idx};
    if (n_top > 0)
        rank_select(&r, n_vocab, n_top);
    res->n_top = r.k;
    for (int32_t k = 0; k < r.k; k++) {
        res->top_ids[k] = idx[k];
        res->top_logprobs[k] = (float)(l[idx[k]] - lse);
    }
    return 0;
}
