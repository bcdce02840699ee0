/*
 * daemon/server.c — foliod's process: start-up ladder, listeners, signals
 * and drain, the routes, completions (events from the engine turned into
 * OpenAI responses and SSE chunks), /metrics and /v1/kv.
 *
 * Start-up (srv_main): config → backend → loop → engine driver → signals →
 * Unix listener (stale-socket check, umask 0117 around bind: mode 0660) →
 * optional TCP listener → uv_run.  Teardown runs in reverse through one
 * `goto` ladder.
 *
 * Drain (SIGTERM, or the first SIGINT): listeners close and the socket file
 * is removed (new connections are refused), /health answers 503, new
 * completions get 503, idle connections close; running requests finish
 * (their responses say Connection: close).  After --drain-timeout-ms the
 * rest are aborted.  When no connection and no completion is left the
 * engine thread is joined and uv_run returns: exit 0.  A second SIGINT
 * exits at once (status 130).
 *
 * Routes: POST /v1/completions, /v1/chat/completions, GET /v1/models,
 * /health, /metrics, /v1/kv, POST /tokenize, /detokenize; anything else
 * 404, a known path with the wrong method 405.
 *
 * A completion (struct srv_comp) has one engine request per choice
 * (prompts x n).  Text is produced per choice: token bytes → UTF-8
 * sanitiser (incomplete characters held back, invalid ones → U+FFFD) →
 * stop-string scan (a stream holds back the last maxlen-1 bytes, which
 * could begin a stop string) → response.
 *
 * Chat completions are the same machinery (one prompt: the rendered
 * conversation) with chat-shaped output: message / delta objects, the
 * first stream chunk of a choice carries {"role":"assistant"}.  An
 * end-of-generation token (backend is_eog: EOS, end of turn) ends a
 * choice with "stop" unless ignore_eos; it counts as a completion token
 * but adds no text.  Echo puts the prompt text at the head of a choice's
 * text (ch->echo_len bytes, never searched for stop strings).  Logprobs
 * (legacy completions format) come from eng_req.lp during the token event;
 * echoed prompt tokens are listed with null logprobs (prompt logprobs are
 * not computed).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "folio/chat.h"
#include "dashboard.h"
#include "folio/common.h"
#include "server.h"

/* ---- logging ---------------------------------------------------------- */

void srv_log(struct srv *s, int level, const char *fmt, ...)
{
    if (s && level > s->log_level)
        return;
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "foliod %s ", ts);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void begin_drain(struct srv *s, const char *why);
static void maybe_exit(struct srv *s);

/* ---- completions ------------------------------------------------------ */

static void comp_free(struct srv_comp *comp)
{
    struct srv *s = comp->srv;
    for (int i = 0; i < comp->n_choices; i++) {
        srv_buf_free(&comp->ch[i].text);
        folio_free(comp->ch[i].tokens);
        folio_free(comp->ch[i].lps);
    }
    folio_free(comp->ch);
    srv_comp_params_free(&comp->p);
    folio_free(comp);
    s->n_comps--;
    maybe_exit(s);
}

void srv_comp_detach(struct srv_comp *comp)
{
    struct srv *s = comp->srv;
    comp->conn = NULL;
    for (int i = 0; i < comp->n_choices; i++)
        if (!comp->ch[i].done && !comp->ch[i].stopped) {
            comp->ch[i].stopped = true;
            srv_engine_abort(s->eng, &comp->ch[i].er);
        }
}

static size_t max_stop_len(const struct srv_comp *comp)
{
    size_t m = 0;
    for (int i = 0; i < comp->p.n_stop; i++)
        m = FOLIO_MAX(m, comp->p.stop_len[i]);
    return m;
}

/* Looks for a stop string in ch->text from byte `from`; cuts the text at
 * the earliest match.  True when found. */
static bool stop_scan(struct srv_choice *ch, size_t from)
{
    const struct srv_comp *comp = ch->comp;
    size_t best = SIZE_MAX;
    from = FOLIO_MAX(from, ch->echo_len);
    for (int i = 0; i < comp->p.n_stop; i++) {
        if (ch->text.len < comp->p.stop_len[i])
            continue;
        const char *hit =
            memmem(ch->text.p + from, ch->text.len - from, comp->p.stop[i], comp->p.stop_len[i]);
        if (hit && (size_t)(hit - ch->text.p) < best)
            best = (size_t)(hit - ch->text.p);
    }
    if (best == SIZE_MAX)
        return false;
    ch->text.len = best;
    if (ch->text.p)
        ch->text.p[best] = 0;
    return true;
}

static void chunk_head(struct srv_buf *b, const struct srv_comp *comp)
{
    srv_buf_printf(
        b, "data: {\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", comp->id,
        comp->p.chat ? "chat.completion.chunk" : "text_completion", (long long)comp->created);
    srv_buf_json_str(b, comp->srv->mi.name, strlen(comp->srv->mi.name));
}

static void usage_json(struct srv_buf *b, const struct srv_comp *comp)
{
    int64_t gen = 0;
    for (int i = 0; i < comp->n_choices; i++)
        gen += comp->ch[i].n_tokens;
    srv_buf_printf(b,
                   "\"usage\":{\"prompt_tokens\":%lld,\"completion_tokens\":%lld,"
                   "\"total_tokens\":%lld}",
                   (long long)comp->prompt_tokens, (long long)gen,
                   (long long)(comp->prompt_tokens + gen));
}

static void token_ids_json(struct srv_buf *b, const int32_t *t, int32_t n)
{
    srv_buf_puts(b, "[");
    for (int32_t i = 0; i < n; i++)
        srv_buf_printf(b, i ? ",%d" : "%d", t[i]);
    srv_buf_puts(b, "]");
}

/* One token's text as a JSON string (invalid UTF-8 → U+FFFD); returns
 * its byte length in the response text. */
static size_t piece_json(struct srv_buf *b, struct srv *s, int32_t tok)
{
    char bytes[256], clean[SRV_UTF8_OUT_MAX(256)];
    struct srv_utf8 u8 = {0};
    int n = s->ops->detok(s->backend, tok, bytes, sizeof(bytes));
    size_t m = n > 0 ? srv_utf8_feed(&u8, bytes, (size_t)n, clean) : 0;
    m += srv_utf8_flush(&u8, clean + m);
    srv_buf_json_str(b, clean, m);
    return n > 0 ? (size_t)n : 0;
}

static void logprob_num(struct srv_buf *b, float lp)
{
    srv_buf_printf(b, "%.6g", isfinite(lp) ? (double)lp : -9999.0);
}

/* The legacy completions logprobs object for generated tokens [from, to),
 * preceded by the choice's prompt tokens (null logprobs) when
 * with_prompt. */
