/*
 * model/model.c — the model object: presets, allocation, the synthetic
 * weight generator, the embedded default model and the accessors.
 *
 * Owns: struct model (model_internal.h) for models built in memory.  A
 * model built here holds every tensor in one region (`storage`,
 * folio_region_alloc, on huge pages where the kernel offers them), laid
 * out tensor after tensor in the order of model_internal.h, each tensor
 * starting on a 64-byte boundary:
 *
 *   storage ─ tok_embd ─ [layer 0: attn_norm wqkv wo ffn_norm w_gate_up w_down]
 *           ─ ... ─ [layer L-1] ─ out_norm ─ output
 *
 * The synthetic generator (model__fill_random) must produce the same bytes
 * on every machine and compiler: it draws 64-bit integers from splitmix64
 * (one stream per tensor, keyed by seed and tensor index), turns them into
 * approximately normal integers (sum of four 24-bit uniforms, Irwin–Hall),
 * converts that integer to float (exact or IEEE round-to-nearest, both
 * deterministic) and multiplies once by a per-tensor scale.  A single
 * multiplication per value leaves no room for FMA contraction or libm
 * differences; the scales themselves come from sqrtf, which IEEE 754
 * requires to be correctly rounded.
 *
 * Scaling (keeps activations finite and logits informative):
 *   tok_embd            ~ N(0, 1)                  residual stream starts at rms 1
 *   wqkv, w_gate_up     ~ N(0, 1/dim)              outputs of a normed input ~ rms 1
 *   wo                  ~ N(0, 1/(n_heads*head_dim))
 *   w_down              ~ N(0, 1/ffn_dim)
 *   norms               1 + U(-0.1, 0.1)
 *   output              ~ N(0, 4/dim)              logits ~ N(0, 2²): peaked, rarely tied
 *   tok_embd when tied  ~ N(0, 4/dim)              (it is the output too)
 *   bqkv (qwen2)        ~ N(0, 0.5²);  q_norm, k_norm (qwen3) as norms
 *
 * Threading: a model is immutable after it is built; any number of
 * threads may read it.
 */
#include "model_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"
#include "folio/gguf.h"
#include "quant.h"

int model_preset(const char *name, struct model_hparams *hp)
{
    struct model_hparams h = {
        .n_vocab = 32000,
        .ctx_len = 2048,
        .norm_eps = 1e-5f,
        .rope_base = 10000.0f,
        .bos_id = 1,
        .eos_id = 2,
    };
    if (!name || !hp)
        return -EINVAL;
    if (!strcmp(name, "tiny")) {
        h.dim = 512, h.n_layers = 8, h.n_heads = 8, h.n_kv_heads = 2, h.ffn_dim = 1376;
    } else if (!strcmp(name, "small")) {
        h.dim = 768, h.n_layers = 12, h.n_heads = 12, h.n_kv_heads = 4, h.ffn_dim = 2048;
    } else if (!strcmp(name, "medium")) {
        h.dim = 1024, h.n_layers = 24, h.n_heads = 16, h.n_kv_heads = 4, h.ffn_dim = 2816;
    } else {
        return -EINVAL; /* unknown preset */
    }
    h.head_dim = h.dim / h.n_heads;
    *hp = h;
    return 0;
}

/* Bytes of n floats rounded up to 64. */
static size_t tensor_bytes(size_t n)
{
    return (n * sizeof(float) + 63) & ~(size_t)63;
}

static int hparams_valid(const struct model_hparams *hp)
{
    if (hp->n_vocab < 1 || hp->dim < 1 || hp->n_layers < 1 || hp->n_heads < 1 ||
        hp->n_kv_heads < 1 || hp->head_dim < 2 || hp->ffn_dim < 1 || hp->ctx_len < 1)
        return 0;
    if (hp->n_heads % hp->n_kv_heads || hp->head_dim % 2)
        return 0;
    if (hp->arch < MODEL_ARCH_LLAMA || hp->arch > MODEL_ARCH_QWEN3 || hp->n_swa < 0)
        return 0;
    if (!(hp->norm_eps > 0) || !(hp->rope_base > 0))
        return 0;
    return 1;
}

