/*
 * tests/fuzz/fuzz_gguf.c — libFuzzer harness: arbitrary bytes as a model
 * file, through everything that reads one.
 *
 * The input becomes a file (a memfd, opened by path as foliod opens a
 * model) and goes through gguf_open; when that accepts it, every key is
 * read with every getter, every string array element, every tensor's
 * first and last byte and (for small tensors) its conversion to f32; then
 * tok_load, chat_template_from_gguf and model_load_file run on it as the
 * daemon does.  Checked, aborting (a libFuzzer finding) when false:
 *   - every failure writes a message that starts with the file's path;
 *   - what the reader hands out lies inside the file: string and array
 *     extents, tensor data;
 *   - a model that loads has hyperparameters consistent with its tensors.
 * Memory: run with -malloc_limit_mb (tests/fuzz/run.sh) so any allocation
 * out of proportion with these small inputs is a finding too.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "folio/chat.h"
#include "folio/gguf.h"
#include "folio/model.h"
#include "folio/tokenizer.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int memfd = -1;
static char path[64];

static volatile uint8_t sink;

/* Reads everything the reader hands out; ASan and the mapping's bounds
 * catch a pointer outside the file, the CHECKs a size larger than it. */
static void walk(const gguf_file_t *f, size_t size)
{
    int64_t nk = gguf_n_keys(f);
    CHECK(nk >= 0 && (uint64_t)nk <= size);
    for (int64_t i = 0; i < nk; i++) {
        const char *name = gguf_key_name(f, i);
        CHECK(name && name[0]);
        CHECK(gguf_find_key(f, name) == i);
        uint64_t u;
        int64_t s64;
        float fl;
        bool b;
        const char *str;
        size_t len;
        (void)gguf_get_u64(f, i, &u);
        (void)gguf_get_i64(f, i, &s64);
        (void)gguf_get_f32(f, i, &fl);
        (void)gguf_get_bool(f, i, &b);
        if (gguf_get_str(f, i, &str, &len) == 0) {
            CHECK(len <= size);
            if (len)
                sink ^= (uint8_t)(str[0] ^ str[len - 1]);
        }
        enum gguf_type et;
        uint64_t n;
        if (gguf_arr_info(f, i, &et, &n) == 0) {
            CHECK(n <= size);
            if (et == GGUF_TYPE_STRING) {
                size_t total = 0;
                for (uint64_t j = 0; j < n; j++) {
                    CHECK(gguf_arr_str(f, i, j, &str, &len) == 0);
                    total += 8 + len;
                    CHECK(total <= size);
                    if (len)
                        sink ^= (uint8_t)(str[0] ^ str[len - 1]);
                }
                CHECK(gguf_arr_str(f, i, n, &str, &len) == -EINVAL);
            } else {
                const uint8_t *d = gguf_arr_data(f, i);
                CHECK(d != NULL);
                if (n)
                    sink ^= d[0];
            }
        }
    }
    CHECK(gguf_find_key(f, "no such key in any file \x01") == -1);

    int64_t nt = gguf_n_tensors(f);
    CHECK(nt >= 0 && (uint64_t)nt <= size);
    for (int64_t i = 0; i < nt; i++) {
        struct gguf_tensor_info ti;
        gguf_tensor_get(f, i, &ti);
        CHECK(ti.name && ti.name[0]);
        CHECK(gguf_find_tensor(f, ti.name) == i);
        CHECK(ti.n_dims >= 1 && ti.n_dims <= 4);
        int64_t elems = 1;
        for (int d = 0; d < 4; d++) {
            CHECK(ti.ne[d] >= 1);
            elems *= ti.ne[d];
        }
        CHECK(ti.nbytes > 0 && ti.nbytes <= size);
        CHECK(ti.nbytes == gguf_tensor_nbytes(ti.type, elems));
        const uint8_t *p = ti.data;
        sink ^= (uint8_t)(p[0] ^ p[ti.nbytes - 1]);
        if (elems <= 4096) {
            float *out = malloc(sizeof(float) * (size_t)elems);
            CHECK(out);
            CHECK(gguf_tensor_to_f32(ti.type, ti.data, out, elems) == 0);
            free(out);
        }
    }
    CHECK(gguf_find_tensor(f, "no such tensor \x01") == -1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 20)
        return 0;
    if (memfd < 0) {
        memfd = memfd_create("fuzz.gguf", MFD_CLOEXEC);
        CHECK(memfd >= 0);
        snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
    }
    CHECK(ftruncate(memfd, 0) == 0);
    CHECK(pwrite(memfd, data, size, 0) == (ssize_t)size);

    char err[512] = "";
    gguf_file_t *f = NULL;
    int rc = gguf_open(path, &f, err, sizeof(err));
    if (rc) {
        CHECK(rc < 0 && f == NULL);
        CHECK(strncmp(err, path, strlen(path)) == 0);
    } else {
        CHECK(gguf_version(f) == 2 || gguf_version(f) == 3);
        uint32_t a = gguf_alignment(f);
        CHECK(a && (a & (a - 1)) == 0);
        walk(f, size);
        tok_t *t = NULL;
        if (tok_load(f, &t, err, sizeof(err)) == 0) {
            /* a little text through whatever vocabulary this is */
            int32_t ids[64], n = 0;
            int erc = tok_encode(t, "Hello world <s> 123", 19, true, true, ids, 64, &n);
            /* -EILSEQ: a byte no token covers and no <unk> */
            CHECK(erc == 0 || erc == -ENOSPC || erc == -EILSEQ);
            for (int32_t i = 0; i < n && i < 64; i++)
                CHECK(ids[i] >= 0 && ids[i] < tok_n_vocab(t));
            tok_free(t);
        } else {
            CHECK(err[0]);
        }
        enum chat_template ct;
        (void)chat_template_from_gguf(f, &ct, err, sizeof(err));
        gguf_close(f);
    }

    if (rc)
        return 0; /* model_load_file opens the file the same way first */
    model_t *m = NULL;
    err[0] = 0;
    rc = model_load_file(path, &m, err, sizeof(err));
    if (rc) {
        CHECK(m == NULL);
        CHECK(strncmp(err, path, strlen(path)) == 0);
    } else {
        const struct model_hparams *hp = model_hparams(m);
        CHECK(hp->n_layers >= 1 && hp->dim >= 1 && hp->n_vocab >= 1);
        CHECK(hp->dim % hp->n_heads == 0 && hp->n_heads % hp->n_kv_heads == 0);
        model_free(m);
    }
    return 0;
}
