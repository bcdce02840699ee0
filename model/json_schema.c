/*
 * model/json_schema.c — JSON Schema to grammar text (folio/json_schema.h).
 *
 * What it owns: a builder holding the grammar text and the names of the
 * rules written so far.  Each schema node becomes one rule `sN`; shared
 * JSON rules (ws, string, number, ...) are written once, on first use.
 * $ref targets get one rule each, remembered by their pointer text, so
 * recursive schemas become recursive rules.
 *
 * Objects: properties are generated in schema order; with k properties the
 * rules sN_i_f / sN_i_r ("from property i on, first or after a comma") let
 * every optional property be present or absent with commas right, in 2k
 * rules:
 *
 *   sN     ::= "{" ws sN_0_f "}"
 *   sN_i_f ::= KV_i sN_{i+1}_r | sN_{i+1}_f      (second alternative only
 *   sN_i_r ::= "," ws KV_i sN_{i+1}_r | sN_{i+1}_r   when i is optional)
 *   sN_k_f ::= ""   sN_k_r ::= ""
 *
 * Threading: none (one builder per caller).
 */
#include "folio/json_schema.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"

#define JS_MAX_RULES 4096
#define JS_MAX_LEN   1000

struct js_ref {
    char *path;
    char name[16];
};

struct js_gbnf {
    char *text;
    size_t len, cap;
    int n_rules;
    unsigned prelude; /* shared rules written, bit per rule */
    struct js_ref *refs;
    int n_refs, cap_refs;
    char **names; /* rule names handed out */
    int n_names;
    int oom;
    /* during one js_gbnf_add */
    const cJSON *root;
    char *err;
    size_t errlen;
};

enum {
    P_WS = 1u,
    P_STRING = 2u,
    P_NUMBER = 4u,
    P_INTEGER = 8u,
    P_BOOL = 16u,
    P_NULL = 32u,
    P_VALUE = 64u,
    P_CHAR = 128u,
    P_BCHAR = 256u,
};

static int put(js_gbnf_t *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = FOLIO_MAX(2 * b->cap, b->len + n + 1024);
        char *t = folio_realloc(b->text, cap);
        if (!t) {
            b->oom = 1;
            return -ENOMEM;
        }
        b->text = t;
        b->cap = cap;
    }
    memcpy(b->text + b->len, s, n);
    b->len += n;
    b->text[b->len] = 0;
    return 0;
}

static int putf(js_gbnf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int putf(js_gbnf_t *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(tmp))
        return -EINVAL;
    return put(b, tmp, (size_t)n);
}

int js_gbnf_append(js_gbnf_t *b, const char *text)
{
    return put(b, text, strlen(text));
}

int js_gbnf_literal(js_gbnf_t *b, const char *s, size_t n)
{
    int rc = put(b, "\"", 1);
    for (size_t i = 0; i < n && !rc; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            rc = put(b, e, 2);
        } else if (c < 0x20 || c == 0x7f)
            rc = putf(b, "\\x%02x", c);
        else
            rc = put(b, (const char *)&c, 1);
    }
    return rc ? rc : put(b, "\"", 1);
}

/* A JSON value's text as a grammar literal. */
static int json_literal(js_gbnf_t *b, const cJSON *v)
{
    char *s = cJSON_PrintUnformatted(v);
    if (!s) {
        b->oom = 1;
        return -ENOMEM;
    }
    int rc = js_gbnf_literal(b, s, strlen(s));
    cJSON_free(s);
    return rc;
}

/* The shared rules, written on first use (after the current line: the
 * caller is between rule definitions). */
