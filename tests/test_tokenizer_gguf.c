/*
 * tests/test_tokenizer_gguf.c — the tokenizer on vocabularies written here
 * through the GGUF writer: tok_load's errors (unknown model, bad keys),
 * SPM without byte fallback, user-defined tokens, and the synthetic
 * vocabulary of `folio gen-model` (model/vocab_synth.c) on English text.
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

#include <cmocka.h>

#define TEST_TMP_NAME "folio_tok_test"
#include "test_tmp.h"

#include "folio/common.h"
#include "folio/gguf.h"
#include "folio/tokenizer.h"
#include "tok_internal.h"
#include "vocab_synth.h"

/* Writes w to a temp file, opens it and loads its tokenizer: the rc of
 * tok_load, err filled, *t set on success (caller frees t and *f). */
static int load_from(gguf_writer_t *w, gguf_file_t **f, tok_t **t, char *err, size_t errlen)
{
    char path[512], e2[256];
    snprintf(path, sizeof(path), "%s/v.gguf", tmpdir);
    if (gguf_writer_write(w, path, e2, sizeof(e2)) != 0)
        fail_msg("gguf_writer_write: %s", e2);
    gguf_writer_free(w);
    if (gguf_open(path, f, e2, sizeof(e2)) != 0)
        fail_msg("gguf_open: %s", e2);
    *t = NULL;
    int rc = tok_load(*f, t, err, errlen);
    if (rc)
        assert_null(*t);
    return rc;
}

/* A tiny SPM vocabulary: <unk> <s> </s>, then pieces. */
static gguf_writer_t *small_spm(const char *model, bool with_bytes)
{
    static const char *pieces[] = {"<unk>", "<s>", "</s>", "▁",      "a",       "b",
                                   "▁a",    "ab",  "▁ab",  "<0x41>", "<|tool|>"};
    static const float scores[] = {0, 0, 0, -1, -2, -3, -4, -5, -6, 0, 0};
    static const int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 6, 4};
    int32_t n = with_bytes ? 11 : 9;
    gguf_writer_t *w;
    assert_int_equal(gguf_writer_new(&w), 0);
    assert_int_equal(gguf_w_str(w, "tokenizer.ggml.model", model), 0);
    assert_int_equal(gguf_w_arr_str(w, "tokenizer.ggml.tokens", pieces, (uint64_t)n), 0);
    assert_int_equal(gguf_w_arr_f32(w, "tokenizer.ggml.scores", scores, (uint64_t)n), 0);
    assert_int_equal(gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, (uint64_t)n), 0);
    return w;
}

static void test_load_errors(void **state)
{
    (void)state;
    gguf_file_t *f;
    tok_t *t;
    char err[256];
    /* unknown tokenizer model */
    err[0] = 0;
    assert_int_equal(load_from(small_spm("bert", false), &f, &t, err, sizeof(err)), -ENOTSUP);
    assert_non_null(strstr(err, "'bert'"));
    gguf_close(f);
    /* no model key at all */
    gguf_writer_t *w;
    assert_int_equal(gguf_writer_new(&w), 0);
    assert_int_equal(gguf_w_u32(w, "general.alignment", 32), 0);
    err[0] = 0;
    assert_int_equal(load_from(w, &f, &t, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "tokenizer.ggml.model"));
    gguf_close(f);
    /* no tokens */
    assert_int_equal(gguf_writer_new(&w), 0);
    assert_int_equal(gguf_w_str(w, "tokenizer.ggml.model", "llama"), 0);
    assert_int_equal(load_from(w, &f, &t, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "tokenizer.ggml.tokens"));
    gguf_close(f);
    /* a special id outside the vocabulary */
    w = small_spm("llama", false);
    assert_int_equal(gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 9), 0);
    assert_int_equal(load_from(w, &f, &t, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "eos_token_id"));
    gguf_close(f);
    /* scores of the wrong length */
    assert_int_equal(gguf_writer_new(&w), 0);
    static const char *two[] = {"a", "b"};
    static const float one[] = {0};
    assert_int_equal(gguf_w_str(w, "tokenizer.ggml.model", "llama"), 0);
    assert_int_equal(gguf_w_arr_str(w, "tokenizer.ggml.tokens", two, 2), 0);
    assert_int_equal(gguf_w_arr_f32(w, "tokenizer.ggml.scores", one, 1), 0);
    assert_int_equal(load_from(w, &f, &t, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "scores"));
    gguf_close(f);
    /* gpt2 without merges; gpt2 with an unknown pre-tokenizer */
    assert_int_equal(gguf_writer_new(&w), 0);
    assert_int_equal(gguf_w_str(w, "tokenizer.ggml.model", "gpt2"), 0);
    assert_int_equal(gguf_w_arr_str(w, "tokenizer.ggml.tokens", two, 2), 0);
    assert_int_equal(load_from(w, &f, &t, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "merges"));
    gguf_close(f);
    assert_int_equal(gguf_writer_new(&w), 0);
    assert_int_equal(gguf_w_str(w, "tokenizer.ggml.model", "gpt2"), 0);
    assert_int_equal(gguf_w_str(w, "tokenizer.ggml.pre", "no-such-pre"), 0);
    assert_int_equal(gguf_w_arr_str(w, "tokenizer.ggml.tokens", two, 2), 0);
    assert_int_equal(load_from(w, &f, &t, err, sizeof(err)), -ENOTSUP);
    assert_non_null(strstr(err, "'no-such-pre'"));
    gguf_close(f);
}

