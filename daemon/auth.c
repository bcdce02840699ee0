/*
 * daemon/auth.c — the access rule and the client limits (the contract is
 * in auth.h).
 *
 * Layout:
 *
 *   struct srv_auth (in struct srv)
 *     key_sha[t]          SHA-256 of tenant t's api_key (has_key[t])
 *     op_sha              SHA-256 of --operator-key (has_op)
 *     op_uids[n_op_uids]  socket uids that are the operator (--operator-uids,
 *                         else 0 and the daemon's own)
 *     slot_uid/slot_name  per-uid tenant slots [n_cfg, n_slots)
 *     tenant_conns[t]     connections whose last request was tenant t's
 *     tenant_buffered[t]  request-body bytes held on those connections
 *     buckets[]           hash of struct srv_auth_client by (uid | address)
 *
 *   struct srv_auth_conn (http's acct, one per connection)
 *     client -> its srv_auth_client (conns, buffered)
 *     tenant    the slot it is counted under, -1 before its first request
 *     buffered  its body bytes now held (also in client, tenant, total)
 *
 * Invariants: a client's conns/buffered are the sums over its connections
 * (it is freed when both reach 0); tenant_conns[t] counts connections with
 * tenant == t; a->buffered is the sum over all connections.
 *
 * The SHA-256 here follows FIPS 180-4 (checked against its test vectors in
 * tests/test_srv_auth.c); it hashes keys, a few bytes per request.
 */
#include "auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "folio/common.h"
#include "log.h"

#define SRV_AUTH_BUCKETS 1024
#define MAX_KEY          1024

/* ---- SHA-256 ----------------------------------------------------------- */

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

/* One 64-byte block into the state h[8]. */
static void sha256_block(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 =
            k + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

void srv_sha256(const void *data, size_t n, uint8_t out[32])
{
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const uint8_t *p = data;
    size_t left = n;
    for (; left >= 64; left -= 64, p += 64)
        sha256_block(h, p);
    /* the tail, 0x80, zeros, and the bit length: one or two blocks */
    uint8_t tail[128] = {0};
    memcpy(tail, p, left);
    tail[left] = 0x80;
    size_t tl = left + 9 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)n * 8;
    for (int i = 0; i < 8; i++)
        tail[tl - 1 - i] = (uint8_t)(bits >> (8 * i));
    for (size_t off = 0; off < tl; off += 64)
        sha256_block(h, tail + off);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(h[i] >> 8);
        out[4 * i + 3] = (uint8_t)h[i];
    }
}

int srv_ct_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
    volatile uint8_t diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= a[i] ^ b[i];
    return (int)((1u & ((uint32_t)diff - 1) >> 8));
}

/* ---- keys -------------------------------------------------------------- */

static int b64_val(char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+' || ch == '-')
        return 62;
    if (ch == '/' || ch == '_')
        return 63;
    return -1;
}

int srv_auth_key_of(const char *v, char *out, size_t cap)
{
    if (!v || cap < 2)
        return -1;
    while (*v == ' ')
        v++;
    if (!strncasecmp(v, "Bearer ", 7)) {
        v += 7;
        while (*v == ' ')
            v++;
        size_t n = strlen(v);
        while (n && v[n - 1] == ' ')
            n--;
        if (!n || n >= cap)
            return -1;
        memcpy(out, v, n);
        out[n] = 0;
        return (int)n;
    }
    if (strncasecmp(v, "Basic ", 6))
        return -1;
    v += 6;
    while (*v == ' ')
        v++;
    /* base64(user:password) -> the password is the key */
    char dec[MAX_KEY + 256];
    size_t n = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (; *v && *v != '=' && *v != ' '; v++) {
        int x = b64_val(*v);
        if (x < 0)
            return -1;
        acc = acc << 6 | (uint32_t)x;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n + 1 >= sizeof(dec))
                return -1;
            dec[n++] = (char)(acc >> bits);
        }
    }
    const char *colon = memchr(dec, ':', n);
    if (!colon)
        return -1;
    size_t kl = n - (size_t)(colon + 1 - dec);
    if (!kl || kl >= cap)
        return -1;
    memcpy(out, colon + 1, kl);
    out[kl] = 0;
    return (int)kl;
}

/* ---- tenants ----------------------------------------------------------- */

