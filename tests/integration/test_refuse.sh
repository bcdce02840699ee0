#!/usr/bin/env bash
# A file foliod cannot run is refused at load with one error line naming
# what it lacks, never served: a tensor type (iq2_xxs), an architecture
# (gemma) and a BPE pre-tokenizer (an unknown name).  Each file is a
# gen-model file with one field patched in place (same length): the type
# of blk.0.ffn_gate.weight, the value of general.architecture, the value
# of tokenizer.ggml.pre of a file carrying falcon's vocabulary
# (tests/data/tokenizer).  Then the unpatched falcon file starts and
# serves text (its pre-tokenizer is known).
. "$SRCDIR/lib.sh"
vocab=$SRCDIR/../data/tokenizer/ggml-vocab-falcon.gguf
"$FOLIO" gen-model --preset tiny --seed 3 -o "$T/plain.gguf"
"$FOLIO" gen-model --preset tiny --seed 3 --vocab "$vocab" -o "$T/falcon.gguf"
# (GGUF: a string value is its u32 type 8, a u64 length, the bytes; a
# tensor info is its name, u32 n_dims, u64 ne[n_dims], u32 type)
patch() { # patch IN OUT PERL-SUBSTITUTION
  perl -0777 -pe "$3" "$1" >"$2"
  cmp -s "$1" "$2" && fail "patch $3 changed nothing"
  return 0
}
patch "$T/plain.gguf" "$T/type.gguf" \
  's/(blk\.0\.ffn_gate\.weight\x02\x00\x00\x00.{16})\x00\x00\x00\x00/${1}\x10\x00\x00\x00/s'
patch "$T/plain.gguf" "$T/arch.gguf" \
  's/(general\.architecture\x08\x00\x00\x00\x05\x00{7})llama/${1}gemma/'
patch "$T/falcon.gguf" "$T/pre.gguf" \
  's/(tokenizer\.ggml\.pre\x08\x00\x00\x00\x06\x00{7})falcon/${1}falcoX/'

refused() { # refused FILE NEEDLE
  local rc=0
  timeout 60 "$FOLIOD" --socket "$SOCK" --model "$1" >"$LOG" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "$1: exit $rc, want a refusal"
  local errs
  errs=$(grep -c " error " "$LOG" || true)
  [ "$errs" = 1 ] || fail "$1: $errs error lines, want one"
  grep " error " "$LOG" | grep -qF "$2" || fail "$1: the error does not name $2"
  [ ! -S "$SOCK" ] || fail "$1: a socket was left listening"
  ok "refused: $(grep ' error ' "$LOG" | sed 's/^.* error //')"
}
refused "$T/type.gguf" "unsupported tensor type 16 (iq2_xxs)"
refused "$T/arch.gguf" "'general.architecture' is 'gemma'"
refused "$T/pre.gguf" "pre-tokenizer 'falcoX'"

start_daemon "$FOLIOD" --model "$T/falcon.gguf" --kv-blocks 64
grep -q "tokenizer loaded" "$LOG" || fail "falcon's tokenizer not loaded"
r=$(req POST /v1/completions '{"prompt":"Hello world","max_tokens":3,"temperature":0,"ignore_eos":true}')
[ "$(status_of "$r")" = 200 ] || fail "falcon completion: $r"
stop_daemon || fail "exit status"
ok "the unpatched falcon file serves text"
