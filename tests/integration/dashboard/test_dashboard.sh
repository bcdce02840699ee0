#!/usr/bin/env bash
# tests/integration/dashboard/test_dashboard.sh — /dashboard in a real
# browser (headless Chromium driven by puppeteer-core).
#
#  1. GET /dashboard over the Unix socket and over --listen: 200,
#     text/html; charset=utf-8, the bytes of daemon/dashboard/dashboard.html.
#  2. foliod under a small load (streaming completions from three tenants:
#     the socket's uid -> default, two API keys over TCP): the page's block
#     map, read back from the canvas pixels, agrees with /v1/kv fetched right
#     after a page update; charts and the tenant table have content;
#     screenshot saved as $ARTIFACTS/dashboard.png; at 1024, 1400 and
#     1920 px no legend is cut (dashboard-WIDTH.png).
#  3. A static fake with 100,000 blocks (frozen): every aggregated cell shows
#     its run's majority state.
#
# Uses the real foliod when it is built with its engine, else foliod_fake
# (the same server, with the deterministic fake engine of the daemon tests).
# Installs Debian's chromium and npm puppeteer-core (no browser download)
# when missing; skips (77) only when they cannot be installed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
INTEG=$(cd "$HERE/.." && pwd)
SRCDIR=$INTEG
. "$INTEG/lib.sh"
NPM_DIR=${NPM_DIR:-$T/npm}
ARTIFACTS=${ARTIFACTS:-$T}
PAGE_SRC="$HERE/../../../daemon/dashboard/dashboard.html"

# --- browser and driver ------------------------------------------------------
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
  echo "installing chromium (apt-get)"
  SUDO=; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -q chromium >/dev/null 2>&1 ||
    { $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q chromium >/dev/null 2>&1; } || true
  [ -x "$CHROMIUM" ] || { echo "SKIP: chromium is not installed and cannot be installed"; exit 77; }
fi
if [ ! -d "$NPM_DIR/node_modules/puppeteer-core" ]; then
  mkdir -p "$NPM_DIR"
  (cd "$NPM_DIR" && [ -f package.json ] || echo '{"private":true}' >"$NPM_DIR/package.json")
  PUPPETEER_SKIP_DOWNLOAD=1 npm install --prefix "$NPM_DIR" --no-audit --no-fund --loglevel=error \
    puppeteer-core@24 >/dev/null 2>&1 ||
    { echo "SKIP: npm cannot install puppeteer-core"; exit 77; }
fi
cp "$HERE/browser_test.mjs" "$HERE/fake_server.mjs" "$NPM_DIR/"
export CHROMIUM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# --- which daemon --------------------------------------------------------------
BIN=$FOLIOD
probe=$("$FOLIOD" --socket "$T/probe.sock" --kv-blocks 16 2>&1 & p=$!; sleep 1; kill $p 2>/dev/null; wait $p 2>/dev/null) || true
if grep -q "not built in yet" <<<"$probe"; then
  echo "note: foliod has no engine yet: using foliod_fake (same server, fake engine)"
  BIN=$FOLIOD_FAKE
  export FOLIO_FAKE_STEP_US=15000
fi

PORT=$(free_port)
cat >"$T/tenants.ini" <<EOF
[foliod]
operator-key = key-op
[tenant.alice]
api_key = key-alice
weight = 2
[tenant.bob]
api_key = key-bob
max_kv_blocks = 48
max_running = 2
EOF
start_daemon "$BIN" --listen "127.0.0.1:$PORT" --kv-blocks 160 --block-size 16 --max-seqs 16 \
  --config "$T/tenants.ini"

