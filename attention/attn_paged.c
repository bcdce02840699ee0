/*
 * attention/attn_paged.c — the fast paged attention kernel: entry checks,
 * the work plan, the phase-1 merge and the choice of inner kernel.
 *
 * Work items.  One item is (slice s, KV heads [kh, kh + n_kvh)): the
 * slice's n_q rows, each with the n_kvh * group query heads of those KV
 * heads, so a K/V tile is read once per group.  n_kvh is 1 for prefills;
 * for decodes it is all KV heads when their query heads fit one tile, so
 * a chunk's row table (and q8 row scales' runs) serve every head.
 * An item's cost is estimated as n_kvh * group * sum_i (p0 + i + 1 + C0)
 * (keys visited plus a per-row overhead).  With T the batch's total and
 * nth threads, an item costing more than max(T / (4 nth), a floor) is cut
 * into n_split pieces:
 *
 *   rows split     (n_q >= 2 n_split, prefills): row ranges of about equal
 *                  cost; each piece writes its rows of out directly;
 *   context split  (decodes, short chunks on long prefixes): key ranges
 *                  [c0, c1) rounded to block boundaries; each piece writes
 *                  partials (m, sum, acc[hd]) per (row, head) into the
 *                  workspace, merged in phase 1 (m: the reference its sum
 *                  and acc are taken against, within a few units of the
 *                  piece's largest score, attn_kern_body.h's
 *                  softmax_heads).
 *
 * Pieces are listed in a fixed order (slice, head, piece) and the list is
 * cut into nth contiguous runs of about equal cost: piece p belongs to
 * thread floor((cost before p + cost(p) / 2) * nth / T).  Every thread
 * recomputes the same plan (it depends only on the batch and nth), so there
 * is nothing to share before phase 0 and the result is deterministic for a
 * given nth.  Phase 1 splits the (row, head) records of context-split items
 * evenly over the threads and merges them:
 *
 *   M = max_k m_k,  l = sum_k l_k e^(m_k - M),  out = sum_k acc_k e^(m_k - M) / l
 *
 * Workspace (caller's, 64-byte aligned, attn_paged_work_size bytes):
 *
 *   [ scratch thread 0 | ... | scratch thread nth-1 | partials of split items ]
 *
 * Batch invariance (b->batch_invariant): the cut points of a context split
 * follow the batch's total cost, so a row's sums would be grouped
 * differently in another batch; in this mode no item is split and items
 * take one KV head each (threads then share a batch by slices and heads),
 * and every piece takes the per-row path: the tile path (prefill pieces,
 * attn_kern_tile.h) sums a score's products in another order, and whether
 * a row's piece is a prefill's depends on where the scheduler cut its
 * chunk.  Within either path, rows split and tile composition never change
 * a row's arithmetic: every row walks the same grid of key chunks
 * (block-aligned, KC keys) in order.
 *
 * Sliding window (b->window > 0): a tile starts at the block holding its
 * first row's window start (whole blocks keep the chunk grid), and keys
 * before each row's window are masked to -inf like future keys; a chunk
 * with nothing visible leaves the row's running sums untouched.
 *
 * Checks: shapes, strides, rows and block ids are verified at entry of
 * every call, always (not assert): a violation aborts with a message, since
 * reading through a bad page table would read or write out of bounds.
 *
 * Threading: attn_paged is reentrant; threads of one batch touch disjoint
 * parts of out and the workspace.  attn_force_isa and attn_ab_select are
 * test/benchmark knobs and must not race a running kernel.
 */
#include "folio/attention.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_internal.h"
#include "folio/common.h"

#define ROW_OVERHEAD  16  /* C0 above, in keys */
#define MIN_SPLIT_CTX 256 /* keys: no context piece shorter than this */

/* ---- instruction set -------------------------------------------------- */

