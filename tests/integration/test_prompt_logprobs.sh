#!/usr/bin/env bash
# Prompt log-probabilities on the real foliod (embedded default model):
#   - a greedy continuation G of prompt P, then P ++ G sent as the prompt
#     with echo + logprobs: G's prompt logprobs equal the ones sampled
#     (1e-3: prefill rows against decode rows) and each is the top-1;
#   - vLLM's prompt_logprobs on the same prompt: the same values, G's ranks
#     1, the token itself first then the top-N, the first token null;
#   - a 400-token prompt (scored in 4 steps of 128 tokens) twice: the
#     second takes nothing from the prefix cache and gives the same values;
#   - six such prompts at once beside two generations that hold most of
#     a small pool (preemption): each equals its value alone (1e-3);
#   - n = 2 choices share one prompt's logprobs; stream is refused (400).
. "$SRCDIR/lib.sh"

start_daemon "$FOLIOD" --kv-blocks 1024 --max-seqs 16 --max-batch-tokens 128
P=$(ids 16 1)
r=$(req POST /v1/completions "{\"prompt\":$P,\"max_tokens\":12,\"temperature\":0,\"ignore_eos\":true,\"logprobs\":1}")
[ "$(status_of "$r")" = 200 ] || fail "greedy: $r"
G=$(body_of "$r" | jq -c '.choices[0].token_ids')
L=$(body_of "$r" | jq -c '.choices[0].logprobs.token_logprobs')
PG=$(jq -cn --argjson a "$P" --argjson b "$G" '$a + $b')

r=$(req POST /v1/completions "{\"prompt\":$PG,\"max_tokens\":1,\"temperature\":0,\"echo\":true,\"logprobs\":1}")
[ "$(status_of "$r")" = 200 ] || fail "echo: $r"
lp=$(body_of "$r" | jq -c '.choices[0].logprobs')
jq -e '.token_logprobs | length == 29' <<<"$lp" >/dev/null || fail "echo: 28 prompt + 1 tokens: $lp"
jq -e '.token_logprobs[0] == null and .top_logprobs[0] == null and
       ([.token_logprobs[1:28][] | . != null and . < 0] | all)' <<<"$lp" >/dev/null ||
  fail "echo: the first prompt token null, every other scored: $lp"
close "$(jq -c '.token_logprobs[16:28]' <<<"$lp")" "$L" 1e-3 ||
  fail "echo: G's prompt logprobs $(jq -c '.token_logprobs[16:28]' <<<"$lp") != sampled $L"
jq -e '[range(16; 28) as $i | (.top_logprobs[$i] | to_entries | length == 1 and
        (.[0].value - $lp.token_logprobs[$i] | fabs) < 1e-6)] | all' --argjson lp "$lp" <<<"$lp" \
  >/dev/null || fail "echo: each greedy token is the top-1 of its row"
ok "echo + logprobs: the prompt ++ its greedy continuation scores as sampled, each top-1"

r=$(req POST /v1/completions "{\"prompt\":$PG,\"max_tokens\":1,\"temperature\":0,\"prompt_logprobs\":3}")
[ "$(status_of "$r")" = 200 ] || fail "prompt_logprobs: $r"
pl=$(body_of "$r" | jq -c '.choices[0].prompt_logprobs')
jq -e --argjson p "$PG" 'length == 28 and .[0] == null and ([range(1; 28) as $i | .[$i] |
      (keys_unsorted[0] == ($p[$i] | tostring)) and (length >= 3 and length <= 4) and
      ([.[] | .rank >= 1 and (.decoded_token | type) == "string"] | all)] | all)' <<<"$pl" \
  >/dev/null || fail "prompt_logprobs shape: $pl"
jq -e --argjson p "$PG" '[range(16; 28) as $i | .[$i][$p[$i] | tostring].rank == 1] | all' \
  <<<"$pl" >/dev/null || fail "prompt_logprobs: G's ranks are not 1: $pl"
v=$(jq -c --argjson p "$PG" '[null] + [range(1; 28) as $i | .[$i][$p[$i] | tostring].logprob]' <<<"$pl")
close "$v" "$(jq -c '.token_logprobs[0:28]' <<<"$lp")" 1e-5 || fail "prompt_logprobs != echo's: $v"
ok "prompt_logprobs: the token first with its rank, then the top-3; equal to echo's"

