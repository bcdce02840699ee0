/*
 * daemon/api_rerank.c — /v1/rerank's request: the query, and one prompt
 * per document (api.h, srv_rerank_parse, says what each holds).
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

/* One document's prompt, appended to p (takes nothing of the caller's). */
static int document_prompt(const char *doc, const struct bos *pre, const struct eng_model_info *mi,
                           srv_tokenize_fn tok, void *tok_ctx, struct srv_comp_params *p,
                           struct srv_api_error *err)
{
    const char *pf = p->rr.tei ? "texts" : "documents";
    int32_t *ids = NULL, n = 0;
    int rc;
    if (mi->rerank_tmpl) {
        struct folio_buf b = {0};
        render_template(&b, mi->rerank_tmpl, p->rr.query, doc);
        rc = b.oom ? -ENOMEM : tok(tok_ctx, b.p ? b.p : "", b.len, true, &ids, &n);
        folio_buf_free(&b);
        if (!rc) {
            int32_t k = bos_prefix(pre, ids, n);
            memmove(ids, ids + k, (size_t)(n - k) * sizeof(int32_t));
            n -= k;
        }
    } else {
        int32_t *q = NULL, nq = 0, *d = NULL, nd = 0;
        rc = tok(tok_ctx, p->rr.query, strlen(p->rr.query), false, &q, &nq);
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

int srv__rerank_prompts(const cJSON *v, const struct eng_model_info *mi, srv_tokenize_fn tok,
                        void *tok_ctx, struct srv_comp_params *p, struct srv_api_error *err)
{
    const char *pf = p->rr.tei ? "texts" : "documents";
    if (!cJSON_IsArray(v) || !v->child)
        BAD(pf, "'%s' must be a non-empty array of %s", pf,
            p->rr.tei ? "strings" : "strings or {\"text\": string} objects");
    if (!tok)
        BAD(pf, "reranking needs a tokenizer, and this server has none");
    struct bos pre = {0};
    if (tok(tok_ctx, "", 0, false, &pre.ids, &pre.n))
        pre = (struct bos){0};
    int i = 0, rc = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, v)
    {
        const cJSON *t = it;
        if (!p->rr.tei && cJSON_IsObject(it))
            t = cJSON_GetObjectItemCaseSensitive(it, "text");
        if (!cJSON_IsString(t)) {
            srv_api_error_set(err, 400, "invalid_request_error", pf, NULL,
                              "%s item %d must be a %s", pf, i,
                              p->rr.tei ? "string" : "string or an object with a \"text\" string");
            rc = -EINVAL;
        } else
            rc = document_prompt(t->valuestring, &pre, mi, tok, tok_ctx, p, err);
        if (rc)
            break;
        i++;
    }
    folio_free(pre.ids);
    return rc;
}
