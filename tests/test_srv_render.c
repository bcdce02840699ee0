/*
 * tests/test_srv_render.c — the OpenAI JSON of completions (daemon/
 * render.c), rendered from hand-built completion state with a fake
 * detokenizer and read back with cJSON: response bodies (completions and
 * chat) carry the choices' text, finish reasons, token ids and usage
 * totals; stream chunks are `data: {json}\n\n` events (a chat choice's
 * first chunk is preceded by its role delta; finish_reason only when
 * final); the end of a stream has the usage chunk then [DONE]; legacy
 * logprobs list pieces, logprobs, top-N maps and cumulative text offsets,
 * echoed prompt tokens with their prompt logprobs (null for the first and
 * where none were computed), invalid UTF-8 pieces as U+FFFD and -inf as
 * -9999; vLLM's prompt_logprobs list (the token itself first with its
 * rank, then the top-N others).  Embeddings (daemon/embed.c): the pooled
 * mean of the delivered rows under each normalization, worked by hand;
 * dimensions cut before normalizing; the spans each pooling covers; float
 * text that reads back as the same float; base64 of little-endian
 * float32 bytes; the response object.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "folio/chat.h"
#include "render.h"
#include "tools.h"
#include "server.h"

/* token t reads "<t>", except 9: a lone UTF-8 lead byte, 5: " five" */
static int fake_detok(void *ctx, int32_t tok, char *buf, size_t cap)
{
    (void)ctx;
    if (tok == 9)
        return snprintf(buf, cap, "\xE2");
    if (tok == 5)
        return snprintf(buf, cap, " five");
    return snprintf(buf, cap, "<%d>", tok);
}

static const struct srv_render R = {.model = "test-model", .detok = fake_detok};

static const int32_t prompt[] = {5, 7};

struct fixture {
    struct srv_comp comp;
    struct srv_choice ch[2];
    int32_t toks[2][3];
    struct sampler_result lps[3];
};

static void fixture_init(struct fixture *f, bool chat)
{
    memset(f, 0, sizeof(*f));
    f->comp.p.chat = chat;
    f->comp.p.gen.n_logprobs = -1;
    f->comp.p.n = 1;
    snprintf(f->comp.id, sizeof(f->comp.id), "cmpl-1");
    f->comp.created = 1700000000;
    f->comp.n_choices = 2;
    f->comp.ch = f->ch;
    f->comp.prompt_tokens = 4;
    const char *text[2] = {"hello", "w\xC3\xA9"};
    for (int i = 0; i < 2; i++) {
        struct srv_choice *ch = &f->ch[i];
        ch->comp = &f->comp;
        ch->index = i;
        ch->er.prompt = prompt;
        ch->er.n_prompt = 2;
        folio_buf_puts(&ch->text, text[i]);
        for (int k = 0; k < 3; k++)
            f->toks[i][k] = 10 * (i + 1) + k;
        ch->tokens = f->toks[i];
        ch->n_tokens = i ? 2 : 3;
        ch->finish = i ? ENG_FINISH_LENGTH : ENG_FINISH_STOP;
    }
    for (int k = 0; k < 3; k++) {
        f->lps[k] = (struct sampler_result){.token = f->toks[0][k], .logprob = -0.5f * (float)k};
        f->lps[k].n_top = 2;
        f->lps[k].top_ids[0] = f->toks[0][k];
        f->lps[k].top_ids[1] = 9;
        f->lps[k].top_logprobs[0] = -0.5f * (float)k;
        f->lps[k].top_logprobs[1] = -INFINITY;
    }
    f->ch[0].lps = f->lps;
}

static void fixture_free(struct fixture *f)
{
    for (int i = 0; i < 2; i++)
        folio_buf_free(&f->ch[i].text);
}

static cJSON *parse_json(const struct folio_buf *b)
{
    assert_false(b->oom);
    cJSON *j = cJSON_ParseWithLength(b->p, b->len);
    assert_non_null(j);
    return j;
}

static const cJSON *get(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    assert_non_null(v);
    return v;
}

static void test_response_completions(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, false);
    struct folio_buf b = {0};
    srv_render_response(&b, &R, &f.comp);
    cJSON *j = parse_json(&b);
    assert_string_equal(get(j, "object")->valuestring, "text_completion");
    assert_string_equal(get(j, "model")->valuestring, "test-model");
    assert_string_equal(get(j, "id")->valuestring, "cmpl-1");
    const cJSON *ch = get(j, "choices");
    assert_int_equal(cJSON_GetArraySize(ch), 2);
    const cJSON *c1 = cJSON_GetArrayItem(ch, 1);
    assert_int_equal(get(c1, "index")->valueint, 1);
    assert_string_equal(get(c1, "text")->valuestring, "w\xC3\xA9");
    assert_string_equal(get(c1, "finish_reason")->valuestring, "length");
    assert_true(cJSON_IsNull(get(c1, "logprobs")));
    const cJSON *ids = get(c1, "token_ids");
    assert_int_equal(cJSON_GetArraySize(ids), 2);
    assert_int_equal(cJSON_GetArrayItem(ids, 1)->valueint, 21);
    const cJSON *u = get(j, "usage");
    assert_int_equal(get(u, "prompt_tokens")->valueint, 4);
    assert_int_equal(get(u, "completion_tokens")->valueint, 5);
    assert_int_equal(get(u, "total_tokens")->valueint, 9);
    cJSON_Delete(j);
    folio_buf_free(&b);
    fixture_free(&f);
}

static void test_response_chat(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, true);
    struct folio_buf b = {0};
    srv_render_response(&b, &R, &f.comp);
    cJSON *j = parse_json(&b);
    assert_string_equal(get(j, "object")->valuestring, "chat.completion");
    const cJSON *c0 = cJSON_GetArrayItem(get(j, "choices"), 0);
    const cJSON *m = get(c0, "message");
    assert_string_equal(get(m, "role")->valuestring, "assistant");
    assert_string_equal(get(m, "content")->valuestring, "hello");
    assert_string_equal(get(c0, "finish_reason")->valuestring, "stop");
    assert_null(cJSON_GetObjectItemCaseSensitive(c0, "token_ids"));
    cJSON_Delete(j);
    folio_buf_free(&b);
    fixture_free(&f);
}

/* Splits "data: X\n\n" events; returns how many, payloads in out[]. */
static int sse_events(const struct folio_buf *b, char out[][4096], int max)
{
    int n = 0;
    const char *p = b->p, *end = b->p + b->len;
    while (p < end) {
        assert_int_equal(strncmp(p, "data: ", 6), 0);
        const char *e = strstr(p, "\n\n");
        assert_non_null(e);
        assert_true(n < max);
        snprintf(out[n++], 4096, "%.*s", (int)(e - p - 6), p + 6);
        p = e + 2;
    }
    return n;
}

static void test_stream_chat_role_and_final(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, true);
    struct folio_buf b = {0};
    int64_t off = 0;
    srv_render_stream_chunk(&b, &R, &f.comp, &f.ch[0], 3, true, false, false, &off);
    char ev[4][4096];
    assert_int_equal(sse_events(&b, ev, 4), 2);
    cJSON *j0 = cJSON_Parse(ev[0]), *j1 = cJSON_Parse(ev[1]);
    assert_non_null(j0);
    assert_non_null(j1);
    assert_string_equal(get(j0, "object")->valuestring, "chat.completion.chunk");
    const cJSON *d0 = get(cJSON_GetArrayItem(get(j0, "choices"), 0), "delta");
    assert_string_equal(get(d0, "role")->valuestring, "assistant");
    const cJSON *c1 = cJSON_GetArrayItem(get(j1, "choices"), 0);
    assert_string_equal(get(get(c1, "delta"), "content")->valuestring, "hel");
    assert_true(cJSON_IsNull(get(c1, "finish_reason")));
    cJSON_Delete(j0);
    cJSON_Delete(j1);
    folio_buf_free(&b);
    /* final, no text, no role: one event with the finish reason */
    srv_render_stream_chunk(&b, &R, &f.comp, &f.ch[0], 0, false, true, false, &off);
    assert_int_equal(sse_events(&b, ev, 4), 1);
    j0 = cJSON_Parse(ev[0]);
    c1 = cJSON_GetArrayItem(get(j0, "choices"), 0);
    assert_null(cJSON_GetObjectItemCaseSensitive(get(c1, "delta"), "content"));
    assert_string_equal(get(c1, "finish_reason")->valuestring, "stop");
    cJSON_Delete(j0);
    folio_buf_free(&b);
    fixture_free(&f);
}

