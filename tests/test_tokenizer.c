/*
 * tests/test_tokenizer.c — the tokenizer against published test vectors,
 * against a naive reference, and on random round trips.
 *
 * Vectors: FOLIO_TOK_DATA (set by tests/meson.build to tests/data/
 * tokenizer; env FOLIO_TOK_DATA overrides) holds ggml-vocab-*.gguf with
 * .inp/.out files (46 strings each, expected ids without BOS/EOS; origin
 * and licence in that directory's README.md).  They are part of the
 * repository: a missing file fails the test.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "folio/common.h"
#include "folio/gguf.h"
#include "folio/tokenizer.h"

#ifndef FOLIO_TOK_DATA
#define FOLIO_TOK_DATA "tests/data/tokenizer"
#endif

/* env FOLIO_TOK_DATA, else the repository's tests/data/tokenizer */
static const char *data_dir(void)
{
    const char *e = getenv("FOLIO_TOK_DATA");
    return e && *e ? e : FOLIO_TOK_DATA;
}

static char *read_all(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    b[n] = 0;
    *len = (size_t)n;
    return b;
}

struct vocab {
    gguf_file_t *f;
    tok_t *t;
};

/* Opens DATA/name and builds its tokenizer (fails the test if absent). */
static bool open_vocab(const char *name, struct vocab *v)
{
    char path[4096], err[256] = "";
    snprintf(path, sizeof(path), "%s/%s", data_dir(), name);
    int rc = gguf_open(path, &v->f, err, sizeof(err));
    if (rc)
        fail_msg("gguf_open %s: %s", path, err);
    rc = tok_load(v->f, &v->t, err, sizeof(err));
    if (rc)
        fail_msg("tok_load %s: %s", path, err);
    return true;
}

static void close_vocab(struct vocab *v)
{
    tok_free(v->t);
    gguf_close(v->f);
}

/* encode -> ids (malloc'd), checking the -ENOSPC protocol on the way */
static int32_t *encode(const tok_t *t, const char *s, size_t n, bool add_special,
                       bool parse_special, int32_t *count)
{
    int32_t need = -1;
    int rc = tok_encode(t, s, n, add_special, parse_special, NULL, 0, &need);
    assert_true(rc == 0 || rc == -ENOSPC);
    assert_true(need >= 0);
    assert_int_equal(rc, need == 0 ? 0 : -ENOSPC);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(need + 1));
    int32_t got = -1;
    assert_int_equal(tok_encode(t, s, n, add_special, parse_special, ids, need, &got), 0);
    assert_int_equal(got, need);
    *count = got;
    return ids;
}

static char *decode(const tok_t *t, const int32_t *ids, int32_t n, unsigned flags, size_t *len)
{
    size_t need = 0;
    int rc = tok_decode(t, ids, (size_t)n, flags, NULL, 0, &need);
    assert_true(rc == 0 || rc == -ENOSPC);
    char *b = malloc(need + 1);
    size_t got = 0;
    assert_int_equal(tok_decode(t, ids, (size_t)n, flags, b, need, &got), 0);
    assert_int_equal(got, need);
    b[got] = 0;
    *len = got;
    return b;
}

static void print_ids(const char *what, const int32_t *ids, int32_t n)
{
    char line[2048];
    size_t o = 0;
    for (int32_t i = 0; i < n && o + 16 < sizeof(line); i++)
        o += (size_t)snprintf(line + o, sizeof(line) - o, " %d", ids[i]);
    line[FOLIO_MIN(o, sizeof(line) - 1)] = 0;
    print_message("  %s:%s\n", what, line);
}

