#!/usr/bin/env bash
# /v1/embeddings on the real foliod (embedded default model, 512 values):
#   - text inputs: a list of embedding objects in order, unit length, usage
#     the inputs' token counts (as /tokenize counts them);
#   - pooling, checked against itself through causality: the final hidden
#     state of position k of a prompt is the last-token embedding of its
#     first k + 1 tokens, so under --pooling mean the unnormalized
#     embedding of P is the average of the last-token ones of P's
#     prefixes, and under --pooling cls that of its first token (1e-4);
#   - a 300-token input pooled by mean in chunks of 64 (and beside a
#     prefix-cache hit) equals it in one chunk: no position counted twice or
#     skipped; under preemption (a small pool held by two generations) each
#     of six equals its value alone;
#   - dimensions: the first N values, then unit length; base64: the float32
#     bytes of the float form; eight inputs in one request equal each alone;
#   - bad requests are 400s naming the field, an unknown model a 404.
. "$SRCDIR/lib.sh"

emb() { # BODY: the embeddings of a 200 response, one JSON array of arrays
  local r
  r=$(req POST /v1/embeddings "$1")
  [ "$(status_of "$r")" = 200 ] || fail "embeddings $1: $r"
  body_of "$r" | jq -c '[.data[].embedding]'
}

start_daemon "$FOLIOD" --kv-blocks 512 --max-seqs 16 --max-batch-tokens 64 --pooling last
grep -q "embeddings: 512 values, pooling last (--pooling)" "$LOG" || fail "no pooling log line"
r=$(req POST /v1/embeddings '{"input":["hello world","the sea at night, far from the shore"]}')
[ "$(status_of "$r")" = 200 ] || fail "text inputs: $r"
n0=$(body_of "$(req POST /tokenize '{"prompt":"hello world"}')" | jq '.count')
n1=$(body_of "$(req POST /tokenize '{"prompt":"the sea at night, far from the shore"}')" | jq '.count')
body_of "$r" | jq -e --argjson n "$((n0 + n1))" '.object == "list" and
  .model == "folio-tiny-default" and (.id | startswith("embd-")) and
  ([.data[] | .object == "embedding"] | all) and ([.data[].index] == [0, 1]) and
  ([.data[].embedding | length == 512 and ((map(. * .) | add | sqrt) - 1 | fabs) < 1e-5] | all) and
  .usage.prompt_tokens == $n and .usage.total_tokens == $n' >/dev/null ||
  fail "text inputs: $(body_of "$r" | jq -c '{object, model, id, usage, n: [.data[].index]}')"
ok "two text inputs: 2 x 512 values of unit length, usage $((n0 + n1)) prompt tokens"

P=$(ids 12 1)
prefixes=$(jq -c '[range(1; 13) as $k | .[0:$k]]' <<<"$P")
L=$(emb "{\"input\":$prefixes,\"normalize\":false}") # last-token states of the 12 prefixes
LP=$(jq -c '.[11]' <<<"$L")
# the same input alone: equal (the batch it ran in does not matter)
close "$(emb "{\"input\":[$P],\"normalize\":false}" | jq -c '.[0]')" "$LP" 1e-4 ||
  fail "the last-token embedding of P alone differs from P among its prefixes"
E8=$(emb "{\"input\":[$P],\"dimensions\":8}" | jq -c '.[0]')
close "$E8" "$(jq -c '.[0:8] | (map(. * .) | add | sqrt) as $n | map(. / $n)' <<<"$LP")" 1e-6 ||
  fail "dimensions 8: not the first 8 values at unit length: $E8"
b64=$(body_of "$(req POST /v1/embeddings "{\"input\":[$P],\"encoding_format\":\"base64\"}")" |
  jq -r '.data[0].embedding')
flt=$(emb "{\"input\":[$P]}" | jq -c '.[0]')
node -e 'const b = Buffer.from(process.argv[1], "base64");
  const f = new Float32Array(b.buffer, b.byteOffset, b.length / 4);
  const want = JSON.parse(process.argv[2]);
  if (f.length !== want.length || want.some((x, i) => Math.fround(x) !== f[i])) process.exit(1);' \
  "$b64" "$flt" || fail "base64 is not the float form's float32 bytes"
ok "last pooling: P alone = P among its prefixes; dimensions 8 = first 8 at unit length; base64 = the floats"

bad() { refused /v1/embeddings "$@"; } # STATUS PARAM BODY
bad 400 input '{}'
bad 400 input '{"input":[]}'
bad 400 input '{"input":[[1],[]]}'
bad 400 input "{\"input\":[$(ids 2048 4)]}"
bad 400 dimensions '{"input":"a","dimensions":513}'
bad 400 encoding_format '{"input":"a","encoding_format":"int8"}'
bad 404 model '{"input":"a","model":"other"}'
r=$(req POST /v1/embeddings "{\"input\":[$(ids 2048 4)],\"truncate_prompt_tokens\":-1}")
body_of "$r" | jq -e '.usage.prompt_tokens == 2047' >/dev/null ||
  fail "truncate_prompt_tokens -1: $(body_of "$r" | jq -c .usage)"
