/*
 * daemon/config.c — foliod's configuration read from argv and the INI
 * file, checked, dumped and reloaded, all by walking the option table
 * (config_opts.c: one row per option, and the typed value operations).
 *
 * Precedence: defaults (each row's text, run through the same parser as
 * user input, so defaults obey the bounds too), then --config's file,
 * then argv; set_mask records which options were given (argv_mask: on the
 * command line).  Tenants are INI sections [tenant.NAME], read with the
 * tenant table the same way.
 *
 * Validation happens per value (type and bounds, message names the option)
 * and once at the end for cross-option rules (--kv-mem vs --kv-blocks,
 * --listen needs keys or --insecure-listen, socket path length, duplicate
 * uids / keys).
 *
 * Reload (SIGHUP): the file is read again into a fresh config; tenants'
 * rows are copied into the running one, options that need a restart are
 * kept and named in the reload report.
 */
#include "config.h"

#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
#include "folio/common.h"

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
    for (size_t k = 0; k < srv__n_tenant_keys; k++)
        if (srv__tenant_keys[k].def)
            srv__opt_set(&srv__tenant_keys[k], t, srv__tenant_keys[k].def, "default", NULL, 0);
    return cfg->n_tenants++;
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
        int i = srv__opt_find(srv__opts, N_OPTS, name, strlen(name));
        if (i < 0 || srv__opt_cmdline_only(&srv__opts[i])) {
            folio_errf(c->err, c->errlen, "%s: unknown option '%s'", c->file, name);
            c->rc = -EINVAL;
            return 0;
        }
        if (c->cfg->argv_mask & (1ull << i))
            return 1; /* given on the command line: it wins */
        snprintf(who, sizeof(who), "%s: %s", c->file, srv__opts[i].name);
        int rc = srv__opt_set(&srv__opts[i], c->cfg, value, who, c->err, c->errlen);
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
        int k = srv__opt_find(srv__tenant_keys, (int)srv__n_tenant_keys, name, strlen(name));
        if (k < 0) {
            folio_errf(c->err, c->errlen, "%s: [%s]: unknown key '%s'", c->file, section, name);
            c->rc = -EINVAL;
            return 0;
        }
        snprintf(who, sizeof(who), "%s: [%s] %s", c->file, section, srv__tenant_keys[k].name);
        int rc =
            srv__opt_set(&srv__tenant_keys[k], &c->cfg->tenants[ti], value, who, c->err, c->errlen);
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
        if (srv__opts[i].def)
            srv__opt_set(&srv__opts[i], cfg, srv__opts[i].def, srv__opts[i].name, NULL, 0);
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

int srv_parse_uid_list(const char *s, int64_t *out, int cap)
{
    if (!strcmp(s, "none"))
        return 0;
    int n = 0;
    for (const char *p = s;;) {
        p += strspn(p, ", ");
        if (!*p)
            break;
        char tok[32];
        size_t len = strcspn(p, ", ");
        int64_t uid = -1;
        if (len >= sizeof(tok) || n >= cap)
            return -EINVAL;
        memcpy(tok, p, len);
        tok[len] = 0;
        if (srv_parse_int(tok, &uid) || uid < 0 || uid > UINT32_MAX)
            return -EINVAL;
        out[n++] = uid;
        p += len;
    }
    return n ? n : -EINVAL;
}

/* --lora's list into cfg->lora_names / lora_paths: NAME=PATH pairs
 * separated by commas; names of 1..SRV_LORA_NAME_MAX printable ASCII
 * characters (no spaces, quotes or backslashes: they go into JSON, logs
 * and metric labels as they are), each once. */
static int parse_loras(struct srv_config *cfg, char *err, size_t errlen)
{
    folio_free(cfg->lora_buf);
    cfg->lora_buf = NULL;
    cfg->n_loras = 0;
    if (!cfg->lora)
        return 0;
    if (!(cfg->lora_buf = folio_strdup(cfg->lora)))
        return -ENOMEM;
    for (char *p = cfg->lora_buf; *p;) {
        char *end = p + strcspn(p, ",");
        const bool last = *end == 0;
        *end = 0;
        char *eq = strchr(p, '=');
        if (!eq || eq == p || !eq[1]) {
            folio_errf(err, errlen, "--lora: '%s' is not NAME=PATH", p);
            return -EINVAL;
        }
        *eq = 0;
        size_t n = strlen(p);
        bool ok = n <= SRV_LORA_NAME_MAX;
        for (size_t i = 0; i < n; i++)
            ok &= p[i] > ' ' && p[i] < 0x7f && p[i] != '"' && p[i] != '\\';
        if (!ok) {
            folio_errf(err, errlen,
                       "--lora: the name '%s' must be 1..%d printable characters without "
                       "spaces, quotes or backslashes",
                       p, SRV_LORA_NAME_MAX);
            return -EINVAL;
        }
        if (!strcmp(p, "none")) { /* a tenant's `loras = none` means no adapter */
            folio_errf(err, errlen, "--lora: 'none' cannot name an adapter");
            return -EINVAL;
        }
        for (int i = 0; i < cfg->n_loras; i++)
            if (!strcmp(cfg->lora_names[i], p)) {
                folio_errf(err, errlen, "--lora: the name '%s' is given twice", p);
                return -EINVAL;
            }
        if (cfg->n_loras == SRV_MAX_LORAS) {
            folio_errf(err, errlen, "--lora: at most %d adapters", SRV_MAX_LORAS);
            return -EINVAL;
        }
        cfg->lora_names[cfg->n_loras] = p;
        cfg->lora_paths[cfg->n_loras++] = eq + 1;
        if (last)
            break;
        p = end + 1;
    }
    return 0;
}