enum isa { ISA_UNSET = -1, ISA_PORTABLE = 0, ISA_AVX2 = 1, ISA_AVX512 = 2 };
static const char *const isa_names[] = {"portable", "avx2", "avx512"};
static int isa_current = ISA_UNSET;

static int isa_supported(int isa)
{
    switch (isa) {
    case ISA_PORTABLE:
        return 1;
#if defined(__x86_64__) && defined(FOLIO_ATTN_X86)
    case ISA_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && folio_cpu_f16c();
    case ISA_AVX512:
#ifdef FOLIO_ATTN_NO_AVX512
        return 0; /* left out of this build (meson's host_isa_only) */
#endif
        __builtin_cpu_init();
        /* AVX2 too: a head_dim that is not a multiple of 16 runs the AVX2 path */
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx2") &&
               __builtin_cpu_supports("fma") && folio_cpu_f16c();
#endif
    default:
        return 0;
    }
}

static int isa_best(void)
{
    for (int i = ISA_AVX512; i > ISA_PORTABLE; i--)
        if (isa_supported(i))
            return i;
    return ISA_PORTABLE;
}

static int isa_parse(const char *name)
{
    for (int i = 0; i < (int)FOLIO_ARRAY_LEN(isa_names); i++)
        if (strcmp(name, isa_names[i]) == 0)
            return i;
    return ISA_UNSET;
}

static int isa_get(void)
{
    int isa = __atomic_load_n(&isa_current, __ATOMIC_ACQUIRE);
    if (isa != ISA_UNSET)
        return isa;
    isa = isa_best();
    const char *env = getenv("FOLIO_ATTN_ISA");
    if (env && *env && strcmp(env, "auto") != 0) {
        int want = isa_parse(env);
        if (want != ISA_UNSET && isa_supported(want))
            isa = want;
    }
    __atomic_store_n(&isa_current, isa, __ATOMIC_RELEASE);
    return isa;
}

int attn_force_isa(const char *name)
{
    int isa;
    if (!name || strcmp(name, "auto") == 0) {
        isa = isa_best();
    } else {
        isa = isa_parse(name);
        if (isa == ISA_UNSET)
            return -EINVAL;
        if (!isa_supported(isa))
            return -ENOTSUP;
    }
    __atomic_store_n(&isa_current, isa, __ATOMIC_RELEASE);
    return 0;
}

const char *attn_isa_name(void)
{
    return isa_names[isa_get()];
}

typedef void (*kern_fn)(const struct attn__piece *);

#ifdef FOLIO_ATTN_AB
static int ab_b; /* attn_ab_select: run kernel B */
#endif

int attn_ab_select(int b)
{
#ifdef FOLIO_ATTN_AB
    ab_b = b != 0;
    return 0;
#else
    (void)b;
    return -ENOTSUP;
#endif
}

static kern_fn kern_for(int32_t hd)
{
    int isa = isa_get();
#if defined(__x86_64__) && defined(FOLIO_ATTN_X86)
#ifndef FOLIO_ATTN_NO_AVX512
    if (isa == ISA_AVX512 && hd % 16 == 0) {
#ifdef FOLIO_ATTN_AB
        if (ab_b)
            return attn__kern_avx512b;
#endif
        return attn__kern_avx512;
    }
#endif
    if (isa >= ISA_AVX2 && hd % 8 == 0)
        return attn__kern_avx2;
#else
    (void)isa;
#endif
    if (hd % 4 == 0)
        return attn__kern_portable4;
    return attn__kern_portable;
}

/* ---- checks ----------------------------------------------------------- */

/* The four tile strides (block, layer, K|V, KV head) in any order: taken
 * from the smallest up, each must step over the whole extent of the ones
 * below it (the first over one tile), so no two tiles overlap.  This admits
 * the pager's arena (layer-major, K and V apart) and block-major,
 * layer-major and head-major ones alike (bench_attention compares them). */