static void logprobs_json(struct srv_buf *b, struct srv_choice *ch, int32_t from, int32_t to,
                          bool with_prompt)
{
    struct srv *s = ch->comp->srv;
    const int32_t *pt = ch->er.prompt;
    int32_t np = with_prompt ? ch->er.n_prompt : 0;
    int64_t *offs = folio_malloc((size_t)(np + to - from + 1) * sizeof(*offs));
    if (!offs) {
        b->oom = true;
        return;
    }
    int64_t off = 0;
    srv_buf_puts(b, "{\"tokens\":[");
    for (int32_t i = 0; i < np; i++) {
        srv_buf_puts(b, i ? "," : "");
        offs[i] = off;
        size_t n = piece_json(b, s, pt[i]);
        /* SPM: the echoed text has no leading space where the first
         * piece has one (the tokenizer's space prefix) */
        char pb[256];
        if (off == 0 && n && ch->text.len && ch->text.p[0] != ' ' &&
            s->ops->detok(s->backend, pt[i], pb, sizeof(pb)) > 0 && pb[0] == ' ')
            n--;
        off += (int64_t)n;
    }
    if (with_prompt)
        ch->lp_offset = (int64_t)ch->echo_len;
    for (int32_t i = from; i < to; i++) {
        srv_buf_puts(b, i > from || np ? "," : "");
        offs[np + i - from] = ch->lp_offset;
        ch->lp_offset += (int64_t)piece_json(b, s, ch->tokens[i]);
    }
    srv_buf_puts(b, "],\"token_logprobs\":[");
    for (int32_t i = 0; i < np; i++)
        srv_buf_puts(b, i ? ",null" : "null");
    for (int32_t i = from; i < to; i++) {
        srv_buf_puts(b, i > from || np ? "," : "");
        logprob_num(b, ch->lps[i].logprob);
    }
    srv_buf_puts(b, "],\"top_logprobs\":[");
    for (int32_t i = 0; i < np; i++)
        srv_buf_puts(b, i ? ",null" : "null");
    for (int32_t i = from; i < to; i++) {
        srv_buf_puts(b, i > from || np ? ",{" : "{");
        for (int32_t k = 0; k < ch->lps[i].n_top; k++) {
            srv_buf_puts(b, k ? "," : "");
            piece_json(b, s, ch->lps[i].top_ids[k]);
            srv_buf_puts(b, ":");
            logprob_num(b, ch->lps[i].top_logprobs[k]);
        }
        srv_buf_puts(b, "}");
    }
    srv_buf_puts(b, "],\"text_offset\":[");
    for (int32_t i = 0; i < np + to - from; i++)
        srv_buf_printf(b, i ? ",%lld" : "%lld", (long long)offs[i]);
    srv_buf_puts(b, "]}");
    folio_free(offs);
}

/* Stream: sends the choice's releasable text (all of it when final) and
 * its new token ids as one SSE event. */
static void stream_emit(struct srv_choice *ch, bool final)
{
    struct srv_comp *comp = ch->comp;
    if (!comp->conn)
        return;
    size_t keep = 0;
    if (!final && comp->p.n_stop) {
        keep = max_stop_len(comp) - 1;
        if (keep > ch->text.len)
            keep = ch->text.len;
        size_t cut = ch->text.len - keep;
        while (cut > 0 && (ch->text.p[cut] & 0xC0) == 0x80)
            cut--;
        keep = ch->text.len - cut;
    }
    size_t send = ch->text.len - keep;
    int32_t new_ids = ch->n_tokens - ch->sent_tokens;
    if (!final && !send && (!new_ids || comp->p.chat))
        return;
    struct srv_buf b = {0};
    if (comp->p.chat && !ch->role_sent) {
        ch->role_sent = true;
        chunk_head(&b, comp);
        srv_buf_printf(&b,
                       ",\"choices\":[{\"index\":%d,\"delta\":{\"role\":\"assistant\","
                       "\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
                       ch->index);
    }
    chunk_head(&b, comp);
    if (comp->p.chat) {
        srv_buf_printf(&b, ",\"choices\":[{\"index\":%d,\"delta\":{", ch->index);
        if (send) {
            srv_buf_puts(&b, "\"content\":");
            srv_buf_json_str(&b, ch->text.p, send);
        }
        srv_buf_puts(&b, "},\"logprobs\":null,\"finish_reason\":");
    } else {
        srv_buf_printf(&b, ",\"choices\":[{\"index\":%d,\"text\":", ch->index);
        srv_buf_json_str(&b, ch->text.p ? ch->text.p : "", send);
        srv_buf_puts(&b, ",\"logprobs\":");
        if (comp->p.logprobs >= 0) {
            bool with_prompt = comp->p.echo && !ch->prompt_lp_sent;
            ch->prompt_lp_sent = true;
            logprobs_json(&b, ch, ch->sent_tokens, ch->n_tokens, with_prompt);
        } else
            srv_buf_puts(&b, "null");
        srv_buf_puts(&b, ",\"finish_reason\":");
    }
    if (final && ch->finish)
        srv_buf_printf(&b, "\"%s\"", ch->finish);
    else
        srv_buf_puts(&b, "null");
    if (!comp->p.chat) {
        srv_buf_puts(&b, ",\"token_ids\":");
        token_ids_json(&b, ch->tokens + ch->sent_tokens, new_ids);
    }
    srv_buf_puts(&b, "}]}\n\n");
    ch->sent_tokens = ch->n_tokens;
    if (send) {
        memmove(ch->text.p, ch->text.p + send, keep);
        ch->text.len = keep;
        ch->text.p[keep] = 0;
        ch->echo_len = ch->echo_len > send ? ch->echo_len - send : 0;
    }
    if (b.oom)
        srv_http_close(comp->conn, "out of memory");
    else
        srv_http_stream_chunk(comp->conn, b.p, b.len);
    srv_buf_free(&b);
}

static void comp_respond(struct srv_comp *comp)
{
    struct srv_conn *c = comp->conn;
    struct srv_buf b = {0};
    if (comp->p.stream) {
        if (comp->p.include_usage) {
            chunk_head(&b, comp);
            srv_buf_puts(&b, ",\"choices\":[],");
            usage_json(&b, comp);
            srv_buf_puts(&b, "}\n\n");
        }
        srv_buf_puts(&b, "data: [DONE]\n\n");
        srv_http_stream_chunk(c, b.p, b.len);
        srv_http_stream_end(c);
        srv_buf_free(&b);
        return;
    }
    for (int i = 0; i < comp->n_choices; i++)
        if (comp->ch[i].finish && !strcmp(comp->ch[i].finish, "error")) {
            struct srv_api_error e;
            srv_api_error_set(&e, 500, "server_error", NULL, NULL, "the engine failed");
            srv_http_error(c, &e, NULL);
            return;
        }
    srv_buf_printf(&b, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", comp->id,
                   comp->p.chat ? "chat.completion" : "text_completion", (long long)comp->created);
    srv_buf_json_str(&b, comp->srv->mi.name, strlen(comp->srv->mi.name));
    srv_buf_puts(&b, ",\"choices\":[");
    for (int i = 0; i < comp->n_choices; i++) {
        struct srv_choice *ch = &comp->ch[i];
        const char *fin = ch->finish ? ch->finish : "length";
        if (comp->p.chat) {
            srv_buf_printf(&b, "%s{\"index\":%d,\"message\":{\"role\":\"assistant\",\"content\":",
                           i ? "," : "", i);
            srv_buf_json_str(&b, ch->text.p ? ch->text.p : "", ch->text.len);
            srv_buf_printf(&b, "},\"logprobs\":null,\"finish_reason\":\"%s\"}", fin);
            continue;
        }
        srv_buf_printf(&b, "%s{\"index\":%d,\"text\":", i ? "," : "", i);
        srv_buf_json_str(&b, ch->text.p ? ch->text.p : "", ch->text.len);
        srv_buf_puts(&b, ",\"logprobs\":");
        if (comp->p.logprobs >= 0)
            logprobs_json(&b, ch, 0, ch->n_tokens, comp->p.echo);
        else
            srv_buf_puts(&b, "null");
        srv_buf_printf(&b, ",\"finish_reason\":\"%s\",\"token_ids\":", fin);
        token_ids_json(&b, ch->tokens, ch->n_tokens);
        srv_buf_puts(&b, "}");
    }
    srv_buf_puts(&b, "],");
    usage_json(&b, comp);
    srv_buf_puts(&b, "}\n");
    if (b.oom) {
        struct srv_api_error e;
        srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        srv_http_error(c, &e, NULL);
    } else
        srv_http_respond(c, 200, "application/json", b.p, b.len, NULL);
    srv_buf_free(&b);
}

