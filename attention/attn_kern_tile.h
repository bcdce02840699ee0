/*
 * attention/attn_kern_tile.h — the prefill path of the inner kernel: a
 * tile of query vectors against each chunk of keys as two small matrix
 * products, the query vectors in vector lanes.  Included by
 * attn_kern_body.h (after its helpers), so compiled once per instruction
 * set with that file's VW.
 *
 * Taken (KERN_NAME) by pieces of one KV head whose rows bring at least VW
 * query vectors (a prefill chunk), unless the batch asks for batch
 * invariance: the per-row path (kern_body) sums a score's products in
 * another order, and a row of a prefill must compute the same whether the
 * scheduler cut its chunk here or elsewhere.
 *
 * Tile: nr rows x group query heads = nq <= QT query vectors (QT = 3 VW
 * lanes), query vector qi = row * group + head, lanes [0, nq) of NV <= 3
 * vectors.  Scratch (attn__tile_scratch_floats, QT <= ATTN__QT):
 *
 *   qt[hd][QT]    the tile's queries transposed, times the softmax scale
 *                 (q8: the int8 query of attn_q8_quantize_q as floats, its
 *                 scale in qsc[QT]); lanes past nq are 0
 *   acc[QT][hd]   unnormalised outputs
 *   st[KCT][QT]   the chunk's scores, key-major, then their weights p
 *   m, l, cr, qsc [QT] running max, sum, the chunk's rescale, q8 scale
 *   rpos[QT]      each lane's row position (int32)
 *   kw, vw [KCT][hd] the chunk's K and V rows widened to f32 (every
 *                 dtype but f32, which is read in place)
 *   ksc, vsc [KCT] q8: the chunk's K and V row scales
 *   qq[hd]        q8: one query quantized
 *
 * Per chunk of KCT keys (half kern_body's KC; a grid from c0 as there,
 * chunk_rows across blocks):
 *   scores   st[k][lane] = sum_d K[k][d] * qt[d][lane]: KS keys x NV
 *            vectors of accumulators, each K element broadcast once and
 *            multiplied into all NV vectors; no horizontal sums.  Masked
 *            to -inf by position (causal, window, past the chunk) lane by
 *            lane.  q8: times qsc (per lane) then K's row scale, in the
 *            per-row path's order, and the int8 products sum exactly in
 *            f32 (|sum| < 2^24 for hd <= 512), so q8 scores equal the
 *            per-row path's bit for bit.
 *   softmax  vertical: each lane's max, corrections and sum over the
 *            chunk's keys without crossing lanes; p written back over the
 *            scores (q8: times V's row scale; l sums p alone).  m is kept
 *            while no lane's score passes it by more than SOFTMAX_LAZY_T
 *            (kern_body), as in the per-row path.
 *   values   acc[qi] = acc[qi] * cr[qi] + sum_k p[k][qi] * V[k]: VG query
 *            vectors x CBV vectors of head_dim in registers, each V vector
 *            loaded once per VG query vectors.
 * Keys a lane does not see get p = 0; the rows they read are positions
 * below the tile's last row, written before attention runs, so 0 * V is 0.
 */

#define QT  (3 * VW)  /* lanes of a tile */
#define KCT ATTN__KCT /* keys per chunk */
#if VW >= 16
#define KS 8 /* keys per step of the score loop */
#define VG 6 /* query vectors per pass of the values loop */
#else
#define KS 4
#define VG 2
#endif
#define CBV 4 /* head_dim vectors per pass of the values loop */

/* st[k][lane] for the KS keys from kb: NV vectors of lanes per key. */
AI void tile_scores(const float *qt, const float *const *krow, int32_t kb, float *st, int hd,
                    const int NV)
{
    vf s[KS][3];
    UNROLL
    for (int k = 0; k < KS; k++)
        UNROLL
    for (int v = 0; v < NV; v++)
        s[k][v] = vsplat(0.0f);
    for (int d = 0; d < hd; d++) {
        vf q[3];
        UNROLL
        for (int v = 0; v < NV; v++)
            q[v] = vload(qt + (size_t)d * QT + v * VW);
        UNROLL
        for (int k = 0; k < KS; k++) {
            const vf b = vsplat(krow[kb + k][d]);
            UNROLL
            for (int v = 0; v < NV; v++)
                s[k][v] += b * q[v];
        }
    }
    UNROLL
    for (int k = 0; k < KS; k++)
        UNROLL
    for (int v = 0; v < NV; v++)
        vstore(st + (size_t)(kb + k) * QT + v * VW, s[k][v]);
}

