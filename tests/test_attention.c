/*
 * tests/test_attention.c — paged attention against dense attention.
 *
 * Oracle: dense_attn(), plain loops over contiguous K/V [ctx][kv_head][hd]
 * per slice with a two-pass softmax in double.  The same K/V are scattered
 * into an arena (struct pager_kv_view layout: a quarter each the pager's,
 * block-major, layer-major and head-major, which the kernel accepts alike)
 * through page tables in shuffled, non-contiguous block order, in layer 1
 * of 2; every slot no page table maps, and all of layer 0, hold NaN, so a
 * read through a wrong block id, slot, layer or head poisons the output.
 * out is NaN-filled before each run, so a row nobody writes fails too.
 *
 * Checked: attn_paged_ref == dense; attn_paged == dense (and == ref on the
 * smaller cases) for block sizes 1, 8, 16, 32, 128; head_dim 64, 128 (and
 * 20, 40, 42, which fall back to narrower paths); GQA ratios 1, 2, 4, 8; f32,
 * f16, bf16 and q8 K/V; batches mixing decodes, fresh prefills and chunked prefills;
 * contexts up to 8192 (2048 with FOLIO_TEST_SHORT=1); nth = 1, 2, 3, 7 run
 * phase by phase for each ith in this thread; every ISA path this CPU has.
 *
 * K/V rows go into the arena through pager_kv_row_put and the dense oracle
 * takes them back through pager_kv_row_get, so it sees exactly the stored
 * (rounded, quantized) values; the reference reads the arena by its own
 * code, so put/get and the reference check each other.  Poison: a NaN row
 * put in q8 gets a NaN scale, which poisons like a NaN value.  The q8
 * query quantizer, which runs in vectors, is held bit for bit to plain
 * loops (test_q8_quantize_q_plain).
 *
 * Error measure: normalised max error  max|out - want| / max|want|  over the
 * whole batch.  Bounds: 1e-5 for every dtype (the stored values are exact
 * in f32 and the dense oracle uses them, so only f32 accumulation differs;
 * q8 quantizes the query as the kernels and the reference do, and applies
 * the scales after the exact integer dot product, a few ulps); 1e-2 for
 * q8 against an oracle that keeps the query unquantized (see
 * test_paged_q8_exact_q); 1e-6 for ref vs dense (ref is double
 * inside); 1e-3 for the 1e4-scale case, where scores near 1e4 carry f32 rounding of ~1e-3 into the
 * exponent.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "folio/attention.h"

#define MAXS             8
#define ATTN_TEST_HD_MAX 512

static int g_short;

/* ---- random ----------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int32_t rng_int(int32_t lo, int32_t hi) /* [lo, hi] */
{
    return lo + (int32_t)(rng_next() % (uint64_t)(hi - lo + 1));
}

