/*
 * folio/pager.h — the KV block pool and per-sequence page tables.
 *
 * The pager owns one arena of `num_blocks` KV blocks.  A block holds the
 * keys and values of `block_size` consecutive token positions of one
 * sequence, for every layer and every KV head.  A sequence's page table
 * (struct pager_seq, "a folio") maps token position p to the slot
 * (block_table[p / block_size], p % block_size).
 *
 * Arena layout (elements of `dtype`; all strides in elements, see
 * struct pager_kv_view): layer-major, K and V apart; per (layer, K|V) a
 * run of every block's n_kv_heads tiles:
 *
 *   arena ─┬─ layer 0 ─┬─ K ─┬─ block 0 ─┬─ kv head 0: [block_size][head_dim]
 *          │           │     │           └─ kv head 1 ...
 *          │           │     ├─ block 1 ...
 *          │           │     └─ block num_blocks - 1
 *          │           └─ V ── (same shape as K)
 *          └─ layer 1 ...
 *
 *   elem(block, layer, kv, head, slot, d) =
 *       layer * layer_stride + kv * v_offset + block * block_stride
 *     + head * head_stride + slot * head_dim + d        (kv: 0 = K, 1 = V)
 *
 *   head_stride = one tile, block_stride = n_kv_heads tiles,
 *   v_offset = num_blocks * block_stride, layer_stride = 2 * v_offset
 *
 * One (block, layer, K|V, head) tile is contiguous [block_size][head_dim];
 * one block's K of a layer (every head) is one run, and so is its V; and a
 * run of consecutive block ids is one run of K and one of V per layer.  A
 * sequence whose table is such a run (what the allocation policy below
 * aims for) is read by decode attention as two long streams per layer, and
 * a table that jumps at every block still reads whole blocks' K and V as
 * runs.  (The layouts measured against it, bench_attention --block-major,
 * --layer-major and --head-major: block-major, one block's tiles side by
 * side, put a layer's consecutive blocks a whole block, every layer's K
 * and V, apart, so a decode jumped at every block; head-major, a run of
 * blocks per (layer, K|V, head), reads runs as well but splits every jump
 * into 2 x n_kv_heads short tiles, 0.58-0.76x of a dense cache on
 * fragmented tables; BENCHMARKS.md has the figures.)  Copying
 * a block (copy-on-write, a cache entry moving) is 2 * n_layers copies.
 * The arena is allocated once at pager_init, 2 MiB aligned (huge pages
 * where the kernel offers them) and resident from then on
 * (folio_region_alloc).
 *
 * Element types (dtype): f32; f16 (IEEE binary16); bf16 (upper half of a
 * binary32); q8.  A q8 tile is the int8 values followed by one f32 scale per
 * slot (strides count bytes, the q8 "element"):
 *
 *   q8 tile (block, layer, K|V, head):  [block_size][head_dim] int8
 *                                       [block_size] f32 scale
 *   tile = block_size * (head_dim + 4) bytes         value = int8 * scale
 *
 * Why a scale per (token, KV head) row rather than per group of 32 values
 * (llama.cpp's q8_0): a row is written once, by one token, so quantizing on
 * write needs nothing but that row (a partial block is never requantized);
 * and a score q.k = scale_k * sum q_e * k_e, a value sum p_k * scale_k *
 * v_k, so the kernel applies each scale once per key — the inner loops are
 * int8 -> f32 conversion and FMA only, no per-group multiply.  Symmetric
 * absmax scaling (scale = max|x| / 127) keeps the row's largest value exact
 * and costs 4 bytes per row: 68 bytes per 64-value row (3.8x fewer than
 * f32), 132 per 128.  The scales sit after the values so the values keep
 * the float types' addressing (slot * head_dim + d) and stay 64-byte
 * aligned for head_dim a multiple of 4 and block_size a multiple of 16.  A
 * row holding a NaN gets a NaN scale (it reads as NaN, like f32 would).
 *
 * Which block a table gets (cfg->alloc): by default (PAGER_ALLOC_LOCAL)
 * the id after its previous block, else the middle of the longest run of
 * ids not in use, so a growing table's blocks are consecutive ids,
 * adjacent in the arena (what the attention kernel reads as few long runs
 * instead of many short jumps), and a new run leaves room both to the
 * table that ends before it and to itself.  When that id holds a cached
 * prefix entry, the block that would have been taken without the policy
 * (a free one, else the LRU head, evicted) receives a copy of that entry
 * and the table gets the id: the prefix cache keeps the same entries in
 * the same LRU order and evicts exactly what it would have, only the ids
 * holding entries differ.  Nothing is held back: what fits is the same as
 * with PAGER_ALLOC_LIFO (the block freed last; for A/B).
 *
 * Block states: FREE (on the free list, refcount 0, not in the prefix
 * cache), USED (refcount >= 1, mapped by that many page tables), CACHED
 * (refcount 0 but full, computed and in the prefix-cache hash; kept on an
 * LRU list and reused by a prefix hit, or evicted when a fresh block is
 * needed and the free list is empty).  A USED block may also be in the hash.
 *
 * Prefix caching: a full block whose tokens are all computed gets the hash
 * h = H(h_parent, tokens of the block, salt), where h_parent is the previous
 * block's hash (a per-sequence salt, e.g. per tenant, seeds the chain).  A
 * new, empty sequence may adopt the longest run of cached full blocks that
 * matches its prompt.  Matches compare token ids, never only hashes.
 *
 * Copy-on-write: pager_seq_fork() shares every block of the parent.  Any
 * write into a block whose refcount is > 1 (only ever the last, partial
 * block) first copies it into a fresh block.  A shared block is never
 * written in place.
 *
 * Sliding window (cfg->window = w > 0, on every layer): a row at position
 * p reads keys (p - w, p] only, and rows are computed in order, so once
 * tokens [0, c) are computed no later row reads a position below
 * c - w + 1.  pager_seq_mark_computed then releases the table's whole
 * blocks below that position (never its last block) and leaves PAGER_HOLE
 * in their entries: a long generation holds about w / B + 2 blocks, not
 * len / B.  Holes are a prefix [0, lo) of the table; nothing may read them
 * (the attention kernel starts each row at its window).  A released block
 * goes back like any other: a shared one stays with its other holders, a
 * cached one to the LRU.  A table with holes no longer holds every parent
 * of its cached blocks, so a cached block may be evicted while a child is
 * still in the hash: eviction then takes its hashed descendants out of the
 * hash too (the prefix cache stays exact).
 *
 * Errors: 0 or -errno.  Running out of blocks is -ENOSPC and leaves
 * everything exactly as it was.  -ENOMEM likewise (internal allocation).
 *
 * Threading: not thread-safe.  One thread (the daemon's loop thread) owns
 * the pager; a running model step only reads the page tables and writes
 * K/V into slots reserved for it before the step started.  The read-only
 * calls pager_stats_get, pager_block_info_get and pager_check use private
 * scratch memory: call them from the owning thread too.
 */