# --- 1. the page, both ways ----------------------------------------------------
ct=$(curl -s --unix-socket "$SOCK" -o "$T/page_unix.html" -w '%{http_code} %{content_type}' http://x/dashboard)
[ "$ct" = "200 text/html; charset=utf-8" ] || fail "GET /dashboard on the socket: $ct"
cmp -s "$T/page_unix.html" "$PAGE_SRC" || fail "/dashboard differs from daemon/dashboard/dashboard.html"
ct=$(curl -s -u "op:key-op" -o "$T/page_tcp.html" -w '%{http_code} %{content_type}' "http://127.0.0.1:$PORT/dashboard")
[ "$ct" = "200 text/html; charset=utf-8" ] || fail "GET /dashboard on TCP: $ct"
cmp -s "$T/page_tcp.html" "$PAGE_SRC" || fail "/dashboard on TCP differs"
grep -Eq '<(script|link|img)[^>]+(src|href)="(https?:)?//' "$PAGE_SRC" && fail "the page loads an external resource"
ok "GET /dashboard: 200 text/html over the socket and TCP, the embedded bytes of dashboard.html"
# the README's way to a browser without --listen: a local TCP port proxied to the socket
if command -v socat >/dev/null; then
  SPORT=$(free_port)
  socat "TCP-LISTEN:$SPORT,fork,reuseaddr,bind=127.0.0.1" "UNIX-CONNECT:$SOCK" 2>/dev/null &
  SOCAT=$!
  for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$SPORT/health" && break; sleep 0.05; done
  curl -s -o "$T/page_socat.html" "http://127.0.0.1:$SPORT/dashboard" || true
  used=$(curl -s "http://127.0.0.1:$SPORT/v1/kv" | jq '.num_blocks' || true)
  kill $SOCAT; wait $SOCAT 2>/dev/null || true
  cmp -s "$T/page_socat.html" "$PAGE_SRC" && [ "$used" = 160 ] || fail "through socat: page or /v1/kv wrong"
  ok "through a socat proxy to the socket: the page and /v1/kv"
else
  echo "note: socat not installed; proxy path not exercised"
fi

# --- 2. under load ---------------------------------------------------------------
touch "$T/load.on"
load_loop() { # who: sock | KEY
  local who=$1 n=$2
  while [ -e "$T/load.on" ]; do
    local prompt
    prompt=$(python3 -c "import random; print(','.join(str(random.randint(3,500)) for _ in range(random.randint(20,120))))" 2>/dev/null)
    local body="{\"prompt\":[$prompt],\"max_tokens\":$n,\"stream\":true,\"ignore_eos\":true}"
    if [ "$who" = sock ]; then
      curl -sN --max-time 60 --unix-socket "$SOCK" -d "$body" http://x/v1/completions >/dev/null 2>&1 || true
    else
      curl -sN --max-time 60 -H "Authorization: Bearer $who" -H 'Content-Type: application/json' -d "$body" \
        "http://127.0.0.1:$PORT/v1/completions" >/dev/null 2>&1 || true
    fi
  done
}
LOADERS=()
for i in 1 2; do load_loop sock 120 & LOADERS+=($!); done
for i in 1 2; do load_loop key-alice 160 & LOADERS+=($!); done
for i in 1 2 3; do load_loop key-bob 100 & LOADERS+=($!); done
stop_load() { rm -f "$T/load.on"; for p in "${LOADERS[@]}"; do kill "$p" 2>/dev/null || true; done; wait "${LOADERS[@]}" 2>/dev/null || true; }
for _ in $(seq 1 100); do
  used=$(curl -s --unix-socket "$SOCK" http://x/v1/kv | jq '.blocks.used')
  [ "${used:-0}" -gt 0 ] && break
  sleep 0.1
done
[ "${used:-0}" -gt 0 ] || { stop_load; fail "no KV block in use under load"; }
DASH_KEY=key-op node "$NPM_DIR/browser_test.mjs" live "http://127.0.0.1:$PORT" "$T/dashboard.png" 3 ||
  { stop_load; fail "browser test under load"; }
mkdir -p "$ARTIFACTS"
cp "$T/dashboard.png" "$ARTIFACTS/dashboard.png"
for w in 1024 1400 1920; do cp "$T/dashboard-$w.png" "$ARTIFACTS/dashboard-$w.png"; done
ok "screenshots under load: $ARTIFACTS/dashboard.png, dashboard-{1024,1400,1920}.png"
stop_load
stop_daemon || fail "daemon exit status"

# --- 3. 100,000 blocks (static fake, frozen) ---------------------------------------
FPORT=$(free_port)
node "$NPM_DIR/fake_server.mjs" "$FPORT" "$PAGE_SRC" 100000 --frozen >"$T/fake.log" 2>&1 &
FPID=$!
for _ in $(seq 1 100); do grep -q READY "$T/fake.log" && break; sleep 0.05; done
node "$NPM_DIR/browser_test.mjs" fake "http://127.0.0.1:$FPORT" "$T/dashboard_100k.png" 3 ||
  { kill $FPID; fail "browser test with 100,000 blocks"; }
kill $FPID; wait $FPID 2>/dev/null || true
cp "$T/dashboard_100k.png" "$ARTIFACTS/dashboard_100k.png"
ok "100,000 blocks: aggregated cells match their runs"
