#!/usr/bin/env bash
# tests/integration/llamacpp/run.sh FOLIO_BIN WORKDIR
#
# Logit agreement with llama.cpp on the same GGUF file: generates a tiny F32
# model with `folio gen-model`, then compare_logits.mjs evaluates it in
# llama.cpp (node-llama-cpp's prebuilt CPU library, installed from npm into
# WORKDIR) and in `folio eval`.  Exit 77 (skip) when npm cannot install it.
set -euo pipefail
folio=$(realpath "$1")
work=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
cd "$work"

if [ ! -d node_modules/node-llama-cpp ] || [ ! -d node_modules/@node-llama-cpp/linux-x64 ]; then
  [ -f package.json ] || echo '{"name":"folio-llamacpp-check","private":true}' > package.json
  if ! timeout 600 npm install --no-audit --no-fund --omit=optional --ignore-scripts \
      node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1 > npm.log 2>&1; then
    echo "SKIP: npm could not install node-llama-cpp (see $work/npm.log)"
    exit 77
  fi
fi
cp "$here/compare_logits.mjs" .
"$folio" gen-model --preset tiny --seed 7 -o tiny-f32.gguf
node compare_logits.mjs "$work/tiny-f32.gguf" "$folio"
