/*
 * tests/test_grammar.c — constrained decoding (folio/grammar.h) and JSON
 * Schema to grammar (folio/json_schema.h):
 *   - grammar texts: what compiles, what is refused and why, which texts
 *     are complete documents, prefixes or neither;
 *   - the fast mask (cached states, vocabulary walk) against the plain
 *     reference (the automaton re-run over each token's bytes) on random
 *     walks through random vocabularies, with and without a token budget;
 *   - random schemas: documents generated under the mask by random draws
 *     always parse (cJSON) and validate (a validator for the supported
 *     subset, below), and close within the budget;
 *   - unsupported keywords are refused by name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "folio/common.h"
#include "folio/grammar.h"
#include "folio/json_schema.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

static gram_t *compile_ok(const char *src)
{
    gram_t *g = NULL;
    char err[256] = "";
    int rc = gram_compile(src, strlen(src), &g, err, sizeof(err));
    if (rc)
        fail_msg("compile failed: %s\n%s", err, src);
    return g;
}

static void test_compile_errors(void **state)
{
    (void)state;
    static const struct {
        const char *src, *want;
    } bad[] = {
        {"root ::= a\n", "not defined"},
        {"a ::= \"x\"\n", "no 'root'"},
        {"root ::= root \"x\" | \"y\"\n", "left recursion"},
        {"root ::= a\na ::= b? root \"x\" | \"z\"\nb ::= \"b\"\n", "left recursion"},
        {"root ::= \"x\" root\n", "never end"},
        {"root ::= [z-a]\n", "empty range"},
        {"root ::= \"abc\n", "newline"},
        {"root ::= [é]\n", "ASCII"},
        {"root ::= \"a\"{3,2}\n", "repetition"},
        {"root ::= \"a\" )\n", "unexpected"},
        {"root ::= x{2,}\nx ::= \"\" | \"z\"\n", "left recursion"}, /* star of a nullable */
        {"root ::= \"a\"\nroot ::= \"b\"\n", "twice"},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(bad); i++) {
        gram_t *g = NULL;
        char err[256] = "";
        int rc = gram_compile(bad[i].src, strlen(bad[i].src), &g, err, sizeof(err));
        assert_int_equal(rc, -EINVAL);
        assert_null(g);
        if (!strstr(err, bad[i].want))
            fail_msg("%s: got '%s', want '%s'", bad[i].src, err, bad[i].want);
    }
}

/* hostile grammars cost bounded time and stack */
static void test_hostile(void **state)
{
    (void)state;
    char src[512] = "root ::= ";
    for (int i = 0; i < 70; i++)
        strcat(src, "(");
    strcat(src, "\"a\"");
    for (int i = 0; i < 70; i++)
        strcat(src, ")");
    gram_t *g = NULL;
    char err[256] = "";
    assert_int_equal(gram_compile(src, strlen(src), &g, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "nested"));
    /* 2^60 ways to derive the empty prefix: the expansion budget cuts it */
    char amb[1024] = "e ::= \"\" | \"\"\nroot ::= ";
    for (int i = 0; i < 60; i++)
        strcat(amb, "e ");
    strcat(amb, "\"x\"\n");
    uint64_t t0 = folio_now_ns();
    assert_int_equal(gram_compile(amb, strlen(amb), &g, err, sizeof(err)), 0);
    assert_true(gram_match_text(g, "x", 1) <= 1);
    assert_true(folio_now_ns() - t0 < 5000000000ull);
    gram_unref(g);
}