/* Without byte tokens, characters outside the vocabulary become <unk>
 * (one per character), decoded as U+FFFD; user-defined tokens match in
 * plain text; add_space_prefix=false drops the prefix. */
static void test_spm_small(void **state)
{
    (void)state;
    gguf_file_t *f;
    tok_t *t;
    char err[256];
    assert_int_equal(load_from(small_spm("llama", false), &f, &t, err, sizeof(err)), 0);
    int32_t ids[32], n;
    assert_int_equal(tok_encode(t, "ab xé", 6, true, false, ids, 32, &n), 0);
    /* <s> "▁ab" "▁" <unk>(x) <unk>(é) */
    int32_t want[] = {1, 8, 3, 0, 0};
    assert_int_equal(n, 5);
    assert_memory_equal(ids, want, sizeof(want));
    char buf[64];
    size_t l;
    assert_int_equal(tok_decode(t, ids, (size_t)n, 0, buf, sizeof(buf), &l), 0);
    assert_int_equal(l, strlen("ab \xef\xbf\xbd\xef\xbf\xbd"));
    assert_memory_equal(buf, "ab \xef\xbf\xbd\xef\xbf\xbd", l);
    tok_free(t);
    gguf_close(f);

    /* with byte fallback and a user-defined token */
    gguf_writer_t *w = small_spm("llama", true);
    assert_int_equal(gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", false), 0);
    assert_int_equal(gguf_w_bool(w, "tokenizer.ggml.add_eos_token", true), 0);
    assert_int_equal(load_from(w, &f, &t, err, sizeof(err)), 0);
    assert_int_equal(tok_encode(t, "aA<|tool|>b", 11, true, false, ids, 32, &n), 0);
    /* <s> a <0x41> <|tool|> b </s>: no space prefix, EOS appended */
    int32_t want2[] = {1, 4, 9, 10, 5, 2};
    assert_int_equal(n, 6);
    assert_memory_equal(ids, want2, sizeof(want2));
    assert_int_equal(tok_decode(t, ids, (size_t)n, 0, buf, sizeof(buf), &l), 0);
    assert_int_equal(l, 11);
    assert_memory_equal(buf, "aA<|tool|>b", 11);
    tok_free(t);
    gguf_close(f);
}

/* code point -> UTF-8 */
static size_t put_cp(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    o[0] = (char)(0xc0 | cp >> 6);
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

/* text in GPT-2's printable byte alphabet */
static void to_alphabet(const char *s, char *out)
{
    size_t o = 0;
    for (; *s; s++) {
        uint32_t b = (uint8_t)*s, cp = b, next = 256;
        bool keep = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        if (!keep) {
            for (uint32_t x = 0; x < b; x++)
                if (!((x >= '!' && x <= '~') || (x >= 0xa1 && x <= 0xac) || x >= 0xae))
                    next++;
            cp = next;
        }
        o += put_cp(out + o, cp);
    }
    out[o] = 0;
}

/* The llama-bpe pre-tokenizer splits as Llama 3's regex does; with
 * ignore_merges a word that is a token is taken whole.  The vocabulary
 * holds the 256 single bytes and exactly the expected words. */
static void test_llama3_pretokenizer(void **state)
{
    (void)state;
    static const char *words[] = {"Hello", " world", " ", "123", "45", " don", "'t", "\n\n", "!!"};
    const size_t nw = sizeof(words) / sizeof(words[0]);
    char *toks[256 + 16];
    const char *ctoks[256 + 16];
    for (int b = 0; b < 256; b++) {
        char one[2] = {(char)(b ? b : 1), 0};
        toks[b] = malloc(8);
        if (b == 0) { /* NUL cannot go through a C string: map by hand */
            strcpy(toks[b], "\xc4\x80");
        } else {
            to_alphabet(one, toks[b]);
        }
    }
    for (size_t i = 0; i < nw; i++) {
        toks[256 + i] = malloc(64);
        to_alphabet(words[i], toks[256 + i]);
    }
    size_t n = 256 + nw;
    for (size_t i = 0; i < n; i++)
        ctoks[i] = toks[i];
    const char *merges[] = {"H e"};
    gguf_writer_t *w;
    assert_int_equal(gguf_writer_new(&w), 0);
    assert_int_equal(gguf_w_str(w, "tokenizer.ggml.model", "gpt2"), 0);
    assert_int_equal(gguf_w_str(w, "tokenizer.ggml.pre", "llama-bpe"), 0);
    assert_int_equal(gguf_w_arr_str(w, "tokenizer.ggml.tokens", ctoks, n), 0);
    assert_int_equal(gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, 1), 0);
    gguf_file_t *f;
    tok_t *t;
    char err[256];
    if (load_from(w, &f, &t, err, sizeof(err)) != 0)
        fail_msg("tok_load: %s", err);
    const char *text = "Hello world 12345 don't\n\n!!";
    int32_t ids[64], k;
    assert_int_equal(tok_encode(t, text, strlen(text), false, false, ids, 64, &k), 0);
    assert_int_equal(k, (int32_t)nw);
    for (size_t i = 0; i < nw; i++)
        assert_int_equal(ids[i], (int32_t)(256 + i));
    char out[64];
    size_t l;
    assert_int_equal(tok_decode(t, ids, (size_t)k, 0, out, sizeof(out), &l), 0);
    assert_int_equal(l, strlen(text));
    assert_memory_equal(out, text, l);
    /* a word that is no token falls back to its bytes */
    assert_int_equal(tok_encode(t, "Hi", 2, false, false, ids, 64, &k), 0);
    assert_int_equal(k, 2);
    assert_int_equal(ids[0], 'H');
    tok_free(t);
    gguf_close(f);
    for (size_t i = 0; i < n; i++)
        free(toks[i]);
}

/* A byte-level BPE vocabulary of the 256 bytes alone, with pre-tokenizer
 * `pre` (NULL: no tokenizer.ggml.pre key). */
static int bytes_vocab(const char *pre, gguf_file_t **f, tok_t **t, char *err, size_t errlen)
{
    char *toks[256];
    for (int b = 0; b < 256; b++) {
        char one[2] = {(char)(b ? b : 1), 0};
        toks[b] = malloc(8);
        if (b == 0)
            strcpy(toks[b], "\xc4\x80");
        else
            to_alphabet(one, toks[b]);
    }
    const char *merges[] = {"a b"};
    gguf_writer_t *w;
    assert_int_equal(gguf_writer_new(&w), 0);
    assert_int_equal(gguf_w_str(w, "tokenizer.ggml.model", "gpt2"), 0);
    if (pre)
        assert_int_equal(gguf_w_str(w, "tokenizer.ggml.pre", pre), 0);
    assert_int_equal(gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, 256), 0);
    assert_int_equal(gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, 1), 0);
    int rc = load_from(w, f, t, err, errlen);
    for (int b = 0; b < 256; b++)
        free(toks[b]);
    return rc;
}

