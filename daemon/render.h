/*
 * daemon/render.h — the OpenAI-shaped JSON of completions, embeddings
 * and rerank results, OpenAI's Responses, and Anthropic's of messages: response bodies, SSE chunks,
 * usage, legacy logprobs objects.  Pure functions: they read a completion's state and append bytes
 * to a buffer; they do no I/O, touch no connection and change no state (the caller advances its
 * cursors, e.g. sent_tokens, after a chunk is rendered; a Responses stream's state is passed in and
 * advanced).  Token text comes through struct srv_render's detok hook, so tests can render without
 * a model.
 *
 * Every function appends to b; on allocation failure b->oom is set (check
 * once at the end).
 */
#ifndef FOLIO_DAEMON_RENDER_H
#define FOLIO_DAEMON_RENDER_H

#include <stdbool.h>
#include <stdint.h>

#include "folio/buf.h"

struct srv_comp;
struct srv_choice;

struct srv_render {
    const char *model; /* "model" of every object */
    /* One token's bytes into buf; the length or -errno. */
    int (*detok)(void *ctx, int32_t token, char *buf, size_t cap);
    void *detok_ctx;
    /* rerank scores: the model's classification head (eng_model_info) */
    const float *cls_w, *cls_b;
    int32_t n_cls;
    const char *const *cls_labels; /* [n_cls] or NULL */
};

/* [1,2,3] */
void srv_render_token_ids(struct folio_buf *b, const int32_t *t, int32_t n);
/* "usage":{...} for the prompt and all choices' tokens. */
void srv_render_usage(struct folio_buf *b, const struct srv_comp *comp);

/* The legacy completions logprobs object for ch's generated tokens
 * [from, to), preceded by its prompt tokens when with_prompt (their
 * logprobs from srv_choice_plps; null for the first token, or where
 * none were computed).  *offset: text_offset of token `from` (in), of token `to`
 * (out); with_prompt resets it to ch->echo_len first. */
void srv_render_logprobs(struct folio_buf *b, const struct srv_render *r,
                         const struct srv_choice *ch, int32_t from, int32_t to, bool with_prompt,
                         int64_t *offset);

/* vLLM's prompt_logprobs list for ch's prompt (null without them): null,
 * then per prompt token {"<id>":{"logprob","rank","decoded_token"}, ...}
 * with the token itself first and the top-N others after it. */
void srv_render_prompt_logprobs(struct folio_buf *b, const struct srv_render *r,
                                const struct srv_comp *comp, const struct srv_choice *ch);

/* OpenAI's chat logprobs object for ch's generated tokens [from, to):
 * {"content":[{"token","logprob","bytes","top_logprobs":[...]}],
 * "refusal":null}. */
void srv_render_chat_logprobs(struct folio_buf *b, const struct srv_render *r,
                              const struct srv_choice *ch, int32_t from, int32_t to);
/* Its "content" list alone: [{"token","logprob","bytes","top_logprobs"}...]
 * ([] without logprobs), as a Responses output_text carries it. */
void srv_render_token_logprobs(struct folio_buf *b, const struct srv_render *r,
                               const struct srv_choice *ch, int32_t from, int32_t to);

/* The SSE event(s) of one stream chunk of ch: the first `send` bytes of
 * ch->text and tokens [ch->sent_tokens, ch->n_tokens).  role: a chat
 * choice's first chunk ({"role":"assistant"} delta before it); final:
 * finish_reason is ch's.  Logprobs (completions) as srv_render_logprobs
 * with *offset. */
void srv_render_stream_chunk(struct folio_buf *b, const struct srv_render *r,
                             const struct srv_comp *comp, const struct srv_choice *ch, size_t send,
                             bool role, bool final, bool with_prompt, int64_t *offset);
/* The end of a stream: the usage chunk if asked for, then [DONE]. */
void srv_render_stream_end(struct folio_buf *b, const struct srv_render *r,
                           const struct srv_comp *comp);
/* An embeddings response body: {"object":"list","data":[{"object":
 * "embedding","index","embedding"}...],"model","usage"}, each choice's
 * vector pooled and normalized as comp->p.emb says (embed.h). */
void srv_render_embeddings(struct folio_buf *b, const struct srv_render *r,
                           const struct srv_comp *comp);
/* A rerank response body, the documents best first (ties: lower index
 * first), the first top_n (0: all): {"id","model","usage":{prompt_tokens,
 * total_tokens},"results":[{"index","document":{"text"}
 * (return_documents),"relevance_score"}...]} (Jina's, Cohere's and
 * vLLM's shape), or with rr.tei text-embeddings-inference's bare array
 * [{"index","score","text" (return_text)}...].  Scores as
 * srv_rerank_score (embed.h), through r's head. */
void srv_render_rerank(struct folio_buf *b, const struct srv_render *r,
                       const struct srv_comp *comp);
