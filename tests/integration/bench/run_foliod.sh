#!/usr/bin/env bash
# tests/integration/bench/run_foliod.sh — `folio bench` against a real
# foliod (the embedded default model), over its Unix socket and over its
# loopback TCP listener: every request succeeds, the token counts agree
# three ways (usage, token_ids counted per chunk, the daemon's own
# folio_generation_tokens_total), /metrics was scraped with foliod's
# names, and the JSON and SVG files are written (the SVG parses as XML);
# --endpoint /v1/embeddings counts input tokens as the daemon does;
# --endpoint /v1/responses and /v1/messages count their events' tokens as
# the daemon does.
# Then, with two tenants configured by API key, --tenants spreads the
# requests over them (foliod's per-tenant counters agree) and a wrong key
# is tallied as HTTP 401.  Skips (77) while foliod is built without its
# engine.
# Usage: run_foliod.sh FOLIO_BINARY FOLIOD_BINARY
set -euo pipefail
folio=$1
foliod=$2
tmp=$(mktemp -d /tmp/folio-bench-foliod.XXXXXX)
dpid=
cleanup() {
  if [ -n "$dpid" ]; then kill -KILL "$dpid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; tail -n 20 "$tmp/foliod.log" >&2 || true; exit 1; }
sock=$tmp/f.sock
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf '[foliod]\noperator-key = key-op\n' >"$tmp/op.ini" # TCP needs a key; the operator's scrapes see all
"$foliod" --socket "$sock" --listen "127.0.0.1:$port" --config "$tmp/op.ini" --kv-blocks 512 --max-seqs 32 \
  >"$tmp/foliod.log" 2>&1 &
dpid=$!
for _ in $(seq 1 300); do
  curl -s --unix-socket "$sock" http://x/health >/dev/null 2>&1 && break
  if ! kill -0 "$dpid" 2>/dev/null; then
    if grep -q "not built in yet" "$tmp/foliod.log"; then
      echo "SKIP: foliod has no engine yet"
      exit 77
    fi
    fail "foliod exited at start"
  fi
  sleep 0.05
done
gen_total() {
  curl -s --unix-socket "$sock" http://x/metrics | awk '$1 ~ /^folio_generation_tokens_total($|\{)/ {print $2}'
}
check() { # json svg n out_len gen_before gen_after
  python3 - "$@" <<'PY'
import json, sys, xml.etree.ElementTree as ET
path, svg, n, out_len, g0, g1 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
r = json.load(open(path))
def need(c, msg):
    if not c:
        sys.exit("FAIL: " + msg)
need(r["completed"] == n and r["failed"] == 0, f"completed {r['completed']} failed {r['failure_reasons']}")
need(r["total_output_tokens"] == n * out_len, f"output tokens {r['total_output_tokens']}")
need(all(q["output_tokens"] == q["chunk_tokens"] == out_len for q in r["requests"]), "usage == token_ids counted per chunk")
need(g1 - g0 == n * out_len, f"daemon counted {g1 - g0} generated tokens")
need(r["mean_ttft_ms"] > 0 and r["mean_tpot_ms"] > 0 and r["median_itl_ms"] >= 0, "latencies")
need(len(r["metrics"]) >= 1 and r["metrics"][0]["kv_blocks_total"] == 512, f"metrics {r['metrics'][:1]}")
need(all(m["kv_usage"] is not None and m["running"] is not None for m in r["metrics"]), "folio metric names found")
root = ET.parse(svg).getroot()
need(root.tag.endswith("svg") and len(root.findall("{http://www.w3.org/2000/svg}g")) == 3, "svg")
print(f"ok: {n} requests, {r['total_output_tokens']} tokens, {r['output_throughput']:.0f} tok/s, {len(r['metrics'])} scrapes")
PY
}
g0=$(gen_total)
"$folio" bench --socket "$sock" --num-prompts 32 --max-concurrency 16 --input-len 32 \
  --output-len 16 --ignore-eos --temperature 0 --scrape-metrics --json "$tmp/u.json" \
  --plot "$tmp/u.svg" --no-progress >"$tmp/u.out" 2>&1 || fail "unix run: $(cat "$tmp/u.out")"
grep -q "Serving Benchmark Result" "$tmp/u.out" || fail "no report"
g1=$(gen_total)
check "$tmp/u.json" "$tmp/u.svg" 32 16 "$g0" "$g1" || fail "unix run checks"
"$folio" bench --url "http://127.0.0.1:$port" --tenants key-op --num-prompts 16 --max-concurrency 8 \
  --input-len 24 --output-len 8 --ignore-eos --temperature 0 --scrape-metrics \
  --json "$tmp/t.json" --plot "$tmp/t.svg" --no-progress >"$tmp/t.out" 2>&1 ||
  fail "tcp run: $(cat "$tmp/t.out")"
g2=$(gen_total)
check "$tmp/t.json" "$tmp/t.svg" 16 8 "$g1" "$g2" || fail "tcp run checks"
# /v1/embeddings: one input a request, its tokens counted as input (the
# daemon's prompt-token counter agrees), nothing generated, latency as TTFT
prompt_total() {
  curl -s --unix-socket "$sock" http://x/metrics | awk '$1 ~ /^folio_prompt_tokens_total($|\{)/ {print $2}'
}
p0=$(prompt_total)
"$folio" bench --socket "$sock" --endpoint /v1/embeddings --num-prompts 16 --max-concurrency 8 \
  --input-len 40 --json "$tmp/e.json" --no-progress >"$tmp/e.out" 2>&1 || fail "embeddings run: $(cat "$tmp/e.out")"
p1=$(prompt_total)
jq -e '.completed == 16 and .failed == 0 and .total_input_tokens == 640 and
  .total_output_tokens == 0 and .mean_ttft_ms > 0 and .mean_ttft_ms == .mean_e2el_ms' "$tmp/e.json" >/dev/null ||
  fail "embeddings run: $(jq -c '{completed, failed, total_input_tokens, total_output_tokens, mean_ttft_ms, mean_e2el_ms}' "$tmp/e.json")"
[ "$(awk -v a="$p0" -v b="$p1" 'BEGIN { print b - a }')" = 640 ] || fail "the daemon counted $p0 -> $p1 prompt tokens, want 640 more"
echo "ok: --endpoint /v1/embeddings: 16 requests, 640 input tokens (the daemon counted as many), latency as TTFT"
# OpenAI's Responses and Anthropic's Messages: their events counted (text
# deltas as tokens, usage from the final events), the token totals the
# daemon's own
for ep in /v1/responses /v1/messages; do
  g0=$(gen_total)
  p0=$(prompt_total)
  "$folio" bench --socket "$sock" --endpoint $ep --num-prompts 8 --max-concurrency 8 --input-len 24 \
    --output-len 8 --ignore-eos --temperature 0 --json "$tmp/r.json" --no-progress >"$tmp/r.out" 2>&1 ||
    fail "$ep run: $(cat "$tmp/r.out")"
  g1=$(gen_total)
  p1=$(prompt_total)
  jq -e --argjson g "$(awk -v a="$g0" -v b="$g1" 'BEGIN { print b - a }')" \
    --argjson p "$(awk -v a="$p0" -v b="$p1" 'BEGIN { print b - a }')" \
    '.completed == 8 and .failed == 0 and .total_output_tokens == 64 and $g == 64 and
     .total_input_tokens == $p and .mean_ttft_ms > 0 and .mean_tpot_ms > 0' "$tmp/r.json" >/dev/null ||
    fail "$ep run ($g0 -> $g1, $p0 -> $p1): $(jq -c '{completed, failed, total_input_tokens, total_output_tokens, mean_ttft_ms, mean_tpot_ms}' "$tmp/r.json")"
  echo "ok: --endpoint $ep: 8 requests, 64 output tokens, input tokens as the daemon counted them"
done
# a prompt over the context length is refused with 400 and counted
"$folio" bench --socket "$sock" --num-prompts 2 --input-len 100000 --output-len 4 \
  --no-progress >"$tmp/x.out" 2>&1 && fail "an over-long prompt succeeded"
grep -Eq "^  HTTP 4[01][0-9]:" "$tmp/x.out" || fail "refusals not tallied: $(cat "$tmp/x.out")"
kill -TERM "$dpid"
wait "$dpid" || fail "foliod exit status after SIGTERM"
dpid=

# tenants: API keys over TCP spread requests round-robin; foliod counts
# each tenant's generated tokens
cat >"$tmp/tenants.ini" <<'INI'
[tenant.alice]
api_key = key-alice
[tenant.bob]
api_key = key-bob
INI
"$foliod" --socket "$sock" --listen "127.0.0.1:$port" --kv-blocks 512 --max-seqs 32 \
  --config "$tmp/tenants.ini" >"$tmp/foliod.log" 2>&1 &
dpid=$!
for _ in $(seq 1 300); do
  curl -s --unix-socket "$sock" http://x/health >/dev/null 2>&1 && break
  kill -0 "$dpid" 2>/dev/null || fail "foliod with tenants exited at start"
  sleep 0.05
done
"$folio" bench --url "http://127.0.0.1:$port" --tenants key-alice,key-bob --num-prompts 6 \
  --input-len 8 --output-len 5 --ignore-eos --no-progress >"$tmp/k.out" 2>&1 ||
  fail "tenant run: $(cat "$tmp/k.out")"
"$folio" bench --url "http://127.0.0.1:$port" --tenants wrong-key --num-prompts 2 \
  --input-len 8 --output-len 5 --no-progress >"$tmp/w.out" 2>&1 && fail "a wrong key succeeded"
grep -q "^  HTTP 401:" "$tmp/w.out" || fail "401 not tallied: $(cat "$tmp/w.out")"
m=$(curl -s --unix-socket "$sock" http://x/metrics)
a=$(awk '$1 ~ /^folio_tenant_generation_tokens_total\{.*tenant="alice"/ {print $2}' <<<"$m")
b=$(awk '$1 ~ /^folio_tenant_generation_tokens_total\{.*tenant="bob"/ {print $2}' <<<"$m")
[ "$a" = 15 ] && [ "$b" = 15 ] || fail "per-tenant tokens alice=$a bob=$b, want 15 each"
echo "ok: --tenants spread 6 requests over two API keys (15 tokens each); a wrong key is a 401"
kill -TERM "$dpid"
wait "$dpid" || fail "foliod exit status after SIGTERM"
dpid=
echo "PASS: folio bench against foliod (unix + tcp + tenants)"
