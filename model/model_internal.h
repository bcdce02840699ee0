/*
 * model/model_internal.h — struct model, shared by the files of model/
 * (loader, synthetic generator, forward).  Not a public header.
 *
 * Matrices are struct matmul_mat (model/matmul.h): row-major [n_out][n_in]
 * (the GGUF/ggml layout: ne[0] = n_in is the fastest dimension) in the
 * type the file stores them in (F32, F16, BF16 or quantized; a fused QKV
 * whose parts differ in type is kept as three matrices), so y = W x for a batch
 * X [n_tokens][n_in] is one product  Y = X · Wᵀ  of the matmul layer.
 * Norm vectors are always f32.  Models built in memory (model__alloc) are
 * all F32.
 *
 *   tok_embd  [n_vocab][dim]
 *   per layer:
 *     attn_norm [dim]
 *     wqkv      [(n_heads + 2*n_kv_heads) * head_dim][dim]   rows: Q, then K, then V
 *     wo        [dim][n_heads * head_dim]
 *     ffn_norm  [dim]
 *     w_gate_up [2 * ffn_dim][dim]                            rows: gate, then up
 *     w_down    [dim][ffn_dim]
 *     bqkv      [(n_heads + 2*n_kv_heads) * head_dim]          qwen2 only
 *     q_norm, k_norm [head_dim]                                qwen3 only
 *   out_norm  [dim]
 *   output    [n_vocab][dim]   (shares tok_embd's data when the file ties them)
 *
 * Q and K rows are in the order the GGUF file stores them; RoPE rotates
 * adjacent pairs (x[2i], x[2i+1]) of each head for llama, the halves
 * (x[i], x[i + d/2]) for qwen2/qwen3 (hp.rope_neox), as llama.cpp does.
 *
 * Memory: one region (`storage`, folio_region_alloc, on huge pages where
 * the kernel offers them) holds every tensor, in its file type (a loaded
 * model's resident size is about its file's tensor bytes: the loader
 * releases the mapping's pages it copied from).
 */
#ifndef FOLIO_MODEL_INTERNAL_H
#define FOLIO_MODEL_INTERNAL_H

#include "folio/gguf.h"
#include "folio/model.h"
#include "matmul.h"

struct model_layer {
    const float *attn_norm, *ffn_norm;
    /* Q, K, V as one fused matrix when the file stores them in one type;
     * when their types differ (a Q4_K_M file's attn_v in Q6_K), wqkv.data
     * is NULL and qkv_part[0..2] hold Q, K and V, each in its own type,
     * multiplied separately into their columns of the same qkv rows.
     * Gate and up likewise: w_gate_up.data NULL and gu_part[0..1] (gate,
     * up) in their own types when the file's gate and up types differ. */
    struct matmul_mat wqkv, qkv_part[3], wo, w_gate_up, gu_part[2], w_down;
    const float *bqkv;            /* [(H + 2 KV) hd] Q|K|V biases (qwen2), or NULL */
    const float *q_norm, *k_norm; /* [hd] per-head RMSNorm weights (qwen3), or NULL */
};

struct model {
    struct model_hparams hp;
    char name[64];
    struct matmul_mat tok_embd;
    struct model_layer *layers; /* [n_layers] */
    const float *out_norm;
    struct matmul_mat output;
    const float *rope_freqs; /* [head_dim / 2] frequency divisors, or NULL */
    /* Rerankers' classification head (cls.output.weight [n_cls][dim], f32
     * in storage; cls.output.bias [n_cls] or NULL); n_cls 0: none.  In a
     * generated model (model/gen.c) cls_out points at the caller's memory. */
    const float *cls_out, *cls_out_b;
    int32_t n_cls;
    void *storage; /* owned weight memory (folio_region_alloc) */
    size_t storage_bytes;
};

/* Adds the squares of A's M rows (row stride lda) to input `input` of s
 * (model/act_stats.c). */
void model__act_add(struct model_act_stats *s, int32_t input, const float *A, int32_t lda,
                    int32_t M);