static float rng_unit(void) /* [-1, 1) */
{
    return (float)((double)(rng_next() >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* ---- a test case ------------------------------------------------------ */

enum fill { FILL_RANDOM, FILL_EQUAL_KEYS, FILL_RISING_KEYS };

struct tcase {
    /* shape, set by the caller */
    int32_t bs, hd, n_kv, group;
    enum folio_dtype dt;
    float scale;
    int32_t n_seqs;
    int32_t p0[MAXS], n_q[MAXS];
    enum fill fill;
    int32_t window; /* sliding window (0: none) */
    bool inv;       /* batch_invariant plan */
    bool exact_q;   /* q8: the oracle keeps the query unquantized */
    /* built */
    int32_t n_heads, n_rows;
    struct attn_seq seqs[MAXS];
    int32_t *tables[MAXS];
    float *kd[MAXS], *vd[MAXS]; /* dense [ctx][n_kv][hd] */
    float *q, *out, *want;
    struct pager_kv_view kv;
    struct attn_batch b;
};

static const enum folio_dtype all_dt[] = {FOLIO_F32, FOLIO_F16, FOLIO_BF16, FOLIO_Q8};
#define N_DT ((int)FOLIO_ARRAY_LEN(all_dt))

/* Stores row (head_dim values) at (block, layer, kv_sel, head, slot) and
 * replaces it by what the arena now holds. */
static void row_store(struct tcase *tc, int32_t blk, int32_t layer, int kv_sel, int32_t head,
                      int32_t slot, float *row)
{
    pager_kv_row_put(&tc->kv, blk, layer, kv_sel, head, slot, row);
    pager_kv_row_get(&tc->kv, blk, layer, kv_sel, head, slot, row);
}

/* Every row of the arena NaN. */
static void arena_poison(struct tcase *tc)
{
    const struct pager_kv_view *kv = &tc->kv;
    float row[ATTN_TEST_HD_MAX];
    for (int32_t e = 0; e < kv->head_dim; e++)
        row[e] = NAN;
    for (int32_t b = 0; b < kv->num_blocks; b++)
        for (int32_t l = 0; l < kv->n_layers; l++)
            for (int kvsel = 0; kvsel < 2; kvsel++)
                for (int32_t h = 0; h < kv->n_kv_heads; h++)
                    for (int32_t sl = 0; sl < kv->block_size; sl++)
                        pager_kv_row_put(kv, b, l, kvsel, h, sl, row);
}

static void dense_attn(const struct tcase *tc, float *out)
{
    const int32_t hd = tc->hd, stride = tc->n_heads * hd;
    for (int32_t s = 0; s < tc->n_seqs; s++) {
        const int32_t ctx = tc->p0[s] + tc->n_q[s];
        double *sc = malloc(sizeof(double) * (size_t)ctx);
        double *acc = malloc(sizeof(double) * (size_t)hd);
        assert_non_null(sc);
        assert_non_null(acc);
        for (int32_t i = 0; i < tc->n_q[s]; i++) {
            const int32_t row = tc->seqs[s].q_row + i, vis = tc->p0[s] + i + 1;
            const int32_t lo = tc->window > 0 && vis > tc->window ? vis - tc->window : 0;
            for (int32_t h = 0; h < tc->n_heads; h++) {
                const int32_t kh = h / tc->group;
                const float *qv = tc->q + (size_t)row * stride + (size_t)h * hd;
                double mx = -INFINITY, sum = 0;
                /* q8 K/V: the query quantized too (folio/attention.h) */
                const bool q8 = tc->dt == FOLIO_Q8 && !tc->exact_q;
                int8_t qq[ATTN_TEST_HD_MAX];
                const double qsc =
                    q8 ? (double)attn_q8_quantize_q(qv, hd, tc->scale, qq) : (double)tc->scale;
                for (int32_t p = lo; p < vis; p++) {
                    const float *k = tc->kd[s] + ((size_t)p * tc->n_kv + kh) * hd;
                    double d = 0;
                    for (int32_t e = 0; e < hd; e++)
                        d += (q8 ? (double)qq[e] : (double)qv[e]) * k[e];
                    sc[p] = d * qsc;
                    mx = sc[p] > mx ? sc[p] : mx;
                }
                for (int32_t e = 0; e < hd; e++)
                    acc[e] = 0;
                for (int32_t p = lo; p < vis; p++) {
                    double w = exp(sc[p] - mx);
                    const float *v = tc->vd[s] + ((size_t)p * tc->n_kv + kh) * hd;
                    sum += w;
                    for (int32_t e = 0; e < hd; e++)
                        acc[e] += w * v[e];
                }
                for (int32_t e = 0; e < hd; e++)
                    out[(size_t)row * stride + (size_t)h * hd + e] = (float)(acc[e] / sum);
            }
        }
        free(sc);
        free(acc);
    }
}

static void tc_build(struct tcase *tc)
{
    const int32_t n_layers = 2, layer = 1;
    tc->n_heads = tc->n_kv * tc->group;
    if (tc->scale == 0)
        tc->scale = 1.0f / sqrtf((float)tc->hd);
    int32_t nb_total = 0;
    tc->n_rows = 0;
    for (int32_t s = 0; s < tc->n_seqs; s++) {
        tc->seqs[s].q_row = tc->n_rows;
        tc->seqs[s].n_q = tc->n_q[s];
        tc->seqs[s].p0 = tc->p0[s];
        tc->n_rows += tc->n_q[s];
        nb_total += FOLIO_DIV_CEIL(tc->p0[s] + tc->n_q[s], tc->bs);
    }
    struct pager_kv_view *kv = &tc->kv;
    kv->dtype = tc->dt;
    kv->num_blocks = nb_total + rng_int(0, 5);
    kv->block_size = tc->bs;
    kv->n_layers = n_layers;
    kv->n_kv_heads = tc->n_kv;
    kv->head_dim = tc->hd;
    kv->head_stride = pager_kv_tile_elems(tc->dt, tc->bs, tc->hd);
    kv->v_offset = (size_t)tc->n_kv * kv->head_stride;
    kv->layer_stride = 2 * kv->v_offset;
    kv->block_stride = (size_t)n_layers * kv->layer_stride;
    const size_t n_elem = (size_t)kv->num_blocks * kv->block_stride;
    const int arena = rng_int(0, 3);
    if (arena == 0) { /* layer-major: each layer's blocks adjacent */
        kv->block_stride = kv->layer_stride;
        kv->layer_stride = (size_t)kv->num_blocks * kv->block_stride;
    } else if (arena == 1) { /* head-major: each (layer, K|V, head) a run of blocks */
        kv->block_stride = kv->head_stride;
        kv->head_stride = (size_t)kv->num_blocks * kv->block_stride;
        kv->v_offset = (size_t)tc->n_kv * kv->head_stride;
        kv->layer_stride = 2 * kv->v_offset;
    } else if (arena == 2) { /* the pager's: per (layer, K|V) a run of blocks */
        kv->block_stride = kv->v_offset;
        kv->v_offset = (size_t)kv->num_blocks * kv->block_stride;
        kv->layer_stride = 2 * kv->v_offset;
    }
    const size_t esz = folio_dtype_size(tc->dt);
    kv->base = folio_aligned_alloc(64, n_elem * esz + 64);
    assert_non_null(kv->base);
    arena_poison(tc);

    /* shuffled block ids */
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)kv->num_blocks);
    assert_non_null(perm);
    for (int32_t i = 0; i < kv->num_blocks; i++)
        perm[i] = i;
    for (int32_t i = kv->num_blocks - 1; i > 0; i--) {
        int32_t j = rng_int(0, i), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int32_t used = 0;
    for (int32_t s = 0; s < tc->n_seqs; s++) {
        const int32_t ctx = tc->p0[s] + tc->n_q[s], nb = FOLIO_DIV_CEIL(ctx, tc->bs);
        tc->tables[s] = malloc(sizeof(int32_t) * (size_t)nb);
        assert_non_null(tc->tables[s]);
        for (int32_t i = 0; i < nb; i++)
            tc->tables[s][i] = perm[used++];
        tc->seqs[s].block_table = tc->tables[s];
        const size_t n = (size_t)ctx * tc->n_kv * tc->hd;
        tc->kd[s] = malloc(sizeof(float) * n);
        tc->vd[s] = malloc(sizeof(float) * n);
        assert_non_null(tc->kd[s]);
        assert_non_null(tc->vd[s]);
        for (int32_t p = 0; p < ctx; p++) {
            const int32_t blk = tc->tables[s][p / tc->bs], slot = p % tc->bs;
            for (int32_t h = 0; h < tc->n_kv; h++) {
                float *kr = tc->kd[s] + ((size_t)p * tc->n_kv + h) * tc->hd;
                float *vr = tc->vd[s] + ((size_t)p * tc->n_kv + h) * tc->hd;
                for (int32_t e = 0; e < tc->hd; e++) {
                    kr[e] = tc->fill == FILL_EQUAL_KEYS    ? 0.25f + 0.01f * (e % 7)
                            : tc->fill == FILL_RISING_KEYS ? rng_unit() + 0.2f * (float)p
                                                           : rng_unit();
                    vr[e] = rng_unit();
                }
                row_store(tc, blk, layer, 0, h, slot, kr);
                row_store(tc, blk, layer, 1, h, slot, vr);
            }
        }
    }
    free(perm);
    const size_t nq = (size_t)tc->n_rows * tc->n_heads * tc->hd;
    tc->q = malloc(sizeof(float) * nq);
    tc->out = malloc(sizeof(float) * nq);
    tc->want = malloc(sizeof(float) * nq);
    assert_non_null(tc->q);
    assert_non_null(tc->out);
    assert_non_null(tc->want);
    for (size_t i = 0; i < nq; i++)
        tc->q[i] = rng_unit();
    tc->b = (struct attn_batch){.kv = kv,
                                .layer = layer,
                                .n_heads = tc->n_heads,
                                .scale = tc->scale,
                                .n_seqs = tc->n_seqs,
                                .seqs = tc->seqs,
                                .n_rows = tc->n_rows,
                                .q = tc->q,
                                .out = tc->out,
                                .window = tc->window,
                                .batch_invariant = tc->inv};
    dense_attn(tc, tc->want);
}

static void tc_free(struct tcase *tc)
{
    for (int32_t s = 0; s < tc->n_seqs; s++) {
        free(tc->tables[s]);
        free(tc->kd[s]);
        free(tc->vd[s]);
    }
    free(tc->q);
    free(tc->out);
    free(tc->want);
    folio_free(tc->kv.base);
}

static size_t tc_nout(const struct tcase *tc)
{
    return (size_t)tc->n_rows * tc->n_heads * tc->hd;
}

/* Normalised max error; any non-finite output counts as infinite. */
static double norm_err(const float *got, const float *want, size_t n)
{
    double emax = 0, wmax = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]))
            return INFINITY;
        double e = fabs((double)got[i] - want[i]);
        emax = e > emax ? e : emax;
        wmax = fabs(want[i]) > wmax ? fabs(want[i]) : wmax;
    }
    return emax / (wmax > 1e-30 ? wmax : 1e-30);
}

static void fill_nan(float *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = NAN;
}

/* Runs the fast kernel phase by phase, every ith in turn, into tc->out. */
static void run_paged(struct tcase *tc, int nth)
{
    size_t ws = attn_paged_work_size(&tc->b, nth);
    void *work = folio_aligned_alloc(64, ws);
    assert_non_null(work);
    fill_nan(tc->out, tc_nout(tc));
    for (int phase = 0; phase < ATTN_PHASES; phase++)
        for (int ith = 0; ith < nth; ith++)
            attn_paged(&tc->b, work, phase, ith, nth);
    folio_free(work);
}

static const char *const isas[] = {"portable", "avx2", "avx512"};
static const int nths[] = {1, 2, 3, 7};

/* attn_paged == want for every ISA and nth, and on AVX-512 for kernel B
 * too where the build has one (meson -Dattn_ab=true, bench_attention
 * --ab: a variant must compute what the kernel does); returns the worst
 * error. */
