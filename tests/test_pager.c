/*
 * tests/test_pager.c — unit tests of the pager, one behaviour each: config
 * validation, arena geometry, append and slots, all-or-nothing -ENOSPC,
 * copy-on-write after fork, truncation (also into a cached block), the
 * prefix cache (adopt, match, salts, dedupe, LRU eviction order, forced
 * key collisions), stats, block info, dump, and a sweep that fails the Nth
 * allocation of a scripted scenario until it completes.
 *
 * Every test calls pager_check() after each operation (through ok()).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "folio/pager.h"
#include "../pager/pager_internal.h"

static void ok(const pager_t *pg)
{
    char msg[256];
    if (pager_check(pg, msg, sizeof msg) != 0)
        fail_msg("pager_check: %s", msg);
}

static struct pager_config small_cfg(int32_t blocks, int32_t bs)
{
    struct pager_config c = {.num_blocks = blocks,
                             .block_size = bs,
                             .n_layers = 2,
                             .n_kv_heads = 2,
                             .head_dim = 4,
                             .dtype = FOLIO_F32,
                             .no_arena = false};
    return c;
}

/* A pool with allocation policy `alloc`: tests that follow cached blocks
 * by id use PAGER_ALLOC_LIFO, whose ids do not move between entries (the
 * differential test holds LOCAL to the same cache behaviour). */
static pager_t *mk_alloc(int32_t blocks, int32_t bs, enum pager_alloc alloc)
{
    struct pager_config c = small_cfg(blocks, bs);
    c.alloc = alloc;
    pager_t *pg = NULL;
    assert_int_equal(pager_init(&pg, &c), 0);
    return pg;
}

static pager_t *mk(int32_t blocks, int32_t bs)
{
    struct pager_config c = small_cfg(blocks, bs);
    pager_t *pg = NULL;
    assert_int_equal(pager_init(&pg, &c), 0);
    ok(pg);
    return pg;
}

static pager_seq_t *seq(pager_t *pg, uint64_t salt)
{
    pager_seq_t *s = NULL;
    assert_int_equal(pager_seq_new(pg, salt, 42, 7, &s), 0);
    ok(pg);
    return s;
}

static void append(pager_t *pg, pager_seq_t *s, const int32_t *t, int32_t n)
{
    assert_int_equal(pager_seq_append(pg, s, t, n), 0);
    ok(pg);
}

static void append_range(pager_t *pg, pager_seq_t *s, int32_t first, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        int32_t t = first + i;
        append(pg, s, &t, 1);
    }
}

/* ---- snapshots: the whole observable state ------------------------------- */

#define SNAP_SEQS 8
#define SNAP_MAX  512

struct snap {
    struct pager_stats st;
    int32_t nseq;
    struct {
        int32_t len, computed, nb;
        int32_t table[SNAP_MAX], tokens[SNAP_MAX];
    } s[SNAP_SEQS];
    struct pager_block_info bi[SNAP_MAX];
    int32_t nblocks;
};

static void snap_take(const pager_t *pg, pager_seq_t *const *seqs, int32_t n, struct snap *sn)
{
    memset(sn, 0, sizeof *sn);
    pager_stats_get(pg, &sn->st);
    sn->nseq = n;
    for (int32_t k = 0; k < n; k++) {
        if (!seqs[k])
            continue;
        int32_t nb;
        const int32_t *t = pager_seq_block_table(seqs[k], &nb);
        sn->s[k].len = pager_seq_len(seqs[k]);
        sn->s[k].computed = pager_seq_computed(seqs[k]);
        sn->s[k].nb = nb;
        assert_true(nb <= SNAP_MAX && sn->s[k].len <= SNAP_MAX);
        if (nb)
            memcpy(sn->s[k].table, t, (size_t)nb * sizeof(int32_t));
        if (sn->s[k].len)
            memcpy(sn->s[k].tokens, pager_seq_tokens(seqs[k]),
                   (size_t)sn->s[k].len * sizeof(int32_t));
    }
    sn->nblocks = (int32_t)sn->st.blocks_total;
    for (int32_t b = 0; b < sn->nblocks && b < SNAP_MAX; b++)
        pager_block_info_get(pg, b, &sn->bi[b]);
}

static void snap_same(const struct snap *a, const struct snap *b)
{
    assert_memory_equal(&a->st, &b->st, sizeof a->st);
    assert_memory_equal(a->s, b->s, sizeof a->s);
    assert_memory_equal(a->bi, b->bi, sizeof a->bi);
}

/* ---- config --------------------------------------------------------------- */

static void test_init_invalid(void **state)
{
    (void)state;
    pager_t *pg = (pager_t *)1;
    struct pager_config good = small_cfg(4, 4);
    assert_int_equal(pager_init(NULL, &good), -EINVAL);
    assert_int_equal(pager_init(&pg, NULL), -EINVAL);
    struct pager_config bad[] = {
        small_cfg(0, 4),    small_cfg(-1, 4), small_cfg(4, 0),
        small_cfg(4, 1025), small_cfg(4, -3), small_cfg((1 << 30) + 1, 4),
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(bad); i++)
        assert_int_equal(pager_init(&pg, &bad[i]), -EINVAL);
    struct pager_config c = good;
    c.n_layers = 0;
    assert_int_equal(pager_init(&pg, &c), -EINVAL);
    c = good;
    c.n_kv_heads = 0;
    assert_int_equal(pager_init(&pg, &c), -EINVAL);
    c = good;
    c.head_dim = -1;
    assert_int_equal(pager_init(&pg, &c), -EINVAL);
    c = good;
    c.dtype = (enum folio_dtype)9;
    assert_int_equal(pager_init(&pg, &c), -EINVAL);
    /* Geometry overflowing size_t. */
    c = good;
    c.num_blocks = 1 << 30;
    c.block_size = 1024;
    c.n_layers = c.n_kv_heads = c.head_dim = INT32_MAX;
    assert_int_equal(pager_init(&pg, &c), -EINVAL);
    /* Edges that are valid. */
    pager_t *p2 = NULL;
    c = small_cfg(1, 1024);
    c.no_arena = true;
    assert_int_equal(pager_init(&p2, &c), 0);
    ok(p2);
    pager_free(p2);
    pager_free(NULL);
}

