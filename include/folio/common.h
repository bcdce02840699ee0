/*
 * folio/common.h — the few things every module shares: the allocator,
 * KV element types and half-precision conversion, and a monotonic clock.
 *
 * Allocation goes through folio_malloc() and friends so that (a) production
 * builds use mimalloc and (b) tests can make the Nth allocation fail
 * (folio_alloc_fail_at) to sweep every error path.  Hot paths (a model step,
 * a pager operation that finds its memory preallocated) never allocate.
 *
 * Errors are values: fallible calls in foliod return 0 or a negative errno.
 */
#ifndef FOLIO_COMMON_H
#define FOLIO_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- allocation ------------------------------------------------------- */

void *folio_malloc(size_t size);
void *folio_calloc(size_t n, size_t size);
void *folio_realloc(void *p, size_t size);
/* Aligned allocation; align is a power of two >= sizeof(void *).  Free with
 * folio_free like any other folio allocation. */
void *folio_aligned_alloc(size_t align, size_t size);
void folio_free(void *p);
char *folio_strdup(const char *s);

/* A large region that lives as long as its owner (the model's weights, the
 * KV pool), taken straight from the kernel: zeroed, 2 MiB aligned (so it
 * can be backed by huge pages), never NULL for size 0.  Flags:
 *   FOLIO_REGION_HUGE      transparent huge pages where the kernel offers
 *                          them (madvise): fewer TLB misses on the streams
 *                          a step reads, one fault per 2 MiB;
 *   FOLIO_REGION_RESIDENT  every page faulted in before the call returns,
 *                          so using the region never takes a page fault
 *                          (and a pool too big for the machine fails here,
 *                          at start-up, not under load).
 * Without RESIDENT a page is committed when first touched.  Free with
 * folio_region_free(p, size), size as given.  Counts as one allocation for
 * folio_alloc_fail_at. */
enum { FOLIO_REGION_HUGE = 1, FOLIO_REGION_RESIDENT = 2 };
void *folio_region_alloc(size_t size, int flags);
void folio_region_free(void *p, size_t size);
/* Gives the pages of region [p, p + size) back to the kernel: they read as
 * zeros again and are committed again when next touched. */
void folio_region_release(void *p, size_t size);
/* Bytes of region [p, p + size) that are resident now (mincore); 0 when
 * the kernel cannot say. */
size_t folio_region_resident(const void *p, size_t size);

/* Test hook: the n-th allocation from now (n >= 1) returns NULL, once.
 * n = 0 disables.  Affects folio_malloc, folio_calloc, folio_realloc,
 * folio_aligned_alloc and folio_strdup in every thread. */
void folio_alloc_fail_at(long n);
/* Allocations attempted since the process started (for sweep tests). */
long folio_alloc_count(void);

/* ---- element types ---------------------------------------------------- */

/* KV element types.  FOLIO_Q8 is int8 values with a scale per row (see
 * folio/pager.h for its layout); its "element" is one byte. */
enum folio_dtype {
    FOLIO_F32 = 0,
    FOLIO_F16 = 1,
    FOLIO_BF16 = 2,
    FOLIO_Q8 = 3,
};

/* Bytes of one storage element: what the strides of a KV view count. */
static inline size_t folio_dtype_size(enum folio_dtype t)
{
    return t == FOLIO_F32 ? 4 : t == FOLIO_Q8 ? 1 : 2;
}

const char *folio_dtype_name(enum folio_dtype t);
/* "f32", "f16", "bf16", "q8" -> *t; -EINVAL for anything else. */
int folio_dtype_parse(const char *name, enum folio_dtype *t);

/* IEEE 754 binary16 <-> binary32, round to nearest even; NaN and infinity
 * preserved.  Scalar versions; kernels may use F16C where available. */
float folio_f16_to_f32(uint16_t h);
uint16_t folio_f32_to_f16(float f);
/* y[i] = folio_f32_to_f16(x[i]) for i < n, by F16C where the CPU has it
 * (the same value for every input but NaN, which stays a NaN of the same
 * sign: F16C keeps the top bits of its payload). */
