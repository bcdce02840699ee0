/*
 * tests/test_gguf_model.c — the synthetic vocabulary (model/vocab_synth.c),
 * the llama loader (model/loader.c) and the synthetic model writer
 * (model/gen.c).
 *
 * Vocabulary: exact size, special/byte layout, no duplicates, every piece
 * reachable by one merge of two pieces, determinism, and a reference
 * SentencePiece BPE tokenizer (written here) that must turn ordinary
 * English into mostly whole words.
 * Loader: hand-built files whose every element is known (F32, F16, BF16,
 * Q8_0 encode the same values exactly) check the Q|K|V and gate|up fusion
 * and tied output; broken files (missing tensor, wrong shape, wrong
 * architecture, missing or inconsistent keys, unsupported tensor type)
 * fail with a message naming the file and the culprit; allocation failures
 * leak nothing.  Generator: `tiny` loads back bit-exactly, the same seed
 * gives the same bytes and another seed different bytes, --vocab copies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define TEST_TMP_NAME "folio_test_gguf_model"
#include "test_tmp.h"

#include "folio/common.h"
#include "folio/gguf.h"
#include "folio/model.h"
#include "gen.h"
#include "model_internal.h"
#include "quant.h"
#include "vocab_synth.h"

/* ---- vocabulary ------------------------------------------------------ */

struct vindex {
    const struct vocab_synth *v;
    int32_t *sorted; /* ids sorted by piece */
};

static const struct vocab_synth *cmp_vocab;

static int cmp_ids(const void *a, const void *b)
{
    return strcmp(cmp_vocab->tokens[*(const int32_t *)a], cmp_vocab->tokens[*(const int32_t *)b]);
}

static void vindex_init(struct vindex *ix, const struct vocab_synth *v)
{
    ix->v = v;
    ix->sorted = malloc((size_t)v->n_vocab * sizeof(int32_t));
    assert_non_null(ix->sorted);
    for (int32_t i = 0; i < v->n_vocab; i++)
        ix->sorted[i] = i;
    cmp_vocab = v;
    qsort(ix->sorted, (size_t)v->n_vocab, sizeof(int32_t), cmp_ids);
}

