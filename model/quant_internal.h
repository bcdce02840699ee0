/*
 * model/quant_internal.h — block layouts shared by model/quant*.c.
 *
 * The structs are ggml's block layouts byte for byte (checked by the
 * static asserts in quant.c); the 16-bit scales are IEEE half floats.
 * Per-ISA kernels live in their own files, built with their own flags;
 * quant.c picks one at run time.
 */
#ifndef FOLIO_MODEL_QUANT_INTERNAL_H
#define FOLIO_MODEL_QUANT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define QK4_0        32
#define QK4_1        32
#define QK5_0        32
#define QK5_1        32
#define QK8_0        32
#define QK8_1        32
#define QK_K         256
#define QK4_NL       32
#define K_SCALE_SIZE 12

/* x[i] = d * qs[i] */
struct blk_q8_0 {
    uint16_t d;
    int8_t qs[QK8_0];
};
/* x[i] = d * qs[i]; s = d * sum(qs) (activations of Q4_1/Q5_1 products) */
struct blk_q8_1 {
    uint16_t d, s;
    int8_t qs[QK8_1];
};
/* x[j] = d * ((qs[j] & 15) - 8), x[j + 16] = d * ((qs[j] >> 4) - 8) */
struct blk_q4_0 {
    uint16_t d;
    uint8_t qs[QK4_0 / 2];
};
/* x[j] = d * (qs[j] & 15) + m, x[j + 16] = d * (qs[j] >> 4) + m */
struct blk_q4_1 {
    uint16_t d, m;
    uint8_t qs[QK4_1 / 2];
};
/* as Q4_0 with a fifth bit from qh (bit j for x[j], bit j+16 for x[j+16]),
 * offset 16 */
struct blk_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[QK5_0 / 2];
};
struct blk_q5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
};
/* The IQ4 formats' 16 values a 4-bit code selects (model/quant_k.c). */
extern const int8_t quant__iq4_values[16];

/* 4-bit codes into the format's table of 16 values (quant__iq4_values):
 * x[j] = d * v[qs[j] & 15], x[j + 16] = d * v[qs[j] >> 4] */
struct blk_iq4_nl {
    uint16_t d;
    uint8_t qs[QK4_NL / 2];
};
/* 8 sub-blocks of 32, each as an IQ4_NL block whose scale is d * (ls - 32),
 * ls 6 bits: low 4 in scales_l[j / 2] (nibble j % 2), top 2 at bits 2 j of
 * scales_h; sub-block j's codes at qs + 16 j as IQ4_NL's */
struct blk_iq4_xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
};
/* 16 sub-blocks of 16 with 4-bit scales and mins (scales[j]: scale in the
 * low nibble, min in the high): x = d * sc * q - dmin * m, q in [0, 3].
 * Element 128 n + 32 j + 16 h + l (sub-block 8 n + 2 j + h) has its code
 * at bits 2 j of qs[32 n + 16 h + l]. */
struct blk_q2_k {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    uint16_t d, dmin;
};
/* 16 sub-blocks of 16 with 6-bit scales (sc - 32 signed; low 4 bits in the
 * nibbles of scales[0..7] (j < 8: low nibble of byte j, else high nibble
 * of byte j - 8), top 2 at bits 2 (j / 4) of scales[8 + j % 4]): x = d *
 * (sc - 32) * q, q in [-4, 3].  Element 128 n + 32 j + 16 h + l has its
 * low 2 bits as Q2_K's, and q = low - 4 unless bit 4 n + j of
 * hmask[16 h + l] is set (then q = low). */
struct blk_q3_k {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[K_SCALE_SIZE];
    uint16_t d;
};
/* 8 sub-blocks of 32 with 6-bit scales and mins (packed in scales[12]):
 * x = d * sc * q - dmin * m, q in [0, 15]; qs holds sub-blocks 2i (low
 * nibbles) and 2i+1 (high nibbles) in bytes 32i..32i+31 */
