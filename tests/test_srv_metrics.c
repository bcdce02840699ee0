/*
 * tests/test_srv_metrics.c — Prometheus text formatting: histogram buckets
 * are cumulative with an inclusive upper bound (le) and a +Inf bucket equal
 * to _count, _sum adds the observations, label values are escaped, and
 * each sample line has the exposition format's shape; numbers and `le`
 * labels are the shortest decimal that reads back exactly.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "metrics.h"

static void test_hist(void **state)
{
    (void)state;
    static const double b[] = {0.1, 1, 10};
    struct srv_hist h;
    srv_hist_init(&h, b, 3);
    const double obs[] = {0.05, 0.1, 0.5, 1, 5, 10, 11, 1000};
    double sum = 0;
    for (size_t i = 0; i < sizeof(obs) / sizeof(obs[0]); i++) {
        srv_hist_observe(&h, obs[i]);
        sum += obs[i];
    }
    struct folio_buf out = {0};
    srv_prom_family(&out, "x_seconds", "histogram", "Test.");
    srv_prom_hist(&out, "x_seconds", "tenant=\"a\"", &h);
    const char *want = "# HELP x_seconds Test.\n"
                       "# TYPE x_seconds histogram\n"
                       "x_seconds_bucket{tenant=\"a\",le=\"0.1\"} 2\n"
                       "x_seconds_bucket{tenant=\"a\",le=\"1\"} 4\n"
                       "x_seconds_bucket{tenant=\"a\",le=\"10\"} 6\n"
                       "x_seconds_bucket{tenant=\"a\",le=\"+Inf\"} 8\n";
    assert_memory_equal(out.p, want, strlen(want));
    char line[128];
    snprintf(line, sizeof(line), "x_seconds_count{tenant=\"a\"} 8\n");
    assert_non_null(strstr(out.p, line));
    const char *s = strstr(out.p, "x_seconds_sum{tenant=\"a\"} ");
    assert_non_null(s);
    assert_true(fabs(strtod(s + strlen("x_seconds_sum{tenant=\"a\"} "), NULL) - sum) < 1e-9);
    folio_buf_free(&out);
}

static void test_samples_and_escaping(void **state)
{
    (void)state;
    struct folio_buf out = {0};
    srv_prom_sample(&out, "a_total", NULL, 12345678901.0);
    srv_prom_sample(&out, "b", "", 0.25);
    srv_prom_sample(&out, "c", "k=\"v\"", INFINITY);
    srv_prom_sample(&out, "d", NULL, NAN);
    assert_string_equal(out.p, "a_total 12345678901\nb 0.25\nc{k=\"v\"} +Inf\nd NaN\n");
    folio_buf_free(&out);
    /* shortest round-trip: exact labels, exact integers */
    static const double vals[] = {0.1,          0.0025, 7.5, 10, 1e-9, 1.0 / 3, 9007199254740993.0,
                                  123456789.25, -3};
    static const char *const want[] = {
        "0.1",          "0.0025", "7.5", "10", "1e-09", "0.3333333333333333", "9007199254740992",
        "123456789.25", "-3"};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        char t[32];
        srv_prom_number(vals[i], t);
        assert_string_equal(t, want[i]);
        assert_true(strtod(t, NULL) == vals[i]);
    }
    char esc[64];
    srv_prom_label_escape("a\"b\\c\nd", esc, sizeof(esc));
    assert_string_equal(esc, "a\\\"b\\\\c\\nd");
    srv_prom_label_escape("0123456789", esc, 6); /* truncates, stays terminated */
    assert_true(strlen(esc) < 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hist),
        cmocka_unit_test(test_samples_and_escaping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
