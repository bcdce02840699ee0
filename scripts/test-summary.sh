#!/usr/bin/env bash
# scripts/test-summary.sh BUILD_DIR — one closing line "N passed, N failed"
# from meson's test log.
set -euo pipefail
log="$1/meson-logs/testlog.json"
[ -f "$log" ] || { echo "0 passed, 0 failed"; exit 0; }
python3 - "$log" <<'PY'
import json, sys
res = [json.loads(l)["result"] for l in open(sys.argv[1]) if l.strip()]
ok = sum(r in ("OK", "EXPECTEDFAIL") for r in res)
skip = sum(r == "SKIP" for r in res)
print(f"{ok} passed, {len(res) - ok - skip} failed, {skip} skipped")
PY
