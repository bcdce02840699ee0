/*
 * tests/test_pager_diff.c — differential test of the pager against a naive
 * model.
 *
 * Random programs (create, adopt a prefix, append, fork, append to a fork
 * i.e. write to a shared block, truncate, free, mark computed, prefix
 * match, exhaust the pool) run against the real pager and against a model
 * written here with plain arrays:
 *   - per block: state, refcount, token ids, owner tags, and when cached the
 *     entry (salt, full token prefix through the block) — the prefix cache
 *     is a list of such entries searched linearly;
 *   - the free list as a stack, the LRU as an array, oldest first;
 *   - which free block an allocation takes, by the configured policy:
 *     LIFO pops the stack; LOCAL takes the id after the table's previous
 *     block when it is usable, else scans the block states for the leftmost
 *     longest run of free or cached ids and takes its middle; a wanted
 *     cached block (with no cached child, or one the pager knows) has its
 *     entry moved into a donor — the free stack's top, or when nothing is
 *     free the LRU head, evicted — and the table gets it.  Block ids are
 *     compared exactly, so the test holds the pager to the policy, not
 *     only to id-independent state;
 *   - per sequence: token list, computed count, block ids.
 * After every operation the test compares error codes, every table (length,
 * computed, tokens, block ids, slots), every block (state, refcount, fill,
 * owner), the stats, and calls pager_check().  It also plays the model
 * step: after each append it writes a tag into the arena slots of the new
 * tokens (a hash of salt and token prefix, in both layers, K and V), and
 * after every operation each sequence must read back its own tags through
 * its page table — which fails on any copy-on-write or sharing bug.
 *
 * Half of the programs narrow the prefix-cache keys to a few bits
 * (pager__test_set_key_mask) so that keys collide constantly.  Every third
 * runs with a sliding window: marking computed releases the blocks below
 * computed - window + 1 (all but the last) and leaves holes; the model's
 * rule for the prefix cache is then stated on prefixes: evicting a block
 * takes every cached entry extending its prefix out of the cache (used
 * ones stay with their tables, whose cached chain stops before them).
 *
 * Seeded: the seed is printed; FOLIO_SEED=N reproduces a run.  1,000,000
 * operations by default; FOLIO_TEST_SHORT=1 runs 50,000; FOLIO_DIFF_OPS=N
 * overrides.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

#include <cmocka.h>

#include "folio/pager.h"
#include "../pager/pager_internal.h"

#define MAX_BLOCKS 128
#define MAX_BS     16
#define MAX_SEQS   12
#define MAX_LEN    (MAX_BLOCKS * MAX_BS)

/* ---- random numbers (splitmix64) ------------------------------------- */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int32_t rn(int32_t n) /* [0, n) */
{
    return n > 0 ? (int32_t)(rnd() % (uint64_t)n) : 0;
}

/* ---- the naive model ---------------------------------------------------- */

struct mblock {
    int state; /* enum pager_block_state */
    int rc;
    int hashed;
    int kidk; /* the pager knows its one cached child (learnt as the first, none lost since) */
    uint64_t salt;
    int32_t prefix[MAX_LEN]; /* hashed: the whole token prefix through this block */
    int32_t plen;
    int32_t tok[MAX_BS];
    uint64_t owner;
    uint32_t tenant;
};

struct mseq {
    int live;
    pager_seq_t *real;
    uint64_t salt, owner;
    uint32_t tenant;
    int32_t tokens[MAX_LEN];
    int32_t len, computed, nh, nb, lo; /* table[0, lo): PAGER_HOLE */
    int32_t table[MAX_LEN];            /* with a window, a table may outgrow the pool */
};

struct model {
    int32_t n, bs, window;
    enum pager_alloc alloc;
    struct mblock blk[MAX_BLOCKS];
    int32_t freestack[MAX_BLOCKS]; /* top = end */
    int32_t nfree;
    int32_t lru[MAX_BLOCKS]; /* oldest first */
    int32_t nlru;
    struct mseq seq[MAX_SEQS];
    int64_t queries, hits, evictions, cows, window_frees;
};

static struct model M;

/* Coverage: how often the interesting paths ran (all must be > 0). */
static struct {
    long hits, evictions, cows, cow_hashed, switches, stalls, enospc, truncate_into_cached;
    long window_frees, subtree_drops, truncate_refused;
    long next_ids, mid_runs; /* allocations: id after the previous block, middle of a run */
    long moves;              /* evictions whose entry moved to free the wanted id */
} cov;

static void m_init(int32_t n, int32_t bs, int32_t window, enum pager_alloc alloc)
{
    memset(&M, 0, sizeof M);
    M.n = n;
    M.bs = bs;
    M.window = window;
    M.alloc = alloc;
    for (int32_t i = 0; i < n; i++)
        M.freestack[i] = n - 1 - i;
    M.nfree = n;
}

