/*
 * daemon/config_opts.c — the option table and the operations on one
 * option's value.
 *
 * Each row of `srv__opts` names one option: its spelling (argv `--name`,
 * INI key `name` or `name_with_underscores`), type, bounds, default (as
 * text), where it lives in struct srv_config, and its help line.  argv
 * parsing, the INI handler, --help and --dump-config (config.c) all walk
 * this one table; no option is spelled anywhere else.  Tenants use a
 * second, smaller table (`srv__tenant_keys`) over struct srv_tenant_cfg.
 *
 * The value operations (set from text with bounds, compare, copy, dump)
 * switch on the row's type only; a new option is one row (and its field in
 * struct srv_config).
 *
 * Invariants: at most 64 options (set_mask holds one bit each); a row's off
 * names a field of the width its type says (char * for STR / ENUM, int64_t
 * for INT / SIZE, bool for BOOL); an ENUM row's eoff, when set, names the
 * int that receives the choice's index.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_internal.h"
#include "folio/common.h"

#define F(field) offsetof(struct srv_config, field)
#define GiB      (1024LL * 1024 * 1024)

const struct opt srv__opts[] = {
    {"model", OPT_STR, 0, 0, NULL, NULL, F(model), "PATH",
     "GGUF model file (default: the embedded synthetic model)", 0},
    {"chat-template", OPT_ENUM, 0, 0, "auto",
     "auto|chatml|llama2|llama3|mistral|zephyr|phi3|qwen2|qwen2.5|deepseek3", F(chat_template),
     "NAME",
     "chat template for /v1/chat/completions (auto: the model's tokenizer.chat_template; "
     "chatml as plain text when the model has none)",
     F(chat_template_id)},
    {"lora", OPT_STR, 0, 0, NULL, NULL, F(lora), "NAME=PATH[,NAME=PATH...]",
     "LoRA adapters (GGUF, as llama.cpp's convert_lora_to_gguf.py writes them) a request "
     "selects with \"model\": NAME, each applied at scale 1; at most 16",
     0},
    {"pooling", OPT_ENUM, 0, 0, "auto", "auto|mean|cls|last", F(pooling), "auto|mean|cls|last",
     "how /v1/embeddings pools a prompt's final hidden states: their mean, the first's, the "
     "last's (auto: the model file's pooling_type, else last)",
     F(pooling_id)},
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
    {"kv-lazy", OPT_BOOL, 0, 0, NULL, NULL, F(kv_lazy), NULL,
     "commit the KV pool's pages as blocks are first written, not all at start-up (the resident "
     "set grows with use, up to --kv-mem; the first steps pay the page faults)",
     0},
    {"block-size", OPT_INT, 1, 1024, "16", NULL, F(block_size), "N", "token slots per KV block", 0},
    {"kv-dtype", OPT_ENUM, 0, 0, "auto", "f32|f16|bf16|q8|auto", F(kv_dtype),
     "f32|f16|bf16|q8|auto",
     "KV element type (q8: int8 with a scale per token and KV head, ~3.8x the tokens of f32; "
     "auto: the model's F32/F16/BF16, f16 for quantized models)",
     F(kv_dtype_id)},
    {"max-batch-tokens", OPT_INT, 1, 1 << 20, "512", NULL, F(max_batch_tokens), "N",
     "token budget of one step", 0},
    {"max-seqs", OPT_INT, 1, 65536, "64", NULL, F(max_seqs), "N", "sequences in one step", 0},
    {"admit-wait-ms", OPT_INT, 0, 1000, "2", NULL, F(admit_wait_ms), "MS",
     "after a step that finishes sequences, wait up to this long for as many new requests "
     "before planning the next step, so they join it (0: plan at once)",
     0},
    {"threads", OPT_INT, 0, 1024, "0", NULL, F(threads), "N",
     "compute threads (0: one per online CPU)", 0},
    {"matmul", OPT_ENUM, 0, 0, "auto", "auto|openblas|onednn", F(matmul), "auto|openblas|onednn",
     "matrix-product backend (auto: oneDNN with AVX-512, else the faster on a start-up check)",
     F(matmul_id)},
    {"batch-invariant", OPT_BOOL, 0, 0, NULL, NULL, F(batch_invariant), NULL,
     "each request's tokens independent of what it is batched with (seeded sampling "
     "included): F32/F16/BF16 products on row-invariant kernels, no attention context splits",
     0},
    {"no-warmup", OPT_BOOL, 0, 0, NULL, NULL, F(no_warmup), NULL,
     "skip the two full-size forward steps run before serving (one sequence, then max-seqs "
     "of them: they set up the product kernels' buffers, so the first requests do not wait "
     "for that)",
     0},
    {"unknown-uid", OPT_ENUM, 0, 0, "own", "own|refuse", F(unknown_uid), "own|refuse",
     "socket peers whose uid names no tenant: each is its own tenant 'uid-N', or refused (403)",
     F(unknown_uid_id)},
    {"operator-uids", OPT_STR, 0, 0, NULL, NULL, F(operator_uids), "UIDS",
     "socket peer uids that are the operator, who sees every tenant (comma-separated, or "
     "'none'; default: 0 and foliod's own uid)",
     0},
    {"tenant-views", OPT_ENUM, 0, 0, "deny", "deny|own", F(tenant_views), "deny|own",
     "what a tenant (not the operator) gets from /metrics, /v1/kv and /dashboard: 403 (deny), "
     "or its own entries only (own)",
     F(tenant_views_id)},
    {"max-body", OPT_SIZE, 1024, 1 << 30, "1M", NULL, F(max_body), "SIZE",
     "largest request body (413 beyond)", 0},
    {"max-pending-output", OPT_SIZE, 4096, 1 << 30, "1M", NULL, F(max_pending_output), "SIZE",
     "unsent stream bytes above which a client that reads none for 1 s is dropped", 0},
    {"max-connections", OPT_INT, 1, 1 << 20, "4096", NULL, F(max_connections), "N",
     "open client connections (more are answered 503 and closed)", 0},
    {"max-client-connections", OPT_INT, 1, 1 << 20, "1024", NULL, F(max_client_connections), "N",
     "connections of one uid, one address or one tenant (more are answered 503)", 0},
    {"responses-store", OPT_SIZE, 0, 1024 * GiB, "16M", NULL, F(responses_store), "SIZE",
     "bytes of /v1/responses each tenant keeps for GET /v1/responses/{id} and "
     "previous_response_id, its least recently used dropped first (0: keep none)",
     0},
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

const size_t srv__n_opts = FOLIO_ARRAY_LEN(srv__opts);
/* set_mask: bit i = option i given; argv_mask: given on the command line */
_Static_assert(FOLIO_ARRAY_LEN(srv__opts) <= 64, "set_mask holds one bit per option");

