/*
 * tests/test_model_stack.h — the real serving stack for tests that run
 * the scheduler with the model (test_sched_model.c, test_batch_invariance.c;
 * header-only, everything static): a pager with an f32 KV arena shaped by
 * the model, a scheduler over it, a model context over the pager's KV, and
 * a logits buffer of one row per sequence.  test_sched_harness.h is the
 * model-free driver for scheduler-only tests.
 *
 * Also the prompts those tests feed it: a deterministic pseudo-random run
 * of token ids from a salt, never the three lowest ids (the special
 * tokens of the embedded model).
 */
#ifndef TEST_MODEL_STACK_H
#define TEST_MODEL_STACK_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "folio/model.h"
#include "folio/pager.h"
#include "folio/scheduler.h"

struct mstack {
    pager_t *pg;
    sched_t *s;
    model_ctx_t *ctx;
    float *logits; /* [sc.max_seqs][n_vocab] */
    int32_t n_vocab;
};

/* sc: the scheduler's settings (events included); mc: the context's,
 * whose max_tokens and max_slices are taken from sc. */
static inline void mstack_init(struct mstack *m, model_t *model, int32_t num_blocks,
                               int32_t block_size, const struct sched_config *sc,
                               struct model_ctx_config mc)
{
    const struct model_hparams *hp = model_hparams(model);
    memset(m, 0, sizeof(*m));
    struct pager_config pc = {.num_blocks = num_blocks,
                              .block_size = block_size,
                              .n_layers = hp->n_layers,
                              .n_kv_heads = hp->n_kv_heads,
                              .head_dim = hp->head_dim,
                              .dtype = FOLIO_F32};
    assert_int_equal(pager_init(&m->pg, &pc), 0);
    assert_int_equal(sched_new(sc, m->pg, &m->s), 0);
    struct pager_kv_view kv;
    pager_kv_view(m->pg, &kv);
    mc.max_tokens = sc->max_batch_tokens;
    mc.max_slices = sc->max_seqs;
    assert_int_equal(model_ctx_new(model, &kv, &mc, &m->ctx), 0);
    m->n_vocab = hp->n_vocab;
    m->logits = malloc((size_t)sc->max_seqs * (size_t)hp->n_vocab * sizeof(float));
    assert_non_null(m->logits);
}

static inline void mstack_free(struct mstack *m)
{
    free(m->logits);
    model_ctx_free(m->ctx);
    sched_free(m->s);
    pager_free(m->pg);
    memset(m, 0, sizeof(*m));
}

/* n pseudo-random token ids in [3, vocab) from salt into p. */
static inline void mstack_prompt(uint32_t salt, int32_t n, int32_t *p, int32_t vocab)
{
    uint32_t x = 2166136261u ^ salt;
    for (int32_t k = 0; k < n; k++) {
        x = x * 16777619u + 12345u;
        p[k] = 3 + (int32_t)((x >> 8) % (uint32_t)(vocab - 3));
    }
}

#endif
