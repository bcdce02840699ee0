/*
 * model/lora.c — LoRA adapters (include/folio/lora.h): the GGUF adapter
 * loader, the synthetic adapter writer (`folio gen-lora`), and the per-row
 * correction the forward pass applies (model__lora_rows).
 *
 * Layout in memory: one allocation holds, for every adapted matrix (layer
 * l, target t), A [r][in] then Bt [r][out] in f32, B transposed at load so
 * that the second product is r row updates (axpy over out) instead of out
 * dot products of length r.  mats[l * MODEL_LORA_PER_LAYER + t] points into
 * it (rank 0: the adapter leaves that matrix alone).  s folds the caller's
 * scale with alpha / r.
 *
 * Built with -ffp-contract=off (model/meson.build): the compiler may not
 * fuse a multiply and an add in one copy of the row kernel and not in
 * another, so a row's bits do not depend on how many rows share a call.
 *
 * Invariants: every adapted matrix has 1 <= r <= MODEL_LORA_MAX_RANK,
 * A's row length the base matrix's input width and Bt's its output width
 * (checked against the model at load); the adapter is immutable after
 * model_lora_load returns.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"
#include "folio/gguf.h"
#include "folio/lora.h"
#include "gen.h"
#include "model_internal.h"

static const char *const target_names[MODEL_LORA_PER_LAYER] = {
    "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
static const char *const target_short[MODEL_LORA_PER_LAYER] = {"q",    "k",  "v",   "o",
                                                               "gate", "up", "down"};

struct lora_mat {
    int32_t r, in, out;
    float s;
    const float *A;  /* [r][in] */
    const float *Bt; /* [r][out] */
};

struct model_lora {
    int32_t n_layers;
    struct lora_mat *mats; /* [n_layers][MODEL_LORA_PER_LAYER] */
    float *data;
    size_t bytes;
    struct model_lora_info info;
};

/* The input and output widths of target t's matrix in a model of hp. */
static void target_dims(const struct model_hparams *hp, int t, int32_t *in, int32_t *out)
{
    const int32_t D = hp->dim, F = hp->ffn_dim;
    const int32_t nq = hp->n_heads * hp->head_dim, nkv = hp->n_kv_heads * hp->head_dim;
    static const int kind[MODEL_LORA_PER_LAYER] = {0, 1, 1, 2, 3, 3, 4};
    switch (kind[t]) {
    case 0:
        *in = D, *out = nq;
        break;
    case 1:
        *in = D, *out = nkv;
        break;
    case 2:
        *in = nq, *out = D;
        break;
    case 3:
        *in = D, *out = F;
        break;
    default:
        *in = F, *out = D;
        break;
    }
}

static const char *arch_name(int32_t arch)
{
    static const char *const names[] = {"llama", "qwen2", "qwen3"};
    return arch >= 0 && arch < 3 ? names[arch] : "?";
}

