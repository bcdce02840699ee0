/*
 * tests/test_sched_prop.c — property tests of the scheduler over random
 * traces, and fair-share bounds.
 *
 * Random traces (random pool and block size, budget, max_seqs, tenants with
 * weights and limits, arrivals, prompts with shared prefixes, n = 1..3,
 * priorities, eos and stop tokens, aborts, prompt log-probabilities under
 * a small per-step cap) run twice: with tight memory and
 * with unlimited memory.  Properties, checked for every trace:
 *   - sched_check() after every plan and commit (harness);
 *   - the budget is never exceeded, every slice's tokens are the request's
 *     stream, token indices arrive 0, 1, 2, ... (harness);
 *   - no request is lost or duplicated: every accepted request gets exactly
 *     one DONE, every sample exactly one FINISHED;
 *   - liveness: everything finishes within a bound of steps;
 *   - preempted streams continue exactly: every request that was not
 *     aborted generated, per sample, the same tokens and finish reason as
 *     in the unlimited-memory run (an aborted one, a prefix of them);
 *   - the pool is empty at the end.
 *
 * Fairness (two tenants, equal weight, one flooding, one light): the light
 * tenant's requests wait at most one request's duration for admission,
 * while FCFS would queue them behind the whole flood.  Both backlogged with
 * weights 1:1 and 2:1: service (weight_in*prefill + weight_out*decode)
 * splits within 20% of the weights.
 */
#include "test_sched_harness.h"

struct rng {
    uint64_t s;
};

static uint64_t rnd(struct rng *r)
{
    r->s += 0x9e3779b97f4a7c15ull;
    return h_mix(r->s);
}

static int32_t rnd_in(struct rng *r, int32_t lo, int32_t hi) /* [lo, hi] */
{
    return lo + (int32_t)(rnd(r) % (uint64_t)(hi - lo + 1));
}

struct treq {
    int64_t arrival;
    int64_t abort_at; /* -1: never */
    int32_t n_prompt, max_tokens, n, priority, eos_id, n_stop;
    int32_t stop[2];
    uint32_t tenant;
    int32_t prompt[160];
    uint64_t seed;
    bool prompt_logits;
    int32_t hidden_lo, hidden_hi; /* hidden states (hi 0: none) */
};

struct trace {
    int32_t n_req;
    struct treq *reqs;
    int32_t block_size, num_blocks, max_seqs, max_batch, watermark, max_prompt_logits;
    int32_t n_tenants;
    struct sched_tenant_config tenants[3];
};

static void make_trace(struct trace *t, uint64_t seed)
{
    struct rng r = {seed * 0x51ed2701ull + 1};
    static const int32_t bss[] = {1, 4, 8, 16};
    t->block_size = bss[rnd_in(&r, 0, 3)];
    int32_t slots = rnd_in(&r, 160, 1200);
    t->num_blocks = FOLIO_MAX(slots / t->block_size, 1);
    t->max_seqs = rnd_in(&r, 1, 12);
    t->max_batch = rnd_in(&r, t->max_seqs, 160);
    t->watermark = rnd_in(&r, 0, 6);
    t->n_tenants = rnd_in(&r, 1, 3);
    for (int i = 0; i < t->n_tenants; i++) {
        t->tenants[i] =
            (struct sched_tenant_config){.id = (uint32_t)i + 10, .weight = rnd_in(&r, 1, 3)};
        if (rnd_in(&r, 0, 3) == 0)
            t->tenants[i].max_running_seqs = rnd_in(&r, 3, 6);
        if (rnd_in(&r, 0, 3) == 0)
            t->tenants[i].max_kv_blocks = t->num_blocks * 2 / 3;
        if (rnd_in(&r, 0, 3) == 0)
            t->tenants[i].max_waiting = rnd_in(&r, 3, 10);
    }
    t->n_req = rnd_in(&r, 20, 60);
    t->reqs = calloc((size_t)t->n_req, sizeof(*t->reqs));
    int32_t prefixes[3][96];
    for (int k = 0; k < 3; k++)
        h_prompt(prefixes[k], 96, seed * 3 + (uint64_t)k, 60);
    for (int i = 0; i < t->n_req; i++) {
        struct treq *q = &t->reqs[i];
        q->arrival = rnd_in(&r, 0, 150);
        q->abort_at = rnd_in(&r, 0, 9) == 0 ? q->arrival + rnd_in(&r, 0, 40) : -1;
        q->n_prompt = rnd_in(&r, 1, 150);
        q->max_tokens = rnd_in(&r, 1, 40);
        q->n = rnd_in(&r, 0, 4) == 0 ? rnd_in(&r, 2, 3) : 1;
        q->priority = rnd_in(&r, 0, 2);
        q->eos_id = rnd_in(&r, 0, 1) ? rnd_in(&r, 1, 59) : -1;
        q->n_stop = rnd_in(&r, 0, 2);
        for (int k = 0; k < q->n_stop; k++)
            q->stop[k] = rnd_in(&r, 1, 59);
        q->tenant = t->tenants[rnd_in(&r, 0, t->n_tenants - 1)].id;
        q->seed = rnd(&r) | 1;
        q->prompt_logits = (q->seed >> 40) % 4 == 0; /* from the seed: the draws stay */
        if (!q->prompt_logits && q->n == 1 && (q->seed >> 44) % 2 == 0) {
            uint64_t x = h_mix(q->seed);
            q->hidden_lo = (int32_t)(x % (uint64_t)q->n_prompt);
            q->hidden_hi =
                q->hidden_lo + 1 + (int32_t)((x >> 20) % (uint64_t)(q->n_prompt - q->hidden_lo));
        }
        h_prompt(q->prompt, q->n_prompt, q->seed, 60);
        if (rnd_in(&r, 0, 1)) { /* a shared prefix */
            int k = rnd_in(&r, 0, 2);
            int32_t len = FOLIO_MIN(q->n_prompt, rnd_in(&r, 8, 96));
            memcpy(q->prompt, prefixes[k], (size_t)len * sizeof(int32_t));
        }
    }
    t->max_prompt_logits = 1 + (int32_t)(h_mix(seed + 99) % 48);
    /* arrival order */
    for (int i = 1; i < t->n_req; i++)
        for (int j = i; j > 0 && t->reqs[j].arrival < t->reqs[j - 1].arrival; j--) {
            struct treq tmp = t->reqs[j];
            t->reqs[j] = t->reqs[j - 1];
            t->reqs[j - 1] = tmp;
        }
}

