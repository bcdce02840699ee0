/*
 * daemon/tools.c — structured output and tool calling (tools.h).
 *
 * Request side.  The api.c rows parse into p->tools (struct srv_tools);
 * srv__structured_finish then chooses at most one grammar for the
 * request (p->gen.grammar, shared by its choices, each of which gets its
 * own matcher in comp.c, and by later requests asking for the same
 * grammar: compile_shared):
 *
 *   tools + tool_choice required / named   the template's tool-call format
 *                                          (chat_tool_format) around
 *                                          {"name": N, ARGS: <N's parameters>}
 *                                          (several calls when parallel_tool_calls)
 *   response_format json_schema            the schema (json_schema.h)
 *   response_format json_object            any JSON object (or its "schema")
 *   grammar                                the GBNF-like text as given
 *
 * With tool_choice auto the model is free and its text is parsed after
 * the fact; with none, tools are neither shown to the model nor parsed.
 * Only one of response_format (json_*), grammar and a forced tool call may
 * be asked for at once (400 otherwise).  `strict` is accepted either way:
 * the grammar enforces the whole schema whether strict or not, and an
 * unsupported keyword is a 400 naming it in both cases.
 *
 * Response side.  A chat choice whose text is the format's tool calls
 * becomes an assistant message with tool_calls (ids "call_" + request id +
 * index) and finish_reason "tool_calls".  Streaming: while the text so far
 * may still be the start of a tool call it is held; once it is one, it is
 * held to the end and sent as one tool_calls delta per call (name and
 * complete arguments in one chunk: every SDK accepts that), then a chunk
 * with finish_reason "tool_calls".  Text that is not a call streams as
 * content as usual.
 */
#include "tools.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api_internal.h"
#include "folio/common.h"
#include "folio/grammar.h"
#include "folio/json_schema.h"
#include "render.h"
#include "server.h"

#define SRV_MAX_TOOLS 128

void srv_tools_free(struct srv_tools *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n_tools; i++) {
        folio_free(t->tools[i].name);
        folio_free(t->tools[i].params);
        folio_free(t->tools[i].def);
    }
    folio_free(t->tools);
    folio_free(t->schema);
    folio_free(t->gbnf);
    folio_free(t->named_name);
    folio_free(t);
}

static struct srv_tools *tools_of(struct srv_comp_params *p)
{
    if (!p->tools && (p->tools = folio_calloc(1, sizeof(*p->tools))))
        p->tools->parallel = true; /* OpenAI's default */
    return p->tools;
}

static int oom(struct srv_api_error *err)
{
    srv_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    return -ENOMEM;
}

/* A schema object re-printed as text; -EINVAL when it is not an object. */
static int schema_text(const cJSON *s, char **out)
{
    if (!cJSON_IsObject(s) && !cJSON_IsBool(s))
        return -EINVAL;
    char *t = cJSON_PrintUnformatted(s);
    if (!t)
        return -ENOMEM;
    *out = folio_strdup(t);
    cJSON_free(t);
    return *out ? 0 : -ENOMEM;
}

/* The schema converts (keywords supported): a 400 naming what does not. */
static int schema_check(const char *schema, const char *param, struct srv_api_error *err)
{
    char *g = NULL, msg[240] = "";
    int rc = json_schema_to_gbnf(schema, strlen(schema), &g, msg, sizeof(msg));
    folio_free(g);
    if (rc == -ENOMEM)
        return oom(err);
    if (rc)
        BAD(param, "'%s': %s", param, msg);
    return 0;
}

