/*
 * folio/gguf.h — GGUF v3 files: a reader (mmap) and a writer.
 *
 * A GGUF file is: magic "GGUF", version (3), tensor count, metadata count,
 * the metadata key/value pairs, the tensor infos (name, dims, type, offset),
 * padding to `general.alignment` (default 32), then the tensor data.  The
 * reader maps the file read-only and validates everything before it hands
 * out a single pointer: counts, string lengths, types, array sizes, tensor
 * extents against the file size, overlaps and alignment.  A bad file fails
 * with -EINVAL (or -EIO/-ENOENT/-ENOMEM) and an error text that names the
 * file and the offending key or tensor; it never crashes.
 */
#ifndef FOLIO_GGUF_H
#define FOLIO_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Metadata value types, numbered as in the GGUF specification. */
enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
};

/* Tensor element types (ggml numbering).  The block layouts, sizes and
 * conversions are model/quant.c's table; Q8_1 and Q8_K are activation
 * types of the dot kernels, never stored in a file foliod reads. */
enum gguf_tensor_type {
    GGUF_TENSOR_F32 = 0,
    GGUF_TENSOR_F16 = 1,
    GGUF_TENSOR_Q4_0 = 2,
    GGUF_TENSOR_Q4_1 = 3,
    GGUF_TENSOR_Q5_0 = 6,
    GGUF_TENSOR_Q5_1 = 7,
    GGUF_TENSOR_Q8_0 = 8,
    GGUF_TENSOR_Q8_1 = 9,
    GGUF_TENSOR_Q2_K = 10,
    GGUF_TENSOR_Q3_K = 11,
    GGUF_TENSOR_Q4_K = 12,
    GGUF_TENSOR_Q5_K = 13,
    GGUF_TENSOR_Q6_K = 14,
    GGUF_TENSOR_Q8_K = 15,
    GGUF_TENSOR_IQ4_NL = 20,
    GGUF_TENSOR_IQ4_XS = 23,
    GGUF_TENSOR_BF16 = 30,
};

typedef struct gguf_file gguf_file_t;

struct gguf_tensor_info {
    const char *name;
    enum gguf_tensor_type type;
    int32_t n_dims;
    int64_t ne[4];    /* ne[0] is the fastest-varying (row length) */
    const void *data; /* inside the mapping */
    size_t nbytes;
};

/* ---- reader ----------------------------------------------------------- */

/* Opens and validates path.  On failure returns -errno and writes a message
 * naming the file and the problem into err (when err != NULL).  The first
 * part of a split model (llama.cpp's gguf-split: PREFIX-00001-of-0000N.gguf
 * with split.count N) opens as one file: the other N - 1 parts beside it
 * are opened and validated too, and their tensors follow its own, in part
 * order; keys are the first part's.  Any other part is refused, naming the
 * first. */
int gguf_open(const char *path, gguf_file_t **out, char *err, size_t errlen);
void gguf_close(gguf_file_t *f);

int64_t gguf_n_keys(const gguf_file_t *f);
const char *gguf_key_name(const gguf_file_t *f, int64_t idx);
int64_t gguf_find_key(const gguf_file_t *f, const char *key); /* -1 if absent */
enum gguf_type gguf_key_type(const gguf_file_t *f, int64_t idx);

/* Scalar getters: 0, or -EINVAL when the key's type differs (integer
 * getters accept any integer type whose value fits). */
int gguf_get_u64(const gguf_file_t *f, int64_t idx, uint64_t *v);
int gguf_get_i64(const gguf_file_t *f, int64_t idx, int64_t *v);
int gguf_get_f32(const gguf_file_t *f, int64_t idx, float *v);
int gguf_get_bool(const gguf_file_t *f, int64_t idx, bool *v);
/* String value (not NUL-terminated in the file: use len). */
int gguf_get_str(const gguf_file_t *f, int64_t idx, const char **s, size_t *len);

/* Arrays: element type, length; numeric elements are packed at
 * gguf_arr_data (unaligned: memcpy them); string elements by index. */
int gguf_arr_info(const gguf_file_t *f, int64_t idx, enum gguf_type *elem_type, uint64_t *n);
const void *gguf_arr_data(const gguf_file_t *f, int64_t idx);
int gguf_arr_str(const gguf_file_t *f, int64_t idx, uint64_t i, const char **s, size_t *len);

int64_t gguf_n_tensors(const gguf_file_t *f);
int64_t gguf_find_tensor(const gguf_file_t *f, const char *name); /* -1 if absent */
void gguf_tensor_get(const gguf_file_t *f, int64_t idx, struct gguf_tensor_info *info);