/* Runs a trace; rec[i] = harness record index of trace request i, or the
 * negative errno it was refused with. */
static void run_trace(struct harness *h, const struct trace *t, bool unlimited, int *rec)
{
    struct sched_config c;
    sched_config_default(&c);
    c.max_ctx = 256;
    c.max_seqs = unlimited ? 256 : t->max_seqs;
    c.max_batch_tokens = unlimited ? 100000 : t->max_batch;
    c.watermark_blocks = unlimited ? 0 : t->watermark;
    c.max_prompt_logits = unlimited ? 1000 : t->max_prompt_logits;
    /* "unlimited": room for every request of the trace at once */
    int32_t all = 1;
    for (int i = 0; i < t->n_req; i++)
        all += t->reqs[i].n *
               FOLIO_DIV_CEIL(t->reqs[i].n_prompt + t->reqs[i].max_tokens, t->block_size);
    h_init(h, unlimited ? all : t->num_blocks, t->block_size, &c);
    h->vocab = 60;
    for (int i = 0; i < t->n_tenants; i++) {
        struct sched_tenant_config tc = t->tenants[i];
        if (unlimited)
            tc.max_running_seqs = tc.max_kv_blocks = tc.max_waiting = 0;
        assert_int_equal(sched_tenant_set(h->s, &tc), 0);
    }
    int next = 0;
    int64_t added = 0;
    int64_t limit = 200000;
    while (h->step < limit) {
        while (next < t->n_req && t->reqs[next].arrival <= h->step) {
            const struct treq *q = &t->reqs[next];
            struct h_params p = {.prompt = q->prompt,
                                 .n_prompt = q->n_prompt,
                                 .max_tokens = q->max_tokens,
                                 .n = q->n,
                                 .priority = q->priority,
                                 .eos_id = q->eos_id,
                                 .n_stop = q->n_stop,
                                 .stop_ids = q->stop,
                                 .tenant = q->tenant,
                                 .seed = q->seed,
                                 .prompt_logits = q->prompt_logits,
                                 .hidden_lo = q->hidden_lo,
                                 .hidden_hi = q->hidden_hi};
            rec[next] = h_add(h, &p);
            if (rec[next] >= 0)
                added++;
            else
                assert_true(rec[next] == -EBUSY || rec[next] == -E2BIG ||
                            (rec[next] == -EINVAL && q->n > c.max_seqs));
            if (unlimited)
                assert_true(rec[next] >= 0 || q->n > c.max_seqs);
            next++;
        }
        if (!unlimited)
            for (int i = 0; i < next; i++)
                if (rec[i] >= 0 && t->reqs[i].abort_at == h->step && !h->reqs[rec[i]].done) {
                    assert_int_equal(sched_request_abort(h->s, h->reqs[rec[i]].id), 0);
                    h->reqs[rec[i]].aborted = true;
                }
        if (h_step(h) == -EAGAIN) {
            if (next == t->n_req && h->done_count == added)
                break;
            h->step++; /* idle: time passes */
        }
    }
    assert_true(h->step < limit); /* liveness */
    assert_int_equal(h->done_count, added);
}

