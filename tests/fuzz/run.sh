#!/usr/bin/env bash
# tests/fuzz/run.sh HARNESS SEED_CORPUS WORK_DIR [libFuzzer options...]
#
# Runs one libFuzzer harness for FOLIO_FUZZ_SECONDS (default 30) over its
# seed corpus (read only) plus the inputs earlier runs kept in
# WORK_DIR/corpus; a crash, sanitizer report, leak, timeout (> 10 s for
# one input) or allocation over 512 MB (the inputs are <= 64 KiB) fails
# the run and leaves the input in WORK_DIR/artifacts.  The last line of
# output is libFuzzer's execution count.  libFuzzer's own failure exit
# status is 77, which meson reads as a skipped test: every failure exits 1
# here instead.
set -euo pipefail
exe=$1 seeds=$2 work=$3
shift 3
mkdir -p "$work/corpus" "$work/artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
exec "$exe" -max_total_time="${FOLIO_FUZZ_SECONDS:-30}" -max_len=65536 -timeout=10 \
  -error_exitcode=1 -timeout_exitcode=1 \
  -malloc_limit_mb=512 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$@" "$work/corpus" "$seeds"
