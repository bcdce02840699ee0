/*
 * folio/buf.h — the one growable byte buffer (response bodies, metrics
 * text, SSE chunks, GGUF values, vocabulary arenas, tools' HTTP bodies).
 * A zeroed struct is an empty buffer.  `p` is always NUL-terminated after
 * len bytes when cap > 0; it grows by doubling through folio_realloc.  An
 * allocation failure sets `oom`; later appends are ignored, and callers
 * check oom once at the end instead of after every append.  Not
 * thread-safe (one owner).
 */
#ifndef FOLIO_BUF_H
#define FOLIO_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct folio_buf {
    char *p;
    size_t len, cap;
    bool oom;
};

void folio_buf_append(struct folio_buf *b, const void *data, size_t n);
/* Makes room for extra more bytes (and the NUL) without appending: false
 * (and oom set) when that fails. */
bool folio_buf_reserve(struct folio_buf *b, size_t extra);
void folio_buf_puts(struct folio_buf *b, const char *s);
void folio_buf_printf(struct folio_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal (with quotes); s must be valid UTF-8. */
void folio_buf_json_str(struct folio_buf *b, const char *s, size_t n);
/* Gives the bytes away (caller folio_free()s) and resets b. */
char *folio_buf_steal(struct folio_buf *b, size_t *len);
void folio_buf_free(struct folio_buf *b);

#endif