static void ev_started(void *user, struct eng_req *r)
{
    struct srv *s = user;
    struct srv_choice *ch = r->user;
    srv_hist_observe(&s->queue, (double)(folio_now_ns() - ch->comp->t_arrival) * 1e-9);
}

static void ev_token(void *user, struct eng_req *r, int32_t tok)
{
    struct srv *s = user;
    struct srv_choice *ch = r->user;
    struct srv_comp *comp = ch->comp;
    uint64_t now = folio_now_ns();
    s->tm[comp->tenant].generation_tokens++;
    if (!ch->t_first) {
        ch->t_first = now;
        srv_hist_observe(&s->ttft, (double)(now - comp->t_arrival) * 1e-9);
    } else
        srv_hist_observe(&s->itl, (double)(now - ch->t_last) * 1e-9);
    ch->t_last = now;
    if (ch->stopped || !comp->conn)
        return;
    if (ch->n_tokens == ch->cap_tokens) {
        int32_t cap = ch->cap_tokens ? 2 * ch->cap_tokens : 64;
        int32_t *t = folio_realloc(ch->tokens, (size_t)cap * sizeof(*t));
        if (t)
            ch->tokens = t;
        struct sampler_result *l =
            t && r->n_logprobs >= 0 ? folio_realloc(ch->lps, (size_t)cap * sizeof(*l)) : NULL;
        if (l)
            ch->lps = l;
        if (!t || (r->n_logprobs >= 0 && !l)) {
            srv_http_close(comp->conn, "out of memory");
            return;
        }
        ch->cap_tokens = cap;
    }
    if (ch->lps) {
        if (r->lp)
            ch->lps[ch->n_tokens] = *r->lp;
        else
            ch->lps[ch->n_tokens] = (struct sampler_result){.token = tok, .logprob = NAN};
    }
    ch->tokens[ch->n_tokens++] = tok;
    if (!comp->p.ignore_eos && s->ops->is_eog && s->ops->is_eog(s->backend, tok)) {
        /* end of turn: counted, not shown; held UTF-8 bytes are released */
        char tail[8];
        srv_buf_append(&ch->text, tail, srv_utf8_flush(&ch->u8, tail));
        ch->stopped = true;
        ch->finish = "stop";
        if (tok != s->mi.eos_id)
            srv_engine_abort(s->eng, r);
        if (comp->p.stream)
            stream_emit(ch, false);
        return;
    }
    char bytes[256], clean[SRV_UTF8_OUT_MAX(256)];
    int n = s->ops->detok(s->backend, tok, bytes, sizeof(bytes));
    if (n > 0) {
        size_t m = srv_utf8_feed(&ch->u8, bytes, (size_t)n, clean);
        size_t old = ch->text.len;
        srv_buf_append(&ch->text, clean, m);
        if (comp->p.n_stop) {
            size_t ml = max_stop_len(comp);
            size_t from = old >= ml ? old - ml + 1 : 0;
            if (stop_scan(ch, from)) {
                ch->stopped = true;
                ch->finish = "stop";
                srv_engine_abort(s->eng, r);
            }
        }
    }
    if (comp->p.stream && !ch->stopped)
        stream_emit(ch, false);
}

static void ev_finished(void *user, struct eng_req *r, enum eng_finish why)
{
    struct srv *s = user;
    struct srv_choice *ch = r->user;
    struct srv_comp *comp = ch->comp;
    struct srv_tenant_metrics *tm = &s->tm[comp->tenant];
    ch->done = true;
    comp->n_live--;
    if (!ch->finish) {
        switch (why) {
        case ENG_FINISH_LENGTH:
            ch->finish = "length";
            break;
        case ENG_FINISH_EOS:
            ch->finish = "stop";
            break;
        case ENG_FINISH_ABORT:
            ch->finish = "abort";
            break;
        case ENG_FINISH_ERROR:
            ch->finish = "error";
            break;
        }
        char tail[8];
        size_t m = srv_utf8_flush(&ch->u8, tail);
        srv_buf_append(&ch->text, tail, m);
    }
    if (!strcmp(ch->finish, "stop"))
        tm->req_stop++;
    else if (!strcmp(ch->finish, "length"))
        tm->req_length++;
    else if (!strcmp(ch->finish, "abort"))
        tm->req_abort++;
    else
        tm->req_error++;
    double e2e = (double)(folio_now_ns() - comp->t_arrival) * 1e-9;
    srv_hist_observe(&s->e2e, e2e);
    srv_hist_observe(&tm->e2e, e2e);
    if (comp->conn && comp->p.stream && !comp->failed)
        stream_emit(ch, true);
    if (comp->n_live)
        return;
    struct srv_conn *c = comp->conn;
    if (c && !comp->failed) {
        comp_respond(comp);
        srv_http_request_done(c);
    }
    comp_free(comp);
}

static int resolve_tenant(struct srv_conn *c, struct srv_api_error *e)
{
    struct srv *s = c->srv;
    if (!c->is_tcp) {
        int t = srv_config_tenant_by_uid(s->cfg, c->peer_uid);
        if (t >= 0)
            return t;
        if (!strcmp(s->cfg->unknown_uid, "refuse")) {
            srv_api_error_set(e, 403, "permission_error", NULL, NULL,
                              "uid %lld is not a configured tenant", (long long)c->peer_uid);
            return -1;
        }
        return 0;
    }
    if (!srv_config_has_keys(s->cfg))
        return 0;
    const char *a = c->auth.p;
    if (a && !strncasecmp(a, "Bearer ", 7)) {
        int t = srv_config_tenant_by_key(s->cfg, a + 7);
        if (t >= 0)
            return t;
    }
    srv_api_error_set(e, 401, "authentication_error", NULL, "invalid_api_key",
                      "a valid 'Authorization: Bearer KEY' is required");
    return -1;
}

static int tokenize_hook(void *ctx, const char *text, size_t n, bool special, int32_t **out,
                         int32_t *n_out)
{
    struct srv *s = ctx;
    if (!s->ops->tokenize)
        return -ENOSYS;
    return s->ops->tokenize(s->backend, text, n, special, out, n_out);
}

