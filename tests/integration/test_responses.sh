#!/usr/bin/env bash
# OpenAI's Responses API (POST /v1/responses, GET and DELETE
# /v1/responses/{id}) on the real foliod (embedded default model, ChatML),
# checked against the chat completion each body means:
#   - a response (instructions and a string input, or the same as items:
#     a developer message, input_text parts) answers what
#     /v1/chat/completions answers for the same conversation, greedy: the
#     same text, its usage; incomplete (max_output_tokens) when cut at the
#     limit, completed when a stop string ends it; the request's settings
#     repeated (instructions, max_output_tokens, tools, store, metadata..);
#   - streamed: response.created .. response.completed / incomplete, each
#     event's type its `event:`, sequence_number 0, 1, ..; the deltas are
#     the same text, the last event the same response;
#   - the store: GET answers what the create answered (a streamed one too),
#     input_items lists its own input (ids, order, limit / after pages),
#     DELETE deletes it (then 404 response_not_found), store:false is not
#     kept; previous_response_id continues the conversation (without its
#     instructions) as the chat of its messages does, twice over; unknown
#     ids 404 previous_response_not_found;
#   - function tools: tool_choice required / named gives a function_call
#     item (grammar-constrained: the chat's tool call), streamed as
#     output_item.added, function_call_arguments.delta/.done,
#     output_item.done; the output sent back (as items, or after
#     previous_response_id) answers as the chat with its tool message;
#   - text.format json_schema = the chat's response_format;
#   - background: answered at once (queued), then GET finds the response
#     the foreground request gives; POST /v1/responses/{id}/cancel ends a
#     running one (cancelled, idempotent; a foreground one 400); DELETE of
#     a running one cancels it and it stays gone; tenants apart;
#   - refusals: 400 in OpenAI's shape naming the Responses field;
#   - tenants (API keys over TCP): one tenant's responses are absent to
#     another (GET, DELETE, previous_response_id); --responses-store 0
#     keeps none ("store": false, GET 404);
#   - the openai npm SDK (responses_client.mjs): create (output_text),
#     stream, retrieve, delete, output items sent back, a tool round trip.
. "$SRCDIR/lib.sh"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$T/tenants.ini" <<INI
[tenant.a]
api_key = k-a
[tenant.b]
api_key = k-b
INI
# a second daemon that keeps no responses, starting beside the first
"$FOLIOD" --socket "$T/s0.sock" --kv-blocks 128 --responses-store 0 >"$T/s0.log" 2>&1 &
P0=$!
trap 'kill -KILL $P0 2>/dev/null || true; cleanup' EXIT
start_daemon "$FOLIOD" --kv-blocks 1024 --max-seqs 16 --config "$T/tenants.ini" --listen "127.0.0.1:$port"

