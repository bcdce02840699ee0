/*
 * tools/cmd_sim.c — `folio sim`: the real scheduler and pager (no KV arena)
 * driven by a trace, with a fake step whose duration comes from a cost
 * model, to measure memory use, concurrency, latency and fairness without
 * a model.
 *
 * The clock is virtual.  Requests arrive at their trace times; each step
 * is planned by sched_step_plan, lasts
 *
 *     a + b * tokens + c * context reads    (seconds; --cost a,b,c)
 *
 * where context reads = sum over the step's tokens of the positions they
 * attend to, and commits a deterministic token per sampling row (never an
 * eos: requests ignore eos and stop at their output length).  Between
 * steps, when nothing can run, the clock jumps to the next arrival.
 *
 * Measured, time-weighted over busy steps (per policy):
 *   - KV slots holding real tokens: slots with a token / slots of the
 *     blocks in use (paged: 1 - slots_empty / (used blocks * B); maxlen:
 *     tokens held / slots reserved), average and peak;
 *   - the fraction of the pool in use; concurrent sequences (avg, peak);
 *   - preemptions; queue time (arrival to first scheduled), TTFT
 *     (arrival to first token) and completion time percentiles;
 *   - throughput (requests/s, output tokens/s) over the makespan;
 *   - per tenant the same, and its service (weight_in * prompt tokens
 *     computed + weight_out * decode tokens) while every tenant was
 *     backlogged, from which Jain's fairness index of service / weight.
 *
 * Policies on the same pool: "paged" (the scheduler as is) and "maxlen"
 * (sched_config.reserve_max_len: each sequence reserves ctx_len slots, the
 * contiguous max-length allocation of pre-paging servers); "both" runs the
 * two on the same trace and prints the concurrency ratio.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"
#include "folio/pager.h"
#include "folio/scheduler.h"
#include "folio_cmds.h"
#include "sim_trace.h"

#define SIM_VOCAB 32000

struct sim_opts {
    const char *trace_path, *json_path, *write_trace;
    bool synthetic;
    struct sim_synth_opts syn;
    struct sim_tenant_spec *tenants;
    int32_t n_tenants;
    int32_t kv_blocks, block_size, max_batch_tokens, max_seqs, ctx_len, prefix_len;
    int32_t watermark;
    const char *policy;
    bool do_paged, do_maxlen; /* from policy: paged|maxlen|both */
    double cost_a, cost_b, cost_c;
};

struct sim_req {
    double arrival, sched_at, first_tok, done_at;
    int32_t preempts, generated;
    uint32_t tenant;
};

struct sim_tenant_res {
    uint32_t id;
    double weight;
    int32_t n_req;
    double service_backlogged;
    int64_t out_tokens, preemptions;
};

struct sim_result {
    const char *policy;
    int32_t n_req, finished, refused;
    double makespan, busy;
    double util_avg, util_peak, pool_avg, seqs_avg;
    int32_t seqs_peak;
    int64_t preemptions, out_tokens, steps;
    double jain;
    bool jain_valid;
    struct sim_req *reqs;
    struct sim_tenant_res *tenants;
    int32_t n_tenants;
};

struct sim_run {
    struct sim_result *res;
    double now;
};

static void on_event(void *ctx, const struct sched_event *ev)
{
    struct sim_run *run = ctx;
    struct sim_req *r = ev->user;
    switch (ev->type) {
    case SCHED_EV_TOKEN:
        if (r->first_tok < 0)
            r->first_tok = run->now;
        r->generated++;
        run->res->out_tokens++;
        break;
    case SCHED_EV_DONE:
        r->done_at = run->now;
        run->res->finished++;
        break;
    case SCHED_EV_PREEMPTED:
        r->preempts++;
        break;
    default:
        break;
    }
}

static int tenant_index(const struct sim_result *res, uint32_t id)
{
    for (int i = 0; i < res->n_tenants; i++)
        if (res->tenants[i].id == id)
            return i;
    return -1;
}