static double check_paged(struct tcase *tc, double bound, const char *what)
{
    double worst = 0;
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(isas); i++) {
        int rc = attn_force_isa(isas[i]);
        if (rc == -ENOTSUP)
            continue;
        assert_int_equal(rc, 0);
        const bool have_b = attn_ab_select(0) == 0;
        const int kernels = have_b && !strcmp(isas[i], "avx512") ? 2 : 1;
        for (int kb = 0; kb < kernels; kb++) {
            if (have_b)
                assert_int_equal(attn_ab_select(kb), 0);
            for (size_t t = 0; t < FOLIO_ARRAY_LEN(nths); t++) {
                run_paged(tc, nths[t]);
                double e = norm_err(tc->out, tc->want, tc_nout(tc));
                if (!(e <= bound))
                    fail_msg("%s: isa %s%s nth %d bs %d hd %d group %d n_kv %d %s: err %g > %g",
                             what, isas[i], kb ? " (kernel B)" : "", nths[t], tc->bs, tc->hd,
                             tc->group, tc->n_kv, folio_dtype_name(tc->dt), e, bound);
                worst = e > worst ? e : worst;
            }
        }
        attn_ab_select(0);
    }
    assert_int_equal(attn_force_isa("auto"), 0);
    return worst;
}

static const int32_t block_sizes[] = {1, 8, 16, 32, 128};
/* 64 and 128 take every ISA's widest q8 dot product (AVX512-VNNI's 64
 * bytes); 96 the 32-byte one on AVX-512 (the fixed cases below use the
 * first two) */
static const int32_t head_dims[] = {64, 128, 96};
static const int32_t groups[] = {1, 2, 4, 8};

/* A random batch: decodes, fresh prefills and chunked prefills. */
static void tc_random(struct tcase *tc, int32_t max_ctx, int32_t max_q)
{
    memset(tc, 0, sizeof(*tc));
    tc->bs = block_sizes[rng_int(0, FOLIO_ARRAY_LEN(block_sizes) - 1)];
    tc->hd = head_dims[rng_int(0, FOLIO_ARRAY_LEN(head_dims) - 1)];
    tc->group = groups[rng_int(0, FOLIO_ARRAY_LEN(groups) - 1)];
    tc->n_kv = rng_int(1, 2);
    tc->dt = all_dt[rng_int(0, N_DT - 1)];
    tc->n_seqs = rng_int(1, 5);
    for (int32_t s = 0; s < tc->n_seqs; s++) {
        switch (rng_int(0, 2)) {
        case 0: /* decode */
            tc->n_q[s] = 1;
            tc->p0[s] = rng_int(0, max_ctx - 1);
            break;
        case 1: /* fresh prefill */
            tc->n_q[s] = rng_int(1, max_q);
            tc->p0[s] = 0;
            break;
        default: /* chunk after a cached prefix */
            tc->n_q[s] = rng_int(1, max_q);
            tc->p0[s] = rng_int(1, max_ctx - tc->n_q[s]);
            break;
        }
    }
    tc->fill = FILL_RANDOM;
    /* a third of the batches with a sliding window, down to one key */
    tc->window = rng_int(0, 2) == 0 ? rng_int(1, max_ctx / 2) : 0;
    tc->inv = rng_int(0, 3) == 0;
}

/* ---- tests ------------------------------------------------------------ */

/* The scalar reference equals dense attention over contiguous K/V. */
static void test_ref_vs_dense(void **state)
{
    (void)state;
    rng_state = 1;
    const int n = g_short ? 12 : 40;
    for (int it = 0; it < n; it++) {
        struct tcase tc;
        tc_random(&tc, 300, 40);
        tc_build(&tc);
        fill_nan(tc.out, tc_nout(&tc));
        attn_paged_ref(&tc.b);
        double e = norm_err(tc.out, tc.want, tc_nout(&tc));
        if (!(e <= 1e-6))
            fail_msg("ref vs dense: case %d err %g", it, e);
        tc_free(&tc);
    }
}

/* The fast kernel equals dense (and ref) on random mixed batches: every
 * block size x head_dim x GQA ratio x dtype is visited. */
static void test_paged_random(void **state)
{
    (void)state;
    rng_state = 2;
    const int n = g_short ? 32 : 160;
    double worst[N_DT] = {0};
    for (int it = 0; it < n; it++) {
        struct tcase tc;
        tc_random(&tc, 700, 48);
        /* sweep the grid deterministically on top of the random draw */
        tc.bs = block_sizes[it % 5];
        tc.hd = head_dims[(it / 5) % 2];
        tc.group = groups[(it / 10) % 4];
        tc.dt = all_dt[(it / 40) % N_DT];
        if (g_short) {
            tc.dt = all_dt[it % N_DT];
            tc.group = groups[(it / 3) % 4];
        }
        tc_build(&tc);
        double e = check_paged(&tc, 1e-5, "random");
        worst[tc.dt] = e > worst[tc.dt] ? e : worst[tc.dt];
        if (it % 4 == 0) { /* paged == ref too */
            float *ref = malloc(sizeof(float) * tc_nout(&tc));
            assert_non_null(ref);
            tc.b.out = ref;
            attn_paged_ref(&tc.b);
            tc.b.out = tc.out;
            run_paged(&tc, 3);
            double e2 = norm_err(tc.out, ref, tc_nout(&tc));
            if (!(e2 <= 1e-5))
                fail_msg("paged vs ref: case %d err %g", it, e2);
            free(ref);
        }
        tc_free(&tc);
    }
    print_message("worst normalised error: f32 %.3g, f16 %.3g, bf16 %.3g, q8 %.3g\n", worst[0],
                  worst[1], worst[2], worst[3]);
}

/* attn_q8_quantize_q: the extreme element maps to +-127, every element is
 * within half a step of x * scale, zero stays zero, non-finite -> NaN. */
static void test_q8_quantize_q(void **state)
{
    (void)state;
    rng_state = 11;
    float x[ATTN_TEST_HD_MAX];
    int8_t q[ATTN_TEST_HD_MAX];
    for (int it = 0; it < 200; it++) {
        const int32_t n = rng_int(1, ATTN_TEST_HD_MAX);
        const float mag = it % 3 == 0 ? 1e-3f : it % 3 == 1 ? 1.0f : 300.0f;
        const float scale = it % 2 ? 0.125f : 1.0f;
        float amax = 0;
        for (int32_t e = 0; e < n; e++) {
            x[e] = rng_unit() * mag;
            amax = fmaxf(amax, fabsf(x[e] * scale));
        }
        const float qs = attn_q8_quantize_q(x, n, scale, q);
        assert_true(fabsf(qs * 127.0f - amax) <= amax * 1e-6f);
        bool top = false;
        for (int32_t e = 0; e < n; e++) {
            assert_true(q[e] >= -127 && q[e] <= 127);
            assert_true(fabsf((float)q[e] * qs - x[e] * scale) <= qs * 0.5001f);
            top |= q[e] == 127 || q[e] == -127;
        }
        assert_true(top);
    }
    for (int32_t e = 0; e < 64; e++)
        x[e] = 0;
    assert_true(attn_q8_quantize_q(x, 64, 1.0f, q) == 0.0f);
    for (int32_t e = 0; e < 64; e++)
        assert_int_equal(q[e], 0);
    x[7] = INFINITY;
    assert_true(isnan(attn_q8_quantize_q(x, 64, 1.0f, q)));
    x[7] = NAN;
    assert_true(isnan(attn_q8_quantize_q(x, 64, 1.0f, q)));
}

