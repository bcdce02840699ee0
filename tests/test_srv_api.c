/*
 * tests/test_srv_api.c — /v1/completions validation: a full valid body
 * sets every field; each of many bad bodies is refused with status 400 (or
 * 404 for an unknown model) and the right `param`; prompts longer than the
 * context; text prompts with and without a tokenizer; error objects are
 * valid JSON with message/type/param/code; the UTF-8 validator agrees with
 * a table of well-formed and ill-formed sequences.  Echo / logprobs
 * fields of completions.  Chat: a conversation renders to the exact ChatML
 * (and Llama-3) text and is tokenized with special tokens on; bad
 * messages, roles, content types and a missing template are 400s naming
 * `messages`; chat-only fields (max_completion_tokens) and the default
 * max_tokens (the rest of the context); add_generation_prompt and
 * continue_final_message (the text cut after the final message, trimmed
 * as a template trims it).  Embeddings: each input form, the
 * generation every input runs (one unseen greedy token), its fields, bad
 * bodies naming `input` and the field, inputs past the context (refused,
 * or cut to their last tokens by truncate_prompt_tokens).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "api.h"
#include "folio/chat.h"
#include "folio/common.h"
#include "tools.h"

static const struct eng_model_info mi = {
    .name = "m", .n_vocab = 100, .ctx_len = 64, .eos_id = 2, .has_tokenizer = false, .n_embd = 16};

static int parse(const char *body, struct srv_comp_params *p, struct srv_api_error *e)
{
    memset(e, 0, sizeof(*e));
    return srv_comp_parse(body, strlen(body), &mi, NULL, NULL, p, e);
}

static void test_valid_full(void **state)
{
    (void)state;
    struct srv_comp_params p;
    struct srv_api_error e;
    const char *body = "{\"model\":\"m\",\"prompt\":[1,2,3],\"max_tokens\":10,\"temperature\":0.5,"
                       "\"top_p\":0.9,\"top_k\":40,\"seed\":42,\"n\":3,\"stop\":[\"ab\",\"\\n\"],"
                       "\"ignore_eos\":true,\"logit_bias\":{\"7\":-100,\"9\":2.5},\"stream\":true,"
                       "\"stream_options\":{\"include_usage\":true},\"user\":\"u\",\"echo\":false,"
                       "\"logprobs\":null,\"presence_penalty\":0}";
    assert_int_equal(parse(body, &p, &e), 0);
    assert_int_equal(p.n_prompts, 1);
    assert_int_equal(p.prompt_lens[0], 3);
    assert_int_equal(p.prompts[0][2], 3);
    assert_int_equal(p.gen.max_tokens, 10);
    assert_true(p.gen.sp.temperature == 0.5f);
    assert_true(p.gen.sp.top_p == 0.9f);
    assert_int_equal(p.gen.sp.top_k, 40);
    assert_true(p.has_seed);
    assert_int_equal(p.gen.sp.seed, 42);
    assert_int_equal(p.n, 3);
    assert_int_equal(p.n_stop, 2);
    assert_string_equal(p.stop[1], "\n");
    assert_true(p.gen.ignore_eos && p.stream && p.include_usage);
    assert_int_equal(p.gen.sp.n_bias, 2);
    assert_int_equal(p.bias[0].token, 7);
    assert_true(p.bias[0].bias == -100.0f);
    srv_comp_params_free(&p);
}

static void test_defaults_and_lists(void **state)
{
    (void)state;
    struct srv_comp_params p;
    struct srv_api_error e;
    assert_int_equal(parse("{\"prompt\":[5]}", &p, &e), 0);
    assert_int_equal(p.gen.max_tokens, 16);
    assert_true(p.gen.sp.temperature == 1.0f);
    assert_int_equal(p.n, 1);
    assert_false(p.stream);
    assert_false(p.has_seed);
    srv_comp_params_free(&p);
    assert_int_equal(parse("{\"prompt\":[[1,2],[3,4,5]],\"stop\":\"x\"}", &p, &e), 0);
    assert_int_equal(p.n_prompts, 2);
    assert_int_equal(p.prompt_lens[1], 3);
    assert_int_equal(p.n_stop, 1);
    srv_comp_params_free(&p);
    /* whitespace after the value is fine */
    assert_int_equal(parse("{\"prompt\":[5]} \r\n", &p, &e), 0);
    srv_comp_params_free(&p);
}

static void test_bad_bodies(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        int status;
        const char *param; /* NULL: none */
    } bad[] = {
        {"", 400, NULL},
        {"{", 400, NULL},
        {"[]", 400, NULL},
        {"null", 400, NULL},
        {"{\"prompt\":[1]} x", 400, NULL},
        {"{}", 400, "prompt"},
        {"{\"prompt\":[]}", 400, "prompt"},
        {"{\"prompt\":5}", 400, "prompt"},
        {"{\"prompt\":[1,\"a\"]}", 400, "prompt"},
        {"{\"prompt\":[1.5]}", 400, "prompt"},
        {"{\"prompt\":[-1]}", 400, "prompt"},
        {"{\"prompt\":[100]}", 400, "prompt"},
        {"{\"prompt\":[[1],5]}", 400, "prompt"},
        {"{\"prompt\":[1],\"max_tokens\":0}", 400, "max_tokens"},
        {"{\"prompt\":[1],\"max_tokens\":-1}", 400, "max_tokens"},
        {"{\"prompt\":[1],\"max_tokens\":1e300}", 400, "max_tokens"},
        {"{\"prompt\":[1],\"max_tokens\":2.5}", 400, "max_tokens"},
        {"{\"prompt\":[1],\"max_tokens\":\"3\"}", 400, "max_tokens"},
        {"{\"prompt\":[1],\"temperature\":-0.1}", 400, "temperature"},
        {"{\"prompt\":[1],\"temperature\":true}", 400, "temperature"},
        {"{\"prompt\":[1],\"top_p\":0}", 400, "top_p"},
        {"{\"prompt\":[1],\"top_p\":1.01}", 400, "top_p"},
        {"{\"prompt\":[1],\"top_k\":-2}", 400, "top_k"},
        {"{\"prompt\":[1],\"seed\":1e20}", 400, "seed"},
        {"{\"prompt\":[1],\"seed\":0.5}", 400, "seed"},
        {"{\"prompt\":[1],\"n\":0}", 400, "n"},
        {"{\"prompt\":[1],\"n\":17}", 400, "n"},
        {"{\"prompt\":[1],\"stop\":3}", 400, "stop"},
        {"{\"prompt\":[1],\"stop\":[\"\"]}", 400, "stop"},
        {"{\"prompt\":[1],\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", 400, "stop"},
        {"{\"prompt\":[1],\"stop\":[1]}", 400, "stop"},
        {"{\"prompt\":[1],\"ignore_eos\":1}", 400, "ignore_eos"},
        {"{\"prompt\":[1],\"stream\":\"yes\"}", 400, "stream"},
        {"{\"prompt\":[1],\"stream_options\":{\"include_usage\":true}}", 400, "stream_options"},
        {"{\"prompt\":[1],\"stream\":true,\"stream_options\":3}", 400, "stream_options"},
        {"{\"prompt\":[1],\"logit_bias\":[1]}", 400, "logit_bias"},
        {"{\"prompt\":[1],\"logit_bias\":{\"a\":1}}", 400, "logit_bias"},
        {"{\"prompt\":[1],\"logit_bias\":{\"100\":1}}", 400, "logit_bias"},
        {"{\"prompt\":[1],\"logit_bias\":{\"5\":101}}", 400, "logit_bias"},
        {"{\"prompt\":[1],\"echo\":1}", 400, "echo"},
        {"{\"prompt\":[1],\"logprobs\":21}", 400, "logprobs"},
        {"{\"prompt\":[1],\"logprobs\":true}", 400, "logprobs"},
        {"{\"prompt\":[1],\"best_of\":2}", 400, "best_of"},
        {"{\"prompt\":[1],\"min_p\":1.5}", 400, "min_p"},
        {"{\"prompt\":[1],\"typical_p\":0}", 400, "typical_p"},
        {"{\"prompt\":[1],\"presence_penalty\":3}", 400, "presence_penalty"},
        {"{\"prompt\":[1],\"frequency_penalty\":\"1\"}", 400, "frequency_penalty"},
        {"{\"prompt\":[1],\"repetition_penalty\":0}", 400, "repetition_penalty"},
        {"{\"prompt\":[1],\"repeat_last_n\":-2}", 400, "repeat_last_n"},
        {"{\"prompt\":[1],\"stop_token_ids\":[100]}", 400, "stop_token_ids"},
        {"{\"prompt\":[1],\"stop_token_ids\":5}", 400, "stop_token_ids"},
        {"{\"prompt\":[1],\"min_tokens\":20}", 400, "min_tokens"},
        {"{\"prompt\":[1],\"priority\":1e7}", 400, "priority"},
        {"{\"prompt\":[1],\"response_format\":{\"type\":\"json_object\"}}", 400, "response_format"},
        {"{\"prompt\":[1],\"use_beam_search\":true}", 400, "use_beam_search"},
        {"{\"prompt\":[1],\"skip_special_tokens\":false}", 400, "skip_special_tokens"},
        {"{\"prompt\":[1],\"mirostat\":2}", 400, "mirostat"},
        {"{\"prompt\":[1],\"user\":5}", 400, "user"},
        {"{\"prompt\":[1],\"model\":5}", 400, "model"},
        {"{\"prompt\":[1],\"model\":\"other\"}", 404, "model"},
        {"{\"prompt\":[1],\"max_tokens\":64}", 400, "max_tokens"},
        {"{\"prompt\":\"hello\"}", 400, "prompt"},
        {"{\"prompt\":[\"hello\"]}", 400, "prompt"},
        {"{\"prompt\":[1],\"n\":16,\"prompt\":[[1],[2],[3],[4],[5]]}", 400,
         "prompt"}, /* given twice */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct srv_comp_params p;
        struct srv_api_error e;
        int rc = parse(bad[i].body, &p, &e);
        if (rc != -EINVAL || e.status != bad[i].status)
            fail_msg("body %zu '%s': rc %d status %d", i, bad[i].body, rc, e.status);
        if ((bad[i].param == NULL) != (e.param == NULL) ||
            (bad[i].param && strcmp(bad[i].param, e.param)))
            fail_msg("body %zu '%s': param %s want %s", i, bad[i].body,
                     e.param ? e.param : "(null)", bad[i].param ? bad[i].param : "(null)");
        assert_true(strlen(e.message) > 0);
        srv_comp_params_free(&p);
    }
}

