#!/usr/bin/env bash
# /v1/chat/completions and the completions extras (logprobs, echo) against
# the real foliod on the embedded default model (ChatML rendered as text):
# chat non-stream == stream (same seed), role / finish_reason / usage =
# token counts (the prompt is exactly the rendered conversation), EOS by
# logit_bias ends with "stop" and no text, stop strings, 400s for bad
# messages, folio complete --chat; logprobs (<= 0, top-N sorted, greedy =
# top-1, stream == non-stream), echo (+ prompt tokens with null logprobs);
# --chat-template; the openai SDK's chat.completions.create with chat
# logprobs; penalties, min_p and typical_p on the real model;
# /apply-template, continue_final_message, /tokenize's chat form.
. "$SRCDIR/lib.sh"

[ "$("$FOLIOD" --chat-template bogus >/dev/null 2>&1; echo $?)" = 2 ] || fail "--chat-template bogus accepted"
"$FOLIOD" --chat-template llama3 --dump-config | grep -q 'chat-template.*llama3' || fail "--chat-template in --dump-config"

start_daemon "$FOLIOD" --kv-blocks 1024 --max-seqs 16
grep -q "chat template: chatml" "$LOG" || fail "template decision not logged"
chat() { curl -s --unix-socket "$SOCK" -H 'Content-Type: application/json' --data-binary "$1" http://x/v1/chat/completions; }
comp() { curl -s --unix-socket "$SOCK" -H 'Content-Type: application/json' --data-binary "$1" http://x/v1/completions; }
msgs='[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hello"},{"type":"text","text":" there"}]}]'
body="{\"messages\":$msgs,\"max_tokens\":12,\"temperature\":0.9,\"seed\":42,\"ignore_eos\":true}"
ns=$(chat "$body")
jq -e '.object == "chat.completion" and .choices[0].message.role == "assistant" and .choices[0].finish_reason == "length"
       and .usage.completion_tokens == 12 and .usage.total_tokens == .usage.prompt_tokens + 12
       and (.choices[0].message.content | length) > 0 and (.id | startswith("chatcmpl-"))' <<<"$ns" >/dev/null || fail "chat shape: $ns"
rendered=$'<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n'
n=$(curl -s --unix-socket "$SOCK" --data-binary "$(jq -nc --arg p "$rendered" '{prompt:$p}')" http://x/tokenize | jq '.count')
[ "$(jq '.usage.prompt_tokens' <<<"$ns")" = "$n" ] || fail "prompt_tokens $(jq '.usage.prompt_tokens' <<<"$ns") != tokens of the rendered chat ($n)"
st=$(curl -sN --unix-socket "$SOCK" --data-binary "${body%\}},\"stream\":true,\"stream_options\":{\"include_usage\":true}}" http://x/v1/chat/completions)
[ "$(tail -n 1 <<<"$st")" = "data: [DONE]" ] || fail "stream does not end with [DONE]"
ev=$(grep '^data: {' <<<"$st" | sed 's/^data: //' | jq -sc .)
jq -e '.[0].choices[0].delta.role == "assistant" and all(.[]; .object == "chat.completion.chunk")
       and ([.[] | .choices[] | select(.finish_reason != null) | .finish_reason] == ["length"])
       and (.[-1].choices == [] and .[-1].usage.completion_tokens == 12)' <<<"$ev" >/dev/null || fail "chat stream shape: $ev"
a=$(jq -r '.choices[0].message.content' <<<"$ns")
b=$(jq -r '[.[] | .choices[] | .delta.content // ""] | join("")' <<<"$ev")
[ "$a" = "$b" ] || fail "chat stream text differs: '$a' vs '$b'"
jq -e '.usage.prompt_tokens' <<<"$(jq '.[-1]' <<<"$ev")" | grep -qx "$n" || fail "stream usage prompt_tokens"
ok "chat: non-stream == stream (seed), role, finish_reason, usage = token counts ($n prompt tokens)"

# /apply-template: the same messages rendered, nothing generated; a bad
# body is the chat route's 400
at() { curl -s --unix-socket "$SOCK" -w '\n%{http_code}' --data-binary "$1" http://x/apply-template; }
r=$(at "{\"messages\":$msgs}")
[ "$(tail -n 1 <<<"$r")" = 200 ] && head -n -1 <<<"$r" | jq -e --arg p "$rendered" '.prompt == $p' >/dev/null ||
  fail "/apply-template: $r"
r=$(at '{"messages":[{"role":"user"}]}')
[ "$(tail -n 1 <<<"$r")" = 400 ] && head -n -1 <<<"$r" | jq -e '.error.param == "messages"' >/dev/null ||
  fail "/apply-template without content: $r"
r=$(curl -s --unix-socket "$SOCK" -o /dev/null -w '%{http_code}' http://x/apply-template)
[ "$r" = 405 ] || fail "GET /apply-template: $r"
r=$(at "{\"messages\":$msgs,\"add_generation_prompt\":false}")
head -n -1 <<<"$r" | jq -e --arg p "${rendered%<|im_start|>assistant$'\n'}" '.prompt == $p' >/dev/null ||
  fail "/apply-template without the generation prompt: $r"
ok "/apply-template: the rendered conversation (add_generation_prompt: false leaves the assistant's header off); 400 for a bad message, 405 for GET"
# continue_final_message (vLLM's): the prompt stops inside the final
# assistant message, and the completion continues it: its prompt tokens
# are those of that text
cont=$(jq -c '. + [{"role":"assistant","content":"Sure, the answer is"}]' <<<"$msgs")
r=$(at "{\"messages\":$cont,\"continue_final_message\":true}")
head -n -1 <<<"$r" | jq -e --arg p "${rendered}Sure, the answer is" '.prompt == $p' >/dev/null ||
  fail "/apply-template with continue_final_message: $r"
nc=$(curl -s --unix-socket "$SOCK" --data-binary "$(jq -nc --arg p "${rendered}Sure, the answer is" '{prompt:$p}')" http://x/tokenize | jq '.count')
r=$(chat "{\"messages\":$cont,\"continue_final_message\":true,\"add_generation_prompt\":false,\"max_tokens\":4}")
jq -e --argjson n "$nc" '.usage.prompt_tokens == $n and .usage.completion_tokens == 4' <<<"$r" >/dev/null ||
  fail "chat with continue_final_message: $r (want $nc prompt tokens)"
r=$(at "{\"messages\":$cont,\"continue_final_message\":true,\"add_generation_prompt\":true}")
[ "$(tail -n 1 <<<"$r")" = 400 ] && head -n -1 <<<"$r" | jq -e '.error.param == "continue_final_message"' >/dev/null ||
  fail "continue_final_message with add_generation_prompt true: $r"
ok "continue_final_message: the prompt ends inside the final message ($nc tokens), continued; refused beside add_generation_prompt true"
# /tokenize's chat form (vLLM's): the chat route's prompt tokens
r=$(curl -s --unix-socket "$SOCK" --data-binary "{\"messages\":$msgs}" http://x/tokenize)
jq -e --argjson n "$n" '.count == $n and (.tokens | length) == $n' <<<"$r" >/dev/null ||
  fail "/tokenize with messages: $r (want $n tokens)"
ok "/tokenize with messages: the $n tokens the chat completion was prompted with"

# EOS (id 2 in the synthetic vocabulary) forced by logit_bias: stop, no text, counted
r=$(chat "{\"messages\":$msgs,\"max_tokens\":5,\"logit_bias\":{\"2\":100}}")
jq -e '.choices[0].finish_reason == "stop" and .choices[0].message.content == "" and .usage.completion_tokens == 1' <<<"$r" >/dev/null || fail "EOS: $r"
stop=$(cut -c3-6 <<<"$a")
r=$(chat "{\"messages\":$msgs,\"max_tokens\":12,\"temperature\":0.9,\"seed\":42,\"ignore_eos\":true,\"stop\":[$(jq -Rn --arg s "$stop" '$s')]}")
jq -e '.choices[0].finish_reason == "stop"' <<<"$r" >/dev/null || fail "stop string: $r"
[ "$(jq -r '.choices[0].message.content' <<<"$r")" = "${a%%"$stop"*}" ] || fail "stop string cut: $r"
ok "chat: EOS ends with stop (no text), stop strings"

for bad in '{}' '{"messages":[]}' '{"messages":[{"role":"wizard","content":"x"}]}' \
  '{"messages":[{"role":"user","content":5}]}' '{"messages":[{"role":"user"}]}' \
  '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}' \
  '{"messages":[{"role":"user","content":"x"}],"logprobs":5}'; do
  r=$(req POST /v1/chat/completions "$bad")
  [ "$(status_of "$r")" = 400 ] || fail "bad chat body accepted: $bad -> $r"
  body_of "$r" | jq -e '.error.message | length > 0' >/dev/null || fail "error shape: $r"
done
r=$(req GET /v1/chat/completions); [ "$(status_of "$r")" = 405 ] || fail "GET chat: $r"
ok "chat: bad messages / roles / content are 400s"

x=$("$FOLIO" complete --socket "$SOCK" --chat --max-tokens 8 --seed 3 "Hello")
y=$("$FOLIO" complete --socket "$SOCK" --chat --stream --max-tokens 8 --seed 3 "Hello")
[ -n "$x" ] && [ "$x" = "$y" ] || fail "folio complete --chat: '$x' vs '$y'"
ok "folio complete --chat == --chat --stream"

# logprobs
lb='{"prompt":"Once upon a time","max_tokens":8,"temperature":0,"ignore_eos":true,"logprobs":5}'
r=$(comp "$lb")
jq -e '.choices[0].logprobs as $l | ($l.tokens | length) == 8 and ($l.token_logprobs | length) == 8
       and all($l.token_logprobs[]; . <= 0)
       and all($l.top_logprobs[]; (to_entries | length) == 5 and ([.[]] == ([.[]] | sort | reverse)))
       and ([range(8)] | all(. as $i | ($l.token_logprobs[$i] - ([$l.top_logprobs[$i][]] | max)) | fabs < 1e-4))
       and ($l.text_offset == ($l.text_offset | sort)) and $l.text_offset[0] == 0' <<<"$r" >/dev/null || fail "logprobs: $r"
[ "$(jq -r '.choices[0].logprobs.tokens | join("")' <<<"$r")" = "$(jq -r '.choices[0].text' <<<"$r")" ] || fail "logprobs tokens do not spell the text"
st=$(curl -sN --unix-socket "$SOCK" --data-binary "${lb%\}},\"stream\":true}" http://x/v1/completions)
a=$(jq -c '.choices[0].logprobs.token_logprobs' <<<"$r")
b=$(grep '^data: {' <<<"$st" | sed 's/^data: //' | jq -sc '[.[] | .choices[0].logprobs.token_logprobs[]]')
[ "$a" = "$b" ] || fail "stream logprobs differ: $a vs $b"
r=$(comp '{"prompt":"Once upon a time","max_tokens":4,"temperature":1,"seed":5,"logprobs":0}')
jq -e '.choices[0].logprobs as $l | ($l.token_logprobs | length) == 4 and all($l.token_logprobs[]; . <= 0) and all($l.top_logprobs[]; . == {})' <<<"$r" >/dev/null || fail "logprobs 0: $r"
ok "logprobs: N sorted entries, chosen <= 0 and = top-1 when greedy, tokens spell the text, stream == non-stream"

# echo
r=$(comp '{"prompt":"Once upon a time","max_tokens":4,"temperature":0,"ignore_eos":true,"echo":true,"logprobs":1}')
p=$(jq '.usage.prompt_tokens' <<<"$r")
jq -e --argjson p "$p" '(.choices[0].text | startswith("Once upon a time")) and (.choices[0].logprobs.tokens | length) == $p + 4
       and .choices[0].logprobs.token_logprobs[0] == null and (.choices[0].logprobs.token_logprobs[-1] <= 0)
       and .choices[0].logprobs.text_offset[$p] == 16 and (.choices[0].logprobs.text_offset | . == sort)' <<<"$r" >/dev/null || fail "echo: $r"
g=$(comp '{"prompt":"Once upon a time","max_tokens":4,"temperature":0,"ignore_eos":true}' | jq -r '.choices[0].text')
[ "$(jq -r '.choices[0].text' <<<"$r")" = "Once upon a time$g" ] || fail "echo text: $r vs $g"
st=$(curl -sN --unix-socket "$SOCK" -d '{"prompt":"Once upon a time","max_tokens":4,"temperature":0,"ignore_eos":true,"echo":true,"stream":true}' http://x/v1/completions)
[ "$(grep '^data: {' <<<"$st" | sed 's/^data: //' | jq -rs '[.[] | .choices[0].text] | join("")')" = "Once upon a time$g" ] || fail "echo stream: $st"
ok "echo: prompt text + completion (stream too), prompt tokens listed with null logprobs"

# penalties on the real model: logit_bias +5 makes token 500 the greedy
# choice at every step; each penalty holds it back (the default model is
# built deterministically, so the counts are fixed)
n500() { comp "{\"prompt\":\"Once upon a time\",\"max_tokens\":40,\"temperature\":0,\"ignore_eos\":true,\"logit_bias\":{\"500\":5}$1}" | jq '.choices[0].token_ids | map(select(. == 500)) | length'; }
base=$(n500 '')
rall=$(n500 ',"repetition_penalty":3,"repeat_last_n":-1')
rwin=$(n500 ',"repeat_penalty":3,"repeat_last_n":4')
freq=$(n500 ',"frequency_penalty":1')
pres=$(n500 ',"presence_penalty":2')
[ "$base" -ge 30 ] && [ "$rall" -le 2 ] && [ "$rwin" -gt "$rall" ] && [ "$rwin" -le 8 ] && [ "$freq" -le 6 ] \
  && [ "$pres" -lt "$base" ] || fail "penalties: token 500 x $base, repetition(all) $rall, repetition(last 4) $rwin, frequency $freq, presence $pres"
ok "penalties hold a forced token back: $base -> repetition over the stream $rall, over the last 4 $rwin (<= 1 in 5), frequency $freq, presence $pres"
r=$(comp '{"prompt":"Once upon a time","max_tokens":30,"temperature":1,"seed":9,"min_p":0.2,"typical_p":0.9,"top_k":20,"ignore_eos":true}')
jq -e '(.choices[0].token_ids | length) == 30' <<<"$r" >/dev/null || fail "min_p/typical_p: $r"

if ensure_openai; then
  cp "$SRCDIR/openai_chat.mjs" "$NM/"
  node "$NM/openai_chat.mjs" "$SOCK" || fail "openai chat client"
else
  echo "# openai SDK unavailable: chat SDK check skipped"
fi
stop_daemon || fail "exit status"

# an explicit template: llama3 markers are text for this vocabulary too
start_daemon "$FOLIOD" --kv-blocks 256 --chat-template llama3
grep -q "chat template: llama3 (--chat-template)" "$LOG" || fail "explicit template not logged"
r=$(chat '{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"ignore_eos":true}')
jq -e '.usage.completion_tokens == 2' <<<"$r" >/dev/null || fail "llama3 chat: $r"
stop_daemon || fail "exit status"
ok "--chat-template llama3"
