/*
 * daemon/config.c — the option table and everything it drives.
 *
 * Each row of `opts` names one option: its spelling (argv `--name`, INI key
 * `name` or `name_with_underscores`), type, bounds, default (as text, run
 * through the same parser as user input, so defaults obey the bounds too),
 * where it lives in struct srv_config, and its help line.  argv parsing,
 * the INI handler, --help and --dump-config all walk this one table; no
 * option is spelled anywhere else.
 *
 * Tenants use a second, smaller table (`tenant_keys`) the same way.
 *
 * Validation happens per value (type and bounds, message names the option)
 * and once at the end for cross-option rules (--kv-mem vs --kv-blocks,
 * --listen needs keys or --insecure-listen, socket path length, duplicate
 * uids / keys).
 */
#include "config.h"

#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "folio/common.h"

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

#define F(field) offsetof(struct srv_config, field)
#define GiB      (1024LL * 1024 * 1024)

static const struct opt opts[] = {
    {"model", OPT_STR, 0, 0, NULL, NULL, F(model), "PATH",
     "GGUF model file (default: the embedded synthetic model)", 0},
    {"chat-template", OPT_ENUM, 0, 0, "auto",
     "auto|chatml|llama2|llama3|mistral|zephyr|phi3|qwen2|qwen2.5|deepseek3", F(chat_template),
     "NAME",
     "chat template for /v1/chat/completions (auto: the model's tokenizer.chat_template; "
     "chatml as plain text when the model has none)",
     F(chat_template_id)},
    {"socket", OPT_STR, 0, 0, NULL, NULL, F(socket), "PATH",
     "Unix socket (default $XDG_RUNTIME_DIR/foliod.sock, else ./foliod.sock)", 0},
    {"listen", OPT_STR, 0, 0, NULL, NULL, F(listen), "ADDR:PORT",
     "also listen on TCP (any address; needs API keys, or --insecure-listen)", 0},
    {"insecure-listen", OPT_BOOL, 0, 0, NULL, NULL, F(insecure_listen), NULL,
     "allow --listen without any API key: every TCP client is tenant 'default'", 0},
    {"operator-key", OPT_STR, 0, 0, NULL, NULL, F(operator_key), "KEY",
     "TCP key of the operator, who sees every tenant (put it in the config file)", 0},
    {"allowed-hosts", OPT_STR, 0, 0, NULL, NULL, F(allowed_hosts), "NAMES",
     "Host names accepted on TCP besides IP addresses and localhost (comma-separated)", 0},
    {"replica-id", OPT_STR, 0, 0, NULL, NULL, F(replica_id), "NAME",
     "name sent in every response's X-Folio-Replica header (default: the host name)", 0},
    {"kv-mem", OPT_SIZE, 4096, 1024 * GiB, "256M", NULL, F(kv_mem), "SIZE",
     "KV cache memory (k/M/G suffixes); exclusive with --kv-blocks", 0},
    {"kv-blocks", OPT_INT, 0, 1 << 24, "0", NULL, F(kv_blocks), "N",
     "KV cache size in blocks (0: from --kv-mem)", 0},
    {"block-size", OPT_INT, 1, 1024, "16", NULL, F(block_size), "N", "token slots per KV block", 0},
    {"kv-dtype", OPT_ENUM, 0, 0, "f32", "f32|f16|bf16|q8", F(kv_dtype), "f32|f16|bf16|q8",
     "KV element type (q8: int8 with a scale per token and KV head, ~3.8x the tokens of f32)",
     F(kv_dtype_id)},
    {"max-batch-tokens", OPT_INT, 1, 1 << 20, "512", NULL, F(max_batch_tokens), "N",
     "token budget of one step", 0},
    {"max-seqs", OPT_INT, 1, 65536, "64", NULL, F(max_seqs), "N", "sequences in one step", 0},
    {"threads", OPT_INT, 0, 1024, "0", NULL, F(threads), "N",
     "compute threads (0: one per online CPU)", 0},
    {"matmul", OPT_ENUM, 0, 0, "auto", "auto|openblas|onednn", F(matmul), "auto|openblas|onednn",
     "matrix-product backend (auto: oneDNN with AVX-512, else the faster on a start-up check)",
     F(matmul_id)},
    {"batch-invariant", OPT_BOOL, 0, 0, NULL, NULL, F(batch_invariant), NULL,
     "each request's tokens independent of what it is batched with (seeded sampling "
     "included): F32/F16/BF16 products on row-invariant kernels, no attention context splits",
     0},
    {"unknown-uid", OPT_ENUM, 0, 0, "own", "own|refuse", F(unknown_uid), "own|refuse",
     "socket peers whose uid names no tenant: each is its own tenant 'uid-N', or refused (403)",
     F(unknown_uid_id)},
    {"max-body", OPT_SIZE, 1024, 1 << 30, "1M", NULL, F(max_body), "SIZE",
     "largest request body (413 beyond)", 0},
    {"max-pending-output", OPT_SIZE, 4096, 1 << 30, "1M", NULL, F(max_pending_output), "SIZE",
     "unsent stream bytes above which a client that reads none for 1 s is dropped", 0},
    {"max-connections", OPT_INT, 1, 1 << 20, "4096", NULL, F(max_connections), "N",
     "open client connections (more are answered 503 and closed)", 0},
    {"max-client-connections", OPT_INT, 1, 1 << 20, "1024", NULL, F(max_client_connections), "N",
     "connections of one uid, one address or one tenant (more are answered 503)", 0},
    {"max-buffered", OPT_SIZE, 4096, 1LL << 40, "256M", NULL, F(max_buffered), "SIZE",
     "request-body bytes being received, all clients (a request beyond: 503)", 0},
    {"max-client-buffered", OPT_SIZE, 4096, 1LL << 40, "32M", NULL, F(max_client_buffered), "SIZE",
     "request-body bytes being received by one uid, address or tenant", 0},
    {"idle-timeout-ms", OPT_INT, 0, 3600 * 1000, "60000", NULL, F(idle_timeout_ms), "MS",
     "close a connection that sends no complete request, or reads none of its answer, "
     "for this long (0: never)",
     0},
    {"drain-timeout-ms", OPT_INT, 0, 3600 * 1000, "30000", NULL, F(drain_timeout_ms), "MS",
     "on SIGTERM, time running requests get to finish", 0},
    {"log-level", OPT_ENUM, 0, 0, "info", "error|info|debug", F(log_level), "LEVEL",
     "log verbosity", F(log_level_id)},
    {"log-format", OPT_ENUM, 0, 0, "auto", "auto|text|json|journal", F(log_format),
     "auto|text|json|journal",
     "log line shape (auto: journal with <N> priorities when stderr is journald's, else text "
     "with ISO-8601 times)",
     F(log_format_id)},
    {"log-file", OPT_STR, 0, 0, NULL, NULL, F(log_file), "PATH",
     "append log lines to PATH instead of stderr (reopened on SIGHUP)", 0},
    {"access-log", OPT_ENUM, 0, 0, "on", "on|off", F(access_log), "on|off",
     "one log line per HTTP request (method, path, status, tenant, tokens, TTFT, duration)",
     F(access_log_id)},
    {"config", OPT_STR, 0, 0, NULL, NULL, F(config), "FILE", "INI configuration file", 0},
    {"strict-api", OPT_BOOL, 0, 0, NULL, NULL, F(strict_api), NULL,
     "refuse request fields the API does not know (400) instead of ignoring them", 0},
    {"help", OPT_BOOL, 0, 0, NULL, NULL, F(help), NULL, "print this help and exit", 0},
    {"version", OPT_BOOL, 0, 0, NULL, NULL, F(version), NULL,
     "print the version, git revision and matmul backends and exit (also -V)", 0},
    {"dump-config", OPT_BOOL, 0, 0, NULL, NULL, F(dump), NULL,
     "print the effective configuration as INI and exit", 0},
};

