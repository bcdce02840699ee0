/*
 * common/util.c — half-precision conversion, dtype names, the clock.
 *
 * The f16 conversions are the plain bit-level algorithm (no tables), exact
 * for every input: they are the reference the vectorised kernels are tested
 * against.
 */
#include "folio/common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *folio_dtype_name(enum folio_dtype t)
{
    switch (t) {
    case FOLIO_F32:
        return "f32";
    case FOLIO_F16:
        return "f16";
    case FOLIO_BF16:
        return "bf16";
    case FOLIO_Q8:
        return "q8";
    }
    return "?";
}

int folio_dtype_parse(const char *name, enum folio_dtype *t)
{
    static const enum folio_dtype all[] = {FOLIO_F32, FOLIO_F16, FOLIO_BF16, FOLIO_Q8};
    for (size_t i = 0; name && i < FOLIO_ARRAY_LEN(all); i++) {
        if (strcmp(name, folio_dtype_name(all[i])) == 0) {
            *t = all[i];
            return 0;
        }
    }
    return -EINVAL;
}

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float folio_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0x1f) /* inf / nan */
        return bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return bits_f32(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t folio_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00);
    if (ax < 0x38800000u) {   /* below 2^-14: subnormal or zero */
        if (ax < 0x33000000u) /* below 2^-25: rounds to zero */
            return (uint16_t)sign;
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((ax >> 13) - (112u << 10));
    uint32_t rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
        r++;
    return (uint16_t)(sign | r);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

/* eight at a time by vcvtps2ph, rounding to nearest even as the scalar */
__attribute__((target("avx,f16c"))) static void f16_row_f16c(const float *x, uint16_t *y, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        y[i] = folio_f32_to_f16(x[i]);
}

bool folio_cpu_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

static bool have_f16c(void)
{
    static int known = -1; /* racing first calls compute the same answer */
    int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (k < 0) {
        /* AVX with the OS's support for it, and F16C */
        __builtin_cpu_init();
        k = __builtin_cpu_supports("avx") && folio_cpu_f16c();
        __atomic_store_n(&known, k, __ATOMIC_RELAXED);
    }
    return k;
}
#else
bool folio_cpu_f16c(void)
{
    return false;
}
#endif

void folio_f32_to_f16_row(const float *x, uint16_t *y, size_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (have_f16c()) {
        f16_row_f16c(x, y, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        y[i] = folio_f32_to_f16(x[i]);
}

uint64_t folio_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int folio_parse_size(const char *s, int64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return -EINVAL;
    if (errno == ERANGE)
        return -ERANGE;
    static const char units[] = "kmgt";
    unsigned shift = 0;
    const char *u = *end ? strchr(units, *end | 0x20) : NULL;
    if (u) {
        shift = 10u * (unsigned)(u - units + 1);
        end++;
        if (*end == 'i')
            end++;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        return -EINVAL;
    if (v > ((unsigned long long)INT64_MAX >> shift))
        return -ERANGE;
    *out = (int64_t)(v << shift);
    return 0;
}

void folio__check_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    /* A broken invariant is a bug: crash loudly, with the reason. */
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s:%d: check failed: %s: %s\n", file, line, cond, msg);
    fflush(stderr);
    abort();
}

void folio_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
