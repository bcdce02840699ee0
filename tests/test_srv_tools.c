/*
 * tests/test_srv_tools.c — structured output and tool calling in the
 * request parser and the response side (daemon/tools.c, api_chat.c):
 *   - response_format / grammar / tools / tool_choice give a grammar whose
 *     documents are what was asked (checked with gram_match_text), or a
 *     400 naming the field and what is wrong;
 *   - tools, assistant tool_calls, tool and developer messages render in
 *     the template's format;
 *   - tool-call text parses back into calls (every template's format),
 *     and text that is not a call stays content.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api.h"
#include "folio/chat.h"
#include "folio/common.h"
#include "folio/grammar.h"
#include "tools.h"

static const struct eng_model_info mi = {.name = "m",
                                         .n_vocab = 300,
                                         .ctx_len = 8192,
                                         .eos_id = 2,
                                         .has_tokenizer = true,
                                         .constrained = true};

/* One token per byte. */
static int fake_tok(void *ctx, const char *text, size_t n, bool special, int32_t **out,
                    int32_t *n_out)
{
    (void)ctx;
    (void)special;
    int32_t *t = folio_malloc((n + 1) * sizeof(int32_t));
    if (!t)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        t[i] = (unsigned char)text[i];
    *out = t;
    *n_out = (int32_t)n;
    return 0;
}

static int chat(const char *body, int tmpl, const struct eng_model_info *m,
                struct srv_comp_params *p, struct srv_api_error *e)
{
    memset(e, 0, sizeof(*e));
    return srv_chat_parse(body, strlen(body), m, tmpl, fake_tok, NULL, p, e);
}

#define TOOLS                                                                                      \
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":"    \
    "\"w\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"   \
    "\"required\":[\"city\"]}}},{\"type\":\"function\",\"function\":{\"name\":\"add\","            \
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"           \
    "\"required\":[\"a\"],\"additionalProperties\":false}}}]"
#define MATCH(g, lit) gram_match_text(g, lit, strlen(lit))
#define USER          "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

static void test_response_format(void **state)
{
    (void)state;
    struct srv_comp_params p;
    struct srv_api_error e;
    const char *b = "{" USER ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{"
                    "\"name\":\"x\",\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":"
                    "{\"n\":{\"type\":\"integer\"}},\"required\":[\"n\"]}}}}";
    assert_int_equal(chat(b, CHAT_TMPL_CHATML, &mi, &p, &e), 0);
    assert_non_null(p.gen.grammar);
    assert_int_equal(MATCH(p.gen.grammar, "{\"n\": -12}"), 1);
    assert_int_equal(MATCH(p.gen.grammar, "{\"n\": 1.5}"), -1);
    assert_int_equal(MATCH(p.gen.grammar, "{}"), -1);
    srv_comp_params_free(&p);
    /* json_object: any object; text: nothing */
    b = "{" USER ",\"response_format\":{\"type\":\"json_object\"}}";
    assert_int_equal(chat(b, CHAT_TMPL_CHATML, &mi, &p, &e), 0);
    assert_int_equal(MATCH(p.gen.grammar, "{\"a\": [1, {\"b\": null}]}"), 1);
    assert_int_equal(MATCH(p.gen.grammar, "[1]"), -1);
    srv_comp_params_free(&p);
    b = "{" USER ",\"response_format\":{\"type\":\"text\"}}";
    assert_int_equal(chat(b, CHAT_TMPL_CHATML, &mi, &p, &e), 0);
    assert_null(p.gen.grammar);
    srv_comp_params_free(&p);
    /* the grammar form, on completions too */
    b = "{\"prompt\":\"x\",\"grammar\":\"root ::= [ab]{2}\"}";
    assert_int_equal(srv_comp_parse(b, strlen(b), &mi, fake_tok, NULL, &p, &e), 0);
    assert_int_equal(MATCH(p.gen.grammar, "ba"), 1);
    srv_comp_params_free(&p);
}

static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *body, *param, *want;
    } bad[] = {
        {"{" USER ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":"
         "{\"type\":\"string\",\"pattern\":\"x\"}}}}",
         "response_format", "'pattern'"},
        {"{" USER ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":"
         "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"maximum\":3}}}}}}",
         "response_format", "'maximum'"},
        {"{" USER ",\"response_format\":{\"type\":\"xml\"}}", "response_format", "type"},
        {"{" USER ",\"response_format\":{\"type\":\"json_schema\"}}", "response_format",
         "json_schema"},
        {"{" USER ",\"grammar\":\"root ::= x\"}", "grammar", "not defined"},
        {"{" USER ",\"grammar\":5}", "grammar", "string"},
        {"{" USER ",\"grammar\":\"root ::= \\\"a\\\"\",\"response_format\":{\"type\":"
         "\"json_object\"}}",
         "grammar", "only one"},
        {"{" USER ",\"grammar\":\"root ::= \\\"a\\\"\",\"ignore_eos\":true}", "ignore_eos",
         "ignore_eos"},
        {"{" USER ",\"tool_choice\":\"required\"}", "tool_choice", "needs 'tools'"},
        {"{" USER "," TOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":"
         "\"nope\"}}}",
         "tool_choice", "not in 'tools'"},
        {"{" USER "," TOOLS ",\"tool_choice\":\"sometimes\"}", "tool_choice", "must be"},
        {"{" USER ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]}", "tools",
         "name"},
        {"{" USER ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
         "{\"type\":\"object\",\"properties\":{\"a\":{\"format\":\"uri\"}}}}}]}",
         "tools", "'format'"},
        {"{" USER ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}},{\"type\":"
         "\"function\",\"function\":{\"name\":\"f\"}}]}",
         "tools", "two tools"},
        {"{" USER ",\"parallel_tool_calls\":1}", "parallel_tool_calls", "boolean"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"tool_calls\":[]}]}", "messages",
         "only for assistant"},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(bad); i++) {
        struct srv_comp_params p;
        struct srv_api_error e;
        int rc = chat(bad[i].body, CHAT_TMPL_CHATML, &mi, &p, &e);
        if (rc != -EINVAL || e.status != 400 || !e.param || strcmp(e.param, bad[i].param) ||
            !strstr(e.message, bad[i].want))
            fail_msg("%s: rc %d status %d param %s message '%s' (want %s / %s)", bad[i].body, rc,
                     e.status, e.param ? e.param : "(null)", e.message, bad[i].param, bad[i].want);
        srv_comp_params_free(&p);
    }
    /* a backend that cannot constrain refuses clearly */
    struct eng_model_info nc = mi;
    nc.constrained = false;
    struct srv_comp_params p;
    struct srv_api_error e;
    assert_int_equal(chat("{" USER ",\"response_format\":{\"type\":\"json_object\"}}",
                          CHAT_TMPL_CHATML, &nc, &p, &e),
                     -EINVAL);
    assert_non_null(strstr(e.message, "cannot constrain"));
    srv_comp_params_free(&p);
}