static int tiles_disjoint(const struct pager_kv_view *kv)
{
    struct {
        size_t stride, count;
    } d[4] = {{kv->block_stride, (size_t)kv->num_blocks},
              {kv->layer_stride, (size_t)kv->n_layers},
              {kv->v_offset, 2},
              {kv->head_stride, (size_t)kv->n_kv_heads}};
    for (int i = 1; i < 4; i++) /* insertion sort by stride */
        for (int j = i; j > 0 && d[j].stride < d[j - 1].stride; j--) {
            const __typeof__(d[0]) t = d[j];
            d[j] = d[j - 1];
            d[j - 1] = t;
        }
    size_t extent = pager_kv_tile_elems(kv->dtype, kv->block_size, kv->head_dim);
    for (int i = 0; i < 4; i++) {
        if (d[i].count == 1)
            continue; /* never stepped */
        if (d[i].stride < extent)
            return 0;
        if (d[i].stride > SIZE_MAX / d[i].count)
            return 0;
        extent = d[i].stride * d[i].count;
    }
    return 1;
}

static void check_batch(const struct attn_batch *b)
{
    FOLIO_CHECK(b && b->kv, "no batch or view");
    const struct pager_kv_view *kv = b->kv;
    FOLIO_CHECK(kv->base != NULL, "view has no arena");
    FOLIO_CHECK(kv->dtype == FOLIO_F32 || kv->dtype == FOLIO_F16 || kv->dtype == FOLIO_BF16 ||
                    kv->dtype == FOLIO_Q8,
                "dtype %d", (int)kv->dtype);
    FOLIO_CHECK(kv->head_dim >= 1 && kv->head_dim <= ATTN__HD_MAX, "head_dim %d",
                (int)kv->head_dim);
    FOLIO_CHECK(kv->n_kv_heads >= 1 && kv->block_size >= 1 && kv->num_blocks >= 1,
                "n_kv_heads %d block_size %d num_blocks %d", (int)kv->n_kv_heads,
                (int)kv->block_size, (int)kv->num_blocks);
    FOLIO_CHECK(b->layer >= 0 && b->layer < kv->n_layers, "layer %d of %d", (int)b->layer,
                (int)kv->n_layers);
    FOLIO_CHECK(tiles_disjoint(kv),
                "tiles overlap: block_stride %zu layer_stride %zu v_offset %zu "
                "head_stride %zu (%s, block_size %d, head_dim %d)",
                kv->block_stride, kv->layer_stride, kv->v_offset, kv->head_stride,
                folio_dtype_name(kv->dtype), (int)kv->block_size, (int)kv->head_dim);
    FOLIO_CHECK(b->n_heads >= 1 && b->n_heads % kv->n_kv_heads == 0,
                "n_heads %d not a multiple of n_kv_heads %d", (int)b->n_heads, (int)kv->n_kv_heads);
    FOLIO_CHECK(b->n_seqs >= 0 && (b->n_seqs == 0 || b->seqs), "n_seqs %d", (int)b->n_seqs);
    FOLIO_CHECK(b->n_rows >= 0 && (b->n_rows == 0 || (b->q && b->out)), "n_rows %d",
                (int)b->n_rows);
    FOLIO_CHECK(isfinite(b->scale), "scale not finite");
    for (int32_t s = 0; s < b->n_seqs; s++) {
        const struct attn_seq *sq = &b->seqs[s];
        FOLIO_CHECK(sq->n_q >= 1 && sq->p0 >= 0 && sq->q_row >= 0 &&
                        (int64_t)sq->q_row + sq->n_q <= b->n_rows && sq->p0 <= INT32_MAX - sq->n_q,
                    "slice %d: q_row %d n_q %d p0 %d of %d rows", (int)s, (int)sq->q_row,
                    (int)sq->n_q, (int)sq->p0, (int)b->n_rows);
        FOLIO_CHECK(sq->block_table != NULL, "slice %d has no block table", (int)s);
        int32_t nb = FOLIO_DIV_CEIL(sq->p0 + sq->n_q, kv->block_size);
        /* with a window, blocks wholly before the first row's window are
         * never read (the pager may have released them: PAGER_HOLE) */
        int32_t lo = b->window > 0 ? FOLIO_MAX(0, sq->p0 - b->window + 1) / kv->block_size : 0;
        for (int32_t i = lo; i < nb; i++)
            FOLIO_CHECK(sq->block_table[i] >= 0 && sq->block_table[i] < kv->num_blocks,
                        "slice %d block %d id %d of %d", (int)s, (int)i, (int)sq->block_table[i],
                        (int)kv->num_blocks);
    }
}

