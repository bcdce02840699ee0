/*
 * daemon/engine.c — the step driver: one engine thread runs a backend's
 * planned step; the loop thread plans and commits.
 *
 * State machine (loop thread), all in pump(), which only ever runs from
 * the uv_async callback (so events never re-enter server code that called
 * submit/abort/kick):
 *
 *   IDLE ── pump: plan() > 0 ──► RUNNING (thread signalled)
 *   RUNNING ── thread done, async ──► pump: commit(), then plan again
 *
 * Shared with the engine thread under `mu`: `go` (a planned step waits),
 * `done` (run finished), `quit`.  The batch itself lives in the backend and
 * is only touched by run() between go and done.
 */
#include "engine.h"

#include <errno.h>
#include <stdlib.h>

#include "folio/common.h"

struct srv_engine {
    uv_async_t async;
    uv_thread_t thread;
    uv_mutex_t mu;
    uv_cond_t cv;
    bool go, done, quit; /* under mu */
    bool running;        /* loop thread: a step is out */
    bool thread_started;
    int step_tokens;
    uint64_t t0;
    double step_seconds; /* written by the thread before done */
    const struct eng_backend_ops *ops;
    void *b;
    struct eng_events ev;
    void (*on_step)(void *user, const struct srv_engine_step_stats *st);
};

static void engine_thread(void *arg)
{
    srv_engine_t *e = arg;
    uv_mutex_lock(&e->mu);
    for (;;) {
        while (!e->go && !e->quit)
            uv_cond_wait(&e->cv, &e->mu);
        if (e->quit)
            break;
        e->go = false;
        uv_mutex_unlock(&e->mu);
        uint64_t t0 = folio_now_ns();
        e->ops->run(e->b);
        e->step_seconds = (double)(folio_now_ns() - t0) * 1e-9;
        uv_mutex_lock(&e->mu);
        e->done = true;
        uv_async_send(&e->async);
    }
    uv_mutex_unlock(&e->mu);
}

static void pump(srv_engine_t *e)
{
    if (e->running) {
        uv_mutex_lock(&e->mu);
        bool done = e->done;
        e->done = false;
        uv_mutex_unlock(&e->mu);
        if (!done)
            return;
        e->running = false;
        e->ops->commit(e->b, &e->ev);
        if (e->on_step) {
            struct srv_engine_step_stats st = {e->step_seconds, e->step_tokens};
            e->on_step(e->ev.user, &st);
        }
    }
    int n = e->ops->plan(e->b, &e->ev);
    if (n <= 0)
        return;
    e->step_tokens = n;
    e->running = true;
    uv_mutex_lock(&e->mu);
    e->go = true;
    uv_cond_signal(&e->cv);
    uv_mutex_unlock(&e->mu);
}

static void on_async(uv_async_t *h)
{
    pump(h->data);
}

int srv_engine_init(srv_engine_t **out, uv_loop_t *loop, const struct eng_backend_ops *ops,
                    void *backend, const struct eng_events *ev,
                    void (*on_step)(void *user, const struct srv_engine_step_stats *st))
{
    srv_engine_t *e = folio_calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->ops = ops;
    e->b = backend;
    e->ev = *ev;
    e->on_step = on_step;
    int rc = uv_mutex_init(&e->mu);
    if (rc)
        goto fail_free;
    if ((rc = uv_cond_init(&e->cv)))
        goto fail_mu;
    if ((rc = uv_async_init(loop, &e->async, on_async)))
        goto fail_cv;
    e->async.data = e;
    if ((rc = uv_thread_create(&e->thread, engine_thread, e))) {
        uv_close((uv_handle_t *)&e->async, NULL);
        goto fail_cv;
    }
    e->thread_started = true;
    *out = e;
    return 0;
fail_cv:
    uv_cond_destroy(&e->cv);
fail_mu:
    uv_mutex_destroy(&e->mu);
fail_free:
    folio_free(e);
    return rc;
}

int srv_engine_submit(srv_engine_t *e, struct eng_req **rs, int32_t n)
{
    int rc = e->ops->submit(e->b, rs, n);
    if (!rc)
        uv_async_send(&e->async);
    return rc;
}

void srv_engine_abort(srv_engine_t *e, struct eng_req *r)
{
    e->ops->abort(e->b, r);
    uv_async_send(&e->async);
}

const char *eng_finish_name(enum eng_finish f)
{
    static const char *const names[ENG_FINISH_COUNT] = {"", "stop", "length", "abort", "error"};
    return f < ENG_FINISH_COUNT ? names[f] : "";
}

static void on_close(uv_handle_t *h)
{
    srv_engine_t *e = h->data;
    uv_cond_destroy(&e->cv);
    uv_mutex_destroy(&e->mu);
    folio_free(e);
}

void srv_engine_close(srv_engine_t *e)
{
    if (e->thread_started) {
        uv_mutex_lock(&e->mu);
        e->quit = true;
        uv_cond_signal(&e->cv);
        uv_mutex_unlock(&e->mu);
        uv_thread_join(&e->thread); /* waits for a step in flight */
    }
    uv_close((uv_handle_t *)&e->async, on_close);
}
