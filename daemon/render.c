/*
 * daemon/render.c — OpenAI JSON for completions (see render.h).
 *
 * Shapes (one choice shown):
 *   completions   {"id","object":"text_completion","created","model",
 *                  "choices":[{"index","text","logprobs","finish_reason",
 *                  "token_ids"}],"usage":{...}}
 *   chat          {..."object":"chat.completion",..."choices":[{"index",
 *                  "message":{"role":"assistant","content"},"logprobs":null |
 *                  {"content":[{"token","logprob","bytes","top_logprobs":[...]}],
 *                  "refusal":null},"finish_reason"}],"usage":{...}}
 *   prompt_logprobs (vLLM's; completions: in each choice, chat: beside
 *                  "choices"): [null, {"<id>":{"logprob","rank",
 *                  "decoded_token"}, ...}, ...], one entry per prompt
 *                  token: the token itself, then the top-N others
 *   usage         {"prompt_tokens" (each prompt once, whatever n),
 *                  "completion_tokens","total_tokens",
 *                  "prompt_tokens_details":{"cached_tokens"}}
 *   stream chunk  data: {..."object":"text_completion" | "chat.completion.chunk",
 *                  "choices":[{... "text" | "delta":{"content"} ...}]}\n\n
 *   rerank        {"id","model","usage","results":[{"index","document":
 *                  {"text"},"relevance_score"}]}, or TEI's [{"index","score"}]
 * (Anthropic's Messages shapes are render_messages.c's.)
 *
 * Token text inside logprobs is each token's bytes alone, made valid UTF-8
 * (invalid bytes -> U+FFFD), so a piece that is half a character reads as
 * U+FFFD there while the choice's text joins the halves.
 */
#include "render.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"
#include "folio/model.h"
#include "server.h"
#include "tools.h"

void srv_render_token_ids(struct folio_buf *b, const int32_t *t, int32_t n)
{
    folio_buf_puts(b, "[");
    for (int32_t i = 0; i < n; i++)
        folio_buf_printf(b, i ? ",%d" : "%d", t[i]);
    folio_buf_puts(b, "]");
}

void srv_render_usage(struct folio_buf *b, const struct srv_comp *comp)
{
    int64_t gen = 0;
    for (int i = 0; i < comp->n_choices; i++)
        gen += comp->ch[i].n_tokens;
    folio_buf_printf(b,
                     "\"usage\":{\"prompt_tokens\":%lld,\"completion_tokens\":%lld,"
                     "\"total_tokens\":%lld,\"prompt_tokens_details\":{\"cached_tokens\":%lld}}",
                     (long long)comp->prompt_tokens, (long long)gen,
                     (long long)(comp->prompt_tokens + gen), (long long)comp->cached_tokens);
}

static void chunk_head(struct folio_buf *b, const struct srv_render *r, const struct srv_comp *comp)
{
    folio_buf_printf(
        b, "data: {\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", comp->id,
        comp->p.chat ? "chat.completion.chunk" : "text_completion", (long long)comp->created);
    folio_buf_json_str(b, r->model, strlen(r->model));
}

/* One token's text as a JSON string (invalid UTF-8 → U+FFFD); returns
 * its byte length in the response text. */
static size_t piece_json(struct folio_buf *b, const struct srv_render *r, int32_t tok)
{
    char bytes[256], clean[3 * 256];
    int n = r->detok(r->detok_ctx, tok, bytes, sizeof(bytes));
    size_t m = n > 0 ? folio_utf8_sanitize(bytes, (size_t)n, clean) : 0;
    folio_buf_json_str(b, clean, m);
    return n > 0 ? (size_t)n : 0;
}

static void logprob_num(struct folio_buf *b, float lp)
{
    folio_buf_printf(b, "%.6g", isfinite(lp) ? (double)lp : -9999.0);
}

