/*
 * attention/attn_internal.h — what attn_paged.c (planning, checks, merge,
 * dispatch) shares with the per-ISA inner kernels (attn_kern_*.c).
 *
 * The fast kernel is cut into pieces (see attn_paged.c).  A piece is one
 * sequence slice's run of n_kvh KV heads: rows [r0, r1) of the slice, each
 * with the n_kvh * group query heads of those KV heads, against key
 * positions [c0, c1) (further limited by
 * causality: row i sees positions <= pos0 + i).  An inner kernel runs one
 * piece with online softmax and writes either normalised output rows or,
 * for a piece that is one context range of a split item, the partial
 * (max, sum, unnormalised acc) per (row, head) that phase 1 merges.
 *
 * Partial record layout, ATTN__PSTRIDE(hd) floats per (row, query head of
 * the piece), records ordered row-major:
 *   [0] running max m (−inf when the piece saw no key for the row)
 *   [1] sum of exp(score − m)
 *   [16 .. 16+hd) acc = sum of exp(score − m) * V
 *
 * Scratch (per thread, attn__scratch_floats floats, 64-byte aligned):
 *   m[mcap] l[mcap] s[mcap][ATTN__KC] acc[mcap][hd]
 *   qs[mcap][hd]                    (the tile's queries times scale)
 *   ksc[n_kvh][ATTN__KC] vsc[n_kvh][ATTN__KC]
 *                                   (q8: each KV head's row scales of
 *                                    the chunk)
 *   qsc[mcap]  qb[mcap] int32  qq[mcap][hd] int8
 *                                   (q8: the tile's queries quantized by
 *                                    attn_q8_quantize_q, their scales, and
 *                                    with AVX512-VNNI kq8z_qbias of each)
 * where mcap is the largest tile of query vectors (rows x query heads);
 * the tile path lays the same scratch out its own way (attn_kern_tile.h),
 * and attn__scratch_floats is the larger of the two.
 * K/V are read in place from the arena in every dtype and widened in
 * registers; nothing is copied to scratch.
 */
#ifndef FOLIO_ATTN_INTERNAL_H
#define FOLIO_ATTN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "folio/attention.h"

#define ATTN__KC          64  /* keys per chunk of the per-row path (attn_kern_body.h) */
#define ATTN__KCT         32  /* keys per chunk of the tile path (attn_kern_tile.h) */
#define ATTN__MQ          16  /* query vectors per tile (at least one row's group) */
#define ATTN__HD_MAX      512 /* largest head_dim the kernels take */
#define ATTN__PSTRIDE(hd) ((size_t)(hd) + 16)
#define ATTN__ALIGN_F(n)  (((size_t)(n) + 15) & ~(size_t)15) /* 64 bytes */
#define ATTN__QT          48 /* query vectors of a tile-path tile: 3 vectors of 16 lanes */

struct attn__piece {
    /* queries: q[r * q_stride + g * hd + d], r < n_rows, g < group */
    const float *q;
    size_t q_stride;
    int32_t n_rows, group, hd;
    int32_t n_kvh;  /* consecutive KV heads: query heads h < n_kvh * group, h / group */
    int32_t pos0;   /* position of the piece's first row */
    int32_t c0, c1; /* key positions [c0, c1) */
    int32_t window; /* sliding window (0: none): row at p sees (p - window, p] */
    float scale;
    /* K/V: tile of (block, layer, head) at kbase + block * block_bytes,
     * V tile v_bytes further */
    const int32_t *block_table;
    int32_t block_size;
    const char *kbase;
    size_t block_bytes, v_bytes;
    size_t head_bytes;      /* from one KV head's tile to the next */
    size_t row_bytes;       /* one K or V row: head_dim elements */
    size_t scale_off;       /* q8: from a tile to its [block_size] f32 scales */
    enum folio_dtype dtype; /* element type of K/V */
    /* results: out != NULL: out[r * out_stride + g * hd + d] normalised;
     * else part[(r * n_kvh * group + g) * ATTN__PSTRIDE(hd) + ...] */
    float *out;
    size_t out_stride;
    float *part;
    float *scratch;
    /* the tile path (attn_kern_tile.h) may take the piece: false when
     * the batch asks for batch invariance */
    bool tile_ok;
    /* the piece this thread runs next, or NULL: the per-row path's
     * prefetch runs on into its first chunks while this one ends (its
     * rows only, never its results) */
    const struct attn__piece *next;
};

/* Query vectors of one tile, for hv query heads per row. */
static inline int32_t attn__mcap(int32_t hv)
{
    return hv >= ATTN__MQ ? hv : (ATTN__MQ / hv) * hv;
}

/* Scratch of the tile path (attn_kern_tile.h's layout). */
static inline size_t attn__tile_scratch_floats(int32_t hd)
{
    return 2 * ATTN__ALIGN_F((size_t)hd * ATTN__QT) + ATTN__ALIGN_F((size_t)ATTN__KCT * ATTN__QT) +
           5 * ATTN__ALIGN_F(ATTN__QT) + 2 * ATTN__ALIGN_F((size_t)ATTN__KCT * hd) +
           2 * ATTN__ALIGN_F(ATTN__KCT) + ATTN__ALIGN_F(((size_t)hd + 3) / 4);
}

/* Scratch for pieces of at most hv query heads and n_kvh KV heads, by
 * either path. */
static inline size_t attn__scratch_floats(int32_t hv, int32_t n_kvh, int32_t hd)
{
    size_t mcap = (size_t)(hv > ATTN__MQ ? hv : ATTN__MQ);
    size_t rows = 2 * ATTN__ALIGN_F(mcap) + ATTN__ALIGN_F(mcap * ATTN__KC) +
                  2 * ATTN__ALIGN_F(mcap * (size_t)hd) +
                  2 * ATTN__ALIGN_F((size_t)ATTN__KC * n_kvh) + 2 * ATTN__ALIGN_F(mcap) +
                  ATTN__ALIGN_F((mcap * (size_t)hd + 3) / 4);
    size_t tile = attn__tile_scratch_floats(hd);
    return rows > tile ? rows : tile;
}

void attn__kern_portable(const struct attn__piece *pc);
void attn__kern_portable4(const struct attn__piece *pc);
void attn__kern_avx2(const struct attn__piece *pc);
void attn__kern_avx512(const struct attn__piece *pc);
void attn__kern_avx512b(const struct attn__piece *pc); /* -Dattn_ab: attn_kern_avx512b.c */

#endif /* FOLIO_ATTN_INTERNAL_H */
