#!/usr/bin/env bash
# tests/integration/ops/test_systemd.sh — foliod as systemd runs it, without
# systemd as PID 1:
#  1. systemd-analyze verify accepts the installed units (foliod.service
#     with its ExecStart pointed at the built binary, foliod.socket):
#     exit 0 and not one warning.
#  2. Socket activation: systemd-socket-activate holds the listening socket
#     and starts foliod on the first connection with LISTEN_FDS=1; that
#     connection and later ones are served on the inherited socket, and
#     foliod neither recreates nor removes the socket file.
#  3. sd_notify to a test NOTIFY_SOCKET (notify_listen.py): READY=1 once
#     serving, STATUS= with the load, WATCHDOG=1 keep-alives at half of
#     WATCHDOG_USEC, STOPPING=1 on SIGTERM; the drain lets a running stream
#     finish ([DONE]) and exits 0.
#  4. Without systemd (no LISTEN_FDS, no NOTIFY_SOCKET) the same binary
#     creates and removes its own socket.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
INTEG=$(cd "$HERE/.." && pwd)
. "$INTEG/lib.sh"
command -v systemd-socket-activate >/dev/null || { echo "SKIP: systemd-socket-activate missing (Debian package systemd)"; exit 77; }
BIN=${FOLIOD_FAKE:?}
export FOLIO_FAKE_STEP_US=20000

# --- 1. the units ------------------------------------------------------------
[ -n "${UNIT_SERVICE:-}" ] && [ -f "$UNIT_SERVICE" ] || fail "UNIT_SERVICE not built"
mkdir -p "$T/units"
sed "s|^ExecStart=[^ ]*/foliod|ExecStart=$FOLIOD|" "$UNIT_SERVICE" >"$T/units/foliod.service"
cp "$UNIT_SOCKET" "$T/units/foliod.socket"
grep -q "^ExecStart=$FOLIOD " "$T/units/foliod.service" || fail "ExecStart not rewritten"
if out=$(cd "$T/units" && systemd-analyze verify --man=no ./foliod.socket ./foliod.service 2>&1); then
  [ -z "$out" ] || fail "systemd-analyze verify warns: $out"
else
  fail "systemd-analyze verify: $out"
fi
for k in Type=notify WatchdogSec= NoNewPrivileges=yes ProtectSystem=strict ExecReload= ; do
  grep -q "^$k" "$T/units/foliod.service" || fail "foliod.service lacks $k"
done
grep -q '^SocketMode=0660' "$T/units/foliod.socket" && grep -q '^SocketGroup=foliod' "$T/units/foliod.socket" ||
  fail "foliod.socket: mode/group"
ok "systemd-analyze verify: foliod.service and foliod.socket, no warning"

# --- 2 + 3. activation and notification -----------------------------------------
python3 "$HERE/notify_listen.py" "$T/notify.sock" "$T/notify.log" &
NPID=$!
trap 'kill $NPID 2>/dev/null || true; cleanup' EXIT
for _ in $(seq 1 100); do grep -q LISTENING "$T/notify.log" 2>/dev/null && break; sleep 0.05; done
ASOCK=$T/act.sock
# (systemd-socket-activate passes the child only LISTEN_* and what -E names)
systemd-socket-activate -E NOTIFY_SOCKET="$T/notify.sock" -E WATCHDOG_USEC=1000000 \
  -E FOLIO_FAKE_STEP_US -l "$ASOCK" "$BIN" --socket "$T/unused.sock" --kv-blocks 128 \
  --log-level debug >"$LOG" 2>&1 &
