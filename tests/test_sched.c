/*
 * tests/test_sched.c — one test per scheduler rule.  Every step goes
 * through the harness (tests/test_sched_harness.h), which checks the batch
 * against each request's stream, the event order, and sched_check() after
 * plan and after commit.
 */
#include "test_sched_harness.h"

static struct sched_config base_cfg(int32_t batch, int32_t seqs)
{
    struct sched_config c;
    sched_config_default(&c);
    c.max_batch_tokens = batch;
    c.max_seqs = seqs;
    c.max_ctx = 1024;
    c.watermark_blocks = 0;
    return c;
}

static int add_simple(struct harness *h, int32_t n_prompt, int32_t max_tokens, uint32_t tenant,
                      int32_t priority, uint64_t seed)
{
    int32_t prompt[1024];
    h_prompt(prompt, n_prompt, seed, h->vocab);
    struct h_params p = {.prompt = prompt,
                         .n_prompt = n_prompt,
                         .max_tokens = max_tokens,
                         .tenant = tenant,
                         .priority = priority,
                         .eos_id = -1,
                         .seed = seed};
    return h_add(h, &p);
}

static void assert_matches_alone(struct harness *h, const struct hreq *r)
{
    int32_t exp[1100];
    enum sched_finish_reason why;
    for (int32_t i = 0; i < r->n; i++) {
        int32_t n = h_expected(h, r, i, -1, true, NULL, 0, h->cfg.max_ctx, exp, &why);
        assert_int_equal(r->n_gen[i], n);
        assert_memory_equal(r->gen[i], exp, (size_t)n * sizeof(int32_t));
        assert_int_equal(r->fin[i], why);
    }
}

static void assert_pool_empty(struct harness *h)
{
    struct pager_stats ps;
    pager_stats_get(h->pg, &ps);
    assert_int_equal(ps.blocks_used, 0);
    assert_int_equal(ps.seqs, 0);
    struct sched_stats st;
    sched_stats_get(h->s, &st);
    assert_int_equal(st.running + st.waiting + st.preempted, 0);
}

/* One request: prefill in one step, then one decode per step, LENGTH after
 * max_tokens, pages freed at the final commit. */
static void test_single_request(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(64, 8);
    h_init(&h, 64, 16, &c);
    int i = add_simple(&h, 20, 5, 1, 0, 42);
    assert_true(i >= 0);
    struct sched_batch b;
    assert_int_equal(h_step_ex(&h, &b, NULL), 0);
    assert_int_equal(b.mb.n_slices, 1);
    assert_int_equal(b.mb.slices[0].first_pos, 0);
    assert_int_equal(b.mb.slices[0].n_tokens, 20);
    assert_true(b.mb.slices[0].sample);
    assert_int_equal(b.n_prefill_tokens, 20);
    for (int k = 0; k < 4; k++) {
        assert_int_equal(h_step_ex(&h, &b, NULL), 0);
        assert_int_equal(b.mb.n_tokens, 1);
        assert_int_equal(b.mb.slices[0].first_pos, 20 + k);
        assert_int_equal(b.n_decode_tokens, 1);
    }
    assert_true(h.reqs[i].done);
    assert_int_equal(h.reqs[i].n_gen[0], 5);
    assert_int_equal(h.reqs[i].fin[0], SCHED_FINISH_LENGTH);
    assert_matches_alone(&h, &h.reqs[i]);
    assert_int_equal(h_step(&h), -EAGAIN);
    assert_pool_empty(&h);
    h_free(&h);
}

/* A long prompt is chunked over several steps while a running request's
 * decodes go on in every one of them (mixed batches). */
static void test_chunked_prefill_with_decodes(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(32, 8);
    h_init(&h, 256, 16, &c);
    int a = add_simple(&h, 8, 40, 1, 0, 1);
    assert_int_equal(h_step(&h), 0); /* a's prefill */
    int b = add_simple(&h, 200, 3, 1, 0, 2);
    int steps_b = 0;
    struct sched_batch bt;
    while (h.reqs[b].n_gen[0] == 0) {
        assert_int_equal(h_step_ex(&h, &bt, NULL), 0);
        steps_b++;
        /* a decodes in every step, first */
        assert_int_equal(bt.info[0].request_id, h.reqs[a].id);
        assert_int_equal(bt.mb.slices[0].n_tokens, 1);
        assert_int_equal(bt.mb.n_tokens, FOLIO_MIN(32, 1 + 200 - 31 * (steps_b - 1)));
    }
    assert_int_equal(steps_b, 7); /* ceil(200 / 31) */
    assert_true(h.saw_mixed);
    h_drain(&h, 1000);
    assert_matches_alone(&h, &h.reqs[a]);
    assert_matches_alone(&h, &h.reqs[b]);
    assert_pool_empty(&h);
    h_free(&h);
}

/* With a sliding window every sample holds at most
 * pager_window_blocks(max_batch_tokens) blocks: requests whose whole
 * streams are far larger than the pool are admitted (dense they are
 * -E2BIG), run to the end with their tables bounded, and generate what
 * they would alone; the tenant's block count follows the held blocks. */
