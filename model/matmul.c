/*
 * model/matmul.c — the matrix products of the forward pass (contract in
 * model/matmul.h): C = A · Wᵀ + beta C with W in its file's type.
 *
 * Owns: matmul_t, i.e. the registered weights (borrowed data plus their
 * prepared copies: F32 packed into model/gemm.h's panels, oneDNN's
 * reordered weights), the per-thread widening tiles and gemm workspaces, the
 * workspace A is narrowed or quantized into, and the oneDNN engine,
 * streams and primitives.
 *
 * How each weight runs (chosen once, at matmul_add):
 *
 *   type   backend OPENBLAS                 backend ONEDNN
 *   F32    sgemv (M = 1), packed gemm       oneDNN f32 matmul, W reordered
 *          (M = 2..192, model/gemm.h, W     (M = 1: sgemv on W in place)
 *          packed once), sgemm (M > 192)
 *   BF16   portable 16-bit path             oneDNN bf16 matmul, A → bf16
 *                                           (M <= 4: fused rows in place)
 *          with AVX512-BF16, unless oneDNN is named (--matmul onednn):
 *          model/gemm_bf16.h's kernel on W packed once, A → bf16 (M <= 4:
 *          fused rows in place), under openblas and auto alike
 *   F16    portable 16-bit path             oneDNN f32 matmul, W widened
 *                                           and reordered once (M <= 4:
 *                                           fused rows on the f16 in place;
 *                                           bf16 if MM_F16_AS_BF16)
 *   F32 and F16 on OPENBLAS with AVX-512: W (F16 widened) in
 *          model/gemm.h's panels, packed once, and its AVX-512 12 x 32
 *          kernel for M > 1 (F16: M > 4; fewer rows as above)
 *   Q4_0..Q8_0, Q2_K..Q6_K, IQ4_NL, IQ4_XS (model/quant.c's table)
 *          quant_rows + quant_gemm (model/quant.h) on either backend,
 *          except Q8_0 from M = 256, Q4_K from 128 and Q6_K from 32
 *          with AVX2: widened tiles and sgemm (below)
 *   Q4_K_R8 .. IQ4_XS_R8 (every quantized file type in its load-time
 *          layout, which model__repack gives its matrices of rows in
 *          eights; model/quant_avx512.c has AVX-512 VNNI kernels for
 *          every one of them)
 *          quant_rows + quant_gemm at every M: their int8 kernels beat
 *          the widened tiles at every M measured (bench_quant --layer,
 *          M = 8..512: 1.4-2.0x Q4_K's figures, 1.2-1.9x Q6_K's; Q8_0:
 *          see BENCHMARKS.md)
 *
 * The packed-weight gemm (model/gemm.h) runs products of 2..MM_PACKED_MAX_M
 * rows for F32 and widened F16/BF16 weights, because sgemm re-packs W on
 * every call and W is the big operand here (under 64 concurrent streams
 * that packing was ~18% of the CPU).  Measured in one process, alternating
 * (bench_gemm: one layer of `small`, 2 threads), F32: 1.6-2.0x sgemm at
 * M = 2..16, 1.2-1.4x at 32..64, 1.05-1.2x at 128..192, but 0.8-1.05x at
 * 256..512 (where sgemm's packing is paid back), and its one-row kernel
 * 0.87-0.97x of sgemv: so sgemm / sgemv stay outside that range, reading
 * W's row-major copy in place, and F32 weights are held twice (the
 * packed copy is matmul_prepared_bytes).  oneDNN's f32 (W reordered once)
 * ran 0.7-1.2x sgemm, behind the packed gemm at every M of the range.
 * Widened F16/BF16 tiles are widened straight into the packed layout
 * (1.04-1.08x at M = 8..16, 1.0x at 64); widened quantized tiles stay on
 * sgemm (0.8-0.9x there).  cfg.gemm forces one or the other (A/B runs);
 * with FOLIO_MATMUL_ISA=plain auto keeps sgemm (the gemm's plain C
 * microkernel is its reference, run where cfg.gemm forces it).

 * F16 weights converted to bf16 lose 3 mantissa bits; the issue allows it
 * only if the logits stay within 5e-2 of llama.cpp's.  Measured on an
 * AVX-512 BF16 CPU (Zen 5), `tiny` through test_forward's
 * test_types_backends: F16 as bf16 on oneDNN differed from the dense f32
 * reference by 6.9e-2 (a BF16 file: 4.7e-2; llama.cpp computes F16 with
 * f16 activations, closer to f32 than bf16 ones), and from llama.cpp
 * itself on `small`'s F16 file by 5.16e-2 on one of six prompts
 * (tests/integration/llamacpp/compare_logits.mjs; exact F16: 4.1e-3), so
 * MM_F16_AS_BF16 stays 0 and F16 stays exact: on oneDNN its rows are widened to f32 once, at
 * load, into the f32 primitive's format (the prepared copy is twice the
 * file's bytes; decode, M <= 4, still reads the f16 rows).  Against the
 * portable path's per-tile widening and the AVX2 packed gemm, `small`'s
 * F16 file served 256 requests at 64 concurrent at 744-755 output tok/s
 * against 379-381 (AVX-512 Zen 5, alternated pairs; about 6% of that is
 * the huge-page arenas of the commit before), above its F32 file: the
 * memory buys F32's speed, and decode reads half F32's bytes.
 *
 * Why BF16 leaves oneDNN where the CPU has AVX512-BF16: oneDNN 2.6's bf16
 * matmul with a run-time M reached 430 GFLOP/s on one layer of `small` at
 * M = 64 and 130-320 at M = 8..32 (bench_gemm, 2 threads), where its
 * peak is ~900; model/gemm_bf16.h's 12 x 32 vdpbf16ps kernel on panels
 * packed once ran 1.35-1.4x oneDNN's batched decode of 8 sequences in
 * bench_model, 1.25x at 32, 1.11-1.16x at 64, 1.06-1.10x at 128, and
 * prefill 512 within noise (AVX-512 Zen 5, alternated runs; BENCHMARKS.md).
 * Naming oneDNN keeps its primitive, for comparisons.
 *
 * F32 and F16 (widened at load) have an AVX-512 f32 kernel too
 * (model/gemm_avx512.c, over model/gemm.h's panels), but only the OpenBLAS
 * backend runs it, in place of the AVX2 packed gemm (2x that on one layer
 * at M = 64..512): against oneDNN's f32 primitive it ran batched decode of
 * 8 at 1.15-1.5x and of 64 within noise in bench_model, yet the end-to-end
 * load (256 requests at 64 concurrent) at 0.93x (F32) and 0.89x (F16),
 * with p99 TTFT 1.11-1.15x: oneDNN is ahead on the prefill steps' 512
 * rows.
 *
 * oneDNN paths fall back to the OpenBLAS column of the table when oneDNN
 * has no kernel for this CPU (oneDNN 2.6's bf16 matmul needs AVX-512; a
 * primitive that cannot be created is how that shows).  The portable
 * 16-bit path reads W in place: M <= MM_FUSED_M rows go through a fused
 * dot product that widens each element as it streams W once (the decode
 * case: memory bound, half the bytes of F32); more rows go through
 * widened tiles: about MM_WIDE_BYTES (2 MiB) of W's rows at a time, the
 * band cut into tiles of equal size, widened into the thread's f32 tile,
 * then one sgemm per tile.  Both have an AVX2 + FMA + F16C version chosen
 * at run time and a plain C one (FOLIO_MATMUL_ISA=plain forces it; the
 * tests run both); the plain one is also the reference the tests compare
 * the others with.
 *
 * Why widened tiles, and why 2 MiB: without AVX512-BF16 or VNNI the
 * fastest arithmetic this code has for many rows is OpenBLAS's f32 sgemm
 * (a hand-written AVX2 f32 kernel that widened W as it packed it reached
 * only 45-55 GFLOP/s per core against sgemm's 70-80 at M = 512, and did
 * not beat it at M = 16..128 either), so a 16-bit or quantized W is widened
 * once per product and multiplied there.  The widening is one pass over
 * the tile (model/widen_avx2.c with AVX2; a few percent of the sgemm on
 * it at M >= 32); what costs is sgemm packing all of A again for every
 * tile.  (The packed gemm below now does what that kernel attempted, at
 * 1.0-2.0x sgemm for M <= 192.)  One layer of `small` at M = 512
 * (bench_quant --layer): F16 in 128 KiB tiles (about the 32 rows
 * before) ran at 0.65x F32's sgemm, in 2 MiB tiles (hundreds of rows,
 * still in the last-level cache) at 0.9-0.95x, and at
 * 0.95-1.0x for M = 32..128.  For quantized W the int8 kernels
 * (quant_gemm) are faster at small M (they read a quarter of F32's bytes
 * and need no widening: 2-3x sgemm at M = 8..16), sgemm on widened tiles
 * at large M; widen_min_m() holds the crossover measured on `small`'s
 * layer shapes (bench_quant --layer) and checked in bench_model's batched
 * decode.  Widened products use A in f32 (no activation quantization)
 * and, like sgemm, are not batch invariant: with cfg.batch_invariant
 * quantized weights stay on the int8 kernels.
 *
 * Still through OpenBLAS: F32 products of one row (sgemv) and of more
 * than MM_PACKED_MAX_M rows, F16/BF16 ones of more than MM_PACKED_MAX_M
 * rows (widened tiles; BF16 only without AVX512-BF16), quantized ones
 * from widen_min_m() rows on (above), and every product with cfg.gemm =
 * MATMUL_GEMM_SGEMM.  Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL
 * and IQ4_XS have no AVX2 widening and stay on the int8 kernels at every M
 * (in their load-time layouts).
 *
 * Work split: thread ith of nth owns band ith of the N output columns,
 * [n0, n1) with n0 rounded to MM_BAND_ALIGN (whole cache lines of C, whole
 * blocks of oneDNN's weight formats).  The bands are fixed by n_threads at
 * matmul_new; oneDNN weights are reordered band by band into one blocked
 * buffer each, with a primitive per band and beta (the primitive cache of
 * oneDNN shares identical ones).  M is a runtime dimension of those
 * primitives (DNNL_RUNTIME_DIM_VAL, as are A's and C's row strides), so
 * one primitive serves every step: measured on this machine, runtime-M
 * primitives ran within noise of fixed-M ones and cost nothing per new M.
 *
 * Threading and oversubscription: every product runs on the forward pass's
 * pool, one band per pool thread.  OpenBLAS is set to one thread by
 * model_ctx_new.  Debian's oneDNN runs on OpenMP; each pool thread calls
 * omp_set_num_threads(1) before its first oneDNN call (the OpenMP thread
 * count is a per-thread setting), so a oneDNN call from a pool thread runs
 * on that thread alone and the process has exactly n_threads busy threads
 * during a product (check: `ps -L` on foliod shows no OpenMP workers).
 */
