/*
 * folio/chat.h — chat templates: a conversation (role, content messages)
 * rendered into the prompt text a chat-tuned model was trained on.
 *
 * Built-in templates, written from each model family's published template
 * (see model/chat.c for the exact text each one produces):
 *   chatml   <|im_start|>role\n...<|im_end|>\n          (Qwen, Yi, Hermes...)
 *   llama2   [INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST]  (Llama-2-chat)
 *   llama3   <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
 *   mistral  [INST] ... [/INST]...</s>                  (Mistral-Instruct)
 *   zephyr   <|role|>\n...</s>\n                         (Zephyr)
 *   phi3     <|role|>\n...<|end|>\n                      (Phi-3)
 *   qwen2, qwen2.5   ChatML with the family's default system message
 *                    and <tool_response> turns              (Qwen2, Qwen2.5)
 *   deepseek3  system <｜User｜>...<｜Assistant｜>...<｜end▁of▁sentence｜>
 *                                                 (DeepSeek V3, R1, distills)
 *
 * A template is chosen by name, or recognised from a GGUF file's
 * tokenizer.chat_template (a Jinja source we do not execute: distinctive
 * markers decide).  The rendered text never starts with the BOS token: the
 * caller encodes it with add_special (adding BOS as the model wants) and
 * parse_special (so "<|im_start|>" etc. become their control tokens).
 * Later BOS/EOS markers inside the conversation are written as text.
 *
 * Everything here is pure and thread-safe.
 */
#ifndef FOLIO_CHAT_H
#define FOLIO_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "folio/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

enum chat_template {
    CHAT_TMPL_CHATML = 1,
    CHAT_TMPL_LLAMA2,
    CHAT_TMPL_LLAMA3,
    CHAT_TMPL_MISTRAL,
    CHAT_TMPL_ZEPHYR,
    CHAT_TMPL_PHI3,
    CHAT_TMPL_QWEN2,     /* ChatML + default system, tool turns (Qwen2) */
    CHAT_TMPL_QWEN25,    /* the same with Qwen2.5's default system */
    CHAT_TMPL_DEEPSEEK3, /* DeepSeek V3 / R1 and the R1 distills */
};

struct chat_msg {
    const char *role;    /* "system", "user", "assistant", ... */
    const char *content; /* NUL-terminated UTF-8 */
};

/* By name ("chatml", "llama2", "llama3", "mistral", "zephyr", "phi3",
 * "qwen2", "qwen2.5", "deepseek3"; case insensitive).  -ENOTSUP with a message listing the names
 * otherwise. */
int chat_template_by_name(const char *name, enum chat_template *out, char *err, size_t errlen);
/* The canonical name of t ("?" if invalid). */
const char *chat_template_name(enum chat_template t);
/* Recognises a template from its Jinja source; -ENOTSUP + message when no
 * known markers are present. */
int chat_template_detect(const char *src, size_t len, enum chat_template *out, char *err,
                         size_t errlen);
/* From f's tokenizer.chat_template; -ENOENT when the key is absent. */
int chat_template_from_gguf(const gguf_file_t *f, enum chat_template *out, char *err,
                            size_t errlen);

/* How a template's model family calls tools (see model/chat.c for each):
 * the calls of one assistant turn are written as
 *   calls_open CALL (call_sep CALL)* calls_close
 * where CALL is the JSON object {"name": NAME, args_key: ARGUMENTS};
 * the tool definitions go to the system message as tools_intro, one JSON
 * object per function ({"type":"function","function":{...}}) joined by
 * tools_sep, then tools_outro; tool results become messages of role tool_role whose
 * content is wrapped in result_open / result_close. */
struct chat_tool_format {
    const char *calls_open, *call_sep, *calls_close;
    const char *args_key;
    const char *tools_intro, *tools_sep, *tools_outro;
    const char *tool_role;
    const char *result_open, *result_close;
};
/* Never NULL for a valid template (the Hermes format when the family has
 * no documented one). */
const struct chat_tool_format *chat_tool_format(enum chat_template t);

/* Renders msgs[0..n) into buf (NUL-terminated when it fits), *len = bytes
 * without the NUL.  add_generation_prompt appends the assistant header so
 * the model answers next.  -ENOSPC with the needed *len (buf needs *len+1)
 * when cap is too small; -EINVAL (message in err) for a NULL role/content,
 * or for llama2/mistral when turns do not alternate user/assistant after an
 * optional leading system message. */
int chat_render(enum chat_template t, const struct chat_msg *msgs, size_t n,
                bool add_generation_prompt, char *buf, size_t cap, size_t *len, char *err,
                size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* FOLIO_CHAT_H */
