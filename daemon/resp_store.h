/*
 * daemon/resp_store.h — the Responses API's store: the responses foliod
 * keeps (store: true, the default) for GET and DELETE /v1/responses/{id}
 * and for previous_response_id, each as its response object and its
 * conversation (the chat messages a follow-up continues) and its input
 * items (GET /v1/responses/{id}/input_items).
 *
 * Tenants are apart: each tenant's responses are visible to that tenant
 * only (another tenant's id is as absent as an unknown one), and each
 * tenant has its own byte budget, beyond which its own least recently
 * used responses go first: one tenant's traffic never evicts another's.
 * Memory: at most cap bytes per tenant of texts (ids and bookkeeping
 * besides), in process memory; a restart forgets everything.
 */
#ifndef FOLIO_DAEMON_RESP_STORE_H
#define FOLIO_DAEMON_RESP_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct srv_resp_store;

/* cap: bytes of texts each tenant may keep (0: keep nothing).  0 or
 * -ENOMEM. */
int srv_resp_store_new(size_t cap, struct srv_resp_store **out);
void srv_resp_store_free(struct srv_resp_store *st);
/* Whether anything is kept (cap > 0). */
bool srv_resp_store_on(const struct srv_resp_store *st);

/* Keeps copies of a response (object, conv and input: NUL-terminated JSON
 * texts)
 * under id for tenant (a slot, 0 .. SRV_TENANT_SLOTS - 1), replacing one of the
 * same id; the tenant's least recently used responses are dropped until
 * its texts fit cap.  0, -E2BIG (larger than cap alone: not kept),
 * -ENOMEM. */
int srv_resp_store_put(struct srv_resp_store *st, int tenant, const char *id, const char *object,
                       const char *conv, const char *input);
/* id's response object / conversation / input items if tenant's, else
 * NULL; each marks it recently used.  Valid until the store changes. */
const char *srv_resp_store_object(struct srv_resp_store *st, int tenant, const char *id);
const char *srv_resp_store_conv(struct srv_resp_store *st, int tenant, const char *id);
const char *srv_resp_store_input(struct srv_resp_store *st, int tenant, const char *id);
/* Drops id if it is tenant's: true, else false. */
bool srv_resp_store_delete(struct srv_resp_store *st, int tenant, const char *id);

struct srv_resp_store_stats {
    int64_t responses, bytes, evicted;
};
/* Totals over every tenant (tenant < 0) or one tenant's. */
void srv_resp_store_stats(const struct srv_resp_store *st, int tenant,
                          struct srv_resp_store_stats *out);

#endif
