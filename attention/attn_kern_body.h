/*
 * attention/attn_kern_body.h — the inner paged-attention kernel, written
 * once with GCC vector extensions and compiled once per instruction set.
 *
 * Included by
 *   attn_kern_portable.c   VW = 1: plain scalar code, any head_dim
 *   attn_kern_portable4.c  VW = 4: generic 16-byte vectors (SSE2 on
 *                          baseline x86-64, NEON elsewhere)
 *   attn_kern_avx2.c       VW = 8: AVX2 + FMA + F16C
 *   attn_kern_avx512.c     VW = 16: AVX-512F + BW + VNNI
 * each built with its own compiler flags; the including file defines
 *   VW                 lanes of one vector (head_dim must be a multiple)
 *   KERN_NAME          the exported function, e.g. attn__kern_avx2
 * and may define the widening loads (else the generic vector code below):
 *   vload_h(p)         VW binary16 values at p -> vf
 *   vload_bf(p)        VW bfloat16 values at p -> vf
 *   vload_q8(p)        VW int8 values at p -> vf
 * and may include attn_kern_q8dot.h (KQ8_W, kq8_dot4: q8 scores as int8
 * dot products, for head_dim a multiple of KQ8_W).
 *
 * A piece of one KV head whose rows bring at least VW query vectors (a
 * prefill chunk) runs attn_kern_tile.h's path instead, outside batch
 * invariance: the tile's query vectors in lanes, scores and values as
 * small products, 1.6-2.3x the per-row path below on prefills.  What
 * follows is the per-row path: decodes, and everything in batch-invariant
 * batches.
 *
 * One call runs one piece (attn_internal.h): n_kvh consecutive KV heads
 * and their hv = n_kvh * group query heads.  Rows are taken in tiles of rt
 * rows x hv heads (mcap query vectors, at most 32 unless hv is larger),
 * whose queries times the softmax scale are copied to qs once.  A decode
 * piece takes all KV heads of the layer at once: the chunk's row pointers
 * (and q8 scale runs) are built once for all of them, and each head's K
 * and V are read head by head, hstride apart (in the pager's arena a
 * block's head tiles are adjacent, so over a run of block ids a
 * sequence's K of the layer is one stream of memory and its V another).
 * For each tile the visible key range is walked in chunks of at most KC =
 * 64 keys, which may span blocks: a chunk's rows are reached through a
 * table of row pointers (chunk_rows: one per key, built once per chunk
 * from the page table), so the chunk grid does not depend on the block
 * size and a block of 16 costs no shorter chunks (KC 16 within blocks
 * before; KC 32 across them measured 1.1-1.4x faster for q8 and 1.0-1.2x
 * for f16/bf16 decode from memory on a Zen 5, and 8-30% from cache.  KC
 * 64 against 32, both kernels in one process (bench_attention --ab, the
 * Zen 5, twentieth session): decode 32 x 4096 through the pager's tables
 * 1.05-1.10x for f32, 1.25-1.36x f16, 1.26-1.32x bf16, 1.16-1.22x q8;
 * shuffled tables 0.96-1.12x; from cache 0.99-1.18x.  KC 128 gained less
 * for q8 (1.08x) and ran f32 from cache 0.79-0.83x.  BENCHMARKS.md); a
 * chunk is worked row by row, and a row's query heads in passes of up to
 * GS = 3 heads of one KV head's group (a "head pass"),
 * phase by phase: the scores of all the row's passes, then their softmax
 * steps, then their values (row_chunk):
 *
 *   chunk rows  read in place from the block's tiles in every dtype and
 *               widened to f32 in registers as they are used (f16 by F16C,
 *               bf16 by a 16-bit shift, q8 by sign extension and int->float
 *               conversion), never through a copy; each K and V vector is
 *               widened once per head pass and used by all its heads;
 *               q8: the KV head's row scales of the chunk go to ksc / vsc
 *   scores      s[g][k] = qs_g . K[k], -inf where k is not visible to the
 *               row (causal, window) or past the chunk; q8: the query is
 *               quantized to int8 once per tile (attn_q8_quantize_q, as
 *               the reference does, the softmax scale in its scale qsc),
 *               s = (qq_g . K[k]) * qsc_g * K's row scale, the dot product
 *               exact in every path: int8 vpdpbusd (AVX512-VNNI) or
 *               vpmaddubsw / vpmaddwd where the ISA file includes
 *               attn_kern_q8dot.h, else f32 FMAs on the
 *               int8 values (exact integers below 2^24).  KB = 4 keys at a
 *               time: GS x KB dot-product vectors in registers, and q
 *               too when its row is at most 4 vectors (head_dim 64 on
 *               AVX-512: 10% less time per key with the K/V in L2 than
 *               q as the FMA's memory operand, which longer rows still
 *               use); each head's 4 dot-product
 *               vectors are folded into 4 scores by two levels of in-lane
 *               pair sums and one add across 128-bit lanes (no horizontal
 *               sum per key); q8 with AVX512-VNNI instead takes 16 keys at
 *               a time, transposed in registers so the keys are lanes
 *               (kq8z_dot16), with no fold
 *   softmax     online, the pass's heads as lanes of one 4-vector:
 *               m_new = max(m, max_k s), corr = exp(m - m_new),
 *               p = exp(s - m_new), l = l * corr + sum p
 *   values      acc[g] = acc[g] * corr[g] + sum_k p[g][k] * V[k]: GS x CB
 *               accumulator vectors in registers, the rescale applied as
 *               they are loaded (q8: p times V's row scale)
 *
 * The rows read a little later are prefetched through the page table
 * (the jump between pages is where the hardware prefetcher loses the
 * stream), spread over the loops rather than issued in one burst per
 * block (PF_STREAM, PF_STEPS): for f32, and for f16 and bf16 where most
 * of a piece's blocks follow each other in the arena, each loop
 * prefetches the rows of the next KV head's K or V it will read; for f16
 * and bf16 on other tables the score loop of KV head j prefetches the K
 * and V rows of KV head j + 2 (past the last head: of the next chunk);
 * for q8 the values loop those of the same head two chunks on.  Near
 * the end of a piece the stream runs on into the first chunks of the
 * piece this thread runs next (pc->next, when it has the same KV heads and
 * no sliding window), so a short context does not start cold: with 128
 * keys a piece was 4 chunks of 32, and before this its first 2 were never
 * prefetched (bench_model F32 decode 64 x 128: attention 19.5-20.6% of
 * the step before, 16.5-18.3% after; BENCHMARKS.md).
 *
 * Measured on the 2-core EPYC VM (bench_attention decode 32 x 4096, block
 * 16; BENCHMARKS.md "KV dtypes"): sharing each widened K vector across the
 * head pass, the 4-key fold, the vector softmax with the rescale folded
 * into the values loop and CB = 4 took q8 from ~9.5 to ~6 ms and f16 from
 * ~11 to ~8 ms.  Prefetch distance 1 or 2 chunks, prefetcht0 or
 * prefetcht2 (there; on the Zen 5 prefetcht0 reads faster, see PF_HINT),
 * spread or one burst per head, and transparent huge pages
 * under the K/V all left shuffled / identity at 0.8-0.9 for f16, bf16 and
 * q8 within that machine's noise; no prefetch at all was clearly worse.
 * On the Zen 3 VM (q8, huge pages): prefetching only every 2nd or 4th
 * row (the hardware prefetcher does not fill the rest in) was 1.2-1.5x
 * slower; 4 chunks ahead, or V's rows prefetched in the values loop
 * instead of the score loop, no faster.  Nor is the softmax's dependency
 * chain what its time is: running each head pass's scores before the
 * previous pass's softmax and values, so the chain could overlap them,
 * was slower from L2 there (q8 16.5 against 16.1 ns per (key, KV head),
 * f16 17.5 against 15.5); on the Zen 5 the phases of row_chunk (all the
 * row's scores, then all softmax steps, then all values) are faster
 * (its comment).
 * That gap is not this kernel's per-block work: with the K/V in L3 the
 * layouts run alike, and page tables shuffled in runs of consecutive ids
 * (bench_attention --run) close it as the runs grow (q8 block 16: 0.88
 * jumping every block, 0.96 every 4) — it follows how often the memory
 * stream jumps.  On the Zen 5 VM the kernel's lines and prefetches alone,
 * with no arithmetic, read 0.82-0.97 as fast through shuffled tables as
 * through identity ones (bench_attention (a), touch+pf), about what the
 * kernel does for f32 and q8, and one thread reads shuffled 4 KiB runs at
 * 0.4-0.8 of in-order (bench_attention --only pages): a page jump costs
 * the machine, more the larger the arena, whatever the prefetch distance.
 * q8 scores by AVX2 int8 dot products take 32 K elements per load and, per
 * head, a vpsignb, a vpmaddubsw and a vpmaddwd, where the f32 path needs
 * four widenings (shared by the pass) and four FMAs per head; quantizing
 * q moves q8 results by ~2e-3 (normalised) against the unquantized query.
 * Measured on the EPYC VM: q8 decode 1.0-1.2x faster with the K/V in L3,
 * no difference outside that machine's noise from DRAM, where q8 waits on
 * memory as much as on arithmetic.  With AVX512-VNNI (64 elements per
 * vpdpbusd, attn_kern_q8dot.h) q8 decode is 1.15x faster per key from L2
 * on the Zen 5 than with the AVX2 dot products.  P.V stays f32: an
 * integer P.V (each chunk's weights rounded to int16, rows k and k + 1
 * interleaved by vpunpcklbw / vpunpckhbw and sign-extended to 16-bit
 * pairs, two keys per vpmaddwd, one conversion per chunk) ran 18% slower
 * with the K/V in cache (24 against 20 ns per (key, KV head), 8 x 256
 * decode, one thread, as bench_attention (e) was then): on this Zen 3 the
 * interleave's shuffles and the multiplies outweigh the conversions they
 * save.  With V stored interleaved in token pairs (one vpmovsxbw per 8
 * elements of two keys; timed on the arena read as if it were so) it runs
 * at the f32 path's speed on that Zen 3, no faster (15.8-16.4 against
 * 15.9-16.1 ns, bench_attention (e)): vpmaddwd has the FMA's throughput
 * there (2 per cycle), so per head a vpmaddwd and a vpaddd on two keys' 8
 * elements cost what the two FMAs they replace do, and the pager keeps its
 * row layout.  On the Zen 5 neither product is most of q8's time: with
 * both the score dot products and the values' widening and FMAs replaced by
 * plain loads, q8 decode took 6.4-6.6 against 7.7-8.2 ns per (key, KV
 * head) from L2 (bench_attention --only cache --res 1,1024), and within
 * noise of the real kernel from memory with either alone; the work per
 * chunk and per key around them is most of it (BENCHMARKS.md, the AVX-512
 * machine's tenth session).  From memory too: with the products and
 * widenings replaced by one load per line and the softmax step skipped (a
 * scratch build), decode 32 x 4096 read f32 at 98-106% of touch+pf's rate
 * ((b)), f16 and bf16 at 69-75% and q8 at 57-69%, where this kernel reads
 * 87-95%, 62-69% and 60-70%: what holds the narrow dtypes below their
 * access pattern is mostly the per-key work around the products, which
 * adds to the wait for memory instead of hiding under it (BENCHMARKS.md,
 * the eighteenth session).  On the Zen 5 with AVX512-VNNI, P.V as int8
 * dot products (each chunk's weights rounded to 8 bits against their
 * largest per head, four keys' V rows transposed in registers, one
 * vpdpbusd per 16 elements and head; commit a2860b0 has the code) ran
 * 1.13-1.16x from L2 but 0.82-0.89x from memory with this prefetch, and
 * 1.02-1.08x (shuffled tables) / 0.96-1.09x (the pager's) with PF_SPLIT;
 * it rounds the weights where the reference does not (errors to 2.4e-3
 * against test_attention's 1e-5 bound for q8), so it is not the kernel's
 * (BENCHMARKS.md, the twenty-second session).  Less arithmetic does not
 * make q8 faster from memory: with the values loop cut to one FMA per key
 * (the same V lines read, the same prefetches) decode 32 x 4096 ran
 * 0.83-0.92x as fast, and with the values phase left out (its prefetches
 * too) 0.97-1.05x, where from L2 the phases take scores 1.0-1.1, softmax
 * 0.9 and values 2.1-2.3 of 4.5 ns per (key, KV head).  From memory q8
 * waits on when its prefetches go out (the twenty-third session).
 *
 * exp is a vectorised Cody-Waite reduction and degree-6 polynomial
 * (relative error ~2e-7) for x < 88, exactly 0 below -87 and for -inf, so
 * masked keys and huge score gaps never produce NaN.
 *
 * No allocation; everything lives in the caller's scratch.
 */
