/*
 * daemon/resp_store.c — the Responses store (resp_store.h).
 *
 * Layout: entries in a hash table by id (chained; FNV-1a; the bucket
 * count a power of two, doubled when entries outnumber buckets), each
 * also on its tenant's LRU list (head: most recently used).  An entry
 * owns one allocation: the struct, then the id, the object, the
 * conversation and the input texts.  Per tenant: the list, the bytes of its texts, its
 * count and evictions.
 *
 * Invariants: tenant t's bytes = the sum of its entries' text bytes <=
 * cap; an id appears once in the table (whatever its tenant: ids are the
 * server's, unique); every entry is on exactly its tenant's list.
 */
#include "resp_store.h"

#include <errno.h>
#include <string.h>

#include "auth.h"
#include "folio/common.h"

struct entry {
    struct entry *next;          /* hash chain */
    struct entry *newer, *older; /* tenant LRU */
    int tenant;
    size_t bytes; /* of the four texts */
    char *id, *object, *conv, *input;
};

struct tenant_lru {
    struct entry *newest, *oldest;
    int64_t bytes, count, evicted;
};

struct srv_resp_store {
    size_t cap;
    struct entry **buckets;
    size_t n_buckets, count;
    struct tenant_lru t[SRV_TENANT_SLOTS];
};

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

int srv_resp_store_new(size_t cap, struct srv_resp_store **out)
{
    struct srv_resp_store *st = folio_calloc(1, sizeof(*st));
    if (!st)
        return -ENOMEM;
    st->cap = cap;
    st->n_buckets = 64;
    st->buckets = folio_calloc(st->n_buckets, sizeof(*st->buckets));
    if (!st->buckets) {
        folio_free(st);
        return -ENOMEM;
    }
    *out = st;
    return 0;
}

void srv_resp_store_free(struct srv_resp_store *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->n_buckets; i++)
        for (struct entry *e = st->buckets[i], *n; e; e = n) {
            n = e->next;
            folio_free(e);
        }
    folio_free(st->buckets);
    folio_free(st);
}

bool srv_resp_store_on(const struct srv_resp_store *st)
{
    return st && st->cap > 0;
}

static struct entry **slot(struct srv_resp_store *st, const char *id)
{
    struct entry **p = &st->buckets[hash(id) & (st->n_buckets - 1)];
    while (*p && strcmp((*p)->id, id))
        p = &(*p)->next;
    return p;
}

static void lru_unlink(struct srv_resp_store *st, struct entry *e)
{
    struct tenant_lru *t = &st->t[e->tenant];
    if (e->newer)
        e->newer->older = e->older;
    else
        t->newest = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        t->oldest = e->newer;
    e->newer = e->older = NULL;
}

static void lru_push(struct srv_resp_store *st, struct entry *e)
{
    struct tenant_lru *t = &st->t[e->tenant];
    e->newer = NULL;
    e->older = t->newest;
    if (t->newest)
        t->newest->newer = e;
    else
        t->oldest = e;
    t->newest = e;
}

/* Unlinks *p's entry from everything and frees it. */
static void drop(struct srv_resp_store *st, struct entry **p)
{
    struct entry *e = *p;
    *p = e->next;
    lru_unlink(st, e);
    st->t[e->tenant].bytes -= (int64_t)e->bytes;
    st->t[e->tenant].count--;
    st->count--;
    folio_free(e);
}

static void grow(struct srv_resp_store *st)
{
    size_t n = st->n_buckets * 2;
    struct entry **b = folio_calloc(n, sizeof(*b));
    if (!b)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < st->n_buckets; i++)
        for (struct entry *e = st->buckets[i], *next; e; e = next) {
            next = e->next;
            struct entry **h = &b[hash(e->id) & (n - 1)];
            e->next = *h;
            *h = e;
        }
    folio_free(st->buckets);
    st->buckets = b;
    st->n_buckets = n;
}

int srv_resp_store_put(struct srv_resp_store *st, int tenant, const char *id, const char *object,
                       const char *conv, const char *input)
{
    if (tenant < 0 || tenant >= SRV_TENANT_SLOTS)
        return -EINVAL;
    size_t li = strlen(id) + 1, lo = strlen(object) + 1, lc = strlen(conv) + 1;
    size_t ln = strlen(input) + 1, bytes = li + lo + lc + ln;
    if (bytes > st->cap)
        return -E2BIG;
    struct entry **p = slot(st, id);
    if (*p)
        drop(st, p);
    struct tenant_lru *t = &st->t[tenant];
    while (t->oldest && t->bytes + (int64_t)bytes > (int64_t)st->cap) {
        drop(st, slot(st, t->oldest->id));
        t->evicted++;
    }
    struct entry *e = folio_malloc(sizeof(*e) + bytes);
    if (!e)
        return -ENOMEM;
    *e = (struct entry){.tenant = tenant, .bytes = bytes};
    e->id = (char *)(e + 1);
    e->object = e->id + li;
    e->conv = e->object + lo;
    e->input = e->conv + lc;
    memcpy(e->id, id, li);
    memcpy(e->object, object, lo);
    memcpy(e->conv, conv, lc);
    memcpy(e->input, input, ln);
    p = slot(st, id);
    e->next = *p;
    *p = e;
    lru_push(st, e);
    t->bytes += (int64_t)bytes;
    t->count++;
    if (++st->count > st->n_buckets)
        grow(st);
    return 0;
}

static struct entry *find(struct srv_resp_store *st, int tenant, const char *id)
{
    struct entry *e = *slot(st, id);
    if (!e || e->tenant != tenant)
        return NULL;
    lru_unlink(st, e);
    lru_push(st, e);
    return e;
}

const char *srv_resp_store_object(struct srv_resp_store *st, int tenant, const char *id)
{
    struct entry *e = find(st, tenant, id);
    return e ? e->object : NULL;
}

const char *srv_resp_store_conv(struct srv_resp_store *st, int tenant, const char *id)
{
    struct entry *e = find(st, tenant, id);
    return e ? e->conv : NULL;
}

const char *srv_resp_store_input(struct srv_resp_store *st, int tenant, const char *id)
{
    struct entry *e = find(st, tenant, id);
    return e ? e->input : NULL;
}

bool srv_resp_store_delete(struct srv_resp_store *st, int tenant, const char *id)
{
    struct entry **p = slot(st, id);
    if (!*p || (*p)->tenant != tenant)
        return false;
    drop(st, p);
    return true;
}

void srv_resp_store_stats(const struct srv_resp_store *st, int tenant,
                          struct srv_resp_store_stats *out)
{
    *out = (struct srv_resp_store_stats){0};
    for (int i = 0; i < SRV_TENANT_SLOTS; i++)
        if (tenant < 0 || tenant == i) {
            out->responses += st->t[i].count;
            out->bytes += st->t[i].bytes;
            out->evicted += st->t[i].evicted;
        }
}
