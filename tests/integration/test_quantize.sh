#!/usr/bin/env bash
# folio quantize as a user runs it (no daemon): every --type writes a file
# `folio eval` loads and runs, and the same bytes whatever --threads says
# (the chunks of rows are the same for any count and each block is
# quantized on its own, whichever thread takes its chunk: 2 and 3 threads
# deal the chunks out differently; checked on a 32-block, a K-quant and a
# byte type, the chunking being the same for all);
# the overrides (--pure, --output-tensor-type, --token-embedding-type,
# --leave-output-tensor, --tensor-type) give the types they say, counted
# by --dry-run's summary (tiny: 8 layers of 7 matrices whose ffn_down rows,
# 1376, are not a multiple of 256, token_embd and output, 17 norms);
# a quantized tensor is copied when its type stays and not requantized
# without --allow-requantize; `folio imatrix` writes an importance matrix
# that quantize --imatrix uses; bad arguments exit 2 with a message, a
# missing input exits 1 naming it.
. "$SRCDIR/lib.sh"
LOG=$T/quantize.log
"$FOLIO" gen-model --preset tiny --seed 5 --vocab-size 8192 -o "$T/in.gguf" # small embedding, output
for t in f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m q5_k_s \
    q5_k_m q6_k iq4_nl iq4_xs; do
  "$FOLIO" quantize "$T/in.gguf" "$T/a.gguf" --type $t --threads 2 >"$LOG" 2>&1 ||
    fail "$t: quantize --threads 2 failed"
  same=""
  case $t in # a byte type, a 32-block with a min, a K-quant mix
    q8_0 | q4_1 | q4_k_m)
      "$FOLIO" quantize "$T/in.gguf" "$T/b.gguf" --type $t --threads 3 >"$LOG" 2>&1 ||
        fail "$t: quantize --threads 3 failed"
      cmp -s "$T/a.gguf" "$T/b.gguf" || fail "$t: --threads 2 and --threads 3 wrote different files"
      same="same bytes on 2 and 3 threads, " ;;
  esac
  "$FOLIO" eval --model "$T/a.gguf" --tokens 1,450,4996 --json >"$LOG" 2>&1 ||
    fail "$t: folio eval cannot run the file"
  [ "$(grep -o '"id"' "$LOG" | wc -l)" = 10 ] || fail "$t: eval printed no top 10"
  ok "$t: ${same}eval runs it"
  [ $t != q4_k_m ] || cp "$T/a.gguf" "$T/k.gguf" # for the requantizing checks below
done

summary() { # summary WANT ARGS...: --dry-run's type counts are WANT
  local want=$1
  shift
  "$FOLIO" quantize "$T/in.gguf" "$T/c.gguf" "$@" --dry-run >"$LOG" 2>&1 || fail "$*: $(cat "$LOG")"
  grep -qF "tensors: $want;" "$LOG" || fail "$*: want '$want' in: $(cat "$LOG")"
  [ ! -e "$T/c.gguf" ] || fail "$*: --dry-run wrote a file"
  ok "$*: $want"
}
summary "F32 x 17 Q5_0 x 4 Q8_0 x 4 Q4_K x 45 Q6_K x 5" --type q4_k_m
summary "F32 x 17 Q5_0 x 8 Q4_K x 50" --type q4_k_m --pure
# IQ4: attn_v Q5_K (4 query heads per KV head), layer 0's ffn_down Q5_K ->
# Q5_1 (its rows), the rest IQ4_XS or IQ4_NL where rows are not 256s: the
# counts llama-quantize gives this file
summary "F32 x 17 Q5_1 x 1 Q5_K x 8 Q6_K x 1 IQ4_NL x 7 IQ4_XS x 41" --type iq4_xs
# Q2_K and Q3_K rows that are not 256s fall back to Q4_0; attn_v Q4_K (4
# query heads per KV head); q4_k_s: attn_v of layers 0-3 and layer 0's
# ffn_down Q5_K (that one Q5_1 by its rows); llama-quantize's counts too
summary "F32 x 17 Q4_0 x 8 Q2_K x 33 Q3_K x 8 Q4_K x 8 Q6_K x 1" --type q2_k
summary "F32 x 17 Q5_0 x 7 Q5_1 x 1 Q4_K x 45 Q5_K x 4 Q6_K x 1" --type q4_k_s
summary "F32 x 17 Q5_1 x 8 Q5_K x 49 Q6_K x 1" --type q5_k_s
summary "F32 x 17 F16 x 1 Q4_0 x 16 Q8_0 x 41" --type q8_0 --tensor-type 'ffn_(gate|up)=q4_0' \
  --output-tensor-type f16
