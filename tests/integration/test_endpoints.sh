#!/usr/bin/env bash
# Every endpoint over the Unix socket with curl: status codes, JSON shapes,
# socket mode 0660, metrics pass `promtool check metrics`, streaming and
# non-streaming give the same tokens for the same seed, stale socket
# replaced, live daemon not replaced, long socket paths refused, config
# validation names the option.
. "$SRCDIR/lib.sh"
command -v promtool >/dev/null || {
  echo "promtool missing: installing prometheus" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1 || true
}

# --- config validation at start ------------------------------------------
out=$("$FOLIOD_FAKE" --socket "$SOCK" --block-size 0 2>&1) && fail "bad --block-size accepted"
grep -q -- "--block-size" <<<"$out" || fail "message does not name --block-size: $out"
out=$("$FOLIOD_FAKE" --socket "$SOCK" --kv-mem 12Q 2>&1) && fail "bad --kv-mem accepted"
grep -q -- "--kv-mem" <<<"$out" || fail "message does not name --kv-mem: $out"
long=$T/$(printf 'a%.0s' $(seq 1 120)).sock
out=$("$FOLIOD_FAKE" --socket "$long" 2>&1) && fail "long socket path accepted"
grep -q "107" <<<"$out" || fail "long path message: $out"
printf '[foliod]\nmax-seqs = 7\n[tenant.alice]\nuid = 4242\nweight = 3\n' >"$T/c.ini"
out=$("$FOLIOD_FAKE" --config "$T/c.ini" --socket "$SOCK" --dump-config)
grep -q "max-seqs = 7" <<<"$out" || fail "dump lacks max-seqs from file"
grep -q "\[tenant.alice\]" <<<"$out" || fail "dump lacks tenant"
printf '[tenant.bob]\nweight = 0\n' >"$T/bad.ini"
out=$("$FOLIOD_FAKE" --config "$T/bad.ini" --socket "$SOCK" 2>&1) && fail "bad tenant weight accepted"
grep -q "weight" <<<"$out" || fail "message does not name weight: $out"
grep -q -- "--kv-blocks" <<<"$("$FOLIOD_FAKE" --help)" || fail "--help lacks --kv-blocks"
ok "config validation"

# --- stale socket is replaced ---------------------------------------------
python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$SOCK"
[ -S "$SOCK" ] || fail "could not make a stale socket"
start_daemon "$FOLIOD_FAKE" --kv-blocks 256
grep -q "stale" "$LOG" || fail "stale socket not reported"
mode=$(stat -c %a "$SOCK")
[ "$mode" = 660 ] || fail "socket mode $mode, want 660"
ok "stale socket replaced, mode 0660"

# --- a second daemon refuses to take a live socket --------------------------
out=$("$FOLIOD_FAKE" --socket "$SOCK" 2>&1) && fail "second daemon started"
grep -q "another daemon" <<<"$out" || fail "second daemon message: $out"
curl -sf --unix-socket "$SOCK" http://x/health >/dev/null || fail "first daemon hurt"
ok "live socket kept"

# --- endpoints ---------------------------------------------------------------
r=$(req GET /health); [ "$(status_of "$r")" = 200 ] || fail "/health $r"
r=$(req GET /v1/models); [ "$(status_of "$r")" = 200 ] || fail "/v1/models"
model=$(body_of "$r" | jq -r '.data[0].id'); [ "$model" = fake-tiny ] || fail "model id $model"
r=$(req GET /v1/kv); [ "$(status_of "$r")" = 200 ] || fail "/v1/kv"
body_of "$r" | jq -e '.num_blocks == 256 and (.block_map.states|length) == 256 and .blocks.free == 256' >/dev/null || fail "/v1/kv shape"
r=$(req GET /version); [ "$(status_of "$r")" = 200 ] || fail "/version"
body_of "$r" | jq -e '(.version | test("^[0-9]+[.][0-9]+[.][0-9]+")) and (.git_revision | length > 0) and .model == "fake-tiny"' >/dev/null ||
  fail "/version: $(body_of "$r")"
r=$(req POST /v1/completions '{"model":"fake-tiny","prompt":[1,2,3,4,5],"max_tokens":7,"temperature":0}')
[ "$(status_of "$r")" = 200 ] || fail "completion: $r"
b=$(body_of "$r")
jq -e '.object == "text_completion" and .choices[0].finish_reason == "length" and .usage.prompt_tokens == 5 and .usage.completion_tokens == 7 and .usage.total_tokens == 12 and (.choices[0].token_ids|length) == 7' <<<"$b" >/dev/null || fail "completion shape: $b"
ok "health, models, kv, version, completion"

