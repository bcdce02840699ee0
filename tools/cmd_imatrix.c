/*
 * tools/cmd_imatrix.c — `folio imatrix`: an importance matrix of a model
 * on a text, for `folio quantize --imatrix`.
 *
 *   folio imatrix --model FILE|default (--file TEXT | --tokens-file IDS) [-o OUT]
 *                 [--ctx N] [--chunks N] [--threads N] [--matmul auto|openblas|onednn]
 *
 * The text runs in chunks of --ctx tokens (default 512) as `folio
 * perplexity` runs it (tools/text_eval.h: each chunk a fresh sequence
 * starting with BOS); every step adds, for each input a weight matrix
 * multiplies, the squares of its columns over the step's rows
 * (struct model_act_stats).  A column's mean square is how much a weight
 * in that column moves the product on this text: a quantizer that weights
 * each weight's rounding error by it keeps the columns that matter
 * closest.  The perplexity of the text is printed as it goes.
 *
 * OUT (default imatrix.gguf) is a GGUF file in the layout llama.cpp's
 * importance matrices use (general.type "imatrix"): for each weight
 * matrix W of the model, `W.in_sum2` (F32, [K]: the sums of squares of
 * W's K input columns) and `W.counts` (F32, [1]: the rows summed), and
 * the keys imatrix.datasets (the text's path), imatrix.chunk_count and
 * imatrix.chunk_size.  Q, K and V share their input, as do gate and up;
 * output.weight is there when the model has it apart from token_embd
 * (its input counted over the chunks' scored rows, the second halves).
 *
 * Exit status: 0, 1 failure (the message names the file), 2 usage.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"
#include "folio/gguf.h"
#include "folio/model.h"
#include "folio_cmds.h"
#include "text_eval.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: folio imatrix --model FILE|default (--file TEXT | --tokens-file IDS)\n"
                 "                     [-o OUT] [--ctx N] [--chunks N] [--threads N]\n"
                 "                     [--matmul auto|openblas|onednn]\n"
                 "\n"
                 "Runs the text through the model in chunks of --ctx tokens (default 512) and\n"
                 "writes OUT (default imatrix.gguf): for every weight matrix, the sums of the\n"
                 "squares of its input columns over the text (llama.cpp's imatrix GGUF\n"
                 "layout).  `folio quantize --imatrix OUT` weights each weight's rounding\n"
                 "error by its column's mean square.\n");
}

/* The matrices multiplying each input of a layer (enum model_act). */
static const char *const act_users[MODEL_ACT_PER_LAYER][4] = {
    [MODEL_ACT_ATTN_IN] = {"attn_q", "attn_k", "attn_v", NULL},
    [MODEL_ACT_ATTN_OUT] = {"attn_output", NULL},
    [MODEL_ACT_FFN_IN] = {"ffn_gate", "ffn_up", NULL},
    [MODEL_ACT_FFN_HIDDEN] = {"ffn_down", NULL},
};

/* Writes st to out: each matrix's entry is its input's sums (as floats)
 * and rows; has_output: the model has output.weight of its own. */
static int write_imatrix(const struct model_act_stats *st, int32_t n_layers, bool has_output,
                         const char *out, const char *dataset, int32_t n_chunks, int32_t n_ctx,
                         char *err, size_t errlen)
{
    gguf_writer_t *w = NULL;
    size_t total = 0;
    for (int32_t i = 0; i < st->n_inputs; i++)
        total += (size_t)st->len[i];
    float *sums = malloc(sizeof(float) * total);
    float *counts = malloc(sizeof(float) * (size_t)st->n_inputs);
    char(*names)[80] = malloc(sizeof(*names) * (size_t)(n_layers * 7 + 1) * 2);
    int rc = sums && counts && names ? gguf_writer_new(&w) : -ENOMEM;
    if (rc < 0)
        goto out;
    for (size_t k = 0; k < total; k++)
        sums[k] = (float)st->sq[k];
    for (int32_t i = 0; i < st->n_inputs; i++)
        counts[i] = (float)st->rows[i];
    const char *dsets[] = {dataset};
    if ((rc = gguf_w_str(w, "general.type", "imatrix")) < 0 ||
        (rc = gguf_w_arr_str(w, "imatrix.datasets", dsets, 1)) < 0 ||
        (rc = gguf_w_u32(w, "imatrix.chunk_count", (uint32_t)n_chunks)) < 0 ||
        (rc = gguf_w_u32(w, "imatrix.chunk_size", (uint32_t)n_ctx)) < 0)
        goto out;
    int n_names = 0;
    for (int32_t i = 0; i < st->n_inputs; i++) {
        const bool is_out = i + 1 == st->n_inputs;
        if (is_out && !has_output)
            continue;
        const char *const *users =
            is_out ? (const char *const[]){"output", NULL} : act_users[i % MODEL_ACT_PER_LAYER];
        for (int u = 0; users[u]; u++) {
            char *sn = names[n_names++], *cn = names[n_names++], base[48];
            if (is_out)
                snprintf(base, sizeof(base), "output.weight");
            else
                snprintf(base, sizeof(base), "blk.%d.%s.weight", i / MODEL_ACT_PER_LAYER, users[u]);
            snprintf(sn, 80, "%s.in_sum2", base);
            snprintf(cn, 80, "%s.counts", base);
            /* one matrix: [K] and [1], trailing dimensions of 1 left out */
            const int64_t ne_s[1] = {st->len[i]}, ne_c[1] = {1};
            if ((rc = gguf_w_tensor(w, sn, GGUF_TENSOR_F32, 1, ne_s, sums + st->off[i])) < 0 ||
                (rc = gguf_w_tensor(w, cn, GGUF_TENSOR_F32, 1, ne_c, counts + i)) < 0)
                goto out;
        }
    }
    rc = gguf_writer_write(w, out, err, errlen);
out:
    if (rc < 0 && !err[0])
        snprintf(err, errlen, "%s: cannot write: %s", out, strerror(-rc));
    gguf_writer_free(w);
    free(sums);
    free(counts);
    free(names);
    return rc;
}

