#!/usr/bin/env bash
# bench/peer/imatrix_ab.sh MODEL.gguf CALIB_TEXT EVAL_TEXT [TYPE...]
#
# Importance matrices, `folio` against llama.cpp on the same F32 file:
# `folio imatrix` and llama-imatrix each compute one on CALIB_TEXT
# (512-token chunks); then for each TYPE (default q4_k_m q2_k iq4_xs
# q3_k_m) five files: `folio quantize` without an importance matrix, with
# folio's, with llama.cpp's; llama-quantize without, with llama.cpp's.
# `folio perplexity --base MODEL` on EVAL_TEXT (another text than
# CALIB_TEXT, so no file is judged on the text it was tuned to) prints each
# file's KL divergence from the model and same-top-token rate.  THREADS
# threads everywhere (default 2).
#
# llama-imatrix and llama-quantize are built from the llama.cpp source that
# the node-llama-cpp npm package carries (bench/peer/llama_build.sh);
# LLAMA_IMATRIX / LLAMA_QUANTIZE name prebuilt ones.  FOLIO_BUILD names
# foliod's release build (default build-rel).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
model=$(realpath "$1")
calib=$(realpath "$2")
eval_text=$(realpath "$3")
shift 3
types=("$@")
[ ${#types[@]} -gt 0 ] || types=(q4_k_m q2_k iq4_xs q3_k_m)
work=$here/.npm
build=${FOLIO_BUILD:-$root/build-rel}
threads=${THREADS:-2}
folio=$build/tools/folio

. "$here/folio_build.sh"
folio_build
. "$here/llama_build.sh"
[ -n "${LLAMA_QUANTIZE:-}" ] || LLAMA_QUANTIZE=$(llama_tool llama-quantize)
[ -n "${LLAMA_IMATRIX:-}" ] || LLAMA_IMATRIX=$(llama_tool llama-imatrix)

tmp=$(mktemp -d /tmp/folio-imab.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$folio" imatrix --model "$model" --file "$calib" --ctx 512 --threads "$threads" \
  -o "$tmp/im-folio.gguf" | tail -n 1
"$LLAMA_IMATRIX" -m "$model" -f "$calib" -c 512 -t "$threads" -o "$tmp/im-llama.gguf" \
  >"$tmp/llama-imatrix.log" 2>&1
kl() { folio_kld "$1" "$model" "$eval_text"; } # FILE: "kld same_top"
printf '%-8s %-34s %10s %9s\n' type file KLD "same top"
for t in "${types[@]}"; do
  # a mix that needs an importance matrix (q2_k_s) is refused without one
  # by both tools: its line says so
  "$folio" quantize "$model" "$tmp/f.gguf" --type "$t" --threads "$threads" >/dev/null 2>&1 || :
  "$folio" quantize "$model" "$tmp/ff.gguf" --type "$t" --threads "$threads" \
    --imatrix "$tmp/im-folio.gguf" >/dev/null
  "$folio" quantize "$model" "$tmp/fl.gguf" --type "$t" --threads "$threads" \
    --imatrix "$tmp/im-llama.gguf" >/dev/null
  "$LLAMA_QUANTIZE" "$model" "$tmp/l.gguf" "${t^^}" "$threads" >/dev/null 2>&1 || :
  "$LLAMA_QUANTIZE" --imatrix "$tmp/im-llama.gguf" "$model" "$tmp/ll.gguf" "${t^^}" \
    "$threads" >/dev/null 2>&1
  for v in "f:folio quantize" "ff:folio quantize, folio imatrix" \
      "fl:folio quantize, llama imatrix" "l:llama-quantize" \
      "ll:llama-quantize, llama imatrix"; do
    if [ ! -s "$tmp/${v%%:*}.gguf" ]; then
      printf '%-8s %-34s %10s\n' "$t" "${v#*:}" "refused"
      continue
    fi
    read -r kld top <<<"$(kl "$tmp/${v%%:*}.gguf")"
    printf '%-8s %-34s %10.5f %9.4f\n' "$t" "${v#*:}" "$kld" "$top"
  done
  rm -f "$tmp"/[fl]*.gguf
done
