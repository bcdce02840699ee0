/*
 * tests/test_isa.h — whether this run of a test repeats the default one.
 *
 * tests/meson.build runs test_matmul and test_forward again with oneDNN
 * held to a lower ISA (DNNL_MAX_CPU_ISA=AVX2, then SSE41).  On a CPU whose
 * best ISA is AVX2 already, the AVX2 run takes exactly the paths of the
 * default run; the test then skips (meson's exit status 77) instead of
 * spending CI time on the same work twice.
 */
#ifndef FOLIO_TEST_ISA_H
#define FOLIO_TEST_ISA_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_ISA_SKIP 77

static inline int test_isa_repeats_default(void)
{
    const char *cap = getenv("DNNL_MAX_CPU_ISA");
    if (!cap || strcmp(cap, "AVX2") != 0)
        return 0;
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports("avx512f"))
        return 0;
    printf("SKIP: DNNL_MAX_CPU_ISA=AVX2 on a CPU without AVX-512 is the default run\n");
    return 1;
#else
    return 0;
#endif
}

#endif