/* ---- plan ------------------------------------------------------------- */

struct plan {
    const struct attn_batch *b;
    int nth;
    int32_t group, hd;
    double total;    /* estimated cost of the batch */
    double maxpiece; /* cost above which an item is split */
    size_t scratch;  /* floats per thread */
};

struct piece {
    int32_t s, kh, n_kvh; /* slice, first KV head, KV heads */
    int32_t r0, r1, c0, c1;
    int32_t split, n_split; /* context split index, count (1: rows go to out) */
    size_t part_off;        /* floats: the item's partials (n_split > 1) */
    int owner;
};

static double row_cost(const struct plan *pl, int32_t p0, int32_t i)
{
    return (double)pl->group * ((double)p0 + i + 1 + ROW_OVERHEAD);
}

/* KV heads one item takes: all of them at once while the query vectors
 * of a row tile still fit (decodes), so a chunk's row table serves every
 * head; else one. */
static int32_t item_kvh(const struct plan *pl, const struct attn_seq *sq)
{
    const int32_t n_kv = pl->b->kv->n_kv_heads;
    if (pl->b->batch_invariant)
        return 1;
    for (int32_t h = n_kv; h > 1; h--)
        if (n_kv % h == 0 && (int64_t)sq->n_q * h * pl->group <= ATTN__MQ)
            return h;
    return 1;
}

/* Estimated cost of one KV head of a slice. */
static double item_cost(const struct plan *pl, const struct attn_seq *sq)
{
    double n = sq->n_q;
    return pl->group * (n * (sq->p0 + ROW_OVERHEAD) + n * (n + 1) / 2);
}

static void plan_init(struct plan *pl, const struct attn_batch *b, int nth)
{
    pl->b = b;
    pl->nth = nth;
    pl->hd = b->kv->head_dim;
    pl->group = b->n_heads / b->kv->n_kv_heads;
    pl->total = 0;
    for (int32_t s = 0; s < b->n_seqs; s++)
        pl->total += item_cost(pl, &b->seqs[s]) * b->kv->n_kv_heads;
    pl->maxpiece = INFINITY;
    if (nth > 1 && !b->batch_invariant)
        pl->maxpiece = FOLIO_MAX(pl->total / (4.0 * nth), (double)pl->group * MIN_SPLIT_CTX);
    pl->scratch = ATTN__ALIGN_F(attn__scratch_floats(pl->group, b->kv->n_kv_heads, pl->hd));
}

/* How an item is cut: n_split pieces, by rows or by context. */
static int32_t item_splits(const struct plan *pl, const struct attn_seq *sq, int *by_rows)
{
    double c = item_cost(pl, sq) * item_kvh(pl, sq);
    *by_rows = 0;
    if (!(c > pl->maxpiece))
        return 1;
    double want = ceil(c / pl->maxpiece);
    if (sq->n_q >= 2 * want) {
        *by_rows = 1;
        return (int32_t)want;
    }
    int32_t ctx = sq->p0 + sq->n_q;
    int32_t minctx = FOLIO_MAX(MIN_SPLIT_CTX, 2 * pl->b->kv->block_size);
    int32_t most = ctx / minctx;
    return FOLIO_MAX(1, FOLIO_MIN((int32_t)want, most));
}