#ifndef FOLIO_PAGER_H
#define FOLIO_PAGER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "folio/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pager pager_t;
typedef struct pager_seq pager_seq_t;

/* Which free block an allocation takes (see above). */
enum pager_alloc {
    PAGER_ALLOC_LOCAL = 0, /* the next id of the table's previous block, else mid longest run */
    PAGER_ALLOC_LIFO,      /* the block freed last (the policy before locality; for A/B) */
};

struct pager_config {
    int32_t num_blocks; /* blocks in the pool, >= 1 */
    int32_t block_size; /* token slots per block, 1..1024 */
    int32_t n_layers;   /* model geometry: sizes the arena; all >= 1 */
    int32_t n_kv_heads;
    int32_t head_dim;
    enum folio_dtype dtype; /* K/V element type */
    bool no_arena;          /* bookkeeping only, no K/V memory (simulator, tests) */
    /* Every page of the arena committed at pager_init (a step never takes
     * a page fault on K/V); else a page is committed when first written. */
    bool prefault;
    /* Sliding window every layer attends through (0: none, or some layer
     * sees the whole context): the row at position p reads only positions
     * (p - window, p].  Then a table releases the blocks that left it. */
    int32_t window;
    enum pager_alloc alloc; /* which free block a table gets; 0 = PAGER_ALLOC_LOCAL */
};

/* A block table entry whose block was released because its positions left
 * the window of every row still to be computed (see pager_seq_mark_computed). */
#define PAGER_HOLE (-1)

/* Read-only description of where K/V live, for the model and the
 * attention kernel.  All strides in elements of folio_dtype_size(dtype)
 * bytes (bytes for q8). */
struct pager_kv_view {
    void *base; /* arena; NULL when no_arena */
    enum folio_dtype dtype;
    int32_t num_blocks, block_size, n_layers, n_kv_heads, head_dim;
    size_t block_stride; /* n_kv_heads * head_stride */
    size_t layer_stride; /* 2 * v_offset */
    size_t v_offset;     /* num_blocks * block_stride */
    size_t head_stride;  /* one tile: pager_kv_tile_elems(dtype, block_size, head_dim) */
};

#define PAGER_Q8_SCALE_BYTES 4 /* one f32 scale per q8 row */

/* Elements of one (block, layer, K|V, head) tile: block_size * head_dim,
 * plus the scales for q8. */