/* id of piece s[0..n), or -1 */
static int32_t vindex_find(const struct vindex *ix, const char *s, size_t n)
{
    int32_t lo = 0, hi = ix->v->n_vocab - 1;
    while (lo <= hi) {
        int32_t mid = (lo + hi) / 2;
        const char *p = ix->v->tokens[ix->sorted[mid]];
        int c = strncmp(p, s, n);
        if (c == 0)
            c = p[n] ? 1 : 0;
        if (c == 0)
            return ix->sorted[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static size_t utf8_len(unsigned char c)
{
    return c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
}

/* Reference SentencePiece BPE (the llama "spm" tokenizer): spaces become
 * U+2581 and one is prepended; start from UTF-8 characters; repeatedly
 * merge the adjacent pair whose concatenation is a piece with the highest
 * score (leftmost on ties); unknown characters fall back to byte tokens. */
static int tokenize(const struct vindex *ix, const char *text, int32_t *out, int max_out)
{
    char buf[4096];
    size_t n = 0;
    memcpy(buf, "\xe2\x96\x81", 3);
    n = 3;
    for (const char *p = text; *p && n + 4 < sizeof(buf); p++) {
        if (*p == ' ') {
            memcpy(buf + n, "\xe2\x96\x81", 3);
            n += 3;
        } else {
            buf[n++] = *p;
        }
    }
    size_t start[1024], len[1024];
    int ns = 0;
    for (size_t i = 0; i < n; i += utf8_len((unsigned char)buf[i])) {
        start[ns] = i;
        len[ns] = utf8_len((unsigned char)buf[i]);
        ns++;
    }
    for (;;) {
        int best = -1;
        float best_score = 0;
        for (int i = 0; i + 1 < ns; i++) {
            int32_t id = vindex_find(ix, buf + start[i], len[i] + len[i + 1]);
            if (id >= 0 && (best < 0 || ix->v->scores[id] > best_score)) {
                best = i;
                best_score = ix->v->scores[id];
            }
        }
        if (best < 0)
            break;
        len[best] += len[best + 1];
        memmove(&start[best + 1], &start[best + 2], (size_t)(ns - best - 2) * sizeof(size_t));
        memmove(&len[best + 1], &len[best + 2], (size_t)(ns - best - 2) * sizeof(size_t));
        ns--;
    }
    int nt = 0;
    for (int i = 0; i < ns; i++) {
        int32_t id = vindex_find(ix, buf + start[i], len[i]);
        if (id >= 0) {
            assert_true(nt < max_out);
            out[nt++] = id;
        } else {
            for (size_t j = 0; j < len[i]; j++) {
                assert_true(nt < max_out);
                out[nt++] = 3 + (unsigned char)buf[start[i] + j];
            }
        }
    }
    return nt;
}

static void test_vocab_layout(void **state)
{
    (void)state;
    struct vocab_synth v;
    assert_int_equal(vocab_synth_build(32000, &v), 0);
    assert_int_equal(v.n_vocab, 32000);
    assert_string_equal(v.tokens[0], "<unk>");
    assert_string_equal(v.tokens[1], "<s>");
    assert_string_equal(v.tokens[2], "</s>");
    assert_int_equal(v.types[0], 2);
    assert_int_equal(v.types[1], 3);
    assert_int_equal(v.types[2], 3);
    for (int b = 0; b < 256; b++) {
        char want[8];
        snprintf(want, sizeof(want), "<0x%02X>", b);
        assert_string_equal(v.tokens[3 + b], want);
        assert_int_equal(v.types[3 + b], 6);
    }
    assert_string_equal(v.tokens[259], "\xe2\x96\x81");
    for (int32_t i = 259; i < v.n_vocab; i++) {
        assert_int_equal(v.types[i], 1);
        assert_true(strlen(v.tokens[i]) > 0);
        if (i > 259)
            assert_true(v.scores[i] < v.scores[i - 1]);
    }

    /* no duplicates */
    struct vindex ix;
    vindex_init(&ix, &v);
    for (int32_t i = 1; i < v.n_vocab; i++)
        assert_true(strcmp(v.tokens[ix.sorted[i]], v.tokens[ix.sorted[i - 1]]) != 0);

    /* every multi-character normal piece is one merge of two pieces */
    for (int32_t i = 259; i < v.n_vocab; i++) {
        const char *p = v.tokens[i];
        size_t n = strlen(p);
        if (utf8_len((unsigned char)p[0]) == n)
            continue;
        bool ok = false;
        for (size_t k = utf8_len((unsigned char)p[0]); k < n && !ok;
             k += utf8_len((unsigned char)p[k]))
            ok = vindex_find(&ix, p, k) >= 0 && vindex_find(&ix, p + k, n - k) >= 0;
        if (!ok)
            fail_msg("piece %d '%s' is not reachable by a merge", i, p);
    }

    /* deterministic, and a smaller vocabulary is a prefix of a larger one */
    struct vocab_synth v2, v3;
    assert_int_equal(vocab_synth_build(32000, &v2), 0);
    assert_int_equal(vocab_synth_build(1000, &v3), 0);
    for (int32_t i = 0; i < 32000; i++) {
        assert_string_equal(v.tokens[i], v2.tokens[i]);
        assert_true(v.scores[i] == v2.scores[i] && v.types[i] == v2.types[i]);
        if (i < 1000)
            assert_string_equal(v.tokens[i], v3.tokens[i]);
    }
    vocab_synth_free(&v3);
    assert_int_equal(vocab_synth_build(100, &v3), -EINVAL);
    vocab_synth_free(&v3); /* safe on the zeroed struct */
    vocab_synth_free(&v2);
    free(ix.sorted);
    vocab_synth_free(&v);
}

static void test_vocab_tokenizes_english(void **state)
{
    (void)state;
    struct vocab_synth v;
    assert_int_equal(vocab_synth_build(32000, &v), 0);
    struct vindex ix;
    vindex_init(&ix, &v);
    int32_t tok[1024];

    /* common words are single pieces, capitalised too */
    static const char *const words[] = {"the",         "people",    "government", "because",
                                        "information", "The",       "However",    "Monday",
                                        "computer",    "beautiful", "don't"};
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(words); i++) {
        int n = tokenize(&ix, words[i], tok, 1024);
        char want[64];
        snprintf(want, sizeof(want), "\xe2\x96\x81%s", words[i]);
        if (n != 1 || strcmp(v.tokens[tok[0]], want))
            fail_msg("'%s' -> %d tokens, first '%s'", words[i], n, v.tokens[tok[0]]);
    }

    static const char *const text =
        "The quick brown fox jumps over the lazy dog. Most people in the world would "
        "like to have a better life for their children, and the government should help "
        "them find good work. We found that the new system was able to answer every "
        "question about the history of the city, although some answers were wrong.";
    int words_n = 1;
    for (const char *p = text; *p; p++)
        words_n += *p == ' ';
    int n = tokenize(&ix, text, tok, 1024);
    if (getenv("FOLIO_TEST_VERBOSE")) {
        for (int i = 0; i < n; i++)
            print_message("%s|", v.tokens[tok[i]]);
        print_message("\n%d words -> %d tokens\n", words_n, n);
    }
    /* punctuation adds a few tokens; the words themselves are whole */
    assert_true(n <= words_n + words_n / 5);
    int whole = 0;
    for (int i = 0; i < n; i++)
        whole += !strncmp(v.tokens[tok[i]], "\xe2\x96\x81", 3) && strlen(v.tokens[tok[i]]) > 3;
    assert_true(whole >= words_n * 9 / 10);

    /* a character outside the vocabulary falls back to bytes */
    n = tokenize(&ix, "caf\xc3\xa9", tok, 1024);
    assert_true(n >= 3);
    assert_int_equal(tok[n - 2], 3 + 0xc3);
    assert_int_equal(tok[n - 1], 3 + 0xa9);
    free(ix.sorted);
    vocab_synth_free(&v);
}

/* ---- hand-built llama files --------------------------------------------- */

#define M_DIM   64
#define M_LAY   2
#define M_HEADS 4
#define M_KV    2
#define M_HD    16
#define M_FFN   96
#define M_VOCAB 600

struct micro {
    enum gguf_tensor_type wtype; /* matrices; norms always F32 */
    const char *arch;
    const char *skip_tensor;
    const char *bad_shape;
    const char *skip_key;
    bool tied;
    int rope_dims; /* 0: head dim, -1: absent */
    int n_heads;   /* 0: M_HEADS */
    int bos;
    bool kv_absent;                /* no head_count_kv key (and then n_kv = n_heads) */
    const char *rope_scaling;      /* llama.rope.scaling.type, when set */
    int rope_freqs;                /* add a rope_freqs.weight tensor of this length */
    bool llama3_keys;              /* llama3 scaling's factor, context, low and high keys */
    enum gguf_tensor_type up_type; /* ffn_up's type (F32 = 0: wtype) */
    int cls;                       /* cls.output.weight of this many outputs (wtype) */
    bool cls_bias;                 /* and cls.output.bias */
    int cls_labels;                /* llama.classifier.output_labels of this many */
};

/* Element i of tensor number tid: a multiple of 0.5 in [-15, 15], exact in
 * every supported type (Q8_0 with scale 0.5). */
static int8_t elem_q(int tid, int64_t i)
{
    return (int8_t)((tid * 7 + i * 3) % 61 - 30);
}

static float elem(int tid, int64_t i)
{
    return (float)elem_q(tid, i) * 0.5f;
}

static void *encode(enum gguf_tensor_type t, int tid, int64_t n)
{
    uint8_t *p = malloc(gguf_tensor_nbytes(t, n) + 1);
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++) {
        float x = elem(tid, i);
        if (t == GGUF_TENSOR_F32) {
            memcpy(p + 4 * i, &x, 4);
        } else if (t == GGUF_TENSOR_F16) {
            uint16_t h = folio_f32_to_f16(x);
            memcpy(p + 2 * i, &h, 2);
        } else if (t == GGUF_TENSOR_BF16) {
            uint32_t u;
            memcpy(&u, &x, 4);
            uint16_t h = (uint16_t)(u >> 16);
            memcpy(p + 2 * i, &h, 2);
        } else {
            uint8_t *blk = p + (i / 32) * 34;
            if (i % 32 == 0) {
                uint16_t d = folio_f32_to_f16(0.5f);
                memcpy(blk, &d, 2);
            }
            blk[2 + i % 32] = (uint8_t)elem_q(tid, i);
        }
    }
    return p;
}

struct micro_names {
    char name[64];
    int64_t ne[2];
    int n_dims;
};

/* The tensor list of the micro model, in file order; returns the count. */
static int micro_tensors(struct micro_names *t, int n_kv)
{
    int k = 0;
    snprintf(t[k].name, 64, "token_embd.weight");
    t[k].n_dims = 2, t[k].ne[0] = M_DIM, t[k].ne[1] = M_VOCAB, k++;
    for (int l = 0; l < M_LAY; l++) {
        static const char *const sfx[] = {"attn_norm", "attn_q",      "attn_k",
                                          "attn_v",    "attn_output", "ffn_norm",
                                          "ffn_gate",  "ffn_up",      "ffn_down"};
        const int64_t ne[9][2] = {
            {M_DIM, 1},           {M_DIM, M_HEADS * M_HD}, {M_DIM, n_kv * M_HD},
            {M_DIM, n_kv * M_HD}, {M_HEADS * M_HD, M_DIM}, {M_DIM, 1},
            {M_DIM, M_FFN},       {M_DIM, M_FFN},          {M_FFN, M_DIM}};
        for (int s = 0; s < 9; s++) {
            snprintf(t[k].name, 64, "blk.%d.%s.weight", l, sfx[s]);
            t[k].n_dims = ne[s][1] == 1 ? 1 : 2;
            t[k].ne[0] = ne[s][0];
            t[k].ne[1] = ne[s][1];
            k++;
        }
    }
    snprintf(t[k].name, 64, "output_norm.weight");
    t[k].n_dims = 1, t[k].ne[0] = M_DIM, t[k].ne[1] = 1, k++;
    snprintf(t[k].name, 64, "output.weight");
    t[k].n_dims = 2, t[k].ne[0] = M_DIM, t[k].ne[1] = M_VOCAB, k++;
    return k;
}

static void write_micro(const char *path, const struct micro *o)
{
    gguf_writer_t *w;
    char err[256];
    int n_kv = o->kv_absent ? M_HEADS : M_KV;
    assert_int_equal(gguf_writer_new(&w), 0);
    struct vocab_synth v;
    assert_int_equal(vocab_synth_build(M_VOCAB, &v), 0);
#define KEY(call, name)                                                                            \
    do {                                                                                           \
        if (!o->skip_key || strcmp(o->skip_key, name))                                             \
            assert_int_equal(call, 0);                                                             \
    } while (0)
    KEY(gguf_w_str(w, "general.architecture", o->arch ? o->arch : "llama"), "general.architecture");
    KEY(gguf_w_str(w, "general.name", "micro"), "general.name");
    KEY(gguf_w_u32(w, "llama.context_length", 128), "llama.context_length");
    KEY(gguf_w_u32(w, "llama.embedding_length", M_DIM), "llama.embedding_length");
    KEY(gguf_w_u32(w, "llama.block_count", M_LAY), "llama.block_count");
    KEY(gguf_w_u32(w, "llama.feed_forward_length", M_FFN), "llama.feed_forward_length");
    KEY(gguf_w_u32(w, "llama.attention.head_count", o->n_heads ? o->n_heads : M_HEADS),
        "llama.attention.head_count");
    if (!o->kv_absent)
        KEY(gguf_w_u32(w, "llama.attention.head_count_kv", M_KV), "llama.attention.head_count_kv");
    if (o->rope_dims >= 0)
        KEY(gguf_w_u32(w, "llama.rope.dimension_count", o->rope_dims ? o->rope_dims : M_HD),
            "llama.rope.dimension_count");
    KEY(gguf_w_f32(w, "llama.rope.freq_base", 500000.0f), "llama.rope.freq_base");
    KEY(gguf_w_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-6f),
        "llama.attention.layer_norm_rms_epsilon");
    KEY(gguf_w_str(w, "tokenizer.ggml.model", "llama"), "tokenizer.ggml.model");
    KEY(gguf_w_arr_str(w, "tokenizer.ggml.tokens", v.tokens, M_VOCAB), "tokenizer.ggml.tokens");
    KEY(gguf_w_arr_f32(w, "tokenizer.ggml.scores", v.scores, M_VOCAB), "tokenizer.ggml.scores");
    KEY(gguf_w_arr_i32(w, "tokenizer.ggml.token_type", v.types, M_VOCAB),
        "tokenizer.ggml.token_type");
    KEY(gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)(o->bos ? o->bos : 1)),
        "tokenizer.ggml.bos_token_id");
    KEY(gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2), "tokenizer.ggml.eos_token_id");
    if (o->rope_scaling)
        assert_int_equal(gguf_w_str(w, "llama.rope.scaling.type", o->rope_scaling), 0);
    if (o->llama3_keys) {
        assert_int_equal(gguf_w_f32(w, "llama.rope.scaling.factor", 8.0f), 0);
        assert_int_equal(gguf_w_u32(w, "llama.rope.scaling.original_context_length", 64), 0);
        assert_int_equal(gguf_w_f32(w, "llama.rope.scaling.low_freq_factor", 1.0f), 0);
        assert_int_equal(gguf_w_f32(w, "llama.rope.scaling.high_freq_factor", 8.0f), 0);
    }