static int32_t m_use(const struct mseq *s, int32_t i)
{
    return i < s->nb - 1 ? M.bs : s->len - (s->nb - 1) * M.bs;
}

static void lru_del(int32_t b)
{
    for (int32_t i = 0; i < M.nlru; i++)
        if (M.lru[i] == b) {
            memmove(&M.lru[i], &M.lru[i + 1], (size_t)(M.nlru - i - 1) * sizeof(int32_t));
            M.nlru--;
            return;
        }
    fail_msg("model: block %d not on the LRU", b);
}

/* Whether hashed block c's prefix is hashed block p's plus one block. */
static int m_child_of(int32_t c, int32_t p)
{
    const struct mblock *x = &M.blk[c], *y = &M.blk[p];
    return x->hashed && x->salt == y->salt && x->plen == y->plen + M.bs &&
           !memcmp(x->prefix, y->prefix, (size_t)y->plen * sizeof(int32_t));
}

static int32_t m_find(uint64_t salt, const int32_t *tokens, int32_t plen);

/* Evicted block b leaves the cache with every entry extending its prefix,
 * child by child in block order, depth first (the pager's order, so that
 * the free list matches). */
static void m_drop_subtree(int32_t root)
{
    int32_t stack[MAX_BLOCKS + 1], top = 0;
    stack[top++] = root;
    while (top > 0) {
        int32_t p = stack[--top];
        for (int32_t b = 0; b < M.n; b++) {
            if (b == p || !m_child_of(b, p))
                continue;
            M.blk[p].kidk = 0;
            M.blk[b].hashed = 0;
            cov.subtree_drops++;
            if (M.blk[b].state == PAGER_BLOCK_CACHED) {
                lru_del(b);
                M.blk[b].state = PAGER_BLOCK_FREE;
                M.freestack[M.nfree++] = b;
            } else {
                for (int k = 0; k < MAX_SEQS; k++) {
                    struct mseq *s = &M.seq[k];
                    for (int32_t i = s->lo; s->live && i < s->nh; i++)
                        if (s->table[i] == b) {
                            s->nh = i;
                            break;
                        }
                }
            }
            for (int32_t g = 0; g < M.n; g++)
                if (g != b && m_child_of(g, b)) {
                    stack[top++] = b;
                    break;
                }
        }
    }
}

/* The hashed block one block shorter than hashed block b, or -1. */
static int32_t m_parent_of(int32_t b)
{
    const struct mblock *m = &M.blk[b];
    return m->plen > M.bs ? m_find(m->salt, m->prefix, m->plen - M.bs) : -1;
}

/* b leaves the cache: its parent no longer knows which child it has. */
static void m_unhash(int32_t b)
{
    int32_t p = m_parent_of(b);
    if (p >= 0)
        M.blk[p].kidk = 0;
    M.blk[b].hashed = 0;
}

static int32_t m_kids(int32_t x)
{
    int32_t kids = 0;
    for (int32_t g = 0; g < M.n; g++)
        kids += g != x && m_child_of(g, x);
    return kids;
}

/* Whether cached block x's entry may move to another id: no cached
 * children, or one that the pager knows (it learnt it when that child
 * was its first, and has lost no child since). */
static int m_movable(int32_t x)
{
    if (M.blk[x].state != PAGER_BLOCK_CACHED)
        return 0;
    int32_t kids = m_kids(x);
    return kids == 0 || (kids == 1 && M.blk[x].kidk);
}

static int m_usable(int32_t t)
{
    return M.blk[t].state == PAGER_BLOCK_FREE || m_movable(t);
}

/* The block LOCAL wants for a table whose previous block is prev (-1:
 * none): prev + 1 when usable, else the middle of the leftmost longest
 * run of free or cached ids when usable, else -1. */
static int32_t m_choose(int32_t prev)
{
    if (M.alloc != PAGER_ALLOC_LOCAL)
        return -1;
    if (prev >= 0 && prev + 1 < M.n && m_usable(prev + 1))
        return prev + 1;
    int32_t best = 0, best_at = -1;
    for (int32_t i = 0; i < M.n;) {
        int32_t j = i;
        while (j < M.n && M.blk[j].state != PAGER_BLOCK_USED)
            j++;
        if (j - i > best)
            best = j - i, best_at = i;
        i = j > i ? j : i + 1;
    }
    if (best == 0)
        return -1;
    cov.mid_runs++;
    return m_usable(best_at + best / 2) ? best_at + best / 2 : -1;
}

