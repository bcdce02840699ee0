/*
 * tests/test_detok.c — the streaming detokenizer: UTF-8 held across token
 * boundaries, U+FFFD for invalid bytes, stop strings never released (not
 * even a prefix), checked by hand-made cases and against a naive model on
 * random streams; and on the real vocabularies of tests/data/tokenizer.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "folio/common.h"
#include "folio/gguf.h"
#include "folio/tokenizer.h"

#ifndef FOLIO_TOK_DATA
#define FOLIO_TOK_DATA "tests/data/tokenizer"
#endif

#define FFFD "\xef\xbf\xbd"

/* Accumulated output of a stream. */
struct sink {
    char buf[8192];
    size_t n;
    int last_rc;
};

static void feed(tok_detok_t *d, struct sink *s, const char *bytes, size_t n)
{
    const char *txt = NULL;
    size_t len = 99;
    int rc = tok_detok_feed_bytes(d, bytes, n, &txt, &len);
    assert_true(rc == 0 || rc == 1);
    assert_non_null(txt);
    assert_true(s->n + len < sizeof(s->buf));
    memcpy(s->buf + s->n, txt, len);
    s->n += len;
    s->buf[s->n] = 0;
    s->last_rc = rc;
}

static void feed_str(tok_detok_t *d, struct sink *s, const char *str)
{
    feed(d, s, str, strlen(str));
}

static void flush(tok_detok_t *d, struct sink *s)
{
    const char *txt;
    size_t len;
    int rc = tok_detok_flush(d, &txt, &len);
    assert_true(rc == 0 || rc == 1);
    memcpy(s->buf + s->n, txt, len);
    s->n += len;
    s->buf[s->n] = 0;
    s->last_rc = rc;
}

static tok_detok_t *mk(const char *const *stops, size_t n)
{
    tok_detok_t *d = NULL;
    assert_int_equal(tok_detok_new(NULL, stops, n, 0, &d), 0);
    return d;
}

/* A stop string split over three feeds: nothing of it is ever released. */
static void test_stop_split(void **state)
{
    (void)state;
    const char *stops[] = {"STOP"};
    tok_detok_t *d = mk(stops, 1);
    struct sink s = {0};
    feed_str(d, &s, "Hello S");
    assert_string_equal(s.buf, "Hello "); /* "S" may begin STOP: held */
    feed_str(d, &s, "TO");
    assert_string_equal(s.buf, "Hello ");
    assert_int_equal(s.last_rc, 0);
    feed_str(d, &s, "P and more");
    assert_int_equal(s.last_rc, 1);
    assert_string_equal(s.buf, "Hello ");
    assert_int_equal(tok_detok_stopped(d), 0);
    feed_str(d, &s, "later");
    assert_int_equal(s.last_rc, 1);
    flush(d, &s);
    assert_string_equal(s.buf, "Hello ");
    /* a false start is released once it cannot be a stop any more */
    tok_detok_reset(d);
    s = (struct sink){0};
    feed_str(d, &s, "ST");
    assert_string_equal(s.buf, "");
    feed_str(d, &s, "ART");
    assert_string_equal(s.buf, "START");
    feed_str(d, &s, "STO");
    assert_string_equal(s.buf, "START");
    flush(d, &s); /* stream ended: the held prefix is ordinary text */
    assert_string_equal(s.buf, "STARTSTO");
    assert_int_equal(tok_detok_stopped(d), -1);
    tok_detok_free(d);
}

static void test_stop_at_start(void **state)
{
    (void)state;
    const char *stops[] = {"###"};
    tok_detok_t *d = mk(stops, 1);
    struct sink s = {0};
    feed_str(d, &s, "###abc");
    assert_int_equal(s.last_rc, 1);
    assert_int_equal(s.n, 0);
    tok_detok_free(d);
    /* the stop string is the whole first token, byte by byte */
    d = mk(stops, 1);
    s = (struct sink){0};
    feed_str(d, &s, "#");
    feed_str(d, &s, "#");
    assert_int_equal(s.n, 0);
    feed_str(d, &s, "#");
    assert_int_equal(s.last_rc, 1);
    assert_int_equal(s.n, 0);
    tok_detok_free(d);
}