/* Echo: the prompt's text at the head of the choice's text. */
static void echo_prompt(struct srv_choice *ch, int pi)
{
    struct srv_comp *comp = ch->comp;
    const char *t = comp->p.prompt_text ? comp->p.prompt_text[pi] : NULL;
    if (t)
        srv_buf_append(&ch->text, t, strlen(t));
    else {
        struct srv_utf8 u8 = {0};
        char bytes[256], clean[SRV_UTF8_OUT_MAX(256)];
        for (int32_t i = 0; i < ch->er.n_prompt; i++) {
            int k =
                comp->srv->ops->detok(comp->srv->backend, ch->er.prompt[i], bytes, sizeof(bytes));
            if (k > 0)
                srv_buf_append(&ch->text, clean, srv_utf8_feed(&u8, bytes, (size_t)k, clean));
        }
        srv_buf_append(&ch->text, clean, srv_utf8_flush(&u8, clean));
    }
    ch->echo_len = ch->text.len;
}

static void route_completions(struct srv_conn *c, bool chat)
{
    struct srv *s = c->srv;
    struct srv_api_error e;
    if (s->draining) {
        srv_api_error_set(&e, 503, "service_unavailable", NULL, NULL, "server is shutting down");
        srv_http_error(c, &e, NULL);
        return;
    }
    int tenant = resolve_tenant(c, &e);
    if (tenant < 0) {
        srv_http_error(c, &e, NULL);
        return;
    }
    struct srv_comp *comp = folio_calloc(1, sizeof(*comp));
    if (!comp) {
        srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        srv_http_error(c, &e, NULL);
        return;
    }
    comp->srv = s;
    comp->t_arrival = folio_now_ns();
    s->n_comps++;
    const char *body = c->body.p ? c->body.p : "";
    if (chat ? srv_chat_parse(body, c->body.len, &s->mi, s->chat_tmpl, tokenize_hook, s, &comp->p,
                              &e)
             : srv_comp_parse(body, c->body.len, &s->mi, tokenize_hook, s, &comp->p, &e)) {
        srv_http_error(c, &e, NULL);
        comp_free(comp);
        return;
    }
    const struct srv_tenant_cfg *tc = &s->cfg->tenants[tenant];
    int n_choices = comp->p.n_prompts * comp->p.n;
    if (tc->max_waiting > 0) {
        struct eng_tenant_stats ts;
        s->ops->tenant_stats(s->backend, tenant, &ts);
        if (ts.waiting + n_choices > tc->max_waiting) {
            s->tm[tenant].rejected_429++;
            srv_api_error_set(&e, 429, "rate_limit_error", NULL, "tenant_queue_full",
                              "tenant '%s' has %lld requests waiting (max_waiting %lld)", tc->name,
                              (long long)ts.waiting, (long long)tc->max_waiting);
            srv_http_error(c, &e, "Retry-After: 1\r\n");
            comp_free(comp);
            return;
        }
    }
    comp->ch = folio_calloc((size_t)n_choices, sizeof(*comp->ch));
    if (!comp->ch) {
        srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        srv_http_error(c, &e, NULL);
        comp_free(comp);
        return;
    }
    comp->n_choices = n_choices;
    comp->tenant = tenant;
    comp->created = (int64_t)time(NULL);
    snprintf(comp->id, sizeof(comp->id), "%s-%llx%06llx", chat ? "chatcmpl" : "cmpl",
             (unsigned long long)s->started_at, (unsigned long long)++s->next_id);
    uint64_t base_seed =
        comp->p.has_seed ? comp->p.seed : (uint64_t)s->next_id * 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < n_choices; i++) {
        struct srv_choice *ch = &comp->ch[i];
        int pi = i / comp->p.n;
        ch->comp = comp;
        ch->index = i;
        ch->er.id = ++s->next_id;
        ch->er.tenant = tenant;
        ch->er.salt = fnv1a(tc->name);
        ch->er.prompt = comp->p.prompts[pi];
        ch->er.n_prompt = comp->p.prompt_lens[pi];
        ch->er.max_tokens = comp->p.max_tokens;
        ch->er.sp = (struct eng_sampling){
            .temperature = comp->p.temperature,
            .top_p = comp->p.top_p,
            .top_k = comp->p.top_k,
            .seed = base_seed + (uint64_t)(i % comp->p.n),
            .ignore_eos = comp->p.ignore_eos,
            .n_bias = comp->p.n_bias,
            .bias_tokens = comp->p.bias_tokens,
            .bias_values = comp->p.bias_values,
        };
        ch->er.n_logprobs = comp->p.logprobs;
        ch->er.user = ch;
        comp->prompt_tokens += ch->er.n_prompt;
        if (comp->p.echo)
            echo_prompt(ch, pi);
    }
    for (int i = 0; i < n_choices; i++) {
        int rc = srv_engine_submit(s->eng, &comp->ch[i].er);
        if (rc) {
            comp->failed = true;
            for (int j = 0; j < i; j++) {
                comp->ch[j].stopped = true;
                srv_engine_abort(s->eng, &comp->ch[j].er);
            }
            if (rc == -EBUSY) {
                s->tm[tenant].rejected_429++;
                srv_api_error_set(&e, 429, "rate_limit_error", NULL, "tenant_queue_full",
                                  "tenant '%s' has too many requests waiting", tc->name);
            } else
                srv_api_error_set(&e, 400, "invalid_request_error", "prompt", NULL,
                                  "request cannot be scheduled: %s",
                                  rc == -EINVAL ? "it needs more KV cache than this server (or "
                                                  "its tenant) may hold"
                                                : strerror(-rc));
            srv_http_error(c, &e, rc == -EBUSY ? "Retry-After: 1\r\n" : NULL);
            if (i == 0)
                comp_free(comp);
            else
                comp->n_live = i;
            return;
        }
        comp->n_live++;
    }
    s->tm[tenant].prompt_tokens += (double)comp->prompt_tokens;
    comp->conn = c;
    c->comp = comp;
    if (comp->p.stream && srv_http_stream_begin(c))
        return; /* connection dropped: detached, aborted */
}

/* ---- observability ---------------------------------------------------- */

static void tenant_label(const struct srv *s, int t, char *out, size_t cap)
{
    char esc[160];
    srv_prom_label_escape(s->cfg->tenants[t].name, esc, sizeof(esc));
    snprintf(out, cap, "tenant=\"%s\"", esc);
}

