/*
 * tests/fuzz/fuzz_request.c — libFuzzer harness: arbitrary bytes as a
 * request body, through daemon/api.c's parsers (srv_comp_parse,
 * srv_chat_parse with each chat template, srv_embed_parse, srv_rerank_parse,
 * srv_messages_parse, srv_responses_parse,
 * srv_tokenize_parse, srv_detokenize_parse), as routes.c and comp.c call
 * them.
 *
 * Input: byte 0 picks the parser (low 2 bits; 0 with bit 7: embeddings
 * (with bit 3 too: /classify),
 * 1 with bit 7: rerank (with bit 3 too: /v1/score), with a rerank
 * template when bit 2 is set; 2 and 3
 * with bit 7: an Anthropic Messages body, 3 count_tokens's; 2 with bits 7
 * and 3: an OpenAI Responses body, stored with bit 2, previous_response_id
 * "resp_a" known), the
 * chat template (bits 2-5, 0 = none: chat refused) and whether text
 * prompts can be tokenized (bit 6); the rest is the body.  The tokenizer is a stand-in (one id per
 * byte), so the harness exercises the JSON side, not the vocabulary.
 * Checked on every input, aborting (a libFuzzer finding) when false:
 *   - a refusal has a 4xx status, a type, and renders (srv_api_error_json)
 *     as JSON that cJSON parses back to the same status class;
 *   - an accepted completion has 1..SRV_MAX_PROMPTS prompts, each with
 *     1..ctx ids inside the vocabulary, n in 1..SRV_MAX_N, max_tokens >= 1,
 *     at most SRV_MAX_STOP stop strings of sane length, and every choice's
 *     engine request (srv_comp_req_init) points at its own prompt; an
 *     accepted embeddings body has 1..SRV_MAX_INPUTS inputs of 1..ctx - 1
 *     ids, n 1, max_tokens 1 and dimensions within the model's; an
 *     accepted rerank body also has its query and each document's text;
 *   - an accepted body never held a NUL (raw or \u0000): nothing a
 *     parser returns was silently cut short;
 *   - an accepted Responses body has its echo (JSON members) and its
 *     conversation (a JSON array) for the response and the store;
 *   - /tokenize's text is valid UTF-8; /detokenize's ids are in the
 *     vocabulary.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api.h"
#include "folio/chat.h"
#include "folio/common.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define VOCAB 512
#define CTX   256
#define EMBD  64

/* One id per byte (NUL never reaches here: see the NUL check). */
static int tokenize(void *ctx, const char *text, size_t n, bool special, int32_t **out,
                    int32_t *n_out)
{
    (void)special;
    if (!ctx)
        return -ENOSYS;
    int32_t *ids = folio_malloc((n ? n : 1) * sizeof(*ids));
    if (!ids)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        ids[i] = (unsigned char)text[i] % VOCAB;
    *out = ids;
    *n_out = (int32_t)n;
    return 0;
}

/* True when the body has a NUL, raw or as \u0000 inside a string. */
static bool has_nul(const char *s, size_t n)
{
    if (memchr(s, 0, n))
        return true;
    for (size_t i = 0; i + 6 <= n; i++)
        if (!memcmp(s + i, "\\u0000", 6)) {
            size_t k = 0; /* an odd run of backslashes before u: an escape */
            while (k <= i && s[i - k] == '\\')
                k++;
            if (k % 2)
                return true;
        }
    return false;
}

static void check_error(const struct srv_api_error *e)
{
    CHECK(e->status >= 400 && e->status < 500);
    CHECK(e->type && e->type[0]);
    struct folio_buf b = {0};
    srv_api_error_json(&b, e);
    CHECK(!b.oom);
    cJSON *j = cJSON_ParseWithLength(b.p, b.len);
    CHECK(j);
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");
    CHECK(cJSON_IsObject(err));
    CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(err, "message")));
    cJSON_Delete(j);
    folio_buf_free(&b);
}

static void check_params(const struct srv_comp_params *p)
{
    CHECK(p->n_prompts >= 1 && p->n_prompts <= (p->embed ? SRV_MAX_INPUTS : SRV_MAX_PROMPTS));
    if (p->embed) {
        CHECK(p->n == 1 && p->gen.max_tokens == 1 && p->gen.ignore_eos);
        CHECK(p->emb.dims >= 0 && p->emb.dims <= EMBD);
        for (int i = 0; i < p->n_prompts; i++)
            CHECK(p->prompt_lens[i] <= CTX - 1);
    }
    if (p->rerank) {
        CHECK(p->embed && p->prompt_text);
        CHECK(p->rr.score ? p->rr.n_queries == 1 || p->rr.n_queries == p->n_prompts
                          : p->rr.query != NULL);
        CHECK(p->rr.top_n >= 0 && p->rr.top_n <= SRV_MAX_INPUTS);
        for (int i = 0; i < p->n_prompts; i++)
            CHECK(p->prompt_text[i]);
    }
    CHECK(p->n >= 1 && p->n <= SRV_MAX_N);
    CHECK(p->gen.max_tokens >= 1);
    CHECK(p->n_stop >= 0 && p->n_stop <= SRV_MAX_STOP);
    for (int i = 0; i < p->n_stop; i++)
        CHECK(p->stop[i] && p->stop_len[i] <= SRV_MAX_STOP_LEN &&
              strlen(p->stop[i]) == p->stop_len[i]);
    for (int i = 0; i < p->n_prompts; i++) {
        CHECK(p->prompt_lens[i] >= 1 && p->prompt_lens[i] <= CTX);
        for (int32_t k = 0; k < p->prompt_lens[i]; k++)
            CHECK(p->prompts[i][k] >= 0 && p->prompts[i][k] < VOCAB);
    }
    for (int c = 0; c < p->n_prompts * p->n; c++) {
        struct eng_req er;
        srv_comp_req_init(p, c, 42, &er);
        CHECK(er.prompt == p->prompts[c / p->n] && er.n_prompt == p->prompt_lens[c / p->n]);
    }
}

