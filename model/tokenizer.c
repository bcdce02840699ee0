/*
 * model/tokenizer.c — the tokenizer: vocabulary tables built from arrays
 * (tok_new; tok_load reads them from a GGUF file's tokenizer.ggml.* keys,
 * tok_new_synthetic from model/vocab_synth.c), SentencePiece-style and
 * byte-level BPE encoding, and decoding to bytes.
 *
 * What it owns.  A tok_t holds copies of everything it needs, so the GGUF
 * mapping (or the caller's arrays) may go away after tok_new:
 *
 *   arena    one allocation: for each token, its vocabulary text (NUL-ended)
 *            then its piece (the bytes it decodes to, NUL-ended)
 *   text_off/text_len, piece_off/piece_len    [n_vocab] offsets into arena
 *   enc_off/enc_len  aliases of text_* or piece_*: the token's key in "encoding space": the
 *            vocabulary text for SPM (where spaces are U+2581), the piece
 *            (raw bytes) for byte-level BPE, so BPE runs on raw bytes and
 *            never on the printable byte-to-unicode alphabet
 *   find_map  open-addressing hash: vocabulary text -> id (all tokens)
 *   enc_map   hash: encoding key -> id, only tokens that text may produce
 *            (normal, user-defined, unused; for BPE also byte-level ones)
 *   merges    hash: (left id, right id) -> rank  (BPE only)
 *   byte_tok  [256] SPM: the <0xNN> token of each byte; BPE: the token of
 *            the single byte
 *   special   ids of control/user-defined/unknown tokens, longest text
 *            first, matched in the input before the model runs
 *
 * Algorithms (both follow the reference implementation of llama.cpp, which
 * produced the test vectors in tests/test_tokenizer.c):
 *
 *   SPM: spaces -> U+2581, a U+2581 prefix when add_space_prefix is set and
 *   the fragment starts the text or follows a special token; the fragment
 *   splits into UTF-8 characters (by lead byte, cut at a byte that is no
 *   continuation byte, so invalid input still round-trips); a max
 *   heap of adjacent pairs whose concatenation is a token, keyed (score
 *   desc, left index asc), merges the best pair until none is left; stale
 *   heap entries are recognised by their byte size.  When the vocabulary
 *   allows (word_split: no token has U+2581 after another character), the
 *   loop runs word by word, which gives the same result with a heap that
 *   stays in cache.  A final symbol that is
 *   not a token becomes its bytes' <0xNN> tokens, or <unk>.
 *
 *   BPE: the pre-tokenizer named by tokenizer.ggml.pre (tok_pre_table:
 *   gpt-2, llama-bpe, qwen2, starcoder, falcon, deepseek-coder/-llm,
 *   gpt-4o and their aliases; absent -> llama.cpp's "default") splits a
 *   fragment into words with its list of PCRE2 regexes (UTF + UCP,
 *   tolerant of invalid UTF-8: bytes no regex matches form their own
 *   words); each word starts as single bytes; a min heap of adjacent pairs
 *   keyed (merge rank asc, left index asc) applies merges (ranks are float
 *   keys: exact below 2^24 merges).  With llama-bpe a word that is a token
 *   is taken whole.  An unknown name is -ENOTSUP rather than a silently
 *   different split.
 *
 * Invariants: a tok_t never changes after tok_new returns; every id in a
 * map is < n_vocab; byte_tok[] entries are -1 or valid ids.
 *
 * Threading: tok_t is read-only, so any number of threads may encode and
 * decode at once; each tok_encode call allocates its own scratch (symbol
 * arrays and heap, reused across the call's fragments, freed on return).
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "folio/tokenizer.h"

#include <errno.h>
#include <pcre2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"
#include "tok_internal.h"
#include "vocab_synth.h"

/* ---- tables ------------------------------------------------------------ */

struct tok_map {
    int32_t *slot; /* -1 = empty */
    uint32_t mask;
};

struct merge_slot {
    int32_t l, r, rank; /* l == -1: empty */
};

/* At most this many regexes in one pre-tokenizer's list. */
#define TOK_PRE_MAX_RE 6

struct tok {
    enum tok_kind kind;
    const struct tok_pre *pre; /* BPE: its row of tok_pre_table */
    int32_t n_vocab;
    char *arena;
    uint32_t *text_off, *text_len;
    uint32_t *piece_off, *piece_len;
    uint32_t *enc_off, *enc_len;
    float *scores; /* [n_vocab] */
    uint8_t *type; /* [n_vocab] TOK_TYPE_* */
    struct tok_map find_map, enc_map;
    struct merge_slot *merges;
    uint32_t merges_mask;
    int32_t byte_tok[256];
    int32_t *special; /* [n_special] */
    int32_t n_special;
    uint8_t special_first[32]; /* bitmap of the specials' first bytes */
    int32_t bos, eos, unk, pad, eot, eom;
    bool add_bos, add_eos, add_space_prefix;
    bool ignore_merges; /* a word that is a token is taken whole (pre row) */
    /* SPM: no encodable token has U+2581 after another character, so no
     * merge can cross the point before a U+2581 that follows a non-U+2581
     * character: the merge loop runs per word (same result, small heap) */
    bool word_split;
    size_t max_piece;
    pcre2_code *re[TOK_PRE_MAX_RE]; /* BPE: the pre-tokenizer's regexes, in order */
    int n_re;
};

/* ---- pre-tokenizers ------------------------------------------------------
 *
 * Byte-level BPE first cuts text into words with a list of regexes, named
 * by tokenizer.ggml.pre: each regex in turn splits every piece the
 * previous ones left, and the text between two matches stays a piece of
 * its own (so nothing is ever dropped).  One row per pre-tokenizer: the
 * names it goes by, its regexes, and whether a word that is itself a token
 * skips the merges.  The regexes are those of each model's published
 * tokenizer.json, as llama.cpp's loader maps the names (the reference that
 * produced tests/data/tokenizer); written for PCRE2 (UTF, UCP, $ only at
 * the very end of a piece).  Where the original uses (?i:'s|...) the
 * contractions are spelled [sS] etc.: the same on ASCII, and like the
 * reference it does not case-fold U+017F or U+212A.  gpt-4o keeps the
 * original's Unicode case classes (\p{Lu}\p{Lt}...\p{M}), which PCRE2 has.
 */

/* GPT-2's, also the second step of several lists below */
#define RE_GPT2         "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
/* Llama 3: letters with one leading non-letter, numbers by three */
#define RE_LLAMA3                                                                                  \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"    \
                    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Qwen2: as Llama 3 but one digit per word */
#define RE_QWEN2                                                                                   \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"         \
                    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* GPT-4o: words split before an upper-case run ("HelloWorld" -> Hello,
 * World), a contraction stays on its word, "/" joins a symbol run */
#define RE_GPT4O_UPPER "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_GPT4O_LOWER "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_GPT4O                                                                                   \
    "[^\\r\\n\\p{L}\\p{N}]?" RE_GPT4O_UPPER "*" RE_GPT4O_LOWER "+" RE_CONTRACTIONS "?"             \
    "|[^\\r\\n\\p{L}\\p{N}]?" RE_GPT4O_UPPER "+" RE_GPT4O_LOWER "*" RE_CONTRACTIONS "?"            \
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* CJK ideographs (U+4E00-U+9FA5), U+0800-U+4E00, Hangul (U+AC00-U+D7FF) */
#define RE_CJK "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"

