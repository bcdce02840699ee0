/*
 * model/fastmath.h — small branch-free math for model/'s hot loops (libm
 * calls stop vectorisation): a scalar exp, and the same exp over the lanes
 * of a GCC vector for the loops GCC will not vectorise itself.
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

/* x = model__exp_approx of each lane of x, an lvalue of a GCC vector type
 * VF of floats (VI: the int32_t vector of the same width).  The scalar
 * function's operations in the same order, so every lane gets the scalar
 * function's bits when both are compiled with the same contraction flags.
 * The clamp is a bitwise select: GCC will not if-convert a
 * compare-and-select while floating-point exceptions must be kept.  A
 * macro, not a function: a vector argument or result wider than the
 * baseline ABI's draws -Wpsabi where the build's flags lack AVX, and the
 * including file keeps its own flags (model/swiglu_body.h, model/sampler.c). */
#define MODEL__EXP_LANES(VF, VI, x)                                                                \
    do {                                                                                           \
        const VI lo_ = (x) < -87.0f;                                                               \
        const VI hi_ = (x) > 88.0f;                                                                \
        const VF c_ = (VF)(((VI)(x) & ~(lo_ | hi_)) | ((VI)((VF){0} - 87.0f) & lo_) |              \
                           ((VI)((VF){0} + 88.0f) & hi_));                                         \
        const VF t_ = c_ * 1.44269504f + 12582912.0f;                                              \
        const VF kf_ = t_ - 12582912.0f;                                                           \
        const VI k_ = (VI)t_ - 0x4B400000;                                                         \
        const VF r_ = c_ - kf_ * 0.693145752f - kf_ * 1.42860677e-6f;                              \
        const VF p_ =                                                                              \
            1.0f +                                                                                 \
            r_ * (1.0f +                                                                           \
                  r_ * (0.5f + r_ * (1.0f / 6 +                                                    \
                                     r_ * (1.0f / 24 + r_ * (1.0f / 120 + r_ * (1.0f / 720))))));  \
        (x) = p_ * (VF)((k_ + 127) << 23); /* k_ + 127 in [1, 254]: no overflow */                 \
    } while (0)

#endif