static const char *prelude(js_gbnf_t *b, unsigned which)
{
    static const struct {
        unsigned bit;
        const char *name, *def;
    } rules[] = {
        {P_WS, "ws", "ws ::= \" \"?\n"},
        {P_CHAR, "char", "char ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" [\"\\\\/bfnrt]\n"},
        {P_STRING, "string", "string ::= \"\\\"\" char* \"\\\"\"\n"},
        /* a character of a length-bounded string: one of the Basic
         * Multilingual Plane (no 4-byte UTF-8), so that JSON Schema's
         * length (code points) and JavaScript's (UTF-16 units: zod) agree */
        {P_BCHAR, "bchar",
         "bchar ::= [\\x20-\\x21\\x23-\\x5b\\x5d-\\x7f] | [\\xc2-\\xdf] [\\x80-\\xbf] | "
         "[\\xe0] [\\xa0-\\xbf] [\\x80-\\xbf] | [\\xe1-\\xec\\xee-\\xef] [\\x80-\\xbf] "
         "[\\x80-\\xbf] | [\\xed] [\\x80-\\x9f] [\\x80-\\xbf] | \"\\\\\" [\"\\\\/bfnrt]\n"},
        {P_INTEGER, "integer", "integer ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15})\n"},
        {P_NUMBER, "number", "number ::= integer (\".\" [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})?\n"},
        {P_BOOL, "boolean", "boolean ::= \"true\" | \"false\"\n"},
        {P_NULL, "null", "null ::= \"null\"\n"},
        {P_VALUE, "value",
         "value ::= object | array | string | number | boolean | null\n"
         "object ::= \"{\" ws (string ws \":\" ws value ws (\",\" ws string ws \":\" ws value "
         "ws)*)? "
         "\"}\"\n"
         "array ::= \"[\" ws (value ws (\",\" ws value ws)*)? \"]\"\n"},
    };
    static const unsigned needs[][2] = {
        {P_STRING, P_CHAR},
        {P_NUMBER, P_INTEGER},
        {P_VALUE, P_WS | P_STRING | P_CHAR | P_NUMBER | P_INTEGER | P_BOOL | P_NULL},
    };
    unsigned want = which;
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(needs); i++)
        if (which & needs[i][0])
            which |= needs[i][1];
    const char *name = NULL;
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(rules); i++) {
        if (!(which & rules[i].bit))
            continue;
        if (want == rules[i].bit)
            name = rules[i].name;
        if (!(b->prelude & rules[i].bit)) {
            b->prelude |= rules[i].bit;
            put(b, rules[i].def, strlen(rules[i].def));
        }
    }
    return name;
}