/* Runs one vocabulary's vectors; every case must encode and decode. */
static void run_vectors(const char *name)
{
    struct vocab v;
    if (!open_vocab(name, &v)) {
        skip();
        return;
    }
    char path[4096];
    size_t ilen, olen;
    snprintf(path, sizeof(path), "%s/%s.inp", data_dir(), name);
    char *inp = read_all(path, &ilen);
    snprintf(path, sizeof(path), "%s/%s.out", data_dir(), name);
    char *outp = read_all(path, &olen);
    assert_non_null(inp);
    assert_non_null(outp);

    static const char sep[] = "\n__ggml_vocab_test__\n";
    int cases = 0, enc_ok = 0, dec_ok = 0;
    char *ip = inp, *op = outp;
    for (;;) {
        char *e = strstr(ip, sep);
        if (!e)
            break; /* the file ends with a separator */
        size_t slen = (size_t)(e - ip);
        char *nl = strchr(op, '\n');
        assert_non_null(nl);
        *nl = 0;
        int32_t want[512], nw = 0;
        for (char *q = op;;) {
            char *end;
            long x = strtol(q, &end, 10);
            if (end == q)
                break;
            want[nw++] = (int32_t)x;
            q = end;
        }
        int32_t n;
        int32_t *ids = encode(v.t, ip, slen, false, false, &n);
        cases++;
        bool eq = n == nw && memcmp(ids, want, sizeof(int32_t) * (size_t)n) == 0;
        if (eq) {
            enc_ok++;
        } else {
            print_message("%s case %d: '%.*s'\n", name, cases, (int)slen, ip);
            print_ids("want", want, nw);
            print_ids("got ", ids, n);
        }
        size_t dl;
        char *dec = decode(v.t, want, nw, 0, &dl);
        if (dl == slen && memcmp(dec, ip, slen) == 0)
            dec_ok++;
        else
            print_message("%s case %d: decodes to '%s'\n", name, cases, dec);
        free(dec);
        free(ids);
        ip = e + strlen(sep);
        op = nl + 1;
    }
    print_message("%s: %d/%d encode exactly, %d/%d decode back\n", name, enc_ok, cases, dec_ok,
                  cases);
    assert_int_equal(cases, 46);
    assert_int_equal(enc_ok, cases);
    assert_int_equal(dec_ok, cases);
    free(inp);
    free(outp);
    close_vocab(&v);
}

static void test_vectors_spm(void **state)
{
    (void)state;
    run_vectors("ggml-vocab-llama-spm.gguf");
}

static void test_vectors_gpt2(void **state)
{
    (void)state;
    run_vectors("ggml-vocab-gpt-2.gguf");
}

/* byte-level BPE with other pre-tokenizers (tokenizer.ggml.pre) */
static void test_vectors_falcon(void **state)
{
    (void)state;
    run_vectors("ggml-vocab-falcon.gguf");
}

static void test_vectors_starcoder(void **state)
{
    (void)state;
    run_vectors("ggml-vocab-starcoder.gguf");
}

static void test_vectors_deepseek_coder(void **state)
{
    (void)state;
    run_vectors("ggml-vocab-deepseek-coder.gguf");
}

/* ---- random text ------------------------------------------------------- */

static uint64_t rng_state;

static uint32_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng_state = x;
    return (uint32_t)(x >> 11);
}