/* Each pre-tokenizer row cuts a text into the words its regexes give,
 * worked out by hand from the regex lists (model/tokenizer.c); every name
 * of a row splits alike, and an unknown name fails at load naming it. */
static void test_pretokenizer_table(void **state)
{
    (void)state;
    static const struct {
        const char *names[4];
        const char *text;
        const char *words[16];
    } cases[] = {
        /* GPT-2: contractions, letters/numbers/symbols with one leading space */
        {{"gpt-2", "mpt", "phi-2", "olmo"},
         "Hello world 12345 don't!!",
         {"Hello", " world", " 12345", " don", "'t", "!!"}},
        /* Llama 3: numbers by three, symbols take the newlines after them */
        {{"llama-bpe", "llama3", "dbrx", "smaug-bpe"},
         "Hello world 12345 don't!!\n\n",
         {"Hello", " world", " ", "123", "45", " don", "'t", "!!\n\n"}},
        /* Qwen2: as Llama 3 but one digit per word */
        {{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"},
         "Hello world 12345 don't!!\n\n",
         {"Hello", " world", " ", "1", "2", "3", "4", "5", " don", "'t", "!!\n\n"}},
        /* StarCoder family: digits cut out first, then GPT-2's */
        {{"starcoder", "refact", "command-r", "smollm"},
         "Hello world 12345 don't!!",
         {"Hello", " world", " ", "1", "2", "3", "4", "5", " don", "'t", "!!"}},
        /* Falcon: punctuation and symbol runs first, numbers in threes last */
        {{"falcon"},
         "Hello, world 1234567 a+b",
         {"Hello", ",", " world", " ", "123", "456", "7", " a", "+", "b"}},
        /* llama.cpp's default (also when tokenizer.ggml.pre is absent) */
        {{"default", NULL}, "a+b 12345", {"a", "+", "b", " ", "123", "45"}},
        /* DeepSeek Coder: newlines, letters, punctuation, CJK, then digits */
        {{"deepseek-coder"},
         "Hi there, 42\n\u4e2d\u6587x",
         {"Hi", " there", ",", " ", "4", "2", "\n", "\u4e2d\u6587", "x"}},
        /* DeepSeek LLM: Latin-like letters, ASCII-ish symbols, trailing
         * spaces, CJK, whole numbers */
        {{"deepseek-llm"},
         "Hi there, 42 \n\u4e2d\u6587 ",
         {"Hi", " there", ",", " ", "42", " ", "\n", "\u4e2d\u6587", " "}},
        /* GPT-4o: case runs, contraction kept on its word, "/" leads a word */
        {{"gpt-4o", "llama4"},
         "HelloWorld isn't 12345 a/b\n",
         {"Hello", "World", " isn't", " ", "123", "45", " a", "/b", "\n"}},
    };
    char err[256];
    int checked = 0;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        for (size_t j = 0; j < 4; j++) {
            const char *pre = cases[c].names[j];
            if (!pre && !(j > 0 && !strcmp(cases[c].names[0], "default")))
                break; /* NULL after "default": the key absent */
            gguf_file_t *f;
            tok_t *t;
            if (bytes_vocab(pre, &f, &t, err, sizeof(err)) != 0)
                fail_msg("pre-tokenizer %s: %s", pre ? pre : "(absent)", err);
            const char *text = cases[c].text;
            size_t ends[32], n;
            assert_int_equal(tok__pretokenize(t, text, strlen(text), ends, 32, &n), 0);
            size_t nw = 0, at = 0;
            while (cases[c].words[nw])
                nw++;
            bool ok = n == nw;
            for (size_t i = 0; ok && i < n; i++) {
                const char *w = cases[c].words[i];
                ok = ends[i] - at == strlen(w) && !memcmp(text + at, w, strlen(w));
                at = ends[i];
            }
            if (!ok) {
                at = 0;
                for (size_t i = 0; i < n; i++) {
                    print_message("  [%.*s]\n", (int)(ends[i] - at), text + at);
                    at = ends[i];
                }
                fail_msg("pre-tokenizer %s: '%s' cut into %zu words, want %zu (above)",
                         pre ? pre : "(absent)", text, n, nw);
            }
            /* and the words are what the encoder merges: bytes here */
            int32_t ids[64], k;
            assert_int_equal(tok_encode(t, text, strlen(text), false, false, ids, 64, &k), 0);
            assert_int_equal(k, (int32_t)strlen(text));
            tok_free(t);
            gguf_close(f);
            checked++;
            if (!pre)
                break;
        }
    }
    assert_int_equal(checked, 23);
}