void folio_f32_to_f16_row(const float *x, uint16_t *y, size_t n);
/* Whether this x86-64 CPU has F16C (CPUID leaf 1, ECX bit 29), for the
 * ISA checks beside __builtin_cpu_supports, which knows no "f16c" in
 * clang; false on other CPUs.  The caller checks AVX (and so the OS's
 * support for its registers) itself. */
bool folio_cpu_f16c(void);
/* binary32 -> bfloat16, round to nearest even; NaN stays NaN. */
static inline uint16_t folio_f32_to_bf16(float f)
{
    union {
        float f;
        uint32_t u;
    } v = {.f = f};
    if ((v.u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((v.u >> 16) | 0x40);
    return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1)) >> 16);
}
/* bfloat16 (upper half of a binary32) -> binary32. */
static inline float folio_bf16_to_f32(uint16_t h)
{
    union {
        uint32_t u;
        float f;
    } v = {.u = (uint32_t)h << 16};
    return v.f;
}

/* ---- error text -------------------------------------------------------- */

/* printf into a caller's error buffer; nothing when err is NULL or errlen
 * is 0.  For calls that return -errno and explain it in err. */
void folio_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- parsing ---------------------------------------------------------- */

/* A byte size: "123", "64k", "256M", "2G", "1T" (powers of 1024, either
 * case; an optional "iB" or "B" after the unit, or a bare "B").  0, or
 * -EINVAL (not a size), -ERANGE (beyond INT64_MAX). */
int folio_parse_size(const char *s, int64_t *out);

/* ---- UTF-8 (common/utf8.c) ------------------------------------------- */

/* The one UTF-8 validator: well-formed sequences as in Unicode §3.9 (no
 * overlongs, no surrogates, nothing above U+10FFFF). */
enum folio_utf8_seq {
    FOLIO_UTF8_OK,    /* a well-formed sequence of *len bytes */
    FOLIO_UTF8_BAD,   /* a maximal invalid subpart of *len (>= 1) bytes: one U+FFFD */
    FOLIO_UTF8_SHORT, /* all n bytes are a valid beginning that the input cuts short */
};
/* Classifies the sequence at s[0] (n >= 1 bytes available). */
enum folio_utf8_seq folio_utf8_next(const unsigned char *s, size_t n, size_t *len);
/* True when s[0..n) is well-formed UTF-8. */
bool folio_utf8_valid(const char *s, size_t n);
/* Copies s[0..n) to out (room for 3n bytes) with each maximal invalid
 * subpart, and a cut-short tail, as U+FFFD; returns the bytes written. */
size_t folio_utf8_sanitize(const char *s, size_t n, char *out);

/* ---- time ------------------------------------------------------------- */

/* Monotonic clock in nanoseconds. */
uint64_t folio_now_ns(void);

/* ---- checks -------------------------------------------------------------
 *
 * The one family of asserts; each prints where it failed, the condition
 * and its reason (a printf format and arguments, required), then aborts:
 *   FOLIO_CHECK   always on: kernel and API preconditions (shapes, strides,
 *                 bounds) whose violation is a caller bug that would
 *                 otherwise corrupt memory;
 *   FOLIO_DCHECK  only in -Dchecks=true builds (FOLIO_CHECKS): internal
 *                 invariants, and the *_check() walks after every
 *                 mutating operation.
 * Request paths never use them: a bad request fails that request. */
#define FOLIO_CHECK(cond, ...)                                                                     \
    do {                                                                                           \
        if (__builtin_expect(!(cond), 0))                                                          \
            folio__check_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                             \
    } while (0)
#if FOLIO_CHECKS
#define FOLIO_DCHECK(cond, ...) FOLIO_CHECK(cond, __VA_ARGS__)
#else
#define FOLIO_DCHECK(cond, ...) ((void)0)
#endif
__attribute__((noreturn, format(printf, 4, 5))) void
folio__check_fail(const char *file, int line, const char *cond, const char *fmt, ...);

#define FOLIO_ARRAY_LEN(a)   (sizeof(a) / sizeof((a)[0]))
#define FOLIO_MIN(a, b)      ((a) < (b) ? (a) : (b))
#define FOLIO_MAX(a, b)      ((a) > (b) ? (a) : (b))
#define FOLIO_DIV_CEIL(a, b) (((a) + (b)-1) / (b))

#ifdef __cplusplus
}
#endif
#endif /* FOLIO_COMMON_H */