static size_t put_cp(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Random text of about n code points drawn from many scripts; invalid
 * bytes too when `invalid`.  Never U+2581 (SPM's space stand-in). */
static size_t random_text(char *o, size_t n, bool invalid)
{
    static const char *words[] = {"the", "Hello", "world", "tokenizer",     " ",      "  ",
                                  "\n",  "\t",    "'s",    "'ll",           "3.14",   "12345",
                                  "!!",  "<s>",   "</s>",  "<|endoftext|>", "<0x41>", "▁"};
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rnd() % 100, cp;
        if (r < 30) {
            cp = ' ' + rnd() % 95;
        } else if (r < 40) {
            const char *w = words[rnd() % (FOLIO_ARRAY_LEN(words) - 1)];
            memcpy(o + m, w, strlen(w));
            m += strlen(w);
            continue;
        } else if (r < 47) {
            cp = 0x4e00 + rnd() % 0x5200; /* CJK */
        } else if (r < 53) {
            cp = 0x1f300 + rnd() % 0x300; /* emoji */
        } else if (r < 57) {
            cp = (rnd() & 1) ? 0x200d : 0xfe0f; /* ZWJ, VS16 */
        } else if (r < 64) {
            cp = 0x300 + rnd() % 0x70; /* combining marks */
        } else if (r < 70) {
            cp = 0x400 + rnd() % 0x100; /* Cyrillic */
        } else if (r < 74) {
            cp = 0x1780 + rnd() % 0x50; /* Khmer */
        } else if (r < 80) {
            cp = rnd() % 0x20; /* C0 controls, NUL included */
        } else if (r < 84) {
            cp = 0x80 + rnd() % 0x180; /* C1, Latin-1, Latin ext */
        } else if (r < 88) {
            cp = 0x2000 + rnd() % 0x70; /* unicode spaces, punctuation */
        } else if (r < 90) {
            cp = 0x10000 + rnd() % 0xf0000; /* astral, mostly unassigned */
            if (cp >= 0xe0000)
                cp = 0x1f600;
        } else if (r < 93) { /* a very long word */
            size_t l = 50 + rnd() % 400;
            for (size_t k = 0; k < l; k++)
                o[m++] = (char)('a' + rnd() % 26);
            continue;
        } else if (r < 95 && invalid) {
            static const unsigned char bad[] = {0x80, 0xbf, 0xc0, 0xc1, 0xe2,
                                                0xf0, 0xf5, 0xff, 0xed};
            o[m++] = (char)bad[rnd() % sizeof(bad)];
            continue;
        } else {
            cp = 'a' + rnd() % 26;
        }
        if (cp >= 0xd800 && cp < 0xe000)
            cp = 0xfffd;
        m += put_cp(o + m, cp);
    }
    return m;
}

static void roundtrip(const char *name, bool invalid)
{
    struct vocab v;
    if (!open_vocab(name, &v)) {
        skip();
        return;
    }
    /* Bytes the vocabulary has a token for (some BPE vocabularies lack a
     * few: falcon's control characters, deepseek-coder's C0 C1 F5..FF,
     * starcoder's F1).  Text holding another byte becomes <unk> where there
     * is one, else cannot be encoded (-EILSEQ); with those bytes replaced
     * it must round-trip like any text. */
    bool has_byte[256];
    int n_bytes = 0;
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        int32_t id[8], cnt;
        int rc = tok_encode(v.t, &c, 1, false, false, id, 8, &cnt);
        assert_true(rc == 0 || (rc == -EILSEQ && tok_unk(v.t) < 0));
        size_t pl = 0;
        const char *p = rc == 0 ? tok_piece(v.t, id[cnt - 1], 0, &pl) : NULL;
        has_byte[b] = p && pl >= 1 && (uint8_t)p[pl - 1] == b;
        n_bytes += has_byte[b];
    }
    rng_state = 0x9e3779b97f4a7c15ull ^ (uint64_t)invalid;
    int iters = getenv("FOLIO_TEST_SHORT") ? 200 : 1500, refused = 0;
    char *buf = malloc(64 * 1024);
    for (int it = 0; it < iters; it++) {
        size_t n = random_text(buf, 1 + rnd() % 80, invalid);
        bool covered = true;
        for (size_t i = 0; i < n; i++)
            covered = covered && has_byte[(uint8_t)buf[i]];
        int32_t cnt;
        if (!covered) {
            int rc = tok_encode(v.t, buf, n, false, false, NULL, 0, &cnt);
            assert_int_equal(rc, tok_unk(v.t) < 0 ? -EILSEQ : -ENOSPC);
            refused++;
            for (size_t i = 0; i < n; i++)
                if (!has_byte[(uint8_t)buf[i]])
                    buf[i] = 'x';
        }
        int32_t *ids = encode(v.t, buf, n, false, false, &cnt);
        size_t dl;
        char *dec = decode(v.t, ids, cnt, 0, &dl);
        if (dl != n || memcmp(dec, buf, n) != 0) {
            size_t d = 0;
            while (d < n && d < dl && dec[d] == buf[d])
                d++;
            size_t from = d > 8 ? d - 8 : 0;
            fail_msg("%s: round trip %d failed on %zu bytes (got %zu), from byte %zu: '%.*s' -> "
                     "'%.*s'",
                     name, it, n, dl, d, (int)FOLIO_MIN(n - from, 24), buf + from,
                     (int)FOLIO_MIN(dl - from, 24), dec + from);
        }
        for (int32_t i = 0; i < cnt; i++) /* plain text never yields control tokens */
            assert_int_not_equal(tok_token_type(v.t, ids[i]), TOK_TYPE_CONTROL);
        free(dec);
        free(ids);
    }
    if (n_bytes < 256)
        print_message("%s: %d bytes have no token; %d/%d random texts held one\n", name,
                      256 - n_bytes, refused, iters);
    free(buf);
    close_vocab(&v);
}

