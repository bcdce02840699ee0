/*
 * folio/model.h — a LLaMA-family transformer (llama, qwen2, qwen3): weights, and the
 * forward pass over a flat batch of tokens drawn from many sequences.
 *
 * A model_t is immutable once loaded (matrices keep their file's type in
 * memory: F32, F16, BF16 or Q8_0; norms are f32).  A model_ctx_t holds everything
 * one forward pass needs: preallocated workspaces sized for the largest
 * batch, the thread pool, and the pager's KV view it writes K/V into.
 *
 * One step:  tokens ─► embed ─► [ rmsnorm → QKV (one sgemm) → RoPE → K/V to
 * slots → paged attention → out proj (+res) → rmsnorm → gate|up (one sgemm)
 * → SwiGLU → down (+res) ] × n_layers ─► final norm ─► output matrix for the
 * rows that sample ─► logits.
 *
 * Ownership and threading:
 *   - A ctx borrows its model and the pager's KV view: both must outlive
 *     it (free the ctx first), and the pool must not be resized under it.
 *     model_forward writes K/V into the view's arena at the slots the
 *     batch's block tables name; it never calls the pager.
 *   - One thread per ctx: model_forward (and model_ctx_stats_get) on one
 *     ctx must not run concurrently; a ctx runs its own thread pool.  A
 *     model_t is read-only after load and may back several ctxs.
 *   - The OpenBLAS thread count is process-wide
 *     (openblas_set_num_threads): model_forward sets it on every call
 *     (1, or n_threads with blas_threads), so all ctxs of a process
 *     should use the same n_threads and mode — foliod has one.
 */
#ifndef FOLIO_MODEL_H
#define FOLIO_MODEL_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "folio/gguf.h"
#include "folio/pager.h"
#include "folio/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* GGUF general.architecture values foliod runs.  llama: the base.  qwen2:
 * Q/K/V biases, NeoX RoPE.  qwen3: per-head RMSNorm of Q and K (before
 * RoPE), NeoX RoPE, no biases.  Any of them may tie its output to the
 * embedding. */
enum model_arch { MODEL_ARCH_LLAMA = 0, MODEL_ARCH_QWEN2 = 1, MODEL_ARCH_QWEN3 = 2 };

/* RoPE scaling (GGUF {arch}.rope.scaling.type).  LLAMA3: Llama 3.1's
 * per-dimension frequency divisors (see rope_low_freq). */
enum model_rope_scaling {
    MODEL_ROPE_NONE = 0,
    MODEL_ROPE_LINEAR = 1,
    MODEL_ROPE_YARN = 2,
    MODEL_ROPE_LLAMA3 = 3
};

struct model_hparams {
    int32_t n_vocab, dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim, ctx_len;
    float norm_eps, rope_base;
    int32_t bos_id, eos_id; /* -1 when unknown */
    int32_t arch;           /* enum model_arch */
    bool rope_neox;         /* rotate (x[i], x[i + d/2]) instead of (x[2i], x[2i+1]) */
    /* RoPE scaling; all zero for none.  factor: positions are divided by it
     * (linear), or YaRN's scale over orig_ctx (the training context it
     * extends); yarn_attn: the attention factor (default 1); beta_fast /
     * beta_slow: YaRN's ramp bounds (defaults 32 and 1). */
    int32_t rope_scaling; /* enum model_rope_scaling */
    float rope_factor;
    int32_t rope_orig_ctx;
    float yarn_attn, yarn_beta_fast, yarn_beta_slow;
    /* llama3: the frequency of dimension pair i, f = base^(-2i/d), of
     * wavelength L = 2 pi / f is divided by 1 when L < orig_ctx /
     * high_freq, by factor when L > orig_ctx / low_freq, and in between by
     * 1 / ((1 - s) / factor + s), s = (orig_ctx / L - low) / (high - low)
     * (defaults low 1, high 4).  A file's rope_freqs.weight tensor (the
     * divisors themselves, as llama.cpp's converter writes them) takes
     * precedence over these keys. */
    float rope_low_freq, rope_high_freq;
    /* Sliding-window attention: a token attends to the last n_swa
     * positions (itself included); 0: the whole context. */
    int32_t n_swa;
};

typedef struct model model_t;
typedef struct model_ctx model_ctx_t;
struct model_lora; /* folio/lora.h */

/* Loads a GGUF file (see folio/gguf.h); on failure writes a message naming
 * the file and the problem into err and returns -errno. */
