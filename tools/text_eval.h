/*
 * tools/text_eval.h — a model running a text in chunks, for the tools
 * that score or measure a model on a text (`folio perplexity`, `folio
 * imatrix`).
 */
#ifndef FOLIO_TOOLS_TEXT_EVAL_H
#define FOLIO_TOOLS_TEXT_EVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "folio/common.h"
#include "folio/model.h"
#include "folio/pager.h"

/* One model with a pager for one sequence of n_ctx tokens. */
struct runner {
    model_t *m;
    pager_t *pg;
    model_ctx_t *ctx;
    int32_t n_vocab;
    struct model_act_stats *act; /* with runner_new's act: every chunk's, else NULL */
};

/* Loads path ("default": the embedded model) with room for one sequence
 * of n_ctx tokens whose second half asks for every logit; with act,
 * r->act gathers the activation statistics of every chunk run.  < 0 with a
 * message naming the file in err. */
int runner_new(struct runner *r, const char *path, int32_t n_ctx, int32_t threads,
               enum folio_dtype kv_dtype, enum model_matmul matmul, bool act, char *err,
               size_t errlen);
void runner_free(struct runner *r);
/* Runs toks[0..n) as a new sequence, its first token replaced by bos
 * when bos >= 0 (toks is as it was on return), in two steps: its first
 * half without logits, then its second half as an all_logits slice, whose
 * rows (positions n/2 .. n - 1) go to logits. */
int runner_chunk(struct runner *r, int32_t *toks, int32_t n, int32_t bos, float *logits);

/* The options the text tools share: --model, --file, --tokens-file,
 * --ctx (default 512), --chunks, --threads (default 1), --matmul. */
struct text_opts {
    const char *model, *text, *ids;
    int32_t n_ctx, max_chunks, threads;
    enum model_matmul matmul;
};
#define TEXT_OPTS_DEFAULT                                                                          \
    {                                                                                              \
        .n_ctx = 512, .max_chunks = INT32_MAX, .threads = 1, .matmul = MODEL_MATMUL_AUTO           \
    }
/* Option a with its value v into o when it is one of those: 1 taken, 0
 * not one of them, -1 a bad value. */
int text_opt(struct text_opts *o, const char *a, const char *v);

/* log-softmax of row[0..V) into lp; returns the index of the largest. */
int32_t text_log_softmax(const float *row, int32_t V, double *lp);

/* The text at text_path tokenized whole by the tokenizer of the GGUF file
 * model_path ("default": the embedded model's synthetic vocabulary), no
 * special tokens; or, with ids_path, the ids in that file (decimal,
 * separated by commas or white space), checked against the vocabulary.
 * *bos: the vocabulary's BOS id, or -1.  < 0 with a message in err. */
int tokenize_file(const char *model_path, const char *text_path, const char *ids_path,
                  int32_t **out, int32_t *n_out, int32_t *bos, char *err, size_t errlen);

#endif /* FOLIO_TOOLS_TEXT_EVAL_H */
