/*
 * tests/tok_gguf_tmp.c — TEMPORARY minimal GGUF metadata reader for the
 * tokenizer tests, used only until model/gguf.c (gguf branch) is merged.
 * Reads the whole file into memory; no tensors; trusts sizes loosely.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/gguf.h"

struct tkey {
    const char *name;
    size_t name_len;
    enum gguf_type type;
    const unsigned char *val;
    enum gguf_type et;
    uint64_t n;
    size_t *str_off; /* string arrays: offset of each element */
};

struct gguf_file {
    unsigned char *buf;
    size_t size;
    struct tkey *keys;
    int64_t n_keys;
};

static size_t scalar_size(enum gguf_type t)
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
    default:
        return 8;
    }
}

static uint64_t rd64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t rd32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

int gguf_open(const char *path, gguf_file_t **out, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        if (err)
            snprintf(err, errlen, "%s: cannot open", path);
        return -ENOENT;
    }
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    gguf_file_t *f = calloc(1, sizeof(*f));
    f->buf = malloc((size_t)sz);
    f->size = (size_t)sz;
    if (fread(f->buf, 1, f->size, fp) != f->size || memcmp(f->buf, "GGUF", 4) != 0) {
        fclose(fp);
        gguf_close(f);
        if (err)
            snprintf(err, errlen, "%s: not GGUF", path);
        return -EINVAL;
    }
    fclose(fp);
    const unsigned char *p = f->buf + 4 + 4 + 8;
    f->n_keys = (int64_t)rd64(p);
    p += 8;
    f->keys = calloc((size_t)f->n_keys, sizeof(struct tkey));
    for (int64_t i = 0; i < f->n_keys; i++) {
        struct tkey *k = &f->keys[i];
        k->name_len = rd64(p);
        k->name = (const char *)p + 8;
        p += 8 + k->name_len;
        k->type = rd32(p);
        p += 4;
        k->val = p;
        if (k->type == GGUF_TYPE_STRING) {
            p += 8 + rd64(p);
        } else if (k->type == GGUF_TYPE_ARRAY) {
            k->et = rd32(p);
            k->n = rd64(p + 4);
            p += 12;
            k->val = p;
            if (k->et == GGUF_TYPE_STRING) {
                k->str_off = malloc(sizeof(size_t) * (k->n + 1));
                for (uint64_t j = 0; j < k->n; j++) {
                    k->str_off[j] = (size_t)(p - f->buf);
                    p += 8 + rd64(p);
                }
            } else {
                p += scalar_size(k->et) * k->n;
            }
        } else {
            p += scalar_size(k->type);
        }
    }
    *out = f;
    return 0;
}

void gguf_close(gguf_file_t *f)
{
    if (!f)
        return;
    for (int64_t i = 0; i < f->n_keys && f->keys; i++)
        free(f->keys[i].str_off);
    free(f->keys);
    free(f->buf);
    free(f);
}

int64_t gguf_n_keys(const gguf_file_t *f)
{
    return f->n_keys;
}

const char *gguf_key_name(const gguf_file_t *f, int64_t idx)
{
    return f->keys[idx].name;
}

int64_t gguf_find_key(const gguf_file_t *f, const char *key)
{
    size_t l = strlen(key);
    for (int64_t i = 0; i < f->n_keys; i++)
        if (f->keys[i].name_len == l && memcmp(f->keys[i].name, key, l) == 0)
            return i;
    return -1;
}

enum gguf_type gguf_key_type(const gguf_file_t *f, int64_t idx)
{
    return f->keys[idx].type;
}

static int get_int(const struct tkey *k, int64_t *v)
{
    const unsigned char *p = k->val;
    switch (k->type) {
    case GGUF_TYPE_UINT8:
        *v = p[0];
        return 0;
    case GGUF_TYPE_INT8:
        *v = (int8_t)p[0];
        return 0;
    case GGUF_TYPE_UINT32:
        *v = rd32(p);
        return 0;
    case GGUF_TYPE_INT32:
        *v = (int32_t)rd32(p);
        return 0;
    case GGUF_TYPE_UINT64:
    case GGUF_TYPE_INT64:
        *v = (int64_t)rd64(p);
        return 0;
    default:
        return -EINVAL;
    }
}

int gguf_get_u64(const gguf_file_t *f, int64_t idx, uint64_t *v)
{
    int64_t x;
    if (get_int(&f->keys[idx], &x) || x < 0)
        return -EINVAL;
    *v = (uint64_t)x;
    return 0;
}

int gguf_get_i64(const gguf_file_t *f, int64_t idx, int64_t *v)
{
    return get_int(&f->keys[idx], v);
}

int gguf_get_f32(const gguf_file_t *f, int64_t idx, float *v)
{
    if (f->keys[idx].type != GGUF_TYPE_FLOAT32)
        return -EINVAL;
    memcpy(v, f->keys[idx].val, 4);
    return 0;
}

int gguf_get_bool(const gguf_file_t *f, int64_t idx, bool *v)
{
    if (f->keys[idx].type != GGUF_TYPE_BOOL)
        return -EINVAL;
    *v = f->keys[idx].val[0] != 0;
    return 0;
}

int gguf_get_str(const gguf_file_t *f, int64_t idx, const char **s, size_t *len)
{
    if (f->keys[idx].type != GGUF_TYPE_STRING)
        return -EINVAL;
    *len = rd64(f->keys[idx].val);
    *s = (const char *)f->keys[idx].val + 8;
    return 0;
}

int gguf_arr_info(const gguf_file_t *f, int64_t idx, enum gguf_type *elem_type, uint64_t *n)
{
    if (f->keys[idx].type != GGUF_TYPE_ARRAY)
        return -EINVAL;
    *elem_type = f->keys[idx].et;
    *n = f->keys[idx].n;
    return 0;
}

const void *gguf_arr_data(const gguf_file_t *f, int64_t idx)
{
    return f->keys[idx].val;
}

int gguf_arr_str(const gguf_file_t *f, int64_t idx, uint64_t i, const char **s, size_t *len)
{
    const struct tkey *k = &f->keys[idx];
    if (k->type != GGUF_TYPE_ARRAY || k->et != GGUF_TYPE_STRING || i >= k->n)
        return -EINVAL;
    const unsigned char *p = f->buf + k->str_off[i];
    *len = rd64(p);
    *s = (const char *)p + 8;
    return 0;
}