static void test_roundtrip_spm(void **state)
{
    (void)state;
    roundtrip("ggml-vocab-llama-spm.gguf", false);
    roundtrip("ggml-vocab-llama-spm.gguf", true);
}

static void test_roundtrip_gpt2(void **state)
{
    (void)state;
    roundtrip("ggml-vocab-gpt-2.gguf", false);
    roundtrip("ggml-vocab-gpt-2.gguf", true);
}

static void test_roundtrip_other_pre(void **state)
{
    (void)state;
    static const char *const names[] = {"ggml-vocab-falcon.gguf", "ggml-vocab-starcoder.gguf",
                                        "ggml-vocab-deepseek-coder.gguf"};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(names); i++) {
        roundtrip(names[i], false);
        roundtrip(names[i], true);
    }
}

/* ---- naive SPM reference ------------------------------------------------ */

/* The SentencePiece merge loop written the slow, obvious way: rescan all
 * neighbours, merge the best-scoring pair (leftmost on ties), repeat. */
static int32_t spm_naive(const tok_t *t, const float *scores, const char *s, size_t n, int32_t *out)
{
    char *esc = malloc(3 * n + 4);
    size_t m = 0;
    memcpy(esc, "\xe2\x96\x81", 3);
    m = 3;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(esc + m, "\xe2\x96\x81", 3);
            m += 3;
        } else {
            esc[m++] = s[i];
        }
    }
    size_t *start = malloc(sizeof(size_t) * (m + 1)), ns = 0;
    for (size_t i = 0; i < m;) {
        uint8_t c = (uint8_t)esc[i];
        size_t l = c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4, k = 1;
        while (k < l && i + k < m && ((uint8_t)esc[i + k] & 0xc0) == 0x80)
            k++;
        start[ns++] = i;
        i += k;
    }
    start[ns] = m;
    for (;;) {
        float best = 0;
        size_t bi = SIZE_MAX;
        for (size_t i = 0; i + 1 < ns; i++) {
            int32_t id = tok_find(t, esc + start[i], start[i + 2] - start[i]);
            int ty = tok_token_type(t, id);
            if (id < 0 ||
                !(ty == TOK_TYPE_NORMAL || ty == TOK_TYPE_USER_DEFINED || ty == TOK_TYPE_UNUSED))
                continue;
            if (bi == SIZE_MAX || scores[id] > best) {
                best = scores[id];
                bi = i;
            }
        }
        if (bi == SIZE_MAX)
            break;
        memmove(start + bi + 1, start + bi + 2, sizeof(size_t) * (ns - bi - 1));
        ns--;
    }
    int32_t k = 0;
    for (size_t i = 0; i < ns; i++) {
        int32_t id = tok_find(t, esc + start[i], start[i + 1] - start[i]);
        if (id >= 0 && tok_token_type(t, id) == TOK_TYPE_NORMAL) {
            out[k++] = id;
            continue;
        }
        for (size_t j = start[i]; j < start[i + 1]; j++) {
            char name[8];
            snprintf(name, sizeof(name), "<0x%02X>", (uint8_t)esc[j]);
            out[k++] = tok_find(t, name, 6);
        }
    }
    free(start);
    free(esc);
    return k;
}

static void test_spm_vs_naive(void **state)
{
    (void)state;
    struct vocab v;
    if (!open_vocab("ggml-vocab-llama-spm.gguf", &v)) {
        skip();
        return;
    }
    int64_t k = gguf_find_key(v.f, "tokenizer.ggml.scores");
    assert_true(k >= 0);
    const float *raw = gguf_arr_data(v.f, k);
    float *scores = malloc(sizeof(float) * (size_t)tok_n_vocab(v.t));
    memcpy(scores, raw, sizeof(float) * (size_t)tok_n_vocab(v.t));
    rng_state = 12345;
    int iters = getenv("FOLIO_TEST_SHORT") ? 100 : 600;
    char *buf = malloc(64 * 1024);
    int32_t *ref = malloc(sizeof(int32_t) * 64 * 1024 * 4);
    for (int it = 0; it < iters; it++) {
        size_t n = random_text(buf, 1 + rnd() % 40, true);
        int32_t cnt;
        int32_t *ids = encode(v.t, buf, n, false, false, &cnt);
        int32_t rn = spm_naive(v.t, scores, buf, n, ref);
        if (rn != cnt || memcmp(ref, ids, sizeof(int32_t) * (size_t)cnt) != 0) {
            print_ids("naive", ref, rn);
            print_ids("fast ", ids, cnt);
            fail_msg("SPM differs from the naive merge on '%.*s'", (int)n, buf);
        }
        free(ids);
    }
    free(ref);
    free(buf);
    free(scores);
    close_vocab(&v);
}

