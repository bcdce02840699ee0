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
 *
 * Admission wait (admit_wait_ms, foliod --admit-wait-ms).  A commit that
 * finishes sequences frees their places in the batch, and a client whose
 * stream just ended often sends its next request at once (a closed-loop
 * load, an agent's next turn).  Planning at once would start a step without
 * it: the new request waits a whole step before its prefill even starts.
 * So after such a commit the driver holds the plan (GATHER) until as many
 * sequences were submitted as finished, or admit_wait_ms passed, whichever
 * comes first; a commit that finished nothing plans at once:
 *
 *   RUNNING ── commit finished k > 0 ──► GATHER (timer armed)
 *   GATHER ── k submitted, or the timer ──► pump: plan
 *
 * The engine idles at most admit_wait_ms per such step (a few ms against
 * steps of 100+ ms); submits and aborts meanwhile only count and wake the
 * pump, as always.
 */
#include "engine.h"

#include <errno.h>
#include <stdlib.h>

#include "folio/common.h"

struct srv_engine {
    uv_async_t async;
    uv_timer_t gather_timer; /* GATHER's deadline */
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
    struct eng_events ev;      /* ours: counts `finished`, then forwards to user_ev */
    struct eng_events user_ev; /* the server's */
    uint64_t admit_wait_ms;    /* 0: never gather (libuv timers count ms) */
    bool gathering;            /* GATHER: the plan waits for submits or the timer */
    int32_t n_finished;        /* sequences the last commit finished */
    int32_t n_submitted;       /* sequences submitted since that commit */
    int n_open;                /* handles not yet closed (async, timer) */
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

static void plan_and_go(srv_engine_t *e)
{
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

static void on_gather_timeout(uv_timer_t *t)
{
    srv_engine_t *e = t->data;
    if (!e->gathering)
        return;
    e->gathering = false;
    plan_and_go(e);
}

static void pump(srv_engine_t *e)
{
    if (e->gathering) {
        if (e->n_submitted < e->n_finished)
            return; /* the timer or more submits end it */
        e->gathering = false;
        uv_timer_stop(&e->gather_timer);
        plan_and_go(e);
        return;
    }
    if (e->running) {
        uv_mutex_lock(&e->mu);
        bool done = e->done;
        e->done = false;
        uv_mutex_unlock(&e->mu);
        if (!done)
            return;
        e->running = false;
        e->n_finished = 0;
        e->ops->commit(e->b, &e->ev);
        if (e->on_step) {
            struct srv_engine_step_stats st = {e->step_seconds, e->step_tokens};
            e->on_step(e->user_ev.user, &st);
        }
        if (e->admit_wait_ms > 0 && e->n_finished > 0) {
            e->gathering = true;
            e->n_submitted = 0;
            uv_timer_start(&e->gather_timer, on_gather_timeout, e->admit_wait_ms, 0);
            return;
        }
    }
    plan_and_go(e);
}

static void fwd_started(void *user, struct eng_req *r)
{
    srv_engine_t *e = user;
    if (e->user_ev.started)
        e->user_ev.started(e->user_ev.user, r);
}

static void fwd_token(void *user, struct eng_req *r, int32_t token)
{
    srv_engine_t *e = user;
    if (e->user_ev.token)
        e->user_ev.token(e->user_ev.user, r, token);
}

static void fwd_finished(void *user, struct eng_req *r, enum eng_finish why)
{
    srv_engine_t *e = user;
    e->n_finished++;
    if (e->user_ev.finished)
        e->user_ev.finished(e->user_ev.user, r, why);
}

static void fwd_prompt_logprobs(void *user, struct eng_req *r, int32_t first, int32_t n,
                                const struct sampler_result *res)
{
    srv_engine_t *e = user;
    if (e->user_ev.prompt_logprobs)
        e->user_ev.prompt_logprobs(e->user_ev.user, r, first, n, res);
}

static void fwd_hidden(void *user, struct eng_req *r, int32_t first, int32_t n, const float *rows,
                       int32_t dim)
{
    srv_engine_t *e = user;
    if (e->user_ev.hidden)
        e->user_ev.hidden(e->user_ev.user, r, first, n, rows, dim);
}

static void on_async(uv_async_t *h)
{
    pump(h->data);
}

int srv_engine_init(srv_engine_t **out, uv_loop_t *loop, const struct eng_backend_ops *ops,
                    void *backend, const struct eng_events *ev, uint64_t admit_wait_ms,
                    void (*on_step)(void *user, const struct srv_engine_step_stats *st))
{
    srv_engine_t *e = folio_calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->ops = ops;
    e->b = backend;
    e->user_ev = *ev;
    e->ev = (struct eng_events){
        e, fwd_started, fwd_token, fwd_finished, fwd_prompt_logprobs, fwd_hidden};
    e->admit_wait_ms = admit_wait_ms;
    e->on_step = on_step;
    int rc = uv_mutex_init(&e->mu);
    if (rc)
        goto fail_free;
    if ((rc = uv_cond_init(&e->cv)))
        goto fail_mu;
    if ((rc = uv_async_init(loop, &e->async, on_async)))
        goto fail_cv;
    e->async.data = e;
    uv_timer_init(loop, &e->gather_timer); /* cannot fail */
    e->gather_timer.data = e;
    if ((rc = uv_thread_create(&e->thread, engine_thread, e))) {
        uv_close((uv_handle_t *)&e->async, NULL);
        uv_close((uv_handle_t *)&e->gather_timer, NULL);
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
    if (!rc) {
        e->n_submitted += n;
        uv_async_send(&e->async);
    }
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
    if (--e->n_open > 0)
        return; /* the other handle's callback frees */
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
    e->n_open = 2;
    uv_close((uv_handle_t *)&e->gather_timer, on_close);
    uv_close((uv_handle_t *)&e->async, on_close);
}
