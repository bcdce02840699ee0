/*
 * model/gen.c — synthetic models written as GGUF v3 (`folio gen-model`).
 *
 * What it owns: nothing beyond the call.  model_gen_file builds the preset's
 * model in memory (model_preset, model__alloc, model__fill_random), then
 * model__write_gguf writes any struct model as a llama, qwen2 or qwen3 file.
 *
 * File contents, in order (llama.cpp key and tensor names):
 *
 *   general.architecture = "llama" | "qwen2" | "qwen3" (written ARCH below)
 *   general.name = "folio-synth-<preset>-s<seed>" ("-<arch>-" before the preset
 *   for qwen2 and qwen3)
 *   general.alignment (u32 32)         general.file_type (u32, llama.cpp's
 *                                      numbering: 0 F32, 1 F16, 7 Q8_0, 32 BF16)
 *   ARCH.vocab_size, ARCH.context_length, ARCH.embedding_length,
 *   ARCH.block_count, ARCH.feed_forward_length, ARCH.attention.head_count,
 *   ARCH.attention.head_count_kv, ARCH.rope.dimension_count (u32)
 *   ARCH.rope.freq_base, ARCH.attention.layer_norm_rms_epsilon (f32)
 *   qwen3: ARCH.attention.key_length, value_length (u32)
 *   when asked: ARCH.rope.scaling.type ("linear" | "yarn"), .factor (f32),
 *   .original_context_length (u32, yarn); ARCH.attention.sliding_window;
 *   llama3 scaling writes no keys, only the rope_freqs.weight tensor
 *   tokenizer.*: either the synthetic vocabulary —
 *     tokenizer.ggml.model = "llama", tokenizer.ggml.tokens (string[]),
 *     tokenizer.ggml.scores (f32[]), tokenizer.ggml.token_type (i32[]),
 *     tokenizer.ggml.bos_token_id = 1, eos_token_id = 2,
 *     unknown_token_id = 0 (u32), add_bos_token = true, add_eos_token = false
 *   — or every tokenizer.* key of the --vocab file, copied verbatim.
 *
 *   tensors: token_embd.weight [dim, vocab]; per layer N:
 *     blk.N.attn_norm.weight [dim] (F32), blk.N.attn_q.weight [dim, H*hd],
 *     blk.N.attn_k.weight, blk.N.attn_v.weight [dim, KV*hd],
 *     blk.N.attn_output.weight [H*hd, dim], blk.N.ffn_norm.weight [dim] (F32),
 *     blk.N.ffn_gate.weight, blk.N.ffn_up.weight [dim, ffn],
 *     blk.N.ffn_down.weight [ffn, dim];
 *     qwen2: blk.N.attn_{q,k,v}.bias (F32); qwen3: blk.N.attn_{q,k}_norm.weight
 *     [hd] (F32);
 *   output_norm.weight [dim] (F32), output.weight [dim, vocab] (qwen2 ties
 *   the output to token_embd: no output.weight); rope_freqs.weight [hd/2]
 *   (F32: llama3 scaling's per-dimension frequency divisors).
 *   A reranker (qwen3): cls.output.weight [dim, 2] (F32, rows "yes" and
 *   "no"), with the keys ARCH.pooling_type = 4 (rank),
 *   ARCH.classifier.output_labels = ["yes", "no"] and
 *   tokenizer.chat_template.rerank (MODEL_GEN_RERANK_TEMPLATE, unless the
 *   --vocab file has one), as llama.cpp's converter writes Qwen3 rerankers.
 *   ffn_up may take a type of its own (--up-dtype: a mixed-type file).
 *
 * Q/K/V and gate/up are the row blocks of the fused wqkv and w_gate_up, so
 * F32 tensors point straight into the model's storage; matrices of another
 * type (F16, BF16, Q8_0: every 2-D tensor, token_embd and output included;
 * norms stay F32) are converted into one scratch buffer first, by
 * quant_from_float (llama.cpp's rounding).  Nothing time- or
 * machine-dependent is written, so the same options give the same bytes.
 *
 * Threading: reentrant; touches no globals.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "folio/common.h"
#include "folio/gguf.h"
#include "gen.h"
#include "model_internal.h"
#include "quant.h"
#include "vocab_synth.h"

struct tensor_spec {
    char name[64];
    int32_t n_dims;
    int64_t ne[2];
    const float *data;
    enum gguf_tensor_type type; /* written type (F32: as it is) */
};

