/*
 * model/loader.c — model_load_file(): a llama-architecture GGUF file into a
 * struct model (model/model_internal.h).
 *
 * What it owns: nothing beyond the call.  The model it returns owns its f32
 * weights (allocated by model__alloc) and keeps the gguf_file_t open in
 * m->gguf for the tokenizer's tokenizer.* keys.
 *
 * Mapping from llama.cpp tensor names (ggml ne[0] is the row length, so a
 * tensor with ne = [n_in, n_out] is stored [n_out][n_in], our layout):
 *
 *   token_embd.weight        [dim, vocab]        -> tok_embd
 *   blk.N.attn_norm.weight   [dim]               -> layers[N].attn_norm
 *   blk.N.attn_q.weight      [dim, H*hd]         -> wqkv rows [0, H*hd)
 *   blk.N.attn_k.weight      [dim, KV*hd]        -> wqkv rows [H*hd, (H+KV)*hd)
 *   blk.N.attn_v.weight      [dim, KV*hd]        -> wqkv rows [(H+KV)*hd, (H+2KV)*hd)
 *   blk.N.attn_output.weight [H*hd, dim]         -> wo
 *   blk.N.ffn_norm.weight    [dim]               -> ffn_norm
 *   blk.N.ffn_gate.weight    [dim, ffn]          -> w_gate_up rows [0, ffn)
 *   blk.N.ffn_up.weight      [dim, ffn]          -> w_gate_up rows [ffn, 2 ffn)
 *   blk.N.ffn_down.weight    [ffn, dim]          -> w_down
 *   output_norm.weight       [dim]               -> out_norm
 *   output.weight            [dim, vocab]        -> output (absent: copy of
 *                                                   token_embd, tied)
 *
 * Every tensor may be of any type the GGUF reader accepts (model/quant.c's
 * table: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K); it
 * is converted straight from the mapping into its place.  Other tensors are ignored, except
 * rope_freqs.weight: per-dimension RoPE frequency factors (Llama-3.1-style
 * scaling) are not implemented, and a file that has them, or a
 * llama.rope.scaling.type other than "none", is refused rather than run
 * with silently wrong positions.
 *
 * Hyperparameters (llama.* keys): context_length, embedding_length,
 * block_count, feed_forward_length, attention.head_count and
 * attention.layer_norm_rms_epsilon are required; attention.head_count_kv
 * defaults to head_count, rope.freq_base to 10000; rope.dimension_count,
 * when present, must equal head_dim.  n_vocab is the length of
 * tokenizer.ggml.tokens, else token_embd's ne[1].
 *
 * Threading: model_load_file may run in any thread; it touches no globals.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "folio/common.h"
#include "folio/gguf.h"
#include "model_internal.h"

#define MAX_DIM (1 << 20)

struct ld {
    const char *path;
    gguf_file_t *f;
    char *err;
    size_t errlen;
};

static int fail(struct ld *ld, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct ld *ld, int rc, const char *fmt, ...)
{
    if (ld->err && ld->errlen) {
        int n = snprintf(ld->err, ld->errlen, "%s: ", ld->path);
        if (n >= 0 && (size_t)n < ld->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(ld->err + n, ld->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return rc;
}

/* An integer hparam in [1, MAX_DIM]; def < 0 means required. */
static int get_dim(struct ld *ld, const char *key, int64_t def, int32_t *out)
{
    int64_t idx = gguf_find_key(ld->f, key);
    if (idx < 0) {
        if (def < 0)
            return fail(ld, -EINVAL, "missing required key '%s'", key);
        *out = (int32_t)def;
        return 0;
    }
    int64_t v;
    if (gguf_get_i64(ld->f, idx, &v))
        return fail(ld, -EINVAL, "key '%s' is not an integer", key);
    if (v < 1 || v > MAX_DIM)
        return fail(ld, -EINVAL, "key '%s' = %" PRId64 " is out of range [1, %d]", key, v, MAX_DIM);
    *out = (int32_t)v;
    return 0;
}