static void test_geometry(void **state)
{
    (void)state;
    struct pager_config c = small_cfg(5, 16);
    c.n_layers = 3;
    c.n_kv_heads = 2;
    c.head_dim = 8;
    c.dtype = FOLIO_F16;
    pager_t *pg;
    assert_int_equal(pager_init(&pg, &c), 0);
    struct pager_kv_view v;
    pager_kv_view(pg, &v);
    assert_non_null(v.base);
    assert_int_equal((uintptr_t)v.base % 64, 0);
    assert_int_equal(v.dtype, FOLIO_F16);
    assert_int_equal(v.num_blocks, 5);
    assert_int_equal(v.block_size, 16);
    /* layer-major, K and V apart: per (layer, K|V) the 5 blocks' 2 tiles */
    assert_int_equal(v.head_stride, 16 * 8);
    assert_int_equal(v.block_stride, 2 * 16 * 8);
    assert_int_equal(v.v_offset, 5 * 2 * 16 * 8);
    assert_int_equal(v.layer_stride, 2 * 5 * 2 * 16 * 8);
    struct pager_stats st;
    pager_stats_get(pg, &st);
    assert_int_equal(st.bytes_per_block, 3 * 2 * 2 * 16 * 8 * 2);
    assert_int_equal(st.blocks_total, 5);
    assert_int_equal(st.blocks_free, 5);
    assert_int_equal(pager_block_size(pg), 16);
    assert_int_equal(pager_blocks_available(pg), 5);
    /* The whole arena is writable (ASan would catch an overrun). */
    memset(v.base, 0xab, st.bytes_per_block * 5);
    pager_free(pg);

    c.no_arena = true;
    assert_int_equal(pager_init(&pg, &c), 0);
    pager_kv_view(pg, &v);
    assert_null(v.base);
    assert_int_equal(v.block_stride, 2 * 16 * 8);
    assert_int_equal(v.layer_stride, 2 * 5 * 2 * 16 * 8);
    pager_free(pg);
}

/* The arena's pages: committed when first written (or all at init with
 * prefault); pager_release_pages gives them back only when the pool holds
 * nothing, and they read as zeros after. */
static void test_arena_commit(void **state)
{
    (void)state;
    struct pager_config c = small_cfg(64, 16);
    c.head_dim = 64; /* 32 KiB blocks: a 2 MiB arena */
    pager_t *pg;
    assert_int_equal(pager_init(&pg, &c), 0);
    struct pager_kv_view v;
    pager_kv_view(pg, &v);
    struct pager_stats st;
    pager_stats_get(pg, &st);
    const size_t bytes = st.bytes_per_block * 64;
    assert_int_equal(pager_arena_resident(pg), 0);
    pager_seq_t *s = seq(pg, 0);
    append_range(pg, s, 0, 5);
    int32_t b, off;
    pager_seq_slot(s, 0, &b, &off);
    float *k0 = (float *)v.base + (size_t)b * v.block_stride; /* layer 0, K, head 0 */
    k0[0] = 1.5f;
    const size_t r = pager_arena_resident(pg);
    assert_true(r >= 4096 && r <= bytes);              /* a page, or a huge page: all of it */
    assert_int_equal(pager_release_pages(pg), -EBUSY); /* a block is held */
    assert_true(k0[0] == 1.5f);
    assert_int_equal(pager_arena_resident(pg), r);
    pager_seq_free(pg, s);
    ok(pg);
    assert_int_equal(pager_release_pages(pg), 0);
    assert_int_equal(pager_arena_resident(pg), 0);
    assert_true(k0[0] == 0.0f);
    ok(pg);
    pager_free(pg);

    c.prefault = true;
    assert_int_equal(pager_init(&pg, &c), 0);
    assert_int_equal(pager_arena_resident(pg), bytes);
    pager_free(pg);

    c.no_arena = true;
    assert_int_equal(pager_init(&pg, &c), 0);
    assert_int_equal(pager_arena_resident(pg), 0);
    pager_free(pg);
}

/* ---- append / slots ----------------------------------------------------------- */

static void test_append_slots(void **state)
{
    (void)state;
    pager_t *pg = mk(8, 4);
    pager_seq_t *s = seq(pg, 0);
    assert_int_equal(pager_seq_blocks_needed(pg, s, 0), 0);
    assert_int_equal(pager_seq_blocks_needed(pg, s, 1), 1);
    assert_int_equal(pager_seq_blocks_needed(pg, s, 9), 3);
    int32_t t[10] = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
    append(pg, s, t, 6);
    assert_int_equal(pager_seq_len(s), 6);
    int32_t nb;
    const int32_t *tab = pager_seq_block_table(s, &nb);
    assert_int_equal(nb, 2);
    assert_int_equal(tab[0], 4); /* the middle of the one free run [0, 8) */
    assert_int_equal(tab[1], 5); /* then the next id */
    for (int32_t p = 0; p < 6; p++) {
        int32_t b, off;
        pager_seq_slot(s, p, &b, &off);
        assert_int_equal(b, tab[p / 4]);
        assert_int_equal(off, p % 4);
        assert_int_equal(pager_seq_tokens(s)[p], t[p]);
    }
    /* Appending inside the existing block allocates nothing. */
    assert_int_equal(pager_seq_blocks_needed(pg, s, 2), 0);
    long before = folio_alloc_count();
    append(pg, s, t + 6, 2);
    assert_int_equal(folio_alloc_count(), before);
    struct pager_stats st;
    pager_stats_get(pg, &st);
    assert_int_equal(st.blocks_used, 2);
    assert_int_equal(st.tokens_held, 8);
    assert_int_equal(st.slots_empty, 0);
    append(pg, s, t + 8, 1);
    pager_stats_get(pg, &st);
    assert_int_equal(st.blocks_used, 3);
    assert_int_equal(st.slots_empty, 3);
    /* Errors. */
    assert_int_equal(pager_seq_append(pg, s, NULL, 1), -EINVAL);
    assert_int_equal(pager_seq_append(pg, s, t, -1), -EINVAL);
    assert_int_equal(pager_seq_append(pg, s, t, INT32_MAX), -EINVAL);
    assert_int_equal(pager_seq_append(pg, s, NULL, 0), 0);
    ok(pg);
    pager_free(pg); /* frees the live table too (ASan checks leaks) */
}

