/*
 * tools/cmd_perplexity.c — `folio perplexity`: how well a model predicts a
 * text, and how far a quantized model's predictions moved from the
 * original's.
 *
 *   folio perplexity --model FILE|default (--file TEXT | --tokens-file IDS) [--ctx N] [--chunks N]
 *                    [--base FILE] [--threads N] [--kv-dtype T]
 *                    [--base-kv-dtype T] [--matmul auto|openblas|onednn] [--json]
 *
 * The text is tokenized whole (the model's tokenizer, no special tokens;
 * --tokens-file gives the ids instead, separated by commas or white space)
 * and cut into chunks of --ctx tokens (default 512, at most the model's
 * context); each chunk starts a fresh sequence whose first token is BOS
 * where the model has one, as llama.cpp's perplexity tool does.  A chunk
 * runs as two steps: its first half without logits, then its second half
 * as an all_logits slice (model_forward), so every token of the second
 * half is scored given at least half a context before it.  Token j's
 * logits predict token j + 1: for n = --ctx, the n - n/2 - 1 predictions
 * of tokens n/2 + 1 .. n - 1 are scored.
 *
 * Reported: the perplexity exp(mean NLL) with its standard error (from the
 * NLLs' spread: exp(mean) * sd / sqrt(count - 1)), after every chunk and
 * at the end, and how often the text's next token was the model's top one.
 * With --base FILE (the same text through an original model,
 * say the F32 file a quantized one came from): the mean KL divergence
 * KL(base || model) per scored token with its standard error, its maximum,
 * how often both models' top token is the same, and the base's
 * perplexity.  The two need the same vocabulary.  The base's KV cache is
 * --base-kv-dtype (default: --kv-dtype's), so --base FILE --model FILE
 * --kv-dtype q8 --base-kv-dtype f32 measures what a q8 KV cache moves.
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
#include "folio/pager.h"
#include "folio/tokenizer.h"
#include "folio_cmds.h"
#include "text_eval.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: folio perplexity --model FILE|default (--file TEXT | --tokens-file IDS)\n"
            "                        [--ctx N] [--chunks N]\n"
            "                        [--base FILE] [--threads N] [--kv-dtype f32|f16|bf16|q8]\n"
            "                        [--base-kv-dtype T] [--matmul auto|openblas|onednn] [--json]\n"
            "\n"
            "Perplexity of the model on the text (or on token ids, separated by commas\n"
            "or white space), in chunks of --ctx tokens (default\n"
            "512), each scored on its second half.  --base FILE also runs FILE (say the\n"
            "F32 model a quantized one came from) and reports the KL divergence of\n"
            "the model's predictions from FILE's, and how often their top tokens agree;\n"
            "FILE's KV cache is --base-kv-dtype (default: --kv-dtype's).\n");
}

/* a running mean and its standard error */
struct running {
    double sum, sum2, max;
    int64_t n;
};

static void stat_add(struct running *s, double v)
{
    s->sum += v, s->sum2 += v * v, s->n++;
    s->max = s->n == 1 || v > s->max ? v : s->max;
}

static double stat_mean(const struct running *s)
{
    return s->n ? s->sum / (double)s->n : 0.0;
}

static double stat_err(const struct running *s)
{
    if (s->n < 2)
        return 0.0;
    const double m = stat_mean(s), var = s->sum2 / (double)s->n - m * m;
    return var > 0 ? sqrt(var / (double)(s->n - 1)) : 0.0;
}

