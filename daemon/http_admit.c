/*
 * daemon/http_admit.c — who may hold a connection and its buffers:
 * admission at accept, the lingering close, request-body accounting,
 * drain and fail-all.  The policy (per-client limits) is the owner's,
 * through the on_accept / on_release / on_buffer callbacks; this file
 * applies the connection limit and the mechanics.
 *
 * Admission (the accept path): a connection over --max-connections, or
 * one the owner's on_accept refuses (a per-client limit), is answered 503
 * at once and closed the lingering way.
 *
 * The lingering close (http__conn_linger): a connection answered an error
 * that ends it while its client may still be sending (refused at accept,
 * and every error this layer answers mid-request: a parse error, 400, 413,
 * 414, 417 or 431, a 503 over its body's budget, a 408 for a body too
 * slow) keeps reading its input and drops it, until the client closes,
 * sends nothing for REFUSED_LINGER_MS, or LINGER_TOTAL_MS pass: closing
 * with unread input would reset the connection, and the client could lose
 * the answer (many clients send the whole body before they read: one
 * sending 6 MB at 3 MB/s was reset when a fixed second was up).  Once the
 * answer is written the write side is shut (uv_shutdown), so the client
 * reads its end at once rather than at the deadline; a client that closes
 * its side first still gets all of the answer, then the close.  Lingering
 * connections are not counted against --max-connections; beyond as many
 * again they close as soon as their answer is written.
 *
 * Request-body bytes are reported to the owner's on_buffer as they arrive
 * and given back when the request has been handled (the body buffer is
 * freed then if it grew large); a refusal answers 503.
 *
 * Drain: idle connections are not closed at once; they get DRAIN_IDLE_MS
 * to send a request (answered, e.g. /health with 503, and closed), so a
 * kept-alive client sees the drain instead of a reset.  Fail-all ends
 * every connection: one serving a request with http_conn_fail (the client
 * reads why), idle ones at once.
 *
 * Invariants: hs->st.n_refused counts the open connections with
 * `refused` set, lingering (decremented when one is freed); on those
 * idle_deadline <= linger_end; `shut_wr` is set only on a lingering
 * connection with nothing queued; c->body_counted is what was reported to
 * on_buffer and not yet given back (0 after http__body_release, and
 * released with the accounting object when the connection is freed).
 *
 * Threading: loop thread only.
 */
#include <errno.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "folio/common.h"
#include "http_internal.h"
#include "log.h"

/* Gives the request body's bytes back to the owner's accounting. */
void http__body_release(struct http_conn *c)
{
    if (c->body_counted && c->hs->cb.on_buffer)
        c->hs->cb.on_buffer(c->hs->cb.user, c->acct, -c->body_counted);
    c->body_counted = 0;
}

/* Keeps a connection that was answered an error ending it (its last
 * answer: every caller queued it with keep_alive false) only to let its
 * client read the answer: input is dropped, the write side is shut once
 * the answer is out, and it closes at the client's end, after a gap of
 * REFUSED_LINGER_MS in its input (http__on_read moves the deadline on as
 * bytes arrive), or at linger_end, LINGER_TOTAL_MS on.  At most
 * max_connections linger (they are not counted against it): beyond that,
 * the connection closes once the answer is written.  So does one whose
 * client already ended its input: nothing more will arrive to be
 * dropped. */
void http__conn_linger(struct http_conn *c)
{
    if (c->closing || c->refused || c->peer_eof ||
        c->hs->st.n_refused >= c->hs->lim.max_connections)
        return;
    c->refused = true;
    c->hs->st.n_refused++;
    c->in_msg = false;
    const uint64_t now = folio_now_ns();
    c->linger_end = now + (uint64_t)LINGER_TOTAL_MS * 1000000;
    c->idle_deadline = now + (uint64_t)REFUSED_LINGER_MS * 1000000;
    http__clock_update(c);
    if (!c->reading && !uv_read_start(&c->u.s, http__on_alloc, http__on_read))
        c->reading = true;
    http__maybe_close_after_write(c); /* the answer may be out already */
}

