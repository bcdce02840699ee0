/*
 * tools/cmd_gen_lora.c — `folio gen-lora`: write a synthetic LoRA adapter
 * for a model as a GGUF adapter file (model_lora_gen_file), the format
 * llama.cpp's --lora and foliod's --lora read.
 *
 * Exit status: 0 written, 1 failure (the message names the file), 2 usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/lora.h"
#include "folio/model.h"
#include "folio_cmds.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: folio gen-lora --model FILE|default --seed N -o OUT.gguf\n"
            "                      [--rank R] [--alpha A] [--gain G] [--targets LIST]\n"
            "                      [--dtype f32|f16|bf16|q8_0]\n"
            "\n"
            "Writes a LoRA adapter for the model with deterministic random A and B (the\n"
            "same arguments give byte-identical files), as llama.cpp's\n"
            "convert_lora_to_gguf.py lays one out.\n"
            "  --model FILE   the base model (its architecture and shapes); default: the\n"
            "                 embedded model\n"
            "  --seed N       the adapter's seed (unsigned 64-bit)\n"
            "  --rank R       rank of every correction (default 16; 1 .. %d)\n"
            "  --alpha A      adapter.lora.alpha (default: the rank, so s = 1; 0: none)\n"
            "  --gain G       spread of B (default 0.5: a correction about half the size\n"
            "                 of the base product's output)\n"
            "  --targets L    the matrices to adapt: q,k,v,o,gate,up,down (any subset;\n"
            "                 default all)\n"
            "  --dtype T      the tensors' type: f32 (default), f16, bf16, q8_0\n"
            "  -o, --output F the file to write (written to F.tmp, then renamed)\n",
            MODEL_LORA_MAX_RANK);
}

int cmd_gen_lora(int argc, char **argv)
{
    struct model_lora_gen_opts o = {.rank = 16, .alpha = -1};
    const char *out = NULL, *model_path = NULL;
    bool have_seed = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "folio gen-lora: %s needs a value\n", a);
            return 2;
        }
        int rc = 0;
        double d;
        if (!strcmp(a, "--model")) {
            model_path = v;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            out = v;
        } else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            o.seed = strtoull(v, &end, 10);
            rc = errno || end == v || *end || v[0] == '-' ? -EINVAL : 0;
            have_seed = true;
        } else if (!strcmp(a, "--rank")) {
            rc = folio_arg_int(v, 1, MODEL_LORA_MAX_RANK, &o.rank);
        } else if (!strcmp(a, "--alpha")) {
            if (!(rc = folio_arg_double(v, 0, 1e6, &d)))
                o.alpha = (float)d;
        } else if (!strcmp(a, "--gain")) {
            if (!(rc = folio_arg_double(v, 1e-6, 1e3, &d)))
                o.gain = (float)d;
        } else if (!strcmp(a, "--targets")) {
            rc = model_lora_targets_parse(v, &o.targets);
        } else if (!strcmp(a, "--dtype")) {
            o.dtype = v; /* checked by model_lora_gen_file */
        } else {
            fprintf(stderr, "folio gen-lora: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (rc) {
            fprintf(stderr, "folio gen-lora: bad value for %s: '%s'\n", a, v);
            return 2;
        }
        i++;
    }
    if (!out || !have_seed) {
        fprintf(stderr, "folio gen-lora: %s is required\n", out ? "--seed" : "-o");
        usage(stderr);
        return 2;
    }
    if (o.alpha < 0)
        o.alpha = (float)o.rank;
    char err[512] = "";
    model_t *m = NULL;
    int rc = !model_path || !strcmp(model_path, "default")
                 ? model_load_default(&m, err, sizeof(err))
                 : model_load_file(model_path, &m, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "folio gen-lora: %s\n", err[0] ? err : strerror(-rc));
        return 1;
    }
    rc = model_lora_gen_file(m, &o, out, err, sizeof(err));
    model_free(m);
    if (rc < 0) {
        fprintf(stderr, "folio gen-lora: %s\n", err[0] ? err : strerror(-rc));
        return 1;
    }
    return 0;
}