struct blk_q4_k {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2];
};
/* as Q4_K with a fifth bit: qh[l] bit 2i for sub-block 2i, 2i+1 for 2i+1 */
struct blk_q5_k {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
};
/* 16 sub-blocks of 16 with int8 scales: x = d * sc * (q - 32), q 6 bits:
 * low 4 in ql, high 2 in qh */
struct blk_q6_k {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
};
/* Q4_K_R8 (load-time layout, model/quant_r8.c): one 256-column block of eight
 * Q4_K rows r = 0..7 of a group.  Scale and min v = 8 j + r (sub-block j,
 * row r) keep their 6 bits: the low 4 in sl / ml (byte i < 16: value i in
 * the low nibble, 16 + i in the high; byte 16 + i: 32 + i and 48 + i), the
 * top 2 in sh / mh (byte i: values i, 16 + i, 32 + i, 48 + i at bits 0, 2,
 * 4, 6).  qs: sub-block j's 32 columns at qs + 128 j, as four 32-byte
 * vectors t = 0..3 whose byte 4 r + i holds row r's code of column
 * 32 j + 4 t + i (low nibble) and 32 j + 16 + 4 t + i (high nibble). */
struct blk_q4_k_r8 {
    uint16_t d[8], dmin[8];
    uint8_t sl[32], ml[32];
    uint8_t sh[16], mh[16];
    uint8_t qs[8 * QK_K / 2];
};

/* Q5_K_R8 (load-time layout, model/quant_r8.c): one 256-column block of eight
 * Q5_K rows.  d, dmin, sl, ml, sh, mh and qs as Q4_K_R8's (qs: the codes'
 * low 4 bits); qh + 32 j: sub-block j's fifth bits, byte 4 r + i holding
 * at bit 2 t (2 t + 1) that of row r's code of column 32 j + 4 t + i
 * (32 j + 16 + 4 t + i): the same byte as the code's low bits in qs
 * vector t, the bit the vector's low (high) nibble. */
struct blk_q5_k_r8 {
    uint16_t d[8], dmin[8];
    uint8_t sl[32], ml[32];
    uint8_t sh[16], mh[16];
    uint8_t qs[8 * QK_K / 2];
    uint8_t qh[8 * QK_K / 8];
};
/* the AVX2 tile reads both layouts' shared fields through blk_q4_k_r8 */
_Static_assert(offsetof(struct blk_q5_k_r8, qs) == offsetof(struct blk_q4_k_r8, qs),
               "Q5_K_R8 and Q4_K_R8 share their leading fields");

/* Q6_K_R8 (load-time layout, model/quant_r8.c): one 256-column block of eight
 * Q6_K rows.  sc[8 j + r]: sub-block j's scale of row r.  Codes 0..63 (the
 * file's q + 32) by 32-column chunks c: ql + 128 c holds four 32-byte
 * vectors t whose byte 4 r + i has the low 4 bits of row r's code of column
 * 32 c + 4 t + i (low nibble) and 32 c + 16 + 4 t + i (high nibble); qh +
 * 64 c holds two 32-byte vectors u whose byte 4 r + i has, at bits 2t and
 * 2t + 1, the top 2 bits of row r's code of column 32 c + 16 u + 4 t + i. */
struct blk_q6_k_r8 {
    uint16_t d[8];
    int8_t sc[8 * QK_K / 16];
    uint8_t ql[8 * QK_K / 2];
    uint8_t qh[8 * QK_K / 4];
};

