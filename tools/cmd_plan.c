/*
 * tools/cmd_plan.c — `folio plan`: the KV-cache memory budget of a model,
 * from its GGUF metadata (or a preset) alone.
 *
 *   folio plan --model FILE|default | --preset tiny|small|medium
 *              [--kv-mem SIZE | --kv-blocks N] [--block-size N]
 *              [--kv-dtype f32|f16|bf16|q8|auto] [--seq-len L] [--json]
 *
 * Prints bytes of K+V per token and per block, the blocks and tokens a
 * pool holds, and how many sequences of --seq-len tokens fit with paging
 * (ceil(L / block size) blocks each) versus with a whole context window
 * preallocated per sequence.  Defaults follow foliod's: 256 MiB of KV,
 * blocks of 16 tokens, the KV type `auto` gives the model (its matrices'
 * F32/F16/BF16, f16 for a quantized file; presets are F32); --seq-len
 * defaults to a quarter of the context length.
 *
 * The arithmetic is plan_compute (cmd_plan.h) so tests check it directly.
 * Only the file's metadata is read (gguf_open maps the file; tensors are
 * never touched).  Exit status: 0, 1 (unreadable model, overflow), 2 usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_plan.h"
#include "folio/gguf.h"
#include "folio/model.h"
#include "folio_cmds.h"

static void errf(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
    if (err && errlen)
        snprintf(err, errlen, fmt, a, b);
}

static int mul_ok(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_mul_overflow(a, b, out) ? -ERANGE : 0;
}

int plan_compute(const struct plan_in *in, struct plan_out *o, char *err, size_t errlen)
{
    const struct plan_model *m = &in->m;
    memset(o, 0, sizeof(*o));
    if (m->n_layers < 1 || m->n_kv_heads < 1 || m->head_dim_k < 1 || m->head_dim_v < 1 ||
        m->ctx_len < 1) {
        errf(err, errlen, "%s%s: the model's geometry is incomplete", m->name, "");
        return -EINVAL;
    }
    if (in->block_size < 1 || in->block_size > 1024) {
        errf(err, errlen, "--block-size must be 1..1024%s%s", "", "");
        return -EINVAL;
    }
    if ((in->dtype_bytes != 1 && in->dtype_bytes != 2 && in->dtype_bytes != 4) ||
        in->row_extra < 0 || in->row_extra > 64) {
        errf(err, errlen, "--kv-dtype must be f32, f16, bf16 or q8%s%s", "", "");
        return -EINVAL;
    }
    if (in->seq_len < 1 || in->seq_len > m->ctx_len) {
        errf(err, errlen, "--seq-len must be 1..the context length%s%s", "", "");
        return -EINVAL;
    }
    if (in->kv_blocks < 0 || (!in->kv_blocks && in->kv_mem < 1)) {
        errf(err, errlen, "give --kv-mem SIZE or --kv-blocks N%s%s", "", "");
        return -EINVAL;
    }
    int64_t per_layer =
        (int64_t)m->n_kv_heads *
        ((m->head_dim_k + m->head_dim_v) * (int64_t)in->dtype_bytes + 2 * (int64_t)in->row_extra);
    int64_t prealloc_bytes;
    if (mul_ok(per_layer, (int64_t)m->n_layers, &o->bytes_per_token) ||
        mul_ok(o->bytes_per_token, in->block_size, &o->bytes_per_block) ||
        mul_ok(o->bytes_per_token, m->ctx_len, &prealloc_bytes))
        goto range;
    o->blocks = in->kv_blocks ? in->kv_blocks : in->kv_mem / o->bytes_per_block;
    if (mul_ok(o->blocks, in->block_size, &o->tokens) ||
        mul_ok(o->blocks, o->bytes_per_block, &o->kv_bytes))
        goto range;
    o->blocks_per_seq = (in->seq_len + in->block_size - 1) / in->block_size;
    o->seqs_paged = o->blocks / o->blocks_per_seq;
    o->seqs_prealloc = o->kv_bytes / prealloc_bytes;
    o->used_paged = (double)in->seq_len / (double)(o->blocks_per_seq * in->block_size);
    o->used_prealloc = (double)in->seq_len / (double)m->ctx_len;
    return 0;
range:
    errf(err, errlen, "the sizes overflow 64 bits%s%s", "", "");
    return -ERANGE;
}

int plan_model_preset(const char *name, struct plan_model *m)
{
    struct model_hparams hp;
    bool dflt = name && !strcmp(name, "default");
    if (!name || model_preset(dflt ? "tiny" : name, &hp))
        return -EINVAL;
    memset(m, 0, sizeof(*m));
    snprintf(m->name, sizeof(m->name), "%s", dflt ? "embedded default (tiny preset)" : name);
    if (!dflt)
        snprintf(m->name, sizeof(m->name), "preset %s", name);
    m->n_layers = hp.n_layers;
    m->n_kv_heads = hp.n_kv_heads;
    m->head_dim_k = m->head_dim_v = hp.head_dim;
    m->ctx_len = hp.ctx_len;
    m->kv_auto = FOLIO_F32; /* foliod's presets are generated in F32 */
    return 0;
}

