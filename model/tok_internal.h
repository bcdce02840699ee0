/*
 * model/tok_internal.h — tokenizer internals for tests (model/tokenizer.c).
 * Not a public header.
 */
#ifndef FOLIO_TOK_INTERNAL_H
#define FOLIO_TOK_INTERNAL_H

#include <stddef.h>

#include "folio/tokenizer.h"

/* Byte-level BPE only: the words the pre-tokenizer (tokenizer.ggml.pre)
 * cuts s[0..n) into, before any merge, as end offsets: word i is
 * s[ends[i-1] .. ends[i]) (ends[-1] = 0).  *count = words; -ENOSPC when
 * cap is smaller (the first cap are written), -EINVAL for SentencePiece. */
int tok__pretokenize(const tok_t *t, const char *s, size_t n, size_t *ends, size_t cap,
                     size_t *count);

#endif