static void test_stream_completions_ids_and_end(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, false);
    f.comp.p.include_usage = true;
    f.ch[1].sent_tokens = 1; /* only the second id is new */
    struct folio_buf b = {0};
    int64_t off = 0;
    srv_render_stream_chunk(&b, &R, &f.comp, &f.ch[1], 1, true, false, false, &off);
    char ev[4][4096];
    assert_int_equal(sse_events(&b, ev, 4), 1); /* completions: no role event */
    cJSON *j = cJSON_Parse(ev[0]);
    const cJSON *c = cJSON_GetArrayItem(get(j, "choices"), 0);
    assert_string_equal(get(c, "text")->valuestring, "w");
    const cJSON *ids = get(c, "token_ids");
    assert_int_equal(cJSON_GetArraySize(ids), 1);
    assert_int_equal(cJSON_GetArrayItem(ids, 0)->valueint, 21);
    cJSON_Delete(j);
    folio_buf_free(&b);
    srv_render_stream_end(&b, &R, &f.comp);
    assert_int_equal(sse_events(&b, ev, 4), 2);
    assert_string_equal(ev[1], "[DONE]");
    j = cJSON_Parse(ev[0]);
    assert_int_equal(cJSON_GetArraySize(get(j, "choices")), 0);
    assert_int_equal(get(get(j, "usage"), "total_tokens")->valueint, 9);
    cJSON_Delete(j);
    folio_buf_free(&b);
    f.comp.p.include_usage = false;
    srv_render_stream_end(&b, &R, &f.comp);
    assert_int_equal(sse_events(&b, ev, 4), 1);
    folio_buf_free(&b);
    fixture_free(&f);
}

static void test_logprobs(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, false);
    struct folio_buf b = {0};
    int64_t off = 100;
    srv_render_logprobs(&b, &R, &f.ch[0], 1, 3, false, &off);
    cJSON *j = parse_json(&b);
    const cJSON *toks = get(j, "tokens");
    assert_int_equal(cJSON_GetArraySize(toks), 2);
    assert_string_equal(cJSON_GetArrayItem(toks, 0)->valuestring, "<11>");
    const cJSON *lp = get(j, "token_logprobs");
    assert_true(fabs(cJSON_GetArrayItem(lp, 1)->valuedouble - -1.0) < 1e-6);
    const cJSON *top = cJSON_GetArrayItem(get(j, "top_logprobs"), 0);
    assert_int_equal(cJSON_GetArraySize(top), 2);
    assert_true(fabs(get(top, "<11>")->valuedouble - -0.5) < 1e-6);
    assert_true(get(top, "\xEF\xBF\xBD")->valuedouble == -9999.0); /* lone byte; -inf */
    const cJSON *to = get(j, "text_offset");
    assert_int_equal(cJSON_GetArrayItem(to, 0)->valueint, 100);
    assert_int_equal(cJSON_GetArrayItem(to, 1)->valueint, 104);
    assert_int_equal(off, 108);
    cJSON_Delete(j);
    folio_buf_free(&b);

    /* with the echoed prompt: nulls first; " five" loses its space prefix
     * when the text does not start with one; generated offsets start at
     * echo_len */
    f.ch[0].echo_len = 9;
    srv_render_logprobs(&b, &R, &f.ch[0], 0, 1, true, &off);
    j = parse_json(&b);
    assert_int_equal(cJSON_GetArraySize(get(j, "tokens")), 3);
    assert_string_equal(cJSON_GetArrayItem(get(j, "tokens"), 0)->valuestring, " five");
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(get(j, "token_logprobs"), 1)));
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(get(j, "top_logprobs"), 0)));
    to = get(j, "text_offset");
    assert_int_equal(cJSON_GetArrayItem(to, 0)->valueint, 0);
    assert_int_equal(cJSON_GetArrayItem(to, 1)->valueint, 4);
    assert_int_equal(cJSON_GetArrayItem(to, 2)->valueint, 9);
    assert_int_equal(off, 13);
    cJSON_Delete(j);
    folio_buf_free(&b);
    fixture_free(&f);
}

/* Prompt logprobs: in the echoed legacy arrays and as vLLM's list. */
static void test_prompt_logprobs(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, false);
    struct sampler_result plp[2] = {{.token = 5, .logprob = NAN},
                                    {.token = 7,
                                     .logprob = -1.25f,
                                     .rank = 3,
                                     .n_top = 2,
                                     .top_ids = {4, 7},
                                     .top_logprobs = {-0.25f, -1.25f}}};
    f.ch[0].plps = plp;
    struct folio_buf b = {0};
    int64_t off = 0;
    srv_render_logprobs(&b, &R, &f.ch[0], 0, 1, true, &off);
    cJSON *j = parse_json(&b);
    const cJSON *lp = get(j, "token_logprobs");
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(lp, 0)));
    assert_true(fabs(cJSON_GetArrayItem(lp, 1)->valuedouble - -1.25) < 1e-6);
    const cJSON *top = get(j, "top_logprobs");
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(top, 0)));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(top, 1)), 2);
    assert_true(fabs(get(cJSON_GetArrayItem(top, 1), "<4>")->valuedouble - -0.25) < 1e-6);
    cJSON_Delete(j);
    folio_buf_free(&b);

    srv_render_prompt_logprobs(&b, &R, &f.comp, &f.ch[0]);
    j = parse_json(&b);
    assert_int_equal(cJSON_GetArraySize(j), 2);
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(j, 0)));
    const cJSON *e = cJSON_GetArrayItem(j, 1);
    assert_int_equal(cJSON_GetArraySize(e), 2);
    assert_string_equal(e->child->string, "7"); /* the prompt token first */
    assert_int_equal(get(get(e, "7"), "rank")->valueint, 3);
    assert_string_equal(get(get(e, "7"), "decoded_token")->valuestring, "<7>");
    assert_true(fabs(get(get(e, "4"), "logprob")->valuedouble - -0.25) < 1e-6);
    assert_int_equal(get(get(e, "4"), "rank")->valueint, 1);
    cJSON_Delete(j);
    folio_buf_free(&b);

    /* unscored (the request failed first): null; without them: null */
    plp[1].logprob = NAN;
    srv_render_prompt_logprobs(&b, &R, &f.comp, &f.ch[0]);
    j = parse_json(&b);
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(j, 1)));
    cJSON_Delete(j);
    folio_buf_free(&b);
    f.ch[0].plps = NULL;
    srv_render_prompt_logprobs(&b, &R, &f.comp, &f.ch[0]);
    assert_true(b.len == 4 && !memcmp(b.p, "null", 4));
    folio_buf_free(&b);
    fixture_free(&f);
}

/* Chat logprobs in OpenAI's format: one entry per token with its text,
 * raw bytes (a lone lead byte stays a byte, its text U+FFFD), logprob and
 * top entries; in a stream chunk only the chunk's tokens.  Usage carries
 * cached_tokens. */
