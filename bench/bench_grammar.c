/*
 * bench/bench_grammar.c — the cost of constrained decoding beside the step
 * it constrains, in one run.
 *
 *   bench_grammar [--vocab N] [--streams B] [--steps S] [--threads T]
 *                 [--distinct]
 *
 * A synthetic model (the `tiny` preset, its vocabulary N tokens: 32000 by
 * default; weights generated in memory) decodes B streams together, S
 * steps, each stream constrained by a JSON Schema grammar (a nested
 * object: strings, integers, an enum, an array of objects).  Per step it
 * times what foliod's engine does:
 *
 *   forward   model_forward over the B decode rows (logits for each)
 *   sample    sampler_sample per row (T = 1)
 *   mask      gram_matcher_apply per row (logits of refused tokens -> -inf)
 *   accept    gram_matcher_accept per row (the matcher over the chosen token)
 *
 * An unconstrained step is forward + sample; the constrained step adds
 * mask + accept.  A stream whose document is complete starts a new one (a
 * new matcher), so the whole run is in steady state decoding.  By default
 * the B streams share one compiled grammar (requests with the same
 * schema); --distinct compiles one per stream, so each stream warms its
 * own state cache (the first visit of a state walks the vocabulary).
 * Vocabulary bytes come from the synthetic SentencePiece vocabulary
 * ("▁" -> space, <0xNN> -> the byte), as the daemon's tokenizer gives them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/model_internal.h"
#include "../model/vocab_synth.h"
#include "folio/common.h"
#include "folio/grammar.h"
#include "folio/json_schema.h"
#include "folio/model.h"
#include "folio/sampler.h"

#define BLOCK 16

static const char *schema =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"maxLength\":24},"
    "\"age\":{\"type\":\"integer\"},"
    "\"role\":{\"enum\":[\"admin\",\"user\",\"guest\"]},"
    "\"address\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
    "\"zip\":{\"type\":\"string\",\"maxLength\":8}},\"required\":[\"city\",\"zip\"]},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
    "\"k\":{\"type\":\"string\",\"maxLength\":12},\"v\":{\"type\":\"number\"}},"
    "\"required\":[\"k\",\"v\"]},\"maxItems\":4}},"
    "\"required\":[\"name\",\"age\",\"role\",\"address\",\"tags\"]}";

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    return n ? v[n / 2] : 0;
}

/* One SentencePiece vocabulary entry as the bytes it adds to the text. */
static size_t piece_bytes(const char *tok, int32_t type, char *out)
{
    if (type == VOCAB_SYNTH_CONTROL || type == VOCAB_SYNTH_UNKNOWN)
        return 0;
    unsigned b;
    if (type == VOCAB_SYNTH_BYTE && sscanf(tok, "<0x%02X>", &b) == 1) {
        out[0] = (char)b;
        return 1;
    }
    size_t n = 0;
    for (const char *p = tok; *p;) {
        if (!strncmp(p, "\xe2\x96\x81", 3)) {
            out[n++] = ' ';
            p += 3;
        } else
            out[n++] = *p++;
    }
    return n;
}