summary "F32 x 18 Q8_0 x 56 Q6_K x 1" --type q8_0 --token-embedding-type q6_k --leave-output-tensor
summary "F32 x 17 Q8_0 x 2 IQ4_NL x 56" --type iq4_xs --output-tensor-type q8_0 \
  --tensor-type 'blk\.=iq4_nl' --tensor-type 'ffn=f16' --token-embedding-type q8_0
summary "F32 x 17 Q8_0 x 9 Q6_K x 49" --type q6_k --tensor-type 'token=q8_0'

# a file's own types are kept byte for byte, and not requantized unasked
"$FOLIO" quantize "$T/k.gguf" "$T/k2.gguf" --type q4_k_m >"$LOG" 2>&1 || fail "$(cat "$LOG")"
cmp -s "$T/k.gguf" "$T/k2.gguf" || fail "q4_k_m of a q4_k_m file changed it"
rc=0
"$FOLIO" quantize "$T/k.gguf" "$T/c.gguf" --type q4_0 >"$LOG" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -qF "is Q4_K already" "$LOG" && grep -qF -- "--allow-requantize" "$LOG" ||
  fail "requantize: exit $rc, $(cat "$LOG")"
[ ! -e "$T/c.gguf" ] || fail "a refused requantize wrote a file"
"$FOLIO" quantize "$T/k.gguf" "$T/c.gguf" --type q4_0 --allow-requantize >"$LOG" 2>&1 ||
  fail "--allow-requantize: $(cat "$LOG")"
"$FOLIO" quantize "$T/k.gguf" "$T/c.gguf" --type f16 >"$LOG" 2>&1 || fail "to f16: $(cat "$LOG")"
rm -f "$T/c.gguf"
ok "same type copied, requantizing refused without --allow-requantize"

# an importance matrix: `folio imatrix` on a text (this repository's
# README) writes llama.cpp's imatrix GGUF layout: an in_sum2 of the row
# length and a count of the tokens run for every matrix of the 8 layers
# (7 each) and output.weight; quantize --imatrix weights 53 of the 54
# K-quant and Q5_0 matrices of a q4_k_m (token_embd has no entry), the same bytes on
# 2 and 3 threads, other bytes than without it, and eval runs the file
"$FOLIO" imatrix --model "$T/in.gguf" --file "$SRCDIR/../../README.md" --ctx 128 --chunks 3 \
  -o "$T/im.gguf" >"$LOG" 2>&1 || fail "imatrix: $(cat "$LOG")"
grep -q "wrote $T/im.gguf: 3 chunks of 128 tokens" "$LOG" || fail "imatrix output: $(cat "$LOG")"
for n in blk.0.attn_q blk.7.ffn_down output; do
  grep -aq "$n.weight.in_sum2" "$T/im.gguf" && grep -aq "$n.weight.counts" "$T/im.gguf" ||
    fail "imatrix: no $n entry"
done
grep -aq "general.type" "$T/im.gguf" && grep -aq "imatrix.chunk_count" "$T/im.gguf" || fail "imatrix keys"
"$FOLIO" quantize "$T/in.gguf" "$T/a.gguf" --type q4_k_m --imatrix "$T/im.gguf" --threads 2 >"$LOG" 2>&1 ||
  fail "quantize --imatrix: $(cat "$LOG")"
grep -qF "importance weights for 53 of the 54 matrices whose types use them" "$LOG" || fail "$(cat "$LOG")"
"$FOLIO" quantize "$T/in.gguf" "$T/b.gguf" --type q4_k_m --imatrix "$T/im.gguf" --threads 3 >/dev/null
cmp -s "$T/a.gguf" "$T/b.gguf" || fail "quantize --imatrix: 2 and 3 threads wrote different files"
cmp -s "$T/a.gguf" "$T/k.gguf" && fail "quantize --imatrix wrote the bytes it writes without"
grep -aq "quantize.imatrix.file" "$T/a.gguf" || fail "no quantize.imatrix.file key"
# Q5_1 (a block min of either sign) weighs its errors too: 57 of the 58
# matrices (56 Q5_1 and output's Q6_K; token_embd has no entry)
"$FOLIO" quantize "$T/in.gguf" "$T/b.gguf" --type q5_1 --imatrix "$T/im.gguf" >"$LOG" 2>&1 ||
  fail "quantize q5_1 --imatrix: $(cat "$LOG")"