int srv_auth_init(struct srv_auth *a, const struct srv_config *cfg)
{
    memset(a, 0, sizeof(*a));
    a->cfg = cfg;
    a->self_uid = (uint32_t)geteuid();
    if (cfg->operator_uids) {
        a->n_op_uids = srv_parse_uid_list(cfg->operator_uids, a->op_uids, SRV_MAX_OPERATOR_UIDS);
        if (a->n_op_uids < 0)
            return -EINVAL;
    } else {
        a->op_uids[a->n_op_uids++] = 0;
        a->op_uids[a->n_op_uids++] = a->self_uid;
    }
    a->n_cfg = a->n_slots = cfg->n_tenants;
    for (int t = 0; t < cfg->n_tenants; t++) {
        a->slot_uid[t] = cfg->tenants[t].uid;
        const char *k = cfg->tenants[t].api_key;
        if (k) {
            srv_sha256(k, strlen(k), a->key_sha[t]);
            a->has_key[t] = a->any_key = true;
        }
    }
    if (cfg->operator_key) {
        srv_sha256(cfg->operator_key, strlen(cfg->operator_key), a->op_sha);
        a->has_op = a->any_key = true;
    }
    a->buckets = folio_calloc(SRV_AUTH_BUCKETS, sizeof(*a->buckets));
    return a->buckets ? 0 : -ENOMEM;
}

int srv_auth_reload(struct srv_auth *a)
{
    const struct srv_config *cfg = a->cfg;
    int n = cfg->n_tenants;
    if (n > a->n_cfg && a->n_slots > a->n_cfg)
        n = a->n_cfg; /* per-uid tenants hold the slots after the configured ones */
    if (a->n_slots < n)
        a->n_slots = n;
    a->n_cfg = n;
    a->any_key = a->has_op;
    for (int t = 0; t < n; t++) {
        a->slot_uid[t] = cfg->tenants[t].uid;
        const char *k = cfg->tenants[t].api_key;
        a->has_key[t] = k != NULL;
        if (k) {
            srv_sha256(k, strlen(k), a->key_sha[t]);
            a->any_key = true;
        }
    }
    return n;
}

struct srv_auth_client {
    struct srv_auth_client *next;
    bool is_tcp;
    int64_t uid;
    uint8_t ip[16];
    int64_t conns, buffered;
};

struct srv_auth_conn {
    struct srv_auth_client *client;
    int tenant;
    int64_t buffered;
};

void srv_auth_free(struct srv_auth *a)
{
    if (a->buckets)
        for (int i = 0; i < SRV_AUTH_BUCKETS; i++)
            for (struct srv_auth_client *c = a->buckets[i], *next; c; c = next) {
                next = c->next;
                folio_free(c);
            }
    folio_free(a->buckets);
    a->buckets = NULL;
}

int srv_auth_tenant_count(const struct srv_auth *a)
{
    return a->n_slots;
}

const char *srv_auth_tenant_name(const struct srv_auth *a, int t)
{
    return t < a->n_cfg ? a->cfg->tenants[t].name : a->slot_name[t];
}

const struct srv_tenant_cfg *srv_auth_tenant_cfg(const struct srv_auth *a, int t)
{
    return &a->cfg->tenants[t < a->n_cfg ? t : 0];
}

/* The slot of an unconfigured uid: found, or created (-ENOSPC when full). */
static int uid_slot(struct srv_auth *a, int64_t uid)
{
    for (int t = a->n_cfg; t < a->n_slots; t++)
        if (a->slot_uid[t] == uid)
            return t;
    if (a->n_slots >= SRV_TENANT_SLOTS)
        return -ENOSPC;
    int t = a->n_slots++;
    a->slot_uid[t] = uid;
    snprintf(a->slot_name[t], sizeof(a->slot_name[t]), "uid-%lld", (long long)uid);
    srv_log(SRV_LOG_INFO, "uid %lld is tenant '%s' (unconfigured: its own tenant)", (long long)uid,
            a->slot_name[t]);
    return t;
}

/* ---- TCP: Host and Origin ---------------------------------------------- */

static bool name_in_list(const char *list, const char *name, size_t n)
{
    for (const char *p = list; p && *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t len = strcspn(p, ", ");
        if (len && len == n && !strncasecmp(p, name, n))
            return true;
        p += len;
    }
    return false;
}

/* Host: an IP literal, localhost, or a name of --allowed-hosts (a name
 * other than those could be an attacker's, rebound to this address). */