/* acc[qi + g] = acc[qi + g] * cr[qi + g] + sum_{k < n} p[k][qi + g] V[k]
 * for g < G. */
AI void tile_values(const float *st, const float *cr, float *acc, int32_t qi,
                    const float *const *vrow, int32_t n, const int hd, const int G)
{
    const int nv = hd / VW;
    for (int c0 = 0; c0 < nv; c0 += CBV) {
        vf a[VG][CBV];
        UNROLL
        for (int g = 0; g < G; g++)
            UNROLL
        for (int c = 0; c < CBV; c++)
            a[g][c] = c0 + c < nv
                          ? vload(acc + (size_t)(qi + g) * hd + (c0 + c) * VW) * vsplat(cr[qi + g])
                          : vsplat(0.0f);
        for (int32_t k = 0; k < n; k++) {
            const float *vr = vrow[k];
            const float *pk = st + (size_t)k * QT + qi;
            UNROLL
            for (int c = 0; c < CBV; c++) {
                if (c0 + c >= nv)
                    break;
                const vf x = vload(vr + (c0 + c) * VW);
                UNROLL
                for (int g = 0; g < G; g++)
                    a[g][c] += vsplat(pk[g]) * x;
            }
        }
        UNROLL
        for (int g = 0; g < G; g++)
            UNROLL
        for (int c = 0; c < CBV; c++)
            if (c0 + c < nv)
                vstore(acc + (size_t)(qi + g) * hd + (c0 + c) * VW, a[g][c]);
    }
}

