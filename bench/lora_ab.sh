#!/usr/bin/env bash
# bench/lora_ab.sh [BUILD_DIR] [MODEL.gguf] [ROUNDS] — what LoRA adapters
# cost when served: one foliod with four rank-16 adapters of every matrix
# (`folio gen-lora`, seeds 1-4), and `folio bench` in turn on
#   base   every request on the model itself,
#   one    every request through adapter l1,
#   mixed  each request through one of the four at random
#          (--lora-modules, vLLM's bench option),
# ROUNDS rounds (default 2): N requests (env N, default 256) at 64 concurrent, 128 in, 128 out,
# greedy, EOS ignored.  Each run has its own --seed, so no run finds
# another's prompts in the prefix cache.  MODEL defaults to `small` F32,
# generated here.
set -e
B=${1:-build-rel}
T=$(mktemp -d)
trap 'kill $P 2>/dev/null; rm -rf "$T"' EXIT
M=${2:-}
if [ -z "$M" ]; then
  M=$T/small.gguf
  $B/tools/folio gen-model --preset small --seed 1 -o "$M"
fi
for i in 1 2 3 4; do
  $B/tools/folio gen-lora --model "$M" --seed $i --rank 16 -o "$T/l$i.gguf"
done
$B/daemon/foliod --model "$M" --socket "$T/lb.sock" --kv-mem 2G \
  --lora "l1=$T/l1.gguf,l2=$T/l2.gguf,l3=$T/l3.gguf,l4=$T/l4.gguf" > "$T/lb.log" 2>&1 &
P=$!
for _ in $(seq 1 600); do
  curl -s --unix-socket "$T/lb.sock" http://x/health > /dev/null 2>&1 && break
  sleep 0.1
done
seed=200
for round in $(seq 1 "${3:-2}"); do
  for cfg in base one mixed; do
    seed=$((seed+1))
    case $cfg in
      base) sel=() ;;
      one) sel=(--model l1) ;;
      mixed) sel=(--lora-modules l1,l2,l3,l4) ;;
    esac
    $B/tools/folio bench --socket "$T/lb.sock" --num-prompts "${N:-256}" --max-concurrency 64 \
      --input-len 128 --output-len 128 --ignore-eos --temperature 0 --seed $seed --no-progress \
      "${sel[@]}" --json "$T/r.json" > /dev/null 2>&1
    jq -r --arg c $cfg --arg r $round '"\($r) \($c) \(.output_throughput|floor) tok/s, mean TTFT \(.mean_ttft_ms|floor) ms, p99 TTFT \(.p99_ttft_ms|floor) ms, median TPOT \(.median_tpot_ms*10|floor/10) ms, failed \(.failed)"' "$T/r.json"
  done
done
curl -s --unix-socket "$T/lb.sock" http://x/metrics | grep '^folio_lora_requests_total'
