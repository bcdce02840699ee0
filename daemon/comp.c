/*
 * daemon/comp.c — completions, embeddings and rerank: one struct srv_comp
 * per POST /v1/completions, /v1/chat/completions, /v1/embeddings or
 * /v1/rerank, one engine request per choice (prompts x n), the engine's
 * events turned into text, SSE chunks and the final response (rendered by
 * render.c).
 *
 * Embeddings are the same machinery: one choice per input (n = 1), whose
 * engine request asks for the final hidden states of the positions the
 * pooling covers (eng_gen.hidden_*) and generates one greedy token the
 * client never sees (no text, no generation tokens counted); the hidden
 * states arrive per computed span (eng_events.hidden) into the choice's
 * sum (embed.h), and the response is written when the last input
 * finishes.  Tenancy, fair share, queues, aborts on disconnect and access
 * lines are the completions'.  Rerank is an embedding per document (its
 * templated prompt, api_rerank.c) pooled at the last position, scored by
 * the model's classification head when the response is written.
 *
 * Text is produced per choice by the tokenizer's streaming detokenizer
 * (tok_detok, fed each token's bytes): incomplete characters are held
 * back, invalid ones become U+FFFD, text that is or may become a stop
 * string is never released; what it releases is sent as is.
 *
 * Chat completions are the same machinery (one prompt: the rendered
 * conversation) with chat-shaped output.  An end-of-generation token
 * (backend is_eog: EOS, end of turn) ends a choice with "stop" unless
 * ignore_eos; it counts as a completion token but adds no text.  Echo puts
 * the prompt text at the head of a choice's text (ch->echo_len bytes,
 * never searched for stop strings).  Logprobs (legacy completions format)
 * come from eng_req.lp during the token event.  Prompt logprobs (the
 * `prompt_logprobs` field, or echo + logprobs) arrive per scored span
 * (eng_events.prompt_logprobs) before the prompt's first token, into
 * the first choice of the prompt (its n choices share them).
 *
 * Lifetime: the comp is held on its connection (http_conn_hold) until
 * its response is complete; a connection that closes first abandons it
 * (srv_comp_abandon: conn = NULL, choices aborted) and the comp is freed
 * when the backend reports its last `finished`.
 *
 * A background response (Responses' background: true) never holds its
 * connection: it is answered at once with its pending object (queued,
 * kept in the store as such, in_progress from its first step), sits on
 * srv.bg, gathers its text as a non-streamed completion does, and when
 * its last choice finishes stores its final object (bg_finish) and logs
 * its access line (status 200).  Cancel and DELETE (routes.c) abort its
 * choices through srv_comp_bg_cancel.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "folio/common.h"
#include "render.h"
#include "server.h"
#include "resp_store.h"
#include "tools.h"

static int detok_hook(void *ctx, int32_t tok, char *buf, size_t cap)
{
    struct srv *s = ctx;
    return s->ops->detok(s->backend, tok, buf, cap);
}

/* The route a completion of this kind came by, as access lines name it. */
static const char *comp_path(bool responses, bool messages, bool chat, bool score, bool rerank,
                             bool classify, bool embed)
{
    return responses  ? "/v1/responses"
           : classify ? "/classify"
           : messages ? "/v1/messages"
           : chat     ? "/v1/chat/completions"
           : score    ? "/v1/score"
           : rerank   ? "/v1/rerank"
           : embed    ? "/v1/embeddings"
                      : "/v1/completions";
}

/* The renderer of comp's answers: its "model" is the name the request
 * gave (the model's, or its LoRA adapter's, as vLLM echoes it). */
static struct srv_render renderer(const struct srv_comp *comp)
{
    const struct srv *s = comp->srv;
    const int32_t lora = comp->p.gen.lora;
    return (struct srv_render){lora ? s->mi.lora_names[lora - 1] : s->mi.name,
                               detok_hook,
                               comp->srv,
                               s->mi.cls_w,
                               s->mi.cls_b,
                               s->mi.n_cls,
                               s->mi.cls_labels};
}

static void comp_free(struct srv_comp *comp)
{
    struct srv *s = comp->srv;
    for (int i = 0; i < comp->n_choices; i++) {
        folio_buf_free(&comp->ch[i].text);
        folio_buf_free(&comp->ch[i].all);
        tok_detok_free(comp->ch[i].dt);
        gram_matcher_free(comp->ch[i].er.gm);
        folio_free(comp->ch[i].tokens);
        folio_free(comp->ch[i].lps);
        folio_free(comp->ch[i].plps);
        srv_emb_acc_free(&comp->ch[i].emb);
    }
    folio_free(comp->ch);
    srv_comp_params_free(&comp->p);
    folio_free(comp);
    s->n_comps--;
    srv_maybe_exit(s);
}