static int js_err(js_gbnf_t *b, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int js_err(js_gbnf_t *b, int rc, const char *fmt, ...)
{
    if (b->err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->err, b->errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static int new_rule(js_gbnf_t *b, char name[16])
{
    if (b->n_rules >= JS_MAX_RULES)
        return js_err(b, -EINVAL, "schema too large (more than %d nodes)", JS_MAX_RULES);
    snprintf(name, 16, "s%d", b->n_rules++);
    return 0;
}

static int node(js_gbnf_t *b, const cJSON *s, char name[16], int depth);

static bool is_annotation(const char *k)
{
    static const char *const ann[] = {
        "title",      "description", "default",   "examples", "$schema", "$id",        "$comment",
        "deprecated", "readOnly",    "writeOnly", "strict",   "$defs",   "definitions"};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(ann); i++)
        if (!strcmp(k, ann[i]))
            return true;
    return false;
}

/* Resolves a $ref; the rule name for its target. */
static int ref(js_gbnf_t *b, const char *path, char name[16], int depth)
{
    for (int i = 0; i < b->n_refs; i++)
        if (!strcmp(b->refs[i].path, path)) {
            memcpy(name, b->refs[i].name, 16);
            return 0;
        }
    if (path[0] != '#')
        return js_err(b, -ENOTSUP, "unsupported $ref '%.80s' (only local references)", path);
    const cJSON *t = b->root;
    const char *p = path + 1;
    while (*p == '/' && t) {
        p++;
        char key[128];
        size_t n = 0;
        while (*p && *p != '/' && n + 1 < sizeof(key)) {
            if (p[0] == '~' && (p[1] == '0' || p[1] == '1')) {
                key[n++] = p[1] == '0' ? '~' : '/';
                p += 2;
            } else
                key[n++] = *p++;
        }
        key[n] = 0;
        t = cJSON_IsObject(t) ? cJSON_GetObjectItemCaseSensitive(t, key) : NULL;
    }
    if (!t || *p)
        return js_err(b, -EINVAL, "$ref '%.80s' does not resolve", path);
    if (b->n_refs == b->cap_refs) {
        int cap = b->cap_refs ? 2 * b->cap_refs : 8;
        struct js_ref *r = folio_realloc(b->refs, (size_t)cap * sizeof(*r));
        if (!r)
            return -ENOMEM;
        b->refs = r;
        b->cap_refs = cap;
    }
    struct js_ref *r = &b->refs[b->n_refs];
    if (!(r->path = folio_strdup(path)))
        return -ENOMEM;
    int rc = new_rule(b, r->name);
    if (rc) {
        folio_free(r->path);
        return rc;
    }
    b->n_refs++;
    memcpy(name, r->name, 16);
    /* the target's own rule, and the ref rule pointing at it */
    char target[16];
    char refname[16];
    memcpy(refname, name, 16);
    if ((rc = node(b, t, target, depth + 1)))
        return rc;
    return putf(b, "%s ::= %s\n", refname, target);
}

static int type_rule(js_gbnf_t *b, const cJSON *s, const char *type, char name[16], int depth);

static int node(js_gbnf_t *b, const cJSON *s, char name[16], int depth)
{
    if (depth > 64)
        return js_err(b, -EINVAL, "schema nested too deeply");
    if (cJSON_IsTrue(s) || (cJSON_IsObject(s) && !s->child)) {
        snprintf(name, 16, "%s", prelude(b, P_VALUE));
        return 0;
    }
    if (!cJSON_IsObject(s))
        return js_err(b, -EINVAL, "a schema must be an object or true");
    /* every keyword is known before anything is written */
    static const char *const known[] = {
        "type",     "enum",     "const",    "properties", "required",  "additionalProperties",
        "items",    "minItems", "maxItems", "minLength",  "maxLength", "anyOf",
        "nullable", "$ref"};
    const cJSON *k;
    cJSON_ArrayForEach(k, s)
    {
        bool ok = is_annotation(k->string);
        for (size_t i = 0; i < FOLIO_ARRAY_LEN(known) && !ok; i++)
            ok = !strcmp(k->string, known[i]);
        if (!ok)
            return js_err(b, -ENOTSUP, "unsupported JSON-schema keyword '%.64s'", k->string);
    }
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (r) {
        if (!cJSON_IsString(r))
            return js_err(b, -EINVAL, "$ref must be a string");
        return ref(b, r->valuestring, name, depth);
    }
    int rc;
    const cJSON *nullable = cJSON_GetObjectItemCaseSensitive(s, "nullable");
    bool add_null = cJSON_IsTrue(nullable);
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if ((rc = new_rule(b, name)))
        return rc;
    /* alternatives first collected as rule names, written at the end */
    char alts[64][16];
    int n_alts = 0;
    if (en || cn) {
        if (en && (!cJSON_IsArray(en) || !en->child))
            return js_err(b, -EINVAL, "enum must be a non-empty array");
        char lit[16];
        if ((rc = new_rule(b, lit)))
            return rc;
        putf(b, "%s ::= ", lit);
        const cJSON *v = en ? en->child : cn;
        for (bool first = true; v; v = en ? v->next : NULL, first = false) {
            if (!first)
                put(b, " | ", 3);
            json_literal(b, v);
        }
        put(b, "\n", 1);
        memcpy(alts[n_alts++], lit, 16);
    } else if (any) {
        if (!cJSON_IsArray(any) || !any->child)
            return js_err(b, -EINVAL, "anyOf must be a non-empty array");
        const cJSON *v;
        cJSON_ArrayForEach(v, any)
        {
            if (n_alts >= 63)
                return js_err(b, -EINVAL, "anyOf with more than 63 schemas");
            if ((rc = node(b, v, alts[n_alts], depth + 1)))
                return rc;
            n_alts++;
        }
    } else if (cJSON_IsString(type)) {
        if ((rc = type_rule(b, s, type->valuestring, alts[n_alts], depth)))
            return rc;
        n_alts++;
    } else if (cJSON_IsArray(type)) {
        const cJSON *t;
        cJSON_ArrayForEach(t, type)
        {
            if (!cJSON_IsString(t) || n_alts >= 63)
                return js_err(b, -EINVAL, "type must be a name or a list of names");
            if ((rc = type_rule(b, s, t->valuestring, alts[n_alts], depth)))
                return rc;
            n_alts++;
        }
    } else if (type)
        return js_err(b, -EINVAL, "type must be a name or a list of names");
    else /* no type: whatever the structural keywords say, else any value */
        snprintf(alts[n_alts++], 16, "%s", prelude(b, P_VALUE));
    if (add_null)
        snprintf(alts[n_alts++], 16, "%s", prelude(b, P_NULL));
    putf(b, "%s ::= ", name);
    for (int i = 0; i < n_alts; i++)
        putf(b, "%s%s", i ? " | " : "", alts[i]);
    put(b, "\n", 1);
    return b->oom ? -ENOMEM : 0;
}

static int get_count(js_gbnf_t *b, const cJSON *s, const char *key, long *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    if (!v)
        return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > JS_MAX_LEN ||
        v->valuedouble != (double)(long)v->valuedouble)
        return js_err(b, -ENOTSUP, "'%s' must be an integer in [0, %d]", key, JS_MAX_LEN);
    *out = (long)v->valuedouble;
    return 0;
}

static int counts(js_gbnf_t *b, const cJSON *s, const char *kmin, const char *kmax, long *lo,
                  long *hi)
{
    *lo = 0;
    *hi = -1;
    int rc = get_count(b, s, kmin, lo);
    if (!rc)
        rc = get_count(b, s, kmax, hi);
    if (!rc && *hi >= 0 && *hi < *lo)
        rc = js_err(b, -EINVAL, "'%s' is below '%s'", kmax, kmin);
    return rc;
}

static int object_rule(js_gbnf_t *b, const cJSON *s, const char *name, int depth)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    const char *ws = prelude(b, P_WS);
    if (props && !cJSON_IsObject(props))
        return js_err(b, -EINVAL, "properties must be an object");
    if (req && !cJSON_IsArray(req))
        return js_err(b, -EINVAL, "required must be an array");
    const cJSON *r;
    cJSON_ArrayForEach(r, req)
    {
        if (!cJSON_IsString(r))
            return js_err(b, -EINVAL, "required must list property names");
        if (!cJSON_GetObjectItemCaseSensitive(props, r->valuestring))
            return js_err(b, -ENOTSUP,
                          "required property '%.64s' is not in properties (keyword 'required')",
                          r->valuestring);
    }
    int n = props ? cJSON_GetArraySize(props) : 0, rc;
    if (n == 0 && addl && cJSON_IsObject(addl) && addl->child) { /* a map */
        char v[16];
        if ((rc = node(b, addl, v, depth + 1)))
            return rc;
        const char *str = prelude(b, P_STRING);
        return putf(b,
                    "%s ::= \"{\" %s (%s %s \":\" %s %s %s (\",\" %s %s %s \":\" %s %s %s)*)? "
                    "\"}\"\n",
                    name, ws, str, ws, ws, v, ws, ws, str, ws, ws, v, ws);
    }
    if (addl && !cJSON_IsBool(addl) && !cJSON_IsObject(addl))
        return js_err(b, -EINVAL, "additionalProperties must be a boolean or a schema");
    /* values first (they write their own rules), then the chain */
    char(*vals)[16] = folio_calloc((size_t)(n ? n : 1), 16);
    if (!vals)
        return -ENOMEM;
    int i = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, props)
    {
        if ((rc = node(b, p, vals[i], depth + 1))) {
            folio_free(vals);
            return rc;
        }
        i++;
    }
    putf(b, "%s ::= \"{\" %s %s_0_f \"}\"\n", name, ws, name);
    i = 0;
    cJSON_ArrayForEach(p, props)
    {
        bool required = false;
        cJSON_ArrayForEach(r, req) required |= !strcmp(r->valuestring, p->string);
        cJSON *ks = cJSON_CreateString(p->string);
        char *kt = ks ? cJSON_PrintUnformatted(ks) : NULL;
        cJSON_Delete(ks);
        if (!kt) {
            folio_free(vals);
            return -ENOMEM;
        }
        for (int first = 1; first >= 0; first--) {
            putf(b, "%s_%d_%c ::= %s", name, i, first ? 'f' : 'r', first ? "" : "\",\" ");
            if (!first)
                putf(b, "%s ", ws);
            js_gbnf_literal(b, kt, strlen(kt));
            putf(b, " %s \":\" %s %s %s %s_%d_r", ws, ws, vals[i], ws, name, i + 1);
            if (!required)
                putf(b, " | %s_%d_%c", name, i + 1, first ? 'f' : 'r');
            put(b, "\n", 1);
        }
        cJSON_free(kt);
        i++;
    }
    putf(b, "%s_%d_f ::= \"\"\n%s_%d_r ::= \"\"\n", name, n, name, n);
    folio_free(vals);
    return b->oom ? -ENOMEM : 0;
}

