/*
 * tools/cmd_quantize.c — `folio quantize IN.gguf OUT.gguf --type MIX`:
 * rewrite a GGUF model with its matrices in other types.
 *
 * Every key is copied as it is (general.file_type is set to llama.cpp's
 * number for the mix, general.quantization_version to 2 for quantized
 * mixes).  1-D tensors (norms) are copied as they are.  Each 2-D tensor
 * gets the type tools/quantize_mix.c picks for it (the mix, then the
 * command line's overrides): a tensor already of that type is copied byte
 * for byte; any other is converted to f32 (gguf_tensor_to_f32) and then to
 * that type (gguf_tensor_from_f32) when the writer reaches it
 * (gguf_writer_write_fill), so one tensor's f32 and converted bytes are in
 * memory at a time, not the whole output.  Converting a tensor that is already
 * quantized to another quantized type loses more than quantizing from the
 * 16- or 32-bit original, so, as llama.cpp's quantizer does, it is refused
 * unless --allow-requantize says otherwise (16-bit targets are always
 * allowed).
 *
 * --threads N (default: the online CPUs) converts each tensor's rows on N
 * threads, a chunk of rows at a time; every block is quantized on its own,
 * so the output is the same bytes for any N.  --dry-run picks the types and
 * prints the summary without converting or writing anything.
 *
 * --imatrix FILE reads an importance matrix (`folio imatrix`, or llama.cpp's
 * imatrix GGUF): a matrix it has an entry for, converted to a K-quant, IQ4,
 * Q4_0, Q4_1, Q5_0 or Q5_1 type, picks its scales by the rounding error
 * weighted by each column's mean square activation (gguf_tensor_from_f32_w);
 * the other types and matrices without an entry quantize as without it (an
 * entry whose length is not the matrix's row is not used).  The file's
 * name, entries and chunks go into the output as quantize.imatrix.file,
 * quantize.imatrix.entries_count and quantize.imatrix.chunks_count, as
 * llama.cpp's quantizer records them.  Some mixes differ under a matrix, as
 * llama.cpp's do (quantize_mix.c), and q2_k_s is refused without one.
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
#include "imatrix_file.h"
#include "quantize_mix.h"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: folio quantize IN.gguf OUT.gguf --type MIX [--threads N] [--pure]\n"
        "                      [--output-tensor-type TYPE] [--token-embedding-type TYPE]\n"
        "                      [--leave-output-tensor] [--tensor-type PATTERN=TYPE]...\n"
        "                      [--allow-requantize] [--imatrix FILE] [--dry-run]\n"
        "\n"
        "Rewrites a GGUF model with its matrices (2-D tensors) in other types; keys\n"
        "and 1-D tensors (norms) are copied.  llama.cpp reads the result.\n"
        "MIX (the per-tensor types llama.cpp's quantizer gives):\n"
        "  f16, bf16, q8_0  every matrix that type\n"
        "  q4_0, q4_1,      that type, output.weight Q6_K\n"
        "  q5_0, q5_1\n"
        "  q6_k             every matrix Q6_K\n"
        "  q4_k_m           Q4_K; Q6_K for output.weight and for attn_v and ffn_down\n"
        "                   of the first and last eighth of the layers and every\n"
        "                   third layer between (llama.cpp's choice)\n"
        "  q5_k_m           as q4_k_m with Q5_K in place of Q4_K\n"
        "  q4_k_s           Q4_K; Q5_K for attn_v of layers 0-3 and ffn_down of the\n"
        "                   first eighth; output.weight Q6_K\n"
        "  q5_k_s           Q5_K; output.weight Q6_K\n"
        "  q3_k_s           Q3_K; output.weight Q6_K\n"
        "  q3_k_m           Q3_K; Q4_K for attn_v, ffn_down and attn_output (Q5_K for\n"
        "                   attn_v of the first two layers and ffn_down of the first\n"
        "                   sixteenth); output.weight Q6_K\n"
        "  q3_k_l           Q3_K; Q5_K for attn_v, ffn_down and attn_output;\n"
        "                   output.weight Q6_K\n"
        "  q2_k             Q2_K; Q3_K for attn_v, ffn_down and attn_output (attn_v\n"
        "                   Q4_K where 4+ query heads share a KV head);\n"
        "                   output.weight Q6_K\n"
        "  q2_k_s           Q2_K; Q4_K for ffn_down of the first eighth (and attn_v\n"
        "                   where 4+ query heads share a KV head); output.weight Q6_K;\n"
        "                   needs --imatrix\n"
        "  iq4_nl, iq4_xs   that type; Q5_K for attn_v where 4+ query heads share a KV\n"
        "                   head, and without --imatrix for ffn_down of the first\n"
        "                   eighth; output.weight Q6_K\n"
        "With --imatrix, q4_0 and q5_0 make ffn_down of the first eighth Q4_1, Q5_1.\n"
        "Tied embeddings: token_embd.weight is the output matrix.  Rows that are not\n"
        "a multiple of 256 fall back from Q4_K to Q5_0, Q5_K to Q5_1 and Q6_K to\n"
        "Q8_0, Q2_K and Q3_K to Q4_0 and IQ4_XS to IQ4_NL (as llama.cpp does); rows\n"
        "not a multiple of 32 stay F16.\n"
        "Options (TYPE: %s):\n"
        "  --threads N                 threads converting each tensor's rows\n"
        "                              (default: the online CPUs); the same bytes for any N\n"
        "  --pure                      every matrix the mix's base type, output included\n"
        "  --output-tensor-type TYPE   the output matrix's type\n"
        "  --token-embedding-type TYPE token_embd.weight's type\n"
        "  --leave-output-tensor       the output matrix keeps its type\n"
        "  --tensor-type PATTERN=TYPE  matrices whose name matches PATTERN (POSIX\n"
        "                              extended regex, anywhere in the name) get TYPE;\n"
        "                              repeatable, the first match wins, over all of the above\n"
        "  --allow-requantize          convert matrices that are already quantized\n"
        "                              (refused otherwise: it loses more than quantizing\n"
        "                              from the original)\n"
        "  --imatrix FILE              an importance matrix (folio imatrix): K-quant, IQ4,\n"
        "                              Q4_0, Q4_1, Q5_0 and Q5_1 matrices weight each\n"
        "                              column's rounding error by its mean square\n"
        "                              activation\n"
        "  --dry-run                   print the summary; convert and write nothing\n",
        quant_type_names);
}

static bool is_float(enum gguf_tensor_type t)
{
    return t == GGUF_TENSOR_F32 || t == GGUF_TENSOR_F16 || t == GGUF_TENSOR_BF16;
}

/* One tensor's conversion, shared by the pool's threads: each takes the
 * next chunk of rows from the counter until none is left. */