int model_load_file(const char *path, model_t **out, char *err, size_t errlen);
/* The embedded default model: preset "tiny", seed 0, built in memory. */
int model_load_default(model_t **out, char *err, size_t errlen);
void model_free(model_t *m);

/* `folio gen-model`: the synthetic model of a preset ("tiny", "small",
 * "medium"; see model_preset below) with weights drawn from seed, written as a
 * GGUF v3 file of architecture o->arch that llama.cpp-style readers accept.
 * The output depends only on the options (byte-identical across runs).
 * vocab_path NULL: the synthetic SentencePiece vocabulary
 * (model/vocab_synth.h); else every tokenizer.* key is copied from that
 * GGUF file and n_vocab becomes its token count. */
struct model_gen_opts {
    const char *preset;
    uint64_t seed;
    bool f16;               /* matrices F16 (norms stay F32) */
    const char *dtype;      /* matrices' type: "f32", "f16", "bf16", "q8_0";
                               NULL: f16 decides */
    const char *up_dtype;   /* ffn_up's type when it differs (NULL: dtype's) */
    const char *vocab_path; /* may be NULL */
    int32_t n_vocab;        /* the synthetic vocabulary's size (0: the preset's, 32000;
                               VOCAB_SYNTH_MIN .. MAX), without vocab_path */
    const char *arch;       /* "llama" (NULL), "qwen2" (Q/K/V biases, tied output),
                               "qwen3" (Q/K norms) */
    /* RoPE scaling keys to write: MODEL_ROPE_NONE (0), LINEAR (factor),
     * YARN (factor over orig_ctx, 0: the preset's context); LLAMA3 writes
     * no keys but the tensor rope_freqs.weight (as llama.cpp's converter
     * does: its loader refuses a scaling type it does not know) */
    int32_t rope_scaling;
    float rope_factor;
    int32_t rope_orig_ctx;
    float rope_low_freq, rope_high_freq; /* LLAMA3 (0: defaults 1 and 4) */
    int32_t sliding_window;              /* {arch}.attention.sliding_window (0: none) */
    /* A reranker (qwen3 only, the decoder architecture llama.cpp reads a
     * classification head for): a seeded cls.output.weight of two rows
     * (labels "yes", "no"), pooling_type rank (4) and a
     * tokenizer.chat_template.rerank with {query} and {document}. */
    bool reranker;
};
int model_gen_file(const struct model_gen_opts *o, const char *path, char *err, size_t errlen);
const struct model_hparams *model_hparams(const model_t *m);
const char *model_name(const model_t *m);
/* The classification head of a reranker file (cls.output.weight, f32
 * whatever its file type: rows [n][dim]; cls.output.bias [n] or NULL):
 * returns n (1 .. MODEL_MAX_CLS), or 0 (w, b NULL) when the model has
 * none. */
#define MODEL_MAX_CLS 16
int32_t model_cls_head(const model_t *m, const float **w, const float **b);
/* The class probabilities of a final hidden state h [dim] through a head
 * of n >= 1 rows (w [n][dim], b [n] or NULL) into p [n]: with two or more
 * outputs their softmax, with one its logistic sigmoid (a cross-encoder's
 * logit, as vLLM scores it).  Sums in double.  Returns n (at most
 * MODEL_MAX_CLS).  model_rank_score: the relevance score, p[0] (a yes/no
 * head: P(yes), as llama.cpp scores its qwen3 rerankers).  Inline: the
 * server's library, which does not link the model, scores with them too. */
static inline int32_t model_cls_probs(const float *w, const float *b, int32_t n, int32_t dim,
                                      const float *h, double *p)
{
    double zmax = -INFINITY, den = 0;
    n = n < MODEL_MAX_CLS ? n : MODEL_MAX_CLS;
    for (int32_t r = 0; r < n; r++) {
        double s = b ? b[r] : 0.0;
        for (int32_t i = 0; i < dim; i++)
            s += (double)w[(size_t)r * (size_t)dim + (size_t)i] * h[i];
        p[r] = s;
        zmax = s > zmax ? s : zmax;
    }
    if (n == 1) {
        p[0] = 1.0 / (1.0 + exp(-p[0]));
        return 1;
    }
    for (int32_t r = 0; r < n; r++)
        den += exp(p[r] - zmax);
    for (int32_t r = 0; r < n; r++)
        p[r] = exp(p[r] - zmax) / den;
    return n;
}

