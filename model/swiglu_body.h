/*
 * model/swiglu_body.h — SwiGLU over one row, SW lanes at a time, written
 * once with GCC vector extensions and compiled once per instruction set:
 *
 *   forward.c         SW = 8, the build's baseline flags (any target)
 *   swiglu_avx2.c     SW = 8, AVX2
 *   swiglu_avx512.c   SW = 16, AVX-512F
 *
 * Each including file defines SW and SWIGLU_NAME (the function's name).
 * g[i] = silu(g[i]) * u[i] = g[i] / (1 + exp(-g[i])) * u[i] for i < n, in
 * place; the tail (n mod SW) by model__swiglu_ref.  exp is
 * model__exp_approx's operations in the same order (the plain loop is not
 * vectorised by GCC: exp's clamp is a compare-and-select that it will not
 * if-convert while floating-point exceptions must be kept, so the lanes
 * are spelled out, the clamp as a bitwise select).  Every operation is an
 * IEEE single one (the ISA files build with -ffp-contract=off, so no
 * multiply and add is fused), which gives the plain loop's bits in every
 * lane, on every instruction set.
 */
#include <stdint.h>
#include <string.h>

#ifndef SW
#error "define SW and SWIGLU_NAME before including swiglu_body.h"
#endif

typedef float swiglu_vf __attribute__((vector_size(SW * 4)));
typedef int32_t swiglu_vi __attribute__((vector_size(SW * 4)));

void model__swiglu_ref(float *g, const float *u, int32_t n);

static inline swiglu_vf swiglu_select(swiglu_vi mask, swiglu_vf a, swiglu_vf b)
{
    return (swiglu_vf)((mask & (swiglu_vi)a) | (~mask & (swiglu_vi)b));
}

static inline swiglu_vf swiglu_splat(float x)
{
    swiglu_vf v;
    for (int i = 0; i < SW; i++)
        v[i] = x;
    return v;
}

static inline swiglu_vf swiglu_exp(swiglu_vf x)
{
    const swiglu_vf lo = swiglu_splat(-87.0f), hi = swiglu_splat(88.0f);
    x = swiglu_select(x < lo, lo, x);
    x = swiglu_select(x > hi, hi, x);
    const float magic = 12582912.0f;
    swiglu_vf t = x * 1.44269504f + magic;
    swiglu_vf kf = t - magic;
    swiglu_vi k = (swiglu_vi)t - 0x4B400000;
    swiglu_vf r = x - kf * 0.693145752f - kf * 1.42860677e-6f;
    swiglu_vf p =
        1.0f +
        r * (1.0f +
             r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    swiglu_vi bits = (k + 127) << 23; /* k + 127 in [1, 254]: no overflow */
    return p * (swiglu_vf)bits;
}

void SWIGLU_NAME(float *restrict g, const float *restrict u, int32_t n)
{
    int32_t i = 0;
    for (; i + SW <= n; i += SW) {
        swiglu_vf x, y;
        memcpy(&x, g + i, sizeof(x));
        memcpy(&y, u + i, sizeof(y));
        x = x / (1.0f + swiglu_exp(-x)) * y;
        memcpy(g + i, &x, sizeof(x));
    }
    model__swiglu_ref(g + i, u + i, n - i);
}
