#!/usr/bin/env bash
# SIGTERM under load: running streams finish, new connections are refused,
# exit status 0, socket removed.  Two tenants by API key on loopback TCP:
# per-tenant metrics separated, 401 without a key, 429 (+ Retry-After)
# for a tenant over its waiting limit while the other is served.
. "$SRCDIR/lib.sh"
C="node $SRCDIR/client.mjs"

# --- SIGTERM under load --------------------------------------------------
export FOLIO_FAKE_STEP_US=20000
start_daemon "$FOLIOD_FAKE" --kv-blocks 1024 --max-seqs 64
$C drainload "$SOCK" 16 >"$T/load.out" 2>&1 &
LPID=$!
for _ in $(seq 1 200); do grep -q STARTED "$T/load.out" && break; sleep 0.05; done
grep -q STARTED "$T/load.out" || fail "load did not start: $(cat "$T/load.out")"
kill -TERM "$DPID"
sleep 0.2
[ -e "$SOCK" ] && fail "socket still present while draining"
curl -s --max-time 2 --unix-socket "$SOCK" http://x/health >/dev/null 2>&1 && fail "new connection accepted while draining"
wait "$LPID" || fail "load: $(cat "$T/load.out")"
cat "$T/load.out"
rc=0; wait "$DPID" || rc=$?; DPID=
[ $rc = 0 ] || fail "exit status $rc after SIGTERM"
grep -q "drained; exiting" "$LOG" || fail "no drain message"
ok "SIGTERM under load: streams finished, new connections refused, exit 0, socket removed"

# --- 503 for a request pipelined behind a stream while draining ------------
start_daemon "$FOLIOD_FAKE" --kv-blocks 256
$C pipelined503 "$SOCK" >"$T/p.out" 2>&1 &
LPID=$!
for _ in $(seq 1 200); do grep -q STARTED "$T/p.out" && break; sleep 0.05; done
kill -TERM "$DPID"
wait "$LPID" || fail "pipelined: $(cat "$T/p.out")"
grep '^ok' "$T/p.out"
rc=0; wait "$DPID" || rc=$?; DPID=
[ $rc = 0 ] || fail "exit status $rc"

# --- drain timeout aborts what is left -------------------------------------
start_daemon "$FOLIOD_FAKE" --kv-blocks 1024 --drain-timeout-ms 300
curl -sN --unix-socket "$SOCK" -d '{"prompt":[1,2],"max_tokens":2000,"stream":true,"ignore_eos":true}' http://x/v1/completions >"$T/long.out" 2>/dev/null &
CPID=$!
sleep 0.3
t0=$(date +%s%N)
kill -TERM "$DPID"
rc=0; wait "$DPID" || rc=$?; DPID=
t1=$(date +%s%N)
wait "$CPID" || true
[ $rc = 0 ] || fail "exit status $rc after drain timeout"
[ $(( (t1 - t0) / 1000000 )) -lt 5000 ] || fail "drain timeout not honoured"
ok "drain timeout aborts long requests, exit 0"

# --- SIGINT twice aborts -----------------------------------------------------
start_daemon "$FOLIOD_FAKE" --kv-blocks 1024
curl -sN --unix-socket "$SOCK" -d '{"prompt":[1,2],"max_tokens":2000,"stream":true,"ignore_eos":true}' http://x/v1/completions >/dev/null 2>&1 &
CPID=$!
sleep 0.3
kill -INT "$DPID"; sleep 0.1; kill -INT "$DPID"
rc=0; wait "$DPID" || rc=$?; DPID=
wait "$CPID" || true
[ $rc = 130 ] || fail "second SIGINT: status $rc, want 130"
ok "SIGINT twice aborts (status 130)"

# --- tenants over TCP ----------------------------------------------------------
unset FOLIO_FAKE_STEP_US
export FOLIO_FAKE_STEP_US=5000
port=$(( 20000 + RANDOM % 20000 ))
cat >"$T/tenants.ini" <<INI
[foliod]
kv-blocks = 1024
[tenant.a]
api_key = key-a
weight = 2
[tenant.b]
api_key = key-b
max_running = 1
max_waiting = 2
INI
start_daemon "$FOLIOD_FAKE" --config "$T/tenants.ini" --listen "127.0.0.1:$port"
$C tenants "$SOCK" 127.0.0.1 "$port" || fail tenants
curl -s --unix-socket "$SOCK" http://x/metrics >"$T/m.txt"
if command -v promtool >/dev/null; then promtool check metrics <"$T/m.txt" || fail "promtool with tenants"; fi
stop_daemon || fail "exit status"

# --- tenants by peer uid (SO_PEERCRED) on the Unix socket -------------------
printf '[foliod]\nkv-blocks = 256\nunknown-uid = refuse\n[tenant.me]\nuid = %s\n' "$(id -u)" >"$T/uid.ini"
start_daemon "$FOLIOD_FAKE" --config "$T/uid.ini"
r=$(req POST /v1/completions '{"prompt":[1,2],"max_tokens":4}')
[ "$(status_of "$r")" = 200 ] || fail "uid tenant: $r"
grep -Eq 'folio_tenant_generation_tokens_total\{([^}]*,)?tenant="me"\} 4' <<<"$(curl -s --unix-socket "$SOCK" http://x/metrics)" || fail "uid tenant metrics"
stop_daemon || fail "exit status"
printf '[foliod]\nkv-blocks = 256\nunknown-uid = refuse\n[tenant.other]\nuid = 4000000\n' >"$T/uid2.ini"
start_daemon "$FOLIOD_FAKE" --config "$T/uid2.ini"
chmod 711 "$T"; chmod 666 "$SOCK" # another uid (root is an operator, never refused)
r=$(setpriv --reuid 4000001 --regid 4000001 --clear-groups curl -s --unix-socket "$SOCK" \
  -d '{"prompt":[1,2],"max_tokens":4}' -w '\n%{http_code}' http://x/v1/completions)
[ "$(status_of "$r")" = 403 ] || fail "unknown uid with refuse: $(status_of "$r")"
stop_daemon || fail "exit status"
ok "tenant by peer uid; unknown uid refused (403) with unknown-uid = refuse"
