/*
 * model/grammar.c — GBNF-like grammars compiled to a byte-level pushdown
 * automaton, and the token masks of constrained decoding (folio/grammar.h).
 *
 * What it owns: a gram_t (compiled rules + the lazily built state cache),
 * gram_vocab_t (the vocabulary's bytes, sorted), gram_matcher_t (one
 * sequence's position).
 *
 * Compiled rules, one flat array of elements:
 *
 *   elems:  [SET s0][REF r2][END] [SET s1][END] ...   one run per alternative
 *   rule r: alternatives alt_start[rule_alt[r] .. rule_alt[r + 1])
 *   sets:   256-bit byte sets
 *
 * Repetition, options, groups, `.` and negated classes are desugared into
 * extra (anonymous) rules at parse time, so the automaton knows only
 * three element kinds.  minrest[p] = the fewest bytes that complete the
 * alternative from element p on (used for the token budget).
 *
 * A state is a set of stacks; a stack is the list of element positions
 * still to match, bottom (root's continuation) first, whose top is always
 * a SET (stacks are expanded through REF and END eagerly; a REF followed
 * by END is a tail call, so right recursion such as x* keeps its depth).
 * An empty stack means the document may end here.  Encoding, uint32 words:
 *
 *   [n_stacks] { [depth] [pos_0 ... pos_depth-1] } ...   stacks sorted, unique
 *
 * Advancing by a byte: every stack whose top set holds the byte moves its
 * top one element on and is re-expanded; no stack left = dead.  Bounds:
 * GRAM_MAX_DEPTH frames per stack, GRAM_MAX_STACKS stacks per state and
 * GRAM_MAX_EXPAND expansion steps per byte (a grammar that exceeds them
 * loses those paths; JSON never comes close), so a hostile grammar costs
 * bounded time per byte; texts are at most GRAM_MAX_SRC bytes and groups
 * GRAM_MAX_NEST deep (the parser recurses on them).
 *
 * The cache (engine-thread only, see the header): states interned by
 * their encoding into a hash table; each has a lazily filled 256-entry
 * transition row (-2 unknown, -1 dead, else a state id), its shortest
 * completion `mc`, and a lazily computed token mask with `mask_mc`, the
 * largest mc among the states its allowed tokens lead to.  A mask comes
 * from one pass over the vocabulary sorted by bytes: the state after each
 * prefix is kept per depth and reused while the next token shares the
 * prefix (lcp), and a dead prefix skips every token that starts with it.
 * When the cache outgrows GRAM_CACHE_BYTES it is dropped whole (between
 * calls, never during a walk); matchers keep their own encoding and
 * re-intern it (`gen` tells them).
 *
 * The reference (gram_ref_allows, gram_match_text) advances encodings
 * directly, never touching the cache: the tests compare the two.
 */
#include "folio/grammar.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"

#define GRAM_MAX_DEPTH   256
#define GRAM_MAX_STACKS  64
#define GRAM_MAX_REPEAT  1000
#define GRAM_MAX_NEST    64         /* nested groups in a grammar text */
#define GRAM_MAX_EXPAND  20000      /* expansion steps per advanced byte */
#define GRAM_MAX_SRC     (1u << 20) /* grammar text bytes */
#define GRAM_CACHE_BYTES (32u << 20)
#define GRAM_MAX_STATES  65536
#define MC_INF           0x3fffffff

enum { E_END = 0, E_SET = 1, E_REF = 2 };
#define E_TYPE(e)    ((e) >> 28)
#define E_ARG(e)     ((e)&0x0fffffffu)
#define E_MAKE(t, a) (((uint32_t)(t) << 28) | (uint32_t)(a))

struct gstate {
    uint32_t off, len; /* encoding in g->arena */
    uint32_t hash;
    int32_t mc;
    int32_t *trans;  /* [256] or NULL */
    uint64_t *mask;  /* [words] or NULL */
    int32_t mask_mc; /* max mc after an allowed token */
    int32_t mask_n;  /* allowed non-EOG tokens */
};

struct gram {
    int refs;
    /* compiled rules */
    uint32_t *elems;
    int32_t n_elems;
    int32_t *minrest; /* [n_elems] */
    int32_t *alt_start;
    int32_t *rule_alt; /* [n_rules + 1] */
    int32_t n_rules;
    uint64_t (*sets)[4];
    int32_t n_sets;
    uint32_t *start; /* the initial state's encoding */
    uint32_t start_len;
    /* cache */
    struct gstate *st;
    int32_t n_st, cap_st;
    int32_t *htab; /* state id + 1, 0 empty */
    uint32_t hcap;
    uint32_t *arena;
    size_t arena_len, arena_cap;
    size_t bytes;
    uint32_t gen;
    const gram_vocab_t *mask_vocab; /* masks are for this vocabulary */
};

struct gram_vocab {
    int32_t n_vocab, n_sorted, max_len;
    int32_t *ids;     /* [n_sorted] token ids sorted by bytes */
    uint32_t *off;    /* [n_sorted] into bytes */
    uint16_t *len;    /* [n_sorted] */
    uint16_t *lcp;    /* [n_sorted] with the previous entry */
    uint8_t *eog;     /* [n_vocab] */
    int32_t *tok_pos; /* [n_vocab] -> sorted index, -1: empty piece */
    char *bytes;
};

struct gram_matcher {
    gram_t *g;
    uint32_t *enc;
    uint32_t enc_len, enc_cap;
    int32_t sid;
    uint32_t gen;
    int32_t n_accepted;
};

/* ---- growable arrays -------------------------------------------------- */

struct u32v {
    uint32_t *v;
    size_t n, cap;
};