static void test_several_stops(void **state)
{
    (void)state;
    const char *stops[] = {"\n\n", "User:", "", "abcd", "bc"};
    tok_detok_t *d = mk(stops, FOLIO_ARRAY_LEN(stops));
    struct sink s = {0};
    feed_str(d, &s, "answer\n");
    assert_string_equal(s.buf, "answer"); /* "\n" may begin "\n\n" */
    feed_str(d, &s, "Us");
    feed_str(d, &s, "er: hi");
    assert_int_equal(s.last_rc, 1);
    assert_string_equal(s.buf, "answer\n");
    assert_int_equal(tok_detok_stopped(d), 1);
    /* the earliest occurrence wins */
    tok_detok_reset(d);
    s = (struct sink){0};
    feed_str(d, &s, "xab");
    assert_string_equal(s.buf, "x");
    feed_str(d, &s, "c");
    assert_int_equal(tok_detok_stopped(d), 4); /* "bc" at 2 before "abcd" completes */
    assert_string_equal(s.buf, "xa");
    tok_detok_free(d);
}

/* Multi-byte characters split across feeds come out whole. */
static void test_utf8_split(void **state)
{
    (void)state;
    tok_detok_t *d = mk(NULL, 0);
    struct sink s = {0};
    feed(d, &s, "caf\xc3", 4);
    assert_string_equal(s.buf, "caf");
    feed(d, &s, "\xa9!", 2);
    assert_string_equal(s.buf, "caf\xc3\xa9!");
    /* a 4-byte emoji in three pieces */
    feed(d, &s, "\xf0", 1);
    feed(d, &s, "\x9f\xa6", 2);
    assert_string_equal(s.buf, "caf\xc3\xa9!");
    feed(d, &s, "\x99", 1);
    assert_string_equal(s.buf, "caf\xc3\xa9!\xf0\x9f\xa6\x99");
    /* stop string made of multi-byte characters, split mid-character */
    const char *stops[] = {"\xe2\x9c\x85 done"}; /* "✅ done" */
    tok_detok_t *e = mk(stops, 1);
    s = (struct sink){0};
    feed(e, &s, "ok \xe2\x9c", 5);
    assert_string_equal(s.buf, "ok ");
    feed(e, &s, "\x85 do", 4);
    assert_string_equal(s.buf, "ok ");
    feed(e, &s, "ne.", 3);
    assert_int_equal(s.last_rc, 1);
    assert_string_equal(s.buf, "ok ");
    tok_detok_free(e);
    tok_detok_free(d);
}

/* Invalid sequences: one U+FFFD per maximal invalid subpart. */
static void test_invalid_bytes(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        size_t n;
        const char *want;
    } cases[] = {
        {"a\xff"
         "b",
         3, "a" FFFD "b"},
        {"\x80\xbf", 2, FFFD FFFD},
        {"\xe2\x28\xa1", 3, FFFD "(" FFFD},
        {"\xc0\xaf", 2, FFFD FFFD},                   /* overlong */
        {"\xed\xa0\x80", 3, FFFD FFFD FFFD},          /* surrogate */
        {"\xf4\x90\x80\x80", 4, FFFD FFFD FFFD FFFD}, /* > U+10FFFF */
        {"\xe2\x82z", 3, FFFD "z"},                   /* truncated, then ASCII */
        {"\xf0\x9f\x98", 3, FFFD},                    /* truncated at the end */
        {"\xf5", 1, FFFD},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(cases); i++) {
        tok_detok_t *d = mk(NULL, 0);
        struct sink s = {0};
        /* byte by byte, then flush */
        for (size_t j = 0; j < cases[i].n; j++)
            feed(d, &s, cases[i].in + j, 1);
        flush(d, &s);
        if (strcmp(s.buf, cases[i].want) != 0)
            fail_msg("case %zu: got %zu bytes", i, s.n);
        tok_detok_free(d);
    }
    /* U+FFFD itself can be part of a stop string */
    const char *stops[] = {FFFD "X"};
    tok_detok_t *d = mk(stops, 1);
    struct sink s = {0};
    feed(d, &s, "ok\xff", 3);
    assert_string_equal(s.buf, "ok");
    feed(d, &s, "X", 1);
    assert_int_equal(s.last_rc, 1);
    assert_string_equal(s.buf, "ok");
    tok_detok_free(d);
}

/* ---- differential: random streams against a naive model --------------- */

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* The stream stops when a stop string first completes, so a stop lying
 * inside a longer one could end the stream before the longer one (which
 * starts earlier) completes; the pool below has no stop inside another,
 * so "earliest occurrence in the whole text" is the exact answer. */

/* Units whose validated form is known: valid characters stay, the two
 * lone invalid bytes become one U+FFFD each. */
static const char *units[] = {
    "a",    "b",   "S", "T", "O", "P", "\n", " ", "\xc3\xa9", "\xe2\x9c\x85", "\xf0\x9f\xa6\x99",
    "\xff", "\x80"};

