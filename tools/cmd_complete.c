/*
 * tools/cmd_complete.c — `folio complete`: one completion from a running
 * foliod over its Unix socket, printed as it arrives.
 *
 *   folio complete [--socket PATH] [--max-tokens N] [--temperature T]
 *                  [--seed N] [--stream] [--chat] PROMPT | --tokens 1,2,3
 *
 * PROMPT is sent as text (the server tokenizes it); --tokens sends ids.
 * --chat sends PROMPT as one user message to /v1/chat/completions (the
 * server applies the model's chat template) and prints the reply.
 *
 * One blocking request through the tools' HTTP client (http_client.h).
 * With --stream the
 * SSE events are decoded as they come and each text piece is written to
 * stdout at once.  Errors from the server print their message on stderr
 * (exit status 1).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/buf.h"
#include "folio_cmds.h"
#include "http_client.h"

int cmd_complete(int argc, char **argv);

struct resp {
    bool stream;
    struct folio_buf body; /* accumulated body (non-stream), or unparsed SSE bytes */
    bool done;
};

static void usage(FILE *out)
{
    fprintf(out, "usage: folio complete [--socket PATH] [--max-tokens N] [--temperature T] "
                 "[--seed N] [--stream] [--chat] PROMPT|--tokens IDS\n"
                 "  PROMPT is sent as text; --chat sends it as a user message to\n"
                 "  /v1/chat/completions\n"
                 "  IDS: comma-separated token ids, e.g. --tokens 1,2,3\n");
}

static void print_error(const char *body, int status)
{
    cJSON *j = cJSON_Parse(body);
    cJSON *e = j ? cJSON_GetObjectItem(j, "error") : NULL;
    cJSON *m = e ? cJSON_GetObjectItem(e, "message") : NULL;
    fprintf(stderr, "folio complete: HTTP %d: %s\n", status,
            cJSON_IsString(m) ? m->valuestring : body);
    cJSON_Delete(j);
}

/* Prints the text of every choice in one JSON object (a chunk or the
 * whole response). */
static void print_choices(const char *json)
{
    cJSON *j = cJSON_Parse(json);
    cJSON *ch = j ? cJSON_GetObjectItem(j, "choices") : NULL, *c;
    cJSON_ArrayForEach(c, ch)
    {
        cJSON *t = cJSON_GetObjectItem(c, "text");
        if (!t) { /* chat: message (whole) or delta (stream) */
            cJSON *m = cJSON_GetObjectItem(c, "message");
            if (!m)
                m = cJSON_GetObjectItem(c, "delta");
            t = m ? cJSON_GetObjectItem(m, "content") : NULL;
        }
        if (cJSON_IsString(t))
            fputs(t->valuestring, stdout);
    }
    fflush(stdout);
    cJSON_Delete(j);
}

/* Consumes complete SSE events from r->body. */
static void sse_drain(struct resp *r)
{
    char *start = r->body.p;
    for (;;) {
        char *end = strstr(start, "\n\n");
        if (!end)
            break;
        *end = 0;
        if (!strncmp(start, "data: ", 6)) {
            if (!strcmp(start + 6, "[DONE]"))
                r->done = true;
            else
                print_choices(start + 6);
        }
        start = end + 2;
    }
    size_t used = (size_t)(start - r->body.p);
    memmove(r->body.p, start, r->body.len - used + 1);
    r->body.len -= used;
}

static int on_body(void *user, int status, const char *p, size_t n)
{
    struct resp *r = user;
    folio_buf_append(&r->body, p, n);
    if (r->body.oom)
        return -1;
    if (r->stream && status == 200)
        sse_drain(r);
    return 0;
}

int cmd_complete(int argc, char **argv)
{
    const char *sock = NULL, *prompt = NULL, *tokens = NULL;
    long max_tokens = 64, seed = -1;
    double temperature = -1;
    bool stream = false, chat = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--socket") && has)
            sock = argv[++i];
        else if (!strcmp(a, "--max-tokens") && has)
            max_tokens = strtol(argv[++i], NULL, 10);
        else if (!strcmp(a, "--temperature") && has)
            temperature = strtod(argv[++i], NULL);
        else if (!strcmp(a, "--seed") && has)
            seed = strtol(argv[++i], NULL, 10);
        else if (!strcmp(a, "--tokens") && has)
            tokens = argv[++i];
        else if (!strcmp(a, "--stream"))
            stream = true;
        else if (!strcmp(a, "--chat"))
            chat = true;
        else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "folio complete: unknown option or missing value: %s\n", a);
            usage(stderr);
            return 2;
        } else if (!prompt)
            prompt = a;
        else {
            fprintf(stderr, "folio complete: one PROMPT only\n");
            return 2;
        }
    }
    if (!prompt == !tokens || (chat && tokens)) {
        usage(stderr);
        return 2;
    }
    char defsock[4096];
    if (!sock) {
        const char *x = getenv("XDG_RUNTIME_DIR");
        snprintf(defsock, sizeof(defsock), "%s/foliod.sock", x && *x ? x : ".");
        sock = defsock;
    }
    struct bench_target tgt;
    char err[300];
    if (bench_target_unix(&tgt, sock, err, sizeof(err))) {
        fprintf(stderr, "folio complete: %s\n", err);
        return 2;
    }

    cJSON *req = cJSON_CreateObject();
    if (tokens) {
        cJSON *arr = cJSON_AddArrayToObject(req, "prompt");
        for (const char *p = tokens; *p;) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p) {
                fprintf(stderr, "folio complete: --tokens: bad list '%s'\n", tokens);
                cJSON_Delete(req);
                return 2;
            }
            cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)v));
            p = *end == ',' ? end + 1 : end;
        }
    } else if (chat) {
        cJSON *msgs = cJSON_AddArrayToObject(req, "messages");
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", prompt);
        cJSON_AddItemToArray(msgs, m);
    } else
        cJSON_AddStringToObject(req, "prompt", prompt);
    cJSON_AddNumberToObject(req, "max_tokens", (double)max_tokens);
    if (temperature >= 0)
        cJSON_AddNumberToObject(req, "temperature", temperature);
    if (seed >= 0)
        cJSON_AddNumberToObject(req, "seed", (double)seed);
    if (stream)
        cJSON_AddTrueToObject(req, "stream");
    char *body = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);

    struct resp r = {.stream = stream};
    const struct http_client_req hr = {
        .method = "POST",
        .path = chat ? "/v1/chat/completions" : "/v1/completions",
        .body = body,
        .body_len = strlen(body),
        .on_body = on_body,
        .user = &r,
    };
    int status = 0, rc = 1;
    int hrc = http_client_request(&tgt, &hr, &status, NULL, err, sizeof(err));
    if (hrc && !status) {
        fprintf(stderr, "folio complete: %s\n", err);
    } else if (status != 200) {
        print_error(r.body.p ? r.body.p : "", status);
    } else if (!stream && r.body.p) {
        print_choices(r.body.p);
        rc = hrc ? 1 : 0;
    } else {
        rc = r.done ? 0 : 1;
    }
    if (hrc && status)
        fprintf(stderr, "folio complete: %s\n", err);
    if (status == 200)
        fputc('\n', stdout);
    folio_buf_free(&r.body);
    free(body);
    return rc;
}