static int u32v_push(struct u32v *a, uint32_t x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 16;
        uint32_t *v = folio_realloc(a->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

/* ---- parser ----------------------------------------------------------- */

struct prule {
    char *name; /* NULL: anonymous */
    bool defined;
    struct u32v body; /* elements, END after each alternative */
};

struct parser {
    const char *s, *end, *line_start;
    int line;
    struct prule *rules;
    int32_t n_rules, cap_rules;
    uint64_t (*sets)[4];
    int32_t n_sets, cap_sets;
    int32_t byte_set[256]; /* singleton set per byte, -1 none yet */
    int32_t mb_rule;       /* multibyte UTF-8 character rule, -1 none yet */
    int nest;              /* open groups */
    char *err;
    size_t errlen;
    int rc;
};

static int perr(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(struct parser *p, const char *fmt, ...)
{
    if (p->rc)
        return p->rc;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (p->err)
        snprintf(p->err, p->errlen, "grammar line %d: %s", p->line, msg);
    p->rc = -EINVAL;
    return -EINVAL;
}

static int32_t new_rule(struct parser *p, const char *name, size_t n)
{
    if (p->n_rules == p->cap_rules) {
        int32_t cap = p->cap_rules ? 2 * p->cap_rules : 32;
        struct prule *r = folio_realloc(p->rules, (size_t)cap * sizeof(*r));
        if (!r) {
            p->rc = -ENOMEM;
            return -1;
        }
        p->rules = r;
        p->cap_rules = cap;
    }
    struct prule *r = &p->rules[p->n_rules];
    memset(r, 0, sizeof(*r));
    if (name) {
        r->name = folio_malloc(n + 1);
        if (!r->name) {
            p->rc = -ENOMEM;
            return -1;
        }
        memcpy(r->name, name, n);
        r->name[n] = 0;
    }
    return p->n_rules++;
}

static int32_t rule_by_name(struct parser *p, const char *name, size_t n)
{
    for (int32_t i = 0; i < p->n_rules; i++)
        if (p->rules[i].name && strlen(p->rules[i].name) == n && !memcmp(p->rules[i].name, name, n))
            return i;
    return new_rule(p, name, n);
}

static int32_t new_set(struct parser *p, const uint64_t bits[4])
{
    if (p->n_sets == p->cap_sets) {
        int32_t cap = p->cap_sets ? 2 * p->cap_sets : 64;
        uint64_t(*s)[4] = folio_realloc(p->sets, (size_t)cap * sizeof(*s));
        if (!s) {
            p->rc = -ENOMEM;
            return -1;
        }
        p->sets = s;
        p->cap_sets = cap;
    }
    memcpy(p->sets[p->n_sets], bits, 4 * sizeof(uint64_t));
    return p->n_sets++;
}

static void bits_add(uint64_t b[4], unsigned lo, unsigned hi)
{
    for (unsigned c = lo; c <= hi; c++)
        b[c >> 6] |= 1ull << (c & 63);
}

static int32_t range_set(struct parser *p, unsigned lo, unsigned hi)
{
    uint64_t b[4] = {0};
    bits_add(b, lo, hi);
    return new_set(p, b);
}

static int32_t byte_set(struct parser *p, unsigned c)
{
    if (p->byte_set[c] < 0)
        p->byte_set[c] = range_set(p, c, c);
    return p->byte_set[c];
}

static void emit(struct parser *p, int32_t rule, uint32_t e)
{
    if (!p->rc && u32v_push(&p->rules[rule].body, e))
        p->rc = -ENOMEM;
}

/* The rule matching one well-formed multi-byte UTF-8 character. */
static int32_t mb_rule(struct parser *p)
{
    if (p->mb_rule >= 0)
        return p->mb_rule;
    int32_t r = new_rule(p, NULL, 0);
    if (r < 0)
        return -1;
    int32_t c = range_set(p, 0x80, 0xbf);
    /* lead byte range, second byte range, continuation bytes after it */
    static const uint8_t seq[][5] = {
        {0xc2, 0xdf, 0x80, 0xbf, 0}, {0xe0, 0xe0, 0xa0, 0xbf, 1}, {0xe1, 0xec, 0x80, 0xbf, 1},
        {0xed, 0xed, 0x80, 0x9f, 1}, {0xee, 0xef, 0x80, 0xbf, 1}, {0xf0, 0xf0, 0x90, 0xbf, 2},
        {0xf1, 0xf3, 0x80, 0xbf, 2}, {0xf4, 0xf4, 0x80, 0x8f, 2},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(seq); i++) {
        emit(p, r, E_MAKE(E_SET, range_set(p, seq[i][0], seq[i][1])));
        emit(p, r, E_MAKE(E_SET, range_set(p, seq[i][2], seq[i][3])));
        for (int k = 0; k < seq[i][4]; k++)
            emit(p, r, E_MAKE(E_SET, c));
        emit(p, r, E_END);
    }
    p->rules[r].defined = true;
    p->mb_rule = r;
    return r;
}

static void skip_ws(struct parser *p)
{
    while (p->s < p->end) {
        if (*p->s == '#') {
            while (p->s < p->end && *p->s != '\n')
                p->s++;
        } else if (*p->s == '\n') {
            p->line++;
            p->s++;
        } else if (isspace((unsigned char)*p->s))
            p->s++;
        else
            break;
    }
}

static bool is_name_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.';
}

static size_t name_len(const char *s, const char *end)
{
    size_t n = 0;
    while (s + n < end && is_name_char(s[n]) && !(n == 0 && s[n] == '.'))
        n++;
    return n;
}

/* A rule definition starts here (name ::=)? */
static bool at_definition(struct parser *p)
{
    size_t n = name_len(p->s, p->end);
    if (!n)
        return false;
    const char *q = p->s + n;
    while (q < p->end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
        q++;
    return p->end - q >= 3 && !memcmp(q, "::=", 3);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* One (possibly escaped) character of a literal or class: its UTF-8 bytes
 * into out (1..4), returns the count, 0 on error. */
static int read_char(struct parser *p, uint8_t out[4])
{
    if (p->s >= p->end)
        return perr(p, "unexpected end of grammar"), 0;
    unsigned char c = (unsigned char)*p->s++;
    if (c == '\n')
        return perr(p, "newline inside a literal or class"), 0;
    if (c != '\\') {
        out[0] = c;
        return 1;
    }
    if (p->s >= p->end)
        return perr(p, "unexpected end of grammar"), 0;
    c = (unsigned char)*p->s++;
    int digits = 0;
    switch (c) {
    case 'n':
        out[0] = '\n';
        return 1;
    case 'r':
        out[0] = '\r';
        return 1;
    case 't':
        out[0] = '\t';
        return 1;
    case '\\':
    case '"':
    case '[':
    case ']':
    case '-':
    case '^':
    case '/':
        out[0] = c;
        return 1;
    case 'x':
        digits = 2;
        break;
    case 'u':
        digits = 4;
        break;
    default:
        return perr(p, "unknown escape '\\%c'", c), 0;
    }
    unsigned v = 0;
    for (int i = 0; i < digits; i++) {
        int h = p->s < p->end ? hexval(*p->s) : -1;
        if (h < 0)
            return perr(p, "bad \\%c escape", c), 0;
        v = v * 16 + (unsigned)h;
        p->s++;
    }
    if (c == 'x') {
        out[0] = (uint8_t)v;
        return 1;
    }
    if (v >= 0xd800 && v <= 0xdfff)
        return perr(p, "\\u escape of a surrogate"), 0;
    if (v < 0x80) {
        out[0] = (uint8_t)v;
        return 1;
    }
    if (v < 0x800) {
        out[0] = (uint8_t)(0xc0 | (v >> 6));
        out[1] = (uint8_t)(0x80 | (v & 0x3f));
        return 2;
    }
    out[0] = (uint8_t)(0xe0 | (v >> 12));
    out[1] = (uint8_t)(0x80 | ((v >> 6) & 0x3f));
    out[2] = (uint8_t)(0x80 | (v & 0x3f));
    return 3;
}

/* One class member byte (ASCII, or a \xHH byte). */
static int class_byte(struct parser *p, unsigned *out)
{
    const char *at = p->s;
    uint8_t b[4];
    int n = read_char(p, b);
    if (!n)
        return -EINVAL;
    if (n > 1 || (b[0] >= 0x80 && !(at[0] == '\\' && at[1] == 'x')))
        return perr(p, "character classes hold ASCII characters only (use alternatives for "
                       "others)");
    *out = b[0];
    return 0;
}

static int parse_alts(struct parser *p, int32_t rule, bool nested);

/* [class] or [^class] after the '['; appends to items. */
static int parse_class(struct parser *p, struct u32v *items)
{
    bool neg = p->s < p->end && *p->s == '^';
    if (neg)
        p->s++;
    uint64_t b[4] = {0};
    while (p->s < p->end && *p->s != ']') {
        unsigned lo = 0, hi; /* set by class_byte unless it fails */
        if (class_byte(p, &lo))
            return p->rc;
        hi = lo;
        if (p->s + 1 < p->end && *p->s == '-' && p->s[1] != ']') {
            p->s++;
            if (class_byte(p, &hi))
                return p->rc;
            if (hi < lo)
                return perr(p, "empty range in class");
        }
        bits_add(b, lo, hi);
    }
    if (p->s >= p->end)
        return perr(p, "unterminated character class");
    p->s++;
    if (!neg) {
        int32_t s = new_set(p, b);
        return s < 0 ? p->rc : u32v_push(items, E_MAKE(E_SET, s));
    }
    uint64_t c[4] = {~b[0], ~b[1], 0, 0}; /* ASCII complement */
    int32_t r = new_rule(p, NULL, 0), s = new_set(p, c), mb = mb_rule(p);
    if (r < 0 || s < 0 || mb < 0)
        return p->rc;
    emit(p, r, E_MAKE(E_SET, s));
    emit(p, r, E_END);
    emit(p, r, E_MAKE(E_REF, mb));
    emit(p, r, E_END);
    p->rules[r].defined = true;
    return p->rc ? p->rc : u32v_push(items, E_MAKE(E_REF, r));
}

/* Wraps items into one anonymous rule; its REF. */
static int32_t wrap(struct parser *p, const uint32_t *e, size_t n)
{
    int32_t r = new_rule(p, NULL, 0);
    if (r < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        emit(p, r, e[i]);
    emit(p, r, E_END);
    p->rules[r].defined = true;
    return r;
}

/* x{lo,hi} (hi < 0: unbounded) appended to out. */
static int repeat(struct parser *p, uint32_t x, long lo, long hi, struct u32v *out)
{
    for (long i = 0; i < lo; i++)
        if (u32v_push(out, x))
            return -ENOMEM;
    if (hi < 0) { /* R ::= x R | "" */
        int32_t r = new_rule(p, NULL, 0);
        if (r < 0)
            return p->rc;
        emit(p, r, x);
        emit(p, r, E_MAKE(E_REF, r));
        emit(p, r, E_END);
        emit(p, r, E_END);
        p->rules[r].defined = true;
        return p->rc ? p->rc : u32v_push(out, E_MAKE(E_REF, r));
    }
    int32_t prev = -1; /* R_k ::= x R_{k-1} | "" */
    for (long k = 0; k < hi - lo; k++) {
        int32_t r = new_rule(p, NULL, 0);
        if (r < 0)
            return p->rc;
        emit(p, r, x);
        if (prev >= 0)
            emit(p, r, E_MAKE(E_REF, prev));
        emit(p, r, E_END);
        emit(p, r, E_END);
        p->rules[r].defined = true;
        prev = r;
    }
    return prev >= 0 && !p->rc ? u32v_push(out, E_MAKE(E_REF, prev)) : p->rc;
}

static int parse_count(struct parser *p, long *lo, long *hi)
{
    skip_ws(p);
    /* digits within the text (it need not end in a NUL) */
    const char *e = p->s;
    long v = 0;
    while (e < p->end && *e >= '0' && *e <= '9' && v < 100000000)
        v = v * 10 + (*e++ - '0');
    if (e == p->s)
        return perr(p, "expected a number after '{'");
    *lo = v;
    p->s = e;
    skip_ws(p);
    *hi = *lo;
    if (p->s < p->end && *p->s == ',') {
        p->s++;
        skip_ws(p);
        *hi = -1;
        if (p->s < p->end && isdigit((unsigned char)*p->s)) {
            long w = 0;
            while (p->s < p->end && isdigit((unsigned char)*p->s) && w < 100000000)
                w = w * 10 + (*p->s++ - '0');
            *hi = w;
            skip_ws(p);
        }
    }
    if (p->s >= p->end || *p->s != '}')
        return perr(p, "expected '}'");
    p->s++;
    if (*lo < 0 || *lo > GRAM_MAX_REPEAT || *hi > GRAM_MAX_REPEAT || (*hi >= 0 && *hi < *lo))
        return perr(p, "repetition counts must satisfy 0 <= m <= n <= %d", GRAM_MAX_REPEAT);
    return 0;
}

/* One sequence into rule (terminated by END). */
static int parse_seq(struct parser *p, int32_t rule, bool nested)
{
    struct u32v seq = {0};
    for (;;) {
        skip_ws(p);
        if (p->s >= p->end || *p->s == '|' || (nested && *p->s == ')') || at_definition(p))
            break;
        struct u32v item = {0};
        char c = *p->s;
        if (c == '"') {
            p->s++;
            while (!p->rc && p->s < p->end && *p->s != '"') {
                uint8_t b[4];
                int n = read_char(p, b);
                for (int i = 0; i < n; i++) {
                    int32_t s = byte_set(p, b[i]);
                    if (s < 0 || u32v_push(&item, E_MAKE(E_SET, s)))
                        p->rc = p->rc ? p->rc : -ENOMEM;
                }
            }
            if (!p->rc && p->s >= p->end)
                perr(p, "unterminated literal");
            p->s++;
        } else if (c == '[') {
            p->s++;
            parse_class(p, &item);
        } else if (c == '.') {
            p->s++;
            int32_t r = new_rule(p, NULL, 0), s = range_set(p, 0, 0x7f), mb = mb_rule(p);
            if (r >= 0 && s >= 0 && mb >= 0) {
                emit(p, r, E_MAKE(E_SET, s));
                emit(p, r, E_END);
                emit(p, r, E_MAKE(E_REF, mb));
                emit(p, r, E_END);
                p->rules[r].defined = true;
                u32v_push(&item, E_MAKE(E_REF, r));
            }
        } else if (c == '(') {
            p->s++;
            int32_t r = ++p->nest > GRAM_MAX_NEST
                            ? (perr(p, "groups nested more than %d deep", GRAM_MAX_NEST), -1)
                            : new_rule(p, NULL, 0);
            if (r >= 0 && !parse_alts(p, r, true)) {
                p->nest--;
                p->rules[r].defined = true;
                u32v_push(&item, E_MAKE(E_REF, r));
            }
        } else if (name_len(p->s, p->end)) {
            size_t n = name_len(p->s, p->end);
            int32_t r = rule_by_name(p, p->s, n);
            p->s += n;
            if (r >= 0)
                u32v_push(&item, E_MAKE(E_REF, r));
        } else
            perr(p, "unexpected character '%c'", c);
        if (p->rc) {
            folio_free(item.v);
            break;
        }
        /* repetition applies to the whole item */
        long lo = 1, hi = 1;
        if (p->s < p->end) {
            if (*p->s == '*')
                lo = 0, hi = -1, p->s++;
            else if (*p->s == '+')
                lo = 1, hi = -1, p->s++;
            else if (*p->s == '?')
                lo = 0, hi = 1, p->s++;
            else if (*p->s == '{') {
                p->s++;
                parse_count(p, &lo, &hi);
            }
        }
        if (!p->rc && (lo != 1 || hi != 1) && item.n > 0) { /* "" repeated is "" */
            uint32_t x = item.v[0];
            if (item.n != 1) {
                int32_t r = wrap(p, item.v, item.n);
                x = E_MAKE(E_REF, r < 0 ? 0 : r);
            }
            item.n = 0;
            if (!p->rc)
                repeat(p, x, lo, hi, &item);
        }
        for (size_t i = 0; !p->rc && i < item.n; i++)
            if (u32v_push(&seq, item.v[i]))
                p->rc = -ENOMEM;
        folio_free(item.v);
        if (p->rc)
            break;
    }
    for (size_t i = 0; !p->rc && i < seq.n; i++)
        emit(p, rule, seq.v[i]);
    emit(p, rule, E_END);
    folio_free(seq.v);
    return p->rc;
}

static int parse_alts(struct parser *p, int32_t rule, bool nested)
{
    for (;;) {
        if (parse_seq(p, rule, nested))
            return p->rc;
        skip_ws(p);
        if (p->s < p->end && *p->s == '|') {
            p->s++;
            continue;
        }
        break;
    }
    if (nested) {
        if (p->s >= p->end || *p->s != ')')
            return perr(p, "expected ')'");
        p->s++;
    }
    return 0;
}

static int parse_grammar(struct parser *p)
{
    for (;;) {
        skip_ws(p);
        if (p->s >= p->end)
            break;
        size_t n = name_len(p->s, p->end);
        if (!n || !at_definition(p))
            return perr(p, "expected a rule definition 'name ::= ...'");
        int32_t r = rule_by_name(p, p->s, n);
        if (r < 0)
            return p->rc;
        if (p->rules[r].defined)
            return perr(p, "rule '%s' defined twice", p->rules[r].name);
        p->s += n;
        skip_ws(p);
        p->s += 3; /* ::= */
        p->rules[r].defined = true;
        if (parse_alts(p, r, false))
            return p->rc;
    }
    return 0;
}

/* ---- compile: flatten, check ----------------------------------------- */

static int check_rules(gram_t *g, struct parser *p)
{
    int32_t nr = g->n_rules;
    bool *nullable = folio_calloc((size_t)nr, 1);
    uint8_t *mark = folio_calloc((size_t)nr, 1);
    int32_t *stack = folio_malloc((size_t)(nr + 1) * 2 * sizeof(int32_t));
    if (!nullable || !mark || !stack) {
        folio_free(nullable);
        folio_free(mark);
        folio_free(stack);
        return -ENOMEM;
    }
    /* minrest by fixed point (rules may recurse) */
    for (int32_t i = 0; i < g->n_elems; i++)
        g->minrest[i] = E_TYPE(g->elems[i]) == E_END ? 0 : MC_INF;
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t i = g->n_elems - 1; i >= 0; i--) {
            uint32_t e = g->elems[i];
            if (E_TYPE(e) == E_END)
                continue;
            int32_t own = 1;
            if (E_TYPE(e) == E_REF) {
                int32_t r = (int32_t)E_ARG(e);
                own = MC_INF;
                for (int32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++)
                    own = FOLIO_MIN(own, g->minrest[g->alt_start[a]]);
            }
            int32_t v = FOLIO_MIN((int64_t)MC_INF, (int64_t)own + g->minrest[i + 1]);
            if (v < g->minrest[i]) {
                g->minrest[i] = v;
                changed = true;
            }
        }
    }
    int rc = 0;
    for (int32_t r = 0; r < nr && !rc; r++) {
        int32_t best = MC_INF;
        for (int32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++)
            best = FOLIO_MIN(best, g->minrest[g->alt_start[a]]);
        if (best >= MC_INF)
            rc =
                perr(p, "rule '%s' can never end", p->rules[r].name ? p->rules[r].name : "(group)");
    }
    /* nullable rules, then left recursion: a cycle through references
     * reachable without consuming a byte */
    for (int32_t r = 0; r < nr && !rc; r++)
        nullable[r] = false;
    for (bool changed = true; changed && !rc;) {
        changed = false;
        for (int32_t r = 0; r < nr; r++) {
            if (nullable[r])
                continue;
            for (int32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1] && !nullable[r]; a++) {
                bool all = true;
                for (int32_t i = g->alt_start[a]; E_TYPE(g->elems[i]) != E_END && all; i++)
                    all = E_TYPE(g->elems[i]) == E_REF && nullable[E_ARG(g->elems[i])];
                if (all)
                    nullable[r] = changed = true;
            }
        }
    }
    /* iterative DFS: mark 1 on the path, 2 done; stack of (rule, next alt elem) */
    for (int32_t root = 0; root < nr && !rc; root++) {
        if (mark[root])
            continue;
        int32_t sp = 0;
        stack[0] = root;
        stack[1] = 0; /* index into the rule's left-reachable refs, enumerated below */
        mark[root] = 1;
        sp = 1;
        while (sp > 0 && !rc) {
            int32_t r = stack[2 * (sp - 1)], k = stack[2 * (sp - 1) + 1]++;
            /* the k-th left-reachable reference of r */
            int32_t found = -1, seen = 0;
            for (int32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1] && found < 0; a++)
                for (int32_t i = g->alt_start[a]; E_TYPE(g->elems[i]) == E_REF; i++) {
                    if (seen++ == k) {
                        found = (int32_t)E_ARG(g->elems[i]);
                        break;
                    }
                    if (!nullable[E_ARG(g->elems[i])])
                        break;
                }
            if (found < 0) {
                mark[r] = 2;
                sp--;
                continue;
            }
            if (mark[found] == 1) {
                const char *nm = p->rules[found].name;
                rc = perr(p, "left recursion through rule '%s'", nm ? nm : "(group)");
            } else if (!mark[found]) {
                mark[found] = 1;
                stack[2 * sp] = found;
                stack[2 * sp + 1] = 0;
                sp++;
            }
        }
    }
    folio_free(nullable);
    folio_free(mark);
    folio_free(stack);
    return rc;
}

/* ---- stacks and states ------------------------------------------------ */

/* Collects stacks, then sorts and encodes them. */
struct builder {
    uint32_t *buf; /* stacks: [depth][pos...] back to back */
    size_t n, cap;
    uint32_t *idx; /* start of each stack */
    int32_t n_stacks, cap_stacks;
    int32_t steps; /* expansion steps of this advance (GRAM_MAX_EXPAND) */
    bool overflow;
};

static int b_add(struct builder *b, const uint32_t *fr, uint32_t d)
{
    if (b->n_stacks >= GRAM_MAX_STACKS) {
        b->overflow = true;
        return 0;
    }
    if (b->n + d + 1 > b->cap) {
        size_t cap = FOLIO_MAX(2 * b->cap, b->n + d + 1 + 64);
        uint32_t *v = folio_realloc(b->buf, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        b->buf = v;
        b->cap = cap;
    }
    if (b->n_stacks == b->cap_stacks) {
        int32_t cap = b->cap_stacks ? 2 * b->cap_stacks : 16;
        uint32_t *v = folio_realloc(b->idx, (size_t)cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        b->idx = v;
        b->cap_stacks = cap;
    }
    b->idx[b->n_stacks++] = (uint32_t)b->n;
    b->buf[b->n++] = d;
    memcpy(b->buf + b->n, fr, d * sizeof(*fr));
    b->n += d;
    return 0;
}

/* Expands the stack fr[0..d) (fr has room for GRAM_MAX_DEPTH) until every
 * result's top is a SET, adding the results to b. */
static int expand(const gram_t *g, uint32_t *fr, uint32_t d, struct builder *b)
{
    if (++b->steps > GRAM_MAX_EXPAND) { /* a pathologically ambiguous grammar */
        b->overflow = true;
        return 0;
    }
    while (d > 0 && E_TYPE(g->elems[fr[d - 1]]) == E_END)
        d--;
    if (d == 0)
        return b_add(b, fr, 0);
    uint32_t p = fr[d - 1], e = g->elems[p];
    if (E_TYPE(e) == E_SET)
        return b_add(b, fr, d);
    int32_t r = (int32_t)E_ARG(e);
    uint32_t base = d;
    if (E_TYPE(g->elems[p + 1]) == E_END)
        base = d - 1; /* tail call */
    else
        fr[d - 1] = p + 1;
    int rc = 0;
    if (base + 1 > GRAM_MAX_DEPTH)
        b->overflow = true;
    else
        for (int32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1] && !rc; a++) {
            uint32_t saved = fr[base];
            fr[base] = (uint32_t)g->alt_start[a];
            rc = expand(g, fr, base + 1, b);
            fr[base] = saved;
        }
    fr[d - 1] = p;
    return rc;
}

static const uint32_t *b_stack(const struct builder *b, int32_t i)
{
    return b->buf + b->idx[i];
}

static int cmp_stacks(const uint32_t *x, const uint32_t *y)
{
    uint32_t n = FOLIO_MIN(x[0], y[0]) + 1;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sorts and dedupes b's stacks and encodes them into out (grown as
 * needed).  Insertion sort: states hold a handful of stacks. */
static int b_encode(struct builder *b, struct u32v *out)
{
    for (int32_t i = 1; i < b->n_stacks; i++) {
        uint32_t v = b->idx[i];
        int32_t j = i - 1;
        while (j >= 0 && cmp_stacks(b->buf + b->idx[j], b->buf + v) > 0) {
            b->idx[j + 1] = b->idx[j];
            j--;
        }
        b->idx[j + 1] = v;
    }
    out->n = 0;
    if (u32v_push(out, 0))
        return -ENOMEM;
    uint32_t n = 0;
    for (int32_t i = 0; i < b->n_stacks; i++) {
        const uint32_t *s = b_stack(b, i);
        if (i > 0 && !cmp_stacks(b_stack(b, i - 1), s))
            continue;
        for (uint32_t k = 0; k <= s[0]; k++)
            if (u32v_push(out, s[k]))
                return -ENOMEM;
        n++;
    }
    out->v[0] = n;
    return 0;
}

static void b_reset(struct builder *b)
{
    b->n = 0;
    b->n_stacks = 0;
    b->steps = 0;
    b->overflow = false;
}

static void b_free(struct builder *b)
{
    folio_free(b->buf);
    folio_free(b->idx);
}

/* enc advanced over byte c into out (out->v[0] == 0: dead). */
static int advance(const gram_t *g, const uint32_t *enc, unsigned c, struct builder *b,
                   struct u32v *out)
{
    uint32_t fr[GRAM_MAX_DEPTH + 1];
    b_reset(b);
    const uint32_t *s = enc + 1;
    for (uint32_t i = 0; i < enc[0]; i++) {
        uint32_t d = s[0];
        if (d > 0) {
            uint32_t p = s[d];
            const uint64_t *set = g->sets[E_ARG(g->elems[p])];
            if (set[c >> 6] >> (c & 63) & 1) {
                memcpy(fr, s + 1, d * sizeof(uint32_t));
                fr[d - 1] = p + 1;
                int rc = expand(g, fr, d, b);
                if (rc)
                    return rc;
            }
        }
        s += d + 1;
    }
    return b_encode(b, out);
}

static int32_t enc_mc(const gram_t *g, const uint32_t *enc)
{
    int32_t best = MC_INF;
    const uint32_t *s = enc + 1;
    for (uint32_t i = 0; i < enc[0]; i++) {
        int64_t sum = 0;
        for (uint32_t k = 1; k <= s[0]; k++)
            sum += g->minrest[s[k]];
        best = (int32_t)FOLIO_MIN((int64_t)best, sum);
        s += s[0] + 1;
    }
    return best;
}

static bool enc_accepting(const uint32_t *enc)
{
    const uint32_t *s = enc + 1;
    for (uint32_t i = 0; i < enc[0]; i++) {
        if (s[0] == 0)
            return true;
        s += s[0] + 1;
    }
    return false;
}

/* ---- compile ---------------------------------------------------------- */

static void parser_free(struct parser *p)
{
    for (int32_t i = 0; i < p->n_rules; i++) {
        folio_free(p->rules[i].name);
        folio_free(p->rules[i].body.v);
    }
    folio_free(p->rules);
    folio_free(p->sets);
}

/* Frees every cached state's transition row and token mask (the state
 * array itself stays: gram_free frees it, cache_clear reuses it). */
static void states_free(gram_t *g)
{
    for (int32_t i = 0; i < g->n_st; i++) {
        folio_free(g->st[i].trans);
        folio_free(g->st[i].mask);
    }
}

static void gram_free(gram_t *g)
{
    states_free(g);
    folio_free(g->st);
    folio_free(g->htab);
    folio_free(g->arena);
    folio_free(g->elems);
    folio_free(g->minrest);
    folio_free(g->alt_start);
    folio_free(g->rule_alt);
    folio_free(g->sets);
    folio_free(g->start);
    folio_free(g);
}

int gram_compile(const char *src, size_t len, gram_t **out, char *err, size_t errlen)
{
    *out = NULL;
    struct parser p = {
        .s = src, .end = src + len, .line = 1, .mb_rule = -1, .err = err, .errlen = errlen};
    memset(p.byte_set, 0xff, sizeof(p.byte_set));
    if (len > GRAM_MAX_SRC) {
        if (err)
            snprintf(err, errlen, "grammar longer than %u bytes", GRAM_MAX_SRC);
        return -EINVAL;
    }
    gram_t *g = folio_calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    int rc = parse_grammar(&p);
    int32_t root = -1;
    for (int32_t i = 0; !rc && i < p.n_rules; i++) {
        if (!p.rules[i].defined)
            rc = perr(&p, "rule '%s' is not defined", p.rules[i].name);
        if (p.rules[i].name && !strcmp(p.rules[i].name, "root"))
            root = i;
    }
    if (!rc && root < 0)
        rc = perr(&p, "no 'root' rule");
    /* flatten */
    size_t ne = 1, na = 0;
    for (int32_t i = 0; !rc && i < p.n_rules; i++) {
        ne += p.rules[i].body.n;
        for (size_t k = 0; k < p.rules[i].body.n; k++)
            na += p.rules[i].body.v[k] == E_END;
    }
    if (!rc && ne + 1 > 0x0fffffff)
        rc = perr(&p, "grammar too large");
    if (!rc) {
        g->n_rules = p.n_rules;
        g->n_elems = (int32_t)ne;
        g->elems = folio_malloc(ne * sizeof(uint32_t));
        g->minrest = folio_malloc(ne * sizeof(int32_t));
        g->alt_start = folio_malloc((na + 1) * sizeof(int32_t));
        g->rule_alt = folio_malloc(((size_t)p.n_rules + 1) * sizeof(int32_t));
        if (!g->elems || !g->minrest || !g->alt_start || !g->rule_alt)
            rc = -ENOMEM;
    }
    if (!rc) {
        int32_t at = 0, alt = 0;
        for (int32_t r = 0; r < p.n_rules; r++) {
            g->rule_alt[r] = alt;
            const struct u32v *b = &p.rules[r].body;
            bool start = true;
            for (size_t k = 0; k < b->n; k++) {
                if (start)
                    g->alt_start[alt++] = at;
                g->elems[at++] = b->v[k];
                start = b->v[k] == E_END;
            }
        }
        g->rule_alt[p.n_rules] = alt;
        g->elems[at] = E_END; /* guard: elems[p + 1] is always readable */
        g->sets = p.sets;
        g->n_sets = p.n_sets;
        p.sets = NULL;
        rc = check_rules(g, &p);
    }
    if (!rc) { /* the start state: root's alternatives expanded */
        struct builder b = {0};
        struct u32v enc = {0};
        uint32_t fr[GRAM_MAX_DEPTH + 1];
        for (int32_t a = g->rule_alt[root]; a < g->rule_alt[root + 1] && !rc; a++) {
            fr[0] = (uint32_t)g->alt_start[a];
            rc = expand(g, fr, 1, &b);
        }
        if (!rc)
            rc = b_encode(&b, &enc);
        b_free(&b);
        g->start = enc.v;
        g->start_len = (uint32_t)enc.n;
    }
    parser_free(&p);
    if (rc) {
        gram_free(g);
        return rc;
    }
    g->refs = 1;
    *out = g;
    return 0;
}

void gram_ref(gram_t *g)
{
    __atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
}

void gram_unref(gram_t *g)
{
    if (g && __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) == 0)
        gram_free(g);
}

int32_t gram_n_states(const gram_t *g)
{
    return g->n_st;
}

/* ---- the cache -------------------------------------------------------- */

static uint32_t enc_hash(const uint32_t *enc, uint32_t n)
{
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < n; i++) {
        h ^= enc[i];
        h *= 16777619u;
    }
    return h ? h : 1;
}

