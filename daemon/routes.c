/*
 * daemon/routes.c — the route table ({method, path, handler}) and the
 * small routes: /v1/models (and /v1/models/{id}), /health, /metrics,
 * /v1/kv, /dashboard, /version, /tokenize, /detokenize, /apply-template.
 * The completion and embedding routes live in comp.c.  A path that no row names is a
 * 404; a known path with another method a 405
 * (with Allow).
 *
 * Each row's access column says who may call it (auth.h): PUBLIC (only
 * /health), TENANT (any caller, as its tenant), VIEW (the operator; a
 * tenant gets 403, or with --tenant-views own its own entries only).  The
 * caller is resolved before the handler runs; a refused one gets 401/403
 * on every route but /health, whatever the path and method.
 *
 * Access log: every routed request gets one line (srv_log_access) when its
 * response is complete: here, right after the handler, for the requests
 * answered at once; by comp.c at the end for a completion it holds (it sets
 * s->access_claimed).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dashboard.h"
#include "folio/common.h"
#include "render.h"
#include "resp_store.h"
#include "server.h"

int srv_tokenize_hook(void *ctx, const char *text, size_t n, bool special, int32_t **out,
                      int32_t *n_out)
{
    struct srv *s = ctx;
    if (!s->ops->tokenize)
        return -ENOSYS;
    return s->ops->tokenize(s->backend, text, n, special, out, n_out);
}

int srv_ids_text(struct srv *s, const int32_t *ids, int32_t n, struct folio_buf *out)
{
    tok_detok_t *d = NULL;
    int rc = tok_detok_new(NULL, NULL, 0, 0, &d);
    if (rc)
        return rc;
    const char *t;
    size_t len;
    char bytes[256];
    for (int32_t i = 0; i < n; i++) {
        int k = s->ops->detok(s->backend, ids[i], bytes, sizeof(bytes));
        if (k > 0 && tok_detok_feed_bytes(d, bytes, (size_t)k, &t, &len) >= 0)
            folio_buf_append(out, t, len);
    }
    tok_detok_flush(d, &t, &len);
    folio_buf_append(out, t, len);
    tok_detok_free(d);
    return out->oom ? -ENOMEM : 0;
}

static void respond_buf(struct http_conn *c, int status, const char *ctype, struct folio_buf *b)
{
    if (b->oom) {
        struct srv_api_error e;
        srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        http_error(c, &e, NULL);
    } else
        http_respond(c, status, ctype, b->p ? b->p : "", b->len, NULL);
    folio_buf_free(b);
}

/* Fields a request carried that foliod does not know: ignored (one debug
 * line naming them, counted in /metrics), or with --strict-api a 400.
 * Returns true when the request is refused (the error is sent). */
bool srv_unknown_fields(struct srv *s, struct http_conn *c, const char *route, int n,
                        const char *names)
{
    if (!n)
        return false;
    if (s->cfg->strict_api) {
        struct srv_api_error e;
        srv_api_error_set(&e, 400, "invalid_request_error", NULL, NULL,
                          "unknown field%s '%s' (this server runs with --strict-api)",
                          n > 1 ? "s" : "", names);
        http_error(c, &e, NULL);
        return true;
    }
    s->unknown_fields_total += n;
    srv_log(SRV_LOG_DEBUG, "%s: ignored unknown field%s %s", route, n > 1 ? "s" : "", names);
    return false;
}

/* The tokens the tokenizer puts before any text (BOS), found by
 * tokenizing the empty text: dropped when a client asks for no special
 * tokens. */
static int32_t special_prefix(struct srv *s, const int32_t *ids, int32_t n)
{
    int32_t *pre = NULL, np = 0;
    if (srv_tokenize_hook(s, "", 0, false, &pre, &np))
        return 0;
    int32_t k = np <= n && !memcmp(pre, ids, (size_t)np * sizeof(int32_t)) ? np : 0;
    folio_free(pre);
    return k;
}

