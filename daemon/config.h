/*
 * daemon/config.h — foliod's configuration: one option table drives argv
 * parsing, the INI file (--config FILE), --help, validation and the config
 * dump (--dump-config, which prints an INI file that reads back to the same
 * configuration).
 *
 * Precedence: built-in default < config file < command line.  Tenants are
 * INI sections [tenant.NAME] with keys uid, weight, max_kv_blocks,
 * max_running, max_waiting, api_key; tenant 0 is always "default" (the
 * tenant of peers that match no uid when unknown-uid = default).
 *
 * Ownership: srv_config_parse fills a struct srv_config whose strings and
 * tenant array belong to it; srv_config_free releases them.  Not
 * thread-safe; parsed once at start.
 */
#ifndef FOLIO_DAEMON_CONFIG_H
#define FOLIO_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define SRV_MAX_TENANTS 64

struct srv_tenant_cfg {
    char *name;
    int64_t uid;           /* -1: none */
    int64_t weight;        /* fair-share weight, 1..1000 */
    int64_t max_kv_blocks; /* 0 = unlimited */
    int64_t max_running;   /* 0 = unlimited */
    int64_t max_waiting;   /* 0 = unlimited */
    char *api_key;         /* NULL: none */
};

enum srv_unknown_uid { SRV_UNKNOWN_UID_DEFAULT, SRV_UNKNOWN_UID_REFUSE };

struct srv_config {
    /* strings: owned, NULL when unset (defaults are resolved at parse) */
    char *model, *socket, *listen, *kv_dtype, *config, *unknown_uid, *log_level, *chat_template;
    char *matmul; /* auto|openblas|onednn */
    /* the enum options as C enums, parsed with their strings (the index of
     * the value in the option's list of choices) */
    int kv_dtype_id;      /* enum folio_dtype (common.h): same order as the choices */
    int unknown_uid_id;   /* enum srv_unknown_uid */
    int log_level_id;     /* enum srv_log_level (log.h): error, info, debug */
    int chat_template_id; /* 0: auto, else enum chat_template (chat.h) */
    int matmul_id;        /* enum model_matmul (model.h): auto, openblas, onednn */
    int64_t kv_mem, kv_blocks, block_size, max_batch_tokens, max_seqs, threads;
    int64_t max_body, max_pending_output, drain_timeout_ms, max_connections, idle_timeout_ms;
    bool help, dump;
    bool batch_invariant;           /* --batch-invariant (model_ctx_config.batch_invariant) */
    uint64_t set_mask;              /* bit i: option i of the table was given explicitly */
    struct srv_tenant_cfg *tenants; /* [n_tenants]; [0] is "default" */
    int n_tenants;
};

/* Parses argv (argv[0] is the program) and, with --config, the INI file.
 * Returns 0 (check cfg->help / cfg->dump) or -EINVAL with a message naming
 * the option in err.  On error cfg is still safe to srv_config_free. */
int srv_config_parse(struct srv_config *cfg, int argc, char **argv, char *err, size_t errlen);
/* Parses an INI text (as a config file) on top of cfg; for tests. */
int srv_config_parse_ini_string(struct srv_config *cfg, const char *text, char *err, size_t errlen);
void srv_config_free(struct srv_config *cfg);
void srv_config_help(FILE *out);
/* Writes the effective configuration as an INI file. */
void srv_config_dump(const struct srv_config *cfg, FILE *out);

/* Decimal integer, whole string.  -EINVAL, -ERANGE. */
int srv_parse_int(const char *s, int64_t *out);

/* Tenant index for a uid (or -1), for an API key (or -1). */
int srv_config_tenant_by_uid(const struct srv_config *cfg, int64_t uid);
int srv_config_tenant_by_key(const struct srv_config *cfg, const char *key);
/* True when some tenant has an api_key (TCP then requires one). */
bool srv_config_has_keys(const struct srv_config *cfg);

#endif
