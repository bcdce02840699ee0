/*
 * tests/test_plan.c — `folio plan` (tools/cmd_plan.c): the KV budget
 * figures against the formula, written out here independently, for every
 * preset, both dtypes and several block sizes; the figures the command
 * prints (--json, parsed back); GGUF metadata (head_count_kv defaulting,
 * key/value lengths, missing keys); size parsing; usage errors; overflow.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "../tools/cmd_plan.h"
#include "../tools/folio_cmds.h"
#include "folio/common.h"
#include "folio/gguf.h"
#include "folio/model.h"

/* Runs cmd_plan(argv) with stdout captured; returns its exit status and
 * the output in out (cap bytes). */
static int run_plan(char *out, size_t cap, int argc, const char **argv)
{
    fflush(stdout);
    char path[] = "/tmp/test_plan_out.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    int saved = dup(STDOUT_FILENO);
    dup2(fd, STDOUT_FILENO);
    int rc = cmd_plan(argc, (char **)argv);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, out, cap - 1);
    out[n > 0 ? n : 0] = 0;
    close(fd);
    unlink(path);
    return rc;
}

static int64_t jget(cJSON *j, const char *k)
{
    cJSON *v = cJSON_GetObjectItem(j, k);
    assert_non_null(v);
    return (int64_t)v->valuedouble;
}

/* Known figures, by hand: 2 x layers x KV heads x head dim x 4 bytes. */
static void test_known_bytes_per_token(void **state)
{
    (void)state;
    static const struct {
        const char *preset;
        int64_t bpt_f32;
    } known[] = {
        {"tiny", 2 * 8 * 2 * 64 * 4},    /* 8 KiB */
        {"small", 2 * 12 * 4 * 64 * 4},  /* 24 KiB */
        {"medium", 2 * 24 * 4 * 64 * 4}, /* 48 KiB */
        {"default", 2 * 8 * 2 * 64 * 4},
    };
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        struct plan_in in = {.kv_mem = 256LL << 20, .block_size = 16, .dtype_bytes = 4};
        assert_int_equal(plan_model_preset(known[i].preset, &in.m), 0);
        in.seq_len = 512;
        struct plan_out o;
        assert_int_equal(plan_compute(&in, &o, NULL, 0), 0);
        assert_int_equal(o.bytes_per_token, known[i].bpt_f32);
        in.dtype_bytes = 2;
        assert_int_equal(plan_compute(&in, &o, NULL, 0), 0);
        assert_int_equal(o.bytes_per_token, known[i].bpt_f32 / 2);
    }
    struct plan_model m;
    assert_int_equal(plan_model_preset("huge", &m), -EINVAL);
    /* tiny, f32, 256 MiB, blocks of 16: 128 KiB blocks, 2048 of them */
    struct plan_in in = {.kv_mem = 256LL << 20, .block_size = 16, .dtype_bytes = 4, .seq_len = 512};
    assert_int_equal(plan_model_preset("tiny", &in.m), 0);
    struct plan_out o;
    assert_int_equal(plan_compute(&in, &o, NULL, 0), 0);
    assert_int_equal(o.bytes_per_block, 131072);
    assert_int_equal(o.blocks, 2048);
    assert_int_equal(o.tokens, 32768);
    assert_int_equal(o.seqs_paged, 64);    /* 2048 / 32 blocks */
    assert_int_equal(o.seqs_prealloc, 16); /* 32768 tokens / 2048 */
}

/* Every preset x dtype x block size x pool: plan_compute and the printed
 * --json figures against the formula computed here. */