#define N_OPTS ((int)FOLIO_ARRAY_LEN(opts))
/* set_mask: bit i = option i given; argv_mask: given on the command line */
_Static_assert(FOLIO_ARRAY_LEN(opts) <= 64, "set_mask holds one bit per option");

#define T(field) offsetof(struct srv_tenant_cfg, field)
static const struct opt tenant_keys[] = {
    {"uid", OPT_INT, -1, UINT32_MAX, "-1", NULL, T(uid), "UID", "peer uid of this tenant", 0},
    {"weight", OPT_INT, 1, 1000, "1", NULL, T(weight), "W", "fair-share weight", 0},
    {"max_kv_blocks", OPT_INT, 0, 1 << 24, "0", NULL, T(max_kv_blocks), "N",
     "KV blocks the tenant may hold (0 = unlimited)", 0},
    {"max_running", OPT_INT, 0, 65536, "0", NULL, T(max_running), "N",
     "running requests (0 = unlimited)", 0},
    {"max_waiting", OPT_INT, 0, 1 << 20, "0", NULL, T(max_waiting), "N",
     "waiting requests before 429 (0 = unlimited)", 0},
    {"api_key", OPT_STR, 0, 0, NULL, NULL, T(api_key), "KEY", "bearer key (TCP clients)", 0},
};