static void m_free_remove(int32_t b)
{
    for (int32_t i = 0; i < M.nfree; i++)
        if (M.freestack[i] == b) {
            memmove(&M.freestack[i], &M.freestack[i + 1],
                    (size_t)(M.nfree - i - 1) * sizeof(int32_t));
            M.nfree--;
            return;
        }
    fail_msg("model: block %d not on the free stack", b);
}

/* The wanted block when free; else a donor (the free stack's top, or the
 * LRU head evicted), into which a wanted cached block's entry moves. */
static int32_t m_alloc(const struct mseq *s, int32_t prev)
{
    const int32_t t = m_choose(prev);
    int32_t b;
    if (t >= 0 && M.blk[t].state == PAGER_BLOCK_FREE) {
        b = t;
        m_free_remove(b);
    } else {
        if (M.nfree > 0) {
            b = M.freestack[--M.nfree];
        } else {
            b = M.lru[0];
            lru_del(b);
            /* still hashed while its descendants are found by prefix */
            m_drop_subtree(b);
            m_unhash(b);
            M.evictions++;
            cov.evictions++;
        }
        if (t >= 0 && t != b && m_movable(t)) {
            /* t's cache entry moves into b, b takes t's LRU place; t is ours */
            struct mblock *e = &M.blk[b];
            const struct mblock *f = &M.blk[t];
            e->state = PAGER_BLOCK_CACHED;
            e->hashed = 1;
            e->kidk = f->kidk;
            e->salt = f->salt;
            e->plen = f->plen;
            memcpy(e->prefix, f->prefix, (size_t)f->plen * sizeof(int32_t));
            memcpy(e->tok, f->tok, sizeof e->tok);
            e->owner = f->owner;
            e->tenant = f->tenant;
            for (int32_t i = 0; i < M.nlru; i++)
                if (M.lru[i] == t)
                    M.lru[i] = b;
            M.blk[t].hashed = 0;
            cov.moves++;
            b = t;
        }
    }
    cov.next_ids += prev >= 0 && b == prev + 1;
    M.blk[b].state = PAGER_BLOCK_USED;
    M.blk[b].rc = 1;
    M.blk[b].owner = s->owner;
    M.blk[b].tenant = s->tenant;
    return b;
}

static void m_ref(int32_t b)
{
    if (M.blk[b].state == PAGER_BLOCK_CACHED) {
        lru_del(b);
        M.blk[b].state = PAGER_BLOCK_USED;
    }
    M.blk[b].rc++;
}

static void m_unref(int32_t b)
{
    if (--M.blk[b].rc > 0)
        return;
    if (M.blk[b].hashed) {
        M.blk[b].state = PAGER_BLOCK_CACHED;
        M.lru[M.nlru++] = b;
    } else {
        M.blk[b].state = PAGER_BLOCK_FREE;
        M.freestack[M.nfree++] = b;
    }
}

/* The cached block holding exactly (salt, tokens[0, plen)), or -1. */
static int32_t m_find(uint64_t salt, const int32_t *tokens, int32_t plen)
{
    for (int32_t b = 0; b < M.n; b++)
        if (M.blk[b].hashed && M.blk[b].salt == salt && M.blk[b].plen == plen &&
            !memcmp(M.blk[b].prefix, tokens, (size_t)plen * sizeof(int32_t)))
            return b;
    return -1;
}

static int32_t m_match_blocks(uint64_t salt, const int32_t *tokens, int32_t n, int32_t *out)
{
    int32_t maxb = n > 0 ? (n - 1) / M.bs : 0, m = 0;
    while (m < maxb) {
        int32_t b = m_find(salt, tokens, (m + 1) * M.bs);
        if (b < 0)
            break;
        if (out)
            out[m] = b;
        m++;
    }
    return m;
}

static int m_adopt(struct mseq *s, const int32_t *tokens, int32_t n)
{
    if (s->len != 0)
        return -EINVAL;
    int32_t m = m_match_blocks(s->salt, tokens, n, s->table);
    for (int32_t i = 0; i < m; i++)
        m_ref(s->table[i]);
    s->nb = s->nh = m;
    s->len = s->computed = m * M.bs;
    memcpy(s->tokens, tokens, (size_t)s->len * sizeof(int32_t));
    M.queries += n;
    M.hits += s->len;
    cov.hits += s->len > 0;
    return 0;
}

static int32_t m_needed(const struct mseq *s, int32_t n)
{
    if (n <= 0)
        return 0;
    int32_t cow = 0;
    if (s->len % M.bs) {
        int32_t b = s->table[s->nb - 1];
        cow = M.blk[b].rc > 1 || M.blk[b].hashed;
    }
    return (s->len + n + M.bs - 1) / M.bs - s->nb + cow;
}