static int get_float(struct ld *ld, const char *key, double def, float *out)
{
    int64_t idx = gguf_find_key(ld->f, key);
    if (idx < 0) {
        if (def < 0)
            return fail(ld, -EINVAL, "missing required key '%s'", key);
        *out = (float)def;
        return 0;
    }
    float v;
    if (gguf_get_f32(ld->f, idx, &v))
        return fail(ld, -EINVAL, "key '%s' is not a float", key);
    if (!(v > 0.0f) || v > 1e30f)
        return fail(ld, -EINVAL, "key '%s' = %g is not a positive finite number", key, v);
    *out = v;
    return 0;
}

/* Optional token id: -1 when absent; must lie in [0, n_vocab). */
static int get_token_id(struct ld *ld, const char *key, int32_t n_vocab, int32_t *out)
{
    *out = -1;
    int64_t idx = gguf_find_key(ld->f, key);
    if (idx < 0)
        return 0;
    int64_t v;
    if (gguf_get_i64(ld->f, idx, &v))
        return fail(ld, -EINVAL, "key '%s' is not an integer", key);
    if (v < 0 || v >= n_vocab)
        return fail(ld, -EINVAL, "key '%s' = %" PRId64 " is not a token id (vocabulary of %d)", key,
                    v, n_vocab);
    *out = (int32_t)v;
    return 0;
}

/* Finds a tensor and checks its shape is exactly ne[0..n_dims) (trailing
 * dims of 1 are accepted either way). */
static int find_tensor(struct ld *ld, const char *name, int32_t n_dims, const int64_t *ne,
                       struct gguf_tensor_info *ti)
{
    int64_t idx = gguf_find_tensor(ld->f, name);
    if (idx < 0)
        return fail(ld, -EINVAL, "missing tensor '%s'", name);
    gguf_tensor_get(ld->f, idx, ti);
    bool ok = true;
    for (int d = 0; d < 4; d++)
        if (ti->ne[d] != (d < n_dims ? ne[d] : 1))
            ok = false;
    if (!ok) {
        char want[96], got[96];
        int a = 0, b = 0;
        for (int d = 0; d < n_dims; d++)
            a += snprintf(want + a, sizeof(want) - (size_t)a, "%s%" PRId64, d ? ", " : "", ne[d]);
        for (int d = 0; d < ti->n_dims; d++)
            b += snprintf(got + b, sizeof(got) - (size_t)b, "%s%" PRId64, d ? ", " : "", ti->ne[d]);
        return fail(ld, -EINVAL, "tensor '%s' has shape [%s], expected [%s]", name, got, want);
    }
    return 0;
}

/* Converts tensor `name` of shape ne into dst (n elements). */
static int load_tensor(struct ld *ld, const char *name, int32_t n_dims, const int64_t *ne,
                       float *dst)
{
    struct gguf_tensor_info ti;
    int rc = find_tensor(ld, name, n_dims, ne, &ti);
    if (rc)
        return rc;
    int64_t n = 1;
    for (int d = 0; d < n_dims; d++)
        n *= ne[d];
    if (gguf_tensor_to_f32(ti.type, ti.data, dst, n))
        return fail(ld, -EINVAL, "tensor '%s': cannot convert type %s", name,
                    gguf_tensor_type_name(ti.type));
    return 0;
}

