/*
 * tests/test_utf8.c — the one UTF-8 validator (common/utf8.c) and the
 * text path built on it (the streaming detokenizer, tok_detok, fed raw
 * bytes as the daemon feeds it) against a plain one-shot reference
 * decoder written from the standard's table: for random byte strings
 * (biased towards UTF-8 structure) cut into random pieces, the
 * concatenated stream output and folio_utf8_sanitize both equal the
 * reference, every release is valid UTF-8 (no incomplete character sent
 * early), and folio_utf8_valid agrees.  Plus known vectors (held-back
 * halves, U+FFFD for maximal subparts, flush).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "folio/common.h"
#include "folio/tokenizer.h"

/* Reference: decode the whole input at once.  At each position: a
 * well-formed sequence is copied; otherwise the longest prefix of a
 * well-formed sequence (at least one byte) becomes one U+FFFD. */
static size_t ref_decode(const unsigned char *s, size_t n, char *out)
{
    size_t o = 0, i = 0;
    while (i < n) {
        size_t best_valid = 0, prefix = 1;
        /* try lengths 1..4: longest k such that s[i..i+k) is a prefix of
         * some well-formed sequence */
        for (size_t k = 1; k <= 4 && i + k <= n; k++) {
            bool is_prefix = false, complete = false;
            /* enumerate by rules */
            unsigned char c = s[i];
            size_t len = c < 0x80                   ? 1
                         : (c >= 0xC2 && c <= 0xDF) ? 2
                         : (c >= 0xE0 && c <= 0xEF) ? 3
                         : (c >= 0xF0 && c <= 0xF4) ? 4
                                                    : 0;
            if (len && k <= len) {
                is_prefix = true;
                for (size_t j = 1; j < k; j++) {
                    unsigned char lo = 0x80, hi = 0xBF;
                    if (j == 1) {
                        if (c == 0xE0)
                            lo = 0xA0;
                        if (c == 0xED)
                            hi = 0x9F;
                        if (c == 0xF0)
                            lo = 0x90;
                        if (c == 0xF4)
                            hi = 0x8F;
                    }
                    if (s[i + j] < lo || s[i + j] > hi)
                        is_prefix = false;
                }
                complete = is_prefix && k == len;
            }
            if (!is_prefix)
                break;
            prefix = k;
            if (complete)
                best_valid = k;
        }
        if (best_valid) {
            memcpy(out + o, s + i, best_valid);
            o += best_valid;
            i += best_valid;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += prefix;
        }
    }
    return o;
}

/* Feeds one piece; appends the release to out; returns its length. */
static size_t feed(tok_detok_t *d, const char *s, size_t n, char *out)
{
    const char *t;
    size_t len;
    assert_int_equal(tok_detok_feed_bytes(d, s, n, &t, &len), 0);
    memcpy(out, t, len);
    /* whatever is released is complete valid UTF-8 */
    assert_true(folio_utf8_valid(out, len));
    return len;
}

static size_t flush(tok_detok_t *d, char *out)
{
    const char *t;
    size_t len;
    assert_int_equal(tok_detok_flush(d, &t, &len), 0);
    memcpy(out, t, len);
    return len;
}

static size_t stream_decode(const unsigned char *s, size_t n, const size_t *cuts, int ncuts,
                            char *out)
{
    tok_detok_t *d;
    assert_int_equal(tok_detok_new(NULL, NULL, 0, 0, &d), 0);
    size_t o = 0, prev = 0;
    for (int c = 0; c <= ncuts; c++) {
        size_t end = c < ncuts ? cuts[c] : n;
        o += feed(d, (const char *)s + prev, end - prev, out + o);
        prev = end;
    }
    o += flush(d, out + o);
    tok_detok_free(d);
    return o;
}