struct convert_job {
    enum gguf_tensor_type t;
    const float *src;
    const float *qw; /* [row] importance of each column, or NULL */
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
        const int rc =
            gguf_tensor_from_f32_w(j->t, j->src + r0 * j->row, j->dst + (size_t)r0 * j->row_bytes,
                                   nr * j->row, j->qw, j->row);
        if (rc)
            atomic_store(&j->rc, rc);
    }
}

/* src (n elements, rows of `row`, columns weighted by qw or NULL) to dst
 * in type t on the pool. */
static int convert(pool_t *pool, enum gguf_tensor_type t, const float *src, const float *qw,
                   void *dst, int64_t n, int64_t row)
{
    struct convert_job j = {
        .t = t, .src = src, .qw = qw, .dst = dst, .row = row, .n_rows = n / row};
    j.row_bytes = gguf_tensor_nbytes(t, row);
    if (!j.row_bytes || n % row)
        return -EINVAL;
    j.chunk = FOLIO_MAX(1, 16384 / row); /* ~16K elements a take */
    atomic_init(&j.next, 0);
    atomic_init(&j.rc, 0);
    pool_run(pool, convert_rows, &j);
    return atomic_load(&j.rc);
}

static int64_t n_elems(const struct gguf_tensor_info *ti)
{
    int64_t n = 1;
    for (int d = 0; d < ti->n_dims; d++)
        n *= ti->ne[d];
    return n;
}

