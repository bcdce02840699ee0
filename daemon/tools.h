/*
 * daemon/tools.h — structured output and tool calling on the request side
 * (response_format, grammar, tools, tool_choice, parallel_tool_calls: the
 * api.c table rows' parsers and the grammar they lead to) and on the
 * response side (the model's tool-call text parsed back into OpenAI
 * tool_calls, whole or as stream deltas).  See tools.c.
 */
#ifndef FOLIO_DAEMON_TOOLS_H
#define FOLIO_DAEMON_TOOLS_H

#include <stdbool.h>
#include <stddef.h>

#include "api.h"
#include "folio/buf.h"
#include "folio/chat.h"

struct srv_comp;
struct srv_choice;
struct srv_render;

enum srv_rf { SRV_RF_TEXT, SRV_RF_JSON_OBJECT, SRV_RF_JSON_SCHEMA };
enum srv_tool_choice { SRV_TC_AUTO, SRV_TC_NONE, SRV_TC_REQUIRED, SRV_TC_NAMED };

struct srv_tool {
    char *name;
    char *params; /* JSON Schema text of the arguments */
    char *def;    /* {"type":"function","function":{...}} as sent, re-printed */
};

/* Owned by struct srv_comp_params (p->tools), created by the first row
 * that needs it, freed by srv_comp_params_free. */
struct srv_tools {
    enum srv_rf rf;
    char *schema; /* json_schema / json_object "schema" text; NULL: any object */
    bool strict;  /* json_schema.strict as sent */
    char *gbnf;   /* the `grammar` field */
    struct srv_tool *tools;
    int n_tools;
    enum srv_tool_choice choice;
    char *named_name; /* SRV_TC_NAMED: the function's name as sent */
    int named;        /* its index in tools (srv__structured_finish) */
    bool parallel;
    const struct chat_tool_format *fmt; /* set when the chat is rendered */
};

void srv_tools_free(struct srv_tools *t);

/* api.c table rows (SRV_F_CUSTOM parsers). */
int srv__parse_response_format(const void *json, const struct eng_model_info *mi,
                               struct srv_comp_params *p, struct srv_api_error *err);
int srv__parse_grammar(const void *json, const struct eng_model_info *mi, struct srv_comp_params *p,
                       struct srv_api_error *err);
int srv__parse_tools(const void *json, const struct eng_model_info *mi, struct srv_comp_params *p,
                     struct srv_api_error *err);
int srv__parse_tool_choice(const void *json, const struct eng_model_info *mi,
                           struct srv_comp_params *p, struct srv_api_error *err);
int srv__parse_parallel_tool_calls(const void *json, const struct eng_model_info *mi,
                                   struct srv_comp_params *p, struct srv_api_error *err);

/* Tools offered to the model (chat rendering): tools given and
 * tool_choice is not "none". */
bool srv_tools_offered(const struct srv_comp_params *p);
/* After every field and the prompt: cross-field checks and the request's
 * grammar (p->gen.grammar) when it asks for one.  0 or -EINVAL (err). */
int srv__structured_finish(struct srv_comp_params *p, const struct eng_model_info *mi, int tmpl,
                           struct srv_api_error *err);

/* One parsed tool call. */
struct srv_tool_call {
    char *name, *arguments; /* arguments: JSON text */
};
/* Parses text as the format's tool calls: *n calls (array folio_malloc'd,
 * free with srv_tool_calls_free), *content_len = bytes of text before
 * them (plain content).  0 calls when text holds none (a partial call
 * counts as none). */
int srv_tool_calls_parse(const struct chat_tool_format *fmt, const char *text, size_t len,
                         struct srv_tool_call **calls, int *n, size_t *content_len);
void srv_tool_calls_free(struct srv_tool_call *calls, int n);
/* A choice's whole text as tool calls, when tools are offered and the
 * text was not already streamed as text (tool_mode 1): *n calls (free
 * with srv_tool_calls_free) after *content bytes of text; else 0 calls
 * and *content = len.  0 or -ENOMEM. */
int srv_tools_choice_calls(const struct srv_comp *comp, const struct srv_choice *ch,
                           const char *text, size_t len, struct srv_tool_call **calls, int *n,
                           size_t *content);

/* Non-stream chat response: writes choice i as an assistant message with
 * tool_calls (finish_reason "tool_calls") and returns true, or returns
 * false (nothing written) when its text holds no tool call. */
bool srv_tools_render_choice(struct folio_buf *b, const struct srv_comp *comp,
                             const struct srv_choice *ch, int i);
/* A stream with tools offered, before each emit: 0 send the text as it
 * comes (it is no tool call, or no tools are offered), 1 hold it (it may
 * be a tool call), 2 (final only) it was held: the whole text is to be
 * parsed for calls now.  Decides ch->tool_mode. */
int srv_tools_stream_hold(const struct srv_comp *comp, struct srv_choice *ch, bool final);
/* Stream chat chunk with tools offered: 0 send as usual, 1 hold the text
 * (it may be a tool call), 2 b holds the tool-call chunks (send them; the
 * choice's text is consumed). */
int srv_tools_stream(struct folio_buf *b, const struct srv_render *r, const struct srv_comp *comp,
                     struct srv_choice *ch, bool final);

#endif