static inline size_t pager_kv_tile_elems(enum folio_dtype dt, int32_t block_size, int32_t head_dim)
{
    size_t n = (size_t)block_size * (size_t)head_dim;
    return dt == FOLIO_Q8 ? n + (size_t)block_size * PAGER_Q8_SCALE_BYTES : n;
}

/* K+V bytes one token takes in every layer and KV head (the unit --kv-mem
 * is divided by): 2 * n_layers * n_kv_heads * row bytes, where a row is
 * head_dim * dtype size (+ 4 for the q8 scale). */
static inline int64_t pager_kv_bytes_per_token(enum folio_dtype dt, int32_t n_layers,
                                               int32_t n_kv_heads, int32_t head_dim)
{
    int64_t row = (int64_t)head_dim * (int64_t)folio_dtype_size(dt) +
                  (dt == FOLIO_Q8 ? PAGER_Q8_SCALE_BYTES : 0);
    return 2 * (int64_t)n_layers * n_kv_heads * row;
}

/* Writes the head_dim values x into the row (block, layer, kv (0 = K,
 * 1 = V), head, slot) of the view's arena, converted to its dtype (round to
 * nearest even; q8: absmax scale, values rounded to nearest).  The one
 * writer of K/V rows: the forward pass calls it from several threads for
 * distinct rows.  pager_kv_row_get reads a row back as f32 (q8:
 * int8 * scale, in f32). */
void pager_kv_row_put(const struct pager_kv_view *kv, int32_t block, int32_t layer, int kv_sel,
                      int32_t head, int32_t slot, const float *x);
void pager_kv_row_get(const struct pager_kv_view *kv, int32_t block, int32_t layer, int kv_sel,
                      int32_t head, int32_t slot, float *x);

/* Pool statistics (block counts satisfy free + used + cached = total). */
struct pager_stats {
    int64_t blocks_total, blocks_free, blocks_used, blocks_cached;
    int64_t blocks_shared;  /* used blocks with refcount > 1 */
    int64_t tokens_held;    /* sum over page tables of tokens they hold */
    int64_t slots_empty;    /* allocated slots past each table's length,
                               counted once per physical block */
    int64_t seqs;           /* live page tables */
    int64_t prefix_queries; /* tokens asked about by prefix lookups */
    int64_t prefix_hits;    /* of those, tokens found cached */
    int64_t evictions;      /* cached blocks reclaimed for new data */
    int64_t cow_copies;     /* copy-on-write block copies */
    int64_t window_frees;   /* table entries released by the sliding window */
    int64_t blocks_held;    /* sum over page tables of the blocks they hold */
    size_t bytes_per_block; /* K+V bytes of one block, all layers */
};

enum pager_block_state { PAGER_BLOCK_FREE, PAGER_BLOCK_USED, PAGER_BLOCK_CACHED };

/* One block, for dashboards (/v1/kv block map). */
struct pager_block_info {
    enum pager_block_state state;
    int32_t refcount;
    int32_t tokens;  /* filled slots */
    uint64_t owner;  /* owner tag of the sequence that last wrote it */
    uint32_t tenant; /* tenant of that sequence */
};

/* ---- pool ------------------------------------------------------------- */

/* Creates a pool; allocates the arena (unless cfg->no_arena) and all block
 * metadata.  -EINVAL for a bad config, -ENOMEM. */
int pager_init(pager_t **out, const struct pager_config *cfg);
/* Frees the pool and every page table still alive. */
void pager_free(pager_t *pg);

void pager_kv_view(const pager_t *pg, struct pager_kv_view *view);
/* The view a pool of cfg would give (its arena's layout), with base NULL,
 * without a pool: for code that lays out K/V of its own the pager's way
 * (benches, tests).  Returns the arena's bytes; 0 (view untouched) when cfg
 * is invalid or its arena would overflow size_t. */
size_t pager_kv_layout(const struct pager_config *cfg, struct pager_kv_view *view);
void pager_stats_get(const pager_t *pg, struct pager_stats *st);
int32_t pager_block_size(const pager_t *pg);
/* The sliding window (cfg->window; 0: none). */
int32_t pager_window(const pager_t *pg);
/* Most blocks one table can hold while a step appends n_new tokens to it:
 * with a window, the blocks of positions [c - window + 1, c + n_new) for
 * any c, i.e. ceil((window - 1 + n_new) / B) + 1; INT32_MAX without. */
int32_t pager_window_blocks(const pager_t *pg, int32_t n_new);
/* Blocks a fresh allocation could take now (free + cached). */
int32_t pager_blocks_available(const pager_t *pg);
/* Bytes of the arena committed (resident) now; 0 without an arena.  Asks
 * the kernel (mincore over the arena): for scrapes, not for every step. */
