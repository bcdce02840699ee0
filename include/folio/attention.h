/*
 * folio/attention.h — attention for one layer of one step, through page
 * tables.
 *
 * A batch is a flat list of query rows grouped into sequence slices.  Slice
 * s owns rows [q_row, q_row + n_q): the new tokens at positions
 * [p0, p0 + n_q) of its sequence.  Each attends to keys/values at positions
 * [0, p0 + i] for its row i (causal inside the new chunk; with a sliding
 * window w, only the last w of them); K/V for the new
 * positions must already be written to their slots.  n_q = 1 is a decode,
 * p0 = 0 a fresh prefill, anything else a chunk after a cached prefix.
 *
 *   q, out: [n_rows][n_heads][head_dim]   f32, row stride n_heads*head_dim
 *   K/V:    through kv (see folio/pager.h), layer `layer`, dtype kv->dtype
 *   query head h reads KV head h / (n_heads / n_kv_heads)  (GQA)
 *   scale:  usually 1/sqrt(head_dim)
 *
 * Two implementations with one contract:
 *   attn_paged_ref — plain scalar loops, the reference;
 *   attn_paged     — the fast kernel: threads split the work by index
 *                    (ith of nth), no allocation (caller's workspace).
 */
#ifndef FOLIO_ATTENTION_H
#define FOLIO_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "folio/pager.h"

#ifdef __cplusplus
extern "C" {
#endif

struct attn_seq {
    int32_t q_row;              /* first row of the slice in q / out */
    int32_t n_q;                /* rows (new tokens), >= 1 */
    int32_t p0;                 /* position of the first new token, >= 0 */
    const int32_t *block_table; /* >= ceil((p0 + n_q) / block_size) ids */
};

struct attn_batch {
    const struct pager_kv_view *kv;
    int32_t layer;
    int32_t n_heads; /* query heads, a multiple of kv->n_kv_heads */
    float scale;
    int32_t n_seqs;
    const struct attn_seq *seqs;
    int32_t n_rows; /* total query rows */
    const float *q;
    float *out;
    /* The fast kernel computes each row the same way whatever else is in
     * the batch: no context splits (their cut points follow the batch's
     * total cost), KV heads one per work item.  Costs parallelism on a
     * batch of few long sequences. */
    bool batch_invariant;
    /* Sliding window: the row at position p sees positions
     * [max(0, p - window + 1), p]; 0: the whole causal context. */
    int32_t window;
};

/* The reference: for every slice, row and head, a two-pass softmax over the
 * whole visible context in double precision.  Single-threaded. */
void attn_paged_ref(const struct attn_batch *b);

/* q8 K/V: scores are integer dot products of an int8 query with the int8
 * key.  The reference and every kernel quantize each query vector (one
 * row, one head) with this function, so they agree: y[e] = x[e] * scale in
 * f32, amax = max |y|, out[e] = rint(y[e] * (127 / amax)) in [-127, 127];
 * returns the vector's scale amax / 127 (0 for an all-zero vector, NaN
 * when any y is not finite).  A score is sum_e out[e] * k[e] (exact in
 * int32) times the returned scale times K's row scale.  Against the
 * unquantized query this moves a score by at most amax / 254 * sum_e |key
 * element| (half a step per element); tests/test_attention.c states the
 * resulting output tolerance. */
float attn_q8_quantize_q(const float *x, int32_t n, float scale, int8_t *out);

/* ---- fast kernel ------------------------------------------------------ */

/* The fast kernel runs in ATTN_PHASES phases.  The caller runs phase 0 on
 * all nth threads (ith = 0..nth-1), waits for all of them, then phase 1,
 * and so on; out is complete after the last phase.  `work` is the caller's
 * workspace of at least attn_paged_work_size(b, nth) bytes, 64-byte
 * aligned, and must not change between phases of one batch. */
#define ATTN_PHASES 2
size_t attn_paged_work_size(const struct attn_batch *b, int nth);
/* An upper bound of attn_paged_work_size over every batch on this view
 * with n_heads query heads and at most max_rows rows, for sizing the
 * workspace once (model_ctx_new).  Loose but finite: the partials of
 * context splits are bounded by at most 4 nth split items (slices of fewer
 * than 8 nth rows) of at most 4 nth pieces each. */
size_t attn_paged_work_bound(const struct pager_kv_view *kv, int32_t n_heads, int32_t max_rows,
                             int nth);
void attn_paged(const struct attn_batch *b, void *work, int phase, int ith, int nth);

/* Instruction set of the fast kernel's inner loops: "portable" (plain C, any
 * CPU), "avx2" (AVX2 + FMA + F16C), "avx512" (AVX-512F + BW + VNNI), or
 * "auto" / NULL for the best this CPU supports (the default; the
 * environment variable FOLIO_ATTN_ISA, read at first use, may name
 * another).  -EINVAL for an unknown name, -ENOTSUP if this CPU or build
 * lacks it.  A head_dim the chosen path cannot take (not a multiple of
 * 16 / 8) runs the next one down.  For tests and benchmarks: must not race
 * a running kernel. */
int attn_force_isa(const char *name);
/* The instruction set in use now ("portable", "avx2", "avx512"). */
const char *attn_isa_name(void);
/* For bench_attention --ab: with b nonzero the AVX-512 path runs kernel
 * B, the same source built with attention/attn_kern_ab.h's switches (meson
 * -Dattn_ab=true), else kernel A, the one every build has.  -ENOTSUP when
 * this build has no kernel B.  Must not race a running kernel. */
int attn_ab_select(int b);

#ifdef __cplusplus
}
#endif
#endif /* FOLIO_ATTENTION_H */