static void cache_clear(gram_t *g)
{
    states_free(g);
    g->n_st = 0;
    g->arena_len = 0;
    g->bytes = 0;
    if (g->htab)
        memset(g->htab, 0, g->hcap * sizeof(*g->htab));
    g->gen++;
}

/* Id of the state with encoding enc, interned if new; -ENOMEM. */
static int32_t intern(gram_t *g, const uint32_t *enc, uint32_t n)
{
    uint32_t h = enc_hash(enc, n);
    if (g->hcap && g->hcap >= 2u * (uint32_t)g->n_st + 2) {
        for (uint32_t i = h & (g->hcap - 1);; i = (i + 1) & (g->hcap - 1)) {
            int32_t id = g->htab[i] - 1;
            if (id < 0)
                break;
            const struct gstate *s = &g->st[id];
            if (s->hash == h && s->len == n && !memcmp(g->arena + s->off, enc, n * 4))
                return id;
        }
    }
    if ((uint32_t)(g->n_st + 1) * 2 > g->hcap) { /* grow and rehash */
        uint32_t cap = g->hcap ? 2 * g->hcap : 256;
        int32_t *t = folio_calloc(cap, sizeof(*t));
        if (!t)
            return -ENOMEM;
        for (int32_t id = 0; id < g->n_st; id++) {
            uint32_t i = g->st[id].hash & (cap - 1);
            while (t[i])
                i = (i + 1) & (cap - 1);
            t[i] = id + 1;
        }
        folio_free(g->htab);
        g->htab = t;
        g->hcap = cap;
        for (uint32_t i = h & (cap - 1);; i = (i + 1) & (cap - 1)) {
            int32_t id = g->htab[i] - 1;
            if (id < 0)
                break;
            const struct gstate *s = &g->st[id];
            if (s->hash == h && s->len == n && !memcmp(g->arena + s->off, enc, n * 4))
                return id;
        }
    }
    if (g->n_st == g->cap_st) {
        int32_t cap = g->cap_st ? 2 * g->cap_st : 64;
        struct gstate *st = folio_realloc(g->st, (size_t)cap * sizeof(*st));
        if (!st)
            return -ENOMEM;
        g->st = st;
        g->cap_st = cap;
    }
    if (g->arena_len + n > g->arena_cap) {
        size_t cap = FOLIO_MAX(2 * g->arena_cap, g->arena_len + n + 1024);
        uint32_t *a = folio_realloc(g->arena, cap * sizeof(*a));
        if (!a)
            return -ENOMEM;
        g->arena = a;
        g->arena_cap = cap;
    }
    int32_t id = g->n_st++;
    struct gstate *s = &g->st[id];
    memset(s, 0, sizeof(*s));
    s->off = (uint32_t)g->arena_len;
    s->len = n;
    s->hash = h;
    memcpy(g->arena + g->arena_len, enc, n * 4);
    g->arena_len += n;
    s->mc = enc_mc(g, enc);
    g->bytes += n * 4 + sizeof(*s);
    uint32_t i = h & (g->hcap - 1);
    while (g->htab[i])
        i = (i + 1) & (g->hcap - 1);
    g->htab[i] = id + 1;
    return id;
}

