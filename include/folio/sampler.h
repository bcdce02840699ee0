/*
 * folio/sampler.h — turning one row of logits into a token.
 *
 * Pipeline for one request's token number t (t counts the tokens that
 * request has generated, from 0):
 *
 *   l_i = logits_i + bias_i         (logit bias list; banned tokens -> -inf)
 *   temperature == 0: greedy, argmax l_i, ties to the lowest id
 *   otherwise:  candidates sorted by l_i descending (ties: lower id first),
 *               cut to the first top_k (top_k <= 0: no cut), then to the
 *               shortest prefix whose probability under softmax(l / T)
 *               reaches top_p (top_p >= 1: no cut), and one is drawn in
 *               proportion to exp(l_i / T) with the number
 *               u = sampler_uniform(seed, t).
 *
 * The random number depends only on (seed, t): the same request with the
 * same seed produces the same tokens whatever else shares its batch,
 * however it is chunked or preempted.
 *
 * Log-probabilities reported (of the chosen token and the top-N) are those
 * of log_softmax(l), the biased logits at temperature 1, before top-k/top-p
 * (what OpenAI-style `logprobs` report).
 *
 * No allocation: the caller passes a workspace of sampler_work_size(n_vocab)
 * bytes (any alignment of at least 8), reusable between calls.  Thread
 * safe: calls share nothing but their arguments.
 */
#ifndef FOLIO_SAMPLER_H
#define FOLIO_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct sampler_bias {
    int32_t token;
    float bias; /* added to the logit */
};

struct sampler_params {
    float temperature; /* 0: greedy */
    int32_t top_k;     /* <= 0: all */
    float top_p;       /* >= 1 (or <= 0): all */
    uint64_t seed;
    int32_t n_bias;
    const struct sampler_bias *bias; /* [n_bias]; out-of-range tokens are -EINVAL */
    int32_t n_banned;
    const int32_t *banned; /* [n_banned] never chosen */
};

#define SAMPLER_MAX_TOP 20

/* Optional details of one draw. */
struct sampler_result {
    int32_t token;
    float logprob; /* of token, see above */
    int32_t n_top; /* entries filled in top_ids / top_logprobs */
    int32_t top_ids[SAMPLER_MAX_TOP];
    float top_logprobs[SAMPLER_MAX_TOP]; /* descending */
};

/* Bytes of workspace sampler_sample needs for n_vocab logits. */
size_t sampler_work_size(int32_t n_vocab);

/* The uniform number in [0, 1) used for token t of a request with seed. */
double sampler_uniform(uint64_t seed, uint64_t t);

/* Samples token number t from logits[n_vocab] (not modified).  *token gets
 * the choice; res (may be NULL) the details with up to n_top (<=
 * SAMPLER_MAX_TOP) top log-probabilities.  -EINVAL for bad parameters or
 * when every token is banned. */
int sampler_sample(const struct sampler_params *p, const float *logits, int32_t n_vocab, uint64_t t,
                   void *work, int32_t n_top, int32_t *token, struct sampler_result *res);

#ifdef __cplusplus
}
#endif
#endif /* FOLIO_SAMPLER_H */