#include <math.h>
#include <string.h>

#include "attn_internal.h"

#ifndef VW
#error "define VW before including attn_kern_body.h"
#endif

#define KC ATTN__KC
/* the prefetch knobs and CB may be set with -D to measure alternatives */
#ifndef PF_CHUNKS
#define PF_CHUNKS 2 /* the tile path's prefetch distance, in chunks */
#endif
/* The per-row path's prefetch.  Per chunk a piece reads its KV heads' K
 * rows (the score phase), then their V rows (the values phase): 2 n_kvh
 * reads of one head's rows each.  Two schemes, by dtype and table:
 *
 *   paired (q8; f16 and bf16 unless stream): the first pass of KV head j
 *     prefetches the K and V rows of the (chunk, KV head) PF_STEPS steps
 *     on: KV head
 *     (j + d) mod n_kvh of chunk c + (j + d) / n_kvh (d below n_kvh or a
 *     multiple of it: see kern_body), in its score loop, or for q8 in its
 *     values loop (PF_VALUES).  With PF_SPLIT (q8's) the target's K rows
 *     are prefetched in the score loop and its V rows in the values loop:
 *     which reads faster depends on what ran before the kernel, so the
 *     schemes here were chosen right after a streaming read of 512 MiB,
 *     as attention runs after a layer's weights in a model step (the
 *     nineteenth session: both kernels in one process, each call after a
 *     streaming read, bench_attention --ab).  There split ran f16 and
 *     bf16 decode 32 x 4096 from memory 0.85-0.91x as fast through the
 *     pager's own, LIFO, identity and shuffled tables, 1.16-1.22x on a
 *     dense cache, and both rows in the values loop 0.74-0.92x; in rounds
 *     where each kernel ran half the time right after a job that read the
 *     same K/V (touch+pf), split had run 1.09-1.19x as fast on shuffled
 *     tables.  q8 split: 1.02-1.08x in three runs, 0.96-0.97x in a fourth,
 *     where A/A runs spread 0.94-1.01x; with the twenty-second session's
 *     q8 kernel, against the values loop (bench_attention --ab, --dtype
 *     q8, two runs, A/A 0.96-1.02x): shuffled tables 1.02-1.08x, the
 *     pager's (--replay) 1.04-1.10x, identity 0.96-1.02x, a dense cache
 *     0.92-0.94x, so q8 takes split (the twenty-third session).
 *     f16 and bf16 two KV heads ahead: with decode's 4 KV heads half a
 *     chunk, not two chunks as before; decode 32 x 4096 from memory on the
 *     Zen 5 (two runs of 6 rounds, alternated; medians of the per-round
 *     rates) read 53 and 57% of the streaming read against 51 and 55% for
 *     f16, 56 and 59% against 49 and 57% for bf16, and shuffled / identity
 *     went from 0.85-0.91 to 0.95-1.00; one, two or three heads ahead read
 *     alike then.  Right after a streaming read, against two heads ahead:
 *     one head 0.93-0.96x as fast on shuffled tables, three 0.96-1.01x,
 *     two chunks 0.91x.  q8 two chunks ahead, the same head: two heads
 *     ahead read 36-40% against 44-49%; one or three chunks ahead read
 *     alike (0.95-1.05x).
 *   stream (f32, PF_STREAM; f16 and bf16 when at least half the piece's
 *     block ids are the one before plus 1, PF_STREAM_RUNS, checked once
 *     per piece): each loop prefetches the rows of the read after its
 *     own, one line per line it reads: the score loop of KV head
 *     j those of K head j + 1 (after the last head: V head 0), the values
 *     loop those of V head j + 1 (after the last: K head 0 of the next
 *     chunk).  Against paired two heads ahead, decode 32 x 4096 from
 *     memory read 62.5% of the streaming read against 60% on shuffled
 *     tables (6 rounds; scratch runs before, 8 rounds each: 58 against
 *     55, 67.5 against 59.5), and took 16-22% less time through identity
 *     tables and a dense cache, 14-16% less through the pager's own
 *     tables; for f16 and bf16 it made the dense layout 14% faster but
 *     the shuffled tables slower (43-49% against 51-54%) and the pager's
 *     no faster, for q8 the pager's 37% slower.  Right after a streaming
 *     read (bench_attention --ab), against the stream scheme, f32 paired
 *     two heads ahead ran 0.80-0.84x as fast on shuffled tables and
 *     0.69-0.80x through the pager's, paired split 0.98x and 0.90-1.04x.
 *     f16 and bf16 as a stream ran 0.82-0.87x as fast as paired on
 *     shuffled tables, 0.86-0.96x on LIFO ones (one block per run), but
 *     1.06-1.15x through the pager's locality tables (runs of ~150
 *     blocks), 1.03x through identity tables and 1.09-1.19x on a dense
 *     cache: hence the choice by the table.  Against paired everywhere,
 *     the choice ran 0.96-1.00x on shuffled and LIFO tables, 1.08-1.16x
 *     through the pager's, 1.11-1.20x through identity tables, 1.11-1.23x
 *     on a dense cache (three runs; q8 as a stream: 0.82-0.89x).  Two
 *     reads ahead (PF_STREAM_D 2): f32 0.95x on shuffled tables, the rest
 *     alike.
 *
 * (BENCHMARKS.md, the eighteenth and nineteenth sessions.) */
