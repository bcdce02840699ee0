#!/usr/bin/env bash
# scripts/test.sh — install what is missing, build with -Werror and run the
# whole test suite (unit and integration).  Safe to rerun.
#   scripts/test.sh            full suite in build-test/
#   SUITE=unit scripts/test.sh only the fast unit tests
set -euo pipefail
cd "$(dirname "$0")/.."
# Test-only tools: tmux (folio top), chromium (dashboard browser test),
# prometheus (promtool lint of /metrics, the ops tests), socat (dashboard via a proxy),
# systemd (systemd-socket-activate, systemd-analyze), man-db (man -l), jq;
# Node and npm for the client tests (any Node >= 20 already present wins).
extra=(tmux chromium prometheus socat systemd man-db jq)
command -v node >/dev/null && command -v npm >/dev/null || extra+=(nodejs npm)
scripts/deps.sh "${extra[@]}"

dir=${BUILD_DIR:-build-test}
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" --werror -Dbuildtype=debugoptimized -Dchecks=true ${MESON_ARGS:-}
fi
ninja -C "$dir"
echo "== $dir built; ${SECONDS} s since scripts/test.sh started"
args=(--print-errorlogs --num-processes "$(nproc)")
[ -n "${SUITE:-}" ] && args+=(--suite "$SUITE")
status=0
meson test -C "$dir" "${args[@]}" || status=$?
scripts/test-summary.sh "$dir"
exit $status