static void on_shut(uv_shutdown_t *req, int status)
{
    struct http_conn *c = req->data;
    /* UV_ECANCELED when the connection closed first (c is still whole:
     * libuv calls this before the stream's close callback) */
    if (status < 0 && status != UV_ECANCELED)
        srv_log(SRV_LOG_DEBUG, "conn %llu: shutdown: %s", (unsigned long long)c->id,
                uv_strerror(status));
}

/* A lingering connection's answer is out: its write side is shut, so the
 * client reads the end of the answer now, not at the linger deadline (one
 * that reads until the connection ends, as `Connection: close` invites,
 * would otherwise wait REFUSED_LINGER_MS).  Reading goes on. */
void http__linger_shut(struct http_conn *c)
{
    if (c->shut_wr || c->closing)
        return;
    c->shut_wr = true;
    c->shut.data = c;
    int rc = uv_shutdown(&c->shut, &c->u.s, on_shut);
    if (rc) /* the deadline or the client's close ends it */
        srv_log(SRV_LOG_DEBUG, "conn %llu: shutdown: %s", (unsigned long long)c->id,
                uv_strerror(rc));
}

/* Answers e (a 503) at once and lingers (see the top of the file; with
 * no room to linger, it closes when the answer is written). */
static void conn_refuse(struct http_conn *c, const struct srv_api_error *e)
{
    c->hs->st.refused_total++;
    http_error(c, e, NULL); /* keep_alive is false: Connection: close */
    http__conn_linger(c);
}

/* Who is at the other end, and may it stay: 0, or -EBUSY when the
 * connection was refused (answered 503 and lingering, or closed). */
int http__admit(struct http_conn *c)
{
    struct http_server *hs = c->hs;
    bool is_tcp = c->is_tcp;
    struct http_peer peer = {.is_tcp = is_tcp, .uid = -1};
    if (!is_tcp) {
        uv_os_fd_t fd;
        struct ucred cr;
        socklen_t len = sizeof(cr);
        if (!uv_fileno(&c->u.h, &fd) && !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
            c->peer_uid = peer.uid = cr.uid;
    } else {
        struct sockaddr_storage sa;
        int len = sizeof(sa);
        if (!uv_tcp_getpeername(&c->u.tcp, (struct sockaddr *)&sa, &len)) {
            if (sa.ss_family == AF_INET6)
                memcpy(peer.ip, &((struct sockaddr_in6 *)&sa)->sin6_addr, 16);
            else if (sa.ss_family == AF_INET) {
                peer.ip[10] = peer.ip[11] = 0xff;
                memcpy(peer.ip + 12, &((struct sockaddr_in *)&sa)->sin_addr, 4);
            }
        }
    }
    struct srv_api_error e;
    if (hs->st.n_open - hs->st.n_refused > hs->lim.max_connections) {
        srv_log(SRV_LOG_INFO, "refusing connection: %d open (--max-connections)",
                hs->st.n_open - hs->st.n_refused - 1);
        srv_api_error_set(&e, 503, "service_unavailable", NULL, NULL,
                          "the server has %lld connections open (--max-connections); retry",
                          (long long)hs->lim.max_connections);
        conn_refuse(c, &e);
        return -EBUSY;
    }
    if (hs->cb.on_accept && hs->cb.on_accept(hs->cb.user, &peer, &c->acct, &e)) {
        srv_log(SRV_LOG_DEBUG, "conn %llu: refused: %s", (unsigned long long)c->id, e.message);
        conn_refuse(c, &e);
        return -EBUSY;
    }
    return 0;
}

void http_server_drain(struct http_server *hs)
{
    hs->draining = true;
    for (struct http_conn *c = hs->conns; c; c = c->next) {
        if (c->active || c->closing)
            continue;
        if (c->out_queued)
            c->close_after_write = true;
        else
            http__idle_arm(c); /* DRAIN_IDLE_MS to ask, e.g., /health */
    }
}

void http_server_fail_all(struct http_server *hs, const struct srv_api_error *e)
{
    for (struct http_conn *c = hs->conns, *next; c; c = next) {
        next = c->next;
        if (c->active || c->streaming)
            http_conn_fail(c, e);
        else
            http_close(c, e->message);
    }
}
