/*
 * model/act_stats.c — the activation statistics behind an importance
 * matrix (struct model_act_stats, folio/model.h).
 *
 * Layout: input i covers sq[off[i] .. off[i] + len[i]); inputs run layer
 * by layer (attention input dim, attention output n_heads * head_dim, FFN
 * input dim, FFN hidden ffn_dim), then the output matrix's input (dim).
 * Sums are doubles: a column gathers one square per token of a text, and
 * float sums of millions of them would lose the small ones.
 */
#include <errno.h>
#include <stdlib.h>

#include "folio/model.h"
#include "model_internal.h"

int model_act_stats_new(const model_t *m, struct model_act_stats **out)
{
    const struct model_hparams *hp = model_hparams(m);
    const int32_t n = hp->n_layers * MODEL_ACT_PER_LAYER + 1;
    struct model_act_stats *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->n_inputs = n;
    s->len = malloc(sizeof(int32_t) * (size_t)n);
    s->off = malloc(sizeof(size_t) * (size_t)n);
    s->rows = calloc((size_t)n, sizeof(uint64_t));
    if (!s->len || !s->off || !s->rows) {
        model_act_stats_free(s);
        return -ENOMEM;
    }
    const int32_t per[MODEL_ACT_PER_LAYER] = {
        [MODEL_ACT_ATTN_IN] = hp->dim,
        [MODEL_ACT_ATTN_OUT] = hp->n_heads * hp->head_dim,
        [MODEL_ACT_FFN_IN] = hp->dim,
        [MODEL_ACT_FFN_HIDDEN] = hp->ffn_dim,
    };
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        s->len[i] = i + 1 == n ? hp->dim : per[i % MODEL_ACT_PER_LAYER];
        s->off[i] = total;
        total += (size_t)s->len[i];
    }
    if (!(s->sq = calloc(total, sizeof(double)))) {
        model_act_stats_free(s);
        return -ENOMEM;
    }
    *out = s;
    return 0;
}

void model_act_stats_free(struct model_act_stats *s)
{
    if (!s)
        return;
    free(s->len);
    free(s->off);
    free(s->sq);
    free(s->rows);
    free(s);
}

void model__act_add(struct model_act_stats *s, int32_t input, const float *A, int32_t lda,
                    int32_t M)
{
    double *sq = s->sq + s->off[input];
    const int32_t K = s->len[input];
    for (int32_t r = 0; r < M; r++) {
        const float *a = A + (size_t)r * lda;
        for (int32_t k = 0; k < K; k++)
            sq[k] += (double)a[k] * a[k];
    }
    s->rows[input] += (uint64_t)M;
}
