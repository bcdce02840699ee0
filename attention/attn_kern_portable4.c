/*
 * attention/attn_kern_portable4.c — the portable inner kernel for head_dim
 * a multiple of 4: attn_kern_body.h with 4-lane GCC vectors, which every
 * target lowers to what it has (SSE2 on baseline x86-64, NEON on arm64,
 * scalars otherwise).  Built with the portable flags (see meson.build);
 * "portable" in attn_force_isa runs this one, or attn_kern_portable.c for
 * other head dims.
 */
#include <stdint.h>
#include <string.h>

#define VW        4
#define KERN_NAME attn__kern_portable4

typedef float vf4 __attribute__((vector_size(16)));

static inline float half_to_float(uint16_t h)
{
    /* as in attn_kern_portable.c: rescale by 2^112, patch inf/nan, sign */
    uint32_t em = h & 0x7fffu, u = em << 13;
    float f;
    memcpy(&f, &u, 4);
    f *= 0x1p112f;
    memcpy(&u, &f, 4);
    if (em >= 0x7c00u)
        u = 0x7f800000u | ((em & 0x3ffu) << 13);
    u |= (uint32_t)(h & 0x8000u) << 16;
    memcpy(&f, &u, 4);
    return f;
}

static inline vf4 vload_h_impl(const uint16_t *p)
{
    vf4 v = {half_to_float(p[0]), half_to_float(p[1]), half_to_float(p[2]), half_to_float(p[3])};
    return v;
}

#define vload_h(p) vload_h_impl(p)
#define vhsum(v)   ((v)[0] + (v)[1] + (v)[2] + (v)[3])

#include "attn_kern_body.h"