/* Scratch for cache transitions: one per call, on the caller's stack. */
struct scratch {
    struct builder b;
    struct u32v enc;
};

/* Transition of state id over byte c: -1 dead, a state id, or -ENOMEM
 * (as < -1). */
static int32_t trans(gram_t *g, int32_t id, unsigned c, struct scratch *sc)
{
    struct gstate *s = &g->st[id];
    if (!s->trans) {
        s->trans = folio_malloc(256 * sizeof(int32_t));
        if (!s->trans)
            return -ENOMEM;
        for (int i = 0; i < 256; i++)
            s->trans[i] = -2;
        g->bytes += 256 * sizeof(int32_t);
    }
    int32_t t = s->trans[c];
    if (t != -2)
        return t;
    /* the arena may move in intern: copy the encoding's start first */
    int rc = advance(g, g->arena + s->off, c, &sc->b, &sc->enc);
    if (rc)
        return -ENOMEM;
    t = sc->enc.v[0] == 0 ? -1 : intern(g, sc->enc.v, (uint32_t)sc->enc.n);
    if (t < -1)
        return t;
    g->st[id].trans[c] = t;
    return t;
}

/* The token mask of state id (computed on first use). */
static int state_mask(gram_t *g, const gram_vocab_t *v, int32_t id, struct scratch *sc)
{
    if (g->st[id].mask)
        return 0;
    size_t words = ((size_t)v->n_vocab + 63) / 64;
    uint64_t *mask = folio_calloc(words, sizeof(uint64_t));
    int32_t *cur = folio_malloc(((size_t)v->max_len + 1) * sizeof(int32_t));
    if (!mask || !cur) {
        folio_free(mask);
        folio_free(cur);
        return -ENOMEM;
    }
    int32_t max_mc = 0, n_ok = 0, valid = 0;
    cur[0] = id;
    for (int32_t i = 0; i < v->n_sorted; i++) {
        const uint8_t *b = (const uint8_t *)v->bytes + v->off[i];
        int32_t L = v->len[i];
        valid = FOLIO_MIN(valid, (int32_t)v->lcp[i]);
        int32_t d = valid, dead = -1;
        for (; d < L; d++) {
            int32_t t = trans(g, cur[d], b[d], sc);
            if (t < -1) {
                folio_free(mask);
                folio_free(cur);
                return -ENOMEM;
            }
            if (t < 0) {
                dead = d;
                break;
            }
            cur[d + 1] = t;
        }
        if (dead < 0) {
            valid = L;
            int32_t tok = v->ids[i];
            mask[tok >> 6] |= 1ull << (tok & 63);
            max_mc = FOLIO_MAX(max_mc, g->st[cur[L]].mc);
            n_ok++;
            continue;
        }
        valid = dead; /* cur[0..dead] hold */
        while (i + 1 < v->n_sorted && v->lcp[i + 1] > dead)
            i++;
    }
    folio_free(cur);
    struct gstate *s = &g->st[id];
    s->mask = mask;
    s->mask_mc = max_mc;
    s->mask_n = n_ok;
    g->bytes += words * sizeof(uint64_t);
    return 0;
}