/* ---- naive byte-level BPE reference -------------------------------------- */

/* GPT-2's printable alphabet, built independently of model/tokenizer.c. */
static void alphabet(uint32_t b2u[256])
{
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; b++) {
        bool keep = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        b2u[b] = keep ? b : next++;
    }
}

struct mrule {
    char *l, *r;
    size_t ll, rl;
    int rank;
};

static int mrule_cmp(const void *a, const void *b)
{
    const struct mrule *x = a, *y = b;
    if (x->ll != y->ll)
        return x->ll < y->ll ? -1 : 1;
    if (x->rl != y->rl)
        return x->rl < y->rl ? -1 : 1;
    int c = memcmp(x->l, y->l, x->ll);
    if (c)
        return c;
    c = memcmp(x->r, y->r, x->rl);
    if (c)
        return c;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* printable-alphabet text -> bytes (every code point is one byte) */
static size_t unmap(const uint32_t b2u[256], const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint8_t c = (uint8_t)s[i];
        uint32_t cp;
        size_t l = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
        cp = l == 1 ? c : l == 2 ? (c & 0x1fu) : l == 3 ? (c & 0xfu) : (c & 7u);
        for (size_t k = 1; k < l; k++)
            cp = cp << 6 | ((uint8_t)s[i + k] & 0x3fu);
        int b = -1;
        for (int j = 0; j < 256; j++)
            if (b2u[j] == cp)
                b = j;
        assert_true(b >= 0);
        out[o++] = (char)b;
        i += l;
    }
    return o;
}

static size_t map_text(const uint32_t b2u[256], const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++)
        o += put_cp(out + o, b2u[(uint8_t)s[i]]);
    return o;
}

struct bpe_ref {
    uint32_t b2u[256];
    struct mrule *rules;
    size_t n_rules;
    pcre2_code *re;
};

static void bpe_ref_init(struct bpe_ref *r, const gguf_file_t *f)
{
    alphabet(r->b2u);
    int64_t k = gguf_find_key(f, "tokenizer.ggml.merges");
    enum gguf_type et;
    uint64_t n;
    assert_int_equal(gguf_arr_info(f, k, &et, &n), 0);
    r->rules = calloc(n, sizeof(*r->rules));
    r->n_rules = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        assert_int_equal(gguf_arr_str(f, k, i, &s, &len), 0);
        const char *sp = memchr(s + 1, ' ', len - 1);
        assert_non_null(sp);
        struct mrule *m = &r->rules[r->n_rules++];
        m->l = malloc(len);
        m->r = malloc(len);
        m->ll = unmap(r->b2u, s, (size_t)(sp - s), m->l);
        m->rl = unmap(r->b2u, sp + 1, len - (size_t)(sp - s) - 1, m->r);
        m->rank = (int)i;
    }
    qsort(r->rules, r->n_rules, sizeof(*r->rules), mrule_cmp);
    static const char pat[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+"
                              "|\\s+(?!\\S)|\\s+";
    int ec;
    PCRE2_SIZE eo;
    r->re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
    assert_non_null(r->re);
}

static void bpe_ref_free(struct bpe_ref *r)
{
    for (size_t i = 0; i < r->n_rules; i++) {
        free(r->rules[i].l);
        free(r->rules[i].r);
    }
    free(r->rules);
    pcre2_code_free(r->re);
}

