/*
 * tools/bench_sse.c — Server-Sent Events framing and the streaming-chunk
 * scanner of `folio bench` (API in bench_core.h).
 *
 * SSE framing (the WHATWG event-stream rules, as far as a client of an
 * OpenAI-style server needs them):
 *
 *     bytes ──► lines (ended by "\n", "\r\n" or "\r") ──► fields
 *        "data:" [" "] VALUE   appends VALUE (+ '\n' between lines) to data
 *        ":" ...               comment, ignored
 *        other fields          (event, id, retry) ignored
 *        ""  (blank line)      dispatches the event if it has data
 *
 * The parser owns two buffers, `line` (the incomplete line) and `data`
 * (the event being built); both only grow, so a long stream reuses them and
 * allocates nothing per event once they are large enough.  Input may be
 * split anywhere, including between '\r' and '\n' (flag `cr`).
 *
 * The chunk scanner walks one JSON payload once, without a tree: it keeps
 * the last object key it saw and the nesting depth, and looks only at the
 * keys it needs (text / content / delta, token_ids, finish_reason, usage.*,
 * error, and a top-level "type": OpenAI Responses and Anthropic Messages
 * events name themselves, and only their text deltas count as text;
 * their usage says input_tokens / output_tokens).
 * Strings are skipped with their escapes, so key names quoted inside text
 * never match.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench_core.h"
#include "folio/common.h"

void bench_sse_init(struct bench_sse *s)
{
    memset(s, 0, sizeof(*s));
}

void bench_sse_free(struct bench_sse *s)
{
    folio_buf_free(&s->line);
    folio_buf_free(&s->data);
    memset(s, 0, sizeof(*s));
}

/* One complete line (without its terminator). */
static int sse_line(struct bench_sse *s, const char *l, size_t n, bench_sse_fn fn, void *user)
{
    if (n == 0) {
        if (s->has_data)
            fn(user, s->data.p, s->data.len); /* NUL-terminated */
        s->has_data = false;
        s->data.len = 0;
        return 0;
    }
    if (l[0] == ':')
        return 0;
    const char *colon = memchr(l, ':', n);
    size_t fl = colon ? (size_t)(colon - l) : n;
    if (fl != 4 || memcmp(l, "data", 4))
        return 0;
    const char *v = colon ? colon + 1 : l + n;
    if (v < l + n && *v == ' ')
        v++;
    size_t vl = (size_t)(l + n - v);
    if (s->has_data)
        folio_buf_append(&s->data, "\n", 1);
    folio_buf_append(&s->data, v, vl); /* also when vl == 0: data.p is set */
    if (s->data.oom)
        return s->oom = -ENOMEM;
    s->has_data = true;
    return 0;
}

int bench_sse_feed(struct bench_sse *s, const char *p, size_t n, bench_sse_fn fn, void *user)
{
    if (s->oom)
        return s->oom;
    const char *end = p + n;
    while (p < end) {
        if (s->cr) {
            s->cr = false;
            if (*p == '\n') {
                p++;
                continue;
            }
        }
        /* find the next terminator */
        const char *q = p;
        while (q < end && *q != '\n' && *q != '\r')
            q++;
        if (q == end) {
            folio_buf_append(&s->line, p, (size_t)(q - p));
            if (s->line.oom)
                return s->oom = -ENOMEM;
            break;
        }
        int rc;
        if (s->line.len) {
            folio_buf_append(&s->line, p, (size_t)(q - p));
            if (s->line.oom)
                return s->oom = -ENOMEM;
            rc = sse_line(s, s->line.p, s->line.len, fn, user);
            s->line.len = 0;
        } else
            rc = sse_line(s, p, (size_t)(q - p), fn, user);
        if (rc)
            return rc;
        s->cr = *q == '\r';
        p = q + 1;
    }
    return 0;
}

int bench_sse_finish(struct bench_sse *s, bench_sse_fn fn, void *user)
{
    if (s->oom)
        return s->oom;
    int rc = 0;
    if (s->line.len) {
        rc = sse_line(s, s->line.p, s->line.len, fn, user);
        s->line.len = 0;
    }
    if (!rc)
        rc = sse_line(s, "", 0, fn, user);
    return rc;
}

/* ---- chunk scanner ---------------------------------------------------- */

struct scan {
    const char *p, *end;
};