/* Without tokenizer.ggml.token_type, SPM "<0xNN>" tokens are still bytes. */
static void test_spm_untyped(void **state)
{
    (void)state;
    static const char *pieces[] = {"<unk>", "<s>", "</s>", "▁", "a", "<0x41>", "<0x42>"};
    gguf_writer_t *w;
    assert_int_equal(gguf_writer_new(&w), 0);
    assert_int_equal(gguf_w_str(w, "tokenizer.ggml.model", "llama"), 0);
    assert_int_equal(gguf_w_arr_str(w, "tokenizer.ggml.tokens", pieces, 7), 0);
    gguf_file_t *f;
    tok_t *t;
    char err[256];
    assert_int_equal(load_from(w, &f, &t, err, sizeof(err)), 0);
    assert_int_equal(tok_token_type(t, 5), TOK_TYPE_BYTE);
    int32_t ids[8], k;
    assert_int_equal(tok_encode(t, "aB", 2, false, false, ids, 8, &k), 0);
    int32_t want[] = {3, 4, 6};
    assert_int_equal(k, 3);
    assert_memory_equal(ids, want, sizeof(want));
    tok_free(t);
    gguf_close(f);
}

static const char english[] =
    "The history of the city is long and complicated. In the early years, people came from "
    "many different places to work in the factories and on the farms around it. They built "
    "houses, schools and churches, and over time the small town grew into one of the largest "
    "cities in the country. Today, more than a million people live there, and many of them "
    "still remember the stories their parents and grandparents told them about the old days. "
    "The government has tried to improve public transport, but traffic is still a problem "
    "during the morning and evening. Would you like to visit it next summer? I think you "
    "should, because there is something for everyone: music, food, art and a beautiful river.";

