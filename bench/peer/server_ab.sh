#!/usr/bin/env bash
# bench/peer/server_ab.sh MODEL.gguf [ROUNDS]
#
# foliod against llama.cpp's server on the same GGUF file, machine and load,
# alternating (foliod, then llama-server, ROUNDS times; default 3): 256
# requests at 64 concurrent, 128 prompt tokens (random ids below 32,000,
# the same ids for both servers), 128 output tokens, greedy, EOS ignored,
# driven by `folio bench` in both cases, 2 compute threads each.
#
# llama-server is built from the llama.cpp source that the node-llama-cpp npm
# package carries (bench/peer/llama_build.sh: into bench/peer/.npm/llama.cpp,
# Release, GGML_NATIVE: tuned for this CPU, as foliod's release build is).
# LLAMA_SERVER=/path/to/llama-server skips the build.  FOLIO_BUILD names
# foliod's release build directory (default build-rel; built if missing).
# FOLIOD_ARGS adds options to foliod's command line, e.g. FOLIOD_ARGS=
# "--kv-dtype f32" (foliod's default, auto, gives a BF16 file bf16 KV, an
# F16 file f16, a quantized one f16 as llama-server does, an F32 one f32).
# LORA=ADAPTER.gguf serves every request through that LoRA adapter (`folio
# gen-lora`): foliod loads it as --lora peer=ADAPTER and the requests name
# it; llama-server loads it with --lora (applied to every request).
#
# Prints one line per server and round, and the medians; the per-request
# records stay in bench/peer/.npm/ab-*.json.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
model=$(realpath "$1")
rounds=${2:-3}
work=$here/.npm
mkdir -p "$work"
build=${FOLIO_BUILD:-$root/build-rel}
threads=${THREADS:-2}
read -r -a foliod_args <<<"${FOLIOD_ARGS:-}"
folio_sel=() llama_lora=()
if [ -n "${LORA:-}" ]; then
  foliod_args+=(--lora "peer=$(realpath "$LORA")")
  folio_sel=(--model peer)
  llama_lora=(--lora "$(realpath "$LORA")")
fi

. "$here/folio_build.sh"
folio_build

. "$here/llama_build.sh"
[ -n "${LLAMA_SERVER:-}" ] || LLAMA_SERVER=$(llama_tool llama-server)

sock=$work/ab.sock
port=${PORT:-18088}
load=(--num-prompts 256 --max-concurrency 64 --input-len 128 --output-len 128
      --temperature 0 --ignore-eos --vocab-size 32000 --seed 1)

wait_up() { # URL-or-socket: poll /health for up to 120 s
  for _ in $(seq 1 1200); do
    if [ "$1" = sock ]; then
      curl -sf --unix-socket "$sock" http://x/health >/dev/null 2>&1 && return 0
    else
      curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    fi
    sleep 0.1
  done
  echo "server did not come up" >&2
  return 1
}

field() { # FILE LABEL: the number after "LABEL:" in a folio bench report
  sed -n "s/^$2:[[:space:]]*\([0-9.]*\).*/\1/p" "$1"
}

for r in $(seq 1 "$rounds"); do
  rm -f "$sock"
  "$build/daemon/foliod" --model "$model" --socket "$sock" --kv-mem 1G --threads "$threads" \
    "${foliod_args[@]}" >"$work/ab-foliod.log" 2>&1 &
  pid=$!
  wait_up sock
  "$build/tools/folio" bench --socket "$sock" "${folio_sel[@]}" "${load[@]}" \
    --json "$work/ab-foliod-$r.json" \
    >"$work/ab-foliod-$r.txt" 2>&1
  kill -TERM "$pid"; wait "$pid" || true

  "$LLAMA_SERVER" -m "$model" --host 127.0.0.1 --port "$port" -t "$threads" -c 16384 -np 64 \
    "${llama_lora[@]}" >"$work/ab-llama.log" 2>&1 &
  pid=$!
  wait_up tcp
  "$build/tools/folio" bench --url "http://127.0.0.1:$port" --model peer "${load[@]}" \
    --json "$work/ab-llama-$r.json" >"$work/ab-llama-$r.txt" 2>&1
  kill -TERM "$pid"; wait "$pid" || true

  for s in foliod llama; do
    f=$work/ab-$s-$r.txt
    printf 'round %d %-7s output %7s tok/s  TTFT mean %8s ms  p99 %8s ms  ok %s\n' "$r" "$s" \
      "$(field "$f" 'Output token throughput (tok\/s)')" "$(field "$f" 'Mean TTFT (ms)')" \
      "$(field "$f" 'P99 TTFT (ms)')" "$(field "$f" 'Successful requests')"
  done
done

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
for s in foliod llama; do
  tps=$(for r in $(seq 1 "$rounds"); do field "$work/ab-$s-$r.txt" 'Output token throughput (tok\/s)'; done | median)
  ttft=$(for r in $(seq 1 "$rounds"); do field "$work/ab-$s-$r.txt" 'Mean TTFT (ms)'; done | median)
  printf 'median  %-7s output %7s tok/s  TTFT mean %8s ms\n' "$s" "$tps" "$ttft"
done