static void test_context_and_utf8_body(void **state)
{
    (void)state;
    struct srv_comp_params p;
    struct srv_api_error e;
    char body[1024] = "{\"prompt\":[";
    for (int i = 0; i < 60; i++)
        strcat(body, i ? ",1" : "1");
    strcat(body, "],\"max_tokens\":5}");
    assert_int_equal(parse(body, &p, &e), -EINVAL);
    assert_string_equal(e.code, "context_length_exceeded");
    assert_non_null(strstr(e.message, "maximum context length is 64"));
    srv_comp_params_free(&p);
    const char bad_utf8[] = "{\"prompt\":[1],\"user\":\"\xff\xfe\"}";
    assert_int_equal(parse(bad_utf8, &p, &e), -EINVAL);
    assert_non_null(strstr(e.message, "UTF-8"));
    srv_comp_params_free(&p);
}

/* NUL in a JSON string (raw or \u0000) would cut the parser's C string
 * short: refused; an escaped backslash before "u0000" is plain text. */
static void test_nul_refused(void **state)
{
    (void)state;
    struct srv_comp_params p;
    struct srv_api_error e;
    const char *bad[] = {"{\"prompt\":[1],\"user\":\"a\\u0000b\"}",
                         "{\"prompt\":[1],\"stop\":[\"x\",\"\\\\\\u0000\"]}",
                         "{\"prompt\":[1],\"u\\u0000ser\":1}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(parse(bad[i], &p, &e), -EINVAL);
        assert_int_equal(e.status, 400);
        assert_non_null(strstr(e.message, "NUL"));
        srv_comp_params_free(&p);
    }
    const char raw[] = "{\"prompt\":[1],\"user\":\"a\0b\"}";
    assert_int_equal(srv_comp_parse(raw, sizeof(raw) - 1, &mi, NULL, NULL, &p, &e), -EINVAL);
    assert_non_null(strstr(e.message, "NUL"));
    srv_comp_params_free(&p);
    const char *fine = "{\"prompt\":[1],\"user\":\"a\\\\u0000b\"}";
    assert_int_equal(parse(fine, &p, &e), 0);
    srv_comp_params_free(&p);
    struct srv_tok_params tp = {0};
    const char *tb = "{\"prompt\":\"x\\u0000y\"}";
    assert_int_equal(srv_tokenize_parse(tb, strlen(tb), &mi, &tp, &e), -EINVAL);
    assert_non_null(strstr(e.message, "NUL"));
    assert_null(tp.text);
}

static bool last_special;

static int fake_tok(void *ctx, const char *text, size_t n, bool special, int32_t **out,
                    int32_t *n_out)
{
    last_special = special;
    (void)ctx;
    *out = folio_malloc(n * sizeof(int32_t));
    if (!*out)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        (*out)[i] = (unsigned char)text[i] % 100;
    *n_out = (int32_t)n;
    return 0;
}

static int embed(const char *body, struct srv_comp_params *p, struct srv_api_error *e)
{
    memset(e, 0, sizeof(*e));
    return srv_embed_parse(body, strlen(body), &mi, fake_tok, NULL, p, e);
}

static int classify(const char *body, struct srv_comp_params *p, struct srv_api_error *e)
{
    memset(e, 0, sizeof(*e));
    return srv_classify_parse(body, strlen(body), &mi, fake_tok, NULL, p, e);
}

static void test_text_prompt_with_tokenizer(void **state)
{
    (void)state;
    struct srv_comp_params p;
    struct srv_api_error e;
    const char *b = "{\"prompt\":[\"ab\",\"cde\"]}";
    assert_int_equal(srv_comp_parse(b, strlen(b), &mi, fake_tok, NULL, &p, &e), 0);
    assert_int_equal(p.n_prompts, 2);
    assert_int_equal(p.prompt_lens[1], 3);
    assert_int_equal(p.prompts[0][0], 'a' % 100);
    srv_comp_params_free(&p);
}

static void test_echo_logprobs(void **state)
{
    (void)state;
    struct srv_comp_params p;
    struct srv_api_error e;
    const char *b = "{\"prompt\":\"ab\",\"echo\":true,\"logprobs\":5}";
    assert_int_equal(srv_comp_parse(b, strlen(b), &mi, fake_tok, NULL, &p, &e), 0);
    assert_true(p.echo);
    assert_int_equal(p.gen.n_logprobs, 5);
    assert_false(last_special);
    assert_string_equal(p.prompt_text[0], "ab");
    srv_comp_params_free(&p);
    b = "{\"prompt\":[1,2]}";
    assert_int_equal(srv_comp_parse(b, strlen(b), &mi, fake_tok, NULL, &p, &e), 0);
    assert_false(p.echo);
    assert_int_equal(p.gen.n_logprobs, -1);
    assert_int_equal(p.gen.n_prompt_logprobs, -1);
    assert_null(p.prompt_text[0]);
    srv_comp_params_free(&p);
    /* the prompt's logprobs: echo + logprobs, or prompt_logprobs (the
     * larger top-N), never with stream */
    static const struct {
        const char *body;
        int32_t want; /* gen.n_prompt_logprobs; -2: a 400 */
    } pl[] = {{"{\"prompt\":[1,2],\"echo\":true,\"logprobs\":5}", 5},
              {"{\"prompt\":[1,2],\"echo\":true}", -1},
              {"{\"prompt\":[1,2],\"logprobs\":5}", -1},
              {"{\"prompt\":[1,2],\"prompt_logprobs\":0}", 0},
              {"{\"prompt\":[1,2],\"prompt_logprobs\":null}", -1},
              {"{\"prompt\":[1,2],\"echo\":true,\"logprobs\":2,\"prompt_logprobs\":4}", 4},
              {"{\"prompt\":[1,2],\"echo\":true,\"logprobs\":2,\"stream\":true}", 2},
              {"{\"prompt\":[1,2],\"prompt_logprobs\":1,\"stream\":true}", -2},
              {"{\"prompt\":[1,2],\"prompt_logprobs\":21}", -2},
              {"{\"prompt\":[1,2],\"prompt_logprobs\":-1}", -2}};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(pl); i++) {
        int rc = srv_comp_parse(pl[i].body, strlen(pl[i].body), &mi, fake_tok, NULL, &p, &e);
        if (pl[i].want == -2) {
            if (rc != -EINVAL || e.status != 400)
                fail_msg("%s: rc %d status %d, want a 400", pl[i].body, rc, e.status);
            srv_comp_params_free(&p); /* the caller frees after an error too */
            continue;
        }
        if (rc || p.gen.n_prompt_logprobs != pl[i].want)
            fail_msg("%s: rc %d n_prompt_logprobs %d want %d", pl[i].body, rc,
                     p.gen.n_prompt_logprobs, pl[i].want);
        srv_comp_params_free(&p);
    }
}

/* a context that holds the rendered test conversations (1 token a byte) */
static const struct eng_model_info chat_mi = {
    .name = "m", .n_vocab = 100, .ctx_len = 160, .eos_id = 2, .has_tokenizer = true};

static int chat(const char *body, int tmpl, struct srv_comp_params *p, struct srv_api_error *e)
{
    memset(e, 0, sizeof(*e));
    last_special = false;
    return srv_chat_parse(body, strlen(body), &chat_mi, tmpl, fake_tok, NULL, p, e);
}

static int messages(const char *body, bool count, struct srv_comp_params *p,
                    struct srv_api_error *e)
{
    memset(e, 0, sizeof(*e));
    return srv_messages_parse(body, strlen(body), count, &chat_mi, CHAT_TMPL_CHATML, fake_tok, NULL,
                              p, e);
}

/* Responses bodies: a model with room for tool definitions (one token a
 * byte), and a store that knows one response. */
static const struct eng_model_info resp_mi = {.name = "m",
                                              .n_vocab = 100,
                                              .ctx_len = 4096,
                                              .eos_id = 2,
                                              .has_tokenizer = true,
                                              .constrained = true};

static const char *stored_conv(void *ctx, const char *id)
{
    (void)ctx;
    return strcmp(id, "resp_a") ? NULL
                                : "[{\"role\":\"user\",\"content\":\"first\"},{\"role\":"
                                  "\"assistant\",\"content\":\"answer\"}]";
}

static int responses(const char *body, struct srv_comp_params *p, struct srv_api_error *e)
{
    memset(e, 0, sizeof(*e));
    return srv_responses_parse(body, strlen(body), &resp_mi, CHAT_TMPL_CHATML, fake_tok, NULL,
                               stored_conv, NULL, true, p, e);
}

/* OpenAI's Responses bodies parse as the chat bodies they mean (the same
 * rendered prompt, engine fields, grammar); the response repeats the
 * request's settings (echo) and the store gets the conversation without
 * instructions; what is not text or function tools is refused naming the
 * Responses field. */
