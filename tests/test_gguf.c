/*
 * tests/test_gguf.c — the GGUF reader and writer (model/gguf.c).
 *
 * Round trips: every key type the writer emits, plus every GGUF value type
 * from a hand-encoded file (an encoder written here, independent of the
 * writer), and every tensor type, compared field by field and byte by byte.
 * Corrupt files: a valid file is truncated at every length, and patched
 * field by field (magic, version, type codes, counts, lengths, dims,
 * offsets, overlaps, duplicates); each must fail with -EINVAL and a message
 * naming the file and the culprit, under ASan/UBSan without a bad read.
 * Conversions: F16/BF16/Q8_0 -> f32 against plain formulas.  Allocation
 * failures: the Nth allocation of gguf_open / the writer fails cleanly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define TEST_TMP_NAME "folio_test_gguf"
#include "test_tmp.h"

#include "folio/buf.h"
#include "folio/common.h"
#include "folio/gguf.h"

/* Opening path must fail with want_rc and a message naming the file and
 * containing `needle` (when not NULL). */
static void expect_fail(const char *path, int want_rc, const char *needle)
{
    gguf_file_t *f = (gguf_file_t *)0x1;
    char err[512];
    int rc = gguf_open(path, &f, err, sizeof(err));
    if (rc != want_rc || (needle && !strstr(err, needle)))
        print_error("open %s: rc %d (want %d), err '%s' (want '%s')\n", path, rc, want_rc, err,
                    needle ? needle : "");
    assert_int_equal(rc, want_rc);
    assert_null(f);
    assert_non_null(strstr(err, path));
    assert_true(strlen(err) > strlen(path) + 4);
    if (needle)
        assert_non_null(strstr(err, needle));
}

/* ---- an independent encoder ------------------------------------------ */

struct enc {
    struct folio_buf b; /* the bytes written so far */
};

static void e_put(struct enc *e, const void *src, size_t n)
{
    folio_buf_append(&e->b, src, n);
    assert_false(e->b.oom);
}

static void e_u8(struct enc *e, uint8_t v)
{
    e_put(e, &v, 1);
}
static void e_u16(struct enc *e, uint16_t v)
{
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    e_put(e, b, 2);
}
static void e_u32(struct enc *e, uint32_t v)
{
    uint8_t b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    e_put(e, b, 4);
}
static void e_u64(struct enc *e, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    e_put(e, b, 8);
}
static void e_str(struct enc *e, const char *s)
{
    e_u64(e, strlen(s));
    e_put(e, s, strlen(s));
}
static void e_f32(struct enc *e, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    e_u32(e, u);
}
static void e_f64(struct enc *e, double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    e_u64(e, u);
}
static void e_pad(struct enc *e, size_t align)
{
    while (e->b.len % align)
        e_u8(e, 0);
}

/* ---- round trips ------------------------------------------------------- */

/* Every GGUF value type, hand-encoded; the reader's getters return exactly
 * what was encoded, and gguf_w_copy_key reproduces it through the writer. */