static int fail(char *err, size_t errlen, const char *path, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        int n = snprintf(err, errlen, "%s: ", path);
        if (n >= 0 && (size_t)n < errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return rc;
}

/* A string key's value equals want (false when absent or not a string). */
static bool key_is(const gguf_file_t *f, const char *key, const char *want, char *got, size_t cap)
{
    int64_t k = gguf_find_key(f, key);
    const char *s;
    size_t len;
    got[0] = 0;
    if (k < 0 || gguf_get_str(f, k, &s, &len))
        return false;
    snprintf(got, cap, "%.*s", (int)(len < 64 ? len : 64), s);
    return strlen(want) == len && !memcmp(s, want, len);
}

/* "blk.N.T.weight.lora_a|b": layer N, target T, which 0 (a) / 1 (b).
 * 1 parsed, 0 a norm vector (skipped), -1 something else. */
static int parse_name(const char *name, int32_t n_layers, int32_t *layer, int *target, int *which)
{
    size_t n = strlen(name);
    if (n > 12 && !strcmp(name + n - 12, "_norm.weight"))
        return 0;
    if (n < 8 || strncmp(name, "blk.", 4))
        return -1;
    if (!strcmp(name + n - 7, ".lora_a"))
        *which = 0;
    else if (!strcmp(name + n - 7, ".lora_b"))
        *which = 1;
    else
        return -1;
    char *end;
    long l = strtol(name + 4, &end, 10);
    if (end == name + 4 || *end != '.' || l < 0 || l >= n_layers)
        return -1;
    const char *t = end + 1;
    size_t tlen = (size_t)(name + n - 7 - t);
    for (int i = 0; i < MODEL_LORA_PER_LAYER; i++) {
        size_t k = strlen(target_names[i]);
        if (tlen == k + 7 && !strncmp(t, target_names[i], k) && !strncmp(t + k, ".weight", 7)) {
            *layer = (int32_t)l;
            *target = i;
            return 1;
        }
    }
    return -1;
}

int model_lora_load(const model_t *m, const char *path, float scale, model_lora_t **out, char *err,
                    size_t errlen)
{
    *out = NULL;
    if (!m || !path)
        return -EINVAL;
    if (!(scale == scale) || scale < -1e6f || scale > 1e6f)
        return fail(err, errlen, path, -EINVAL, "scale %g is not a finite number", (double)scale);
    gguf_file_t *f;
    int rc = gguf_open(path, &f, err, errlen);
    if (rc)
        return rc;
    const struct model_hparams *hp = &m->hp;
    const int32_t NL = hp->n_layers, NT = MODEL_LORA_PER_LAYER;
    int64_t *idx = NULL;
    struct model_lora *a = NULL;
    float *tmp = NULL;
    char got[72];
    if (!key_is(f, "general.type", "adapter", got, sizeof(got))) {
        rc = fail(err, errlen, path, -EINVAL,
                  "not an adapter (general.type is '%s', expected 'adapter')", got);
        goto out;
    }
    if (!key_is(f, "adapter.type", "lora", got, sizeof(got))) {
        rc = fail(err, errlen, path, -EINVAL,
                  "not a LoRA adapter (adapter.type is '%s', expected 'lora')", got);
        goto out;
    }
    if (!key_is(f, "general.architecture", arch_name(hp->arch), got, sizeof(got))) {
        rc = fail(err, errlen, path, -EINVAL, "an adapter for '%s', but the model is '%s'", got,
                  arch_name(hp->arch));
        goto out;
    }
    if (gguf_find_key(f, "adapter.alora.invocation_tokens") >= 0) {
        rc = fail(err, errlen, path, -EINVAL, "activated LoRA (alora) adapters are not supported");
        goto out;
    }
    float alpha = 0;
    int64_t ka = gguf_find_key(f, "adapter.lora.alpha");
    if (ka >= 0 && gguf_get_f32(f, ka, &alpha)) {
        rc = fail(err, errlen, path, -EINVAL, "adapter.lora.alpha is not a float32");
        goto out;
    }
    if (!(alpha == alpha) || alpha < 0 || alpha > 1e6f) {
        rc = fail(err, errlen, path, -EINVAL, "adapter.lora.alpha %g is out of range",
                  (double)alpha);
        goto out;
    }

    /* pair the tensors: idx[(l * NT + t) * 2 + which] */
    idx = malloc(sizeof(*idx) * (size_t)NL * NT * 2);
    if (!idx) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < (size_t)NL * NT * 2; i++)
        idx[i] = -1;
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        struct gguf_tensor_info ti;
        gguf_tensor_get(f, i, &ti);
        int32_t l;
        int t, w;
        int pr = parse_name(ti.name, NL, &l, &t, &w);
        if (pr == 0)
            continue;
        if (pr < 0) {
            rc = fail(err, errlen, path, -EINVAL,
                      "tensor '%s' is not the lora_a or lora_b of a layer's attn_q, attn_k, "
                      "attn_v, attn_output, ffn_gate, ffn_up or ffn_down (the matrices foliod "
                      "adapts) in a model of %d layers",
                      ti.name, (int)NL);
            goto out;
        }
        idx[((size_t)l * NT + (size_t)t) * 2 + (size_t)w] = i;
    }

    /* shapes, and the bytes they need */
    size_t floats = 0;
    int32_t n_mats = 0, rmax = 0;
    for (int32_t l = 0; l < NL; l++)
        for (int t = 0; t < NT; t++) {
            int64_t ia = idx[((size_t)l * NT + (size_t)t) * 2],
                    ib = idx[((size_t)l * NT + (size_t)t) * 2 + 1];
            if (ia < 0 && ib < 0)
                continue;
            if (ia < 0 || ib < 0) {
                rc = fail(err, errlen, path, -EINVAL,
                          "blk.%d.%s.weight has a lora_%s but no lora_%s", (int)l, target_names[t],
                          ia < 0 ? "b" : "a", ia < 0 ? "a" : "b");
                goto out;
            }
            struct gguf_tensor_info A, B;
            gguf_tensor_get(f, ia, &A);
            gguf_tensor_get(f, ib, &B);
            int32_t in, o;
            target_dims(hp, t, &in, &o);
            if (A.n_dims != 2 || B.n_dims != 2 || A.ne[0] != in || B.ne[1] != o) {
                rc = fail(err, errlen, path, -EINVAL,
                          "blk.%d.%s.weight: lora_a [%" PRId64 ", %" PRId64 "] and lora_b [%" PRId64
                          ", %" PRId64 "] do not fit the model's [%d, %d] matrix (another base "
                          "model's adapter?)",
                          (int)l, target_names[t], A.ne[0], A.ne[1], B.ne[0], B.ne[1], (int)in,
                          (int)o);
                goto out;
            }
            if (A.ne[1] != B.ne[0] || A.ne[1] < 1 || A.ne[1] > MODEL_LORA_MAX_RANK) {
                rc = fail(err, errlen, path, -EINVAL,
                          "blk.%d.%s.weight: lora_a's rank %" PRId64 " and lora_b's %" PRId64
                          " differ or exceed %d",
                          (int)l, target_names[t], A.ne[1], B.ne[0], MODEL_LORA_MAX_RANK);
                goto out;
            }
            floats += (size_t)A.ne[1] * (size_t)(in + o);
            n_mats++;
            rmax = FOLIO_MAX(rmax, (int32_t)A.ne[1]);
        }
    if (n_mats == 0) {
        rc = fail(err, errlen, path, -EINVAL, "the adapter has no lora_a/lora_b tensors");
        goto out;
    }

    a = folio_calloc(1, sizeof(*a));
    if (!a || !(a->mats = folio_calloc((size_t)NL * NT, sizeof(*a->mats))) ||
        !(a->data = folio_malloc(floats * sizeof(float)))) {
        rc = -ENOMEM;
        goto out;
    }
    a->n_layers = NL;
    a->bytes = floats * sizeof(float);
    float *p = a->data;
    for (int32_t l = 0; l < NL; l++)
        for (int t = 0; t < NT; t++) {
            int64_t ia = idx[((size_t)l * NT + (size_t)t) * 2],
                    ib = idx[((size_t)l * NT + (size_t)t) * 2 + 1];
            if (ia < 0)
                continue;
            struct gguf_tensor_info A, B;
            gguf_tensor_get(f, ia, &A);
            gguf_tensor_get(f, ib, &B);
            struct lora_mat *mt = &a->mats[(size_t)l * NT + (size_t)t];
            mt->r = (int32_t)A.ne[1];
            target_dims(hp, t, &mt->in, &mt->out);
            mt->s = alpha != 0 ? scale * alpha / (float)mt->r : scale;
            const size_t na = (size_t)mt->r * (size_t)mt->in, nb = (size_t)mt->r * (size_t)mt->out;
            float *tb = realloc(tmp, nb * sizeof(float));
            if (!tb) {
                rc = -ENOMEM;
                goto out;
            }
            tmp = tb;
            if (gguf_tensor_to_f32(A.type, A.data, p, (int64_t)na) ||
                gguf_tensor_to_f32(B.type, B.data, tmp, (int64_t)nb)) {
                rc = fail(err, errlen, path, -EINVAL,
                          "blk.%d.%s.weight: its lora tensors' type (%s, %s) cannot be read "
                          "(or their length is not whole blocks)",
                          (int)l, target_names[t], gguf_tensor_type_name(A.type),
                          gguf_tensor_type_name(B.type));
                goto out;
            }
            for (size_t i = 0; i < na; i++)
                if (!(p[i] - p[i] == 0)) {
                    rc = fail(err, errlen, path, -EINVAL, "%s holds a non-finite value", A.name);
                    goto out;
                }
            mt->A = p;
            p += na;
            float *bt = p; /* B [out][r] -> Bt [r][out] */
            for (int32_t o = 0; o < mt->out; o++)
                for (int32_t j = 0; j < mt->r; j++) {
                    float v = tmp[(size_t)o * (size_t)mt->r + (size_t)j];
                    if (!(v - v == 0)) {
                        rc =
                            fail(err, errlen, path, -EINVAL, "%s holds a non-finite value", B.name);
                        goto out;
                    }
                    bt[(size_t)j * (size_t)mt->out + (size_t)o] = v;
                }
            mt->Bt = bt;
            p += nb;
        }
    a->info = (struct model_lora_info){
        .n_mats = n_mats, .rank = rmax, .alpha = alpha, .scale = scale, .bytes = a->bytes};
    *out = a;
    a = NULL;
    rc = 0;
