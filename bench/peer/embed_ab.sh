#!/usr/bin/env bash
# bench/peer/embed_ab.sh — /v1/embeddings, foliod against llama.cpp's
# llama-server (--embeddings) on the same GGUF file, same machine, same
# run, both over TCP on loopback:
#   N requests of one input each (LEN random token ids, a different prompt
#   each), CONC at a time (curl under xargs -P), last-token pooling,
#   normalized; each server alone on the machine while measured; ROUNDS
#   alternating rounds, the median of each side reported.  First the two
#   servers' embeddings of the same 8 inputs are compared (max |diff| and
#   the least cosine), so the speed is of the same answer.
#
#   bench/peer/embed_ab.sh [MODEL.gguf]   (default: a `small` F32 file)
# Env: N (256), CONC (64), LEN (128), ROUNDS (3), THREADS (nproc),
# FOLIO_BUILD (build-rel), WORK (bench/peer/.npm: llama.cpp's build),
# LLAMA_ARGS (more llama-server options, e.g. "-b 2048 -ub 2048": an
# embedding's tokens must fit one micro-batch, so its size bounds how many
# inputs a step takes).
set -euo pipefail
cd "$(dirname "$0")/../.."
here=bench/peer
. "$here/folio_build.sh"
. "$here/llama_build.sh"
build=${FOLIO_BUILD:-build-rel}
work=${WORK:-$here/.npm}
N=${N:-256} CONC=${CONC:-64} LEN=${LEN:-128} ROUNDS=${ROUNDS:-3}
threads=${THREADS:-$(nproc)}
folio_build
server=$(llama_tool llama-server)
tmp=$(mktemp -d /tmp/embed-ab.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
model=${1:-}
if [ -z "$model" ]; then
  model=$tmp/small.gguf
  "$build/tools/folio" gen-model --preset small --seed 1 -o "$model" >/dev/null
fi
# the inputs: request i's body in $tmp/req/i.json, and other ones in
# $tmp/warm/i.json for the warm-up (the same ones would be prefix-cache hits)
mkreq() { # DIR FIRST: N bodies, prompts FIRST.. (no two alike)
  mkdir -p "$tmp/$1"
  jq -cn --argjson n "$N" --argjson len "$LEN" --argjson f "$2" '[range($f; $f + $n) as $i |
    [range($len) | ((. * 7919 + $i * 104729 + 17) % 30000) + 100]]' |
    jq -c '.[]' | awk -v d="$tmp/$1" '{ f = d "/" NR ".json"; print "{\"input\":[" $0 "]}" > f; close(f) }'
}
mkreq req 0
mkreq warm "$N"

. "$here/serve_ab.sh"
start_f() { start_folio --max-seqs "$CONC" --pooling last --kv-mem 2G; }
start_l() { start_llama --embeddings --pooling last -np "$CONC" -c $((CONC * (LEN + 8))); }
emb8() { # PORT: the embeddings of inputs 1..8, one JSON array
  for i in 1 2 3 4 5 6 7 8; do
    curl -sf "http://127.0.0.1:$1/v1/embeddings" -H 'Content-Type: application/json' \
      -d @"$tmp/req/$i.json" | jq -c '.data[0].embedding'
  done | jq -cs .
}
start_f
emb8 $port_f >"$tmp/f8.json"
stop
start_l
emb8 $port_l >"$tmp/l8.json"
stop
jq -rn --slurpfile a "$tmp/f8.json" --slurpfile b "$tmp/l8.json" '
  [range(8) as $i | [range($a[0][$i] | length) as $k | ($a[0][$i][$k] - $b[0][$i][$k]) | fabs] | max] | max as $d |
  [range(8) as $i | [range($a[0][$i] | length) as $k | $a[0][$i][$k] * $b[0][$i][$k]] | add] | min as $c |
  "same 8 inputs: max |diff| \($d), least cosine \($c)"'

rounds /v1/embeddings
tok=$((N * LEN))
printf 'foliod: %.2f s, %.0f input tok/s; llama-server: %.2f s, %.0f input tok/s; ratio %.2fx (medians of %d)\n' \
  "$mf" "$(echo "$tok / $mf" | bc -l)" "$ml" "$(echo "$tok / $ml" | bc -l)" "$(echo "$ml / $mf" | bc -l)" "$ROUNDS"