static void test_match_text(void **state)
{
    (void)state;
    gram_t *g = compile_ok("root ::= \"{\" pair (\",\" pair)* \"}\"  # comment\n"
                           "pair ::= [a-c]+ \":\" num\n"
                           "num ::= \"-\"? [0-9]{1,3}\n");
    assert_int_equal(gram_match_text(g, "{a:1}", 5), 1);
    assert_int_equal(gram_match_text(g, "{ab:-12,c:999}", 14), 1);
    assert_int_equal(gram_match_text(g, "{ab:-12,c:9999}", 15), -1);
    assert_int_equal(gram_match_text(g, "{ab:", 4), 0);
    assert_int_equal(gram_match_text(g, "", 0), 0);
    assert_int_equal(gram_match_text(g, "{d", 2), -1);
    assert_int_equal(gram_match_text(g, "{a:1}x", 6), -1);
    gram_unref(g);
    /* . and negated classes take whole UTF-8 characters only */
    g = compile_ok("root ::= \"<\" [^>]* \">\" .\n");
    assert_int_equal(gram_match_text(g, "<h\xc3\xa9>\xe2\x82\xac", 8), 1);
    assert_int_equal(gram_match_text(g, "<\xc3", 2), 0);
    assert_int_equal(gram_match_text(g, "<\xc3(", 3), -1);
    assert_int_equal(gram_match_text(g, "<\xed\xa0\x80>", 5), -1); /* surrogate */
    assert_int_equal(gram_match_text(g, "<\xc0\xaf>", 4), -1);     /* overlong */
    assert_int_equal(gram_match_text(g, "<>\xff", 3), -1);
    gram_unref(g);
    /* escapes, bounded and open repetition, groups, empty alternatives */
    g = compile_ok(
        "root ::= (\"\\x41\" | \"\\u00e9\") \"\\n\"{2} ab{2,} opt\nab ::= \"y\" | \"z\"\n"
        "opt ::= \"\" | \"!\"\n");
    assert_int_equal(gram_match_text(g, "A\n\nyz", 5), 1);
    assert_int_equal(gram_match_text(g, "\xc3\xa9\n\nzzz!", 8), 1);
    assert_int_equal(gram_match_text(g, "A\n\ny", 4), 0);
    assert_int_equal(gram_match_text(g, "A\n\nyz!!", 7), -1);
    gram_unref(g);
    /* an empty literal repeated is empty (found by fuzz_grammar) */
    g = compile_ok("root ::= (\"\"+ \"x\"\"\"*)\n");
    assert_int_equal(gram_match_text(g, "x", 1), 1);
    gram_unref(g);
}

/* ---- fast mask vs reference ---------------------------------------- */

struct vocab {
    int32_t n;
    char **piece;
    size_t *len;
    bool *eog;
    gram_vocab_t *v;
};

/* Every single byte, EOG at 0, an empty control token, then random
 * strings over alphabet (with repeats, so prefixes are shared). */
static void vocab_make(struct vocab *vc, int32_t n, const char *alphabet)
{
    vc->n = n;
    vc->piece = calloc((size_t)n, sizeof(char *));
    vc->len = calloc((size_t)n, sizeof(size_t));
    vc->eog = calloc((size_t)n, sizeof(bool));
    size_t na = strlen(alphabet);
    for (int32_t i = 0; i < n; i++) {
        char buf[16];
        size_t l;
        if (i == 0) {
            l = 0;
            vc->eog[i] = true;
        } else if (i == 1)
            l = 0; /* a control token: never allowed */
        else if (i < 2 + 256) {
            buf[0] = (char)(i - 2);
            l = 1;
        } else {
            l = 1 + rnd() % 6;
            for (size_t k = 0; k < l; k++)
                buf[k] = alphabet[rnd() % na];
        }
        vc->piece[i] = malloc(l + 1);
        memcpy(vc->piece[i], buf, l);
        vc->len[i] = l;
    }
    assert_int_equal(gram_vocab_new(n, (const char *const *)vc->piece, vc->len, vc->eog, &vc->v),
                     0);
}

static void vocab_free(struct vocab *vc)
{
    for (int32_t i = 0; i < vc->n; i++)
        free(vc->piece[i]);
    free(vc->piece);
    free(vc->len);
    free(vc->eog);
    gram_vocab_free(vc->v);
}

/* One random walk: at every step the fast mask equals the reference for
 * every token (the reference with the budget, or without it when the
 * budget leaves nothing, as the fast path does), the logits apply writes
 * agree with the mask, then a random allowed token is accepted.  Returns
 * the generated text (malloc'd) and whether it ended complete. */
