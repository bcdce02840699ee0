/*
 * tests/test_srv_auth.c — the access rule (daemon/auth.c): SHA-256 against
 * FIPS 180-4's vectors and Python hashlib's digests at the padding
 * boundaries, the constant-time compare, keys from Bearer and Basic, the
 * caller of every kind of request (configured uid, unconfigured uid under
 * both policies, operator uids, TCP with no key / a tenant key / the
 * operator key, Host, Origin, Sec-Fetch-Site), Content-Type on TCP,
 * tenant-views (deny / own), operator-uids, and the client limits
 * (connections per client and per tenant, buffered bytes).
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

#include "auth.h"
#include "config.h"

static void hex(const uint8_t d[32], char out[65])
{
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void test_sha256(void **state)
{
    (void)state;
    static const struct {
        const char *msg;
        size_t n_a; /* msg NULL: n_a times 'a' */
        const char *want;
    } v[] = {
        {"", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", 0, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 0,
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {NULL, 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {NULL, 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {NULL, 63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {NULL, 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
        {NULL, 65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
        {NULL, 119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
        {NULL, 120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
        {NULL, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char *buf = NULL;
        const char *m = v[i].msg;
        size_t n = m ? strlen(m) : v[i].n_a;
        if (!m) {
            buf = malloc(n);
            memset(buf, 'a', n);
            m = buf;
        }
        uint8_t d[32];
        char h[65];
        srv_sha256(m, n, d);
        hex(d, h);
        if (strcmp(h, v[i].want))
            fail_msg("vector %zu (%zu bytes): %s, want %s", i, n, h, v[i].want);
        free(buf);
    }
}

static void test_ct_equal_and_keys(void **state)
{
    (void)state;
    uint8_t a[32], b[32];
    srv_sha256("k", 1, a);
    memcpy(b, a, 32);
    assert_int_equal(srv_ct_equal(a, b, 32), 1);
    for (int i = 0; i < 32; i++)
        for (int bit = 0; bit < 8; bit++) {
            b[i] ^= (uint8_t)(1 << bit);
            assert_int_equal(srv_ct_equal(a, b, 32), 0);
            b[i] ^= (uint8_t)(1 << bit);
        }
    char k[64];
    assert_int_equal(srv_auth_key_of("Bearer s3cret", k, sizeof(k)), 6);
    assert_string_equal(k, "s3cret");
    assert_int_equal(srv_auth_key_of("bearer   s3cret  ", k, sizeof(k)), 6);
    assert_int_equal(srv_auth_key_of("Basic bWU6ay1ib2I=", k, sizeof(k)), 5); /* me:k-bob */
    assert_string_equal(k, "k-bob");
    assert_int_equal(srv_auth_key_of("Basic bWU=", k, sizeof(k)), -1); /* no ':' */
    assert_int_equal(srv_auth_key_of("Basic !!", k, sizeof(k)), -1);
    assert_int_equal(srv_auth_key_of("Bearer ", k, sizeof(k)), -1);
    assert_int_equal(srv_auth_key_of("Token x", k, sizeof(k)), -1);
    assert_int_equal(srv_auth_key_of(NULL, k, sizeof(k)), -1);
    assert_int_equal(srv_auth_key_of("Bearer 0123456789", k, 8), -1); /* too long */
}

static const char ini[] = "[foliod]\n"
                          "operator-key = k-op\n"
                          "max-client-connections = 3\n"
                          "max-client-buffered = 8k\n"
                          "max-buffered = 12k\n"
                          "allowed-hosts = foliod.example, other.example\n"
                          "[tenant.alice]\n"
                          "uid = 1001\n"
                          "api_key = k-alice\n"
                          "[tenant.bob]\n"
                          "uid = 1002\n"
                          "api_key = k-bob\n";

static void cfg_load(struct srv_config *c, const char *extra)
{
    char err[256], *argv[] = {"foliod", "--socket", "/tmp/x.sock"};
    assert_int_equal(srv_config_parse(c, 3, argv, err, sizeof(err)), 0);
    if (srv_config_parse_ini_string(c, ini, err, sizeof(err)))
        fail_msg("%s", err);
    if (extra && srv_config_parse_ini_string(c, extra, err, sizeof(err)))
        fail_msg("%s", err);
}

struct call {
    int status;
    struct srv_caller who;
    struct srv_api_error e;
    const char *extra;
};

static struct call run(struct srv_auth *a, const struct http_request *rq, enum srv_access acc)
{
    struct call r;
    r.status = srv_auth_caller(a, rq, acc, &r.who, &r.e, &r.extra);
    return r;
}

static struct http_request sock_rq(int64_t uid)
{
    return (struct http_request){.url = "/", .body = "", .peer_uid = uid};
}

static struct http_request tcp_rq(const char *auth, const char *host)
{
    return (struct http_request){
        .url = "/", .body = "", .peer_uid = -1, .is_tcp = true, .auth = auth, .host = host};
}

static void test_callers(void **state)
{
    (void)state;
    struct srv_config c;
    cfg_load(&c, NULL);
    struct srv_auth a;
    assert_int_equal(srv_auth_init(&a, &c), 0);
    struct http_request rq;
    struct call r;
    /* socket: configured uids */
    rq = sock_rq(1001);
    r = run(&a, &rq, SRV_ACCESS_TENANT);
    assert_int_equal(r.status, 0);
    assert_string_equal(srv_auth_tenant_name(&a, r.who.tenant), "alice");
    assert_false(r.who.operator);
    rq = sock_rq(1002);
    r = run(&a, &rq, SRV_ACCESS_VIEW);
    assert_string_equal(srv_auth_tenant_name(&a, r.who.tenant), "bob");
    /* unconfigured uids (own, the default): one tenant each, stable */
    rq = sock_rq(2000);
    r = run(&a, &rq, SRV_ACCESS_TENANT);
    assert_int_equal(r.status, 0);
    assert_string_equal(srv_auth_tenant_name(&a, r.who.tenant), "uid-2000");
    int t2000 = r.who.tenant;
    rq = sock_rq(2001);
    r = run(&a, &rq, SRV_ACCESS_TENANT);
    assert_string_equal(srv_auth_tenant_name(&a, r.who.tenant), "uid-2001");
    assert_int_not_equal(r.who.tenant, t2000);
    rq = sock_rq(2000);
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).who.tenant, t2000);
    assert_int_equal(srv_auth_tenant_count(&a), 5);
    /* their settings are tenant default's */
    assert_ptr_equal(srv_auth_tenant_cfg(&a, t2000), &c.tenants[0]);
    /* operator uids */
    rq = sock_rq(0);
    r = run(&a, &rq, SRV_ACCESS_VIEW);
    assert_int_equal(r.status, 0);
    assert_true(r.who.operator);
    assert_int_equal(r.who.tenant, 0);
    rq = sock_rq(geteuid());
    assert_true(run(&a, &rq, SRV_ACCESS_VIEW).who.operator);
    /* /health: anyone */
    rq = sock_rq(-1);
    assert_int_equal(run(&a, &rq, SRV_ACCESS_PUBLIC).status, 0);
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 403);
    /* TCP */
    rq = tcp_rq(NULL, "127.0.0.1:8000");
    r = run(&a, &rq, SRV_ACCESS_TENANT);
    assert_int_equal(r.status, 401);
    assert_non_null(r.extra);
    assert_non_null(strstr(r.extra, "WWW-Authenticate: Basic"));
    assert_non_null(strstr(r.extra, "WWW-Authenticate: Bearer"));
    assert_int_equal(run(&a, &rq, SRV_ACCESS_VIEW).status, 401);
    assert_int_equal(run(&a, &rq, SRV_ACCESS_PUBLIC).status, 0);
    rq = tcp_rq("Bearer k-alicex", "127.0.0.1:8000");
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 401);
    rq = tcp_rq("Bearer k-alic", "127.0.0.1:8000");
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 401);
    rq = tcp_rq("Bearer k-bob", "127.0.0.1:8000");
    r = run(&a, &rq, SRV_ACCESS_TENANT);
    assert_int_equal(r.status, 0);
    assert_string_equal(srv_auth_tenant_name(&a, r.who.tenant), "bob");
    assert_false(r.who.operator);
    rq = tcp_rq("Basic bWU6ay1ib2I=", "[::1]:8000");
    assert_string_equal(srv_auth_tenant_name(&a, run(&a, &rq, SRV_ACCESS_VIEW).who.tenant), "bob");
    rq = tcp_rq("Bearer k-op", "localhost:8000");
    r = run(&a, &rq, SRV_ACCESS_VIEW);
    assert_int_equal(r.status, 0);
    assert_true(r.who.operator);
    /* Host: IP literals, localhost, --allowed-hosts; nothing else */
    static const struct {
        const char *host;
        int status;
    } hosts[] = {
        {"127.0.0.1", 0},
        {"10.1.2.3:80", 0},
        {"[::1]:8000", 0},
        {"[fe80::1]", 0},
        {"LOCALHOST:1", 0},
        {"foliod.example:8000", 0},
        {"Other.Example", 0},
        {"evil.example:8000", 403},
        {"127.0.0.1.evil.example", 403},
        {"[::1]x", 403},
        {"127.0.0.1:80a", 403},
        {"", 403},
        {"foliod.example.evil", 403},
    };
    for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
        rq = tcp_rq("Bearer k-alice", hosts[i].host);
        r = run(&a, &rq, SRV_ACCESS_TENANT);
        if (r.status != hosts[i].status)
            fail_msg("Host '%s': %d, want %d", hosts[i].host, r.status, hosts[i].status);
    }
    /* Origin: only the Host's own; Sec-Fetch-Site: same-origin or none */
    rq = tcp_rq("Bearer k-alice", "127.0.0.1:8000");
    rq.origin = "http://127.0.0.1:8000";
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 0);
    rq.origin = "http://evil.example";
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 403);
    rq.origin = "null";
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 403);
    rq.origin = NULL;
    rq.fetch_site = "same-origin";
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 0);
    rq.fetch_site = "cross-site";
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 403);
    rq.fetch_site = "same-site";
    assert_int_equal(run(&a, &rq, SRV_ACCESS_VIEW).status, 403);
    srv_auth_free(&a);
    srv_config_free(&c);

    /* unknown-uid = refuse: 403 for unconfigured uids, operators still in */
    cfg_load(&c, "[foliod]\nunknown-uid = refuse\n");
    assert_int_equal(srv_auth_init(&a, &c), 0);
    rq = sock_rq(2000);
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 403);
    assert_int_equal(run(&a, &rq, SRV_ACCESS_VIEW).status, 403);
    rq = sock_rq(1001);
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 0);
    rq = sock_rq(0);
    assert_true(run(&a, &rq, SRV_ACCESS_VIEW).who.operator);
    assert_int_equal(srv_auth_tenant_count(&a), 3);
    srv_auth_free(&a);
    srv_config_free(&c);
}

