# tests/integration/lib.sh — helpers for the daemon integration tests
# (sourced).  Each test gets a temporary directory, starts a daemon on a
# socket inside it, and stops it on exit.
set -euo pipefail
T=$(mktemp -d /tmp/foliod-test.XXXXXX)
SOCK=$T/f.sock
DPID=
LOG=$T/foliod.log
cleanup() {
  if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then kill -KILL "$DPID" 2>/dev/null || true; fi
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; echo "--- daemon log (tail):" >&2; tail -n 30 "$LOG" >&2 || true; exit 1; }
ok() { echo "ok - $*"; }

# start_daemon BINARY ARGS... : starts it on $SOCK, waits for /health
# (up to 60 s: the warm-up step under ThreadSanitizer, scripts/tsan.sh,
# takes more than 10).
start_daemon() {
  local bin=$1; shift
  "$bin" --socket "$SOCK" --log-level debug "$@" >"$LOG" 2>&1 &
  DPID=$!
  for _ in $(seq 1 1200); do
    if curl -s --unix-socket "$SOCK" http://x/health >/dev/null 2>&1; then return 0; fi
    kill -0 "$DPID" 2>/dev/null || fail "daemon exited at start"
    sleep 0.05
  done
  fail "daemon did not come up"
}

stop_daemon() {
  [ -n "$DPID" ] || return 0
  kill -TERM "$DPID" 2>/dev/null || true
  local rc=0
  wait "$DPID" || rc=$?
  DPID=
  return $rc
}

# req METHOD PATH [BODY] : prints "STATUS\nBODY"
req() {
  local m=$1 p=$2 body=${3:-}
  if [ -n "$body" ]; then
    curl -s --unix-socket "$SOCK" -X "$m" -H 'Content-Type: application/json' \
      --data-binary "$body" -w '\n%{http_code}' "http://x$p"
  else
    curl -s --unix-socket "$SOCK" -X "$m" -w '\n%{http_code}' "http://x$p"
  fi
}
status_of() { tail -n1 <<<"$1"; }
body_of() { sed '$d' <<<"$1"; }
# refused PATH STATUS PARAM BODY: POST BODY to PATH is answered STATUS with
# an OpenAI error naming PARAM
refused() {
  local r
  r=$(req POST "$1" "$4")
  [ "$(status_of "$r")" = "$2" ] && body_of "$r" | jq -e --arg p "$3" '.error.param == $p' >/dev/null ||
    fail "$1 $4: want $2 naming $3, got $r"
}

# close A B TOL: two JSON arrays of numbers (null in the same places)
# within TOL of each other
close() {
  jq -en --argjson a "$1" --argjson b "$2" --argjson t "$3" \
    '($a|length) == ($b|length) and ([range($a|length) | . as $i |
      if $a[$i] == null then $b[$i] == null
      else ($b[$i] != null and (($a[$i] - $b[$i]) | fabs) <= $t) end] | all)' >/dev/null
}
# ids N SEED: N token ids in [10, 9000), a JSON array
ids() {
  jq -cn --argjson n "$1" --argjson s "$2" '[range($n) | ((. * 7919 + $s * 104729) % 8990) + 10]'
}

# locked DIR FN: runs FN holding DIR/.install-lock, so that of two tests
# running at once one installs into DIR and the other waits for it.
locked() {
  local dir=$1 fn=$2 lk rc=0
  mkdir -p "$dir"
  exec {lk}>"$dir/.install-lock"
  flock "$lk"
  "$fn" || rc=$?
  exec {lk}>&-
  return $rc
}

# ensure_openai: installs openai@6 + undici@7 into $NM (once); returns 1
# with a message when npm or the registry is unreachable.
NM=${NPM_DIR:-$PWD/npm-openai}
ensure_openai() { locked "$NM" install_openai; }
install_openai() {
  if [ -d "$NM/node_modules/openai" ] && [ -d "$NM/node_modules/undici" ]; then return 0; fi
  if ! command -v npm >/dev/null; then echo "npm not installed"; return 1; fi
  [ -f "$NM/package.json" ] || echo '{"private":true}' >"$NM/package.json"
  if ! (cd "$NM" && timeout 180 npm install --no-audit --no-fund --silent openai@6 undici@7 >"$T/npm.log" 2>&1); then
    echo "npm install openai@6 undici@7 failed (registry unreachable?):"; tail -n 5 "$T/npm.log"; return 1
  fi
}

# ensure_anthropic: installs @anthropic-ai/sdk into $NMA (once); returns 1
# with a message when npm or the registry is unreachable.
NMA=${NPM_ANTHROPIC_DIR:-$PWD/npm-anthropic}
ensure_anthropic() { locked "$NMA" install_anthropic; }
install_anthropic() {
  [ -d "$NMA/node_modules/@anthropic-ai/sdk" ] && return 0
  command -v npm >/dev/null || { echo "npm not installed"; return 1; }
  [ -f "$NMA/package.json" ] || echo '{"private":true}' >"$NMA/package.json"
  (cd "$NMA" && timeout 180 npm install --no-audit --no-fund --silent @anthropic-ai/sdk@0 >"$T/npm.log" 2>&1) ||
    { echo "npm install @anthropic-ai/sdk failed (registry unreachable?):"; tail -n 5 "$T/npm.log"; return 1; }
}

# ensure_sdks: the three client stacks for the structured-output tests
# (openai@6, ai@5 + @ai-sdk/openai-compatible@1, @langchain/openai@0.6 with
# @langchain/core@0.3: the last majors that run on Node 20; zod@3,
# zod-to-json-schema, ajv@8) into $NMS (once); returns 1 with a message
# when npm or the registry is unreachable.
NMS=${NPM_SDK_DIR:-$PWD/npm-sdks}
ensure_sdks() { locked "$NMS" install_sdks; }
install_sdks() {
  local want="openai undici ai @ai-sdk/openai-compatible @langchain/openai @langchain/core zod zod-to-json-schema ajv"
  local missing=0 p
  for p in $want; do [ -d "$NMS/node_modules/$p" ] || missing=1; done
  [ $missing = 0 ] && return 0
  if ! command -v npm >/dev/null; then echo "npm not installed"; return 1; fi
  [ -f "$NMS/package.json" ] || echo '{"private":true}' >"$NMS/package.json"
  if ! (cd "$NMS" && timeout 300 npm install --no-audit --no-fund --silent openai@6 undici@7 ai@5 \
      @ai-sdk/openai-compatible@1 @langchain/openai@0.6 @langchain/core@0.3 zod@3 \
      zod-to-json-schema@3 ajv@8 >"$T/npm.log" 2>&1); then
    echo "npm install of the SDKs failed (registry unreachable?):"; tail -n 5 "$T/npm.log"; return 1
  fi
}
