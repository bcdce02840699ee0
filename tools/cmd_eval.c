/*
 * tools/cmd_eval.c — `folio eval`: one offline forward pass.
 *
 *   folio eval [--model FILE|default] --tokens 1,2,3 [--top 10] [--greedy N]
 *              [--json] [--hidden] [--rank] [--threads N] [--kv-dtype f32|f16|bf16|q8]
 *              [--matmul auto|openblas|onednn] [--lora FILE [--lora-scale S]]
 *
 * Runs the prompt through the model in one batch, prints the top logits
 * after its last token, then (with --greedy N) a greedy continuation of N
 * tokens, one decode step each.  K/V live in a pager of their own (block
 * size 16, one sequence, just enough blocks), so the same page-table path
 * as the daemon's runs.
 *
 * --json prints {"top":[{"id":..,"logit":..,"logprob":..},...],"greedy":[...]}
 * (and "hidden":[...] with --hidden: the final hidden state after the last
 * prompt token, the output norm's: the prompt's embedding under last-token
 * pooling before any normalization, what llama.cpp gives for a model
 * without a pooling type).  --rank (a reranker file): "rank_score", that
 * hidden state through the model's classification head (model_rank_score:
 * what /v1/rerank answers for a prompt of these tokens).
 * --lora FILE runs every token through that LoRA adapter (folio/lora.h) at
 * multiplier --lora-scale (default 1), as foliod serves a request that
 * names it.
 * Without --model (or with --model default) the embedded default model is
 * used.  GGUF files need the loader (model_load_file); builds without it
 * refuse --model FILE.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"
#include "folio/lora.h"
#include "folio/model.h"
#include "folio/pager.h"
#include "folio/sampler.h"
#include "folio_cmds.h"

#define EVAL_BLOCK 16

static void usage(FILE *out)
{
    fprintf(out, "usage: folio eval [--model FILE|default] --tokens ID,ID,... [--top N]\n"
                 "                  [--greedy N] [--json] [--hidden] [--rank] [--threads N]\n"
                 "                  [--kv-dtype f32|f16|bf16|q8] [--matmul auto|openblas|onednn]\n"
                 "                  [--lora FILE [--lora-scale S]] [--batch-invariant]\n"
                 "\n"
                 "Runs the tokens through the model offline; prints the top logits after the\n"
                 "last token and a greedy continuation of N tokens.  --hidden: also the final\n"
                 "hidden state after the last token (its embedding, unnormalized).  --rank\n"
                 "(a reranker): also that state's relevance score through the model's\n"
                 "classification head.  --lora: through that LoRA adapter (GGUF, as\n"
                 "llama.cpp's convert_lora_to_gguf.py or `folio gen-lora` write it), its\n"
                 "correction multiplied by --lora-scale (default 1).  --batch-invariant:\n"
                 "the kernels `foliod --batch-invariant` runs (the same logits as a request\n"
                 "there, whatever its batch).\n");
}

/* "1,2,3" -> tokens; returns the count or -EINVAL. */
static int parse_tokens(const char *s, int32_t *toks, int max)
{
    int n = 0;
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || v < 0 || v > INT32_MAX || n == max)
            return -EINVAL;
        toks[n++] = (int32_t)v;
        s = end;
        if (*s == ',')
            s++;
        else if (*s)
            return -EINVAL;
    }
    return n;
}

