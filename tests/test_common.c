/*
 * tests/test_common.c — the shared helpers: half-precision conversion
 * against the compiler's cc_half, and the allocation fault injector.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "folio/buf.h"
#include "folio/common.h"

/* The compiler's own binary16 type is the oracle (GCC >= 12 on x86-64;
 * clang before 15 has none there, and runs only the tests that need none). */
#ifdef __FLT16_MAX__
#define HAVE_CC_HALF 1
__extension__ typedef _Float16 cc_half;
#endif

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

#ifdef HAVE_CC_HALF
/* Every f16 bit pattern converts to f32 exactly as the compiler's own
 * conversion does, and back to the same bits (NaNs stay NaN). */
static void test_f16_all_patterns(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        cc_half ref;
        uint16_t hb = (uint16_t)h;
        memcpy(&ref, &hb, 2);
        float got = folio_f16_to_f32(hb);
        float want = (float)ref;
        if (want != want) {
            assert_true(got != got);
            assert_true(folio_f16_to_f32(folio_f32_to_f16(got)) != got);
            continue;
        }
        assert_int_equal(f32_bits(got), f32_bits(want));
        assert_int_equal(folio_f32_to_f16(got), hb);
    }
}

/* f32 -> f16 rounds to nearest even like the compiler, over a sweep of
 * bit patterns covering normals, subnormals, overflow and ties. */
static void test_f32_to_f16_rounding(void **state)
{
    (void)state;
    for (uint64_t x = 0; x < 0x100000000ull; x += 4093) {
        uint32_t u = (uint32_t)x;
        float f;
        memcpy(&f, &u, 4);
        if (f != f)
            continue;
        cc_half ref = (cc_half)f;
        uint16_t want;
        memcpy(&want, &ref, 2);
        assert_int_equal(folio_f32_to_f16(f), want);
    }
    /* exact ties around 1.0 and at the subnormal boundary */
    const float ties[] = {1.0f + 1.0f / 2048,    1.0f + 3.0f / 2048,    65519.0f,       65520.0f,
                          5.9604645e-08f * 0.5f, 5.9604645e-08f * 1.5f, -2.9802322e-08f};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(ties); i++) {
        cc_half ref = (cc_half)ties[i];
        uint16_t want;
        memcpy(&want, &ref, 2);
        assert_int_equal(folio_f32_to_f16(ties[i]), want);
    }
}

#endif

/* The row conversion (F16C where present) gives the scalar's bits for
 * every non-NaN input of a sweep, at every length and alignment its
 * 8-wide body and scalar tail split differently; a NaN stays a NaN of the
 * same sign. */
static void test_f32_to_f16_row(void **state)
{
    (void)state;
    enum { N = 4099 };
    float *x = folio_malloc(sizeof(float) * (N + 8));
    uint16_t *y = folio_malloc(sizeof(uint16_t) * (N + 8));
    assert_non_null(x);
    assert_non_null(y);
    for (uint64_t base = 0; base < 0x100000000ull; base += 0x100000000ull / 64) {
        for (int i = 0; i < N + 8; i++) {
            uint32_t u = (uint32_t)(base + (uint64_t)i * 1048573u);
            memcpy(&x[i], &u, 4);
        }
        x[5] = 65520.0f, x[6] = -65519.0f, x[7] = 1.0f + 1.0f / 2048; /* overflow, ties */
        for (size_t off = 0; off < 8; off += 3)
            for (size_t n = 0; n <= 40; n += n < 20 ? 1 : 13) {
                folio_f32_to_f16_row(x + off, y, n == 40 ? N : n);
                for (size_t i = 0; i < (n == 40 ? N : n); i++) {
                    const float f = x[off + i];
                    if (f != f) {
                        assert_int_equal(y[i] & 0x7c00, 0x7c00);
                        assert_true((y[i] & 0x3ff) != 0);
                        assert_int_equal(y[i] >> 15, f32_bits(f) >> 31);
                    } else {
                        assert_int_equal(y[i], folio_f32_to_f16(f));
                    }
                }
            }
    }
    folio_free(x);
    folio_free(y);
}

static void test_alloc_fail_at(void **state)
{
    (void)state;
    void *a = folio_malloc(16);
    assert_non_null(a);
    folio_alloc_fail_at(3);
    void *b = folio_malloc(16);
    void *c = folio_calloc(2, 8);
    void *d = folio_malloc(16); /* the third: fails */
    void *e = folio_aligned_alloc(64, 128);
    assert_non_null(b);
    assert_non_null(c);
    assert_null(d);
    assert_non_null(e);
    assert_int_equal((uintptr_t)e % 64, 0);
    char *s = folio_strdup("folio");
    assert_string_equal(s, "folio");
    folio_free(a);
    folio_free(b);
    folio_free(c);
    folio_free(e);
    folio_free(s);
    long before = folio_alloc_count();
    folio_free(folio_malloc(1));
    assert_int_equal(folio_alloc_count(), before + 1);
}

/* A failed FOLIO_CHECK aborts after printing the file, the condition and
 * its reason; a passing one does nothing. */
static void test_check_prints_reason(void **state)
{
    (void)state;
    int v = 3;
    FOLIO_CHECK(v == 3, "never printed");
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 2);
        FOLIO_CHECK(v == 4, "v is %d, wanted %d", v, 4);
        _exit(0); /* not reached */
    }
    close(fd[1]);
    char out[512] = "";
    size_t n = 0;
    ssize_t r;
    while (n < sizeof(out) - 1 && (r = read(fd[0], out + n, sizeof(out) - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = 0;
    close(fd[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGABRT);
    assert_non_null(strstr(out, "test_common.c:"));
    assert_non_null(strstr(out, "check failed: v == 4: v is 3, wanted 4"));
}

/* folio_buf: appends, printf past the small buffer, JSON strings, steal. */
static void test_buf(void **state)
{
    (void)state;
    struct folio_buf b = {0};
    folio_buf_puts(&b, "ab");
    folio_buf_append(&b, "", 0);
    assert_int_equal(b.len, 2);
    assert_string_equal(b.p, "ab");
    char big[600];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    folio_buf_printf(&b, "<%s>%d", big, 7);
    assert_int_equal(b.len, 2 + 1 + 599 + 1 + 1);
    assert_int_equal(b.p[b.len], 0);
    assert_memory_equal(b.p + b.len - 3, "x>7", 3);
    b.len = 0;
    folio_buf_json_str(&b, "q\"\\\n\x01z", 6);
    assert_string_equal(b.p, "\"q\\\"\\\\\\n\\u0001z\"");
    assert_true(folio_buf_reserve(&b, 1 << 20));
    assert_true(b.cap >= b.len + (1 << 20) + 1);
    size_t len;
    char *p = folio_buf_steal(&b, &len);
    assert_int_equal(len, 16);
    assert_null(b.p);
    assert_int_equal(b.len, 0);
    folio_free(p);
    folio_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#ifdef HAVE_CC_HALF
        cmocka_unit_test(test_f16_all_patterns),    cmocka_unit_test(test_f32_to_f16_rounding),
#endif
        cmocka_unit_test(test_f32_to_f16_row),      cmocka_unit_test(test_alloc_fail_at),
        cmocka_unit_test(test_check_prints_reason), cmocka_unit_test(test_buf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