Q=$(ids 400 2)
body="{\"prompt\":$Q,\"max_tokens\":1,\"temperature\":0,\"prompt_logprobs\":0}"
r=$(req POST /v1/completions "$body")
[ "$(status_of "$r")" = 200 ] || fail "long: $r"
one=$(body_of "$r" | jq -c --argjson p "$Q" '.choices[0].prompt_logprobs as $l |
      [null] + [range(1; 400) as $i | $l[$i][$p[$i] | tostring].logprob]')
jq -e '.[1:] | map(. != null) | all' <<<"$one" >/dev/null || fail "long: a position unscored"
r=$(req POST /v1/completions "$body")
two=$(body_of "$r" | jq -c --argjson p "$Q" '.choices[0].prompt_logprobs as $l |
      [null] + [range(1; 400) as $i | $l[$i][$p[$i] | tostring].logprob]')
body_of "$r" | jq -e '.usage.prompt_tokens_details.cached_tokens == 0' >/dev/null ||
  fail "the second scoring took a cached prefix: $(body_of "$r" | jq -c .usage)"
close "$one" "$two" 1e-5 || fail "the same 400-token prompt scored twice differs"
r=$(req POST /v1/completions "{\"prompt\":$Q,\"max_tokens\":1,\"temperature\":0}")
body_of "$r" | jq -e '.usage.prompt_tokens_details.cached_tokens > 300' >/dev/null ||
  fail "a plain request did not find the scored prompt's blocks cached"
ok "a 400-token prompt: every position scored, the same twice, no cached prefix taken"

r=$(req POST /v1/completions "{\"prompt\":$P,\"max_tokens\":3,\"n\":2,\"temperature\":1,\"prompt_logprobs\":1}")
body_of "$r" | jq -e '.choices | length == 2 and .[0].prompt_logprobs == .[1].prompt_logprobs and
  (.[0].prompt_logprobs | length == 16)' >/dev/null || fail "n = 2: $(body_of "$r")"
r=$(req POST /v1/completions "{\"prompt\":$P,\"stream\":true,\"prompt_logprobs\":1}")
[ "$(status_of "$r")" = 400 ] || fail "stream + prompt_logprobs: $r"
r=$(req POST /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"prompt_logprobs":0}')
body_of "$r" | jq -e '(.prompt_logprobs | length) == .usage.prompt_tokens and .prompt_logprobs[0] == null' \
  >/dev/null || fail "chat prompt_logprobs: $(body_of "$r")"
ok "n = 2 share the prompt's logprobs; chat's beside the choices; stream refused"
stop_daemon || fail "exit status"

# 6 x 400-token prompts and 2 x 360-token generations on 40 blocks of 16
start_daemon "$FOLIOD" --kv-blocks 40 --block-size 16 --max-seqs 8 --max-batch-tokens 256
for k in 0 1 2 3 4 5; do
  echo "{\"prompt\":$(ids 400 $((k + 10))),\"max_tokens\":2,\"temperature\":0,\"ignore_eos\":true,\"prompt_logprobs\":0}" >"$T/q$k.json"
done
pids=()
for k in 0 1; do # generations that hold most of the pool's pages
  curl -s --unix-socket "$SOCK" -d "{\"prompt\":$(ids 200 $((k + 20))),\"max_tokens\":160,\"temperature\":0,\"ignore_eos\":true}" \
    http://x/v1/completions >/dev/null &
  pids+=($!)
done
# the prompts come while both generations decode (they hold 26+ of the 40
# blocks and grow): came first, they could run before them, unpreempted
for _ in $(seq 1 400); do
  m=$(curl -s --unix-socket "$SOCK" http://x/metrics)
  awk '/^folio_num_requests_running[ {]/ {r = $NF} /^folio_generation_tokens_total[ {]/ {g = $NF}
    END {exit !(r >= 2 && g >= 2)}' <<<"$m" && break
  sleep 0.02
done
for k in 0 1 2 3 4 5; do
  curl -s --unix-socket "$SOCK" -d "@$T/q$k.json" http://x/v1/completions >"$T/c$k.json" &
  pids+=($!)
done
wait "${pids[@]}"
pre=$(curl -s --unix-socket "$SOCK" http://x/metrics | awk '/^folio_num_preemptions_total/ {print $2}')
for k in 0 1 2 3 4 5; do
  q=$(ids 400 $((k + 10)))
  r=$(req POST /v1/completions "{\"prompt\":$q,\"max_tokens\":2,\"temperature\":0,\"ignore_eos\":true,\"prompt_logprobs\":0}")
  a=$(jq -c --argjson p "$q" '.choices[0].prompt_logprobs as $l | [range(1; 400) as $i | $l[$i][$p[$i] | tostring].logprob]' "$T/c$k.json")
  b=$(body_of "$r" | jq -c --argjson p "$q" '.choices[0].prompt_logprobs as $l | [range(1; 400) as $i | $l[$i][$p[$i] | tostring].logprob]')
  close "$a" "$b" 1e-3 || fail "prompt $k: concurrent (preempted) scores differ from alone"
done
[ "${pre%.*}" -gt 0 ] || fail "no preemption happened ($pre)"
stop_daemon || fail "exit status"
ok "6 prompts and 2 generations on a small pool ($pre preemptions): each scored as alone"