/* attn_q8_quantize_q as one plain loop per pass, to hold its vectorized
 * passes to: the same bytes and the same scale bit for bit. */
static float quantize_q_plain(const float *x, int32_t n, float scale, int8_t *out)
{
    float amax = 0;
    int finite = 1;
    for (int32_t e = 0; e < n; e++) {
        const float a = fabsf(x[e] * scale);
        finite &= isfinite(a);
        amax = a > amax ? a : amax;
    }
    const float inv = finite && amax > 0 ? 127.0f / amax : 0.0f;
    for (int32_t e = 0; e < n; e++) {
        const float r = rintf(x[e] * scale * inv);
        out[e] = (int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : r == r ? r : 0);
    }
    return finite ? amax / 127.0f : NAN;
}

/* attn_q8_quantize_q against quantize_q_plain: every length (vector body
 * and tail), magnitudes down to subnormal maxima (127 / amax overflows to
 * inf), inf and NaN in the body or the tail, exact ties (x.5 steps). */
static void test_q8_quantize_q_plain(void **state)
{
    (void)state;
    rng_state = 12;
    float x[ATTN_TEST_HD_MAX];
    int8_t q[ATTN_TEST_HD_MAX], want[ATTN_TEST_HD_MAX];
    for (int it = 0; it < 3000; it++) {
        const int32_t n = it < ATTN_TEST_HD_MAX ? it + 1 : rng_int(1, ATTN_TEST_HD_MAX);
        const int kind = it % 6;
        const float mag = kind == 0 ? 1e-3f : kind == 1 ? 300.0f : kind == 2 ? 1e-39f : 1.0f;
        const float scale = it % 2 ? 0.125f : 1.0f;
        for (int32_t e = 0; e < n; e++)
            x[e] = rng_unit() * mag;
        if (kind == 3) /* ties: amax 127 at scale 1, other elements on half steps */
            for (int32_t e = 0; e < n; e++)
                x[e] = e == 0 ? 127.0f : (float)rng_int(-254, 254) * 0.5f;
        if (kind == 4) /* a non-finite value anywhere */
            x[rng_int(0, n - 1)] = rng_int(0, 1) ? NAN : -INFINITY;
        if (kind == 5 && it % 4 == 1)
            for (int32_t e = 0; e < n; e++)
                x[e] = 0;
        const float got = attn_q8_quantize_q(x, n, scale, q);
        const float exp = quantize_q_plain(x, n, scale, want);
        assert_true(isnan(exp) ? isnan(got) : memcmp(&got, &exp, sizeof got) == 0);
        assert_memory_equal(q, want, (size_t)n);
    }
}

/* q8 against an oracle with the unquantized query: what quantizing q
 * costs (the other tests' oracle quantizes q as the kernels do).  Bound:
 * a q element moves by at most half a step, amax / 254, so a score moves
 * by at most amax / 254 * |k|_1 — with the tests' keys and queries
 * (uniform in [-1, 1), scale 1/sqrt(hd): amax ~ 1/sqrt(hd), |k|_1 ~ hd/2)
 * about sqrt(hd) / 508, 0.016-0.022 for hd 64-128, in the worst case and
 * ~1e-3 typically (errors of random sign); the output, a convex mix of V
 * rows, moves by about the score error times the spread of V (|v| <= 1),
 * relative to max |out|, which averaging over long contexts shrinks.
 * Measured worst: 2.6e-3 normalised; bound 1e-2. */
#define Q8_EXACT_Q_BOUND 1e-2
static void test_paged_q8_exact_q(void **state)
{
    (void)state;
    rng_state = 12;
    const int n = g_short ? 8 : 24;
    double worst = 0;
    for (int it = 0; it < n; it++) {
        struct tcase tc;
        tc_random(&tc, 700, 48);
        tc.dt = FOLIO_Q8;
        tc.exact_q = true;
        tc.hd = head_dims[it % 2];
        tc.group = groups[(it / 2) % 4];
        tc_build(&tc);
        double e = check_paged(&tc, Q8_EXACT_Q_BOUND, "q8 vs unquantized q");
        worst = e > worst ? e : worst;
        tc_free(&tc);
    }
    print_message("q8: worst normalised error against unquantized q: %.3g\n", worst);
}

/* Long contexts: decodes and short chunks on long prefixes (split-K for
 * nth > 1), a long fresh prefill (row split). */
static void test_paged_long(void **state)
{
    (void)state;
    rng_state = 3;
    const int32_t max_ctx = g_short ? 2048 : 8192;
    const int n = g_short ? 4 : 8;
    for (int it = 0; it < n; it++) {
        struct tcase tc;
        memset(&tc, 0, sizeof(tc));
        tc.bs = block_sizes[rng_int(1, 4)];
        tc.hd = head_dims[it % 2];
        tc.group = groups[rng_int(0, 3)];
        tc.n_kv = 1 + it % 2;
        tc.dt = all_dt[it % N_DT];
        tc.n_seqs = 3;
        tc.p0[0] = max_ctx - 1 - rng_int(0, 100);
        tc.n_q[0] = 1;
        tc.p0[1] = max_ctx / 2 + rng_int(0, 100);
        tc.n_q[1] = rng_int(2, 7);
        tc.p0[2] = 0;
        tc.n_q[2] = g_short ? 64 : 256;
        tc_build(&tc);
        check_paged(&tc, 1e-5, "long");
        tc_free(&tc);
    }
}

/* One long decode alone: the context is split over threads and merged. */
static void test_paged_single_long_decode(void **state)
{
    (void)state;
    rng_state = 4;
    for (int dt = 0; dt < N_DT; dt++) {
        struct tcase tc;
        memset(&tc, 0, sizeof(tc));
        tc.bs = 16;
        tc.hd = 64;
        tc.group = 3; /* the small model: 12 heads over 4 KV heads */
        tc.n_kv = 4;
        tc.dt = all_dt[dt];
        tc.n_seqs = 1;
        tc.p0[0] = g_short ? 1500 : 4095;
        tc.n_q[0] = 1;
        tc_build(&tc);
        check_paged(&tc, 1e-5, "single long decode");
        tc_free(&tc);
    }
}

/* Many query heads per KV head, and many KV heads: the per-row kernel
 * runs a row's passes (query heads of one KV head, up to 3 at a time)
 * phase by phase, at most 16 passes at once, so group 52 (18 passes per KV
 * head, the last of 1 head) takes it through more than one batch of
 * passes; 20 KV heads of group 1 or 2 split into pieces of at most 16
 * query heads. */
static void test_paged_many_kv_heads(void **state)
{
    (void)state;
    rng_state = 11;
    static const int32_t shapes[][2] = {{20, 1}, {20, 2}, {2, 52}}; /* n_kv, group */
    for (int dt = 0; dt < N_DT; dt++)
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
            struct tcase tc;
            memset(&tc, 0, sizeof(tc));
            tc.bs = 16;
            tc.hd = 64;
            tc.n_kv = shapes[sh][0];
            tc.group = shapes[sh][1];
            tc.dt = all_dt[dt];
            tc.n_seqs = 3;
            tc.p0[0] = 300, tc.n_q[0] = 1; /* decodes */
            tc.p0[1] = 77, tc.n_q[1] = 1;
            tc.p0[2] = 40, tc.n_q[2] = 9; /* a chunk */
            tc_build(&tc);
            check_paged(&tc, 1e-5, "many KV heads");
            tc_free(&tc);
        }
}