#include "matmul.h"
#include "gemm.h"
#include "gemm_bf16.h"
#include "quant.h"
#ifdef FOLIO_WIDEN_X86
#include "widen.h"
#endif
#ifdef FOLIO_ROWS_AVX512
#include "rows_avx512.h"
#endif

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"

#ifdef FOLIO_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#endif

#define MM_BAND_ALIGN   16            /* output columns */
#define MM_WIDE_BYTES   (2048 * 1024) /* f32 bytes of W widened at a time */
#define MM_F16_AS_BF16  0             /* F16 weights to oneDNN as bf16 (see above) */
#define MM_FUSED_M      4             /* up to this many rows: fused 16-bit dot products */
#define MM_PACKED_MAX_M 192           /* auto: the packed gemm up to this many rows (use_packed) */

enum mm_kind {
    MM_ROWDOT,      /* F32/F16/BF16, batch invariant: rowdot kernels */
    MM_F32_BLAS,    /* cblas on the band */
    MM_16_PORTABLE, /* widen F16/BF16 */
    MM_QUANT,       /* model/quant.h */
    MM_DNNL,        /* oneDNN primitive per band */
    MM_BF16_PACKED, /* BF16, AVX512-BF16: model/gemm_bf16.h on packed panels */
};

struct mm_band {
    int32_t n0, n1;
#ifdef FOLIO_HAVE_DNNL
    dnnl_primitive_t prim[2]; /* beta 0, beta 1 */
    dnnl_memory_t wmem;       /* W's rows [n0, n1) in the primitive's format */
#endif
};

struct mm_weight {
    struct matmul_mat w;
    enum mm_kind kind;
    bool bf16;             /* oneDNN: A and W in bf16 (else f32); portable: W is BF16 */
    bool widen_avx2;       /* widen_supports(): model/widen.h widens it */
    struct mm_band *bands; /* [n_threads] for MM_DNNL */
    float *packed;         /* MM_F32_BLAS, MM_16_PORTABLE (F16): W in model/gemm.h's
                              panels (F16 widened), or NULL */
    bool avx512;           /* packed runs gemm_run_avx512 (own_avx512) */
    uint16_t *packed16;    /* MM_BF16_PACKED: W in model/gemm_bf16.h's panels */
};

struct matmul {
    struct matmul_config cfg;
    enum model_matmul used;
    struct mm_weight *w; /* [max_weights] */
    int32_t n_w;
    float *tile;        /* [n_threads][tile_floats] */
    size_t tile_floats; /* >= wide_rows(K) x K, rows rounded up to 16, for K <= max_k */
    void *xcvt;         /* A narrowed/quantized: [max_m] rows of <= 2 max_k + 64 bytes */
    size_t xcvt_row;    /* bytes per row reserved in xcvt */
    size_t prepared;    /* bytes of prepared weight copies */
    float *gws;         /* [n_threads][gemm_ws_floats()]: model/gemm.h's workspaces */
    float *wrows;       /* [n_threads][GEMM_NR][max_k]: rows widened for widen_packed */
#ifdef FOLIO_HAVE_DNNL
    dnnl_engine_t eng;
    dnnl_stream_t *streams; /* [n_threads] */
#endif
};

/* ---- names ------------------------------------------------------------ */

static const char *const backend_names[] = {"auto", "openblas", "onednn"};

const char *model_matmul_name(enum model_matmul b)
{
    return (unsigned)b < FOLIO_ARRAY_LEN(backend_names) ? backend_names[b] : "?";
}

int model_matmul_parse(const char *s, enum model_matmul *out)
{
    for (size_t i = 0; s && i < FOLIO_ARRAY_LEN(backend_names); i++)
        if (!strcmp(s, backend_names[i])) {
            *out = (enum model_matmul)i;
            return 0;
        }
    return -EINVAL;
}

bool model_matmul_onednn_built(void)
{
#ifdef FOLIO_HAVE_DNNL
    return true;
#else
    return false;
#endif
}

#ifdef FOLIO_HAVE_DNNL
static void *mm_alloc_f32(size_t n, float v)
{
    float *p = folio_aligned_alloc(64, n * sizeof(float));
    for (size_t i = 0; p && i < n; i++)
        p[i] = v * (float)(i % 17);
    return p;
}

static enum model_matmul calibrated = MODEL_MATMUL_OPENBLAS;
static bool use_avx2(void);

/* Seconds of the best of MM_CAL_REPS products on backend b, one thread, a
 * shape like a decode batch's (M 64, N 1024, K 768, f32); -1 on failure. */
#define MM_CAL_REPS 5
static double calibrate_one(enum model_matmul b, const float *A, const float *W, float *C)
{
    const int32_t M = 64, N = 1024, K = 768;
    /* OpenBLAS's side as it runs M = 64: the packed gemm with AVX2
     * (1.2x sgemm there, so the race is not left to noise between sgemm
     * and oneDNN, 0.9-1.0x of each other); sgemm with
     * FOLIO_MATMUL_ISA=plain, whose plain C kernel would hand the race
     * (and the plain tests' F32 products) to oneDNN */
    struct matmul_config cfg = {.backend = b,
                                .n_threads = 1,
                                .max_m = M,
                                .max_k = K,
                                .max_weights = 1,
                                .gemm = use_avx2() ? MATMUL_GEMM_AUTO : MATMUL_GEMM_SGEMM};
    struct matmul_mat w = {.type = GGUF_TENSOR_F32, .rows = N, .cols = K, .data = W};
    matmul_t *mm = NULL;
    pool_t *pool = NULL;
    int32_t id;
    double best = -1;
    if (!matmul_new(&cfg, &mm) && !matmul_add(mm, &w, &id) && !pool_new(1, &pool)) {
        for (int r = 0; r <= MM_CAL_REPS; r++) {
            uint64_t t0 = folio_now_ns();
            matmul_run(mm, pool, id, M, A, K, 0.0f, C, N);
            double s = (double)(folio_now_ns() - t0) * 1e-9;
            if (r > 0 && (best < 0 || s < best)) /* the first run warms up */
                best = s;
        }
    }
    pool_free(pool);
    matmul_free(mm);
    return best;
}

/* AUTO without AVX-512: whichever backend ran the calibration product
 * faster (OpenBLAS on a tie or a failure). */
static void calibrate(void)
{
    float *A = mm_alloc_f32((size_t)64 * 768, 0.01f), *W = mm_alloc_f32((size_t)1024 * 768, 0.02f);
    float *C = mm_alloc_f32((size_t)64 * 1024, 0.0f);
    if (A && W && C) {
        openblas_set_num_threads(1); /* as in a forward pass (model_ctx_new) */
        double tb = calibrate_one(MODEL_MATMUL_OPENBLAS, A, W, C);
        double td = calibrate_one(MODEL_MATMUL_ONEDNN, A, W, C);
        if (tb > 0 && td > 0 && td < tb)
            calibrated = MODEL_MATMUL_ONEDNN;
    }
    folio_free(A), folio_free(W), folio_free(C);
}
#endif