/* TCP: a POST's Content-Type must be JSON when given (a web page's simple
 * types are 415); none at all passes; the socket takes any. */
static void test_content_type(void **state)
{
    (void)state;
    struct srv_config c;
    cfg_load(&c, NULL);
    struct srv_auth a;
    assert_int_equal(srv_auth_init(&a, &c), 0);
    static const struct {
        const char *ctype;
        int status;
    } types[] = {
        {"application/json", 0},
        {"Application/JSON", 0},
        {"application/json; charset=utf-8", 0},
        {"application/json;charset=UTF-8", 0},
        {" application/json ", 0},
        {"application/vnd.api+json", 0},
        {"application/merge-patch+json; charset=utf-8", 0},
        {"text/plain", 415},
        {"text/plain;charset=UTF-8", 415},
        {"application/x-www-form-urlencoded", 415},
        {"multipart/form-data; boundary=----x", 415},
        {"text/json", 415},
        {"application/jsonx", 415},
        {"application/json5", 415},
        {"application/+json", 415},
        {"application/", 415},
        {"application/x json", 415},
        {"json", 415},
        {"", 415},
    };
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        struct http_request rq = tcp_rq("Bearer k-alice", "127.0.0.1:8000");
        rq.method = HTTP_M_POST;
        rq.body = "{}";
        rq.body_len = 2;
        rq.content_type = types[i].ctype;
        struct call r = run(&a, &rq, SRV_ACCESS_TENANT);
        if (r.status != types[i].status)
            fail_msg("TCP POST '%s': %d, want %d", types[i].ctype, r.status, types[i].status);
        if (r.status) {
            assert_int_equal(r.e.status, 415);
            assert_string_equal(r.e.type, "invalid_request_error");
            assert_string_equal(r.e.code, "unsupported_media_type");
        }
        /* the socket: anything */
        rq.is_tcp = false;
        rq.peer_uid = 1001;
        assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 0);
    }
    /* no Content-Type: accepted; a GET without a body: not looked at */
    struct http_request rq = tcp_rq("Bearer k-alice", "127.0.0.1:8000");
    rq.method = HTTP_M_POST;
    rq.body = "{}";
    rq.body_len = 2;
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 0);
    rq.method = HTTP_M_GET;
    rq.body = "";
    rq.body_len = 0;
    rq.content_type = "text/plain";
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 0);
    /* a body on another method is checked too; an empty POST as well */
    rq.method = HTTP_M_OTHER;
    rq.body = "x";
    rq.body_len = 1;
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 415);
    rq.method = HTTP_M_POST;
    rq.body = "";
    rq.body_len = 0;
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 415);
    /* no key: 401 first (a refused caller learns nothing more); /health: public */
    rq.auth = NULL;
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 401);
    assert_int_equal(run(&a, &rq, SRV_ACCESS_PUBLIC).status, 0);
    srv_auth_free(&a);
    srv_config_free(&c);
}