#ifndef PF_STREAM
#define PF_STREAM(dt) ((dt) == FOLIO_F32)
#endif
#ifndef PF_STREAM_D
#define PF_STREAM_D 1 /* reads ahead (at most 2 n_kvh: cr->pf is the next chunk) */
#endif
#ifndef PF_STREAM_RUNS
#define PF_STREAM_RUNS(dt) ((dt) == FOLIO_F16 || (dt) == FOLIO_BF16)
#endif
#ifndef PF_STEPS
#define PF_STEPS(dt, nkvh) ((dt) == FOLIO_Q8 ? 2 * (nkvh) : 2)
#endif
#ifndef PF_SPLIT
#define PF_SPLIT(dt) ((dt) == FOLIO_Q8)
#endif
#ifndef PF_SPREAD
#define PF_SPREAD 1 /* prefetch inside the score loop, KB rows at a time */
#endif
#ifndef PF_HINT
/* __builtin_prefetch locality: 3 = prefetcht0 (into L1).  On the Zen 5
 * VM, decode 32 x 4096 from memory read 10-15% faster for f32, f16 and
 * bf16 than with prefetcht2 (1), q8 and prefill alike (BENCHMARKS.md, the
 * AVX-512 machine's eleventh session); on the machines before, the two
 * were within noise. */
#define PF_HINT 3
#endif
/* GS query heads of one KV head share each widened K and V vector.  Score
 * loop: GS x KB dot-product vectors in registers; values loop: GS x CB
 * accumulators + GS weights + the V vector. */
#define GS 3
#ifndef PF_VALUES
/* where a paired pass prefetches without PF_SPLIT (q8 has split): q8 in
 * the values loop, a row per key, the others in the score loop, KB rows
 * per step.  With row_chunk's phases,
 * q8's score phase is short (16 keys per step by VNNI) and its prefetches
 * came in bursts: decode 32 x 4096 from memory read 37-39% of the
 * streaming read with them there, 43-44% in the values loop (the Zen 5,
 * BENCHMARKS.md) */
#define PF_VALUES(dt) ((dt) == FOLIO_Q8)
#endif
/* The softmax keeps a running maximum m while none of the chunk's scores
 * is more than SOFTMAX_LAZY_T above it (softmax_heads; the tile path's
 * softmax lane by lane): p = exp(s - m) is then at most e^8, and the exps
 * need not wait for the chunk's maximum (a chain of maxes and a fold
 * across lanes) nor the accumulators for a correction.  Both kernels in
 * one process (bench_attention --ab, the twenty-third session,
 * BENCHMARKS.md): decode from L2 ((e), 1 x 1024) q8 1.06x, f16 1.06x, f32
 * 1.02x, from memory 0.96-1.06x; a fresh 512-token prefill ((c)) 1.02-1.06x
 * for every dtype. */
#ifndef SOFTMAX_LAZY
#define SOFTMAX_LAZY 1
#endif
#ifndef SOFTMAX_LAZY_T
#define SOFTMAX_LAZY_T 8.0f
#endif
#define KB 4 /* keys per step of the score loop (KC a multiple) */
#if VW == 1
#define CB 1
#else
#ifndef CB
#define CB 4
#endif
#endif

typedef float vf __attribute__((vector_size(VW * 4)));
typedef float vf_u __attribute__((vector_size(VW * 4), aligned(4), may_alias));
typedef int32_t vi __attribute__((vector_size(VW * 4)));
/* four scores */
typedef float v4f __attribute__((vector_size(16)));
typedef float v4f_u __attribute__((vector_size(16), aligned(4), may_alias));
typedef int32_t v4i __attribute__((vector_size(16)));

#define AI static inline __attribute__((always_inline))
/* loops over the vectors of one head_dim row: unrolled fully when head_dim
 * is a constant, so the row lives in registers */
#define UNROLL _Pragma("GCC unroll 32")

/* x in every lane (a broadcast; not 0 + x, which is an add: -0 + 0 = +0) */
AI vf vsplat(float x)
{
#if VW == 1
    return (vf){x};
#elif VW == 4
    return (vf){x, x, x, x};
#elif VW == 8
    return (vf){x, x, x, x, x, x, x, x};
#else
    return (vf){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};
#endif
}

AI vf vload(const float *p)
{
    return *(const vf_u *)p;
}

AI void vstore(float *p, vf v)
{
    *(vf_u *)p = v;
}

AI v4f vload4(const float *p)
{
    return *(const v4f_u *)p;
}

AI void vstore4(float *p, v4f v)
{
    *(v4f_u *)p = v;
}

AI v4f vsplat4(float x)
{
    return (v4f){x, x, x, x};
}

/* exp(x) for x < 88 (the softmax's x are at most SOFTMAX_LAZY_T); 0 for
 * x < -87 (including -inf).  Defined for VW
 * lanes (vexp_neg) and for four (vexp_neg4: the softmax's per-head
 * corrections). */
#define DEF_VEXP_NEG(name, T, TI, SPLAT)                                                           \
    AI T name(T x)                                                                                 \
    {                                                                                              \
        const T lo = SPLAT(-87.0f);                                                                \
        TI dead = x < lo;                                                                          \
        x = (T)(((TI)x & ~dead) | ((TI)lo & dead));                                                \
        const T magic = SPLAT(12582912.0f); /* 1.5 * 2^23: round to nearest */                     \
        T t = x * 1.44269504088896341f + magic;                                                    \
        T n = t - magic;                                                                           \
        TI ni = (TI)t - (TI)magic;                                                                 \
        T r = x - n * 0.693145751953125f;                                                          \
        r = r - n * 1.42860682030941723e-6f;                                                       \
        T p = SPLAT(1.0f / 720.0f);                                                                \
        p = p * r + 1.0f / 120.0f;                                                                 \
        p = p * r + 1.0f / 24.0f;                                                                  \
        p = p * r + 1.0f / 6.0f;                                                                   \
        p = p * r + 0.5f;                                                                          \
        p = p * r + 1.0f;                                                                          \
        p = p * r + 1.0f;                                                                          \
        TI bits = (TI)p + (ni << 23);                                                              \
        return (T)(bits & ~dead);                                                                  \
    }
DEF_VEXP_NEG(vexp_neg, vf, vi, vsplat)
DEF_VEXP_NEG(vexp_neg4, v4f, v4i, vsplat4)

AI vi vsplat_i(int32_t x)
{
    vi z = {0};
    return z + x;
}

/* ---- widening loads: VW stored K/V elements -> VW floats ---------------- */

#ifndef vload_h
/* binary16 -> binary32 with integer vector ops: shift exponent and mantissa
 * into place, rescale by 2^112 (normals and subnormals), patch inf / nan,
 * add the sign */
AI vf vload_h_gen(const uint16_t *p)
{
    vi h;
    for (int i = 0; i < VW; i++)
        h[i] = p[i];
    const vi em = h & 0x7fff;
    vi u = (vi)((vf)(em << 13) * 0x1p112f);
    const vi special = em >= vsplat_i(0x7c00);
    u = (u & ~special) | ((((em & 0x3ff) << 13) | 0x7f800000) & special);
    return (vf)(u | ((h & 0x8000) << 16));
}
#define vload_h(p) vload_h_gen(p)
#endif

