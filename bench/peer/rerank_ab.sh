#!/usr/bin/env bash
# bench/peer/rerank_ab.sh — /v1/rerank, foliod against llama.cpp's
# llama-server (--reranking) on the same reranker GGUF file, same machine,
# same run, both over TCP on loopback:
#   N requests, CONC at a time (curl under xargs -P), each a query of 8
#   words and DOCS documents of WORDS words (a different text each: words
#   drawn from a fixed list by a hash of the text's seed and the word's
#   place, so no document repeats another's opening and the prefix caches
#   share only what a request's documents really share, their query's
#   template); each server alone on the machine while
#   measured; ROUNDS alternating rounds, the median of each side reported.
#   First the two servers' scores of the same 2 requests are compared (max
#   |diff|, and whether they rank the documents alike), so the speed is of
#   the same answer.
#
#   bench/peer/rerank_ab.sh [MODEL.gguf]   (default: a `small` qwen3
#                                           reranker, F32)
# Env: N (32), CONC (8), DOCS (8), WORDS (60), ROUNDS (3), THREADS
# (nproc), FOLIO_BUILD (build-rel), WORK (bench/peer/.npm: llama.cpp's
# build), LLAMA_ARGS (more llama-server options).
set -euo pipefail
cd "$(dirname "$0")/../.."
here=bench/peer
. "$here/folio_build.sh"
. "$here/llama_build.sh"
build=${FOLIO_BUILD:-build-rel}
work=${WORK:-$here/.npm}
N=${N:-32} CONC=${CONC:-8} DOCS=${DOCS:-8} WORDS=${WORDS:-60} ROUNDS=${ROUNDS:-3}
threads=${THREADS:-$(nproc)}
folio_build
server=$(llama_tool llama-server)
tmp=$(mktemp -d /tmp/rerank-ab.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
model=${1:-}
if [ -z "$model" ]; then
  model=$tmp/small-rerank.gguf
  "$build/tools/folio" gen-model --preset small --seed 1 --arch qwen3 --reranker -o "$model" \
    >/dev/null
fi
# the requests: request i's body in $tmp/req/i.json, and other ones in
# $tmp/warm/i.json for the warm-up (the same ones would be prefix-cache hits)
mkreq() { # DIR FIRST: N bodies, seeds from FIRST
  mkdir -p "$tmp/$1"
  jq -cn --argjson n "$N" --argjson d "$DOCS" --argjson w "$WORDS" --argjson f "$2" '
  ["the","cat","sat","on","a","warm","mat","while","rain","fell","over","quiet","town",
   "market","prices","rose","sharply","after","news","of","storm","near","coast","river",
   "bridge","old","stone","library","books","children","read","every","morning","light"] as $v |
  def text($seed; $len):
    [range($len) | $v[(((. * 78.233 + $seed * 12.9898) | sin | fabs) * 43758.5453 | floor) % ($v | length)]] |
    join(" ");
  range($f; $f + $n) as $i |
  {query: text($i * 1000; 8), documents: [range($d) as $k | text($i * 1000 + $k + 1; $w)]}' |
  awk -v d="$tmp/$1" '{ f = d "/" NR ".json"; print > f; close(f) }'
}
mkreq req 0
mkreq warm "$N"

. "$here/serve_ab.sh"
slots=$((CONC * DOCS))
start_f() { start_folio --max-seqs "$slots" --kv-mem 2G; }
start_l() { start_llama --reranking -np "$slots" -c $((slots * 256)); }
scores2() { # PORT: the scores of requests 1 and 2 by document index, one JSON array
  for i in 1 2; do
    curl -sf "http://127.0.0.1:$1/v1/rerank" -H 'Content-Type: application/json' \
      -d @"$tmp/req/$i.json" | jq -c '.results | sort_by(.index) | map(.relevance_score)'
  done | jq -cs .
}
start_f
scores2 $port_f >"$tmp/f2.json"
stop
start_l
scores2 $port_l >"$tmp/l2.json"
stop
jq -rn --slurpfile a "$tmp/f2.json" --slurpfile b "$tmp/l2.json" '
  def order($s): [range($s | length)] | sort_by(-$s[.]);
  [range(2) as $i | [range($a[0][$i] | length) as $k | ($a[0][$i][$k] - $b[0][$i][$k]) | fabs] | max] | max as $d |
  ([range(2) as $i | order($a[0][$i]) == order($b[0][$i])] | all) as $same |
  "same 2 requests (\($a[0][0] | length) documents each): max |score diff| \($d), same ranking: \($same)"'

rounds /v1/rerank
docs=$((N * DOCS))
printf 'foliod: %.2f s, %.1f documents/s; llama-server: %.2f s, %.1f documents/s; ratio %.2fx (medians of %d)\n' \
  "$mf" "$(echo "$docs / $mf" | bc -l)" "$ml" "$(echo "$docs / $ml" | bc -l)" "$(echo "$ml / $mf" | bc -l)" "$ROUNDS"