static void test_all_value_types(void **state)
{
    (void)state;
    struct enc e = {0};
    e_put(&e, "GGUF", 4);
    e_u32(&e, 3);
    e_u64(&e, 1);  /* tensors */
    e_u64(&e, 17); /* keys */
    e_str(&e, "a.u8"), e_u32(&e, GGUF_TYPE_UINT8), e_u8(&e, 250);
    e_str(&e, "a.i8"), e_u32(&e, GGUF_TYPE_INT8), e_u8(&e, (uint8_t)-7);
    e_str(&e, "a.u16"), e_u32(&e, GGUF_TYPE_UINT16), e_u16(&e, 65000);
    e_str(&e, "a.i16"), e_u32(&e, GGUF_TYPE_INT16), e_u16(&e, (uint16_t)-30000);
    e_str(&e, "a.u32"), e_u32(&e, GGUF_TYPE_UINT32), e_u32(&e, 4000000000u);
    e_str(&e, "a.i32"), e_u32(&e, GGUF_TYPE_INT32), e_u32(&e, (uint32_t)-2000000000);
    e_str(&e, "a.f32"), e_u32(&e, GGUF_TYPE_FLOAT32), e_f32(&e, 1.5f);
    e_str(&e, "a.bool"), e_u32(&e, GGUF_TYPE_BOOL), e_u8(&e, 1);
    e_str(&e, "a.str"), e_u32(&e, GGUF_TYPE_STRING), e_str(&e, "h\xc3\xa9llo");
    e_str(&e, "a.u64"), e_u32(&e, GGUF_TYPE_UINT64), e_u64(&e, UINT64_MAX);
    e_str(&e, "a.i64"), e_u32(&e, GGUF_TYPE_INT64), e_u64(&e, (uint64_t)INT64_MIN);
    e_str(&e, "a.f64"), e_u32(&e, GGUF_TYPE_FLOAT64), e_f64(&e, 0.25);
    e_str(&e, "a.arr_u16"), e_u32(&e, GGUF_TYPE_ARRAY), e_u32(&e, GGUF_TYPE_UINT16), e_u64(&e, 3);
    e_u16(&e, 1), e_u16(&e, 2), e_u16(&e, 3);
    e_str(&e, "a.arr_str"), e_u32(&e, GGUF_TYPE_ARRAY), e_u32(&e, GGUF_TYPE_STRING), e_u64(&e, 3);
    e_str(&e, "x"), e_str(&e, ""), e_str(&e, "\xe2\x96\x81yz");
    e_str(&e, "a.arr_empty"), e_u32(&e, GGUF_TYPE_ARRAY), e_u32(&e, GGUF_TYPE_INT64), e_u64(&e, 0);
    e_str(&e, "a.arr_f64"), e_u32(&e, GGUF_TYPE_ARRAY), e_u32(&e, GGUF_TYPE_FLOAT64), e_u64(&e, 2);
    e_f64(&e, -1.0), e_f64(&e, 3.0);
    e_str(&e, "general.alignment"), e_u32(&e, GGUF_TYPE_UINT32), e_u32(&e, 64);
    e_str(&e, "t"), e_u32(&e, 1), e_u64(&e, 16), e_u32(&e, GGUF_TENSOR_F32), e_u64(&e, 0);
    e_pad(&e, 64);
    for (int i = 0; i < 16; i++)
        e_f32(&e, (float)i);
    char path[300], path2[300];
    tmp_path(path, sizeof(path), "types.gguf");
    tmp_path(path2, sizeof(path2), "types2.gguf");
    write_all(path, e.b.p, e.b.len);

    gguf_file_t *f;
    char err[256];
    assert_int_equal(gguf_open(path, &f, err, sizeof(err)), 0);
    assert_int_equal(gguf_version(f), 3);
    assert_int_equal(gguf_alignment(f), 64);
    assert_int_equal(gguf_n_keys(f), 17);
    uint64_t u;
    int64_t i;
    float fl;
    bool b;
    const char *s;
    size_t len;
    assert_int_equal(gguf_get_u64(f, gguf_find_key(f, "a.u8"), &u), 0);
    assert_int_equal(u, 250);
    assert_int_equal(gguf_get_i64(f, gguf_find_key(f, "a.i8"), &i), 0);
    assert_int_equal(i, -7);
    assert_int_equal(gguf_get_u64(f, gguf_find_key(f, "a.i8"), &u), -EINVAL); /* negative */
    assert_int_equal(gguf_get_u64(f, gguf_find_key(f, "a.u16"), &u), 0);
    assert_int_equal(u, 65000);
    assert_int_equal(gguf_get_i64(f, gguf_find_key(f, "a.i16"), &i), 0);
    assert_int_equal(i, -30000);
    assert_int_equal(gguf_get_u64(f, gguf_find_key(f, "a.u32"), &u), 0);
    assert_int_equal(u, 4000000000u);
    assert_int_equal(gguf_get_i64(f, gguf_find_key(f, "a.i32"), &i), 0);
    assert_int_equal(i, -2000000000);
    assert_int_equal(gguf_get_f32(f, gguf_find_key(f, "a.f32"), &fl), 0);
    assert_true(fl == 1.5f);
    assert_int_equal(gguf_get_f32(f, gguf_find_key(f, "a.u32"), &fl), -EINVAL);
    assert_int_equal(gguf_get_bool(f, gguf_find_key(f, "a.bool"), &b), 0);
    assert_true(b);
    assert_int_equal(gguf_get_bool(f, gguf_find_key(f, "a.u8"), &b), -EINVAL);
    assert_int_equal(gguf_get_str(f, gguf_find_key(f, "a.str"), &s, &len), 0);
    assert_int_equal(len, 6);
    assert_memory_equal(s, "h\xc3\xa9llo", 6);
    assert_int_equal(gguf_get_str(f, gguf_find_key(f, "a.u8"), &s, &len), -EINVAL);
    assert_int_equal(gguf_get_u64(f, gguf_find_key(f, "a.u64"), &u), 0);
    assert_true(u == UINT64_MAX);
    assert_int_equal(gguf_get_i64(f, gguf_find_key(f, "a.u64"), &i), -EINVAL); /* too big */
    assert_int_equal(gguf_get_i64(f, gguf_find_key(f, "a.i64"), &i), 0);
    assert_true(i == INT64_MIN);
    assert_int_equal(gguf_get_f32(f, gguf_find_key(f, "a.f64"), &fl), 0);
    assert_true(fl == 0.25f);
    enum gguf_type et;
    uint64_t n;
    int64_t k = gguf_find_key(f, "a.arr_u16");
    assert_int_equal(gguf_key_type(f, k), GGUF_TYPE_ARRAY);
    assert_int_equal(gguf_arr_info(f, k, &et, &n), 0);
    assert_int_equal(et, GGUF_TYPE_UINT16);
    assert_int_equal(n, 3);
    uint16_t u16[3];
    memcpy(u16, gguf_arr_data(f, k), 6);
    assert_int_equal(u16[0], 1);
    assert_int_equal(u16[2], 3);
    k = gguf_find_key(f, "a.arr_str");
    assert_int_equal(gguf_arr_info(f, k, &et, &n), 0);
    assert_int_equal(et, GGUF_TYPE_STRING);
    assert_int_equal(n, 3);
    assert_null(gguf_arr_data(f, k));
    assert_int_equal(gguf_arr_str(f, k, 0, &s, &len), 0);
    assert_int_equal(len, 1);
    assert_int_equal(s[0], 'x');
    assert_int_equal(gguf_arr_str(f, k, 1, &s, &len), 0);
    assert_int_equal(len, 0);
    assert_int_equal(gguf_arr_str(f, k, 2, &s, &len), 0);
    assert_int_equal(len, 5);
    assert_memory_equal(s, "\xe2\x96\x81yz", 5);
    assert_int_equal(gguf_arr_str(f, k, 3, &s, &len), -EINVAL);
    k = gguf_find_key(f, "a.arr_empty");
    assert_int_equal(gguf_arr_info(f, k, &et, &n), 0);
    assert_int_equal(et, GGUF_TYPE_INT64);
    assert_int_equal(n, 0);
    assert_int_equal(gguf_find_key(f, "nope"), -1);
    assert_null(gguf_key_name(f, 17));
    assert_int_equal(gguf_get_u64(f, -1, &u), -EINVAL);
    struct gguf_tensor_info ti;
    gguf_tensor_get(f, 0, &ti);
    assert_string_equal(ti.name, "t");
    assert_int_equal((uintptr_t)ti.data % 64, 0);
    float t16[16];
    assert_int_equal(gguf_tensor_to_f32(ti.type, ti.data, t16, 16), 0);
    assert_true(t16[15] == 15.0f);

    /* Copy every key through the writer: the values survive byte for byte. */
    gguf_writer_t *w;
    assert_int_equal(gguf_writer_new(&w), 0);
    for (int64_t j = 0; j < gguf_n_keys(f); j++)
        assert_int_equal(gguf_w_copy_key(w, f, j), 0);
    assert_int_equal(gguf_w_copy_key(w, f, 0), -EEXIST);
    assert_int_equal(gguf_w_tensor(w, ti.name, ti.type, ti.n_dims, ti.ne, ti.data), 0);
    assert_int_equal(gguf_writer_write(w, path2, err, sizeof(err)), 0);
    gguf_writer_free(w);
    size_t l1, l2;
    uint8_t *b1 = read_all(path, &l1), *b2 = read_all(path2, &l2);
    assert_int_equal(l1, l2);
    assert_memory_equal(b1, b2, l1); /* same encoding, alignment 64 honoured */
    free(b1);
    free(b2);
    gguf_close(f);
    folio_buf_free(&e.b);
}