static int run_policy(const struct sim_opts *o, const struct sim_trace *t, bool maxlen,
                      struct sim_result *res)
{
    memset(res, 0, sizeof(*res));
    res->policy = maxlen ? "maxlen" : "paged";
    res->n_req = t->n;
    res->reqs = folio_calloc((size_t)t->n, sizeof(*res->reqs));
    /* tenants: those of the spec, then any others the trace names */
    res->tenants = folio_calloc((size_t)t->n + (size_t)o->n_tenants + 1, sizeof(*res->tenants));
    int32_t *prompt = folio_malloc((size_t)o->ctx_len * sizeof(int32_t));
    int32_t *sampled = folio_malloc((size_t)o->max_seqs * sizeof(int32_t));
    if (!res->reqs || !res->tenants || !prompt || !sampled) {
        folio_free(prompt);
        folio_free(sampled);
        return -ENOMEM;
    }
    for (int i = 0; i < o->n_tenants; i++)
        res->tenants[res->n_tenants++] =
            (struct sim_tenant_res){.id = o->tenants[i].id, .weight = o->tenants[i].weight};
    for (int32_t i = 0; i < t->n; i++)
        if (tenant_index(res, t->reqs[i].tenant) < 0)
            res->tenants[res->n_tenants++] =
                (struct sim_tenant_res){.id = t->reqs[i].tenant, .weight = 1.0};

    struct pager_config pc = {.num_blocks = o->kv_blocks,
                              .block_size = o->block_size,
                              .n_layers = 1,
                              .n_kv_heads = 1,
                              .head_dim = 1,
                              .dtype = FOLIO_F32,
                              .no_arena = true};
    pager_t *pg = NULL;
    sched_t *s = NULL;
    int rc = pager_init(&pg, &pc);
    if (rc)
        goto out;
    struct sim_run run = {.res = res};
    struct sched_config sc;
    sched_config_default(&sc);
    sc.max_batch_tokens = o->max_batch_tokens;
    sc.max_seqs = o->max_seqs;
    sc.max_ctx = o->ctx_len;
    sc.watermark_blocks = o->watermark;
    sc.reserve_max_len = maxlen;
    sc.on_event = on_event;
    sc.event_ctx = &run;
    if ((rc = sched_new(&sc, pg, &s)))
        goto out;
    for (int i = 0; i < res->n_tenants; i++) {
        struct sched_tenant_config tc = {.id = res->tenants[i].id,
                                         .weight = res->tenants[i].weight};
        if ((rc = sched_tenant_set(s, &tc)))
            goto out;
    }