static int add_tensors(gguf_writer_t *w, const struct model *m, enum gguf_tensor_type wtype,
                       enum gguf_tensor_type up_type, const float *rope_freqs, uint8_t **scratch)
{
    const struct model_hparams *hp = &m->hp;
    int64_t dim = hp->dim, hd = hp->head_dim, H = hp->n_heads, KV = hp->n_kv_heads;
    int64_t ffn = hp->ffn_dim, V = hp->n_vocab;
    int64_t n_specs = 5 + 12 * (int64_t)hp->n_layers;
    if (m->tok_embd.type != GGUF_TENSOR_F32 || m->output.type != GGUF_TENSOR_F32)
        return -EINVAL; /* writes models built in memory (all F32) */
    struct tensor_spec *spec = folio_calloc((size_t)n_specs, sizeof(*spec));
    if (!spec)
        return -ENOMEM;
    int64_t k = 0;
#define SPEC(nm_, nd_, ne0_, ne1_, data_, mat_)                                                    \
    do {                                                                                           \
        struct tensor_spec *s_ = &spec[k++];                                                       \
        snprintf(s_->name, sizeof(s_->name), "%s", nm_);                                           \
        s_->n_dims = (nd_);                                                                        \
        s_->ne[0] = (ne0_);                                                                        \
        s_->ne[1] = (ne1_);                                                                        \
        s_->data = (data_);                                                                        \
        s_->type = (mat_) ? wtype : GGUF_TENSOR_F32;                                               \
    } while (0)
    char nm[64];
    SPEC("token_embd.weight", 2, dim, V, model__f32(&m->tok_embd), true);
    for (int32_t l = 0; l < hp->n_layers; l++) {
        const struct model_layer *L = &m->layers[l];
#define LNAME(sfx) (snprintf(nm, sizeof(nm), "blk.%d.%s.weight", l, sfx), nm)
        SPEC(LNAME("attn_norm"), 1, dim, 1, L->attn_norm, false);
        SPEC(LNAME("attn_q"), 2, dim, H * hd, model__f32(&L->wqkv), true);
        SPEC(LNAME("attn_k"), 2, dim, KV * hd, model__f32(&L->wqkv) + H * hd * dim, true);
        SPEC(LNAME("attn_v"), 2, dim, KV * hd, model__f32(&L->wqkv) + (H + KV) * hd * dim, true);
#define BNAME(sfx) (snprintf(nm, sizeof(nm), "blk.%d.%s.bias", l, sfx), nm)
        if (L->bqkv) {
            SPEC(BNAME("attn_q"), 1, H * hd, 1, L->bqkv, false);
            SPEC(BNAME("attn_k"), 1, KV * hd, 1, L->bqkv + H * hd, false);
            SPEC(BNAME("attn_v"), 1, KV * hd, 1, L->bqkv + (H + KV) * hd, false);
        }
#undef BNAME
        if (L->q_norm) {
            SPEC(LNAME("attn_q_norm"), 1, hd, 1, L->q_norm, false);
            SPEC(LNAME("attn_k_norm"), 1, hd, 1, L->k_norm, false);
        }
        SPEC(LNAME("attn_output"), 2, H * hd, dim, model__f32(&L->wo), true);
        SPEC(LNAME("ffn_norm"), 1, dim, 1, L->ffn_norm, false);
        SPEC(LNAME("ffn_gate"), 2, dim, ffn, model__f32(&L->w_gate_up), true);
        SPEC(LNAME("ffn_up"), 2, dim, ffn, model__f32(&L->w_gate_up) + ffn * dim, true);
        spec[k - 1].type = up_type;
        SPEC(LNAME("ffn_down"), 2, ffn, dim, model__f32(&L->w_down), true);
#undef LNAME
    }
    SPEC("output_norm.weight", 1, dim, 1, m->out_norm, false);
    if (rope_freqs)
        SPEC("rope_freqs.weight", 1, hd / 2, 1, rope_freqs, false);
    if (m->output.data != m->tok_embd.data) /* tied: no output.weight */
        SPEC("output.weight", 2, dim, V, model__f32(&m->output), true);
    if (m->n_cls)
        SPEC("cls.output.weight", 2, dim, m->n_cls, m->cls_out, false);
#undef SPEC
    n_specs = k;