static void test_random_vs_naive(void **state)
{
    (void)state;
    static const char *stop_pool[] = {"STOP",
                                      "\n\n",
                                      "a\xc3\xa9",
                                      "\xe2\x9c\x85"
                                      "b",
                                      "PP",
                                      FFFD "a",
                                      "b a b"};
    int iters = getenv("FOLIO_TEST_SHORT") ? 300 : 3000;
    for (int it = 0; it < iters; it++) {
        const char *stops[3];
        size_t ns = rnd() % 4;
        for (size_t i = 0; i < ns; i++)
            stops[i] = stop_pool[rnd() % FOLIO_ARRAY_LEN(stop_pool)];
        char raw[512], text[1024];
        size_t nr = 0, nt = 0, nu = 1 + rnd() % 60;
        for (size_t i = 0; i < nu; i++) {
            const char *u = units[rnd() % FOLIO_ARRAY_LEN(units)];
            size_t l = strlen(u);
            memcpy(raw + nr, u, l);
            nr += l;
            if ((uint8_t)u[0] == 0xff || (uint8_t)u[0] == 0x80) {
                memcpy(text + nt, FFFD, 3);
                nt += 3;
            } else {
                memcpy(text + nt, u, l);
                nt += l;
            }
        }
        /* naive: earliest occurrence of any stop in the whole text */
        size_t cut = nt;
        int which = -1;
        for (size_t i = 0; i < ns; i++) {
            const char *p = memmem(text, nt, stops[i], strlen(stops[i]));
            if (p && (size_t)(p - text) < cut) {
                cut = (size_t)(p - text);
                which = (int)i;
            }
        }
        /* (same-start ties go to the first listed, as in the real one) */
        tok_detok_t *d = mk(stops, ns);
        struct sink s = {0};
        for (size_t pos = 0; pos < nr;) {
            size_t c = 1 + rnd() % 5; /* (FOLIO_MIN evaluates twice) */
            c = FOLIO_MIN(c, nr - pos);
            feed(d, &s, raw + pos, c);
            pos += c;
            /* what was sent is always a prefix of the final answer */
            if (s.n > cut || memcmp(s.buf, text, s.n) != 0) {
                for (size_t i = 0; i < ns; i++)
                    print_message("stop[%zu] = '%s'\n", i, stops[i]);
                fail_msg("iteration %d: released '%.*s' not a prefix of the answer '%.*s'", it,
                         (int)s.n, s.buf, (int)cut, text);
            }
        }
        flush(d, &s);
        if (s.n != cut || memcmp(s.buf, text, cut) != 0)
            fail_msg("iteration %d: got %zu bytes, want %zu", it, s.n, cut);
        if (which >= 0) {
            int got = tok_detok_stopped(d);
            assert_true(got >= 0);
            assert_memory_equal(stops[got], stops[which], strlen(stops[which]));
        } else {
            assert_int_equal(tok_detok_stopped(d), -1);
        }
        tok_detok_free(d);
    }
}

/* ---- with a real vocabulary --------------------------------------------- */

static bool open_vocab(const char *name, gguf_file_t **f, tok_t **t)
{
    char path[4096], err[256];
    const char *env = getenv("FOLIO_TOK_DATA");
    snprintf(path, sizeof(path), "%s/%s", env && *env ? env : FOLIO_TOK_DATA, name);
    if (gguf_open(path, f, err, sizeof(err)) != 0 || tok_load(*f, t, err, sizeof(err)) != 0)
        fail_msg("%s: %s", path, err);
    return true;
}

/* SPM byte-fallback tokens of an emoji stream one byte per token; a stop
 * string ends the stream; feeding allocates nothing. */
static void test_tokens_spm(void **state)
{
    (void)state;
    gguf_file_t *f;
    tok_t *t;
    if (!open_vocab("ggml-vocab-llama-spm.gguf", &f, &t)) {
        skip();
        return;
    }
    const char *text = "Hi \xf0\x9f\xa6\x99 llama! ### tail";
    int32_t ids[64], n;
    assert_int_equal(tok_encode(t, text, strlen(text), false, false, ids, 64, &n), 0);
    const char *stops[] = {"###"};
    tok_detok_t *d;
    assert_int_equal(tok_detok_new(t, stops, 1, 0, &d), 0);
    char out[256];
    size_t no = 0;
    int rc = 0, i;
    long allocs = folio_alloc_count();
    for (i = 0; i < n && rc == 0; i++) {
        const char *p;
        size_t l;
        rc = tok_detok_feed(d, ids[i], &p, &l);
        assert_true(rc >= 0);
        /* never a partial character on the wire */
        if (l > 0)
            assert_true(((uint8_t)p[l - 1] & 0xc0) != 0xc0);
        memcpy(out + no, p, l);
        no += l;
    }
    assert_int_equal(folio_alloc_count(), allocs);
    assert_int_equal(rc, 1);
    out[no] = 0;
    /* the stream continues a prompt: the first piece keeps its space */
    assert_string_equal(out, " Hi \xf0\x9f\xa6\x99 llama! ");
    const char *p;
    size_t l;
    assert_int_equal(tok_detok_feed(d, 99999, &p, &l), -EINVAL);
    tok_detok_free(d);
    tok_free(t);
    gguf_close(f);
}

