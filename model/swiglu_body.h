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
 * model__exp_approx's operations in the same order (the plain loop is not
 * vectorised by GCC: exp's clamp is a compare-and-select that it will not
 * if-convert while floating-point exceptions must be kept, so the lanes
 * are spelled out, the clamp as a bitwise select).  Every operation is an
 * IEEE single one (all three build with -ffp-contract=off, so no
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

/* Lanes of m set: a, else b (a bitwise select: no branch, no exception). */
#define SWIGLU_SELECT(m, a, b) ((swiglu_vf)(((m) & (swiglu_vi)(a)) | (~(m) & (swiglu_vi)(b))))

/* Written out in the loop rather than in helper functions taking vectors:
 * a vector argument wider than the baseline ABI's draws -Wpsabi where the
 * build's flags lack AVX. */
void SWIGLU_NAME(float *restrict g, const float *restrict u, int32_t n)
{
    swiglu_vf lo, hi;
    for (int i = 0; i < SW; i++)
        lo[i] = -87.0f, hi[i] = 88.0f;
    const float magic = 12582912.0f;
    int32_t i = 0;
    for (; i + SW <= n; i += SW) {
        swiglu_vf x, y;
        memcpy(&x, g + i, sizeof(x));
        memcpy(&y, u + i, sizeof(y));
        /* e = exp(-x), model__exp_approx's operations */
        swiglu_vf z = -x;
        z = SWIGLU_SELECT(z < lo, lo, z);
        z = SWIGLU_SELECT(z > hi, hi, z);
        const swiglu_vf t = z * 1.44269504f + magic;
        const swiglu_vf kf = t - magic;
        const swiglu_vi k = (swiglu_vi)t - 0x4B400000;
        const swiglu_vf r = z - kf * 0.693145752f - kf * 1.42860677e-6f;
        const swiglu_vf p =
            1.0f +
            r * (1.0f + r * (0.5f + r * (1.0f / 6 +
                                         r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
        const swiglu_vi bits = (k + 127) << 23; /* k + 127 in [1, 254]: no overflow */
        const swiglu_vf e = p * (swiglu_vf)bits;
        x = x / (1.0f + e) * y;
        memcpy(g + i, &x, sizeof(x));
    }
    model__swiglu_ref(g + i, u + i, n - i);
}
