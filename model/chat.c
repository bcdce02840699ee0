/*
 * model/chat.c — built-in chat templates (API in include/folio/chat.h).
 *
 * No state: a template is an enum, rendering writes into the caller's
 * buffer through a small cursor that counts what does not fit (so one
 * call reports the size needed).  Exactly what each template writes, for
 * messages m[0..n) (trim = strip ASCII whitespace at both ends):
 *
 *   chatml   per message  "<|im_start|>" role "\n" content "<|im_end|>\n"
 *            generation   "<|im_start|>assistant\n"
 *   llama3   per message  "<|start_header_id|>" role "<|end_header_id|>\n\n"
 *                         trim(content) "<|eot_id|>"
 *            generation   "<|start_header_id|>assistant<|end_header_id|>\n\n"
 *   llama2   an optional first system message S is folded into the first
 *            user turn as "<<SYS>>\n" S "\n<</SYS>>\n\n" + user content;
 *            user i       ("<s>" unless first) "[INST] " trim(content) " [/INST]"
 *            assistant    " " trim(content) " </s>"
 *            generation   nothing (the model continues after [/INST])
 *   mistral  an optional system message is prepended to the first user
 *            turn, separated by "\n\n";
 *            user         "[INST] " content " [/INST]"
 *            assistant    content "</s>"
 *            generation   nothing
 *   zephyr   per message  "<|" role "|>\n" content "</s>\n"
 *            generation   "<|assistant|>\n"
 *   phi3     per message  "<|" role "|>\n" content "<|end|>\n"
 *            generation   "<|assistant|>\n"
 *   qwen2, qwen2.5  (Qwen2-Instruct's and Qwen2.5-Instruct's templates
 *            without tools) as chatml, but when m[0] is not a system
 *            message one is written first: "You are a helpful assistant."
 *            (qwen2), "You are Qwen, created by Alibaba Cloud. You are a
 *            helpful assistant." (qwen2.5); a run of "tool" messages is
 *            one user turn: "<|im_start|>user" then per message
 *            "\n<tool_response>\n" content "\n</tool_response>", then
 *            "<|im_end|>\n"
 *   deepseek3  (DeepSeek-V3's and R1's template, also the R1 distills'
 *            of Qwen and Llama, without tools) the system messages'
 *            contents first, joined by "\n\n"; then
 *            user         "<｜User｜>" content
 *            assistant    "<｜Assistant｜>" content after its last "</think>"
 *                         (earlier reasoning is not shown again)
 *                         "<｜end▁of▁sentence｜>"
 *            generation   "<｜Assistant｜>"
 *            any other role is refused (-EINVAL).
 *
 * Tools (chat_tool_format): the caller writes tool definitions into the
 * system message and assistant tool calls into the assistant's content
 * with the family's format below; the formats are those the families
 * document:
 *   chatml, qwen2, qwen2.5, zephyr, phi3, llama2, deepseek3 (Hermes / Qwen2.5
 *            style)  "<tool_call>\n" {"name", "arguments"} "\n</tool_call>",
 *            one block per call; definitions inside <tools></tools>;
 *            results as role "tool" (qwen: the <tool_response> turn above;
 *            others: wrapped in <tool_response>, role "tool"; llama2 and
 *            deepseek3, which know no such role: role "user")
 *   llama3   a bare {"name", "parameters"} object (Llama 3.1's JSON tool
 *            calling), calls separated by "\n"; results as role "ipython"
 *   mistral  "[TOOL_CALLS] [" calls joined by ", " "]"; definitions as
 *            "[AVAILABLE_TOOLS] [...][/AVAILABLE_TOOLS]" in the system text
 *            (folded into the first user turn); results as role "user"
 *            wrapped in "[TOOL_RESULTS] " ... " [/TOOL_RESULTS]"
 *
 * Not rendered: Llama 3.1+'s "Cutting Knowledge Date" system header
 * (it holds today's date: a llama3 file renders as llama3 above), and
 * Qwen3's thinking switches (Qwen3 files render as chatml).
 *
 * The BOS a template starts with ("<s>", "<|begin_of_text|>") is left to
 * the tokenizer (tok_encode with add_special).  llama2 and mistral require
 * turns to alternate user, assistant, user, ... after the optional system
 * message, as their published templates do (they raise otherwise).
 */
#include "folio/chat.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "folio/common.h"

