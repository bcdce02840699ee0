/*
 * common/alloc.c — foliod's allocator front.
 *
 * Every allocation in the project passes here.  With FOLIO_USE_MIMALLOC the
 * calls go to mimalloc's mi_* API (explicit calls rather than a global
 * malloc override, so sanitizer builds, which set FOLIO_USE_MIMALLOC=0, keep
 * the libc allocator that ASan intercepts).
 *
 * Fault injection: a single atomic countdown.  folio_alloc_fail_at(n) arms
 * it; the allocation that brings it from 1 to 0 fails and disarms it.  The
 * counter is global, so a sweep test must run single-threaded.
 *
 * Regions (folio_region_alloc) bypass both allocators: one anonymous
 * mapping each, over-mapped by 2 MiB and trimmed so the region starts on a
 * 2 MiB boundary, which is what lets the kernel back it with huge pages.
 */
#include "folio/common.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if FOLIO_USE_MIMALLOC
#include <mimalloc.h>
#define RAW_MALLOC(n)     mi_malloc(n)
#define RAW_CALLOC(n, s)  mi_calloc(n, s)
#define RAW_REALLOC(p, n) mi_realloc(p, n)
#define RAW_ALIGNED(a, n) mi_malloc_aligned(n, a)
#define RAW_FREE(p)       mi_free(p)
#else
#define RAW_MALLOC(n)     malloc(n)
#define RAW_CALLOC(n, s)  calloc(n, s)
#define RAW_REALLOC(p, n) realloc(p, n)
#define RAW_FREE(p)       free(p)
static void *raw_aligned(size_t align, size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, align, n ? n : align) != 0)
        return NULL;
    return p;
}
#define RAW_ALIGNED(a, n) raw_aligned(a, n)
#endif

static atomic_long fail_countdown;
static atomic_long alloc_count;

void folio_alloc_fail_at(long n)
{
    atomic_store(&fail_countdown, n > 0 ? n : 0);
}

long folio_alloc_count(void)
{
    return atomic_load(&alloc_count);
}

/* True when this allocation must fail (fault injection). */
static int should_fail(void)
{
    atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed);
    long c = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
    if (c <= 0)
        return 0;
    c = atomic_fetch_sub(&fail_countdown, 1);
    return c == 1;
}

void *folio_malloc(size_t size)
{
    return should_fail() ? NULL : RAW_MALLOC(size ? size : 1);
}

void *folio_calloc(size_t n, size_t size)
{
    return should_fail() ? NULL : RAW_CALLOC(n ? n : 1, size ? size : 1);
}

void *folio_realloc(void *p, size_t size)
{
    return should_fail() ? NULL : RAW_REALLOC(p, size ? size : 1);
}

void *folio_aligned_alloc(size_t align, size_t size)
{
    return should_fail() ? NULL : RAW_ALIGNED(align, size);
}

void folio_free(void *p)
{
    if (p)
        RAW_FREE(p);
}

char *folio_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = folio_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

#define REGION_ALIGN ((size_t)2 << 20)

static size_t region_span(size_t size)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return size ? (size + page - 1) / page * page : page;
}

void *folio_region_alloc(size_t size, int flags)
{
    if (should_fail())
        return NULL;
    const size_t span = region_span(size);
    if (span > SIZE_MAX - REGION_ALIGN)
        return NULL;
    char *raw =
        mmap(NULL, span + REGION_ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    char *p = (char *)(((uintptr_t)raw + REGION_ALIGN - 1) & ~(uintptr_t)(REGION_ALIGN - 1));
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    if (p + span < raw + span + REGION_ALIGN)
        munmap(p + span, (size_t)(raw + span + REGION_ALIGN - (p + span)));
#ifdef MADV_HUGEPAGE
    if (flags & FOLIO_REGION_HUGE)
        (void)madvise(p, span, MADV_HUGEPAGE); /* a hint: refused is fine */
#endif
    if (flags & FOLIO_REGION_RESIDENT) {
        const size_t page = (size_t)sysconf(_SC_PAGESIZE);
        for (size_t o = 0; o < span; o += page)
            ((volatile char *)p)[o] = 0;
    }
    return p;
}

void folio_region_free(void *p, size_t size)
{
    if (p)
        munmap(p, region_span(size));
}

void folio_region_release(void *p, size_t size)
{
    if (p)
        (void)madvise(p, region_span(size), MADV_DONTNEED); /* private anonymous: zeros */
}

size_t folio_region_resident(const void *p, size_t size)
{
    if (!p)
        return 0;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), span = region_span(size);
    enum { CHUNK = 4096 }; /* pages asked about per call */
    unsigned char vec[CHUNK];
    size_t resident = 0;
    for (size_t o = 0; o < span; o += (size_t)CHUNK * page) {
        const size_t len = FOLIO_MIN(span - o, (size_t)CHUNK * page);
        if (mincore((void *)((const char *)p + o), len, vec) != 0)
            return 0;
        for (size_t i = 0; i < len / page; i++)
            resident += vec[i] & 1;
    }
    return resident * page;
}