/* {"piece": logprob, ...}: a legacy top_logprobs entry of x's top-N */
static void top_map(struct folio_buf *b, const struct srv_render *r, const struct sampler_result *x)
{
    folio_buf_puts(b, "{");
    for (int32_t k = 0; k < x->n_top; k++) {
        folio_buf_puts(b, k ? "," : "");
        piece_json(b, r, x->top_ids[k]);
        folio_buf_puts(b, ":");
        logprob_num(b, x->top_logprobs[k]);
    }
    folio_buf_puts(b, "}");
}

void srv_render_logprobs(struct folio_buf *b, const struct srv_render *r,
                         const struct srv_choice *ch, int32_t from, int32_t to, bool with_prompt,
                         int64_t *offset)
{
    const int32_t *pt = ch->er.prompt;
    int32_t np = with_prompt ? ch->er.n_prompt : 0;
    const struct sampler_result *plp = np ? srv_choice_plps(ch->comp, ch) : NULL;
    int64_t *offs = folio_malloc((size_t)(np + to - from + 1) * sizeof(*offs));
    if (!offs) {
        b->oom = true;
        return;
    }
    int64_t off = 0;
    folio_buf_puts(b, "{\"tokens\":[");
    for (int32_t i = 0; i < np; i++) {
        folio_buf_puts(b, i ? "," : "");
        offs[i] = off;
        size_t n = piece_json(b, r, pt[i]);
        /* SPM: the echoed text has no leading space where the first
         * piece has one (the tokenizer's space prefix) */
        char pb[256];
        if (off == 0 && n && ch->text.len && ch->text.p[0] != ' ' &&
            r->detok(r->detok_ctx, pt[i], pb, sizeof(pb)) > 0 && pb[0] == ' ')
            n--;
        off += (int64_t)n;
    }
    if (with_prompt)
        *offset = (int64_t)ch->echo_len;
    for (int32_t i = from; i < to; i++) {
        folio_buf_puts(b, i > from || np ? "," : "");
        offs[np + i - from] = *offset;
        *offset += (int64_t)piece_json(b, r, ch->tokens[i]);
    }
    folio_buf_puts(b, "],\"token_logprobs\":[");
    for (int32_t i = 0; i < np; i++) { /* the first prompt token has none */
        folio_buf_puts(b, i ? "," : "");
        if (plp && i && !isnan(plp[i].logprob))
            logprob_num(b, plp[i].logprob);
        else
            folio_buf_puts(b, "null");
    }
    for (int32_t i = from; i < to; i++) {
        folio_buf_puts(b, i > from || np ? "," : "");
        logprob_num(b, ch->lps[i].logprob);
    }
    folio_buf_puts(b, "],\"top_logprobs\":[");
    for (int32_t i = 0; i < np; i++) {
        folio_buf_puts(b, i ? "," : "");
        if (!plp || !i || isnan(plp[i].logprob)) {
            folio_buf_puts(b, "null");
            continue;
        }
        top_map(b, r, &plp[i]);
    }
    for (int32_t i = from; i < to; i++) {
        folio_buf_puts(b, i > from || np ? "," : "");
        top_map(b, r, &ch->lps[i]);
    }
    folio_buf_puts(b, "],\"text_offset\":[");
    for (int32_t i = 0; i < np + to - from; i++)
        folio_buf_printf(b, i ? ",%lld" : "%lld", (long long)offs[i]);
    folio_buf_puts(b, "]}");
    folio_free(offs);
}

static void plp_entry(struct folio_buf *b, const struct srv_render *r, bool first, int32_t tok,
                      float lp, int32_t rank)
{
    folio_buf_printf(b, "%s\"%d\":{\"logprob\":", first ? "" : ",", tok);
    logprob_num(b, lp);
    folio_buf_printf(b, ",\"rank\":%d,\"decoded_token\":", rank);
    piece_json(b, r, tok);
    folio_buf_puts(b, "}");
}

