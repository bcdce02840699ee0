#!/usr/bin/env bash
# The official openai npm package (openai@6, undici@7 Agent with socketPath)
# against foliod_fake.  Installs them into the build tree with npm; skips
# (exit 77) with a message if npm or the registry is unreachable.
. "$SRCDIR/lib.sh"
NM=${NPM_DIR:-$PWD/npm-openai}
mkdir -p "$NM"
if [ ! -d "$NM/node_modules/openai" ] || [ ! -d "$NM/node_modules/undici" ]; then
  if ! command -v npm >/dev/null; then echo "SKIP: npm not installed"; exit 77; fi
  (cd "$NM" && [ -f package.json ] || echo '{"private":true}' >package.json)
  if ! (cd "$NM" && timeout 180 npm install --no-audit --no-fund --silent openai@6 undici@7 >"$T/npm.log" 2>&1); then
    echo "SKIP: npm install openai@6 undici@7 failed (registry unreachable?):"; tail -n 5 "$T/npm.log"; exit 77
  fi
fi
cp "$SRCDIR/openai_client.mjs" "$NM/"
start_daemon "$FOLIOD_FAKE" --kv-blocks 256
node "$NM/openai_client.mjs" "$SOCK" || fail "openai client"
stop_daemon || fail "exit status"