int srv__parse_response_format(const void *json, const struct eng_model_info *mi,
                               struct srv_comp_params *p, struct srv_api_error *err)
{
    const cJSON *v = json;
    (void)mi;
    if (cJSON_IsNull(v))
        return 0;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(v, "type");
    if (!cJSON_IsObject(v) || !cJSON_IsString(type))
        BAD("response_format", "'response_format' must be an object with a 'type'");
    struct srv_tools *t = tools_of(p);
    if (!t)
        return oom(err);
    const char *ty = type->valuestring;
    const cJSON *schema = NULL;
    if (!strcmp(ty, "text")) {
        t->rf = SRV_RF_TEXT;
        return 0;
    }
    if (!strcmp(ty, "json_object")) {
        t->rf = SRV_RF_JSON_OBJECT;
        schema = cJSON_GetObjectItemCaseSensitive(v, "schema"); /* llama-server's spelling */
    } else if (!strcmp(ty, "json_schema")) {
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(v, "json_schema");
        if (!cJSON_IsObject(js))
            BAD("response_format", "'response_format.json_schema' must be an object");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(js, "name");
        const cJSON *strict = cJSON_GetObjectItemCaseSensitive(js, "strict");
        if (name && !cJSON_IsString(name))
            BAD("response_format", "'response_format.json_schema.name' must be a string");
        if (strict && !cJSON_IsBool(strict) && !cJSON_IsNull(strict))
            BAD("response_format", "'response_format.json_schema.strict' must be a boolean");
        t->strict = cJSON_IsTrue(strict);
        schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
        if (!schema)
            BAD("response_format", "'response_format.json_schema.schema' is required");
        t->rf = SRV_RF_JSON_SCHEMA;
    } else
        BAD("response_format",
            "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
    if (schema) {
        int rc = schema_text(schema, &t->schema);
        if (rc == -ENOMEM)
            return oom(err);
        if (rc)
            BAD("response_format", "the response_format schema must be an object");
        return schema_check(t->schema, "response_format", err);
    }
    return 0;
}

int srv__parse_grammar(const void *json, const struct eng_model_info *mi, struct srv_comp_params *p,
                       struct srv_api_error *err)
{
    const cJSON *v = json;
    (void)mi;
    if (cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v))
        BAD("grammar", "'grammar' must be a string (GBNF-like grammar text)");
    struct srv_tools *t = tools_of(p);
    if (!t)
        return oom(err);
    folio_free(t->gbnf);
    if (!(t->gbnf = folio_strdup(v->valuestring)))
        return oom(err);
    return 0;
}

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

int srv__parse_tools(const void *json, const struct eng_model_info *mi, struct srv_comp_params *p,
                     struct srv_api_error *err)
{
    const cJSON *v = json;
    (void)mi;
    if (cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsArray(v))
        BAD("tools", "'tools' must be an array of {type: \"function\", function: {...}}");
    int n = cJSON_GetArraySize(v);
    if (n > SRV_MAX_TOOLS)
        BAD("tools", "at most %d tools", SRV_MAX_TOOLS);
    struct srv_tools *t = tools_of(p);
    if (!t || (n && !(t->tools = folio_calloc((size_t)n, sizeof(*t->tools)))))
        return oom(err);
    const cJSON *it;
    int i = 0;
    cJSON_ArrayForEach(it, v)
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(it, "type");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(it, "function");
        if (!cJSON_IsObject(it) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") ||
            !cJSON_IsObject(fn))
            BAD("tools", "tools[%d] must be {\"type\": \"function\", \"function\": {...}}", i);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        if (!cJSON_IsString(name) || !valid_name(name->valuestring))
            BAD("tools", "tools[%d].function.name must be 1-64 of a-z, A-Z, 0-9, _ - .", i);
        for (int k = 0; k < i; k++)
            if (!strcmp(t->tools[k].name, name->valuestring))
                BAD("tools", "two tools are named '%s'", name->valuestring);
        struct srv_tool *tl = &t->tools[i];
        t->n_tools = i + 1;
        if (!(tl->name = folio_strdup(name->valuestring)))
            return oom(err);
        int rc = params && !cJSON_IsNull(params) ? schema_text(params, &tl->params) : 0;
        if (!rc && !tl->params &&
            !(tl->params = folio_strdup("{\"type\":\"object\",\"properties\":{}}")))
            rc = -ENOMEM;
        if (rc == -ENOMEM)
            return oom(err);
        if (rc)
            BAD("tools", "tools[%d].function.parameters must be a JSON Schema object", i);
        if ((rc = schema_check(tl->params, "tools", err)))
            return rc;
        char *d = cJSON_PrintUnformatted(it);
        tl->def = d ? folio_strdup(d) : NULL;
        cJSON_free(d);
        if (!tl->def)
            return oom(err);
        i++;
    }
    return 0;
}