int model_matmul_resolve(enum model_matmul want, enum model_matmul *out)
{
    if (want == MODEL_MATMUL_OPENBLAS) {
        *out = want;
        return 0;
    }
#ifdef FOLIO_HAVE_DNNL
    if (want == MODEL_MATMUL_ONEDNN) {
        *out = want;
        return 0;
    }
    if (want == MODEL_MATMUL_AUTO) {
        /* With AVX-512 oneDNN is ~2x OpenBLAS 0.3.21 in f32 and has bf16
         * kernels: the rule.  Below it the two are close and the winner
         * depends on the CPU: a short calibration decides (once per
         * process). */
        dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
        bool avx512 = (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
        if (avx512) {
            *out = MODEL_MATMUL_ONEDNN;
            return 0;
        }
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, calibrate);
        *out = calibrated;
        return 0;
    }
    return -EINVAL;
#else
    if (want == MODEL_MATMUL_AUTO) {
        *out = MODEL_MATMUL_OPENBLAS;
        return 0;
    }
    return want == MODEL_MATMUL_ONEDNN ? -ENOTSUP : -EINVAL;
#endif
}

/* ---- rows of a weight ------------------------------------------------- */

void matmul_mat_rows_f32(const struct matmul_mat *w, int64_t r0, int64_t n, float *dst)
{
    quant_rows_to_float(w->type, w->data, w->cols, r0, n, dst); /* any layout of quant.c's table */
}

/* ---- portable kernels ------------------------------------------------- */

static inline float bf16_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* f16 -> f32 without branches on the common path (normal numbers, zero);
 * subnormals, inf and NaN take folio_f16_to_f32. */
