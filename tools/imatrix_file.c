/*
 * tools/imatrix_file.c — an importance matrix from its GGUF file
 * (imatrix_file.h).  Entries are looked up by a linear scan of names: a
 * model has a few hundred matrices, looked up once each.
 */
#include "imatrix_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/gguf.h"

static const char SUM_SFX[] = ".in_sum2", CNT_SFX[] = ".counts";

void imatrix_free(struct imatrix *im)
{
    for (int32_t i = 0; i < im->n; i++) {
        free(im->names[i]);
        free(im->mean[i]);
    }
    free(im->names);
    free(im->mean);
    free(im->len);
    memset(im, 0, sizeof(*im));
}

/* Loads entry `name` (the matrix's; the sums tensor is si) into slot i. */
static int load_entry(gguf_file_t *f, const char *path, const char *name, int64_t si,
                      struct imatrix *im, char *err, size_t errlen)
{
    char cname[320];
    snprintf(cname, sizeof(cname), "%s%s", name, CNT_SFX);
    const int64_t ci = gguf_find_tensor(f, cname);
    if (ci < 0) {
        snprintf(err, errlen, "%s: %s%s has no %s", path, name, SUM_SFX, cname);
        return -EINVAL;
    }
    struct gguf_tensor_info s, c;
    gguf_tensor_get(f, si, &s);
    gguf_tensor_get(f, ci, &c);
    int64_t ns = 1, nc = 1;
    for (int32_t d = 0; d < s.n_dims; d++)
        ns *= s.ne[d];
    for (int32_t d = 0; d < c.n_dims; d++)
        nc *= c.ne[d];
    if (s.type != GGUF_TENSOR_F32 || c.type != GGUF_TENSOR_F32) {
        snprintf(err, errlen, "%s: %s: sums and counts must be F32", path, name);
        return -EINVAL;
    }
    if (nc != 1 || ns != s.ne[0]) {
        snprintf(err, errlen, "%s: %s: an entry of several matrices (experts) is not supported",
                 path, name);
        return -EINVAL;
    }
    const float count = ((const float *)c.data)[0];
    if (!(count > 0)) {
        snprintf(err, errlen, "%s: %s: a count of %g (no activations seen)", path, name,
                 (double)count);
        return -EINVAL;
    }
    const int32_t i = im->n;
    im->names[i] = strdup(name);
    im->mean[i] = malloc(sizeof(float) * (size_t)ns);
    if (!im->names[i] || !im->mean[i]) {
        free(im->names[i]);
        free(im->mean[i]);
        snprintf(err, errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    const float *sums = s.data;
    for (int64_t k = 0; k < ns; k++)
        im->mean[i][k] = sums[k] / count;
    im->len[i] = ns;
    im->n++;
    return 0;
}

int imatrix_load(const char *path, struct imatrix *im, char *err, size_t errlen)
{
    memset(im, 0, sizeof(*im));
    gguf_file_t *f = NULL;
    int rc = gguf_open(path, &f, err, errlen);
    if (rc < 0)
        return rc;
    const int64_t nt = gguf_n_tensors(f);
    im->names = calloc((size_t)nt + 1, sizeof(char *));
    im->mean = calloc((size_t)nt + 1, sizeof(float *));
    im->len = calloc((size_t)nt + 1, sizeof(int64_t));
    if (!im->names || !im->mean || !im->len) {
        snprintf(err, errlen, "%s: out of memory", path);
        rc = -ENOMEM;
        goto out;
    }
    const int64_t k = gguf_find_key(f, "imatrix.chunk_count");
    uint64_t chunks = 0;
    if (k >= 0 && gguf_get_u64(f, k, &chunks) == 0)
        im->chunks = (int32_t)chunks;
    for (int64_t t = 0; t < nt; t++) {
        struct gguf_tensor_info ti;
        gguf_tensor_get(f, t, &ti);
        const size_t len = strlen(ti.name), sl = strlen(SUM_SFX);
        if (len <= sl || strcmp(ti.name + len - sl, SUM_SFX))
            continue;
        char name[300];
        snprintf(name, sizeof(name), "%.*s", (int)(len - sl), ti.name);
        if ((rc = load_entry(f, path, name, t, im, err, errlen)) < 0)
            goto out;
    }
    if (im->n == 0) {
        snprintf(err, errlen, "%s: no importance matrix entries (NAME.in_sum2 tensors)", path);
        rc = -EINVAL;
    }
out:
    gguf_close(f);
    if (rc < 0)
        imatrix_free(im);
    return rc;
}

const float *imatrix_find(const struct imatrix *im, const char *name, int64_t cols)
{
    for (int32_t i = 0; i < im->n; i++)
        if (!strcmp(im->names[i], name))
            return im->len[i] == cols ? im->mean[i] : NULL;
    return NULL;
}
