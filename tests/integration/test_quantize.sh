#!/usr/bin/env bash
# folio quantize as a user runs it (no daemon): every --type writes a file
# `folio eval` loads and runs, and the same bytes whatever --threads says
# (each block is quantized on its own, whichever thread takes its rows);
# bad arguments exit 2 with a message, a missing input exits 1 naming it.
. "$SRCDIR/lib.sh"
LOG=$T/quantize.log
"$FOLIO" gen-model --preset tiny --seed 5 -o "$T/in.gguf"
for t in f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k_s q3_k_m q3_k_l q4_k_m q5_k_m q6_k \
    iq4_nl iq4_xs; do
  "$FOLIO" quantize "$T/in.gguf" "$T/a.gguf" --type $t --threads 1 >"$LOG" 2>&1 ||
    fail "$t: quantize --threads 1 failed"
  "$FOLIO" quantize "$T/in.gguf" "$T/b.gguf" --type $t --threads 3 >"$LOG" 2>&1 ||
    fail "$t: quantize --threads 3 failed"
  cmp -s "$T/a.gguf" "$T/b.gguf" || fail "$t: --threads 1 and --threads 3 wrote different files"
  "$FOLIO" eval --model "$T/a.gguf" --tokens 1,450,4996 --json >"$LOG" 2>&1 ||
    fail "$t: folio eval cannot run the file"
  [ "$(grep -o '"id"' "$LOG" | wc -l)" = 10 ] || fail "$t: eval printed no top 10"
  ok "$t: same bytes on 1 and 3 threads, eval runs it"
done

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
rc=0
"$FOLIO" quantize "$T/none.gguf" "$T/c.gguf" --type q8_0 >"$LOG" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -qF "$T/none.gguf" "$LOG" || fail "missing input: exit $rc, $(cat "$LOG")"
[ ! -e "$T/c.gguf" ] || fail "missing input: an output was written"
ok "missing input refused: $(head -n 1 "$LOG")"
