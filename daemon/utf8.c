/*
 * daemon/utf8.c — see utf8.h.  Decoding follows the well-formed byte
 * sequence table of Unicode §3.9 (no overlongs, no surrogates, nothing
 * above U+10FFFF): the second byte's range depends on the lead byte.
 */
#include "utf8.h"

#include <string.h>

static const char repl[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

/* Sequence length for a lead byte (0: invalid lead) and the allowed range
 * of the second byte. */
static int lead_info(unsigned char c, unsigned char *lo, unsigned char *hi)
{
    *lo = 0x80;
    *hi = 0xBF;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        return 2;
    if (c >= 0xE0 && c <= 0xEF) {
        if (c == 0xE0)
            *lo = 0xA0;
        if (c == 0xED)
            *hi = 0x9F;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (c == 0xF0)
            *lo = 0x90;
        if (c == 0xF4)
            *hi = 0x8F;
        return 4;
    }
    return 0;
}

size_t srv_utf8_feed(struct srv_utf8 *u, const char *in, size_t n, char *out)
{
    size_t o = 0, total = (size_t)u->npend + n, i = 0;
    unsigned char pend[4];
    int np = u->npend;
    memcpy(pend, u->pend, 4);
#define AT(k) ((k) < (size_t)np ? pend[k] : (unsigned char)in[(k) - (size_t)np])
    u->npend = 0;
    while (i < total) {
        unsigned char c = AT(i), lo, hi;
        int len = lead_info(c, &lo, &hi);
        if (len == 1) {
            out[o++] = (char)c;
            i++;
            continue;
        }
        if (len == 0) {
            memcpy(out + o, repl, 3);
            o += 3;
            i++;
            continue;
        }
        int k = 1;
        for (; k < len && i + k < total; k++) {
            unsigned char d = AT(i + k);
            if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF))
                break;
        }
        if (k == len) {
            for (int j = 0; j < len; j++)
                out[o++] = (char)AT(i + j);
            i += len;
        } else if (i + k == total) {
            /* valid so far but incomplete: hold back */
            for (int j = 0; j < k; j++)
                u->pend[j] = AT(i + j);
            u->npend = k;
            i = total;
        } else {
            memcpy(out + o, repl, 3);
            o += 3;
            i += k;
        }
    }
#undef AT
    return o;
}

size_t srv_utf8_flush(struct srv_utf8 *u, char *out)
{
    if (!u->npend)
        return 0;
    u->npend = 0;
    memcpy(out, repl, 3);
    return 3;
}