static void test_chat_logprobs_and_usage(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, true);
    f.comp.p.gen.n_logprobs = 2;
    f.comp.cached_tokens = 3;
    f.ch[1].lps = f.lps;
    struct folio_buf b = {0};
    srv_render_response(&b, &R, &f.comp);
    cJSON *j = parse_json(&b);
    const cJSON *c0 = cJSON_GetArrayItem(get(j, "choices"), 0);
    const cJSON *content = get(get(c0, "logprobs"), "content");
    assert_int_equal(cJSON_GetArraySize(content), 3);
    const cJSON *e1 = cJSON_GetArrayItem(content, 1);
    assert_string_equal(get(e1, "token")->valuestring, "<11>");
    assert_true(fabs(get(e1, "logprob")->valuedouble + 0.5) < 1e-6);
    const cJSON *bytes = get(e1, "bytes");
    assert_int_equal(cJSON_GetArraySize(bytes), 4);
    assert_int_equal(cJSON_GetArrayItem(bytes, 0)->valueint, '<');
    const cJSON *tops = get(e1, "top_logprobs");
    assert_int_equal(cJSON_GetArraySize(tops), 2);
    const cJSON *t1 = cJSON_GetArrayItem(tops, 1);
    assert_string_equal(get(t1, "token")->valuestring, "\xEF\xBF\xBD");
    assert_int_equal(cJSON_GetArraySize(get(t1, "bytes")), 1);
    assert_int_equal(cJSON_GetArrayItem(get(t1, "bytes"), 0)->valueint, 0xE2);
    assert_true(get(t1, "logprob")->valuedouble == -9999);
    const cJSON *u = get(j, "usage");
    assert_int_equal(get(u, "prompt_tokens")->valueint, 4);
    assert_int_equal(get(get(u, "prompt_tokens_details"), "cached_tokens")->valueint, 3);
    cJSON_Delete(j);
    folio_buf_free(&b);
    /* a stream chunk: tokens [sent_tokens, n_tokens) only */
    f.ch[0].sent_tokens = 2;
    f.ch[0].role_sent = true;
    int64_t off = 0;
    srv_render_stream_chunk(&b, &R, &f.comp, &f.ch[0], 1, false, false, false, &off);
    assert_true(b.len > 8 && !strncmp(b.p, "data: ", 6));
    cJSON *c = cJSON_ParseWithLength(b.p + 6, b.len - 6);
    assert_non_null(c);
    const cJSON *sc = get(get(cJSON_GetArrayItem(get(c, "choices"), 0), "logprobs"), "content");
    assert_int_equal(cJSON_GetArraySize(sc), 1);
    assert_string_equal(get(cJSON_GetArrayItem(sc, 0), "token")->valuestring, "<12>");
    cJSON_Delete(c);
    folio_buf_free(&b);
    fixture_free(&f);
}

static void test_token_ids(void **state)
{
    (void)state;
    struct folio_buf b = {0};
    const int32_t t[] = {0, -1, 2147483647};
    srv_render_token_ids(&b, t, 3);
    assert_string_equal(b.p, "[0,-1,2147483647]");
    folio_buf_free(&b);
    srv_render_token_ids(&b, t, 0);
    assert_string_equal(b.p, "[]");
    folio_buf_free(&b);
}

/* Pooling spans, the mean of the rows, each normalization (by hand),
 * dimensions before normalizing. */
static void test_embed_math(void **state)
{
    (void)state;
    int32_t lo, hi;
    srv_pooling_range(SRV_POOL_MEAN, 7, &lo, &hi);
    assert_true(lo == 0 && hi == 7);
    srv_pooling_range(SRV_POOL_CLS, 7, &lo, &hi);
    assert_true(lo == 0 && hi == 1);
    srv_pooling_range(SRV_POOL_LAST, 7, &lo, &hi);
    assert_true(lo == 6 && hi == 7);
    srv_pooling_range(SRV_POOL_LAST, 1, &lo, &hi);
    assert_true(lo == 0 && hi == 1);

    struct srv_emb_acc a;
    assert_int_equal(srv_emb_acc_init(&a, 4), 0);
    const float rows[] = {1, 2, 3, -4, 3, 2, 1, 0}; /* two rows: mean 2, 2, 2, -2 */
    srv_emb_acc_add(&a, rows, 1, 4);
    srv_emb_acc_add(&a, rows + 4, 1, 4);
    srv_emb_acc_add(&a, rows, 1, 3); /* a width that is not a's: ignored */
    assert_int_equal(a.rows, 2);
    float v[4];
    struct srv_emb_params ep = {.normalize = true};
    assert_int_equal(srv_emb_norm(&ep), SRV_EMB_NORM_EUCLID);
    assert_int_equal(srv_emb_finish(&a, &ep, v), 4);
    for (int k = 0; k < 4; k++) /* |mean| = 4 */
        assert_float_equal(v[k], k < 3 ? 0.5f : -0.5f, 1e-7);
    ep.normalize = false;
    assert_int_equal(srv_emb_finish(&a, &ep, v), 4);
    assert_float_equal(v[0], 2.0f, 0);
    assert_float_equal(v[3], -2.0f, 0);
    ep.norm_set = true; /* embd_normalize wins over normalize */
    ep.norm = SRV_EMB_NORM_MAXABS;
    srv_emb_finish(&a, &ep, v);
    assert_float_equal(v[1], 32760.0f, 0);
    assert_float_equal(v[3], -32760.0f, 0);
    ep.norm = SRV_EMB_NORM_TAXICAB;
    srv_emb_finish(&a, &ep, v);
    assert_float_equal(v[2], 0.25f, 1e-7);
    ep.norm = 3; /* (4 * 8)^(1/3) */
    srv_emb_finish(&a, &ep, v);
    assert_float_equal(v[0], (float)(2.0 / cbrt(32.0)), 1e-6);
    ep.norm = SRV_EMB_NORM_EUCLID;
    ep.dims = 2; /* cut, then unit length: 1/sqrt(2) each */
    assert_int_equal(srv_emb_finish(&a, &ep, v), 2);
    assert_float_equal(v[0], (float)(1 / sqrt(2.0)), 1e-7);
    assert_float_equal(v[1], (float)(1 / sqrt(2.0)), 1e-7);
    ep.dims = 9; /* beyond the width: all of it */
    assert_int_equal(srv_emb_finish(&a, &ep, v), 4);
    srv_emb_acc_free(&a);
    /* no rows (or a zero vector): zeros, not NaN */
    assert_int_equal(srv_emb_acc_init(&a, 4), 0);
    ep.dims = 0;
    srv_emb_finish(&a, &ep, v);
    for (int k = 0; k < 4; k++)
        assert_true(v[k] == 0.0f);
    srv_emb_acc_free(&a);
}

/* JSON numbers read back as the same float; base64 is the float32 bytes,
 * little-endian, with = padding. */
static void test_embed_json(void **state)
{
    (void)state;
    const float v[] = {0.1f, 1.0f / 3.0f, -2.5e-8f, 16777216.0f, 1e30f, INFINITY};
    struct folio_buf b = {0};
    srv_emb_json(&b, v, 6, false);
    assert_false(b.oom);
    cJSON *j = cJSON_Parse(b.p);
    assert_non_null(j);
    assert_int_equal(cJSON_GetArraySize(j), 6);
    for (int k = 0; k < 5; k++)
        assert_true((float)cJSON_GetArrayItem(j, k)->valuedouble == v[k]);
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(j, 5))); /* JSON has no infinity */
    assert_non_null(strstr(b.p, "[0.1,"));               /* the shortest such text */
    cJSON_Delete(j);
    b.len = 0;
    const float one[] = {1.0f}; /* 00 00 80 3f */
    srv_emb_json(&b, one, 1, true);
    assert_string_equal(b.p, "\"AACAPw==\"");
    b.len = 0;
    const float two[] = {1.0f, -2.0f}; /* 00 00 80 3f 00 00 00 c0 */
    srv_emb_json(&b, two, 2, true);
    assert_string_equal(b.p, "\"AACAPwAAAMA=\"");
    /* 100 values: past the 48-value chunks, decoded back byte for byte */
    float many[100];
    for (int k = 0; k < 100; k++)
        many[k] = (float)k * 0.37f - 11.0f;
    b.len = 0;
    srv_emb_json(&b, many, 100, true);
    assert_int_equal(b.len, 2 + (400 + 2) / 3 * 4);
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned char dec[402];
    size_t n = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 1; i + 1 < b.len && b.p[i] != '='; i++) {
        acc = acc << 6 | (uint32_t)(strchr(A, b.p[i]) - A);
        if ((bits += 6) >= 8)
            dec[n++] = (unsigned char)(acc >> (bits -= 8));
    }
    assert_int_equal(n, 400);
    for (int k = 0; k < 100; k++) {
        uint32_t u = (uint32_t)dec[4 * k] | (uint32_t)dec[4 * k + 1] << 8 |
                     (uint32_t)dec[4 * k + 2] << 16 | (uint32_t)dec[4 * k + 3] << 24;
        float x;
        memcpy(&x, &u, 4);
        assert_true(x == many[k]);
    }
    folio_buf_free(&b);
}