/* The socket reached by a browser (through a TCP proxy such as socat):
 * requests with Origin or Sec-Fetch-Site get TCP's browser checks and the
 * Content-Type rule; other socket clients (Host "x" from curl) do not. */
static void test_socket_from_browser(void **state)
{
    (void)state;
    struct srv_config c;
    cfg_load(&c, NULL);
    struct srv_auth a;
    assert_int_equal(srv_auth_init(&a, &c), 0);
    struct http_request rq = sock_rq(1001);
    rq.method = HTTP_M_POST;
    rq.body = "{}";
    rq.body_len = 2;
    rq.host = "x";
    rq.content_type = "application/x-www-form-urlencoded"; /* curl -d */
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 0);
    /* a page of another site posting through the proxy */
    rq.host = "127.0.0.1:9000";
    rq.origin = "http://evil.example";
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 403);
    rq.origin = NULL;
    rq.fetch_site = "cross-site";
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 403);
    /* DNS rebinding: the page's own origin, but a foreign Host */
    rq.host = "evil.example:9000";
    rq.origin = "http://evil.example:9000";
    rq.fetch_site = "same-origin";
    assert_int_equal(run(&a, &rq, SRV_ACCESS_VIEW).status, 403);
    /* the proxied dashboard itself: same origin; a form post is still 415 */
    rq.host = "127.0.0.1:9000";
    rq.origin = "http://127.0.0.1:9000";
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 415);
    rq.content_type = "application/json";
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 0);
    rq = sock_rq(0);
    rq.host = "localhost:9000";
    rq.fetch_site = "none"; /* typed into the address bar */
    struct call r = run(&a, &rq, SRV_ACCESS_VIEW);
    assert_int_equal(r.status, 0);
    assert_true(r.who.operator);
    srv_auth_free(&a);
    srv_config_free(&c);
}

