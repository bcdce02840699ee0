/*
 * attention/attn_ref.c — the scalar reference paged attention.
 *
 * Deliberately plain: for each (slice, row, query head) it gathers the
 * visible keys through the page table one position at a time, computes all
 * scores, a max-subtracted softmax and the weighted sum of values, in
 * double precision.  Every faster kernel is tested against this one, and
 * this one is tested against dense attention over contiguous K/V.  With q8
 * K/V the query vector is quantized to int8 first (attn_q8_quantize_q,
 * attn_quant_q.c, the softmax scale folded into its scale), as the fast
 * kernels do: that is part of what q8 attention computes.
 */
#include "folio/attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Element e of the K (kv = 0) or V (kv = 1) vector of (head, pos), read
 * straight from the layout of folio/pager.h (not through pager_kv_row_get,
 * so the two are checked against each other by the tests). */
static double kv_elem(const struct pager_kv_view *kv, int32_t layer, int kvsel,
                      const int32_t *block_table, int32_t head, int32_t pos, int32_t e)
{
    int32_t blk = block_table[pos / kv->block_size];
    int32_t slot = pos % kv->block_size;
    size_t tile = (size_t)blk * kv->block_stride + (size_t)layer * kv->layer_stride +
                  (size_t)kvsel * kv->v_offset + (size_t)head * kv->head_stride;
    size_t idx = tile + (size_t)slot * kv->head_dim + (size_t)e;
    switch (kv->dtype) {
    case FOLIO_F16:
        return folio_f16_to_f32(((const uint16_t *)kv->base)[idx]);
    case FOLIO_BF16:
        return folio_bf16_to_f32(((const uint16_t *)kv->base)[idx]);
    case FOLIO_Q8: {
        /* int8 value times the row's f32 scale, stored after the tile's values */
        float scale;
        memcpy(&scale,
               (const char *)kv->base + tile + (size_t)kv->block_size * kv->head_dim +
                   (size_t)slot * PAGER_Q8_SCALE_BYTES,
               sizeof scale);
        return (double)((const int8_t *)kv->base)[idx] * scale;
    }
    default:
        return ((const float *)kv->base)[idx];
    }
}

void attn_paged_ref(const struct attn_batch *b)
{
    const struct pager_kv_view *kv = b->kv;
    FOLIO_CHECK(kv && kv->base && b->n_heads % kv->n_kv_heads == 0,
                "reference attention: no view, or %d query heads for %d K/V heads", (int)b->n_heads,
                kv ? (int)kv->n_kv_heads : 0);
    const int32_t hd = kv->head_dim;
    const int32_t group = b->n_heads / kv->n_kv_heads;
    const size_t row_stride = (size_t)b->n_heads * hd;

    for (int32_t s = 0; s < b->n_seqs; s++) {
        const struct attn_seq *sq = &b->seqs[s];
        int32_t ctx = sq->p0 + sq->n_q;
        double *scores = malloc(sizeof(double) * (size_t)ctx);
        double *acc = malloc(sizeof(double) * (size_t)hd);
        int8_t *q8 = malloc((size_t)hd);
        FOLIO_CHECK(scores && acc && q8, "reference attention: out of memory for %d keys",
                    (int)ctx);
        for (int32_t i = 0; i < sq->n_q; i++) {
            int32_t visible = sq->p0 + i + 1;
            const int32_t lo = b->window > 0 ? FOLIO_MAX(0, visible - b->window) : 0;
            const float *qrow = b->q + (size_t)(sq->q_row + i) * row_stride;
            float *orow = b->out + (size_t)(sq->q_row + i) * row_stride;
            for (int32_t h = 0; h < b->n_heads; h++) {
                int32_t kh = h / group;
                const float *qh = qrow + (size_t)h * hd;
                double mx = -INFINITY;
                const int q8kv = kv->dtype == FOLIO_Q8;
                const double qsc =
                    q8kv ? (double)attn_q8_quantize_q(qh, hd, b->scale, q8) : (double)b->scale;
                for (int32_t p = lo; p < visible; p++) {
                    double dot = 0;
                    for (int32_t e = 0; e < hd; e++)
                        dot += (q8kv ? (double)q8[e] : (double)qh[e]) *
                               kv_elem(kv, b->layer, 0, sq->block_table, kh, p, e);
                    scores[p] = dot * qsc;
                    if (scores[p] > mx)
                        mx = scores[p];
                }
                double sum = 0;
                for (int32_t p = lo; p < visible; p++) {
                    scores[p] = exp(scores[p] - mx);
                    sum += scores[p];
                }
                for (int32_t e = 0; e < hd; e++)
                    acc[e] = 0;
                for (int32_t p = lo; p < visible; p++)
                    for (int32_t e = 0; e < hd; e++)
                        acc[e] += scores[p] * kv_elem(kv, b->layer, 1, sq->block_table, kh, p, e);
                for (int32_t e = 0; e < hd; e++)
                    orow[(size_t)h * hd + e] = (float)(acc[e] / sum);
            }
        }
        free(scores);
        free(acc);
        free(q8);
    }
}
