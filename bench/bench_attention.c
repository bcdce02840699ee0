/*
 * bench/bench_attention.c — paged attention kernel figures for
 * BENCHMARKS.md ("Paged attention").
 *
 *   bench_attention [--threads N] [--reps N] [--isa NAME] [--quick] [--cputime] [--4k] [--run N]
 *                   [--layers L] [--rotate] [--block-major | --layer-major | --head-major]
 *                   [--replay] [--res SEQS,CTX] [--ab]
 *
 * --ab (a build with meson -Dattn_ab=true, AVX-512): kernel B, the kernel
 * built again with attention/attn_kern_ab.h's switches (attn_ab_select),
 * runs beside the kernel in (b), as one more job of each round, in (d),
 * each round every table set once under each kernel, and in (c) and (e),
 * five rounds of each in turn; printed: B's speed over A's, the median of the
 * per-round ratios.  Both run in one
 * process on one arena, so where the arena's pages landed, which moves a
 * decode's rate from one process to the next by more than most changes
 * do, is the same for both (attn_kern_ab.h).
 *
 * --run N shuffles the page tables in runs of N consecutive block ids (the
 * kernel still meets a block boundary every block_size keys, but memory
 * jumps only every N blocks).  --only NAME runs just the (a) case of that name, or every case whose
 * name begins so (and --dtype just one type), for profiling; --only read runs (b) alone, --only
 * fresh (c), --only cache (e), --only pages (f).  --cputime times by process CPU time / threads
 * instead of wall time: on a machine shared with other jobs it leaves out time spent descheduled
 * (useful for comparing kernel variants; the figures to publish are wall).
 *
 * The K/V arenas are mapped as the pager maps its own (pager.c,
 * folio_region_alloc with FOLIO_REGION_HUGE): 2 MiB aligned and advised
 * MADV_HUGEPAGE before the first touch, so they sit on transparent huge
 * pages where the kernel grants them; the last line says how much of the
 * arenas did.  --4k allocates them from the heap on 4 KiB pages instead,
 * as this bench did before (and --huge, the old switch for the default,
 * is still taken).  On the Zen 3 VM, 16 alternated rounds of (b): 2-5
 * points more of the streaming read on huge pages for every dtype.
 *
 * (a) paged vs contiguous: the same kernel on the same K/V values, once
 *     through page tables of shuffled block ids, once through an identity
 *     table (block ids in order: every sequence's blocks one ascending run
 *     of memory), and once "whole": a view whose block_size covers the
 *     sequence, so each (sequence, head) K or V is one contiguous
 *     [ctx][head_dim] buffer — a dense, unpaged KV cache.  The kernel walks
 *     the same chunks of keys in all three (a chunk's rows come through a
 *     table of row pointers, whether or not it crosses a block), so they
 *     run the same instructions and differ only in where the bytes are.  Each round runs
 *     the three layouts once, back to back, in an order rotated from round
 *     to round; printed: the median time of each layout, and the medians
 *     over rounds of the speed ratios shuffled / identity and shuffled /
 *     whole taken within each round (the machine's bandwidth drifts between
 *     rounds; a ratio within a round shares it), then the same two ratios
 *     of best times; for decode cases also the shuffled / identity ratio of
 *     touch+pf (see (b)) in the same rounds: what the two access patterns
 *     allow with no arithmetic.
 * (b) decode: 32 sequences x 4096 context, the small model's geometry (12
 *     heads, 4 KV heads, head_dim 64, block 16), f32, f16, bf16 and q8:
 *     GB/s of K/V bytes (q8: values and row scales) read against this machine's read bandwidth,
 * measured by a streaming sum over 512 MiB with the same number of threads; and beside each,
 * "touch": the same lines read in about the kernel's order (its split of sequences over threads,
 * 32-key chunks (the kernel's until it took 64), per chunk KV head by KV head, K rows then V
 * rows) with one load per line and no arithmetic, without and with a prefetch of the rows two
 * chunks ahead (the kernel's until its
 * prefetch moved nearer, PF_STREAM and PF_STEPS in attn_kern_body.h; kept, so the figures of
 * every session compare) — the rate this access pattern allows on the machine, which the
 * kernel's rate is held against.  They run in
 * rounds (decode_rounds): each round one kernel call, one touch and one touch+pf, in an order
 * rotated from round to round, each right after a streaming pass (before the nineteenth
 * session's figures touch+pf ran after touch instead: faster, decode_rounds says why), and the
 * percentages are medians of the per-round rate ratios, since the VM's read bandwidth drifts by
 * up to 2x within minutes; the line
 * also gives the streaming read's best pass and the kernel's median rate against that. (c)
 * prefill: one 512-token fresh prompt, same geometry: GFLOP/s counting 2 * head_dim flops for each
 * q.k and each p*v over the causal triangle.  (b) also gives the time per (key, KV head) per
 * thread, and (e) the same for a decode batch small enough to stay in L2 (2 x 128: 512 KB of
 * K/V at f32; one thread, best of --reps runs of 400 back to back): what the kernel's arithmetic
 * costs with no memory stalls, so (b) against (e) says whether decode waits on memory or on the
 * arithmetic.  (BENCHMARKS.md's (e) figures before its sixth AVX-512 section are of 8 x 256: 2 MB
 * at f32, in L3 on a 1 MB L2.)  --res SEQS,CTX gives (e) another batch: 1,1024 (q8 557 KB, f16
 * 1 MB) has each sequence's setup (its query tile, results) over 8x the keys, so what remains is
 * the per-chunk and per-key cost.
 *
 * (d) --replay (only this): decode 32 x 4096, block 16, over page tables
 *     the real pager produced: replay_tables runs a serving pattern (64
 *     sequences admitted, grown token by token, retired at random lengths,
 *     preempted when the pool is full) until the pool is warm, then grows
 *     the measured sequences among the others, once with the LIFO free
 *     list and once with the locality policy, each with and without the
 *     prefix cache; the four table sets index one shared arena and run in
 *     rotated rounds with the identity and whole layouts.  Printed: mean
 *     run of consecutive ids, evictions, median times, and speed against
 *     whole (median of per-round ratios); the read rate of the median time
 *     against the streaming read at the start (%rd), and in rounds of their
 *     own, each call right after a streaming read against that read (%st:
 *     median of per-round ratios, (b)'s measure, robust to the machine's
 *     bandwidth drifting over a run).
 * (f) --only pages: what a page jump costs on this machine, apart from any
 *     kernel: --threads threads read 4 KiB runs in address order and
 *     shuffled, under four prefetch schemes (run_pages).
 *
 * The paged arenas are laid out as the pager's (layer-major, K and V
 * apart: per (layer, K|V) a run of num_blocks blocks of n_kv_heads tiles,
 * so a run of consecutive block ids is one run of K and one of V per
 * layer).  For comparison: --block-major lays them out block by block
 * (one block's tiles side by side, the pager's layout before), --layer-major
 * layer by layer with each block's K and V together (block_stride one
 * layer's K and V, layer_stride num_blocks times that), --head-major by
 * (layer, K|V, KV head), each a run of num_blocks tiles.
 *
 * --layers L gives the paged arenas of (a) and (d) L layers (layer 0 is
 * read): block-major, consecutive ids are then L layers apart in memory;
 * in any layout a batch's K/V are spread over L times the bytes it reads,
 * as in a model (decode 64 x 128 with --layers 12 is bench_model's decode
 * 64 on small, one layer of it).
 * --rotate (with --layers L) fills every layer and has each timed call
 * read the next one, as a model step does: a layer is read again only
 * after the other L - 1, so with L x the batch's bytes beyond the last
 * level cache it comes from memory (without it, decode 64 x 128 reads the
 * same 4-17 MB every call, from L3); the whole layout then has L layers
 * too (each (sequence, layer, head) still one [ctx][head_dim] run).
 *
 * Threads are pthreads driving the phases with a barrier, as the model's
 * pool does.  (a) runs --reps rounds after a warm-up round; (b) and (c)
 * print the median of --reps runs after one warm-up, best in brackets.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "folio/attention.h"

static uint64_t rng_s = 42;
static int use_huge = 1; /* K/V arenas on transparent huge pages, as the pager's (--4k: not) */
static size_t huge_kb, arena_kb; /* of the arenas mapped so far: on 2 MiB pages, in all */
static int32_t shuffle_run = 1;  /* --run N: shuffle runs of N consecutive block ids */
static int rotate;               /* --rotate: each timed call reads the next layer */
enum arena_order { ARENA_PAGER, ARENA_BLOCK, ARENA_LAYER, ARENA_HEAD };
static enum arena_order arena_order; /* the pager's, --block-major, --layer-major, --head-major */
static const char *const arena_names[] = {"layer-major, K and V apart (the pager's)", "block-major",
                                          "layer-major", "head-major"};

