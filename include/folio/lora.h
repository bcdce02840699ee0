/*
 * folio/lora.h — LoRA adapters: low-rank corrections to a model's
 * matrices, loaded from GGUF adapter files and applied at run time, so one
 * loaded model serves its base weights and any number of adapters in the
 * same batch (each sequence names its own; model_slice.lora).
 *
 * The file format is llama.cpp's (convert_lora_to_gguf.py writes it, and
 * llama.cpp's --lora loads it):
 *   general.type = "adapter", general.architecture = the base model's,
 *   adapter.type = "lora", adapter.lora.alpha (f32; 0 or absent: no
 *   alpha scaling);
 *   for each adapted matrix W [out][in] (GGUF ne = [in, out]) named
 *   "blk.N.T.weight": "blk.N.T.weight.lora_a" of ne [in, r] (A: r rows of
 *   in) and "blk.N.T.weight.lora_b" of ne [r, out] (B: out rows of r), in
 *   any type foliod reads (F32, F16, BF16, Q8_0, ...).
 * The product W·x becomes W·x + s·B·(A·x), s = scale · alpha / r (scale
 * alone when alpha is 0), scale being the caller's multiplier (llama.cpp's
 * --lora-scaled).  T is one of attn_q, attn_k, attn_v, attn_output,
 * ffn_gate, ffn_up, ffn_down.  Norm vectors ("*_norm.weight") in an
 * adapter are skipped, as llama.cpp skips them.  Adapters of token_embd or
 * output, and activated LoRA (adapter.alora.invocation_tokens), are
 * refused by name.
 *
 * An adapter is immutable once loaded and may serve several ctxs; it must
 * outlive every ctx that names it (model_ctx_config.loras).  Its A and B
 * are kept in f32 (whatever the file's type): a rank-16 adapter of every
 * matrix of `small` is 10 MB (2.6M values).
 */
#ifndef FOLIO_LORA_H
#define FOLIO_LORA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "folio/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The matrices an adapter may correct, per layer. */
enum model_lora_target {
    MODEL_LORA_Q = 0,
    MODEL_LORA_K,
    MODEL_LORA_V,
    MODEL_LORA_O,
    MODEL_LORA_GATE,
    MODEL_LORA_UP,
    MODEL_LORA_DOWN,
    MODEL_LORA_PER_LAYER,
};
typedef struct model_lora model_lora_t;

/* The largest rank a loaded adapter may have. */
#define MODEL_LORA_MAX_RANK 1024

/* Loads the adapter at path for model m (its architecture and shapes must
 * be m's) with multiplier scale.  On failure returns -errno (-EINVAL for a
 * file that is not such an adapter, or not one of m's) and writes a
 * message naming the file and the problem into err. */
int model_lora_load(const model_t *m, const char *path, float scale, model_lora_t **out, char *err,
                    size_t errlen);
void model_lora_free(model_lora_t *a);

struct model_lora_info {
    int32_t n_mats; /* adapted matrices */
    int32_t rank;   /* the largest rank among them */
    float alpha;    /* adapter.lora.alpha (0: none) */
    float scale;    /* the load's multiplier */
    size_t bytes;   /* of A and B in memory (f32) */
};
void model_lora_info(const model_lora_t *a, struct model_lora_info *out);

/* `folio gen-lora`: a synthetic adapter for base model m, deterministic
 * from the options, written as a GGUF adapter file llama.cpp loads.
 * Every targeted matrix of every layer gets A ~ N(0, 1/in) and B ~
 * N(0, gain² / r) (not zero: the adapter changes the output from the
 * first token), stored in dtype (Q8_0 needs in and r multiples of 32),
 * with adapter.lora.alpha = alpha. */
struct model_lora_gen_opts {
    uint64_t seed;
    int32_t rank;      /* 1 .. MODEL_LORA_MAX_RANK */
    float alpha;       /* 0: none (s = the user's scale) */
    float gain;        /* B's spread (0: 0.5) */
    uint32_t targets;  /* bit per enum model_lora_target; 0: all */
    const char *dtype; /* "f32" (NULL), "f16", "bf16", "q8_0" */
};
int model_lora_gen_file(const model_t *m, const struct model_lora_gen_opts *o, const char *path,
                        char *err, size_t errlen);
/* Parses "q,k,v,o,gate,up,down" (any subset; also "all", and the tensor
 * names attn_q ...) into target bits; -EINVAL for another word. */
int model_lora_targets_parse(const char *s, uint32_t *bits);

#ifdef __cplusplus
}
#endif
#endif /* FOLIO_LORA_H */