DPID=$! # systemd-socket-activate execs foliod in place: the same pid
for _ in $(seq 1 100); do [ -S "$ASOCK" ] && break; sleep 0.05; done
[ -S "$ASOCK" ] || fail "systemd-socket-activate did not create $ASOCK"
ino_before=$(stat -c %i "$ASOCK")
# the first connection starts foliod and is served by it
r=$(curl -s --max-time 20 --unix-socket "$ASOCK" -o "$T/health.json" -w '%{http_code}' http://x/health)
[ "$r" = 200 ] && jq -e '.status == "ok"' "$T/health.json" >/dev/null ||
  fail "first connection through the activated socket: $r $(cat "$T/health.json")"
grep -q 'fd 3 from systemd' "$LOG" || fail "foliod did not take fd 3 from systemd: $(cat "$LOG")"
[ ! -e "$T/unused.sock" ] || fail "foliod created its own socket although one was passed"
r=$(curl -s --unix-socket "$ASOCK" http://x/v1/completions -d '{"prompt":[1,2,3],"max_tokens":4}' | jq -r '.usage.completion_tokens')
[ "$r" = 4 ] || fail "a completion on the activated socket: $r"
ok "socket activation: foliod serves the socket systemd-socket-activate passed (fd 3)"

for _ in $(seq 1 100); do grep -q '^READY=1' "$T/notify.log" && break; sleep 0.05; done
grep -q '^READY=1' "$T/notify.log" || fail "no READY=1: $(cat "$T/notify.log")"
for _ in $(seq 1 60); do [ "$(grep -c '^WATCHDOG=1' "$T/notify.log")" -ge 2 ] && break; sleep 0.1; done
[ "$(grep -c '^WATCHDOG=1' "$T/notify.log")" -ge 2 ] || fail "fewer than 2 WATCHDOG=1 in 6 s: $(cat "$T/notify.log")"
grep -Eq '^STATUS=serving: [0-9]+ running, [0-9]+ waiting, KV [0-9.]+% used' "$T/notify.log" ||
  fail "no STATUS with the load: $(cat "$T/notify.log")"
ok "sd_notify: READY=1, WATCHDOG=1 every ~0.5 s, STATUS with the load"

# a long stream, then SIGTERM: STOPPING=1, the stream finishes, exit 0
curl -sN --max-time 30 --unix-socket "$ASOCK" http://x/v1/completions \
  -d '{"prompt":[1,2,3],"max_tokens":60,"stream":true,"ignore_eos":true}' >"$T/stream.txt" &
CPID=$!
for _ in $(seq 1 100); do grep -q '^data: {' "$T/stream.txt" 2>/dev/null && break; sleep 0.05; done
kill -TERM "$DPID"
for _ in $(seq 1 100); do grep -q '^STOPPING=1' "$T/notify.log" && break; sleep 0.05; done
grep -q '^STOPPING=1' "$T/notify.log" || fail "no STOPPING=1 after SIGTERM"
wait "$CPID" || fail "the stream's curl failed"
grep -q '^data: \[DONE\]' "$T/stream.txt" || fail "the stream was cut by the drain"
n=$(grep -c '"text"' "$T/stream.txt" || true)
[ "$n" -ge 60 ] || fail "the stream has $n chunks, wanted 60"
rc=0; wait "$DPID" || rc=$?; DPID=
[ "$rc" = 0 ] || fail "exit status $rc after the drain"
[ -S "$ASOCK" ] && [ "$(stat -c %i "$ASOCK")" = "$ino_before" ] || fail "foliod removed or replaced the socket systemd owns"
ok "SIGTERM: STOPPING=1, the running stream finished (60 tokens, [DONE]), exit 0, socket file left to systemd"

# --- 4. the same binary without systemd ---------------------------------------------
env -u NOTIFY_SOCKET -u LISTEN_FDS -u LISTEN_PID "$BIN" --socket "$SOCK" --kv-blocks 64 >"$T/plain.log" 2>&1 &
DPID=$!
for _ in $(seq 1 100); do curl -s --unix-socket "$SOCK" http://x/health >/dev/null 2>&1 && break; sleep 0.05; done
curl -sf --unix-socket "$SOCK" http://x/health >/dev/null || fail "plain start"
[ "$(stat -c %a "$SOCK")" = 660 ] || fail "own socket mode $(stat -c %a "$SOCK")"
stop_daemon || fail "plain exit"
[ ! -e "$SOCK" ] || fail "own socket left behind"
ok "without systemd: own socket (mode 0660), removed at exit"
