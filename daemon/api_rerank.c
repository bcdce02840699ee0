/*
 * daemon/api_rerank.c — /v1/rerank's request: the query, and one prompt
 * per document (api.h, srv_rerank_parse, says what each holds); and
 * vLLM's /v1/score, the same prompts from (text_1, text_2) pairs.
 *
 * A document is a string or an object with a "text" string (Jina's and
 * Cohere's forms; TEI's `texts` are strings).  Its prompt:
 *   - with the model's rerank template (tokenizer.chat_template.rerank,
 *     as llama.cpp's converter writes Qwen3 rerankers): every {query} and
 *     {document} in it replaced by the texts, then tokenized with control
 *     tokens parsed and without the BOS the tokenizer adds (the template
 *     is the whole prompt, as llama-server tokenizes it);
 *   - without: the query's tokens (with the model's BOS, and EOS if it
 *     adds one), then the document's (with EOS if the model adds one).
 * prompt_text[i] keeps the document's text for the answer.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <string.h>

#include "api.h"
#include "api_internal.h"
#include "folio/buf.h"
#include "folio/common.h"

int srv__parse_query(const void *json, const struct eng_model_info *mi, struct srv_comp_params *p,
                     struct srv_api_error *err)
{
    const cJSON *v = json;
    (void)mi;
    if (!cJSON_IsString(v))
        BAD("query", "'query' must be a string");
    if (!(p->rr.query = folio_strdup(v->valuestring)))
        return -ENOMEM;
    return 0;
}

/* The tokens the tokenizer puts before any text (the model's BOS, found
 * by tokenizing the empty text): how many of them start ids[0..n). */
struct bos {
    int32_t *ids, n;
};

static int32_t bos_prefix(const struct bos *pre, const int32_t *ids, int32_t n)
{
    return pre->n <= n && !memcmp(pre->ids, ids, (size_t)pre->n * sizeof(int32_t)) ? pre->n : 0;
}

/* tmpl with every {query} and {document} replaced. */
static void render_template(struct folio_buf *b, const char *tmpl, const char *query,
                            const char *doc)
{
    for (const char *s = tmpl; *s;) {
        if (!strncmp(s, "{query}", 7)) {
            folio_buf_puts(b, query);
            s += 7;
        } else if (!strncmp(s, "{document}", 10)) {
            folio_buf_puts(b, doc);
            s += 10;
        } else
            folio_buf_append(b, s++, 1);
    }
}

/* The documents' field as the request named it. */
static const char *docs_field(const struct srv_comp_params *p)
{
    return p->rr.score ? "text_2" : p->rr.tei ? "texts" : "documents";
}

/* One (query, document) prompt, appended to p (takes nothing of the
 * caller's). */
static int document_prompt(const char *query, const char *doc, const struct bos *pre,
                           const struct eng_model_info *mi, srv_tokenize_fn tok, void *tok_ctx,
                           struct srv_comp_params *p, struct srv_api_error *err)
{
    const char *pf = docs_field(p);
    int32_t *ids = NULL, n = 0;
    int rc;
    if (mi->rerank_tmpl) {
        struct folio_buf b = {0};
        render_template(&b, mi->rerank_tmpl, query, doc);
        rc = b.oom ? -ENOMEM : tok(tok_ctx, b.p ? b.p : "", b.len, true, &ids, &n);
        folio_buf_free(&b);
        if (!rc) {
            int32_t k = bos_prefix(pre, ids, n);
            memmove(ids, ids + k, (size_t)(n - k) * sizeof(int32_t));
            n -= k;
        }
    } else {
        int32_t *q = NULL, nq = 0, *d = NULL, nd = 0;
        rc = tok(tok_ctx, query, strlen(query), false, &q, &nq);
        if (!rc)
            rc = tok(tok_ctx, doc, strlen(doc), false, &d, &nd);
        if (!rc) {
            int32_t k = bos_prefix(pre, d, nd);
            if (!(ids = folio_malloc((size_t)FOLIO_MAX(nq + nd - k, 1) * sizeof(int32_t))))
                rc = -ENOMEM;
            else {
                memcpy(ids, q, (size_t)nq * sizeof(int32_t));
                memcpy(ids + nq, d + k, (size_t)(nd - k) * sizeof(int32_t));
                n = nq + nd - k;
            }
        }
        folio_free(q);
        folio_free(d);
    }
    if (rc == -ENOSYS)
        BAD(pf, "reranking needs a tokenizer, and this model has none");
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0)
        BAD(pf, "cannot tokenize a document (%s)", strerror(-rc));
    if (n == 0) {
        folio_free(ids);
        BAD(pf, "a document's prompt has no tokens (an empty query and document)");
    }
    char *text = folio_strdup(doc);
    if (!text) {
        folio_free(ids);
        return -ENOMEM;
    }
    return srv__add_prompt(p, ids, n, text, err);
}

