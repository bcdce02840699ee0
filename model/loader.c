/*
 * model/loader.c — model_load_file(): a llama/qwen2/qwen3 GGUF file into a
 * struct model (model/model_internal.h).
 *
 * What it owns: nothing beyond the call.  The model it returns owns its
 * weights (one storage block, copied out of the mapping); the file is
 * closed before it returns (the tokenizer opens it for its own keys).
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
 * qwen2 adds blk.N.attn_{q,k,v}.bias (one f32 block, bqkv); qwen3 adds
 * blk.N.attn_q_norm.weight and attn_k_norm.weight [head_dim].
 *
 * Every matrix keeps its file type (F32, F16, BF16 or quantized): its bytes
 * are copied from the mapping into storage (Q/K/V and gate/up side by side
 * as one fused matrix; Q/K/V, or gate/up, of differing types stay separate
 * matrices, each in its type), and
 * the mapping's pages just copied are released (madvise DONTNEED), so the
 * resident size of a loaded model is about its file's tensor bytes.  A
 * tied output (no output.weight) shares token_embd's storage.  Q4_K
 * matrices are then rearranged in place into the product kernels' layout
 * (model__repack: same bytes, rows interleaved in eights).  Norm
 * vectors are converted to f32, and so is rope_freqs.weight ([head_dim / 2]
 * per-dimension RoPE frequency divisors, Llama-3.1-style scaling as
 * llama.cpp's converter writes it; used as llama.cpp does, whatever the
 * scaling keys say), and a reranker's classification head
 * (cls.output.weight [dim, n] and cls.output.bias [n]: n outputs, at most
 * MODEL_MAX_CLS; {arch}.classifier.output_labels, when present, must name
 * n).  Other tensors are ignored.  A rope.scaling.type other
 * than none, linear, yarn or llama3 is refused rather than run with
 * silently wrong positions.
 *
 * Architectures (general.architecture): llama, qwen2, qwen3; the keys
 * below are prefixed with it ("qwen2.context_length").  context_length,
 * embedding_length, block_count, feed_forward_length, attention.head_count
 * and attention.layer_norm_rms_epsilon are required;
 * attention.head_count_kv defaults to head_count, rope.freq_base to 10000,
 * attention.key_length (= value_length) to embedding_length / head_count;
 * rope.dimension_count, when present, must equal the head dimension.
 * RoPE pairs are adjacent for llama, halves (NeoX) for qwen2/qwen3, as in
 * llama.cpp.  rope.scaling.{type,factor,original_context_length,
 * attn_factor,yarn_beta_fast,yarn_beta_slow} (or the older
 * rope.scale_linear) set the scaling; attention.sliding_window, when
 * present and below the context, limits every layer's attention to that
 * many positions.  n_vocab is the length of tokenizer.ggml.tokens, else
 * token_embd's ne[1].
 *
 * Threading: model_load_file may run in any thread; it touches no globals.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "folio/common.h"
#include "folio/gguf.h"
#include "model_internal.h"

#define MAX_DIM (1 << 20)

struct ld {
    const char *path;
    gguf_file_t *f;
    char *err;
    size_t errlen;
    char arch[16]; /* general.architecture: the prefix of the hparam keys */
};

/* "<arch>.<suffix>" into a buffer of 96 bytes. */
#define ARCH_KEY(ld, buf, suffix)                                                                  \
    (snprintf((buf), sizeof(buf), "%s.%s", (ld)->arch, (suffix)), (buf))

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

/* Gives the mapping's pages under [p, p + n) back (they were copied into
 * storage): only whole pages inside the range, so nothing else is touched.
 * A read-only file mapping refaults them from the file if read again. */
static void release_pages(const void *p, size_t n)
{
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + pg - 1) & ~(pg - 1), z = ((uintptr_t)p + n) & ~(pg - 1);
    if (z > a)
        (void)madvise((void *)a, z - a, MADV_DONTNEED);
}

/* Places a tensor of shape ne[0..n_dims) converted to f32 at storage +
 * *off (pass 1), or only counts its bytes (pass 0). */