void srv_render_prompt_logprobs(struct folio_buf *b, const struct srv_render *r,
                                const struct srv_comp *comp, const struct srv_choice *ch)
{
    const struct sampler_result *plp = srv_choice_plps(comp, ch);
    if (!plp) {
        folio_buf_puts(b, "null");
        return;
    }
    folio_buf_puts(b, "[null");
    for (int32_t i = 1; i < ch->er.n_prompt; i++) {
        const struct sampler_result *x = &plp[i];
        if (isnan(x->logprob)) { /* not scored (the request failed first) */
            folio_buf_puts(b, ",null");
            continue;
        }
        folio_buf_puts(b, ",{");
        plp_entry(b, r, true, x->token, x->logprob, x->rank);
        for (int32_t k = 0; k < x->n_top; k++)
            if (x->top_ids[k] != x->token)
                plp_entry(b, r, false, x->top_ids[k], x->top_logprobs[k], k + 1);
        folio_buf_puts(b, "}");
    }
    folio_buf_puts(b, "]");
}

/* One token as OpenAI's chat logprobs entry wants it: "token" (its text,
 * invalid UTF-8 as U+FFFD), "bytes" (the raw bytes). */
static void chat_token_json(struct folio_buf *b, const struct srv_render *r, int32_t tok)
{
    char bytes[256], clean[3 * 256];
    int n = r->detok(r->detok_ctx, tok, bytes, sizeof(bytes));
    size_t m = n > 0 ? folio_utf8_sanitize(bytes, (size_t)n, clean) : 0;
    folio_buf_puts(b, "\"token\":");
    folio_buf_json_str(b, clean, m);
    folio_buf_puts(b, ",\"bytes\":[");
    for (int i = 0; i < n; i++)
        folio_buf_printf(b, i ? ",%u" : "%u", (unsigned)(unsigned char)bytes[i]);
    folio_buf_puts(b, "]");
}

void srv_render_chat_logprobs(struct folio_buf *b, const struct srv_render *r,
                              const struct srv_choice *ch, int32_t from, int32_t to)
{
    folio_buf_puts(b, "{\"content\":");
    srv_render_token_logprobs(b, r, ch, from, to);
    folio_buf_puts(b, ",\"refusal\":null}");
}

void srv_render_token_logprobs(struct folio_buf *b, const struct srv_render *r,
                               const struct srv_choice *ch, int32_t from, int32_t to)
{
    folio_buf_puts(b, "[");
    for (int32_t i = from; ch->lps && i < to; i++) {
        const struct sampler_result *lp = &ch->lps[i];
        folio_buf_puts(b, i > from ? ",{" : "{");
        chat_token_json(b, r, ch->tokens[i]);
        folio_buf_puts(b, ",\"logprob\":");
        logprob_num(b, lp->logprob);
        folio_buf_puts(b, ",\"top_logprobs\":[");
        for (int32_t k = 0; k < lp->n_top; k++) {
            folio_buf_puts(b, k ? ",{" : "{");
            chat_token_json(b, r, lp->top_ids[k]);
            folio_buf_puts(b, ",\"logprob\":");
            logprob_num(b, lp->top_logprobs[k]);
            folio_buf_puts(b, "}");
        }
        folio_buf_puts(b, "]}");
    }
    folio_buf_puts(b, "]");
}