/* rank of merging l and r, or -1 (lowest rank among duplicates) */
static int ref_rank(const struct bpe_ref *r, const char *l, size_t ll, const char *rr, size_t rl)
{
    struct mrule key = {(char *)l, (char *)rr, ll, rl, -1};
    size_t lo = 0, hi = r->n_rules;
    while (lo < hi) { /* first rule >= key (rank -1 sorts before all) */
        size_t mid = (lo + hi) / 2;
        if (mrule_cmp(&r->rules[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < r->n_rules) {
        const struct mrule *m = &r->rules[lo];
        if (m->ll == ll && m->rl == rl && !memcmp(m->l, l, ll) && !memcmp(m->r, rr, rl))
            return m->rank;
    }
    return -1;
}

/* The merge loop the slow way: rescan, merge the lowest rank (leftmost). */
static void ref_word(const struct bpe_ref *r, const tok_t *t, const char *w, size_t n, int32_t *out,
                     int32_t *k)
{
    size_t *st = malloc(sizeof(size_t) * (n + 1)), ns = n;
    for (size_t i = 0; i <= n; i++)
        st[i] = i;
    for (;;) {
        int best = -1;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < ns; i++) {
            int rk =
                ref_rank(r, w + st[i], st[i + 1] - st[i], w + st[i + 1], st[i + 2] - st[i + 1]);
            if (rk >= 0 && (best < 0 || rk < best)) {
                best = rk;
                bi = i;
            }
        }
        if (best < 0)
            break;
        memmove(st + bi + 1, st + bi + 2, sizeof(size_t) * (ns - bi - 1));
        ns--;
    }
    char txt[4096];
    for (size_t i = 0; i < ns; i++) {
        size_t tl = map_text(r->b2u, w + st[i], st[i + 1] - st[i], txt);
        int32_t id = tok_find(t, txt, tl);
        if (id >= 0) {
            out[(*k)++] = id;
            continue;
        }
        for (size_t j = st[i]; j < st[i + 1]; j++) {
            tl = map_text(r->b2u, w + j, 1, txt);
            out[(*k)++] = tok_find(t, txt, tl);
        }
    }
    free(st);
}

static int32_t bpe_naive(const struct bpe_ref *r, const tok_t *t, const char *s, size_t n,
                         int32_t *out)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(r->re, NULL);
    int32_t k = 0;
    size_t pos = 0;
    while (pos < n) {
        int m = pcre2_match(r->re, (PCRE2_SPTR)s, n, pos, 0, md, NULL);
        if (m < 0) {
            ref_word(r, t, s + pos, n - pos, out, &k);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[0] > pos)
            ref_word(r, t, s + pos, ov[0] - pos, out, &k);
        ref_word(r, t, s + ov[0], ov[1] - ov[0], out, &k);
        pos = ov[1];
    }
    pcre2_match_data_free(md);
    return k;
}

static void test_gpt2_vs_naive(void **state)
{
    (void)state;
    struct vocab v;
    if (!open_vocab("ggml-vocab-gpt-2.gguf", &v)) {
        skip();
        return;
    }
    struct bpe_ref r;
    bpe_ref_init(&r, v.f);
    rng_state = 777;
    int iters = getenv("FOLIO_TEST_SHORT") ? 60 : 400;
    char *buf = malloc(64 * 1024);
    int32_t *ref = malloc(sizeof(int32_t) * 64 * 1024);
    for (int it = 0; it < iters; it++) {
        size_t n = random_text(buf, 1 + rnd() % 40, true);
        int32_t cnt;
        int32_t *ids = encode(v.t, buf, n, false, false, &cnt);
        int32_t rn = bpe_naive(&r, v.t, buf, n, ref);
        if (rn != cnt || memcmp(ref, ids, sizeof(int32_t) * (size_t)cnt) != 0) {
            print_ids("naive", ref, rn);
            print_ids("fast ", ids, cnt);
            fail_msg("BPE differs from the naive merge on '%.*s'", (int)n, buf);
        }
        free(ids);
    }
    free(ref);
    free(buf);
    bpe_ref_free(&r);
    close_vocab(&v);
}

/* ---- special tokens, BOS/EOS, buffers ----------------------------------- */

static void test_special_spm(void **state)
{
    (void)state;
    struct vocab v;
    if (!open_vocab("ggml-vocab-llama-spm.gguf", &v)) {
        skip();
        return;
    }
    const tok_t *t = v.t;
    assert_int_equal(tok_kind(t), TOK_SPM);
    assert_int_equal(tok_n_vocab(t), 32000);
    assert_int_equal(tok_bos(t), 1);
    assert_int_equal(tok_eos(t), 2);
    assert_true(tok_is_eog(t, 2));
    assert_false(tok_is_eog(t, 1));
    assert_string_equal(tok_token_text(t, 1), "<s>");

    const char *s = "<s>Hello</s> world";
    int32_t n, *ids;
    /* parse_special: <s> and </s> are the control tokens; a space prefix
     * follows each special token */
    ids = encode(t, s, strlen(s), true, true, &n);
    int32_t hello = tok_find(t, "\xe2\x96\x81Hello", 8);
    int32_t world = tok_find(t, "\xe2\x96\x81world", 8);
    assert_true(hello > 0 && world > 0);
    int32_t space = tok_find(t, "\xe2\x96\x81", 3);
    int32_t want[] = {1, 1, hello, 2, space, world}; /* " world" got a prefix too */
    assert_int_equal(n, 6);
    assert_memory_equal(ids, want, sizeof(want));
    size_t dl;
    char *d = decode(t, ids, n, 0, &dl);
    assert_string_equal(d, "Hello  world"); /* controls vanish, first prefix stripped */
    free(d);
    d = decode(t, ids, n, TOK_DECODE_SPECIAL, &dl);
    assert_string_equal(d, "<s><s> Hello</s>  world");
    free(d);
    free(ids);
    /* without parse_special they are plain text */
    ids = encode(t, s, strlen(s), false, false, &n);
    for (int32_t i = 0; i < n; i++)
        assert_true(ids[i] != 1 && ids[i] != 2);
    d = decode(t, ids, n, 0, &dl);
    assert_string_equal(d, s);
    free(d);
    free(ids);
    /* add_special on empty text: just BOS (add_eos is false) */
    ids = encode(t, "", 0, true, false, &n);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 1);
    free(ids);
    /* -ENOSPC keeps the first cap ids and reports the total */
    int32_t small[2], got;
    assert_int_equal(tok_encode(t, "Hello world again", 17, true, false, small, 2, &got), -ENOSPC);
    assert_true(got > 2);
    assert_int_equal(small[0], 1);
    assert_int_equal(small[1], hello);
    /* pieces */
    char pb[16];
    size_t pl;
    assert_int_equal(tok_token_to_piece(t, hello, 0, pb, sizeof(pb), &pl), 0);
    assert_int_equal(pl, 6);
    assert_memory_equal(pb, " Hello", 6);
    assert_int_equal(tok_token_to_piece(t, hello, 0, pb, 3, &pl), -ENOSPC);
    assert_int_equal(pl, 6);
    assert_int_equal(tok_token_to_piece(t, 13, 0, pb, sizeof(pb), &pl), 0); /* <0x0A> */
    assert_int_equal(pl, 1);
    assert_int_equal(pb[0], '\n');
    assert_int_equal(tok_token_to_piece(t, 2, 0, pb, sizeof(pb), &pl), 0);
    assert_int_equal(pl, 0);
    assert_int_equal(tok_token_to_piece(t, 32000, 0, pb, sizeof(pb), &pl), -EINVAL);
    int32_t bad = -5;
    assert_int_equal(tok_decode(t, &bad, 1, 0, pb, sizeof(pb), &pl), -EINVAL);
    close_vocab(&v);
}