static int place_f32(struct ld *ld, const char *name, int32_t n_dims, const int64_t *ne, char *base,
                     size_t *off, const float **dst)
{
    struct gguf_tensor_info ti;
    int64_t n = 1;
    for (int32_t d = 0; d < n_dims; d++)
        n *= ne[d];
    int rc = find_tensor(ld, name, n_dims, ne, &ti);
    if (rc)
        return rc;
    if (base) {
        float *d = (float *)(base + *off);
        if (gguf_tensor_to_f32(ti.type, ti.data, d, n))
            return fail(ld, -EINVAL, "tensor '%s': cannot convert type %s", name,
                        gguf_tensor_type_name(ti.type));
        *dst = d;
    }
    *off += ((size_t)n * sizeof(float) + 63) & ~(size_t)63;
    return 0;
}

/* A norm vector of n elements (place_f32). */
static int place_vec(struct ld *ld, const char *name, int64_t n, char *base, size_t *off,
                     const float **dst)
{
    const int64_t ne[1] = {n};
    return place_f32(ld, name, 1, ne, base, off, dst);
}

/* A reranker's classification head, when the file has cls.output.weight
 * ([dim, n]: n outputs, 1 .. MODEL_MAX_CLS; {arch}.classifier.output_labels,
 * when present, names as many) and optionally cls.output.bias [n]. */
static int place_cls(struct ld *ld, struct model *m, char *base, size_t *off)
{
    int64_t idx = gguf_find_tensor(ld->f, "cls.output.weight");
    if (idx < 0)
        return 0;
    struct gguf_tensor_info ti;
    gguf_tensor_get(ld->f, idx, &ti);
    const int64_t n = ti.n_dims == 2 ? ti.ne[1] : 0;
    if (n < 1 || n > MODEL_MAX_CLS)
        return fail(ld, -EINVAL,
                    "tensor 'cls.output.weight' has %" PRId64
                    " outputs; a reranker's head has 1 to %d",
                    n, MODEL_MAX_CLS);
    char k[96];
    int64_t li = gguf_find_key(ld->f, ARCH_KEY(ld, k, "classifier.output_labels"));
    enum gguf_type et;
    uint64_t nl;
    if (li >= 0 &&
        (gguf_arr_info(ld->f, li, &et, &nl) || et != GGUF_TYPE_STRING || nl != (uint64_t)n))
        return fail(ld, -EINVAL,
                    "key '%s' must be an array of %" PRId64
                    " strings (one per output of cls.output.weight)",
                    k, n);
    const int64_t ne[2] = {m->hp.dim, n};
    int rc = place_f32(ld, "cls.output.weight", 2, ne, base, off, &m->cls_out);
    if (!rc && gguf_find_tensor(ld->f, "cls.output.bias") >= 0)
        rc = place_vec(ld, "cls.output.bias", n, base, off, &m->cls_out_b);
    m->n_cls = rc ? 0 : (int32_t)n;
    return rc;
}

/* Places the vectors names[0..n) (lengths lens[i], converted to f32) one
 * after another as one block at storage + *off (pass 1), or only counts
 * its bytes (base NULL). */
static int place_vecs(struct ld *ld, int n, char names[][96], const int64_t *lens, char *base,
                      size_t *off, const float **dst)
{
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        struct gguf_tensor_info ti;
        const int64_t ne[1] = {lens[i]};
        int rc = find_tensor(ld, names[i], 1, ne, &ti);
        if (rc)
            return rc;
        if (base && gguf_tensor_to_f32(ti.type, ti.data, (float *)(base + *off) + total, lens[i]))
            return fail(ld, -EINVAL, "tensor '%s': cannot convert type %s", names[i],
                        gguf_tensor_type_name(ti.type));
        total += lens[i];
    }
    if (base)
        *dst = (const float *)(base + *off);
    *off += ((size_t)total * sizeof(float) + 63) & ~(size_t)63;
    return 0;
}

/* Places the matrix made of the row blocks names[0..n) (each [rows[i]][cols]
 * in the file) at storage + *off, in the parts' common type, or only counts
 * its bytes (base NULL).  When the parts differ in type: with `parts`, each
 * is placed as a matrix of its own (parts[i], in its type; mt->data stays
 * NULL); without, the fused matrix is widened to F32. */