static void test_responses_bodies(void **state)
{
    (void)state;
    static const struct {
        const char *resp, *chat, *conv, *echo_has;
    } same[] = {
        {"{\"model\":\"m\",\"input\":\"hi\",\"instructions\":\"S\",\"max_output_tokens\":5,"
         "\"temperature\":0.5,\"top_p\":0.9,\"stream\":true,\"metadata\":{\"k\":\"v\"},"
         "\"store\":false,\"truncation\":\"disabled\",\"service_tier\":\"auto\"}",
         "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"system\",\"content\":\"S\"},"
         "{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0.5,\"top_p\":0.9,"
         "\"stream\":true}",
         "[{\"role\":\"user\",\"content\":\"hi\"}]",
         "\"instructions\":\"S\",\"max_output_tokens\":5,\"metadata\":{\"k\":\"v\"},"
         "\"parallel_tool_calls\":true,\"previous_response_id\":null,\"reasoning\":{\"effort\":"
         "null,\"summary\":null},\"store\":false,\"temperature\":0.5,\"text\":{\"format\":{"
         "\"type\":\"text\"}},\"tool_choice\":\"auto\",\"tools\":[],\"top_logprobs\":0,\"top_p\":0."
         "9,"
         "\"truncation\":\"disabled\",\"user\":null"},
        /* items: text parts joined, roles kept, a function call attached to
         * the assistant message before it, its output a tool message; the
         * function tools re-shaped */
        {"{\"input\":[{\"role\":\"developer\",\"content\":\"D\"},{\"type\":\"message\",\"role\":"
         "\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"he\"},{\"type\":"
         "\"input_text\",\"text\":\"llo\"}]},{\"type\":\"message\",\"id\":\"msg_1\",\"status\":"
         "\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":"
         "\"ok\",\"annotations\":[]}]},{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":"
         "\"c1\",\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"},{\"type\":"
         "\"function_call_output\",\"call_id\":\"c1\",\"output\":\"42\"}],\"tools\":[{\"type\":"
         "\"function\",\"name\":\"f\",\"description\":\"F\",\"parameters\":{\"type\":\"object\","
         "\"properties\":{\"a\":{\"type\":\"integer\"}}}}],\"tool_choice\":\"auto\","
         "\"parallel_tool_calls\":false}",
         "{\"messages\":[{\"role\":\"developer\",\"content\":\"D\"},{\"role\":\"user\",\"content\":"
         "\"hello\"},{\"role\":\"assistant\",\"content\":\"ok\",\"tool_calls\":[{\"id\":\"c1\","
         "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]},"
         "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"}],\"tools\":[{\"type\":"
         "\"function\",\"function\":{\"name\":\"f\",\"description\":\"F\",\"parameters\":{"
         "\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}}}],\"tool_choice\":"
         "\"auto\",\"parallel_tool_calls\":false}",
         NULL, "\"parallel_tool_calls\":false,"},
        /* text.format json_schema -> response_format; previous_response_id:
         * the stored conversation first, the instructions not carried */
        {"{\"input\":\"more\",\"previous_response_id\":\"resp_a\",\"include\":[\"message."
         "output_text.logprobs\"],\"top_logprobs\":2,\"text\":{\"format\":{"
         "\"type\":\"json_schema\",\"name\":\"x\",\"schema\":{\"type\":\"object\"},\"strict\":"
         "true}}}",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"first\"},{\"role\":\"assistant\","
         "\"content\":\"answer\"},{\"role\":\"user\",\"content\":\"more\"}],\"logprobs\":true,"
         "\"top_logprobs\":2,\"response_format\":{"
         "\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\",\"schema\":{\"type\":"
         "\"object\"},\"strict\":true}}}",
         "[{\"role\":\"user\",\"content\":\"first\"},{\"role\":\"assistant\",\"content\":"
         "\"answer\"},{\"role\":\"user\",\"content\":\"more\"}]",
         "\"previous_response_id\":\"resp_a\""},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(same); i++) {
        struct srv_comp_params pr, pc;
        struct srv_api_error e;
        if (responses(same[i].resp, &pr, &e))
            fail_msg("case %zu: %s", i, e.message);
        memset(&e, 0, sizeof(e));
        if (srv_chat_parse(same[i].chat, strlen(same[i].chat), &resp_mi, CHAT_TMPL_CHATML, fake_tok,
                           NULL, &pc, &e))
            fail_msg("case %zu chat: %s", i, e.message);
        assert_true(pr.responses && pr.chat && pr.resp && !pc.responses);
        assert_string_equal(pr.prompt_text[0], pc.prompt_text[0]);
        assert_int_equal(pr.prompt_lens[0], pc.prompt_lens[0]);
        assert_int_equal(pr.gen.max_tokens, pc.gen.max_tokens);
        assert_true(pr.gen.sp.temperature == pc.gen.sp.temperature);
        assert_true(pr.gen.sp.top_p == pc.gen.sp.top_p);
        assert_int_equal(pr.stream, pc.stream);
        assert_int_equal(!pr.gen.grammar, !pc.gen.grammar);
        assert_int_equal(pr.chat_logprobs, pc.chat_logprobs);
        assert_int_equal(pr.gen.n_logprobs, pc.gen.n_logprobs);
        assert_int_equal(pr.chat_logprobs, i == 2);
        assert_int_equal(pr.n_unknown, 0);
        if (same[i].conv)
            assert_string_equal(pr.resp->conv, same[i].conv);
        assert_non_null(pr.resp->input);
        if (!strstr(pr.resp->echo, same[i].echo_has))
            fail_msg("case %zu: echo %s lacks %s", i, pr.resp->echo, same[i].echo_has);
        assert_int_equal(pr.resp->store, i != 0);
        srv_comp_params_free(&pr);
        srv_comp_params_free(&pc);
    }

    struct srv_comp_params p;
    struct srv_api_error e;
    /* the input as input_items lists it: a message's parts joined, calls and
     * outputs as given, no ids */
    assert_int_equal(responses("{\"input\":[{\"role\":\"assistant\",\"content\":[{\"type\":"
                               "\"output_text\",\"text\":\"o\"},{\"type\":\"output_text\","
                               "\"text\":\"k\"}]},{\"type\":\"function_call_output\",\"call_id\":"
                               "\"c\",\"output\":[{\"type\":\"input_text\",\"text\":\"1\"}]}]}",
                               &p, &e),
                     0);
    assert_string_equal(p.resp->input,
                        "[{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":"
                        "\"output_text\",\"text\":\"ok\"}],\"status\":\"completed\"},{\"type\":"
                        "\"function_call_output\",\"call_id\":\"c\",\"output\":\"1\",\"status\":"
                        "\"completed\"}]");
    srv_comp_params_free(&p);
    assert_int_equal(responses("{\"input\":\"hi\"}", &p, &e), 0);
    assert_string_equal(p.resp->input, "[{\"type\":\"message\",\"role\":\"user\",\"content\":[{"
                                       "\"type\":\"input_text\",\"text\":\"hi\"}],\"status\":"
                                       "\"completed\"}]");
    srv_comp_params_free(&p);

    /* a server without a store keeps nothing, whatever store says */
    memset(&e, 0, sizeof(e));
    const char *nostore = "{\"input\":\"a\",\"store\":true,\"other\":1}";
    assert_int_equal(srv_responses_parse(nostore, strlen(nostore), &resp_mi, CHAT_TMPL_CHATML,
                                         fake_tok, NULL, stored_conv, NULL, false, &p, &e),
                     0);
    assert_false(p.resp->store);
    assert_non_null(strstr(p.resp->echo, "\"store\":false"));
    assert_int_equal(p.n_unknown, 1);
    assert_string_equal(p.unknown, "other");
    srv_comp_params_free(&p);
    /* ... nor runs one in the background (it could not be fetched) */
    const char *bg_nostore = "{\"input\":\"a\",\"background\":true}";
    assert_int_equal(srv_responses_parse(bg_nostore, strlen(bg_nostore), &resp_mi, CHAT_TMPL_CHATML,
                                         fake_tok, NULL, stored_conv, NULL, false, &p, &e),
                     -EINVAL);
    assert_string_equal(e.param, "background");
    srv_comp_params_free(&p);

    /* background: a stored, unstreamed response, flagged */
    assert_int_equal(responses("{\"input\":\"a\",\"background\":true}", &p, &e), 0);
    assert_true(p.resp->background && p.resp->store && !p.stream);
    srv_comp_params_free(&p);
    assert_int_equal(responses("{\"input\":\"a\",\"background\":false}", &p, &e), 0);
    assert_false(p.resp->background);
    srv_comp_params_free(&p);

    /* top_logprobs alone asks for no logprobs (include does); text without
     * a format repeats the default one */
    assert_int_equal(
        responses("{\"input\":\"a\",\"top_logprobs\":3,\"text\":{\"verbosity\":\"low\"}}", &p, &e),
        0);
    assert_false(p.chat_logprobs);
    assert_non_null(strstr(p.resp->echo, "\"top_logprobs\":3"));
    assert_non_null(
        strstr(p.resp->echo, "\"text\":{\"verbosity\":\"low\",\"format\":{\"type\":\"text\"}}"));
    srv_comp_params_free(&p);

    static const struct {
        const char *body, *param;
        int status;
    } bad[] = {
        {"{\"max_output_tokens\":5}", "input", 400},
        {"{\"input\":[]}", "input", 400},
        {"{\"input\":7}", "input", 400},
        {"{\"input\":[{\"role\":\"tool\",\"content\":\"a\"}]}", "input", 400},
        {"{\"input\":[{\"role\":\"user\"}]}", "input", 400},
        {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":"
         "\"x\"}]}]}",
         "input", 400},
        {"{\"input\":[{\"type\":\"reasoning\",\"summary\":[]}]}", "input", 400},
        {"{\"input\":[{\"type\":\"function_call\",\"name\":\"f\"}]}", "input", 400},
        {"{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\"}]}", "input", 400},
        {"{\"input\":\"a\",\"tools\":[{\"type\":\"web_search\"}]}", "tools", 400},
        {"{\"input\":\"a\",\"tools\":[{\"type\":\"function\"}]}", "tools", 400},
        {"{\"input\":\"a\",\"tool_choice\":{\"type\":\"file_search\"}}", "tool_choice", 400},
        {"{\"input\":\"a\",\"text\":{\"format\":{\"type\":\"xml\"}}}", "text", 400},
        {"{\"input\":\"a\",\"background\":true,\"store\":false}", "background", 400},
        {"{\"input\":\"a\",\"background\":true,\"stream\":true}", "background", 400},
        {"{\"input\":\"a\",\"background\":1}", "background", 400},
        {"{\"input\":\"a\",\"conversation\":\"c\"}", "conversation", 400},
        {"{\"input\":\"a\",\"include\":[\"file_search_call.results\"]}", "include", 400},
        {"{\"input\":\"a\",\"top_logprobs\":21}", "top_logprobs", 400},
        {"{\"input\":\"a\",\"reasoning\":{\"effort\":\"high\"}}", "reasoning", 400},
        {"{\"input\":\"a\",\"instructions\":7}", "instructions", 400},
        {"{\"input\":\"a\",\"store\":\"yes\"}", "store", 400},
        {"{\"input\":\"a\",\"truncation\":\"middle\"}", "truncation", 400},
        {"{\"input\":\"a\",\"max_output_tokens\":0}", "max_output_tokens", 400},
        {"{\"input\":\"a\",\"previous_response_id\":\"resp_b\"}", "previous_response_id", 404},
        {"{\"input\":\"a\",\"model\":\"other\"}", "model", 404},
        {"{\"input\":\"a\",\"input\":\"b\"}", "input", 400},
        {"[1]", NULL, 400},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(bad); i++) {
        if (responses(bad[i].body, &p, &e) != -EINVAL)
            fail_msg("case %zu accepted: %s", i, bad[i].body);
        assert_int_equal(e.status, bad[i].status);
        if (bad[i].param && strcmp(e.param, bad[i].param))
            fail_msg("case %zu: param %s, want %s (%s)", i, e.param, bad[i].param, e.message);
        srv_comp_params_free(&p);
    }
    /* the chat field's name in the message is the Responses one */
    assert_int_equal(responses("{\"input\":\"a\",\"max_output_tokens\":0}", &p, &e), -EINVAL);
    assert_null(strstr(e.message, "'max_tokens'"));
    assert_non_null(strstr(e.message, "'max_output_tokens'"));
    srv_comp_params_free(&p);
}

