/*
 * tests/test_chat.c — each built-in chat template renders a known
 * conversation to exactly the text its published template gives (expected
 * strings written by hand from the template definitions), detection from
 * Jinja sources, names, errors and the -ENOSPC protocol.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "folio/chat.h"
#include "folio/common.h"
#include "folio/gguf.h"

static const struct chat_msg conv[] = {
    {"system", "You are helpful."},
    {"user", "Hi there"},
    {"assistant", " Hello! How can I help?\n"},
    {"user", "Tell me a joke."},
};

static void expect(enum chat_template t, const struct chat_msg *m, size_t n, bool gen,
                   const char *want)
{
    char buf[2048], err[256] = "";
    size_t len = 0;
    int rc = chat_render(t, m, n, gen, buf, sizeof(buf), &len, err, sizeof(err));
    if (rc)
        fail_msg("%s: rc %d: %s", chat_template_name(t), rc, err);
    assert_int_equal(len, strlen(want));
    if (strcmp(buf, want) != 0)
        fail_msg("%s renders:\n[%s]\nwant:\n[%s]", chat_template_name(t), buf, want);
    /* the size protocol: exactly len + 1 bytes are needed */
    size_t need = 0;
    assert_int_equal(chat_render(t, m, n, gen, NULL, 0, &need, NULL, 0), -ENOSPC);
    assert_int_equal(need, len);
    char *small = malloc(len + 1);
    assert_int_equal(chat_render(t, m, n, gen, small, len, &need, NULL, 0), -ENOSPC);
    assert_int_equal(chat_render(t, m, n, gen, small, len + 1, &need, NULL, 0), 0);
    assert_string_equal(small, want);
    free(small);
}

static void test_chatml(void **state)
{
    (void)state;
    expect(CHAT_TMPL_CHATML, conv, 4, true,
           "<|im_start|>system\nYou are helpful.<|im_end|>\n"
           "<|im_start|>user\nHi there<|im_end|>\n"
           "<|im_start|>assistant\n Hello! How can I help?\n<|im_end|>\n"
           "<|im_start|>user\nTell me a joke.<|im_end|>\n"
           "<|im_start|>assistant\n");
    expect(CHAT_TMPL_CHATML, conv + 1, 1, false, "<|im_start|>user\nHi there<|im_end|>\n");
}

static void test_llama2(void **state)
{
    (void)state;
    /* system folded into the first [INST]; contents stripped; <s> before
     * every turn but the first (the tokenizer adds that BOS) */
    expect(CHAT_TMPL_LLAMA2, conv, 4, true,
           "[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi there [/INST]"
           " Hello! How can I help? </s>"
           "<s>[INST] Tell me a joke. [/INST]");
    expect(CHAT_TMPL_LLAMA2, conv + 1, 1, true, "[INST] Hi there [/INST]");
}

static void test_llama3(void **state)
{
    (void)state;
    expect(CHAT_TMPL_LLAMA3, conv, 4, true,
           "<|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\nHello! How can I help?<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nTell me a joke.<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect(CHAT_TMPL_LLAMA3, conv + 1, 1, false,
           "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>");
}

static void test_mistral(void **state)
{
    (void)state;
    expect(CHAT_TMPL_MISTRAL, conv, 4, true,
           "[INST] You are helpful.\n\nHi there [/INST]"
           " Hello! How can I help?\n</s>"
           "[INST] Tell me a joke. [/INST]");
    expect(CHAT_TMPL_MISTRAL, conv + 1, 2, false,
           "[INST] Hi there [/INST] Hello! How can I help?\n</s>");
}

static void test_zephyr_phi3(void **state)
{
    (void)state;
    expect(CHAT_TMPL_ZEPHYR, conv, 4, true,
           "<|system|>\nYou are helpful.</s>\n"
           "<|user|>\nHi there</s>\n"
           "<|assistant|>\n Hello! How can I help?\n</s>\n"
           "<|user|>\nTell me a joke.</s>\n"
           "<|assistant|>\n");
    expect(CHAT_TMPL_PHI3, conv + 1, 1, true, "<|user|>\nHi there<|end|>\n<|assistant|>\n");
}

#define DS_U "<\xef\xbd\x9cUser\xef\xbd\x9c>"
#define DS_A                                                                                       \
    "<\xef\xbd\x9c"                                                                                \
    "Assistant\xef\xbd\x9c>"
#define DS_E                                                                                       \
    "<\xef\xbd\x9c"                                                                                \
    "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"

/* Qwen2/2.5: ChatML, a default system message when none is given, and a
 * run of tool results as one user turn. */