/* The synthetic vocabulary tokenizes English into mostly whole words. */
static void synth_case(int32_t n_vocab, double min_chars_per_token)
{
    struct vocab_synth v = {0};
    assert_int_equal(vocab_synth_build(n_vocab, &v), 0);
    gguf_writer_t *w;
    assert_int_equal(gguf_writer_new(&w), 0);
    assert_int_equal(gguf_w_str(w, "tokenizer.ggml.model", "llama"), 0);
    assert_int_equal(gguf_w_arr_str(w, "tokenizer.ggml.tokens", v.tokens, (uint64_t)n_vocab), 0);
    assert_int_equal(gguf_w_arr_f32(w, "tokenizer.ggml.scores", v.scores, (uint64_t)n_vocab), 0);
    assert_int_equal(gguf_w_arr_i32(w, "tokenizer.ggml.token_type", v.types, (uint64_t)n_vocab), 0);
    assert_int_equal(gguf_w_u32(w, "tokenizer.ggml.bos_token_id", VOCAB_SYNTH_BOS_ID), 0);
    assert_int_equal(gguf_w_u32(w, "tokenizer.ggml.eos_token_id", VOCAB_SYNTH_EOS_ID), 0);
    vocab_synth_free(&v);
    gguf_file_t *f;
    tok_t *t;
    char err[256];
    if (load_from(w, &f, &t, err, sizeof(err)) != 0)
        fail_msg("tok_load: %s", err);
    size_t len = strlen(english);
    int32_t ids[2048], n;
    assert_int_equal(tok_encode(t, english, len, false, false, ids, 2048, &n), 0);
    double cpt = (double)len / n;
    int bytes = 0;
    for (int32_t i = 0; i < n; i++)
        bytes += tok_token_type(t, ids[i]) == TOK_TYPE_BYTE;
    print_message("synthetic vocab %d: %zu chars -> %d tokens (%.2f chars/token, %d byte "
                  "tokens)\n",
                  n_vocab, len, n, cpt, bytes);
    assert_true(cpt >= min_chars_per_token);
    assert_int_equal(bytes, 0);
    char out[2048];
    size_t l;
    assert_int_equal(tok_decode(t, ids, (size_t)n, 0, out, sizeof(out), &l), 0);
    assert_int_equal(l, len);
    assert_memory_equal(out, english, len);
    /* common words are single tokens */
    int32_t one[4], k;
    assert_int_equal(tok_encode(t, "the", 3, false, false, one, 4, &k), 0);
    assert_int_equal(k, 1);
    tok_free(t);
    gguf_close(f);
}