/* The response: a list of embedding objects in input order, the model,
 * usage with prompt tokens only. */
static void test_embed_response(void **state)
{
    (void)state;
    struct srv_comp comp = {0};
    struct srv_choice ch[2] = {0};
    comp.p.embed = true;
    comp.p.emb.normalize = true;
    comp.p.emb.dims = 2;
    snprintf(comp.id, sizeof(comp.id), "embd-1");
    comp.created = 1700000000;
    comp.n_choices = 2;
    comp.ch = ch;
    comp.prompt_tokens = 5;
    const float rows[2][3] = {{3, 4, 9}, {0, -2, 1}};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(srv_emb_acc_init(&ch[i].emb, 3), 0);
        srv_emb_acc_add(&ch[i].emb, rows[i], 1, 3);
    }
    struct folio_buf b = {0};
    srv_render_embeddings(&b, &R, &comp);
    assert_false(b.oom);
    cJSON *j = cJSON_Parse(b.p);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "object")->valuestring, "list");
    assert_string_equal(cJSON_GetObjectItem(j, "model")->valuestring, "test-model");
    const cJSON *data = cJSON_GetObjectItem(j, "data");
    assert_int_equal(cJSON_GetArraySize(data), 2);
    const cJSON *d1 = cJSON_GetArrayItem(data, 1);
    assert_string_equal(cJSON_GetObjectItem(d1, "object")->valuestring, "embedding");
    assert_int_equal(cJSON_GetObjectItem(d1, "index")->valueint, 1);
    const cJSON *e0 = cJSON_GetObjectItem(cJSON_GetArrayItem(data, 0), "embedding");
    assert_int_equal(cJSON_GetArraySize(e0), 2); /* 3, 4 -> 0.6, 0.8 */
    assert_float_equal(cJSON_GetArrayItem(e0, 0)->valuedouble, 0.6, 1e-7);
    assert_float_equal(cJSON_GetArrayItem(e0, 1)->valuedouble, 0.8, 1e-7);
    const cJSON *e1 = cJSON_GetObjectItem(d1, "embedding");
    assert_float_equal(cJSON_GetArrayItem(e1, 1)->valuedouble, -1.0, 0);
    const cJSON *u = cJSON_GetObjectItem(j, "usage");
    assert_int_equal(cJSON_GetObjectItem(u, "prompt_tokens")->valueint, 5);
    assert_int_equal(cJSON_GetObjectItem(u, "total_tokens")->valueint, 5);
    assert_null(cJSON_GetObjectItem(u, "completion_tokens"));
    cJSON_Delete(j);
    folio_buf_free(&b);
    for (int i = 0; i < 2; i++)
        srv_emb_acc_free(&ch[i].emb);
}

/* Rerank: each document's pooled state through the head (softmax's
 * first of two, sigmoid of one, bias added), best first (ties by index),
 * cut to top_n; Jina/vLLM's object or TEI's array. */
static void test_rerank_response(void **state)
{
    (void)state;
    struct srv_comp comp = {0};
    struct srv_choice ch[4] = {0};
    char *texts[4] = {"zero", "one", "two \"quoted\"", "three"};
    comp.p.embed = comp.p.rerank = true;
    comp.p.rr.return_documents = true;
    comp.p.prompt_text = texts;
    snprintf(comp.id, sizeof(comp.id), "rerank-1");
    comp.n_choices = 4;
    comp.ch = ch;
    comp.prompt_tokens = 40;
    /* head rows yes = (1, 0), no = (0, 1): P(yes) = 1 / (1 + e^(h1 - h0)) */
    const float rows[4][2] = {{0, 0}, {2, 0}, {0, 1}, {0, 0}};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(srv_emb_acc_init(&ch[i].emb, 2), 0);
        srv_emb_acc_add(&ch[i].emb, rows[i], 1, 2);
    }
    const float w[4] = {1, 0, 0, 1};
    struct srv_render r = R;
    r.cls_w = w;
    r.n_cls = 2;
    struct folio_buf b = {0};
    srv_render_rerank(&b, &r, &comp);
    assert_false(b.oom);
    cJSON *j = cJSON_Parse(b.p);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "id")->valuestring, "rerank-1");
    assert_string_equal(cJSON_GetObjectItem(j, "model")->valuestring, "test-model");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "total_tokens")->valueint,
                     40);
    const cJSON *res = cJSON_GetObjectItem(j, "results");
    assert_int_equal(cJSON_GetArraySize(res), 4);
    const int order[4] = {1, 0, 3, 2}; /* 0 and 3 tie at 0.5: lower index first */
    const double want[4] = {1 / (1 + exp(-2.0)), 0.5, 0.5, 1 / (1 + exp(1.0))};
    for (int k = 0; k < 4; k++) {
        const cJSON *e = cJSON_GetArrayItem(res, k);
        assert_int_equal(cJSON_GetObjectItem(e, "index")->valueint, order[k]);
        assert_float_equal(cJSON_GetObjectItem(e, "relevance_score")->valuedouble, want[k], 1e-8);
        assert_string_equal(
            cJSON_GetObjectItem(cJSON_GetObjectItem(e, "document"), "text")->valuestring,
            texts[order[k]]);
    }
    cJSON_Delete(j);
    folio_buf_free(&b);

    /* top_n 2, no documents */
    comp.p.rr.top_n = 2;
    comp.p.rr.return_documents = false;
    srv_render_rerank(&b, &r, &comp);
    j = cJSON_Parse(b.p);
    res = cJSON_GetObjectItem(j, "results");
    assert_int_equal(cJSON_GetArraySize(res), 2);
    assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(res, 0), "document"));
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(res, 1), "index")->valueint, 0);
    cJSON_Delete(j);
    folio_buf_free(&b);

    /* TEI: a bare array of {index, score, text}; one output with a bias:
     * sigmoid(h0 + 0.5) */
    comp.p.rr = (struct srv_rerank_params){.tei = true, .return_text = true};
    const float bias[1] = {0.5f};
    r.n_cls = 1;
    r.cls_b = bias;
    srv_render_rerank(&b, &r, &comp);
    j = cJSON_Parse(b.p);
    assert_true(cJSON_IsArray(j));
    assert_int_equal(cJSON_GetArraySize(j), 4);
    const cJSON *e = cJSON_GetArrayItem(j, 0);
    assert_int_equal(cJSON_GetObjectItem(e, "index")->valueint, 1);
    assert_float_equal(cJSON_GetObjectItem(e, "score")->valuedouble, 1 / (1 + exp(-2.5)), 1e-8);
    assert_string_equal(cJSON_GetObjectItem(e, "text")->valuestring, "one");
    assert_null(cJSON_GetObjectItem(e, "relevance_score"));
    /* 0, 2 and 3 tie (h0 = 0): index order */
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 2), "text")->valuestring,
                        "two \"quoted\"");
    cJSON_Delete(j);
    folio_buf_free(&b);

    /* /v1/score: the same scores, in request order */
    comp.p.rr = (struct srv_rerank_params){.score = true};
    r.n_cls = 2;
    r.cls_b = NULL;
    srv_render_score(&b, &r, &comp);
    j = cJSON_Parse(b.p);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "object")->valuestring, "list");
    const cJSON *data = cJSON_GetObjectItem(j, "data");
    assert_int_equal(cJSON_GetArraySize(data), 4);
    for (int k = 0; k < 4; k++) {
        const cJSON *d = cJSON_GetArrayItem(data, k);
        assert_int_equal(cJSON_GetObjectItem(d, "index")->valueint, k);
        assert_string_equal(cJSON_GetObjectItem(d, "object")->valuestring, "score");
    }
    assert_float_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(data, 1), "score")->valuedouble,
                       1 / (1 + exp(-2.0)), 1e-8);
    assert_float_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(data, 2), "score")->valuedouble,
                       1 / (1 + exp(1.0)), 1e-8);
    assert_int_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "prompt_tokens")->valueint, 40);
    cJSON_Delete(j);
    folio_buf_free(&b);
    for (int i = 0; i < 4; i++)
        srv_emb_acc_free(&ch[i].emb);
}

