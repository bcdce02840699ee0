/*
 * model/swiglu.c — SwiGLU over one row (model_internal.h): the plain loop,
 * the generic 8-lane one, and the choice among those and the x86 ISA files'
 * (swiglu_avx2.c, swiglu_avx512.c).
 *
 * Built, like the ISA files, with -ffp-contract=off: with -march=native
 * GCC would otherwise fuse some multiply-adds of the plain loop (and of the
 * lanes) and not others, so the bits would depend on the build's flags.
 * Unfused, every variant performs the same IEEE single operations in the
 * same order and gives the same bits (test_forward's test_swiglu_lanes).
 */
#include "fastmath.h"
#include "matmul.h"
#include "model_internal.h"

void model__swiglu_ref(float *g, const float *u, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        g[i] = g[i] / (1.0f + model__exp_approx(-g[i])) * u[i];
}

#define SW          8
#define SWIGLU_NAME model__swiglu_generic
#include "swiglu_body.h"

typedef void (*swiglu_fn)(float *restrict, const float *restrict, int32_t);

/* AVX-512F, else AVX2, else the generic lanes, under matmul_isa_cap
 * (matmul.h), as for the matmul layer's kernels: FOLIO_MATMUL_ISA=plain
 * takes the generic ones and =avx2 stops short of AVX-512 (the tests run
 * each). */
static swiglu_fn swiglu_pick(void)
{
#ifdef FOLIO_SWIGLU_X86
    const enum matmul_isa_cap cap = matmul_isa_cap();
    if (cap == MATMUL_ISA_ANY && __builtin_cpu_supports("avx512f"))
        return model__swiglu_avx512;
    if (cap != MATMUL_ISA_PLAIN && __builtin_cpu_supports("avx2"))
        return model__swiglu_avx2;
#endif
    return model__swiglu_generic;
}

void model__swiglu(float *restrict g, const float *restrict u, int32_t n)
{
    static swiglu_fn fn; /* chosen once; threads that race store the same */
    swiglu_fn f = __atomic_load_n(&fn, __ATOMIC_RELAXED);
    if (!f) {
        f = swiglu_pick();
        __atomic_store_n(&fn, f, __ATOMIC_RELAXED);
    }
    f(g, u, n);
}