/* Bytes of n elements of a tensor type (n a multiple of the type's block,
 * e.g. 32 for Q8_0, 256 for Q4_K); 0 if unknown or not a whole block. */
size_t gguf_tensor_nbytes(enum gguf_tensor_type t, int64_t n_elems);
const char *gguf_tensor_type_name(enum gguf_tensor_type t);
/* Elements per block of a tensor type (1 for the float types; 32 for
 * Q8_0, 256 for the K-quants); 0 if unknown. */
int64_t gguf_tensor_block(enum gguf_tensor_type t);
/* Converts n elements (n a multiple of the type's block) to f32. */
int gguf_tensor_to_f32(enum gguf_tensor_type t, const void *src, float *dst, int64_t n);
/* Converts n f32 elements (n a multiple of the block) to type t
 * (model/quant.h quant_from_float; writers: gen-model, quantize).
 * -EINVAL for a type without a quantizer or n not whole blocks. */
int gguf_tensor_from_f32(enum gguf_tensor_type t, const float *src, void *dst, int64_t n);
/* gguf_tensor_from_f32 for rows of `row` elements weighted by an
 * importance matrix row qw[0..row) (model/quant.h quant_from_float_w; NULL:
 * as gguf_tensor_from_f32); whether type t uses such weights. */
int gguf_tensor_from_f32_w(enum gguf_tensor_type t, const float *src, void *dst, int64_t n,
                           const float *qw, int64_t row);
bool gguf_tensor_uses_imatrix(enum gguf_tensor_type t);

/* The file's GGUF version (2 or 3: both are accepted, they share one
 * layout) and its data alignment (general.alignment, default 32). */
uint32_t gguf_version(const gguf_file_t *f);
uint32_t gguf_alignment(const gguf_file_t *f);

/* ---- writer ----------------------------------------------------------- */

typedef struct gguf_writer gguf_writer_t;

int gguf_writer_new(gguf_writer_t **out);
void gguf_writer_free(gguf_writer_t *w);
/* Keys are written in the order added; values are copied. */
int gguf_w_str(gguf_writer_t *w, const char *key, const char *val);
int gguf_w_u32(gguf_writer_t *w, const char *key, uint32_t val);
int gguf_w_i32(gguf_writer_t *w, const char *key, int32_t val);
int gguf_w_u16(gguf_writer_t *w, const char *key, uint16_t val); /* split.no, split.count */
int gguf_w_f32(gguf_writer_t *w, const char *key, float val);
int gguf_w_bool(gguf_writer_t *w, const char *key, bool val);
int gguf_w_arr_str(gguf_writer_t *w, const char *key, const char *const *vals, uint64_t n);
int gguf_w_arr_f32(gguf_writer_t *w, const char *key, const float *vals, uint64_t n);
int gguf_w_arr_i32(gguf_writer_t *w, const char *key, const int32_t *vals, uint64_t n);
/* Copies key idx of f (any type, arrays included) verbatim; -EEXIST if the
 * writer already has a key of that name. */
int gguf_w_copy_key(gguf_writer_t *w, const gguf_file_t *f, int64_t idx);
/* A tensor; data is referenced, not copied, and must live until
 * gguf_writer_write returns.  data NULL: the bytes are asked of
 * gguf_writer_write_fill's fill when the tensor is written. */
int gguf_w_tensor(gguf_writer_t *w, const char *name, enum gguf_tensor_type type, int32_t n_dims,
                  const int64_t *ne, const void *data);
/* Writes the file (to path.tmp, then renames).  Tensor data is aligned to
 * general.alignment when that key was added (as u32), else 32, and padded
 * with zeros; the output depends only on what was added (no timestamps).
 * The writer may be written again or freed afterwards. */
int gguf_writer_write(gguf_writer_t *w, const char *path, char *err, size_t errlen);
/* The bytes of tensor idx (the order tensors were added in), one added
 * with data NULL, as gguf_writer_write_fill reaches it: *data must hold
 * its bytes until the next call.  0, or -errno with a message in err. */
typedef int (*gguf_w_fill_fn)(void *arg, int64_t idx, const void **data, char *err, size_t errlen);
/* gguf_writer_write that asks fill for the tensors added without data, in
 * file order, so only one of them need be in memory at a time (NULL fill:
 * every tensor must have its data; -EINVAL otherwise). */
int gguf_writer_write_fill(gguf_writer_t *w, const char *path, gguf_w_fill_fn fill, void *arg,
                           char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* FOLIO_GGUF_H */
