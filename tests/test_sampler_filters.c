/*
 * tests/test_sampler_filters.c — the sampler's min_p and typical_p cuts
 * (alone and with top-k / top-p), top-p's kept set, and sampler_penalize (repetition over a
 * last-N window of prompt ++ generated, presence and frequency over the
 * generated tokens), each against a plain reference written here from
 * the definitions in folio/sampler.h: full sorts, doubles, one loop per
 * vocabulary entry.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "folio/sampler.h"

static uint64_t rng = 0x1234567;
static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double next_unit(void)
{
    return (double)(next_u64() >> 11) * 0x1.0p-53;
}

/* ---- reference draw ------------------------------------------------- */

struct ref_tok {
    int32_t id;
    double l, p, key;
};

static int by_rank(const void *a, const void *b)
{
    const struct ref_tok *x = a, *y = b;
    if (x->l != y->l)
        return x->l > y->l ? -1 : 1;
    return x->id < y->id ? -1 : 1;
}
static int by_key(const void *a, const void *b)
{
    const struct ref_tok *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return by_rank(a, b);
}

/* The kept set in rank order, with its weights; returns its size.
 * *margin: distance of u * mass to the nearest cumulative boundary
 * (relative), to tell a rounding tie from a real disagreement. */
static int ref_draw(const struct sampler_params *sp, const float *logits, int32_t n, double u,
                    int32_t *choice, double *margin)
{
    struct ref_tok *t = malloc((size_t)n * sizeof(*t));
    double mx = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        mx = fmax(mx, logits[i]);
    int32_t m = 0;
    double pmax = 1; /* p relative to the max: exp((l - mx) / T) */
    for (int32_t i = 0; i < n; i++) {
        double w = exp(((double)logits[i] - mx) / sp->temperature);
        if (!(w > 0) || (sp->min_p > 0 && w < sp->min_p * pmax))
            continue;
        t[m++] = (struct ref_tok){i, logits[i], w, 0};
    }
    double mass = 0;
    for (int32_t k = 0; k < m; k++)
        mass += t[k].p;
    if (sp->typical_p > 0 && sp->typical_p < 1 && m > 1) {
        double h = 0;
        for (int32_t k = 0; k < m; k++)
            h -= t[k].p / mass * log(t[k].p / mass);
        for (int32_t k = 0; k < m; k++)
            t[k].key = fabs(-log(t[k].p / mass) - h);
        qsort(t, (size_t)m, sizeof(*t), by_key);
        double acc = 0;
        int32_t kept = 0;
        while (kept < m) {
            acc += t[kept++].p;
            if (acc >= sp->typical_p * mass)
                break;
        }
        m = kept;
        mass = acc;
    }
    qsort(t, (size_t)m, sizeof(*t), by_rank);
    if (sp->top_k > 0 && sp->top_k < m)
        m = sp->top_k;
    double acc = 0;
    int32_t kept = 0;
    while (kept < m) {
        acc += t[kept++].p;
        if (sp->top_p > 0 && sp->top_p < 1 && acc >= sp->top_p * mass)
            break;
    }
    double target = u * acc, c = 0;
    *choice = t[kept - 1].id;
    *margin = INFINITY;
    bool chosen = false;
    for (int32_t k = 0; k < kept; k++) {
        c += t[k].p;
        *margin = fmin(*margin, fabs(c - target) / acc);
        if (!chosen && target < c) {
            *choice = t[k].id;
            chosen = true;
        }
    }
    free(t);
    return kept;
}

/* Random logits (some ties, some -inf), random cuts: the sampler's token
 * is the reference's for every draw, except where u lands within 1e-4 of
 * a boundary between two tokens (exp is approximated in the sampler). */
