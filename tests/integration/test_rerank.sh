#!/usr/bin/env bash
# /v1/rerank on the real foliod, with a reranker foliod generates (`folio
# gen-model --arch qwen3 --reranker`: a yes/no classification head and a
# rerank template; f32 KV):
#   - each document's score is `folio eval --rank` of its prompt: the
#     template with the query and document put in, tokenized without BOS
#     (as /tokenize counts it, less the BOS), scored at its last position
#     (1e-4); results best first, usage the prompts' tokens, the documents'
#     texts returned;
#   - the same scores whatever the documents' order or company, on /rerank
#     and /v2/rerank, in TEI's form (texts, return_text), and from vLLM's
#     /v1/score (one text_1 with each text_2, or pairs);
#   - top_n, return_documents false, truncate_prompt_tokens;
#   - /classify (vLLM's): each input's class probabilities, labels from the
#     file, the first probability of a token-id input = folio eval --rank;
#   - bad requests are 400s naming the field; a model without a head 501.
. "$SRCDIR/lib.sh"

"$FOLIO" gen-model --preset tiny --seed 11 --arch qwen3 --reranker --dtype q8_0 -o "$T/r.gguf" \
  >/dev/null
start_daemon "$FOLIOD" --model "$T/r.gguf" --kv-dtype f32 --kv-blocks 256 --max-seqs 16 \
  --max-batch-tokens 128

Q="what do cats eat"
D='["cats eat fish and meat","the stock market fell today",{"text":"a cat purrs when it is happy"}]'
TXT='["cats eat fish and meat","the stock market fell today","a cat purrs when it is happy"]'
rr() { # PATH BODY: the 200 response's body
  local r
  r=$(req POST "$1" "$2")
  [ "$(status_of "$r")" = 200 ] || fail "$1 $2: $r"
  body_of "$r"
}
R=$(rr /v1/rerank "{\"query\":\"$Q\",\"documents\":$D}")
nbos=$(body_of "$(req POST /tokenize '{"prompt":""}')" | jq '.count')
total=0
for i in 0 1 2; do
  doc=$(jq -r ".[$i]" <<<"$TXT")
  text=$(printf 'Query: %s\nDocument: %s\nDoes the document answer the query? Answer:' "$Q" "$doc")
  toks=$(body_of "$(req POST /tokenize "$(jq -cn --arg p "$text" '{prompt: $p}')")" |
    jq -c --argjson k "$nbos" '.tokens[$k:]')
  total=$((total + $(jq length <<<"$toks")))
  want=$("$FOLIO" eval --model "$T/r.gguf" --kv-dtype f32 --json --rank --top 1 \
    --tokens "$(jq -r 'join(",")' <<<"$toks")" | jq '.rank_score')
  got=$(jq --argjson i "$i" '.results[] | select(.index == $i) | .relevance_score' <<<"$R")
  jq -en --argjson a "$got" --argjson b "$want" '($a - $b | fabs) < 1e-4' >/dev/null ||
    fail "document $i: score $got, folio eval --rank says $want"
  jq -e --argjson i "$i" --arg t "$doc" '.results[] | select(.index == $i) | .document.text == $t' \
    <<<"$R" >/dev/null || fail "document $i: text not returned"
done
jq -e --argjson n "$total" '(.id | startswith("rerank-")) and .model == "folio-synth-qwen3-tiny-s11"
  and .usage.prompt_tokens == $n and .usage.total_tokens == $n
  and ([.results[].index] | sort) == [0, 1, 2]
  and ([.results[].relevance_score] as $s | $s == ($s | sort | reverse))
  and ([.results[].relevance_score | . > 0 and . < 1] | all)' <<<"$R" >/dev/null ||
  fail "response: $R"
ok "3 documents: each score = folio eval --rank of its templated prompt; best first; usage $total tokens"

# /classify (vLLM's): each input's probabilities through the head, in order;
# the token-id input's first probability is folio eval --rank of it, the
# label the file's name of the likelier class
C=$(rr /classify "{\"input\":[$toks,\"cats eat fish\"]}")
jq -e --argjson w "$want" --argjson n "$(jq length <<<"$toks")" '(.id | startswith("classify-")) and
  .object == "list" and (.data | length) == 2 and ([.data[].index] == [0, 1]) and
  ([.data[] | .num_classes == 2 and (.probs | add - 1 | fabs) < 1e-6 and
    .label == (if .probs[0] >= .probs[1] then "yes" else "no" end)] | all) and
  ((.data[0].probs[0] - $w) | fabs) < 1e-4 and .usage.prompt_tokens > $n and
  .usage.completion_tokens == 0' <<<"$C" >/dev/null || fail "classify: $C (want p0 $want)"
