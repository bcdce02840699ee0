/*
 * tools/quantize_mix.c — the mixes of `folio quantize` and the command
 * line's overrides (quantize_mix.h).
 *
 * Mixes (the per-tensor choices llama.cpp's quantizer makes, as users know
 * them; "more bits" layers are the first and last eighth of the layers and
 * every third one between, llama.cpp's use_more_bits):
 *
 *   f16, bf16, q8_0  every matrix that type
 *   q4_0, q4_1,      that type; output.weight Q6_K
 *   q5_0, q5_1
 *   q6_k             Q6_K
 *   q4_k_s           Q4_K; attn_v of layers 0-3 and ffn_down of the first
 *                    eighth Q5_K; output.weight Q6_K
 *   q4_k_m           Q4_K; output.weight, and attn_v / ffn_down of the
 *                    "more bits" layers, Q6_K
 *   q5_k_s           Q5_K; output.weight Q6_K
 *   q5_k_m           Q5_K; the same tensors as q4_k_m's Q6_K
 *   q3_k_s           Q3_K; output.weight Q6_K
 *   q3_k_m           Q3_K; attn_v, ffn_down and attn_output Q4_K, except
 *                    attn_v of the first two layers and ffn_down of the
 *                    first sixteenth, Q5_K; output.weight Q6_K
 *   q3_k_l           Q3_K; attn_v, ffn_down and attn_output Q5_K;
 *                    output.weight Q6_K
 *   q2_k             Q2_K; attn_v, ffn_down and attn_output Q3_K (attn_v
 *                    Q4_K where 4 or more query heads share a KV head);
 *                    output.weight Q6_K
 *   q2_k_s           Q2_K; ffn_down of the first eighth Q4_K, attn_v Q4_K
 *                    where 4 or more query heads share a KV head;
 *                    output.weight Q6_K; only with an importance matrix
 *                    (llama.cpp refuses it without one too)
 *   iq4_nl, iq4_xs   that type; attn_v where 4 or more query heads share a
 *                    KV head, and without an importance matrix ffn_down of
 *                    the first eighth of the layers, Q5_K; output.weight Q6_K
 *
 * With an importance matrix q4_0 and q5_0 give ffn_down of the first eighth
 * of the layers Q4_1 and Q5_1 (llama.cpp's guard for those layers).
 *
 * With tied embeddings (no output.weight) token_embd.weight takes
 * output.weight's type.  A K-quant needs rows that are a multiple of 256:
 * a tensor whose rows are not falls back as llama.cpp does (Q4_K -> Q5_0,
 * Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K and Q3_K -> Q4_0, IQ4_XS -> IQ4_NL); a
 * 32-block type on rows not a multiple of 32 leaves the tensor F16.
 */
#include "quantize_mix.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "folio/common.h"

/* T(x): the mix's type for that tensor; NONE: no such rule */
#define T(x) ((int)GGUF_TENSOR_##x)
#define NONE QUANT_TYPE_NONE

/* when a mix's down8 applies */
enum { ALWAYS, PLAIN /* without an importance matrix */, WEIGHTED /* with one */ };

struct quant_mix {
    const char *name;
    int base, output;
    int attn_v, ffn_down, attn_out; /* the layers' other tensors: base */
    int more_bits;                  /* attn_v / ffn_down of the "more bits" layers */
    int early;                      /* attn_v of layers 0-1, ffn_down of the first 16th */
    uint32_t file_type;             /* llama.cpp's enum llama_ftype */
    int down8;                      /* ffn_down of the first eighth of the layers ... */
    int down8_when;                 /* ... ALWAYS, PLAIN or WEIGHTED */
    int gqa_v;                      /* attn_v with 4+ query heads per KV head */
    int v4;                         /* attn_v of layers 0-3 */
    bool needs_imatrix;             /* refused without an importance matrix */
};