struct tok_pre {
    const char *names[4];           /* tokenizer.ggml.pre values (NULL-padded) */
    const char *re[TOK_PRE_MAX_RE]; /* applied in order (NULL-padded) */
    bool ignore_merges;
};

static const struct tok_pre tok_pre_table[] = {
    {{"gpt-2", "mpt", "phi-2", "olmo"}, {RE_GPT2}, false},
    {{"jais"}, {RE_GPT2}, false},
    {{"llama-bpe", "llama3", "llama-v3", "falcon3"}, {RE_LLAMA3}, true},
    {{"dbrx", "smaug-bpe"}, {RE_LLAMA3}, false},
    {{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"}, {RE_QWEN2}, false},
    /* digits one by one, then GPT-2's */
    {{"starcoder", "refact", "command-r", "smollm"}, {"\\p{N}", RE_GPT2}, false},
    {{"codeshell", "exaone"}, {"\\p{N}", RE_GPT2}, false},
    /* punctuation and symbol runs first; numbers in threes last */
    {{"falcon"}, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}, false},
    /* the llama.cpp "default": as falcon, plus whole numbers */
    {{"default"}, {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, false},
    {{"deepseek-coder"}, {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}"}, false},
    /* letters as an explicit list of Latin, Greek, Cyrillic, Armenian,
     * Georgian, Cherokee... ranges (no CJK: those come after) */
    {{"deepseek-llm"},
     {"[\\r\\n]",
      "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293"
      "\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c"
      "\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5"
      "\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77"
      "\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59"
      "\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc"
      "\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107"
      "\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139"
      "\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee"
      "\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e"
      "\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f"
      "\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2"
      "\U000118a0-\U000118df\U0001e900-\U0001e943]+",
      "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+", "\\s+$", RE_CJK,
      "\\p{N}+"},
     false},
    {{"gpt-4o", "llama4"}, {RE_GPT4O}, false},
};

/* The row named name[0..len), or NULL. */
static const struct tok_pre *tok_pre_find(const char *name, size_t len)
{
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(tok_pre_table); i++)
        for (size_t j = 0; j < 4 && tok_pre_table[i].names[j]; j++)
            if (strlen(tok_pre_table[i].names[j]) == len &&
                memcmp(tok_pre_table[i].names[j], name, len) == 0)
                return &tok_pre_table[i];
    return NULL;
}

/* Compiles row's regexes into t->re (JIT when available). */
static int tok_pre_compile(tok_t *t, const struct tok_pre *row, char *err, size_t errlen)
{
    t->pre = row;
    t->ignore_merges = row->ignore_merges;
    for (int i = 0; i < TOK_PRE_MAX_RE && row->re[i]; i++) {
        int ec;
        PCRE2_SIZE eo;
        t->re[i] = pcre2_compile(
            (PCRE2_SPTR)row->re[i], PCRE2_ZERO_TERMINATED,
            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY, &ec, &eo, NULL);
        if (!t->re[i]) {
            folio_errf(err, errlen,
                       "tokenizer: pre-tokenizer '%s' regex %d failed to compile (%d at %zu)",
                       row->names[0], i, ec, (size_t)eo);
            return -EINVAL;
        }
        t->n_re = i + 1;
        (void)pcre2_jit_compile(t->re[i], PCRE2_JIT_COMPLETE); /* optional speed-up */
    }
    return 0;
}

static uint32_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ull;
    }
    return (uint32_t)(h ^ (h >> 32));
}

static uint32_t hash_pair(int32_t l, int32_t r)
{
    uint64_t h = ((uint64_t)(uint32_t)l << 32 | (uint32_t)r) * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> 32);
}