/* Q3_K_R8 (load-time layout, model/quant_r8.c): one 256-column block of eight
 * Q3_K rows, by 32-column chunks c = 0..7 (sub-blocks 2c, 2c + 1).  s +
 * 12 c: the chunk's sixteen scales sc - 32 as 6-bit two's complement (the
 * file's code sc with bit 5 flipped), value v = 8 h + r row r's of
 * sub-block 2c + h: its low 4 bits in byte v % 8 (low nibble for h = 0,
 * high for h = 1), its top 2 at bits 2 (v / 4) of byte 8 + v % 4.  q +
 * 96 c: the codes (the file's q + 4, 0..7) as three 32-byte vectors e =
 * 0..2; slot k = 0..7 of byte 4 r + i is row r's code of column 32 c +
 * 4 k + i (sub-block 2c + k / 4): slots 2e and 2e + 1 whole at bits 0-2
 * and 3-5 of vector e; slots 6 and 7 split, their low 2 bits at bits 6-7
 * of vectors 0 and 1, their third bits at bits 6 and 7 of vector 2. */
struct blk_q3_k_r8 {
    uint16_t d[8];
    uint8_t s[8 * 12];
    uint8_t q[8 * 96];
};

/* Q2_K_R8 (load-time layout, model/quant_r8.c): one 256-column block of eight
 * Q2_K rows r = 0..7 of a group.  d, dmin: row r's f16 scales; sc[8 j + r]:
 * row r's scales byte of sub-block j as in its file block (scale in the low
 * nibble, min in the high).  Codes by 32-column chunks c: qs + 64 c holds
 * two 32-byte vectors u = 0, 1 whose byte 4 r + i has, at bits 2 t (t =
 * 0..3), row r's code of column 32 c + 16 u + 4 t + i: vector u is
 * sub-block 2 c + u of the eight rows. */
struct blk_q2_k_r8 {
    uint16_t d[8], dmin[8];
    uint8_t sc[8 * QK_K / 16];
    uint8_t qs[8 * QK_K / 4];
};

/* Q8_0_R8 (load-time layout, model/quant_r8.c): one 32-column block of eight
 * Q8_0 rows r = 0..7 of a group: their eight scales, then eight 32-byte
 * vectors t = 0..7 whose byte 4 r + i holds row r's code of column
 * 4 t + i. */
struct blk_q8_0_r8 {
    uint16_t d[8];
    int8_t qs[8 * QK8_0];
};

/* Q4_0_R8 (load-time layout, model/quant_r8.c): one 32-column block of eight
 * Q4_0 rows r = 0..7 of a group: their eight scales, then four 32-byte
 * vectors t = 0..3 whose byte 4 r + i holds row r's code (the file's,
 * 0..15, value d (code - 8)) of column 4 t + i in its low nibble and of
 * column 16 + 4 t + i in its high one. */
struct blk_q4_0_r8 {
    uint16_t d[8];
    uint8_t qs[8 * QK4_0 / 2];
};

/* Q5_0_R8 (load-time layout, model/quant_r8.c): one 32-column block of eight
 * Q5_0 rows.  d and qs (the codes' low 4 bits) as Q4_0_R8's; qh: byte
 * 4 r + i holds at bit 2 t (2 t + 1) the fifth bit of row r's code of
 * column 4 t + i (16 + 4 t + i), the same byte as the code's low bits in
 * qs vector t (Q5_K_R8's sub-block qh).  Codes 0..31, value d (code - 16). */
struct blk_q5_0_r8 {
    uint16_t d[8];
    uint8_t qs[8 * QK5_0 / 2];
    uint8_t qh[8 * 4];
};
_Static_assert(offsetof(struct blk_q5_0_r8, qs) == offsetof(struct blk_q4_0_r8, qs),
               "Q5_0_R8 and Q4_0_R8 share their leading fields");

/* Q4_1_R8 and Q5_1_R8 (load-time layouts, model/quant_r8.c): Q4_0_R8's and
 * Q5_0_R8's with the eight rows' mins m after their scales (value d code
 * + m, codes 0..15 and 0..31). */
struct blk_q4_1_r8 {
    uint16_t d[8], m[8];
    uint8_t qs[8 * QK4_1 / 2];
};
struct blk_q5_1_r8 {
    uint16_t d[8], m[8];
    uint8_t qs[8 * QK5_1 / 2];
    uint8_t qh[8 * 4];
};
_Static_assert(offsetof(struct blk_q5_1_r8, qs) == offsetof(struct blk_q4_1_r8, qs),
               "Q5_1_R8 and Q4_1_R8 share their leading fields");
