/*
 * daemon/routes.c — the route table ({method, path, handler}) and the
 * small routes: /v1/models, /health, /metrics, /v1/kv, /dashboard,
 * /tokenize, /detokenize.  The completion routes live in comp.c.  A path
 * that no row names is a 404; a known path with another method a 405
 * (with Allow).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dashboard.h"
#include "folio/common.h"
#include "render.h"
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

static void route_tokenize(struct srv *s, struct http_conn *c, const struct http_request *rq)
{
    struct srv_api_error e;
    char *text = NULL;
    int32_t *ids = NULL, n = 0;
    if (srv_tokenize_parse(rq->body, rq->body_len, &s->mi, &text, &e)) {
        http_error(c, &e, NULL);
        return;
    }
    int rc = srv_tokenize_hook(s, text, strlen(text), false, &ids, &n);
    folio_free(text);
    if (rc) {
        srv_api_error_set(&e, 400, "invalid_request_error", "prompt", NULL, "%s",
                          rc == -ENOSYS ? "this server has no tokenizer (token ids only)"
                                        : "cannot tokenize 'prompt'");
        http_error(c, &e, NULL);
        return;
    }
    struct folio_buf b = {0};
    folio_buf_printf(&b, "{\"count\":%d,\"max_model_len\":%d,\"tokens\":", n, s->mi.ctx_len);
    srv_render_token_ids(&b, ids, n);
    folio_buf_puts(&b, "}\n");
    folio_free(ids);
    respond_buf(c, 200, "application/json", &b);
}

static void route_detokenize(struct srv *s, struct http_conn *c, const struct http_request *rq)
{
    struct srv_api_error e;
    int32_t *ids = NULL, n = 0;
    if (srv_detokenize_parse(rq->body, rq->body_len, &s->mi, &ids, &n, &e)) {
        http_error(c, &e, NULL);
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
    struct folio_buf b = {0};
    folio_buf_puts(&b, "{\"prompt\":");
    folio_buf_json_str(&b, text.p ? text.p : "", text.len);
    folio_buf_puts(&b, "}\n");
    folio_buf_free(&text);
    respond_buf(c, 200, "application/json", &b);
}

static void route_completions(struct srv *s, struct http_conn *c, const struct http_request *rq)
{
    srv_comp_route(s, c, rq, false);
}

static void route_chat(struct srv *s, struct http_conn *c, const struct http_request *rq)
{
    srv_comp_route(s, c, rq, true);
}

static void route_models(struct srv *s, struct http_conn *c, const struct http_request *rq)
{
    (void)rq;
    struct folio_buf b = {0};
    folio_buf_printf(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
    folio_buf_json_str(&b, s->mi.name, strlen(s->mi.name));
    folio_buf_printf(&b,
                     ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"foliod\","
                     "\"max_model_len\":%d,\"vocab_size\":%d,\"matmul\":\"%s\"}]}\n",
                     (long long)s->started_at, s->mi.ctx_len, s->mi.n_vocab,
                     s->mi.matmul ? s->mi.matmul : "none");
    respond_buf(c, 200, "application/json", &b);
}

static void route_health(struct srv *s, struct http_conn *c, const struct http_request *rq)
{
    (void)rq;
    struct folio_buf b = {0};
    folio_buf_puts(&b, s->draining ? "{\"status\":\"draining\"}\n" : "{\"status\":\"ok\"}\n");
    respond_buf(c, s->draining ? 503 : 200, "application/json", &b);
}

static void route_metrics(struct srv *s, struct http_conn *c, const struct http_request *rq)
{
    (void)rq;
    struct folio_buf b = {0};
    srv_metrics_render(s, &b);
    respond_buf(c, 200, "text/plain; version=0.0.4; charset=utf-8", &b);
}

static void route_kv(struct srv *s, struct http_conn *c, const struct http_request *rq)
{
    (void)rq;
    struct folio_buf b = {0};
    srv_kv_render(s, &b);
    respond_buf(c, 200, "application/json", &b);
}

static void route_dashboard(struct srv *s, struct http_conn *c, const struct http_request *rq)
{
    (void)s;
    (void)rq;
    size_t n;
    const char *page = srv_dashboard_html(&n);
    http_respond(c, 200, "text/html; charset=utf-8", page, n, NULL);
}

static const struct route {
    enum http_method method;
    const char *path;
    void (*handler)(struct srv *s, struct http_conn *c, const struct http_request *rq);
} routes[] = {
    {HTTP_M_POST, "/v1/completions", route_completions},
    {HTTP_M_POST, "/v1/chat/completions", route_chat},
    {HTTP_M_GET, "/v1/models", route_models},
    {HTTP_M_GET, "/health", route_health},
    {HTTP_M_GET, "/metrics", route_metrics},
    {HTTP_M_GET, "/v1/kv", route_kv},
    {HTTP_M_GET, "/dashboard", route_dashboard},
    {HTTP_M_POST, "/tokenize", route_tokenize},
    {HTTP_M_POST, "/detokenize", route_detokenize},
};

void srv_on_request(void *user, struct http_conn *c, const struct http_request *rq)
{
    struct srv *s = user;
    struct srv_api_error e;
    const struct route *r = NULL;
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(routes); i++)
        if (strlen(routes[i].path) == rq->path_len &&
            !strncmp(rq->url, routes[i].path, rq->path_len))
            r = &routes[i];
    if (!r) {
        srv_api_error_set(&e, 404, "NotFoundError", NULL, NULL, "no route for %.*s",
                          (int)FOLIO_MIN(rq->path_len, 200), rq->url);
        http_error(c, &e, NULL);
        return;
    }
    if (rq->method != r->method) {
        char allow[64];
        snprintf(allow, sizeof(allow), "Allow: %s\r\n", r->method == HTTP_M_GET ? "GET" : "POST");
        srv_api_error_set(&e, 405, "invalid_request_error", NULL, NULL, "%s is not allowed on %s",
                          rq->method_name, r->path);
        http_error(c, &e, allow);
        return;
    }
    r->handler(s, c, rq);
}
