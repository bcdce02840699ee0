/*
 * pager/pager_internal.h — the pager's private structures, shared by
 * pager.c and the white-box tests (tests/test_pager*.c).  Nothing outside
 * pager/ and its tests includes this file.
 *
 * Data layout (num_blocks = N, block_size = B):
 *
 *   pager ─┬─ blk[N]        struct pager_block: list links, hash links,
 *          │                refcount, state, prefix-cache identity
 *          ├─ btok[N][B]    token id written into each slot of each block
 *          ├─ buckets[H]    heads of the prefix-cache hash chains (H = 2^k >= N)
 *          ├─ arena         N * bytes_per_block, a resident region (or NULL)
 *          ├─ free list     intrusive, LIFO through blk[].prev/next
 *          ├─ runs[2P]      run tree over block ids (P = 2^k >= N leaves):
 *          │                longest run of free or cached ids per node
 *          ├─ LRU list      intrusive, oldest first, same links (a block is on
 *          │                at most one of the two lists)
 *          └─ seqs          doubly linked list of live page tables
 *
 * See pager.c for the invariants.
 */
#ifndef FOLIO_PAGER_INTERNAL_H
#define FOLIO_PAGER_INTERNAL_H

#include "folio/pager.h"

#define PAGER_NIL (-1)

struct pager_block {
    int32_t prev, next;   /* free list or LRU links (PAGER_NIL = none) */
    int32_t hprev, hnext; /* prefix-cache hash chain links */
    int32_t refcount;     /* page tables holding the block */
    int32_t nfull;        /* of those, tables that use all B slots */
    int32_t nkids;        /* hashed blocks whose parent this is */
    int32_t kid;          /* NIL, or the one such block when nkids == 1 and it is known */
    int32_t parent;       /* hashed: block holding the previous B tokens, or NIL */
    uint8_t state;        /* enum pager_block_state */
    uint8_t hashed;       /* in the prefix-cache hash (then immutable) */
    uint32_t tenant;      /* tags of the sequence that last wrote the block */
    uint64_t owner;
    uint64_t key;        /* hashed: H(parent_key, tokens, salt) & key_mask */
    uint64_t parent_key; /* hashed: key of the parent (the salt seed at depth 0) */
    uint64_t salt;       /* hashed: salt of the chain */
};

/* A node of the run tree: ids free or cached (not used) run from its
 * first id (pre), to its last id (suf), and the longest run inside it
 * (best). */
struct pager_run {
    int32_t pre, suf, best;
};

struct pager_seq {
    pager_seq_t *prev, *next; /* live list */
    uint64_t salt, owner;
    uint32_t tenant;
    int32_t len;      /* tokens held */
    int32_t computed; /* tokens [0, computed) have their K/V written */
    int32_t nb;       /* blocks in table = ceil(len / B) */
    int32_t nh;       /* table[lo, nh) are in the prefix cache (a chain) */
    int32_t lo;       /* table[0, lo) are PAGER_HOLE (left the window) */
    int32_t bs;       /* B, copied from the pager */
    int32_t cap;      /* capacity of table, in blocks; tokens holds cap * B */
    int32_t *table;   /* [cap] block ids */
    int32_t *tokens;  /* [cap * B] token ids */
};

struct pager {
    struct pager_config cfg;
    int32_t nblocks, bs;
    struct pager_block *blk;
    int32_t *btok;
    int32_t *buckets;
    uint32_t bucket_mask;
    uint64_t key_mask; /* all ones; tests narrow it to force collisions */
    int32_t free_head;
    struct pager_run *runs; /* [2 * run_leaves]; node i has children 2i, 2i + 1 */
    uint32_t run_leaves;    /* P: leaf of block b is runs[P + b] */
    int32_t lru_head, lru_tail;
    int32_t nfree, nused, ncached, nshared, nhashed;
    int64_t tokens_held, nseqs;
    int64_t prefix_queries, prefix_hits, evictions, cow_copies, window_frees;
    pager_seq_t *seqs;
    unsigned char *arena; /* a region (folio_region_alloc) of arena_bytes */
    size_t arena_bytes, block_bytes;
    /* Scratch for pager_check / pager_stats_get (both take a const pager;
     * they write only here). */
    int32_t *scratch;    /* [2N] */
    uint32_t *stamp;     /* [N] */
    uint32_t *stamp_now; /* one counter */
};

/* Test hook: narrows every prefix-cache key to `mask` so that unrelated
 * blocks collide; lookups must still return only exact matches.  Only
 * while the hash is empty: -EBUSY otherwise. */
int pager__test_set_key_mask(pager_t *pg, uint64_t mask);

/* The prefix-cache key of one block (exposed for the tests). */
uint64_t pager__block_key(uint64_t parent_key, const int32_t *tokens, int32_t n, uint64_t salt);
uint64_t pager__salt_seed(uint64_t salt);

#endif /* FOLIO_PAGER_INTERNAL_H */