    int rc = 0;
    size_t total = 0;
    for (int64_t i = 0; i < n_specs; i++)
        if (spec[i].type != GGUF_TENSOR_F32) {
            enum gguf_tensor_type t = spec[i].type;
            size_t nb = gguf_tensor_nbytes(t, spec[i].ne[0] * spec[i].ne[1]);
            if (!nb || spec[i].ne[0] % quant_traits_of(t)->block) {
                rc = -EINVAL;
                goto out;
            }
            total += nb;
        }
    if (total) {
        *scratch = folio_malloc(total);
        if (!*scratch) {
            rc = -ENOMEM;
            goto out;
        }
    }
    size_t at = 0;
    for (int64_t i = 0; i < n_specs && !rc; i++) {
        const struct tensor_spec *s = &spec[i];
        if (s->type != GGUF_TENSOR_F32) {
            int64_t n = s->ne[0] * s->ne[1];
            uint8_t *dst = *scratch + at;
            if ((rc = quant_from_float(s->type, s->data, dst, n)))
                break;
            at += gguf_tensor_nbytes(s->type, n);
            rc = gguf_w_tensor(w, s->name, s->type, s->n_dims, s->ne, dst);
        } else {
            rc = gguf_w_tensor(w, s->name, GGUF_TENSOR_F32, s->n_dims, s->ne, s->data);
        }
    }
out:
    folio_free(spec);
    return rc;
}