resp() { req POST /v1/responses "$1"; }
chat() { # BODY: the chat completion (its body)
  local r
  r=$(req POST /v1/chat/completions "$1")
  [ "$(status_of "$r")" = 200 ] || fail "chat $1: $r"
  body_of "$r"
}
created() { # BODY: the response (its body), which must be a 200
  local r
  r=$(resp "$1")
  [ "$(status_of "$r")" = 200 ] || fail "$1: $r"
  body_of "$r"
}
sse() { curl -sN --unix-socket "$SOCK" -H 'Content-Type: application/json' --data-binary "$1" http://x/v1/responses; }
events() { grep '^data: ' <<<"$1" | cut -c7- | jq -sc .; }
event_types() { grep '^event: ' <<<"$1" | cut -c8- | paste -sd, -; }
tcp() { # KEY METHOD PATH [BODY]: "STATUS\nBODY" over TCP with KEY
  local a=(-s -X "$2" -H "Authorization: Bearer $1" -w '\n%{http_code}')
  [ -z "${4:-}" ] || a+=(-H 'Content-Type: application/json' --data-binary "$4")
  curl "${a[@]}" "http://127.0.0.1:$port$3"
}
not_found() { # RESPONSE CODE: a 404 in OpenAI's shape with that code
  [ "$(status_of "$1")" = 404 ] && body_of "$1" | jq -e --arg c "$2" '.error.code == $c and
    .error.type == "invalid_request_error" and (.error.message | length) > 0' >/dev/null
}

# --- a response = the chat completion of its conversation ---------------------
m=$(created '{"model":"folio-tiny-default","input":"Hello there","instructions":"Be brief.","max_output_tokens":16,"temperature":0}')
c=$(chat '{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello there"}],"max_tokens":16,"temperature":0}')
jq -e --argjson c "$c" '($c.choices[0].finish_reason == "length") as $cut |
  (if $cut then "incomplete" else "completed" end) as $st |
  (.id | test("^resp_[0-9a-z]+$")) and .object == "response" and (.created_at | type) == "number" and
  .model == "folio-tiny-default" and .status == $st and .error == null and .background == false and
  .incomplete_details == (if $cut then {reason: "max_output_tokens"} else null end) and
  (.output | length) == 1 and (.output[0].id | test("^msg_")) and .output[0].type == "message" and
  .output[0].role == "assistant" and .output[0].status == $st and
  .output[0].content == [{type: "output_text", text: $c.choices[0].message.content, annotations: [], logprobs: []}] and
  .usage.input_tokens == $c.usage.prompt_tokens and .usage.output_tokens == $c.usage.completion_tokens and
  .usage.total_tokens == $c.usage.total_tokens and
  .instructions == "Be brief." and .max_output_tokens == 16 and .temperature == 0 and .tools == [] and
  .tool_choice == "auto" and .store == true and .previous_response_id == null and
  .text == {format: {type: "text"}} and .metadata == {}' <<<"$m" >/dev/null || fail "response vs chat: $m / $c"
text=$(jq -r '.output[0].content[0].text' <<<"$m")
echo "$m" >"$T/m.json"
r=$(created '{"input":[{"role":"developer","content":"Be brief."},{"type":"message","role":"user","content":[{"type":"input_text","text":"Hello"},{"type":"input_text","text":" there"}]}],"max_output_tokens":16,"temperature":0}')
jq -e --argjson m "$m" '.output[0].content == $m.output[0].content and .usage.input_tokens == $m.usage.input_tokens and
  .instructions == null' <<<"$r" >/dev/null || fail "input as items: $r"
ok "a response = the chat completion of the same conversation ($(jq -c '[.status, .usage.input_tokens, .usage.output_tokens]' <<<"$m")), as a string or as items"

[ "${#text}" -ge 8 ] || fail "the greedy answer is too short to cut: '$text'"
stop=${text:4:3}
cut=${text%%"$stop"*}
r=$(created "$(jq -cn --arg s "$stop" '{input: "Hello there", instructions: "Be brief.", max_output_tokens: 16,
  temperature: 0, stop: [$s], metadata: {k: "v"}, user: "u1"}')")
jq -e --arg t "$cut" '.status == "completed" and .incomplete_details == null and .output[0].status == "completed" and
  .output[0].content[0].text == $t and .metadata == {k: "v"} and .user == "u1"' <<<"$r" >/dev/null ||
  fail "stop [$stop]: $r"
ok "stop [\"$stop\"] (vLLM's): completed, the text before it; metadata and user repeated"

# --- streamed -------------------------------------------------------------------
s=$(sse '{"input":"Hello there","instructions":"Be brief.","max_output_tokens":16,"temperature":0,"stream":true}')
types=$(event_types "$s")
e='response\.'
[[ "$types" =~ ^${e}created,${e}in_progress,${e}output_item\.added,${e}content_part\.added,(${e}output_text\.delta,)*${e}output_text\.done,${e}content_part\.done,${e}output_item\.done,${e}(completed|incomplete)$ ]] ||
  fail "stream events: $types"
ev=$(events "$s")
jq -e --argjson m "$m" --arg types "$types" --arg text "$text" '
  def plain: del(.id, .created_at, .output[].id, .usage.input_tokens_details);
  .[-1].response as $f |
  (map(.type) | join(",")) == $types and [.[].sequence_number] == [range(length)] and
  (.[0].response | .id == $f.id and .status == "in_progress" and .output == [] and .usage == null) and
  .[-1].type == "response." + $m.status and ($f | plain) == ($m | plain) and
  (map(select(.type == "response.output_text.delta") | .delta) | add // "") == $text and
  (map(select(.type == "response.output_text.done"))[0].text == $text) and
  (map(.item_id // .item.id // empty) | unique) == [$f.output[0].id]' <<<"$ev" >/dev/null ||
  fail "stream: $ev"
sid=$(jq -r '.[-1].response.id' <<<"$ev")
r=$(req GET "/v1/responses/$sid")
[ "$(status_of "$r")" = 200 ] && body_of "$r" | jq -e --argjson e "$ev" '. == $e[-1].response' >/dev/null ||
  fail "GET of a streamed response: $r"
ok "streamed: $(jq length <<<"$ev") events in order, sequence_number 0.., the same text and response; stored as sent"

# --- the store, previous_response_id -------------------------------------------
id=$(jq -r .id <<<"$m")
r=$(req GET "/v1/responses/$id")
[ "$(status_of "$r")" = 200 ] && body_of "$r" | jq -e --argjson m "$m" '. == $m' >/dev/null || fail "GET $id: $r"
r=$(req DELETE "/v1/responses/$id")
[ "$(status_of "$r")" = 200 ] && body_of "$r" | jq -e --arg id "$id" '. == {id: $id, object: "response", deleted: true}' \
  >/dev/null || fail "DELETE $id: $r"
not_found "$(req GET "/v1/responses/$id")" response_not_found || fail "GET after DELETE"
not_found "$(req DELETE "/v1/responses/$id")" response_not_found || fail "DELETE twice"
not_found "$(req GET /v1/responses/resp_0)" response_not_found || fail "GET of an unknown id"
not_found "$(resp "{\"input\":\"x\",\"previous_response_id\":\"$id\"}")" previous_response_not_found ||
  fail "a deleted previous_response_id"
r=$(created '{"input":"Hi","max_output_tokens":4,"store":false}')
jq -e '.store == false' <<<"$r" >/dev/null || fail "store false: $r"
nid=$(jq -r .id <<<"$r")
not_found "$(req GET "/v1/responses/$nid")" response_not_found || fail "a store:false response was kept"
not_found "$(resp "{\"input\":\"x\",\"previous_response_id\":\"$nid\"}")" previous_response_not_found ||
  fail "store:false as previous_response_id"

r1=$(created '{"input":"Hello","instructions":"Be brief.","max_output_tokens":8,"temperature":0}')
t1=$(jq -r '.output[0].content[0].text' <<<"$r1")
r2=$(created "{\"input\":\"And then?\",\"previous_response_id\":\"$(jq -r .id <<<"$r1")\",\"max_output_tokens\":8,\"temperature\":0}")
t2=$(jq -r '.output[0].content[0].text' <<<"$r2")
c2=$(chat "$(jq -cn --arg t "$t1" '{messages: [{role: "user", content: "Hello"}, {role: "assistant", content: $t},
  {role: "user", content: "And then?"}], max_tokens: 8, temperature: 0}')")
jq -e --argjson r1 "$r1" --argjson c "$c2" '.previous_response_id == $r1.id and .instructions == null and
  .usage.input_tokens > $r1.usage.input_tokens + $r1.usage.output_tokens and
  .output[0].content[0].text == $c.choices[0].message.content and .usage.input_tokens == $c.usage.prompt_tokens' \
  <<<"$r2" >/dev/null || fail "previous_response_id: $r2 / $c2"
r3=$(created "{\"input\":[{\"role\":\"user\",\"content\":\"Why?\"}],\"previous_response_id\":\"$(jq -r .id <<<"$r2")\",\"max_output_tokens\":8,\"temperature\":0}")
c3=$(chat "$(jq -cn --arg t "$t1" --arg u "$t2" '{messages: [{role: "user", content: "Hello"}, {role: "assistant", content: $t},
  {role: "user", content: "And then?"}, {role: "assistant", content: $u}, {role: "user", content: "Why?"}],
  max_tokens: 8, temperature: 0}')")
jq -e --argjson c "$c3" '.output[0].content[0].text == $c.choices[0].message.content and
  .usage.input_tokens == $c.usage.prompt_tokens' <<<"$r3" >/dev/null || fail "a chain of two: $r3 / $c3"
# input_items: this response's own input (not the earlier ones'), newest
# first by default, paged with limit / after
id3=$(jq -r .id <<<"$r3")
r4=$(created "{\"input\":[{\"role\":\"developer\",\"content\":\"D\"},{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"a\"},{\"type\":\"input_text\",\"text\":\"b\"}]},{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":\"{}\"},{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"42\"}],\"previous_response_id\":\"$id3\",\"max_output_tokens\":2}")
id4=$(jq -r .id <<<"$r4")
tail4=${id4#resp_}
li=$(body_of "$(req GET "/v1/responses/$id4/input_items?order=asc")")
jq -e --arg t "$tail4" '.object == "list" and .has_more == false and (.data | length) == 4 and
  .data[0] == {type: "message", role: "developer", content: [{type: "input_text", text: "D"}], status: "completed", id: ("msg_" + $t + "_in0")} and
  .data[1].content == [{type: "input_text", text: "ab"}] and
  .data[2] == {type: "function_call", call_id: "c1", name: "f", arguments: "{}", status: "completed", id: ("fc_" + $t + "_in2")} and
  .data[3] == {type: "function_call_output", call_id: "c1", output: "42", status: "completed", id: ("fco_" + $t + "_in3")} and
  .first_id == .data[0].id and .last_id == .data[3].id' <<<"$li" >/dev/null || fail "input_items: $li"
p1=$(body_of "$(req GET "/v1/responses/$id4/input_items?limit=3")")
p2=$(body_of "$(req GET "/v1/responses/$id4/input_items?limit=3&after=$(jq -r .last_id <<<"$p1")")")
jq -e --argjson a "$li" --argjson p2 "$p2" '.has_more == true and $p2.has_more == false and
  (.data + $p2.data) == ($a.data | reverse)' <<<"$p1" >/dev/null || fail "input_items pages: $p1 / $p2"
li3=$(body_of "$(req GET "/v1/responses/$id3/input_items")")
jq -e '(.data | length) == 1 and .data[0].content[0].text == "Why?"' <<<"$li3" >/dev/null || fail "input_items of $id3: $li3"
r=$(req GET "/v1/responses/$id4/input_items?limit=0")
[ "$(status_of "$r")" = 400 ] && body_of "$r" | jq -e '.error.param == "limit"' >/dev/null || fail "limit 0: $r"
not_found "$(req GET "/v1/responses/resp_0/input_items")" response_not_found || fail "input_items of an unknown id"
ok "store: GET = the create's answer, DELETE, then 404; store:false not kept; previous_response_id = the chat of the conversation ($(jq '.usage.input_tokens' <<<"$r1") -> $(jq '.usage.input_tokens' <<<"$r2") -> $(jq '.usage.input_tokens' <<<"$r3") input tokens)"

# --- function tools -------------------------------------------------------------
P='{"type":"object","properties":{"u":{"enum":["c","f"]}},"required":["u"],"additionalProperties":false}'
rtools="[{\"type\":\"function\",\"name\":\"f\",\"description\":\"The weather\",\"parameters\":$P}]"
ctools="[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"The weather\",\"parameters\":$P}}]"
q='{"role":"user","content":"Weather in Paris?"}'
fc=$(created "{\"input\":[$q],\"tools\":$rtools,\"tool_choice\":\"required\",\"max_output_tokens\":64,\"temperature\":0}")
c=$(chat "{\"messages\":[$q],\"tools\":$ctools,\"tool_choice\":\"required\",\"max_tokens\":64,\"temperature\":0}")
jq -e --argjson c "$c" --argjson t "$rtools" '$c.choices[0].message.tool_calls[0].function as $cf |
  .status == "completed" and (.output | length) == 1 and (.output[0].id | test("^fc_")) and
  .output[0].type == "function_call" and .output[0].status == "completed" and (.output[0].call_id | length) > 0 and
  .output[0].name == $cf.name and .output[0].arguments == $cf.arguments and
  (.output[0].arguments | fromjson | .u | IN("c", "f")) and .tools == $t and .tool_choice == "required" and
  .usage.output_tokens == $c.usage.completion_tokens' <<<"$fc" >/dev/null || fail "tool_choice required: $fc / $c"
s=$(sse "{\"input\":[$q],\"tools\":$rtools,\"tool_choice\":{\"type\":\"function\",\"name\":\"f\"},\"max_output_tokens\":64,\"temperature\":0,\"stream\":true}")
types=$(event_types "$s")
e=response.
[ "$types" = "${e}created,${e}in_progress,${e}output_item.added,${e}function_call_arguments.delta,${e}function_call_arguments.done,${e}output_item.done,${e}completed" ] ||
  fail "tool call stream: $types"
ev=$(events "$s")
jq -e --argjson fc "$fc" '.[-1].response as $f | ($fc.output[0] | del(.id, .call_id)) as $want |
  [.[].sequence_number] == [range(length)] and ($f.output | length) == 1 and
  ($f.output[0] | del(.id, .call_id)) == $want and $f.tool_choice == {type: "function", name: "f"} and
  .[2].item.status == "in_progress" and .[2].item.arguments == "" and .[2].item.id == $f.output[0].id and
  .[3].delta == $want.arguments and .[4].arguments == $want.arguments and .[4].name == "f" and
  .[5].item == $f.output[0]' <<<"$ev" >/dev/null || fail "tool call stream: $ev"
cid=$(jq -r '.output[0].call_id' <<<"$fc")
out="{\"type\":\"function_call_output\",\"call_id\":\"$cid\",\"output\":\"21 C\"}"
by_prev=$(created "{\"previous_response_id\":\"$(jq -r .id <<<"$fc")\",\"input\":[$out],\"tools\":$rtools,\"max_output_tokens\":8,\"temperature\":0}")
by_items=$(created "{\"input\":[$q,$(jq -c '.output[0]' <<<"$fc"),$out],\"tools\":$rtools,\"max_output_tokens\":8,\"temperature\":0}")
c=$(chat "$(jq -cn --argjson q "$q" --argjson t "$ctools" --argjson fc "$fc" '$fc.output[0] as $o | {messages: [$q,
  {role: "assistant", tool_calls: [{id: $o.call_id, type: "function", function: {name: $o.name, arguments: $o.arguments}}]},
  {role: "tool", tool_call_id: $o.call_id, content: "21 C"}], tools: $t, max_tokens: 8, temperature: 0}')")
for x in "$by_prev" "$by_items"; do
  jq -e --argjson c "$c" '.output[0].type == "message" and
    .output[0].content[0].text == $c.choices[0].message.content and .usage.input_tokens == $c.usage.prompt_tokens' \
    <<<"$x" >/dev/null || fail "function_call_output: $x / $c"
done
ok "tools: a function_call item = the chat's tool call ($(jq -r '.output[0] | .name + .arguments' <<<"$fc")); streamed; its output back by items or previous_response_id = the chat with the tool message"

# --- text.format ----------------------------------------------------------------
r=$(created "{\"input\":\"Pick\",\"max_output_tokens\":24,\"temperature\":0,\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"pick\",\"schema\":$P,\"strict\":true}}}")
c=$(chat "{\"messages\":[{\"role\":\"user\",\"content\":\"Pick\"}],\"max_tokens\":24,\"temperature\":0,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"pick\",\"schema\":$P,\"strict\":true}}}")
jq -e --argjson c "$c" --argjson p "$P" '.status == "completed" and
  .output[0].content[0].text == $c.choices[0].message.content and
  (.output[0].content[0].text | fromjson | .u | IN("c", "f")) and
  .text == {format: {type: "json_schema", name: "pick", schema: $p, strict: true}}' <<<"$r" >/dev/null ||
  fail "text.format json_schema: $r / $c"
ok "text.format json_schema: $(jq -r '.output[0].content[0].text' <<<"$r"), as the chat's response_format"

# --- background -----------------------------------------------------------------
poll() { # ID: the response once it is neither queued nor in progress
  local g st
  for _ in $(seq 1 600); do
    g=$(body_of "$(req GET "/v1/responses/$1")")
    st=$(jq -r .status <<<"$g")
    [ "$st" = queued ] || [ "$st" = in_progress ] || break
    sleep 0.05
  done
  echo "$g"
}
b=$(created '{"model":"folio-tiny-default","input":"Hello there","instructions":"Be brief.","max_output_tokens":16,"temperature":0,"background":true}')
jq -e '.status == "queued" and .background == true and .output == [] and .usage == null and .error == null and
  .instructions == "Be brief."' <<<"$b" >/dev/null || fail "background: $b"
bid=$(jq -r .id <<<"$b")
g=$(poll "$bid")
jq -e --argjson m "$m" 'def plain: del(.id, .created_at, .output[].id, .usage.input_tokens_details, .background);
  (. | plain) == ($m | plain) and .background == true' <<<"$g" >/dev/null || fail "background's result: $g / $m"
long='{"input":"Tell a long story","max_output_tokens":1500,"ignore_eos":true,"background":true}'
lid=$(jq -r .id <<<"$(created "$long")")
r=$(req POST "/v1/responses/$lid/cancel")
[ "$(status_of "$r")" = 200 ] && body_of "$r" | jq -e --arg id "$lid" '.id == $id and .status == "cancelled" and
  .background == true and .error == null' >/dev/null || fail "cancel: $r"
sleep 0.3 # its abort reaches the engine at the next step
g=$(body_of "$(req GET "/v1/responses/$lid")")
jq -e '.status == "cancelled" and (.usage.output_tokens < 1500) and
  (.output | length == 0 or .[0].status == "incomplete")' <<<"$g" >/dev/null || fail "cancelled: $g"
r=$(req POST "/v1/responses/$lid/cancel")
[ "$(status_of "$r")" = 200 ] && body_of "$r" | jq -e --argjson g "$g" '. == $g' >/dev/null ||
  fail "cancel twice: $r / $g"
r=$(req POST "/v1/responses/$bid/cancel")
[ "$(status_of "$r")" = 200 ] && body_of "$r" | jq -e '.status == "completed" or .status == "incomplete"' >/dev/null ||
  fail "cancel of a finished one: $r"
r=$(req POST "/v1/responses/$(jq -r .id <<<"$r1")/cancel")
[ "$(status_of "$r")" = 400 ] && body_of "$r" | jq -e '.error.message | test("synchronous")' >/dev/null ||
  fail "cancel of a foreground response: $r"
not_found "$(req POST /v1/responses/resp_0/cancel)" response_not_found || fail "cancel of an unknown id"
r=$(req POST "/v1/responses/$lid")
[ "$(status_of "$r")" = 404 ] && body_of "$r" | jq -e '.error.message | test("not served")' >/dev/null ||
  fail "POST /v1/responses/{id}: $r"
did=$(jq -r .id <<<"$(created "$long")")
r=$(req DELETE "/v1/responses/$did")
[ "$(status_of "$r")" = 200 ] && body_of "$r" | jq -e '.deleted == true' >/dev/null || fail "DELETE of a running one: $r"
sleep 0.3
not_found "$(req GET "/v1/responses/$did")" response_not_found || fail "a deleted background response came back"
r=$(tcp k-a POST /v1/responses "$long")
aid=$(body_of "$r" | jq -r .id)
not_found "$(tcp k-b POST "/v1/responses/$aid/cancel")" response_not_found || fail "b cancels a's response"
[ "$(body_of "$(tcp k-a GET "/v1/responses/$aid")" | jq -r .status)" != cancelled ] || fail "a's response cancelled by b"
r=$(tcp k-a POST "/v1/responses/$aid/cancel")
body_of "$r" | jq -e '.status == "cancelled"' >/dev/null || fail "a cancels its own: $r"
ok "background: queued at once, polled to the foreground's response; cancel (cancelled, idempotent; 400 for a foreground one, 404 unknown or another tenant's); DELETE of a running one"

# --- refusals -------------------------------------------------------------------
refused /v1/responses 400 background '{"input":"a","background":true,"store":false}'
refused /v1/responses 400 background '{"input":"a","background":true,"stream":true}'
refused /v1/responses 400 background '{"input":"a","background":"yes"}'
refused /v1/responses 400 input '{"input":[{"role":"user","content":[{"type":"input_image","image_url":"https://example.com/a.png"}]}]}'
refused /v1/responses 400 tools '{"input":"a","tools":[{"type":"web_search"}]}'
refused /v1/responses 400 input '{"max_output_tokens":4}'
refused /v1/responses 400 text '{"input":"a","text":{"format":{"type":"xml"}}}'
refused /v1/responses 400 reasoning '{"input":"a","reasoning":{"effort":"high"}}'
refused /v1/responses 400 max_output_tokens '{"input":"a","max_output_tokens":-1}'
refused /v1/responses 400 tool_choice '{"input":"a","tool_choice":"required"}'
r=$(resp '{"input":"a","max_output_tokens":-1}')
body_of "$r" | jq -e '(.error | keys) == ["code", "message", "param", "type"] and .error.type == "invalid_request_error" and
  (.error.message | test("max_output_tokens")) and (.error.message | test("max_tokens") | not)' >/dev/null ||
  fail "the error names the Responses field: $r"
ok "refusals: 400 naming background, input (input_image; missing), tools (web_search), text, reasoning, max_output_tokens, tool_choice"

# --- tenants --------------------------------------------------------------------
r=$(tcp k-a POST /v1/responses '{"input":"Hi","max_output_tokens":4,"temperature":0}')
[ "$(status_of "$r")" = 200 ] || fail "tenant a: $r"
ra=$(body_of "$r")
aid=$(jq -r .id <<<"$ra")
r=$(tcp k-a GET "/v1/responses/$aid")
[ "$(status_of "$r")" = 200 ] && body_of "$r" | jq -e --argjson a "$ra" '. == $a' >/dev/null || fail "a's GET: $r"
not_found "$(tcp k-b GET "/v1/responses/$aid")" response_not_found || fail "b reads a's response"
not_found "$(tcp k-b DELETE "/v1/responses/$aid")" response_not_found || fail "b deletes a's response"
not_found "$(tcp k-b POST /v1/responses "{\"input\":\"x\",\"previous_response_id\":\"$aid\"}")" previous_response_not_found ||
  fail "b continues a's response"
not_found "$(req GET "/v1/responses/$aid")" response_not_found || fail "the socket's tenant reads a's response"
[ "$(status_of "$(tcp k-a GET "/v1/responses/$aid")")" = 200 ] || fail "a's response gone after b's DELETE"
[ "$(status_of "$(tcp k-a DELETE "/v1/responses/$aid")")" = 200 ] || fail "a's DELETE"
ok "tenants: a's response is absent to b (GET, DELETE, previous_response_id) and to the socket's tenant"

for _ in $(seq 1 600); do
  curl -s --unix-socket "$T/s0.sock" http://x/health >/dev/null 2>&1 && break
  kill -0 $P0 2>/dev/null || { cat "$T/s0.log" >&2; fail "the --responses-store 0 daemon exited"; }
  sleep 0.05
done
r0=$(curl -s --unix-socket "$T/s0.sock" -H 'Content-Type: application/json' \
  -d '{"input":"Hi","max_output_tokens":2,"store":true}' http://x/v1/responses)
jq -e '.status != null and .store == false' <<<"$r0" >/dev/null || fail "--responses-store 0: $r0"
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$T/s0.sock" "http://x/v1/responses/$(jq -r .id <<<"$r0")")
[ "$code" = 404 ] || fail "--responses-store 0 kept one: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$T/s0.sock" -H 'Content-Type: application/json' \
  -d '{"input":"Hi","background":true}' http://x/v1/responses)
[ "$code" = 400 ] || fail "--responses-store 0 took a background response: $code"
kill -TERM $P0
wait $P0 || fail "the --responses-store 0 daemon's exit status"
ok "--responses-store 0: \"store\": false, GET 404, background refused"

# --- the openai SDK -------------------------------------------------------------
if ensure_openai; then
  cp "$SRCDIR/responses_client.mjs" "$NM/"
  node "$NM/responses_client.mjs" "$SOCK" "$T/m.json" || fail "the openai SDK's responses"
else
  echo "SKIP: openai SDK (npm)"
fi
stop_daemon || fail "exit status"