/* Aborts the choices still running (each ends with its `finished`). */
static void abort_choices(struct srv_comp *comp)
{
    for (int i = 0; i < comp->n_choices; i++)
        if (!comp->ch[i].done && !comp->ch[i].stopped) {
            comp->ch[i].stopped = true;
            srv_engine_abort(comp->srv->eng, &comp->ch[i].er);
        }
}

void srv_comp_abandon(void *user, void *active)
{
    (void)user;
    struct srv_comp *comp = active;
    comp->conn = NULL;
    abort_choices(comp);
}

/* End of the choice's text: the detokenizer's held bytes are released
 * (an incomplete character as U+FFFD). */
static void text_flush(struct srv_choice *ch)
{
    const char *t;
    size_t len;
    if (tok_detok_flush(ch->dt, &t, &len) >= 0)
        folio_buf_append(&ch->text, t, len);
}

/* Sends one stream chunk (or closes the connection when rendering it ran
 * out of memory), and frees b. */
static void stream_send(struct srv_comp *comp, struct folio_buf *b)
{
    if (b->oom)
        http_close(comp->conn, "out of memory");
    else
        http_stream_chunk(comp->conn, b->p, b->len);
    folio_buf_free(b);
}

static bool comp_engine_failed(const struct srv_comp *comp)
{
    for (int i = 0; i < comp->n_choices; i++)
        if (comp->ch[i].finish == ENG_FINISH_ERROR)
            return true;
    return false;
}

/* Keeps a Responses response (p.resp->store) of text (the choice's whole
 * text) and its rendered object: in the store, for the tenant. */
static void responses_keep(struct srv_comp *comp, const char *object, const char *text, size_t len)
{
    struct srv *s = comp->srv;
    if (!comp->p.resp->store || !object)
        return;
    struct folio_buf conv = {0};
    srv_render_responses_conv(&conv, comp, text, len);
    int rc = conv.oom ? -ENOMEM
                      : srv_resp_store_put(s->resp_store, comp->tenant, comp->id, object, conv.p,
                                           comp->p.resp->input ? comp->p.resp->input : "[]");
    if (rc)
        srv_log(SRV_LOG_INFO, "response %s not stored: %s", comp->id,
                rc == -E2BIG ? "larger than --responses-store" : strerror(-rc));
    folio_buf_free(&conv);
}

/* A background response's object as it stands (pending: before any
 * output), kept in the store unless it was deleted. */
static void bg_keep(struct srv_comp *comp, bool pending)
{
    if (comp->forget)
        return;
    const struct srv_choice *ch0 = &comp->ch[0];
    struct srv_render r = renderer(comp);
    struct folio_buf b = {0};
    if (pending)
        srv_render_responses_pending(&b, &r, comp);
    else
        srv_render_responses(&b, &r, comp, ch0->text.p ? ch0->text.p : "", ch0->text.len);
    responses_keep(comp, b.oom ? NULL : b.p, ch0->text.p ? ch0->text.p : "", ch0->text.len);
    folio_buf_free(&b);
}

struct srv_comp *srv_comp_bg_find(struct srv *s, int tenant, const char *id)
{
    for (struct srv_comp *c = s->bg; c; c = c->bg_next)
        if (c->tenant == tenant && !strcmp(c->id, id))
            return c;
    return NULL;
}

void srv_comp_bg_cancel(struct srv_comp *comp, bool forget)
{
    if (forget) {
        comp->forget = true;
        srv_resp_store_delete(comp->srv->resp_store, comp->tenant, comp->id);
    }
    if (comp->rstatus && !strcmp(comp->rstatus, "cancelled"))
        return;
    comp->rstatus = "cancelled";
    for (int i = 0; i < comp->n_choices; i++) {
        struct srv_choice *ch = &comp->ch[i];
        if (!ch->done && !ch->stopped) {
            text_flush(ch); /* what it had is its text */
            ch->finish = ENG_FINISH_ABORT;
        }
    }
    abort_choices(comp);
    bg_keep(comp, false);
}

