/*
 * tests/test_sampler.c — the sampler: greedy and its tie rule (also
 * against a plain scan, with NaN and -inf), the weights of a draw against
 * the scalar exp bit for bit (the sampler computes them in vectors), the
 * support of top-k and top-p, the temperature distribution (chi-square
 * over counts from a fixed seed), independence of the random stream from
 * anything but (seed, t), logit bias and bans, the reported
 * log-probabilities, and scoring a given token (sampler_score) against a
 * plain reference.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../model/fastmath.h"
#include "folio/sampler.h"

#define NV 32000

static float g_logits[NV];
static void *g_work;

static int32_t draw(const struct sampler_params *p, const float *l, int32_t n, uint64_t t)
{
    int32_t tok = -1;
    assert_int_equal(sampler_sample(p, l, n, t, g_work, 0, &tok, NULL), 0);
    assert_true(tok >= 0 && tok < n);
    return tok;
}

/* log_softmax of l at index i, in double */
static double log_softmax(const float *l, int32_t n, int32_t i)
{
    double mx = -INFINITY, s = 0;
    for (int32_t k = 0; k < n; k++)
        mx = fmax(mx, l[k]);
    for (int32_t k = 0; k < n; k++)
        s += exp(l[k] - mx);
    return l[i] - mx - log(s);
}

static void test_greedy(void **state)
{
    (void)state;
    struct sampler_params p = {.temperature = 0};
    assert_int_equal(draw(&p, g_logits, NV, 0), 12345);
    /* ties go to the lowest id */
    float l[8] = {0, 3, 1, 3, 2, 3, -1, 0};
    assert_int_equal(draw(&p, l, 8, 0), 1);
    assert_int_equal(draw(&p, l, 8, 99), 1);
    /* top-N: descending, ties by id, with correct log-probabilities */
    struct sampler_result r;
    int32_t tok;
    assert_int_equal(sampler_sample(&p, l, 8, 0, g_work, 5, &tok, &r), 0);
    assert_int_equal(r.token, 1);
    assert_int_equal(r.n_top, 5);
    const int32_t want[5] = {1, 3, 5, 4, 2};
    for (int k = 0; k < 5; k++) {
        assert_int_equal(r.top_ids[k], want[k]);
        assert_true(fabs(r.top_logprobs[k] - log_softmax(l, 8, want[k])) < 1e-5);
    }
    assert_true(fabs(r.logprob - log_softmax(l, 8, 1)) < 1e-5);
    /* n_top larger than the candidates */
    assert_int_equal(sampler_sample(&p, l, 3, 0, g_work, 20, &tok, &r), 0);
    assert_int_equal(r.n_top, 3);
}

/* Greedy against a plain scan, on logits with many ties, NaN and -inf:
 * the token is the lowest id of the largest logit, NaN counting as -inf,
 * over every length from 1 to 80 (the vector body and its tail) and a
 * full vocabulary; all -inf or NaN is -EINVAL. */
static void test_greedy_plain(void **state)
{
    (void)state;
    struct sampler_params p = {.temperature = 0};
    uint64_t st = 77;
    float *l = malloc(sizeof(float) * NV);
    assert_non_null(l);
    for (int it = 0; it < 600; it++) {
        const int32_t n = it < 480 ? it / 6 + 1 : NV;
        for (int32_t i = 0; i < n; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            const uint32_t r = (uint32_t)(st >> 33);
            /* a few values, so the maximum repeats; NaN and -inf often */
            l[i] = r % 7 == 0 ? NAN : r % 7 == 1 ? -INFINITY : (float)(r % 5) - (it % 3 ? 0 : 9);
        }
        if (it % 50 == 7) /* nothing usable */
            for (int32_t i = 0; i < n; i++)
                l[i] = i % 2 ? NAN : -INFINITY;
        int32_t want = -1;
        for (int32_t i = 0; i < n; i++)
            if (l[i] == l[i] && l[i] > -INFINITY && (want < 0 || l[i] > l[want]))
                want = i;
        int32_t tok = -1;
        const int rc = sampler_sample(&p, l, n, 0, g_work, 0, &tok, NULL);
        if (want < 0) {
            assert_int_equal(rc, -EINVAL);
            continue;
        }
        assert_int_equal(rc, 0);
        assert_int_equal(tok, want);
    }
    free(l);
}

