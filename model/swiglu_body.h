/*
 * model/swiglu_body.h — SwiGLU over one row, SW lanes at a time, written
 * once with GCC vector extensions and compiled once per instruction set:
 *
 *   swiglu.c          SW = 8, the build's own flags (any target)
 *   swiglu_avx2.c     SW = 8, AVX2
 *   swiglu_avx512.c   SW = 16, AVX-512F
 *
 * Each including file defines SW and SWIGLU_NAME (the function's name).
 * g[i] = silu(g[i]) * u[i] = g[i] / (1 + exp(-g[i])) * u[i] for i < n, in
 * place; the tail (n mod SW) by model__swiglu_ref.  exp is
 * MODEL__EXP_LANES (model/fastmath.h), model__exp_approx's operations in
 * the same order (GCC does not vectorise the plain loop: it will not
 * if-convert exp's clamp).  Every operation is an IEEE single one (all
 * three build with -ffp-contract=off, so no multiply and add is fused),
 * which gives the plain loop's bits in every lane, on every instruction
 * set.
 */
#include <stdint.h>
#include <string.h>

#include "fastmath.h"

#ifndef SW
#error "define SW and SWIGLU_NAME before including swiglu_body.h"
#endif

typedef float swiglu_vf __attribute__((vector_size(SW * 4)));
typedef int32_t swiglu_vi __attribute__((vector_size(SW * 4)));

void model__swiglu_ref(float *g, const float *u, int32_t n);

void SWIGLU_NAME(float *restrict g, const float *restrict u, int32_t n)
{
    int32_t i = 0;
    for (; i + SW <= n; i += SW) {
        swiglu_vf x, y;
        memcpy(&x, g + i, sizeof(x));
        memcpy(&y, u + i, sizeof(y));
        swiglu_vf e = -x;
        MODEL__EXP_LANES(swiglu_vf, swiglu_vi, e);
        x = x / (1.0f + e) * y;
        memcpy(g + i, &x, sizeof(x));
    }
    model__swiglu_ref(g + i, u + i, n - i);
}
