#!/usr/bin/env bash
# bench/score.sh MODEL.gguf [ROUNDS] — what scoring prompts costs: foliod's
# release build serves N prompts of LEN random token ids (distinct in every
# request, so the prefix cache never answers) at CONC concurrent with
# max_tokens 1, greedy, in three modes, alternated ROUNDS times (default 3):
#   plain  the prefill alone (the first generated token's row only)
#   echo   echo + logprobs 1: every prompt token scored (legacy format)
#   plp    prompt_logprobs 5: every prompt token's logprob, rank, top-5
# Prints prompt tokens per second per mode and round, then the medians and
# each mode's ratio to plain.  Env: N (16), LEN (512), CONC (4), THREADS
# (2), FOLIO_BUILD (build-rel).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
model=$(realpath "$1")
rounds=${2:-3}
n=${N:-16} len=${LEN:-512} conc=${CONC:-4} threads=${THREADS:-2}
build=${FOLIO_BUILD:-$root/build-rel}
[ -x "$build/daemon/foliod" ] || { echo "no $build/daemon/foliod: build it first" >&2; exit 1; }
tmp=$(mktemp -d /tmp/folio-score.XXXXXX)
sock=$tmp/f.sock
"$build/daemon/foliod" --model "$model" --socket "$sock" --threads "$threads" >"$tmp/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 600); do curl -s --unix-socket "$sock" http://x/health >/dev/null && break; sleep 0.1; done

one() { # MODE SEED: one request's body into a file, then the request
  local extra
  case $1 in
    plain) extra='' ;;
    echo) extra=',"echo":true,"logprobs":1' ;;
    plp) extra=',"prompt_logprobs":5' ;;
  esac
  jq -cn --argjson s "$2" --argjson n "$len" --arg x "$extra" \
    '"{\"prompt\":" + ([range($n) | ((. * 7919 + $s * 104729) % 31990) + 10] | tostring) +
     ",\"max_tokens\":1,\"temperature\":0" + $x + "}"' -r >"$tmp/b$2.json"
  curl -sf --unix-socket "$sock" -H 'Content-Type: application/json' \
    --data-binary @"$tmp/b$2.json" http://x/v1/completions >/dev/null
}
export -f one
export sock tmp len

seed=1
declare -A all
for r in $(seq 1 "$rounds"); do
  for mode in plain echo plp; do
    seeds=$(seq "$seed" $((seed + n - 1)))
    seed=$((seed + n))
    t0=$(date +%s.%N)
    xargs -P "$conc" -I{} bash -c "one $mode {}" <<<"$seeds"
    t1=$(date +%s.%N)
    rate=$(echo "$n * $len / ($t1 - $t0)" | bc -l)
    printf '%s round %d: %.1f prompt tok/s (%.2f s)\n' "$mode" "$r" "$rate" "$(echo "$t1 - $t0" | bc -l)"
    all[$mode]+="$rate "
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
p=$(median "${all[plain]}")
for mode in plain echo plp; do
  m=$(median "${all[$mode]}")
  printf 'median %-5s %.1f prompt tok/s (%.2fx plain)\n' "$mode" "$m" "$(echo "$m / $p" | bc -l)"
done