/* The events of an Anthropic stream, in order: their types, and
 * every data line's "type" equal to its event's. */
static int msg_events(const char *s, char types[][48], cJSON **data, int cap)
{
    int n = 0;
    while (*s && n < cap) {
        const char *nl = strchr(s, '\n');
        assert_non_null(nl);
        assert_true(!strncmp(s, "event: ", 7));
        snprintf(types[n], 48, "%.*s", (int)(nl - s - 7), s + 7);
        const char *d = nl + 1, *end = strstr(d, "\n\n");
        assert_true(!strncmp(d, "data: ", 6) && end);
        data[n] = cJSON_ParseWithLength(d + 6, (size_t)(end - d - 6));
        assert_non_null(data[n]);
        assert_string_equal(cJSON_GetObjectItem(data[n], "type")->valuestring, types[n]);
        n++;
        s = end + 2;
    }
    return n;
}

/* Anthropic's Messages shape: the response (stop_reason from how the
 * choice ended, the stop sequence that ended it) and the stream's events. */
static void test_message_response(void **state)
{
    (void)state;
    struct srv_comp comp = {0};
    struct srv_choice ch = {0};
    char *stops[2] = {"x", "yz"};
    comp.p.chat = comp.p.messages = true;
    comp.p.n_stop = 2;
    comp.p.stop[0] = stops[0];
    comp.p.stop[1] = stops[1];
    snprintf(comp.id, sizeof(comp.id), "msg-1");
    comp.n_choices = 1;
    comp.ch = &ch;
    comp.prompt_tokens = 9;
    comp.cached_tokens = 4;
    folio_buf_puts(&ch.text, "Hi \"you\"");
    ch.n_tokens = 3;
    static const struct {
        enum eng_finish fin;
        bool stopped;
        const char *reason, *seq;
    } cases[] = {{ENG_FINISH_STOP, false, "end_turn", NULL},
                 {ENG_FINISH_LENGTH, false, "max_tokens", NULL},
                 {ENG_FINISH_STOP, true, "stop_sequence", "yz"}};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(cases); i++) {
        ch.finish = cases[i].fin;
        ch.stopped = cases[i].stopped;
        ch.dt = NULL;
        if (cases[i].stopped) { /* the detokenizer saw the second stop string */
            assert_int_equal(tok_detok_new(NULL, (const char *const *)stops, 2, 0, &ch.dt), 0);
            const char *t;
            size_t len;
            tok_detok_feed_bytes(ch.dt, "abyz", 4, &t, &len);
            assert_int_equal(tok_detok_stopped(ch.dt), 1);
        }
        struct folio_buf b = {0};
        srv_render_message(&b, &R, &comp);
        cJSON *j = cJSON_Parse(b.p);
        assert_non_null(j);
        assert_string_equal(cJSON_GetObjectItem(j, "type")->valuestring, "message");
        assert_string_equal(cJSON_GetObjectItem(j, "role")->valuestring, "assistant");
        assert_string_equal(cJSON_GetObjectItem(j, "id")->valuestring, "msg-1");
        const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "content"), 0);
        assert_string_equal(cJSON_GetObjectItem(c0, "type")->valuestring, "text");
        assert_string_equal(cJSON_GetObjectItem(c0, "text")->valuestring, "Hi \"you\"");
        assert_string_equal(cJSON_GetObjectItem(j, "stop_reason")->valuestring, cases[i].reason);
        const cJSON *seq = cJSON_GetObjectItem(j, "stop_sequence");
        if (cases[i].seq)
            assert_string_equal(seq->valuestring, cases[i].seq);
        else
            assert_true(cJSON_IsNull(seq));
        const cJSON *u = cJSON_GetObjectItem(j, "usage");
        assert_int_equal(cJSON_GetObjectItem(u, "input_tokens")->valueint, 9);
        assert_int_equal(cJSON_GetObjectItem(u, "output_tokens")->valueint, 3);
        assert_int_equal(cJSON_GetObjectItem(u, "cache_read_input_tokens")->valueint, 4);
        cJSON_Delete(j);
        folio_buf_free(&b);

        /* the stream: start (first), one delta (send), the end (final) */
        struct srv_resp_stream st = {0};
        srv_render_message_stream(&b, &R, &comp, &ch, 3, true, false, 0, &st);
        srv_render_message_stream(&b, &R, &comp, &ch, ch.text.len, false, true, 0, &st);
        char types[16][48];
        cJSON *d[16];
        int n = msg_events(b.p, types, d, 16);
        static const char *const want[] = {
            "message_start",       "content_block_start", "ping",          "content_block_delta",
            "content_block_delta", "content_block_stop",  "message_delta", "message_stop"};
        assert_int_equal(n, 8);
        for (int k = 0; k < n; k++)
            assert_string_equal(types[k], want[k]);
        const cJSON *m = cJSON_GetObjectItem(d[0], "message");
        assert_true(cJSON_IsNull(cJSON_GetObjectItem(m, "stop_reason")));
        assert_int_equal(
            cJSON_GetObjectItem(cJSON_GetObjectItem(m, "usage"), "input_tokens")->valueint, 9);
        const char *d1 =
            cJSON_GetObjectItem(cJSON_GetObjectItem(d[3], "delta"), "text")->valuestring;
        const char *d2 =
            cJSON_GetObjectItem(cJSON_GetObjectItem(d[4], "delta"), "text")->valuestring;
        assert_string_equal(d1, "Hi ");
        assert_string_equal(d2, "Hi \"you\""); /* the caller drops what it sent; here it did not */
        const cJSON *md = cJSON_GetObjectItem(d[6], "delta");
        assert_string_equal(cJSON_GetObjectItem(md, "stop_reason")->valuestring, cases[i].reason);
        assert_int_equal(
            cJSON_GetObjectItem(cJSON_GetObjectItem(d[6], "usage"), "output_tokens")->valueint, 3);
        for (int k = 0; k < n; k++)
            cJSON_Delete(d[k]);
        folio_buf_free(&b);
        tok_detok_free(ch.dt);
        ch.dt = NULL;
    }
    folio_buf_free(&ch.text);
}

/* Anthropic's tool_use: a call in the text is a tool_use block after the
 * text before it, stop_reason tool_use; streamed (held to the end) as the
 * text's block, then the call's block with its input as one
 * input_json_delta. */