static void test_window_footprint(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(16, 8);
    h_init(&h, 12, 8, &c); /* 96 slots */
    assert_int_equal(add_simple(&h, 30, 200, 1, 0, 1), -E2BIG);
    h_free(&h);

    h_init_window(&h, 12, 8, &c, 16);
    const int32_t bound = pager_window_blocks(h.pg, 16);
    assert_int_equal(bound, 5); /* ceil((16 - 1 + 16) / 8) + 1 */
    int a = add_simple(&h, 30, 200, 1, 0, 1);
    int b = add_simple(&h, 20, 120, 2, 0, 2);
    assert_true(a >= 0 && b >= 0);
    int64_t most = 0;
    while (h_step(&h) == 0) {
        struct pager_stats ps;
        pager_stats_get(h.pg, &ps);
        most = FOLIO_MAX(most, ps.blocks_held);
        assert_true(ps.blocks_held <= ps.seqs * bound);
        struct sched_tenant_stats ts;
        int64_t tenant_blocks = 0;
        for (uint32_t t = 1; t <= 2; t++)
            if (sched_tenant_stats_find(h.s, t, &ts) == 0)
                tenant_blocks += ts.kv_blocks;
        assert_int_equal(tenant_blocks, ps.blocks_held);
    }
    assert_true(h.reqs[a].done && h.reqs[b].done);
    assert_matches_alone(&h, &h.reqs[a]);
    assert_matches_alone(&h, &h.reqs[b]);
    struct pager_stats ps;
    pager_stats_get(h.pg, &ps);
    print_message("window 16, blocks of 8: 230 + 140 tokens in a pool of 12 blocks, at most %lld "
                  "held; %lld released by the window\n",
                  (long long)most, (long long)ps.window_frees);
    assert_true(most <= 2 * bound && ps.window_frees >= (230 + 140 - 2 * 16) / 8 - 4);
    assert_pool_empty(&h);
    h_free(&h);
}

/* eos finishes unless ignore_eos; stop ids finish; the finishing token is
 * reported before FINISHED. */
static void test_eos_and_stop(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(64, 8);
    h_init(&h, 64, 16, &c);
    int32_t prompt[8];
    h_prompt(prompt, 8, 5, h.vocab);
    /* the third generated token of this seed becomes "eos" / "stop" */
    struct hreq probe = {.seed = 99, .n_prompt = 8, .prompt = prompt, .max_tokens = 10};
    int32_t exp[16];
    enum sched_finish_reason why;
    h_expected(&h, &probe, 0, -1, true, NULL, 0, 1024, exp, &why);
    int32_t special = exp[2];
    bool earlier = exp[0] == special || exp[1] == special;
    if (earlier)
        skip();
    struct h_params p = {
        .prompt = prompt, .n_prompt = 8, .max_tokens = 10, .seed = 99, .eos_id = special};
    int e = h_add(&h, &p);
    p.ignore_eos = true;
    int ig = h_add(&h, &p);
    p.ignore_eos = false;
    p.eos_id = -1;
    p.stop_ids = &special;
    p.n_stop = 1;
    int st = h_add(&h, &p);
    h_drain(&h, 100);
    assert_int_equal(h.reqs[e].fin[0], SCHED_FINISH_EOS);
    assert_int_equal(h.reqs[e].n_gen[0], 3);
    assert_int_equal(h.reqs[e].gen[0][2], special);
    assert_int_equal(h.reqs[ig].fin[0], SCHED_FINISH_LENGTH);
    assert_int_equal(h.reqs[ig].n_gen[0], 10);
    assert_int_equal(h.reqs[st].fin[0], SCHED_FINISH_STOP);
    assert_int_equal(h.reqs[st].n_gen[0], 3);
    assert_pool_empty(&h);
    h_free(&h);
}

static struct harness *g_abort_h;
static uint64_t g_abort_id;
static bool abort_between(struct harness *h)
{
    (void)h;
    assert_int_equal(sched_request_abort(g_abort_h->s, g_abort_id), 0);
    return true;
}

/* Abort: while in flight it takes effect at commit (the step's token is
 * dropped); for a waiting request at the next plan; unknown ids -ENOENT. */
static void test_abort(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(64, 8);
    h_init(&h, 64, 16, &c);
    int a = add_simple(&h, 10, 50, 1, 0, 1);
    assert_int_equal(h_step(&h), 0);
    assert_int_equal(h_step(&h), 0);
    assert_int_equal(h.reqs[a].n_gen[0], 2);
    g_abort_h = &h;
    g_abort_id = h.reqs[a].id;
    assert_int_equal(h_step_ex(&h, NULL, abort_between), 0);
    assert_true(h.reqs[a].done);
    assert_int_equal(h.reqs[a].n_gen[0], 2); /* the in-flight token was dropped */
    assert_int_equal(h.reqs[a].fin[0], SCHED_FINISH_ABORT);
    assert_int_equal(sched_request_abort(h.s, h.reqs[a].id), -ENOENT);
    assert_pool_empty(&h);

    int w = add_simple(&h, 10, 5, 1, 0, 2);
    assert_int_equal(sched_request_abort(h.s, h.reqs[w].id), 0);
    assert_false(h.reqs[w].done);
    assert_int_equal(h_step(&h), -EAGAIN);
    assert_true(h.reqs[w].done);
    assert_int_equal(h.reqs[w].fin[0], SCHED_FINISH_ABORT);
    assert_int_equal(h.reqs[w].n_gen[0], 0);
    assert_pool_empty(&h);
    h_free(&h);
}