/* ---- vocabulary ------------------------------------------------------- */

static const gram_vocab_t *sort_vocab;
static int cmp_sorted(const void *a, const void *b)
{
    /* qsort has no context argument in C11: the vocabulary being built is
     * in sort_vocab (gram_vocab_new is not reentrant while sorting; it
     * runs once per daemon) */
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const gram_vocab_t *v = sort_vocab;
    size_t lx = v->len[x], ly = v->len[y];
    int c = memcmp(v->bytes + v->off[x], v->bytes + v->off[y], FOLIO_MIN(lx, ly));
    if (c)
        return c;
    return lx < ly ? -1 : lx > ly ? 1 : x - y;
}

void gram_vocab_free(gram_vocab_t *v)
{
    if (!v)
        return;
    folio_free(v->ids);
    folio_free(v->off);
    folio_free(v->len);
    folio_free(v->lcp);
    folio_free(v->eog);
    folio_free(v->tok_pos);
    folio_free(v->bytes);
    folio_free(v);
}

int gram_vocab_new(int32_t n_vocab, const char *const *piece, const size_t *len, const bool *eog,
                   gram_vocab_t **out)
{
    *out = NULL;
    if (n_vocab <= 0)
        return -EINVAL;
    gram_vocab_t *v = folio_calloc(1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    size_t total = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (!eog[i] && len[i] <= UINT16_MAX)
            total += len[i];
    v->n_vocab = n_vocab;
    v->ids = folio_malloc((size_t)n_vocab * sizeof(int32_t));
    v->off = folio_malloc((size_t)n_vocab * sizeof(uint32_t));
    v->len = folio_malloc((size_t)n_vocab * sizeof(uint16_t));
    v->lcp = folio_malloc((size_t)n_vocab * sizeof(uint16_t));
    v->eog = folio_calloc((size_t)n_vocab, 1);
    v->tok_pos = folio_malloc((size_t)n_vocab * sizeof(int32_t));
    v->bytes = folio_malloc(total + 1);
    int32_t *tmp = folio_malloc((size_t)n_vocab * sizeof(int32_t));
    if (!v->ids || !v->off || !v->len || !v->lcp || !v->eog || !v->tok_pos || !v->bytes || !tmp ||
        total > UINT32_MAX) {
        folio_free(tmp);
        gram_vocab_free(v);
        return -ENOMEM;
    }
    /* off/len indexed by token id while sorting, then permuted */
    size_t at = 0;
    int32_t n = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        v->eog[i] = eog[i];
        v->tok_pos[i] = -1;
        v->off[i] = (uint32_t)at;
        v->len[i] = 0;
        if (eog[i] || len[i] == 0 || len[i] > UINT16_MAX)
            continue;
        memcpy(v->bytes + at, piece[i], len[i]);
        v->len[i] = (uint16_t)len[i];
        at += len[i];
        tmp[n++] = i;
        v->max_len = FOLIO_MAX(v->max_len, (int32_t)len[i]);
    }
    sort_vocab = v;
    qsort(tmp, (size_t)n, sizeof(int32_t), cmp_sorted);
    sort_vocab = NULL;
    uint32_t *off2 = folio_malloc((size_t)n_vocab * sizeof(uint32_t));
    uint16_t *len2 = folio_malloc((size_t)n_vocab * sizeof(uint16_t));
    if (!off2 || !len2) {
        folio_free(off2);
        folio_free(len2);
        folio_free(tmp);
        gram_vocab_free(v);
        return -ENOMEM;
    }
    for (int32_t k = 0; k < n; k++) {
        int32_t id = tmp[k];
        v->ids[k] = id;
        off2[k] = v->off[id];
        len2[k] = v->len[id];
        v->tok_pos[id] = k;
    }
    folio_free(v->off);
    folio_free(v->len);
    v->off = off2;
    v->len = len2;
    for (int32_t k = 0; k < n; k++) {
        uint16_t l = 0;
        if (k > 0) {
            uint16_t m = FOLIO_MIN(v->len[k], v->len[k - 1]);
            const char *a = v->bytes + v->off[k], *b = v->bytes + v->off[k - 1];
            while (l < m && a[l] == b[l])
                l++;
        }
        v->lcp[k] = l;
    }
    v->n_sorted = n;
    folio_free(tmp);
    *out = v;
    return 0;
}

