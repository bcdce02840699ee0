#!/usr/bin/env bash
# tests/integration/gguf/run.sh — `folio gen-model` end to end:
#  1. usage errors exit 2, I/O errors exit 1 and name the file;
#  2. the same arguments give byte-identical files, another seed differs;
#  3. an independent GGUF reader, the npm package @huggingface/gguf, parses
#     the tiny model (f32 and f16) and agrees on architecture, keys, tensor
#     names, shapes, types and layout (check.mjs).
# The package is installed into NPM_DIR (default: a directory in the build
# tree); without node/npm or network the npm part is skipped (exit 77).
# Usage: run.sh FOLIO_BINARY [NPM_DIR]
set -euo pipefail
folio=$1
here=$(cd "$(dirname "$0")" && pwd)
npm_dir=${2:-${FOLIO_NPM_DIR:-$PWD/npm-gguf}}
tmp=$(mktemp -d /tmp/folio-gguf-it.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. exit codes
expect_exit() {
  local want=$1; shift
  local rc=0
  "$folio" gen-model "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ "$rc" -eq "$want" ] || fail "gen-model $* exited $rc, want $want: $(cat "$tmp/err")"
}
expect_exit 2
expect_exit 2 --preset huge --seed 1 -o "$tmp/x.gguf"
expect_exit 2 --preset tiny -o "$tmp/x.gguf"
expect_exit 2 --preset tiny --seed -3 -o "$tmp/x.gguf"
expect_exit 2 --preset tiny --seed 1x -o "$tmp/x.gguf"
expect_exit 2 --preset tiny --seed 1 --dtype q4 -o "$tmp/x.gguf"
expect_exit 2 --preset tiny --seed 1
expect_exit 2 --preset tiny --seed 1 --bogus -o "$tmp/x.gguf"
expect_exit 2 --preset tiny --seed 1 --vocab-size 511 -o "$tmp/x.gguf"
expect_exit 2 --preset tiny --seed 1 --vocab-size 1024 --vocab "$tmp/a.gguf" -o "$tmp/x.gguf"
expect_exit 0 --help
expect_exit 1 --preset tiny --seed 1 -o /nonexistent-dir/x.gguf
grep -q "/nonexistent-dir/x.gguf" "$tmp/err" || fail "I/O error does not name the file: $(cat "$tmp/err")"
expect_exit 1 --preset tiny --seed 1 --vocab "$tmp/missing.gguf" -o "$tmp/x.gguf"
grep -q "$tmp/missing.gguf" "$tmp/err" || fail "vocab error does not name the file: $(cat "$tmp/err")"
[ ! -e "$tmp/x.gguf" ] || fail "a failed run left an output file"

# 2. determinism
"$folio" gen-model --preset tiny --seed 42 -o "$tmp/a.gguf"
"$folio" gen-model --preset tiny --seed 42 -o "$tmp/b.gguf"
"$folio" gen-model --preset tiny --seed 43 -o "$tmp/c.gguf"
ha=$(sha256sum <"$tmp/a.gguf" | cut -d' ' -f1)
hb=$(sha256sum <"$tmp/b.gguf" | cut -d' ' -f1)
hc=$(sha256sum <"$tmp/c.gguf" | cut -d' ' -f1)
[ "$ha" = "$hb" ] || fail "same seed, different files ($ha vs $hb)"
[ "$ha" != "$hc" ] || fail "different seeds, same file"
echo "gen-model tiny seed 42: sha256 $ha (reproduced); seed 43 differs"
rm -f "$tmp/b.gguf" "$tmp/c.gguf"
"$folio" gen-model --preset tiny --seed 42 --dtype f16 -o "$tmp/h.gguf"
"$folio" gen-model --preset tiny --seed 42 --vocab-size 1000 -o "$tmp/v.gguf"
[ ! -e "$tmp/h.gguf.tmp" ] || fail "temporary file left behind"

# 3. @huggingface/gguf
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node/npm not installed; @huggingface/gguf check not run"
  exit 77
fi
if [ ! -f "$npm_dir/node_modules/@huggingface/gguf/package.json" ]; then
  mkdir -p "$npm_dir"
  if ! timeout 300 npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error \
      @huggingface/gguf@0.4.6 >"$tmp/npm.log" 2>&1; then
    echo "SKIP: npm install @huggingface/gguf failed (registry unreachable?):"
    tail -5 "$tmp/npm.log"
    exit 77
  fi
fi
cp "$here/check.mjs" "$npm_dir/check.mjs" # resolves the package from npm_dir
node "$npm_dir/check.mjs" "$tmp/a.gguf" f32
node "$npm_dir/check.mjs" "$tmp/h.gguf" f16
node "$npm_dir/check.mjs" "$tmp/v.gguf" f32 1000