/* A second request with the same prompt adopts the cached full blocks and
 * computes only the rest (never all of it: one row must sample). */
static void test_prefix_cache_reuse(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(256, 8);
    h_init(&h, 64, 16, &c);
    int a = add_simple(&h, 64, 2, 1, 0, 7);
    h_drain(&h, 100);
    assert_true(h.reqs[a].done);
    int b = add_simple(&h, 64, 2, 1, 0, 7);
    struct sched_batch bt;
    assert_int_equal(h_step_ex(&h, &bt, NULL), 0);
    assert_int_equal(bt.mb.n_slices, 1);
    assert_int_equal(bt.mb.slices[0].first_pos, 48);
    assert_int_equal(bt.mb.slices[0].n_tokens, 16);
    /* a different tenant has a different salt: no sharing */
    int d = add_simple(&h, 64, 2, 2, 0, 7);
    h_drain(&h, 100);
    assert_true(h.reqs[b].done && h.reqs[d].done);
    assert_matches_alone(&h, &h.reqs[b]);
    struct pager_stats ps;
    pager_stats_get(h.pg, &ps);
    assert_int_equal(ps.prefix_hits, 48);
    h_free(&h);
}

/* Admission needs the first chunk's pages plus the watermark. */
static void test_admission_watermark(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(512, 8);
    c.watermark_blocks = 4;
    h_init(&h, 16, 16, &c);
    int a = add_simple(&h, 150, 100, 1, 0, 1); /* 10 blocks, 6 left >= 4 */
    assert_int_equal(h_step(&h), 0);
    int b = add_simple(&h, 40, 2, 1, 0, 2); /* needs 3: 6 - 3 = 3 < 4 -> waits */
    assert_int_equal(h_step(&h), 0);
    assert_int_equal(h.reqs[b].admit_step, -1);
    /* a 1-block request fits above the watermark, b does not overtake */
    int d = add_simple(&h, 10, 2, 1, 0, 3);
    assert_int_equal(h_step(&h), 0);
    assert_int_equal(h.reqs[d].admit_step, -1);
    h_drain(&h, 1000);
    assert_true(h.reqs[a].done && h.reqs[b].done && h.reqs[d].done);
    assert_true(h.reqs[b].admit_step <= h.reqs[d].admit_step);
    h_free(&h);
}

/* A request that fits the pool but not the pool minus the watermark is
 * admitted once nothing else runs (else it would wait forever). */
static void test_admission_alone_ignores_watermark(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(512, 8);
    c.watermark_blocks = 4;
    h_init(&h, 16, 16, &c);
    int a = add_simple(&h, 30, 5, 1, 0, 1);
    int b = add_simple(&h, 220, 20, 1, 0, 2); /* 14 blocks now, 15 at the end; 16 - 4 < 14 */
    h_drain(&h, 1000);
    assert_true(h.reqs[a].done && h.reqs[b].done);
    assert_true(h.reqs[b].admit_step > h.reqs[a].admit_step);
    assert_matches_alone(&h, &h.reqs[b]);
    assert_pool_empty(&h);
    h_free(&h);
}

/* When decodes run out of pages the least protected (lowest priority, most
 * recently admitted) request is preempted; the step admits nothing; the
 * victim resumes by re-prefilling prompt + generated tokens and its stream
 * continues exactly. */
static void test_preempt_recompute(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(256, 8);
    h_init(&h, 12, 8, &c); /* 96 slots */
    int hi = add_simple(&h, 30, 40, 1, 5, 1);
    int lo = add_simple(&h, 30, 40, 1, 0, 2);
    int nw = add_simple(&h, 8, 4, 1, 0, 3);
    h_drain(&h, 1000);
    assert_true(h.reqs[hi].done && h.reqs[lo].done && h.reqs[nw].done);
    assert_int_equal(h.reqs[hi].preempts, 0);
    assert_true(h.reqs[lo].preempts >= 1);
    assert_int_equal(h.reqs[lo].resumes, h.reqs[lo].preempts);
    assert_true(h.steps_with_preempt >= 1);
    assert_matches_alone(&h, &h.reqs[hi]);
    assert_matches_alone(&h, &h.reqs[lo]);
    assert_matches_alone(&h, &h.reqs[nw]);
    struct sched_stats st;
    sched_stats_get(h.s, &st);
    assert_int_equal(st.preemptions, h.preempt_events);
    assert_true(st.recompute_tokens > 0);
    struct sched_tenant_stats ts;
    assert_int_equal(sched_tenant_stats_find(h.s, 1, &ts), 0);
    assert_int_equal(ts.preemptions, st.preemptions);
    assert_pool_empty(&h);
    h_free(&h);
}

/* Among equal priorities the most recently admitted goes first. */
static void test_preempt_most_recent(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(256, 8);
    h_init(&h, 12, 8, &c);
    int first = add_simple(&h, 30, 40, 1, 0, 1);
    assert_int_equal(h_step(&h), 0);
    int second = add_simple(&h, 30, 40, 1, 0, 2);
    h_drain(&h, 1000);
    assert_int_equal(h.reqs[first].preempts, 0);
    assert_true(h.reqs[second].preempts >= 1);
    assert_matches_alone(&h, &h.reqs[first]);
    assert_matches_alone(&h, &h.reqs[second]);
    h_free(&h);
}