/* Anthropic's Messages bodies parse as the chat bodies they mean: the
 * same rendered prompt and engine fields; what is not text is refused
 * naming the field. */
static void test_messages_bodies(void **state)
{
    (void)state;
    static const struct {
        const char *msg, *chat;
    } same[] = {
        {"{\"model\":\"m\",\"max_tokens\":5,\"system\":\"S\",\"messages\":[{\"role\":\"user\","
         "\"content\":\"hi\"}],\"temperature\":0.5,\"top_p\":0.9,\"top_k\":7,"
         "\"stop_sequences\":[\"x\",\"yz\"],\"stream\":true,\"metadata\":{\"user_id\":\"u\"}}",
         "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"system\",\"content\":\"S\"},"
         "{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0.5,\"top_p\":0.9,\"top_k\":7,"
         "\"stop\":[\"x\",\"yz\"],\"stream\":true}"},
        /* blocks joined (their other fields ignored), system as blocks */
        {"{\"max_tokens\":3,\"system\":[{\"type\":\"text\",\"text\":\"A\"},{\"type\":\"text\","
         "\"text\":\"B\",\"cache_control\":{\"type\":\"ephemeral\"}}],\"messages\":[{\"role\":"
         "\"user\",\"content\":[{\"type\":\"text\",\"text\":\"he\"},{\"type\":\"text\","
         "\"text\":\"llo\"}]},{\"role\":\"assistant\",\"content\":\"ok\"},{\"role\":\"user\","
         "\"content\":\"more\"}],\"thinking\":{\"type\":\"disabled\"},\"tools\":[]}",
         "{\"max_tokens\":3,\"messages\":[{\"role\":\"system\",\"content\":\"AB\"},{\"role\":"
         "\"user\",\"content\":\"hello\"},{\"role\":\"assistant\",\"content\":\"ok\"},"
         "{\"role\":\"user\",\"content\":\"more\"}]}"},
        /* a final assistant message is continued (prefill) */
        {"{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":"
         "\"assistant\",\"content\":\"The answer is\"}]}",
         "{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":"
         "\"assistant\",\"content\":\"The answer is\"}],\"continue_final_message\":true}"},
    };
    /* tools: an assistant's tool_use blocks its tool_calls, a user's
     * tool_result blocks tool messages before its text; tools and
     * tool_choice re-shaped (parsed on a model with room for them) */
    static const char *const tool_msg =
        "{\"max_tokens\":5,\"tools\":[{\"name\":\"f\",\"description\":\"F\",\"input_schema\":{"
        "\"type\":\"object\"}}],\"tool_choice\":{\"type\":\"auto\",\"disable_parallel_tool_use\":"
        "true},\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\","
        "\"content\":[{\"type\":\"text\",\"text\":\"ok\"},{\"type\":\"tool_use\",\"id\":\"t1\","
        "\"name\":\"f\",\"input\":{\"a\":1}}]},{\"role\":\"user\",\"content\":[{\"type\":"
        "\"tool_result\",\"tool_use_id\":\"t1\",\"content\":[{\"type\":\"text\",\"text\":\"42\"}]},"
        "{\"type\":\"tool_result\",\"tool_use_id\":\"t2\",\"content\":\"x\",\"is_error\":true},"
        "{\"type\":\"text\",\"text\":\"go on\"}]}]}";
    static const char *const tool_chat =
        "{\"max_tokens\":5,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
        "\"description\":\"F\",\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"auto\","
        "\"parallel_tool_calls\":false,\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{"
        "\"role\":\"assistant\",\"content\":\"ok\",\"tool_calls\":[{\"id\":\"t1\",\"type\":"
        "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]},{\"role\":"
        "\"tool\",\"tool_call_id\":\"t1\",\"content\":\"42\"},{\"role\":\"tool\",\"tool_call_id\":"
        "\"t2\",\"content\":\"Error: x\"},{\"role\":\"user\",\"content\":\"go on\"}]}";
    {
        struct srv_comp_params pm, pc;
        struct srv_api_error e = {0};
        if (srv_messages_parse(tool_msg, strlen(tool_msg), false, &resp_mi, CHAT_TMPL_CHATML,
                               fake_tok, NULL, &pm, &e))
            fail_msg("tools: %s", e.message);
        if (srv_chat_parse(tool_chat, strlen(tool_chat), &resp_mi, CHAT_TMPL_CHATML, fake_tok, NULL,
                           &pc, &e))
            fail_msg("tools chat: %s", e.message);
        assert_string_equal(pm.prompt_text[0], pc.prompt_text[0]);
        assert_non_null(pm.tools);
        assert_int_equal(pm.tools->n_tools, 1);
        assert_false(pm.tools->parallel);
        srv_comp_params_free(&pm);
        srv_comp_params_free(&pc);
    }
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(same); i++) {
        struct srv_comp_params pm, pc;
        struct srv_api_error e;
        if (messages(same[i].msg, false, &pm, &e))
            fail_msg("case %zu: %s", i, e.message);
        assert_int_equal(chat(same[i].chat, CHAT_TMPL_CHATML, &pc, &e), 0);
        assert_true(pm.messages && pm.chat && !pc.messages);
        assert_string_equal(pm.prompt_text[0], pc.prompt_text[0]);
        assert_int_equal(pm.prompt_lens[0], pc.prompt_lens[0]);
        assert_int_equal(pm.gen.max_tokens, pc.gen.max_tokens);
        assert_true(pm.gen.sp.temperature == pc.gen.sp.temperature);
        assert_true(pm.gen.sp.top_p == pc.gen.sp.top_p);
        assert_int_equal(pm.gen.sp.top_k, pc.gen.sp.top_k);
        assert_int_equal(pm.stream, pc.stream);
        assert_int_equal(pm.n_stop, pc.n_stop);
        for (int k = 0; k < pm.n_stop; k++)
            assert_string_equal(pm.stop[k], pc.stop[k]);
        assert_int_equal(pm.n_unknown, 0);
        srv_comp_params_free(&pm);
        srv_comp_params_free(&pc);
    }

    struct srv_comp_params p;
    struct srv_api_error e;
    /* count_tokens: no max_tokens; unknown fields are noted */
    assert_int_equal(messages("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                              "\"service_tier\":\"auto\"}",
                              true, &p, &e),
                     0);
    assert_int_equal(p.n_unknown, 1);
    assert_string_equal(p.unknown, "service_tier");
    srv_comp_params_free(&p);

    static const struct {
        const char *body, *param;
        int status;
    } bad[] = {
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", "max_tokens", 400},
        {"{\"max_tokens\":5}", "messages", 400},
        {"{\"max_tokens\":5,\"messages\":[]}", "messages", 400},
        {"{\"max_tokens\":5,\"messages\":[{\"role\":\"system\",\"content\":\"s\"}]}", "messages",
         400},
        {"{\"max_tokens\":5,\"messages\":[{\"role\":\"user\"}]}", "messages", 400},
        {"{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\","
         "\"source\":{}}]}]}",
         "messages", 400},
        {"{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}",
         "messages", 400},
        {"{\"max_tokens\":5,\"system\":7,\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}",
         "system", 400},
        {"{\"max_tokens\":5,\"tools\":[{\"name\":\"f\"}],\"messages\":[{\"role\":\"user\","
         "\"content\":\"a\"}]}",
         "tools", 400},
        {"{\"max_tokens\":5,\"tools\":[{\"type\":\"web_search_20250305\",\"name\":\"w\"}],"
         "\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}",
         "tools", 400},
        {"{\"max_tokens\":5,\"tool_choice\":{\"type\":\"tool\"},\"messages\":[{\"role\":"
         "\"user\",\"content\":\"a\"}]}",
         "tool_choice", 400},
        {"{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
         "\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}]}]}",
         "messages", 400},
        {"{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":"
         "\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\","
         "\"input\":[]}]},{\"role\":\"user\",\"content\":\"b\"}]}",
         "messages", 400},
        {"{\"max_tokens\":5,\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024},"
         "\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}",
         "thinking", 400},
        {"{\"max_tokens\":5,\"stop_sequences\":[\"a\",\"b\",\"c\",\"d\",\"e\"],\"messages\":[{"
         "\"role\":\"user\",\"content\":\"a\"}]}",
         "stop_sequences", 400},
        {"{\"max_tokens\":0,\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}", "max_tokens",
         400},
        {"{\"max_tokens\":5,\"model\":\"other\",\"messages\":[{\"role\":\"user\",\"content\":"
         "\"a\"}]}",
         "model", 404},
        {"[1]", NULL, 400},
        {"{\"max_tokens\":5,\"max_tokens\":6,\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}",
         "max_tokens", 400},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(bad); i++) {
        if (messages(bad[i].body, false, &p, &e) != -EINVAL)
            fail_msg("case %zu accepted: %s", i, bad[i].body);
        assert_int_equal(e.status, bad[i].status);
        if (bad[i].param)
            assert_string_equal(e.param, bad[i].param);
        srv_comp_params_free(&p);
    }
    /* Anthropic's error shape: the type from the status, the field named */
    struct folio_buf b = {0};
    srv_api_error_set(&e, 400, "invalid_request_error", "max_tokens", NULL,
                      "'max_tokens' is required");
    srv_api_error_json_anthropic(&b, &e);
    assert_string_equal(b.p, "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
                             "\"message\":\"max_tokens: 'max_tokens' is required\"}}");
    folio_buf_free(&b);
    srv_api_error_set(&e, 429, "rate_limit_error", NULL, "tenant_queue_full", "busy");
    srv_api_error_json_anthropic(&b, &e);
    assert_string_equal(b.p, "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\","
                             "\"message\":\"busy\"}}");
    folio_buf_free(&b);
}