void srv_render_stream_chunk(struct folio_buf *b, const struct srv_render *r,
                             const struct srv_comp *comp, const struct srv_choice *ch, size_t send,
                             bool role, bool final, bool with_prompt, int64_t *offset)
{
    if (comp->p.chat && role) {
        chunk_head(b, r, comp);
        folio_buf_printf(b,
                         ",\"choices\":[{\"index\":%d,\"delta\":{\"role\":\"assistant\","
                         "\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
                         ch->index);
    }
    chunk_head(b, r, comp);
    if (comp->p.chat) {
        folio_buf_printf(b, ",\"choices\":[{\"index\":%d,\"delta\":{", ch->index);
        if (send) {
            folio_buf_puts(b, "\"content\":");
            folio_buf_json_str(b, ch->text.p, send);
        }
        folio_buf_puts(b, "},\"logprobs\":");
        if (comp->p.gen.n_logprobs >= 0 && ch->n_tokens > ch->sent_tokens)
            srv_render_chat_logprobs(b, r, ch, ch->sent_tokens, ch->n_tokens);
        else
            folio_buf_puts(b, "null");
        folio_buf_puts(b, ",\"finish_reason\":");
    } else {
        folio_buf_printf(b, ",\"choices\":[{\"index\":%d,\"text\":", ch->index);
        folio_buf_json_str(b, ch->text.p ? ch->text.p : "", send);
        folio_buf_puts(b, ",\"logprobs\":");
        if (comp->p.gen.n_logprobs >= 0)
            srv_render_logprobs(b, r, ch, ch->sent_tokens, ch->n_tokens, with_prompt, offset);
        else
            folio_buf_puts(b, "null");
        folio_buf_puts(b, ",\"finish_reason\":");
    }
    if (final && ch->finish)
        folio_buf_printf(b, "\"%s\"", eng_finish_name(ch->finish));
    else
        folio_buf_puts(b, "null");
    if (!comp->p.chat) {
        folio_buf_puts(b, ",\"token_ids\":");
        srv_render_token_ids(b, ch->tokens + ch->sent_tokens, ch->n_tokens - ch->sent_tokens);
    }
    folio_buf_puts(b, "}]}\n\n");
}

void srv_render_stream_end(struct folio_buf *b, const struct srv_render *r,
                           const struct srv_comp *comp)
{
    if (comp->p.include_usage) {
        chunk_head(b, r, comp);
        folio_buf_puts(b, ",\"choices\":[],");
        srv_render_usage(b, comp);
        folio_buf_puts(b, "}\n\n");
    }
    folio_buf_puts(b, "data: [DONE]\n\n");
}

void srv_render_response(struct folio_buf *b, const struct srv_render *r,
                         const struct srv_comp *comp)
{
    folio_buf_printf(b, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", comp->id,
                     comp->p.chat ? "chat.completion" : "text_completion",
                     (long long)comp->created);
    folio_buf_json_str(b, r->model, strlen(r->model));
    folio_buf_puts(b, ",\"choices\":[");
    for (int i = 0; i < comp->n_choices; i++) {
        const struct srv_choice *ch = &comp->ch[i];
        const char *fin = eng_finish_name(ch->finish ? ch->finish : ENG_FINISH_LENGTH);
        if (comp->p.chat && comp->p.tools && srv_tools_render_choice(b, comp, ch, i))
            continue; /* an assistant message with tool_calls (tools.c) */
        if (comp->p.chat) {
            folio_buf_printf(b, "%s{\"index\":%d,\"message\":{\"role\":\"assistant\",\"content\":",
                             i ? "," : "", i);
            folio_buf_json_str(b, ch->text.p ? ch->text.p : "", ch->text.len);
            folio_buf_puts(b, "},\"logprobs\":");
            if (comp->p.gen.n_logprobs >= 0)
                srv_render_chat_logprobs(b, r, ch, 0, ch->n_tokens);
            else
                folio_buf_puts(b, "null");
            folio_buf_printf(b, ",\"finish_reason\":\"%s\"}", fin);
            continue;
        }
        folio_buf_printf(b, "%s{\"index\":%d,\"text\":", i ? "," : "", i);
        folio_buf_json_str(b, ch->text.p ? ch->text.p : "", ch->text.len);
        folio_buf_puts(b, ",\"logprobs\":");
        if (comp->p.gen.n_logprobs >= 0) {
            int64_t offset = 0;
            srv_render_logprobs(b, r, ch, 0, ch->n_tokens, comp->p.echo, &offset);
        } else
            folio_buf_puts(b, "null");
        if (comp->p.prompt_logprobs >= 0) {
            folio_buf_puts(b, ",\"prompt_logprobs\":");
            srv_render_prompt_logprobs(b, r, comp, ch);
        }
        folio_buf_printf(b, ",\"finish_reason\":\"%s\",\"token_ids\":", fin);
        srv_render_token_ids(b, ch->tokens, ch->n_tokens);
        folio_buf_puts(b, "}");
    }
    folio_buf_puts(b, "],");
    if (comp->p.chat && comp->p.prompt_logprobs >= 0) { /* one prompt: beside the choices */
        folio_buf_puts(b, "\"prompt_logprobs\":");
        srv_render_prompt_logprobs(b, r, comp, &comp->ch[0]);
        folio_buf_puts(b, ",");
    }
    srv_render_usage(b, comp);
    folio_buf_puts(b, "}\n");
}