int32_t gram_vocab_n(const gram_vocab_t *v)
{
    return v->n_vocab;
}

/* ---- matcher ---------------------------------------------------------- */

static int m_set_enc(gram_matcher_t *m, const uint32_t *enc, uint32_t n)
{
    if (n > m->enc_cap) {
        uint32_t *e = folio_realloc(m->enc, n * sizeof(*e));
        if (!e)
            return -ENOMEM;
        m->enc = e;
        m->enc_cap = n;
    }
    memmove(m->enc, enc, n * sizeof(*enc));
    m->enc_len = n;
    return 0;
}

int gram_matcher_new(gram_t *g, gram_matcher_t **out)
{
    gram_matcher_t *m = folio_calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    if (m_set_enc(m, g->start, g->start_len)) {
        folio_free(m);
        return -ENOMEM;
    }
    gram_ref(g);
    m->g = g;
    m->sid = -1;
    *out = m;
    return 0;
}

void gram_matcher_free(gram_matcher_t *m)
{
    if (!m)
        return;
    gram_unref(m->g);
    folio_free(m->enc);
    folio_free(m);
}

int32_t gram_matcher_n_accepted(const gram_matcher_t *m)
{
    return m->n_accepted;
}

bool gram_matcher_accepting(const gram_matcher_t *m)
{
    return enc_accepting(m->enc);
}