/* Bad arguments are -EINVAL and change nothing. */
static void test_bad_args(void **state)
{
    (void)state;
    pager_t *pg = mk(4, 2);
    pager_seq_t *s = seq(pg, 0), *out = NULL;
    int32_t t[2] = {1, 2};
    append(pg, s, t, 2);
    struct snap a, b;
    snap_take(pg, &s, 1, &a);
    assert_int_equal(pager_seq_new(NULL, 0, 0, 0, &out), -EINVAL);
    assert_int_equal(pager_seq_new(pg, 0, 0, 0, NULL), -EINVAL);
    assert_int_equal(pager_seq_fork(pg, NULL, 0, 0, &out), -EINVAL);
    assert_int_equal(pager_seq_fork(pg, s, 0, 0, NULL), -EINVAL);
    assert_int_equal(pager_seq_fork(NULL, s, 0, 0, &out), -EINVAL);
    assert_null(out);
    assert_int_equal(pager_seq_append(NULL, s, t, 1), -EINVAL);
    assert_int_equal(pager_seq_append(pg, NULL, t, 1), -EINVAL);
    assert_int_equal(pager_seq_truncate(NULL, s, 0), -EINVAL);
    assert_int_equal(pager_seq_truncate(pg, NULL, 0), -EINVAL);
    assert_int_equal(pager_seq_adopt_prefix(pg, NULL, t, 2, NULL), -EINVAL);
    assert_int_equal(pager_seq_blocks_needed(pg, s, -3), 0);
    assert_int_equal(pager_prefix_match(pg, 0, NULL, 5), 0);
    assert_int_equal(pager_prefix_match(pg, 0, t, -1), 0);
    pager_seq_mark_computed(pg, NULL, 2);
    pager_seq_mark_computed(pg, s, -1);
    pager_seq_free(pg, NULL);
    ok(pg);
    snap_take(pg, &s, 1, &b);
    snap_same(&a, &b);
    pager_free(pg);
}

/* -ENOSPC, for fresh blocks and for a copy-on-write, changes nothing. */
static void test_enospc_all_or_nothing(void **state)
{
    (void)state;
    pager_t *pg = mk(4, 4);
    pager_seq_t *ss[3] = {seq(pg, 0), NULL, NULL};
    append_range(pg, ss[0], 100, 10); /* 3 blocks */
    assert_int_equal(pager_seq_fork(pg, ss[0], 1, 1, &ss[1]), 0);
    ss[2] = seq(pg, 0);
    append_range(pg, ss[2], 0, 3); /* last block */
    assert_int_equal(pager_blocks_available(pg), 0);

    struct snap a, b;
    snap_take(pg, ss, 3, &a);
    int32_t t[8] = {0};
    /* needs a copy of the shared partial block */
    assert_int_equal(pager_seq_blocks_needed(pg, ss[1], 1), 1);
    assert_int_equal(pager_seq_append(pg, ss[1], t, 1), -ENOSPC);
    ok(pg);
    /* needs 1 + 1 */
    assert_int_equal(pager_seq_blocks_needed(pg, ss[0], 3), 2);
    assert_int_equal(pager_seq_append(pg, ss[0], t, 3), -ENOSPC);
    /* fills its own last block then needs one more */
    assert_int_equal(pager_seq_append(pg, ss[2], t, 2), -ENOSPC);
    ok(pg);
    snap_take(pg, ss, 3, &b);
    snap_same(&a, &b);
    /* Exactly filling the last block works. */
    append(pg, ss[2], t, 1);
    pager_free(pg);
}

/* ---- allocation policy -------------------------------------------------------- */

static const int32_t *table_of(const pager_seq_t *s)
{
    return pager_seq_block_table(s, NULL);
}

/* A growing table gets the id after its last block while that one is free;
 * a new one, or one whose next id is taken, the middle of the longest run
 * of free ids (the leftmost of equals), so interleaved tables each grow in
 * their own run.  A copy-on-write copy follows the block before it too. */
static void test_alloc_consecutive(void **state)
{
    (void)state;
    pager_t *pg = mk(64, 2);
    pager_seq_t *a = seq(pg, 0), *b = seq(pg, 0), *c = seq(pg, 0);
    /* Interleaved growth, one token each per step: 8 blocks each. */
    for (int32_t t = 0; t < 16; t++) {
        append_range(pg, a, t, 1);
        append_range(pg, b, t, 1);
    }
    for (int32_t i = 0; i < 8; i++) {
        assert_int_equal(table_of(a)[i], 32 + i); /* middle of [0, 64) */
        assert_int_equal(table_of(b)[i], 16 + i); /* middle of [0, 32) */
    }
    /* b runs into a at 32: its next block is the middle of the longest
     * free run then, [40, 64) -> 52. */
    append_range(pg, b, 16, 16 * 2); /* 16 blocks: 24..31, then 52.. */
    assert_int_equal(table_of(b)[15], 31);
    assert_int_equal(table_of(b)[16], 40 + 24 / 2);
    assert_int_equal(table_of(b)[23], 59);
    /* c starts in the middle of the longest run left: [0, 16) -> 8. */
    append_range(pg, c, 0, 3);
    assert_int_equal(table_of(c)[0], 8);
    assert_int_equal(table_of(c)[1], 9);
    /* A copy-on-write copy follows the block before the copied one: here
     * that id (9) is the shared block itself, so the middle of [40, 52). */
    pager_seq_t *d = NULL, *e = NULL;
    assert_int_equal(pager_seq_fork(pg, c, 1, 1, &d), 0);
    append_range(pg, c, 3, 1);
    assert_int_equal(table_of(c)[1], 46);
    assert_int_equal(table_of(d)[1], 9);
    /* Once 9 is free again, the next copy of c's last block takes it. */
    pager_seq_free(pg, d);
    assert_int_equal(pager_seq_truncate(pg, c, 3), 0);
    assert_int_equal(pager_seq_fork(pg, c, 1, 1, &e), 0);
    append_range(pg, c, 3, 1);
    assert_int_equal(table_of(c)[1], 9);
    assert_int_equal(table_of(e)[1], 46);
    ok(pg);
    /* With PAGER_ALLOC_LIFO the same program hands out the block freed
     * last: 0, 1, 2, ... from a fresh pool. */
    pager_free(pg);
    struct pager_config cfg = small_cfg(64, 2);
    cfg.alloc = PAGER_ALLOC_LIFO;
    assert_int_equal(pager_init(&pg, &cfg), 0);
    a = seq(pg, 0);
    b = seq(pg, 0);
    for (int32_t t = 0; t < 4; t++) {
        append_range(pg, a, t, 1);
        append_range(pg, b, t, 1);
    }
    assert_int_equal(table_of(a)[0], 0);
    assert_int_equal(table_of(b)[0], 1);
    assert_int_equal(table_of(a)[1], 2);
    cfg.alloc = (enum pager_alloc)7;
    pager_t *bad = NULL;
    assert_int_equal(pager_init(&bad, &cfg), -EINVAL);
    pager_free(pg);
}

/* A warm pool is mostly cached blocks.  A wanted id that holds a cached
 * entry is handed out after the entry moves into the block that would
 * have been taken otherwise (a free one, or the evicted LRU head): the
 * cache finds and reads the moved entries, and evicts what it would have. */