#ifndef vload_bf
AI vf vload_bf_gen(const uint16_t *p)
{
    vi h;
    for (int i = 0; i < VW; i++)
        h[i] = p[i];
    return (vf)(h << 16);
}
#define vload_bf(p) vload_bf_gen(p)
#endif

#ifndef vload_q8
AI vf vload_q8_gen(const int8_t *p)
{
    vi x;
    for (int i = 0; i < VW; i++)
        x[i] = p[i];
    return __builtin_convertvector(x, vf);
}
#define vload_q8(p) vload_q8_gen(p)
#endif

/* VW elements of a K/V row of dtype dt (a constant in every caller), from
 * element i on. */
AI vf kv_load(const char *row, int i, const int dt)
{
    if (dt == FOLIO_F16)
        return vload_h((const uint16_t *)(const void *)row + i);
    if (dt == FOLIO_BF16)
        return vload_bf((const uint16_t *)(const void *)row + i);
    if (dt == FOLIO_Q8)
        return vload_q8((const int8_t *)row + i);
    return vload((const float *)(const void *)row + i);
}

/* ---- 4 keys' dot products -> 4 scores ---------------------------------- */

#if VW >= 4
/* A 2-source shuffle of a and b that picks, in every 128-bit lane L, lanes
 * {0, 2} (o = 0) or {1, 3} (o = 1) of a's lane L then of b's lane L.
 * __builtin_shufflevector is spelled alike by GCC (12 on) and clang. */
#define PAIR4(L, o) (L) * 4 + (o), (L)*4 + 2 + (o), VW + (L)*4 + (o), VW + (L)*4 + 2 + (o)
#if VW == 4
#define PAIR_SHUF(a, b, o) __builtin_shufflevector(a, b, PAIR4(0, o))
#elif VW == 8
#define PAIR_SHUF(a, b, o) __builtin_shufflevector(a, b, PAIR4(0, o), PAIR4(1, o))
#else
#define PAIR_SHUF(a, b, o)                                                                         \
    __builtin_shufflevector(a, b, PAIR4(0, o), PAIR4(1, o), PAIR4(2, o), PAIR4(3, o))
#endif

/* per 128-bit lane: [a0 + a1, a2 + a3, b0 + b1, b2 + b3] */
AI vf pair_add(vf a, vf b)
{
    return PAIR_SHUF(a, b, 0) + PAIR_SHUF(a, b, 1);
}
#endif

/* Lane k of the result is the sum of the lanes of d[k]: two levels of
 * in-lane pair sums (shufps + add on x86) leave, in every 128-bit lane,
 * the four partial sums of d[0..3]; the 128-bit lanes are then added. */
AI v4f fold4(const vf *d)
{
#if VW == 1
    return (v4f){d[0][0], d[1][0], d[2][0], d[3][0]};
#else
    const vf u = pair_add(pair_add(d[0], d[1]), pair_add(d[2], d[3]));
#if VW == 4
    return u;
#elif VW == 8
    return (v4f){u[0], u[1], u[2], u[3]} + (v4f){u[4], u[5], u[6], u[7]};
#else
    return ((v4f){u[0], u[1], u[2], u[3]} + (v4f){u[4], u[5], u[6], u[7]}) +
           ((v4f){u[8], u[9], u[10], u[11]} + (v4f){u[12], u[13], u[14], u[15]});
#endif
#endif
}

AI vf vmax(vf a, vf b)
{
    const vi gt = a > b;
    return (vf)(((vi)a & gt) | ((vi)b & ~gt));
}

/* Whether some lane of d is above t (false for NaN lanes). */
AI bool vany_gt(vf d, float t)
{
#if VW == 16 && defined(__AVX512F__)
    return _mm512_cmp_ps_mask((__m512)d, _mm512_set1_ps(t), _CMP_GT_OQ) != 0;
#elif VW == 8 && defined(__AVX__)
    return _mm256_movemask_ps(_mm256_cmp_ps((__m256)d, _mm256_set1_ps(t), _CMP_GT_OQ)) != 0;
#else
    bool any = false;
    for (int i = 0; i < VW; i++)
        any |= d[i] > t;
    return any;
#endif
}

/* With PF_SPREAD, the K and V rows [k0, k1) of the chunk being
 * prefetched (pf: its row pointers, NULL when there is none; the target
 * KV head at hoff), or with v_bytes 0 only the rows at hoff. */
AI void prefetch_rows(const char *const *pf, int32_t k0, int32_t k1, size_t hoff, size_t rb,
                      size_t v_bytes)
{
#if PF_SPREAD
    if (pf)
        for (int32_t k = k0; k < k1; k++)
            for (size_t off = 0; off < rb; off += 64) {
                __builtin_prefetch(pf[k] + hoff + off, 0, PF_HINT);
                if (v_bytes)
                    __builtin_prefetch(pf[k] + hoff + v_bytes + off, 0, PF_HINT);
            }
#else
    (void)pf, (void)k0, (void)k1, (void)hoff, (void)rb, (void)v_bytes;
#endif
}

/* s[g * KC + k] = qs[g] . K[k] (q8: times ks[k]) for G query vectors qs
 * (hd apart, already times the softmax scale) and the keys k < nvis of the
 * chunk's rows kh + k * rb; -inf for k >= nvis.  KB keys at a time: each
 * K vector is widened once and used by all G query vectors (G x KB
 * dot-product vectors in registers; q in registers too, or read from L1
 * as the FMA's memory operand); the KB dot-product vectors of a query are
 * folded into KB scores at once (q8 with AVX512-VNNI: 16 keys at a time,
 * kq8z_dot16).  A partial step reads row nvis - 1 again in place of the
 * keys it masks, so no row past the chunk is touched.  With pf, the K and
 * V rows k < pfn of pf (KV head at pfh; with v_bytes 0 only those rows)
 * are prefetched as the steps go. */
AI void scores_heads(const float *qs, const int8_t *qq, const float *qsc, const int32_t *qb,
                     float *s, const char *const *rows, size_t hoff, int32_t nvis, size_t rb,
                     const float *ks, const char *const *pf, int32_t pfn, size_t pfh,
                     size_t v_bytes, const int hd, const int dt, const int G)
{
    const int nv = hd / VW;
#ifndef KQ8_W
    (void)qq; /* the f32 path takes the int8 query as floats, from qs */
#endif
    (void)qb; /* kq8z_dot16's bias, where this ISA has it */
#if defined(KQ8_ZW) && VW == 16
    /* q8 with AVX512-VNNI: 16 keys at a time, in lanes (kq8z_dot16) */
    if (dt == FOLIO_Q8 && hd % KQ8_ZW == 0) {
        __m512i bias[GS];
        UNROLL
        for (int g = 0; g < G; g++)
            bias[g] = _mm512_set1_epi32(qb[g]);
        for (int kb = 0; kb < KC; kb += 16) {
            prefetch_rows(pf, kb, FOLIO_MIN(kb + 16, pfn), pfh, rb, v_bytes);
            if (kb >= nvis) {
                UNROLL
                for (int g = 0; g < G; g++)
                    vstore(s + (size_t)g * KC + kb, vsplat(-INFINITY));
                continue;
            }
            __m512i di[GS];
            if (nvis - kb >= 16) {
                kq8z_dot16(qq, rows + kb, hoff, hd, G, bias, di);
            } else { /* a partial step reads row nvis - 1 again */
                const char *kr[16];
                for (int k = 0; k < 16; k++)
                    kr[k] = rows[FOLIO_MIN(kb + k, nvis - 1)];
                kq8z_dot16(qq, kr, hoff, hd, G, bias, di);
            }
            const __mmask16 keep =
                nvis - kb >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (nvis - kb)) - 1);
            const __m512 ksv = _mm512_loadu_ps(ks + kb);
            UNROLL
            for (int g = 0; g < G; g++) { /* int8 q: its scale, then K's row scales */
                const __m512 sc = _mm512_mul_ps(
                    _mm512_mul_ps(_mm512_cvtepi32_ps(di[g]), _mm512_set1_ps(qsc[g])), ksv);
                _mm512_storeu_ps(s + (size_t)g * KC + kb,
                                 _mm512_mask_blend_ps(keep, _mm512_set1_ps(-INFINITY), sc));
            }
        }
        return;
    }
