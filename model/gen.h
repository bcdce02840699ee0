/*
 * model/gen.h — writing a struct model as a GGUF file (model/gen.c).  Not a
 * public header: `folio gen-model` uses model_gen_file (folio/model.h).
 */
#ifndef FOLIO_MODEL_GEN_H
#define FOLIO_MODEL_GEN_H

#include <stdbool.h>

#include "folio/gguf.h"
#include "model_internal.h"

/* Writes m (hparams, m->name, weights) to path as a llama-architecture
 * GGUF v3 file; matrices F16 when f16, else F32.  vocab NULL: the
 * synthetic vocabulary of m->hp.n_vocab tokens; else every tokenizer.* key
 * of vocab is copied (its token count should equal m->hp.n_vocab). */
/* Writes m with its matrices (every 2-D tensor) of type wtype: F32, F16,
 * BF16 or Q8_0 (model__dtype_parse's names); norms stay F32. */
int model__write_gguf(const struct model *m, const char *path, enum gguf_tensor_type wtype,
                      const gguf_file_t *vocab, char *err, size_t errlen);
/* The same with ffn_up in up_type (a file whose gate and up types differ). */
int model__write_gguf_up(const struct model *m, const char *path, enum gguf_tensor_type wtype,
                         enum gguf_tensor_type up_type, const gguf_file_t *vocab, char *err,
                         size_t errlen);
/* The rerank prompt a generated reranker carries: {query} and {document}
 * are replaced by the texts (as llama-server does). */
#define MODEL_GEN_RERANK_TEMPLATE                                                                  \
    "Query: {query}\nDocument: {document}\nDoes the document answer the query? Answer:"
int model__dtype_parse(const char *name, enum gguf_tensor_type *t);
int model__file_type(enum gguf_tensor_type t);

#endif
