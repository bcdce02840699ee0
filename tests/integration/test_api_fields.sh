#!/usr/bin/env bash
# What clients send beyond foliod's own fields (foliod on its default
# model for the field matrix, foliod_fake — the real scheduler and pager,
# a deterministic step function — for the rest):
#  - a matrix of 40 requests carrying fields from vLLM's and llama-server's
#    request types (and OpenAI's newer ones) that foliod does not know: all
#    succeed, the /metrics counter counts them; with --strict-api each is a
#    400 naming the field; known fields with values foliod cannot honour
#    are 400s either way;
#  - n = 4 on a 512-token prompt: one prefill (the pager's shared blocks
#    while the choices run; prefill tokens computed = 512 + 3, not 4 x 512),
#    usage.prompt_tokens = 512, cached_tokens from the prefix cache on a
#    repeat;
#  - stop_token_ids, min_tokens, max_completion_tokens on /v1/completions,
#    /v1/models/{id}, /detokenize's two spellings.
. "$(dirname "$0")/lib.sh"
: "${FOLIOD_FAKE:?}" "${FOLIOD:?}"

C='"prompt":[5,6,7],"max_tokens":4'
M='"messages":[{"role":"user","content":"hi"}],"max_tokens":4'
# endpoint|fields (each line carries at least one field foliod does not know)
MATRIX=$(cat <<EOM
c|"store":false
c|"metadata":{"k":"v"}
c|"service_tier":"auto"
c|"request_id":"abc-123"
c|"cache_salt":"s"
c|"truncate_prompt_tokens":null
c|"allowed_token_ids":null
c|"bad_words":[]
c|"logits_processors":null
c|"return_tokens_as_token_ids":false
c|"vllm_xargs":{}
c|"kv_transfer_params":null
c|"guided_decoding_backend":null,"use_beam_search":false
c|"skip_special_tokens":true,"add_special_tokens":true
c|"cache_prompt":true
c|"id_slot":-1
c|"n_keep":0
c|"samplers":["top_k","top_p","min_p","temperature"]
c|"n_probs":0,"post_sampling_probs":false
c|"dynatemp_range":0,"dynatemp_exponent":1
c|"tfs_z":1,"mirostat":0,"mirostat_tau":5,"mirostat_eta":0.1
c|"dry_multiplier":0,"dry_base":1.75,"dry_allowed_length":2
c|"xtc_probability":0,"xtc_threshold":0.1
c|"timings_per_token":false,"return_tokens":false
c|"t_max_predict_ms":0,"n_indent":0,"min_keep":0
c|"lora":[],"penalize_nl":false,"repeat_penalty":1.1,"repeat_last_n":64
c|"stream_options":null,"response_fields":["content"]
m|"store":true,"metadata":{"a":"b"}
m|"prompt_cache_retention":"in_memory"
m|"modalities":["text"],"audio":null
m|"prediction":null,"reasoning_effort":"low"
m|"chat_template_kwargs":{"enable_thinking":false}
m|"documents":null,"chat_template":null
m|"add_generation_prompt":true,"continue_final_message":false,"echo":false,"return_token_ids":false
m|"mm_processor_kwargs":null,"guided_whitespace_pattern":null
m|"structured_outputs":null,"include_reasoning":true
m|"web_search_options":null,"service_tier":"default"
m|"response_format":{"type":"text"},"verbosity":"medium"
m|"cache_prompt":true,"id_slot":0,"n_probs":0
m|"user":"u1","safety_identifier":"x","prompt_cache_key":"k"
EOM
)

start_daemon "$FOLIOD" --kv-mem 64M --threads 1
n=0
while IFS='|' read -r ep f; do
  if [ "$ep" = c ]; then path=/v1/completions; body="{$C,$f}"; else path=/v1/chat/completions; body="{$M,$f}"; fi
  r=$(req POST "$path" "$body")
  [ "$(status_of "$r")" = 200 ] || fail "foreign fields refused: $body -> $r"
  n=$((n + 1))
