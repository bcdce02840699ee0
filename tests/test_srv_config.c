/*
 * tests/test_srv_config.c — foliod's option table: defaults, argv forms,
 * INI files and tenants, precedence (argv over file), validation messages
 * that name the option, size suffixes, --dump-config reading back to
 * the same configuration, -V, and the SIGHUP reload (tenants applied in
 * place by name, [foliod] changes reported and kept, a broken file
 * changes nothing).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "folio/chat.h"
#include "folio/common.h"
#include "log.h"

static int parse(struct srv_config *c, char *err, size_t n, ...)
{
    char *argv[32] = {"foliod"};
    int argc = 1;
    va_list ap;
    va_start(ap, n);
    for (char *a; (a = va_arg(ap, char *));)
        argv[argc++] = a;
    va_end(ap);
    err[0] = 0;
    return srv_config_parse(c, argc, argv, err, n);
}

static void test_defaults(void **state)
{
    (void)state;
    struct srv_config c;
    char err[256];
    setenv("XDG_RUNTIME_DIR", "/run/user/1234", 1);
    assert_int_equal(parse(&c, err, sizeof(err), NULL), 0);
    assert_string_equal(c.socket, "/run/user/1234/foliod.sock");
    assert_int_equal(c.block_size, 16);
    assert_int_equal(c.kv_mem, 256ll << 20);
    assert_int_equal(c.kv_blocks, 0);
    assert_string_equal(c.kv_dtype, "auto");
    assert_string_equal(c.unknown_uid, "own");
    assert_int_equal(c.unknown_uid_id, SRV_UNKNOWN_UID_OWN);
    assert_int_equal(c.tenant_views_id, SRV_TENANT_VIEWS_DENY); /* the safe default */
    assert_null(c.operator_uids);
    assert_int_equal(c.max_client_connections, 1024);
    assert_false(c.insecure_listen);
    assert_null(c.model);
    assert_null(c.listen);
    assert_int_equal(c.n_tenants, 1);
    assert_string_equal(c.tenants[0].name, "default");
    srv_config_free(&c);
    unsetenv("XDG_RUNTIME_DIR");
    assert_int_equal(parse(&c, err, sizeof(err), NULL), 0);
    assert_string_equal(c.socket, "./foliod.sock");
    srv_config_free(&c);
}

static void test_argv_forms(void **state)
{
    (void)state;
    struct srv_config c;
    char err[256];
    assert_int_equal(parse(&c, err, sizeof(err), "--block-size", "32", "--kv-dtype=f16",
                           "--kv-blocks", "100", "--max_seqs=9", "--listen", "127.0.0.1:8080",
                           "--insecure-listen", "--threads", "2", NULL),
                     0);
    assert_int_equal(c.block_size, 32);
    assert_string_equal(c.kv_dtype, "f16");
    assert_int_equal(c.kv_blocks, 100);
    assert_int_equal(c.max_seqs, 9);
    assert_int_equal(c.threads, 2);
    assert_string_equal(c.listen, "127.0.0.1:8080");
    srv_config_free(&c);
    assert_int_equal(parse(&c, err, sizeof(err), "--help", NULL), 0);
    assert_true(c.help);
    srv_config_free(&c);
}