grep -qF "importance weights for 57 of the 58 matrices whose types use them" "$LOG" || fail "$(cat "$LOG")"
# mixes that differ under an importance matrix, as llama-quantize's do:
# q4_0's first-eighth ffn_down Q4_1, iq4_xs's left IQ4 (without: Q5_K ->
# Q5_1 above); q2_k_s only with one
summary "F32 x 17 Q4_0 x 56 Q4_1 x 1 Q6_K x 1" --type q4_0 --imatrix "$T/im.gguf"
summary "F32 x 17 Q5_K x 8 Q6_K x 1 IQ4_NL x 8 IQ4_XS x 41" --type iq4_xs --imatrix "$T/im.gguf"
summary "F32 x 17 Q4_0 x 7 Q5_0 x 1 Q2_K x 41 Q4_K x 8 Q6_K x 1" --type q2_k_s --imatrix "$T/im.gguf"
rc=0
"$FOLIO" quantize "$T/in.gguf" "$T/c.gguf" --type q2_k_s >"$LOG" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -qF -- "--imatrix" "$LOG" || fail "q2_k_s without --imatrix: exit $rc, $(cat "$LOG")"
[ ! -e "$T/c.gguf" ] || fail "a refused q2_k_s wrote a file"
"$FOLIO" eval --model "$T/a.gguf" --tokens 1,450,4996 --json >"$LOG" 2>&1 || fail "eval: $(cat "$LOG")"
rc=0
"$FOLIO" quantize "$T/in.gguf" "$T/c.gguf" --type q4_k_m --imatrix "$T/none.gguf" >"$LOG" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -qF "$T/none.gguf" "$LOG" || fail "missing imatrix: exit $rc, $(cat "$LOG")"
rc=0
"$FOLIO" quantize "$T/in.gguf" "$T/c.gguf" --type q4_k_m --imatrix "$T/in.gguf" >"$LOG" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -qF "no importance matrix entries" "$LOG" || fail "model as imatrix: exit $rc, $(cat "$LOG")"
[ ! -e "$T/c.gguf" ] || fail "a refused --imatrix wrote a file"
rc=0
"$FOLIO" imatrix --model "$T/in.gguf" -o "$T/c.gguf" >"$LOG" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -qF -- "--file" "$LOG" || fail "imatrix without a text: exit $rc, $(cat "$LOG")"
rc=0
"$FOLIO" imatrix --model "$T/none.gguf" --file "$SRCDIR/../../README.md" -o "$T/c.gguf" >"$LOG" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -qF "$T/none.gguf" "$LOG" || fail "imatrix, missing model: exit $rc, $(cat "$LOG")"
echo "once upon a time" >"$T/short.txt"
rc=0
"$FOLIO" imatrix --model "$T/in.gguf" --file "$T/short.txt" -o "$T/c.gguf" >"$LOG" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -qF "fewer than one chunk" "$LOG" || fail "imatrix, short text: exit $rc, $(cat "$LOG")"
[ ! -e "$T/c.gguf" ] || fail "a failed imatrix wrote a file"
ok "imatrix: entries for every matrix; quantize --imatrix weights 53 of 54 (q5_1: 57 of 58), same bytes on 2 and 3 threads"

usage_error() { # usage_error NEEDLE ARGS...
  local needle=$1 rc=0
  shift
  "$FOLIO" quantize "$@" >"$LOG" 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "quantize $*: exit $rc, want 2"
  grep -qF -- "$needle" "$LOG" || fail "quantize $*: no '$needle' in: $(cat "$LOG")"
  ok "quantize $*: usage error"
}
usage_error "--threads must be 1..1024, not '0'" "$T/in.gguf" "$T/c.gguf" --type q8_0 --threads 0
usage_error "--threads must be 1..1024, not 'x'" "$T/in.gguf" "$T/c.gguf" --type q8_0 --threads x
usage_error "--type must be one of" "$T/in.gguf" "$T/c.gguf" --type q9_9
usage_error "bad pattern" "$T/in.gguf" "$T/c.gguf" --type q8_0 --tensor-type 'ffn_(=q4_0'
usage_error "the type must be one of" "$T/in.gguf" "$T/c.gguf" --type q8_0 --tensor-type ffn=q9
usage_error "--output-tensor-type must be one of" "$T/in.gguf" "$T/c.gguf" --type q8_0 \
  --output-tensor-type q4_k_m
usage_error "--output-tensor-type needs a value" "$T/in.gguf" "$T/c.gguf" --type q8_0 \
  --output-tensor-type
rc=0
"$FOLIO" quantize "$T/none.gguf" "$T/c.gguf" --type q8_0 >"$LOG" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -qF "$T/none.gguf" "$LOG" || fail "missing input: exit $rc, $(cat "$LOG")"
[ ! -e "$T/c.gguf" ] || fail "missing input: an output was written"
ok "missing input refused: $(head -n 1 "$LOG")"
