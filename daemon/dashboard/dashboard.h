/*
 * daemon/dashboard/dashboard.h — the /dashboard page, compiled into foliod.
 *
 * The page is one self-contained HTML file (daemon/dashboard/dashboard.html:
 * inline CSS and JS, no external resource) that polls /v1/kv and /metrics
 * on the same origin about once a second and draws the KV block map, usage
 * and queue history, throughput, latency percentiles, a tenant table and
 * the pool's geometry.  At build time embed.py turns it into a byte array
 * (dashboard_html.c in the build tree), so nothing is read from disk at
 * run time.
 *
 * Threading: the bytes are immutable; call from any thread.
 */
#ifndef FOLIO_DAEMON_DASHBOARD_H
#define FOLIO_DAEMON_DASHBOARD_H

#include <stddef.h>

/* The page's bytes (UTF-8 HTML, NUL-terminated for convenience) and, in
 * *len (when len != NULL), their length without the NUL.  Static storage:
 * never freed. */
const char *srv_dashboard_html(size_t *len);

#endif
