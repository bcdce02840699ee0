/*
 * common/buf.c — struct folio_buf (folio/buf.h): doubling growth through
 * folio_realloc, the NUL kept after len.
 */
#include "folio/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "folio/common.h"

bool folio_buf_reserve(struct folio_buf *b, size_t extra)
{
    if (b->oom)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = folio_realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void folio_buf_append(struct folio_buf *b, const void *data, size_t n)
{
    if (!folio_buf_reserve(b, n))
        return;
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = 0;
}

void folio_buf_puts(struct folio_buf *b, const char *s)
{
    folio_buf_append(b, s, strlen(s));
}

void folio_buf_printf(struct folio_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof(small)) {
        folio_buf_append(b, small, (size_t)n);
        return;
    }
    if (!folio_buf_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void folio_buf_json_str(struct folio_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    folio_buf_append(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f)
            continue;
        folio_buf_append(b, s + run, i - run);
        run = i + 1;
        char esc[7] = {'\\', 0};
        switch (c) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            folio_buf_append(b, esc, 6);
            continue;
        }
        folio_buf_append(b, esc, 2);
    }
    folio_buf_append(b, s + run, n - run);
    folio_buf_append(b, "\"", 1);
}

char *folio_buf_steal(struct folio_buf *b, size_t *len)
{
    char *p = b->p;
    if (len)
        *len = b->len;
    memset(b, 0, sizeof(*b));
    return p;
}

void folio_buf_free(struct folio_buf *b)
{
    folio_free(b->p);
    memset(b, 0, sizeof(*b));
}