int cmd_perplexity(int argc, char **argv)
{
    struct text_opts o = TEXT_OPTS_DEFAULT;
    const char *base_path = NULL;
    enum folio_dtype kv_dtype = FOLIO_F32, base_kv_dtype = FOLIO_F32;
    bool json = false, base_kv_set = false;
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
        if (i + 1 >= argc) {
            fprintf(stderr, "folio perplexity: %s needs a value\n", a);
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        int rc = text_opt(&o, a, v);
        if (rc) {
            rc = rc < 0;
        } else if (!strcmp(a, "--base")) {
            base_path = v;
        } else if (!strcmp(a, "--kv-dtype")) {
            rc = folio_dtype_parse(v, &kv_dtype);
        } else if (!strcmp(a, "--base-kv-dtype")) {
            rc = folio_dtype_parse(v, &base_kv_dtype);
            base_kv_set = true;
        } else {
            fprintf(stderr, "folio perplexity: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (rc) {
            fprintf(stderr, "folio perplexity: bad value for %s: '%s'\n", a, v);
            return 2;
        }
    }
    const char *model_path = o.model, *text_path = o.text, *ids_path = o.ids;
    const int32_t n_ctx = o.n_ctx, max_chunks = o.max_chunks, threads = o.threads;
    const enum model_matmul matmul = o.matmul;
    if (!model_path || !text_path == !ids_path) {
        fprintf(stderr, "folio perplexity: --model and one of --file and --tokens-file are "
                        "required\n");
        usage(stderr);
        return 2;
    }

    char err[512] = "";
    int status = 1;
    int32_t *toks = NULL, n_toks = 0, bos = -1;
    struct runner run = {0}, base = {0};
    float *logits = NULL, *base_logits = NULL;
    double *lp = NULL, *base_lp = NULL;
    if (ids_path)
        text_path = ids_path;
    if (tokenize_file(model_path, ids_path ? NULL : text_path, ids_path, &toks, &n_toks, &bos, err,
                      sizeof(err)) < 0)
        goto fail;
    if (runner_new(&run, model_path, n_ctx, threads, kv_dtype, matmul, false, err, sizeof(err)) <
            0 ||
        (base_path &&
         runner_new(&base, base_path, n_ctx, threads, base_kv_set ? base_kv_dtype : kv_dtype,
                    matmul, false, err, sizeof(err)) < 0))
        goto fail;
    const int32_t n_chunks = FOLIO_MIN(max_chunks, n_toks / n_ctx);
    if (n_chunks < 1) {
        snprintf(err, sizeof(err), "%s: %d tokens, fewer than one chunk of --ctx %d", text_path,
                 n_toks, n_ctx);
        goto fail;
    }
    const int32_t V = run.n_vocab, rows = n_ctx - n_ctx / 2;
    if (base_path && base.n_vocab != V) {
        snprintf(err, sizeof(err), "%s has %d tokens in its vocabulary, %s %d", base_path,
                 base.n_vocab, model_path, V);
        goto fail;
    }
    logits = malloc(sizeof(float) * (size_t)rows * V);
    lp = malloc(sizeof(double) * (size_t)V);
    if (base_path) {
        base_logits = malloc(sizeof(float) * (size_t)rows * V);
        base_lp = malloc(sizeof(double) * (size_t)V);
    }
    if (!logits || !lp || (base_path && (!base_logits || !base_lp))) {
        snprintf(err, sizeof(err), "out of memory");
        goto fail;
    }
    if (!json)
        printf("perplexity of %s on %s: %d chunks of %d tokens (of %d), the last %d of each "
               "scored, kv %s\n",
               model_path, text_path, n_chunks, n_ctx, n_toks, rows - 1,
               folio_dtype_name(kv_dtype));

    struct running nll = {0}, base_nll = {0}, kld = {0};
    int64_t same_top = 0, hits = 0;
    for (int32_t c = 0; c < n_chunks; c++) {
        int32_t *chunk = toks + (size_t)c * n_ctx;
        int rc = runner_chunk(&run, chunk, n_ctx, bos, logits);
        if (rc >= 0 && base_path)
            rc = runner_chunk(&base, chunk, n_ctx, bos, base_logits);
        if (rc < 0) {
            snprintf(err, sizeof(err), "chunk %d: forward failed: %s", c + 1, strerror(-rc));
            goto fail;
        }
        for (int32_t r = 0; r + 1 < rows; r++) {
            const int32_t next = chunk[n_ctx / 2 + r + 1];
            const int32_t top = text_log_softmax(logits + (size_t)r * V, V, lp);
            stat_add(&nll, -lp[next]);
            hits += top == next;
            if (!base_path)
                continue;
            const int32_t btop = text_log_softmax(base_logits + (size_t)r * V, V, base_lp);
            stat_add(&base_nll, -base_lp[next]);
            double kl = 0;
            for (int32_t i = 0; i < V; i++)
                kl += exp(base_lp[i]) * (base_lp[i] - lp[i]);
            stat_add(&kld, kl > 0 ? kl : 0.0);
            same_top += top == btop;
        }
        if (!json) {
            printf("[%d]%.4f%s", c + 1, exp(stat_mean(&nll)), c + 1 == n_chunks ? "\n" : ",");
            fflush(stdout);
        }
    }
    const double ppl = exp(stat_mean(&nll)), ppl_err = ppl * stat_err(&nll);
    if (json) {
        printf("{\"model\":\"%s\",\"chunks\":%d,\"ctx\":%d,\"scored\":%lld,\"nll\":%.6f,"
               "\"ppl\":%.6f,\"ppl_err\":%.6f,\"top_hit\":%.6f",
               model_path, n_chunks, n_ctx, (long long)nll.n, stat_mean(&nll), ppl, ppl_err,
               (double)hits / (double)nll.n);
        if (base_path)
            printf(",\"base\":\"%s\",\"base_ppl\":%.6f,\"kld\":%.8f,\"kld_err\":%.8f,"
                   "\"kld_max\":%.8f,\"same_top\":%.6f",
                   base_path, exp(stat_mean(&base_nll)), stat_mean(&kld), stat_err(&kld), kld.max,
                   (double)same_top / (double)kld.n);
        printf("}\n");
    } else {
        printf("PPL = %.4f +/- %.4f (mean NLL %.5f over %lld tokens; the next token was the "
               "top one in %.2f%%)\n",
               ppl, ppl_err, stat_mean(&nll), (long long)nll.n,
               100.0 * (double)hits / (double)nll.n);
        if (base_path)
            printf("base %s: PPL = %.4f; KL divergence from it: mean %.6f +/- %.6f, max %.6f; "
                   "same top token %.2f%%\n",
                   base_path, exp(stat_mean(&base_nll)), stat_mean(&kld), stat_err(&kld), kld.max,
                   100.0 * (double)same_top / (double)kld.n);
    }
    status = 0;
fail:
    if (status)
        fprintf(stderr, "folio perplexity: %s\n", err[0] ? err : "failed");
    free(toks);
    free(logits);
    free(base_logits);
    free(lp);
    free(base_lp);
    runner_free(&run);
    runner_free(&base);
    return status;
}