static const char *const str_vals[] = {"<unk>", "", "\xe2\x96\x81the", "a b\tc", "<0x0A>"};

/* Fills a writer with one of each writer key type and tensor type. */
static void build_sample(gguf_writer_t *w, const float *f32, const uint16_t *f16,
                         const uint16_t *bf16, const uint8_t *q8)
{
    static const float fa[] = {0.5f, -2.0f, 1e-30f};
    static const int32_t ia[] = {7, -8, INT32_MAX, INT32_MIN};
    assert_int_equal(gguf_w_str(w, "general.architecture", "llama"), 0);
    assert_int_equal(gguf_w_u32(w, "k.u32", 123456789u), 0);
    assert_int_equal(gguf_w_i32(w, "k.i32", -42), 0);
    assert_int_equal(gguf_w_f32(w, "k.f32", 3.25f), 0);
    assert_int_equal(gguf_w_bool(w, "k.bool", true), 0);
    assert_int_equal(gguf_w_bool(w, "k.bool0", false), 0);
    assert_int_equal(gguf_w_str(w, "k.empty", ""), 0);
    assert_int_equal(gguf_w_arr_str(w, "k.astr", str_vals, 5), 0);
    assert_int_equal(gguf_w_arr_f32(w, "k.af32", fa, 3), 0);
    assert_int_equal(gguf_w_arr_i32(w, "k.ai32", ia, 4), 0);
    assert_int_equal(gguf_w_arr_i32(w, "k.anone", ia, 0), 0);
    const int64_t ne_a[1] = {7}, ne_b[2] = {5, 3}, ne_c[3] = {4, 2, 2}, ne_d[2] = {64, 2},
                  ne_e[4] = {2, 3, 1, 2};
    assert_int_equal(gguf_w_tensor(w, "ta.f32", GGUF_TENSOR_F32, 1, ne_a, f32), 0);
    assert_int_equal(gguf_w_tensor(w, "tb.f16", GGUF_TENSOR_F16, 2, ne_b, f16), 0);
    assert_int_equal(gguf_w_tensor(w, "tc.bf16", GGUF_TENSOR_BF16, 3, ne_c, bf16), 0);
    assert_int_equal(gguf_w_tensor(w, "td.q8_0", GGUF_TENSOR_Q8_0, 2, ne_d, q8), 0);
    assert_int_equal(gguf_w_tensor(w, "te.4d", GGUF_TENSOR_F32, 4, ne_e, f32), 0);
}

struct sample {
    float f32[16];
    uint16_t f16[15], bf16[16];
    uint8_t q8[4 * 34];
};

static void sample_fill(struct sample *s)
{
    for (int i = 0; i < 16; i++) {
        s->f32[i] = (float)i * 0.75f - 3.0f;
        s->bf16[i] = (uint16_t)(0x3f80 + i * 3); /* 1.0, 1.0234375 ... */
    }
    for (int i = 0; i < 15; i++)
        s->f16[i] = folio_f32_to_f16((float)i / 8.0f - 1.0f);
    for (int b = 0; b < 4; b++) {
        uint16_t d = folio_f32_to_f16(0.5f * (float)(b + 1));
        memcpy(s->q8 + b * 34, &d, 2);
        for (int j = 0; j < 32; j++)
            s->q8[b * 34 + 2 + j] = (uint8_t)(int8_t)(j * 8 - 128 + b);
    }
}

static void write_sample(const char *path, const struct sample *s)
{
    gguf_writer_t *w;
    char err[256];
    assert_int_equal(gguf_writer_new(&w), 0);
    build_sample(w, s->f32, s->f16, s->bf16, s->q8);
    assert_int_equal(gguf_writer_write(w, path, err, sizeof(err)), 0);
    gguf_writer_free(w);
}

/* Tensors added without data and given by fill at write time: the same
 * bytes as the sample written whole; a fill that fails fails the write
 * with its message and leaves no file; without fill such a tensor is
 * refused by name. */
struct fill_ctx {
    const struct sample *s;
    int64_t calls[8];
    int n_calls;
    bool fail;
};

static int fill_sample(void *arg, int64_t idx, const void **data, char *err, size_t errlen)
{
    struct fill_ctx *c = arg;
    if (c->n_calls < 8)
        c->calls[c->n_calls++] = idx;
    if (c->fail) {
        snprintf(err, errlen, "fill of tensor %lld failed", (long long)idx);
        return -EIO;
    }
    *data = idx == 1 ? (const void *)c->s->f16 : (const void *)c->s->q8; /* tb, td */
    return 0;
}

static void test_writer_fill(void **state)
{
    (void)state;
    struct sample s;
    sample_fill(&s);
    char whole[300], filled[300], tmp[310];
    tmp_path(whole, sizeof(whole), "whole.gguf");
    tmp_path(filled, sizeof(filled), "filled.gguf");
    write_sample(whole, &s);

    gguf_writer_t *w;
    char err[256];
    assert_int_equal(gguf_writer_new(&w), 0);
    build_sample(w, s.f32, NULL, s.bf16, NULL);
    assert_int_equal(gguf_writer_write(w, filled, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "'tb.f16' has no data"));
    struct fill_ctx c = {.s = &s};
    assert_int_equal(gguf_writer_write_fill(w, filled, fill_sample, &c, err, sizeof(err)), 0);
    assert_int_equal(c.n_calls, 2); /* tb and td, in file order */
    assert_int_equal(c.calls[0], 1);
    assert_int_equal(c.calls[1], 3);
    size_t la, lb;
    uint8_t *a = read_all(whole, &la), *b = read_all(filled, &lb);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    free(a);
    free(b);

    unlink(filled);
    c = (struct fill_ctx){.s = &s, .fail = true};
    assert_int_equal(gguf_writer_write_fill(w, filled, fill_sample, &c, err, sizeof(err)), -EIO);
    assert_string_equal(err, "fill of tensor 1 failed");
    snprintf(tmp, sizeof(tmp), "%s.tmp", filled);
    assert_int_equal(access(filled, F_OK), -1);
    assert_int_equal(access(tmp, F_OK), -1);
    gguf_writer_free(w);
    unlink(whole);
}