static uint32_t pow2_at_least(uint64_t n)
{
    uint32_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

static int map_init(struct tok_map *m, uint64_t n)
{
    uint32_t cap = pow2_at_least(n * 2 + 1);
    m->slot = folio_malloc(sizeof(int32_t) * cap);
    if (!m->slot)
        return -ENOMEM;
    memset(m->slot, 0xff, sizeof(int32_t) * cap);
    m->mask = cap - 1;
    return 0;
}

/* Inserts id under its key (off/len arrays); a later id with an equal key
 * replaces the earlier one. */
static void map_put(const struct tok *t, struct tok_map *m, const uint32_t *off,
                    const uint32_t *len, int32_t id)
{
    const char *k = t->arena + off[id];
    uint32_t i = hash_bytes(k, len[id]) & m->mask;
    for (;; i = (i + 1) & m->mask) {
        int32_t s = m->slot[i];
        if (s < 0 || (len[s] == len[id] && memcmp(t->arena + off[s], k, len[id]) == 0)) {
            m->slot[i] = id;
            return;
        }
    }
}

static int32_t map_get(const struct tok *t, const struct tok_map *m, const uint32_t *off,
                       const uint32_t *len, const char *k, size_t n)
{
    uint32_t i = hash_bytes(k, n) & m->mask;
    for (;; i = (i + 1) & m->mask) {
        int32_t s = m->slot[i];
        if (s < 0)
            return -1;
        if (len[s] == n && memcmp(t->arena + off[s], k, n) == 0)
            return s;
    }
}

static inline int32_t enc_get(const struct tok *t, const char *k, size_t n)
{
    return map_get(t, &t->enc_map, t->enc_off, t->enc_len, k, n);
}

static int32_t merge_get(const struct tok *t, int32_t l, int32_t r)
{
    if (!t->merges || l < 0 || r < 0)
        return -1;
    uint32_t i = hash_pair(l, r) & t->merges_mask;
    for (;; i = (i + 1) & t->merges_mask) {
        const struct merge_slot *s = &t->merges[i];
        if (s->l < 0)
            return -1;
        if (s->l == l && s->r == r)
            return s->rank;
    }
}

/* ---- UTF-8 and the byte-level alphabet ---------------------------------- */

/* Length of the UTF-8 sequence a lead byte announces (1 for stray bytes). */
static inline size_t utf8_len(uint8_t c)
{
    static const uint8_t lut[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lut[c >> 4];
}

/* Decodes one code point of s[0..n) leniently (no overlong checks): *adv
 * bytes consumed; -1 for a malformed sequence. */
static int32_t utf8_next(const char *s, size_t n, size_t *adv)
{
    const uint8_t *u = (const uint8_t *)s;
    size_t l = utf8_len(u[0]);
    if (l > n || (l == 1 && u[0] >= 0x80)) {
        *adv = 1;
        return -1;
    }
    uint32_t cp = l == 1 ? u[0] : l == 2 ? (u[0] & 0x1fu) : l == 3 ? (u[0] & 0x0fu) : (u[0] & 7u);
    for (size_t i = 1; i < l; i++) {
        if ((u[i] & 0xc0) != 0x80) {
            *adv = 1;
            return -1;
        }
        cp = cp << 6 | (u[i] & 0x3fu);
    }
    *adv = l;
    return (int32_t)cp;
}

/* GPT-2's byte -> code point table: printable Latin-1 bytes map to
 * themselves, the other 68 bytes to U+0100.. in byte order. */
static void byte_alphabet(uint16_t b2u[256])
{
    int next = 256;
    for (int b = 0; b < 256; b++) {
        bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        b2u[b] = (uint16_t)(keep ? b : next++);
    }
}

/* Inverse of the byte alphabet: inv[cp] = byte for cp < 324, else -1. */
static void byte_alphabet_inv(const uint16_t b2u[256], int16_t inv[324])
{
    for (int i = 0; i < 324; i++)
        inv[i] = -1;
    for (int b = 0; b < 256; b++)
        inv[b2u[b]] = (int16_t)b;
}

/* Decodes a byte-level BPE token text into raw bytes (dst has room for
 * len bytes: each code point yields one byte and takes >= 1).  Returns the
 * byte count, or -1 if a code point is outside the alphabet. */
static long bpe_text_to_bytes(const int16_t inv[324], const char *s, size_t len, char *dst)
{
    size_t i = 0, o = 0;
    while (i < len) {
        size_t adv;
        int32_t cp = utf8_next(s + i, len - i, &adv);
        int b = cp >= 0 && cp < 324 ? inv[cp] : -1;
        if (b < 0)
            return -1;
        dst[o++] = (char)b;
        i += adv;
    }
    return (long)o;
}

/* SPM piece: U+2581 -> ' ' (never longer than the text). */
static size_t spm_text_to_piece(const char *s, size_t len, char *dst)
{
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        if (i + 3 <= len && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
            dst[o++] = ' ';
            i += 3;
        } else {
            dst[o++] = s[i++];
        }
    }
    return o;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* "<0xNN>" -> NN, else -1. */
static int spm_byte_of(const char *s, size_t len)
{
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int hi = hexval(s[3]), lo = hexval(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* ---- loading ----------------------------------------------------------- */

void tok_free(tok_t *t)
{
    if (!t)
        return;
    folio_free(t->arena);
    folio_free(t->text_off);
    folio_free(t->text_len);
    folio_free(t->piece_off);
    folio_free(t->piece_len);
    /* enc_off/enc_len alias text_* (SPM) or piece_* (BPE) */
    folio_free(t->scores);
    folio_free(t->type);
    folio_free(t->find_map.slot);
    folio_free(t->enc_map.slot);
    folio_free(t->merges);
    folio_free(t->special);
    for (int i = 0; i < t->n_re; i++)
        pcre2_code_free(t->re[i]);
    folio_free(t);
}

static int cmp_special(const void *a, const void *b, void *arg)
{
    const struct tok *t = arg;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (t->text_len[x] != t->text_len[y])
        return t->text_len[x] > t->text_len[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* ---- construction from arrays ------------------------------------------ */

void tok_vocab_init(struct tok_vocab *v, enum tok_kind kind)
{
    memset(v, 0, sizeof(*v));
    v->kind = kind;
    v->bos = v->eos = v->unk = v->pad = v->eot = v->eom = TOK_ID_DEFAULT;
    v->add_bos = kind == TOK_SPM;
    v->add_eos = false;
    v->add_space_prefix = kind == TOK_SPM;
}

static size_t str_len(const size_t *lens, const char *const *s, int64_t i)
{
    return lens ? lens[i] : strlen(s[i]);
}

/* Types, scores, and the arena of texts and pieces (see the file's top). */
static int build_texts(tok_t *t, const struct tok_vocab *v, const int16_t inv[324], char *err,
                       size_t errlen)
{
    const int32_t n = v->n_tokens;
    const enum tok_kind kind = v->kind;
    for (int32_t i = 0; i < n; i++) {
        int32_t ty = v->types ? v->types[i] : TOK_TYPE_NORMAL;
        t->type[i] = (uint8_t)(ty >= 1 && ty <= 6 ? ty : TOK_TYPE_NORMAL);
        t->scores[i] = v->scores ? v->scores[i] : 0.0f;
    }
    /* arena: text\0 piece\0 per token; pieces are never longer than texts */
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t len = v->tokens[i] ? str_len(v->token_lens, v->tokens, i) : SIZE_MAX;
        if (len > UINT32_MAX / 4) {
            folio_errf(err, errlen, "tokenizer: token %lld unreadable", (long long)i);
            return -EINVAL;
        }
        total += 2 * len + 2;
    }
    if (total > UINT32_MAX) {
        folio_errf(err, errlen, "tokenizer: vocabulary text too large");
        return -EINVAL;
    }
    t->arena = folio_malloc(total);
    if (!t->arena)
        return -ENOMEM;
    size_t pos = 0;
    for (int32_t i = 0; i < n; i++) {
        const char *s = v->tokens[i];
        size_t len = str_len(v->token_lens, v->tokens, i);
        t->text_off[i] = (uint32_t)pos;
        t->text_len[i] = (uint32_t)len;
        memcpy(t->arena + pos, s, len);
        t->arena[pos + len] = 0;
        pos += len + 1;
        char *p = t->arena + pos;
        size_t pl;
        int ty = t->type[i];
        if (!v->types && kind == TOK_SPM && spm_byte_of(s, len) >= 0)
            t->type[i] = (uint8_t)(ty = TOK_TYPE_BYTE); /* untyped vocabularies: infer <0xNN> */
        int byte = kind == TOK_SPM && ty == TOK_TYPE_BYTE ? spm_byte_of(s, len) : -1;
        if (byte >= 0) {
            p[0] = (char)byte;
            pl = 1;
        } else if (ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_UNKNOWN) {
            memcpy(p, s, len);
            pl = len;
        } else if (kind == TOK_SPM) {
            pl = spm_text_to_piece(s, len, p);
        } else if (ty == TOK_TYPE_USER_DEFINED) {
            memcpy(p, s, len);
            pl = len;
        } else {
            long nb = bpe_text_to_bytes(inv, s, len, p);
            if (nb < 0) { /* not in the byte alphabet: take it verbatim */
                memcpy(p, s, len);
                nb = (long)len;
            }
            pl = (size_t)nb;
        }
        p[pl] = 0;
        t->piece_off[i] = (uint32_t)pos;
        t->piece_len[i] = (uint32_t)pl;
        pos += pl + 1;
        if (pl > t->max_piece)
            t->max_piece = pl;
        if (len > t->max_piece)
            t->max_piece = len; /* control tokens rendered as text */
    }
    return 0;
}

/* The two maps, word_split and byte_tok, from the arena. */
static int build_maps(tok_t *t)
{
    const int32_t nv = t->n_vocab;
    const enum tok_kind kind = t->kind;
    if (kind == TOK_SPM) {
        t->enc_off = t->text_off;
        t->enc_len = t->text_len;
    } else {
        t->enc_off = t->piece_off;
        t->enc_len = t->piece_len;
    }
    if (map_init(&t->find_map, (uint64_t)nv) != 0 || map_init(&t->enc_map, (uint64_t)nv) != 0)
        return -ENOMEM;
    for (int32_t i = 0; i < nv; i++) {
        map_put(t, &t->find_map, t->text_off, t->text_len, i);
        int ty = t->type[i];
        bool enc = ty == TOK_TYPE_NORMAL || ty == TOK_TYPE_USER_DEFINED || ty == TOK_TYPE_UNUSED ||
                   (kind == TOK_BPE && ty == TOK_TYPE_BYTE);
        if (enc && t->enc_len[i] > 0)
            map_put(t, &t->enc_map, t->enc_off, t->enc_len, i);
    }
    if (kind == TOK_SPM) {
        t->word_split = true;
        for (int32_t i = 0; i < nv && t->word_split; i++) {
            int ty = t->type[i];
            if (ty != TOK_TYPE_NORMAL && ty != TOK_TYPE_USER_DEFINED && ty != TOK_TYPE_UNUSED)
                continue;
            const char *x = t->arena + t->text_off[i];
            size_t xl = t->text_len[i];
            for (size_t p = 1; p + 3 <= xl; p++)
                if (memcmp(x + p, "\xe2\x96\x81", 3) == 0 &&
                    (p < 3 || memcmp(x + p - 3, "\xe2\x96\x81", 3) != 0)) {
                    t->word_split = false;
                    break;
                }
        }
    }
    for (int b = 0; b < 256; b++) {
        if (kind == TOK_SPM) {
            char name[8];
            snprintf(name, sizeof(name), "<0x%02X>", b);
            int32_t id = map_get(t, &t->find_map, t->text_off, t->text_len, name, 6);
            t->byte_tok[b] = id >= 0 && t->type[id] == TOK_TYPE_BYTE ? id : -1;
        } else {
            char c = (char)b;
            t->byte_tok[b] = map_get(t, &t->enc_map, t->piece_off, t->piece_len, &c, 1);
        }
    }
    return 0;
}

/* Special ids and flags; TOK_ID_DEFAULT takes the reference
 * implementation's default (SPM: <unk> 0, <s> 1, </s> 2; else none). */
static int resolve_ids(tok_t *t, const struct tok_vocab *v, char *err, size_t errlen)
{
    const int32_t nv = t->n_vocab;
    const bool spm = t->kind == TOK_SPM && nv > 1;
    const int32_t want[6] = {v->bos, v->eos, v->unk, v->pad, v->eot, v->eom};
    const int32_t dflt[6] = {spm ? 1 : -1, spm ? 2 : -1, spm ? 0 : -1, -1, -1, -1};
    int32_t *dst[6] = {&t->bos, &t->eos, &t->unk, &t->pad, &t->eot, &t->eom};
    static const char *const names[6] = {"bos", "eos", "unknown", "padding", "eot", "eom"};
    for (int i = 0; i < 6; i++) {
        int32_t id = want[i] == TOK_ID_DEFAULT ? dflt[i] : want[i];
        if (id < -1 || id >= nv) {
            folio_errf(err, errlen,
                       "tokenizer: %s token id %d is outside the vocabulary (%d tokens)", names[i],
                       (int)id, (int)nv);
            return -EINVAL;
        }
        *dst[i] = id;
    }
    t->add_bos = v->add_bos;
    t->add_eos = v->add_eos;
    t->add_space_prefix = v->add_space_prefix;
    return 0;
}

/* Control, user-defined and unknown tokens, longest text first. */
static int build_special(tok_t *t)
{
    const int32_t nv = t->n_vocab;
    int32_t ns = 0;
    for (int32_t i = 0; i < nv; i++) {
        int ty = t->type[i];
        if ((ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_USER_DEFINED || ty == TOK_TYPE_UNKNOWN) &&
            t->text_len[i] > 0)
            ns++;
    }
    t->special = folio_malloc(sizeof(int32_t) * (size_t)(ns ? ns : 1));
    if (!t->special)
        return -ENOMEM;
    for (int32_t i = 0; i < nv; i++) {
        int ty = t->type[i];
        if ((ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_USER_DEFINED || ty == TOK_TYPE_UNKNOWN) &&
            t->text_len[i] > 0) {
            t->special[t->n_special++] = i;
            uint8_t c = (uint8_t)t->arena[t->text_off[i]];
            t->special_first[c >> 3] |= (uint8_t)(1u << (c & 7));
        }
    }
    qsort_r(t->special, (size_t)t->n_special, sizeof(int32_t), cmp_special, t);
    return 0;
}

/* BPE merge rules "left right" (printable alphabet), best first. */
static int build_merges(tok_t *t, const struct tok_vocab *v, const int16_t inv[324])
{
    const int32_t n = v->n_merges;
    uint32_t cap = pow2_at_least((uint64_t)n * 2 + 1);
    t->merges = folio_malloc(sizeof(*t->merges) * cap);
    if (!t->merges)
        return -ENOMEM;
    memset(t->merges, 0xff, sizeof(*t->merges) * cap);
    t->merges_mask = cap - 1;
    char *tmp = folio_malloc(1024);
    if (!tmp)
        return -ENOMEM;
    for (int32_t i = 0; i < n; i++) {
        const char *s = v->merges[i];
        size_t len = s ? str_len(v->merge_lens, v->merges, i) : 0;
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp)
            continue; /* malformed: never applies */
        /* Parts are in the printable alphabet; look them up in bytes. */
        size_t ll = (size_t)(sp - s), rl = len - ll - 1;
        if (ll > 1024 || rl > 1024)
            continue;
        int32_t l, r;
        long nb = bpe_text_to_bytes(inv, s, ll, tmp);
        l = nb < 0 ? -1 : enc_get(t, tmp, (size_t)nb);
        nb = bpe_text_to_bytes(inv, sp + 1, rl, tmp);
        r = nb < 0 ? -1 : enc_get(t, tmp, (size_t)nb);
        if (l < 0 || r < 0)
            continue; /* a part that is no token can never be a symbol */
        uint32_t j = hash_pair(l, r) & t->merges_mask;
        while (t->merges[j].l >= 0 && !(t->merges[j].l == l && t->merges[j].r == r))
            j = (j + 1) & t->merges_mask;
        if (t->merges[j].l < 0) { /* first (best) rank wins */
            t->merges[j].l = l;
            t->merges[j].r = r;
            t->merges[j].rank = i;
        }
    }
    folio_free(tmp);
    return 0;
}

int tok_new(const struct tok_vocab *v, tok_t **out, char *err, size_t errlen)
{
    if (!v || !out)
        return -EINVAL;
    *out = NULL;
    if ((v->kind != TOK_SPM && v->kind != TOK_BPE) || v->n_tokens <= 0 ||
        v->n_tokens > INT32_MAX / 2 || !v->tokens || v->n_merges < 0 ||
        (v->n_merges > 0 && !v->merges)) {
        folio_errf(err, errlen, "tokenizer: no vocabulary (or a bad description of one)");
        return -EINVAL;
    }
    /* BPE: the pre-tokenizer row (NULL: llama.cpp's "default") */
    const struct tok_pre *pre = NULL;
    if (v->kind == TOK_BPE) {
        const char *name = v->pre ? v->pre : "default";
        if (!(pre = tok_pre_find(name, strlen(name)))) {
            folio_errf(err, errlen,
                       "tokenizer: pre-tokenizer '%.64s' (tokenizer.ggml.pre) is not supported",
                       name);
            return -ENOTSUP;
        }
    }
    const int32_t nv = v->n_tokens;
    const size_t n = (size_t)nv;
    int rc = -ENOMEM;
    tok_t *t = folio_calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->kind = v->kind;
    t->n_vocab = nv;
    t->text_off = folio_malloc(sizeof(uint32_t) * n);
    t->text_len = folio_malloc(sizeof(uint32_t) * n);
    t->piece_off = folio_malloc(sizeof(uint32_t) * n);
    t->piece_len = folio_malloc(sizeof(uint32_t) * n);
    t->scores = folio_calloc(n, sizeof(float));
    t->type = folio_malloc(n);
    if (!t->text_off || !t->text_len || !t->piece_off || !t->piece_len || !t->scores || !t->type)
        goto fail;
    uint16_t b2u[256];
    int16_t inv[324];
    byte_alphabet(b2u);
    byte_alphabet_inv(b2u, inv);
    if ((rc = build_texts(t, v, inv, err, errlen)) || (rc = build_maps(t)) ||
        (rc = resolve_ids(t, v, err, errlen)) || (rc = build_special(t)))
        goto fail;
    if (t->kind == TOK_BPE &&
        ((rc = build_merges(t, v, inv)) || (rc = tok_pre_compile(t, pre, err, errlen))))
        goto fail;
    *out = t;
    return 0;
fail:
    if (rc == -ENOMEM)
        folio_errf(err, errlen, "tokenizer: out of memory");
    tok_free(t);
    return rc;
}

int tok_new_synthetic(int32_t n_vocab, tok_t **out, char *err, size_t errlen)
{
    struct vocab_synth vs;
    int rc = vocab_synth_build(n_vocab, &vs);
    if (rc) {
        folio_errf(err, errlen,
                   "tokenizer: cannot build the synthetic vocabulary of %d tokens (%s)",
                   (int)n_vocab, strerror(-rc));
        return rc;
    }
    struct tok_vocab v;
    tok_vocab_init(&v, TOK_SPM);
    v.n_tokens = n_vocab;
    v.tokens = vs.tokens;
    v.scores = vs.scores;
    v.types = vs.types;
    v.bos = VOCAB_SYNTH_BOS_ID;
    v.eos = VOCAB_SYNTH_EOS_ID;
    v.unk = VOCAB_SYNTH_UNK_ID;
    v.add_bos = true;
    v.add_eos = false;
    rc = tok_new(&v, out, err, errlen);
    vocab_synth_free(&vs);
    return rc;
}

/* ---- construction from a GGUF file's tokenizer.ggml.* keys ------------- */

/* Reads an optional token id key: absent -> *v unchanged; present -> must
 * be < n_vocab (a value of -1 / UINT32_MAX means "none"). */
static int load_id(const gguf_file_t *f, const char *key, int32_t n_vocab, int32_t *v, char *err,
                   size_t errlen)
{
    int64_t k = gguf_find_key(f, key);
    if (k < 0)
        return 0;
    int64_t x;
    if (gguf_get_i64(f, k, &x) != 0) {
        uint64_t ux;
        if (gguf_get_u64(f, k, &ux) != 0) {
            folio_errf(err, errlen, "tokenizer: %s is not an integer", key);
            return -EINVAL;
        }
        x = ux == UINT32_MAX || ux == UINT64_MAX ? -1 : (int64_t)FOLIO_MIN(ux, (uint64_t)INT64_MAX);
    }
    if (x == (int64_t)UINT32_MAX)
        x = -1;
    if (x < -1 || x >= n_vocab) {
        folio_errf(err, errlen, "tokenizer: %s = %lld is outside the vocabulary (%d tokens)", key,
                   (long long)x, (int)n_vocab);
        return -EINVAL;
    }
    *v = (int32_t)x;
    return 0;
}

static int load_bool(const gguf_file_t *f, const char *key, bool *v, char *err, size_t errlen)
{
    int64_t k = gguf_find_key(f, key);
    if (k < 0)
        return 0;
    if (gguf_get_bool(f, k, v) != 0) {
        folio_errf(err, errlen, "tokenizer: %s is not a bool", key);
        return -EINVAL;
    }
    return 0;
}

/* Special ids and flags: keys that are absent keep tok_vocab_init's
 * defaults. */
static int load_ids(const gguf_file_t *f, struct tok_vocab *v, char *err, size_t errlen)
{
    const int32_t nv = v->n_tokens;
    int rc;
    if ((rc = load_id(f, "tokenizer.ggml.bos_token_id", nv, &v->bos, err, errlen)) ||
        (rc = load_id(f, "tokenizer.ggml.eos_token_id", nv, &v->eos, err, errlen)) ||
        (rc = load_id(f, "tokenizer.ggml.unknown_token_id", nv, &v->unk, err, errlen)) ||
        (rc = load_id(f, "tokenizer.ggml.padding_token_id", nv, &v->pad, err, errlen)) ||
        (rc = load_id(f, "tokenizer.ggml.eot_token_id", nv, &v->eot, err, errlen)) ||
        (rc = load_id(f, "tokenizer.ggml.eom_token_id", nv, &v->eom, err, errlen)) ||
        (rc = load_bool(f, "tokenizer.ggml.add_bos_token", &v->add_bos, err, errlen)) ||
        (rc = load_bool(f, "tokenizer.ggml.add_eos_token", &v->add_eos, err, errlen)))
        return rc;
    return load_bool(f, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix, err, errlen);
}

/* What tok_load reads out of the file into a struct tok_vocab: arrays of
 * pointers into the mapping (strings) and copies (numbers, unaligned in
 * the file). */
struct gguf_vocab {
    const char **tokens, **merges;
    size_t *token_lens, *merge_lens;
    int32_t *types;
    float *scores;
    char pre[65];
};

static void gguf_vocab_free(struct gguf_vocab *g)
{
    folio_free(g->tokens);
    folio_free(g->merges);
    folio_free(g->token_lens);
    folio_free(g->merge_lens);
    folio_free(g->types);
    folio_free(g->scores);
}

/* A string array key as pointers and lengths (an unreadable element is
 * NULL: the caller decides). */
static int load_strs(const gguf_file_t *f, int64_t k, uint64_t n, const char ***ps, size_t **pl)
{
    *ps = folio_malloc(sizeof(char *) * (n ? n : 1));
    *pl = folio_malloc(sizeof(size_t) * (n ? n : 1));
    if (!*ps || !*pl)
        return -ENOMEM;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        bool ok = gguf_arr_str(f, k, i, &s, &len) == 0;
        (*ps)[i] = ok ? s : NULL;
        (*pl)[i] = ok ? len : 0;
    }
    return 0;
}

/* The kind and the BPE pre-tokenizer name. */
static int load_kind(const gguf_file_t *f, struct tok_vocab *v, struct gguf_vocab *g, char *err,
                     size_t errlen)
{
    int64_t k = gguf_find_key(f, "tokenizer.ggml.model");
    const char *s;
    size_t len;
    if (k < 0 || gguf_get_str(f, k, &s, &len) != 0) {
        folio_errf(err, errlen, "tokenizer: no tokenizer.ggml.model string in the file");
        return -EINVAL;
    }
    enum tok_kind kind;
    if (len == 5 && memcmp(s, "llama", 5) == 0) {
        kind = TOK_SPM;
    } else if (len == 4 && memcmp(s, "gpt2", 4) == 0) {
        kind = TOK_BPE;
    } else {
        folio_errf(
            err, errlen,
            "tokenizer: tokenizer.ggml.model '%.*s' is not supported (only 'llama' and 'gpt2')",
            (int)FOLIO_MIN(len, 64), s);
        return -ENOTSUP;
    }
    tok_vocab_init(v, kind);
    if (kind == TOK_BPE && (k = gguf_find_key(f, "tokenizer.ggml.pre")) >= 0) {
        if (gguf_get_str(f, k, &s, &len) != 0 || len >= sizeof(g->pre) || !tok_pre_find(s, len)) {
            folio_errf(err, errlen,
                       "tokenizer: pre-tokenizer '%.*s' (tokenizer.ggml.pre) is not "
                       "supported",
                       (int)FOLIO_MIN(len, 64), gguf_get_str(f, k, &s, &len) ? "" : s);
            return -ENOTSUP;
        }
        memcpy(g->pre, s, len);
        g->pre[len] = 0;
        v->pre = g->pre;
    }
    return 0;
}

/* tokens, token types and scores */
static int load_tokens(const gguf_file_t *f, struct tok_vocab *v, struct gguf_vocab *g, char *err,
                       size_t errlen)
{
    int64_t kt = gguf_find_key(f, "tokenizer.ggml.tokens"), k;
    enum gguf_type et;
    uint64_t n, m;
    if (kt < 0 || gguf_arr_info(f, kt, &et, &n) != 0 || et != GGUF_TYPE_STRING || n == 0 ||
        n > INT32_MAX / 2) {
        folio_errf(err, errlen, "tokenizer: tokenizer.ggml.tokens missing or not a string array");
        return -EINVAL;
    }
    v->n_tokens = (int32_t)n;
    if (load_strs(f, kt, n, &g->tokens, &g->token_lens))
        return -ENOMEM;
    v->tokens = g->tokens;
    v->token_lens = g->token_lens;
    if ((k = gguf_find_key(f, "tokenizer.ggml.token_type")) >= 0) {
        if (gguf_arr_info(f, k, &et, &m) != 0 || m != n ||
            (et != GGUF_TYPE_INT32 && et != GGUF_TYPE_UINT32)) {
            folio_errf(err, errlen, "tokenizer: tokenizer.ggml.token_type is not %llu int32s",
                       (unsigned long long)n);
            return -EINVAL;
        }
        if (!(g->types = folio_malloc(sizeof(int32_t) * n)))
            return -ENOMEM;
        memcpy(g->types, gguf_arr_data(f, k), 4 * n);
        v->types = g->types;
    }
    if ((k = gguf_find_key(f, "tokenizer.ggml.scores")) >= 0) {
        if (gguf_arr_info(f, k, &et, &m) != 0 || m != n || et != GGUF_TYPE_FLOAT32) {
            folio_errf(err, errlen, "tokenizer: tokenizer.ggml.scores is not %llu float32s",
                       (unsigned long long)n);
            return -EINVAL;
        }
        if (!(g->scores = folio_malloc(sizeof(float) * n)))
            return -ENOMEM;
        memcpy(g->scores, gguf_arr_data(f, k), 4 * n);
        v->scores = g->scores;
    }
    return 0;
}

static int load_merges(const gguf_file_t *f, struct tok_vocab *v, struct gguf_vocab *g, char *err,
                       size_t errlen)
{
    int64_t k = gguf_find_key(f, "tokenizer.ggml.merges");
    if (k < 0) {
        folio_errf(err, errlen, "tokenizer: gpt2 model without tokenizer.ggml.merges");
        return -EINVAL;
    }
    enum gguf_type et;
    uint64_t n;
    if (gguf_arr_info(f, k, &et, &n) != 0 || et != GGUF_TYPE_STRING || n > INT32_MAX) {
        folio_errf(err, errlen, "tokenizer: tokenizer.ggml.merges is not an array of strings");
        return -EINVAL;
    }
    if (load_strs(f, k, n, &g->merges, &g->merge_lens))
        return -ENOMEM;
    v->n_merges = (int32_t)n;
    v->merges = g->merges;
    v->merge_lens = g->merge_lens;
    return 0;
}

int tok_load(const gguf_file_t *f, tok_t **out, char *err, size_t errlen)
{
    if (!f || !out)
        return -EINVAL;
    *out = NULL;
    struct tok_vocab v = {0};
    struct gguf_vocab g = {0};
    int rc = load_kind(f, &v, &g, err, errlen);
    if (!rc)
        rc = load_tokens(f, &v, &g, err, errlen);
    if (!rc)
        rc = load_ids(f, &v, err, errlen);
    if (!rc && v.kind == TOK_BPE)
        rc = load_merges(f, &v, &g, err, errlen);
    if (rc == -ENOMEM)
        folio_errf(err, errlen, "tokenizer: out of memory");
    if (!rc)
        rc = tok_new(&v, out, err, errlen);
    gguf_vocab_free(&g);
    return rc;
}

/* ---- queries ----------------------------------------------------------- */

enum tok_kind tok_kind(const tok_t *t)
{
    return t->kind;
}
int32_t tok_n_vocab(const tok_t *t)
{
    return t->n_vocab;
}
int32_t tok_bos(const tok_t *t)
{
    return t->bos;
}
int32_t tok_eos(const tok_t *t)
{
    return t->eos;
}
int32_t tok_unk(const tok_t *t)
{
    return t->unk;
}
int32_t tok_pad(const tok_t *t)
{
    return t->pad;
}
bool tok_add_bos(const tok_t *t)
{
    return t->add_bos;
}
bool tok_add_eos(const tok_t *t)
{
    return t->add_eos;
}
size_t tok_max_piece_len(const tok_t *t)
{
    return t->max_piece;
}

int tok_token_type(const tok_t *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab ? t->type[id] : 0;
}

bool tok_is_eog(const tok_t *t, int32_t id)
{
    return id >= 0 && (id == t->eos || id == t->eot || id == t->eom);
}

const char *tok_token_text(const tok_t *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab ? t->arena + t->text_off[id] : NULL;
}

int32_t tok_find(const tok_t *t, const char *s, size_t len)
{
    return map_get(t, &t->find_map, t->text_off, t->text_len, s, len);
}

/* ---- encoding ---------------------------------------------------------- */

struct sym {
    int32_t prev, next;
    uint32_t start, n;
    int32_t id; /* BPE: token of the symbol's bytes, or -1 */
};

struct bigram {
    float key; /* SPM: score (max first); BPE: rank (min first) */
    int32_t left, right;
    uint32_t size;
};

/* Scratch of one tok_encode call, grown as fragments need. */
struct scratch {
    char *buf;
    size_t buf_cap;
    struct sym *sym;
    struct bigram *heap;
    size_t sym_cap, heap_n, heap_cap;
    bool max_heap; /* SPM */
};

/* Output: ids beyond cap are counted, not stored. */
struct emit {
    int32_t *out;
    int32_t cap;
    int64_t n;
};

static inline void emit_id(struct emit *e, int32_t id)
{
    if (e->n < e->cap)
        e->out[e->n] = id;
    e->n++;
}

static int scratch_reserve(struct scratch *sc, size_t nbytes, size_t nsym)
{
    if (nbytes > sc->buf_cap) {
        char *b = folio_realloc(sc->buf, nbytes);
        if (!b)
            return -ENOMEM;
        sc->buf = b;
        sc->buf_cap = nbytes;
    }
    if (nsym > sc->sym_cap) {
        struct sym *s = folio_realloc(sc->sym, sizeof(*s) * nsym);
        if (!s)
            return -ENOMEM;
        sc->sym = s;
        /* each merge retires one pair and adds at most two */
        struct bigram *h = folio_realloc(sc->heap, sizeof(*h) * (3 * nsym + 1));
        if (!h)
            return -ENOMEM;
        sc->heap = h;
        sc->sym_cap = nsym;
        sc->heap_cap = 3 * nsym + 1;
    }
    return 0;
}

/* a before b in the heap order? */
static inline bool bg_before(const struct scratch *sc, const struct bigram *a,
                             const struct bigram *b)
{
    if (a->key != b->key)
        return sc->max_heap ? a->key > b->key : a->key < b->key;
    return a->left < b->left;
}

static void heap_push(struct scratch *sc, struct bigram b)
{
    size_t i = sc->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bg_before(sc, &b, &sc->heap[p]))
            break;
        sc->heap[i] = sc->heap[p];
        i = p;
    }
    sc->heap[i] = b;
}

static struct bigram heap_pop(struct scratch *sc)
{
    struct bigram top = sc->heap[0];
    struct bigram last = sc->heap[--sc->heap_n];
    size_t i = 0, n = sc->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && bg_before(sc, &sc->heap[c + 1], &sc->heap[c]))
            c++;
        if (!bg_before(sc, &sc->heap[c], &last))
            break;
        sc->heap[i] = sc->heap[c];
        i = c;
    }
    if (n > 0)
        sc->heap[i] = last;
    return top;
}

