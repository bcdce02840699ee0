/*
 * tools/text_eval.c — a model running a text in chunks (text_eval.h): the
 * model, a pager of ceil(n_ctx / PPL_BLOCK) blocks for one sequence, and a
 * ctx whose steps are at most half a chunk; the text's tokens.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/gguf.h"
#include "folio/tokenizer.h"
#include "folio_cmds.h"
#include "text_eval.h"

#define PPL_BLOCK 16

void runner_free(struct runner *r)
{
    model_ctx_free(r->ctx);
    pager_free(r->pg);
    model_free(r->m);
    model_act_stats_free(r->act);
}

int runner_new(struct runner *r, const char *path, int32_t n_ctx, int32_t threads,
               enum folio_dtype kv_dtype, enum model_matmul matmul, bool act, char *err,
               size_t errlen)
{
    int rc = !strcmp(path, "default") ? model_load_default(&r->m, err, errlen)
                                      : model_load_file(path, &r->m, err, errlen);
    if (rc < 0)
        return rc;
    const struct model_hparams *hp = model_hparams(r->m);
    r->n_vocab = hp->n_vocab;
    if (act && (rc = model_act_stats_new(r->m, &r->act)) < 0) {
        snprintf(err, errlen, "out of memory");
        return rc;
    }
    if (n_ctx > hp->ctx_len) {
        snprintf(err, errlen, "%s: --ctx %d is beyond the model's context (%d)", path, n_ctx,
                 hp->ctx_len);
        return -EINVAL;
    }
    const struct pager_config pc = {.num_blocks = FOLIO_DIV_CEIL(n_ctx, PPL_BLOCK),
                                    .block_size = PPL_BLOCK,
                                    .n_layers = hp->n_layers,
                                    .n_kv_heads = hp->n_kv_heads,
                                    .head_dim = hp->head_dim,
                                    .dtype = kv_dtype};
    if ((rc = pager_init(&r->pg, &pc)) < 0) {
        snprintf(err, errlen, "cannot set up the KV cache: %s", strerror(-rc));
        return rc;
    }
    struct pager_kv_view kv;
    pager_kv_view(r->pg, &kv);
    const struct model_ctx_config cfg = {.max_tokens = n_ctx - n_ctx / 2,
                                         .max_slices = 1,
                                         .max_logits = n_ctx - n_ctx / 2,
                                         .n_threads = threads,
                                         .matmul = matmul,
                                         .act_stats = r->act};
    if ((rc = model_ctx_new(r->m, &kv, &cfg, &r->ctx)) < 0)
        snprintf(err, errlen, "%s: cannot create a model context: %s", path, strerror(-rc));
    return rc;
}

int runner_chunk(struct runner *r, int32_t *toks, int32_t n, int32_t bos, float *logits)
{
    const int32_t first = toks[0];
    if (bos >= 0)
        toks[0] = bos;
    pager_seq_t *seq = NULL;
    int rc = pager_seq_new(r->pg, 0, 0, 0, &seq);
    if (rc < 0 || (rc = pager_seq_append(r->pg, seq, toks, n)) < 0)
        goto out;
    int32_t nb;
    const int32_t *bt = pager_seq_block_table(seq, &nb);
    const int32_t half = n / 2;
    struct model_slice sl = {.first_pos = 0, .n_tokens = half, .block_table = bt};
    struct model_batch b = {.n_tokens = half, .tokens = toks, .n_slices = 1, .slices = &sl};
    if (half > 0 && (rc = model_forward(r->ctx, &b, NULL)) < 0)
        goto out;
    sl = (struct model_slice){
        .first_pos = half, .n_tokens = n - half, .block_table = bt, .all_logits = true};
    b = (struct model_batch){
        .n_tokens = n - half, .tokens = toks + half, .n_slices = 1, .slices = &sl};
    rc = model_forward(r->ctx, &b, logits);
out:
    if (seq)
        pager_seq_free(r->pg, seq);
    toks[0] = first;
    return rc < 0 ? rc : 0;
}

int text_opt(struct text_opts *o, const char *a, const char *v)
{
    if (!strcmp(a, "--model"))
        o->model = v;
    else if (!strcmp(a, "--file"))
        o->text = v;
    else if (!strcmp(a, "--tokens-file"))
        o->ids = v;
    else if (!strcmp(a, "--ctx"))
        return folio_arg_int(v, 4, 1 << 20, &o->n_ctx) ? -1 : 1;
    else if (!strcmp(a, "--chunks"))
        return folio_arg_int(v, 1, INT32_MAX, &o->max_chunks) ? -1 : 1;
    else if (!strcmp(a, "--threads"))
        return folio_arg_int(v, 1, 1024, &o->threads) ? -1 : 1;
    else if (!strcmp(a, "--matmul"))
        return model_matmul_parse(v, &o->matmul) ? -1 : 1;
    else
        return 0;
    return 1;
}

static char *read_text(const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = cap ? 2 * cap : 1 << 20;
            char *nb = realloc(buf, cap);
            if (!nb) {
                snprintf(err, errlen, "%s: out of memory", path);
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        const size_t got = fread(buf + n, 1, 65536, f);
        n += got;
        if (got < 65536)
            break;
    }
    const bool bad = ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "%s: read error", path);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

/* The ids in path (decimal, separated by commas or white space). */
static int read_ids(const char *path, int32_t **out, int32_t *n_out, char *err, size_t errlen)
{
    size_t len = 0;
    char *text = read_text(path, &len, err, errlen);
    if (!text)
        return -EIO;
    int32_t n = 0;
    *out = malloc(sizeof(int32_t) * (len / 2 + 1));
    for (char *p = text; *out && *p;) {
        if (*p == ',' || *p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') {
            p++;
            continue;
        }
        char *end;
        errno = 0;
        const long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT32_MAX) {
            snprintf(err, errlen, "%s: not a token id at byte %zu", path, (size_t)(p - text));
            free(text);
            return -EINVAL;
        }
        (*out)[n++] = (int32_t)v;
        p = end;
    }
    free(text);
    if (!*out) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    *n_out = n;
    return 0;
}

