/*
 * tools/cmd_quantize.c — `folio quantize IN.gguf OUT.gguf --type T`: rewrite
 * a GGUF model with its matrices in another type.
 *
 * Every key is copied as it is (general.file_type is set to llama.cpp's
 * number for the mix, general.quantization_version to 2 for quantized
 * mixes).  1-D tensors (norms) are copied as they are.  Every 2-D tensor is
 * converted to f32 (gguf_tensor_to_f32) and then to the type the mix
 * picks for it (gguf_tensor_from_f32), so a quantized input is requantized.
 *
 * Mixes (the per-tensor choices llama.cpp's quantizer makes, as users know
 * them; "more bits" layers are the first and last eighth of the layers and
 * every third one between, llama.cpp's use_more_bits):
 *
 *   f16, bf16, q8_0  every matrix that type
 *   q4_0, q4_1,      that type; output.weight Q6_K
 *   q5_0, q5_1
 *   q6_k             Q6_K
 *   q4_k_m           Q4_K; output.weight, and attn_v / ffn_down of the
 *                    "more bits" layers, Q6_K
 *   q5_k_m           Q5_K; the same tensors Q6_K
 *   q3_k_s           Q3_K; output.weight Q6_K
 *   q3_k_m           Q3_K; attn_v, ffn_down and attn_output Q4_K, except
 *                    attn_v of the first two layers and ffn_down of the
 *                    first sixteenth, Q5_K; output.weight Q6_K
 *   q3_k_l           Q3_K; attn_v, ffn_down and attn_output Q5_K;
 *                    output.weight Q6_K
 *   q2_k             Q2_K; attn_v, ffn_down and attn_output Q3_K;
 *                    output.weight Q6_K
 *   iq4_nl, iq4_xs   that type; output.weight Q6_K
 *
 * With tied embeddings (no output.weight) token_embd.weight takes
 * output.weight's type.  A K-quant needs rows that are a multiple of 256:
 * a tensor whose rows are not falls back as llama.cpp does (Q4_K -> Q5_0,
 * Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K, Q3_K and IQ4_XS -> IQ4_NL); a 32-block
 * type on rows not a multiple of 32 leaves the tensor F16.
 *
 * --threads N (default: the online CPUs) converts each tensor's rows on N
 * threads, a chunk of rows at a time; every block is quantized on its own,
 * so the output is the same bytes for any N.
 *
 * Exit status: 0 written, 1 failure (the message names the file), 2 usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "folio/common.h"
#include "folio/gguf.h"
#include "folio/pool.h"
#include "folio_cmds.h"

/* T(x): the mix's type for that tensor; NONE: no such rule */
#define T(x) ((int)GGUF_TENSOR_##x)
#define NONE (-1)

struct mix {
    const char *name;
    int base, output;
    int attn_v, ffn_down, attn_out; /* the layers' other tensors: base */
    int more_bits;                  /* attn_v / ffn_down of the "more bits" layers */
    int early;                      /* attn_v of layers 0-1, ffn_down of the first 16th */
    uint32_t file_type;             /* llama.cpp's enum llama_ftype */
};