/* Edge cases: a single partial block, a chunk ending exactly on a block
 * boundary, context 1, an empty batch, head dims the wide paths cannot take. */
static void test_paged_edges(void **state)
{
    (void)state;
    rng_state = 5;
    for (int dt = 0; dt < N_DT; dt++) {
        struct tcase tc;
        memset(&tc, 0, sizeof(tc));
        tc.bs = 16;
        tc.hd = 64;
        tc.group = 4;
        tc.n_kv = 2;
        tc.dt = all_dt[dt];
        tc.n_seqs = 5;
        tc.p0[0] = 0, tc.n_q[0] = 5;   /* fresh prefill inside one partial block */
        tc.p0[1] = 3, tc.n_q[1] = 1;   /* decode inside one partial block */
        tc.p0[2] = 20, tc.n_q[2] = 12; /* chunk ends at 32 = 2 blocks exactly */
        tc.p0[3] = 0, tc.n_q[3] = 1;   /* context 1 */
        tc.p0[4] = 47, tc.n_q[4] = 1;  /* decode ending on a boundary */
        tc_build(&tc);
        check_paged(&tc, 1e-5, "edges");
        tc_free(&tc);
    }
    /* an empty batch: nothing to do, nothing written */
    {
        struct tcase tc;
        memset(&tc, 0, sizeof(tc));
        tc.bs = 16, tc.hd = 64, tc.group = 2, tc.n_kv = 2, tc.dt = FOLIO_F32;
        tc.n_seqs = 1, tc.p0[0] = 5, tc.n_q[0] = 1;
        tc_build(&tc);
        tc.b.n_seqs = 0;
        tc.b.n_rows = 0;
        for (size_t t = 0; t < FOLIO_ARRAY_LEN(nths); t++) {
            run_paged(&tc, nths[t]);
            for (size_t i = 0; i < tc_nout(&tc); i++)
                assert_true(isnan(tc.out[i]));
        }
        tc_free(&tc);
    }
    /* head dims the vector paths pass down: 40 (AVX-512 -> AVX2, 4-lane
     * portable), 42 (only the scalar portable kernel), 20 (4-lane) */
    static const int32_t odd_hd[] = {40, 42, 20, 40, 42, 20, 40, 42};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(odd_hd); i++) {
        struct tcase tc;
        memset(&tc, 0, sizeof(tc));
        tc.bs = 8;
        tc.hd = odd_hd[i];
        tc.group = 2;
        tc.n_kv = 2;
        tc.dt = all_dt[(i + 1) % N_DT];
        tc.n_seqs = 2;
        tc.p0[0] = 0, tc.n_q[0] = 30;
        tc.p0[1] = 333, tc.n_q[1] = 1;
        tc_build(&tc);
        check_paged(&tc, 1e-5, "odd head_dim");
        tc_free(&tc);
    }
}

/* All keys equal: every score is the same, out is the mean of V. */
static void test_paged_equal_scores(void **state)
{
    (void)state;
    rng_state = 6;
    for (int dt = 0; dt < N_DT; dt++) {
        struct tcase tc;
        memset(&tc, 0, sizeof(tc));
        tc.bs = 32;
        tc.hd = 128;
        tc.group = 2;
        tc.n_kv = 1;
        tc.dt = all_dt[dt];
        tc.n_seqs = 3;
        tc.p0[0] = 0, tc.n_q[0] = 40;
        tc.p0[1] = 900, tc.n_q[1] = 1;
        tc.p0[2] = 500, tc.n_q[2] = 3;
        tc.fill = FILL_EQUAL_KEYS;
        tc_build(&tc);
        check_paged(&tc, 1e-5, "equal scores");
        tc_free(&tc);
    }
}

/* Scale 1e4: scores in the thousands; no overflow, no NaN, near one-hot. */
static void test_paged_huge_scores(void **state)
{
    (void)state;
    rng_state = 7;
    for (int dt = 0; dt < N_DT; dt++) {
        struct tcase tc;
        memset(&tc, 0, sizeof(tc));
        tc.bs = 16;
        tc.hd = 64;
        tc.group = 4;
        tc.n_kv = 2;
        tc.dt = all_dt[dt];
        tc.scale = 1e4f;
        tc.n_seqs = 3;
        tc.p0[0] = 0, tc.n_q[0] = 33;
        tc.p0[1] = 700, tc.n_q[1] = 1;
        tc.p0[2] = 300, tc.n_q[2] = 4;
        tc_build(&tc);
        check_paged(&tc, 1e-3, "huge scores");
        fill_nan(tc.out, tc_nout(&tc));
        attn_paged_ref(&tc.b);
        assert_true(norm_err(tc.out, tc.want, tc_nout(&tc)) <= 1e-6);
        tc_free(&tc);
    }
}

/* Keys with a component that grows with the position: for a query whose
 * sum of elements is positive the scores climb by several units per 64 keys (about 7 for a typical
 * query), to a few hundred (for the others they fall), so the kernel's running maximum is passed
 * again and again, by less and by more than the margin within which the per-row path keeps it
 * (SOFTMAX_LAZY_T in attn_kern_body.h); never moving it would overflow exp.  The scores' own f32
 * rounding at that size (1-2e-5 here, with or without the margin) sets the bound. */
static void test_paged_rising_scores(void **state)
{
    (void)state;
    rng_state = 12;
    for (int dt = 0; dt < N_DT; dt++) {
        struct tcase tc;
        memset(&tc, 0, sizeof(tc));
        tc.bs = 16;
        tc.hd = 64;
        tc.group = 3;
        tc.n_kv = 2;
        tc.dt = all_dt[dt];
        tc.n_seqs = 3;
        tc.p0[0] = 1500, tc.n_q[0] = 1;
        tc.p0[1] = 700, tc.n_q[1] = 1;
        tc.p0[2] = 300, tc.n_q[2] = 40;
        tc.fill = FILL_RISING_KEYS;
        tc_build(&tc);
        check_paged(&tc, 5e-5, "rising scores");
        tc_free(&tc);
    }
}

/* Same batch and nth: bit-identical output. */
static void test_paged_deterministic(void **state)
{
    (void)state;
    rng_state = 8;
    struct tcase tc;
    tc_random(&tc, 1500, 40);
    tc_build(&tc);
    float *first = malloc(sizeof(float) * tc_nout(&tc));
    assert_non_null(first);
    for (size_t t = 0; t < FOLIO_ARRAY_LEN(nths); t++) {
        run_paged(&tc, nths[t]);
        memcpy(first, tc.out, sizeof(float) * tc_nout(&tc));
        run_paged(&tc, nths[t]);
        assert_memory_equal(first, tc.out, sizeof(float) * tc_nout(&tc));
    }
    free(first);
    tc_free(&tc);
}

/* ---- through the real pager ------------------------------------------- */

/* Writes K/V of position pos of seq (layer 1, every KV head) into the
 * pager's arena from the dense arrays of slice s. */
static void put_pos(struct tcase *tc, pager_seq_t *seq, int32_t s, int32_t pos)
{
    int32_t blk, off;
    pager_seq_slot(seq, pos, &blk, &off);
    for (int32_t h = 0; h < tc->n_kv; h++) {
        const size_t di = ((size_t)pos * tc->n_kv + h) * tc->hd;
        row_store(tc, blk, 1, 0, h, off, tc->kd[s] + di);
        row_store(tc, blk, 1, 1, h, off, tc->vd[s] + di);
    }
}

