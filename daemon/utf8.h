/*
 * daemon/utf8.h — streaming UTF-8 sanitiser for generated text.
 *
 * Tokens are byte strings; one character may straddle two tokens.  The
 * sanitiser emits only complete, valid UTF-8: an incomplete sequence at the
 * end of the input is held back (at most 3 bytes) until the next feed
 * completes it; an invalid sequence (its maximal subpart, as the Unicode
 * standard recommends) becomes U+FFFD.  srv_utf8_flush ends the stream:
 * held-back bytes become one U+FFFD.
 */
#ifndef FOLIO_DAEMON_UTF8_H
#define FOLIO_DAEMON_UTF8_H

#include <stddef.h>

struct srv_utf8 {
    unsigned char pend[4];
    int npend;
};

/* Worst case output: 3 * (n + 3) bytes. */
#define SRV_UTF8_OUT_MAX(n) (3 * ((n) + 4))

/* Returns the bytes written to out. */
size_t srv_utf8_feed(struct srv_utf8 *u, const char *in, size_t n, char *out);
size_t srv_utf8_flush(struct srv_utf8 *u, char *out);

#endif
