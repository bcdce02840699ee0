/*
 * tools/cmd_plan.h — the arithmetic behind `folio plan` (tools/cmd_plan.c),
 * exposed for tests/test_plan.c.
 *
 * KV memory per token = 2 (K and V) × layers × KV heads × (head dim × bytes
 * per element + row extra) (with key_length/value_length when a file gives
 * them: layers × KV heads × ((key dim + value dim) × bytes + 2 × row
 * extra)); the row extra is q8's f32 scale per (token, KV head) row, as
 * pager_kv_bytes_per_token counts it.  A block holds block_size
 * tokens; a pool of `kv_mem` bytes holds floor(kv_mem / bytes per block)
 * blocks (or exactly --kv-blocks).  A sequence of L tokens takes
 * ceil(L / block_size) blocks with paging, and a whole context window
 * (ctx_len tokens) when memory is preallocated per sequence.
 */
#ifndef FOLIO_TOOLS_CMD_PLAN_H
#define FOLIO_TOOLS_CMD_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "folio/common.h"

struct plan_model {
    char name[128];
    int32_t n_layers, n_kv_heads, head_dim_k, head_dim_v, ctx_len;
    enum folio_dtype kv_auto; /* what --kv-dtype auto means for it (model_kv_dtype_for) */
};

struct plan_in {
    struct plan_model m;
    int64_t kv_mem;      /* bytes; used when kv_blocks == 0 */
    int64_t kv_blocks;   /* 0: derive from kv_mem */
    int32_t block_size;  /* tokens per block, >= 1 */
    int32_t dtype_bytes; /* 4 (f32), 2 (f16, bf16) or 1 (q8) */
    int32_t row_extra;   /* bytes per K or V row besides the values: 4 (q8), else 0 */
    int32_t seq_len;     /* tokens per sequence, 1..ctx_len */
};

struct plan_out {
    int64_t bytes_per_token, bytes_per_block;
    int64_t blocks, tokens, kv_bytes; /* kv_bytes = blocks × bytes_per_block */
    int64_t blocks_per_seq;           /* ceil(seq_len / block_size) */
    int64_t seqs_paged;               /* blocks / blocks_per_seq */
    int64_t seqs_prealloc;            /* kv_bytes / (ctx_len × bytes_per_token) */
    double used_paged, used_prealloc; /* fraction of reserved slots that hold tokens */
};

/* Fills out from in.  -EINVAL when a field is out of range (a message in
 * err when err != NULL), -ERANGE when the products overflow int64. */
int plan_compute(const struct plan_in *in, struct plan_out *out, char *err, size_t errlen);
/* Geometry of a preset ("tiny", "small", "medium"; "default" = the
 * embedded tiny).  -EINVAL for an unknown name. */
int plan_model_preset(const char *name, struct plan_model *m);
/* Geometry from a GGUF file's metadata (nothing else is read).  -errno
 * with a message naming the file and the key. */
int plan_model_gguf(const char *path, struct plan_model *m, char *err, size_t errlen);

#endif