# streaming vs non-streaming: same seed, same tokens and same text
body='{"prompt":[9,8,7,6],"max_tokens":40,"temperature":0.8,"seed":1234,"n":2}'
ns=$(curl -s --unix-socket "$SOCK" -d "$body" http://x/v1/completions)
st=$(curl -sN --unix-socket "$SOCK" -d "${body%\}},\"stream\":true,\"stream_options\":{\"include_usage\":true}}" http://x/v1/completions)
tail -n2 <<<"$st" | grep -q '^data: \[DONE\]' || fail "stream does not end with [DONE]"
for i in 0 1; do
  a=$(jq -c ".choices[$i].token_ids" <<<"$ns")
  b=$(grep '^data: {' <<<"$st" | sed 's/^data: //' | jq -sc "[.[] | .choices[] | select(.index == $i) | .token_ids[]]")
  [ "$a" = "$b" ] || fail "choice $i tokens differ: $a vs $b"
  ta=$(jq -j ".choices[$i].text" <<<"$ns" | od -An -tx1)
  tb=$(grep '^data: {' <<<"$st" | sed 's/^data: //' | jq -j ".choices[] | select(.index == $i) | .text" | od -An -tx1)
  [ "$ta" = "$tb" ] || fail "choice $i text differs"
done
grep '^data: {' <<<"$st" | tail -n1 | sed 's/^data: //' | jq -e '.usage.completion_tokens == 80 and (.choices|length) == 0' >/dev/null || fail "usage chunk"
ok "stream == non-stream (tokens and text, n=2), include_usage"

# stop strings: text ends before the stop string, finish_reason stop
full=$(curl -s --unix-socket "$SOCK" -d '{"prompt":[5,5,5],"max_tokens":60,"temperature":0}' http://x/v1/completions)
word=$(jq -r '.choices[0].text' <<<"$full" | grep -o ' w[0-9][0-9][0-9]' | sed -n 3p)
if [ -n "$word" ]; then
  for s in false true; do
    r=$(curl -sN --unix-socket "$SOCK" -d "{\"prompt\":[5,5,5],\"max_tokens\":60,\"temperature\":0,\"stop\":[\"$word\"],\"stream\":$s}" http://x/v1/completions)
    if [ $s = false ]; then txt=$(jq -r '.choices[0].text' <<<"$r"); fr=$(jq -r '.choices[0].finish_reason' <<<"$r")
    else txt=$(grep '^data: {' <<<"$r" | sed 's/^data: //' | jq -j '.choices[0].text'); fr=$(grep '^data: {' <<<"$r" | sed 's/^data: //' | jq -r '.choices[0].finish_reason' | grep -v null | tail -n1); fi
    [ "$fr" = stop ] || fail "stop ($s): finish_reason $fr"
    grep -qF -- "$word" <<<"$txt" && fail "stop ($s): text contains the stop string"
    want=$(jq -r '.choices[0].text' <<<"$full"); want=${want%%"$word"*}
    [ "$txt" = "$want" ] || fail "stop ($s): text is not the prefix before the stop string"
  done
  ok "stop strings (stream and not)"
fi

# forced EOS -> finish_reason stop; ignore_eos keeps going
r=$(curl -s --unix-socket "$SOCK" -d '{"prompt":[1],"max_tokens":5,"logit_bias":{"2":100}}' http://x/v1/completions)
jq -e '.choices[0].finish_reason == "stop" and .usage.completion_tokens == 1' <<<"$r" >/dev/null || fail "eos: $r"
r=$(curl -s --unix-socket "$SOCK" -d '{"prompt":[1],"max_tokens":5,"logit_bias":{"2":100},"ignore_eos":true}' http://x/v1/completions)
jq -e '.choices[0].finish_reason == "length" and .usage.completion_tokens == 5' <<<"$r" >/dev/null || fail "ignore_eos: $r"
ok "eos and ignore_eos"

# text prompt refused clearly until the tokenizer lands
r=$(req POST /v1/completions '{"prompt":"hello"}')
[ "$(status_of "$r")" = 400 ] || fail "text prompt status $(status_of "$r")"
body_of "$r" | jq -e '.error.param == "prompt" and (.error.message|test("token ids"))' >/dev/null || fail "text prompt msg"
# errors
[ "$(status_of "$(req GET /nope)")" = 404 ] || fail 404
r=$(req GET /v1/completions); [ "$(status_of "$r")" = 405 ] || fail 405
r=$(req POST /v1/completions '{"prompt":[1],"max_tokens":-1}'); [ "$(status_of "$r")" = 400 ] || fail "neg max_tokens"
body_of "$r" | jq -e '.error.param == "max_tokens" and .error.type == "invalid_request_error"' >/dev/null || fail "error object"
r=$(req POST /v1/completions '{"prompt":[1],"max_tokens":5000}'); [ "$(status_of "$r")" = 400 ] || fail "ctx"
ok "errors: 400 / 404 / 405"

# /detokenize: token bytes through the UTF-8 sanitiser; /tokenize needs a tokenizer
r=$(req POST /detokenize '{"tokens":[65,66,300,195,169,255]}')
[ "$(status_of "$r")" = 200 ] || fail "/detokenize $r"
[ "$(body_of "$r" | jq -r .prompt)" = "AB w044é�" ] || fail "/detokenize text: $r"
r=$(req POST /tokenize '{"prompt":"hi"}'); [ "$(status_of "$r")" = 400 ] || fail "/tokenize without tokenizer"
r=$(req POST /detokenize '{"tokens":"x"}'); [ "$(status_of "$r")" = 400 ] || fail "/detokenize bad"
ok "/tokenize, /detokenize"

# metrics: promtool lint, expected names
curl -s --unix-socket "$SOCK" http://x/metrics >"$T/metrics.txt"
if command -v promtool >/dev/null; then
  promtool check metrics <"$T/metrics.txt" || fail "promtool check metrics"
  ok "promtool check metrics"
else
  echo "# SKIP promtool unavailable"
fi
for m in folio_kv_num_blocks folio_kv_blocks_used folio_kv_blocks_free folio_kv_blocks_cached \
  folio_kv_cache_usage_ratio folio_kv_tokens_held folio_kv_slots_empty folio_num_requests_running \
  folio_num_requests_waiting folio_num_requests_preempted folio_num_preemptions_total \
  folio_prefix_cache_queries_total folio_prefix_cache_hits_total folio_kv_evictions_total \
  folio_kv_cow_copies_total folio_kv_blocks_shared folio_recompute_tokens_total \
  folio_prompt_tokens_total folio_generation_tokens_total folio_time_to_first_token_seconds_bucket \
  folio_inter_token_latency_seconds_bucket folio_e2e_request_latency_seconds_bucket \
  folio_request_queue_time_seconds_bucket folio_step_duration_seconds_bucket folio_iteration_tokens_bucket \
  'tenant="default"'; do
  grep -qF "$m" "$T/metrics.txt" || fail "metric $m missing"
done
grep -Eq '^folio_tenant_generation_tokens_total\{model_name="[^"]+",tenant="default"\} ' "$T/metrics.txt" ||
  fail "tenant series without model_name and tenant labels"
ok "metric names"

# length histograms: a prompt counts once whatever n; each choice is a sequence
hval() { curl -s --unix-socket "$SOCK" http://x/metrics | awk -v m="$1" '$1 ~ "^"m"[{]" || $1 == m {print $NF}'; }
snap() { echo "$(hval folio_request_prompt_tokens_count) $(hval folio_request_prompt_tokens_sum) $(hval folio_request_generation_tokens_count)"; }
read -r pc0 ps0 gc0 <<<"$(snap)"
r=$(req POST /v1/completions '{"prompt":[3,4,5,6,7],"max_tokens":2,"n":3}'); [ "$(status_of "$r")" = 200 ] || fail "n=3: $r"
read -r pc1 ps1 gc1 <<<"$(snap)"
[ $((pc1 - pc0)) = 1 ] && [ "$(awk -v a="$ps1" -v b="$ps0" 'BEGIN{print a - b}')" = 5 ] && [ $((gc1 - gc0)) = 3 ] ||
  fail "n=3, 5-token prompt: prompt_tokens count +$((pc1 - pc0)) sum $ps0 -> $ps1 (want +1, +5); generation count +$((gc1 - gc0)) (want +3)"
r=$(req POST /v1/completions '{"prompt":[[3,4,5],[6,7,8,9]],"max_tokens":2,"n":2}'); [ "$(status_of "$r")" = 200 ] || fail "two prompts: $r"
read -r pc2 ps2 gc2 <<<"$(snap)"
[ $((pc2 - pc1)) = 2 ] && [ "$(awk -v a="$ps2" -v b="$ps1" 'BEGIN{print a - b}')" = 7 ] && [ $((gc2 - gc1)) = 4 ] ||
  fail "two prompts x n=2: prompt_tokens count +$((pc2 - pc1)) sum $ps1 -> $ps2 (want +2, +7); generation count +$((gc2 - gc1)) (want +4)"
ok "folio_request_prompt_tokens: each prompt once whatever n (n=3: +1; 2 prompts x n=2: +2); generation per choice"

# folio complete: non-stream and stream print the same text; errors exit 1
a=$("$FOLIO" complete --socket "$SOCK" --max-tokens 9 --temperature 0 --tokens 4,5,6 | od -An -tx1)
b=$("$FOLIO" complete --socket "$SOCK" --max-tokens 9 --temperature 0 --stream --tokens 4,5,6 | od -An -tx1)
want=$(curl -s --unix-socket "$SOCK" -d '{"prompt":[4,5,6],"max_tokens":9,"temperature":0}' http://x/v1/completions | jq -j '.choices[0].text' | od -An -tx1)
[ -n "$a" ] && [ "$a" = "$b" ] || fail "folio complete: stream and non-stream differ"
[ "$a" = "$want 0a" ] || [ "$(echo $a)" = "$(echo $want 0a)" ] || fail "folio complete text differs from the API's"
out=$("$FOLIO" complete --socket "$SOCK" "hello" 2>&1) && fail "text prompt: exit 0"
grep -q "token ids" <<<"$out" || fail "folio complete error message: $out"
ok "folio complete (text, --stream, errors)"

# --- SIGTERM drain: exit 0, socket removed ---------------------------------
stop_daemon || fail "exit status $? after SIGTERM"
[ -e "$SOCK" ] && fail "socket left behind"
ok "SIGTERM: exit 0, socket removed"