static void test_message_tool_use(void **state)
{
    (void)state;
    struct srv_comp comp = {0};
    struct srv_choice ch = {0};
    comp.p.chat = comp.p.messages = true;
    snprintf(comp.id, sizeof(comp.id), "msg-9");
    comp.n_choices = 1;
    comp.ch = &ch;
    ch.comp = &comp;
    ch.n_tokens = 30;
    ch.finish = ENG_FINISH_STOP;
    struct srv_tool tool = {.name = "f", .params = "{}", .def = "{}"};
    struct srv_tools tools = {.tools = &tool,
                              .n_tools = 1,
                              .choice = SRV_TC_AUTO,
                              .fmt = chat_tool_format(CHAT_TMPL_CHATML)};
    comp.p.tools = &tools;
    folio_buf_puts(&ch.text,
                   "ok<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>");
    struct folio_buf b = {0};
    srv_render_message(&b, &R, &comp);
    cJSON *j = cJSON_Parse(b.p);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "stop_reason")->valuestring, "tool_use");
    const cJSON *content = cJSON_GetObjectItem(j, "content");
    assert_int_equal(cJSON_GetArraySize(content), 2);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(content, 0), "text")->valuestring,
                        "ok");
    const cJSON *use = cJSON_GetArrayItem(content, 1);
    assert_string_equal(cJSON_GetObjectItem(use, "type")->valuestring, "tool_use");
    assert_string_equal(cJSON_GetObjectItem(use, "id")->valuestring, "toolu_9_0");
    assert_string_equal(cJSON_GetObjectItem(use, "name")->valuestring, "f");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(use, "input"), "a")->valueint, 1);
    cJSON_Delete(j);
    folio_buf_free(&b);
    /* the stream: the head while held, then everything at the end */
    struct srv_resp_stream st = {0};
    srv_render_message_stream(&b, &R, &comp, &ch, 0, true, false, 1, &st);
    srv_render_message_stream(&b, &R, &comp, &ch, ch.text.len, false, true, 2, &st);
    char types[16][48];
    cJSON *d[16];
    int n = msg_events(b.p, types, d, 16);
    static const char *const want[] = {"message_start",       "ping",
                                       "content_block_start", "content_block_delta",
                                       "content_block_stop",  "content_block_start",
                                       "content_block_delta", "content_block_stop",
                                       "message_delta",       "message_stop"};
    assert_int_equal(n, (int)FOLIO_ARRAY_LEN(want));
    for (int k = 0; k < n; k++)
        assert_string_equal(types[k], want[k]);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(d[3], "delta"), "text")->valuestring, "ok");
    assert_int_equal(cJSON_GetObjectItem(d[5], "index")->valueint, 1);
    const cJSON *blk = cJSON_GetObjectItem(d[5], "content_block");
    assert_string_equal(cJSON_GetObjectItem(blk, "type")->valuestring, "tool_use");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(blk, "input")), 0);
    const cJSON *dj = cJSON_GetObjectItem(d[6], "delta");
    assert_string_equal(cJSON_GetObjectItem(dj, "type")->valuestring, "input_json_delta");
    cJSON *in = cJSON_Parse(cJSON_GetObjectItem(dj, "partial_json")->valuestring);
    assert_int_equal(cJSON_GetObjectItem(in, "a")->valueint, 1);
    cJSON_Delete(in);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(d[8], "delta"), "stop_reason")->valuestring,
        "tool_use");
    for (int k = 0; k < n; k++)
        cJSON_Delete(d[k]);
    folio_buf_free(&b);
    folio_buf_free(&ch.text);
}

static const cJSON *jget(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v)
        fail_msg("no '%s' in %s", k, cJSON_PrintUnformatted(o));
    return v;
}

/* OpenAI's Responses shape: the object (status from how the choice ended,
 * the request's echo, usage), the conversation the store keeps, the
 * stream's events in order with their sequence numbers; a tool call as a
 * function_call item, whole and streamed. */
