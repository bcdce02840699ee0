/*
 * tests/fuzz/fuzz_grammar.c — libFuzzer harness: arbitrary bytes as a
 * grammar text (the `grammar` request field) or as a JSON Schema
 * (response_format, tool parameters), then through the matcher.
 *
 * Input: byte 0 bit 0 picks grammar (0) or JSON Schema (1); the rest is
 * the text.  When it compiles, a walk over a small vocabulary (every
 * single byte, some multi-byte pieces, one end-of-generation id) takes
 * the first allowed token each step, up to 64 steps, and checks on every
 * step (aborting, a libFuzzer finding, when false):
 *   - the fast mask equals the reference for every token;
 *   - the accepted text is always a valid prefix (gram_match_text >= 0),
 *     and complete when the matcher says it is.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/grammar.h"
#include "folio/json_schema.h"
#include "fuzz_util.h"

#define NV 300

static gram_vocab_t *vocab;
static char pieces[NV][4];
static size_t lens[NV];

static void init(void)
{
    if (vocab)
        return;
    static const char *multi[] = {"{\"", "\":",      "\", ", "ab",  "true", "nul",
                                  "12",  "\xc3\xa9", "[]",   "\"}", " \"",  ".5e"};
    bool eog[NV] = {0};
    const char *p[NV];
    for (int i = 0; i < NV; i++) {
        if (i < 256) {
            pieces[i][0] = (char)i;
            lens[i] = 1;
        } else if (i - 256 < (int)(sizeof(multi) / sizeof(multi[0]))) {
            lens[i] = strlen(multi[i - 256]);
            memcpy(pieces[i], multi[i - 256], lens[i] > 4 ? 4 : lens[i]);
            if (lens[i] > 4)
                lens[i] = 4;
        } else
            lens[i] = 0;
        p[i] = pieces[i];
    }
    eog[NV - 1] = true;
    CHECK(!gram_vocab_new(NV, p, lens, eog, &vocab));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init();
    if (size < 1)
        return 0;
    char err[256];
    char *src = NULL;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (data[0] & 1) {
        if (json_schema_to_gbnf(text, len, &src, err, sizeof(err)))
            return 0;
        text = src;
        len = strlen(src);
    }
    gram_t *g = NULL;
    int rc = gram_compile(text, len, &g, err, sizeof(err));
    free(src);
    if (rc)
        return 0;
    gram_matcher_t *m;
    CHECK(!gram_matcher_new(g, &m));
    uint64_t w[(NV + 63) / 64];
    char out[64 * 4 + 1];
    size_t n = 0;
    for (int step = 0; step < 64; step++) {
        int32_t budget = 64 - step;
        int k = gram_matcher_mask(m, vocab, budget, w);
        CHECK(k >= 0);
        /* the reference's answers at this budget, asked once per token
         * (it is slow: a whole walk per token) */
        bool ref[NV];
        int n_ref = 0;
        for (int32_t i = 0; i < NV; i++) {
            ref[i] = gram_ref_allows(m, vocab, budget, i);
            n_ref += i < NV - 1 && ref[i];
        }
        int32_t b = n_ref == 0 && !gram_matcher_accepting(m) ? GRAM_NO_BUDGET : budget;
        if (b != budget)
            for (int32_t i = 0; i < NV; i++)
                ref[i] = gram_ref_allows(m, vocab, b, i);
        int32_t first = -1;
        for (int32_t i = 0; i < NV; i++) {
            bool fast = w[i / 64] >> (i % 64) & 1;
            CHECK(fast == ref[i]);
            if (fast && first < 0 && i != NV - 1)
                first = i;
        }
        if (first < 0)
            break;
        CHECK(!gram_matcher_accept(m, vocab, first));
        memcpy(out + n, pieces[first], lens[first]);
        n += lens[first];
        int r = gram_match_text(g, out, n);
        CHECK(r >= 0 && gram_matcher_accepting(m) == (r == 1));
    }
    gram_matcher_free(m);
    gram_unref(g);
    return 0;
}
