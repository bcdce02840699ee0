#!/usr/bin/env bash
# tests/integration/cluster/test_cluster.sh — three foliod replicas behind
# the shipped HAProxy recipe (dist/haproxy/foliod.cfg), each replica in its
# own network namespace as if on its own host:
#
#   namespace <P>c (client): haproxy :8000 (the recipe: hash on the API key,
#   bounded load), haproxy :8001 (the same, round robin), folio bench
#        c1 10.201.1.1 ── veth ── eth0 10.201.1.2  <P>r1: foliod replica1
#        c2 10.201.2.1 ── veth ── eth0 10.201.2.2  <P>r2: foliod replica2
#        c3 10.201.3.1 ── veth ── eth0 10.201.3.2  <P>r3: foliod replica3
#
# Routed links, one /24 each; nothing is configured in the host's own
# namespace (the veth ends are created inside the namespaces), so parallel
# runs (names carry the pid) and the host's ports never meet.  Checks:
#   1. 4 tenants whose requests share a 512-token prefix: the cluster's
#      prefix-cache hit rate with affine routing is >= 90% of one replica's
#      alone; round robin is measured too (both printed);
#   2. a tenant sending 10x the others' requests spreads to >= 2 replicas;
#   3. SIGTERM on a replica under load: 0 failed requests, exit status 0;
#   4. SIGKILL on a replica under load: the failed requests are exactly the
#      ones HAProxy had in flight on it (its log), each with an error, none
#      timed out, every other request completed;
#   5. the traffic went over the veths (counters) and never through the
#      host's namespace (processes' netns, no route from the host).
# Everything is torn down on exit, failed or not.  Skips (77) where network
# namespaces cannot be made (not root, no CAP_NET_ADMIN) or haproxy is
# missing.  Cost: about 35 s of CPU (2 min of wall time on a shared,
# loaded 2-core machine), with the tiny model of `folio gen-model`.
set -euo pipefail
export no_proxy='*' NO_PROXY='*' # curl: every address here is direct
skip() {
  echo "SKIP: $*"
  exit 77
}
command -v haproxy >/dev/null || skip "haproxy is not installed (scripts/deps.sh installs it)"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces (ip netns add)"

P=folc$$
NS_C=${P}c
NS=("${P}r1" "${P}r2" "${P}r3")
T=$(mktemp -d /tmp/foliod-cluster.XXXXXX)
PIDS=()   # replicas, by index 0..2 ("" once gone)
HAPIDS=() # haproxy instances
made=()   # namespaces created
cleanup() {
  set +e
  for p in "${HAPIDS[@]}" "${PIDS[@]}"; do [ -n "$p" ] && kill -KILL "$p" 2>/dev/null; done
  for p in "${HAPIDS[@]}" "${PIDS[@]}"; do [ -n "$p" ] && wait "$p" 2>/dev/null; done
  for n in "${made[@]}"; do ip netns del "$n" 2>/dev/null; done
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 143' TERM INT # (meson's timeout): through the EXIT trap
fail() {
  echo "FAIL: $*" >&2
  for i in 0 1 2; do
    echo "--- replica$((i + 1)) log (tail):" >&2
    tail -n 8 "$T/r$i.log" >&2 2>/dev/null || true
  done
  echo "--- haproxy log (tail):" >&2
  tail -n 12 "$T/ha.log" >&2 2>/dev/null || true
  exit 1
}
ok() { echo "ok - $*"; }
t_start=$(date +%s)

if ! ip netns add "$NS_C" 2>"$T/netns.err"; then
  skip "cannot create a network namespace: $(cat "$T/netns.err")"
fi
made+=("$NS_C")
in_c() { ip netns exec "$NS_C" "$@"; }
ip -n "$NS_C" link set lo up
for i in 0 1 2; do
  n=$((i + 1))
  ip netns add "${NS[$i]}"
  made+=("${NS[$i]}")
  ip link add "c$n" netns "$NS_C" type veth peer name eth0 netns "${NS[$i]}"
  ip -n "$NS_C" addr add "10.201.$n.1/24" dev "c$n"
  ip -n "${NS[$i]}" addr add "10.201.$n.2/24" dev eth0
  ip -n "$NS_C" link set "c$n" up
  ip -n "${NS[$i]}" link set eth0 up
  ip -n "${NS[$i]}" link set lo up