static void route_tokenize(struct srv *s, struct http_conn *c, const struct http_request *rq,
                           const struct srv_caller *who)
{
    (void)who;
    struct srv_api_error e;
    struct srv_tok_params tp;
    int32_t *ids = NULL, n = 0;
    if (srv_tokenize_parse(rq->body, rq->body_len, &s->mi, &tp, &e)) {
        http_error(c, &e, NULL);
        return;
    }
    if (tp.chat) { /* the tokens /v1/chat/completions would prompt the model with */
        struct srv_comp_params p = {0};
        if (srv_chat_parse(rq->body, rq->body_len, &s->mi, s->chat_tmpl, srv_tokenize_hook, s, &p,
                           &e))
            http_error(c, &e, NULL);
        else if (!srv_unknown_fields(s, c, "/tokenize", p.n_unknown, p.unknown)) {
            struct folio_buf b = {0};
            folio_buf_printf(&b, "{\"count\":%d,\"max_model_len\":%d,\"tokens\":", p.prompt_lens[0],
                             s->mi.ctx_len);
            srv_render_token_ids(&b, p.prompts[0], p.prompt_lens[0]);
            folio_buf_puts(&b, "}\n");
            respond_buf(c, 200, "application/json", &b);
        }
        srv_comp_params_free(&p);
        return;
    }
    if (srv_unknown_fields(s, c, "/tokenize", tp.n_unknown, tp.unknown)) {
        folio_free(tp.text);
        return;
    }
    int rc = srv_tokenize_hook(s, tp.text, strlen(tp.text), false, &ids, &n);
    folio_free(tp.text);
    if (rc) {
        srv_api_error_set(&e, 400, "invalid_request_error", "prompt", NULL, "%s",
                          rc == -ENOSYS ? "this server has no tokenizer (token ids only)"
                                        : "cannot tokenize 'prompt'");
        http_error(c, &e, NULL);
        return;
    }
    int32_t skip = tp.add_special ? 0 : special_prefix(s, ids, n);
    struct folio_buf b = {0};
    folio_buf_printf(&b, "{\"count\":%d,\"max_model_len\":%d,\"tokens\":", n - skip, s->mi.ctx_len);
    srv_render_token_ids(&b, ids + skip, n - skip);
    folio_buf_puts(&b, "}\n");
    folio_free(ids);
    respond_buf(c, 200, "application/json", &b);
}

/* POST /apply-template (llama-server's): a chat completion body's
 * messages (and tools) rendered with the model's chat template, as
 * /v1/chat/completions would prompt the model: {"prompt": text}.  The
 * body is validated as a chat completion's; nothing is generated. */
static void route_apply_template(struct srv *s, struct http_conn *c, const struct http_request *rq,
                                 const struct srv_caller *who)
{
    (void)who;
    struct srv_api_error e;
    struct srv_comp_params p = {0};
    if (srv_chat_parse(rq->body, rq->body_len, &s->mi, s->chat_tmpl, srv_tokenize_hook, s, &p,
                       &e)) {
        http_error(c, &e, NULL);
        srv_comp_params_free(&p);
        return;
    }
    if (!srv_unknown_fields(s, c, "/apply-template", p.n_unknown, p.unknown)) {
        const char *text = p.prompt_text && p.prompt_text[0] ? p.prompt_text[0] : "";
        struct folio_buf b = {0};
        folio_buf_puts(&b, "{\"prompt\":");
        folio_buf_json_str(&b, text, strlen(text));
        folio_buf_puts(&b, "}\n");
        respond_buf(c, 200, "application/json", &b);
    }
    srv_comp_params_free(&p);
}

/* Anthropic's POST /v1/messages/count_tokens: {"input_tokens": N}, the
 * tokens /v1/messages would prompt the model with. */
static void route_count_tokens(struct srv *s, struct http_conn *c, const struct http_request *rq,
                               const struct srv_caller *who)
{
    (void)who;
    struct srv_api_error e;
    struct srv_comp_params p = {0};
    if (srv_messages_parse(rq->body, rq->body_len, true, &s->mi, s->chat_tmpl, srv_tokenize_hook, s,
                           &p, &e)) {
        http_error(c, &e, NULL);
        srv_comp_params_free(&p);
        return;
    }
    if (!srv_unknown_fields(s, c, "/v1/messages/count_tokens", p.n_unknown, p.unknown)) {
        struct folio_buf b = {0};
        folio_buf_printf(&b, "{\"input_tokens\":%d}\n", p.prompt_lens[0]);
        respond_buf(c, 200, "application/json", &b);
    }
    srv_comp_params_free(&p);
}