static void test_presets_against_formula(void **state)
{
    (void)state;
    const char *presets[] = {"tiny", "small", "medium"};
    const char *dtypes[] = {"f32", "f16", "bf16", "q8"};
    const int bsz[] = {1, 16, 32, 256};
    const char *mems[] = {"256M", "1G", "3000000"};
    const int64_t mem_bytes[] = {256LL << 20, 1LL << 30, 3000000};
    const int seqs[] = {1, 100, 700, 2048};
    int checked = 0;
    for (int p = 0; p < 3; p++) {
        struct model_hparams hp;
        assert_int_equal(model_preset(presets[p], &hp), 0);
        for (int d = 0; d < 4; d++)
            for (int b = 0; b < 4; b++)
                for (int mm = 0; mm < 3; mm++)
                    for (int s = 0; s < 4; s++) {
                        int64_t bytes = d == 0 ? 4 : d == 3 ? 1 : 2, extra = d == 3 ? 4 : 0;
                        int64_t bpt =
                            2LL * hp.n_layers * hp.n_kv_heads * (hp.head_dim * bytes + extra);
                        int64_t bpb = bpt * bsz[b];
                        int64_t blocks = mem_bytes[mm] / bpb;
                        int64_t per_seq = (seqs[s] + bsz[b] - 1) / bsz[b];
                        int64_t paged = blocks / per_seq;
                        int64_t prealloc = blocks * bpb / (bpt * hp.ctx_len);

                        char bs[16], sl[16], out[4096];
                        snprintf(bs, sizeof(bs), "%d", bsz[b]);
                        snprintf(sl, sizeof(sl), "%d", seqs[s]);
                        const char *argv[] = {"plan",    "--preset",  presets[p], "--kv-dtype",
                                              dtypes[d], "--kv-mem",  mems[mm],   "--block-size",
                                              bs,        "--seq-len", sl,         "--json"};
                        assert_int_equal(run_plan(out, sizeof(out), 12, argv), 0);
                        cJSON *j = cJSON_Parse(out);
                        assert_non_null(j);
                        assert_int_equal(jget(j, "bytes_per_token"), bpt);
                        assert_int_equal(jget(j, "bytes_per_block"), bpb);
                        assert_int_equal(jget(j, "blocks"), blocks);
                        assert_int_equal(jget(j, "tokens"), blocks * bsz[b]);
                        assert_int_equal(jget(j, "kv_bytes"), blocks * bpb);
                        assert_int_equal(jget(j, "blocks_per_seq"), per_seq);
                        assert_int_equal(jget(j, "seqs_paged"), paged);
                        assert_int_equal(jget(j, "seqs_prealloc"), prealloc);
                        assert_int_equal(jget(j, "ctx_len"), hp.ctx_len);
                        cJSON_Delete(j);
                        checked++;
                    }
    }
    assert_int_equal(checked, 3 * 4 * 4 * 3 * 4);
}

/* The table output carries the same numbers. */
static void test_table_output(void **state)
{
    (void)state;
    char out[4096];
    const char *argv[] = {"plan", "--model", "default", "--kv-blocks", "100", "--seq-len", "40"};
    assert_int_equal(run_plan(out, sizeof(out), 7, argv), 0);
    assert_non_null(strstr(out, "bytes per token     8192 (8.0 KiB) = 2 x 8 layers x 2 KV heads"));
    assert_non_null(strstr(out, "bytes per block     131072 (128 KiB)"));
    assert_non_null(strstr(out, "blocks              100\n"));
    assert_non_null(strstr(out, "tokens              1600\n"));
    /* 40 tokens: 3 blocks each -> 33 sequences; prealloc: 1600 / 2048 -> 0 */
    assert_non_null(strstr(out, "sequences, paged    33 (3 blocks each"));
    assert_non_null(strstr(out, "sequences, prealloc 0 (2048 tokens each"));
}

/* q_type: the type of a blk.0.attn_q.weight tensor to write (-1: none). */
static void write_gguf_q(const char *path, int kv_heads, int key_len, int val_len, bool with_blocks,
                         int q_type);

static void write_gguf(const char *path, int kv_heads, int key_len, int val_len, bool with_blocks)
{
    write_gguf_q(path, kv_heads, key_len, val_len, with_blocks, -1);
}