done

# --- replicas -------------------------------------------------------------
# One model file for all three (loaded with mmap: faster than each
# replica building the embedded model).
"$FOLIO" gen-model --preset tiny --seed 19 -o "$T/tiny.gguf" >/dev/null || fail "gen-model"
# the replica id: refused unless header-safe; by default the host name
"$FOLIOD" --model "$T/tiny.gguf" --socket "$T/x.sock" --replica-id 'a b' >"$T/x.log" 2>&1 &&
  fail "--replica-id 'a b' was accepted"
grep -q -- "--replica-id 'a b'" "$T/x.log" || fail "no message for a bad --replica-id: $(cat "$T/x.log")"
"$FOLIOD" --model "$T/tiny.gguf" --socket "$T/x.sock" >"$T/x.log" 2>&1 &
xp=$!
for _ in $(seq 1 200); do curl -s --unix-socket "$T/x.sock" http://x/health >/dev/null 2>&1 && break; sleep 0.05; done
hdr=$(curl -s -D - -o /dev/null --unix-socket "$T/x.sock" http://x/health)
kill -TERM $xp
wait $xp || fail "foliod exit status after SIGTERM"
grep -qi "^X-Folio-Replica: $(hostname)"$'\r' <<<"$hdr" || fail "X-Folio-Replica is not the host name: $hdr"
# The same keys on every replica (docs/CLUSTER.md: key distribution).
cat >"$T/foliod.ini" <<'INI'
[foliod]
operator-key = key-operator
kv-blocks = 1024
max-seqs = 32
threads = 1
drain-timeout-ms = 60000
[tenant.t0]
api_key = key-tenant-0
[tenant.t1]
api_key = key-tenant-1
[tenant.t2]
api_key = key-tenant-2
[tenant.t3]
api_key = key-tenant-3
[tenant.hot]
api_key = key-tenant-hot
INI
start_replica() { # index
  local i=$1 n=$(($1 + 1))
  # ip netns exec execs the command: $! is foliod's pid
  ip netns exec "${NS[$i]}" "$FOLIOD" --model "$T/tiny.gguf" --config "$T/foliod.ini" \
    --replica-id "replica$n" \
    --listen "10.201.$n.2:8000" --socket "$T/r$i.sock" >"$T/r$i.log" 2>&1 &
  PIDS[$i]=$!
}
wait_health() { # url
  for _ in $(seq 1 300); do
    in_c curl -s --max-time 1 -o /dev/null "$1/health" && return 0
    sleep 0.05
  done
  return 1
}
for i in 0 1 2; do start_replica $i; done
for i in 0 1 2; do wait_health "http://10.201.$((i + 1)).2:8000" || fail "replica$((i + 1)) did not come up"; done
hdr=$(in_c curl -s -D - -o /dev/null -H 'Authorization: Bearer key-tenant-0' http://10.201.2.2:8000/v1/models)
grep -qi '^X-Folio-Replica: replica2' <<<"$hdr" || fail "no X-Folio-Replica header: $hdr"

# --- HAProxy: the shipped recipe with this cluster's addresses --------------
RECIPE=$DIST/haproxy/foliod.cfg
[ -f "$RECIPE" ] || fail "missing $RECIPE"
haproxy -c -q -f "$RECIPE" || fail "the shipped recipe does not pass haproxy -c"
sed -e 's/^\(    server replica[1-3]\) 10\.0\.0\.1\([1-3]\):8000/\1 10.201.\2.2:8000/' \
  -e 's/^\(    log stdout\).*/\1 format raw local0/' "$RECIPE" >"$T/affine.cfg"
[ "$(grep -c '10\.201\.' "$T/affine.cfg")" = 3 ] || fail "recipe's server lines not found"
grep -q '^    hash-balance-factor' "$T/affine.cfg" || fail "no hash-balance-factor in the recipe"
# round robin: the same file, the balance lines swapped, another port
sed -e 's/^    balance hdr(Authorization)/    balance roundrobin/' -e '/^    hash-/d' \
  -e 's/^\(    bind [^:]*\):8000/\1:8001/' "$T/affine.cfg" >"$T/rr.cfg"
for c in affine rr; do
  ip netns exec "$NS_C" haproxy -db -f "$T/$c.cfg" >>"$T/ha.log" 2>&1 & # $!: haproxy itself
  HAPIDS+=($!)
done
wait_health http://127.0.0.1:8000 || fail "haproxy (affine) did not come up"
wait_health http://127.0.0.1:8001 || fail "haproxy (round robin) did not come up"

TENANTS=key-tenant-0,key-tenant-1,key-tenant-2,key-tenant-3
ALL_METRICS=http://10.201.1.2:8000,http://10.201.2.2:8000,http://10.201.3.2:8000
bench() { # name url metrics args...
  local name=$1 url=$2 metrics=$3
  shift 3
  in_c "$FOLIO" bench --url "$url" --replica-metrics "$metrics" --metrics-key key-operator \
    --ignore-eos --temperature 0 --no-progress --timeout 30 --json "$T/$name.json" "$@" \
    >"$T/$name.out" 2>&1
}
# 1. prefix-cache locality: every tenant's 12 requests share a 512-token
# prefix (a new prefix per phase: --seed), 4 requests in flight
PREFIX=(--dataset prefix --prefix-len 512 --input-len 32 --output-len 2 --num-prompts 48 --max-concurrency 4)
bench single http://10.201.1.2:8000 http://10.201.1.2:8000 --tenants $TENANTS "${PREFIX[@]}" --seed 11 ||
  fail "single-replica run: $(cat "$T/single.out")"
bench affine http://127.0.0.1:8000 $ALL_METRICS --tenants $TENANTS "${PREFIX[@]}" --seed 12 ||
  fail "affine run: $(cat "$T/affine.out")"
bench rr http://127.0.0.1:8001 $ALL_METRICS --tenants $TENANTS "${PREFIX[@]}" --seed 13 ||
  fail "round-robin run: $(cat "$T/rr.out")"
grep -q "Cluster prefix-cache hit rate" "$T/affine.out" || fail "no hit rate in the report: $(cat "$T/affine.out")"
python3 - "$T" <<'PY' || fail "prefix-cache locality"
import json, sys
t = sys.argv[1]
r = {k: json.load(open(f"{t}/{k}.json")) for k in ("single", "affine", "rr")}
for k, v in r.items():
    if v["completed"] != 48 or v["failed"]:
        sys.exit(f"{k}: completed {v['completed']}, failed {v['failure_reasons']}")
    if v["cluster_prefix_cache"]["replicas_counted"] != (1 if k == "single" else 3):
        sys.exit(f"{k}: replicas scraped {v['cluster_prefix_cache']}")
    if not all("replica" in q for q in v["requests"]):
        sys.exit(f"{k}: a response without X-Folio-Replica")
rate = {k: v["cluster_prefix_cache"]["hit_rate"] for k, v in r.items()}
def spread(v):
    per = {}
    for q in v["requests"]:
        per.setdefault(q["tenant"], set()).add(q["replica"])
    return {k: sorted(s) for k, s in sorted(per.items())}
counts = {k: {e["id"]: e["requests"] for e in v["replicas"]} for k, v in r.items()}
print(f"prefix-cache hit rate: single {rate['single']:.3f}, affine {rate['affine']:.3f} "
      f"({rate['affine'] / rate['single']:.2f}x single), round robin {rate['rr']:.3f} "
      f"({rate['rr'] / rate['single']:.2f}x single)")
print(f"requests per replica: affine {counts['affine']}, round robin {counts['rr']}")
print("durations (s): " + ", ".join(f"{k} {v['duration']:.1f}" for k, v in r.items()))
print(f"replicas per tenant: affine {spread(r['affine'])}")
if not rate["single"] > 0.5:
    sys.exit(f"single-replica hit rate {rate['single']} (the workload shares no prefix?)")
if rate["affine"] < 0.9 * rate["single"]:
    sys.exit("affine routing lost the prefix cache")
if len(counts["rr"]) != 3:
    sys.exit("round robin did not use every replica")
PY
ok "affine routing keeps the prefix cache (>= 90% of one replica's hit rate); round robin measured"

# 2. a hot tenant (10 of every 13 requests) spills over the load bound
HOT=$(printf 'key-tenant-hot,%.0s' $(seq 1 10))key-tenant-0,key-tenant-1,key-tenant-2
bench hot http://127.0.0.1:8000 $ALL_METRICS --tenants "$HOT" --dataset prefix --prefix-len 16 \
  --input-len 16 --output-len 12 --num-prompts 26 --max-concurrency 13 --seed 14 ||
  fail "hot-tenant run: $(cat "$T/hot.out")"
python3 - "$T/hot.json" <<'PY' || fail "hot tenant"
import json, sys
r = json.load(open(sys.argv[1]))
if r["completed"] != 26 or r["failed"]:
    sys.exit(f"completed {r['completed']}, failed {r['failure_reasons']}")
hot = {}
for q in r["requests"]:
    if q["tenant"] < 10:
        hot[q["replica"]] = hot.get(q["replica"], 0) + 1
print(f"hot tenant's requests per replica: {hot} ({r['duration']:.1f} s)")
if len(hot) < 2:
    sys.exit("the hot tenant stayed on one replica")
PY
ok "a hot tenant at 10x the others' rate spreads to >= 2 replicas"

# 3. SIGTERM on a replica under load: nothing fails; it exits 0
running_on() { # index: requests running on that replica
  in_c curl -s --max-time 1 -H 'Authorization: Bearer key-operator' \
    "http://10.201.$(($1 + 1)).2:8000/metrics" | awk '$1 ~ /^folio_num_requests_running($|\{)/ {print int($2)}'
}
wait_running() { # index
  for _ in $(seq 1 200); do
    [ "$(running_on "$1")" -gt 0 ] 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}
# the replica serving the most requests of the affine run above
busiest=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(max(r['replicas'], key=lambda e: e['requests'])['id'][-1])" "$T/affine.json")
term=$((busiest - 1))
LOAD=(--tenants $TENANTS --dataset prefix --prefix-len 16 --input-len 16 --output-len 24 --num-prompts 24 --max-concurrency 8)
bench term http://127.0.0.1:8000 $ALL_METRICS "${LOAD[@]}" --seed 15 &
BPID=$!
wait_running $term || fail "no request reached replica$busiest"
kill -TERM "${PIDS[$term]}"
rc=0
wait "${PIDS[$term]}" || rc=$?
PIDS[$term]=""
[ $rc = 0 ] || fail "replica$busiest exit status $rc after SIGTERM"
grep -q "drained; exiting" "$T/r$term.log" || fail "replica$busiest did not drain"
rc=0
wait $BPID || rc=$?
python3 - "$T/term.json" "replica$busiest" <<PY || fail "SIGTERM under load: $(cat "$T/term.out")"
import json, sys
r = json.load(open(sys.argv[1]))
on = sum(1 for q in r["requests"] if q.get("replica") == sys.argv[2])
print(f"SIGTERM: {r['completed']} completed, {r['failed']} failed, {on} served by the drained replica ({r['duration']:.1f} s)")
if r["completed"] != 24 or r["failed"] or on == 0:
    sys.exit(f"failures {r['failure_reasons']}")
PY
ok "SIGTERM on replica$busiest under load: 0 failed requests, its streams finished, exit 0"

# 4. SIGKILL on one of the two left under load
left=()
for i in 0 1 2; do [ -n "${PIDS[$i]}" ] && left+=($i); done
for _ in $(seq 1 40); do # HAProxy has seen the drained replica go
  grep -q "replica$busiest is DOWN" "$T/ha.log" && break
  sleep 0.05
done
mark=$(wc -l <"$T/ha.log")
bench kill http://127.0.0.1:8000 $ALL_METRICS "${LOAD[@]}" --seed 16 &
BPID=$!
victim=
for _ in $(seq 1 200); do # the first of the two seen running requests
  for i in "${left[@]}"; do
    if [ "$(running_on $i)" -gt 0 ] 2>/dev/null; then victim=$i; break 2; fi
  done
  sleep 0.05
done
[ -n "$victim" ] || fail "no request reached the replicas left"
vname=replica$((victim + 1))
kill -KILL "${PIDS[$victim]}"
wait "${PIDS[$victim]}" 2>/dev/null || true
PIDS[$victim]=""
t0=$(date +%s)
rc=0
wait $BPID || rc=$?
[ $(($(date +%s) - t0)) -lt 25 ] || fail "the run took too long after SIGKILL (a hang?)"
sleep 0.3 # haproxy writes its log line when a stream ends
tail -n +$((mark + 1)) "$T/ha.log" | grep -E ' foliod(~)? ' >"$T/ha.kill.log" || true
python3 - "$T/kill.json" "$vname" "$T/ha.kill.log" <<'PY' || fail "SIGKILL under load: $(cat "$T/kill.out")"
import json, re, sys
r = json.load(open(sys.argv[1]))
victim = sys.argv[2]
# haproxy httplog: ... foliod foliod_replicas/SERVER Tq/Tw/Tc/Tr/Ta STATUS BYTES - - TERM ...
lost = 0
for line in open(sys.argv[3]):
    m = re.search(r"foliod_replicas/(\S+) \S+ (\d+) \S+ \S+ \S+ (\S{4}) ", line)
    if not m:
        continue
    server, status, term = m.group(1), int(m.group(2)), m.group(3)
    if term[0] == "S" or status >= 500:  # the server side aborted the stream
        if server != victim:
            sys.exit(f"a request failed on {server}, not the killed replica: {line}")
        lost += 1
failed = [q for q in r["requests"] if not q["success"]]
print(f"SIGKILL: {r['completed']} completed, {len(failed)} failed "
      f"({r['failure_reasons']}), haproxy saw {lost} cut on {victim}")
if r["completed"] + len(failed) != 24:
    sys.exit("not every request ended")
if any(q["error"] == "timeout" for q in failed):
    sys.exit("a request hung until the client's timeout")
if not failed:
    sys.exit("no in-flight request failed: the kill came too late to test anything")
if len(failed) != lost:
    sys.exit(f"{len(failed)} failed at the client but haproxy cut {lost} on the killed replica")
for q in failed:
    if q.get("replica", victim) != victim:
        sys.exit(f"request {q['index']} failed on {q['replica']}")
PY
ok "SIGKILL on $vname under load: only its in-flight requests failed, each with an error, none hung"

# 5. the traffic stayed inside the namespaces
host_ns=$(readlink /proc/self/ns/net)
for p in "${HAPIDS[@]}" "${PIDS[@]}"; do
  [ -z "$p" ] && continue
  [ "$(readlink /proc/$p/ns/net)" != "$host_ns" ] || fail "process $p runs in the host's namespace"
done
ip -o addr show | grep -q '10\.201\.' && fail "a 10.201.x address in the host's namespace"
# (the host may route 10.201.0.0/16 to a default gateway: what must not
# answer is a replica)
curl -s --max-time 1 -D - -o /dev/null http://10.201.1.2:8000/health 2>/dev/null | grep -qi '^x-folio-replica' &&
  fail "a replica is reachable from the host"
for i in 0 1 2; do
  n=$((i + 1))
  read -r rx tx < <(ip -n "$NS_C" -s -j link show "c$n" |
    python3 -c 'import json,sys; s=json.load(sys.stdin)[0]["stats64"]; print(s["rx"]["bytes"], s["tx"]["bytes"])')
  # c$n tx: requests to replica$n (prompts of 512+ ids as JSON); rx: its answers
  [ "$tx" -gt 100000 ] && [ "$rx" -gt 50000 ] || fail "veth c$n counters rx $rx tx $tx: the traffic did not pass it"
  echo "veth c$n: $tx bytes to replica$n, $rx bytes back"
done
ok "traffic went over the veths only; nothing in the host's namespace"
echo "PASS: cluster of 3 replicas behind HAProxy in $(($(date +%s) - t_start)) s"