#endif
    /* G query rows of at most QR vectors each live in registers for the
     * chunk (with the G x KB sums and the K vector: 3 x 4 + 3 x 4 + 1 of
     * AVX-512's 32 for head_dim 64); longer rows are read from L1 as the
     * FMA's memory operand */
    enum { QR = 4 };
    const bool qreg = nv <= QR;
    vf qr[GS][QR];
    if (qreg) {
        UNROLL
        for (int g = 0; g < G; g++)
            UNROLL
        for (int c = 0; c < QR; c++)
            qr[g][c] = c < nv ? vload(qs + (size_t)g * hd + c * VW) : vsplat(0.0f);
    }
    for (int kb = 0; kb < KC; kb += KB) {
        prefetch_rows(pf, kb, FOLIO_MIN(kb + KB, pfn), pfh, rb, v_bytes);
        if (kb >= nvis) {
            UNROLL
            for (int g = 0; g < G; g++)
                vstore4(s + (size_t)g * KC + kb, (v4f){-INFINITY, -INFINITY, -INFINITY, -INFINITY});
            continue;
        }
        const char *kr[KB];
        UNROLL
        for (int k = 0; k < KB; k++)
            kr[k] = rows[FOLIO_MIN(kb + k, nvis - 1)] + hoff;
        v4f dot[GS];
#ifdef KQ8_W
        if (dt == FOLIO_Q8 && hd % KQ8_W == 0) {
            __m128i di[GS];
            kq8_dot4(qq, kr, hd, G, di);
            UNROLL
            for (int g = 0; g < G; g++)
                dot[g] = __builtin_convertvector((v4i)di[g], v4f);
        } else
#endif
        {
            vf d[GS][KB];
            UNROLL
            for (int g = 0; g < G; g++)
                UNROLL
            for (int k = 0; k < KB; k++)
                d[g][k] = vsplat(0.0f);
            UNROLL
            for (int c = 0; c < nv; c++) {
                UNROLL
                for (int k = 0; k < KB; k++) {
                    const vf x = kv_load(kr[k], c * VW, dt);
                    UNROLL
                    for (int g = 0; g < G; g++)
                        d[g][k] +=
                            (qreg ? qr[g][c < QR ? c : 0] : vload(qs + (size_t)g * hd + c * VW)) *
                            x;
                }
            }
            UNROLL
            for (int g = 0; g < G; g++)
                dot[g] = fold4(d[g]);
        }
        const v4i keep = (v4i){0, 1, 2, 3} < (v4i){0, 0, 0, 0} + (nvis - kb);
        const v4f ninf = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        UNROLL
        for (int g = 0; g < G; g++) {
            v4f sc = dot[g];
            if (dt == FOLIO_Q8) /* int8 q: its scale, then K's row scales */
                sc = sc * qsc[g] * vload4(ks + kb);
            if (kb + KB > nvis)
                sc = (v4f)(((v4i)sc & keep) | ((v4i)ninf & ~keep));
            vstore4(s + (size_t)g * KC + kb, sc);
        }
    }
}

/* acc[g] = acc[g] * corr[g] + sum_k p[g][k] * V[k] for G consecutive
 * query heads of one KV head (p rows KC apart, acc rows hd apart): each V
 * vector is widened once and used by all G heads, with G x CB
 * accumulators in registers.  With pf, the K and V rows k < pfn of pf
 * (KV head at pfh; with pvb 0 only those rows) are prefetched, one key per
 * key of this loop (the rest before it). */
AI void values_heads(const float *p, float *acc, v4f corr, const char *const *rows, size_t hoff,
                     size_t v_bytes, int32_t nvis, const char *const *pf, int32_t pfn, size_t pfh,
                     size_t pvb, size_t rb, const int hd, const int dt, const int G)
{
    const int nv = hd / VW;
    const size_t voff = hoff + v_bytes;
    if (pf)
        for (int32_t k = nvis; k < pfn; k++)
            prefetch_rows(pf, k, k + 1, pfh, rb, pvb);
    for (int c0 = 0; c0 < nv; c0 += CB) {
        vf a[GS][CB];
        UNROLL
        for (int g = 0; g < G; g++)
            UNROLL
        for (int c = 0; c < CB; c++)
            a[g][c] =
                c0 + c < nv ? vload(acc + (size_t)g * hd + (c0 + c) * VW) * corr[g] : vsplat(0.0f);
        for (int32_t k = 0; k < nvis; k++) {
            if (pf && c0 == 0 && k < pfn)
                prefetch_rows(pf, k, k + 1, pfh, rb, pvb);
            const char *vr = rows[k] + voff;
            vf pk[GS];
            UNROLL
            for (int g = 0; g < G; g++)
                pk[g] = vsplat(p[(size_t)g * KC + k]);
            UNROLL
            for (int c = 0; c < CB; c++) {
                if (c0 + c >= nv) /* head_dim not a multiple of CB vectors */
                    break;
                const vf x = kv_load(vr, (c0 + c) * VW, dt);
                UNROLL
                for (int g = 0; g < G; g++)
                    a[g][c] += pk[g] * x;
            }
        }
        UNROLL
        for (int g = 0; g < G; g++)
            UNROLL
        for (int c = 0; c < CB; c++)
            if (c0 + c < nv)
                vstore(acc + (size_t)g * hd + (c0 + c) * VW, a[g][c]);
    }
}

/* Lane by lane the larger of a and b. */
AI v4f max4(v4f a, v4f b)
{
    const v4i gt = a > b;
    return (v4f)(((v4i)a & gt) | ((v4i)b & ~gt));
}

/* Lane k of the result is the largest lane of d[k]: fold4's shape with
 * max for add. */
AI v4f fold4_max(const vf *d)
{
#if VW == 1
    return (v4f){d[0][0], d[1][0], d[2][0], d[3][0]};
#else
#define PAIR_MAX(a, b) vmax(PAIR_SHUF(a, b, 0), PAIR_SHUF(a, b, 1))
    const vf u = PAIR_MAX(PAIR_MAX(d[0], d[1]), PAIR_MAX(d[2], d[3]));
#undef PAIR_MAX
#if VW == 4
    return u;
#elif VW == 8
    return max4((v4f){u[0], u[1], u[2], u[3]}, (v4f){u[4], u[5], u[6], u[7]});
#else
    return max4(max4((v4f){u[0], u[1], u[2], u[3]}, (v4f){u[4], u[5], u[6], u[7]}),
                max4((v4f){u[8], u[9], u[10], u[11]}, (v4f){u[12], u[13], u[14], u[15]}));
#endif
#endif
}

/* p = exp(s - mr[g]) over the chunk's scores s[g * KC + k] of G query
 * vectors, written back (q8: times V's row scale vs); returns each one's
 * sum of p (lanes past G: the first's). */
AI v4f softmax_exps(float *s, const float *vs, v4f mr, const int dt, const int G)
{
    vf sum[4];
    UNROLL
    for (int g = 0; g < 4; g++) {
        if (g >= G) {
            sum[g] = sum[0];
            continue;
        }
        float *sr = s + (size_t)g * KC;
        const vf mg = vsplat(mr[g]);
        sum[g] = vsplat(0.0f);
        UNROLL
        for (int c = 0; c < KC / VW; c++) {
            const vf p = vexp_neg(vload(sr + c * VW) - mg);
            vstore(sr + c * VW, dt == FOLIO_Q8 ? p * vload(vs + c * VW) : p);
            sum[g] += p;
        }
    }
    return fold4(sum);
}

/* Online softmax step of G query vectors of one KV head over the chunk's
 * scores s[g * KC + k] (-inf where not visible): p = exp(s - m_new)
 * written back (q8: times V's row scale vs, while l sums p alone), m and l
 * updated; returns the factors corr = exp(m_old - m_new) by which the
 * values loop scales acc.  m_new is m_old while every head has seen a key
 * and no score is above m_old + SOFTMAX_LAZY_T (corr 1; the check is one
 * max over the pass's score vectors, no fold per head), else the running
 * maximum.  m is the reference p, l and acc are taken against, not
 * necessarily the largest score seen: the result (acc / l) and the merge
 * of partial records (attn_paged.c) only need l and acc to share it.  The
 * G heads' maxima, corrections and sums are lanes of one 4-vector.  A
 * head that has seen no visible key keeps m = -inf, l = 0 and gets
 * p = 0. */