/* Emits a final symbol that is not a token: its bytes' byte tokens, or one
 * <unk> when some byte has none.  -EILSEQ when there is no <unk> either. */
static int emit_bytes(const tok_t *t, struct emit *e, const char *s, size_t n)
{
    bool all = true;
    for (size_t i = 0; i < n; i++)
        all = all && t->byte_tok[(uint8_t)s[i]] >= 0;
    if (all) {
        for (size_t i = 0; i < n; i++)
            emit_id(e, t->byte_tok[(uint8_t)s[i]]);
        return 0;
    }
    if (t->unk < 0)
        return -EILSEQ;
    emit_id(e, t->unk);
    return 0;
}

static void spm_try_pair(const tok_t *t, struct scratch *sc, int32_t l, int32_t r)
{
    if (l < 0 || r < 0)
        return;
    const struct sym *a = &sc->sym[l], *b = &sc->sym[r];
    int32_t id = enc_get(t, sc->buf + a->start, a->n + b->n);
    if (id < 0)
        return;
    heap_push(sc,
              (struct bigram){.key = t->scores[id], .left = l, .right = r, .size = a->n + b->n});
}

/* Is symbol i exactly U+2581? */
static inline bool is_mark(const struct scratch *sc, int32_t i)
{
    return sc->sym[i].n == 3 && memcmp(sc->buf + sc->sym[i].start, "\xe2\x96\x81", 3) == 0;
}