typedef void (*piece_fn)(const struct plan *pl, const struct piece *pc, void *ctx);

/* Calls fn for every piece, in plan order; returns the partial floats. */
static size_t plan_walk(const struct plan *pl, piece_fn fn, void *ctx)
{
    const struct attn_batch *b = pl->b;
    const int32_t bs = b->kv->block_size;
    const size_t rec = ATTN__PSTRIDE(pl->hd);
    double before = 0;
    size_t part = 0;
    for (int32_t s = 0; s < b->n_seqs; s++) {
        const struct attn_seq *sq = &b->seqs[s];
        int by_rows;
        const int32_t ns = item_splits(pl, sq, &by_rows);
        const int32_t nkvh = item_kvh(pl, sq);
        const double ic = item_cost(pl, sq) * nkvh;
        const int32_t ctx_len = sq->p0 + sq->n_q;
        for (int32_t kh = 0; kh < b->kv->n_kv_heads; kh += nkvh) {
            struct piece pc = {.s = s,
                               .kh = kh,
                               .n_kvh = nkvh,
                               .r0 = 0,
                               .r1 = sq->n_q,
                               .c0 = 0,
                               .c1 = ctx_len,
                               .split = 0,
                               .n_split = 1,
                               .part_off = 0};
            if (ns > 1 && !by_rows) {
                pc.n_split = ns;
                pc.part_off = part;
                part += (size_t)ns * sq->n_q * nkvh * pl->group * rec;
            }
            double cum = 0; /* rows split: cost of rows before r0 */
            for (int32_t k = 0; k < ns; k++) {
                double cost;
                if (ns == 1) {
                    cost = ic;
                } else if (by_rows) {
                    pc.r0 = k == 0 ? 0 : pc.r1;
                    double target = ic * (k + 1) / ns;
                    int32_t r = pc.r0;
                    double c0 = cum;
                    while (r < sq->n_q &&
                           (k == ns - 1 || cum + nkvh * row_cost(pl, sq->p0, r) <= target ||
                            r == pc.r0))
                        cum += nkvh * row_cost(pl, sq->p0, r++);
                    pc.r1 = r;
                    cost = cum - c0;
                } else {
                    pc.split = k;
                    pc.c0 = k == 0 ? 0 : pc.c1;
                    if (k == ns - 1) {
                        pc.c1 = ctx_len;
                    } else {
                        int64_t e = (int64_t)ctx_len * (k + 1) / ns;
                        e = (e + bs / 2) / bs * bs;
                        pc.c1 = (int32_t)FOLIO_MIN((int64_t)ctx_len, FOLIO_MAX(e, pc.c0));
                    }
                    cost = ic / ns;
                }
                int owner = (int)((before + cost / 2) * pl->nth / pl->total);
                pc.owner = FOLIO_MAX(0, FOLIO_MIN(owner, pl->nth - 1));
                before += cost;
                if (pc.r0 < pc.r1)
                    fn(pl, &pc, ctx);
            }
        }
    }
    return part;
}

static void piece_none(const struct plan *pl, const struct piece *pc, void *ctx)
{
    (void)pl;
    (void)pc;
    (void)ctx;
}

size_t attn_paged_work_size(const struct attn_batch *b, int nth)
{
    check_batch(b);
    FOLIO_CHECK(nth >= 1, "nth %d", nth);
    struct plan pl;
    plan_init(&pl, b, nth);
    size_t part = plan_walk(&pl, piece_none, NULL);
    return sizeof(float) * ((size_t)nth * pl.scratch + part) + 64;
}

/* Why the bound holds: an item is split only when its cost exceeds
 * T / (4 nth), so at most 4 nth items are split (their costs sum to at
 * most T), each into at most 4 nth pieces (want = ceil(c / maxpiece) and
 * c <= T); a context split needs n_q < 2 want <= 8 nth rows; the items of a
 * slice cover its n_heads query heads once.  So the partials take at most
 * 4 nth * min(max_rows, 4 nth * (8 nth - 1)) * n_heads * PSTRIDE floats. */
