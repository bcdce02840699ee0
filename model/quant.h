/*
 * model/quant.h — tensor element types: one table row per type, and the
 * quantized matrix products of the forward pass.
 *
 * Every type foliod knows (F32, F16, BF16, the legacy 32-element block
 * types Q4_0/Q4_1/Q5_0/Q5_1/Q8_0, the 256-element K-quants Q2_K .. Q6_K,
 * the non-linear IQ4_NL (32) and IQ4_XS (256), plus the activation types
 * Q8_1 and Q8_K) is one row of a table
 * (struct quant_traits): its name, block size, bytes per block, the type
 * activations are quantized to for products with it, conversions to and
 * from f32, and its dot kernels per instruction set.  The block layouts are
 * ggml's (they are a file format: foliod reads what llama.cpp writes and the
 * other way round); model/quant.c draws each one.
 *
 * Products: Y = X · Wᵀ with W stored as its file's blocks (never widened)
 * and X quantized once per product, per block, to the weight type's dot
 * type (quant_rows).  quant_gemm runs the fastest kernel the CPU has;
 * FOLIO_QUANT_ISA=scalar|avx2|avx512 (or quant_force_isa) forces one, for
 * tests and benchmarks.  quant_gemm_ref is the plain reference: dequantize
 * both operands to f32, dot in double.
 *
 * Threading: everything here is reentrant; kernels never allocate.  Split a
 * product across threads by [n0, n1) (or by rows of X for quant_rows).
 */
#ifndef FOLIO_MODEL_QUANT_H
#define FOLIO_MODEL_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "folio/gguf.h" /* enum gguf_tensor_type */