static const enum folio_dtype dtypes[] = {FOLIO_F32, FOLIO_F16, FOLIO_BF16, FOLIO_Q8};
#define N_DTYPES ((int)(sizeof(dtypes) / sizeof(dtypes[0])))

static float rnd(void)
{
    rng_s = rng_s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_s >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

/* v[0..n) in a random order (Fisher-Yates over rnd) */
static void shuffle_ids(int32_t *v, int32_t n)
{
    for (int32_t i = n - 1; i > 0; i--) {
        const int32_t j = (int32_t)((uint32_t)(rnd() * 1e6f + 1e6f) % (uint32_t)(i + 1));
        const int32_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

/* ---- a batch over one of three layouts --------------------------------- */

enum layout { LAYOUT_SHUFFLED, LAYOUT_IDENTITY, LAYOUT_WHOLE, LAYOUT_GIVEN };

struct setup {
    int32_t n_seqs, ctx, n_q; /* every slice: p0 = ctx - n_q */
    int32_t n_heads, n_kv, hd, bs;
    enum folio_dtype dt;
    enum layout layout;
    /* LAYOUT_GIVEN: the page tables ([n_seqs][ctx / bs] ids below
     * given_blocks), and optionally an arena of given_blocks blocks to share
     * (not freed by setup_free) */
    const int32_t *given;
    int32_t given_blocks;
    void *shared_base;
    int32_t n_layers; /* layers of the arena (0 = 1; whole: 1 unless --rotate); layer 0 is
                         read (--rotate: each call the next) */
    struct pager_kv_view kv;
    size_t region; /* bytes of the arena's folio_region_alloc (--4k: 0) */
    struct attn_seq *seqs;
    int32_t *tables;
    float *q, *out;
    struct attn_batch b;
};

/* Adds to huge_kb / arena_kb the AnonHugePages of the mappings that lie
 * within [p, p + len), from /proc/self/smaps (where it can be read), and
 * len.  A mapping the kernel merged with a neighbour reaches outside and
 * is not counted, so the share printed is never more than what is. */
static void count_huge(const void *p, size_t len)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const uintptr_t lo = (uintptr_t)p, hi = lo + (len + page - 1) / page * page;
    char line[256];
    int in = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        size_t kb;
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2) /* a mapping's first line */
            in = a >= lo && b <= hi;
        else if (in && sscanf(line, "AnonHugePages: %zu kB", &kb) == 1)
            huge_kb += kb;
    }
    fclose(f);
    arena_kb += len / 1024;
}

/* The share of the arenas on huge pages, printed as the bench ends. */
static void print_huge(void)
{
    if (use_huge && arena_kb)
        printf("\nK/V arenas on 2 MiB pages: %.1f of %.1f MB (%.0f%%; --4k: 4 KiB pages)\n",
               (double)huge_kb / 1024, (double)arena_kb / 1024,
               100.0 * (double)huge_kb / (double)arena_kb);
    else if (!use_huge)
        printf("\nK/V arenas on 4 KiB pages (--4k)\n");
}

static void setup_build(struct setup *st)
{
    const int32_t bs = st->layout == LAYOUT_WHOLE ? st->ctx : st->bs;
    const int32_t nb_seq = (st->ctx + bs - 1) / bs;
    const int32_t nb = st->layout == LAYOUT_GIVEN ? st->given_blocks : nb_seq * st->n_seqs;
    struct pager_kv_view *kv = &st->kv;
    kv->dtype = st->dt;
    kv->num_blocks = nb;
    kv->block_size = bs;
    const int32_t nl =
        (st->layout == LAYOUT_WHOLE && !rotate) || st->n_layers < 1 ? 1 : st->n_layers;
    kv->n_layers = nl;
    kv->n_kv_heads = st->n_kv;
    kv->head_dim = st->hd;
    kv->head_stride = pager_kv_tile_elems(st->dt, bs, st->hd);
    kv->v_offset = (size_t)st->n_kv * kv->head_stride;
    kv->layer_stride = 2 * kv->v_offset;
    kv->block_stride = (size_t)nl * kv->layer_stride; /* block-major */
    const size_t n_elem = (size_t)nb * kv->block_stride;
    if (arena_order == ARENA_LAYER) {
        kv->block_stride = kv->layer_stride;
        kv->layer_stride = (size_t)nb * kv->block_stride;
    } else if (arena_order == ARENA_PAGER) { /* as pager_kv_layout */
        kv->block_stride = kv->v_offset;
        kv->v_offset = (size_t)nb * kv->block_stride;
        kv->layer_stride = 2 * kv->v_offset;
    } else if (arena_order == ARENA_HEAD) {
        kv->block_stride = kv->head_stride;
        kv->head_stride = (size_t)nb * kv->block_stride;
        kv->v_offset = (size_t)st->n_kv * kv->head_stride;
        kv->layer_stride = 2 * kv->v_offset;
    }
    const size_t esz = folio_dtype_size(st->dt);
    st->region = 0;
    if (st->shared_base) {
        kv->base = st->shared_base;
    } else if (use_huge) {
        /* the pager's own allocation: a mapping advised before its first
         * touch (memory from the heap may already be faulted in as 4 KiB
         * pages, which an advice after the fact leaves as they are) */
        st->region = n_elem * esz;
        kv->base = folio_region_alloc(st->region, FOLIO_REGION_HUGE);
    } else {
        kv->base = folio_aligned_alloc(64, n_elem * esz);
    }
    st->tables = folio_malloc(sizeof(int32_t) * (size_t)nb);
    st->seqs = folio_malloc(sizeof(struct attn_seq) * (size_t)st->n_seqs);
    if (!kv->base || !st->tables || !st->seqs) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    float row[512];
    const int32_t nl_fill = rotate ? nl : 1; /* the layers read */
    for (int32_t blk = 0; blk < nb && !st->shared_base; blk++)
        for (int32_t layer = 0; layer < nl_fill; layer++)
            for (int kvsel = 0; kvsel < 2; kvsel++)
                for (int32_t h = 0; h < st->n_kv; h++)
                    for (int32_t slot = 0; slot < bs; slot++) {
                        for (int32_t e = 0; e < st->hd; e++)
                            row[e] = rnd();
                        pager_kv_row_put(kv, blk, layer, kvsel, h, slot, row);
                    }
    if (st->region && kv->base)
        count_huge(kv->base, st->region);
    for (int32_t i = 0; i < nb; i++)
        st->tables[i] = i;
    if (st->layout == LAYOUT_GIVEN)
        memcpy(st->tables, st->given, sizeof(int32_t) * (size_t)nb_seq * (size_t)st->n_seqs);
    if (st->layout == LAYOUT_SHUFFLED) { /* units of shuffle_run ids, shuffled */
        const int32_t run = nb % shuffle_run == 0 ? shuffle_run : 1, nu = nb / run;
        shuffle_ids(st->tables, nu);
        for (int32_t i = nb - 1; i >= 0; i--)
            st->tables[i] = st->tables[i / run] * run + i % run;
    }
    for (int32_t s = 0; s < st->n_seqs; s++)
        st->seqs[s] = (struct attn_seq){.q_row = s * st->n_q,
                                        .n_q = st->n_q,
                                        .p0 = st->ctx - st->n_q,
                                        .block_table = st->tables + (size_t)s * nb_seq};
    const size_t nq = (size_t)st->n_seqs * st->n_q * st->n_heads * st->hd;
    st->q = folio_malloc(sizeof(float) * nq);
    st->out = folio_malloc(sizeof(float) * nq);
    for (size_t i = 0; i < nq; i++)
        st->q[i] = rnd();
    st->b = (struct attn_batch){.kv = kv,
                                .layer = 0,
                                .n_heads = st->n_heads,
                                .scale = 1.0f / sqrtf((float)st->hd),
                                .n_seqs = st->n_seqs,
                                .seqs = st->seqs,
                                .n_rows = st->n_seqs * st->n_q,
                                .q = st->q,
                                .out = st->out};
}

