/*
 * daemon/embed.h — an embedding from a prompt's final hidden states (the
 * output norm's, which the logits are a product of): pooled, cut to the
 * requested dimensions, normalized, and written as JSON.
 *
 * Pooling (llama.cpp's numbering, as in the GGUF key {arch}.pooling_type)
 * decides which prompt positions count: MEAN every one, CLS the first,
 * LAST the last (a decoder's usual choice: the only position that has
 * seen the whole input).  The engine delivers exactly the hidden states of
 * those positions (eng_gen.hidden_lo, hidden_hi), each once, so the
 * pooled vector is the mean of what was delivered whatever the pooling.
 * Sums are kept in double: a mean over thousands of positions loses
 * nothing to the order they arrive in.
 *
 * Normalization (enum srv_emb_norm, llama-server's embd_normalize): none;
 * max-abs scaled to 32760 (int16's range); p-norm for p >= 1 (1 taxicab,
 * 2 euclidean: unit length, the default).  A zero vector stays zero.
 *
 * Reranking pools the same way (the last position) and scores the vector
 * with the model's classification head instead of returning it.
 */
#ifndef FOLIO_DAEMON_EMBED_H
#define FOLIO_DAEMON_EMBED_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "folio/buf.h"

enum srv_pooling { SRV_POOL_MEAN = 1, SRV_POOL_CLS = 2, SRV_POOL_LAST = 3 };

/* "mean", "cls", "last" ("?" for others). */
const char *srv_pooling_name(int pooling);
/* The prompt positions [*lo, *hi) pooling covers in a prompt of n >= 1
 * tokens. */
void srv_pooling_range(int pooling, int32_t n, int32_t *lo, int32_t *hi);

struct srv_emb_acc {
    double *sum; /* [dim] */
    int32_t dim;
    int32_t rows; /* hidden states added */
};
/* 0 or -ENOMEM (a is then safe to free). */
int srv_emb_acc_init(struct srv_emb_acc *a, int32_t dim);
void srv_emb_acc_free(struct srv_emb_acc *a);
/* Adds n rows of dim floats (dim must be a's). */
void srv_emb_acc_add(struct srv_emb_acc *a, const float *rows, int32_t n, int32_t dim);

/* The normalization ep asks for: embd_normalize when given, else
 * normalize's (true: EUCLID, false: NONE). */
int32_t srv_emb_norm(const struct srv_emb_params *ep);
/* The embedding into out: the mean of a's rows, its first ep->dims values
 * (0: all of a->dim), normalized as srv_emb_norm(ep) says.  Returns the
 * values written. */
int32_t srv_emb_finish(const struct srv_emb_acc *a, const struct srv_emb_params *ep, float *out);
/* A rerank score: the mean of a's rows (its last position's hidden state)
 * through the classification head w [n_cls][a->dim], b [n_cls] or NULL
 * (model_rank_score: P(first label) by softmax, or the sigmoid of a
 * single output).  tmp: a->dim floats of scratch. */
double srv_rerank_score(const struct srv_emb_acc *a, const float *w, const float *b, int32_t n_cls,
                        float *tmp);
/* The class probabilities of a's pooled hidden state through the head
 * (model_cls_probs) into probs [MODEL_MAX_CLS]: their count, or -1 (no
 * head, or no state).  tmp: a->dim floats of scratch. */
int32_t srv_classify_probs(const struct srv_emb_acc *a, const float *w, const float *b,
                           int32_t n_cls, float *tmp, double *probs);
/* v[0..n) as a JSON array of numbers (shortest text that reads back as
 * the same float; a non-finite value as null), or base64 as a JSON string
 * of the little-endian float32 bytes. */
void srv_emb_json(struct folio_buf *b, const float *v, int32_t n, bool base64);

#endif