/* Priority never crosses tenants: a later admission of another tenant
 * with a higher priority is still the victim when pages run out (within
 * one tenant the lower priority would go: test_preempt_recompute). */
static void test_preempt_priority_per_tenant(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(256, 8);
    h_init(&h, 12, 8, &c);
    int first = add_simple(&h, 30, 40, 1, 0, 1);
    assert_int_equal(h_step(&h), 0);
    int other = add_simple(&h, 30, 40, 2, 100, 2);
    h_drain(&h, 1000);
    assert_int_equal(h.reqs[first].preempts, 0);
    assert_true(h.reqs[other].preempts >= 1);
    assert_matches_alone(&h, &h.reqs[first]);
    assert_matches_alone(&h, &h.reqs[other]);
    h_free(&h);
}

static int add_n(struct harness *h, int32_t n_prompt, int32_t max_tokens, int32_t n,
                 uint32_t tenant, uint64_t seed)
{
    int32_t prompt[1024];
    h_prompt(prompt, n_prompt, seed, h->vocab);
    struct h_params p = {.prompt = prompt,
                         .n_prompt = n_prompt,
                         .max_tokens = max_tokens,
                         .n = n,
                         .tenant = tenant,
                         .eos_id = -1,
                         .seed = seed};
    return h_add(h, &p);
}

/* One sample of n = 3 aborted: it finishes with ABORT and frees its pages
 * at the next reclaim, the others run on (aborted before the fork, it waits
 * for the fork); aborting the rest ends the request. */
static void test_sample_abort(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(256, 8);
    h_init(&h, 64, 16, &c);
    int a = add_simple(&h, 20, 30, 1, 0, 1);
    uint64_t id = h.reqs[a].id;
    assert_int_equal(sched_sample_abort(h.s, id, 5), -EINVAL);
    assert_int_equal(sched_sample_abort(h.s, id + 99, 0), -ENOENT);
    int b = add_n(&h, 20, 30, 3, 1, 2);
    uint64_t bid = h.reqs[b].id;
    assert_int_equal(sched_sample_abort(h.s, bid, 1), 0); /* before the fork */
    for (int i = 0; i < 4; i++)
        assert_int_equal(h_step(&h), 0);
    assert_int_equal(h.reqs[b].fin[1], SCHED_FINISH_ABORT);
    assert_int_equal(h.reqs[b].fin[0], SCHED_FINISH_NONE);
    int32_t got1 = h.reqs[b].n_gen[1];
    assert_int_equal(sched_sample_abort(h.s, bid, 0), 0);
    assert_int_equal(sched_sample_abort(h.s, bid, 2), 0); /* the last live one: request abort */
    h_drain(&h, 1000);
    assert_true(h.reqs[b].done && h.reqs[a].done);
    assert_int_equal(h.reqs[b].fin[0], SCHED_FINISH_ABORT);
    assert_int_equal(h.reqs[b].fin[2], SCHED_FINISH_ABORT);
    assert_int_equal(h.reqs[b].n_gen[1], got1);
    assert_int_equal(h.reqs[a].fin[0], SCHED_FINISH_LENGTH);
    assert_pool_empty(&h);
    h_free(&h);
}

/* n = 3: the prompt is prefilled once (all but its last token), forked,
 * and each sample computes the last token and samples its own stream. */
static void test_parallel_samples(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(256, 8);
    h_init(&h, 64, 16, &c);
    int32_t prompt[40];
    h_prompt(prompt, 40, 3, h.vocab);
    struct h_params p = {
        .prompt = prompt, .n_prompt = 40, .max_tokens = 6, .n = 3, .eos_id = -1, .seed = 11};
    int r = h_add(&h, &p);
    struct sched_batch b;
    assert_int_equal(h_step_ex(&h, &b, NULL), 0);
    assert_int_equal(b.mb.n_slices, 1);
    assert_int_equal(b.mb.slices[0].n_tokens, 39);
    assert_false(b.mb.slices[0].sample);
    assert_int_equal(h_step_ex(&h, &b, NULL), 0);
    assert_int_equal(b.mb.n_slices, 3);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(b.mb.slices[k].first_pos, 39);
        assert_int_equal(b.mb.slices[k].n_tokens, 1);
        assert_true(b.mb.slices[k].sample);
        assert_int_equal(b.info[k].sample_index, k);
        assert_int_equal(b.info[k].token_index, 0);
    }
    /* forked tables share the full blocks; the partial one was copied */
    struct pager_stats ps;
    pager_stats_get(h.pg, &ps);
    assert_true(ps.blocks_shared >= 2);
    assert_int_equal(ps.cow_copies, 2);
    h_drain(&h, 100);
    assert_true(h.reqs[r].done);
    assert_matches_alone(&h, &h.reqs[r]);
    assert_true(memcmp(h.reqs[r].gen[0], h.reqs[r].gen[1], 6 * sizeof(int32_t)) != 0);
    struct sched_stats st;
    sched_stats_get(h.s, &st);
    assert_int_equal(st.prefill_tokens, 39 + 3);
    assert_pool_empty(&h);
    h_free(&h);
}

/* n > 1 under memory pressure: preempted after the fork, every sample
 * resumes its own stream. */