static void test_min_p_typical_against_reference(void **state)
{
    (void)state;
    enum { NV = 3000 };
    static float l[NV];
    void *work = malloc(sampler_work_size(NV));
    int agree = 0, close = 0;
    const int rounds = getenv("FOLIO_TEST_SHORT") ? 80 : 300; /* sanitizer runs */
    for (int round = 0; round < rounds; round++) {
        int32_t n = 2 + (int32_t)(next_u64() % (round % 3 == 0 ? NV - 2 : 60));
        double scale = 0.5 + 6 * next_unit();
        for (int32_t i = 0; i < n; i++)
            l[i] = (float)(scale * (next_unit() - 0.5) * 4);
        for (int32_t i = 0; i < n / 10; i++) /* ties and bans */
            l[next_u64() % (uint64_t)n] = i % 3 ? l[0] : -INFINITY;
        l[next_u64() % (uint64_t)n] = 3 * (float)scale; /* a clear max */
        struct sampler_params sp = {.temperature = (float)(0.3 + 1.5 * next_unit()),
                                    .seed = next_u64()};
        switch (round % 4) {
        case 0:
            sp.min_p = (float)(0.5 * next_unit());
            break;
        case 1:
            sp.typical_p = (float)(0.05 + 0.9 * next_unit());
            break;
        case 2:
            sp.min_p = (float)(0.2 * next_unit());
            sp.typical_p = (float)(0.2 + 0.75 * next_unit());
            sp.top_k = 1 + (int32_t)(next_u64() % 40);
            break;
        default:
            sp.min_p = (float)(0.3 * next_unit());
            sp.top_p = (float)(0.2 + 0.79 * next_unit());
            break;
        }
        for (uint64_t t = 0; t < 20; t++) {
            int32_t tok = -1, want;
            double margin;
            struct sampler_result res;
            assert_int_equal(sampler_sample(&sp, l, n, t, work, 3, &tok, &res), 0);
            ref_draw(&sp, l, n, sampler_uniform(sp.seed, t), &want, &margin);
            if (tok == want)
                agree++;
            else if (margin < 1e-4)
                close++;
            else
                fail_msg("round %d t %llu: sampler %d reference %d (n %d min_p %g typical_p %g "
                         "top_k %d top_p %g T %g)",
                         round, (unsigned long long)t, tok, want, n, (double)sp.min_p,
                         (double)sp.typical_p, sp.top_k, (double)sp.top_p, (double)sp.temperature);
            /* logprobs are still those of the whole distribution */
            assert_int_equal(res.token, tok);
            assert_true(res.top_logprobs[0] >= res.logprob - 1e-6f);
        }
    }
    assert_true(agree > 50 * close);
    free(work);
}

/* top-p (and top-p with a top-k beyond the selection limit) on random
 * logits with ties and bans, the cut landing anywhere: every drawn token
 * is in the reference's kept set (the rank prefix whose mass first
 * reaches top_p, at most top_k long), allowing the one token either side
 * of the cut where the prefix mass is within 1e-5 of top_p (exp is
 * approximated in the sampler); the kept set's tokens are each drawn
 * when it is small. */