int srv__parse_tool_choice(const void *json, const struct eng_model_info *mi,
                           struct srv_comp_params *p, struct srv_api_error *err)
{
    const cJSON *v = json;
    (void)mi;
    if (cJSON_IsNull(v))
        return 0;
    struct srv_tools *t = tools_of(p);
    if (!t)
        return oom(err);
    if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        if (!strcmp(s, "auto"))
            t->choice = SRV_TC_AUTO;
        else if (!strcmp(s, "none"))
            t->choice = SRV_TC_NONE;
        else if (!strcmp(s, "required"))
            t->choice = SRV_TC_REQUIRED;
        else
            BAD("tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or "
                               "{\"type\": \"function\", \"function\": {\"name\": ...}}");
        return 0;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(v, "type");
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(v, "function");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    if (!cJSON_IsObject(v) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") ||
        !cJSON_IsString(name))
        BAD("tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or "
                           "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    t->choice = SRV_TC_NAMED;
    t->named = -1; /* matched against tools in srv__structured_finish */
    folio_free(t->named_name);
    if (!(t->named_name = folio_strdup(name->valuestring)))
        return oom(err);
    return 0;
}

int srv__parse_parallel_tool_calls(const void *json, const struct eng_model_info *mi,
                                   struct srv_comp_params *p, struct srv_api_error *err)
{
    const cJSON *v = json;
    (void)mi;
    if (cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsBool(v))
        BAD("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    struct srv_tools *t = tools_of(p);
    if (!t)
        return oom(err);
    t->parallel = cJSON_IsTrue(v);
    return 0;
}

bool srv_tools_offered(const struct srv_comp_params *p)
{
    return p->tools && p->tools->n_tools > 0 && p->tools->choice != SRV_TC_NONE;
}

/* root ::= OPEN call (SEP call)* CLOSE over the offered functions (or the
 * named one). */
static int tool_grammar(const struct srv_tools *t, js_gbnf_t *b, struct srv_api_error *err)
{
    const struct chat_tool_format *f = t->fmt;
    char **rules = folio_calloc((size_t)t->n_tools, sizeof(*rules));
    if (!rules)
        return oom(err);
    int rc = 0;
    char msg[240] = "";
    for (int i = 0; i < t->n_tools && !rc; i++) {
        if (t->choice == SRV_TC_NAMED && i != t->named)
            continue;
        const char *r;
        rc = js_gbnf_add(b, t->tools[i].params, strlen(t->tools[i].params), &r, msg, sizeof(msg));
        if (!rc && !(rules[i] = folio_strdup(r)))
            rc = -ENOMEM;
    }
    if (!rc) {
        js_gbnf_append(b, "call ::= ");
        bool first = true;
        for (int i = 0; i < t->n_tools; i++) {
            if (!rules[i])
                continue;
            char head[160];
            snprintf(head, sizeof(head), "{\"name\": \"%s\", \"%s\": ", t->tools[i].name,
                     f->args_key);
            js_gbnf_append(b, first ? "" : " | ");
            js_gbnf_literal(b, head, strlen(head));
            js_gbnf_append(b, " ");
            js_gbnf_append(b, rules[i]);
            js_gbnf_append(b, " \"}\"");
            first = false;
        }
        js_gbnf_append(b, "\nroot ::= ");
        js_gbnf_literal(b, f->calls_open, strlen(f->calls_open));
        js_gbnf_append(b, " call ");
        if (t->parallel && t->choice != SRV_TC_NAMED) {
            js_gbnf_append(b, "(");
            js_gbnf_literal(b, f->call_sep, strlen(f->call_sep));
            js_gbnf_append(b, " call)* ");
        }
        js_gbnf_literal(b, f->calls_close, strlen(f->calls_close));
        js_gbnf_append(b, "\n");
    }
    for (int i = 0; i < t->n_tools; i++)
        folio_free(rules[i]);
    folio_free(rules);
    if (rc == -ENOMEM)
        return oom(err);
    if (rc)
        BAD("tools", "tools: %s", msg);
    return 0;
}

/* Requests asking for the same grammar share one compiled gram_t, and so
 * its state and mask caches (warm after the first request).  The last
 * GRAM_SHARED distinct texts are kept (a reference each, least recently
 * used out).  Loop thread only, as request parsing; the engine thread
 * reaches a gram_t only through a request holding its own reference. */
#define GRAM_SHARED 8
static struct {
    char *src;
    gram_t *g;
    uint64_t used;
} shared[GRAM_SHARED];
static uint64_t shared_clock;

static int compile_shared(const char *src, gram_t **out, char *msg, size_t msglen)
{
    int lru = 0;
    for (int i = 0; i < GRAM_SHARED; i++) {
        if (shared[i].src && !strcmp(shared[i].src, src)) {
            shared[i].used = ++shared_clock;
            gram_ref(shared[i].g);
            *out = shared[i].g;
            return 0;
        }
        if (shared[i].used < shared[lru].used)
            lru = i;
    }
    int rc = gram_compile(src, strlen(src), out, msg, msglen);
    char *keep = rc ? NULL : folio_strdup(src);
    if (keep) {
        folio_free(shared[lru].src);
        gram_unref(shared[lru].g);
        gram_ref(*out);
        shared[lru].src = keep;
        shared[lru].g = *out;
        shared[lru].used = ++shared_clock;
    }
    return rc;
}

int srv__structured_finish(struct srv_comp_params *p, const struct eng_model_info *mi, int tmpl,
                           struct srv_api_error *err)
{
    struct srv_tools *t = p->tools;
    if (!t)
        return 0;
    if ((t->choice == SRV_TC_REQUIRED || t->choice == SRV_TC_NAMED) && t->n_tools == 0)
        BAD("tool_choice", "'tool_choice' %s needs 'tools'",
            t->choice == SRV_TC_NAMED ? "naming a function" : "\"required\"");
    if (t->choice == SRV_TC_NAMED) {
        t->named = -1;
        for (int i = 0; i < t->n_tools; i++)
            if (!strcmp(t->tools[i].name, t->named_name))
                t->named = i;
        if (t->named < 0)
            BAD("tool_choice", "'tool_choice' names '%.64s', which is not in 'tools'",
                t->named_name);
    }
    if (!t->fmt)
        t->fmt = chat_tool_format(tmpl > 0 ? (enum chat_template)tmpl : CHAT_TMPL_CHATML);
    bool forced = t->n_tools > 0 && (t->choice == SRV_TC_REQUIRED || t->choice == SRV_TC_NAMED);
    int asks = forced + (t->rf != SRV_RF_TEXT) + (t->gbnf != NULL);
    if (asks == 0)
        return 0;
    if (asks > 1)
        BAD(t->gbnf ? "grammar" : "response_format",
            "only one of 'response_format' (json), 'grammar' and a required tool call may be "
            "given");
    const char *param = forced ? "tool_choice" : t->gbnf ? "grammar" : "response_format";
    if (!mi->constrained)
        BAD(param, "this server cannot constrain its output (no tokenizer for the model)");
    if (p->gen.ignore_eos)
        BAD("ignore_eos", "'ignore_eos' cannot be combined with constrained output");
    char msg[240] = "";
    const char *text = t->gbnf;
    js_gbnf_t *b = NULL;
    int rc = 0;
    if (!text) {
        if (js_gbnf_new(&b))
            return oom(err);
        const char *rule = NULL;
        if (forced)
            rc = tool_grammar(t, b, err);
        else if (t->schema) {
            rc = js_gbnf_add(b, t->schema, strlen(t->schema), &rule, msg, sizeof(msg));
            if (rc && rc != -ENOMEM) {
                js_gbnf_free(b);
                BAD("response_format", "'response_format': %s", msg);
            }
        } else
            rule = js_gbnf_any_object(b);
        if (!rc && rule) {
            js_gbnf_append(b, "root ::= ");
            js_gbnf_append(b, rule);
            js_gbnf_append(b, "\n");
        }
        if (!rc)
            text = js_gbnf_text(b, NULL);
    }
    if (!rc) {
        rc = compile_shared(text, &p->gen.grammar, msg, sizeof(msg));
        if (rc == -EINVAL)
            srv_api_error_set(err, 400, "invalid_request_error", param, NULL, "'%s': %s", param,
                              msg);
    }
    js_gbnf_free(b);
    if (rc == -ENOMEM)
        return oom(err);
    return rc ? -EINVAL : 0;
}

/* ---- the response side ------------------------------------------------ */

void srv_tool_calls_free(struct srv_tool_call *calls, int n)
{
    for (int i = 0; i < n; i++) {
        folio_free(calls[i].name);
        folio_free(calls[i].arguments);
    }
    folio_free(calls);
}

static const char *skip_ws(const char *s, const char *end)
{
    while (s < end && (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r'))
        s++;
    return s;
}

static bool starts(const char *s, const char *end, const char *lit)
{
    size_t n = strlen(lit);
    return (size_t)(end - s) >= n && !memcmp(s, lit, n);
}

int srv_tool_calls_parse(const struct chat_tool_format *fmt, const char *text, size_t len,
                         struct srv_tool_call **calls, int *n, size_t *content_len)
{
    *calls = NULL;
    *n = 0;
    *content_len = len;
    const char *end = text + len, *s = NULL;
    /* the calls start at the first calls_open (for a bare-JSON format: at
     * the start of the text) */
    if (fmt->calls_open[0]) {
        const char *hit = NULL;
        for (const char *q = text; q < end && !hit; q++)
            if (starts(q, end, fmt->calls_open))
                hit = q;
        if (!hit)
            return 0;
        s = hit + strlen(fmt->calls_open);
    } else {
        s = skip_ws(text, end);
        if (s == end || *s != '{')
            return 0;
    }
    const char *open_at = fmt->calls_open[0] ? s - strlen(fmt->calls_open) : text;
    struct srv_tool_call *out = NULL;
    int cnt = 0, rc = 0;
    for (;;) {
        s = skip_ws(s, end);
        const char *pend = NULL;
        cJSON *o = cJSON_ParseWithLengthOpts(s, (size_t)(end - s), &pend, false);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, fmt->args_key);
        if (!cJSON_IsObject(o) || !cJSON_IsString(name) || !cJSON_IsObject(args)) {
            cJSON_Delete(o);
            break;
        }
        struct srv_tool_call *c = folio_realloc(out, (size_t)(cnt + 1) * sizeof(*c));
        char *a = cJSON_PrintUnformatted(args);
        if (c)
            out = c;
        if (!c || !a || !(out[cnt].name = folio_strdup(name->valuestring))) {
            cJSON_free(a);
            cJSON_Delete(o);
            rc = -ENOMEM;
            break;
        }
        out[cnt].arguments = folio_strdup(a);
        cJSON_free(a);
        cJSON_Delete(o);
        if (!out[cnt++].arguments) {
            rc = -ENOMEM;
            break;
        }
        s = pend;
        /* the separator and the close may differ only in their whitespace
         * from what the grammar writes: compare without it */
        const char *sep = skip_ws(fmt->call_sep, fmt->call_sep + strlen(fmt->call_sep));
        const char *q = skip_ws(s, end);
        if (*sep && starts(q, end, sep)) {
            s = q + strlen(sep);
            continue;
        }
        break;
    }
    if (rc || cnt == 0) {
        srv_tool_calls_free(out, cnt);
        return rc;
    }
    *calls = out;
    *n = cnt;
    *content_len = (size_t)(open_at - text);
    return 0;
}

int srv_tools_choice_calls(const struct srv_comp *comp, const struct srv_choice *ch,
                           const char *text, size_t len, struct srv_tool_call **calls, int *n,
                           size_t *content)
{
    const struct srv_tools *t = comp->p.tools;
    *calls = NULL;
    *n = 0;
    *content = len;
    if (ch->tool_mode == 1 || !srv_tools_offered(&comp->p) || !t->fmt)
        return 0;
    int rc = srv_tool_calls_parse(t->fmt, text, len, calls, n, content);
    if (rc || !*n) {
        *n = 0;
        *content = len;
    }
    return rc == -ENOMEM ? rc : 0;
}

static void tool_calls_json(struct folio_buf *b, const struct srv_comp *comp, int choice,
                            const struct srv_tool_call *c, int n)
{
    folio_buf_puts(b, "\"tool_calls\":[");
    for (int k = 0; k < n; k++) {
        if (k)
            folio_buf_puts(b, ",");
        folio_buf_printf(
            b, "{\"id\":\"call_%s_%d_%d\",\"type\":\"function\",\"function\":{\"name\":", comp->id,
            choice, k);
        folio_buf_json_str(b, c[k].name, strlen(c[k].name));
        folio_buf_puts(b, ",\"arguments\":");
        folio_buf_json_str(b, c[k].arguments, strlen(c[k].arguments));
        folio_buf_puts(b, "}}");
    }
    folio_buf_puts(b, "]");
}

bool srv_tools_render_choice(struct folio_buf *b, const struct srv_comp *comp,
                             const struct srv_choice *ch, int i)
{
    const struct srv_tools *t = comp->p.tools;
    if (!srv_tools_offered(&comp->p) || !t->fmt)
        return false;
    struct srv_tool_call *calls;
    int n;
    size_t content;
    if (srv_tool_calls_parse(t->fmt, ch->text.p ? ch->text.p : "", ch->text.len, &calls, &n,
                             &content) ||
        n == 0)
        return false;
    folio_buf_printf(
        b, "%s{\"index\":%d,\"message\":{\"role\":\"assistant\",\"content\":", i ? "," : "", i);
    if (content)
        folio_buf_json_str(b, ch->text.p, content);
    else
        folio_buf_puts(b, "null");
    folio_buf_puts(b, ",");
    tool_calls_json(b, comp, i, calls, n);
    folio_buf_puts(b, "},\"logprobs\":null,\"finish_reason\":\"tool_calls\"}");
    srv_tool_calls_free(calls, n);
    return true;
}

static void chunk_head(struct folio_buf *b, const struct srv_render *r, const struct srv_comp *comp)
{
    folio_buf_printf(b,
                     "data: {\"id\":\"%s\",\"object\":\"chat.completion.chunk\",\"created\":%lld,"
                     "\"model\":",
                     comp->id, (long long)comp->created);
    folio_buf_json_str(b, r->model, strlen(r->model));
}

/* Could text (everything the choice produced so far) still be, or be the
 * start of, a tool call? */
static bool may_be_call(const struct chat_tool_format *f, const char *text, size_t len)
{
    const char *end = text + len, *s = f->calls_open[0] ? text : skip_ws(text, end);
    const char *lit = f->calls_open[0] ? f->calls_open : "{";
    size_t n = strlen(lit), m = (size_t)(end - s);
    return !memcmp(s, lit, FOLIO_MIN(n, m));
}

int srv_tools_stream_hold(const struct srv_comp *comp, struct srv_choice *ch, bool final)
{
    const struct srv_tools *t = comp->p.tools;
    if (!srv_tools_offered(&comp->p) || !t->fmt || ch->tool_mode == 1)
        return 0;
    const char *text = ch->text.p ? ch->text.p : "";
    if (ch->tool_mode == 0) {
        /* undecided: nothing was sent yet, so text is the whole reply */
        if (!may_be_call(t->fmt, text, ch->text.len)) {
            ch->tool_mode = 1;
            return 0;
        }
        size_t lit = t->fmt->calls_open[0] ? strlen(t->fmt->calls_open) : 1;
        if (ch->text.len >= lit)
            ch->tool_mode = 2;
    }
    return final ? 2 : 1;
}

int srv_tools_stream(struct folio_buf *b, const struct srv_render *r, const struct srv_comp *comp,
                     struct srv_choice *ch, bool final)
{
    int h = comp->p.chat ? srv_tools_stream_hold(comp, ch, final) : 0;
    if (h != 2)
        return h;
    const struct srv_tools *t = comp->p.tools;
    const char *text = ch->text.p ? ch->text.p : "";
    struct srv_tool_call *calls;
    int n;
    size_t content;
    if (srv_tool_calls_parse(t->fmt, text, ch->text.len, &calls, &n, &content) || n == 0) {
        ch->tool_mode = 1; /* not a call after all: its text goes out as content */
        return 0;
    }
    if (!ch->role_sent) {
        chunk_head(b, r, comp);
        folio_buf_printf(b,
                         ",\"choices\":[{\"index\":%d,\"delta\":{\"role\":\"assistant\","
                         "\"content\":null},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
                         ch->index);
        ch->role_sent = true;
    }
    for (int k = 0; k < n; k++) {
        chunk_head(b, r, comp);
        folio_buf_printf(b, ",\"choices\":[{\"index\":%d,\"delta\":{", ch->index);
        struct srv_tool_call one = calls[k];
        /* one call per chunk, with its index among the calls */
        folio_buf_printf(b,
                         "\"tool_calls\":[{\"index\":%d,\"id\":\"call_%s_%d_%d\",\"type\":"
                         "\"function\",\"function\":{\"name\":",
                         k, comp->id, ch->index, k);
        folio_buf_json_str(b, one.name, strlen(one.name));
        folio_buf_puts(b, ",\"arguments\":");
        folio_buf_json_str(b, one.arguments, strlen(one.arguments));
        folio_buf_puts(b, "}}]},\"logprobs\":null,\"finish_reason\":null}]}\n\n");
    }
    chunk_head(b, r, comp);
    folio_buf_printf(b,
                     ",\"choices\":[{\"index\":%d,\"delta\":{},\"logprobs\":null,\"finish_reason\":"
                     "\"tool_calls\"}]}\n\n",
                     ch->index);
    srv_tool_calls_free(calls, n);
    ch->sent_tokens = ch->n_tokens;
    ch->text.len = 0;
    if (ch->text.p)
        ch->text.p[0] = 0;
    return 2;
}