static int place_mat(struct ld *ld, int n, char names[][96], const int64_t *rows, int64_t cols,
                     char *base, size_t *off, struct matmul_mat *mt, struct matmul_mat *parts)
{
    struct gguf_tensor_info ti[4];
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        const int64_t ne[2] = {cols, rows[i]};
        int rc = find_tensor(ld, names[i], 2, ne, &ti[i]);
        if (rc)
            return rc;
        if (gguf_tensor_nbytes(ti[i].type, cols) == 0)
            return fail(ld, -EINVAL, "tensor '%s': unsupported type %s", names[i],
                        gguf_tensor_type_name(ti[i].type));
        total += rows[i];
    }
    enum gguf_tensor_type t = ti[0].type;
    bool mixed = false;
    for (int i = 1; i < n; i++)
        mixed |= ti[i].type != t;
    if (mixed && parts) { /* each part in its own type, multiplied on its own */
        for (int i = 0; i < n; i++) {
            const size_t nb = gguf_tensor_nbytes(ti[i].type, cols) * (size_t)rows[i];
            if (base) {
                memcpy(base + *off, ti[i].data, ti[i].nbytes);
                release_pages(ti[i].data, ti[i].nbytes);
                parts[i] = (struct matmul_mat){.type = ti[i].type,
                                               .rows = (int32_t)rows[i],
                                               .cols = (int32_t)cols,
                                               .data = base + *off};
                *mt = (struct matmul_mat){.type = t, .rows = (int32_t)total, .cols = (int32_t)cols};
            }
            *off += (nb + 63) & ~(size_t)63;
        }
        return 0;
    }
    if (mixed)
        t = GGUF_TENSOR_F32; /* widen the fused matrix */
    const size_t rb = gguf_tensor_nbytes(t, cols);
    if (base) {
        char *d = base + *off;
        for (int i = 0; i < n; i++) {
            if (ti[i].type == t)
                memcpy(d, ti[i].data, ti[i].nbytes);
            else if (gguf_tensor_to_f32(ti[i].type, ti[i].data, (float *)d, rows[i] * cols))
                return fail(ld, -EINVAL, "tensor '%s': cannot convert type %s", names[i],
                            gguf_tensor_type_name(ti[i].type));
            release_pages(ti[i].data, ti[i].nbytes);
            d += (size_t)rows[i] * rb;
        }
        *mt = (struct matmul_mat){
            .type = t, .rows = (int32_t)total, .cols = (int32_t)cols, .data = base + *off};
    }
    *off += ((size_t)total * rb + 63) & ~(size_t)63;
    return 0;
}

/* An optional string key: *out NULL when absent; -EINVAL when not a string. */
static int get_str(struct ld *ld, const char *key, const char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    int64_t idx = gguf_find_key(ld->f, key);
    if (idx < 0)
        return 0;
    if (gguf_get_str(ld->f, idx, out, len))
        return fail(ld, -EINVAL, "key '%s' is not a string", key);
    return 0;
}

static bool str_is(const char *s, size_t len, const char *want)
{
    return s && len == strlen(want) && !memcmp(s, want, len);
}

/* {arch}.rope.scaling.*: none, linear (factor), yarn (factor,
 * original_context_length, attn_factor, yarn_beta_fast / yarn_beta_slow) or
 * llama3 (factor, original_context_length, low_freq_factor,
 * high_freq_factor); anything else is refused by name. */