static void setup_free(struct setup *st)
{
    if (st->region)
        folio_region_free(st->kv.base, st->region);
    else if (!st->shared_base)
        folio_free(st->kv.base);
    folio_free(st->tables);
    folio_free(st->seqs);
    folio_free(st->q);
    folio_free(st->out);
}

/* ---- a tiny thread team ------------------------------------------------ */

enum job { JOB_ATTN, JOB_SUM, JOB_TOUCH, JOB_PAGES, JOB_QUIT };

struct team {
    int nth;
    pthread_t tid[64];
    pthread_barrier_t bar;
    enum job job;
    const struct attn_batch *b;
    void *work;
    const float *buf;
    size_t buf_n;
    double sums[64];
    const struct setup *touch; /* JOB_TOUCH's batch */
    int touch_pf;              /* JOB_TOUCH: prefetch two chunks ahead */
    const char *pg_arena;      /* JOB_PAGES: pages_pass's arguments */
    const int32_t *pg_tab;
    int32_t pg_nr;
    int pg_scheme;
};

static struct team team;

/* The line at p (one load), and each following line to p + n. */
static float touch_run(const char *p, size_t n)
{
    float acc = 0;
    for (size_t off = 0; off < n; off += 64)
        acc += *(const volatile float *)(const void *)(p + off);
    return acc;
}

/* The K tile of KV head j in the block holding position k of table tab
 * (V: v_offset further): row k is at (k % block_size) rows in. */
static const char *touch_tile(const struct pager_kv_view *kv, const int32_t *tab, int32_t k,
                              int32_t j)
{
    const size_t esz = folio_dtype_size(kv->dtype);
    return (const char *)kv->base +
           ((size_t)tab[k / kv->block_size] * kv->block_stride + (size_t)j * kv->head_stride) * esz;
}

/* Touch: the bytes a decode batch's kernel reads, in its order, with no
 * arithmetic: this thread's share of the sequences (the kernel's plan cuts
 * equal pieces into equal runs), each walked in chunks of ATTN_TOUCH_KC
 * keys, and per chunk, KV head by KV head, the K rows then the V rows (q8:
 * then their scales), one load per 64-byte line.  touch_pf: also prefetch
 * the rows two chunks ahead, as the kernel did before its prefetch moved
 * nearer (PF_STREAM, PF_STEPS in attn_kern_body.h). */
/* the kernel's KC until the twentieth session (64 since): kept, so the
 * touch figures compare with earlier sessions' */
#define ATTN_TOUCH_KC 32
static double touch_job(int ith)
{
    const struct setup *st = team.touch;
    const struct pager_kv_view *kv = &st->kv;
    const size_t esz = folio_dtype_size(kv->dtype);
    const size_t rb = (size_t)st->hd * esz, vb = kv->v_offset * esz;
    const size_t sc_off = (size_t)kv->block_size * rb;
    const int32_t bs = kv->block_size;
    float acc = 0;
    const int32_t s0 = st->n_seqs * ith / team.nth, s1 = st->n_seqs * (ith + 1) / team.nth;
    for (int32_t s = s0; s < s1; s++) {
        const int32_t *tab = st->seqs[s].block_table;
        for (int32_t pos = 0; pos < st->ctx; pos += ATTN_TOUCH_KC) {
            const int32_t n = FOLIO_MIN(ATTN_TOUCH_KC, st->ctx - pos);
            const int32_t pp = pos + 2 * ATTN_TOUCH_KC;
            for (int32_t j = 0; j < st->n_kv; j++) {
                if (team.touch_pf && pp < st->ctx)
                    for (int32_t k = pp; k < FOLIO_MIN(pp + ATTN_TOUCH_KC, st->ctx); k++) {
                        const char *r = touch_tile(kv, tab, k, j) + (size_t)(k % bs) * rb;
                        for (size_t off = 0; off < rb; off += 64) {
                            __builtin_prefetch(r + off, 0, 3); /* the kernel's PF_HINT */
                            __builtin_prefetch(r + vb + off, 0, 3);
                        }
                    }
                for (int v = 0; v < 2; v++)
                    for (int32_t k = pos; k < pos + n;) { /* a run within one block */
                        const int32_t len = FOLIO_MIN(pos + n - k, bs - k % bs);
                        const char *t = touch_tile(kv, tab, k, j) + (size_t)v * vb;
                        acc += touch_run(t + (size_t)(k % bs) * rb, (size_t)len * rb);
                        if (kv->dtype == FOLIO_Q8) /* the run's row scales */
                            acc += touch_run(t + sc_off + (size_t)(k % bs) * 4, (size_t)len * 4);
                        k += len;
                    }
            }
        }
    }
    return acc;
}

static float pages_pass(int ith);

static void do_job(int ith)
{
    if (team.job == JOB_ATTN) {
        for (int phase = 0; phase < ATTN_PHASES; phase++) {
            attn_paged(team.b, team.work, phase, ith, team.nth);
            pthread_barrier_wait(&team.bar);
        }
    } else if (team.job == JOB_SUM) {
        size_t lo = team.buf_n * ith / team.nth, hi = team.buf_n * (ith + 1) / team.nth;
        float acc[16] = {0};
        for (size_t i = lo; i + 16 <= hi; i += 16)
            for (int k = 0; k < 16; k++)
                acc[k] += team.buf[i + k];
        double s = 0;
        for (int k = 0; k < 16; k++)
            s += acc[k];
        team.sums[ith] = s;
        pthread_barrier_wait(&team.bar);
    } else if (team.job == JOB_TOUCH) {
        team.sums[ith] = touch_job(ith);
        pthread_barrier_wait(&team.bar);
    } else if (team.job == JOB_PAGES) {
        team.sums[ith] = pages_pass(ith);
        pthread_barrier_wait(&team.bar);
    }
}

static void *worker(void *arg)
{
    int ith = (int)(intptr_t)arg;
    for (;;) {
        pthread_barrier_wait(&team.bar); /* start */
        if (team.job == JOB_QUIT)
            return NULL;
        do_job(ith);
    }
}

static int use_cputime;

static double clock_s(void)
{
    struct timespec ts;
    if (!use_cputime)
        return (double)folio_now_ns() * 1e-9;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ((double)ts.tv_sec + (double)ts.tv_nsec * 1e-9) / team.nth;
}

static double team_run(enum job job)
{
    team.job = job;
    double t0 = clock_s();
    pthread_barrier_wait(&team.bar);
    do_job(0);
    return clock_s() - t0;
}

static void team_start(int nth)
{
    team.nth = nth;
    pthread_barrier_init(&team.bar, NULL, (unsigned)nth);
    for (int i = 1; i < nth; i++)
        pthread_create(&team.tid[i], NULL, worker, (void *)(intptr_t)i);
}

static void team_stop(void)
{
    team.job = JOB_QUIT;
    pthread_barrier_wait(&team.bar);
    for (int i = 1; i < team.nth; i++)
        pthread_join(team.tid[i], NULL);
    pthread_barrier_destroy(&team.bar);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct timing {
    double med, best;
};

static struct timing time_attn(struct setup *st, int reps)
{
    size_t ws = attn_paged_work_size(&st->b, team.nth);
    void *work = folio_aligned_alloc(64, ws);
    team.b = &st->b;
    team.work = work;
    double t[64];
    if (reps > 64)
        reps = 64;
    static int32_t call; /* --rotate: the layer of the next call */
    const int32_t nl = rotate ? st->kv.n_layers : 1;
    st->b.layer = call++ % nl;
    team_run(JOB_ATTN); /* warm-up */
    for (int r = 0; r < reps; r++) {
        st->b.layer = call++ % nl;
        t[r] = team_run(JOB_ATTN);
    }
    qsort(t, (size_t)reps, sizeof(double), cmp_d);
    folio_free(work);
    return (struct timing){t[reps / 2], t[0]};
}

/* The streaming read's buffer (512 MiB of floats) into team.buf. */
static void stream_buf_make(void)
{
    const size_t n = (size_t)512 << 20 >> 2;
    float *buf = folio_aligned_alloc(64, n * sizeof(float));
    if (!buf) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = (float)(i & 7);
    team.buf = buf;
    team.buf_n = n;
}

static void stream_buf_free(void)
{
    folio_free((void *)team.buf);
    team.buf = NULL;
}

static double bandwidth_gbs(int reps)
{
    stream_buf_make();
    team_run(JOB_SUM);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t = team_run(JOB_SUM);
        best = t < best ? t : best;
    }
    const double bytes = (double)team.buf_n * sizeof(float);
    stream_buf_free();
    return bytes / best * 1e-9;
}