static void test_writer_roundtrip(void **state)
{
    (void)state;
    struct sample s;
    sample_fill(&s);
    char path[300], tmp[310];
    tmp_path(path, sizeof(path), "rt.gguf");
    write_sample(path, &s);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    assert_int_equal(access(tmp, F_OK), -1); /* renamed into place */

    gguf_file_t *f;
    char err[256];
    assert_int_equal(gguf_open(path, &f, err, sizeof(err)), 0);
    assert_int_equal(gguf_version(f), 3);
    assert_int_equal(gguf_alignment(f), 32);
    /* keys in the order added */
    static const char *const names[] = {"general.architecture",
                                        "k.u32",
                                        "k.i32",
                                        "k.f32",
                                        "k.bool",
                                        "k.bool0",
                                        "k.empty",
                                        "k.astr",
                                        "k.af32",
                                        "k.ai32",
                                        "k.anone"};
    static const enum gguf_type types[] = {GGUF_TYPE_STRING,  GGUF_TYPE_UINT32, GGUF_TYPE_INT32,
                                           GGUF_TYPE_FLOAT32, GGUF_TYPE_BOOL,   GGUF_TYPE_BOOL,
                                           GGUF_TYPE_STRING,  GGUF_TYPE_ARRAY,  GGUF_TYPE_ARRAY,
                                           GGUF_TYPE_ARRAY,   GGUF_TYPE_ARRAY};
    assert_int_equal(gguf_n_keys(f), 11);
    for (int i = 0; i < 11; i++) {
        assert_string_equal(gguf_key_name(f, i), names[i]);
        assert_int_equal(gguf_key_type(f, i), types[i]);
        assert_int_equal(gguf_find_key(f, names[i]), i);
    }
    const char *str;
    size_t len;
    uint64_t u;
    int64_t iv;
    float fv;
    bool bv;
    assert_int_equal(gguf_get_str(f, 0, &str, &len), 0);
    assert_int_equal(len, 5);
    assert_memory_equal(str, "llama", 5);
    assert_int_equal(gguf_get_u64(f, 1, &u), 0);
    assert_int_equal(u, 123456789u);
    assert_int_equal(gguf_get_i64(f, 2, &iv), 0);
    assert_int_equal(iv, -42);
    assert_int_equal(gguf_get_f32(f, 3, &fv), 0);
    assert_true(fv == 3.25f);
    assert_int_equal(gguf_get_bool(f, 4, &bv), 0);
    assert_true(bv);
    assert_int_equal(gguf_get_bool(f, 5, &bv), 0);
    assert_false(bv);
    assert_int_equal(gguf_get_str(f, 6, &str, &len), 0);
    assert_int_equal(len, 0);
    enum gguf_type et;
    uint64_t n;
    assert_int_equal(gguf_arr_info(f, 7, &et, &n), 0);
    assert_int_equal(et, GGUF_TYPE_STRING);
    assert_int_equal(n, 5);
    for (uint64_t i = 0; i < 5; i++) {
        assert_int_equal(gguf_arr_str(f, 7, i, &str, &len), 0);
        assert_int_equal(len, strlen(str_vals[i]));
        assert_memory_equal(str, str_vals[i], len);
    }
    float fa[3];
    assert_int_equal(gguf_arr_info(f, 8, &et, &n), 0);
    assert_int_equal(et, GGUF_TYPE_FLOAT32);
    assert_int_equal(n, 3);
    memcpy(fa, gguf_arr_data(f, 8), sizeof(fa));
    assert_true(fa[0] == 0.5f && fa[1] == -2.0f && fa[2] == 1e-30f);
    int32_t ia[4];
    assert_int_equal(gguf_arr_info(f, 9, &et, &n), 0);
    assert_int_equal(et, GGUF_TYPE_INT32);
    assert_int_equal(n, 4);
    memcpy(ia, gguf_arr_data(f, 9), sizeof(ia));
    assert_true(ia[0] == 7 && ia[1] == -8 && ia[2] == INT32_MAX && ia[3] == INT32_MIN);
    assert_int_equal(gguf_arr_info(f, 10, &et, &n), 0);
    assert_int_equal(n, 0);

    /* tensors, in order, with their exact bytes */
    struct {
        const char *name;
        enum gguf_tensor_type type;
        int32_t n_dims;
        int64_t ne[4];
        const void *data;
        size_t nbytes;
    } want[] = {
        {"ta.f32", GGUF_TENSOR_F32, 1, {7, 1, 1, 1}, s.f32, 28},
        {"tb.f16", GGUF_TENSOR_F16, 2, {5, 3, 1, 1}, s.f16, 30},
        {"tc.bf16", GGUF_TENSOR_BF16, 3, {4, 2, 2, 1}, s.bf16, 32},
        {"td.q8_0", GGUF_TENSOR_Q8_0, 2, {64, 2, 1, 1}, s.q8, 136},
        {"te.4d", GGUF_TENSOR_F32, 4, {2, 3, 1, 2}, s.f32, 48},
    };
    assert_int_equal(gguf_n_tensors(f), 5);
    for (int i = 0; i < 5; i++) {
        struct gguf_tensor_info ti;
        assert_int_equal(gguf_find_tensor(f, want[i].name), i);
        gguf_tensor_get(f, i, &ti);
        assert_string_equal(ti.name, want[i].name);
        assert_int_equal(ti.type, want[i].type);
        assert_int_equal(ti.n_dims, want[i].n_dims);
        for (int d = 0; d < 4; d++)
            assert_int_equal(ti.ne[d], want[i].ne[d]);
        assert_int_equal(ti.nbytes, want[i].nbytes);
        assert_memory_equal(ti.data, want[i].data, want[i].nbytes);
        assert_int_equal((uintptr_t)ti.data % 32, 0);
    }
    assert_int_equal(gguf_find_tensor(f, "missing"), -1);
    gguf_close(f);

    /* padding bytes are zero and the file ends on the alignment */
    size_t fl;
    uint8_t *bytes = read_all(path, &fl);
    assert_int_equal(fl % 32, 0);
    assert_int_equal(bytes[fl - 1], 0);
    free(bytes);
}