static const struct {
    const char *name;
    enum chat_template t;
} names[] = {
    {"chatml", CHAT_TMPL_CHATML},
    {"llama2", CHAT_TMPL_LLAMA2},
    {"llama-2", CHAT_TMPL_LLAMA2},
    {"llama3", CHAT_TMPL_LLAMA3},
    {"llama-3", CHAT_TMPL_LLAMA3},
    {"mistral", CHAT_TMPL_MISTRAL},
    {"zephyr", CHAT_TMPL_ZEPHYR},
    {"phi3", CHAT_TMPL_PHI3},
    {"phi-3", CHAT_TMPL_PHI3},
    {"qwen2", CHAT_TMPL_QWEN2},
    {"qwen2.5", CHAT_TMPL_QWEN25},
    {"qwen25", CHAT_TMPL_QWEN25},
    {"deepseek3", CHAT_TMPL_DEEPSEEK3},
    {"deepseek-v3", CHAT_TMPL_DEEPSEEK3},
    {"deepseek-r1", CHAT_TMPL_DEEPSEEK3},
};

int chat_template_by_name(const char *name, enum chat_template *out, char *err, size_t errlen)
{
    if (!name || !out)
        return -EINVAL;
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(names); i++) {
        if (strcasecmp(name, names[i].name) == 0) {
            *out = names[i].t;
            return 0;
        }
    }
    folio_errf(
        err, errlen,
        "unknown chat template '%.64s' (known: chatml, llama2, llama3, mistral, zephyr, phi3, "
        "qwen2, qwen2.5, deepseek3)",
        name);
    return -ENOTSUP;
}

const char *chat_template_name(enum chat_template t)
{
    switch (t) {
    case CHAT_TMPL_CHATML:
        return "chatml";
    case CHAT_TMPL_LLAMA2:
        return "llama2";
    case CHAT_TMPL_LLAMA3:
        return "llama3";
    case CHAT_TMPL_MISTRAL:
        return "mistral";
    case CHAT_TMPL_ZEPHYR:
        return "zephyr";
    case CHAT_TMPL_PHI3:
        return "phi3";
    case CHAT_TMPL_QWEN2:
        return "qwen2";
    case CHAT_TMPL_QWEN25:
        return "qwen2.5";
    case CHAT_TMPL_DEEPSEEK3:
        return "deepseek3";
    }
    return "?";
}

#define DS_USER "<\xef\xbd\x9cUser\xef\xbd\x9c>" /* <｜User｜> */
#define DS_ASSISTANT                                                                               \
    "<\xef\xbd\x9c"                                                                                \
    "Assistant\xef\xbd\x9c>" /* <｜Assistant｜> */
#define DS_EOS                                                                                     \
    "<\xef\xbd\x9c"                                                                                \
    "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
#define QWEN2_SYSTEM  "You are a helpful assistant."
#define QWEN25_SYSTEM "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

static bool has(const char *s, size_t n, const char *needle)
{
    return memmem(s, n, needle, strlen(needle)) != NULL;
}

int chat_template_detect(const char *src, size_t len, enum chat_template *out, char *err,
                         size_t errlen)
{
    if ((!src && len) || !out)
        return -EINVAL;
    /* the DeepSeek markers first: an R1 distill's template may also
     * mention its base model's */
    if (has(src, len, DS_USER) && has(src, len, DS_ASSISTANT))
        *out = CHAT_TMPL_DEEPSEEK3;
    else if (has(src, len, "<|im_start|>"))
        /* the default system message as the Jinja source spells it */
        *out = has(src, len, QWEN25_SYSTEM) ? CHAT_TMPL_QWEN25
               : has(src, len, "<|im_start|>system\\n" QWEN2_SYSTEM "<|im_end|>")
                   ? CHAT_TMPL_QWEN2
                   : CHAT_TMPL_CHATML;
    else if (has(src, len, "<|start_header_id|>"))
        *out = CHAT_TMPL_LLAMA3;
    else if (has(src, len, "[INST]"))
        *out = has(src, len, "<<SYS>>") ? CHAT_TMPL_LLAMA2 : CHAT_TMPL_MISTRAL;
    else if (has(src, len, "<|user|>"))
        *out = has(src, len, "<|end|>") ? CHAT_TMPL_PHI3 : CHAT_TMPL_ZEPHYR;
    else {
        folio_errf(err, errlen,
                   "chat template not recognised (no ChatML, Llama-2/3, Mistral, Zephyr, Phi-3 or "
                   "DeepSeek markers); choose one by name");
        return -ENOTSUP;
    }
    return 0;
}