/* A temperature draw's weights, read from the workspace (model/sampler.c:
 * l, the cleaned logits, then w), equal model__exp_approx((l - max) / T)
 * bit for bit, 0 for -inf: the 8-lane exp of the weights pass against the
 * scalar one its tail uses. */
static void test_weights_exact(void **state)
{
    (void)state;
    uint64_t st = 91;
    float *src = malloc(sizeof(float) * NV);
    assert_non_null(src);
    const int32_t lens[] = {NV, 37, 16, 15, 1000};
    const float temps[] = {0.8f, 1.3f, 1.0f, 0.05f, 7.0f};
    for (int c = 0; c < 5; c++) {
        const int32_t n = lens[c];
        for (int32_t i = 0; i < n; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            const double u = (double)(st >> 11) * 0x1.0p-53;
            src[i] = i % 13 == 5 ? -INFINITY : (float)(u * 40.0 - 30.0);
        }
        struct sampler_params p = {.temperature = temps[c]};
        int32_t tok;
        assert_int_equal(sampler_sample(&p, src, n, 3, g_work, 0, &tok, NULL), 0);
        const float *l = g_work, *w = l + n;
        float mx = -INFINITY;
        for (int32_t i = 0; i < n; i++)
            mx = l[i] > mx ? l[i] : mx;
        const float inv_t = 1.0f / temps[c];
        for (int32_t i = 0; i < n; i++) {
            const float want = l[i] == -INFINITY ? 0.0f : model__exp_approx((l[i] - mx) * inv_t);
            assert_memory_equal(&w[i], &want, sizeof want);
        }
    }
    free(src);
}

/* With top_k = 5 every draw is one of the 5 best logits, and each appears. */
static void test_top_k_support(void **state)
{
    (void)state;
    struct sampler_params p = {.temperature = 1.5f, .top_k = 5, .seed = 7};
    int32_t best[5];
    /* the 5 best of g_logits, by brute force */
    for (int k = 0; k < 5; k++) {
        int32_t b = -1;
        for (int32_t i = 0; i < NV; i++) {
            int used = 0;
            for (int j = 0; j < k; j++)
                used |= best[j] == i;
            if (!used && (b < 0 || g_logits[i] > g_logits[b]))
                b = i;
        }
        best[k] = b;
    }
    int seen[5] = {0};
    for (uint64_t t = 0; t < 2000; t++) {
        int32_t tok = draw(&p, g_logits, NV, t);
        int k = 0;
        while (k < 5 && best[k] != tok)
            k++;
        assert_true(k < 5);
        seen[k]++;
    }
    for (int k = 0; k < 5; k++)
        assert_true(seen[k] > 0);
    /* top_k = 1 is greedy */
    p.top_k = 1;
    assert_int_equal(draw(&p, g_logits, NV, 3), 12345);
}

/* probabilities 0.5, 0.25, 0.15, 0.1: top_p 0.6 keeps {0,1}, 0.8 keeps
 * {0,1,2}, 0.4 keeps {0}. */
static void test_top_p_support(void **state)
{
    (void)state;
    float l[6] = {logf(0.25f), logf(0.1f), logf(0.5f), -INFINITY, logf(0.15f), -INFINITY};
    const struct {
        float top_p;
        int n_kept;
    } cases[] = {{0.4f, 1}, {0.6f, 2}, {0.8f, 3}, {0.99f, 4}, {1.0f, 4}};
    const int32_t order[4] = {2, 0, 4, 1};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct sampler_params p = {.temperature = 1, .top_p = cases[c].top_p, .seed = 11};
        int seen[6] = {0};
        for (uint64_t t = 0; t < 3000; t++)
            seen[draw(&p, l, 6, t)]++;
        for (int k = 0; k < 4; k++) {
            if (k < cases[c].n_kept)
                assert_true(seen[order[k]] > 0);
            else
                assert_int_equal(seen[order[k]], 0);
        }
        assert_int_equal(seen[3] + seen[5], 0);
    }
}

/* Counts over 40000 draws match softmax(l / T): chi-square with 7 degrees
 * of freedom under 24.3 (the 0.1% tail); a wrong temperature fails. */