static void test_responses_render(void **state)
{
    (void)state;
    struct srv_comp comp = {0};
    struct srv_choice ch = {0};
    struct srv_resp_params rp = {.echo = "\"store\":true,\"tools\":[]",
                                 .conv = "[{\"role\":\"user\",\"content\":\"q\"}]",
                                 .store = true};
    comp.p.chat = comp.p.responses = true;
    comp.p.n = 1;
    comp.p.resp = &rp;
    snprintf(comp.id, sizeof(comp.id), "resp_7");
    comp.created = 123;
    comp.n_choices = 1;
    comp.ch = &ch;
    comp.prompt_tokens = 9;
    comp.cached_tokens = 4;
    ch.comp = &comp;
    ch.n_tokens = 3;
    const char *text = "Hi \"you\"";
    for (int inc = 0; inc < 2; inc++) {
        ch.finish = inc ? ENG_FINISH_LENGTH : ENG_FINISH_STOP;
        struct folio_buf b = {0};
        srv_render_responses(&b, &R, &comp, text, strlen(text));
        cJSON *j = cJSON_Parse(b.p);
        assert_non_null(j);
        assert_string_equal(jget(j, "id")->valuestring, "resp_7");
        assert_string_equal(jget(j, "object")->valuestring, "response");
        assert_int_equal(jget(j, "created_at")->valueint, 123);
        assert_string_equal(jget(j, "status")->valuestring, inc ? "incomplete" : "completed");
        const cJSON *id = jget(j, "incomplete_details");
        if (inc)
            assert_string_equal(jget(id, "reason")->valuestring, "max_output_tokens");
        else
            assert_true(cJSON_IsNull(id));
        assert_true(cJSON_IsTrue(jget(j, "store"))); /* the echo */
        const cJSON *out = jget(j, "output");
        assert_int_equal(cJSON_GetArraySize(out), 1);
        const cJSON *m = cJSON_GetArrayItem(out, 0);
        assert_string_equal(jget(m, "id")->valuestring, "msg_7");
        assert_string_equal(jget(m, "type")->valuestring, "message");
        assert_string_equal(jget(m, "role")->valuestring, "assistant");
        assert_string_equal(jget(m, "status")->valuestring, inc ? "incomplete" : "completed");
        const cJSON *part = cJSON_GetArrayItem(jget(m, "content"), 0);
        assert_string_equal(jget(part, "type")->valuestring, "output_text");
        assert_string_equal(jget(part, "text")->valuestring, text);
        const cJSON *u = jget(j, "usage");
        assert_int_equal(jget(u, "input_tokens")->valueint, 9);
        assert_int_equal(jget(jget(u, "input_tokens_details"), "cached_tokens")->valueint, 4);
        assert_int_equal(jget(u, "output_tokens")->valueint, 3);
        assert_int_equal(jget(u, "total_tokens")->valueint, 12);
        cJSON_Delete(j);
        folio_buf_free(&b);
    }
    struct folio_buf b = {0};
    srv_render_responses_conv(&b, &comp, text, strlen(text));
    assert_string_equal(b.p, "[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\","
                             "\"content\":\"Hi \\\"you\\\"\"}]");
    folio_buf_free(&b);

    /* a background response: queued (no output, no usage), cancelled (the
     * text it had, the message incomplete), failed (an error object) */
    rp.background = true;
    comp.rstatus = "queued";
    srv_render_responses_pending(&b, &R, &comp);
    cJSON *j = cJSON_Parse(b.p);
    assert_non_null(j);
    assert_string_equal(jget(j, "status")->valuestring, "queued");
    assert_true(cJSON_IsTrue(jget(j, "background")));
    assert_int_equal(cJSON_GetArraySize(jget(j, "output")), 0);
    assert_true(cJSON_IsNull(jget(j, "usage")) && cJSON_IsNull(jget(j, "error")));
    cJSON_Delete(j);
    folio_buf_free(&b);
    comp.rstatus = "cancelled";
    ch.finish = ENG_FINISH_ABORT;
    srv_render_responses(&b, &R, &comp, text, strlen(text));
    j = cJSON_Parse(b.p);
    assert_non_null(j);
    assert_string_equal(jget(j, "status")->valuestring, "cancelled");
    assert_true(cJSON_IsNull(jget(j, "incomplete_details")));
    const cJSON *cm = cJSON_GetArrayItem(jget(j, "output"), 0);
    assert_string_equal(jget(cm, "status")->valuestring, "incomplete");
    assert_string_equal(jget(cJSON_GetArrayItem(jget(cm, "content"), 0), "text")->valuestring,
                        text);
    assert_int_equal(jget(jget(j, "usage"), "output_tokens")->valueint, 3);
    cJSON_Delete(j);
    folio_buf_free(&b);
    comp.rstatus = "failed";
    ch.finish = ENG_FINISH_ERROR;
    srv_render_responses(&b, &R, &comp, "", 0);
    j = cJSON_Parse(b.p);
    assert_non_null(j);
    assert_string_equal(jget(j, "status")->valuestring, "failed");
    assert_string_equal(jget(jget(j, "error"), "code")->valuestring, "server_error");
    cJSON_Delete(j);
    folio_buf_free(&b);
    /* a stream's failure: response.failed, numbered on from the stream's */
    struct srv_resp_stream fst = {.seq = 5};
    srv_render_responses_stream_failed(&b, &R, &comp, &fst);
    static const char failed_head[] = "event: response.failed\ndata: ";
    assert_int_equal(strncmp(b.p, failed_head, sizeof(failed_head) - 1), 0);
    j = cJSON_Parse(b.p + sizeof(failed_head) - 1);
    assert_non_null(j);
    assert_int_equal(jget(j, "sequence_number")->valueint, 5);
    assert_string_equal(jget(jget(j, "response"), "status")->valuestring, "failed");
    assert_non_null(jget(jget(j, "response"), "error"));
    cJSON_Delete(j);
    folio_buf_free(&b);
    srv_render_message_stream_error(&b, "it \"broke\"");
    assert_string_equal(b.p, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"
                             "\"api_error\",\"message\":\"it \\\"broke\\\"\"}}\n\n");
    folio_buf_free(&b);
    comp.rstatus = NULL;
    rp.background = false;

    /* the stream: head, a delta of 3 bytes, then the final emit with the
     * rest (the caller passes the whole text so far each time) */
    ch.finish = ENG_FINISH_STOP;
    struct srv_resp_stream st = {0};
    srv_render_responses_stream_head(&b, &R, &comp, &st);
    srv_render_responses_stream(&b, &R, &comp, &ch, text, 3, 3, false, &st);
    srv_render_responses_stream(&b, &R, &comp, &ch, text, strlen(text), strlen(text) - 3, true,
                                &st);
    char types[24][48];
    cJSON *d[24];
    int n = msg_events(b.p, types, d, 24);
    static const char *const want[] = {"response.created",           "response.in_progress",
                                       "response.output_item.added", "response.content_part.added",
                                       "response.output_text.delta", "response.output_text.delta",
                                       "response.output_text.done",  "response.content_part.done",
                                       "response.output_item.done",  "response.completed"};
    assert_int_equal(n, (int)FOLIO_ARRAY_LEN(want));
    for (int k = 0; k < n; k++) {
        assert_string_equal(types[k], want[k]);
        assert_int_equal(jget(d[k], "sequence_number")->valueint, k);
    }
    assert_string_equal(jget(jget(d[0], "response"), "status")->valuestring, "in_progress");
    assert_true(cJSON_IsNull(jget(jget(d[0], "response"), "usage")));
    assert_string_equal(jget(d[4], "delta")->valuestring, "Hi ");
    assert_string_equal(jget(d[5], "delta")->valuestring, "\"you\"");
    assert_string_equal(jget(d[6], "text")->valuestring, text);
    assert_string_equal(jget(d[4], "item_id")->valuestring, "msg_7");
    const cJSON *fin = jget(d[9], "response");
    assert_string_equal(jget(fin, "status")->valuestring, "completed");
    assert_string_equal(
        jget(cJSON_GetArrayItem(jget(cJSON_GetArrayItem(jget(fin, "output"), 0), "content"), 0),
             "text")
            ->valuestring,
        text);
    for (int k = 0; k < n; k++)
        cJSON_Delete(d[k]);
    folio_buf_free(&b);

    /* a tool call (the ChatML family's format), with text before it */
    struct srv_tool tool = {.name = "f", .params = "{}", .def = "{}"};
    struct srv_tools tools = {.tools = &tool,
                              .n_tools = 1,
                              .choice = SRV_TC_AUTO,
                              .fmt = chat_tool_format(CHAT_TMPL_CHATML)};
    comp.p.tools = &tools;
    const char *call = "ok<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>";
    srv_render_responses(&b, &R, &comp, call, strlen(call));
    j = cJSON_Parse(b.p);
    assert_non_null(j);
    const cJSON *out = jget(j, "output");
    assert_int_equal(cJSON_GetArraySize(out), 2);
    assert_string_equal(
        jget(cJSON_GetArrayItem(jget(cJSON_GetArrayItem(out, 0), "content"), 0), "text")
            ->valuestring,
        "ok");
    const cJSON *fc = cJSON_GetArrayItem(out, 1);
    assert_string_equal(jget(fc, "type")->valuestring, "function_call");
    assert_string_equal(jget(fc, "id")->valuestring, "fc_7_0");
    assert_string_equal(jget(fc, "call_id")->valuestring, "call_resp_7_0_0");
    assert_string_equal(jget(fc, "name")->valuestring, "f");
    cJSON *args = cJSON_Parse(jget(fc, "arguments")->valuestring);
    assert_int_equal(jget(args, "a")->valueint, 1);
    cJSON_Delete(args);
    cJSON_Delete(j);
    folio_buf_free(&b);
    srv_render_responses_conv(&b, &comp, call, strlen(call));
    j = cJSON_Parse(b.p);
    const cJSON *last = cJSON_GetArrayItem(j, 1);
    assert_string_equal(jget(last, "content")->valuestring, "ok");
    const cJSON *tc = cJSON_GetArrayItem(jget(last, "tool_calls"), 0);
    assert_string_equal(jget(tc, "id")->valuestring, "call_resp_7_0_0");
    assert_string_equal(jget(jget(tc, "function"), "name")->valuestring, "f");
    cJSON_Delete(j);
    folio_buf_free(&b);
    /* streamed: held to the end (tool_mode 2), then the message and the call */
    ch.tool_mode = 2;
    st = (struct srv_resp_stream){0};
    srv_render_responses_stream(&b, &R, &comp, &ch, call, strlen(call), 0, true, &st);
    n = msg_events(b.p, types, d, 24);
    static const char *const want_call[] = {"response.output_item.added",
                                            "response.content_part.added",
                                            "response.output_text.delta",
                                            "response.output_text.done",
                                            "response.content_part.done",
                                            "response.output_item.done",
                                            "response.output_item.added",
                                            "response.function_call_arguments.delta",
                                            "response.function_call_arguments.done",
                                            "response.output_item.done",
                                            "response.completed"};
    assert_int_equal(n, (int)FOLIO_ARRAY_LEN(want_call));
    for (int k = 0; k < n; k++)
        assert_string_equal(types[k], want_call[k]);
    assert_string_equal(jget(d[2], "delta")->valuestring, "ok");
    assert_int_equal(jget(d[6], "output_index")->valueint, 1);
    assert_string_equal(jget(jget(d[6], "item"), "status")->valuestring, "in_progress");
    assert_string_equal(jget(d[8], "name")->valuestring, "f");
    for (int k = 0; k < n; k++)
        cJSON_Delete(d[k]);
    folio_buf_free(&b);
    /* the same text already streamed as text (tool_mode 1) stays text */
    ch.tool_mode = 1;
    srv_render_responses(&b, &R, &comp, call, strlen(call));
    j = cJSON_Parse(b.p);
    assert_int_equal(cJSON_GetArraySize(jget(j, "output")), 1);
    cJSON_Delete(j);
    folio_buf_free(&b);
}