struct rr_item {
    int32_t index;
    double score;
};

static int rr_cmp(const void *a, const void *b)
{
    const struct rr_item *x = a, *y = b;
    if (x->score != y->score)
        return x->score < y->score ? 1 : -1;
    return (x->index > y->index) - (x->index < y->index);
}

/* The head of a list response (classify, rerank, score, embeddings): its
 * id, object "list", created and model members, unclosed. */
static void list_head(struct folio_buf *b, const struct srv_render *r, const struct srv_comp *comp)
{
    folio_buf_printf(b, "{\"id\":\"%s\",\"object\":\"list\",\"created\":%lld,\"model\":", comp->id,
                     (long long)comp->created);
    folio_buf_json_str(b, r->model, strlen(r->model));
}

void srv_render_classify(struct folio_buf *b, const struct srv_render *r,
                         const struct srv_comp *comp)
{
    const int n = comp->n_choices;
    float *tmp = n ? folio_malloc((size_t)FOLIO_MAX(comp->ch[0].emb.dim, 1) * sizeof(float)) : NULL;
    if (n && !tmp) {
        b->oom = true;
        return;
    }
    list_head(b, r, comp);
    folio_buf_puts(b, ",\"data\":[");
    for (int i = 0; i < n; i++) {
        double p[MODEL_MAX_CLS];
        int32_t k = srv_classify_probs(&comp->ch[i].emb, r->cls_w, r->cls_b, r->n_cls, tmp, p);
        int32_t best = 0;
        for (int32_t c = 1; c < k; c++)
            best = p[c] > p[best] ? c : best;
        folio_buf_printf(b, "%s{\"index\":%d,\"label\":", i ? "," : "", i);
        if (k < 1)
            folio_buf_puts(b, "null");
        else if (r->cls_labels)
            folio_buf_json_str(b, r->cls_labels[best], strlen(r->cls_labels[best]));
        else
            folio_buf_printf(b, "\"LABEL_%d\"", (int)best);
        folio_buf_puts(b, ",\"probs\":[");
        for (int32_t c = 0; c < k; c++)
            folio_buf_printf(b, "%s%.9g", c ? "," : "", isfinite(p[c]) ? p[c] : 0.0);
        folio_buf_printf(b, "],\"num_classes\":%d}", k < 0 ? 0 : (int)k);
    }
    folio_free(tmp);
    folio_buf_printf(b,
                     "],\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld,"
                     "\"completion_tokens\":0,\"prompt_tokens_details\":null}}\n",
                     (long long)comp->prompt_tokens, (long long)comp->prompt_tokens);
}

