/*
 * common/utf8.c — the one UTF-8 validator (see common.h): request bodies
 * (daemon/api.c), generated text (model/detok.c, the streaming
 * detokenizer the daemon sends text through) and logprobs pieces all
 * classify bytes with folio_utf8_next.
 *
 * Well-formed sequences (Unicode §3.9, table 3-7): the second byte's range
 * depends on the lead byte (E0: A0..BF, ED: 80..9F, F0: 90..BF, F4:
 * 80..8F), later bytes are 80..BF.  An ill-formed sequence is replaced by
 * one U+FFFD per maximal subpart (the longest prefix of a well-formed
 * sequence, at least one byte), as the standard recommends.
 */
#include <string.h>

#include "folio/common.h"

enum folio_utf8_seq folio_utf8_next(const unsigned char *s, size_t n, size_t *len)
{
    unsigned c = s[0], lo = 0x80, hi = 0xBF;
    size_t need;
    if (c < 0x80) {
        *len = 1;
        return FOLIO_UTF8_OK;
    } else if (c >= 0xC2 && c <= 0xDF)
        need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        *len = 1;
        return FOLIO_UTF8_BAD;
    }
    size_t k = 1;
    for (; k < need; k++) {
        if (k == n) {
            *len = n;
            return FOLIO_UTF8_SHORT;
        }
        unsigned b = s[k];
        if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) {
            *len = k;
            return FOLIO_UTF8_BAD;
        }
    }
    *len = need;
    return FOLIO_UTF8_OK;
}

bool folio_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, len;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        if (folio_utf8_next(p + i, n - i, &len) != FOLIO_UTF8_OK)
            return false;
        i += len;
    }
    return true;
}

size_t folio_utf8_sanitize(const char *s, size_t n, char *out)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, o = 0, len;
    while (i < n) {
        if (folio_utf8_next(p + i, n - i, &len) == FOLIO_UTF8_OK) {
            memcpy(out + o, s + i, len);
            o += len;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
        }
        i += len;
    }
    return o;
}
