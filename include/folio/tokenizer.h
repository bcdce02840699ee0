/*
 * folio/tokenizer.h — text <-> token ids, from a GGUF file's tokenizer.ggml.*
 * metadata (or the same arrays given directly), and an incremental
 * detokenizer for streaming.
 *
 * Two tokenizer models are supported, named by tokenizer.ggml.model:
 *   "llama"  SentencePiece-style: spaces become U+2581, a space prefix is
 *            added (tokenizer.ggml.add_space_prefix, default true), adjacent
 *            symbols merge by highest score, characters outside the
 *            vocabulary fall back to <0xNN> byte tokens (or <unk>).
 *   "gpt2"   byte-level BPE: the pre-tokenizer tokenizer.ggml.pre names
 *            (gpt-2, llama-bpe, qwen2, starcoder, falcon, deepseek-coder,
 *            gpt-4o, ...: regexes, PCRE2) splits the text into words, bytes
 *            map to printable code points, and tokenizer.ggml.merges apply
 *            by rank.
 * Anything else fails tok_load with -ENOTSUP and a message naming it.
 *
 * A tok_t is immutable after tok_load/tok_new: every function below may be
 * called from any number of threads at once.  Both copy what they need, so
 * the gguf file (or the arrays) may go away afterwards.
 *
 * Special tokens (control, user-defined, unknown) are found in the input
 * text only when parse_special is set (user-defined ones always); otherwise
 * "<s>" is just three characters.  Decoding renders control tokens as
 * nothing unless TOK_DECODE_SPECIAL is given.
 */
#ifndef FOLIO_TOKENIZER_H
#define FOLIO_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "folio/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tok tok_t;

enum tok_kind {
    TOK_SPM = 1, /* "llama" */
    TOK_BPE = 2, /* "gpt2" */
};

/* Token types, numbered as in tokenizer.ggml.token_type. */
enum tok_token_type {
    TOK_TYPE_NORMAL = 1,
    TOK_TYPE_UNKNOWN = 2,
    TOK_TYPE_CONTROL = 3,
    TOK_TYPE_USER_DEFINED = 4,
    TOK_TYPE_UNUSED = 5,
    TOK_TYPE_BYTE = 6,
};

/* A vocabulary as arrays: what tok_new builds a tokenizer from (the
 * arrays are read, not kept).  Start from tok_vocab_init, which sets the
 * ids to TOK_ID_DEFAULT and the flags to the kind's defaults. */
#define TOK_ID_DEFAULT (-2) /* SPM: <unk> 0, <s> 1, </s> 2; BPE and others: none */
struct tok_vocab {
    enum tok_kind kind;
    const char *pre;                      /* TOK_BPE pre-tokenizer name; NULL: "default" */
    int32_t n_tokens;                     /* > 0 */
    const char *const *tokens;            /* [n_tokens] vocabulary texts */
    const size_t *token_lens;             /* [n_tokens] their lengths; NULL: NUL-terminated */
    const float *scores;                  /* [n_tokens] (SPM merge priority); NULL: all 0 */
    const int32_t *types;                 /* [n_tokens] TOK_TYPE_*; NULL: all normal,
                                             and SPM infers <0xNN> byte tokens */
    int32_t n_merges;                     /* TOK_BPE: merge rules "left right", best first */
    const char *const *merges;            /* [n_merges] */
    const size_t *merge_lens;             /* [n_merges]; NULL: NUL-terminated */
    int32_t bos, eos, unk, pad, eot, eom; /* ids; -1 none; TOK_ID_DEFAULT */
    bool add_bos, add_eos, add_space_prefix;
};
void tok_vocab_init(struct tok_vocab *v, enum tok_kind kind);

/* Builds a tokenizer from arrays.  Returns 0, -EINVAL (an id outside the
 * vocabulary, bad arrays), -ENOTSUP (unknown pre-tokenizer) or -ENOMEM; on
 * failure err (when non-NULL) names the problem. */
int tok_new(const struct tok_vocab *v, tok_t **out, char *err, size_t errlen);

/* Builds a tokenizer from f's tokenizer.ggml.* keys (read into a struct
 * tok_vocab, then tok_new).  Returns 0, -EINVAL (missing or malformed
 * keys), -ENOTSUP (unknown tokenizer model) or -ENOMEM; on failure err
 * (when non-NULL) names the problem. */
int tok_load(const gguf_file_t *f, tok_t **out, char *err, size_t errlen);

/* The synthetic SentencePiece vocabulary of n_vocab tokens that `folio
 * gen-model` writes into its files (<unk> 0, <s> 1, </s> 2, then byte and
 * word pieces; add_bos): the tokenizer of the embedded default model,
 * without a file.  -EINVAL (n_vocab outside 512 .. 2^20), -ENOMEM. */
int tok_new_synthetic(int32_t n_vocab, tok_t **out, char *err, size_t errlen);
void tok_free(tok_t *t);