static void test_chat_render(void **state)
{
    (void)state;
    struct srv_comp_params p;
    struct srv_api_error e;
    const char *b = "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"S\"},"
                    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"he\"},"
                    "{\"type\":\"text\",\"text\":\"llo\"}],\"name\":\"bob\"}],"
                    "\"max_completion_tokens\":3,\"seed\":1,\"stream\":true,"
                    "\"stream_options\":{\"include_usage\":true},\"logprobs\":false}";
    assert_int_equal(chat(b, CHAT_TMPL_CHATML, &p, &e), 0);
    const char *want = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n"
                       "<|im_start|>assistant\n";
    assert_true(p.chat);
    assert_int_equal(p.n_prompts, 1);
    assert_string_equal(p.prompt_text[0], want);
    assert_int_equal(p.prompt_lens[0], (int)strlen(want));
    assert_int_equal(p.prompts[0][0], '<' % 100);
    assert_true(last_special); /* chat markers are parsed as control tokens */
    assert_int_equal(p.gen.max_tokens, 3);
    assert_true(p.stream && p.include_usage && p.has_seed);
    srv_comp_params_free(&p);

    /* without max_tokens: the rest of the context */
    b = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";
    assert_int_equal(chat(b, CHAT_TMPL_LLAMA3, &p, &e), 0);
    assert_non_null(strstr(p.prompt_text[0], "<|start_header_id|>user<|end_header_id|>\n\nx"));
    assert_int_equal(p.gen.max_tokens, chat_mi.ctx_len - p.prompt_lens[0]);
    srv_comp_params_free(&p);

    /* add_generation_prompt (vLLM's): false leaves the assistant's header
     * off, null and true keep it; anything else is a 400 */
    b = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"add_generation_prompt\":false}";
    assert_int_equal(chat(b, CHAT_TMPL_CHATML, &p, &e), 0);
    assert_string_equal(p.prompt_text[0], "<|im_start|>user\nx<|im_end|>\n");
    srv_comp_params_free(&p);
    b = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"add_generation_prompt\":null}";
    assert_int_equal(chat(b, CHAT_TMPL_CHATML, &p, &e), 0);
    assert_string_equal(p.prompt_text[0], "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
    srv_comp_params_free(&p);
    b = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"add_generation_prompt\":1}";
    assert_int_equal(chat(b, CHAT_TMPL_CHATML, &p, &e), -EINVAL);
    assert_string_equal(e.param, "add_generation_prompt");
    srv_comp_params_free(&p);

    /* continue_final_message (vLLM's): the text stops inside the final
     * message (no end of turn, no generation prompt); with a template
     * that trims (Llama 3), after the trimmed text; refused with an
     * explicit add_generation_prompt true, or with nothing to continue */
    b = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\","
        "\"content\":\"Sure: x\"}],\"continue_final_message\":true}";
    assert_int_equal(chat(b, CHAT_TMPL_CHATML, &p, &e), 0);
    assert_string_equal(p.prompt_text[0],
                        "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\nSure: x");
    assert_int_equal(p.prompt_lens[0], (int)strlen(p.prompt_text[0]));
    srv_comp_params_free(&p);
    b = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\","
        "\"content\":\" x \"}],\"continue_final_message\":true,\"add_generation_prompt\":false}";
    assert_int_equal(chat(b, CHAT_TMPL_LLAMA3, &p, &e), 0);
    const char *t = p.prompt_text[0];
    const char *tail = "<|start_header_id|>assistant<|end_header_id|>\n\nx";
    assert_true(strlen(t) >= strlen(tail));
    assert_string_equal(t + strlen(t) - strlen(tail), tail);
    srv_comp_params_free(&p);
    static const char *const refused[] = {
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"continue_final_message\":true,"
        "\"add_generation_prompt\":true}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\","
        "\"content\":\" \"}],\"continue_final_message\":true}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"continue_final_message\":1}",
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(refused); i++) {
        assert_int_equal(chat(refused[i], CHAT_TMPL_CHATML, &p, &e), -EINVAL);
        assert_string_equal(e.param, "continue_final_message");
        srv_comp_params_free(&p);
    }
    srv_comp_params_free(&p);
}

static void test_chat_bad(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        const char *param;
    } bad[] = {
        {"{}", "messages"},
        {"{\"messages\":[]}", "messages"},
        {"{\"messages\":\"hi\"}", "messages"},
        {"{\"messages\":[\"hi\"]}", "messages"},
        {"{\"messages\":[{\"content\":\"hi\"}]}", "messages"},
        {"{\"messages\":[{\"role\":\"function\",\"content\":\"hi\"}]}", "messages"},
        {"{\"messages\":[{\"role\":5,\"content\":\"hi\"}]}", "messages"},
        {"{\"messages\":[{\"role\":\"user\"}]}", "messages"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", "messages"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}", "messages"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"tool_calls\":[]}]}", "messages"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"echo\":true}", "echo"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"top_logprobs\":21}",
         "top_logprobs"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"logprobs\":3}", "logprobs"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"max_completion_tokens\":0}",
         "max_completion_tokens"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"max_tokens\":150}", "max_tokens"},
        /* llama2 needs alternating turns */
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\","
         "\"content\":\"b\"}]}",
         "messages"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct srv_comp_params p;
        struct srv_api_error e;
        int tmpl = strstr(bad[i].body, "\"b\"") ? CHAT_TMPL_LLAMA2 : CHAT_TMPL_CHATML;
        int rc = chat(bad[i].body, tmpl, &p, &e);
        if (rc != -EINVAL)
            fprintf(stderr, "accepted: %s\n", bad[i].body);
        assert_int_equal(rc, -EINVAL);
        assert_int_equal(e.status, 400);
        if (bad[i].param)
            assert_string_equal(e.param, bad[i].param);
        else
            assert_null(e.param);
        srv_comp_params_free(&p);
    }
    /* no template: a clear message */
    struct srv_comp_params p;
    struct srv_api_error e;
    assert_int_equal(chat("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}", 0, &p, &e),
                     -EINVAL);
    assert_non_null(strstr(e.message, "--chat-template"));
    srv_comp_params_free(&p);
    /* no tokenizer */
    const char *b = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}";
    memset(&e, 0, sizeof(e));
    assert_int_equal(srv_chat_parse(b, strlen(b), &chat_mi, CHAT_TMPL_CHATML, NULL, NULL, &p, &e),
                     -EINVAL);
    assert_string_equal(e.param, "messages");
    srv_comp_params_free(&p);
    /* a conversation the template renders to nothing (Mistral folds the
     * system message into the first user turn, and there is none): a 400,
     * not an empty prompt */
    assert_int_equal(
        chat("{\"messages\":[{\"role\":\"system\",\"content\":\"s\"}]}", CHAT_TMPL_MISTRAL, &p, &e),
        -EINVAL);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.param, "messages");
    assert_non_null(strstr(e.message, "no tokens"));
    srv_comp_params_free(&p);
}

static void test_error_json(void **state)
{
    (void)state;
    struct srv_api_error e;
    srv_api_error_set(&e, 400, "invalid_request_error", "max_tokens", NULL, "bad \"x\"\n%d", 5);
    struct folio_buf b = {0};
    srv_api_error_json(&b, &e);
    cJSON *j = cJSON_Parse(b.p);
    assert_non_null(j);
    cJSON *err = cJSON_GetObjectItem(j, "error");
    assert_string_equal(cJSON_GetObjectItem(err, "message")->valuestring, "bad \"x\"\n5");
    assert_string_equal(cJSON_GetObjectItem(err, "type")->valuestring, "invalid_request_error");
    assert_string_equal(cJSON_GetObjectItem(err, "param")->valuestring, "max_tokens");
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(err, "code")));
    cJSON_Delete(j);
    folio_buf_free(&b);
    srv_api_error_set(&e, 429, "rate_limit_error", NULL, "tenant_queue_full", "full");
    srv_api_error_json(&b, &e);
    j = cJSON_Parse(b.p);
    err = cJSON_GetObjectItem(j, "error");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(err, "param")));
    assert_string_equal(cJSON_GetObjectItem(err, "code")->valuestring, "tenant_queue_full");
    cJSON_Delete(j);
    folio_buf_free(&b);
}

static void test_utf8_valid(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        bool ok;
    } t[] = {
        {"plain", true},
        {"\xc3\xa9", true},
        {"\xe2\x82\xac", true},
        {"\xf0\x9f\x98\x80", true},
        {"\xf4\x8f\xbf\xbf", true},
        {"\xc3", false},
        {"\xc0\x80", false},
        {"\xe0\x80\x80", false},
        {"\xed\xa0\x80", false},
        {"\xf4\x90\x80\x80", false},
        {"\xf5\x80\x80\x80", false},
        {"\x80", false},
        {"\xff", false},
        {"a\xe2\x82", false},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (folio_utf8_valid(t[i].s, strlen(t[i].s)) != t[i].ok)
            fail_msg("case %zu", i);
}

/* Every allocation failure inside parsing is an error, never a crash or a
 * leak (ASan checks the leaks). */
static void test_alloc_failures(void **state)
{
    (void)state;
    const char *body = "{\"prompt\":[[1,2],[3]],\"stop\":[\"a\",\"b\"],\"logit_bias\":{\"1\":1}}";
    for (long n = 1; n < 40; n++) {
        struct srv_comp_params p;
        struct srv_api_error e;
        folio_alloc_fail_at(n);
        int rc = srv_comp_parse(body, strlen(body), &mi, NULL, NULL, &p, &e);
        folio_alloc_fail_at(0);
        assert_true(rc == 0 || rc == -ENOMEM || rc == -EINVAL);
        srv_comp_params_free(&p);
    }
}

static void test_chat_alloc_failures(void **state)
{
    (void)state;
    const char *body = "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":"
                       "\"user\",\"content\":[{\"type\":\"text\",\"text\":\"u\"}]}]}";
    for (long n = 1; n < 40; n++) {
        struct srv_comp_params p;
        struct srv_api_error e;
        folio_alloc_fail_at(n);
        int rc =
            srv_chat_parse(body, strlen(body), &chat_mi, CHAT_TMPL_CHATML, fake_tok, NULL, &p, &e);
        folio_alloc_fail_at(0);
        assert_true(rc == 0 || rc == -ENOMEM);
        srv_comp_params_free(&p);
    }
}