static int read_rope_scaling(struct ld *ld, struct model_hparams *hp)
{
    char k[96];
    const char *st;
    size_t sl;
    int rc = get_str(ld, ARCH_KEY(ld, k, "rope.scaling.type"), &st, &sl);
    if (rc)
        return rc;
    float factor = 0;
    if (!st || str_is(st, sl, "none")) {
        /* older files: rope.scale_linear alone means linear scaling */
        if (gguf_find_key(ld->f, ARCH_KEY(ld, k, "rope.scale_linear")) < 0)
            return 0;
        if ((rc = get_float(ld, k, -1, &factor)))
            return rc;
        if (factor == 1.0f)
            return 0;
        hp->rope_scaling = MODEL_ROPE_LINEAR;
        hp->rope_factor = factor;
        return 0;
    }
    if (str_is(st, sl, "linear"))
        hp->rope_scaling = MODEL_ROPE_LINEAR;
    else if (str_is(st, sl, "yarn"))
        hp->rope_scaling = MODEL_ROPE_YARN;
    else if (str_is(st, sl, "llama3"))
        hp->rope_scaling = MODEL_ROPE_LLAMA3;
    else
        return fail(ld, -EINVAL,
                    "key '%s' is '%.*s': RoPE scaling types are none, linear, yarn, llama3", k,
                    (int)FOLIO_MIN(sl, 64), st);
    if ((rc = get_float(ld, ARCH_KEY(ld, k, "rope.scaling.factor"), -1, &hp->rope_factor)))
        return rc;
    if (hp->rope_scaling == MODEL_ROPE_LLAMA3) {
        if ((rc = get_dim(ld, ARCH_KEY(ld, k, "rope.scaling.original_context_length"), hp->ctx_len,
                          &hp->rope_orig_ctx)) ||
            (rc = get_float(ld, ARCH_KEY(ld, k, "rope.scaling.low_freq_factor"), 1.0,
                            &hp->rope_low_freq)) ||
            (rc = get_float(ld, ARCH_KEY(ld, k, "rope.scaling.high_freq_factor"), 4.0,
                            &hp->rope_high_freq)))
            return rc;
        if (!(hp->rope_high_freq > hp->rope_low_freq))
            return fail(ld, -EINVAL,
                        "llama3 RoPE scaling: high_freq_factor %g <= low_freq_factor %g",
                        (double)hp->rope_high_freq, (double)hp->rope_low_freq);
    }
    if (hp->rope_scaling == MODEL_ROPE_YARN) {
        if ((rc = get_dim(ld, ARCH_KEY(ld, k, "rope.scaling.original_context_length"), hp->ctx_len,
                          &hp->rope_orig_ctx)) ||
            (rc =
                 get_float(ld, ARCH_KEY(ld, k, "rope.scaling.attn_factor"), 1.0, &hp->yarn_attn)) ||
            (rc = get_float(ld, ARCH_KEY(ld, k, "rope.scaling.yarn_beta_fast"), 32.0,
                            &hp->yarn_beta_fast)) ||
            (rc = get_float(ld, ARCH_KEY(ld, k, "rope.scaling.yarn_beta_slow"), 1.0,
                            &hp->yarn_beta_slow)))
            return rc;
    }
    return 0;
}