static void test_top_p_kept_set_against_reference(void **state)
{
    (void)state;
    enum { NV = 4000, DRAWS = 300 };
    static float l[NV];
    static struct ref_tok t[NV];
    static int32_t rank_of[NV], seen[NV];
    void *work = malloc(sampler_work_size(NV));
    const int rounds = getenv("FOLIO_TEST_SHORT") ? 30 : 120;
    for (int round = 0; round < rounds; round++) {
        int32_t n = 2 + (int32_t)(next_u64() % (round % 2 ? NV - 2 : 300));
        double scale = 0.2 + 8 * next_unit();
        for (int32_t i = 0; i < n; i++)
            l[i] = (float)(scale * (next_unit() - 0.5) * 4);
        for (int32_t i = 0; i < n / 8; i++) /* ties and bans */
            l[next_u64() % (uint64_t)n] = i % 4 ? l[next_u64() % (uint64_t)n] : -INFINITY;
        struct sampler_params sp = {.temperature = (float)(0.2 + 1.6 * next_unit()),
                                    .top_p = (float)(0.05 + 0.94 * next_unit()),
                                    .seed = next_u64()};
        if (round % 3 == 0)
            sp.top_k = 257 + (int32_t)(next_u64() % 2000); /* past the selection */
        double mx = -INFINITY;
        for (int32_t i = 0; i < n; i++)
            mx = fmax(mx, l[i]);
        int32_t m = 0;
        double mass = 0;
        for (int32_t i = 0; i < n; i++) {
            double w = exp(((double)l[i] - mx) / sp.temperature);
            if (w > 0) {
                t[m++] = (struct ref_tok){i, l[i], w, 0};
                mass += w;
            }
        }
        qsort(t, (size_t)m, sizeof(*t), by_rank);
        int32_t lim = sp.top_k > 0 && sp.top_k < m ? sp.top_k : m, kept = 0;
        double acc = 0, near = INFINITY;
        while (kept < lim) {
            acc += t[kept++].p;
            near = fmin(near, fabs(acc - sp.top_p * mass) / mass);
            if (acc >= sp.top_p * mass)
                break;
        }
        for (int32_t k = 0; k < m; k++)
            rank_of[t[k].id] = k;
        memset(seen, 0, sizeof(seen));
        for (uint64_t d = 0; d < DRAWS; d++) {
            int32_t tok = -1;
            assert_int_equal(sampler_sample(&sp, l, n, d, work, 0, &tok, NULL), 0);
            assert_true(tok >= 0 && tok < n && l[tok] != -INFINITY);
            const int32_t rk = rank_of[tok];
            if (rk >= kept && !(near < 1e-5 && rk == kept))
                fail_msg("round %d draw %llu: token %d of rank %d, the reference keeps %d (n %d "
                         "top_p %g top_k %d T %g)",
                         round, (unsigned long long)d, tok, rk, kept, n, (double)sp.top_p, sp.top_k,
                         (double)sp.temperature);
            seen[tok] = 1;
        }
        if (kept <= 3 && t[kept - 1].p / acc > 0.05) /* few, none rare: each drawn */
            for (int32_t k = 0; k < kept - (near < 1e-5); k++)
                assert_true(seen[t[k].id]);
    }
    free(work);
}

/* min_p = 1 keeps only the maxima; typical_p near 0 keeps the one token
 * closest to the entropy. */
static void test_filter_extremes(void **state)
{
    (void)state;
    float l[6] = {1, 4, 2, 4, -INFINITY, 0};
    void *work = malloc(sampler_work_size(6));
    struct sampler_params sp = {.temperature = 1, .min_p = 1};
    for (uint64_t t = 0; t < 50; t++) {
        int32_t tok;
        assert_int_equal(sampler_sample(&sp, l, 6, t, work, 0, &tok, NULL), 0);
        assert_true(tok == 1 || tok == 3);
    }
    sp = (struct sampler_params){.temperature = 1, .typical_p = 1e-6f};
    int32_t first = -1;
    for (uint64_t t = 0; t < 50; t++) {
        int32_t tok, want;
        double margin;
        assert_int_equal(sampler_sample(&sp, l, 6, t, work, 0, &tok, NULL), 0);
        ref_draw(&sp, l, 6, sampler_uniform(sp.seed, t), &want, &margin);
        assert_int_equal(tok, want);
        if (first < 0)
            first = tok;
        assert_int_equal(tok, first); /* one token survives */
    }
    free(work);
}

/* ---- penalties -------------------------------------------------------- */

/* The definition, token by token over the whole vocabulary. */
static void ref_penalize(const struct sampler_penalties *pen, const int32_t *prompt, int32_t np,
                         const int32_t *gen, int32_t ng, float *l, int32_t n)
{
    int32_t len = np + ng;
    int32_t from =
        pen->repeat_last_n < 0 || pen->repeat_last_n >= len ? 0 : len - pen->repeat_last_n;
    for (int32_t v = 0; v < n; v++) {
        bool in_window = false;
        if (pen->repeat_last_n != 0)
            for (int32_t i = from; i < len; i++)
                in_window |= (i < np ? prompt[i] : gen[i - np]) == v;
        if (in_window && pen->repetition > 0)
            l[v] = l[v] > 0 ? l[v] / pen->repetition : l[v] * pen->repetition;
        int32_t count = 0;
        for (int32_t i = 0; i < ng; i++)
            count += gen[i] == v;
        if (count)
            l[v] -= pen->presence + pen->frequency * (float)count;
    }
}

