/*
 * model/vocab_synth.h — the synthetic SentencePiece-style ("llama")
 * vocabulary that `folio gen-model` writes and the embedded default model
 * uses.  Not a public header (model/ and its tests only).
 */
#ifndef FOLIO_VOCAB_SYNTH_H
#define FOLIO_VOCAB_SYNTH_H

#include <stdint.h>

/* Token types, numbered as llama.cpp's tokenizer.ggml.token_type. */
enum vocab_synth_type {
    VOCAB_SYNTH_NORMAL = 1,
    VOCAB_SYNTH_UNKNOWN = 2,
    VOCAB_SYNTH_CONTROL = 3,
    VOCAB_SYNTH_BYTE = 6,
};

#define VOCAB_SYNTH_UNK_ID  0
#define VOCAB_SYNTH_BOS_ID  1
#define VOCAB_SYNTH_EOS_ID  2
#define VOCAB_SYNTH_N_BYTES 256
/* First normal token: after <unk>, <s>, </s> and the 256 byte tokens. */
#define VOCAB_SYNTH_FIRST_NORMAL (3 + VOCAB_SYNTH_N_BYTES)
#define VOCAB_SYNTH_MIN          512
#define VOCAB_SYNTH_MAX          (1 << 20)

struct vocab_synth {
    int32_t n_vocab;
    const char **tokens; /* [n_vocab] NUL-terminated UTF-8 pieces */
    float *scores;       /* [n_vocab] */
    int32_t *types;      /* [n_vocab] enum vocab_synth_type */
    char *arena;         /* owns the piece bytes */
};

/* Builds the vocabulary of exactly n_vocab tokens (VOCAB_SYNTH_MIN ..
 * VOCAB_SYNTH_MAX; -EINVAL otherwise, -ENOMEM).  Deterministic: the same
 * n_vocab gives the same pieces, scores and types on every machine.  A
 * smaller n_vocab gives a prefix of a larger one's token list.  Free with
 * vocab_synth_free (also safe on a zeroed struct). */
int vocab_synth_build(int32_t n_vocab, struct vocab_synth *out);
void vocab_synth_free(struct vocab_synth *v);

#endif