void srv_metrics_render(struct srv *s, struct srv_buf *b)
{
    struct eng_stats st;
    s->ops->stats(s->backend, &st);
    struct {
        const char *name, *type, *help;
        double v;
    } g[] = {
        {"folio_num_requests_running", "gauge", "Requests in the running batch.",
         (double)st.running},
        {"folio_num_requests_waiting", "gauge", "Requests waiting to be scheduled.",
         (double)st.waiting},
        {"folio_num_requests_preempted", "gauge", "Requests preempted and waiting to resume.",
         (double)st.preempted},
        {"folio_num_preemptions_total", "counter", "Preemptions since start.",
         (double)st.preemptions_total},
        {"folio_kv_num_blocks", "gauge", "KV blocks in the pool.", (double)st.blocks_total},
        {"folio_kv_blocks_used", "gauge", "KV blocks mapped by a sequence.",
         (double)st.blocks_used},
        {"folio_kv_blocks_free", "gauge", "KV blocks on the free list.", (double)st.blocks_free},
        {"folio_kv_blocks_cached", "gauge", "Unreferenced KV blocks kept in the prefix cache.",
         (double)st.blocks_cached},
        {"folio_kv_cache_usage_ratio", "gauge", "Fraction of KV blocks in use (0..1).",
         st.blocks_total ? (double)st.blocks_used / (double)st.blocks_total : 0},
        {"folio_kv_tokens_held", "gauge", "Tokens held by live sequences' page tables.",
         (double)st.tokens_held},
        {"folio_kv_slots_empty", "gauge", "Token slots allocated but not yet filled.",
         (double)st.slots_empty},
        {"folio_kv_block_size_tokens", "gauge", "Token slots per KV block.", (double)st.block_size},
        {"folio_prefix_cache_queries_total", "counter",
         "Prompt tokens looked up in the prefix cache.", (double)st.prefix_queries},
        {"folio_prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.",
         (double)st.prefix_hits},
        {"folio_steps_total", "counter", "Engine steps run.", s->steps_total},
        {"folio_connections_total", "counter", "Connections accepted.", s->connections_total},
        {"folio_connections_open", "gauge", "Connections open.", (double)s->n_conns},
        {"folio_client_disconnects_total", "counter",
         "Requests aborted because their client went away.", s->disconnects_total},
        {"folio_slow_reader_drops_total", "counter",
         "Connections dropped for leaving too much output unread.", s->dropped_slow_total},
        {"folio_draining", "gauge", "1 while the server drains for shutdown.", s->draining ? 1 : 0},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(g); i++) {
        srv_prom_family(b, g[i].name, g[i].type, g[i].help);
        srv_prom_sample(b, g[i].name, NULL, g[i].v);
    }
    if (s->mi.matmul) { /* names are fixed identifiers: no escaping needed */
        char lab[64];
        snprintf(lab, sizeof(lab), "backend=\"%s\"", s->mi.matmul);
        srv_prom_family(b, "folio_matmul_info", "gauge", "Matrix-product backend in use.");
        srv_prom_sample(b, "folio_matmul_info", lab, 1);
    }
    srv_prom_family(b, "folio_kv_bytes_per_token", "gauge",
                    "KV cache bytes one token takes (K and V, every layer and KV head).");
    srv_prom_sample(b, "folio_kv_bytes_per_token", NULL,
                    st.block_size ? (double)st.bytes_per_block / (double)st.block_size : 0);
    {
        char dl[64];
        snprintf(dl, sizeof(dl), "dtype=\"%s\"", st.kv_dtype ? st.kv_dtype : "f32");
        srv_prom_family(b, "folio_kv_dtype_info", "gauge", "KV element type (label dtype); 1.");
        srv_prom_sample(b, "folio_kv_dtype_info", dl, 1);
    }
    double prompt_total = 0, gen_total = 0;
    for (int t = 0; t < s->cfg->n_tenants; t++) {
        prompt_total += s->tm[t].prompt_tokens;
        gen_total += s->tm[t].generation_tokens;
    }
    srv_prom_family(b, "folio_prompt_tokens_total", "counter",
                    "Prompt tokens of admitted requests.");
    srv_prom_sample(b, "folio_prompt_tokens_total", NULL, prompt_total);
    srv_prom_family(b, "folio_generation_tokens_total", "counter", "Tokens generated.");
    srv_prom_sample(b, "folio_generation_tokens_total", NULL, gen_total);
    srv_prom_family(b, "folio_http_responses_total", "counter", "HTTP responses by status class.");
    for (int k = 1; k <= 5; k++) {
        char lab[32];
        snprintf(lab, sizeof(lab), "code=\"%dxx\"", k);
        srv_prom_sample(b, "folio_http_responses_total", lab, s->http_requests[k]);
    }
    struct {
        const char *name, *help;
        const struct srv_hist *h;
    } hs[] = {
        {"folio_time_to_first_token_seconds", "Time from arrival to the first token.", &s->ttft},
        {"folio_inter_token_latency_seconds", "Time between consecutive tokens of a sequence.",
         &s->itl},
        {"folio_e2e_request_latency_seconds", "Time from arrival to finish, per sequence.",
         &s->e2e},
        {"folio_request_queue_time_seconds", "Time from arrival to first scheduling.", &s->queue},
        {"folio_step_duration_seconds", "Wall time of one engine step.", &s->step},
        {"folio_iteration_tokens", "Tokens computed per engine step.", &s->step_tokens},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(hs); i++) {
        srv_prom_family(b, hs[i].name, "histogram", hs[i].help);
        srv_prom_hist(b, hs[i].name, NULL, hs[i].h);
    }
    /* per tenant */
    int nt = s->cfg->n_tenants;
    struct eng_tenant_stats ts[SRV_MAX_TENANTS];
    for (int t = 0; t < nt; t++)
        s->ops->tenant_stats(s->backend, t, &ts[t]);
    char lab[256];
#define TENANT_SERIES(NAME, TYPE, HELP, EXPR)                                                      \
    do {                                                                                           \
        srv_prom_family(b, NAME, TYPE, HELP);                                                      \
        for (int t = 0; t < nt; t++) {                                                             \
            tenant_label(s, t, lab, sizeof(lab));                                                  \
            srv_prom_sample(b, NAME, lab, (double)(EXPR));                                         \
        }                                                                                          \
    } while (0)
    TENANT_SERIES("folio_tenant_requests_running", "gauge", "Running requests per tenant.",
                  ts[t].running);
    TENANT_SERIES("folio_tenant_requests_waiting", "gauge", "Waiting requests per tenant.",
                  ts[t].waiting);
    TENANT_SERIES("folio_tenant_kv_blocks_used", "gauge", "KV blocks held per tenant.",
                  ts[t].blocks_used);
    TENANT_SERIES("folio_tenant_prompt_tokens_total", "counter", "Prompt tokens per tenant.",
                  s->tm[t].prompt_tokens);
    TENANT_SERIES("folio_tenant_generation_tokens_total", "counter", "Generated tokens per tenant.",
                  s->tm[t].generation_tokens);
    TENANT_SERIES("folio_tenant_rejected_requests_total", "counter",
                  "Requests refused with 429 per tenant.", s->tm[t].rejected_429);
#undef TENANT_SERIES
    srv_prom_family(b, "folio_request_success_total", "counter",
                    "Finished sequences by tenant and finish reason.");
    for (int t = 0; t < nt; t++) {
        static const char *reasons[] = {"stop", "length", "abort", "error"};
        double v[] = {s->tm[t].req_stop, s->tm[t].req_length, s->tm[t].req_abort,
                      s->tm[t].req_error};
        char tl[200];
        tenant_label(s, t, tl, sizeof(tl));
        for (int k = 0; k < 4; k++) {
            snprintf(lab, sizeof(lab), "%s,finished_reason=\"%s\"", tl, reasons[k]);
            srv_prom_sample(b, "folio_request_success_total", lab, v[k]);
        }
    }
    srv_prom_family(b, "folio_tenant_e2e_request_latency_seconds", "histogram",
                    "Time from arrival to finish, per sequence, per tenant.");
    for (int t = 0; t < nt; t++) {
        tenant_label(s, t, lab, sizeof(lab));
        srv_prom_hist(b, "folio_tenant_e2e_request_latency_seconds", lab, &s->tm[t].e2e);
    }
}

