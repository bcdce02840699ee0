#!/usr/bin/env bash
# tests/check-format.sh SRCDIR — fails when a tracked C file differs from
# what clang-format (the repo's .clang-format) would make of it.
set -euo pipefail
cd "$1"
bad=0
while IFS= read -r f; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f (run: clang-format -i $f)"
    bad=1
  fi
done < <(git ls-files '*.c' '*.h' 2>/dev/null || find . -name '*.[ch]' -not -path './build*')
exit $bad