size_t pager_arena_resident(const pager_t *pg);
/* When every block is free (none held, none cached), gives the arena's
 * pages back to the kernel, as after pager_init without prefault: 0, or
 * -EBUSY with nothing done.  For a pool whose pages were written only for
 * a scratch purpose (the daemon's warm-up steps). */
int pager_release_pages(pager_t *pg);
void pager_block_info_get(const pager_t *pg, int32_t block, struct pager_block_info *info);

/* Walks every structure and verifies the invariants of DESIGN.md; returns 0
 * or -EUCLEAN, and with msg != NULL writes what is wrong. */
int pager_check(const pager_t *pg, char *msg, size_t msglen);
/* Human-readable block map and stats. */
void pager_dump(const pager_t *pg, FILE *out);

/* ---- page tables ------------------------------------------------------ */

/* A new, empty sequence.  `salt` seeds its prefix-hash chain (per tenant:
 * sequences with different salts never share cached blocks); `owner` and
 * `tenant` are tags reported by pager_block_info_get. */
int pager_seq_new(pager_t *pg, uint64_t salt, uint64_t owner, uint32_t tenant, pager_seq_t **out);
/* Releases every block (full, computed blocks stay cached) and the table. */
void pager_seq_free(pager_t *pg, pager_seq_t *seq);

/* For an empty sequence: take the longest run of cached full blocks whose
 * tokens equal tokens[0..], at most floor(n / block_size) blocks, and never
 * all n tokens (at least one token is left to compute, so the caller has a
 * row to sample from).  *n_hit receives the tokens taken (a multiple of
 * block_size); they count as appended and computed.  Counts a prefix query
 * of n tokens.  -EINVAL if seq is not empty. */
int pager_seq_adopt_prefix(pager_t *pg, pager_seq_t *seq, const int32_t *tokens, int32_t n,
                           int32_t *n_hit);
/* The same match without taking anything or counting a query. */
int32_t pager_prefix_match(const pager_t *pg, uint64_t salt, const int32_t *tokens, int32_t n);

/* Blocks that appending n tokens to seq would take from the pool (new
 * blocks plus a copy-on-write of a shared last block). */
int32_t pager_seq_blocks_needed(const pager_t *pg, const pager_seq_t *seq, int32_t n);

/* Appends n token ids: reserves their slots (allocating blocks, copying a
 * shared partial last block first).  Slots of appended tokens are where the
 * next step writes their K/V.  All or nothing: -ENOSPC / -ENOMEM leave seq
 * unchanged. */
int pager_seq_append(pager_t *pg, pager_seq_t *seq, const int32_t *tokens, int32_t n);

/* Declares tokens [0, n_computed) of seq computed (their K/V written).
 * Full blocks inside that range enter the prefix cache.  With a window,
 * the blocks wholly below position n_computed - window + 1 (all but the
 * last) are then released and become PAGER_HOLE entries.  Monotonic
 * (n_computed is clamped to the length).  A newly computed full block
 * whose exact content (salt, whole token prefix) is already cached in
 * another block is replaced in seq's block table by that cached block and
 * released (the K/V are the same), so the block table may change. */
void pager_seq_mark_computed(pager_t *pg, pager_seq_t *seq, int32_t n_computed);

/* Shrinks seq to n tokens (n <= length), releasing blocks past the end.
 * -EINVAL if a released window block would be read again (the row at
 * position n needs positions from n - window + 1). */
int pager_seq_truncate(pager_t *pg, pager_seq_t *seq, int32_t n);

/* A child sharing every block of parent (refcounts + 1); same salt, tags
 * from the arguments. */
int pager_seq_fork(pager_t *pg, const pager_seq_t *parent, uint64_t owner, uint32_t tenant,
                   pager_seq_t **child);

int32_t pager_seq_len(const pager_seq_t *seq);
/* Blocks the table holds: ceil(len / block_size) minus its holes. */
int32_t pager_seq_blocks_held(const pager_seq_t *seq);
int32_t pager_seq_computed(const pager_seq_t *seq);
const int32_t *pager_seq_tokens(const pager_seq_t *seq);
/* The block table: ceil(len / block_size) entries, valid until the next
 * call that modifies seq; with a window, entries [0, lo) are PAGER_HOLE. */
const int32_t *pager_seq_block_table(const pager_seq_t *seq, int32_t *n_blocks);
/* Slot of position pos (< len): block id and offset inside it. */
void pager_seq_slot(const pager_seq_t *seq, int32_t pos, int32_t *block, int32_t *offset);

#ifdef __cplusplus
}
#endif
#endif /* FOLIO_PAGER_H */
