/*
 * tools/imatrix_file.h — reading an importance matrix (the GGUF layout
 * `folio imatrix` and llama.cpp's imatrix tool write) for `folio quantize
 * --imatrix`.
 */
#ifndef FOLIO_TOOLS_IMATRIX_FILE_H
#define FOLIO_TOOLS_IMATRIX_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Each weight matrix's column importances: the mean square of the input
 * column over the text (in_sum2 / counts). */
struct imatrix {
    int32_t n;
    char **names;   /* [n] the weight matrices' names ("blk.0.attn_q.weight") */
    float **mean;   /* [n][len[i]] */
    int64_t *len;   /* [n] */
    int32_t chunks; /* imatrix.chunk_count, 0 if absent */
};

/* Reads path: every pair of `NAME.in_sum2` and `NAME.counts` F32 tensors
 * (one matrix each: counts has one element).  < 0 with a message naming
 * the file in err: not GGUF, no entries, a sum without its count, a
 * count of zero, a type not F32, or an entry of several experts. */
int imatrix_load(const char *path, struct imatrix *im, char *err, size_t errlen);
void imatrix_free(struct imatrix *im);
/* The importances of matrix `name` with `cols` columns, or NULL. */
const float *imatrix_find(const struct imatrix *im, const char *name, int64_t cols);

#endif /* FOLIO_TOOLS_IMATRIX_FILE_H */