/* An integer key arch.suffix, or dflt (>= 0) when absent; -1 absent and
 * required. */
static int get_int(gguf_file_t *f, const char *arch, const char *suffix, int64_t dflt, int32_t *out,
                   const char *path, char *err, size_t errlen)
{
    char key[160];
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    int64_t idx = gguf_find_key(f, key), v;
    if (idx < 0) {
        if (dflt < 0) {
            if (err && errlen)
                snprintf(err, errlen, "%s: missing key '%s'", path, key);
            return -EINVAL;
        }
        *out = (int32_t)dflt;
        return 0;
    }
    if (gguf_get_i64(f, idx, &v) || v < 1 || v > (1 << 24)) {
        if (err && errlen)
            snprintf(err, errlen, "%s: key '%s' is not an integer in 1..16777216", path, key);
        return -EINVAL;
    }
    *out = (int32_t)v;
    return 0;
}

int plan_model_gguf(const char *path, struct plan_model *m, char *err, size_t errlen)
{
    gguf_file_t *f;
    int rc = gguf_open(path, &f, err, errlen);
    if (rc)
        return rc;
    memset(m, 0, sizeof(*m));
    char arch[64];
    const char *s;
    size_t len;
    int64_t idx = gguf_find_key(f, "general.architecture");
    if (idx < 0 || gguf_get_str(f, idx, &s, &len) || len == 0 || len >= sizeof(arch)) {
        if (err && errlen)
            snprintf(err, errlen, "%s: missing or bad key 'general.architecture'", path);
        rc = -EINVAL;
        goto out;
    }
    memcpy(arch, s, len);
    arch[len] = 0;
    idx = gguf_find_key(f, "general.name");
    if (idx >= 0 && !gguf_get_str(f, idx, &s, &len))
        snprintf(m->name, sizeof(m->name), "%.*s", (int)FOLIO_MIN(len, 100), s);
    else
        snprintf(m->name, sizeof(m->name), "%.100s", path);
    int32_t n_heads, dim;
    if ((rc = get_int(f, arch, "block_count", -1, &m->n_layers, path, err, errlen)) ||
        (rc = get_int(f, arch, "attention.head_count", -1, &n_heads, path, err, errlen)) ||
        (rc = get_int(f, arch, "attention.head_count_kv", n_heads, &m->n_kv_heads, path, err,
                      errlen)) ||
        (rc = get_int(f, arch, "embedding_length", -1, &dim, path, err, errlen)) ||
        (rc = get_int(f, arch, "attention.key_length", dim / n_heads, &m->head_dim_k, path, err,
                      errlen)) ||
        (rc = get_int(f, arch, "attention.value_length", m->head_dim_k, &m->head_dim_v, path, err,
                      errlen)) ||
        (rc = get_int(f, arch, "context_length", 2048, &m->ctx_len, path, err, errlen)))
        goto out;
    if (m->head_dim_k < 1) {
        if (err && errlen)
            snprintf(err, errlen, "%s: embedding_length < head_count", path);
        rc = -EINVAL;
    }
    /* the matrices' type, as foliod's loader will see it: layer 0's Q */
    idx = gguf_find_tensor(f, "blk.0.attn_q.weight");
    if (idx < 0)
        idx = gguf_find_tensor(f, "blk.0.attn_qkv.weight");
    struct gguf_tensor_info ti;
    if (idx >= 0)
        gguf_tensor_get(f, idx, &ti);
    m->kv_auto = model_kv_dtype_for(idx >= 0 ? ti.type : GGUF_TENSOR_F32);
out:
    gguf_close(f);
    return rc;
}

static void human(char *buf, size_t cap, int64_t b)
{
    static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)b;
    int i = 0;
    while (v >= 1024 && i < 5) {
        v /= 1024;
        i++;
    }
    if (i == 0)
        snprintf(buf, cap, "%" PRId64 " B", b);
    else
        snprintf(buf, cap, "%.*f %s", v >= 100 ? 0 : 1, v, u[i]);
}

