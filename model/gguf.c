/*
 * model/gguf.c — GGUF files: a validating mmap reader and a writer.
 *
 * What it owns.  A gguf_file_t owns the read-only mapping of one file and
 * small index arrays describing it; every pointer it hands out (key names,
 * string values, array data, tensor data) points into the mapping or into
 * those arrays and lives until gguf_close().  A gguf_writer_t owns copies of
 * the keys and values added to it, and references (never copies) tensor data.
 *
 * File layout (all integers little-endian):
 *
 *   "GGUF" u32 version  u64 n_tensors  u64 n_kv
 *   n_kv ×      { str key, u32 type, value }          str = u64 len + bytes
 *   n_tensors × { str name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset }
 *   zero padding up to a multiple of general.alignment (default 32)
 *   tensor data: each tensor at data_start + offset, offset a multiple of
 *   the alignment
 *
 * Versions: 3 is what llama.cpp writes today; 2 has the same layout (v2
 * only differs from v3 by not allowing big-endian files, which we reject
 * anyway), so both are accepted.  Version 1 (32-bit counts) and anything
 * else is rejected; a byte-swapped version field is reported as a
 * big-endian file.
 *
 * Validation (all of it happens in gguf_open, before a pointer is handed
 * out): magic; version; counts against what the remaining bytes could hold;
 * every string length against the bytes left; key names non-empty, without
 * NUL, at most 64 KiB, unique; value types known; arrays of arrays
 * rejected (no model key uses them); bools 0 or 1; general.alignment an
 * unsigned integer that is a power of two <= 1 MiB; tensor names
 * non-empty, without NUL, at most 64 KiB, unique; 1..4 dims, each > 0,
 * element count computed without overflow; tensor type a file type of
 * model/quant.c's table (rows a multiple of its block: 32 for Q4_0..Q8_0,
 * 256 for the K-quants); offsets aligned and
 * each tensor's bytes inside the file; no two tensors overlap.
 *
 * Memory: nothing is sized by a count the file claims.  Key and tensor
 * entries are added as they parse (the arrays grow by doubling), a string
 * array's offset table is allocated only after its strings were walked,
 * and names are copied only up to GGUF_MAX_NAME bytes; so what gguf_open
 * allocates is proportional to the bytes it has read, and a corrupted
 * count fails at the first entry that is not there.  Lookups by name use
 * two sorted index arrays (binary search).
 *
 * Split models (llama.cpp's gguf-split): the first part's gguf_file_t also
 * owns the other parts' (parts[]), each opened and validated as above; their
 * tensors are moved into the first's table after its own, each tensor
 * naming its file (part), and the by-name index covers all of them (no name
 * twice across the parts).  The keys are the first part's alone.
 *
 * Invariants after a successful open: for every key, raw..raw+raw_len lies
 * in the mapping and decodes as its type; for every tensor, data..data+
 * nbytes lies in its file's mapping.  The reader never reads outside the
 * mappings.
 *
 * Threading: a gguf_file_t is immutable after gguf_open and may be read
 * from any number of threads.  A writer belongs to one thread.
 *
 * This code assumes a little-endian host (checked at compile time).
 */
#include "folio/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "folio/buf.h"
#include "folio/common.h"
#include "quant.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c assumes a little-endian host"
#endif

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_ALIGNMENT     (1u << 20)
#define GGUF_MAX_NAME          65535u /* key and tensor names (the spec's key limit) */

/* ---- shared helpers --------------------------------------------------- */

static size_t type_scalar_size(enum gguf_type t)
{
    switch (t) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_BOOL:
        return 1;
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_INT16:
        return 2;
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_FLOAT32:
        return 4;
    case GGUF_TYPE_UINT64:
    case GGUF_TYPE_INT64:
    case GGUF_TYPE_FLOAT64:
        return 8;
    case GGUF_TYPE_STRING:
    case GGUF_TYPE_ARRAY:
        return 0;
    }
    return 0;
}

static bool type_known(uint32_t t)
{
    return t <= GGUF_TYPE_FLOAT64;
}

static const char *type_name(uint32_t t)
{
    static const char *const names[] = {"uint8",  "int8",    "uint16", "int16",  "uint32",
                                        "int32",  "float32", "bool",   "string", "array",
                                        "uint64", "int64",   "float64"};
    return t < FOLIO_ARRAY_LEN(names) ? names[t] : "unknown";
}

/* A tensor type a GGUF file may hold: a row of model/quant.c's table
 * marked as a file type. */
static bool tensor_type_known(uint32_t t)
{
    const struct quant_traits *r = quant_traits_of((enum gguf_tensor_type)t);
    return r && r->in_files;
}

/* Names of ggml types, so an error can say what it saw. */
static const char *ggml_type_name(uint32_t t)
{
    static const char *const names[] = {
        "f32",     "f16",    "q4_0",    "q4_1",  "q4_2",   "q4_3",  "q5_0",  "q5_1",
        "q8_0",    "q8_1",   "q2_K",    "q3_K",  "q4_K",   "q5_K",  "q6_K",  "q8_K",
        "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs",
        "i8",      "i16",    "i32",     "i64",   "f64",    "iq1_m", "bf16"};
    return t < FOLIO_ARRAY_LEN(names) ? names[t] : "unknown";
}

/* Elements per block of a file type (1 for the float types). */
static int64_t tensor_type_block(uint32_t t)
{
    return quant_traits_of((enum gguf_tensor_type)t)->block;
}

const char *gguf_tensor_type_name(enum gguf_tensor_type t)
{
    const struct quant_traits *r = quant_traits_of(t);
    return r ? r->name : "?";
}

size_t gguf_tensor_nbytes(enum gguf_tensor_type t, int64_t n)
{
    const struct quant_traits *r = quant_traits_of(t);
    if (!r || n < 0 || n % r->block)
        return 0;
    if ((uint64_t)(n / r->block) > SIZE_MAX / (uint64_t)r->block_bytes)
        return 0;
    return (size_t)(n / r->block) * (size_t)r->block_bytes;
}

int64_t gguf_tensor_block(enum gguf_tensor_type t)
{
    const struct quant_traits *r = quant_traits_of(t);
    return r ? r->block : 0;
}

int gguf_tensor_from_f32(enum gguf_tensor_type t, const float *src, void *dst, int64_t n)
{
    return quant_from_float(t, src, dst, n);
}

int gguf_tensor_from_f32_w(enum gguf_tensor_type t, const float *src, void *dst, int64_t n,
                           const float *qw, int64_t row)
{
    return quant_from_float_w(t, src, dst, n, qw, row);
}

bool gguf_tensor_uses_imatrix(enum gguf_tensor_type t)
{
    return quant_uses_imatrix(t);
}

int gguf_tensor_to_f32(enum gguf_tensor_type t, const void *src, float *dst, int64_t n)
{
    const struct quant_traits *r = quant_traits_of(t);
    if (!r || n < 0 || n % r->block)
        return -EINVAL;
    quant_to_float(t, src, dst, n);
    return 0;
}