/* Each bad input is refused with a message naming the option. */
static void test_bad_values(void **state)
{
    (void)state;
    static const struct {
        const char *a, *b, *name;
    } bad[] = {
        {"--block-size", "0", "--block-size"},
        {"--block-size", "2000", "--block-size"},
        {"--block-size", "12x", "--block-size"},
        {"--kv-mem", "12Q", "--kv-mem"},
        {"--kv-mem", "-5M", "--kv-mem"},
        {"--kv-mem", "99999999999G", "--kv-mem"},
        {"--kv-dtype", "f8", "--kv-dtype"},
        {"--max-seqs", "abc", "--max-seqs"},
        {"--max-batch-tokens", "", "--max-batch-tokens"},
        {"--threads", "-1", "--threads"},
        {"--unknown-uid", "maybe", "--unknown-uid"},
        {"--tenant-views", "all", "--tenant-views"},
        {"--operator-uids", "root", "--operator-uids"},
        {"--operator-uids", "0,-1", "--operator-uids"},
        {"--operator-uids", "4294967296", "--operator-uids"},
        {"--operator-uids", ", ,", "--operator-uids"},
        {"--operator-uids", "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17", "--operator-uids"},
        {"--listen", "10.0.0.1:80", "--listen"}, /* no keys, no --insecure-listen */
        {"--listen", "127.0.0.1:8080", "--insecure-listen"},
        {"--listen", "127.0.0.1", "--listen"},
        {"--listen", "127.0.0.1:70000", "--listen"},
        {"--nonsense", "1", "--nonsense"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct srv_config c;
        char err[256];
        assert_int_equal(parse(&c, err, sizeof(err), bad[i].a, bad[i].b, NULL), -EINVAL);
        if (!strstr(err, bad[i].name))
            fail_msg("'%s %s': message '%s' does not name %s", bad[i].a, bad[i].b, err,
                     bad[i].name);
        srv_config_free(&c);
    }
    struct srv_config c;
    char err[256];
    assert_int_equal(parse(&c, err, sizeof(err), "--block-size", NULL), -EINVAL);
    assert_non_null(strstr(err, "--block-size"));
    srv_config_free(&c);
    assert_int_equal(parse(&c, err, sizeof(err), "--kv-mem", "1G", "--kv-blocks", "10", NULL),
                     -EINVAL);
    assert_non_null(strstr(err, "--kv-blocks"));
    srv_config_free(&c);
    char path[200];
    memset(path, 'a', sizeof(path));
    path[0] = '/';
    path[150] = 0;
    assert_int_equal(parse(&c, err, sizeof(err), "--socket", path, NULL), -EINVAL);
    assert_non_null(strstr(err, "107"));
    srv_config_free(&c);
}

static void test_sizes(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int rc;
        int64_t v;
    } t[] = {
        {"0", 0, 0},
        {"4096", 0, 4096},
        {"64k", 0, 65536},
        {"64K", 0, 65536},
        {"256M", 0, 256 << 20},
        {"2G", 0, 2ll << 30},
        {"2GiB", 0, 2ll << 30},
        {"3MB", 0, 3 << 20},
        {"", -EINVAL, 0},
        {"M", -EINVAL, 0},
        {"1T", 0, 1ll << 40},
        {"1X", -EINVAL, 0},
        {"-1", -EINVAL, 0},
        {"1.5G", -EINVAL, 0},
        {"9999999999999G", -ERANGE, 0},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        int64_t v = -7;
        int rc = folio_parse_size(t[i].s, &v);
        if (rc != t[i].rc)
            fail_msg("'%s': rc %d want %d", t[i].s, rc, t[i].rc);
        if (!rc)
            assert_int_equal(v, t[i].v);
    }
}

static const char ini[] = "; comment\n"
                          "[foliod]\n"
                          "block-size = 8\n"
                          "max_seqs = 5\n"
                          "kv-dtype = f16\n"
                          "[tenant.alice]\n"
                          "uid = 1001\n"
                          "weight = 3\n"
                          "max_running = 2\n"
                          "[tenant.bob]\n"
                          "api_key = s3cret\n"
                          "max_waiting = 4\n"
                          "max_kv_blocks = 100\n";

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_ini_and_precedence(void **state)
{
    (void)state;
    char path[] = "/tmp/test_srv_config_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, ini);
    struct srv_config c;
    char err[256];
    assert_int_equal(parse(&c, err, sizeof(err), "--config", path, "--block-size", "64", NULL), 0);
    assert_int_equal(c.block_size, 64); /* argv wins */
    assert_int_equal(c.max_seqs, 5);
    assert_string_equal(c.kv_dtype, "f16");
    assert_int_equal(c.n_tenants, 3);
    assert_int_equal(srv_config_tenant_by_uid(&c, 1001), 1);
    assert_int_equal(srv_config_tenant_by_uid(&c, 1002), -1);
    assert_int_equal(c.tenants[1].weight, 3);
    assert_int_equal(c.tenants[1].max_running, 2);
    assert_string_equal(c.tenants[2].api_key, "s3cret");
    assert_true(srv_config_has_keys(&c));
    assert_int_equal(c.tenants[2].max_waiting, 4);
    assert_int_equal(c.tenants[2].uid, -1);
    srv_config_free(&c);

    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"[foliod]\nblock-size = 0\n", "block-size"},
        {"[foliod]\nnope = 1\n", "nope"},
        {"[tenant.x]\nweight = 0\n", "weight"},
        {"[tenant.x]\ncolour = red\n", "colour"},
        {"[tenant.x]\nuid = 5\n[tenant.y]\nuid = 5\n", "same uid"},
        {"[tenant.x]\napi_key = k\n[tenant.y]\napi_key = k\n", "same api_key"},
        {"[foliod]\noperator-key = k\n[tenant.x]\napi_key = k\n", "operator-key"},
        {"[tenant.x]\napi_key =\n", "tenant x: a key"},
        {"[foliod]\nunknown-uid = default\n", "unknown-uid"},
        {"[weird]\na = 1\n", "weird"},
        {"[tenant.bad name]\nuid = 1\n", "bad name"},
        {"this is not ini\n", "syntax"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        write_file(path, bad[i].text);
        assert_int_equal(parse(&c, err, sizeof(err), "--config", path, NULL), -EINVAL);
        if (!strstr(err, bad[i].needle))
            fail_msg("config %zu: message '%s' lacks '%s'", i, err, bad[i].needle);
        srv_config_free(&c);
    }
    assert_int_equal(parse(&c, err, sizeof(err), "--config", "/nonexistent/x.ini", NULL), -EINVAL);
    assert_non_null(strstr(err, "/nonexistent/x.ini"));
    srv_config_free(&c);
    unlink(path);
}

