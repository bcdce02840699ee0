/*
 * folio/sampler.h — turning one row of logits into a token.
 *
 * Pipeline for one request's token number t (t counts the tokens that
 * request has generated, from 0):
 *
 *   l_i = logits_i + bias_i         (logit bias list; banned tokens -> -inf)
 *   (penalties, when the caller wants them, are applied to the logits
 *    before this call: sampler_penalize, below)
 *   temperature == 0: greedy, argmax l_i, ties to the lowest id
 *   otherwise, with p_i = softmax(l / T):
 *               min_p: tokens with p_i < min_p * max p are dropped;
 *               typical_p: of the rest (renormalised), the locally typical
 *               set is kept: tokens by |-ln p_i - H| ascending (H the
 *               entropy; ties: higher l, then lower id) until their mass
 *               reaches typical_p;
 *               then the survivors sorted by l_i descending (ties: lower
 *               id first), cut to the first top_k (top_k <= 0: no cut),
 *               then to the shortest prefix whose probability reaches
 *               top_p of the survivors' mass (top_p >= 1: no cut), and one
 *               is drawn in proportion to exp(l_i / T) with the number
 *               u = sampler_uniform(seed, t).
 *   Without min_p and typical_p the survivors are every finite l_i.
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
    float min_p;           /* <= 0: off */
    float typical_p;       /* >= 1 (or <= 0): off */
};

/* Penalties on the logits from the tokens a sequence already holds:
 *
 *   repetition (llama.cpp's rule, once per distinct token among the last
 *   repeat_last_n tokens of prompt ++ generated; < 0: the whole stream;
 *   0: none):   l = l > 0 ? l / repetition : l * repetition
 *   presence and frequency (OpenAI's rule, over the generated tokens only):
 *               l -= presence * [count > 0] + frequency * count
 *
 * Neutral values: repetition 1, presence 0, frequency 0. */
struct sampler_penalties {
    float repetition;
    float presence;
    float frequency;
    int32_t repeat_last_n;
};

/* The tokens a sequence holds: its prompt, then what it generated. */
struct sampler_history {
    const int32_t *prompt;
    int32_t n_prompt;
    const int32_t *gen;
    int32_t n_gen;
};

/* True when pen changes anything. */
int sampler_penalties_active(const struct sampler_penalties *pen);

/* Applies pen to logits[n_vocab] in place from history h.  counts: a
 * workspace of n_vocab int32 (any content; sampler_work_counts gives one
 * inside a sampler_sample workspace).  Token ids outside [0, n_vocab) are
 * -EINVAL (logits untouched). */
int sampler_penalize(const struct sampler_penalties *pen, const struct sampler_history *h,
                     float *logits, int32_t n_vocab, int32_t *counts);

#define SAMPLER_MAX_TOP 20

/* Optional details of one draw. */
struct sampler_result {
    int32_t token;
    float logprob; /* of token, see above */
    int32_t n_top; /* entries filled in top_ids / top_logprobs */
    int32_t top_ids[SAMPLER_MAX_TOP];
    float top_logprobs[SAMPLER_MAX_TOP]; /* descending */
    int32_t rank; /* sampler_score: 1 + the tokens with a larger logit; else 0 */
};

/* Bytes of workspace sampler_sample needs for n_vocab logits (it includes
 * room for sampler_penalize's counts: sampler_work_counts). */
size_t sampler_work_size(int32_t n_vocab);

/* The n_vocab int32 that sampler_penalize may use inside a sampler_sample
 * workspace of sampler_work_size(n_vocab) bytes. */
int32_t *sampler_work_counts(void *work, int32_t n_vocab);

/* The uniform number in [0, 1) used for token t of a request with seed. */
double sampler_uniform(uint64_t seed, uint64_t t);

/* Samples token number t from logits[n_vocab] (not modified).  *token gets
 * the choice; res (may be NULL) the details with up to n_top (<=
 * SAMPLER_MAX_TOP) top log-probabilities.  -EINVAL for bad parameters or
 * when every token is banned. */
int sampler_sample(const struct sampler_params *p, const float *logits, int32_t n_vocab, uint64_t t,
                   void *work, int32_t n_top, int32_t *token, struct sampler_result *res);

/* Scores a given token (a prompt token) against logits[n_vocab] (not
 * modified): its log-probability under log_softmax of the raw logits (no
 * bias, temperature 1; NaN counts as -inf), its rank, and the top n_top
 * (<= SAMPLER_MAX_TOP; ties to the lower id, as sampler_sample ranks).
 * work: sampler_work_size(n_vocab) bytes.  -EINVAL for bad arguments or
 * when no logit is finite. */
int sampler_score(const float *logits, int32_t n_vocab, int32_t token, void *work, int32_t n_top,
                  struct sampler_result *res);

#ifdef __cplusplus
}
#endif
#endif /* FOLIO_SAMPLER_H */
