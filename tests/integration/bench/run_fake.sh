#!/usr/bin/env bash
# tests/integration/bench/run_fake.sh — `folio bench` end to end against a
# fake OpenAI-compatible streaming server (fake_server.mjs, Node, no deps)
# whose behaviour is known, so the report can be checked number by number:
#  1. usage errors exit 2;
#  2. Unix socket, /v1/completions: 20 requests, every 5th refused with 429,
#     every 7th (not 5th) dropped mid-stream -> 14 ok, 4 "HTTP 429",
#     2 "connection closed mid-response"; 16 tokens each (usage and
#     token_ids agree); first token after 50 ms -> TTFT in [50, 2000] ms;
#     one token every 10 ms -> TPOT and median ITL in [9, 500] ms; the JSON
#     has per-request records and metrics scrapes; the SVG is well-formed
#     XML (python3 xml.etree) with three panels;
#  3. TCP, /v1/chat/completions, API keys spread round-robin, rate-limited
#     Poisson arrivals and a concurrency bound that the server observes;
#  4. --dataset trace (also a trace written by `folio sim`), --duration
#     bound, timeouts, refused connections;
#  5. 300 streams held open at once on one thread.
# Usage: run_fake.sh FOLIO_BINARY
set -euo pipefail
folio=$1
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null; then
  echo "SKIP: node not installed"
  exit 77