void srv_kv_render(struct srv *s, struct srv_buf *b)
{
    struct eng_stats st;
    s->ops->stats(s->backend, &st);
    srv_buf_printf(
        b,
        "{\"block_size\":%lld,\"num_blocks\":%lld,\"bytes_per_block\":%lld,"
        "\"bytes_per_token\":%lld,"
        "\"dtype\":\"%s\",\"blocks\":{\"free\":%lld,\"used\":%lld,\"cached\":%lld},"
        "\"tokens_held\":%lld,\"slots_empty\":%lld,\"requests\":{\"running\":%lld,"
        "\"waiting\":%lld,\"preempted\":%lld},\"preemptions_total\":%lld,"
        "\"prefix_cache\":{\"queries\":%lld,\"hits\":%lld},\"tenants\":[",
        (long long)st.block_size, (long long)st.blocks_total, (long long)st.bytes_per_block,
        (long long)(st.block_size ? st.bytes_per_block / st.block_size : 0),
        st.kv_dtype ? st.kv_dtype : "f32", (long long)st.blocks_free, (long long)st.blocks_used,
        (long long)st.blocks_cached, (long long)st.tokens_held, (long long)st.slots_empty,
        (long long)st.running, (long long)st.waiting, (long long)st.preempted,
        (long long)st.preemptions_total, (long long)st.prefix_queries, (long long)st.prefix_hits);
    for (int t = 0; t < s->cfg->n_tenants; t++) {
        struct eng_tenant_stats ts;
        s->ops->tenant_stats(s->backend, t, &ts);
        srv_buf_printf(b, "%s{\"name\":", t ? "," : "");
        srv_buf_json_str(b, s->cfg->tenants[t].name, strlen(s->cfg->tenants[t].name));
        srv_buf_printf(b, ",\"blocks_used\":%lld,\"running\":%lld,\"waiting\":%lld",
                       (long long)ts.blocks_used, (long long)ts.running, (long long)ts.waiting);
        srv_buf_printf(b, ",\"max_kv_blocks\":%lld,\"max_running\":%lld}", /* 0: no limit */
                       (long long)s->cfg->tenants[t].max_kv_blocks,
                       (long long)s->cfg->tenants[t].max_running);
    }
    srv_buf_puts(b, "],\"block_map\":[");
    int32_t nb = s->ops->n_blocks(s->backend);
    static const char *names[] = {"free", "used", "cached"};
    for (int32_t i = 0; i < nb; i++) {
        struct pager_block_info bi;
        s->ops->block_info(s->backend, i, &bi);
        srv_buf_printf(b,
                       "%s{\"state\":\"%s\",\"seq\":%llu,\"tenant\":%u,\"refcount\":%d,"
                       "\"tokens\":%d}",
                       i ? "," : "", names[bi.state], (unsigned long long)bi.owner, bi.tenant,
                       bi.refcount, bi.tokens);
    }
    srv_buf_puts(b, "]}\n");
}

/* ---- routes ----------------------------------------------------------- */

static void respond_buf(struct srv_conn *c, int status, const char *ctype, struct srv_buf *b)
{
    if (b->oom) {
        struct srv_api_error e;
        srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        srv_http_error(c, &e, NULL);
    } else
        srv_http_respond(c, status, ctype, b->p ? b->p : "", b->len, NULL);
    srv_buf_free(b);
}

static void route_tokenize(struct srv_conn *c)
{
    struct srv *s = c->srv;
    struct srv_api_error e;
    char *text = NULL;
    int32_t *ids = NULL, n = 0;
    if (srv_tokenize_parse(c->body.p ? c->body.p : "", c->body.len, &s->mi, &text, &e)) {
        srv_http_error(c, &e, NULL);
        return;
    }
    int rc = tokenize_hook(s, text, strlen(text), false, &ids, &n);
    folio_free(text);
    if (rc) {
        srv_api_error_set(&e, 400, "invalid_request_error", "prompt", NULL, "%s",
                          rc == -ENOSYS ? "this server has no tokenizer (token ids only)"
                                        : "cannot tokenize 'prompt'");
        srv_http_error(c, &e, NULL);
        return;
    }
    struct srv_buf b = {0};
    srv_buf_printf(&b, "{\"count\":%d,\"max_model_len\":%d,\"tokens\":", n, s->mi.ctx_len);
    token_ids_json(&b, ids, n);
    srv_buf_puts(&b, "}\n");
    folio_free(ids);
    respond_buf(c, 200, "application/json", &b);
}

static void route_detokenize(struct srv_conn *c)
{
    struct srv *s = c->srv;
    struct srv_api_error e;
    int32_t *ids = NULL, n = 0;
    if (srv_detokenize_parse(c->body.p ? c->body.p : "", c->body.len, &s->mi, &ids, &n, &e)) {
        srv_http_error(c, &e, NULL);
        return;
    }
    struct srv_utf8 u8 = {0};
    struct srv_buf text = {0};
    char bytes[256], clean[SRV_UTF8_OUT_MAX(256)];
    for (int32_t i = 0; i < n; i++) {
        int k = s->ops->detok(s->backend, ids[i], bytes, sizeof(bytes));
        if (k > 0)
            srv_buf_append(&text, clean, srv_utf8_feed(&u8, bytes, (size_t)k, clean));
    }
    srv_buf_append(&text, clean, srv_utf8_flush(&u8, clean));
    folio_free(ids);
    struct srv_buf b = {0};
    srv_buf_puts(&b, "{\"prompt\":");
    srv_buf_json_str(&b, text.p ? text.p : "", text.len);
    srv_buf_puts(&b, "}\n");
    srv_buf_free(&text);
    respond_buf(c, 200, "application/json", &b);
}

