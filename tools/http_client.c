/*
 * tools/http_client.c — blocking HTTP/1.1 requests (API and contract in
 * http_client.h).
 *
 * One call: connect (AF_UNIX path, or the target's resolved TCP address),
 * send the head and body (MSG_NOSIGNAL: a closed peer is an error, not a
 * SIGPIPE), then poll + read until llhttp reports the message complete or
 * the peer closes (llhttp_finish decides whether a read-to-EOF body was
 * whole).  Every wait is a poll bounded by the timeout; a signal
 * interrupts it, and the caller's stop flag is checked after each wake.
 */
#include "http_client.h"

#include <errno.h>
#include <llhttp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "folio/common.h"

struct call {
    const struct http_client_req *r;
    struct folio_buf *body;
    int status;
    bool done, cancelled;
};

static int on_headers_complete(llhttp_t *p)
{
    struct call *c = p->data;
    c->status = p->status_code;
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    struct call *c = p->data;
    if (c->r->on_body) {
        if (c->r->on_body(c->r->user, c->status, at, n)) {
            c->cancelled = true;
            return -1;
        }
    } else if (c->body) {
        folio_buf_append(c->body, at, n);
    }
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    struct call *c = p->data;
    c->done = true;
    return 0;
}

static int connect_target(const struct bench_target *t)
{
    int fd;
    if (t->is_unix) {
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        if (strlen(t->path) >= sizeof(a.sun_path))
            return -ENAMETOOLONG;
        memcpy(a.sun_path, t->path, strlen(t->path) + 1);
        if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
            return -errno;
        if (connect(fd, (const struct sockaddr *)&a, sizeof(a)) == 0)
            return fd;
    } else {
        const socklen_t len = t->addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                            : sizeof(struct sockaddr_in);
        if ((fd = socket(t->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
            return -errno;
        if (connect(fd, (const struct sockaddr *)&t->addr, len) == 0)
            return fd;
    }
    int e = errno;
    close(fd);
    return -e;
}

/* Waits until fd is ready for ev: 0, -ETIMEDOUT, -EINTR (stop), -errno. */
static int wait_fd(int fd, short ev, const struct http_client_req *r)
{
    const int ms = r->timeout_s > 0 ? (int)FOLIO_MIN(r->timeout_s * 1e3, 1e9) : -1;
    for (;;) {
        struct pollfd pf = {.fd = fd, .events = ev};
        int n = poll(&pf, 1, ms);
        if (r->stop && *r->stop)
            return -EINTR;
        if (n > 0)
            return 0;
        if (n == 0)
            return -ETIMEDOUT;
        if (errno != EINTR)
            return -errno;
    }
}

static int send_all(int fd, const char *p, size_t n, const struct http_client_req *r)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
            int rc = wait_fd(fd, POLLOUT, r);
            if (rc)
                return rc;
            continue;
        }
        if (k < 0)
            return -errno;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Reads and parses until the message is complete or the peer closes. */
static int read_response(int fd, llhttp_t *parser, struct call *c, char *err, size_t errlen)
{
    char buf[65536];
    while (!c->done) {
        int rc = wait_fd(fd, POLLIN, c->r);
        if (rc)
            return rc;
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        llhttp_errno_t pe = n == 0 ? llhttp_finish(parser) : llhttp_execute(parser, buf, (size_t)n);
        if (c->cancelled)
            return -ECANCELED;
        if (pe != HPE_OK) {
            folio_errf(err, errlen, "bad response: %s", llhttp_get_error_reason(parser));
            return -EPROTO;
        }
        if (n == 0 && !c->done) {
            folio_errf(err, errlen, "connection closed before the response was complete");
            return -EPROTO;
        }
    }
    return 0;
}

int http_client_request(const struct bench_target *t, const struct http_client_req *r, int *status,
                        struct folio_buf *body, char *err, size_t errlen)
{
    *status = 0;
    struct folio_buf head = {0};
    folio_buf_printf(&head,
                     "%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: folio\r\nAccept: */*\r\n"
                     "Connection: close\r\n",
                     r->method, t->prefix, r->path, t->host);
    if (r->api_key)
        folio_buf_printf(&head, "Authorization: Bearer %s\r\n", r->api_key);
    if (r->body)
        folio_buf_printf(&head, "Content-Type: application/json\r\nContent-Length: %zu\r\n",
                         r->body_len);
    folio_buf_puts(&head, "\r\n");
    if (head.oom) {
        folio_buf_free(&head);
        folio_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int fd = connect_target(t), rc = 0;
    if (fd < 0) {
        folio_buf_free(&head);
        folio_errf(err, errlen, "cannot connect to %s: %s", t->is_unix ? t->path : t->host,
                   strerror(-fd));
        return fd;
    }
    rc = send_all(fd, head.p, head.len, r);
    if (!rc && r->body)
        rc = send_all(fd, r->body, r->body_len, r);
    folio_buf_free(&head);
    if (rc) {
        folio_errf(err, errlen, "send: %s", strerror(-rc));
    } else {
        llhttp_settings_t settings;
        llhttp_settings_init(&settings);
        settings.on_headers_complete = on_headers_complete;
        settings.on_body = on_body;
        settings.on_message_complete = on_message_complete;
        llhttp_t parser;
        llhttp_init(&parser, HTTP_RESPONSE, &settings);
        struct call c = {.r = r, .body = body};
        parser.data = &c;
        rc = read_response(fd, &parser, &c, err, errlen);
        if (rc && rc != -EPROTO)
            folio_errf(err, errlen, "%s", strerror(-rc));
        *status = c.status;
        if (!rc && body && body->oom) {
            folio_errf(err, errlen, "out of memory");
            rc = -ENOMEM;
        }
    }
    close(fd);
    return rc;
}

int http_client_get(const struct bench_target *t, const char *path, const char *api_key,
                    int *status, struct folio_buf *body, char *err, size_t errlen)
{
    const struct http_client_req r = {
        .method = "GET", .path = path, .api_key = api_key, .timeout_s = 10.0};
    return http_client_request(t, &r, status, body, err, errlen);
}