void srv_render_rerank(struct folio_buf *b, const struct srv_render *r, const struct srv_comp *comp)
{
    const struct srv_rerank_params *rr = &comp->p.rr;
    const int n = comp->n_choices;
    struct rr_item *it = folio_malloc((size_t)FOLIO_MAX(n, 1) * sizeof(*it));
    float *tmp = n ? folio_malloc((size_t)FOLIO_MAX(comp->ch[0].emb.dim, 1) * sizeof(float)) : NULL;
    if (!it || (n && !tmp)) {
        folio_free(it);
        folio_free(tmp);
        b->oom = true;
        return;
    }
    for (int i = 0; i < n; i++) {
        double s = srv_rerank_score(&comp->ch[i].emb, r->cls_w, r->cls_b, r->n_cls, tmp);
        it[i] = (struct rr_item){i, isfinite(s) ? s : 0.0};
    }
    folio_free(tmp);
    qsort(it, (size_t)n, sizeof(*it), rr_cmp);
    const int shown = rr->top_n > 0 && rr->top_n < n ? rr->top_n : n;
    if (!rr->tei) {
        list_head(b, r, comp);
        folio_buf_printf(b,
                         ",\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld},\"results\":",
                         (long long)comp->prompt_tokens, (long long)comp->prompt_tokens);
    }
    folio_buf_puts(b, "[");
    for (int k = 0; k < shown; k++) {
        const char *text = comp->p.prompt_text ? comp->p.prompt_text[it[k].index] : NULL;
        folio_buf_printf(b, "%s{\"index\":%d", k ? "," : "", (int)it[k].index);
        if (!rr->tei && rr->return_documents && text) {
            folio_buf_puts(b, ",\"document\":{\"text\":");
            folio_buf_json_str(b, text, strlen(text));
            folio_buf_puts(b, "}");
        }
        folio_buf_printf(b, ",\"%s\":%.9g", rr->tei ? "score" : "relevance_score", it[k].score);
        if (rr->tei && rr->return_text && text) {
            folio_buf_puts(b, ",\"text\":");
            folio_buf_json_str(b, text, strlen(text));
        }
        folio_buf_puts(b, "}");
    }
    folio_buf_puts(b, rr->tei ? "]\n" : "]}\n");
    folio_free(it);
}

void srv_render_score(struct folio_buf *b, const struct srv_render *r, const struct srv_comp *comp)
{
    float *tmp = folio_malloc((size_t)FOLIO_MAX(comp->n_choices ? comp->ch[0].emb.dim : 1, 1) *
                              sizeof(float));
    if (!tmp) {
        b->oom = true;
        return;
    }
    list_head(b, r, comp);
    folio_buf_puts(b, ",\"data\":[");
    for (int i = 0; i < comp->n_choices; i++) {
        double s = srv_rerank_score(&comp->ch[i].emb, r->cls_w, r->cls_b, r->n_cls, tmp);
        folio_buf_printf(b, "%s{\"index\":%d,\"object\":\"score\",\"score\":%.9g}", i ? "," : "", i,
                         isfinite(s) ? s : 0.0);
    }
    folio_free(tmp);
    folio_buf_printf(b, "],\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld}}\n",
                     (long long)comp->prompt_tokens, (long long)comp->prompt_tokens);
}

void srv_render_embeddings(struct folio_buf *b, const struct srv_render *r,
                           const struct srv_comp *comp)
{
    list_head(b, r, comp);
    folio_buf_puts(b, ",\"data\":[");
    float *v = NULL;
    for (int i = 0; i < comp->n_choices; i++) {
        const struct srv_choice *ch = &comp->ch[i];
        if (!v && !(v = folio_malloc((size_t)FOLIO_MAX(ch->emb.dim, 1) * sizeof(float)))) {
            b->oom = true;
            return;
        }
        int32_t n = srv_emb_finish(&ch->emb, &comp->p.emb, v);
        folio_buf_printf(b, "%s{\"object\":\"embedding\",\"index\":%d,\"embedding\":", i ? "," : "",
                         i);
        srv_emb_json(b, v, n, comp->p.emb.base64);
        folio_buf_puts(b, "}");
    }
    folio_free(v);
    folio_buf_printf(b, "],\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld}}\n",
                     (long long)comp->prompt_tokens, (long long)comp->prompt_tokens);
}