static void route_detokenize(struct srv *s, struct http_conn *c, const struct http_request *rq,
                             const struct srv_caller *who)
{
    (void)who;
    struct srv_api_error e;
    struct srv_tok_params tp;
    int32_t *ids = NULL, n = 0;
    if (srv_detokenize_parse(rq->body, rq->body_len, &s->mi, &ids, &n, &tp, &e)) {
        http_error(c, &e, NULL);
        return;
    }
    if (srv_unknown_fields(s, c, "/detokenize", tp.n_unknown, tp.unknown)) {
        folio_free(ids);
        return;
    }
    struct folio_buf text = {0};
    int rc = srv_ids_text(s, ids, n, &text);
    folio_free(ids);
    if (rc) {
        folio_buf_free(&text);
        srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        http_error(c, &e, NULL);
        return;
    }
    /* vLLM answers "prompt", llama-server "content": both */
    struct folio_buf b = {0};
    folio_buf_puts(&b, "{\"prompt\":");
    folio_buf_json_str(&b, text.p ? text.p : "", text.len);
    folio_buf_puts(&b, ",\"content\":");
    folio_buf_json_str(&b, text.p ? text.p : "", text.len);
    folio_buf_puts(&b, "}\n");
    folio_buf_free(&text);
    respond_buf(c, 200, "application/json", &b);
}

static void route_completions(struct srv *s, struct http_conn *c, const struct http_request *rq,
                              const struct srv_caller *who)
{
    srv_comp_route(s, c, rq, who, SRV_COMP_TEXT);
}

static void route_chat(struct srv *s, struct http_conn *c, const struct http_request *rq,
                       const struct srv_caller *who)
{
    srv_comp_route(s, c, rq, who, SRV_COMP_CHAT);
}

static void route_embeddings(struct srv *s, struct http_conn *c, const struct http_request *rq,
                             const struct srv_caller *who)
{
    srv_comp_route(s, c, rq, who, SRV_COMP_EMBED);
}

static void route_messages(struct srv *s, struct http_conn *c, const struct http_request *rq,
                           const struct srv_caller *who)
{
    srv_comp_route(s, c, rq, who, SRV_COMP_MESSAGES);
}

static void route_responses(struct srv *s, struct http_conn *c, const struct http_request *rq,
                            const struct srv_caller *who)
{
    srv_comp_route(s, c, rq, who, SRV_COMP_RESPONSES);
}

/* The query string's value of key (as sent, up to cap - 1 bytes), or
 * false when absent. */
static bool query_get(const struct http_request *rq, const char *key, char *buf, size_t cap)
{
    const char *q = rq->url + rq->path_len;
    if (*q != '?')
        return false;
    size_t n = strlen(key);
    for (q++; *q && *q != '#';) {
        size_t len = strcspn(q, "&#");
        if (len > n && q[n] == '=' && !strncmp(q, key, n)) {
            snprintf(buf, cap, "%.*s", (int)(len - n - 1), q + n + 1);
            return true;
        }
        q += len;
        if (*q == '&')
            q++;
    }
    return false;
}

/* GET /v1/responses/{id}/input_items?limit=&order=&after= (the stored
 * response's input, srv_render_input_items). */
static void input_items(struct srv *s, struct http_conn *c, const struct http_request *rq,
                        const struct srv_caller *who, const char *id)
{
    struct srv_api_error e;
    char v[80];
    int64_t limit = 20;
    bool desc = true;
    const char *after = NULL;
    if (query_get(rq, "limit", v, sizeof(v)) &&
        (srv_parse_int(v, &limit) || limit < 1 || limit > 100)) {
        srv_api_error_set(&e, 400, "invalid_request_error", "limit", NULL,
                          "limit must be an integer in [1, 100]");
        http_error(c, &e, NULL);
        return;
    }
    if (query_get(rq, "order", v, sizeof(v))) {
        if (strcmp(v, "asc") && strcmp(v, "desc")) {
            srv_api_error_set(&e, 400, "invalid_request_error", "order", NULL,
                              "order must be \"asc\" or \"desc\"");
            http_error(c, &e, NULL);
            return;
        }
        desc = !strcmp(v, "desc");
    }
    char av[80];
    if (query_get(rq, "after", av, sizeof(av)))
        after = av;
    const char *input = srv_resp_store_input(s->resp_store, who->tenant, id);
    if (!input) {
        srv_api_error_set(&e, 404, "invalid_request_error", NULL, "response_not_found",
                          "Response with id '%s' not found.", id);
        http_error(c, &e, NULL);
        return;
    }
    struct folio_buf b = {0};
    int rc = srv_render_input_items(&b, id, input, (int)limit, desc, after);
    if (rc == -EINVAL) {
        folio_buf_free(&b);
        srv_api_error_set(&e, 400, "invalid_request_error", "after", NULL,
                          "after: no item '%.64s' in the input of %s", after, id);
        http_error(c, &e, NULL);
        return;
    }
    if (rc)
        b.oom = true;
    respond_buf(c, 200, "application/json", &b);
}