/* tenant-views: deny (the default) keeps the views the operator's; own
 * lets a tenant in (its handler then shows only its entries). */
static void test_tenant_views(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        struct srv_config c;
        cfg_load(&c, mode ? "[foliod]\ntenant-views = own\n" : NULL);
        struct srv_auth a;
        assert_int_equal(srv_auth_init(&a, &c), 0);
        int want = mode ? 0 : 403;
        struct http_request rqs[] = {sock_rq(1001), sock_rq(2000),
                                     tcp_rq("Bearer k-bob", "127.0.0.1")};
        for (size_t i = 0; i < sizeof(rqs) / sizeof(rqs[0]); i++) {
            struct call r = run(&a, &rqs[i], SRV_ACCESS_VIEW);
            if (r.status != want)
                fail_msg("mode %d caller %zu: view %d, want %d", mode, i, r.status, want);
            if (r.status)
                assert_string_equal(r.e.type, "permission_error");
            assert_false(r.who.operator);
            assert_int_equal(run(&a, &rqs[i], SRV_ACCESS_TENANT).status, 0);
        }
        /* the operator, both ways in: always */
        struct http_request op[] = {sock_rq(0), tcp_rq("Bearer k-op", "127.0.0.1")};
        for (size_t i = 0; i < 2; i++) {
            struct call r = run(&a, &op[i], SRV_ACCESS_VIEW);
            assert_int_equal(r.status, 0);
            assert_true(r.who.operator);
        }
        srv_auth_free(&a);
        srv_config_free(&c);
    }
}

