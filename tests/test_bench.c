/*
 * tests/test_bench.c — the parts of `folio bench` that can be wrong
 * without a server (tools/bench_core.h): SSE framing under every split of
 * the input, the streaming-chunk scanner, percentiles against a naive
 * reference and numpy's values, gamma / Poisson arrival statistics for a
 * fixed seed, Prometheus text parsing, trace parsing, and the SVG writer's
 * structure (its XML well-formedness is checked with python3 in the
 * integration test).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "bench_cluster.h"
#include "bench_core.h"
#include "sim_trace.h"
#include "folio/common.h"
#include "http_client.h"

static bool short_run(void)
{
    const char *s = getenv("FOLIO_TEST_SHORT");
    return s && *s && strcmp(s, "0");
}

/* ---- SSE ---------------------------------------------------------------- */

struct events {
    char got[16][128];
    int n;
};

static void on_event(void *user, const char *data, size_t len)
{
    struct events *e = user;
    assert_true(e->n < 16);
    assert_true(len < 128);
    assert_int_equal(data[len], 0);
    memcpy(e->got[e->n], data, len);
    e->got[e->n][len] = 0;
    e->n++;
}

static const char sse_stream[] = ": keep-alive comment\r\n"
                                 "data: {\"a\":1}\n\n"
                                 "event: message\n"
                                 "data:{\"b\":2}\r\n\r\n"
                                 "data: line1\r\n"
                                 "data: line2\r"
                                 "\r"
                                 "id: 7\n"
                                 "data\n"
                                 "\n"
                                 "\n\n"
                                 "data:  two spaces\n\n"
                                 "data: [DONE]\n\n";
static const char *const sse_want[] = {"{\"a\":1}", "{\"b\":2}",   "line1\nline2",
                                       "",          " two spaces", "[DONE]"};

static void check_events(const struct events *e)
{
    assert_int_equal(e->n, (int)FOLIO_ARRAY_LEN(sse_want));
    for (int i = 0; i < e->n; i++)
        assert_string_equal(e->got[i], sse_want[i]);
}

/* The same events come out whatever the split: two parts at every byte
 * position, three parts at every pair, and one byte at a time. */
static void test_sse_split_everywhere(void **state)
{
    (void)state;
    size_t n = sizeof(sse_stream) - 1;
    for (size_t cut = 0; cut <= n; cut++) {
        struct bench_sse s;
        struct events e = {0};
        bench_sse_init(&s);
        assert_int_equal(bench_sse_feed(&s, sse_stream, cut, on_event, &e), 0);
        assert_int_equal(bench_sse_feed(&s, sse_stream + cut, n - cut, on_event, &e), 0);
        assert_int_equal(bench_sse_finish(&s, on_event, &e), 0);
        check_events(&e);
        bench_sse_free(&s);
    }
    for (size_t a = 0; a <= n; a += short_run() ? 7 : 1)
        for (size_t b = a; b <= n; b++) {
            struct bench_sse s;
            struct events e = {0};
            bench_sse_init(&s);
            bench_sse_feed(&s, sse_stream, a, on_event, &e);
            bench_sse_feed(&s, sse_stream + a, b - a, on_event, &e);
            bench_sse_feed(&s, sse_stream + b, n - b, on_event, &e);
            bench_sse_finish(&s, on_event, &e);
            check_events(&e);
            bench_sse_free(&s);
        }
    struct bench_sse s;
    struct events e = {0};
    bench_sse_init(&s);
    for (size_t i = 0; i < n; i++)
        bench_sse_feed(&s, sse_stream + i, 1, on_event, &e);
    check_events(&e);
    bench_sse_free(&s);
}

/* A final event without its blank line is dispatched by finish(), and
 * only then. */
static void test_sse_unterminated(void **state)
{
    (void)state;
    struct bench_sse s;
    struct events e = {0};
    bench_sse_init(&s);
    const char *in = "data: x\n\ndata: tail";
    bench_sse_feed(&s, in, strlen(in), on_event, &e);
    assert_int_equal(e.n, 1);
    bench_sse_finish(&s, on_event, &e);
    assert_int_equal(e.n, 2);
    assert_string_equal(e.got[1], "tail");
    bench_sse_free(&s);
}

/* A large event grows the buffers; later events reuse them. */
struct big_count {
    int n;
    size_t len;
    bool all_x;
};

static void on_big(void *user, const char *data, size_t len)
{
    struct big_count *c = user;
    c->n++;
    c->len = len;
    c->all_x = true;
    for (size_t i = 0; i < len; i++)
        c->all_x &= data[i] == 'x';
}