static int read_hparams(struct ld *ld, struct model_hparams *hp)
{
    gguf_file_t *f = ld->f;
    int rc;
    int64_t idx = gguf_find_key(f, "general.architecture");
    const char *arch;
    size_t alen;
    if (idx < 0)
        return fail(ld, -EINVAL, "missing required key 'general.architecture'");
    if (gguf_get_str(f, idx, &arch, &alen))
        return fail(ld, -EINVAL, "key 'general.architecture' is not a string");
    if (alen != 5 || memcmp(arch, "llama", 5))
        return fail(ld, -EINVAL,
                    "key 'general.architecture' is '%.*s': only 'llama' models are supported",
                    (int)FOLIO_MIN(alen, 64), arch);

    memset(hp, 0, sizeof(*hp));
    if ((rc = get_dim(ld, "llama.context_length", -1, &hp->ctx_len)) ||
        (rc = get_dim(ld, "llama.embedding_length", -1, &hp->dim)) ||
        (rc = get_dim(ld, "llama.block_count", -1, &hp->n_layers)) ||
        (rc = get_dim(ld, "llama.feed_forward_length", -1, &hp->ffn_dim)) ||
        (rc = get_dim(ld, "llama.attention.head_count", -1, &hp->n_heads)) ||
        (rc = get_dim(ld, "llama.attention.head_count_kv", hp->n_heads, &hp->n_kv_heads)) ||
        (rc = get_float(ld, "llama.rope.freq_base", 10000.0, &hp->rope_base)) ||
        (rc = get_float(ld, "llama.attention.layer_norm_rms_epsilon", -1, &hp->norm_eps)))
        return rc;
    if (hp->dim % hp->n_heads)
        return fail(ld, -EINVAL,
                    "key 'llama.embedding_length' = %d is not a multiple of "
                    "'llama.attention.head_count' = %d",
                    hp->dim, hp->n_heads);
    if (hp->n_heads % hp->n_kv_heads)
        return fail(ld, -EINVAL,
                    "key 'llama.attention.head_count' = %d is not a multiple of "
                    "'llama.attention.head_count_kv' = %d",
                    hp->n_heads, hp->n_kv_heads);
    hp->head_dim = hp->dim / hp->n_heads;
    if (hp->head_dim % 2)
        return fail(ld, -EINVAL, "head dimension %d is odd (RoPE needs pairs)", hp->head_dim);
    int32_t rope_dims;
    if ((rc = get_dim(ld, "llama.rope.dimension_count", hp->head_dim, &rope_dims)))
        return rc;
    if (rope_dims != hp->head_dim)
        return fail(ld, -EINVAL,
                    "key 'llama.rope.dimension_count' = %d differs from the head dimension %d "
                    "(partial RoPE is not supported)",
                    rope_dims, hp->head_dim);

    /* RoPE scaling is not implemented: refuse rather than run it wrong. */
    idx = gguf_find_key(f, "llama.rope.scaling.type");
    if (idx >= 0) {
        const char *st;
        size_t sl;
        if (gguf_get_str(f, idx, &st, &sl) || !(sl == 4 && !memcmp(st, "none", 4)))
            return fail(ld, -EINVAL,
                        "key 'llama.rope.scaling.type': RoPE scaling is not supported");
    }
    if (gguf_find_tensor(f, "rope_freqs.weight") >= 0)
        return fail(ld, -EINVAL,
                    "tensor 'rope_freqs.weight': RoPE frequency factors are not supported");

    /* Vocabulary size: the tokenizer's token list, else the embedding. */
    int64_t n_vocab = -1;
    idx = gguf_find_key(f, "tokenizer.ggml.tokens");
    if (idx >= 0) {
        enum gguf_type et;
        uint64_t n;
        if (gguf_arr_info(f, idx, &et, &n) || et != GGUF_TYPE_STRING)
            return fail(ld, -EINVAL, "key 'tokenizer.ggml.tokens' is not an array of strings");
        n_vocab = (int64_t)n;
    } else {
        int64_t ti = gguf_find_tensor(f, "token_embd.weight");
        if (ti < 0)
            return fail(ld, -EINVAL, "missing tensor 'token_embd.weight'");
        struct gguf_tensor_info info;
        gguf_tensor_get(f, ti, &info);
        n_vocab = info.ne[1];
    }
    if (n_vocab < 1 || n_vocab > (1 << 24))
        return fail(ld, -EINVAL, "vocabulary size %" PRId64 " is out of range", n_vocab);
    hp->n_vocab = (int32_t)n_vocab;
    if ((rc = get_token_id(ld, "tokenizer.ggml.bos_token_id", hp->n_vocab, &hp->bos_id)) ||
        (rc = get_token_id(ld, "tokenizer.ggml.eos_token_id", hp->n_vocab, &hp->eos_id)))
        return rc;
    return 0;
}