int model__alloc(const struct model_hparams *hp, struct model **out)
{
    *out = NULL;
    if (!hp || !hparams_valid(hp))
        return -EINVAL;
    const size_t dim = (size_t)hp->dim, hd = (size_t)hp->head_dim;
    const size_t n_q = (size_t)hp->n_heads * hd, n_kv = (size_t)hp->n_kv_heads * hd;
    const size_t vocab = (size_t)hp->n_vocab, ffn = (size_t)hp->ffn_dim;
    const size_t per_layer = tensor_bytes(dim) + tensor_bytes((n_q + 2 * n_kv) * dim) +
                             tensor_bytes(dim * n_q) + tensor_bytes(dim) +
                             tensor_bytes(2 * ffn * dim) + tensor_bytes(dim * ffn);
    /* qwen2's Q|K|V biases, qwen3's Q and K norms */
    const size_t extra = hp->arch == MODEL_ARCH_QWEN2   ? tensor_bytes(n_q + 2 * n_kv)
                         : hp->arch == MODEL_ARCH_QWEN3 ? 2 * tensor_bytes(hd)
                                                        : 0;
    const size_t total = 2 * tensor_bytes(vocab * dim) + tensor_bytes(dim) +
                         (per_layer + extra) * (size_t)hp->n_layers;

    struct model *m = folio_calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->layers = folio_calloc((size_t)hp->n_layers, sizeof(*m->layers));
    m->storage = folio_region_alloc(total, FOLIO_REGION_HUGE); /* zeroed */
    m->storage_bytes = total;
    if (!m->layers || !m->storage) {
        model_free(m);
        return -ENOMEM;
    }
    m->hp = *hp;
    snprintf(m->name, sizeof(m->name), "folio-synthetic");

    char *p = m->storage;
#define TAKE(n) ((const float *)(p += tensor_bytes(n), p - tensor_bytes(n)))
#define MAT(r, c)                                                                                  \
    ((struct matmul_mat){.type = GGUF_TENSOR_F32,                                                  \
                         .rows = (int32_t)(r),                                                     \
                         .cols = (int32_t)(c),                                                     \
                         .data = TAKE((r) * (c))})
    m->tok_embd = MAT(vocab, dim);
    for (int32_t l = 0; l < hp->n_layers; l++) {
        struct model_layer *L = &m->layers[l];
        L->attn_norm = TAKE(dim);
        L->wqkv = MAT(n_q + 2 * n_kv, dim);
        L->wo = MAT(dim, n_q);
        L->ffn_norm = TAKE(dim);
        L->w_gate_up = MAT(2 * ffn, dim);
        L->w_down = MAT(dim, ffn);
        if (hp->arch == MODEL_ARCH_QWEN2)
            L->bqkv = TAKE(n_q + 2 * n_kv);
        if (hp->arch == MODEL_ARCH_QWEN3) {
            L->q_norm = TAKE(hd);
            L->k_norm = TAKE(hd);
        }
    }
    m->out_norm = TAKE(dim);
    m->output = MAT(vocab, dim);
#undef MAT
#undef TAKE
    *out = m;
    return 0;
}

/* ---- deterministic generator ------------------------------------------ */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Stream for tensor number `which` of a model generated from seed. */
static uint64_t stream_seed(uint64_t seed, uint64_t which)
{
    uint64_t s = seed ^ (which * 0xD1B54A32D192ED03ull);
    return splitmix64(&s);
}

/* n approximately N(0, sigma²) values: (sum of four 24-bit uniforms - 2^25)
 * has variance 2^48/3, so one unit is sigma * sqrt(3) / 2^24. */