/* previous_response_id: one stored conversation, "resp_a" */
static const char *stored_conv(void *ctx, const char *id)
{
    (void)ctx;
    return strcmp(id, "resp_a") ? NULL : "[{\"role\":\"user\",\"content\":\"hi\"}]";
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned op = data[0] & 3, tmpl = (data[0] >> 2) & 15;
    void *tok_ctx = (data[0] & 64) ? (void *)1 : NULL;
    if (tmpl > CHAT_TMPL_DEEPSEEK3)
        tmpl = CHAT_TMPL_CHATML;
    /* the body as the HTTP layer hands it up: a NUL-terminated copy */
    size_t n = size - 1;
    char *body = malloc(n + 1);
    CHECK(body);
    memcpy(body, data + 1, n);
    body[n] = 0;
    struct eng_model_info mi = {.name = "fuzz-model",
                                .kind = "fuzz",
                                .n_vocab = VOCAB,
                                .ctx_len = CTX,
                                .eos_id = 2,
                                .has_tokenizer = tok_ctx != NULL,
                                .n_embd = EMBD,
                                .n_cls = 2,
                                .rerank_tmpl =
                                    (data[0] & 4) ? "<q>{query}</q>{document}{query}" : NULL};
    struct srv_api_error e;
    memset(&e, 0, sizeof(e));
    bool nul = has_nul(body, n);
    int rc;
    const bool b7 = data[0] & 128;
    if (op == 2 && b7 && (data[0] & 8)) { /* an OpenAI Responses body */
        struct srv_comp_params p;
        rc = srv_responses_parse(body, n, &mi, (int)tmpl, tokenize, tok_ctx, stored_conv, NULL,
                                 data[0] & 4, &p, &e);
        if (!rc) {
            CHECK(p.responses && p.chat && p.n == 1 && p.resp && p.resp->echo && p.resp->conv);
            CHECK(p.resp->store == false || (data[0] & 4));
            check_params(&p);
            cJSON *conv = cJSON_Parse(p.resp->conv); /* what the store keeps */
            CHECK(cJSON_IsArray(conv));
            cJSON_Delete(conv);
            size_t el = strlen(p.resp->echo); /* the object's members */
            char *obj = malloc(el + 3);
            CHECK(obj);
            snprintf(obj, el + 3, "{%s}", p.resp->echo);
            cJSON *echo = cJSON_Parse(obj);
            CHECK(cJSON_IsObject(echo));
            cJSON_Delete(echo);
            free(obj);
        }
        srv_comp_params_free(&p);
    } else if (op >= 2 && b7) { /* Anthropic's Messages body (3: count_tokens's) */
        struct srv_comp_params p;
        rc = srv_messages_parse(body, n, op == 3, &mi, (int)tmpl, tokenize, tok_ctx, &p, &e);
        if (!rc) {
            CHECK(p.messages && p.chat && p.n == 1);
            check_params(&p);
        }
        srv_comp_params_free(&p);
    } else if (op <= 1) {
        struct srv_comp_params p;
        rc = op == 1 && b7 && (data[0] & 8)
                 ? srv_score_parse(body, n, &mi, tokenize, tok_ctx, &p, &e)
             : op == 1 && b7 ? srv_rerank_parse(body, n, &mi, tokenize, tok_ctx, &p, &e)
             : op == 1       ? srv_chat_parse(body, n, &mi, (int)tmpl, tokenize, tok_ctx, &p, &e)
             : b7 && (data[0] & 8) ? srv_classify_parse(body, n, &mi, tokenize, tok_ctx, &p, &e)
             : b7                  ? srv_embed_parse(body, n, &mi, tokenize, tok_ctx, &p, &e)
                                   : srv_comp_parse(body, n, &mi, tokenize, tok_ctx, &p, &e);
        if (!rc)
            check_params(&p);
        srv_comp_params_free(&p);
    } else if (op == 2) {
        struct srv_tok_params tp = {0};
        rc = srv_tokenize_parse(body, n, &mi, &tp, &e);
        if (!rc && tp.chat) { /* vLLM's chat form: the route parses it as a chat body */
            CHECK(!tp.text);
            struct srv_comp_params p;
            rc = srv_chat_parse(body, n, &mi, (int)tmpl, tokenize, tok_ctx, &p, &e);
            if (!rc)
                check_params(&p);
            srv_comp_params_free(&p);
        } else if (!rc)
            CHECK(tp.text && folio_utf8_valid(tp.text, strlen(tp.text)));
        folio_free(tp.text);
    } else {
        int32_t *ids = NULL, k = 0;
        struct srv_tok_params tp = {0};
        rc = srv_detokenize_parse(body, n, &mi, &ids, &k, &tp, &e);
        folio_free(tp.text);
        if (!rc)
            for (int32_t i = 0; i < k; i++)
                CHECK(ids[i] >= 0 && ids[i] < VOCAB);
        folio_free(ids);
    }
    if (rc)
        check_error(&e);
    else
        CHECK(!nul);
    free(body);
    return 0;
}