// clang-format off
static const struct mix mixes[] = {
    /* name       base       output     attn_v     ffn_down   attn_out   more_bits  early */
    {"f16",     T(F16),    T(F16),    T(F16),    T(F16),    T(F16),    NONE,      NONE,      1},
    {"bf16",    T(BF16),   T(BF16),   T(BF16),   T(BF16),   T(BF16),   NONE,      NONE,      32},
    {"q8_0",    T(Q8_0),   T(Q8_0),   T(Q8_0),   T(Q8_0),   T(Q8_0),   NONE,      NONE,      7},
    {"q4_0",    T(Q4_0),   T(Q6_K),   T(Q4_0),   T(Q4_0),   T(Q4_0),   NONE,      NONE,      2},
    {"q4_1",    T(Q4_1),   T(Q6_K),   T(Q4_1),   T(Q4_1),   T(Q4_1),   NONE,      NONE,      3},
    {"q5_0",    T(Q5_0),   T(Q6_K),   T(Q5_0),   T(Q5_0),   T(Q5_0),   NONE,      NONE,      8},
    {"q5_1",    T(Q5_1),   T(Q6_K),   T(Q5_1),   T(Q5_1),   T(Q5_1),   NONE,      NONE,      9},
    {"q2_k",    T(Q2_K),   T(Q6_K),   T(Q3_K),   T(Q3_K),   T(Q3_K),   NONE,      NONE,      10},
    {"q3_k_s",  T(Q3_K),   T(Q6_K),   T(Q3_K),   T(Q3_K),   T(Q3_K),   NONE,      NONE,      11},
    {"q3_k_m",  T(Q3_K),   T(Q6_K),   T(Q4_K),   T(Q4_K),   T(Q4_K),   NONE,      T(Q5_K),   12},
    {"q3_k_l",  T(Q3_K),   T(Q6_K),   T(Q5_K),   T(Q5_K),   T(Q5_K),   NONE,      NONE,      13},
    {"q4_k_m",  T(Q4_K),   T(Q6_K),   T(Q4_K),   T(Q4_K),   T(Q4_K),   T(Q6_K),   NONE,      15},
    {"q5_k_m",  T(Q5_K),   T(Q6_K),   T(Q5_K),   T(Q5_K),   T(Q5_K),   T(Q6_K),   NONE,      17},
    {"q6_k",    T(Q6_K),   T(Q6_K),   T(Q6_K),   T(Q6_K),   T(Q6_K),   NONE,      NONE,      18},
    {"iq4_nl",  T(IQ4_NL), T(Q6_K),   T(IQ4_NL), T(IQ4_NL), T(IQ4_NL), NONE,      NONE,      25},
    {"iq4_xs",  T(IQ4_XS), T(Q6_K),   T(IQ4_XS), T(IQ4_XS), T(IQ4_XS), NONE,      NONE,      30},
};
// clang-format on

#define TYPE_NAMES                                                                                 \
    "f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q2_k|q3_k_s|q3_k_m|q3_k_l|q4_k_m|q5_k_m|q6_k|iq4_nl|iq4_xs"

