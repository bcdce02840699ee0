/*
 * tests/test_gguf_hostile.c — corrupted counts in a real model file must
 * fail fast and small.
 *
 * A `tiny` model (model_gen_file, F16, the synthetic vocabulary) is written
 * once; a walker written here (independent of model/gguf.c) finds where
 * each count, size and offset lives in it.  Each variant overwrites one
 * field in place (block count, head counts, vocabulary size, key and tensor
 * counts, tensor dimensions up to 2^31 and beyond, string and array
 * lengths), then a child process loads the file the way foliod does
 * (model_load_file, then the tokenizer and chat template) under an address
 * space limit of what it had + the file's mapping + 100 MB.  The variant
 * passes when the load fails with a message that names the file and the
 * culprit, its peak resident memory grew by < 100 MB and it used < 1 s of
 * CPU (4 s under the sanitizers, whose runtime has no address-space limit,
 * so there only the resident peak is checked).  The field is restored
 * afterwards and the untouched file must still load.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define TEST_TMP_NAME "folio_test_gguf_hostile"
#include "test_tmp.h"

#include "folio/chat.h"
#include "folio/gguf.h"
#include "folio/model.h"
#include "folio/tokenizer.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define MB (1024.0 * 1024.0)

/* ---- where the fields are (an independent walk of the file) ------------ */

struct key_at {
    char name[96];
    size_t name_len_at; /* u64 length of the key name */
    uint32_t type;
    size_t value_at;   /* first byte after the type field */
    uint32_t arr_type; /* arrays */
    size_t first_elem_at;
};

struct tensor_at {
    char name[96];
    size_t name_len_at, n_dims_at, ne_at[4], type_at, offset_at;
    uint32_t n_dims;
};

static struct layout {
    char path[300];
    size_t size;
    size_t n_tensors_at, n_kv_at;
    uint64_t n_tensors, n_kv;
    struct key_at keys[64];
    struct tensor_at tensors[128];
} L;

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static size_t scalar_size(uint32_t t)
{
    static const size_t sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    assert_true(t < 13 && t != 8 && t != 9);
    return sz[t];
}

/* Skips one value of type t at p (strings and arrays included). */
static size_t skip_value(const uint8_t *b, size_t p, uint32_t t)
{
    if (t == 8)
        return p + 8 + rd64(b + p);
    if (t == 9) {
        uint32_t et = rd32(b + p);
        uint64_t n = rd64(b + p + 4);
        p += 12;
        for (uint64_t i = 0; i < n; i++)
            p = skip_value(b, p, et);
        return p;
    }
    return p + scalar_size(t);
}

static void walk(const uint8_t *b, size_t size)
{
    assert_memory_equal(b, "GGUF", 4);
    L.n_tensors_at = 8;
    L.n_kv_at = 16;
    L.n_tensors = rd64(b + 8);
    L.n_kv = rd64(b + 16);
    assert_true(L.n_kv <= FOLIO_ARRAY_LEN(L.keys));
    assert_true(L.n_tensors <= FOLIO_ARRAY_LEN(L.tensors));
    size_t p = 24;
    for (uint64_t i = 0; i < L.n_kv; i++) {
        struct key_at *k = &L.keys[i];
        uint64_t nl = rd64(b + p);
        k->name_len_at = p;
        snprintf(k->name, sizeof(k->name), "%.*s", (int)nl, (const char *)b + p + 8);
        p += 8 + nl;
        k->type = rd32(b + p);
        p += 4;
        k->value_at = p;
        if (k->type == 9) {
            k->arr_type = rd32(b + p);
            k->first_elem_at = p + 12;
        }
        p = skip_value(b, p, k->type);
        assert_true(p <= size);
    }
    for (uint64_t i = 0; i < L.n_tensors; i++) {
        struct tensor_at *t = &L.tensors[i];
        uint64_t nl = rd64(b + p);
        t->name_len_at = p;
        snprintf(t->name, sizeof(t->name), "%.*s", (int)nl, (const char *)b + p + 8);
        p += 8 + nl;
        t->n_dims_at = p;
        t->n_dims = rd32(b + p);
        p += 4;
        for (uint32_t d = 0; d < t->n_dims; d++, p += 8)
            t->ne_at[d] = p;
        t->type_at = p;
        t->offset_at = p + 4;
        p += 12;
    }
}

static const struct key_at *key(const char *name)
{
    for (uint64_t i = 0; i < L.n_kv; i++)
        if (!strcmp(L.keys[i].name, name))
            return &L.keys[i];
    fail_msg("key %s not in the generated file", name);
    return NULL;
}

static const struct tensor_at *tensor(const char *name)
{
    for (uint64_t i = 0; i < L.n_tensors; i++)
        if (!strcmp(L.tensors[i].name, name))
            return &L.tensors[i];
    fail_msg("tensor %s not in the generated file", name);
    return NULL;
}

