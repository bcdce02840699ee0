/*
 * attention/attn_kern_portable4.c — the portable inner kernel for head_dim
 * a multiple of 4: attn_kern_body.h with 4-lane GCC vectors, which every
 * target lowers to what it has (SSE2 on baseline x86-64, NEON on arm64,
 * scalars otherwise), and the body's generic widening loads (integer vector
 * code: binary16 by shift and rescale, bf16 by shift, int8 by conversion).
 * Built with the portable flags (see meson.build); "portable" in
 * attn_force_isa runs this one, or attn_kern_portable.c for other head dims.
 */
#include <stdint.h>
#include <string.h>

#define VW        4
#define KERN_NAME attn__kern_portable4

#include "attn_kern_body.h"
