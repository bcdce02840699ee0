#!/usr/bin/env bash
# The HTTP layer's output path and edges, on the fake engine:
#   - large answers arrive whole at a fast reader (/v1/kv of a 100k-block
#     pool, a 10 MB completion, /tokenize of 900 KB) and at a slow one that
#     takes longer than the idle timeout to read them;
#   - a streaming reader that stops is dropped at --max-pending-output,
#     logged, counted in /metrics, and finds a final error event;
#   - streams cut short (engine error, drain timeout) end with an error
#     event; a kept-alive connection sees /health 503 while draining;
#   - half-closed clients are answered; HTTP/1.0 gets a close-delimited
#     stream; Expect: 100-continue; header-name validation; NUL in JSON
#     strings refused; a model name that is not UTF-8 is sanitized; a body
#     arriving too slowly gets a 408;
#   - errors answered while the request is still arriving (400, 414, 431,
#     417 before a 2 MB body; 413 before a 6 MB body sent over 2 s) reach
#     the client whole, without a reset.
. "$SRCDIR/lib.sh"
E="node $SRCDIR/http_edge.mjs"
export FOLIO_FAKE_STEP_US=0

# --- large responses, fast and slow readers ----------------------------------
start_daemon "$FOLIOD_FAKE" --kv-blocks 100000 --idle-timeout-ms 400
curl -s --unix-socket "$SOCK" -o "$T/kv.json" -w '%{http_code} %{size_download}\n' "http://x/v1/kv?map=full" >"$T/kv.st"
read -r st size <"$T/kv.st"
[ "$st" = 200 ] || fail "/v1/kv status $st"
jq -e '.num_blocks == 100000 and (.block_map|length) == 100000' "$T/kv.json" >/dev/null ||
  fail "/v1/kv of 100k blocks incomplete ($size bytes)"