static void skip_ws(struct scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

/* At an opening quote: skips the string; returns its raw contents. */
static int scan_string(struct scan *s, const char **str, size_t *len)
{
    const char *b = ++s->p;
    while (s->p < s->end && *s->p != '"') {
        if (*s->p == '\\')
            s->p++;
        s->p++;
    }
    if (s->p >= s->end)
        return -EINVAL;
    *str = b;
    *len = (size_t)(s->p - b);
    s->p++;
    return 0;
}

static bool key_is(const char *k, size_t kl, const char *want)
{
    size_t wl = strlen(want);
    return kl == wl && !memcmp(k, want, wl);
}

int bench_chunk_scan(const char *p, size_t n, struct bench_chunk *out)
{
    memset(out, 0, sizeof(*out));
    out->usage_prompt = -1;
    out->usage_completion = -1;
    struct scan s = {p, p + n};
    skip_ws(&s);
    if ((size_t)(s.end - s.p) >= 6 && !memcmp(s.p, "[DONE]", 6)) {
        out->done = true;
        return 0;
    }
    if (s.p >= s.end || *s.p != '{')
        return -EINVAL;
    int depth = 0, usage_depth = -1;
    const char *key = NULL;
    size_t key_len = 0;
    int ids_depth = -1; /* depth of the token_ids array being counted */
    bool ids_elem = false;
    int32_t n_ids = 0;
    const char *type = NULL; /* the event's own "type" (Responses, Messages) */
    size_t type_len = 0;
    while (s.p < s.end) {
        char c = *s.p;
        if (c == '"') {
            const char *str;
            size_t len;
            if (scan_string(&s, &str, &len))
                return -EINVAL;
            skip_ws(&s);
            if (s.p < s.end && *s.p == ':') {
                s.p++;
                key = str;
                key_len = len;
                if (depth == 1 && key_is(key, key_len, "error"))
                    out->has_error = true;
                continue;
            }
            if (key && depth == 1 && key_is(key, key_len, "type")) {
                type = str;
                type_len = len;
            } else if (key &&
                       (key_is(key, key_len, "text") || key_is(key, key_len, "content") ||
                        key_is(key, key_len, "delta")) &&
                       len)
                out->has_text = true;
            else if (key && key_is(key, key_len, "finish_reason")) {
                out->finished = true;
                out->finish_error |= key_is(str, len, "error");
            }
            key = NULL;
            continue;
        }
        if (c == '{' || c == '[') {
            depth++;
            if (c == '{' && key && key_is(key, key_len, "usage") && usage_depth < 0)
                usage_depth = depth;
            if (c == '[' && key && key_is(key, key_len, "token_ids") && ids_depth < 0) {
                ids_depth = depth;
                out->has_token_ids = true;
            }
            key = NULL;
            s.p++;
            continue;
        }
        if (c == '}' || c == ']') {
            if (ids_depth == depth) {
                n_ids += ids_elem;
                ids_depth = -1;
                ids_elem = false;
            }
            if (usage_depth == depth)
                usage_depth = -1 - 1000; /* one usage object only */
            depth--;
            key = NULL;
            s.p++;
            if (depth == 0)
                break;
            continue;
        }
        if (c == ',') {
            if (ids_depth == depth && ids_elem) {
                n_ids++;
                ids_elem = false;
            }
            key = NULL;
            s.p++;
            continue;
        }
        if ((c >= '0' && c <= '9') || c == '-') {
            /* integers are what we read; fractions and exponents are skipped */
            bool neg = c == '-';
            const char *q = s.p + neg;
            int64_t v = 0;
            while (q < s.end && *q >= '0' && *q <= '9') {
                if (v < INT64_MAX / 10)
                    v = v * 10 + (*q - '0');
                q++;
            }
            while (q < s.end && ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E' ||
                                 *q == '+' || *q == '-'))
                q++;
            if (neg)
                v = -v;
            const char *e = q;
            if (ids_depth == depth)
                ids_elem = true;
            if (usage_depth == depth && key) {
                if (key_is(key, key_len, "completion_tokens") ||
                    key_is(key, key_len, "output_tokens")) {
                    out->usage_completion = (int64_t)v;
                    out->has_usage = true;
                } else if (key_is(key, key_len, "prompt_tokens") ||
                           key_is(key, key_len, "input_tokens"))
                    out->usage_prompt = (int64_t)v;
            }
            key = NULL;
            s.p = e;
            continue;
        }
        /* true, false, null, whitespace, ':' */
        if (c == 'n' && key) /* null: finish_reason null is not a finish */
            key = NULL;
        s.p++;
    }
    if (depth != 0)
        return -EINVAL;
    /* Responses and Messages events: only their text deltas carry new
     * text (the others repeat it: .done events, the final response);
     * an "error" event is an error */
    if (type && type_len > 9 && !memcmp(type, "response.", 9))
        out->has_text &= key_is(type, type_len, "response.output_text.delta");
    else if (type && !key_is(type, type_len, "content_block_delta"))
        out->has_text = false;
    if (type && (key_is(type, type_len, "error") || key_is(type, type_len, "response.failed")))
        out->has_error = true;
    if (out->has_token_ids)
        out->n_tokens = n_ids;
    else
        out->n_tokens = out->has_text ? 1 : 0;
    return 0;
}