static inline float f16_f32(uint16_t h)
{
    uint32_t e = h & 0x7c00u;
    if (e == 0x7c00u || (e == 0 && (h & 0x3ffu)))
        return folio_f16_to_f32(h);
    uint32_t u = ((uint32_t)(h & 0x8000u) << 16) |
                 (e ? (((h & 0x7fffu) << 13) + ((uint32_t)(127 - 15) << 23)) : 0);
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* C[m][n] = beta C + sum_k A[m][k] W[n][k] for m < M, n in [n0, n1), W
 * 16-bit rows of K: each row of W is read once for all M (<= MM_FUSED_M)
 * rows of A, with 16 partial sums per row (vectorisable). */
static void fused16(bool bf16, const uint16_t *W, int32_t K, int32_t n0, int32_t n1, int32_t M,
                    const float *A, int32_t lda, float beta, float *C, int32_t ldc)
{
    for (int32_t n = n0; n < n1; n++) {
        const uint16_t *w = W + (size_t)n * K;
        float acc[MM_FUSED_M][16];
        memset(acc, 0, sizeof(acc));
        int32_t k = 0;
        for (; k + 16 <= K; k += 16) {
            float wf[16];
            if (bf16)
                for (int i = 0; i < 16; i++)
                    wf[i] = bf16_f32(w[k + i]);
            else
                for (int i = 0; i < 16; i++)
                    wf[i] = f16_f32(w[k + i]);
            for (int32_t m = 0; m < M; m++)
                for (int i = 0; i < 16; i++)
                    acc[m][i] += wf[i] * A[(size_t)m * lda + k + i];
        }
        for (int32_t m = 0; m < M; m++) {
            float s = 0;
            for (int i = 0; i < 16; i++)
                s += acc[m][i];
            for (int32_t kk = k; kk < K; kk++)
                s += (bf16 ? bf16_f32(w[kk]) : f16_f32(w[kk])) * A[(size_t)m * lda + kk];
            float *c = C + (size_t)m * ldc + n;
            *c = beta != 0.0f ? *c + s : s;
        }
    }
}

#if defined(__x86_64__)
#include <immintrin.h>
#define MM_AVX2 __attribute__((target("avx2,fma,f16c")))

/* 8 elements of a 16-bit row as f32. */
MM_AVX2 static inline __m256 load8_16(bool bf16, const uint16_t *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (bf16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

MM_AVX2 static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* fused16 with AVX2 + FMA + F16C: same contract, same results up to the
 * order of the partial sums. */
MM_AVX2 static void fused16_avx2(bool bf16, const uint16_t *W, int32_t K, int32_t n0, int32_t n1,
                                 int32_t M, const float *A, int32_t lda, float beta, float *C,
                                 int32_t ldc)
{
    for (int32_t n = n0; n < n1; n++) {
        const uint16_t *w = W + (size_t)n * K;
        __m256 acc[MM_FUSED_M][2];
        for (int32_t m = 0; m < M; m++)
            acc[m][0] = acc[m][1] = _mm256_setzero_ps();
        int32_t k = 0;
        for (; k + 16 <= K; k += 16) {
            __m256 w0 = load8_16(bf16, w + k), w1 = load8_16(bf16, w + k + 8);
            for (int32_t m = 0; m < M; m++) {
                const float *a = A + (size_t)m * lda + k;
                acc[m][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(a), acc[m][0]);
                acc[m][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(a + 8), acc[m][1]);
            }
        }
        for (int32_t m = 0; m < M; m++) {
            float s = hsum8(_mm256_add_ps(acc[m][0], acc[m][1]));
            for (int32_t kk = k; kk < K; kk++)
                s += (bf16 ? bf16_f32(w[kk]) : f16_f32(w[kk])) * A[(size_t)m * lda + kk];
            float *c = C + (size_t)m * ldc + n;
            *c = beta != 0.0f ? *c + s : s;
        }
    }
}

/* fused16_avx2 for one row of A (decode), W's rows four at a time.  A
 * decode step streams every weight once, so what bounds it is how many of
 * W's cache lines are in flight: the band [n0, n1) is one contiguous range
 * of bytes, walked in groups of four rows while the next group is
 * prefetched in step (two lines per 16 columns, the group's 128 bytes of
 * them).  Four rows also give eight independent chains of FMAs where one
 * row had two.  Each row is summed exactly as fused16_avx2 sums it (two
 * accumulators, the same fold), so M = 1 gives the same bits either way. */
MM_AVX2 static void fused16_m1_avx2(bool bf16, const uint16_t *W, int32_t K, int32_t n0, int32_t n1,
                                    const float *A, float beta, float *C)
{
    const size_t rs = (size_t)K;                /* elements per row */
    for (size_t o = 0; o < 4 * rs * 2; o += 64) /* the first group */
        _mm_prefetch((const char *)(W + (size_t)n0 * rs) + o, _MM_HINT_T0);
    int32_t n = n0;
    for (; n + 4 <= n1; n += 4) {
        const uint16_t *w = W + (size_t)n * rs;
        const char *next = (const char *)(w + 4 * rs);
        __m256 acc[4][2];
        for (int i = 0; i < 4; i++)
            acc[i][0] = acc[i][1] = _mm256_setzero_ps();
        int32_t k = 0;
        for (; k + 16 <= K; k += 16) {
            _mm_prefetch(next + (size_t)k * 8, _MM_HINT_T0);
            _mm_prefetch(next + (size_t)k * 8 + 64, _MM_HINT_T0);
            const __m256 a0 = _mm256_loadu_ps(A + k), a1 = _mm256_loadu_ps(A + k + 8);
            for (int i = 0; i < 4; i++) {
                const uint16_t *wi = w + (size_t)i * rs + k;
                acc[i][0] = _mm256_fmadd_ps(load8_16(bf16, wi), a0, acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(load8_16(bf16, wi + 8), a1, acc[i][1]);
            }
        }
        for (int i = 0; i < 4; i++) {
            const uint16_t *wi = w + (size_t)i * rs;
            float s = hsum8(_mm256_add_ps(acc[i][0], acc[i][1]));
            for (int32_t kk = k; kk < K; kk++)
                s += (bf16 ? bf16_f32(wi[kk]) : f16_f32(wi[kk])) * A[kk];
            C[n + i] = beta != 0.0f ? C[n + i] + s : s;
        }
    }
    if (n < n1)
        fused16_avx2(bf16, W, K, n, n1, 1, A, K, beta, C, 1);
}
#endif

/* ---- batch-invariant products (MM_ROWDOT) ----------------------------- */

/*
 * With cfg.batch_invariant, F32, F16 and BF16 weights run here instead of
 * OpenBLAS, oneDNN or the widened tiles: C[m][n] is one dot product of A's
 * row m and W's row n computed the same way whatever M is and whichever
 * rows share the call (sgemm and sgemv accumulate in orders that depend on
 * M: measured, every row differs in its last bits between M = 1 and
 * M = 40).  Each dot runs 8 lanes of partial sums over k in steps of 8
 * (lane i gets k ≡ i mod 8, in increasing k, one fused multiply-add each),
 * then the lanes are summed in a fixed tree and the K % 8 tail added in
 * order.  Rows of A go 4 at a time and W's rows 2 at a time so each
 * loaded vector is used several times; blocks of W's rows sized for the
 * L2 cache are reused by every group of A's rows.  The grouping changes
 * which dots share a loop, never the operations of one dot.
 */
enum { RD_F32 = 0, RD_F16 = 1, RD_BF16 = 2 };
#define RD_M 4 /* rows of A per group */

static inline float rd_elem(int kind, const void *W, size_t i)
{
    if (kind == RD_F32)
        return ((const float *)W)[i];
    const uint16_t h = ((const uint16_t *)W)[i];
    return kind == RD_BF16 ? bf16_f32(h) : f16_f32(h);
}

/* Sums 8 lanes in the fixed tree ((0+4)+(2+6))+((1+5)+(3+7)), as
 * rd_hsum_avx2 does. */
static inline float rd_hsum(const float *l)
{
    const float a0 = l[0] + l[4], a1 = l[1] + l[5], a2 = l[2] + l[6], a3 = l[3] + l[7];
    const float b0 = a0 + a2, b1 = a1 + a3;
    return b0 + b1;
}

/* Rows [n0, n1) of W in blocks of about 96 KiB. */
static int32_t rd_block_rows(int kind, int32_t K)
{
    const int32_t esz = kind == RD_F32 ? 4 : 2;
    return FOLIO_MAX(2, (int32_t)((96 * 1024) / ((size_t)K * esz)) & ~1);
}

static inline void rd_store(float *c, float s, float beta)
{
    *c = beta != 0.0f ? *c + s : s;
}

/* The plain C kernel.  FMA is written explicitly (fmaf), so the lanes do
 * what the AVX2 ones do whether or not the compiler contracts. */
static void rowdot(int kind, const void *W, int32_t K, int32_t n0, int32_t n1, int32_t M,
                   const float *A, int32_t lda, float beta, float *C, int32_t ldc)
{
    const int32_t K8 = K & ~7, NB = rd_block_rows(kind, K);
    for (int32_t nb = n0; nb < n1; nb += NB) {
        const int32_t ne = FOLIO_MIN(n1, nb + NB);
        for (int32_t m0 = 0; m0 < M; m0 += RD_M) {
            const int32_t mr = FOLIO_MIN(RD_M, M - m0);
            for (int32_t n = nb; n < ne; n++) {
                const size_t wo = (size_t)n * K;
                float acc[RD_M][8];
                memset(acc, 0, sizeof(acc));
                for (int32_t k = 0; k < K8; k += 8)
                    for (int i = 0; i < 8; i++) {
                        const float w = rd_elem(kind, W, wo + k + i);
                        for (int32_t m = 0; m < mr; m++)
                            acc[m][i] = fmaf(w, A[(size_t)(m0 + m) * lda + k + i], acc[m][i]);
                    }
                for (int32_t m = 0; m < mr; m++) {
                    const float *a = A + (size_t)(m0 + m) * lda;
                    float s = rd_hsum(acc[m]);
                    for (int32_t k = K8; k < K; k++)
                        s = fmaf(rd_elem(kind, W, wo + k), a[k], s);
                    rd_store(C + (size_t)(m0 + m) * ldc + n, s, beta);
                }
            }
        }
    }
}

#if defined(__x86_64__)
MM_AVX2 static inline __m256 rd_load8(int kind, const void *W, size_t i)
{
    if (kind == RD_F32)
        return _mm256_loadu_ps((const float *)W + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)W + i));
    if (kind == RD_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

/* rd_hsum's tree on a vector. */
MM_AVX2 static inline float rd_hsum_avx2(__m256 v)
{
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); /* i + (i+4) */
    __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a)); /* (0+4)+(2+6), (1+5)+(3+7) */
    return _mm_cvtss_f32(_mm_add_ss(b, _mm_shuffle_ps(b, b, 1)));
}

/* One (row of A, row of W) result from its lanes: the tree, then the tail. */
MM_AVX2 static inline void rd_finish(int kind, __m256 acc, const void *W, size_t wo, int32_t K8,
                                     int32_t K, const float *a, float *c, float beta)
{
    float s = rd_hsum_avx2(acc);
    for (int32_t k = K8; k < K; k++)
        s = fmaf(rd_elem(kind, W, wo + k), a[k], s);
    rd_store(c, s, beta);
}

__attribute__((always_inline)) MM_AVX2 static inline void
rowdot_avx2_k(int kind, const void *W, int32_t K, int32_t n0, int32_t n1, int32_t M, const float *A,
              int32_t lda, float beta, float *C, int32_t ldc)
{
    const int32_t K8 = K & ~7, NB = rd_block_rows(kind, K);
    for (int32_t nb = n0; nb < n1; nb += NB) {
        const int32_t ne = FOLIO_MIN(n1, nb + NB);
        int32_t m0 = 0;
        for (; m0 + RD_M <= M; m0 += RD_M) { /* 4 rows of A x 2 rows of W */
            const float *a0 = A + (size_t)m0 * lda, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda;
            int32_t n = nb;
            for (; n + 2 <= ne; n += 2) {
                const size_t w0 = (size_t)n * K, w1 = w0 + K;
                __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00,
                       c21 = c00, c30 = c00, c31 = c00;
                for (int32_t k = 0; k < K8; k += 8) {
                    const __m256 x0 = rd_load8(kind, W, w0 + k), x1 = rd_load8(kind, W, w1 + k);
                    __m256 v = _mm256_loadu_ps(a0 + k);
                    c00 = _mm256_fmadd_ps(x0, v, c00), c01 = _mm256_fmadd_ps(x1, v, c01);
                    v = _mm256_loadu_ps(a1 + k);
                    c10 = _mm256_fmadd_ps(x0, v, c10), c11 = _mm256_fmadd_ps(x1, v, c11);
                    v = _mm256_loadu_ps(a2 + k);
                    c20 = _mm256_fmadd_ps(x0, v, c20), c21 = _mm256_fmadd_ps(x1, v, c21);
                    v = _mm256_loadu_ps(a3 + k);
                    c30 = _mm256_fmadd_ps(x0, v, c30), c31 = _mm256_fmadd_ps(x1, v, c31);
                }
                float *c = C + (size_t)m0 * ldc + n;
                rd_finish(kind, c00, W, w0, K8, K, a0, c, beta);
                rd_finish(kind, c01, W, w1, K8, K, a0, c + 1, beta);
                rd_finish(kind, c10, W, w0, K8, K, a1, c + ldc, beta);
                rd_finish(kind, c11, W, w1, K8, K, a1, c + ldc + 1, beta);
                rd_finish(kind, c20, W, w0, K8, K, a2, c + 2 * (size_t)ldc, beta);
                rd_finish(kind, c21, W, w1, K8, K, a2, c + 2 * (size_t)ldc + 1, beta);
                rd_finish(kind, c30, W, w0, K8, K, a3, c + 3 * (size_t)ldc, beta);
                rd_finish(kind, c31, W, w1, K8, K, a3, c + 3 * (size_t)ldc + 1, beta);
            }
            for (; n < ne; n++) { /* the last row of W alone */
                const size_t w0 = (size_t)n * K;
                __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
                for (int32_t k = 0; k < K8; k += 8) {
                    const __m256 x0 = rd_load8(kind, W, w0 + k);
                    c0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(a0 + k), c0);
                    c1 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(a1 + k), c1);
                    c2 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(a2 + k), c2);
                    c3 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(a3 + k), c3);
                }
                float *c = C + (size_t)m0 * ldc + n;
                rd_finish(kind, c0, W, w0, K8, K, a0, c, beta);
                rd_finish(kind, c1, W, w0, K8, K, a1, c + ldc, beta);
                rd_finish(kind, c2, W, w0, K8, K, a2, c + 2 * (size_t)ldc, beta);
                rd_finish(kind, c3, W, w0, K8, K, a3, c + 3 * (size_t)ldc, beta);
            }
        }
        for (; m0 < M; m0++) { /* the last rows of A, one at a time, 2 rows of W */
            const float *a0 = A + (size_t)m0 * lda;
            int32_t n = nb;
            for (; n + 2 <= ne; n += 2) {
                const size_t w0 = (size_t)n * K, w1 = w0 + K;
                __m256 c0 = _mm256_setzero_ps(), c1 = c0;
                for (int32_t k = 0; k < K8; k += 8) {
                    const __m256 v = _mm256_loadu_ps(a0 + k);
                    c0 = _mm256_fmadd_ps(rd_load8(kind, W, w0 + k), v, c0);
                    c1 = _mm256_fmadd_ps(rd_load8(kind, W, w1 + k), v, c1);
                }
                float *c = C + (size_t)m0 * ldc + n;
                rd_finish(kind, c0, W, w0, K8, K, a0, c, beta);
                rd_finish(kind, c1, W, w1, K8, K, a0, c + 1, beta);
            }
            for (; n < ne; n++) {
                const size_t w0 = (size_t)n * K;
                __m256 c0 = _mm256_setzero_ps();
                for (int32_t k = 0; k < K8; k += 8)
                    c0 = _mm256_fmadd_ps(rd_load8(kind, W, w0 + k), _mm256_loadu_ps(a0 + k), c0);
                rd_finish(kind, c0, W, w0, K8, K, a0, C + (size_t)m0 * ldc + n, beta);
            }
        }
    }
}

MM_AVX2 static void rowdot_avx2(int kind, const void *W, int32_t K, int32_t n0, int32_t n1,
                                int32_t M, const float *A, int32_t lda, float beta, float *C,
                                int32_t ldc)
{
    if (kind == RD_F32) /* one specialisation per element type */
        rowdot_avx2_k(RD_F32, W, K, n0, n1, M, A, lda, beta, C, ldc);
    else if (kind == RD_F16)
        rowdot_avx2_k(RD_F16, W, K, n0, n1, M, A, lda, beta, C, ldc);
    else
        rowdot_avx2_k(RD_BF16, W, K, n0, n1, M, A, lda, beta, C, ldc);
}
#endif