void model__fill_normal(float *w, size_t n, uint64_t seed, uint64_t which, float sigma)
{
    uint64_t st = stream_seed(seed, which);
    const float unit = sigma * (sqrtf(3.0f) / 16777216.0f);
    for (size_t i = 0; i < n; i++) {
        uint64_t a = splitmix64(&st), b = splitmix64(&st);
        int64_t s = (int64_t)(a & 0xFFFFFF) + (int64_t)((a >> 32) & 0xFFFFFF) +
                    (int64_t)(b & 0xFFFFFF) + (int64_t)((b >> 32) & 0xFFFFFF) - (1 << 25);
        w[i] = (float)s * unit;
    }
}

/* n values 1 + U(-0.1, 0.1): an exact 24-bit integer in [-2^23, 2^23)
 * scaled once, then 1 added (both single, correctly rounded operations). */
static void fill_norm(float *w, size_t n, uint64_t seed, uint64_t which)
{
    uint64_t st = stream_seed(seed, which);
    const float unit = 0.1f / 8388608.0f;
    for (size_t i = 0; i < n; i++) {
        int32_t v = (int32_t)(splitmix64(&st) >> 40) - (1 << 23);
        volatile float d = (float)v * unit; /* volatile: no fused multiply-add */
        w[i] = 1.0f + d;
    }
}

void model__fill_random(struct model *m, uint64_t seed)
{
    const struct model_hparams *hp = &m->hp;
    const size_t dim = (size_t)hp->dim, hd = (size_t)hp->head_dim;
    const size_t n_q = (size_t)hp->n_heads * hd, n_kv = (size_t)hp->n_kv_heads * hd;
    const size_t vocab = (size_t)hp->n_vocab, ffn = (size_t)hp->ffn_dim;
    uint64_t k = 0;
    /* tied: the embedding is also the output, scaled as the output is */
    const bool tied = m->output.data == m->tok_embd.data;
    model__fill_normal(model__f32(&m->tok_embd), vocab * dim, seed, k++,
                       tied ? 2.0f / sqrtf((float)dim) : 1.0f);
    for (int32_t l = 0; l < hp->n_layers; l++) {
        struct model_layer *L = &m->layers[l];
        fill_norm((float *)L->attn_norm, dim, seed, k++);
        model__fill_normal(model__f32(&L->wqkv), (n_q + 2 * n_kv) * dim, seed, k++,
                           1.0f / sqrtf((float)dim));
        model__fill_normal(model__f32(&L->wo), dim * n_q, seed, k++, 1.0f / sqrtf((float)n_q));
        fill_norm((float *)L->ffn_norm, dim, seed, k++);
        model__fill_normal(model__f32(&L->w_gate_up), 2 * ffn * dim, seed, k++,
                           1.0f / sqrtf((float)dim));
        model__fill_normal(model__f32(&L->w_down), dim * ffn, seed, k++, 1.0f / sqrtf((float)ffn));
    }
    fill_norm((float *)m->out_norm, dim, seed, k++);
    if (m->output.data != m->tok_embd.data)
        model__fill_normal(model__f32(&m->output), vocab * dim, seed, k++,
                           2.0f / sqrtf((float)dim));
    /* the qwen tensors draw from streams of their own, after every llama
     * one, so a llama model's bytes do not depend on them */
    const uint64_t k0 = 1ull << 32;
    for (int32_t l = 0; l < hp->n_layers; l++) {
        struct model_layer *L = &m->layers[l];
        if (L->bqkv) /* biases ~ N(0, 0.5²): visible next to outputs of rms ~1 */
            model__fill_normal((float *)L->bqkv, n_q + 2 * n_kv, seed, k0 + 3 * (uint64_t)l, 0.5f);
        if (L->q_norm) {
            fill_norm((float *)L->q_norm, hd, seed, k0 + 3 * (uint64_t)l + 1);
            fill_norm((float *)L->k_norm, hd, seed, k0 + 3 * (uint64_t)l + 2);
        }
    }
}