static double kv_bytes(const struct setup *st)
{
    /* every visible K and V row of every KV head, once */
    double rows = 0;
    for (int32_t s = 0; s < st->n_seqs; s++)
        rows += st->ctx;
    return rows * (double)pager_kv_bytes_per_token(st->dt, 1, st->n_kv, st->hd);
}

/* small's attention geometry (12 query heads over 4 KV heads, head_dim 64,
 * block 16): the set-up of (b), (c) and (e) */
static struct setup small_setup(int32_t n_seqs, int32_t ctx, int32_t n_q, enum folio_dtype dt,
                                enum layout layout)
{
    return (struct setup){.n_seqs = n_seqs,
                          .ctx = ctx,
                          .n_q = n_q,
                          .n_heads = 12,
                          .n_kv = 4,
                          .hd = 64,
                          .bs = 16,
                          .dt = dt,
                          .layout = layout};
}

/* (key, KV head) pairs a decode batch reads */
static double key_heads(const struct setup *st)
{
    return (double)st->n_seqs * st->ctx * st->n_kv;
}

/* (b)'s rounds.  The VM's read bandwidth moves by up to 2x within
 * minutes (28-60 GB/s in one session) and a decode's rate much less, so a
 * streaming figure taken once at the start says little of the moment a
 * kernel figure is taken.  Each round here runs the kernel, touch and
 * touch+pf once each, in an order rotated from round to round, each right
 * after a streaming read (one pass over team.buf) that its rate is held
 * against; printed are the median times and the medians of the per-round
 * rate ratios.  Each job follows a streaming pass because what ran just
 * before moves a job's time: rounds used to run the streaming read, the
 * kernel, touch and touch+pf in a fixed rotation, so the kernel mostly
 * ran after the streaming read and touch+pf after touch; a second copy
 * of the same kernel run in each round right after touch+pf ran 1.13-1.25x
 * as fast as the first (f32 decode 32 x 4096, the Zen 5 VM, BENCHMARKS.md's
 * nineteenth session).  So touch+pf, the access pattern's own rate, read
 * faster than it would have in the kernel's place. */
enum { DEC_STREAM, DEC_KERN, DEC_TOUCH, DEC_TOUCH_PF, DEC_KERN_B, DEC_N };
struct dec_fig {
    double med[DEC_N], best[DEC_N]; /* seconds */
    double ratio[DEC_N];            /* median over rounds of rate / that round's streaming rate */
    double kern_vs_touch[2];        /* median over rounds of the kernel's rate / touch's */
    double b_vs_a;                  /* --ab: median over rounds of kernel B's rate / A's */
};
static int ab; /* --ab: kernel B (attn_ab_select) beside A in (b), (c), (d) and (e) */

static struct dec_fig decode_rounds(struct setup *st, int reps)
{
    enum { R = 64 };
    reps = FOLIO_MIN(reps, R);
    size_t ws = attn_paged_work_size(&st->b, team.nth);
    void *work = folio_aligned_alloc(64, ws);
    team.b = &st->b;
    team.work = work;
    team.touch = st;
    double t[DEC_N][R], rt[DEC_N][R], kt[3][R];
    const int nj = ab ? DEC_N - 1 : DEC_N - 2; /* jobs per round: DEC_KERN on */
    const int nd = nj + 1;                     /* figures: the streaming read's too */
    for (int r = -1; r < reps; r++) {          /* round -1 warms up */
        double tr[DEC_N], ts[DEC_N];           /* each job's time, and its streaming read's */
        for (int i = 0; i < nj; i++) {
            const int w = 1 + (i + (r < 0 ? 0 : r)) % nj;
            ts[w] = team_run(JOB_SUM);
            if (w == DEC_KERN) {
                tr[w] = team_run(JOB_ATTN);
            } else if (w == DEC_KERN_B) {
                attn_ab_select(1);
                tr[w] = team_run(JOB_ATTN);
                attn_ab_select(0);
            } else {
                team.touch_pf = w == DEC_TOUCH_PF;
                tr[w] = team_run(JOB_TOUCH);
            }
        }
        if (r < 0)
            continue;
        tr[DEC_STREAM] = ts[DEC_STREAM] = ts[DEC_KERN];
        for (int i = 0; i < nd; i++) {
            t[i][r] = tr[i];
            /* rate ratio: the K/V bytes over the stream's bytes, inverse
             * times */
            rt[i][r] = (kv_bytes(st) / tr[i]) / ((double)team.buf_n * sizeof(float) / ts[i]);
        }
        kt[0][r] = tr[DEC_TOUCH] / tr[DEC_KERN];
        kt[1][r] = tr[DEC_TOUCH_PF] / tr[DEC_KERN];
        kt[2][r] = ab ? tr[DEC_KERN] / tr[DEC_KERN_B] : 0;
    }
    struct dec_fig f = {0};
    for (int i = 0; i < nd; i++) {
        qsort(t[i], (size_t)reps, sizeof(double), cmp_d);
        qsort(rt[i], (size_t)reps, sizeof(double), cmp_d);
        f.med[i] = t[i][reps / 2];
        f.best[i] = t[i][0];
        f.ratio[i] = rt[i][reps / 2];
    }
    for (int i = 0; i < 3; i++)
        qsort(kt[i], (size_t)reps, sizeof(double), cmp_d);
    f.kern_vs_touch[0] = kt[0][reps / 2];
    f.kern_vs_touch[1] = kt[1][reps / 2];
    f.b_vs_a = kt[2][reps / 2];
    folio_free(work);
    return f;
}

/* (e): a small decode batch run RES_INNER times back to back by the calling
 * thread alone, so its K/V stay in cache; best of reps, per run. */
static int32_t res_seqs = 2, res_ctx = 128; /* (e)'s batch (--res) */
#define RES_INNER 400
static double time_resident(struct setup *st, int reps)
{
    void *work = folio_aligned_alloc(64, attn_paged_work_size(&st->b, 1));
    if (!work)
        exit(1);
    double best = 1e30;
    for (int r = 0; r <= reps; r++) {                    /* the first warms the caches */
        const double t0 = (double)folio_now_ns() * 1e-9; /* wall: the other threads sleep */
        for (int i = 0; i < RES_INNER; i++)
            for (int phase = 0; phase < ATTN_PHASES; phase++)
                attn_paged(&st->b, work, phase, 0, 1);
        const double t = ((double)folio_now_ns() * 1e-9 - t0) / RES_INNER;
        if (r > 0 && t < best)
            best = t;
    }
    folio_free(work);
    return best;
}

/* time_attn's median, as a time_resident-shaped timer. */
static double time_attn_med(struct setup *st, int reps)
{
    return time_attn(st, reps).med;
}

/* --ab in (c) and (e): A and B timed in turn by timer, five rounds, which
 * first alternating; returns the median of the rounds' B / A speed ratios
 * and B's best time in *tb (unless NULL). */
static double ab_rounds(struct setup *st, int reps, double (*timer)(struct setup *, int),
                        double *tb)
{
    double r[5], best = 1e30;
    for (int i = 0; i < 5; i++) {
        double t[2];
        for (int b = 0; b < 2; b++) {
            const int k = (i % 2) ^ b;
            attn_ab_select(k);
            t[k] = timer(st, reps);
        }
        attn_ab_select(0);
        r[i] = t[0] / t[1];
        best = FOLIO_MIN(best, t[1]);
    }
    qsort(r, 5, sizeof r[0], cmp_d);
    if (tb)
        *tb = best;
    return r[2];
}

static double attn_flops(const struct setup *st)
{
    double pairs = 0; /* (query row, visible key) pairs */
    for (int32_t s = 0; s < st->n_seqs; s++)
        for (int32_t i = 0; i < st->n_q; i++)
            pairs += st->ctx - st->n_q + i + 1;
    return pairs * st->n_heads * 4.0 * st->hd;
}

/* ---- (f) what a page jump costs (--only pages) --------------------------- */

