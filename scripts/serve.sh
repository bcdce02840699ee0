#!/usr/bin/env bash
# scripts/serve.sh — install what is missing, build an optimised foliod and
# run it on its embedded default model.  Extra arguments go to foliod.
# Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
dir=${BUILD_DIR:-build}
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" -Dbuildtype=release -Dtests=false
fi
ninja -C "$dir"
exec "$dir/daemon/foliod" "$@"