static void test_tokenize_bodies(void **state)
{
    (void)state;
    struct srv_api_error e;
    struct srv_tok_params tp;
    int32_t *ids, n;
    const char *b = "{\"prompt\":\"x y\",\"model\":\"m\"}";
    assert_int_equal(srv_tokenize_parse(b, strlen(b), &mi, &tp, &e), 0);
    assert_string_equal(tp.text, "x y");
    assert_true(tp.add_special);
    assert_int_equal(tp.n_unknown, 0);
    folio_free(tp.text);
    /* llama-server's spelling and flag; vLLM's flag; unknown fields listed */
    b = "{\"content\":\"ab\",\"add_special\":false,\"with_pieces\":true}";
    assert_int_equal(srv_tokenize_parse(b, strlen(b), &mi, &tp, &e), 0);
    assert_string_equal(tp.text, "ab");
    assert_false(tp.add_special);
    assert_int_equal(tp.n_unknown, 1);
    assert_string_equal(tp.unknown, "with_pieces");
    folio_free(tp.text);
    b = "{\"prompt\":\"ab\",\"add_special_tokens\":false}";
    assert_int_equal(srv_tokenize_parse(b, strlen(b), &mi, &tp, &e), 0);
    assert_false(tp.add_special);
    folio_free(tp.text);
    /* vLLM's chat form: only flagged (the route parses it as a chat body) */
    b = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"model\":\"m\"}";
    assert_int_equal(srv_tokenize_parse(b, strlen(b), &mi, &tp, &e), 0);
    assert_true(tp.chat);
    assert_null(tp.text);
    const char *bad_tok[] = {"{}", "{\"prompt\":5}", "{\"content\":5}",
                             "[",  "\"s\"",          "{\"prompt\":\"a\",\"add_special\":1}"};
    for (size_t i = 0; i < sizeof(bad_tok) / sizeof(bad_tok[0]); i++) {
        assert_int_equal(srv_tokenize_parse(bad_tok[i], strlen(bad_tok[i]), &mi, &tp, &e), -EINVAL);
        assert_int_equal(e.status, 400);
        assert_null(tp.text);
    }
    b = "{\"tokens\":[1,2,99],\"add_special_tokens\":true,\"x\":1}";
    assert_int_equal(srv_detokenize_parse(b, strlen(b), &mi, &ids, &n, &tp, &e), 0);
    assert_int_equal(n, 3);
    assert_int_equal(ids[2], 99);
    assert_int_equal(tp.n_unknown, 1);
    folio_free(ids);
    const char *bad_det[] = {"{\"tokens\":[100]}", "{\"tokens\":[-1]}", "{\"tokens\":\"1\"}",
                             "{\"tokens\":[1.5]}", "{\"model\":\"x\",\"tokens\":[1]}"};
    for (size_t i = 0; i < sizeof(bad_det) / sizeof(bad_det[0]); i++) {
        assert_int_equal(
            srv_detokenize_parse(bad_det[i], strlen(bad_det[i]), &mi, &ids, &n, &tp, &e), -EINVAL);
        assert_true(e.status == 400 || e.status == 404);
        assert_null(ids);
    }
}

/* Fields the table does not know are listed, not refused; known ones of
 * other servers (llama-server's repeat_penalty, vLLM's stop_token_ids) land
 * where foliod's own do; chat logprobs map to the engine's top-N. */
static void test_unknown_and_foreign_fields(void **state)
{
    (void)state;
    struct srv_comp_params p;
    struct srv_api_error e;
    const char *b = "{\"prompt\":[1],\"store\":false,\"metadata\":{\"a\":1},\"cache_prompt\":true,"
                    "\"stream\":true,\"stream_options\":{\"include_usage\":true,\"x\":1},"
                    "\"repeat_penalty\":1.3,\"repeat_last_n\":-1,\"stop_token_ids\":[4,5],"
                    "\"min_tokens\":2,\"min_p\":0.1,\"typical_p\":0.5,\"priority\":-3,"
                    "\"frequency_penalty\":0.5,\"presence_penalty\":-1,\"max_completion_tokens\":9,"
                    "\"response_format\":{\"type\":\"text\"},\"skip_special_tokens\":true}";
    assert_int_equal(parse(b, &p, &e), 0);
    assert_int_equal(p.n_unknown, 4);
    assert_string_equal(p.unknown, "store,metadata,cache_prompt,stream_options.x");
    assert_true(p.gen.pen.repetition == 1.3f && p.gen.pen.repeat_last_n == -1);
    assert_true(p.gen.pen.frequency == 0.5f && p.gen.pen.presence == -1.0f);
    assert_true(p.gen.sp.min_p == 0.1f && p.gen.sp.typical_p == 0.5f);
    assert_int_equal(p.gen.n_stop_ids, 2);
    assert_int_equal(p.gen.stop_ids[1], 5);
    assert_int_equal(p.gen.min_tokens, 2);
    assert_int_equal(p.gen.priority, -3);
    assert_int_equal(p.gen.max_tokens, 9);
    assert_true(p.include_usage);
    struct eng_req er;
    srv_comp_req_init(&p, 0, 0, &er);
    assert_ptr_equal(er.g.stop_ids, p.stop_ids);
    srv_comp_params_free(&p);
    /* defaults: neutral */
    assert_int_equal(parse("{\"prompt\":[1]}", &p, &e), 0);
    assert_int_equal(p.n_unknown, 0);
    assert_true(p.gen.pen.repetition == 1 && p.gen.pen.presence == 0 && p.gen.pen.frequency == 0);
    assert_int_equal(p.gen.pen.repeat_last_n, 64);
    assert_true(p.gen.sp.min_p == 0 && p.gen.sp.typical_p == 1);
    assert_int_equal(p.gen.n_stop_ids, 0);
    srv_comp_params_free(&p);
    /* many unknown names: counted, the list truncated */
    char big[4096] = "{\"prompt\":[1]";
    for (int i = 0; i < 60; i++)
        snprintf(big + strlen(big), sizeof(big) - strlen(big), ",\"field_%02d\":1", i);
    strcat(big, "}");
    assert_int_equal(parse(big, &p, &e), 0);
    assert_int_equal(p.n_unknown, 60);
    assert_true(strlen(p.unknown) < SRV_UNKNOWN_CAP);
    srv_comp_params_free(&p);
    /* chat logprobs */
    const char *m = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
    char body[256];
    static const struct {
        const char *extra;
        int32_t want;
    } lp[] = {{"", -1},
              {",\"logprobs\":false", -1},
              {",\"logprobs\":true", 0},
              {",\"logprobs\":true,\"top_logprobs\":5", 5},
              {",\"top_logprobs\":3", 3},
              {",\"logprobs\":false,\"top_logprobs\":0", -1}};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(lp); i++) {
        snprintf(body, sizeof(body), "%s%s}", m, lp[i].extra);
        assert_int_equal(chat(body, CHAT_TMPL_CHATML, &p, &e), 0);
        if (p.gen.n_logprobs != lp[i].want)
            fail_msg("%s: n_logprobs %d want %d", body, p.gen.n_logprobs, lp[i].want);
        srv_comp_params_free(&p);
    }
}

static int rerank(const struct eng_model_info *m, const char *body, struct srv_comp_params *p,
                  struct srv_api_error *e);
static int score(const char *body, struct srv_comp_params *p, struct srv_api_error *e);

/* The request table, row by row: every typed field, sent with a
 * non-default value, lands in the engine request's struct eng_gen (which
 * the backend hands to the sampler and scheduler as is) with that value —
 * or, for the few the server itself consumes, in srv_comp_params. */
static void test_table_rows_reach_engine(void **state)
{
    (void)state;
    static const char *const server_side[] = {"n",
                                              "stream",
                                              "echo",
                                              "logprobs",
                                              "top_logprobs",
                                              "prompt_logprobs",
                                              "add_generation_prompt",
                                              "continue_final_message",
                                              "dimensions",
                                              "normalize",
                                              "embd_normalize",
                                              "truncate_prompt_tokens",
                                              "top_n",
                                              "return_documents",
                                              "return_text"};
    size_t n_fields;
    const struct srv_field *f = srv_fields(&n_fields);
    int checked = 0;
    for (size_t r = 0; r < n_fields; r++) {
        if (f[r].type != SRV_F_I32 && f[r].type != SRV_F_I64 && f[r].type != SRV_F_F32 &&
            f[r].type != SRV_F_BOOL)
            continue;
        size_t size = f[r].type == SRV_F_I64 ? 8 : f[r].type == SRV_F_BOOL ? 1 : 4;
        size_t g0 = offsetof(struct srv_comp_params, gen);
        bool in_gen = f[r].off >= g0 && f[r].off + size <= g0 + sizeof(struct eng_gen);
        bool server = false;
        for (size_t k = 0; k < FOLIO_ARRAY_LEN(server_side); k++)
            server |= !strcmp(f[r].name, server_side[k]);
        if (!in_gen && !server)
            fail_msg("row '%s' lands neither in eng_gen nor in a server-side field", f[r].name);
        char value[64];
        double v = 0;
        if (f[r].type == SRV_F_BOOL) { /* the other value than the default */
            snprintf(value, sizeof(value), "%s", f[r].def ? "false" : "true");
        } else {
            double hi = f[r].hi_from == SRV_HI_CTX     ? 64
                        : f[r].hi_from == SRV_HI_VOCAB ? 100
                        : f[r].hi_from == SRV_HI_EMBD  ? 16
                                                       : f[r].hi;
            const double cand[] = {f[r].lo, f[r].lo + 1, (f[r].lo + hi) / 2};
            bool found = false;
            for (size_t k = 0; k < 3 && !found; k++) {
                v = f[r].type == SRV_F_F32 ? cand[k] : floor(cand[k]);
                found = v <= hi && v >= f[r].lo && !(f[r].lo_open && v == f[r].lo) && v != f[r].def;
            }
            assert_true(found);
            snprintf(value, sizeof(value), "%.17g", v);
        }
        for (unsigned ep = SRV_EP_COMP; ep <= SRV_EP_CLASSIFY; ep <<= 1) {
            if (!(f[r].endpoints & ep))
                continue;
            const char *head = ep == SRV_EP_COMP                             ? "{\"prompt\":[1]"
                               : ep == SRV_EP_EMBED || ep == SRV_EP_CLASSIFY ? "{\"input\":[1]"
                               : ep == SRV_EP_RERANK ? "{\"query\":\"q\",\"documents\":[\"a\"]"
                               : ep == SRV_EP_SCORE
                                   ? "{\"text_1\":\"q\",\"text_2\":[\"a\"]"
                                   : "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
            char body[256], def_body[256];
            snprintf(def_body, sizeof(def_body), "%s}", head);
            snprintf(body, sizeof(body), "%s,\"%s\":%s}", head, f[r].name, value);
            struct srv_comp_params pd, pm;
            struct srv_api_error e;
            int rd = ep == SRV_EP_COMP       ? parse(def_body, &pd, &e)
                     : ep == SRV_EP_EMBED    ? embed(def_body, &pd, &e)
                     : ep == SRV_EP_CLASSIFY ? classify(def_body, &pd, &e)
                     : ep == SRV_EP_RERANK   ? rerank(&mi, def_body, &pd, &e)
                     : ep == SRV_EP_SCORE    ? score(def_body, &pd, &e)
                                             : chat(def_body, 1, &pd, &e);
            assert_int_equal(rd, 0);
            int rm = ep == SRV_EP_COMP       ? parse(body, &pm, &e)
                     : ep == SRV_EP_EMBED    ? embed(body, &pm, &e)
                     : ep == SRV_EP_CLASSIFY ? classify(body, &pm, &e)
                     : ep == SRV_EP_RERANK   ? rerank(&mi, body, &pm, &e)
                     : ep == SRV_EP_SCORE    ? score(body, &pm, &e)
                                             : chat(body, 1, &pm, &e);
            if (rm)
                fail_msg("%s: %s", body, e.message);
            struct eng_req ed = {0}, em = {0};
            srv_comp_req_init(&pd, 0, 0, &ed);
            srv_comp_req_init(&pm, 0, 0, &em);
            const char *a =
                in_gen ? (const char *)&ed.g + (f[r].off - g0) : (const char *)&pd + f[r].off;
            const char *b =
                in_gen ? (const char *)&em.g + (f[r].off - g0) : (const char *)&pm + f[r].off;
            if (!memcmp(a, b, size))
                fail_msg("%s did not reach the engine request", body);
            if (f[r].type == SRV_F_F32) {
                float x;
                memcpy(&x, b, 4);
                assert_true(x == (float)v);
            } else if (f[r].type == SRV_F_I32) {
                int32_t x;
                memcpy(&x, b, 4);
                assert_int_equal(x, (int32_t)v);
            } else if (f[r].type == SRV_F_I64) {
                int64_t x;
                memcpy(&x, b, 8);
                assert_true(x == (int64_t)v);
            } else
                assert_true(*b == (f[r].def == 0));
            srv_comp_params_free(&pd);
            srv_comp_params_free(&pm);
            checked++;
        }
    }
    assert_true(checked >= 12);
}

