/*
 * model/vocab_synth.c — a deterministic SentencePiece-style vocabulary for
 * synthetic models.
 *
 * What it owns: nothing global; vocab_synth_build fills a struct whose
 * arrays and piece bytes belong to the caller (vocab_synth_free).
 *
 * Layout of the token list (ids):
 *
 *   0 <unk> (type 2)   1 <s>, 2 </s> (type 3)
 *   3 .. 258           byte fallback "<0x00>" .. "<0xFF>" (type 6)
 *   259 ..             normal pieces (type 1), in insertion order:
 *     1. "▁" (U+2581, the word-start marker) and every printable ASCII
 *        character, then "▁" + each of them
 *     2. for each word of the embedded list (model/vocab_synth_words.h,
 *        most frequent first): every prefix of "▁word"; then the same for
 *        "▁Word" (capitalised); then, for the most common words, every
 *        prefix of the bare word (words after punctuation or a newline
 *        carry no "▁")
 *     3. common suffixes, contractions and punctuation runs, with prefixes
 *     4. every lowercase letter bigram, then trigrams, 4-grams ... in
 *        lexicographic order until the list holds n_vocab tokens
 *
 * Scores: the i-th normal piece scores -i, so earlier (more common,
 * word-forming) pieces win SentencePiece's "merge the best-scoring adjacent
 * pair" loop over arbitrary letter n-grams.
 *
 * Reachability invariant: every multi-character normal piece is the
 * concatenation of two pieces already in the list (each chain inserts all
 * of a piece's prefixes before it, and n-grams of length L come after all
 * of length L-1).  So a listed word w always tokenizes as the single piece
 * "▁w": the piece holding the "▁" is always a prefix of "▁w", and it plus
 * its right neighbour is again a prefix, hence a piece, so merging never
 * stops before the word is whole (no piece ends in "▁", so nothing merges
 * across the word boundary).  No piece appears twice.
 *
 * Threading: pure function of its argument; reentrant.
 */
#include "vocab_synth.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "folio/buf.h"
#include "folio/common.h"
#include "vocab_synth_words.h"

#define SPACE_MARK "\xe2\x96\x81" /* U+2581 */
/* Bare (no "▁") forms are added for this many leading words of the list. */
#define N_BARE_WORDS 1200

struct builder {
    int32_t n_vocab, n;
    size_t *off;            /* [n_vocab] piece offsets in arena */
    struct folio_buf arena; /* the pieces, each NUL-terminated */
    int32_t *hash;          /* open addressing: token id + 1, 0 empty */
    uint32_t hmask;
};