static void write_gguf_q(const char *path, int kv_heads, int key_len, int val_len, bool with_blocks,
                         int q_type)
{
    gguf_writer_t *w;
    assert_int_equal(gguf_writer_new(&w), 0);
    assert_int_equal(gguf_w_str(w, "general.architecture", "llama"), 0);
    assert_int_equal(gguf_w_str(w, "general.name", "plan-test"), 0);
    if (with_blocks)
        assert_int_equal(gguf_w_u32(w, "llama.block_count", 3), 0);
    assert_int_equal(gguf_w_u32(w, "llama.attention.head_count", 6), 0);
    if (kv_heads)
        assert_int_equal(gguf_w_u32(w, "llama.attention.head_count_kv", (uint32_t)kv_heads), 0);
    assert_int_equal(gguf_w_u32(w, "llama.embedding_length", 384), 0);
    assert_int_equal(gguf_w_u32(w, "llama.context_length", 1024), 0);
    if (key_len)
        assert_int_equal(gguf_w_u32(w, "llama.attention.key_length", (uint32_t)key_len), 0);
    if (val_len)
        assert_int_equal(gguf_w_u32(w, "llama.attention.value_length", (uint32_t)val_len), 0);
    static uint8_t q[384 * 384 * 4]; /* zeros: a Q matrix of any type fits */
    const int64_t ne[2] = {384, 384};
    if (q_type >= 0)
        assert_int_equal(
            gguf_w_tensor(w, "blk.0.attn_q.weight", (enum gguf_tensor_type)q_type, 2, ne, q), 0);
    char err[256];
    assert_int_equal(gguf_writer_write(w, path, err, sizeof(err)), 0);
    gguf_writer_free(w);
}

static void test_gguf_metadata(void **state)
{
    (void)state;
    char path[] = "/tmp/test_plan_XXXXXX.gguf";
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    close(fd);
    struct plan_model m;
    char err[256];

    /* head_count_kv given; head dim = 384 / 6 = 64 */
    write_gguf(path, 2, 0, 0, true);
    assert_int_equal(plan_model_gguf(path, &m, err, sizeof(err)), 0);
    assert_int_equal(m.n_layers, 3);
    assert_int_equal(m.n_kv_heads, 2);
    assert_int_equal(m.head_dim_k, 64);
    assert_int_equal(m.head_dim_v, 64);
    assert_int_equal(m.ctx_len, 1024);
    assert_string_equal(m.name, "plan-test");
    char out[4096];
    const char *argv[] = {"plan", "--model", path, "--kv-mem", "1M", "--json"};
    assert_int_equal(run_plan(out, sizeof(out), 6, argv), 0);
    cJSON *j = cJSON_Parse(out);
    assert_non_null(j);
    assert_int_equal(jget(j, "bytes_per_token"), 2 * 3 * 2 * 64 * 4);
    assert_int_equal(jget(j, "blocks"), (1 << 20) / (2 * 3 * 2 * 64 * 4 * 16));
    assert_int_equal(jget(j, "seq_len"), 256); /* a quarter of the context */
    cJSON_Delete(j);

    /* --kv-dtype auto (the default) follows layer 0's Q matrix: F32, F16
     * and BF16 their own type, a quantized one f16 */
    const struct {
        enum gguf_tensor_type q;
        const char *kv;
        int bytes;
    } autos[] = {{GGUF_TENSOR_F32, "f32", 4},
                 {GGUF_TENSOR_F16, "f16", 2},
                 {GGUF_TENSOR_BF16, "bf16", 2},
                 {GGUF_TENSOR_Q8_0, "f16", 2}};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(autos); i++) {
        write_gguf_q(path, 2, 0, 0, true, (int)autos[i].q);
        assert_int_equal(run_plan(out, sizeof(out), 6, argv), 0);
        j = cJSON_Parse(out);
        assert_non_null(j);
        const cJSON *kd = cJSON_GetObjectItemCaseSensitive(j, "kv_dtype");
        assert_true(cJSON_IsString(kd));
        assert_string_equal(kd->valuestring, autos[i].kv);
        assert_int_equal(jget(j, "bytes_per_token"), 2 * 3 * 2 * 64 * autos[i].bytes);
        cJSON_Delete(j);
    }

    /* no head_count_kv: multi-head attention (KV heads = heads) */
    write_gguf(path, 0, 0, 0, true);
    assert_int_equal(plan_model_gguf(path, &m, err, sizeof(err)), 0);
    assert_int_equal(m.n_kv_heads, 6);

    /* key and value lengths of their own */
    write_gguf(path, 3, 32, 48, true);
    assert_int_equal(plan_model_gguf(path, &m, err, sizeof(err)), 0);
    struct plan_in in = {.m = m, .kv_blocks = 10, .block_size = 8, .dtype_bytes = 2, .seq_len = 9};
    struct plan_out o;
    assert_int_equal(plan_compute(&in, &o, NULL, 0), 0);
    assert_int_equal(o.bytes_per_token, 3 * 3 * (32 + 48) * 2);
    assert_int_equal(o.blocks, 10);
    assert_int_equal(o.blocks_per_seq, 2);
    assert_int_equal(o.seqs_paged, 5);

    /* a required key missing: named in the message */
    write_gguf(path, 2, 0, 0, false);
    assert_int_equal(plan_model_gguf(path, &m, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "llama.block_count"));
    const char *argv2[] = {"plan", "--model", path};
    assert_int_equal(run_plan(out, sizeof(out), 3, argv2), 1);

    unlink(path);
    assert_true(plan_model_gguf(path, &m, err, sizeof(err)) < 0);
}