out:
    free(tmp);
    free(idx);
    model_lora_free(a);
    gguf_close(f);
    return rc;
}

void model_lora_free(model_lora_t *a)
{
    if (!a)
        return;
    folio_free(a->data);
    folio_free(a->mats);
    folio_free(a);
}

void model_lora_info(const model_lora_t *a, struct model_lora_info *out)
{
    *out = a->info;
}

/* Eight floats as one value (GCC/clang vector extension: one AVX register,
 * or two SSE ones), loaded and stored unaligned. */
typedef float v8f __attribute__((vector_size(32)));
typedef float v8f_u __attribute__((vector_size(32), aligned(4), may_alias));

/* Rows k < NR of one matrix's correction: t[k][j] = s·(A[j]·x[k]) with 8
 * partial sums per row (a vector each, NR of them in flight over the
 * latency of their adds, A's row loaded once for all), then y[k] +=
 * Σ_j t[k][j]·Bt[j] (B's row in L1 for all NR rows).  Each row's
 * operations and their order are the same for every NR (the rows never
 * mix, and nothing is fused), so a row's result does not depend on the
 * rows it shares a call with. */
static inline __attribute__((always_inline)) void
lora_rows_n(const struct lora_mat *mt, const float *const *x, float *const *y, const int NR)
{
    float t[MODEL_LORA_ROWS][MODEL_LORA_MAX_RANK];
    const int32_t in = mt->in, out = mt->out;
    for (int32_t j = 0; j < mt->r; j++) {
        const float *a = mt->A + (size_t)j * (size_t)in;
        v8f acc[MODEL_LORA_ROWS];
        for (int k = 0; k < NR; k++)
            acc[k] = (v8f){0};
        int32_t i = 0;
        for (; i + 8 <= in; i += 8) {
            const v8f av = *(const v8f_u *)(a + i);
            for (int k = 0; k < NR; k++)
                acc[k] += av * *(const v8f_u *)(x[k] + i);
        }
        for (int k = 0; k < NR; k++) {
            const v8f c = acc[k];
            float sum = ((c[0] + c[4]) + (c[1] + c[5])) + ((c[2] + c[6]) + (c[3] + c[7]));
            for (int32_t e = i; e < in; e++)
                sum += a[e] * x[k][e];
            t[k][j] = mt->s * sum;
        }
    }
    for (int32_t j = 0; j < mt->r; j++) {
        const float *b = mt->Bt + (size_t)j * (size_t)out;
        for (int k = 0; k < NR; k++) {
            const float tj = t[k][j];
            const v8f tv = {tj, tj, tj, tj, tj, tj, tj, tj};
            float *yk = y[k];
            int32_t o = 0;
            for (; o + 8 <= out; o += 8)
                *(v8f_u *)(yk + o) += tv * *(const v8f_u *)(b + o);
            for (; o < out; o++)
                yk[o] += tj * b[o];
        }
    }
}