static void test_special_gpt2(void **state)
{
    (void)state;
    struct vocab v;
    if (!open_vocab("ggml-vocab-gpt-2.gguf", &v)) {
        skip();
        return;
    }
    const tok_t *t = v.t;
    assert_int_equal(tok_kind(t), TOK_BPE);
    assert_int_equal(tok_eos(t), 50256);
    const char *s = "Hi<|endoftext|>there";
    int32_t n, *ids = encode(t, s, strlen(s), false, true, &n);
    assert_int_equal(n, 3);
    assert_int_equal(ids[1], 50256);
    size_t dl;
    char *d = decode(t, ids, n, TOK_DECODE_SPECIAL, &dl);
    assert_string_equal(d, s);
    free(d);
    d = decode(t, ids, n, 0, &dl);
    assert_string_equal(d, "Hithere");
    free(d);
    free(ids);
    ids = encode(t, s, strlen(s), false, false, &n);
    assert_true(n > 3);
    for (int32_t i = 0; i < n; i++)
        assert_int_not_equal(ids[i], 50256);
    free(ids);
    /* gpt2 adds no BOS and keeps leading spaces */
    ids = encode(t, " x", 2, true, false, &n);
    d = decode(t, ids, n, 0, &dl);
    assert_string_equal(d, " x");
    free(d);
    free(ids);
    close_vocab(&v);
}