static int m_append(struct mseq *s, const int32_t *tokens, int32_t n)
{
    if (n == 0)
        return 0;
    if (m_needed(s, n) > M.nfree + M.nlru) {
        cov.enospc++;
        return -ENOSPC;
    }
    if (s->len % M.bs) {
        int32_t b = s->table[s->nb - 1];
        if (M.blk[b].rc > 1 || M.blk[b].hashed) {
            cov.cow_hashed += M.blk[b].rc == 1;
            int32_t c = m_alloc(s, s->nb >= 2 ? s->table[s->nb - 2] : -1);
            memcpy(M.blk[c].tok, M.blk[b].tok, sizeof M.blk[c].tok);
            m_unref(b);
            s->table[s->nb - 1] = c;
            if (s->nh > s->nb - 1)
                s->nh = s->nb - 1;
            M.cows++;
            cov.cows++;
        } else {
            M.blk[b].owner = s->owner;
            M.blk[b].tenant = s->tenant;
        }
    }
    for (int32_t j = 0; j < n; j++) {
        int32_t pos = s->len++;
        if (pos % M.bs == 0) {
            int32_t prev = s->nb > 0 ? s->table[s->nb - 1] : -1;
            s->table[s->nb++] = m_alloc(s, prev);
        }
        M.blk[s->table[s->nb - 1]].tok[pos % M.bs] = tokens[j];
        s->tokens[pos] = tokens[j];
    }
    return 0;
}

static void m_mark(struct mseq *s, int32_t n)
{
    if (n > s->len)
        n = s->len;
    if (n > s->computed)
        s->computed = n;
    for (int32_t i = s->nh; i < s->computed / M.bs; i++) {
        if (i < s->lo + (i > 0)) /* block i - 1 released: no parent */
            break;
        int32_t b = s->table[i], plen = (i + 1) * M.bs;
        if (!M.blk[b].hashed) {
            int32_t e = m_find(s->salt, s->tokens, plen);
            if (e < 0) {
                M.blk[b].hashed = 1;
                M.blk[b].salt = s->salt;
                M.blk[b].plen = plen;
                memcpy(M.blk[b].prefix, s->tokens, (size_t)plen * sizeof(int32_t));
                int32_t p = m_parent_of(b);
                if (p >= 0)
                    M.blk[p].kidk = m_kids(p) == 1;
            } else if (M.blk[b].rc == 1) {
                m_ref(e);
                m_unref(b);
                s->table[i] = e;
                cov.switches++;
            } else {
                cov.stalls++;
                break;
            }
        }
        s->nh = i + 1;
    }
    if (M.window > 0) {
        int32_t keep = s->computed - M.window + 1;
        int32_t lo = FOLIO_MIN(FOLIO_MAX(keep, 0) / M.bs, s->nb - 1);
        for (; s->lo < lo; s->lo++) {
            m_unref(s->table[s->lo]);
            s->table[s->lo] = PAGER_HOLE;
            M.window_frees++;
            cov.window_frees++;
        }
    }
}

/* 0, or -EINVAL when the row at n would read a released block. */
static int m_truncate(struct mseq *s, int32_t n)
{
    int32_t nb = (n + M.bs - 1) / M.bs;
    if (s->lo > 0 && (s->lo > FOLIO_MAX(n - M.window + 1, 0) / M.bs || s->lo >= nb)) {
        cov.truncate_refused++;
        return -EINVAL;
    }
    if (n % M.bs && M.blk[s->table[nb - 1]].hashed)
        cov.truncate_into_cached++;
    for (int32_t i = s->nb - 1; i >= nb; i--)
        m_unref(s->table[i]);
    s->nb = nb;
    if (s->nh > nb)
        s->nh = nb;
    s->len = n;
    if (s->computed > n)
        s->computed = n;
    return 0;
}

static void m_release(struct mseq *s)
{
    for (int32_t i = s->nb - 1; i >= s->lo; i--)
        m_unref(s->table[i]);
    s->live = 0;
}

static void m_fork(const struct mseq *p, struct mseq *c, uint64_t owner, uint32_t tenant)
{
    pager_seq_t *real = c->real;
    memcpy(c, p, sizeof *c);
    c->real = real;
    c->owner = owner;
    c->tenant = tenant;
    for (int32_t i = c->lo; i < c->nb; i++)
        m_ref(c->table[i]);
}

static int32_t m_fill(int32_t b)
{
    if (M.blk[b].state == PAGER_BLOCK_FREE)
        return 0;
    if (M.blk[b].state == PAGER_BLOCK_CACHED)
        return M.bs;
    int32_t fill = 0;
    for (int k = 0; k < MAX_SEQS; k++) {
        const struct mseq *s = &M.seq[k];
        if (!s->live)
            continue;
        for (int32_t i = 0; i < s->nb; i++)
            if (s->table[i] == b && m_use(s, i) > fill)
                fill = m_use(s, i);
    }
    return fill;
}