static char *walk(gram_t *g, struct vocab *vc, int32_t max_tokens, bool check, bool *complete)
{
    gram_matcher_t *m;
    assert_int_equal(gram_matcher_new(g, &m), 0);
    size_t nw = ((size_t)vc->n + 63) / 64;
    uint64_t *w = malloc(nw * 8);
    float *logits = malloc((size_t)vc->n * sizeof(float));
    char *text = calloc(1, 1);
    size_t tl = 0;
    *complete = false;
    for (int32_t t = 0; t < max_tokens; t++) {
        int32_t budget = max_tokens - t;
        int n_ok = gram_matcher_mask(m, vc->v, budget, w);
        assert_true(n_ok > 0);
        if (check) {
            int n_ref = 0;
            for (int32_t i = 0; i < vc->n; i++)
                n_ref += !vc->eog[i] && gram_ref_allows(m, vc->v, budget, i);
            int32_t b = n_ref == 0 && !gram_matcher_accepting(m) ? GRAM_NO_BUDGET : budget;
            for (int32_t i = 0; i < vc->n; i++) {
                bool fast = w[i >> 6] >> (i & 63) & 1;
                bool ref = gram_ref_allows(m, vc->v, b, i);
                if (fast != ref)
                    fail_msg("token %d ('%.*s') fast %d ref %d at step %d after '%s'", i,
                             (int)vc->len[i], vc->piece[i], fast, ref, t, text);
            }
            for (int32_t i = 0; i < vc->n; i++)
                logits[i] = (float)i;
            assert_int_equal(gram_matcher_apply(m, vc->v, budget, logits), n_ok);
            for (int32_t i = 0; i < vc->n; i++)
                assert_true((w[i >> 6] >> (i & 63) & 1) ? logits[i] == (float)i : isinf(logits[i]));
        }
        /* a random allowed token */
        int32_t pick = (int32_t)(rnd() % (uint32_t)n_ok), tok = -1;
        for (int32_t i = 0; i < vc->n && tok < 0; i++)
            if (w[i >> 6] >> (i & 63) & 1 && pick-- == 0)
                tok = i;
        assert_true(tok >= 0);
        if (vc->eog[tok]) {
            *complete = true;
            break;
        }
        assert_int_equal(gram_matcher_accept(m, vc->v, tok), 0);
        text = realloc(text, tl + vc->len[tok] + 1);
        memcpy(text + tl, vc->piece[tok], vc->len[tok]);
        tl += vc->len[tok];
        text[tl] = 0;
        if (gram_matcher_finished(m)) {
            *complete = true;
            break;
        }
    }
    if (!*complete)
        *complete = gram_matcher_accepting(m);
    /* a token the mask refuses is refused by accept, state unchanged */
    gram_matcher_free(m);
    free(w);
    free(logits);
    return text;
}

static const char *const test_grammars[] = {
    "root ::= \"{\" ws (kv (\",\" ws kv)*)? \"}\"\n"
    "kv ::= \"\\\"\" [a-c]* \"\\\"\" ws \":\" ws val ws\n"
    "val ::= [0-9]+ | root | \"[\" ws (val (\",\" ws val)*)? \"]\"\n"
    "ws ::= \" \"?\n",
    "root ::= (\"ab\" | \"a\" \"b\"? \"c\" | [a-c]{2,4}) root2\nroot2 ::= \"!\" | \"\"\n",
    "root ::= x+\nx ::= \"abc\" | \"ab\" | \"b\" | \"[\" x* \"]\"\n",
};

static void test_fast_vs_reference(void **state)
{
    (void)state;
    struct vocab vc;
    vocab_make(&vc, 2000, "{}[]\",: abc0123456789!");
    for (size_t gi = 0; gi < FOLIO_ARRAY_LEN(test_grammars); gi++) {
        gram_t *g = compile_ok(test_grammars[gi]);
        for (int rep = 0; rep < 25; rep++) {
            bool complete;
            int32_t max_tokens = 2 + (int32_t)(rnd() % 40);
            char *text = walk(g, &vc, max_tokens, true, &complete);
            int r = gram_match_text(g, text, strlen(text));
            assert_true(r >= 0);
            if (complete)
                assert_int_equal(r, 1);
            free(text);
        }
        gram_unref(g);
    }
    vocab_free(&vc);
}