#undef KEY
    struct micro_names t[64];
    void *data[64];
    int nt = micro_tensors(t, n_kv);
    for (int i = 0; i < nt; i++) {
        data[i] = NULL;
        if ((o->skip_tensor && !strcmp(o->skip_tensor, t[i].name)) ||
            (o->tied && !strcmp(t[i].name, "output.weight")))
            continue;
        enum gguf_tensor_type ty = t[i].n_dims == 1 ? GGUF_TENSOR_F32 : o->wtype;
        if (o->up_type && strstr(t[i].name, "ffn_up"))
            ty = o->up_type;
        int64_t ne[2] = {t[i].ne[0], t[i].ne[1]};
        data[i] = encode(ty, i, ne[0] * ne[1]);
        if (o->bad_shape && !strcmp(o->bad_shape, t[i].name)) {
            if (t[i].n_dims == 1)
                ne[0] /= 2;
            else
                ne[0] = t[i].ne[1], ne[1] = t[i].ne[0];
        }
        assert_int_equal(gguf_w_tensor(w, t[i].name, ty, t[i].n_dims, ne, data[i]), 0);
    }
    float freqs[M_HD] = {0};
    for (int i = 0; i < M_HD; i++)
        freqs[i] = 1.0f + (float)i * 0.75f;
    if (o->rope_freqs) {
        int64_t ne1[1] = {o->rope_freqs};
        assert_int_equal(gguf_w_tensor(w, "rope_freqs.weight", GGUF_TENSOR_F32, 1, ne1, freqs), 0);
    }
    void *cls = NULL, *cls_b = NULL;
    static const char *const labels[] = {"yes", "no", "maybe"};
    if (o->cls) { /* tensor ids 60 and 61 */
        int64_t ne2[2] = {M_DIM, o->cls}, ne1[1] = {o->cls};
        cls = encode(o->wtype, 60, (int64_t)M_DIM * o->cls);
        assert_int_equal(gguf_w_tensor(w, "cls.output.weight", o->wtype, 2, ne2, cls), 0);
        if (o->cls_bias) {
            cls_b = encode(GGUF_TENSOR_F32, 61, o->cls);
            assert_int_equal(gguf_w_tensor(w, "cls.output.bias", GGUF_TENSOR_F32, 1, ne1, cls_b),
                             0);
        }
    }
    if (o->cls_labels)
        assert_int_equal(
            gguf_w_arr_str(w, "llama.classifier.output_labels", labels, (uint64_t)o->cls_labels),
            0);
    assert_int_equal(gguf_writer_write(w, path, err, sizeof(err)), 0);
    free(cls);
    free(cls_b);
    for (int i = 0; i < nt; i++)
        free(data[i]);
    gguf_writer_free(w);
    vocab_synth_free(&v);
}

static void check_floats(const float *got, int tid, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (got[i] != elem(tid, i))
            fail_msg("tensor %d element %ld: %g, want %g", tid, (long)i, got[i], elem(tid, i));
}

/* Matrices keep their file's type: their values as f32 (a copy that
 * lives until deq_free). */
static float *deq_bufs[64];
static int deq_n;
/* The type a matrix of file type t has once loaded: its load-time layout
 * where that runs on as high an instruction set (quant_repack_pays), else
 * the file's (Q8_0 on an AVX-512 VNNI CPU). */
static enum gguf_tensor_type loaded_type(enum gguf_tensor_type t)
{
    return quant_repack_pays(t) ? quant_repack_type(t) : t;
}

static const float *deq(const struct matmul_mat *mt)
{
    float *f = malloc(sizeof(float) * (size_t)mt->rows * mt->cols);
    assert_non_null(f);
    assert_true(deq_n < 64);
    matmul_mat_rows_f32(mt, 0, mt->rows, f);
    return deq_bufs[deq_n++] = f;
}
static void deq_free(void)
{
    while (deq_n > 0)
        free(deq_bufs[--deq_n]);
}