    int32_t next = 0;
    double util_w = 0, pool_w = 0, seqs_w = 0;
    double slots_per_seq = (double)FOLIO_DIV_CEIL(o->ctx_len, o->block_size) * o->block_size;
    int64_t live = 0; /* accepted, not done */
    for (;;) {
        while (next < t->n && t->reqs[next].arrival_s <= run.now) {
            const struct sim_trace_req *q = &t->reqs[next];
            struct sim_req *r = &res->reqs[next];
            r->arrival = q->arrival_s;
            r->sched_at = r->first_tok = r->done_at = -1;
            r->tenant = q->tenant;
            res->tenants[tenant_index(res, q->tenant)].n_req++;
            if (q->prompt_len >= o->ctx_len) { /* the daemon answers 400 */
                res->refused++;
                next++;
                continue;
            }
            sim_trace_prompt(t, next, o->syn.seed, o->prefix_len, SIM_VOCAB, prompt);
            struct sched_request_params p = {.prompt = prompt,
                                             .n_prompt = q->prompt_len,
                                             .max_tokens = q->output_len,
                                             .eos_id = -1,
                                             .ignore_eos = true,
                                             .n = 1,
                                             .tenant = q->tenant,
                                             .user = r,
                                             .arrival_ns = (uint64_t)(q->arrival_s * 1e9)};
            uint64_t id;
            int arc = sched_request_add(s, &p, &id);
            if (arc == 0)
                live++;
            else if (arc == -EBUSY || arc == -E2BIG)
                res->refused++;
            else {
                rc = arc;
                goto out;
            }
            next++;
        }
        struct sched_batch b;
        rc = sched_step_plan(s, &b);
        if (rc == -EAGAIN) {
            rc = 0;
            if (next >= t->n) {
                if (live > res->finished) {
                    rc = -EDEADLK; /* nothing can run, yet requests remain */
                    goto out;
                }
                break;
            }
            run.now = FOLIO_MAX(run.now, t->reqs[next].arrival_s);
            continue;
        }
        if (rc)
            goto out;

        /* who is backlogged (for the fairness index) */
        bool all_backlogged = res->n_tenants > 1;
        for (int i = 0; i < res->n_tenants && all_backlogged; i++) {
            struct sched_tenant_stats ts;
            if (sched_tenant_stats_find(s, res->tenants[i].id, &ts) || ts.waiting == 0)
                all_backlogged = false;
        }

        double reads = 0;
        int32_t row = 0;
        for (int32_t k = 0; k < b.mb.n_slices; k++) {
            const struct model_slice *sl = &b.mb.slices[k];
            double n = sl->n_tokens;
            reads += n * sl->first_pos + n * (n + 1) / 2;
            struct sim_req *r = b.info[k].user;
            if (r->sched_at < 0)
                r->sched_at = run.now;
            if (all_backlogged) {
                int ti = tenant_index(res, r->tenant);
                double cost = b.info[k].prefill ? sc.weight_in * n : sc.weight_out * n;
                res->tenants[ti].service_backlogged += cost;
            }
            if (sl->sample)
                sampled[row++] = 1 + (int32_t)((b.info[k].request_id * 2654435761u +
                                                (uint64_t)b.info[k].token_index * 40503u) %
                                               (SIM_VOCAB - 1));
        }
        double dt = o->cost_a + o->cost_b * b.mb.n_tokens + o->cost_c * reads;

        struct pager_stats ps;
        pager_stats_get(pg, &ps);
        struct sched_stats st;
        sched_stats_get(s, &st);
        double util;
        if (maxlen)
            util = st.running_seqs ? (double)ps.tokens_held / (st.running_seqs * slots_per_seq) : 0;
        else
            util = ps.blocks_used
                       ? 1.0 - (double)ps.slots_empty / ((double)ps.blocks_used * o->block_size)
                       : 0;
        double pool = maxlen
                          ? st.running_seqs * slots_per_seq / ((double)o->kv_blocks * o->block_size)
                          : (double)ps.blocks_used / o->kv_blocks;
        util_w += util * dt;
        pool_w += pool * dt;
        seqs_w += st.running_seqs * dt;
        res->util_peak = FOLIO_MAX(res->util_peak, util);
        res->seqs_peak = FOLIO_MAX(res->seqs_peak, st.running_seqs);
        res->busy += dt;
        res->steps++;
        run.now += dt;
        if ((rc = sched_step_commit(s, sampled, row)))
            goto out;
    }
    res->makespan = run.now - (t->n ? t->reqs[0].arrival_s : 0);
    if (res->busy > 0) {
        res->util_avg = util_w / res->busy;
        res->pool_avg = pool_w / res->busy;
        res->seqs_avg = seqs_w / res->busy;
    }
    struct sched_stats st;
    sched_stats_get(s, &st);
    res->preemptions = st.preemptions;
    for (int i = 0; i < res->n_tenants; i++) {
        struct sched_tenant_stats ts;
        if (!sched_tenant_stats_find(s, res->tenants[i].id, &ts)) {
            res->tenants[i].out_tokens = ts.generated_tokens;
            res->tenants[i].preemptions = ts.preemptions;
        }
    }
    /* Jain's index of service / weight over the all-backlogged time */
    double sum = 0, sq = 0;
    for (int i = 0; i < res->n_tenants; i++) {
        double x = res->tenants[i].service_backlogged / res->tenants[i].weight;
        sum += x;
        sq += x * x;
    }
    if (sq > 0) {
        res->jain = sum * sum / (res->n_tenants * sq);
        res->jain_valid = true;
    }
out:
    sched_free(s);
    pager_free(pg);
    folio_free(prompt);
    folio_free(sampled);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct pct {
    double mean, p50, p90, p99;
    int32_t n;
};

/* kind: 0 queue, 1 ttft, 2 e2e; tenant UINT32_MAX = all */
static struct pct percentiles(const struct sim_result *res, int kind, uint32_t tenant)
{
    struct pct p = {0};
    double *v = folio_malloc((size_t)(res->n_req ? res->n_req : 1) * sizeof(double));
    if (!v)
        return p;
    for (int32_t i = 0; i < res->n_req; i++) {
        const struct sim_req *r = &res->reqs[i];
        if (r->done_at < 0 || (tenant != UINT32_MAX && r->tenant != tenant))
            continue;
        double x = kind == 0 ? r->sched_at : kind == 1 ? r->first_tok : r->done_at;
        v[p.n++] = x - r->arrival;
    }
    if (p.n) {
        qsort(v, (size_t)p.n, sizeof(double), cmp_double);
        double sum = 0;
        for (int32_t i = 0; i < p.n; i++)
            sum += v[i];
        p.mean = sum / p.n;
        p.p50 = v[(int32_t)(0.50 * (p.n - 1))];
        p.p90 = v[(int32_t)(0.90 * (p.n - 1))];
        p.p99 = v[(int32_t)(0.99 * (p.n - 1))];
    }
    folio_free(v);
    return p;
}

static void print_result(const struct sim_result *r, FILE *out)
{
    fprintf(out, "policy %s: %d requests (%d finished, %d refused), %lld steps, makespan %.2f s\n",
            r->policy, r->n_req, r->finished, r->refused, (long long)r->steps, r->makespan);
    fprintf(out,
            "  KV slots holding real tokens: avg %.2f%%  peak %.2f%%   pool in use: avg %.1f%%\n",
            100 * r->util_avg, 100 * r->util_peak, 100 * r->pool_avg);
    fprintf(out, "  concurrent sequences: avg %.1f  peak %d   preemptions: %lld\n", r->seqs_avg,
            r->seqs_peak, (long long)r->preemptions);
    fprintf(out, "  throughput: %.2f req/s  %.1f output tok/s\n",
            r->makespan > 0 ? r->finished / r->makespan : 0,
            r->makespan > 0 ? r->out_tokens / r->makespan : 0);
    static const char *names[] = {"queue", "ttft", "e2e"};
    for (int k = 0; k < 3; k++) {
        struct pct p = percentiles(r, k, UINT32_MAX);
        fprintf(out, "  %-5s s: mean %.3f  p50 %.3f  p90 %.3f  p99 %.3f\n", names[k], p.mean, p.p50,
                p.p90, p.p99);
    }
    if (r->n_tenants > 1) {
        fprintf(out,
                "  tenant weight  reqs  out_tok  share*  queue_p50 queue_p99  ttft_p50  ttft_p99  "
                "preempt\n");
        double tot = 0;
        for (int i = 0; i < r->n_tenants; i++)
            tot += r->tenants[i].service_backlogged;
        for (int i = 0; i < r->n_tenants; i++) {
            const struct sim_tenant_res *t = &r->tenants[i];
            struct pct q = percentiles(r, 0, t->id), f = percentiles(r, 1, t->id);
            fprintf(out, "  %6u %6.2f %5d %8lld  %5.1f%%  %9.3f %9.3f %9.3f %9.3f %8lld\n", t->id,
                    t->weight, t->n_req, (long long)t->out_tokens,
                    tot > 0 ? 100 * t->service_backlogged / tot : 0, q.p50, q.p99, f.p50, f.p99,
                    (long long)t->preemptions);
        }
        if (r->jain_valid)
            fprintf(out,
                    "  (*) service share while every tenant was backlogged; Jain's index of "
                    "service/weight: %.4f\n",
                    r->jain);
        else
            fprintf(out, "  (*) never were all tenants backlogged at once\n");
    }
}

static void json_pct(FILE *f, const char *name, struct pct p)
{
    fprintf(f, "\"%s\": {\"mean\": %.6f, \"p50\": %.6f, \"p90\": %.6f, \"p99\": %.6f}", name,
            p.mean, p.p50, p.p90, p.p99);
}

static void json_result(FILE *f, const struct sim_result *r)
{
    fprintf(f,
            "{\"policy\": \"%s\", \"requests\": %d, \"finished\": %d, \"refused\": %d, "
            "\"steps\": %lld, \"makespan_s\": %.6f, \"kv_real_token_frac_avg\": %.6f, "
            "\"kv_real_token_frac_peak\": %.6f, \"pool_in_use_avg\": %.6f, "
            "\"concurrent_seqs_avg\": %.3f, \"concurrent_seqs_peak\": %d, \"preemptions\": %lld, "
            "\"throughput_req_s\": %.6f, \"throughput_out_tok_s\": %.3f, ",
            r->policy, r->n_req, r->finished, r->refused, (long long)r->steps, r->makespan,
            r->util_avg, r->util_peak, r->pool_avg, r->seqs_avg, r->seqs_peak,
            (long long)r->preemptions, r->makespan > 0 ? r->finished / r->makespan : 0,
            r->makespan > 0 ? r->out_tokens / r->makespan : 0);
    json_pct(f, "queue_s", percentiles(r, 0, UINT32_MAX));
    fprintf(f, ", ");
    json_pct(f, "ttft_s", percentiles(r, 1, UINT32_MAX));
    fprintf(f, ", ");
    json_pct(f, "e2e_s", percentiles(r, 2, UINT32_MAX));
    if (r->jain_valid)
        fprintf(f, ", \"jain_backlogged\": %.6f", r->jain);
    else
        fprintf(f, ", \"jain_backlogged\": null");
    fprintf(f, ", \"tenants\": [");
    for (int i = 0; i < r->n_tenants; i++) {
        const struct sim_tenant_res *t = &r->tenants[i];
        fprintf(f,
                "%s{\"id\": %u, \"weight\": %.6f, \"requests\": %d, \"out_tokens\": %lld, "
                "\"service_backlogged\": %.1f, \"preemptions\": %lld, ",
                i ? ", " : "", t->id, t->weight, t->n_req, (long long)t->out_tokens,
                t->service_backlogged, (long long)t->preemptions);
        json_pct(f, "queue_s", percentiles(r, 0, t->id));
        fprintf(f, ", ");
        json_pct(f, "ttft_s", percentiles(r, 1, t->id));
        fprintf(f, ", ");
        json_pct(f, "e2e_s", percentiles(r, 2, t->id));
        fprintf(f, "}");
    }
    fprintf(f, "]}");
}

static void usage(FILE *out)
{
    fprintf(out, "usage: folio sim (--trace FILE | --synthetic) [options]\n"
                 "  Runs the real scheduler and pager (no KV memory) against a trace with a\n"
                 "  fake step (cost model) and reports memory use, concurrency, latency and\n"
                 "  fairness.  Trace format: lines 'arrival_s tenant prompt_len output_len\n"
                 "  prefix_id' (prefix_id -1 = none); see tools/sim_trace.h.\n"
                 "synthetic trace:\n"
                 "  --arrival poisson|bursty   arrival process (default poisson)\n"
                 "  --rate R                   requests per second (default 10)\n"
                 "  --cv X                     bursty: gap coefficient of variation (default 3)\n"
                 "  --num N                    requests (default 1000)\n"
                 "  --seed S                   (default 1)\n"
                 "  --tenants ID[:W[:SHARE]],...  tenants, weights, request shares (shares:\n"
                 "                             --synthetic only; default one tenant, 0)\n"
                 "  --prefixes K               shared prefixes (half the requests use one)\n"
                 "  --prefix-len L             shared prefix tokens (default 128)\n"
                 "  --in-mean M --out-mean M   lognormal means (default 200, 250)\n"
                 "  --write-trace FILE         also write the trace used\n"
                 "pool and scheduler:\n"
                 "  --kv-blocks N --block-size B --max-batch-tokens T --max-seqs S\n"
                 "  --ctx-len L                context length (default 2048)\n"
                 "  --watermark N              admission watermark blocks (default 1%%)\n"
                 "  --policy paged|maxlen|both (default paged)\n"
                 "  --cost a,b,c               step seconds = a + b*tokens + c*context reads\n"
                 "                             (default 0.005,5e-5,2e-8)\n"
                 "  --json FILE                results as JSON\n");
}

/* The options into *o (o->tenants is the caller's to free, whatever the
 * outcome).  Returns -1 to go on, else the exit status (0 after --help, 2
 * for a bad command line). */
static int parse_opts(int argc, char **argv, struct sim_opts *o)
{
    *o = (struct sim_opts){
        .syn = {.num = 1000, .rate = 10, .seed = 1, .in_mean = 200, .out_mean = 250, .sigma = 1.0},
        .kv_blocks = 4096,
        .block_size = 16,
        .max_batch_tokens = 2048,
        .max_seqs = 256,
        .ctx_len = 2048,
        .prefix_len = 128,
        .watermark = -1,
        .policy = "paged",
        .cost_a = 0.005,
        .cost_b = 5e-5,
        .cost_c = 2e-8,
    };
    static const struct option longopts[] = {
        {"trace", required_argument, 0, 't'},
        {"synthetic", no_argument, 0, 'S'},
        {"arrival", required_argument, 0, 'A'},
        {"rate", required_argument, 0, 'r'},
        {"cv", required_argument, 0, 'v'},
        {"num", required_argument, 0, 'n'},
        {"seed", required_argument, 0, 's'},
        {"tenants", required_argument, 0, 'T'},
        {"prefixes", required_argument, 0, 'p'},
        {"prefix-len", required_argument, 0, 'P'},
        {"in-mean", required_argument, 0, 'i'},
        {"out-mean", required_argument, 0, 'o'},
        {"write-trace", required_argument, 0, 'W'},
        {"kv-blocks", required_argument, 0, 'k'},
        {"block-size", required_argument, 0, 'b'},
        {"max-batch-tokens", required_argument, 0, 'B'},
        {"max-seqs", required_argument, 0, 'm'},
        {"ctx-len", required_argument, 0, 'c'},
        {"watermark", required_argument, 0, 'w'},
        {"policy", required_argument, 0, 'y'},
        {"cost", required_argument, 0, 'C'},
        {"json", required_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 't':
            o->trace_path = optarg;
            break;
        case 'S':
            o->synthetic = true;
            break;
        case 'A':
            if (!strcmp(optarg, "bursty"))
                o->syn.bursty = true;
            else if (strcmp(optarg, "poisson")) {
                fprintf(stderr, "folio sim: --arrival poisson|bursty\n");
                return 2;
            }
            break;
        case 'r':
            o->syn.rate = atof(optarg);
            break;
        case 'v':
            o->syn.cv = atof(optarg);
            break;
        case 'n':
            o->syn.num = atoi(optarg);
            break;
        case 's':
            o->syn.seed = strtoull(optarg, NULL, 10);
            break;
        case 'T':
            folio_free(o->tenants);
            o->tenants = NULL;
            if (sim_tenants_parse(optarg, &o->tenants, &o->n_tenants)) {
                fprintf(stderr, "folio sim: bad --tenants '%s' (ID[:WEIGHT[:SHARE]],...)\n",
                        optarg);
                return 2;
            }
            break;
        case 'p':
            o->syn.prefixes = atoi(optarg);
            break;
        case 'P':
            o->prefix_len = atoi(optarg);
            break;
        case 'i':
            o->syn.in_mean = atof(optarg);
            break;
        case 'o':
            o->syn.out_mean = atof(optarg);
            break;
        case 'W':
            o->write_trace = optarg;
            break;
        case 'k':
            o->kv_blocks = atoi(optarg);
            break;
        case 'b':
            o->block_size = atoi(optarg);
            break;
        case 'B':
            o->max_batch_tokens = atoi(optarg);
            break;
        case 'm':
            o->max_seqs = atoi(optarg);
            break;
        case 'c':
            o->ctx_len = atoi(optarg);
            break;
        case 'w':
            o->watermark = atoi(optarg);
            break;
        case 'y':
            o->policy = optarg;
            break;
        case 'C':
            if (sscanf(optarg, "%lf,%lf,%lf", &o->cost_a, &o->cost_b, &o->cost_c) != 3) {
                fprintf(stderr, "folio sim: --cost a,b,c\n");
                return 2;
            }
            break;
        case 'j':
            o->json_path = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    o->do_paged = !strcmp(o->policy, "paged") || !strcmp(o->policy, "both");
    o->do_maxlen = !strcmp(o->policy, "maxlen") || !strcmp(o->policy, "both");
    if ((!o->trace_path) == (!o->synthetic) || (!o->do_paged && !o->do_maxlen) ||
        o->kv_blocks < 1 || o->block_size < 1 || o->max_seqs < 1 ||
        o->max_batch_tokens < o->max_seqs || o->ctx_len < 2 || o->syn.num < 1 || o->syn.rate <= 0 ||
        o->prefix_len < 0) {
        usage(stderr);
        return 2;
    }
    return -1;
}

/* The trace: loaded from --trace or synthesised, and written to
 * --write-trace if asked.  Returns 0, or 1 after saying why. */
static int make_trace(struct sim_opts *o, struct sim_trace *t)
{
    char err[256];
    int rc;
    if (o->trace_path) {
        rc = sim_trace_load(o->trace_path, t, err, sizeof(err));
        if (rc) {
            fprintf(stderr, "folio sim: %s\n", err);
            return 1;
        }
    } else {
        o->syn.ctx_len = o->ctx_len;
        o->syn.tenants = o->tenants;
        o->syn.n_tenants = o->n_tenants;
        if ((rc = sim_trace_synth(&o->syn, t))) {
            fprintf(stderr, "folio sim: cannot make a trace: %s\n", strerror(-rc));
            return 1;
        }
    }
    if (o->write_trace) {
        FILE *f = fopen(o->write_trace, "w");
        if (!f || sim_trace_write(t, f) || fclose(f)) {
            fprintf(stderr, "folio sim: cannot write %s\n", o->write_trace);
            sim_trace_free(t);
            return 1;
        }
    }
    return 0;
}

/* --json: the pool's settings and every policy's result.  Returns 0, or 1
 * after saying why. */
static int write_json(const char *path, const struct sim_opts *o, const struct sim_trace *t,
                      const struct sim_result *res, int nres)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "folio sim: cannot write %s\n", path);
        return 1;
    }
    fprintf(f,
            "{\"requests\": %d, \"kv_blocks\": %d, \"block_size\": %d, \"max_seqs\": %d, "
            "\"max_batch_tokens\": %d, \"ctx_len\": %d, \"results\": [",
            t->n, o->kv_blocks, o->block_size, o->max_seqs, o->max_batch_tokens, o->ctx_len);
    for (int k = 0; k < nres; k++) {
        if (k)
            fprintf(f, ", ");
        json_result(f, &res[k]);
    }
    fprintf(f, "]}\n");
    if (fclose(f)) {
        fprintf(stderr, "folio sim: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

int cmd_sim(int argc, char **argv)
{
    struct sim_opts o;
    int rc = parse_opts(argc, argv, &o);
    struct sim_trace t;
    if (rc < 0 && make_trace(&o, &t))
        rc = 1;
    if (rc >= 0) {
        folio_free(o.tenants);
        return rc;
    }
    int64_t in = 0, outl = 0;
    for (int32_t i = 0; i < t.n; i++) {
        in += t.reqs[i].prompt_len;
        outl += t.reqs[i].output_len;
    }
    printf("trace: %d requests, mean prompt %.1f, mean output %.1f, over %.2f s\n", t.n,
           (double)in / t.n, (double)outl / t.n, t.reqs[t.n - 1].arrival_s);
    printf("pool: %d blocks x %d slots, max %d seqs, %d batch tokens, ctx %d\n", o.kv_blocks,
           o.block_size, o.max_seqs, o.max_batch_tokens, o.ctx_len);

    struct sim_result res[2];
    int nres = 0, status = 0;
    for (int k = 0; k < 2; k++) {
        bool maxlen = k == 1;
        if ((maxlen && !o.do_maxlen) || (!maxlen && !o.do_paged))
            continue;
        rc = run_policy(&o, &t, maxlen, &res[nres]);
        if (rc) {
            fprintf(stderr, "folio sim: %s policy failed: %s\n", maxlen ? "maxlen" : "paged",
                    strerror(-rc));
            status = 1;
            folio_free(res[nres].reqs);
            folio_free(res[nres].tenants);
            continue;
        }
        print_result(&res[nres], stdout);
        if (res[nres].finished + res[nres].refused != t.n) {
            fprintf(stderr, "folio sim: %s: %d requests neither finished nor refused\n",
                    res[nres].policy, t.n - res[nres].finished - res[nres].refused);
            status = 1;
        }
        nres++;
    }
    if (nres == 2 && res[1].seqs_avg > 0)
        printf("paged / maxlen: concurrent sequences %.2fx (avg), %.2fx (peak); throughput %.2fx\n",
               res[0].seqs_avg / res[1].seqs_avg,
               res[1].seqs_peak ? (double)res[0].seqs_peak / res[1].seqs_peak : 0,
               res[1].makespan > 0 && res[0].makespan > 0 ? res[1].makespan / res[0].makespan : 0);
    if (o.json_path && write_json(o.json_path, &o, &t, res, nres))
        status = 1;
    for (int k = 0; k < nres; k++) {
        folio_free(res[k].reqs);
        folio_free(res[k].tenants);
    }
    sim_trace_free(&t);
    folio_free(o.tenants);
    return status;
}