AI v4f softmax_heads(float *s, float *m, float *l, const float *vs, const int dt, const int G)
{
    v4f mo;
    UNROLL
    for (int g = 0; g < 4; g++)
        mo[g] = m[g < G ? g : 0];
    const v4f ninf = vsplat4(-INFINITY);
#if SOFTMAX_LAZY
    if (mo[0] > -INFINITY && mo[1] > -INFINITY && mo[2] > -INFINITY && mo[3] > -INFINITY) {
        vf d = vsplat(-INFINITY);
        UNROLL
        for (int g = 0; g < G; g++)
            UNROLL
        for (int c = 0; c < KC / VW; c++)
            d = vmax(d, vload(s + (size_t)g * KC + c * VW) - vsplat(mo[g]));
        if (!vany_gt(d, SOFTMAX_LAZY_T)) {
            v4f lo;
            UNROLL
            for (int g = 0; g < 4; g++)
                lo[g] = l[g < G ? g : 0];
            const v4f ln = lo + softmax_exps(s, vs, mo, dt, G);
            UNROLL
            for (int g = 0; g < G; g++)
                l[g] = ln[g];
            return vsplat4(1.0f);
        }
    }
#endif
    vf mv[4];
    UNROLL
    for (int g = 0; g < 4; g++) {
        const float *sr = s + (size_t)(g < G ? g : 0) * KC;
        mv[g] = vload(sr);
        UNROLL
        for (int c = 1; c < KC / VW; c++)
            mv[g] = vmax(mv[g], vload(sr + c * VW));
    }
    const v4f mx = fold4_max(mv);
    const v4i up = mx > mo;
    const v4f mn = (v4f)(((v4i)mx & up) | ((v4i)mo & ~up));
    /* -inf (nothing seen yet) subtracts as 0, so exp gives 0, not NaN */
    const v4f mns = (v4f)((v4i)mn & ~(mn == ninf));
    const v4f corr = vexp_neg4(mo - mns);
    v4f lo;
    UNROLL
    for (int g = 0; g < 4; g++)
        lo[g] = l[g < G ? g : 0];
    const v4f ln = lo * corr + softmax_exps(s, vs, mns, dt, G);
    UNROLL
    for (int g = 0; g < G; g++) {
        m[g] = mn[g];
        l[g] = ln[g];
    }
    return corr;
}

/* Keys [k0, k0 + len) of a chunk sit in consecutive slots of one block;
 * sc: the q8 row scale of key k0 in the piece's first KV head's K tile. */
struct kv_run {
    int32_t k0, len;
    const char *sc;
};

/* The rows of the n keys from position pos (rows[k]: K row of the piece's
 * first KV head), positions before lo_ok read as lo_ok's row; the runs of
 * the chunk (returned: how many). */
AI int chunk_rows(const struct attn__piece *pc, int32_t pos, int32_t n, int32_t lo_ok,
                  const char **rows, struct kv_run *runs)
{
    const int32_t bs = pc->block_size;
    const size_t rb = pc->row_bytes;
    int nrun = 0;
    for (int32_t k = 0; k < n;) {
        const int32_t p = FOLIO_MAX(pos + k, lo_ok), slot = p % bs;
        const int32_t len = pos + k < lo_ok ? 1 : FOLIO_MIN(n - k, bs - slot);
        const char *t = pc->kbase + (size_t)pc->block_table[p / bs] * pc->block_bytes;
        for (int32_t i = 0; i < len; i++)
            rows[k + i] = t + (size_t)(slot + i) * rb;
        runs[nrun++] = (struct kv_run){k, len, t + pc->scale_off + (size_t)slot * 4};
        k += len;
    }
    return nrun;
}

/* Prefetch for one KV head (hoff) of the chunk of frows: q8 row scales,
 * and without PF_SPREAD its K and V rows (with it, the passes spread those
 * over their loops). */
AI void prefetch_chunk(const struct attn__piece *pc, const char *const *frows,
                       const struct kv_run *fruns, int nfrun, int32_t fnp, size_t hoff,
                       const int dt)
{
#if !PF_SPREAD
    for (int32_t k = 0; k < fnp; k++)
        for (size_t off = 0; off < pc->row_bytes; off += 64) {
            __builtin_prefetch(frows[k] + hoff + off, 0, PF_HINT);
            __builtin_prefetch(frows[k] + hoff + pc->v_bytes + off, 0, PF_HINT);
        }
#else
    (void)frows;
    (void)fnp;
#endif
    if (dt == FOLIO_Q8)
        for (int i = 0; i < nfrun; i++) {
            const char *sc = fruns[i].sc + hoff;
            const size_t last = 4 * (size_t)fruns[i].len - 4;
            __builtin_prefetch(sc, 0, PF_HINT);
            __builtin_prefetch(sc + pc->v_bytes, 0, PF_HINT);
            if (last >= 64) {
                __builtin_prefetch(sc + last, 0, PF_HINT);
                __builtin_prefetch(sc + pc->v_bytes + last, 0, PF_HINT);
            }
        }
}

/* What a row's passes over one chunk share (row_chunk). */
struct chunk_row {
    const char *const *rows; /* the chunk's K rows of the piece's first KV head */
    int32_t n;               /* how many */
    int32_t nvis;            /* keys of the chunk visible to the row */
    int32_t rel;             /* the row's position minus the chunk's first */
    bool pfr;                /* this row prefetches (the tile's first) */
    bool stream;             /* ... by the stream scheme (else paired) */
    const char *const *pf;   /* rows of the chunk pfo ahead (kern_body), or NULL */
    int32_t pfn;             /* how many */
    const float *ksc, *vsc;  /* q8: the chunk's row scales, KC per KV head */
};

enum { PHASE_SCORES, PHASE_SOFTMAX, PHASE_VALUES };

/* One phase of the pass of G query heads (from qg, of KV head j, with
 * prefetch when pf) over the chunk: its scores and the sliding window's
 * mask, its softmax step (which sets the factors *corr), or its values
 * (scaled by *corr).  It prefetches as cr->stream or PF_STEPS say: paired,
 * the rows of KV head j + PF_STEPS of this chunk while that is below
 * n_kvh, else of cr->pf's chunk, head (j + PF_STEPS) mod n_kvh (with
 * PF_SPLIT its K rows in the score phase, its V rows in the values
 * phase). */
AI void pass_phase(const struct attn__piece *pc, const struct chunk_row *cr, int phase,
                   const float *qs, const int8_t *qq, const float *qsc, const int32_t *qb, float *s,
                   float *m, float *l, float *acc, int32_t qg, int32_t j, bool pf, v4f *corr,
                   const int hd, const int dt, const int G)
{
    const size_t hoff = (size_t)j * pc->head_bytes;
    const size_t rb = (size_t)hd * folio_dtype_size(dt); /* pc->row_bytes, constant with hd */
    float *sg = s + (size_t)qg * KC;
    const char *const *pft = NULL;
    int32_t pftn = 0;
    size_t pfh = 0, pvb = pc->v_bytes; /* the target's rows (pvb 0: K or V alone) */
    bool in_scores = !PF_VALUES(dt), in_values = PF_VALUES(dt);
    if (pf && cr->stream) { /* the read after this one: t of 2 n_kvh */
        const int32_t nk = pc->n_kvh;
        int32_t t = (phase == PHASE_SCORES ? j : nk + j) + PF_STREAM_D;
        pft = cr->rows, pftn = cr->n;
        if (t >= 2 * nk)
            t -= 2 * nk, pft = cr->pf, pftn = cr->pfn;
        pfh = (size_t)(t % nk) * pc->head_bytes + (t >= nk ? pc->v_bytes : 0);
        pvb = 0, in_scores = in_values = true;
    } else if (pf) {
        const int32_t jt = j + PF_STEPS(dt, pc->n_kvh);
        if (jt < pc->n_kvh)
            pft = cr->rows, pftn = cr->n, pfh = (size_t)jt * pc->head_bytes;
        else
            pft = cr->pf, pftn = cr->pfn, pfh = (size_t)(jt % pc->n_kvh) * pc->head_bytes;
        if (PF_SPLIT(dt)) { /* K's rows as the scores read, V's as the values do */
            pvb = 0, in_scores = in_values = true;
            if (phase == PHASE_VALUES)
                pfh += pc->v_bytes;
        }
    }
    if (phase == PHASE_SCORES) {
        scores_heads(qs + (size_t)qg * hd, qq + (size_t)qg * hd, qsc + qg, qb + qg, sg, cr->rows,
                     hoff, cr->nvis, rb, cr->ksc + (size_t)j * KC, in_scores ? pft : NULL, pftn,
                     pfh, pvb, hd, dt, G);
        if (pc->window > 0) { /* keys before the row's window out */
            const int32_t cut = cr->rel - pc->window + 1;
            for (int g = 0; cut > 0 && g < G; g++)
                for (int32_t k = 0; k < FOLIO_MIN(cut, KC); k++)
                    sg[(size_t)g * KC + k] = -INFINITY;
        }
    } else if (phase == PHASE_SOFTMAX) {
        *corr = softmax_heads(sg, m + qg, l + qg, cr->vsc + (size_t)j * KC, dt, G);
    } else {
        values_heads(sg, acc + (size_t)qg * hd, *corr, cr->rows, hoff, pc->v_bytes, cr->nvis,
                     in_values ? pft : NULL, pftn, pfh, pvb, rb, hd, dt, G);
    }
}