int srv__parse_text_1(const void *json, const struct eng_model_info *mi, struct srv_comp_params *p,
                      struct srv_api_error *err)
{
    const cJSON *v = json, *it;
    (void)mi;
    int n = cJSON_IsString(v) ? 1 : cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
    if (n < 1 || n > SRV_MAX_INPUTS)
        BAD("text_1", "'text_1' must be a string or a list of 1 to %d strings", SRV_MAX_INPUTS);
    if (!(p->rr.queries = folio_calloc((size_t)n, sizeof(char *))))
        return -ENOMEM;
    if (cJSON_IsString(v))
        it = v;
    else {
        it = v->child;
        for (const cJSON *x = it; x; x = x->next)
            if (!cJSON_IsString(x))
                BAD("text_1", "'text_1' must be a string or a list of strings");
    }
    for (; it && p->rr.n_queries < n; it = it->next)
        if (!(p->rr.queries[p->rr.n_queries++] = folio_strdup(it->valuestring)))
            return -ENOMEM;
    return 0;
}

int srv__rerank_prompts(const cJSON *v, const struct eng_model_info *mi, srv_tokenize_fn tok,
                        void *tok_ctx, struct srv_comp_params *p, struct srv_api_error *err)
{
    const char *pf = docs_field(p);
    const cJSON *one = cJSON_IsString(v) && p->rr.score ? v : NULL; /* score: a single text_2 */
    if (!one && (!cJSON_IsArray(v) || !v->child))
        BAD(pf, "'%s' must be a non-empty array of %s", pf,
            p->rr.tei || p->rr.score ? "strings" : "strings or {\"text\": string} objects");
    const int n_docs = one ? 1 : cJSON_GetArraySize(v);
    if (p->rr.score && p->rr.n_queries != 1 && p->rr.n_queries != n_docs)
        BAD("text_2",
            "'text_1' has %d texts and 'text_2' %d: give one text_1, or as many as text_2 (pairs "
            "by index)",
            (int)p->rr.n_queries, n_docs);
    if (!tok)
        BAD(pf, "reranking needs a tokenizer, and this server has none");
    struct bos pre = {0};
    if (tok(tok_ctx, "", 0, false, &pre.ids, &pre.n))
        pre = (struct bos){0};
    int i = 0, rc = 0;
    for (const cJSON *it = one ? one : v->child; it; it = one ? NULL : it->next) {
        const cJSON *t = it;
        if (!p->rr.tei && !p->rr.score && cJSON_IsObject(it))
            t = cJSON_GetObjectItemCaseSensitive(it, "text");
        const char *query = !p->rr.score           ? p->rr.query
                            : p->rr.n_queries == 1 ? p->rr.queries[0]
                                                   : p->rr.queries[i];
        if (!cJSON_IsString(t)) {
            srv_api_error_set(
                err, 400, "invalid_request_error", pf, NULL, "%s item %d must be a %s", pf, i,
                p->rr.tei || p->rr.score ? "string" : "string or an object with a \"text\" string");
            rc = -EINVAL;
        } else
            rc = document_prompt(query, t->valuestring, &pre, mi, tok, tok_ctx, p, err);
        if (rc)
            break;
        i++;
    }
    folio_free(pre.ids);
    return rc;
}
