/*
 * daemon/http_clock.c — the one timer of each connection and the clocks
 * it runs, one at a time (clock_update picks which):
 *
 *   - idle: a connection has --idle-timeout-ms to send each complete
 *     request (from accept, and from the end of the previous response);
 *     one that sends nothing, or half a request, is closed (slowloris);
 *   - body rate: once its headers are in, a request body must arrive at
 *     MIN_BODY_RATE bytes/s on average after BODY_GRACE_MS, or the request
 *     gets a 408 (a body is buffered only while it arrives at that rate)
 *     and the connection closes the lingering way (http_admit.c: the rest
 *     of the body is dropped, not left to reset the connection);
 *   - write progress: while output is queued the timer measures the time
 *     since the last completed write, never the idle time: a response
 *     being written is not timed out while the client reads it;
 *   - a request being served with nothing queued is never timed out.
 *
 * The write clock (write_clock_ms) is --idle-timeout-ms (60 s when that
 * is 0), OVER_CAP_MS while a stream backlog is over --max-pending-output,
 * FAIL_LINGER_MS for a failed connection's last bytes.  When it fires
 * with output queued, the socket itself is asked whether the client took
 * anything (sock_writable): if the kernel has room, the loop was busy and
 * the clock starts again; otherwise the client is a slow reader.
 *
 * Invariant: the timer is armed iff some clock runs (nothing runs for a
 * held request with nothing queued, nor for a closing connection).
 *
 * Threading: loop thread only.
 */
#include <poll.h>
#include <stdio.h>

#include "folio/common.h"
#include "http_internal.h"
#include "log.h"

static void slow_reader(struct http_conn *c, const char *what)
{
    srv_log(SRV_LOG_INFO, "conn %llu: slow reader: %s; dropping it", (unsigned long long)c->id,
            what);
    c->hs->st.dropped_slow_total++;
}

/* The write clock: how long queued output may make no progress. */
static int64_t write_clock_ms(const struct http_conn *c)
{
    if (c->over_cap && !c->failed)
        return OVER_CAP_MS;
    int64_t ms = c->failed ? FAIL_LINGER_MS : c->hs->lim.idle_timeout_ms;
    return ms > 0 ? ms : WRITE_CLOCK_DEFAULT_MS;
}

/* The kernel would take more bytes now (the client has been reading). */
static bool sock_writable(struct http_conn *c)
{
    uv_os_fd_t fd;
    if (uv_fileno(&c->u.h, &fd))
        return false;
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    return poll(&pf, 1, 0) == 1 && (pf.revents & POLLOUT) && !(pf.revents & (POLLERR | POLLHUP));
}

static void on_timer(uv_timer_t *t)
{
    struct http_conn *c = t->data;
    if (c->closing)
        return;
    if (c->out_queued) {
        /* the socket has room: the client reads, the loop was busy */
        if (sock_writable(c)) {
            http__clock_update(c);
            return;
        }
        char what[112];
        if (c->over_cap && !c->failed) {
            snprintf(what, sizeof(what),
                     "%zu bytes of stream unsent (cap %lld), none taken in %d ms", c->out_capped,
                     (long long)c->hs->lim.max_pending_output, OVER_CAP_MS);
            slow_reader(c, what);
            struct srv_api_error e;
            srv_api_error_set(&e, 503, "server_error", NULL, "slow_reader",
                              "the client read too slowly: more than %lld bytes unsent; stream "
                              "ended",
                              (long long)c->hs->lim.max_pending_output);
            http_conn_fail(c, &e);
            return;
        }
        snprintf(what, sizeof(what), "no write progress for %lld ms (%zu bytes queued)",
                 (long long)write_clock_ms(c), c->out_queued);
        if (!c->failed)
            slow_reader(c, what);
        http_close(c, what);
        return;
    }
    if (c->active)
        return; /* re-armed when the request is done */
    uint64_t now = folio_now_ns();
    if (c->in_msg && c->in_body) {
        uint64_t ms = (now - c->body_t0) / 1000000;
        if (ms > BODY_GRACE_MS &&
            c->body.len < (uint64_t)MIN_BODY_RATE * (ms - BODY_GRACE_MS) / 1000) {
            struct srv_api_error e;
            srv_log(SRV_LOG_INFO,
                    "conn %llu: request body arriving too slowly (%zu bytes in %llu ms)",
                    (unsigned long long)c->id, c->body.len, (unsigned long long)ms);
            srv_api_error_set(&e, 408, "invalid_request_error", NULL, NULL,
                              "request body arriving slower than %d bytes/s", MIN_BODY_RATE);
            http__access_log(c, 408);
            c->keep_alive = false;
            c->in_len = 0;
            c->in_msg = false;
            http_error(c, &e, NULL);
            http__conn_linger(c); /* the body is still arriving */
            return;
        }
    }
    if (c->idle_deadline && now + 1000000 >= c->idle_deadline) {
        srv_log(SRV_LOG_DEBUG, "conn %llu: idle timeout", (unsigned long long)c->id);
        http_close(c, NULL);
        return;
    }
    http__clock_update(c);
}

/* (Re)starts the idle clock: the client has idle-timeout-ms (while
 * draining: at most DRAIN_IDLE_MS) to send its next complete request. */
void http__idle_arm(struct http_conn *c)
{
    if (c->refused) { /* lingering: its deadline stays (http__conn_linger) */
        http__clock_update(c);
        return;
    }
    int64_t ms = c->hs->lim.idle_timeout_ms;
    if (c->hs->draining && (ms <= 0 || ms > DRAIN_IDLE_MS))
        ms = DRAIN_IDLE_MS;
    c->idle_deadline = ms > 0 ? folio_now_ns() + (uint64_t)ms * 1000000 : 0;
    http__clock_update(c);
}

/* Sets the timer for whichever clock runs now (see the top). */
void http__clock_update(struct http_conn *c)
{
    if (c->closing)
        return;
    int64_t ms = -1;
    if (c->out_queued)
        ms = write_clock_ms(c);
    else if (!c->active) {
        if (c->idle_deadline) {
            uint64_t now = folio_now_ns();
            ms = c->idle_deadline > now ? (int64_t)((c->idle_deadline - now) / 1000000) + 1 : 0;
        }
        if (c->in_msg && c->in_body && (ms < 0 || ms > BODY_CHECK_MS))
            ms = BODY_CHECK_MS;
    }
    if (ms >= 0) {
        /* from now, not from the start of this loop turn (which may have
         * been long: a large burst rendered) */
        uv_update_time(c->hs->loop);
        uv_timer_start(&c->timer, on_timer, (uint64_t)ms, 0);
    } else
        uv_timer_stop(&c->timer);
}