/* The f32 data of an F32 matrix (models built in memory), else NULL. */
static inline float *model__f32(const struct matmul_mat *mt)
{
    return mt->type == GGUF_TENSOR_F32 ? (float *)mt->data : NULL;
}

/* The RoPE frequency divisor of dimension pair i (of head_dim / 2): the
 * model's rope_freqs when it has them, else llama3 scaling's from hp
 * (include/folio/model.h), else 1. */
double model__rope_divisor(const struct model *m, int32_t i);
/* Allocates a model with zeroed weights for hp (one storage block). */
int model__alloc(const struct model_hparams *hp, struct model **out);
/* A copy of src (all F32, built in memory) whose matrices are stored as
 * type t (F32, F16, BF16 or Q8_0): what a file of that type loads into.
 * Norms stay f32.  -EINVAL (type, or a Q8_0 row not a multiple of 32),
 * -ENOMEM. */
int model__retype(const struct model *src, enum gguf_tensor_type t, struct model **out);
/* Bytes of the matrices one token's forward pass reads (every layer's,
 * and the output's). */
size_t model__weight_bytes_per_token(const struct model *m);
/* Rearranges every quantized matrix (Q4_0 .. Q8_0, Q2_K .. Q6_K, IQ4_NL,
 * IQ4_XS) into its type's load-time layout (quant_repack_type: Q4_K_R8 ..
 * IQ4_XS_R8, model/quant.h) where that layout's kernels are at least the
 * file layout's ISA (quant_repack_pays), in place, and retypes it; a tied
 * output follows its embedding.  Matrices whose rows do not fit the
 * layout's groups keep the file's layout.  FOLIO_REPACK=0 in the
 * environment leaves every matrix as the file has it (A/B measurements).
 * 0 or -ENOMEM. */
int model__repack(struct model *m);
/* Ties the output matrix to the embedding (one copy serves both), as
 * files without output.weight do; call before model__fill_random. */
void model__tie_output(struct model *m);
/* Fills every weight deterministically from seed (synthetic model; see
 * model/model.c for the scaling that keeps activations finite). */
void model__fill_random(struct model *m, uint64_t seed);
/* n approximately N(0, sigma²) values into w from stream `which` of seed
 * (the one generator synthetic weights and adapters draw from). */
void model__fill_normal(float *w, size_t n, uint64_t seed, uint64_t which, float sigma);
/* y[k][0..out) += s·Btᵀ·(A·x[k]) for rows k < nr (1..MODEL_LORA_ROWS) of
 * the input of adapter a's matrix (layer, target) (model/lora.c), each row
 * computed as if alone (the same bits whatever nr); false (y untouched)
 * when a leaves that matrix alone. */
#define MODEL_LORA_ROWS 8
struct model_lora;
bool model__lora_rows(const struct model_lora *a, int32_t layer, int target, const float *const *x,
                      float *const *y, int nr);

/* SwiGLU over one row, in place: g[i] = silu(g[i]) * u[i] for i < n, with
 * model__exp_approx (g and u never overlap).  model__swiglu_ref is the
 * plain loop; the others do the same operations several lanes at a time
 * (model/swiglu_body.h) and give the same bits: _generic 8 lanes at the
 * build's own flags (any target), _avx2 8 and _avx512 16 (x86-64,
 * FOLIO_SWIGLU_X86; call only where the CPU has the ISA).  model__swiglu
 * runs the widest one this CPU has (FOLIO_MATMUL_ISA=plain: _generic,
 * =avx2: at most _avx2). */
void model__swiglu(float *restrict g, const float *restrict u, int32_t n);
void model__swiglu_ref(float *g, const float *u, int32_t n);
void model__swiglu_generic(float *restrict g, const float *restrict u, int32_t n);
void model__swiglu_avx2(float *restrict g, const float *restrict u, int32_t n);
void model__swiglu_avx512(float *restrict g, const float *restrict u, int32_t n);

#endif