/* Page tables made by the pager itself: a fork sharing a prefix (with a
 * copy-on-write of the partial last block), a decode on the parent, a chunk
 * on the child and a fresh prefill; the kernel reads them through
 * pager_kv_view and matches dense attention. */
static void test_paged_real_pager(void **state)
{
    (void)state;
    rng_state = 10;
    for (int dt = 0; dt < N_DT; dt++) {
        struct tcase tc;
        memset(&tc, 0, sizeof(tc));
        tc.bs = 16, tc.hd = 64, tc.group = 3, tc.n_kv = 2;
        tc.dt = all_dt[dt];
        tc.n_heads = tc.group * tc.n_kv;
        tc.scale = 1.0f / 8.0f;
        struct pager_config cfg = {.num_blocks = 40,
                                   .block_size = tc.bs,
                                   .n_layers = 2,
                                   .n_kv_heads = tc.n_kv,
                                   .head_dim = tc.hd,
                                   .dtype = tc.dt};
        pager_t *pg;
        assert_int_equal(pager_init(&pg, &cfg), 0);
        pager_kv_view(pg, &tc.kv);
        arena_poison(&tc);

        /* slices: 0 = parent decode at 100, 1 = child chunk 100..104,
         * 2 = fresh prefill of 40 */
        const int32_t ctx[3] = {101, 105, 40};
        tc.n_seqs = 3;
        tc.p0[0] = 100, tc.n_q[0] = 1;
        tc.p0[1] = 100, tc.n_q[1] = 5;
        tc.p0[2] = 0, tc.n_q[2] = 40;
        for (int32_t s = 0; s < 3; s++) {
            const size_t n = (size_t)ctx[s] * tc.n_kv * tc.hd;
            tc.kd[s] = malloc(sizeof(float) * n);
            tc.vd[s] = malloc(sizeof(float) * n);
            assert_non_null(tc.kd[s]);
            assert_non_null(tc.vd[s]);
            for (size_t i = 0; i < n; i++) {
                tc.kd[s][i] = rng_unit();
                tc.vd[s][i] = rng_unit();
            }
        }

        int32_t toks[128];
        for (int i = 0; i < 128; i++)
            toks[i] = rng_int(0, 999);
        pager_seq_t *a, *b, *c;
        assert_int_equal(pager_seq_new(pg, 1, 1, 0, &a), 0);
        assert_int_equal(pager_seq_append(pg, a, toks, 100), 0);
        for (int32_t p = 0; p < 100; p++)
            put_pos(&tc, a, 0, p);
        /* the child shares the parent's first 100 positions (as stored) */
        memcpy(tc.kd[1], tc.kd[0], sizeof(float) * 100 * tc.n_kv * tc.hd);
        memcpy(tc.vd[1], tc.vd[0], sizeof(float) * 100 * tc.n_kv * tc.hd);
        pager_seq_mark_computed(pg, a, 100);
        assert_int_equal(pager_seq_fork(pg, a, 2, 0, &b), 0);
        assert_int_equal(pager_seq_append(pg, b, toks + 100, 5), 0); /* copy-on-write */
        for (int32_t p = 100; p < 105; p++)
            put_pos(&tc, b, 1, p);
        assert_int_equal(pager_seq_append(pg, a, toks + 110, 1), 0);
        put_pos(&tc, a, 0, 100);
        assert_int_equal(pager_seq_new(pg, 3, 3, 0, &c), 0);
        assert_int_equal(pager_seq_append(pg, c, toks, 40), 0);
        for (int32_t p = 0; p < 40; p++)
            put_pos(&tc, c, 2, p);
        assert_int_equal(pager_check(pg, NULL, 0), 0);

        pager_seq_t *seqs[3] = {a, b, c};
        tc.n_rows = 0;
        for (int32_t s = 0; s < 3; s++) {
            int32_t nb;
            tc.seqs[s] = (struct attn_seq){.q_row = tc.n_rows,
                                           .n_q = tc.n_q[s],
                                           .p0 = tc.p0[s],
                                           .block_table = pager_seq_block_table(seqs[s], &nb)};
            assert_true(nb * tc.bs >= ctx[s]);
            tc.n_rows += tc.n_q[s];
        }
        /* shared full blocks, a private copy of the partial one */
        assert_int_equal(tc.seqs[0].block_table[0], tc.seqs[1].block_table[0]);
        assert_int_not_equal(tc.seqs[0].block_table[6], tc.seqs[1].block_table[6]);
        const size_t nq = (size_t)tc.n_rows * tc.n_heads * tc.hd;
        tc.q = malloc(sizeof(float) * nq);
        tc.out = malloc(sizeof(float) * nq);
        tc.want = malloc(sizeof(float) * nq);
        assert_non_null(tc.q);
        assert_non_null(tc.out);
        assert_non_null(tc.want);
        for (size_t i = 0; i < nq; i++)
            tc.q[i] = rng_unit();
        tc.b = (struct attn_batch){.kv = &tc.kv,
                                   .layer = 1,
                                   .n_heads = tc.n_heads,
                                   .scale = tc.scale,
                                   .n_seqs = 3,
                                   .seqs = tc.seqs,
                                   .n_rows = tc.n_rows,
                                   .q = tc.q,
                                   .out = tc.out};
        dense_attn(&tc, tc.want);
        check_paged(&tc, 1e-5, "real pager");
        fill_nan(tc.out, nq);
        attn_paged_ref(&tc.b);
        assert_true(norm_err(tc.out, tc.want, nq) <= 1e-6);

        pager_seq_free(pg, a);
        pager_seq_free(pg, b);
        pager_seq_free(pg, c);
        pager_free(pg);
        tc.kv.base = NULL;
        for (int32_t s = 0; s < 3; s++) {
            free(tc.kd[s]);
            free(tc.vd[s]);
        }
        free(tc.q);
        free(tc.out);
        free(tc.want);
    }
}

/* Every output element is written by exactly one (phase, thread): run
 * each (phase, ith) alone and watch which elements change. */
static void test_paged_partition(void **state)
{
    (void)state;
    rng_state = 11;
    for (int it = 0; it < 6; it++) {
        struct tcase tc;
        tc_random(&tc, it < 3 ? 3000 : 600, 64);
        if (it == 0) { /* one long decode alone: split context */
            tc.n_seqs = 1;
            tc.n_q[0] = 1;
            tc.p0[0] = 2999;
        }
        tc_build(&tc);
        const size_t n = tc_nout(&tc);
        int *who = malloc(sizeof(int) * n);
        float *before = malloc(sizeof(float) * n);
        assert_non_null(who);
        assert_non_null(before);
        for (size_t t = 1; t < FOLIO_ARRAY_LEN(nths); t++) {
            const int nth = nths[t];
            void *work = folio_aligned_alloc(64, attn_paged_work_size(&tc.b, nth));
            assert_non_null(work);
            fill_nan(tc.out, n);
            for (size_t i = 0; i < n; i++)
                who[i] = -1;
            for (int phase = 0; phase < ATTN_PHASES; phase++) {
                for (int ith = 0; ith < nth; ith++) {
                    memcpy(before, tc.out, sizeof(float) * n);
                    attn_paged(&tc.b, work, phase, ith, nth);
                    for (size_t i = 0; i < n; i++) {
                        if (memcmp(&before[i], &tc.out[i], sizeof(float)) == 0)
                            continue;
                        if (who[i] != -1)
                            fail_msg("element %zu written by %d and by phase %d ith %d", i, who[i],
                                     phase, ith);
                        who[i] = phase * 100 + ith;
                    }
                }
            }
            for (size_t i = 0; i < n; i++)
                assert_true(who[i] != -1);
            assert_true(norm_err(tc.out, tc.want, n) <= 1e-5);
            folio_free(work);
        }
        free(who);
        free(before);
        tc_free(&tc);
    }
}