static void test_tokens_gpt2(void **state)
{
    (void)state;
    gguf_file_t *f;
    tok_t *t;
    if (!open_vocab("ggml-vocab-gpt-2.gguf", &f, &t)) {
        skip();
        return;
    }
    const char *text = "Hello world. Stop here<|endoftext|>";
    int32_t ids[64], n;
    assert_int_equal(tok_encode(t, text, strlen(text), false, true, ids, 64, &n), 0);
    assert_int_equal(ids[n - 1], tok_eos(t));
    /* no stop: everything, the control token as nothing */
    tok_detok_t *d;
    assert_int_equal(tok_detok_new(t, NULL, 0, 0, &d), 0);
    struct sink s = {0};
    for (int32_t i = 0; i < n; i++) {
        const char *p;
        size_t l;
        assert_int_equal(tok_detok_feed(d, ids[i], &p, &l), 0);
        memcpy(s.buf + s.n, p, l);
        s.n += l;
    }
    flush(d, &s);
    assert_string_equal(s.buf, "Hello world. Stop here");
    tok_detok_free(d);
    /* stop " Stop"; with TOK_DECODE_SPECIAL a control-token stop works too */
    const char *stops[] = {" Stop"};
    assert_int_equal(tok_detok_new(t, stops, 1, TOK_DECODE_SPECIAL, &d), 0);
    s = (struct sink){0};
    int rc = 0;
    for (int32_t i = 0; i < n && rc == 0; i++) {
        const char *p;
        size_t l;
        rc = tok_detok_feed(d, ids[i], &p, &l);
        memcpy(s.buf + s.n, p, l);
        s.n += l;
    }
    assert_int_equal(rc, 1);
    assert_string_equal(s.buf, "Hello world.");
    tok_detok_free(d);
    tok_free(t);
    gguf_close(f);
}

static void test_bad_args(void **state)
{
    (void)state;
    tok_detok_t *d;
    const char *stops[] = {NULL};
    assert_int_equal(tok_detok_new(NULL, stops, 1, 0, &d), -EINVAL);
    /* stop strings must be well-formed UTF-8: one starting inside a
     * character ("\x84pfe" in "\xc3\x84pfel") would cut the character */
    static const char *const bad[] = {"\x84pfe",          "a\xc3", "\xc0\xaf", "\xed\xa0\x80",
                                      "\xf4\x90\x80\x80", "\xff"};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(bad); i++)
        assert_int_equal(tok_detok_new(NULL, &bad[i], 1, 0, &d), -EINVAL);
    const char *good[] = {"\xc3\x84", "\xf0\x9f\xa6\x99", "\xef\xbf\xbd"};
    assert_int_equal(tok_detok_new(NULL, good, 3, 0, &d), 0);
    tok_detok_free(d);
    d = mk(NULL, 0);
    char big[4096] = {0};
    const char *p;
    size_t l;
    assert_int_equal(tok_detok_feed_bytes(d, big, sizeof(big), &p, &l), -E2BIG);
    assert_int_equal(tok_detok_feed(d, 1, &p, &l), -EINVAL); /* no tokenizer */
    tok_detok_free(d);
    /* allocation failures are clean */
    const char *st[] = {"a", "bb"};
    for (long k = 1; k < 20; k++) {
        folio_alloc_fail_at(k);
        d = NULL;
        int rc = tok_detok_new(NULL, st, 2, 0, &d);
        folio_alloc_fail_at(0);
        assert_true(rc == 0 || rc == -ENOMEM);
        if (rc == 0)
            tok_detok_free(d);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_split),    cmocka_unit_test(test_stop_at_start),
        cmocka_unit_test(test_several_stops), cmocka_unit_test(test_utf8_split),
        cmocka_unit_test(test_invalid_bytes), cmocka_unit_test(test_random_vs_naive),
        cmocka_unit_test(test_tokens_spm),    cmocka_unit_test(test_tokens_gpt2),
        cmocka_unit_test(test_bad_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
