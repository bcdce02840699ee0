#!/usr/bin/env bash
# tests/integration/top/test_top.sh — `folio top` in a real terminal (tmux)
# against foliod under a small load:
#  - the screen shows the pool bar, the block map and a row per tenant, on
#    the alternate screen, refreshed in place (the clock changes);
#  - `q` exits with status 0, back on the main screen, and the tty modes
#    (stty -g) are exactly what they were before;
#  - SIGTERM restores the terminal the same way;
#  - --once over the socket and over --url prints the same sections.
# Uses the real foliod when it has its engine, else foliod_fake.  Installs
# tmux when missing; skips (77) only when it cannot be installed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
INTEG=$(cd "$HERE/.." && pwd)
SRCDIR=$INTEG
. "$INTEG/lib.sh"

if ! command -v tmux >/dev/null; then
  SUDO=; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -q tmux >/dev/null 2>&1 ||
    { $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q tmux >/dev/null 2>&1; } || true
  command -v tmux >/dev/null || { echo "SKIP: tmux is not installed and cannot be installed"; exit 77; }
fi
TM="tmux -L folio-top-test-$$ -f /dev/null"
cleanup_tmux() { $TM kill-server 2>/dev/null || true; }
trap 'cleanup_tmux; cleanup' EXIT
# One idle session for the whole test: killing a test's last session would
# make the tmux server exit, and the next new-session could reach the exiting
# server ("server exited unexpectedly").
$TM new-session -d -s keep "sleep 3600"

BIN=$FOLIOD
probe=$("$FOLIOD" --socket "$T/probe.sock" --kv-blocks 16 2>&1 & p=$!; sleep 1; kill $p 2>/dev/null; wait $p 2>/dev/null) || true
if grep -q "not built in yet" <<<"$probe"; then
  echo "note: foliod has no engine yet: using foliod_fake (same server, fake engine)"
  BIN=$FOLIOD_FAKE
  export FOLIO_FAKE_STEP_US=15000
fi
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$T/tenants.ini" <<EOF
[foliod]
operator-key = key-op
[tenant.alice]
api_key = key-alice
EOF
start_daemon "$BIN" --listen "127.0.0.1:$PORT" --kv-blocks 200 --max-seqs 16 --config "$T/tenants.ini"

touch "$T/load.on"
load_loop() {
  while [ -e "$T/load.on" ]; do
    curl -sN --max-time 60 "$@" -H 'Content-Type: application/json' -d '{"prompt":[5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40],"max_tokens":150,"stream":true,"ignore_eos":true}' \
      >/dev/null 2>&1 || true
  done
}
LOADERS=()
for i in 1 2; do load_loop --unix-socket "$SOCK" http://x/v1/completions & LOADERS+=($!); done
for i in 1 2; do load_loop -H "Authorization: Bearer key-alice" "http://127.0.0.1:$PORT/v1/completions" & LOADERS+=($!); done
stop_load() { rm -f "$T/load.on"; for p in "${LOADERS[@]}"; do kill "$p" 2>/dev/null || true; done; wait "${LOADERS[@]}" 2>/dev/null || true; }
trap 'stop_load; cleanup_tmux; cleanup' EXIT

pane() { $TM capture-pane -p -t top; }
wait_pane() { # PATTERN SECONDS
  for _ in $(seq 1 $(($2 * 10))); do pane | grep -Eq "$1" && return 0; sleep 0.1; done
  return 1
}

# --- q quits, terminal restored --------------------------------------------------
$TM new-session -d -s top -x 120 -y 40 \
  "stty -g >'$T/stty.before'; env LANG=C.UTF-8 '$FOLIO' top --socket '$SOCK' --interval 0.3; echo EXITED:\$?; stty -g >'$T/stty.after'; sleep 600"