/* operator-uids replaces the default operators (0 and the daemon's uid). */
static void test_operator_uids(void **state)
{
    (void)state;
    struct srv_config c;
    cfg_load(&c, "[foliod]\noperator-uids = 1001, 3000\nunknown-uid = refuse\n");
    struct srv_auth a;
    assert_int_equal(srv_auth_init(&a, &c), 0);
    struct http_request rq = sock_rq(3000);
    struct call r = run(&a, &rq, SRV_ACCESS_VIEW);
    assert_int_equal(r.status, 0);
    assert_true(r.who.operator);
    assert_int_equal(r.who.tenant, 0);
    rq = sock_rq(1001); /* a tenant's uid that is an operator uid: both */
    r = run(&a, &rq, SRV_ACCESS_VIEW);
    assert_int_equal(r.status, 0);
    assert_true(r.who.operator);
    assert_string_equal(srv_auth_tenant_name(&a, r.who.tenant), "alice");
    rq = sock_rq(1002);
    assert_int_equal(run(&a, &rq, SRV_ACCESS_VIEW).status, 403);
    /* root (and the test's own uid, unless listed) no longer are */
    if (geteuid() != 1001 && geteuid() != 3000) {
        rq = sock_rq(geteuid());
        assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 403); /* refuse */
    }
    rq = sock_rq(0);
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 403);
    srv_auth_free(&a);
    srv_config_free(&c);
    /* none: no operator on the socket; the key still is one */
    cfg_load(&c, "[foliod]\noperator-uids = none\n");
    assert_int_equal(srv_auth_init(&a, &c), 0);
    rq = sock_rq(0);
    r = run(&a, &rq, SRV_ACCESS_TENANT);
    assert_int_equal(r.status, 0);
    assert_false(r.who.operator);
    assert_string_equal(srv_auth_tenant_name(&a, r.who.tenant), "uid-0");
    rq = tcp_rq("Bearer k-op", "127.0.0.1");
    assert_true(run(&a, &rq, SRV_ACCESS_VIEW).who.operator);
    srv_auth_free(&a);
    srv_config_free(&c);
    /* a list the config check did not see is refused at init */
    cfg_load(&c, "[foliod]\noperator-uids = zero\n");
    assert_int_equal(srv_auth_init(&a, &c), -EINVAL);
    srv_auth_free(&a);
    srv_config_free(&c);
}

/* Tenant slots are never reused: more unconfigured uids than slots are
 * refused, the first ones keep theirs. */
static void test_slots_full(void **state)
{
    (void)state;
    struct srv_config c;
    cfg_load(&c, NULL);
    struct srv_auth a;
    assert_int_equal(srv_auth_init(&a, &c), 0);
    int n_free = SRV_TENANT_SLOTS - c.n_tenants;
    for (int i = 0; i < n_free + 5; i++) {
        struct http_request rq = sock_rq(100000 + i);
        struct call r = run(&a, &rq, SRV_ACCESS_TENANT);
        assert_int_equal(r.status, i < n_free ? 0 : 403);
    }
    struct http_request rq = sock_rq(100000);
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).who.tenant, c.n_tenants);
    srv_auth_free(&a);
    srv_config_free(&c);
}