/* A row's work on one chunk, passes [p0, p1): pass p takes the query
 * heads of KV head p / ppj from GS * (p % ppj) on, GS at a time (ppj =
 * passes per KV head; the first pass of each KV head prefetches when
 * cr->pfr).  Phase by phase: every pass's scores, then every pass's softmax
 * step, then every pass's values.  The passes are independent, so each
 * softmax step's chain of latencies (max, fold, exp, sum) runs beside the
 * others' instead of between a pass's scores and its values: q8 decode
 * from L2 5.5-5.9 against 6.8-8.0 ns per (key, KV head) on the Zen 5, f16
 * and f32 3-4% faster (BENCHMARKS.md).  At most PASS_MAX passes. */
#define PASS_MAX 16
AI void row_chunk(const struct attn__piece *pc, const struct chunk_row *cr, const float *qs,
                  const int8_t *qq, const float *qsc, const int32_t *qb, float *s, float *m,
                  float *l, float *acc, int32_t qi0, int32_t p0, int32_t p1, const int hd,
                  const int dt)
{
    const int32_t group = pc->group, ppj = (group + GS - 1) / GS;
    const int32_t j0 = p0 / ppj, g00 = GS * (p0 % ppj); /* pass p0 */
    v4f corr[PASS_MAX];
    for (int phase = PHASE_SCORES; phase <= PHASE_VALUES; phase++)
        for (int32_t p = p0, j = j0, g0 = g00; p < p1; p++, g0 += GS) {
            if (g0 >= group) /* the next KV head's first pass */
                j++, g0 = 0;
            const int gs = FOLIO_MIN(GS, group - g0);
            const int32_t qg = qi0 + j * group + g0;
            const bool pf = cr->pfr && g0 == 0;
            v4f *c = corr + (p - p0);
            if (gs == 3)
                pass_phase(pc, cr, phase, qs, qq, qsc, qb, s, m, l, acc, qg, j, pf, c, hd, dt, 3);
            else if (gs == 2)
                pass_phase(pc, cr, phase, qs, qq, qsc, qb, s, m, l, acc, qg, j, pf, c, hd, dt, 2);
            else
                pass_phase(pc, cr, phase, qs, qq, qsc, qb, s, m, l, acc, qg, j, pf, c, hd, dt, 1);
        }
}

/* The results of a tile of nq = rows x hv query vectors (qi = row * hv +
 * head) from row r of the piece: normalised rows of out, or the partial
 * records (m, l, acc) of a context split. */
AI void tile_results(const struct attn__piece *pc, int32_t r, int32_t nq, int32_t hv,
                     const float *m, const float *l, const float *acc, const int hd)
{
    const int nv = hd / VW;
    for (int32_t qi = 0; qi < nq; qi++) {
        const int32_t rr = qi / hv, h = qi % hv;
        const float *ar = acc + (size_t)qi * hd;
        if (pc->out) {
            float *o = pc->out + (size_t)(r + rr) * pc->out_stride + (size_t)h * hd;
            const float inv = 1.0f / l[qi];
            UNROLL
            for (int c = 0; c < nv; c++)
                vstore(o + c * VW, vload(ar + c * VW) * inv);
        } else {
            float *rec = pc->part + ((size_t)(r + rr) * hv + h) * ATTN__PSTRIDE(hd);
            rec[0] = m[qi];
            rec[1] = l[qi];
            memcpy(rec + 16, ar, sizeof(float) * (size_t)hd);
        }
    }
}

/* Where a tile whose first row is at position pos0r starts walking keys
 * in chunks of kc (*start, on the grid of kc from c0) and the first
 * position read in place (*lo_ok): with a sliding window, the tile's
 * first row sees nothing before wlo, so the walk starts at the chunk of
 * the grid that holds it; rows of that chunk in blocks wholly before
 * wlo's block (which the pager may have released) are read from the first
 * row of wlo's block instead: they are masked for every row of the tile,
 * so only where they are read from changes. */
AI void tile_start(const struct attn__piece *pc, int32_t pos0r, int32_t kc, int32_t *start,
                   int32_t *lo_ok)
{
    *start = pc->c0, *lo_ok = pc->c0;
    if (pc->window > 0) {
        const int32_t wlo = pos0r - pc->window + 1;
        if (wlo > *start) {
            *start += (wlo - *start) / kc * kc;
            *lo_ok = FOLIO_MAX(*lo_ok, wlo / pc->block_size * pc->block_size);
        }
    }
}

/* qs[] / a[] are filled for c < nv before use; GCC cannot see that for a
 * run-time head_dim */