/* ---- reader ----------------------------------------------------------- */

struct gguf_kv {
    char *key; /* NUL-terminated copy */
    enum gguf_type type;
    const uint8_t *raw; /* value bytes (after the type field) */
    size_t raw_len;
    enum gguf_type arr_type; /* arrays */
    uint64_t arr_n;          /* arrays: element count; strings: byte length */
    const uint8_t *payload;  /* scalars: the value; strings: the chars;
                                numeric arrays: the first element */
    size_t *str_offs;        /* string arrays: offset of each element's
                                length field, relative to raw */
};

struct gguf_tensor {
    char *name;
    enum gguf_tensor_type type;
    int32_t n_dims;
    int64_t ne[4];
    uint64_t offset; /* from data_start of its file */
    size_t nbytes;
    int32_t part; /* its file: 0 this one, k > 0 parts[k - 1] (a split model) */
};

struct gguf_file {
    char *path;
    const uint8_t *map;
    size_t size;
    uint32_t version;
    uint32_t alignment;
    size_t data_start;
    int64_t n_kv, n_tensors;
    struct gguf_kv *kv;          /* [n_kv], file order */
    struct gguf_tensor *tensors; /* [n_tensors], file order */
    int64_t *kv_by_name;         /* [n_kv] indices sorted by key (lookups) */
    int64_t *tensor_by_name;     /* [n_tensors] indices sorted by name */
    struct gguf_file **parts;    /* a split model's other files, [n_parts]: their
                                    mappings hold the tensors whose part they are */
    int32_t n_parts;
};

/* A bounds-checked cursor over the mapping. */
struct cur {
    const uint8_t *base;
    size_t size, pos;
};

static bool cur_need(const struct cur *c, uint64_t n)
{
    return n <= c->size - c->pos;
}

static bool cur_u32(struct cur *c, uint32_t *v)
{
    if (!cur_need(c, 4))
        return false;
    memcpy(v, c->base + c->pos, 4);
    c->pos += 4;
    return true;
}

static bool cur_u64(struct cur *c, uint64_t *v)
{
    if (!cur_need(c, 8))
        return false;
    memcpy(v, c->base + c->pos, 8);
    c->pos += 8;
    return true;
}

/* A string: *s points at its bytes in the mapping.  Returns 0, or a short
 * reason for the caller's message. */
static const char *cur_str(struct cur *c, const uint8_t **s, uint64_t *len)
{
    if (!cur_u64(c, len))
        return "truncated (string length)";
    if (!cur_need(c, *len))
        return "string length runs past the end of the file";
    *s = c->base + c->pos;
    c->pos += (size_t)*len;
    return NULL;
}

