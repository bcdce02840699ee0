# bench/peer/serve_ab.sh — sourced by embed_ab.sh and rerank_ab.sh: one
# server at a time on loopback, the same requests to each.  Needs tmp,
# build, model, server (llama-server's path), threads, N and CONC set.
#   start_folio ARGS...  foliod on port_f with the model and these options
#   start_llama ARGS...  llama-server on port_l likewise (then LLAMA_ARGS)
#   stop                 stops the one running
#   load PORT PATH [DIR] seconds for POSTing $tmp/DIR/1..N.json (DIR:
#                        req) to PATH, CONC at a time (curl under xargs
#                        -P); every request must answer 200.  Warm up with
#                        other requests than the measured ones (DIR warm):
#                        the same ones again would find their prompts in
#                        the prefix cache and measure that instead
#   med X...             the median
#   rounds PATH          ROUNDS alternated rounds of start_f, a warm-up,
#                        load PORT PATH, stop, then start_l likewise (the
#                        caller defines start_f and start_l); prints each
#                        round and sets mf, ml: the two medians
port_f=18471 port_l=18472
start_folio() {
  "$build/daemon/foliod" --model "$model" --socket "$tmp/f.sock" --listen "127.0.0.1:$port_f" \
    --insecure-listen --threads "$threads" --access-log off "$@" >"$tmp/foliod.log" 2>&1 &
  pid=$!
  wait_up "$port_f"
}
start_llama() {
  # shellcheck disable=SC2086 # LLAMA_ARGS: words
  LD_LIBRARY_PATH=$(dirname "$server") "$server" -m "$model" --host 127.0.0.1 --port "$port_l" \
    -t "$threads" "$@" ${LLAMA_ARGS:-} >"$tmp/llama.log" 2>&1 &
  pid=$!
  wait_up "$port_l"
}
wait_up() {
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { echo "server exited: $(tail -5 "$tmp"/*.log)"; exit 1; }
    sleep 0.1
  done
  echo "server did not come up"
  exit 1
}
stop() { kill "$pid" && wait "$pid" 2>/dev/null || true; }
load() {
  local t0 t1 dir=${3:-req}
  t0=$(date +%s.%N)
  seq 1 "$N" | xargs -P "$CONC" -I{} curl -sf -o /dev/null "http://127.0.0.1:$1$2" \
    -H 'Content-Type: application/json' -d @"$tmp/$dir/{}.json" ||
    { echo "a request to $2 failed" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
rounds() {
  local fs=() ls=() r
  for r in $(seq 1 "$ROUNDS"); do
    start_f
    load $port_f "$1" warm >/dev/null
    fs+=("$(load $port_f "$1")")
    stop
    start_l
    load $port_l "$1" warm >/dev/null
    ls+=("$(load $port_l "$1")")
    stop
    echo "round $r: foliod ${fs[-1]} s, llama-server ${ls[-1]} s"
  done
  mf=$(med "${fs[@]}") ml=$(med "${ls[@]}")
}