static int read_hparams(struct ld *ld, struct model_hparams *hp)
{
    gguf_file_t *f = ld->f;
    int rc;
    const char *arch;
    size_t alen;
    char k[96];
    if ((rc = get_str(ld, "general.architecture", &arch, &alen)))
        return rc;
    if (!arch)
        return fail(ld, -EINVAL, "missing required key 'general.architecture'");
    memset(hp, 0, sizeof(*hp));
    if (str_is(arch, alen, "llama"))
        hp->arch = MODEL_ARCH_LLAMA;
    else if (str_is(arch, alen, "qwen2"))
        hp->arch = MODEL_ARCH_QWEN2;
    else if (str_is(arch, alen, "qwen3"))
        hp->arch = MODEL_ARCH_QWEN3;
    else
        return fail(ld, -EINVAL,
                    "key 'general.architecture' is '%.*s': supported are llama, qwen2, qwen3",
                    (int)FOLIO_MIN(alen, 64), arch);
    memcpy(ld->arch, arch, alen);
    ld->arch[alen] = 0;
    hp->rope_neox = hp->arch != MODEL_ARCH_LLAMA;

    if ((rc = get_dim(ld, ARCH_KEY(ld, k, "context_length"), -1, &hp->ctx_len)) ||
        (rc = get_dim(ld, ARCH_KEY(ld, k, "embedding_length"), -1, &hp->dim)) ||
        (rc = get_dim(ld, ARCH_KEY(ld, k, "block_count"), -1, &hp->n_layers)) ||
        (rc = get_dim(ld, ARCH_KEY(ld, k, "feed_forward_length"), -1, &hp->ffn_dim)) ||
        (rc = get_dim(ld, ARCH_KEY(ld, k, "attention.head_count"), -1, &hp->n_heads)) ||
        (rc = get_dim(ld, ARCH_KEY(ld, k, "attention.head_count_kv"), hp->n_heads,
                      &hp->n_kv_heads)) ||
        (rc = get_float(ld, ARCH_KEY(ld, k, "rope.freq_base"), 10000.0, &hp->rope_base)) ||
        (rc =
             get_float(ld, ARCH_KEY(ld, k, "attention.layer_norm_rms_epsilon"), -1, &hp->norm_eps)))
        return rc;
    if (hp->n_heads % hp->n_kv_heads)
        return fail(ld, -EINVAL,
                    "key '%s.attention.head_count' = %d is not a multiple of "
                    "'%s.attention.head_count_kv' = %d",
                    ld->arch, hp->n_heads, ld->arch, hp->n_kv_heads);
    /* head dimension: attention.key_length (qwen3's heads are wider than
     * embedding_length / head_count), else the quotient */
    if (hp->dim % hp->n_heads && gguf_find_key(f, ARCH_KEY(ld, k, "attention.key_length")) < 0)
        return fail(ld, -EINVAL,
                    "key '%s.embedding_length' = %d is not a multiple of "
                    "'%s.attention.head_count' = %d",
                    ld->arch, hp->dim, ld->arch, hp->n_heads);
    const int64_t def_hd = hp->dim % hp->n_heads ? -1 : hp->dim / hp->n_heads;
    int32_t v_len;
    if ((rc = get_dim(ld, ARCH_KEY(ld, k, "attention.key_length"), def_hd, &hp->head_dim)) ||
        (rc = get_dim(ld, ARCH_KEY(ld, k, "attention.value_length"), hp->head_dim, &v_len)))
        return rc;
    if (v_len != hp->head_dim)
        return fail(ld, -EINVAL,
                    "key '%s.attention.value_length' = %d differs from the key length %d", ld->arch,
                    v_len, hp->head_dim);
    if (hp->head_dim % 2)
        return fail(ld, -EINVAL, "head dimension %d is odd (RoPE needs pairs)", hp->head_dim);
    int32_t rope_dims;
    if ((rc = get_dim(ld, ARCH_KEY(ld, k, "rope.dimension_count"), hp->head_dim, &rope_dims)))
        return rc;
    if (rope_dims != hp->head_dim)
        return fail(ld, -EINVAL,
                    "key '%s' = %d differs from the head dimension %d "
                    "(partial RoPE is not supported)",
                    k, rope_dims, hp->head_dim);
    if ((rc = read_rope_scaling(ld, hp)))
        return rc;
    /* a window the file declares is honoured, on every layer */
    if (gguf_find_key(f, ARCH_KEY(ld, k, "attention.sliding_window")) >= 0) {
        int64_t w;
        if (gguf_get_i64(f, gguf_find_key(f, k), &w) || w < 0 || w > INT32_MAX)
            return fail(ld, -EINVAL, "key '%s' is not a window size", k);
        hp->n_swa = w >= hp->ctx_len ? 0 : (int32_t)w;
    }

    /* Vocabulary size: the tokenizer's token list, else the embedding. */
    int64_t n_vocab = -1;
    int64_t idx = gguf_find_key(f, "tokenizer.ggml.tokens");
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
                    "key '%s.block_count' = %d, but the file's %" PRId64
                    " tensors hold at most %" PRId64 " layers",
                    ld->arch, hp->n_layers, n_tensors,
                    n_tensors < fixed ? 0 : (n_tensors - fixed) / per_layer);
    char k[96];
    int64_t idx = gguf_find_key(ld->f, ARCH_KEY(ld, k, "vocab_size"));
    if (idx >= 0) {
        int64_t v;
        if (gguf_get_i64(ld->f, idx, &v) || v != hp->n_vocab)
            return fail(ld, -EINVAL, "key '%s' disagrees with the vocabulary of %d tokens", k,
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

/* Walks every tensor in model_internal.h's order: base NULL counts the
 * storage bytes into *off; else places each tensor into base. */
static int walk_weights(struct ld *ld, struct model *m, char *base, size_t *off)
{
    const struct model_hparams *hp = &m->hp;
    int64_t dim = hp->dim, hd = hp->head_dim, H = hp->n_heads, KV = hp->n_kv_heads;
    int64_t ffn = hp->ffn_dim, V = hp->n_vocab;
    char nm[4][96];
    int rc;

    snprintf(nm[0], sizeof(nm[0]), "token_embd.weight");
    if ((rc = place_mat(ld, 1, nm, &V, dim, base, off, &m->tok_embd, NULL)))
        return rc;
    for (int32_t l = 0; l < hp->n_layers; l++) {
        struct model_layer *L = &m->layers[l];
        const int64_t r_qkv[3] = {H * hd, KV * hd, KV * hd}, r_gu[2] = {ffn, ffn};
#define NM(i, sfx) snprintf(nm[i], sizeof(nm[i]), "blk.%d.%s.weight", l, sfx)
        NM(0, "attn_norm");
        if ((rc = place_vec(ld, nm[0], dim, base, off, &L->attn_norm)))
            return rc;
        NM(0, "attn_q"), NM(1, "attn_k"), NM(2, "attn_v");
        if ((rc = place_mat(ld, 3, nm, r_qkv, dim, base, off, &L->wqkv, L->qkv_part)))
            return rc;
        if (hp->arch == MODEL_ARCH_QWEN2) { /* Q|K|V biases, one block */
#define NB(i, sfx) snprintf(nm[i], sizeof(nm[i]), "blk.%d.%s.bias", l, sfx)
            NB(0, "attn_q"), NB(1, "attn_k"), NB(2, "attn_v");
#undef NB
            if ((rc = place_vecs(ld, 3, nm, r_qkv, base, off, &L->bqkv)))
                return rc;
        }
        if (hp->arch == MODEL_ARCH_QWEN3) {
            NM(0, "attn_q_norm");
            if ((rc = place_vec(ld, nm[0], hd, base, off, &L->q_norm)))
                return rc;
            NM(0, "attn_k_norm");
            if ((rc = place_vec(ld, nm[0], hd, base, off, &L->k_norm)))
                return rc;
        }
        NM(0, "attn_output");
        if ((rc = place_mat(ld, 1, nm, &dim, H * hd, base, off, &L->wo, NULL)))
            return rc;
        NM(0, "ffn_norm");
        if ((rc = place_vec(ld, nm[0], dim, base, off, &L->ffn_norm)))
            return rc;
        NM(0, "ffn_gate"), NM(1, "ffn_up");
        if ((rc = place_mat(ld, 2, nm, r_gu, dim, base, off, &L->w_gate_up, L->gu_part)))
            return rc;
        NM(0, "ffn_down");
        if ((rc = place_mat(ld, 1, nm, &dim, ffn, base, off, &L->w_down, NULL)))
            return rc;
#undef NM
    }
    if ((rc = place_vec(ld, "output_norm.weight", dim, base, off, &m->out_norm)))
        return rc;
    /* per-dimension RoPE frequency divisors (Llama 3.1-style scaling) */
    if (gguf_find_tensor(ld->f, "rope_freqs.weight") >= 0 &&
        (rc = place_vec(ld, "rope_freqs.weight", hd / 2, base, off, &m->rope_freqs)))
        return rc;
    if ((rc = place_cls(ld, m, base, off)))
        return rc;
    if (gguf_find_tensor(ld->f, "output.weight") >= 0) {
        snprintf(nm[0], sizeof(nm[0]), "output.weight");
        return place_mat(ld, 1, nm, &V, dim, base, off, &m->output, NULL);
    }
    m->output = m->tok_embd; /* tied embeddings: one copy serves both */
    return 0;
}

/* Sizes the storage, allocates it and places every weight. */
static int load_weights(struct ld *ld, struct model *m)
{
    size_t bytes = 0;
    int rc = walk_weights(ld, m, NULL, &bytes);
    if (rc)
        return rc;
    m->storage = folio_region_alloc(bytes, FOLIO_REGION_HUGE);
    if (!m->storage)
        return fail(ld, -ENOMEM, "cannot allocate the model's weights (%zu bytes)", bytes);
    m->storage_bytes = bytes;
    size_t off = 0;
    return walk_weights(ld, m, m->storage, &off);
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
    rc = -ENOMEM;
    if (!(m = folio_calloc(1, sizeof(*m))) ||
        !(m->layers = folio_calloc((size_t)hp.n_layers, sizeof(*m->layers)))) {
        fail(&ld, rc, "out of memory");
        goto fail;
    }
    m->hp = hp;
    set_name(&ld, m);
    if ((rc = load_weights(&ld, m)))
        goto fail;
    if ((rc = model__repack(m))) { /* kernels' layouts, in place (model/quant.h) */
        fail(&ld, rc, "out of memory");
        goto fail;
    }
    gguf_close(ld.f);
    *out = m;
    return 0;
fail:
    model_free(m);
    gguf_close(ld.f);
    return rc;
}