/* A background response's end: off srv.bg, its final object kept. */
static void bg_finish(struct srv_comp *comp)
{
    struct srv *s = comp->srv;
    for (struct srv_comp **pp = &s->bg; *pp; pp = &(*pp)->bg_next)
        if (*pp == comp) {
            *pp = comp->bg_next;
            break;
        }
    /* cancelled or failed (out of memory) it stays; else as its choice ended */
    if (!comp->rstatus || !strcmp(comp->rstatus, "queued") || !strcmp(comp->rstatus, "in_progress"))
        comp->rstatus = comp_engine_failed(comp) ? "failed" : NULL;
    bg_keep(comp, false);
}

/* A Responses stream's emit: text that may be a tool call is held (as a
 * chat stream holds it); else the new text goes out as a delta, and
 * final closes the items and keeps the response. */
static void responses_emit(struct srv_choice *ch, size_t send, bool final)
{
    struct srv_comp *comp = ch->comp;
    struct srv_render r = renderer(comp);
    int hold = comp->p.tools ? srv_tools_stream_hold(comp, ch, final) : 0;
    if (hold == 1)
        return;
    bool held = hold == 2; /* final: the whole text, parsed for calls */
    folio_buf_append(&ch->all, ch->text.p ? ch->text.p : "", send);
    struct folio_buf b = {0};
    srv_render_responses_stream(&b, &r, comp, ch, ch->all.p ? ch->all.p : "", ch->all.len,
                                held ? 0 : send, final, &ch->rs);
    ch->sent_tokens = ch->n_tokens;
    if (send) {
        ch->text.len = 0;
        ch->text.p[0] = 0;
    }
    if (final && !b.oom && !ch->all.oom) {
        struct folio_buf o = {0};
        srv_render_responses(&o, &r, comp, ch->all.p ? ch->all.p : "", ch->all.len);
        responses_keep(comp, o.oom ? NULL : o.p, ch->all.p ? ch->all.p : "", ch->all.len);
        folio_buf_free(&o);
    }
    stream_send(comp, &b);
}

/* Stream: sends the choice's releasable text (all of it when final) and
 * its new token ids as one SSE event. */
static void stream_emit(struct srv_choice *ch, bool final)
{
    struct srv_comp *comp = ch->comp;
    if (!comp->conn)
        return;
    size_t send = ch->text.len; /* the detokenizer released only what is safe */
    int32_t new_ids = ch->n_tokens - ch->sent_tokens;
    if (!final && !send && (!new_ids || comp->p.chat))
        return;
    struct folio_buf b = {0};
    struct srv_render r = renderer(comp);
    if (comp->p.messages) { /* Anthropic's events (render.h) */
        /* text that may be a tool call is held (tools.c) */
        int hold = comp->p.tools ? srv_tools_stream_hold(comp, ch, final) : 0;
        if (hold == 1 && ch->role_sent)
            return;
        srv_render_message_stream(&b, &r, comp, ch, send, !ch->role_sent, final, hold, &ch->rs);
        ch->role_sent = true;
        if (hold == 1) {
            stream_send(comp, &b);
            return;
        }
        ch->sent_tokens = ch->n_tokens;
        if (send) {
            ch->text.len = 0;
            ch->text.p[0] = 0;
        }
        stream_send(comp, &b);
        return;
    }
    if (comp->p.responses) {
        responses_emit(ch, send, final);
        return;
    }
    if (comp->p.tools) { /* text that may be a tool call is held (tools.c) */
        int t = srv_tools_stream(&b, &r, comp, ch, final);
        if (t == 1)
            return;
        if (t == 2) {
            stream_send(comp, &b);
            return;
        }
    }
    bool with_prompt = comp->p.echo && !ch->prompt_lp_sent;
    srv_render_stream_chunk(&b, &r, comp, ch, send, !ch->role_sent, final, with_prompt,
                            &ch->lp_offset);
    ch->role_sent = true;
    if (comp->p.gen.n_logprobs >= 0)
        ch->prompt_lp_sent = true;
    ch->sent_tokens = ch->n_tokens;
    if (send) {
        ch->text.len = 0;
        ch->text.p[0] = 0;
        ch->echo_len = 0;
    }
    stream_send(comp, &b);
}