static void test_tool_rendering(void **state)
{
    (void)state;
    struct srv_comp_params p;
    struct srv_api_error e;
    const char *b =
        "{\"messages\":[{\"role\":\"developer\",\"content\":\"be brief\"},"
        "{\"role\":\"user\",\"content\":\"weather?\"},"
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":"
        "\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": "
        "\\\"Oslo\\\"}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"sunny\"}]," TOOLS "}";
    assert_int_equal(chat(b, CHAT_TMPL_CHATML, &mi, &p, &e), 0);
    const char *t = p.prompt_text[0];
    /* the developer message is the system turn and ends with the tools */
    assert_non_null(strstr(t, "<|im_start|>system\nbe brief\n\n# Tools"));
    assert_non_null(strstr(t, "<tools>\n{\"type\":\"function\",\"function\":{\"name\":"
                              "\"get_weather\""));
    assert_non_null(strstr(t, "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", "
                              "\"arguments\": {\"city\":\"Oslo\"}}\n</tool_call><|im_end|>"));
    assert_non_null(strstr(t, "<|im_start|>tool\n<tool_response>\nsunny\n</tool_response>"));
    assert_null(p.gen.grammar); /* auto: free text */
    srv_comp_params_free(&p);
    /* llama3: bare JSON with "parameters", results as ipython; no system
     * message: one with the tools comes first */
    b = "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\","
        "\"tool_calls\":[{\"function\":{\"name\":\"add\",\"arguments\":\"{\\\"a\\\":1}\"}}]},"
        "{\"role\":\"tool\",\"content\":\"2\"}]," TOOLS "}";
    assert_int_equal(chat(b, CHAT_TMPL_LLAMA3, &mi, &p, &e), 0);
    t = p.prompt_text[0];
    assert_true(
        !strncmp(t, "<|start_header_id|>system<|end_header_id|>\n\nGiven the following", 58));
    assert_non_null(strstr(t, "{\"name\": \"add\", \"parameters\": {\"a\":1}}<|eot_id|>"));
    assert_non_null(strstr(t, "<|start_header_id|>ipython<|end_header_id|>\n\n2<|eot_id|>"));
    srv_comp_params_free(&p);
    /* tool_choice none: tools neither shown nor forced */
    b = "{" USER "," TOOLS ",\"tool_choice\":\"none\"}";
    assert_int_equal(chat(b, CHAT_TMPL_CHATML, &mi, &p, &e), 0);
    assert_null(strstr(p.prompt_text[0], "<tools>"));
    assert_null(p.gen.grammar);
    srv_comp_params_free(&p);
}