[ "$(rr /v1/classify "{\"input\":$toks}" | jq -c '.data[0].probs')" = "$(jq -c '.data[0].probs' <<<"$C")" ] ||
  fail "/v1/classify differs"
ok "/classify: probabilities summing to 1, the first = folio eval --rank ($want), labels yes/no from the file"

scores() { jq -c '[.results | sort_by(.index)[].relevance_score]' <<<"$1"; }
S=$(scores "$R")
rev=$(rr /rerank "{\"query\":\"$Q\",\"documents\":$(jq -c 'reverse' <<<"$TXT")}")
close "$S" "$(jq -c 'reverse' <<<"$(scores "$rev")")" 1e-5 || fail "reversed documents score differently"
alone=$(rr /v2/rerank "{\"query\":\"$Q\",\"documents\":[\"the stock market fell today\"]}")
close "[$(jq '.[1]' <<<"$S")]" "$(scores "$alone")" 1e-5 || fail "a document alone scores differently"
tei=$(rr /rerank "{\"query\":\"$Q\",\"texts\":$TXT,\"return_text\":true}")
close "$S" "$(jq -c 'sort_by(.index) | map(.score)' <<<"$tei")" 1e-5 &&
  jq -e --argjson t "$TXT" 'type == "array" and (map(.text == $t[.index]) | all) and
    (map(has("relevance_score")) | any | not)' <<<"$tei" >/dev/null || fail "TEI form: $tei"
sc=$(rr /v1/score "{\"text_1\":\"$Q\",\"text_2\":$TXT}")
close "$S" "$(jq -c '[.data[].score]' <<<"$sc")" 1e-5 &&
  jq -e '.object == "list" and ([.data[] | .object == "score"] | all) and
    ([.data[].index] == [0, 1, 2])' <<<"$sc" >/dev/null || fail "/v1/score: $sc"
pairs=$(rr /score "{\"text_1\":[\"$Q\",\"something else\"],\"text_2\":$(jq -c '.[0:2]' <<<"$TXT")}")
jq -en --argjson s "$S" --argjson p "$pairs" '($p.data[0].score - $s[0] | fabs) < 1e-5 and
  ($p.data[1].score - $s[1] | fabs) > 1e-6' >/dev/null || fail "/score pairs: $pairs"
ok "the same scores reversed, alone, on /rerank and /v2/rerank, in TEI's form, and from /v1/score (one text_1, and pairs)"

top=$(rr /v1/rerank "{\"query\":\"$Q\",\"documents\":$D,\"top_n\":1,\"return_documents\":false}")
jq -e --argjson r "$R" '(.results | length) == 1 and .results[0].index == $r.results[0].index and
  (.results[0] | has("document") | not)' <<<"$top" >/dev/null || fail "top_n 1: $top"
long=$(jq -rn '[range(3000) | "word"] | join(" ")')
bad() { refused /v1/rerank "$@"; } # STATUS PARAM BODY
bad 400 documents "{\"query\":\"q\",\"documents\":[\"$long\"]}"
cut=$(rr /v1/rerank "{\"query\":\"q\",\"documents\":[\"$long\"],\"truncate_prompt_tokens\":100}")
jq -e '.usage.prompt_tokens == 100' <<<"$cut" >/dev/null || fail "truncate_prompt_tokens: $cut"
bad 400 query '{"documents":["a"]}'
bad 400 query '{"query":3,"documents":["a"]}'
bad 400 documents '{"query":"q","documents":[]}'
bad 400 documents '{"query":"q","documents":["a",7]}'
bad 400 documents '{"query":"q","documents":"a"}'
bad 400 texts '{"query":"q","documents":["a"],"texts":["b"]}'
bad 400 top_n '{"query":"q","documents":["a"],"top_n":-1}'
bad 404 model '{"query":"q","documents":["a"],"model":"other"}'
refused /v1/score 400 text_2 '{"text_1":["a","b"],"text_2":["c","d","e"]}'
ok "top_n 1, return_documents false, truncate_prompt_tokens; bad requests 400 naming the field, 404 model"
stop_daemon || fail "exit status"

start_daemon "$FOLIOD" --kv-blocks 64
r=$(req POST /v1/rerank '{"query":"q","documents":["a"]}')
[ "$(status_of "$r")" = 501 ] && body_of "$r" | jq -e '.error.message | test("not a reranker")' \
  >/dev/null || fail "the default model (no head): $r"
r=$(req POST /classify '{"input":"a"}')
[ "$(status_of "$r")" = 501 ] && body_of "$r" | jq -e '.error.message | test("not a classifier")' \
  >/dev/null || fail "/classify on the default model: $r"
stop_daemon || fail "exit status"
ok "a model without a classification head: 501"