void srv_route(struct srv_conn *c)
{
    struct srv *s = c->srv;
    struct srv_api_error e;
    const char *url = c->url.p ? c->url.p : "";
    size_t plen = strcspn(url, "?#");
    int method = llhttp_get_method(&c->parser);
    static const struct {
        const char *path;
        int method;
    } routes[] = {
        {"/v1/completions", HTTP_POST}, {"/v1/models", HTTP_GET},
        {"/health", HTTP_GET},          {"/metrics", HTTP_GET},
        {"/v1/kv", HTTP_GET},           {"/tokenize", HTTP_POST},
        {"/detokenize", HTTP_POST},     {"/v1/chat/completions", HTTP_POST},
        {"/dashboard", HTTP_GET},
    };
    int r = -1;
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(routes); i++)
        if (strlen(routes[i].path) == plen && !strncmp(url, routes[i].path, plen))
            r = (int)i;
    if (r < 0) {
        srv_api_error_set(&e, 404, "NotFoundError", NULL, NULL, "no route for %.*s",
                          (int)FOLIO_MIN(plen, 200), url);
        srv_http_error(c, &e, NULL);
        return;
    }
    if (method != routes[r].method) {
        char allow[64];
        snprintf(allow, sizeof(allow), "Allow: %s\r\n",
                 routes[r].method == HTTP_GET ? "GET" : "POST");
        srv_api_error_set(&e, 405, "invalid_request_error", NULL, NULL, "%s is not allowed on %s",
                          llhttp_method_name((llhttp_method_t)method), routes[r].path);
        srv_http_error(c, &e, allow);
        return;
    }
    struct srv_buf b = {0};
    switch (r) {
    case 0:
        route_completions(c, false);
        return;
    case 1:
        srv_buf_printf(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
        srv_buf_json_str(&b, s->mi.name, strlen(s->mi.name));
        srv_buf_printf(&b,
                       ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"foliod\","
                       "\"max_model_len\":%d,\"vocab_size\":%d,\"matmul\":\"%s\"}]}\n",
                       (long long)s->started_at, s->mi.ctx_len, s->mi.n_vocab,
                       s->mi.matmul ? s->mi.matmul : "none");
        respond_buf(c, 200, "application/json", &b);
        return;
    case 2:
        if (s->draining) {
            srv_buf_puts(&b, "{\"status\":\"draining\"}\n");
            respond_buf(c, 503, "application/json", &b);
        } else {
            srv_buf_puts(&b, "{\"status\":\"ok\"}\n");
            respond_buf(c, 200, "application/json", &b);
        }
        return;
    case 3:
        srv_metrics_render(s, &b);
        respond_buf(c, 200, "text/plain; version=0.0.4; charset=utf-8", &b);
        return;
    case 4:
        srv_kv_render(s, &b);
        respond_buf(c, 200, "application/json", &b);
        return;
    case 5:
        route_tokenize(c);
        return;
    case 6:
        route_detokenize(c);
        return;
    case 7:
        route_completions(c, true);
        return;
    case 8: {
        size_t n;
        const char *page = srv_dashboard_html(&n);
        srv_http_respond(c, 200, "text/html; charset=utf-8", page, n, NULL);
        return;
    }
    }
}

/* ---- listeners, signals, drain ---------------------------------------- */

static void on_unix_conn(uv_stream_t *l, int status)
{
    struct srv *s = l->data;
    if (status == 0)
        srv_http_accept(s, l, false);
}

static void on_tcp_conn(uv_stream_t *l, int status)
{
    struct srv *s = l->data;
    if (status == 0)
        srv_http_accept(s, l, true);
}

/* Refuses to replace a live daemon's socket; removes a stale one. */
static int socket_claim(struct srv *s, const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(sb.st_mode)) {
        srv_log(s, 0, "%s exists and is not a socket; not touching it", path);
        return -EEXIST;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, path, strlen(path) + 1);
    int rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
    int err = errno;
    close(fd);
    if (rc == 0) {
        srv_log(s, 0, "another daemon is listening on %s; refusing to start", path);
        return -EADDRINUSE;
    }
    if (err != ECONNREFUSED && err != ENOENT) {
        srv_log(s, 0, "cannot probe %s: %s", path, strerror(err));
        return -err;
    }
    srv_log(s, 1, "removing stale socket %s", path);
    if (unlink(path) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}

static int listen_unix(struct srv *s)
{
    const char *path = s->cfg->socket;
    int rc = socket_claim(s, path);
    if (rc)
        return rc;
    if ((rc = uv_pipe_init(s->loop, &s->unix_srv, 0)))
        return rc;
    s->unix_srv.data = s;
    s->have_unix = true;
    mode_t old = umask(0117); /* socket file mode 0660 from creation on */
    rc = uv_pipe_bind(&s->unix_srv, path);
    umask(old);
    if (rc) {
        srv_log(s, 0, "cannot bind %s: %s", path, uv_strerror(rc));
        return rc;
    }
    if ((rc = uv_listen((uv_stream_t *)&s->unix_srv, 511, on_unix_conn))) {
        srv_log(s, 0, "cannot listen on %s: %s", path, uv_strerror(rc));
        unlink(path);
        return rc;
    }
    srv_log(s, 1, "listening on %s", path);
    return 0;
}

static int listen_tcp(struct srv *s)
{
    const char *hp = s->cfg->listen;
    const char *colon = strrchr(hp, ':');
    char host[64];
    size_t hl = FOLIO_MIN((size_t)(colon - hp), sizeof(host) - 1);
    memcpy(host, hp, hl);
    host[hl] = 0;
    int port = atoi(colon + 1);
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } addr;
    int rc;
    if (!strcmp(host, "localhost"))
        rc = uv_ip4_addr("127.0.0.1", port, &addr.in4);
    else if (host[0] == '[') {
        host[strlen(host) - 1] = 0;
        rc = uv_ip6_addr(host + 1, port, &addr.in6);
    } else
        rc = uv_ip4_addr(host, port, &addr.in4);
    if (rc) {
        srv_log(s, 0, "--listen %s: %s", hp, uv_strerror(rc));
        return rc;
    }
    if ((rc = uv_tcp_init(s->loop, &s->tcp_srv)))
        return rc;
    s->tcp_srv.data = s;
    s->have_tcp = true;
    if ((rc = uv_tcp_bind(&s->tcp_srv, &addr.sa, 0)) ||
        (rc = uv_listen((uv_stream_t *)&s->tcp_srv, 511, on_tcp_conn))) {
        srv_log(s, 0, "cannot listen on %s: %s", hp, uv_strerror(rc));
        return rc;
    }
    srv_log(s, 1, "listening on tcp %s", hp);
    return 0;
}

static void close_listeners(struct srv *s)
{
    if (s->have_unix) {
        s->have_unix = false;
        uv_close((uv_handle_t *)&s->unix_srv, NULL);
        unlink(s->cfg->socket);
    }
    if (s->have_tcp) {
        s->have_tcp = false;
        uv_close((uv_handle_t *)&s->tcp_srv, NULL);
    }
}

static void maybe_exit(struct srv *s)
{
    if (!s->draining || s->stopping || s->n_conns || s->n_comps)
        return;
    s->stopping = true;
    srv_log(s, 1, "drained; exiting");
    if (s->drain_timer_on)
        uv_close((uv_handle_t *)&s->drain_timer, NULL);
    uv_close((uv_handle_t *)&s->sig_term, NULL);
    uv_close((uv_handle_t *)&s->sig_int, NULL);
    srv_engine_close(s->eng);
    s->eng = NULL;
}

void srv_conn_gone(struct srv *s)
{
    maybe_exit(s);
}

static void on_drain_timeout(uv_timer_t *t)
{
    struct srv *s = t->data;
    srv_log(s, 1, "drain timeout: aborting %d requests", s->n_comps);
    for (struct srv_conn *c = s->conns, *next; c; c = next) {
        next = c->next;
        srv_http_close(c, "drain timeout");
    }
}

