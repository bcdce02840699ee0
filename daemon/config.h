/*
 * daemon/config.h — foliod's configuration: one option table drives argv
 * parsing, the INI file (--config FILE), --help, validation and the config
 * dump (--dump-config, which prints an INI file that reads back to the same
 * configuration).
 *
 * Precedence: built-in default < config file < command line.  Tenants are
 * INI sections [tenant.NAME] with keys uid, weight, max_kv_blocks,
 * max_running, max_waiting, api_key; tenant 0 is always "default" (the
 * operator's tenant, TCP's with --insecure-listen, and the template of
 * the per-uid tenants of unconfigured peers: see auth.h).
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

#include "folio/common.h"

#define SRV_MAX_TENANTS 64

struct srv_tenant_cfg {
    char *name;
    int64_t uid;           /* -1: none */
    int64_t weight;        /* fair-share weight, 1..1000 */
    int64_t max_kv_blocks; /* 0 = unlimited */
    int64_t max_running;   /* 0 = unlimited */
    int64_t max_waiting;   /* 0 = unlimited */
    char *api_key;         /* NULL: none */
    char *loras;           /* LoRA adapters it may name, comma-separated; NULL: all; "none" */
};

/* Socket peers whose uid names no tenant: each its own tenant, or 403. */
enum srv_unknown_uid { SRV_UNKNOWN_UID_OWN, SRV_UNKNOWN_UID_REFUSE };
/* kv_dtype_id of "auto" (the ids before it are enum folio_dtype's) */
#define SRV_KV_DTYPE_AUTO (FOLIO_Q8 + 1)
/* What a tenant (not the operator) gets from /metrics, /v1/kv, /dashboard. */
enum srv_tenant_views { SRV_TENANT_VIEWS_DENY, SRV_TENANT_VIEWS_OWN };

#define SRV_MAX_OPERATOR_UIDS 16
/* LoRA adapters --lora may name */
#define SRV_MAX_LORAS     16
#define SRV_LORA_NAME_MAX 64

struct srv_config {
    /* strings: owned, NULL when unset (defaults are resolved at parse) */
    char *model, *socket, *listen, *kv_dtype, *config, *unknown_uid, *log_level, *chat_template;
    char *matmul;        /* auto|openblas|onednn */
    char *pooling;       /* auto|mean|cls|last: /v1/embeddings */
    char *operator_key;  /* TCP key of the operator (sees every tenant); NULL: none */
    char *allowed_hosts; /* extra Host names accepted on TCP, comma-separated */
    char *operator_uids; /* socket uids that are the operator ("0, 1000", "none"); NULL: default */
    char *tenant_views;  /* deny|own */
    char *log_format, *log_file, *access_log;
    char *replica_id; /* X-Folio-Replica header value; NULL: the host name */
    char *lora;       /* --lora NAME=PATH[,NAME=PATH...] as given; NULL: none */
    /* --lora parsed (config_finish): adapter i is "model": lora_names[i];
     * the strings point into lora_buf (owned) */
    int n_loras;
    const char *lora_names[SRV_MAX_LORAS], *lora_paths[SRV_MAX_LORAS];
    char *lora_buf;
    /* the enum options as C enums, parsed with their strings (the index of
     * the value in the option's list of choices) */
    int kv_dtype_id;      /* enum folio_dtype (common.h): same order as the choices;
                             SRV_KV_DTYPE_AUTO: the model's (model_kv_dtype_auto) */
    int unknown_uid_id;   /* enum srv_unknown_uid */
    int tenant_views_id;  /* enum srv_tenant_views */
    int log_level_id;     /* enum srv_log_level (log.h): error, info, debug */
    int chat_template_id; /* 0: auto, else enum chat_template (chat.h) */
    int matmul_id;        /* enum model_matmul (model.h): auto, openblas, onednn */
    int pooling_id;       /* 0: auto, 1 mean, 2 cls, 3 last (enum srv_pooling) */
    int log_format_id;    /* enum srv_log_format (log.h) */
    int access_log_id;    /* 0: on, 1: off */
    int64_t kv_mem, kv_blocks, block_size, max_batch_tokens, max_seqs, threads;
    int64_t admit_wait_ms; /* engine.c's wait for new requests after a step that finished some */
    int64_t max_body, max_pending_output, drain_timeout_ms, max_connections, idle_timeout_ms;
    int64_t max_client_connections, max_buffered, max_client_buffered;
    int64_t responses_store; /* bytes of Responses each tenant may keep (resp_store.h) */
    bool help, dump, version, insecure_listen;
    bool strict_api;                /* unknown request fields are a 400 (else ignored) */
    bool batch_invariant;           /* --batch-invariant (model_ctx_config.batch_invariant) */
    bool no_warmup;                 /* --no-warmup: no forward step before serving */
    bool kv_lazy;                   /* --kv-lazy: KV pages committed as first written */
    uint64_t set_mask;              /* bit i: option i of the table was given explicitly */
    uint64_t argv_mask;             /* bit i: ... on the command line */
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

/* SIGHUP: parses argv (the daemon's own) and its config file again.  The
 * tenant sections apply to cur in place: tenants matched by name get every
 * key of the new file, new tenants are appended (their index is stable),
 * and a tenant no longer in the file keeps its slot with neither uid nor
 * key.  [foliod] options are not applied: the ones whose value differs are
 * listed in r->kept ("--kv-mem, --threads").  r->tenants says what changed
 * ("+new ~changed -removed"), r->changed has a bit per tenant index to push
 * to the scheduler.  On error (-EINVAL with err) cur is unchanged unless a
 * tenant could not be appended. */
struct srv_config_reload {
    char kept[512];
    char tenants[512];
    uint64_t changed[(SRV_MAX_TENANTS + 63) / 64];
};
int srv_config_reload(struct srv_config *cur, int argc, char **argv, struct srv_config_reload *r,
                      char *err, size_t errlen);

/* Decimal integer, whole string.  -EINVAL, -ERANGE. */
int srv_parse_int(const char *s, int64_t *out);
/* A list of uids ("0, 1000": commas and/or spaces) into out[cap]: how
 * many (0 for "none"), or -EINVAL (not a uid, too many, or empty). */
int srv_parse_uid_list(const char *s, int64_t *out, int cap);

/* Tenant index for a uid (or -1).  (Keys: auth.c compares digests.) */
int srv_config_tenant_by_uid(const struct srv_config *cfg, int64_t uid);
/* True when tenant t may name LoRA adapter `name` (its `loras` key lists
 * it, or it has none); an adapter it may not name is, to it, a model that
 * does not exist. */
bool srv_tenant_may_lora(const struct srv_tenant_cfg *t, const char *name);
/* True when some tenant has an api_key or an operator-key is set (TCP
 * then requires one). */
bool srv_config_has_keys(const struct srv_config *cfg);

#endif
