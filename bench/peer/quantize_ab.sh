#!/usr/bin/env bash
# bench/peer/quantize_ab.sh MODEL.gguf TEXT [TYPE...]
#
# `folio quantize` against llama.cpp's llama-quantize on the same F32 (or
# F16/BF16) file: for each TYPE (default q2_k q3_k_m q4_k_m q5_k_m q6_k
# iq4_xs iq4_nl q4_0) both tools write a file (llama-quantize first, then
# folio; no importance matrix on either side; THREADS threads each, default
# 2), timed; then `folio perplexity --base MODEL` measures each file's KL
# divergence from the model on TEXT (512-token chunks), so the same engine
# judges both quantizers.  Prints one line per type: the two KL
# divergences, same-top-token rates, sizes and wall seconds.
#
# llama-quantize is built from the llama.cpp source that the node-llama-cpp
# npm package carries (bench/peer/llama_build.sh, into
# bench/peer/.npm/llama.cpp); LLAMA_QUANTIZE=/path/to/llama-quantize skips
# the build.  FOLIO_BUILD names foliod's release build (default build-rel).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
model=$(realpath "$1")
text=$(realpath "$2")
shift 2
types=("$@")
[ ${#types[@]} -gt 0 ] || types=(q2_k q3_k_m q4_k_m q5_k_m q6_k iq4_xs iq4_nl q4_0)
work=$here/.npm
build=${FOLIO_BUILD:-$root/build-rel}
threads=${THREADS:-2}
folio=$build/tools/folio

. "$here/folio_build.sh"
folio_build
. "$here/llama_build.sh"
[ -n "${LLAMA_QUANTIZE:-}" ] || LLAMA_QUANTIZE=$(llama_tool llama-quantize)

tmp=$(mktemp -d /tmp/folio-qab.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
kl() { folio_kld "$1" "$model" "$text"; } # FILE: "kld same_top"
printf '%-8s %12s %12s %9s %9s %8s %8s %7s %7s\n' type "llama KLD" "folio KLD" "llama top" \
  "folio top" "llama MB" "folio MB" "llama s" "folio s"
for t in "${types[@]}"; do
  tl=$tmp/llama-$t.gguf tf=$tmp/folio-$t.gguf
  sl=$(secs "$LLAMA_QUANTIZE" "$model" "$tl" "${t^^}" "$threads")
  sf=$(secs "$folio" quantize "$model" "$tf" --type "$t" --threads "$threads")
  read -r kl_l top_l <<<"$(kl "$tl")"
  read -r kl_f top_f <<<"$(kl "$tf")"
  printf '%-8s %12.5g %12.5g %9.3f %9.3f %8.1f %8.1f %7.2f %7.2f\n' "$t" "$kl_l" "$kl_f" "$top_l" \
    "$top_f" "$(echo "$(stat -c %s "$tl") / 1048576" | bc -l)" \
    "$(echo "$(stat -c %s "$tf") / 1048576" | bc -l)" "$sl" "$sf"
  rm -f "$tl" "$tf"
done