wait_pane '^KV \[' 10 || fail "no pool bar: $(pane)"
wait_pane 'default' 10 || fail "no tenant row 'default': $(pane)"
wait_pane 'alice +[0-9]+ +[0-9.]+%' 10 || fail "no tenant row 'alice': $(pane)"
wait_pane 'blocks used [1-9]' 10 || fail "no used block under load: $(pane)"
pane | grep -q 'block map' || fail "no block map"
pane | grep -q 'requests  running' || fail "no queue line"
[ "$($TM display -p -t top '#{alternate_on}')" = 1 ] || fail "not on the alternate screen"
pane >"$T/screen.txt"
cat "$T/screen.txt"
c1=$(grep -o '[0-9][0-9]:[0-9][0-9]:[0-9][0-9]' "$T/screen.txt" | head -1)
sleep 1.5
c2=$(pane | grep -o '[0-9][0-9]:[0-9][0-9]:[0-9][0-9]' | head -1)
[ -n "$c1" ] && [ "$c1" != "$c2" ] || fail "the screen is not refreshed ($c1 -> $c2)"
ok "folio top: pool bar, block map, queues, tenant rows, on the alternate screen, refreshing"
$TM send-keys -t top q
wait_pane '^EXITED:' 5 || fail "q did not quit: $(pane)"
pane | grep -q '^EXITED:0' || fail "exit status: $(pane | grep EXITED)"
[ "$($TM display -p -t top '#{alternate_on}')" = 0 ] || fail "still on the alternate screen"
for _ in $(seq 1 20); do [ -s "$T/stty.after" ] && break; sleep 0.1; done
cmp -s "$T/stty.before" "$T/stty.after" || fail "tty modes not restored: $(cat "$T/stty.before") vs $(cat "$T/stty.after")"
pane | grep -q '^KV \[' && fail "the main screen shows top's frame"
ok "q: exit 0, main screen back, tty modes restored"
$TM kill-session -t top

# --- SIGTERM restores too --------------------------------------------------------
rm -f "$T/stty.before" "$T/stty.after"
$TM new-session -d -s top2 -x 100 -y 30 \
  "stty -g >'$T/stty.before'; sh -c 'echo \$\$ >\"$T/top.pid\"; exec \"$FOLIO\" top --socket \"$SOCK\"'; echo EXITED:\$?; stty -g >'$T/stty.after'; sleep 600"
for _ in $(seq 1 100); do $TM capture-pane -p -t top2 | grep -q '^KV \[' && break; sleep 0.1; done
$TM capture-pane -p -t top2 | grep -q '^KV \[' || fail "second top did not draw"
kill -TERM "$(cat "$T/top.pid")"
for _ in $(seq 1 50); do [ -s "$T/stty.after" ] && break; sleep 0.1; done
$TM capture-pane -p -t top2 | grep -q '^EXITED:0' || fail "after SIGTERM: $($TM capture-pane -p -t top2)"
[ "$($TM display -p -t top2 '#{alternate_on}')" = 0 ] || fail "SIGTERM left the alternate screen on"
cmp -s "$T/stty.before" "$T/stty.after" || fail "SIGTERM: tty modes not restored"
ok "SIGTERM: exit 0, main screen back, tty modes restored"

# --- ^C (SIGINT from the terminal) restores too ------------------------------------
rm -f "$T/stty.before" "$T/stty.after"
$TM new-session -d -s top3 -x 100 -y 30 \
  "stty -g >'$T/stty.before'; '$FOLIO' top --socket '$SOCK'; echo EXITED:\$?; stty -g >'$T/stty.after'; sleep 600"
for _ in $(seq 1 100); do $TM capture-pane -p -t top3 | grep -q '^KV \[' && break; sleep 0.1; done
$TM send-keys -t top3 C-c
for _ in $(seq 1 50); do [ -s "$T/stty.after" ] && break; sleep 0.1; done
$TM capture-pane -p -t top3 | grep -q '^EXITED:0' || fail "after ^C: $($TM capture-pane -p -t top3)"
[ "$($TM display -p -t top3 '#{alternate_on}')" = 0 ] || fail "^C left the alternate screen on"
cmp -s "$T/stty.before" "$T/stty.after" || fail "^C: tty modes not restored"
ok "^C: exit 0, main screen back, tty modes restored"

# --- --once over the socket and TCP --------------------------------------------
for how in "--socket $SOCK" "--url http://127.0.0.1:$PORT --api-key key-op"; do
  # shellcheck disable=SC2086
  out=$("$FOLIO" top $how --once --ascii) || fail "folio top $how --once"
  grep -q '^KV \[' <<<"$out" || fail "--once $how: no pool bar"
  grep -Eq '^[a-z] default ' <<<"$out" || fail "--once $how: no tenant row: $out"
  grep -Eq '^[a-z] alice ' <<<"$out" || fail "--once $how: no alice row"
  grep -q $'\x1b' <<<"$out" && fail "--once --ascii printed escape sequences"