int chat_template_from_gguf(const gguf_file_t *f, enum chat_template *out, char *err, size_t errlen)
{
    if (!f || !out)
        return -EINVAL;
    int64_t k = gguf_find_key(f, "tokenizer.chat_template");
    const char *s;
    size_t len;
    if (k < 0) {
        folio_errf(err, errlen, "the model has no tokenizer.chat_template");
        return -ENOENT;
    }
    if (gguf_get_str(f, k, &s, &len) != 0) {
        folio_errf(err, errlen, "tokenizer.chat_template is not a string");
        return -EINVAL;
    }
    return chat_template_detect(s, len, out, err, errlen);
}

/* ---- rendering --------------------------------------------------------- */

struct cur {
    char *buf;
    size_t cap, n;
};

static void put(struct cur *c, const char *s, size_t n)
{
    if (n == 0)
        return;
    if (c->n + n <= c->cap)
        memcpy(c->buf + c->n, s, n);
    else if (c->n < c->cap)
        memcpy(c->buf + c->n, s, c->cap - c->n);
    c->n += n;
}

static void puts_(struct cur *c, const char *s)
{
    put(c, s, strlen(s));
}

static bool is_ws(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

static void put_trim(struct cur *c, const char *s)
{
    size_t n = strlen(s), a = 0;
    while (a < n && is_ws(s[a]))
        a++;
    while (n > a && is_ws(s[n - 1]))
        n--;
    put(c, s + a, n - a);
}

static void put_rtrim(struct cur *c, const char *s)
{
    size_t n = strlen(s);
    while (n > 0 && is_ws(s[n - 1]))
        n--;
    put(c, s, n);
}

/* Checks the user/assistant alternation of llama2/mistral; *first is the
 * index of the first non-system message. */
static int check_alternation(const struct chat_msg *m, size_t n, size_t *first, char *err,
                             size_t errlen)
{
    size_t i = n > 0 && strcmp(m[0].role, "system") == 0 ? 1 : 0;
    *first = i;
    for (size_t j = i; j < n; j++) {
        const char *want = (j - i) % 2 == 0 ? "user" : "assistant";
        if (strcmp(m[j].role, want) != 0) {
            folio_errf(err, errlen,
                       "message %zu has role '%.32s' where '%s' is expected: this template needs "
                       "an optional system message, then alternating user/assistant turns",
                       j, m[j].role, want);
            return -EINVAL;
        }
    }
    return 0;
}

/* ChatML: <|im_start|>role\ncontent<|im_end|>. */
static int render_chatml(struct cur *c, const struct chat_msg *msgs, size_t n,
                         bool add_generation_prompt)
{
    for (size_t i = 0; i < n; i++) {
        puts_(c, "<|im_start|>");
        puts_(c, msgs[i].role);
        puts_(c, "\n");
        puts_(c, msgs[i].content);
        puts_(c, "<|im_end|>\n");
    }
    if (add_generation_prompt)
        puts_(c, "<|im_start|>assistant\n");
    return 0;
}

/* Llama 3: header ids around the role, trimmed content, <|eot_id|>. */
static int render_llama3(struct cur *c, const struct chat_msg *msgs, size_t n,
                         bool add_generation_prompt)
{
    for (size_t i = 0; i < n; i++) {
        puts_(c, "<|start_header_id|>");
        puts_(c, msgs[i].role);
        puts_(c, "<|end_header_id|>\n\n");
        put_trim(c, msgs[i].content);
        puts_(c, "<|eot_id|>");
    }
    if (add_generation_prompt)
        puts_(c, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return 0;
}

/* Llama 2: [INST] turns, the system message inside the first <<SYS>> block. */
static int render_llama2(struct cur *c, const struct chat_msg *msgs, size_t n, char *err,
                         size_t errlen)
{
    size_t first;
    int rc;
    if ((rc = check_alternation(msgs, n, &first, err, errlen)) != 0)
        return rc;
    for (size_t i = first; i < n; i++) {
        if (strcmp(msgs[i].role, "user") == 0) {
            if (i != first)
                puts_(c, "<s>");
            puts_(c, "[INST] ");
            if (i == first && first == 1) {
                puts_(c, "<<SYS>>\n");
                puts_(c, msgs[0].content);
                puts_(c, "\n<</SYS>>\n\n");
                put_rtrim(c, msgs[i].content);
            } else {
                put_trim(c, msgs[i].content);
            }
            puts_(c, " [/INST]");
        } else {
            puts_(c, " ");
            put_trim(c, msgs[i].content);
            puts_(c, " </s>");
        }
    }
    return 0;
}

/* Mistral: [INST] turns, the system message before the first user turn. */
static int render_mistral(struct cur *c, const struct chat_msg *msgs, size_t n, char *err,
                          size_t errlen)
{
    size_t first;
    int rc;
    if ((rc = check_alternation(msgs, n, &first, err, errlen)) != 0)
        return rc;
    for (size_t i = first; i < n; i++) {
        if (strcmp(msgs[i].role, "user") == 0) {
            puts_(c, "[INST] ");
            if (i == first && first == 1) {
                puts_(c, msgs[0].content);
                puts_(c, "\n\n");
            }
            puts_(c, msgs[i].content);
            puts_(c, " [/INST]");
        } else {
            puts_(c, msgs[i].content);
            puts_(c, "</s>");
        }
    }
    return 0;
}

/* Qwen 2 / 2.5: ChatML with a default system message; tool results as user turns. */
static int render_qwen(struct cur *c, enum chat_template t, const struct chat_msg *msgs, size_t n,
                       bool add_generation_prompt)
{
    if (n == 0 || strcmp(msgs[0].role, "system") != 0) {
        puts_(c, "<|im_start|>system\n");
        puts_(c, t == CHAT_TMPL_QWEN2 ? QWEN2_SYSTEM : QWEN25_SYSTEM);
        puts_(c, "<|im_end|>\n");
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(msgs[i].role, "tool") == 0) {
            if (i == 0 || strcmp(msgs[i - 1].role, "tool") != 0)
                puts_(c, "<|im_start|>user");
            puts_(c, "\n<tool_response>\n");
            puts_(c, msgs[i].content);
            puts_(c, "\n</tool_response>");
            if (i + 1 == n || strcmp(msgs[i + 1].role, "tool") != 0)
                puts_(c, "<|im_end|>\n");
            continue;
        }
        puts_(c, "<|im_start|>");
        puts_(c, msgs[i].role);
        puts_(c, "\n");
        puts_(c, msgs[i].content);
        puts_(c, "<|im_end|>\n");
    }
    if (add_generation_prompt)
        puts_(c, "<|im_start|>assistant\n");
    return 0;
}

/* DeepSeek V3: system messages first, then user/assistant turns (thinking dropped). */
static int render_deepseek3(struct cur *c, const struct chat_msg *msgs, size_t n,
                            bool add_generation_prompt, char *err, size_t errlen)
{
    bool any_system = false;
    for (size_t i = 0; i < n; i++) {
        const char *r = msgs[i].role;
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant")) {
            folio_errf(err, errlen,
                       "message %zu has role '%.32s': the deepseek3 template takes system, "
                       "user and assistant messages",
                       i, r);
            return -EINVAL;
        }
        if (strcmp(r, "system") == 0) {
            if (any_system)
                puts_(c, "\n\n");
            puts_(c, msgs[i].content);
            any_system = true;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(msgs[i].role, "user") == 0) {
            puts_(c, DS_USER);
            puts_(c, msgs[i].content);
        } else if (strcmp(msgs[i].role, "assistant") == 0) {
            const char *body = msgs[i].content, *p;
            while ((p = strstr(body, "</think>")) != NULL)
                body = p + strlen("</think>");
            puts_(c, DS_ASSISTANT);
            puts_(c, body);
            puts_(c, DS_EOS);
        }
    }
    if (add_generation_prompt)
        puts_(c, DS_ASSISTANT);
    return 0;
}

