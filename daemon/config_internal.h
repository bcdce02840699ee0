/*
 * daemon/config_internal.h — the option table's row type and the
 * operations config.c uses on it (config_opts.c).  Not for the rest of the
 * daemon: struct srv_config (config.h) is the interface.
 */
#ifndef FOLIO_DAEMON_CONFIG_INTERNAL_H
#define FOLIO_DAEMON_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum opt_type { OPT_STR, OPT_INT, OPT_SIZE, OPT_ENUM, OPT_BOOL };

struct opt {
    const char *name;
    enum opt_type type;
    int64_t min, max;    /* OPT_INT / OPT_SIZE */
    const char *def;     /* default, as text; NULL = unset */
    const char *choices; /* OPT_ENUM: "a|b|c" */
    size_t off;          /* offsetof(struct srv_config, field) */
    const char *arg;     /* metavariable for --help */
    const char *help;
    size_t eoff; /* OPT_ENUM: offset of the int that gets the choice's index (0: none) */
};

/* The tables (config_opts.c): options (struct srv_config) and tenant keys
 * (struct srv_tenant_cfg). */
extern const struct opt srv__opts[];
extern const size_t srv__n_opts;
extern const struct opt srv__tenant_keys[];
extern const size_t srv__n_tenant_keys;
#define N_OPTS ((int)srv__n_opts)

/* Stores text value v into the field of o inside base.  `who` names the
 * option in messages ("--kv-mem", "tenant.a: weight"); err may be NULL. */
int srv__opt_set(const struct opt *o, void *base, const char *v, const char *who, char *err,
                 size_t errlen);
/* The row of tab named name[0..len) ('-' and '_' alike), or -1. */
int srv__opt_find(const struct opt *tab, int n, const char *name, size_t len);
/* Options that make sense only on the command line (not in the file or
 * the dump). */
bool srv__opt_cmdline_only(const struct opt *o);
/* One `name = value` line of the INI dump. */
void srv__opt_dump(const struct opt *o, const void *base, FILE *out);
/* Field o equal in a and b; copied from src into dst (strings duplicated;
 * 0 or -ENOMEM). */
bool srv__opt_value_eq(const struct opt *o, const void *a, const void *b);
int srv__opt_copy(const struct opt *o, void *dst, const void *src);

#endif
