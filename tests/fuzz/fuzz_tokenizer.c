/*
 * tests/fuzz/fuzz_tokenizer.c — libFuzzer harness: arbitrary bytes through
 * tok_encode, tok_decode and the streaming detokenizer.
 *
 * Vocabularies (loaded once): the synthetic SentencePiece vocabulary that
 * `folio gen-model` writes (model/vocab_synth.c, 32000 tokens), and every
 * vocabulary of tests/data/tokenizer (SentencePiece llama-spm; byte-level
 * BPE gpt-2, falcon, starcoder, deepseek-coder — the last three each with
 * their own pre-tokenizer).
 *
 * Input: byte 0 picks the vocabulary (low bits) and the options (bit 5
 * add_special, bit 6 parse_special, bit 7 TOK_DECODE_SPECIAL); the rest is
 * the text.  Checked on every input, aborting (a libFuzzer finding) when
 * false:
 *   - the -ENOSPC protocol: a short buffer reports the exact count needed
 *     and holds the same first ids as the full encode;
 *   - every id is inside the vocabulary;
 *   - plain text (no specials either way) decodes back to exactly the
 *     input bytes (SentencePiece: unless the text holds U+2581, which is
 *     its space stand-in), when the vocabulary has a token for each of its
 *     bytes; otherwise encoding fails with -EILSEQ when there is no <unk>;
 *   - the streaming detokenizer, fed the ids one at a time with a stop
 *     string cut from the input (refused unless it is well-formed UTF-8),
 *     releases valid UTF-8 only and never the stop string.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "folio/gguf.h"
#include "folio/tokenizer.h"
#include "vocab_synth.h"
#define FUZZ_CHECK_CONTEXT cur_vocab /* the vocabulary being fuzzed */
#include "fuzz_util.h"

#ifndef FOLIO_FUZZ_DATA
#error "FOLIO_FUZZ_DATA (tests/data/tokenizer) must be defined by the build"
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_VOCABS 8

static tok_t *vocabs[MAX_VOCABS];
static const char *vocab_names[MAX_VOCABS];
static bool has_byte[MAX_VOCABS][256]; /* a token decodes to exactly that byte */
static int n_vocabs;

static const char *cur_vocab = "";

static void add_vocab(const char *name, const char *path)
{
    gguf_file_t *f = NULL;
    char err[512];
    tok_t *t = NULL;
    if (gguf_open(path, &f, err, sizeof(err)) || tok_load(f, &t, err, sizeof(err))) {
        fprintf(stderr, "fuzz_tokenizer: %s: %s\n", name, err);
        abort(); /* the harness must not silently lose a vocabulary */
    }
    gguf_close(f);
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        int32_t ids[8], n = 0;
        size_t pl = 0;
        const char *p = NULL;
        if (tok_encode(t, &c, 1, false, false, ids, 8, &n) == 0 && n > 0)
            p = tok_piece(t, ids[n - 1], 0, &pl);
        has_byte[n_vocabs][b] = p && pl >= 1 && (uint8_t)p[pl - 1] == b;
    }
    vocabs[n_vocabs] = t;
    vocab_names[n_vocabs++] = name;
}

/* The synthetic vocabulary, written as the tokenizer-only GGUF that gen-model's
 * keys make, then read back through tok_load like any file. */
static void add_synthetic(void)
{
    struct vocab_synth v;
    char path[] = "/tmp/fuzz-tok-synth-XXXXXX", err[512];
    int fd = mkstemp(path);
    if (fd < 0 || vocab_synth_build(32000, &v))
        abort();
    close(fd);
    gguf_writer_t *w;
    if (gguf_writer_new(&w) || gguf_w_str(w, "tokenizer.ggml.model", "llama") ||
        gguf_w_arr_str(w, "tokenizer.ggml.tokens", v.tokens, (uint64_t)v.n_vocab) ||
        gguf_w_arr_f32(w, "tokenizer.ggml.scores", v.scores, (uint64_t)v.n_vocab) ||
        gguf_w_arr_i32(w, "tokenizer.ggml.token_type", v.types, (uint64_t)v.n_vocab) ||
        gguf_w_u32(w, "tokenizer.ggml.bos_token_id", VOCAB_SYNTH_BOS_ID) ||
        gguf_w_u32(w, "tokenizer.ggml.eos_token_id", VOCAB_SYNTH_EOS_ID) ||
        gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", VOCAB_SYNTH_UNK_ID) ||
        gguf_writer_write(w, path, err, sizeof(err)))
        abort();
    gguf_writer_free(w);
    vocab_synth_free(&v);
    add_vocab("synthetic", path);
    unlink(path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static const char *const files[] = {"llama-spm", "gpt-2", "falcon", "starcoder",
                                        "deepseek-coder"};
    add_synthetic();
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/ggml-vocab-%s.gguf", FOLIO_FUZZ_DATA, files[i]);
        add_vocab(files[i], path);
    }
    return 0;
}