/* ---- tags: the "K/V" every token writes ---------------------------------- */

static struct pager_kv_view KV;

static uint64_t tag_next(uint64_t h, int32_t tok)
{
    h ^= (uint32_t)tok;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 31);
}

static unsigned char *tag_addr(int32_t block, int32_t layer, int kv, int32_t head, int32_t slot)
{
    size_t e = (size_t)block * KV.block_stride + (size_t)layer * KV.layer_stride +
               (size_t)kv * KV.v_offset + (size_t)head * KV.head_stride +
               (size_t)slot * (size_t)KV.head_dim;
    return (unsigned char *)KV.base + e * sizeof(float);
}

static uint64_t tag_variant(uint64_t h, int32_t layer, int kv, int32_t head)
{
    return h ^ ((uint64_t)((layer * 2 + kv) * KV.n_kv_heads + head) * 0x9e3779b97f4a7c15ull);
}

static void tags_write(const struct mseq *s, int32_t from)
{
    if (!KV.base)
        return;
    uint64_t h = s->salt;
    for (int32_t p = 0; p < s->len; p++) {
        h = tag_next(h, s->tokens[p]);
        if (p < from)
            continue;
        int32_t b, off;
        pager_seq_slot(s->real, p, &b, &off);
        for (int32_t l = 0; l < KV.n_layers; l++)
            for (int kv = 0; kv < 2; kv++)
                for (int32_t hd = 0; hd < KV.n_kv_heads; hd++) {
                    uint64_t t = tag_variant(h, l, kv, hd);
                    memcpy(tag_addr(b, l, kv, hd, off), &t, 8);
                }
    }
}

static void tags_verify(const struct mseq *s)
{
    if (!KV.base)
        return;
    uint64_t h = s->salt;
    for (int32_t p = 0; p < s->len; p++) {
        h = tag_next(h, s->tokens[p]);
        if (p / M.bs < s->lo)
            continue; /* released by the window */
        int32_t b = s->table[p / M.bs], off = p % M.bs;
        for (int32_t l = 0; l < KV.n_layers; l++)
            for (int kv = 0; kv < 2; kv++)
                for (int32_t hd = 0; hd < KV.n_kv_heads; hd++) {
                    uint64_t t;
                    memcpy(&t, tag_addr(b, l, kv, hd, off), 8);
                    if (t != tag_variant(h, l, kv, hd))
                        fail_msg("seq %p pos %d (block %d slot %d layer %d kv %d head %d): K/V "
                                 "tag belongs to another sequence",
                                 (void *)s->real, p, b, off, l, kv, hd);
                }
    }
}

/* ---- comparison ------------------------------------------------------------ */

static pager_t *PG;
static long op_no;

