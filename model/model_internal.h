/*
 * model/model_internal.h — struct model, shared by the files of model/
 * (loader, synthetic generator, forward).  Not a public header.
 *
 * All weights are f32, row-major, each matrix stored [n_out][n_in] (the
 * GGUF/ggml layout: ne[0] = n_in is the fastest dimension), so y = W x for
 * a batch X [n_tokens][n_in] is one sgemm  Y = X · Wᵀ.
 *
 *   tok_embd  [n_vocab][dim]
 *   per layer:
 *     attn_norm [dim]
 *     wqkv      [(n_heads + 2*n_kv_heads) * head_dim][dim]   rows: Q, then K, then V
 *     wo        [dim][n_heads * head_dim]
 *     ffn_norm  [dim]
 *     w_gate_up [2 * ffn_dim][dim]                            rows: gate, then up
 *     w_down    [dim][ffn_dim]
 *   out_norm  [dim]
 *   output    [n_vocab][dim]   (may alias tok_embd when the file ties them)
 *
 * Q and K rows are in the order the GGUF file stores them; RoPE rotates
 * adjacent pairs (x[2i], x[2i+1]) of each head, the convention llama.cpp
 * uses for the llama architecture.
 *
 * Memory: one aligned allocation (`storage`) holds every tensor that is not
 * borrowed; `vocab` data belongs to the model too (tokenizer metadata).
 */
#ifndef FOLIO_MODEL_INTERNAL_H
#define FOLIO_MODEL_INTERNAL_H

#include "folio/gguf.h"
#include "folio/model.h"

struct model_layer {
    const float *attn_norm, *wqkv, *wo, *ffn_norm, *w_gate_up, *w_down;
};

struct model {
    struct model_hparams hp;
    char name[64];
    const float *tok_embd;
    struct model_layer *layers; /* [n_layers] */
    const float *out_norm;
    const float *output;
    void *storage; /* owned weight memory (folio_aligned_alloc) */
    size_t storage_bytes;
    /* The GGUF file the model was loaded from, kept open (mapped) so the
     * tokenizer can read its tokenizer.* keys (gguf_find_key on m->gguf);
     * NULL for models built in memory.  Owned: model_free() must
     * gguf_close() it.  Weights never point into it (they are converted
     * to f32 in storage at load). */
    gguf_file_t *gguf;
};

/* Presets of `folio gen-model` and the embedded default ("tiny"). */
int model__preset(const char *name, struct model_hparams *hp);
/* Allocates a model with zeroed weights for hp (one storage block). */
int model__alloc(const struct model_hparams *hp, struct model **out);
/* Fills every weight deterministically from seed (synthetic model; see
 * model/model.c for the scaling that keeps activations finite). */
void model__fill_random(struct model *m, uint64_t seed);

#endif