/* The architecture's integer `ARCH.what` (block_count, ...), 0 if absent. */
static int64_t arch_int(const gguf_file_t *f, const char *what)
{
    int64_t a = gguf_find_key(f, "general.architecture");
    const char *arch;
    size_t len;
    char key[128];
    int64_t n = 0;
    if (a < 0 || gguf_get_str(f, a, &arch, &len) || len > 64)
        return 0;
    snprintf(key, sizeof(key), "%.*s.%s", (int)len, arch, what);
    int64_t k = gguf_find_key(f, key);
    if (k < 0 || gguf_get_i64(f, k, &n))
        return 0;
    return n;
}

/* Parses the command line into o (and the rest); 0, or 2 after a message. */
static int parse_args(int argc, char **argv, struct quant_opts *o, const char **in,
                      const char **out, const char **imatrix, int32_t *threads, bool *allow_requant,
                      bool *dry_run)
{
    const char *mix = NULL;
    char err[512];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--pure")) {
            o->pure = true;
        } else if (!strcmp(a, "--leave-output-tensor")) {
            o->leave_output = true;
        } else if (!strcmp(a, "--allow-requantize")) {
            *allow_requant = true;
        } else if (!strcmp(a, "--dry-run")) {
            *dry_run = true;
        } else if (!strcmp(a, "--type") || !strcmp(a, "--threads") ||
                   !strcmp(a, "--output-tensor-type") || !strcmp(a, "--token-embedding-type") ||
                   !strcmp(a, "--tensor-type") || !strcmp(a, "--imatrix")) {
            if (i + 1 == argc) {
                fprintf(stderr, "folio quantize: %s needs a value\n", a);
                return 2;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--type")) {
                mix = v;
            } else if (!strcmp(a, "--imatrix")) {
                *imatrix = v;
            } else if (!strcmp(a, "--threads")) {
                if (folio_arg_int(v, 1, 1024, threads)) {
                    fprintf(stderr, "folio quantize: --threads must be 1..1024, not '%s'\n", v);
                    return 2;
                }
            } else if (!strcmp(a, "--tensor-type")) {
                if (quant_opts_add_override(o, v, err, sizeof(err))) {
                    fprintf(stderr, "folio quantize: %s\n", err);
                    return 2;
                }
            } else {
                int *t = !strcmp(a, "--output-tensor-type") ? &o->output_type : &o->embd_type;
                if ((*t = quant_type_parse(v)) == QUANT_TYPE_NONE) {
                    fprintf(stderr, "folio quantize: %s must be one of %s, not '%s'\n", a,
                            quant_type_names, v);
                    return 2;
                }
            }
        } else if (a[0] == '-') {
            fprintf(stderr, "folio quantize: unknown argument '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!*in) {
            *in = a;
        } else if (!*out) {
            *out = a;
        } else {
            fprintf(stderr, "folio quantize: one IN.gguf and one OUT.gguf, not also '%s'\n", a);
            return 2;
        }
    }
    if (!*in || !*out) {
        fprintf(stderr, "folio quantize: IN.gguf and OUT.gguf are required\n");
        usage(stderr);
        return 2;
    }
    if (!(o->mix = quant_mix_find(mix))) {
        fprintf(stderr, "folio quantize: --type must be one of %s%s%s%s\n", quant_mix_names,
                mix ? ", not '" : "", mix ? mix : "", mix ? "'" : "");
        return 2;
    }
    o->imatrix = *imatrix != NULL;
    if (quant_mix_needs_imatrix(o->mix) && !o->imatrix) {
        fprintf(stderr,
                "folio quantize: --type %s needs --imatrix FILE (folio imatrix): Q2_K matrices "
                "quantized without one lose too much\n",
                mix);
        return 2;
    }
    return 0;
}

static void print_summary(const char *out, bool dry_run, int64_t nt, const int *counts,
                          uint64_t bytes_in, uint64_t bytes_out)
{
    printf("%s%s: %" PRId64 " tensors:", out, dry_run ? " (dry run, nothing written)" : "", nt);
    for (int t = 0; t < 64; t++)
        if (counts[t])
            printf(" %s x %d", gguf_tensor_type_name((enum gguf_tensor_type)t), counts[t]);
    printf("; %.2f MiB of tensor data (the input's %.2f MiB)\n", (double)bytes_out / 1048576.0,
           (double)bytes_in / 1048576.0);
}