size_t attn_paged_work_bound(const struct pager_kv_view *kv, int32_t n_heads, int32_t max_rows,
                             int nth)
{
    FOLIO_CHECK(kv && kv->n_kv_heads >= 1 && kv->head_dim >= 1 && kv->head_dim <= ATTN__HD_MAX,
                "bad view");
    FOLIO_CHECK(n_heads >= 1 && n_heads % kv->n_kv_heads == 0 && max_rows >= 0 && nth >= 1,
                "n_heads %d max_rows %d nth %d", (int)n_heads, (int)max_rows, nth);
    const int32_t group = n_heads / kv->n_kv_heads;
    const size_t scratch = ATTN__ALIGN_F(attn__scratch_floats(group, kv->n_kv_heads, kv->head_dim));
    const size_t split_rows = FOLIO_MIN((size_t)max_rows, (size_t)4 * nth * (size_t)(8 * nth - 1));
    const size_t part =
        (size_t)4 * nth * split_rows * (size_t)n_heads * ATTN__PSTRIDE(kv->head_dim);
    return sizeof(float) * ((size_t)nth * scratch + part) + 64;
}

/* ---- phases ----------------------------------------------------------- */

struct run_ctx {
    int ith;
    kern_fn kern;
    float *scratch;
    float *parts;
    /* the thread's piece waiting for its successor (so that it can
     * prefetch into it), if has_pend */
    struct attn__piece pend;
    bool has_pend;
};

/* Runs the pending piece, which prefetches on into next (NULL: none). */
static void run_pending(struct run_ctx *rc, const struct attn__piece *next)
{
    if (!rc->has_pend)
        return;
    rc->pend.next = next;
    rc->kern(&rc->pend);
    rc->has_pend = false;
}

static void piece_run(const struct plan *pl, const struct piece *p, void *vctx)
{
    struct run_ctx *rc = vctx;
    if (p->owner != rc->ith)
        return;
    const struct attn_batch *b = pl->b;
    const struct pager_kv_view *kv = b->kv;
    const struct attn_seq *sq = &b->seqs[p->s];
    const size_t esz = folio_dtype_size(kv->dtype);
    const size_t row_stride = (size_t)b->n_heads * pl->hd;
    const size_t head0 = (size_t)p->kh * pl->group * pl->hd;
    struct attn__piece pc = {
        .q = b->q + (size_t)(sq->q_row + p->r0) * row_stride + head0,
        .q_stride = row_stride,
        .n_rows = p->r1 - p->r0,
        .group = pl->group,
        .hd = pl->hd,
        .n_kvh = p->n_kvh,
        .pos0 = sq->p0 + p->r0,
        .c0 = p->c0,
        .c1 = p->c1,
        .window = b->window,
        .scale = b->scale,
        .block_table = sq->block_table,
        .block_size = kv->block_size,
        .kbase = (const char *)kv->base +
                 ((size_t)b->layer * kv->layer_stride + (size_t)p->kh * kv->head_stride) * esz,
        .block_bytes = kv->block_stride * esz,
        .v_bytes = kv->v_offset * esz,
        .head_bytes = kv->head_stride * esz,
        .row_bytes = (size_t)pl->hd * esz,
        .scale_off = (size_t)kv->block_size * pl->hd * esz,
        .dtype = kv->dtype,
        .out = NULL,
        .out_stride = row_stride,
        .part = NULL,
        .scratch = rc->scratch,
        .tile_ok = !b->batch_invariant,
        .next = NULL,
    };
    if (p->n_split > 1)
        pc.part = rc->parts + p->part_off +
                  (size_t)p->split * sq->n_q * p->n_kvh * pl->group * ATTN__PSTRIDE(pl->hd);
    else
        pc.out = b->out + (size_t)(sq->q_row + p->r0) * row_stride + head0;
    run_pending(rc, &pc);
    rc->pend = pc;
    rc->has_pend = true;
}