int cmd_eval(int argc, char **argv)
{
    const char *model_path = NULL, *tokens_arg = NULL, *lora_path = NULL;
    double lora_scale = 1.0;
    int32_t top = 10, greedy = 0, threads = 1;
    enum model_matmul matmul = MODEL_MATMUL_AUTO;
    int json = 0, hidden = 0, rank = 0, inv = 0;
    enum folio_dtype kv_dtype = FOLIO_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        } else if (!strcmp(a, "--hidden")) {
            hidden = 1;
            continue;
        } else if (!strcmp(a, "--batch-invariant")) {
            inv = 1;
            continue;
        } else if (!strcmp(a, "--rank")) {
            rank = hidden = 1;
            continue;
        } else if (!v) {
            fprintf(stderr, "folio eval: %s needs a value\n", a);
            return 2;
        } else if (!strcmp(a, "--model")) {
            model_path = v;
        } else if (!strcmp(a, "--lora")) {
            lora_path = v;
        } else if (!strcmp(a, "--lora-scale")) {
            rc = folio_arg_double(v, -1e6, 1e6, &lora_scale);
        } else if (!strcmp(a, "--tokens")) {
            tokens_arg = v;
        } else if (!strcmp(a, "--top")) {
            rc = folio_arg_int(v, 0, SAMPLER_MAX_TOP, &top);
        } else if (!strcmp(a, "--greedy")) {
            rc = folio_arg_int(v, 0, 1 << 20, &greedy);
        } else if (!strcmp(a, "--threads")) {
            rc = folio_arg_int(v, 1, 1024, &threads);
        } else if (!strcmp(a, "--matmul")) {
            rc = model_matmul_parse(v, &matmul);
        } else if (!strcmp(a, "--kv-dtype")) {
            rc = folio_dtype_parse(v, &kv_dtype);
        } else {
            fprintf(stderr, "folio eval: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (rc) {
            fprintf(stderr, "folio eval: bad value for %s: '%s'\n", a, v);
            return 2;
        }
        i++;
    }
    if (!tokens_arg) {
        fprintf(stderr, "folio eval: --tokens is required\n");
        usage(stderr);
        return 2;
    }

    char err[256] = "";
    model_t *m = NULL;
    int rc;
    if (!model_path || !strcmp(model_path, "default")) {
        rc = model_load_default(&m, err, sizeof(err));
    } else {
        rc = model_load_file(model_path, &m, err, sizeof(err));
    }
    if (rc < 0) {
        fprintf(stderr, "folio eval: %s\n", err[0] ? err : strerror(-rc));
        return 1;
    }
    model_lora_t *lora = NULL;
    if (lora_path &&
        (rc = model_lora_load(m, lora_path, (float)lora_scale, &lora, err, sizeof(err))) < 0) {
        fprintf(stderr, "folio eval: %s\n", err[0] ? err : strerror(-rc));
        model_free(m);
        return 1;
    }
    const struct model_lora *loras[1] = {lora};
    const struct model_hparams *hp = model_hparams(m);
    const int32_t V = hp->n_vocab;
    const float *cls_w, *cls_b;
    const int32_t n_cls = model_cls_head(m, &cls_w, &cls_b);
    if (rank && !n_cls) {
        fprintf(stderr, "folio eval: --rank: %s is not a reranker (no cls.output.weight)\n",
                model_path ? model_path : "the default model");
        model_lora_free(lora);
        model_free(m);
        return 1;
    }

    int status = 1;
    int32_t *toks = malloc(sizeof(int32_t) * ((size_t)hp->ctx_len + 1));
    float *logits = malloc(sizeof(float) * (size_t)V);
    void *work = malloc(sampler_work_size(V));
    float *hid = NULL; /* [n][dim] with --hidden */
    pager_t *pg = NULL;
    pager_seq_t *seq = NULL;
    struct pager_kv_view kv;
    model_ctx_t *ctx = NULL;
    if (!toks || !logits || !work) {
        fprintf(stderr, "folio eval: out of memory\n");
        goto out;
    }
    int n = parse_tokens(tokens_arg, toks, hp->ctx_len);
    if (n <= 0) {
        fprintf(stderr, "folio eval: --tokens wants 1 to %d comma-separated ids\n", hp->ctx_len);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        if (toks[i] >= V) {
            fprintf(stderr, "folio eval: token %d is outside the vocabulary (%d)\n", toks[i], V);
            goto out;
        }
    }
    if (greedy > hp->ctx_len - n)
        greedy = hp->ctx_len - n;

    /* one sequence in a pager just big enough for it */
    const int32_t total = n + greedy;
    struct pager_config pc = {.num_blocks = FOLIO_DIV_CEIL(total, EVAL_BLOCK),
                              .block_size = EVAL_BLOCK,
                              .n_layers = hp->n_layers,
                              .n_kv_heads = hp->n_kv_heads,
                              .head_dim = hp->head_dim,
                              .dtype = kv_dtype};
    if ((rc = pager_init(&pg, &pc)) < 0 || (rc = pager_seq_new(pg, 0, 0, 0, &seq)) < 0 ||
        (rc = pager_seq_append(pg, seq, toks, n)) < 0) {
        fprintf(stderr, "folio eval: cannot set up the KV cache: %s\n", strerror(-rc));
        goto out;
    }
    pager_kv_view(pg, &kv);
    struct model_ctx_config cfg = {.max_tokens = n,
                                   .max_slices = 1,
                                   .n_threads = threads,
                                   .matmul = matmul,
                                   .loras = loras,
                                   .n_loras = lora ? 1 : 0,
                                   .batch_invariant = inv};
    rc = model_ctx_new(m, &kv, &cfg, &ctx);
    if (rc < 0) {
        fprintf(stderr, "folio eval: cannot create a model context: %s\n", strerror(-rc));
        goto out;
    }

    int32_t nb;
    struct model_slice sl = {.first_pos = 0,
                             .n_tokens = n,
                             .block_table = pager_seq_block_table(seq, &nb),
                             .sample = true,
                             .hidden = hidden,
                             .lora = lora ? 1 : 0};
    struct model_batch b = {.n_tokens = n, .tokens = toks, .n_slices = 1, .slices = &sl};
    if (hidden && !(hid = malloc(sizeof(float) * (size_t)n * (size_t)hp->dim))) {
        fprintf(stderr, "folio eval: out of memory\n");
        goto out;
    }
    rc = model_forward_hidden(ctx, &b, logits, hid);
    if (rc < 0) {
        fprintf(stderr, "folio eval: forward failed: %s\n", strerror(-rc));
        goto out;
    }
    struct sampler_params gp = {.temperature = 0};
    struct sampler_result res;
    int32_t next;
    if (sampler_sample(&gp, logits, V, 0, work, top, &next, &res) < 0) {
        fprintf(stderr, "folio eval: sampling failed\n");
        goto out;
    }
    const float *last = hid ? hid + (size_t)(n - 1) * (size_t)hp->dim : NULL;
    if (json) {
        printf("{\"model\":\"%s\",", model_name(m));
        if (last) {
            printf("\"hidden\":[");
            for (int32_t k = 0; k < hp->dim; k++)
                printf("%s%.9g", k ? "," : "", last[k]);
            printf("],");
        }
        if (rank)
            printf("\"rank_score\":%.9g,", model_rank_score(cls_w, cls_b, n_cls, hp->dim, last));
        printf("\"top\":[");
        for (int k = 0; k < res.n_top; k++)
            printf("%s{\"id\":%d,\"logit\":%.6g,\"logprob\":%.6g}", k ? "," : "", res.top_ids[k],
                   logits[res.top_ids[k]], res.top_logprobs[k]);
        printf("],\"greedy\":[");
    } else {
        printf("model %s: %d layers, dim %d, vocab %d; %d prompt tokens, kv %s\n", model_name(m),
               hp->n_layers, hp->dim, V, n, folio_dtype_name(kv_dtype));
        printf("top logits after the last token:\n");
        for (int k = 0; k < res.n_top; k++)
            printf("  %6d  logit %10.5f  logprob %9.5f\n", res.top_ids[k], logits[res.top_ids[k]],
                   res.top_logprobs[k]);
        if (last) {
            printf("final hidden state after the last token (%d values):", hp->dim);
            for (int32_t k = 0; k < hp->dim; k++)
                printf("%s%.6g", k % 8 ? " " : "\n  ", last[k]);
            printf("\n");
        }
        if (rank)
            printf("rank score %.9g\n", model_rank_score(cls_w, cls_b, n_cls, hp->dim, last));
        if (greedy)
            printf("greedy:");
    }
    for (int32_t g = 0; g < greedy; g++) {
        printf(json ? "%s%d" : "%s %d", json && g ? "," : "", next);
        fflush(stdout);
        if (g + 1 == greedy)
            break;
        toks[n + g] = next;
        pager_seq_mark_computed(pg, seq, n + g);
        if ((rc = pager_seq_append(pg, seq, &toks[n + g], 1)) < 0) {
            fprintf(stderr, "\nfolio eval: KV cache: %s\n", strerror(-rc));
            goto out;
        }
        sl = (struct model_slice){.first_pos = n + g,
                                  .n_tokens = 1,
                                  .block_table = pager_seq_block_table(seq, &nb),
                                  .sample = true,
                                  .lora = lora ? 1 : 0};
        b = (struct model_batch){
            .n_tokens = 1, .tokens = &toks[n + g], .n_slices = 1, .slices = &sl};
        if ((rc = model_forward(ctx, &b, logits)) < 0 ||
            (rc = sampler_sample(&gp, logits, V, 0, work, 0, &next, NULL)) < 0) {
            fprintf(stderr, "\nfolio eval: decode step %d failed: %s\n", g, strerror(-rc));
            goto out;
        }
    }
    printf(json ? "]}\n" : (greedy ? "\n" : ""));
    status = 0;
out:
    model_ctx_free(ctx);
    if (seq)
        pager_seq_free(pg, seq);
    pager_free(pg);
    free(toks);
    free(logits);
    free(work);
    free(hid);
    model_lora_free(lora);
    model_free(m);
    return status;
}