/* attn_paged_work_bound bounds attn_paged_work_size over random batches,
 * including the shapes that split the most (one long decode, a few long
 * decodes beside many short ones, short chunks on long prefixes). */
static void test_work_bound(void **state)
{
    (void)state;
    rng_state = 13;
    for (int it = 0; it < 200; it++) {
        struct tcase tc;
        memset(&tc, 0, sizeof(tc));
        tc.bs = block_sizes[rng_int(0, 4)];
        tc.hd = head_dims[rng_int(0, 1)];
        tc.group = groups[rng_int(0, 3)];
        tc.n_kv = rng_int(1, 4);
        tc.n_heads = tc.group * tc.n_kv;
        struct pager_kv_view kv = {.base = &tc,
                                   .dtype = FOLIO_F32,
                                   .num_blocks = 1,
                                   .block_size = tc.bs,
                                   .n_layers = 1,
                                   .n_kv_heads = tc.n_kv,
                                   .head_dim = tc.hd,
                                   .head_stride = (size_t)tc.bs * tc.hd};
        kv.v_offset = (size_t)tc.n_kv * kv.head_stride;
        kv.layer_stride = kv.block_stride = 2 * kv.v_offset;
        static int32_t zeros[70000];
        struct attn_seq seqs[MAXS];
        int32_t n_seqs = rng_int(1, MAXS), rows = 0;
        for (int32_t s = 0; s < n_seqs; s++) {
            int32_t kind = rng_int(0, 2);
            int32_t n_q = kind == 0 ? 1 : kind == 1 ? rng_int(1, 40) : rng_int(1, 300);
            int32_t p0 = rng_int(0, 1) ? rng_int(0, 60000) : rng_int(0, 100);
            seqs[s] = (struct attn_seq){rows, n_q, p0, zeros};
            rows += n_q;
        }
        struct attn_batch b = {.kv = &kv,
                               .n_heads = tc.n_heads,
                               .scale = 1,
                               .n_seqs = n_seqs,
                               .seqs = seqs,
                               .n_rows = rows,
                               .q = (const float *)zeros,
                               .out = (float *)zeros};
        for (int nth = 1; nth <= 8; nth++) {
            size_t need = attn_paged_work_size(&b, nth);
            size_t bound = attn_paged_work_bound(&kv, tc.n_heads, rows, nth);
            if (need > bound)
                fail_msg("case %d nth %d: work %zu > bound %zu", it, nth, need, bound);
        }
    }
}

/* Real threads: nth pthreads run the phases with a barrier between them
 * (as the model's pool will); under ASan this also checks that threads
 * stay inside their parts of the workspace. */
struct thr_arg {
    const struct attn_batch *b;
    void *work;
    int ith, nth;
    pthread_barrier_t *bar;
};

static void *thr_main(void *p)
{
    struct thr_arg *a = p;
    for (int phase = 0; phase < ATTN_PHASES; phase++) {
        attn_paged(a->b, a->work, phase, a->ith, a->nth);
        pthread_barrier_wait(a->bar);
    }
    return NULL;
}

static void test_paged_threads(void **state)
{
    (void)state;
    rng_state = 12;
    for (int it = 0; it < 4; it++) {
        struct tcase tc;
        tc_random(&tc, 2000, 64);
        tc_build(&tc);
        const int nth = it % 2 ? 2 : 3;
        void *work = folio_aligned_alloc(64, attn_paged_work_size(&tc.b, nth));
        assert_non_null(work);
        fill_nan(tc.out, tc_nout(&tc));
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, (unsigned)nth);
        pthread_t tid[3];
        struct thr_arg args[3];
        for (int i = 0; i < nth; i++) {
            args[i] = (struct thr_arg){&tc.b, work, i, nth, &bar};
            assert_int_equal(pthread_create(&tid[i], NULL, thr_main, &args[i]), 0);
        }
        for (int i = 0; i < nth; i++)
            pthread_join(tid[i], NULL);
        pthread_barrier_destroy(&bar);
        double e = norm_err(tc.out, tc.want, tc_nout(&tc));
        if (!(e <= 1e-5))
            fail_msg("threads: case %d err %g", it, e);
        folio_free(work);
        tc_free(&tc);
    }
}

/* pager_kv_row_put / _get for every dtype: the q8 row error is at most
 * half a step (max|x| / 254) and its largest element is exact; bf16 rounds
 * to nearest even; a zero row stays zero; a NaN row reads NaN; the pager
 * sizes q8 tiles as documented and bytes per token shrink 2x / ~3.8x. */
static void test_kv_rows(void **state)
{
    (void)state;
    rng_state = 15;
    for (int dt = 0; dt < N_DT; dt++) {
        struct pager_config cfg = {.num_blocks = 3,
                                   .block_size = 16,
                                   .n_layers = 2,
                                   .n_kv_heads = 2,
                                   .head_dim = 64,
                                   .dtype = all_dt[dt]};
        pager_t *pg;
        assert_int_equal(pager_init(&pg, &cfg), 0);
        struct pager_kv_view kv;
        pager_kv_view(pg, &kv);
        assert_int_equal(kv.head_stride, pager_kv_tile_elems(all_dt[dt], 16, 64));
        assert_int_equal(kv.block_stride, 2 * kv.head_stride);
        assert_int_equal(kv.v_offset, 3 * kv.block_stride);
        struct pager_stats st;
        pager_stats_get(pg, &st);
        assert_int_equal((int64_t)st.bytes_per_block,
                         16 * pager_kv_bytes_per_token(all_dt[dt], 2, 2, 64));
        float x[64], y[64];
        for (int it = 0; it < 200; it++) {
            const float mag = it % 3 == 0 ? 1e-3f : it % 3 == 1 ? 1.0f : 300.0f;
            float amax = 0;
            for (int e = 0; e < 64; e++) {
                x[e] = rng_unit() * mag;
                amax = fabsf(x[e]) > amax ? fabsf(x[e]) : amax;
            }
            const int32_t blk = rng_int(0, 2), layer = rng_int(0, 1), kvs = rng_int(0, 1);
            const int32_t h = rng_int(0, 1), slot = rng_int(0, 15);
            pager_kv_row_put(&kv, blk, layer, kvs, h, slot, x);
            pager_kv_row_get(&kv, blk, layer, kvs, h, slot, y);
            for (int e = 0; e < 64; e++) {
                switch (all_dt[dt]) {
                case FOLIO_F32:
                    assert_true(x[e] == y[e]);
                    break;
                case FOLIO_F16:
                    assert_true(y[e] == folio_f16_to_f32(folio_f32_to_f16(x[e])));
                    break;
                case FOLIO_BF16:
                    assert_true(fabsf(y[e] - x[e]) <= fabsf(x[e]) * 0x1p-8f);
                    break;
                case FOLIO_Q8:
                    assert_true(fabsf(y[e] - x[e]) <= amax / 254.0f * 1.0001f);
                    if (fabsf(x[e]) == amax)
                        assert_true(fabsf(fabsf(y[e]) - amax) <= amax * 1e-6f);
                    break;
                }
            }
        }
        for (int e = 0; e < 64; e++)
            x[e] = 0;
        pager_kv_row_put(&kv, 1, 1, 1, 1, 15, x);
        pager_kv_row_get(&kv, 1, 1, 1, 1, 15, y);
        for (int e = 0; e < 64; e++)
            assert_true(y[e] == 0);
        x[5] = NAN;
        pager_kv_row_put(&kv, 2, 0, 0, 0, 0, x);
        pager_kv_row_get(&kv, 2, 0, 0, 0, 0, y);
        assert_true(isnan(y[5]));
        pager_free(pg);
    }
    /* bf16: round to nearest even at the halfway point, NaN stays NaN */
    assert_int_equal(folio_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);           /* tie, even stays */
    assert_int_equal(folio_f32_to_bf16(1.0f + 0x1p-7f + 0x1p-8f), 0x3f82); /* tie, odd rounds up */
    assert_int_equal(folio_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-12f), 0x3f81);
    assert_true(isnan(folio_bf16_to_f32(folio_f32_to_bf16(NAN))));
    /* bytes per token: f16 / bf16 half of f32, q8 (64 + 4) / 256 of it */
    const int64_t f32 = pager_kv_bytes_per_token(FOLIO_F32, 12, 4, 64);
    assert_int_equal(pager_kv_bytes_per_token(FOLIO_F16, 12, 4, 64) * 2, f32);
    assert_int_equal(pager_kv_bytes_per_token(FOLIO_BF16, 12, 4, 64) * 2, f32);
    assert_int_equal(pager_kv_bytes_per_token(FOLIO_Q8, 12, 4, 64) * 256, f32 * 68);
    enum folio_dtype t;
    assert_int_equal(folio_dtype_parse("q8", &t), 0);
    assert_int_equal(t, FOLIO_Q8);
    assert_int_equal(folio_dtype_parse("bf16", &t), 0);
    assert_int_equal(t, FOLIO_BF16);
    assert_int_equal(folio_dtype_parse("q4", &t), -EINVAL);
}