/* What the writer's fill needs to convert tensor idx when it is written:
 * one tensor's f32 and converted bytes in memory at a time. */
struct fill_job {
    const gguf_file_t *f;
    const char *in;
    const enum gguf_tensor_type *to;
    pool_t *pool;
    const struct imatrix *im; /* --imatrix, or NULL */
    float *tmp;               /* [most elements of a converted tensor] */
    void *buf;                /* [most bytes of a converted tensor] */
};

static int fill_tensor(void *arg, int64_t idx, const void **data, char *err, size_t errlen)
{
    struct fill_job *j = arg;
    struct gguf_tensor_info ti;
    gguf_tensor_get(j->f, idx, &ti);
    const int64_t n = n_elems(&ti);
    int rc;
    if ((rc = gguf_tensor_to_f32(ti.type, ti.data, j->tmp, n)) ||
        (rc =
             convert(j->pool, j->to[idx], j->tmp,
                     j->im ? imatrix_find(j->im, ti.name, ti.ne[0]) : NULL, j->buf, n, ti.ne[0]))) {
        snprintf(err, errlen, "%s: tensor '%s': cannot convert %s to %s", j->in, ti.name,
                 gguf_tensor_type_name(ti.type), gguf_tensor_type_name(j->to[idx]));
        return rc;
    }
    *data = j->buf;
    return 0;
}