/* One raw-text fragment under the SentencePiece model. */
static int spm_fragment(const tok_t *t, struct scratch *sc, struct emit *e, const char *s, size_t n,
                        bool prefix)
{
    size_t cap = 3 * n + 3;
    int rc = scratch_reserve(sc, cap, cap);
    if (rc)
        return rc;
    size_t m = 0;
    if (prefix) {
        memcpy(sc->buf, "\xe2\x96\x81", 3);
        m = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(sc->buf + m, "\xe2\x96\x81", 3);
            m += 3;
        } else {
            sc->buf[m++] = s[i];
        }
    }
    int32_t ns = 0;
    for (size_t off = 0; off < m;) {
        /* the lead byte's length, cut short at a byte that does not
         * continue the sequence: then an invalid byte never swallows the
         * U+2581 of a following space, and every byte round-trips */
        size_t want = FOLIO_MIN(utf8_len((uint8_t)sc->buf[off]), m - off), l = 1;
        while (l < want && ((uint8_t)sc->buf[off + l] & 0xc0) == 0x80)
            l++;
        sc->sym[ns] =
            (struct sym){.prev = ns - 1, .next = -1, .start = (uint32_t)off, .n = (uint32_t)l};
        if (ns > 0)
            sc->sym[ns - 1].next = ns;
        ns++;
        off += l;
    }
    /* Chunks: with word_split, a new chunk starts at each U+2581 that
     * follows another character (see struct tok); else one chunk. */
    sc->max_heap = true;
    for (int32_t a = 0, b; a < ns; a = b) {
        b = a + 1;
        while (t->word_split && b < ns && !(is_mark(sc, b) && !is_mark(sc, b - 1)))
            b++;
        if (!t->word_split)
            b = ns;
        sc->sym[a].prev = -1;
        sc->sym[b - 1].next = -1;
        sc->heap_n = 0;
        for (int32_t i = a + 1; i < b; i++)
            spm_try_pair(t, sc, i - 1, i);
        while (sc->heap_n > 0) {
            struct bigram g = heap_pop(sc);
            struct sym *l = &sc->sym[g.left], *r = &sc->sym[g.right];
            if (l->n == 0 || r->n == 0 || l->n + r->n != g.size)
                continue; /* stale */
            l->n += r->n;
            r->n = 0;
            l->next = r->next;
            if (r->next >= 0)
                sc->sym[r->next].prev = g.left;
            spm_try_pair(t, sc, l->prev, g.left);
            spm_try_pair(t, sc, g.left, l->next);
        }
        for (int32_t i = a; i >= 0; i = sc->sym[i].next) {
            const char *txt = sc->buf + sc->sym[i].start;
            int32_t id = enc_get(t, txt, sc->sym[i].n);
            if (id >= 0)
                emit_id(e, id);
            else if ((rc = emit_bytes(t, e, txt, sc->sym[i].n)) != 0)
                return rc;
        }
    }
    return 0;
}