/* s as a JSON string (quotes, backslashes and control bytes escaped). */
static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void usage(FILE *out)
{
    fprintf(out, "usage: folio plan (--model FILE|default | --preset tiny|small|medium)\n"
                 "                  [--kv-mem SIZE | --kv-blocks N] [--block-size N]\n"
                 "                  [--kv-dtype f32|f16|bf16|q8|auto] [--seq-len L] [--json]\n"
                 "\n"
                 "The KV-cache budget of a model, from its GGUF metadata only:\n"
                 "bytes per token = 2 x layers x KV heads x (head dim x bytes per element\n"
                 "+ 4 for q8's scale per row).\n"
                 "  --model FILE   a GGUF file ('default': foliod's embedded tiny model)\n"
                 "  --preset P     a synthetic preset, no file needed\n"
                 "  --kv-mem SIZE  KV pool size, k/M/G/T suffixes (default 256M, as foliod)\n"
                 "  --kv-blocks N  or the pool in blocks\n"
                 "  --block-size N tokens per block (default 16)\n"
                 "  --kv-dtype T   f32, f16, bf16, q8 (int8, a scale per row) or auto\n"
                 "                 (default, as foliod: the model's F32/F16/BF16, f16 when\n"
                 "                 quantized)\n"
                 "  --seq-len L    tokens per sequence for the fit (default: context / 4)\n"
                 "  --json         one JSON object instead of the table\n");
}

static int bad(const char *fmt, const char *arg)
{
    fprintf(stderr, "folio plan: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    usage(stderr);
    return 2;
}

static int parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi)
        return -EINVAL;
    *out = v;
    return 0;
}