enum tok_kind tok_kind(const tok_t *t);
int32_t tok_n_vocab(const tok_t *t);
int32_t tok_bos(const tok_t *t); /* -1 when the model has none */
int32_t tok_eos(const tok_t *t);
int32_t tok_unk(const tok_t *t);
int32_t tok_pad(const tok_t *t);
bool tok_add_bos(const tok_t *t);
bool tok_add_eos(const tok_t *t);
/* Type of token id (TOK_TYPE_*), 0 when id is out of range. */
int tok_token_type(const tok_t *t, int32_t id);
/* End of generation: EOS, EOT (tokenizer.ggml.eot_token_id) or EOM. */
bool tok_is_eog(const tok_t *t, int32_t id);
/* The token's text as stored in the vocabulary (e.g. "▁the", "<0x0A>"),
 * NUL-terminated; NULL when id is out of range. */
const char *tok_token_text(const tok_t *t, int32_t id);
/* Id of the token whose vocabulary text is exactly s, or -1. */
int32_t tok_find(const tok_t *t, const char *s, size_t len);
/* Longest piece in bytes (what tok_token_to_piece can produce). */
size_t tok_max_piece_len(const tok_t *t);

/* Encodes text[0..len) (any bytes; not NUL-terminated).  add_special adds
 * BOS/EOS as tokenizer.ggml.add_bos_token/add_eos_token say.  parse_special
 * recognises control tokens written in the text.  Writes up to cap ids to
 * out and the count to *n.  When cap is too small returns -ENOSPC with the
 * count needed in *n (out holds the first cap ids).  -EINVAL on bad args,
 * -ENOMEM. */
int tok_encode(const tok_t *t, const char *text, size_t len, bool add_special, bool parse_special,
               int32_t *out, int32_t cap, int32_t *n);

/* Decode flags. */
#define TOK_DECODE_SPECIAL    1u /* render control tokens as their text */
#define TOK_DECODE_KEEP_SPACE 2u /* SPM: keep the leading space of the first piece */

/* The bytes of one token (no leading-space stripping): a pointer into t,
 * valid while t lives; *len its length.  Control tokens give "" unless
 * flags has TOK_DECODE_SPECIAL.  NULL for an out-of-range id. */
const char *tok_piece(const tok_t *t, int32_t id, unsigned flags, size_t *len);

/* Copies one token's piece into buf (not NUL-terminated).  *n = bytes;
 * -ENOSPC with the needed size in *n when cap is too small; -EINVAL for an
 * out-of-range id. */
int tok_token_to_piece(const tok_t *t, int32_t id, unsigned flags, char *buf, size_t cap,
                       size_t *n);

/* Decodes ids into buf (not NUL-terminated), *n = bytes written (or needed,
 * with -ENOSPC).  SPM models that add a space prefix drop one leading space
 * from the first piece after an optional leading BOS, undoing the prefix
 * tok_encode added (unless TOK_DECODE_KEEP_SPACE).  The bytes are exactly
 * the pieces', so they may be invalid UTF-8. -EINVAL for a bad id. */
int tok_decode(const tok_t *t, const int32_t *ids, size_t n_ids, unsigned flags, char *buf,
               size_t cap, size_t *n);

/* ---- incremental detokenizer (model/detok.c) ------------------------- */

/*
 *
 * Turns a stream of token ids into text that is safe to send: UTF-8
 * sequences split across tokens are held until complete, invalid bytes
 * become U+FFFD, and text that is (or may become) one of the stop strings
 * is never released.  When a stop string appears, the text before it is
 * released, the stop string and anything after it are dropped, and
 * tok_detok_stopped() reports which one matched.  All buffers are sized at
 * creation: feeding a token never allocates.  One detokenizer per stream;
 * not thread-safe (the tokenizer it reads is). */

typedef struct tok_detok tok_detok_t;

/* stops: n_stops strings (NUL-terminated, copied; empty ones ignored;
 * -EINVAL for one that is not well-formed UTF-8).
 * flags: TOK_DECODE_SPECIAL to stream control tokens' text, and
 * TOK_DECODE_KEEP_SPACE is implied (a stream continues a prompt). */
int tok_detok_new(const tok_t *t, const char *const *stops, size_t n_stops, unsigned flags,
                  tok_detok_t **out);
void tok_detok_free(tok_detok_t *d);
/* Forget everything fed so far (reuse for a new stream). */
void tok_detok_reset(tok_detok_t *d);
/* Feeds one token.  *text and *len receive the text now safe to send (pointer
 * into d, valid until the next call on d; may be empty).  Returns 1 when a
 * stop string matched (this call's text is the final text; later feeds
 * give nothing), 0 otherwise, -EINVAL for an out-of-range id. */
int tok_detok_feed(tok_detok_t *d, int32_t id, const char **text, size_t *len);
/* Feeds raw bytes, as if they were a token's piece (tests, prompt echo). */
int tok_detok_feed_bytes(tok_detok_t *d, const char *bytes, size_t n, const char **text,
                         size_t *len);
/* End of stream (EOS, length limit): releases everything held, an
 * incomplete UTF-8 tail as U+FFFD.  Returns 0 (or 1 if already stopped,
 * with empty text). */
int tok_detok_flush(tok_detok_t *d, const char **text, size_t *len);
/* Index of the stop string that matched (in the order given), or -1. */
int tok_detok_stopped(const tok_detok_t *d);

#ifdef __cplusplus
}
#endif
#endif /* FOLIO_TOKENIZER_H */