/* ---- threads ------------------------------------------------------------ */

struct thr_arg {
    const tok_t *t;
    char **texts;
    size_t *lens;
    int32_t **want;
    int32_t *nwant;
    int n, bad;
};

static void *thr_main(void *p)
{
    struct thr_arg *a = p;
    int32_t ids[4096], n;
    for (int rep = 0; rep < 3; rep++)
        for (int i = 0; i < a->n; i++) {
            if (tok_encode(a->t, a->texts[i], a->lens[i], true, true, ids, 4096, &n) != 0 ||
                n != a->nwant[i] || memcmp(ids, a->want[i], sizeof(int32_t) * (size_t)n) != 0)
                a->bad++;
        }
    return NULL;
}

/* A tok_t is read-only: two threads encoding at once get the ids one
 * thread gets alone. */
static void test_threads(void **state)
{
    (void)state;
    static const char *names[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"};
    for (size_t v = 0; v < 2; v++) {
        struct vocab voc;
        if (!open_vocab(names[v], &voc)) {
            skip();
            return;
        }
        enum { N = 64 };
        char *texts[N];
        size_t lens[N];
        int32_t *want[N], nwant[N];
        rng_state = 4242 + v;
        for (int i = 0; i < N; i++) {
            texts[i] = malloc(16 * 1024);
            lens[i] = random_text(texts[i], 1 + rnd() % 60, true);
            want[i] = encode(voc.t, texts[i], lens[i], true, true, &nwant[i]);
        }
        struct thr_arg a[2];
        pthread_t th[2];
        for (int k = 0; k < 2; k++) {
            a[k] = (struct thr_arg){voc.t, texts, lens, want, nwant, N, 0};
            assert_int_equal(pthread_create(&th[k], NULL, thr_main, &a[k]), 0);
        }
        for (int k = 0; k < 2; k++) {
            pthread_join(th[k], NULL);
            assert_int_equal(a[k].bad, 0);
        }
        for (int i = 0; i < N; i++) {
            free(texts[i]);
            free(want[i]);
        }
        close_vocab(&voc);
    }
}

/* Every allocation tok_load and tok_encode make can fail cleanly: -ENOMEM,
 * nothing leaked (ASan build), and the next attempt works. */
static void alloc_sweep(const char *name)
{
    struct vocab v;
    if (!open_vocab(name, &v)) {
        skip();
        return;
    }
    int fails = 0;
    for (long k = 1;; k++) {
        tok_t *t = NULL;
        folio_alloc_fail_at(k);
        int rc = tok_load(v.f, &t, NULL, 0);
        folio_alloc_fail_at(0);
        if (rc == 0) {
            tok_free(t);
            break;
        }
        assert_int_equal(rc, -ENOMEM);
        assert_null(t);
        fails++;
    }
    assert_true(fails >= 5);
    const char *text = "Hello world, a longer sentence with 🦙 in it.";
    int32_t ids[256], n;
    for (long k = 1;; k++) {
        folio_alloc_fail_at(k);
        int rc = tok_encode(v.t, text, strlen(text), true, true, ids, 256, &n);
        folio_alloc_fail_at(0);
        if (rc == 0)
            break;
        assert_int_equal(rc, -ENOMEM);
    }
    close_vocab(&v);
}

static void test_alloc_failures(void **state)
{
    (void)state;
    alloc_sweep("ggml-vocab-llama-spm.gguf");
    alloc_sweep("ggml-vocab-gpt-2.gguf");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors_spm),
        cmocka_unit_test(test_vectors_gpt2),
        cmocka_unit_test(test_vectors_falcon),
        cmocka_unit_test(test_vectors_starcoder),
        cmocka_unit_test(test_vectors_deepseek_coder),
        cmocka_unit_test(test_roundtrip_spm),
        cmocka_unit_test(test_roundtrip_gpt2),
        cmocka_unit_test(test_roundtrip_other_pre),
        cmocka_unit_test(test_spm_vs_naive),
        cmocka_unit_test(test_gpt2_vs_naive),
        cmocka_unit_test(test_special_spm),
        cmocka_unit_test(test_special_gpt2),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