#ifdef __cplusplus
extern "C" {
#endif

/* A product kernel: Y[m][n] = beta * Y[m][n] + dot(X row m, W row n) for m in
 * [0, M), n in [n0, n1).  W rows are wstride bytes apart, Xq rows xstride. */
typedef void (*quant_gemm_fn)(const void *W, size_t wstride, int64_t K, int64_t n0, int64_t n1,
                              const void *Xq, size_t xstride, int64_t M, float *Y, int64_t ldy,
                              float beta);

enum quant_isa { QUANT_ISA_SCALAR = 0, QUANT_ISA_AVX2 = 1, QUANT_ISA_AVX512 = 2, QUANT_ISA_N };

/* One row of the type table. */
struct quant_traits {
    const char *name;               /* "Q4_K": as llama.cpp prints it */
    int32_t block;                  /* elements per block */
    int32_t block_bytes;            /* bytes per block */
    bool in_files;                  /* a tensor type foliod reads and writes in GGUF */
    enum gguf_tensor_type dot_type; /* activations' type in products */
    /* n elements (a multiple of block) to f32 / from f32 (NULL: none) */
    void (*to_float)(const void *src, float *dst, int64_t n);
    void (*from_float)(const float *src, void *dst, int64_t n);
    /* dot of one row of this type with one row of dot_type, K elements */
    float (*vec_dot)(int64_t K, const void *w, const void *x);
    /* product kernels per ISA; NULL where the ISA has none of its own */
    quant_gemm_fn gemm[QUANT_ISA_N];
    int32_t group;                   /* rows interleaved per group (load-time layouts), else 0 */
    enum gguf_tensor_type file_type; /* the file type a load-time layout holds */
};

/* Load-time layouts: a weight type rearranged in memory for the product
 * kernels, never in a file (quant_traits.in_files false).  Q4_K_R8 holds a
 * Q4_K matrix's rows interleaved in groups of eight, in the same bytes (so
 * it replaces the file's layout in place; quant_row_bytes is the file
 * type's): model/quant_r8.c draws it.  The number is outside ggml's types. */
#define QUANT_Q4_K_R8 ((enum gguf_tensor_type)64)
#define QUANT_Q6_K_R8 ((enum gguf_tensor_type)65) /* Q6_K's, the same way */
#define QUANT_Q8_0_R8 ((enum gguf_tensor_type)66) /* Q8_0's, the same way */
#define QUANT_Q5_K_R8 ((enum gguf_tensor_type)67) /* Q5_K's, the same way */
#define QUANT_Q4_0_R8 ((enum gguf_tensor_type)68) /* Q4_0's, the same way */
#define QUANT_Q5_0_R8 ((enum gguf_tensor_type)69) /* Q5_0's, the same way */
/* The activations of Q4_0_R8 and Q5_0_R8 products: Q8_0 blocks that also
 * carry the sum of their codes (in products only, like Q8_1 and Q8_K). */
#define QUANT_Q8_0S   ((enum gguf_tensor_type)70)
#define QUANT_Q4_1_R8 ((enum gguf_tensor_type)71) /* Q4_1's, as Q4_0_R8 */
#define QUANT_Q5_1_R8 ((enum gguf_tensor_type)72) /* Q5_1's, as Q5_0_R8 */
#define QUANT_Q3_K_R8 ((enum gguf_tensor_type)73) /* Q3_K's, as Q6_K_R8 */
#define QUANT_Q2_K_R8 ((enum gguf_tensor_type)74) /* Q2_K's, as Q6_K_R8 */
/* IQ4_NL's, as Q4_0_R8; IQ4_XS's, as Q4_K_R8 (its scale codes packed by
 * sub-block) */
#define QUANT_IQ4_NL_R8 ((enum gguf_tensor_type)75)
#define QUANT_IQ4_XS_R8 ((enum gguf_tensor_type)76)

/* One row of the type table. */
const struct quant_traits *quant_traits_of(enum gguf_tensor_type t);

/* The activation type X is quantized to for products with weights of type
 * t (Q8_0 for Q8_0/Q4_0/Q5_0, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants,
 * F32 for F32/F16/BF16; a load-time layout's may differ from its file
 * type's: Q8_0S for Q4_0_R8/Q5_0_R8). */
enum gguf_tensor_type quant_dot_type(enum gguf_tensor_type t);

/* Bytes of one row of K elements of type t (0: unknown type, or K not a
 * multiple of its block). */
size_t quant_row_bytes(enum gguf_tensor_type t, int64_t K);

/* Quantize rows [m0, m1) of X (row stride ldx floats, K columns) into Xq
 * (row stride quant_row_bytes(quant_dot_type(t), K)), for weights of type t.
 * Row m goes to Xq + m * stride (rows outside [m0, m1) are untouched). */
void quant_rows(enum gguf_tensor_type t, const float *X, int64_t ldx, int64_t K, int64_t m0,
                int64_t m1, void *Xq);

/* Y[m][n] = beta * Y[m][n] + sum_k x[m][k] w[n][k] for m in [0, M), n in
 * [n0, n1).  W: rows of K elements of type t, row stride quant_row_bytes(t,
 * K).  Xq: M rows from quant_rows.  beta is 0 or 1.  Never allocates.
 * t must be a quantized type (not F32/F16/BF16). */
void quant_gemm(enum gguf_tensor_type t, const void *W, int64_t K, int64_t n0, int64_t n1,
                const void *Xq, int64_t M, float *Y, int64_t ldy, float beta);

/* The reference of quant_gemm: both operands dequantized, dot in double. */
void quant_gemm_ref(enum gguf_tensor_type t, const void *W, int64_t K, int64_t n0, int64_t n1,
                    const void *Xq, int64_t M, float *Y, int64_t ldy, float beta);

/* The load-time layout of file type t (QUANT_Q4_K_R8 for Q4_K,
 * QUANT_Q5_K_R8 for Q5_K, QUANT_Q6_K_R8 for Q6_K, QUANT_Q3_K_R8 for
 * Q3_K, QUANT_Q2_K_R8 for Q2_K, QUANT_Q8_0_R8 for Q8_0, QUANT_Q4_0_R8 ..
 * QUANT_Q5_1_R8 for Q4_0 .. Q5_1, QUANT_IQ4_NL_R8 and QUANT_IQ4_XS_R8 for
 * IQ4_NL and IQ4_XS), or t itself when it has none. */
enum gguf_tensor_type quant_repack_type(enum gguf_tensor_type t);

/* Rearranges W (N rows of K elements of file type t) in place into
 * quant_repack_type(t), byte count unchanged.  0; -EINVAL (W untouched)
 * when t has no load-time layout or N is not a multiple of its group (such
 * a matrix stays in the file's layout, which every kernel also reads);
 * -ENOMEM.  Load time only: allocates one group's bytes of scratch. */
int quant_repack(enum gguf_tensor_type t, void *W, int64_t N, int64_t K);
/* Whether the load-time layout of t runs on as high an instruction set as
 * t's file layout at the current ISA (quant_isa_name); where it does not,
 * the loader keeps the file's layout.  (Every load-time layout has a
 * kernel at least as high as its file layout's today.) */
bool quant_repack_pays(enum gguf_tensor_type t);
/* The inverse: W (type rt = quant_repack_type(t)) back to t's file layout,
 * byte for byte what quant_repack was given.  0, -EINVAL, -ENOMEM. */
int quant_unpack(enum gguf_tensor_type rt, void *W, int64_t N, int64_t K);

/* Rows [r0, r0 + n) of W (rows of K elements of type t, any type of the
 * table including the load-time layouts) to f32: dst[n][K]. */
void quant_rows_to_float(enum gguf_tensor_type t, const void *W, int64_t K, int64_t r0, int64_t n,
                         float *dst);

/* Dequantize n elements (multiple of the block) of type t to f32. */
void quant_to_float(enum gguf_tensor_type t, const void *src, float *dst, int64_t n);

/* Quantize n elements (multiple of the block) of f32 to type t (writers:
 * gen-model, quantize): Q8_0 as llama.cpp's reference rounds, the other
 * quantized types with each block's scale (and min) searched by least
 * squares (model/quant.c).
 * 0, or -EINVAL for a type without a quantizer or n not whole blocks. */
int quant_from_float(enum gguf_tensor_type t, const float *src, void *dst, int64_t n);
/* quant_from_float for rows of `row` elements whose columns matter as
 * much as qw[0..row) says (an importance matrix: each column's mean square
 * activation; NULL: all alike).  The K-quants, IQ4 and Q4_0 .. Q5_1 (the
 * types for which quant_uses_imatrix is true) pick their scales by the
 * rounding error so weighted; the other types (Q8_0, the float types)
 * ignore qw. */
int quant_from_float_w(enum gguf_tensor_type t, const float *src, void *dst, int64_t n,
                       const float *qw, int64_t row);
bool quant_uses_imatrix(enum gguf_tensor_type t);

/* The ISA quant_gemm uses ("scalar", "avx2", "avx512"); quant_force_isa
 * sets it ("auto" or NULL: the best the CPU has): 0, -EINVAL for an unknown
 * name, -ENOTSUP when the CPU lacks it. */
const char *quant_isa_name(void);
int quant_force_isa(const char *name);

/* Scalar f32 -> bf16, round to nearest even (NaN kept quiet). */
uint16_t quant_f32_to_bf16(float f);

#ifdef __cplusplus
}
#endif
#endif /* FOLIO_MODEL_QUANT_H */