/* Input items: ids by kind and position, newest first or oldest, pages
 * of `limit` after an id; an unknown `after` is refused. */
static void test_input_items(void **state)
{
    (void)state;
    const char *in =
        "[{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
        "\"text\":\"a\"}],\"status\":\"completed\"},{\"type\":\"function_call\","
        "\"call_id\":\"c\",\"name\":\"f\",\"arguments\":\"{}\",\"status\":"
        "\"completed\"},{\"type\":\"function_call_output\",\"call_id\":\"c\","
        "\"output\":\"1\",\"status\":\"completed\"}]";
    struct folio_buf b = {0};
    assert_int_equal(srv_render_input_items(&b, "resp_7", in, 20, false, NULL), 0);
    cJSON *j = cJSON_Parse(b.p);
    const cJSON *d = jget(j, "data");
    assert_int_equal(cJSON_GetArraySize(d), 3);
    assert_string_equal(jget(cJSON_GetArrayItem(d, 0), "id")->valuestring, "msg_7_in0");
    assert_string_equal(jget(cJSON_GetArrayItem(d, 1), "id")->valuestring, "fc_7_in1");
    assert_string_equal(jget(cJSON_GetArrayItem(d, 2), "id")->valuestring, "fco_7_in2");
    assert_string_equal(jget(cJSON_GetArrayItem(d, 2), "output")->valuestring, "1");
    assert_string_equal(jget(j, "first_id")->valuestring, "msg_7_in0");
    assert_string_equal(jget(j, "last_id")->valuestring, "fco_7_in2");
    assert_true(cJSON_IsFalse(jget(j, "has_more")));
    cJSON_Delete(j);
    folio_buf_free(&b);
    /* newest first, two a page */
    assert_int_equal(srv_render_input_items(&b, "resp_7", in, 2, true, NULL), 0);
    j = cJSON_Parse(b.p);
    assert_int_equal(cJSON_GetArraySize(jget(j, "data")), 2);
    assert_string_equal(jget(j, "first_id")->valuestring, "fco_7_in2");
    assert_string_equal(jget(j, "last_id")->valuestring, "fc_7_in1");
    assert_true(cJSON_IsTrue(jget(j, "has_more")));
    cJSON_Delete(j);
    folio_buf_free(&b);
    assert_int_equal(srv_render_input_items(&b, "resp_7", in, 2, true, "fc_7_in1"), 0);
    j = cJSON_Parse(b.p);
    assert_int_equal(cJSON_GetArraySize(jget(j, "data")), 1);
    assert_string_equal(jget(j, "first_id")->valuestring, "msg_7_in0");
    assert_string_equal(jget(j, "last_id")->valuestring, "msg_7_in0");
    assert_true(cJSON_IsFalse(jget(j, "has_more")));
    cJSON_Delete(j);
    folio_buf_free(&b);
    /* past the end: an empty page */
    assert_int_equal(srv_render_input_items(&b, "resp_7", in, 2, false, "fco_7_in2"), 0);
    j = cJSON_Parse(b.p);
    assert_int_equal(cJSON_GetArraySize(jget(j, "data")), 0);
    assert_true(cJSON_IsNull(jget(j, "first_id")));
    cJSON_Delete(j);
    folio_buf_free(&b);
    assert_int_equal(srv_render_input_items(&b, "resp_7", in, 2, false, "msg_8_in0"), -EINVAL);
    folio_buf_free(&b);
}

/* /classify: each input's probabilities through a three-class head in
 * request order, the likeliest's label (the file's names, else LABEL_i);
 * a one-output head is its sigmoid. */
static void test_classify_response(void **state)
{
    (void)state;
    struct srv_comp comp = {0};
    struct srv_choice ch[2] = {0};
    comp.p.embed = comp.p.classify = true;
    snprintf(comp.id, sizeof(comp.id), "classify-1");
    comp.n_choices = 2;
    comp.ch = ch;
    comp.prompt_tokens = 9;
    const float rows[2][2] = {{1, 0}, {0, 2}};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(srv_emb_acc_init(&ch[i].emb, 2), 0);
        srv_emb_acc_add(&ch[i].emb, rows[i], 1, 2);
    }
    /* logits: (h0, h1, 0) with bias (0, 0, 0.5) */
    const float w[6] = {1, 0, 0, 1, 0, 0}, bias[3] = {0, 0, 0.5f};
    const char *const labels[3] = {"neg", "pos", "neutral"};
    struct srv_render r = R;
    r.cls_w = w;
    r.cls_b = bias;
    r.n_cls = 3;
    r.cls_labels = labels;
    for (int named = 1; named >= 0; named--) {
        r.cls_labels = named ? labels : NULL;
        struct folio_buf b = {0};
        srv_render_classify(&b, &r, &comp);
        cJSON *j = cJSON_Parse(b.p);
        assert_non_null(j);
        assert_string_equal(jget(j, "id")->valuestring, "classify-1");
        assert_string_equal(jget(j, "object")->valuestring, "list");
        assert_int_equal(jget(jget(j, "usage"), "prompt_tokens")->valueint, 9);
        assert_int_equal(jget(jget(j, "usage"), "completion_tokens")->valueint, 0);
        const cJSON *d = jget(j, "data");
        assert_int_equal(cJSON_GetArraySize(d), 2);
        for (int i = 0; i < 2; i++) {
            const cJSON *e = cJSON_GetArrayItem(d, i);
            double z[3] = {rows[i][0], rows[i][1], 0.5}, den = 0;
            for (int k = 0; k < 3; k++)
                den += exp(z[k]);
            assert_int_equal(jget(e, "index")->valueint, i);
            assert_int_equal(jget(e, "num_classes")->valueint, 3);
            const cJSON *p = jget(e, "probs");
            for (int k = 0; k < 3; k++)
                assert_float_equal(cJSON_GetArrayItem(p, k)->valuedouble, exp(z[k]) / den, 1e-8);
            const char *want = i == 0 ? (named ? "neg" : "LABEL_0") : (named ? "pos" : "LABEL_1");
            assert_string_equal(jget(e, "label")->valuestring, want);
        }
        cJSON_Delete(j);
        folio_buf_free(&b);
    }
    /* one output: its sigmoid */
    r.n_cls = 1;
    r.cls_b = NULL;
    r.cls_labels = NULL;
    struct folio_buf b = {0};
    srv_render_classify(&b, &r, &comp);
    cJSON *j = cJSON_Parse(b.p);
    const cJSON *e = cJSON_GetArrayItem(jget(j, "data"), 0);
    assert_int_equal(jget(e, "num_classes")->valueint, 1);
    assert_float_equal(cJSON_GetArrayItem(jget(e, "probs"), 0)->valuedouble, 1 / (1 + exp(-1.0)),
                       1e-8);
    cJSON_Delete(j);
    folio_buf_free(&b);
    for (int i = 0; i < 2; i++)
        srv_emb_acc_free(&ch[i].emb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_response_completions),
        cmocka_unit_test(test_response_chat),
        cmocka_unit_test(test_stream_chat_role_and_final),
        cmocka_unit_test(test_stream_completions_ids_and_end),
        cmocka_unit_test(test_logprobs),
        cmocka_unit_test(test_prompt_logprobs),
        cmocka_unit_test(test_token_ids),
        cmocka_unit_test(test_chat_logprobs_and_usage),
        cmocka_unit_test(test_embed_math),
        cmocka_unit_test(test_embed_json),
        cmocka_unit_test(test_embed_response),
        cmocka_unit_test(test_rerank_response),
        cmocka_unit_test(test_message_response),
        cmocka_unit_test(test_responses_render),
        cmocka_unit_test(test_input_items),
        cmocka_unit_test(test_classify_response),
        cmocka_unit_test(test_message_tool_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