static void test_qwen(void **state)
{
    (void)state;
    expect(CHAT_TMPL_QWEN25, conv + 1, 1, true,
           "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
           "assistant.<|im_end|>\n"
           "<|im_start|>user\nHi there<|im_end|>\n"
           "<|im_start|>assistant\n");
    expect(CHAT_TMPL_QWEN2, conv + 1, 1, false,
           "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
           "<|im_start|>user\nHi there<|im_end|>\n");
    /* a system message of its own replaces the default */
    expect(CHAT_TMPL_QWEN25, conv, 2, false,
           "<|im_start|>system\nYou are helpful.<|im_end|>\n"
           "<|im_start|>user\nHi there<|im_end|>\n");
    static const struct chat_msg tools[] = {
        {"system", "S"},         {"user", "weather?"},    {"assistant", "calling"},
        {"tool", "{\"t\": 20}"}, {"tool", "{\"t\": 21}"}, {"user", "thanks"},
    };
    expect(CHAT_TMPL_QWEN2, tools, 6, true,
           "<|im_start|>system\nS<|im_end|>\n"
           "<|im_start|>user\nweather?<|im_end|>\n"
           "<|im_start|>assistant\ncalling<|im_end|>\n"
           "<|im_start|>user\n<tool_response>\n{\"t\": 20}\n</tool_response>"
           "\n<tool_response>\n{\"t\": 21}\n</tool_response><|im_end|>\n"
           "<|im_start|>user\nthanks<|im_end|>\n"
           "<|im_start|>assistant\n");
}

/* DeepSeek V3/R1: system text first, reasoning of earlier answers dropped. */
static void test_deepseek3(void **state)
{
    (void)state;
    expect(CHAT_TMPL_DEEPSEEK3, conv, 4, true,
           "You are helpful." DS_U "Hi there" DS_A " Hello! How can I help?\n" DS_E DS_U
           "Tell me a joke." DS_A);
    static const struct chat_msg r1[] = {
        {"user", "2+2?"},        {"assistant", "<think>\nadd them\n</think>\n\n4"},
        {"system", "Be brief."}, {"system", "Use digits."},
        {"user", "3+3?"},
    };
    expect(CHAT_TMPL_DEEPSEEK3, r1, 5, false,
           "Be brief.\n\nUse digits." DS_U "2+2?" DS_A "\n\n4" DS_E DS_U "3+3?");
    static const struct chat_msg tool[] = {{"user", "x"}, {"tool", "y"}};
    char buf[256], err[256] = "";
    size_t len;
    assert_int_equal(
        chat_render(CHAT_TMPL_DEEPSEEK3, tool, 2, true, buf, sizeof(buf), &len, err, sizeof(err)),
        -EINVAL);
    assert_non_null(strstr(err, "'tool'"));
}

static void test_alternation_errors(void **state)
{
    (void)state;
    const struct chat_msg bad[] = {{"user", "a"}, {"user", "b"}};
    char buf[256], err[256] = "";
    size_t len;
    assert_int_equal(
        chat_render(CHAT_TMPL_LLAMA2, bad, 2, true, buf, sizeof(buf), &len, err, sizeof(err)),
        -EINVAL);
    assert_non_null(strstr(err, "alternating"));
    assert_int_equal(chat_render(CHAT_TMPL_MISTRAL, bad, 2, true, buf, sizeof(buf), &len, NULL, 0),
                     -EINVAL);
    /* ChatML takes any roles */
    assert_int_equal(chat_render(CHAT_TMPL_CHATML, bad, 2, true, buf, sizeof(buf), &len, NULL, 0),
                     0);
    const struct chat_msg nul[] = {{"user", NULL}};
    assert_int_equal(chat_render(CHAT_TMPL_CHATML, nul, 1, true, buf, sizeof(buf), &len, NULL, 0),
                     -EINVAL);
    assert_int_equal(
        chat_render((enum chat_template)99, conv, 1, true, buf, sizeof(buf), &len, err, 256),
        -ENOTSUP);
}

static void test_names(void **state)
{
    (void)state;
    static const char *names[] = {"chatml", "llama2", "llama3",  "mistral",  "zephyr",
                                  "phi3",   "qwen2",  "qwen2.5", "deepseek3"};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(names); i++) {
        enum chat_template t;
        assert_int_equal(chat_template_by_name(names[i], &t, NULL, 0), 0);
        assert_string_equal(chat_template_name(t), names[i]);
    }
    enum chat_template t;
    assert_int_equal(chat_template_by_name("LLaMA-3", &t, NULL, 0), 0);
    assert_int_equal(t, CHAT_TMPL_LLAMA3);
    char err[256] = "";
    assert_int_equal(chat_template_by_name("vicuna", &t, err, sizeof(err)), -ENOTSUP);
    assert_non_null(strstr(err, "vicuna"));
    assert_non_null(strstr(err, "chatml"));
}