/* accept refuses what the mask refuses and leaves the state alone */
static void test_accept_refuses(void **state)
{
    (void)state;
    struct vocab vc;
    vocab_make(&vc, 400, "ab");
    gram_t *g = compile_ok("root ::= \"ab\"\n");
    gram_matcher_t *m;
    assert_int_equal(gram_matcher_new(g, &m), 0);
    gram_unref(g); /* the matcher holds its own reference */
    assert_int_equal(gram_matcher_accept(m, vc.v, 2 + 'b'), -EINVAL);
    assert_int_equal(gram_matcher_accept(m, vc.v, 0), -EINVAL); /* EOG before the end */
    assert_int_equal(gram_matcher_accept(m, vc.v, 1), -EINVAL); /* empty piece */
    assert_int_equal(gram_matcher_accept(m, vc.v, 2 + 'a'), 0);
    assert_false(gram_matcher_accepting(m));
    assert_int_equal(gram_matcher_accept(m, vc.v, 2 + 'b'), 0);
    assert_true(gram_matcher_finished(m));
    assert_int_equal(gram_matcher_accept(m, vc.v, 0), 0);
    assert_int_equal(gram_matcher_n_accepted(m), 3);
    gram_matcher_free(m);
    vocab_free(&vc);
}

/* ---- JSON Schema ----------------------------------------------------- */

static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* The supported subset's validation rules (what the grammar must ensure). */
static bool validate(const cJSON *s, const cJSON *v, const cJSON *root, int depth)
{
    if (depth > 50)
        return false;
    if (cJSON_IsTrue(s))
        return true;
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (r) {
        const cJSON *t = root;
        if (strcmp(r->valuestring, "#")) {
            const char *name = strrchr(r->valuestring, '/') + 1;
            t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "$defs"),
                                                 name);
        }
        return validate(t, v, root, depth + 1);
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "nullable")) && cJSON_IsNull(v))
        return true;
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum"), *it;
    if (en) {
        cJSON_ArrayForEach(it, en) if (cJSON_Compare(it, v, true)) return true;
        return false;
    }
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    if (any) {
        cJSON_ArrayForEach(it, any) if (validate(it, v, root, depth + 1)) return true;
        return false;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (!type)
        return true;
    const char *t = type->valuestring;
    if (!strcmp(t, "string")) {
        if (!cJSON_IsString(v))
            return false;
        const cJSON *lo = cJSON_GetObjectItemCaseSensitive(s, "minLength");
        const cJSON *hi = cJSON_GetObjectItemCaseSensitive(s, "maxLength");
        size_t n = utf8_chars(v->valuestring);
        return (!lo || n >= (size_t)lo->valuedouble) && (!hi || n <= (size_t)hi->valuedouble);
    }
    if (!strcmp(t, "integer"))
        return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
    if (!strcmp(t, "number"))
        return cJSON_IsNumber(v);
    if (!strcmp(t, "boolean"))
        return cJSON_IsBool(v);
    if (!strcmp(t, "null"))
        return cJSON_IsNull(v);
    if (!strcmp(t, "array")) {
        if (!cJSON_IsArray(v))
            return false;
        const cJSON *lo = cJSON_GetObjectItemCaseSensitive(s, "minItems");
        const cJSON *hi = cJSON_GetObjectItemCaseSensitive(s, "maxItems");
        int n = cJSON_GetArraySize(v);
        if ((lo && n < lo->valuedouble) || (hi && n > hi->valuedouble))
            return false;
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
        cJSON_ArrayForEach(it, v) if (items && !validate(items, it, root, depth + 1)) return false;
        return true;
    }
    if (!strcmp(t, "object")) {
        if (!cJSON_IsObject(v))
            return false;
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
        const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
        cJSON_ArrayForEach(
            it, req) if (!cJSON_GetObjectItemCaseSensitive(v, it->valuestring)) return false;
        cJSON_ArrayForEach(it, v)
        {
            const cJSON *ps = cJSON_GetObjectItemCaseSensitive(props, it->string);
            if (!ps) /* additionalProperties false in every generated schema */
                return false;
            if (!validate(ps, it, root, depth + 1))
                return false;
            /* no duplicate keys */
            int seen = 0;
            const cJSON *o;
            cJSON_ArrayForEach(o, v) seen += !strcmp(o->string, it->string);
            if (seen != 1)
                return false;
        }
        return true;
    }
    return false;
}