/* Zephyr and Phi-3: <|role|> headers. */
static int render_zephyr_phi3(struct cur *c, enum chat_template t, const struct chat_msg *msgs,
                              size_t n, bool add_generation_prompt)
{
    for (size_t i = 0; i < n; i++) {
        puts_(c, "<|");
        puts_(c, msgs[i].role);
        puts_(c, "|>\n");
        puts_(c, msgs[i].content);
        puts_(c, t == CHAT_TMPL_ZEPHYR ? "</s>\n" : "<|end|>\n");
    }
    if (add_generation_prompt)
        puts_(c, "<|assistant|>\n");
    return 0;
}

int chat_render(enum chat_template t, const struct chat_msg *msgs, size_t n,
                bool add_generation_prompt, char *buf, size_t cap, size_t *len, char *err,
                size_t errlen)
{
    if ((!msgs && n) || (!buf && cap) || !len)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            folio_errf(err, errlen, "message %zu has no role or content", i);
            return -EINVAL;
        }
    }
    struct cur c = {.buf = buf, .cap = cap ? cap - 1 : 0, .n = 0};
    int rc;
    switch (t) {
    case CHAT_TMPL_CHATML:
        rc = render_chatml(&c, msgs, n, add_generation_prompt);
        break;
    case CHAT_TMPL_LLAMA3:
        rc = render_llama3(&c, msgs, n, add_generation_prompt);
        break;
    case CHAT_TMPL_LLAMA2:
        rc = render_llama2(&c, msgs, n, err, errlen);
        break;
    case CHAT_TMPL_MISTRAL:
        rc = render_mistral(&c, msgs, n, err, errlen);
        break;
    case CHAT_TMPL_QWEN2:
    case CHAT_TMPL_QWEN25:
        rc = render_qwen(&c, t, msgs, n, add_generation_prompt);
        break;
    case CHAT_TMPL_DEEPSEEK3:
        rc = render_deepseek3(&c, msgs, n, add_generation_prompt, err, errlen);
        break;
    case CHAT_TMPL_ZEPHYR:
    case CHAT_TMPL_PHI3:
        rc = render_zephyr_phi3(&c, t, msgs, n, add_generation_prompt);
        break;
    default:
        folio_errf(err, errlen, "unknown chat template %d", (int)t);
        return -ENOTSUP;
    }
    if (rc)
        return rc;
    *len = c.n;
    if (c.n + 1 > cap)
        return -ENOSPC;
    buf[c.n] = 0;
    return 0;
}

