/*
 * model/fastmath.h — small branch-free math for model/ loops that the
 * compiler should vectorise (libm calls stop vectorisation).
 */
#ifndef FOLIO_MODEL_FASTMATH_H
#define FOLIO_MODEL_FASTMATH_H

#include <stdint.h>
#include <string.h>

/* e^x, relative error < 2e-7 for x in [-87, 88]; x is clamped to that
 * range first (so -inf gives e^-87, not 0: mask it where it matters).
 * x = k ln2 + r with |r| <= ln2/2 (k by the 1.5 * 2^23 rounding trick),
 * e^r by its Taylor polynomial to r^6, 2^k built in the exponent field. */
static inline float model__exp_approx(float x)
{
    x = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float t = x * 1.44269504f + magic;
    float kf = t - magic;
    int32_t k;
    memcpy(&k, &t, sizeof(k));
    k -= 0x4B400000; /* bits of magic */
    float r = x - kf * 0.693145752f - kf * 1.42860677e-6f;
    float p =
        1.0f +
        r * (1.0f +
             r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    uint32_t bits = (uint32_t)(k + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof(scale));
    return p * scale;
}

#endif
