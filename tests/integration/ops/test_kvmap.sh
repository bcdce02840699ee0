#!/usr/bin/env bash
# tests/integration/ops/test_kvmap.sh — /v1/kv's compact block map
# (char-per-block-v2) against the per-block objects of /v1/kv?map=full,
# taken in the same idle moment: the same state, tenant, sharing and token
# count for every block; a 100,000-block pool under load costs at most
# 150 KB per poll; tenants from slot 64 on (per-uid tenants, '~' and two
# digits) up to the last slot, 255, decode to their index, in the map and
# in folio top.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
INTEG=$(cd "$HERE/.." && pwd)
. "$INTEG/lib.sh"
export FOLIO_FAKE_STEP_US=2000
# cmp.py COMPACT FULL [MIN_TENANT]: the compact map decoded block by block
# against ?map=full (MIN_TENANT: some used block must be of a tenant >= it)
cat >"$T/cmp.py" <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
min_tenant = int(sys.argv[3]) if len(sys.argv) > 3 else None
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
m, full, bs = a["block_map"], b["block_map"], a["block_size"]
assert m["encoding"] == "char-per-block-v2", m["encoding"]
# decode: '.' free, ':' cached, a digit = tenant < 64, '~' + 2 digits = 64 * d1 + d2
st, s, j = [], m["states"], 0
while j < len(s):
    c = s[j]
    if c == "~":
        st.append(64 * B64.index(s[j + 1]) + B64.index(s[j + 2])); j += 3
    else:
        st.append(c if c in ".:" else B64.index(c)); j += 1
assert len(st) == len(full) == a["num_blocks"], (len(st), len(full), a["num_blocks"])
shared = set()
for b0, n in m["shared"]:
    shared.update(range(b0, b0 + n))
partial = dict((k, v) for k, v in m["partial"])
diff, moved, tenants = [], 0, set()
for i, x in enumerate(full):
    c = st[i]
    state = "free" if c == "." else "cached" if c == ":" else "used"
    if state != x["state"]:
        moved += 1  # a block taken or released between the two reads
        continue
    if state == "used":
        tenants.add(c)
        if c != x["tenant"]: diff.append((i, "tenant", c, x))
        if (i in shared) != (x["refcount"] > 1): diff.append((i, "shared", x))
        tok = partial.get(i, bs)
        if abs(tok - x["tokens"]) > 4: diff.append((i, "tokens", tok, x))
    if state == "cached" and i in partial: diff.append((i, "cached partial"))
if diff or moved > 4:
    sys.exit(f"FAIL: {len(diff)} blocks differ ({diff[:4]}), {moved} moved")
used = sum(1 for c in st if isinstance(c, int))
if min_tenant is None and (not shared or not partial):
    sys.exit(f"FAIL: nothing to compare: {len(shared)} shared, {len(partial)} partial")
if min_tenant is not None and not any(t >= min_tenant for t in tenants):
    sys.exit(f"FAIL: no block of a tenant >= {min_tenant}: {sorted(tenants)}")
print(f"ok: {len(st)} blocks, {used} used, {len(shared)} shared, {len(partial)} partial, tenants {sorted(tenants)}; {moved} moved between reads")
PY
# compare_maps [MIN_TENANT]: read both views and compare them; a pair read
# further apart than a few steps (a loaded machine can stall the client
# between the two reads) is read again, up to three times
compare_maps() {
  local try
  for try in 1 2 3; do
    curl -s --unix-socket "$SOCK" http://x/v1/kv >"$T/a.json"
    curl -s --unix-socket "$SOCK" 'http://x/v1/kv?map=full' >"$T/b.json"
    python3 "$T/cmp.py" "$T/a.json" "$T/b.json" $1 && return 0
    echo "# maps differ (try $try), reading again" >&2
  done
  return 1
}
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
# (the prompts first, then all requests at once: they overlap even on a busy machine)
python3 -c "
import random
for i in range(1, 25):
    random.seed(i % 3); a = [random.randint(3, 400) for _ in range(200)]
    random.seed(i); a += [random.randint(3, 400) for _ in range(random.randint(1, 40))]
    print(','.join(map(str, a)))" >"$T/prompts"
i=0
while read -r p; do
  i=$((i + 1))
  if [ $((i % 2)) = 0 ]; then
    curl -s --max-time 120 --unix-socket "$SOCK" http://x/v1/completions -d "{\"prompt\":[$p],\"max_tokens\":$((200 + i)),\"ignore_eos\":true}" >/dev/null &
    CP+=($!)
  else
    curl -s --max-time 120 -H 'Authorization: Bearer kb' -H 'Content-Type: application/json' "http://127.0.0.1:$PORT/v1/completions" -d "{\"prompt\":[$p],\"max_tokens\":$((300 + i)),\"ignore_eos\":true}" >/dev/null &
    CP+=($!)
  fi