static void comp_respond(struct srv_comp *comp)
{
    struct http_conn *c = comp->conn;
    struct srv_render r = renderer(comp);
    struct folio_buf b = {0};
    if (comp->p.stream) {
        if (!comp->p.messages && !comp->p.responses) /* theirs end with their own events */
            srv_render_stream_end(&b, &r, comp);
        http_stream_chunk(c, b.p, b.len);
        http_stream_end(c);
        folio_buf_free(&b);
        return;
    }
    if (comp_engine_failed(comp)) {
        struct srv_api_error e;
        srv_api_error_set(&e, 500, "server_error", NULL, NULL, "the engine failed");
        http_error(c, &e, NULL);
        return;
    }
    const struct srv_choice *ch0 = &comp->ch[0];
    if (comp->p.responses) {
        srv_render_responses(&b, &r, comp, ch0->text.p ? ch0->text.p : "", ch0->text.len);
        if (!b.oom)
            responses_keep(comp, b.p, ch0->text.p ? ch0->text.p : "", ch0->text.len);
    } else if (comp->p.messages)
        srv_render_message(&b, &r, comp);
    else if (comp->p.classify)
        srv_render_classify(&b, &r, comp);
    else if (comp->p.rr.score)
        srv_render_score(&b, &r, comp);
    else if (comp->p.rerank)
        srv_render_rerank(&b, &r, comp);
    else if (comp->p.embed)
        srv_render_embeddings(&b, &r, comp);
    else
        srv_render_response(&b, &r, comp);
    if (b.oom) {
        struct srv_api_error e;
        srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        http_error(c, &e, NULL);
    } else
        http_respond(c, 200, "application/json", b.p, b.len, NULL);
    folio_buf_free(&b);
}

static void ev_started(void *user, struct eng_req *r)
{
    struct srv *s = user;
    struct srv_choice *ch = r->user;
    struct srv_comp *comp = ch->comp;
    ch->t_started = folio_now_ns();
    srv_hist_observe(&s->queue, (double)(ch->t_started - comp->t_arrival) * 1e-9);
    if (comp->bg && comp->rstatus && !strcmp(comp->rstatus, "queued")) {
        comp->rstatus = "in_progress";
        bg_keep(comp, true);
    }
}

/* The completion's access line (it was held on its connection): status
 * 499 when the client went away first. */
static void comp_access(struct srv_comp *comp)
{
    struct srv *s = comp->srv;
    int64_t gen = 0, cached = 0;
    uint64_t first = 0;
    const char *finish = NULL;
    for (int i = 0; i < comp->n_choices; i++) {
        const struct srv_choice *ch = &comp->ch[i];
        gen += ch->n_gen;
        cached += ch->er.cached_tokens;
        if (ch->t_first && (!first || ch->t_first < first))
            first = ch->t_first;
        if (!finish)
            finish = eng_finish_name(ch->finish);
    }
    const char *path = comp_path(comp->p.responses, comp->p.messages, comp->p.chat,
                                 comp->p.rr.score, comp->p.rerank, comp->p.classify, comp->p.embed);
    struct srv_access_line a = {
        .method = "POST",
        .path = path,
        .path_len = (int)strlen(path),
        .status = comp->conn ? http_conn_status(comp->conn)
                  : comp->bg ? 200
                             : 499,
        .tenant = srv_auth_tenant_name(&s->auth, comp->tenant),
        .prompt_tokens = comp->prompt_tokens,
        .completion_tokens = gen,
        .cached_tokens = cached,
        .ttft_s = first ? (double)(first - comp->t_arrival) * 1e-9 : -1,
        .duration_s = (double)(folio_now_ns() - comp->t_arrival) * 1e-9,
        .finish = finish,
    };
    srv_log_access(&a);
}

static bool is_stop_id(const struct eng_gen *g, int32_t tok)
{
    for (int32_t i = 0; i < g->n_stop_ids; i++)
        if (g->stop_ids[i] == tok)
            return true;
    return false;
}