static void check_trace(uint64_t seed, int64_t plp[2], int64_t hid[2])
{
    struct trace t;
    make_trace(&t, seed);
    int *rec_a = calloc((size_t)t.n_req, sizeof(int));
    int *rec_b = calloc((size_t)t.n_req, sizeof(int));
    struct harness a, b;
    run_trace(&a, &t, false, rec_a);
    run_trace(&b, &t, true, rec_b);
    plp[0] += a.plp_rows;
    plp[1] += a.plp_rows_resumed;
    hid[0] += a.hid_rows;
    hid[1] += a.hid_rows_resumed;
    for (int i = 0; i < t.n_req; i++) {
        if (rec_a[i] < 0)
            continue;
        const struct hreq *x = &a.reqs[rec_a[i]];
        const struct hreq *y = &b.reqs[rec_b[i]];
        assert_true(x->done);
        for (int s = 0; s < x->n; s++) {
            if (x->fin[s] == SCHED_FINISH_ABORT) {
                assert_true(x->n_gen[s] <= y->n_gen[s]);
            } else {
                assert_int_equal(x->fin[s], y->fin[s]);
                assert_int_equal(x->n_gen[s], y->n_gen[s]);
            }
            assert_memory_equal(x->gen[s], y->gen[s], (size_t)x->n_gen[s] * sizeof(int32_t));
            /* and the unlimited run is the fake model's chain itself */
            int32_t exp[300];
            enum sched_finish_reason why;
            const struct treq *q = &t.reqs[i];
            int32_t ne = h_expected(&b, y, s, q->eos_id, false, q->stop, q->n_stop, 256, exp, &why);
            assert_int_equal(y->n_gen[s], ne);
            assert_int_equal(y->fin[s], why);
            assert_memory_equal(y->gen[s], exp, (size_t)ne * sizeof(int32_t));
        }
    }
    struct pager_stats ps;
    pager_stats_get(a.pg, &ps);
    assert_int_equal(ps.blocks_used, 0);
    assert_int_equal(ps.seqs, 0);
    h_free(&a);
    h_free(&b);
    free(rec_a);
    free(rec_b);
    free(t.reqs);
}

static void test_random_traces(void **state)
{
    (void)state;
    int n = h_short() ? 18 : 150;
    int64_t plp[2] = {0, 0}, hid[2] = {0, 0};
    for (int i = 0; i < n; i++)
        check_trace((uint64_t)i, plp, hid);
    /* prompt log-probabilities were asked for, and some after a preemption */
    print_message("%lld prompt rows delivered, %lld after a preemption\n", (long long)plp[0],
                  (long long)plp[1]);
    assert_true(plp[0] > 0 && plp[1] > 0);
    /* and hidden states (embeddings), some after a preemption too */
    print_message("%lld hidden rows delivered, %lld after a preemption\n", (long long)hid[0],
                  (long long)hid[1]);
    assert_true(hid[0] > 0 && hid[1] > 0);
}

/* The random traces do exercise preemption (else the comparison with the
 * unlimited run proves little): count traces that preempt. */
static void test_random_traces_preempt(void **state)
{
    (void)state;
    int n = h_short() ? 10 : 40, with = 0;
    for (int i = 0; i < n; i++) {
        struct trace t;
        make_trace(&t, (uint64_t)i);
        int *rec = calloc((size_t)t.n_req, sizeof(int));
        struct harness h;
        run_trace(&h, &t, false, rec);
        with += h.preempt_events > 0;
        h_free(&h);
        free(rec);
        free(t.reqs);
    }
    print_message("%d of %d traces preempted\n", with, n);
    assert_true(with >= n / 5);
}

/* ---- fairness ---------------------------------------------------------- */

static int add_req(struct harness *h, uint32_t tenant, int32_t n_prompt, int32_t max_tokens,
                   uint64_t seed)
{
    int32_t prompt[256];
    h_prompt(prompt, n_prompt, seed, h->vocab);
    struct h_params p = {.prompt = prompt,
                         .n_prompt = n_prompt,
                         .max_tokens = max_tokens,
                         .tenant = tenant,
                         .eos_id = -1,
                         .seed = seed};
    int rc = h_add(h, &p);
    assert_true(rc >= 0);
    return rc;
}