bool gram_matcher_finished(const gram_matcher_t *m)
{
    return m->enc[0] == 1 && m->enc[1] == 0;
}

/* The matcher's state id in the cache (re-interned after a clear). */
static int32_t m_sid(gram_matcher_t *m)
{
    gram_t *g = m->g;
    if (m->sid >= 0 && m->gen == g->gen)
        return m->sid;
    int32_t id = intern(g, m->enc, m->enc_len);
    if (id < 0)
        return id;
    m->sid = id;
    m->gen = g->gen;
    return id;
}

/* Walks a token's bytes from state id; the final state, -1 dead, < -1
 * -ENOMEM. */
static int32_t walk(gram_t *g, int32_t id, const uint8_t *b, int32_t n, struct scratch *sc)
{
    for (int32_t i = 0; i < n && id >= 0; i++)
        id = trans(g, id, b[i], sc);
    return id;
}

int gram_matcher_mask(gram_matcher_t *m, const gram_vocab_t *v, int32_t budget, uint64_t *words)
{
    gram_t *g = m->g;
    if (g->mask_vocab != v || g->bytes > GRAM_CACHE_BYTES || g->n_st > GRAM_MAX_STATES) {
        cache_clear(g);
        g->mask_vocab = v;
    }
    struct scratch sc = {0};
    int rc = 0;
    int32_t id = m_sid(m);
    if (id < 0 || (rc = state_mask(g, v, id, &sc)))
        goto out;
    size_t nw = ((size_t)v->n_vocab + 63) / 64;
    const struct gstate *s = &g->st[id];
    bool accepting = enc_accepting(g->arena + s->off);
    memcpy(words, s->mask, nw * sizeof(uint64_t));
    int32_t n_ok = s->mask_n;
    if (budget != GRAM_NO_BUDGET && budget - 1 < s->mask_mc) {
        /* near the end: keep tokens whose shortest completion still fits */
        int32_t kept = 0;
        for (size_t w = 0; w < nw; w++)
            for (uint64_t bits = words[w]; bits; bits &= bits - 1) {
                int32_t tok = (int32_t)(w * 64 + (size_t)__builtin_ctzll(bits));
                int32_t k = v->tok_pos[tok];
                int32_t t = walk(g, id, (const uint8_t *)v->bytes + v->off[k], v->len[k], &sc);
                if (t < -1) {
                    rc = -ENOMEM;
                    goto out;
                }
                if (t >= 0 && g->st[t].mc <= budget - 1)
                    kept++;
                else
                    words[w] &= ~(1ull << (tok & 63));
            }
        if (kept == 0 && !accepting) /* no room at all: ignore the budget */
            memcpy(words, g->st[id].mask, nw * sizeof(uint64_t));
        else
            n_ok = kept;
    }
    if (accepting)
        for (int32_t i = 0; i < v->n_vocab; i++)
            if (v->eog[i]) {
                words[i >> 6] |= 1ull << (i & 63);
                n_ok++;
            }
    rc = n_ok;
out:
    b_free(&sc.b);
    folio_free(sc.enc.v);
    return id < 0 ? id : rc;
}