/* How (f) prefetches: every line of the run so many runs ahead, with
 * locality 3 (prefetcht0, the kernel's PF_HINT) or 1 (prefetcht2); the
 * last, both: prefetcht2 16 runs ahead and prefetcht0 2 runs ahead. */
static const struct pages_scheme {
    const char *name;
    int32_t dist, dist2; /* runs ahead: prefetcht0 (0: none), prefetcht2 (0: none) */
} pages_schemes[] = {
    {"t0, 4 runs ahead", 4, 0},
    {"t0, 16 runs ahead", 16, 0},
    {"t2, 8 runs ahead", 0, 8},
    {"t2 16 + t0 2 ahead", 2, 16},
};

/* One thread's share of a pass over the runs of 4 KiB of team.pg_arena in
 * the order of team.pg_tab (its slice of the runs; one load per line,
 * every line of a run prefetched as team.pg_scheme says); the sum read. */
static float pages_pass(int ith)
{
    enum { RUN = 4096 };
    const struct pages_scheme *ps = &pages_schemes[team.pg_scheme];
    const char *arena = team.pg_arena;
    const int32_t *tab = team.pg_tab;
    const int32_t lo = (int32_t)((int64_t)team.pg_nr * ith / team.nth),
                  hi = (int32_t)((int64_t)team.pg_nr * (ith + 1) / team.nth);
    float acc = 0;
    for (int32_t i = lo; i < hi; i++) {
        if (ps->dist2 && i + ps->dist2 < hi)
            for (size_t off = 0; off < RUN; off += 64)
                __builtin_prefetch(arena + (size_t)tab[i + ps->dist2] * RUN + off, 0, 1);
        if (ps->dist && i + ps->dist < hi)
            for (size_t off = 0; off < RUN; off += 64)
                __builtin_prefetch(arena + (size_t)tab[i + ps->dist] * RUN + off, 0, 3);
        acc += touch_run(arena + (size_t)tab[i] * RUN, RUN);
    }
    return acc;
}

/* (f): the team's threads read an arena in runs of 4 KiB (a page; one
 * block's K of a layer is 4352 bytes for the small geometry at q8, block
 * 16), each thread its slice of the runs, once in address order and once
 * in a shuffled order, for arenas from 64 MiB to a serving pool's size
 * and for several prefetch schemes: what a jump between pages costs on
 * this machine, apart from any kernel, and whether any way of prefetching
 * hides it (on the Zen 5 VM none did: two threads read shuffled runs at
 * about half the in-order rate whatever the scheme; the cause is the
 * machine's, likely TLB misses walked through a VM host's page tables or
 * DRAM pages opened per jump: without hardware counters that is not
 * measured).  Each round reads both orders under each scheme in turn; the
 * ratio is the median of the per-round ratios. */
static void run_pages(int reps)
{
    static const int mib[] = {64, 256, 1024};
    enum { NS = sizeof(pages_schemes) / sizeof(pages_schemes[0]) };
    printf("(f) %d thread(s), runs of 4 KiB read in address order or shuffled, each thread\n"
           "    its slice of the runs, median of %d rounds: GB/s; sh/order: median of the\n"
           "    per-round ratios\n",
           team.nth, reps);
    printf("%-10s %-20s %10s %10s %9s\n", "arena", "prefetch", "in order", "shuffled", "sh/order");
    for (size_t a = 0; a < sizeof(mib) / sizeof(mib[0]); a++) {
        const size_t bytes = (size_t)mib[a] << 20;
        const int32_t nr = (int32_t)(bytes / 4096);
        char *arena = use_huge ? folio_region_alloc(bytes, FOLIO_REGION_HUGE)
                               : folio_aligned_alloc(4096, bytes);
        int32_t *tab = folio_malloc(sizeof(int32_t) * (size_t)nr * 2);
        if (!arena || !tab) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        memset(arena, 1, bytes);
        int32_t *sh = tab + nr;
        for (int32_t i = 0; i < nr; i++)
            tab[i] = sh[i] = i;
        shuffle_ids(sh, nr);
        enum { RMAX = 64 };
        const int n = FOLIO_MIN(reps, RMAX);
        double t[NS][2][RMAX], ratio[NS][RMAX];
        team.pg_arena = arena;
        team.pg_nr = nr;
        for (int r = -1; r < n; r++) /* round -1 warms up */
            for (int m = 0; m < NS; m++) {
                double x[2];
                for (int o = 0; o < 2; o++) {
                    const int oo = (r & 1) ^ o; /* which order first alternates */
                    team.pg_scheme = m;
                    team.pg_tab = oo ? sh : tab;
                    x[oo] = team_run(JOB_PAGES);
                }
                if (r >= 0) {
                    t[m][0][r] = x[0], t[m][1][r] = x[1];
                    ratio[m][r] = x[0] / x[1];
                }
            }
        for (int m = 0; m < NS; m++) {
            for (int o = 0; o < 2; o++)
                qsort(t[m][o], (size_t)n, sizeof(double), cmp_d);
            qsort(ratio[m], (size_t)n, sizeof(double), cmp_d);
            printf("%6d MiB  %-20s %10.1f %10.1f %8.3fx\n", mib[a], pages_schemes[m].name,
                   (double)bytes / t[m][0][n / 2] * 1e-9, (double)bytes / t[m][1][n / 2] * 1e-9,
                   ratio[m][n / 2]);
        }
        if (use_huge)
            folio_region_free(arena, bytes);
        else
            folio_free(arena);
        folio_free(tab);
    }
}

/* ---- page tables from the pager (--replay) ------------------------------- */

/* What one replay did to the pool, and what tables it left. */
struct replay_stats {
    int64_t allocs, evictions, preempted; /* blocks allocated, of which by eviction */
    int64_t jumps;                        /* measured tables: i with t[i + 1] != t[i] + 1 */
};

#define REPLAY_SLOTS 64

/* Replays a serving pattern through a bookkeeping-only pager of nblocks
 * blocks (block bs) with allocation policy `alloc`, and leaves in out the
 * page tables of n_meas sequences of ctx tokens ([n_meas][ctx / bs]).
 * 64 slots each hold a sequence: admitted with a prompt of 16-512 tokens
 * appended at once, then growing one token per step, all slots in turn,
 * and retired at a length of prompt + 64-2048 and replaced.  A sequence
 * whose append finds the pool full is preempted (freed).  After the pool
 * has turned over about four times, the first n_meas slots, as their
 * occupants retire, take the measured sequences: admitted the same way but
 * grown to ctx and kept (when one finds the pool full, a random
 * background sequence is preempted for it), while the other slots go on.
 * With `cache`, every step marks what it appended computed, as the
 * scheduler does: full blocks then enter the prefix cache and a retired
 * sequence's blocks stay cached, so a warm pool allocates by evicting the
 * LRU block, not from the free blocks.  The random stream is the same for
 * both policies, and so (allocation never depends on which ids are free)
 * is every operation: only the ids differ. */