ok "/v1/kv of a 100k-block pool arrives whole ($size bytes)"
$E slowget "$SOCK" "/v1/kv?map=full" 10 || fail "slow reader of /v1/kv"
$E stallget "$SOCK" "/v1/kv?map=full" "$LOG" || fail "stalled reader of /v1/kv"
m=$(curl -s --unix-socket "$SOCK" http://x/metrics | awk '/^folio_slow_reader_drops_total[ {]/ {print $NF}')
[ "${m%.*}" = 1 ] || fail "stalled reader not counted: '$m'"

stop_daemon || fail "exit status"

# a 10 MB completion, plain and streamed: 16 choices echoing a 23000-token
# prompt with logprobs
FOLIO_FAKE_CTX=24000 start_daemon "$FOLIOD_FAKE" --kv-blocks 28000 --max-body 4M
python3 -c "import json; print(json.dumps({'prompt':[300+i%200 for i in range(23000)],'n':16,'echo':True,'logprobs':1,'max_tokens':4,'temperature':0}))" >"$T/big.req"
curl -s --unix-socket "$SOCK" --data-binary @"$T/big.req" -o "$T/big.json" -w '%{http_code} %{size_download}\n' \
  http://x/v1/completions >"$T/big.st"
read -r st size <"$T/big.st"
[ "$st" = 200 ] || fail "10 MB completion: status $st"
[ "$size" -ge 10000000 ] || fail "the big completion is only $size bytes"
jq -e '(.choices|length) == 16 and ([.choices[].logprobs.tokens|length]|min) == 23004 and .usage.completion_tokens == 64' \
  "$T/big.json" >/dev/null || fail "10 MB completion incomplete"
sed 's/}$/,"stream":true}/' "$T/big.req" >"$T/big.sreq"
curl -sN --unix-socket "$SOCK" --data-binary @"$T/big.sreq" -o "$T/big.sse" http://x/v1/completions
tail -n2 "$T/big.sse" | grep -q '^data: \[DONE\]' || fail "streamed twin does not end with [DONE]"
n=$(grep '^data: {' "$T/big.sse" | sed 's/^data: //' | jq -s '[.[].choices[].logprobs.tokens|length]|add')
[ "$n" = $((16 * 23004)) ] || fail "streamed twin has $n logprob tokens"
ok "a $size-byte completion and its $(stat -c %s "$T/big.sse")-byte stream arrive whole"
stop_daemon || fail "exit status"

# /tokenize of 900 KB on the real engine (its embedded model's tokenizer)
start_daemon "$FOLIOD" --kv-blocks 256
if grep -q "tokenizer loaded" "$LOG"; then
  python3 -c "import json; print(json.dumps({'prompt': 'ab cd ' * 150000}))" >"$T/tok.json"
  curl -s --unix-socket "$SOCK" --data-binary @"$T/tok.json" -o "$T/tok.out" \
    -w '%{http_code} %{size_download}\n' http://x/tokenize >"$T/tok.st"
  read -r st size <"$T/tok.st"
  [ "$st" = 200 ] || fail "/tokenize of 900 KB: $st"
  jq -e '.count > 100000 and (.tokens|length) == .count' "$T/tok.out" >/dev/null || fail "/tokenize answer incomplete ($size bytes)"
  ok "/tokenize of 900 KB: its $size-byte answer arrives whole"
fi
stop_daemon || fail "exit status"

# --- a streaming reader that stops: dropped at the cap ------------------------
FOLIO_FAKE_STEP_US=2000 start_daemon "$FOLIOD_FAKE" --kv-blocks 1024 --max-pending-output 64K
$E stopreader "$SOCK" "$LOG" || fail "stopped reader"
grep -q "slow reader" "$LOG" || fail "slow reader not logged"
m=$(curl -s --unix-socket "$SOCK" http://x/metrics | awk '/^folio_slow_reader_drops_total[ {]/ {print $NF}')
[ "${m%.*}" -ge 1 ] || fail "slow reader drop not counted: '$m'"
for _ in $(seq 1 100); do
  used=$(curl -s --unix-socket "$SOCK" http://x/v1/kv | jq '.blocks.used')
  [ "$used" = 0 ] && break
  sleep 0.05
done
[ "$used" = 0 ] || fail "KV not released after the drop: $used blocks"
ok "stopped reader: logged, counted ($m), its KV released"
stop_daemon || fail "exit status"

# --- engine error in a stream and in a plain answer -------------------------
FOLIO_FAKE_FAIL_AT=5 FOLIO_FAKE_TOKENIZER=bytes start_daemon "$FOLIOD_FAKE" --kv-blocks 1024 --chat-template chatml
$E streamerror "$SOCK" server_error 50 || fail "engine error in a stream"
r=$(req POST /v1/completions '{"prompt":[1,2],"max_tokens":50}')
[ "$(status_of "$r")" = 500 ] || fail "engine error without streaming: $r"
# the Responses API's and Anthropic's streams end in their own shapes
sse() { curl -sN --unix-socket "$SOCK" -H 'Content-Type: application/json' --data-binary "$2" "http://x$1"; }
s=$(sse /v1/responses '{"input":"hi","max_output_tokens":50,"stream":true}')
[ "$(grep '^event: ' <<<"$s" | tail -1)" = "event: response.failed" ] &&
  grep '^data: ' <<<"$s" | tail -1 | cut -c7- | jq -e '.type == "response.failed" and
    .response.status == "failed" and .response.error.code == "server_error"' >/dev/null ||
  fail "engine error in a Responses stream: $s"
s=$(sse /v1/messages '{"model":"fake-tiny","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}')
[ "$(grep '^event: ' <<<"$s" | tail -1)" = "event: error" ] &&
  grep '^data: ' <<<"$s" | tail -1 | cut -c7- | jq -e '.type == "error" and .error.type == "api_error"' \
    >/dev/null || fail "engine error in a Messages stream: $s"
ok "engine error: a 500, or a stream's last event (OpenAI's error, response.failed, Anthropic's error)"
stop_daemon || fail "exit status"

# --- drain: /health 503 on a kept-alive connection; drain-timeout event --------
# (the drain lasts long enough for the client's second /health on a loaded
# machine, and ends before the 4 s stream would)
FOLIO_FAKE_STEP_US=2000 start_daemon "$FOLIOD_FAKE" --kv-blocks 1024 --drain-timeout-ms 1500
$E drainhealth "$SOCK" "$T/signalled" >"$T/dh.out" 2>&1 &
HP=$!
$E streamerror "$SOCK" drain_timeout 2000 >"$T/se.out" 2>&1 &
SP=$!
for _ in $(seq 1 200); do grep -q READY "$T/dh.out" && grep -q STARTED "$T/se.out" && break; sleep 0.05; done
sleep 0.2
kill -TERM "$DPID"
touch "$T/signalled"
wait "$HP" || fail "drain /health: $(cat "$T/dh.out")"
wait "$SP" || fail "drain timeout: $(cat "$T/se.out")"
grep '^ok' "$T/dh.out" "$T/se.out" | sed 's/^[^:]*://'
rc=0; wait "$DPID" || rc=$?; DPID=
[ $rc = 0 ] || fail "exit status $rc after the drain"

# --- refused connections past the linger cap still get their 503 -------------
# --max-connections 8: 8 held open, the other 52 refused; at most 8 of those
# linger (they are not counted against the limit), the rest close as soon
# as their answer is written, so every one of them reads the 503
start_daemon "$FOLIOD_FAKE" --kv-blocks 256 --max-connections 8 --idle-timeout-ms 120000
node "$SRCDIR/hold.mjs" "$SOCK" 60 </dev/null >"$T/cap.out" 2>&1 || fail "hold.mjs: $(cat "$T/cap.out")"
jq -e '.connected == 60 and .open == 8 and .answered == 52 and .reset == 0 and .bad503 == 0' "$T/cap.out" >/dev/null ||
  fail "past the linger cap: $(cat "$T/cap.out") (want 8 held, 52 answered 503)"
ok "60 connections at --max-connections 8: 8 held, 52 answered 503, those past the linger cap too"
stop_daemon || fail "exit status"

# --- errors answered mid-request: a lingering close, not a reset ---------------
# a malformed request line (400), a URL too long (414), headers too large
# (431) and an unmet Expect (417), each followed at once by 2 MB: every
# answer read whole, no ECONNRESET / EPIPE, and its end (the server's
# half-close) long before the linger deadline; on the Unix socket and on
# TCP, where closing with unread input sends a RST that destroys the answer
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_daemon "$FOLIOD_FAKE" --kv-blocks 256 --listen "127.0.0.1:$port" --insecure-listen
$E linger "$SOCK" 5 || fail "errors answered mid-request, Unix socket"
$E linger "127.0.0.1:$port" 5 || fail "errors answered mid-request, TCP"
# a client that sends its whole (refused) body before reading, for longer
# than the linger's one-second gap allowance in all
$E slowupload "$SOCK" || fail "a slow upload refused 413, Unix socket"
$E slowupload "127.0.0.1:$port" || fail "a slow upload refused 413, TCP"
stop_daemon || fail "exit status"

# --- HTTP details --------------------------------------------------------------
start_daemon "$FOLIOD_FAKE" --kv-blocks 256
$E halfclose "$SOCK" || fail "half-close"
$E http10 "$SOCK" || fail "HTTP/1.0"
$E expect "$SOCK" || fail "Expect"
$E headername "$SOCK" || fail "header names"
for b in '{"prompt":"a\u0000b","max_tokens":2}' '{"prompt":[1],"stop":["x\u0000"],"max_tokens":2}' \
  '{"prompt":[1],"user":"\u0000"}'; do
  r=$(req POST /v1/completions "$b")
  [ "$(status_of "$r")" = 400 ] || fail "NUL in a JSON string accepted: $b -> $r"
  body_of "$r" | grep -q 'NUL' || fail "NUL refusal does not say why: $r"
done
r=$(req POST /detokenize '{"tokens":[300],"model":"fake\u0000-tiny"}')
[ "$(status_of "$r")" = 400 ] || fail "NUL in /detokenize's model accepted: $r"
r=$(req POST /v1/completions '{"prompt":"a\\u0000b","max_tokens":2,"model":"fake-tiny"}')
[ "$(status_of "$r")" != 400 ] || ! grep -q NUL <<<"$r" || fail "an escaped backslash before u0000 was taken for a NUL: $r"
ok "NUL (\\u0000) in JSON strings refused with 400"
$E slowbody "$SOCK" || fail "slow body"
stop_daemon || fail "exit status"

# --- a model name that is not UTF-8 -------------------------------------------
FOLIO_FAKE_NAME=$'bad\xff\xfename\x01' start_daemon "$FOLIOD_FAKE" --kv-blocks 256
curl -s --unix-socket "$SOCK" http://x/v1/models >"$T/models.json"
iconv -f UTF-8 -t UTF-8 "$T/models.json" >/dev/null 2>&1 || fail "/v1/models is not UTF-8: $(od -c "$T/models.json" | head -3)"
name=$(jq -r '.data[0].id' "$T/models.json") || fail "/v1/models is not JSON"
[ "$name" = $'bad\xef\xbf\xbd\xef\xbf\xbdname?' ] || fail "sanitized name: $(od -c <<<"$name" | head -2)"
r=$(req POST /v1/completions "$(jq -cn --arg m "$name" '{model:$m,prompt:[1,2],max_tokens:3}')")
[ "$(status_of "$r")" = 200 ] || fail "the sanitized name is not accepted back: $r"
body_of "$r" | iconv -f UTF-8 -t UTF-8 >/dev/null 2>&1 || fail "completion not UTF-8"
body_of "$r" | jq -e --arg m "$name" '.model == $m' >/dev/null || fail "completion's model: $r"
ok "a model name that is not UTF-8 is shown (and accepted) sanitized"
stop_daemon || fail "exit status"