static int add_synth_vocab(gguf_writer_t *w, int32_t n_vocab)
{
    struct vocab_synth v;
    int rc = vocab_synth_build(n_vocab, &v);
    if (rc)
        return rc;
    if ((rc = gguf_w_str(w, "tokenizer.ggml.model", "llama")) ||
        (rc = gguf_w_arr_str(w, "tokenizer.ggml.tokens", v.tokens, (uint64_t)n_vocab)) ||
        (rc = gguf_w_arr_f32(w, "tokenizer.ggml.scores", v.scores, (uint64_t)n_vocab)) ||
        (rc = gguf_w_arr_i32(w, "tokenizer.ggml.token_type", v.types, (uint64_t)n_vocab)) ||
        (rc = gguf_w_u32(w, "tokenizer.ggml.bos_token_id", VOCAB_SYNTH_BOS_ID)) ||
        (rc = gguf_w_u32(w, "tokenizer.ggml.eos_token_id", VOCAB_SYNTH_EOS_ID)) ||
        (rc = gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", VOCAB_SYNTH_UNK_ID)) ||
        (rc = gguf_w_bool(w, "tokenizer.ggml.add_bos_token", true)) ||
        (rc = gguf_w_bool(w, "tokenizer.ggml.add_eos_token", false))) {
        vocab_synth_free(&v);
        return rc;
    }
    vocab_synth_free(&v);
    return rc;
}

/* llama.cpp's general.file_type (enum llama_ftype) of a file whose matrices
 * are all of type t; -1 for a type no single ftype names. */
int model__file_type(enum gguf_tensor_type t)
{
    switch (t) {
    case GGUF_TENSOR_F32:
        return 0;
    case GGUF_TENSOR_F16:
        return 1;
    case GGUF_TENSOR_Q4_0:
        return 2;
    case GGUF_TENSOR_Q4_1:
        return 3;
    case GGUF_TENSOR_Q8_0:
        return 7;
    case GGUF_TENSOR_Q5_0:
        return 8;
    case GGUF_TENSOR_Q5_1:
        return 9;
    case GGUF_TENSOR_Q6_K:
        return 18;
    case GGUF_TENSOR_BF16:
        return 32;
    default:
        return -1;
    }
}

int model__write_gguf(const struct model *m, const char *path, enum gguf_tensor_type wtype,
                      const gguf_file_t *vocab, char *err, size_t errlen)
{
    return model__write_gguf_up(m, path, wtype, wtype, vocab, err, errlen);
}

int model__write_gguf_up(const struct model *m, const char *path, enum gguf_tensor_type wtype,
                         enum gguf_tensor_type up_type, const gguf_file_t *vocab, char *err,
                         size_t errlen)
{
    const struct model_hparams *hp = &m->hp;
    gguf_writer_t *w = NULL;
    uint8_t *scratch = NULL;
    float *rope_freqs = NULL;
    if (model__file_type(wtype) < 0 || model__file_type(up_type) < 0) {
        if (err && errlen)
            snprintf(err, errlen, "%s: gen-model writes F32, F16, BF16 or Q8_0 matrices", path);
        return -EINVAL;
    }
    int rc = gguf_writer_new(&w);
    if (rc)
        goto oom;
    static const char *const arch_names[] = {"llama", "qwen2", "qwen3"};
    if (hp->arch < 0 || hp->arch > MODEL_ARCH_QWEN3) {
        rc = -EINVAL;
        goto oom;
    }
    const char *a = arch_names[hp->arch];
    char k[96];
#define K(sfx) (snprintf(k, sizeof(k), "%s.%s", a, sfx), k)
    if ((rc = gguf_w_str(w, "general.architecture", a)) ||
        (rc = gguf_w_str(w, "general.name", m->name)) ||
        (rc = gguf_w_u32(w, "general.alignment", 32)) ||
        (rc = gguf_w_u32(w, "general.file_type", (uint32_t)model__file_type(wtype))) ||
        (rc = gguf_w_u32(w, K("vocab_size"), (uint32_t)hp->n_vocab)) ||
        (rc = gguf_w_u32(w, K("context_length"), (uint32_t)hp->ctx_len)) ||
        (rc = gguf_w_u32(w, K("embedding_length"), (uint32_t)hp->dim)) ||
        (rc = gguf_w_u32(w, K("block_count"), (uint32_t)hp->n_layers)) ||
        (rc = gguf_w_u32(w, K("feed_forward_length"), (uint32_t)hp->ffn_dim)) ||
        (rc = gguf_w_u32(w, K("attention.head_count"), (uint32_t)hp->n_heads)) ||
        (rc = gguf_w_u32(w, K("attention.head_count_kv"), (uint32_t)hp->n_kv_heads)) ||
        (rc = gguf_w_u32(w, K("rope.dimension_count"), (uint32_t)hp->head_dim)) ||
        (rc = gguf_w_f32(w, K("rope.freq_base"), hp->rope_base)) ||
        (rc = gguf_w_f32(w, K("attention.layer_norm_rms_epsilon"), hp->norm_eps)))
        goto oom;
    if (hp->arch == MODEL_ARCH_QWEN3 &&
        ((rc = gguf_w_u32(w, K("attention.key_length"), (uint32_t)hp->head_dim)) ||
         (rc = gguf_w_u32(w, K("attention.value_length"), (uint32_t)hp->head_dim))))
        goto oom;
    /* llama3: no keys (llama.cpp refuses a type it does not know), the
     * divisors as rope_freqs.weight, as llama.cpp's converter writes them */
    if ((hp->rope_scaling == MODEL_ROPE_LINEAR || hp->rope_scaling == MODEL_ROPE_YARN) &&
        ((rc = gguf_w_str(w, K("rope.scaling.type"),
                          hp->rope_scaling == MODEL_ROPE_YARN ? "yarn" : "linear")) ||
         (rc = gguf_w_f32(w, K("rope.scaling.factor"), hp->rope_factor))))
        goto oom;
    if (hp->rope_scaling == MODEL_ROPE_YARN &&
        (rc =
             gguf_w_u32(w, K("rope.scaling.original_context_length"), (uint32_t)hp->rope_orig_ctx)))
        goto oom;
    if (hp->n_swa > 0 && (rc = gguf_w_u32(w, K("attention.sliding_window"), (uint32_t)hp->n_swa)))
        goto oom;
    static const char *const labels[] = {"yes", "no"};
    if (m->n_cls == 2 && ((rc = gguf_w_u32(w, K("pooling_type"), 4)) || /* llama.cpp's rank */
                          (rc = gguf_w_arr_str(w, K("classifier.output_labels"), labels, 2))))
        goto oom;
#undef K
    if (vocab) {
        for (int64_t i = 0; i < gguf_n_keys(vocab); i++)
            if (!strncmp(gguf_key_name(vocab, i), "tokenizer.", 10) &&
                (rc = gguf_w_copy_key(w, vocab, i)))
                goto oom;
    } else if ((rc = add_synth_vocab(w, hp->n_vocab))) {
        goto oom;
    }
    if (m->n_cls && !(vocab && gguf_find_key(vocab, "tokenizer.chat_template.rerank") >= 0) &&
        (rc = gguf_w_str(w, "tokenizer.chat_template.rerank", MODEL_GEN_RERANK_TEMPLATE)))
        goto oom;
    if (hp->rope_scaling == MODEL_ROPE_LLAMA3 || m->rope_freqs) {
        if (!(rope_freqs = folio_malloc(sizeof(float) * (size_t)(hp->head_dim / 2)))) {
            rc = -ENOMEM;
            goto oom;
        }
        for (int32_t i = 0; i < hp->head_dim / 2; i++)
            rope_freqs[i] = (float)model__rope_divisor(m, i);
    }
    if ((rc = add_tensors(w, m, wtype, up_type, rope_freqs, &scratch)))
        goto oom;
    rc = gguf_writer_write(w, path, err, errlen);
    goto out;
oom:
    if (err && errlen)
        snprintf(err, errlen, "%s: cannot build the GGUF contents: %s", path, strerror(-rc));
out:
    folio_free(scratch);
    folio_free(rope_freqs);
    gguf_writer_free(w);
    return rc;
}

int model__dtype_parse(const char *name, enum gguf_tensor_type *t)
{
    static const struct {
        const char *name;
        enum gguf_tensor_type t;
    } names[] = {{"f32", GGUF_TENSOR_F32},
                 {"f16", GGUF_TENSOR_F16},
                 {"bf16", GGUF_TENSOR_BF16},
                 {"q8_0", GGUF_TENSOR_Q8_0}};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(names); i++)
        if (!strcmp(name, names[i].name)) {
            *t = names[i].t;
            return 0;
        }
    return -EINVAL;
}