int cmd_quantize(int argc, char **argv)
{
    struct quant_opts o = {.output_type = QUANT_TYPE_NONE, .embd_type = QUANT_TYPE_NONE};
    const char *in = NULL, *out = NULL, *im_path = NULL;
    int32_t threads = (int32_t)FOLIO_MAX(1, sysconf(_SC_NPROCESSORS_ONLN));
    bool allow_requant = false, dry_run = false;
    int rc = parse_args(argc, argv, &o, &in, &out, &im_path, &threads, &allow_requant, &dry_run);
    if (rc) {
        quant_opts_free(&o);
        return rc;
    }

    char err[512];
    gguf_file_t *f = NULL;
    gguf_writer_t *w = NULL;
    pool_t *pool = NULL;
    enum gguf_tensor_type *to = NULL;
    struct fill_job fj = {.in = in};
    struct imatrix im = {0};
    int64_t nt = 0;
    err[0] = 0;
    if ((rc = gguf_open(in, &f, err, sizeof(err))) ||
        (im_path && (rc = imatrix_load(im_path, &im, err, sizeof(err)))))
        goto fail;
    nt = gguf_n_tensors(f);
    const int64_t n_layers = arch_int(f, "block_count");
    const int64_t n_kv_heads = arch_int(f, "attention.head_count_kv");
    const int64_t n_gqa = n_kv_heads > 0 ? arch_int(f, "attention.head_count") / n_kv_heads : 0;
    const bool has_output = gguf_find_tensor(f, "output.weight") >= 0;
    to = folio_calloc((size_t)nt + 1, sizeof(*to));
    if (!to) {
        rc = -ENOMEM;
        goto oom;
    }

    /* Every tensor's type first, so a refusal or a dry run costs nothing. */
    int counts[64] = {0}, n_im_want = 0, n_im_have = 0;
    uint64_t bytes_in = 0, bytes_out = 0;
    int64_t most_n = 0; /* elements and bytes of the largest tensor converted */
    size_t most_bytes = 0;
    for (int64_t i = 0; i < nt; i++) {
        struct gguf_tensor_info ti;
        gguf_tensor_get(f, i, &ti);
        const int64_t n = n_elems(&ti);
        to[i] = ti.n_dims < 2
                    ? ti.type
                    : quant_pick(&o, ti.name, ti.ne[0], ti.type, n_layers, n_gqa, has_output);
        if (to[i] != ti.type && !is_float(ti.type) && !is_float(to[i]) && !allow_requant) {
            snprintf(err, sizeof(err),
                     "%s: tensor '%s' is %s already; converting it to %s loses more than "
                     "quantizing the 16- or 32-bit original (pass --allow-requantize to do it "
                     "anyway)",
                     in, ti.name, gguf_tensor_type_name(ti.type), gguf_tensor_type_name(to[i]));
            rc = -EINVAL;
            goto fail;
        }
        counts[to[i]]++;
        if (im_path && to[i] != ti.type && gguf_tensor_uses_imatrix(to[i])) {
            n_im_want++;
            n_im_have += imatrix_find(&im, ti.name, ti.ne[0]) != NULL;
        }
        bytes_in += ti.nbytes;
        bytes_out += gguf_tensor_nbytes(to[i], n);
        if (to[i] != ti.type) {
            most_n = FOLIO_MAX(most_n, n);
            most_bytes = FOLIO_MAX(most_bytes, gguf_tensor_nbytes(to[i], n));
        }
    }
    if (im_path)
        printf("%s: importance weights for %d of the %d matrices whose types use them\n", im_path,
               n_im_have, n_im_want);
    if (dry_run) {
        print_summary(out, true, nt, counts, bytes_in, bytes_out);
        goto out;
    }

    if ((rc = pool_new(threads, &pool))) {
        snprintf(err, sizeof(err), "cannot start %d threads: %s", threads, strerror(-rc));
        goto fail;
    }
    fj = (struct fill_job){.f = f, .in = in, .to = to, .pool = pool, .im = im_path ? &im : NULL};
    fj.tmp = folio_malloc((size_t)FOLIO_MAX(most_n, 1) * sizeof(float));
    fj.buf = folio_malloc(FOLIO_MAX(most_bytes, 1));
    if (!fj.tmp || !fj.buf) {
        rc = -ENOMEM;
        goto oom;
    }
    if ((rc = gguf_writer_new(&w)))
        goto oom;
    for (int64_t i = 0; i < gguf_n_keys(f); i++) {
        const char *k = gguf_key_name(f, i);
        if (!strcmp(k, "general.file_type") || !strcmp(k, "general.quantization_version") ||
            !strncmp(k, "quantize.imatrix.", 17) || !strncmp(k, "split.", 6))
            continue; /* rewritten below; a split model's input is written whole */
        if ((rc = gguf_w_copy_key(w, f, i)))
            goto oom;
    }
    if ((rc = gguf_w_u32(w, "general.file_type", quant_mix_file_type(o.mix))) ||
        (quant_mix_is_quantized(o.mix) && (rc = gguf_w_u32(w, "general.quantization_version", 2))))
        goto oom;
    if (im_path && ((rc = gguf_w_str(w, "quantize.imatrix.file", im_path)) ||
                    (rc = gguf_w_i32(w, "quantize.imatrix.entries_count", im.n)) ||
                    (rc = gguf_w_i32(w, "quantize.imatrix.chunks_count", im.chunks))))
        goto oom;
    /* a tensor whose type stays is copied from the mapping; the others are
     * converted by fill_tensor as the writer reaches them */
    for (int64_t i = 0; i < nt; i++) {
        struct gguf_tensor_info ti;
        gguf_tensor_get(f, i, &ti);
        if ((rc = gguf_w_tensor(w, ti.name, to[i], ti.n_dims, ti.ne,
                                to[i] == ti.type ? ti.data : NULL)))
            goto oom;
    }
    if ((rc = gguf_writer_write_fill(w, out, fill_tensor, &fj, err, sizeof(err))))
        goto fail;
    print_summary(out, false, nt, counts, bytes_in, bytes_out);
    goto out;
oom:
    snprintf(err, sizeof(err), "%s: cannot build the output: %s", out, strerror(-rc));
fail:
    fprintf(stderr, "folio quantize: %s\n", err);
out:
    folio_free(to);
    folio_free(fj.tmp);
    folio_free(fj.buf);
    gguf_writer_free(w);
    gguf_close(f);
    pool_free(pool);
    imatrix_free(&im);
    quant_opts_free(&o);
    return rc ? 1 : 0;
}