static void test_sizes_and_usage(void **state)
{
    (void)state;
    int64_t v;
    assert_int_equal(folio_parse_size("123", &v), 0);
    assert_int_equal(v, 123);
    assert_int_equal(folio_parse_size("64k", &v), 0);
    assert_int_equal(v, 65536);
    assert_int_equal(folio_parse_size("256M", &v), 0);
    assert_int_equal(v, 256LL << 20);
    assert_int_equal(folio_parse_size("2GiB", &v), 0);
    assert_int_equal(v, 2LL << 30);
    assert_int_equal(folio_parse_size("1T", &v), 0);
    assert_int_equal(v, 1LL << 40);
    assert_int_equal(folio_parse_size("", &v), -EINVAL);
    assert_int_equal(folio_parse_size("-1", &v), -EINVAL);
    assert_int_equal(folio_parse_size("12Q", &v), -EINVAL);
    assert_int_equal(folio_parse_size("M", &v), -EINVAL);
    assert_int_equal(folio_parse_size("99999999999T", &v), -ERANGE);

    char out[4096];
    const char *both[] = {"plan", "--preset", "tiny", "--kv-mem", "1G", "--kv-blocks", "4"};
    assert_int_equal(run_plan(out, sizeof(out), 7, both), 2);
    const char *none[] = {"plan", "--kv-mem", "1G"};
    assert_int_equal(run_plan(out, sizeof(out), 3, none), 2);
    const char *unk[] = {"plan", "--preset", "enormous"};
    assert_int_equal(run_plan(out, sizeof(out), 3, unk), 2);
    const char *dt[] = {"plan", "--preset", "tiny", "--kv-dtype", "q4"};
    assert_int_equal(run_plan(out, sizeof(out), 5, dt), 2);
    const char *sl[] = {"plan", "--preset", "tiny", "--seq-len", "4096"};
    assert_int_equal(run_plan(out, sizeof(out), 5, sl), 2);
    const char *bs[] = {"plan", "--preset", "tiny", "--block-size", "0"};
    assert_int_equal(run_plan(out, sizeof(out), 5, bs), 2);
    const char *help[] = {"plan", "--help"};
    assert_int_equal(run_plan(out, sizeof(out), 2, help), 0);
    assert_non_null(strstr(out, "usage: folio plan"));

    /* overflow is an error, not a wrapped number */
    struct plan_in in = {
        .kv_blocks = INT64_MAX / 2, .block_size = 1024, .dtype_bytes = 4, .seq_len = 1};
    assert_int_equal(plan_model_preset("medium", &in.m), 0);
    struct plan_out o;
    assert_int_equal(plan_compute(&in, &o, NULL, 0), -ERANGE);
    in.kv_blocks = 0;
    in.kv_mem = 0;
    assert_int_equal(plan_compute(&in, &o, NULL, 0), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_bytes_per_token),
        cmocka_unit_test(test_presets_against_formula),
        cmocka_unit_test(test_table_output),
        cmocka_unit_test(test_gguf_metadata),
        cmocka_unit_test(test_sizes_and_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