int model_gen_file(const struct model_gen_opts *o, const char *path, char *err, size_t errlen)
{
    struct model_hparams hp;
    struct model *m = NULL;
    gguf_file_t *vocab = NULL;
    float *cls = NULL; /* a reranker's head, [2][dim] */
    if (err && errlen)
        err[0] = 0;
    int rc = o->preset ? model_preset(o->preset, &hp) : -EINVAL;
    if (rc) {
        if (err && errlen)
            snprintf(err, errlen, "unknown preset '%s' (want tiny, small or medium)",
                     o->preset ? o->preset : "(null)");
        return -EINVAL;
    }
    if (o->vocab_path) {
        if ((rc = gguf_open(o->vocab_path, &vocab, err, errlen)))
            return rc;
        int64_t idx = gguf_find_key(vocab, "tokenizer.ggml.tokens");
        enum gguf_type et;
        uint64_t n;
        if (idx < 0 || gguf_arr_info(vocab, idx, &et, &n) || et != GGUF_TYPE_STRING || n < 1 ||
            n > (1u << 24)) {
            if (err && errlen)
                snprintf(err, errlen,
                         "%s: key 'tokenizer.ggml.tokens' is missing or not a usable array of "
                         "strings",
                         o->vocab_path);
            rc = -EINVAL;
            goto out;
        }
        hp.n_vocab = (int32_t)n;
    } else if ((o->n_vocab ? (hp.n_vocab = o->n_vocab) : hp.n_vocab) < VOCAB_SYNTH_MIN ||
               hp.n_vocab > VOCAB_SYNTH_MAX) {
        rc = -EINVAL;
        goto out;
    }
    if (!o->arch || !strcmp(o->arch, "llama")) {
        hp.arch = MODEL_ARCH_LLAMA;
    } else if (!strcmp(o->arch, "qwen2")) {
        hp.arch = MODEL_ARCH_QWEN2;
    } else if (!strcmp(o->arch, "qwen3")) {
        hp.arch = MODEL_ARCH_QWEN3;
    } else {
        if (err && errlen)
            snprintf(err, errlen, "unknown architecture '%s' (want llama, qwen2 or qwen3)",
                     o->arch);
        rc = -EINVAL;
        goto out;
    }
    hp.rope_neox = hp.arch != MODEL_ARCH_LLAMA;
    if (o->rope_scaling != MODEL_ROPE_NONE) {
        if ((o->rope_scaling != MODEL_ROPE_LINEAR && o->rope_scaling != MODEL_ROPE_YARN &&
             o->rope_scaling != MODEL_ROPE_LLAMA3) ||
            !(o->rope_factor > 0) || o->rope_orig_ctx < 0 || o->rope_low_freq < 0 ||
            o->rope_high_freq < 0) {
            if (err && errlen)
                snprintf(err, errlen, "bad RoPE scaling (type %d, factor %g)", o->rope_scaling,
                         (double)o->rope_factor);
            rc = -EINVAL;
            goto out;
        }
        hp.rope_scaling = o->rope_scaling;
        hp.rope_factor = o->rope_factor;
        if (hp.rope_scaling == MODEL_ROPE_YARN) {
            hp.rope_orig_ctx = o->rope_orig_ctx ? o->rope_orig_ctx : hp.ctx_len;
            hp.yarn_attn = 1.0f;
            hp.yarn_beta_fast = 32.0f;
            hp.yarn_beta_slow = 1.0f;
        }
        if (hp.rope_scaling == MODEL_ROPE_LLAMA3) {
            hp.rope_orig_ctx = o->rope_orig_ctx ? o->rope_orig_ctx : hp.ctx_len;
            hp.rope_low_freq = o->rope_low_freq > 0 ? o->rope_low_freq : 1.0f;
            hp.rope_high_freq = o->rope_high_freq > 0 ? o->rope_high_freq : 4.0f;
            if (!(hp.rope_high_freq > hp.rope_low_freq)) {
                if (err && errlen)
                    snprintf(err, errlen, "llama3 RoPE scaling: high %g <= low %g",
                             (double)hp.rope_high_freq, (double)hp.rope_low_freq);
                rc = -EINVAL;
                goto out;
            }
        }
    }
    if (o->sliding_window < 0) {
        rc = -EINVAL;
        goto out;
    }
    hp.n_swa = o->sliding_window < hp.ctx_len ? o->sliding_window : 0;
    if ((rc = model__alloc(&hp, &m))) {
        if (err && errlen)
            snprintf(err, errlen, "%s: cannot allocate the model: %s", path, strerror(-rc));
        goto out;
    }
    if (hp.arch == MODEL_ARCH_QWEN2)
        model__tie_output(m); /* as the small Qwen2.5 models are */
    if (hp.arch == MODEL_ARCH_LLAMA)
        snprintf(m->name, sizeof(m->name), "folio-synth-%s-s%" PRIu64, o->preset, o->seed);
    else
        snprintf(m->name, sizeof(m->name), "folio-synth-%s-%s-s%" PRIu64, o->arch, o->preset,
                 o->seed);
    model__fill_random(m, o->seed);
    if (o->reranker) {
        if (hp.arch != MODEL_ARCH_QWEN3) {
            if (err && errlen)
                snprintf(err, errlen,
                         "a reranker is written as a qwen3 file (the decoder architecture "
                         "llama.cpp reads a classification head for): add --arch qwen3");
            rc = -EINVAL;
            goto out;
        }
        if (!(cls = folio_malloc(2 * (size_t)hp.dim * sizeof(float)))) {
            rc = -ENOMEM;
            goto out;
        }
        /* rows "yes", "no" ~ U(-a, a), a = sqrt(3 / dim): unit variance
         * logits from a unit-RMS hidden state, so scores spread over (0, 1) */
        uint64_t st = o->seed ^ 0xC1A55E5ull;
        const double a = sqrt(3.0 / hp.dim);
        for (int64_t i = 0; i < 2 * (int64_t)hp.dim; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            cls[i] = (float)(a * (2.0 * (double)(st >> 11) * 0x1.0p-53 - 1.0));
        }
        m->cls_out = cls;
        m->n_cls = 2;
    }
    enum gguf_tensor_type wt = o->f16 ? GGUF_TENSOR_F16 : GGUF_TENSOR_F32;
    if (o->dtype && (rc = model__dtype_parse(o->dtype, &wt))) {
        if (err && errlen)
            snprintf(err, errlen, "unknown dtype '%s' (want f32, f16, bf16 or q8_0)", o->dtype);
        goto out;
    }
    enum gguf_tensor_type ut = wt;
    if (o->up_dtype && (rc = model__dtype_parse(o->up_dtype, &ut))) {
        if (err && errlen)
            snprintf(err, errlen, "unknown dtype '%s' (want f32, f16, bf16 or q8_0)", o->up_dtype);
        goto out;
    }
    rc = model__write_gguf_up(m, path, wt, ut, vocab, err, errlen);
out:
    model_free(m);
    folio_free(cls);
    gguf_close(vocab);
    return rc;
}
