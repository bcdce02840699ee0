/*
 * tests/model_alloc_stub.c — TEMPORARY stand-in for model/model.c (owned
 * by the forward helper) so the gguf branch links and tests on its own:
 * model__preset, model__alloc, model__fill_random, model_free,
 * model_hparams, model_name.  model/meson.build compiles it only while
 * model/model.c does not exist; delete it once main has model.c.
 *
 * model__alloc lays every tensor out in one storage block in the order of
 * model_internal.h; the layer array is a separate allocation.
 */
#include <errno.h>
#include <string.h>

#include "folio/common.h"
#include "model_internal.h"

int model__preset(const char *name, struct model_hparams *hp)
{
    static const struct {
        const char *name;
        int32_t dim, n_layers, n_heads, n_kv_heads, ffn_dim;
    } presets[] = {
        {"tiny", 512, 8, 8, 2, 1376},
        {"small", 768, 12, 12, 4, 2048},
        {"medium", 1024, 24, 16, 4, 2816},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(presets); i++) {
        if (strcmp(name, presets[i].name))
            continue;
        *hp = (struct model_hparams){
            .n_vocab = 32000,
            .dim = presets[i].dim,
            .n_layers = presets[i].n_layers,
            .n_heads = presets[i].n_heads,
            .n_kv_heads = presets[i].n_kv_heads,
            .head_dim = presets[i].dim / presets[i].n_heads,
            .ffn_dim = presets[i].ffn_dim,
            .ctx_len = 2048,
            .norm_eps = 1e-5f,
            .rope_base = 10000.0f,
            .bos_id = 1,
            .eos_id = 2,
        };
        return 0;
    }
    return -EINVAL;
}

int model__alloc(const struct model_hparams *hp, struct model **out)
{
    size_t dim = (size_t)hp->dim, hd = (size_t)hp->head_dim;
    size_t qkv = ((size_t)hp->n_heads + 2 * (size_t)hp->n_kv_heads) * hd;
    size_t per_layer = dim + qkv * dim + dim * (size_t)hp->n_heads * hd + dim +
                       2 * (size_t)hp->ffn_dim * dim + dim * (size_t)hp->ffn_dim;
    size_t n = 2 * (size_t)hp->n_vocab * dim + (size_t)hp->n_layers * per_layer + dim;
    struct model *m = folio_calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->hp = *hp;
    m->layers = folio_calloc((size_t)hp->n_layers, sizeof(*m->layers));
    m->storage = folio_aligned_alloc(64, n * sizeof(float));
    if (!m->layers || !m->storage) {
        model_free(m);
        return -ENOMEM;
    }
    memset(m->storage, 0, n * sizeof(float));
    m->storage_bytes = n * sizeof(float);
    float *p = m->storage;
    m->tok_embd = p;
    p += (size_t)hp->n_vocab * dim;
    for (int32_t l = 0; l < hp->n_layers; l++) {
        struct model_layer *L = &m->layers[l];
        L->attn_norm = p;
        p += dim;
        L->wqkv = p;
        p += qkv * dim;
        L->wo = p;
        p += dim * (size_t)hp->n_heads * hd;
        L->ffn_norm = p;
        p += dim;
        L->w_gate_up = p;
        p += 2 * (size_t)hp->ffn_dim * dim;
        L->w_down = p;
        p += dim * (size_t)hp->ffn_dim;
    }
    m->out_norm = p;
    p += dim;
    m->output = p;
    *out = m;
    return 0;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void model__fill_random(struct model *m, uint64_t seed)
{
    float *p = m->storage;
    size_t n = m->storage_bytes / sizeof(float);
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++)
        p[i] = ((float)(splitmix(&s) >> 40) / 16777216.0f - 0.5f) * 0.04f;
    size_t dim = (size_t)m->hp.dim;
    for (int32_t l = 0; l < m->hp.n_layers; l++) {
        for (size_t i = 0; i < dim; i++) {
            ((float *)m->layers[l].attn_norm)[i] = 1.0f;
            ((float *)m->layers[l].ffn_norm)[i] = 1.0f;
        }
    }
    for (size_t i = 0; i < dim; i++)
        ((float *)m->out_norm)[i] = 1.0f;
}

void model_free(model_t *m)
{
    if (!m)
        return;
    gguf_close(m->gguf);
    folio_free(m->layers);
    folio_free(m->storage);
    folio_free(m);
}

const struct model_hparams *model_hparams(const model_t *m)
{
    return &m->hp;
}

const char *model_name(const model_t *m)
{
    return m->name;
}