static void test_loader_types_and_fusion(void **state)
{
    (void)state;
    static const enum gguf_tensor_type types[] = {GGUF_TENSOR_F32, GGUF_TENSOR_F16,
                                                  GGUF_TENSOR_BF16, GGUF_TENSOR_Q8_0};
    for (size_t ti = 0; ti < FOLIO_ARRAY_LEN(types); ti++) {
        for (int tied = 0; tied < 2; tied++) {
            char path[300], err[512];
            tmp_path(path, sizeof(path), "micro.gguf");
            struct micro o = {.wtype = types[ti], .tied = tied};
            write_micro(path, &o);
            model_t *m;
            int rc = model_load_file(path, &m, err, sizeof(err));
            if (rc)
                fail_msg("%s: %s", gguf_tensor_type_name(types[ti]), err);
            const struct model_hparams *hp = model_hparams(m);
            assert_int_equal(hp->n_vocab, M_VOCAB);
            assert_int_equal(hp->dim, M_DIM);
            assert_int_equal(hp->n_layers, M_LAY);
            assert_int_equal(hp->n_heads, M_HEADS);
            assert_int_equal(hp->n_kv_heads, M_KV);
            assert_int_equal(hp->head_dim, M_HD);
            assert_int_equal(hp->ffn_dim, M_FFN);
            assert_int_equal(hp->ctx_len, 128);
            assert_true(hp->norm_eps == 1e-6f);
            assert_true(hp->rope_base == 500000.0f);
            assert_int_equal(hp->bos_id, 1);
            assert_int_equal(hp->eos_id, 2);
            assert_string_equal(model_name(m), "micro");

            /* tensor ids follow micro_tensors(): 0 embd, then 9 per layer */
            check_floats(deq(&m->tok_embd), 0, (int64_t)M_VOCAB * M_DIM);
            for (int l = 0; l < M_LAY; l++) {
                const struct model_layer *L = &m->layers[l];
                int b = 1 + 9 * l;
                /* kept in the file's type (Q8_0: its load-time layout where
                 * that pays, same bytes) */
                assert_int_equal(L->wqkv.type, loaded_type(types[ti]));
                assert_int_equal(L->w_down.type, loaded_type(types[ti]));
                check_floats(L->attn_norm, b + 0, M_DIM);
                check_floats(deq(&L->wqkv), b + 1, (int64_t)M_HEADS * M_HD * M_DIM);
                check_floats(deq(&L->wqkv) + M_HEADS * M_HD * M_DIM, b + 2,
                             (int64_t)M_KV * M_HD * M_DIM);
                check_floats(deq(&L->wqkv) + (M_HEADS + M_KV) * M_HD * M_DIM, b + 3,
                             (int64_t)M_KV * M_HD * M_DIM);
                check_floats(deq(&L->wo), b + 4, (int64_t)M_HEADS * M_HD * M_DIM);
                check_floats(L->ffn_norm, b + 5, M_DIM);
                check_floats(deq(&L->w_gate_up), b + 6, (int64_t)M_FFN * M_DIM);
                check_floats(deq(&L->w_gate_up) + M_FFN * M_DIM, b + 7, (int64_t)M_FFN * M_DIM);
                check_floats(deq(&L->w_down), b + 8, (int64_t)M_FFN * M_DIM);
            }
            check_floats(m->out_norm, 1 + 9 * M_LAY, M_DIM);
            check_floats(deq(&m->output), tied ? 0 : 2 + 9 * M_LAY, (int64_t)M_VOCAB * M_DIM);
            deq_free();
            model_free(m);
        }
    }
}

/* Gate and up of differing types stay two matrices, each in its type
 * (w_gate_up.data NULL); Q/K/V of one type stay fused. */
static void test_loader_gate_up_mixed(void **state)
{
    (void)state;
    char path[300], err[512];
    tmp_path(path, sizeof(path), "micro_mixed.gguf");
    struct micro o = {.wtype = GGUF_TENSOR_Q8_0, .up_type = GGUF_TENSOR_F16};
    write_micro(path, &o);
    model_t *m;
    if (model_load_file(path, &m, err, sizeof(err)))
        fail_msg("%s", err);
    for (int l = 0; l < M_LAY; l++) {
        const struct model_layer *L = &m->layers[l];
        int b = 1 + 9 * l;
        assert_non_null(L->wqkv.data);
        assert_null(L->w_gate_up.data);
        assert_int_equal(L->gu_part[0].type, loaded_type(GGUF_TENSOR_Q8_0)); /* Q8_0 */
        assert_int_equal(L->gu_part[1].type, GGUF_TENSOR_F16);
        assert_int_equal(L->gu_part[0].rows, M_FFN);
        assert_int_equal(L->gu_part[1].rows, M_FFN);
        check_floats(deq(&L->gu_part[0]), b + 6, (int64_t)M_FFN * M_DIM);
        check_floats(deq(&L->gu_part[1]), b + 7, (int64_t)M_FFN * M_DIM);
    }
    /* read as stored: nothing widened to f32 */
    const size_t q8_row = gguf_tensor_nbytes(GGUF_TENSOR_Q8_0, M_DIM);
    assert_true(model__weight_bytes_per_token(m) <
                (size_t)M_LAY * 2 * M_FFN * M_DIM * sizeof(float) / 2 + 10 * q8_row * M_VOCAB);
    deq_free();
    model_free(m);
}

/* llama3 RoPE scaling from its keys gives llama.cpp's converter's divisors;
 * a rope_freqs.weight tensor is read as it is and wins over the keys. */
static void test_loader_llama3_rope(void **state)
{
    (void)state;
    char path[300], err[512];
    tmp_path(path, sizeof(path), "micro_llama3.gguf");
    struct micro o = {.wtype = GGUF_TENSOR_F32, .rope_scaling = "llama3", .llama3_keys = true};
    write_micro(path, &o);
    model_t *m;
    if (model_load_file(path, &m, err, sizeof(err)))
        fail_msg("%s", err);
    const struct model_hparams *hp = model_hparams(m);
    assert_int_equal(hp->rope_scaling, MODEL_ROPE_LLAMA3);
    assert_true(hp->rope_factor == 8.0f && hp->rope_orig_ctx == 64);
    assert_true(hp->rope_low_freq == 1.0f && hp->rope_high_freq == 8.0f);
    assert_null(m->rope_freqs);
    int kept = 0, divided = 0, blended = 0;
    for (int i = 0; i < M_HD / 2; i++) {
        /* wavelength 2 pi 500000^(2i/16) against 64/8 = 8 and 64/1 = 64 */
        double wl = 2 * M_PI * pow(500000.0, 2.0 * i / M_HD);
        double sm = (64 / wl - 1) / 7;
        double want = wl < 8 ? 1 : wl > 64 ? 8 : 1 / ((1 - sm) / 8 + sm);
        double got = model__rope_divisor(m, i);
        if (fabs(got - want) > 1e-12 * want)
            fail_msg("pair %d: divisor %.17g, want %.17g", i, got, want);
        kept += want == 1, divided += want == 8, blended += want > 1 && want < 8;
    }
    assert_true(kept == 1 && blended == 1 && divided == 6); /* 6.28, 32.5, then > 64 */
    model_free(m);
    o.rope_freqs = M_HD / 2;
    write_micro(path, &o);
    if (model_load_file(path, &m, err, sizeof(err)))
        fail_msg("%s", err);
    assert_non_null(m->rope_freqs);
    for (int i = 0; i < M_HD / 2; i++)
        assert_true(model__rope_divisor(m, i) == 1.0f + (float)i * 0.75f);
    model_free(m);
}

