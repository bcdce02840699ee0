/*
 * bench/bench_sched.c — microseconds of scheduler work per step
 * (sched_step_plan + sched_step_commit, the model step itself excluded).
 *
 *   bench_sched [--quick] [--seqs N]
 *
 * Scenarios (pool: 65,536 blocks of 16 slots, bookkeeping only; budget
 * 2,048 tokens; max_seqs = N, default 256):
 *   decode     N requests with 200-token prompts, all decoding: one token
 *              per sequence per step, a block allocated every 16th token;
 *   churn      N running requests with 1..64-token outputs: every step some
 *              finish and new ones (200-token prompts, a shared 128-token
 *              prefix) are admitted with prefix reuse and chunked prefill;
 *   pressure   the same as decode on a pool that holds ~N/2 requests:
 *              steady preemption and resumption.
 * Each line prints the mean and the 99th percentile over the timed steps.
 *
 * Build with -Dchecks=false: with checks, sched_check and pager_check walk
 * everything after each call and the figures are meaningless.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"
#include "folio/pager.h"
#include "folio/scheduler.h"

static int die(const char *what, int rc)
{
    fprintf(stderr, "bench_sched: %s failed: %d\n", what, rc);
    exit(1);
}

static uint64_t rng_state = 88172645463325252ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

struct bench {
    pager_t *pg;
    sched_t *s;
    int64_t live;
};

static void on_event(void *ctx, const struct sched_event *ev)
{
    struct bench *b = ctx;
    if (ev->type == SCHED_EV_DONE)
        b->live--;
}

static void setup(struct bench *b, int32_t blocks, int32_t seqs)
{
    struct pager_config pc = {.num_blocks = blocks,
                              .block_size = 16,
                              .n_layers = 1,
                              .n_kv_heads = 1,
                              .head_dim = 1,
                              .dtype = FOLIO_F32,
                              .no_arena = true};
    int rc = pager_init(&b->pg, &pc);
    if (rc)
        die("pager_init", rc);
    struct sched_config c;
    sched_config_default(&c);
    c.max_seqs = seqs;
    c.max_batch_tokens = 2048;
    c.max_ctx = 4096;
    c.on_event = on_event;
    c.event_ctx = b;
    if ((rc = sched_new(&c, b->pg, &b->s)))
        die("sched_new", rc);
    b->live = 0;
}

static void add(struct bench *b, int32_t prompt_len, int32_t max_tokens, bool shared)
{
    int32_t prompt[512];
    for (int32_t i = 0; i < prompt_len; i++)
        prompt[i] = shared && i < 128 ? 1000 + i : 1 + (int32_t)(rnd() % 30000);
    struct sched_request_params p = {.prompt = prompt,
                                     .n_prompt = prompt_len,
                                     .max_tokens = max_tokens,
                                     .eos_id = -1,
                                     .n = 1,
                                     .tenant = rnd() % 4};
    uint64_t id;
    int rc = sched_request_add(b->s, &p, &id);
    if (rc)
        die("sched_request_add", rc);
    b->live++;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* One step; returns its plan + commit nanoseconds (0 if nothing ran). */
static uint64_t step(struct bench *b, int32_t *sampled, int32_t *tokens_out)
{
    struct sched_batch bt;
    uint64_t t0 = folio_now_ns();
    int rc = sched_step_plan(b->s, &bt);
    uint64_t t1 = folio_now_ns();
    if (rc == -EAGAIN)
        return 0;
    if (rc)
        die("sched_step_plan", rc);
    for (int32_t k = 0; k < bt.n_sample; k++)
        sampled[k] = 1 + (int32_t)(rnd() % 30000);
    *tokens_out = bt.mb.n_tokens;
    uint64_t t2 = folio_now_ns();
    if ((rc = sched_step_commit(b->s, sampled, bt.n_sample)))
        die("sched_step_commit", rc);
    uint64_t t3 = folio_now_ns();
    return (t1 - t0) + (t3 - t2);
}

static void report(const char *name, uint64_t *ns, int n, int64_t tokens)
{
    qsort(ns, (size_t)n, sizeof(*ns), cmp_u64);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += (double)ns[i];
    printf("  %-10s %8.1f us/step mean  %8.1f us p99   (%d steps, %.0f tokens/step)\n", name,
           sum / n / 1e3, (double)ns[(int)(0.99 * (n - 1))] / 1e3, n, (double)tokens / n);
}

int main(int argc, char **argv)
{
    int quick = 0;
    int32_t seqs = 256;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--seqs") && i + 1 < argc)
            seqs = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_sched [--quick] [--seqs N]\n");
            return 2;
        }
    }
#ifdef FOLIO_CHECKS
    printf("warning: built with -Dchecks=true: figures are meaningless\n");
#endif
    int steps = quick ? 200 : 2000;
    uint64_t *ns = folio_malloc((size_t)steps * sizeof(*ns));
    int32_t *sampled = folio_malloc((size_t)seqs * sizeof(*sampled));
    int32_t tok = 0;
    printf("bench_sched: %d sequences, budget 2048 tokens, block size 16\n", seqs);

    /* decode */
    struct bench b;
    setup(&b, 65536, seqs);
    for (int32_t i = 0; i < seqs; i++)
        add(&b, 200, 3800, false);
    while (step(&b, sampled, &tok) && tok > seqs) /* the prefills */
        ;
    int64_t tokens = 0;
    for (int i = 0; i < steps; i++) {
        ns[i] = step(&b, sampled, &tok);
        tokens += tok;
    }
    report("decode", ns, steps, tokens);
    sched_free(b.s);
    pager_free(b.pg);

    /* churn */
    setup(&b, 65536, seqs);
    for (int32_t i = 0; i < seqs; i++)
        add(&b, 200, 1 + (int32_t)(rnd() % 64), true);
    for (int i = 0; i < 100; i++) { /* warm up */
        while (b.live < seqs + 16)
            add(&b, 200, 1 + (int32_t)(rnd() % 64), true);
        step(&b, sampled, &tok);
    }
    tokens = 0;
    for (int i = 0; i < steps; i++) {
        while (b.live < seqs + 16)
            add(&b, 200, 1 + (int32_t)(rnd() % 64), true);
        ns[i] = step(&b, sampled, &tok);
        tokens += tok;
    }
    report("churn", ns, steps, tokens);
    sched_free(b.s);
    pager_free(b.pg);

    /* pressure: room for about half the sequences at full length */
    setup(&b, seqs * 600 / 16 / 2 + 64, seqs);
    for (int32_t i = 0; i < seqs; i++)
        add(&b, 200, 400, false);
    tokens = 0;
    int n = 0;
    for (int i = 0; i < steps; i++) {
        while (b.live < seqs)
            add(&b, 200, 400, false);
        uint64_t t = step(&b, sampled, &tok);
        if (t) {
            ns[n++] = t;
            tokens += tok;
        }
    }
    struct sched_stats st;
    sched_stats_get(b.s, &st);
    report("pressure", ns, n, tokens);
    printf("             (%lld preemptions, %lld recomputed tokens)\n", (long long)st.preemptions,
           (long long)st.recompute_tokens);
    sched_free(b.s);
    pager_free(b.pg);
    folio_free(ns);
    folio_free(sampled);
    return 0;
}