struct merge_ctx {
    size_t u_lo, u_hi; /* this thread's (row, head) records */
    size_t u;          /* records of the items walked so far */
    float *parts;
};

static void piece_merge(const struct plan *pl, const struct piece *p, void *vctx)
{
    struct merge_ctx *mc = vctx;
    if (p->n_split <= 1 || p->split != 0)
        return;
    const struct attn_batch *b = pl->b;
    const struct attn_seq *sq = &b->seqs[p->s];
    const int32_t hd = pl->hd, group = pl->group;
    const int32_t hv = p->n_kvh * group;
    const size_t nrec = (size_t)sq->n_q * hv;
    const size_t rec = ATTN__PSTRIDE(hd);
    const size_t lo = FOLIO_MAX(mc->u_lo, mc->u), hi = FOLIO_MIN(mc->u_hi, mc->u + nrec);
    const size_t row_stride = (size_t)b->n_heads * hd;
    for (size_t u = lo; u < hi; u++) {
        size_t j = u - mc->u; /* record index: row * hv + h */
        size_t row = j / hv, h = j % hv;
        const float *first = mc->parts + p->part_off + j * rec;
        float mx = -INFINITY;
        for (int32_t k = 0; k < p->n_split; k++)
            mx = FOLIO_MAX(mx, first[(size_t)k * nrec * rec]);
        float *o =
            b->out + (size_t)(sq->q_row + row) * row_stride + ((size_t)p->kh * group + h) * hd;
        float l = 0;
        for (int32_t d = 0; d < hd; d++)
            o[d] = 0;
        for (int32_t k = 0; k < p->n_split; k++) {
            const float *r = first + (size_t)k * nrec * rec;
            if (r[0] == -INFINITY)
                continue;
            float w = expf(r[0] - mx);
            l += r[1] * w;
            for (int32_t d = 0; d < hd; d++)
                o[d] += w * r[16 + d];
        }
        float inv = 1.0f / l;
        for (int32_t d = 0; d < hd; d++)
            o[d] *= inv;
    }
    mc->u += nrec;
}

void attn_paged(const struct attn_batch *b, void *work, int phase, int ith, int nth)
{
    check_batch(b);
    FOLIO_CHECK(nth >= 1 && ith >= 0 && ith < nth, "ith %d nth %d", ith, nth);
    FOLIO_CHECK(phase >= 0 && phase < ATTN_PHASES, "phase %d", phase);
    FOLIO_CHECK(work != NULL && ((uintptr_t)work & 63) == 0, "workspace not 64-byte aligned");
    struct plan pl;
    plan_init(&pl, b, nth);
    float *wf = work;
    float *parts = wf + (size_t)nth * pl.scratch;
    if (phase == 0) {
        struct run_ctx rc = {.ith = ith,
                             .kern = kern_for(pl.hd),
                             .scratch = wf + (size_t)ith * pl.scratch,
                             .parts = parts,
                             .has_pend = false};
        plan_walk(&pl, piece_run, &rc);
        run_pending(&rc, NULL);
        return;
    }
    /* phase 1: count the records to merge, take this thread's share */
    size_t nrec = 0;
    for (int32_t s = 0; s < b->n_seqs; s++) {
        int by_rows;
        if (item_splits(&pl, &b->seqs[s], &by_rows) > 1 && !by_rows)
            nrec += (size_t)b->seqs[s].n_q * pl.group * b->kv->n_kv_heads;
    }
    if (nrec == 0)
        return;
    struct merge_ctx mc = {
        .u_lo = nrec * ith / nth, .u_hi = nrec * (ith + 1) / nth, .u = 0, .parts = parts};
    plan_walk(&pl, piece_merge, &mc);
}