/* matmul.h */
enum matmul_isa_cap matmul_isa_cap(void)
{
    static int cap = -1; /* threads that race store the same */
    int c = __atomic_load_n(&cap, __ATOMIC_RELAXED);
    if (c < 0) {
        const char *e = getenv("FOLIO_MATMUL_ISA");
        c = !e                    ? MATMUL_ISA_ANY
            : !strcmp(e, "plain") ? MATMUL_ISA_PLAIN
            : !strcmp(e, "avx2")  ? MATMUL_ISA_AVX2
                                  : MATMUL_ISA_ANY;
        __atomic_store_n(&cap, c, __ATOMIC_RELAXED);
    }
    return (enum matmul_isa_cap)c;
}

/* Which of this file's kernels run: AVX2 + FMA + F16C when the CPU has
 * them, and for one row of A (M = 1) AVX-512 F/BW/VL when it has those
 * too; FOLIO_MATMUL_ISA=plain forces the plain C ones, =avx2 stops short of
 * AVX-512 (the tests run each). */
static int isa_avx2 = -1, isa_avx512 = -1;
static bool use_avx2(void)
{
    if (isa_avx2 < 0) {
        const bool plain = matmul_isa_cap() == MATMUL_ISA_PLAIN;
#if defined(__x86_64__)
        isa_avx2 = !plain && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                   folio_cpu_f16c();
#else
        (void)plain;
        isa_avx2 = 0;
#endif
    }
    return isa_avx2 > 0;
}

static bool use_avx512(void)
{
    if (isa_avx512 < 0) {
#ifdef FOLIO_ROWS_AVX512
        isa_avx512 = use_avx2() && matmul_isa_cap() == MATMUL_ISA_ANY &&
                     __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("avx512vl");
#else
        isa_avx512 = 0;
#endif
    }
    return isa_avx512 > 0;
}

/* One row of A against F32 rows [n0, n1) of W read in place: the AVX-512
 * kernel, else sgemv (which streams W at memory speed where sgemm with
 * M = 1 does not).  On the AVX-512 Zen 5, bench_model --single (median
 * share of the bandwidth, two alternated rounds): F32 86-89% against
 * 77-79% on sgemv; BF16 80-82% against 65-67% and F16 70-84% against 72%
 * on the AVX2 fused rows. */
static void f32_row(const float *W, int32_t K, int32_t n0, int32_t n1, const float *A, float beta,
                    float *C)
{
#ifdef FOLIO_ROWS_AVX512
    if (use_avx512()) {
        rows_m1_f32_avx512(W, K, n0, n1, A, beta, C);
        return;
    }
#endif
    cblas_sgemv(CblasRowMajor, CblasNoTrans, n1 - n0, K, 1.0f, W + (size_t)n0 * K, K, A, 1, beta,
                C + n0, 1);
}

/* Rows of W per widened tile at K columns: about MM_WIDE_BYTES of f32, a
 * multiple of 16, at least 16. */
static int32_t wide_rows(int32_t K)
{
    int32_t r = (int32_t)((MM_WIDE_BYTES / ((size_t)K * sizeof(float))) & ~(size_t)15);
    return FOLIO_MAX(16, r);
}

/* The smallest M at which a quantized weight runs as widened tiles and
 * sgemm rather than quant_gemm's int8 kernels (with AVX2; see the top of
 * the file).  Measured on `small`'s layer shapes, 2 threads: the int8
 * kernels win below it. */
static int32_t widen_min_m(enum gguf_tensor_type t)
{
    switch (t) {
    case GGUF_TENSOR_Q8_0:
        return 256;
    case GGUF_TENSOR_Q4_K:
        return 128;
    case GGUF_TENSOR_Q6_K:
        return 32;
    default:
        return INT32_MAX;
    }
}

static bool use_packed(const struct matmul *mm, enum gguf_tensor_type t, int32_t M);

/* Rows [n, n + rows) of W widened into tile in model/gemm.h's packed
 * layout: 16 rows at a time (one contiguous run of W's bytes, streamed)
 * widened to f32 into wrows[16][K], then transposed into their panel.
 * (Widening GEMM_KC columns of the 16 rows at a time, into L1, measured
 * 5-15% slower: the 16 short runs of bytes stream worse than one long.) */
static void widen_packed(const struct mm_weight *w, int32_t n, int32_t rows, float *wrows,
                         float *tile)
{
    const struct matmul_mat *mt = &w->w;
    const int32_t K = mt->cols;
    for (int32_t p = 0; p < rows; p += GEMM_NR) {
        const int32_t nr = FOLIO_MIN(GEMM_NR, rows - p);
#ifdef FOLIO_WIDEN_X86
        if (w->widen_avx2 && use_avx2())
            widen_rows_avx2(mt->type, mt->data, K, n + p, nr, wrows);
        else
#endif
            matmul_mat_rows_f32(mt, n + p, nr, wrows);
        gemm_transpose_panel(wrows, nr, K, tile + (size_t)p * K);
    }
}

/* The same product for any M: wide_rows(K) rows of W at a time widened
 * into the thread's tile, then multiplied: with the packed gemm, the tile
 * is widened straight into its packed layout (widen_packed); with sgemm,
 * into tile[rows][K] and one single-threaded sgemm per tile. */
static void widened(const struct matmul *mm, const struct mm_weight *w, int ith, int32_t n0,
                    int32_t n1, int32_t M, const float *A, int32_t lda, float beta, float *C,
                    int32_t ldc)
{
    float *tile = mm->tile + (size_t)ith * mm->tile_floats;
    const struct matmul_mat *mt = &w->w;
    const int32_t K = mt->cols, T0 = wide_rows(K);
    /* tiles of equal size (a multiple of 16, at most T0): no small last
     * tile, whose sgemm would pack all of A for a few columns */
    const int32_t nt = (n1 - n0 + T0 - 1) / T0;
    const int32_t T = FOLIO_MIN(T0, ((n1 - n0 + nt - 1) / nt + 15) & ~15);
    for (int32_t n = n0; n < n1; n += T) {
        int32_t rows = FOLIO_MIN(T, n1 - n);
        if (use_packed(mm, mt->type, M)) {
            widen_packed(w, n, rows, mm->wrows + (size_t)ith * GEMM_NR * K, tile);
            gemm_run(tile, rows, K, 0, rows, M, A, lda, beta, C + n, ldc,
                     mm->gws + (size_t)ith * gemm_ws_floats());
            continue;
        }
#ifdef FOLIO_WIDEN_X86
        if (w->widen_avx2 && use_avx2())
            widen_rows_avx2(mt->type, mt->data, K, n, rows, tile);
        else
#endif
            matmul_mat_rows_f32(mt, n, rows, tile);
        /* C[M][rows] (ldc, from column n) = A[M][K] · tile[rows][K]ᵀ + beta C */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, rows, K, 1.0f, A, lda, tile, K,
                    beta, C + n, ldc);
    }
}

/* Whether a product of M rows on weights of type t runs model/gemm.h's
 * packed-weight gemm rather than sgemm / sgemv (the OpenBLAS backend's F32
 * weights and widened 16-bit tiles).  Measured in one process, alternating
 * (bench_gemm, one layer of `small`, 2 threads; see BENCHMARKS.md): F32
 * 1.6-2.0x sgemm at M = 2..16, 1.2-1.4x at 32..64, 1.05-1.17x at 128,
 * 1.1x at 192, 0.8-1.05x at 256..512; one row 0.87-0.97x of sgemv;
 * widened F16/BF16 1.04-1.08x at M = 8..16, 1.0x at 64, 0.8-0.9x at
 * 256..512; widened Q8_0 0.8-0.9x where it widens (M >= 256). */
static bool use_packed(const struct matmul *mm, enum gguf_tensor_type t, int32_t M)
{
    if (mm->cfg.gemm != MATMUL_GEMM_AUTO)
        return mm->cfg.gemm == MATMUL_GEMM_PACKED;
    /* auto on the plain ISA: sgemm (the plain C microkernel is the
     * reference, tested where cfg.gemm forces it, not a fast path) */
    return use_avx2() && M >= 2 && M <= MM_PACKED_MAX_M &&
           (t == GGUF_TENSOR_F32 || t == GGUF_TENSOR_F16 || t == GGUF_TENSOR_BF16);
}

/* ---- oneDNN ----------------------------------------------------------- */

#ifdef FOLIO_HAVE_DNNL
static __thread bool omp_pinned; /* this thread set OpenMP to one thread */

static void omp_one_thread(void)
{
    if (!omp_pinned) {
        omp_set_num_threads(1);
        omp_pinned = true;
    }
}

/* Primitive for C[M][nb] = A[M][K] · W[nb][K]ᵀ (+ C when sum), M and the
 * row strides of A and C given at execution.  *wmd receives the weight
 * format oneDNN chose (format "any"). */