ok "bad inputs, dimensions, encoding_format: 400 naming them; an unknown model 404; too long cut by truncate_prompt_tokens"

Q=$(ids 300 2)
Lq=$(emb "{\"input\":[$Q],\"normalize\":false}" | jq -c '.[0]')
stop_daemon || fail "exit status"

start_daemon "$FOLIOD" --kv-blocks 512 --max-seqs 16 --max-batch-tokens 64 --pooling mean
M=$(emb "{\"input\":[$P],\"normalize\":false}" | jq -c '.[0]')
close "$M" "$(jq -c 'transpose | map(add / length)' <<<"$L")" 1e-4 ||
  fail "mean pooling is not the average of the prefixes' last-token states"
Mq=$(emb "{\"input\":[$Q],\"normalize\":false}" | jq -c '.[0]')
emb "{\"input\":[$(jq -c '.[0:200]' <<<"$Q")],\"normalize\":false}" >/dev/null # 192 cached
Mq2=$(emb "{\"input\":[$Q],\"normalize\":false}" | jq -c '.[0]')
close "$Mq" "$Mq2" 1e-5 || fail "mean of 300 tokens differs with a cached prefix present"
X=$(jq -c '[range(8) as $k | .[($k * 3):($k * 3 + 5 + $k)]]' <<<"$(ids 40 3)")
batch=$(emb "{\"input\":$X}")
for k in 0 1 2 3 4 5 6 7; do
  close "$(jq -c ".[$k]" <<<"$batch")" "$(emb "{\"input\":[$(jq -c ".[$k]" <<<"$X")]}" | jq -c '.[0]')" 1e-4 ||
    fail "input $k of 8 in one request differs from it alone"
done
stop_daemon || fail "exit status"
ok "mean pooling = the average of the prefixes' last-token states; eight inputs in one request = each alone"

start_daemon "$FOLIOD" --kv-blocks 512 --max-seqs 16 --max-batch-tokens 512 --pooling cls
C=$(emb "{\"input\":[$P],\"normalize\":false}" | jq -c '.[0]')
close "$C" "$(jq -c '.[0]' <<<"$L")" 1e-4 || fail "cls pooling is not the first token's state"
Mq1=$(emb "{\"input\":[$Q],\"normalize\":false}" | jq -c '.[0]') # cls: only position 0
stop_daemon || fail "exit status"
start_daemon "$FOLIOD" --kv-blocks 512 --max-seqs 16 --max-batch-tokens 512 --pooling mean
one=$(emb "{\"input\":[$Q],\"normalize\":false}" | jq -c '.[0]')
close "$Mq" "$one" 1e-4 || fail "mean of 300 tokens: chunks of 64 differ from one chunk"
close "$one" "$Mq1" 1e-3 && fail "mean and cls pooling agree on 300 tokens: pooling ignored"
close "$one" "$Lq" 1e-3 && fail "mean and last pooling agree on 300 tokens: pooling ignored"
stop_daemon || fail "exit status"
ok "cls = the first token's state; mean of 300 tokens in chunks of 64 = in one chunk (and beside a cache hit)"

# 6 x 300-token inputs (mean) and 2 x 280-token generations on 40 blocks of 16
start_daemon "$FOLIOD" --kv-blocks 40 --block-size 16 --max-seqs 8 --max-batch-tokens 128 --pooling mean
pids=()
for k in 0 1; do
  curl -s --unix-socket "$SOCK" -d "{\"prompt\":$(ids 200 $((k + 20))),\"max_tokens\":80,\"temperature\":0,\"ignore_eos\":true}" \
    http://x/v1/completions >/dev/null &
  pids+=($!)
done
# the embeddings come while both generations decode (they hold 26+ of the
# 40 blocks and grow): came first, they could run before them, unpreempted
for _ in $(seq 1 400); do
  m=$(curl -s --unix-socket "$SOCK" http://x/metrics)
  awk '/^folio_num_requests_running[ {]/ {r = $NF} /^folio_generation_tokens_total[ {]/ {g = $NF}
    END {exit !(r >= 2 && g >= 2)}' <<<"$m" && break
  sleep 0.02
done
for k in 0 1 2 3 4 5; do
  curl -s --unix-socket "$SOCK" -d "{\"input\":[$(ids 300 $((k + 10)))]}" http://x/v1/embeddings \
    >"$T/e$k.json" &
  pids+=($!)
done
wait "${pids[@]}"
pre=$(curl -s --unix-socket "$SOCK" http://x/metrics | awk '/^folio_num_preemptions_total/ {print $2}')
for k in 0 1 2 3 4 5; do
  a=$(jq -c '.data[0].embedding' "$T/e$k.json")
  close "$a" "$(emb "{\"input\":[$(ids 300 $((k + 10)))]}" | jq -c '.[0]')" 1e-4 ||
    fail "input $k: concurrent (preempted) embedding differs from alone"
done
[ "${pre%.*}" -gt 0 ] || fail "no preemption happened ($pre)"
ok "6 inputs and 2 generations on a small pool ($pre preemptions): each embedding as alone"
stop_daemon || fail "exit status"