/* One matrix into its type's load-time layout (see model__repack). */
static int repack_mat(struct matmul_mat *mt)
{
    const enum gguf_tensor_type rt = quant_repack_type(mt->type);
    if (!mt->data || rt == mt->type || !quant_repack_pays(mt->type))
        return 0;
    int rc = quant_repack(mt->type, (void *)mt->data, mt->rows, mt->cols);
    if (rc == 0)
        mt->type = rt;
    return rc == -EINVAL ? 0 : rc; /* rows not in whole groups: as the file has it */
}

int model__repack(struct model *m)
{
    const char *env = getenv("FOLIO_REPACK");
    if (env && !strcmp(env, "0"))
        return 0;
    /* Q6_K too since its AVX2 tile stopped spilling: on the AVX2 machine
     * Q4_K_M end to end 1.25x with Q6_K_R8, one stream 1.02x (medians of
     * alternated rounds, BENCHMARKS.md); before, one stream ran at
     * 0.81-0.98x there and Q6_K kept the file's layout on AVX2 */
    const bool tied = m->output.data == m->tok_embd.data;
    int rc = repack_mat(&m->tok_embd);
    if (tied)
        m->output = m->tok_embd;
    else if (rc == 0)
        rc = repack_mat(&m->output);
    for (int32_t l = 0; l < m->hp.n_layers && rc == 0; l++) {
        struct model_layer *L = &m->layers[l];
        struct matmul_mat *w[] = {&L->wqkv,        &L->qkv_part[0], &L->qkv_part[1],
                                  &L->qkv_part[2], &L->wo,          &L->w_gate_up,
                                  &L->gu_part[0],  &L->gu_part[1],  &L->w_down};
        for (size_t i = 0; i < FOLIO_ARRAY_LEN(w) && rc == 0; i++)
            rc = repack_mat(w[i]);
    }
    return rc;
}

void model__tie_output(struct model *m)
{
    m->output = m->tok_embd;
}

/* ---- other weight types ------------------------------------------------ */

