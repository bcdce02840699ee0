/*
 * daemon/systemd.c — the few systemd interfaces foliod uses, through
 * libsystemd when the build found it (FOLIO_HAVE_SYSTEMD), else as no-ops:
 *
 *   socket activation  sd_listen_fds: sockets systemd opened for us (from
 *                      foliod.socket: its path, mode and group) start at
 *                      fd 3; LISTEN_PID must be ours.
 *   readiness          sd_notify READY=1 once the listeners accept,
 *                      STATUS=<load> while serving, STOPPING=1 on drain.
 *   watchdog           sd_watchdog_enabled: WatchdogSec of the unit; the
 *                      loop sends WATCHDOG=1 at half that period.
 *
 * Without NOTIFY_SOCKET (not started by systemd) sd_notify does nothing and
 * without LISTEN_FDS no socket is inherited: the same binary runs anywhere.
 * Loop thread only.
 */
#include "systemd.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>

#ifdef FOLIO_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

int srv_sd_listen_fds(void)
{
#ifdef FOLIO_HAVE_SYSTEMD
    return sd_listen_fds(1); /* unsets LISTEN_* so children do not inherit them */
#else
    return 0;
#endif
}

int srv_sd_fd_kind(int fd)
{
#ifdef FOLIO_HAVE_SYSTEMD
    if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) > 0)
        return SRV_SD_UNIX;
    if (sd_is_socket_inet(fd, 0, SOCK_STREAM, 1, 0) > 0)
        return SRV_SD_TCP;
#else
    (void)fd;
#endif
    return -EINVAL;
}

void srv_sd_notifyf(const char *fmt, ...)
{
#ifdef FOLIO_HAVE_SYSTEMD
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    sd_notify(0, msg);
#else
    (void)fmt;
#endif
}

uint64_t srv_sd_watchdog_usec(void)
{
#ifdef FOLIO_HAVE_SYSTEMD
    uint64_t us = 0;
    if (sd_watchdog_enabled(0, &us) > 0)
        return us;
#endif
    return 0;
}

bool srv_sd_built(void)
{
#ifdef FOLIO_HAVE_SYSTEMD
    return true;
#else
    return false;
#endif
}