/* A tokenizer that puts a BOS (1) before the text's bytes (mod 100,
 * from 3 up), as the daemon's does. */
static int bos_tok(void *ctx, const char *text, size_t n, bool special, int32_t **out,
                   int32_t *n_out)
{
    (void)ctx;
    (void)special;
    *out = folio_malloc((n + 1) * sizeof(int32_t));
    if (!*out)
        return -ENOMEM;
    (*out)[0] = 1;
    for (size_t i = 0; i < n; i++)
        (*out)[i + 1] = 3 + (unsigned char)text[i] % 97;
    *n_out = (int32_t)n + 1;
    return 0;
}

static int rerank(const struct eng_model_info *m, const char *body, struct srv_comp_params *p,
                  struct srv_api_error *e)
{
    memset(e, 0, sizeof(*e));
    return srv_rerank_parse(body, strlen(body), m, bos_tok, NULL, p, e);
}

static int score(const char *body, struct srv_comp_params *p, struct srv_api_error *e)
{
    memset(e, 0, sizeof(*e));
    return srv_score_parse(body, strlen(body), &mi, bos_tok, NULL, p, e);
}

/* Each document's prompt is "the template, filled", bytes as bos_tok
 * gives them, without its BOS; or without a template BOS + query +
 * document. */
static void expect_prompt(const struct srv_comp_params *p, int i, const char *text, bool bos)
{
    const int32_t n = (int32_t)strlen(text);
    assert_int_equal(p->prompt_lens[i], n + bos);
    if (bos)
        assert_int_equal(p->prompts[i][0], 1);
    for (int32_t k = 0; k < n; k++)
        assert_int_equal(p->prompts[i][k + bos], 3 + (unsigned char)text[k] % 97);
}

static void test_rerank_bodies(void **state)
{
    (void)state;
    struct srv_comp_params p;
    struct srv_api_error e;
    struct eng_model_info tm = mi;
    tm.rerank_tmpl = "{query}{query}|{document}.{x}";
    const char *body = "{\"model\":\"m\",\"query\":\"ab\",\"documents\":[\"c\",{\"text\":\"de\"}],"
                       "\"top_n\":1,\"return_documents\":false,\"priority\":2}";
    assert_int_equal(rerank(&tm, body, &p, &e), 0);
    assert_true(p.rerank && p.embed && !p.rr.tei);
    assert_int_equal(p.n_prompts, 2);
    expect_prompt(&p, 0, "abab|c.{x}", false);
    expect_prompt(&p, 1, "abab|de.{x}", false);
    assert_string_equal(p.prompt_text[0], "c");
    assert_string_equal(p.prompt_text[1], "de");
    assert_string_equal(p.rr.query, "ab");
    assert_int_equal(p.rr.top_n, 1);
    assert_false(p.rr.return_documents);
    assert_int_equal(p.gen.priority, 2);
    assert_int_equal(p.n, 1);
    assert_int_equal(p.gen.max_tokens, 1);
    srv_comp_params_free(&p);

    /* no template: BOS + query + document; TEI's texts; defaults */
    body = "{\"query\":\"ab\",\"texts\":[\"c\",\"\"],\"return_text\":true}";
    assert_int_equal(rerank(&mi, body, &p, &e), 0);
    assert_true(p.rr.tei && p.rr.return_text && p.rr.return_documents);
    assert_int_equal(p.rr.top_n, 0);
    expect_prompt(&p, 0, "abc", true);
    expect_prompt(&p, 1, "ab", true);
    srv_comp_params_free(&p);

    /* truncate_prompt_tokens keeps the last tokens */
    body = "{\"query\":\"abcdef\",\"documents\":[\"g\"],\"truncate_prompt_tokens\":3}";
    assert_int_equal(rerank(&mi, body, &p, &e), 0);
    expect_prompt(&p, 0, "efg", false);
    srv_comp_params_free(&p);

    static const struct {
        const char *body, *param;
    } bad[] = {
        {"{\"documents\":[\"a\"]}", "query"},
        {"{\"query\":1,\"documents\":[\"a\"]}", "query"},
        {"{\"query\":\"q\"}", "documents"},
        {"{\"query\":\"q\",\"documents\":[]}", "documents"},
        {"{\"query\":\"q\",\"documents\":{\"text\":\"a\"}}", "documents"},
        {"{\"query\":\"q\",\"documents\":[{\"txt\":\"a\"}]}", "documents"},
        {"{\"query\":\"q\",\"texts\":[{\"text\":\"a\"}]}", "texts"},
        {"{\"query\":\"q\",\"documents\":[\"a\"],\"texts\":[\"b\"]}", "texts"},
        {"{\"query\":\"q\",\"documents\":[\"a\"],\"top_n\":2049}", "top_n"},
        {"{\"query\":\"q\",\"documents\":[\"a\"],\"return_documents\":1}", "return_documents"},
        {"{\"query\":\"\",\"documents\":[\"a\"],\"input\":\"x\"}", NULL}, /* input: unknown here */
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(bad); i++) {
        int rc = rerank(&mi, bad[i].body, &p, &e);
        if (!bad[i].param) {
            assert_int_equal(rc, 0);
            assert_int_equal(p.n_unknown, 1);
        } else {
            assert_int_equal(rc, -EINVAL);
            assert_int_equal(e.status, 400);
            assert_string_equal(e.param, bad[i].param);
        }
        srv_comp_params_free(&p);
    }
    /* /v1/score: one text_1 with each text_2, or pairs by index */
    body = "{\"text_1\":\"ab\",\"text_2\":[\"c\",\"d\"],\"priority\":1}";
    assert_int_equal(srv_score_parse(body, strlen(body), &mi, bos_tok, NULL, &p, &e), 0);
    assert_true(p.rr.score && p.rerank && p.embed);
    assert_int_equal(p.n_prompts, 2);
    expect_prompt(&p, 0, "abc", true);
    expect_prompt(&p, 1, "abd", true);
    srv_comp_params_free(&p);
    body = "{\"text_1\":[\"a\",\"bb\"],\"text_2\":[\"c\",\"d\"]}";
    assert_int_equal(srv_score_parse(body, strlen(body), &tm, bos_tok, NULL, &p, &e), 0);
    expect_prompt(&p, 0, "aa|c.{x}", false);
    expect_prompt(&p, 1, "bbbb|d.{x}", false);
    srv_comp_params_free(&p);
    body = "{\"text_1\":\"q\",\"text_2\":\"only\"}";
    assert_int_equal(srv_score_parse(body, strlen(body), &mi, bos_tok, NULL, &p, &e), 0);
    expect_prompt(&p, 0, "qonly", true);
    srv_comp_params_free(&p);
    static const struct {
        const char *body, *param;
    } bad_score[] = {
        {"{\"text_2\":[\"a\"]}", "text_1"},
        {"{\"text_1\":\"q\"}", "text_2"},
        {"{\"text_1\":[],\"text_2\":[\"a\"]}", "text_1"},
        {"{\"text_1\":[\"a\",3],\"text_2\":[\"a\",\"b\"]}", "text_1"},
        {"{\"text_1\":[\"a\",\"b\"],\"text_2\":[\"a\",\"b\",\"c\"]}", "text_2"},
        {"{\"text_1\":\"q\",\"text_2\":[{\"text\":\"a\"}]}", "text_2"},
        {"{\"text_1\":\"q\",\"text_2\":[\"a\"],\"query\":\"x\",\"top_n\":1}", NULL},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(bad_score); i++) {
        int rc = srv_score_parse(bad_score[i].body, strlen(bad_score[i].body), &mi, bos_tok, NULL,
                                 &p, &e);
        if (!bad_score[i].param) { /* rerank's fields are not score's */
            assert_int_equal(rc, 0);
            assert_int_equal(p.n_unknown, 2);
        } else {
            if (rc != -EINVAL)
                fail_msg("%s accepted", bad_score[i].body);
            assert_string_equal(e.param, bad_score[i].param);
        }
        srv_comp_params_free(&p);
    }
    /* a document whose prompt does not fit the context (64) */
    char big[256];
    snprintf(big, sizeof(big), "{\"query\":\"q\",\"documents\":[\"a\",\"%070d\"]}", 0);
    assert_int_equal(rerank(&mi, big, &p, &e), -EINVAL);
    assert_string_equal(e.param, "documents");
    assert_string_equal(e.code, "context_length_exceeded");
    srv_comp_params_free(&p);
}