static char *dump(const struct srv_config *c)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    srv_config_dump(c, f);
    fclose(f);
    return buf;
}

/* The dump is an INI file that parses back to the same configuration. */
static void test_dump_roundtrip(void **state)
{
    (void)state;
    char path[] = "/tmp/test_srv_config_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, ini);
    struct srv_config a, b;
    char err[256];
    assert_int_equal(parse(&a, err, sizeof(err), "--config", path, "--socket", "/tmp/x.sock",
                           "--kv-mem", "1G", NULL),
                     0);
    char *d1 = dump(&a);
    write_file(path, d1);
    assert_int_equal(parse(&b, err, sizeof(err), "--config", path, NULL), 0);
    char *d2 = dump(&b);
    assert_string_equal(d1, d2);
    assert_non_null(strstr(d1, "kv-mem = 1073741824"));
    assert_non_null(strstr(d1, "[tenant.bob]"));
    assert_non_null(strstr(d1, "api_key = s3cret"));
    free(d1);
    free(d2);
    srv_config_free(&a);
    srv_config_free(&b);
    unlink(path);
}

static void test_help_lists_every_option(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    srv_config_help(f);
    fclose(f);
    const char *want[] = {"--model",       "--socket",     "--listen",   "--kv-mem",
                          "--kv-blocks",   "--block-size", "--kv-dtype", "--max-batch-tokens",
                          "--max-seqs",    "--threads",    "--config",   "--dump-config",
                          "--unknown-uid", "max_waiting",  "api_key"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (!strstr(buf, want[i]))
            fail_msg("--help lacks %s", want[i]);
    free(buf);
}

/* Enum options are C enums from parsing on: the id follows the string
 * (default, argv), and --chat-template's names are chat.h's enum. */
static void test_enum_ids(void **state)
{
    (void)state;
    struct srv_config c;
    char err[256];
    assert_int_equal(parse(&c, err, sizeof(err), NULL), 0);
    assert_int_equal(c.kv_dtype_id, SRV_KV_DTYPE_AUTO);
    assert_int_equal(c.unknown_uid_id, SRV_UNKNOWN_UID_OWN);
    assert_int_equal(c.log_level_id, SRV_LOG_INFO);
    assert_int_equal(c.chat_template_id, 0);
    srv_config_free(&c);
    assert_int_equal(parse(&c, err, sizeof(err), "--kv-dtype", "f16", "--unknown-uid", "refuse",
                           "--log-level", "debug", NULL),
                     0);
    assert_int_equal(c.kv_dtype_id, FOLIO_F16);
    assert_int_equal(c.unknown_uid_id, SRV_UNKNOWN_UID_REFUSE);
    assert_int_equal(c.log_level_id, SRV_LOG_DEBUG);
    srv_config_free(&c);
    assert_int_equal(parse(&c, err, sizeof(err), "--tenant-views", "own", NULL), 0);
    assert_int_equal(c.tenant_views_id, SRV_TENANT_VIEWS_OWN);
    srv_config_free(&c);
    /* uid lists: commas and/or spaces; "none" is the empty list */
    int64_t u[SRV_MAX_OPERATOR_UIDS];
    assert_int_equal(srv_parse_uid_list("0, 1000,2000 3000", u, SRV_MAX_OPERATOR_UIDS), 4);
    assert_true(u[0] == 0 && u[1] == 1000 && u[2] == 2000 && u[3] == 3000);
    assert_int_equal(srv_parse_uid_list("4294967295", u, SRV_MAX_OPERATOR_UIDS), 1);
    assert_true(u[0] == 4294967295ll);
    assert_int_equal(srv_parse_uid_list("none", u, SRV_MAX_OPERATOR_UIDS), 0);
    assert_int_equal(srv_parse_uid_list("", u, SRV_MAX_OPERATOR_UIDS), -EINVAL);
    assert_int_equal(srv_parse_uid_list("1, 2, 3", u, 2), -EINVAL);
    assert_int_equal(srv_parse_uid_list("1;2", u, SRV_MAX_OPERATOR_UIDS), -EINVAL);
    assert_int_equal(parse(&c, err, sizeof(err), "--operator-uids", "0 , 1000", NULL), 0);
    assert_string_equal(c.operator_uids, "0 , 1000");
    srv_config_free(&c);
    /* every template chat.h names, up to the first id it does not */
    int t = CHAT_TMPL_CHATML;
    for (; strcmp(chat_template_name((enum chat_template)t), "?"); t++) {
        const char *name = chat_template_name((enum chat_template)t);
        assert_int_equal(parse(&c, err, sizeof(err), "--chat-template", name, NULL), 0);
        assert_int_equal(c.chat_template_id, t);
        srv_config_free(&c);
    }
    assert_true(t > CHAT_TMPL_DEEPSEEK3);
}

static void test_reload(void **state)
{
    (void)state;
    char path[] = "/tmp/test_srv_config_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, "[foliod]\nmax-seqs = 5\n[tenant.a]\nuid = 1001\nweight = 3\n"
                     "[tenant.b]\napi_key = kb\n[tenant.c]\nuid = 1003\n");
    char *argv[] = {"foliod", "--config", path, "--block-size", "32", NULL};
    struct srv_config c;
    char err[256] = "";
    assert_int_equal(srv_config_parse(&c, 5, argv, err, sizeof(err)), 0);
    assert_int_equal(c.n_tenants, 4);
    /* a changes its quota and key, b its weight, c goes, d comes; an option
     * changes (kept), the argv one stays as given */
    write_file(path, "[foliod]\nmax-seqs = 9\n[tenant.b]\napi_key = kb\nweight = 7\n"
                     "[tenant.a]\nuid = 1001\nweight = 3\nmax_waiting = 2\napi_key = ka\n"
                     "[tenant.d]\nuid = 1004\n");
    struct srv_config_reload r;
    assert_int_equal(srv_config_reload(&c, 5, argv, &r, err, sizeof(err)), 0);
    assert_string_equal(r.kept, "--max-seqs");
    assert_string_equal(r.tenants, "~b ~a +d -c");
    assert_int_equal(c.max_seqs, 5); /* kept */
    assert_int_equal(c.block_size, 32);
    assert_int_equal(c.n_tenants, 5); /* default a b c d: indices are stable */
    assert_string_equal(c.tenants[1].name, "a");
    assert_int_equal(c.tenants[1].max_waiting, 2);
    assert_string_equal(c.tenants[1].api_key, "ka");
    assert_int_equal(c.tenants[2].weight, 7);
    assert_int_equal(srv_config_tenant_by_uid(&c, 1003), -1); /* c: unreachable */
    assert_string_equal(c.tenants[3].name, "c");
    assert_int_equal(srv_config_tenant_by_uid(&c, 1004), 4);
    for (int t = 0; t < 5; t++)
        assert_int_equal(r.changed[0] >> t & 1, t != 0);
    /* unchanged file: nothing to do */
    assert_int_equal(srv_config_reload(&c, 5, argv, &r, err, sizeof(err)), 0);
    assert_string_equal(r.tenants, "");
    assert_int_equal(r.changed[0], 0);
    /* a broken file: an error, nothing changed */
    write_file(path, "[tenant.a]\nweight = 0\n");
    assert_int_equal(srv_config_reload(&c, 5, argv, &r, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "weight"));
    assert_int_equal(c.tenants[1].weight, 3);
    assert_int_equal(c.tenants[1].max_waiting, 2);
    srv_config_free(&c);
    /* -V is --version */
    char *argv2[] = {"foliod", "-V", NULL};
    assert_int_equal(srv_config_parse(&c, 2, argv2, err, sizeof(err)), 0);
    assert_true(c.version);
    srv_config_free(&c);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_argv_forms),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_ini_and_precedence),
        cmocka_unit_test(test_dump_roundtrip),
        cmocka_unit_test(test_help_lists_every_option),
        cmocka_unit_test(test_enum_ids),
        cmocka_unit_test(test_reload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