static void test_writer_rejects(void **state)
{
    (void)state;
    gguf_writer_t *w;
    float x[64] = {0};
    assert_int_equal(gguf_writer_new(&w), 0);
    assert_int_equal(gguf_w_u32(w, "a", 1), 0);
    assert_int_equal(gguf_w_str(w, "a", "dup"), -EEXIST);
    assert_int_equal(gguf_w_u32(w, "", 1), -EINVAL);
    assert_int_equal(gguf_w_u32(w, "general.alignment", 48), -EINVAL);
    const int64_t ne[2] = {4, 4}, ne0[2] = {0, 4}, neq[2] = {16, 2};
    assert_int_equal(gguf_w_tensor(w, "t", GGUF_TENSOR_F32, 2, ne, x), 0);
    assert_int_equal(gguf_w_tensor(w, "t", GGUF_TENSOR_F32, 2, ne, x), -EEXIST);
    assert_int_equal(gguf_w_tensor(w, "z", GGUF_TENSOR_F32, 2, ne0, x), -EINVAL);
    assert_int_equal(gguf_w_tensor(w, "q", GGUF_TENSOR_Q8_0, 2, neq, x), -EINVAL);
    assert_int_equal(gguf_w_tensor(w, "d", GGUF_TENSOR_F32, 5, ne, x), -EINVAL);
    assert_int_equal(gguf_w_tensor(w, "u", (enum gguf_tensor_type)2, 2, ne, x), -EINVAL);
    char err[256];
    int rc = gguf_writer_write(w, "/nonexistent-dir/x.gguf", err, sizeof(err));
    assert_int_equal(rc, -ENOENT);
    assert_non_null(strstr(err, "/nonexistent-dir/x.gguf"));
    gguf_writer_free(w);
}