static void compare_all(void)
{
    char msg[256];
    int rc = pager_check(PG, msg, sizeof msg);
    if (rc != 0)
        fail_msg("op %ld: pager_check: %s", op_no, msg);

    int64_t tokens = 0, seqs = 0, held = 0;
    for (int k = 0; k < MAX_SEQS; k++) {
        const struct mseq *s = &M.seq[k];
        if (!s->live)
            continue;
        seqs++;
        tokens += s->len;
        held += s->nb - s->lo;
        assert_int_equal(pager_seq_blocks_held(s->real), s->nb - s->lo);
        assert_int_equal(pager_seq_len(s->real), s->len);
        assert_int_equal(pager_seq_computed(s->real), s->computed);
        int32_t nb;
        const int32_t *tab = pager_seq_block_table(s->real, &nb);
        if (nb != s->nb || (nb && memcmp(tab, s->table, (size_t)nb * sizeof(int32_t))))
            fail_msg("op %ld: seq %d block table differs (%d vs %d blocks)", op_no, k, nb, s->nb);
        if (s->len &&
            memcmp(pager_seq_tokens(s->real), s->tokens, (size_t)s->len * sizeof(int32_t)))
            fail_msg("op %ld: seq %d tokens differ", op_no, k);
        if (s->len) {
            int32_t p = s->lo * M.bs + rn(s->len - s->lo * M.bs), b, off;
            pager_seq_slot(s->real, p, &b, &off);
            assert_int_equal(b, s->table[p / M.bs]);
            assert_int_equal(off, p % M.bs);
        }
        tags_verify(s);
    }

    int64_t nfree = 0, nused = 0, ncached = 0, shared = 0, empty = 0;
    for (int32_t b = 0; b < M.n; b++) {
        struct pager_block_info bi;
        pager_block_info_get(PG, b, &bi);
        const struct mblock *m = &M.blk[b];
        if ((int)bi.state != m->state || bi.refcount != m->rc)
            fail_msg("op %ld: block %d state %d/%d refcount %d/%d", op_no, b, bi.state, m->state,
                     bi.refcount, m->rc);
        int32_t fill = m_fill(b);
        if (bi.tokens != fill)
            fail_msg("op %ld: block %d fill %d/%d", op_no, b, bi.tokens, fill);
        if (m->state != PAGER_BLOCK_FREE && (bi.owner != m->owner || bi.tenant != m->tenant))
            fail_msg("op %ld: block %d owner tags differ", op_no, b);
        nfree += m->state == PAGER_BLOCK_FREE;
        ncached += m->state == PAGER_BLOCK_CACHED;
        if (m->state == PAGER_BLOCK_USED) {
            nused++;
            shared += m->rc > 1;
            empty += M.bs - fill;
        }
    }
    assert_int_equal(nfree, M.nfree);
    assert_int_equal(ncached, M.nlru);

    struct pager_stats st;
    pager_stats_get(PG, &st);
    if (st.blocks_free != nfree || st.blocks_used != nused || st.blocks_cached != ncached ||
        st.blocks_shared != shared || st.tokens_held != tokens || st.seqs != seqs ||
        st.slots_empty != empty || st.prefix_queries != M.queries || st.prefix_hits != M.hits ||
        st.evictions != M.evictions || st.cow_copies != M.cows || st.blocks_total != M.n ||
        st.window_frees != M.window_frees || st.blocks_held != held)
        fail_msg("op %ld: stats differ: free %lld/%lld used %lld/%lld cached %lld/%lld "
                 "shared %lld/%lld tokens %lld/%lld seqs %lld/%lld empty %lld/%lld "
                 "queries %lld/%lld hits %lld/%lld evictions %lld/%lld cows %lld/%lld",
                 op_no, (long long)st.blocks_free, (long long)nfree, (long long)st.blocks_used,
                 (long long)nused, (long long)st.blocks_cached, (long long)ncached,
                 (long long)st.blocks_shared, (long long)shared, (long long)st.tokens_held,
                 (long long)tokens, (long long)st.seqs, (long long)seqs, (long long)st.slots_empty,
                 (long long)empty, (long long)st.prefix_queries, (long long)M.queries,
                 (long long)st.prefix_hits, (long long)M.hits, (long long)st.evictions,
                 (long long)M.evictions, (long long)st.cow_copies, (long long)M.cows);
    assert_int_equal(pager_blocks_available(PG), M.nfree + M.nlru);
}

/* ---- the program ------------------------------------------------------------ */

#define N_BASES 4
static int32_t bases[N_BASES][MAX_LEN];
static int32_t base_len[N_BASES];
static int32_t alphabet;
static const uint64_t salts[3] = {0, 1, 0xdeadbeefcafef00dull};

static int32_t rand_token(void)
{
    return rn(8) == 0 ? (int32_t)rnd() : rn(alphabet);
}

static int live_slot(void)
{
    int live[MAX_SEQS], n = 0;
    for (int k = 0; k < MAX_SEQS; k++)
        if (M.seq[k].live)
            live[n++] = k;
    return n ? live[rn(n)] : -1;
}

static int free_slot(void)
{
    for (int k = 0; k < MAX_SEQS; k++)
        if (!M.seq[k].live)
            return k;
    return -1;
}

/* A prompt likely to share prefixes with earlier ones. */
static int32_t make_prompt(int32_t *p, int32_t max)
{
    int32_t n = 0;
    int how = rn(4);
    if (how == 0) {
        int k = live_slot();
        if (k >= 0 && M.seq[k].len) {
            n = 1 + rn(M.seq[k].len);
            memcpy(p, M.seq[k].tokens, (size_t)n * sizeof(int32_t));
        }
    } else if (how <= 2) {
        int b = rn(N_BASES);
        n = 1 + rn(base_len[b]);
        memcpy(p, bases[b], (size_t)n * sizeof(int32_t));
    }
    int32_t extra = rn(3 * M.bs + 2);
    for (int32_t i = 0; i < extra && n < max; i++)
        p[n++] = rand_token();
    return FOLIO_MIN(n, max);
}

static void do_append(int k, const int32_t *toks, int32_t n)
{
    struct mseq *s = &M.seq[k];
    if (s->len + n > MAX_LEN)
        n = MAX_LEN - s->len;
    assert_int_equal(pager_seq_blocks_needed(PG, s->real, n), m_needed(s, n));
    int want = m_append(s, toks, n);
    int got = pager_seq_append(PG, s->real, toks, n);
    if (want != got)
        fail_msg("op %ld: append %d tokens to seq %d: %d, model %d", op_no, n, k, got, want);
    if (got == 0)
        tags_write(s, s->len - n);
}