bool model__lora_rows(const model_lora_t *a, int32_t layer, int target, const float *const *x,
                      float *const *y, int nr)
{
    const struct lora_mat *mt = &a->mats[(size_t)layer * MODEL_LORA_PER_LAYER + (size_t)target];
    if (mt->r == 0)
        return false;
    switch (nr) { /* the row count a constant in each copy */
    case 1:
        lora_rows_n(mt, x, y, 1);
        break;
    case 2:
        lora_rows_n(mt, x, y, 2);
        break;
    case 3:
        lora_rows_n(mt, x, y, 3);
        break;
    case 4:
        lora_rows_n(mt, x, y, 4);
        break;
    case 5:
        lora_rows_n(mt, x, y, 5);
        break;
    case 6:
        lora_rows_n(mt, x, y, 6);
        break;
    case 7:
        lora_rows_n(mt, x, y, 7);
        break;
    default:
        lora_rows_n(mt, x, y, MODEL_LORA_ROWS);
        break;
    }
    return true;
}

/* ---- synthetic adapters (`folio gen-lora`) ---------------------------- */

int model_lora_targets_parse(const char *s, uint32_t *bits)
{
    *bits = 0;
    if (!s || !*s)
        return -EINVAL;
    while (*s) {
        size_t n = strcspn(s, ",");
        bool ok = false;
        if (n == 3 && !strncmp(s, "all", 3)) {
            *bits |= (1u << MODEL_LORA_PER_LAYER) - 1;
            ok = true;
        }
        for (int t = 0; t < MODEL_LORA_PER_LAYER && !ok; t++)
            if ((strlen(target_short[t]) == n && !strncmp(s, target_short[t], n)) ||
                (strlen(target_names[t]) == n && !strncmp(s, target_names[t], n))) {
                *bits |= 1u << t;
                ok = true;
            }
        if (!ok)
            return -EINVAL;
        s += n;
        if (*s == ',' && *++s == 0)
            return -EINVAL;
    }
    return 0;
}

