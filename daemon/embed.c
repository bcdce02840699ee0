/*
 * daemon/embed.c — pooling, normalization and the JSON of embeddings (see
 * embed.h).  Pure functions of their arguments: no server state.
 */
#include "embed.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"
#include "folio/model.h"

const char *srv_pooling_name(int pooling)
{
    switch (pooling) {
    case SRV_POOL_MEAN:
        return "mean";
    case SRV_POOL_CLS:
        return "cls";
    case SRV_POOL_LAST:
        return "last";
    default:
        return "?";
    }
}

void srv_pooling_range(int pooling, int32_t n, int32_t *lo, int32_t *hi)
{
    *lo = pooling == SRV_POOL_LAST ? n - 1 : 0;
    *hi = pooling == SRV_POOL_CLS ? 1 : n;
}

int srv_emb_acc_init(struct srv_emb_acc *a, int32_t dim)
{
    a->sum = folio_calloc((size_t)dim, sizeof(double));
    a->dim = dim;
    a->rows = 0;
    return a->sum ? 0 : -ENOMEM;
}

void srv_emb_acc_free(struct srv_emb_acc *a)
{
    folio_free(a->sum);
    a->sum = NULL;
}

void srv_emb_acc_add(struct srv_emb_acc *a, const float *rows, int32_t n, int32_t dim)
{
    if (!a->sum || dim != a->dim)
        return;
    for (int32_t r = 0; r < n; r++)
        for (int32_t k = 0; k < dim; k++)
            a->sum[k] += (double)rows[(size_t)r * (size_t)dim + (size_t)k];
    a->rows += n;
}

int32_t srv_emb_norm(const struct srv_emb_params *ep)
{
    if (ep->norm_set)
        return ep->norm;
    return ep->normalize ? SRV_EMB_NORM_EUCLID : SRV_EMB_NORM_NONE;
}

int32_t srv_emb_finish(const struct srv_emb_acc *a, const struct srv_emb_params *ep, float *out)
{
    int32_t n = ep->dims > 0 && ep->dims < a->dim ? ep->dims : a->dim;
    const double inv_rows = a->rows > 0 && a->sum ? 1.0 / a->rows : 0.0;
    const double *v = a->sum; /* scaled by inv_rows as read */
    if (!v)
        n = 0;
    const int32_t p = srv_emb_norm(ep);
    double norm = 1.0;
    if (p == SRV_EMB_NORM_MAXABS) {
        double m = 0;
        for (int32_t k = 0; k < n; k++)
            m = fmax(m, fabs(v[k] * inv_rows));
        norm = m / 32760.0;
    } else if (p == SRV_EMB_NORM_EUCLID) {
        double ss = 0;
        for (int32_t k = 0; k < n; k++)
            ss += v[k] * inv_rows * (v[k] * inv_rows);
        norm = sqrt(ss);
    } else if (p >= 1) {
        double s = 0;
        for (int32_t k = 0; k < n; k++)
            s += pow(fabs(v[k] * inv_rows), p);
        norm = pow(s, 1.0 / p);
    }
    const double scale = norm > 0 ? inv_rows / norm : 0.0;
    for (int32_t k = 0; k < n; k++)
        out[k] = (float)(v[k] * scale);
    return n;
}

double srv_rerank_score(const struct srv_emb_acc *a, const float *w, const float *b, int32_t n_cls,
                        float *tmp)
{
    const struct srv_emb_params raw = {.normalize = false};
    int32_t n = srv_emb_finish(a, &raw, tmp);
    if (n != a->dim || n_cls < 1 || !w)
        return NAN;
    return model_rank_score(w, b, n_cls, n, tmp);
}

int32_t srv_classify_probs(const struct srv_emb_acc *a, const float *w, const float *b,
                           int32_t n_cls, float *tmp, double *probs)
{
    const struct srv_emb_params raw = {.normalize = false};
    int32_t n = srv_emb_finish(a, &raw, tmp);
    if (n != a->dim || n_cls < 1 || !w)
        return -1;
    return model_cls_probs(w, b, n_cls, n, tmp, probs);
}

static void base64(struct folio_buf *b, const unsigned char *p, size_t n)
{
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char q[4];
    for (size_t i = 0; i < n; i += 3) {
        uint32_t x = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            x |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            x |= p[i + 2];
        q[0] = A[x >> 18 & 63];
        q[1] = A[x >> 12 & 63];
        q[2] = i + 1 < n ? A[x >> 6 & 63] : '=';
        q[3] = i + 2 < n ? A[x & 63] : '=';
        folio_buf_append(b, q, 4);
    }
}

void srv_emb_json(struct folio_buf *b, const float *v, int32_t n, bool b64)
{
    if (b64) {
        unsigned char bytes[4 * 48];
        folio_buf_puts(b, "\"");
        /* 48 values at a time: 192 bytes, whole groups of 3 but the last */
        for (int32_t i = 0; i < n;) {
            int32_t m = FOLIO_MIN(n - i, 48);
            for (int32_t k = 0; k < m; k++) {
                uint32_t u;
                memcpy(&u, &v[i + k], 4);
                for (int j = 0; j < 4; j++)
                    bytes[4 * k + j] = (unsigned char)(u >> (8 * j));
            }
            base64(b, bytes, (size_t)m * 4);
            i += m;
        }
        folio_buf_puts(b, "\"");
        return;
    }
    folio_buf_puts(b, "[");
    for (int32_t k = 0; k < n; k++) {
        if (k)
            folio_buf_puts(b, ",");
        if (!isfinite(v[k])) {
            folio_buf_puts(b, "null");
            continue;
        }
        /* the shortest of %.6g .. %.9g that reads back as the same float */
        char t[32];
        for (int prec = 6; prec <= 9; prec++) {
            snprintf(t, sizeof(t), "%.*g", prec, (double)v[k]);
            if (prec == 9 || strtof(t, NULL) == v[k])
                break;
        }
        folio_buf_puts(b, t);
    }
    folio_buf_puts(b, "]");
}
