#!/usr/bin/env bash
# tests/integration/ops/test_logs.sh — what foliod writes to its log:
#  1. `folio bench` sends 200 completions: the access log (--log-format json,
#     --log-file) has exactly one line per request, each a JSON object with
#     ISO-8601 time and level, and its counts match the bench's JSON: 200
#     lines with status 200, summed prompt and completion tokens equal the
#     bench's totals, per-request TTFT and duration present.
#  2. Text and journal shapes: ISO-8601 time + level; with JOURNAL_STREAM
#     naming stderr, <N> syslog priority prefixes.  Requests the HTTP layer
#     refuses while parsing (400, 413) get one access line each, with the
#     method and path as far as they were parsed.
#  3. SIGHUP under load: streams in flight all finish ([DONE], every token);
#     the tenant quota changed in the file applies (429 where it was
#     accepted before); a changed [foliod] option is named as kept; the
#     --log-file moved away by "logrotate" is reopened.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
INTEG=$(cd "$HERE/.." && pwd)
. "$INTEG/lib.sh"
export FOLIO_FAKE_STEP_US=5000
ISO='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$'

# --- 1. access log against folio bench ---------------------------------------------
ALOG=$T/access.json
start_daemon "$FOLIOD_FAKE" --kv-blocks 512 --max-seqs 16 --log-format json --log-file "$ALOG"
"$FOLIO" bench --socket "$SOCK" --num-prompts 200 --max-concurrency 16 --input-len 24 \
  --range-ratio 0.5 --output-len 12 --ignore-eos --no-progress --json "$T/bench.json" >"$T/bench.txt" 2>&1 ||
  fail "folio bench: $(tail -5 "$T/bench.txt")"
stop_daemon || fail "daemon exit"
jq -c . "$ALOG" >/dev/null || fail "a log line is not JSON: $(grep -v '^{' "$ALOG" | head -3)"
jq -e -s --arg iso "$ISO" 'all(.[]; (.time | test($iso)) and (.level | IN("error","info","debug")))' "$ALOG" >/dev/null ||
  fail "a JSON log line lacks ISO time or level"
python3 - "$ALOG" "$T/bench.json" <<'PY' || fail "access log vs bench"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
acc = [l for l in lines if l.get("msg") == "access" and l["path"] == "/v1/completions"]
b = json.load(open(sys.argv[2]))
def need(c, m):
    if not c:
        sys.exit("FAIL: " + m)
need(b["completed"] == 200 and b["failed"] == 0, f"bench: {b['completed']} completed")
need(len(acc) == 200, f"{len(acc)} access lines for 200 requests")
need(all(a["status"] == 200 and a["method"] == "POST" and a["tenant"] == "default" for a in acc), "status/method/tenant")
need(all(a["finish_reason"] == "length" and a["duration_ms"] >= a["ttft_ms"] > 0 for a in acc), "finish/ttft/duration")
need(all("cached_tokens" in a and a["cached_tokens"] >= 0 for a in acc), "cached_tokens")
pin = sum(a["prompt_tokens"] for a in acc)
pout = sum(a["completion_tokens"] for a in acc)
need(pout == b["total_output_tokens"] > 0, f"completion tokens {pout} vs bench {b['total_output_tokens']}")
need(pin == b["total_input_tokens"], f"prompt tokens {pin} vs bench {b['total_input_tokens']}")
# the per-request prompt lengths are the same multiset
need(sorted(a["prompt_tokens"] for a in acc) == sorted(r["prompt_len"] for r in b["requests"]), "per-request prompt lengths")
need(sorted(a["completion_tokens"] for a in acc) == sorted(r["output_tokens"] for r in b["requests"]), "per-request completion tokens")
other = [l for l in lines if l.get("msg") == "access" and l["path"] != "/v1/completions"]
need(all(o["status"] == 200 for o in other), f"other requests: {other[:3]}")
print(f"ok: {len(acc)} access lines, {pin} prompt + {pout} completion tokens = bench, {len(other)} other requests")
PY
ok "access log: one JSON line per request of a 200-request folio bench run, counts equal the bench's"

# --- 2. text and journal shapes ------------------------------------------------------------
"$FOLIOD_FAKE" --socket "$T/t.sock" --kv-blocks 16 --max-body 1024 >"$T/text.log" 2>&1 &
P=$!
for _ in $(seq 1 100); do curl -s --unix-socket "$T/t.sock" http://x/health >/dev/null 2>&1 && break; sleep 0.05; done
# requests the HTTP layer refuses before routing get their access line too
raw() { # BYTES: sent on one connection; prints the status line's code
  python3 -c 'import socket,sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.argv[2].encode())
print(s.recv(4096).split(b" ")[1].decode())' "$T/t.sock" "$1"
}
[ "$(raw $'GET /health?x=1 HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n')" = 400 ] || fail "space in a header name: not 400"
[ "$(raw $'\x01\x02 garbage\r\n\r\n')" = 400 ] || fail "garbage request line: not 400"
head -c 2000 /dev/zero | tr '\0' 'a' >"$T/big.txt"
[ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$T/t.sock" http://x/v1/completions --data-binary @"$T/big.txt")" = 413 ] ||
  fail "body over --max-body: not 413"