/* A reranker's head: cls.output.weight in the matrices' type read as f32
 * rows [n][dim], its bias, the labels key naming as many; none: 0. */
static void test_loader_cls(void **state)
{
    (void)state;
    char path[300], err[512];
    tmp_path(path, sizeof(path), "micro_cls.gguf");
    const enum gguf_tensor_type types[] = {GGUF_TENSOR_F32, GGUF_TENSOR_F16, GGUF_TENSOR_Q8_0};
    for (size_t t = 0; t < FOLIO_ARRAY_LEN(types); t++) {
        struct micro o = {.wtype = types[t],
                          .cls = 1 + (int)t,
                          .cls_bias = t != 1,
                          .cls_labels = t ? 1 + (int)t : 0};
        write_micro(path, &o);
        model_t *m;
        if (model_load_file(path, &m, err, sizeof(err)))
            fail_msg("%s", err);
        const float *w, *b;
        assert_int_equal(model_cls_head(m, &w, &b), o.cls);
        for (int64_t i = 0; i < (int64_t)M_DIM * o.cls; i++)
            assert_true(w[i] == elem(60, i));
        if (o.cls_bias)
            for (int i = 0; i < o.cls; i++)
                assert_true(b[i] == elem(61, i));
        else
            assert_null(b);
        model_free(m);
    }
    struct micro o = {.wtype = GGUF_TENSOR_F32};
    write_micro(path, &o);
    model_t *m;
    assert_int_equal(model_load_file(path, &m, err, sizeof(err)), 0);
    const float *w = (const float *)1, *b = (const float *)1;
    assert_int_equal(model_cls_head(m, &w, &b), 0);
    assert_null(w);
    assert_null(b);
    model_free(m);
}

/* Defaults: head_count_kv absent -> n_heads; rope.dimension_count absent. */
static void test_loader_defaults(void **state)
{
    (void)state;
    char path[300], err[512];
    tmp_path(path, sizeof(path), "micro_def.gguf");
    struct micro o = {.wtype = GGUF_TENSOR_F32, .kv_absent = true, .rope_dims = -1};
    write_micro(path, &o);
    model_t *m;
    int rc = model_load_file(path, &m, err, sizeof(err));
    if (rc)
        fail_msg("%s", err);
    assert_int_equal(model_hparams(m)->n_kv_heads, M_HEADS);
    model_free(m);
    o = (struct micro){.wtype = GGUF_TENSOR_F32, .skip_key = "general.name"};
    write_micro(path, &o);
    assert_int_equal(model_load_file(path, &m, err, sizeof(err)), 0);
    assert_string_equal(model_name(m), "micro_def");
    model_free(m);
}

static void expect_load_fail(const char *path, const char *needle)
{
    model_t *m = (model_t *)0x1;
    char err[512];
    int rc = model_load_file(path, &m, err, sizeof(err));
    if (getenv("FOLIO_TEST_VERBOSE"))
        print_message("%s\n", err);
    if (rc != -EINVAL || !strstr(err, path) || !strstr(err, needle))
        fail_msg("rc %d err '%s' (want '%s')", rc, err, needle);
    assert_null(m);
}

static void test_loader_rejects(void **state)
{
    (void)state;
    char path[300];
    tmp_path(path, sizeof(path), "bad_micro.gguf");
    const struct {
        struct micro o;
        const char *needle;
    } cases[] = {
        {{.skip_tensor = "blk.1.ffn_up.weight"}, "missing tensor 'blk.1.ffn_up.weight'"},
        {{.skip_tensor = "token_embd.weight"}, "'token_embd.weight'"},
        {{.skip_tensor = "output_norm.weight"}, "missing tensor 'output_norm.weight'"},
        {{.skip_tensor = "blk.0.attn_q.weight"}, "missing tensor 'blk.0.attn_q.weight'"},
        {{.bad_shape = "blk.0.attn_k.weight"},
         "tensor 'blk.0.attn_k.weight' has shape [32, 64], expected [64, 32]"},
        {{.bad_shape = "blk.1.attn_norm.weight"}, "'blk.1.attn_norm.weight' has shape [32]"},
        {{.bad_shape = "blk.1.ffn_down.weight"}, "'blk.1.ffn_down.weight' has shape"},
        {{.bad_shape = "output.weight"}, "'output.weight' has shape [600, 64]"},
        {{.arch = "gpt2"}, "'general.architecture' is 'gpt2'"},
        {{.skip_key = "general.architecture"}, "'general.architecture'"},
        {{.skip_key = "llama.block_count"}, "missing required key 'llama.block_count'"},
        {{.skip_key = "llama.attention.layer_norm_rms_epsilon"},
         "'llama.attention.layer_norm_rms_epsilon'"},
        {{.rope_dims = 8}, "'llama.rope.dimension_count' = 8"},
        {{.n_heads = 5}, "'llama.attention.head_count' = 5"},
        {{.n_heads = 8, .rope_dims = -1},
         "'blk.0.attn_k.weight' has shape [64, 32], expected [64, 16]"},
        {{.bos = 5000}, "'tokenizer.ggml.bos_token_id' = 5000"},
        {{.rope_scaling = "longrope"},
         "'llama.rope.scaling.type' is 'longrope': RoPE scaling types"},
        {{.rope_scaling = "linear"}, "missing required key 'llama.rope.scaling.factor'"},
        {{.rope_scaling = "llama3"}, "missing required key 'llama.rope.scaling.factor'"},
        {{.rope_freqs = M_HD}, "tensor 'rope_freqs.weight' has shape [16], expected [8]"},
        {{.cls = MODEL_MAX_CLS + 1}, "'cls.output.weight' has 17 outputs; a reranker's head"},
        {{.cls = 2, .cls_labels = 3}, "key 'llama.classifier.output_labels' must be an array of 2"},
    };
    for (size_t c = 0; c < FOLIO_ARRAY_LEN(cases); c++) {
        struct micro o = cases[c].o;
        o.wtype = c % 2 ? GGUF_TENSOR_F16 : GGUF_TENSOR_F32;
        write_micro(path, &o);
        expect_load_fail(path, cases[c].needle);
    }

    /* an unsupported tensor type (iq2_xxs) is refused by the reader, by name */
    struct micro o = {.wtype = GGUF_TENSOR_F32};
    write_micro(path, &o);
    size_t n;
    uint8_t *b = read_all(path, &n);
    const char *nm = "blk.0.ffn_gate.weight";
    size_t l = strlen(nm);
    bool patched = false;
    for (size_t i = 8; i + l < n && !patched; i++)
        if (!memcmp(b + i, nm, l)) {
            uint32_t iq2 = 16;
            memcpy(b + i + l + 4 + 16, &iq2, 4); /* n_dims, ne[2], type */
            patched = true;
        }
    assert_true(patched);
    write_all(path, b, n);
    free(b);
    expect_load_fail(path, "tensor 'blk.0.ffn_gate.weight': unsupported tensor type 16 (iq2_xxs)");

    char missing[300];
    tmp_path(missing, sizeof(missing), "nope.gguf");
    model_t *m;
    char err[512];
    assert_int_equal(model_load_file(missing, &m, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, missing));
}

