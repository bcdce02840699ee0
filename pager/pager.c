/*
 * pager/pager.c — the KV block pool, page tables, prefix cache and
 * copy-on-write (contract: include/folio/pager.h).
 *
 * What it owns.  One arena of N blocks (a region on huge pages, each page
 * committed when first written, or all of them at pager_init with
 * cfg->prefault), the metadata of every block (struct pager_block,
 * pager_internal.h), the token ids written into every slot (btok[N][B]), a
 * chained hash of fixed capacity (the prefix cache) and every live page
 * table (struct pager_seq).
 *
 * Block life cycle.
 *
 *        alloc (a free block, or evict the LRU head out of the hash)
 *   FREE ────────────────────────────► USED ◄──── prefix hit ─── CACHED
 *    ▲                                  │ refcount → 0              ▲
 *    └──────── not hashed ◄─────────────┴────────► hashed ──────────┘
 *
 * A block's refcount is the number of page tables that hold it.  A table
 * with n tokens holds ceil(n / B) blocks; every block but the last is full
 * for it.  A block is written only while its refcount is 1 and it is not in
 * the hash: a shared or hashed last block is copied first (copy-on-write:
 * its K and V, one memcpy per (layer, K|V), and its token ids).
 *
 * Prefix cache.  When a table's block i is full and computed it enters the
 * hash with key = H(key of block i-1 (or a seed of the salt at i = 0),
 * its B token ids, salt).  Its identity is (salt, parent block id, token
 * ids); lookups compare that identity, never only the key, so a key
 * collision can never return a wrong block.  Parent ids are exact because:
 *   - the hash holds at most one block per identity: a table whose newly
 *     computed block duplicates a hashed one switches to the hashed block
 *     and releases its own copy (dedupe).  A table's blocks [0, nh) are a
 *     hashed chain (each one's parent is the table's block i-1); hashing
 *     proceeds in order and stops at a duplicate that fork siblings still
 *     share (switching it for one holder only would leave the others
 *     holding hashed children without their parent), retried at the next
 *     mark_computed;
 *   - every holder of a hashed block also holds its parent (tables are
 *     prefixes), so refcount(parent) >= refcount(child), and blocks are
 *     released last-to-first, so a cached child is always older in the LRU
 *     than its cached parent.  Eviction takes the LRU head, hence always a
 *     leaf: a hashed block's parent is always hashed, and a block id in the
 *     hash never names stale content.
 * The hash is therefore exactly a prefix-closed set of (salt, token prefix)
 * entries, which is what tests/test_pager_diff.c models naively.
 *
 * Sliding window (cfg.window > 0).  mark_computed releases a table's front
 * blocks that no later row reads and writes PAGER_HOLE over them: table
 * entries [0, lo) are holes, [lo, nb) blocks.  Such a table holds hashed
 * blocks without their parents, so the two ordering arguments above no
 * longer hold (a parent may have fewer references than its child, and may
 * reach the LRU head first).  What keeps the hash exact instead: every
 * block counts its hashed children (nkids), and evicting a block that
 * still has some takes its whole hashed subtree out of the hash (cached
 * descendants go to the free list, used ones stay with their tables, whose
 * chains are cut before them: nh).  A table hashes block i only while it
 * holds block i - 1 (i > lo, or i = 0 with no holes), so hashing stops for
 * good once the window passes the chain's end.
 *
 * Which block.  Decode attention streams each table's blocks in order, and
 * from DRAM its cost follows how often that stream jumps (BENCHMARKS.md,
 * "KV dtypes"); a LIFO free list hands a warm pool's tables scattered ids.
 * So (PAGER_ALLOC_LOCAL) a growing table wants the id after its last
 * block, and a table starting a run (new, or its next id is used) the
 * middle of the longest run of ids that are free or cached, leaving the
 * first half to the table whose block ends before it.  The run tree below
 * finds that in O(log N); setting a leaf updates O(log N) nodes, usually
 * fewer (it stops at the first unchanged ancestor).  A wanted free block is
 * simply taken.  A warm pool, though, is mostly cached blocks (a retired
 * table's full blocks stay in the prefix cache), so the wanted id usually
 * holds a cache entry: then a donor block is taken exactly as before (the
 * free list head, or when nothing is free the LRU head, evicted), the
 * wanted block's entry moves into the donor (a copy of the block's K/V, its
 * token ids, hash and LRU links, its child's parent link, its parent's kid
 * link) and the table gets the wanted id.  The prefix cache then holds the
 * same entries in the same LRU order as without the move, and the same
 * evictions happen; only which id holds an entry differs, and no table
 * held it (refcount 0).  An entry moves only when its hashed children are
 * known in O(1): none, or the one kid link (set when a block gets its
 * first child, cleared when it loses any).  Nothing is ever held back,
 * so what fits is the same under either policy (cfg.alloc =
 * PAGER_ALLOC_LIFO keeps the old choice, for A/B).
 *
 * Invariants (pager_check verifies all of them):
 *   free + used + cached = total; FREE blocks are exactly those on the free
 *   list; the run tree's leaves are the blocks not used, its nodes
 *   recompute; a kid link names the block's one hashed child; CACHED
 *   blocks exactly those on the LRU (hashed, refcount 0); refcount = number
 *   of tables holding the block; nfull = number of tables
 *   using all its slots; table nb = ceil(len / B); the token ids of a table
 *   equal the btok of its slots; its blocks [0, nh) are hashed, and every
 *   hashed block it holds has parent = its previous block (unless that
 *   entry is a hole); a hashed block's parent is hashed; keys recompute; no
 *   two hashed blocks share an identity; nkids counts a block's hashed
 *   children.
 *   Without a window: refcount(parent) >= refcount(child) for hashed blocks
 *   and cached children are older on the LRU than cached parents.  With
 *   one: a table's holes are exactly entries [0, lo), lo < nb (the last
 *   block is always held) and lo <= (computed - window + 1) / B.
 *
 * Stats: slots_empty counts, once per partial physical block, block_size
 * minus the most slots any holder uses; only a table's last block can be
 * partial for it, and nfull > 0 marks a block some holder uses fully, so
 * pager_stats_get walks the live tables' last blocks, not the pool.
 *
 * No allocation on the hot path: blocks come from preallocated metadata;
 * page tables grow their arrays geometrically (that may fail with -ENOMEM,
 * before anything changes).  Every mutating call is all or nothing.
 *
 * K/V rows.  pager_kv_row_put / _get convert one row to and from the
 * arena's dtype (layout in folio/pager.h); they touch only arena bytes and
 * may run on any thread for distinct rows (the forward pass's writers).
 *
 * Threading: none.  The owner (the daemon's loop thread) serialises calls.
 * With FOLIO_CHECKS, pager_check runs after every mutating call and a
 * violation aborts the process.
 */
#include "pager_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NIL PAGER_NIL

/* ---- invariant hook ---------------------------------------------------- */

#if FOLIO_CHECKS
static void checked(const pager_t *pg)
{
    char msg[256];
    FOLIO_CHECK(pager_check(pg, msg, sizeof msg) == 0, "%s", msg);
}
#define CHECKED(pg) checked(pg)
#else
#define CHECKED(pg) ((void)0)
#endif

/* ---- hashing ----------------------------------------------------------- */

__extension__ typedef unsigned __int128 u128;