static void test_forced_calls(void **state)
{
    (void)state;
    struct srv_comp_params p;
    struct srv_api_error e;
    const char *b = "{" USER "," TOOLS ",\"tool_choice\":\"required\"}";
    assert_int_equal(chat(b, CHAT_TMPL_QWEN25, &mi, &p, &e), 0);
    gram_t *g = p.gen.grammar;
    const char *one = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 3}}\n</tool_call>";
    const char *two = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 3}}\n</tool_call>\n"
                      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}\n"
                      "</tool_call>";
    const char *badargs = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"b\": 3}}";
    assert_int_equal(gram_match_text(g, one, strlen(one)), 1);
    assert_int_equal(gram_match_text(g, two, strlen(two)), 1); /* parallel by default */
    assert_int_equal(gram_match_text(g, badargs, strlen(badargs)), -1);
    srv_comp_params_free(&p);
    b = "{" USER "," TOOLS ",\"tool_choice\":\"required\",\"parallel_tool_calls\":false}";
    assert_int_equal(chat(b, CHAT_TMPL_QWEN25, &mi, &p, &e), 0);
    assert_int_equal(gram_match_text(p.gen.grammar, two, strlen(two)), -1);
    assert_int_equal(gram_match_text(p.gen.grammar, one, strlen(one)), 1);
    srv_comp_params_free(&p);
    b = "{" USER "," TOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":"
        "\"get_weather\"}}}";
    assert_int_equal(chat(b, CHAT_TMPL_QWEN25, &mi, &p, &e), 0);
    assert_int_equal(gram_match_text(p.gen.grammar, one, strlen(one)), -1);
    const char *w = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"é\"}}\n"
                    "</tool_call>";
    assert_int_equal(gram_match_text(p.gen.grammar, w, strlen(w)), 1);
    srv_comp_params_free(&p);
    /* mistral's list format */
    b = "{" USER "," TOOLS ",\"tool_choice\":\"required\"}";
    assert_int_equal(chat(b, CHAT_TMPL_MISTRAL, &mi, &p, &e), 0);
    const char *m = "[TOOL_CALLS] [{\"name\": \"add\", \"arguments\": {\"a\": 1}}, {\"name\": "
                    "\"add\", \"arguments\": {\"a\": 2}}]";
    assert_int_equal(gram_match_text(p.gen.grammar, m, strlen(m)), 1);
    srv_comp_params_free(&p);
}

static void test_parse_calls(void **state)
{
    (void)state;
    struct srv_tool_call *c;
    int n;
    size_t content;
    const struct chat_tool_format *h = chat_tool_format(CHAT_TMPL_CHATML);
    const char *t = "Let me check.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": [1, 2]}}\n"
                    "</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>";
    assert_int_equal(srv_tool_calls_parse(h, t, strlen(t), &c, &n, &content), 0);
    assert_int_equal(n, 2);
    assert_int_equal(content, strlen("Let me check."));
    assert_string_equal(c[0].name, "f");
    assert_string_equal(c[0].arguments, "{\"x\":[1,2]}");
    assert_string_equal(c[1].name, "g");
    srv_tool_calls_free(c, n);
    /* a call cut short, or plain text: no calls */
    const char *cut = "<tool_call>\n{\"name\": \"f\", \"argu";
    assert_int_equal(srv_tool_calls_parse(h, cut, strlen(cut), &c, &n, &content), 0);
    assert_int_equal(n, 0);
    assert_int_equal(content, strlen(cut));
    assert_int_equal(srv_tool_calls_parse(h, "hello", 5, &c, &n, &content), 0);
    assert_int_equal(n, 0);
    /* the arguments must be an object under the format's key */
    const char *wrong = "<tool_call>\n{\"name\": \"f\", \"parameters\": {}}\n</tool_call>";
    assert_int_equal(srv_tool_calls_parse(h, wrong, strlen(wrong), &c, &n, &content), 0);
    assert_int_equal(n, 0);
    const struct chat_tool_format *l3 = chat_tool_format(CHAT_TMPL_LLAMA3);
    const char *j = " {\"name\": \"f\", \"parameters\": {\"a\": \"b\"}}";
    assert_int_equal(srv_tool_calls_parse(l3, j, strlen(j), &c, &n, &content), 0);
    assert_int_equal(n, 1);
    assert_string_equal(c[0].arguments, "{\"a\":\"b\"}");
    assert_int_equal(content, 0);
    srv_tool_calls_free(c, n);
    const struct chat_tool_format *mi3 = chat_tool_format(CHAT_TMPL_MISTRAL);
    const char *m = "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", "
                    "\"arguments\": {\"k\": 1}}]";
    assert_int_equal(srv_tool_calls_parse(mi3, m, strlen(m), &c, &n, &content), 0);
    assert_int_equal(n, 2);
    assert_string_equal(c[1].name, "b");
    srv_tool_calls_free(c, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_response_format), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_tool_rendering),  cmocka_unit_test(test_forced_calls),
        cmocka_unit_test(test_parse_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
