/*
 * tests/test_srv_engine.c — the step driver (daemon/engine.c) over a mock
 * backend on a real libuv loop and engine thread: the admission wait after
 * a commit that finished sequences (--admit-wait-ms).
 *
 * The mock: a submitted request runs for `steps` steps; plan() takes every
 * queued and running request into the step (recording who is in it), run()
 * does nothing, commit() finishes those whose steps are done.  A "client"
 * answers a finished request by submitting its next one a little later
 * (a uv timer), as a closed-loop load does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "../daemon/engine.h"
#include "folio/common.h"

#define MAX_REQ 8

struct mock {
    struct eng_req req[MAX_REQ];
    int steps_left[MAX_REQ]; /* < 0: not submitted */
    bool queued[MAX_REQ];
    int n_plans;            /* plan() calls */
    int n_steps;            /* steps started */
    uint32_t step_mask[16]; /* who was in step k */
    uint64_t plan_ns[16];   /* when step k was planned */
    uint64_t finish_ns;     /* first finished event */
    int next_after_finish;  /* the client's next request (-1: none) */
    uint64_t client_delay_ms;
    srv_engine_t *e;
    uv_loop_t *loop;
    uv_timer_t client;
};

static int m_submit(void *b, struct eng_req **rs, int32_t n)
{
    struct mock *m = b;
    for (int32_t i = 0; i < n; i++)
        m->queued[rs[i] - m->req] = true;
    return 0;
}

static void m_abort(void *b, struct eng_req *r)
{
    (void)b;
    (void)r;
}

static int m_plan(void *b, const struct eng_events *ev)
{
    struct mock *m = b;
    (void)ev;
    m->n_plans++;
    uint32_t mask = 0;
    for (int i = 0; i < MAX_REQ; i++)
        if (m->queued[i] && m->steps_left[i] > 0)
            mask |= 1u << i;
    if (!mask)
        return 0;
    assert_true(m->n_steps < 16);
    m->plan_ns[m->n_steps] = folio_now_ns();
    m->step_mask[m->n_steps++] = mask;
    return __builtin_popcount(mask);
}

static void m_run(void *b)
{
    (void)b;
}

static void m_commit(void *b, const struct eng_events *ev)
{
    struct mock *m = b;
    uint32_t mask = m->step_mask[m->n_steps - 1];
    for (int i = 0; i < MAX_REQ; i++)
        if (mask & (1u << i) && --m->steps_left[i] == 0) {
            m->queued[i] = false;
            ev->finished(ev->user, &m->req[i], ENG_FINISH_LENGTH);
        }
}

static const struct eng_backend_ops mock_ops = {
    .submit = m_submit, .abort = m_abort, .plan = m_plan, .run = m_run, .commit = m_commit};

static void submit_one(struct mock *m, int i)
{
    struct eng_req *r = &m->req[i];
    assert_int_equal(srv_engine_submit(m->e, &r, 1), 0);
}

static void on_client(uv_timer_t *t)
{
    struct mock *m = t->data;
    if (m->next_after_finish >= 0) {
        submit_one(m, m->next_after_finish);
        m->next_after_finish = -1;
    }
}

static void ev_finished(void *user, struct eng_req *r, enum eng_finish why)
{
    struct mock *m = user;
    (void)r;
    assert_int_equal(why, ENG_FINISH_LENGTH);
    if (!m->finish_ns)
        m->finish_ns = folio_now_ns(); /* the first finish */
    if (m->next_after_finish >= 0)
        uv_timer_start(&m->client, on_client, m->client_delay_ms, 0);
}

/* Starts the driver with wait_ms; requests i get steps[i] steps (0: never
 * submitted). */
static void setup_mock(struct mock *m, uv_loop_t *loop, uint64_t wait_ms, const int *steps, int n)
{
    memset(m, 0, sizeof(*m));
    m->loop = loop;
    m->next_after_finish = -1;
    for (int i = 0; i < MAX_REQ; i++)
        m->steps_left[i] = i < n ? steps[i] : 0;
    assert_int_equal(uv_loop_init(loop), 0);
    uv_timer_init(loop, &m->client);
    m->client.data = m;
    struct eng_events ev = {.user = m, .finished = ev_finished};
    assert_int_equal(srv_engine_init(&m->e, loop, &mock_ops, m, &ev, wait_ms, NULL), 0);
}