#define HERMES_INTRO                                                                               \
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou "     \
    "are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
#define HERMES_OUTRO                                                                               \
    "\n</tools>\n\nFor each function call, return a json object with function name and "           \
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "                 \
    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>"

const struct chat_tool_format *chat_tool_format(enum chat_template t)
{
    static const struct chat_tool_format hermes = {
        "<tool_call>\n",     "\n</tool_call>\n<tool_call>\n",
        "\n</tool_call>",    "arguments",
        HERMES_INTRO,        "\n",
        HERMES_OUTRO,        "tool",
        "<tool_response>\n", "\n</tool_response>"};
    static const struct chat_tool_format qwen = {"<tool_call>\n",
                                                 "\n</tool_call>\n<tool_call>\n",
                                                 "\n</tool_call>",
                                                 "arguments",
                                                 HERMES_INTRO,
                                                 "\n",
                                                 HERMES_OUTRO,
                                                 "tool",
                                                 "",
                                                 ""};
    static const struct chat_tool_format hermes_user = {
        "<tool_call>\n",     "\n</tool_call>\n<tool_call>\n",
        "\n</tool_call>",    "arguments",
        HERMES_INTRO,        "\n",
        HERMES_OUTRO,        "user",
        "<tool_response>\n", "\n</tool_response>"};
    static const struct chat_tool_format llama3 = {
        "",
        "\n",
        "",
        "parameters",
        "\n\nGiven the following functions, please respond with a JSON for a function call with "
        "its proper arguments that best answers the given prompt.\n\nRespond in the format "
        "{\"name\": function name, \"parameters\": dictionary of argument name and its value}. "
        "Do not use variables.\n\n",
        "\n",
        "",
        "ipython",
        "",
        ""};
    static const struct chat_tool_format mistral = {"[TOOL_CALLS] [",
                                                    ", ",
                                                    "]",
                                                    "arguments",
                                                    "\n\n[AVAILABLE_TOOLS] [",
                                                    ", ",
                                                    "][/AVAILABLE_TOOLS]",
                                                    "user",
                                                    "[TOOL_RESULTS] ",
                                                    " [/TOOL_RESULTS]"};
    switch (t) {
    case CHAT_TMPL_QWEN2:
    case CHAT_TMPL_QWEN25:
        return &qwen;
    case CHAT_TMPL_LLAMA3:
        return &llama3;
    case CHAT_TMPL_MISTRAL:
        return &mistral;
    case CHAT_TMPL_LLAMA2:
    case CHAT_TMPL_DEEPSEEK3:
        return &hermes_user;
    default:
        return &hermes;
    }
}