kill -TERM $P; wait $P || true
grep -Eq ' info access method=GET path=/health status=400 tenant=- duration_ms=' "$T/text.log" || fail "no access line for a 400 parse error: $(grep access "$T/text.log")"
grep -Eq ' info access method=- path=- status=400 tenant=- duration_ms=' "$T/text.log" || fail "no access line for a garbage request line: $(grep access "$T/text.log")"
grep -Eq ' info access method=POST path=/v1/completions status=413 tenant=- duration_ms=' "$T/text.log" || fail "no access line for a 413: $(grep access "$T/text.log")"
[ "$(grep -c ' access ' "$T/text.log")" = 4 ] || fail "access lines: $(grep access "$T/text.log")"
head -1 "$T/text.log" | grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{3}Z info foliod [0-9.]+ \(git ' ||
  fail "text shape: $(head -1 "$T/text.log")"
grep -Eq ' info access method=GET path=/health status=200 tenant=(-|default) duration_ms=' "$T/text.log" || fail "text access line: $(cat "$T/text.log")"
: >"$T/journal.log"
JS=$(stat -c '%d:%i' "$T/journal.log")
JOURNAL_STREAM=$JS "$FOLIOD_FAKE" --socket "$T/j.sock" --kv-blocks 16 2>>"$T/journal.log" &
P=$!
for _ in $(seq 1 100); do curl -s --unix-socket "$T/j.sock" http://x/health >/dev/null 2>&1 && break; sleep 0.05; done
curl -s --unix-socket "$T/j.sock" http://x/nope >/dev/null
kill -TERM $P; wait $P || true
grep -q '^<6>info listening on ' "$T/journal.log" || fail "journal shape: $(head -3 "$T/journal.log")"
grep -q '^<6>info access method=GET path=/nope status=404' "$T/journal.log" || fail "journal access line"
grep -Evq '^<[367]>(error|info|debug) ' "$T/journal.log" && fail "a journal line without priority: $(grep -Ev '^<[367]>' "$T/journal.log" | head -2)"
ok "text lines: ISO-8601 time + level; parse errors (400, 413) logged as access lines; journald stream: <N> priority prefixes"

# --- 3. SIGHUP under load ------------------------------------------------------------------------
cat >"$T/f.ini" <<EOF2
[foliod]
kv-blocks = 512
[tenant.default]
weight = 1
EOF2
HLOG=$T/hup.log
export FOLIO_FAKE_STEP_US=10000 # streams of 400 tokens last ~4 s: the reload lands mid-stream
start_daemon "$FOLIOD_FAKE" --config "$T/f.ini" --max-seqs 16 --log-file "$HLOG"
stream() { # N OUT
  curl -sN --max-time 60 --unix-socket "$SOCK" http://x/v1/completions \
    -d "{\"prompt\":[1,2,3,4],\"max_tokens\":$1,\"stream\":true,\"ignore_eos\":true}" >"$2"
}
PIDS=()
for i in 1 2 3 4; do stream 400 "$T/s$i.txt" & PIDS+=($!); done
for _ in $(seq 1 200); do
  [ "$(curl -s --unix-socket "$SOCK" http://x/v1/kv | jq '.requests.running')" = 4 ] && break; sleep 0.02
done
burst() { # two requests 0.1 s apart while the streams run: their status codes, sorted
  for i in 1 2; do curl -s -o /dev/null -w '%{http_code}\n' --max-time 60 --unix-socket "$SOCK" \
    http://x/v1/completions -d '{"prompt":[1,2],"max_tokens":2}' & sleep 0.1; done | sort | tr '\n' ' '
}
# before: no quota, both accepted
sorted=$(burst)
[ "$sorted" = "200 200 " ] || fail "before the reload, two more requests gave: $sorted"
# logrotate moves the file; the new config caps the tenant and changes an option
mv "$HLOG" "$HLOG.1"
cat >"$T/f.ini" <<EOF2
[foliod]
kv-blocks = 1024
[tenant.default]
weight = 1
max_running = 1
max_waiting = 1
[tenant.extra]
api_key = k-extra
EOF2
kill -HUP "$DPID"
for _ in $(seq 1 100); do [ -s "$HLOG" ] && grep -q 'SIGHUP: configuration reloaded' "$HLOG" && break; sleep 0.05; done
grep -q 'SIGHUP: configuration reloaded; tenants: ~default +extra' "$HLOG" || fail "reload line in the reopened file: $(cat "$HLOG" 2>/dev/null)"
grep -q 'changed options not applied.*--kv-blocks' "$HLOG" || fail "kept option not named"
[ "$(curl -s --unix-socket "$SOCK" http://x/v1/kv | jq -r '[.num_blocks, (.tenants[0].max_running), (.tenants|length)] | @tsv')" = "$(printf '512\t1\t2')" ] ||
  fail "after reload /v1/kv: $(curl -s --unix-socket "$SOCK" http://x/v1/kv | jq -c '[.num_blocks, .tenants]')"
# after: 4 running (above the new quota of 1: none is stopped), 1 may wait, the next is refused
sorted=$(burst)
[ "$sorted" = "200 429 " ] || fail "after the reload, two more requests gave: $sorted"
for p in "${PIDS[@]}"; do wait "$p" || fail "a stream's curl failed"; done
for i in 1 2 3 4; do
  grep -q '^data: \[DONE\]' "$T/s$i.txt" || fail "stream $i cut by the reload"
  n=$(grep -o '"token_ids":\[[0-9,]*\]' "$T/s$i.txt" | grep -o '[0-9]\+' | wc -l)
  [ "$n" = 400 ] || fail "stream $i has $n tokens, wanted 400"
done
grep -q 'SIGHUP' "$HLOG.1" && fail "the old file got lines after the reopen"
[ "$(curl -s --unix-socket "$SOCK" http://x/metrics | awk '$1 ~ /^folio_config_reloads_total/ {print $2}')" = 1 ] || fail "reload counter"
stop_daemon || fail "daemon exit"
ok "SIGHUP under load: 4 streams finish (400 tokens, [DONE]); max_waiting applies (200 then 429); --kv-blocks named as kept; log file reopened"