static uint32_t hash_bytes(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static bool full(const struct builder *b)
{
    return b->n >= b->n_vocab || b->arena.oom;
}

/* Appends piece s[0..n) unless present or the list is full. */
static void add_n(struct builder *b, const char *s, size_t n)
{
    if (full(b) || n == 0)
        return;
    uint32_t h = hash_bytes(s, n) & b->hmask;
    for (;; h = (h + 1) & b->hmask) {
        int32_t id = b->hash[h];
        if (!id)
            break;
        const char *p = b->arena.p + b->off[id - 1];
        if (strlen(p) == n && !memcmp(p, s, n))
            return;
    }
    const size_t at = b->arena.len;
    folio_buf_append(&b->arena, s, n);
    folio_buf_append(&b->arena, "", 1); /* the piece's NUL */
    if (b->arena.oom)
        return;
    b->off[b->n] = at;
    b->hash[h] = ++b->n;
}

static void add(struct builder *b, const char *s)
{
    add_n(b, s, strlen(s));
}

/* Adds every prefix of s (ending on a UTF-8 character boundary) that is
 * at least min_len bytes long, shortest first, then s itself. */
static void add_chain(struct builder *b, const char *s, size_t min_len)
{
    size_t n = strlen(s);
    for (size_t i = 1; i <= n; i++)
        if ((i == n || ((unsigned char)s[i] & 0xc0) != 0x80) && i >= min_len)
            add_n(b, s, i);
}

/* Calls fn(word) for each word of the embedded list, in order. */
static void for_words(struct builder *b, int limit,
                      void (*fn)(struct builder *, const char *, size_t))
{
    int count = 0;
    for (size_t l = 0; l < FOLIO_ARRAY_LEN(vocab_synth_words); l++) {
        const char *p = vocab_synth_words[l];
        while (*p) {
            while (*p == ' ')
                p++;
            const char *e = p;
            while (*e && *e != ' ')
                e++;
            if (e > p) {
                if (limit >= 0 && count >= limit)
                    return;
                fn(b, p, (size_t)(e - p));
                count++;
            }
            p = e;
        }
    }
}

static void word_lower(struct builder *b, const char *w, size_t n)
{
    char buf[64];
    if (n > 40)
        return;
    memcpy(buf, SPACE_MARK, 3);
    memcpy(buf + 3, w, n);
    buf[3 + n] = 0;
    add_chain(b, buf, 1);
}

static void word_cap(struct builder *b, const char *w, size_t n)
{
    char buf[64];
    if (n > 40)
        return;
    memcpy(buf, SPACE_MARK, 3);
    memcpy(buf + 3, w, n);
    buf[3] = (char)toupper((unsigned char)buf[3]);
    buf[3 + n] = 0;
    add_chain(b, buf, 1);
}

static void word_bare(struct builder *b, const char *w, size_t n)
{
    char buf[64];
    if (n > 40)
        return;
    memcpy(buf, w, n);
    buf[n] = 0;
    add_chain(b, buf, 1);
    buf[0] = (char)toupper((unsigned char)buf[0]);
    add_chain(b, buf, 1);
}

static const char *const extra_pieces[] = {
    /* suffixes and word endings */
    "s",
    "es",
    "ed",
    "ing",
    "ly",
    "er",
    "ers",
    "est",
    "tion",
    "tions",
    "sion",
    "ment",
    "ments",
    "ness",
    "able",
    "ible",
    "ful",
    "less",
    "ity",
    "ous",
    "ive",
    "al",
    "ally",
    "ize",
    "ized",
    "ise",
    "ism",
    "ist",
    "ists",
    "ance",
    "ence",
    "ant",
    "ent",
    "ship",
    "hood",
    "ward",
    "wise",
    "like",
    "ic",
    "ical",
    "ation",
    "ations",
    "ated",
    "ating",
    "ure",
    "ary",
    "ory",
    "ery",
    /* contractions */
    "'s",
    "'t",
    "'re",
    "'ll",
    "'ve",
    "'m",
    "'d",
    "n't",
    /* punctuation runs and whitespace runs */
    "..",
    "...",
    "--",
    "---",
    "==",
    "//",
    "/*",
    "*/",
    "->",
    "=>",
    "::",
    "!=",
    "<=",
    ">=",
    "()",
    "[]",
    "{}",
    "\",",
    "\".",
    ".\"",
    ",\"",
    "),",
    ").",
    "('",
    "')",
    "\":",
    "**",
    "##",
    "###",
    SPACE_MARK SPACE_MARK,
    SPACE_MARK SPACE_MARK SPACE_MARK SPACE_MARK,
    SPACE_MARK SPACE_MARK SPACE_MARK SPACE_MARK SPACE_MARK SPACE_MARK SPACE_MARK SPACE_MARK,
    /* numbers */
    "00",
    "000",
    "10",
    "20",
    "19",
    "200",
    "201",
    "202",
    "2024",
    "2025",
    "2026",
};

/* All lowercase strings of length len, lexicographic order. */
static void add_ngrams(struct builder *b, int len)
{
    char s[8];
    int idx[8] = {0};
    for (;;) {
        if (full(b))
            return;
        for (int i = 0; i < len; i++)
            s[i] = (char)('a' + idx[i]);
        add_n(b, s, (size_t)len);
        int k = len - 1;
        while (k >= 0 && ++idx[k] == 26)
            idx[k--] = 0;
        if (k < 0)
            return;
    }
}

void vocab_synth_free(struct vocab_synth *v)
{
    if (!v)
        return;
    folio_free(v->tokens);
    folio_free(v->scores);
    folio_free(v->types);
    folio_free(v->arena);
    memset(v, 0, sizeof(*v));
}

int vocab_synth_build(int32_t n_vocab, struct vocab_synth *out)
{
    memset(out, 0, sizeof(*out));
    if (n_vocab < VOCAB_SYNTH_MIN || n_vocab > VOCAB_SYNTH_MAX)
        return -EINVAL;
    struct builder b = {.n_vocab = n_vocab};
    uint32_t hsize = 1;
    while (hsize < 2u * (uint32_t)n_vocab)
        hsize <<= 1;
    b.hmask = hsize - 1;
    b.off = folio_malloc((size_t)n_vocab * sizeof(size_t));
    b.hash = folio_calloc(hsize, sizeof(int32_t));
    folio_buf_reserve(&b.arena, (size_t)1 << 16);
    out->tokens = folio_malloc((size_t)n_vocab * sizeof(char *));
    out->scores = folio_malloc((size_t)n_vocab * sizeof(float));
    out->types = folio_malloc((size_t)n_vocab * sizeof(int32_t));
    int rc = -ENOMEM;
    if (!b.off || !b.hash || b.arena.oom || !out->tokens || !out->scores || !out->types)
        goto fail;

    add(&b, "<unk>");
    add(&b, "<s>");
    add(&b, "</s>");
    for (int i = 0; i < VOCAB_SYNTH_N_BYTES; i++) {
        char s[8];
        snprintf(s, sizeof(s), "<0x%02X>", i);
        add(&b, s);
    }
    /* 1. characters */
    add(&b, SPACE_MARK);
    for (int c = 0x21; c < 0x7f; c++) {
        char s[2] = {(char)c, 0};
        add(&b, s);
    }
    for (int c = 0x21; c < 0x7f; c++) {
        char s[5] = SPACE_MARK;
        s[3] = (char)c;
        s[4] = 0;
        add(&b, s);
    }
    /* 2. words */
    for_words(&b, -1, word_lower);
    for_words(&b, -1, word_cap);
    for_words(&b, N_BARE_WORDS, word_bare);
    /* 3. suffixes, contractions, punctuation */
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(extra_pieces); i++)
        add_chain(&b, extra_pieces[i], 1);
    /* 4. n-grams until full */
    for (int len = 2; len <= 6 && !full(&b); len++)
        add_ngrams(&b, len);
    if (b.arena.oom)
        goto fail;
    if (b.n != n_vocab) {
        rc = -EINVAL; /* cannot happen for n_vocab <= VOCAB_SYNTH_MAX */
        goto fail;
    }
    for (int32_t i = 0; i < n_vocab; i++) {
        out->tokens[i] = b.arena.p + b.off[i];
        if (i == VOCAB_SYNTH_UNK_ID) {
            out->types[i] = VOCAB_SYNTH_UNKNOWN;
            out->scores[i] = 0.0f;
        } else if (i < VOCAB_SYNTH_FIRST_NORMAL - VOCAB_SYNTH_N_BYTES) {
            out->types[i] = VOCAB_SYNTH_CONTROL;
            out->scores[i] = 0.0f;
        } else if (i < VOCAB_SYNTH_FIRST_NORMAL) {
            out->types[i] = VOCAB_SYNTH_BYTE;
            out->scores[i] = 0.0f;
        } else {
            out->types[i] = VOCAB_SYNTH_NORMAL;
            out->scores[i] = -(float)(i - VOCAB_SYNTH_FIRST_NORMAL);
        }
    }
    out->n_vocab = n_vocab;
    out->arena = folio_buf_steal(&b.arena, NULL);
    folio_free(b.off);
    folio_free(b.hash);
    return 0;
fail:
    folio_free(b.off);
    folio_free(b.hash);
    folio_buf_free(&b.arena);
    vocab_synth_free(out);
    return rc;
}