done
ok "--once over the socket and over TCP"
# the terminal's width: at 72 columns the summary lines wrap between fields,
# nothing is cut (the prefix-hit rate and ITL p99 are the last fields)
$TM new-session -d -s narrow -x 72 -y 40 "'$FOLIO' top --socket '$SOCK' --once --ascii; echo DONE; sleep 600"
for _ in $(seq 1 100); do $TM capture-pane -p -t narrow | grep -q '^DONE' && break; sleep 0.1; done
$TM capture-pane -p -t narrow >"$T/narrow.txt"
for f in 'prefix hits ' 'preemptions [0-9]' 'ITL p50 .* p99 ' 'blocks used [0-9]'; do
  grep -Eq "$f" "$T/narrow.txt" || fail "72 columns: '$f' missing: $(cat "$T/narrow.txt")"
done
awk 'length($0) > 72 {exit 1}' "$T/narrow.txt" || fail "a line wider than 72 columns"
$TM kill-session -t narrow
out=$(COLUMNS=60 "$FOLIO" top --socket "$SOCK" --once --ascii)
# (a pipe is not cut: only the bar and the summary lines follow the width)
grep -E '^KV \[|blocks used|prefix hits|preemptions|TTFT' <<<"$out" | awk 'length($0) > 60 {exit 1}' &&
  grep -q 'prefix hits' <<<"$out" || fail "COLUMNS=60 not honoured: $out"
ok "folio top uses the terminal's width (72 columns under tmux, COLUMNS=60 on a pipe): fields wrap, none cut"
"$FOLIO" top --socket "$T/nowhere.sock" --once >/dev/null 2>&1 && fail "--once on a missing socket succeeded"
ok "--once on a missing socket fails"
stop_load
stop_daemon || fail "daemon exit status"

# --- 100,000 blocks from a static fake: aggregation, counts, percentiles ---------
FPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
node "$INTEG/dashboard/fake_server.mjs" "$FPORT" /dev/null 100000 --frozen >"$T/fake.log" 2>&1 &
FPID=$!
for _ in $(seq 1 100); do grep -q READY "$T/fake.log" && break; sleep 0.05; done
out=$(COLUMNS=100 "$FOLIO" top --url "http://127.0.0.1:$FPORT" --once --ascii) || { kill $FPID; fail "--once on the fake"; }
kv=$(curl -s "http://127.0.0.1:$FPORT/v1/kv")
kill $FPID; wait $FPID 2>/dev/null || true
want=$(jq -r '"blocks used \(.blocks.used)  cached \(.blocks.cached)  free \(.blocks.free)"' <<<"$kv")
grep -qF "$want" <<<"$out" || fail "counts: want '$want' in: $(grep 'blocks used' <<<"$out")"
# the fake's fixed buckets give these (worked out in browser_test.mjs)
grep -qF "TTFT p50 70.0ms p99 450.0ms" <<<"$out" && grep -qF "ITL p50 8.3ms p99 40.0ms" <<<"$out" || fail "percentiles: $(grep TTFT <<<"$out")"
run=$(grep -o 'one character per [0-9]* blocks' <<<"$out" | grep -o '[0-9]*')
[ -n "$run" ] && [ "$run" -gt 1 ] || fail "100,000 blocks not aggregated"
cells=$(sed -n '/^block map/,/^TENANT/p' <<<"$out" | sed '1d;$d' | tr -d '\n ' | wc -c)
[ "$cells" -eq $(( (100000 + run - 1) / run )) ] || fail "map has $cells cells, want ceil(100000 / $run)"
# regions of the fake: blocks [0, 60%) used by tenants a,b,c in bands, then cached, then free
map=$(sed -n '/^block map/,/^TENANT/p' <<<"$out" | sed '1d;$d' | tr -d '\n ')
[ "${map:0:1}" = a ] && [ "${map: -1}" = . ] || fail "map starts '${map:0:1}', ends '${map: -1}'"
grep -q b <<<"$map" && grep -q c <<<"$map" && grep -q + <<<"$map" || fail "map lacks a tenant band or cached blocks"
ok "--once on 100,000 blocks: counts as /v1/kv, percentiles from buckets, $cells cells of $run blocks"