int model_lora_gen_file(const model_t *m, const struct model_lora_gen_opts *o, const char *path,
                        char *err, size_t errlen)
{
    const struct model_hparams *hp = &m->hp;
    const uint32_t targets = o->targets ? o->targets : (1u << MODEL_LORA_PER_LAYER) - 1;
    const int32_t r = o->rank;
    if (r < 1 || r > MODEL_LORA_MAX_RANK)
        return fail(err, errlen, path, -EINVAL, "rank %d is outside 1..%d", (int)r,
                    MODEL_LORA_MAX_RANK);
    enum gguf_tensor_type type = GGUF_TENSOR_F32;
    if (o->dtype && model__dtype_parse(o->dtype, &type))
        return fail(err, errlen, path, -EINVAL, "--dtype %s: use f32, f16, bf16 or q8_0", o->dtype);
    const int64_t blk = gguf_tensor_block(type);
    const float gain = o->gain > 0 ? o->gain : 0.5f;
    gguf_writer_t *w;
    int rc = gguf_writer_new(&w);
    if (rc)
        return rc;
    size_t n_mats = 0, total = 0;
    for (int32_t l = 0; l < hp->n_layers; l++)
        for (int t = 0; t < MODEL_LORA_PER_LAYER; t++)
            if (targets & (1u << t)) {
                int32_t in, out;
                target_dims(hp, t, &in, &out);
                if (in % blk || r % blk) {
                    gguf_writer_free(w);
                    return fail(err, errlen, path, -EINVAL,
                                "%s rows are whole blocks of %d values: the rank (%d, lora_b's "
                                "row) and %s's width (%d, lora_a's row) must be multiples of it",
                                gguf_tensor_type_name(type), (int)blk, (int)r, target_names[t],
                                (int)in);
                }
                n_mats++;
                total += gguf_tensor_nbytes(type, (int64_t)r * in) +
                         gguf_tensor_nbytes(type, (int64_t)r * out);
            }
    uint8_t *bytes = folio_malloc(total ? total : 1);
    float *tmp = NULL;
    char name[96], gname[96];
    snprintf(gname, sizeof(gname), "folio-synth-lora-r%d-s%" PRIu64, (int)r, o->seed);
    rc = gguf_w_str(w, "general.architecture", arch_name(hp->arch));
    rc = rc ? rc : gguf_w_str(w, "general.type", "adapter");
    rc = rc ? rc : gguf_w_str(w, "general.name", gname);
    rc = rc ? rc : gguf_w_u32(w, "general.alignment", 32);
    rc = rc ? rc : gguf_w_str(w, "adapter.type", "lora");
    rc = rc ? rc : gguf_w_f32(w, "adapter.lora.alpha", o->alpha);
    if (!bytes)
        rc = -ENOMEM;
    uint8_t *p = bytes;
    for (int32_t l = 0; l < hp->n_layers && !rc; l++)
        for (int t = 0; t < MODEL_LORA_PER_LAYER && !rc; t++) {
            if (!(targets & (1u << t)))
                continue;
            int32_t in, out;
            target_dims(hp, t, &in, &out);
            size_t need = (size_t)r * (size_t)FOLIO_MAX(in, out);
            float *tb = realloc(tmp, need * sizeof(float));
            if (!tb) {
                rc = -ENOMEM;
                break;
            }
            tmp = tb;
            /* streams: two per (layer, target), after nothing else */
            const uint64_t which = ((uint64_t)l * MODEL_LORA_PER_LAYER + (uint64_t)t) * 2;
            for (int k = 0; k < 2 && !rc; k++) {
                const int32_t row = k == 0 ? in : r, rows = k == 0 ? r : out;
                const size_t n = (size_t)row * (size_t)rows;
                model__fill_normal(tmp, n, o->seed, which + (uint64_t)k,
                                   k == 0 ? 1.0f / sqrtf((float)in) : gain / sqrtf((float)r));
                rc = gguf_tensor_from_f32(type, tmp, p, (int64_t)n);
                snprintf(name, sizeof(name), "blk.%d.%s.weight.lora_%c", (int)l, target_names[t],
                         k == 0 ? 'a' : 'b');
                const int64_t ne[2] = {row, rows};
                rc = rc ? rc : gguf_w_tensor(w, name, type, 2, ne, p);
                p += gguf_tensor_nbytes(type, (int64_t)n);
            }
        }
    if (rc)
        fail(err, errlen, path, rc, "cannot build the adapter: %s", strerror(-rc));
    else if (n_mats == 0)
        rc = fail(err, errlen, path, -EINVAL, "no matrix to adapt");
    else
        rc = gguf_writer_write(w, path, err, errlen);
    free(tmp);
    folio_free(bytes);
    gguf_writer_free(w);
    return rc;
}
