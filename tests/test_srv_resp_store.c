/*
 * tests/test_srv_resp_store.c — the Responses store (daemon/resp_store.h)
 * against a naive model: an array of entries with a use clock, the
 * tenant's smallest clock evicted first.  Random puts, gets and deletes
 * over three tenants and a few hundred ids (past the first bucket
 * doubling) must agree with it call by call: what each returns, and each
 * tenant's count, bytes and evictions.  Then the edges by hand.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "folio/common.h"
#include "resp_store.h"

#define N_IDS     300
#define N_TENANTS 3
#define CAP       6000

struct model_entry {
    bool live;
    int tenant;
    uint64_t used;
    size_t bytes;
    char object[256], conv[256], input[32];
};

struct model {
    struct model_entry e[N_IDS]; /* by id number */
    uint64_t clock;
    int64_t evicted[N_TENANTS];
};

static int64_t model_bytes(const struct model *m, int t, int64_t *count)
{
    int64_t b = 0;
    *count = 0;
    for (int i = 0; i < N_IDS; i++)
        if (m->e[i].live && m->e[i].tenant == t) {
            b += (int64_t)m->e[i].bytes;
            ++*count;
        }
    return b;
}

static int model_put(struct model *m, int t, int id, const char *idstr, const char *obj,
                     const char *conv, const char *input)
{
    size_t bytes = strlen(idstr) + strlen(obj) + strlen(conv) + strlen(input) + 4;
    if (bytes > CAP)
        return -E2BIG;
    m->e[id].live = false;
    int64_t n;
    while (model_bytes(m, t, &n) + (int64_t)bytes > CAP) {
        int old = -1;
        for (int i = 0; i < N_IDS; i++)
            if (m->e[i].live && m->e[i].tenant == t && (old < 0 || m->e[i].used < m->e[old].used))
                old = i;
        m->e[old].live = false;
        m->evicted[t]++;
    }
    struct model_entry *e = &m->e[id];
    e->live = true;
    e->tenant = t;
    e->used = ++m->clock;
    e->bytes = bytes;
    snprintf(e->object, sizeof(e->object), "%s", obj);
    snprintf(e->conv, sizeof(e->conv), "%s", conv);
    snprintf(e->input, sizeof(e->input), "%s", input);
    return 0;
}

static const struct model_entry *model_get(struct model *m, int t, int id)
{
    struct model_entry *e = &m->e[id];
    if (!e->live || e->tenant != t)
        return NULL;
    e->used = ++m->clock;
    return e;
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static void fill(char *s, size_t n, char c)
{
    memset(s, c, n);
    s[n] = 0;
}

static void test_against_model(void **state)
{
    (void)state;
    struct srv_resp_store *st;
    assert_int_equal(srv_resp_store_new(CAP, &st), 0);
    assert_true(srv_resp_store_on(st));
    static struct model m;
    memset(&m, 0, sizeof(m));
    for (int step = 0; step < 20000; step++) {
        int t = (int)rnd(N_TENANTS), id = (int)rnd(N_IDS), op = (int)rnd(10);
        char idstr[32], obj[256], conv[256];
        snprintf(idstr, sizeof(idstr), "resp_%d", id);
        if (op < 5) {
            size_t lo = 1 + rnd(200), lc = 2 + rnd(50);
            fill(obj, lo, (char)('a' + step % 26));
            fill(conv, lc, (char)('A' + step % 26));
            char input[32];
            snprintf(input, sizeof(input), "[%d]", step);
            int want = model_put(&m, t, id, idstr, obj, conv, input);
            assert_int_equal(srv_resp_store_put(st, t, idstr, obj, conv, input), want);
        } else if (op < 9) {
            const struct model_entry *e = model_get(&m, t, id);
            const char *got = op < 7   ? srv_resp_store_object(st, t, idstr)
                              : op < 8 ? srv_resp_store_conv(st, t, idstr)
                                       : srv_resp_store_input(st, t, idstr);
            if (!e)
                assert_null(got);
            else
                assert_string_equal(got, op < 7 ? e->object : op < 8 ? e->conv : e->input);
        } else {
            bool want = m.e[id].live && m.e[id].tenant == t;
            if (want)
                m.e[id].live = false;
            assert_int_equal(srv_resp_store_delete(st, t, idstr), want);
        }
        int64_t all = 0;
        for (int k = 0; k < N_TENANTS; k++) {
            struct srv_resp_store_stats s;
            int64_t n, b = model_bytes(&m, k, &n);
            srv_resp_store_stats(st, k, &s);
            assert_int_equal(s.responses, n);
            assert_int_equal(s.bytes, b);
            assert_int_equal(s.evicted, m.evicted[k]);
            assert_true(s.bytes <= CAP);
            all += n;
        }
        struct srv_resp_store_stats s;
        srv_resp_store_stats(st, -1, &s);
        assert_int_equal(s.responses, all);
    }
    int64_t ev = 0;
    for (int k = 0; k < N_TENANTS; k++)
        ev += m.evicted[k];
    assert_true(ev > 100); /* the budget was exercised */
    srv_resp_store_free(st);
}

static void test_edges(void **state)
{
    (void)state;
    struct srv_resp_store *st;
    assert_int_equal(srv_resp_store_new(64, &st), 0);
    char big[80];
    fill(big, 70, 'x');
    /* larger than the budget alone: refused, nothing dropped */
    assert_int_equal(srv_resp_store_put(st, 0, "resp_a", "{}", "[]", "[]"), 0);
    assert_int_equal(srv_resp_store_put(st, 0, "resp_b", big, "[]", "[]"), -E2BIG);
    assert_string_equal(srv_resp_store_object(st, 0, "resp_a"), "{}");
    /* another tenant's id is absent to this one, and cannot be deleted */
    assert_null(srv_resp_store_object(st, 1, "resp_a"));
    assert_null(srv_resp_store_conv(st, 1, "resp_a"));
    assert_false(srv_resp_store_delete(st, 1, "resp_a"));
    assert_int_equal(srv_resp_store_put(st, 0, "resp_a", "{\"v\":2}", "[1]", "[]"),
                     0); /* replaced */
    assert_string_equal(srv_resp_store_conv(st, 0, "resp_a"), "[1]");
    struct srv_resp_store_stats s;
    srv_resp_store_stats(st, 0, &s);
    assert_int_equal(s.responses, 1);
    assert_int_equal(s.bytes, 7 + 8 + 4 + 3);
    assert_string_equal(srv_resp_store_input(st, 0, "resp_a"), "[]");
    assert_null(srv_resp_store_input(st, 1, "resp_a"));
    /* a bad tenant slot */
    assert_int_equal(srv_resp_store_put(st, -1, "resp_c", "{}", "[]", "[]"), -EINVAL);
    assert_true(srv_resp_store_delete(st, 0, "resp_a"));
    assert_false(srv_resp_store_delete(st, 0, "resp_a"));
    srv_resp_store_free(st);
    /* a budget of 0 keeps nothing */
    assert_int_equal(srv_resp_store_new(0, &st), 0);
    assert_false(srv_resp_store_on(st));
    assert_int_equal(srv_resp_store_put(st, 0, "resp_a", "{}", "[]", "[]"), -E2BIG);
    assert_null(srv_resp_store_object(st, 0, "resp_a"));
    srv_resp_store_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_model),
        cmocka_unit_test(test_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