static void set_err(char *err, size_t errlen, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void set_err(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    int n = snprintf(err, errlen, "%s: ", path);
    if (n < 0 || (size_t)n >= errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

/* A name from the file as a C string; NULL on allocation failure. */
static char *dup_name(const uint8_t *s, uint64_t len)
{
    char *p = folio_malloc((size_t)len + 1);
    if (!p)
        return NULL;
    memcpy(p, s, (size_t)len);
    p[len] = 0;
    return p;
}

/* Printable excerpt of a (possibly binary) name for error messages. */
static void name_excerpt(char *out, size_t outlen, const uint8_t *s, uint64_t len)
{
    size_t j = 0;
    for (uint64_t i = 0; i < len && j + 5 < outlen; i++) {
        unsigned char ch = s[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\'')
            out[j++] = (char)ch;
        else
            j += (size_t)snprintf(out + j, outlen - j, "\\x%02x", ch);
    }
    if (len > 0 && j + 5 >= outlen && j >= 3)
        memcpy(out + j - 3, "...", 3);
    out[j] = 0;
}

void gguf_close(gguf_file_t *f)
{
    if (!f)
        return;
    if (f->kv) {
        for (int64_t i = 0; i < f->n_kv; i++) {
            folio_free(f->kv[i].key);
            folio_free(f->kv[i].str_offs);
        }
        folio_free(f->kv);
    }
    if (f->tensors) {
        for (int64_t i = 0; i < f->n_tensors; i++)
            folio_free(f->tensors[i].name);
        folio_free(f->tensors);
    }
    folio_free(f->kv_by_name);
    folio_free(f->tensor_by_name);
    for (int32_t i = 0; i < f->n_parts; i++)
        gguf_close(f->parts[i]);
    folio_free(f->parts);
    if (f->map)
        munmap((void *)f->map, f->size);
    folio_free(f->path);
    folio_free(f);
}

/* Parses one value of type t at the cursor into kv (arrays recurse one
 * level).  Returns NULL or a reason. */
static const char *parse_value(struct cur *c, struct gguf_kv *kv, uint32_t t, int *errno_out)
{
    size_t start = c->pos;
    kv->type = (enum gguf_type)t;
    if (!type_known(t))
        return "unknown value type";
    if (t == GGUF_TYPE_STRING) {
        const uint8_t *s;
        uint64_t len;
        const char *why = cur_str(c, &s, &len);
        if (why)
            return why;
        kv->payload = s;
        kv->arr_n = len;
    } else if (t == GGUF_TYPE_ARRAY) {
        uint32_t et;
        uint64_t n;
        if (!cur_u32(c, &et) || !cur_u64(c, &n))
            return "truncated (array header)";
        if (!type_known(et))
            return "array has an unknown element type";
        if (et == GGUF_TYPE_ARRAY)
            return "arrays of arrays are not supported";
        kv->arr_type = (enum gguf_type)et;
        kv->arr_n = n;
        kv->payload = c->base + c->pos;
        if (et == GGUF_TYPE_STRING) {
            if (n > (c->size - c->pos) / 8)
                return "array count larger than the file could hold";
            /* Walk the strings first, allocating nothing: the offsets
             * table is then sized by strings the file really holds. */
            size_t first = c->pos;
            for (uint64_t i = 0; i < n; i++) {
                const uint8_t *s;
                uint64_t len;
                const char *why = cur_str(c, &s, &len);
                if (why)
                    return why;
            }
            kv->str_offs = folio_malloc((size_t)(n ? n : 1) * sizeof(size_t));
            if (!kv->str_offs) {
                *errno_out = -ENOMEM;
                return "out of memory";
            }
            c->pos = first;
            for (uint64_t i = 0; i < n; i++) {
                const uint8_t *s;
                uint64_t len;
                kv->str_offs[i] = c->pos - start;
                cur_str(c, &s, &len);
            }
        } else {
            size_t es = type_scalar_size(et);
            if (n > (c->size - c->pos) / es)
                return "array runs past the end of the file";
            if (et == GGUF_TYPE_BOOL)
                for (uint64_t i = 0; i < n; i++)
                    if (c->base[c->pos + i] > 1)
                        return "bool array element is neither 0 nor 1";
            c->pos += (size_t)(n * es);
        }
    } else {
        size_t es = type_scalar_size(t);
        if (!cur_need(c, es))
            return "truncated (value)";
        kv->payload = c->base + c->pos;
        if (t == GGUF_TYPE_BOOL && *kv->payload > 1)
            return "bool value is neither 0 nor 1";
        c->pos += es;
    }
    kv->raw = c->base + start;
    kv->raw_len = c->pos - start;
    return NULL;
}

static int cmp_kv_name(const void *a, const void *b, void *arg)
{
    const struct gguf_kv *kv = arg;
    return strcmp(kv[*(const int64_t *)a].key, kv[*(const int64_t *)b].key);
}

static int cmp_tensor_name(const void *a, const void *b, void *arg)
{
    const struct gguf_tensor *t = arg;
    return strcmp(t[*(const int64_t *)a].name, t[*(const int64_t *)b].name);
}

/* Makes room for entry i of an array of `size`-byte entries that grows by
 * doubling (new entries zeroed), so the memory follows the entries the
 * file really holds, never a count it claims. */
static int grow(void **arr, size_t *cap, uint64_t i, size_t size)
{
    if (i < *cap)
        return 0;
    size_t ncap = *cap ? 2 * *cap : 16;
    void *p = folio_realloc(*arr, ncap * size);
    if (!p)
        return -ENOMEM;
    memset((char *)p + *cap * size, 0, (ncap - *cap) * size);
    *arr = p;
    *cap = ncap;
    return 0;
}

static int cmp_tensor_off(const void *a, const void *b)
{
    const struct gguf_tensor *const *x = a, *const *y = b;
    if ((*x)->offset != (*y)->offset)
        return (*x)->offset < (*y)->offset ? -1 : 1;
    return 0;
}

/* Header: magic, version, and counts the file's size can hold. */
static int parse_header(gguf_file_t *f, struct cur *c, uint64_t *n_tensors, uint64_t *n_kv,
                        char *err, size_t errlen)
{
    const char *path = f->path;
    uint32_t magic, version;
    if (f->size < 24) {
        set_err(err, errlen, path, "file too short for a GGUF header (%zu bytes)", f->size);
        return -EINVAL;
    }
    cur_u32(c, &magic);
    if (memcmp(f->map, "GGUF", 4)) {
        set_err(err, errlen, path, "not a GGUF file (bad magic %02x %02x %02x %02x)", f->map[0],
                f->map[1], f->map[2], f->map[3]);
        return -EINVAL;
    }
    cur_u32(c, &version);
    if (version == 0x02000000u || version == 0x03000000u) {
        set_err(err, errlen, path, "big-endian GGUF files are not supported");
        return -EINVAL;
    }
    if (version != 2 && version != 3) {
        set_err(err, errlen, path, "unsupported GGUF version %" PRIu32 " (want 2 or 3)", version);
        return -EINVAL;
    }
    f->version = version;
    cur_u64(c, n_tensors);
    cur_u64(c, n_kv);
    /* Smallest key/value: 8 (len) + 1 (name) + 4 (type) + 1 (u8). */
    if (*n_kv > (f->size - c->pos) / 14) {
        set_err(err, errlen, path, "absurd metadata key count %" PRIu64 " for a %zu-byte file",
                *n_kv, f->size);
        return -EINVAL;
    }
    /* Smallest tensor info: 8 + 1 + 4 + 8 + 4 + 8. */
    if (*n_tensors > (f->size - c->pos) / 33) {
        set_err(err, errlen, path, "absurd tensor count %" PRIu64 " for a %zu-byte file",
                *n_tensors, f->size);
        return -EINVAL;
    }
    /* Both counts also fit what the file can hold together. */
    if (*n_kv * 14 + *n_tensors * 33 > f->size - c->pos) {
        set_err(err, errlen, path,
                "%" PRIu64 " metadata keys and %" PRIu64 " tensors cannot fit in a %zu-byte file",
                *n_kv, *n_tensors, f->size);
        return -EINVAL;
    }
    return 0;
}

/* Metadata key i: its name and value. */
static int parse_kv(gguf_file_t *f, struct cur *c, uint64_t i, char *err, size_t errlen)
{
    const char *path = f->path;
    struct gguf_kv *kv = &f->kv[i];
    const uint8_t *ks;
    uint64_t klen;
    uint32_t t;
    char nm[96];
    const char *why = cur_str(c, &ks, &klen);
    if (why) {
        set_err(err, errlen, path, "metadata key #%" PRIu64 ": name: %s", i, why);
        return -EINVAL;
    }
    name_excerpt(nm, sizeof(nm), ks, klen);
    if (klen == 0 || memchr(ks, 0, (size_t)klen)) {
        set_err(err, errlen, path, "metadata key #%" PRIu64 " '%s': name is empty or has NUL", i,
                nm);
        return -EINVAL;
    }
    if (klen > GGUF_MAX_NAME) {
        set_err(err, errlen, path,
                "metadata key #%" PRIu64 " '%s': name of %" PRIu64 " bytes (at most %u)", i, nm,
                klen, GGUF_MAX_NAME);
        return -EINVAL;
    }
    kv->key = dup_name(ks, klen);
    if (!kv->key) {
        set_err(err, errlen, path, "out of memory");
        return -ENOMEM;
    }
    f->n_kv = (int64_t)i + 1; /* for cleanup */
    if (!cur_u32(c, &t)) {
        set_err(err, errlen, path, "key '%s': truncated (type)", nm);
        return -EINVAL;
    }
    int erc = 0;
    why = parse_value(c, kv, t, &erc);
    if (why) {
        set_err(err, errlen, path, "key '%s' (type %s): %s", nm, type_name(t), why);
        return erc ? erc : -EINVAL;
    }
    return 0;
}

/* Every key, the by-name index (no duplicates), general.alignment. */
static int parse_metadata(gguf_file_t *f, struct cur *c, uint64_t n_kv, char *err, size_t errlen)
{
    const char *path = f->path;
    /* Entries are added as they are parsed (grow()); nothing is sized by
     * the header's count. */
    size_t kv_cap = 0;
    int rc;
    for (uint64_t i = 0; i < n_kv; i++) {
        if (grow((void **)&f->kv, &kv_cap, i, sizeof(*f->kv))) {
            set_err(err, errlen, path, "out of memory");
            return -ENOMEM;
        }
        if ((rc = parse_kv(f, c, i, err, errlen)))
            return rc;
    }
    f->kv_by_name = folio_malloc((n_kv ? (size_t)n_kv : 1) * sizeof(int64_t));
    if (!f->kv_by_name) {
        set_err(err, errlen, path, "out of memory");
        return -ENOMEM;
    }
    for (uint64_t i = 0; i < n_kv; i++)
        f->kv_by_name[i] = (int64_t)i;
    qsort_r(f->kv_by_name, (size_t)n_kv, sizeof(int64_t), cmp_kv_name, f->kv);
    for (uint64_t i = 1; i < n_kv; i++)
        if (!strcmp(f->kv[f->kv_by_name[i]].key, f->kv[f->kv_by_name[i - 1]].key)) {
            set_err(err, errlen, path, "key '%.200s' appears twice", f->kv[f->kv_by_name[i]].key);
            return -EINVAL;
        }
    f->n_kv = (int64_t)n_kv; /* gguf_find_key below uses the index */

    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t ai = gguf_find_key(f, "general.alignment");
    if (ai >= 0) {
        uint64_t a;
        if (gguf_get_u64(f, ai, &a) || a == 0 || (a & (a - 1)) || a > GGUF_MAX_ALIGNMENT) {
            set_err(err, errlen, path,
                    "key 'general.alignment': must be an unsigned power of two <= %u",
                    GGUF_MAX_ALIGNMENT);
            return -EINVAL;
        }
        f->alignment = (uint32_t)a;
    }
    return 0;
}

/* Tensor info i after its name: dimensions, type, offset. */
static int parse_tensor_shape(gguf_file_t *f, struct cur *c, struct gguf_tensor *t, const char *nm,
                              char *err, size_t errlen)
{
    const char *path = f->path;
    uint32_t nd, ty;
    if (!cur_u32(c, &nd)) {
        set_err(err, errlen, path, "tensor '%s': truncated (n_dims)", nm);
        return -EINVAL;
    }
    if (nd < 1 || nd > 4) {
        set_err(err, errlen, path, "tensor '%s': %" PRIu32 " dimensions (want 1..4)", nm, nd);
        return -EINVAL;
    }
    t->n_dims = (int32_t)nd;
    int64_t n_elems = 1;
    for (uint32_t d = 0; d < 4; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t ne;
        if (!cur_u64(c, &ne)) {
            set_err(err, errlen, path, "tensor '%s': truncated (dims)", nm);
            return -EINVAL;
        }
        if (ne == 0 || ne > (uint64_t)INT64_MAX / (uint64_t)n_elems) {
            set_err(err, errlen, path,
                    "tensor '%s': dimension %" PRIu32 " is %" PRIu64
                    " (zero or element count overflows)",
                    nm, d, ne);
            return -EINVAL;
        }
        t->ne[d] = (int64_t)ne;
        n_elems *= (int64_t)ne;
    }
    if (!cur_u32(c, &ty)) {
        set_err(err, errlen, path, "tensor '%s': truncated (type)", nm);
        return -EINVAL;
    }
    if (!tensor_type_known(ty)) {
        set_err(err, errlen, path,
                "tensor '%s': unsupported tensor type %" PRIu32
                " (%s); foliod reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,"
                " Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS",
                nm, ty, ggml_type_name(ty));
        return -EINVAL;
    }
    t->type = (enum gguf_tensor_type)ty;
    if (t->ne[0] % tensor_type_block(ty)) {
        set_err(err, errlen, path,
                "tensor '%s': %s row length %" PRId64 " is not a multiple of %" PRId64, nm,
                gguf_tensor_type_name(t->type), t->ne[0], tensor_type_block(ty));
        return -EINVAL;
    }
    t->nbytes = gguf_tensor_nbytes(t->type, n_elems);
    if (t->nbytes == 0 || t->nbytes > f->size) {
        set_err(err, errlen, path, "tensor '%s': %" PRId64 " elements are larger than the file", nm,
                n_elems);
        return -EINVAL;
    }
    if (!cur_u64(c, &t->offset)) {
        set_err(err, errlen, path, "tensor '%s': truncated (offset)", nm);
        return -EINVAL;
    }
    if (t->offset % f->alignment) {
        set_err(err, errlen, path,
                "tensor '%s': offset %" PRIu64 " is not a multiple of the alignment %" PRIu32, nm,
                t->offset, f->alignment);
        return -EINVAL;
    }
    return 0;
}

/* Tensor info i. */
static int parse_tensor(gguf_file_t *f, struct cur *c, uint64_t i, char *err, size_t errlen)
{
    const char *path = f->path;
    struct gguf_tensor *t = &f->tensors[i];
    const uint8_t *ns;
    uint64_t nlen;
    char nm[96];
    const char *why = cur_str(c, &ns, &nlen);
    if (why) {
        set_err(err, errlen, path, "tensor #%" PRIu64 ": name: %s", i, why);
        return -EINVAL;
    }
    name_excerpt(nm, sizeof(nm), ns, nlen);
    if (nlen == 0 || memchr(ns, 0, (size_t)nlen)) {
        set_err(err, errlen, path, "tensor #%" PRIu64 " '%s': name is empty or has NUL", i, nm);
        return -EINVAL;
    }
    if (nlen > GGUF_MAX_NAME) {
        set_err(err, errlen, path,
                "tensor #%" PRIu64 " '%s': name of %" PRIu64 " bytes (at most %u)", i, nm, nlen,
                GGUF_MAX_NAME);
        return -EINVAL;
    }
    t->name = dup_name(ns, nlen);
    if (!t->name) {
        set_err(err, errlen, path, "out of memory");
        return -ENOMEM;
    }
    f->n_tensors = (int64_t)i + 1; /* for cleanup */
    return parse_tensor_shape(f, c, t, nm, err, errlen);
}

/* The by-name index of f's first n tensors; no name may appear twice. */
static int index_tensors(gguf_file_t *f, uint64_t n_tensors, char *err, size_t errlen)
{
    folio_free(f->tensor_by_name);
    f->tensor_by_name = folio_malloc((n_tensors ? (size_t)n_tensors : 1) * sizeof(int64_t));
    if (!f->tensor_by_name) {
        set_err(err, errlen, f->path, "out of memory");
        return -ENOMEM;
    }
    for (uint64_t i = 0; i < n_tensors; i++)
        f->tensor_by_name[i] = (int64_t)i;
    qsort_r(f->tensor_by_name, (size_t)n_tensors, sizeof(int64_t), cmp_tensor_name, f->tensors);
    for (uint64_t i = 1; i < n_tensors; i++) {
        const struct gguf_tensor *a = &f->tensors[f->tensor_by_name[i - 1]];
        const struct gguf_tensor *b = &f->tensors[f->tensor_by_name[i]];
        if (!strcmp(a->name, b->name)) {
            if (a->part == b->part)
                set_err(err, errlen, f->path, "tensor '%.200s' appears twice", b->name);
            else
                set_err(err, errlen, f->path, "tensor '%.200s' appears twice: in %s and in %s",
                        b->name, a->part ? f->parts[a->part - 1]->path : f->path,
                        b->part ? f->parts[b->part - 1]->path : f->path);
            return -EINVAL;
        }
    }
    return 0;
}

/* Every tensor info and the by-name index (no duplicates). */
static int parse_tensors(gguf_file_t *f, struct cur *c, uint64_t n_tensors, char *err,
                         size_t errlen)
{
    const char *path = f->path;
    size_t t_cap = 0;
    int rc;
    for (uint64_t i = 0; i < n_tensors; i++) {
        if (grow((void **)&f->tensors, &t_cap, i, sizeof(*f->tensors))) {
            set_err(err, errlen, path, "out of memory");
            return -ENOMEM;
        }
        if ((rc = parse_tensor(f, c, i, err, errlen)))
            return rc;
    }
    return index_tensors(f, n_tensors, err, errlen);
}

/* The data section: every tensor inside it, no two overlapping. */
static int check_data(gguf_file_t *f, const struct cur *c, uint64_t n_tensors, char *err,
                      size_t errlen)
{
    const char *path = f->path;
    f->data_start = c->pos + (f->alignment - c->pos % f->alignment) % f->alignment;
    if (n_tensors > 0 && f->data_start > f->size) {
        set_err(err, errlen, path,
                "truncated: the tensor data section starts at %zu, past the end (%zu bytes)",
                f->data_start, f->size);
        return -EINVAL;
    }
    size_t data_size = f->data_start <= f->size ? f->size - f->data_start : 0;
    for (uint64_t i = 0; i < n_tensors; i++) {
        struct gguf_tensor *t = &f->tensors[i];
        if (t->offset > data_size || t->nbytes > data_size - t->offset) {
            set_err(err, errlen, path,
                    "tensor '%.200s': data [%" PRIu64 ", +%zu) runs past the end of the file "
                    "(data section holds %zu bytes)",
                    t->name, t->offset, t->nbytes, data_size);
            return -EINVAL;
        }
    }
    const struct gguf_tensor **sorted =
        folio_malloc((n_tensors ? (size_t)n_tensors : 1) * sizeof(void *));
    if (!sorted) {
        set_err(err, errlen, path, "out of memory");
        return -ENOMEM;
    }
    for (uint64_t i = 0; i < n_tensors; i++)
        sorted[i] = &f->tensors[i];
    qsort(sorted, (size_t)n_tensors, sizeof(void *), cmp_tensor_off);
    int rc = 0;
    for (uint64_t i = 1; i < n_tensors && !rc; i++) {
        const struct gguf_tensor *a = sorted[i - 1], *b = sorted[i];
        if (a->offset + a->nbytes > b->offset) {
            set_err(err, errlen, path, "tensors '%.100s' and '%.100s' overlap", a->name, b->name);
            rc = -EINVAL;
        }
    }
    folio_free(sorted);
    return rc;
}

/* The whole file, in its order: header, metadata, tensor infos, data. */
static int parse(gguf_file_t *f, char *err, size_t errlen)
{
    struct cur c = {f->map, f->size, 0};
    uint64_t n_tensors, n_kv;
    int rc;
    if ((rc = parse_header(f, &c, &n_tensors, &n_kv, err, errlen)) ||
        (rc = parse_metadata(f, &c, n_kv, err, errlen)) ||
        (rc = parse_tensors(f, &c, n_tensors, err, errlen)) ||
        (rc = check_data(f, &c, n_tensors, err, errlen)))
        return rc;
    f->n_kv = (int64_t)n_kv;
    f->n_tensors = (int64_t)n_tensors;
    return 0;
}

/* One file, mapped and validated (gguf_open without its parts). */
static int open_one(const char *path, gguf_file_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (err && errlen)
        err[0] = 0;
    gguf_file_t *f = folio_calloc(1, sizeof(*f));
    if (!f || !(f->path = folio_strdup(path))) {
        folio_free(f);
        set_err(err, errlen, path, "out of memory");
        return -ENOMEM;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        set_err(err, errlen, path, "cannot open: %s", strerror(e));
        gguf_close(f);
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        set_err(err, errlen, path, "cannot stat: %s", strerror(e));
        close(fd);
        gguf_close(f);
        return -e;
    }
    if (!S_ISREG(st.st_mode)) {
        set_err(err, errlen, path, "not a regular file");
        close(fd);
        gguf_close(f);
        return -EINVAL;
    }
    f->size = (size_t)st.st_size;
    if (f->size >= 24) {
        void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            set_err(err, errlen, path, "cannot map: %s", strerror(e));
            close(fd);
            f->size = 0;
            gguf_close(f);
            return -e;
        }
        f->map = p;
    }
    close(fd);
    int rc = parse(f, err, errlen);
    if (rc) {
        gguf_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

/* Key `key` of f as a count (absent: dflt); -EINVAL if it is not one. */
static int split_key(const gguf_file_t *f, const char *key, uint64_t dflt, uint64_t *v)
{
    const int64_t i = gguf_find_key(f, key);
    *v = dflt;
    return i < 0 ? 0 : gguf_get_u64(f, i, v);
}

/* A split model (llama.cpp's gguf-split): files PREFIX-00001-of-0000N.gguf
 * .. PREFIX-0000N-of-0000N.gguf, each with split.no (0-based), split.count
 * and split.tensors.count; the first holds the metadata.  Given the first,
 * the others are opened and validated and their tensors join f's table, in
 * part order, with their own files' mappings. */
static int open_parts(gguf_file_t *f, char *err, size_t errlen)
{
    uint64_t count, no, total;
    if (split_key(f, "split.count", 1, &count) || split_key(f, "split.no", 0, &no) ||
        split_key(f, "split.tensors.count", UINT64_MAX, &total) || count > 99999 ||
        (count > 0 && no >= count)) {
        set_err(err, errlen, f->path, "bad split.count or split.no (not counts, or no >= count)");
        return -EINVAL;
    }
    if (count <= 1)
        return 0;
    char tail[32];
    snprintf(tail, sizeof(tail), "-%05" PRIu64 "-of-%05" PRIu64 ".gguf", no + 1, count);
    const size_t len = strlen(f->path), tl = strlen(tail);
    if (no != 0) {
        set_err(err, errlen, f->path,
                "part %" PRIu64 " of a model split in %" PRIu64 " files: open its first part, "
                "PREFIX-00001-of-%05" PRIu64 ".gguf",
                no + 1, count, count);
        return -EINVAL;
    }
    if (len < tl || strcmp(f->path + len - tl, tail)) {
        set_err(err, errlen, f->path,
                "the first part of a model split in %" PRIu64 " files, but not named "
                "PREFIX%s, the name its other parts are found by",
                count, tail);
        return -EINVAL;
    }
    char *path = folio_malloc(len + 1);
    if (!path) {
        set_err(err, errlen, f->path, "out of memory");
        return -ENOMEM;
    }
    int rc = 0;
    uint64_t n = (uint64_t)f->n_tensors;
    size_t cap = 0; /* parts[] grows as parts open, not by the count claimed */
    for (uint64_t i = 1; i < count && !rc; i++) {
        snprintf(path, len + 1, "%.*s-%05" PRIu64 "-of-%05" PRIu64 ".gguf", (int)(len - tl),
                 f->path, i + 1, count);
        gguf_file_t *p;
        uint64_t pc, pn;
        char why[512];
        if ((rc = open_one(path, &p, why, sizeof(why)))) {
            set_err(err, errlen, f->path, "part %" PRIu64 " of %" PRIu64 ": %s", i + 1, count, why);
            break;
        }
        if (grow((void **)&f->parts, &cap, (uint64_t)f->n_parts, sizeof(*f->parts))) {
            gguf_close(p);
            set_err(err, errlen, f->path, "out of memory");
            rc = -ENOMEM;
            break;
        }
        f->parts[f->n_parts++] = p;
        if (split_key(p, "split.count", 0, &pc) || split_key(p, "split.no", UINT64_MAX, &pn) ||
            pc != count || pn != i) {
            set_err(err, errlen, f->path,
                    "%s is not part %" PRIu64 " of %" PRIu64 " (its split.no, split.count)", path,
                    i + 1, count);
            rc = -EINVAL;
            break;
        }
        n += (uint64_t)p->n_tensors;
    }
    folio_free(path);
    if (rc)
        return rc;
    if (total != UINT64_MAX && total != n) {
        set_err(err, errlen, f->path,
                "split.tensors.count says %" PRIu64 " tensors, the %" PRIu64 " files hold %" PRIu64,
                total, count, n);
        return -EINVAL;
    }
    struct gguf_tensor *all = folio_realloc(f->tensors, (size_t)(n ? n : 1) * sizeof(*all));
    if (!all) {
        set_err(err, errlen, f->path, "out of memory");
        return -ENOMEM;
    }
    f->tensors = all;
    for (int32_t k = 0; k < f->n_parts; k++) { /* names move to f */
        gguf_file_t *p = f->parts[k];
        for (int64_t j = 0; j < p->n_tensors; j++) {
            all[f->n_tensors] = p->tensors[j];
            all[f->n_tensors++].part = k + 1;
            p->tensors[j].name = NULL;
        }
    }
    return index_tensors(f, n, err, errlen);
}

int gguf_open(const char *path, gguf_file_t **out, char *err, size_t errlen)
{
    gguf_file_t *f;
    *out = NULL;
    int rc = open_one(path, &f, err, errlen);
    if (rc)
        return rc;
    if ((rc = open_parts(f, err, errlen))) {
        gguf_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

int64_t gguf_n_keys(const gguf_file_t *f)
{
    return f->n_kv;
}

static const struct gguf_kv *kv_at(const gguf_file_t *f, int64_t idx)
{
    return idx >= 0 && idx < f->n_kv ? &f->kv[idx] : NULL;
}

const char *gguf_key_name(const gguf_file_t *f, int64_t idx)
{
    const struct gguf_kv *kv = kv_at(f, idx);
    return kv ? kv->key : NULL;
}

/* Binary search of a name-sorted index (kv_by_name or tensor_by_name):
 * the entry whose name is `want`, or -1. */
static int64_t find_sorted(const gguf_file_t *f, const int64_t *index, int64_t n, bool tensors,
                           const char *want)
{
    int64_t lo = 0, hi = n - 1;
    while (index && lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2, i = index[mid];
        int c = strcmp(tensors ? f->tensors[i].name : f->kv[i].key, want);
        if (c == 0)
            return i;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

int64_t gguf_find_key(const gguf_file_t *f, const char *key)
{
    return find_sorted(f, f->kv_by_name, f->n_kv, false, key);
}

enum gguf_type gguf_key_type(const gguf_file_t *f, int64_t idx)
{
    const struct gguf_kv *kv = kv_at(f, idx);
    return kv ? kv->type : (enum gguf_type) - 1;
}

/* Any integer value as a sign + magnitude pair. */
static int kv_int(const struct gguf_kv *kv, bool *neg, uint64_t *mag)
{
    const uint8_t *p = kv->payload;
    *neg = false;
    switch (kv->type) {
    case GGUF_TYPE_UINT8:
        *mag = p[0];
        return 0;
    case GGUF_TYPE_UINT16: {
        uint16_t v;
        memcpy(&v, p, 2);
        *mag = v;
        return 0;
    }
    case GGUF_TYPE_UINT32: {
        uint32_t v;
        memcpy(&v, p, 4);
        *mag = v;
        return 0;
    }
    case GGUF_TYPE_UINT64:
        memcpy(mag, p, 8);
        return 0;
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_INT16:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_INT64: {
        int64_t v;
        if (kv->type == GGUF_TYPE_INT8) {
            v = (int8_t)p[0];
        } else if (kv->type == GGUF_TYPE_INT16) {
            int16_t x;
            memcpy(&x, p, 2);
            v = x;
        } else if (kv->type == GGUF_TYPE_INT32) {
            int32_t x;
            memcpy(&x, p, 4);
            v = x;
        } else {
            memcpy(&v, p, 8);
        }
        *neg = v < 0;
        *mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
        return 0;
    }
    default:
        return -EINVAL;
    }
}

int gguf_get_u64(const gguf_file_t *f, int64_t idx, uint64_t *v)
{
    const struct gguf_kv *kv = kv_at(f, idx);
    bool neg;
    uint64_t mag;
    if (!kv || kv_int(kv, &neg, &mag) || neg)
        return -EINVAL;
    *v = mag;
    return 0;
}

int gguf_get_i64(const gguf_file_t *f, int64_t idx, int64_t *v)
{
    const struct gguf_kv *kv = kv_at(f, idx);
    bool neg;
    uint64_t mag;
    if (!kv || kv_int(kv, &neg, &mag))
        return -EINVAL;
    if (neg) {
        if (mag > (uint64_t)INT64_MAX + 1)
            return -EINVAL;
        *v = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    } else {
        if (mag > (uint64_t)INT64_MAX)
            return -EINVAL;
        *v = (int64_t)mag;
    }
    return 0;
}

int gguf_get_f32(const gguf_file_t *f, int64_t idx, float *v)
{
    const struct gguf_kv *kv = kv_at(f, idx);
    if (!kv)
        return -EINVAL;
    if (kv->type == GGUF_TYPE_FLOAT32) {
        memcpy(v, kv->payload, 4);
        return 0;
    }
    if (kv->type == GGUF_TYPE_FLOAT64) {
        double d;
        memcpy(&d, kv->payload, 8);
        *v = (float)d;
        return 0;
    }
    return -EINVAL;
}

int gguf_get_bool(const gguf_file_t *f, int64_t idx, bool *v)
{
    const struct gguf_kv *kv = kv_at(f, idx);
    if (!kv || kv->type != GGUF_TYPE_BOOL)
        return -EINVAL;
    *v = kv->payload[0] != 0;
    return 0;
}

int gguf_get_str(const gguf_file_t *f, int64_t idx, const char **s, size_t *len)
{
    const struct gguf_kv *kv = kv_at(f, idx);
    if (!kv || kv->type != GGUF_TYPE_STRING)
        return -EINVAL;
    *s = (const char *)kv->payload;
    *len = (size_t)kv->arr_n;
    return 0;
}

int gguf_arr_info(const gguf_file_t *f, int64_t idx, enum gguf_type *elem_type, uint64_t *n)
{
    const struct gguf_kv *kv = kv_at(f, idx);
    if (!kv || kv->type != GGUF_TYPE_ARRAY)
        return -EINVAL;
    *elem_type = kv->arr_type;
    *n = kv->arr_n;
    return 0;
}

const void *gguf_arr_data(const gguf_file_t *f, int64_t idx)
{
    const struct gguf_kv *kv = kv_at(f, idx);
    if (!kv || kv->type != GGUF_TYPE_ARRAY || kv->arr_type == GGUF_TYPE_STRING)
        return NULL;
    return kv->payload;
}

int gguf_arr_str(const gguf_file_t *f, int64_t idx, uint64_t i, const char **s, size_t *len)
{
    const struct gguf_kv *kv = kv_at(f, idx);
    if (!kv || kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_STRING || i >= kv->arr_n)
        return -EINVAL;
    const uint8_t *p = kv->raw + kv->str_offs[i];
    uint64_t l;
    memcpy(&l, p, 8);
    *s = (const char *)p + 8;
    *len = (size_t)l;
    return 0;
}

int64_t gguf_n_tensors(const gguf_file_t *f)
{
    return f->n_tensors;
}

int64_t gguf_find_tensor(const gguf_file_t *f, const char *name)
{
    return find_sorted(f, f->tensor_by_name, f->n_tensors, true, name);
}

void gguf_tensor_get(const gguf_file_t *f, int64_t idx, struct gguf_tensor_info *info)
{
    memset(info, 0, sizeof(*info));
    if (idx < 0 || idx >= f->n_tensors)
        return;
    const struct gguf_tensor *t = &f->tensors[idx];
    const gguf_file_t *src = t->part ? f->parts[t->part - 1] : f;
    info->name = t->name;
    info->type = t->type;
    info->n_dims = t->n_dims;
    memcpy(info->ne, t->ne, sizeof(info->ne));
    info->data = src->map + src->data_start + t->offset;
    info->nbytes = t->nbytes;
}

uint32_t gguf_alignment(const gguf_file_t *f)
{
    return f->alignment;
}

uint32_t gguf_version(const gguf_file_t *f)
{
    return f->version;
}

/* ---- writer ----------------------------------------------------------- */

struct wkv {
    char *key;
    enum gguf_type type;
    uint8_t *val; /* encoded value (what follows the type field) */
    size_t len;
};

struct wtensor {
    char *name;
    enum gguf_tensor_type type;
    int32_t n_dims;
    int64_t ne[4];
    const void *data;
    size_t nbytes;
    uint64_t offset;
};

struct gguf_writer {
    struct wkv *kv;
    int64_t n_kv, cap_kv;
    struct wtensor *t;
    int64_t n_t, cap_t;
    uint32_t alignment;
};

int gguf_writer_new(gguf_writer_t **out)
{
    gguf_writer_t *w = folio_calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->alignment = GGUF_DEFAULT_ALIGNMENT;
    *out = w;
    return 0;
}

void gguf_writer_free(gguf_writer_t *w)
{
    if (!w)
        return;
    for (int64_t i = 0; i < w->n_kv; i++) {
        folio_free(w->kv[i].key);
        folio_free(w->kv[i].val);
    }
    for (int64_t i = 0; i < w->n_t; i++)
        folio_free(w->t[i].name);
    folio_free(w->kv);
    folio_free(w->t);
    folio_free(w);
}

/* Values are encoded into a struct folio_buf (folio/buf.h). */
static void buf_u32(struct folio_buf *b, uint32_t v)
{
    folio_buf_append(b, &v, 4);
}

static void buf_u64(struct folio_buf *b, uint64_t v)
{
    folio_buf_append(b, &v, 8);
}

static void buf_str(struct folio_buf *b, const char *s, size_t len)
{
    buf_u64(b, len);
    folio_buf_append(b, s, len);
}

static bool w_has_key(const gguf_writer_t *w, const char *key)
{
    for (int64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key))
            return true;
    return false;
}

/* Takes ownership of b's bytes (also on failure). */
static int w_add(gguf_writer_t *w, const char *key, enum gguf_type type, struct folio_buf *b)
{
    if (b->oom) {
        folio_free(b->p);
        return -ENOMEM;
    }
    if (!key || !key[0] || w_has_key(w, key)) {
        folio_free(b->p);
        return key && key[0] ? -EEXIST : -EINVAL;
    }
    if (w->n_kv == w->cap_kv) {
        int64_t cap = w->cap_kv ? w->cap_kv * 2 : 16;
        struct wkv *kv = folio_realloc(w->kv, (size_t)cap * sizeof(*kv));
        if (!kv) {
            folio_free(b->p);
            return -ENOMEM;
        }
        w->kv = kv;
        w->cap_kv = cap;
    }
    char *k = folio_strdup(key);
    if (!k) {
        folio_free(b->p);
        return -ENOMEM;
    }
    w->kv[w->n_kv++] = (struct wkv){k, type, (uint8_t *)b->p, b->len};
    return 0;
}

int gguf_w_str(gguf_writer_t *w, const char *key, const char *val)
{
    struct folio_buf b = {0};
    buf_str(&b, val, strlen(val));
    return w_add(w, key, GGUF_TYPE_STRING, &b);
}

int gguf_w_u32(gguf_writer_t *w, const char *key, uint32_t val)
{
    struct folio_buf b = {0};
    buf_u32(&b, val);
    int rc = w_add(w, key, GGUF_TYPE_UINT32, &b);
    if (!rc && !strcmp(key, "general.alignment")) {
        if (val == 0 || (val & (val - 1)) || val > GGUF_MAX_ALIGNMENT) {
            w->n_kv--;
            folio_free(w->kv[w->n_kv].key);
            folio_free(w->kv[w->n_kv].val);
            return -EINVAL;
        }
        w->alignment = val;
    }
    return rc;
}

int gguf_w_u16(gguf_writer_t *w, const char *key, uint16_t val)
{
    struct folio_buf b = {0};
    folio_buf_append(&b, &val, 2);
    return w_add(w, key, GGUF_TYPE_UINT16, &b);
}

int gguf_w_i32(gguf_writer_t *w, const char *key, int32_t val)
{
    struct folio_buf b = {0};
    folio_buf_append(&b, &val, 4);
    return w_add(w, key, GGUF_TYPE_INT32, &b);
}

int gguf_w_f32(gguf_writer_t *w, const char *key, float val)
{
    struct folio_buf b = {0};
    folio_buf_append(&b, &val, 4);
    return w_add(w, key, GGUF_TYPE_FLOAT32, &b);
}

int gguf_w_bool(gguf_writer_t *w, const char *key, bool val)
{
    struct folio_buf b = {0};
    uint8_t v = val ? 1 : 0;
    folio_buf_append(&b, &v, 1);
    return w_add(w, key, GGUF_TYPE_BOOL, &b);
}

int gguf_w_arr_str(gguf_writer_t *w, const char *key, const char *const *vals, uint64_t n)
{
    struct folio_buf b = {0};
    buf_u32(&b, GGUF_TYPE_STRING);
    buf_u64(&b, n);
    for (uint64_t i = 0; i < n; i++)
        buf_str(&b, vals[i], strlen(vals[i]));
    return w_add(w, key, GGUF_TYPE_ARRAY, &b);
}

static int w_arr_num(gguf_writer_t *w, const char *key, enum gguf_type et, const void *vals,
                     uint64_t n)
{
    struct folio_buf b = {0};
    size_t es = type_scalar_size(et);
    if (n > SIZE_MAX / es / 2)
        return -EINVAL;
    buf_u32(&b, et);
    buf_u64(&b, n);
    folio_buf_append(&b, vals, (size_t)n * es);
    return w_add(w, key, GGUF_TYPE_ARRAY, &b);
}

int gguf_w_arr_f32(gguf_writer_t *w, const char *key, const float *vals, uint64_t n)
{
    return w_arr_num(w, key, GGUF_TYPE_FLOAT32, vals, n);
}

int gguf_w_arr_i32(gguf_writer_t *w, const char *key, const int32_t *vals, uint64_t n)
{
    return w_arr_num(w, key, GGUF_TYPE_INT32, vals, n);
}

int gguf_w_copy_key(gguf_writer_t *w, const gguf_file_t *f, int64_t idx)
{
    const struct gguf_kv *kv = kv_at(f, idx);
    if (!kv)
        return -EINVAL;
    if (!strcmp(kv->key, "general.alignment")) {
        uint64_t a;
        if (gguf_get_u64(f, idx, &a) || kv->type != GGUF_TYPE_UINT32)
            return -EINVAL;
        return gguf_w_u32(w, kv->key, (uint32_t)a);
    }
    struct folio_buf b = {0};
    folio_buf_append(&b, kv->raw, kv->raw_len);
    return w_add(w, kv->key, kv->type, &b);
}

int gguf_w_tensor(gguf_writer_t *w, const char *name, enum gguf_tensor_type type, int32_t n_dims,
                  const int64_t *ne, const void *data)
{
    if (!name || !name[0] || n_dims < 1 || n_dims > 4 || !tensor_type_known((uint32_t)type))
        return -EINVAL;
    int64_t n = 1;
    for (int32_t d = 0; d < n_dims; d++) {
        if (ne[d] <= 0 || ne[d] > INT64_MAX / n)
            return -EINVAL;
        n *= ne[d];
    }
    if (ne[0] % tensor_type_block((uint32_t)type))
        return -EINVAL;
    size_t nbytes = gguf_tensor_nbytes(type, n);
    if (!nbytes)
        return -EINVAL;
    for (int64_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name))
            return -EEXIST;
    if (w->n_t == w->cap_t) {
        int64_t cap = w->cap_t ? w->cap_t * 2 : 16;
        struct wtensor *t = folio_realloc(w->t, (size_t)cap * sizeof(*t));
        if (!t)
            return -ENOMEM;
        w->t = t;
        w->cap_t = cap;
    }
    char *nm = folio_strdup(name);
    if (!nm)
        return -ENOMEM;
    struct wtensor *t = &w->t[w->n_t++];
    *t = (struct wtensor){
        .name = nm, .type = type, .n_dims = n_dims, .data = data, .nbytes = nbytes};
    for (int32_t d = 0; d < 4; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    return 0;
}

static const uint8_t zeros[256];

static bool put_zeros(FILE *fp, size_t n)
{
    while (n) {
        size_t k = FOLIO_MIN(n, sizeof(zeros));
        if (fwrite(zeros, 1, k, fp) != k)
            return false;
        n -= k;
    }
    return true;
}

int gguf_writer_write(gguf_writer_t *w, const char *path, char *err, size_t errlen)
{
    return gguf_writer_write_fill(w, path, NULL, NULL, err, errlen);
}

int gguf_writer_write_fill(gguf_writer_t *w, const char *path, gguf_w_fill_fn fill, void *arg,
                           char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    for (int64_t i = 0; !fill && i < w->n_t; i++)
        if (!w->t[i].data) {
            set_err(err, errlen, path, "tensor '%s' has no data", w->t[i].name);
            return -EINVAL;
        }
    size_t plen = strlen(path);
    char *tmp = folio_malloc(plen + 5);
    if (!tmp) {
        set_err(err, errlen, path, "out of memory");
        return -ENOMEM;
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);

    /* Header and tensor infos are encoded in memory first. */
    struct folio_buf h = {0};
    folio_buf_append(&h, "GGUF", 4);
    buf_u32(&h, 3);
    buf_u64(&h, (uint64_t)w->n_t);
    buf_u64(&h, (uint64_t)w->n_kv);
    for (int64_t i = 0; i < w->n_kv; i++) {
        buf_str(&h, w->kv[i].key, strlen(w->kv[i].key));
        buf_u32(&h, w->kv[i].type);
        folio_buf_append(&h, w->kv[i].val, w->kv[i].len);
    }
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        struct wtensor *t = &w->t[i];
        t->offset = off;
        buf_str(&h, t->name, strlen(t->name));
        buf_u32(&h, (uint32_t)t->n_dims);
        for (int32_t d = 0; d < t->n_dims; d++)
            buf_u64(&h, (uint64_t)t->ne[d]);
        buf_u32(&h, t->type);
        buf_u64(&h, off);
        off += t->nbytes + (w->alignment - t->nbytes % w->alignment) % w->alignment;
    }
    if (h.oom) {
        folio_free(h.p);
        folio_free(tmp);
        set_err(err, errlen, path, "out of memory");
        return -ENOMEM;
    }

    int rc = 0;
    FILE *fp = fopen(tmp, "wbe");
    if (!fp) {
        rc = -errno;
        set_err(err, errlen, path, "cannot create %s: %s", tmp, strerror(-rc));
        goto out;
    }
    bool ok = fwrite(h.p, 1, h.len, fp) == h.len;
    ok = ok && put_zeros(fp, (w->alignment - h.len % w->alignment) % w->alignment);
    for (int64_t i = 0; ok && i < w->n_t; i++) {
        const struct wtensor *t = &w->t[i];
        const void *data = t->data;
        if (!data && ((rc = fill(arg, i, &data, err, errlen)) < 0 || !data)) {
            if (rc >= 0 || !err || !err[0])
                set_err(err, errlen, path, "no data for tensor '%s'", t->name);
            rc = rc < 0 ? rc : -EIO;
            fclose(fp);
            unlink(tmp);
            goto out;
        }
        ok = fwrite(data, 1, t->nbytes, fp) == t->nbytes;
        ok = ok && put_zeros(fp, (w->alignment - t->nbytes % w->alignment) % w->alignment);
    }
    ok = ok && fflush(fp) == 0 && fsync(fileno(fp)) == 0;
    if (!ok) {
        rc = errno ? -errno : -EIO;
        fclose(fp);
        set_err(err, errlen, path, "cannot write %s: %s", tmp, strerror(-rc));
        unlink(tmp);
        goto out;
    }
    if (fclose(fp) != 0) {
        rc = -errno;
        set_err(err, errlen, path, "cannot write %s: %s", tmp, strerror(-rc));
        unlink(tmp);
        goto out;
    }
    if (rename(tmp, path) != 0) {
        rc = -errno;
        set_err(err, errlen, path, "cannot rename %s into place: %s", tmp, strerror(-rc));
        unlink(tmp);
        goto out;
    }
out:
    folio_free(h.p);
    folio_free(tmp);
    return rc;
}