static void op_new(void)
{
    int k = free_slot();
    if (k < 0)
        return;
    struct mseq *s = &M.seq[k];
    memset(s, 0, sizeof *s);
    s->live = 1;
    s->salt = salts[rn(3)];
    s->owner = rnd();
    s->tenant = (uint32_t)rn(5);
    assert_int_equal(pager_seq_new(PG, s->salt, s->owner, s->tenant, &s->real), 0);
    int32_t prompt[MAX_LEN];
    int32_t n = make_prompt(prompt, MAX_LEN);
    int32_t hit = 0;
    if (rn(4) != 0) {
        m_adopt(s, prompt, n);
        assert_int_equal(pager_seq_adopt_prefix(PG, s->real, prompt, n, &hit), 0);
        if (hit != s->len)
            fail_msg("op %ld: adopt took %d tokens, model %d", op_no, hit, s->len);
        assert_true(hit < n || n == 0);
    }
    do_append(k, prompt + hit, n - hit);
    if (rn(2))
        m_mark(s, s->len), pager_seq_mark_computed(PG, s->real, s->len);
}

static void op_append(void)
{
    int k = live_slot();
    if (k < 0)
        return;
    int32_t toks[3 * MAX_BS];
    int32_t n = rn(8) == 0 ? 0 : 1 + rn(2 * M.bs + 1);
    for (int32_t i = 0; i < n; i++)
        toks[i] = rand_token();
    do_append(k, toks, n);
}

static void op_fork(void)
{
    int p = live_slot(), c = free_slot();
    if (p < 0 || c < 0)
        return;
    uint64_t owner = rnd();
    uint32_t tenant = (uint32_t)rn(5);
    pager_seq_t *child;
    assert_int_equal(pager_seq_fork(PG, M.seq[p].real, owner, tenant, &child), 0);
    M.seq[c].real = child;
    m_fork(&M.seq[p], &M.seq[c], owner, tenant);
    /* Usually the child then writes: copy-on-write of a shared last block. */
    if (rn(2)) {
        int32_t t = rand_token();
        do_append(c, &t, 1);
    }
}

static void op_truncate(void)
{
    int k = live_slot();
    if (k < 0)
        return;
    struct mseq *s = &M.seq[k];
    int32_t n = rn(3) ? s->len - rn(FOLIO_MIN(s->len, 2 * M.bs) + 1) : rn(s->len + 1);
    if (rn(20) == 0) {
        assert_int_equal(pager_seq_truncate(PG, s->real, s->len + 1), -EINVAL);
        return;
    }
    int want = m_truncate(s, n);
    assert_int_equal(pager_seq_truncate(PG, s->real, n), want);
    if (want)
        return;
    if (rn(2)) { /* re-append: same tokens or different ones */
        int32_t toks[2 * MAX_BS];
        int32_t m = 1 + rn(M.bs);
        for (int32_t i = 0; i < m; i++)
            toks[i] = rn(2) ? rand_token() : rn(alphabet);
        do_append(k, toks, m);
    }
}

static void op_free(void)
{
    int k = live_slot();
    if (k < 0)
        return;
    pager_seq_free(PG, M.seq[k].real);
    m_release(&M.seq[k]);
}

static void op_mark(void)
{
    int k = live_slot();
    if (k < 0)
        return;
    struct mseq *s = &M.seq[k];
    int32_t n = rn(3) ? s->len : rn(s->len + 2);
    m_mark(s, n);
    pager_seq_mark_computed(PG, s->real, n);
}

static void op_match(void)
{
    int32_t prompt[MAX_LEN];
    int32_t n = make_prompt(prompt, MAX_LEN);
    uint64_t salt = salts[rn(3)];
    int32_t want = m_match_blocks(salt, prompt, n, NULL) * M.bs;
    int32_t got = pager_prefix_match(PG, salt, prompt, n);
    if (want != got)
        fail_msg("op %ld: prefix match %d, model %d", op_no, got, want);
    int k = live_slot();
    if (k >= 0 && M.seq[k].len > 0) { /* adopt into a non-empty table */
        int32_t hit = 7;
        assert_int_equal(pager_seq_adopt_prefix(PG, M.seq[k].real, prompt, n, &hit), -EINVAL);
        assert_int_equal(hit, 0);
    }
}