static cJSON *rand_schema(int depth, bool *has_ref)
{
    cJSON *s = cJSON_CreateObject();
    int kind = (int)(rnd() % (depth < 3 ? 10u : 6u));
    static const char *const words[] = {"id", "name", "a", "ab", "tags", "x y", "é", "q\"t"};
    switch (kind) {
    case 0:
        cJSON_AddStringToObject(s, "type", "string");
        if (rnd() % 2) {
            int lo = (int)(rnd() % 3);
            cJSON_AddNumberToObject(s, "minLength", lo);
            cJSON_AddNumberToObject(s, "maxLength", lo + (int)(rnd() % 5));
        }
        break;
    case 1:
        cJSON_AddStringToObject(s, "type", "integer");
        break;
    case 2:
        cJSON_AddStringToObject(s, "type", "number");
        break;
    case 3:
        cJSON_AddStringToObject(s, "type", "boolean");
        if (rnd() % 3 == 0)
            cJSON_AddTrueToObject(s, "nullable");
        break;
    case 4: {
        cJSON *e = cJSON_AddArrayToObject(s, "enum");
        cJSON_AddItemToArray(e, cJSON_CreateString("red"));
        cJSON_AddItemToArray(e, cJSON_CreateNumber(rnd() % 100));
        cJSON_AddItemToArray(e, cJSON_CreateNull());
        cJSON_AddItemToArray(e, cJSON_CreateString("r\u00e9d \"x\""));
        break;
    }
    case 5:
        if (*has_ref && rnd() % 2) {
            cJSON_AddStringToObject(s, "$ref", "#/$defs/node");
            break;
        }
        cJSON_AddStringToObject(s, "type", "null");
        break;
    case 6:
    case 7: {
        cJSON_AddStringToObject(s, "type", "object");
        cJSON *p = cJSON_AddObjectToObject(s, "properties");
        cJSON *r = cJSON_AddArrayToObject(s, "required");
        int n = (int)(rnd() % 4);
        for (int i = 0; i < n; i++) {
            const char *w = words[(size_t)i * 2 + rnd() % 2];
            if (cJSON_GetObjectItemCaseSensitive(p, w))
                continue;
            cJSON_AddItemToObject(p, w, rand_schema(depth + 1, has_ref));
            if (rnd() % 2)
                cJSON_AddItemToArray(r, cJSON_CreateString(w));
        }
        cJSON_AddFalseToObject(s, "additionalProperties");
        break;
    }
    case 8:
        cJSON_AddStringToObject(s, "type", "array");
        cJSON_AddItemToObject(s, "items", rand_schema(depth + 1, has_ref));
        if (rnd() % 2) {
            cJSON_AddNumberToObject(s, "minItems", rnd() % 2);
            cJSON_AddNumberToObject(s, "maxItems", 1 + rnd() % 3);
        }
        break;
    default: {
        cJSON *a = cJSON_AddArrayToObject(s, "anyOf");
        cJSON_AddItemToArray(a, rand_schema(depth + 1, has_ref));
        cJSON_AddItemToArray(a, rand_schema(depth + 1, has_ref));
        break;
    }
    }
    if (rnd() % 4 == 0)
        cJSON_AddStringToObject(s, "description", "ignored");
    return s;
}

