#!/usr/bin/env bash
# bench/peer/tree_ab.sh BUILD_A BUILD_B MODEL.gguf [ROUNDS]
#
# Two foliod builds (release build directories, e.g. an older tree's built
# in a git worktree, and this one's) on the same file and load, alternating
# A then B, ROUNDS times (default 2): the load of server_ab.sh (256
# requests at 64 concurrent, 128 prompt tokens, 128 output, greedy, EOS
# ignored, 2 compute threads), driven by this tree's `folio bench` (so both
# builds see the same client).  Each build runs with its own defaults;
# FOLIOD_ARGS adds options to both, FOLIOD_ARGS_A and FOLIOD_ARGS_B to one
# (the same build twice with two settings: BUILD_A = BUILD_B).  MODEL_A=FILE gives build A another
# file (e.g. an F32 yardstick for B's BF16 run).  BENCH_LOAD replaces the
# `folio bench` options of the load (e.g. a sampled one: "... --temperature
# 0.8 --top-p 0.9").  Prints one line per build and round,
# then each build's median and the median of the per-round ratios B / A.
#
#   git worktree add /tmp/base 3b3b74e
#   (cd /tmp/base && meson setup build-rel -Dbuildtype=release -Dtests=false && ninja -C build-rel)
#   bench/peer/tree_ab.sh /tmp/base/build-rel build-rel small.gguf 2
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
a=$(realpath "$1") b=$(realpath "$2") model=$(realpath "$3")
model_a=$(realpath "${MODEL_A:-$3}")
rounds=${4:-2}
folio=$root/build-rel/tools/folio
[ -x "$folio" ] || { echo "tree_ab.sh: build this tree first (meson setup build-rel ...; ninja -C build-rel)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sock=$work/foliod.sock
read -r -a foliod_args <<<"${FOLIOD_ARGS:-}"
read -r -a args_a <<<"${FOLIOD_ARGS_A:-}"
read -r -a args_b <<<"${FOLIOD_ARGS_B:-}"
read -r -a load <<<"${BENCH_LOAD:---num-prompts 256 --max-concurrency 64 --input-len 128 --output-len 128 --temperature 0 --ignore-eos --vocab-size 32000 --seed 1}"

field() { sed -n "s/^$2:[[:space:]]*\([0-9.]*\).*/\1/p" "$1"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

run() { # BUILD OUT MODEL [EXTRA ARGS...]
  local build=$1 out=$2 file=$3
  shift 3
  rm -f "$sock"
  "$build/daemon/foliod" --model "$file" --socket "$sock" --kv-mem 1G --threads 2 \
    "${foliod_args[@]}" "$@" >"$work/foliod.log" 2>&1 &
  local pid=$! up=0
  for _ in $(seq 1 1200); do
    curl -sf --unix-socket "$sock" http://x/health >/dev/null 2>&1 && { up=1; break; }
    sleep 0.1
  done
  [ "$up" = 1 ] || { echo "tree_ab.sh: foliod of $build did not come up:" >&2; cat "$work/foliod.log" >&2; exit 1; }
  "$folio" bench --socket "$sock" "${load[@]}" >"$out" 2>&1
  kill -TERM "$pid"; wait "$pid" || true
}

for r in $(seq 1 "$rounds"); do
  run "$a" "$work/a-$r.txt" "$model_a" "${args_a[@]}"
  run "$b" "$work/b-$r.txt" "$model" "${args_b[@]}"
  for s in a b; do
    f=$work/$s-$r.txt
    printf 'round %d %s output %8s tok/s  TTFT mean %8s ms  p99 %8s ms  ok %s\n' "$r" "$s" \
      "$(field "$f" 'Output token throughput (tok\/s)')" "$(field "$f" 'Mean TTFT (ms)')" \
      "$(field "$f" 'P99 TTFT (ms)')" "$(field "$f" 'Successful requests')"
  done
done
for s in a b; do
  printf 'median %s output %8s tok/s  TTFT mean %8s ms  p99 %8s ms\n' "$s" \
    "$(for r in $(seq 1 "$rounds"); do field "$work/$s-$r.txt" 'Output token throughput (tok\/s)'; done | median)" \
    "$(for r in $(seq 1 "$rounds"); do field "$work/$s-$r.txt" 'Mean TTFT (ms)'; done | median)" \
    "$(for r in $(seq 1 "$rounds"); do field "$work/$s-$r.txt" 'P99 TTFT (ms)'; done | median)"
done
printf 'median ratio b/a: output %s, mean TTFT %s, p99 TTFT %s\n' \
  "$(for r in $(seq 1 "$rounds"); do echo "$(field "$work/b-$r.txt" 'Output token throughput (tok\/s)') $(field "$work/a-$r.txt" 'Output token throughput (tok\/s)')" | awk '{printf "%.3f\n", $1 / $2}'; done | median)" \
  "$(for r in $(seq 1 "$rounds"); do echo "$(field "$work/b-$r.txt" 'Mean TTFT (ms)') $(field "$work/a-$r.txt" 'Mean TTFT (ms)')" | awk '{printf "%.3f\n", $1 / $2}'; done | median)" \
  "$(for r in $(seq 1 "$rounds"); do echo "$(field "$work/b-$r.txt" 'P99 TTFT (ms)') $(field "$work/a-$r.txt" 'P99 TTFT (ms)')" | awk '{printf "%.3f\n", $1 / $2}'; done | median)"