/* 64x64 -> 128 multiply folded to 64 bits: a fast, well-mixing step. */
static inline uint64_t mix(uint64_t a, uint64_t b)
{
    u128 r = (u128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

#define HC0 0x9e3779b97f4a7c15ull
#define HC1 0xd1b54a32d192ed03ull
#define HC2 0x8cb92ba72f3d8dd7ull
#define HC3 0xb492b66fbe98f273ull
#define HC4 0xf1357aea2e62a9c5ull

uint64_t pager__salt_seed(uint64_t salt)
{
    return mix(salt ^ HC0, HC1);
}

uint64_t pager__block_key(uint64_t parent_key, const int32_t *tokens, int32_t n, uint64_t salt)
{
    uint64_t h = mix(parent_key ^ HC2, salt ^ HC3);
    int32_t i = 0;
    for (; i + 1 < n; i += 2) {
        uint64_t w = (uint64_t)(uint32_t)tokens[i] | (uint64_t)(uint32_t)tokens[i + 1] << 32;
        h = mix(w ^ HC1, h ^ HC4);
    }
    if (i < n)
        h = mix((uint64_t)(uint32_t)tokens[i] ^ HC0, h ^ HC4);
    return mix(h ^ (uint64_t)n, HC2);
}

static inline uint64_t key_of(const pager_t *pg, uint64_t parent_key, const int32_t *tokens,
                              uint64_t salt)
{
    return pager__block_key(parent_key, tokens, pg->bs, salt) & pg->key_mask;
}

static inline uint32_t bucket_of(const pager_t *pg, uint64_t key)
{
    return (uint32_t)(key ^ (key >> 32)) & pg->bucket_mask;
}

static inline int32_t *btok_of(const pager_t *pg, int32_t b)
{
    return pg->btok + (size_t)b * (size_t)pg->bs;
}

/* The hashed block with this exact identity, or NIL. */
static int32_t hash_find(const pager_t *pg, uint64_t key, uint64_t salt, int32_t parent,
                         const int32_t *tokens)
{
    for (int32_t b = pg->buckets[bucket_of(pg, key)]; b != NIL; b = pg->blk[b].hnext) {
        const struct pager_block *m = &pg->blk[b];
        if (m->key == key && m->salt == salt && m->parent == parent &&
            memcmp(btok_of(pg, b), tokens, (size_t)pg->bs * sizeof(int32_t)) == 0)
            return b;
    }
    return NIL;
}

static void hash_insert(pager_t *pg, int32_t b, uint64_t key, uint64_t parent_key, uint64_t salt,
                        int32_t parent)
{
    struct pager_block *m = &pg->blk[b];
    if (parent != NIL) {
        struct pager_block *pm = &pg->blk[parent];
        pm->kid = ++pm->nkids == 1 ? b : NIL;
    }
    uint32_t h = bucket_of(pg, key);
    m->hashed = 1;
    m->key = key;
    m->parent_key = parent_key;
    m->salt = salt;
    m->parent = parent;
    m->hprev = NIL;
    m->hnext = pg->buckets[h];
    if (m->hnext != NIL)
        pg->blk[m->hnext].hprev = b;
    pg->buckets[h] = b;
    pg->nhashed++;
}

static void hash_remove(pager_t *pg, int32_t b)
{
    struct pager_block *m = &pg->blk[b];
    if (m->hprev != NIL)
        pg->blk[m->hprev].hnext = m->hnext;
    else
        pg->buckets[bucket_of(pg, m->key)] = m->hnext;
    if (m->hnext != NIL)
        pg->blk[m->hnext].hprev = m->hprev;
    m->hprev = m->hnext = NIL;
    m->hashed = 0;
    pg->nhashed--;
    if (m->parent != NIL) {
        pg->blk[m->parent].nkids--;
        pg->blk[m->parent].kid = NIL; /* a remaining child is not known */
    }
}

/* ---- free blocks: list and run tree ------------------------------------- */

/* Free blocks are on the intrusive free list (LIFO); free and cached
 * blocks (those an allocation may take) are the set leaves of the run
 * tree, a segment tree over block ids whose nodes hold the longest run of
 * such ids inside them and the runs touching their two ends (leaves past N
 * are never set).  Setting one leaf recomputes its ancestors, stopping at the
 * first that does not change. */
static void runs_set(pager_t *pg, int32_t b, int32_t v)
{
    struct pager_run *r = pg->runs;
    uint32_t i = pg->run_leaves + (uint32_t)b;
    r[i] = (struct pager_run){v, v, v};
    for (int32_t half = 1; (i >>= 1) >= 1; half *= 2) {
        const struct pager_run *l = &r[2 * i], *h = &r[2 * i + 1];
        struct pager_run n = {l->pre == half ? half + h->pre : l->pre,
                              h->suf == half ? half + l->suf : h->suf,
                              FOLIO_MAX(FOLIO_MAX(l->best, h->best), l->suf + h->pre)};
        if (n.pre == r[i].pre && n.suf == r[i].suf && n.best == r[i].best)
            break;
        r[i] = n;
    }
}

/* The first block of the leftmost longest run of free ids; its length in
 * *len.  Only while some block is free. */
static int32_t runs_longest(const pager_t *pg, int32_t *len)
{
    const struct pager_run *r = pg->runs;
    const int32_t best = r[1].best;
    uint32_t i = 1, base = 0, half = pg->run_leaves / 2;
    for (; half > 0; half /= 2) {
        const struct pager_run *l = &r[2 * i], *h = &r[2 * i + 1];
        if (l->best == best) {
            i = 2 * i;
        } else if (l->suf + h->pre == best) {
            *len = best;
            return (int32_t)(base + half) - l->suf;
        } else {
            i = 2 * i + 1;
            base += half;
        }
    }
    *len = best;
    return (int32_t)base;
}

static void free_push(pager_t *pg, int32_t b)
{
    struct pager_block *m = &pg->blk[b];
    m->prev = NIL;
    m->next = pg->free_head;
    if (m->next != NIL)
        pg->blk[m->next].prev = b;
    pg->free_head = b;
    m->state = PAGER_BLOCK_FREE;
    pg->nfree++;
    runs_set(pg, b, 1);
}

/* Takes free block b off the list and out of the tree. */
static void free_take(pager_t *pg, int32_t b)
{
    struct pager_block *m = &pg->blk[b];
    if (m->prev != NIL)
        pg->blk[m->prev].next = m->next;
    else
        pg->free_head = m->next;
    if (m->next != NIL)
        pg->blk[m->next].prev = m->prev;
    m->prev = m->next = NIL;
    pg->nfree--;
    runs_set(pg, b, 0);
}

static void lru_push_tail(pager_t *pg, int32_t b)
{
    struct pager_block *m = &pg->blk[b];
    runs_set(pg, b, 1);
    m->next = NIL;
    m->prev = pg->lru_tail;
    if (m->prev != NIL)
        pg->blk[m->prev].next = b;
    else
        pg->lru_head = b;
    pg->lru_tail = b;
    m->state = PAGER_BLOCK_CACHED;
    pg->ncached++;
}

static void lru_remove(pager_t *pg, int32_t b)
{
    struct pager_block *m = &pg->blk[b];
    runs_set(pg, b, 0);
    if (m->prev != NIL)
        pg->blk[m->prev].next = m->next;
    else
        pg->lru_head = m->next;
    if (m->next != NIL)
        pg->blk[m->next].prev = m->prev;
    else
        pg->lru_tail = m->prev;
    m->prev = m->next = NIL;
    pg->ncached--;
}

/* ---- block references ---------------------------------------------------- */

/* Block b (used) left the hash: every table holding it in its chain
 * [lo, nh) now ends its chain before it. */
static void seqs_cut_chain(pager_t *pg, int32_t b)
{
    for (pager_seq_t *s = pg->seqs; s; s = s->next)
        for (int32_t i = s->lo; i < s->nh; i++)
            if (s->table[i] == b) {
                s->nh = i;
                break;
            }
}

/* Block root left the hash while it still had hashed children (only with
 * a window: see above): takes its hashed subtree out of the hash, depth
 * first with scratch as the stack (a subtree has at most N blocks).
 * Cached descendants become free; used ones stay with their tables. */
static void hash_drop_subtree(pager_t *pg, int32_t root)
{
    int32_t *stack = pg->scratch, top = 0;
    stack[top++] = root;
    while (top > 0) {
        int32_t p = stack[--top];
        for (int32_t b = 0; b < pg->nblocks && pg->blk[p].nkids > 0; b++) {
            struct pager_block *m = &pg->blk[b];
            if (!m->hashed || m->parent != p)
                continue;
            hash_remove(pg, b);
            if (m->state == PAGER_BLOCK_CACHED) {
                lru_remove(pg, b);
                free_push(pg, b);
            } else {
                seqs_cut_chain(pg, b);
            }
            if (m->nkids > 0)
                stack[top++] = b;
        }
    }
}

/* Whether cached block x's entry may move to another id: its hashed
 * children (whose parent field names it) are known — none, or the one
 * its kid link names. */
static bool cached_movable(const pager_t *pg, int32_t x)
{
    const struct pager_block *m = &pg->blk[x];
    return m->state == PAGER_BLOCK_CACHED && (m->nkids == 0 || m->kid != NIL);
}

/* Bytes of one block (all its tiles); 0 when the arena's geometry
 * overflows size_t.  With v, also the arena's strides (see pager.h): tile =
 * one (block, layer, K|V, head) tile; per (layer, K|V), a run of
 * num_blocks blocks of n_kv_heads tiles each. */
static size_t geometry(const struct pager_config *c, struct pager_kv_view *v)
{
    size_t tile, blk, vo, layer, arena, bytes;
    if (__builtin_mul_overflow((size_t)c->block_size, (size_t)c->head_dim + 4, &tile))
        return 0;
    tile = pager_kv_tile_elems(c->dtype, c->block_size, c->head_dim);
    if (__builtin_mul_overflow(tile, (size_t)c->n_kv_heads, &blk) ||
        __builtin_mul_overflow(blk, (size_t)c->num_blocks, &vo) ||
        __builtin_mul_overflow(vo, (size_t)2, &layer) ||
        __builtin_mul_overflow(layer, (size_t)c->n_layers, &arena) ||
        __builtin_mul_overflow(arena, folio_dtype_size(c->dtype), &arena) ||
        __builtin_mul_overflow(blk, (size_t)c->n_layers * 2, &bytes) ||
        __builtin_mul_overflow(bytes, folio_dtype_size(c->dtype), &bytes))
        return 0;
    if (v) {
        v->head_stride = tile;
        v->block_stride = blk;
        v->v_offset = vo;
        v->layer_stride = layer;
    }
    return bytes;
}

/* Copies block src's K/V into block dst: per layer, its K (every head's
 * tile, one run) and its V, 2 * n_layers runs of the arena. */
static void block_copy(const pager_t *pg, int32_t dst, int32_t src)
{
    if (!pg->arena)
        return;
    struct pager_kv_view v;
    geometry(&pg->cfg, &v);
    const size_t esz = folio_dtype_size(pg->cfg.dtype), run = v.block_stride * esz;
    for (int32_t l = 0; l < pg->cfg.n_layers; l++)
        for (int kv = 0; kv < 2; kv++) {
            unsigned char *t =
                pg->arena + ((size_t)l * v.layer_stride + (size_t)kv * v.v_offset) * esz;
            memcpy(t + (size_t)dst * run, t + (size_t)src * run, run);
        }
}

/* Moves cached block x's prefix-cache entry (K/V bytes, token ids, hash
 * identity and links, LRU position, its child's parent link and its
 * parent's kid link) into block d, held by nobody and in no list, and
 * returns x, now out of the hash and off the LRU.  The cache holds the
 * same entries in the same LRU order; only the id holding one changed.
 * No table holds a cached block (refcount 0): no page table changes. */
static int32_t cached_move(pager_t *pg, int32_t x, int32_t d)
{
    struct pager_block *m = &pg->blk[x], *n = &pg->blk[d];
    block_copy(pg, d, x);
    memcpy(btok_of(pg, d), btok_of(pg, x), (size_t)pg->bs * sizeof(int32_t));
    /* LRU: d takes x's place */
    n->prev = m->prev;
    n->next = m->next;
    if (n->prev != NIL)
        pg->blk[n->prev].next = d;
    else
        pg->lru_head = d;
    if (n->next != NIL)
        pg->blk[n->next].prev = d;
    else
        pg->lru_tail = d;
    n->state = PAGER_BLOCK_CACHED;
    m->prev = m->next = NIL;
    runs_set(pg, d, 1);
    runs_set(pg, x, 0);
    /* hash chain: d takes x's place, with its identity */
    n->hprev = m->hprev;
    n->hnext = m->hnext;
    if (n->hprev != NIL)
        pg->blk[n->hprev].hnext = d;
    else
        pg->buckets[bucket_of(pg, m->key)] = d;
    if (n->hnext != NIL)
        pg->blk[n->hnext].hprev = d;
    n->hashed = 1;
    n->key = m->key;
    n->parent_key = m->parent_key;
    n->salt = m->salt;
    n->parent = m->parent;
    n->nkids = m->nkids;
    n->kid = m->kid;
    n->owner = m->owner;
    n->tenant = m->tenant;
    if (m->kid != NIL)
        pg->blk[m->kid].parent = d;
    if (m->parent != NIL && pg->blk[m->parent].kid == x)
        pg->blk[m->parent].kid = d;
    m->hprev = m->hnext = NIL;
    m->hashed = 0;
    m->nkids = 0;
    m->kid = NIL;
    m->parent = NIL;
    return x;
}

/* Whether block t can be handed out now: free, or cached and movable. */
static inline bool block_usable(const pager_t *pg, int32_t t)
{
    return pg->blk[t].state == PAGER_BLOCK_FREE || cached_movable(pg, t);
}

/* The block PAGER_ALLOC_LOCAL wants for a table whose block before the
 * new one is prev (NIL: none): prev + 1 when usable, else the middle of
 * the longest run of free or cached ids when usable, else NIL (then the
 * free list head, or the LRU head, as PAGER_ALLOC_LIFO). */
static int32_t block_choose(const pager_t *pg, int32_t prev)
{
    if (pg->cfg.alloc != PAGER_ALLOC_LOCAL)
        return NIL;
    if (prev >= 0 && prev + 1 < pg->nblocks && block_usable(pg, prev + 1))
        return prev + 1;
    if (pg->runs[1].best == 0)
        return NIL;
    int32_t len, start = runs_longest(pg, &len), t = start + len / 2;
    return block_usable(pg, t) ? t : NIL;
}

/* A fresh, writable block for seq, to follow block prev in its table (NIL:
 * none; the caller checked availability).  The wanted block t
 * (block_choose) when it is free.  Otherwise a donor: the free list head,
 * or when nothing is free the LRU head, evicted (the one eviction rule);
 * and when t is cached (LOCAL), t's entry moves into the donor and the
 * table gets t.  Else the donor itself. */
static int32_t block_alloc(pager_t *pg, const pager_seq_t *seq, int32_t prev)
{
    const int32_t t = block_choose(pg, prev);
    int32_t b;
    if (t != NIL && pg->blk[t].state == PAGER_BLOCK_FREE) {
        b = t;
        free_take(pg, b);
    } else {
        if (pg->nfree > 0) {
            b = pg->free_head;
            free_take(pg, b);
        } else {
            b = pg->lru_head;
            lru_remove(pg, b);
            hash_remove(pg, b);
            if (pg->blk[b].nkids > 0)
                hash_drop_subtree(pg, b);
            pg->evictions++;
        }
        /* the eviction may have changed t (freed it, or its children) */
        if (t != NIL && t != b && cached_movable(pg, t))
            b = cached_move(pg, t, b);
    }
    struct pager_block *m = &pg->blk[b];
    m->state = PAGER_BLOCK_USED;
    m->refcount = 1;
    m->nfull = 0;
    m->owner = seq->owner;
    m->tenant = seq->tenant;
    pg->nused++;
    return b;
}

static void block_ref(pager_t *pg, int32_t b)
{
    struct pager_block *m = &pg->blk[b];
    if (m->state == PAGER_BLOCK_CACHED) {
        lru_remove(pg, b);
        m->state = PAGER_BLOCK_USED;
        pg->nused++;
    }
    if (++m->refcount == 2)
        pg->nshared++;
}

static void block_unref(pager_t *pg, int32_t b)
{
    struct pager_block *m = &pg->blk[b];
    if (--m->refcount == 1)
        pg->nshared--;
    if (m->refcount == 0) {
        pg->nused--;
        if (m->hashed)
            lru_push_tail(pg, b);
        else
            free_push(pg, b);
    }
}

/* Slots of block i that seq uses. */
static inline int32_t seq_block_use(const pager_t *pg, const pager_seq_t *s, int32_t i)
{
    return i < s->nb - 1 ? pg->bs : s->len - (s->nb - 1) * pg->bs;
}

/* Releases blocks [from, nb) of s, last first (so that a cached child is
 * always older in the LRU than its parent). */
static void seq_release_tail(pager_t *pg, pager_seq_t *s, int32_t from)
{
    for (int32_t i = s->nb - 1; i >= FOLIO_MAX(from, s->lo); i--) {
        int32_t b = s->table[i];
        if (seq_block_use(pg, s, i) == pg->bs)
            pg->blk[b].nfull--;
        block_unref(pg, b);
    }
}

/* Grows the table arrays to hold nblocks blocks.  May fail with nothing
 * observable changed (only capacity). */
static int seq_reserve(pager_t *pg, pager_seq_t *s, int64_t nblocks)
{
    if (nblocks <= s->cap)
        return 0;
    int64_t cap = s->cap > 0 ? s->cap : 4;
    while (cap < nblocks)
        cap *= 2;
    int64_t max_blocks = ((int64_t)INT32_MAX + pg->bs - 1) / pg->bs;
    if (cap > max_blocks)
        cap = max_blocks;
    if (cap < nblocks)
        return -EINVAL;
    int32_t *t = folio_realloc(s->table, (size_t)cap * sizeof(int32_t));
    if (!t)
        return -ENOMEM;
    s->table = t;
    int32_t *k = folio_realloc(s->tokens, (size_t)cap * (size_t)pg->bs * sizeof(int32_t));
    if (!k)
        return -ENOMEM;
    s->tokens = k;
    s->cap = (int32_t)cap;
    return 0;
}

/* ---- pool ------------------------------------------------------------- */

static int config_valid(const struct pager_config *c)
{
    if (c->num_blocks < 1 || c->num_blocks > (1 << 30))
        return 0;
    if (c->block_size < 1 || c->block_size > 1024)
        return 0;
    if (c->n_layers < 1 || c->n_kv_heads < 1 || c->head_dim < 1 || c->window < 0)
        return 0;
    if (c->dtype != FOLIO_F32 && c->dtype != FOLIO_F16 && c->dtype != FOLIO_BF16 &&
        c->dtype != FOLIO_Q8)
        return 0;
    if (c->alloc != PAGER_ALLOC_LOCAL && c->alloc != PAGER_ALLOC_LIFO)
        return 0;
    return 1;
}

int pager_init(pager_t **out, const struct pager_config *cfg)
{
    if (!out || !cfg || !config_valid(cfg))
        return -EINVAL;
    *out = NULL;
    size_t block_bytes = geometry(cfg, NULL);
    size_t arena_bytes;
    if (block_bytes == 0 ||
        __builtin_mul_overflow(block_bytes, (size_t)cfg->num_blocks, &arena_bytes))
        return -EINVAL;

    pager_t *pg = folio_calloc(1, sizeof *pg);
    if (!pg)
        return -ENOMEM;
    int32_t n = cfg->num_blocks;
    uint32_t nbuckets = 1;
    while (nbuckets < (uint32_t)n)
        nbuckets <<= 1;
    pg->run_leaves = nbuckets; /* the run tree has as many leaves */
    pg->cfg = *cfg;
    pg->nblocks = n;
    pg->bs = cfg->block_size;
    pg->block_bytes = block_bytes;
    pg->bucket_mask = nbuckets - 1;
    pg->key_mask = ~(uint64_t)0;
    pg->blk = folio_calloc((size_t)n, sizeof *pg->blk);
    pg->btok = folio_calloc((size_t)n * (size_t)pg->bs, sizeof(int32_t));
    pg->buckets = folio_malloc((size_t)nbuckets * sizeof(int32_t));
    pg->scratch = folio_malloc((size_t)n * 2 * sizeof(int32_t));
    pg->stamp = folio_calloc((size_t)n + 1, sizeof(uint32_t));
    pg->runs = folio_calloc((size_t)nbuckets * 2, sizeof *pg->runs); /* all used */
    if (!pg->blk || !pg->btok || !pg->buckets || !pg->scratch || !pg->stamp || !pg->runs)
        goto nomem;
    pg->stamp_now = &pg->stamp[n];
    if (!cfg->no_arena) {
        /* on huge pages where the kernel has them (one fault per 2 MiB of
         * a (layer, K|V) plane); prefault: resident from the start, so a
         * step never page-faults on K/V */
        pg->arena = folio_region_alloc(
            arena_bytes, FOLIO_REGION_HUGE | (cfg->prefault ? FOLIO_REGION_RESIDENT : 0));
        if (!pg->arena)
            goto nomem;
        pg->arena_bytes = arena_bytes;
    }
    for (uint32_t h = 0; h < nbuckets; h++)
        pg->buckets[h] = NIL;
    pg->free_head = pg->lru_head = pg->lru_tail = NIL;
    for (int32_t b = n - 1; b >= 0; b--) {
        struct pager_block *m = &pg->blk[b];
        m->hprev = m->hnext = m->parent = m->kid = NIL;
        free_push(pg, b); /* block 0 ends at the head */
    }
    *out = pg;
    CHECKED(pg);
    return 0;
nomem:
    pager_free(pg);
    return -ENOMEM;
}

static void seq_destroy(pager_seq_t *s)
{
    folio_free(s->table);
    folio_free(s->tokens);
    folio_free(s);
}

void pager_free(pager_t *pg)
{
    if (!pg)
        return;
    while (pg->seqs) {
        pager_seq_t *s = pg->seqs;
        pg->seqs = s->next;
        seq_destroy(s);
    }
    folio_region_free(pg->arena, pg->arena_bytes);
    folio_free(pg->blk);
    folio_free(pg->btok);
    folio_free(pg->buckets);
    folio_free(pg->scratch);
    folio_free(pg->stamp);
    folio_free(pg->runs);
    folio_free(pg);
}

int pager__test_set_key_mask(pager_t *pg, uint64_t mask)
{
    if (pg->nhashed != 0)
        return -EBUSY;
    pg->key_mask = mask;
    return 0;
}

static void view_of(const struct pager_config *c, struct pager_kv_view *v)
{
    memset(v, 0, sizeof *v);
    geometry(c, v);
    v->dtype = c->dtype;
    v->num_blocks = c->num_blocks;
    v->block_size = c->block_size;
    v->n_layers = c->n_layers;
    v->n_kv_heads = c->n_kv_heads;
    v->head_dim = c->head_dim;
}

void pager_kv_view(const pager_t *pg, struct pager_kv_view *v)
{
    view_of(&pg->cfg, v);
    v->base = pg->arena;
}

size_t pager_kv_layout(const struct pager_config *cfg, struct pager_kv_view *v)
{
    size_t block_bytes, arena_bytes;
    if (!cfg || !v || !config_valid(cfg) || (block_bytes = geometry(cfg, NULL)) == 0 ||
        __builtin_mul_overflow(block_bytes, (size_t)cfg->num_blocks, &arena_bytes))
        return 0;
    view_of(cfg, v);
    return arena_bytes;
}

int32_t pager_block_size(const pager_t *pg)
{
    return pg->bs;
}

int32_t pager_window(const pager_t *pg)
{
    return pg->cfg.window;
}

int32_t pager_window_blocks(const pager_t *pg, int32_t n_new)
{
    if (pg->cfg.window <= 0)
        return INT32_MAX;
    int64_t nb = FOLIO_DIV_CEIL((int64_t)pg->cfg.window - 1 + FOLIO_MAX(n_new, 0), pg->bs) + 1;
    return nb > INT32_MAX ? INT32_MAX : (int32_t)nb;
}

int32_t pager_blocks_available(const pager_t *pg)
{
    return pg->nfree + pg->ncached;
}

/* Fresh stamp value for a walk over the scratch arrays (const pager: the
 * scratch arrays are the only thing such walks write). */
static uint32_t stamp_next(const pager_t *pg)
{
    uint32_t s = ++*pg->stamp_now;
    if (s == 0) { /* wrapped: clear */
        memset(pg->stamp, 0, (size_t)pg->nblocks * sizeof(uint32_t));
        s = *pg->stamp_now = 1;
    }
    return s;
}

/* Slots used in block b: the most any holder uses. */
static int32_t block_fill(const pager_t *pg, int32_t b)
{
    const struct pager_block *m = &pg->blk[b];
    if (m->state == PAGER_BLOCK_FREE)
        return 0;
    if (m->state == PAGER_BLOCK_CACHED || m->nfull > 0)
        return pg->bs;
    int32_t fill = 0;
    for (const pager_seq_t *s = pg->seqs; s; s = s->next)
        if (s->nb > 0 && s->table[s->nb - 1] == b)
            fill = FOLIO_MAX(fill, seq_block_use(pg, s, s->nb - 1));
    return fill;
}

size_t pager_arena_resident(const pager_t *pg)
{
    return folio_region_resident(pg->arena, pg->arena_bytes);
}

int pager_release_pages(pager_t *pg)
{
    if (pg->nfree != pg->nblocks)
        return -EBUSY;
    folio_region_release(pg->arena, pg->arena_bytes);
    return 0;
}

void pager_stats_get(const pager_t *pg, struct pager_stats *st)
{
    memset(st, 0, sizeof *st);
    st->blocks_total = pg->nblocks;
    st->blocks_free = pg->nfree;
    st->blocks_used = pg->nused;
    st->blocks_cached = pg->ncached;
    st->blocks_shared = pg->nshared;
    st->tokens_held = pg->tokens_held;
    st->seqs = pg->nseqs;
    st->prefix_queries = pg->prefix_queries;
    st->prefix_hits = pg->prefix_hits;
    st->evictions = pg->evictions;
    st->cow_copies = pg->cow_copies;
    st->window_frees = pg->window_frees;
    st->bytes_per_block = pg->block_bytes;
    for (const pager_seq_t *s = pg->seqs; s; s = s->next)
        st->blocks_held += s->nb - s->lo;
    /* Only a table's last block can be partial; a block is partial when no
     * holder uses it fully (nfull == 0), and then its empty slots are
     * B - (the most any holder uses).  Walk the last blocks twice: first
     * the maximum per block, then count each block once. */
    uint32_t seen = stamp_next(pg), counted = stamp_next(pg);
    for (const pager_seq_t *s = pg->seqs; s; s = s->next) {
        if (s->nb == 0)
            continue;
        int32_t b = s->table[s->nb - 1], use = seq_block_use(pg, s, s->nb - 1);
        if (pg->blk[b].nfull > 0)
            continue;
        if (pg->stamp[b] != seen) {
            pg->stamp[b] = seen;
            pg->scratch[b] = use;
        } else if (use > pg->scratch[b]) {
            pg->scratch[b] = use;
        }
    }
    for (const pager_seq_t *s = pg->seqs; s; s = s->next) {
        if (s->nb == 0)
            continue;
        int32_t b = s->table[s->nb - 1];
        if (pg->stamp[b] == seen) {
            st->slots_empty += pg->bs - pg->scratch[b];
            pg->stamp[b] = counted;
        }
    }
}

void pager_block_info_get(const pager_t *pg, int32_t block, struct pager_block_info *info)
{
    memset(info, 0, sizeof *info);
    if (block < 0 || block >= pg->nblocks) {
        info->state = PAGER_BLOCK_FREE;
        return;
    }
    const struct pager_block *m = &pg->blk[block];
    info->state = (enum pager_block_state)m->state;
    info->refcount = m->refcount;
    info->tokens = block_fill(pg, block);
    info->owner = m->owner;
    info->tenant = m->tenant;
}

/* ---- pager_check ---------------------------------------------------------- */

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        if (msg && msglen)                                                                         \
            snprintf(msg, msglen, __VA_ARGS__);                                                    \
        return -EUCLEAN;                                                                           \
    } while (0)

/* pager_check in steps, each walking one structure; the counts of the
 * first are the others' expectations. */
struct check_counts {
    int64_t nfree, ncached, nhashed;
};

/* Every block's state against its refcount and hash flag; the counters. */
static int check_states(const pager_t *pg, struct check_counts *cc, char *msg, size_t msglen)
{
    const int32_t n = pg->nblocks;
    /* Counts by state. */
    int64_t nfree = 0, nused = 0, ncached = 0, nshared = 0, nhashed = 0;
    for (int32_t b = 0; b < n; b++) {
        const struct pager_block *m = &pg->blk[b];
        switch (m->state) {
        case PAGER_BLOCK_FREE:
            nfree++;
            if (m->refcount != 0 || m->hashed)
                FAIL("free block %d: refcount %d hashed %d", b, m->refcount, m->hashed);
            break;
        case PAGER_BLOCK_USED:
            nused++;
            if (m->refcount < 1)
                FAIL("used block %d with refcount %d", b, m->refcount);
            break;
        case PAGER_BLOCK_CACHED:
            ncached++;
            if (m->refcount != 0 || !m->hashed)
                FAIL("cached block %d: refcount %d hashed %d", b, m->refcount, m->hashed);
            break;
        default:
            FAIL("block %d: bad state %d", b, m->state);
        }
        nshared += m->refcount > 1;
        nhashed += m->hashed;
    }
    if (nfree + nused + ncached != n)
        FAIL("free %" PRId64 " + used %" PRId64 " + cached %" PRId64 " != total %d", nfree, nused,
             ncached, n);
    if (nfree != pg->nfree || nused != pg->nused || ncached != pg->ncached ||
        nshared != pg->nshared || nhashed != pg->nhashed)
        FAIL("counters: free %d/%" PRId64 " used %d/%" PRId64 " cached %d/%" PRId64
             " shared %d/%" PRId64 " hashed %d/%" PRId64,
             pg->nfree, nfree, pg->nused, nused, pg->ncached, ncached, pg->nshared, nshared,
             pg->nhashed, nhashed);
    cc->nfree = nfree;
    cc->ncached = ncached;
    cc->nhashed = nhashed;
    return 0;
}

static int check_free_list(const pager_t *pg, int64_t nfree, char *msg, size_t msglen)
{
    const int32_t n = pg->nblocks;
    /* Free list: exactly the FREE blocks. */
    int64_t k = 0;
    for (int32_t b = pg->free_head, prev = NIL; b != NIL; prev = b, b = pg->blk[b].next) {
        if (b < 0 || b >= n || ++k > nfree)
            FAIL("free list corrupt at %d", b);
        if (pg->blk[b].state != PAGER_BLOCK_FREE || pg->blk[b].prev != prev)
            FAIL("free list: block %d state %d prev %d", b, pg->blk[b].state, pg->blk[b].prev);
    }
    if (k != nfree)
        FAIL("free list holds %" PRId64 " of %" PRId64 " free blocks", k, nfree);
    /* Run tree: leaves are the FREE states, every node recomputes. */
    const struct pager_run *r = pg->runs;
    const uint32_t leaves = pg->run_leaves;
    for (uint32_t i = 0; i < leaves; i++) {
        int32_t v = (int32_t)i < n && pg->blk[i].state != PAGER_BLOCK_USED;
        if (r[leaves + i].pre != v || r[leaves + i].suf != v || r[leaves + i].best != v)
            FAIL("run tree: leaf of block %u is not its state", i);
    }
    for (uint32_t i = leaves - 1, half = 1; i >= 1; i--) {
        while (i < leaves / half / 2) /* node i's children hold half ids each */
            half *= 2;
        const struct pager_run *l = &r[2 * i], *h = &r[2 * i + 1];
        int32_t hf = (int32_t)half;
        if (r[i].pre != (l->pre == hf ? hf + h->pre : l->pre) ||
            r[i].suf != (h->suf == hf ? hf + l->suf : h->suf) ||
            r[i].best != FOLIO_MAX(FOLIO_MAX(l->best, h->best), l->suf + h->pre))
            FAIL("run tree: node %u does not recompute", i);
    }
    return 0;
}

static int check_lru(const pager_t *pg, int64_t ncached, char *msg, size_t msglen)
{
    const int32_t n = pg->nblocks;
    int64_t k;
    /* LRU: exactly the CACHED blocks; remember each one's position. */
    uint32_t pos_stamp = stamp_next(pg);
    k = 0;
    int32_t last = NIL;
    for (int32_t b = pg->lru_head, prev = NIL; b != NIL; prev = b, b = pg->blk[b].next) {
        if (b < 0 || b >= n || ++k > ncached)
            FAIL("LRU corrupt at %d", b);
        if (pg->blk[b].state != PAGER_BLOCK_CACHED || pg->blk[b].prev != prev)
            FAIL("LRU: block %d state %d prev %d", b, pg->blk[b].state, pg->blk[b].prev);
        pg->stamp[b] = pos_stamp;
        pg->scratch[b] = (int32_t)k;
        last = b;
    }
    if (k != ncached || last != pg->lru_tail)
        FAIL("LRU holds %" PRId64 " of %" PRId64 " cached blocks (tail %d/%d)", k, ncached, last,
             pg->lru_tail);
    /* Cached children are older than their cached parents (without a
     * window; with one, eviction drops orphaned subtrees instead). */
    for (int32_t b = pg->cfg.window > 0 ? NIL : pg->lru_head; b != NIL; b = pg->blk[b].next) {
        int32_t p = pg->blk[b].parent;
        if (p != NIL && pg->blk[p].state == PAGER_BLOCK_CACHED &&
            !(pg->stamp[p] == pos_stamp && pg->scratch[p] > pg->scratch[b]))
            FAIL("LRU: cached block %d is not older than its parent %d", b, p);
    }
    return 0;
}

static int check_hash(const pager_t *pg, int64_t nhashed, char *msg, size_t msglen)
{
    const int32_t n = pg->nblocks, bs = pg->bs;
    int64_t k;
    /* Hash: keys recompute, parents hashed, identities distinct. */
    k = 0;
    for (uint32_t h = 0; h <= pg->bucket_mask; h++) {
        for (int32_t b = pg->buckets[h], prev = NIL; b != NIL; prev = b, b = pg->blk[b].hnext) {
            const struct pager_block *m = &pg->blk[b];
            if (b < 0 || b >= n || ++k > nhashed)
                FAIL("hash chain %u corrupt at %d", h, b);
            if (!m->hashed || m->hprev != prev || bucket_of(pg, m->key) != h)
                FAIL("hash: block %d hashed %d hprev %d/%d bucket %u/%u", b, m->hashed, m->hprev,
                     prev, bucket_of(pg, m->key), h);
            if (key_of(pg, m->parent_key, btok_of(pg, b), m->salt) != m->key)
                FAIL("hash: block %d tokens do not hash to its key", b);
            if (m->parent == NIL) {
                if (m->parent_key != pager__salt_seed(m->salt))
                    FAIL("hash: block %d at depth 0 has a foreign parent key", b);
            } else {
                const struct pager_block *p = &pg->blk[m->parent];
                if (!p->hashed || p->key != m->parent_key || p->salt != m->salt)
                    FAIL("hash: block %d parent %d not hashed with its key", b, m->parent);
                if (pg->cfg.window == 0 && p->refcount < m->refcount)
                    FAIL("hash: block %d refcount %d above its parent %d's %d", b, m->refcount,
                         m->parent, p->refcount);
            }
            for (int32_t o = m->hnext; o != NIL; o = pg->blk[o].hnext)
                if (pg->blk[o].key == m->key && pg->blk[o].salt == m->salt &&
                    pg->blk[o].parent == m->parent &&
                    !memcmp(btok_of(pg, o), btok_of(pg, b), (size_t)bs * sizeof(int32_t)))
                    FAIL("hash: blocks %d and %d have the same identity", b, o);
        }
    }
    if (k != nhashed)
        FAIL("hash chains hold %" PRId64 " of %" PRId64 " hashed blocks", k, nhashed);
    return 0;
}

/* Page tables against the blocks they map: states, tokens, hash links,
 * and every block's refcount = the tables holding it. */
static int check_tables(const pager_t *pg, char *msg, size_t msglen)
{
    const int32_t n = pg->nblocks, bs = pg->bs;
    /* Page tables: count references into scratch. */
    uint32_t ref_stamp = stamp_next(pg);
    int64_t nseqs = 0, tokens = 0;
    for (const pager_seq_t *s = pg->seqs; s; s = s->next) {
        if (++nseqs > pg->nseqs)
            FAIL("live list longer than %" PRId64, pg->nseqs);
        if (s->next && s->next->prev != s)
            FAIL("live list links broken");
        if (s->len < 0 || s->computed < 0 || s->computed > s->len)
            FAIL("seq %p: len %d computed %d", (const void *)s, s->len, s->computed);
        if (s->nb != FOLIO_DIV_CEIL(s->len, bs) || s->nb > s->cap)
            FAIL("seq %p: %d tokens in %d blocks (cap %d)", (const void *)s, s->len, s->nb, s->cap);
        tokens += s->len;
        {
            const int32_t w = pg->cfg.window;
            const int32_t keep = w > 0 ? FOLIO_MAX(0, s->computed - w + 1) / bs : 0;
            if (s->lo < 0 || (s->lo > 0 && (s->lo >= s->nb || s->lo > keep)))
                FAIL("seq %p: holes [0, %d) of %d blocks, %d computed, window %d", (const void *)s,
                     s->lo, s->nb, s->computed, w);
        }
        for (int32_t i = 0; i < s->lo; i++)
            if (s->table[i] != PAGER_HOLE)
                FAIL("seq %p: entry %d below lo %d is block %d, not a hole", (const void *)s, i,
                     s->lo, s->table[i]);
        for (int32_t i = s->lo; i < s->nb; i++) {
            int32_t b = s->table[i];
            if (b < 0 || b >= n)
                FAIL("seq %p: block %d out of range", (const void *)s, b);
            const struct pager_block *m = &pg->blk[b];
            if (m->state != PAGER_BLOCK_USED)
                FAIL("seq %p maps block %d in state %d", (const void *)s, b, m->state);
            if (pg->stamp[b] != ref_stamp) {
                pg->stamp[b] = ref_stamp;
                pg->scratch[b] = 0;
                pg->scratch[n + b] = 0;
            }
            /* scratch[b]: holders, scratch[n + b]: holders using it fully */
            int32_t use = seq_block_use(pg, s, i);
            pg->scratch[b]++;
            pg->scratch[n + b] += use == bs;
            if (memcmp(btok_of(pg, b), s->tokens + (size_t)i * bs, (size_t)use * sizeof(int32_t)))
                FAIL("seq %p: tokens of block %d (index %d) differ from the table's",
                     (const void *)s, b, i);
            if (i < s->nh && !m->hashed)
                FAIL("seq %p: block %d (index %d) below nh %d not in the prefix cache",
                     (const void *)s, b, i, s->nh);
            /* the first block after holes: its parent was released */
            if (m->hashed && !(i > 0 && i == s->lo) &&
                (m->parent != (i ? s->table[i - 1] : NIL) || m->salt != s->salt))
                FAIL("seq %p: hashed block %d (index %d) parent %d salt mismatch", (const void *)s,
                     b, i, m->parent);
        }
        if (s->nh < 0 || s->nh > s->nb || s->bs != bs)
            FAIL("seq %p: nh %d of %d blocks", (const void *)s, s->nh, s->nb);
        /* A full computed block at nh or later may stay out of the cache:
         * mark_computed stops at a shared duplicate and retries later. */
    }
    if (nseqs != pg->nseqs || tokens != pg->tokens_held)
        FAIL("seqs %" PRId64 "/%" PRId64 " tokens %" PRId64 "/%" PRId64, nseqs, pg->nseqs, tokens,
             pg->tokens_held);
    for (int32_t b = 0; b < n; b++) {
        const struct pager_block *m = &pg->blk[b];
        int32_t holders = 0, full = 0;
        if (pg->stamp[b] == ref_stamp) {
            holders = pg->scratch[b];
            full = pg->scratch[n + b];
        }
        if (m->refcount != holders || m->nfull != full)
            FAIL("block %d: refcount %d nfull %d but %d tables hold it (%d fully)", b, m->refcount,
                 m->nfull, holders, full);
    }

    /* nkids: hashed children per block. */
    uint32_t kid_stamp = stamp_next(pg);
    for (int32_t b = 0; b < n; b++) {
        int32_t p = pg->blk[b].parent;
        if (!pg->blk[b].hashed || p == NIL)
            continue;
        if (pg->stamp[p] != kid_stamp) {
            pg->stamp[p] = kid_stamp;
            pg->scratch[p] = 0;
        }
        pg->scratch[p]++;
    }
    for (int32_t b = 0; b < n; b++) {
        int32_t kids = pg->stamp[b] == kid_stamp ? pg->scratch[b] : 0;
        if (pg->blk[b].nkids != kids)
            FAIL("block %d: nkids %d but %d hashed children", b, pg->blk[b].nkids, kids);
        int32_t k = pg->blk[b].kid;
        if (k != NIL &&
            (kids != 1 || k < 0 || k >= n || !pg->blk[k].hashed || pg->blk[k].parent != b))
            FAIL("block %d: kid link %d is not its one hashed child", b, k);
    }
    return 0;
}

int pager_check(const pager_t *pg, char *msg, size_t msglen)
{
    if (msg && msglen)
        msg[0] = 0;
    struct check_counts cc;
    int rc;
    if ((rc = check_states(pg, &cc, msg, msglen)) ||
        (rc = check_free_list(pg, cc.nfree, msg, msglen)) ||
        (rc = check_lru(pg, cc.ncached, msg, msglen)) ||
        (rc = check_hash(pg, cc.nhashed, msg, msglen)) || (rc = check_tables(pg, msg, msglen)))
        return rc;
    return 0;
}

/* ---- pager_dump ----------------------------------------------------------- */

void pager_dump(const pager_t *pg, FILE *out)
{
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    struct pager_stats st;
    pager_stats_get(pg, &st);
    fprintf(out, "pager: %d blocks x %d slots, %zu bytes/block, %s%s\n", pg->nblocks, pg->bs,
            pg->block_bytes, folio_dtype_name(pg->cfg.dtype), pg->arena ? "" : " (no arena)");
    fprintf(out, "block map ('.' free, 'c' cached, refcount otherwise; '+' > 35):\n");
    for (int32_t b = 0; b < pg->nblocks; b++) {
        const struct pager_block *m = &pg->blk[b];
        char c = m->state == PAGER_BLOCK_FREE     ? '.'
                 : m->state == PAGER_BLOCK_CACHED ? 'c'
                 : m->refcount < 36               ? digits[m->refcount]
                                                  : '+';
        fputc(c, out);
        if (b % 64 == 63 || b == pg->nblocks - 1)
            fputc('\n', out);
    }
    fprintf(out,
            "blocks: total %" PRId64 " free %" PRId64 " used %" PRId64 " cached %" PRId64
            " shared %" PRId64 "\n",
            st.blocks_total, st.blocks_free, st.blocks_used, st.blocks_cached, st.blocks_shared);
    fprintf(out, "seqs %" PRId64 " tokens_held %" PRId64 " slots_empty %" PRId64 "\n", st.seqs,
            st.tokens_held, st.slots_empty);
    fprintf(out,
            "prefix: queries %" PRId64 " hits %" PRId64 " hashed %d; evictions %" PRId64
            " cow_copies %" PRId64 "\n",
            st.prefix_queries, st.prefix_hits, pg->nhashed, st.evictions, st.cow_copies);
}

/* ---- page tables ------------------------------------------------------------ */

int pager_seq_new(pager_t *pg, uint64_t salt, uint64_t owner, uint32_t tenant, pager_seq_t **out)
{
    if (!pg || !out)
        return -EINVAL;
    pager_seq_t *s = folio_calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->salt = salt;
    s->owner = owner;
    s->tenant = tenant;
    s->bs = pg->bs;
    s->next = pg->seqs;
    if (s->next)
        s->next->prev = s;
    pg->seqs = s;
    pg->nseqs++;
    *out = s;
    CHECKED(pg);
    return 0;
}

void pager_seq_free(pager_t *pg, pager_seq_t *s)
{
    if (!s)
        return;
    seq_release_tail(pg, s, 0);
    pg->tokens_held -= s->len;
    if (s->prev)
        s->prev->next = s->next;
    else
        pg->seqs = s->next;
    if (s->next)
        s->next->prev = s->prev;
    pg->nseqs--;
    seq_destroy(s);
    CHECKED(pg);
}

/* Longest run of hashed blocks matching tokens[0..], at most max_blocks;
 * stores their ids in out (when not NULL). */
static int32_t prefix_walk(const pager_t *pg, uint64_t salt, const int32_t *tokens,
                           int32_t max_blocks, int32_t *out)
{
    uint64_t pkey = pager__salt_seed(salt);
    int32_t parent = NIL, i = 0;
    for (; i < max_blocks; i++) {
        const int32_t *t = tokens + (size_t)i * pg->bs;
        uint64_t key = key_of(pg, pkey, t, salt);
        int32_t b = hash_find(pg, key, salt, parent, t);
        if (b == NIL)
            break;
        if (out)
            out[i] = b;
        parent = b;
        pkey = key;
    }
    return i;
}

/* Blocks a prefix lookup of n tokens may take: never all n tokens. */
static inline int32_t prefix_max_blocks(const pager_t *pg, int32_t n)
{
    return n > 0 ? (n - 1) / pg->bs : 0;
}

int32_t pager_prefix_match(const pager_t *pg, uint64_t salt, const int32_t *tokens, int32_t n)
{
    if (!pg || !tokens || n <= 0)
        return 0;
    return prefix_walk(pg, salt, tokens, prefix_max_blocks(pg, n), NULL) * pg->bs;
}

static int adopt_prefix(pager_t *pg, pager_seq_t *s, const int32_t *tokens, int32_t n,
                        int32_t *n_hit)
{
    if (!pg || !s || n < 0 || (n > 0 && !tokens) || s->len != 0)
        return -EINVAL;
    int32_t m = n > 0 ? prefix_walk(pg, s->salt, tokens, prefix_max_blocks(pg, n), NULL) : 0;
    int r = seq_reserve(pg, s, m);
    if (r < 0)
        return r;
    if (m > 0)
        prefix_walk(pg, s->salt, tokens, m, s->table);
    for (int32_t i = 0; i < m; i++) {
        block_ref(pg, s->table[i]);
        pg->blk[s->table[i]].nfull++;
    }
    int32_t hit = m * pg->bs;
    if (hit > 0)
        memcpy(s->tokens, tokens, (size_t)hit * sizeof(int32_t));
    s->nb = s->nh = m;
    s->len = s->computed = hit;
    pg->tokens_held += hit;
    pg->prefix_queries += n;
    pg->prefix_hits += hit;
    if (n_hit)
        *n_hit = hit;
    return 0;
}

int pager_seq_adopt_prefix(pager_t *pg, pager_seq_t *s, const int32_t *tokens, int32_t n,
                           int32_t *n_hit)
{
    if (n_hit)
        *n_hit = 0;
    int r = adopt_prefix(pg, s, tokens, n, n_hit);
    if (pg)
        CHECKED(pg);
    return r;
}

/* Whether appending to s writes into its last block, which must be copied
 * first (shared, or immutable because it is in the prefix cache). */
static inline bool seq_needs_cow(const pager_t *pg, const pager_seq_t *s)
{
    if (s->len % pg->bs == 0)
        return false;
    const struct pager_block *m = &pg->blk[s->table[s->nb - 1]];
    return m->refcount > 1 || m->hashed;
}

int32_t pager_seq_blocks_needed(const pager_t *pg, const pager_seq_t *s, int32_t n)
{
    if (n <= 0)
        return 0;
    int64_t nb = FOLIO_DIV_CEIL((int64_t)s->len + n, pg->bs);
    int64_t need = nb - s->nb + (seq_needs_cow(pg, s) ? 1 : 0);
    return need > INT32_MAX ? INT32_MAX : (int32_t)need;
}

static int seq_append(pager_t *pg, pager_seq_t *s, const int32_t *tokens, int32_t n)
{
    if (!pg || !s || n < 0 || (n > 0 && !tokens) || n > INT32_MAX - s->len)
        return -EINVAL;
    if (n == 0)
        return 0;
    const int32_t bs = pg->bs;
    int32_t need = pager_seq_blocks_needed(pg, s, n);
    if (need > pg->nfree + pg->ncached)
        return -ENOSPC;
    int r = seq_reserve(pg, s, FOLIO_DIV_CEIL((int64_t)s->len + n, bs));
    if (r < 0)
        return r;

    int32_t pos = s->len, b = NIL;
    if (pos % bs != 0) {
        b = s->table[s->nb - 1];
        if (seq_needs_cow(pg, s)) {
            int32_t c = block_alloc(pg, s, s->nb >= 2 ? s->table[s->nb - 2] : NIL);
            block_copy(pg, c, b);
            memcpy(btok_of(pg, c), btok_of(pg, b), (size_t)(pos % bs) * sizeof(int32_t));
            block_unref(pg, b);
            s->table[s->nb - 1] = c;
            s->nh = FOLIO_MIN(s->nh, s->nb - 1);
            pg->cow_copies++;
            b = c;
        } else {
            pg->blk[b].owner = s->owner;
            pg->blk[b].tenant = s->tenant;
        }
    }
    for (int32_t j = 0; j < n; j++, pos++) {
        int32_t off = pos % bs;
        if (off == 0) {
            b = block_alloc(pg, s, s->nb > 0 ? s->table[s->nb - 1] : NIL);
            s->table[s->nb++] = b;
        }
        btok_of(pg, b)[off] = tokens[j];
        s->tokens[pos] = tokens[j];
        if (off == bs - 1)
            pg->blk[b].nfull++;
    }
    s->len = pos;
    pg->tokens_held += n;
    return 0;
}

int pager_seq_append(pager_t *pg, pager_seq_t *s, const int32_t *tokens, int32_t n)
{
    int r = seq_append(pg, s, tokens, n);
    if (pg)
        CHECKED(pg);
    return r;
}

/* Releases the blocks below the window of the next row to compute
 * (position computed), front first, never the last block. */
static void seq_release_window(pager_t *pg, pager_seq_t *s)
{
    int32_t keep = s->computed - pg->cfg.window + 1; /* first position still read */
    int32_t lo = FOLIO_MIN(FOLIO_MAX(keep, 0) / pg->bs, s->nb - 1);
    for (int32_t i = s->lo; i < lo; i++) {
        int32_t b = s->table[i];
        pg->blk[b].nfull--; /* not the last block: full for s */
        block_unref(pg, b);
        s->table[i] = PAGER_HOLE;
        pg->window_frees++;
    }
    if (lo > s->lo)
        s->lo = lo;
}

void pager_seq_mark_computed(pager_t *pg, pager_seq_t *s, int32_t n)
{
    if (!pg || !s)
        return;
    if (n > s->len)
        n = s->len;
    if (n > s->computed)
        s->computed = n;
    /* Hash the full computed blocks past the cached chain, in order. */
    const int32_t bs = pg->bs;
    for (int32_t i = s->nh; i < s->computed / bs; i++) {
        /* block i joins the chain only while the table holds block i - 1 */
        if (i < s->lo + (i > 0))
            break;
        int32_t b = s->table[i];
        if (!pg->blk[b].hashed) {
            int32_t parent = i > 0 ? s->table[i - 1] : NIL;
            uint64_t pkey = i > 0 ? pg->blk[parent].key : pager__salt_seed(s->salt);
            const int32_t *t = s->tokens + (size_t)i * bs;
            uint64_t key = key_of(pg, pkey, t, s->salt);
            int32_t e = hash_find(pg, key, s->salt, parent, t);
            if (e == NIL) {
                hash_insert(pg, b, key, pkey, s->salt, parent);
            } else if (pg->blk[b].refcount == 1) {
                /* The same content is already cached: use that block and
                 * drop ours, so one identity has one block. */
                block_ref(pg, e);
                pg->blk[e].nfull++;
                pg->blk[b].nfull--;
                block_unref(pg, b);
                s->table[i] = e;
            } else {
                /* A duplicate our fork siblings still hold: switching would
                 * leave them holding children whose parent they do not
                 * hold.  Retry at the next mark, once we are alone. */
                break;
            }
        }
        s->nh = i + 1;
    }
    if (pg->cfg.window > 0)
        seq_release_window(pg, s);
    CHECKED(pg);
}

int pager_seq_truncate(pager_t *pg, pager_seq_t *s, int32_t n)
{
    if (!pg || !s || n < 0 || n > s->len)
        return -EINVAL;
    const int32_t bs = pg->bs;
    int32_t nb = FOLIO_DIV_CEIL(n, bs);
    if (s->lo > 0) {
        /* the row at n reads from n - window + 1: its blocks must be held */
        int32_t keep = FOLIO_MAX(n - pg->cfg.window + 1, 0) / bs;
        if (s->lo > keep || s->lo >= nb)
            return -EINVAL;
    }
    seq_release_tail(pg, s, nb);
    /* The new last block was full for s (it was not its last block, or the
     * old length filled it); it is not if n cuts into it. */
    if (nb > 0 && n % bs != 0 && seq_block_use(pg, s, nb - 1) == bs)
        pg->blk[s->table[nb - 1]].nfull--;
    pg->tokens_held -= s->len - n;
    s->nb = nb;
    s->nh = FOLIO_MIN(s->nh, nb);
    s->len = n;
    if (s->computed > n)
        s->computed = n;
    CHECKED(pg);
    return 0;
}

int pager_seq_fork(pager_t *pg, const pager_seq_t *parent, uint64_t owner, uint32_t tenant,
                   pager_seq_t **child)
{
    if (!pg || !parent || !child)
        return -EINVAL;
    pager_seq_t *s = folio_calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    int r = seq_reserve(pg, s, parent->nb);
    if (r < 0) {
        seq_destroy(s);
        CHECKED(pg);
        return r;
    }
    s->salt = parent->salt;
    s->owner = owner;
    s->tenant = tenant;
    s->len = parent->len;
    s->computed = parent->computed;
    s->nb = parent->nb;
    s->nh = parent->nh;
    s->lo = parent->lo;
    s->bs = parent->bs;
    if (s->nb > 0) {
        memcpy(s->table, parent->table, (size_t)s->nb * sizeof(int32_t));
        memcpy(s->tokens, parent->tokens, (size_t)s->len * sizeof(int32_t));
    }
    for (int32_t i = s->lo; i < s->nb; i++) {
        block_ref(pg, s->table[i]);
        if (seq_block_use(pg, s, i) == pg->bs)
            pg->blk[s->table[i]].nfull++;
    }
    s->next = pg->seqs;
    if (s->next)
        s->next->prev = s;
    pg->seqs = s;
    pg->nseqs++;
    pg->tokens_held += s->len;
    *child = s;
    CHECKED(pg);
    return 0;
}

int32_t pager_seq_len(const pager_seq_t *s)
{
    return s->len;
}

int32_t pager_seq_blocks_held(const pager_seq_t *s)
{
    return s->nb - s->lo;
}

int32_t pager_seq_computed(const pager_seq_t *s)
{
    return s->computed;
}

const int32_t *pager_seq_tokens(const pager_seq_t *s)
{
    return s->tokens;
}

const int32_t *pager_seq_block_table(const pager_seq_t *s, int32_t *n_blocks)
{
    if (n_blocks)
        *n_blocks = s->nb;
    return s->table;
}

void pager_seq_slot(const pager_seq_t *s, int32_t pos, int32_t *block, int32_t *offset)
{
    /* Always-on bounds check: a bad position is a caller bug that would
     * otherwise write K/V into someone else's block. */
    FOLIO_CHECK(pos >= 0 && pos < s->len, "position %d outside the sequence's %d tokens", (int)pos,
                (int)s->len);
    *block = s->table[pos / s->bs];
    *offset = pos % s->bs;
    FOLIO_CHECK(*block != PAGER_HOLE, "position %d is in a block released by the window", (int)pos);
}

/* ---- K/V rows --------------------------------------------------------- */

static size_t row_index(const struct pager_kv_view *kv, int32_t block, int32_t layer, int kv_sel,
                        int32_t head, int32_t slot)
{
    FOLIO_CHECK(block >= 0 && block < kv->num_blocks && layer >= 0 && layer < kv->n_layers &&
                    head >= 0 && head < kv->n_kv_heads && slot >= 0 && slot < kv->block_size,
                "K/V row (block %d, layer %d, head %d, slot %d) outside the view", (int)block,
                (int)layer, (int)head, (int)slot);
    return (size_t)block * kv->block_stride + (size_t)layer * kv->layer_stride +
           (size_t)(kv_sel ? 1 : 0) * kv->v_offset + (size_t)head * kv->head_stride;
}

void pager_kv_row_put(const struct pager_kv_view *kv, int32_t block, int32_t layer, int kv_sel,
                      int32_t head, int32_t slot, const float *x)
{
    const size_t tile = row_index(kv, block, layer, kv_sel, head, slot);
    const size_t e = tile + (size_t)slot * kv->head_dim;
    const int32_t hd = kv->head_dim;
    switch (kv->dtype) {
    case FOLIO_F32:
        memcpy((float *)kv->base + e, x, sizeof(float) * (size_t)hd);
        break;
    case FOLIO_F16:
        folio_f32_to_f16_row(x, (uint16_t *)kv->base + e, (size_t)hd);
        break;
    case FOLIO_BF16:
        for (int32_t d = 0; d < hd; d++)
            ((uint16_t *)kv->base)[e + d] = folio_f32_to_bf16(x[d]);
        break;
    case FOLIO_Q8: {
        float amax = 0;
        for (int32_t d = 0; d < hd; d++) {
            float a = fabsf(x[d]);
            if (!(a <= amax) && amax == amax) /* a NaN sticks: the scale is NaN */
                amax = a;
        }
        const float scale = amax / 127.0f;
        const float inv = amax > 0 && isfinite(amax) ? 127.0f / amax : 0.0f;
        int8_t *q = (int8_t *)kv->base + e;
        for (int32_t d = 0; d < hd; d++) {
            float r = rintf(x[d] * inv);
            q[d] = (int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : r == r ? r : 0);
        }
        memcpy((char *)kv->base + tile + (size_t)kv->block_size * hd +
                   (size_t)slot * PAGER_Q8_SCALE_BYTES,
               &scale, sizeof scale);
        break;
    }
    }
}

void pager_kv_row_get(const struct pager_kv_view *kv, int32_t block, int32_t layer, int kv_sel,
                      int32_t head, int32_t slot, float *x)
{
    const size_t tile = row_index(kv, block, layer, kv_sel, head, slot);
    const size_t e = tile + (size_t)slot * kv->head_dim;
    const int32_t hd = kv->head_dim;
    switch (kv->dtype) {
    case FOLIO_F32:
        memcpy(x, (const float *)kv->base + e, sizeof(float) * (size_t)hd);
        break;
    case FOLIO_F16:
        for (int32_t d = 0; d < hd; d++)
            x[d] = folio_f16_to_f32(((const uint16_t *)kv->base)[e + d]);
        break;
    case FOLIO_BF16:
        for (int32_t d = 0; d < hd; d++)
            x[d] = folio_bf16_to_f32(((const uint16_t *)kv->base)[e + d]);
        break;
    case FOLIO_Q8: {
        float scale;
        memcpy(&scale,
               (const char *)kv->base + tile + (size_t)kv->block_size * hd +
                   (size_t)slot * PAGER_Q8_SCALE_BYTES,
               sizeof scale);
        const int8_t *q = (const int8_t *)kv->base + e;
        for (int32_t d = 0; d < hd; d++)
            x[d] = (float)q[d] * scale;
        break;
    }
    }
}