done <<<"$MATRIX"
[ "$n" = 40 ] || fail "matrix has $n requests"
grep -q 'ignored unknown field' "$LOG" || fail "no debug line names the ignored fields"
cnt=$(curl -s --unix-socket "$SOCK" http://x/metrics | awk '$1 ~ /^folio_request_unknown_fields_total($|\{)/ {print $NF}')
[ "${cnt%.*}" -ge 40 ] || fail "unknown-field counter $cnt"
ok "40 requests with vLLM / llama-server / OpenAI fields foliod does not know: all 200, counted ($cnt)"

# known fields with values foliod cannot honour: 400 naming them
for bad in '"use_beam_search":true' '"skip_special_tokens":false' '"mirostat":2' \
  '"response_format":{"type":"json_schema"}' '"best_of":3' '"min_p":1.5' '"min_tokens":9'; do
  r=$(req POST /v1/completions "{$C,$bad}")
  [ "$(status_of "$r")" = 400 ] || fail "unhonourable $bad accepted: $r"
  body_of "$r" | jq -e '.error.param != null' >/dev/null || fail "no param: $r"
done
ok "known fields with values foliod cannot honour: 400 naming the field"
stop_daemon

start_daemon "$FOLIOD_FAKE" --kv-blocks 512 --block-size 16

# n = 4 on a 512-token prompt: one prefill, pages shared, usage once
prompt=$(seq 0 511 | awk '{print $1 % 500 + 3}' | paste -sd, -)
pf() { curl -s --unix-socket "$SOCK" http://x/metrics | awk '$1 ~ /^folio_prefill_computed_tokens_total($|\{)/ {print $NF}'; }
p0=$(pf)
req POST /v1/completions "{\"prompt\":[$prompt],\"n\":4,\"max_tokens\":120,\"temperature\":1,\"seed\":3,\"ignore_eos\":true}" >"$T/n4" &
cpid=$!
shared=0
for _ in $(seq 1 200); do
  s=$(curl -s --unix-socket "$SOCK" http://x/metrics | awk '$1 ~ /^folio_kv_blocks_shared($|\{)/ {print $NF}')
  [ "${s%.*}" -gt "$shared" ] && shared=${s%.*}
  kill -0 "$cpid" 2>/dev/null || break
  sleep 0.02
done
wait "$cpid"
r=$(cat "$T/n4")
[ "$(status_of "$r")" = 200 ] || fail "n=4: $r"
body_of "$r" | jq -e '.usage.prompt_tokens == 512 and .usage.completion_tokens == 480 and (.choices | length) == 4
  and ([.choices[].token_ids] | unique | length) == 4' >/dev/null || fail "n=4 usage/choices: $(body_of "$r" | jq -c .usage)"
p1=$(pf)
d=$(( ${p1%.*} - ${p0%.*} ))
[ "$d" -eq 515 ] || fail "n=4 computed $d prompt tokens (want 511 once + the last token per choice = 515)"
[ "$shared" -ge 31 ] || fail "n=4: at most $shared blocks shared (512 tokens = 32 blocks, 31 full ones shared)"
ok "n=4, 512-token prompt: $d prompt tokens computed (not 2048), $shared KV blocks shared, usage.prompt_tokens 512"
# the same prompt again: the prefix cache answers, and usage says so
r=$(req POST /v1/completions "{\"prompt\":[$prompt],\"n\":2,\"max_tokens\":2}")
body_of "$r" | jq -e '.usage.prompt_tokens == 512 and .usage.prompt_tokens_details.cached_tokens >= 496' >/dev/null \
  || fail "cached_tokens: $(body_of "$r" | jq -c .usage)"
ok "repeat: usage.prompt_tokens_details.cached_tokens = $(body_of "$r" | jq .usage.prompt_tokens_details.cached_tokens)"

# stop_token_ids, min_tokens, max_completion_tokens on completions
b='"prompt":[9,9,9],"temperature":0,"ignore_eos":true'
ids=$(body_of "$(req POST /v1/completions "{$b,\"max_completion_tokens\":12}")" | jq -c '.choices[0].token_ids')
[ "$(jq length <<<"$ids")" = 12 ] || fail "max_completion_tokens on /v1/completions: $ids"
stop=$(jq '.[5]' <<<"$ids")
first=$(jq "index($stop)" <<<"$ids")
r=$(body_of "$(req POST /v1/completions "{$b,\"max_tokens\":12,\"stop_token_ids\":[$stop]}")")
jq -e --argjson k "$first" '.choices[0].finish_reason == "stop" and (.choices[0].token_ids | length) == $k + 1' <<<"$r" >/dev/null \
  || fail "stop_token_ids [$stop] in $ids: $r"
t0=$(jq '.[0]' <<<"$ids")
r=$(body_of "$(req POST /v1/completions "{$b,\"max_tokens\":12,\"stop_token_ids\":[$t0],\"min_tokens\":3}")")
jq -e '(.choices[0].token_ids | length) >= 3' <<<"$r" >/dev/null || fail "min_tokens 3: $r"
ok "stop_token_ids end a choice with stop (token counted, no text); min_tokens holds them off; max_completion_tokens on completions"

# /v1/models/{id}
r=$(req GET /v1/models/fake-tiny)
[ "$(status_of "$r")" = 200 ] && body_of "$r" | jq -e '.id == "fake-tiny" and .object == "model"' >/dev/null || fail "models/{id}: $r"
r=$(req GET /v1/models/other%2Fmodel)
[ "$(status_of "$r")" = 404 ] || fail "models/{unknown}: $r"
r=$(body_of "$(req POST /detokenize '{"tokens":[300,301],"add_special_tokens":false}')")
jq -e '.prompt == .content and (.content | length) > 0' <<<"$r" >/dev/null || fail "detokenize: $r"
ok "/v1/models/{id} (404 for another id); /detokenize answers both spellings"
stop_daemon

# --strict-api: every request of the matrix is refused, naming its field
start_daemon "$FOLIOD" --kv-mem 64M --threads 1 --strict-api
n=0
while IFS='|' read -r ep f; do
  if [ "$ep" = c ]; then path=/v1/completions; body="{$C,$f}"; else path=/v1/chat/completions; body="{$M,$f}"; fi
  r=$(req POST "$path" "$body")
  [ "$(status_of "$r")" = 400 ] || fail "--strict-api accepted $body -> $r"
  body_of "$r" | jq -e '.error.message | test("unknown field")' >/dev/null || fail "strict message: $r"
  n=$((n + 1))
done <<<"$MATRIX"
r=$(req POST /v1/completions "{$C}")
[ "$(status_of "$r")" = 200 ] || fail "--strict-api refused a plain request: $r"
r=$(req POST /tokenize '{"prompt":"x","with_pieces":true}')
[ "$(status_of "$r")" = 400 ] || fail "--strict-api /tokenize: $r"
stop_daemon
ok "--strict-api: the $n requests are 400s naming their unknown fields; plain requests pass"
