#!/usr/bin/env bash
# Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens)
# on the real foliod (embedded default model, ChatML), checked against the
# chat completion each body means:
#   - a message (system, text blocks) answers what /v1/chat/completions
#     answers for the same conversation, greedy: the same text, its tokens
#     as output_tokens, the prompt's as input_tokens (= count_tokens);
#   - streamed: message_start, content_block_start, ping, the deltas (the
#     same text), content_block_stop, message_delta, message_stop;
#   - stop_sequences end it with stop_reason stop_sequence and the sequence;
#     a final assistant message is continued (prefill) as
#     continue_final_message continues it;
#   - refusals in Anthropic's error shape; x-api-key works as a bearer key;
#   - tools: a forced call is a tool_use block equal to the chat's tool
#     call, streamed as its block; tool_use / tool_result blocks sent back
#     answer as the chat's tool_calls and tool message;
#   - the @anthropic-ai/sdk client (npm) creates and streams messages.
. "$SRCDIR/lib.sh"

start_daemon "$FOLIOD" --kv-blocks 1024 --max-seqs 16
msg() { req POST /v1/messages "$1"; }
conv='"system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"Hello"},{"type":"text","text":" there"}]}]'
cmsgs='[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello there"}]'
r=$(msg "{\"model\":\"folio-tiny-default\",\"max_tokens\":24,\"temperature\":0,$conv}")
[ "$(status_of "$r")" = 200 ] || fail "message: $r"
m=$(body_of "$r")
c=$(body_of "$(req POST /v1/chat/completions "{\"messages\":$cmsgs,\"max_tokens\":24,\"temperature\":0}")")
jq -e --argjson c "$c" '(.id | startswith("msg-")) and .type == "message" and .role == "assistant" and
  .model == "folio-tiny-default" and (.content | length) == 1 and .content[0].type == "text" and
  .content[0].text == $c.choices[0].message.content and
  .usage.input_tokens == $c.usage.prompt_tokens and .usage.output_tokens == $c.usage.completion_tokens and
  .stop_reason == (if $c.choices[0].finish_reason == "length" then "max_tokens" else "end_turn" end) and
  .stop_sequence == null' <<<"$m" >/dev/null || fail "message vs chat: $m / $c"
n=$(body_of "$(req POST /v1/messages/count_tokens "{\"model\":\"folio-tiny-default\",$conv}")" | jq '.input_tokens')
[ "$n" = "$(jq '.usage.input_tokens' <<<"$m")" ] || fail "count_tokens $n"
ok "a message = the chat completion of the same conversation ($(jq -c '[.stop_reason, .usage]' <<<"$m")); count_tokens $n"

s=$(curl -sN --unix-socket "$SOCK" -H 'Content-Type: application/json' \
  --data-binary "{\"max_tokens\":24,\"temperature\":0,\"stream\":true,$conv}" http://x/v1/messages)
types=$(grep '^event: ' <<<"$s" | cut -c8- | uniq | paste -sd, -)
[[ "$types" =~ ^message_start,content_block_start,ping,(content_block_delta,)?content_block_stop,message_delta,message_stop$ ]] ||
  fail "stream events: $types"
text=$(grep '^data: ' <<<"$s" | cut -c7- | jq -rj 'select(.type == "content_block_delta") | .delta.text')
[ "$text" = "$(jq -rj '.content[0].text' <<<"$m")" ] || fail "streamed text '$text'"
grep '^data: ' <<<"$s" | cut -c7- | jq -se --argjson m "$m" '
  (map(select(.type == "message_delta"))[0] | .delta.stop_reason == $m.stop_reason and
   .usage.output_tokens == $m.usage.output_tokens) and
  (map(select(.type == "message_start"))[0].message.usage.input_tokens == $m.usage.input_tokens)' \
  >/dev/null || fail "stream's message_start / message_delta"
ok "streamed: the events in order, the same text and stop_reason"

full=$(jq -r '.content[0].text' <<<"$m")
[ "${#full}" -ge 8 ] || fail "the greedy answer is too short to cut: '$full'"
stop=${full:4:3}
cut=${full%%"$stop"*}
r=$(msg "$(jq -cn --arg s "$stop" --argjson c "{$conv}" '$c + {max_tokens: 24, temperature: 0, stop_sequences: [$s]}')")
body_of "$r" | jq -e --arg s "$stop" --arg t "$cut" '.stop_reason == "stop_sequence" and
  .stop_sequence == $s and .content[0].text == $t' >/dev/null || fail "stop_sequences [$stop]: $r"
pre=$(msg '{"max_tokens":6,"temperature":0,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Well, the"}]}')
cpre=$(req POST /v1/chat/completions '{"max_tokens":6,"temperature":0,"continue_final_message":true,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Well, the"}]}')
[ "$(body_of "$pre" | jq -r '.content[0].text')" = "$(body_of "$cpre" | jq -r '.choices[0].message.content')" ] ||
  fail "prefill: $pre / $cpre"
ok "stop_sequences [\"$stop\"]: stop_sequence, the text before it; a final assistant message continued"

bad() { # STATUS TYPE BODY: an error in Anthropic's shape
  local r
  r=$(msg "$3")
  [ "$(status_of "$r")" = "$1" ] && body_of "$r" | jq -e --arg t "$2" '.type == "error" and
    .error.type == $t and (.error.message | length) > 0' >/dev/null || fail "$3: want $1 $2, got $r"
}
bad 400 invalid_request_error '{"messages":[{"role":"user","content":"a"}]}'
bad 400 invalid_request_error '{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}'
bad 400 invalid_request_error '{"max_tokens":5,"tools":[{"type":"bash_20250124","name":"bash"}],"messages":[{"role":"user","content":"a"}]}'
bad 400 invalid_request_error '{"max_tokens":5,"tools":[{"name":"f"}],"messages":[{"role":"user","content":"a"}]}'
bad 400 invalid_request_error '{"max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}]}'
bad 400 invalid_request_error 'not json'
bad 404 not_found_error '{"model":"other","max_tokens":5,"messages":[{"role":"user","content":"a"}]}'
ok "refusals: 400 invalid_request_error, 404 not_found_error, in Anthropic's shape"

# tools: a forced call is a tool_use block (the chat's tool call: the same
# name, its arguments as input), stop_reason tool_use; streamed as its
# block (input_json_delta); the call and its tool_result sent back answer
# as the chat completion with the assistant's tool_calls and a tool message
schema='{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}'
atools="[{\"name\":\"get_weather\",\"description\":\"weather\",\"input_schema\":$schema}]"
ctools="[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"weather\",\"parameters\":$schema}}]"
q='[{"role":"user","content":"Weather in Paris?"}]'
tm=$(body_of "$(msg "{\"max_tokens\":64,\"temperature\":0,\"messages\":$q,\"tools\":$atools,\"tool_choice\":{\"type\":\"any\"}}")")
tc=$(body_of "$(req POST /v1/chat/completions "{\"max_tokens\":64,\"temperature\":0,\"messages\":$q,\"tools\":$ctools,\"tool_choice\":\"required\"}")")
jq -e --argjson c "$tc" '.stop_reason == "tool_use" and (.content | length) == 1 and
  .content[0].type == "tool_use" and (.content[0].id | startswith("toolu_")) and
  .content[0].name == $c.choices[0].message.tool_calls[0].function.name and
  .content[0].input == ($c.choices[0].message.tool_calls[0].function.arguments | fromjson) and
  .usage.output_tokens == $c.usage.completion_tokens' <<<"$tm" >/dev/null || fail "tool_use: $tm / $tc"
s=$(curl -sN --unix-socket "$SOCK" -H 'Content-Type: application/json' --data-binary \
  "{\"max_tokens\":64,\"temperature\":0,\"stream\":true,\"messages\":$q,\"tools\":$atools,\"tool_choice\":{\"type\":\"tool\",\"name\":\"get_weather\"}}" \
  http://x/v1/messages)
types=$(grep '^event: ' <<<"$s" | cut -c8- | paste -sd, -)
[ "$types" = message_start,ping,content_block_start,content_block_delta,content_block_stop,message_delta,message_stop ] ||
  fail "tool_use stream events: $types"
grep '^data: ' <<<"$s" | cut -c7- | jq -se --argjson m "$tm" '
  (map(select(.type == "content_block_start"))[0].content_block | .type == "tool_use" and
   .name == "get_weather" and .input == {}) and
  (map(select(.type == "content_block_delta"))[0].delta | .type == "input_json_delta" and
   (.partial_json | fromjson) == $m.content[0].input) and
  map(select(.type == "message_delta"))[0].delta.stop_reason == "tool_use"' >/dev/null ||
  fail "tool_use stream: $s"
args=$(jq -c '.content[0].input' <<<"$tm")
back=$(msg "{\"max_tokens\":8,\"temperature\":0,\"tools\":$atools,\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Checking.\"},{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":$args}]},{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":[{\"type\":\"text\",\"text\":\"sunny\"}]}]}]}")
cback=$(req POST /v1/chat/completions "$(jq -cn --argjson t "$ctools" --arg a "$args" '{max_tokens: 8, temperature: 0, tools: $t,
  messages: [{role: "user", content: "Weather in Paris?"}, {role: "assistant", content: "Checking.",
  tool_calls: [{id: "toolu_1", type: "function", function: {name: "get_weather", arguments: $a}}]},
  {role: "tool", tool_call_id: "toolu_1", content: "sunny"}]}')")
[ "$(body_of "$back" | jq -c '[.content[0].text, .usage.input_tokens]')" = \
  "$(body_of "$cback" | jq -c '[.choices[0].message.content, .usage.prompt_tokens]')" ] ||
  fail "tool_result round trip: $back / $cback"
ok "tools: tool_use = the chat's call (stop_reason tool_use), streamed as its block; tool_result = the chat's tool message"
stop_daemon || fail "exit status"

# TCP with a key: x-api-key as Anthropic's clients send it
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_daemon "$FOLIOD" --kv-blocks 256 --listen "127.0.0.1:$port" --operator-key sk-test-op
code=$(curl -s -o "$T/o.json" -w '%{http_code}' -H 'x-api-key: sk-test-op' -H 'Content-Type: application/json' \
  -d '{"max_tokens":4,"messages":[{"role":"user","content":"a"}]}' "http://127.0.0.1:$port/v1/messages")
[ "$code" = 200 ] || fail "x-api-key: $code $(cat "$T/o.json")"
code=$(curl -s -o "$T/o.json" -w '%{http_code}' -H 'x-api-key: wrong' -H 'Content-Type: application/json' \
  -d '{"max_tokens":4,"messages":[{"role":"user","content":"a"}]}' "http://127.0.0.1:$port/v1/messages")
[ "$code" = 401 ] && jq -e '.type == "error" and .error.type == "authentication_error"' "$T/o.json" >/dev/null ||
  fail "a wrong x-api-key: $code $(cat "$T/o.json")"
ok "x-api-key: the operator's key 200, a wrong one 401 authentication_error"

# the official client
if ensure_anthropic; then
  cp "$SRCDIR/anthropic_client.mjs" "$NMA/"
  node "$NMA/anthropic_client.mjs" "http://127.0.0.1:$port" sk-test-op || fail "the @anthropic-ai/sdk client"
  ok "@anthropic-ai/sdk: messages.create, messages.stream (same text), countTokens, NotFoundError, a tool round trip"
else
  echo "SKIP: @anthropic-ai/sdk (npm)"
fi
stop_daemon || fail "exit status"