static void test_parallel_samples_preempted(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(256, 8);
    h_init(&h, 12, 8, &c);
    int32_t prompt[20];
    h_prompt(prompt, 20, 3, h.vocab);
    int big = add_simple(&h, 50, 40, 1, 9, 5);
    struct h_params p = {
        .prompt = prompt, .n_prompt = 20, .max_tokens = 12, .n = 2, .eos_id = -1, .seed = 12};
    int r = h_add(&h, &p);
    h_drain(&h, 1000);
    assert_true(h.reqs[r].done && h.reqs[big].done);
    assert_true(h.reqs[r].preempts >= 1);
    assert_matches_alone(&h, &h.reqs[r]);
    assert_matches_alone(&h, &h.reqs[big]);
    assert_pool_empty(&h);
    h_free(&h);
}

/* A pool of 64 blocks of 16 whose prefix cache holds a finished request's
 * 100-token prompt (into prompt); returns that request's record. */
static int cached_prompt(struct harness *h, int32_t prompt[100])
{
    struct sched_config c = base_cfg(256, 8);
    c.max_prompt_logits = 32;
    h_init(h, 64, 16, &c);
    h_prompt(prompt, 100, 5, h->vocab);
    int plain = add_simple(h, 100, 2, 1, 0, 5);
    h_drain(h, 100);
    return plain;
}

/* A pool of 12 blocks of 8 mostly held by a running 40 + 50-token
 * request (returned), and a 60-token prompt (into pr) that will not fit
 * beside it without preemption. */
static int busy_pool(struct harness *h, const struct sched_config *c, int32_t pr[60])
{
    h_init(h, 12, 8, c);
    int big = add_simple(h, 40, 50, 1, 9, 3);
    h_step(h);
    h_prompt(pr, 60, 4, h->vocab);
    return big;
}

/* Prompt log-probabilities: all_logits chunks capped at max_prompt_logits
 * tokens a step (other requests' chunks are not), no cached prefix taken
 * for positions still owed (the request's own blocks are cached for the
 * next), every position once (the harness checks order), and with n > 1
 * the rows come from the one shared prefill. */
static void test_prompt_logits(void **state)
{
    (void)state;
    struct harness h;
    int32_t prompt[100];
    int plain = cached_prompt(&h, prompt); /* the same prompt, cached */
    struct h_params p = {.prompt = prompt,
                         .n_prompt = 100,
                         .max_tokens = 4,
                         .eos_id = -1,
                         .seed = 5,
                         .prompt_logits = true};
    int r = h_add(&h, &p);
    int other = add_simple(&h, 120, 2, 1, 0, 6);
    static const int32_t first[] = {0, 32, 64, 96}, len[] = {32, 32, 32, 4};
    for (int k = 0; k < 4; k++) {
        struct sched_batch b;
        assert_int_equal(h_step_ex(&h, &b, NULL), 0);
        int32_t j = 0; /* r's slice (the other one's decodes come first) */
        while (j < b.mb.n_slices && b.info[j].request_id != h.reqs[r].id)
            j++;
        assert_true(j < b.mb.n_slices);
        assert_int_equal(b.mb.slices[j].first_pos, first[k]); /* nothing adopted */
        assert_int_equal(b.mb.slices[j].n_tokens, len[k]);
        assert_true(b.mb.slices[j].all_logits);
        assert_int_equal(b.info[j].plp_n, k < 3 ? 32 : 3); /* 96, 97, 98; 99 samples */
        assert_int_equal(b.mb.slices[j].sample, k == 3);
        assert_int_equal(b.n_logits, len[k] + (b.n_sample - (k == 3)));
        if (k == 0) { /* the other request's chunk takes the rest of the budget */
            assert_int_equal(b.mb.n_slices, 2);
            assert_int_equal(b.mb.slices[1].n_tokens, 120);
            assert_false(b.mb.slices[1].all_logits);
            assert_int_equal(b.info[1].plp_n, 0);
        }
    }
    assert_int_equal(h.reqs[r].plp_next, 99);
    h_drain(&h, 100);
    assert_true(h.reqs[r].done && h.reqs[other].done && h.reqs[plain].done);
    assert_matches_alone(&h, &h.reqs[r]);
    /* delivered: a second one may not take a cached prefix either; a
     * plain one takes the blocks the first left */
    int plain2 = add_simple(&h, 100, 2, 1, 0, 5);
    struct sched_batch b;
    assert_int_equal(h_step_ex(&h, &b, NULL), 0);
    assert_int_equal(b.mb.slices[0].first_pos, 96);
    h_drain(&h, 100);
    assert_true(h.reqs[plain2].done);

    /* n = 2: the shared prefill delivers 0..98, then the fork */
    p.n = 2;
    p.seed = 8;
    int par = h_add(&h, &p);
    h_drain(&h, 100);
    assert_true(h.reqs[par].done);
    assert_int_equal(h.reqs[par].plp_next, 99);
    assert_matches_alone(&h, &h.reqs[par]);
    assert_pool_empty(&h);

    /* a request preempted in the middle of its prompt resumes where the
     * delivered rows end (the harness: in order, none twice) */
    struct harness h2;
    struct sched_config c2 = base_cfg(64, 8);
    c2.max_prompt_logits = 16;
    int32_t pr[60];
    int big = busy_pool(&h2, &c2, pr);
    struct h_params p2 = {.prompt = pr,
                          .n_prompt = 60,
                          .max_tokens = 3,
                          .eos_id = -1,
                          .seed = 4,
                          .prompt_logits = true};
    int small = h_add(&h2, &p2);
    h_drain(&h2, 1000);
    assert_true(h2.reqs[big].done && h2.reqs[small].done);
    assert_true(h2.reqs[small].preempts >= 1);
    assert_true(h2.plp_rows_resumed > 0);
    assert_int_equal(h2.reqs[small].plp_next, 59);
    assert_matches_alone(&h2, &h2.reqs[small]);
    assert_matches_alone(&h2, &h2.reqs[big]);
    h_free(&h2);

    /* max_prompt_logits 0 refuses such requests */
    struct sched_config c = base_cfg(256, 8);
    c.max_prompt_logits = 0;
    struct harness h3;
    h_init(&h3, 64, 16, &c);
    assert_int_equal(h_add(&h3, &p), -EINVAL);
    p.prompt_logits = false;
    assert_true(h_add(&h3, &p) >= 0);
    h_free(&h3);
    h_free(&h);
}