_Static_assert(offsetof(struct blk_q5_0_r8, qh) == offsetof(struct blk_q5_0_r8, qs) + 128 &&
                   offsetof(struct blk_q5_1_r8, qh) == offsetof(struct blk_q5_1_r8, qs) + 128,
               "a five-bit layout's qh follows its qs");

/* IQ4_NL_R8 (load-time layout, model/quant_r8.c): one 32-column block of
 * eight IQ4_NL rows r = 0..7 of a group: their eight scales, then four
 * 32-byte vectors t = 0..3 whose byte 4 r + i holds row r's code (the
 * file's, 0..15, value d v[code] with v = quant__iq4_values) of column
 * 4 t + i in its low nibble and of column 16 + 4 t + i in its high one:
 * Q4_0_R8's bytes, the codes selecting table values instead of code - 8. */
struct blk_iq4_nl_r8 {
    uint16_t d[8];
    uint8_t qs[8 * QK4_NL / 2];
};

/* IQ4_XS_R8 (load-time layout, model/quant_r8.c): one 256-column block of
 * eight IQ4_XS rows r = 0..7 of a group: their eight scales, then the 64
 * six-bit scale codes (the file's ls, scale d (ls - 32)) by sub-block j,
 * six bytes each: the 48 bits at sc + 6 j (little-endian) hold row r's
 * code at bits 6 r .. 6 r + 5.  qs as Q4_K_R8's: sub-block j's 32 columns
 * at qs + 128 j, as four 32-byte vectors t = 0..3 whose byte 4 r + i holds
 * row r's code of column 32 j + 4 t + i (low nibble) and 32 j + 16 + 4 t
 * + i (high nibble). */
struct blk_iq4_xs_r8 {
    uint16_t d[8];
    uint8_t sc[6 * 8];
    uint8_t qs[8 * QK_K / 2];
};
_Static_assert(offsetof(struct blk_iq4_xs_r8, sc) + 6 * 8 + 2 <= sizeof(struct blk_iq4_xs_r8),
               "IQ4_XS_R8: an 8-byte load of sub-block 7's scale codes stays in the block");

/* activations of the Q4_0_R8 and Q5_0_R8 products: Q8_0's block (x = d *
 * qs, the same d and codes) with s = sum(qs), exact, which takes the
 * codes' offset o (8, 16) off: sum (c - o) x = sum c x - o s.  (Q4_1_R8
 * and Q5_1_R8 take Q8_1, whose s is d sum(qs) as a half float, the same
 * field at the same offset.) */
struct blk_q8_0s {
    uint16_t d;
    int16_t s;
    int8_t qs[QK8_0];
};
_Static_assert(offsetof(struct blk_q8_0s, qs) == offsetof(struct blk_q8_1, qs) &&
                   sizeof(struct blk_q8_0s) == sizeof(struct blk_q8_1),
               "Q8_0S and Q8_1 blocks: the same places");

/* activations of K-quant products: x = d * qs, bsums = sums of 16 qs */
struct blk_q8_k {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
};

/* rows per group of every load-time layout above */
#define QUANT_GROUP 8

/* Per-ISA product kernels (signature of quant_gemm_fn). */
#define QUANT__GEMM_ARGS                                                                           \
    const void *W, size_t wstride, int64_t K, int64_t n0, int64_t n1, const void *Xq,              \
        size_t xstride, int64_t M, float *Y, int64_t ldy, float beta
