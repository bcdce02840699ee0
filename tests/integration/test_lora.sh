#!/usr/bin/env bash
# LoRA adapters on the real foliod (`--lora NAME=PATH,...`), with a model
# and two adapters foliod generates (`folio gen-model`, `folio gen-lora`:
# one of every matrix, F32, rank 8; one of Q, V and down, F16, rank 4):
#   - /v1/models lists the model and each adapter (its "parent" the model);
#     GET /v1/models/NAME finds an adapter;
#   - requests naming the model and each adapter, sent together so their
#     tokens share batches (--batch-invariant, so each row's logits are
#     those of its sequence alone; folio eval --batch-invariant runs the
#     same kernels), each give folio eval's greedy continuation through
#     that adapter (--lora), and echo the
#     "model" they named; chat and /v1/messages too;
#   - the prefix cache is each adapter's own: a prompt cached through the
#     model is computed again (0 cached) through an adapter, and found
#     cached (> 0) the second time through that adapter;
#   - an unknown "model" is a 404 naming it; /metrics counts each
#     adapter's requests (folio_lora_requests_total) and lists them
#     (folio_lora_info);
#   - a tenant's `loras` key limits the adapters it may name: the others
#     are, to it, models that do not exist (404, not listed);
#   - foliod refuses to start on a missing adapter file, an adapter of
#     another model, a malformed --lora, a name given twice, the model's
#     own name or a tenant's `loras` naming an adapter --lora lacks, with
#     a message naming what is wrong.
. "$SRCDIR/lib.sh"

"$FOLIO" gen-model --preset tiny --seed 21 --vocab-size 8192 --dtype q8_0 -o "$T/m.gguf" >/dev/null
"$FOLIO" gen-lora --model "$T/m.gguf" --seed 1 --rank 8 -o "$T/a1.gguf"
"$FOLIO" gen-lora --model "$T/m.gguf" --seed 2 --rank 4 --alpha 0 --targets q,v,down \
  --dtype f16 -o "$T/a2.gguf"
start_daemon "$FOLIOD" --model "$T/m.gguf" --lora "one=$T/a1.gguf,two=$T/a2.gguf" \
  --kv-dtype f32 --kv-blocks 256 --block-size 16 --max-seqs 16 --max-batch-tokens 64 \
  --batch-invariant
grep -q "LoRA adapter 'one' (rank 8)" "$LOG" || fail "no startup line for adapter one"
base=folio-synth-tiny-s21

M=$(body_of "$(req GET /v1/models)")
jq -e --arg b "$base" '[.data[] | [.id, .parent, .lora_rank]] ==
  [[$b, null, null], ["one", $b, 8], ["two", $b, 4]]' <<<"$M" >/dev/null || fail "/v1/models: $M"
r=$(req GET /v1/models/two)
[ "$(status_of "$r")" = 200 ] && body_of "$r" | jq -e '.id == "two"' >/dev/null ||
  fail "GET /v1/models/two: $r"
ok "/v1/models lists the model and both adapters with their parent and rank"

# the same prompts through the model and each adapter, all at once
prompt() { jq -cn --argjson s "$1" '[range(40) | ((. * 7919 + $s * 104729) % 8000) + 10]'; }
want() { # PROMPT-SEED ADAPTER-FILE|"" : folio eval's greedy 12
  local l=()
  [ -n "$2" ] && l=(--lora "$2")
  "$FOLIO" eval --model "$T/m.gguf" --kv-dtype f32 --batch-invariant --json --top 1 --greedy 12 \
    "${l[@]}" \
    --tokens "$(prompt "$1" | jq -r 'join(",")')" | jq -c '.greedy'
}
declare -A file=([$base]="" [one]="$T/a1.gguf" [two]="$T/a2.gguf")
pids=()
for s in 1 2; do
  for m in "$base" one two; do
    curl -s --unix-socket "$SOCK" http://x/v1/completions -o "$T/out-$s-$m.json" \
      -d "{\"model\":\"$m\",\"prompt\":$(prompt "$s"),\"max_tokens\":12,\"temperature\":0,\"ignore_eos\":true}" &
    pids+=($!)
  done
done
wait "${pids[@]}"
for s in 1 2; do
  for m in "$base" one two; do
    got=$(jq -c '.choices[0].token_ids' "$T/out-$s-$m.json")
    w=$(want "$s" "${file[$m]}")
    [ "$got" = "$w" ] || fail "prompt $s through $m: $got, folio eval says $w"
    jq -e --arg m "$m" '.model == $m' "$T/out-$s-$m.json" >/dev/null || fail "model not echoed: $m"
  done
done
[ "$(jq -c '.choices[0].token_ids' "$T/out-1-one.json")" != "$(jq -c '.choices[0].token_ids' "$T/out-1-$base.json")" ] ||
  fail "adapter one changes nothing"
ok "6 requests in shared batches: each = folio eval --lora of its adapter (or none); model echoed"

# chat and /v1/messages name the adapter too
c=$(body_of "$(req POST /v1/chat/completions '{"model":"two","messages":[{"role":"user","content":"hi"}],"max_tokens":3}')")
jq -e '.model == "two" and .usage.completion_tokens > 0' <<<"$c" >/dev/null || fail "chat: $c"
c=$(body_of "$(req POST /v1/messages '{"model":"one","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}')")
jq -e '.model == "one"' <<<"$c" >/dev/null || fail "messages: $c"
ok "chat completions and /v1/messages answer through the adapter they name"