static void test_alloc_through_cache(void **state)
{
    (void)state;
    pager_t *pg = mk(8, 2);
    struct pager_kv_view v;
    pager_kv_view(pg, &v);
    int32_t at[6] = {11, 12, 13, 14, 15, 16};
    pager_seq_t *a = seq(pg, 0);
    append(pg, a, at, 6);
    for (int32_t pos = 0; pos < 6; pos++) {
        int32_t blk, off;
        pager_seq_slot(a, pos, &blk, &off);
        for (int32_t l = 0; l < 2; l++)
            for (int kv = 0; kv < 2; kv++)
                for (int32_t h = 0; h < 2; h++) {
                    float x[4] = {(float)pos, (float)l, (float)kv, (float)h};
                    pager_kv_row_put(&v, blk, l, kv, h, off, x);
                }
    }
    assert_int_equal(table_of(a)[0], 4); /* 4, 5, 6 */
    assert_int_equal(table_of(a)[2], 6);
    pager_seq_mark_computed(pg, a, 6);
    pager_seq_free(pg, a); /* cached; LRU oldest first: 6, 5, 4; free list 0, 1, 2, 3, 7 */
    ok(pg);
    pager_seq_t *p = seq(pg, 1), *r = seq(pg, 1);
    /* p wants the middle of [0, 8): 4, cached: its entry moves to free
     * block 0; then 5, whose entry moves to 1. */
    append_range(pg, p, 100, 4);
    assert_int_equal(table_of(p)[0], 4);
    assert_int_equal(table_of(p)[1], 5);
    /* r: 2 and 3 (free), then the middle of [0, 2): 1, whose entry moves to
     * 7, the last free block. */
    append_range(pg, r, 200, 6);
    assert_int_equal(table_of(r)[0], 2);
    assert_int_equal(table_of(r)[1], 3);
    assert_int_equal(table_of(r)[2], 1);
    struct pager_stats st;
    pager_stats_get(pg, &st);
    assert_int_equal(st.evictions, 0);
    assert_int_equal(st.blocks_free, 0);
    assert_int_equal(st.blocks_cached, 3);
    /* p wants 6, the LRU head: evicted as it would have been anyway. */
    append_range(pg, p, 104, 1);
    assert_int_equal(table_of(p)[2], 6);
    pager_stats_get(pg, &st);
    assert_int_equal(st.evictions, 1);
    assert_int_equal(st.blocks_cached, 2);
    struct pager_block_info bi;
    pager_block_info_get(pg, 0, &bi);
    assert_int_equal(bi.state, PAGER_BLOCK_CACHED);
    pager_block_info_get(pg, 7, &bi);
    assert_int_equal(bi.state, PAGER_BLOCK_CACHED);
    /* a's first two blocks are still cached (its third was evicted)... */
    assert_int_equal(pager_prefix_match(pg, 0, at, 6), 4);
    /* ...and read back what a wrote, from their new ids. */
    pager_seq_t *s = seq(pg, 0);
    int32_t hit = 0;
    assert_int_equal(pager_seq_adopt_prefix(pg, s, at, 5, &hit), 0);
    assert_int_equal(hit, 4);
    ok(pg);
    assert_int_equal(table_of(s)[0], 0);
    assert_int_equal(table_of(s)[1], 7);
    for (int32_t pos = 0; pos < 4; pos++) {
        int32_t blk, off;
        pager_seq_slot(s, pos, &blk, &off);
        for (int32_t l = 0; l < 2; l++)
            for (int kv = 0; kv < 2; kv++)
                for (int32_t h = 0; h < 2; h++) {
                    float x[4];
                    pager_kv_row_get(&v, blk, l, kv, h, off, x);
                    assert_true(x[0] == (float)pos && x[1] == (float)l && x[2] == (float)kv &&
                                x[3] == (float)h);
                }
    }
    pager_free(pg);
}

/* However the free ids are scattered, an allocation succeeds while free +
 * cached blocks cover it, and fails (-ENOSPC, nothing changed) only past
 * that: the policy chooses among free blocks, it never holds one back. */
static void test_alloc_fragmented(void **state)
{
    (void)state;
    uint64_t r = 12345;
    for (int pol = 0; pol < 2; pol++)
        for (int round = 0; round < 8; round++) {
            const int32_t n = 37 + round * 11, bs = 1 + round % 3;
            struct pager_config cfg = small_cfg(n, bs);
            cfg.alloc = pol ? PAGER_ALLOC_LIFO : PAGER_ALLOC_LOCAL;
            pager_t *pg = NULL;
            assert_int_equal(pager_init(&pg, &cfg), 0);
            /* One table per block, then a random half freed (some computed
             * first, so they stay cached): free ids scattered, no long run. */
            pager_seq_t *one[160];
            for (int32_t i = 0; i < n; i++) {
                one[i] = seq(pg, 0);
                append_range(pg, one[i], 1000 * i, bs);
            }
            int32_t kept = 0;
            for (int32_t i = 0; i < n; i++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                if ((r >> 33) % 2) {
                    if ((r >> 40) % 3 == 0)
                        pager_seq_mark_computed(pg, one[i], bs);
                    pager_seq_free(pg, one[i]);
                } else {
                    one[kept++] = one[i];
                }
            }
            ok(pg);
            const int32_t avail = pager_blocks_available(pg);
            assert_int_equal(avail, n - kept);
            pager_seq_t *big = seq(pg, 0);
            /* all of it, in pieces of odd sizes */
            int32_t left = avail * bs, tok = 0;
            while (left > 0) {
                int32_t k = FOLIO_MIN(left, 1 + (tok % 5));
                for (int32_t j = 0; j < k; j++)
                    append_range(pg, big, tok++, 1);
                left -= k;
            }
            assert_int_equal(pager_blocks_available(pg), 0);
            int32_t t = 0;
            assert_int_equal(pager_seq_append(pg, big, &t, 1), -ENOSPC);
            ok(pg);
            /* Every block of the pool is now held exactly once. */
            struct pager_stats st;
            pager_stats_get(pg, &st);
            assert_int_equal(st.blocks_used, n);
            pager_free(pg);
        }
}

/* ---- copy-on-write -------------------------------------------------------------- */

static float *slot_ptr(const pager_t *pg, int32_t block, int32_t layer, int kv, int32_t head,
                       int32_t slot)
{
    struct pager_kv_view v;
    pager_kv_view(pg, &v);
    return (float *)v.base + block * v.block_stride + layer * v.layer_stride + kv * v.v_offset +
           head * v.head_stride + slot * v.head_dim;
}