static inline double model_rank_score(const float *w, const float *b, int32_t n, int32_t dim,
                                      const float *h)
{
    double p[MODEL_MAX_CLS];
    model_cls_probs(w, b, n, dim, h, p);
    return p[0];
}
/* The KV element type `--kv-dtype auto` takes for a model whose attention
 * matrices are of type t: F32, F16 and BF16 keep their own precision (as
 * vLLM's "auto" takes the model's dtype), quantized types f16 (as
 * llama.cpp's cache defaults to). */
enum folio_dtype model_kv_dtype_for(enum gguf_tensor_type t);
/* model_kv_dtype_for the type of the model's first layer's Q matrix. */
enum folio_dtype model_kv_dtype_auto(const model_t *m);

/* The hyperparameters of a synthetic preset: "tiny" (the embedded default
 * model), "small", "medium" (`folio gen-model --preset`, `folio plan`).
 * -EINVAL for another name. */
int model_preset(const char *name, struct model_hparams *hp);

/* One slice of a batch: n_tokens new tokens of one sequence at positions
 * [first_pos, first_pos + n_tokens), already given slots by the pager
 * (block_table covers every position up to first_pos + n_tokens). */
struct model_slice {
    int32_t first_pos;
    int32_t n_tokens;
    const int32_t *block_table;
    bool sample; /* produce logits for the slice's last token */
    /* produce logits for every token of the slice, in order (perplexity,
     * prompt log-probabilities); sample is then implied.  The batch's
     * logit rows must fit the ctx's max_logits. */
    bool all_logits;
    /* produce the final hidden state (the output norm's, which the logits
     * are a product of) of every token of the slice, in order, as rows of
     * model_forward_hidden's output; no logits for them (sample still
     * gives the last token's) */
    bool hidden;
    /* 0: the base model's weights; i >= 1: the ctx's LoRA adapter
     * cfg.loras[i - 1] corrects every product of the slice's tokens
     * (folio/lora.h) */
    int32_t lora;
};

/* tokens: [n_tokens] laid out slice after slice. */
struct model_batch {
    int32_t n_tokens;
    const int32_t *tokens;
    int32_t n_slices;
    const struct model_slice *slices;
};

/* Which library runs the matrix products (model/matmul.h). */
enum model_matmul {
    MODEL_MATMUL_AUTO = 0,     /* model_matmul_resolve() picks */
    MODEL_MATMUL_OPENBLAS = 1, /* OpenBLAS sgemm for F32; portable kernels for 16-bit */
    MODEL_MATMUL_ONEDNN = 2,   /* oneDNN matmul (F32, BF16; others as OPENBLAS) */
};
/* "auto", "openblas", "onednn" ("?" for others). */
const char *model_matmul_name(enum model_matmul b);
/* Parses a name above; -EINVAL otherwise. */
int model_matmul_parse(const char *s, enum model_matmul *out);
/* True when built with oneDNN. */
bool model_matmul_onednn_built(void);
/* What a request resolves to on this machine: AUTO becomes ONEDNN when it
 * is built and the CPU has AVX-512 (where oneDNN's f32 and bf16 kernels
 * beat OpenBLAS), else the faster of the two on a short calibration (one
 * f32 product of a decode batch's shape each, ~10 ms, once per process;
 * it sets OpenBLAS to one thread), and OPENBLAS without oneDNN.  ONEDNN
 * without oneDNN built: -ENOTSUP. */
int model_matmul_resolve(enum model_matmul want, enum model_matmul *out);

/* Activation statistics for an importance matrix (`folio imatrix`): for
 * each input a layer's weight matrices multiply, per column, the sum of
 * its squares over the rows of the steps run, and how many rows those
 * were.  A layer has MODEL_ACT_PER_LAYER inputs (enum model_act); input
 * l * MODEL_ACT_PER_LAYER + a is layer l's a, and the last input
 * (n_layers * MODEL_ACT_PER_LAYER) is the output matrix's, over the rows
 * whose logits were asked for.  A ctx whose config names a
 * model_act_stats adds to it on every step (model/act_stats.c). */
enum model_act {
    MODEL_ACT_ATTN_IN = 0, /* attn_norm's output: Q, K, V multiply it */
    MODEL_ACT_ATTN_OUT,    /* attention's output: attn_output (wo) */
    MODEL_ACT_FFN_IN,      /* ffn_norm's output: gate and up */
    MODEL_ACT_FFN_HIDDEN,  /* SwiGLU's output: down */
    MODEL_ACT_PER_LAYER,
};
struct model_act_stats {
    int32_t n_inputs; /* n_layers * MODEL_ACT_PER_LAYER + 1 */
    int32_t *len;     /* [n_inputs] columns */
    size_t *off;      /* [n_inputs] first column's index in sq */
    double *sq;       /* the inputs' columns, one input after another */
    uint64_t *rows;   /* [n_inputs] */
};
/* Zeroed statistics laid out for m; -ENOMEM. */
int model_act_stats_new(const model_t *m, struct model_act_stats **out);
void model_act_stats_free(struct model_act_stats *s);