/* Abridged real Jinja sources (the distinctive parts). */
static void test_detect(void **state)
{
    (void)state;
    static const struct {
        const char *src;
        enum chat_template want;
    } cases[] = {
        {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
         "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}",
         CHAT_TMPL_CHATML},
        {"{% if messages[0]['role'] == 'system' %}...{{ bos_token + '[INST] ' + "
         "content.strip() + ' [/INST]' }}...'<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n'",
         CHAT_TMPL_LLAMA2},
        {"{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ "
         "'[INST] ' + message['content'] + ' [/INST]' }}{% elif %}{{ message['content'] + "
         "eos_token}}{% endif %}{% endfor %}",
         CHAT_TMPL_MISTRAL},
        {"{% set content = '<|start_header_id|>' + message['role'] + "
         "'<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}",
         CHAT_TMPL_LLAMA3},
        {"{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + "
         "message['content'] + eos_token }}{% endif %}{% endfor %}",
         CHAT_TMPL_ZEPHYR},
        {"{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>'}}",
         CHAT_TMPL_PHI3},
        /* Qwen2-Instruct */
        {"{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' "
         "%}{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif "
         "%}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
         "'\\n'}}{% endfor %}",
         CHAT_TMPL_QWEN2},
        /* Qwen2.5-Instruct (tools branch abridged) */
        {"{%- if tools %}{{- '<|im_start|>system\\n' }}...<tools>...{%- else %}{%- if "
         "messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + "
         "messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}{{- "
         "'<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
         "assistant.<|im_end|>\\n' }}{%- endif %}{%- endif %}",
         CHAT_TMPL_QWEN25},
        /* DeepSeek-R1-Distill-Qwen */
        {"{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false "
         "%}{% endif %}...{{'<\xef\xbd\x9cUser\xef\xbd\x9c>' + message['content']}}...{{'<"
         "\xef\xbd\x9c"
         "Assistant\xef\xbd\x9c>' + content + '<\xef\xbd\x9c"
         "end\xe2\x96\x81of"
         "\xe2\x96\x81sentence\xef\xbd\x9c>'}}",
         CHAT_TMPL_DEEPSEEK3},
    };
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(cases); i++) {
        enum chat_template t = 0;
        char err[256] = "";
        int rc = chat_template_detect(cases[i].src, strlen(cases[i].src), &t, err, sizeof(err));
        if (rc || t != cases[i].want)
            fail_msg("case %zu: rc %d, got %s, want %s (%s)", i, rc, chat_template_name(t),
                     chat_template_name(cases[i].want), err);
    }
    enum chat_template t;
    char err[256] = "";
    const char *vicuna = "{{ 'USER: ' + message['content'] + ' ASSISTANT:' }}";
    assert_int_equal(chat_template_detect(vicuna, strlen(vicuna), &t, err, sizeof(err)), -ENOTSUP);
    assert_non_null(strstr(err, "not recognised"));
}

/* From a GGUF file's tokenizer.chat_template (written with the writer). */
static void test_from_gguf(void **state)
{
    (void)state;
    char path[] = "/tmp/folio_chat_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char err[256] = "";
    for (int with_key = 1; with_key >= 0; with_key--) {
        gguf_writer_t *w;
        assert_int_equal(gguf_writer_new(&w), 0);
        assert_int_equal(gguf_w_str(w, "general.architecture", "llama"), 0);
        if (with_key)
            assert_int_equal(gguf_w_str(w, "tokenizer.chat_template",
                                        "{% for m in messages %}{{'<|im_start|>' + m['role'] + "
                                        "'\\n' + m['content'] + '<|im_end|>\\n'}}{% endfor %}"),
                             0);
        assert_int_equal(gguf_writer_write(w, path, err, sizeof(err)), 0);
        gguf_writer_free(w);
        gguf_file_t *f;
        assert_int_equal(gguf_open(path, &f, err, sizeof(err)), 0);
        enum chat_template t = 0;
        int rc = chat_template_from_gguf(f, &t, err, sizeof(err));
        if (with_key) {
            assert_int_equal(rc, 0);
            assert_int_equal(t, CHAT_TMPL_CHATML);
        } else {
            assert_int_equal(rc, -ENOENT);
            assert_non_null(strstr(err, "tokenizer.chat_template"));
        }
        gguf_close(f);
    }
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chatml),      cmocka_unit_test(test_llama2),
        cmocka_unit_test(test_llama3),      cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_zephyr_phi3), cmocka_unit_test(test_alternation_errors),
        cmocka_unit_test(test_names),       cmocka_unit_test(test_detect),
        cmocka_unit_test(test_from_gguf),   cmocka_unit_test(test_qwen),
        cmocka_unit_test(test_deepseek3),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
