#!/usr/bin/env bash
# folio perplexity as a user runs it (no daemon), on the project's README
# as text: on the model's own greedy continuation (--tokens-file) every
# scored token is its top prediction, and the mean NLL is below the
# README's (the rows line up with the tokens they predict); a model
# against itself has KL divergence 0 and the same top token everywhere;
# quantized files move further from the F32 one the fewer their bits
# (Q8_0 < Q4_K_M < Q2_K), and a q8 KV cache less than Q4_K_M weights; the
# embedded model runs too; bad input exits 1 or 2 with a message naming it.
. "$SRCDIR/lib.sh"
LOG=$T/ppl.log
TEXT=$SRCDIR/../../README.md
"$FOLIO" gen-model --preset tiny --seed 5 -o "$T/f32.gguf"
for q in q8_0 q4_k_m q2_k; do
  "$FOLIO" quantize "$T/f32.gguf" "$T/$q.gguf" --type $q >/dev/null
done
field() { # field NAME: the number NAME in $LOG's JSON
  grep -o "\"$1\":[-0-9.e+]*" "$LOG" | cut -d: -f2
}
ppl() { # ppl ARGS...: runs folio perplexity --json on 3 chunks of 128
  "$FOLIO" perplexity --file "$TEXT" --ctx 128 --chunks 3 --json "$@" >"$LOG" 2>&1 ||
    fail "perplexity $*: $(cat "$LOG")"
}
"$FOLIO" eval --model "$T/f32.gguf" --tokens 1 --greedy 127 --json >"$LOG"
{ printf '1,'; grep -o '"greedy":\[[0-9,]*' "$LOG" | cut -d'[' -f2; } >"$T/greedy.txt"
[ "$(tr ',' '\n' <"$T/greedy.txt" | wc -l)" = 128 ] || fail "greedy: $(cat "$T/greedy.txt")"
"$FOLIO" perplexity --model "$T/f32.gguf" --tokens-file "$T/greedy.txt" --ctx 128 --json \
  >"$LOG" 2>&1 || fail "--tokens-file: $(cat "$LOG")"
[ "$(field top_hit)" = 1.000000 ] || fail "the model's own greedy text: $(cat "$LOG")"
greedy_nll=$(field nll)
ok "its own greedy continuation: every next token its top one, NLL $greedy_nll"
ppl --model "$T/f32.gguf" --base "$T/f32.gguf"
awk -v g="$greedy_nll" -v n="$(field nll)" 'BEGIN { exit !(g < n) }' ||
  fail "NLL on the README $(field nll), on greedy text $greedy_nll"
[ "$(field scored)" = 189 ] || fail "3 chunks of 128 score 3 x 63 tokens, not $(field scored)"
[ "$(field kld_max)" = 0.00000000 ] && [ "$(field same_top)" = 1.000000 ] ||
  fail "a model against itself: $(cat "$LOG")"
awk -v p="$(field ppl)" -v b="$(field base_ppl)" 'BEGIN { exit !(p > 1 && p == b) }' ||
  fail "perplexity $(field ppl), base $(field base_ppl)"
ok "against itself: KL 0, same top 100%, PPL $(field ppl)"
prev=0
for q in q8_0 q4_k_m q2_k; do
  ppl --model "$T/$q.gguf" --base "$T/f32.gguf"
  kld=$(field kld)
  awk -v k="$kld" -v p="$prev" 'BEGIN { exit !(k > p) }' || fail "$q: KL $kld, not above $prev"
  ok "$q: KL divergence from F32 $kld, same top $(field same_top)"
  prev=$kld
  [ $q = q8_0 ] && q8w=$kld
  [ $q = q4_k_m ] && q4=$kld
done
ppl --model "$T/f32.gguf" --base "$T/f32.gguf" --kv-dtype q8 --base-kv-dtype f32
awk -v k="$(field kld)" -v q="$q4" 'BEGIN { exit !(k > 0 && k < q) }' ||
  fail "q8 KV: KL $(field kld), want in (0, $q4)"
ok "q8 KV against f32 KV: KL $(field kld) (Q8_0 weights: $q8w)"

"$FOLIO" perplexity --model default --base default --file "$TEXT" --ctx 64 --chunks 1 --json \
  >"$LOG" 2>&1 || fail "the embedded model: $(cat "$LOG")"
[ "$(field scored)" = 31 ] && [ "$(field kld_max)" = 0.00000000 ] ||
  fail "the embedded model: $(cat "$LOG")"
ok "the embedded model (--model default) on its synthetic vocabulary"

refused() { # refused RC NEEDLE ARGS...
  local want=$1 needle=$2 rc=0
  shift 2
  "$FOLIO" perplexity "$@" >"$LOG" 2>&1 || rc=$?
  [ "$rc" = "$want" ] || fail "perplexity $*: exit $rc, want $want"
  grep -qF -- "$needle" "$LOG" || fail "perplexity $*: no '$needle' in: $(cat "$LOG")"
  ok "refused ($rc): $(tail -n 1 "$LOG")"
}
refused 2 "--model and one of --file and --tokens-file" --file "$TEXT"
refused 2 "--model and one of --file and --tokens-file" --model "$T/f32.gguf" --file "$TEXT" \
  --tokens-file "$T/greedy.txt"
printf '1,2,x\n' >"$T/bad.txt"
refused 1 "$T/bad.txt: not a token id at byte 4" --model "$T/f32.gguf" --tokens-file "$T/bad.txt"
printf '1 2 99999999\n' >"$T/bad.txt"
refused 1 "token 99999999 is outside the vocabulary" --model "$T/f32.gguf" --tokens-file "$T/bad.txt"
refused 2 "bad value for --ctx" --model "$T/f32.gguf" --file "$TEXT" --ctx 2
refused 1 "$T/none.txt: cannot open" --model "$T/f32.gguf" --file "$T/none.txt"
refused 1 "beyond the model's context" --model "$T/f32.gguf" --file "$TEXT" --ctx 1000000
printf 'a few words\n' >"$T/short.txt"
refused 1 "fewer than one chunk" --model "$T/f32.gguf" --file "$T/short.txt"
refused 1 "$T/none.gguf" --model "$T/none.gguf" --file "$TEXT"
