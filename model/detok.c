/*
 * model/detok.c — incremental detokenizer and stop-string matcher for
 * streamed generation (API in include/folio/tokenizer.h, tok_detok_*).
 *
 * What it owns: the stop strings (copied) and three fixed buffers sized at
 * creation, so that feeding a token never allocates:
 *
 *   token piece ──► in:   pend (≤ 3 bytes of an unfinished UTF-8 sequence
 *                         from the last feed) + this piece (≤ chunk bytes)
 *               ──► hold: validated UTF-8 (invalid bytes already U+FFFD,
 *                         each maximal invalid subpart one U+FFFD) not yet
 *                         released: at most max_stop - 1 bytes between
 *                         calls, plus one chunk's worth (3x for U+FFFD)
 *               ──► out:  the text released by this call
 *
 * Each feed appends to hold, then looks for the earliest occurrence of any
 * stop string in hold.  Found: the text before it is released, the rest
 * dropped, and the detokenizer is finished (stopped = that string's index).
 * Not found: the longest suffix of hold that is a proper prefix of some
 * stop string stays held; everything before it is released.
 *
 * Invariant: released text never contains a stop string, nor ends with a
 * prefix of one that later text could complete — a stop string that spans
 * any number of tokens is found whole in hold, because its beginning was
 * never released.  Between calls n_pend ≤ 3 and n_hold < max_stop.
 *
 * Threading: one detokenizer per stream, used by one thread at a time.
 */
#include <errno.h>
#include <string.h>

#include "folio/common.h"
#include "folio/tokenizer.h"

struct tok_detok {
    const tok_t *tok;
    unsigned flags;
    size_t n_stops;
    char **stop;      /* [n_stops] copies, NUL-terminated */
    size_t *stop_len; /* [n_stops] (0: ignored) */
    size_t max_stop;
    size_t chunk; /* largest piece accepted per feed */
    char *in;     /* [chunk + 4] */
    char *hold;   /* [hold_cap] */
    char *out;    /* [hold_cap] */
    size_t hold_cap;
    size_t n_pend, n_hold;
    char pend[4];
    int stopped; /* index of the matched stop string, or -1 */
    bool done;
};

void tok_detok_free(tok_detok_t *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n_stops && d->stop; i++)
        folio_free(d->stop[i]);
    folio_free(d->stop);
    folio_free(d->stop_len);
    folio_free(d->in);
    folio_free(d->hold);
    folio_free(d->out);
    folio_free(d);
}

void tok_detok_reset(tok_detok_t *d)
{
    d->n_pend = 0;
    d->n_hold = 0;
    d->stopped = -1;
    d->done = false;
}

/* Is s[0..n) well-formed UTF-8 (no overlongs, surrogates or > U+10FFFF)?
 * Only such stop strings are accepted: the text they are matched in is
 * well-formed, so a match then starts and ends on character boundaries
 * (one starting with a continuation byte could cut a character in two). */
static bool stop_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        size_t l = c < 0x80                ? 1
                   : c >= 0xc2 && c < 0xe0 ? 2
                   : c >= 0xe0 && c < 0xf0 ? 3
                   : c >= 0xf0 && c < 0xf5 ? 4
                                           : 0;
        if (!l || l > n - i)
            return false;
        uint32_t cp = l == 1 ? c : l == 2 ? c & 0x1fu : l == 3 ? c & 0x0fu : c & 0x07u;
        for (size_t k = 1; k < l; k++) {
            if ((u[i + k] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (u[i + k] & 0x3fu);
        }
        if ((l == 3 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) ||
            (l == 4 && (cp < 0x10000 || cp > 0x10ffff)))
            return false;
        i += l;
    }
    return true;
}

int tok_detok_new(const tok_t *t, const char *const *stops, size_t n_stops, unsigned flags,
                  tok_detok_t **out)
{
    if (!out || (n_stops && !stops))
        return -EINVAL;
    tok_detok_t *d = folio_calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->tok = t;
    d->flags = (flags & TOK_DECODE_SPECIAL) | TOK_DECODE_KEEP_SPACE;
    d->n_stops = n_stops;
    if (n_stops) {
        d->stop = folio_calloc(n_stops, sizeof(char *));
        d->stop_len = folio_calloc(n_stops, sizeof(size_t));
        if (!d->stop || !d->stop_len)
            goto nomem;
    }
    for (size_t i = 0; i < n_stops; i++) {
        if (!stops[i] || !stop_valid(stops[i], strlen(stops[i])))
            goto inval;
        d->stop[i] = folio_strdup(stops[i]);
        if (!d->stop[i])
            goto nomem;
        d->stop_len[i] = strlen(stops[i]);
        d->max_stop = FOLIO_MAX(d->max_stop, d->stop_len[i]);
    }
    d->chunk = FOLIO_MAX(t ? tok_max_piece_len(t) : 0, (size_t)256);
    d->hold_cap = d->max_stop + 3 * (d->chunk + 4) + 8;
    d->in = folio_malloc(d->chunk + 4);
    d->hold = folio_malloc(d->hold_cap);
    d->out = folio_malloc(d->hold_cap);
    if (!d->in || !d->hold || !d->out)
        goto nomem;
    tok_detok_reset(d);
    *out = d;
    return 0;
inval:
    tok_detok_free(d);
    return -EINVAL;
nomem:
    tok_detok_free(d);
    return -ENOMEM;
}