static bool host_ok(const struct srv_auth *a, const char *host)
{
    char h[256];
    size_t n = strlen(host);
    if (!n || n >= sizeof(h))
        return false;
    const char *end = host + n;
    if (host[0] == '[') {
        const char *rb = strchr(host, ']');
        if (!rb || (rb[1] && rb[1] != ':'))
            return false;
        size_t l = (size_t)(rb - host - 1);
        memcpy(h, host + 1, l);
        h[l] = 0;
        struct in6_addr x;
        return inet_pton(AF_INET6, h, &x) == 1;
    }
    const char *colon = strrchr(host, ':');
    if (colon) {
        if (!colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1))
            return false;
        end = colon;
    }
    size_t l = (size_t)(end - host);
    memcpy(h, host, l);
    h[l] = 0;
    struct in_addr x;
    if (inet_pton(AF_INET, h, &x) == 1 || !strcasecmp(h, "localhost"))
        return true;
    return name_in_list(a->cfg->allowed_hosts, h, l);
}

/* Origin, when a browser sends one, must be the page's own (the Host). */
static bool origin_ok(const char *origin, const char *host)
{
    if (!host)
        return false;
    size_t hl = strlen(host);
    for (int i = 0; i < 2; i++) {
        const char *scheme = i ? "https://" : "http://";
        size_t sl = strlen(scheme);
        if (strlen(origin) == sl + hl && !strncasecmp(origin, scheme, sl) &&
            !strcasecmp(origin + sl, host))
            return true;
    }
    return false;
}

/* ---- callers ----------------------------------------------------------- */

/* Counts the connection under tenant t from now on (its last request's);
 * -EBUSY when t already holds its share of connections. */
static int conn_bind(struct srv_auth *a, struct srv_auth_conn *ac, int t)
{
    if (!ac || ac->tenant == t)
        return 0;
    if (a->tenant_conns[t] >= a->cfg->max_client_connections)
        return -EBUSY;
    if (ac->tenant >= 0) {
        a->tenant_conns[ac->tenant]--;
        a->tenant_buffered[ac->tenant] -= ac->buffered;
    }
    ac->tenant = t;
    a->tenant_conns[t]++;
    a->tenant_buffered[t] += ac->buffered;
    return 0;
}

static int deny(struct srv_api_error *e, int status, const char *fmt, const char *arg)
{
    srv_api_error_set(e, status, status == 401 ? "authentication_error" : "permission_error", NULL,
                      status == 401 ? "invalid_api_key" : NULL, fmt, arg);
    return status;
}

/* A request a browser sent: browsers send Origin with every POST and
 * cross-origin read, and current ones Sec-Fetch-Site with every request;
 * curl and the SDKs send neither. */
static bool from_browser(const struct http_request *rq)
{
    return rq->origin || rq->fetch_site;
}

/* Host, Origin and Sec-Fetch-Site: a web page cannot drive the daemon.
 * Every TCP request; on the socket the requests a browser sent (through a
 * TCP proxy such as socat, the dashboard's way without --listen). */
static int browser_checks(const struct srv_auth *a, const struct http_request *rq,
                          struct srv_api_error *e)
{
    if (rq->host && !host_ok(a, rq->host))
        return deny(e, 403,
                    "Host '%s' is not allowed (an IP address, localhost, or --allowed-hosts)",
                    rq->host);
    if (rq->origin && !origin_ok(rq->origin, rq->host))
        return deny(e, 403, "requests from web pages of another origin (%s) are refused",
                    rq->origin);
    if (rq->fetch_site && strcasecmp(rq->fetch_site, "same-origin") &&
        strcasecmp(rq->fetch_site, "none"))
        return deny(e, 403, "requests from web pages of another origin (%s) are refused",
                    rq->fetch_site);
    return 0;
}