static uint16_t f32_bf16(float f) /* round to nearest even */
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* d (an F32 matrix of the copy's storage, f32-sized) becomes type t,
 * converted from s. */
static void retype_mat(struct matmul_mat *d, const struct matmul_mat *s, enum gguf_tensor_type t)
{
    const float *f = s->data;
    const size_t n = (size_t)s->rows * (size_t)s->cols;
    if (t == GGUF_TENSOR_Q8_0) {
        quant_rows(t, f, s->cols, s->cols, 0, s->rows, (void *)d->data);
    } else if (t == GGUF_TENSOR_F16 || t == GGUF_TENSOR_BF16) {
        uint16_t *h = (uint16_t *)d->data;
        for (size_t i = 0; i < n; i++)
            h[i] = t == GGUF_TENSOR_F16 ? folio_f32_to_f16(f[i]) : f32_bf16(f[i]);
    }
    d->type = t;
}

int model__retype(const struct model *src, enum gguf_tensor_type t, struct model **out)
{
    *out = NULL;
    if (t != GGUF_TENSOR_F32 && t != GGUF_TENSOR_F16 && t != GGUF_TENSOR_BF16 &&
        t != GGUF_TENSOR_Q8_0)
        return -EINVAL;
    if (t == GGUF_TENSOR_Q8_0 &&
        (src->hp.dim % 32 || src->hp.ffn_dim % 32 || (src->hp.n_heads * src->hp.head_dim) % 32))
        return -EINVAL;
    struct model *m;
    int rc = model__alloc(&src->hp, &m); /* f32-sized: room for every type */
    if (rc)
        return rc;
    memcpy(m->storage, src->storage, src->storage_bytes); /* norms, and F32 */
    memcpy(m->name, src->name, sizeof(m->name));
    retype_mat(&m->tok_embd, &src->tok_embd, t);
    retype_mat(&m->output, &src->output, t);
    for (int32_t l = 0; l < src->hp.n_layers; l++) {
        struct model_layer *L = &m->layers[l];
        const struct model_layer *S = &src->layers[l];
        retype_mat(&L->wqkv, &S->wqkv, t);
        retype_mat(&L->wo, &S->wo, t);
        retype_mat(&L->w_gate_up, &S->w_gate_up, t);
        retype_mat(&L->w_down, &S->w_down, t);
    }
    *out = m;
    return 0;
}

size_t model__weight_bytes_per_token(const struct model *m)
{
    size_t b = matmul_mat_row_bytes(&m->output) * (size_t)m->output.rows;
    for (int32_t l = 0; l < m->hp.n_layers; l++) {
        const struct model_layer *L = &m->layers[l];
        /* parts hold data only when their fused matrix does not */
        const struct matmul_mat *w[] = {&L->wqkv,        &L->wo,          &L->w_gate_up,
                                        &L->w_down,      &L->qkv_part[0], &L->qkv_part[1],
                                        &L->qkv_part[2], &L->gu_part[0],  &L->gu_part[1]};
        for (size_t i = 0; i < FOLIO_ARRAY_LEN(w); i++)
            if (w[i]->data)
                b += matmul_mat_row_bytes(w[i]) * (size_t)w[i]->rows;
    }
    return b;
}

double model__rope_divisor(const struct model *m, int32_t i)
{
    const struct model_hparams *hp = &m->hp;
    if (m->rope_freqs)
        return m->rope_freqs[i];
    if (hp->rope_scaling != MODEL_ROPE_LLAMA3)
        return 1.0;
    const double low = hp->rope_low_freq > 0 ? hp->rope_low_freq : 1.0;
    const double high = hp->rope_high_freq > 0 ? hp->rope_high_freq : 4.0;
    const double orig = hp->rope_orig_ctx > 0 ? hp->rope_orig_ctx : hp->ctx_len;
    const double factor = hp->rope_factor > 0 ? hp->rope_factor : 1.0;
    const double freq = pow((double)hp->rope_base, -2.0 * i / hp->head_dim);
    const double wavelen = 2.0 * M_PI / freq;
    if (wavelen < orig / high)
        return 1.0;
    if (wavelen > orig / low)
        return factor;
    const double s = (orig / wavelen - low) / (high - low);
    return 1.0 / ((1.0 - s) / factor + s);
}

/* ---- public ----------------------------------------------------------- */

int model_load_default(model_t **out, char *err, size_t errlen)
{
    struct model_hparams hp;
    struct model *m;
    *out = NULL;
    int rc = model_preset("tiny", &hp);
    if (rc == 0)
        rc = model__alloc(&hp, &m);
    if (rc < 0) {
        if (err && errlen)
            snprintf(err, errlen, "default model: cannot allocate weights (%s)",
                     rc == -ENOMEM ? "out of memory" : "bad preset");
        return rc;
    }
    model__fill_random(m, 0);
    snprintf(m->name, sizeof(m->name), "folio-tiny-default");
    *out = m;
    return 0;
}

void model_free(model_t *m)
{
    if (!m)
        return;
    folio_region_free(m->storage, m->storage_bytes);
    folio_free(m->layers);
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

int32_t model_cls_head(const model_t *m, const float **w, const float **b)
{
    *w = m->n_cls ? m->cls_out : NULL;
    *b = m->n_cls ? m->cls_out_b : NULL;
    return m->n_cls;
}

enum folio_dtype model_kv_dtype_for(enum gguf_tensor_type t)
{
    return t == GGUF_TENSOR_F32 ? FOLIO_F32 : t == GGUF_TENSOR_BF16 ? FOLIO_BF16 : FOLIO_F16;
}

enum folio_dtype model_kv_dtype_auto(const model_t *m)
{
    const struct model_layer *L = &m->layers[0];
    return model_kv_dtype_for(L->wqkv.data ? L->wqkv.type : L->qkv_part[0].type);
}