/* ---- one load in a child process ---------------------------------------- */

static long proc_status_kb(const char *field)
{
    FILE *fp = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t fl = strlen(field);
    while (fp && fgets(line, sizeof(line), fp))
        if (!strncmp(line, field, fl) && line[fl] == ':')
            v = strtol(line + fl + 1, NULL, 10);
    if (fp)
        fclose(fp);
    return v;
}

struct outcome {
    int rc;
    double rss_growth_mb; /* peak resident memory minus resident at start */
    double cpu_s, wall_s;
    char err[600];
};

/* The child: loads path as foliod does and reports rc, message and peak. */
static void child_load(const char *path, bool limit, int wfd)
{
    struct outcome o = {0};
    if (limit && !UNDER_ASAN) {
        long vm_kb = proc_status_kb("VmSize");
        struct rlimit rl;
        rlim_t lim = (rlim_t)vm_kb * 1024 + (rlim_t)L.size + (rlim_t)(100 * MB);
        rl.rlim_cur = rl.rlim_max = lim;
        if (vm_kb > 0)
            setrlimit(RLIMIT_AS, &rl);
    }
    /* reset the peak so VmHWM measures this load only */
    int cfd = open("/proc/self/clear_refs", O_WRONLY);
    if (cfd >= 0) {
        (void)!write(cfd, "5", 1);
        close(cfd);
    }
    long rss0 = proc_status_kb("VmRSS");
    model_t *m = NULL;
    o.rc = model_load_file(path, &m, o.err, sizeof(o.err));
    if (o.rc == 0) {
        gguf_file_t *f = NULL;
        char terr[400] = "";
        o.rc = gguf_open(path, &f, terr, sizeof(terr));
        if (o.rc == 0) {
            tok_t *t = NULL;
            o.rc = tok_load(f, &t, terr, sizeof(terr));
            enum chat_template ct;
            if (o.rc == 0) {
                int crc = chat_template_from_gguf(f, &ct, terr, sizeof(terr));
                if (crc && crc != -ENOENT)
                    o.rc = crc;
            }
            tok_free(t);
            gguf_close(f);
        }
        if (o.rc)
            snprintf(o.err, sizeof(o.err), "(tokenizer) %s", terr);
        model_free(m);
    }
    o.rss_growth_mb = (double)(proc_status_kb("VmHWM") - rss0) / 1024.0;
    (void)!write(wfd, &o, sizeof(o));
    close(wfd);
    _exit(0);
}

/* limit: under the address-space limit (a whole load of the untouched
 * file needs its f32 weights, ~4x the F16 file). */
static struct outcome load_in_child(const char *path, bool limit)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        child_load(path, limit, fds[1]);
    }
    close(fds[1]);
    struct outcome o;
    memset(&o, 0, sizeof(o));
    ssize_t got = 0;
    while (got < (ssize_t)sizeof(o)) {
        ssize_t r = read(fds[0], (char *)&o + got, sizeof(o) - (size_t)got);
        if (r <= 0)
            break;
        got += r;
    }
    close(fds[0]);
    int status;
    struct rusage ru;
    assert_int_equal(wait4(pid, &status, 0, &ru), pid);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!WIFEXITED(status) || got != (ssize_t)sizeof(o))
        fail_msg("%s: the loading child died (status %#x)", path, status);
    o.cpu_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
              ru.ru_stime.tv_usec * 1e-6;
    o.wall_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    o.err[sizeof(o.err) - 1] = 0;
    return o;
}

/* ---- the variants ------------------------------------------------------- */

struct variant {
    char what[96];
    size_t at;
    int width; /* 4 or 8 bytes */
    uint64_t value;
    char expect[96]; /* in the message: one of these '|'-separated words */
};

static int add(struct variant *v, int n, size_t at, int width, uint64_t value, const char *expect,
               const char *fmt, ...) __attribute__((format(printf, 7, 8)));

static int add(struct variant *v, int n, size_t at, int width, uint64_t value, const char *expect,
               const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v[n].what, sizeof(v[n].what), fmt, ap);
    va_end(ap);
    v[n].at = at;
    v[n].width = width;
    v[n].value = value;
    snprintf(v[n].expect, sizeof(v[n].expect), "%s", expect);
    return n + 1;
}