/* Every F16/BF16 pattern and Q8_0 blocks against the plain formulas. */
static void test_conversions(void **state)
{
    (void)state;
    uint16_t *h = malloc(65536 * 2);
    float *out = malloc(65536 * 4);
    assert_non_null(h);
    assert_non_null(out);
    for (uint32_t i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    assert_int_equal(gguf_tensor_to_f32(GGUF_TENSOR_F16, h, out, 65536), 0);
    for (uint32_t i = 0; i < 65536; i++) {
        float want = folio_f16_to_f32((uint16_t)i);
        assert_true(memcmp(&want, &out[i], 4) == 0);
    }
    assert_int_equal(gguf_tensor_to_f32(GGUF_TENSOR_BF16, h, out, 65536), 0);
    for (uint32_t i = 0; i < 65536; i++) {
        uint32_t bits = i << 16, got;
        memcpy(&got, &out[i], 4);
        assert_int_equal(got, bits);
    }
    /* Q8_0: value = d * q with d an f16 */
    uint8_t q[3 * 34];
    for (int b = 0; b < 3; b++) {
        uint16_t d = folio_f32_to_f16(b == 0 ? 0.125f : (b == 1 ? -3.0f : 1e-3f));
        memcpy(q + b * 34, &d, 2);
        for (int j = 0; j < 32; j++)
            q[b * 34 + 2 + j] = (uint8_t)(int8_t)(b == 1 ? j - 16 : 127 - 8 * j);
    }
    assert_int_equal(gguf_tensor_to_f32(GGUF_TENSOR_Q8_0, q, out, 96), 0);
    for (int b = 0; b < 3; b++) {
        uint16_t dh;
        memcpy(&dh, q + b * 34, 2);
        float d = folio_f16_to_f32(dh);
        for (int j = 0; j < 32; j++)
            assert_true(out[b * 32 + j] == d * (float)(int8_t)q[b * 34 + 2 + j]);
    }
    assert_int_equal(gguf_tensor_to_f32(GGUF_TENSOR_Q8_0, q, out, 40), -EINVAL);
    assert_int_equal(gguf_tensor_nbytes(GGUF_TENSOR_Q8_0, 64), 68);
    assert_int_equal(gguf_tensor_nbytes(GGUF_TENSOR_Q8_0, 33), 0);
    assert_int_equal(gguf_tensor_nbytes(GGUF_TENSOR_F16, 3), 6);
    assert_int_equal(gguf_tensor_nbytes(GGUF_TENSOR_BF16, 3), 6);
    assert_int_equal(gguf_tensor_nbytes(GGUF_TENSOR_F32, 3), 12);
    assert_int_equal(gguf_tensor_nbytes((enum gguf_tensor_type)16, 256), 0); /* iq2_xxs */
    assert_int_equal(gguf_tensor_nbytes(GGUF_TENSOR_Q4_K, 512), 288);
    assert_string_equal(gguf_tensor_type_name(GGUF_TENSOR_Q8_0), "Q8_0");
    free(h);
    free(out);
}

/* ---- corrupt files ------------------------------------------------------ */

/* Offset just past the length-prefixed occurrence of name in the file. */
static size_t after_name(const uint8_t *b, size_t n, const char *name)
{
    size_t l = strlen(name);
    for (size_t i = 8; i + l <= n; i++) {
        uint64_t len;
        memcpy(&len, b + i - 8, 8);
        if (len == l && !memcmp(b + i, name, l))
            return i + l;
    }
    fail_msg("name %s not found", name);
    return 0;
}

struct patch_case {
    const char *what;
    const char *anchor; /* key or tensor name; NULL = absolute offset */
    long delta;         /* from after the anchor (or absolute) */
    int width;          /* 1, 4 or 8 bytes */
    uint64_t value;
    const char *needle; /* expected in the message */
};

static void apply_patch(uint8_t *b, size_t n, const struct patch_case *pc)
{
    size_t at = pc->anchor ? after_name(b, n, pc->anchor) + (size_t)pc->delta : (size_t)pc->delta;
    assert_true(at + (size_t)pc->width <= n);
    for (int i = 0; i < pc->width; i++)
        b[at + i] = (uint8_t)(pc->value >> (8 * i));
}

/* Tensor info layout after the name: n_dims u32, ne u64 × n_dims, type u32,
 * offset u64.  Key layout after the name: type u32, value. */
static void test_corrupt_matrix(void **state)
{
    (void)state;
    struct sample s;
    sample_fill(&s);
    char path[300], bad[300];
    tmp_path(path, sizeof(path), "good.gguf");
    tmp_path(bad, sizeof(bad), "bad.gguf");
    write_sample(path, &s);
    size_t n;
    uint8_t *good = read_all(path, &n);
    uint8_t *b = malloc(n);
    assert_non_null(b);

    const struct patch_case cases[] = {
        {"bad magic", NULL, 0, 4, 0x46554748, "bad magic"},
        {"version 1", NULL, 4, 4, 1, "version 1"},
        {"version 4", NULL, 4, 4, 4, "version 4"},
        {"big endian", NULL, 4, 4, 0x03000000, "big-endian"},
        {"absurd tensor count", NULL, 8, 8, 1ull << 40, "tensor count"},
        {"absurd key count", NULL, 16, 8, 1ull << 40, "key count"},
        {"more keys than present", NULL, 16, 8, 12, NULL},
        {"fewer keys than present", NULL, 16, 8, 10, NULL},
        {"key type unknown", "k.u32", 0, 4, 13, "k.u32"},
        {"key type array->u8 mismatch", "k.bool", 0, 4, GGUF_TYPE_STRING, "k.bool"},
        {"bool value 2", "k.bool", 4, 1, 2, "k.bool"},
        {"string length huge", "general.architecture", 4, 8, 1ull << 60, "general.architecture"},
        {"key name length huge", NULL, 24, 8, UINT64_MAX, "key #0"},
        {"array element type unknown", "k.af32", 4, 4, 99, "k.af32"},
        {"nested array", "k.af32", 4, 4, GGUF_TYPE_ARRAY, "arrays of arrays"},
        {"array count huge", "k.ai32", 8, 8, 1ull << 62, "k.ai32"},
        {"string array count huge", "k.astr", 8, 8, 1ull << 61, "k.astr"},
        {"string element length huge", "k.astr", 16, 8, 1ull << 50, "k.astr"},
        {"n_dims 0", "tb.f16", 0, 4, 0, "tb.f16"},
        {"n_dims 5", "tb.f16", 0, 4, 5, "tb.f16"},
        {"dim zero", "tb.f16", 4, 8, 0, "tb.f16"},
        {"element count overflow", "tb.f16", 4, 8, 1ull << 62, "tb.f16"},
        {"tensor too large for file", "tb.f16", 4, 8, 1ull << 40, "tb.f16"},
        {"unsupported type iq2_xxs", "tb.f16", 4 + 16, 4, 16, "iq2_xxs"},
        {"unknown tensor type", "tb.f16", 4 + 16, 4, 200, "tb.f16"},
        {"wrong type changes size", "ta.f32", 4 + 8, 4, GGUF_TENSOR_Q8_0, "ta.f32"},
        {"misaligned offset", "tb.f16", 4 + 16 + 4, 8, 32 + 4, "alignment"},
        {"offset out of range", "te.4d", 4 + 32 + 4, 8, 1ull << 20, "te.4d"},
        {"offset far out of range", "te.4d", 4 + 32 + 4, 8, 0xffffffffffffffe0ull, "te.4d"},
        {"overlapping tensors", "tb.f16", 4 + 16 + 4, 8, 0, "overlap"},
        {"duplicate key", "k.i32", -3, 1, 'u', "twice"},
        {"key with NUL", "k.i32", -1, 1, 0, "NUL"},
    };
    for (size_t c = 0; c < FOLIO_ARRAY_LEN(cases); c++) {
        memcpy(b, good, n);
        apply_patch(b, n, &cases[c]);
        write_all(bad, b, n);
        gguf_file_t *f = NULL;
        char err[512];
        int rc = gguf_open(bad, &f, err, sizeof(err));
        if (rc == 0) {
            gguf_close(f);
            fail_msg("case '%s' opened", cases[c].what);
        }
        if (getenv("FOLIO_TEST_VERBOSE"))
            print_message("%-28s -> %s\n", cases[c].what, err);
        if (rc != -EINVAL || !strstr(err, bad) ||
            (cases[c].needle && !strstr(err, cases[c].needle)))
            fail_msg("case '%s': rc %d err '%s'", cases[c].what, rc, err);
    }

    /* duplicate tensor name: rename tb.f16 to ta.f32 */
    memcpy(b, good, n);
    memcpy(b + after_name(b, n, "tb.f16") - 6, "ta.f32", 6);
    write_all(bad, b, n);
    expect_fail(bad, -EINVAL, "'ta.f32' appears twice");

    /* Changed shape with the same size is still a valid file: the reader
     * reports it; the loader (test_gguf_model) judges it against metadata. */
    memcpy(b, good, n);
    apply_patch(b, n, &(struct patch_case){"", "tb.f16", 4, 8, 3, NULL});
    apply_patch(b, n, &(struct patch_case){"", "tb.f16", 12, 8, 5, NULL});
    write_all(bad, b, n);
    gguf_file_t *f;
    char err[256];
    assert_int_equal(gguf_open(bad, &f, err, sizeof(err)), 0);
    struct gguf_tensor_info ti;
    gguf_tensor_get(f, gguf_find_tensor(f, "tb.f16"), &ti);
    assert_int_equal(ti.ne[0], 3);
    assert_int_equal(ti.ne[1], 5);
    gguf_close(f);

    /* general.alignment that is not a power of two */
    gguf_writer_t *w;
    assert_int_equal(gguf_writer_new(&w), 0);
    assert_int_equal(gguf_w_u32(w, "general.alignment", 64), 0);
    assert_int_equal(gguf_writer_write(w, bad, err, sizeof(err)), 0);
    gguf_writer_free(w);
    free(good);
    good = read_all(bad, &n);
    apply_patch(good, n, &(struct patch_case){"", "general.alignment", 4, 4, 48, NULL});
    write_all(bad, good, n);
    expect_fail(bad, -EINVAL, "general.alignment");
    apply_patch(good, n,
                &(struct patch_case){"", "general.alignment", 0, 4, GGUF_TYPE_FLOAT32, NULL});
    write_all(bad, good, n);
    expect_fail(bad, -EINVAL, "general.alignment");

    /* missing file, directory, empty file */
    char missing[300];
    tmp_path(missing, sizeof(missing), "missing.gguf");
    expect_fail(missing, -ENOENT, "No such file");
    expect_fail(tmpdir, -EINVAL, "regular");
    write_all(bad, "", 0);
    expect_fail(bad, -EINVAL, "too short");
    free(good);
    free(b);
}

/* Truncation at every length before the end of the last tensor's data. */
static void test_truncation_sweep(void **state)
{
    (void)state;
    struct sample s;
    sample_fill(&s);
    char path[300], bad[300];
    tmp_path(path, sizeof(path), "good.gguf");
    tmp_path(bad, sizeof(bad), "trunc.gguf");
    write_sample(path, &s);
    size_t n;
    uint8_t *good = read_all(path, &n);
    /* the last tensor (te.4d, 48 bytes) ends where its padding starts */
    size_t data_end = n - 16;
    size_t step = getenv("FOLIO_TEST_SHORT") ? 3 : 1;
    for (size_t len = 0; len < data_end; len += step) {
        write_all(bad, good, len);
        gguf_file_t *f = NULL;
        char err[512];
        int rc = gguf_open(bad, &f, err, sizeof(err));
        if (rc != -EINVAL || !strstr(err, bad)) {
            gguf_close(f);
            fail_msg("truncated at %zu of %zu: rc %d err '%s'", len, n, rc, err);
        }
    }
    /* the padding after the last tensor is not needed */
    for (size_t len = data_end; len <= n; len++) {
        write_all(bad, good, len);
        gguf_file_t *f = NULL;
        char err[512];
        assert_int_equal(gguf_open(bad, &f, err, sizeof(err)), 0);
        gguf_close(f);
    }
    free(good);
}

/* Random byte corruption: never a crash, and a failure always names the
 * file (ASan/UBSan catch any read outside the mapping). */
static void test_random_corruption(void **state)
{
    (void)state;
    struct sample s;
    sample_fill(&s);
    char path[300], bad[300];
    tmp_path(path, sizeof(path), "good.gguf");
    tmp_path(bad, sizeof(bad), "fuzz.gguf");
    write_sample(path, &s);
    size_t n;
    uint8_t *good = read_all(path, &n);
    uint8_t *b = malloc(n);
    assert_non_null(b);
    uint64_t rng = 12345;
    int iters = getenv("FOLIO_TEST_SHORT") ? 500 : 3000, n_ok = 0;
    for (int it = 0; it < iters; it++) {
        memcpy(b, good, n);
        int flips = 1 + (int)(rng % 3);
        for (int k = 0; k < flips; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(rng >> 33) % 700; /* header region */
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            if (at < n)
                b[at] = (uint8_t)(rng >> 56);
        }
        write_all(bad, b, n);
        gguf_file_t *f = NULL;
        char err[512];
        int rc = gguf_open(bad, &f, err, sizeof(err));
        if (rc == 0) {
            /* whatever opened must be fully readable */
            for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
                struct gguf_tensor_info ti;
                gguf_tensor_get(f, i, &ti);
                volatile uint8_t sink = 0;
                for (size_t j = 0; j < ti.nbytes; j++)
                    sink ^= ((const uint8_t *)ti.data)[j];
                (void)sink;
            }
            n_ok++;
            gguf_close(f);
        } else {
            assert_non_null(strstr(err, bad));
        }
    }
    assert_true(n_ok < iters);
    free(b);
    free(good);
}