static void test_sse_large_event(void **state)
{
    (void)state;
    const size_t big = 100000, total = big + 8;
    char *in = malloc(total);
    memcpy(in, "data: ", 6);
    memset(in + 6, 'x', big);
    memcpy(in + 6 + big, "\n\n", 2);
    struct bench_sse s;
    bench_sse_init(&s);
    for (size_t step = 1; step <= total; step = step * 3 + 1) {
        struct big_count c = {0};
        for (size_t off = 0; off < total; off += step)
            assert_int_equal(bench_sse_feed(&s, in + off, FOLIO_MIN(step, total - off), on_big, &c),
                             0);
        assert_int_equal(c.n, 1);
        assert_int_equal(c.len, big);
        assert_true(c.all_x);
    }
    bench_sse_free(&s);
    free(in);
}

/* ---- chunk scanner ------------------------------------------------------- */

static void scan_ok(const char *json, struct bench_chunk *c)
{
    assert_int_equal(bench_chunk_scan(json, strlen(json), c), 0);
}

static void test_chunk_scan(void **state)
{
    (void)state;
    struct bench_chunk c;
    /* foliod's completion chunk: token_ids counted */
    scan_ok("{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\","
            "\"choices\":[{\"index\":0,\"text\":\"ab\",\"logprobs\":null,\"finish_reason\":null,"
            "\"token_ids\":[5,6,7]}]}",
            &c);
    assert_int_equal(c.n_tokens, 3);
    assert_true(c.has_token_ids && c.has_text && !c.finished && !c.has_usage && !c.has_error);
    /* text held back (stop-string window) but tokens came: still tokens */
    scan_ok("{\"choices\":[{\"text\":\"\",\"token_ids\":[9]}]}", &c);
    assert_int_equal(c.n_tokens, 1);
    assert_false(c.has_text);
    /* empty token_ids and finish reason */
    scan_ok("{\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\",\"token_ids\":[]}]}", &c);
    assert_int_equal(c.n_tokens, 0);
    assert_true(c.finished);
    assert_false(c.finish_error);
    scan_ok("{\"choices\":[{\"text\":\"\",\"finish_reason\":\"error\",\"token_ids\":[]}]}", &c);
    assert_true(c.finished && c.finish_error);
    scan_ok("{\"choices\":[{\"text\":\"error\",\"finish_reason\":null}]}", &c);
    assert_false(c.finished || c.finish_error);
    /* no token_ids: one token per chunk with text */
    scan_ok("{\"choices\":[{\"index\":0,\"text\":\" hello\",\"finish_reason\":null}]}", &c);
    assert_int_equal(c.n_tokens, 1);
    assert_false(c.finished);
    /* chat: role-only delta is no token; content is */
    scan_ok("{\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}", &c);
    assert_int_equal(c.n_tokens, 0);
    scan_ok("{\"choices\":[{\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}", &c);
    assert_int_equal(c.n_tokens, 1);
    /* key names quoted inside text never match */
    scan_ok("{\"choices\":[{\"text\":\"\\\"usage\\\": {\\\"completion_tokens\\\": 99}, "
            "\\\"token_ids\\\":[1,2]\",\"token_ids\":[4]}]}",
            &c);
    assert_int_equal(c.n_tokens, 1);
    assert_false(c.has_usage);
    /* usage chunk */
    scan_ok("{\"id\":\"x\",\"choices\":[],\"usage\":{\"prompt_tokens\":128,"
            "\"completion_tokens\":64,\"total_tokens\":192}}",
            &c);
    assert_true(c.has_usage);
    assert_int_equal(c.usage_completion, 64);
    assert_int_equal(c.usage_prompt, 128);
    assert_int_equal(c.n_tokens, 0);
    /* usage: null is no usage; a nested completion_tokens elsewhere neither */
    scan_ok("{\"usage\":null,\"x\":{\"completion_tokens\":5}}", &c);
    assert_false(c.has_usage);
    /* vLLM-style continuous usage inside a token chunk */
    scan_ok("{\"choices\":[{\"text\":\"a\"}],\"usage\":{\"completion_tokens\":3,"
            "\"prompt_tokens\":2,\"details\":{\"completion_tokens\":77}}}",
            &c);
    assert_true(c.has_usage);
    assert_int_equal(c.usage_completion, 3);
    /* error event */
    scan_ok("{\"error\":{\"message\":\"boom\",\"code\":500}}", &c);
    assert_true(c.has_error);
    scan_ok("{\"choices\":[{\"text\":\"error\",\"x\":{\"error\":1}}]}", &c);
    assert_false(c.has_error);
    /* OpenAI Responses events: only output_text.delta is text; the final
     * response (its output repeats the text) carries usage */
    scan_ok("{\"type\":\"response.output_text.delta\",\"sequence_number\":4,\"item_id\":\"m\","
            "\"delta\":\" Hi\",\"logprobs\":[]}",
            &c);
    assert_int_equal(c.n_tokens, 1);
    scan_ok("{\"type\":\"response.output_text.done\",\"text\":\" Hi there\"}", &c);
    assert_int_equal(c.n_tokens, 0);
    scan_ok("{\"type\":\"response.created\",\"response\":{\"status\":\"in_progress\","
            "\"error\":null,\"text\":{\"format\":{\"type\":\"text\"}},\"usage\":null}}",
            &c);
    assert_false(c.has_usage || c.has_error || c.n_tokens);
    scan_ok("{\"type\":\"response.completed\",\"response\":{\"output\":[{\"content\":[{"
            "\"type\":\"output_text\",\"text\":\" Hi there\"}]}],\"usage\":{\"input_tokens\":7,"
            "\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":2,"
            "\"total_tokens\":9}}}",
            &c);
    assert_int_equal(c.n_tokens, 0);
    assert_true(c.has_usage);
    assert_int_equal(c.usage_completion, 2);
    assert_int_equal(c.usage_prompt, 7);
    scan_ok("{\"type\":\"response.failed\",\"response\":{}}", &c);
    assert_true(c.has_error);
    /* Anthropic Messages events: content_block_delta text; usage in
     * message_start (input) and message_delta (output only) */
    scan_ok("{\"type\":\"message_start\",\"message\":{\"content\":[],\"usage\":{"
            "\"input_tokens\":7,\"output_tokens\":0}}}",
            &c);
    assert_true(c.has_usage && !c.n_tokens);
    assert_int_equal(c.usage_prompt, 7);
    scan_ok("{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
            "\"text_delta\",\"text\":\" Hi\"}}",
            &c);
    assert_int_equal(c.n_tokens, 1);
    scan_ok("{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
            "\"text\",\"text\":\"x\"}}",
            &c);
    assert_int_equal(c.n_tokens, 0);
    scan_ok("{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},"
            "\"usage\":{\"output_tokens\":16}}",
            &c);
    assert_true(c.has_usage);
    assert_int_equal(c.usage_completion, 16);
    assert_int_equal(c.usage_prompt, -1);
    scan_ok("{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}", &c);
    assert_true(c.has_error);
    /* [DONE] */
    scan_ok("[DONE]", &c);
    assert_true(c.done);
    /* not JSON objects */
    struct bench_chunk d;
    assert_int_equal(bench_chunk_scan("hello", 5, &d), -EINVAL);
    assert_int_equal(bench_chunk_scan("{\"a\":\"unterminated", 18, &d), -EINVAL);
    assert_int_equal(bench_chunk_scan("{\"a\":[1,2}", 9, &d), -EINVAL);
    assert_int_equal(bench_chunk_scan("", 0, &d), -EINVAL);
}