static void bpe_try_pair(const tok_t *t, struct scratch *sc, int32_t l, int32_t r)
{
    if (l < 0 || r < 0)
        return;
    const struct sym *a = &sc->sym[l], *b = &sc->sym[r];
    int32_t rank = merge_get(t, a->id, b->id);
    if (rank < 0)
        return;
    heap_push(sc, (struct bigram){.key = (float)rank, .left = l, .right = r, .size = a->n + b->n});
}

/* One pre-tokenized word under byte-level BPE (the bytes are at s). */
static int bpe_word(const tok_t *t, struct scratch *sc, struct emit *e, const char *s, size_t n)
{
    if (n == 0)
        return 0;
    if (t->ignore_merges) {
        int32_t id = enc_get(t, s, n);
        if (id >= 0) {
            emit_id(e, id);
            return 0;
        }
    }
    int rc = scratch_reserve(sc, 0, n);
    if (rc)
        return rc;
    int32_t ns = (int32_t)n;
    for (int32_t i = 0; i < ns; i++)
        sc->sym[i] = (struct sym){.prev = i - 1,
                                  .next = i + 1 < ns ? i + 1 : -1,
                                  .start = (uint32_t)i,
                                  .n = 1,
                                  .id = t->byte_tok[(uint8_t)s[i]]};
    sc->heap_n = 0;
    sc->max_heap = false;
    for (int32_t i = 1; i < ns; i++)
        bpe_try_pair(t, sc, i - 1, i);
    while (sc->heap_n > 0) {
        struct bigram b = heap_pop(sc);
        struct sym *l = &sc->sym[b.left], *r = &sc->sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            sc->sym[r->next].prev = b.left;
        l->id = enc_get(t, s + l->start, l->n);
        bpe_try_pair(t, sc, l->prev, b.left);
        bpe_try_pair(t, sc, b.left, l->next);
    }
    for (int32_t i = 0; i >= 0; i = sc->sym[i].next) {
        const struct sym *y = &sc->sym[i];
        if (y->id >= 0)
            emit_id(e, y->id);
        else if ((rc = emit_bytes(t, e, s + y->start, y->n)) != 0)
            return rc;
    }
    return 0;
}