static int type_rule(js_gbnf_t *b, const cJSON *s, const char *type, char name[16], int depth)
{
    int rc;
    long lo, hi;
    if (!strcmp(type, "string")) {
        if ((rc = counts(b, s, "minLength", "maxLength", &lo, &hi)))
            return rc;
        if (lo == 0 && hi < 0) {
            snprintf(name, 16, "%s", prelude(b, P_STRING));
            return 0;
        }
        const char *ch = prelude(b, hi < 0 ? P_CHAR : P_BCHAR);
        if ((rc = new_rule(b, name)))
            return rc;
        if (hi < 0)
            return putf(b, "%s ::= \"\\\"\" %s{%ld,} \"\\\"\"\n", name, ch, lo);
        return putf(b, "%s ::= \"\\\"\" %s{%ld,%ld} \"\\\"\"\n", name, ch, lo, hi);
    }
    if (!strcmp(type, "number") || !strcmp(type, "integer") || !strcmp(type, "boolean") ||
        !strcmp(type, "null")) {
        unsigned bit = type[0] == 'n' && type[1] == 'u' ? (type[2] == 'm' ? P_NUMBER : P_NULL)
                       : type[0] == 'i'                 ? P_INTEGER
                                                        : P_BOOL;
        snprintf(name, 16, "%s", prelude(b, bit));
        return 0;
    }
    if (!strcmp(type, "array")) {
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
        char it[16];
        if ((rc = counts(b, s, "minItems", "maxItems", &lo, &hi)))
            return rc;
        if ((rc = items ? node(b, items, it, depth + 1) : 0))
            return rc;
        if (!items)
            snprintf(it, 16, "%s", prelude(b, P_VALUE));
        const char *ws = prelude(b, P_WS);
        if ((rc = new_rule(b, name)))
            return rc;
        /* "[" ws (item ws ("," ws item ws){lo-1,hi-1})? "]" */
        if (hi == 0)
            return putf(b, "%s ::= \"[\" %s \"]\"\n", name, ws);
        putf(b, "%s ::= \"[\" %s %s(%s %s (\",\" %s %s %s)", name, ws, lo == 0 ? "(" : "", it, ws,
             ws, it, ws);
        long rlo = lo > 0 ? lo - 1 : 0, rhi = hi > 0 ? hi - 1 : -1;
        if (rhi < 0)
            putf(b, "{%ld,}", rlo);
        else
            putf(b, "{%ld,%ld}", rlo, rhi);
        return putf(b, ")%s \"]\"\n", lo == 0 ? ")?" : "");
    }
    if (!strcmp(type, "object")) {
        if ((rc = new_rule(b, name)))
            return rc;
        return object_rule(b, s, name, depth);
    }
    return js_err(b, -ENOTSUP, "unsupported type '%.32s'", type);
}

