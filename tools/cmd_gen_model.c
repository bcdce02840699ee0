/*
 * tools/cmd_gen_model.c — `folio gen-model`: write a synthetic
 * llama, qwen2 or qwen3 model as a GGUF v3 file (model_gen_file).
 *
 * Exit status: 0 written, 1 failure (the message names the file), 2 usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/model.h"
#include "folio_cmds.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: folio gen-model --preset tiny|small|medium --seed N\n"
                 "                       [--dtype f32|f16|bf16|q8_0] [--up-dtype T] [--f16]\n"
                 "                       [--arch llama|qwen2|qwen3] [--rope-scaling SPEC]\n"
                 "                       [--sliding-window N] [--reranker]\n"
                 "                       [--vocab FILE.gguf | --vocab-size N]\n"
                 "                       -o OUT.gguf\n"
                 "\n"
                 "Writes a synthetic model with deterministic random weights (the same\n"
                 "arguments give byte-identical files).\n"
                 "  --arch A       llama (default); qwen2 (Q/K/V biases, NeoX RoPE, output tied\n"
                 "                 to the embedding); qwen3 (per-head Q/K RMSNorm, NeoX RoPE)\n"
                 "  --rope-scaling linear:FACTOR | yarn:FACTOR[:ORIG_CTX] |\n"
                 "                 llama3:FACTOR[:ORIG_CTX[:LOW:HIGH]]\n"
                 "                 write the RoPE scaling keys (ORIG_CTX: the original context,\n"
                 "                 default the preset's 2048); llama3 writes the tensor\n"
                 "                 rope_freqs.weight (per-dimension divisors; LOW, HIGH: the\n"
                 "                 low/high frequency factors, default 1 and 4) and no keys\n"
                 "  --sliding-window N  write ARCH.attention.sliding_window = N\n"
                 "  --reranker     a reranker (with --arch qwen3): a classification head\n"
                 "                 cls.output.weight (labels yes, no), pooling_type rank and\n"
                 "                 a tokenizer.chat_template.rerank with {query} and {document},\n"
                 "                 as llama.cpp's converter writes Qwen3 rerankers\n"
                 "  --preset P     tiny (dim 512, 8 layers), small (768, 12), medium (1024, 24)\n"
                 "  --seed N       weight seed (unsigned 64-bit)\n"
                 "  --dtype T      the matrices' type (every 2-D tensor, token_embd and output\n"
                 "                 included): f32 (default), f16, bf16 or q8_0 (blocks of 32,\n"
                 "                 rounded as llama.cpp does); norms stay f32\n"
                 "  --f16          same as --dtype f16\n"
                 "  --up-dtype T   ffn_up's type when it should differ from --dtype's (a file\n"
                 "                 whose gate and up types differ)\n"
                 "  --vocab FILE   copy the tokenizer.* keys of another GGUF file (the model's\n"
                 "                 vocabulary size follows it); default: a synthetic\n"
                 "                 SentencePiece vocabulary of 32000 tokens\n"
                 "  --vocab-size N the synthetic vocabulary's size instead (512 .. 1048576;\n"
                 "                 smaller files, for tests)\n"
                 "  -o, --output F the file to write (written to F.tmp, then renamed)\n");
}

static int bad(const char *fmt, const char *arg)
{
    fprintf(stderr, "folio gen-model: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    usage(stderr);
    return 2;
}

int cmd_gen_model(int argc, char **argv)
{
    struct model_gen_opts o = {0};
    const char *out = NULL, *seed = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--f16")) {
            o.dtype = "f16";
            continue;
        }
        if (!strcmp(a, "--reranker")) {
            o.reranker = true;
            continue;
        }
        bool takes = !strcmp(a, "--preset") || !strcmp(a, "--seed") || !strcmp(a, "--dtype") ||
                     !strcmp(a, "--vocab") || !strcmp(a, "-o") || !strcmp(a, "--output") ||
                     !strcmp(a, "--arch") || !strcmp(a, "--rope-scaling") ||
                     !strcmp(a, "--sliding-window") || !strcmp(a, "--up-dtype") ||
                     !strcmp(a, "--vocab-size");
        if (!takes)
            return bad("unknown argument '%s'", a);
        if (i + 1 >= argc)
            return bad("%s needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--preset")) {
            o.preset = v;
        } else if (!strcmp(a, "--seed")) {
            seed = v;
        } else if (!strcmp(a, "--dtype")) {
            if (strcmp(v, "f32") && strcmp(v, "f16") && strcmp(v, "bf16") && strcmp(v, "q8_0"))
                return bad("--dtype must be f32, f16, bf16 or q8_0, not '%s'", v);
            o.dtype = v;
        } else if (!strcmp(a, "--up-dtype")) {
            if (strcmp(v, "f32") && strcmp(v, "f16") && strcmp(v, "bf16") && strcmp(v, "q8_0"))
                return bad("--up-dtype must be f32, f16, bf16 or q8_0, not '%s'", v);
            o.up_dtype = v;
        } else if (!strcmp(a, "--vocab")) {
            o.vocab_path = v;
        } else if (!strcmp(a, "--arch")) {
            if (strcmp(v, "llama") && strcmp(v, "qwen2") && strcmp(v, "qwen3"))
                return bad("--arch must be llama, qwen2 or qwen3, not '%s'", v);
            o.arch = v;
        } else if (!strcmp(a, "--rope-scaling")) {
            char kind[8] = {0};
            float f = 0, lo = 0, hi = 0;
            int orig = 0, n = sscanf(v, "%7[a-z0-9]:%f:%d:%f:%f", kind, &f, &orig, &lo, &hi);
            bool llama3 = !strcmp(kind, "llama3");
            if (n < 2 || !(f > 0) || orig < 0 ||
                (strcmp(kind, "linear") && strcmp(kind, "yarn") && !llama3) ||
                (n >= 3 && !strcmp(kind, "linear")) || (n > 3 && !llama3) || n == 4 ||
                (n == 5 && !(hi > lo && lo > 0)))
                return bad("--rope-scaling wants linear:FACTOR, yarn:FACTOR[:ORIG] or "
                           "llama3:FACTOR[:ORIG[:LOW:HIGH]], not '%s'",
                           v);
            o.rope_scaling = llama3                  ? MODEL_ROPE_LLAMA3
                             : !strcmp(kind, "yarn") ? MODEL_ROPE_YARN
                                                     : MODEL_ROPE_LINEAR;
            o.rope_factor = f;
            o.rope_orig_ctx = orig;
            o.rope_low_freq = lo;
            o.rope_high_freq = hi;
        } else if (!strcmp(a, "--vocab-size")) {
            char *e;
            long n = strtol(v, &e, 10);
            if (*e || n < 512 || n > (1 << 20))
                return bad("--vocab-size wants 512 .. 1048576, not '%s'", v);
            o.n_vocab = (int32_t)n;
        } else if (!strcmp(a, "--sliding-window")) {
            char *e;
            long w = strtol(v, &e, 10);
            if (*e || w < 1 || w > (1 << 24))
                return bad("--sliding-window wants a positive integer, not '%s'", v);
            o.sliding_window = (int32_t)w;
        } else {
            out = v;
        }
    }
    if (!o.preset)
        return bad("%s", "--preset is required");
    if (o.vocab_path && o.n_vocab)
        return bad("%s", "--vocab and --vocab-size exclude each other");
    if (strcmp(o.preset, "tiny") && strcmp(o.preset, "small") && strcmp(o.preset, "medium"))
        return bad("unknown preset '%s' (want tiny, small or medium)", o.preset);
    if (!seed)
        return bad("%s", "--seed is required");
    char *end;
    errno = 0;
    if (seed[0] == '-' || seed[0] == 0 ||
        (o.seed = strtoull(seed, &end, 10), errno != 0 || *end != 0))
        return bad("--seed must be an unsigned integer, not '%s'", seed);
    if (!out || !out[0])
        return bad("%s", "-o OUT.gguf is required");

    char err[512];
    int rc = model_gen_file(&o, out, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "folio gen-model: %s\n", err[0] ? err : strerror(-rc));
        return 1;
    }
    return 0;
}