int main(int argc, char **argv)
{
    int32_t V = 32000, B = 64, S = 48, threads = 2;
    bool distinct = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--vocab") && i + 1 < argc)
            V = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--streams") && i + 1 < argc)
            B = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            S = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--distinct"))
            distinct = true;
        else {
            fprintf(stderr, "usage: bench_grammar [--vocab N] [--streams B] [--steps S] "
                            "[--threads T] [--distinct]\n");
            return 2;
        }
    }
    struct model_hparams hp;
    struct model *m;
    if (model_preset("tiny", &hp))
        return 1;
    hp.n_vocab = V;
    if (model__alloc(&hp, &m))
        return 1;
    model__fill_random(m, 7);
    struct vocab_synth vs;
    if (vocab_synth_build(V, &vs))
        return 1;
    const char **piece = malloc(sizeof(char *) * (size_t)V);
    size_t *plen = malloc(sizeof(size_t) * (size_t)V);
    bool *eog = calloc((size_t)V, 1);
    char *bytes = malloc((size_t)V * 64);
    for (int32_t i = 0; i < V; i++) {
        piece[i] = bytes + (size_t)i * 64;
        plen[i] = piece_bytes(vs.tokens[i], vs.types[i], bytes + (size_t)i * 64);
        eog[i] = i == VOCAB_SYNTH_EOS_ID;
    }
    gram_vocab_t *gv;
    uint64_t t0 = folio_now_ns();
    if (gram_vocab_new(V, piece, plen, eog, &gv))
        return 1;
    double t_vocab = (folio_now_ns() - t0) * 1e-6;
    char *gbnf, err[256];
    if (json_schema_to_gbnf(schema, strlen(schema), &gbnf, err, sizeof(err))) {
        fprintf(stderr, "schema: %s\n", err);
        return 1;
    }
    gram_t **g = calloc((size_t)B, sizeof(*g));
    for (int32_t s = 0; s < B; s++)
        if (s == 0 || distinct) {
            if (gram_compile(gbnf, strlen(gbnf), &g[s], err, sizeof(err))) {
                fprintf(stderr, "grammar: %s\n", err);
                return 1;
            }
        } else {
            g[s] = g[0];
            gram_ref(g[0]);
        }
    gram_matcher_t **gm = calloc((size_t)B, sizeof(*gm));
    for (int32_t s = 0; s < B; s++)
        gram_matcher_new(g[s], &gm[s]);

    /* K/V for B sequences of up to p0 + S tokens */
    const int32_t p0 = 32, per_seq = (p0 + S + BLOCK - 1) / BLOCK;
    const struct pager_config pc = {.num_blocks = per_seq * B,
                                    .block_size = BLOCK,
                                    .n_layers = hp.n_layers,
                                    .n_kv_heads = hp.n_kv_heads,
                                    .head_dim = hp.head_dim,
                                    .dtype = FOLIO_F32};
    struct pager_kv_view kv;
    const size_t kv_bytes = pager_kv_layout(&pc, &kv);
    kv.base = folio_aligned_alloc(64, kv_bytes);
    memset(kv.base, 0, kv_bytes);
    int32_t *bt = malloc(sizeof(int32_t) * (size_t)kv.num_blocks);
    for (int32_t i = 0; i < kv.num_blocks; i++)
        bt[i] = i;
    struct model_ctx_config cfg = {.max_tokens = B, .max_slices = B, .n_threads = threads};
    model_ctx_t *ctx;
    if (model_ctx_new(m, &kv, &cfg, &ctx) < 0)
        return 1;
    float *logits = malloc(sizeof(float) * (size_t)B * V);
    void *work = malloc(sampler_work_size(V));
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)B);
    struct model_slice *sl = malloc(sizeof(*sl) * (size_t)B);
    for (int32_t s = 0; s < B; s++)
        tok[s] = 259 + s;
    double *fwd = malloc(sizeof(double) * S), *smp = malloc(sizeof(double) * S),
           *msk = malloc(sizeof(double) * S), *acc = malloc(sizeof(double) * S);
    int docs = 0;
    struct sampler_params sp = {.temperature = 1.0f, .seed = 11};
    for (int32_t st = 0; st < S; st++) {
        for (int32_t s = 0; s < B; s++)
            sl[s] = (struct model_slice){.first_pos = p0 + st,
                                         .n_tokens = 1,
                                         .block_table = bt + (size_t)s * per_seq,
                                         .sample = true};
        struct model_batch b = {.n_tokens = B, .tokens = tok, .n_slices = B, .slices = sl};
        t0 = folio_now_ns();
        if (model_forward(ctx, &b, logits) < 0)
            return 1;
        fwd[st] = (folio_now_ns() - t0) * 1e-6;
        double tm = 0, ts = 0, ta = 0;
        for (int32_t s = 0; s < B; s++) {
            float *row = logits + (size_t)s * V;
            uint64_t a = folio_now_ns();
            if (gram_matcher_apply(gm[s], gv, GRAM_NO_BUDGET, row) <= 0)
                return 1;
            uint64_t c = folio_now_ns();
            sp.seed = 11 + (uint64_t)s;
            if (sampler_sample(&sp, row, V, (uint64_t)st, work, 0, &tok[s], NULL))
                return 1;
            uint64_t d = folio_now_ns();
            bool end = eog[tok[s]];
            if (!end && gram_matcher_accept(gm[s], gv, tok[s]))
                return 1;
            uint64_t e = folio_now_ns();
            tm += (c - a) * 1e-6, ts += (d - c) * 1e-6, ta += (e - d) * 1e-6;
            if (end || gram_matcher_finished(gm[s])) { /* a new document */
                gram_matcher_free(gm[s]);
                gram_matcher_new(g[s], &gm[s]);
                docs++;
                if (end)
                    tok[s] = 259;
            }
        }
        msk[st] = tm, smp[st] = ts, acc[st] = ta;
    }
    /* the first steps visit new states (vocabulary walks): report them
     * apart from the steady state */
    int warm = S / 4;
    double cold_mask = 0;
    for (int i = 0; i < warm; i++)
        cold_mask += msk[i];
    double f = median(fwd + warm, S - warm), s_ = median(smp + warm, S - warm),
           mk = median(msk + warm, S - warm), ac = median(acc + warm, S - warm);
    int32_t n_states = 0;
    for (int32_t s = 0; s < B; s++)
        if (s == 0 || distinct)
            n_states += gram_n_states(g[s]);
    printf("| vocab | streams | grammars | forward ms | sample ms | unconstrained step ms | mask "
           "ms | accept ms | constrained / unconstrained | first %d steps' mask ms (mean) | "
           "states | docs |\n",
           warm);
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    printf("| %d | %d | %s | %.2f | %.2f | %.2f | %.3f | %.3f | +%.1f%% | %.2f | %d | %d |\n", V, B,
           distinct ? "one per stream" : "one shared", f, s_, f + s_, mk, ac,
           100 * (mk + ac) / (f + s_), cold_mask / warm, n_states, docs);
    printf("(medians over steps %d..%d; vocabulary table built in %.1f ms, once per model)\n", warm,
           S - 1, t_vocab);
    for (int32_t s = 0; s < B; s++) {
        gram_matcher_free(gm[s]);
        gram_unref(g[s]);
    }
    model_ctx_free(ctx);
    model_free(m);
    folio_free(kv.base);
    gram_vocab_free(gv);
    vocab_synth_free(&vs);
    free(gbnf);
    return 0;
}