/* Flood (tenant 1: 300 requests at once) vs light (tenant 2: one request
 * every 25 steps).  Equal weights.  max_seqs = 8 binds; each request takes
 * 1 prefill step + 49 decode steps, so a slot frees every ~6 steps.
 * Bounds: every light request is admitted within 51 steps (one request's
 * duration: it takes the next free slot) and on average within 25 (half
 * of it); the flood's requests wait ~1000 steps on average (FCFS would
 * make the light tenant wait as long). */
static void test_fair_flood_vs_light(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c;
    sched_config_default(&c);
    c.max_seqs = 8;
    c.max_batch_tokens = 512;
    c.max_ctx = 512;
    c.watermark_blocks = 0;
    h_init(&h, 256, 16, &c); /* 8 sequences of <= 100 tokens need 56 */
    int n_flood = h_short() ? 120 : 300;
    for (int i = 0; i < n_flood; i++)
        add_req(&h, 1, 50, 50, (uint64_t)i + 1);
    int light[40], n_light = 0;
    while (h.done_count < n_flood + n_light || n_light < 15) {
        if (h.step % 25 == 0 && n_light < 15)
            light[n_light++] = add_req(&h, 2, 50, 50, 100000u + (uint64_t)h.step);
        if (h_step(&h) == -EAGAIN)
            h.step++;
        assert_true(h.step < 100000);
    }
    int64_t max_w = 0, sum_w = 0;
    for (int i = 0; i < n_light; i++) {
        int64_t w = h.reqs[light[i]].admit_step - h.reqs[light[i]].add_step;
        max_w = FOLIO_MAX(max_w, w);
        sum_w += w;
    }
    int64_t flood_w = 0;
    for (int i = 0; i < n_flood; i++)
        flood_w += h.reqs[i].admit_step - h.reqs[i].add_step;
    print_message("light tenant: max wait %lld steps, mean %.1f; flood mean wait %.1f\n",
                  (long long)max_w, (double)sum_w / n_light, (double)flood_w / n_flood);
    assert_true(max_w <= 51);
    assert_true(sum_w <= 25 * n_light);
    assert_true(flood_w / n_flood > 10 * (sum_w / n_light + 1));
    h_free(&h);
}

/* Both tenants backlogged: service splits by weight. */
static void check_split(double w1, double w2)
{
    struct harness h;
    struct sched_config c;
    sched_config_default(&c);
    c.max_seqs = 8;
    c.max_batch_tokens = 256;
    c.max_ctx = 512;
    c.watermark_blocks = 0;
    h_init(&h, 256, 16, &c); /* 8 sequences of <= 100 tokens need 56 */
    struct sched_tenant_config t1 = {.id = 1, .weight = w1}, t2 = {.id = 2, .weight = w2};
    assert_int_equal(sched_tenant_set(h.s, &t1), 0);
    assert_int_equal(sched_tenant_set(h.s, &t2), 0);
    for (int i = 0; i < 150; i++) {
        add_req(&h, 1, 40, 30, (uint64_t)i + 1);
        add_req(&h, 2, 40, 30, (uint64_t)i + 1000);
    }
    for (int s = 0; s < 600; s++)
        assert_int_equal(h_step(&h), 0);
    struct sched_tenant_stats a, b;
    assert_int_equal(sched_tenant_stats_find(h.s, 1, &a), 0);
    assert_int_equal(sched_tenant_stats_find(h.s, 2, &b), 0);
    double sa = a.prefill_tokens + 2.0 * a.decode_tokens;
    double sb = b.prefill_tokens + 2.0 * b.decode_tokens;
    double ratio = (sa / w1) / (sb / w2);
    print_message("weights %.0f:%.0f service %.0f:%.0f normalised ratio %.3f\n", w1, w2, sa, sb,
                  ratio);
    assert_true(a.waiting > 0 && b.waiting > 0); /* both still backlogged */
    assert_true(ratio > 0.8 && ratio < 1.25);
    h_free(&h);
}

static void test_fair_weights(void **state)
{
    (void)state;
    check_split(1, 1);
    check_split(2, 1);
    check_split(1, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_traces),
        cmocka_unit_test(test_random_traces_preempt),
        cmocka_unit_test(test_fair_flood_vs_light),
        cmocka_unit_test(test_fair_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
