/*
 * daemon/log.c — see log.h.
 *
 * State: the level, the shape, the output FILE (stderr or the --log-file
 * stream, line-buffered) and the file's path for reopening.  Every line is
 * built in a stack buffer and written with one fputs + fflush, so lines of
 * a reopened file never interleave with the old one's.  JSON strings are
 * escaped per RFC 8259 (control bytes as \u00XX); text messages are written
 * as given (the daemon's messages are its own, and user bytes such as a
 * request path reach a log only through the access line, which escapes them
 * in every shape).
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "folio/common.h"

static enum srv_log_level log_level = SRV_LOG_DEBUG;
static enum srv_log_format log_fmt = SRV_LOG_FMT_TEXT;
static FILE *log_file; /* NULL: stderr */
static char *log_path;
static bool log_access = true;

static const char *const level_name[] = {"error", "info", "debug"};
static const int level_prio[] = {3, 6, 7};

void srv_log_set_level(enum srv_log_level level)
{
    log_level = level;
}

void srv_log_set_access(bool on)
{
    log_access = on;
}

/* JOURNAL_STREAM is "DEV:INO" of the stream journald connected to the
 * service's stdout/stderr; it is inherited by children, so it counts only
 * when it names our stderr. */
static bool stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    if (!js || !*js)
        return false;
    unsigned long long dev, ino;
    if (sscanf(js, "%llu:%llu", &dev, &ino) != 2)
        return false;
    struct stat sb;
    if (fstat(STDERR_FILENO, &sb) < 0)
        return false;
    return (unsigned long long)sb.st_dev == dev && (unsigned long long)sb.st_ino == ino;
}

enum srv_log_format srv_log_set_format(enum srv_log_format f)
{
    if (f == SRV_LOG_FMT_AUTO)
        f = !log_file && stderr_is_journal() ? SRV_LOG_FMT_JOURNAL : SRV_LOG_FMT_TEXT;
    log_fmt = f;
    return f;
}

static FILE *open_append(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "a");
    if (!f) {
        close(fd);
        return NULL;
    }
    setvbuf(f, NULL, _IOLBF, 0);
    return f;
}

int srv_log_open(const char *path)
{
    if (!path) {
        srv_log_close();
        return 0;
    }
    FILE *f = open_append(path);
    if (!f)
        return -errno;
    char *p = folio_strdup(path);
    if (!p) {
        fclose(f);
        return -ENOMEM;
    }
    srv_log_close();
    log_file = f;
    log_path = p;
    return 0;
}

int srv_log_reopen(void)
{
    if (!log_file)
        return 0;
    FILE *f = open_append(log_path);
    if (!f)
        return -errno;
    fclose(log_file);
    log_file = f;
    return 0;
}

void srv_log_close(void)
{
    if (log_file)
        fclose(log_file);
    log_file = NULL;
    folio_free(log_path);
    log_path = NULL;
}

void srv_log_time(char out[32])
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03dZ", (int)(ts.tv_nsec / 1000000));
}

/* A line under construction; truncated (never overflowing) at LINE_MAX. */
#define LOG_LINE_MAX 4096
struct line {
    char p[LOG_LINE_MAX];
    size_t n;
};

static void line_vadd(struct line *l, const char *fmt, va_list ap)
{
    if (l->n >= sizeof(l->p) - 2)
        return;
    int k = vsnprintf(l->p + l->n, sizeof(l->p) - 1 - l->n, fmt, ap);
    if (k > 0)
        l->n = FOLIO_MIN(l->n + (size_t)k, sizeof(l->p) - 2);
}

static void line_add(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line_add(struct line *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    line_vadd(l, fmt, ap);
    va_end(ap);
}

/* n bytes of s as the inside of a JSON string. */
static void line_json(struct line *l, const char *s, size_t n)
{
    for (size_t i = 0; i < n && l->n < sizeof(l->p) - 8; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            l->p[l->n++] = '\\';
            l->p[l->n++] = (char)c;
        } else if (c < 0x20 || c == 0x7f)
            l->n += (size_t)snprintf(l->p + l->n, 7, "\\u%04x", c);
        else
            l->p[l->n++] = (char)c;
    }
}