static int caller_tcp(struct srv_auth *a, const struct http_request *rq, struct srv_caller *who,
                      struct srv_api_error *e, const char **extra)
{
    if (!a->any_key) { /* --insecure-listen: everyone is tenant "default" */
        *who = (struct srv_caller){0, false};
        return 0;
    }
    char key[MAX_KEY];
    uint8_t d[32];
    int kl = srv_auth_key_of(rq->auth, key, sizeof(key));
    if (kl > 0) {
        srv_sha256(key, (size_t)kl, d);
        /* every key is compared; the match is selected without branching
         * on the comparison */
        int match = -1;
        for (int t = 0; t < a->n_cfg; t++) {
            int eq = srv_ct_equal(d, a->key_sha[t], 32) & a->has_key[t];
            match += (t + 1) * eq;
        }
        int op = srv_ct_equal(d, a->op_sha, 32) & a->has_op;
        if (op) {
            *who = (struct srv_caller){0, true};
            return 0;
        }
        if (match >= 0) {
            *who = (struct srv_caller){match, false};
            return 0;
        }
    }
    /* Basic first: a browser then asks for the key (as the password) */
    *extra = "WWW-Authenticate: Basic realm=\"foliod\", charset=\"UTF-8\"\r\n"
             "WWW-Authenticate: Bearer realm=\"foliod\"\r\n";
    return deny(e, 401, "%s", "a valid 'Authorization: Bearer KEY' is required");
}

static int caller_unix(struct srv_auth *a, const struct http_request *rq, struct srv_caller *who,
                       struct srv_api_error *e)
{
    int64_t uid = rq->peer_uid;
    bool op = false;
    for (int i = 0; i < a->n_op_uids; i++)
        op |= uid >= 0 && uid == a->op_uids[i];
    for (int t = 0; t < a->n_cfg; t++)
        if (a->slot_uid[t] >= 0 && a->slot_uid[t] == uid) {
            *who = (struct srv_caller){t, op};
            return 0;
        }
    if (op) {
        *who = (struct srv_caller){0, true};
        return 0;
    }
    char u[32];
    snprintf(u, sizeof(u), "%lld", (long long)uid);
    if (uid < 0 || a->cfg->unknown_uid_id == SRV_UNKNOWN_UID_REFUSE)
        return deny(e, 403, "uid %s is not a configured tenant", u);
    int t = uid_slot(a, uid);
    if (t < 0) {
        srv_log(SRV_LOG_ERROR, "uid %s refused: all %d tenant slots are taken", u,
                SRV_TENANT_SLOTS);
        return deny(e, 403, "uid %s is not a configured tenant and no tenant slot is left", u);
    }
    *who = (struct srv_caller){t, false};
    return 0;
}

/* True for a JSON media type: application/json or application/...+json,
 * with any parameters (charset). */
static bool json_type(const char *v)
{
    v += strspn(v, " \t");
    size_t n = strcspn(v, ";");
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    if (n < 12 || strncasecmp(v, "application/", 12))
        return false;
    const char *sub = v + 12;
    size_t sn = n - 12;
    if (!sn || memchr(sub, '/', sn) || memchr(sub, ' ', sn))
        return false;
    return (sn == 4 && !strncasecmp(sub, "json", 4)) ||
           (sn > 5 && !strncasecmp(sub + sn - 5, "+json", 5));
}

/* A request body (or a POST) must be JSON when it says what it is, on
 * TCP and from a browser on the socket.  A web page can send a "simple"
 * cross-origin POST (text/plain, a form) without a preflight; JSON needs
 * one.  No Content-Type at all is accepted (scripts send none; a browser
 * that sends a body without one also sends Origin, checked before).  Other
 * socket clients may send any (curl -d says
 * application/x-www-form-urlencoded). */
static int content_type_check(const struct http_request *rq, struct srv_api_error *e)
{
    if (!rq->content_type || (rq->method != HTTP_M_POST && !rq->body_len) ||
        json_type(rq->content_type))
        return 0;
    srv_api_error_set(e, 415, "invalid_request_error", NULL, "unsupported_media_type",
                      "Content-Type '%.80s' is not accepted here: send application/json",
                      rq->content_type);
    return 415;
}

int srv_auth_caller(struct srv_auth *a, const struct http_request *rq, enum srv_access access,
                    struct srv_caller *who, struct srv_api_error *e, const char **extra)
{
    *extra = NULL;
    *who = (struct srv_caller){0, false};
    if (access == SRV_ACCESS_PUBLIC)
        return 0;
    bool web = rq->is_tcp || from_browser(rq);
    int st = web ? browser_checks(a, rq, e) : 0;
    if (!st)
        st = rq->is_tcp ? caller_tcp(a, rq, who, e, extra) : caller_unix(a, rq, who, e);
    if (!st && web)
        st = content_type_check(rq, e);
    if (!st && access == SRV_ACCESS_VIEW &&
        !who->operator&& a->cfg->tenant_views_id == SRV_TENANT_VIEWS_DENY)
        st = deny(e, 403, "%s",
                  "only the operator reads /metrics, /v1/kv and /dashboard (tenant-views = deny)");
    if (st)
        return st;
    if (conn_bind(a, rq->acct, who->tenant)) {
        a->refused_total++;
        srv_api_error_set(e, 503, "service_unavailable", NULL, NULL,
                          "tenant '%s' holds %lld connections (--max-client-connections)",
                          srv_auth_tenant_name(a, who->tenant),
                          (long long)a->tenant_conns[who->tenant]);
        return 503;
    }
    return 0;
}