static void test_loader_alloc_failures(void **state)
{
    (void)state;
    char path[300];
    tmp_path(path, sizeof(path), "micro_af.gguf");
    struct micro o = {.wtype = GGUF_TENSOR_Q8_0};
    write_micro(path, &o);
    bool done = false;
    for (long k = 1; k < 10000 && !done; k++) {
        model_t *m = NULL;
        char err[512];
        folio_alloc_fail_at(k);
        int rc = model_load_file(path, &m, err, sizeof(err));
        folio_alloc_fail_at(0);
        if (rc == 0) {
            model_free(m);
            done = true;
        } else {
            assert_int_equal(rc, -ENOMEM);
            assert_non_null(strstr(err, path));
            assert_null(m);
        }
    }
    assert_true(done);
}

/* The value a matrix of type t holds for src: its round trip through t. */
static void expect_matrix(const char *what, const float *got, const float *src, int64_t n,
                          enum gguf_tensor_type t)
{
    float *want = malloc((size_t)n * sizeof(float));
    void *q = malloc(gguf_tensor_nbytes(t, n));
    assert_int_equal(quant_from_float(t, src, q, n), 0);
    quant_to_float(t, q, want, n);
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("%s %s[%ld]: %g want %g", gguf_tensor_type_name(t), what, (long)i, got[i],
                     want[i]);
    free(want);
    free(q);
}

/* model__write_gguf of an in-memory model loads back bit-exactly (F32) or
 * as the F16 / BF16 / Q8_0 rounding of every matrix (norms stay exact). */
/* The small model the write/load round trips use (M_* above). */
static struct model_hparams m_hparams(void)
{
    return (struct model_hparams){.n_vocab = M_VOCAB,
                                  .dim = M_DIM,
                                  .n_layers = M_LAY,
                                  .n_heads = M_HEADS,
                                  .n_kv_heads = M_KV,
                                  .head_dim = M_HD,
                                  .ffn_dim = M_FFN,
                                  .ctx_len = 256,
                                  .norm_eps = 1e-5f,
                                  .rope_base = 10000.0f,
                                  .bos_id = 1,
                                  .eos_id = 2};
}

static void test_write_load_roundtrip(void **state)
{
    (void)state;
    const struct model_hparams hp = m_hparams();
    struct model *src;
    assert_int_equal(model__alloc(&hp, &src), 0);
    model__fill_random(src, 99);
    snprintf(src->name, sizeof(src->name), "roundtrip");
    const enum gguf_tensor_type types[] = {GGUF_TENSOR_F32, GGUF_TENSOR_F16, GGUF_TENSOR_BF16,
                                           GGUF_TENSOR_Q8_0};
    const uint64_t ftypes[] = {0, 1, 32, 7}; /* llama.cpp's general.file_type */
    for (int k = 0; k < 4; k++) {
        const enum gguf_tensor_type t = types[k];
        char path[300], err[512];
        tmp_path(path, sizeof(path), "wl.gguf");
        assert_int_equal(model__write_gguf(src, path, t, NULL, err, sizeof(err)), 0);
        model_t *m;
        int rc = model_load_file(path, &m, err, sizeof(err));
        if (rc)
            fail_msg("%s", err);
        assert_memory_equal(model_hparams(m), &hp, sizeof(hp));
        assert_string_equal(model_name(m), "roundtrip");
        int64_t qkv = (int64_t)(M_HEADS + 2 * M_KV) * M_HD * M_DIM;
        expect_matrix("tok_embd", deq(&m->tok_embd), model__f32(&src->tok_embd), M_VOCAB * M_DIM,
                      t);
        for (int l = 0; l < M_LAY; l++) {
            assert_memory_equal(m->layers[l].attn_norm, src->layers[l].attn_norm, M_DIM * 4);
            expect_matrix("wqkv", deq(&m->layers[l].wqkv), model__f32(&src->layers[l].wqkv), qkv,
                          t);
            expect_matrix("wo", deq(&m->layers[l].wo), model__f32(&src->layers[l].wo),
                          M_HEADS * M_HD * M_DIM, t);
            assert_memory_equal(m->layers[l].ffn_norm, src->layers[l].ffn_norm, M_DIM * 4);
            expect_matrix("w_gate_up", deq(&m->layers[l].w_gate_up),
                          model__f32(&src->layers[l].w_gate_up), 2 * M_FFN * M_DIM, t);
            expect_matrix("w_down", deq(&m->layers[l].w_down), model__f32(&src->layers[l].w_down),
                          M_FFN * M_DIM, t);
        }
        assert_memory_equal(m->out_norm, src->out_norm, M_DIM * 4);
        expect_matrix("output", deq(&m->output), model__f32(&src->output), M_VOCAB * M_DIM, t);
        deq_free();
        model_free(m);
        gguf_file_t *f;
        assert_int_equal(gguf_open(path, &f, err, sizeof(err)), 0);
        int64_t ft = gguf_find_key(f, "general.file_type");
        uint64_t v;
        assert_int_equal(gguf_get_u64(f, ft, &v), 0);
        assert_int_equal(v, ftypes[k]);
        struct gguf_tensor_info ti;
        gguf_tensor_get(f, gguf_find_tensor(f, "blk.1.ffn_down.weight"), &ti);
        assert_int_equal(ti.type, t);
        gguf_tensor_get(f, gguf_find_tensor(f, "blk.1.ffn_norm.weight"), &ti);
        assert_int_equal(ti.type, GGUF_TENSOR_F32);
        gguf_close(f);
    }
    model_free(src);
}

/* A model split in two files as llama.cpp's gguf-split writes it (the
 * first with every key, both with split.no, split.count and
 * split.tensors.count) loads from its first part into the same weights as
 * the whole file. */
