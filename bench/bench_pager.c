/*
 * bench/bench_pager.c — nanoseconds per pager operation on a large pool.
 *
 *   bench_pager [--quick] [--blocks N] [--block-size B] [--lifo]
 *
 * Pool: 100,000 blocks of 16 slots by default, bookkeeping only (no_arena:
 * the K/V bytes do not matter to these figures), except the copy-on-write
 * line, which copies real blocks (4 layers x 2 KV heads x 64 dims, f16 =
 * 32 KiB per block).  Each line times a loop of one operation and prints
 * ns per operation.  Runs in about a second; --quick runs a tenth.
 * --lifo allocates with PAGER_ALLOC_LIFO (the block freed last) instead of
 * the default locality policy, for A/B in one binary.  The "fragmented"
 * line grows 64 tables one token each in turn in a pool whose free blocks
 * are scattered single ids (every allocation then searches the run tree).
 *
 * A build with -Dchecks=true runs pager_check after every operation (a walk
 * of the whole pool): the figures are then meaningless and the pool is
 * shrunk so the run still ends quickly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/pager.h"

static int die(const char *what, int rc)
{
    fprintf(stderr, "bench_pager: %s failed: %d\n", what, rc);
    exit(1);
}

#define OK(call)                                                                                   \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != 0)                                                                              \
            die(#call, rc_);                                                                       \
    } while (0)

static void report(const char *what, uint64_t ns, long ops, const char *unit)
{
    printf("  %-44s %10.1f ns/%s   (%ld %ss)\n", what, ops ? (double)ns / (double)ops : 0.0, unit,
           ops, unit);
}

static uint32_t lcg = 12345;
static int32_t tok(void)
{
    lcg = lcg * 1664525u + 1013904223u;
    return (int32_t)(lcg >> 8) & 0x7fff;
}

int main(int argc, char **argv)
{
    int quick = 0, lifo = 0;
    int32_t nblocks = 100000, bs = 16;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--blocks") && i + 1 < argc)
            nblocks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--block-size") && i + 1 < argc)
            bs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--lifo"))
            lifo = 1;
        else {
            fprintf(stderr,
                    "usage: bench_pager [--quick] [--blocks N] [--block-size B] [--lifo]\n");
            return 2;
        }
    }
    int scale = quick ? 1 : 10, div = 1;
#if FOLIO_CHECKS
    printf("NOTE: built with -Dchecks=true (pager_check after every operation): figures are\n"
           "      not representative; pool shrunk to 2,000 blocks.\n");
    if (nblocks > 2000)
        nblocks = 2000;
    scale = 1;
    div = 50;
#endif
    struct pager_config cfg = {.num_blocks = nblocks,
                               .block_size = bs,
                               .n_layers = 4,
                               .n_kv_heads = 2,
                               .head_dim = 64,
                               .dtype = FOLIO_F16,
                               .no_arena = true,
                               .alloc = lifo ? PAGER_ALLOC_LIFO : PAGER_ALLOC_LOCAL};
    pager_t *pg;
    OK(pager_init(&pg, &cfg));
    printf("bench_pager: %d blocks x %d slots (no arena unless noted), %s allocation%s\n", nblocks,
           bs, lifo ? "LIFO" : "locality", quick ? ", --quick" : "");

    /* Token streams. */
    int64_t ntok = (int64_t)nblocks * bs;
    int32_t *stream = malloc((size_t)ntok * sizeof(int32_t));
    if (!stream)
        return 1;
    for (int64_t i = 0; i < ntok; i++)
        stream[i] = tok();
    pager_seq_t *s;
    uint64_t t0;
    long ops;

    /* Append token by token until the pool is full (one allocation every
     * bs tokens), then free the table. */
    OK(pager_seq_new(pg, 0, 0, 0, &s));
    int64_t fill = ntok / 2;
    t0 = folio_now_ns();
    for (int64_t i = 0; i < fill; i++)
        OK(pager_seq_append(pg, s, &stream[i], 1));
    report("append, token by token (half the pool)", folio_now_ns() - t0, (long)fill, "token");
    t0 = folio_now_ns();
    pager_seq_free(pg, s);
    report("free a table (per block released)", folio_now_ns() - t0, (long)(fill / bs), "block");

    /* Append in chunks of 512. */
    OK(pager_seq_new(pg, 0, 0, 0, &s));
    t0 = folio_now_ns();
    ops = 0;
    for (int64_t i = 0; i + 512 <= fill; i += 512, ops++)
        OK(pager_seq_append(pg, s, &stream[i], 512));
    report("append, chunks of 512 tokens", folio_now_ns() - t0, ops * 512, "token");

    /* Allocate + free one block at the end of a long table. */
    long reps = 100000L * scale / div;
    t0 = folio_now_ns();
    for (long i = 0; i < reps; i++) {
        OK(pager_seq_append(pg, s, stream, bs));
        OK(pager_seq_truncate(pg, s, pager_seq_len(s) - bs));
    }
    report("allocate + free one block (append bs, truncate)", folio_now_ns() - t0, reps, "pair");
    pager_seq_free(pg, s);

    /* Fragmented: one-block tables over the whole pool, every other one
     * freed, then 64 tables grow one token each in turn until it is full. */
    {
        pager_seq_t **one = malloc(sizeof(pager_seq_t *) * (size_t)nblocks);
        pager_seq_t *grow[64];
        if (!one)
            return 1;
        for (int32_t i = 0; i < nblocks; i++) {
            OK(pager_seq_new(pg, 0, 0, 0, &one[i]));
            OK(pager_seq_append(pg, one[i], stream, 1));
        }
        for (int32_t i = 0; i < nblocks; i += 2)
            pager_seq_free(pg, one[i]);
        for (int k = 0; k < 64; k++)
            OK(pager_seq_new(pg, 0, 0, 0, &grow[k]));
        long appended = 0;
        t0 = folio_now_ns();
        for (int64_t i = 0; pager_blocks_available(pg) > 0; i++) {
            int k = (int)(i % 64);
            if (pager_seq_append(pg, grow[k], &stream[i % ntok], 1) != 0)
                break;
            appended++;
        }
        report("fragmented: 64 tables in turn, token by token", folio_now_ns() - t0, appended,
               "token");
        for (int k = 0; k < 64; k++)
            pager_seq_free(pg, grow[k]);
        for (int32_t i = 1; i < nblocks; i += 2)
            pager_seq_free(pg, one[i]);
        free(one);
    }

    /* Fork a 4096-token table and free the child. */
    OK(pager_seq_new(pg, 0, 0, 0, &s));
    OK(pager_seq_append(pg, s, stream, 4096 + bs / 2));
    reps = 2000L * scale / div;
    t0 = folio_now_ns();
    for (long i = 0; i < reps; i++) {
        pager_seq_t *c;
        OK(pager_seq_fork(pg, s, 1, 1, &c));
        pager_seq_free(pg, c);
    }
    report("fork + free, 4104 tokens (257 blocks)", folio_now_ns() - t0, reps, "fork");
    pager_seq_free(pg, s);

    /* Prefix cache: a 2048-token prompt cached (128 blocks). */
    int32_t plen = 2048 + 1;
    OK(pager_seq_new(pg, 7, 0, 0, &s));
    OK(pager_seq_append(pg, s, stream, plen));
    t0 = folio_now_ns();
    pager_seq_mark_computed(pg, s, plen);
    report("mark computed (hash + insert, per block)", folio_now_ns() - t0, (plen - 1) / bs,
           "block");
    pager_seq_free(pg, s);
    reps = 20000L * scale / div;
    volatile int32_t sink = 0;
    t0 = folio_now_ns();
    for (long i = 0; i < reps; i++)
        sink += pager_prefix_match(pg, 7, stream, plen);
    uint64_t dt = folio_now_ns() - t0;
    report("prefix lookup, hit of 2048 tokens", dt, reps, "lookup");
    report("  same, per block matched", dt, reps * ((plen - 1) / bs), "block");
    int32_t *miss = malloc((size_t)plen * sizeof(int32_t));
    memcpy(miss, stream, (size_t)plen * sizeof(int32_t));
    miss[0] ^= 1;
    reps *= 10;
    t0 = folio_now_ns();
    for (long i = 0; i < reps; i++)
        sink += pager_prefix_match(pg, 7, miss, plen);
    report("prefix lookup, miss", folio_now_ns() - t0, reps, "lookup");
    reps = 2000L * scale / div;
    t0 = folio_now_ns();
    for (long i = 0; i < reps; i++) {
        int32_t hit;
        OK(pager_seq_new(pg, 7, 0, 0, &s));
        OK(pager_seq_adopt_prefix(pg, s, stream, plen, &hit));
        pager_seq_free(pg, s);
    }
    report("new + adopt 2048 cached tokens + free", folio_now_ns() - t0, reps, "seq");
    (void)sink;
    free(miss);

    struct pager_stats st;
    pager_stats_get(pg, &st);
    printf("  pool after: %lld free, %lld used, %lld cached; %lld prefix hits / %lld queried "
           "tokens\n",
           (long long)st.blocks_free, (long long)st.blocks_used, (long long)st.blocks_cached,
           (long long)st.prefix_hits, (long long)st.prefix_queries);
    pager_free(pg);

    /* Copy-on-write with real K/V: fork a table with a partial last block
     * and append to the child. */
    cfg.num_blocks = 1024;
    cfg.no_arena = false;
    OK(pager_init(&pg, &cfg));
    pager_stats_get(pg, &st);
    OK(pager_seq_new(pg, 0, 0, 0, &s));
    OK(pager_seq_append(pg, s, stream, 64 + bs / 2));
    reps = 20000L * scale / div;
    t0 = folio_now_ns();
    for (long i = 0; i < reps; i++) {
        pager_seq_t *c;
        OK(pager_seq_fork(pg, s, 1, 1, &c));
        OK(pager_seq_append(pg, c, stream, 1));
        pager_seq_free(pg, c);
    }
    char what[80];
    snprintf(what, sizeof what, "fork + CoW append + free (%zu KiB block)",
             st.bytes_per_block / 1024);
    report(what, folio_now_ns() - t0, reps, "fork");
    pager_seq_free(pg, s);
    pager_free(pg);
    free(stream);
    return 0;
}