/* Whether the model has an output matrix of its own (not tied to
 * token_embd); the embedded default has. */
static bool has_own_output(const char *model_path)
{
    if (!strcmp(model_path, "default"))
        return true;
    gguf_file_t *f = NULL;
    char err[256];
    if (gguf_open(model_path, &f, err, sizeof(err)) < 0)
        return false;
    const bool has = gguf_find_tensor(f, "output.weight") >= 0;
    gguf_close(f);
    return has;
}

int cmd_imatrix(int argc, char **argv)
{
    struct text_opts o = TEXT_OPTS_DEFAULT;
    const char *out = "imatrix.gguf";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "folio imatrix: %s needs a value\n", a);
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        int rc = text_opt(&o, a, v);
        if (rc) {
            rc = rc < 0;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            out = v;
        } else {
            fprintf(stderr, "folio imatrix: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (rc) {
            fprintf(stderr, "folio imatrix: bad value for %s: '%s'\n", a, v);
            return 2;
        }
    }
    const char *model_path = o.model, *text_path = o.text, *ids_path = o.ids;
    const int32_t n_ctx = o.n_ctx;
    if (!model_path || !text_path == !ids_path) {
        fprintf(stderr,
                "folio imatrix: --model and one of --file and --tokens-file are required\n");
        usage(stderr);
        return 2;
    }

    char err[512] = "";
    int status = 1;
    int32_t *toks = NULL, n_toks = 0, bos = -1;
    struct runner run = {0};
    float *logits = NULL;
    double *lp = NULL;
    const char *src = ids_path ? ids_path : text_path;
    if (tokenize_file(model_path, ids_path ? NULL : text_path, ids_path, &toks, &n_toks, &bos, err,
                      sizeof(err)) < 0 ||
        runner_new(&run, model_path, n_ctx, o.threads, FOLIO_F32, o.matmul, true, err,
                   sizeof(err)) < 0)
        goto fail;
    const int32_t n_chunks = FOLIO_MIN(o.max_chunks, n_toks / n_ctx);
    if (n_chunks < 1) {
        snprintf(err, sizeof(err), "%s: %d tokens, fewer than one chunk of --ctx %d", src, n_toks,
                 n_ctx);
        goto fail;
    }
    const int32_t V = run.n_vocab, rows = n_ctx - n_ctx / 2;
    logits = malloc(sizeof(float) * (size_t)rows * V);
    lp = malloc(sizeof(double) * (size_t)V);
    if (!logits || !lp) {
        snprintf(err, sizeof(err), "out of memory");
        goto fail;
    }
    printf("importance matrix of %s on %s: %d chunks of %d tokens (of %d)\n", model_path, src,
           n_chunks, n_ctx, n_toks);
    double nll = 0;
    int64_t scored = 0;
    for (int32_t c = 0; c < n_chunks; c++) {
        int32_t *chunk = toks + (size_t)c * n_ctx;
        const int rc = runner_chunk(&run, chunk, n_ctx, bos, logits);
        if (rc < 0) {
            snprintf(err, sizeof(err), "chunk %d: forward failed: %s", c + 1, strerror(-rc));
            goto fail;
        }
        for (int32_t r = 0; r + 1 < rows; r++) {
            text_log_softmax(logits + (size_t)r * V, V, lp);
            nll -= lp[chunk[n_ctx / 2 + r + 1]];
            scored++;
        }
        printf("[%d]%.4f%s", c + 1, exp(nll / (double)scored), c + 1 == n_chunks ? "\n" : ",");
        fflush(stdout);
    }
    if (write_imatrix(run.act, model_hparams(run.m)->n_layers, has_own_output(model_path), out, src,
                      n_chunks, n_ctx, err, sizeof(err)) < 0)
        goto fail;
    printf("wrote %s: %d chunks of %d tokens\n", out, n_chunks, n_ctx);
    status = 0;
fail:
    if (status)
        fprintf(stderr, "folio imatrix: %s\n", err[0] ? err : "failed");
    free(toks);
    free(logits);
    free(lp);
    runner_free(&run);
    return status;
}