/* The Nth allocation failing makes gguf_open and the writer fail cleanly
 * (ASan's leak checker sees every path). */
static void test_alloc_failures(void **state)
{
    (void)state;
    struct sample s;
    sample_fill(&s);
    char path[300], out[300];
    tmp_path(path, sizeof(path), "good.gguf");
    tmp_path(out, sizeof(out), "af.gguf");
    write_sample(path, &s);
    int done = 0;
    for (long k = 1; k < 1000 && !done; k++) {
        gguf_file_t *f = NULL;
        char err[256];
        folio_alloc_fail_at(k);
        int rc = gguf_open(path, &f, err, sizeof(err));
        folio_alloc_fail_at(0);
        if (rc == 0) {
            gguf_close(f);
            done = 1;
        } else {
            assert_int_equal(rc, -ENOMEM);
            assert_non_null(strstr(err, path));
        }
    }
    assert_true(done);
    done = 0;
    for (long k = 1; k < 1000 && !done; k++) {
        gguf_writer_t *w = NULL;
        char err[256];
        folio_alloc_fail_at(k);
        int rc = gguf_writer_new(&w);
        if (!rc) {
            /* build_sample asserts success, so exercise adds by hand */
            const int64_t ne[1] = {7};
            rc = gguf_w_str(w, "a", "b");
            rc = rc ? rc : gguf_w_arr_str(w, "b", str_vals, 5);
            rc = rc ? rc : gguf_w_arr_f32(w, "c", s.f32, 16);
            rc = rc ? rc : gguf_w_tensor(w, "t", GGUF_TENSOR_F32, 1, ne, s.f32);
            rc = rc ? rc : gguf_writer_write(w, out, err, sizeof(err));
        }
        folio_alloc_fail_at(0);
        gguf_writer_free(w);
        if (rc == 0)
            done = 1;
        else
            assert_int_equal(rc, -ENOMEM);
    }
    assert_true(done);
}

