/*
 * common/pool.c — the compute thread pool (see folio/pool.h).
 *
 * State shared with the workers:
 *
 *   gen       generation counter; the owner bumps it to publish a job
 *             (fn, arg) and workers run each generation exactly once
 *   pending   workers that have not finished the current job
 *   sleepers  workers asleep (or about to sleep) on the gen futex
 *   waiting   1 while the owner sleeps on the pending futex
 *   stop      set (with a gen bump) by pool_free
 *
 * Both sleeps use the Dekker pattern with sequentially consistent atomics:
 * the sleeper announces itself, then re-checks the condition, then waits
 * on the futex with the value it saw; the waker changes the value, then
 * looks at the announcement.  Either the sleeper sees the change or the
 * waker sees the sleeper, so no wake-up is lost.
 *
 * Spinning: after a job a worker spins (with a pause hint) for up to
 * POOL_SPIN_NS before sleeping.  A step's dispatches follow each other
 * closely, so most are picked up while spinning; when the owner goes off
 * to do something else (an OpenBLAS call, the sampler) the workers are
 * asleep soon after and leave the cores free.  After POOL_PURE_SPIN_NS
 * of spinning, a waiter calls sched_yield() every 64 spins: when the
 * machine has fewer free cores than threads the peer being waited for is
 * often preempted, and yielding lets it run (measured on 2 busy cores:
 * 150-250 us per dispatch without, 8-12 us with).  Not from the first
 * spin: on a quiet machine the peer is running, a dispatch of a one-row
 * product lasts 10-100 us, and a waiter inside the syscall noticed the
 * peer's end 2 us late on average (a decode step of `small` waited 0.24
 * ms for 61 dispatches where its threads' shares differed by 0.11 ms).
 * The owner, whose workers are running its job, spins (and yields) for up
 * to POOL_OWNER_SPIN_NS before it sleeps on the pending futex: a futex
 * wake-up on this VM took tens of microseconds, and the shares of a big
 * one-row product (the output matrix: 0.5 ms each) differ by more than
 * POOL_SPIN_NS often enough that sleeping after it cost a decode step of
 * `small` about 0.3 ms of 4.4 (measured: the owner's wait exceeded its
 * threads' difference in finishing by that much).
 *
 * Invariant: between pool_run calls every worker has finished its last
 * job (pending == 0); fn and arg are only written then.
 */
#include "folio/pool.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "folio/common.h"

#define POOL_SPIN_NS       30000
#define POOL_PURE_SPIN_NS  10000
#define POOL_OWNER_SPIN_NS 2000000

struct pool_worker {
    struct pool *pool;
    int ith;
    pthread_t tid;
    _Atomic uint64_t late_ns, work_ns; /* written by this worker only */
};

struct pool {
    int nth;
    _Alignas(64) atomic_uint gen;
    atomic_int sleepers;
    atomic_int stop;
    pool_fn fn;
    void *arg;
    uint64_t t_pub; /* when the current job was published (folio_now_ns) */
    _Alignas(64) atomic_uint pending;
    atomic_int waiting;
    struct pool_worker *workers; /* [nth - 1], workers[i].ith = i + 1 */
    struct pool_stats stats;     /* the owner's: written by pool_run only */
};

