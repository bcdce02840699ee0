/*
 * tools/quantize_mix.h — which type `folio quantize` gives each tensor.
 *
 * A mix (q4_k_m, q3_k_s, q8_0, ...) is a base type and the per-tensor
 * exceptions llama.cpp's quantizer makes for it, as users know them.  On
 * top of the mix the command line may ask for (in rising precedence):
 * --pure (every matrix the base type), --output-tensor-type,
 * --token-embedding-type, --leave-output-tensor and --tensor-type
 * PATTERN=TYPE.  Whatever is picked then falls back where the rows do not
 * fit its block (a K-quant on rows that are not a multiple of 256, as
 * llama.cpp does), unless it is the type the tensor already has.
 *
 * quant_pick only names a type; whether converting a tensor to it is
 * allowed (requantizing one already quantized) is cmd_quantize's call.
 */
#ifndef FOLIO_TOOLS_QUANTIZE_MIX_H
#define FOLIO_TOOLS_QUANTIZE_MIX_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "folio/gguf.h"

#define QUANT_TYPE_NONE     (-1)
#define QUANT_MAX_OVERRIDES 32

struct quant_mix; /* one row of the mix table (quantize_mix.c) */

/* What the command line asks for beyond the mix. */
struct quant_opts {
    const struct quant_mix *mix;
    bool pure;         /* every matrix the mix's base type */
    bool leave_output; /* the output matrix keeps its type */
    bool imatrix;      /* an importance matrix is given (some mixes differ) */
    int output_type;   /* QUANT_TYPE_NONE: the mix's */
    int embd_type;     /* token_embd.weight; QUANT_TYPE_NONE: the mix's */
    int n_over;        /* --tensor-type PATTERN=TYPE, first match wins */
    struct {
        regex_t re; /* POSIX extended, searched anywhere in the name */
        int type;
    } over[QUANT_MAX_OVERRIDES];
};

/* The mix named name (case-insensitive), NULL if none. */
const struct quant_mix *quant_mix_find(const char *name);
/* "f16|bf16|q8_0|...": the mix names, for usage texts. */
extern const char quant_mix_names[];
/* llama.cpp's general.file_type number of a mix; whether it quantizes. */
uint32_t quant_mix_file_type(const struct quant_mix *mix);
bool quant_mix_is_quantized(const struct quant_mix *mix);
/* Whether the mix is refused without an importance matrix (q2_k_s). */
bool quant_mix_needs_imatrix(const struct quant_mix *mix);

/* The tensor type a user may name (f32, f16, bf16, q8_0, q4_0, q4_1,
 * q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs; any case),
 * QUANT_TYPE_NONE for anything else. */
int quant_type_parse(const char *name);
/* "f32|f16|...": those names, for usage texts. */
extern const char quant_type_names[];

/* Parses PATTERN=TYPE into o->over; returns 0, or -EINVAL (bad TYPE or
 * pattern, or too many) with a message in err. */
int quant_opts_add_override(struct quant_opts *o, const char *arg, char *err, size_t errlen);
void quant_opts_free(struct quant_opts *o);

/* The type for the matrix `name` (rows of `row` elements, now of type
 * `have`) in a model of n_layers blocks with n_gqa query heads per KV head
 * (0: unknown); has_output: the file has output.weight (without it
 * token_embd.weight is the output). */
enum gguf_tensor_type quant_pick(const struct quant_opts *o, const char *name, int64_t row,
                                 enum gguf_tensor_type have, int64_t n_layers, int64_t n_gqa,
                                 bool has_output);

#endif