/* Whether the comma-separated list has the word (whole, of length n). */
static bool list_has(const char *list, const char *word, size_t n)
{
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, ",");
        if (k == n && !strncmp(p, word, n))
            return true;
        p += k + (p[k] == ',');
    }
    return false;
}

bool srv_tenant_may_lora(const struct srv_tenant_cfg *t, const char *name)
{
    return !t || !t->loras || list_has(t->loras, name, strlen(name));
}

/* Each tenant's `loras`: "none", or names --lora defines. */
static int check_tenant_loras(const struct srv_config *cfg, char *err, size_t errlen)
{
    for (int t = 0; t < cfg->n_tenants; t++) {
        const char *l = cfg->tenants[t].loras;
        if (!l || !strcmp(l, "none"))
            continue;
        for (const char *p = l;;) {
            size_t k = strcspn(p, ",");
            bool known = false;
            for (int i = 0; i < cfg->n_loras && !known; i++)
                known = strlen(cfg->lora_names[i]) == k && !strncmp(cfg->lora_names[i], p, k);
            if (!known) {
                folio_errf(err, errlen,
                           "tenant '%s': loras names '%.*s', which --lora does not define",
                           cfg->tenants[t].name, (int)k, p);
                return -EINVAL;
            }
            if (!p[k])
                break;
            p += k + 1;
        }
    }
    return 0;
}

/* Cross-option rules, defaults that depend on the environment. */
static int config_finish(struct srv_config *cfg, char *err, size_t errlen)
{
    int rc = parse_loras(cfg, err, errlen);
    if (!rc)
        rc = check_tenant_loras(cfg, err, errlen);
    if (rc)
        return rc;
    int i_mem = srv__opt_find(srv__opts, N_OPTS, "kv-mem", 6),
        i_blk = srv__opt_find(srv__opts, N_OPTS, "kv-blocks", 9);
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
    int64_t uids[SRV_MAX_OPERATOR_UIDS];
    if (cfg->operator_uids &&
        srv_parse_uid_list(cfg->operator_uids, uids, SRV_MAX_OPERATOR_UIDS) < 0) {
        folio_errf(err, errlen,
                   "--operator-uids: '%s' is not a list of uids (0..%u, at most %d) or 'none'",
                   cfg->operator_uids, UINT32_MAX, SRV_MAX_OPERATOR_UIDS);
        return -EINVAL;
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
        int k = srv__opt_find(srv__opts, N_OPTS, name, len);
        if (k < 0) {
            folio_errf(err, errlen, "unknown option '%.*s' (see --help)", (int)len + 2, a);
            return -EINVAL;
        }
        const char *v;
        if (eq)
            v = eq + 1;
        else if (srv__opts[k].type == OPT_BOOL)
            v = "true";
        else if (i + 1 < argc)
            v = argv[++i];
        else {
            folio_errf(err, errlen, "--%s needs a value (%s)", srv__opts[k].name, srv__opts[k].arg);
            return -EINVAL;
        }
        char who[64];
        snprintf(who, sizeof(who), "--%s", srv__opts[k].name);
        int rc = srv__opt_set(&srv__opts[k], cfg, v, who, err, errlen);
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
        if (srv__opts[i].type == OPT_STR || srv__opts[i].type == OPT_ENUM)
            folio_free(*(char **)((char *)cfg + srv__opts[i].off));
    for (int i = 0; i < cfg->n_tenants; i++) {
        folio_free(cfg->tenants[i].name);
        folio_free(cfg->tenants[i].api_key);
        folio_free(cfg->tenants[i].loras);
    }
    folio_free(cfg->tenants);
    folio_free(cfg->lora_buf);
    memset(cfg, 0, sizeof(*cfg));
}

void srv_config_dump(const struct srv_config *cfg, FILE *out)
{
    fprintf(out, "; foliod effective configuration\n[foliod]\n");
    for (int i = 0; i < N_OPTS; i++) {
        if (srv__opt_cmdline_only(&srv__opts[i]))
            continue;
        /* kv-mem and kv-blocks exclude each other: dump the one in use */
        if (!strcmp(srv__opts[i].name, "kv-mem") && cfg->kv_blocks)
            continue;
        srv__opt_dump(&srv__opts[i], cfg, out);
    }
    for (int t = 0; t < cfg->n_tenants; t++) {
        fprintf(out, "\n[tenant.%s]\n", cfg->tenants[t].name);
        for (size_t k = 0; k < srv__n_tenant_keys; k++)
            srv__opt_dump(&srv__tenant_keys[k], &cfg->tenants[t], out);
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
        if (srv__opts[i].type != OPT_BOOL && !srv__opt_value_eq(&srv__opts[i], cur, &next))
            note(r->kept, sizeof(r->kept), "%s--%s", r->kept[0] ? ", " : "", srv__opts[i].name);
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
        for (size_t k = 0; k < srv__n_tenant_keys; k++)
            if (!srv__opt_value_eq(&srv__tenant_keys[k], &cur->tenants[ti], nt)) {
                if ((rc = srv__opt_copy(&srv__tenant_keys[k], &cur->tenants[ti], nt))) {
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