static void ev_token(void *user, struct eng_req *r, int32_t tok)
{
    struct srv *s = user;
    struct srv_choice *ch = r->user;
    struct srv_comp *comp = ch->comp;
    if (comp->p.embed) /* the token an embedding's step samples is not the client's */
        return;
    uint64_t now = folio_now_ns();
    s->tm[comp->tenant].generation_tokens++;
    ch->n_gen++;
    if (!ch->t_first) {
        ch->t_first = now;
        srv_hist_observe(&s->ttft, (double)(now - comp->t_arrival) * 1e-9);
    } else
        srv_hist_observe(&s->itl, (double)(now - ch->t_last) * 1e-9);
    ch->t_last = now;
    if (ch->stopped || (!comp->conn && !comp->bg))
        return;
    if (ch->n_tokens == ch->cap_tokens) {
        int32_t cap = ch->cap_tokens ? 2 * ch->cap_tokens : 64;
        int32_t *t = folio_realloc(ch->tokens, (size_t)cap * sizeof(*t));
        if (t)
            ch->tokens = t;
        struct sampler_result *l =
            t && r->g.n_logprobs >= 0 ? folio_realloc(ch->lps, (size_t)cap * sizeof(*l)) : NULL;
        if (l)
            ch->lps = l;
        if (!t || (r->g.n_logprobs >= 0 && !l)) {
            if (comp->conn)
                http_close(comp->conn, "out of memory");
            else { /* background: it fails */
                comp->rstatus = "failed";
                abort_choices(comp);
            }
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
    if (ch->index % comp->p.n == 0 && ch->n_tokens == 1)
        comp->cached_tokens += r->cached_tokens; /* each prompt once */
    if ((!comp->p.gen.ignore_eos && s->ops->is_eog && s->ops->is_eog(s->backend, tok)) ||
        is_stop_id(&comp->p.gen, tok)) {
        /* end of turn: counted, not shown; held UTF-8 bytes are released */
        text_flush(ch);
        ch->stopped = true; /* the backend ends it: EOG ids are its stop ids */
        ch->finish = ENG_FINISH_STOP;
        if (comp->p.stream)
            stream_emit(ch, false);
        return;
    }
    char bytes[256];
    int n = s->ops->detok(s->backend, tok, bytes, sizeof(bytes));
    const char *t;
    size_t len;
    if (n > 0 && tok_detok_feed_bytes(ch->dt, bytes, (size_t)n, &t, &len) >= 0) {
        folio_buf_append(&ch->text, t, len);
        if (tok_detok_stopped(ch->dt) >= 0) { /* a stop string: the text before it is final */
            ch->stopped = true;
            ch->finish = ENG_FINISH_STOP;
            srv_engine_abort(s->eng, r);
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
        /* an embedding ends on its one (unseen) token: done, not cut short */
        ch->finish = comp->p.embed && why == ENG_FINISH_LENGTH ? ENG_FINISH_STOP : why;
        text_flush(ch);
    }
    tm->finished[ch->finish]++;
    double e2e = (double)(folio_now_ns() - comp->t_arrival) * 1e-9;
    srv_hist_observe(&s->e2e, e2e);
    srv_hist_observe(&tm->e2e, e2e);
    if (ch->index % comp->p.n == 0) /* each prompt once: its n choices share it */
        srv_hist_observe(&s->prompt_len, (double)r->n_prompt);
    if (!comp->p.embed)
        srv_hist_observe(&s->gen_len, (double)ch->n_gen);
    if (ch->t_first && ch->t_started) {
        srv_hist_observe(&s->prefill, (double)(ch->t_first - ch->t_started) * 1e-9);
        srv_hist_observe(&s->decode, (double)(ch->t_last - ch->t_first) * 1e-9);
    }
    if (comp->conn && comp->p.stream && !comp->failed)
        stream_emit(ch, true);
    if (comp->n_live)
        return;
    if (comp->bg) {
        bg_finish(comp);
        comp_access(comp);
        comp_free(comp);
        return;
    }
    struct http_conn *c = comp->conn;
    bool engine_failed = c && !comp->failed && comp->p.stream && comp_engine_failed(comp);
    if (engine_failed) {
        /* the stream ends with an error event, not [DONE]: the Responses
         * API's response.failed, Anthropic's error event, else OpenAI's
         * data: {"error":...} */
        struct srv_api_error e;
        srv_api_error_set(&e, 500, "server_error", NULL, NULL, "the engine failed");
        struct folio_buf ev = {0};
        struct srv_render rd = renderer(comp);
        if (comp->p.responses) {
            comp->rstatus = "failed";
            srv_render_responses_stream_failed(&ev, &rd, comp, &comp->ch[0].rs);
        } else if (comp->p.messages)
            srv_render_message_stream_error(&ev, e.message);
        /* abandons comp: nothing is live any more */
        http_conn_fail_sse(c, &e, ev.len && !ev.oom ? ev.p : NULL, ev.len);
        folio_buf_free(&ev);
    } else if (c && !comp->failed)
        comp_respond(comp);
    if (comp->access_own)
        comp_access(comp);
    if (c && !comp->failed && !engine_failed)
        http_request_done(c);
    comp_free(comp);
}

static void ev_prompt_logprobs(void *user, struct eng_req *r, int32_t first, int32_t n,
                               const struct sampler_result *res)
{
    (void)user;
    struct srv_choice *ch = r->user;
    if (ch->plps && first >= 0 && first + n < r->n_prompt)
        memcpy(ch->plps + first + 1, res, (size_t)n * sizeof(*res));
}

static void ev_hidden(void *user, struct eng_req *r, int32_t first, int32_t n, const float *rows,
                      int32_t dim)
{
    (void)user;
    (void)first; /* each pooled position once, whichever span brings it */
    struct srv_choice *ch = r->user;
    srv_emb_acc_add(&ch->emb, rows, n, dim);
}

void srv_comp_events(struct srv *s, struct eng_events *ev)
{
    *ev = (struct eng_events){s, ev_started, ev_token, ev_finished, ev_prompt_logprobs, ev_hidden};
}

/* Echo: the prompt's text at the head of the choice's text. */
static void echo_prompt(struct srv_choice *ch, int pi)
{
    struct srv_comp *comp = ch->comp;
    const char *t = comp->p.prompt_text ? comp->p.prompt_text[pi] : NULL;
    if (t)
        folio_buf_append(&ch->text, t, strlen(t));
    else
        srv_ids_text(comp->srv, ch->er.prompt, ch->er.n_prompt, &ch->text); /* oom: see text.oom */
    ch->echo_len = ch->text.len;
}

/* The engine request, grammar matcher and detokenizer of each of comp's
 * choices (prompt i / n, seeds from seed), and their echo.  0 or -ENOMEM
 * (the caller frees comp). */
static int choices_init(struct srv *s, struct srv_comp *comp, int n_choices, int tenant,
                        uint64_t seed)
{
    for (int i = 0; i < n_choices; i++) {
        struct srv_choice *ch = &comp->ch[i];
        int pi = i / comp->p.n;
        ch->comp = comp;
        ch->index = i;
        ch->er.id = ++s->next_id;
        ch->er.tenant = tenant;
        srv_comp_req_init(&comp->p, i, seed, &ch->er);
        ch->er.user = ch;
        if (ch->er.g.grammar && gram_matcher_new(ch->er.g.grammar, &ch->er.gm)) {
            return -ENOMEM;
        }
        if (i % comp->p.n == 0)
            comp->prompt_tokens += ch->er.n_prompt; /* the n choices share one prefill */
        if (comp->p.embed) {
            /* a reranker scores its last position (a decoder's: the one
             * that has read the query and the document) */
            srv_pooling_range(comp->p.rerank || comp->p.classify ? SRV_POOL_LAST : s->pooling,
                              ch->er.n_prompt, &ch->er.g.hidden_lo, &ch->er.g.hidden_hi);
            if (srv_emb_acc_init(&ch->emb, s->mi.n_embd))
                return -ENOMEM;
        }
        if (i % comp->p.n == 0 && ch->er.g.n_prompt_logprobs >= 0) {
            ch->plps = folio_malloc((size_t)ch->er.n_prompt * sizeof(*ch->plps));
            if (!ch->plps)
                return -ENOMEM;
            for (int32_t k = 0; k < ch->er.n_prompt; k++) /* unscored until the engine's */
                ch->plps[k] = (struct sampler_result){.token = ch->er.prompt[k], .logprob = NAN};
        }
        if (tok_detok_new(NULL, (const char *const *)comp->p.stop, (size_t)comp->p.n_stop, 0,
                          &ch->dt)) {
            return -ENOMEM;
        }
        if (comp->p.echo)
            echo_prompt(ch, pi);
    }
    return 0;
}

/* previous_response_id: the stored conversation, the caller's tenant's
 * only, of a response that has ended. */
struct resp_lookup {
    struct srv *s;
    int tenant;
};

static const char *resp_lookup(void *ctx, const char *id)
{
    const struct resp_lookup *l = ctx;
    if (srv_comp_bg_find(l->s, l->tenant, id))
        return NULL; /* running in the background: no answer to continue yet */
    return srv_resp_store_conv(l->s->resp_store, l->tenant, id);
}

void srv_comp_route(struct srv *s, struct http_conn *c, const struct http_request *rq,
                    const struct srv_caller *who, enum srv_comp_kind kind)
{
    struct srv_api_error e;
    const bool messages = kind == SRV_COMP_MESSAGES, score = kind == SRV_COMP_SCORE;
    const bool responses = kind == SRV_COMP_RESPONSES, classify = kind == SRV_COMP_CLASSIFY;
    const bool rerank = kind == SRV_COMP_RERANK || score;
    const bool chat = kind == SRV_COMP_CHAT || messages || responses;
    const bool embed = kind == SRV_COMP_EMBED || rerank || classify;
    const char *path = comp_path(responses, messages, chat, score, rerank, classify, embed);
    if (s->draining) {
        srv_api_error_set(&e, 503, "service_unavailable", NULL, NULL, "server is shutting down");
        http_error(c, &e, NULL);
        return;
    }
    if (embed && s->mi.n_embd < 1) {
        srv_api_error_set(&e, 501, "not_implemented_error", NULL, NULL,
                          "this engine gives no embeddings");
        http_error(c, &e, NULL);
        return;
    }
    if ((rerank || classify) && (s->mi.n_cls < 1 || s->mi.n_embd < 1)) {
        srv_api_error_set(&e, 501, "not_implemented_error", NULL, NULL,
                          "this model is not a %s: it has no classification head "
                          "(cls.output.weight)",
                          classify ? "classifier" : "reranker");
        http_error(c, &e, NULL);
        return;
    }
    int tenant = who->tenant;
    s->access_tenant = tenant;
    struct srv_comp *comp = folio_calloc(1, sizeof(*comp));
    if (!comp) {
        srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        http_error(c, &e, NULL);
        return;
    }
    comp->srv = s;
    comp->t_arrival = folio_now_ns();
    s->n_comps++;
    const char *body = rq->body;
    size_t blen = rq->body_len;
    struct resp_lookup lk = {s, tenant};
    int prc =
        responses
            ? srv_responses_parse(body, blen, &s->mi, s->chat_tmpl, srv_tokenize_hook, s,
                                  resp_lookup, &lk, srv_resp_store_on(s->resp_store), &comp->p, &e)
        : messages ? srv_messages_parse(body, blen, false, &s->mi, s->chat_tmpl, srv_tokenize_hook,
                                        s, &comp->p, &e)
        : chat
            ? srv_chat_parse(body, blen, &s->mi, s->chat_tmpl, srv_tokenize_hook, s, &comp->p, &e)
        : classify ? srv_classify_parse(body, blen, &s->mi, srv_tokenize_hook, s, &comp->p, &e)
        : score    ? srv_score_parse(body, blen, &s->mi, srv_tokenize_hook, s, &comp->p, &e)
        : rerank   ? srv_rerank_parse(body, blen, &s->mi, srv_tokenize_hook, s, &comp->p, &e)
        : embed    ? srv_embed_parse(body, blen, &s->mi, srv_tokenize_hook, s, &comp->p, &e)
                   : srv_comp_parse(body, blen, &s->mi, srv_tokenize_hook, s, &comp->p, &e);
    if (prc) {
        http_error(c, &e, NULL);
        comp_free(comp);
        return;
    }
    if (srv_unknown_fields(s, c, path, comp->p.n_unknown, comp->p.unknown)) {
        comp_free(comp);
        return;
    }
    const struct srv_tenant_cfg *tc = srv_auth_tenant_cfg(&s->auth, tenant);
    const char *tname = srv_auth_tenant_name(&s->auth, tenant);
    const int32_t lora = comp->p.gen.lora;
    if (lora > 0 && !srv_tenant_may_lora(tc, s->mi.lora_names[lora - 1])) {
        /* to this tenant the adapter does not exist: the unknown model's 404 */
        srv_api_error_set(&e, 404, "NotFoundError", "model", "model_not_found",
                          "The model '%s' does not exist (this server has '%s' and its LoRA "
                          "adapters: GET /v1/models)",
                          s->mi.lora_names[lora - 1], s->mi.name);
        http_error(c, &e, NULL);
        comp_free(comp);
        return;
    }
    int n_choices = comp->p.n_prompts * comp->p.n;
    if (tc->max_waiting > 0) {
        struct sched_tenant_stats ts;
        s->ops->tenant_stats(s->backend, tenant, &ts);
        int64_t waiting = (int64_t)ts.waiting + ts.preempted;
        if (waiting + n_choices > tc->max_waiting) {
            s->tm[tenant].rejected_429++;
            srv_api_error_set(&e, 429, "rate_limit_error", NULL, "tenant_queue_full",
                              "tenant '%s' has %lld requests waiting (max_waiting %lld)", tname,
                              (long long)waiting, (long long)tc->max_waiting);
            http_error(c, &e, "Retry-After: 1\r\n");
            comp_free(comp);
            return;
        }
    }
    comp->ch = folio_calloc((size_t)n_choices, sizeof(*comp->ch));
    if (!comp->ch) {
        srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        http_error(c, &e, NULL);
        comp_free(comp);
        return;
    }
    comp->n_choices = n_choices;
    comp->tenant = tenant;
    comp->created = (int64_t)time(NULL);
    snprintf(comp->id, sizeof(comp->id), "%s%llx%06llx",
             responses  ? "resp_" /* OpenAI's prefix; the items' ids reuse what follows */
             : messages ? "msg-"
             : chat     ? "chatcmpl-"
             : classify ? "classify-"
             : score    ? "score-"
             : rerank   ? "rerank-"
             : embed    ? "embd-"
                        : "cmpl-",
             (unsigned long long)s->started_at, (unsigned long long)++s->next_id);
    uint64_t seed = (uint64_t)s->next_id * 0x9E3779B97F4A7C15ull;
    if (choices_init(s, comp, n_choices, tenant, seed)) {
        srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        http_error(c, &e, NULL);
        comp_free(comp);
        return;
    }
    /* one engine submit per prompt: its n choices fork from one prefill */
    struct eng_req *group[SRV_MAX_N];
    for (int i = 0; i < n_choices; i += comp->p.n) {
        for (int k = 0; k < comp->p.n; k++)
            group[k] = &comp->ch[i + k].er;
        int rc = srv_engine_submit(s->eng, group, comp->p.n);
        if (rc) {
            comp->failed = true;
            for (int j = 0; j < i; j++) {
                comp->ch[j].stopped = true;
                srv_engine_abort(s->eng, &comp->ch[j].er);
            }
            if (rc == -EBUSY) {
                s->tm[tenant].rejected_429++;
                srv_api_error_set(&e, 429, "rate_limit_error", NULL, "tenant_queue_full",
                                  "tenant '%s' has too many requests waiting", tname);
            } else
                srv_api_error_set(&e, 400, "invalid_request_error",
                                  chat     ? "messages"
                                  : score  ? "text_2"
                                  : rerank ? "documents"
                                  : embed  ? "input"
                                           : "prompt",
                                  NULL, "request cannot be scheduled: %s",
                                  rc == -EINVAL ? "it needs more KV cache than this server (or "
                                                  "its tenant) may hold"
                                                : strerror(-rc));
            http_error(c, &e, rc == -EBUSY ? "Retry-After: 1\r\n" : NULL);
            if (i == 0)
                comp_free(comp);
            else
                comp->n_live = i;
            return;
        }
        comp->n_live += comp->p.n;
    }
    s->tm[tenant].prompt_tokens += (double)comp->prompt_tokens;
    if (comp->p.gen.lora > 0)
        s->lora_requests[comp->p.gen.lora - 1]++;
    if (comp->p.resp && comp->p.resp->background) {
        /* answered at once: queued, kept, polled by GET /v1/responses/{id} */
        comp->bg = true;
        comp->rstatus = "queued";
        comp->bg_next = s->bg;
        s->bg = comp;
        comp->access_own = s->access_claimed = true;
        bg_keep(comp, true);
        struct folio_buf b = {0};
        struct srv_render r = renderer(comp);
        srv_render_responses_pending(&b, &r, comp);
        if (b.oom) {
            srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
            http_error(c, &e, NULL);
        } else
            http_respond(c, 200, "application/json", b.p, b.len, NULL);
        folio_buf_free(&b);
        return;
    }
    comp->conn = c;
    comp->access_own = s->access_claimed = true;
    http_conn_hold(c, comp);
    if (comp->p.stream && http_stream_begin(c))
        return;                        /* connection dropped: detached, aborted */
    if (comp->p.stream && responses) { /* response.created goes out at once */
        struct folio_buf b = {0};
        struct srv_render r = renderer(comp);
        srv_render_responses_stream_head(&b, &r, comp, &comp->ch[0].rs);
        stream_send(comp, &b);
    }
}
