#!/usr/bin/env bash
# scripts/tsan.sh — the daemon under ThreadSanitizer: builds foliod,
# foliod_fake and folio with -fsanitize=thread in build-tsan/ and runs the
# integration tests, whose daemons (the real engine and the fake one) hand
# requests from the loop thread to the engine thread and events back
# (daemon/engine.c) while clients stream, disconnect and drain.  Any data
# race or lock-order report fails the test that caused it.
#   scripts/tsan.sh                    every integration test
#   scripts/tsan.sh srv_real_engine    the named tests only
# Not part of .ci/run: a build of its own (every library, with
# ThreadSanitizer) plus the integration suite at TSan speed is well over
# the 3 minutes CI can spare; run it before changing daemon/engine.c,
# server.c, comp.c, backend.c or http*.c.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build-tsan}
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" --werror -Dbuildtype=debugoptimized -Dchecks=true \
    -Db_sanitize=thread -Db_lundef=false
fi
ninja -C "$dir"
# halt at the first report, with both stacks of a race; OpenBLAS's own
# threads are not instrumented, so the model computes on foliod's threads.
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:second_deadlock_stack=1:history_size=4}
export OPENBLAS_NUM_THREADS=1 FOLIO_TEST_SHORT=1
args=(--print-errorlogs --num-processes 1 --timeout-multiplier 6 --suite integration)
status=0
meson test -C "$dir" "${args[@]}" "$@" || status=$?
scripts/test-summary.sh "$dir"
exit $status