/* Hidden states (embeddings): every position of [lo, hi) delivered once,
 * in order, through hidden slices that need no logits rows (so
 * max_prompt_logits does not cap them); no cached prefix adopted past
 * the positions still owed, so a mean over the whole prompt computes it
 * all while the last position alone takes the cache; a preemption in the
 * middle resumes after the delivered rows. */
static void test_hidden_states(void **state)
{
    (void)state;
    struct harness h;
    int32_t prompt[100];
    int plain = cached_prompt(&h, prompt); /* the same prompt, cached */
    assert_true(h.reqs[plain].done);
    static const struct {
        int32_t lo, hi, first_pos, hid_first, hid_n;
    } cases[] = {
        {0, 100, 0, 0, 100},  /* mean: nothing adopted, all 100 rows in one step */
        {99, 100, 96, 99, 1}, /* last: the cached 96 adopted, one row */
        {0, 1, 0, 0, 1},      /* first: nothing adopted (position 0 is owed) */
        {40, 70, 32, 40, 30}, /* a middle span: the cache up to its start */
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct h_params p = {.prompt = prompt,
                             .n_prompt = 100,
                             .max_tokens = 1,
                             .eos_id = -1,
                             .seed = 5,
                             .hidden_lo = cases[k].lo,
                             .hidden_hi = cases[k].hi};
        int r = h_add(&h, &p);
        assert_true(r >= 0);
        struct sched_batch b;
        assert_int_equal(h_step_ex(&h, &b, NULL), 0);
        assert_int_equal(b.mb.n_slices, 1);
        assert_int_equal(b.mb.slices[0].first_pos, cases[k].first_pos);
        assert_int_equal(b.mb.slices[0].n_tokens, 100 - cases[k].first_pos);
        assert_true(b.mb.slices[0].hidden && b.mb.slices[0].sample);
        assert_false(b.mb.slices[0].all_logits);
        assert_int_equal(b.n_logits, 1); /* the sampled row only */
        assert_int_equal(b.n_hidden, 100 - cases[k].first_pos);
        assert_int_equal(b.info[0].hid_row, 0);
        assert_int_equal(b.info[0].hid_first, cases[k].hid_first);
        assert_int_equal(b.info[0].hid_n, cases[k].hid_n);
        assert_true(h.reqs[r].done); /* max_tokens 1: done at that commit */
        assert_int_equal(h.reqs[r].hid_next, cases[k].hi);
        assert_matches_alone(&h, &h.reqs[r]);
    }
    assert_pool_empty(&h);
    /* refused: with prompt logits, with n > 1, an empty or outside range */
    struct h_params bad = {
        .prompt = prompt, .n_prompt = 100, .max_tokens = 1, .eos_id = -1, .hidden_hi = 100};
    bad.prompt_logits = true;
    assert_int_equal(h_add(&h, &bad), -EINVAL);
    bad.prompt_logits = false;
    bad.n = 2;
    assert_int_equal(h_add(&h, &bad), -EINVAL);
    bad.n = 1;
    bad.hidden_lo = 100;
    assert_int_equal(h_add(&h, &bad), -EINVAL);
    bad.hidden_lo = -1;
    assert_int_equal(h_add(&h, &bad), -EINVAL);
    bad.hidden_lo = 0;
    bad.hidden_hi = 101;
    assert_int_equal(h_add(&h, &bad), -EINVAL);
    h_free(&h);

    /* chunks of 16 under a pool that preempts: resumed where the
     * delivered rows end (the harness: in order, none twice) */
    struct harness h2;
    struct sched_config c2 = base_cfg(16, 8);
    int32_t pr[60];
    int big = busy_pool(&h2, &c2, pr);
    struct h_params p2 = {.prompt = pr,
                          .n_prompt = 60,
                          .max_tokens = 1,
                          .eos_id = -1,
                          .seed = 4,
                          .hidden_lo = 0,
                          .hidden_hi = 60};
    int small = h_add(&h2, &p2);
    h_drain(&h2, 1000);
    assert_true(h2.reqs[big].done && h2.reqs[small].done);
    assert_true(h2.reqs[small].preempts >= 1);
    assert_true(h2.hid_rows_resumed > 0);
    assert_int_equal(h2.hid_rows, 60);
    assert_int_equal(h2.reqs[small].hid_next, 60);
    assert_matches_alone(&h2, &h2.reqs[small]);
    assert_matches_alone(&h2, &h2.reqs[big]);
    h_free(&h2);
}