static void replay_tables(enum pager_alloc alloc, int cache, int32_t nblocks, int32_t bs,
                          int32_t n_meas, int32_t ctx, int32_t *out, struct replay_stats *rs)
{
    struct pager_config cfg = {.num_blocks = nblocks,
                               .block_size = bs,
                               .n_layers = 1,
                               .n_kv_heads = 1,
                               .head_dim = 1,
                               .dtype = FOLIO_F32,
                               .no_arena = true,
                               .alloc = alloc};
    pager_t *pg;
    if (pager_init(&pg, &cfg) != 0) {
        fprintf(stderr, "replay: pager_init failed\n");
        exit(1);
    }
    struct {
        pager_seq_t *s;
        int32_t target;
        int meas;
    } sl[REPLAY_SLOTS] = {{0}};
    uint64_t r = 0x5eed;
#define RND(n)                                                                                     \
    ((r = r * 6364136223846793005ull + 1442695040888963407ull), (int32_t)((r >> 33) % (n)))
    int32_t toks[512];
    int64_t appended = 0, warm = (int64_t)4 * nblocks * bs;
    int32_t n_done = 0;
    memset(rs, 0, sizeof *rs);
    while (n_done < n_meas) {
        const int measure = appended >= warm;
        for (int k = 0; k < REPLAY_SLOTS; k++) {
            if (!sl[k].s) {
                const int meas = measure && k < n_meas;
                int32_t prompt = 16 + RND(497);
                for (int32_t i = 0; i < prompt; i++)
                    toks[i] = RND(1 << 30);
                pager_seq_new(pg, 0, (uint64_t)k, 0, &sl[k].s);
                sl[k].target = meas ? ctx : prompt + 64 + RND(1985);
                sl[k].meas = meas;
                const int32_t need = pager_seq_blocks_needed(pg, sl[k].s, prompt);
                if (pager_seq_append(pg, sl[k].s, toks, prompt) != 0) {
                    pager_seq_free(pg, sl[k].s);
                    sl[k].s = NULL;
                    sl[k].meas = 0;
                    continue;
                }
                appended += prompt;
                rs->allocs += need;
            } else {
                int32_t len = pager_seq_len(sl[k].s);
                if (len >= sl[k].target)
                    continue; /* a measured sequence at ctx */
                toks[0] = RND(1 << 30);
                const int32_t need = pager_seq_blocks_needed(pg, sl[k].s, 1);
                int rc;
                while ((rc = pager_seq_append(pg, sl[k].s, toks, 1)) == -ENOSPC && sl[k].meas) {
                    int v = n_meas + RND(REPLAY_SLOTS - n_meas), tries = 0;
                    while (!sl[v].s && tries++ < REPLAY_SLOTS)
                        v = n_meas + (v - n_meas + 1) % (REPLAY_SLOTS - n_meas);
                    if (!sl[v].s) {
                        fprintf(stderr, "replay: pool too small for the measured tables\n");
                        exit(1);
                    }
                    pager_seq_free(pg, sl[v].s);
                    sl[v].s = NULL;
                    rs->preempted++;
                }
                if (rc != 0) { /* a background sequence: preempted */
                    pager_seq_free(pg, sl[k].s);
                    sl[k].s = NULL;
                    rs->preempted++;
                    continue;
                }
                appended++;
                rs->allocs += need;
            }
            if (cache)
                pager_seq_mark_computed(pg, sl[k].s, pager_seq_len(sl[k].s));
            int32_t len = pager_seq_len(sl[k].s);
            if (len >= sl[k].target) {
                if (sl[k].meas) {
                    n_done++;
                } else {
                    pager_seq_free(pg, sl[k].s);
                    sl[k].s = NULL;
                }
            }
        }
    }
#undef RND
    const int32_t nb_seq = ctx / bs;
    for (int k = 0; k < n_meas; k++) {
        const int32_t *t = pager_seq_block_table(sl[k].s, NULL);
        memcpy(out + (size_t)k * nb_seq, t, sizeof(int32_t) * (size_t)nb_seq);
        for (int32_t i = 0; i + 1 < nb_seq; i++)
            rs->jumps += t[i + 1] != t[i] + 1;
    }
    struct pager_stats st;
    pager_stats_get(pg, &st);
    rs->evictions = st.evictions;
    pager_free(pg);
}

/* (d) decode attention over the replayed tables of both policies, cache on
 * and off, against the identity and whole layouts; rounds rotated as in (a). */
static void run_replay(int32_t n_seqs, int32_t ctx, int reps, int only_dt, int32_t n_layers,
                       double bw)
{
    /* room for the measured tables and the others (--quick: as many blocks) */
    const int32_t bs = 16, nb_seq = ctx / bs, nblocks = FOLIO_MAX(n_seqs * nb_seq * 3 / 2, 12288);
    enum { NT = 4, NL = NT + 2 };
    static const char *names[NL] = {"lifo", "local", "lifo+pc", "local+pc", "ident", "whole"};
    int32_t *tabs[NT];
    struct replay_stats rs[NT];
    for (int t = 0; t < NT; t++) {
        tabs[t] = folio_malloc(sizeof(int32_t) * (size_t)n_seqs * nb_seq);
        if (!tabs[t])
            exit(1);
        replay_tables(t % 2 ? PAGER_ALLOC_LOCAL : PAGER_ALLOC_LIFO, t / 2, nblocks, bs, n_seqs, ctx,
                      tabs[t], &rs[t]);
    }
    printf("(d) decode %d x %d, block 16, page tables replayed through the pager (%d blocks,\n"
           "    64 sequences, see --replay in the file comment); policy: lifo = PAGER_ALLOC_LIFO,\n"
           "    local = the locality policy; +pc: prefix cache on (blocks marked computed);\n"
           "    arena of %d layer(s), %s (layer 0 read; whole: one layer, dense)\n",
           n_seqs, ctx, nblocks, n_layers, arena_names[arena_order]);
    for (int t = 0; t < NT; t++)
        printf("    %-9s mean run %.1f blocks (%lld jumps in %d x %d), evictions %lld of %lld "
               "allocations, %lld preempted\n",
               names[t], (double)n_seqs * nb_seq / (double)(rs[t].jumps + n_seqs),
               (long long)rs[t].jumps, n_seqs, nb_seq, (long long)rs[t].evictions,
               (long long)rs[t].allocs, (long long)rs[t].preempted);
    printf("    median times; speed vs whole (contiguous): median of per-round ratios;\n"
           "    %%rd: K/V read rate of the median time, %% of the streaming read (%.1f GB/s);\n"
           "    %%st: each call right after a streaming read, median of per-round rate ratios\n",
           bw);
    printf("%-5s", "kv");
    for (int l = 0; l < NL; l++)
        printf(" %9s", names[l]);
    for (int l = 0; l < NL - 1; l++)
        printf(" %9s", names[l]);
    printf("\n");
    for (int dt = 0; dt < N_DTYPES; dt++) {
        if (only_dt >= 0 && (int)dtypes[dt] != only_dt)
            continue;
        struct setup st[NL];
        void *work[NL];
        for (int l = 0; l < NL; l++) {
            st[l] = (struct setup){.n_seqs = n_seqs,
                                   .ctx = ctx,
                                   .n_q = 1,
                                   .n_heads = 12,
                                   .n_kv = 4,
                                   .hd = 64,
                                   .bs = bs,
                                   .dt = dtypes[dt],
                                   .layout = l < NT    ? LAYOUT_GIVEN
                                             : l == NT ? LAYOUT_IDENTITY
                                                       : LAYOUT_WHOLE,
                                   .given = l < NT ? tabs[l] : NULL,
                                   .given_blocks = nblocks,
                                   .n_layers = n_layers,
                                   .shared_base = l > 0 && l < NT ? st[0].kv.base : NULL};
            setup_build(&st[l]);
            work[l] = folio_aligned_alloc(64, attn_paged_work_size(&st[l].b, team.nth));
        }
        int nr = reps < 255 ? reps : 255;
        double t_all[NL][255], ratio[NL][255];
        for (int r = 0; r <= nr; r++) {
            double tr[NL];
            for (int i = 0; i < NL; i++) {
                const int l = (r + i) % NL;
                team.b = &st[l].b;
                team.work = work[l];
                tr[l] = team_run(JOB_ATTN);
            }
            if (r == 0)
                continue;
            for (int l = 0; l < NL; l++) {
                t_all[l][r - 1] = tr[l];
                ratio[l][r - 1] = tr[NL - 1] / tr[l];
            }
        }
        printf("%-5s", folio_dtype_name(dtypes[dt]));
        for (int l = 0; l < NL; l++) {
            qsort(t_all[l], (size_t)nr, sizeof(double), cmp_d);
            printf(" %7.3fms", t_all[l][nr / 2] * 1e3);
        }
        for (int l = 0; l < NL - 1; l++) {
            qsort(ratio[l], (size_t)nr, sizeof(double), cmp_d);
            printf(" %8.3fx", ratio[l][nr / 2]);
        }
        printf("\n%-5s", "  %rd"); /* read rate: share of the streaming read */
        for (int l = 0; l < NL; l++)
            printf(" %8.0f%%", 100.0 * kv_bytes(&st[l]) / t_all[l][nr / 2] * 1e-9 / bw);
        printf("\n");
        /* %st: each call right after a streaming read (as (b), and as in a
         * model step, after a layer's weights), its rate against that read's */
        stream_buf_make();
        const double sb = (double)team.buf_n * sizeof(float);
        for (int r = 0; r <= nr; r++)
            for (int i = 0; i < NL; i++) {
                const int l = (r + i) % NL;
                team.b = &st[l].b;
                team.work = work[l];
                const double ts = team_run(JOB_SUM), tk = team_run(JOB_ATTN);
                if (r > 0)
                    ratio[l][r - 1] = (kv_bytes(&st[l]) / tk) / (sb / ts);
            }
        stream_buf_free();
        printf("%-5s", "  %st");
        for (int l = 0; l < NL; l++) {
            qsort(ratio[l], (size_t)nr, sizeof(double), cmp_d);
            printf(" %8.0f%%", 100.0 * ratio[l][nr / 2]);
        }
        printf("\n");
        if (ab) { /* each round every layout under A and under B, which first alternating,
                   * each call right after a streaming read as in (b) */
            stream_buf_make();
            for (int r = 0; r <= nr; r++) {
                double ta[NL], tb[NL];
                for (int h = 0; h < 2; h++)
                    for (int i = 0; i < NL; i++) {
                        const int l = (r + i) % NL, b = (h + r) & 1;
                        team.b = &st[l].b;
                        team.work = work[l];
                        attn_ab_select(b);
                        team_run(JOB_SUM);
                        (b ? tb : ta)[l] = team_run(JOB_ATTN);
                        attn_ab_select(0);
                    }
                if (r > 0)
                    for (int l = 0; l < NL; l++)
                        ratio[l][r - 1] = ta[l] / tb[l];
            }
            stream_buf_free();
            printf("%-5s", "  B/A");
            for (int l = 0; l < NL; l++) {
                qsort(ratio[l], (size_t)nr, sizeof(double), cmp_d);
                printf(" %8.3fx", ratio[l][nr / 2]);
            }
            printf("   (--ab: kernel B's speed / A's, median of per-round ratios)\n");
        }
        for (int l = NL - 1; l >= 0; l--) { /* st[0] owns the shared arena: last */
            folio_free(work[l]);
            setup_free(&st[l]);
        }
    }
    for (int t = 0; t < NT; t++)
        folio_free(tabs[t]);
}