static void op_exhaust(void)
{
    int k = live_slot();
    if (k < 0)
        return;
    int32_t toks[MAX_BS];
    for (int guard = 0; guard < 4 * MAX_BLOCKS; guard++) {
        struct mseq *s = &M.seq[k];
        int32_t n = 1 + rn(M.bs);
        if (s->len + n > MAX_LEN)
            return;
        for (int32_t i = 0; i < n; i++)
            toks[i] = rand_token();
        int want = m_append(s, toks, n);
        int got = pager_seq_append(PG, s->real, toks, n);
        if (want != got)
            fail_msg("op %ld: exhaust append: %d, model %d", op_no, got, want);
        if (got != 0)
            return;
        tags_write(s, s->len - n);
    }
}

static void run_program(long ops, int collide, int windowed)
{
    static const int32_t sizes[] = {1, 2, 3, 4, 5, 8, 16};
    int32_t bs = sizes[rn(FOLIO_ARRAY_LEN(sizes))];
    int32_t n = 4 + rn(MAX_BLOCKS - 4);
    if (bs >= 8 && n > 48)
        n = 8 + rn(41);
    alphabet = 1 + rn(4);
    struct pager_config cfg = {.num_blocks = n,
                               .block_size = bs,
                               .n_layers = 2,
                               .n_kv_heads = 2,
                               .head_dim = 2,
                               .dtype = FOLIO_F32,
                               .no_arena = rn(8) == 0,
                               .window = windowed ? 1 + rn(4 * bs) : 0,
                               .alloc = rn(4) == 0 ? PAGER_ALLOC_LIFO : PAGER_ALLOC_LOCAL};
    assert_int_equal(pager_init(&PG, &cfg), 0);
    if (collide)
        assert_int_equal(pager__test_set_key_mask(PG, (uint64_t)rn(8)), 0);
    pager_kv_view(PG, &KV);
    m_init(n, bs, cfg.window, cfg.alloc);
    for (int b = 0; b < N_BASES; b++) {
        base_len[b] = 1 + rn(FOLIO_MIN(6 * bs, MAX_LEN / 4));
        for (int32_t i = 0; i < base_len[b]; i++)
            bases[b][i] = rn(alphabet);
    }
    for (long i = 0; i < ops; i++, op_no++) {
        int r = rn(100);
        if (r < 14)
            op_new();
        else if (r < 40)
            op_append();
        else if (r < 50)
            op_fork();
        else if (r < 60)
            op_truncate();
        else if (r < 72)
            op_free();
        else if (r < 88)
            op_mark();
        else if (r < 97)
            op_match();
        else
            op_exhaust();
        compare_all();
    }
    pager_free(PG);
    PG = NULL;
}

static void test_pager_differential(void **state)
{
    (void)state;
    uint64_t seed = (uint64_t)folio_now_ns();
    const char *e = getenv("FOLIO_SEED");
    if (e && *e)
        seed = strtoull(e, NULL, 0);
    long total = getenv("FOLIO_TEST_SHORT") ? 50000 : 1000000;
    if ((e = getenv("FOLIO_DIFF_OPS")) && *e)
        total = strtol(e, NULL, 0);
    printf("test_pager_diff: seed %llu (FOLIO_SEED=%llu reproduces), %ld ops\n",
           (unsigned long long)seed, (unsigned long long)seed, total);
    fflush(stdout);
    rng_state = seed;
    op_no = 0;
    for (int prog = 0; op_no < total; prog++) {
        long ops = FOLIO_MIN(total - op_no, 2000 + rn(8000));
        run_program(ops, prog % 2, prog % 3 == 1);
    }
    assert_true(op_no >= total);
    printf("coverage: prefix hits %ld, evictions %ld, cow %ld (of cached blocks %ld), "
           "dedupe switches %ld, stalls %ld, ENOSPC %ld, truncations into cached blocks %ld, "
           "window frees %ld, subtree drops %ld, truncations refused %ld, next ids %ld, "
           "run middles %ld, cache entries moved %ld\n",
           cov.hits, cov.evictions, cov.cows, cov.cow_hashed, cov.switches, cov.stalls, cov.enospc,
           cov.truncate_into_cached, cov.window_frees, cov.subtree_drops, cov.truncate_refused,
           cov.next_ids, cov.mid_runs, cov.moves);
    assert_true(cov.window_frees > 0 && cov.next_ids > 0 && cov.mid_runs > 0 && cov.moves > 0);
    assert_true(cov.hits > 0 && cov.evictions > 0 && cov.cows > 0 && cov.cow_hashed > 0);
    assert_true(cov.switches > 0 && cov.enospc > 0 && cov.truncate_into_cached > 0);
    if (total >= 1000000)
        assert_true(cov.stalls > 0 && cov.subtree_drops > 0 && cov.truncate_refused > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pager_differential),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