/* ---- client accounting ------------------------------------------------- */

static uint32_t client_hash(const struct http_peer *p)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)p->is_tcp;
    uint8_t k[24];
    memcpy(k, &p->uid, 8);
    memcpy(k + 8, p->ip, 16);
    for (size_t i = 0; i < sizeof(k); i++)
        h = (h ^ k[i]) * 1099511628211ull;
    return (uint32_t)(h % SRV_AUTH_BUCKETS);
}

static void client_put(struct srv_auth *a, struct srv_auth_client *cl)
{
    if (cl->conns || cl->buffered)
        return;
    struct http_peer p = {.is_tcp = cl->is_tcp, .uid = cl->uid};
    memcpy(p.ip, cl->ip, 16);
    struct srv_auth_client **pp = &a->buckets[client_hash(&p)];
    while (*pp != cl)
        pp = &(*pp)->next;
    *pp = cl->next;
    folio_free(cl);
}

int srv_auth_on_accept(void *user, const struct http_peer *p, void **acct, struct srv_api_error *e)
{
    struct srv_auth *a = user;
    *acct = NULL;
    struct srv_auth_client **pp = &a->buckets[client_hash(p)], *cl = *pp;
    while (cl && !(cl->is_tcp == p->is_tcp && cl->uid == p->uid && !memcmp(cl->ip, p->ip, 16)))
        cl = cl->next;
    if (cl && cl->conns >= a->cfg->max_client_connections) { /* http counts it */
        char who[64];
        if (p->is_tcp)
            snprintf(who, sizeof(who), "this address");
        else
            snprintf(who, sizeof(who), "uid %lld", (long long)p->uid);
        srv_api_error_set(e, 503, "service_unavailable", NULL, NULL,
                          "%s holds %lld connections (--max-client-connections)", who,
                          (long long)cl->conns);
        return -EBUSY;
    }
    struct srv_auth_conn *ac = folio_calloc(1, sizeof(*ac));
    if (!cl) {
        cl = folio_calloc(1, sizeof(*cl));
        if (!cl || !ac) {
            folio_free(cl);
            folio_free(ac);
            srv_api_error_set(e, 503, "service_unavailable", NULL, NULL, "out of memory");
            return -EBUSY;
        }
        cl->is_tcp = p->is_tcp;
        cl->uid = p->uid;
        memcpy(cl->ip, p->ip, 16);
        cl->next = *pp;
        *pp = cl;
    } else if (!ac) {
        srv_api_error_set(e, 503, "service_unavailable", NULL, NULL, "out of memory");
        return -EBUSY;
    }
    ac->client = cl;
    ac->tenant = -1;
    cl->conns++;
    *acct = ac;
    return 0;
}

int srv_auth_on_buffer(void *user, void *acct, int64_t delta)
{
    struct srv_auth *a = user;
    struct srv_auth_conn *ac = acct;
    if (!ac)
        return 0;
    if (delta > 0) {
        int64_t lim = a->cfg->max_client_buffered;
        if (a->buffered + delta > a->cfg->max_buffered || ac->client->buffered + delta > lim ||
            (ac->tenant >= 0 && a->tenant_buffered[ac->tenant] + delta > lim)) {
            a->refused_total++;
            return -ENOBUFS;
        }
    }
    ac->buffered += delta;
    ac->client->buffered += delta;
    a->buffered += delta;
    if (ac->tenant >= 0)
        a->tenant_buffered[ac->tenant] += delta;
    return 0;
}

void srv_auth_on_release(void *user, void *acct)
{
    struct srv_auth *a = user;
    struct srv_auth_conn *ac = acct;
    if (!ac)
        return;
    srv_auth_on_buffer(a, ac, -ac->buffered);
    if (ac->tenant >= 0)
        a->tenant_conns[ac->tenant]--;
    ac->client->conns--;
    client_put(a, ac->client);
    folio_free(ac);
}