static void usage(FILE *out)
{
    fprintf(out, "usage: folio quantize IN.gguf OUT.gguf --type " TYPE_NAMES " [--threads N]\n"
                 "\n"
                 "Rewrites a GGUF model with its matrices (2-D tensors) in another type; keys\n"
                 "and 1-D tensors (norms) are copied.  llama.cpp reads the result.\n"
                 "  f16, bf16, q8_0  every matrix that type\n"
                 "  q4_0, q4_1,      that type, output.weight Q6_K\n"
                 "  q5_0, q5_1\n"
                 "  q6_k             every matrix Q6_K\n"
                 "  q4_k_m           Q4_K; Q6_K for output.weight and for attn_v and ffn_down\n"
                 "                   of the first and last eighth of the layers and every\n"
                 "                   third layer between (llama.cpp's choice)\n"
                 "  q5_k_m           as q4_k_m with Q5_K in place of Q4_K\n"
                 "  q3_k_s           Q3_K; output.weight Q6_K\n"
                 "  q3_k_m           Q3_K; Q4_K for attn_v, ffn_down and attn_output (Q5_K for\n"
                 "                   attn_v of the first two layers and ffn_down of the first\n"
                 "                   sixteenth); output.weight Q6_K\n"
                 "  q3_k_l           Q3_K; Q5_K for attn_v, ffn_down and attn_output;\n"
                 "                   output.weight Q6_K\n"
                 "  q2_k             Q2_K; Q3_K for attn_v, ffn_down and attn_output;\n"
                 "                   output.weight Q6_K\n"
                 "  iq4_nl, iq4_xs   that type, output.weight Q6_K\n"
                 "Tied embeddings: token_embd.weight takes output.weight's type.  Rows that\n"
                 "are not a multiple of 256 fall back from Q4_K to Q5_0, Q5_K to Q5_1 and\n"
                 "Q6_K to Q8_0, and Q2_K, Q3_K and IQ4_XS to IQ4_NL (as llama.cpp does);\n"
                 "rows not a multiple of 32 stay F16.\n"
                 "--threads N: threads converting each tensor's rows (default: the online\n"
                 "CPUs); the output is the same for any N.\n");
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

static enum gguf_tensor_type pick(const struct mix *mx, const char *name, int64_t row,
                                  int64_t n_layers, bool has_output)
{
    int t = mx->base, layer = -1, off = 0;
    if (!strcmp(name, "output.weight") || (!has_output && !strcmp(name, "token_embd.weight"))) {
        t = mx->output;
    } else if (sscanf(name, "blk.%d.%n", &layer, &off) == 1 && off > 0) {
        const char *rest = name + off;
        const bool v = !strcmp(rest, "attn_v.weight"), down = !strcmp(rest, "ffn_down.weight");
        if (v || down) {
            t = v ? mx->attn_v : mx->ffn_down;
            if (mx->more_bits != NONE && more_bits(layer, n_layers))
                t = mx->more_bits;
            if (mx->early != NONE && (v ? layer < 2 : layer < n_layers / 16))
                t = mx->early;
        } else if (!strcmp(rest, "attn_output.weight")) {
            t = mx->attn_out;
        }
    }
    return fallback((enum gguf_tensor_type)t, row);
}

static int64_t block_count(const gguf_file_t *f)
{
    int64_t a = gguf_find_key(f, "general.architecture");
    const char *arch;
    size_t len;
    char key[128];
    int64_t n = 0;
    if (a < 0 || gguf_get_str(f, a, &arch, &len) || len > 64)
        return 0;
    snprintf(key, sizeof(key), "%.*s.block_count", (int)len, arch);
    int64_t k = gguf_find_key(f, key);
    if (k < 0 || gguf_get_i64(f, k, &n))
        return 0;
    return n;
}

/* One tensor's conversion, shared by the pool's threads: each takes the
 * next chunk of rows from the counter until none is left. */
struct convert_job {
    enum gguf_tensor_type t;
    const float *src;
    uint8_t *dst;
    int64_t row, n_rows, chunk; /* elements per row, rows, rows per take */
    size_t row_bytes;
    atomic_int_fast64_t next;
    atomic_int rc;
};

static void convert_rows(void *arg, int ith, int nth)
{
    struct convert_job *j = arg;
    (void)ith;
    (void)nth;
    for (;;) {
        const int64_t r0 = atomic_fetch_add(&j->next, j->chunk);
        if (r0 >= j->n_rows)
            return;
        const int64_t nr = FOLIO_MIN(j->chunk, j->n_rows - r0);
        const int rc = gguf_tensor_from_f32(j->t, j->src + r0 * j->row,
                                            j->dst + (size_t)r0 * j->row_bytes, nr * j->row);
        if (rc)
            atomic_store(&j->rc, rc);
    }
}

/* src (n elements, rows of `row`) to dst in type t on the pool. */
static int convert(pool_t *pool, enum gguf_tensor_type t, const float *src, void *dst, int64_t n,
                   int64_t row)
{
    struct convert_job j = {.t = t, .src = src, .dst = dst, .row = row, .n_rows = n / row};
    j.row_bytes = gguf_tensor_nbytes(t, row);
    if (!j.row_bytes || n % row)
        return -EINVAL;
    j.chunk = FOLIO_MAX(1, 16384 / row); /* ~16K elements a take */
    atomic_init(&j.next, 0);
    atomic_init(&j.rc, 0);
    pool_run(pool, convert_rows, &j);
    return atomic_load(&j.rc);
}

int cmd_quantize(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *type = NULL;
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--type") && i + 1 < argc) {
            type = argv[++i];
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            char *end;
            errno = 0;
            threads = strtol(argv[++i], &end, 10);
            if (errno || end == argv[i] || *end || threads < 1 || threads > 1024) {
                fprintf(stderr, "folio quantize: --threads must be 1..1024, not '%s'\n", argv[i]);
                return 2;
            }
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "folio quantize: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!in) {
            in = argv[i];
        } else if (!out) {
            out = argv[i];
        } else {
            usage(stderr);
            return 2;
        }
    }
    const struct mix *mx = NULL;
    for (size_t i = 0; type && i < FOLIO_ARRAY_LEN(mixes); i++)
        if (!strcasecmp(type, mixes[i].name))
            mx = &mixes[i];
    if (!in || !out || !mx) {
        fprintf(stderr, "folio quantize: %s\n",
                !in || !out ? "IN.gguf and OUT.gguf are required"
                            : "--type must be one of " TYPE_NAMES);
        usage(stderr);
        return 2;
    }

    char err[512];
    gguf_file_t *f = NULL;
    gguf_writer_t *w = NULL;
    pool_t *pool = NULL;
    int rc = gguf_open(in, &f, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "folio quantize: %s\n", err);
        return 1;
    }
    if ((rc = pool_new((int)FOLIO_MAX(1, threads), &pool))) {
        fprintf(stderr, "folio quantize: cannot start %ld threads: %s\n", threads, strerror(-rc));
        gguf_close(f);
        return 1;
    }
    const int64_t nt = gguf_n_tensors(f), n_layers = block_count(f);
    void **bufs = folio_calloc((size_t)nt + 1, sizeof(void *));
    float *tmp = NULL;
    int counts[64] = {0};
    err[0] = 0;
    if (!bufs || (rc = gguf_writer_new(&w)))
        goto oom;
    bool is_quant = mx->base != T(F16) && mx->base != T(BF16);
    for (int64_t i = 0; i < gguf_n_keys(f); i++) {
        const char *k = gguf_key_name(f, i);
        if (!strcmp(k, "general.file_type") || !strcmp(k, "general.quantization_version"))
            continue;
        if ((rc = gguf_w_copy_key(w, f, i)))
            goto oom;
    }
    if ((rc = gguf_w_u32(w, "general.file_type", mx->file_type)) ||
        (is_quant && (rc = gguf_w_u32(w, "general.quantization_version", 2))))
        goto oom;
    const bool has_output = gguf_find_tensor(f, "output.weight") >= 0;
    for (int64_t i = 0; i < nt; i++) {
        struct gguf_tensor_info ti;
        gguf_tensor_get(f, i, &ti);
        int64_t n = 1;
        for (int d = 0; d < ti.n_dims; d++)
            n *= ti.ne[d];
        if (ti.n_dims < 2) {
            rc = gguf_w_tensor(w, ti.name, ti.type, ti.n_dims, ti.ne, ti.data);
            counts[ti.type]++;
        } else {
            const enum gguf_tensor_type t = pick(mx, ti.name, ti.ne[0], n_layers, has_output);
            folio_free(tmp);
            tmp = folio_malloc((size_t)n * sizeof(float));
            bufs[i] = folio_malloc(gguf_tensor_nbytes(t, n));
            if (!tmp || !bufs[i]) {
                rc = -ENOMEM;
                goto oom;
            }
            if ((rc = gguf_tensor_to_f32(ti.type, ti.data, tmp, n)) ||
                (rc = convert(pool, t, tmp, bufs[i], n, ti.ne[0]))) {
                snprintf(err, sizeof(err), "%s: tensor '%s': cannot convert %s to %s", in, ti.name,
                         gguf_tensor_type_name(ti.type), gguf_tensor_type_name(t));
                goto fail;
            }
            rc = gguf_w_tensor(w, ti.name, t, ti.n_dims, ti.ne, bufs[i]);
            counts[t]++;
        }
        if (rc)
            goto oom;
    }
    if ((rc = gguf_writer_write(w, out, err, sizeof(err))))
        goto fail;
    printf("%s: %" PRId64 " tensors:", out, nt);
    for (int t = 0; t < 64; t++)
        if (counts[t])
            printf(" %s x %d", gguf_tensor_type_name((enum gguf_tensor_type)t), counts[t]);
    printf("\n");
    goto out;
oom:
    snprintf(err, sizeof(err), "%s: cannot build the output: %s", out, strerror(-rc));
fail:
    fprintf(stderr, "folio quantize: %s\n", err);
out:
    for (int64_t i = 0; bufs && i < nt; i++)
        folio_free(bufs[i]);
    folio_free(bufs);
    folio_free(tmp);
    gguf_writer_free(w);
    gguf_close(f);
    pool_free(pool);
    return rc ? 1 : 0;
}