int gram_matcher_apply(gram_matcher_t *m, const gram_vocab_t *v, int32_t budget, float *logits)
{
    size_t nw = ((size_t)v->n_vocab + 63) / 64;
    uint64_t stackw[512];
    uint64_t *words = nw <= FOLIO_ARRAY_LEN(stackw) ? stackw : folio_malloc(nw * sizeof(uint64_t));
    if (!words)
        return -ENOMEM;
    int rc = gram_matcher_mask(m, v, budget, words);
    if (rc >= 0)
        for (size_t w = 0; w < nw; w++) {
            uint64_t keep = words[w];
            size_t base = w * 64, end = FOLIO_MIN(base + 64, (size_t)v->n_vocab);
            if (keep == ~0ull)
                continue;
            if (keep == 0) /* the common case away from free text: a plain fill */
                for (size_t i = base; i < end; i++)
                    logits[i] = -INFINITY;
            else if (end - base == 64) { /* branch-free select: vectorizes */
                float *row = logits + base;
                for (int j = 0; j < 64; j++)
                    row[j] = (keep >> j) & 1 ? row[j] : -INFINITY;
            } else
                for (; base < end; base++, keep >>= 1)
                    if (!(keep & 1))
                        logits[base] = -INFINITY;
        }
    if (words != stackw)
        folio_free(words);
    return rc;
}

int gram_matcher_accept(gram_matcher_t *m, const gram_vocab_t *v, int32_t token)
{
    if (token < 0 || token >= v->n_vocab)
        return -EINVAL;
    if (v->eog[token]) {
        if (!enc_accepting(m->enc))
            return -EINVAL;
        m->n_accepted++;
        return 0;
    }
    int32_t k = v->tok_pos[token];
    if (k < 0)
        return -EINVAL;
    gram_t *g = m->g;
    struct scratch sc = {0};
    int32_t id = m_sid(m);
    int rc = 0;
    if (id >= 0)
        id = walk(g, id, (const uint8_t *)v->bytes + v->off[k], v->len[k], &sc);
    if (id == -1)
        rc = -EINVAL;
    else if (id < 0)
        rc = -ENOMEM;
    else if (!(rc = m_set_enc(m, g->arena + g->st[id].off, g->st[id].len))) {
        m->sid = id;
        m->gen = g->gen;
        m->n_accepted++;
    }
    b_free(&sc.b);
    folio_free(sc.enc.v);
    return rc;
}

/* ---- reference -------------------------------------------------------- */

/* enc advanced over bytes s[0..n) with no cache: the final encoding in out
 * (v[0] == 0: dead). */
static int ref_run(const gram_t *g, const uint32_t *enc, uint32_t enc_n, const uint8_t *s, size_t n,
                   struct u32v *out)
{
    struct builder b = {0};
    struct u32v cur = {0}, nxt = {0};
    int rc = 0;
    for (uint32_t i = 0; i < enc_n && !rc; i++)
        rc = u32v_push(&cur, enc[i]);
    for (size_t i = 0; i < n && !rc && cur.v[0]; i++) {
        rc = advance(g, cur.v, s[i], &b, &nxt);
        struct u32v t = cur;
        cur = nxt;
        nxt = t;
    }
    b_free(&b);
    folio_free(nxt.v);
    *out = cur;
    return rc;
}

bool gram_ref_allows(const gram_matcher_t *m, const gram_vocab_t *v, int32_t budget, int32_t token)
{
    if (token < 0 || token >= v->n_vocab)
        return false;
    if (v->eog[token])
        return enc_accepting(m->enc);
    int32_t k = v->tok_pos[token];
    if (k < 0)
        return false;
    struct u32v out = {0};
    int rc =
        ref_run(m->g, m->enc, m->enc_len, (const uint8_t *)v->bytes + v->off[k], v->len[k], &out);
    bool ok = !rc && out.v[0] && (budget == GRAM_NO_BUDGET || enc_mc(m->g, out.v) <= budget - 1);
    folio_free(out.v);
    return ok;
}

int gram_match_text(const gram_t *g, const char *s, size_t n)
{
    struct u32v out = {0};
    int rc = ref_run(g, g->start, g->start_len, (const uint8_t *)s, n, &out);
    int r = rc || !out.v[0] ? -1 : enc_accepting(out.v) ? 1 : 0;
    folio_free(out.v);
    return r;
}
