/*
 * folio/grammar.h — constrained decoding: a grammar compiled once, and per
 * sequence a matcher that masks the tokens which cannot continue a valid
 * document before each draw.
 *
 * The grammar language is GBNF-like (the notation llama.cpp uses), read
 * byte by byte:
 *
 *   root   ::= "{" ws pair ("," ws pair)* "}"      # a comment
 *   pair   ::= str ws ":" ws [0-9]+
 *   str    ::= "\"" [^"\\]* "\""
 *   ws     ::= " "?
 *
 * rules `name ::= alternatives`; `|` alternatives; sequences of items;
 * items: "literal" (UTF-8, escapes \n \r \t \\ \" \xHH \uHHHH), [class]
 * and [^class] (ASCII members, ranges a-z; escapes as in literals), `.`
 * (any one UTF-8 character), a rule name, ( group ), each optionally
 * followed by *, +, ?, {m}, {m,} or {m,n} (m, n <= 1000).  A negated class
 * and `.` match whole, well-formed UTF-8 characters: non-ASCII bytes only
 * ever appear as valid UTF-8.  The start rule is `root`.  Left recursion,
 * undefined rules and rules that can never end are compile errors.
 *
 * Decoding: each sequence's matcher holds the automaton's state (a set of
 * rule stacks).  gram_matcher_apply sets logits of tokens that cannot
 * continue the document to -inf; an end-of-generation token stays allowed
 * exactly when the document is complete.  With a token budget (tokens the
 * sequence may still produce, this one included), a token is allowed only
 * when the shortest completion after it still fits: the document then
 * always closes before max_tokens (given one-byte tokens for every byte,
 * as SentencePiece byte fallback and byte-level BPE both have).
 *
 * Cost: per grammar, states are interned lazily with their byte
 * transitions and per-state token masks (a bitset over the vocabulary,
 * found by one walk over the vocabulary sorted by bytes, pruning every
 * token that shares a dead prefix).  A step on a state seen before costs
 * one pass writing -inf over the masked logits.
 *
 * Threading: gram_vocab_t is immutable.  A gram_t's caches are mutated by
 * gram_matcher_apply / gram_matcher_accept: all matchers of one grammar
 * must be driven from one thread at a time (foliod: the engine thread).
 * gram_ref / gram_unref are atomic.  The gram_ref_* functions and
 * gram_match_text only read the compiled rules.
 */
#ifndef FOLIO_GRAMMAR_H
#define FOLIO_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gram gram_t;
typedef struct gram_vocab gram_vocab_t;
typedef struct gram_matcher gram_matcher_t;

/* No budget: gram_matcher_apply / gram_ref_allows without length limit. */
#define GRAM_NO_BUDGET INT32_MAX

/* Compiles src[0..len).  0, -EINVAL (message in err, naming the line and
 * what is wrong), -ENOMEM.  *out holds one reference. */
int gram_compile(const char *src, size_t len, gram_t **out, char *err, size_t errlen);
void gram_ref(gram_t *g);
void gram_unref(gram_t *g); /* frees at zero */
/* Number of states interned so far (tests, benchmarks). */
int32_t gram_n_states(const gram_t *g);

/* The vocabulary as bytes: piece[i][0..len[i]) is what token i adds to the
 * text (empty for control tokens); eog[i] marks end-of-generation ids.
 * Copied. */
int gram_vocab_new(int32_t n_vocab, const char *const *piece, const size_t *len, const bool *eog,
                   gram_vocab_t **out);
void gram_vocab_free(gram_vocab_t *v);
int32_t gram_vocab_n(const gram_vocab_t *v);

/* A matcher at the start of g (takes a reference to g). */
int gram_matcher_new(gram_t *g, gram_matcher_t **out);
void gram_matcher_free(gram_matcher_t *m);
/* Tokens accepted so far. */
int32_t gram_matcher_n_accepted(const gram_matcher_t *m);
/* The document is complete (an end of generation is allowed). */
bool gram_matcher_accepting(const gram_matcher_t *m);
/* Complete, and nothing can follow. */
bool gram_matcher_finished(const gram_matcher_t *m);

/* Fast path: logits[n_vocab] of masked tokens set to -INFINITY.  Returns
 * the number of allowed tokens (> 0), or -ENOMEM.  When the budget leaves
 * no token (max_tokens shorter than the shortest document) the budget is
 * ignored. */
int gram_matcher_apply(gram_matcher_t *m, const gram_vocab_t *v, int32_t budget, float *logits);
/* The same decision as a bitset (bit i of words[i / 64]). */
int gram_matcher_mask(gram_matcher_t *m, const gram_vocab_t *v, int32_t budget, uint64_t *words);
/* Advances over token (an end-of-generation token is accepted only when
 * complete and changes nothing).  0, -EINVAL when token cannot continue the
 * document (state unchanged), -ENOMEM. */
int gram_matcher_accept(gram_matcher_t *m, const gram_vocab_t *v, int32_t token);

/* Plain reference: would token be allowed now?  Re-runs the automaton
 * from the matcher's state over the token's bytes, no cache. */
bool gram_ref_allows(const gram_matcher_t *m, const gram_vocab_t *v, int32_t budget, int32_t token);
/* Whole text from the start of g: 1 complete document, 0 a valid prefix,
 * -1 not a prefix of any document. */
int gram_match_text(const gram_t *g, const char *s, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* FOLIO_GRAMMAR_H */