int srv_parse_int(const char *s, int64_t *out)
{
    if (!s || !*s)
        return -EINVAL;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end)
        return -EINVAL;
    if (errno == ERANGE)
        return -ERANGE;
    *out = v;
    return 0;
}

/* The index of v in "a|b|c", or -1. */
static int enum_index(const char *choices, const char *v)
{
    size_t n = strlen(v);
    const char *p = choices;
    for (int i = 0; p && *p; i++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, v, n))
            return i;
        p = bar ? bar + 1 : NULL;
    }
    return -1;
}

/* Stores text value v into the field of o inside base.  `who` names the
 * option in messages ("--kv-mem", "tenant.a: weight"). */
static int opt_set(const struct opt *o, void *base, const char *v, const char *who, char *err,
                   size_t errlen)
{
    char *field = (char *)base + o->off;
    int64_t x;
    int rc;
    switch (o->type) {
    case OPT_STR:
    case OPT_ENUM: {
        int idx = o->type == OPT_ENUM ? enum_index(o->choices, v) : 0;
        if (idx < 0) {
            folio_errf(err, errlen, "%s: '%s' is not one of %s", who, v, o->choices);
            return -EINVAL;
        }
        char *dup = folio_strdup(v);
        if (!dup)
            return -ENOMEM;
        folio_free(*(char **)field);
        *(char **)field = dup;
        if (o->eoff)
            *(int *)((char *)base + o->eoff) = idx;
        return 0;
    }
    case OPT_BOOL:
        if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes"))
            *(bool *)field = true;
        else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no"))
            *(bool *)field = false;
        else {
            folio_errf(err, errlen, "%s: '%s' is not a boolean", who, v);
            return -EINVAL;
        }
        return 0;
    case OPT_INT:
    case OPT_SIZE:
        rc = o->type == OPT_INT ? srv_parse_int(v, &x) : folio_parse_size(v, &x);
        if (rc == -EINVAL) {
            folio_errf(err, errlen, "%s: '%s' is not %s", who, v,
                       o->type == OPT_INT ? "an integer" : "a size (like 512k, 256M, 2G)");
            return rc;
        }
        if (rc || x < o->min || x > o->max) {
            folio_errf(err, errlen, "%s: %s is out of range [%lld, %lld]", who, v,
                       (long long)o->min, (long long)o->max);
            return -EINVAL;
        }
        *(int64_t *)field = x;
        return 0;
    }
    return -EINVAL;
}