static int build_variants(struct variant *v)
{
    int n = 0;
    const uint64_t big[] = {1000, 1u << 20, 1u << 31, UINT32_MAX};
    /* hyperparameters (u32 in the file); each must fail naming its key or
     * the tensor its value contradicts */
    static const struct {
        const char *key, *expect;
    } hp[] = {
        {"llama.block_count", "llama.block_count"},
        {"llama.attention.head_count", "llama.attention.head_count"},
        {"llama.attention.head_count_kv", "llama.attention.head_count_kv"},
        /* the head dimension (embedding_length / head_count) fails first */
        {"llama.embedding_length", "llama.embedding_length|head dimension"},
        {"llama.feed_forward_length", "llama.feed_forward_length|'blk.0.ffn_gate.weight'"},
        {"llama.vocab_size", "llama.vocab_size"},
        {"llama.rope.dimension_count", "llama.rope.dimension_count"},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(hp); i++) {
        const struct key_at *k = key(hp[i].key);
        assert_int_equal(k->type, GGUF_TYPE_UINT32);
        for (size_t j = 0; j < FOLIO_ARRAY_LEN(big); j++) {
            const char *e = hp[i].expect;
            n = add(v, n, k->value_at, 4, big[j], e, "%s = %" PRIu64, hp[i].key, big[j]);
        }
    }
    n = add(v, n, key("llama.attention.head_count_kv")->value_at, 4, 3,
            "llama.attention.head_count", "head_count_kv = 3 (no divisor)");
    n = add(v, n, key("llama.context_length")->value_at, 4, 1u << 31, "llama.context_length",
            "context_length = 2^31");
    n = add(v, n, key("llama.block_count")->value_at, 4, 0, "llama.block_count", "block_count = 0");

    /* header counts */
    const uint64_t counts[] = {1u << 31, UINT64_MAX / 2, UINT64_MAX};
    for (size_t j = 0; j < FOLIO_ARRAY_LEN(counts); j++) {
        n = add(v, n, L.n_kv_at, 8, counts[j], "metadata key", "n_kv = %" PRIu64, counts[j]);
        n = add(v, n, L.n_tensors_at, 8, counts[j], "tensor", "n_tensors = %" PRIu64, counts[j]);
    }
    n = add(v, n, L.n_kv_at, 8, L.n_kv + 1, "tensor", "n_kv + 1");
    n = add(v, n, L.n_kv_at, 8, L.n_kv - 1, "tensor", "n_kv - 1");
    n = add(v, n, L.n_tensors_at, 8, L.n_tensors + 1, "tensor", "n_tensors + 1");
    n = add(v, n, L.n_tensors_at, 8, 1, "llama.block_count", "n_tensors = 1");
    n = add(v, n, L.n_tensors_at, 8, 0, "llama.block_count", "n_tensors = 0");
    n = add(v, n, L.n_kv_at, 8, 0, "tensor", "n_kv = 0");
    /* the largest counts the file's size admits: nothing may be sized by
     * them before the entries are really there */
    n = add(v, n, L.n_tensors_at, 8, (L.size - 24 - 14 * L.n_kv) / 33, "tensor",
            "n_tensors = as many as the size admits");
    n = add(v, n, L.n_kv_at, 8, (L.size - 24 - 33 * L.n_tensors) / 14, "metadata key|tensor",
            "n_kv = as many as the size admits");

    /* tensor dimensions up to 2^31 and beyond */
    const uint64_t dims[] = {1u << 31, (uint64_t)1 << 40, (uint64_t)INT64_MAX};
    const char *tn[] = {"token_embd.weight", "blk.0.attn_q.weight", "blk.7.ffn_down.weight",
                        "output_norm.weight"};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(tn); i++) {
        const struct tensor_at *t = tensor(tn[i]);
        for (uint32_t d = 0; d < t->n_dims; d++)
            for (size_t j = 0; j < FOLIO_ARRAY_LEN(dims); j++)
                n = add(v, n, t->ne_at[d], 8, dims[j], tn[i], "%s ne[%u] = %" PRIu64, tn[i], d,
                        dims[j]);
        n = add(v, n, t->n_dims_at, 4, 1u << 31, tn[i], "%s n_dims = 2^31", tn[i]);
        n = add(v, n, t->offset_at, 8, (uint64_t)1 << 40, tn[i], "%s offset = 2^40", tn[i]);
        n = add(v, n, t->name_len_at, 8, 1u << 31, "tensor", "%s name length = 2^31", tn[i]);
    }

    /* string lengths: a key name, a string value, a token */
    const struct key_at *arch = key("general.architecture");
    const struct key_at *tokens = key("tokenizer.ggml.tokens");
    const uint64_t lens[] = {1u << 31, (uint64_t)1 << 40, UINT64_MAX};
    for (size_t j = 0; j < FOLIO_ARRAY_LEN(lens); j++) {
        n = add(v, n, arch->name_len_at, 8, lens[j], "metadata key", "key name length %" PRIu64,
                lens[j]);
        n = add(v, n, arch->value_at, 8, lens[j], "general.architecture",
                "architecture string length %" PRIu64, lens[j]);
        n = add(v, n, tokens->first_elem_at, 8, lens[j], "tokenizer.ggml.tokens",
                "first token length %" PRIu64, lens[j]);
    }
    /* a length that stays inside the file shifts everything after it:
     * the next key or tensor no longer parses */
    n = add(v, n, arch->value_at, 8, L.size / 2, "metadata key",
            "architecture string length = half the file");

    /* array lengths */
    const char *arrays[] = {"tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                            "tokenizer.ggml.token_type"};
    const uint64_t alens[] = {32001, 1u << 31, (uint64_t)1 << 40, UINT64_MAX};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(arrays); i++) {
        const struct key_at *k = key(arrays[i]);
        assert_int_equal(k->type, GGUF_TYPE_ARRAY);
        for (size_t j = 0; j < FOLIO_ARRAY_LEN(alens); j++)
            n = add(v, n, k->value_at + 4, 8, alens[j],
                    alens[j] > 32001 ? arrays[i] : "metadata key", "%s length %" PRIu64, arrays[i],
                    alens[j]);
        n = add(v, n, k->value_at + 4, 8, 1000, "metadata key", "%s length 1000", arrays[i]);
    }
    return n;
}