/* What becomes of each word the pre-tokenizer cuts. */
struct word_sink {
    int (*word)(struct word_sink *k, const char *s, size_t n);
};

/* One raw-text fragment under byte-level BPE: regex `level` splits it
 * into its matches and the pieces between them (invalid UTF-8 included),
 * each handed to the next regex; after the last, each piece is a word. */
static int pre_split(const tok_t *t, pcre2_match_data *md, struct word_sink *k, int level,
                     const char *s, size_t n)
{
    if (n == 0)
        return 0;
    if (level == t->n_re)
        return k->word(k, s, n);
    size_t done = 0, from = 0; /* cut up to `done`; search from `from` */
    int rc;
    while (from < n) {
        int m = pcre2_match(t->re[level], (PCRE2_SPTR)s, n, from, 0, md, NULL);
        if (m < 0) {
            if (m != PCRE2_ERROR_NOMATCH)
                return -EINVAL;
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t a = ov[0], b = ov[1];
        if (b <= a) { /* an empty match cuts nothing: search on from the next character */
            for (from = a + 1; from < n && ((uint8_t)s[from] & 0xc0) == 0x80; from++)
                ;
            continue;
        }
        /* md is reused by the calls below: a and b were copied out */
        if (a > done && (rc = pre_split(t, md, k, level + 1, s + done, a - done)) != 0)
            return rc;
        if ((rc = pre_split(t, md, k, level + 1, s + a, b - a)) != 0)
            return rc;
        done = from = b;
    }
    return pre_split(t, md, k, level + 1, s + done, n - done);
}

/* The encoder's sink: each word through BPE into the output. */
struct bpe_sink {
    struct word_sink k;
    const tok_t *t;
    struct scratch *sc;
    struct emit *e;
};

static int bpe_sink_word(struct word_sink *k, const char *s, size_t n)
{
    struct bpe_sink *b = (struct bpe_sink *)k;
    return bpe_word(b->t, b->sc, b->e, s, n);
}

/* The pre-tokenizer's sink for tok__pretokenize: word end offsets. */
struct ends_sink {
    struct word_sink k;
    const char *base;
    size_t *ends, cap, n;
};

static int ends_sink_word(struct word_sink *k, const char *s, size_t n)
{
    struct ends_sink *x = (struct ends_sink *)k;
    if (x->n < x->cap)
        x->ends[x->n] = (size_t)(s - x->base) + n;
    x->n++;
    return 0;
}

int tok__pretokenize(const tok_t *t, const char *s, size_t n, size_t *ends, size_t cap,
                     size_t *count)
{
    if (t->kind != TOK_BPE)
        return -EINVAL;
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!md)
        return -ENOMEM;
    struct ends_sink x = {{ends_sink_word}, s, ends, cap, 0};
    int rc = pre_split(t, md, &x.k, 0, s, n);
    pcre2_match_data_free(md);
    *count = x.n;
    return rc ? rc : x.n > cap ? -ENOSPC : 0;
}