static void test_fork_cow(void **state)
{
    (void)state;
    pager_t *pg = mk(8, 4);
    pager_seq_t *p = seq(pg, 3);
    append_range(pg, p, 0, 6);
    int32_t last = pager_seq_block_table(p, NULL)[1];
    for (int32_t sl = 0; sl < 2; sl++)
        *slot_ptr(pg, last, 1, 1, 1, sl) = 100.0f + (float)sl;

    pager_seq_t *c;
    assert_int_equal(pager_seq_fork(pg, p, 9, 4, &c), 0);
    ok(pg);
    struct pager_stats st;
    pager_stats_get(pg, &st);
    assert_int_equal(st.blocks_used, 2);
    assert_int_equal(st.blocks_shared, 2);
    assert_int_equal(st.seqs, 2);
    assert_int_equal(st.tokens_held, 12);
    assert_int_equal(st.slots_empty, 2); /* the shared partial block counts once */
    assert_int_equal(pager_seq_len(c), 6);
    assert_memory_equal(pager_seq_tokens(c), pager_seq_tokens(p), 6 * sizeof(int32_t));

    /* The child writes: its partial block is copied first. */
    assert_int_equal(pager_seq_blocks_needed(pg, c, 1), 1);
    int32_t t = 77;
    append(pg, c, &t, 1);
    int32_t nb;
    const int32_t *ct = pager_seq_block_table(c, &nb);
    assert_int_equal(nb, 2);
    assert_int_equal(ct[0], pager_seq_block_table(p, NULL)[0]);
    assert_int_not_equal(ct[1], last);
    assert_int_equal(pager_seq_block_table(p, NULL)[1], last);
    pager_stats_get(pg, &st);
    assert_int_equal(st.cow_copies, 1);
    assert_int_equal(st.blocks_shared, 1);
    /* The copy carries the parent's K/V; the parent's block is untouched. */
    for (int32_t sl = 0; sl < 2; sl++)
        assert_true(*slot_ptr(pg, ct[1], 1, 1, 1, sl) == 100.0f + (float)sl);
    *slot_ptr(pg, ct[1], 1, 1, 1, 2) = -1.0f;
    assert_true(*slot_ptr(pg, last, 1, 1, 1, 0) == 100.0f);
    struct pager_block_info bi;
    pager_block_info_get(pg, ct[1], &bi);
    assert_int_equal(bi.owner, 9);
    assert_int_equal(bi.tenant, 4);
    assert_int_equal(bi.tokens, 3);
    assert_int_equal(bi.refcount, 1);
    pager_block_info_get(pg, last, &bi);
    assert_int_equal(bi.owner, 42);
    /* The parent, now alone on its block, writes in place. */
    append(pg, p, &t, 1);
    assert_int_equal(pager_seq_block_table(p, NULL)[1], last);
    pager_stats_get(pg, &st);
    assert_int_equal(st.cow_copies, 1);

    /* A fork of a table whose last block is full never copies. */
    pager_seq_t *f;
    append(pg, p, &t, 1); /* p: 8 tokens, full */
    assert_int_equal(pager_seq_fork(pg, p, 1, 1, &f), 0);
    assert_int_equal(pager_seq_blocks_needed(pg, f, 1), 1);
    append(pg, f, &t, 1);
    pager_stats_get(pg, &st);
    assert_int_equal(st.cow_copies, 1);
    pager_seq_free(pg, f);
    ok(pg);
    pager_seq_free(pg, c);
    ok(pg);
    pager_seq_free(pg, p);
    ok(pg);
    pager_stats_get(pg, &st);
    assert_int_equal(st.blocks_free, 8);
    assert_int_equal(st.seqs, 0);
    pager_free(pg);
}

/* ---- truncate --------------------------------------------------------------------- */

static void test_truncate(void **state)
{
    (void)state;
    pager_t *pg = mk(8, 4);
    pager_seq_t *s = seq(pg, 0);
    append_range(pg, s, 0, 11);
    pager_seq_mark_computed(pg, s, 11);
    ok(pg);
    assert_int_equal(pager_seq_truncate(pg, s, 12), -EINVAL);
    assert_int_equal(pager_seq_truncate(pg, s, -1), -EINVAL);
    assert_int_equal(pager_seq_truncate(pg, s, 5), 0);
    ok(pg);
    assert_int_equal(pager_seq_len(s), 5);
    assert_int_equal(pager_seq_computed(s), 5);
    int32_t nb;
    pager_seq_block_table(s, &nb);
    assert_int_equal(nb, 2);
    struct pager_stats st;
    pager_stats_get(pg, &st);
    /* blocks 0 and 1 were full and computed: cached; block 2 was not */
    assert_int_equal(st.blocks_used, 2);
    assert_int_equal(st.blocks_free, 6);
    assert_int_equal(st.tokens_held, 5);
    assert_int_equal(pager_seq_truncate(pg, s, 0), 0);
    ok(pg);
    pager_stats_get(pg, &st);
    assert_int_equal(st.blocks_used, 0);
    assert_int_equal(st.blocks_cached, 2);
    assert_int_equal(st.blocks_free, 6);
    /* The empty table accepts a prefix again. */
    int32_t toks[11];
    for (int32_t i = 0; i < 11; i++)
        toks[i] = i;
    int32_t hit;
    assert_int_equal(pager_seq_adopt_prefix(pg, s, toks, 11, &hit), 0);
    assert_int_equal(hit, 8);
    pager_free(pg);
}

/* Truncating into a cached (hashed) block then writing never changes the
 * cached block: the write copies it, whether the token is the same or not. */
static void test_truncate_into_cached_block(void **state)
{
    (void)state;
    pager_t *pg = mk_alloc(8, 4, PAGER_ALLOC_LIFO);
    pager_seq_t *s = seq(pg, 5);
    append_range(pg, s, 0, 9);
    pager_seq_mark_computed(pg, s, 9);
    ok(pg);
    int32_t b1 = pager_seq_block_table(s, NULL)[1];
    *slot_ptr(pg, b1, 0, 0, 0, 3) = 7.0f;
    int32_t prompt[9] = {0, 1, 2, 3, 4, 5, 6, 7, 100};
    assert_int_equal(pager_prefix_match(pg, 5, prompt, 9), 8);

    assert_int_equal(pager_seq_truncate(pg, s, 6), 0);
    ok(pg);
    int32_t t = 99;
    append(pg, s, &t, 1);
    struct pager_stats st;
    pager_stats_get(pg, &st);
    assert_int_equal(st.cow_copies, 1);
    int32_t nb1 = pager_seq_block_table(s, NULL)[1];
    assert_int_not_equal(nb1, b1);
    /* The cached block keeps its tokens and K/V and still matches. */
    struct pager_block_info bi;
    pager_block_info_get(pg, b1, &bi);
    assert_int_equal(bi.state, PAGER_BLOCK_CACHED);
    assert_int_equal(pager_prefix_match(pg, 5, prompt, 9), 8);
    assert_true(*slot_ptr(pg, b1, 0, 0, 0, 3) == 7.0f);

    /* Same again, re-appending the very token that was there. */
    assert_int_equal(pager_seq_truncate(pg, s, 4), 0);
    append_range(pg, s, 4, 4); /* 4..7: the original block 1 content */
    pager_stats_get(pg, &st);
    assert_int_equal(st.cow_copies, 1); /* block 1 was dropped whole, fresh one */
    /* Once computed, the duplicate switches to the cached block. */
    int32_t fresh = pager_seq_block_table(s, NULL)[1];
    assert_int_not_equal(fresh, b1);
    pager_seq_mark_computed(pg, s, 8);
    ok(pg);
    assert_int_equal(pager_seq_block_table(s, NULL)[1], b1);
    pager_block_info_get(pg, fresh, &bi);
    assert_int_equal(bi.state, PAGER_BLOCK_FREE);
    pager_block_info_get(pg, b1, &bi);
    assert_int_equal(bi.state, PAGER_BLOCK_USED);
    pager_free(pg);
}