static void test_temperature_distribution(void **state)
{
    (void)state;
    const float l[8] = {1.0f, 0.5f, 0.0f, -0.3f, 0.8f, -1.0f, 0.2f, 0.4f};
    const float temps[] = {0.6f, 1.0f, 2.0f};
    for (size_t c = 0; c < 3; c++) {
        const double T = temps[c];
        struct sampler_params p = {.temperature = temps[c], .seed = 1000 + c};
        const int N = 40000;
        int cnt[8] = {0};
        for (int t = 0; t < N; t++)
            cnt[draw(&p, l, 8, (uint64_t)t)]++;
        double z = 0, e[8], chi = 0, chi_wrong = 0, zw = 0, ew[8];
        for (int i = 0; i < 8; i++)
            z += (e[i] = exp(l[i] / T)), zw += (ew[i] = exp(l[i] / (T * 1.25)));
        for (int i = 0; i < 8; i++) {
            double ex = N * e[i] / z, exw = N * ew[i] / zw;
            chi += (cnt[i] - ex) * (cnt[i] - ex) / ex;
            chi_wrong += (cnt[i] - exw) * (cnt[i] - exw) / exw;
        }
        printf("# T=%.1f chi2 %.2f (vs T*1.25: %.1f)\n", T, chi, chi_wrong);
        assert_true(chi < 24.3);
        assert_true(chi_wrong > 24.3); /* the check can tell temperatures apart */
    }
}

/* The ranked path (top-k cut) draws from the renormalised top k: counts
 * over 40000 draws, chi-square with 4 degrees of freedom under 18.5. */
static void test_top_k_distribution(void **state)
{
    (void)state;
    const float l[8] = {1.0f, 0.5f, 0.0f, -0.3f, 0.8f, -1.0f, 0.2f, 0.4f};
    const int top5[5] = {0, 4, 1, 7, 6};
    struct sampler_params p = {.temperature = 0.8f, .top_k = 5, .seed = 99};
    const int N = 40000;
    int cnt[8] = {0};
    for (int t = 0; t < N; t++)
        cnt[draw(&p, l, 8, (uint64_t)t)]++;
    double z = 0, chi = 0;
    for (int k = 0; k < 5; k++)
        z += exp(l[top5[k]] / 0.8);
    for (int k = 0; k < 5; k++) {
        double ex = N * exp(l[top5[k]] / 0.8) / z;
        chi += (cnt[top5[k]] - ex) * (cnt[top5[k]] - ex) / ex;
    }
    printf("# top-k 5 of 8, T=0.8: chi2 %.2f\n", chi);
    assert_true(chi < 18.5);
    assert_int_equal(cnt[2] + cnt[3] + cnt[5], 0);
}

/* The bucketed path: a top-p cut draws from the renormalised nucleus
 * (chi-square, 2 degrees of freedom, under 13.8), and a large top-k
 * (beyond the selection limit) keeps exactly the k best, each drawn. */
static void test_top_p_and_large_k_distribution(void **state)
{
    (void)state;
    float l[6] = {logf(0.25f), logf(0.1f), logf(0.5f), -INFINITY, logf(0.15f), -INFINITY};
    struct sampler_params p = {.temperature = 1, .top_p = 0.8f, .seed = 4};
    const int N = 30000;
    int cnt[6] = {0};
    for (int t = 0; t < N; t++)
        cnt[draw(&p, l, 6, (uint64_t)t)]++;
    const int ids[3] = {2, 0, 4};
    const double pr[3] = {0.5 / 0.9, 0.25 / 0.9, 0.15 / 0.9};
    double chi = 0;
    for (int k = 0; k < 3; k++)
        chi += (cnt[ids[k]] - N * pr[k]) * (cnt[ids[k]] - N * pr[k]) / (N * pr[k]);
    printf("# top-p 0.8: chi2 %.2f\n", chi);
    assert_true(chi < 13.8);
    assert_int_equal(cnt[1] + cnt[3] + cnt[5], 0);

    /* 600 nearly flat logits, top_k 300 (and a top-p that does not bind) */
    enum { NL = 600, K = 300 };
    float f[NL];
    for (int i = 0; i < NL; i++)
        f[i] = 0.001f * (float)((i * 7919) % NL); /* distinct; rank = value order */
    struct sampler_params pk = {.temperature = 1, .top_k = K, .top_p = 0.99f, .seed = 8};
    int seen[NL] = {0};
    for (int t = 0; t < 60000; t++)
        seen[draw(&pk, f, NL, (uint64_t)t)]++;
    for (int i = 0; i < NL; i++) {
        int in_top = f[i] >= 0.001f * (NL - K) - 1e-6f;
        if (in_top)
            assert_true(seen[i] > 0);
        else
            assert_int_equal(seen[i], 0);
    }
}