static int dnnl_prim(dnnl_engine_t eng, dnnl_data_type_t dt, int64_t nb, int64_t K, bool sum,
                     dnnl_primitive_t *prim, dnnl_memory_desc_t *wmd)
{
    dnnl_memory_desc_t src, wts, dst;
    dnnl_dims_t sd = {DNNL_RUNTIME_DIM_VAL, K}, ss = {DNNL_RUNTIME_DIM_VAL, 1};
    dnnl_dims_t wd = {K, nb};
    dnnl_dims_t dd = {DNNL_RUNTIME_DIM_VAL, nb}, ds = {DNNL_RUNTIME_DIM_VAL, 1};
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_matmul_desc_t md;
    int rc = -ENOTSUP;
    if (dnnl_memory_desc_init_by_strides(&src, 2, sd, dt, ss) ||
        dnnl_memory_desc_init_by_tag(&wts, 2, wd, dt, dnnl_format_tag_any) ||
        dnnl_memory_desc_init_by_strides(&dst, 2, dd, dnnl_f32, ds) ||
        dnnl_matmul_desc_init(&md, &src, &wts, NULL, &dst) || dnnl_primitive_attr_create(&attr))
        goto out;
    if (sum && (dnnl_post_ops_create(&po) || dnnl_post_ops_append_sum(po, 1.0f) ||
                dnnl_primitive_attr_set_post_ops(attr, po)))
        goto out;
    if (dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL))
        goto out; /* no kernel for this type on this CPU */
    *wmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if (dnnl_primitive_create(prim, pd))
        goto out;
    rc = 0;
out:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (po)
        dnnl_post_ops_destroy(po);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

static void dnnl_band_free(struct mm_band *b)
{
    for (int i = 0; i < 2; i++)
        if (b->prim[i])
            dnnl_primitive_destroy(b->prim[i]);
    if (b->wmem)
        dnnl_memory_destroy(b->wmem);
    memset(b, 0, sizeof(*b));
}

/* Builds band b's primitives and its reordered copy of W's rows
 * [b->n0, b->n1): the rows are widened to f32 (scratch, freed here), then
 * one oneDNN reorder converts them to the primitive's format and type. */
static int dnnl_band_prepare(struct matmul *mm, struct mm_weight *w, struct mm_band *b)
{
    const int64_t nb = b->n1 - b->n0, K = w->w.cols;
    const dnnl_data_type_t dt = w->bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t wmd0, wmd1, plain;
    int rc = dnnl_prim(mm->eng, dt, nb, K, false, &b->prim[0], &wmd0);
    if (rc == 0)
        rc = dnnl_prim(mm->eng, dt, nb, K, true, &b->prim[1], &wmd1);
    if (rc == 0 && !dnnl_memory_desc_equal(&wmd0, &wmd1))
        rc = -ENOTSUP; /* one copy of W must serve both */
    if (rc)
        return rc;
    float *f = folio_malloc((size_t)nb * (size_t)K * sizeof(float));
    if (!f)
        return -ENOMEM;
    matmul_mat_rows_f32(&w->w, b->n0, nb, f);
    dnnl_dims_t pd = {K, nb}, ps = {1, K}; /* W[nb][K] seen as K x nb */
    dnnl_memory_t src = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t rp = NULL;
    rc = -ENOMEM;
    if (dnnl_memory_desc_init_by_strides(&plain, 2, pd, dnnl_f32, ps) ||
        dnnl_memory_create(&src, &plain, mm->eng, f) ||
        dnnl_memory_create(&b->wmem, &wmd0, mm->eng, DNNL_MEMORY_ALLOCATE) ||
        dnnl_reorder_primitive_desc_create(&rpd, &plain, mm->eng, &wmd0, mm->eng, NULL) ||
        dnnl_primitive_create(&rp, rpd))
        goto out;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, b->wmem}};
    if (dnnl_primitive_execute(rp, mm->streams[0], 2, args) || dnnl_stream_wait(mm->streams[0]))
        goto out;
    mm->prepared += dnnl_memory_desc_get_size(&wmd0);
    rc = 0;
out:
    if (rp)
        dnnl_primitive_destroy(rp);
    if (rpd)
        dnnl_primitive_desc_destroy(rpd);
    if (src)
        dnnl_memory_destroy(src);
    folio_free(f);
    return rc;
}

/* Runs band b: C[:, n0:n1] = X · W_bandᵀ (+ C), X f32 (lda) or bf16 (K). */
static void dnnl_band_run(struct matmul *mm, const struct mm_weight *w, const struct mm_band *b,
                          int ith, int32_t M, const void *X, int64_t ldx, float beta, float *C,
                          int32_t ldc)
{
    omp_one_thread();
    const int64_t nb = b->n1 - b->n0, K = w->w.cols;
    dnnl_memory_desc_t smd, dmd;
    dnnl_dims_t sd = {M, K}, ss = {ldx, 1}, dd = {M, nb}, ds = {ldc, 1};
    dnnl_memory_t sm = NULL, dm = NULL;
    int bad = dnnl_memory_desc_init_by_strides(&smd, 2, sd, w->bf16 ? dnnl_bf16 : dnnl_f32, ss) ||
              dnnl_memory_desc_init_by_strides(&dmd, 2, dd, dnnl_f32, ds) ||
              dnnl_memory_create(&sm, &smd, mm->eng, (void *)X) ||
              dnnl_memory_create(&dm, &dmd, mm->eng, C + b->n0);
    if (!bad) {
        dnnl_exec_arg_t args[3] = {
            {DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, b->wmem}, {DNNL_ARG_DST, dm}};
        bad = dnnl_primitive_execute(b->prim[beta != 0.0f], mm->streams[ith], 3, args) ||
              dnnl_stream_wait(mm->streams[ith]);
    }
    if (sm)
        dnnl_memory_destroy(sm);
    if (dm)
        dnnl_memory_destroy(dm);
    FOLIO_CHECK(!bad, "oneDNN matmul failed on shapes validated when it was made");
}
#endif

/* ---- setup ------------------------------------------------------------ */

int matmul_new(const struct matmul_config *cfg, matmul_t **out)
{
    *out = NULL;
    if (!cfg || cfg->n_threads < 1 || cfg->max_m < 1 || cfg->max_k < 1 || cfg->max_weights < 0)
        return -EINVAL;
    enum model_matmul used;
    int rc = model_matmul_resolve(cfg->backend, &used);
    if (rc)
        return rc;
    struct matmul *mm = folio_calloc(1, sizeof(*mm));
    if (!mm)
        return -ENOMEM;
    mm->cfg = *cfg;
    mm->used = used;
    (void)use_avx2(); /* the ISA choice, made once before any pool thread reads it */
    const size_t nth = (size_t)cfg->n_threads, K = (size_t)cfg->max_k;
    mm->xcvt_row = (2 * K + 64 + 63) & ~(size_t)63;
    mm->w = folio_calloc((size_t)FOLIO_MAX(cfg->max_weights, 1), sizeof(*mm->w));
    /* wide_rows(K) x K for any K <= max_k, packed (rows rounded up to 16) */
    mm->tile_floats = MM_WIDE_BYTES / sizeof(float) + 16 * K;
    mm->tile = folio_aligned_alloc(64, nth * mm->tile_floats * sizeof(float));
    mm->xcvt = folio_aligned_alloc(64, (size_t)cfg->max_m * mm->xcvt_row);
    mm->gws = folio_aligned_alloc(64, nth * gemm_ws_floats() * sizeof(float));
    mm->wrows = folio_aligned_alloc(64, nth * GEMM_NR * K * sizeof(float));
    gemm_isa_init(!use_avx2());
    rc = -ENOMEM;
    if (!mm->w || !mm->tile || !mm->xcvt || !mm->gws || !mm->wrows)
        goto fail;
#ifdef FOLIO_HAVE_DNNL
    if (used == MODEL_MATMUL_ONEDNN) {
        mm->streams = folio_calloc(nth, sizeof(*mm->streams));
        if (!mm->streams)
            goto fail; /* -ENOMEM */
        rc = -ENOTSUP;
        if (dnnl_engine_create(&mm->eng, dnnl_cpu, 0))
            goto fail;
        for (size_t i = 0; i < nth; i++)
            if (dnnl_stream_create(&mm->streams[i], mm->eng, dnnl_stream_default_flags))
                goto fail;
        omp_one_thread(); /* the caller is pool thread 0 */
    }
#endif
    *out = mm;
    return 0;
fail:
    matmul_free(mm);
    return rc;
}

void matmul_free(matmul_t *mm)
{
    if (!mm)
        return;
    for (int32_t i = 0; i < mm->n_w; i++) {
#ifdef FOLIO_HAVE_DNNL
        if (mm->w[i].bands)
            for (int32_t b = 0; b < mm->cfg.n_threads; b++)
                dnnl_band_free(&mm->w[i].bands[b]);
#endif
        folio_free(mm->w[i].bands);
        folio_free(mm->w[i].packed);
        folio_free(mm->w[i].packed16);
    }
#ifdef FOLIO_HAVE_DNNL
    if (mm->streams)
        for (int32_t i = 0; i < mm->cfg.n_threads; i++)
            if (mm->streams[i])
                dnnl_stream_destroy(mm->streams[i]);
    folio_free(mm->streams);
    if (mm->eng)
        dnnl_engine_destroy(mm->eng);
#endif
    folio_free(mm->w);
    folio_free(mm->tile);
    folio_free(mm->xcvt);
    folio_free(mm->gws);
    folio_free(mm->wrows);
    folio_free(mm);
}

