/*
 * attention/attn_kern_portable.c — the inner kernel without any instruction
 * set extension: attn_kern_body.h with one-lane "vectors", i.e. plain scalar
 * loops the compiler may auto-vectorise for the baseline target, and the
 * body's generic widening loads.  Takes any head_dim.  meson builds this
 * file with -march=x86-64 on x86-64 even in a -march=native build, so
 * forcing it (attn_force_isa("portable")) tests the code a CPU without AVX
 * would run.
 */
#include <stdint.h>
#include <string.h>

#define VW        1
#define KERN_NAME attn__kern_portable

#include "attn_kern_body.h"