static void futex_wait(atomic_uint *addr, unsigned expected)
{
    syscall(SYS_futex, (void *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake(atomic_uint *addr, int n)
{
    syscall(SYS_futex, (void *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Waits until *addr != seen (spin, then futex); returns the new value. */
static unsigned wait_change(atomic_uint *addr, unsigned seen, atomic_int *announce)
{
    unsigned v;
    uint64_t t0 = 0;
    for (int i = 0;; i++) {
        v = atomic_load(addr);
        if (v != seen)
            return v;
        cpu_relax();
        if ((i & 63) == 63) {
            uint64_t now = folio_now_ns();
            if (!t0)
                t0 = now;
            else if (now - t0 > POOL_SPIN_NS)
                break;
            if (now - t0 > POOL_PURE_SPIN_NS)
                sched_yield(); /* lets a preempted peer run when threads > cores */
        }
    }
    for (;;) {
        atomic_fetch_add(announce, 1);
        v = atomic_load(addr);
        if (v == seen)
            futex_wait(addr, seen);
        atomic_fetch_sub(announce, 1);
        v = atomic_load(addr);
        if (v != seen)
            return v;
    }
}

static void *worker_main(void *p)
{
    struct pool_worker *w = p;
    struct pool *pool = w->pool;
    unsigned seen = 0;
    for (;;) {
        seen = wait_change(&pool->gen, seen, &pool->sleepers);
        if (atomic_load(&pool->stop))
            return NULL;
        const uint64_t t0 = folio_now_ns();
        pool->fn(pool->arg, w->ith, pool->nth);
        const uint64_t t1 = folio_now_ns();
        atomic_store_explicit(
            &w->late_ns, atomic_load_explicit(&w->late_ns, memory_order_relaxed) + t0 - pool->t_pub,
            memory_order_relaxed);
        atomic_store_explicit(&w->work_ns,
                              atomic_load_explicit(&w->work_ns, memory_order_relaxed) + t1 - t0,
                              memory_order_relaxed);
        if (atomic_fetch_sub(&pool->pending, 1) == 1 && atomic_load(&pool->waiting))
            futex_wake(&pool->pending, 1);
    }
}

int pool_new(int n_threads, pool_t **out)
{
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return -EINVAL;
    struct pool *pool = folio_aligned_alloc(64, sizeof(*pool));
    if (!pool)
        return -ENOMEM;
    *pool = (struct pool){.nth = n_threads};
    atomic_init(&pool->gen, 0);
    atomic_init(&pool->pending, 0);
    atomic_init(&pool->sleepers, 0);
    atomic_init(&pool->stop, 0);
    atomic_init(&pool->waiting, 0);
    if (n_threads > 1) {
        pool->workers = folio_calloc((size_t)n_threads - 1, sizeof(*pool->workers));
        if (!pool->workers) {
            folio_free(pool);
            return -ENOMEM;
        }
    }
    for (int i = 0; i < n_threads - 1; i++) {
        pool->workers[i].pool = pool;
        pool->workers[i].ith = i + 1;
        int rc = pthread_create(&pool->workers[i].tid, NULL, worker_main, &pool->workers[i]);
        if (rc) {
            pool->nth = i + 1; /* pool_free joins the i started so far */
            pool_free(pool);
            return -rc;
        }
    }
    *out = pool;
    return 0;
}

void pool_free(pool_t *pool)
{
    if (!pool)
        return;
    atomic_store(&pool->stop, 1);
    atomic_fetch_add(&pool->gen, 1);
    futex_wake(&pool->gen, INT_MAX);
    for (int i = 0; i < pool->nth - 1; i++)
        pthread_join(pool->workers[i].tid, NULL);
    folio_free(pool->workers);
    folio_free(pool);
}

int pool_size(const pool_t *pool)
{
    return pool->nth;
}

void pool_run(pool_t *pool, pool_fn fn, void *arg)
{
    if (pool->nth == 1) {
        fn(arg, 0, 1);
        pool->stats.runs++;
        return;
    }
    pool->fn = fn;
    pool->arg = arg;
    pool->t_pub = folio_now_ns();
    atomic_store(&pool->pending, (unsigned)pool->nth - 1);
    atomic_fetch_add(&pool->gen, 1); /* publishes fn, arg, pending */
    if (atomic_load(&pool->sleepers) > 0)
        futex_wake(&pool->gen, INT_MAX);
    fn(arg, 0, pool->nth);
    const uint64_t t_own = folio_now_ns();
    pool->stats.own_ns += t_own - pool->t_pub;
    unsigned left;
    uint64_t t0 = 0;
    for (int i = 0; (left = atomic_load(&pool->pending)) != 0; i++) {
        const uint64_t spun = t0 ? folio_now_ns() - t0 : 0;
        if (spun < POOL_OWNER_SPIN_NS) {
            if ((i & 63) == 63) {
                if (!t0)
                    t0 = folio_now_ns();
                else if (spun > POOL_PURE_SPIN_NS)
                    sched_yield();
            }
            cpu_relax();
            continue;
        }
        atomic_store(&pool->waiting, 1);
        left = atomic_load(&pool->pending);
        if (left)
            futex_wait(&pool->pending, left);
        atomic_store(&pool->waiting, 0);
    }
    pool->stats.runs++;
    pool->stats.wait_ns += folio_now_ns() - t_own;
}

void pool_stats_get(const pool_t *pool, struct pool_stats *st)
{
    *st = pool->stats;
    for (int i = 0; i < pool->nth - 1; i++) {
        st->late_ns += atomic_load_explicit(&pool->workers[i].late_ns, memory_order_relaxed);
        st->work_ns += atomic_load_explicit(&pool->workers[i].work_ns, memory_order_relaxed);
    }
}
