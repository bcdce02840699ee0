/*
 * attention/attn_kern_portable.c — the inner kernel without any instruction
 * set extension: attn_kern_body.h with one-lane "vectors", i.e. plain scalar
 * loops the compiler may auto-vectorise for the baseline target.  Takes any
 * head_dim.  meson builds this file with -march=x86-64 on x86-64 even in a
 * -march=native build, so forcing it (attn_force_isa("portable")) tests the
 * code a CPU without AVX would run.
 */
#include <stdint.h>
#include <string.h>

#define VW        1
#define KERN_NAME attn__kern_portable

typedef float vf1 __attribute__((vector_size(4)));

static inline vf1 vload_h_impl(const uint16_t *p)
{
    /* binary16 -> binary32: shift exponent and mantissa into place, rescale
     * by 2^112 (handles normals and subnormals), patch inf/nan, add sign */
    uint32_t h = *p, em = h & 0x7fffu, u;
    float f;
    u = em << 13;
    memcpy(&f, &u, 4);
    f *= 0x1p112f;
    memcpy(&u, &f, 4);
    if (em >= 0x7c00u)
        u = 0x7f800000u | ((em & 0x3ffu) << 13);
    u |= (h & 0x8000u) << 16;
    memcpy(&f, &u, 4);
    vf1 v = {f};
    return v;
}

#define vload_h(p) vload_h_impl(p)
#define vhsum(v)   ((v)[0])

#include "attn_kern_body.h"