/* ---- the test ----------------------------------------------------------- */

static bool mentions(const char *msg, const char *alternatives)
{
    char buf[96];
    snprintf(buf, sizeof(buf), "%s", alternatives);
    for (char *sv = NULL, *w = strtok_r(buf, "|", &sv); w; w = strtok_r(NULL, "|", &sv))
        if (strstr(msg, w))
            return true;
    return false;
}

static void patch(int fd, size_t at, const void *bytes, int width)
{
    assert_int_equal(pwrite(fd, bytes, (size_t)width, (off_t)at), width);
}

static void test_corrupted_counts(void **state)
{
    (void)state;
    tmp_path(L.path, sizeof(L.path), "tiny.gguf");
    /* generate in a child so this process stays small */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char err[512];
        struct model_gen_opts o = {.preset = "tiny", .seed = 5, .f16 = true};
        _exit(model_gen_file(&o, L.path, err, sizeof(err)) == 0 ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    size_t size;
    uint8_t *b = read_all(L.path, &size);
    L.size = size;
    walk(b, size);
    free(b);

    struct outcome ok = load_in_child(L.path, false);
    if (ok.rc)
        fail_msg("the untouched file does not load: %s", ok.err);

    static struct variant v[256];
    int n = build_variants(v);
    int fd = open(L.path, O_RDWR);
    assert_true(fd >= 0);
    const double cpu_limit = UNDER_ASAN ? 4.0 : 1.0;
    double worst_mb = 0, worst_cpu = 0, worst_wall = 0;
    int bad = 0;
    for (int i = 0; i < n; i++) {
        uint8_t old[8], val[8];
        assert_int_equal(pread(fd, old, (size_t)v[i].width, (off_t)v[i].at), v[i].width);
        if (v[i].width == 4) {
            uint32_t x = (uint32_t)v[i].value;
            memcpy(val, &x, 4);
        } else {
            memcpy(val, &v[i].value, 8);
        }
        patch(fd, v[i].at, val, v[i].width);
        struct outcome o = load_in_child(L.path, true);
        patch(fd, v[i].at, old, v[i].width);
        bool named = strstr(o.err, L.path) == o.err && mentions(o.err, v[i].expect);
        bool pass = o.rc != 0 && named && o.rss_growth_mb < 100 && o.cpu_s < cpu_limit;
        print_message("%-4s %-52s %6.1f MB %5.3f s cpu  %s\n", pass ? "ok" : "FAIL", v[i].what,
                      o.rss_growth_mb, o.cpu_s, o.rc ? o.err + strlen(L.path) : "(loaded)");
        if (!pass)
            bad++;
        worst_mb = FOLIO_MAX(worst_mb, o.rss_growth_mb);
        worst_cpu = FOLIO_MAX(worst_cpu, o.cpu_s);
        worst_wall = FOLIO_MAX(worst_wall, o.wall_s);
    }
    close(fd);
    print_message("%d variants of a %.0f MB file: %d failed as they should; worst peak growth "
                  "%.1f MB, worst %.3f s cpu (%.3f s wall)%s\n",
                  n, (double)L.size / MB, n - bad, worst_mb, worst_cpu, worst_wall,
                  UNDER_ASAN ? " (sanitizer build: no address-space limit)" : "");
    assert_int_equal(bad, 0);
    assert_true(n >= 100);

    /* restored: loads again */
    ok = load_in_child(L.path, false);
    if (ok.rc)
        fail_msg("the restored file does not load: %s", ok.err);
    unlink(L.path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corrupted_counts),
    };
    return cmocka_run_group_tests(tests, test_tmp_setup, test_tmp_teardown);
}