static void test_embed_bodies(void **state)
{
    (void)state;
    struct srv_comp_params p;
    struct srv_api_error e;
    /* each input form; every input runs one greedy token nobody sees */
    static const struct {
        const char *input;
        int n, len0, last0;
    } ok[] = {
        {"\"ab\"", 1, 2, 'b' % 100},
        {"[\"ab\",\"cde\"]", 2, 2, 'b' % 100},
        {"[5,6,7]", 1, 3, 7},
        {"[[5],[6,7],[8,9,10]]", 3, 1, 5},
        {"[\"x\",[4,4]]", 2, 1, 'x' % 100},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(ok); i++) {
        char body[128];
        snprintf(body, sizeof(body), "{\"input\":%s,\"model\":\"m\"}", ok[i].input);
        assert_int_equal(embed(body, &p, &e), 0);
        assert_true(p.embed && !p.chat);
        assert_int_equal(p.n_prompts, ok[i].n);
        assert_int_equal(p.prompt_lens[0], ok[i].len0);
        assert_int_equal(p.prompts[0][ok[i].len0 - 1], ok[i].last0);
        assert_int_equal(p.n, 1);
        assert_int_equal(p.gen.max_tokens, 1);
        assert_true(p.gen.sp.temperature == 0.0f && p.gen.ignore_eos);
        assert_true(p.gen.n_logprobs < 0 && p.gen.n_prompt_logprobs < 0);
        assert_true(p.emb.normalize && !p.emb.base64 && !p.emb.norm_set);
        assert_int_equal(p.emb.dims, 0);
        srv_comp_params_free(&p);
    }
    const char *full = "{\"input\":[1,2],\"encoding_format\":\"base64\",\"dimensions\":16,"
                       "\"normalize\":false,\"embd_normalize\":0,\"user\":\"u\",\"priority\":-3}";
    assert_int_equal(embed(full, &p, &e), 0);
    assert_true(p.emb.base64 && !p.emb.normalize && p.emb.norm_set);
    assert_int_equal(p.emb.norm, 0);
    assert_int_equal(p.emb.dims, 16);
    assert_int_equal(p.gen.priority, -3);
    assert_int_equal(p.n_unknown, 0);
    srv_comp_params_free(&p);
    /* /classify takes the same inputs, and not the vector's own fields */
    assert_int_equal(classify("{\"input\":[\"ab\",[4,4,4]],\"truncate_prompt_tokens\":2,\"user\":"
                              "\"u\",\"encoding_format\":\"float\",\"dimensions\":4}",
                              &p, &e),
                     0);
    assert_true(p.classify && p.embed && !p.rerank);
    assert_int_equal(p.n_prompts, 2);
    assert_int_equal(p.prompt_lens[1], 2);
    assert_int_equal(p.gen.max_tokens, 1);
    assert_int_equal(p.n_unknown, 2); /* encoding_format, dimensions */
    srv_comp_params_free(&p);
    assert_int_equal(classify("{\"model\":\"m\"}", &p, &e), -EINVAL);
    assert_string_equal(e.param, "input");
    srv_comp_params_free(&p);
    /* completion fields are not embedding fields: listed as unknown */
    assert_int_equal(embed("{\"input\":[1],\"max_tokens\":5,\"temperature\":1}", &p, &e), 0);
    assert_int_equal(p.n_unknown, 2);
    assert_int_equal(p.gen.max_tokens, 1);
    srv_comp_params_free(&p);

    /* 63 tokens fit a context of 64 (one more for the unseen token) */
    char body[1024];
    int at = snprintf(body, sizeof(body), "{\"input\":[");
    for (int i = 0; i < 64; i++)
        at += snprintf(body + at, sizeof(body) - (size_t)at, "%s%d", i ? "," : "", i);
    snprintf(body + at, sizeof(body) - (size_t)at, "]}");
    assert_int_equal(embed(body, &p, &e), -EINVAL);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.param, "input");
    assert_string_equal(e.code, "context_length_exceeded");
    srv_comp_params_free(&p);
    /* truncate_prompt_tokens keeps the last ones; -1: as many as fit */
    snprintf(body + at, sizeof(body) - (size_t)at, "],\"truncate_prompt_tokens\":10}");
    assert_int_equal(embed(body, &p, &e), 0);
    assert_int_equal(p.prompt_lens[0], 10);
    assert_int_equal(p.prompts[0][0], 54);
    assert_int_equal(p.prompts[0][9], 63);
    srv_comp_params_free(&p);
    snprintf(body + at, sizeof(body) - (size_t)at, "],\"truncate_prompt_tokens\":-1}");
    assert_int_equal(embed(body, &p, &e), 0);
    assert_int_equal(p.prompt_lens[0], 63);
    assert_int_equal(p.prompts[0][0], 1);
    srv_comp_params_free(&p);
    snprintf(body + at, sizeof(body) - (size_t)at, "],\"truncate_prompt_tokens\":64}");
    assert_int_equal(embed(body, &p, &e), -EINVAL);
    assert_string_equal(e.param, "truncate_prompt_tokens");
    srv_comp_params_free(&p);
    /* more ids than the whole context: the same code (and for completions) */
    for (int k = 0; k < 2; k++) {
        const char *field = k ? "prompt" : "input";
        at = snprintf(body, sizeof(body), "{\"%s\":[", field);
        for (int i = 0; i < 65; i++)
            at += snprintf(body + at, sizeof(body) - (size_t)at, "%s%d", i ? "," : "", i);
        snprintf(body + at, sizeof(body) - (size_t)at, "]}");
        assert_int_equal(k ? parse(body, &p, &e) : embed(body, &p, &e), -EINVAL);
        assert_string_equal(e.param, field);
        assert_string_equal(e.code, "context_length_exceeded");
        srv_comp_params_free(&p);
    }

    static const struct {
        const char *body;
        int status;
        const char *param;
    } bad[] = {
        {"{}", 400, "input"},
        {"{\"prompt\":[1]}", 400, "input"},
        {"{\"input\":[]}", 400, "input"},
        {"{\"input\":\"\"}", 400, "input"},
        {"{\"input\":5}", 400, "input"},
        {"{\"input\":[1.5]}", 400, "input"},
        {"{\"input\":[100]}", 400, "input"},
        {"{\"input\":[[1],[]]}", 400, "input"},
        {"{\"input\":[[1],{}]}", 400, "input"},
        {"{\"input\":[1],\"model\":\"other\"}", 404, "model"},
        {"{\"input\":[1],\"encoding_format\":\"int8\"}", 400, "encoding_format"},
        {"{\"input\":[1],\"encoding_format\":1}", 400, "encoding_format"},
        {"{\"input\":[1],\"dimensions\":0}", 400, "dimensions"},
        {"{\"input\":[1],\"dimensions\":17}", 400, "dimensions"},
        {"{\"input\":[1],\"dimensions\":2.5}", 400, "dimensions"},
        {"{\"input\":[1],\"normalize\":1}", 400, "normalize"},
        {"{\"input\":[1],\"embd_normalize\":-2}", 400, "embd_normalize"},
        {"{\"input\":[1],\"truncate_prompt_tokens\":-2}", 400, "truncate_prompt_tokens"},
        {"{\"input\":[1],\"input\":[2]}", 400, "input"},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(bad); i++) {
        int rc = embed(bad[i].body, &p, &e);
        if (rc != -EINVAL || e.status != bad[i].status || !e.param || strcmp(e.param, bad[i].param))
            fail_msg("%s: rc %d status %d param %s (%s)", bad[i].body, rc, e.status,
                     e.param ? e.param : "-", e.message);
        srv_comp_params_free(&p);
    }
    /* at most SRV_MAX_INPUTS inputs */
    size_t cap = 8 * (SRV_MAX_INPUTS + 2);
    char *many = malloc(cap);
    assert_non_null(many);
    for (int n = SRV_MAX_INPUTS; n <= SRV_MAX_INPUTS + 1; n++) {
        at = snprintf(many, cap, "{\"input\":[");
        for (int i = 0; i < n; i++)
            at += snprintf(many + at, cap - (size_t)at, "%s[%d]", i ? "," : "", i % 100);
        snprintf(many + at, cap - (size_t)at, "]}");
        int rc = embed(many, &p, &e);
        assert_int_equal(rc, n == SRV_MAX_INPUTS ? 0 : -EINVAL);
        if (!rc)
            assert_int_equal(p.n_prompts, SRV_MAX_INPUTS);
        else
            assert_string_equal(e.param, "input");
        srv_comp_params_free(&p);
    }
    free(many);
    /* every allocation failure is an error, never a crash or a leak */
    const char *b2 = "{\"input\":[\"ab\",[3,4]],\"dimensions\":4}";
    for (long n = 1; n < 30; n++) {
        folio_alloc_fail_at(n);
        int rc = srv_embed_parse(b2, strlen(b2), &mi, fake_tok, NULL, &p, &e);
        folio_alloc_fail_at(0);
        assert_true(rc == 0 || rc == -ENOMEM || rc == -EINVAL);
        srv_comp_params_free(&p);
    }
}

/* Each (name, endpoint) appears once in the table. */
static void test_table_unique(void **state)
{
    (void)state;
    size_t n;
    const struct srv_field *f = srv_fields(&n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (!strcmp(f[i].name, f[j].name) && (f[i].endpoints & f[j].endpoints))
                fail_msg("'%s' twice for one endpoint", f[i].name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_full),
        cmocka_unit_test(test_nul_refused),
        cmocka_unit_test(test_defaults_and_lists),
        cmocka_unit_test(test_bad_bodies),
        cmocka_unit_test(test_context_and_utf8_body),
        cmocka_unit_test(test_text_prompt_with_tokenizer),
        cmocka_unit_test(test_echo_logprobs),
        cmocka_unit_test(test_unknown_and_foreign_fields),
        cmocka_unit_test(test_chat_render),
        cmocka_unit_test(test_chat_bad),
        cmocka_unit_test(test_error_json),
        cmocka_unit_test(test_utf8_valid),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_chat_alloc_failures),
        cmocka_unit_test(test_tokenize_bodies),
        cmocka_unit_test(test_table_rows_reach_engine),
        cmocka_unit_test(test_table_unique),
        cmocka_unit_test(test_embed_bodies),
        cmocka_unit_test(test_rerank_bodies),
        cmocka_unit_test(test_messages_bodies),
        cmocka_unit_test(test_responses_bodies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