done <"$T/prompts"
for _ in $(seq 1 100); do
  [ "$(curl -s --unix-socket "$SOCK" http://x/v1/kv | jq '.requests.running')" -ge 8 ] && break; sleep 0.05
done
size=$(curl -s --unix-socket "$SOCK" -o "$T/kv.json" -w '%{size_download}' http://x/v1/kv)
jq -e '.blocks.used > 0 and (.block_map.states | length) == 100000' "$T/kv.json" >/dev/null || fail "no load in the map"
[ "$size" -le 153600 ] || fail "/v1/kv is $size bytes at 100,000 blocks"
ok "/v1/kv at 100,000 blocks under load: $size bytes (one byte per block + runs)"
kill "${CP[@]}" 2>/dev/null || true; wait "${CP[@]}" 2>/dev/null || true # not needed any more
stop_daemon || fail "daemon exit"

# a small pool for the block-by-block comparison (?map=full is ~60 bytes a
# block); the second request adopts the first's cached prefix: shared blocks
# (50 ms steps: a token or two at most between the two reads, even on a
# busy machine)
FOLIO_FAKE_STEP_US=50000 start_daemon "$FOLIOD_FAKE" --kv-blocks 2048 --block-size 16 --max-seqs 8 --access-log off
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
compare_maps "" || fail "compact map differs from map=full"
ok "compact block map = ?map=full: states, tenants, sharing, partial-block tokens"
kill -KILL "$DPID"; wait "$DPID" 2>/dev/null || true; DPID= # gone before the next daemon binds the socket

# tenant slots 64..255: 255 unconfigured uids (slots 1..255, in order of
# first contact); the ones in slots 64 and 255 hold blocks while both maps
# are read
FOLIO_FAKE_STEP_US=50000 start_daemon "$FOLIOD_FAKE" --kv-blocks 2048 --block-size 16 --max-seqs 8 --access-log off --log-level info
chmod 711 "$T"; chmod 666 "$SOCK"
as_uid() { local u=$1; shift; setpriv --reuid "$u" --regid "$u" --clear-groups "$@"; }
for i in $(seq 1 255); do
  st=$(as_uid $((60000 + i)) curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" http://x/v1/models || true)
  [ "$st" = 200 ] || fail "uid $((60000 + i)): $st"
done
[ "$(curl -s --unix-socket "$SOCK" http://x/v1/kv | jq '.tenants | length')" = 256 ] || fail "not 256 tenant slots"
HP=()
for i in 64 255 3; do
  as_uid $((60000 + i)) curl -s --max-time 60 --unix-socket "$SOCK" http://x/v1/completions \
    -d "{\"prompt\":[$(seq -s, 10 $((40 + i % 7)))],\"max_tokens\":1500,\"ignore_eos\":true}" >/dev/null &
  HP+=($!)
done
for _ in $(seq 1 100); do
  [ "$(curl -s --unix-socket "$SOCK" http://x/v1/kv | jq '.requests.running')" = 3 ] && break; sleep 0.05
done
compare_maps 255 || fail "high tenant slots: compact map differs from map=full"
jq -e '.block_map.states | test("~BA") and test("~D_")' "$T/a.json" >/dev/null ||
  fail "slots 64 and 255 not written as ~BA and ~D_: $(jq -r '.block_map.states' "$T/a.json" | tr -d . | head -c 200)"
jq -e '.tenants[64].name == "uid-60064" and .tenants[255].name == "uid-60255"' "$T/a.json" >/dev/null || fail "slot names"
# folio top decodes the escapes: as many blocks as the pool has
"$FOLIO" top --socket "$SOCK" --once >"$T/top.txt" 2>&1 || fail "folio top: $(tail -3 "$T/top.txt")"
grep -q "2048 blocks" "$T/top.txt" || fail "folio top miscounts blocks: $(grep -a 'block map' "$T/top.txt")"
kill "${HP[@]}" 2>/dev/null || true
wait "${HP[@]}" 2>/dev/null || true
ok "tenant slots 64 and 255 in the compact map ('~' + two digits) = ?map=full; folio top counts 2048 blocks"
kill -KILL "$DPID"; wait "$DPID" 2>/dev/null || true; DPID= # gone before the next daemon binds the socket