#define T(field) offsetof(struct srv_tenant_cfg, field)
const struct opt srv__tenant_keys[] = {
    {"uid", OPT_INT, -1, UINT32_MAX, "-1", NULL, T(uid), "UID", "peer uid of this tenant", 0},
    {"weight", OPT_INT, 1, 1000, "1", NULL, T(weight), "W", "fair-share weight", 0},
    {"max_kv_blocks", OPT_INT, 0, 1 << 24, "0", NULL, T(max_kv_blocks), "N",
     "KV blocks the tenant may hold (0 = unlimited)", 0},
    {"max_running", OPT_INT, 0, 65536, "0", NULL, T(max_running), "N",
     "running requests (0 = unlimited)", 0},
    {"max_waiting", OPT_INT, 0, 1 << 20, "0", NULL, T(max_waiting), "N",
     "waiting requests before 429 (0 = unlimited)", 0},
    {"api_key", OPT_STR, 0, 0, NULL, NULL, T(api_key), "KEY", "bearer key (TCP clients)", 0},
    {"loras", OPT_STR, 0, 0, NULL, NULL, T(loras), "NAME,...",
     "the --lora adapters it may name (unset: all; none: none)", 0},
};

const size_t srv__n_tenant_keys = FOLIO_ARRAY_LEN(srv__tenant_keys);

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
int srv__opt_set(const struct opt *o, void *base, const char *v, const char *who, char *err,
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

int srv__opt_find(const struct opt *tab, int n, const char *name, size_t len)
{
    for (int i = 0; i < n; i++)
        if (name_eq(tab[i].name, name, len))
            return i;
    return -1;
}

/* Options that make sense only on the command line (not in the file or
 * the dump). */
bool srv__opt_cmdline_only(const struct opt *o)
{
    return !strcmp(o->name, "help") || !strcmp(o->name, "dump-config") ||
           !strcmp(o->name, "config");
}

void srv_config_help(FILE *out)
{
    fprintf(out, "usage: foliod [OPTIONS]\n\nServes a language model over HTTP/1.1 on a Unix "
                 "socket (OpenAI-compatible API).\n\noptions:\n");
    for (int i = 0; i < N_OPTS; i++) {
        char lhs[64];
        snprintf(lhs, sizeof(lhs), "--%s%s%s", srv__opts[i].name, srv__opts[i].arg ? " " : "",
                 srv__opts[i].arg ? srv__opts[i].arg : "");
        fprintf(out, "  %-30s  %s", lhs, srv__opts[i].help);
        if (srv__opts[i].def && srv__opts[i].type != OPT_BOOL)
            fprintf(out, " [%s]", srv__opts[i].def);
        fputc('\n', out);
    }
    fprintf(out, "\nconfig file (INI): the options above as keys of [foliod]; tenants as\n"
                 "sections [tenant.NAME] with keys:\n");
    for (size_t k = 0; k < srv__n_tenant_keys; k++)
        fprintf(out, "  %-30s  %s\n", srv__tenant_keys[k].name, srv__tenant_keys[k].help);
    fprintf(out, "\nSIGTERM drains (finishes running requests, exits 0); SIGINT twice aborts.\n"
                 "SIGHUP reopens --log-file and reloads the [tenant.NAME] sections of --config.\n");
}

void srv__opt_dump(const struct opt *o, const void *base, FILE *out)
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

bool srv__opt_value_eq(const struct opt *o, const void *a, const void *b)
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
int srv__opt_copy(const struct opt *o, void *dst, const void *src)
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