/* Tenant limits: waiting (-EBUSY at once), running sequences, KV blocks. */
static void test_tenant_limits(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(256, 16);
    h_init(&h, 256, 16, &c);
    struct sched_tenant_config t1 = {.id = 1, .weight = 1, .max_waiting = 2, .max_running_seqs = 1};
    struct sched_tenant_config t2 = {.id = 2, .weight = 1, .max_kv_blocks = 4};
    assert_int_equal(sched_tenant_set(h.s, &t1), 0);
    assert_int_equal(sched_tenant_set(h.s, &t2), 0);
    int a1 = add_simple(&h, 10, 5, 1, 0, 1);
    int a2 = add_simple(&h, 10, 5, 1, 0, 2);
    assert_int_equal(add_simple(&h, 10, 5, 1, 0, 3), -EBUSY);
    struct sched_tenant_stats ts;
    assert_int_equal(sched_tenant_stats_find(h.s, 1, &ts), 0);
    assert_int_equal(ts.refused, 1);
    assert_int_equal(ts.waiting, 2);
    /* tenant 2: 4 blocks = 64 slots; 2 requests of 40 tokens need 6 */
    int b1 = add_simple(&h, 30, 10, 2, 0, 4);
    int b2 = add_simple(&h, 30, 10, 2, 0, 5);
    assert_int_equal(add_simple(&h, 60, 20, 2, 0, 6), -E2BIG); /* can never fit */
    while (h_step(&h) == 0) {
        assert_int_equal(sched_tenant_stats_find(h.s, 1, &ts), 0);
        assert_true(ts.running_seqs <= 1);
        assert_int_equal(sched_tenant_stats_find(h.s, 2, &ts), 0);
        assert_true(ts.kv_blocks <= 4);
    }
    assert_true(h.reqs[a1].done && h.reqs[a2].done && h.reqs[b1].done && h.reqs[b2].done);
    assert_true(h.reqs[a2].admit_step > h.reqs[a1].done_step - 1);
    assert_matches_alone(&h, &h.reqs[b1]);
    assert_matches_alone(&h, &h.reqs[b2]);
    assert_pool_empty(&h);
    h_free(&h);
}

/* Fair share: admission goes to the backlogged tenant with the least
 * virtual counter, a heavier weight gets proportionally more, and a tenant
 * returning from idle is lifted (no banked credit). */
static void test_vtc(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(64, 2);
    h_init(&h, 256, 16, &c);
    struct sched_tenant_config t1 = {.id = 1, .weight = 1};
    struct sched_tenant_config t2 = {.id = 2, .weight = 3};
    assert_int_equal(sched_tenant_set(h.s, &t1), 0);
    assert_int_equal(sched_tenant_set(h.s, &t2), 0);
    for (int i = 0; i < 40; i++) {
        assert_true(add_simple(&h, 10, 10, 1, 0, 100 + i) >= 0);
        assert_true(add_simple(&h, 10, 10, 2, 0, 200 + i) >= 0);
    }
    for (int s = 0; s < 150; s++)
        assert_int_equal(h_step(&h), 0);
    struct sched_tenant_stats a, b;
    assert_int_equal(sched_tenant_stats_find(h.s, 1, &a), 0);
    assert_int_equal(sched_tenant_stats_find(h.s, 2, &b), 0);
    double sa = a.prefill_tokens + 2.0 * a.decode_tokens;
    double sb = b.prefill_tokens + 2.0 * b.decode_tokens;
    /* weight 3 vs 1: within one request's cost (30) of the 3:1 split */
    assert_true(sb > 2.0 * sa);
    assert_true(sb < 4.0 * sa);
    h_drain(&h, 100000);

    /* tenant 3 idled all along: it starts at the least backlogged counter */
    for (int i = 0; i < 5; i++)
        assert_true(add_simple(&h, 10, 10, 1, 0, 300 + i) >= 0);
    assert_int_equal(sched_tenant_stats_find(h.s, 1, &a), 0);
    assert_true(add_simple(&h, 10, 10, 3, 0, 400) >= 0);
    struct sched_tenant_stats t3;
    assert_int_equal(sched_tenant_stats_find(h.s, 3, &t3), 0);
    assert_true(t3.vtc == a.vtc);
    h_drain(&h, 100000);
    h_free(&h);
}

/* Priority within a tenant: higher first, FIFO among equals. */
static void test_priority_order(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(64, 1);
    h_init(&h, 256, 16, &c);
    int a = add_simple(&h, 10, 3, 1, 0, 1);
    int b = add_simple(&h, 10, 3, 1, 0, 2);
    int d = add_simple(&h, 10, 3, 1, 5, 3);
    h_drain(&h, 1000);
    assert_true(h.reqs[d].admit_step < h.reqs[a].admit_step);
    assert_true(h.reqs[a].admit_step < h.reqs[b].admit_step);
    h_free(&h);
}

/* max_seqs and max_batch_tokens hold under load (the harness asserts the
 * budget every step; here the running count). */