/* ---- percentiles ----------------------------------------------------------- */

/* Naive reference: insertion sort, then the definition written out. */
static double naive_pct(const double *v, size_t n, double p)
{
    double *s = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        size_t j = i;
        while (j > 0 && s[j - 1] > v[i]) {
            s[j] = s[j - 1];
            j--;
        }
        s[j] = v[i];
    }
    double pos = (double)(n - 1) * p / 100.0;
    size_t k = 0;
    while ((double)(k + 1) <= pos && k + 1 < n)
        k++;
    double r = k + 1 < n ? s[k] + (pos - (double)k) * (s[k + 1] - s[k]) : s[k];
    free(s);
    return r;
}

static void test_percentiles_vs_naive(void **state)
{
    (void)state;
    struct bench_rng r;
    bench_rng_seed(&r, 7);
    const double ps[] = {0, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 100};
    for (int trial = 0; trial < 200; trial++) {
        size_t n = 1 + (size_t)bench_rng_range(&r, 0, trial < 20 ? 5 : 300);
        double *v = malloc(n * sizeof(double)), *s = malloc(n * sizeof(double));
        for (size_t i = 0; i < n; i++) {
            /* include ties */
            v[i] = (trial & 1) ? (double)bench_rng_range(&r, 0, 10)
                               : bench_rng_normal(&r) * 100.0 + 50.0;
            s[i] = v[i];
        }
        bench_sort(s, n);
        for (size_t i = 1; i < n; i++)
            assert_true(s[i - 1] <= s[i]);
        for (size_t k = 0; k < FOLIO_ARRAY_LEN(ps); k++) {
            double want = naive_pct(v, n, ps[k]), got = bench_pct(s, n, ps[k]);
            assert_true(fabs(got - want) <= 1e-9 * (1 + fabs(want)));
        }
        free(v);
        free(s);
    }
}