static void hold_put(tok_detok_t *d, const char *s, size_t n)
{
    memcpy(d->hold + d->n_hold, s, n);
    d->n_hold += n;
}

/* Validates in[0..n) into hold; an unfinished sequence at the end goes to
 * pend, or (final) becomes U+FFFD. */
static void utf8_validate(tok_detok_t *d, const unsigned char *in, size_t n, bool final)
{
    static const char fffd[3] = {(char)0xef, (char)0xbf, (char)0xbd};
    size_t i = 0, len;
    while (i < n) {
        if (in[i] < 0x80) {
            size_t j = i;
            while (j < n && in[j] < 0x80)
                j++;
            hold_put(d, (const char *)in + i, j - i);
            i = j;
            continue;
        }
        switch (folio_utf8_next(in + i, n - i, &len)) {
        case FOLIO_UTF8_OK:
            hold_put(d, (const char *)in + i, len);
            break;
        case FOLIO_UTF8_BAD:
            hold_put(d, fffd, 3);
            break;
        case FOLIO_UTF8_SHORT: /* ran out of input */
            if (final)
                hold_put(d, fffd, 3);
            else {
                memcpy(d->pend, in + i, len);
                d->n_pend = len;
            }
            break;
        }
        i += len;
    }
}

/* Releases what is safe from hold into out; returns 1 on a stop match. */
static int release(tok_detok_t *d, bool final, size_t *len)
{
    size_t best = SIZE_MAX;
    int which = -1;
    for (size_t s = 0; s < d->n_stops; s++) {
        size_t l = d->stop_len[s];
        if (!l || l > d->n_hold)
            continue;
        const char *p = memmem(d->hold, d->n_hold, d->stop[s], l);
        if (p && (size_t)(p - d->hold) < best) {
            best = (size_t)(p - d->hold);
            which = (int)s;
        }
    }
    if (which >= 0) {
        memcpy(d->out, d->hold, best);
        *len = best;
        d->n_hold = 0;
        d->stopped = which;
        d->done = true;
        return 1;
    }
    size_t keep = 0;
    if (!final) {
        size_t maxk = FOLIO_MIN(d->n_hold, d->max_stop ? d->max_stop - 1 : 0);
        for (size_t k = maxk; k > 0 && !keep; k--) {
            const char *suf = d->hold + d->n_hold - k;
            for (size_t s = 0; s < d->n_stops; s++) {
                if (d->stop_len[s] > k && memcmp(d->stop[s], suf, k) == 0) {
                    keep = k;
                    break;
                }
            }
        }
    }
    size_t rel = d->n_hold - keep;
    memcpy(d->out, d->hold, rel);
    memmove(d->hold, d->hold + rel, keep);
    d->n_hold = keep;
    *len = rel;
    return 0;
}

static int step(tok_detok_t *d, const char *bytes, size_t n, bool final, const char **text,
                size_t *len)
{
    *text = d->out;
    *len = 0;
    if (d->done)
        return d->stopped >= 0 ? 1 : 0;
    memcpy(d->in, d->pend, d->n_pend);
    if (n)
        memcpy(d->in + d->n_pend, bytes, n);
    size_t m = d->n_pend + n;
    d->n_pend = 0;
    utf8_validate(d, (const unsigned char *)d->in, m, final);
    int rc = release(d, final, len);
    if (final)
        d->done = true;
    return rc;
}

int tok_detok_feed_bytes(tok_detok_t *d, const char *bytes, size_t n, const char **text,
                         size_t *len)
{
    if (!d || (!bytes && n) || !text || !len)
        return -EINVAL;
    if (n > d->chunk)
        return -E2BIG;
    return step(d, bytes, n, false, text, len);
}

int tok_detok_feed(tok_detok_t *d, int32_t id, const char **text, size_t *len)
{
    if (!d || !d->tok || !text || !len)
        return -EINVAL;
    size_t n;
    const char *p = tok_piece(d->tok, id, d->flags, &n);
    if (!p)
        return -EINVAL;
    return step(d, p, n, false, text, len);
}

int tok_detok_flush(tok_detok_t *d, const char **text, size_t *len)
{
    if (!d || !text || !len)
        return -EINVAL;
    return step(d, NULL, 0, true, text, len);
}

int tok_detok_stopped(const tok_detok_t *d)
{
    return d->stopped;
}
