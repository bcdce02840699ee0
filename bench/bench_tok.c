/*
 * bench/bench_tok.c — tokenizer throughput: encode (MB/s, tokens/s) of
 * English text and of mixed-script text, decode, and the streaming
 * detokenizer's cost per token.
 *
 *   bench_tok VOCAB.gguf [seconds]
 *
 * Single-threaded; the text is built in memory (a paragraph repeated to
 * ~64 KiB, and the same with CJK/emoji mixed in).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"
#include "folio/gguf.h"
#include "folio/tokenizer.h"

static const char para[] =
    "The history of the city is long and complicated. In the early years, people came from "
    "many different places to work in the factories and on the farms around it. They built "
    "houses, schools and churches, and over time the small town grew into one of the largest "
    "cities in the country. Would you like to visit it next summer? I think you should.\n";
static const char mixed[] =
    "Hello 世界! 🦙 llamas; Привет, как дела? 東京は晴れ。 x=42 ✅\n";

static double secs(uint64_t a, uint64_t b)
{
    return (double)(b - a) / 1e9;
}

static void bench_encode(const tok_t *t, const char *name, const char *unit, double budget)
{
    size_t ul = strlen(unit), len = 0, cap = 64 * 1024;
    char *text = malloc(cap + ul);
    while (len + ul <= cap) {
        memcpy(text + len, unit, ul);
        len += ul;
    }
    int32_t n = 0, idcap = (int32_t)len + 16;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)idcap);
    char *dec = malloc(len * 2 + 16);
    long iters = 0;
    uint64_t t0 = folio_now_ns(), t1;
    do {
        if (tok_encode(t, text, len, false, false, ids, idcap, &n) != 0) {
            fprintf(stderr, "encode failed\n");
            exit(1);
        }
        iters++;
        t1 = folio_now_ns();
    } while (secs(t0, t1) < budget);
    double s = secs(t0, t1) / iters;
    printf("  encode %-8s %7.1f MB/s  %9.0f tokens/s  (%zu bytes -> %d tokens, %.2f B/token)\n",
           name, len / s / 1e6, n / s, len, n, (double)len / n);
    size_t dl;
    iters = 0;
    t0 = folio_now_ns();
    do {
        tok_decode(t, ids, (size_t)n, 0, dec, len * 2 + 16, &dl);
        iters++;
        t1 = folio_now_ns();
    } while (secs(t0, t1) < budget / 2);
    s = secs(t0, t1) / iters;
    printf("  decode %-8s %7.1f MB/s  %9.0f tokens/s\n", name, dl / s / 1e6, n / s);
    /* streaming: one feed per token, two stop strings that never match */
    const char *stops[] = {"<|im_end|>", "\n\nUser:"};
    tok_detok_t *d;
    tok_detok_new(t, stops, 2, 0, &d);
    long fed = 0;
    t0 = folio_now_ns();
    do {
        tok_detok_reset(d);
        for (int32_t i = 0; i < n; i++) {
            const char *p;
            size_t l;
            tok_detok_feed(d, ids[i], &p, &l);
        }
        fed += n;
        t1 = folio_now_ns();
    } while (secs(t0, t1) < budget / 2);
    printf("  detok  %-8s %7.1f ns/token\n", name, secs(t0, t1) * 1e9 / fed);
    tok_detok_free(d);
    free(dec);
    free(ids);
    free(text);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_tok VOCAB.gguf [seconds]\n");
        return 2;
    }
    double budget = argc > 2 ? atof(argv[2]) : 1.0;
    gguf_file_t *f;
    tok_t *t;
    char err[256];
    uint64_t t0 = folio_now_ns();
    if (gguf_open(argv[1], &f, err, sizeof(err)) != 0 || tok_load(f, &t, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("%s: %d tokens, load %.1f ms\n", argv[1], tok_n_vocab(t),
           secs(t0, folio_now_ns()) * 1e3);
    bench_encode(t, "english", para, budget);
    bench_encode(t, "mixed", mixed, budget);
    tok_free(t);
    gguf_close(f);
    return 0;
}