/* numpy.percentile's values for small samples. */
static void test_percentiles_numpy(void **state)
{
    (void)state;
    double v[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    assert_true(fabs(bench_pct(v, 10, 90) - 9.1) < 1e-12);
    assert_true(fabs(bench_pct(v, 10, 99) - 9.91) < 1e-12);
    assert_true(fabs(bench_pct(v, 10, 50) - 5.5) < 1e-12);
    double w[4] = {10, 20, 30, 40};
    assert_true(fabs(bench_pct(w, 4, 50) - 25) < 1e-12);
    assert_true(fabs(bench_pct(w, 4, 25) - 17.5) < 1e-12);
    double one = 3.5;
    assert_true(bench_pct(&one, 1, 99) == 3.5);
    assert_true(isnan(bench_pct(NULL, 0, 50)));
    double u[5] = {5, 1, 4, 2, 3};
    struct bench_dist d;
    bench_dist_of(u, 5, &d);
    assert_true(d.mean == 3 && d.median == 3 && d.min == 1 && d.max == 5);
    assert_true(fabs(d.std - sqrt(2.0)) < 1e-12);
    assert_true(fabs(d.p90 - 4.6) < 1e-12);
    bench_dist_of(NULL, 0, &d);
    assert_true(isnan(d.mean) && isnan(d.p99) && d.n == 0);
}

/* ---- arrivals ---------------------------------------------------------------- */

/* Gaps for rate r and burstiness b: mean 1/r, variance 1/(b r^2); for
 * b = 1 the counts per unit time are Poisson (variance = mean). */
static void test_arrival_statistics(void **state)
{
    (void)state;
    const int n = short_run() ? 40000 : 400000;
    const double rates[] = {4.0, 50.0};
    const double bs[] = {0.25, 0.5, 1.0, 4.0};
    for (size_t ri = 0; ri < FOLIO_ARRAY_LEN(rates); ri++)
        for (size_t bi = 0; bi < FOLIO_ARRAY_LEN(bs); bi++) {
            double rate = rates[ri], b = bs[bi];
            struct bench_rng r;
            bench_rng_seed(&r, 1234);
            double sum = 0, sum2 = 0;
            for (int i = 0; i < n; i++) {
                double g = bench_arrival_gap(&r, rate, b);
                assert_true(g >= 0 && isfinite(g));
                sum += g;
                sum2 += g * g;
            }
            double mean = sum / n, var = sum2 / n - mean * mean;
            double want_mean = 1 / rate, want_var = 1 / (b * rate * rate);
            /* standard error of the mean is sqrt(var / n): allow ~6 of them */
            assert_true(fabs(mean - want_mean) < 6 * sqrt(want_var / n));
            assert_true(fabs(var / want_var - 1) < (short_run() ? 0.12 : 0.05));
        }
    /* Poisson counts: arrivals per 1 s window at rate 20 have mean 20 and
     * index of dispersion 1; a bursty process (b = 0.25) is overdispersed. */
    for (int bursty = 0; bursty < 2; bursty++) {
        struct bench_rng r;
        bench_rng_seed(&r, 99);
        int windows = short_run() ? 2000 : 20000;
        int *cnt = calloc((size_t)windows, sizeof(int));
        double t = 0;
        for (;;) {
            t += bench_arrival_gap(&r, 20, bursty ? 0.25 : 1.0);
            if (t >= windows)
                break;
            cnt[(int)t]++;
        }
        double m = 0, v = 0;
        for (int i = 0; i < windows; i++)
            m += cnt[i];
        m /= windows;
        for (int i = 0; i < windows; i++)
            v += (cnt[i] - m) * (cnt[i] - m);
        v /= windows - 1;
        assert_true(fabs(m - 20) < 0.5);
        if (bursty)
            assert_true(v / m > 2.0);
        else
            assert_true(fabs(v / m - 1) < 0.1);
        free(cnt);
    }
    /* fixed seed, fixed sequence; infinite rate means no gap */
    struct bench_rng a, b2;
    bench_rng_seed(&a, 5);
    bench_rng_seed(&b2, 5);
    for (int i = 0; i < 100; i++)
        assert_true(bench_arrival_gap(&a, 3, 0.7) == bench_arrival_gap(&b2, 3, 0.7));
    assert_true(bench_arrival_gap(&a, INFINITY, 1) == 0);
    bench_rng_seed(&b2, 6);
    assert_true(bench_rng_u64(&a) != bench_rng_u64(&b2));
    /* range stays in bounds and hits both ends */
    bool lo = false, hi = false;
    for (int i = 0; i < 1000; i++) {
        int64_t x = bench_rng_range(&a, 3, 7);
        assert_true(x >= 3 && x <= 7);
        lo |= x == 3;
        hi |= x == 7;
    }
    assert_true(lo && hi);
}

/* ---- Prometheus ------------------------------------------------------------ */

struct prom_rec {
    char names[32][64];
    char labels[32][96];
    double values[32];
    int n;
};

static void on_prom(void *user, const char *name, size_t nl, const char *labels, size_t ll,
                    double v)
{
    struct prom_rec *r = user;
    assert_true(r->n < 32);
    snprintf(r->names[r->n], 64, "%.*s", (int)nl, name);
    snprintf(r->labels[r->n], 96, "%.*s", (int)ll, labels);
    r->values[r->n++] = v;
}

static void test_prom_parse(void **state)
{
    (void)state;
    const char *text = "# HELP folio_kv_cache_usage_ratio Fraction of KV blocks in use (0..1).\n"
                       "# TYPE folio_kv_cache_usage_ratio gauge\n"
                       "folio_kv_cache_usage_ratio 0.25\n"
                       "\n"
                       "folio_tenant_kv_blocks_used{tenant=\"a \\\"b\\\" }{\",x=\"1\"} 12\r\n"
                       "vllm:num_requests_running{model_name=\"m\"} 3 1700000000000\n"
                       "h_bucket{le=\"+Inf\"} 4\n"
                       "weird +Inf\n"
                       "nan_metric NaN\n"
                       "neg -1.5e-3\n"
                       "bad line here\n"
                       "9starts_with_digit 1\n"
                       "novalue\n"
                       "unclosed{a=\"b\" 1\n"
                       "trailing 1 2 3\n"
                       "last_no_newline 7";
    struct prom_rec r = {0};
    int bad = -1;
    assert_int_equal(bench_prom_parse(text, strlen(text), on_prom, &r, &bad), 0);
    assert_int_equal(bad, 5);
    assert_int_equal(r.n, 8);
    assert_string_equal(r.names[0], "folio_kv_cache_usage_ratio");
    assert_true(r.values[0] == 0.25);
    assert_string_equal(r.names[1], "folio_tenant_kv_blocks_used");
    assert_string_equal(r.labels[1], "tenant=\"a \\\"b\\\" }{\",x=\"1\"");
    assert_true(r.values[1] == 12);
    assert_string_equal(r.names[2], "vllm:num_requests_running");
    assert_true(r.values[2] == 3);
    assert_string_equal(r.labels[3], "le=\"+Inf\"");
    assert_true(isinf(r.values[4]) && r.values[4] > 0);
    assert_true(isnan(r.values[5]));
    assert_true(r.values[6] == -1.5e-3);
    assert_string_equal(r.names[7], "last_no_newline");
    assert_true(r.values[7] == 7);
}

static void test_prom_extract(void **state)
{
    (void)state;
    struct bench_prom_sample s;
    const char *folio = "folio_kv_cache_usage_ratio 0.5\n"
                        "folio_num_requests_running 7\n"
                        "folio_num_requests_waiting 2\n"
                        "folio_num_preemptions_total 3\n"
                        "folio_kv_blocks_used 50\n"
                        "folio_kv_num_blocks 100\n"
                        "folio_tenant_requests_running{tenant=\"x\"} 7\n";
    bench_prom_extract(folio, strlen(folio), &s);
    assert_true(s.kv_usage == 0.5 && s.running == 7 && s.waiting == 2 && s.preemptions == 3);
    assert_true(s.kv_blocks_used == 50 && s.kv_blocks_total == 100);
    /* vLLM names, summed over label sets; missing ones are NaN */
    const char *vllm = "vllm:gpu_cache_usage_perc{model_name=\"a\"} 0.25\n"
                       "vllm:num_requests_running{model_name=\"a\"} 2\n"
                       "vllm:num_requests_running{model_name=\"b\"} 3\n";
    bench_prom_extract(vllm, strlen(vllm), &s);
    assert_true(s.kv_usage == 0.25 && s.running == 5);
    assert_true(isnan(s.waiting) && isnan(s.preemptions) && isnan(s.kv_blocks_total));
    /* folio wins over vllm when both appear */
    const char *both = "vllm:num_requests_running 9\nfolio_num_requests_running 1\n";
    bench_prom_extract(both, strlen(both), &s);
    assert_true(s.running == 1);
    bench_prom_extract("", 0, &s);
    assert_true(isnan(s.kv_usage) && isnan(s.running));
}

/* ---- traces ---------------------------------------------------------------- */

/* One series summed over label sets (a label filter by substring), and
 * a histogram's cumulative buckets in order, +Inf included. */
static void test_prom_series(void **state)
{
    (void)state;
    const char text[] = "# TYPE folio_tenant_prompt_tokens_total counter\n"
                        "folio_tenant_prompt_tokens_total{tenant=\"alice\"} 10\n"
                        "folio_tenant_prompt_tokens_total{tenant=\"bob\",x=\"}\"} 5\n"
                        "folio_tenant_prompt_tokens_total_other 99\n"
                        "folio_prompt_tokens_total 15\n"
                        "folio_ttft_seconds_bucket{le=\"0.1\"} 2\n"
                        "folio_ttft_seconds_bucket{model_name=\"m\",le=\"1\"} 7\n"
                        "folio_ttft_seconds_bucket{le=\"+Inf\"} 9\n"
                        "folio_ttft_seconds_sum 4.5\n";
    const size_t n = strlen(text);
    assert_true(bench_prom_sum(text, n, "folio_tenant_prompt_tokens_total", NULL) == 15);
    assert_true(bench_prom_sum(text, n, "folio_tenant_prompt_tokens_total", "tenant=\"bob\"") == 5);
    assert_true(bench_prom_sum(text, n, "folio_prompt_tokens_total", NULL) == 15);
    assert_true(isnan(bench_prom_sum(text, n, "folio_prompt_tokens_total", "tenant=\"bob\"")));
    assert_true(isnan(bench_prom_sum(text, n, "folio_missing", NULL)));
    double le[4], cum[4];
    assert_int_equal(bench_prom_buckets(text, n, "folio_ttft_seconds", le, cum, 4), 3);
    assert_true(le[0] == 0.1 && le[1] == 1 && isinf(le[2]));
    assert_true(cum[0] == 2 && cum[1] == 7 && cum[2] == 9);
    assert_int_equal(bench_prom_buckets(text, n, "folio_ttft_seconds", le, cum, 2), 2);
    assert_int_equal(bench_prom_buckets(text, n, "folio_nothing", le, cum, 4), 0);
}

/* A one-connection server on a Unix socket: reads a request head (and
 * the body its Content-Length names), writes `reply`, closes. */
struct one_shot {
    int lfd;
    const char *reply;
    char req[4096];
    size_t req_len;
};

static void *one_shot_serve(void *arg)
{
    struct one_shot *o = arg;
    int fd = accept(o->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    for (;;) {
        ssize_t k = read(fd, o->req + o->req_len, sizeof(o->req) - 1 - o->req_len);
        if (k <= 0)
            break;
        o->req_len += (size_t)k;
        o->req[o->req_len] = 0;
        const char *he = strstr(o->req, "\r\n\r\n");
        const char *cl = strstr(o->req, "Content-Length: ");
        if (he && (size_t)(he + 4 - o->req) + (cl ? strtoul(cl + 16, NULL, 10) : 0) <= o->req_len)
            break;
    }
    if (write(fd, o->reply, strlen(o->reply)) < 0)
        perror("one_shot write");
    close(fd);
    return NULL;
}

static void http_case(const char *reply, const struct http_client_req *r, int want_rc,
                      int want_status, const char *want_body, char *req_out, size_t req_cap)
{
    char path[108];
    snprintf(path, sizeof(path), "/tmp/folio-hc-%d.sock", (int)getpid());
    unlink(path);
    struct one_shot o = {.reply = reply};
    o.lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    assert_int_equal(bind(o.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(o.lfd, 1), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, one_shot_serve, &o), 0);
    struct bench_target t;
    char err[200] = "";
    assert_int_equal(bench_target_unix(&t, path, err, sizeof(err)), 0);
    struct folio_buf body = {0};
    int status = -1;
    int rc = http_client_request(&t, r, &status, &body, err, sizeof(err));
    pthread_join(th, NULL);
    close(o.lfd);
    unlink(path);
    if (rc != want_rc)
        fail_msg("rc %d (want %d): %s", rc, want_rc, err);
    assert_int_equal(status, want_status);
    if (want_body) {
        assert_int_equal(body.len, strlen(want_body));
        assert_memory_equal(body.p, want_body, body.len);
    }
    if (req_out)
        snprintf(req_out, req_cap, "%s", o.req);
    folio_buf_free(&body);
}

/* The tools' HTTP client: chunked, Content-Length and read-to-EOF bodies,
 * an error status with its body, a truncated response, and what it
 * sends (head, Authorization, JSON body). */
static void test_http_client(void **state)
{
    (void)state;
    struct http_client_req get = {.method = "GET", .path = "/metrics", .timeout_s = 10};
    char req[4096];
    http_case("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
              "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
              &get, 0, 200, "hello world", req, sizeof(req));
    assert_non_null(strstr(req, "GET /metrics HTTP/1.1\r\n"));
    assert_non_null(strstr(req, "Connection: close\r\n"));
    assert_null(strstr(req, "Authorization"));
    http_case("HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nno route!", &get, 0, 404,
              "no route!", NULL, 0);
    http_case("HTTP/1.0 200 OK\r\n\r\nuntil the end", &get, 0, 200, "until the end", NULL, 0);
    http_case("HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nshort", &get, -EPROTO, 200, NULL, NULL,
              0);
    struct http_client_req post = {.method = "POST",
                                   .path = "/v1/completions",
                                   .api_key = "sk-test",
                                   .body = "{\"prompt\":\"x\"}",
                                   .body_len = 14};
    http_case("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", &post, 0, 200, "{}", req,
              sizeof(req));
    assert_non_null(strstr(req, "POST /v1/completions HTTP/1.1\r\n"));
    assert_non_null(strstr(req, "Authorization: Bearer sk-test\r\n"));
    assert_non_null(strstr(req, "Content-Type: application/json\r\nContent-Length: 14\r\n"));
    assert_non_null(strstr(req, "\r\n\r\n{\"prompt\":\"x\"}"));
}

static void test_trace_parse(void **state)
{
    (void)state;
    const char *text = "# arrival_s tenant prompt_len output_len prefix_id\n"
                       "0.5   1 212 180 -1\n"
                       "\n"
                       "  0.0 2 95 400 3   # first\n"
                       "0.5\t7\t10\t20\t0\r\n"
                       "0.25 0 1 1 -1";
    struct sim_trace t;
    char err[200];
    assert_int_equal(sim_trace_parse(text, strlen(text), &t, err, sizeof(err)), 0);
    assert_int_equal(t.n, 4);
    assert_true(t.reqs[0].arrival_s == 0.0 && t.reqs[0].tenant == 2 && t.reqs[0].prompt_len == 95 &&
                t.reqs[0].output_len == 400 && t.reqs[0].prefix_id == 3);
    assert_true(t.reqs[1].arrival_s == 0.25 && t.reqs[1].prompt_len == 1);
    /* equal arrivals keep file order */
    assert_true(t.reqs[2].arrival_s == 0.5 && t.reqs[2].tenant == 1 && t.reqs[2].prefix_id == -1);
    assert_true(t.reqs[3].arrival_s == 0.5 && t.reqs[3].tenant == 7 && t.reqs[3].prefix_id == 0);
    sim_trace_free(&t);

    const struct {
        const char *text, *want;
    } bad[] = {
        {"0 1 2 3\n", "line 1: prefix_id"},           {"# c\n-1 1 2 3 -1\n", "line 2: arrival_s"},
        {"0 x 2 3 -1\n", "line 1: tenant"},           {"0 1 0 3 -1\n", "line 1: prompt_len"},
        {"0 1 2 0 -1\n", "line 1: output_len"},       {"0 1 2 3 -2\n", "line 1: prefix_id"},
        {"0 1 2 3 -1 extra\n", "line 1: unexpected"}, {"0 1 2.5 3 -1\n", "line 1: prompt_len"},
        {"abc 1 2 3 -1\n", "line 1: arrival_s"},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(bad); i++) {
        err[0] = 0;
        assert_int_equal(sim_trace_parse(bad[i].text, strlen(bad[i].text), &t, err, sizeof(err)),
                         -EINVAL);
        assert_non_null(strstr(err, bad[i].want));
        assert_null(t.reqs);
    }
    assert_int_equal(sim_trace_parse("", 0, &t, err, sizeof(err)), 0);
    assert_int_equal(t.n, 0);
    assert_true(sim_trace_load("/nonexistent/trace.txt", &t, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "/nonexistent/trace.txt"));
}

/* ---- SVG ------------------------------------------------------------------- */

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

/* Requests per replica: ids in order of first appearance, unsent
 * requests left out, no header counted as "-", ids past the cap under
 * "other"; checked against a count made by hand over random outcomes. */
static void test_replica_tally(void **state)
{
    (void)state;
    struct bench_req r[200];
    memset(r, 0, sizeof(r));
    int want_req[4] = {0}, want_ok[4] = {0};
    const char *ids[4] = {"replica2", "replica1", "", "replica3"};
    uint64_t x = 12345;
    for (int i = 0; i < 200; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int k = i < 4 ? i : (int)((x >> 33) % 4);
        r[i].sent = ((x >> 20) % 7) != 0 || i < 4;
        r[i].ok = ((x >> 40) % 3) != 0;
        snprintf(r[i].replica, sizeof(r[i].replica), "%s", ids[k]);
        if (r[i].sent) {
            want_req[k]++;
            want_ok[k] += r[i].ok;
        }
    }
    struct bench_replica_count c[BENCH_MAX_REPLICAS];
    assert_int_equal(bench_replica_tally(r, 200, c, BENCH_MAX_REPLICAS), 4);
    for (int k = 0; k < 4; k++) {
        assert_string_equal(c[k].id, ids[k][0] ? ids[k] : "-");
        assert_int_equal(c[k].requests, want_req[k]);
        assert_int_equal(c[k].ok, want_ok[k]);
        assert_int_equal(c[k].failed, want_req[k] - want_ok[k]);
    }
    /* a cap of 2: the third and later ids share the last slot */
    assert_int_equal(bench_replica_tally(r, 200, c, 2), 2);
    assert_string_equal(c[0].id, "replica2");
    assert_string_equal(c[1].id, "other");
    assert_int_equal(c[1].requests, want_req[1] + want_req[2] + want_req[3]);
}

/* The cluster hit rate is summed deltas over replicas scraped twice, not
 * a mean of rates; a failed scrape or a counter that went down (restart)
 * leaves that replica out. */
static void test_cluster_hit_rate(void **state)
{
    (void)state;
    struct bench_replica_scrape s[4];
    memset(s, 0, sizeof(s));
    /* 1000 queries, 900 hits */
    s[0] = (struct bench_replica_scrape){.queries = {100, 1100}, .hits = {50, 950}, .ok = {1, 1}};
    /* 100 queries, 0 hits */
    s[1] = (struct bench_replica_scrape){.queries = {0, 100}, .hits = {0, 0}, .ok = {1, 1}};
    /* killed: no second scrape */
    s[2] = (struct bench_replica_scrape){.queries = {7, 0}, .hits = {7, 0}, .ok = {1, 0}};
    /* restarted: counters went down */
    s[3] = (struct bench_replica_scrape){.queries = {500, 20}, .hits = {400, 10}, .ok = {1, 1}};
    int used = -1;
    double hr = bench_cluster_hit_rate(s, 4, &used);
    assert_int_equal(used, 2);
    assert_true(fabs(hr - 900.0 / 1100.0) < 1e-12);
    assert_true(isnan(bench_cluster_hit_rate(s + 2, 2, &used)) && used == 0);
    s[1].queries[1] = 0;
    s[0].queries[1] = 100;
    s[0].hits[1] = 50;
    assert_true(isnan(bench_cluster_hit_rate(s, 2, &used)) && used == 2); /* no query made */
}

static void test_svg_structure(void **state)
{
    (void)state;
    double x[6] = {1, 2, 3, 4, 5, 6};
    double a[6] = {10, 20, NAN, 40, 50, 60}; /* a gap: two polylines */
    double b[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
    double c[6] = {0, 1, 2, 3, 2, 1};
    struct bench_svg_panel p[2] = {
        {.title = "Throughput <&>",
         .unit = "tok/s",
         .n_series = 1,
         .names = {"out \"q\""},
         .y = {a}},
        {.title = "Queue", .unit = "", .n_series = 2, .names = {"b", "c"}, .y = {b, c}},
    };
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(bench_svg_write(f, "title & <more>", x, 6, p, 2), 0);
    fclose(f);
    assert_true(!strncmp(buf, "<?xml version=\"1.0\"", 19));
    assert_non_null(strstr(buf, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_true(len > 7 && !strcmp(buf + len - 7, "</svg>\n"));
    assert_int_equal(count(buf, "<g "), 2);
    assert_int_equal(count(buf, "</g>"), 2);
    assert_int_equal(count(buf, "<polyline"), 3); /* a: 2 pieces, b: none, c: 1 */
    assert_int_equal(count(buf, "<text"), count(buf, "</text>"));
    assert_non_null(strstr(buf, "title &amp; &lt;more&gt;"));
    assert_non_null(strstr(buf, "Throughput &lt;&amp;&gt;"));
    assert_non_null(strstr(buf, "out &quot;q&quot;"));
    assert_null(strstr(buf, "<&>"));
    assert_null(strstr(buf, "nan"));
    free(buf);
    /* no data at all still makes a document */
    f = open_memstream(&buf, &len);
    assert_int_equal(bench_svg_write(f, "empty", x, 0, p, 1), 0);
    fclose(f);
    assert_non_null(strstr(buf, "no data"));
    assert_true(!strcmp(buf + len - 7, "</svg>\n"));
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sse_split_everywhere), cmocka_unit_test(test_sse_unterminated),
        cmocka_unit_test(test_sse_large_event),      cmocka_unit_test(test_chunk_scan),
        cmocka_unit_test(test_percentiles_vs_naive), cmocka_unit_test(test_percentiles_numpy),
        cmocka_unit_test(test_arrival_statistics),   cmocka_unit_test(test_prom_parse),
        cmocka_unit_test(test_prom_extract),         cmocka_unit_test(test_trace_parse),
        cmocka_unit_test(test_svg_structure),        cmocka_unit_test(test_prom_series),
        cmocka_unit_test(test_http_client),          cmocka_unit_test(test_replica_tally),
        cmocka_unit_test(test_cluster_hit_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