// clang-format off
static const struct quant_mix mixes[] = {
    /* name       base       output     attn_v     ffn_down   attn_out   more_bits  early
     *                                                                                        ftype down8    when      gqa_v    v4       imatrix */
    {"f16",     T(F16),    T(F16),    T(F16),    T(F16),    T(F16),    NONE,      NONE,      1,  NONE,    ALWAYS,   NONE,    NONE,    false},
    {"bf16",    T(BF16),   T(BF16),   T(BF16),   T(BF16),   T(BF16),   NONE,      NONE,      32, NONE,    ALWAYS,   NONE,    NONE,    false},
    {"q8_0",    T(Q8_0),   T(Q8_0),   T(Q8_0),   T(Q8_0),   T(Q8_0),   NONE,      NONE,      7,  NONE,    ALWAYS,   NONE,    NONE,    false},
    {"q4_0",    T(Q4_0),   T(Q6_K),   T(Q4_0),   T(Q4_0),   T(Q4_0),   NONE,      NONE,      2,  T(Q4_1), WEIGHTED, NONE,    NONE,    false},
    {"q4_1",    T(Q4_1),   T(Q6_K),   T(Q4_1),   T(Q4_1),   T(Q4_1),   NONE,      NONE,      3,  NONE,    ALWAYS,   NONE,    NONE,    false},
    {"q5_0",    T(Q5_0),   T(Q6_K),   T(Q5_0),   T(Q5_0),   T(Q5_0),   NONE,      NONE,      8,  T(Q5_1), WEIGHTED, NONE,    NONE,    false},
    {"q5_1",    T(Q5_1),   T(Q6_K),   T(Q5_1),   T(Q5_1),   T(Q5_1),   NONE,      NONE,      9,  NONE,    ALWAYS,   NONE,    NONE,    false},
    {"q2_k",    T(Q2_K),   T(Q6_K),   T(Q3_K),   T(Q3_K),   T(Q3_K),   NONE,      NONE,      10, NONE,    ALWAYS,   T(Q4_K), NONE,    false},
    {"q2_k_s",  T(Q2_K),   T(Q6_K),   T(Q2_K),   T(Q2_K),   T(Q2_K),   NONE,      NONE,      21, T(Q4_K), ALWAYS,   T(Q4_K), NONE,    true},
    {"q3_k_s",  T(Q3_K),   T(Q6_K),   T(Q3_K),   T(Q3_K),   T(Q3_K),   NONE,      NONE,      11, NONE,    ALWAYS,   NONE,    NONE,    false},
    {"q3_k_m",  T(Q3_K),   T(Q6_K),   T(Q4_K),   T(Q4_K),   T(Q4_K),   NONE,      T(Q5_K),   12, NONE,    ALWAYS,   NONE,    NONE,    false},
    {"q3_k_l",  T(Q3_K),   T(Q6_K),   T(Q5_K),   T(Q5_K),   T(Q5_K),   NONE,      NONE,      13, NONE,    ALWAYS,   NONE,    NONE,    false},
    {"q4_k_s",  T(Q4_K),   T(Q6_K),   T(Q4_K),   T(Q4_K),   T(Q4_K),   NONE,      NONE,      14, T(Q5_K), ALWAYS,   NONE,    T(Q5_K), false},
    {"q4_k_m",  T(Q4_K),   T(Q6_K),   T(Q4_K),   T(Q4_K),   T(Q4_K),   T(Q6_K),   NONE,      15, NONE,    ALWAYS,   NONE,    NONE,    false},
    {"q5_k_s",  T(Q5_K),   T(Q6_K),   T(Q5_K),   T(Q5_K),   T(Q5_K),   NONE,      NONE,      16, NONE,    ALWAYS,   NONE,    NONE,    false},
    {"q5_k_m",  T(Q5_K),   T(Q6_K),   T(Q5_K),   T(Q5_K),   T(Q5_K),   T(Q6_K),   NONE,      17, NONE,    ALWAYS,   NONE,    NONE,    false},
    {"q6_k",    T(Q6_K),   T(Q6_K),   T(Q6_K),   T(Q6_K),   T(Q6_K),   NONE,      NONE,      18, NONE,    ALWAYS,   NONE,    NONE,    false},
    {"iq4_nl",  T(IQ4_NL), T(Q6_K),   T(IQ4_NL), T(IQ4_NL), T(IQ4_NL), NONE,      NONE,      25, T(Q5_K), PLAIN,    T(Q5_K), NONE,    false},
    {"iq4_xs",  T(IQ4_XS), T(Q6_K),   T(IQ4_XS), T(IQ4_XS), T(IQ4_XS), NONE,      NONE,      30, T(Q5_K), PLAIN,    T(Q5_K), NONE,    false},
};
// clang-format on