static void test_vectors(void **state)
{
    (void)state;
    tok_detok_t *d;
    assert_int_equal(tok_detok_new(NULL, NULL, 0, 0, &d), 0);
    char out[64];
    /* "é" split in two feeds: nothing, then both bytes */
    assert_int_equal(feed(d, "a\xc3", 2, out), 1);
    assert_int_equal(out[0], 'a');
    assert_int_equal(feed(d, "\xa9", 1, out), 2);
    assert_memory_equal(out, "\xc3\xa9", 2);
    /* a 4-byte emoji one byte at a time */
    const char *emoji = "\xf0\x9f\x98\x80";
    for (int i = 0; i < 3; i++)
        assert_int_equal(feed(d, emoji + i, 1, out), 0);
    assert_int_equal(feed(d, emoji + 3, 1, out), 4);
    assert_memory_equal(out, emoji, 4);
    /* invalid byte -> U+FFFD */
    assert_int_equal(feed(d, "\xff", 1, out), 3);
    assert_memory_equal(out, "\xef\xbf\xbd", 3);
    /* truncated sequence interrupted by ASCII: one U+FFFD then the ASCII */
    assert_int_equal(feed(d, "\xe2\x82", 2, out), 0);
    assert_int_equal(feed(d, "x", 1, out), 4);
    assert_memory_equal(out, "\xef\xbf\xbdx", 4);
    /* surrogate: ED A0 80 is three maximal subparts */
    assert_int_equal(feed(d, "\xed\xa0\x80", 3, out), 9);
    /* held-back bytes at the end become one U+FFFD */
    assert_int_equal(feed(d, "\xf0\x9f", 2, out), 0);
    assert_int_equal(flush(d, out), 3);
    tok_detok_free(d);
    /* the classifier itself */
    size_t len;
    assert_int_equal(folio_utf8_next((const unsigned char *)"\xe2\x82\xac", 3, &len),
                     FOLIO_UTF8_OK);
    assert_int_equal(len, 3);
    assert_int_equal(folio_utf8_next((const unsigned char *)"\xe2\x82", 2, &len), FOLIO_UTF8_SHORT);
    assert_int_equal(len, 2);
    assert_int_equal(folio_utf8_next((const unsigned char *)"\xe0\x80", 2, &len), FOLIO_UTF8_BAD);
    assert_int_equal(len, 1); /* overlong: E0 80 is not a prefix */
    assert_int_equal(folio_utf8_next((const unsigned char *)"\xf4\x8f\xbf\x41", 4, &len),
                     FOLIO_UTF8_BAD);
    assert_int_equal(len, 3); /* F4 8F BF, cut by 'A' */
    assert_int_equal(folio_utf8_next((const unsigned char *)"\xf4\x8f\xbf\xbf", 4, &len),
                     FOLIO_UTF8_OK);
    assert_int_equal(len, 4);
    assert_int_equal(folio_utf8_next((const unsigned char *)"\xf4\x90", 2, &len), FOLIO_UTF8_BAD);
    assert_int_equal(len, 1); /* above U+10FFFF */
    assert_true(folio_utf8_valid("", 0));
    assert_false(folio_utf8_valid("\xc0\xaf", 2));
    assert_false(folio_utf8_valid("\xe2\x82", 2));
}

static void test_random_against_reference(void **state)
{
    (void)state;
    const char *s = getenv("FOLIO_TEST_SHORT");
    int iters = s && *s == '1' ? 2000 : 20000;
    srand(12345);
    unsigned char buf[64];
    char ref[64 * 3 + 16], got[64 * 3 + 16];
    static const unsigned char pool[] = {'a',  ' ',  0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f,
                                         0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1,
                                         0xed, 0xef, 0xf0, 0xf1, 0xf4, 0xf5, 0xff};
    for (int it = 0; it < iters; it++) {
        size_t n = (size_t)(rand() % 40);
        for (size_t i = 0; i < n; i++)
            buf[i] = rand() % 3 ? pool[rand() % sizeof(pool)] : (unsigned char)rand();
        size_t cuts[8];
        int ncuts = n ? rand() % 8 : 0;
        for (int c = 0; c < ncuts; c++)
            cuts[c] = (size_t)rand() % (n + 1);
        for (int a = 0; a < ncuts; a++) /* sort */
            for (int b = a + 1; b < ncuts; b++)
                if (cuts[b] < cuts[a]) {
                    size_t t = cuts[a];
                    cuts[a] = cuts[b];
                    cuts[b] = t;
                }
        size_t rn = ref_decode(buf, n, ref);
        size_t gn = stream_decode(buf, n, cuts, ncuts, got);
        if (rn != gn || memcmp(ref, got, rn))
            fail_msg("iteration %d: stream output differs from the reference", it);
        assert_true(folio_utf8_valid(got, gn));
        gn = folio_utf8_sanitize((const char *)buf, n, got);
        if (rn != gn || memcmp(ref, got, rn))
            fail_msg("iteration %d: folio_utf8_sanitize differs from the reference", it);
        /* valid exactly when the reference changes nothing */
        assert_int_equal(folio_utf8_valid((const char *)buf, n), rn == n && !memcmp(ref, buf, n));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_random_against_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