/* Whether a stored response object says "background":true (its own
 * rendering: the field comes before the model name and the settings). */
static bool object_is_background(const char *obj)
{
    const char *bg = strstr(obj, "\"background\":"), *model = strstr(obj, "\"model\":");
    return bg && model && bg < model && !strncmp(bg + 13, "true", 4);
}

/* GET and DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items,
 * POST /v1/responses/{id}/cancel: a stored response of the caller's tenant
 * (another tenant's is as absent as an unknown id).  DELETE of a running
 * background response cancels it too; cancel answers the response as it
 * stands (cancelled, or as it ended: cancelling is idempotent), and a 400
 * for a response that was not a background one. */
static void route_response(struct srv *s, struct http_conn *c, const struct http_request *rq,
                           const struct srv_caller *who)
{
    static const char prefix[] = "/v1/responses/", items[] = "/input_items",
                      cancel_sfx[] = "/cancel";
    const char *p = rq->url + sizeof(prefix) - 1;
    size_t n = rq->path_len - (sizeof(prefix) - 1);
    bool list = rq->method == HTTP_M_GET && n > sizeof(items) - 1 &&
                !memcmp(p + n - (sizeof(items) - 1), items, sizeof(items) - 1);
    bool cancel = rq->method == HTTP_M_POST && n > sizeof(cancel_sfx) - 1 &&
                  !memcmp(p + n - (sizeof(cancel_sfx) - 1), cancel_sfx, sizeof(cancel_sfx) - 1);
    if (list)
        n -= sizeof(items) - 1;
    if (cancel)
        n -= sizeof(cancel_sfx) - 1;
    const bool bad_post = rq->method == HTTP_M_POST && !cancel; /* POST: {id}/cancel only */
    if (bad_post)
        n = SIZE_MAX;
    char id[64];
    bool valid = n < sizeof(id);
    if (!valid)
        n = rq->path_len - (sizeof(prefix) - 1);
    for (size_t i = 0; valid && i < n; i++)
        valid = (p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '_' ||
                p[i] == '-';
    const char *obj = NULL;
    bool found = false;
    if (valid && list) {
        memcpy(id, p, n);
        id[n] = 0;
        input_items(s, c, rq, who, id);
        return;
    }
    if (valid) {
        memcpy(id, p, n);
        id[n] = 0;
        struct srv_comp *bg = srv_comp_bg_find(s, who->tenant, id);
        if (bg && rq->method != HTTP_M_GET)
            srv_comp_bg_cancel(bg, rq->method == HTTP_M_DELETE);
        if (rq->method == HTTP_M_DELETE)
            found = srv_resp_store_delete(s->resp_store, who->tenant, id) || bg;
        else
            found = (obj = srv_resp_store_object(s->resp_store, who->tenant, id)) != NULL;
    }
    if (found && cancel && !object_is_background(obj)) {
        struct srv_api_error e;
        srv_api_error_set(&e, 400, "invalid_request_error", NULL, NULL,
                          "Cannot cancel a synchronous response.");
        http_error(c, &e, NULL);
        return;
    }
    if (!found) {
        struct srv_api_error e;
        if (bad_post || (!valid && memchr(p, '/', n)))
            srv_api_error_set(&e, 404, "invalid_request_error", NULL, NULL,
                              "%.*s is not served (GET and DELETE /v1/responses/{id}, GET "
                              "/v1/responses/{id}/input_items and POST "
                              "/v1/responses/{id}/cancel are)",
                              (int)FOLIO_MIN(rq->path_len, 120), rq->url);
        else
            srv_api_error_set(&e, 404, "invalid_request_error", NULL, "response_not_found",
                              "Response with id '%s' not found.", valid ? id : "?");
        http_error(c, &e, NULL);
        return;
    }
    struct folio_buf b = {0};
    if (obj)
        folio_buf_puts(&b, obj);
    else
        folio_buf_printf(&b, "{\"id\":\"%s\",\"object\":\"response\",\"deleted\":true}", id);
    folio_buf_puts(&b, "\n");
    respond_buf(c, 200, "application/json", &b);
}

static void route_classify(struct srv *s, struct http_conn *c, const struct http_request *rq,
                           const struct srv_caller *who)
{
    srv_comp_route(s, c, rq, who, SRV_COMP_CLASSIFY);
}

static void route_rerank(struct srv *s, struct http_conn *c, const struct http_request *rq,
                         const struct srv_caller *who)
{
    srv_comp_route(s, c, rq, who, SRV_COMP_RERANK);
}

static void route_score(struct srv *s, struct http_conn *c, const struct http_request *rq,
                        const struct srv_caller *who)
{
    srv_comp_route(s, c, rq, who, SRV_COMP_SCORE);
}

/* /v1/models' entry of the model (lora 0) or of LoRA adapter lora - 1:
 * an adapter names the model as its "parent", as vLLM lists them. */
static void model_json(struct srv *s, struct folio_buf *b, int32_t lora)
{
    const char *id = lora ? s->mi.lora_names[lora - 1] : s->mi.name;
    folio_buf_puts(b, "{\"id\":");
    folio_buf_json_str(b, id, strlen(id));
    folio_buf_printf(b,
                     ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"foliod\","
                     "\"max_model_len\":%d,\"vocab_size\":%d,\"matmul\":\"%s\",\"parent\":",
                     (long long)s->started_at, s->mi.ctx_len, s->mi.n_vocab,
                     s->mi.matmul ? s->mi.matmul : "none");
    if (lora) {
        folio_buf_json_str(b, s->mi.name, strlen(s->mi.name));
        folio_buf_printf(b, ",\"lora_rank\":%d}", (int)s->mi.lora_ranks[lora - 1]);
    } else
        folio_buf_puts(b, "null}");
}

/* Whether the caller may name model entry `lora` (0: the model; an
 * adapter its tenant's `loras` leaves out is not listed to it). */
static bool model_visible(struct srv *s, const struct srv_caller *who, int32_t lora)
{
    return lora == 0 || who->operator|| srv_tenant_may_lora(
                            srv_auth_tenant_cfg(&s->auth, who->tenant), s->mi.lora_names[lora - 1]);
}

static void route_models(struct srv *s, struct http_conn *c, const struct http_request *rq,
                         const struct srv_caller *who)
{
    (void)rq;
    struct folio_buf b = {0};
    folio_buf_puts(&b, "{\"object\":\"list\",\"data\":[");
    for (int32_t i = 0; i <= s->mi.n_loras; i++) {
        if (!model_visible(s, who, i))
            continue;
        if (i)
            folio_buf_puts(&b, ",");
        model_json(s, &b, i);
    }
    folio_buf_puts(&b, "]}\n");
    respond_buf(c, 200, "application/json", &b);
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* GET /v1/models/{id} (the SDKs' models.retrieve): the id is the rest of
 * the path, percent-decoded. */
static void route_model(struct srv *s, struct http_conn *c, const struct http_request *rq,
                        const struct srv_caller *who)
{
    static const char prefix[] = "/v1/models/";
    char id[256];
    size_t n = 0;
    for (size_t i = sizeof(prefix) - 1; i < rq->path_len && n + 1 < sizeof(id); i++) {
        int hi, lo;
        if (rq->url[i] == '%' && i + 2 < rq->path_len && (hi = hex_digit(rq->url[i + 1])) >= 0 &&
            (lo = hex_digit(rq->url[i + 2])) >= 0) {
            id[n++] = (char)(hi * 16 + lo);
            i += 2;
        } else
            id[n++] = rq->url[i];
    }
    id[n] = 0;
    const int32_t lora = strlen(id) == n ? eng_model_lookup(&s->mi, id) : -1;
    if (lora < 0 || !model_visible(s, who, lora)) {
        struct srv_api_error e;
        srv_api_error_set(&e, 404, "NotFoundError", "model", "model_not_found",
                          "The model '%.64s' does not exist (this server has '%s')",
                          folio_utf8_valid(id, n) ? id : "?", s->mi.name);
        http_error(c, &e, NULL);
        return;
    }
    struct folio_buf b = {0};
    model_json(s, &b, lora);
    folio_buf_puts(&b, "\n");
    respond_buf(c, 200, "application/json", &b);
}

static void route_health(struct srv *s, struct http_conn *c, const struct http_request *rq,
                         const struct srv_caller *who)
{
    (void)rq;
    (void)who;
    struct folio_buf b = {0};
    folio_buf_puts(&b, s->draining ? "{\"status\":\"draining\"}\n" : "{\"status\":\"ok\"}\n");
    respond_buf(c, s->draining ? 503 : 200, "application/json", &b);
}

static void route_metrics(struct srv *s, struct http_conn *c, const struct http_request *rq,
                          const struct srv_caller *who)
{
    (void)rq;
    struct folio_buf b = {0};
    srv_metrics_render(s, &b, who);
    respond_buf(c, 200, "text/plain; version=0.0.4; charset=utf-8", &b);
}

/* True when the query string has key=value. */
static bool query_has(const struct http_request *rq, const char *kv)
{
    const char *q = rq->url + rq->path_len;
    if (*q != '?')
        return false;
    size_t n = strlen(kv);
    for (q++; *q && *q != '#';) {
        size_t len = strcspn(q, "&#");
        if (len == n && !strncmp(q, kv, n))
            return true;
        q += len;
        if (*q == '&')
            q++;
    }
    return false;
}

static void route_kv(struct srv *s, struct http_conn *c, const struct http_request *rq,
                     const struct srv_caller *who)
{
    struct folio_buf b = {0};
    srv_kv_render(s, &b, who, query_has(rq, "map=full"));
    respond_buf(c, 200, "application/json", &b);
}

static void route_version(struct srv *s, struct http_conn *c, const struct http_request *rq,
                          const struct srv_caller *who)
{
    (void)who;
    (void)rq;
    struct folio_buf b = {0};
    srv_version_render(s, &b);
    respond_buf(c, 200, "application/json", &b);
}

static void route_dashboard(struct srv *s, struct http_conn *c, const struct http_request *rq,
                            const struct srv_caller *who)
{
    (void)s;
    (void)rq;
    (void)who; /* the page shows what /v1/kv and /metrics show this caller */
    size_t n;
    const char *page = srv_dashboard_html(&n);
    http_respond(c, 200, "text/html; charset=utf-8", page, n, NULL);
}

static const struct route {
    enum http_method method;
    const char *path;
    enum srv_access access;
    void (*handler)(struct srv *s, struct http_conn *c, const struct http_request *rq,
                    const struct srv_caller *who);
} routes[] = {
    {HTTP_M_POST, "/v1/completions", SRV_ACCESS_TENANT, route_completions},
    {HTTP_M_POST, "/v1/chat/completions", SRV_ACCESS_TENANT, route_chat},
    {HTTP_M_POST, "/v1/embeddings", SRV_ACCESS_TENANT, route_embeddings},
    /* OpenAI's Responses API (api_responses.c), its store (resp_store.c) */
    {HTTP_M_POST, "/v1/responses", SRV_ACCESS_TENANT, route_responses},
    {HTTP_M_GET, "/v1/responses/", SRV_ACCESS_TENANT, route_response}, /* /v1/responses/{id} */
    {HTTP_M_DELETE, "/v1/responses/", SRV_ACCESS_TENANT, route_response},
    {HTTP_M_POST, "/v1/responses/", SRV_ACCESS_TENANT, route_response}, /* {id}/cancel */
    /* Anthropic's Messages API (api_messages.c) */
    {HTTP_M_POST, "/v1/messages", SRV_ACCESS_TENANT, route_messages},
    {HTTP_M_POST, "/v1/messages/count_tokens", SRV_ACCESS_TENANT, route_count_tokens},
    /* vLLM's three spellings (llama-server serves /rerank and /v1/rerank) */
    {HTTP_M_POST, "/v1/rerank", SRV_ACCESS_TENANT, route_rerank},
    {HTTP_M_POST, "/rerank", SRV_ACCESS_TENANT, route_rerank},
    {HTTP_M_POST, "/v2/rerank", SRV_ACCESS_TENANT, route_rerank},
    /* vLLM's classification (a head's class probabilities per input) */
    {HTTP_M_POST, "/classify", SRV_ACCESS_TENANT, route_classify},
    {HTTP_M_POST, "/v1/classify", SRV_ACCESS_TENANT, route_classify},
    /* vLLM's pairs form of reranking */
    {HTTP_M_POST, "/v1/score", SRV_ACCESS_TENANT, route_score},
    {HTTP_M_POST, "/score", SRV_ACCESS_TENANT, route_score},
    {HTTP_M_GET, "/v1/models", SRV_ACCESS_TENANT, route_models},
    {HTTP_M_GET, "/v1/models/", SRV_ACCESS_TENANT, route_model}, /* a prefix: /v1/models/{id} */
    {HTTP_M_GET, "/health", SRV_ACCESS_PUBLIC, route_health},
    {HTTP_M_GET, "/metrics", SRV_ACCESS_VIEW, route_metrics},
    {HTTP_M_GET, "/v1/kv", SRV_ACCESS_VIEW, route_kv},
    {HTTP_M_GET, "/dashboard", SRV_ACCESS_VIEW, route_dashboard},
    {HTTP_M_GET, "/version", SRV_ACCESS_TENANT, route_version},
    {HTTP_M_POST, "/tokenize", SRV_ACCESS_TENANT, route_tokenize},
    {HTTP_M_POST, "/detokenize", SRV_ACCESS_TENANT, route_detokenize},
    {HTTP_M_POST, "/apply-template", SRV_ACCESS_TENANT, route_apply_template},
};

static void route(struct srv *s, struct http_conn *c, const struct http_request *rq);

void srv_on_request(void *user, struct http_conn *c, const struct http_request *rq)
{
    struct srv *s = user;
    uint64_t t0 = folio_now_ns();
    s->access_claimed = false;
    s->access_tenant = -1;
    route(s, c, rq);
    if (s->access_claimed)
        return; /* a completion holds it and logs it when done */
    struct srv_access_line a = {
        .method = rq->method_name,
        .path = rq->url,
        .path_len = (int)FOLIO_MIN(rq->path_len, 512),
        .status = http_conn_status(c),
        .tenant = s->access_tenant >= 0 ? srv_auth_tenant_name(&s->auth, s->access_tenant) : NULL,
        .prompt_tokens = -1,
        .ttft_s = -1,
        .duration_s = (double)(folio_now_ns() - t0) * 1e-9,
    };
    srv_log_access(&a);
}

static void route(struct srv *s, struct http_conn *c, const struct http_request *rq)
{
    struct srv_api_error e;
    /* r: the path's row for the method, else its first row (a 405) */
    const struct route *r = NULL;
    char allow[64] = "Allow: ";
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(routes); i++) {
        size_t n = strlen(routes[i].path);
        bool prefix = routes[i].path[n - 1] == '/'; /* matches any longer path */
        if ((n == rq->path_len || (prefix && rq->path_len > n)) &&
            !strncmp(rq->url, routes[i].path, n)) {
            if (!r || (r->method != rq->method && routes[i].method == rq->method))
                r = &routes[i];
            const char *m = routes[i].method == HTTP_M_GET    ? "GET"
                            : routes[i].method == HTTP_M_POST ? "POST"
                                                              : "DELETE";
            size_t at = strlen(allow);
            snprintf(allow + at, sizeof(allow) - at, "%s%s", at > 7 ? ", " : "", m);
        }
    }
    /* Anthropic's routes answer even the caller's refusal in its shape */
    if (r && (r->handler == route_messages || r->handler == route_count_tokens))
        http_conn_anthropic(c);
    /* the caller first: an unknown path or a wrong method tells a refused
     * caller nothing either */
    struct srv_caller who;
    const char *extra;
    enum srv_access access = r ? r->access : SRV_ACCESS_TENANT;
    int st = srv_auth_caller(&s->auth, rq, access, &who, &e, &extra);
    if (st) {
        if (st == 503)
            http_conn_close_after(c);
        http_error(c, &e, extra);
        return;
    }
    s->access_tenant = who.tenant;
    if (!r) {
        srv_api_error_set(&e, 404, "NotFoundError", NULL, NULL, "no route for %.*s",
                          (int)FOLIO_MIN(rq->path_len, 200), rq->url);
        http_error(c, &e, NULL);
        return;
    }
    if (rq->method != r->method) {
        size_t at = strlen(allow);
        snprintf(allow + at, sizeof(allow) - at, "\r\n");
        srv_api_error_set(&e, 405, "invalid_request_error", NULL, NULL, "%s is not allowed on %s",
                          rq->method_name, r->path);
        http_error(c, &e, allow);
        return;
    }
    r->handler(s, c, rq, &who);
}