const char quant_mix_names[] =
    "f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q2_k|q2_k_s|q3_k_s|q3_k_m|q3_k_l|q4_k_s|q4_k_m|q5_k_s|"
    "q5_k_m|q6_k|iq4_nl|iq4_xs";

static const struct {
    const char *name;
    int type;
} types[] = {
    {"f32", T(F32)},   {"f16", T(F16)},       {"bf16", T(BF16)},     {"q8_0", T(Q8_0)},
    {"q4_0", T(Q4_0)}, {"q4_1", T(Q4_1)},     {"q5_0", T(Q5_0)},     {"q5_1", T(Q5_1)},
    {"q2_k", T(Q2_K)}, {"q3_k", T(Q3_K)},     {"q4_k", T(Q4_K)},     {"q5_k", T(Q5_K)},
    {"q6_k", T(Q6_K)}, {"iq4_nl", T(IQ4_NL)}, {"iq4_xs", T(IQ4_XS)},
};

const char quant_type_names[] =
    "f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q2_k|q3_k|q4_k|q5_k|q6_k|iq4_nl|iq4_xs";

const struct quant_mix *quant_mix_find(const char *name)
{
    for (size_t i = 0; name && i < FOLIO_ARRAY_LEN(mixes); i++)
        if (!strcasecmp(name, mixes[i].name))
            return &mixes[i];
    return NULL;
}

uint32_t quant_mix_file_type(const struct quant_mix *mix)
{
    return mix->file_type;
}

bool quant_mix_is_quantized(const struct quant_mix *mix)
{
    return mix->base != T(F16) && mix->base != T(BF16);
}

bool quant_mix_needs_imatrix(const struct quant_mix *mix)
{
    return mix->needs_imatrix;
}

int quant_type_parse(const char *name)
{
    for (size_t i = 0; name && i < FOLIO_ARRAY_LEN(types); i++)
        if (!strcasecmp(name, types[i].name))
            return types[i].type;
    return NONE;
}

int quant_opts_add_override(struct quant_opts *o, const char *arg, char *err, size_t errlen)
{
    const char *eq = strrchr(arg, '=');
    if (!eq || eq == arg) {
        snprintf(err, errlen, "--tensor-type wants PATTERN=TYPE, not '%s'", arg);
        return -EINVAL;
    }
    const int type = quant_type_parse(eq + 1);
    if (type == NONE) {
        snprintf(err, errlen, "--tensor-type '%s': the type must be one of %s", arg,
                 quant_type_names);
        return -EINVAL;
    }
    if (o->n_over == QUANT_MAX_OVERRIDES) {
        snprintf(err, errlen, "more than %d --tensor-type options", QUANT_MAX_OVERRIDES);
        return -EINVAL;
    }
    char pattern[256];
    if ((size_t)(eq - arg) >= sizeof(pattern)) {
        snprintf(err, errlen, "--tensor-type: the pattern is longer than %zu bytes",
                 sizeof(pattern) - 1);
        return -EINVAL;
    }
    memcpy(pattern, arg, (size_t)(eq - arg));
    pattern[eq - arg] = 0;
    const int rc = regcomp(&o->over[o->n_over].re, pattern, REG_EXTENDED | REG_NOSUB);
    if (rc) {
        char why[128];
        regerror(rc, &o->over[o->n_over].re, why, sizeof(why));
        snprintf(err, errlen, "--tensor-type '%s': bad pattern: %s", arg, why);
        return -EINVAL;
    }
    o->over[o->n_over++].type = type;
    return 0;
}