/* Token t of a request depends only on (seed, t, logits): drawing several
 * requests interleaved in any order, or alone, gives the same streams. */
static void test_stream_independence(void **state)
{
    (void)state;
    struct sampler_params p[3] = {
        {.temperature = 1.0f, .seed = 1},
        {.temperature = 0.8f, .top_p = 0.9f, .seed = 2},
        {.temperature = 1.0f, .top_k = 40, .seed = 1},
    };
    int32_t alone[3][64], mixed[3][64];
    for (int r = 0; r < 3; r++)
        for (int t = 0; t < 64; t++)
            alone[r][t] = draw(&p[r], g_logits, NV, (uint64_t)t);
    /* interleaved, reverse request order, t running backwards */
    for (int t = 63; t >= 0; t--)
        for (int r = 2; r >= 0; r--)
            mixed[r][t] = draw(&p[r], g_logits, NV, (uint64_t)t);
    assert_memory_equal(alone, mixed, sizeof(alone));
    /* different seeds give different streams; same seed, same stream */
    int differ = 0;
    for (int t = 0; t < 64; t++)
        differ += alone[0][t] != draw(&(struct sampler_params){.temperature = 1.0f, .seed = 3},
                                      g_logits, NV, (uint64_t)t);
    assert_true(differ > 32);
    assert_true(sampler_uniform(5, 9) == sampler_uniform(5, 9));
    assert_true(sampler_uniform(5, 9) != sampler_uniform(5, 10));
}

static void test_bias_and_ban(void **state)
{
    (void)state;
    int32_t ban[2] = {12345, 7};
    struct sampler_params p = {.temperature = 0, .n_banned = 1, .banned = ban};
    int32_t second = -1;
    for (int32_t i = 0; i < NV; i++)
        if (i != 12345 && (second < 0 || g_logits[i] > g_logits[second]))
            second = i;
    assert_int_equal(draw(&p, g_logits, NV, 0), second);
    struct sampler_bias bias[2] = {{.token = 99, .bias = 100}, {.token = 12345, .bias = -1}};
    struct sampler_params pb = {.temperature = 0, .n_bias = 1, .bias = bias};
    assert_int_equal(draw(&pb, g_logits, NV, 0), 99);
    /* the reported logprob is of the biased logits */
    struct sampler_result r;
    int32_t tok;
    assert_int_equal(sampler_sample(&pb, g_logits, NV, 0, g_work, 1, &tok, &r), 0);
    assert_true(r.logprob > -1e-3 && r.logprob <= 0);
    assert_int_equal(r.top_ids[0], 99);
    /* sampling never returns a banned token even if it dominates */
    float l[4] = {10, 0, 0, 0};
    int32_t ban0 = 0;
    struct sampler_params ps = {.temperature = 1, .n_banned = 1, .banned = &ban0, .seed = 5};
    for (uint64_t t = 0; t < 500; t++)
        assert_int_not_equal(draw(&ps, l, 4, t), 0);
    /* bad parameters */
    int32_t all[4] = {0, 1, 2, 3};
    ps.n_banned = 4, ps.banned = all;
    assert_int_equal(sampler_sample(&ps, l, 4, 0, g_work, 0, &tok, NULL), -EINVAL);
    struct sampler_bias oob = {.token = 4, .bias = 1};
    struct sampler_params po = {.temperature = 1, .n_bias = 1, .bias = &oob};
    assert_int_equal(sampler_sample(&po, l, 4, 0, g_work, 0, &tok, NULL), -EINVAL);
    struct sampler_params pneg = {.temperature = -1};
    assert_int_equal(sampler_sample(&pneg, l, 4, 0, g_work, 0, &tok, NULL), -EINVAL);
    /* the input logits are left untouched */
    assert_true(l[0] == 10);
}

/* Sampled tokens carry the log_softmax of their (unscaled) logit. */
static void test_sampled_logprob(void **state)
{
    (void)state;
    struct sampler_params p = {.temperature = 0.9f, .top_p = 0.95f, .seed = 77};
    for (uint64_t t = 0; t < 20; t++) {
        struct sampler_result r;
        int32_t tok;
        assert_int_equal(sampler_sample(&p, g_logits, NV, t, g_work, 3, &tok, &r), 0);
        assert_int_equal(r.token, tok);
        assert_true(fabs(r.logprob - log_softmax(g_logits, NV, tok)) < 1e-4);
        assert_true(r.top_logprobs[0] >= r.top_logprobs[1]);
        assert_true(r.top_logprobs[1] >= r.top_logprobs[2]);
        assert_true(r.logprob <= r.top_logprobs[0]);
    }
}

