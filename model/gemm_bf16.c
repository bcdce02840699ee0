/*
 * model/gemm_bf16.c — packing, the plain C reference and the dispatch of
 * the bf16 packed-weight product (contract and layout in
 * model/gemm_bf16.h; the AVX512-BF16 kernel in model/gemm_bf16_avx512.c).
 */
#include "gemm_bf16.h"

#include <string.h>

#include "folio/common.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

void gemm_bf16_pack(const uint16_t *W, int32_t N, int32_t K, uint16_t *P)
{
    const int32_t Kp = gemm_bf16_kp(K), np = (N + GEMM_BF16_NR - 1) / GEMM_BF16_NR;
    for (int32_t p = 0; p < np; p++) {
        uint16_t *pp = P + (size_t)p * GEMM_BF16_NR * Kp;
        for (int32_t j = 0; j < GEMM_BF16_NR; j++) {
            const int32_t n = p * GEMM_BF16_NR + j;
            const uint16_t *w = W + (size_t)n * K;
            for (int32_t k = 0; k < Kp; k++) /* [kp][j][t] with k = 2 kp + t */
                pp[(size_t)(k / 2) * 2 * GEMM_BF16_NR + 2 * j + (k & 1)] =
                    n < N && k < K ? w[k] : 0;
        }
    }
}

static inline float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

void gemm_bf16_run_plain(const uint16_t *P, int32_t N, int32_t K, int32_t n0, int32_t n1, int32_t M,
                         const uint16_t *A, int32_t lda, float beta, float *C, int32_t ldc)
{
    (void)N;
    const int32_t Kp = gemm_bf16_kp(K);
    for (int32_t n = n0; n < n1; n++) {
        const uint16_t *pp =
            P + (size_t)(n / GEMM_BF16_NR) * GEMM_BF16_NR * Kp + 2 * (n % GEMM_BF16_NR);
        for (int32_t m = 0; m < M; m++) {
            const uint16_t *a = A + (size_t)m * lda;
            float s = 0;
            for (int32_t kp = 0; kp < Kp / 2; kp++) {
                const uint16_t *w = pp + (size_t)kp * 2 * GEMM_BF16_NR;
                s += bf16_to_f32(a[2 * kp]) * bf16_to_f32(w[0]);
                s += bf16_to_f32(a[2 * kp + 1]) * bf16_to_f32(w[1]);
            }
            float *c = C + (size_t)m * ldc + n;
            *c = beta != 0.0f ? *c + s : s;
        }
    }
}

bool gemm_bf16_supported(void)
{
#if defined(__x86_64__) && defined(FOLIO_GEMM_BF16_X86)
    static int have = -1;
    if (have < 0) {
        /* AVX512_BF16 is CPUID leaf 7 subleaf 1, EAX bit 5 (not every
         * compiler's __builtin_cpu_supports knows it); avx512f covers the
         * OS's zmm state */
        unsigned a = 0, b = 0, c = 0, d = 0;
        bool bf16 = __get_cpuid_max(0, NULL) >= 7 && __get_cpuid_count(7, 1, &a, &b, &c, &d) &&
                    (a >> 5 & 1);
        __builtin_cpu_init();
        have = bf16 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    }
    return have > 0;
#else
    return false;
#endif
}

void gemm_bf16_run(const uint16_t *P, int32_t N, int32_t K, int32_t n0, int32_t n1, int32_t M,
                   const uint16_t *A, int32_t lda, float beta, float *C, int32_t ldc)
{
    FOLIO_CHECK(n0 % GEMM_BF16_NR == 0 && n0 <= n1 && n1 <= N && lda >= gemm_bf16_kp(K),
                "n0 %d n1 %d N %d lda %d K %d", (int)n0, (int)n1, (int)N, (int)lda, (int)K);
#if defined(__x86_64__) && defined(FOLIO_GEMM_BF16_X86)
    if (gemm_bf16_supported()) {
        gemm_bf16_run_avx512(P, K, n0, n1, M, A, lda, beta, C, ldc);
        return;
    }
#endif
    gemm_bf16_run_plain(P, N, K, n0, n1, M, A, lda, beta, C, ldc);
}