fi
tmp=$(mktemp -d /tmp/folio-bench-it.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

start_fake() { # name args...
  local name=$1; shift
  rm -f "$tmp/$name.port"
  node "$here/fake_server.mjs" --socket "$tmp/$name.sock" --port-file "$tmp/$name.port" \
    --lifetime 240 "$@" >"$tmp/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [ -s "$tmp/$name.port" ] && return 0; sleep 0.1; done
  fail "fake server $name did not start: $(cat "$tmp/$name.log")"
}
stats() { curl -s --unix-socket "$tmp/$1.sock" http://x/stats; }

# 1. usage errors
expect_exit() {
  local want=$1; shift
  local rc=0
  "$folio" bench "$@" >"$tmp/out" 2>"$tmp/err" </dev/null || rc=$?
  [ "$rc" -eq "$want" ] || fail "bench $* exited $rc, want $want: $(cat "$tmp/err")"
}
expect_exit 0 --help
grep -q "Serving" "$tmp/out" || true
expect_exit 2 --bogus
expect_exit 2 --request-rate 0
expect_exit 2 --burstiness -1
expect_exit 2 --dataset nope
expect_exit 2 --dataset trace
expect_exit 2 --slo ttft
expect_exit 2 --logit-bias 5
expect_exit 2 --endpoint /v1/rerank
expect_exit 2 --socket a --url http://127.0.0.1:1
expect_exit 2 --url ftp://x
expect_exit 2 --socket "$tmp/$(printf 'x%.0s' $(seq 120))"

# 2. Unix socket, completions, injected failures
start_fake a --tokens 16 --first-ms 50 --itl-ms 10 --fail429 5 --drop 7
"$folio" bench --socket "$tmp/a.sock" --num-prompts 20 --input-len 32 --output-len 16 \
  --ignore-eos --temperature 0 --seed 3 --logit-bias 5:-100,7:2.5 --scrape-metrics \
  --json "$tmp/a.json" --plot "$tmp/a.svg" --no-progress >"$tmp/a.out" 2>"$tmp/a.err" ||
  fail "bench run a failed: $(cat "$tmp/a.err")"
cat "$tmp/a.out"
grep -q "=* Serving Benchmark Result =*" "$tmp/a.out" || fail "no result block"
field() { grep -E "^$1" "$2" | head -1 | awk '{print $NF}'; }
[ "$(field 'Successful requests:' "$tmp/a.out")" = 14 ] || fail "successful != 14"
[ "$(field 'Failed requests:' "$tmp/a.out")" = 6 ] || fail "failed != 6"
[ "$(field '  HTTP 429:' "$tmp/a.out")" = 4 ] || fail "429 count"
[ "$(field '  connection closed mid-response:' "$tmp/a.out")" = 2 ] || fail "drop count"
[ "$(field 'Total generated tokens:' "$tmp/a.out")" = 224 ] || fail "generated tokens != 14*16"
[ "$(field 'Total input tokens:' "$tmp/a.out")" = 448 ] || fail "input tokens != 14*32"
st=$(stats a)
python3 - "$tmp/a.json" "$tmp/a.svg" "$st" <<'PY'
import json, sys, xml.etree.ElementTree as ET
r = json.load(open(sys.argv[1]))
st = json.loads(sys.argv[3])
def need(c, msg):
    if not c:
        sys.exit("FAIL: " + msg)
need(st["requests"] == 20 and st["ok"] == 14 and st["r429"] == 4 and st["dropped"] == 2, f"server stats {st}")
need(r["completed"] == 14 and r["failed"] == 6, "json counts")
need(r["failure_reasons"] == {"HTTP 429": 4, "connection closed mid-response": 2}, f"reasons {r['failure_reasons']}")
need(r["total_output_tokens"] == 224, "json output tokens")
need(50 <= r["mean_ttft_ms"] <= 2000 and 50 <= r["p99_ttft_ms"] <= 3000, f"ttft {r['mean_ttft_ms']}")
need(9 <= r["mean_tpot_ms"] <= 500, f"tpot {r['mean_tpot_ms']}")
need(9 <= r["median_itl_ms"] <= 500, f"itl {r['median_itl_ms']}")
need(r["mean_e2el_ms"] >= 50 + 15 * 10, "e2el below the server's own delays")
need(r["median_ttft_ms"] <= r["p90_ttft_ms"] <= r["p99_ttft_ms"], "percentiles ordered")
need(r["max_output_tokens_per_s"] >= 1, "peak throughput")
need(abs(r["output_throughput"] - 224 / r["duration"]) < 1e-6 * 224 / r["duration"] + 1e-9, "throughput = tokens / duration")
reqs = r["requests"]
need(len(reqs) == 20, "20 request records")
ok = [q for q in reqs if q["success"]]
need(len(ok) == 14 and all(q["output_tokens"] == 16 and q["chunk_tokens"] == 16 and len(q["itl_ms"]) == 15 for q in ok), "per-request tokens / itl")
bad = [q for q in reqs if not q["success"]]
need(all(q["error"] in ("HTTP 429", "connection closed mid-response") for q in bad), "per-request errors")
need(any("tenant queue full" in q["error_detail"] for q in bad), "429 detail carries the server's message")
need(len(r["metrics"]) >= 1, "metrics scraped")
m = r["metrics"][0]
need(m["kv_blocks_total"] == 20 and 0 <= m["kv_usage"] <= 1 and m["running"] >= 0, f"metric point {m}")
# what the server received: the options passed through
b = st["bodies"][0]
need(b["model"] == "fake-model" and b["max_tokens"] == 16 and b["stream"] is True, f"body {b}")
need(b["stream_options"] == {"include_usage": True} and b["ignore_eos"] is True and b["temperature"] == 0, f"body {b}")
need(b["seed"] == 3 and b["logit_bias"] == {"5": -100, "7": 2.5}, f"body {b}")
need(isinstance(b["prompt"], list) and len(b["prompt"]) == 32 and all(1 <= t < 500 for t in b["prompt"]), "token-id prompt within vocab_size")
svg = ET.parse(sys.argv[2]).getroot()
need(svg.tag.endswith("svg"), "svg root")
ns = "{http://www.w3.org/2000/svg}"
need(len(svg.findall(ns + "g")) == 3, "three panels")
texts = " ".join(t.text or "" for t in svg.iter(ns + "text"))
for w in ("Output token throughput", "KV cache usage", "Queue depth", "time (s)", "waiting (server)"):
    need(w in texts, "svg lacks " + w)
need(len(svg.findall(f".//{ns}polyline")) >= 1, "svg has lines")
print("run a: report, JSON, SVG and server stats agree")
PY

# 3. TCP, chat, keys, rate + concurrency bound
start_fake b --tokens 4 --first-ms 20 --itl-ms 5 --vllm
port=$(cat "$tmp/b.port")
"$folio" bench --url "http://127.0.0.1:$port" --endpoint /v1/chat/completions \
  --num-prompts 24 --request-rate 40 --burstiness 1 --max-concurrency 3 --tenants k1,k2,k3 \
  --output-len 4 --slo ttft=100000,tpot=100000 --scrape-metrics --json "$tmp/b.json" --no-progress \
  >"$tmp/b.out" 2>"$tmp/b.err" || fail "bench run b failed: $(cat "$tmp/b.err")"
st=$(stats b)
python3 - "$tmp/b.json" "$st" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); st = json.loads(sys.argv[2])
def need(c, msg):
    if not c:
        sys.exit("FAIL: " + msg)
need(r["completed"] == 24 and r["failed"] == 0, "all ok")
need(r["total_output_tokens"] == 96, "4 tokens each (chat deltas, role chunk not counted)")
need(st["auth"] == {"Bearer k1": 8, "Bearer k2": 8, "Bearer k3": 8}, f"keys {st['auth']}")
need(st["maxInflight"] <= 3 and r["peak_concurrent_requests"] <= 3, "concurrency bound")
need(abs(r["request_goodput"] - r["request_throughput"]) < 1e-9, "loose SLO: goodput = throughput")
need(isinstance(st["bodies"][0]["messages"][0]["content"], str), "chat sends text")
# 24 Poisson arrivals at 40/s take ~0.6 s: the run cannot be instant
need(r["duration"] > 0.2, f"duration {r['duration']}")
need(all(m["kv_blocks_total"] is None for m in r["metrics"]) and any(m["running"] is not None for m in r["metrics"]), "vllm metric names")
print("run b: TCP, chat, tenants, rate and concurrency bound agree")
PY

# 4. trace, duration bound, timeout, refused
cat >"$tmp/trace.txt" <<'TR'
# arrival_s tenant prompt_len output_len prefix_id
0.0 0 10 3 -1
0.1 1 20 3 0
0.1 2 30 3 0
5.0 0 10 3 -1
TR
start_fake c --tokens 0 --first-ms 5 --itl-ms 1
"$folio" bench --socket "$tmp/c.sock" --dataset trace --trace "$tmp/trace.txt" --prefix-len 8 \
  --duration 1 --json "$tmp/c.json" --no-progress >"$tmp/c.out" 2>"$tmp/c.err" ||
  fail "bench trace run failed: $(cat "$tmp/c.err")"
st=$(stats c)
python3 - "$tmp/c.json" "$st" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); st = json.loads(sys.argv[2])
def need(c, msg):
    if not c:
        sys.exit("FAIL: " + msg)