/* ---- prefix cache ------------------------------------------------------------------- */

static void test_prefix_adopt(void **state)
{
    (void)state;
    pager_t *pg = mk(16, 4);
    int32_t prompt[14];
    for (int32_t i = 0; i < 14; i++)
        prompt[i] = 1000 + i;
    pager_seq_t *a = seq(pg, 1);
    append(pg, a, prompt, 14);
    /* Not computed yet: nothing to match. */
    assert_int_equal(pager_prefix_match(pg, 1, prompt, 14), 0);
    pager_seq_mark_computed(pg, a, 6);
    ok(pg);
    assert_int_equal(pager_prefix_match(pg, 1, prompt, 14), 4);
    pager_seq_mark_computed(pg, a, 100); /* clamps to the length */
    assert_int_equal(pager_seq_computed(a), 14);
    pager_seq_mark_computed(pg, a, 3); /* monotonic */
    assert_int_equal(pager_seq_computed(a), 14);
    ok(pg);
    assert_int_equal(pager_prefix_match(pg, 1, prompt, 14), 12);
    /* Never the whole prompt. */
    assert_int_equal(pager_prefix_match(pg, 1, prompt, 12), 8);
    assert_int_equal(pager_prefix_match(pg, 1, prompt, 13), 12);
    assert_int_equal(pager_prefix_match(pg, 1, prompt, 4), 0);
    assert_int_equal(pager_prefix_match(pg, 1, prompt, 0), 0);
    /* Another salt never shares. */
    assert_int_equal(pager_prefix_match(pg, 2, prompt, 14), 0);
    /* A different token in block 1 stops the match there. */
    int32_t other[14];
    memcpy(other, prompt, sizeof other);
    other[5] = -5;
    assert_int_equal(pager_prefix_match(pg, 1, other, 14), 4);

    struct pager_stats st;
    pager_stats_get(pg, &st);
    assert_int_equal(st.prefix_queries, 0); /* match does not count */

    pager_seq_t *b = seq(pg, 1), *c = seq(pg, 2);
    int32_t hit = -1;
    assert_int_equal(pager_seq_adopt_prefix(pg, b, prompt, 13, &hit), 0);
    ok(pg);
    assert_int_equal(hit, 12);
    assert_int_equal(pager_seq_len(b), 12);
    assert_int_equal(pager_seq_computed(b), 12);
    assert_memory_equal(pager_seq_block_table(b, NULL), pager_seq_block_table(a, NULL),
                        3 * sizeof(int32_t));
    assert_int_equal(pager_seq_adopt_prefix(pg, c, prompt, 13, &hit), 0);
    assert_int_equal(hit, 0);
    pager_stats_get(pg, &st);
    assert_int_equal(st.prefix_queries, 26);
    assert_int_equal(st.prefix_hits, 12);
    assert_int_equal(st.blocks_shared, 3);
    /* Errors: a non-empty table, bad arguments. */
    assert_int_equal(pager_seq_adopt_prefix(pg, b, prompt, 13, &hit), -EINVAL);
    assert_int_equal(hit, 0);
    assert_int_equal(pager_seq_adopt_prefix(pg, c, prompt, -1, &hit), -EINVAL);
    assert_int_equal(pager_seq_adopt_prefix(pg, c, NULL, 3, &hit), -EINVAL);
    ok(pg);
    /* After everyone leaves, the blocks wait on the LRU and are reused. */
    pager_seq_free(pg, a);
    pager_seq_free(pg, b);
    ok(pg);
    pager_stats_get(pg, &st);
    assert_int_equal(st.blocks_cached, 3);
    pager_seq_t *d = seq(pg, 1);
    assert_int_equal(pager_seq_adopt_prefix(pg, d, prompt, 14, &hit), 0);
    assert_int_equal(hit, 12);
    pager_stats_get(pg, &st);
    assert_int_equal(st.blocks_cached, 0);
    assert_int_equal(st.blocks_used, 3);
    append(pg, d, prompt + 12, 2);
    pager_free(pg);
}

/* Two tables computing the same prompt end up on the same blocks. */
static void test_prefix_dedupe(void **state)
{
    (void)state;
    pager_t *pg = mk(8, 2);
    int32_t t[4] = {1, 2, 3, 4};
    pager_seq_t *a = seq(pg, 0), *b = seq(pg, 0);
    append(pg, a, t, 4);
    append(pg, b, t, 4);
    pager_seq_mark_computed(pg, a, 4);
    ok(pg);
    struct pager_stats st;
    pager_stats_get(pg, &st);
    assert_int_equal(st.blocks_used, 4);
    pager_seq_mark_computed(pg, b, 4);
    ok(pg);
    assert_memory_equal(pager_seq_block_table(a, NULL), pager_seq_block_table(b, NULL),
                        2 * sizeof(int32_t));
    pager_stats_get(pg, &st);
    assert_int_equal(st.blocks_used, 2);
    assert_int_equal(st.blocks_shared, 2);
    assert_int_equal(st.blocks_free, 6);

    /* A duplicate still shared with a fork sibling is left alone. */
    pager_seq_t *c = seq(pg, 0), *d;
    append(pg, c, t, 4);
    assert_int_equal(pager_seq_fork(pg, c, 0, 0, &d), 0);
    int32_t cb0 = pager_seq_block_table(c, NULL)[0];
    pager_seq_mark_computed(pg, c, 4);
    ok(pg);
    assert_int_equal(pager_seq_block_table(c, NULL)[0], cb0);
    /* ...and taken once the sibling is gone. */
    pager_seq_free(pg, d);
    pager_seq_mark_computed(pg, c, 4);
    ok(pg);
    assert_memory_equal(pager_seq_block_table(a, NULL), pager_seq_block_table(c, NULL),
                        2 * sizeof(int32_t));
    pager_free(pg);
}