/* n bytes of s as a text value: printable ASCII except space, quote and
 * backslash as is, others as \xNN (one access line stays one line). */
static void line_text(struct line *l, const char *s, size_t n)
{
    for (size_t i = 0; i < n && l->n < sizeof(l->p) - 6; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c > 0x20 && c < 0x7f && c != '"' && c != '\\')
            l->p[l->n++] = (char)c;
        else
            l->n += (size_t)snprintf(l->p + l->n, 5, "\\x%02x", c);
    }
}

static void line_begin(struct line *l, enum srv_log_level level)
{
    char ts[32];
    l->n = 0;
    switch (log_fmt) {
    case SRV_LOG_FMT_JOURNAL:
        line_add(l, "<%d>%s ", level_prio[level], level_name[level]);
        break;
    case SRV_LOG_FMT_JSON:
        srv_log_time(ts);
        line_add(l, "{\"time\":\"%s\",\"level\":\"%s\",", ts, level_name[level]);
        break;
    default:
        srv_log_time(ts);
        line_add(l, "%s %s ", ts, level_name[level]);
        break;
    }
}

static void line_end(struct line *l)
{
    if (log_fmt == SRV_LOG_FMT_JSON)
        line_add(l, "}");
    l->p[l->n++] = '\n';
    l->p[l->n] = 0;
    FILE *f = log_file ? log_file : stderr;
    fputs(l->p, f);
    fflush(f);
}

void srv_log(enum srv_log_level level, const char *fmt, ...)
{
    if (level > log_level)
        return;
    struct line l;
    line_begin(&l, level);
    va_list ap;
    va_start(ap, fmt);
    if (log_fmt == SRV_LOG_FMT_JSON) {
        char msg[LOG_LINE_MAX - 128];
        vsnprintf(msg, sizeof(msg), fmt, ap);
        line_add(&l, "\"msg\":\"");
        line_json(&l, msg, strlen(msg));
        line_add(&l, "\"");
    } else
        line_vadd(&l, fmt, ap);
    va_end(ap);
    line_end(&l);
}

void srv_log_access(const struct srv_access_line *a)
{
    if (!log_access || SRV_LOG_INFO > log_level)
        return;
    struct line l;
    line_begin(&l, SRV_LOG_INFO);
    bool js = log_fmt == SRV_LOG_FMT_JSON;
    const char *tenant = a->tenant ? a->tenant : "-";
    if (js) {
        line_add(&l, "\"msg\":\"access\",\"method\":\"");
        line_json(&l, a->method, strlen(a->method));
        line_add(&l, "\",\"path\":\"");
        line_json(&l, a->path, (size_t)a->path_len);
        line_add(&l, "\",\"status\":%d,\"tenant\":\"", a->status);
        line_json(&l, tenant, strlen(tenant));
        line_add(&l, "\"");
    } else {
        line_add(&l, "access method=");
        line_text(&l, a->method, strlen(a->method));
        line_add(&l, " path=");
        line_text(&l, a->path, (size_t)a->path_len);
        line_add(&l, " status=%d tenant=", a->status);
        line_text(&l, tenant, strlen(tenant));
    }
    const char *kv = js ? ",\"%s\":%lld" : " %s=%lld";
    if (a->prompt_tokens >= 0) {
        line_add(&l, kv, "prompt_tokens", (long long)a->prompt_tokens);
        line_add(&l, kv, "completion_tokens", (long long)a->completion_tokens);
        line_add(&l, kv, "cached_tokens", (long long)a->cached_tokens);
    }
    if (a->ttft_s >= 0)
        line_add(&l, js ? ",\"ttft_ms\":%.3f" : " ttft_ms=%.3f", a->ttft_s * 1e3);
    line_add(&l, js ? ",\"duration_ms\":%.3f" : " duration_ms=%.3f", a->duration_s * 1e3);
    if (a->finish && *a->finish)
        line_add(&l, js ? ",\"finish_reason\":\"%s\"" : " finish_reason=%s", a->finish);
    line_end(&l);
}
