/*
 * daemon/auth.h — who may call what, and how much of the server one client
 * may hold.
 *
 * Callers.  Every request but GET /health is made by a caller, resolved
 * from the transport (srv_auth_caller):
 *
 *   Unix socket   the peer's uid (SO_PEERCRED): a tenant whose `uid` it
 *                 is; else an operator uid (--operator-uids; default 0
 *                 and the daemon's own) acts as the operator; else, per
 *                 --unknown-uid, its own tenant
 *                 "uid-N" (`own`, the default) or 403 everywhere
 *                 (`refuse`).  A request a browser sent (Origin or
 *                 Sec-Fetch-Site: through a TCP proxy) gets TCP's Host,
 *                 Origin, Sec-Fetch-Site and Content-Type checks.
 *   TCP           the key in "Authorization: Bearer KEY" (or the password
 *                 of Basic, for browsers): a tenant's api_key, or the
 *                 operator-key; no valid key -> 401 everywhere.  Without
 *                 any key configured TCP exists only with
 *                 --insecure-listen, and every client is tenant "default".
 *                 Host must be an IP literal, localhost, or one of
 *                 --allowed-hosts; an Origin other than the Host's own,
 *                 or Sec-Fetch-Site cross-site/same-site, is 403 (a web
 *                 page cannot drive the daemon); a POST whose
 *                 Content-Type is not JSON is 415 (none at all passes).
 *
 * A caller is a tenant slot (whose queue and prefix-cache salt it uses)
 * and an operator flag.  The operator sees every tenant in the views
 * (/metrics, /v1/kv, /dashboard); a tenant gets 403 there
 * (--tenant-views deny, the default) or only its own entries (own).
 * The operator's completions run as tenant "default".
 *
 * Tenant slots: [0, n_cfg) are the configured tenants (config order, slot
 * 0 "default"); slots from n_cfg on are unconfigured uids, one each, named
 * "uid-N", created on first contact and kept for the process's life (a
 * slot is never reused, so its prefix-cache salt is never shared).  They
 * take tenant "default"'s limits.  At most SRV_TENANT_SLOTS slots; a uid
 * beyond is refused (403, logged).
 *
 * Keys are compared as SHA-256 digests (fixed length), every configured
 * key each time, without early exit: the time taken depends on neither the
 * keys nor where the presented one matches.
 *
 * Client limits (accounting).  A client is a peer uid (socket) or a peer
 * address (TCP), and a tenant once a request names one.  Each may hold at
 * most --max-client-connections connections and --max-client-buffered
 * bytes of request bodies being received; all clients together at most
 * --max-connections and --max-buffered.  Over a limit the connection gets
 * a 503 JSON answer and is closed.  One struct srv_auth_conn per
 * connection (http's acct) ties it to its client and tenant.
 *
 * Threading: loop thread only.
 */
#ifndef FOLIO_DAEMON_AUTH_H
#define FOLIO_DAEMON_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "config.h"
#include "http.h"

#define SRV_TENANT_SLOTS 256 /* configured tenants + unconfigured uids */

/* The access column of the route table. */
enum srv_access {
    SRV_ACCESS_PUBLIC, /* anyone, even a refused peer (/health) */
    SRV_ACCESS_TENANT, /* any caller; acts as its tenant */
    SRV_ACCESS_VIEW,   /* the operator; a tenant per --tenant-views: 403, or its own entries */
};

struct srv_caller {
    int tenant;    /* slot: the tenant whose queue and cache it uses */
    bool operator; /* sees every tenant's entries */
};

struct srv_auth_client; /* one uid or address: auth.c */

struct srv_auth {
    const struct srv_config *cfg;
    uint32_t self_uid;                      /* the daemon's effective uid */
    int64_t op_uids[SRV_MAX_OPERATOR_UIDS]; /* socket uids that are the operator */
    int n_op_uids;                          /* --operator-uids, else {0, self_uid} */
    int n_cfg, n_slots;
    /* per slot */
    uint8_t key_sha[SRV_MAX_TENANTS][32]; /* configured tenants' api_key digests */
    bool has_key[SRV_MAX_TENANTS];
    uint8_t op_sha[32];
    bool has_op, any_key;
    int64_t slot_uid[SRV_TENANT_SLOTS]; /* per-uid slots: the uid */
    char slot_name[SRV_TENANT_SLOTS][24];
    int64_t tenant_conns[SRV_TENANT_SLOTS], tenant_buffered[SRV_TENANT_SLOTS];
    /* clients */
    struct srv_auth_client **buckets; /* [SRV_AUTH_BUCKETS] */
    int64_t buffered;                 /* request-body bytes held, all clients */
    double refused_total; /* requests answered 503 for a body or tenant limit (http counts
                             connections refused at accept) */
};

int srv_auth_init(struct srv_auth *a, const struct srv_config *cfg);
void srv_auth_free(struct srv_auth *a);
/* SIGHUP, after srv_config_reload changed cfg's tenants in place: their
 * uids and key digests again.  Tenants appended to cfg are taken only
 * while no unconfigured uid has a slot (those slots follow the configured
 * ones); returns how many of cfg's tenants apply (the rest need a
 * restart). */
int srv_auth_reload(struct srv_auth *a);

/* Resolves the caller of rq for a route of the given access class.
 * 0 and *who, or the answer's status (401, 403, 415, 503) with e filled and
 * *extra pointing at header lines to add (WWW-Authenticate) or NULL.  A
 * 503 (the tenant holds too many connections) closes the connection after
 * the answer: the caller calls http_conn_close_after. */
int srv_auth_caller(struct srv_auth *a, const struct http_request *rq, enum srv_access access,
                    struct srv_caller *who, struct srv_api_error *e, const char **extra);

/* Tenant slots in use, and a slot's name and settings (a per-uid slot
 * takes tenant "default"'s). */
int srv_auth_tenant_count(const struct srv_auth *a);
const char *srv_auth_tenant_name(const struct srv_auth *a, int t);
const struct srv_tenant_cfg *srv_auth_tenant_cfg(const struct srv_auth *a, int t);

/* http's accounting hooks (user: struct srv_auth). */
int srv_auth_on_accept(void *user, const struct http_peer *p, void **acct, struct srv_api_error *e);
void srv_auth_on_release(void *user, void *acct);
int srv_auth_on_buffer(void *user, void *acct, int64_t delta);

/* SHA-256 of n bytes (FIPS 180-4). */
void srv_sha256(const void *data, size_t n, uint8_t out[32]);
/* 1 when a and b (n bytes each) are equal; time independent of contents. */
int srv_ct_equal(const uint8_t *a, const uint8_t *b, size_t n);
/* The key of an Authorization value: "Bearer KEY", or the password of
 * "Basic base64(user:KEY)".  Copies at most cap-1 bytes into out; returns
 * the key's length, or -1 when there is none. */
int srv_auth_key_of(const char *authorization, char *out, size_t cap);

#endif