/* The special token starting at s[0..n) that may be matched, or -1. */
static int32_t special_at(const tok_t *t, const char *s, size_t n, bool parse_special)
{
    uint8_t c = (uint8_t)s[0];
    if (!(t->special_first[c >> 3] & (1u << (c & 7))))
        return -1;
    for (int32_t i = 0; i < t->n_special; i++) {
        int32_t id = t->special[i];
        size_t l = t->text_len[id];
        if (!parse_special && t->type[id] != TOK_TYPE_USER_DEFINED)
            continue;
        if (l <= n && memcmp(s, t->arena + t->text_off[id], l) == 0)
            return id;
    }
    return -1;
}

static int raw_fragment(const tok_t *t, struct scratch *sc, pcre2_match_data *md, struct emit *e,
                        const char *s, size_t n, bool prev_special)
{
    if (n == 0)
        return 0;
    if (t->kind == TOK_SPM)
        return spm_fragment(t, sc, e, s, n, t->add_space_prefix && prev_special);
    struct bpe_sink k = {{bpe_sink_word}, t, sc, e};
    return pre_split(t, md, &k.k, 0, s, n);
}

int tok_encode(const tok_t *t, const char *text, size_t len, bool add_special, bool parse_special,
               int32_t *out, int32_t cap, int32_t *n)
{
    if (!t || (!text && len) || (!out && cap > 0) || cap < 0 || !n)
        return -EINVAL;
    struct emit e = {.out = out, .cap = cap, .n = 0};
    struct scratch sc = {0};
    pcre2_match_data *md = NULL;
    int rc = 0;
    if (t->kind == TOK_BPE) {
        md = pcre2_match_data_create(1, NULL); /* the whole match is all we read */
        if (!md)
            return -ENOMEM;
    }
    if (add_special && t->add_bos && t->bos >= 0)
        emit_id(&e, t->bos);
    bool prev_special = true;
    size_t start = 0;
    for (size_t i = 0; i < len;) {
        int32_t id = t->n_special ? special_at(t, text + i, len - i, parse_special) : -1;
        if (id < 0) {
            i++;
            continue;
        }
        if (i > start) {
            if ((rc = raw_fragment(t, &sc, md, &e, text + start, i - start, prev_special)) != 0)
                goto done;
        }
        emit_id(&e, id);
        prev_special = true;
        i += t->text_len[id];
        start = i;
    }
    if (len > start &&
        (rc = raw_fragment(t, &sc, md, &e, text + start, len - start, prev_special)) != 0)
        goto done;
    if (add_special && t->add_eos && t->eos >= 0)
        emit_id(&e, t->eos);
    if (e.n > INT32_MAX) {
        rc = -EOVERFLOW;
        goto done;
    }
    *n = (int32_t)e.n;
    rc = e.n > cap ? -ENOSPC : 0;
done:
    folio_free(sc.buf);
    folio_free(sc.sym);
    folio_free(sc.heap);
    if (md)
        pcre2_match_data_free(md);
    return rc;
}

/* ---- decoding ---------------------------------------------------------- */

const char *tok_piece(const tok_t *t, int32_t id, unsigned flags, size_t *len)
{
    if (id < 0 || id >= t->n_vocab)
        return NULL;
    int ty = t->type[id];
    if (ty == TOK_TYPE_CONTROL && !(flags & TOK_DECODE_SPECIAL)) {
        *len = 0;
        return "";
    }
    if (ty == TOK_TYPE_UNKNOWN && !(flags & TOK_DECODE_SPECIAL)) {
        *len = 3;
        return "\xef\xbf\xbd"; /* U+FFFD */
    }
    *len = t->piece_len[id];
    return t->arena + t->piece_off[id];
}

int tok_token_to_piece(const tok_t *t, int32_t id, unsigned flags, char *buf, size_t cap, size_t *n)
{
    size_t l;
    const char *p = tok_piece(t, id, flags, &l);
    if (!p)
        return -EINVAL;
    *n = l;
    if (l > cap)
        return -ENOSPC;
    if (l > 0)
        memcpy(buf, p, l);
    return 0;
}

int tok_decode(const tok_t *t, const int32_t *ids, size_t n_ids, unsigned flags, char *buf,
               size_t cap, size_t *n)
{
    bool strip = t->kind == TOK_SPM && t->add_space_prefix && !(flags & TOK_DECODE_KEEP_SPACE);
    size_t total = 0;
    for (size_t i = 0; i < n_ids; i++) {
        size_t l;
        const char *p = tok_piece(t, ids[i], flags, &l);
        if (!p)
            return -EINVAL;
        /* the first non-empty piece after an optional leading BOS */
        if (strip && l > 0 && !(i == 0 && ids[i] == t->bos)) {
            if (p[0] == ' ') {
                p++;
                l--;
            }
            strip = false;
        }
        if (l > 0 && total + l <= cap)
            memcpy(buf + total, p, l);
        total += l;
    }
    *n = total;
    return total > cap ? -ENOSPC : 0;
}
