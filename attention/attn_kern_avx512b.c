/*
 * attention/attn_kern_avx512b.c — kernel B of bench_attention --ab: the
 * AVX-512 kernel (attn_kern_avx512.c) built again with the switches of
 * attn_kern_ab.h, as attn__kern_avx512b.  Built only with meson
 * -Dattn_ab=true; attn_ab_select picks it.
 */
#define KERN_NAME attn__kern_avx512b
#include "attn_kern_ab.h"

#include "attn_kern_avx512.c"
