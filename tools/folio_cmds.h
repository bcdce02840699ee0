/*
 * tools/folio_cmds.h — the subcommands of `folio`.  Each lives in its own
 * tools/cmd_<name>.c, takes argv starting at the subcommand's name and
 * returns the process exit status (0 ok, 1 failure, 2 usage).
 */
#ifndef FOLIO_TOOLS_CMDS_H
#define FOLIO_TOOLS_CMDS_H

#include <stdint.h>

struct folio_cmd {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

/* A whole decimal number in [lo, hi] (the subcommands' integer options):
 * 0, or -EINVAL with *out untouched.  In tools/folio.c. */
int folio_arg_int(const char *s, long lo, long hi, int32_t *out);
/* A finite decimal number in [lo, hi]: 0, or -EINVAL with *out untouched. */
int folio_arg_double(const char *s, double lo, double hi, double *out);

/* Subcommand table, in tools/folio.c. */
extern const struct folio_cmd folio_cmds[];
extern const int folio_n_cmds;

int cmd_bench(int argc, char **argv);
int cmd_complete(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_gen_model(int argc, char **argv);
int cmd_gen_lora(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_imatrix(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_top(int argc, char **argv);

#endif