static void test_loader_split(void **state)
{
    (void)state;
    const struct model_hparams hp = m_hparams();
    struct model *src;
    assert_int_equal(model__alloc(&hp, &src), 0);
    model__fill_random(src, 5);
    char whole[300], prefix[300], part[2][340], err[512];
    tmp_path(whole, sizeof(whole), "whole.gguf");
    tmp_path(prefix, sizeof(prefix), "split");
    assert_int_equal(model__write_gguf(src, whole, GGUF_TENSOR_Q8_0, NULL, err, sizeof(err)), 0);
    gguf_file_t *f;
    assert_int_equal(gguf_open(whole, &f, err, sizeof(err)), 0);
    const int64_t nt = gguf_n_tensors(f), half = nt / 2;
    for (int k = 0; k < 2; k++) {
        snprintf(part[k], sizeof(part[k]), "%s-%05d-of-00002.gguf", prefix, k + 1);
        gguf_writer_t *w;
        assert_int_equal(gguf_writer_new(&w), 0);
        for (int64_t i = 0; k == 0 && i < gguf_n_keys(f); i++)
            assert_int_equal(gguf_w_copy_key(w, f, i), 0);
        assert_int_equal(gguf_w_u16(w, "split.no", (uint16_t)k), 0);
        assert_int_equal(gguf_w_u16(w, "split.count", 2), 0);
        assert_int_equal(gguf_w_i32(w, "split.tensors.count", (int32_t)nt), 0);
        for (int64_t i = k ? half : 0; i < (k ? nt : half); i++) {
            struct gguf_tensor_info ti;
            gguf_tensor_get(f, i, &ti);
            assert_int_equal(gguf_w_tensor(w, ti.name, ti.type, ti.n_dims, ti.ne, ti.data), 0);
        }
        assert_int_equal(gguf_writer_write(w, part[k], err, sizeof(err)), 0);
        gguf_writer_free(w);
    }
    gguf_close(f);
    model_t *a, *b;
    assert_int_equal(model_load_file(whole, &a, err, sizeof(err)), 0);
    if (model_load_file(part[0], &b, err, sizeof(err)))
        fail_msg("%s", err);
    assert_memory_equal(model_hparams(a), model_hparams(b), sizeof(hp));
    assert_string_equal(model_name(a), model_name(b));
    const size_t qkv = (size_t)(M_HEADS + 2 * M_KV) * M_HD * M_DIM;
    assert_memory_equal(deq(&a->tok_embd), deq(&b->tok_embd), (size_t)M_VOCAB * M_DIM * 4);
    assert_memory_equal(deq(&a->output), deq(&b->output), (size_t)M_VOCAB * M_DIM * 4);
    for (int l = 0; l < M_LAY; l++) {
        const struct model_layer *x = &a->layers[l], *y = &b->layers[l];
        assert_memory_equal(deq(&x->wqkv), deq(&y->wqkv), qkv * 4);
        assert_memory_equal(deq(&x->wo), deq(&y->wo), (size_t)M_HEADS * M_HD * M_DIM * 4);
        assert_memory_equal(deq(&x->w_gate_up), deq(&y->w_gate_up), (size_t)2 * M_FFN * M_DIM * 4);
        assert_memory_equal(deq(&x->w_down), deq(&y->w_down), (size_t)M_FFN * M_DIM * 4);
        assert_memory_equal(x->attn_norm, y->attn_norm, M_DIM * 4);
        assert_memory_equal(x->ffn_norm, y->ffn_norm, M_DIM * 4);
    }
    deq_free();
    model_free(b);
    /* the second part alone is refused, naming the first */
    assert_int_equal(model_load_file(part[1], &b, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "open its first part"));
    model_free(a);
    model_free(src);
}

/* ---- gen-model ----------------------------------------------------------- */

static uint64_t fnv_file(const char *path, size_t *len)
{
    uint8_t *b = read_all(path, len);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < *len; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    free(b);
    return h;
}

static void test_gen_tiny(void **state)
{
    (void)state;
    char a[300], b[300], c[300], err[512];
    tmp_path(a, sizeof(a), "tiny_a.gguf");
    tmp_path(b, sizeof(b), "tiny_b.gguf");
    tmp_path(c, sizeof(c), "tiny_c.gguf");
    struct model_gen_opts o = {.preset = "tiny", .seed = 7};
    assert_int_equal(model_gen_file(&o, a, err, sizeof(err)), 0);
    assert_int_equal(model_gen_file(&o, b, err, sizeof(err)), 0);
    o.seed = 8;
    assert_int_equal(model_gen_file(&o, c, err, sizeof(err)), 0);
    size_t la, lb, lc;
    uint64_t ha = fnv_file(a, &la), hb = fnv_file(b, &lb), hc = fnv_file(c, &lc);
    assert_int_equal(la, lb);
    assert_true(ha == hb);
    assert_int_equal(la, lc);
    assert_true(ha != hc);
    unlink(b);
    unlink(c);

    /* the exact keys, in order */
    static const char *const keys[] = {"general.architecture",
                                       "general.name",
                                       "general.alignment",
                                       "general.file_type",
                                       "llama.vocab_size",
                                       "llama.context_length",
                                       "llama.embedding_length",
                                       "llama.block_count",
                                       "llama.feed_forward_length",
                                       "llama.attention.head_count",
                                       "llama.attention.head_count_kv",
                                       "llama.rope.dimension_count",
                                       "llama.rope.freq_base",
                                       "llama.attention.layer_norm_rms_epsilon",
                                       "tokenizer.ggml.model",
                                       "tokenizer.ggml.tokens",
                                       "tokenizer.ggml.scores",
                                       "tokenizer.ggml.token_type",
                                       "tokenizer.ggml.bos_token_id",
                                       "tokenizer.ggml.eos_token_id",
                                       "tokenizer.ggml.unknown_token_id",
                                       "tokenizer.ggml.add_bos_token",
                                       "tokenizer.ggml.add_eos_token"};
    gguf_file_t *f;
    assert_int_equal(gguf_open(a, &f, err, sizeof(err)), 0);
    assert_int_equal(gguf_n_keys(f), (int64_t)FOLIO_ARRAY_LEN(keys));
    for (size_t i = 0; i < FOLIO_ARRAY_LEN(keys); i++)
        assert_string_equal(gguf_key_name(f, (int64_t)i), keys[i]);
    assert_int_equal(gguf_n_tensors(f), 3 + 9 * 8);
    gguf_close(f);

    /* loads back into exactly the model the preset and seed describe */
    struct model_hparams hp;
    assert_int_equal(model_preset("tiny", &hp), 0);
    struct model *ref;
    assert_int_equal(model__alloc(&hp, &ref), 0);
    model__fill_random(ref, 7);
    model_t *m;
    int rc = model_load_file(a, &m, err, sizeof(err));
    if (rc)
        fail_msg("%s", err);
    assert_int_equal(m->hp.n_vocab, 32000);
    assert_int_equal(m->hp.dim, 512);
    assert_int_equal(m->hp.n_layers, 8);
    assert_int_equal(m->hp.n_kv_heads, 2);
    assert_int_equal(m->hp.bos_id, 1);
    assert_int_equal(m->hp.eos_id, 2);
    assert_string_equal(model_name(m), "folio-synth-tiny-s7");
    assert_memory_equal(model__f32(&m->tok_embd), model__f32(&ref->tok_embd),
                        (size_t)hp.n_vocab * hp.dim * 4);
    assert_memory_equal(model__f32(&m->output), model__f32(&ref->output),
                        (size_t)hp.n_vocab * hp.dim * 4);
    assert_memory_equal(m->out_norm, ref->out_norm, (size_t)hp.dim * 4);
    size_t qkv = (size_t)(hp.n_heads + 2 * hp.n_kv_heads) * hp.head_dim * hp.dim;
    for (int l = 0; l < hp.n_layers; l++) {
        const struct model_layer *L = &m->layers[l], *R = &ref->layers[l];
        assert_memory_equal(model__f32(&L->wqkv), model__f32(&R->wqkv), qkv * 4);
        assert_memory_equal(model__f32(&L->w_gate_up), model__f32(&R->w_gate_up),
                            (size_t)2 * hp.ffn_dim * hp.dim * 4);
        assert_memory_equal(model__f32(&L->w_down), model__f32(&R->w_down),
                            (size_t)hp.ffn_dim * hp.dim * 4);
        assert_memory_equal(model__f32(&L->wo), model__f32(&R->wo), (size_t)hp.dim * hp.dim * 4);
        assert_memory_equal(m->layers[l].attn_norm, ref->layers[l].attn_norm, (size_t)hp.dim * 4);
        assert_memory_equal(m->layers[l].ffn_norm, ref->layers[l].ffn_norm, (size_t)hp.dim * 4);
    }
    /* the vocabulary written is the synthetic one */
    struct vocab_synth v;
    assert_int_equal(vocab_synth_build(32000, &v), 0);
    gguf_file_t *mf;
    assert_int_equal(gguf_open(a, &mf, err, sizeof(err)), 0);
    int64_t k = gguf_find_key(mf, "tokenizer.ggml.tokens");
    for (int32_t i = 0; i < 32000; i += 97) {
        const char *s;
        size_t len;
        assert_int_equal(gguf_arr_str(mf, k, (uint64_t)i, &s, &len), 0);
        assert_int_equal(len, strlen(v.tokens[i]));
        assert_memory_equal(s, v.tokens[i], len);
    }
    gguf_close(mf);
    vocab_synth_free(&v);
    model_free(m);
    model_free(ref);
    unlink(a);
}