static void test_penalties_against_reference(void **state)
{
    (void)state;
    enum { NV = 200, H = 300 };
    float a[NV], b[NV];
    int32_t prompt[H], gen[H];
    int32_t *counts = malloc(NV * sizeof(int32_t));
    for (int round = 0; round < 500; round++) {
        int32_t np = (int32_t)(next_u64() % H), ng = (int32_t)(next_u64() % H);
        int32_t range = 5 + (int32_t)(next_u64() % (NV - 5)); /* repeats when small */
        for (int32_t i = 0; i < np; i++)
            prompt[i] = (int32_t)(next_u64() % (uint64_t)range);
        for (int32_t i = 0; i < ng; i++)
            gen[i] = (int32_t)(next_u64() % (uint64_t)range);
        for (int32_t v = 0; v < NV; v++)
            a[v] = b[v] = (float)(8 * (next_unit() - 0.5));
        for (int32_t v = 0; v < NV; v++) /* garbage: the workspace is not trusted */
            counts[v] = (int32_t)next_u64();
        static const int32_t lastn[] = {-1, 0, 1, 64, 1000};
        struct sampler_penalties pen = {
            .repetition = round % 5 == 0 ? 1 : (float)(0.5 + 1.5 * next_unit()),
            .presence = round % 3 == 0 ? 0 : (float)(4 * (next_unit() - 0.5)),
            .frequency = round % 4 == 0 ? 0 : (float)(4 * (next_unit() - 0.5)),
            .repeat_last_n = lastn[round % 5],
        };
        struct sampler_history h = {prompt, np, gen, ng};
        assert_int_equal(sampler_penalize(&pen, &h, a, NV, counts), 0);
        ref_penalize(&pen, prompt, np, gen, ng, b, NV);
        for (int32_t v = 0; v < NV; v++)
            if (a[v] != b[v])
                fail_msg("round %d token %d: %g vs reference %g", round, v, (double)a[v],
                         (double)b[v]);
    }
    /* neutral values are a no-op; a bad id is refused and changes nothing */
    struct sampler_penalties none = {.repetition = 1, .repeat_last_n = 64};
    assert_false(sampler_penalties_active(&none));
    int32_t bad[2] = {3, NV};
    struct sampler_history hb = {bad, 2, NULL, 0};
    struct sampler_penalties rep = {.repetition = 2, .repeat_last_n = -1};
    assert_true(sampler_penalties_active(&rep));
    for (int32_t v = 0; v < NV; v++)
        a[v] = 1;
    assert_int_equal(sampler_penalize(&rep, &hb, a, NV, counts), -EINVAL);
    assert_true(a[3] == 1);
    free(counts);
}

/* A strong frequency penalty makes greedy decoding avoid repeats: the
 * generated sequence under greedy + penalty never repeats a token while
 * the logits are flat enough for the penalty to matter. */
static void test_penalty_changes_greedy(void **state)
{
    (void)state;
    enum { NV = 50 };
    float base[NV], l[NV];
    for (int32_t v = 0; v < NV; v++)
        base[v] = (float)(v % 7) * 0.1f;
    int32_t gen[20], *counts = malloc(NV * sizeof(int32_t));
    void *work = malloc(sampler_work_size(NV));
    struct sampler_params sp = {.temperature = 0};
    struct sampler_penalties pen = {.repetition = 1, .frequency = 2, .repeat_last_n = 64};
    for (int32_t i = 0; i < 20; i++) {
        memcpy(l, base, sizeof(l));
        struct sampler_history h = {NULL, 0, gen, i};
        assert_int_equal(sampler_penalize(&pen, &h, l, NV, counts), 0);
        assert_int_equal(sampler_sample(&sp, l, NV, (uint64_t)i, work, 0, &gen[i], NULL), 0);
        for (int32_t k = 0; k < i; k++)
            assert_int_not_equal(gen[k], gen[i]);
    }
    free(work);
    free(counts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_min_p_typical_against_reference),
        cmocka_unit_test(test_top_p_kept_set_against_reference),
        cmocka_unit_test(test_filter_extremes),
        cmocka_unit_test(test_penalties_against_reference),
        cmocka_unit_test(test_penalty_changes_greedy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