/* (c): one fresh 512-token prompt, every dtype (or only_dt). */
static void run_fresh(int reps, int only_dt)
{
    printf("\n(c) prefill 512 tokens (fresh), 12/4 heads, hd 64, block 16 (shuffled pages)\n");
    for (int dt = 0; dt < N_DTYPES; dt++) {
        if (only_dt >= 0 && (int)dtypes[dt] != only_dt)
            continue;
        struct setup st = small_setup(1, 512, 512, dtypes[dt], LAYOUT_SHUFFLED);
        setup_build(&st);
        struct timing t = time_attn(&st, reps);
        printf("  %s: %.3f ms, %.2f GFLOP/s (best %.2f)\n", folio_dtype_name(dtypes[dt]),
               t.med * 1e3, attn_flops(&st) / t.med * 1e-9, attn_flops(&st) / t.best * 1e-9);
        if (ab)
            printf("    kernel B: B / A speed %.3f (median of 5 rounds)\n",
                   ab_rounds(&st, reps, time_attn_med, NULL));
        setup_free(&st);
    }
}

int main(int argc, char **argv)
{
    int nth = 2, reps = 9, quick = 0, only_dt = -1, replay = 0, layers = 1;
    const char *only = NULL; /* run only the (a) case whose name starts so */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            nth = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
            if (attn_force_isa(argv[++i]) != 0) {
                fprintf(stderr, "isa %s not available\n", argv[i]);
                return 1;
            }
        } else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--cputime"))
            use_cputime = 1;
        else if (!strcmp(argv[i], "--huge")) /* the default now */
            use_huge = 1;
        else if (!strcmp(argv[i], "--4k"))
            use_huge = 0;
        else if (!strcmp(argv[i], "--ab")) {
            if (attn_ab_select(0) != 0) {
                fprintf(stderr, "--ab: this build has no kernel B (meson -Dattn_ab=true)\n");
                return 2;
            }
            ab = 1;
        } else if (!strcmp(argv[i], "--replay"))
            replay = 1;
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc)
            layers = atoi(argv[++i]) > 0 ? atoi(argv[i]) : 1;
        else if (!strcmp(argv[i], "--rotate"))
            rotate = 1;
        else if (!strcmp(argv[i], "--block-major"))
            arena_order = ARENA_BLOCK;
        else if (!strcmp(argv[i], "--layer-major"))
            arena_order = ARENA_LAYER;
        else if (!strcmp(argv[i], "--head-major"))
            arena_order = ARENA_HEAD;
        else if (!strcmp(argv[i], "--res") && i + 1 < argc &&
                 sscanf(argv[++i], "%d,%d", &res_seqs, &res_ctx) == 2 && res_seqs >= 1 &&
                 res_seqs <= 64 && res_ctx >= 1 && res_ctx <= 8192)
            continue;
        else if (!strcmp(argv[i], "--run") && i + 1 < argc)
            shuffle_run = atoi(argv[++i]) > 0 ? atoi(argv[i]) : 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            enum folio_dtype t;
            if (folio_dtype_parse(argv[++i], &t) != 0) {
                fprintf(stderr, "bad --dtype %s\n", argv[i]);
                return 2;
            }
            only_dt = (int)t;
        } else {
            fprintf(
                stderr,
                "usage: %s [--threads N] [--reps N] [--isa NAME] [--quick] [--cputime] [--4k]\n"
                "       [--only decode|prefill|chunk|read|fresh|cache|pages] [--dtype "
                "f32|f16|bf16|q8]\n"
                "       [--run N]\n"
                "       [--layers L] [--rotate] [--block-major | --layer-major | --head-major]\n"
                "       [--replay] [--res SEQS,CTX] [--ab]\n",
                argv[0]);
            return 2;
        }
    }
    if (nth < 1 || nth > 64 || reps < 1)
        return 2;
    team_start(nth);
    atexit(print_huge);
    printf("paged attention bench: %d threads, isa %s, arena %s, median of %d (best)\n", nth,
           attn_isa_name(), arena_names[arena_order], reps);

    const int cache_only = only && !strcmp(only, "cache"); /* (e) alone, e.g. under perf */
    const int read_only = only && !strcmp(only, "read");   /* (b) alone */
    if (only && !strcmp(only, "fresh")) {                  /* (c) alone */
        run_fresh(reps, only_dt);
        team_stop();
        return 0;
    }
    if (only && !strcmp(only, "pages")) { /* (f) alone */
        run_pages(reps);
        team_stop();
        return 0;
    }
    double bw = 0;
    if (!cache_only) {
        bw = bandwidth_gbs(reps);
        printf("streaming read bandwidth (sum over 512 MiB, %d threads): %.1f GB/s\n\n", nth, bw);
    }

    const int32_t dec_seqs = quick ? 8 : 32, dec_ctx = quick ? 1024 : 4096;
    if (replay) {
        run_replay(dec_seqs, dec_ctx, reps, only_dt, layers, bw);
        team_stop();
        return 0;
    }
    if (!cache_only && !read_only) {
        printf("(a) paged vs contiguous, 12 heads / 4 KV heads / hd 64, %d rounds\n", reps);
        printf("    median times; speed ratios paged (shuffled) / identity table and / "
               "whole-sequence\n"
               "    blocks: median of the per-round ratios, [ratios of best times]\n");
        printf("    touch+pf sh/ident (decode): the same ratio for touch+pf ((b)): the kernel's\n"
               "    lines, prefetched two chunks ahead, no arithmetic -- what the two access\n"
               "    patterns allow\n");
        printf("%-28s %-4s %10s %10s %10s %9s %9s  %-13s  %s\n", "batch", "kv", "shuffled",
               "identity", "whole", "sh/ident", "sh/whole", "[best]", "touch+pf sh/ident");
    }
    struct {
        const char *name;
        int32_t n_seqs, ctx, n_q, bs;
    } cases[] = {
        {"decode 32 x 4096", dec_seqs, dec_ctx, 1, 16},
        {"decode 32 x 4096, block 32", dec_seqs, dec_ctx, 1, 32},
        {"decode 32 x 4096, block 64", dec_seqs, dec_ctx, 1, 64},
        {"decode 32 x 4096, block 128", dec_seqs, dec_ctx, 1, 128},
        {"decode 64 x 128", 64, 128, 1, 16}, /* bench_model's batched decode, one layer */
        {"prefill 512", 1, 512, 512, 16},
        {"chunk 256 after 2048", 1, 2304, 256, 16},
    };
    /* --only: the case of that exact name, else every case it begins */
    int exact = 0;
    for (size_t c = 0; only && c < sizeof(cases) / sizeof(cases[0]); c++)
        exact |= strcmp(cases[c].name, only) == 0;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]) && !cache_only && !read_only; c++) {
        if (only && (exact ? strcmp(cases[c].name, only) != 0
                           : strncmp(cases[c].name, only, strlen(only)) != 0))
            continue;
        for (int dt = 0; dt < N_DTYPES; dt++) {
            if (only_dt >= 0 && (int)dtypes[dt] != only_dt)
                continue;
            struct setup st[3];
            void *work[3];
            double best[3] = {1e30, 1e30, 1e30};
            int nr = reps < 255 ? reps : 255;
            double t_all[3][255], r_id[255], r_wh[255], r_pat[255];
            const int pat = cases[c].n_q == 1; /* decode: also touch+pf, shuffled and identity */
            for (int lay = 0; lay < 3; lay++) {
                st[lay] = (struct setup){.n_seqs = cases[c].n_seqs,
                                         .ctx = cases[c].ctx,
                                         .n_q = cases[c].n_q,
                                         .n_heads = 12,
                                         .n_kv = 4,
                                         .hd = 64,
                                         .bs = cases[c].bs,
                                         .dt = dtypes[dt],
                                         .layout = (enum layout)lay,
                                         .n_layers = layers};
                setup_build(&st[lay]);
                work[lay] = folio_aligned_alloc(64, attn_paged_work_size(&st[lay].b, nth));
            }
            /* interleaved, so the three layouts share the machine's noise;
             * the order rotates so none always runs first */
            for (int r = 0; r <= nr; r++) {
                double tr[3];
                for (int i = 0; i < 3; i++) {
                    const int lay = (r + i) % 3;
                    team.b = &st[lay].b;
                    team.work = work[lay];
                    tr[lay] = team_run(JOB_ATTN);
                }
                if (r == 0) /* warm-up */
                    continue;
                for (int lay = 0; lay < 3; lay++) {
                    t_all[lay][r - 1] = tr[lay];
                    best[lay] = tr[lay] < best[lay] ? tr[lay] : best[lay];
                }
                r_id[r - 1] = tr[1] / tr[0];
                r_wh[r - 1] = tr[2] / tr[0];
                if (pat) { /* the access pattern alone, prefetched two chunks ahead */
                    double tp[2];
                    team.touch_pf = 1;
                    for (int i = 0; i < 2; i++) {
                        const int lay = (r + i) % 2;
                        team.touch = &st[lay];
                        tp[lay] = team_run(JOB_TOUCH);
                    }
                    r_pat[r - 1] = tp[1] / tp[0];
                }
            }
            for (int lay = 0; lay < 3; lay++) {
                folio_free(work[lay]);
                setup_free(&st[lay]);
            }
            double med[3];
            for (int lay = 0; lay < 3; lay++) {
                qsort(t_all[lay], (size_t)nr, sizeof(double), cmp_d);
                med[lay] = t_all[lay][nr / 2];
            }
            qsort(r_id, (size_t)nr, sizeof(double), cmp_d);
            qsort(r_wh, (size_t)nr, sizeof(double), cmp_d);
            printf("%-28s %-4s %8.3fms %8.3fms %8.3fms %8.3fx %8.3fx  [%.3f %.3f]", cases[c].name,
                   folio_dtype_name(dtypes[dt]), med[0] * 1e3, med[1] * 1e3, med[2] * 1e3,
                   r_id[nr / 2], r_wh[nr / 2], best[1] / best[0], best[2] / best[0]);
            if (pat) {
                qsort(r_pat, (size_t)nr, sizeof(double), cmp_d);
                printf("  %.3fx", r_pat[nr / 2]);
            }
            printf("\n");
        }
    }
    if (only && !cache_only && !read_only) {
        team_stop();
        return 0;
    }

    if (!cache_only) {
        printf("\n(b) decode %d seqs x %d ctx, 12/4 heads, hd 64, block 16 (shuffled pages), %d "
               "rounds\n"
               "    each round: the kernel, touch, touch+pf (rotated order), each right after a\n"
               "    streaming read; medians of times, %% of streaming = median of per-round rate\n"
               "    ratios, each job's against the streaming read before it\n",
               dec_seqs, dec_ctx, reps);
        stream_buf_make();
    }
    for (int dt = 0; dt < N_DTYPES && !cache_only; dt++) {
        if (only_dt >= 0 && (int)dtypes[dt] != only_dt)
            continue;
        struct setup st = small_setup(dec_seqs, dec_ctx, 1, dtypes[dt], LAYOUT_SHUFFLED);
        setup_build(&st);
        const struct dec_fig f = decode_rounds(&st, reps);
        const double kb = kv_bytes(&st), sb = (double)team.buf_n * sizeof(float);
        printf("  %s: %.3f ms, K/V %.1f MB, %.1f GB/s (best %.1f) = %.0f%% of streaming read "
               "(%.1f GB/s, best %.1f: the kernel's median %.0f%% of that), %.1f ns per (key, KV "
               "head) per thread\n",
               folio_dtype_name(dtypes[dt]), f.med[DEC_KERN] * 1e3, kb * 1e-6,
               kb / f.med[DEC_KERN] * 1e-9, kb / f.best[DEC_KERN] * 1e-9, 100.0 * f.ratio[DEC_KERN],
               sb / f.med[DEC_STREAM] * 1e-9, sb / f.best[DEC_STREAM] * 1e-9,
               100.0 * (kb / f.med[DEC_KERN]) / (sb / f.best[DEC_STREAM]),
               f.med[DEC_KERN] * 1e9 * nth / key_heads(&st));
        for (int pf = 0; pf < 2; pf++) {
            const int w = pf ? DEC_TOUCH_PF : DEC_TOUCH;
            printf("    touch%s: the same lines in the kernel's order, no arithmetic: %.3f ms, "
                   "%.1f GB/s = %.0f%% of streaming read; the kernel at %.0f%% of it\n",
                   pf ? "+pf" : "   ", f.med[w] * 1e3, kb / f.med[w] * 1e-9, 100.0 * f.ratio[w],
                   100.0 * f.kern_vs_touch[pf]);
        }
        if (ab)
            printf("    kernel B: %.3f ms = %.0f%% of streaming read; B / A speed %.3f (median of "
                   "per-round ratios)\n",
                   f.med[DEC_KERN_B] * 1e3, 100.0 * f.ratio[DEC_KERN_B], f.b_vs_a);
        setup_free(&st);
    }
    if (!cache_only)
        stream_buf_free();
    if (read_only) {
        team_stop();
        return 0;
    }

    const struct setup rg = small_setup(res_seqs, res_ctx, 1, FOLIO_F32, LAYOUT_IDENTITY);
    printf("\n(e) decode from cache: %d seqs x %d ctx (K/V %.2f MB at f32, run back to back),\n"
           "    identity table, one thread: the kernel's arithmetic rate, to hold against (b)'s\n"
           "    per-thread rate\n",
           res_seqs, res_ctx,
           (double)rg.n_seqs * rg.ctx * 2 * rg.n_kv * rg.hd * sizeof(float) / (1 << 20));
    for (int dt = 0; dt < N_DTYPES; dt++) {
        if (only_dt >= 0 && (int)dtypes[dt] != only_dt)
            continue;
        struct setup st = small_setup(res_seqs, res_ctx, 1, dtypes[dt], LAYOUT_IDENTITY);
        setup_build(&st);
        const double t = time_resident(&st, reps);
        printf("  %s: %.1f us, %.1f ns per (key, KV head), K/V read at %.1f GB/s\n",
               folio_dtype_name(dtypes[dt]), t * 1e6, t * 1e9 / key_heads(&st),
               kv_bytes(&st) / t * 1e-9);
        if (ab) {
            double tb;
            const double r = ab_rounds(&st, reps, time_resident, &tb);
            printf("    kernel B: %.1f ns per (key, KV head); B / A speed %.3f (median of 5 "
                   "rounds)\n",
                   tb * 1e9 / key_heads(&st), r);
        }
        setup_free(&st);
    }
    if (cache_only) {
        team_stop();
        return 0;
    }

    run_fresh(reps, only_dt);
    team_stop();
    return 0;
}
