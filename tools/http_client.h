/*
 * tools/http_client.h — the tools' one blocking HTTP/1.1 client (`folio
 * complete`, `folio top`, `folio bench`'s probe of /v1/models).  One
 * request per connection (Connection: close) to a struct bench_target
 * (Unix socket or TCP, tools/bench_run.h); the response is parsed by
 * llhttp (Content-Length, chunked or read-to-EOF bodies) and its body
 * handed to a callback as it arrives, or collected.
 *
 * folio bench's load itself runs on its own client (bench_run.c: many
 * connections on a libuv loop, a timestamp per read); this one is for
 * the single requests around it.
 *
 * Threading: blocking calls on the caller's thread, nothing shared.
 */
#ifndef FOLIO_TOOLS_HTTP_CLIENT_H
#define FOLIO_TOOLS_HTTP_CLIENT_H

#include <signal.h>
#include <stddef.h>

#include "bench_run.h"
#include "folio/buf.h"

struct http_client_req {
    const char *method;  /* "GET", "POST" */
    const char *path;    /* after the target's URL prefix */
    const char *api_key; /* Authorization: Bearer KEY; NULL: none */
    const char *body;    /* JSON request body (Content-Type:
                            application/json); NULL: none */
    size_t body_len;
    double timeout_s;                  /* silence that fails with -ETIMEDOUT; <= 0: wait forever */
    const volatile sig_atomic_t *stop; /* set (by a signal handler): -EINTR; may be NULL */
    /* Each piece of the body as it arrives (chunked encoding undone),
     * with the response's status; a non-zero return stops reading
     * (-ECANCELED).  NULL: the body is collected into *body. */
    int (*on_body)(void *user, int status, const char *p, size_t n);
    void *user;
};

/* Sends r to t and reads the whole response.  *status: the HTTP status
 * (0 when none arrived); body (when r->on_body is NULL; may then be NULL
 * to drop it) receives the body, appended.  0 when a complete response
 * arrived; -errno from connect/send/poll/read, -ETIMEDOUT, -EINTR (stop
 * flag), -EPROTO (malformed or truncated response), -ECANCELED, -ENOMEM;
 * err (when non-NULL) says which. */
int http_client_request(const struct bench_target *t, const struct http_client_req *r, int *status,
                        struct folio_buf *body, char *err, size_t errlen);

/* GET path with a 10 s timeout: the body into *body. */
int http_client_get(const struct bench_target *t, const char *path, const char *api_key,
                    int *status, struct folio_buf *body, char *err, size_t errlen);

#endif