/* the load-time layouts' plain C kernels (model/quant_r8.c) */
void quant__gemm_q4_k_r8_scalar(QUANT__GEMM_ARGS);
void quant__gemm_q5_k_r8_scalar(QUANT__GEMM_ARGS);
void quant__gemm_q6_k_r8_scalar(QUANT__GEMM_ARGS);
void quant__gemm_q3_k_r8_scalar(QUANT__GEMM_ARGS);
void quant__gemm_q8_0_r8_scalar(QUANT__GEMM_ARGS);
void quant__gemm_q4_0_r8_scalar(QUANT__GEMM_ARGS);
void quant__gemm_q5_0_r8_scalar(QUANT__GEMM_ARGS);
void quant__gemm_q4_1_r8_scalar(QUANT__GEMM_ARGS);
void quant__gemm_q5_1_r8_scalar(QUANT__GEMM_ARGS);
void quant__gemm_q2_k_r8_scalar(QUANT__GEMM_ARGS);
void quant__gemm_iq4_nl_r8_scalar(QUANT__GEMM_ARGS);
void quant__gemm_iq4_xs_r8_scalar(QUANT__GEMM_ARGS);
void quant__gemm_q8_0_avx2(QUANT__GEMM_ARGS);
void quant__gemm_q8_0_avx512(QUANT__GEMM_ARGS);
void quant__gemm_q8_0_r8_avx512(QUANT__GEMM_ARGS);
void quant__gemm_q4_k_r8_avx512(QUANT__GEMM_ARGS);
void quant__gemm_q5_k_r8_avx512(QUANT__GEMM_ARGS);
void quant__gemm_q4_0_r8_avx512(QUANT__GEMM_ARGS);
void quant__gemm_q5_0_r8_avx512(QUANT__GEMM_ARGS);
void quant__gemm_q4_1_r8_avx512(QUANT__GEMM_ARGS);
void quant__gemm_q5_1_r8_avx512(QUANT__GEMM_ARGS);
void quant__gemm_iq4_nl_r8_avx512(QUANT__GEMM_ARGS);
void quant__gemm_iq4_xs_r8_avx512(QUANT__GEMM_ARGS);
void quant__gemm_q3_k_r8_avx512(QUANT__GEMM_ARGS);
void quant__gemm_q2_k_r8_avx512(QUANT__GEMM_ARGS);
void quant__gemm_q6_k_r8_avx512(QUANT__GEMM_ARGS);
void quant__gemm_q4_0_avx2(QUANT__GEMM_ARGS);
/* activation rows (from_float of Q8_0 / Q8_K / Q8_0S / Q8_1),
 * bit-identical to scalar */
void quant__rows_q8_0_avx2(const float *x, void *dst, int64_t n);
void quant__rows_q8_k_avx2(const float *x, void *dst, int64_t n);
void quant__rows_q8_0s_avx2(const float *x, void *dst, int64_t n);
void quant__rows_q8_1_avx2(const float *x, void *dst, int64_t n);
/* the same with AVX-512 F/BW (model/quant_rows_avx512.c) */
void quant__rows_q8_0_avx512(const float *x, void *dst, int64_t n);
void quant__rows_q8_k_avx512(const float *x, void *dst, int64_t n);
void quant__rows_q8_0s_avx512(const float *x, void *dst, int64_t n);
void quant__rows_q8_1_avx512(const float *x, void *dst, int64_t n);
void quant__gemm_q5_0_avx2(QUANT__GEMM_ARGS);
void quant__gemm_q4_k_avx2(QUANT__GEMM_ARGS);
void quant__gemm_q5_k_avx2(QUANT__GEMM_ARGS);
void quant__gemm_q6_k_avx2(QUANT__GEMM_ARGS);
void quant__gemm_q4_k_r8_avx2(QUANT__GEMM_ARGS);
void quant__gemm_q5_k_r8_avx2(QUANT__GEMM_ARGS);
void quant__gemm_q6_k_r8_avx2(QUANT__GEMM_ARGS);
void quant__gemm_q3_k_r8_avx2(QUANT__GEMM_ARGS);
void quant__gemm_q8_0_r8_avx2(QUANT__GEMM_ARGS);
void quant__gemm_q4_0_r8_avx2(QUANT__GEMM_ARGS);
void quant__gemm_q5_0_r8_avx2(QUANT__GEMM_ARGS);
void quant__gemm_q4_1_r8_avx2(QUANT__GEMM_ARGS);
void quant__gemm_q5_1_r8_avx2(QUANT__GEMM_ARGS);
void quant__gemm_q2_k_r8_avx2(QUANT__GEMM_ARGS);
void quant__gemm_iq4_nl_r8_avx2(QUANT__GEMM_ARGS);
void quant__gemm_iq4_xs_r8_avx2(QUANT__GEMM_ARGS);