/* sampler_score against a plain scan: log_softmax in double over the
 * finite logits, rank, and the top-n by (logit desc, id asc); random rows
 * with ties, NaN and -inf, tokens that are any of them. */
static void test_score(void **state)
{
    (void)state;
    static float l[3000];
    static int32_t ids[3000];
    uint64_t s = 11;
    for (int it = 0; it < 300; it++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int32_t n = 1 + (int32_t)((s >> 33) % 3000);
        for (int32_t i = 0; i < n; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t u = (uint32_t)(s >> 32);
            l[i] = u % 50 == 0   ? -INFINITY
                   : u % 53 == 0 ? NAN
                                 : (float)((int)(u % 64) - 32) * 0.25f; /* many ties */
        }
        l[(s >> 20) % (uint64_t)n] = 1.0f; /* at least one finite */
        int32_t tok = (int32_t)((s >> 7) % (uint64_t)n);
        int32_t n_top = (int32_t)((s >> 40) % (SAMPLER_MAX_TOP + 1));
        struct sampler_result r;
        assert_int_equal(sampler_score(l, n, tok, g_work, n_top, &r), 0);
        /* reference */
        double mx = -INFINITY, z = 0;
        int32_t fin = 0;
        for (int32_t i = 0; i < n; i++)
            if (l[i] == l[i] && l[i] > -INFINITY) {
                mx = fmax(mx, l[i]);
                ids[fin++] = i;
            }
        for (int32_t k = 0; k < fin; k++)
            z += exp(l[ids[k]] - mx);
        const double lse = mx + log(z);
        const float lt = l[tok] == l[tok] ? l[tok] : -INFINITY;
        int32_t rank = 1;
        for (int32_t k = 0; k < fin; k++)
            rank += l[ids[k]] > lt;
        assert_int_equal(r.token, tok);
        assert_int_equal(r.rank, rank);
        if (lt == -INFINITY)
            assert_true(r.logprob == -INFINITY);
        else
            assert_true(fabs(r.logprob - (lt - lse)) < 1e-5);
        /* top n_top: a selection sort of the finite ids */
        int32_t want = n_top < fin ? n_top : fin;
        assert_int_equal(r.n_top, want);
        for (int32_t k = 0; k < want; k++) {
            int32_t b = k;
            for (int32_t j = k + 1; j < fin; j++)
                if (l[ids[j]] > l[ids[b]] || (l[ids[j]] == l[ids[b]] && ids[j] < ids[b]))
                    b = j;
            int32_t t = ids[k];
            ids[k] = ids[b];
            ids[b] = t;
            assert_int_equal(r.top_ids[k], ids[k]);
            assert_true(fabs(r.top_logprobs[k] - (l[ids[k]] - lse)) < 1e-5);
        }
    }
    struct sampler_result r;
    assert_int_equal(sampler_score(l, 10, 10, g_work, 1, &r), -EINVAL);
    assert_int_equal(sampler_score(l, 10, 0, g_work, SAMPLER_MAX_TOP + 1, &r), -EINVAL);
    for (int32_t i = 0; i < 4; i++)
        l[i] = -INFINITY;
    assert_int_equal(sampler_score(l, 4, 0, g_work, 1, &r), -EINVAL); /* nothing finite */
}

static int setup(void **state)
{
    (void)state;
    g_work = malloc(sampler_work_size(NV));
    uint64_t s = 3;
    for (int32_t i = 0; i < NV; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        g_logits[i] = (float)((double)(s >> 11) * 0x1.0p-53 * 8.0 - 4.0);
    }
    g_logits[12345] = 6.0f; /* a clear argmax */
    g_logits[777] = 5.5f;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(g_work);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_greedy_plain),
        cmocka_unit_test(test_weights_exact),
        cmocka_unit_test(test_top_k_support),
        cmocka_unit_test(test_top_p_support),
        cmocka_unit_test(test_temperature_distribution),
        cmocka_unit_test(test_top_k_distribution),
        cmocka_unit_test(test_top_p_and_large_k_distribution),
        cmocka_unit_test(test_stream_independence),
        cmocka_unit_test(test_bias_and_ban),
        cmocka_unit_test(test_sampled_logprob),
        cmocka_unit_test(test_score),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
