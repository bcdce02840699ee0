#!/usr/bin/env bash
# bench/endpoints_ab.sh [BUILD_DIR] — the three chat-shaped endpoints
# (/v1/chat/completions, OpenAI's /v1/responses, Anthropic's /v1/messages)
# streamed by `folio bench` against one foliod on its embedded default
# model, in turn, two rounds: 256 requests at 64 concurrent, 128 in, 128
# out, greedy, EOS ignored.  Each run has its own --seed, so no run finds
# another's prompts in the prefix cache.
set -e
B=${1:-build-rel}
T=$(mktemp -d)
trap 'kill $P 2>/dev/null; rm -rf "$T"' EXIT
$B/daemon/foliod --socket "$T/eb.sock" > "$T/eb.log" 2>&1 &
P=$!
sleep 3
seed=100
for round in 1 2; do
  for ep in /v1/chat/completions /v1/responses /v1/messages; do
    seed=$((seed+1))
    $B/tools/folio bench --socket "$T/eb.sock" --endpoint $ep --num-prompts 256 --max-concurrency 64 \
      --input-len 128 --output-len 128 --ignore-eos --temperature 0 --seed $seed --no-progress \
      --json "$T/r.json" > /dev/null 2>&1
    jq -r --arg ep $ep --arg r $round '"\($r) \($ep) \(.output_throughput|floor) tok/s, mean TTFT \(.mean_ttft_ms|floor) ms, p99 TTFT \(.p99_ttft_ms|floor) ms, median TPOT \(.median_tpot_ms*10|floor/10) ms, failed \(.failed)"' "$T/r.json"
  done
done
