/*
 * folio/pool.h — a fixed pool of compute threads for one model context.
 *
 * pool_run(pool, fn, arg) runs fn(arg, ith, nth) once for every ith in
 * [0, nth): ith = 0 on the calling thread, the others on the pool's
 * workers, and returns when all have returned.  One dispatch costs a
 * generation-counter store plus (when workers sleep) one futex wake; a
 * model step dispatches a few dozen times.
 *
 * Workers spin briefly after each job (so back-to-back dispatches are
 * cheap), then sleep on a futex (so they do not steal cores from OpenBLAS,
 * which foliod calls between dispatches; see model/forward.c for how the
 * two share the cores).
 *
 * Threading: one thread at a time calls pool_run (the pool's owner); fn
 * must not call pool_run.  Not reentrant.
 */
#ifndef FOLIO_POOL_H
#define FOLIO_POOL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pool pool_t;

/* fn(arg, ith, nth): the share ith of nth of some work. */
typedef void (*pool_fn)(void *arg, int ith, int nth);

/* Starts n_threads - 1 workers (n_threads >= 1; 1 means the caller does
 * everything).  -EINVAL, -ENOMEM, or -errno from pthread_create. */
int pool_new(int n_threads, pool_t **out);
/* Stops and joins the workers.  NULL is a no-op. */
void pool_free(pool_t *pool);
int pool_size(const pool_t *pool);
/* Runs fn on every thread of the pool, the caller included; returns when
 * all have finished. */
void pool_run(pool_t *pool, pool_fn fn, void *arg);

/* What the owner's pool_run calls cost it beyond its own share: for
 * profiling (bench_model's breakdown of a decode step). */
struct pool_stats {
    uint64_t runs;    /* pool_run calls */
    uint64_t wait_ns; /* from the owner's fn returning to the last worker's */
    uint64_t own_ns;  /* the owner's fn (from publishing the job) */
    uint64_t late_ns; /* workers, summed: from publishing to starting fn */
    uint64_t work_ns; /* workers, summed: in fn */
};
/* The counters since pool_new (owner thread only; the workers' may lag
 * by the job in flight). */
void pool_stats_get(const pool_t *pool, struct pool_stats *st);

#ifdef __cplusplus
}
#endif
#endif /* FOLIO_POOL_H */
