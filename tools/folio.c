/*
 * tools/folio.c — `folio SUBCOMMAND ...`: dispatch to tools/cmd_*.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio_cmds.h"

/* One line per subcommand (keep sorted). */
int folio_arg_int(const char *s, long lo, long hi, int32_t *out)
{
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -EINVAL;
    *out = (int32_t)v;
    return 0;
}

int folio_arg_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    const double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return -EINVAL;
    *out = v;
    return 0;
}

const struct folio_cmd folio_cmds[] = {
    {"bench", cmd_bench, "load-test a server (foliod or OpenAI-compatible)"},
    {"complete", cmd_complete,
     "one completion from a running foliod (--stream prints as it arrives)"},
    {"eval", cmd_eval, "offline forward pass: top logits, greedy continuation"},
    {"gen-lora", cmd_gen_lora, "write a synthetic LoRA adapter for a model as a GGUF file"},
    {"gen-model", cmd_gen_model, "write a synthetic llama model as a GGUF file"},
    {"imatrix", cmd_imatrix, "importance matrix of a model on a text, for quantize --imatrix"},
    {"perplexity", cmd_perplexity,
     "perplexity on a text; with --base, KL divergence from another model's predictions"},
    {"plan", cmd_plan, "KV-cache memory budget of a model (bytes per token, blocks, fit)"},
    {"quantize", cmd_quantize, "rewrite a GGUF model's matrices as F16, BF16, Q8_0 or K-quants"},
    {"sim", cmd_sim, "simulate the scheduler and pager on a request trace (no model)"},
    {"tokenize", cmd_tokenize, "show a model's tokens for a text (or decode ids)"},
    {"top", cmd_top, "live view of a running foliod's KV pool, queues and tenants"},
    {NULL, NULL, NULL},
};
const int folio_n_cmds = (int)(sizeof(folio_cmds) / sizeof(folio_cmds[0])) - 1;

static void usage(FILE *out)
{
    fprintf(out, "usage: folio COMMAND [ARGS]\n\ncommands:\n");
    for (int i = 0; i < folio_n_cmds; i++)
        fprintf(out, "  %-10s %s\n", folio_cmds[i].name, folio_cmds[i].summary);
    fprintf(out, "\n'folio COMMAND --help' describes one command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (int i = 0; i < folio_n_cmds; i++)
        if (!strcmp(argv[1], folio_cmds[i].name))
            return folio_cmds[i].run(argc - 1, argv + 1);
    fprintf(stderr, "folio: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
