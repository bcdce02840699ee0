/*
 * tests/fuzz/fuzz_http.c — libFuzzer harness: arbitrary bytes sent by a
 * client on a real connection to daemon/http*.c (the daemon's own accept,
 * read, llhttp parsing, pipelining, output queue and close paths), on a
 * Unix socket in a temporary directory.
 *
 * Input: byte 0 picks how the bytes are cut into writes (1, 3, 17, 256
 * bytes or all at once: bits 0-2) and how the client ends (bit 3: shuts
 * its write side after sending, as socat does; else it keeps the
 * connection until the server is quiet, then closes it); the rest is what
 * the client sends.  The request handler answers by the first letters of
 * the path, so the fuzzer reaches every output path: "/s" a stream
 * finished on a later loop turn, "/h" a held answer, "/f" a stream cut
 * short (http_conn_fail), "/e" an error, "/c" a held request failed before
 * its headers, anything else an echo of the body.
 * Checked on every input, aborting (a libFuzzer finding) when false:
 *   - each request view is well-formed: NUL-terminated URL with path_len
 *     inside it, body NUL-terminated and no longer than --max-body;
 *   - everything the server sent parses as a sequence of HTTP/1.1
 *     responses (llhttp in response mode; not checked when a HEAD request
 *     was answered, whose body a response parser cannot expect), the last
 *     one whole when the server closed the connection;
 *   - once the client has closed, the server closes the connection within
 *     a bounded number of loop turns, and every held request was either
 *     finished or abandoned (no connection, timer or request leaks: the
 *     leak checker sees the rest).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <llhttp.h>
#include <uv.h>

#include "folio/common.h"
#include "http.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_BODY 4096
#define MAX_OUT  (1 << 20) /* received bytes kept for the response check */

static uv_loop_t loop;
static uv_pipe_t listener;
static struct http_server hs;
static char sock_path[108];
static int n_held; /* held requests not yet finished or abandoned */
static bool saw_head;

/* A request held past on_request, finished on a later loop turn. */
struct held {
    uv_timer_t t;
    struct http_conn *c; /* NULL once abandoned */
    char kind;
    char *body;
    size_t len;
};

static void held_closed(uv_handle_t *h)
{
    struct held *x = h->data;
    free(x->body);
    free(x);
}

static void held_fire(uv_timer_t *t)
{
    struct held *x = t->data;
    struct http_conn *c = x->c;
    if (c) {
        struct srv_api_error e;
        srv_api_error_set(&e, 500, "server_error", NULL, "fuzz", "cut short");
        if (x->kind == 'f' || x->kind == 'c') {
            http_conn_fail(c, &e); /* in a stream, or before the headers */
            CHECK(!x->c);          /* it abandoned the request */
            uv_close((uv_handle_t *)t, held_closed);
            return;
        }
        x->c = NULL;
        n_held--;
        if (x->kind == 's') {
            http_stream_chunk(c, x->body, x->len);
            http_stream_chunk(c, "data: [DONE]\n\n", 14);
            http_stream_end(c);
            http_request_done(c);
        } else {
            http_respond(c, 200, "text/plain", x->body, x->len, NULL);
            http_request_done(c);
        }
    }
    uv_close((uv_handle_t *)t, held_closed);
}

static void on_abandon(void *user, void *active)
{
    (void)user;
    struct held *x = active;
    CHECK(x->c);
    x->c = NULL;
    n_held--;
}

static void on_request(void *user, struct http_conn *c, const struct http_request *rq)
{
    (void)user;
    size_t ul = strlen(rq->url);
    CHECK(rq->path_len <= ul);
    CHECK(rq->body && rq->body[rq->body_len] == 0 && rq->body_len <= MAX_BODY);
    CHECK(rq->method_name);
    if (!strcmp(rq->method_name, "HEAD"))
        saw_head = true;
    char kind = ul >= 2 && rq->url[0] == '/' ? rq->url[1] : 0;
    if (kind == 's' || kind == 'h' || kind == 'f' || kind == 'c') {
        struct held *x = calloc(1, sizeof(*x));
        CHECK(x);
        x->body = malloc(rq->body_len + 1);
        CHECK(x->body);
        memcpy(x->body, rq->body, rq->body_len);
        x->len = rq->body_len;
        x->c = c;
        x->kind = kind;
        uv_timer_init(&loop, &x->t);
        x->t.data = x;
        uv_timer_start(&x->t, held_fire, 0, 0);
        n_held++;
        http_conn_hold(c, x);
        if (kind == 's' || kind == 'f') {
            if (http_stream_begin(c) == 0)
                http_stream_chunk(c, "data: {}\n\n", 10);
        }
        return;
    }
    if (kind == 'e') {
        struct srv_api_error e;
        srv_api_error_set(&e, 404, "NotFoundError", NULL, NULL, "no route for %.*s",
                          (int)FOLIO_MIN(rq->path_len, 64), rq->url);
        http_error(c, &e, NULL);
        return;
    }
    http_respond(c, 200, "application/octet-stream", rq->body, rq->body_len, NULL);
}