void quant_opts_free(struct quant_opts *o)
{
    for (int i = 0; i < o->n_over; i++)
        regfree(&o->over[i].re);
    o->n_over = 0;
}

static bool more_bits(int64_t layer, int64_t n_layers)
{
    return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

static enum gguf_tensor_type fallback(enum gguf_tensor_type t, int64_t row)
{
    if (gguf_tensor_block(t) == 256 && row % 256) {
        switch (t) {
        case GGUF_TENSOR_Q4_K:
            t = GGUF_TENSOR_Q5_0;
            break;
        case GGUF_TENSOR_Q5_K:
            t = GGUF_TENSOR_Q5_1;
            break;
        case GGUF_TENSOR_Q2_K:
        case GGUF_TENSOR_Q3_K:
            t = GGUF_TENSOR_Q4_0;
            break;
        case GGUF_TENSOR_IQ4_XS:
            t = GGUF_TENSOR_IQ4_NL;
            break;
        default:
            t = GGUF_TENSOR_Q8_0;
            break;
        }
    }
    if (row % gguf_tensor_block(t))
        t = GGUF_TENSOR_F16;
    return t;
}

/* The mix's own choice. */
static int mix_pick(const struct quant_mix *mx, const char *name, int64_t n_layers, int64_t n_gqa,
                    bool output, bool imatrix)
{
    int layer = -1, off = 0;
    if (output)
        return mx->output;
    if (sscanf(name, "blk.%d.%n", &layer, &off) != 1 || off == 0)
        return mx->base;
    const char *rest = name + off;
    const bool v = !strcmp(rest, "attn_v.weight"), down = !strcmp(rest, "ffn_down.weight");
    if (v || down) {
        int t = v ? mx->attn_v : mx->ffn_down;
        if (mx->more_bits != NONE && more_bits(layer, n_layers))
            t = mx->more_bits;
        if (mx->early != NONE && (v ? layer < 2 : layer < n_layers / 16))
            t = mx->early;
        if (mx->down8 != NONE && down && layer < n_layers / 8 &&
            (mx->down8_when == ALWAYS || (mx->down8_when == WEIGHTED) == imatrix))
            t = mx->down8;
        if (mx->gqa_v != NONE && v && n_gqa >= 4)
            t = mx->gqa_v;
        if (mx->v4 != NONE && v && layer < 4)
            t = mx->v4;
        return t;
    }
    return !strcmp(rest, "attn_output.weight") ? mx->attn_out : mx->base;
}

enum gguf_tensor_type quant_pick(const struct quant_opts *o, const char *name, int64_t row,
                                 enum gguf_tensor_type have, int64_t n_layers, int64_t n_gqa,
                                 bool has_output)
{
    const bool embd = !strcmp(name, "token_embd.weight");
    const bool output = !strcmp(name, "output.weight") || (!has_output && embd);
    int t = o->pure ? o->mix->base : mix_pick(o->mix, name, n_layers, n_gqa, output, o->imatrix);
    if (output && o->output_type != NONE)
        t = o->output_type;
    if (embd && o->embd_type != NONE)
        t = o->embd_type;
    if (output && o->leave_output)
        t = (int)have;
    for (int i = 0; i < o->n_over; i++)
        if (!regexec(&o->over[i].re, name, 0, NULL, 0)) {
            t = o->over[i].type;
            break;
        }
    return t == (int)have ? have : fallback((enum gguf_tensor_type)t, row);
}