/* --reranker: qwen3 only; a two-row head, pooling_type rank, the labels
 * and the rerank template, loaded back as the head. */
static void test_gen_reranker(void **state)
{
    (void)state;
    char src[300], out[300], err[512];
    tmp_path(src, sizeof(src), "vocab_rr.gguf");
    tmp_path(out, sizeof(out), "tiny_rr.gguf");
    struct micro mo = {.wtype = GGUF_TENSOR_F32};
    write_micro(src, &mo);
    struct model_gen_opts o = {
        .preset = "tiny", .seed = 3, .vocab_path = src, .reranker = true, .dtype = "q8_0"};
    assert_int_equal(model_gen_file(&o, out, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "--arch qwen3"));
    o.arch = "qwen3";
    if (model_gen_file(&o, out, err, sizeof(err)))
        fail_msg("%s", err);
    model_t *m;
    if (model_load_file(out, &m, err, sizeof(err)))
        fail_msg("%s", err);
    const float *w, *b;
    assert_int_equal(model_cls_head(m, &w, &b), 2);
    assert_null(b);
    double ss = 0; /* rows ~ U(-a, a), a = sqrt(3 / dim): mean square 1 / dim */
    for (int i = 0; i < 2 * m->hp.dim; i++)
        ss += (double)w[i] * w[i];
    assert_true(fabs(ss / 2 - 1.0) < 0.2);
    model_free(m);
    gguf_file_t *f;
    assert_int_equal(gguf_open(out, &f, err, sizeof(err)), 0);
    uint64_t pool = 0;
    assert_int_equal(gguf_get_u64(f, gguf_find_key(f, "qwen3.pooling_type"), &pool), 0);
    assert_int_equal(pool, 4);
    const char *s;
    size_t len;
    int64_t k = gguf_find_key(f, "qwen3.classifier.output_labels");
    assert_int_equal(gguf_arr_str(f, k, 1, &s, &len), 0);
    assert_true(len == 2 && !memcmp(s, "no", 2));
    assert_int_equal(gguf_get_str(f, gguf_find_key(f, "tokenizer.chat_template.rerank"), &s, &len),
                     0);
    assert_true(len == strlen(MODEL_GEN_RERANK_TEMPLATE) &&
                !memcmp(s, MODEL_GEN_RERANK_TEMPLATE, len));
    gguf_close(f);
    unlink(out);
    unlink(src);
}

/* --vocab: tokenizer.* keys come from another file; n_vocab follows it. */
static void test_gen_copy_vocab(void **state)
{
    (void)state;
    char src[300], out[300], err[512];
    tmp_path(src, sizeof(src), "vocab_src.gguf");
    tmp_path(out, sizeof(out), "tiny_v.gguf");
    struct micro mo = {.wtype = GGUF_TENSOR_F32};
    write_micro(src, &mo);
    struct model_gen_opts o = {.preset = "tiny", .seed = 3, .f16 = true, .vocab_path = src};
    assert_int_equal(model_gen_file(&o, out, err, sizeof(err)), 0);
    model_t *m;
    int rc = model_load_file(out, &m, err, sizeof(err));
    if (rc)
        fail_msg("%s", err);
    assert_int_equal(m->hp.n_vocab, M_VOCAB);
    model_free(m);
    gguf_file_t *f, *mf;
    assert_int_equal(gguf_open(src, &f, err, sizeof(err)), 0);
    assert_int_equal(gguf_open(out, &mf, err, sizeof(err)), 0);
    int n_tok = 0;
    for (int64_t i = 0; i < gguf_n_keys(f); i++) {
        const char *name = gguf_key_name(f, i);
        if (strncmp(name, "tokenizer.", 10))
            continue;
        n_tok++;
        int64_t j = gguf_find_key(mf, name);
        assert_true(j >= 0);
        assert_int_equal(gguf_key_type(mf, j), gguf_key_type(f, i));
    }
    assert_int_equal(n_tok, 6);
    const char *s;
    size_t len;
    assert_int_equal(gguf_arr_str(mf, gguf_find_key(mf, "tokenizer.ggml.tokens"), 599, &s, &len),
                     0);
    const char *s2;
    size_t len2;
    assert_int_equal(gguf_arr_str(f, gguf_find_key(f, "tokenizer.ggml.tokens"), 599, &s2, &len2),
                     0);
    assert_int_equal(len, len2);
    assert_memory_equal(s, s2, len);
    gguf_close(f);
    gguf_close(mf);

    /* errors name the file */
    o.vocab_path = out; /* fine: has tokens */
    o.preset = "huge";
    assert_int_equal(model_gen_file(&o, out, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "huge"));
    o.preset = "tiny";
    o.vocab_path = "/nonexistent/vocab.gguf";
    assert_int_equal(model_gen_file(&o, out, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "/nonexistent/vocab.gguf"));
    o.vocab_path = NULL;
    assert_int_equal(model_gen_file(&o, "/nonexistent/out.gguf", err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "/nonexistent/out.gguf"));
    unlink(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vocab_layout),
        cmocka_unit_test(test_vocab_tokenizes_english),
        cmocka_unit_test(test_loader_types_and_fusion),
        cmocka_unit_test(test_loader_defaults),
        cmocka_unit_test(test_loader_rejects),
        cmocka_unit_test(test_loader_gate_up_mixed),
        cmocka_unit_test(test_loader_llama3_rope),
        cmocka_unit_test(test_loader_cls),
        cmocka_unit_test(test_loader_alloc_failures),
        cmocka_unit_test(test_write_load_roundtrip),
        cmocka_unit_test(test_loader_split),
        cmocka_unit_test(test_gen_tiny),
        cmocka_unit_test(test_gen_copy_vocab),
        cmocka_unit_test(test_gen_reranker),
    };
    return cmocka_run_group_tests(tests, test_tmp_setup, test_tmp_teardown);
}
