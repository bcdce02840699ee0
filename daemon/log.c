/*
 * daemon/log.c — see log.h.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static enum srv_log_level log_level = SRV_LOG_DEBUG;

void srv_log_set_level(enum srv_log_level level)
{
    log_level = level;
}

void srv_log(enum srv_log_level level, const char *fmt, ...)
{
    if (level > log_level)
        return;
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "foliod %s ", ts);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
