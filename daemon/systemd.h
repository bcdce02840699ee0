/*
 * daemon/systemd.h — socket activation, sd_notify and the watchdog (see
 * systemd.c); no-ops in a build without libsystemd.
 */
#ifndef FOLIO_DAEMON_SYSTEMD_H
#define FOLIO_DAEMON_SYSTEMD_H

#include <stdbool.h>
#include <stdint.h>

#define SRV_SD_FD0 3 /* SD_LISTEN_FDS_START */
enum { SRV_SD_UNIX = 1, SRV_SD_TCP = 2 };

/* Sockets passed by systemd (fds 3 .. 3+n-1), 0 when none, or -errno. */
int srv_sd_listen_fds(void);
/* SRV_SD_UNIX / SRV_SD_TCP for a listening stream socket, else -EINVAL. */
int srv_sd_fd_kind(int fd);
/* One notification ("READY=1\nSTATUS=..."); nothing without NOTIFY_SOCKET. */
void srv_sd_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The unit's watchdog period in microseconds, 0 when off. */
uint64_t srv_sd_watchdog_usec(void);
/* Whether this build has libsystemd. */
bool srv_sd_built(void);

#endif