/* A /classify response body (vLLM's), the inputs in request order:
 * {"id","object":"list","created","model","data":[{"index","label" (the
 * likeliest class's name: r->cls_labels, else LABEL_i),"probs" (the
 * head's softmax, or one sigmoid),"num_classes"}...],"usage":{
 * prompt_tokens,total_tokens,completion_tokens 0,prompt_tokens_details
 * null}}. */
void srv_render_classify(struct folio_buf *b, const struct srv_render *r,
                         const struct srv_comp *comp);
/* A /v1/score response body (vLLM's), the pairs in request order:
 * {"id","object":"list","created","model","data":[{"index","object":
 * "score","score"}...],"usage":{prompt_tokens,total_tokens}}. */
void srv_render_score(struct folio_buf *b, const struct srv_render *r, const struct srv_comp *comp);
/* The state of a Responses or Messages stream. */
struct srv_resp_stream {
    int64_t seq;    /* the next event's sequence_number */
    bool item_open; /* the message item was added */
};
/* Anthropic's Messages API (comp->p.messages, one choice): the response
 * body {"id","type":"message","role":"assistant","model","content":
 * [{"type":"text","text"}, {"type":"tool_use","id","name","input"}...],
 * "stop_reason" (end_turn, max_tokens, stop_sequence, tool_use),
 * "stop_sequence","usage":{"input_tokens","output_tokens",
 * "cache_read_input_tokens"}}; and its stream's events for one emit of
 * ch, hold as srv_tools_stream_hold said (0 without tools): with first
 * message_start, content_block_start (unless held) and ping; with send
 * > 0 a content_block_delta of ch->text's first send bytes; with final
 * the text block's end, each tool call's block (hold 2: ch->text parsed
 * whole), message_delta (stop_reason, output_tokens) and message_stop.
 * *st: whether the text block opened. */
void srv_render_message(struct folio_buf *b, const struct srv_render *r,
                        const struct srv_comp *comp);
void srv_render_message_stream(struct folio_buf *b, const struct srv_render *r,
                               const struct srv_comp *comp, const struct srv_choice *ch,
                               size_t send, bool first, bool final, int hold,
                               struct srv_resp_stream *st);
/* OpenAI's Responses API (comp->p.responses, one choice; shapes in
 * render_responses.c).  srv_render_responses: the response object for the
 * choice's whole text (text, len), its tool calls parsed as a chat
 * completion's are.  srv_render_responses_conv: the conversation the
 * response store keeps: p.resp->conv with the answer appended as an
 * assistant message (its tool_calls too).  A stream: the head
 * (response.created, response.in_progress) when it begins; then per emit
 * the whole text so far (all, all_len) of which the last `send` bytes are
 * new (an output_text.delta, the message item opened first), and with
 * final the items closed, the tool calls' items, and response.completed
 * (or .incomplete).  The stream's state (sequence numbers, the message
 * item opened) is *st, which these advance. */
void srv_render_responses(struct folio_buf *b, const struct srv_render *r,
                          const struct srv_comp *comp, const char *text, size_t len);
void srv_render_responses_conv(struct folio_buf *b, const struct srv_comp *comp, const char *text,
                               size_t len);
/* A Responses stream's last event when the engine failed it:
 * response.failed with the response (status comp->rstatus, "failed", its
 * error; no output). */
void srv_render_responses_stream_failed(struct folio_buf *b, const struct srv_render *r,
                                        const struct srv_comp *comp, struct srv_resp_stream *st);
/* An Anthropic stream's error event (type api_error, message). */
void srv_render_message_stream_error(struct folio_buf *b, const char *message);
/* The response object before its output: status comp->rstatus (queued,
 * in_progress: a background response's while it runs), no output. */
void srv_render_responses_pending(struct folio_buf *b, const struct srv_render *r,
                                  const struct srv_comp *comp);
void srv_render_responses_stream_head(struct folio_buf *b, const struct srv_render *r,
                                      const struct srv_comp *comp, struct srv_resp_stream *st);
void srv_render_responses_stream(struct folio_buf *b, const struct srv_render *r,
                                 const struct srv_comp *comp, const struct srv_choice *ch,
                                 const char *all, size_t all_len, size_t send, bool final,
                                 struct srv_resp_stream *st);
/* GET /v1/responses/{id}/input_items: the response's input items (input:
 * srv_resp_params.input), each given an id ("msg_", "fc_" or "fco_", the
 * response id's tail, "_in" and its position), newest first when desc,
 * the first `limit` after the item `after` (NULL: from the start):
 * {"object":"list","data":[...],"first_id","last_id","has_more"}.  0,
 * -EINVAL (after names no item), -ENOMEM. */
int srv_render_input_items(struct folio_buf *b, const char *resp_id, const char *input, int limit,
                           bool desc, const char *after);
/* A non-stream response body (text_completion or chat.completion). */
void srv_render_response(struct folio_buf *b, const struct srv_render *r,
                         const struct srv_comp *comp);

#endif
