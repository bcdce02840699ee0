/*
 * daemon/buf.h — a growable byte buffer (response bodies, metrics text,
 * SSE chunks).  `p` is always NUL-terminated after len bytes when cap > 0.
 * An allocation failure sets `oom`; later appends are ignored, and callers
 * check oom once at the end instead of after every append.
 */
#ifndef FOLIO_DAEMON_BUF_H
#define FOLIO_DAEMON_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct srv_buf {
    char *p;
    size_t len, cap;
    bool oom;
};

void srv_buf_append(struct srv_buf *b, const void *data, size_t n);
void srv_buf_puts(struct srv_buf *b, const char *s);
void srv_buf_printf(struct srv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal (with quotes); s must be valid UTF-8. */
void srv_buf_json_str(struct srv_buf *b, const char *s, size_t n);
/* Gives the bytes away (caller folio_free()s) and resets b. */
char *srv_buf_steal(struct srv_buf *b, size_t *len);
void srv_buf_free(struct srv_buf *b);

#endif