/* Length of the valid UTF-8 sequence at s[0..n), 0 if invalid. */
static size_t utf8_valid_len(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    size_t l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!l || l > n)
        return 0;
    uint32_t cp = l == 1 ? c : l == 2 ? c & 0x1fu : l == 3 ? c & 0x0fu : c & 0x07u;
    for (size_t i = 1; i < l; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[l] || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
        return 0;
    return l;
}

static bool utf8_valid(const char *s, size_t n)
{
    const uint8_t *u = (const uint8_t *)s;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_valid_len(u + i, n - i);
        if (!l)
            return false;
        i += l;
    }
    return true;
}

static void check_detok(const tok_t *t, const int32_t *ids, int32_t n, const char *text, size_t len,
                        unsigned flags)
{
    /* a stop string cut from the input (up to 4 bytes from its middle) */
    char stop[8] = "";
    if (len >= 2) {
        size_t sl = len < 4 ? len : 4, from = (len - sl) / 2;
        memcpy(stop, text + from, sl);
        stop[sl] = 0;
    }
    const char *stops[1] = {stop};
    tok_detok_t *d;
    if (!utf8_valid(stop, strlen(stop))) { /* refused: it could cut a character */
        CHECK(tok_detok_new(t, stops, 1, flags, &d) == -EINVAL);
        stop[0] = 0;
    }
    CHECK(tok_detok_new(t, stops, stop[0] ? 1 : 0, flags, &d) == 0);
    size_t cap = 64 + (size_t)n * (3 * tok_max_piece_len(t) + 4); /* U+FFFD: 3 bytes per byte */
    char *out = malloc(cap);
    size_t o = 0;
    bool stopped = false;
    for (int32_t i = 0; i < n && !stopped; i++) {
        const char *piece;
        size_t pl;
        int rc = tok_detok_feed(d, ids[i], &piece, &pl);
        CHECK(rc >= 0);
        CHECK(o + pl <= cap);
        memcpy(out + o, piece, pl);
        o += pl;
        stopped = rc == 1;
    }
    if (!stopped) {
        const char *piece;
        size_t pl;
        tok_detok_flush(d, &piece, &pl);
        CHECK(o + pl <= cap);
        memcpy(out + o, piece, pl);
        o += pl;
    }
    CHECK(utf8_valid(out, o));
    if (stop[0] && o >= strlen(stop))
        CHECK(memmem(out, o, stop, strlen(stop)) == NULL);
    free(out);
    tok_detok_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1 << 16)
        return 0;
    const uint8_t opt = data[0];
    const int vi = (opt & 0x1f) % n_vocabs;
    const tok_t *t = vocabs[vi];
    cur_vocab = vocab_names[vi];
    const bool add_special = opt & 0x20, parse_special = opt & 0x40;
    const unsigned dflags = opt & 0x80 ? TOK_DECODE_SPECIAL : 0;
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;

    bool covered = true;
    for (size_t i = 0; i < len; i++)
        covered = covered && has_byte[vi][(uint8_t)text[i]];
    int32_t need = -1;
    int rc = tok_encode(t, text, len, add_special, parse_special, NULL, 0, &need);
    if (rc == -EILSEQ) { /* only for a byte no token covers, without <unk> */
        CHECK(!covered && tok_unk(t) < 0);
        return 0;
    }
    CHECK(rc == 0 || rc == -ENOSPC);
    CHECK(need >= 0 && (rc == 0) == (need == 0));
    int32_t *ids = malloc(sizeof(int32_t) * ((size_t)need + 1));
    int32_t got = -1;
    CHECK(tok_encode(t, text, len, add_special, parse_special, ids, need, &got) == 0);
    CHECK(got == need);
    if (need > 1) { /* a short buffer: same prefix, same count */
        int32_t *part = malloc(sizeof(int32_t) * (size_t)need);
        int32_t n2 = -1;
        CHECK(tok_encode(t, text, len, add_special, parse_special, part, need / 2, &n2) == -ENOSPC);
        CHECK(n2 == need);
        CHECK(memcmp(part, ids, sizeof(int32_t) * (size_t)(need / 2)) == 0);
        free(part);
    }
    const int32_t nv = tok_n_vocab(t);
    for (int32_t i = 0; i < got; i++)
        CHECK(ids[i] >= 0 && ids[i] < nv);

    size_t dn = 0;
    rc = tok_decode(t, ids, (size_t)got, dflags, NULL, 0, &dn);
    CHECK(rc == 0 || rc == -ENOSPC);
    char *dec = malloc(dn + 1);
    size_t dn2 = 0;
    CHECK(tok_decode(t, ids, (size_t)got, dflags, dec, dn, &dn2) == 0);
    CHECK(dn2 == dn);
    if (!add_special && !parse_special && dflags == 0 && covered) {
        bool spm_marker = tok_kind(t) == TOK_SPM && memmem(text, len, "\xe2\x96\x81", 3);
        if (!spm_marker)
            CHECK(dn == len && memcmp(dec, text, len) == 0);
    }
    free(dec);

    check_detok(t, ids, got, text, len, dflags);
    free(ids);
    return 0;
}