need(r["completed"] == 3 and r["not_sent"] == 1, f"duration bound: {r['completed']} {r['not_sent']}")
need(r["total_output_tokens"] == 9, "max_tokens from the trace")
need([q["prompt_len"] for q in r["requests"]] == [10, 20, 30, 10], "trace lengths")
b = st["bodies"]
need(len(b[1]["prompt"]) == 20 and len(b[2]["prompt"]) == 30, "prompt lengths")
need(b[1]["prompt"][:8] == b[2]["prompt"][:8], "shared prefix 0")
need(b[1]["prompt"][8:12] != b[2]["prompt"][8:12], "suffixes differ")
need(r["requests"][1]["start_s"] >= 0.09, "arrival time respected")
print("run c: trace arrivals, shared prefixes and --duration agree")
PY
# a trace written by `folio sim` (same format) drives the bench as written
if "$folio" sim --help >/dev/null 2>&1; then
  "$folio" sim --synthetic --num 12 --rate 100 --tenants 1:1:0.5,2:1:0.5 --prefixes 2 \
    --in-mean 16 --out-mean 6 --ctx-len 256 --write-trace "$tmp/sim.trace" >/dev/null 2>&1 ||
    fail "folio sim --write-trace"
  want=$(awk '!/^#/ && NF == 5 {n++; t += $4} END {print n, t}' "$tmp/sim.trace")
  "$folio" bench --socket "$tmp/c.sock" --dataset trace --trace "$tmp/sim.trace" \
    --json "$tmp/s.json" --no-progress >"$tmp/s.out" 2>&1 || fail "sim trace run: $(cat "$tmp/s.out")"
  got=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["completed"], r["total_output_tokens"])' "$tmp/s.json")
  [ "$got" = "$want" ] || fail "folio sim trace: bench did $got, trace has $want"
  echo "run s: a folio sim trace ($want) replayed"
fi
# timeouts: the server waits 3 s before the first token
start_fake d --tokens 2 --first-ms 3000 --itl-ms 1
rc=0
"$folio" bench --socket "$tmp/d.sock" --num-prompts 3 --timeout 0.3 --no-progress \
  >"$tmp/d.out" 2>"$tmp/d.err" || rc=$?
[ "$rc" -eq 1 ] || fail "all-timeout run exited $rc, want 1"
[ "$(field '  timeout:' "$tmp/d.out")" = 3 ] || fail "timeouts not counted: $(cat "$tmp/d.out")"
# nobody listening
rc=0
"$folio" bench --socket "$tmp/none.sock" --num-prompts 2 --no-progress >"$tmp/e.out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "refused run exited $rc"
grep -q "connect: ENOENT" "$tmp/e.out" || fail "connect failure reason: $(cat "$tmp/e.out")"
# 5. many concurrent streams on one thread: 300 at once, all held open
start_fake g --tokens 8 --first-ms 300 --itl-ms 20
"$folio" bench --socket "$tmp/g.sock" --num-prompts 300 --json "$tmp/g.json" --no-progress \
  >"$tmp/g.out" 2>"$tmp/g.err" || fail "300-stream run failed: $(cat "$tmp/g.err")"
st=$(stats g)
python3 - "$tmp/g.json" "$st" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); st = json.loads(sys.argv[2])
if not (r["completed"] == 300 and r["total_output_tokens"] == 2400 and st["maxInflight"] >= 256):
    sys.exit(f"FAIL: 300 streams: completed {r['completed']}, server saw {st['maxInflight']} at once")
print(f"run g: 300 streams, {st['maxInflight']} concurrent at the server")
PY
echo "PASS: folio bench against the fake server"