/* Fresh allocations evict the least recently used cached block first, and
 * the children of a chain before its parents. */
static void lru_eviction(enum pager_alloc alloc);

static void test_lru_eviction(void **state)
{
    (void)state;
    for (int lifo = 0; lifo < 2; lifo++) {
        lru_eviction(lifo ? PAGER_ALLOC_LIFO : PAGER_ALLOC_LOCAL);
    }
}

/* The same under either policy; with LIFO also which ids. */
static void lru_eviction(enum pager_alloc alloc)
{
    pager_t *pg = mk_alloc(4, 2, alloc);
    int32_t p[3][3] = {{1, 1, 0}, {2, 2, 0}, {3, 3, 0}};
    int32_t blk[3];
    for (int i = 0; i < 3; i++) {
        pager_seq_t *s = seq(pg, 0);
        append(pg, s, p[i], 2);
        pager_seq_mark_computed(pg, s, 2);
        blk[i] = pager_seq_block_table(s, NULL)[0];
        pager_seq_free(pg, s);
        ok(pg);
    }
    /* Touch prompt 0 again: it becomes the most recent. */
    pager_seq_t *s = seq(pg, 0);
    int32_t hit;
    assert_int_equal(pager_seq_adopt_prefix(pg, s, p[0], 3, &hit), 0);
    assert_int_equal(hit, 2);
    pager_seq_free(pg, s);
    ok(pg);
    /* LRU now: 1, 2, 0.  One free block left; take 3 blocks. */
    s = seq(pg, 0);
    int32_t t[6] = {9, 9, 9, 9, 9, 9};
    append(pg, s, t, 4);
    struct pager_stats st;
    pager_stats_get(pg, &st);
    assert_int_equal(st.evictions, 1);
    assert_int_equal(pager_prefix_match(pg, 0, p[1], 3), 0);
    assert_int_equal(pager_prefix_match(pg, 0, p[2], 3), 2);
    assert_int_equal(pager_prefix_match(pg, 0, p[0], 3), 2);
    if (alloc == PAGER_ALLOC_LIFO)
        assert_int_equal(pager_seq_block_table(s, NULL)[1], blk[1]);
    append(pg, s, t, 2);
    assert_int_equal(pager_prefix_match(pg, 0, p[2], 3), 0);
    assert_int_equal(pager_prefix_match(pg, 0, p[0], 3), 2);
    pager_seq_free(pg, s);
    ok(pg);

    /* A chain of 3 blocks, freed: leaves go first. */
    pager_t *pg2 = mk_alloc(3, 1, alloc);
    pager_seq_t *c = seq(pg2, 0);
    int32_t ct[3] = {5, 6, 7};
    append(pg2, c, ct, 3);
    pager_seq_mark_computed(pg2, c, 3);
    pager_seq_free(pg2, c);
    ok(pg2);
    int32_t q[4] = {5, 6, 7, 8};
    assert_int_equal(pager_prefix_match(pg2, 0, q, 4), 3);
    c = seq(pg2, 0);
    append(pg2, c, t, 1);
    assert_int_equal(pager_prefix_match(pg2, 0, q, 4), 2);
    append(pg2, c, t, 1);
    assert_int_equal(pager_prefix_match(pg2, 0, q, 4), 1);
    pager_free(pg2);
    pager_free(pg);
}

/* With every key forced equal, lookups still return only exact matches. */
static void test_key_collisions(void **state)
{
    (void)state;
    pager_t *pg = mk(32, 2);
    assert_int_equal(pager__test_set_key_mask(pg, 0), 0);
    int32_t prompts[6][5] = {
        {1, 2, 3, 4, 0}, {1, 2, 4, 3, 0}, {2, 1, 3, 4, 0},
        {1, 2, 3, 5, 0}, {3, 4, 1, 2, 0}, {1, 3, 2, 4, 0},
    };
    uint64_t salts[2] = {0, 1};
    for (int si = 0; si < 2; si++)
        for (int i = 0; i < 5; i++) {
            pager_seq_t *s = seq(pg, salts[si]);
            append(pg, s, prompts[i], 4);
            pager_seq_mark_computed(pg, s, 4);
            if (si == 0 && i == 0)
                assert_int_equal(pager__test_set_key_mask(pg, 0), -EBUSY);
            pager_seq_free(pg, s);
            ok(pg);
        }
    for (int si = 0; si < 2; si++) {
        for (int i = 0; i < 5; i++) {
            assert_int_equal(pager_prefix_match(pg, salts[si], prompts[i], 5), 4);
            pager_seq_t *s = seq(pg, salts[si]);
            int32_t hit;
            assert_int_equal(pager_seq_adopt_prefix(pg, s, prompts[i], 5, &hit), 0);
            assert_int_equal(hit, 4);
            assert_memory_equal(pager_seq_tokens(s), prompts[i], 4 * sizeof(int32_t));
            /* The blocks really hold these tokens. */
            struct pager_block_info bi;
            pager_block_info_get(pg, pager_seq_block_table(s, NULL)[1], &bi);
            assert_int_equal(bi.tokens, 2);
            pager_seq_free(pg, s);
            ok(pg);
        }
        /* {1,3,..}: the first block {1,3} was never cached. */
        assert_int_equal(pager_prefix_match(pg, salts[si], prompts[5], 5), 0);
        assert_int_equal(pager_prefix_match(pg, salts[si], prompts[3], 5), 4);
    }
    assert_int_equal(pager_prefix_match(pg, 2, prompts[0], 5), 0);
    pager_free(pg);
}

/* ---- stats, block info, dump ---------------------------------------------------------- */