static void begin_drain(struct srv *s, const char *why)
{
    if (s->draining)
        return;
    s->draining = true;
    srv_log(s, 1, "%s: draining (%d requests running, timeout %lld ms)", why, s->n_comps,
            (long long)s->cfg->drain_timeout_ms);
    close_listeners(s);
    for (struct srv_conn *c = s->conns, *next; c; c = next) {
        next = c->next;
        if (c->comp)
            continue;
        if (c->writes_out)
            c->close_after_write = true;
        else
            srv_http_close(c, "draining");
    }
    if (!uv_timer_init(s->loop, &s->drain_timer)) {
        s->drain_timer.data = s;
        s->drain_timer_on = true;
        uv_timer_start(&s->drain_timer, on_drain_timeout, (uint64_t)s->cfg->drain_timeout_ms, 0);
        uv_unref((uv_handle_t *)&s->drain_timer);
    }
    maybe_exit(s);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct srv *s = h->data;
    if (signum == SIGINT && ++s->sigint_count >= 2) {
        srv_log(s, 0, "second SIGINT: aborting");
        if (s->have_unix)
            unlink(s->cfg->socket);
        _exit(130);
    }
    begin_drain(s, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

static void on_step(void *user, const struct srv_engine_step_stats *st)
{
    struct srv *s = user;
    s->steps_total++;
    srv_hist_observe(&s->step, st->seconds);
    srv_hist_observe(&s->step_tokens, st->tokens);
}

/* The template chat requests are rendered with: --chat-template, else the
 * model file's, else (no template key: the default model, gen-model's)
 * ChatML, whose markers are then plain text for a vocabulary without
 * them.  An unrecognised template leaves chat disabled (400s). */
static void chat_template_choose(struct srv *s)
{
    const char *name = s->cfg->chat_template ? s->cfg->chat_template : "auto";
    enum chat_template t = 0;
    char err[200];
    if (!s->mi.has_tokenizer) {
        srv_log(s, 1, "chat: disabled (the model has no tokenizer)");
        return;
    }
    if (strcmp(name, "auto")) {
        if (!chat_template_by_name(name, &t, err, sizeof(err)))
            s->chat_tmpl = (int)t;
        srv_log(s, 1, "chat template: %s (--chat-template)", chat_template_name(t));
    } else if (s->mi.chat_template_rc == 0) {
        s->chat_tmpl = s->mi.chat_template;
        srv_log(s, 1, "chat template: %s (recognised from the model's tokenizer.chat_template)",
                chat_template_name((enum chat_template)s->chat_tmpl));
    } else if (s->mi.chat_template_rc == -ENOENT) {
        s->chat_tmpl = CHAT_TMPL_CHATML;
        srv_log(s, 1,
                "chat template: chatml (the model has no tokenizer.chat_template; its markers are "
                "plain text unless the vocabulary has them; --chat-template NAME to choose)");
    } else
        srv_log(s, 0,
                "warning: the model's tokenizer.chat_template is not one foliod knows; "
                "/v1/chat/completions will answer 400 (start foliod with --chat-template "
                "chatml|llama2|llama3|mistral|zephyr|phi3)");
}

static const double lat_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,
                                    0.5,   0.75,   1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
static const double tok_bounds[] = {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};

int srv_main(int argc, char **argv, eng_backend_factory factory)
{
    signal(SIGPIPE, SIG_IGN); /* a write to a vanished client must not kill us */
    struct srv_config cfg;
    char err[512] = "";
    int status = 1;
    if (srv_config_parse(&cfg, argc, argv, err, sizeof(err))) {
        fprintf(stderr, "foliod: %s\n", err);
        srv_config_free(&cfg);
        return 2;
    }
    if (cfg.help) {
        srv_config_help(stdout);
        srv_config_free(&cfg);
        return 0;
    }
    if (cfg.dump) {
        srv_config_dump(&cfg, stdout);
        srv_config_free(&cfg);
        return 0;
    }
    struct srv *s = folio_calloc(1, sizeof(*s));
    if (!s) {
        srv_config_free(&cfg);
        return 1;
    }
    s->cfg = &cfg;
    s->log_level = !strcmp(cfg.log_level, "error") ? 0 : !strcmp(cfg.log_level, "info") ? 1 : 2;
    s->started_at = (int64_t)time(NULL);
    srv_hist_init(&s->ttft, lat_bounds, (int)FOLIO_ARRAY_LEN(lat_bounds));
    srv_hist_init(&s->itl, lat_bounds, (int)FOLIO_ARRAY_LEN(lat_bounds));
    srv_hist_init(&s->e2e, lat_bounds, (int)FOLIO_ARRAY_LEN(lat_bounds));
    srv_hist_init(&s->queue, lat_bounds, (int)FOLIO_ARRAY_LEN(lat_bounds));
    srv_hist_init(&s->step, lat_bounds, (int)FOLIO_ARRAY_LEN(lat_bounds));
    srv_hist_init(&s->step_tokens, tok_bounds, (int)FOLIO_ARRAY_LEN(tok_bounds));
    for (int t = 0; t < SRV_MAX_TENANTS; t++)
        srv_hist_init(&s->tm[t].e2e, lat_bounds, (int)FOLIO_ARRAY_LEN(lat_bounds));

    int rc = factory(&cfg, &s->ops, &s->backend, err, sizeof(err));
    if (rc) {
        srv_log(s, 0, "cannot start the engine: %s", err[0] ? err : strerror(-rc));
        goto out_cfg;
    }
    s->ops->info(s->backend, &s->mi);
    chat_template_choose(s);
    uv_loop_t loop;
    if (uv_loop_init(&loop))
        goto out_backend;
    s->loop = &loop;
    struct eng_events ev = {s, ev_started, ev_token, ev_finished};
    if ((rc = srv_engine_init(&s->eng, &loop, s->ops, s->backend, &ev, on_step))) {
        srv_log(s, 0, "cannot start the engine thread: %s", uv_strerror(rc));
        goto out_loop;
    }
    uv_signal_init(&loop, &s->sig_term);
    uv_signal_init(&loop, &s->sig_int);
    s->sig_term.data = s->sig_int.data = s;
    uv_signal_start(&s->sig_term, on_signal, SIGTERM);
    uv_signal_start(&s->sig_int, on_signal, SIGINT);
    if ((rc = listen_unix(s)) || (cfg.listen && (rc = listen_tcp(s)))) {
        close_listeners(s);
        s->draining = true; /* maybe_exit then tears down */
        maybe_exit(s);
        uv_run(&loop, UV_RUN_DEFAULT);
        goto out_loop;
    }
    srv_log(s, 1, "serving model '%s' (%s engine, matmul %s, ctx %d, vocab %d, %s)", s->mi.name,
            s->ops->kind, s->mi.matmul ? s->mi.matmul : "none", s->mi.ctx_len, s->mi.n_vocab,
            s->mi.has_tokenizer ? "tokenizer loaded" : "no tokenizer: token ids only");
    uv_run(&loop, UV_RUN_DEFAULT);
    status = 0;
out_loop:
    uv_loop_close(&loop);
out_backend:
    s->ops->free(s->backend);
out_cfg:
    folio_free(s);
    srv_config_free(&cfg);
    return status;
}