enum model_matmul matmul_backend_used(const matmul_t *mm)
{
    return mm->used;
}

size_t matmul_prepared_bytes(const matmul_t *mm)
{
    return mm->prepared;
}

/* Band ith of nth over N columns: [n0, n1), n0 a multiple of MM_BAND_ALIGN. */
static void band_of(int32_t N, int ith, int nth, int32_t *n0, int32_t *n1)
{
    int64_t per = ((int64_t)N + nth - 1) / nth;
    per = (per + MM_BAND_ALIGN - 1) & ~(int64_t)(MM_BAND_ALIGN - 1);
    *n0 = (int32_t)FOLIO_MIN(per * ith, (int64_t)N);
    *n1 = (int32_t)FOLIO_MIN(per * ith + per, (int64_t)N);
}

bool matmul_bf16_kernel(enum model_matmul b)
{
    return b != MODEL_MATMUL_ONEDNN && use_avx512() && gemm_bf16_supported();
}

/* Whether a weight of type t runs model/gemm_bf16.h's kernel on packed
 * panels: BF16 where the CPU has AVX512-BF16, unless oneDNN was asked for
 * by name (so its bf16 primitive stays measurable) or cfg.gemm forces the
 * library path (above). */
static bool bf16_packed(const struct matmul *mm, enum gguf_tensor_type t)
{
    return t == GGUF_TENSOR_BF16 && mm->cfg.gemm != MATMUL_GEMM_SGEMM &&
           matmul_bf16_kernel(mm->cfg.backend);
}

bool matmul_f32_avx512(enum model_matmul used)
{
    return used == MODEL_MATMUL_OPENBLAS && use_avx512();
}

/* Whether F32 and F16 weights run model/gemm.h's panels on the AVX-512
 * kernel (gemm_run_avx512) for more than one row (F16: more than
 * MM_FUSED_M), F16 widened once at load: with AVX-512 on the OpenBLAS
 * backend (oneDNN's f32 primitive, where auto goes with AVX-512, served
 * the end-to-end load 7-11% faster), unless cfg.gemm forces sgemm. */
static bool own_avx512(const struct matmul *mm, enum gguf_tensor_type t)
{
    return (t == GGUF_TENSOR_F32 || t == GGUF_TENSOR_F16) && mm->cfg.gemm != MATMUL_GEMM_SGEMM &&
           matmul_f32_avx512(mm->used);
}

/* W (F32 or F16) into model/gemm.h's panels, 16 rows at a time through
 * rows[16][K] (F16 widened there). */
static int pack_f32_panels(struct matmul *mm, struct mm_weight *w)
{
    const struct matmul_mat *mt = &w->w;
    const int32_t N = mt->rows, K = mt->cols;
    const size_t n = gemm_packed_floats(N, K);
    if (!(w->packed = folio_aligned_alloc(64, n * sizeof(float))))
        return -ENOMEM;
    if (mt->type == GGUF_TENSOR_F32) {
        gemm_pack_f32(mt->data, N, K, w->packed);
    } else {
        for (int32_t r = 0; r < N; r += GEMM_NR) {
            const int32_t nr = FOLIO_MIN(GEMM_NR, N - r);
            matmul_mat_rows_f32(mt, r, nr, mm->wrows);
            gemm_transpose_panel(mm->wrows, nr, K, w->packed + (size_t)r * K);
        }
    }
    mm->prepared += n * sizeof(float);
    w->avx512 = true;
    return 0;
}

int matmul_add(matmul_t *mm, const struct matmul_mat *mt, int32_t *id)
{
    if (!mt || !mt->data || mt->rows < 1 || mt->cols < 1 || mt->cols > mm->cfg.max_k ||
        mm->n_w >= mm->cfg.max_weights)
        return -EINVAL;
    struct mm_weight *w = &mm->w[mm->n_w];
    memset(w, 0, sizeof(*w));
    w->w = *mt;
    switch (mt->type) {
    case GGUF_TENSOR_F32:
        w->kind = MM_F32_BLAS;
        break;
    case GGUF_TENSOR_F16:
    case GGUF_TENSOR_BF16:
        w->kind = MM_16_PORTABLE;
        w->bf16 = mt->type == GGUF_TENSOR_BF16 || MM_F16_AS_BF16; /* oneDNN's type */
        break;
    default: { /* every quantized type of model/quant.c's table */
        const struct quant_traits *qt = quant_traits_of(mt->type);
        if (!qt || !(qt->in_files || qt->group) || mt->cols % qt->block ||
            mt->rows % FOLIO_MAX(qt->group, 1) ||
            quant_row_bytes(quant_dot_type(mt->type), mt->cols) > 2 * (size_t)mm->cfg.max_k + 64)
            return -EINVAL;
        w->kind = MM_QUANT;
        break;
    }
    }
    if (mm->cfg.batch_invariant && w->kind != MM_QUANT) {
        w->kind = MM_ROWDOT;
        w->bf16 = mt->type == GGUF_TENSOR_BF16;
        *id = mm->n_w++;
        return 0;
    }
    if (bf16_packed(mm, mt->type)) {
        const size_t n = gemm_bf16_packed_bytes(mt->rows, mt->cols);
        if (!(w->packed16 = folio_aligned_alloc(64, n)))
            return -ENOMEM;
        gemm_bf16_pack(mt->data, mt->rows, mt->cols, w->packed16);
        mm->prepared += n;
        w->kind = MM_BF16_PACKED;
        w->bf16 = true;
        *id = mm->n_w++;
        return 0;
    }
    if (own_avx512(mm, mt->type)) {
        int rc = pack_f32_panels(mm, w);
        if (rc)
            return rc;
        w->bf16 = false;
        *id = mm->n_w++;
        return 0;
    }
#ifdef FOLIO_HAVE_DNNL
    if (mm->used == MODEL_MATMUL_ONEDNN && w->kind != MM_QUANT) {
        const int nth = mm->cfg.n_threads;
        w->bands = folio_calloc((size_t)nth, sizeof(*w->bands));
        if (!w->bands)
            return -ENOMEM;
        int rc = 0;
        for (int b = 0; b < nth && rc == 0; b++) {
            band_of(mt->rows, b, nth, &w->bands[b].n0, &w->bands[b].n1);
            if (w->bands[b].n1 > w->bands[b].n0)
                rc = dnnl_band_prepare(mm, w, &w->bands[b]);
        }
        if (rc == 0) {
            w->kind = MM_DNNL;
        } else {
            /* no oneDNN kernel here (or no memory): the OpenBLAS column */
            for (int b = 0; b < nth; b++)
                dnnl_band_free(&w->bands[b]);
            folio_free(w->bands);
            w->bands = NULL;
            if (rc == -ENOMEM)
                return rc;
        }
    }
#endif
    if (w->kind != MM_DNNL)
        w->bf16 = mt->type == GGUF_TENSOR_BF16;
    if (w->kind == MM_F32_BLAS &&
        (mm->cfg.gemm == MATMUL_GEMM_PACKED || (mm->cfg.gemm == MATMUL_GEMM_AUTO && use_avx2()))) {
        const size_t n = gemm_packed_floats(mt->rows, mt->cols);
        if (!(w->packed = folio_aligned_alloc(64, n * sizeof(float))))
            return -ENOMEM;
        gemm_pack_f32(mt->data, mt->rows, mt->cols, w->packed);
        mm->prepared += n * sizeof(float);
    }
#ifdef FOLIO_WIDEN_X86
    w->widen_avx2 =
        (w->kind == MM_16_PORTABLE || w->kind == MM_QUANT) && widen_supports(mt->type, mt->cols);
#endif
    *id = mm->n_w++;
    return 0;
}

/* ---- products --------------------------------------------------------- */

struct mm_job {
    struct matmul *mm;
    const struct mm_weight *w;
    int32_t M, lda, ldc;
    const float *A;
    float beta;
    float *C;
    bool widened; /* a quantized W through widened tiles and sgemm */
};

/* Rows of A share ith into xcvt: bf16 (oneDNN) or the quant type. */
static void job_convert(void *arg, int ith, int nth)
{
    struct mm_job *j = arg;
    const int32_t K = j->w->w.cols;
    int64_t per = ((int64_t)j->M + nth - 1) / nth;
    int64_t m0 = FOLIO_MIN(per * ith, (int64_t)j->M), m1 = FOLIO_MIN(m0 + per, (int64_t)j->M);
    if (m1 <= m0)
        return;
    if (j->w->kind == MM_QUANT) {
        /* rows [m0, m1) of A into rows [m0, m1) of xcvt (both from row 0) */
        quant_rows(j->w->w.type, j->A, j->lda, K, m0, m1, j->mm->xcvt);
        return;
    }
    /* f32 -> bf16, round to nearest even; model/gemm_bf16.h's rows are
     * Kp apart with a zero pad */
    const int32_t ld = j->w->kind == MM_BF16_PACKED ? gemm_bf16_kp(K) : K;
    for (int64_t m = m0; m < m1; m++) {
        const float *a = j->A + m * j->lda;
        uint16_t *x = (uint16_t *)j->mm->xcvt + m * ld;
        if (ld > K)
            x[K] = 0;
        for (int32_t k = 0; k < K; k++) {
            uint32_t u;
            memcpy(&u, &a[k], sizeof(u));
            x[k] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
        }
    }
}