struct model_ctx_config {
    int32_t max_tokens; /* largest batch in tokens */
    int32_t max_slices; /* largest batch in slices */
    int32_t max_logits; /* most logit rows a batch may ask for (0 = max_slices;
                           at most max_tokens): all_logits slices need more */
    int32_t n_threads;  /* compute threads, the caller's included (0 = 1) */
    /* false (default): each sgemm is split by output columns over the
     * ctx's threads, OpenBLAS single-threaded; true: sgemm is called from
     * the caller thread with OpenBLAS at n_threads threads.  See
     * model/forward.c. */
    bool blas_threads;
    enum model_matmul matmul; /* backend of the products (AUTO: resolved) */
    /* Every sampled row's logits independent of the batch it ran in: F32 /
     * F16 / BF16 products through the batch-invariant kernels instead of
     * OpenBLAS / oneDNN (model/matmul.c), attention without batch-dependent
     * context splits (attention/attn_paged.c).  Quantized weights are
     * batch invariant either way. */
    bool batch_invariant;
    /* NULL, or statistics every step adds its products' inputs to (the
     * caller's; one ctx at a time) */
    struct model_act_stats *act_stats;
    /* LoRA adapters (folio/lora.h) slices may name (model_slice.lora),
     * borrowed: each must outlive the ctx and be loaded for its model */
    const struct model_lora *const *loras;
    int32_t n_loras;
};

int model_ctx_new(const model_t *m, const struct pager_kv_view *kv,
                  const struct model_ctx_config *cfg, model_ctx_t **out);
void model_ctx_free(model_ctx_t *ctx);
/* The backend the ctx's products run on (never AUTO). */
enum model_matmul model_ctx_matmul(const model_ctx_t *ctx);
/* Threads of the ctx's pool (cfg.n_threads). */
int model_ctx_threads(const model_ctx_t *ctx);
/* Runs fn(arg, ith, nth) once on every thread of the ctx's pool (ith 0 on
 * the caller; folio/pool.h), for the caller's own per-row work on a
 * step's output between steps (foliod samples its rows this way).  The
 * ctx's thread only, never inside model_forward. */
void model_ctx_run(model_ctx_t *ctx, pool_fn fn, void *arg);

/* Runs one step.  logits: [rows][n_vocab], in slice order: one row for a
 * sampling slice (its last token), one per token for an all_logits slice.
 * Never allocates.  -EINVAL for a batch beyond the ctx's limits. */
int model_forward(model_ctx_t *ctx, const struct model_batch *b, float *logits);
/* model_forward, and for every token of the batch's hidden slices, slice
 * after slice, its final hidden state: hidden [rows][dim] (embeddings).
 * A batch with hidden slices and a NULL hidden: -EINVAL. */
int model_forward_hidden(model_ctx_t *ctx, const struct model_batch *b, float *logits,
                         float *hidden);

/* Cumulative time a ctx spent, by kind of work, since model_ctx_new.
 * Read it from the thread that runs model_forward (or between steps). */
struct model_ctx_stats {
    uint64_t steps, tokens, sampled_rows;
    uint64_t ns_gemm;         /* matrix products (sgemm) */
    uint64_t ns_attn;         /* paged attention */
    uint64_t ns_other;        /* embedding, norms, RoPE + K/V writes, SwiGLU */
    uint64_t attn_ref_layers; /* layers whose attention ran the reference kernel */
    uint64_t pool_runs;       /* thread-pool dispatches (all kinds of work) */
    uint64_t ns_pool_wait;    /* of the times above: the caller waiting for the pool's
                                 other threads to finish their shares */
    uint64_t ns_pool_own;     /* the caller in its own shares of dispatches */
    uint64_t ns_pool_late;    /* the other threads: dispatch to starting, summed */
    uint64_t ns_pool_work;    /* the other threads: in their shares, summed */
};
void model_ctx_stats_get(const model_ctx_t *ctx, struct model_ctx_stats *st);

#ifdef __cplusplus
}
#endif
#endif /* FOLIO_MODEL_H */