int js_gbnf_new(js_gbnf_t **out)
{
    *out = folio_calloc(1, sizeof(js_gbnf_t));
    return *out ? 0 : -ENOMEM;
}

void js_gbnf_free(js_gbnf_t *b)
{
    if (!b)
        return;
    for (int i = 0; i < b->n_refs; i++)
        folio_free(b->refs[i].path);
    for (int i = 0; i < b->n_names; i++)
        folio_free(b->names[i]);
    folio_free(b->names);
    folio_free(b->refs);
    folio_free(b->text);
    folio_free(b);
}

static const char *keep_name(js_gbnf_t *b, const char *name)
{
    char **n = folio_realloc(b->names, (size_t)(b->n_names + 1) * sizeof(*n));
    if (!n)
        return NULL;
    b->names = n;
    if (!(n[b->n_names] = folio_strdup(name)))
        return NULL;
    return n[b->n_names++];
}

int js_gbnf_add(js_gbnf_t *b, const char *schema, size_t len, const char **rule, char *err,
                size_t errlen)
{
    *rule = NULL;
    b->err = err;
    b->errlen = errlen;
    cJSON *root = cJSON_ParseWithLength(schema, len);
    if (!root)
        return js_err(b, -EINVAL, "schema is not valid JSON");
    /* refs resolve within this schema only */
    for (int i = 0; i < b->n_refs; i++)
        folio_free(b->refs[i].path);
    b->n_refs = 0;
    b->root = root;
    char name[16];
    int rc = node(b, root, name, 0);
    b->root = NULL;
    cJSON_Delete(root);
    if (!rc && b->oom)
        rc = -ENOMEM;
    if (!rc && !(*rule = keep_name(b, name)))
        rc = -ENOMEM;
    if (rc == -ENOMEM)
        js_err(b, rc, "out of memory");
    return rc;
}

const char *js_gbnf_any_object(js_gbnf_t *b)
{
    prelude(b, P_VALUE);
    return "object";
}

const char *js_gbnf_text(const js_gbnf_t *b, size_t *len)
{
    if (len)
        *len = b->len;
    return b->text ? b->text : "";
}

int json_schema_to_gbnf(const char *schema, size_t len, char **gbnf, char *err, size_t errlen)
{
    *gbnf = NULL;
    js_gbnf_t *b;
    if (js_gbnf_new(&b))
        return -ENOMEM;
    const char *rule;
    int rc = js_gbnf_add(b, schema, len, &rule, err, errlen);
    if (!rc)
        rc = putf(b, "root ::= %s\n", rule);
    if (!rc && !(*gbnf = folio_strdup(js_gbnf_text(b, NULL))))
        rc = -ENOMEM;
    js_gbnf_free(b);
    return rc;
}