#pragma GCC diagnostic push
#ifndef __clang__ /* clang has no such warning */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
AI void kern_body(const struct attn__piece *pc, const int hd, const int dt)
{
    const int nv = hd / VW;
    const int32_t group = pc->group, nkvh = pc->n_kvh, hv = nkvh * group;
    const int32_t mcap = attn__mcap(hv);
    const int32_t rt = mcap / hv;
    float *m = pc->scratch;
    float *l = m + ATTN__ALIGN_F(mcap);
    float *s = l + ATTN__ALIGN_F(mcap);
    float *acc = s + ATTN__ALIGN_F((size_t)mcap * KC);
    float *qs = acc + ATTN__ALIGN_F((size_t)mcap * hd);
    float *ksc = qs + ATTN__ALIGN_F((size_t)mcap * hd);
    float *vsc = ksc + ATTN__ALIGN_F((size_t)KC * nkvh);
    float *qsc = vsc + ATTN__ALIGN_F((size_t)KC * nkvh);
    int32_t *qb = (int32_t *)(qsc + ATTN__ALIGN_F(mcap));
    int8_t *qq = (int8_t *)(qb + ATTN__ALIGN_F(mcap));
    const size_t hstride = pc->head_bytes; /* row k of KV head j: rows[k] + j * hstride */
    const float scale = pc->scale;
    const int32_t npass = nkvh * ((group + GS - 1) / GS); /* a row's passes per chunk */
    /* paired prefetch: pfd (chunk, KV head) steps ahead, so KV head j's
     * target is in this chunk (j + pfd < nkvh) or else in the one pfo
     * chunks ahead (frows): that needs (j + pfd) / nkvh to be 0 or pfo for
     * every j, which holds when pfd is below nkvh or a multiple of it;
     * stream: this chunk or the next */
    const int32_t pfd = PF_STEPS(dt, nkvh);
    bool stream = PF_STREAM(dt);
    if (!stream && PF_STREAM_RUNS(dt)) { /* most of the piece's blocks follow each other */
        const int32_t b0 = pc->c0 / pc->block_size, b1 = (pc->c1 - 1) / pc->block_size;
        int32_t next = 0;
        for (int32_t b = b0; b < b1; b++)
            next += pc->block_table[b + 1] == pc->block_table[b] + 1;
        stream = 2 * next >= b1 - b0;
    }
    const int32_t pfo = stream ? 1 : (nkvh - 1 + pfd) / nkvh;

    for (int32_t r = 0; r < pc->n_rows; r += rt) {
        const int32_t nr = FOLIO_MIN(rt, pc->n_rows - r);
        const int32_t nq = nr * hv;
        for (int32_t qi = 0; qi < nq; qi++) {
            m[qi] = -INFINITY;
            l[qi] = 0;
            memset(acc + (size_t)qi * hd, 0, sizeof(float) * (size_t)hd);
            const float *qv = pc->q + (size_t)(r + qi / hv) * pc->q_stride + (size_t)(qi % hv) * hd;
            float *qd = qs + (size_t)qi * hd;
            if (dt == FOLIO_Q8) { /* int8 q, and as floats for the f32 path */
                int8_t *q8 = qq + (size_t)qi * hd;
                qsc[qi] = attn_q8_quantize_q(qv, hd, scale, q8);
#ifdef KQ8_ZW
                qb[qi] = kq8z_qbias(q8, hd);
#endif
                UNROLL
                for (int c = 0; c < nv; c++)
                    vstore(qd + c * VW, vload_q8(q8 + c * VW));
                continue;
            }
            UNROLL
            for (int c = 0; c < nv; c++)
                vstore(qd + c * VW, vload(qv + c * VW) * scale);
        }
        const int32_t pos0r = pc->pos0 + r; /* position of the tile's first row */
        const int32_t cend = FOLIO_MIN(pc->c1, pos0r + nr);
        int32_t start, lo_ok;
        tile_start(pc, pos0r, KC, &start, &lo_ok);
        /* the last tile prefetches on into the next piece when it has the
         * same KV heads and no window (its first rows are then c0 on) */
        const struct attn__piece *nx = pc->next;
        if (!nx || r + rt < pc->n_rows || nx->n_kvh != nkvh || nx->window > 0 || pc->window > 0)
            nx = NULL;
        /* rows[k]: key k's K row of the piece's first KV head (V: v_bytes
         * further), for the chunk at pos and the one pfo ahead (frows);
         * q8: runs of consecutive slots of one block, for the row
         * scales */
        const char *rows[KC], *frows[KC];
        struct kv_run runs[KC], fruns[KC];
        int32_t n;
        for (int32_t pos = start; pos < cend; pos += n) {
            n = FOLIO_MIN(KC, cend - pos);
            const int nrun = chunk_rows(pc, pos, n, lo_ok, rows, runs);
            const int32_t pp = pos + pfo * KC;
            int32_t fnp = 0;
            int nfrun = 0;
            if (pp < cend) {
                fnp = FOLIO_MIN(KC, cend - pp);
                nfrun = chunk_rows(pc, pp, fnp, lo_ok, frows, fruns);
            } else if (nx) { /* the next piece's chunk that far ahead */
                const int32_t np = nx->c0 + (pfo - (cend - pos + KC - 1) / KC) * KC;
                if (np < nx->c1) {
                    fnp = FOLIO_MIN(KC, nx->c1 - np);
                    nfrun = chunk_rows(nx, np, fnp, nx->c0, frows, fruns);
                }
            }
            for (int32_t j = 0; j < nkvh; j++) {
                const size_t hoff = (size_t)j * hstride;
                if (fnp > 0)
                    prefetch_chunk(pc, frows, fruns, nfrun, fnp, hoff, dt);
                /* q8: the chunk's row scales, zeros after n */
                if (dt == FOLIO_Q8) {
                    float *kj = ksc + (size_t)j * KC, *vj = vsc + (size_t)j * KC;
                    for (int i = 0; i < nrun; i++) {
                        const char *sk = runs[i].sc + hoff;
                        float *kd = kj + runs[i].k0, *vd = vj + runs[i].k0;
                        /* 16 scales (one line) at a time by constant-size
                         * copies, inlined, and the rest by memcpy: a call
                         * per run cost q8 decode 32 x 4096 from memory
                         * 5-8% of its speed (BENCHMARKS.md, the Zen 5's
                         * twenty-second session) */
                        int32_t o = 0;
                        for (; o + 16 <= runs[i].len; o += 16) {
                            memcpy(kd + o, sk + 4 * o, 64);
                            memcpy(vd + o, sk + pc->v_bytes + 4 * o, 64);
                        }
                        if (o < runs[i].len) {
                            const size_t nb = sizeof(float) * (size_t)(runs[i].len - o);
                            memcpy(kd + o, sk + 4 * o, nb);
                            memcpy(vd + o, sk + pc->v_bytes + 4 * o, nb);
                        }
                    }
                    for (int32_t k = n; k < KC; k++)
                        kj[k] = vj[k] = 0;
                }
            }
            for (int32_t rr = 0; rr < nr; rr++) {
                const struct chunk_row cr = {
                    .rows = rows,
                    .n = n,
                    .nvis = FOLIO_MAX(0, FOLIO_MIN(n, pc->pos0 + r + rr - pos + 1)),
                    .rel = pos0r + rr - pos,
                    .pfr = rr == 0,
                    .stream = stream,
                    .pf = fnp > 0 ? frows : NULL,
                    .pfn = fnp,
                    .ksc = ksc,
                    .vsc = vsc,
                };
                if (cr.nvis == 0)
                    continue;
                for (int32_t p0 = 0; p0 < npass; p0 += PASS_MAX)
                    row_chunk(pc, &cr, qs, qq, qsc, qb, s, m, l, acc, rr * hv, p0,
                              FOLIO_MIN(npass, p0 + PASS_MAX), hd, dt);
            }
        }

        tile_results(pc, r, nq, hv, m, l, acc, hd);
    }
}
#pragma GCC diagnostic pop

#include "attn_kern_tile.h"

/* constant head_dim lets the compiler keep q / acc rows in registers; a
 * constant dtype picks the widening load.  The portable kernels (VW 1 and
 * 4) take head_dim at run time only: their constant instances were most of
 * those two files' compile time (a fresh debugoptimized build took 200 s
 * with them, 148 s without, on 2 cores) and ran no faster (x86-64
 * baseline, bench_attention with FOLIO_ATTN_ISA=portable: decode from
 * cache and prefill 512 alike within noise; BENCHMARKS.md).
 * -DKERN_CONST_HD=0|1 overrides, to measure. */
#ifndef KERN_CONST_HD
#if VW <= 4
#define KERN_CONST_HD 0
#else
#define KERN_CONST_HD 1
#endif
#endif

/* Every instance (dtype x head_dim x path, and the tile's vector count) is
 * a function of its own: inlined into one function, they made GCC's
 * dataflow passes (PRE, live registers, register allocation), superlinear
 * in a function's size, most of these files' compile time (a
 * debugoptimized build: 130-145 s for each of the portable, AVX2 and
 * AVX-512 files).  A call per piece costs nothing beside a piece's work. */
#define NOINL static __attribute__((noinline))
#define ROWS_FN(name, dt, HD)                                                                      \
    NOINL void name(const struct attn__piece *pc)                                                  \
    {                                                                                              \
        kern_body(pc, HD, dt);                                                                     \
    }
#define TILE_FN(name, dt, HD, NV)                                                                  \
    NOINL void name(const struct attn__piece *pc)                                                  \
    {                                                                                              \
        kern_tile(pc, HD, dt, NV);                                                                 \
    }
#define TILE_FNS(name, dt, HD)                                                                     \
    TILE_FN(name##_1, dt, HD, 1) TILE_FN(name##_2, dt, HD, 2) TILE_FN(name##_3, dt, HD, 3)
#define TILE_CALL(name, pc)                                                                        \
    (TILE_NV(pc) >= 3 ? name##_3(pc) : TILE_NV(pc) == 2 ? name##_2(pc) : name##_1(pc))

#if KERN_CONST_HD
#define KERN_FNS(name, dt)                                                                         \
    ROWS_FN(name##_rows, dt, pc->hd)                                                               \
    ROWS_FN(name##_rows64, dt, 64)                                                                 \
    ROWS_FN(name##_rows128, dt, 128)                                                               \
    TILE_FNS(name##_tile, dt, pc->hd)                                                              \
    TILE_FNS(name##_tile64, dt, 64)                                                                \
    static inline void name(const struct attn__piece *pc)                                          \
    {                                                                                              \
        if (tile_takes(pc))                                                                        \
            pc->hd == 64 ? TILE_CALL(name##_tile64, pc) : TILE_CALL(name##_tile, pc);              \
        else                                                                                       \
            pc->hd == 64    ? name##_rows64(pc)                                                    \
            : pc->hd == 128 ? name##_rows128(pc)                                                   \
                            : name##_rows(pc);                                                     \
    }
#else
#define KERN_FNS(name, dt)                                                                         \
    ROWS_FN(name##_rows, dt, pc->hd)                                                               \
    TILE_FNS(name##_tile, dt, pc->hd)                                                              \
    static inline void name(const struct attn__piece *pc)                                          \
    {                                                                                              \
        tile_takes(pc) ? TILE_CALL(name##_tile, pc) : name##_rows(pc);                             \
    }
#endif
KERN_FNS(kern_f32, FOLIO_F32)
KERN_FNS(kern_f16, FOLIO_F16)
KERN_FNS(kern_bf16, FOLIO_BF16)
KERN_FNS(kern_q8, FOLIO_Q8)

void KERN_NAME(const struct attn__piece *pc)
{
    switch (pc->dtype) {
    case FOLIO_F16:
        kern_f16(pc);
        break;
    case FOLIO_BF16:
        kern_bf16(pc);
        break;
    case FOLIO_Q8:
        kern_q8(pc);
        break;
    default:
        kern_f32(pc);
        break;
    }
}