/* The block codecs of the 256-element types and IQ4 (model/quant_k.c),
 * rows of model/quant.c's table.  The _w quantizers weight each element's
 * rounding error by qw[i] (an importance matrix's, [n]; NULL: all 1). */
/* The scale of x[0..n) (n a multiple of 8, at most 32) on codes -qmax ..
 * qmax - 1 with the least squared error weighted by qw (NULL: all 1): the
 * K-quants' sub-block search, also Q4_0's and Q5_0's block scale. */
float quant__sym_scale(const float *x, const float *qw, int n, int qmax);
/* The same for x ~= scale * L + *min, codes L in 0 .. nmax, the min of
 * either sign (Q4_1's and Q5_1's blocks); returns the scale (>= 0). */
float quant__asym_scale(const float *x, const float *qw, int n, int nmax, float *min);
void quant__q8_k_from_float(const float *x, void *dst, int64_t n);
void quant__q8_k_to_float(const void *src, float *y, int64_t n);
void quant__iq4_nl_to_float(const void *src, float *y, int64_t n);
void quant__iq4_nl_from_float(const float *x, void *dst, int64_t n);
void quant__iq4_nl_from_float_w(const float *x, void *dst, int64_t n, const float *qw);
float quant__iq4_nl_dot(int64_t K, const void *w, const void *xq);
void quant__iq4_xs_to_float(const void *src, float *y, int64_t n);
void quant__iq4_xs_from_float(const float *x, void *dst, int64_t n);
void quant__iq4_xs_from_float_w(const float *x, void *dst, int64_t n, const float *qw);
float quant__iq4_xs_dot(int64_t K, const void *w, const void *xq);
void quant__q2_k_to_float(const void *src, float *y, int64_t n);
void quant__q2_k_from_float(const float *x, void *dst, int64_t n);
void quant__q2_k_from_float_w(const float *x, void *dst, int64_t n, const float *qw);
float quant__q2_k_dot(int64_t K, const void *w, const void *xq);
void quant__q3_k_to_float(const void *src, float *y, int64_t n);
void quant__q3_k_from_float(const float *x, void *dst, int64_t n);
void quant__q3_k_from_float_w(const float *x, void *dst, int64_t n, const float *qw);
float quant__q3_k_dot(int64_t K, const void *w, const void *xq);
void quant__q4_k_to_float(const void *src, float *y, int64_t n);
void quant__q4_k_from_float(const float *x, void *dst, int64_t n);
void quant__q4_k_from_float_w(const float *x, void *dst, int64_t n, const float *qw);
float quant__q4_k_dot(int64_t K, const void *w, const void *xq);
void quant__q5_k_to_float(const void *src, float *y, int64_t n);
void quant__q5_k_from_float(const float *x, void *dst, int64_t n);
void quant__q5_k_from_float_w(const float *x, void *dst, int64_t n, const float *qw);
float quant__q5_k_dot(int64_t K, const void *w, const void *xq);
void quant__q6_k_to_float(const void *src, float *y, int64_t n);
void quant__q6_k_from_float(const float *x, void *dst, int64_t n);
void quant__q6_k_from_float_w(const float *x, void *dst, int64_t n, const float *qw);
float quant__q6_k_dot(int64_t K, const void *w, const void *xq);

#endif /* FOLIO_MODEL_QUANT_INTERNAL_H */