static void on_conn(uv_stream_t *l, int status)
{
    if (status == 0)
        http_accept(&hs, l, false);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char dir[] = "/tmp/fuzz-http.XXXXXX";
    CHECK(mkdtemp(dir));
    snprintf(sock_path, sizeof(sock_path), "%s/s", dir);
    CHECK(!uv_loop_init(&loop));
    CHECK(!uv_pipe_init(&loop, &listener, 0));
    CHECK(!uv_pipe_bind(&listener, sock_path));
    CHECK(!uv_listen((uv_stream_t *)&listener, 16, on_conn));
    struct http_limits lim = {.max_body = MAX_BODY,
                              .max_pending_output = 16384,
                              .idle_timeout_ms = 0,
                              .max_connections = 8};
    struct http_callbacks cb = {.on_request = on_request, .on_abandon = on_abandon};
    http_server_init(&hs, &loop, &lim, &cb);
    return 0;
}

/* What the client received. */
static char *out;
static size_t out_len;
static bool out_truncated, peer_closed;

static void client_drain(int fd)
{
    char buf[65536];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0)
            peer_closed = true;
        if (n <= 0)
            return;
        if (out_len + (size_t)n > MAX_OUT) {
            out_truncated = true;
            continue;
        }
        memcpy(out + out_len, buf, (size_t)n);
        out_len += (size_t)n;
    }
}

static void turn(int fd)
{
    uv_run(&loop, UV_RUN_NOWAIT);
    client_drain(fd);
}

static int on_resp_complete(llhttp_t *p)
{
    (void)p;
    return 0;
}

static void check_responses(void)
{
    if (out_truncated || saw_head || !out_len)
        return;
    llhttp_settings_t s;
    llhttp_settings_init(&s);
    s.on_message_complete = on_resp_complete;
    llhttp_t p;
    llhttp_init(&p, HTTP_RESPONSE, &s);
    llhttp_errno_t rc = llhttp_execute(&p, out, out_len);
    if (rc == HPE_OK && peer_closed) /* the server ended it: the last response is whole */
        rc = llhttp_finish(&p);
    if (rc != HPE_OK)
        fprintf(stderr, "bad response stream (%s: %s) in:\n%.*s\n", llhttp_errno_name(rc),
                llhttp_get_error_reason(&p), (int)FOLIO_MIN(out_len, 2000), out);
    CHECK(rc == HPE_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t cuts[] = {1, 3, 17, 256, SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX};
    if (size < 1)
        return 0;
    size_t cut = cuts[data[0] & 7];
    bool half_close = data[0] & 8;
    data++;
    size--;
    if (!out)
        CHECK((out = malloc(MAX_OUT)));
    out_len = 0;
    out_truncated = peer_closed = saw_head = false;

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, sock_path, strlen(sock_path) + 1);
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    turn(fd); /* accept */
    for (size_t off = 0; off < size && !peer_closed;) {
        size_t n = FOLIO_MIN(cut, size - off);
        ssize_t w = send(fd, data + off, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0)
            off += (size_t)w;
        else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            break; /* the server closed */
        turn(fd);
    }
    if (half_close)
        shutdown(fd, SHUT_WR);
    /* let the server answer; then (unless it closed) close our side */
    for (int i = 0; i < 64 && !peer_closed && hs.st.n_open; i++)
        turn(fd);
    close(fd);
    for (int i = 0; i < 10000 && (hs.st.n_open || n_held); i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    if (hs.st.n_open || n_held)
        fprintf(stderr, "after the client closed: %d connections open, %d requests held\n",
                hs.st.n_open, n_held);
    CHECK(hs.st.n_open == 0 && n_held == 0);
    /* held requests' timers close on their own turn */
    for (int i = 0; i < 4; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    check_responses();
    return 0;
}