static void test_info_dump(void **state)
{
    (void)state;
    pager_t *pg = mk(10, 4);
    pager_seq_t *a;
    assert_int_equal(pager_seq_new(pg, 0, 1234, 77, &a), 0);
    append_range(pg, a, 0, 9);
    pager_seq_mark_computed(pg, a, 8);
    pager_seq_t *b;
    assert_int_equal(pager_seq_fork(pg, a, 5, 6, &b), 0);
    assert_int_equal(pager_seq_truncate(pg, b, 6), 0);
    pager_seq_t *c = seq(pg, 0);
    append_range(pg, c, 50, 4);
    pager_seq_mark_computed(pg, c, 4);
    const int32_t cb = pager_seq_block_table(c, NULL)[0];
    pager_seq_free(pg, c);
    ok(pg);

    struct pager_block_info bi;
    const int32_t *ta = pager_seq_block_table(a, NULL);
    pager_block_info_get(pg, ta[0], &bi);
    assert_int_equal(bi.state, PAGER_BLOCK_USED);
    assert_int_equal(bi.refcount, 2);
    assert_int_equal(bi.tokens, 4);
    assert_int_equal(bi.owner, 1234);
    assert_int_equal(bi.tenant, 77);
    pager_block_info_get(pg, ta[1], &bi); /* full for a, 2 slots for b */
    assert_int_equal(bi.tokens, 4);
    pager_block_info_get(pg, ta[2], &bi);
    assert_int_equal(bi.refcount, 1);
    assert_int_equal(bi.tokens, 1);
    pager_block_info_get(pg, cb, &bi);
    assert_int_equal(bi.state, PAGER_BLOCK_CACHED);
    assert_int_equal(bi.tokens, 4);
    pager_block_info_get(pg, 9, &bi);
    assert_int_equal(bi.state, PAGER_BLOCK_FREE);
    assert_int_equal(bi.tokens, 0);
    pager_block_info_get(pg, 99, &bi); /* out of range: reported free */
    assert_int_equal(bi.state, PAGER_BLOCK_FREE);

    struct pager_stats st;
    pager_stats_get(pg, &st);
    assert_int_equal(st.blocks_used, 3);
    assert_int_equal(st.blocks_cached, 1);
    assert_int_equal(st.blocks_free, 6);
    assert_int_equal(st.blocks_shared, 2);
    assert_int_equal(st.tokens_held, 15);
    assert_int_equal(st.slots_empty, 3);

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    pager_dump(pg, f);
    fclose(f);
    /* a: 5, 6, 7 (the middle of the empty pool on); c: 2, the middle of [0, 5) */
    assert_int_equal(ta[0], 5);
    assert_int_equal(cb, 2);
    assert_non_null(strstr(text, "..c..221..\n"));
    assert_non_null(strstr(text, "free 6 used 3 cached 1 shared 2"));
    assert_non_null(strstr(text, "tokens_held 15 slots_empty 3"));
    free(text);

    /* pager_check notices corruption. */
    char msg[128];
    pg->blk[ta[2]].refcount++;
    assert_int_equal(pager_check(pg, msg, sizeof msg), -EUCLEAN);
    assert_true(strlen(msg) > 0);
    pg->blk[ta[2]].refcount--;
    pg->nfree--;
    assert_int_equal(pager_check(pg, msg, sizeof msg), -EUCLEAN);
    pg->nfree++;
    int32_t tok = pg->btok[(size_t)ta[0] * 4];
    pg->btok[(size_t)ta[0] * 4] = tok + 1;
    assert_int_equal(pager_check(pg, NULL, 0), -EUCLEAN);
    pg->btok[(size_t)ta[0] * 4] = tok;
    ok(pg);
    pager_free(pg);
}

/* ---- allocation failures ---------------------------------------------------------------- */

/* Runs a scripted scenario; returns 1 if it completed, 0 if an operation
 * failed (then it checked that the failure left everything unchanged). */
static int scenario(void)
{
    pager_t *pg = NULL;
    struct pager_config c = small_cfg(64, 2);
    int r = pager_init(&pg, &c);
    if (r) {
        assert_int_equal(r, -ENOMEM);
        assert_null(pg);
        return 0;
    }
    ok(pg);
    pager_seq_t *ss[4] = {NULL, NULL, NULL, NULL};
    struct snap before, after;
    int32_t toks[64];
    for (int32_t i = 0; i < 64; i++)
        toks[i] = i % 7;
    int done = 0;

#define STEP(call)                                                                                 \
    do {                                                                                           \
        snap_take(pg, ss, 4, &before);                                                             \
        r = (call);                                                                                \
        ok(pg);                                                                                    \
        if (r) {                                                                                   \
            assert_int_equal(r, -ENOMEM);                                                          \
            snap_take(pg, ss, 4, &after);                                                          \
            snap_same(&before, &after);                                                            \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

    STEP(pager_seq_new(pg, 1, 1, 1, &ss[0]));
    STEP(pager_seq_new(pg, 1, 2, 2, &ss[1]));
    for (int i = 0; i < 40; i++) /* grows the table 4 -> 8 -> 16 -> 32 */
        STEP(pager_seq_append(pg, ss[0], toks + i, 1));
    pager_seq_mark_computed(pg, ss[0], 40);
    ok(pg);
    STEP(pager_seq_append(pg, ss[1], toks, 30)); /* one growth, large */
    STEP(pager_seq_fork(pg, ss[0], 3, 3, &ss[2]));
    STEP(pager_seq_append(pg, ss[2], toks, 5));
    STEP(pager_seq_new(pg, 1, 4, 4, &ss[3]));
    int32_t hit;
    STEP(pager_seq_adopt_prefix(pg, ss[3], toks, 41, &hit));
    assert_int_equal(hit, 40);
    STEP(pager_seq_truncate(pg, ss[2], 3));
    STEP(pager_seq_append(pg, ss[2], toks, 20));
    done = 1;
out:
    pager_free(pg);
    return done;
#undef STEP
}

static void test_alloc_failure_sweep(void **state)
{
    (void)state;
    int failures = 0;
    for (long n = 1; n < 1000; n++) {
        folio_alloc_fail_at(n);
        int done = scenario();
        folio_alloc_fail_at(0);
        if (done)
            break;
        failures++;
    }
    /* init (7 allocations), 3 seq_new, table growths, fork (3). */
    printf("alloc-failure sweep: %d failing runs before a clean one\n", failures);
    assert_true(failures >= 20);
    assert_int_equal(scenario(), 1);
}

int main(void)
{
    /* clang-format off */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_invalid),
        cmocka_unit_test(test_geometry),
        cmocka_unit_test(test_arena_commit),
        cmocka_unit_test(test_append_slots),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_enospc_all_or_nothing),
        cmocka_unit_test(test_alloc_consecutive),
        cmocka_unit_test(test_alloc_through_cache),
        cmocka_unit_test(test_alloc_fragmented),
        cmocka_unit_test(test_fork_cow),
        cmocka_unit_test(test_truncate),
        cmocka_unit_test(test_truncate_into_cached_block),
        cmocka_unit_test(test_prefix_adopt),
        cmocka_unit_test(test_prefix_dedupe),
        cmocka_unit_test(test_lru_eviction),
        cmocka_unit_test(test_key_collisions),
        cmocka_unit_test(test_info_dump),
        cmocka_unit_test(test_alloc_failure_sweep),
    };
    /* clang-format on */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