# the prefix cache: the model's blocks are not an adapter's
cached() { # MODEL SEED: cached prompt tokens of one greedy request
  body_of "$(req POST /v1/completions "{\"model\":\"$1\",\"prompt\":$(prompt "$2"),\"max_tokens\":1,\"temperature\":0}")" |
    jq '.usage.prompt_tokens_details.cached_tokens'
}
c0=$(cached "$base" 3); c1=$(cached "$base" 3); c2=$(cached one 3); c3=$(cached one 3); c4=$(cached two 3)
[ "$c0" = 0 ] && [ "$c1" -gt 0 ] && [ "$c2" = 0 ] && [ "$c3" -gt 0 ] && [ "$c4" = 0 ] ||
  fail "cached tokens: model $c0 then $c1, one $c2 then $c3, two $c4"
ok "prefix cache per adapter: model 0 then $c1 cached; one 0 then $c3; two 0"

r=$(req POST /v1/completions '{"model":"three","prompt":[5,6],"max_tokens":1}')
[ "$(status_of "$r")" = 404 ] && body_of "$r" | jq -e '.error.param == "model" and
  (.error.message | contains("three"))' >/dev/null || fail "unknown model: $r"
curl -s --unix-socket "$SOCK" http://x/metrics >"$T/metrics.txt"
n1=$(awk '/^folio_lora_requests_total\{.*lora_name="one"/ {print $2}' "$T/metrics.txt")
n2=$(awk '/^folio_lora_requests_total\{.*lora_name="two"/ {print $2}' "$T/metrics.txt")
[ "$n1" = 5 ] && [ "$n2" = 4 ] || fail "folio_lora_requests_total: one $n1 (want 5), two $n2 (want 4)"
grep -q '^folio_lora_info{.*lora_name="two",rank="4"} 1' "$T/metrics.txt" || fail "folio_lora_info"
if command -v promtool >/dev/null; then promtool check metrics <"$T/metrics.txt" || fail promtool; fi
ok "unknown model 404; /metrics: one 5 requests, two 4; folio_lora_info"
stop_daemon || fail "drain exit"

# tenants' `loras`: alice may name adapter one only, bob none; to them
# the others do not exist (a 404 as for an unknown model, and not listed)
port=$(( 20000 + RANDOM % 20000 ))
cat >"$T/t.ini" <<INI
[foliod]
operator-key = k-op
[tenant.alice]
api_key = k-a
loras = one
[tenant.bob]
api_key = k-b
loras = none
INI
start_daemon "$FOLIOD" --model "$T/m.gguf" --lora "one=$T/a1.gguf,two=$T/a2.gguf" \
  --kv-blocks 128 --config "$T/t.ini" --listen "127.0.0.1:$port"
treq() { # KEY PATH [BODY]: "STATUS\nBODY" over TCP
  curl -s -H "Authorization: Bearer $1" -H 'Content-Type: application/json' -w '\n%{http_code}' ${3:+-d "$3"} "http://127.0.0.1:$port$2"
}
listed() { body_of "$(treq "$1" /v1/models)" | jq -c '[.data[].id]'; }
[ "$(listed k-a)" = "[\"$base\",\"one\"]" ] && [ "$(listed k-b)" = "[\"$base\"]" ] &&
  [ "$(listed k-op)" = "[\"$base\",\"one\",\"two\"]" ] ||
  fail "listed: alice $(listed k-a), bob $(listed k-b), operator $(listed k-op)"
for kv in k-a:one:200 k-a:two:404 k-b:one:404 k-b:$base:200; do
  IFS=: read -r k m want <<<"$kv"
  r=$(treq "$k" /v1/completions "{\"model\":\"$m\",\"prompt\":[5,6,7],\"max_tokens\":2}")
  [ "$(status_of "$r")" = "$want" ] || fail "key $k, model $m: want $want, got $r"
  [ "$want" = 200 ] || body_of "$r" | jq -e '.error.code == "model_not_found"' >/dev/null ||
    fail "key $k, model $m: $r"
  r=$(treq "$k" "/v1/models/$m")
  [ "$(status_of "$r")" = "$want" ] || fail "key $k, GET /v1/models/$m: want $want, got $r"
done
stop_daemon || fail "drain exit"
ok "tenants' loras: alice sees and runs one only, bob none (404s as unknown models); the operator lists all"

# refusals at start, each naming what is wrong
"$FOLIO" gen-model --preset tiny --seed 1 --vocab-size 8192 --arch qwen3 --dtype q8_0 \
  -o "$T/q3.gguf" >/dev/null
"$FOLIO" gen-lora --model "$T/q3.gguf" --seed 1 --rank 4 -o "$T/q3-lora.gguf"
refuse() { # WANT ARGS...
  local want=$1 out rc=0
  shift
  out=$(timeout 60 "$FOLIOD" --socket "$T/r.sock" --model "$T/m.gguf" --kv-blocks 64 "$@" 2>&1) || rc=$?
  [ "$rc" != 0 ] && grep -qF -- "$want" <<<"$out" || fail "foliod $* (rc $rc): want '$want' in: $out"
}
refuse "$T/none.gguf" --lora "x=$T/none.gguf"
refuse "an adapter for 'qwen3', but the model is 'llama'" --lora "x=$T/q3-lora.gguf"
refuse "'oops' is not NAME=PATH" --lora oops
refuse "the name 'x' is given twice" --lora "x=$T/a1.gguf,x=$T/a2.gguf"
refuse "'none' cannot name an adapter" --lora "none=$T/a1.gguf"
refuse "the name '$base' is the model's own" --lora "$base=$T/a1.gguf"
printf '[tenant.carol]\nuid = 12345\nloras = one,three\n' >"$T/bad.ini"
refuse "tenant 'carol': loras names 'three', which --lora does not define" \
  --lora "one=$T/a1.gguf" --config "$T/bad.ini"
ok "refused at start: a missing file, another model's adapter, NAME=PATH, a name twice, the model's name, a tenant's unknown adapter"