int tokenize_file(const char *model_path, const char *text_path, const char *ids_path,
                  int32_t **out, int32_t *n_out, int32_t *bos, char *err, size_t errlen)
{
    gguf_file_t *f = NULL;
    tok_t *t = NULL;
    size_t len = 0;
    char *text = NULL;
    int rc = 0;
    if (!strcmp(model_path, "default")) { /* the embedded model's synthetic vocabulary */
        model_t *m = NULL;
        if ((rc = model_load_default(&m, err, errlen)) < 0)
            goto out;
        rc = tok_new_synthetic(model_hparams(m)->n_vocab, &t, err, errlen);
        model_free(m);
    } else if ((rc = gguf_open(model_path, &f, err, errlen)) >= 0) {
        rc = tok_load(f, &t, err, errlen);
    }
    if (rc != 0) {
        rc = rc < 0 ? rc : -EINVAL;
        goto out;
    }
    *bos = tok_bos(t);
    if (ids_path) {
        rc = read_ids(ids_path, out, n_out, err, errlen);
        for (int32_t i = 0; rc == 0 && i < *n_out; i++)
            if ((*out)[i] >= tok_n_vocab(t)) {
                snprintf(err, errlen, "%s: token %d is outside the vocabulary (%d)", ids_path,
                         (*out)[i], tok_n_vocab(t));
                rc = -EINVAL;
            }
        goto out;
    }
    if (!(text = read_text(text_path, &len, err, errlen))) {
        rc = -EIO;
        goto out;
    }
    int32_t n = 0;
    tok_encode(t, text, len, false, false, NULL, 0, &n);
    *out = malloc(sizeof(int32_t) * (size_t)(n + 1));
    if (!*out || tok_encode(t, text, len, false, false, *out, n, &n) != 0) {
        snprintf(err, errlen, "%s: cannot tokenize", text_path);
        rc = -EINVAL;
        goto out;
    }
    *n_out = n;
out:
    free(text);
    tok_free(t);
    gguf_close(f);
    return rc;
}

int32_t text_log_softmax(const float *row, int32_t V, double *lp)
{
    int32_t top = 0;
    for (int32_t i = 1; i < V; i++)
        if (row[i] > row[top])
            top = i;
    double sum = 0;
    for (int32_t i = 0; i < V; i++)
        sum += exp((double)row[i] - row[top]);
    const double lse = row[top] + log(sum);
    for (int32_t i = 0; i < V; i++)
        lp[i] = (double)row[i] - lse;
    return top;
}