static void test_client_limits(void **state)
{
    (void)state;
    struct srv_config c;
    cfg_load(&c, NULL);
    struct srv_auth a;
    assert_int_equal(srv_auth_init(&a, &c), 0);
    struct srv_api_error e;
    struct http_peer u1 = {.uid = 2000}, u2 = {.uid = 2001}, ip = {.is_tcp = true, .uid = -1};
    ip.ip[15] = 7;
    void *ac[8] = {0};
    /* 3 connections per uid; the 4th is refused, another uid is not */
    for (int i = 0; i < 3; i++)
        assert_int_equal(srv_auth_on_accept(&a, &u1, &ac[i], &e), 0);
    void *x = NULL;
    assert_int_equal(srv_auth_on_accept(&a, &u1, &x, &e), -EBUSY);
    assert_int_equal(e.status, 503);
    assert_null(x);
    assert_int_equal(srv_auth_on_accept(&a, &u2, &ac[3], &e), 0);
    assert_int_equal(srv_auth_on_accept(&a, &ip, &ac[4], &e), 0);
    srv_auth_on_release(&a, ac[0]);
    assert_int_equal(srv_auth_on_accept(&a, &u1, &ac[0], &e), 0);
    /* buffered bytes: 8k per client, 12k in all */
    assert_int_equal(srv_auth_on_buffer(&a, ac[0], 5000), 0);
    assert_int_equal(srv_auth_on_buffer(&a, ac[1], 3192), 0);
    assert_int_equal(srv_auth_on_buffer(&a, ac[2], 1), -ENOBUFS); /* uid 2000 at 8k */
    assert_int_equal(srv_auth_on_buffer(&a, ac[3], 4000), 0);
    assert_int_equal(srv_auth_on_buffer(&a, ac[4], 100), -ENOBUFS); /* 12k in all */
    assert_int_equal(srv_auth_on_buffer(&a, ac[1], -3192), 0);
    assert_int_equal(srv_auth_on_buffer(&a, ac[4], 100), 0);
    assert_int_equal(a.buffered, 5000 + 4000 + 100);
    /* a connection's release gives its bytes back */
    srv_auth_on_release(&a, ac[0]);
    assert_int_equal(a.buffered, 4100);
    /* tenant connections: 3 per tenant, over any number of addresses */
    struct srv_api_error e2;
    void *tc[4];
    for (int i = 0; i < 4; i++) {
        struct http_peer p = {.is_tcp = true, .uid = -1};
        p.ip[15] = (uint8_t)(20 + i);
        assert_int_equal(srv_auth_on_accept(&a, &p, &tc[i], &e2), 0);
        struct http_request rq = tcp_rq("Bearer k-bob", "127.0.0.1");
        rq.acct = tc[i];
        struct call r = run(&a, &rq, SRV_ACCESS_TENANT);
        assert_int_equal(r.status, i < 3 ? 0 : 503);
    }
    /* the same connection asking again is not counted twice */
    struct http_request rq = tcp_rq("Bearer k-bob", "127.0.0.1");
    rq.acct = tc[0];
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 0);
    srv_auth_on_release(&a, tc[1]);
    rq.acct = tc[3];
    assert_int_equal(run(&a, &rq, SRV_ACCESS_TENANT).status, 0);
    for (int i = 0; i < 4; i++)
        if (i != 1)
            srv_auth_on_release(&a, tc[i]);
    for (int i = 1; i < 5; i++)
        srv_auth_on_release(&a, ac[i]);
    assert_int_equal(a.buffered, 0);
    for (int t = 0; t < SRV_TENANT_SLOTS; t++)
        assert_int_equal(a.tenant_conns[t], 0);
    srv_auth_free(&a);
    srv_config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_ct_equal_and_keys),
        cmocka_unit_test(test_callers),
        cmocka_unit_test(test_slots_full),
        cmocka_unit_test(test_client_limits),
        cmocka_unit_test(test_content_type),
        cmocka_unit_test(test_tenant_views),
        cmocka_unit_test(test_operator_uids),
        cmocka_unit_test(test_socket_from_browser),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
