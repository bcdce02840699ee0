#!/usr/bin/env bash
# Structured output and tool calling against the real foliod on a
# synthetic model written by `folio gen-model` (random text: only
# constrained decoding makes the answers valid):
#   - FOLIO_STRUCT_N (default 100: CI time; the acceptance run used 1000) random (JSON Schema, seed) pairs, chat
#     and completions: every output parses and validates (ajv);
#   - the three npm client stacks (sdk_clients.mjs) over the socket and
#     over TCP;
#   - 400s that name an unsupported schema keyword, a bad grammar, a tool
#     choice naming no tool.
# Skips (77) when npm or the registry is unreachable.
. "$SRCDIR/lib.sh"
ensure_sdks || { echo "SKIP: npm SDKs unavailable"; exit 77; }
cp "$SRCDIR/sdk_clients.mjs" "$SRCDIR/structured_random.mjs" "$NMS/"
"$FOLIO" gen-model --preset tiny --seed 17 --dtype q8_0 -o "$T/m.gguf" >/dev/null || fail "gen-model"
PORT=$((20000 + RANDOM % 20000))
start_daemon "$FOLIOD" --model "$T/m.gguf" --listen "127.0.0.1:$PORT" --insecure-listen --kv-blocks 4096 --max-seqs 32 \
  --max-batch-tokens 1024

r=$(req POST /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object","properties":{"a":{"type":"string","format":"email"}}}}}}')
[ "$(status_of "$r")" = 400 ] && grep -q "'format'" <<<"$r" || fail "unsupported keyword: $r"
r=$(req POST /v1/completions '{"prompt":"x","grammar":"root ::= root \"a\" | \"b\""}')
[ "$(status_of "$r")" = 400 ] && grep -q "left recursion" <<<"$r" || fail "bad grammar: $r"
r=$(req POST /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}')
[ "$(status_of "$r")" = 400 ] && grep -q "not in 'tools'" <<<"$r" || fail "unknown named tool: $r"
r=$(req POST /v1/completions '{"prompt":"x","max_tokens":30,"grammar":"root ::= (\"yes\" | \"no\") \"!\"{1,3}"}')
body_of "$r" | jq -e '.choices[0].text | test("^(yes|no)!{1,3}$")' >/dev/null || fail "grammar output: $r"
ok "refusals name the keyword / rule / tool; a grammar's output matches it"

node "$NMS/structured_random.mjs" "$SOCK" "${FOLIO_STRUCT_N:-100}" || fail "random schemas"
node "$NMS/sdk_clients.mjs" http://localhost/v1 "$SOCK" || fail "SDK clients over the socket"
node "$NMS/sdk_clients.mjs" "http://127.0.0.1:$PORT/v1" || fail "SDK clients over TCP"
stop_daemon || fail "exit status"