/* M <= MM_FUSED_M rows of A against 16-bit W's rows [n0, n1), read in
 * place (the fused dot products above). */
static void fused16_rows(bool bf16, const uint16_t *W, int32_t K, int32_t n0, int32_t n1, int32_t M,
                         const float *A, int32_t lda, float beta, float *C, int32_t ldc)
{
#ifdef FOLIO_ROWS_AVX512
    if (M == 1 && use_avx512()) {
        rows_m1_16_avx512(bf16, W, K, n0, n1, A, beta, C);
        return;
    }
#endif
#if defined(__x86_64__)
    if (use_avx2() && M == 1)
        fused16_m1_avx2(bf16, W, K, n0, n1, A, beta, C);
    else if (use_avx2())
        fused16_avx2(bf16, W, K, n0, n1, M, A, lda, beta, C, ldc);
    else
#endif
        fused16(bf16, W, K, n0, n1, M, A, lda, beta, C, ldc);
}

#ifdef FOLIO_HAVE_DNNL
/* Whether a oneDNN weight's product of M rows reads W's rows in place
 * instead (they stay in memory beside oneDNN's copy): one F32 row through
 * sgemv, up to MM_FUSED_M F16/BF16 rows through the fused dot products.
 * oneDNN 2.6's matmul at M = 1 is its gemm:jit on W's reordered copy:
 * one layer of `small` in BF16 at M = 1 (bench_gemm, 2 threads) ran at
 * 20-30 GFLOP/s there against 29-39 for the rows read in place, and
 * bench_model --single read BF16 weights at a median 70-82% of the
 * bandwidth against 64-67% (AVX-512 BF16 Zen 5, two alternated rounds);
 * F32 moved within noise (69-77% against 72-73%). */
static bool dnnl_by_rows(const struct mm_weight *w, int32_t M)
{
    return w->kind == MM_DNNL &&
           (M == 1 || (w->w.type != GGUF_TENSOR_F32 && M <= MM_FUSED_M && use_avx2()));
}
#endif

static void job_band(void *arg, int ith, int nth)
{
    struct mm_job *j = arg;
    const struct mm_weight *w = j->w;
    const int32_t K = w->w.cols;
    int32_t n0, n1;
    band_of(w->w.rows, ith, nth, &n0, &n1);
    if (n1 <= n0)
        return;
    switch (w->kind) {
    case MM_ROWDOT: {
        const int kind = w->w.type == GGUF_TENSOR_F32    ? RD_F32
                         : w->w.type == GGUF_TENSOR_BF16 ? RD_BF16
                                                         : RD_F16;
#if defined(__x86_64__)
        if (use_avx2())
            rowdot_avx2(kind, w->w.data, K, n0, n1, j->M, j->A, j->lda, j->beta, j->C, j->ldc);
        else
#endif
            rowdot(kind, w->w.data, K, n0, n1, j->M, j->A, j->lda, j->beta, j->C, j->ldc);
        break;
    }
    case MM_F32_BLAS: {
        const float *W = (const float *)w->w.data + (size_t)n0 * K;
        /* One row is a matrix-vector product: sgemv streams W at memory
         * speed, where sgemm with M = 1 does not. */
        const bool packed = w->packed && use_packed(j->mm, GGUF_TENSOR_F32, j->M);
        if (w->avx512 && j->M > 1) {
            gemm_run_avx512(w->packed, K, n0, n1, j->M, j->A, j->lda, j->beta, j->C, j->ldc);
        } else if (j->M == 1 && (use_avx512() || !packed)) {
            f32_row(w->w.data, K, n0, n1, j->A, j->beta, j->C);
        } else if (j->M == 1) { /* AVX2: the packed copy's one-row kernel */
            gemm_gemv(w->packed, w->w.rows, K, n0, n1, j->A, j->beta, j->C);
        } else if (packed) {
            gemm_run(w->packed, w->w.rows, K, n0, n1, j->M, j->A, j->lda, j->beta, j->C, j->ldc,
                     j->mm->gws + (size_t)ith * gemm_ws_floats());
        } else /* C[M][n0:n1] = A[M][K] · W[n0:n1][K]ᵀ + beta C */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->M, n1 - n0, K, 1.0f, j->A,
                        j->lda, W, K, j->beta, j->C + n0, j->ldc);
        break;
    }
    case MM_16_PORTABLE:
        if (w->avx512 && j->M > MM_FUSED_M)
            gemm_run_avx512(w->packed, K, n0, n1, j->M, j->A, j->lda, j->beta, j->C, j->ldc);
        else if (j->M <= MM_FUSED_M)
            fused16_rows(w->bf16, w->w.data, K, n0, n1, j->M, j->A, j->lda, j->beta, j->C, j->ldc);
        else
            widened(j->mm, w, ith, n0, n1, j->M, j->A, j->lda, j->beta, j->C, j->ldc);
        break;
    case MM_QUANT:
        if (j->widened) {
            widened(j->mm, w, ith, n0, n1, j->M, j->A, j->lda, j->beta, j->C, j->ldc);
            break;
        }
        quant_gemm(w->w.type, w->w.data, K, n0, n1, j->mm->xcvt, j->M, j->C, j->ldc, j->beta);
        break;
    case MM_BF16_PACKED: /* a few rows read W's rows in place, as MM_DNNL */
        if (j->M <= MM_FUSED_M)
            fused16_rows(true, w->w.data, K, n0, n1, j->M, j->A, j->lda, j->beta, j->C, j->ldc);
        else
            gemm_bf16_run(w->packed16, w->w.rows, K, n0, n1, j->M, j->mm->xcvt, gemm_bf16_kp(K),
                          j->beta, j->C, j->ldc);
        break;
    case MM_DNNL:
#ifdef FOLIO_HAVE_DNNL
        if (dnnl_by_rows(w, j->M)) {
            if (w->w.type != GGUF_TENSOR_F32)
                fused16_rows(w->w.type == GGUF_TENSOR_BF16, w->w.data, K, n0, n1, j->M, j->A,
                             j->lda, j->beta, j->C, j->ldc);
            else
                f32_row(w->w.data, K, n0, n1, j->A, j->beta, j->C);
        } else if (w->bf16)
            dnnl_band_run(j->mm, w, &w->bands[ith], ith, j->M, j->mm->xcvt, K, j->beta, j->C,
                          j->ldc);
        else
            dnnl_band_run(j->mm, w, &w->bands[ith], ith, j->M, j->A, j->lda, j->beta, j->C, j->ldc);
#endif
        break;
    }
}

void matmul_run(matmul_t *mm, pool_t *pool, int32_t id, int32_t M, const float *A, int32_t lda,
                float beta, float *C, int32_t ldc)
{
    FOLIO_CHECK(id >= 0 && id < mm->n_w && M >= 1 && M <= mm->cfg.max_m,
                "weight %d of %d, M %d (max %d)", (int)id, (int)mm->n_w, (int)M,
                (int)mm->cfg.max_m);
    FOLIO_CHECK(pool_size(pool) == mm->cfg.n_threads && (beta == 0.0f || beta == 1.0f),
                "pool of %d threads (made for %d), beta %g", (int)pool_size(pool),
                (int)mm->cfg.n_threads, (double)beta);
    const struct mm_weight *w = &mm->w[id];
    FOLIO_CHECK(lda >= w->w.cols && ldc >= w->w.rows, "lda %d < %d columns or ldc %d < %d rows",
                (int)lda, (int)w->w.cols, (int)ldc, (int)w->w.rows);
    struct mm_job j = {
        .mm = mm, .w = w, .M = M, .lda = lda, .ldc = ldc, .A = A, .beta = beta, .C = C};
    j.widened = w->kind == MM_QUANT && w->widen_avx2 && !mm->cfg.batch_invariant && use_avx2() &&
                M >= (mm->cfg.widen_min_m ? mm->cfg.widen_min_m : widen_min_m(w->w.type));
    bool by_rows = false;
#ifdef FOLIO_HAVE_DNNL
    by_rows = dnnl_by_rows(w, M);
#endif
    if ((w->kind == MM_QUANT && !j.widened) || (w->kind == MM_DNNL && w->bf16 && !by_rows) ||
        (w->kind == MM_BF16_PACKED && M > MM_FUSED_M)) {
        if (M < 4)
            job_convert(&j, 0, 1); /* a few rows: cheaper than a dispatch */
        else
            pool_run(pool, job_convert, &j);
    }
    (void)use_avx2(), (void)use_avx512(); /* decided before the pool's threads read them */
    if (mm->cfg.n_threads == 1)
        job_band(&j, 0, 1);
    else
        pool_run(pool, job_band, &j);
}
