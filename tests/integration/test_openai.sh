#!/usr/bin/env bash
# The official openai npm package (openai@6, undici@7 Agent with socketPath)
# against foliod_fake.  Installs them into the build tree with npm; skips
# (exit 77) with a message if npm or the registry is unreachable.
. "$SRCDIR/lib.sh"
ensure_openai || { echo "SKIP: openai SDK unavailable"; exit 77; }
cp "$SRCDIR/openai_client.mjs" "$NM/"
start_daemon "$FOLIOD_FAKE" --kv-blocks 256
node "$NM/openai_client.mjs" "$SOCK" || fail "openai client"
stop_daemon || fail "exit status"