static void test_synthetic_vocab(void **state)
{
    (void)state;
    synth_case(32000, 2.5);
    synth_case(8192, 2.5);
}

/* tok_new_synthetic (the default model's tokenizer, built from arrays)
 * is the tokenizer tok_load reads from the keys `folio gen-model` writes. */
static void test_synthetic_direct(void **state)
{
    (void)state;
    const int32_t n_vocab = 8192;
    struct vocab_synth v = {0};
    assert_int_equal(vocab_synth_build(n_vocab, &v), 0);
    gguf_writer_t *w;
    assert_int_equal(gguf_writer_new(&w), 0);
    assert_int_equal(gguf_w_str(w, "tokenizer.ggml.model", "llama"), 0);
    assert_int_equal(gguf_w_arr_str(w, "tokenizer.ggml.tokens", v.tokens, (uint64_t)n_vocab), 0);
    assert_int_equal(gguf_w_arr_f32(w, "tokenizer.ggml.scores", v.scores, (uint64_t)n_vocab), 0);
    assert_int_equal(gguf_w_arr_i32(w, "tokenizer.ggml.token_type", v.types, (uint64_t)n_vocab), 0);
    assert_int_equal(gguf_w_u32(w, "tokenizer.ggml.bos_token_id", VOCAB_SYNTH_BOS_ID), 0);
    assert_int_equal(gguf_w_u32(w, "tokenizer.ggml.eos_token_id", VOCAB_SYNTH_EOS_ID), 0);
    assert_int_equal(gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", VOCAB_SYNTH_UNK_ID), 0);
    assert_int_equal(gguf_w_bool(w, "tokenizer.ggml.add_bos_token", true), 0);
    assert_int_equal(gguf_w_bool(w, "tokenizer.ggml.add_eos_token", false), 0);
    vocab_synth_free(&v);
    gguf_file_t *f;
    tok_t *a, *b;
    char err[256];
    if (load_from(w, &f, &a, err, sizeof(err)) != 0)
        fail_msg("tok_load: %s", err);
    if (tok_new_synthetic(n_vocab, &b, err, sizeof(err)) != 0)
        fail_msg("tok_new_synthetic: %s", err);
    assert_int_equal(tok_n_vocab(b), n_vocab);
    assert_int_equal(tok_bos(b), tok_bos(a));
    assert_int_equal(tok_eos(b), tok_eos(a));
    assert_int_equal(tok_unk(b), tok_unk(a));
    assert_int_equal(tok_add_bos(b), tok_add_bos(a));
    assert_int_equal(tok_max_piece_len(b), tok_max_piece_len(a));
    for (int32_t i = 0; i < n_vocab; i++) {
        assert_string_equal(tok_token_text(b, i), tok_token_text(a, i));
        assert_int_equal(tok_token_type(b, i), tok_token_type(a, i));
    }
    const char *texts[] = {english,
                           "  Hello,\n\tworld! \xc3\xa9t\xc3\xa9 \xe2\x82\xac\x34\x32 <s>x", ""};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(texts); i++) {
        int32_t ia[2048], ib[2048], na, nb;
        size_t len = strlen(texts[i]);
        assert_int_equal(tok_encode(a, texts[i], len, true, true, ia, 2048, &na), 0);
        assert_int_equal(tok_encode(b, texts[i], len, true, true, ib, 2048, &nb), 0);
        assert_int_equal(na, nb);
        assert_memory_equal(ia, ib, sizeof(int32_t) * (size_t)na);
    }
    tok_free(a);
    tok_free(b);
    gguf_close(f);
    assert_int_equal(tok_new_synthetic(100, &b, err, sizeof(err)), -EINVAL);
}