#pragma GCC diagnostic push
#ifndef __clang__ /* clang has no such warning */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
AI void kern_tile(const struct attn__piece *pc, const int hd, const int dt, const int NV)
{
    const int nv = hd / VW;
    const int32_t group = pc->group;
    const int32_t rt = QT / group; /* rows per tile */
    float *qt = pc->scratch;
    float *acc = qt + ATTN__ALIGN_F((size_t)hd * ATTN__QT);
    float *st = acc + ATTN__ALIGN_F((size_t)hd * ATTN__QT);
    float *m = st + ATTN__ALIGN_F((size_t)ATTN__KCT * ATTN__QT);
    float *l = m + ATTN__ALIGN_F(ATTN__QT);
    float *cr = l + ATTN__ALIGN_F(ATTN__QT);
    float *qsc = cr + ATTN__ALIGN_F(ATTN__QT);
    int32_t *rpos = (int32_t *)(qsc + ATTN__ALIGN_F(ATTN__QT));
    float *kw = (float *)rpos + ATTN__ALIGN_F(ATTN__QT);
    float *vw = kw + ATTN__ALIGN_F((size_t)ATTN__KCT * hd);
    float *ksc = vw + ATTN__ALIGN_F((size_t)ATTN__KCT * hd);
    float *vsc = ksc + ATTN__ALIGN_F(ATTN__KCT);
    int8_t *qq = (int8_t *)(vsc + ATTN__ALIGN_F(ATTN__KCT));
    const float scale = pc->scale;

    for (int32_t r = 0; r < pc->n_rows; r += rt) {
        const int32_t nr = FOLIO_MIN(rt, pc->n_rows - r), nq = nr * group;
        const int32_t pos0r = pc->pos0 + r;
        for (int32_t qi = 0; qi < QT; qi++) {
            m[qi] = -INFINITY;
            l[qi] = 0;
            cr[qi] = 0;
            qsc[qi] = 0;
            rpos[qi] = qi < nq ? pos0r + qi / group : -1; /* padding lanes see nothing */
            if (qi >= NV * VW)
                continue;
            memset(acc + (size_t)qi * hd, 0, sizeof(float) * (size_t)hd);
            if (qi >= nq) {
                for (int d = 0; d < hd; d++)
                    qt[(size_t)d * QT + qi] = 0;
                continue;
            }
            const float *qv =
                pc->q + (size_t)(r + qi / group) * pc->q_stride + (size_t)(qi % group) * hd;
            if (dt == FOLIO_Q8) {
                qsc[qi] = attn_q8_quantize_q(qv, hd, scale, qq);
                for (int d = 0; d < hd; d++)
                    qt[(size_t)d * QT + qi] = (float)qq[d];
            } else {
                for (int d = 0; d < hd; d++)
                    qt[(size_t)d * QT + qi] = qv[d] * scale;
            }
        }
        vi rp[3];
        UNROLL
        for (int v = 0; v < NV; v++)
            for (int i = 0; i < VW; i++)
                rp[v][i] = rpos[v * VW + i];
        const int32_t cend = FOLIO_MIN(pc->c1, pos0r + nr);
        int32_t start, lo_ok;
        tile_start(pc, pos0r, KCT, &start, &lo_ok);
        const char *rows[KCT], *frows[KCT];
        struct kv_run runs[KCT], fruns[KCT];
        const float *krow[KCT], *vrow[KCT];
        int32_t n;
        for (int32_t pos = start; pos < cend; pos += n) {
            n = FOLIO_MIN(KCT, cend - pos);
            const int nrun = chunk_rows(pc, pos, n, lo_ok, rows, runs);
            const int32_t pp = pos + PF_CHUNKS * KCT;
            if (pp < cend) { /* the rows PF_CHUNKS chunks ahead */
                const int32_t fnp = FOLIO_MIN(KCT, cend - pp);
                (void)chunk_rows(pc, pp, fnp, lo_ok, frows, fruns);
                for (int32_t k = 0; k < fnp; k++)
                    for (size_t off = 0; off < pc->row_bytes; off += 64) {
                        __builtin_prefetch(frows[k] + off, 0, PF_HINT);
                        __builtin_prefetch(frows[k] + pc->v_bytes + off, 0, PF_HINT);
                    }
            }
            for (int32_t k = 0; k < KCT; k++) {
                const char *kr = rows[FOLIO_MIN(k, n - 1)];
                if (dt == FOLIO_F32) {
                    krow[k] = (const float *)(const void *)kr;
                    vrow[k] = (const float *)(const void *)(kr + pc->v_bytes);
                } else if (k < n) {
                    UNROLL
                    for (int c = 0; c < nv; c++) {
                        vstore(kw + (size_t)k * hd + c * VW, kv_load(kr, c * VW, dt));
                        vstore(vw + (size_t)k * hd + c * VW, kv_load(kr + pc->v_bytes, c * VW, dt));
                    }
                    krow[k] = kw + (size_t)k * hd;
                    vrow[k] = vw + (size_t)k * hd;
                } else {
                    krow[k] = krow[n - 1];
                    vrow[k] = vrow[n - 1];
                }
            }
            if (dt == FOLIO_Q8) {
                for (int i = 0; i < nrun; i++) {
                    memcpy(ksc + runs[i].k0, runs[i].sc, sizeof(float) * (size_t)runs[i].len);
                    memcpy(vsc + runs[i].k0, runs[i].sc + pc->v_bytes,
                           sizeof(float) * (size_t)runs[i].len);
                }
                for (int32_t k = n; k < KCT; k++)
                    ksc[k] = vsc[k] = 0;
            }

            /* scores, masked by position */
            for (int32_t kb = 0; kb < n; kb += KS)
                tile_scores(qt, krow, kb, st, hd, NV);
            for (int32_t k = 0; k < n; k++) {
                const vi kp = vsplat_i(pos + k);
                UNROLL
                for (int v = 0; v < NV; v++) {
                    float *sp = st + (size_t)k * QT + v * VW;
                    vi ok = kp <= rp[v];
                    if (pc->window > 0)
                        ok &= kp > rp[v] - pc->window;
                    vf sc = vload(sp);
                    if (dt == FOLIO_Q8)
                        sc = sc * vload(qsc + v * VW) * ksc[k];
                    vstore(sp, (vf)(((vi)sc & ok) | ((vi)vsplat(-INFINITY) & ~ok)));
                }
            }
            /* softmax, lane by lane */
            UNROLL
            for (int v = 0; v < NV; v++) {
#if SOFTMAX_LAZY
                /* as kern_body's softmax_heads: m kept while no lane's
                 * score is more than SOFTMAX_LAZY_T above it, so the
                 * exps need not wait for the chunk's maximum (two chains
                 * of maxes here).  A lane with m = -inf passes only if it
                 * sees no key in this chunk either (-inf - -inf is NaN,
                 * not above), and takes p = exp(-inf - 0) = 0. */
                {
                    const vf mo = vload(m + v * VW);
                    vf mx0 = vsplat(-INFINITY), mx1 = mx0;
                    int32_t k = 0;
                    for (; k + 1 < n; k += 2) {
                        mx0 = vmax(mx0, vload(st + (size_t)k * QT + v * VW));
                        mx1 = vmax(mx1, vload(st + (size_t)(k + 1) * QT + v * VW));
                    }
                    if (k < n)
                        mx0 = vmax(mx0, vload(st + (size_t)k * QT + v * VW));
                    if (!vany_gt(vmax(mx0, mx1) - mo, SOFTMAX_LAZY_T)) {
                        const vf mr = (vf)((vi)mo & ~(mo == vsplat(-INFINITY)));
                        vf sum = vsplat(0.0f);
                        for (k = 0; k < n; k++) {
                            float *sp = st + (size_t)k * QT + v * VW;
                            const vf p = vexp_neg(vload(sp) - mr);
                            vstore(sp, dt == FOLIO_Q8 ? p * vsc[k] : p);
                            sum += p;
                        }
                        vstore(l + v * VW, vload(l + v * VW) + sum);
                        vstore(cr + v * VW, vsplat(1.0f));
                        continue;
                    }
                }
#endif
                vf mx = vload(st + v * VW);
                for (int32_t k = 1; k < n; k++)
                    mx = vmax(mx, vload(st + (size_t)k * QT + v * VW));
                const vf mo = vload(m + v * VW);
                const vf mn = vmax(mo, mx);
                const vf mns = (vf)((vi)mn & ~(mn == vsplat(-INFINITY)));
                const vf corr = vexp_neg(mo - mns);
                vf sum = vsplat(0.0f);
                for (int32_t k = 0; k < n; k++) {
                    float *sp = st + (size_t)k * QT + v * VW;
                    const vf p = vexp_neg(vload(sp) - mns);
                    vstore(sp, dt == FOLIO_Q8 ? p * vsc[k] : p);
                    sum += p;
                }
                vstore(l + v * VW, vload(l + v * VW) * corr + sum);
                vstore(m + v * VW, mn);
                vstore(cr + v * VW, corr);
            }
            /* values */
            int32_t qi = 0;
            for (; qi + VG <= nq; qi += VG)
                tile_values(st, cr, acc, qi, vrow, n, hd, VG);
            for (; qi < nq; qi++)
                tile_values(st, cr, acc, qi, vrow, n, hd, 1);
        }

        tile_results(pc, r, nq, group, m, l, acc, hd);
    }
}
#pragma GCC diagnostic pop

/* Whether the tile path takes pc: one KV head, a group that fits a tile,
 * at least VW query vectors, the batch not batch-invariant. */
AI bool tile_takes(const struct attn__piece *pc)
{
    return pc->tile_ok && pc->n_kvh == 1 && pc->group <= QT && pc->n_rows * pc->group >= VW &&
           pc->hd % VW == 0;
}

/* NV: the vectors of lanes the piece's largest tile fills (3, fewer for a
 * piece of few rows); a constant head_dim 64 (the small preset's) where
 * the ISA has constant instances (KERN_CONST_HD, attn_kern_body.h); other
 * head dims take the run-time loop, which keeps this file's compile time
 * in check: every instance is built for each ISA and build.  Each
 * instance is a function of its own (TILE_FNS, attn_kern_body.h). */
#define TILE_NV(pc) ((int)((FOLIO_MIN(QT / (pc)->group, (pc)->n_rows) * (pc)->group + VW - 1) / VW))
