/*
 * tests/test_tmp.h — a scratch directory per test executable, and whole
 * files in and out of it.  Header-only for the cmocka tests that write
 * files: include after <cmocka.h>, define TEST_TMP_NAME (the directory's
 * prefix) first, and pass test_tmp_setup / test_tmp_teardown to
 * cmocka_run_group_tests.
 */
#ifndef FOLIO_TEST_TMP_H
#define FOLIO_TEST_TMP_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef TEST_TMP_NAME
#error "define TEST_TMP_NAME before including test_tmp.h"
#endif

static char tmpdir[256];

static inline int test_tmp_setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/" TEST_TMP_NAME ".XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static inline int test_tmp_teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static inline void tmp_path(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", tmpdir, name);
}

/* The whole file, NUL-terminated for convenience; the caller frees it. */
static inline uint8_t *read_all(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)n + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    p[n] = 0;
    *len = (size_t)n;
    return p;
}

static inline void write_all(const char *path, const void *p, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(p, 1, n, fp), n);
    fclose(fp);
}

#endif
