/*
 * tests/fuzz/fuzz_util.h — what every libFuzzer harness here shares: the
 * property check.  CHECK(cond) prints the file, line and condition (and,
 * when the harness defines FUZZ_CHECK_CONTEXT before including this, that
 * string too: the tokenizer harness names its vocabulary) and aborts, which
 * libFuzzer records as a finding with the input that caused it.
 */
#ifndef FOLIO_TESTS_FUZZ_UTIL_H
#define FOLIO_TESTS_FUZZ_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#ifndef FUZZ_CHECK_CONTEXT
#define FUZZ_CHECK_CONTEXT NULL
#endif

static inline void fuzz_check_failed(const char *file, int line, const char *cond, const char *ctx)
{
    if (ctx)
        fprintf(stderr, "%s:%d: check failed: %s (%s)\n", file, line, cond, ctx);
    else
        fprintf(stderr, "%s:%d: check failed: %s\n", file, line, cond);
    abort();
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fuzz_check_failed(__FILE__, __LINE__, #cond, FUZZ_CHECK_CONTEXT);                      \
    } while (0)

#endif
