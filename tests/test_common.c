/*
 * tests/test_common.c — the shared helpers: half-precision conversion
 * against the compiler's cc_half, and the allocation fault injector.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "folio/common.h"

/* The compiler's own binary16 type is the oracle (GCC >= 12 on x86-64). */
__extension__ typedef _Float16 cc_half;

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_all_patterns),
        cmocka_unit_test(test_f32_to_f16_rounding),
        cmocka_unit_test(test_alloc_fail_at),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