/* tok_new straight from arrays: defaults, NUL-terminated and counted
 * strings, and ids it refuses. */
static void test_tok_new_arrays(void **state)
{
    (void)state;
    /* a byte-level BPE vocabulary: every byte of "ab" and the merge a+b */
    const char *tokens[] = {"a", "b", "ab", "<|end|>"};
    const int32_t types[] = {TOK_TYPE_NORMAL, TOK_TYPE_NORMAL, TOK_TYPE_NORMAL, TOK_TYPE_CONTROL};
    const char *merges[] = {"a bXX"};
    const size_t merge_lens[] = {3};
    struct tok_vocab v;
    tok_vocab_init(&v, TOK_BPE);
    assert_int_equal(v.bos, TOK_ID_DEFAULT);
    assert_false(v.add_bos);
    v.n_tokens = 4;
    v.tokens = tokens;
    v.types = types;
    v.n_merges = 1;
    v.merges = merges;
    v.merge_lens = merge_lens;
    v.eos = 3;
    tok_t *t;
    char err[256];
    if (tok_new(&v, &t, err, sizeof(err)) != 0)
        fail_msg("tok_new: %s", err);
    assert_int_equal(tok_kind(t), TOK_BPE);
    assert_int_equal(tok_bos(t), -1); /* BPE default: none */
    assert_int_equal(tok_eos(t), 3);
    assert_true(tok_is_eog(t, 3));
    int32_t ids[8], n;
    assert_int_equal(tok_encode(t, "abba<|end|>", 11, false, true, ids, 8, &n), 0);
    const int32_t want[] = {2, 1, 0, 3};
    assert_int_equal(n, 4);
    assert_memory_equal(ids, want, sizeof(want));
    tok_free(t);

    v.eos = 4; /* outside the vocabulary */
    assert_int_equal(tok_new(&v, &t, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "eos"));
    v.eos = -1;
    v.pre = "no-such-pre-tokenizer";
    assert_int_equal(tok_new(&v, &t, err, sizeof(err)), -ENOTSUP);
    v.pre = NULL;
    v.n_tokens = 0;
    assert_int_equal(tok_new(&v, &t, err, sizeof(err)), -EINVAL);

    /* SPM defaults: <unk> 0, <s> 1, </s> 2, BOS added (U+2581: SPM's space) */
    const char *spm[] = {"<unk>", "<s>", "</s>", "\u2581a", "a", "\u2581"};
    tok_vocab_init(&v, TOK_SPM);
    v.n_tokens = 6;
    v.tokens = spm;
    if (tok_new(&v, &t, err, sizeof(err)) != 0)
        fail_msg("tok_new: %s", err);
    assert_int_equal(tok_bos(t), 1);
    assert_int_equal(tok_eos(t), 2);
    assert_int_equal(tok_unk(t), 0);
    assert_true(tok_add_bos(t));
    assert_int_equal(tok_encode(t, "a", 1, true, false, ids, 8, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 3);
    tok_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_errors),         cmocka_unit_test(test_spm_small),
        cmocka_unit_test(test_llama3_pretokenizer), cmocka_unit_test(test_spm_untyped),
        cmocka_unit_test(test_synthetic_vocab),     cmocka_unit_test(test_pretokenizer_table),
        cmocka_unit_test(test_synthetic_direct),    cmocka_unit_test(test_tok_new_arrays),
    };
    return cmocka_run_group_tests(tests, test_tmp_setup, test_tmp_teardown);
}
