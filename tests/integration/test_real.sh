#!/usr/bin/env bash
# The same server scenarios against the real foliod (scheduler + model on
# the embedded default model): endpoints, promtool, stream == non-stream,
# 64 concurrent streams, 200 mid-stream disconnects then no used block,
# a small pool forcing preemption (each stream identical to it alone; q8
# KV pages too, batch-invariant),
# sampled draws on the thread pool (each identical alone and among 16),
# SIGTERM under load, 50+ hostile requests beside a good stream, two
# tenants by API key (429), the openai SDK.  Skips (77) while foliod is built
# without its engine.
. "$SRCDIR/lib.sh"
C="node $SRCDIR/client.mjs"
out=$("$FOLIOD" --socket "$SOCK" --kv-blocks 64 2>&1 & p=$!; sleep 1; kill $p 2>/dev/null; wait $p 2>/dev/null) || true
if grep -q "not built in yet" <<<"$out"; then echo "SKIP: foliod has no engine yet"; exit 77; fi

start_daemon "$FOLIOD" --kv-blocks 2048 --max-seqs 64 --max-batch-tokens 512 --drain-timeout-ms 600000
r=$(req GET /v1/models); [ "$(status_of "$r")" = 200 ] || fail "/v1/models"
model=$(body_of "$r" | jq -r '.data[0].id')
r=$(req POST /v1/completions "{\"model\":\"$model\",\"prompt\":[1,2,3,4,5],\"max_tokens\":7,\"temperature\":0,\"ignore_eos\":true}")
[ "$(status_of "$r")" = 200 ] || fail "completion: $r"
body_of "$r" | jq -e '.usage.completion_tokens == 7 and .choices[0].finish_reason == "length"' >/dev/null || fail "completion shape"
body='{"prompt":[9,8,7,6],"max_tokens":24,"temperature":0.8,"seed":1234,"ignore_eos":true}'
ns=$(curl -s --unix-socket "$SOCK" -d "$body" http://x/v1/completions)
st=$(curl -sN --unix-socket "$SOCK" -d "${body%\}},\"stream\":true}" http://x/v1/completions)
a=$(jq -c '.choices[0].token_ids' <<<"$ns")
b=$(grep '^data: {' <<<"$st" | sed 's/^data: //' | jq -sc '[.[] | .choices[] | .token_ids[]]')
[ "$a" = "$b" ] || fail "stream tokens differ from non-stream: $a vs $b"
curl -s --unix-socket "$SOCK" http://x/metrics >"$T/metrics.txt"
if command -v promtool >/dev/null; then promtool check metrics <"$T/metrics.txt" || fail promtool; fi
if grep -q "tokenizer loaded" "$LOG"; then
  r=$(req POST /v1/completions '{"prompt":"Once upon a time","max_tokens":6,"temperature":0,"ignore_eos":true}')
  [ "$(status_of "$r")" = 200 ] || fail "text prompt: $r"
  body_of "$r" | jq -e '.usage.prompt_tokens > 1 and (.choices[0].text|length) > 0' >/dev/null || fail "text prompt shape"
  a=$("$FOLIO" complete --socket "$SOCK" --max-tokens 8 --temperature 0 "hello world")
  b=$("$FOLIO" complete --socket "$SOCK" --max-tokens 8 --temperature 0 --stream "hello world")
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "folio complete text: '$a' vs '$b'"
  ids=$(curl -s --unix-socket "$SOCK" -d '{"prompt":"hello world, once upon a time"}' http://x/tokenize | jq -c '.tokens')
  txt=$(curl -s --unix-socket "$SOCK" -d "{\"tokens\":$ids}" http://x/detokenize | jq -r '.prompt')
  grep -q "hello world, once upon a time" <<<"$txt" || fail "tokenize/detokenize round trip: '$txt' ($ids)"
  ok "real engine: text prompts (tokenizer), folio complete text == --stream, /tokenize + /detokenize round trip"
fi
ok "real engine: models, completion, stream == non-stream, promtool"
$C concurrent "$SOCK" 64 || fail concurrent
$C hostile "$SOCK" $(grep -q "tokenizer loaded" "$LOG" && echo tokenizer) || fail hostile
$C disconnect "$SOCK" 200 || fail disconnect
$C drainload "$SOCK" 16 >"$T/load.out" 2>&1 &
LPID=$!
for _ in $(seq 1 400); do grep -q STARTED "$T/load.out" && break; sleep 0.05; done
kill -TERM "$DPID"
wait "$LPID" || fail "drain load: $(cat "$T/load.out")"
rc=0; wait "$DPID" || rc=$?; DPID=
[ $rc = 0 ] || fail "exit $rc after SIGTERM"
[ -e "$SOCK" ] && fail "socket left"
ok "real engine: SIGTERM under load"

# 16 streams of 60 tokens want 64 blocks of 16 at their peak; 32 hold half.
start_daemon "$FOLIOD" --kv-blocks 32 --block-size 16 --max-seqs 32 --max-batch-tokens 256
# Greedy: a sampled stream (temperature > 0) may flip on a near-tie when
# the forward pass is not bit-identical across batch compositions.
$C preempt "$SOCK" 16 0 || fail preempt
stop_daemon || fail "exit status"

# q8 KV pages under preemption: a preempted sequence's K/V is quantized
# again as it is recomputed, and with --batch-invariant the products give
# the bits they gave before, so nothing is lost or changed, sampled draws
# included.  (Without it a recomputed K can land one int8 step away, and
# greedy streams flip on near-ties: margins of 0.0003-0.0035 seen.)
start_daemon "$FOLIOD" --kv-blocks 32 --block-size 16 --max-seqs 32 --max-batch-tokens 256 \
  --kv-dtype q8 --batch-invariant
$C preempt "$SOCK" 16 0.7 || fail "preempt, q8 KV"
stop_daemon || fail "exit status"

# Sampled draws run on the model's thread pool, rows dealt out over the
# threads, each with its own workspace: with batch-invariant logits a
# sampled request (top-p, top-k with logprobs, plain temperature) gives
# the same tokens alone as among 15 others drawn in the same steps.
start_daemon "$FOLIOD" --kv-blocks 1024 --max-seqs 32 --threads 2 --batch-invariant
draw_req() { # SEED: one sampled completion's token ids and top logprobs
  case $(( $1 % 3 )) in
    0) extra='"temperature":0.8,"top_p":0.9' ;;
    1) extra='"temperature":0.8,"top_k":40,"logprobs":3' ;;
    *) extra='"temperature":1.3' ;;
  esac
  curl -s --unix-socket "$SOCK" -d "{\"prompt\":[$(( $1 % 7 + 2 )),5,9,4],\"max_tokens\":16,\"seed\":$1,\"ignore_eos\":true,$extra}" \
    http://x/v1/completions | jq -c '[.choices[0].token_ids, .choices[0].logprobs.top_logprobs]'
}
for s in 11 12 13; do draw_req $s >"$T/alone-$s.txt"; done
pids=()
for s in $(seq 11 26); do draw_req $s >"$T/many-$s.txt" & pids+=($!); done
wait "${pids[@]}"
for s in 11 12 13; do
  grep -q '^\[\[[0-9]' "$T/alone-$s.txt" || fail "sampled request $s: $(cat "$T/alone-$s.txt")"
  cmp -s "$T/alone-$s.txt" "$T/many-$s.txt" ||
    fail "sampled request $s differs among 16: $(cat "$T/alone-$s.txt") vs $(cat "$T/many-$s.txt")"
done
stop_daemon || fail "exit status"
ok "real engine: sampled draws on the thread pool (top-p, top-k + logprobs, T) equal alone and among 16"

# The warm-up's forward steps (one sequence, then max_seqs of them) write
# K/V into free blocks that requests later own: nothing may read those
# values, so the same requests give the same bits without it.  In a pool
# of 40 blocks a first request's blocks are taken from the middle, 20 on
# (PAGER_ALLOC_LOCAL), inside the 32 the warm-up wrote.
for w in warm cold; do
  start_daemon "$FOLIOD" --kv-blocks 40 --max-seqs 32 --threads 2 --batch-invariant \
    $([ $w = cold ] && echo --no-warmup)
  for s in 11 12 13; do draw_req $s >"$T/$w-$s.txt"; done
  stop_daemon || fail "exit status"
done
for s in 11 12 13; do
  grep -q '^\[\[[0-9]' "$T/warm-$s.txt" || fail "request $s: $(cat "$T/warm-$s.txt")"
  cmp -s "$T/warm-$s.txt" "$T/cold-$s.txt" ||
    fail "request $s differs without the warm-up: $(cat "$T/warm-$s.txt") vs $(cat "$T/cold-$s.txt")"
done
ok "real engine: the same draws with --no-warmup as after the warm-up"

# The pool is resident from start-up; with --kv-lazy its pages are
# committed as blocks are first written (none after the warm-up, which
# gives its pages back); /v1/kv and /metrics say how many bytes; a pool
# larger than the machine's available memory is refused at start-up,
# naming it
start_daemon "$FOLIOD" --kv-mem 64M --kv-lazy
r=$(req GET /v1/kv); total=$(body_of "$r" | jq '.num_blocks * .bytes_per_block')
body_of "$r" | jq -e '.resident_bytes == 0' >/dev/null || fail "resident after start: $(body_of "$r" | jq -c .resident_bytes)"
r=$(req POST /v1/completions '{"prompt":[1,2,3,4,5],"max_tokens":20,"temperature":0,"ignore_eos":true}')
[ "$(status_of "$r")" = 200 ] || fail "completion: $r"
r=$(req GET /v1/kv)
body_of "$r" | jq -e --argjson t "$total" '.resident_bytes > 0 and .resident_bytes <= $t' >/dev/null ||
  fail "resident after a request: $(body_of "$r" | jq -c .resident_bytes) of $total"
res=$(curl -s --unix-socket "$SOCK" http://x/metrics | awk '/^folio_kv_resident_bytes[ {]/ {print $NF}')
[ "${res%.*}" -gt 0 ] 2>/dev/null || fail "folio_kv_resident_bytes: '$res'"
stop_daemon || fail "exit status"
start_daemon "$FOLIOD" --kv-mem 64M
r=$(req GET /v1/kv)
body_of "$r" | jq -e --argjson t "$total" '.resident_bytes >= $t' >/dev/null ||
  fail "resident without --kv-lazy: $(body_of "$r" | jq -c .resident_bytes) of $total"
stop_daemon || fail "exit status"
avail=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
out=$("$FOLIOD" --socket "$SOCK" --kv-mem $((avail / 1024 + 1024))M 2>&1) && fail "a pool over MemAvailable started"
grep -q "exceeds the memory available" <<<"$out" || fail "pool over MemAvailable: $out"
ok "real engine: the KV pool resident from start-up, with --kv-lazy committed as written (none after start), /v1/kv + /metrics; a pool over MemAvailable refused"

# KV dtypes: the same --kv-mem holds 2x (f16, bf16) / (4 hd)/(hd + 4)x (q8)
# the blocks of f32; /v1/kv and /metrics name the dtype and bytes per
# token; greedy completions run with every dtype
declare -A nb
for dt in f32 f16 bf16 q8; do
  start_daemon "$FOLIOD" --kv-mem 16M --kv-dtype $dt
  r=$(req GET /v1/kv); [ "$(status_of "$r")" = 200 ] || fail "/v1/kv $dt"
  body_of "$r" | jq -e --arg dt $dt '.dtype == $dt and .bytes_per_token * .block_size == .bytes_per_block' >/dev/null ||
    fail "/v1/kv dtype fields $dt: $(body_of "$r" | jq -c '{dtype,bytes_per_token,bytes_per_block,block_size}')"
  nb[$dt]=$(body_of "$r" | jq '.num_blocks')
  bpt=$(body_of "$r" | jq '.bytes_per_token')
  curl -s --unix-socket "$SOCK" http://x/metrics >"$T/metrics.txt"
  grep -Eqx "folio_kv_bytes_per_token(\{[^}]*\})? $bpt" "$T/metrics.txt" || fail "folio_kv_bytes_per_token $dt"
  grep -Eq "folio_kv_dtype_info\{([^}]*,)?dtype=\"$dt\"\} 1" "$T/metrics.txt" || fail "folio_kv_dtype_info $dt"
  if command -v promtool >/dev/null; then promtool check metrics <"$T/metrics.txt" || fail "promtool $dt"; fi
  r=$(req POST /v1/completions '{"prompt":[1,2,3,4,5],"max_tokens":20,"temperature":0,"ignore_eos":true}')
  body_of "$r" | jq -e '.usage.completion_tokens == 20' >/dev/null || fail "completion with $dt KV: $r"
  stop_daemon || fail "exit status"
done
[ $(( nb[f16] )) -ge $(( 2 * nb[f32] - 1 )) ] && [ $(( nb[bf16] )) = $(( nb[f16] )) ] &&
  [ $(( nb[q8] * 10 )) -ge $(( nb[f32] * 35 )) ] || fail "blocks per 16M: f32 ${nb[f32]} f16 ${nb[f16]} bf16 ${nb[bf16]} q8 ${nb[q8]}"
ok "real engine: --kv-dtype f32/f16/bf16/q8 (blocks in 16M: ${nb[f32]} / ${nb[f16]} / ${nb[bf16]} / ${nb[q8]}), /v1/kv and /metrics fields"

# --kv-dtype auto (the default): the embedded model is F32, so f32; a BF16
# file's cache is bf16, a Q8_0 file's f16
start_daemon "$FOLIOD" --kv-mem 16M
r=$(req GET /v1/kv); body_of "$r" | jq -e '.dtype == "f32"' >/dev/null || fail "auto KV dtype of the embedded model: $(body_of "$r" | jq -c .dtype)"
stop_daemon || fail "exit status"
for pair in bf16:bf16 q8_0:f16; do
  wt=${pair%%:*} want=${pair##*:}
  "$FOLIO" gen-model --preset tiny --seed 3 --dtype $wt -o "$T/auto-$wt.gguf" >/dev/null || fail "gen-model $wt"
  start_daemon "$FOLIOD" --model "$T/auto-$wt.gguf" --kv-mem 16M
  r=$(req GET /v1/kv)
  body_of "$r" | jq -e --arg dt $want '.dtype == $dt' >/dev/null || fail "auto KV dtype of a $wt file: $(body_of "$r" | jq -c .dtype), want $want"
  r=$(req POST /v1/completions '{"prompt":[1,2,3],"max_tokens":5,"temperature":0,"ignore_eos":true}')
  body_of "$r" | jq -e '.usage.completion_tokens == 5' >/dev/null || fail "completion, $wt file: $r"
  stop_daemon || fail "exit status"
done
ok "real engine: --kv-dtype auto is f32 for the embedded model, bf16 for a BF16 file, f16 for a Q8_0 file"

# two tenants by API key on TCP: metrics separated, 429 over max_waiting
port=$(( 20000 + RANDOM % 20000 ))
printf '[foliod]\nkv-blocks = 1024\n[tenant.a]\napi_key = key-a\n[tenant.b]\napi_key = key-b\nmax_running = 1\nmax_waiting = 2\n' >"$T/tenants.ini"
start_daemon "$FOLIOD" --config "$T/tenants.ini" --listen "127.0.0.1:$port"
$C tenants "$SOCK" 127.0.0.1 "$port" || fail tenants
stop_daemon || fail "exit status"

if ensure_openai; then
  start_daemon "$FOLIOD" --kv-blocks 256
  cp "$SRCDIR/openai_client.mjs" "$NM/"
  node "$NM/openai_client.mjs" "$SOCK" || fail "openai client"
  stop_daemon || fail "exit status"
else
  echo "# openai SDK part skipped"
fi