/*
 * The pre-allocation check: every count in the llama.* keys is held
 * against the tensors the file really has before a byte is allocated for
 * the weights.  The claimed layers must fit in the tensor count (a layer
 * is at least 9 tensors), llama.vocab_size (when present) must agree with
 * the vocabulary, and every tensor the weights will be read from must be
 * present with the shape the keys imply.  The reader (gguf_open) has
 * already checked that each tensor's bytes lie inside the file, so the
 * weights allocated afterwards are proportional to the file's size (a
 * fixed bytes-per-element ratio per tensor type, plus one more copy of the
 * embedding when the output is tied).  Allocates nothing; a few lookups
 * per tensor.
 */
static int check_before_alloc(struct ld *ld, const struct model_hparams *hp)
{
    const int64_t n_tensors = gguf_n_tensors(ld->f);
    const int64_t per_layer = 9, fixed = 2; /* token_embd, output_norm */
    if (n_tensors < fixed || hp->n_layers > (n_tensors - fixed) / per_layer)
        return fail(ld, -EINVAL,
                    "key 'llama.block_count' = %d, but the file's %" PRId64
                    " tensors hold at most %" PRId64 " layers",
                    hp->n_layers, n_tensors,
                    n_tensors < fixed ? 0 : (n_tensors - fixed) / per_layer);
    int64_t idx = gguf_find_key(ld->f, "llama.vocab_size");
    if (idx >= 0) {
        int64_t v;
        if (gguf_get_i64(ld->f, idx, &v) || v != hp->n_vocab)
            return fail(ld, -EINVAL,
                        "key 'llama.vocab_size' disagrees with the vocabulary of %d tokens",
                        hp->n_vocab);
    }

    const int64_t dim = hp->dim, hd = hp->head_dim, H = hp->n_heads, KV = hp->n_kv_heads;
    const int64_t ffn = hp->ffn_dim, V = hp->n_vocab;
    const int64_t ne_embd[2] = {dim, V}, ne_norm[1] = {dim};
    struct gguf_tensor_info ti;
    int rc;
    if ((rc = find_tensor(ld, "token_embd.weight", 2, ne_embd, &ti)) ||
        (rc = find_tensor(ld, "output_norm.weight", 1, ne_norm, &ti)))
        return rc;
    if (gguf_find_tensor(ld->f, "output.weight") >= 0 &&
        (rc = find_tensor(ld, "output.weight", 2, ne_embd, &ti)))
        return rc;
    const int64_t ne_q[2] = {dim, H * hd}, ne_kv[2] = {dim, KV * hd}, ne_o[2] = {H * hd, dim};
    const int64_t ne_gu[2] = {dim, ffn}, ne_down[2] = {ffn, dim};
    const struct {
        const char *suffix;
        int32_t n_dims;
        const int64_t *ne;
    } spec[] = {
        {"attn_norm", 1, ne_norm}, {"attn_q", 2, ne_q},      {"attn_k", 2, ne_kv},
        {"attn_v", 2, ne_kv},      {"attn_output", 2, ne_o}, {"ffn_norm", 1, ne_norm},
        {"ffn_gate", 2, ne_gu},    {"ffn_up", 2, ne_gu},     {"ffn_down", 2, ne_down},
    };
    char name[96];
    for (int32_t l = 0; l < hp->n_layers; l++)
        for (size_t i = 0; i < FOLIO_ARRAY_LEN(spec); i++) {
            snprintf(name, sizeof(name), "blk.%d.%s.weight", l, spec[i].suffix);
            if ((rc = find_tensor(ld, name, spec[i].n_dims, spec[i].ne, &ti)))
                return rc;
        }
    return 0;
}

static void set_name(struct ld *ld, struct model *m)
{
    int64_t idx = gguf_find_key(ld->f, "general.name");
    const char *s;
    size_t len;
    if (idx >= 0 && !gguf_get_str(ld->f, idx, &s, &len) && len > 0) {
        len = FOLIO_MIN(len, sizeof(m->name) - 1);
        memcpy(m->name, s, len);
        m->name[len] = 0;
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)m->name[i] < 0x20)
                m->name[i] = ' ';
        return;
    }
    /* Default: the file's base name without ".gguf". */
    const char *base = strrchr(ld->path, '/');
    base = base ? base + 1 : ld->path;
    len = strlen(base);
    if (len > 5 && !strcmp(base + len - 5, ".gguf"))
        len -= 5;
    len = FOLIO_MIN(len, sizeof(m->name) - 1);
    memcpy(m->name, base, len);
    m->name[len] = 0;
}