static void test_limits_under_load(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(48, 6);
    h_init(&h, 200, 8, &c);
    for (int i = 0; i < 60; i++)
        assert_true(add_simple(&h, 5 + (i * 37) % 90, 1 + (i * 11) % 30, (uint32_t)(i % 3), 0,
                               (uint64_t)i + 1) >= 0);
    int64_t steps = 0;
    while (h_step(&h) == 0) {
        struct sched_stats st;
        sched_stats_get(h.s, &st);
        assert_true(st.running_seqs <= 6);
        steps++;
    }
    assert_int_equal(h.done_count, 60);
    assert_true(h.max_slice_tokens <= 48);
    for (int i = 0; i < 60; i++)
        assert_matches_alone(&h, &h.reqs[i]);
    assert_pool_empty(&h);
    h_free(&h);
}

/* The maxlen baseline reserves max_ctx slots per sequence: concurrency is
 * num_blocks / ceil(max_ctx / block_size), and nothing is ever preempted. */
static void test_maxlen_policy(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(512, 64);
    c.max_ctx = 256;
    c.reserve_max_len = true;
    h_init(&h, 64, 16, &c); /* 4 x 256 slots */
    for (int i = 0; i < 10; i++)
        assert_true(add_simple(&h, 20, 30, 1, 0, (uint64_t)i + 1) >= 0);
    while (h_step(&h) == 0) {
        struct sched_stats st;
        sched_stats_get(h.s, &st);
        assert_true(st.running_seqs <= 4);
    }
    assert_int_equal(h.done_count, 10);
    assert_int_equal(h.preempt_events, 0);
    h_free(&h);
}

/* Bad parameters are refused without side effects. */
static void test_bad_params(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(64, 4);
    h_init(&h, 16, 16, &c);
    int32_t prompt[2000] = {1};
    struct h_params p = {.prompt = prompt, .n_prompt = 0, .max_tokens = 1, .eos_id = -1};
    assert_int_equal(h_add(&h, &p), -EINVAL);
    p.n_prompt = 1;
    p.max_tokens = 0;
    assert_int_equal(h_add(&h, &p), -EINVAL);
    p.max_tokens = 1;
    struct sched_request_params sp = {.prompt = prompt, .n_prompt = 1, .max_tokens = 1, .n = 5};
    uint64_t id;
    assert_int_equal(sched_request_add(h.s, &sp, &id), -EINVAL); /* n > max_seqs */
    p.n_prompt = 1024;
    assert_int_equal(h_add(&h, &p), -E2BIG);
    p.n_prompt = 300; /* 16 blocks x 16 = 256 slots: can never run */
    assert_int_equal(h_add(&h, &p), -E2BIG);
    struct sched_config bad = c;
    bad.max_batch_tokens = 2; /* < max_seqs */
    sched_t *s2;
    assert_int_equal(sched_new(&bad, h.pg, &s2), -EINVAL);
    struct sched_batch b;
    assert_int_equal(sched_step_plan(h.s, &b), -EAGAIN);
    assert_int_equal(sched_step_commit(h.s, NULL, 0), -EINVAL);
    h_fail_check(&h, "bad params");
    h_free(&h);
}

/* Allocation failures inside sched_request_add leave nothing behind. */
static void test_add_alloc_failures(void **state)
{
    (void)state;
    struct harness h;
    struct sched_config c = base_cfg(64, 4);
    h_init(&h, 64, 16, &c);
    int32_t prompt[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    struct h_params p = {.prompt = prompt,
                         .n_prompt = 10,
                         .max_tokens = 3,
                         .n = 2,
                         .eos_id = -1,
                         .n_stop = 1,
                         .stop_ids = prompt};
    int ok = 0;
    for (long n = 1; n < 30; n++) {
        folio_alloc_fail_at(n);
        int rc = h_add(&h, &p);
        folio_alloc_fail_at(0);
        if (rc == -ENOMEM) {
            h_fail_check(&h, "failed add");
            continue;
        }
        assert_true(rc >= 0);
        ok++;
        h_drain(&h, 100);
    }
    assert_true(ok >= 1);
    assert_pool_empty(&h);
    h_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_request),
        cmocka_unit_test(test_chunked_prefill_with_decodes),
        cmocka_unit_test(test_window_footprint),
        cmocka_unit_test(test_eos_and_stop),
        cmocka_unit_test(test_abort),
        cmocka_unit_test(test_prefix_cache_reuse),
        cmocka_unit_test(test_admission_watermark),
        cmocka_unit_test(test_admission_alone_ignores_watermark),
        cmocka_unit_test(test_preempt_recompute),
        cmocka_unit_test(test_preempt_most_recent),
        cmocka_unit_test(test_parallel_samples),
        cmocka_unit_test(test_parallel_samples_preempted),
        cmocka_unit_test(test_prompt_logits),
        cmocka_unit_test(test_hidden_states),
        cmocka_unit_test(test_tenant_limits),
        cmocka_unit_test(test_vtc),
        cmocka_unit_test(test_priority_order),
        cmocka_unit_test(test_preempt_priority_per_tenant),
        cmocka_unit_test(test_sample_abort),
        cmocka_unit_test(test_limits_under_load),
        cmocka_unit_test(test_maxlen_policy),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_add_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