/* attn_force_isa: names, refusals. */
static void test_force_isa(void **state)
{
    (void)state;
    assert_int_equal(attn_force_isa("portable"), 0);
    assert_string_equal(attn_isa_name(), "portable");
    assert_int_equal(attn_force_isa("sse9"), -EINVAL);
    assert_int_equal(attn_force_isa("auto"), 0);
    print_message("best isa here: %s\n", attn_isa_name());
}

/* Runs the batch in a child process: 1 when it returns, 0 when it aborts
 * (any other end fails the test). */
static int runs_ok(const struct tcase *tc, void *work)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        freopen("/dev/null", "w", stderr);
        attn_paged(&tc->b, work, 0, 0, 1);
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (WIFSIGNALED(st)) {
        assert_int_equal(WTERMSIG(st), SIGABRT);
        return 0;
    }
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return 1;
}

/* A block id out of range aborts at entry (always-on check). */
static void test_paged_bad_block_aborts(void **state)
{
    (void)state;
    rng_state = 9;
    struct tcase tc;
    memset(&tc, 0, sizeof(tc));
    tc.bs = 8, tc.hd = 64, tc.group = 2, tc.n_kv = 1, tc.dt = FOLIO_F32;
    tc.n_seqs = 1, tc.p0[0] = 20, tc.n_q[0] = 1;
    tc_build(&tc);
    size_t ws = attn_paged_work_size(&tc.b, 1);
    void *work = folio_aligned_alloc(64, ws);
    assert_non_null(work);
    tc.tables[0][2] = tc.kv.num_blocks; /* one past the end */
    assert_false(runs_ok(&tc, work));
    folio_free(work);
    tc_free(&tc);
}

/* Strides under which two tiles would share bytes abort at entry, in any
 * stride order; the four packed layouts pass the same check. */
static void test_paged_overlapping_tiles_abort(void **state)
{
    (void)state;
    rng_state = 10;
    struct tcase tc;
    memset(&tc, 0, sizeof(tc));
    tc.bs = 8, tc.hd = 64, tc.group = 2, tc.n_kv = 2, tc.dt = FOLIO_F16;
    tc.n_seqs = 1, tc.p0[0] = 20, tc.n_q[0] = 1;
    tc_build(&tc);
    void *work = folio_aligned_alloc(64, attn_paged_work_size(&tc.b, 1));
    assert_non_null(work);
    const struct pager_kv_view good = tc.kv;
    const size_t tile = pager_kv_tile_elems(tc.dt, tc.bs, tc.hd), nb = (size_t)good.num_blocks;
    struct pager_kv_view *kv = &tc.kv;
    /* head-major, block-major, layer-major and the pager's layer-major with
     * K and V apart, exactly packed: run */
    kv->block_stride = tile, kv->head_stride = nb * tile, kv->v_offset = 2 * nb * tile;
    kv->layer_stride = 4 * nb * tile;
    assert_true(runs_ok(&tc, work));
    kv->head_stride = tile, kv->v_offset = 2 * tile, kv->layer_stride = 4 * tile;
    kv->block_stride = 4 * tile * (size_t)kv->n_layers;
    assert_true(runs_ok(&tc, work));
    kv->block_stride = 4 * tile, kv->layer_stride = 4 * tile * nb;
    assert_true(runs_ok(&tc, work));
    kv->block_stride = 2 * tile, kv->v_offset = 2 * tile * nb, kv->layer_stride = 4 * tile * nb;
    assert_true(runs_ok(&tc, work));
    /* head-major with the heads' runs one tile too close: head 0's last
     * block is head 1's first */
    kv->block_stride = tile, kv->head_stride = (nb - 1) * tile, kv->v_offset = 2 * nb * tile;
    kv->layer_stride = 4 * nb * tile;
    assert_false(runs_ok(&tc, work));
    /* K and V on the same bytes */
    *kv = good;
    kv->v_offset = 0;
    assert_false(runs_ok(&tc, work));
    /* a tile shorter than its rows (block-major, heads half a tile apart) */
    kv->head_stride = tile / 2, kv->v_offset = 2 * tile, kv->layer_stride = 4 * tile;
    kv->block_stride = 4 * tile * (size_t)kv->n_layers;
    assert_false(runs_ok(&tc, work));
    *kv = good;
    folio_free(work);
    tc_free(&tc);
}

int main(void)
{
    const char *sh = getenv("FOLIO_TEST_SHORT");
    g_short = sh && *sh && strcmp(sh, "0") != 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_force_isa),
        cmocka_unit_test(test_kv_rows),
        cmocka_unit_test(test_ref_vs_dense),
        cmocka_unit_test(test_q8_quantize_q),
        cmocka_unit_test(test_q8_quantize_q_plain),
        cmocka_unit_test(test_paged_q8_exact_q),
        cmocka_unit_test(test_paged_many_kv_heads),
        cmocka_unit_test(test_paged_edges),
        cmocka_unit_test(test_paged_equal_scores),
        cmocka_unit_test(test_paged_huge_scores),
        cmocka_unit_test(test_paged_rising_scores),
        cmocka_unit_test(test_paged_random),
        cmocka_unit_test(test_paged_single_long_decode),
        cmocka_unit_test(test_paged_long),
        cmocka_unit_test(test_paged_deterministic),
        cmocka_unit_test(test_paged_real_pager),
        cmocka_unit_test(test_paged_partition),
        cmocka_unit_test(test_paged_threads),
        cmocka_unit_test(test_work_bound),
        cmocka_unit_test(test_paged_bad_block_aborts),
        cmocka_unit_test(test_paged_overlapping_tiles_abort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