/* Runs the loop until want_steps steps ran, every submitted request
 * finished and the client has nothing left to send (fails after 5 s). */
static void run_until_idle(struct mock *m, int want_steps)
{
    uint64_t t0 = folio_now_ns();
    for (;;) {
        uv_run(m->loop, UV_RUN_NOWAIT);
        bool busy = false;
        for (int i = 0; i < MAX_REQ; i++)
            busy |= m->queued[i] && m->steps_left[i] > 0;
        if (m->n_steps >= want_steps && !busy && m->next_after_finish < 0)
            break;
        assert_true(folio_now_ns() - t0 < 5000000000ull);
        uv_sleep(0);
    }
}

static void teardown_mock(struct mock *m)
{
    srv_engine_close(m->e);
    uv_close((uv_handle_t *)&m->client, NULL);
    uv_run(m->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(m->loop), 0);
}

/* A request that finishes frees a place: the client's next request,
 * submitted 5 ms later, joins the very next step (the plan waited for it)
 * instead of the step after. */
static void test_wait_takes_the_next_request(void **state)
{
    (void)state;
    uv_loop_t loop;
    struct mock m;
    const int steps[] = {1, 3, 2}; /* 0 ends after one step, 1 runs on, 2 is the client's next */
    setup_mock(&m, &loop, 1000, steps, 3);
    m.next_after_finish = 2;
    m.client_delay_ms = 5;
    submit_one(&m, 0);
    submit_one(&m, 1);
    run_until_idle(&m, 3);
    assert_int_equal(m.n_steps, 3);
    assert_int_equal(m.step_mask[0], 0x3);
    assert_int_equal(m.step_mask[1], 0x6); /* request 2 joined step 1 */
    assert_int_equal(m.step_mask[2], 0x6);
    /* it waited for the submit, not for the 1 s bound */
    uint64_t waited = m.plan_ns[1] - m.plan_ns[0];
    assert_true(waited >= 4000000ull);
    assert_true(waited < 500000000ull);
    teardown_mock(&m);
}

/* Nobody submits: the wait ends at its bound and the running request goes
 * on. */
static void test_wait_is_bounded(void **state)
{
    (void)state;
    uv_loop_t loop;
    struct mock m;
    const int steps[] = {1, 3};
    setup_mock(&m, &loop, 30, steps, 2);
    submit_one(&m, 0);
    submit_one(&m, 1);
    run_until_idle(&m, 3);
    assert_int_equal(m.n_steps, 3);
    assert_int_equal(m.step_mask[0], 0x3);
    assert_int_equal(m.step_mask[1], 0x2);
    assert_int_equal(m.step_mask[2], 0x2);
    uint64_t waited = m.plan_ns[1] - m.finish_ns;
    assert_true(waited >= 25000000ull); /* the timer, not at once */
    /* a commit that finished nothing plans at once */
    assert_true(m.plan_ns[2] - m.plan_ns[1] < 25000000ull);
    teardown_mock(&m);
}

/* --admit-wait-ms 0: the next step is planned at the commit, without the
 * client's request (it comes one step later). */
static void test_no_wait(void **state)
{
    (void)state;
    uv_loop_t loop;
    struct mock m;
    const int steps[] = {1, 3, 2};
    setup_mock(&m, &loop, 0, steps, 3);
    m.next_after_finish = 2;
    m.client_delay_ms = 20;
    submit_one(&m, 0);
    submit_one(&m, 1);
    run_until_idle(&m, 3);
    assert_int_equal(m.step_mask[0], 0x3);
    assert_int_equal(m.step_mask[1], 0x2); /* planned before the client's request */
    teardown_mock(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wait_takes_the_next_request),
        cmocka_unit_test(test_wait_is_bounded),
        cmocka_unit_test(test_no_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
