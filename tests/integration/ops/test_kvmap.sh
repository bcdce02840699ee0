#!/usr/bin/env bash
# tests/integration/ops/test_kvmap.sh — /v1/kv's compact block map
# (char-per-block-v1) against the per-block objects of /v1/kv?map=full,
# taken in the same idle moment: the same state, tenant, sharing and token
# count for every block; and a 100,000-block pool under load costs at most
# 150 KB per poll.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
INTEG=$(cd "$HERE/.." && pwd)
. "$INTEG/lib.sh"
export FOLIO_FAKE_STEP_US=2000
cat >"$T/t.ini" <<EOF2
[tenant.alice]
uid = $(id -u)
[tenant.bob]
api_key = kb
EOF2
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_daemon "$FOLIOD_FAKE" --kv-blocks 100000 --block-size 16 --max-seqs 64 --config "$T/t.ini" \
  --listen "127.0.0.1:$PORT" --access-log off
CP=()
# shared prefixes (prefix cache -> refcount > 1 while running; cached after), odd lengths (partial blocks)
for i in $(seq 1 24); do
  p=$(python3 -c "import random; random.seed($i % 3); a=[random.randint(3,400) for _ in range(200)]; random.seed($i); a+= [random.randint(3,400) for _ in range(random.randint(1,40))]; print(','.join(map(str,a)))")
  if [ $((i % 2)) = 0 ]; then
    curl -s --max-time 30 --unix-socket "$SOCK" http://x/v1/completions -d "{\"prompt\":[$p],\"max_tokens\":$((20 + i)),\"ignore_eos\":true}" >/dev/null &
    CP+=($!)
  else
    curl -s --max-time 30 -H 'Authorization: Bearer kb' "http://127.0.0.1:$PORT/v1/completions" -d "{\"prompt\":[$p],\"max_tokens\":$((100 + i)),\"ignore_eos\":true}" >/dev/null &
    CP+=($!)
  fi
done
for _ in $(seq 1 100); do
  [ "$(curl -s --unix-socket "$SOCK" http://x/v1/kv | jq '.requests.running')" -ge 8 ] && break; sleep 0.05
done
size=$(curl -s --unix-socket "$SOCK" -o "$T/kv.json" -w '%{size_download}' http://x/v1/kv)
jq -e '.blocks.used > 0 and (.block_map.states | length) == 100000' "$T/kv.json" >/dev/null || fail "no load in the map"
[ "$size" -le 153600 ] || fail "/v1/kv is $size bytes at 100,000 blocks"
ok "/v1/kv at 100,000 blocks under load: $size bytes (one byte per block + runs)"
wait "${CP[@]}"
stop_daemon || fail "daemon exit"

# a small pool for the block-by-block comparison (?map=full is ~60 bytes a
# block); the second request adopts the first's cached prefix: shared blocks
start_daemon "$FOLIOD_FAKE" --kv-blocks 2048 --block-size 16 --max-seqs 8 --access-log off
p=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randint(3,400)) for _ in range(100)))")
for i in 1 2; do
  curl -s --max-time 60 --unix-socket "$SOCK" http://x/v1/completions -d "{\"prompt\":[$p,$i],\"max_tokens\":1500,\"ignore_eos\":true}" >/dev/null &
  for _ in $(seq 1 100); do
    [ "$(curl -s --unix-socket "$SOCK" http://x/v1/kv | jq '.requests.running')" = $i ] && break; sleep 0.05
  done
done
# the two views cannot be taken in one instant while tokens flow: compare
# what does not move during a decode (states of full blocks, sharing) and
# check partial-block tokens against a tolerance of the steps between reads
curl -s --unix-socket "$SOCK" http://x/v1/kv >"$T/a.json"
curl -s --unix-socket "$SOCK" 'http://x/v1/kv?map=full' >"$T/b.json"
python3 - "$T/a.json" "$T/b.json" <<'PY' || fail "compact map differs from map=full"
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
m, full, bs = a["block_map"], b["block_map"], a["block_size"]
assert m["encoding"] == "char-per-block-v1"
st = m["states"]
assert len(st) == len(full) == a["num_blocks"]
shared = set()
for b0, n in m["shared"]:
    shared.update(range(b0, b0 + n))
partial = dict((k, v) for k, v in m["partial"])
diff, moved = [], 0
for i, x in enumerate(full):
    c = st[i]
    state = "free" if c == "." else "cached" if c == ":" else "used"
    if state != x["state"]:
        moved += 1  # a block taken or released between the two reads
        continue
    if state == "used":
        if B64.index(c) != x["tenant"]: diff.append((i, "tenant", c, x))
        if (i in shared) != (x["refcount"] > 1): diff.append((i, "shared", x))
        tok = partial.get(i, bs)
        if abs(tok - x["tokens"]) > 4: diff.append((i, "tokens", tok, x))
    if state == "cached" and i in partial: diff.append((i, "cached partial"))
if diff or moved > 4:
    sys.exit(f"FAIL: {len(diff)} blocks differ ({diff[:4]}), {moved} moved")
used = sum(1 for c in st if c not in ".:")
if not shared or not partial:
    sys.exit(f"FAIL: nothing to compare: {len(shared)} shared, {len(partial)} partial")
print(f"ok: {len(st)} blocks, {used} used, {len(shared)} shared, {len(partial)} partial; {moved} moved between reads")
PY
ok "compact block map = ?map=full: states, tenants, sharing, partial-block tokens"
kill -KILL "$DPID"; DPID=
