#!/usr/bin/env bash
# bench/peer/run.sh MODEL.gguf [llamacpp_engine.mjs options]
#
# Installs llama.cpp as the node-llama-cpp npm package ships it (prebuilt
# CPU library, into bench/peer/.npm, once) and measures it on MODEL.gguf:
# prefill, single-stream decode and a batched load (see llamacpp_engine.mjs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$here/.npm
mkdir -p "$work"
if [ ! -d "$work/node_modules/node-llama-cpp" ]; then
  (cd "$work" && { [ -f package.json ] || echo '{"name":"folio-peer","private":true}' > package.json; } &&
   npm install --no-audit --no-fund --omit=optional --ignore-scripts \
     node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1 >npm.log 2>&1)
fi
cp "$here/llamacpp_engine.mjs" "$work/"
model=$(realpath "$1"); shift
exec node "$work/llamacpp_engine.mjs" "$model" "$@"
