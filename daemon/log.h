/*
 * daemon/log.h — foliod's log lines: one line per event, on stderr or in
 * --log-file, in one of three shapes:
 *
 *   text     2026-11-24T20:34:04.123Z info listening on /run/foliod.sock
 *   journal  <6>info listening on /run/foliod.sock
 *            (stderr is journald's stream: JOURNAL_STREAM names stderr's
 *            device:inode; journald stamps the time and reads the <N>
 *            syslog priority: 3 error, 6 info, 7 debug)
 *   json     {"time":"2026-11-24T20:34:04.123Z","level":"info","msg":"..."}
 *
 * --log-format auto picks journal when stderr is the journal, else text.
 * Access lines (srv_log_access) are one per HTTP request, key=value pairs in
 * text and journal shapes, fields of the object in json.
 *
 * The file (srv_log_open) is opened for append and reopened by
 * srv_log_reopen (SIGHUP, after logrotate moved it).  The level is one
 * process-wide setting.  Loop thread only (the engine thread does not log).
 */
#ifndef FOLIO_DAEMON_LOG_H
#define FOLIO_DAEMON_LOG_H

#include <stdbool.h>
#include <stdint.h>

/* Same order as the --log-level choices; journald priorities 3, 6, 7. */
enum srv_log_level { SRV_LOG_ERROR, SRV_LOG_INFO, SRV_LOG_DEBUG };

/* Same order as the --log-format choices. */
enum srv_log_format { SRV_LOG_FMT_AUTO, SRV_LOG_FMT_TEXT, SRV_LOG_FMT_JSON, SRV_LOG_FMT_JOURNAL };

void srv_log_set_level(enum srv_log_level level);
/* Sets the shape; AUTO resolves here (journal when JOURNAL_STREAM matches
 * stderr).  Returns the resolved format. */
enum srv_log_format srv_log_set_format(enum srv_log_format f);
/* Logs to path (append, created 0640) instead of stderr; NULL: stderr.
 * 0 or -errno (stderr stays in use on failure). */
int srv_log_open(const char *path);
/* Reopens the file given to srv_log_open (no-op on stderr). 0 or -errno;
 * on failure the old file stays open. */
int srv_log_reopen(void);
void srv_log_close(void);

void srv_log(enum srv_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One HTTP request's access line. */
struct srv_access_line {
    const char *method, *path; /* path: without the query */
    int path_len;
    int status;                                              /* 499: the client went away first */
    const char *tenant;                                      /* NULL: not resolved ("-") */
    int64_t prompt_tokens, completion_tokens, cached_tokens; /* < 0: not a completion */
    double ttft_s;                                           /* < 0: no token */
    double duration_s;                                       /* arrival to the last byte queued */
    const char *finish; /* finish reason of the (first) choice, or NULL */
};
void srv_log_access(const struct srv_access_line *a);
/* Access lines on (default) or off. */
void srv_log_set_access(bool on);

/* ISO-8601 UTC with milliseconds, "2026-11-24T20:34:04.123Z" (25 bytes). */
void srv_log_time(char out[32]);

#endif
