/*
 * model/sampler_penalty.c — repetition, presence and frequency penalties
 * on one row of logits (contract in folio/sampler.h).
 *
 * Which tokens count:
 *   repetition  the last repeat_last_n tokens of prompt ++ generated (the
 *               window llama.cpp's penalties sampler keeps, prompt
 *               included); < 0: the whole stream; each distinct token is
 *               penalised once: l / r when l > 0, else l * r;
 *   presence, frequency   the generated tokens only (OpenAI's and vLLM's
 *               definition): l -= presence + frequency * count for every
 *               token generated count >= 1 times.
 *
 * The counts live in a caller's workspace of n_vocab int32 whose content
 * is not trusted: only entries of tokens present in the history are
 * written (zeroed, counted, consumed), so the cost is O(history), never
 * O(n_vocab).  No allocation; thread safe (shares nothing but arguments).
 */
#include <errno.h>

#include "folio/sampler.h"

int sampler_penalties_active(const struct sampler_penalties *pen)
{
    return pen && ((pen->repetition != 1 && pen->repetition > 0 && pen->repeat_last_n != 0) ||
                   pen->presence != 0 || pen->frequency != 0);
}

/* The window of the stream prompt ++ gen: its last `last` tokens. */
static int32_t stream_at(const struct sampler_history *h, int32_t i)
{
    return i < h->n_prompt ? h->prompt[i] : h->gen[i - h->n_prompt];
}

int sampler_penalize(const struct sampler_penalties *pen, const struct sampler_history *h,
                     float *logits, int32_t n_vocab, int32_t *counts)
{
    if (!pen || !h || !logits || !counts || n_vocab < 1 || h->n_prompt < 0 || h->n_gen < 0 ||
        (h->n_prompt && !h->prompt) || (h->n_gen && !h->gen))
        return -EINVAL;
    const int32_t len = h->n_prompt + h->n_gen;
    for (int32_t i = 0; i < len; i++) {
        int32_t t = stream_at(h, i);
        if (t < 0 || t >= n_vocab)
            return -EINVAL;
    }
    if (pen->repetition > 0 && pen->repetition != 1 && pen->repeat_last_n != 0) {
        int32_t from =
            pen->repeat_last_n < 0 || pen->repeat_last_n >= len ? 0 : len - pen->repeat_last_n;
        for (int32_t i = from; i < len; i++)
            counts[stream_at(h, i)] = 1;
        for (int32_t i = from; i < len; i++) {
            int32_t t = stream_at(h, i);
            if (!counts[t])
                continue; /* already penalised */
            counts[t] = 0;
            logits[t] = logits[t] > 0 ? logits[t] / pen->repetition : logits[t] * pen->repetition;
        }
    }
    if (pen->presence != 0 || pen->frequency != 0) {
        for (int32_t i = 0; i < h->n_gen; i++)
            counts[h->gen[i]] = 0;
        for (int32_t i = 0; i < h->n_gen; i++)
            counts[h->gen[i]]++;
        for (int32_t i = 0; i < h->n_gen; i++) {
            int32_t t = h->gen[i];
            if (!counts[t])
                continue;
            logits[t] -= pen->presence + pen->frequency * (float)counts[t];
            counts[t] = 0;
        }
    }
    return 0;
}