int cmd_plan(int argc, char **argv)
{
    const char *model = NULL, *preset = NULL, *dtype = "auto";
    int64_t kv_mem = 256LL << 20, kv_blocks = 0, block_size = 16, seq_len = 0;
    bool have_mem = false, json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            json = true;
            continue;
        }
        bool takes = !strcmp(a, "--model") || !strcmp(a, "--preset") || !strcmp(a, "--kv-mem") ||
                     !strcmp(a, "--kv-blocks") || !strcmp(a, "--block-size") ||
                     !strcmp(a, "--kv-dtype") || !strcmp(a, "--seq-len");
        if (!takes)
            return bad("unknown argument '%s'", a);
        if (i + 1 >= argc)
            return bad("%s needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--model"))
            model = v;
        else if (!strcmp(a, "--preset"))
            preset = v;
        else if (!strcmp(a, "--kv-dtype"))
            dtype = v;
        else if (!strcmp(a, "--kv-mem")) {
            if (folio_parse_size(v, &kv_mem) || kv_mem < 1)
                return bad("bad --kv-mem '%s' (e.g. 256M, 2G)", v);
            have_mem = true;
        } else if (!strcmp(a, "--kv-blocks")) {
            if (parse_int(v, 1, INT64_MAX / 1024, &kv_blocks))
                return bad("bad --kv-blocks '%s'", v);
        } else if (!strcmp(a, "--block-size")) {
            if (parse_int(v, 1, 1024, &block_size))
                return bad("bad --block-size '%s' (1..1024)", v);
        } else if (parse_int(v, 1, 1 << 24, &seq_len))
            return bad("bad --seq-len '%s'", v);
    }
    if (!model == !preset)
        return bad("give exactly one of --model FILE and --preset NAME%s", "");
    if (have_mem && kv_blocks)
        return bad("--kv-mem and --kv-blocks exclude each other%s", "");
    enum folio_dtype dt = FOLIO_F32;
    const bool dt_auto = !strcmp(dtype, "auto");
    if (!dt_auto && folio_dtype_parse(dtype, &dt))
        return bad("bad --kv-dtype '%s' (f32, f16, bf16, q8 or auto)", dtype);

    struct plan_in in = {
        .kv_mem = kv_mem, .kv_blocks = kv_blocks, .block_size = (int32_t)block_size};
    char err[512];
    if (preset || !strcmp(model, "default")) {
        const char *p = preset ? preset : "default";
        if (plan_model_preset(p, &in.m) || (preset && !strcmp(preset, "default")))
            return bad("unknown preset '%s' (tiny, small or medium)", p);
    } else if (plan_model_gguf(model, &in.m, err, sizeof(err))) {
        fprintf(stderr, "folio plan: %s\n", err);
        return 1;
    }
    if (dt_auto)
        dt = in.m.kv_auto, dtype = folio_dtype_name(dt);
    const int dtype_bytes = (int)folio_dtype_size(dt);
    const int row_extra = dt == FOLIO_Q8 ? PAGER_Q8_SCALE_BYTES : 0;
    in.dtype_bytes = dtype_bytes, in.row_extra = row_extra;
    in.seq_len = (int32_t)(seq_len ? seq_len : FOLIO_MAX(1, in.m.ctx_len / 4));
    if (in.seq_len > in.m.ctx_len) {
        fprintf(stderr, "folio plan: --seq-len %d exceeds the context length %d\n", in.seq_len,
                in.m.ctx_len);
        return 2;
    }
    struct plan_out o;
    int rc = plan_compute(&in, &o, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "folio plan: %s\n", err);
        return 1;
    }
    const struct plan_model *m = &in.m;
    if (json) {
        printf("{\"model\":");
        json_str(preset ? preset : (!strcmp(model, "default") ? "default" : m->name));
        printf(",\"n_layers\":%d,\"n_kv_heads\":%d,\"head_dim\":%d,"
               "\"head_dim_v\":%d,\"ctx_len\":%d,\"kv_dtype\":\"%s\",\"dtype_bytes\":%d,"
               "\"row_extra_bytes\":%d,"
               "\"block_size\":%d,\"bytes_per_token\":%" PRId64 ",\"bytes_per_block\":%" PRId64
               ",\"blocks\":%" PRId64 ",\"tokens\":%" PRId64 ",\"kv_bytes\":%" PRId64
               ",\"seq_len\":%d,\"blocks_per_seq\":%" PRId64 ",\"seqs_paged\":%" PRId64
               ",\"seqs_prealloc\":%" PRId64 ",\"used_paged\":%.6f,\"used_prealloc\":%.6f}\n",
               m->n_layers, m->n_kv_heads, m->head_dim_k, m->head_dim_v, m->ctx_len, dtype,
               dtype_bytes, row_extra, in.block_size, o.bytes_per_token, o.bytes_per_block,
               o.blocks, o.tokens, o.kv_bytes, in.seq_len, o.blocks_per_seq, o.seqs_paged,
               o.seqs_prealloc, o.used_paged, o.used_prealloc);
        return 0;
    }
    char h1[32], h2[32], h3[32];
    human(h1, sizeof(h1), o.bytes_per_token);
    human(h2, sizeof(h2), o.bytes_per_block);
    human(h3, sizeof(h3), o.kv_bytes);
    printf("model               %s\n", m->name);
    printf("geometry            %d layers, %d KV heads, head dim %d", m->n_layers, m->n_kv_heads,
           m->head_dim_k);
    if (m->head_dim_v != m->head_dim_k)
        printf(" (values %d)", m->head_dim_v);
    printf(", context %d tokens\n", m->ctx_len);
    if (row_extra)
        printf("kv dtype            %s (%d byte per value + a %d-byte scale per row)\n", dtype,
               dtype_bytes, row_extra);
    else
        printf("kv dtype            %s (%d bytes)\n", dtype, dtype_bytes);
    if (m->head_dim_v == m->head_dim_k && row_extra)
        printf("bytes per token     %" PRId64
               " (%s) = 2 x %d layers x %d KV heads x (%d x %d + %d) bytes\n",
               o.bytes_per_token, h1, m->n_layers, m->n_kv_heads, m->head_dim_k, dtype_bytes,
               row_extra);
    else if (m->head_dim_v == m->head_dim_k)
        printf("bytes per token     %" PRId64
               " (%s) = 2 x %d layers x %d KV heads x %d x %d bytes\n",
               o.bytes_per_token, h1, m->n_layers, m->n_kv_heads, m->head_dim_k, dtype_bytes);
    else
        printf("bytes per token     %" PRId64 " (%s) = %d layers x %d KV heads x ((%d + %d) x %d "
               "+ 2 x %d) bytes\n",
               o.bytes_per_token, h1, m->n_layers, m->n_kv_heads, m->head_dim_k, m->head_dim_v,
               dtype_bytes, row_extra);
    printf("block size          %d tokens\n", in.block_size);
    printf("bytes per block     %" PRId64 " (%s)\n", o.bytes_per_block, h2);
    printf("kv memory           %" PRId64 " (%s)%s\n", o.kv_bytes, h3,
           kv_blocks ? "" : " in whole blocks");
    printf("blocks              %" PRId64 "\n", o.blocks);
    printf("tokens              %" PRId64 "\n", o.tokens);
    printf("sequence length     %d tokens\n", in.seq_len);
    printf("sequences, paged    %" PRId64 " (%" PRId64 " blocks each, %.1f%% of reserved slots "
           "hold tokens)\n",
           o.seqs_paged, o.blocks_per_seq, 100 * o.used_paged);
    printf("sequences, prealloc %" PRId64 " (%d tokens each, %.1f%% of reserved slots hold "
           "tokens)\n",
           o.seqs_prealloc, m->ctx_len, 100 * o.used_prealloc);
    if (o.seqs_prealloc > 0)
        printf("paging fits         %.2fx as many sequences\n",
               (double)o.seqs_paged / (double)o.seqs_prealloc);
    return 0;
}