/* ---- split models --------------------------------------------------------- */

/* Part `no` of `count` of a split model as llama.cpp's gguf-split writes
 * it: split.no (u16, 0-based), split.count (u16), split.tensors.count
 * (i32); the first part has the model's keys.  Tensors first .. first+n-1
 * are "t<i>", F32 [8] holding i * 10 + j (their data outlives the write:
 * the writer references it). */
static float split_data[8][8];

static void write_part(const char *prefix, int no, int count, int total, int first, int n,
                       const char *dup, int claim_no)
{
    char path[320], err[256], names[8][16];
    snprintf(path, sizeof(path), "%s-%05d-of-%05d.gguf", prefix, no + 1, count);
    gguf_writer_t *w;
    assert_int_equal(gguf_writer_new(&w), 0);
    if (no == 0)
        assert_int_equal(gguf_w_str(w, "general.name", "split"), 0);
    assert_int_equal(gguf_w_u16(w, "split.no", (uint16_t)claim_no), 0);
    assert_int_equal(gguf_w_u16(w, "split.count", (uint16_t)count), 0);
    assert_int_equal(gguf_w_i32(w, "split.tensors.count", total), 0);
    const int64_t ne[1] = {8};
    for (int i = first; i < first + n; i++) {
        for (int j = 0; j < 8; j++)
            split_data[i][j] = (float)(i * 10 + j);
        snprintf(names[i], sizeof(names[i]), "t%d", i);
        assert_int_equal(gguf_w_tensor(w, dup && i == first ? dup : names[i], GGUF_TENSOR_F32, 1,
                                       ne, split_data[i]),
                         0);
    }
    assert_int_equal(gguf_writer_write(w, path, err, sizeof(err)), 0);
    gguf_writer_free(w);
}

/* The first part opens as the whole model: the other parts' tensors after
 * its own, each with its own file's data; a later part, a renamed first
 * part, a missing or foreign part, a name twice across parts or a wrong
 * tensor count are refused with the file named. */
static void test_split(void **state)
{
    (void)state;
    char prefix[300], first[320], second[320], third[320], renamed[320], err[512];
    tmp_path(prefix, sizeof(prefix), "m");
    snprintf(first, sizeof(first), "%s-00001-of-00003.gguf", prefix);
    snprintf(second, sizeof(second), "%s-00002-of-00003.gguf", prefix);
    snprintf(third, sizeof(third), "%s-00003-of-00003.gguf", prefix);
    tmp_path(renamed, sizeof(renamed), "m.gguf");
    write_part(prefix, 0, 3, 5, 0, 2, NULL, 0);
    write_part(prefix, 1, 3, 5, 2, 1, NULL, 1);
    write_part(prefix, 2, 3, 5, 3, 2, NULL, 2);
    gguf_file_t *f;
    if (gguf_open(first, &f, err, sizeof(err)))
        fail_msg("%s", err);
    assert_int_equal(gguf_n_tensors(f), 5);
    assert_true(gguf_find_key(f, "general.name") >= 0);
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof(name), "t%d", i);
        const int64_t idx = gguf_find_tensor(f, name);
        assert_int_equal(idx, i); /* in part order */
        struct gguf_tensor_info ti;
        gguf_tensor_get(f, idx, &ti);
        assert_string_equal(ti.name, name);
        assert_int_equal(ti.nbytes, 32);
        for (int j = 0; j < 8; j++)
            assert_true(((const float *)ti.data)[j] == (float)(i * 10 + j));
    }
    assert_int_equal(gguf_find_tensor(f, "t5"), -1);
    gguf_close(f);

    expect_fail(second, -EINVAL, "open its first part");
    assert_int_equal(rename(first, renamed), 0);
    expect_fail(renamed, -EINVAL, "not named PREFIX-00001-of-00003.gguf");
    assert_int_equal(rename(renamed, first), 0);

    unlink(third); /* the error names the missing part */
    expect_fail(first, -ENOENT, "-00003-of-00003.gguf: cannot open");
    write_part(prefix, 2, 3, 5, 3, 2, NULL, 1); /* says it is part 2 */
    expect_fail(first, -EINVAL, "not part 3 of 3");
    write_part(prefix, 2, 3, 5, 3, 2, "t1", 2); /* t1 is the first part's */
    expect_fail(first, -EINVAL, "'t1' appears twice");
    write_part(prefix, 2, 3, 5, 3, 2, NULL, 2);
    write_part(prefix, 0, 3, 6, 0, 2, NULL, 0); /* claims 6 tensors */
    expect_fail(first, -EINVAL, "split.tensors.count");
    write_part(prefix, 0, 3, 5, 0, 2, NULL, 0);
    assert_int_equal(gguf_open(first, &f, err, sizeof(err)), 0);
    gguf_close(f);
    /* every allocation of the three files' opening failing in turn: a clean
     * -ENOMEM naming the first part, nothing leaked (ASan) */
    bool done = false;
    for (long k = 1; k < 1000 && !done; k++) {
        folio_alloc_fail_at(k);
        int rc = gguf_open(first, &f, err, sizeof(err));
        folio_alloc_fail_at(0);
        if (rc == 0) {
            assert_int_equal(gguf_n_tensors(f), 5);
            gguf_close(f);
            done = true;
        } else {
            assert_int_equal(rc, -ENOMEM);
            assert_non_null(strstr(err, first));
        }
    }
    assert_true(done);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_value_types),  cmocka_unit_test(test_writer_roundtrip),
        cmocka_unit_test(test_writer_fill),      cmocka_unit_test(test_writer_rejects),
        cmocka_unit_test(test_conversions),      cmocka_unit_test(test_corrupt_matrix),
        cmocka_unit_test(test_truncation_sweep), cmocka_unit_test(test_random_corruption),
        cmocka_unit_test(test_alloc_failures),   cmocka_unit_test(test_split),
    };
    return cmocka_run_group_tests(tests, test_tmp_setup, test_tmp_teardown);
}