/* Option names match with '-' and '_' interchangeable. */
static bool name_eq(const char *a, const char *b, size_t blen)
{
    size_t i = 0;
    for (; i < blen && a[i]; i++) {
        char x = a[i] == '_' ? '-' : a[i], y = b[i] == '_' ? '-' : b[i];
        if (x != y)
            return false;
    }
    return i == blen && !a[i];
}

static int opt_find(const struct opt *tab, int n, const char *name, size_t len)
{
    for (int i = 0; i < n; i++)
        if (name_eq(tab[i].name, name, len))
            return i;
    return -1;
}

static int tenant_add(struct srv_config *cfg, const char *name, char *err, size_t errlen)
{
    for (int i = 0; i < cfg->n_tenants; i++)
        if (!strcmp(cfg->tenants[i].name, name))
            return i;
    if (cfg->n_tenants >= SRV_MAX_TENANTS) {
        folio_errf(err, errlen, "too many tenants (at most %d)", SRV_MAX_TENANTS);
        return -EINVAL;
    }
    if (!*name || strlen(name) > 64) {
        folio_errf(err, errlen, "tenant name '%s' must be 1..64 characters", name);
        return -EINVAL;
    }
    for (const char *p = name; *p; p++)
        if (!(*p == '_' || *p == '-' || *p == '.' || (*p >= '0' && *p <= '9') ||
              (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) {
            folio_errf(err, errlen, "tenant name '%s': use letters, digits, '.', '_', '-'", name);
            return -EINVAL;
        }
    struct srv_tenant_cfg *t = folio_realloc(cfg->tenants, (cfg->n_tenants + 1) * sizeof(*t));
    if (!t)
        return -ENOMEM;
    cfg->tenants = t;
    t = &cfg->tenants[cfg->n_tenants];
    memset(t, 0, sizeof(*t));
    t->name = folio_strdup(name);
    if (!t->name)
        return -ENOMEM;
    for (size_t k = 0; k < FOLIO_ARRAY_LEN(tenant_keys); k++)
        if (tenant_keys[k].def)
            opt_set(&tenant_keys[k], t, tenant_keys[k].def, "default", NULL, 0);
    return cfg->n_tenants++;
}

/* Options that make sense only on the command line (not in the file or
 * the dump). */
static bool cmdline_only(const struct opt *o)
{
    return !strcmp(o->name, "help") || !strcmp(o->name, "dump-config") ||
           !strcmp(o->name, "config");
}

struct ini_ctx {
    struct srv_config *cfg;
    const char *file;
    char *err;
    size_t errlen;
    int rc;
};

static int config_ini_handler(void *user, const char *section, const char *name, const char *value)
{
    struct ini_ctx *c = user;
    char who[160];
    if (!*section || !strcmp(section, "foliod")) {
        int i = opt_find(opts, N_OPTS, name, strlen(name));
        if (i < 0 || cmdline_only(&opts[i])) {
            folio_errf(c->err, c->errlen, "%s: unknown option '%s'", c->file, name);
            c->rc = -EINVAL;
            return 0;
        }
        if (c->cfg->argv_mask & (1ull << i))
            return 1; /* given on the command line: it wins */
        snprintf(who, sizeof(who), "%s: %s", c->file, opts[i].name);
        int rc = opt_set(&opts[i], c->cfg, value, who, c->err, c->errlen);
        if (rc) {
            c->rc = rc;
            return 0;
        }
        c->cfg->set_mask |= 1ull << i;
        return 1;
    }
    if (!strncmp(section, "tenant.", 7)) {
        int ti = tenant_add(c->cfg, section + 7, c->err, c->errlen);
        if (ti < 0) {
            c->rc = ti;
            return 0;
        }
        int k = opt_find(tenant_keys, (int)FOLIO_ARRAY_LEN(tenant_keys), name, strlen(name));
        if (k < 0) {
            folio_errf(c->err, c->errlen, "%s: [%s]: unknown key '%s'", c->file, section, name);
            c->rc = -EINVAL;
            return 0;
        }
        snprintf(who, sizeof(who), "%s: [%s] %s", c->file, section, tenant_keys[k].name);
        int rc = opt_set(&tenant_keys[k], &c->cfg->tenants[ti], value, who, c->err, c->errlen);
        if (rc) {
            c->rc = rc;
            return 0;
        }
        return 1;
    }
    folio_errf(c->err, c->errlen, "%s: unknown section [%s] (use [foliod] or [tenant.NAME])",
               c->file, section);
    c->rc = -EINVAL;
    return 0;
}

static void config_defaults(struct srv_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    for (int i = 0; i < N_OPTS; i++)
        if (opts[i].def)
            opt_set(&opts[i], cfg, opts[i].def, opts[i].name, NULL, 0);
}

static int ini_finish(struct ini_ctx *c, int rc)
{
    if (c->rc)
        return c->rc;
    if (rc < 0) {
        folio_errf(c->err, c->errlen, "%s: cannot open: %s", c->file, strerror(errno));
        return -EINVAL;
    }
    if (rc > 0) {
        folio_errf(c->err, c->errlen, "%s:%d: syntax error", c->file, rc);
        return -EINVAL;
    }
    return 0;
}

int srv_config_parse_ini_string(struct srv_config *cfg, const char *text, char *err, size_t errlen)
{
    if (!cfg->n_tenants && tenant_add(cfg, "default", err, errlen) < 0)
        return -ENOMEM;
    struct ini_ctx c = {cfg, "config", err, errlen, 0};
    return ini_finish(&c, ini_parse_string(text, config_ini_handler, &c));
}

/* Cross-option rules, defaults that depend on the environment. */
static int config_finish(struct srv_config *cfg, char *err, size_t errlen)
{
    int i_mem = opt_find(opts, N_OPTS, "kv-mem", 6), i_blk = opt_find(opts, N_OPTS, "kv-blocks", 9);
    if ((cfg->set_mask >> i_mem & 1) && (cfg->set_mask >> i_blk & 1) && cfg->kv_blocks) {
        folio_errf(err, errlen, "--kv-mem and --kv-blocks exclude each other");
        return -EINVAL;
    }
    if (!cfg->socket) {
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        char buf[4096];
        snprintf(buf, sizeof(buf), "%s/foliod.sock", xdg && *xdg ? xdg : ".");
        cfg->socket = folio_strdup(buf);
        if (!cfg->socket)
            return -ENOMEM;
    }
    if (strlen(cfg->socket) > 107) {
        folio_errf(err, errlen,
                   "--socket: path '%s' is %zu bytes; Unix socket paths are limited to 107",
                   cfg->socket, strlen(cfg->socket));
        return -EINVAL;
    }
    if (cfg->listen) {
        const char *colon = strrchr(cfg->listen, ':');
        int64_t port;
        if (!colon || srv_parse_int(colon + 1, &port) || port < 0 || port > 65535) {
            folio_errf(err, errlen, "--listen: '%s' is not HOST:PORT", cfg->listen);
            return -EINVAL;
        }
        if (colon == cfg->listen) {
            folio_errf(err, errlen, "--listen: '%s' has no address", cfg->listen);
            return -EINVAL;
        }
        if (!srv_config_has_keys(cfg) && !cfg->insecure_listen) {
            folio_errf(err, errlen,
                       "--listen: TCP needs API keys ([tenant.NAME] api_key, or operator-key) "
                       "so that clients are known; --insecure-listen serves every TCP client "
                       "as tenant 'default' without one");
            return -EINVAL;
        }
    }
    for (int a = 0; a < cfg->n_tenants; a++)
        for (int b = a + 1; b < cfg->n_tenants; b++) {
            const struct srv_tenant_cfg *x = &cfg->tenants[a], *y = &cfg->tenants[b];
            if (x->uid >= 0 && x->uid == y->uid) {
                folio_errf(err, errlen, "tenants '%s' and '%s' have the same uid %lld", x->name,
                           y->name, (long long)x->uid);
                return -EINVAL;
            }
            if (x->api_key && y->api_key && !strcmp(x->api_key, y->api_key)) {
                folio_errf(err, errlen, "tenants '%s' and '%s' have the same api_key", x->name,
                           y->name);
                return -EINVAL;
            }
        }
    for (int a = -1; a < cfg->n_tenants; a++) {
        const char *k = a < 0 ? cfg->operator_key : cfg->tenants[a].api_key;
        if (k && (!*k || strlen(k) > 1000)) {
            folio_errf(err, errlen, "%s%s: a key is 1..1000 bytes",
                       a < 0 ? "operator-key" : "tenant ", a < 0 ? "" : cfg->tenants[a].name);
            return -EINVAL;
        }
    }
    for (int a = 0; a < cfg->n_tenants; a++)
        if (cfg->operator_key && cfg->tenants[a].api_key &&
            !strcmp(cfg->operator_key, cfg->tenants[a].api_key)) {
            folio_errf(err, errlen, "tenant '%s' has the operator-key as its api_key",
                       cfg->tenants[a].name);
            return -EINVAL;
        }
    return 0;
}

int srv_config_parse(struct srv_config *cfg, int argc, char **argv, char *err, size_t errlen)
{
    config_defaults(cfg);
    if (tenant_add(cfg, "default", err, errlen) < 0)
        return -ENOMEM;
    /* Pass 1: the command line (it wins over the file, so its options are
     * applied first and marked; the file skips marked options). */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-V"))
            a = "--version";
        if (strncmp(a, "--", 2) || !a[2]) {
            folio_errf(err, errlen, "unexpected argument '%s' (see --help)", a);
            return -EINVAL;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        int k = opt_find(opts, N_OPTS, name, len);
        if (k < 0) {
            folio_errf(err, errlen, "unknown option '%.*s' (see --help)", (int)len + 2, a);
            return -EINVAL;
        }
        const char *v;
        if (eq)
            v = eq + 1;
        else if (opts[k].type == OPT_BOOL)
            v = "true";
        else if (i + 1 < argc)
            v = argv[++i];
        else {
            folio_errf(err, errlen, "--%s needs a value (%s)", opts[k].name, opts[k].arg);
            return -EINVAL;
        }
        char who[64];
        snprintf(who, sizeof(who), "--%s", opts[k].name);
        int rc = opt_set(&opts[k], cfg, v, who, err, errlen);
        if (rc)
            return rc;
        cfg->set_mask |= 1ull << k;
        cfg->argv_mask |= 1ull << k;
    }
    if (cfg->help || cfg->version)
        return 0;
    if (cfg->config) {
        struct ini_ctx c = {cfg, cfg->config, err, errlen, 0};
        int rc = ini_finish(&c, ini_parse(cfg->config, config_ini_handler, &c));
        if (rc)
            return rc;
    }
    return config_finish(cfg, err, errlen);
}

void srv_config_free(struct srv_config *cfg)
{
    for (int i = 0; i < N_OPTS; i++)
        if (opts[i].type == OPT_STR || opts[i].type == OPT_ENUM)
            folio_free(*(char **)((char *)cfg + opts[i].off));
    for (int i = 0; i < cfg->n_tenants; i++) {
        folio_free(cfg->tenants[i].name);
        folio_free(cfg->tenants[i].api_key);
    }
    folio_free(cfg->tenants);
    memset(cfg, 0, sizeof(*cfg));
}

void srv_config_help(FILE *out)
{
    fprintf(out, "usage: foliod [OPTIONS]\n\nServes a language model over HTTP/1.1 on a Unix "
                 "socket (OpenAI-compatible API).\n\noptions:\n");
    for (int i = 0; i < N_OPTS; i++) {
        char lhs[64];
        snprintf(lhs, sizeof(lhs), "--%s%s%s", opts[i].name, opts[i].arg ? " " : "",
                 opts[i].arg ? opts[i].arg : "");
        fprintf(out, "  %-30s  %s", lhs, opts[i].help);
        if (opts[i].def && opts[i].type != OPT_BOOL)
            fprintf(out, " [%s]", opts[i].def);
        fputc('\n', out);
    }
    fprintf(out, "\nconfig file (INI): the options above as keys of [foliod]; tenants as\n"
                 "sections [tenant.NAME] with keys:\n");
    for (size_t k = 0; k < FOLIO_ARRAY_LEN(tenant_keys); k++)
        fprintf(out, "  %-30s  %s\n", tenant_keys[k].name, tenant_keys[k].help);
    fprintf(out, "\nSIGTERM drains (finishes running requests, exits 0); SIGINT twice aborts.\n"
                 "SIGHUP reopens --log-file and reloads the [tenant.NAME] sections of --config.\n");
}

static void dump_value(const struct opt *o, const void *base, FILE *out)
{
    const char *field = (const char *)base + o->off;
    switch (o->type) {
    case OPT_STR:
    case OPT_ENUM:
        if (*(char *const *)field)
            fprintf(out, "%s = %s\n", o->name, *(char *const *)field);
        else
            fprintf(out, "; %s = (unset)\n", o->name);
        break;
    case OPT_INT:
    case OPT_SIZE:
        fprintf(out, "%s = %lld\n", o->name, (long long)*(const int64_t *)field);
        break;
    case OPT_BOOL:
        fprintf(out, "%s = %s\n", o->name, *(const bool *)field ? "true" : "false");
        break;
    }
}

void srv_config_dump(const struct srv_config *cfg, FILE *out)
{
    fprintf(out, "; foliod effective configuration\n[foliod]\n");
    for (int i = 0; i < N_OPTS; i++) {
        if (cmdline_only(&opts[i]))
            continue;
        /* kv-mem and kv-blocks exclude each other: dump the one in use */
        if (!strcmp(opts[i].name, "kv-mem") && cfg->kv_blocks)
            continue;
        dump_value(&opts[i], cfg, out);
    }
    for (int t = 0; t < cfg->n_tenants; t++) {
        fprintf(out, "\n[tenant.%s]\n", cfg->tenants[t].name);
        for (size_t k = 0; k < FOLIO_ARRAY_LEN(tenant_keys); k++)
            dump_value(&tenant_keys[k], &cfg->tenants[t], out);
    }
}

int srv_config_tenant_by_uid(const struct srv_config *cfg, int64_t uid)
{
    for (int i = 0; i < cfg->n_tenants; i++)
        if (cfg->tenants[i].uid >= 0 && cfg->tenants[i].uid == uid)
            return i;
    return -1;
}

bool srv_config_has_keys(const struct srv_config *cfg)
{
    if (cfg->operator_key)
        return true;
    for (int i = 0; i < cfg->n_tenants; i++)
        if (cfg->tenants[i].api_key)
            return true;
    return false;
}

/* ---- reload (SIGHUP) ---------------------------------------------------- */

static bool opt_value_eq(const struct opt *o, const void *a, const void *b)
{
    const char *fa = (const char *)a + o->off, *fb = (const char *)b + o->off;
    switch (o->type) {
    case OPT_STR:
    case OPT_ENUM: {
        const char *x = *(char *const *)fa, *y = *(char *const *)fb;
        return (!x && !y) || (x && y && !strcmp(x, y));
    }
    case OPT_INT:
    case OPT_SIZE:
        return *(const int64_t *)fa == *(const int64_t *)fb;
    case OPT_BOOL:
        return *(const bool *)fa == *(const bool *)fb;
    }
    return true;
}

/* Copies field o of src into dst (strings duplicated). */
static int opt_copy(const struct opt *o, void *dst, const void *src)
{
    char *fd = (char *)dst + o->off;
    const char *fs = (const char *)src + o->off;
    switch (o->type) {
    case OPT_STR:
    case OPT_ENUM: {
        const char *v = *(char *const *)fs;
        char *dup = v ? folio_strdup(v) : NULL;
        if (v && !dup)
            return -ENOMEM;
        folio_free(*(char **)fd);
        *(char **)fd = dup;
        if (o->eoff)
            *(int *)((char *)dst + o->eoff) = *(const int *)((const char *)src + o->eoff);
        return 0;
    }
    case OPT_INT:
    case OPT_SIZE:
        *(int64_t *)fd = *(const int64_t *)fs;
        return 0;
    case OPT_BOOL:
        *(bool *)fd = *(const bool *)fs;
        return 0;
    }
    return 0;
}

static void note(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(char *out, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(out);
    if (n + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + n, cap - n, fmt, ap);
    va_end(ap);
}

int srv_config_reload(struct srv_config *cur, int argc, char **argv, struct srv_config_reload *r,
                      char *err, size_t errlen)
{
    struct srv_config next;
    memset(r, 0, sizeof(*r));
    int rc = srv_config_parse(&next, argc, argv, err, errlen);
    if (rc) {
        srv_config_free(&next);
        return rc;
    }
    /* [foliod] options: what the running daemon cannot take is reported */
    for (int i = 0; i < N_OPTS; i++)
        if (opts[i].type != OPT_BOOL && !opt_value_eq(&opts[i], cur, &next))
            note(r->kept, sizeof(r->kept), "%s--%s", r->kept[0] ? ", " : "", opts[i].name);
    /* tenants by name: changed in place, new ones appended; a tenant gone
     * from the file keeps its slot (its running requests finish) but no
     * uid or key reaches it any more */
    int n_before = cur->n_tenants;
    for (int t = 0; t < next.n_tenants; t++) {
        const struct srv_tenant_cfg *nt = &next.tenants[t];
        int ti = -1;
        for (int k = 0; k < cur->n_tenants; k++)
            if (!strcmp(cur->tenants[k].name, nt->name))
                ti = k;
        bool added = ti < 0;
        if (added) {
            ti = tenant_add(cur, nt->name, err, errlen);
            if (ti < 0) {
                srv_config_free(&next);
                return ti;
            }
        }
        bool changed = false;
        for (size_t k = 0; k < FOLIO_ARRAY_LEN(tenant_keys); k++)
            if (!opt_value_eq(&tenant_keys[k], &cur->tenants[ti], nt)) {
                if ((rc = opt_copy(&tenant_keys[k], &cur->tenants[ti], nt))) {
                    srv_config_free(&next);
                    return rc;
                }
                changed = true;
            }
        if (added)
            note(r->tenants, sizeof(r->tenants), "%s+%s", r->tenants[0] ? " " : "", nt->name);
        else if (changed) {
            note(r->tenants, sizeof(r->tenants), "%s~%s", r->tenants[0] ? " " : "", nt->name);
            r->changed[ti / 64] |= 1ull << (ti % 64);
        }
    }
    for (int ti = 1; ti < n_before; ti++) {
        bool found = false;
        for (int t = 0; t < next.n_tenants && !found; t++)
            found = !strcmp(next.tenants[t].name, cur->tenants[ti].name);
        struct srv_tenant_cfg *ct = &cur->tenants[ti];
        if (!found && (ct->uid >= 0 || ct->api_key)) {
            ct->uid = -1;
            folio_free(ct->api_key);
            ct->api_key = NULL;
            note(r->tenants, sizeof(r->tenants), "%s-%s", r->tenants[0] ? " " : "", ct->name);
            r->changed[ti / 64] |= 1ull << (ti % 64);
        }
    }
    for (int ti = n_before; ti < cur->n_tenants; ti++)
        r->changed[ti / 64] |= 1ull << (ti % 64);
    srv_config_free(&next);
    return 0;
}