static int load_weights(struct ld *ld, struct model *m)
{
    const struct model_hparams *hp = &m->hp;
    int64_t dim = hp->dim, hd = hp->head_dim, H = hp->n_heads, KV = hp->n_kv_heads;
    int64_t ffn = hp->ffn_dim, V = hp->n_vocab;
    char name[96];
    int rc;

    const int64_t ne_embd[2] = {dim, V};
    if ((rc = load_tensor(ld, "token_embd.weight", 2, ne_embd, (float *)m->tok_embd)))
        return rc;
    for (int32_t l = 0; l < hp->n_layers; l++) {
        const struct model_layer *L = &m->layers[l];
        float *qkv = (float *)L->wqkv, *gu = (float *)L->w_gate_up;
        const int64_t ne_norm[1] = {dim};
        const int64_t ne_q[2] = {dim, H * hd}, ne_kv[2] = {dim, KV * hd};
        const int64_t ne_o[2] = {H * hd, dim}, ne_gu[2] = {dim, ffn}, ne_down[2] = {ffn, dim};
        struct {
            const char *suffix;
            int32_t n_dims;
            const int64_t *ne;
            float *dst;
        } spec[] = {
            {"attn_norm", 1, ne_norm, (float *)L->attn_norm},
            {"attn_q", 2, ne_q, qkv},
            {"attn_k", 2, ne_kv, qkv + H * hd * dim},
            {"attn_v", 2, ne_kv, qkv + (H + KV) * hd * dim},
            {"attn_output", 2, ne_o, (float *)L->wo},
            {"ffn_norm", 1, ne_norm, (float *)L->ffn_norm},
            {"ffn_gate", 2, ne_gu, gu},
            {"ffn_up", 2, ne_gu, gu + ffn * dim},
            {"ffn_down", 2, ne_down, (float *)L->w_down},
        };
        for (size_t i = 0; i < FOLIO_ARRAY_LEN(spec); i++) {
            snprintf(name, sizeof(name), "blk.%d.%s.weight", l, spec[i].suffix);
            if ((rc = load_tensor(ld, name, spec[i].n_dims, spec[i].ne, spec[i].dst)))
                return rc;
        }
    }
    const int64_t ne_norm[1] = {dim};
    if ((rc = load_tensor(ld, "output_norm.weight", 1, ne_norm, (float *)m->out_norm)))
        return rc;
    if (gguf_find_tensor(ld->f, "output.weight") >= 0)
        return load_tensor(ld, "output.weight", 2, ne_embd, (float *)m->output);
    if (m->output != m->tok_embd) /* tied embeddings */
        memcpy((float *)m->output, m->tok_embd, (size_t)(V * dim) * sizeof(float));
    return 0;
}

int model_load_file(const char *path, model_t **out, char *err, size_t errlen)
{
    struct ld ld = {.path = path, .err = err, .errlen = errlen};
    struct model_hparams hp;
    struct model *m = NULL;
    *out = NULL;
    if (err && errlen)
        err[0] = 0;
    int rc = gguf_open(path, &ld.f, err, errlen);
    if (rc)
        return rc;
    if ((rc = read_hparams(&ld, &hp)) || (rc = check_before_alloc(&ld, &hp)))
        goto fail;
    if ((rc = model__alloc(&hp, &m))) {
        fail(&ld, rc, "cannot allocate the model's weights: %s", strerror(-rc));
        goto fail;
    }
    set_name(&ld, m);
    if ((rc = load_weights(&ld, m)))
        goto fail;
    m->gguf = ld.f;
    *out = m;
    return 0;
fail:
    model_free(m);
    gguf_close(ld.f);
    return rc;
}
