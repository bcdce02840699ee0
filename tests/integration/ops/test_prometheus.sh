#!/usr/bin/env bash
# tests/integration/ops/test_prometheus.sh — the monitoring that ships in
# share/foliod/ against real tools:
#  1. promtool check rules, and promtool test rules with series built to
#     fire each alert (and healthy series that must not): foliod-rules.test.yml.
#  2. promtool check metrics on foliod's /metrics; exact `le` labels.
#  3. A real Prometheus (/usr/bin/prometheus) scrapes foliod (TCP, 1 s
#     interval) under a small load from two tenants; every PromQL expression
#     of the Grafana dashboard (template variables as Grafana expands "All")
#     returns data through the query API, with a finite value; the alert
#     rules load and evaluate (rule health "ok").
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
INTEG=$(cd "$HERE/.." && pwd)
. "$INTEG/lib.sh"
: "${DIST:?}"
command -v promtool >/dev/null && [ -x /usr/bin/prometheus ] || { echo "SKIP: prometheus/promtool not installed"; exit 77; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# --- 1. rules ------------------------------------------------------------------
promtool check rules "$DIST/prometheus/foliod-rules.yml" >"$T/check.txt" 2>&1 || fail "promtool check rules: $(cat "$T/check.txt")"
(cd "$DIST/prometheus" && promtool test rules foliod-rules.test.yml) >"$T/ptest.txt" 2>&1 ||
  fail "promtool test rules: $(cat "$T/ptest.txt")"
for a in $(sed -n 's/^ *- alert: //p' "$DIST/prometheus/foliod-rules.yml"); do
  grep -q "alertname: $a\$" "$DIST/prometheus/foliod-rules.test.yml" || fail "alert $a has no promtool test"
done
ok "promtool: rules check, every alert fires on its test series ($(grep -c '^ *- alert:' "$DIST/prometheus/foliod-rules.yml") alerts)"

# --- 2. foliod under load -----------------------------------------------------------
export FOLIO_FAKE_STEP_US=10000
PORT=$(free_port)
cat >"$T/tenants.ini" <<EOF2
[tenant.alice]
api_key = key-alice
weight = 2
[tenant.bob]
api_key = key-bob
max_waiting = 1
EOF2
start_daemon "$FOLIOD_FAKE" --listen "127.0.0.1:$PORT" --kv-blocks 256 --max-seqs 8 --config "$T/tenants.ini" --access-log off \
  --operator-key key-op
touch "$T/load.on"
load_loop() {
  while [ -e "$T/load.on" ]; do
    curl -sN --max-time 30 -H "Authorization: Bearer $1" -H 'Content-Type: application/json' -d '{"prompt":[5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21],"max_tokens":40,"stream":true,"ignore_eos":true}' \
      "http://127.0.0.1:$PORT/v1/completions" >/dev/null 2>&1 || true
  done
}
LOADERS=()
for k in key-alice key-alice key-bob key-bob key-bob; do load_loop $k & LOADERS+=($!); done
stop_load() { rm -f "$T/load.on"; for p in "${LOADERS[@]}"; do kill "$p" 2>/dev/null || true; done; wait "${LOADERS[@]}" 2>/dev/null || true; }

curl -s -H "Authorization: Bearer key-op" "http://127.0.0.1:$PORT/metrics" >"$T/metrics.txt"
promtool check metrics <"$T/metrics.txt" >"$T/lint.txt" 2>&1 || true
# promtool lints naming conventions too; only parse errors fail here
grep -qi "error while linting\|text format parsing error" "$T/lint.txt" && fail "promtool check metrics: $(cat "$T/lint.txt")"
grep -q 'le="0.1"' "$T/metrics.txt" || fail 'no le="0.1" bucket'
grep -Eq 'le="[0-9.]*[0-9]{9,}"' "$T/metrics.txt" && fail "long le labels: $(grep -Eo 'le="[^"]*"' "$T/metrics.txt" | sort -u | head)"
grep -Eq '^folio_build_info\{model_name="[^"]+",version="[0-9.]+",revision="[^"]+"' "$T/metrics.txt" || fail "folio_build_info"
for m in process_resident_memory_bytes process_open_fds process_max_fds process_start_time_seconds; do
  v=$(awk -v m="$m" '$1 == m {print $2}' "$T/metrics.txt")
  [ -n "$v" ] && awk -v v="$v" 'BEGIN {exit !(v > 0)}' || fail "$m missing or zero: '$v'"
done
grep -q '^process_cpu_seconds_total [0-9]' "$T/metrics.txt" || fail "no process_cpu_seconds_total"
rss=$(awk '$1 == "process_resident_memory_bytes" {print $2}' "$T/metrics.txt")
rss_ps=$(($(ps -o rss= -p "$DPID") * 1024))
awk -v a="$rss" -v b="$rss_ps" 'BEGIN {exit !(a > b / 2 && a < b * 2)}' || fail "RSS $rss vs ps $rss_ps"
# The load opens and closes connections all the time, so the gauge is held
# against /proc counted just before and just after its own scrape, and a
# miss is tried again: a wrong gauge misses every time.
fds_ok=
for _ in 1 2 3 4 5; do
  fds_a=$(ls /proc/"$DPID"/fd | wc -l)
  fds=$(curl -s -H "Authorization: Bearer key-op" "http://127.0.0.1:$PORT/metrics" | awk '$1 == "process_open_fds" {print $2}')
  fds_b=$(ls /proc/"$DPID"/fd | wc -l)
  lo=$((fds_a < fds_b ? fds_a : fds_b)) hi=$((fds_a > fds_b ? fds_a : fds_b))
  if [ -n "$fds" ] && [ "$fds" -ge $((lo - 3)) ] && [ "$fds" -le $((hi + 3)) ]; then fds_ok=1; break; fi
  sleep 0.2
done
[ -n "$fds_ok" ] || fail "open fds $fds vs /proc $fds_a..$fds_b (5 tries)"
ok "/metrics: parses, exact le labels, folio_build_info, process series"

# --- 3. a real Prometheus -------------------------------------------------------------
PPORT=$(free_port)
cp "$DIST/prometheus/foliod-rules.yml" "$T/"
cat >"$T/prometheus.yml" <<EOF2
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [foliod-rules.yml]
scrape_configs:
  - job_name: foliod
    authorization:
      credentials: key-op
    static_configs:
      - targets: ['127.0.0.1:$PORT']
EOF2
/usr/bin/prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
  --web.listen-address="127.0.0.1:$PPORT" --log.level=warn >"$T/prom.log" 2>&1 &
PPID_=$!
trap 'stop_load; kill $PPID_ 2>/dev/null || true; cleanup' EXIT
PQ="http://127.0.0.1:$PPORT/api/v1"
# 12 scrapes: rate() windows of 10 s have several samples
for _ in $(seq 1 300); do
  n=$(curl -s "$PQ/query" --data-urlencode 'query=count_over_time(up{job="foliod"}[1m])' | jq -r '.data.result[0].value[1] // 0' 2>/dev/null || echo 0)
  [ "${n:-0}" -ge 12 ] && break
  sleep 0.1
done
[ "${n:-0}" -ge 12 ] || fail "prometheus did not scrape foliod: $(tail -5 "$T/prom.log")"
up=$(curl -s "$PQ/query" --data-urlencode 'query=up{job="foliod"}' | jq -r '.data.result[0].value[1]')
[ "$up" = 1 ] || fail "up = $up"

jq -r '.panels[].targets[].expr, (.templating.list[] | select(.type=="query") | .definition)' \
  "$DIST/grafana/foliod-dashboard.json" >"$T/exprs.txt"
total=0
while IFS= read -r e; do
  [ -n "$e" ] || continue
  total=$((total + 1))
  # Grafana's expansion: "All" -> the allValue .*, $__rate_interval -> 4x the scrape interval (min)
  q=$(sed -e 's/\$model/.*/g; s/\$instance/.*/g; s/\$__rate_interval/10s/g' <<<"$e")
  if [[ $q == label_values\(* ]]; then # a variable query: its metric must have the label
    inner=$(sed -E 's/^label_values\((.*), *([a-z_]+)\)$/\1/' <<<"$q")
    lab=$(sed -E 's/^label_values\((.*), *([a-z_]+)\)$/\2/' <<<"$q")
    r=$(curl -s "$PQ/query" --data-urlencode "query=count by ($lab) ($inner)")
    [ "$(jq -r ".data.result | map(select(.metric.$lab != null)) | length" <<<"$r")" -ge 1 ] ||
      fail "variable query '$e': no value of $lab: $r"
    continue
  fi
  r=$(curl -s "$PQ/query" --data-urlencode "query=$q")
  [ "$(jq -r .status <<<"$r")" = success ] || fail "query error for '$e': $r"
  [ "$(jq -r '.data.result | length' <<<"$r")" -ge 1 ] || fail "no data for '$e'"
  jq -e '[.data.result[].value[1] | select(. != "NaN" and . != "+Inf" and . != "-Inf")] | length >= 1' <<<"$r" >/dev/null ||
    fail "only NaN/Inf for '$e': $r"
done <"$T/exprs.txt"
ok "Prometheus scraping foliod: all $total Grafana expressions return data (finite values)"

r=$(curl -s "$PQ/rules")
[ "$(jq -r '[.data.groups[].rules[] | select(.health == "ok")] | length' <<<"$r")" = \
  "$(grep -c '^ *- alert:' "$DIST/prometheus/foliod-rules.yml")" ] || fail "rule health: $r"
ok "the alert rules load and evaluate in Prometheus against foliod's series"
stop_load
stop_daemon || fail "daemon exit"
