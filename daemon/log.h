/*
 * daemon/log.h — foliod's log lines on stderr ("foliod HH:MM:SS text").
 * One process-wide level, set once at start-up before the loop runs
 * (srv_log_set_level); the daemon logs at its decision points, library
 * code never logs.  Loop thread only (the engine thread does not log).
 */
#ifndef FOLIO_DAEMON_LOG_H
#define FOLIO_DAEMON_LOG_H

enum srv_log_level { SRV_LOG_ERROR, SRV_LOG_INFO, SRV_LOG_DEBUG };

void srv_log_set_level(enum srv_log_level level);
void srv_log(enum srv_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