static void test_schema_random(void **state)
{
    (void)state;
    struct vocab vc;
    vocab_make(&vc, 3000, "{}[]\",:  abcdeéRr0123456789.-+eEtrufalsn\\\"");
    int n = getenv("FOLIO_TEST_SHORT") ? 60 : 300;
    for (int k = 0; k < n; k++) {
        bool has_ref = rnd() % 3 == 0;
        cJSON *sch = rand_schema(0, &has_ref);
        if (has_ref) { /* a recursive definition: {value, next?: node} */
            cJSON *defs = cJSON_AddObjectToObject(sch, "$defs");
            cJSON *node = cJSON_Parse("{\"type\":\"object\",\"properties\":{\"v\":{\"type\":"
                                      "\"integer\"},\"next\":{\"$ref\":\"#/$defs/node\"}},"
                                      "\"required\":[\"v\"],\"additionalProperties\":false}");
            cJSON_AddItemToObject(defs, "node", node);
        }
        char *st = cJSON_PrintUnformatted(sch);
        char *gbnf = NULL, err[256] = "";
        int rc = json_schema_to_gbnf(st, strlen(st), &gbnf, err, sizeof(err));
        if (rc)
            fail_msg("schema %s: %s", st, err);
        gram_t *g = compile_ok(gbnf);
        bool complete;
        char *text = walk(g, &vc, 200, k < 20, &complete);
        if (!complete)
            fail_msg("schema %s: not complete within 200 tokens: %s", st, text);
        cJSON *doc = cJSON_Parse(text);
        if (!doc)
            fail_msg("schema %s: output does not parse: %s\n%s", st, text, gbnf);
        if (!validate(sch, doc, sch, 0))
            fail_msg("schema %s: output does not validate: %s", st, text);
        cJSON_Delete(doc);
        free(text);
        gram_unref(g);
        free(gbnf);
        cJSON_free(st);
        cJSON_Delete(sch);
    }
    vocab_free(&vc);
}

static void test_schema_refused(void **state)
{
    (void)state;
    static const struct {
        const char *schema, *want;
    } bad[] = {
        {"{\"type\":\"string\",\"pattern\":\"a+\"}", "'pattern'"},
        {"{\"type\":\"string\",\"format\":\"email\"}", "'format'"},
        {"{\"type\":\"integer\",\"minimum\":3}", "'minimum'"},
        {"{\"oneOf\":[{\"type\":\"string\"}]}", "'oneOf'"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"allOf\":[]}}}", "'allOf'"},
        {"{\"type\":\"object\",\"required\":[\"b\"]}", "'required'"},
        {"{\"type\":\"tuple\"}", "'tuple'"},
        {"{\"$ref\":\"#/$defs/none\"}", "does not resolve"},
        {"{\"$ref\":\"http://x/y\"}", "local"},
        {"[1]", "object"},
        {"{\"type\":\"string\",\"maxLength\":5000}", "maxLength"},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(bad); i++) {
        char *gbnf = NULL, err[256] = "";
        int rc = json_schema_to_gbnf(bad[i].schema, strlen(bad[i].schema), &gbnf, err, sizeof(err));
        assert_true(rc == -ENOTSUP || rc == -EINVAL);
        assert_null(gbnf);
        if (!strstr(err, bad[i].want))
            fail_msg("%s: got '%s', want '%s'", bad[i].schema, err, bad[i].want);
    }
    /* annotations and strict are fine */
    const char *ok =
        "{\"title\":\"t\",\"type\":\"object\",\"strict\":true,\"$schema\":\"x\","
        "\"properties\":{\"a\":{\"type\":[\"string\",\"null\"],\"description\":\"d\"}},"
        "\"required\":[\"a\"],\"additionalProperties\":false}";
    char *gbnf = NULL, err[256] = "";
    assert_int_equal(json_schema_to_gbnf(ok, strlen(ok), &gbnf, err, sizeof(err)), 0);
    gram_t *g = compile_ok(gbnf);
    assert_int_equal(gram_match_text(g, "{\"a\": null}", 11), 1);
    assert_int_equal(gram_match_text(g, "{\"a\":\"x\\n\"}", 11), 1);
    assert_int_equal(gram_match_text(g, "{}", 2), -1);
    gram_unref(g);
    free(gbnf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compile_errors), cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_match_text),     cmocka_unit_test(test_fast_vs_reference),
        cmocka_unit_test(test_accept_refuses), cmocka_unit_test(test_schema_random),
        cmocka_unit_test(test_schema_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
